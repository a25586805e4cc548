//! The PostgreSQL wire protocol front end (pgwire), one [`Session`] per connection.
//!
//! ```text
//!  TcpListener ─► accept ─► process_socket(handlers of this connection)
//!                            ├─ startup: no authentication, server parameters
//!                            ├─ simple query  ─► Session::execute per statement
//!                            ├─ extended query (Parse/Bind/Describe/Execute, $n parameters)
//!                            └─ COPY FROM STDIN data ─► Session::copy_data / copy_done
//! ```

mod handler;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::engine::Engine;
use crate::error::Result;

/// Accepts connections on `listener` until `shutdown` resolves; each connection runs in its
/// own task with its own session. Then it stops listening, closes every connection and waits
/// for their tasks to end; the engine is left running (see [`Engine::shutdown`]).
///
/// # Errors
/// I/O errors of the listener.
pub async fn run(
    listener: TcpListener,
    engine: Arc<Engine>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    let addr = listener.local_addr()?;
    info!(%addr, "listening");
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let (socket, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                let _ = socket.set_nodelay(true);
                let engine = Arc::clone(&engine);
                connections.spawn(serve(socket, peer, engine));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let open = connections.len();
    connections.shutdown().await;
    info!(%addr, closed = open, "stopped listening; connections closed");
    Ok(())
}

async fn serve(socket: tokio::net::TcpStream, peer: SocketAddr, engine: Arc<Engine>) {
    let handlers = match handler::Handlers::new(engine) {
        Ok(h) => Arc::new(h),
        Err(e) => {
            warn!(%peer, error = %e, "cannot create session");
            return;
        }
    };
    tracing::debug!(%peer, "connection opened");
    if let Err(e) = pgwire::tokio::process_socket(socket, None, handlers).await {
        tracing::debug!(%peer, error = %e, "connection closed with error");
    }
}

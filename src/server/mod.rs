//! The PostgreSQL wire protocol front end (pgwire), one [`Session`] per connection.
//!
//! ```text
//!  TcpListener ─► accept
//!   (TLS if asked) ─► process_socket(handlers of this connection)
//!                            ├─ startup: database and role checks, trust or SCRAM-SHA-256
//!                            │  (by the client's address, see [`auth`]), server parameters
//!                            ├─ simple query  ─► Session::execute per statement
//!                            ├─ extended query (Parse/Bind/Describe/Execute, $n parameters)
//!                            └─ COPY FROM STDIN data ─► Session::copy_data / copy_done
//! ```

pub mod auth;
pub(crate) mod handler;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tracing::{info, warn};

pub use auth::{AuthMethod, ServerConfig};

use crate::engine::Engine;
use crate::error::Result;

/// How long connections get at shutdown to be told and closed before their tasks are aborted.
/// Closing a connection waits for a write its statement left running and undoes its open
/// transaction (as PostgreSQL's fast shutdown rolls back each backend's), which takes as long
/// as the write and its undo: 2 s aborted the undo of a block whose `INSERT` of 2,000,000
/// rows was still writing, and its first rows stayed.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// [`run_with`] the default [`ServerConfig`]: trust on loopback, SCRAM-SHA-256 elsewhere,
/// no TLS.
///
/// # Errors
/// I/O errors of the listener.
pub async fn run(
    listener: TcpListener,
    engine: Arc<Engine>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    run_with(listener, engine, ServerConfig::default(), shutdown).await
}

/// Accepts connections on `listener` until `shutdown` resolves; each connection runs in its
/// own task with its own session. Then it stops listening and closes every connection, each
/// with PostgreSQL's `FATAL 57P01 terminating connection due to administrator command` (as a
/// PostgreSQL server does on a fast shutdown), and waits for their tasks to end; the engine is
/// left running (see [`Engine::shutdown`]).
///
/// # Errors
/// I/O errors of the listener.
pub async fn run_with(
    listener: TcpListener,
    engine: Arc<Engine>,
    config: ServerConfig,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    let addr = listener.local_addr()?;
    info!(%addr, local_auth = ?config.local_auth, host_auth = ?config.host_auth, tls = config.tls.is_some(), "listening");
    let mut connections = tokio::task::JoinSet::new();
    let cancel_keys = Arc::new(handler::CancelKeys::default());
    let (closing, closed) = tokio::sync::watch::channel(false);
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
                let method = config.method_for(&peer);
                connections.spawn(serve(socket, peer, engine, method, config.tls.clone(), Arc::clone(&cancel_keys), closed.clone()));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let open = connections.len();
    closing.send_replace(true);
    cancel_keys.cancel_all();
    let drained = tokio::time::timeout(CLOSE_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        connections.shutdown().await;
    }
    info!(%addr, closed = open, "stopped listening; connections closed");
    Ok(())
}

/// Resolves once the server starts closing connections (or `run` is gone).
async fn until_closing(closing: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = closing.wait_for(|c| *c).await;
}

/// The ErrorResponse a connection gets when the server shuts down (PostgreSQL protocol,
/// "Message Formats": `E`, length, then fields of a code byte and a NUL-terminated string).
fn admin_shutdown_message() -> Vec<u8> {
    let mut fields = Vec::new();
    for (code, value) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', "57P01"),
        (b'M', "terminating connection due to administrator command"),
    ] {
        fields.push(code);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut message = vec![b'E'];
    message.extend_from_slice(&(fields.len() as u32 + 4).to_be_bytes());
    message.extend_from_slice(&fields);
    message
}

/// A second handle on a connection's socket, to tell the client about a shutdown after the
/// protocol's task is stopped; `None` when the socket cannot be duplicated.
fn duplicate(
    socket: tokio::net::TcpStream,
) -> std::io::Result<(tokio::net::TcpStream, Option<tokio::net::TcpStream>)> {
    let socket = socket.into_std()?;
    let copy = socket
        .try_clone()
        .ok()
        .and_then(|c| tokio::net::TcpStream::from_std(c).ok());
    Ok((tokio::net::TcpStream::from_std(socket)?, copy))
}

/// The first 8 bytes of PostgreSQL's `SSLRequest` and `GSSENCRequest` messages share this
/// length and code prefix (protocol "Message Formats": length 8, code 1234 in the high half).
const ENCRYPTION_REQUEST_PREFIX: [u8; 6] = [0, 0, 0, 8, 0x04, 0xd2];

/// Whether the client's first bytes ask for encryption: a TLS record (direct TLS) or an
/// `SSLRequest` / `GSSENCRequest`. Peeks without consuming; false when too few bytes came.
async fn asks_for_encryption(socket: &tokio::net::TcpStream) -> bool {
    let mut first = [0u8; 8];
    match socket.peek(&mut first).await {
        Ok(n) if n >= 1 && first[0] == 0x16 => true,
        Ok(8) => first[..6] == ENCRYPTION_REQUEST_PREFIX,
        _ => false,
    }
}

async fn serve(
    socket: tokio::net::TcpStream,
    peer: SocketAddr,
    engine: Arc<Engine>,
    method: AuthMethod,
    tls: Option<pgwire::tokio::TlsAcceptor>,
    cancel_keys: Arc<handler::CancelKeys>,
    mut closing: tokio::sync::watch::Receiver<bool>,
) {
    let handlers = match handler::Handlers::new(engine, method, cancel_keys) {
        Ok(h) => Arc::new(h),
        Err(e) => {
            warn!(%peer, error = %e, "cannot create session");
            return;
        }
    };
    let (socket, copy) = match duplicate(socket) {
        Ok(s) => s,
        Err(e) => {
            warn!(%peer, error = %e, "cannot set up the connection");
            return;
        }
    };
    tracing::debug!(%peer, "connection opened");
    // Set once the client asks for encryption: the shutdown message is then not written in
    // plain text into the encrypted stream.
    let encrypted = std::sync::atomic::AtomicBool::new(false);
    let protocol = async {
        if tls.is_some() && asks_for_encryption(&socket).await {
            encrypted.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        pgwire::tokio::process_socket(socket, tls, Arc::clone(&handlers)).await
    };
    tokio::select! {
        served = protocol => {
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "connection closed with error");
            }
        }
        () = until_closing(&mut closing) => {
            handlers.interrupt_statement();
            // The protocol's task is dropped between messages or, rarely, in the middle of
            // one; the client is told either way (unless its stream is encrypted), and the
            // socket is closed.
            if let Some(mut copy) = copy {
                use tokio::io::AsyncWriteExt;
                if !encrypted.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = copy.write_all(&admin_shutdown_message()).await;
                }
                let _ = copy.shutdown().await;
            }
        }
    }
    handlers.close().await;
}

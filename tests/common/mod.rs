//! Test support: an in-process Weir server on an ephemeral port, a tokio-postgres client, and
//! helpers for tests that run the `weir` binary.

#![allow(dead_code)]

pub mod pg;
pub mod slt;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// A running server; dropping it stops the server.
pub struct TestServer {
    pub addr: SocketAddr,
    pub engine: Arc<weir::Engine>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl TestServer {
    /// Starts a server over `dir` with a short barrier interval.
    pub async fn start(dir: &Path) -> TestServer {
        let mut config = weir::engine::EngineConfig::new(dir);
        config.barrier_interval = Duration::from_millis(50);
        Self::start_with(config).await
    }

    /// Starts a server with a full engine configuration.
    pub async fn start_with(config: weir::engine::EngineConfig) -> TestServer {
        let engine = weir::open_with(config).await.expect("open engine");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel();
        let e = Arc::clone(&engine);
        let task = tokio::spawn(async move {
            weir::server::run(listener, e, async {
                let _ = rx.await;
            })
            .await
            .expect("server");
        });
        TestServer {
            addr,
            engine,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Stops the server, waits for it and shuts the engine down (its threads are joined).
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        self.engine.shutdown().await.expect("engine shutdown");
    }

    /// Stops the server and drops the engine without shutting it down: no last snapshot of
    /// the tables is taken, as after a crash (the changelog holds what came after the newest
    /// snapshot).
    pub async fn stop_without_shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        let mut engine = Arc::clone(&self.engine);
        drop(self);
        // Wait for the last reference (a barrier tick holds one while it runs): dropping it
        // closes the engine and its data directory's lock.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match Arc::try_unwrap(engine) {
                Ok(e) => {
                    drop(e);
                    return;
                }
                Err(e) => engine = e,
            }
            assert!(Instant::now() < deadline, "the engine is still referenced");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A connected client.
    pub async fn client(&self) -> tokio_postgres::Client {
        connect(self.addr).await
    }
}

/// Connects a tokio-postgres client to `addr`.
pub async fn connect(addr: SocketAddr) -> tokio_postgres::Client {
    let mut config = tokio_postgres::Config::new();
    config
        .host(addr.ip().to_string())
        .port(addr.port())
        .user("weir")
        .dbname("weir");
    let (client, conn) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Connects to a `weir` binary starting on `port`, retrying until it accepts; panics if the
/// process exits meanwhile or does not come up within 60 s.
pub async fn connect_child(port: u16, child: &mut Child) -> tokio_postgres::Client {
    connect_child_logging(port, child, None).await
}

/// [`connect_child`], naming in its panic the last lines of `log`, the server's log, when the
/// process exits during start.
pub async fn connect_child_logging(
    port: u16,
    child: &mut Child,
    log: Option<&std::path::Path>,
) -> tokio_postgres::Client {
    let start = Instant::now();
    loop {
        let mut config = tokio_postgres::Config::new();
        config
            .host("127.0.0.1")
            .port(port)
            .user("weir")
            .dbname("weir");
        if let Ok((client, conn)) = config.connect(tokio_postgres::NoTls).await {
            tokio::spawn(async move {
                let _ = conn.await;
            });
            return client;
        }
        if let Ok(Some(status)) = child.try_wait() {
            let tail = log
                .and_then(|l| std::fs::read_to_string(l).ok())
                .map(|text| {
                    let lines: Vec<&str> = text.lines().collect();
                    lines[lines.len().saturating_sub(20)..].join("\n")
                })
                .unwrap_or_default();
            panic!("server exited during start: {status}\n{tail}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "server never came up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs a simple-protocol query and returns rows of text (NULL as "NULL").
pub async fn query_text(client: &tokio_postgres::Client, sql: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for m in client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    {
        if let tokio_postgres::SimpleQueryMessage::Row(r) = m {
            out.push(
                (0..r.len())
                    .map(|i| r.get(i).unwrap_or("NULL").to_string())
                    .collect(),
            );
        }
    }
    out
}

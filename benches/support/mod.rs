//! Helpers shared by the end-to-end benches.

// Each bench compiles this module on its own and uses a part of it.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A field of `/proc/self/status` (`VmRSS:`, `VmHWM:`) in MiB.
pub fn rss_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// The median of `samples`, in ms.
pub fn median_ms(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    let n = samples.len();
    let mid = if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2
    };
    mid.as_secs_f64() * 1000.0
}

/// The value of environment variable `name` as a number, or `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The first column of the first row of `sql` as a `bigint`; 0 without a row or for NULL.
pub async fn scalar(client: &tokio_postgres::Client, sql: &str) -> i64 {
    client
        .query_opt(sql, &[])
        .await
        .expect(sql)
        .and_then(|r| r.get::<_, Option<i64>>(0))
        .unwrap_or(0)
}

/// The last completed checkpoint's state bytes of `job` (0 before the first).
pub async fn checkpoint_bytes(client: &tokio_postgres::Client, job: &str) -> i64 {
    scalar(
        client,
        &format!(
            "SELECT state_bytes FROM weir_catalog.checkpoints WHERE job = '{job}' \
             AND status = 'COMPLETED' ORDER BY checkpoint_id DESC LIMIT 1"
        ),
    )
    .await
}

/// The change of a sampled series from its first sample at or after 60 s to its last, as
/// `+12.3%` (`n/a` without such samples or from zero): `samples` are (seconds, value).
pub fn change_after_first_minute(samples: impl IntoIterator<Item = (u64, f64)>) -> String {
    let samples: Vec<(u64, f64)> = samples.into_iter().collect();
    let after_first_minute = samples.iter().find(|s| s.0 >= 60);
    match (after_first_minute, samples.last()) {
        (Some(a), Some(b)) if a.1 > 0.0 => format!("{:+.1}%", (b.1 / a.1 - 1.0) * 100.0),
        _ => "n/a".into(),
    }
}

/// A deterministic pseudo-random permutation step (splitmix64), for keys to probe.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A Weir server started in-process on a free port, with one client connected.
pub struct Server {
    /// The engine.
    pub engine: Arc<weir::Engine>,
    /// A connected client.
    pub client: tokio_postgres::Client,
    conn: tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<weir::Result<()>>,
}

impl Server {
    /// Opens an engine on `dir` (barrier every 250 ms), serves it and connects.
    pub async fn start(dir: &Path) -> Server {
        Self::start_with(weir::engine::EngineConfig::new(dir)).await
    }

    /// Opens an engine in a fresh directory `<temp>/<prefix>-<pid>` with a memory limit of
    /// `memory_limit` bytes, serves it and connects; returns the directory too (remove it
    /// after [`Server::stop`]).
    pub async fn start_in_temp(prefix: &str, memory_limit: u64) -> (Server, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut config = weir::engine::EngineConfig::new(&dir);
        config.memory_limit = memory_limit;
        (Self::start_with(config).await, dir)
    }

    /// Opens an engine with `config` (barrier every 250 ms), serves it and connects.
    pub async fn start_with(mut config: weir::engine::EngineConfig) -> Server {
        config.barrier_interval = Duration::from_millis(250);
        let engine = weir::open_with(config).await.expect("open");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(weir::server::run(listener, engine.clone(), async move {
            let _ = stopped.await;
        }));
        let mut config = tokio_postgres::Config::new();
        config
            .host("127.0.0.1")
            .port(addr.port())
            .user("weir")
            .dbname("weir");
        let (client, conn) = config
            .connect(tokio_postgres::NoTls)
            .await
            .expect("connect");
        let conn = tokio::spawn(conn);
        Server {
            engine,
            client,
            conn,
            stop,
            server,
        }
    }

    /// Disconnects, stops the server and shuts the engine down (threads joined).
    pub async fn stop(self) {
        drop(self.client);
        let _ = self.conn.await;
        let _ = self.stop.send(());
        let _ = self.server.await;
        self.engine.shutdown().await.expect("shutdown");
    }
}

/// Loads rows `0..rows` into table `t` by `COPY t FROM STDIN CSV`, 500,000 rows per COPY;
/// `line(id, buf)` appends row `id`'s CSV line.
pub async fn copy_rows(
    client: &tokio_postgres::Client,
    rows: u64,
    line: impl Fn(u64, &mut String),
) {
    use futures::SinkExt;
    const CHUNK: u64 = 500_000;
    let mut start = 0;
    while start < rows {
        let end = (start + CHUNK).min(rows);
        let sink = client.copy_in("COPY t FROM STDIN CSV").await.expect("copy");
        futures::pin_mut!(sink);
        let mut buf = String::new();
        for id in start..end {
            line(id, &mut buf);
            if buf.len() > (1 << 20) {
                sink.send(bytes::Bytes::from(std::mem::take(&mut buf)))
                    .await
                    .expect("send");
            }
        }
        sink.send(bytes::Bytes::from(buf)).await.expect("send");
        sink.finish().await.expect("finish");
        start = end;
    }
}

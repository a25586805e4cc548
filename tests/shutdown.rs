//! Clean shutdown of the real server binary: SIGTERM (or SIGINT) while views take checkpoints
//! every 100 ms stops the server with exit status 0, with no panic or abort at process exit
//! (every thread of the engine is joined before the databases close), and a restart on the
//! same data directory finds every acknowledged write and the views intact.

mod common;

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{connect_child, free_port, query_text};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Starts `weir` over `<dir>/data` on `port`, its log appended to `<dir>/server.log`.
fn start(dir: &Path, port: u16) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .unwrap();
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
            dir.join("data").to_str().unwrap(),
            "--barrier-interval-ms",
            "50",
        ])
        // Widen the checkpoints' async phase so that signals land inside it (test builds only).
        .env("WEIR_FAILPOINTS", "checkpoint::async_phase=sleep(20)")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start weir")
}

/// Sends `signal` (`TERM`, `INT`) to the server.
fn send_signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} failed: {status}");
}

/// Waits for the server to exit; kills it and fails after `within`.
fn wait_exit(child: &mut Child, within: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if start.elapsed() > within {
            child.kill().ok();
            child.wait().ok();
            panic!("the server did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Stops the server with `signal` and checks a clean exit; returns the log of this run.
fn stop(dir: &Path, child: &mut Child, signal: &str, log_from: usize) -> String {
    send_signal(child, signal);
    let status = wait_exit(child, Duration::from_secs(10));
    let log = std::fs::read_to_string(dir.join("server.log")).unwrap();
    let run = &log[log_from.min(log.len())..];
    assert_eq!(status.code(), Some(0), "exit status {status}; log:\n{run}");
    let lower = run.to_lowercase();
    for bad in ["panicked", "abort", "pthread"] {
        assert!(!lower.contains(bad), "\"{bad}\" in the log:\n{run}");
    }
    for line in ["shutting down", "engine stopped"] {
        assert!(run.contains(line), "no \"{line}\" in the log:\n{run}");
    }
    assert!(
        run.lines().any(|l| l.trim_end().ends_with(": stopped")),
        "no final \"stopped\" in the log:\n{run}"
    );
    run.to_string()
}

fn log_len(dir: &Path) -> usize {
    std::fs::metadata(dir.join("server.log"))
        .map(|m| m.len() as usize)
        .unwrap_or(0)
}

/// The completed checkpoints of `job`.
async fn completed(c: &tokio_postgres::Client, job: &str) -> usize {
    query_text(
        c,
        &format!(
            "SELECT count(*) FROM weir_catalog.checkpoints \
             WHERE job = '{job}' AND status = 'COMPLETED'"
        ),
    )
    .await[0][0]
        .parse()
        .unwrap()
}

/// What the views must hold after `rows` rows `(i, i % 7, i)` for i in `0..rows`.
fn expected(rows: i64) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let mut groups = std::collections::BTreeMap::<i64, (i64, i64)>::new();
    for i in 0..rows {
        let g = groups.entry(i % 7).or_default();
        g.0 += 1;
        g.1 += i;
    }
    let agg = groups
        .iter()
        .map(|(k, (n, s))| vec![k.to_string(), n.to_string(), s.to_string()])
        .collect();
    let total = vec![vec![rows.to_string()]];
    (agg, total)
}

async fn check_contents(c: &tokio_postgres::Client, rows: i64) {
    c.batch_execute("FLUSH").await.unwrap();
    let (agg, total) = expected(rows);
    assert_eq!(
        query_text(c, "SELECT count(*) FROM t").await,
        vec![vec![rows.to_string()]]
    );
    assert_eq!(
        query_text(c, "SELECT k, n, s FROM agg ORDER BY k").await,
        agg
    );
    assert_eq!(query_text(c, "SELECT n FROM total").await, total);
}

async fn insert(c: &tokio_postgres::Client, from: i64, to: i64) {
    let values: Vec<String> = (from..to)
        .map(|i| format!("({i}, {}, {i})", i % 7))
        .collect();
    c.batch_execute(&format!("INSERT INTO t VALUES {}", values.join(", ")))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_checkpointing_exits_cleanly_and_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = start(dir.path(), port);
    let c = connect_child(port, &mut child).await;
    c.batch_execute(
        "CREATE TABLE t (id BIGINT, k BIGINT, v BIGINT);
         SET checkpoint.interval = '100ms';
         CREATE MATERIALIZED VIEW agg AS SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k;
         SET state.backend = 'memory';
         CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n FROM t;",
    )
    .await
    .unwrap();
    let mut rows = 0;
    for _ in 0..20 {
        insert(&c, rows, rows + 50).await;
        rows += 50;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let start_wait = Instant::now();
    while completed(&c, "agg").await == 0 || completed(&c, "total").await == 0 {
        assert!(
            start_wait.elapsed() < Duration::from_secs(30),
            "no checkpoint completed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check_contents(&c, rows).await;
    // The client stays connected: the server closes the connection itself.
    stop(dir.path(), &mut child, "TERM", 0);
    drop(c);

    let from = log_len(dir.path());
    let mut child = start(dir.path(), port);
    let c = connect_child(port, &mut child).await;
    let recovered = query_text(
        &c,
        "SELECT name, recovered_checkpoint_id FROM weir_catalog.jobs ORDER BY name",
    )
    .await;
    assert_eq!(recovered.len(), 2, "{recovered:?}");
    for r in &recovered {
        assert_ne!(r[1], "NULL", "{} was not restored from a checkpoint", r[0]);
    }
    check_contents(&c, rows).await;
    insert(&c, rows, rows + 10).await;
    rows += 10;
    check_contents(&c, rows).await;
    stop(dir.path(), &mut child, "INT", from);
    drop(c);

    let from = log_len(dir.path());
    let mut child = start(dir.path(), port);
    let c = connect_child(port, &mut child).await;
    check_contents(&c, rows).await;
    stop(dir.path(), &mut child, "TERM", from);
}

/// Signals at random moments of a write load, each followed by a restart that must find
/// every acknowledged write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_at_random_moments_under_load() {
    let rounds: usize = std::env::var("WEIR_SHUTDOWN_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut rng = StdRng::seed_from_u64(7);
    let mut rows = 0;
    for round in 0..rounds {
        let from = log_len(dir.path());
        let mut child = start(dir.path(), port);
        let c = connect_child(port, &mut child).await;
        if round == 0 {
            c.batch_execute(
                "CREATE TABLE t (id BIGINT, k BIGINT, v BIGINT);
                 SET checkpoint.interval = '100ms';
                 CREATE MATERIALIZED VIEW agg AS
                    SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k;
                 CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n FROM t;",
            )
            .await
            .unwrap();
        } else {
            check_contents(&c, rows).await;
        }
        let run_for = Duration::from_millis(rng.random_range(50..600));
        let began = Instant::now();
        while began.elapsed() < run_for {
            let n = rng.random_range(1..200);
            insert(&c, rows, rows + n).await;
            rows += n;
        }
        // Whatever was acknowledged must survive the stop.
        stop(dir.path(), &mut child, "TERM", from);
        drop(c);
    }
    let from = log_len(dir.path());
    let mut child = start(dir.path(), port);
    let c = connect_child(port, &mut child).await;
    check_contents(&c, rows).await;
    stop(dir.path(), &mut child, "TERM", from);
}

/// Creates a table and a view checkpointing every 100 ms, writes to it and waits for a
/// completed checkpoint.
async fn checkpointing_view(c: &tokio_postgres::Client) {
    c.batch_execute(
        "CREATE TABLE t (id BIGINT, k BIGINT, v BIGINT);
         SET checkpoint.interval = '100ms';
         CREATE MATERIALIZED VIEW agg AS SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k;
         SET state.backend = 'memory';
         CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n FROM t;",
    )
    .await
    .unwrap();
    insert(c, 0, 100).await;
    let start = Instant::now();
    while completed(c, "agg").await == 0 || completed(c, "total").await == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no checkpoint completed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    insert(c, 100, 200).await;
}

/// The in-process tests look at this process's threads: they run one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Threads of this process that belong to checkpointing (state writers and uploads).
fn checkpoint_threads() -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_string())
        .filter(|name| name.starts_with("state-writer") || name.starts_with("checkpoint-"))
        .collect()
}

/// Waits (briefly: a joined thread may take a moment to leave the thread list) until no
/// checkpointing thread is left.
async fn assert_no_checkpoint_threads() {
    let start = Instant::now();
    loop {
        let left = checkpoint_threads();
        if left.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "threads still running: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Dropping the last reference to an engine that was never shut down stops its barrier clock
/// and joins its threads: the data directory is free right after the drop (or right after
/// the barrier tick in progress, which holds a reference).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_engine_releases_everything() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let engine = weir::open(dir.path(), Duration::from_millis(50))
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(weir::server::run(listener, engine.clone(), async {
        let _ = rx.await;
    }));
    let c = common::connect(addr).await;
    checkpointing_view(&c).await;
    drop(c);
    tx.send(()).unwrap();
    server.await.unwrap().unwrap();
    assert!(
        !checkpoint_threads().is_empty(),
        "the view's state writer should be running"
    );
    drop(engine);
    // No shutdown call: the drop alone stops everything and releases the directory.
    let start = Instant::now();
    while let Err(e) = weir::Engine::open(dir.path(), Duration::from_millis(50)) {
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "still locked after the drop: {e}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_no_checkpoint_threads().await;
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    check_contents(&c, 200).await;
    drop(c);
    server.stop().await;
}

/// `weir::serve` shuts the engine down when its shutdown future resolves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_shuts_the_engine_down() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let data = dir.path().to_path_buf();
    let served = tokio::spawn(async move {
        weir::serve(addr, &data, async {
            let _ = rx.await;
        })
        .await
    });
    let (c, connection) = loop {
        let mut config = tokio_postgres::Config::new();
        config
            .host("127.0.0.1")
            .port(port)
            .user("weir")
            .dbname("weir");
        if let Ok((client, conn)) = config.connect(tokio_postgres::NoTls).await {
            break (client, tokio::spawn(conn));
        }
        assert!(!served.is_finished(), "serve ended early");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    checkpointing_view(&c).await;
    tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("serve did not return")
        .unwrap()
        .unwrap();
    // The connection was closed by the server, which said why, as PostgreSQL does on a fast
    // shutdown: FATAL 57P01.
    assert!(c.simple_query("SELECT 1").await.is_err());
    let ended = tokio::time::timeout(Duration::from_secs(5), connection)
        .await
        .expect("the connection ended")
        .unwrap();
    let e = ended.expect_err("the server ended the connection with an error");
    let db = e.as_db_error().expect("an ErrorResponse from the server");
    assert_eq!(
        db.code(),
        &tokio_postgres::error::SqlState::ADMIN_SHUTDOWN,
        "{db:?}"
    );
    assert_eq!(
        db.message(),
        "terminating connection due to administrator command"
    );
    assert_no_checkpoint_threads().await;
    let reopened = weir::Engine::open(dir.path(), Duration::from_millis(50));
    assert!(reopened.is_ok(), "still locked: {:?}", reopened.err());
}

/// A block that dropped a table (with its view and index) and created others under the same
/// names, cut short by a crash (kill -9) or by SIGTERM, is rolled back: after the restart the
/// old table, view and index are back with their rows and the new ones are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_cut_short_brings_back_what_it_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = start(dir.path(), port);
    let mut c = connect_child(port, &mut child).await;
    c.batch_execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v TEXT);
         INSERT INTO t VALUES (1, 'a'), (2, 'b');
         CREATE MATERIALIZED VIEW tv AS SELECT count(*) AS n FROM t;
         CREATE INDEX t_v ON t (v);",
    )
    .await
    .unwrap();
    let mut from = 0;
    for signal in ["KILL", "TERM"] {
        c.batch_execute(
            "BEGIN;
             DROP TABLE t CASCADE;
             CREATE TABLE t (z BIGINT PRIMARY KEY);
             INSERT INTO t VALUES (7);
             CREATE MATERIALIZED VIEW tv AS SELECT sum(z) AS s FROM t;
             CREATE INDEX t_v ON t (z);",
        )
        .await
        .unwrap();
        assert_eq!(query_text(&c, "SELECT z FROM t").await, vec![vec!["7"]]);
        if signal == "KILL" {
            send_signal(&child, signal);
            wait_exit(&mut child, Duration::from_secs(10));
        } else {
            stop(dir.path(), &mut child, signal, from);
        }
        from = log_len(dir.path());
        child = start(dir.path(), port);
        c = connect_child(port, &mut child).await;
        assert_eq!(
            query_text(&c, "SELECT id, v FROM t ORDER BY id").await,
            vec![vec!["1", "a"], vec!["2", "b"]],
            "after {signal}"
        );
        c.batch_execute("FLUSH").await.unwrap();
        assert_eq!(query_text(&c, "SELECT n FROM tv").await, vec![vec!["2"]]);
        assert_eq!(
            query_text(
                &c,
                "SELECT indexname FROM pg_indexes WHERE tablename = 't' ORDER BY indexname"
            )
            .await,
            vec![vec!["t_pkey"], vec!["t_v"]]
        );
        // The old table takes writes again, and its view follows.
        c.batch_execute("INSERT INTO t VALUES (3, 'c'); FLUSH")
            .await
            .unwrap();
        assert_eq!(query_text(&c, "SELECT n FROM tv").await, vec![vec!["3"]]);
        c.batch_execute("DELETE FROM t WHERE id = 3").await.unwrap();
    }
    stop(dir.path(), &mut child, "TERM", from);
}

/// SIGTERM while a statement blocks its connection's task (`pg_sleep(60)`) cancels the
/// statement, as PostgreSQL's fast shutdown does: the client gets an error at once, and the
/// server exits cleanly within `stop`'s 10 s instead of waiting out the sleep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_cancels_a_sleeping_statement() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = start(dir.path(), port);
    let c = connect_child(port, &mut child).await;
    let sleeper = tokio::spawn(async move { c.simple_query("SELECT pg_sleep(60)").await });
    // Wait until the sleep runs (pg_stat_activity is not kept; the statement just needs to
    // have reached the server).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let began = Instant::now();
    stop(dir.path(), &mut child, "TERM", 0);
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "shutdown took {:?}",
        began.elapsed()
    );
    let answered = tokio::time::timeout(Duration::from_secs(5), sleeper)
        .await
        .expect("the client heard nothing")
        .unwrap();
    assert!(answered.is_err(), "the sleep ran to the end: {answered:?}");
}

//! Checkpoints end to end, on an in-process server: incremental RocksDB checkpoints and
//! retention, recovery that replays only what came after the checkpoint, the seed's timing
//! rules read back from `weir_catalog.checkpoints`, timeouts, tolerable failures and restart
//! strategies (with failpoints; this file needs `--features failpoints`).

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::SinkExt;

/// Failpoints are process-wide: the tests of this file run one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn copy_rows(c: &tokio_postgres::Client, sql: &str, data: String) {
    let sink = c.copy_in(sql).await.expect("copy");
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from(data)).await.expect("send");
    sink.finish().await.expect("finish");
}

/// Takes the file's lock and clears every failpoint a failed test may have left.
async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    let guard = SERIAL.lock().await;
    for name in ["checkpoint::async_phase", "job::process"] {
        weir::failpoint::cfg(name, "off").unwrap();
    }
    guard
}

/// The server's message of a failed statement.
fn db_message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_else(|| e.to_string())
}

fn int(s: &str) -> i64 {
    s.parse().unwrap_or_else(|_| panic!("not an integer: {s}"))
}

/// One checkpoint record: (id, epoch, status, trigger ms, end ms, state bytes, persisted).
#[derive(Debug, Clone)]
struct Rec {
    id: i64,
    status: String,
    trigger: i64,
    end: Option<i64>,
    state: Option<i64>,
    persisted: Option<i64>,
    reason: String,
}

async fn records(c: &tokio_postgres::Client, job: &str) -> Vec<Rec> {
    let sql = format!(
        "SELECT checkpoint_id, status, \
                CAST(extract(epoch FROM trigger_time) * 1000 AS BIGINT), \
                CAST(extract(epoch FROM end_time) * 1000 AS BIGINT), \
                state_bytes, persisted_bytes, coalesce(failure_reason, '') \
         FROM weir_catalog.checkpoints WHERE job = '{job}' ORDER BY checkpoint_id"
    );
    common::query_text(c, &sql)
        .await
        .into_iter()
        .map(|r| Rec {
            id: int(&r[0]),
            status: r[1].clone(),
            trigger: int(&r[2]),
            end: (r[3] != "NULL").then(|| int(&r[3])),
            state: (r[4] != "NULL").then(|| int(&r[4])),
            persisted: (r[5] != "NULL").then(|| int(&r[5])),
            reason: r[6].clone(),
        })
        .collect()
}

/// Waits for a COMPLETED checkpoint of `job` triggered after the call.
async fn next_completed(c: &tokio_postgres::Client, job: &str) -> Rec {
    let after = records(c, job).await.last().map(|r| r.id).unwrap_or(0);
    let start = Instant::now();
    loop {
        if let Some(r) = records(c, job)
            .await
            .into_iter()
            .find(|r| r.id > after && r.status == "COMPLETED")
        {
            return r;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no checkpoint completed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn job_field(c: &tokio_postgres::Client, job: &str, column: &str) -> String {
    let rows = common::query_text(
        c,
        &format!("SELECT {column} FROM weir_catalog.jobs WHERE name = '{job}'"),
    )
    .await;
    rows[0][0].clone()
}

/// The one job directory under `<data>/checkpoints`.
fn job_checkpoint_dir(data: &Path) -> std::path::PathBuf {
    let mut dirs: Vec<_> = std::fs::read_dir(data.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.remove(0)
}

async fn wait_for_release(dir: &Path) {
    for _ in 0..200 {
        if weir::Engine::open(dir, Duration::from_millis(50)).is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("data directory still locked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_checkpoints_retention_and_recovery_from_the_checkpoint() {
    let _serial = serial().await;
    let dir = tempfile::tempdir().unwrap();
    let n: i64 = 1_000_000;
    let last_id;
    {
        let server = common::TestServer::start(dir.path()).await;
        let c = server.client().await;
        c.batch_execute(
            "CREATE TABLE big (k BIGINT, v BIGINT);
             SET checkpoint.interval = '200ms';
             CREATE MATERIALIZED VIEW agg AS SELECT k, count(*) AS n, sum(v) AS s, max(v) AS m FROM big GROUP BY k;",
        )
        .await
        .unwrap();
        let mut data = String::with_capacity(16 * n as usize);
        for i in 0..n {
            data.push_str(&format!("{}\t{}\n", i % 1000, i));
        }
        copy_rows(&c, "COPY big FROM STDIN", data).await;
        c.batch_execute("FLUSH").await.unwrap();
        // A checkpoint persists the SST files its predecessor does not hold: the flushes of
        // the load's checkpoints leave level-0 files that RocksDB compacts in the background,
        // and a checkpoint after such a compaction persists its output. Wait until that has
        // settled (a checkpoint with no new rows persists little), then measure.
        let mut waited = 0;
        let first = loop {
            let r = next_completed(&c, "agg").await;
            if r.persisted.unwrap() * 20 < r.state.unwrap() {
                break r;
            }
            waited += 1;
            assert!(
                waited < 100,
                "checkpoints keep persisting most of the state: {r:?}"
            );
        };
        let state1 = first.state.unwrap();
        // max(v) keeps every value of its group: the state grows with the rows.
        assert!(state1 > 1_000_000, "state of 1M rows is {state1} bytes");

        // 1000 more rows in five writes of 200, a checkpoint after each. A checkpoint persists
        // what changed since its predecessor, plus the output of any compaction RocksDB ran in
        // the background meanwhile (not under the test's control), so one of the five, not
        // each, must persist under 5% of the state; a checkpoint that copied the whole state
        // would fail all five.
        let mut seen = Vec::new();
        for part in 0..5 {
            let mut data = String::new();
            for i in n + part * 200..n + (part + 1) * 200 {
                data.push_str(&format!("{}\t{}\n", i % 1000, i));
            }
            copy_rows(&c, "COPY big FROM STDIN", data).await;
            c.batch_execute("FLUSH").await.unwrap();
            let next = next_completed(&c, "agg").await;
            seen.push((next.persisted.unwrap(), next.state.unwrap()));
        }
        let (persisted2, state2) = *seen.iter().min_by_key(|(p, _)| *p).unwrap();
        assert!(
            persisted2 * 20 < state2,
            "no incremental checkpoint wrote under 5% of the state: (persisted, state) {seen:?}"
        );
        eprintln!(
            "first checkpoint: {state1} bytes; after 200 more rows: persisted {persisted2} of {state2} bytes ({:.3}%)",
            100.0 * persisted2 as f64 / state2 as f64
        );

        // Stop checkpointing; retention settles on checkpoint.retained = 1.
        c.batch_execute("ALTER MATERIALIZED VIEW agg SET (checkpoint.interval = 'off')")
            .await
            .unwrap();
        assert_eq!(job_field(&c, "agg", "checkpoint_interval").await, "off");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let jobdir = job_checkpoint_dir(dir.path());
        let chks: Vec<_> = std::fs::read_dir(&jobdir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with("chk-"))
            .collect();
        assert_eq!(chks.len(), 1, "retained checkpoints: {chks:?}");
        last_id = int(&job_field(&c, "agg", "last_checkpoint_id").await);
        assert_eq!(chks[0], format!("chk-{last_id}"));
        let meta: serde_json::Value = serde_json::from_slice(
            &std::fs::read(jobdir.join(&chks[0]).join("_metadata.json")).unwrap(),
        )
        .unwrap();
        let referenced: BTreeSet<String> = meta["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["shared"].as_str().unwrap().to_string())
            .collect();
        let present: BTreeSet<String> = std::fs::read_dir(jobdir.join("shared"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        assert!(!referenced.is_empty());
        assert_eq!(
            referenced, present,
            "shared/ must hold exactly the files the retained checkpoint references"
        );

        // 37 rows after the last checkpoint: recovery must replay exactly these.
        let mut data = String::new();
        for i in n + 1000..n + 1037 {
            data.push_str(&format!("{}\t{}\n", i % 1000, i));
        }
        copy_rows(&c, "COPY big FROM STDIN", data).await;
        c.batch_execute("FLUSH").await.unwrap();
        drop(c);
        server.stop().await;
    }
    wait_for_release(dir.path()).await;
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    assert_eq!(
        job_field(&c, "agg", "recovered_checkpoint_id").await,
        last_id.to_string()
    );
    assert_eq!(job_field(&c, "agg", "replayed_rows").await, "37");
    // The view equals the sums computed here over the rows written.
    let total = n + 1037;
    let rows = common::query_text(
        &c,
        "SELECT k, n, s, m FROM agg WHERE k IN (0, 5, 999) ORDER BY k",
    )
    .await;
    for r in rows {
        let k = int(&r[0]);
        let vals: Vec<i64> = (0..total).filter(|i| i % 1000 == k).collect();
        assert_eq!(int(&r[1]), vals.len() as i64, "count for k={k}");
        assert_eq!(int(&r[2]), vals.iter().sum::<i64>(), "sum for k={k}");
        assert_eq!(int(&r[3]), *vals.iter().max().unwrap(), "max for k={k}");
    }
    let sums = common::query_text(&c, "SELECT sum(n), sum(s) FROM agg").await;
    assert_eq!(int(&sums[0][0]), total);
    assert_eq!(int(&sums[0][1]), total * (total - 1) / 2);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_rules_min_pause_and_max_concurrent() {
    let _serial = serial().await;
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute("CREATE TABLE t (a INT, b INT); INSERT INTO t VALUES (1, 2)")
        .await
        .unwrap();

    // Interval 300 ms, minimum pause 200 ms, each checkpoint slowed to 150 ms.
    weir::failpoint::cfg("checkpoint::async_phase", "sleep(150)").unwrap();
    c.batch_execute(
        "SET checkpoint.interval = '300ms';
         SET checkpoint.min_pause = '200ms';
         CREATE MATERIALIZED VIEW p AS SELECT a, sum(b) AS s FROM t GROUP BY a;",
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    c.batch_execute("ALTER MATERIALIZED VIEW p SET (checkpoint.interval = 'off')")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let recs: Vec<Rec> = records(&c, "p")
        .await
        .into_iter()
        .filter(|r| r.status == "COMPLETED")
        .collect();
    assert!(recs.len() >= 4, "{recs:?}");
    for w in recs.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        // Millisecond timestamps: allow 2 ms of rounding.
        assert!(b.trigger - a.trigger >= 298, "interval broken: {a:?} {b:?}");
        assert!(
            b.trigger - a.end.unwrap() >= 198,
            "minimum pause broken: {a:?} {b:?}"
        );
    }

    // max_concurrent = 3 without a pause: slow checkpoints overlap, never more than 3.
    weir::failpoint::cfg("checkpoint::async_phase", "sleep(700)").unwrap();
    c.batch_execute(
        "RESET checkpoint.min_pause;
         SET checkpoint.interval = '100ms';
         SET checkpoint.max_concurrent = 3;
         CREATE MATERIALIZED VIEW q AS SELECT a, count(*) AS n FROM t GROUP BY a;",
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    c.batch_execute("ALTER MATERIALIZED VIEW q SET (checkpoint.interval = 'off')")
        .await
        .unwrap();
    weir::failpoint::cfg("checkpoint::async_phase", "off").unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let recs: Vec<Rec> = records(&c, "q").await;
    assert!(recs.iter().all(|r| r.status == "COMPLETED"), "{recs:?}");
    let mut max_overlap = 0;
    for r in &recs {
        let t = r.trigger;
        let overlap = recs
            .iter()
            .filter(|o| o.trigger <= t && o.end.unwrap() > t)
            .count();
        max_overlap = max_overlap.max(overlap);
    }
    assert!(max_overlap <= 3, "more than 3 in flight: {recs:?}");
    assert!(max_overlap >= 2, "checkpoints never overlapped: {recs:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_checkpoints_fail_the_job_and_the_restart_strategy_acts() {
    let _serial = serial().await;
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute("CREATE TABLE t (a INT, b INT); INSERT INTO t VALUES (1, 2), (1, 3)")
        .await
        .unwrap();
    weir::failpoint::cfg("checkpoint::async_phase", "sleep(600)").unwrap();
    c.batch_execute(
        "SET checkpoint.interval = '100ms';
         SET checkpoint.timeout = '200ms';
         SET checkpoint.tolerable_failures = 1;
         SET restart.strategy = 'fixed-delay';
         SET restart.attempts = 1;
         SET restart.delay = '300ms';
         CREATE MATERIALIZED VIEW e AS SELECT a, sum(b) AS s FROM t GROUP BY a;",
    )
    .await
    .unwrap();
    // Two expired checkpoints exceed the tolerable one: the job restarts once (fixed-delay,
    // one attempt), then fails for good after two more.
    let start = Instant::now();
    loop {
        let status = job_field(&c, "e", "status").await;
        if status == "FAILED" {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "job never failed (status {status})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(job_field(&c, "e", "restarts").await, "1");
    let failure = job_field(&c, "e", "failure").await;
    assert!(failure.contains("tolerable_failures"), "{failure}");
    let recs = records(&c, "e").await;
    let expired: Vec<&Rec> = recs.iter().filter(|r| r.status == "EXPIRED").collect();
    assert!(expired.len() >= 4, "{recs:?}");
    for r in &expired {
        assert!(
            r.end.unwrap() - r.trigger >= 199,
            "expired too early: {r:?}"
        );
        assert!(r.reason.contains("timeout"), "{r:?}");
    }
    // Reading the view reports the failure.
    let err = c.simple_query("SELECT * FROM e").await.unwrap_err();
    assert!(db_message(&err).contains("tolerable_failures"), "{err:?}");
    // Let the async phases finish: the expired checkpoints' files are dropped.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let jobdir = job_checkpoint_dir(dir.path());
    let leftovers: Vec<String> = std::fs::read_dir(&jobdir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("chk-"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "expired checkpoints left {leftovers:?}"
    );

    // RESUME after the cause is gone: the job runs and checkpoints again.
    weir::failpoint::cfg("checkpoint::async_phase", "off").unwrap();
    c.batch_execute("ALTER MATERIALIZED VIEW e RESUME; INSERT INTO t VALUES (2, 10); FLUSH")
        .await
        .unwrap();
    assert_eq!(job_field(&c, "e", "status").await, "RUNNING");
    assert_eq!(
        common::query_text(&c, "SELECT a, s FROM e ORDER BY a").await,
        vec![vec!["1", "5"], vec!["2", "10"]]
    );
    next_completed(&c, "e").await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_failure_restarts_from_the_checkpoint() {
    let _serial = serial().await;
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute(
        "CREATE TABLE t (a INT, b INT);
         INSERT INTO t VALUES (1, 2), (2, 3);
         SET checkpoint.interval = '100ms';
         SET restart.strategy = 'failure-rate';
         SET restart.failure_rate.max_failures = 2;
         SET restart.failure_rate.interval = '1min';
         SET restart.delay = '100ms';
         CREATE MATERIALIZED VIEW f AS SELECT a, sum(b) AS s FROM t GROUP BY a;",
    )
    .await
    .unwrap();
    next_completed(&c, "f").await;
    let checkpoint = job_field(&c, "f", "last_checkpoint_id").await;
    // The next epoch with changes fails in the job; the strategy restarts it from its
    // checkpoint, replaying the rows written since.
    weir::failpoint::cfg("job::process", "return(injected operator failure)").unwrap();
    c.batch_execute("INSERT INTO t VALUES (1, 40)")
        .await
        .unwrap();
    let start = Instant::now();
    while job_field(&c, "f", "status").await == "RUNNING" {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "job never failed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    weir::failpoint::cfg("job::process", "off").unwrap();
    let start = Instant::now();
    while job_field(&c, "f", "status").await != "RUNNING" {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "job never restarted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(job_field(&c, "f", "restarts").await, "1");
    let recovered = job_field(&c, "f", "recovered_checkpoint_id").await;
    assert!(
        int(&recovered) >= int(&checkpoint),
        "{recovered} < {checkpoint}"
    );
    c.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        common::query_text(&c, "SELECT a, s FROM f ORDER BY a").await,
        vec![vec!["1", "42"], vec!["2", "3"]]
    );
    // Failures within the interval beyond max_failures = 2 fail the job for good: the
    // earlier failure, this one, and the restart's replay failing again.
    weir::failpoint::cfg("job::process", "return(injected operator failure)").unwrap();
    c.batch_execute("INSERT INTO t VALUES (3, 3)")
        .await
        .unwrap();
    let start = Instant::now();
    while job_field(&c, "f", "status").await != "FAILED" {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "job never gave up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let err = c.simple_query("SELECT * FROM f").await.unwrap_err();
    assert!(
        db_message(&err).contains("injected operator failure"),
        "{err:?}"
    );
    weir::failpoint::cfg("job::process", "off").unwrap();
    c.batch_execute("ALTER MATERIALIZED VIEW f RESUME")
        .await
        .unwrap();
    let start = Instant::now();
    while job_field(&c, "f", "status").await != "RUNNING" {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "RESUME did not restart"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        common::query_text(&c, "SELECT a, s FROM f ORDER BY a").await,
        vec![vec!["1", "42"], vec!["2", "3"], vec!["3", "3"]]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epochs_keep_growing_across_restarts_after_idle_checkpoints() {
    let _serial = serial().await;
    let dir = tempfile::tempdir().unwrap();
    {
        let server = common::TestServer::start(dir.path()).await;
        let c = server.client().await;
        c.batch_execute(
            "CREATE TABLE t (a INT, b INT);
             SET checkpoint.interval = '100ms';
             CREATE MATERIALIZED VIEW v AS SELECT a, sum(b) AS s FROM t GROUP BY a;
             SET state.backend = 'memory';
             CREATE MATERIALIZED VIEW vm AS SELECT a, count(*) AS n FROM t GROUP BY a;
             INSERT INTO t VALUES (1, 1), (2, 2);
             FLUSH;",
        )
        .await
        .unwrap();
        // Checkpoints keep being taken at later epochs without any write.
        next_completed(&c, "v").await;
        next_completed(&c, "v").await;
        next_completed(&c, "vm").await;
        drop(c);
        server.stop().await;
    }
    for round in 0..2 {
        wait_for_release(dir.path()).await;
        let server = common::TestServer::start(dir.path()).await;
        let c = server.client().await;
        // Restored from the idle checkpoint, nothing to replay.
        assert_ne!(job_field(&c, "v", "recovered_checkpoint_id").await, "NULL");
        assert_ne!(job_field(&c, "vm", "recovered_checkpoint_id").await, "NULL");
        assert_eq!(job_field(&c, "vm", "state_backend").await, "memory");
        if round == 0 {
            assert_eq!(job_field(&c, "v", "replayed_rows").await, "0");
            assert_eq!(job_field(&c, "vm", "replayed_rows").await, "0");
        }
        // A write after the restart must land in an epoch after that checkpoint.
        c.batch_execute(&format!("INSERT INTO t VALUES (1, {}); FLUSH", 10 + round))
            .await
            .unwrap();
        drop(c);
        server.stop().await;
    }
    wait_for_release(dir.path()).await;
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    assert_eq!(
        common::query_text(&c, "SELECT a, s FROM v ORDER BY a").await,
        vec![vec!["1", "22"], vec!["2", "2"]]
    );
    assert_eq!(
        common::query_text(&c, "SELECT a, n FROM vm ORDER BY a").await,
        vec![vec!["1", "3"], vec!["2", "1"]]
    );
    server.stop().await;
}

/// A view over a view restored from a checkpoint whose upstream has no checkpoint at or
/// before that epoch (it was lost; retention or a crash can also leave it so): the upstream
/// must start no later than its reader, from its tables' contents as of the reader's epoch,
/// and every later epoch must reach the reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_over_a_view_recovers_when_the_upstream_checkpoint_is_gone() {
    let _serial = serial().await;
    let dir = tempfile::tempdir().unwrap();
    {
        let server = common::TestServer::start(dir.path()).await;
        let c = server.client().await;
        c.batch_execute(
            "CREATE TABLE t (k INT, v BIGINT);
             SET checkpoint.interval = '100ms';
             CREATE MATERIALIZED VIEW up AS SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k;
             CREATE MATERIALIZED VIEW down AS SELECT count(*) AS groups, sum(n) AS rows, sum(s) AS total FROM up;
             INSERT INTO t VALUES (1, 10), (2, 20), (2, 5);
             FLUSH;",
        )
        .await
        .unwrap();
        next_completed(&c, "down").await;
        // `down` keeps that checkpoint; `up` goes on checkpointing later epochs.
        c.batch_execute("ALTER MATERIALIZED VIEW down SET (checkpoint.interval = 'off')")
            .await
            .unwrap();
        c.batch_execute("INSERT INTO t VALUES (3, 7), (1, 1); DELETE FROM t WHERE k = 2; FLUSH")
            .await
            .unwrap();
        next_completed(&c, "up").await;
        c.batch_execute("INSERT INTO t VALUES (4, 100); FLUSH")
            .await
            .unwrap();
        drop(c);
        server.stop().await;
    }
    // Lose every checkpoint of `up` (the view created first of the two: the lower id).
    let mut jobs: Vec<(u64, std::path::PathBuf)> =
        std::fs::read_dir(dir.path().join("checkpoints"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| (p.file_name().unwrap().to_str().unwrap().parse().unwrap(), p))
            .collect();
    jobs.sort();
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    for e in std::fs::read_dir(&jobs[0].1).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap().to_string_lossy().starts_with("chk-") {
            std::fs::remove_dir_all(p).unwrap();
        }
    }
    wait_for_release(dir.path()).await;
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    assert_eq!(job_field(&c, "up", "recovered_checkpoint_id").await, "NULL");
    assert_ne!(
        job_field(&c, "down", "recovered_checkpoint_id").await,
        "NULL"
    );
    // Rows left: (1, 10), (3, 7), (1, 1), (4, 100): groups 1, 3, 4.
    assert_eq!(
        common::query_text(&c, "SELECT k, n, s FROM up ORDER BY k").await,
        vec![
            vec!["1", "2", "11"],
            vec!["3", "1", "7"],
            vec!["4", "1", "100"]
        ]
    );
    assert_eq!(
        common::query_text(&c, "SELECT groups, rows, total FROM down").await,
        vec![vec!["3", "4", "118"]]
    );
    c.batch_execute("INSERT INTO t VALUES (5, 1); FLUSH")
        .await
        .unwrap();
    assert_eq!(
        common::query_text(&c, "SELECT groups, rows, total FROM down").await,
        vec![vec!["4", "5", "119"]]
    );
    server.stop().await;
}

/// Stops a server whose one view `v` (`SELECT k, count(*), sum(v) FROM t GROUP BY k` over rows
/// (k, v) = (g % 10, g) for g in 1..=1000, then (1, 5)) has a completed checkpoint, damages
/// that checkpoint with `damage`, and checks that a restart serves the right answer: the view
/// rebuilt from its table, not the server refusing to start or the view left restarting.
async fn recovers_from_a_damaged_checkpoint(damage: impl Fn(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    {
        let server = common::TestServer::start(dir.path()).await;
        let c = server.client().await;
        c.batch_execute(
            "CREATE TABLE t (k INT, v BIGINT);
             INSERT INTO t SELECT g % 10, g FROM generate_series(1, 1000) g;
             SET checkpoint.interval = '100ms';
             CREATE MATERIALIZED VIEW v AS SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k;
             INSERT INTO t VALUES (1, 5);
             FLUSH;",
        )
        .await
        .unwrap();
        next_completed(&c, "v").await;
        c.batch_execute("ALTER MATERIALIZED VIEW v SET (checkpoint.interval = 'off')")
            .await
            .unwrap();
        drop(c);
        server.stop().await;
    }
    damage(&job_checkpoint_dir(dir.path()));
    wait_for_release(dir.path()).await;
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    let mut status = String::new();
    for _ in 0..100 {
        status = job_field(&c, "v", "status").await;
        if status == "RUNNING" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, "RUNNING");
    // k = 1: g = 1, 11, ..., 991 (100 rows, sum 49600) and the row (1, 5).
    // k = 0: g = 10, 20, ..., 1000 (100 rows, sum 50500).
    assert_eq!(
        common::query_text(&c, "SELECT k, n, s FROM v WHERE k IN (0, 1) ORDER BY k").await,
        vec![vec!["0", "100", "50500"], vec!["1", "101", "49605"]]
    );
    assert_eq!(
        common::query_text(&c, "SELECT sum(n), sum(s) FROM v").await,
        vec![vec!["1001", "500505"]]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_with_a_damaged_manifest_is_discarded() {
    let _serial = serial().await;
    recovers_from_a_damaged_checkpoint(|job| {
        for e in std::fs::read_dir(job).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().unwrap().to_string_lossy().starts_with("chk-") {
                std::fs::write(p.join("_metadata.json"), b"{not json").unwrap();
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_missing_its_state_files_is_discarded() {
    let _serial = serial().await;
    recovers_from_a_damaged_checkpoint(|job| {
        let mut removed = 0;
        for e in std::fs::read_dir(job.join("shared")).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
            removed += 1;
        }
        assert!(removed > 0, "the checkpoint has no shared files");
    })
    .await;
}

/// The views' answers computed here from the rows of `a` (k, v) and `b` (k).
fn expected_views(a: &[(i64, i64)], b: &[Option<i64>]) -> [Vec<Vec<String>>; 3] {
    let mut groups: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
    for (k, v) in a {
        groups.entry(*k).or_default().push(*v);
    }
    let agg = groups
        .iter()
        .map(|(k, vs)| {
            let distinct: BTreeSet<i64> = vs.iter().map(|v| v % 5).collect();
            let mut desc = vs.clone();
            desc.sort_by(|x, y| y.cmp(x));
            let ss: Vec<String> = desc.iter().map(|v| format!("s{v}")).collect();
            vec![
                k.to_string(),
                distinct.len().to_string(),
                vs.iter().min().unwrap().to_string(),
                vs.iter().max().unwrap().to_string(),
                ss.join(","),
                vs.iter().fold(0, |acc, v| acc | v).to_string(),
                // percentile_disc(0.5) in descending order: the ceil(n / 2)th largest.
                desc[(vs.len() as f64 * 0.5).ceil() as usize - 1].to_string(),
                // mode() of v % 3: the most frequent remainder, the smallest on a tie.
                (0..3)
                    .rev()
                    .max_by_key(|r| vs.iter().filter(|v| *v % 3 == *r).count())
                    .unwrap()
                    .to_string(),
            ]
        })
        .collect();
    let mut rows: Vec<(i64, i64)> = a.to_vec();
    rows.sort();
    let semi = rows
        .iter()
        .filter(|(k, _)| b.contains(&Some(*k)))
        .map(|(k, v)| vec![k.to_string(), v.to_string()])
        .collect();
    // PostgreSQL's NOT IN: true only when no right key equals k and none is NULL (or when
    // the right side is empty).
    let anti = rows
        .iter()
        .filter(|(k, _)| b.is_empty() || (!b.contains(&Some(*k)) && !b.contains(&None)))
        .map(|(k, v)| vec![k.to_string(), v.to_string()])
        .collect();
    [agg, semi, anti]
}

async fn check_views(c: &tokio_postgres::Client, a: &[(i64, i64)], b: &[Option<i64>]) {
    let [agg, semi, anti] = expected_views(a, b);
    assert_eq!(
        common::query_text(c, "SELECT k, d, lo, hi, ss, bo, pd, mo FROM agg ORDER BY k").await,
        agg
    );
    assert_eq!(
        common::query_text(c, "SELECT k, v FROM semi ORDER BY k, v").await,
        semi
    );
    assert_eq!(
        common::query_text(c, "SELECT k, v FROM anti ORDER BY k, v").await,
        anti
    );
}

/// An aggregate's accumulator and value tables and a semi/anti join's state tables are the
/// whole of their state: restored from a checkpoint, they go on retracting correctly (the
/// minimum deleted, a NULL arriving on the right of NOT IN and leaving again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregates_and_semi_joins_go_on_from_their_restored_state_tables() {
    let _serial = serial().await;
    let dir = tempfile::tempdir().unwrap();
    let mut a: Vec<(i64, i64)> = (0..300).map(|i| (i % 7, i)).collect();
    let mut b: Vec<Option<i64>> = vec![Some(1), Some(2), Some(3)];
    {
        let server = common::TestServer::start(dir.path()).await;
        let c = server.client().await;
        c.batch_execute(
            "CREATE TABLE a (k BIGINT, v BIGINT, s TEXT);
             CREATE TABLE b (k BIGINT);
             SET checkpoint.interval = '100ms';
             CREATE MATERIALIZED VIEW agg AS SELECT k, count(DISTINCT v % 5) AS d, min(v) AS lo,
                 max(v) AS hi, string_agg(s, ',' ORDER BY v DESC) AS ss, bit_or(v) AS bo,
                 percentile_disc(0.5) WITHIN GROUP (ORDER BY v DESC) AS pd,
                 mode() WITHIN GROUP (ORDER BY v % 3) AS mo
                 FROM a GROUP BY k;
             CREATE MATERIALIZED VIEW semi AS SELECT k, v FROM a WHERE k IN (SELECT k FROM b);
             CREATE MATERIALIZED VIEW anti AS SELECT k, v FROM a WHERE k NOT IN (SELECT k FROM b);
             INSERT INTO b VALUES (1), (2), (3);",
        )
        .await
        .unwrap();
        let data: String = a.iter().map(|(k, v)| format!("{k}\t{v}\ts{v}\n")).collect();
        copy_rows(&c, "COPY a FROM STDIN", data).await;
        c.batch_execute("FLUSH").await.unwrap();
        check_views(&c, &a, &b).await;
        for job in ["agg", "semi", "anti"] {
            next_completed(&c, job).await;
        }
        drop(c);
        server.stop().await;
    }
    wait_for_release(dir.path()).await;
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    for job in ["agg", "semi", "anti"] {
        assert_ne!(
            job_field(&c, job, "recovered_checkpoint_id").await,
            "NULL",
            "{job}"
        );
        assert_eq!(job_field(&c, job, "replayed_rows").await, "0", "{job}");
    }
    check_views(&c, &a, &b).await;
    // Each group loses its smallest values (min moves, distinct counts may drop).
    c.batch_execute("DELETE FROM a WHERE v < 20; FLUSH")
        .await
        .unwrap();
    a.retain(|(_, v)| *v >= 20);
    check_views(&c, &a, &b).await;
    // A NULL on the right of NOT IN empties it; its leaving brings the rows back.
    c.batch_execute("INSERT INTO b VALUES (NULL); FLUSH")
        .await
        .unwrap();
    b.push(None);
    check_views(&c, &a, &b).await;
    c.batch_execute("DELETE FROM b WHERE k IS NULL OR k = 2; FLUSH")
        .await
        .unwrap();
    b.retain(|k| k.is_some() && *k != Some(2));
    check_views(&c, &a, &b).await;
    // A whole group leaves, and comes back with one row.
    c.batch_execute("DELETE FROM a WHERE k = 3; INSERT INTO a VALUES (3, 1000, 's1000'); FLUSH")
        .await
        .unwrap();
    a.retain(|(k, _)| *k != 3);
    a.push((3, 1000));
    check_views(&c, &a, &b).await;
    server.stop().await;
}

/// A checkpoint whose state tables are not the plan's (written by another plan of the view)
/// is discarded at start like one of another state format: the view is rebuilt from its
/// inputs, answers right, and checkpoints again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_of_another_plan_are_discarded_and_the_view_rebuilt() {
    let _serial = serial().await;
    let dir = tempfile::tempdir().unwrap();
    {
        let server = common::TestServer::start(dir.path()).await;
        let c = server.client().await;
        c.batch_execute(
            "CREATE TABLE t (k INT, v BIGINT);
             SET checkpoint.interval = '100ms';
             CREATE MATERIALIZED VIEW g AS SELECT k, count(*) AS n, max(v) AS m FROM t GROUP BY k;
             INSERT INTO t VALUES (1, 10), (2, 20), (2, 5);
             FLUSH;",
        )
        .await
        .unwrap();
        next_completed(&c, "g").await;
        c.batch_execute("DELETE FROM t WHERE v = 20; INSERT INTO t VALUES (3, 7); FLUSH")
            .await
            .unwrap();
        next_completed(&c, "g").await;
        drop(c);
        server.stop().await;
    }
    // Every checkpoint now names one of its state tables as no plan of `g` does.
    let job_dir = job_checkpoint_dir(dir.path());
    let mut renamed = 0;
    for e in std::fs::read_dir(&job_dir).unwrap() {
        let meta = e.unwrap().path().join("_metadata.json");
        if !meta.exists() {
            continue;
        }
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
        let tables = json["tables"].as_array_mut().unwrap();
        assert!(tables.len() > 1, "{tables:?}");
        let last = tables.last_mut().unwrap();
        let name = last["name"].as_str().unwrap().to_string();
        last["name"] = serde_json::Value::String(format!("{name}.renamed"));
        std::fs::write(&meta, serde_json::to_vec(&json).unwrap()).unwrap();
        renamed += 1;
    }
    assert!(renamed > 0, "no completed checkpoint on disk");
    wait_for_release(dir.path()).await;
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    assert_eq!(job_field(&c, "g", "status").await, "RUNNING");
    assert_eq!(job_field(&c, "g", "recovered_checkpoint_id").await, "NULL");
    let left: Vec<String> = std::fs::read_dir(&job_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("chk-"))
        .collect();
    assert!(
        left.is_empty(),
        "discarded checkpoints left behind: {left:?}"
    );
    // Rows left: (1, 10), (2, 5), (3, 7); max(v) of group 2 is 5 once 20 is gone.
    assert_eq!(
        common::query_text(&c, "SELECT k, n, m FROM g ORDER BY k").await,
        vec![
            vec!["1", "1", "10"],
            vec!["2", "1", "5"],
            vec!["3", "1", "7"]
        ]
    );
    c.batch_execute("DELETE FROM t WHERE k = 2; FLUSH")
        .await
        .unwrap();
    assert_eq!(
        common::query_text(&c, "SELECT k, n, m FROM g ORDER BY k").await,
        vec![vec!["1", "1", "10"], vec!["3", "1", "7"]]
    );
    next_completed(&c, "g").await;
    server.stop().await;
}

/// A view created in a session whose `TimeZone` is not UTC is planned in that zone again at
/// recovery: its plan still matches its checkpoint (restored, not rebuilt), and rows written
/// after the restart are dated in New York time. 03:30Z and 04:59Z on 2024-03-10 are the
/// evening of 2024-03-09 there (-05), 05:30Z is 00:30 on 2024-03-10; in UTC all three are
/// 2024-03-10.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_keeps_the_time_zone_it_was_created_in() {
    let _serial = serial().await;
    let dir = tempfile::tempdir().unwrap();
    {
        let server = common::TestServer::start(dir.path()).await;
        let c = server.client().await;
        c.batch_execute(
            "SET TimeZone = 'America/New_York';
             SET checkpoint.interval = '100ms';
             CREATE TABLE ev (id INT, at TIMESTAMPTZ);
             INSERT INTO ev VALUES (1, '2024-03-10 03:30:00+00'), (2, '2024-03-10 05:30:00+00');
             CREATE MATERIALIZED VIEW daily AS SELECT at::date AS d, count(*) AS n FROM ev GROUP BY at::date;
             FLUSH;",
        )
        .await
        .unwrap();
        next_completed(&c, "daily").await;
        drop(c);
        server.stop().await;
    }
    wait_for_release(dir.path()).await;
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    assert_ne!(
        job_field(&c, "daily", "recovered_checkpoint_id").await,
        "NULL"
    );
    c.batch_execute("INSERT INTO ev VALUES (3, '2024-03-10 04:59:00+00'); FLUSH")
        .await
        .unwrap();
    assert_eq!(
        common::query_text(&c, "SELECT d::text, n FROM daily ORDER BY d").await,
        vec![vec!["2024-03-09", "2"], vec!["2024-03-10", "1"]]
    );
    server.stop().await;
}

/// A session window goes on from its checkpoint: a row after the restart that falls between
/// two sessions of before joins them (expected sessions worked out by hand: 0, 8 | 25 with a
/// 10-second gap, then 17 bridges them, 9 s after 8 and 8 s before 25).
#[tokio::test]
async fn a_session_window_goes_on_from_its_checkpoint() {
    let _serial = serial().await;
    let dir = tempfile::tempdir().unwrap();
    let view = "SELECT user_id, window_start::text, window_end::text, n FROM s \
                ORDER BY user_id, window_start";
    {
        let server = common::TestServer::start(dir.path()).await;
        let c = server.client().await;
        c.batch_execute(
            "SET checkpoint.interval = '100ms';
             CREATE TABLE clicks (user_id INT, ts TIMESTAMP);
             INSERT INTO clicks VALUES (1, '2024-01-01 00:00:00'), (1, '2024-01-01 00:00:08'),
                 (1, '2024-01-01 00:00:25'), (2, '2024-01-01 00:00:03');
             CREATE MATERIALIZED VIEW s AS SELECT user_id, window_start, window_end, count(*) AS n
                 FROM TABLE(SESSION(TABLE clicks PARTITION BY user_id, DESCRIPTOR(ts),
                                    INTERVAL '10' SECOND))
                 GROUP BY user_id, window_start, window_end;
             FLUSH;",
        )
        .await
        .unwrap();
        next_completed(&c, "s").await;
        assert_eq!(
            common::query_text(&c, view).await,
            vec![
                vec!["1", "2024-01-01 00:00:00", "2024-01-01 00:00:18", "2"],
                vec!["1", "2024-01-01 00:00:25", "2024-01-01 00:00:35", "1"],
                vec!["2", "2024-01-01 00:00:03", "2024-01-01 00:00:13", "1"],
            ]
        );
        drop(c);
        server.stop().await;
    }
    wait_for_release(dir.path()).await;
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    assert_ne!(job_field(&c, "s", "recovered_checkpoint_id").await, "NULL");
    c.batch_execute("INSERT INTO clicks VALUES (1, '2024-01-01 00:00:17'); FLUSH")
        .await
        .unwrap();
    assert_eq!(
        common::query_text(&c, view).await,
        vec![
            vec!["1", "2024-01-01 00:00:00", "2024-01-01 00:00:35", "4"],
            vec!["2", "2024-01-01 00:00:03", "2024-01-01 00:00:13", "1"],
        ]
    );
    server.stop().await;
}

//! Tables are snapshotted: a restart loads the snapshot and replays only the changelog after
//! it, and the changelog behind the snapshot (and behind every retained checkpoint) is
//! truncated, so disk and restart time follow the table's contents, not its history.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::TestServer;

fn config(dir: &std::path::Path, snapshot_ms: u64) -> weir::engine::EngineConfig {
    let mut c = weir::engine::EngineConfig::new(dir);
    c.barrier_interval = Duration::from_millis(20);
    c.table_snapshot_interval = Duration::from_millis(snapshot_ms);
    c
}

fn table_id(server: &TestServer, name: &str) -> u64 {
    server.engine.relation(name).expect("table").id
}

/// Rows of `SELECT` as text, sorted.
async fn rows(c: &tokio_postgres::Client, sql: &str) -> Vec<Vec<String>> {
    let mut r = common::query_text(c, sql).await;
    r.sort();
    r
}

/// The expected contents after `rounds` of churn over `n` keys: key k holds the value of
/// the last round, 1000 * round + k; keys divisible by 7 were deleted in the last round.
fn model(n: i64, rounds: i64) -> BTreeMap<i64, i64> {
    (0..n)
        .filter(|k| k % 7 != 0)
        .map(|k| (k, 1000 * rounds + k))
        .collect()
}

async fn churn(c: &tokio_postgres::Client, n: i64, rounds: i64) {
    for round in 1..=rounds {
        c.batch_execute("DELETE FROM t").await.unwrap();
        let values: Vec<String> = (0..n)
            .map(|k| format!("({k}, {}, {})", k % 10, 1000 * round + k))
            .collect();
        c.batch_execute(&format!("INSERT INTO t VALUES {}", values.join(", ")))
            .await
            .unwrap();
        c.batch_execute("DELETE FROM t WHERE id % 7 = 0; FLUSH")
            .await
            .unwrap();
    }
}

async fn check(c: &tokio_postgres::Client, n: i64, rounds: i64) {
    let m = model(n, rounds);
    let expected: Vec<Vec<String>> = m
        .iter()
        .map(|(k, v)| vec![k.to_string(), v.to_string()])
        .collect();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort();
    assert_eq!(rows(c, "SELECT id, v FROM t").await, expected_sorted);
    let mut by_grp: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for (k, v) in &m {
        let e = by_grp.entry(k % 10).or_default();
        e.0 += 1;
        e.1 += v;
    }
    let mut agg: Vec<Vec<String>> = by_grp
        .iter()
        .map(|(g, (n, s))| vec![g.to_string(), n.to_string(), s.to_string()])
        .collect();
    agg.sort();
    assert_eq!(rows(c, "SELECT grp, n, s FROM agg").await, agg);
    assert_eq!(rows(c, "SELECT grp, n, s FROM agg_ckpt").await, agg);
    // A point read on the primary key.
    let k = 8;
    assert_eq!(
        rows(c, &format!("SELECT v FROM t WHERE id = {k}")).await,
        vec![vec![m[&k].to_string()]]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_follows_the_contents_not_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let n = 300;
    let bytes_after_one;
    {
        let server = TestServer::start_with(config(dir.path(), 0)).await;
        let c = server.client().await;
        c.batch_execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, grp BIGINT, v BIGINT);
             CREATE MATERIALIZED VIEW agg AS
               SELECT grp, count(*) AS n, sum(v) AS s FROM t GROUP BY grp;
             SET checkpoint.interval = '50ms';
             CREATE MATERIALIZED VIEW agg_ckpt AS
               SELECT grp, count(*) AS n, sum(v) AS s FROM t GROUP BY grp;",
        )
        .await
        .unwrap();
        churn(&c, n, 1).await;
        check(&c, n, 1).await;
        tokio::time::sleep(Duration::from_millis(400)).await;
        c.batch_execute("FLUSH").await.unwrap();
        let id = table_id(&server, "t");
        let (bytes, snapshot_seq) = server.engine.table_storage(id).unwrap();
        assert!(snapshot_seq > 0, "a snapshot step was taken");
        bytes_after_one = bytes;
        // Ten more rounds of churn: the changelog is truncated behind the snapshot and the
        // checkpoints, so it does not grow with them.
        churn(&c, n, 11).await;
        check(&c, n, 11).await;
        tokio::time::sleep(Duration::from_millis(400)).await;
        c.batch_execute("FLUSH").await.unwrap();
        let (bytes, _) = server.engine.table_storage(id).unwrap();
        assert!(
            bytes <= bytes_after_one * 2,
            "changelog grew with churn: {bytes_after_one} -> {bytes} bytes"
        );
        drop(c);
        server.stop().await;
    }
    // Restart: tables come from their snapshots, views from checkpoints or the contents.
    let server = TestServer::start_with(config(dir.path(), 60_000)).await;
    let c = server.client().await;
    check(&c, n, 11).await;
    // Writes after the restart go on from the right sequence numbers, and survive another
    // restart (the shutdown's last snapshot step holds them; the crash test covers a kill,
    // after which the changelog after the snapshot is replayed).
    churn(&c, n, 12).await;
    check(&c, n, 12).await;
    drop(c);
    server.stop().await;
    let server = TestServer::start_with(config(dir.path(), 60_000)).await;
    let c = server.client().await;
    check(&c, n, 12).await;
    drop(c);
    server.stop().await;
}

/// Rows written before a table's first snapshot step are in it (with a long interval, the first
/// step is the one that truncates the processed changelog, or the shutdown's), and a restart
/// from that snapshot alone loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_snapshot_step_holds_the_rows_written_before_it() {
    let dir = tempfile::tempdir().unwrap();
    {
        let server = TestServer::start_with(config(dir.path(), 3_600_000)).await;
        let c = server.client().await;
        c.batch_execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, grp BIGINT, v BIGINT);
             INSERT INTO t VALUES (1, 1, 10), (2, 1, 20), (3, 2, 30);
             DELETE FROM t WHERE id = 2;
             INSERT INTO t VALUES (4, 2, 40);
             FLUSH;",
        )
        .await
        .unwrap();
        drop(c);
        server.stop().await;
    }
    for _ in 0..2 {
        let server = TestServer::start_with(config(dir.path(), 0)).await;
        let c = server.client().await;
        assert_eq!(
            rows(&c, "SELECT id, grp, v FROM t").await,
            vec![
                vec!["1".to_string(), "1".to_string(), "10".to_string()],
                vec!["3".to_string(), "2".to_string(), "30".to_string()],
                vec!["4".to_string(), "2".to_string(), "40".to_string()],
            ]
        );
        // The shutdown's step held every row, and the changelog behind it was truncated.
        let id = table_id(&server, "t");
        let (bytes, seq) = server.engine.table_storage(id).unwrap();
        assert!(seq > 0);
        assert_eq!(bytes, 0, "changelog truncated behind the snapshot");
        drop(c);
        server.stop().await;
    }
}

/// Several tables share one snapshot: a table dropped after it leaves nothing behind at
/// restart (a new table of the same name starts empty), a secondary index is rebuilt from the
/// restored rows, and only the newest snapshot is kept on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_share_one_snapshot_and_dropped_tables_stay_dropped() {
    let dir = tempfile::tempdir().unwrap();
    {
        // No snapshot but the one taken below.
        let server = TestServer::start_with(config(dir.path(), 3_600_000)).await;
        let c = server.client().await;
        c.batch_execute(
            "CREATE TABLE a (id BIGINT PRIMARY KEY, name TEXT);
             CREATE INDEX a_name ON a (name);
             CREATE TABLE b (x BIGINT);
             INSERT INTO a VALUES (1, 'one'), (2, 'two'), (3, 'three');
             INSERT INTO b VALUES (10), (20);
             FLUSH;",
        )
        .await
        .unwrap();
        server.engine.snapshot_tables_now();
        c.batch_execute("FLUSH; DROP TABLE b; DELETE FROM a WHERE id = 2; FLUSH;")
            .await
            .unwrap();
        drop(c);
        // Stopped without the shutdown's snapshot: the newest snapshot still holds `b`'s rows
        // and `a`'s row 2; the changelog after it holds the delete.
        server.stop_without_shutdown().await;
    }
    let snaps: Vec<String> = std::fs::read_dir(dir.path().join("tables"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("snap-"))
        .collect();
    assert_eq!(snaps.len(), 1, "one snapshot kept: {snaps:?}");
    for _ in 0..2 {
        let server = TestServer::start_with(config(dir.path(), 0)).await;
        let c = server.client().await;
        assert_eq!(
            rows(&c, "SELECT id, name FROM a").await,
            vec![
                vec!["1".to_string(), "one".to_string()],
                vec!["3".to_string(), "three".to_string()],
            ]
        );
        // Through the index (a point read on its column).
        assert_eq!(
            rows(&c, "SELECT id FROM a WHERE name = 'three'").await,
            vec![vec!["3".to_string()]]
        );
        assert_eq!(
            rows(&c, "SELECT id FROM a WHERE name = 'two'").await,
            Vec::<Vec<String>>::new()
        );
        c.batch_execute("CREATE TABLE b (x BIGINT); INSERT INTO b VALUES (7); FLUSH;")
            .await
            .unwrap();
        assert_eq!(
            rows(&c, "SELECT x FROM b").await,
            vec![vec!["7".to_string()]]
        );
        c.batch_execute("DROP TABLE b; FLUSH;").await.unwrap();
        drop(c);
        server.stop().await;
    }
}

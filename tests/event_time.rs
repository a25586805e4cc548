//! Event time across a restart: rows arrive out of order into a table with a watermark, some
//! late; views count tumbling windows, one emitting each window when it closes. The server is
//! stopped without a shutdown in the middle of open windows, after a checkpoint and a few more
//! epochs, and started again on the same data. Every view must then equal what the failure-free
//! run gives, computed here from the rows: the watermark after each epoch (one INSERT and a
//! FLUSH) is the largest time so far minus 5 s, a row below the previous epoch's watermark is
//! dropped, and a window [s, s + 10 s) is closed once the watermark reaches s + 10 s.
//!
//! A third view is an interval self-join whose state the watermark cleans: pairs of kept rows
//! with equal `v % 5` whose times are at most 3 s apart, the second later. Deleting expired
//! rows must lose no pair, before the restart or after it.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{TestServer, query_text};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DELAY_MS: i64 = 5_000;
const WINDOW_MS: i64 = 10_000;
const BATCHES: usize = 40;
const ROWS_PER_BATCH: usize = 20;

/// (id, v, ts in ms after 2024-01-01 00:00:00) per batch: times advance 500 ms a row, each
/// moved by -8 s .. +1 s, so rows come out of order and some arrive later than the watermark.
fn batches() -> Vec<Vec<(i64, i64, i64)>> {
    let mut rng = StdRng::seed_from_u64(7);
    let mut id = 0;
    (0..BATCHES)
        .map(|_| {
            (0..ROWS_PER_BATCH)
                .map(|_| {
                    id += 1;
                    let ts = (id * 500 + rng.random_range(-8_000..1_000)).max(0);
                    (id, rng.random_range(1..100), ts)
                })
                .collect()
        })
        .collect()
}

/// What the failure-free run holds after `batches`: the kept rows, the watermark (ms) and the
/// number of late rows.
fn expected(batches: &[Vec<(i64, i64, i64)>]) -> (Vec<(i64, i64, i64)>, Option<i64>, usize) {
    let mut watermark: Option<i64> = None;
    let mut max: Option<i64> = None;
    let mut kept = Vec::new();
    let mut late = 0;
    for batch in batches {
        for &(id, v, ts) in batch {
            if watermark.is_some_and(|w| ts < w) {
                late += 1;
            } else {
                kept.push((id, v, ts));
                max = Some(max.map_or(ts, |m| m.max(ts)));
            }
        }
        if let Some(m) = max {
            watermark = Some(watermark.map_or(m - DELAY_MS, |w| w.max(m - DELAY_MS)));
        }
    }
    (kept, watermark, late)
}

/// Per window start (s after 2024-01-01): (rows, sum, min, max).
fn windows(rows: &[(i64, i64, i64)]) -> BTreeMap<i64, (i64, i64, i64, i64)> {
    let mut out: BTreeMap<i64, (i64, i64, i64, i64)> = BTreeMap::new();
    for &(_, v, ts) in rows {
        let start = ts.div_euclid(WINDOW_MS) * WINDOW_MS / 1000;
        let e = out.entry(start).or_insert((0, 0, i64::MAX, i64::MIN));
        e.0 += 1;
        e.1 += v;
        e.2 = e.2.min(v);
        e.3 = e.3.max(v);
    }
    out
}

fn rows_of(w: &BTreeMap<i64, (i64, i64, i64, i64)>, closed_below: Option<i64>) -> Vec<Vec<String>> {
    w.iter()
        .filter(|(s, _)| closed_below.is_none_or(|wm| (*s * 1000 + WINDOW_MS) <= wm))
        .map(|(s, (n, sum, lo, hi))| {
            vec![
                s.to_string(),
                n.to_string(),
                sum.to_string(),
                lo.to_string(),
                hi.to_string(),
            ]
        })
        .collect()
}

async fn insert(c: &tokio_postgres::Client, batch: &[(i64, i64, i64)]) {
    let values: Vec<String> = batch
        .iter()
        .map(|(id, v, ts)| {
            format!("({id}, {v}, TIMESTAMP '2024-01-01 00:00:00' + INTERVAL '{ts} milliseconds')")
        })
        .collect();
    c.batch_execute(&format!(
        "INSERT INTO ev VALUES {}; FLUSH",
        values.join(", ")
    ))
    .await
    .unwrap();
}

const CLOSED: &str = "SELECT CAST(date_part('epoch', window_start) AS BIGINT) - 1704067200, n, s, lo, hi \
                      FROM closed ORDER BY 1";
const LIVE: &str = "SELECT CAST(date_part('epoch', window_start) AS BIGINT) - 1704067200, n, s, lo, hi \
                    FROM live ORDER BY 1";

const PAIRS: &str = "SELECT n, s FROM pairs";

/// The interval self-join's (pairs, sum of first id * 1000 + second id) over the kept rows.
fn pairs(rows: &[(i64, i64, i64)]) -> Vec<Vec<String>> {
    let (mut n, mut s) = (0i64, 0i64);
    for a in rows {
        for b in rows {
            if a.1 % 5 == b.1 % 5 && a.2 < b.2 && b.2 <= a.2 + 3_000 {
                n += 1;
                s += a.0 * 1000 + b.0;
            }
        }
    }
    vec![vec![n.to_string(), s.to_string()]]
}

async fn check(c: &tokio_postgres::Client, sent: &[Vec<(i64, i64, i64)>]) {
    let (kept, watermark, _) = expected(sent);
    assert_eq!(query_text(c, PAIRS).await, pairs(&kept));
    let w = windows(&kept);
    assert_eq!(
        query_text(c, CLOSED).await,
        rows_of(&w, watermark.or(Some(i64::MIN)))
    );
    assert_eq!(query_text(c, LIVE).await, rows_of(&w, None));
    let table: Vec<Vec<String>> = query_text(c, "SELECT count(*) FROM ev").await;
    assert_eq!(table, vec![vec![kept.len().to_string()]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_after_a_restart_in_the_middle_equal_the_failure_free_run() {
    let all = batches();
    let (_, _, total_late) = expected(&all);
    assert!(total_late > 0, "the stream has late rows");
    let dir = tempfile::tempdir().unwrap();
    let first = 24;
    {
        let server = TestServer::start(dir.path()).await;
        let c = server.client().await;
        c.batch_execute(
            "SET checkpoint.interval = '100ms';
             CREATE TABLE ev (id BIGINT, v BIGINT, ts TIMESTAMP,
                              WATERMARK FOR ts AS ts - INTERVAL '5 seconds') APPEND ONLY;
             CREATE MATERIALIZED VIEW closed AS
               SELECT window_start, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi
               FROM TUMBLE(ev, ts, INTERVAL '10 seconds') GROUP BY window_start
               EMIT ON WINDOW CLOSE;
             CREATE MATERIALIZED VIEW live AS
               SELECT window_start, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi
               FROM TUMBLE(ev, ts, INTERVAL '10 seconds') GROUP BY window_start;
             CREATE MATERIALIZED VIEW pairs AS
               SELECT count(*) AS n, sum(a.id * 1000 + b.id) AS s
               FROM ev a JOIN ev b ON a.v % 5 = b.v % 5
                 AND b.ts > a.ts AND b.ts <= a.ts + INTERVAL '3 seconds'",
        )
        .await
        .unwrap();
        for b in &all[..first - 4] {
            insert(&c, b).await;
        }
        // A checkpoint of the views, then four more epochs that recovery replays.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let done = query_text(
                &c,
                "SELECT count(*) FROM weir_catalog.checkpoints \
                 WHERE job = 'closed' AND status = 'COMPLETED'",
            )
            .await;
            if done[0][0] != "0" {
                break;
            }
            assert!(Instant::now() < deadline, "no checkpoint completed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for b in &all[first - 4..first] {
            insert(&c, b).await;
        }
        check(&c, &all[..first]).await;
        server.stop_without_shutdown().await;
    }
    let server = TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute("FLUSH").await.unwrap();
    check(&c, &all[..first]).await;
    for b in &all[first..] {
        insert(&c, b).await;
    }
    check(&c, &all).await;
    // The watermark and the late rows since the restart.
    let (_, watermark, late) = expected(&all);
    let (_, _, late_before) = expected(&all[..first]);
    let wm = query_text(
        &c,
        "SELECT watermark, late_rows FROM weir_catalog.watermarks WHERE relation = 'ev'",
    )
    .await;
    let ms = watermark.unwrap();
    let text = format!(
        "2024-01-01 00:{:02}:{:02}{}",
        ms / 60_000,
        (ms / 1000) % 60,
        if ms % 1000 == 0 {
            String::new()
        } else {
            format!(".{:03}", ms % 1000)
        }
    );
    assert_eq!(wm, vec![vec![text, (late - late_before).to_string()]]);
    // The join kept only the rows of the last few seconds: at most the rows above the
    // watermark minus 3 s (the bound) per side, far fewer than the table's.
    let (kept, watermark, _) = expected(&all);
    let recent = kept
        .iter()
        .filter(|r| r.2 >= watermark.unwrap() - 3_000)
        .count();
    let join_rows = query_text(
        &c,
        "SELECT split_part(state_table, ':', 2), CAST(sum(rows) AS BIGINT) \
         FROM weir_catalog.state_tables \
         WHERE job = 'pairs' AND state_table LIKE '%hash_join.left' OR \
         job = 'pairs' AND state_table LIKE '%hash_join.right' GROUP BY 1",
    )
    .await;
    assert_eq!(join_rows.len(), 2, "{join_rows:?}");
    for row in join_rows {
        let n: usize = row[1].parse().unwrap();
        assert!(
            n <= recent,
            "{row:?} holds more than the {recent} recent rows"
        );
    }
    assert!(recent < kept.len() / 4);
    server.stop().await;
}

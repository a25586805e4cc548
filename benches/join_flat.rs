//! End-to-end bench: Nexmark q7 (the highest bid of each 10-second window, found by joining the
//! bids with the windows' maximum prices over a time band) over endless bid streams, sampled as
//! it runs, to show that watermarks keep an interval join's state flat while the same join
//! without them keeps every bid.
//!
//! One in-process server (state in RocksDB, `--memory-limit` 512 MiB) with two endless Nexmark
//! `bid` tables of the same stream, each paced at `WEIR_JOIN_EVENTS_PER_SECOND` events per
//! second (default 10,000; the generator's event time runs at 10,000 events per second): `bid`
//! with `WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND`, `bid_plain` without. Views,
//! checkpointed every 10 s:
//!
//! ```sql
//! -- on bid: the windows' maxima, each emitted once, then the join with its time band
//! CREATE MATERIALIZED VIEW maxes AS SELECT max(price) AS maxprice, window_end AS date_time
//!   FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) GROUP BY window_end EMIT ON WINDOW CLOSE;
//! CREATE MATERIALIZED VIEW q7 AS SELECT b.auction, b.price, b.bidder, b.date_time
//!   FROM bid b JOIN maxes m ON b.price = m.maxprice
//!   WHERE b.date_time BETWEEN m.date_time - INTERVAL '10' SECOND AND m.date_time;
//! -- on bid_plain: the same query in one view, as Nexmark writes it
//! ```
//!
//! Every `WEIR_JOIN_SAMPLE_SECS` (default 30) for `WEIR_JOIN_SECS` (default 300) it prints:
//! seconds, events generated per table, each q7's join state rows (both sides, from
//! `weir_catalog.state_tables`), its rows, its last completed checkpoint's state bytes, and the
//! process's RSS; at the end each series' change from the first minute to the end. Run:
//! `cargo bench --features failpoints --bench join_flat`.

use std::time::{Duration, Instant};

mod support;

use support::{change_after_first_minute, checkpoint_bytes, env_u64, rss_mib, scalar};

/// The rows of `job`'s join state tables (both sides, expiry indexes left out).
async fn join_rows(client: &tokio_postgres::Client, job: &str) -> i64 {
    scalar(
        client,
        &format!(
            "SELECT CAST(sum(rows) AS BIGINT) FROM weir_catalog.state_tables WHERE job = '{job}' \
             AND (state_table LIKE '%hash_join.left' OR state_table LIKE '%hash_join.right')"
        ),
    )
    .await
}

struct Sample {
    secs: u64,
    join_rows: i64,
    plain_join_rows: i64,
    bytes: i64,
    plain_bytes: i64,
    rss_mib: f64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let total = env_u64("WEIR_JOIN_SECS", 300);
    let every = env_u64("WEIR_JOIN_SAMPLE_SECS", 30);
    let rate = env_u64("WEIR_JOIN_EVENTS_PER_SECOND", 10_000);
    let (srv, dir) = support::Server::start_in_temp("weir-join-flat", 512 << 20).await;
    let c = &srv.client;
    let columns = "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, \
                   date_time TIMESTAMP, extra VARCHAR";
    let with = format!(
        "WITH (connector = 'nexmark', nexmark.table = 'bid', nexmark.events_per_second = {rate})"
    );
    c.batch_execute(&format!(
        "SET checkpoint.interval = '10s';
         CREATE TABLE bid ({columns},
                           WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND) {with};
         CREATE TABLE bid_plain ({columns}) {with};
         CREATE MATERIALIZED VIEW maxes AS
           SELECT max(price) AS maxprice, window_end AS date_time
           FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) GROUP BY window_end
           EMIT ON WINDOW CLOSE;
         CREATE MATERIALIZED VIEW q7 AS
           SELECT b.auction, b.price, b.bidder, b.date_time FROM bid b JOIN maxes m
             ON b.price = m.maxprice
           WHERE b.date_time BETWEEN m.date_time - INTERVAL '10' SECOND AND m.date_time;
         CREATE MATERIALIZED VIEW q7_plain AS
           SELECT b.auction, b.price, b.bidder, b.date_time FROM bid_plain b JOIN
             (SELECT max(price) AS maxprice, window_end AS date_time
              FROM TUMBLE(bid_plain, date_time, INTERVAL '10' SECOND) GROUP BY window_end) m
             ON b.price = m.maxprice
           WHERE b.date_time BETWEEN m.date_time - INTERVAL '10' SECOND AND m.date_time;"
    ))
    .await
    .expect("create");
    println!(
        "{:>5} {:>10} {:>10} {:>8} {:>12} {:>15} {:>14} {:>16} {:>8}",
        "secs",
        "events",
        "join_rows",
        "q7_rows",
        "q7_bytes",
        "plain_join_rows",
        "plain_q7_rows",
        "plain_q7_bytes",
        "rss_mib"
    );
    let t0 = Instant::now();
    let mut samples = Vec::new();
    let mut next = every;
    while next <= total {
        tokio::time::sleep_until((t0 + Duration::from_secs(next)).into()).await;
        let events = scalar(
            c,
            "SELECT offset_events FROM weir_catalog.sources WHERE name = 'bid'",
        )
        .await;
        let q7_rows = scalar(c, "SELECT count(*) FROM q7").await;
        let plain_rows = scalar(c, "SELECT count(*) FROM q7_plain").await;
        let s = Sample {
            secs: next,
            join_rows: join_rows(c, "q7").await,
            plain_join_rows: join_rows(c, "q7_plain").await,
            bytes: checkpoint_bytes(c, "q7").await + checkpoint_bytes(c, "maxes").await,
            plain_bytes: checkpoint_bytes(c, "q7_plain").await,
            rss_mib: rss_mib("VmRSS:"),
        };
        println!(
            "{:>5} {:>10} {:>10} {:>8} {:>12} {:>15} {:>14} {:>16} {:>8.0}",
            s.secs,
            events,
            s.join_rows,
            q7_rows,
            s.bytes,
            s.plain_join_rows,
            plain_rows,
            s.plain_bytes,
            s.rss_mib
        );
        samples.push(s);
        next += every;
    }
    let change =
        |f: fn(&Sample) -> f64| change_after_first_minute(samples.iter().map(|s| (s.secs, f(s))));
    println!(
        "from the first minute to the end: join rows {}, state bytes {} (q7 and maxes); \
         without watermarks: join rows {}, state bytes {}; RSS {}",
        change(|s| s.join_rows as f64),
        change(|s| s.bytes as f64),
        change(|s| s.plain_join_rows as f64),
        change(|s| s.plain_bytes as f64),
        change(|s| s.rss_mib),
    );
    srv.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

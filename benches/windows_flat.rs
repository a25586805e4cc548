//! End-to-end bench: a windowed view over an endless Nexmark bid stream, sampled as it runs, to
//! show that a view emitting on window close keeps flat state while the same view without the
//! clause grows.
//!
//! One in-process server (state in RocksDB, `--memory-limit` 512 MiB) with an endless Nexmark
//! `bid` table paced at `WEIR_FLAT_EVENTS_PER_SECOND` events per second (default 20,000; the
//! generator's event time runs at 10,000 events per second, so 2 s of event time pass per
//! second), with `WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND`, and two views of
//! the same query, checkpointed every 10 s:
//!
//! ```sql
//! SELECT window_start, count(*) AS bids, max(price) AS top, count(DISTINCT bidder) AS bidders
//! FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) GROUP BY window_start [EMIT ON WINDOW CLOSE]
//! ```
//!
//! `closed` emits each window once and drops its state; `updating` keeps every window's groups
//! and distinct bidders. Every `WEIR_FLAT_SAMPLE_SECS` (default 30) for `WEIR_FLAT_SECS`
//! (default 600) it prints: seconds, the source offset (events), the table's rows, each view's
//! last completed checkpoint's state bytes and rows, and the process's RSS. At the end it prints
//! each series' change from the first minute to the end. Run: `cargo bench --features
//! failpoints --bench windows_flat`.

use std::time::{Duration, Instant};

mod support;

use support::{change_after_first_minute, checkpoint_bytes, env_u64, rss_mib, scalar};

struct Sample {
    secs: u64,
    closed_bytes: i64,
    updating_bytes: i64,
    rss_mib: f64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let total = env_u64("WEIR_FLAT_SECS", 600);
    let every = env_u64("WEIR_FLAT_SAMPLE_SECS", 30);
    let rate = env_u64("WEIR_FLAT_EVENTS_PER_SECOND", 20_000);
    let (srv, dir) = support::Server::start_in_temp("weir-flat", 512 << 20).await;
    let c = &srv.client;
    let query = "SELECT window_start, count(*) AS bids, max(price) AS top, \
                 count(DISTINCT bidder) AS bidders \
                 FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) GROUP BY window_start";
    c.batch_execute(&format!(
        "SET checkpoint.interval = '10s';
         CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR,
                           url VARCHAR, date_time TIMESTAMP, extra VARCHAR,
                           WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
           WITH (connector = 'nexmark', nexmark.table = 'bid',
                 nexmark.events_per_second = {rate});
         CREATE MATERIALIZED VIEW closed AS {query} EMIT ON WINDOW CLOSE;
         CREATE MATERIALIZED VIEW updating AS {query};"
    ))
    .await
    .expect("create");
    println!(
        "{:>5} {:>12} {:>12} {:>14} {:>12} {:>14} {:>12} {:>9}",
        "secs",
        "events",
        "table_rows",
        "closed_bytes",
        "closed_rows",
        "updating_bytes",
        "updating_rows",
        "rss_mib"
    );
    let t0 = Instant::now();
    let mut samples = Vec::new();
    let mut next = every;
    while next <= total {
        tokio::time::sleep_until((t0 + Duration::from_secs(next)).into()).await;
        let events = scalar(c, "SELECT offset_events FROM weir_catalog.sources").await;
        let rows = scalar(c, "SELECT rows FROM weir_catalog.sources").await;
        let closed_rows = scalar(c, "SELECT count(*) FROM closed").await;
        let updating_rows = scalar(c, "SELECT count(*) FROM updating").await;
        let s = Sample {
            secs: next,
            closed_bytes: checkpoint_bytes(c, "closed").await,
            updating_bytes: checkpoint_bytes(c, "updating").await,
            rss_mib: rss_mib("VmRSS:"),
        };
        println!(
            "{:>5} {:>12} {:>12} {:>14} {:>12} {:>14} {:>12} {:>9.0}",
            s.secs,
            events,
            rows,
            s.closed_bytes,
            closed_rows,
            s.updating_bytes,
            updating_rows,
            s.rss_mib
        );
        samples.push(s);
        next += every;
    }
    let change =
        |f: fn(&Sample) -> f64| change_after_first_minute(samples.iter().map(|s| (s.secs, f(s))));
    println!(
        "from the first minute to the end: closed state {}, updating state {}, RSS {}",
        change(|s| s.closed_bytes as f64),
        change(|s| s.updating_bytes as f64),
        change(|s| s.rss_mib),
    );
    srv.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

//! End-to-end bench: restart time and disk after a table's history, against its contents.
//!
//! Two data directories, in one run: (a) N rows inserted once (default 1,000,000;
//! `WEIR_RESTART_ROWS`), (b) the same N rows inserted, deleted and inserted again 10 times
//! (`WEIR_RESTART_CHURN`), each under a grouped aggregate view. After a clean shutdown the
//! server is opened again and timed until it answers the view; the answer is checked against
//! the sums computed here. Prints restart seconds and the data directory's bytes for both, and
//! their ratios. Run: `cargo bench --features failpoints --bench restart`.

use std::path::Path;
use std::time::Instant;

mod support;

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                total += dir_bytes(&p);
            } else if let Ok(m) = e.metadata() {
                total += m.len();
            }
        }
    }
    total
}

async fn load(client: &tokio_postgres::Client, rows: u64) {
    support::copy_rows(client, rows, |id, buf| {
        use std::fmt::Write;
        let _ = writeln!(buf, "{id},{},{}", id % 1000, id % 977);
    })
    .await;
}

/// Builds the history, stops, restarts; returns (restart seconds, data directory bytes).
async fn scenario(dir: &Path, rows: u64, churn: usize) -> (f64, u64) {
    let s = support::Server::start(dir).await;
    s.client
        .batch_execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, grp BIGINT, v BIGINT);
             CREATE MATERIALIZED VIEW agg AS SELECT grp, count(*) AS n, sum(v) AS s FROM t GROUP BY grp;",
        )
        .await
        .expect("schema");
    load(&s.client, rows).await;
    for _ in 0..churn {
        s.client
            .batch_execute("DELETE FROM t")
            .await
            .expect("delete");
        load(&s.client, rows).await;
    }
    s.client.batch_execute("FLUSH").await.expect("flush");
    s.stop().await;
    let bytes = dir_bytes(dir);
    let t0 = Instant::now();
    let s = support::Server::start(dir).await;
    let got = s
        .client
        .query_one("SELECT sum(n)::BIGINT, sum(s)::BIGINT FROM agg", &[])
        .await
        .expect("select");
    let restart = t0.elapsed().as_secs_f64();
    let expected_sum: i64 = (0..rows as i64).map(|id| id % 977).sum();
    assert_eq!(got.get::<_, i64>(0), rows as i64, "rows after restart");
    assert_eq!(got.get::<_, i64>(1), expected_sum, "sum after restart");
    s.stop().await;
    (restart, bytes)
}

fn main() {
    let rows: u64 = std::env::var("WEIR_RESTART_ROWS")
        .ok()
        .and_then(|s| s.replace('_', "").parse().ok())
        .unwrap_or(1_000_000);
    let churn: usize = std::env::var("WEIR_RESTART_CHURN")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let base = std::env::temp_dir().join(format!("weir-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (once_s, once_b) = runtime.block_on(scenario(&base.join("once"), rows, 0));
    let (churn_s, churn_b) = runtime.block_on(scenario(&base.join("churn"), rows, churn));
    let _ = std::fs::remove_dir_all(&base);
    println!("| history | restart until the view answers (s) | data directory (MiB) |");
    println!("| --- | --- | --- |");
    println!(
        "| {rows} rows inserted | {once_s:.2} | {:.1} |",
        once_b as f64 / (1 << 20) as f64
    );
    println!(
        "| {rows} rows inserted, deleted and inserted again {churn} times | {churn_s:.2} | {:.1} |",
        churn_b as f64 / (1 << 20) as f64
    );
    println!(
        "ratio churned / once: restart {:.2}x, disk {:.2}x",
        churn_s / once_s,
        churn_b as f64 / once_b as f64
    );
}

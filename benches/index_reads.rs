//! End-to-end bench: a point read on a column that is not the table's key, before and after
//! `CREATE INDEX` on it, and the cost of building the index and of a write that maintains it.
//!
//! For each N (default 10,000 and 10,000,000 rows; `WEIR_INDEX_ROWS` as a comma-separated
//! list overrides), in one run: a fresh server in-process, a table
//! `t (id BIGINT PRIMARY KEY, k BIGINT, v BIGINT)` with `k = mix(id) >> 1` (a bijection, halved: distinct per row in practice;
//! splitmix64), N rows loaded by COPY, then `WEIR_INDEX_SAMPLES` (default 20) samples of
//! `SELECT id FROM t WHERE k = $1` (each answer checked: exactly the row with that id) and of
//! a one-row `INSERT`; then `CREATE INDEX t_k ON t (k)` (timed) and the same samples again.
//! Medians in ms. Run: `cargo bench --features failpoints --bench index_reads`.

mod support;

use std::time::Instant;

use support::{median_ms, mix, rss_mib};

async fn load(client: &tokio_postgres::Client, rows: u64) {
    support::copy_rows(client, rows, |id, buf| {
        use std::fmt::Write;
        let _ = writeln!(buf, "{id},{},{}", mix(id) >> 1, id % 97);
    })
    .await;
}

/// (median point read ms, median INSERT ms) over `samples` probes.
async fn probe(client: &tokio_postgres::Client, rows: u64, samples: u64, round: u64) -> (f64, f64) {
    let read = client
        .prepare("SELECT id FROM t WHERE k = $1")
        .await
        .expect("prepare");
    let insert = client
        .prepare("INSERT INTO t VALUES ($1, $2, 0)")
        .await
        .expect("prepare");
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    for i in 0..samples {
        let id = mix(i ^ (round << 32)) % rows;
        let t = Instant::now();
        let r = client
            .query(&read, &[&((mix(id) >> 1) as i64)])
            .await
            .expect("select");
        reads.push(t.elapsed());
        assert_eq!(r.len(), 1, "k of row {id}");
        assert_eq!(r[0].get::<_, i64>(0), id as i64);
        // New rows get ids past the loaded ones and keys no loaded row has (top bit set).
        let new_id = rows + round * samples + i;
        let t = Instant::now();
        client
            .execute(&insert, &[&(new_id as i64), &(-(new_id as i64) - 1)])
            .await
            .expect("insert");
        writes.push(t.elapsed());
    }
    (median_ms(reads), median_ms(writes))
}

fn main() {
    let sizes: Vec<u64> = std::env::var("WEIR_INDEX_ROWS")
        .ok()
        .map(|s| {
            s.split(',')
                .filter_map(|x| x.trim().replace('_', "").parse().ok())
                .collect()
        })
        .unwrap_or_else(|| vec![10_000, 10_000_000]);
    let samples: u64 = std::env::var("WEIR_INDEX_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "| rows | point SELECT on k, no index (ms) | CREATE INDEX (s) | point SELECT on k, indexed (ms) | speed-up | INSERT before (ms) | INSERT with index (ms) | RSS before / after index (MiB) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for rows in sizes {
        runtime.block_on(async {
            let dir =
                std::env::temp_dir().join(format!("weir-index-{}-{rows}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let srv = support::Server::start(&dir).await;
            let client = &srv.client;
            client
                .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY, k BIGINT, v BIGINT)")
                .await
                .expect("schema");
            load(client, rows).await;
            let rss_before = rss_mib("VmRSS:");
            let (scan_ms, insert_ms) = probe(client, rows, samples, 0).await;
            let t = Instant::now();
            client
                .batch_execute("CREATE INDEX t_k ON t (k)")
                .await
                .expect("index");
            let build_s = t.elapsed().as_secs_f64();
            let rss_after = rss_mib("VmRSS:");
            let (index_ms, insert_indexed_ms) = probe(client, rows, samples, 1).await;
            println!(
                "| {rows} | {scan_ms:.2} | {build_s:.2} | {index_ms:.2} | {:.0}x | {insert_ms:.2} | {insert_indexed_ms:.2} | {rss_before:.0} / {rss_after:.0} |",
                scan_ms / index_ms
            );
            srv.stop().await;
            let _ = std::fs::remove_dir_all(&dir);
        });
    }
}

//! End-to-end bench: how the cost of a one-row change and of a point read grows with the data
//! held.
//!
//! For each N (default 10,000, 100,000, 1,000,000 and 10,000,000 rows; `WEIR_SCALING_ROWS` as
//! a comma-separated list overrides), in one run: a fresh server in-process, a table
//! `t (id BIGINT PRIMARY KEY, grp BIGINT, v BIGINT)` under a grouped aggregate view
//! (`agg`: count and sum per `grp`, 1,000 groups) and a filter/projection view (`proj`: one
//! row per row of `t`), N rows loaded by COPY, then `WEIR_SCALING_SAMPLES` (default 50)
//! samples of each operation, reported as medians in ms:
//!
//! - `INSERT` of one row + `FLUSH` (the views are up to date when FLUSH returns);
//! - point `SELECT v FROM t WHERE id = k` on the table, right after a write;
//! - point `SELECT n, s FROM agg WHERE grp = k` and `SELECT v2 FROM proj WHERE id = k`;
//!
//! and the resident memory after the load and at its peak. With `WEIR_SCALING_JOIN=1` the table
//! also has a join view over it (`j`: each row of `t` joined by `grp` to a 1,000-row table
//! `d`), so the load and each INSERT maintain a join's two state tables too. With
//! `WEIR_SCALING_TOPN=1` it has two Top-N views as well: `top3`, the three largest `v` of each
//! `grp` (`row_number() OVER (PARTITION BY grp ORDER BY v DESC) <= 3`, partitions of N/1,000
//! rows), and `top10`, the ten largest `v` of the whole table (`ORDER BY v DESC LIMIT 10`, one
//! partition of N rows). With `WEIR_SCALING_DYNFILTER=dynamic` it has a view of the rows above
//! the table's average, `above_avg` (`WHERE v > (SELECT avg(v)::numeric FROM t)`: a dynamic
//! filter, each move of the average reads the rows it passes over), and with
//! `WEIR_SCALING_DYNFILTER=cross` the same view written `v - (SELECT ...) > 0`, which compares
//! no column of `t` with the row and so stays a cross join with the one-row average and a
//! filter (each move re-reads every row). With `WEIR_SCALING_DYNFILTER=in_or` it has instead
//! `in_or`, the rows whose group is in a 100-row table `s` or whose `v` is below 1,000
//! (`WHERE grp IN (SELECT k FROM s) OR v < 1000`: an `IN` under `OR`, an EXISTS join on `grp`
//! and a single-row aggregate of `s`). With `WEIR_SCALING_SESSION=1` it has session
//! windows too: `tt`, each row of `t` with a time (a group's rows 5 s apart, a 60 s pause after
//! every tenth), and `sess`, the rows per session of each group (`SESSION` with a 10 s gap:
//! sessions of ten rows, each insert joining the last one). Each N
//! runs twice, side by side:
//! with the rows of tables and views in the state backend (RocksDB, `--memory-limit` from
//! `WEIR_SCALING_MEMORY_LIMIT`, default `1GB`) and with them in memory; each run is a child
//! process of its own so that its memory figures are its own (`WEIR_SCALING_MODES`, default
//! `backend,memory`, picks the runs). After each load the views' answers are checked against
//! sums computed by the bench from the generated rows. Run: `cargo bench --bench
//! scaling` (the test build's features share its artifacts: `cargo bench --features
//! failpoints --bench scaling`).

use std::time::Instant;

mod support;

use support::{median_ms, mix, rss_mib};

async fn load(client: &tokio_postgres::Client, rows: u64) {
    support::copy_rows(client, rows, |id, buf| {
        use std::fmt::Write;
        let _ = writeln!(buf, "{id},{},{}", id % 1000, mix(id) % 1_000_000);
    })
    .await;
}

struct Figures {
    rows: u64,
    mode: String,
    load_s: f64,
    insert_flush_ms: f64,
    table_point_ms: f64,
    agg_point_ms: f64,
    proj_point_ms: f64,
    rss_mib: f64,
    peak_mib: f64,
}

async fn measure(rows: u64, samples: usize, in_memory: bool, limit: u64) -> Figures {
    let dir = std::env::temp_dir().join(format!("weir-scaling-{}-{rows}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut config = weir::engine::EngineConfig::new(&dir);
    config.rows_in_memory = in_memory;
    config.memory_limit = limit;
    let srv = support::Server::start_with(config).await;
    let client = &srv.client;
    client
        .batch_execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, grp BIGINT, v BIGINT);
             CREATE MATERIALIZED VIEW agg AS SELECT grp, count(*) AS n, sum(v) AS s FROM t GROUP BY grp;
             CREATE MATERIALIZED VIEW proj AS SELECT id, v * 2 AS v2 FROM t WHERE v >= 0;",
        )
        .await
        .expect("schema");
    if std::env::var("WEIR_SCALING_JOIN").is_ok_and(|v| v == "1") {
        let dims: Vec<String> = (0..1000).map(|g| format!("({g}, 'g{g}')")).collect();
        client
            .batch_execute(&format!(
                "CREATE TABLE d (grp BIGINT PRIMARY KEY, name TEXT);
                 INSERT INTO d VALUES {};
                 CREATE MATERIALIZED VIEW j AS SELECT t.id, t.v, d.name FROM t JOIN d ON t.grp = d.grp;",
                dims.join(", ")
            ))
            .await
            .expect("join schema");
    }
    if topn_enabled() {
        client
            .batch_execute(
                "CREATE MATERIALIZED VIEW top3 AS SELECT grp, id, v FROM (SELECT grp, id, v, \
                 row_number() OVER (PARTITION BY grp ORDER BY v DESC, id) AS rn FROM t) AS r \
                 WHERE rn <= 3;
                 CREATE MATERIALIZED VIEW top10 AS SELECT id, v FROM t ORDER BY v DESC, id LIMIT 10;",
            )
            .await
            .expect("Top-N schema");
    }
    if session_enabled() {
        // Each group's rows 5 s apart with a 60 s pause after every tenth: sessions of ten
        // rows (a 10 s gap), and the rows inserted below continue the pattern.
        client
            .batch_execute(
                "CREATE MATERIALIZED VIEW tt AS SELECT grp, id, TIMESTAMP '2024-01-01 00:00:00' \
                 + ((id / 1000) * 5 + (id / 10000) * 60) * INTERVAL '1 second' AS ts FROM t;
                 CREATE MATERIALIZED VIEW sess AS SELECT grp, window_start, window_end, \
                 count(*) AS n FROM TABLE(SESSION(TABLE tt PARTITION BY grp, DESCRIPTOR(ts), \
                 INTERVAL '10' SECOND)) GROUP BY grp, window_start, window_end;",
            )
            .await
            .expect("session schema");
    }
    match dynfilter().as_deref() {
        Some("dynamic") => client
            .batch_execute(
                "CREATE MATERIALIZED VIEW above_avg AS SELECT id, v FROM t \
                 WHERE v > (SELECT avg(v)::numeric FROM t)",
            )
            .await
            .expect("dynamic filter schema"),
        Some("cross") => client
            .batch_execute(
                "CREATE MATERIALIZED VIEW above_avg AS SELECT id, v FROM t \
                 WHERE v - (SELECT avg(v)::numeric FROM t) > 0",
            )
            .await
            .expect("cross join schema"),
        Some("in_or") => client
            .batch_execute(
                "CREATE TABLE s (k BIGINT);
                 INSERT INTO s SELECT g * 10 FROM generate_series(0, 99) AS g(g);
                 CREATE MATERIALIZED VIEW in_or AS SELECT id, v FROM t \
                 WHERE grp IN (SELECT k FROM s) OR v < 1000",
            )
            .await
            .expect("IN under OR schema"),
        _ => {}
    }
    let t0 = Instant::now();
    load(client, rows).await;
    client.batch_execute("FLUSH").await.expect("flush");
    let load_s = t0.elapsed().as_secs_f64();
    let rss = rss_mib("VmRSS:");
    check_answers(client, rows).await;

    let insert = client
        .prepare("INSERT INTO t VALUES ($1, $2, $3)")
        .await
        .expect("prepare");
    let table_point = client
        .prepare("SELECT v FROM t WHERE id = $1")
        .await
        .expect("prepare");
    let agg_point = client
        .prepare("SELECT n, s FROM agg WHERE grp = $1")
        .await
        .expect("prepare");
    let proj_point = client
        .prepare("SELECT v2 FROM proj WHERE id = $1")
        .await
        .expect("prepare");
    let (mut ins, mut tp, mut ap, mut pp) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..samples as u64 {
        let id = rows + i;
        let t = Instant::now();
        client
            .execute(&insert, &[&(id as i64), &((id % 1000) as i64), &7i64])
            .await
            .expect("insert");
        client.batch_execute("FLUSH").await.expect("flush");
        ins.push(t.elapsed());

        let k = (mix(i ^ 0xABCD) % rows) as i64;
        let t = Instant::now();
        let r = client.query(&table_point, &[&k]).await.expect("select");
        tp.push(t.elapsed());
        assert_eq!(r.len(), 1, "row {k} of t");

        let g = (mix(i) % 1000) as i64;
        let t = Instant::now();
        let r = client.query(&agg_point, &[&g]).await.expect("select");
        ap.push(t.elapsed());
        assert_eq!(r.len(), 1, "group {g} of agg");

        let t = Instant::now();
        let r = client.query(&proj_point, &[&k]).await.expect("select");
        pp.push(t.elapsed());
        assert_eq!(r.len(), 1, "row {k} of proj");
    }
    srv.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    Figures {
        rows,
        mode: if in_memory { "memory" } else { "state backend" }.to_string(),
        load_s,
        insert_flush_ms: median_ms(ins),
        table_point_ms: median_ms(tp),
        agg_point_ms: median_ms(ap),
        proj_point_ms: median_ms(pp),
        rss_mib: rss,
        peak_mib: rss_mib("VmHWM:"),
    }
}

fn dynfilter() -> Option<String> {
    std::env::var("WEIR_SCALING_DYNFILTER").ok()
}

fn session_enabled() -> bool {
    std::env::var("WEIR_SCALING_SESSION").is_ok_and(|v| v == "1")
}

fn topn_enabled() -> bool {
    std::env::var("WEIR_SCALING_TOPN").is_ok_and(|v| v == "1")
}

/// The first column of a one-row answer as an integer (`sum` may come back as numeric text).
async fn scalar(client: &tokio_postgres::Client, sql: &str) -> Vec<i128> {
    let msgs = client.simple_query(sql).await.expect("query");
    let row = msgs
        .iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => Some(r),
            _ => None,
        })
        .expect("one row");
    (0..row.len())
        .map(|i| {
            let text = row.get(i).expect("not NULL");
            text.parse()
                .unwrap_or_else(|_| panic!("{sql}: {text} is not an integer"))
        })
        .collect()
}

/// Checks the views after the load against sums computed here from the generator: every
/// row is in `agg`'s counts and sums, in `proj` (all `v` are >= 0) and, with the join, in `j`
/// (every `grp` has its row in `d`).
async fn check_answers(client: &tokio_postgres::Client, rows: u64) {
    let sum_v: i128 = (0..rows).map(|id| (mix(id) % 1_000_000) as i128).sum();
    let n = rows as i128;
    assert_eq!(
        scalar(client, "SELECT sum(n), sum(s) FROM agg").await,
        vec![n, sum_v],
        "agg"
    );
    assert_eq!(
        scalar(client, "SELECT count(*), sum(v2) FROM proj").await,
        vec![n, 2 * sum_v],
        "proj"
    );
    if std::env::var("WEIR_SCALING_JOIN").is_ok_and(|v| v == "1") {
        assert_eq!(
            scalar(client, "SELECT count(*), sum(v) FROM j").await,
            vec![n, sum_v],
            "j"
        );
    }
    if session_enabled() {
        // Ten rows per session when the rows fill whole tens of each group's sequence.
        let sessions: i128 = (0..1000u64)
            .map(|g| {
                let k = if rows > g {
                    (rows - g).div_ceil(1000)
                } else {
                    0
                };
                k.div_ceil(10) as i128
            })
            .sum();
        assert_eq!(
            scalar(client, "SELECT count(*), sum(n) FROM sess").await,
            vec![sessions, n],
            "sess"
        );
    }
    if dynfilter().as_deref() == Some("in_or") {
        // The groups 0, 10, ..., 990 are in s.
        let kept: Vec<i128> = (0..rows)
            .filter(|id| id % 10 == 0 || mix(*id) % 1_000_000 < 1000)
            .map(|id| (mix(id) % 1_000_000) as i128)
            .collect();
        assert_eq!(
            scalar(client, "SELECT count(*), sum(v) FROM in_or").await,
            vec![kept.len() as i128, kept.iter().sum::<i128>()],
            "in_or"
        );
    } else if dynfilter().is_some() {
        // v > sum / n, compared exactly as v * n > sum.
        let above: Vec<i128> = (0..rows)
            .map(|id| (mix(id) % 1_000_000) as i128)
            .filter(|v| v * n > sum_v)
            .collect();
        assert_eq!(
            scalar(client, "SELECT count(*), sum(v) FROM above_avg").await,
            vec![above.len() as i128, above.iter().sum::<i128>()],
            "above_avg"
        );
    }
    if topn_enabled() {
        // The generator's rows ranked here: per group and overall, by v descending, then id.
        let mut per_group: Vec<Vec<(u64, u64)>> = vec![Vec::new(); 1000];
        let mut overall: Vec<(u64, u64)> = Vec::new();
        let keep = |list: &mut Vec<(u64, u64)>, item: (u64, u64), n: usize| {
            list.push(item);
            list.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            list.truncate(n);
        };
        for id in 0..rows {
            let v = mix(id) % 1_000_000;
            keep(&mut per_group[(id % 1000) as usize], (v, id), 3);
            if overall.len() < 10 || v >= overall[overall.len() - 1].0 {
                keep(&mut overall, (v, id), 10);
            }
        }
        let sum = |l: &[(u64, u64)]| l.iter().map(|(v, _)| *v as i128).sum::<i128>();
        let groups: Vec<&(u64, u64)> = per_group.iter().flatten().collect();
        assert_eq!(
            scalar(client, "SELECT count(*), sum(v), sum(id) FROM top3").await,
            vec![
                groups.len() as i128,
                groups.iter().map(|(v, _)| *v as i128).sum::<i128>(),
                groups.iter().map(|(_, id)| *id as i128).sum::<i128>()
            ],
            "top3"
        );
        assert_eq!(
            scalar(client, "SELECT count(*), sum(v), sum(id) FROM top10").await,
            vec![
                overall.len() as i128,
                sum(&overall),
                overall.iter().map(|(_, id)| *id as i128).sum::<i128>()
            ],
            "top10"
        );
    }
}

/// One measurement in this process: `WEIR_SCALING_CHILD=<rows>,<memory|backend>`; prints one
/// line of figures separated by tabs.
fn child(spec: &str, samples: usize, limit: u64) {
    let (rows, mode) = spec.split_once(',').expect("rows,mode");
    let rows: u64 = rows.parse().expect("rows");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let f = runtime.block_on(measure(rows, samples, mode == "memory", limit));
    println!(
        "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
        f.rows,
        f.mode,
        f.load_s,
        f.insert_flush_ms,
        f.table_point_ms,
        f.agg_point_ms,
        f.proj_point_ms,
        f.rss_mib,
        f.peak_mib
    );
}

fn run_child(rows: u64, mode: &str) -> Figures {
    let out = std::process::Command::new(std::env::current_exe().expect("bench binary"))
        .env("WEIR_SCALING_CHILD", format!("{rows},{mode}"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("child run");
    assert!(
        out.status.success(),
        "child run of {rows} rows ({mode}) failed"
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let line = text.lines().last().expect("figures");
    let v: Vec<&str> = line.split('\t').collect();
    let num = |i: usize| -> f64 { v[i].parse().expect("figure") };
    Figures {
        rows: v[0].parse().expect("rows"),
        mode: v[1].to_string(),
        load_s: num(2),
        insert_flush_ms: num(3),
        table_point_ms: num(4),
        agg_point_ms: num(5),
        proj_point_ms: num(6),
        rss_mib: num(7),
        peak_mib: num(8),
    }
}

fn main() {
    let samples: usize = std::env::var("WEIR_SCALING_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let limit = std::env::var("WEIR_SCALING_MEMORY_LIMIT")
        .ok()
        .map(|s| weir::state::backend::parse_memory_size(&s).expect("memory limit"))
        .unwrap_or(1 << 30);
    if let Ok(spec) = std::env::var("WEIR_SCALING_CHILD") {
        child(&spec, samples, limit);
        return;
    }
    let sizes: Vec<u64> = std::env::var("WEIR_SCALING_ROWS")
        .ok()
        .map(|s| {
            s.split(',')
                .filter_map(|x| x.trim().replace('_', "").parse().ok())
                .collect()
        })
        .unwrap_or_else(|| vec![10_000, 100_000, 1_000_000, 10_000_000]);
    println!(
        "| rows | rows of tables and views in | load + FLUSH (s) | INSERT + FLUSH (ms) | point SELECT t (ms) | point SELECT agg (ms) | point SELECT proj (ms) | RSS after load (MiB) | peak RSS (MiB) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let modes: Vec<String> = std::env::var("WEIR_SCALING_MODES")
        .unwrap_or_else(|_| "backend,memory".into())
        .split(',')
        .map(|m| m.trim().to_string())
        .collect();
    let mut first: Vec<Figures> = Vec::new();
    for rows in sizes {
        for (i, mode) in modes.iter().enumerate() {
            let f = run_child(rows, mode);
            println!(
                "| {} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} |",
                f.rows,
                f.mode,
                f.load_s,
                f.insert_flush_ms,
                f.table_point_ms,
                f.agg_point_ms,
                f.proj_point_ms,
                f.rss_mib,
                f.peak_mib
            );
            if let Some(base) = first.get(i) {
                println!(
                    "|   ratio to {} rows | | | {:.2}x | {:.2}x | {:.2}x | {:.2}x | | |",
                    base.rows,
                    f.insert_flush_ms / base.insert_flush_ms,
                    f.table_point_ms / base.table_point_ms,
                    f.agg_point_ms / base.agg_point_ms,
                    f.proj_point_ms / base.proj_point_ms
                );
            } else {
                first.push(f);
            }
        }
    }
}

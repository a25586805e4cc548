//! End-to-end bench: the Nexmark queries as materialized views over Weir's Nexmark source.
//!
//! For each query of `tests/nexmark_queries/` that Weir runs (files with a `-- refused:` line
//! are skipped), in a child process of its own (so that its peak memory is its own): a fresh
//! server in-process with its rows in the state backend (RocksDB, `--memory-limit` 1 GB), the
//! tables the query reads created as Nexmark connector tables of `WEIR_NEXMARK_BENCH_EVENTS`
//! events (default 10,000,000; unthrottled, the default seed and event rate), the view created
//! right after them, and the clock stopped when `FLUSH` returns (the sources have their whole
//! stream and the view is up to date). Reported per query:
//!
//! - events per second: the stream's events over the wall time (an event of a table the query
//!   does not read is not generated, but counts, as in the Nexmark suite's figures);
//! - events per CPU-second: the same over the process's user + system CPU time (all threads:
//!   the generator, the table writes, the dataflow, RocksDB's compactions);
//! - peak RSS (`VmHWM`) and state bytes (`weir_catalog.memory`: RocksDB's estimated live bytes
//!   on disk plus its memtables, tables and views and operator state together).
//!
//! With `WEIR_NEXMARK_BENCH_SOURCE=copy` the same events are loaded instead from CSV files
//! (written before the clock starts) through `COPY ... FROM STDIN` into plain tables. Each
//! query runs once per `streaming.parallelism` of `WEIR_NEXMARK_BENCH_PARALLELISM` (default
//! `1,2`: its keyed operators as one instance, then as two split by key hash), side by side.
//! `WEIR_NEXMARK_BENCH_QUERIES=q0,q1` picks queries. Run: `cargo bench --features failpoints
//! --bench nexmark`.

use std::path::{Path, PathBuf};
use std::time::Instant;

mod support;

use support::rss_mib;
use weir::connectors::nexmark::{
    DEFAULT_EVENT_RATE, DEFAULT_SEED, NexmarkConfig, NexmarkGenerator, NexmarkTable,
};

/// The three tables and their columns, in the generator's order.
const TABLES: [(&str, &str); 3] = [
    (
        "person",
        "id BIGINT, name VARCHAR, email_address VARCHAR, credit_card VARCHAR, city VARCHAR, \
         state VARCHAR, date_time TIMESTAMP, extra VARCHAR",
    ),
    (
        "auction",
        "id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, \
         reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, \
         category BIGINT, extra VARCHAR",
    ),
    (
        "bid",
        "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, \
         date_time TIMESTAMP, extra VARCHAR",
    ),
];

fn queries_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nexmark_queries")
}

/// The runnable queries: (name, SQL), in the order of their numbers.
fn queries() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(queries_dir())
        .expect("tests/nexmark_queries")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .map(|p| {
            let name = p.file_stem().expect("stem").to_string_lossy().to_string();
            (name, std::fs::read_to_string(&p).expect("query file"))
        })
        .filter(|(_, sql)| !sql.lines().any(|l| l.starts_with("-- refused: ")))
        .collect();
    let key = |name: &str| {
        let digits: String = name[1..].chars().take_while(char::is_ascii_digit).collect();
        (digits.parse::<u32>().unwrap_or(0), name.to_string())
    };
    out.sort_by_key(|(n, _)| key(n));
    out
}

/// The tables a query reads (its SQL, comments left out, names them as words).
fn tables_of(sql: &str) -> Vec<(&'static str, &'static str)> {
    let code: String = sql
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    let words: Vec<&str> = code
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .collect();
    TABLES
        .iter()
        .copied()
        .filter(|(t, _)| words.contains(t))
        .collect()
}

/// User + system CPU seconds of this process so far (`/proc/self/stat`, clock ticks of 1/100 s).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name in parentheses; utime and stime are the 14th and 15th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (tick(11) + tick(12)) / 100.0
}

struct Figures {
    query: String,
    seconds: f64,
    cpu_seconds: f64,
    peak_mib: f64,
    state_mib: f64,
    view_rows: i64,
}

async fn scalar(client: &tokio_postgres::Client, sql: &str) -> i64 {
    let row = client.query_one(sql, &[]).await.expect(sql);
    row.get::<_, i64>(0)
}

async fn measure(query: &str, sql: &str, events: u64, copy: bool, parallelism: u32) -> Figures {
    let dir = std::env::temp_dir().join(format!("weir-nexmark-{}-{query}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bench dir");
    let tables = tables_of(sql);
    let csv_dir = dir.join("csv");
    if copy {
        std::fs::create_dir_all(&csv_dir).expect("csv dir");
        write_csvs(&csv_dir, &tables, events);
    }
    let mut config = weir::engine::EngineConfig::new(&dir.join("data"));
    config.memory_limit = 1 << 30;
    let srv = support::Server::start_with(config).await;
    let client = &srv.client;
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    for (table, columns) in &tables {
        let ddl = if copy {
            format!("CREATE TABLE {table} ({columns})")
        } else {
            format!(
                "CREATE TABLE {table} ({columns}) WITH (connector = 'nexmark', nexmark.table = \
                 '{table}', nexmark.events = {events})"
            )
        };
        client.batch_execute(&ddl).await.expect("create table");
    }
    client
        .batch_execute(&format!("SET streaming.parallelism = {parallelism}"))
        .await
        .expect("set parallelism");
    client.batch_execute(sql).await.expect("create view");
    if copy {
        for (table, _) in &tables {
            copy_file(client, table, &csv_dir.join(format!("{table}.csv"))).await;
        }
    }
    client.batch_execute("FLUSH").await.expect("flush");
    let seconds = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let state = scalar(
        client,
        "SELECT disk_bytes + memtable_bytes FROM weir_catalog.memory",
    )
    .await;
    let view_rows = scalar(client, &format!("SELECT count(*) FROM {query}")).await;
    srv.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    Figures {
        query: query.to_string(),
        seconds,
        cpu_seconds: cpu,
        peak_mib: rss_mib("VmHWM:"),
        state_mib: state as f64 / (1 << 20) as f64,
        view_rows,
    }
}

/// Writes `<table>.csv` (no header) of events `0 .. events` for each of `tables`.
fn write_csvs(dir: &Path, tables: &[(&str, &str)], events: u64) {
    use std::io::Write;
    let config = NexmarkConfig {
        seed: DEFAULT_SEED,
        event_rate: DEFAULT_EVENT_RATE,
    };
    for (name, _) in tables {
        let table = match *name {
            "person" => NexmarkTable::Person,
            "auction" => NexmarkTable::Auction,
            _ => NexmarkTable::Bid,
        };
        let g = NexmarkGenerator::new(config, table, Some(events)).expect("generator");
        let file = std::fs::File::create(dir.join(format!("{name}.csv"))).expect("csv");
        let mut out = std::io::BufWriter::new(file);
        let mut at = 0;
        while at < events {
            let next = (at + 100_000).min(events);
            g.write_csv_between(at, next, &mut out).expect("write csv");
            at = next;
        }
        out.flush().expect("flush csv");
    }
}

/// `COPY table FROM STDIN CSV` of a file, in 1 MiB messages, 1,000,000 lines per COPY.
async fn copy_file(client: &tokio_postgres::Client, table: &str, path: &Path) {
    use futures::SinkExt;
    use std::io::BufRead;
    let file = std::io::BufReader::new(std::fs::File::open(path).expect("csv"));
    let mut lines = file.lines();
    loop {
        let sink = client
            .copy_in(&format!("COPY {table} FROM STDIN CSV"))
            .await
            .expect("copy");
        futures::pin_mut!(sink);
        let mut buf = String::new();
        let mut n = 0;
        let mut done = true;
        for line in lines.by_ref() {
            buf.push_str(&line.expect("line"));
            buf.push('\n');
            n += 1;
            if buf.len() > (1 << 20) {
                sink.send(bytes::Bytes::from(std::mem::take(&mut buf)))
                    .await
                    .expect("send");
            }
            if n == 1_000_000 {
                done = false;
                break;
            }
        }
        sink.send(bytes::Bytes::from(buf)).await.expect("send");
        sink.finish().await.expect("finish");
        if done {
            return;
        }
    }
}

fn child(spec: &str, events: u64, copy: bool, parallelism: u32) {
    let sql = queries()
        .into_iter()
        .find(|(n, _)| n == spec)
        .map(|(_, s)| s)
        .expect("query");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let f = runtime.block_on(measure(spec, &sql, events, copy, parallelism));
    println!(
        "{}\t{}\t{}\t{}\t{}\t{}",
        f.query, f.seconds, f.cpu_seconds, f.peak_mib, f.state_mib, f.view_rows
    );
}

fn run_child(query: &str, parallelism: u32) -> Figures {
    let out = std::process::Command::new(std::env::current_exe().expect("bench binary"))
        .env("WEIR_NEXMARK_BENCH_CHILD", query)
        .env(
            "WEIR_NEXMARK_BENCH_CHILD_PARALLELISM",
            parallelism.to_string(),
        )
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("child run");
    assert!(out.status.success(), "child run of {query} failed");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let line = text.lines().last().expect("figures");
    let v: Vec<&str> = line.split('\t').collect();
    let num = |i: usize| -> f64 { v[i].parse().expect("figure") };
    Figures {
        query: v[0].to_string(),
        seconds: num(1),
        cpu_seconds: num(2),
        peak_mib: num(3),
        state_mib: num(4),
        view_rows: v[5].parse().expect("rows"),
    }
}

fn main() {
    let events: u64 = std::env::var("WEIR_NEXMARK_BENCH_EVENTS")
        .ok()
        .and_then(|s| s.replace('_', "").parse().ok())
        .unwrap_or(10_000_000);
    let copy = std::env::var("WEIR_NEXMARK_BENCH_SOURCE").is_ok_and(|v| v == "copy");
    if let Ok(spec) = std::env::var("WEIR_NEXMARK_BENCH_CHILD") {
        let parallelism = std::env::var("WEIR_NEXMARK_BENCH_CHILD_PARALLELISM")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(1);
        child(&spec, events, copy, parallelism);
        return;
    }
    let parallelisms: Vec<u32> = std::env::var("WEIR_NEXMARK_BENCH_PARALLELISM")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    let picked: Option<Vec<String>> = std::env::var("WEIR_NEXMARK_BENCH_QUERIES")
        .ok()
        .map(|s| s.split(',').map(|q| q.trim().to_string()).collect());
    println!(
        "{} events, {} source",
        events,
        if copy { "COPY" } else { "generator" }
    );
    println!(
        "| query | parallelism | seconds | events/s | CPU s | events per CPU-second | peak RSS (MiB) | state (MiB) | view rows |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (name, _) in queries() {
        if picked.as_ref().is_some_and(|p| !p.contains(&name)) {
            continue;
        }
        for &parallelism in &parallelisms {
            let f = run_child(&name, parallelism);
            println!(
                "| {} | {} | {:.1} | {:.0} | {:.1} | {:.0} | {:.0} | {:.0} | {} |",
                f.query,
                parallelism,
                f.seconds,
                events as f64 / f.seconds,
                f.cpu_seconds,
                events as f64 / f.cpu_seconds,
                f.peak_mib,
                f.state_mib,
                f.view_rows
            );
        }
    }
}

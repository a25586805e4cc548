//! The Nexmark benchmark's queries q0–q22 as materialized views over the Nexmark connector
//! tables, each view's rows checked against DuckDB's batch answer over the same rows.
//!
//! The test writes the generator's rows (the default seed, `DEFAULT_EVENT_RATE` events per
//! second of event time, so that the stream spans several minutes of windows) to CSV files, creates the
//! three connector tables with the same parameters, throttled so that the rows arrive in many
//! small writes, creates every view of `tests/nexmark_queries/` while they arrive, waits for
//! the sources to finish, `FLUSH`es and compares each view with the output of
//! `tests/nexmark_queries/duckdb_reference.py`, whose SQL is written for DuckDB separately
//! (windows by epoch arithmetic). Then it creates the views again over the complete tables (a
//! backfill) and compares those too.
//!
//! A query file whose header has a line `-- check: SELECT ... FROM {view} ...` is compared
//! through that query (q12's windows of processing time are not reproducible; their counts
//! per bidder are).
//!
//! A query file whose header has a line `-- refused: SQLSTATE` is one Weir cannot run as a
//! view yet: the test checks that `CREATE MATERIALIZED VIEW` fails with that SQLSTATE (and so
//! notices when it starts to work). `docs/sql.md` ("Nexmark queries") lists the messages.
//!
//! Connector tables refuse writes, so the views here only ever see insertions; retractions
//! come only from the views' own operators (a window's maximum that changes, a join's match
//! that goes).
//!
//! Environment:
//! - `WEIR_NEXMARK_EVENTS`: events of the stream (default 40,000);
//! - `WEIR_NEXMARK_EVENT_RATE`: events per second of event time (default 100; 0.2 makes
//!   40,000 events span more than two days, for the per-day reports q15-q17);
//! - `WEIR_CLIENTS_PYTHON`: the Python with `duckdb` (default
//!   `$HOME/.cache/weir-clients/venv/bin/python`, which `.ci/run` installs from
//!   `tests/clients/requirements.txt`).

use crate::common;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weir::connectors::nexmark::{
    DEFAULT_SEED, NexmarkConfig, NexmarkGenerator, NexmarkModel, NexmarkTable,
};

/// Events per second of event time by default: 40,000 events span 400 seconds, 40 tumbling
/// windows.
const DEFAULT_EVENT_RATE: f64 = 100.0;

const DEFAULT_EVENTS: u64 = 40_000;

/// Seconds over which the throttled sources spread the stream.
const STREAM_SECONDS: u64 = 10;

/// Events per CSV chunk.
const CHUNK_EVENTS: u64 = 100_000;

fn queries_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nexmark_queries")
}

/// One query file.
struct Query {
    /// The view's name, the file's stem (`q5`, `q5_maxn`).
    name: String,
    /// The file: statements ending with `CREATE MATERIALIZED VIEW <name> AS ...`.
    sql: String,
    /// The SQLSTATE Weir refuses the view with, for a query it cannot run yet.
    refused: Option<String>,
    /// The query that reads the view for the comparison, `{view}` standing for its name
    /// (`-- check: ...` in the header; by default `SELECT * FROM {view}`): for a view whose
    /// rows depend on when they were processed (q12's `PROCTIME()`), what does not.
    check: Option<String>,
}

/// The query files in the order of their numbers.
fn queries() -> Vec<Query> {
    let mut out: Vec<Query> = std::fs::read_dir(queries_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_str().unwrap().to_string();
            let sql = std::fs::read_to_string(&p).unwrap();
            let refused = sql
                .lines()
                .find_map(|l| l.strip_prefix("-- refused: "))
                .map(|s| s.trim().to_string());
            assert!(
                sql.contains(&format!("CREATE MATERIALIZED VIEW {name} AS")),
                "{}: no view named after the file",
                p.display()
            );
            let check = sql
                .lines()
                .find_map(|l| l.strip_prefix("-- check: "))
                .map(|s| s.trim().to_string());
            Query {
                name,
                sql,
                refused,
                check,
            }
        })
        .collect();
    let key = |name: &str| {
        let digits: String = name[1..].chars().take_while(char::is_ascii_digit).collect();
        (digits.parse::<u32>().unwrap(), name.to_string())
    };
    out.sort_by_key(|q| key(&q.name));
    out
}

fn events() -> u64 {
    std::env::var("WEIR_NEXMARK_EVENTS")
        .ok()
        .filter(|v| !v.is_empty())
        .map(|v| v.replace('_', "").parse().expect("WEIR_NEXMARK_EVENTS"))
        .unwrap_or(DEFAULT_EVENTS)
}

fn event_rate() -> f64 {
    std::env::var("WEIR_NEXMARK_EVENT_RATE")
        .ok()
        .filter(|v| !v.is_empty())
        .map(|v| v.parse().expect("WEIR_NEXMARK_EVENT_RATE"))
        .unwrap_or(DEFAULT_EVENT_RATE)
}

fn config() -> NexmarkConfig {
    NexmarkConfig {
        seed: DEFAULT_SEED,
        event_rate: event_rate(),
    }
}

/// Writes `<table>.csv` of events `0 .. events` into `dir`.
fn write_csvs(dir: &Path, events: u64) {
    let model = NexmarkModel::new(config()).unwrap();
    for table in [
        NexmarkTable::Bid,
        NexmarkTable::Person,
        NexmarkTable::Auction,
    ] {
        let g = NexmarkGenerator::with_model(model.clone(), table, Some(events));
        let file = File::create(dir.join(format!("{}.csv", table.name()))).unwrap();
        let mut out = BufWriter::new(file);
        let mut at = 0;
        while at < events {
            let next = (at + CHUNK_EVENTS).min(events);
            g.write_csv_between(at, next, &mut out).unwrap();
            at = next;
        }
        out.flush().unwrap();
    }
}

fn python() -> PathBuf {
    std::env::var_os("WEIR_CLIENTS_PYTHON")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").expect("HOME or WEIR_CLIENTS_PYTHON");
            Path::new(&home).join(".cache/weir-clients/venv/bin/python")
        })
}

/// DuckDB's answers, by query name.
fn duckdb_answers(dir: &Path) -> BTreeMap<String, Vec<Vec<String>>> {
    let python = python();
    let out = Command::new(&python)
        .arg(queries_dir().join("duckdb_reference.py"))
        .arg(dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} (the Python with duckdb that .ci/run installs from \
                 tests/clients/requirements.txt; or set WEIR_CLIENTS_PYTHON): {e}",
                python.display()
            )
        });
    assert!(
        out.status.success(),
        "duckdb_reference.py failed ({}; it needs duckdb from tests/clients/requirements.txt):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut answers = BTreeMap::new();
    let mut current: Option<(String, Vec<Vec<String>>)> = None;
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        if let Some(name) = line.strip_prefix("== ") {
            if let Some((n, rows)) = current.take() {
                answers.insert(n, rows);
            }
            current = Some((name.to_string(), Vec::new()));
        } else {
            let (_, rows) = current.as_mut().expect("a row before any query");
            rows.push(line.split('\t').map(str::to_string).collect());
        }
    }
    if let Some((n, rows)) = current {
        answers.insert(n, rows);
    }
    answers
}

/// `s` if it is a timestamp `YYYY-MM-DD HH:MM:SS[.f...]`, with exactly three fractional digits.
fn canon_timestamp(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() < 19 {
        return None;
    }
    let shape = b[..19].iter().enumerate().all(|(i, &c)| match i {
        4 | 7 => c == b'-',
        10 => c == b' ',
        13 | 16 => c == b':',
        _ => c.is_ascii_digit(),
    });
    if !shape {
        return None;
    }
    let frac = match &s[19..] {
        "" => "",
        f if f.starts_with('.') && f.len() > 1 && f[1..].bytes().all(|c| c.is_ascii_digit()) => {
            &f[1..]
        }
        _ => return None,
    };
    let mut ms: String = frac.chars().take(3).collect();
    while ms.len() < 3 {
        ms.push('0');
    }
    Some(format!("{}.{ms}", &s[..19]))
}

/// The canonical text of a value: timestamps with milliseconds, integers as they are, other
/// numbers rounded to three decimals, anything else as it is.
fn canon(s: &str) -> String {
    if let Some(t) = canon_timestamp(s) {
        return t;
    }
    if s.parse::<i128>().is_ok() {
        return s.to_string();
    }
    if s.contains(['.', 'e', 'E'])
        && let Ok(v) = s.parse::<f64>()
        && v.is_finite()
    {
        if v.fract() == 0.0 && v.abs() < 1e15 {
            return format!("{}", v as i64);
        }
        return format!("{v:.3}");
    }
    s.to_string()
}

fn canon_rows(rows: &[Vec<String>]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| canon(c)).collect())
        .collect();
    out.sort();
    out
}

/// Equal canonical texts, or numbers within a relative 1e-9 (rounding at the third decimal
/// can split two nearly equal values).
fn cells_match(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
        _ => false,
    }
}

/// `Err` describing how Weir's rows differ from DuckDB's.
fn compare(weir: &[Vec<String>], duckdb: &[Vec<String>]) -> Result<(), String> {
    let w = canon_rows(weir);
    let d = canon_rows(duckdb);
    if w.len() == d.len()
        && w.iter()
            .zip(&d)
            .all(|(a, b)| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| cells_match(x, y)))
    {
        return Ok(());
    }
    let mut count: BTreeMap<&Vec<String>, i64> = BTreeMap::new();
    for r in &w {
        *count.entry(r).or_default() += 1;
    }
    for r in &d {
        *count.entry(r).or_default() -= 1;
    }
    let show = |sign: i64| {
        let rows: Vec<String> = count
            .iter()
            .filter(|(_, c)| c.signum() == sign)
            .take(5)
            .map(|(r, c)| format!("    {} (x{})", r.join(" | "), c.abs()))
            .collect();
        let total: i64 = count.values().filter(|c| c.signum() == sign).sum();
        format!("{} rows, first ones:\n{}", total.abs(), rows.join("\n"))
    };
    Err(format!(
        "Weir has {} rows, DuckDB {}\n  only in Weir: {}\n  only in DuckDB: {}",
        w.len(),
        d.len(),
        show(1),
        show(-1)
    ))
}

/// Creates the view of `q` under the name `name`; `Err((sqlstate, message))` if refused.
async fn create_view(
    client: &tokio_postgres::Client,
    q: &Query,
    name: &str,
) -> Result<(), (String, String)> {
    let sql = q.sql.replace(
        &format!("CREATE MATERIALIZED VIEW {} AS", q.name),
        &format!("CREATE MATERIALIZED VIEW {name} AS"),
    );
    client.simple_query(&sql).await.map(|_| ()).map_err(|e| {
        let db = e.as_db_error().unwrap_or_else(|| panic!("{name}: {e}"));
        (db.code().code().to_string(), db.message().to_string())
    })
}

fn create_table_sql(table: &str, columns: &str, events: u64) -> String {
    let per_second = (events / STREAM_SECONDS).max(1);
    format!(
        "CREATE TABLE {table} ({columns}) WITH (connector = 'nexmark', nexmark.table = \
         '{table}', nexmark.events = {events}, nexmark.event_rate = {}, \
         nexmark.events_per_second = {per_second})",
        event_rate()
    )
}

/// Waits until every source has its whole stream (throttled sources are not waited for by
/// `FLUSH`), failing if one fails.
async fn wait_for_sources(client: &tokio_postgres::Client) {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let rows = common::query_text(
            client,
            "SELECT name, status, failure FROM weir_catalog.sources WHERE status <> 'DONE'",
        )
        .await;
        if rows.is_empty() {
            return;
        }
        for r in &rows {
            assert_ne!(r[1], "FAILED", "source {} failed: {}", r[0], r[2]);
        }
        assert!(Instant::now() < deadline, "sources not done: {rows:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nexmark_views_match_duckdb() {
    let started = Instant::now();
    let events = events();
    let csv_dir = tempfile::tempdir().unwrap();
    write_csvs(csv_dir.path(), events);
    let answers = duckdb_answers(csv_dir.path());
    println!(
        "{events} events: CSV and DuckDB answers in {:.1?}",
        started.elapsed()
    );

    let data = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(data.path()).await;
    let client = server.client().await;
    let tables = [
        (
            "bid",
            "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, \
             date_time TIMESTAMP, extra VARCHAR",
        ),
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
    ];
    for (table, columns) in tables {
        client
            .batch_execute(&create_table_sql(table, columns, events))
            .await
            .unwrap();
    }

    let queries = queries();
    let mut failures = Vec::new();
    let mut runnable = Vec::new();
    // The views, created while the rows arrive.
    for q in &queries {
        match (create_view(&client, q, &q.name).await, &q.refused) {
            (Ok(()), None) => runnable.push(q),
            (Ok(()), Some(code)) => failures.push(format!(
                "{}: runs now (expected to be refused with {code}): remove its `-- refused` \
                 line, add it to duckdb_reference.py and to docs/sql.md",
                q.name
            )),
            (Err((code, msg)), Some(want)) if code == *want => {
                println!("{}: refused, {code} {msg}", q.name);
            }
            (Err((code, msg)), _) => failures.push(format!(
                "{}: refused with {code} {msg} (expected {})",
                q.name,
                q.refused.as_deref().unwrap_or("to run")
            )),
        }
    }
    println!("views created in {:.1?}", started.elapsed());
    wait_for_sources(&client).await;
    client.batch_execute("FLUSH").await.unwrap();
    println!("sources done, FLUSHed in {:.1?}", started.elapsed());

    let check = async |view: &str, q: &Query, failures: &mut Vec<String>| {
        let Some(want) = answers.get(&q.name) else {
            failures.push(format!("{view}: no DuckDB query in duckdb_reference.py"));
            return;
        };
        let read = match &q.check {
            Some(check) => check.replace("{view}", view),
            None => format!("SELECT * FROM {view}"),
        };
        let got = common::query_text(&client, &read).await;
        match compare(&got, want) {
            Ok(()) => println!("{view}: {} rows match DuckDB", got.len()),
            Err(e) => failures.push(format!("{view} differs from DuckDB: {e}")),
        }
    };
    for q in &runnable {
        check(&q.name, q, &mut failures).await;
    }
    // The same views again, backfilled from the complete tables.
    for q in &runnable {
        let name = format!("{}_backfilled", q.name);
        match create_view(&client, q, &name).await {
            Ok(()) => {}
            Err((code, msg)) => failures.push(format!("{name}: refused with {code} {msg}")),
        }
    }
    client.batch_execute("FLUSH").await.unwrap();
    for q in &runnable {
        check(&format!("{}_backfilled", q.name), q, &mut failures).await;
    }
    println!(
        "{} of {} queries run as views; checked in {:.1?}",
        runnable.len(),
        queries.len(),
        started.elapsed()
    );
    drop(client);
    server.stop().await;
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

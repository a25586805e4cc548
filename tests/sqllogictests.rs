//! Runs every `sql-tests/**/*.slt` file over pgwire against a fresh in-process server, once with
//! the simple query protocol and once with the extended protocol.
//!
//! `sqlite_corpus` (ignored: it needs a checkout of SQLite's sqllogictest repository) checks
//! Weir against that corpus, in plain SQL and with every query as a materialized view; see its
//! documentation below and `docs/sql.md`.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use common::slt::{Pg, PgError, Protocol};
use sqllogictest::{
    AsyncDB, Condition, Connection, DBOutput, DefaultColumnType, Normalizer, QueryExpect, Record,
    SortMode, StatementExpect, TestError, TestErrorKind,
};

fn slt_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("sql-tests")
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "slt") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("sql-tests"),
        &mut out,
    );
    out
}

async fn run_all(protocol: Protocol) {
    // `WEIR_SLT_ONLY=<part of a path>` runs the matching files only.
    let only = std::env::var("WEIR_SLT_ONLY").ok();
    let files: Vec<PathBuf> = slt_files()
        .into_iter()
        .filter(|f| {
            only.as_ref()
                .is_none_or(|o| f.to_string_lossy().contains(o.as_str()))
        })
        .collect();
    assert!(!files.is_empty(), "no .slt files found");
    let mut failures = Vec::new();
    for file in &files {
        let dir = tempfile::tempdir().unwrap();
        let server = common::TestServer::start(dir.path()).await;
        let addr = server.addr;
        let mut runner = sqllogictest::Runner::new(move || async move {
            Ok::<_, PgError>(Pg {
                client: common::connect(addr).await,
                protocol,
            })
        });
        if let Err(e) = runner.run_file_async(file).await {
            failures.push(format!("{}: {}", file.display(), e.display(true)));
        }
        server.stop().await;
    }
    let passed = files.len() - failures.len();
    eprintln!("slt: {passed} files passed, {} failed", failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slt_simple_protocol() {
    run_all(Protocol::Simple).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slt_extended_protocol() {
    run_all(Protocol::Extended).await;
}

// ---------------------------------------------------------------------------------------------
// SQLite's sqllogictest corpus
// ---------------------------------------------------------------------------------------------

/// The corpus files run when `WEIR_SLT_FILES` is not set, relative to `WEIR_SLT_CORPUS`: the
/// `select` files, one of `random/` and one of `index/` (the other `random/*/slt_good_0.test`
/// files take as long again each; name them in `WEIR_SLT_FILES` to run them).
const DEFAULT_CORPUS_FILES: &[&str] = &[
    "select1.test",
    "select2.test",
    "select3.test",
    "select4.test",
    "select5.test",
    "random/aggregates/slt_good_0.test",
    "index/between/1/slt_good_0.test",
];

/// The engine name `skipif`/`onlyif` records are matched against: records the corpus marks
/// `skipif postgresql` are skipped and `onlyif postgresql` ones run, as on PostgreSQL.
const ENGINE_LABEL: &str = "postgresql";

/// SQLite's reference runner hashes a result of more values than this, unless the file sets
/// another threshold with `hash-threshold`.
const DEFAULT_HASH_THRESHOLD: usize = 8;

/// How many failures of each kind a file's summary shows (`WEIR_SLT_VERBOSE=1` shows all).
const SHOWN_PER_FILE: usize = 12;

type CorpusRecord = Record<DefaultColumnType>;

/// Checks Weir against SQLite's sqllogictest corpus (long mode, run on purpose).
///
/// `WEIR_SLT_CORPUS` names the `test/` directory of a checkout of SQLite's sqllogictest
/// repository; `WEIR_SLT_FILES` (comma-separated paths relative to it) picks the files, by
/// default [`DEFAULT_CORPUS_FILES`]. Each file runs in two modes, each against fresh in-process
/// servers over pgwire (`WEIR_SLT_MODES=plain` or `=views` runs one):
///
/// 1. **plain SQL** ([`run_plain`]): every record as written, results rendered the way SQLite's
///    reference runner renders them ([`sqlite_value`]) and compared by the `sqllogictest` crate
///    (sorting, hashing);
/// 2. **views** ([`run_views`]): the file's `CREATE TABLE` statements, then every query as
///    `CREATE MATERIALIZED VIEW corpus_q<N>`, then the other statements (the data), `FLUSH`, and
///    each view read back and compared with its query's expected result.
///
/// Records are run as SQLite's reference runner runs them for its `postgresql` engine: `skipif
/// postgresql` and `onlyif <other engine>` records, and those after a `halt` that applies, are
/// skipped; `hash-threshold` and the `nosort`/`rowsort`/`valuesort` modes are applied and values
/// are compared exactly.
///
/// Prints per file and mode the records (views mode: queries) run, passed, failed and skipped
/// (skips by reason), the wall time and the time budget, and fails if any record failed in plain
/// SQL (`CREATE INDEX` and other index DDL counted apart, but still failures), any view returned
/// a wrong answer, could not be created or was refused as unsupported (`0A000`, counted apart),
/// or any record was left unrun when the file's budget (`WEIR_SLT_BUDGET_SECS`, by default
/// [`DEFAULT_FILE_BUDGET`]) ran out. `WEIR_SLT_VERBOSE=1` prints every failure in full.
/// `WEIR_SLT_VIEWS_PER_SERVER=N` spreads a file's views over servers of at most `N` views each
/// (each loads the data again); by default [`default_views_per_server`].
/// `WEIR_SLT_REFERENCE` (a libpq connection string, e.g. `host=127.0.0.1 user=postgres`) runs
/// the plain mode against that PostgreSQL server instead, in a scratch database it creates and
/// drops per file, to tell Weir's gaps from PostgreSQL's own differences with SQLite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long mode: needs SQLite's sqllogictest corpus in WEIR_SLT_CORPUS"]
async fn sqlite_corpus() {
    let root = std::env::var("WEIR_SLT_CORPUS").unwrap_or_else(|_| {
        panic!(
            "WEIR_SLT_CORPUS is not set: it must name the test/ directory of a checkout of \
             SQLite's sqllogictest repository (optionally with WEIR_SLT_FILES=a.test,b/c.test)"
        )
    });
    let root = PathBuf::from(root);
    assert!(
        root.is_dir(),
        "WEIR_SLT_CORPUS={} is not a directory",
        root.display()
    );
    let list = |var: &str, default: &[&str]| -> Vec<String> {
        match std::env::var(var) {
            Ok(list) => list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            Err(_) => default.iter().map(|s| s.to_string()).collect(),
        }
    };
    let files = list("WEIR_SLT_FILES", DEFAULT_CORPUS_FILES);
    let modes = list("WEIR_SLT_MODES", &["plain", "views"]);
    for mode in &modes {
        assert!(
            mode == "plain" || mode == "views",
            "WEIR_SLT_MODES: unknown mode {mode:?} (plain, views)"
        );
    }
    let reference = std::env::var("WEIR_SLT_REFERENCE").ok();
    let per_server = match std::env::var("WEIR_SLT_VIEWS_PER_SERVER") {
        Ok(n) => n
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .expect("WEIR_SLT_VIEWS_PER_SERVER must be a positive number"),
        Err(_) => default_views_per_server(),
    };

    let budget = match std::env::var("WEIR_SLT_BUDGET_SECS") {
        Ok(n) => Duration::from_secs(
            n.parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .expect("WEIR_SLT_BUDGET_SECS must be a positive number of seconds"),
        ),
        Err(_) => DEFAULT_FILE_BUDGET,
    };
    eprintln!(
        "SQLite corpus: {} file(s), modes {}, time budget {budget:?} per file and mode",
        files.len(),
        modes.join("+")
    );

    let mut summary = Vec::new();
    let mut failed = false;
    for name in &files {
        let steps = corpus_steps(load_corpus_file(&root.join(name), name));

        if modes.iter().any(|m| m == "plain") {
            let started = Instant::now();
            let deadline = started + budget;
            let plain = match &reference {
                Some(url) => run_plain_on_reference(url, &steps, deadline).await,
                None => {
                    let dir = tempfile::tempdir().unwrap();
                    let server = common::TestServer::start(dir.path()).await;
                    let stats = run_plain(weir_config(server.addr), &steps, deadline).await;
                    server.stop().await;
                    stats
                }
            };
            let index = plain.failures.iter().filter(|f| f.index).count();
            let line = format!(
                "{name} plain: {} records: {} passed, {} failed ({index} of them index DDL), \
                 {} skipped, {} not run (time {:.1?} of {budget:?})",
                plain.records,
                plain.passed,
                plain.failures.len(),
                plain.skipped.values().sum::<usize>(),
                plain.not_run,
                started.elapsed()
            );
            eprintln!("{line}");
            print_counts("skipped", &plain.skipped);
            print_failures(&plain.failures);
            failed |= !plain.failures.is_empty() || plain.not_run > 0;
            summary.push(line);
        }

        if reference.is_none() && modes.iter().any(|m| m == "views") {
            let started = Instant::now();
            let views = run_views(&steps, per_server, started + budget).await;
            let unsupported = views.unsupported.values().map(|(n, _)| n).sum::<usize>();
            let unchecked = views.unchecked.values().map(|(n, _)| n).sum::<usize>();
            let statements = views
                .statements_failed
                .values()
                .map(|(n, _)| n)
                .sum::<usize>();
            let line = format!(
                "{name} views: {} queries: {} views created, {} passed, {} failed, \
                 {unsupported} unsupported, {unchecked} not checked, {} skipped, {} not run; \
                 data statements failed: {statements} (+{} index DDL) (time {:.1?} of {budget:?})",
                views.queries,
                views.created,
                views.passed,
                views.failures.len(),
                views.skipped.values().sum::<usize>(),
                views.not_run,
                views.index_statements_failed,
                started.elapsed()
            );
            eprintln!("{line}");
            print_counts("skipped", &views.skipped);
            print_examples("unsupported", &views.unsupported);
            print_examples("not checked", &views.unchecked);
            print_examples("statement failed", &views.statements_failed);
            print_failures(&views.failures);
            failed |= !views.failures.is_empty() || unsupported > 0 || views.not_run > 0;
            summary.push(line);
        }
    }
    let summary = summary.join("\n");
    eprintln!("SQLite corpus:\n{summary}");
    assert!(
        !failed,
        "SQLite corpus: some records failed, were refused as views or were not run (details \
         above)"
    );
}

/// Prints reasons with their counts, most frequent first.
fn print_counts(what: &str, counts: &BTreeMap<String, usize>) {
    let mut counts: Vec<_> = counts.iter().collect();
    counts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (reason, n) in counts {
        eprintln!("  {what} {n}x: {reason}");
    }
}

/// Prints reasons with their counts and first occurrence, most frequent first.
fn print_examples(what: &str, counts: &BTreeMap<String, (usize, String)>) {
    let mut counts: Vec<_> = counts.iter().collect();
    counts.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
    for (reason, (n, at)) in counts.iter().take(SHOWN_PER_FILE) {
        eprintln!("  {what} {n}x: {reason} (e.g. {at})");
    }
    if counts.len() > SHOWN_PER_FILE {
        eprintln!("  {what}: ... and {} more", counts.len() - SHOWN_PER_FILE);
    }
}

/// How long each file may run in each mode when `WEIR_SLT_BUDGET_SECS` is not set; records
/// left when it runs out are counted as not run (and fail the test).
const DEFAULT_FILE_BUDGET: Duration = Duration::from_secs(1800);

/// How long one record may take before the run is abandoned as hung.
const RECORD_TIMEOUT: Duration = Duration::from_secs(300);

/// Awaits `work`, panicking if it takes longer than [`RECORD_TIMEOUT`] (`what` names it).
async fn within<T>(what: &str, work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(RECORD_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| panic!("no answer within {RECORD_TIMEOUT:?} to: {what}"))
}

/// Views per server when `WEIR_SLT_VIEWS_PER_SERVER` is not set: each view keeps its state in
/// its own RocksDB database, which holds about six files open, so the count follows the
/// process's open-files limit (Linux's `/proc/self/limits`; 1000 where it cannot be read).
fn default_views_per_server() -> usize {
    let limit = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            limits
                .lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse::<usize>().ok())
        });
    match limit {
        Some(files) => (files / 10).clamp(16, 1000),
        None => 1000,
    }
}

/// Reads and parses a corpus file.
///
/// SQLite's format allows a comment after a condition (`onlyif mysql # DIV for integer
/// division`), which the parser refuses; such comments are dropped first.
fn load_corpus_file(path: &Path, name: &str) -> Vec<CorpusRecord> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text: Vec<&str> = text
        .lines()
        .map(|line| {
            if line.starts_with("skipif") || line.starts_with("onlyif") {
                line.split('#').next().unwrap_or(line).trim_end()
            } else {
                line
            }
        })
        .collect();
    sqllogictest::parse_with_name(&text.join("\n"), name).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A statement or query of a corpus file (with its conditions already decided), or a record that
/// changes the runner's settings (`hash-threshold`).
struct Step {
    record: CorpusRecord,
    /// Why the record does not run here: the `skipif`/`onlyif` condition that excludes it for
    /// [`ENGINE_LABEL`], or the `halt` it follows.
    skip: Option<String>,
}

/// The first of `conditions` that excludes a record for [`ENGINE_LABEL`], as written.
fn skip_reason(conditions: &[Condition]) -> Option<String> {
    conditions
        .iter()
        .find(|c| match c {
            Condition::OnlyIf { label } => label != ENGINE_LABEL,
            Condition::SkipIf { label } => label == ENGINE_LABEL,
        })
        .map(|c| Record::<DefaultColumnType>::Condition(c.clone()).to_string())
}

/// The file's statements and queries in order, each with its `skipif`/`onlyif` conditions
/// decided; those after a `halt` that applies here are kept, marked skipped (SQLite's runner
/// stops there), so that the summary counts them.
///
/// A condition before `halt` applies to the `halt` (SQLite's runner); the parser instead keeps
/// it for the next statement, so those conditions are taken off that statement.
fn corpus_steps(records: Vec<CorpusRecord>) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut pending: Vec<Condition> = Vec::new();
    let mut leaked = 0;
    let mut halted: Option<String> = None;
    for record in records {
        let own = |conditions: &[Condition], leaked: usize| {
            halted
                .clone()
                .or_else(|| skip_reason(&conditions[leaked.min(conditions.len())..]))
        };
        match record {
            Record::Condition(c) => pending.push(c),
            Record::Halt { loc } => {
                if halted.is_none() && skip_reason(&pending).is_none() {
                    halted = Some(format!("after the halt at {loc}"));
                }
                leaked += pending.len();
                pending.clear();
            }
            Record::Statement {
                loc,
                conditions,
                connection,
                sql,
                expected,
                retry,
            } => {
                steps.push(Step {
                    skip: own(&conditions, leaked),
                    record: Record::Statement {
                        loc,
                        conditions: Vec::new(),
                        connection,
                        sql,
                        expected,
                        retry,
                    },
                });
                pending.clear();
                leaked = 0;
            }
            Record::Query {
                loc,
                conditions,
                connection,
                sql,
                expected,
                retry,
            } => {
                steps.push(Step {
                    skip: own(&conditions, leaked),
                    record: Record::Query {
                        loc,
                        conditions: Vec::new(),
                        connection,
                        sql,
                        expected,
                        retry,
                    },
                });
                pending.clear();
                leaked = 0;
            }
            r @ (Record::HashThreshold { .. } | Record::Control(_)) => steps.push(Step {
                record: r,
                skip: None,
            }),
            _ => {}
        }
    }
    steps
}

/// A sqllogictest connection that renders values as SQLite's reference runner does, by the
/// column types the current query record declares (set in `types` before each record).
struct CorpusDb {
    pg: Pg,
    types: Arc<Mutex<Vec<DefaultColumnType>>>,
}

#[async_trait]
impl AsyncDB for CorpusDb {
    type Error = PgError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, PgError> {
        let out = self.pg.run(sql).await?;
        let declared = self.types.lock().unwrap().clone();
        Ok(match out {
            DBOutput::Rows { types, rows } => {
                let types: Vec<DefaultColumnType> = (0..types.len())
                    .map(|i| declared.get(i).cloned().unwrap_or(DefaultColumnType::Any))
                    .collect();
                let rows = rows
                    .into_iter()
                    .map(|row| {
                        row.into_iter()
                            .zip(&types)
                            .map(|(v, t)| sqlite_value(v, t))
                            .collect()
                    })
                    .collect();
                DBOutput::Rows { types, rows }
            }
            other => other,
        })
    }

    async fn shutdown(&mut self) {}

    async fn sleep(dur: Duration) {
        tokio::time::sleep(dur).await;
    }

    fn error_sql_state(err: &PgError) -> Option<String> {
        Pg::error_sql_state(err)
    }
}

/// One value (PostgreSQL's text form, `NULL` and `(empty)` already substituted) as SQLite's
/// reference runner prints it for a column of type `ty`, reading it as its ODBC driver does:
/// `I` as a C `long` (booleans 1/0, fractions truncated toward zero), `R` as a double printed
/// `%.3f`, `T` as text with control and non-ASCII bytes shown as `@`.
fn sqlite_value(v: String, ty: &DefaultColumnType) -> String {
    if v == "NULL" {
        return v;
    }
    match ty {
        DefaultColumnType::Integer => match v.as_str() {
            "t" => "1".into(),
            "f" => "0".into(),
            s => match (s.parse::<i64>(), s.parse::<f64>()) {
                (Ok(i), _) => i.to_string(),
                (_, Ok(f)) if f.is_finite() => (f.trunc() as i64).to_string(),
                _ => v,
            },
        },
        DefaultColumnType::FloatingPoint => match v.as_str() {
            "t" => "1.000".into(),
            "f" => "0.000".into(),
            s => match s.parse::<f64>() {
                Ok(f) => format!("{f:.3}"),
                Err(_) => v,
            },
        },
        DefaultColumnType::Text => v
            .bytes()
            .map(|b| {
                if (b' '..=b'~').contains(&b) {
                    b as char
                } else {
                    '@'
                }
            })
            .collect(),
        DefaultColumnType::Any => v,
    }
}

/// Compares results as SQLite's reference runner does: one value per line, row after row, each
/// compared exactly (`strcmp`, no whitespace normalization).
fn sqlite_validator(_: Normalizer, actual: &[Vec<String>], expected: &[String]) -> bool {
    actual.iter().flatten().eq(expected.iter())
}

/// The number of result columns must be the number of types the record declares.
#[allow(clippy::ptr_arg)]
fn same_width(actual: &Vec<DefaultColumnType>, expected: &Vec<DefaultColumnType>) -> bool {
    actual.len() == expected.len()
}

/// A connection configuration for the in-process server at `addr`.
fn weir_config(addr: std::net::SocketAddr) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    config
        .host(addr.ip().to_string())
        .port(addr.port())
        .user("weir")
        .dbname("weir");
    config
}

async fn connect_to(config: &tokio_postgres::Config) -> Result<tokio_postgres::Client, PgError> {
    let (client, conn) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(PgError)?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// A runner over [`CorpusDb`] connections to `config`, set up like SQLite's reference runner.
fn corpus_runner(
    config: tokio_postgres::Config,
    types: Arc<Mutex<Vec<DefaultColumnType>>>,
) -> sqllogictest::Runner<CorpusDb, impl sqllogictest::MakeConnection<Conn = CorpusDb>> {
    let mut runner = sqllogictest::Runner::new(move || {
        let config = config.clone();
        let types = Arc::clone(&types);
        async move {
            Ok(CorpusDb {
                pg: Pg {
                    client: connect_to(&config).await?,
                    protocol: Protocol::Simple,
                },
                types,
            })
        }
    });
    runner.add_label(ENGINE_LABEL);
    runner.with_hash_threshold(DEFAULT_HASH_THRESHOLD);
    runner.with_validator(sqlite_validator);
    runner.with_column_validator(same_width);
    runner
}

/// A record that failed, for the summary.
struct Failure {
    /// `file:line`.
    at: String,
    /// What went wrong, without the record's specifics where possible (for grouping).
    cause: String,
    /// The full report.
    detail: String,
    /// The record creates or drops an index.
    index: bool,
}

impl Failure {
    fn from_test_error(e: &TestError) -> Failure {
        let first_line = |s: &str| s.lines().next().unwrap_or_default().to_string();
        let cause = match e.kind() {
            TestErrorKind::Fail { err, kind, .. } => {
                format!("{kind} failed: {}", first_line(&err.to_string()))
            }
            TestErrorKind::QueryResultMismatch { .. } => "wrong result".into(),
            TestErrorKind::QueryResultColumnsMismatch { .. } => "wrong number of columns".into(),
            TestErrorKind::Ok { kind, .. } => format!("{kind} expected to fail, but succeeded"),
            TestErrorKind::ErrorMismatch { .. } => "a different error".into(),
            other => first_line(&other.to_string()),
        };
        Failure {
            at: e.location().to_string(),
            cause,
            detail: e.display(false).to_string(),
            index: false,
        }
    }
}

/// Prints failures grouped by cause, most frequent first, with an example each (every failure
/// in full with `WEIR_SLT_VERBOSE=1`).
fn print_failures(failures: &[Failure]) {
    if std::env::var("WEIR_SLT_VERBOSE").is_ok_and(|v| v == "1") {
        for f in failures {
            eprintln!("--- {} {}\n{}", f.at, f.cause, f.detail);
        }
    }
    let mut by_cause: BTreeMap<String, (usize, &str)> = BTreeMap::new();
    for f in failures {
        by_cause.entry(cause_kind(&f.cause)).or_insert((0, &f.at)).0 += 1;
    }
    let mut causes: Vec<_> = by_cause.into_iter().collect();
    causes.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(&b.0)));
    for (cause, (n, at)) in causes.iter().take(SHOWN_PER_FILE) {
        eprintln!("  {n}x {cause} (e.g. {at})");
    }
    if causes.len() > SHOWN_PER_FILE {
        eprintln!("  ... and {} more causes", causes.len() - SHOWN_PER_FILE);
    }
}

/// A failure's cause with its specifics (numbers, quoted names) blanked, to group alike ones.
fn cause_kind(cause: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in cause.chars() {
        match c {
            '"' => {
                if !quoted {
                    out.push_str("\"…\"");
                }
                quoted = !quoted;
            }
            _ if quoted => {}
            '0'..='9' => {
                if !out.ends_with('N') {
                    out.push('N');
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Counts of a file's plain-SQL run.
#[derive(Default)]
struct PlainStats {
    /// Statements and queries, skipped ones included.
    records: usize,
    passed: usize,
    /// Records not run, by reason (see [`Step::skip`]).
    skipped: BTreeMap<String, usize>,
    failures: Vec<Failure>,
    /// Records left when the file's time budget ran out.
    not_run: usize,
}

/// Runs a file's records in order against the server `config` names, until `deadline`.
async fn run_plain(
    config: tokio_postgres::Config,
    steps: &[Step],
    deadline: Instant,
) -> PlainStats {
    let types = Arc::new(Mutex::new(Vec::new()));
    let mut runner = corpus_runner(config, Arc::clone(&types));
    let mut stats = PlainStats::default();
    for step in steps {
        let declared = match &step.record {
            Record::Statement { .. } => Vec::new(),
            Record::Query { expected, .. } => match expected {
                QueryExpect::Results { types, .. } => types.clone(),
                QueryExpect::Error(_) => Vec::new(),
            },
            other => {
                // A setting (hash-threshold): the runner applies it.
                let _ = runner.run_async(other.clone()).await;
                continue;
            }
        };
        stats.records += 1;
        if let Some(reason) = &step.skip {
            *stats.skipped.entry(reason.clone()).or_default() += 1;
            continue;
        }
        if Instant::now() >= deadline {
            stats.not_run += 1;
            continue;
        }
        *types.lock().unwrap() = declared;
        let work = runner.run_async(step.record.clone());
        match within(&record_sql(&step.record), work).await {
            Ok(_) => stats.passed += 1,
            Err(e) => {
                let mut failure = Failure::from_test_error(&e);
                if is_index_ddl(&record_sql(&step.record)) {
                    failure.index = true;
                    failure.cause = format!("index DDL: {}", failure.cause);
                }
                stats.failures.push(failure);
            }
        }
    }
    stats
}

/// Whether `sql` creates or drops an index (not implemented by Weir yet: such failures are
/// counted apart).
fn is_index_ddl(sql: &str) -> bool {
    let head = leading_words(sql, 3);
    [
        "CREATE INDEX",
        "CREATE UNIQUE INDEX",
        "DROP INDEX",
        "REINDEX",
    ]
    .iter()
    .any(|k| head.starts_with(k))
}

/// The SQL of a statement or query record.
fn record_sql(record: &CorpusRecord) -> String {
    match record {
        Record::Statement { sql, .. } | Record::Query { sql, .. } => sql.clone(),
        other => other.to_string(),
    }
}

/// Runs the plain mode against the PostgreSQL server `url` names, in a scratch database.
async fn run_plain_on_reference(url: &str, steps: &[Step], deadline: Instant) -> PlainStats {
    const SCRATCH: &str = "weir_slt_corpus";
    let admin_config: tokio_postgres::Config = url.parse().expect("WEIR_SLT_REFERENCE");
    let admin = connect_to(&admin_config)
        .await
        .unwrap_or_else(|e| panic!("WEIR_SLT_REFERENCE: {e}"));
    let reset = format!("DROP DATABASE IF EXISTS {SCRATCH}");
    admin
        .simple_query(&reset)
        .await
        .expect("drop scratch database");
    admin
        .simple_query(&format!("CREATE DATABASE {SCRATCH}"))
        .await
        .expect("create scratch database");
    let mut config = admin_config.clone();
    config.dbname(SCRATCH);
    let stats = run_plain(config, steps, deadline).await;
    // The runner's connection closes when it is dropped; FORCE ends it if it has not yet.
    admin
        .simple_query(&format!("DROP DATABASE IF EXISTS {SCRATCH} WITH (FORCE)"))
        .await
        .expect("drop scratch database");
    stats
}

/// Counts of a file's run with every query as a materialized view.
#[derive(Default)]
struct ViewStats {
    /// The file's queries, skipped ones included.
    queries: usize,
    /// Queries not made views, by reason: excluded here (see [`Step::skip`]), or expecting an
    /// error (a view of a failing query is not created, so there is nothing to compare).
    skipped: BTreeMap<String, usize>,
    created: usize,
    /// Refused with `0A000` naming a construct views (or Weir) do not support: how often, by
    /// message, with the first query refused so. Counted apart from `failures` (a construct plain
    /// SQL refuses too fails the plain mode as well), but it fails the test all the same.
    unsupported: BTreeMap<String, (usize, String)>,
    passed: usize,
    /// Views that could not be created (other than unsupported) or returned a wrong answer.
    failures: Vec<Failure>,
    /// Views created whose answer cannot be compared with the file, by reason (with the first
    /// such query): a hashed result of a `nosort` query whose order is not a positional
    /// `ORDER BY` the view can be read with, or a query that a later statement's data changes
    /// do not apply to.
    unchecked: BTreeMap<String, (usize, String)>,
    /// `statement ok` records that failed (they fail the plain mode too), by message (with the
    /// first such statement); those creating or dropping an index are counted apart.
    statements_failed: BTreeMap<String, (usize, String)>,
    index_statements_failed: usize,
    /// Queries left when the file's time budget ran out.
    not_run: usize,
}

impl ViewStats {
    /// Counts a failed `statement ok` record of the data.
    fn statement_failed(&mut self, record: &CorpusRecord, message: String) {
        let sql = record_sql(record);
        if is_index_ddl(&sql) {
            self.index_statements_failed += 1;
        } else {
            let at = match record {
                Record::Statement { loc, .. } => loc.to_string(),
                _ => String::new(),
            };
            let entry = self.statements_failed.entry(cause_kind(&message));
            entry.or_insert((0, at)).0 += 1;
        }
    }

    /// Counts a view whose answer is not compared.
    fn unchecked(&mut self, reason: &str, q: &ViewQuery<'_>) {
        let entry = self.unchecked.entry(reason.to_string());
        entry.or_insert((0, q.loc.to_string())).0 += 1;
    }
}

/// A query of a corpus file, maintained as a view.
struct ViewQuery<'a> {
    /// Its number among the file's queries: the view is `corpus_q<n>`.
    n: usize,
    loc: sqllogictest::Location,
    sql: &'a str,
    types: &'a [DefaultColumnType],
    sort_mode: Option<SortMode>,
    results: &'a [String],
    /// The `hash-threshold` in force where the query stands.
    threshold: usize,
    /// A later statement changes the data, so the file's expectation is not about the final data.
    data_changes_after: bool,
}

/// The first `n` words of `sql`, upper-cased.
fn leading_words(sql: &str, n: usize) -> String {
    sql.split_whitespace()
        .take(n)
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_uppercase()
}

/// The positions of a query's closing `ORDER BY 1, 3 DESC, ...`, if that is how it is ordered.
fn positional_order_by(sql: &str) -> Option<String> {
    let sql = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    let at = sql.to_ascii_uppercase().rfind("ORDER BY")?;
    let tail = sql[at + "ORDER BY".len()..].trim();
    let positional = tail.split(',').all(|item| {
        let mut words = item.split_whitespace();
        let position = words
            .next()
            .is_some_and(|w| w.bytes().all(|b| b.is_ascii_digit()));
        let direction = words
            .next()
            .is_none_or(|w| w.eq_ignore_ascii_case("asc") || w.eq_ignore_ascii_case("desc"));
        position && direction && words.next().is_none()
    });
    (positional && !tail.is_empty()).then(|| tail.to_string())
}

/// Runs a statement record; the server's message if a `statement ok` failed.
async fn run_statement(client: &tokio_postgres::Client, record: &CorpusRecord) -> Option<String> {
    let Record::Statement { sql, expected, .. } = record else {
        return None;
    };
    match within(sql, client.simple_query(sql)).await {
        Err(e) if !matches!(expected, StatementExpect::Error(_)) => Some(PgError(e).to_string()),
        _ => None,
    }
}

/// Runs a file with each query as a materialized view created before the data.
///
/// The file's `CREATE TABLE` statements run first, then `CREATE MATERIALIZED VIEW corpus_q<N>
/// (c1, ...) AS <query>` for each query, then the other statements in order, then `FLUSH`. Each
/// view is then read and compared with its query's expected result: a listed result as a
/// multiset of values (both sides value-sorted), a hashed one by the hash SQLite's runner
/// computes in the query's sort mode (a `nosort` view is read with the query's positional
/// `ORDER BY`), by the `sqllogictest` runner itself. At most `per_server` views share a server.
/// Views not yet created or read by `deadline` are counted as not run.
async fn run_views(steps: &[Step], per_server: usize, deadline: Instant) -> ViewStats {
    let mut stats = ViewStats::default();
    let mut tables = Vec::new();
    let mut others = Vec::new();
    let mut queries: Vec<ViewQuery<'_>> = Vec::new();
    let mut threshold = DEFAULT_HASH_THRESHOLD;
    for step in steps {
        if matches!(step.record, Record::Query { .. }) {
            stats.queries += 1;
        }
        match &step.record {
            Record::HashThreshold { threshold: t, .. } => threshold = *t as usize,
            Record::Query { .. } if step.skip.is_some() => {
                let reason = step.skip.clone().unwrap_or_default();
                *stats.skipped.entry(reason).or_default() += 1;
            }
            _ if step.skip.is_some() => {}
            Record::Query {
                expected: QueryExpect::Error(_),
                ..
            } => {
                let reason = "query error (expects an error: no view)".to_string();
                *stats.skipped.entry(reason).or_default() += 1;
            }
            Record::Statement { sql, .. } => {
                let head = leading_words(sql, 3);
                if head.starts_with("CREATE TABLE") {
                    tables.push(&step.record);
                } else {
                    if !(head.starts_with("CREATE INDEX")
                        || head.starts_with("CREATE UNIQUE INDEX"))
                    {
                        for q in &mut queries {
                            q.data_changes_after = true;
                        }
                    }
                    others.push(&step.record);
                }
            }
            Record::Query {
                loc,
                sql,
                expected:
                    QueryExpect::Results {
                        types,
                        sort_mode,
                        results,
                        ..
                    },
                ..
            } => queries.push(ViewQuery {
                n: queries.len() + 1,
                loc: loc.clone(),
                sql,
                types,
                sort_mode: *sort_mode,
                results,
                threshold,
                data_changes_after: false,
            }),
            _ => {}
        }
    }

    for (chunk_no, chunk) in queries.chunks(per_server.max(1)).enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let server = common::TestServer::start(dir.path()).await;
        let client = server.client().await;
        let first = chunk_no == 0;
        for record in &tables {
            if let Some(message) = run_statement(&client, record).await
                && first
            {
                stats.statement_failed(record, message);
            }
        }
        let mut live = Vec::new();
        for q in chunk {
            if Instant::now() >= deadline {
                stats.not_run += 1;
                continue;
            }
            let columns: Vec<String> = (1..=q.types.len()).map(|i| format!("c{i}")).collect();
            let create = format!(
                "CREATE MATERIALIZED VIEW corpus_q{} ({}) AS {}",
                q.n,
                columns.join(", "),
                q.sql.trim().trim_end_matches(';')
            );
            match within(&create, client.simple_query(&create)).await {
                Ok(_) => {
                    stats.created += 1;
                    live.push(q);
                }
                Err(e) => {
                    let refused =
                        e.code() == Some(&tokio_postgres::error::SqlState::FEATURE_NOT_SUPPORTED);
                    let message = PgError(e).to_string();
                    if refused {
                        let entry = stats.unsupported.entry(cause_kind(&message));
                        entry.or_insert((0, q.loc.to_string())).0 += 1;
                    } else {
                        stats.failures.push(Failure {
                            at: q.loc.to_string(),
                            cause: format!("CREATE failed: {message}"),
                            detail: create,
                            index: false,
                        });
                    }
                }
            }
        }
        for record in &others {
            if let Some(message) = run_statement(&client, record).await
                && first
            {
                stats.statement_failed(record, message);
            }
        }
        within("FLUSH", client.simple_query("FLUSH"))
            .await
            .expect("FLUSH");

        let types = Arc::new(Mutex::new(Vec::new()));
        let mut runner = corpus_runner(weir_config(server.addr), Arc::clone(&types));
        for q in live {
            if Instant::now() >= deadline {
                stats.not_run += 1;
                continue;
            }
            let hashed = q.results.len() == 1 && q.results[0].contains(" values hashing to ");
            let view = format!("SELECT * FROM corpus_q{}", q.n);
            let (sql, sort_mode, results) = if !hashed {
                let mut results = q.results.to_vec();
                results.sort_unstable();
                (view, Some(SortMode::ValueSort), results)
            } else if matches!(q.sort_mode, Some(SortMode::RowSort | SortMode::ValueSort)) {
                (view, q.sort_mode, q.results.to_vec())
            } else if let Some(order) = positional_order_by(q.sql) {
                (
                    format!("{view} ORDER BY {order}"),
                    Some(SortMode::NoSort),
                    q.results.to_vec(),
                )
            } else {
                stats.unchecked(
                    "hashed nosort result, no positional ORDER BY to read it by",
                    q,
                );
                continue;
            };
            if q.data_changes_after {
                stats.unchecked("a later statement changes the data", q);
                continue;
            }
            runner.with_hash_threshold(q.threshold);
            *types.lock().unwrap() = q.types.to_vec();
            let record = Record::Query {
                loc: q.loc.clone(),
                conditions: Vec::new(),
                connection: Connection::Default,
                sql,
                expected: QueryExpect::Results {
                    types: q.types.to_vec(),
                    sort_mode,
                    result_mode: None,
                    label: None,
                    results,
                },
                retry: None,
            };
            match within(&record_sql(&record), runner.run_async(record.clone())).await {
                Ok(_) => stats.passed += 1,
                Err(e) => {
                    let mut failure = Failure::from_test_error(&e);
                    failure.detail = format!("view of: {}\n{}", q.sql, failure.detail);
                    stats.failures.push(failure);
                }
            }
        }
        drop(runner);
        drop(client);
        server.stop().await;
    }
    stats
}

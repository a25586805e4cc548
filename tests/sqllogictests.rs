//! Runs every `sql-tests/**/*.slt` file over pgwire against a fresh in-process server, once with
//! the simple query protocol and once with the extended protocol.
//!
//! `sqlite_corpus` (ignored: it needs a checkout of SQLite's sqllogictest repository) checks
//! Weir against that corpus, in plain SQL and with every query as a materialized view; see its
//! documentation below and `docs/sql.md`.

mod common;

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
    let files = slt_files();
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

/// The corpus files run when `WEIR_SLT_FILES` is not set, relative to `WEIR_SLT_CORPUS`.
const DEFAULT_CORPUS_FILES: &[&str] = &[
    "select1.test",
    "select2.test",
    "select3.test",
    "select4.test",
    "select5.test",
    "random/aggregates/slt_good_0.test",
    "random/expr/slt_good_0.test",
    "random/groupby/slt_good_0.test",
    "random/select/slt_good_0.test",
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
/// Prints a summary per file and fails if any record failed in plain SQL or any view returned a
/// wrong answer or could not be created (a construct refused with `0A000` is counted as
/// unsupported, not as a failure). `WEIR_SLT_VERBOSE=1` prints every failure in full.
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

    let mut summary = Vec::new();
    let mut failed = false;
    for name in &files {
        let steps = corpus_steps(load_corpus_file(&root.join(name), name));

        if modes.iter().any(|m| m == "plain") {
            let started = Instant::now();
            let plain = match &reference {
                Some(url) => run_plain_on_reference(url, &steps).await,
                None => {
                    let dir = tempfile::tempdir().unwrap();
                    let server = common::TestServer::start(dir.path()).await;
                    let stats = run_plain(weir_config(server.addr), &steps).await;
                    server.stop().await;
                    stats
                }
            };
            let line = format!(
                "{name} plain: {} records, {} passed, {} failed, {} skipped ({:.0?})",
                plain.run,
                plain.passed,
                plain.failures.len(),
                plain.skipped,
                started.elapsed()
            );
            eprintln!("{line}");
            print_failures(&plain.failures);
            failed |= !plain.failures.is_empty();
            summary.push(line);
        }

        if reference.is_none() && modes.iter().any(|m| m == "views") {
            let started = Instant::now();
            let views = run_views(&steps, per_server).await;
            let line = format!(
                "{name} views: {} queries, {} views created, {} unsupported, {} passed, \
                 {} failed, {} not checked, {} statements failed ({:.0?})",
                views.queries,
                views.created,
                views.unsupported.values().map(|(n, _)| n).sum::<usize>(),
                views.passed,
                views.failures.len(),
                views.unchecked,
                views.statements_failed,
                started.elapsed()
            );
            eprintln!("{line}");
            let mut reasons: Vec<_> = views.unsupported.iter().collect();
            reasons.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
            for (reason, (n, at)) in reasons.iter().take(5) {
                eprintln!("  unsupported {n}x: {reason} (e.g. {at})");
            }
            print_failures(&views.failures);
            failed |= !views.failures.is_empty();
            summary.push(line);
        }
    }
    let summary = summary.join("\n");
    assert!(
        !failed,
        "SQLite corpus: some records failed (details above):\n{summary}"
    );
    eprintln!("SQLite corpus:\n{summary}");
}

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
    /// A `skipif`/`onlyif` condition excludes the record for [`ENGINE_LABEL`].
    skipped: bool,
}

/// Whether `conditions` exclude a record for [`ENGINE_LABEL`].
fn skipped_here(conditions: &[Condition]) -> bool {
    conditions.iter().any(|c| match c {
        Condition::OnlyIf { label } => label != ENGINE_LABEL,
        Condition::SkipIf { label } => label == ENGINE_LABEL,
    })
}

/// The file's statements and queries in order, each with its `skipif`/`onlyif` conditions
/// decided, up to a `halt` that applies here.
///
/// A condition before `halt` applies to the `halt` (SQLite's runner); the parser instead keeps
/// it for the next statement, so those conditions are taken off that statement.
fn corpus_steps(records: Vec<CorpusRecord>) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut pending: Vec<Condition> = Vec::new();
    let mut leaked = 0;
    for record in records {
        let own = |conditions: &[Condition], leaked: usize| {
            skipped_here(&conditions[leaked.min(conditions.len())..])
        };
        match record {
            Record::Condition(c) => pending.push(c),
            Record::Halt { .. } => {
                if !skipped_here(&pending) {
                    break;
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
                    skipped: own(&conditions, leaked),
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
                    skipped: own(&conditions, leaked),
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
                skipped: false,
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

/// Compares results as SQLite's format lists them: one value per line, row after row.
fn sqlite_validator(normalizer: Normalizer, actual: &[Vec<String>], expected: &[String]) -> bool {
    actual
        .iter()
        .flatten()
        .map(normalizer)
        .eq(expected.iter().map(normalizer))
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
    run: usize,
    passed: usize,
    skipped: usize,
    failures: Vec<Failure>,
}

/// Runs a file's records in order against the server `config` names.
async fn run_plain(config: tokio_postgres::Config, steps: &[Step]) -> PlainStats {
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
        stats.run += 1;
        if step.skipped {
            stats.skipped += 1;
            continue;
        }
        *types.lock().unwrap() = declared;
        let work = runner.run_async(step.record.clone());
        match within(&record_sql(&step.record), work).await {
            Ok(_) => stats.passed += 1,
            Err(e) => stats.failures.push(Failure::from_test_error(&e)),
        }
    }
    stats
}

/// The SQL of a statement or query record.
fn record_sql(record: &CorpusRecord) -> String {
    match record {
        Record::Statement { sql, .. } | Record::Query { sql, .. } => sql.clone(),
        other => other.to_string(),
    }
}

/// Runs the plain mode against the PostgreSQL server `url` names, in a scratch database.
async fn run_plain_on_reference(url: &str, steps: &[Step]) -> PlainStats {
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
    let stats = run_plain(config, steps).await;
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
    /// Queries with an expected result that apply here (those expecting an error are left out).
    queries: usize,
    created: usize,
    /// Refused with `0A000` naming a construct views (or Weir) do not support: how often, by
    /// message, with the first query refused so. Such a refusal is not a failure of this mode (a
    /// construct plain SQL refuses too fails the plain mode).
    unsupported: BTreeMap<String, (usize, String)>,
    passed: usize,
    /// Views that could not be created (other than unsupported) or returned a wrong answer.
    failures: Vec<Failure>,
    /// Views created whose answer cannot be compared with the file: a hashed result of a
    /// `nosort` query whose order is not a positional `ORDER BY` the view can be read with, or a
    /// query that a later statement's data changes do not apply to.
    unchecked: usize,
    /// `statement ok` records that failed (they fail the plain mode too).
    statements_failed: usize,
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
async fn run_views(steps: &[Step], per_server: usize) -> ViewStats {
    let mut stats = ViewStats::default();
    let mut tables = Vec::new();
    let mut others = Vec::new();
    let mut queries: Vec<ViewQuery<'_>> = Vec::new();
    let mut threshold = DEFAULT_HASH_THRESHOLD;
    for step in steps {
        match &step.record {
            Record::HashThreshold { threshold: t, .. } => threshold = *t as usize,
            _ if step.skipped => {}
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
    stats.queries = queries.len();

    for (chunk_no, chunk) in queries.chunks(per_server.max(1)).enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let server = common::TestServer::start(dir.path()).await;
        let client = server.client().await;
        let first = chunk_no == 0;
        for record in &tables {
            if run_statement(&client, record).await.is_some() && first {
                stats.statements_failed += 1;
            }
        }
        let mut live = Vec::new();
        for q in chunk {
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
                        });
                    }
                }
            }
        }
        for record in &others {
            if run_statement(&client, record).await.is_some() && first {
                stats.statements_failed += 1;
            }
        }
        within("FLUSH", client.simple_query("FLUSH"))
            .await
            .expect("FLUSH");

        let types = Arc::new(Mutex::new(Vec::new()));
        let mut runner = corpus_runner(weir_config(server.addr), Arc::clone(&types));
        for q in live {
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
                stats.unchecked += 1;
                continue;
            };
            if q.data_changes_after {
                stats.unchecked += 1;
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

//! The Nexmark generator against the reference Python generator `nexmark_gen.py`, through the
//! CSV form both write: the first lines against committed samples, whole files (100,000 bids
//! and the persons and auctions up to the last bid) against committed SHA-256 hashes, and,
//! when `WEIR_NEXMARK_REFERENCE` names the script, line by line against a fresh run of it.
//! Also: the batches fit tables created with the schema's SQL.
//!
//! Environment of `reference_script_agrees`:
//! - `WEIR_NEXMARK_REFERENCE`: path of the Python script (run with `python3`); the test does
//!   nothing without it;
//! - `WEIR_NEXMARK_REFERENCE_BIDS` (default 1,000,000), `WEIR_NEXMARK_REFERENCE_SEED`
//!   (default 42), `WEIR_NEXMARK_REFERENCE_RATE` (default 10000): the run's parameters.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use weir::connectors::nexmark::{
    NexmarkConfig, NexmarkGenerator, NexmarkModel, NexmarkTable, events_for_bids,
};

const TABLES: [NexmarkTable; 3] = [
    NexmarkTable::Bid,
    NexmarkTable::Person,
    NexmarkTable::Auction,
];

/// Events per CSV chunk when streaming a whole table.
const CHUNK_EVENTS: u64 = 100_000;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/nexmark")
}

fn sample_file(table: NexmarkTable) -> PathBuf {
    data_dir().join(match table {
        NexmarkTable::Bid => "bids_head.csv",
        NexmarkTable::Person => "persons_head.csv",
        NexmarkTable::Auction => "auctions_head.csv",
    })
}

/// Calls `f` with every CSV line (with its `\n`) of `table` for events `0 .. events`.
fn for_each_line(model: &NexmarkModel, table: NexmarkTable, events: u64, mut f: impl FnMut(&[u8])) {
    let g = NexmarkGenerator::with_model(model.clone(), table, Some(events));
    let mut buf = Vec::new();
    let mut at = 0;
    while at < events {
        let next = (at + CHUNK_EVENTS).min(events);
        buf.clear();
        g.write_csv_between(at, next, &mut buf).unwrap();
        for line in buf.split_inclusive(|&c| c == b'\n') {
            f(line);
        }
        at = next;
    }
}

/// Compares the lines `f` is given with `expected`, in order: panics at the first difference
/// (with its line number), or when the counts differ. Returns the number of lines.
struct LineCheck<R> {
    what: String,
    expected: R,
    line_no: u64,
    want: Vec<u8>,
}

impl<R: BufRead> LineCheck<R> {
    fn new(what: String, expected: R) -> Self {
        LineCheck {
            what,
            expected,
            line_no: 0,
            want: Vec::new(),
        }
    }

    /// Checks the next line; `false` once the expected lines have run out (the line is
    /// not checked then).
    fn check(&mut self, got: &[u8]) -> bool {
        self.want.clear();
        if self.expected.read_until(b'\n', &mut self.want).unwrap() == 0 {
            return false;
        }
        self.line_no += 1;
        assert!(
            got == self.want.as_slice(),
            "{}: line {} differs\n  expected: {}  generated: {}",
            self.what,
            self.line_no,
            String::from_utf8_lossy(&self.want),
            String::from_utf8_lossy(got)
        );
        true
    }

    /// Asserts the expected lines are all used and `generated` lines were made.
    fn finish(mut self, generated: u64) {
        self.want.clear();
        let rest = self.expected.read_until(b'\n', &mut self.want).unwrap();
        assert!(
            rest == 0 && generated == self.line_no,
            "{}: {} lines generated, the reference has {}",
            self.what,
            generated,
            self.line_no + u64::from(rest > 0)
        );
    }
}

#[test]
fn first_lines_match_the_committed_samples() {
    let model = NexmarkModel::new(NexmarkConfig::default()).unwrap();
    for table in TABLES {
        let path = sample_file(table);
        let mut check = LineCheck::new(
            format!("{}", path.display()),
            BufReader::new(File::open(&path).unwrap()),
        );
        let want = BufReader::new(File::open(&path).unwrap()).lines().count() as u64;
        assert!(want >= 100, "{}: {want} lines", path.display());
        // Enough events for the sample.
        let events = table.event_number(want - 1) + 1;
        let mut generated = 0;
        for_each_line(&model, table, events, |line| {
            generated += 1;
            check.check(line);
        });
        check.finish(generated);
    }
}

/// `(table name, lines, sha256 hex)` of the committed reference file.
fn committed_hashes() -> Vec<(String, u64, String)> {
    let text = std::fs::read_to_string(data_dir().join("reference_100k.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 3, "bad line {l:?}");
            (f[0].to_string(), f[1].parse().unwrap(), f[2].to_string())
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn whole_files_for_100k_bids_match_the_committed_hashes() {
    let model = NexmarkModel::new(NexmarkConfig::default()).unwrap();
    let events = events_for_bids(100_000);
    let committed = committed_hashes();
    assert_eq!(committed.len(), 3);
    for table in TABLES {
        let (_, lines, sha) = committed
            .iter()
            .find(|(name, _, _)| name == table.name())
            .unwrap_or_else(|| panic!("no hash for {}", table.name()));
        let mut hasher = Sha256::new();
        let mut count = 0u64;
        for_each_line(&model, table, events, |line| {
            count += 1;
            hasher.update(line);
        });
        assert_eq!(count, *lines, "{} lines", table.name());
        assert_eq!(&hex(&hasher.finalize()), sha, "{} SHA-256", table.name());
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} does not parse")),
        Err(_) => default,
    }
}

#[test]
fn reference_script_agrees() {
    let Some(script) = std::env::var_os("WEIR_NEXMARK_REFERENCE") else {
        eprintln!("WEIR_NEXMARK_REFERENCE is not set: only the committed samples are checked");
        return;
    };
    let bids: u64 = env_or("WEIR_NEXMARK_REFERENCE_BIDS", 1_000_000);
    let seed: u64 = env_or("WEIR_NEXMARK_REFERENCE_SEED", 42);
    let rate: f64 = env_or("WEIR_NEXMARK_REFERENCE_RATE", 10_000.0);
    let dir = tempfile::tempdir().unwrap();
    let path = |t: NexmarkTable| dir.path().join(format!("{}.csv", t.name()));
    let started = Instant::now();
    let status = Command::new("python3")
        .arg(&script)
        .args(["--bids", &bids.to_string()])
        .args(["--seed", &seed.to_string()])
        .args(["--event-rate", &rate.to_string()])
        .arg("--out")
        .arg(path(NexmarkTable::Bid))
        .arg("--persons-out")
        .arg(path(NexmarkTable::Person))
        .arg("--auctions-out")
        .arg(path(NexmarkTable::Auction))
        .arg("--quiet")
        .status()
        .expect("running python3");
    assert!(status.success(), "the reference generator failed: {status}");
    eprintln!(
        "reference generator: {bids} bids in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let model = NexmarkModel::new(NexmarkConfig {
        seed,
        event_rate: rate,
    })
    .unwrap();
    let events = events_for_bids(bids);
    for table in TABLES {
        let file = path(table);
        let mut check = LineCheck::new(
            format!("{} (seed {seed}, {bids} bids)", table.name()),
            BufReader::new(File::open(&file).unwrap()),
        );
        let mut generated = 0;
        let mut extra = 0;
        for_each_line(&model, table, events, |line| {
            generated += 1;
            if !check.check(line) {
                extra += 1;
            }
        });
        check.finish(generated);
        assert_eq!(extra, 0);
        eprintln!("{}: {generated} lines agree", table.name());
    }
}

/// The batches have the schema `CREATE TABLE` gives the tables' SQL, and a table takes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_fit_tables_created_from_the_sql_schema() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = weir::engine::EngineConfig::new(dir.path());
    config.barrier_interval = Duration::from_millis(20);
    let engine = weir::open_with(config).await.unwrap();
    let mut session = weir::session::Session::new(Arc::clone(&engine)).unwrap();
    let ddl = [
        "CREATE TABLE person (id BIGINT, name VARCHAR, email_address VARCHAR, \
         credit_card VARCHAR, city VARCHAR, state VARCHAR, date_time TIMESTAMP, extra VARCHAR)",
        "CREATE TABLE auction (id BIGINT, item_name VARCHAR, description VARCHAR, \
         initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, \
         seller BIGINT, category BIGINT, extra VARCHAR)",
        "CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, \
         url VARCHAR, date_time TIMESTAMP, extra VARCHAR)",
    ];
    for sql in ddl {
        session.execute(sql).await.unwrap();
    }
    let model = NexmarkModel::new(NexmarkConfig::default()).unwrap();
    let events = 5_000;
    for table in TABLES {
        let def = engine.relation(table.name()).unwrap();
        assert_eq!(&def.schema, table.schema().as_ref(), "{}", table.name());
        let g = NexmarkGenerator::with_model(model.clone(), table, Some(events));
        let batch = g.rows_between(0, events);
        let rows = batch.num_rows();
        let e = Arc::clone(&engine);
        tokio::task::spawn_blocking(move || {
            e.write(def.id, weir::common::ChangeBatch::inserts(batch))
        })
        .await
        .unwrap()
        .unwrap();
        // Visible after the next barrier.
        let sql = format!(
            "SELECT count(*), CAST(max(date_time) AS VARCHAR) FROM {}",
            table.name()
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let weir::session::Output::Rows { batches, .. } = session.execute(&sql).await.unwrap()
            else {
                panic!("no rows");
            };
            let text = arrow::util::pretty::pretty_format_batches(&batches)
                .unwrap()
                .to_string();
            if text.contains(&format!("| {rows} ")) {
                // The newest event of the range is at 0.4999 s of event time.
                let last = table.event_number(table.rows_before(events) - 1);
                let ms = model.timestamp_ms(last) % 1000;
                // PostgreSQL's text of a timestamp: the fraction without trailing zeros.
                let fraction = format!("{ms:03}");
                let fraction = fraction.trim_end_matches('0');
                let expected = if fraction.is_empty() {
                    "2015-07-15 00:00:00 ".to_string()
                } else {
                    format!("2015-07-15 00:00:00.{fraction} ")
                };
                assert!(text.contains(&expected), "{text}");
                break;
            }
            assert!(Instant::now() < deadline, "{}: {text}", table.name());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    drop(session);
    engine.shutdown().await.unwrap();
}

/// Generation speed, for the record (it asserts nothing, so it is ignored): `cargo test --release
/// --features failpoints --test suite nexmark_gen::generation_speed -- --ignored --nocapture`
/// (`WEIR_NEXMARK_SPEED_BIDS`, default 10,000,000). Bids as Arrow batches of 8,192 rows, as CSV
/// lines, and as CSV lines hashed.
#[test]
#[ignore]
fn generation_speed() {
    let model = NexmarkModel::new(NexmarkConfig::default()).unwrap();
    let bids: u64 = env_or("WEIR_NEXMARK_SPEED_BIDS", 10_000_000);
    let started = Instant::now();
    let mut rows = 0;
    let mut bytes = 0;
    let mut i = 0;
    while i < bids {
        let count = 8_192.min(bids - i);
        let b = model.bid_batch(i, count as usize);
        rows += b.num_rows();
        bytes += b.get_array_memory_size();
        i += count;
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "{rows} bids as Arrow batches in {secs:.2} s: {:.0} rows/s ({} MB of arrays)",
        rows as f64 / secs,
        bytes >> 20
    );
    let started = Instant::now();
    let (mut lines, mut csv_bytes) = (0u64, 0usize);
    for_each_line(&model, NexmarkTable::Bid, events_for_bids(bids), |line| {
        lines += 1;
        csv_bytes += line.len();
    });
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "{lines} bids as CSV in {secs:.2} s: {:.0} rows/s ({} MB)",
        lines as f64 / secs,
        csv_bytes >> 20
    );
    let started = Instant::now();
    let mut hasher = Sha256::new();
    for_each_line(&model, NexmarkTable::Bid, events_for_bids(bids), |line| {
        hasher.update(line)
    });
    eprintln!(
        "the same, hashed, in {:.2} s: SHA-256 {}",
        started.elapsed().as_secs_f64(),
        hex(&hasher.finalize())
    );
}

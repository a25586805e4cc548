//! Connector tables: a table declared `WITH (connector = 'nexmark', ...)` is fed by a
//! generator running in a thread of its own, which appends the rows of each chunk of events
//! to the table as one write, as an `INSERT` would be, so views over it work unchanged.
//!
//! Exactly once: the event offset a chunk brings the source to is stored in the same RocksDB
//! write batch as the chunk's changelog entries ([`crate::state::Store::append_changelog_at`]).
//! After a crash the table holds exactly the rows of the durable entries (its snapshot plus
//! the changelog replayed after it), and the stored offset says which events those are, so
//! the source resumes right after them.
//!
//! Threads: one per connector table, started by [`Engine::start_sources`] (after `CREATE
//! TABLE` and at server start), stopped and joined by `DROP TABLE`, [`Engine::shutdown`] and
//! dropping the engine. A thread holds the engine only weakly, and the clock lock only for
//! the write of one chunk.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arrow::datatypes::{DataType, Schema};
use tracing::{error, info};

use crate::catalog::ConnectorDef;
use crate::common::{ChangeBatch, RelationId};
use crate::connectors::nexmark::{
    DEFAULT_EVENT_RATE, DEFAULT_SEED, NexmarkConfig, NexmarkGenerator, NexmarkTable,
};
use crate::error::{Error, Result};

use super::{Engine, lock};

/// Most events a source turns into one write (bounds the memory of a chunk: at most 92,000
/// bids of about 200 bytes).
pub const MAX_CHUNK_EVENTS: u64 = 100_000;

/// Events per write of an unthrottled source.
const FAST_CHUNK_EVENTS: u64 = 50_000;

/// The options `WITH (...)` accepts on a connector table.
pub const CONNECTOR_OPTIONS: &[&str] = &[
    "connector",
    "nexmark.table",
    "nexmark.events",
    "nexmark.events_per_second",
    "nexmark.seed",
    "nexmark.event_rate",
];

fn bad_option(message: String) -> Error {
    Error::data("22023", message)
}

fn parse_u64(key: &str, value: &str) -> Result<u64> {
    value.trim().parse::<u64>().map_err(|_| {
        bad_option(format!(
            "invalid value for option \"{key}\": \"{value}\" (expected a non-negative integer)"
        ))
    })
}

/// The Nexmark table `name` names.
///
/// # Errors
/// `22023` naming the allowed values.
pub fn nexmark_table(name: &str) -> Result<NexmarkTable> {
    match name {
        "person" => Ok(NexmarkTable::Person),
        "auction" => Ok(NexmarkTable::Auction),
        "bid" => Ok(NexmarkTable::Bid),
        other => Err(bad_option(format!(
            "invalid value for option \"nexmark.table\": \"{other}\" (allowed: person, auction, bid)"
        ))),
    }
}

/// Validates a table's `WITH (...)` options (keys lower-case, values as written, quotes
/// removed) against its declared columns, and returns the connector's definition.
///
/// # Errors
/// `0A000` for a connector other than `nexmark`; `22023` for an unknown option (naming the
/// allowed ones), a missing `connector` or `nexmark.table`, or a bad value; `42804` when the
/// declared columns differ from the generator's schema (naming the first column that differs
/// and what is expected there).
pub fn connector_def(options: &[(String, String)], columns: &Schema) -> Result<ConnectorDef> {
    let mut def = ConnectorDef {
        connector: String::new(),
        table: String::new(),
        events: None,
        events_per_second: 0,
        seed: DEFAULT_SEED,
        event_rate: DEFAULT_EVENT_RATE,
    };
    for (i, (key, value)) in options.iter().enumerate() {
        if options[..i].iter().any(|(k, _)| k == key) {
            return Err(bad_option(format!(
                "parameter \"{key}\" specified more than once"
            )));
        }
        match key.as_str() {
            "connector" => def.connector = value.to_ascii_lowercase(),
            "nexmark.table" => def.table = value.to_ascii_lowercase(),
            "nexmark.events" => def.events = Some(parse_u64(key, value)?),
            "nexmark.events_per_second" => def.events_per_second = parse_u64(key, value)?,
            "nexmark.seed" => def.seed = parse_u64(key, value)?,
            "nexmark.event_rate" => {
                def.event_rate = value
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|r| r.is_finite() && *r > 0.0)
                    .ok_or_else(|| {
                        bad_option(format!(
                            "invalid value for option \"nexmark.event_rate\": \"{value}\" (expected a positive number of events per second)"
                        ))
                    })?
            }
            other => {
                return Err(bad_option(format!(
                    "unrecognized table option \"{other}\" (allowed: {})",
                    CONNECTOR_OPTIONS.join(", ")
                )));
            }
        }
    }
    if def.connector.is_empty() {
        return Err(bad_option(
            "table options need \"connector\" (allowed: 'nexmark')".into(),
        ));
    }
    if def.connector != "nexmark" {
        return Err(Error::not_supported(format!(
            "connector \"{}\" is not supported (supported: nexmark)",
            def.connector
        )));
    }
    if def.table.is_empty() {
        return Err(bad_option(
            "the nexmark connector needs option \"nexmark.table\" (allowed: person, auction, bid)"
                .into(),
        ));
    }
    let table = nexmark_table(&def.table)?;
    check_columns(table, columns)?;
    check_event_times(&def)?;
    Ok(def)
}

/// How many events of an endless stream (no `nexmark.events`) must have an event time a
/// timestamp holds: a billion, an hour of the generator at full speed on many cores.
const ENDLESS_EVENTS_IN_RANGE: u64 = 1_000_000_000;

/// `22023` when the stream's last event (or, endless, its billionth) would have an event time
/// past the largest timestamp (2262-04-11, nanoseconds in 64 bits): a very slow
/// `nexmark.event_rate` would otherwise give every later row the same clamped time.
fn check_event_times(def: &ConnectorDef) -> Result<()> {
    let last = def
        .events
        .unwrap_or(ENDLESS_EVENTS_IN_RANGE)
        .saturating_sub(1);
    let ms = crate::connectors::nexmark::timestamp_ms(last, def.event_rate);
    if ms.checked_mul(1_000_000).is_some() && ms < i64::MAX {
        return Ok(());
    }
    Err(bad_option(format!(
        "option \"nexmark.event_rate\" = {} puts event {last} past the largest timestamp \
         (2262-04-11); use a higher rate{}",
        def.event_rate,
        if def.events.is_some() {
            " or fewer events"
        } else {
            ""
        }
    )))
}

/// `42804` unless `columns` are the generator's columns of `table`, by name and type, in
/// order.
fn check_columns(table: NexmarkTable, columns: &Schema) -> Result<()> {
    let expected = table.schema();
    let sql_type = |t: &DataType| match t {
        DataType::Int16 => "SMALLINT".to_string(),
        DataType::Int32 => "INTEGER".to_string(),
        DataType::Int64 => "BIGINT".to_string(),
        DataType::Float32 => "REAL".to_string(),
        DataType::Float64 => "DOUBLE PRECISION".to_string(),
        DataType::Boolean => "BOOLEAN".to_string(),
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 => "VARCHAR".to_string(),
        DataType::Date32 => "DATE".to_string(),
        DataType::Decimal128(..) => "NUMERIC".to_string(),
        DataType::Timestamp(_, None) => "TIMESTAMP".to_string(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMPTZ".to_string(),
        other => other.to_string(),
    };
    let wanted: Vec<String> = expected
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), sql_type(f.data_type())))
        .collect();
    let mismatch = |detail: String| {
        Error::catalog(
            "42804",
            format!(
                "columns do not match nexmark table \"{}\": {detail}; expected ({})",
                table.name(),
                wanted.join(", ")
            ),
        )
    };
    for (i, want) in expected.fields().iter().enumerate() {
        let Some(got) = columns.fields().get(i) else {
            return Err(mismatch(format!("column \"{}\" is missing", want.name())));
        };
        if got.name() != want.name() {
            return Err(mismatch(format!(
                "column {} is \"{}\", expected \"{}\"",
                i + 1,
                got.name(),
                want.name()
            )));
        }
        if got.data_type() != want.data_type() {
            return Err(mismatch(format!(
                "column \"{}\" has type {}, expected {}",
                got.name(),
                sql_type(got.data_type()),
                sql_type(want.data_type())
            )));
        }
    }
    if let Some(extra) = columns.fields().get(expected.fields().len()) {
        return Err(mismatch(format!("unexpected column \"{}\"", extra.name())));
    }
    Ok(())
}

/// A source's progress, shared by its thread and `weir_catalog.sources`.
#[derive(Debug, Default)]
pub(super) struct Progress {
    /// Events `0 .. offset` are in the table.
    offset: AtomicU64,
    /// The thread has ended (stream complete, stopped or failed).
    done: AtomicBool,
    /// Why it failed, if it did.
    failure: Mutex<Option<String>>,
}

/// A running connector table's thread.
pub(super) struct SourceTask {
    def: ConnectorDef,
    name: String,
    progress: Arc<Progress>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SourceTask {
    /// Tells the thread to stop and returns it to join.
    fn stop(&mut self) -> Option<JoinHandle<()>> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take()
    }
}

/// The running connector tables, by relation id.
pub(super) type Sources = Mutex<BTreeMap<RelationId, SourceTask>>;

/// A connector table's row in `weir_catalog.sources`.
#[derive(Debug, Clone)]
pub struct SourceInfo {
    /// The table's name.
    pub name: String,
    /// The connector (`nexmark`).
    pub connector: String,
    /// The Nexmark table it generates.
    pub nexmark_table: String,
    /// Events `0 .. offset_events` are in the table.
    pub offset_events: u64,
    /// Events of the whole stream; `None`: endless.
    pub total_events: Option<u64>,
    /// Rows appended to the table (those of events `0 .. offset_events`).
    pub rows: u64,
    /// `RUNNING`, `DONE`, `STOPPED` or `FAILED`.
    pub status: &'static str,
    /// The failure, if any.
    pub failure: Option<String>,
}

/// Joins source threads, logging a panic.
pub(super) fn join_sources(threads: Vec<JoinHandle<()>>) {
    for t in threads {
        if t.thread().id() == std::thread::current().id() {
            continue;
        }
        if t.join().is_err() {
            error!("a source thread panicked");
        }
    }
}

impl Engine {
    /// Starts the thread of every connector table that has none (after `CREATE TABLE`, and
    /// once views are recovered at start). Each resumes at its stored offset.
    ///
    /// # Errors
    /// Store errors reading an offset; `22023` for a stored definition the generator refuses.
    pub fn start_sources(self: &Arc<Self>) -> Result<()> {
        if self.is_stopping() {
            return Ok(());
        }
        let catalog = self.catalog();
        let mut sources = lock(&self.sources);
        for def in catalog.relations() {
            let Some(connector) = &def.connector else {
                continue;
            };
            if sources.contains_key(&def.id) {
                continue;
            }
            let table = nexmark_table(&connector.table)?;
            let config = NexmarkConfig {
                seed: connector.seed,
                event_rate: connector.event_rate,
            };
            let generator = NexmarkGenerator::new(config, table, connector.events)
                .map_err(|e| bad_option(e.to_string()))?;
            let offset = self.store.source_offset(def.id)?.unwrap_or(0);
            let progress = Arc::new(Progress::default());
            progress.offset.store(offset, Ordering::SeqCst);
            let stop = Arc::new(AtomicBool::new(false));
            let run = Ingest {
                engine: Arc::downgrade(self),
                id: def.id,
                name: def.name.clone(),
                generator,
                events_per_second: connector.events_per_second,
                progress: Arc::clone(&progress),
                stop: Arc::clone(&stop),
            };
            let thread = std::thread::Builder::new()
                .name(format!("source-{}", def.id))
                .spawn(move || run.run())
                .map_err(|e| Error::Internal(format!("cannot start a source thread: {e}")))?;
            info!(table = %def.name, offset, "source started");
            sources.insert(
                def.id,
                SourceTask {
                    def: connector.clone(),
                    name: def.name.clone(),
                    progress,
                    stop,
                    thread: Some(thread),
                },
            );
        }
        Ok(())
    }

    /// Stops the source of table `id`, if it has one, and joins its thread.
    pub(super) fn stop_source(&self, id: RelationId) {
        let task = lock(&self.sources).remove(&id);
        if let Some(mut task) = task {
            join_sources(task.stop().into_iter().collect());
        }
    }

    /// Tells every source to stop; returns their threads to join.
    pub(super) fn stop_sources(&self) -> Vec<JoinHandle<()>> {
        lock(&self.sources)
            .values_mut()
            .filter_map(SourceTask::stop)
            .collect()
    }

    /// Every connector table's progress, for `weir_catalog.sources`.
    pub fn sources(&self) -> Vec<SourceInfo> {
        lock(&self.sources)
            .values()
            .map(|t| {
                let offset = t.progress.offset.load(Ordering::SeqCst);
                let failure = lock(&t.progress.failure).clone();
                let done = t.progress.done.load(Ordering::SeqCst);
                let status = if failure.is_some() {
                    "FAILED"
                } else if t.def.events.is_some_and(|e| offset >= e) {
                    "DONE"
                } else if done {
                    "STOPPED"
                } else {
                    "RUNNING"
                };
                let rows = nexmark_table(&t.def.table)
                    .map(|table| table.rows_before(offset))
                    .unwrap_or(0);
                SourceInfo {
                    name: t.name.clone(),
                    connector: t.def.connector.clone(),
                    nexmark_table: t.def.table.clone(),
                    offset_events: offset,
                    total_events: t.def.events,
                    rows,
                    status,
                    failure,
                }
            })
            .collect()
    }

    /// Waits until every finite, unthrottled source (`nexmark.events` given,
    /// `nexmark.events_per_second = 0`) has ended (complete, stopped or failed), or the
    /// engine stops. `FLUSH` waits for this first, so that a finite stream is whole in its
    /// table and views afterwards.
    pub async fn wait_for_sources(&self) {
        loop {
            let pending = lock(&self.sources).values().any(|t| {
                t.def.events.is_some()
                    && t.def.events_per_second == 0
                    && !t.progress.done.load(Ordering::SeqCst)
            });
            if !pending || self.is_stopping() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Appends a connector's chunk to table `id` and records `offset` with it in one write
    /// batch. Waits while the write backlog is full, as [`Engine::write`] does, unless
    /// `stop` is set.
    ///
    /// # Errors
    /// `57P01` once the engine stops; `57014` when `stop` is set while waiting; store errors.
    fn write_source(
        &self,
        id: RelationId,
        change: ChangeBatch,
        offset: u64,
        stop: &AtomicBool,
    ) -> Result<()> {
        self.check_running()?;
        self.tables.wait_for_backlog(
            || self.clock.request_tick(),
            || self.is_stopping() || stop.load(Ordering::SeqCst),
        );
        if stop.load(Ordering::SeqCst) {
            return Err(Error::data("57014", "the source was stopped"));
        }
        let open = self.clock.open();
        self.check_running()?;
        self.tables
            .write_at(id, change, *open, Some(offset), None)
            .map(drop)
    }
}

/// One source thread's work.
struct Ingest {
    engine: Weak<Engine>,
    id: RelationId,
    name: String,
    generator: NexmarkGenerator,
    events_per_second: u64,
    progress: Arc<Progress>,
    stop: Arc<AtomicBool>,
}

impl Ingest {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Sleeps until `at`, in short steps so that a stop is noticed; false when stopped.
    fn sleep_until(&self, at: Instant) -> bool {
        loop {
            if self.stopped() {
                return false;
            }
            let now = Instant::now();
            if now >= at {
                return true;
            }
            std::thread::sleep((at - now).min(Duration::from_millis(20)));
        }
    }

    fn run(self) {
        let eps = self.events_per_second;
        // A throttled source writes about ten chunks a second.
        let chunk = if eps == 0 {
            FAST_CHUNK_EVENTS
        } else {
            (eps / 10).clamp(1, MAX_CHUNK_EVENTS)
        };
        let mut offset = self.progress.offset.load(Ordering::SeqCst);
        let (base, started) = (offset, Instant::now());
        loop {
            if self.stopped() {
                break;
            }
            let end = self.generator.events().unwrap_or(u64::MAX);
            if offset >= end {
                info!(table = %self.name, offset, "source complete");
                break;
            }
            let upto = offset.saturating_add(chunk).min(end);
            if eps > 0 {
                let due = Duration::from_secs_f64((upto - base) as f64 / eps as f64);
                if !self.sleep_until(started + due) {
                    break;
                }
            }
            let batch = self.generator.rows_between(offset, upto);
            let Some(engine) = self.engine.upgrade() else {
                break;
            };
            let written =
                engine.write_source(self.id, ChangeBatch::inserts(batch), upto, &self.stop);
            let stopping = engine.is_stopping();
            drop(engine);
            match written {
                Ok(()) => {
                    offset = upto;
                    self.progress.offset.store(offset, Ordering::SeqCst);
                }
                Err(_) if stopping || self.stopped() => break,
                Err(e) => {
                    error!(table = %self.name, offset, error = %e, "source failed");
                    *lock(&self.progress.failure) = Some(e.to_string());
                    break;
                }
            }
        }
        self.progress.done.store(true, Ordering::SeqCst);
    }
}

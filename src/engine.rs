//! The running database: store, catalog, tables, jobs and the barrier clock.
//!
//! ```text
//!  write ──► clock lock ─► validate ─► changelog (RocksDB, synced) ─► table contents + pending
//!  tick  ──► clock lock ─► close epoch e, drain every table's pending changes of epochs ≤ e
//!        ──► jobs in creation order run epoch e ─► publish Visible { e, every view's rows }
//!  SELECT ─► tables: latest acknowledged contents; views: one Visible snapshot for the statement
//! ```
//!
//! Lock order: `dataflow` → `clock` → a table's data. Writers take `clock` then the table.
//! The tables' snapshot holds every table's data at once (under `dataflow`), taken in
//! relation id order; nothing else holds two tables' locks.
//!
//! Threads: the barrier clock is a tokio task owned by the engine (it runs each tick on the
//! blocking pool); each job's checkpoint coordinator owns a state-writer thread, which owns
//! its checkpoints' upload threads. [`Engine::shutdown`] stops and joins all of them, and so
//! does dropping the engine.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, SortField};
use tokio::sync::{Notify, watch};
use tracing::{debug, error, info, warn};

use crate::catalog::{Catalog, IndexDef, RelationDef, RelationKind};
use crate::checkpoint::{
    CheckpointCoordinator, CheckpointStorage, History, JobSettings, StateBackendKind, StoppedWriter,
};
use crate::common::ChangeBatch;
use crate::common::{Epoch, RelationId};
use crate::error::{Error, Result};
use crate::settings::SessionVars;
use crate::state::index::{SecondaryIndex, first_duplicate, key_names, key_values};
use crate::state::table::{KeyLayout, consolidate};
use crate::state::{
    IndexedSnapshot, Positions, SnapshotPosition, StateBackend, StateTable, Store, TableSnapshots,
};
use crate::stream::EpochInput;
use crate::stream::job::{BackfillSource, EPOCH_BATCH_ROWS, Job, JobStatus, Recovery};
use crate::stream::plan::StreamPlan;

/// Rows per changelog entry when a large write (a COPY) is split; all land in one epoch.
const CHANGELOG_CHUNK_ROWS: usize = 65_536;

/// Default time between the tables' snapshots (ms), when a table has changed.
pub const DEFAULT_TABLE_SNAPSHOT_INTERVAL_MS: u64 = 5_000;

/// A table takes a snapshot at the next barrier once this many rows changed (bounds the
/// changelog a restart replays), whatever the interval.
const TABLE_SNAPSHOT_MAX_ROWS: usize = 1_000_000;

/// Default barrier interval (ms): how often an epoch closes without `FLUSH`.
pub const DEFAULT_BARRIER_INTERVAL_MS: u64 = 250;

/// Rows written to tables but not yet taken by an epoch beyond which a write waits for the
/// barrier clock to take them (backpressure): with the epoch in flight, the changes held in
/// memory stay within about twice this plus one statement, however fast clients write.
pub const MAX_BACKLOG_ROWS: usize = 4 * EPOCH_BATCH_ROWS;

/// What a `SELECT` on a view reads: every view's rows as of one epoch.
#[derive(Debug, Default)]
pub struct Visible {
    /// The last epoch every job has processed.
    pub epoch: Epoch,
    /// Each view's rows, or its job's failure.
    pub views: HashMap<RelationId, ViewState>,
    /// Each job's status and settings, for `weir_catalog.jobs`.
    pub jobs: Vec<JobInfo>,
}

/// A view's readable state.
#[derive(Debug, Clone)]
pub enum ViewState {
    /// The view's rows and its indexes at the published epoch (O(1) snapshots of their
    /// state tables).
    Ready(IndexedSnapshot),
    /// The job failed; reading the view reports this error.
    Failed {
        /// The view's name.
        view: String,
        /// SQLSTATE of the error.
        code: &'static str,
        /// Its message.
        message: String,
    },
}

/// A table's contents (rebuilt from its changelog at start), ordered by its primary key,
/// and its unprocessed changes.
struct TableData {
    name: String,
    schema: SchemaRef,
    /// The rows, keyed by the primary key columns first (so a key lookup is a prefix scan).
    contents: StateTable,
    primary_key: Option<PrimaryKey>,
    /// Secondary indexes: the same rows keyed by the indexes' columns, kept up to date with
    /// `contents` under the table's lock.
    indexes: Vec<SecondaryIndex>,
    /// Changes written but not yet processed by the jobs, with their epochs.
    pending: Vec<(Epoch, ChangeBatch)>,
    /// Next changelog sequence number (source offset).
    next_seq: u64,
    /// The epoch of the newest write.
    last_epoch: Epoch,
    /// The snapshot was read from the store's older row-by-row format; once a native snapshot
    /// holds the table, those rows are deleted.
    legacy_snapshot: bool,
    /// A native snapshot holds the table.
    native_snapshot: bool,
    /// The newest changelog sequence number the durable snapshot holds (0: none).
    snapshot_seq: u64,
    /// The epoch of the entry at `snapshot_seq`.
    snapshot_epoch: Epoch,
    /// Rows written since the last snapshot.
    unsnapshotted_rows: usize,
    /// The newest sequence number of each epoch with writes whose changelog entries are
    /// still kept, oldest first (to find where the changelog may be truncated).
    epoch_seqs: VecDeque<(Epoch, u64)>,
}

/// Encodes a primary key's columns as the leading key prefix of the table's rows.
struct PrimaryKey {
    columns: Vec<usize>,
    converter: RowConverter,
}

impl TableData {
    /// A table whose rows live in `backend` (the tables' instance, under the table's relation
    /// id; on the heap when `None`).
    fn new(def: &RelationDef, backend: Option<&Arc<StateBackend>>) -> Result<Self> {
        let schema = def.schema_ref();
        let (primary_key, key_columns) = match &def.kind {
            RelationKind::Table { primary_key } if !primary_key.is_empty() => {
                let fields = primary_key
                    .iter()
                    .map(|i| SortField::new(schema.field(*i).data_type().clone()))
                    .collect();
                (
                    Some(PrimaryKey {
                        columns: primary_key.clone(),
                        converter: RowConverter::new(fields)?,
                    }),
                    primary_key.clone(),
                )
            }
            _ => (None, Vec::new()),
        };
        let mut contents = StateTable::with_key(schema.clone(), &key_columns)?;
        if let Some(b) = backend {
            contents.store_as(b, def.id)?;
        }
        Ok(TableData {
            name: def.name.clone(),
            contents,
            schema,
            primary_key,
            indexes: Vec::new(),
            pending: Vec::new(),
            next_seq: 1,
            last_epoch: Epoch(0),
            legacy_snapshot: false,
            native_snapshot: false,
            snapshot_seq: 0,
            snapshot_epoch: Epoch(0),
            unsnapshotted_rows: 0,
            epoch_seqs: VecDeque::new(),
        })
    }

    /// Checks NOT NULL and PRIMARY KEY constraints for `change` against the current contents.
    /// O(rows of the change × log n).
    fn validate(&self, change: &ChangeBatch) -> Result<()> {
        for (i, f) in self.schema.fields().iter().enumerate() {
            if !f.is_nullable() && change.batch.column(i).null_count() > 0 {
                return Err(Error::data(
                    "23502",
                    format!(
                        "null value in column \"{}\" of relation \"{}\" violates not-null constraint",
                        f.name(),
                        self.name
                    ),
                ));
            }
        }
        // Retractions must name existing rows (inserts, the common case, skip the lookup).
        let retracts = change.weights.values().iter().any(|w| *w < 0);
        let counts = if retracts {
            self.contents.counts(&change.batch)?
        } else {
            Vec::new()
        };
        for (i, w) in change.weights.values().iter().enumerate() {
            if *w < 0 && counts[i] + w < 0 {
                // Several retractions of the same row in one batch are checked by apply().
                return Err(Error::Internal(
                    "retraction of a row that does not exist".into(),
                ));
            }
        }
        if let Some(pk) = &self.primary_key {
            let cols: Vec<_> = pk
                .columns
                .iter()
                .map(|i| change.batch.column(*i).clone())
                .collect();
            let rows = pk.converter.convert_columns(&cols)?;
            let skip = vec![false; change.len()];
            if let Some(i) = first_duplicate(&self.contents, &rows, change, &skip)? {
                let key: Vec<(usize, bool)> = pk.columns.iter().map(|c| (*c, false)).collect();
                return Err(Error::data(
                    "23505",
                    format!(
                        "duplicate key value violates unique constraint \"{}_pkey\": Key ({})=({}) already exists",
                        self.name,
                        key_names(&change.batch, &key),
                        key_values(&change.batch, &key, i)
                    ),
                ));
            }
        }
        for index in &self.indexes {
            index.check_unique(change)?;
        }
        Ok(())
    }

    /// Applies a validated change to the contents and the indexes, at most
    /// [`EPOCH_BATCH_ROWS`] rows at a time, so that a large COPY's key encodings and write
    /// batches are built one slice at a time, not all at once.
    fn apply(&mut self, change: &ChangeBatch) -> Result<()> {
        for part in change.pieces(EPOCH_BATCH_ROWS) {
            self.contents.apply(&part)?;
            for index in &mut self.indexes {
                index.rows.apply(&part)?;
            }
        }
        Ok(())
    }

    /// The contents and the indexes, frozen together in O(1) each.
    fn snapshot(&self) -> IndexedSnapshot {
        IndexedSnapshot {
            rows: self.contents.snapshot(),
            indexes: self.indexes.iter().map(|i| i.rows.snapshot()).collect(),
        }
    }

    /// Records that changelog entries up to `seq` are of epoch `epoch`.
    fn note_entries(&mut self, seq: u64, epoch: Epoch, rows: usize) {
        self.last_epoch = epoch;
        self.unsnapshotted_rows += rows;
        match self.epoch_seqs.back_mut() {
            Some((e, s)) if *e == epoch => *s = seq,
            _ => self.epoch_seqs.push_back((epoch, seq)),
        }
    }

    /// Loads the table: its snapshot (if any: `position` when the live instance was opened
    /// from a native snapshot, or rows of the store's older format), then the changelog
    /// entries after it. Returns (rows in the snapshot, changelog rows replayed). Work is
    /// proportional to the changes since the snapshot, not to the table or its history.
    fn restore(
        &mut self,
        store: &Store,
        id: RelationId,
        position: Option<SnapshotPosition>,
    ) -> Result<(usize, usize)> {
        let mut from_snapshot = 0usize;
        if let Some(p) = position {
            self.native_snapshot = true;
            self.contents.set_total(p.rows);
            from_snapshot = p.rows as usize;
            self.snapshot_seq = p.seq;
            self.snapshot_epoch = Epoch(p.epoch);
            self.next_seq = p.seq + 1;
            self.last_epoch = Epoch(p.epoch);
        } else if let Some(snap) = store.read_table_snapshot(id)? {
            self.contents
                .load_rows(snap.rows.iter().map(|(k, c)| (k.as_ref(), *c)))?;
            from_snapshot += snap.rows.iter().map(|(_, c)| *c as usize).sum::<usize>();
            self.legacy_snapshot = true;
            // Due for a native snapshot soon.
            self.unsnapshotted_rows = from_snapshot.max(1);
            self.snapshot_seq = snap.seq;
            self.snapshot_epoch = snap.epoch;
            self.next_seq = snap.seq + 1;
            self.last_epoch = snap.epoch;
        }
        let mut replayed = 0usize;
        for entry in store.read_changelog_after(id, self.snapshot_seq)? {
            self.apply(&entry.change)?;
            replayed += entry.change.len();
            self.next_seq = entry.seq + 1;
            self.note_entries(entry.seq, entry.epoch, entry.change.len());
        }
        Ok((from_snapshot, replayed))
    }

    /// Where a snapshot taken now stands in this table.
    fn position(&self) -> SnapshotPosition {
        SnapshotPosition {
            seq: self.next_seq - 1,
            epoch: self.last_epoch.0,
            rows: self.contents.len(),
        }
    }

    /// Records that a snapshot at `position` is durable.
    fn snapshotted(&mut self, position: SnapshotPosition) {
        self.snapshot_seq = position.seq;
        self.snapshot_epoch = Epoch(position.epoch);
        self.unsnapshotted_rows = 0;
        self.native_snapshot = true;
    }

    /// Truncates the changelog through the newest entry of an epoch `<= keep_after` that the
    /// durable snapshot holds (and, once a native snapshot holds the table, the snapshot of
    /// the store's older format). Cost: a range delete.
    fn truncate(&mut self, store: &Store, id: RelationId, keep_after: Epoch) -> Result<()> {
        let seq = self.snapshot_seq;
        let truncate_through = self
            .epoch_seqs
            .iter()
            .take_while(|(e, s)| *e <= keep_after && *s <= seq)
            .last()
            .map(|(_, s)| *s)
            .unwrap_or(0);
        let drop_legacy = self.legacy_snapshot && self.native_snapshot;
        if truncate_through > 0 || drop_legacy {
            store.truncate_changelog(id, truncate_through, drop_legacy)?;
            self.legacy_snapshot = false;
            self.forget_entries_through(truncate_through);
        }
        Ok(())
    }

    /// Drops the bookkeeping of changelog entries up to `seq` (truncated).
    fn forget_entries_through(&mut self, seq: u64) {
        while self.epoch_seqs.front().is_some_and(|(_, s)| *s <= seq) {
            self.epoch_seqs.pop_front();
        }
    }

    /// The contents as of the last processed epoch, to backfill a view (table `id`): current
    /// contents (an O(1) snapshot) minus the pending changes of the open epoch.
    fn processed_contents(&self, id: RelationId) -> BackfillSource {
        BackfillSource {
            id,
            rows: self.contents.snapshot(),
            after: self.pending.iter().rev().map(|(_, c)| c.negate()).collect(),
        }
    }
}

/// Relation ids, which name the tables' rows in the tables' instance, stay below this; derived
/// tables there (secondary indexes) are allocated from it on.
const DERIVED_TABLE_IDS: u64 = 1 << 62;

/// Every table's rows in one state backend instance, and its native snapshots.
struct TableState {
    live: Arc<StateBackend>,
    snapshots: TableSnapshots,
    /// When the last snapshot was taken (or the engine opened).
    taken_at: Mutex<Instant>,
}

struct Clock {
    /// The epoch writes are stamped with now; closed by the next tick.
    open: Epoch,
}

/// The jobs, in creation order.
#[derive(Default)]
struct Dataflow {
    jobs: BTreeMap<RelationId, Job>,
}

impl Dataflow {
    /// `id` and every job that reads it, directly or through other views.
    fn downstream_closure(&self, id: RelationId) -> BTreeSet<RelationId> {
        let mut out = BTreeSet::from([id]);
        for (j, job) in &self.jobs {
            if *j > id && job.sources.iter().any(|s| out.contains(s)) {
                out.insert(*j);
            }
        }
        out
    }

    /// The jobs connected to any of `ids` through view-on-view edges (the recovery group).
    fn component(&self, ids: &BTreeSet<RelationId>) -> BTreeSet<RelationId> {
        let mut out: BTreeSet<RelationId> = ids.clone();
        loop {
            let mut grew = false;
            for (j, job) in &self.jobs {
                let linked = out.contains(j) || job.sources.iter().any(|s| out.contains(s));
                if linked {
                    if out.insert(*j) {
                        grew = true;
                    }
                    for s in &job.sources {
                        if self.jobs.contains_key(s) && out.insert(*s) {
                            grew = true;
                        }
                    }
                }
            }
            if !grew {
                return out;
            }
        }
    }
}

/// A job's row in `weir_catalog.jobs`, published with each snapshot.
#[derive(Debug, Clone)]
pub struct JobInfo {
    /// The view's name.
    pub name: String,
    /// `RUNNING`, `RESTARTING` or `FAILED`.
    pub status: &'static str,
    /// The failure, when not running.
    pub failure: Option<String>,
    /// Restarts so far.
    pub restarts: u64,
    /// Captured settings (name, value).
    pub settings: BTreeMap<String, String>,
    /// Live checkpoint history.
    pub history: Option<History>,
    /// The last recovery.
    pub recovery: Option<Recovery>,
}

/// Server-wide configuration.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Tables, job state and (by default) checkpoints live here.
    pub data_dir: PathBuf,
    /// Checkpoint directory (default `<data_dir>/checkpoints`).
    pub checkpoint_dir: Option<PathBuf>,
    /// Time between barriers.
    pub barrier_interval: Duration,
    /// Server-wide defaults of session variables (name, value), validated at open.
    pub defaults: Vec<(String, String)>,
    /// Time between the tables' snapshots, when a table changed (restart opens the newest and
    /// replays only the changelog after it; the changelog behind it is truncated).
    pub table_snapshot_interval: Duration,
    /// Memory budget of the state backend in bytes (its block cache and memtables).
    pub memory_limit: u64,
    /// Keep tables', indexes' and views' rows in memory instead of the state backend (for
    /// benches comparing the two; the server always uses the backend).
    pub rows_in_memory: bool,
}

impl EngineConfig {
    /// Defaults over `data_dir`.
    pub fn new(data_dir: &Path) -> Self {
        EngineConfig {
            data_dir: data_dir.to_path_buf(),
            checkpoint_dir: None,
            barrier_interval: Duration::from_millis(DEFAULT_BARRIER_INTERVAL_MS),
            defaults: Vec::new(),
            table_snapshot_interval: Duration::from_millis(DEFAULT_TABLE_SNAPSHOT_INTERVAL_MS),
            memory_limit: crate::state::backend::default_memory_limit(),
            rows_in_memory: false,
        }
    }
}

/// The database engine shared by all sessions.
pub struct Engine {
    store: Store,
    /// The state backend (RocksDB, memory bounded).
    state: Arc<StateBackend>,
    /// The state backend's root, whose siblings hold the jobs' state; `None` keeps rows on
    /// the heap (see [`EngineConfig::rows_in_memory`]).
    rows_in: Option<Arc<StateBackend>>,
    /// The tables' instance and its snapshots (`None` with rows on the heap: then tables take
    /// no snapshots and keep their whole changelog).
    table_state: Option<TableState>,
    catalog: Mutex<Catalog>,
    tables: Mutex<HashMap<RelationId, Arc<Mutex<TableData>>>>,
    clock: Mutex<Clock>,
    dataflow: Mutex<Dataflow>,
    visible: watch::Sender<Arc<Visible>>,
    /// Wakes the barrier clock at once (`FLUSH`, `RESUME`); shared with the clock task.
    tick_request: Arc<Notify>,
    /// Becomes `true` when the engine shuts down (or is dropped): the barrier clock stops,
    /// `FLUSH` returns, and changes are refused.
    stopping: watch::Sender<bool>,
    /// Rows written since the last epoch took the tables' pending changes (exact at each
    /// tick, which resets it); see [`MAX_BACKLOG_ROWS`].
    backlog: Mutex<usize>,
    /// Signalled when an epoch takes the pending changes (the backlog drops to 0).
    backlog_taken: std::sync::Condvar,
    /// The barrier clock task, once started.
    clock_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    barrier_interval: Duration,
    table_snapshot_interval: Duration,
    data_dir: PathBuf,
    checkpoint_dir: PathBuf,
    defaults: SessionVars,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("store", &self.store)
            .finish()
    }
}

/// Whether `name` is free for a new relation or index: `Ok(false)` when taken and
/// `if_not_exists` says to skip.
///
/// # Errors
/// `42P07` when taken and `if_not_exists` is false.
fn name_free(catalog: &Catalog, name: &str, if_not_exists: bool) -> Result<bool> {
    if !catalog.name_taken(name) {
        return Ok(true);
    }
    if if_not_exists {
        return Ok(false);
    }
    Err(Error::catalog(
        "42P07",
        format!("relation \"{name}\" already exists"),
    ))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock is a bug; the data it guards is still the best we have.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Joins stopped state writers, all of them even when one fails; the first error is returned.
fn join_writers(writers: Vec<StoppedWriter>) -> Result<()> {
    let mut result = Ok(());
    for w in writers {
        if let Err(e) = w.join() {
            error!(error = %e, "state writer failed");
            if result.is_ok() {
                result = Err(e);
            }
        }
    }
    result
}

impl Drop for Engine {
    /// Stops the barrier clock and every job's state writer, joining the writers (and so their
    /// upload threads) before the store and the jobs' databases are closed. No tick can be in
    /// progress here: a tick holds a strong reference to the engine.
    fn drop(&mut self) {
        self.stopping.send_replace(true);
        let clock = self
            .clock_task
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(clock) = clock {
            // Between ticks the clock holds no reference to the engine: ending it is enough.
            clock.abort();
        }
        let df = self.dataflow.get_mut().unwrap_or_else(|e| e.into_inner());
        let writers: Vec<StoppedWriter> = df
            .jobs
            .values_mut()
            .filter_map(|j| j.coordinator.as_mut())
            .filter_map(|c| c.stop())
            .collect();
        // Errors are logged by join_writers; a destructor cannot report them otherwise.
        let _ = join_writers(writers);
    }
}

impl Engine {
    /// Opens `dir` with the default configuration and the given barrier interval.
    ///
    /// # Errors
    /// As [`Engine::open_with`].
    pub fn open(dir: &Path, barrier_interval: Duration) -> Result<Arc<Self>> {
        let mut config = EngineConfig::new(dir);
        config.barrier_interval = barrier_interval;
        Self::open_with(config)
    }

    /// Opens the data directory and replays every table's changelog; views are recompiled
    /// afterwards by [`Engine::recover_view`] and recovered by [`Engine::recover_all`].
    ///
    /// # Errors
    /// [`Error::State`] when the directory is locked by another server or corrupt; `22023` /
    /// `42704` for an invalid server-wide default.
    pub fn open_with(config: EngineConfig) -> Result<Arc<Self>> {
        let mut defaults = SessionVars::default();
        for (k, v) in &config.defaults {
            defaults.set(k, v)?;
        }
        let defaults = defaults.into_defaults();
        let dir = config.data_dir.as_path();
        let store = Store::open(dir)?;
        // The jobs' live state databases are disposable: at start every job restores a
        // checkpoint or is rebuilt from its inputs, each into a fresh directory.
        let jobs_dir = dir.join("jobs");
        if jobs_dir.exists() {
            std::fs::remove_dir_all(&jobs_dir)
                .map_err(|e| Error::State(format!("cannot empty {}: {e}", jobs_dir.display())))?;
        }
        let state = StateBackend::open(&dir.join("state"), config.memory_limit)?;
        let rows_in = (!config.rows_in_memory).then(|| Arc::clone(&state));
        let catalog = match store.get_meta("catalog")? {
            Some(bytes) => Catalog::from_json(&bytes)?,
            None => Catalog::default(),
        };
        let mut tables = HashMap::new();
        let mut max_epoch = Epoch(0);
        let mut rows = 0usize;
        let mut snapshot_rows = 0usize;
        let (table_state, positions) = match &rows_in {
            Some(root) => {
                let snapshots = TableSnapshots::open(dir.join("tables"))?;
                let (live, positions) = snapshots.live(root)?;
                // Ids below DERIVED_TABLE_IDS are relation ids; above, derived tables
                // (secondary indexes), rebuilt below from the rows.
                live.allocate_from(DERIVED_TABLE_IDS);
                live.drop_unallocated()?;
                for id in positions.keys() {
                    if catalog.get(*id).is_none() {
                        // Dropped after the snapshot.
                        live.drop_table(*id)?;
                    }
                }
                let state = TableState {
                    live,
                    snapshots,
                    taken_at: Mutex::new(Instant::now()),
                };
                (Some(state), positions)
            }
            None => (None, Positions::new()),
        };
        let tables_in = table_state.as_ref().map(|t| Arc::clone(&t.live));
        for def in catalog.relations().filter(|r| r.is_table()) {
            let mut data = TableData::new(def, tables_in.as_ref())?;
            let position = positions.get(&def.id).copied();
            let (loaded, replayed) = data.restore(&store, def.id, position)?;
            for index in catalog.indexes_on(def.id) {
                let built = SecondaryIndex::build(&index, &data.contents)?;
                data.indexes.push(built);
            }
            snapshot_rows += loaded;
            rows += replayed;
            max_epoch = max_epoch.max(data.last_epoch);
            tables.insert(def.id, Arc::new(Mutex::new(data)));
        }
        info!(
            tables = tables.len(),
            snapshot_rows,
            replayed_rows = rows,
            epoch = max_epoch.0,
            "loaded tables (snapshot, then the changelog after it)"
        );
        let (visible, _) = watch::channel(Arc::new(Visible {
            epoch: max_epoch,
            views: HashMap::new(),
            jobs: Vec::new(),
        }));
        let checkpoint_dir = config
            .checkpoint_dir
            .clone()
            .unwrap_or_else(|| dir.join("checkpoints"));
        Ok(Arc::new(Engine {
            store,
            state,
            rows_in,
            table_state,
            catalog: Mutex::new(catalog),
            tables: Mutex::new(tables),
            clock: Mutex::new(Clock {
                open: Epoch(max_epoch.0 + 1),
            }),
            dataflow: Mutex::new(Dataflow::default()),
            visible,
            tick_request: Arc::new(Notify::new()),
            stopping: watch::Sender::new(false),
            backlog: Mutex::new(0),
            backlog_taken: std::sync::Condvar::new(),
            clock_task: Mutex::new(None),
            barrier_interval: config.barrier_interval,
            table_snapshot_interval: config.table_snapshot_interval,
            data_dir: dir.to_path_buf(),
            checkpoint_dir,
            defaults,
        }))
    }

    /// The state backend's memory budget and use (`weir_catalog.memory`).
    pub fn memory_usage(&self) -> crate::state::backend::MemoryUsage {
        self.state.usage()
    }

    /// The server-wide defaults of session variables.
    pub fn default_vars(&self) -> SessionVars {
        self.defaults.clone()
    }

    /// The materialized views to recompile at start, in creation order.
    pub fn views_to_recover(&self) -> Vec<RelationDef> {
        lock(&self.catalog)
            .relations()
            .filter(|r| !r.is_table())
            .cloned()
            .collect()
    }

    fn coordinator(
        &self,
        id: RelationId,
        name: &str,
        settings: &BTreeMap<String, String>,
    ) -> Result<CheckpointCoordinator> {
        let settings = JobSettings::from_values(settings)?;
        let storage = CheckpointStorage::open(
            self.checkpoint_dir.join(id.to_string()),
            self.data_dir.join("jobs").join(id.to_string()),
            settings.backend,
        )?;
        Ok(CheckpointCoordinator::new(
            name.to_string(),
            settings,
            storage,
        ))
    }

    /// Recompiles one materialized view at start from its planned query; its state is
    /// recovered by [`Engine::recover_all`] once every view is compiled.
    ///
    /// # Errors
    /// `0A000` if the stored query no longer compiles; state errors opening its checkpoints.
    pub fn recover_view(&self, def: &RelationDef, plan: StreamPlan) -> Result<()> {
        let settings = match &def.kind {
            RelationKind::MaterializedView { settings, .. } => settings.clone(),
            RelationKind::Table { .. } => BTreeMap::new(),
        };
        let coordinator = self.coordinator(def.id, &def.name, &settings)?;
        let mut job = Job::try_new(
            def.id,
            def.name.clone(),
            plan,
            def.schema_ref(),
            Some(coordinator),
            self.rows_in.clone(),
        )?;
        for index in lock(&self.catalog).indexes_on(def.id) {
            job.add_index(&index)?;
        }
        lock(&self.dataflow).jobs.insert(def.id, job);
        Ok(())
    }

    /// Recovers every job at start: each restores its latest usable checkpoint and replays
    /// its sources from there (see [`Engine::recover_jobs`]), then all views are published.
    ///
    /// # Errors
    /// Internal errors only; a view that cannot be recovered is left failed.
    pub fn recover_all(&self) -> Result<()> {
        let mut df = lock(&self.dataflow);
        let ids: BTreeSet<RelationId> = df.jobs.keys().copied().collect();
        // Epochs keep growing across restarts: checkpoints may have been taken at epochs after
        // the last table write, so the clock resumes after the newest checkpoint too.
        let newest_checkpoint = df
            .jobs
            .values()
            .filter_map(|j| j.coordinator.as_ref())
            .flat_map(|c| c.completed())
            .map(|(_, e)| e)
            .max()
            .unwrap_or(Epoch(0));
        let mut target = self.visible().epoch;
        if newest_checkpoint > target {
            target = newest_checkpoint;
            lock(&self.clock).open = Epoch(target.0 + 1);
            self.visible.send_replace(Arc::new(Visible {
                epoch: target,
                views: HashMap::new(),
                jobs: Vec::new(),
            }));
        }
        let now = Instant::now();
        for (id, e) in self.recover_jobs(&mut df, &ids, target)? {
            self.on_failure(&mut df, id, &e, now);
        }
        // What the restart replayed is made durable before the server serves: the tables take
        // a snapshot and every job's instance flushes its memtables (so its first checkpoint
        // is quick). Otherwise a server that fails again soon after a long replay would replay
        // all of it again, and more each time.
        self.snapshot_tables(&df, self.visible().epoch, true);
        for job in df.jobs.values() {
            if let Err(e) = job.flush_state() {
                warn!(view = %job.name, error = %e, "cannot flush the recovered state");
            }
        }
        self.publish(&df, None)
    }

    /// Recovers `members` (a set closed under view-on-view edges) to epoch `target`. Returns
    /// the members that failed (their restart strategy decides what follows); the views over
    /// a failed member are left to that decision too.
    ///
    /// Downstream first, each member gets a bound: the target, lowered to the epoch of every
    /// checkpoint a downstream member picked (and to the bound of a downstream member that
    /// picked none), and picks its newest completed checkpoint at or before its bound, or
    /// none. Upstream first, each member gets its start epoch: its checkpoint's, or without
    /// one the newest start of its upstream members, or (reading only tables) its bound, where
    /// it is backfilled from the tables' contents as of that epoch. So every upstream member
    /// starts at or before the epoch its readers restored, even when an upstream checkpoint
    /// the readers relied on is missing. Then the epochs are replayed in segments between
    /// the start epochs, every active member in creation order, a segment's changelog entries
    /// summed into one change batch: a member joins at its start epoch (restored or
    /// backfilled from its inputs' contents at that epoch).
    fn recover_jobs(
        &self,
        df: &mut Dataflow,
        members: &BTreeSet<RelationId>,
        target: Epoch,
    ) -> Result<Vec<(RelationId, Error)>> {
        // 1. Bounds and checkpoints, downstream first.
        let mut picked: BTreeMap<RelationId, Option<(u64, Epoch)>> = BTreeMap::new();
        let mut bound: BTreeMap<RelationId, Epoch> = BTreeMap::new();
        for id in members.iter().rev() {
            let b = members
                .iter()
                .filter(|d| df.jobs.get(d).is_some_and(|j| j.sources.contains(id)))
                .filter_map(|d| match picked.get(d).copied().flatten() {
                    Some((_, e)) => Some(e),
                    None => bound.get(d).copied(),
                })
                .min()
                .unwrap_or(target)
                .min(target);
            let pick = df
                .jobs
                .get(id)
                .and_then(|j| j.coordinator.as_ref())
                .and_then(|c| c.completed().into_iter().rfind(|(_, e)| *e <= b));
            bound.insert(*id, b);
            picked.insert(*id, pick);
        }
        // 2. Start epochs, upstream first: the checkpoint's, or the newest upstream member's,
        //    or (reading only tables) the bound: backfilled from the tables' contents as of
        //    the bound (their current contents minus the changelog after it, which is kept
        //    for every retained checkpoint, see `changelog_needed_after`).
        let mut start: BTreeMap<RelationId, Epoch> = BTreeMap::new();
        for id in members {
            let e = match picked[id] {
                Some((_, e)) => e,
                None => df.jobs[id]
                    .sources
                    .iter()
                    .filter_map(|s| start.get(s).copied())
                    .max()
                    .unwrap_or(bound[id]),
            };
            start.insert(*id, e);
        }
        for id in members {
            if let Some(job) = df.jobs.get(id)
                && let Some(c) = &job.coordinator
            {
                c.abort_all("the job was restarted before the checkpoint completed");
            }
        }
        let mut bounds: BTreeSet<Epoch> = start.values().copied().collect();
        bounds.insert(target);
        let mut active: BTreeSet<RelationId> = BTreeSet::new();
        let mut failed: BTreeMap<RelationId, Error> = BTreeMap::new();
        let mut replayed: BTreeMap<RelationId, u64> = BTreeMap::new();
        let mut prev = Epoch(0);
        for b in bounds {
            if b > target {
                break;
            }
            if b > prev && !active.is_empty() {
                self.replay_segment(df, &active, prev, b, &mut failed, &mut replayed)?;
                active.retain(|id| !failed.contains_key(id));
            }
            for id in members.iter().filter(|id| start[*id] == b) {
                if failed.contains_key(id) {
                    continue;
                }
                match self.activate(df, *id, picked[id], b) {
                    Ok(()) => {
                        active.insert(*id);
                    }
                    Err(e) => {
                        failed.insert(*id, e);
                    }
                }
            }
            prev = b;
        }
        let mut failures = Vec::new();
        for id in members {
            let Some(job) = df.jobs.get_mut(id) else {
                continue;
            };
            if let Some(e) = failed.remove(id) {
                warn!(view = %job.name, error = %e, "view failed while recovering");
                failures.push((*id, e));
                continue;
            }
            if !active.contains(id) {
                // An upstream member failed; its failure handling covers this view too.
                continue;
            }
            job.status = JobStatus::Running;
            let rec = Recovery {
                checkpoint_id: picked[id].map(|(c, _)| c),
                epoch: start[id],
                replayed_rows: replayed.get(id).copied().unwrap_or(0),
            };
            info!(
                view = %job.name,
                checkpoint = ?rec.checkpoint_id,
                epoch = rec.epoch.0,
                replayed_rows = rec.replayed_rows,
                "view recovered"
            );
            job.last_recovery = Some(rec);
            if let Some(c) = &job.coordinator {
                c.reset_failures();
            }
        }
        Ok(failures)
    }

    /// Brings member `id` into a recovery at epoch `at`: restores its checkpoint, or backfills
    /// it from its inputs as of `at`.
    fn activate(
        &self,
        df: &mut Dataflow,
        id: RelationId,
        pick: Option<(u64, Epoch)>,
        at: Epoch,
    ) -> Result<()> {
        let backfill = match pick {
            Some(_) => None,
            None => {
                let job = &df.jobs[&id];
                let mut sources = Vec::new();
                for s in &job.sources {
                    sources.push(if let Some(up) = df.jobs.get(s) {
                        up.contents_for_backfill()?
                    } else {
                        self.table_contents_at(*s, at)?
                    });
                }
                Some(sources)
            }
        };
        let job = df
            .jobs
            .get_mut(&id)
            .ok_or_else(|| Error::Internal("job vanished".into()))?;
        match (pick, backfill) {
            (Some((checkpoint, _)), _) => {
                let coordinator = job
                    .coordinator
                    .as_ref()
                    .ok_or_else(|| Error::Internal("job without coordinator".into()))?;
                let restored = coordinator.restore(checkpoint, self.rows_in.as_deref())?;
                job.load(restored)?;
            }
            (None, input) => {
                job.reset()?;
                if let Some(sources) = input {
                    job.backfill(&sources)?;
                }
            }
        }
        Ok(())
    }

    /// A table's contents as of epoch `at`, to backfill a view: its current rows (an O(1)
    /// snapshot, taken under the table's lock with the changelog read) and the negations of
    /// the changelog entries after `at`, newest first (the changelog before `at` may be
    /// truncated; after it is kept, see `changelog_needed_after`).
    ///
    /// # Errors
    /// `42P01` for an unknown table; changelog read errors.
    fn table_contents_at(&self, table: RelationId, at: Epoch) -> Result<BackfillSource> {
        let t = self.table(table)?;
        let t = lock(&t);
        let rows = t.contents.snapshot();
        let later = self
            .store
            .read_changelog_range(table, at, Epoch(u64::MAX))?;
        Ok(BackfillSource {
            id: table,
            rows,
            after: later.into_iter().rev().map(|e| e.change.negate()).collect(),
        })
    }

    /// A table's changes of epochs `(after, upto]` summed into one change batch, with the
    /// number of rows read. From the beginning (`after` = 0) that is the table's contents as
    /// of `upto`: its current contents minus the changelog entries after `upto` (the
    /// changelog before may be truncated). Otherwise the changelog entries themselves, which
    /// truncation keeps (see `changelog_needed_after`).
    fn table_changes_between(
        &self,
        table: RelationId,
        after: Epoch,
        upto: Epoch,
    ) -> Result<(ChangeBatch, u64)> {
        let t = self.table(table)?;
        if after == Epoch(0) {
            // Under the table's lock, so no write lands between the two reads.
            let t = lock(&t);
            let mut parts = vec![t.contents.to_change()?];
            let later = self
                .store
                .read_changelog_range(table, upto, Epoch(u64::MAX))?;
            let mut rows = parts[0].len() as u64;
            for e in later {
                rows += e.change.len() as u64;
                parts.push(e.change.negate());
            }
            return Ok((consolidate(&t.schema, &parts)?, rows));
        }
        let schema = lock(&t).schema.clone();
        let entries = self.store.read_changelog_range(table, after, upto)?;
        let rows: u64 = entries.iter().map(|e| e.change.len() as u64).sum();
        let parts: Vec<ChangeBatch> = entries.into_iter().map(|e| e.change).collect();
        Ok((consolidate(&schema, &parts)?, rows))
    }

    /// Replays epochs `(after, upto]` through the `active` members as one step.
    fn replay_segment(
        &self,
        df: &mut Dataflow,
        active: &BTreeSet<RelationId>,
        after: Epoch,
        upto: Epoch,
        failed: &mut BTreeMap<RelationId, Error>,
        replayed: &mut BTreeMap<RelationId, u64>,
    ) -> Result<()> {
        let mut input = EpochInput::default();
        let mut rows_of: HashMap<RelationId, u64> = HashMap::new();
        for id in active {
            for s in &df.jobs[id].sources {
                if df.jobs.contains_key(s) || input.changes.contains_key(s) {
                    continue;
                }
                let (change, rows) = self.table_changes_between(*s, after, upto)?;
                rows_of.insert(*s, rows);
                input.changes.insert(*s, vec![change]);
            }
        }
        for id in active {
            let Some(job) = df.jobs.get_mut(id) else {
                continue;
            };
            if job.sources.iter().any(|s| failed.contains_key(s)) {
                failed.insert(
                    *id,
                    Error::data(
                        "55000",
                        "an upstream materialized view failed while recovering",
                    ),
                );
                continue;
            }
            let rows: u64 = job.sources.iter().filter_map(|s| rows_of.get(s)).sum();
            *replayed.entry(*id).or_default() += rows;
            match job.process(&input) {
                Ok(out) => {
                    input.changes.insert(*id, out);
                }
                Err(e) => {
                    failed.insert(*id, e);
                }
            }
        }
        Ok(())
    }

    /// Starts the barrier clock on the current tokio runtime: an epoch closes every barrier
    /// interval, or at once on `FLUSH`. Does nothing if the clock runs already or the engine
    /// is shutting down.
    ///
    /// The clock is a task owned by the engine. Between ticks it holds only a weak reference,
    /// so dropping the last `Arc<Engine>` drops the engine (which stops the clock); during a
    /// tick it holds a strong one, so the engine is never dropped in the middle of a tick
    /// (if the tick's reference is the last, the engine is dropped on the blocking thread
    /// after it). [`Engine::shutdown`] stops the clock and waits for a tick in progress.
    pub fn start_barrier_clock(self: &Arc<Self>) {
        let mut slot = lock(&self.clock_task);
        if slot.as_ref().is_some_and(|h| !h.is_finished()) || self.is_stopping() {
            return;
        }
        let weak = Arc::downgrade(self);
        let tick_request = Arc::clone(&self.tick_request);
        let mut stopping = self.stopping.subscribe();
        let interval = self.barrier_interval;
        *slot = Some(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(interval) => {}
                    _ = tick_request.notified() => {}
                    changed = stopping.changed() => {
                        if changed.is_err() {
                            // The engine was dropped.
                            break;
                        }
                    }
                }
                if *stopping.borrow() {
                    break;
                }
                let Some(engine) = weak.upgrade() else {
                    break;
                };
                match tokio::task::spawn_blocking(move || engine.tick()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => error!(error = %err, "barrier failed"),
                    Err(err) => error!(error = %err, "barrier task panicked"),
                }
            }
            debug!("barrier clock stopped");
        }));
    }

    /// Whether [`Engine::shutdown`] has begun.
    pub fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// `57P01` once the engine is shutting down.
    fn check_running(&self) -> Result<()> {
        if self.is_stopping() {
            return Err(Error::data("57P01", "the server is shutting down"));
        }
        Ok(())
    }

    /// Shuts the engine down, in this order:
    ///
    /// 1. marks it stopping: the barrier clock ends at its next wake-up, `FLUSH` returns at
    ///    once, and later writes, DDL and ticks are refused (`57P01`);
    /// 2. waits for the barrier clock task to end, so that a tick in progress completes (the
    ///    checkpoints it triggers are handed to their jobs' state writers);
    /// 3. stops every job's checkpoint coordinator and joins its state-writer thread, which
    ///    first finishes the checkpoints already triggered and joins their upload threads.
    ///
    /// Afterwards no thread of the engine runs, and the store's and the jobs' RocksDB
    /// databases are only held by the engine: they close when the last `Arc<Engine>` is
    /// dropped. The waits never block a tokio worker thread (threads are joined on the
    /// blocking pool). Calling it again does nothing more.
    ///
    /// # Errors
    /// [`Error::Internal`] when the barrier clock or a state writer panicked; the other steps
    /// are still carried out.
    pub async fn shutdown(&self) -> Result<()> {
        self.stopping.send_replace(true);
        let mut result = Ok(());
        let clock = lock(&self.clock_task).take();
        if let Some(clock) = clock
            && let Err(e) = clock.await
            && e.is_panic()
        {
            result = Err(Error::Internal("the barrier clock panicked".into()));
        }
        // A statement may hold the dataflow lock for a while: poll it rather than block.
        let writers = loop {
            if let Some(writers) = self.try_stop_jobs() {
                break writers;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        if !writers.is_empty() {
            let joined = tokio::task::spawn_blocking(move || join_writers(writers))
                .await
                .unwrap_or_else(|e| Err(Error::Internal(format!("joining state writers: {e}"))));
            result = result.and(joined);
        }
        info!("engine stopped");
        result
    }

    /// Takes a last snapshot of the tables if one changed, stops every job's coordinator and
    /// returns their state writers to join, or `None` when the dataflow lock is taken.
    fn try_stop_jobs(&self) -> Option<Vec<StoppedWriter>> {
        let mut df = match self.dataflow.try_lock() {
            Ok(df) => df,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        // The tables' last changes go into their snapshots, so the next start replays none.
        self.snapshot_tables(&df, self.visible().epoch, true);
        Some(
            df.jobs
                .values_mut()
                .filter_map(|j| j.coordinator.as_mut())
                .filter_map(|c| c.stop())
                .collect(),
        )
    }

    /// The catalog (a copy).
    pub fn catalog(&self) -> Catalog {
        lock(&self.catalog).clone()
    }

    /// Looks a relation up by name.
    pub fn relation(&self, name: &str) -> Option<RelationDef> {
        lock(&self.catalog).by_name(name).cloned()
    }

    /// The latest visible snapshot of the views.
    pub fn visible(&self) -> Arc<Visible> {
        self.visible.borrow().clone()
    }

    /// The latest acknowledged contents of a table (read-your-writes) and its indexes,
    /// frozen together in O(1).
    ///
    /// # Errors
    /// [`Error::Catalog`] when the table does not exist.
    pub fn table_snapshot(&self, id: RelationId) -> Result<IndexedSnapshot> {
        let t = self.table(id)?;
        let t = lock(&t);
        Ok(t.snapshot())
    }

    /// How a relation's rows are ordered: a table's (primary key first) or a view's as last
    /// published, then one layout per secondary index; rows in schema order when the
    /// relation is unknown or its view failed.
    ///
    /// # Errors
    /// Arrow errors when a column type has no row encoding.
    pub fn key_layouts(&self, id: RelationId, schema: SchemaRef) -> Result<Vec<Arc<KeyLayout>>> {
        if let Ok(t) = self.table(id) {
            let t = lock(&t);
            let mut out = vec![t.contents.layout().clone()];
            out.extend(t.indexes.iter().map(|i| i.rows.layout().clone()));
            return Ok(out);
        }
        if let Some(ViewState::Ready(s)) = self.visible().views.get(&id) {
            let mut out = vec![s.rows.layout().clone()];
            out.extend(s.indexes.iter().map(|i| i.layout().clone()));
            return Ok(out);
        }
        Ok(vec![Arc::new(KeyLayout::new(schema, &[])?)])
    }

    /// Bytes of a table's live changelog entries (keys and values), and the newest changelog
    /// sequence number its durable snapshot holds (0: none). Reads the whole changelog: for
    /// tests and benches.
    ///
    /// # Errors
    /// [`Error::Catalog`] when the table does not exist; store errors.
    pub fn table_storage(&self, id: RelationId) -> Result<(u64, u64)> {
        let table = self.table(id)?;
        let snapshot_seq = lock(&table).snapshot_seq;
        Ok((self.store.changelog_bytes(id)?, snapshot_seq))
    }

    fn table(&self, id: RelationId) -> Result<Arc<Mutex<TableData>>> {
        lock(&self.tables)
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::catalog("42P01", format!("table with id {id} does not exist")))
    }

    /// Writes a change to a table: validated, appended to its changelog (synced), applied.
    /// Returns once the write is durable; views see it after the next barrier.
    ///
    /// # Errors
    /// Constraint violations (`23502`, `23505`) and store errors; nothing is written then.
    /// `57P01` once the engine is shutting down.
    pub fn write(&self, table: RelationId, change: ChangeBatch) -> Result<()> {
        self.check_running()?;
        if change.is_empty() {
            return Ok(());
        }
        self.wait_for_backlog();
        let data = self.table(table)?;
        let clock = lock(&self.clock);
        let mut data = lock(&data);
        data.validate(&change)?;
        let change = change.with_schema(data.schema.clone())?;
        let epoch = clock.open;
        let parts: Vec<ChangeBatch> = change.pieces(CHANGELOG_CHUNK_ROWS).collect();
        let first = data.next_seq;
        let entries: Vec<(u64, Epoch, &ChangeBatch)> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| (first + i as u64, epoch, p))
            .collect();
        self.store.append_changelog(table, &entries)?;
        data.next_seq = first + parts.len() as u64;
        data.apply(&change)?;
        let last = data.next_seq - 1;
        data.note_entries(last, epoch, change.len());
        *lock(&self.backlog) += change.len();
        data.pending.push((epoch, change));
        Ok(())
    }

    /// Blocks while [`MAX_BACKLOG_ROWS`] or more written rows wait for an epoch, waking the
    /// barrier clock, until an epoch takes them or the engine stops. Called by writers outside
    /// the runtime's workers (writes run in `spawn_blocking`).
    fn wait_for_backlog(&self) {
        let mut backlog = lock(&self.backlog);
        while *backlog >= MAX_BACKLOG_ROWS && !self.is_stopping() {
            self.tick_request.notify_one();
            // A timeout, so that a stop is noticed without a signal of its own.
            backlog = match self
                .backlog_taken
                .wait_timeout(backlog, Duration::from_millis(100))
            {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Waits until every write acknowledged before the call is visible in every view, or
    /// until the engine shuts down.
    pub async fn flush(&self) {
        let target = lock(&self.clock).open;
        let mut rx = self.visible.subscribe();
        let mut stopping = self.stopping.subscribe();
        self.tick_request.notify_one();
        tokio::select! {
            _ = rx.wait_for(|v| v.epoch >= target) => {}
            _ = stopping.wait_for(|s| *s) => {}
        }
    }

    /// A job failed at run time: it and the views over it stop; its restart strategy decides
    /// between a restart after a pause and failing for good.
    fn on_failure(&self, df: &mut Dataflow, id: RelationId, error: &Error, now: Instant) {
        let affected = df.downstream_closure(id);
        for m in &affected {
            if let Some(c) = df.jobs.get(m).and_then(|j| j.coordinator.as_ref()) {
                c.abort_all("the job failed before the checkpoint completed");
            }
        }
        let Some(job) = df.jobs.get_mut(&id) else {
            return;
        };
        let name = job.name.clone();
        let message = error.to_string();
        match job.restart.on_failure(now) {
            Some(pause) => {
                warn!(view = %name, error = %message, pause_ms = pause.as_millis() as u64, "view failed; restarting");
                for m in &affected {
                    if let Some(j) = df.jobs.get_mut(m) {
                        j.status = JobStatus::Restarting {
                            at: now + pause,
                            message: if *m == id {
                                message.clone()
                            } else {
                                format!("upstream view {name} failed: {message}")
                            },
                        };
                    }
                }
            }
            None => {
                warn!(view = %name, error = %message, "view failed");
                for m in &affected {
                    if let Some(j) = df.jobs.get_mut(m) {
                        j.status = if *m == id {
                            JobStatus::Failed {
                                code: error.sqlstate(),
                                message: message.clone(),
                            }
                        } else {
                            JobStatus::Failed {
                                code: error.sqlstate(),
                                message: format!("upstream view {name} failed: {message}"),
                            }
                        };
                    }
                }
            }
        }
    }

    /// Closes the open epoch and runs it through every job, then publishes the new snapshot.
    /// Restarts that are due happen first; checkpoints are triggered after the epoch. Does
    /// nothing once the engine is shutting down.
    ///
    /// # Errors
    /// Internal errors only; a failing view is handled by its restart strategy.
    pub fn tick(&self) -> Result<()> {
        let mut df = lock(&self.dataflow);
        if self.is_stopping() {
            return Ok(());
        }
        let now = Instant::now();
        let mut touched: HashSet<RelationId> = HashSet::new();
        // Restarts that are due: recover their groups to the last processed epoch.
        let due: BTreeSet<RelationId> = df
            .jobs
            .iter()
            .filter(|(_, j)| matches!(j.status, JobStatus::Restarting { at, .. } if at <= now))
            .map(|(id, _)| *id)
            .collect();
        if !due.is_empty() {
            let group = df.component(&due);
            let processed = self.visible().epoch;
            for id in &due {
                if let Some(j) = df.jobs.get_mut(id) {
                    j.restarts += 1;
                }
            }
            for (id, e) in self.recover_jobs(&mut df, &group, processed)? {
                self.on_failure(&mut df, id, &e, now);
            }
            touched.extend(group.iter().copied());
        }
        let (epoch, changes) = {
            let mut clock = lock(&self.clock);
            let epoch = clock.open;
            clock.open = Epoch(epoch.0 + 1);
            let mut changes: HashMap<RelationId, Vec<ChangeBatch>> = HashMap::new();
            for (id, t) in lock(&self.tables).iter() {
                let mut t = lock(t);
                if !t.pending.is_empty() {
                    let drained: Vec<ChangeBatch> = t.pending.drain(..).map(|(_, c)| c).collect();
                    changes.insert(*id, drained);
                }
            }
            *lock(&self.backlog) = 0;
            self.backlog_taken.notify_all();
            (epoch, changes)
        };
        let rows: usize = changes.values().flatten().map(|c| c.len()).sum();
        let mut input = EpochInput { changes };
        touched.extend(input.changes.keys().copied());
        let mut rebuilt: HashSet<RelationId> = HashSet::new();
        let ids: Vec<RelationId> = df.jobs.keys().copied().collect();
        for id in ids {
            let (status, upstream_rebuilt, reads_change) = {
                let job = &df.jobs[&id];
                (
                    job.status.clone(),
                    job.sources.iter().any(|s| rebuilt.contains(s)),
                    job.sources.iter().any(|s| touched.contains(s)),
                )
            };
            match status {
                JobStatus::Restarting { .. } => continue,
                JobStatus::Failed { .. } if reads_change || upstream_rebuilt => {
                    // Heal: a failure in the data goes away when the data changes.
                    let snapshot = self.snapshot_input(&df, &df.jobs[&id]);
                    let job = df
                        .jobs
                        .get_mut(&id)
                        .ok_or_else(|| Error::Internal("job vanished".into()))?;
                    match snapshot.and_then(|s| job.rebuild(&s)) {
                        Ok(()) => {
                            info!(view = %job.name, epoch = epoch.0, "view rebuilt");
                            rebuilt.insert(id);
                            touched.insert(id);
                        }
                        Err(e) => debug!(view = %job.name, error = %e, "view still failing"),
                    }
                }
                JobStatus::Failed { .. } => {}
                JobStatus::Running if upstream_rebuilt => {
                    let snapshot = self.snapshot_input(&df, &df.jobs[&id]);
                    let job = df
                        .jobs
                        .get_mut(&id)
                        .ok_or_else(|| Error::Internal("job vanished".into()))?;
                    if let Err(e) = snapshot.and_then(|s| job.rebuild(&s)) {
                        debug!(view = %job.name, error = %e, "view failed while rebuilding");
                    }
                    rebuilt.insert(id);
                    touched.insert(id);
                }
                JobStatus::Running if reads_change => {
                    let job = df
                        .jobs
                        .get_mut(&id)
                        .ok_or_else(|| Error::Internal("job vanished".into()))?;
                    match job.process(&input) {
                        Ok(out) => {
                            if !out.is_empty() {
                                input.changes.insert(id, out);
                                touched.insert(id);
                            }
                        }
                        Err(e) => {
                            self.on_failure(&mut df, id, &e, now);
                            touched.insert(id);
                        }
                    }
                }
                JobStatus::Running => {}
            }
        }
        self.checkpoints(&mut df, epoch, now, &mut touched);
        self.publish(&df, Some((epoch, &touched)))?;
        debug!(epoch = epoch.0, rows, "epoch committed");
        self.snapshot_tables(&df, epoch, false);
        Ok(())
    }

    /// The newest epoch through which no recovery can need a table's changelog: every job
    /// recovers either from a checkpoint (and replays the changelog after its epoch; every
    /// retained checkpoint counts, a job checkpointing without one yet holds everything) or
    /// from its inputs' contents (no changelog), and no further than epoch `processed`. A job
    /// with checkpointing on but no completed checkpoint yet holds the whole changelog.
    fn changelog_needed_after(df: &Dataflow, processed: Epoch) -> Epoch {
        df.jobs
            .values()
            .filter_map(|j| {
                let c = j.coordinator.as_ref()?;
                let checkpointing = j.settings().is_some_and(|s| s.interval_ms > 0);
                match c.completed().first() {
                    Some((_, e)) => Some(*e),
                    None if checkpointing => Some(Epoch(0)),
                    None => None,
                }
            })
            .min()
            .unwrap_or(processed)
            .min(processed)
    }

    /// Takes a snapshot of the tables now if any table changed since the last one (as at
    /// shutdown), and truncates their changelogs behind it. Errors are logged.
    pub fn snapshot_tables_now(&self) {
        let df = lock(&self.dataflow);
        self.snapshot_tables(&df, self.visible().epoch, true);
    }

    /// After epoch `processed`: takes a snapshot of the tables' instance if one is due (when
    /// a table changed and `force`, the interval passed, or a table changed by
    /// [`TABLE_SNAPSHOT_MAX_ROWS`] rows), then truncates each table's changelog behind what
    /// the snapshot and every retained checkpoint hold. The snapshot is taken with every
    /// table locked, so that it holds each table exactly at its recorded position; it costs
    /// a flush and hard links. A failure is logged and retried at a later barrier: the
    /// changelog is kept until a snapshot succeeds.
    fn snapshot_tables(&self, df: &Dataflow, processed: Epoch, force: bool) {
        let keep_after = Self::changelog_needed_after(df, processed);
        let mut tables: Vec<(RelationId, Arc<Mutex<TableData>>)> = lock(&self.tables)
            .iter()
            .map(|(id, t)| (*id, Arc::clone(t)))
            .collect();
        tables.sort_by_key(|(id, _)| *id);
        if let Some(ts) = &self.table_state {
            let (mut changed, mut most) = (0usize, 0usize);
            for (_, t) in &tables {
                let rows = lock(t).unsnapshotted_rows;
                changed += rows;
                most = most.max(rows);
            }
            let due = changed > 0
                && (force
                    || lock(&ts.taken_at).elapsed() >= self.table_snapshot_interval
                    || most >= TABLE_SNAPSHOT_MAX_ROWS);
            if due {
                // In id order, as no other path holds two tables' locks.
                let mut guards: Vec<(RelationId, MutexGuard<'_, TableData>)> =
                    tables.iter().map(|(id, t)| (*id, lock(t))).collect();
                let positions: Positions =
                    guards.iter().map(|(id, t)| (*id, t.position())).collect();
                match ts.snapshots.take(&ts.live, &positions) {
                    Ok(()) => {
                        for (id, t) in &mut guards {
                            t.snapshotted(positions[id]);
                        }
                        *lock(&ts.taken_at) = Instant::now();
                        debug!(tables = positions.len(), rows = changed, "tables snapshot");
                    }
                    Err(e) => warn!(error = %e, "tables snapshot failed"),
                }
            }
        }
        for (id, t) in tables {
            let mut t = lock(&t);
            if let Err(e) = t.truncate(&self.store, id, keep_after) {
                warn!(table = %t.name, error = %e, "changelog truncation failed");
            }
        }
    }

    /// After epoch `epoch`: expire overdue checkpoints, fail jobs over their tolerable
    /// failures, trigger due checkpoints, apply retention.
    fn checkpoints(
        &self,
        df: &mut Dataflow,
        epoch: Epoch,
        now: Instant,
        touched: &mut HashSet<RelationId>,
    ) {
        let ids: Vec<RelationId> = df.jobs.keys().copied().collect();
        // The jobs due a checkpoint start flushing their instances together; each sync phase
        // below then waits for its own flush only.
        for job in df.jobs.values() {
            if matches!(job.status, JobStatus::Running)
                && job.coordinator.as_ref().is_some_and(|c| {
                    c.settings().backend == StateBackendKind::RocksDb
                        && !c.failures_exceeded()
                        && c.should_trigger(now)
                })
                && let Err(e) = job.begin_flush()
            {
                warn!(view = %job.name, error = %e, "cannot start flushing state for a checkpoint");
            }
        }
        for id in &ids {
            let Some(job) = df.jobs.get_mut(id) else {
                continue;
            };
            if !matches!(job.status, JobStatus::Running) {
                continue;
            }
            let Some(c) = &job.coordinator else {
                continue;
            };
            c.expire(now);
            if c.failures_exceeded() {
                let tolerable = c.settings().tolerable_failures;
                let e = Error::State(format!(
                    "checkpoint failures exceeded checkpoint.tolerable_failures ({tolerable})"
                ));
                self.on_failure(df, *id, &e, now);
                touched.insert(*id);
                continue;
            }
            if !c.should_trigger(now) {
                continue;
            }
            let backend = c.settings().backend;
            let offsets: BTreeMap<u64, u64> = job.sources.iter().map(|s| (*s, epoch.0)).collect();
            let (source, totals) = match job.checkpoint_source(backend) {
                Ok(c) => c,
                Err(e) => {
                    warn!(view = %job.name, error = %e, "cannot collect state for a checkpoint");
                    continue;
                }
            };
            if let Some(c) = job.coordinator.as_mut() {
                c.trigger(epoch, source, totals, offsets);
            }
        }
        // Retention, downstream first: upstream views keep what their readers need.
        let mut bounds: HashMap<RelationId, Vec<u64>> = HashMap::new();
        for id in ids.iter().rev() {
            let Some(job) = df.jobs.get(id) else {
                continue;
            };
            let Some(c) = &job.coordinator else {
                continue;
            };
            // A checkpoint still in flight pins its upstream checkpoints too: once it
            // completes, its recovery needs them.
            let mut kept = c.retain_policy(&bounds.remove(id).unwrap_or_default());
            kept.extend(c.in_flight_epochs());
            for s in &job.sources {
                if df.jobs.contains_key(s) {
                    bounds.entry(*s).or_default().extend(kept.iter().copied());
                }
            }
        }
    }

    /// The full current contents of a job's sources, as one epoch of inserts.
    fn snapshot_input(&self, df: &Dataflow, job: &Job) -> Result<Vec<BackfillSource>> {
        let mut sources = Vec::new();
        for s in &job.sources {
            sources.push(if let Some(upstream) = df.jobs.get(s) {
                upstream.contents_for_backfill()?
            } else {
                let t = self.table(*s)?;
                let t = lock(&t);
                t.processed_contents(*s)
            });
        }
        Ok(sources)
    }

    /// Publishes the views' contents; only views in `touched` are re-read.
    fn publish(&self, df: &Dataflow, tick: Option<(Epoch, &HashSet<RelationId>)>) -> Result<()> {
        let old = self.visible();
        let mut views = HashMap::new();
        let mut jobs = Vec::new();
        for (id, job) in &df.jobs {
            let changed = match tick {
                Some((_, touched)) => touched.contains(id),
                None => true,
            };
            let state = match (&job.status, old.views.get(id)) {
                (JobStatus::Failed { code, message }, _) => ViewState::Failed {
                    view: job.name.clone(),
                    code,
                    message: message.clone(),
                },
                (JobStatus::Restarting { message, .. }, _) => ViewState::Failed {
                    view: job.name.clone(),
                    code: "55000",
                    message: format!("the view is restarting after: {message}"),
                },
                (JobStatus::Running, Some(ViewState::Ready(b))) if !changed => {
                    ViewState::Ready(b.clone())
                }
                (JobStatus::Running, _) => ViewState::Ready(job.snapshot()),
            };
            views.insert(*id, state);
            jobs.push(JobInfo {
                name: job.name.clone(),
                status: job.status.as_str(),
                failure: match &job.status {
                    JobStatus::Running => None,
                    JobStatus::Restarting { message, .. } => Some(message.clone()),
                    JobStatus::Failed { message, .. } => Some(message.clone()),
                },
                restarts: job.restarts,
                settings: job.settings().map(|s| s.values.clone()).unwrap_or_default(),
                history: job.coordinator.as_ref().map(|c| c.history()),
                recovery: job.last_recovery.clone(),
            });
        }
        let epoch = tick.map(|(e, _)| e).unwrap_or(old.epoch);
        self.visible
            .send_replace(Arc::new(Visible { epoch, views, jobs }));
        Ok(())
    }

    fn persist_catalog(&self, catalog: &Catalog) -> Result<()> {
        self.store.put_meta("catalog", &catalog.to_json()?)
    }

    /// Creates a table.
    ///
    /// # Errors
    /// `42P07` when the name is taken (unless `if_not_exists`); store errors; `57P01` once the
    /// engine is shutting down.
    pub fn create_table(
        &self,
        name: &str,
        schema: SchemaRef,
        primary_key: Vec<usize>,
        if_not_exists: bool,
    ) -> Result<bool> {
        let _df = lock(&self.dataflow);
        self.check_running()?;
        let mut catalog = lock(&self.catalog);
        if !name_free(&catalog, name, if_not_exists)? {
            return Ok(false);
        }
        let id = catalog.allocate_id();
        let def = RelationDef {
            id,
            name: name.to_string(),
            schema: schema.as_ref().clone(),
            kind: RelationKind::Table { primary_key },
            depends_on: vec![],
        };
        let data = TableData::new(&def, self.table_state.as_ref().map(|t| &t.live))?;
        let mut next = catalog.clone();
        next.insert(def);
        self.persist_catalog(&next)?;
        *catalog = next;
        lock(&self.tables).insert(id, Arc::new(Mutex::new(data)));
        info!(table = name, id, "table created");
        Ok(true)
    }

    /// Creates a materialized view: builds its job from the streaming plan `plan` makes (called
    /// once the name is known to be free, so that a taken name is reported first) with the
    /// captured `settings` (validated again here), backfills it from the current contents of its inputs (as of the last
    /// processed epoch) and makes it visible before returning.
    ///
    /// # Errors
    /// `42P07` when the name is taken (unless `if_not_exists`), `0A000` for unsupported
    /// constructs, `22023` for settings breaking a rule, and any error evaluating the query on
    /// the existing data; `57P01` once the engine is shutting down.
    pub fn create_view(
        &self,
        name: &str,
        query: &str,
        plan: impl FnOnce() -> Result<StreamPlan>,
        settings: BTreeMap<String, String>,
        if_not_exists: bool,
    ) -> Result<bool> {
        let settings = SessionVars::validate_job_settings(&settings, &[])?;
        let mut df = lock(&self.dataflow);
        self.check_running()?;
        if !name_free(&lock(&self.catalog), name, if_not_exists)? {
            return Ok(false);
        }
        let plan = plan()?;
        let schema = plan.schema.clone();
        let mut catalog = lock(&self.catalog).clone();
        let id = catalog.allocate_id();
        let coordinator = self.coordinator(id, name, &settings)?;
        // An id is never reused, but a crash between here and the catalog write could leave
        // files behind: start clean.
        coordinator.retain(&BTreeSet::new());
        let mut job = Job::try_new(
            id,
            name.to_string(),
            plan,
            schema.clone(),
            Some(coordinator),
            self.rows_in.clone(),
        )?;
        let snapshot = self.snapshot_input(&df, &job)?;
        job.rebuild(&snapshot)?;
        catalog.insert(RelationDef {
            id,
            name: name.to_string(),
            schema: schema.as_ref().clone(),
            kind: RelationKind::MaterializedView {
                query: query.to_string(),
                settings,
            },
            depends_on: job.sources.iter().copied().collect(),
        });
        self.persist_catalog(&catalog)?;
        *lock(&self.catalog) = catalog;
        df.jobs.insert(id, job);
        self.publish(&df, None)?;
        info!(view = name, id, "materialized view created");
        Ok(true)
    }

    /// `ALTER MATERIALIZED VIEW name SET (setting = value, ...)`: validates the new values
    /// against the job's other settings (the seed's rules) and applies them to the running
    /// job. A new `state.backend` takes effect with the next checkpoint (a full one).
    ///
    /// # Errors
    /// `42P01` unknown view, `42704` unknown setting, `22023` bad value or broken rule;
    /// `57P01` once the engine is shutting down.
    pub fn alter_view_settings(&self, name: &str, changes: &[(String, String)]) -> Result<()> {
        let mut df = lock(&self.dataflow);
        self.check_running()?;
        let mut catalog = lock(&self.catalog).clone();
        let def = self.view_def(&catalog, name)?;
        let RelationKind::MaterializedView { query, settings } = &def.kind else {
            return Err(Error::Internal("not a view".into()));
        };
        for (k, _) in changes {
            let k = k.to_ascii_lowercase();
            if !(k.starts_with("checkpoint.") || k.starts_with("restart.") || k == "state.backend")
            {
                return Err(Error::Setting {
                    code: "42704",
                    message: format!(
                        "\"{k}\" is not a setting of a materialized view's job; allowed: checkpoint.*, restart.*, state.backend"
                    ),
                });
            }
        }
        let next = SessionVars::validate_job_settings(settings, changes)?;
        let parsed = JobSettings::from_values(&next)?;
        let job = df
            .jobs
            .get_mut(&def.id)
            .ok_or_else(|| Error::Internal("view without a job".into()))?;
        let old_backend = job.settings().map(|s| s.backend);
        if old_backend != Some(parsed.backend) {
            if let Some(c) = job.coordinator.as_mut() {
                c.abort_all("state.backend changed");
                if let Err(e) = c.shutdown() {
                    warn!(view = name, error = %e, "state writer stopped abnormally");
                }
            }
            let coordinator = self.coordinator(def.id, name, &next)?;
            job.coordinator = Some(coordinator);
        } else if let Some(c) = job.coordinator.as_mut() {
            c.set_settings(parsed.clone());
        }
        job.restart = crate::checkpoint::RestartTracker::new(parsed.restart.clone());
        let mut updated = def.clone();
        updated.kind = RelationKind::MaterializedView {
            query: query.clone(),
            settings: next,
        };
        catalog.insert(updated);
        self.persist_catalog(&catalog)?;
        *lock(&self.catalog) = catalog;
        self.publish(&df, None)?;
        info!(view = name, "materialized view settings changed");
        Ok(())
    }

    /// `ALTER MATERIALIZED VIEW name RESUME`: restarts a failed (or restarting) view at the
    /// next barrier from its last checkpoint, with its restart strategy's count reset.
    ///
    /// # Errors
    /// `42P01` unknown view; `55000` when the view is running; `57P01` once the engine is
    /// shutting down.
    pub fn resume_view(&self, name: &str) -> Result<()> {
        let mut df = lock(&self.dataflow);
        self.check_running()?;
        let catalog = lock(&self.catalog).clone();
        let def = self.view_def(&catalog, name)?;
        let affected = df.downstream_closure(def.id);
        let job = df
            .jobs
            .get_mut(&def.id)
            .ok_or_else(|| Error::Internal("view without a job".into()))?;
        if matches!(job.status, JobStatus::Running) {
            return Err(Error::data(
                "55000",
                format!("materialized view \"{name}\" is running; RESUME restarts a failed view"),
            ));
        }
        job.restart.reset();
        let at = Instant::now();
        for m in affected {
            if let Some(j) = df.jobs.get_mut(&m)
                && !matches!(j.status, JobStatus::Running)
            {
                j.status = JobStatus::Restarting {
                    at,
                    message: "resumed by ALTER MATERIALIZED VIEW ... RESUME".into(),
                };
            }
        }
        drop(df);
        self.tick_request.notify_one();
        Ok(())
    }

    fn view_def(&self, catalog: &Catalog, name: &str) -> Result<RelationDef> {
        match catalog.by_name(name) {
            Some(d) if !d.is_table() => Ok(d.clone()),
            Some(_) => Err(Error::catalog(
                "42809",
                format!("\"{name}\" is a table, not a materialized view"),
            )),
            None => Err(Error::catalog(
                "42P01",
                format!("materialized view \"{name}\" does not exist"),
            )),
        }
    }

    /// The EXPLAIN lines of a view's job.
    ///
    /// # Errors
    /// `0A000` for unsupported constructs.
    pub fn explain_view(&self, name: &str, plan: StreamPlan) -> Result<Vec<String>> {
        let schema = plan.schema.clone();
        let job = Job::try_new(0, name.to_string(), plan, schema, None, None)?;
        Ok(job.explain())
    }

    /// `CREATE [UNIQUE] INDEX name ON relation (columns)`: builds a secondary index over the
    /// relation's current rows (a table's acknowledged contents, a view's rows at the last
    /// epoch), then keeps it up to date with every write (tables) or epoch (views). Reads
    /// with filters on its leading columns then scan a key range of it. `columns` are
    /// `(column index, descending)`. O(n log n) to build; O(log n) per changed row after.
    ///
    /// # Errors
    /// `42P07` when the name is taken (unless `if_not_exists`), `42P01` unknown relation,
    /// `0A000` a unique index on a materialized view, `23505` a unique index over duplicate
    /// keys; `57P01` once the engine is shutting down.
    pub fn create_index(
        &self,
        name: &str,
        relation: &str,
        columns: Vec<crate::catalog::IndexColumn>,
        unique: bool,
        if_not_exists: bool,
    ) -> Result<bool> {
        let mut df = lock(&self.dataflow);
        self.check_running()?;
        let mut catalog = lock(&self.catalog).clone();
        if !name_free(&catalog, name, if_not_exists)? {
            return Ok(false);
        }
        let Some(target) = catalog.by_name(relation).cloned() else {
            return Err(Error::catalog(
                "42P01",
                format!("relation \"{relation}\" does not exist"),
            ));
        };
        if unique && !target.is_table() {
            return Err(Error::not_supported(
                "CREATE UNIQUE INDEX on a materialized view is not supported (a view's rows are derived; only a table's writes can be refused)",
            ));
        }
        let def = IndexDef {
            id: catalog.allocate_id(),
            name: name.to_string(),
            relation: target.id,
            columns,
            unique,
        };
        catalog.insert_index(def.clone());
        if target.is_table() {
            let data = self.table(target.id)?;
            let mut data = lock(&data);
            let built = SecondaryIndex::build(&def, &data.contents)?;
            self.persist_catalog(&catalog)?;
            data.indexes.push(built);
        } else {
            let job = df
                .jobs
                .get_mut(&target.id)
                .ok_or_else(|| Error::Internal("view without a job".into()))?;
            job.add_index(&def)?;
            if let Err(e) = self.persist_catalog(&catalog) {
                job.remove_index(def.id);
                return Err(e);
            }
        }
        *lock(&self.catalog) = catalog;
        self.publish(&df, None)?;
        info!(index = name, relation, "index created");
        Ok(true)
    }

    /// `DROP INDEX name`.
    ///
    /// # Errors
    /// `42704` when it does not exist (unless `if_exists`), `42809` when the name is a table
    /// or view; `57P01` once the engine is shutting down.
    pub fn drop_index(&self, name: &str, if_exists: bool) -> Result<bool> {
        let mut df = lock(&self.dataflow);
        self.check_running()?;
        let mut catalog = lock(&self.catalog).clone();
        let Some(def) = catalog.index_by_name(name).cloned() else {
            if let Some(r) = catalog.by_name(name) {
                return Err(Error::catalog(
                    "42809",
                    format!("\"{name}\" is not an index (it is a {})", r.kind_name()),
                ));
            }
            if if_exists {
                return Ok(false);
            }
            return Err(Error::catalog(
                "42704",
                format!("index \"{name}\" does not exist"),
            ));
        };
        catalog.remove_index(def.id);
        self.persist_catalog(&catalog)?;
        if let Ok(data) = self.table(def.relation) {
            lock(&data).indexes.retain(|i| i.def.id != def.id);
        } else if let Some(job) = df.jobs.get_mut(&def.relation) {
            job.remove_index(def.id);
        }
        *lock(&self.catalog) = catalog;
        self.publish(&df, None)?;
        info!(index = name, "index dropped");
        Ok(true)
    }

    /// Drops a table or view (and, with `cascade`, the views that read it), with the views'
    /// checkpoints and state.
    ///
    /// # Errors
    /// `42P01` when it does not exist (unless `if_exists`), `42809` when it is of the other
    /// kind, `2BP01` when views depend on it and `cascade` is false; `57P01` once the engine
    /// is shutting down.
    pub fn drop_relation(
        &self,
        name: &str,
        table: bool,
        if_exists: bool,
        cascade: bool,
    ) -> Result<bool> {
        let mut df = lock(&self.dataflow);
        self.check_running()?;
        let mut catalog = lock(&self.catalog).clone();
        let Some(def) = catalog.by_name(name).cloned() else {
            if catalog.index_by_name(name).is_some() {
                let what = if table { "table" } else { "materialized view" };
                return Err(Error::catalog(
                    "42809",
                    format!("\"{name}\" is an index, not a {what}; use DROP INDEX"),
                ));
            }
            if if_exists {
                return Ok(false);
            }
            let what = if table { "table" } else { "materialized view" };
            return Err(Error::catalog(
                "42P01",
                format!("{what} \"{name}\" does not exist"),
            ));
        };
        if def.is_table() != table {
            return Err(Error::catalog(
                "42809",
                format!(
                    "\"{}\" is a {}, not a {}",
                    name,
                    def.kind_name(),
                    if table { "table" } else { "materialized view" }
                ),
            ));
        }
        let dependents = catalog.dependents(def.id);
        if !dependents.is_empty() && !cascade {
            let names: Vec<String> = dependents
                .iter()
                .filter_map(|d| catalog.get(*d))
                .map(|d| d.name.clone())
                .collect();
            return Err(Error::catalog(
                "2BP01",
                format!(
                    "cannot drop {} {} because other objects depend on it (materialized view {}); use DROP ... CASCADE",
                    def.kind_name(),
                    name,
                    names.join(", ")
                ),
            ));
        }
        let doomed = catalog.dependents_closure(def.id);
        for id in &doomed {
            catalog.remove(*id);
        }
        self.persist_catalog(&catalog)?;
        for id in &doomed {
            if let Some(job) = df.jobs.remove(id)
                && let Some(mut c) = job.coordinator
            {
                c.abort_all("the view was dropped");
                // The writer only finishes the aborted checkpoints' sync phase; its files go.
                if let Err(e) = c.shutdown() {
                    warn!(view = %job.name, error = %e, "state writer stopped abnormally");
                }
                c.destroy();
            }
            if lock(&self.tables).remove(id).is_some() {
                // Its rows leave the tables' instance with it; the next snapshot drops them.
                self.store.delete_changelog(*id)?;
            }
        }
        *lock(&self.catalog) = catalog;
        self.publish(&df, None)?;
        info!(relation = name, dropped = doomed.len(), "dropped");
        Ok(true)
    }
}

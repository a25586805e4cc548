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
//! The engine is a facade over owned parts, one file each: `tables::Tables` (contents,
//! changelogs, the write backlog, the tables' snapshots and changelog truncation),
//! `epochs::BarrierClock` (the open epoch, the clock task, the stop signal), the
//! `Dataflow` (the jobs, their failure handling and what their recovery needs of the
//! changelog), the catalog and the published [`Visible`] snapshot. The engine's own methods
//! sequence them: `epochs` runs an epoch through the jobs, checkpoints and publishes;
//! `recovery` restores views at start and after a failure; `ddl` changes the catalog. This
//! file holds the engine's state, opening and shutting down.
//!
//! Threads: the barrier clock is a tokio task owned by the engine (it runs each tick on the
//! blocking pool); each job's checkpoint coordinator owns a state-writer thread, which owns
//! its checkpoints' upload threads. [`Engine::shutdown`] stops and joins all of them, and so
//! does dropping the engine.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tracing::{error, info};

use crate::catalog::roles::Roles;
use crate::catalog::{Catalog, RelationDef};
use crate::checkpoint::{History, StoppedWriter};
use crate::common::{Epoch, RelationId};
use crate::error::{Error, Result};
use crate::settings::SessionVars;
use crate::state::{IndexedSnapshot, StateBackend, Store};
use crate::stream::job::{EPOCH_BATCH_ROWS, Job, Recovery};

mod ddl;
mod epochs;
mod recovery;
mod roles;
mod sources;
mod tables;

pub use ddl::TableSpec;
pub use sources::{CONNECTOR_OPTIONS, MAX_CHUNK_EVENTS, SourceInfo, connector_def, nexmark_table};
pub use tables::{Abandon, WatermarkInfo};

use epochs::BarrierClock;
use tables::Tables;

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
    /// Each state table's name and rows as of the last processed epoch.
    pub state_rows: Vec<(String, i64)>,
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
    /// The state backend (RocksDB, memory bounded).
    state: Arc<StateBackend>,
    /// The state backend's root, whose siblings hold the jobs' state; `None` keeps rows on
    /// the heap (see [`EngineConfig::rows_in_memory`]).
    rows_in: Option<Arc<StateBackend>>,
    catalog: Mutex<Catalog>,
    /// Roles and their password verifiers (durable under `m/roles`).
    roles: Mutex<Roles>,
    /// Every table's contents, changelog, write backlog and snapshots.
    tables: Tables,
    /// The open epoch, the barrier clock's task and the stop signal.
    clock: BarrierClock,
    dataflow: Mutex<Dataflow>,
    visible: watch::Sender<Arc<Visible>>,
    data_dir: PathBuf,
    checkpoint_dir: PathBuf,
    defaults: SessionVars,
    /// The connector tables' ingestion threads.
    sources: sources::Sources,
    /// The `pg_catalog` schema all sessions share, so that a relation has one OID in every
    /// session (built by the first session; see [`crate::sql::system::shared_pg_catalog`]).
    pg_catalog: std::sync::OnceLock<Arc<dyn datafusion::catalog::SchemaProvider>>,
    /// The catalog's durable copy (the same store holds the tables' changelogs), holding the
    /// data directory's lock. Declared last, so that it is dropped after every other field:
    /// the lock is released only once the jobs' and the state backend's databases are
    /// closed (a server started on the directory meanwhile would reset them under us).
    store: Arc<Store>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("store", &self.store)
            .finish()
    }
}

/// Whether `name` is free for a new relation or index of transaction `txn` (see
/// [`Catalog::name_taken`]): `Ok(false)` when taken and `if_not_exists` says to skip.
///
/// # Errors
/// `42P07` when taken and `if_not_exists` is false.
fn name_free(catalog: &Catalog, name: &str, if_not_exists: bool, txn: Option<u64>) -> Result<bool> {
    if !catalog.name_taken(name, txn) {
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
        self.clock.stop();
        // Source threads hold the engine weakly: stopped, they end at their next step.
        let sources = self.stop_sources();
        sources::join_sources(sources);
        if let Some(clock) = self.clock.take_task() {
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
        // The jobs' databases close now, while the store holds the directory's lock.
        df.jobs.clear();
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
        let mut catalog = match store.get_meta("catalog")? {
            Some(bytes) => Catalog::from_json(&bytes)?,
            None => Catalog::default(),
        };
        let checkpoint_dir = config
            .checkpoint_dir
            .clone()
            .unwrap_or_else(|| dir.join("checkpoints"));
        if catalog.relations().any(|r| r.dropped_by.is_some()) {
            // A transaction that dropped relations never ended: they come back, and what it
            // created under their names goes (its rows with the next table snapshot).
            let removed = catalog.resolve_hidden();
            store.put_meta("catalog", &catalog.to_json()?)?;
            for id in &removed {
                store.delete_changelog(*id)?;
                let _ = std::fs::remove_dir_all(checkpoint_dir.join(id.to_string()));
            }
            info!(
                removed = removed.len(),
                "relations dropped by an unfinished transaction restored"
            );
        }
        let roles = match store.get_meta("roles")? {
            Some(bytes) => Roles::from_json(&bytes)?,
            None => Roles::default(),
        };
        let store = Arc::new(store);
        let (tables, loaded) = Tables::open(
            Arc::clone(&store),
            rows_in.as_ref(),
            dir,
            &catalog,
            config.table_snapshot_interval,
        )?;
        let max_epoch = loaded.max_epoch;
        info!(
            tables = tables.len(),
            snapshot_rows = loaded.snapshot_rows,
            replayed_rows = loaded.replayed_rows,
            epoch = max_epoch.0,
            "loaded tables (snapshot, then the changelog after it)"
        );
        let (visible, _) = watch::channel(Arc::new(Visible {
            epoch: max_epoch,
            views: HashMap::new(),
            jobs: Vec::new(),
        }));
        Ok(Arc::new(Engine {
            store,
            state,
            rows_in,
            catalog: Mutex::new(catalog),
            roles: Mutex::new(roles),
            tables,
            clock: BarrierClock::new(Epoch(max_epoch.0 + 1), config.barrier_interval),
            dataflow: Mutex::new(Dataflow::default()),
            visible,
            data_dir: dir.to_path_buf(),
            checkpoint_dir,
            defaults,
            sources: Default::default(),
            pg_catalog: std::sync::OnceLock::new(),
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

    /// Whether [`Engine::shutdown`] has begun.
    pub fn is_stopping(&self) -> bool {
        self.clock.is_stopping()
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
    /// 3. stops every connector table's source thread and joins it;
    /// 4. stops every job's checkpoint coordinator and joins its state-writer thread, which
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
        self.clock.stop();
        let mut result = Ok(());
        let clock = self.clock.take_task();
        if let Some(clock) = clock
            && let Err(e) = clock.await
            && e.is_panic()
        {
            result = Err(Error::Internal("the barrier clock panicked".into()));
        }
        let sources = self.stop_sources();
        if !sources.is_empty()
            && tokio::task::spawn_blocking(move || sources::join_sources(sources))
                .await
                .is_err()
        {
            result = Err(Error::Internal("joining source threads failed".into()));
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

    /// The `pg_catalog` schema shared by all sessions, built by `build` on first use.
    ///
    /// # Errors
    /// `build`'s, when this is the first use.
    pub fn pg_catalog(
        &self,
        build: impl FnOnce() -> Result<Arc<dyn datafusion::catalog::SchemaProvider>>,
    ) -> Result<Arc<dyn datafusion::catalog::SchemaProvider>> {
        if let Some(pg) = self.pg_catalog.get() {
            return Ok(Arc::clone(pg));
        }
        let pg = build()?;
        // Another session may have won the race; its schema is the one every session uses.
        Ok(Arc::clone(self.pg_catalog.get_or_init(|| pg)))
    }

    /// The secondary indexes on relation `id` (copies), in creation order.
    pub fn indexes_on(&self, id: RelationId) -> Vec<crate::catalog::IndexDef> {
        lock(&self.catalog).indexes_on(id)
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
}

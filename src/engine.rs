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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, SortField};
use datafusion::logical_expr::LogicalPlan;
use tokio::sync::{Notify, watch};
use tracing::{debug, error, info, warn};

use crate::catalog::{Catalog, RelationDef, RelationKind};
use crate::error::{Error, Result};
use crate::state::{StateTable, Store};
use crate::stream::change::ChangeBatch;
use crate::stream::job::{Job, JobStatus};
use crate::stream::{Epoch, EpochInput, RelationId};

/// Rows per changelog entry when a large write (a COPY) is split; all land in one epoch.
const CHANGELOG_CHUNK_ROWS: usize = 65_536;

/// Default barrier interval (ms): how often an epoch closes without `FLUSH`.
pub const DEFAULT_BARRIER_INTERVAL_MS: u64 = 250;

/// What a `SELECT` on a view reads: every view's rows as of one epoch.
#[derive(Debug, Default)]
pub struct Visible {
    /// The last epoch every job has processed.
    pub epoch: Epoch,
    /// Each view's rows, or its job's failure.
    pub views: HashMap<RelationId, ViewState>,
}

/// A view's readable state.
#[derive(Debug, Clone)]
pub enum ViewState {
    /// The view's rows.
    Ready(Arc<RecordBatch>),
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

/// A table's in-memory contents (rebuilt from its changelog at start) and unprocessed changes.
struct TableData {
    name: String,
    schema: SchemaRef,
    contents: StateTable,
    primary_key: Option<PrimaryKey>,
    /// Cached batch of `contents`, cleared by every write.
    cached: Option<Arc<RecordBatch>>,
    /// Changes written but not yet processed by the jobs, with their epochs.
    pending: Vec<(Epoch, ChangeBatch)>,
    /// Next changelog sequence number (source offset).
    next_seq: u64,
}

struct PrimaryKey {
    columns: Vec<usize>,
    converter: RowConverter,
    keys: HashMap<Box<[u8]>, i64>,
}

impl TableData {
    fn new(def: &RelationDef) -> Result<Self> {
        let schema = def.schema_ref();
        let primary_key = match &def.kind {
            RelationKind::Table { primary_key } if !primary_key.is_empty() => {
                let fields = primary_key
                    .iter()
                    .map(|i| SortField::new(schema.field(*i).data_type().clone()))
                    .collect();
                Some(PrimaryKey {
                    columns: primary_key.clone(),
                    converter: RowConverter::new(fields)?,
                    keys: HashMap::new(),
                })
            }
            _ => None,
        };
        Ok(TableData {
            name: def.name.clone(),
            contents: StateTable::new(schema.clone())?,
            schema,
            primary_key,
            cached: None,
            pending: Vec::new(),
            next_seq: 1,
        })
    }

    /// Checks NOT NULL and PRIMARY KEY constraints for `change` against the current contents.
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
            let mut delta: HashMap<&[u8], i64> = HashMap::new();
            for (i, w) in change.weights.values().iter().enumerate() {
                *delta.entry(rows.row(i).data()).or_default() += w;
            }
            for (i, w) in change.weights.values().iter().enumerate() {
                let key = rows.row(i).data();
                let now = pk.keys.get(key).copied().unwrap_or(0);
                if *w > 0 && now + delta[key] > 1 {
                    let names: Vec<&str> = pk
                        .columns
                        .iter()
                        .map(|c| self.schema.field(*c).name().as_str())
                        .collect();
                    let values: Vec<String> = pk
                        .columns
                        .iter()
                        .map(|c| {
                            arrow::util::display::array_value_to_string(change.batch.column(*c), i)
                                .unwrap_or_default()
                        })
                        .collect();
                    return Err(Error::data(
                        "23505",
                        format!(
                            "duplicate key value violates unique constraint \"{}_pkey\": Key ({})=({}) already exists",
                            self.name,
                            names.join(", "),
                            values.join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn apply(&mut self, change: &ChangeBatch) -> Result<()> {
        self.contents.apply(change)?;
        if let Some(pk) = &mut self.primary_key {
            let cols: Vec<_> = pk
                .columns
                .iter()
                .map(|i| change.batch.column(*i).clone())
                .collect();
            let rows = pk.converter.convert_columns(&cols)?;
            for (i, w) in change.weights.values().iter().enumerate() {
                let key = rows.row(i).data();
                let c = pk.keys.entry(key.into()).or_default();
                *c += w;
                if *c == 0 {
                    pk.keys.remove(key);
                }
            }
        }
        self.cached = None;
        Ok(())
    }

    fn snapshot(&mut self) -> Result<Arc<RecordBatch>> {
        if let Some(b) = &self.cached {
            return Ok(b.clone());
        }
        let b = Arc::new(self.contents.to_batch()?);
        self.cached = Some(b.clone());
        Ok(b)
    }

    /// The contents as of the last processed epoch: current contents minus pending changes.
    fn processed_contents(&self) -> Result<ChangeBatch> {
        let mut t = StateTable::new(self.schema.clone())?;
        t.apply(&self.contents.to_change()?)?;
        for (_, c) in self.pending.iter().rev() {
            t.apply(&c.negate())?;
        }
        t.to_change()
    }
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

/// The database engine shared by all sessions.
pub struct Engine {
    store: Store,
    catalog: Mutex<Catalog>,
    tables: Mutex<HashMap<RelationId, Arc<Mutex<TableData>>>>,
    clock: Mutex<Clock>,
    dataflow: Mutex<Dataflow>,
    visible: watch::Sender<Arc<Visible>>,
    tick_request: Notify,
    barrier_interval: Duration,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("store", &self.store)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock is a bug; the data it guards is still the best we have.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Engine {
    /// Opens the data directory and replays every table's changelog; views are recompiled
    /// afterwards by [`Engine::recover_views`].
    ///
    /// # Errors
    /// [`Error::State`] when the directory is locked by another server or corrupt.
    pub fn open(dir: &Path, barrier_interval: Duration) -> Result<Arc<Self>> {
        let store = Store::open(dir)?;
        let catalog = match store.get_meta("catalog")? {
            Some(bytes) => Catalog::from_json(&bytes)?,
            None => Catalog::default(),
        };
        let mut tables = HashMap::new();
        let mut max_epoch = Epoch(0);
        let mut rows = 0usize;
        for def in catalog.relations().filter(|r| r.is_table()) {
            let mut data = TableData::new(def)?;
            for entry in store.read_changelog(def.id)? {
                data.apply(&entry.change)?;
                rows += entry.change.len();
                data.next_seq = entry.seq + 1;
                max_epoch = max_epoch.max(entry.epoch);
            }
            tables.insert(def.id, Arc::new(Mutex::new(data)));
        }
        info!(
            tables = tables.len(),
            rows,
            epoch = max_epoch.0,
            "replayed table changelogs"
        );
        let (visible, _) = watch::channel(Arc::new(Visible {
            epoch: max_epoch,
            views: HashMap::new(),
        }));
        Ok(Arc::new(Engine {
            store,
            catalog: Mutex::new(catalog),
            tables: Mutex::new(tables),
            clock: Mutex::new(Clock {
                open: Epoch(max_epoch.0 + 1),
            }),
            dataflow: Mutex::new(Dataflow::default()),
            visible,
            tick_request: Notify::new(),
            barrier_interval,
        }))
    }

    /// The materialized views to recompile at start, in creation order.
    pub fn views_to_recover(&self) -> Vec<RelationDef> {
        lock(&self.catalog)
            .relations()
            .filter(|r| !r.is_table())
            .cloned()
            .collect()
    }

    /// Recompiles and backfills one materialized view at start from its planned query.
    ///
    /// A view that fails to rebuild (its query no longer evaluates on the data) is kept in the
    /// `Failed` state and reports its error when read.
    ///
    /// # Errors
    /// `0A000` if the stored query no longer compiles.
    pub fn recover_view(&self, def: &RelationDef, plan: LogicalPlan) -> Result<()> {
        let mut df = lock(&self.dataflow);
        let mut job = Job::try_new(def.id, def.name.clone(), plan, def.schema_ref())?;
        let snapshot = self.snapshot_input(&df, &job);
        if let Err(e) = snapshot.and_then(|s| job.rebuild(&s)) {
            job.status = JobStatus::Failed {
                code: e.sqlstate(),
                message: e.to_string(),
            };
            warn!(view = %def.name, error = %e, "view failed while rebuilding");
        }
        df.jobs.insert(def.id, job);
        self.publish(&df, None)
    }

    /// Starts the barrier clock: an epoch closes every barrier interval, or at once on `FLUSH`.
    pub fn start_barrier_clock(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let engine = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(engine.barrier_interval) => {}
                    _ = engine.tick_request.notified() => {}
                }
                let e = Arc::clone(&engine);
                match tokio::task::spawn_blocking(move || e.tick()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => error!(error = %err, "barrier failed"),
                    Err(err) => error!(error = %err, "barrier task panicked"),
                }
                if Arc::strong_count(&engine) == 1 {
                    break;
                }
            }
        })
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

    /// The latest acknowledged contents of a table.
    ///
    /// # Errors
    /// [`Error::Catalog`] when the table does not exist.
    pub fn table_snapshot(&self, id: RelationId) -> Result<Arc<RecordBatch>> {
        let t = self.table(id)?;
        let mut t = lock(&t);
        t.snapshot()
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
    pub fn write(&self, table: RelationId, change: ChangeBatch) -> Result<()> {
        if change.is_empty() {
            return Ok(());
        }
        let data = self.table(table)?;
        let clock = lock(&self.clock);
        let mut data = lock(&data);
        data.validate(&change)?;
        let change = change.with_schema(data.schema.clone())?;
        let epoch = clock.open;
        let mut parts = Vec::new();
        let mut offset = 0;
        while offset < change.len() {
            let len = CHANGELOG_CHUNK_ROWS.min(change.len() - offset);
            let batch = change.batch.slice(offset, len);
            let weights = change.weights.slice(offset, len);
            parts.push(ChangeBatch::new(batch, weights)?);
            offset += len;
        }
        let first = data.next_seq;
        let entries: Vec<(u64, Epoch, &ChangeBatch)> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| (first + i as u64, epoch, p))
            .collect();
        self.store.append_changelog(table, &entries)?;
        data.next_seq = first + parts.len() as u64;
        data.apply(&change)?;
        data.pending.push((epoch, change));
        Ok(())
    }

    /// Waits until every write acknowledged before the call is visible in every view.
    pub async fn flush(&self) {
        let target = lock(&self.clock).open;
        let mut rx = self.visible.subscribe();
        self.tick_request.notify_one();
        let _ = rx.wait_for(|v| v.epoch >= target).await;
    }

    /// Closes the open epoch and runs it through every job, then publishes the new snapshot.
    ///
    /// # Errors
    /// Internal errors only; a failing view is marked failed and the others go on.
    pub fn tick(&self) -> Result<()> {
        let mut df = lock(&self.dataflow);
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
            (epoch, changes)
        };
        let rows: usize = changes.values().flatten().map(|c| c.len()).sum();
        let mut input = EpochInput { changes };
        let mut touched: HashSet<RelationId> = input.changes.keys().copied().collect();
        let mut rebuilt: HashSet<RelationId> = HashSet::new();
        let ids: Vec<RelationId> = df.jobs.keys().copied().collect();
        for id in ids {
            let (needs_rebuild, reads_change) = {
                let job = &df.jobs[&id];
                let upstream_rebuilt = job.sources.iter().any(|s| rebuilt.contains(s));
                let failed = matches!(job.status, JobStatus::Failed { .. });
                let reads_change = job.sources.iter().any(|s| touched.contains(s));
                (upstream_rebuilt || (failed && reads_change), reads_change)
            };
            if needs_rebuild {
                let snapshot = {
                    let job = &df.jobs[&id];
                    self.snapshot_input(&df, job)
                };
                let job = df
                    .jobs
                    .get_mut(&id)
                    .ok_or_else(|| Error::Internal("job vanished".into()))?;
                match snapshot.and_then(|s| job.rebuild(&s)) {
                    Ok(()) => info!(view = %job.name, epoch = epoch.0, "view rebuilt"),
                    Err(e) => {
                        job.status = JobStatus::Failed {
                            code: e.sqlstate(),
                            message: e.to_string(),
                        };
                        debug!(view = %job.name, error = %e, "view still failing");
                    }
                }
                rebuilt.insert(id);
                touched.insert(id);
            } else if reads_change {
                let job = df
                    .jobs
                    .get_mut(&id)
                    .ok_or_else(|| Error::Internal("job vanished".into()))?;
                if matches!(job.status, JobStatus::Failed { .. }) {
                    continue;
                }
                match job.process(&input) {
                    Ok(out) => {
                        if !out.is_empty() {
                            input.changes.insert(id, out);
                            touched.insert(id);
                        }
                    }
                    Err(e) => {
                        warn!(view = %job.name, epoch = epoch.0, error = %e, "view failed");
                        // Downstream views rebuild (and report the failure) from this one.
                        rebuilt.insert(id);
                        touched.insert(id);
                    }
                }
            }
        }
        self.publish(&df, Some((epoch, &touched)))?;
        debug!(epoch = epoch.0, rows, "epoch committed");
        Ok(())
    }

    /// The full current contents of a job's sources, as one epoch of inserts.
    fn snapshot_input(&self, df: &Dataflow, job: &Job) -> Result<EpochInput> {
        let mut input = EpochInput::default();
        for s in &job.sources {
            let change = if let Some(upstream) = df.jobs.get(s) {
                upstream.contents_as_change()?
            } else {
                let t = self.table(*s)?;
                let t = lock(&t);
                t.processed_contents()?
            };
            input.changes.insert(*s, vec![change]);
        }
        Ok(input)
    }

    /// Publishes the views' contents; only views in `touched` are re-read.
    fn publish(&self, df: &Dataflow, tick: Option<(Epoch, &HashSet<RelationId>)>) -> Result<()> {
        let old = self.visible();
        let mut views = HashMap::new();
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
                (JobStatus::Running, Some(ViewState::Ready(b))) if !changed => {
                    ViewState::Ready(b.clone())
                }
                (JobStatus::Running, _) => ViewState::Ready(job.snapshot()?),
            };
            views.insert(*id, state);
        }
        let epoch = tick.map(|(e, _)| e).unwrap_or(old.epoch);
        self.visible
            .send_replace(Arc::new(Visible { epoch, views }));
        Ok(())
    }

    fn persist_catalog(&self, catalog: &Catalog) -> Result<()> {
        self.store.put_meta("catalog", &catalog.to_json()?)
    }

    /// Creates a table.
    ///
    /// # Errors
    /// `42P07` when the name is taken (unless `if_not_exists`); store errors.
    pub fn create_table(
        &self,
        name: &str,
        schema: SchemaRef,
        primary_key: Vec<usize>,
        if_not_exists: bool,
    ) -> Result<bool> {
        let _df = lock(&self.dataflow);
        let mut catalog = lock(&self.catalog);
        if let Some(existing) = catalog.by_name(name) {
            if if_not_exists {
                return Ok(false);
            }
            return Err(Error::catalog(
                "42P07",
                format!("relation \"{}\" already exists", existing.name),
            ));
        }
        let id = catalog.allocate_id();
        let def = RelationDef {
            id,
            name: name.to_string(),
            schema: schema.as_ref().clone(),
            kind: RelationKind::Table { primary_key },
            depends_on: vec![],
        };
        let data = TableData::new(&def)?;
        let mut next = catalog.clone();
        next.insert(def);
        self.persist_catalog(&next)?;
        *catalog = next;
        lock(&self.tables).insert(id, Arc::new(Mutex::new(data)));
        info!(table = name, id, "table created");
        Ok(true)
    }

    /// Creates a materialized view: compiles its job, backfills it from the current contents of
    /// its inputs (as of the last processed epoch) and makes it visible before returning.
    ///
    /// # Errors
    /// `42P07` when the name is taken (unless `if_not_exists`), `0A000` for unsupported
    /// constructs, and any error evaluating the query on the existing data.
    pub fn create_view(
        &self,
        name: &str,
        query: &str,
        plan: LogicalPlan,
        settings: BTreeMap<String, String>,
        if_not_exists: bool,
    ) -> Result<bool> {
        let mut df = lock(&self.dataflow);
        if let Some(existing) = lock(&self.catalog).by_name(name) {
            if if_not_exists {
                return Ok(false);
            }
            return Err(Error::catalog(
                "42P07",
                format!("relation \"{}\" already exists", existing.name),
            ));
        }
        let schema = crate::stream::ops::nullable_schema(plan.schema().as_arrow());
        let mut catalog = lock(&self.catalog).clone();
        let id = catalog.allocate_id();
        let mut job = Job::try_new(id, name.to_string(), plan, schema.clone())?;
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

    /// The EXPLAIN lines of a view's job.
    ///
    /// # Errors
    /// `0A000` for unsupported constructs.
    pub fn explain_view(&self, name: &str, plan: LogicalPlan) -> Result<Vec<String>> {
        let schema = crate::stream::ops::nullable_schema(plan.schema().as_arrow());
        let job = Job::try_new(0, name.to_string(), plan, schema)?;
        Ok(job.explain())
    }

    /// Drops a table or view (and, with `cascade`, the views that read it).
    ///
    /// # Errors
    /// `42P01` when it does not exist (unless `if_exists`), `42809` when it is of the other
    /// kind, `2BP01` when views depend on it and `cascade` is false.
    pub fn drop_relation(
        &self,
        name: &str,
        table: bool,
        if_exists: bool,
        cascade: bool,
    ) -> Result<bool> {
        let mut df = lock(&self.dataflow);
        let mut catalog = lock(&self.catalog).clone();
        let Some(def) = catalog.by_name(name).cloned() else {
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
            df.jobs.remove(id);
            if lock(&self.tables).remove(id).is_some() {
                self.store.delete_changelog(*id)?;
            }
        }
        *lock(&self.catalog) = catalog;
        self.publish(&df, None)?;
        info!(relation = name, dropped = doomed.len(), "dropped");
        Ok(true)
    }
}

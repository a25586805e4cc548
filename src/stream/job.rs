//! A job: the running dataflow of one materialized view, its contents, its checkpoint
//! coordinator and its restart strategy.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use arrow::datatypes::SchemaRef;

use crate::catalog::IndexDef;
use crate::checkpoint::{
    CheckpointCoordinator, JobSettings, RestartTracker, Restored, SnapshotSource, StateBackendKind,
    StateImage, StateTableEntry,
};
use crate::common::{ChangeBatch, Epoch, RelationId};
use crate::error::{Error, Result};
use crate::state::index::SecondaryIndex;
use crate::state::{IndexedSnapshot, StateBackend, StateSnapshot, StateTable};
use crate::stream::plan::{Build, StreamPlan};
use crate::stream::{EpochContext, Operator, StateVisitor, Watermarks};

/// The most input rows the operator tree of a job processes at once: a larger epoch (one
/// big `COPY`) or a backfill is split into batches of this size, so the operators' working
/// memory (row encodings, join output, touched groups) follows this bound, not the epoch.
pub const EPOCH_BATCH_ROWS: usize = 65_536;

/// The name of a job's view rows among its state tables.
const VIEW_TABLE: &str = "view";

/// The path of a job's top operator in its state tables' names.
const ROOT: &str = "root";

/// The error of a checkpoint without a state table the plan has (then the view is rebuilt).
fn missing_table(name: &str) -> Error {
    Error::State(format!("the checkpoint holds no state table {name}"))
}

/// What a job being backfilled reads of one input: the input's rows, frozen, then changes
/// to apply after them (the negations of writes later than the backfill's epoch, newest
/// first), so the input ends as of that epoch.
pub struct BackfillSource {
    /// The input relation.
    pub id: RelationId,
    /// Its rows (an O(1) snapshot; read batch by batch).
    pub rows: StateSnapshot,
    /// Changes to apply after the rows, in order.
    pub after: Vec<ChangeBatch>,
    /// The input's watermarks as of the backfill's epoch (empty when unknown).
    pub watermarks: Watermarks,
}

/// Whether a job is maintaining its view (`weir_catalog.jobs.status`).
#[derive(Debug, Clone)]
pub enum JobStatus {
    /// Maintaining the view.
    Running,
    /// Failed; restarts from its last checkpoint at `at`, as its restart strategy said.
    Restarting {
        /// When the restart happens.
        at: Instant,
        /// The failure that caused it.
        message: String,
    },
    /// Failed for good (its restart strategy gave up, or the failure is in the data, e.g. a
    /// division by zero on one row). Reading the view reports the error. A data error heals
    /// when a later epoch rebuilds the view successfully from its inputs;
    /// `ALTER MATERIALIZED VIEW name RESUME` restarts it from its last checkpoint.
    Failed {
        /// SQLSTATE of the error.
        code: &'static str,
        /// The error message.
        message: String,
    },
}

impl JobStatus {
    /// The upper-case name shown in system tables.
    pub fn as_str(&self) -> &'static str {
        match self {
            JobStatus::Running => "RUNNING",
            JobStatus::Restarting { .. } => "RESTARTING",
            JobStatus::Failed { .. } => "FAILED",
        }
    }
}

/// What the last recovery of a job did.
#[derive(Debug, Clone, Default)]
pub struct Recovery {
    /// The checkpoint restored (None: rebuilt from its sources' beginning).
    pub checkpoint_id: Option<u64>,
    /// The epoch restored.
    pub epoch: Epoch,
    /// Changelog rows read from the sources after that epoch.
    pub replayed_rows: u64,
}

/// The dataflow of one materialized view: its operator tree and materialized contents.
pub struct Job {
    /// The view's relation id.
    pub view: RelationId,
    /// The view's name.
    pub name: String,
    /// The streaming plan (kept to rebuild the operator tree).
    plan: StreamPlan,
    /// How the operator tree is built from the plan: `streaming.parallelism` instances of each
    /// keyed operator, and the alignment clock their exchanges share.
    build: Build,
    /// The barrier alignment of the last processed epoch: (epoch, ms the exchanges' fastest
    /// instances waited for the slowest), as the epoch's checkpoint records it.
    pub last_alignment: (Epoch, i64),
    root: Box<dyn Operator>,
    /// The relations read.
    pub sources: BTreeSet<RelationId>,
    /// The view's schema (every field nullable).
    pub schema: SchemaRef,
    /// The view's rows (the materialize operator's state table).
    contents: StateTable,
    /// Secondary indexes on the view: its rows again, keyed by the indexes' columns. Derived
    /// from `contents` (never checkpointed): rebuilt after a checkpoint is loaded.
    indexes: Vec<SecondaryIndex>,
    /// Running, restarting or failed.
    pub status: JobStatus,
    /// The checkpoint coordinator (absent for a job compiled only for EXPLAIN).
    pub coordinator: Option<CheckpointCoordinator>,
    /// The restart strategy's bookkeeping.
    pub restart: RestartTracker,
    /// Restarts so far.
    pub restarts: u64,
    /// The last recovery (at start or after a failure).
    pub last_recovery: Option<Recovery>,
    /// The watermarks of the view's columns as of the last epoch that advanced them (empty
    /// when none is known); passed to the views reading this one.
    pub watermarks: Watermarks,
    /// Each state table's name and row count (copies counted) as of the last processed
    /// epoch, the view's rows first (what `weir_catalog.state_tables` shows).
    pub state_rows: Vec<(String, i64)>,
    /// The state backend's root instance, whose siblings hold the job's state (the job's
    /// state is on the heap when `None`).
    state_root: Option<Arc<StateBackend>>,
    /// The job's live state: its own RocksDB instance (with a coordinator), the root (without
    /// one), or none (on the heap).
    live: Option<Arc<StateBackend>>,
}

/// A freshly built operator tree, the tables it reads, and empty view contents, every state
/// table in `backend` when given (under a new table id each; a checkpoint records each
/// table's id by its name).
fn fresh_state(
    plan: &StreamPlan,
    how: &Build,
    schema: &SchemaRef,
    backend: Option<&Arc<StateBackend>>,
) -> Result<(Box<dyn Operator>, BTreeSet<RelationId>, StateTable)> {
    let mut root = plan.root.build_with(how)?;
    let contents = StateTable::with_key(schema.clone(), &plan.stream_key)?.stored(backend)?;
    root.visit_state(ROOT, &mut |_, t| t.store_in(backend))?;
    Ok((root, plan.sources.clone(), contents))
}

/// A fresh home for a job's state: its own RocksDB instance when it has a coordinator, the
/// root instance when not (a job compiled only for EXPLAIN), or the heap.
fn fresh_live(
    coordinator: Option<&CheckpointCoordinator>,
    root: Option<&Arc<StateBackend>>,
) -> Result<Option<Arc<StateBackend>>> {
    Ok(match (coordinator, root) {
        (Some(c), Some(r)) => Some(c.reset_working(r)?),
        (None, Some(r)) => Some(Arc::clone(r)),
        (_, None) => None,
    })
}

/// EXPLAIN lines of a view named `name` of `schema` over the operator tree `root`,
/// materialize on top.
fn explain_lines(name: &str, schema: &SchemaRef, root: &dyn Operator) -> Vec<String> {
    let cols: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let mut out = vec![format!(
        "StreamMaterialize: {} columns=[{}] (state table: the view's rows, keyed by all columns)",
        name,
        cols.join(", ")
    )];
    root.explain(1, &mut out);
    out
}

impl Job {
    /// Builds a job from a streaming plan; its contents start empty. Keyed operators get
    /// the coordinator's `streaming.parallelism` instances (one without a coordinator).
    ///
    /// # Errors
    /// [`Error::NotSupported`] for constructs that cannot be maintained incrementally.
    pub fn try_new(
        view: RelationId,
        name: String,
        plan: StreamPlan,
        schema: SchemaRef,
        coordinator: Option<CheckpointCoordinator>,
        state_root: Option<Arc<StateBackend>>,
    ) -> Result<Self> {
        let build = Build::new(coordinator.as_ref().map_or(1, |c| c.settings().parallelism));
        let live = fresh_live(coordinator.as_ref(), state_root.as_ref())?;
        let (root, sources, contents) = fresh_state(&plan, &build, &schema, live.as_ref())?;
        let restart = RestartTracker::new(
            coordinator
                .as_ref()
                .map(|c| c.settings().restart.clone())
                .unwrap_or(crate::checkpoint::RestartStrategy::None),
        );
        Ok(Job {
            view,
            name,
            plan,
            build,
            last_alignment: (Epoch(0), 0),
            root,
            sources,
            schema,
            contents,
            indexes: Vec::new(),
            status: JobStatus::Running,
            coordinator,
            restart,
            restarts: 0,
            last_recovery: None,
            watermarks: Watermarks::new(),
            state_rows: Vec::new(),
            state_root,
            live,
        })
    }

    /// Whether the job's output changes as time passes (a temporal filter): it then runs every
    /// epoch, not only those that change its sources.
    pub fn time_driven(&self) -> bool {
        self.plan.time_driven
    }

    /// The job's settings, when it has a coordinator.
    pub fn settings(&self) -> Option<&JobSettings> {
        self.coordinator.as_ref().map(|c| c.settings())
    }

    /// EXPLAIN lines of the operator tree, materialize on top.
    pub fn explain(&self) -> Vec<String> {
        explain_lines(&self.name, &self.schema, self.root.as_ref())
    }

    /// The EXPLAIN lines of a view not yet created: `plan` built with `parallelism`
    /// instances of each keyed operator (its state tables on the heap, never filled).
    ///
    /// # Errors
    /// Errors of the operators' constructors.
    pub fn explain_plan(name: &str, plan: &StreamPlan, parallelism: usize) -> Result<Vec<String>> {
        let root = plan.root.build_with(&Build::new(parallelism))?;
        Ok(explain_lines(name, &plan.schema, root.as_ref()))
    }

    /// Runs one epoch through the operator tree and applies the result to the view's contents.
    /// Returns the view's changes (in the view's schema) for downstream jobs. An epoch of
    /// more than [`EPOCH_BATCH_ROWS`] input rows runs as batches of at most that many, input
    /// by input in relation id order, each change's rows in order: the operators are
    /// incremental, so the epoch's net output is the same as in one pass.
    ///
    /// # Errors
    /// Evaluation errors; the operator state is then undefined and the job must be restarted
    /// or rebuilt (the caller decides, by the restart strategy).
    pub fn process(&mut self, input: &EpochContext) -> Result<Vec<ChangeBatch>> {
        if let Some(message) = crate::failpoint::eval("job::process") {
            return Err(Error::Internal(format!("{message} (view {})", self.name)));
        }
        let before = self.build.alignment_ns.load(Ordering::Relaxed);
        let out = self.process_epoch(input);
        let waited = self.build.alignment_ns.load(Ordering::Relaxed) - before;
        self.last_alignment = (input.epoch, (waited / 1_000_000) as i64);
        self.note_state_rows();
        out
    }

    /// Records each state table's row count in [`Job::state_rows`] (O(state tables)).
    fn note_state_rows(&mut self) {
        let mut rows = Vec::new();
        let _ = self.visit_state(&mut |name, t| {
            rows.push((name.to_string(), t.len()));
            Ok(())
        });
        self.state_rows = rows;
    }

    /// [`Job::process`] without the bookkeeping: the epoch in batches.
    fn process_epoch(&mut self, input: &EpochContext) -> Result<Vec<ChangeBatch>> {
        let rows: usize = input.changes.values().flatten().map(|c| c.len()).sum();
        if rows <= EPOCH_BATCH_ROWS {
            return self.process_batch(input);
        }
        let mut ids: Vec<RelationId> = input.changes.keys().copied().collect();
        ids.sort_unstable();
        let mut out = Vec::new();
        for id in ids {
            for change in input.of(id) {
                for part in change.pieces(EPOCH_BATCH_ROWS) {
                    let mut piece = EpochContext::new(input.epoch);
                    piece.now_ns = input.now_ns;
                    piece.changes.insert(id, vec![part]);
                    out.extend(self.process_batch(&piece)?);
                }
            }
        }
        // The watermarks come after every piece: a window closes once all of the epoch's
        // rows are in.
        if !input.watermarks.is_empty() {
            let mut last = EpochContext::new(input.epoch);
            last.now_ns = input.now_ns;
            last.watermarks = input.watermarks.clone();
            out.extend(self.process_batch(&last)?);
        }
        Ok(out)
    }

    /// Runs one batch of an epoch through the operator tree and applies its output to the
    /// view's contents and indexes.
    fn process_batch(&mut self, input: &EpochContext) -> Result<Vec<ChangeBatch>> {
        let out = self.root.process(input)?;
        if !input.watermarks.is_empty() {
            crate::stream::advance_watermarks(&mut self.watermarks, self.root.watermarks(input));
        }
        let out = out
            .into_iter()
            .filter(|c| !c.is_empty())
            .map(|c| c.with_schema(self.schema.clone()))
            .collect::<Result<Vec<_>>>()?;
        for c in &out {
            self.contents.apply(c)?;
            for index in &mut self.indexes {
                index.rows.apply(c)?;
            }
        }
        Ok(out)
    }

    /// Adds a secondary index, built from the view's current rows.
    ///
    /// # Errors
    /// Arrow errors.
    pub fn add_index(&mut self, def: &IndexDef) -> Result<()> {
        let index = SecondaryIndex::build(def, &self.contents)?;
        self.indexes.push(index);
        Ok(())
    }

    /// Removes the secondary index with catalog id `id` (if present).
    pub fn remove_index(&mut self, id: RelationId) {
        self.indexes.retain(|i| i.def.id != id);
    }

    /// Rebuilds every secondary index from the view's rows.
    fn rebuild_indexes(&mut self) -> Result<()> {
        let defs: Vec<IndexDef> = self.indexes.iter().map(|i| i.def.clone()).collect();
        self.indexes = defs
            .iter()
            .map(|d| SecondaryIndex::build(d, &self.contents))
            .collect::<Result<_>>()?;
        Ok(())
    }

    /// Empties the job: a fresh operator tree and empty contents, status `Running`.
    ///
    /// # Errors
    /// [`Error::NotSupported`] if the plan no longer compiles.
    pub fn reset(&mut self) -> Result<()> {
        let live = fresh_live(self.coordinator.as_ref(), self.state_root.as_ref())?;
        (self.root, _, self.contents) =
            fresh_state(&self.plan, &self.build, &self.schema, live.as_ref())?;
        self.live = live;
        self.watermarks.clear();
        self.rebuild_indexes()?;
        self.status = JobStatus::Running;
        self.note_state_rows();
        Ok(())
    }

    /// Rebuilds the operator tree and contents from the full contents of the inputs. Used at
    /// creation (backfill) and to heal a failed job.
    ///
    /// # Errors
    /// Evaluation errors; the job is left `Failed`.
    pub fn rebuild(&mut self, sources: &[BackfillSource]) -> Result<()> {
        self.reset()?;
        if let Err(e) = self.backfill(sources) {
            self.status = JobStatus::Failed {
                code: e.sqlstate(),
                message: e.to_string(),
            };
            return Err(e);
        }
        Ok(())
    }

    /// Runs the inputs' contents through the (empty) job: an empty epoch first (a global
    /// aggregate's row, a `VALUES` list), then each input's rows (the tables temporal joins
    /// look up first) in batches of
    /// [`EPOCH_BATCH_ROWS`] rows, each as an epoch of its own. The operators are
    /// incremental, so the result equals one epoch of everything, while memory holds one
    /// batch (and its outputs) at a time instead of every input row.
    ///
    /// # Errors
    /// Evaluation errors; state errors.
    pub fn backfill(&mut self, sources: &[BackfillSource]) -> Result<()> {
        // Each piece at the wall-clock time (EpochContext::new), so a temporal filter's
        // `now()` is now: with the default 0 (1970), `ts <= now()` showed no row until the
        // first epoch after CREATE or a restart.
        self.process(&EpochContext::new(Epoch(0)))?;
        // The tables that temporal joins look up first: the stream's stored rows join them
        // as they are now (see `StreamNode::lookup_relations`).
        let lookups = self.plan.root.lookup_relations();
        let ordered = sources
            .iter()
            .filter(|s| lookups.contains(&s.id))
            .chain(sources.iter().filter(|s| !lookups.contains(&s.id)));
        for s in ordered {
            let mut feed = |change: ChangeBatch| -> Result<()> {
                let mut input = EpochContext::new(Epoch(0));
                input.changes.insert(s.id, vec![change]);
                self.process(&input).map(drop)
            };
            s.rows.for_each_batch(EPOCH_BATCH_ROWS, &mut |batch| {
                feed(ChangeBatch::inserts(batch))
            })?;
            for change in &s.after {
                // `process` splits it into batches.
                feed(change.clone())?;
            }
        }
        // The inputs' watermarks once all of their rows are in.
        let mut last = EpochContext::new(Epoch(0));
        for s in sources.iter().filter(|s| !s.watermarks.is_empty()) {
            last.watermarks.insert(s.id, s.watermarks.clone());
        }
        if !last.watermarks.is_empty() {
            self.process(&last)?;
        }
        Ok(())
    }

    /// Visits every state table of the job with its name: the view's rows (`view`), then the
    /// operators' (see [`Operator::visit_state`]).
    fn visit_state(&mut self, f: &mut StateVisitor<'_>) -> Result<()> {
        f(VIEW_TABLE, &mut self.contents)?;
        self.root.visit_state(ROOT, f)
    }

    /// Writes the job's state held in memtables to disk (its own instance only), so that the
    /// next checkpoint's sync phase has little to flush.
    ///
    /// # Errors
    /// [`Error::State`] on a RocksDB failure.
    pub fn flush_state(&self) -> Result<()> {
        self.own_instance().map_or(Ok(()), |live| live.flush())
    }

    /// Starts flushing the job's own instance without waiting (see
    /// [`StateBackend::begin_flush`]): called for every job due a checkpoint before any
    /// checkpoint's sync phase waits for its flush.
    ///
    /// # Errors
    /// [`Error::State`] on a RocksDB failure.
    pub fn begin_flush(&self) -> Result<()> {
        self.own_instance()
            .map_or(Ok(()), |live| live.begin_flush())
    }

    /// The job's own RocksDB instance, when its state lives in one (not in the root, shared
    /// with others, nor on the heap).
    fn own_instance(&self) -> Option<&Arc<StateBackend>> {
        self.live
            .as_ref()
            .filter(|l| !self.state_root.as_ref().is_some_and(|r| Arc::ptr_eq(l, r)))
    }

    /// What a checkpoint of the state reads, and the job's state tables (names, ids, total
    /// counts): the job's live RocksDB instance for `rocksdb` (a native checkpoint: nothing
    /// is read row by row), every row for `memory` or state on the heap (in the order of the
    /// tables).
    ///
    /// # Errors
    /// State read errors collecting an image.
    pub fn checkpoint_source(
        &mut self,
        backend: StateBackendKind,
    ) -> Result<(SnapshotSource, Vec<StateTableEntry>)> {
        let mut tables = Vec::new();
        self.visit_state(&mut |name, t| {
            tables.push(StateTableEntry {
                name: name.to_string(),
                id: t.stored_id().unwrap_or(0),
                rows: t.len(),
            });
            Ok(())
        })?;
        if backend == StateBackendKind::RocksDb
            && let Some(live) = self.own_instance()
        {
            return Ok((SnapshotSource::Live(Arc::clone(live)), tables));
        }
        let mut image = StateImage::default();
        self.visit_state(&mut |name, t| {
            image.tables.push(t.rows()?);
            image.names.push(name.to_string());
            Ok(())
        })?;
        Ok((SnapshotSource::Image(image), tables))
    }

    /// The names of the job's state tables (see [`Operator::visit_state`]): what a checkpoint
    /// must hold, name for name, to be restored into this job's plan.
    ///
    /// # Errors
    /// None in practice (the visitor only reads names); state errors are passed through.
    pub fn state_table_names(&mut self) -> Result<BTreeSet<String>> {
        let mut names = BTreeSet::new();
        self.visit_state(&mut |name, _| {
            names.insert(name.to_string());
            Ok(())
        })?;
        Ok(names)
    }

    /// Discards the job's completed checkpoints whose state tables are not exactly the
    /// plan's (written by another plan of the view, e.g. before an operator's state tables
    /// were renamed): they cannot be restored, so the view is rebuilt from its inputs or
    /// recovered from an older matching checkpoint instead. Returns the discarded ids.
    ///
    /// # Errors
    /// As [`Job::state_table_names`].
    pub fn discard_mismatched_checkpoints(&mut self) -> Result<Vec<u64>> {
        let names = self.state_table_names()?;
        Ok(match &self.coordinator {
            Some(c) => c.discard_mismatched(&names),
            None => Vec::new(),
        })
    }

    /// Takes over a restored checkpoint: a native one becomes the live state (each state
    /// table is found by its name, under the id and with the total the checkpoint recorded;
    /// derived tables are dropped and rebuilt), an image is loaded into fresh state.
    ///
    /// # Errors
    /// [`Error::State`] when the checkpoint lacks a state table of the plan; other state
    /// errors. The job is then left empty.
    pub fn load(&mut self, restored: Restored) -> Result<()> {
        match restored {
            Restored::Live { backend, tables } => {
                (self.root, _, self.contents) =
                    fresh_state(&self.plan, &self.build, &self.schema, None)?;
                let by_name: HashMap<&str, &StateTableEntry> =
                    tables.iter().map(|t| (t.name.as_str(), t)).collect();
                let loaded = self.visit_state(&mut |name, t| {
                    let entry = by_name.get(name).ok_or_else(|| missing_table(name))?;
                    t.store_as(&backend, entry.id)?;
                    t.set_total(entry.rows);
                    Ok(())
                });
                if let Err(e) = loaded {
                    self.reset()?;
                    return Err(e);
                }
                let next = tables.iter().map(|t| t.id).max().unwrap_or(0) + 1;
                backend.allocate_from(next);
                backend.drop_unallocated()?;
                self.live = Some(backend);
            }
            Restored::Image(image) => self.load_image(image)?,
        }
        if let Err(e) = self.root.restore() {
            self.reset()?;
            return Err(e);
        }
        self.status = JobStatus::Running;
        self.note_state_rows();
        self.rebuild_indexes()
    }

    fn load_image(&mut self, image: StateImage) -> Result<()> {
        self.reset()?;
        let mut by_name: HashMap<String, _> = image.names.into_iter().zip(image.tables).collect();
        let loaded = self.visit_state(&mut |name, t| {
            let rows = by_name.remove(name).ok_or_else(|| missing_table(name))?;
            t.load_rows(rows.iter().map(|(k, c)| (k.as_ref(), *c)))
        });
        if let Err(e) = loaded {
            self.reset()?;
            return Err(e);
        }
        Ok(())
    }

    /// The view's rows and its indexes as of the last processed epoch, frozen for readers
    /// in O(1) each.
    pub fn snapshot(&self) -> IndexedSnapshot {
        IndexedSnapshot {
            rows: self.contents.snapshot(),
            indexes: self.indexes.iter().map(|i| i.rows.snapshot()).collect(),
        }
    }

    /// The view's rows as of the last processed epoch, frozen in O(1), as the input of a
    /// downstream view's backfill.
    ///
    /// # Errors
    /// [`Error::Execution`] when the job is not running.
    pub fn contents_for_backfill(&self) -> Result<BackfillSource> {
        match &self.status {
            JobStatus::Failed { code, message } => {
                return Err(Error::Execution {
                    view: self.name.clone(),
                    source: Box::new(Error::data(code, message.clone())),
                });
            }
            JobStatus::Restarting { message, .. } => {
                return Err(Error::Execution {
                    view: self.name.clone(),
                    source: Box::new(Error::data(
                        "55000",
                        format!("the view is restarting after: {message}"),
                    )),
                });
            }
            JobStatus::Running => {}
        }
        Ok(BackfillSource {
            id: self.view,
            rows: self.contents.snapshot(),
            after: Vec::new(),
            watermarks: self.watermarks.clone(),
        })
    }
}

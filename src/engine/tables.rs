//! Tables: their contents and changelogs, writes (validated, logged, applied under the
//! table's lock), reads of their snapshots, and the tables' native snapshots with changelog
//! truncation behind them.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray, BooleanArray, TimestampNanosecondArray};
use arrow::datatypes::{DataType, SchemaRef, TimeUnit, TimestampNanosecondType};
use arrow::row::{RowConverter, SortField};
use datafusion::common::ScalarValue;
use tracing::{debug, warn};

use crate::catalog::{Catalog, RelationDef, RelationKind, TypeModifier};
use crate::common::{ChangeBatch, Epoch, RelationId};
use crate::connectors::Source;
use crate::connectors::changelog::{ChangelogOffset, ChangelogSource};
use crate::error::{Error, Result};
use crate::state::index::{SecondaryIndex, first_duplicate, key_names, key_values};
use crate::state::table::{KeyLayout, consolidate};
use crate::state::{
    IndexedSnapshot, Positions, SnapshotPosition, StateBackend, StateTable, Store, TableSnapshots,
};
use crate::stream::Watermarks;
use crate::stream::job::{BackfillSource, EPOCH_BATCH_ROWS};

use super::{
    CHANGELOG_CHUNK_ROWS, Dataflow, Engine, MAX_BACKLOG_ROWS, TABLE_SNAPSHOT_MAX_ROWS, ViewState,
    lock,
};

/// Asked by a write just before it becomes durable: `Some(error)` to write nothing and
/// fail with that error (see [`Engine::write_unless`]).
pub type Abandon<'a> = dyn Fn() -> Option<Error> + Sync + 'a;

/// A table's contents (rebuilt from its changelog at start), ordered by its primary key,
/// and its unprocessed changes.
pub(super) struct TableData {
    pub(super) name: String,
    pub(super) schema: SchemaRef,
    /// The rows, keyed by the primary key columns first (so a key lookup is a prefix scan).
    pub(super) contents: StateTable,
    pub(super) primary_key: Option<PrimaryKey>,
    /// Secondary indexes: the same rows keyed by the indexes' columns, kept up to date with
    /// `contents` under the table's lock.
    pub(super) indexes: Vec<SecondaryIndex>,
    /// Changes written but not yet processed by the jobs, with their epochs.
    pub(super) pending: Vec<(Epoch, ChangeBatch)>,
    /// Next changelog sequence number (source offset).
    pub(super) next_seq: u64,
    /// The epoch of the newest write.
    pub(super) last_epoch: Epoch,
    /// The snapshot was read from the store's older row-by-row format; once a native snapshot
    /// holds the table, those rows are deleted.
    pub(super) legacy_snapshot: bool,
    /// A native snapshot holds the table.
    pub(super) native_snapshot: bool,
    /// The newest changelog sequence number the durable snapshot holds (0: none).
    pub(super) snapshot_seq: u64,
    /// The epoch of the entry at `snapshot_seq`.
    pub(super) snapshot_epoch: Epoch,
    /// Rows written since the last snapshot.
    pub(super) unsnapshotted_rows: usize,
    /// The newest sequence number of each epoch with writes whose changelog entries are
    /// still kept, oldest first (to find where the changelog may be truncated).
    pub(super) epoch_seqs: VecDeque<(Epoch, u64)>,
    /// The watermark and late rows of a table with `WATERMARK FOR`.
    pub(super) event_time: Option<EventTime>,
    /// The text columns with a declared length (`varchar(n)`, `char(n)`) and their types.
    pub(super) char_limits: Vec<(usize, TypeModifier)>,
}

/// A write validated and cut into changelog entries, not yet logged or applied (see
/// [`TableData::stage`]).
pub(super) struct Staged {
    /// The change as it will be applied (late rows dropped).
    change: ChangeBatch,
    /// Its changelog entries, at most [`CHANGELOG_CHUNK_ROWS`] rows each.
    parts: Vec<ChangeBatch>,
    /// The sequence number of the first entry.
    first: u64,
    /// The newest event time written (tables with a watermark).
    max_time: Option<i64>,
}

impl Staged {
    /// The changelog entries (sequence number, epoch, rows).
    fn entries(&self, epoch: Epoch) -> Vec<(u64, Epoch, &ChangeBatch)> {
        self.parts
            .iter()
            .enumerate()
            .map(|(i, p)| (self.first + i as u64, epoch, p))
            .collect()
    }
}

/// One row of `weir_catalog.watermarks`: a relation's column that carries a watermark.
#[derive(Debug, Clone)]
pub struct WatermarkInfo {
    /// The table or view.
    pub relation: String,
    /// `table` or `materialized view`.
    pub kind: &'static str,
    /// The column.
    pub column: String,
    /// The watermark as of the last epoch (a value of the column's type); `None` before
    /// the first row.
    pub watermark: Option<ScalarValue>,
    /// A table's late rows dropped since the server started (`None` for views).
    pub late_rows: Option<u64>,
    /// A table's watermark expression as written.
    pub definition: Option<String>,
}

/// A table's event time: its watermark and the rows dropped as late.
///
/// The watermark is Flink's bounded-out-of-orderness watermark, advanced per epoch: when
/// epoch *e* closes it becomes `max(event time written in epochs <= e) - delay` (never
/// lower than before). A row written while epoch *e + 1* is open whose event time is below
/// the watermark of *e* is late: it is dropped (not written) and counted. Which rows are late
/// therefore depends only on the epochs they were written in, so recovery, which replays the
/// changelog by epoch, sees the same rows.
pub(super) struct EventTime {
    /// The event-time column.
    pub(super) column: usize,
    /// The delay, in nanoseconds.
    pub(super) delay_ns: i64,
    /// The largest event time written (in closed or open epochs), in ns since the Unix epoch.
    pub(super) max_written: Option<i64>,
    /// The watermark as of the last closed epoch, in ns since the Unix epoch.
    pub(super) watermark: Option<i64>,
    /// Late rows dropped since the server started.
    pub(super) late_rows: u64,
}

/// The event times of `column` of `change` in nanoseconds since the Unix epoch.
fn event_times_ns(change: &ChangeBatch, column: usize) -> Result<TimestampNanosecondArray> {
    let ns = arrow::compute::cast(
        change.batch.column(column),
        &DataType::Timestamp(TimeUnit::Nanosecond, None),
    )?;
    Ok(ns
        .as_any()
        .downcast_ref::<TimestampNanosecondArray>()
        .cloned()
        .unwrap_or_else(|| TimestampNanosecondArray::from(Vec::<i64>::new())))
}

impl EventTime {
    /// Notes the largest event time of rows written (`None`: no rows).
    fn note_written(&mut self, max: Option<i64>) {
        if let Some(max) = max {
            self.max_written = Some(self.max_written.map_or(max, |m| m.max(max)));
        }
    }

    /// Closes an epoch: the watermark catches up with the rows written so far.
    pub(super) fn close_epoch(&mut self) {
        if let Some(max) = self.max_written {
            let w = max.saturating_sub(self.delay_ns);
            self.watermark = Some(self.watermark.map_or(w, |old| old.max(w)));
        }
    }

    /// `change` without its late rows (event time below the watermark), counting them, and
    /// the largest event time of the rows kept; the event times are read once.
    fn drop_late(&mut self, change: ChangeBatch) -> Result<(ChangeBatch, Option<i64>)> {
        let times = event_times_ns(&change, self.column)?;
        let Some(watermark) = self.watermark else {
            return Ok((change, arrow::compute::max(&times)));
        };
        let keep: BooleanArray = times
            .iter()
            .map(|t| Some(t.is_none_or(|t| t >= watermark)))
            .collect();
        let late = keep.false_count();
        if late == 0 {
            return Ok((change, arrow::compute::max(&times)));
        }
        self.late_rows += late as u64;
        let kept = arrow::compute::filter(&times, &keep)?;
        let max = arrow::compute::max(kept.as_primitive::<TimestampNanosecondType>());
        Ok((change.filter(&keep)?, max))
    }
}

/// Encodes a primary key's columns as the leading key prefix of the table's rows.
pub(super) struct PrimaryKey {
    pub(super) columns: Vec<usize>,
    pub(super) converter: RowConverter,
}

impl TableData {
    /// A table whose rows live in `backend` (the tables' instance, under the table's relation
    /// id; on the heap when `None`).
    pub(super) fn new(def: &RelationDef, backend: Option<&Arc<StateBackend>>) -> Result<Self> {
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
            event_time: def.time.watermark.as_ref().map(|w| EventTime {
                column: w.column,
                delay_ns: w.delay_us.saturating_mul(1000),
                max_written: None,
                watermark: None,
                late_rows: 0,
            }),
            char_limits: (0..def.schema.fields().len())
                .map(|c| (c, def.type_modifier(c)))
                .filter(|(_, t)| t.limit().is_some())
                .collect(),
        })
    }

    /// `change` with its values held to their columns' declared lengths, as PostgreSQL's
    /// `varchar`/`bpchar` input does (docs 8.3): a value longer than `n` characters is cut to
    /// `n` when the rest is spaces; a `character(n)` value loses its trailing spaces (see
    /// below). O(rows of the change) for each limited column.
    ///
    /// # Errors
    /// `22001` `value too long for type character varying(n)` (or `character(n)`) when the
    /// rest is not all spaces.
    pub(super) fn fit_lengths(&self, change: ChangeBatch) -> Result<ChangeBatch> {
        let mut columns: Option<Vec<arrow::array::ArrayRef>> = None;
        for (c, declared) in &self.char_limits {
            let Some(n) = declared.limit() else { continue };
            let n = n as usize;
            let Some(values) = change.batch.column(*c).as_string_opt::<i32>() else {
                continue;
            };
            // `character(n)`: trailing spaces carry no meaning (PostgreSQL docs 8.3: they
            // are "treated as semantically insignificant" in comparisons, and dropped when
            // the value becomes text), so values are kept without them; `'ab'` and `'ab '`
            // are then one value for equality, grouping, DISTINCT and joins.
            let blank_padded = matches!(declared, crate::catalog::TypeModifier::Char(_));
            let mut cut = false;
            for v in values.iter().flatten() {
                if blank_padded && v.ends_with(' ') {
                    cut = true;
                }
                // A value of at most n bytes has at most n characters.
                if v.len() <= n {
                    continue;
                }
                if let Some((at, _)) = v.char_indices().nth(n) {
                    if !v[at..].bytes().all(|b| b == b' ') {
                        return Err(Error::data(
                            "22001",
                            format!("value too long for type {}", declared.sql_name()),
                        ));
                    }
                    cut = true;
                }
            }
            if cut {
                let fitted: arrow::array::StringArray = values
                    .iter()
                    .map(|v| {
                        v.map(|v| {
                            let v = match v.char_indices().nth(n) {
                                Some((at, _)) => &v[..at],
                                None => v,
                            };
                            if blank_padded {
                                v.trim_end_matches(' ')
                            } else {
                                v
                            }
                        })
                    })
                    .collect();
                columns.get_or_insert_with(|| change.batch.columns().to_vec())[*c] =
                    Arc::new(fitted);
            }
        }
        match columns {
            None => Ok(change),
            Some(columns) => Ok(ChangeBatch {
                batch: arrow::record_batch::RecordBatch::try_new(change.batch.schema(), columns)?,
                weights: change.weights,
            }),
        }
    }

    /// Checks NOT NULL and PRIMARY KEY constraints for `change` against the current contents.
    /// O(rows of the change × log n).
    pub(super) fn validate(&self, change: &ChangeBatch) -> Result<()> {
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
                // An UPDATE or DELETE read its rows at one snapshot; another session changed
                // or deleted one of them since (PostgreSQL would wait on the row's lock and
                // re-check it). Refused whole, with the code clients retry on.
                return Err(Error::data(
                    "40001",
                    format!(
                        "could not serialize access due to concurrent update: a row of \
                         \"{}\" this statement changes was changed or deleted by another \
                         session after it was read; run the statement again",
                        self.name
                    ),
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

    /// The rows of `net` that share a row, a primary key or a unique index key with a row of
    /// `change`. O(rows of `net` + rows of `change`), in memory.
    ///
    /// # Errors
    /// Arrow errors encoding the rows.
    fn related(&self, net: &ChangeBatch, change: &ChangeBatch) -> Result<ChangeBatch> {
        if net.is_empty() || change.is_empty() || change.batch.num_columns() == 0 {
            return Ok(net.clone());
        }
        let mut keep = vec![false; net.len()];
        let mut mark = |net_keys: &arrow::row::Rows, change_keys: &arrow::row::Rows| {
            let wanted: std::collections::HashSet<&[u8]> =
                change_keys.iter().map(|r| r.data()).collect();
            for (i, r) in net_keys.iter().enumerate() {
                if wanted.contains(r.data()) {
                    keep[i] = true;
                }
            }
        };
        let rows = crate::state::table::row_converter(&self.schema)?;
        mark(
            &rows.convert_columns(net.batch.columns())?,
            &rows.convert_columns(change.batch.columns())?,
        );
        let columns_of = |b: &ChangeBatch, cols: &[usize]| -> Vec<arrow::array::ArrayRef> {
            cols.iter().map(|c| b.batch.column(*c).clone()).collect()
        };
        if let Some(pk) = &self.primary_key {
            mark(
                &pk.converter
                    .convert_columns(&columns_of(net, &pk.columns))?,
                &pk.converter
                    .convert_columns(&columns_of(change, &pk.columns))?,
            );
        }
        for index in self.indexes.iter().filter(|i| i.def.unique) {
            let layout = index.rows.layout();
            mark(
                &layout.encode_key(&net.batch)?,
                &layout.encode_key(&change.batch)?,
            );
        }
        let keep = BooleanArray::from(keep);
        let batch = arrow::compute::filter_record_batch(&net.batch, &keep)?;
        let weights = arrow::compute::filter(&net.weights, &keep)?;
        ChangeBatch::new(
            batch,
            weights
                .as_primitive::<arrow::datatypes::Int64Type>()
                .clone(),
        )
    }

    /// Prepares a write of `change` in `epoch`: lengths fitted, validated, late rows of a
    /// table with a watermark dropped, cut into changelog entries numbered from the next
    /// sequence number. Changes nothing.
    ///
    /// # Errors
    /// Constraint violations (`23502`, `23505`, `40001`, `22001`).
    pub(super) fn stage(&mut self, change: ChangeBatch) -> Result<Staged> {
        let change = self.fit_lengths(change)?;
        self.validate(&change)?;
        let mut change = change.with_schema(self.schema.clone())?;
        let mut max_time = None;
        if let Some(t) = &mut self.event_time {
            (change, max_time) = t.drop_late(change)?;
        }
        let parts: Vec<ChangeBatch> = change.pieces(CHANGELOG_CHUNK_ROWS).collect();
        Ok(Staged {
            change,
            parts,
            first: self.next_seq,
            max_time,
        })
    }

    /// Applies a validated change to the contents and the indexes, at most
    /// [`EPOCH_BATCH_ROWS`] rows at a time, so that a large COPY's key encodings and write
    /// batches are built one slice at a time, not all at once.
    pub(super) fn apply(&mut self, change: &ChangeBatch) -> Result<()> {
        for part in change.pieces(EPOCH_BATCH_ROWS) {
            self.contents.apply(&part)?;
            for index in &mut self.indexes {
                index.rows.apply(&part)?;
            }
        }
        Ok(())
    }

    /// The contents and the indexes, frozen together in O(1) each.
    pub(super) fn snapshot(&self) -> IndexedSnapshot {
        IndexedSnapshot {
            rows: self.contents.snapshot(),
            indexes: self.indexes.iter().map(|i| i.rows.snapshot()).collect(),
        }
    }

    /// The table's watermark as of the last closed epoch, as a value of its event-time
    /// column's type; `None` without a watermark clause or rows.
    pub(super) fn watermarks(&self) -> Option<Watermarks> {
        let e = self.event_time.as_ref()?;
        let ns = e.watermark?;
        let value = ScalarValue::TimestampNanosecond(Some(ns), None)
            .cast_to(self.schema.field(e.column).data_type())
            .ok()?;
        Some(vec![(e.column, value)])
    }

    /// Records that changelog entries up to `seq` are of epoch `epoch`.
    pub(super) fn note_entries(&mut self, seq: u64, epoch: Epoch, rows: usize) {
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
    pub(super) fn restore(
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
            if let Some(t) = &mut self.event_time {
                t.max_written = p.max_event_time;
            }
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
            if let Some(t) = &mut self.event_time {
                let times = event_times_ns(&entry.change, t.column)?;
                t.note_written(arrow::compute::max(&times));
            }
            replayed += entry.change.len();
            self.next_seq = entry.seq + 1;
            self.note_entries(entry.seq, entry.epoch, entry.change.len());
        }
        // Every restored row is of a closed epoch.
        if let Some(t) = &mut self.event_time {
            t.close_epoch();
        }
        Ok((from_snapshot, replayed))
    }

    /// Where a snapshot taken now stands in this table.
    pub(super) fn position(&self) -> SnapshotPosition {
        SnapshotPosition {
            seq: self.next_seq - 1,
            epoch: self.last_epoch.0,
            rows: self.contents.len(),
            max_event_time: self.event_time.as_ref().and_then(|t| t.max_written),
        }
    }

    /// Records that a snapshot at `position` is durable.
    pub(super) fn snapshotted(&mut self, position: SnapshotPosition) {
        self.snapshot_seq = position.seq;
        self.snapshot_epoch = Epoch(position.epoch);
        self.unsnapshotted_rows = 0;
        self.native_snapshot = true;
    }

    /// Truncates the changelog through the newest entry of an epoch `<= keep_after` that the
    /// durable snapshot holds (and, once a native snapshot holds the table, the snapshot of
    /// the store's older format). Cost: a range delete.
    pub(super) fn truncate(
        &mut self,
        store: &Store,
        id: RelationId,
        keep_after: Epoch,
    ) -> Result<()> {
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
    pub(super) fn forget_entries_through(&mut self, seq: u64) {
        while self.epoch_seqs.front().is_some_and(|(_, s)| *s <= seq) {
            self.epoch_seqs.pop_front();
        }
    }

    /// The contents as of the last processed epoch, to backfill a view (table `id`): current
    /// contents (an O(1) snapshot) minus the pending changes of the open epoch.
    pub(super) fn processed_contents(&self, id: RelationId) -> BackfillSource {
        BackfillSource {
            id,
            rows: self.contents.snapshot(),
            after: self.pending.iter().rev().map(|(_, c)| c.negate()).collect(),
            watermarks: self.watermarks().unwrap_or_default(),
        }
    }
}

/// Relation ids, which name the tables' rows in the tables' instance, stay below this; derived
/// tables there (secondary indexes) are allocated from it on.
pub(super) const DERIVED_TABLE_IDS: u64 = 1 << 62;

/// Every table's rows in one state backend instance, and its native snapshots.
struct TableState {
    live: Arc<StateBackend>,
    snapshots: TableSnapshots,
    /// When the last snapshot was taken (or the engine opened).
    taken_at: Mutex<Instant>,
}

/// What [`Tables::open`] loaded, for the engine's log and clock.
pub(super) struct Loaded {
    /// The newest epoch any table was written in.
    pub(super) max_epoch: Epoch,
    /// Rows read from the tables' snapshot.
    pub(super) snapshot_rows: usize,
    /// Changelog rows replayed after it.
    pub(super) replayed_rows: usize,
}

/// The engine's tables, an owned part: every table's contents, indexes and changelog, the
/// write backlog between writers and the barrier clock, and the tables' native snapshots
/// with changelog truncation behind them.
///
/// Locks: the map's lock is held only to look a table up; a table's data has its own lock.
/// Nothing but [`Tables::snapshot_all`] holds two tables' locks, taken in relation id order.
pub(super) struct Tables {
    /// The changelogs (the engine's store, shared with the catalog).
    store: Arc<Store>,
    /// The tables' instance and its snapshots (`None` with rows on the heap: then tables
    /// take no snapshots and keep their whole changelog).
    state: Option<TableState>,
    by_id: Mutex<HashMap<RelationId, Arc<Mutex<TableData>>>>,
    /// Rows written since the last epoch took the tables' pending changes (exact at each
    /// [`Tables::take_pending`], which resets it); see [`MAX_BACKLOG_ROWS`].
    backlog: Mutex<usize>,
    /// Signalled when an epoch takes the pending changes (the backlog drops to 0).
    backlog_taken: Condvar,
    /// Time between snapshots, when a table changed.
    snapshot_interval: Duration,
}

impl Tables {
    /// Opens the tables of `catalog`: the tables' instance from its newest snapshot (a
    /// sibling of `root` in `dir/tables`; `None` keeps rows on the heap), then each table's
    /// changelog after the snapshot, then its secondary indexes. Work is proportional to the
    /// changes since the snapshot, not to the tables or their history.
    ///
    /// # Errors
    /// [`Error::State`] for unreadable snapshots or changelogs.
    pub(super) fn open(
        store: Arc<Store>,
        root: Option<&Arc<StateBackend>>,
        dir: &Path,
        catalog: &Catalog,
        snapshot_interval: Duration,
    ) -> Result<(Self, Loaded)> {
        let (state, positions) = match root {
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
        let mut loaded = Loaded {
            max_epoch: Epoch(0),
            snapshot_rows: 0,
            replayed_rows: 0,
        };
        let mut by_id = HashMap::new();
        for def in catalog.relations().filter(|r| r.is_table()) {
            let mut data = TableData::new(def, state.as_ref().map(|s| &s.live))?;
            let position = positions.get(&def.id).copied();
            let (from_snapshot, replayed) = data.restore(&store, def.id, position)?;
            for index in catalog.indexes_on(def.id) {
                let built = SecondaryIndex::build(&index, &data.contents)?;
                data.indexes.push(built);
            }
            loaded.snapshot_rows += from_snapshot;
            loaded.replayed_rows += replayed;
            loaded.max_epoch = loaded.max_epoch.max(data.last_epoch);
            by_id.insert(def.id, Arc::new(Mutex::new(data)));
        }
        let tables = Tables {
            store,
            state,
            by_id: Mutex::new(by_id),
            backlog: Mutex::new(0),
            backlog_taken: Condvar::new(),
            snapshot_interval,
        };
        Ok((tables, loaded))
    }

    /// How many tables there are.
    pub(super) fn len(&self) -> usize {
        lock(&self.by_id).len()
    }

    /// An empty table for `def`, its rows in the tables' instance (not yet added: see
    /// [`Tables::insert`], once the catalog holding it is durable).
    ///
    /// # Errors
    /// Arrow errors when a key column has no row encoding; state errors.
    pub(super) fn new_table(&self, def: &RelationDef) -> Result<TableData> {
        TableData::new(def, self.state.as_ref().map(|s| &s.live))
    }

    /// Adds a created table.
    pub(super) fn insert(&self, id: RelationId, data: TableData) {
        lock(&self.by_id).insert(id, Arc::new(Mutex::new(data)));
    }

    /// Removes a dropped table and deletes its changelog; its rows leave the tables'
    /// instance with the next snapshot. Returns whether `id` was a table.
    ///
    /// # Errors
    /// Store errors deleting the changelog.
    pub(super) fn remove(&self, id: RelationId) -> Result<bool> {
        if lock(&self.by_id).remove(&id).is_none() {
            return Ok(false);
        }
        self.store.delete_changelog(id)?;
        Ok(true)
    }

    /// A table's data, to lock.
    ///
    /// # Errors
    /// `42P01` when no table has relation id `id`.
    pub(super) fn get(&self, id: RelationId) -> Result<Arc<Mutex<TableData>>> {
        lock(&self.by_id)
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::catalog("42P01", format!("table with id {id} does not exist")))
    }

    /// Writes a change to a table in epoch `epoch` (the caller holds the clock, so epochs
    /// are appended in order): validated, appended to its changelog (synced), applied, and
    /// queued for the next epoch. Cost: O(rows of the change × log n). With `offset`, records
    /// it as the table's connector offset in the same RocksDB write batch as the rows (see
    /// [`Store::append_changelog_at`]); with no rows, only the offset is written. `abandon`,
    /// asked once the change is validated and just before it is appended, gives the error to
    /// return instead of writing anything (a canceled statement, a closed connection).
    ///
    /// # Errors
    /// Constraint violations (`23502`, `23505`), `42P01` for an unknown table, and store
    /// errors; `abandon`'s error. Nothing is written then.
    pub(super) fn write_at(
        &self,
        table: RelationId,
        change: ChangeBatch,
        epoch: Epoch,
        offset: Option<u64>,
        abandon: Option<&Abandon<'_>>,
    ) -> Result<usize> {
        let data = self.get(table)?;
        let mut data = lock(&data);
        let staged = data.stage(change)?;
        if let Some(e) = abandon.and_then(|a| a()) {
            return Err(e);
        }
        let entries = staged.entries(epoch);
        self.store.append_changelog_at(table, &entries, offset)?;
        self.land(&mut data, staged, epoch)
    }

    /// Checks `change` as a transaction block's next write to `table`: its lengths fitted
    /// (as a write fits them), then the block's earlier writes to the table (`pending`, their
    /// net change) and it together validated against the table's contents, so a key taken by
    /// an earlier statement of the block is `23505` at once. Writes nothing. Returns the
    /// fitted change and the block's new net change to the table. O((rows of `pending` +
    /// rows of `change`) × log n).
    ///
    /// # Errors
    /// As [`Tables::write_at`]'s checks.
    pub(super) fn check(
        &self,
        table: RelationId,
        pending: Option<&ChangeBatch>,
        change: ChangeBatch,
    ) -> Result<(ChangeBatch, ChangeBatch)> {
        let data = self.get(table)?;
        let data = lock(&data);
        let change = data.fit_lengths(change)?.with_schema(data.schema.clone())?;
        let net = match pending {
            Some(p) => consolidate(&data.schema, &[p.clone(), change.clone()])?,
            None => consolidate(&data.schema, std::slice::from_ref(&change))?,
        };
        // Only the net rows the change can affect are validated against the stored rows
        // (the same rows, or the same key of the primary key or a unique index): the others
        // were validated by their own statements, so a long block does not look every
        // earlier row up again at each statement.
        data.validate(&data.related(&net, &change)?)?;
        Ok((change, net))
    }

    /// The stored rows of `table` whose unique key equals the key of a row of `probe` (rows of
    /// the table's schema): the primary key (`index` `None`) or the unique index of id
    /// `index`. A probe row with a NULL in the key matches nothing (NULLs are distinct in
    /// unique keys). What `INSERT ... ON CONFLICT` reads. O(probe rows × log n + matches).
    ///
    /// # Errors
    /// `42P01` when the table is gone; `42704` when it has no such key; Arrow and RocksDB
    /// errors.
    pub(super) fn rows_with_key(
        &self,
        table: RelationId,
        index: Option<RelationId>,
        probe: &arrow::array::RecordBatch,
    ) -> Result<arrow::array::RecordBatch> {
        let data = self.get(table)?;
        let data = lock(&data);
        let missing =
            || Error::catalog("42704", format!("table \"{}\" has no such key", data.name));
        let (state, columns, prefixes) = match index {
            None => {
                let pk = data.primary_key.as_ref().ok_or_else(missing)?;
                let cols: Vec<_> = pk
                    .columns
                    .iter()
                    .map(|c| probe.column(*c).clone())
                    .collect();
                (
                    &data.contents,
                    pk.columns.clone(),
                    pk.converter.convert_columns(&cols)?,
                )
            }
            Some(id) => {
                let index = data
                    .indexes
                    .iter()
                    .find(|i| i.def.id == id && i.def.unique)
                    .ok_or_else(missing)?;
                let columns = index.def.columns.iter().map(|c| c.column).collect();
                (&index.rows, columns, index.rows.layout().encode_key(probe)?)
            }
        };
        let mut wanted: Vec<&[u8]> = (0..probe.num_rows())
            .filter(|i| {
                columns
                    .iter()
                    .all(|c: &usize| probe.column(*c).is_valid(*i))
            })
            .map(|i| prefixes.row(i).data())
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut keys: Vec<Vec<u8>> = Vec::new();
        state.scan_prefixes_while(&wanted, &mut |_, k, c| {
            for _ in 0..c {
                keys.push(k.to_vec());
            }
            Ok(true)
        })?;
        state
            .layout()
            .decode(keys.iter().map(|k| k.as_slice()), keys.len())
    }

    /// Writes the changes of a committed transaction block, each a table's net change, as
    /// one: every table locked (in id order), every change validated, then all changelog
    /// entries in one synced RocksDB write batch, so a crash keeps all of them or none, and
    /// all in `epoch`, so views see them at one barrier. Returns the rows written.
    ///
    /// # Errors
    /// As [`Tables::write_at`] (`40001` when another session changed a row the block changes
    /// since the block read it, `23505` when it took a key the block inserts); nothing is
    /// written then.
    pub(super) fn write_many(
        &self,
        mut writes: Vec<(RelationId, ChangeBatch)>,
        epoch: Epoch,
    ) -> Result<usize> {
        writes.sort_by_key(|(id, _)| *id);
        let ids: Vec<RelationId> = writes.iter().map(|(id, _)| *id).collect();
        let datas = writes
            .iter()
            .map(|(id, _)| self.get(*id))
            .collect::<Result<Vec<_>>>()?;
        let mut guards: Vec<MutexGuard<'_, TableData>> = datas.iter().map(|d| lock(d)).collect();
        let mut staged = Vec::with_capacity(writes.len());
        for ((_, change), data) in writes.into_iter().zip(guards.iter_mut()) {
            staged.push(data.stage(change)?);
        }
        let entries: Vec<(RelationId, Vec<crate::state::store::ChangelogEntryRef<'_>>)> = ids
            .iter()
            .zip(&staged)
            .map(|(id, s)| (*id, s.entries(epoch)))
            .collect();
        self.store.append_changelogs(&entries)?;
        drop(entries);
        let mut written = 0;
        for (s, data) in staged.into_iter().zip(guards.iter_mut()) {
            written += self.land(data, s, epoch)?;
        }
        Ok(written)
    }

    /// Applies a staged write whose changelog entries are durable: contents, indexes,
    /// sequence numbers, watermark and the epoch's pending changes. Returns the rows written.
    ///
    /// # Errors
    /// State backend errors (the changelog holds the write; a restart replays it).
    fn land(&self, data: &mut TableData, staged: Staged, epoch: Epoch) -> Result<usize> {
        let Staged {
            change,
            parts,
            first,
            max_time,
        } = staged;
        if change.is_empty() {
            return Ok(0);
        }
        if let Some(t) = &mut data.event_time {
            t.note_written(max_time);
        }
        data.next_seq = first + parts.len() as u64;
        data.apply(&change)?;
        let last = data.next_seq - 1;
        data.note_entries(last, epoch, change.len());
        *lock(&self.backlog) += change.len();
        let written = change.len();
        data.pending.push((epoch, change));
        Ok(written)
    }

    /// Blocks while [`MAX_BACKLOG_ROWS`] or more written rows wait for an epoch, calling
    /// `wake` (to wake the barrier clock) every 100 ms, until an epoch takes them or
    /// `stopping` says the engine stops. For writers outside the runtime's workers.
    pub(super) fn wait_for_backlog(&self, wake: impl Fn(), stopping: impl Fn() -> bool) {
        let mut backlog = lock(&self.backlog);
        while *backlog >= MAX_BACKLOG_ROWS && !stopping() {
            wake();
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

    /// Takes every table's pending changes for the epoch being closed (keyed by table),
    /// advances the tables' watermarks past them (returned for the tables that have one), and
    /// releases writers waiting on the backlog.
    pub(super) fn take_pending(
        &self,
    ) -> (
        HashMap<RelationId, Vec<ChangeBatch>>,
        HashMap<RelationId, Watermarks>,
    ) {
        let mut changes: HashMap<RelationId, Vec<ChangeBatch>> = HashMap::new();
        let mut watermarks = HashMap::new();
        for (id, t) in lock(&self.by_id).iter() {
            let mut t = lock(t);
            if !t.pending.is_empty() {
                changes.insert(*id, t.pending.drain(..).map(|(_, c)| c).collect());
            }
            if let Some(e) = &mut t.event_time {
                e.close_epoch();
            }
            if let Some(w) = t.watermarks() {
                watermarks.insert(*id, w);
            }
        }
        *lock(&self.backlog) = 0;
        self.backlog_taken.notify_all();
        (changes, watermarks)
    }

    /// The watermark of each table that has one, as of the last closed epoch (for a
    /// recovery's replay up to it).
    pub(super) fn watermarks(&self) -> HashMap<RelationId, Watermarks> {
        lock(&self.by_id)
            .iter()
            .filter_map(|(id, t)| lock(t).watermarks().map(|w| (*id, w)))
            .collect()
    }

    /// `rows` (rows of table `id`'s schema, to insert) without those later than the table's
    /// watermark, counted in its `late_rows` as a write counts them: what an `INSERT` reports
    /// (its count, `RETURNING`) before it writes. Unchanged for a table without a watermark.
    /// O(rows).
    ///
    /// # Errors
    /// `42P01` when the table is gone; Arrow errors.
    pub(super) fn drop_late_rows(
        &self,
        id: RelationId,
        rows: arrow::array::RecordBatch,
    ) -> Result<arrow::array::RecordBatch> {
        let data = self.get(id)?;
        let mut data = lock(&data);
        let Some(t) = &mut data.event_time else {
            return Ok(rows);
        };
        let (kept, _) = t.drop_late(ChangeBatch::inserts(rows))?;
        Ok(kept.batch)
    }

    /// (watermark as a value of the column's type, late rows) of table `id`, when it has a
    /// watermark clause.
    pub(super) fn event_time(&self, id: RelationId) -> Option<(Option<ScalarValue>, u64)> {
        let t = self.get(id).ok()?;
        let t = lock(&t);
        let late = t.event_time.as_ref()?.late_rows;
        let value = t
            .watermarks()
            .and_then(|w| w.into_iter().next().map(|(_, v)| v));
        Some((value, late))
    }

    /// A table's contents as of the last processed epoch, to backfill a view: its current
    /// rows (an O(1) snapshot) minus the pending changes of the open epoch.
    ///
    /// # Errors
    /// `42P01` for an unknown table.
    pub(super) fn processed_contents(&self, table: RelationId) -> Result<BackfillSource> {
        let t = self.get(table)?;
        let t = lock(&t);
        Ok(t.processed_contents(table))
    }

    /// A table's contents as of epoch `at`, to backfill a view: its current rows (an O(1)
    /// snapshot, taken under the table's lock with the changelog read) and the negations of
    /// the changelog entries after `at`, newest first (the changelog before `at` may be
    /// truncated; after it is kept, see `Dataflow::changelog_needed_after`).
    ///
    /// # Errors
    /// `42P01` for an unknown table; changelog read errors.
    pub(super) fn contents_at(&self, table: RelationId, at: Epoch) -> Result<BackfillSource> {
        let t = self.get(table)?;
        let t = lock(&t);
        let rows = t.contents.snapshot();
        let later = ChangelogSource::new(&self.store, table)
            .read_all(ChangelogOffset(at), ChangelogOffset(Epoch(u64::MAX)))?;
        // The watermark as of `at` is not kept: with no writes after `at` it is the current
        // one; otherwise the replay after `at` brings the current one (a window then closes
        // later than it first did, with the same rows).
        let watermarks = if later.is_empty() {
            t.watermarks().unwrap_or_default()
        } else {
            Vec::new()
        };
        Ok(BackfillSource {
            id: table,
            rows,
            after: later.into_iter().rev().map(|c| c.negate()).collect(),
            watermarks,
        })
    }

    /// A table's changes of epochs `(after, upto]` summed into one change batch, with the
    /// number of rows read. From the beginning (`after` = 0) that is the table's contents as
    /// of `upto`: its current contents minus the changelog entries after `upto` (the
    /// changelog before may be truncated). Otherwise the changelog entries themselves, which
    /// truncation keeps (see `Dataflow::changelog_needed_after`).
    ///
    /// # Errors
    /// `42P01` for an unknown table; changelog read errors.
    pub(super) fn changes_between(
        &self,
        table: RelationId,
        after: Epoch,
        upto: Epoch,
    ) -> Result<(ChangeBatch, u64)> {
        let t = self.get(table)?;
        if after == Epoch(0) {
            // Under the table's lock, so no write lands between the two reads.
            let t = lock(&t);
            let mut parts = vec![t.contents.to_change()?];
            let later = ChangelogSource::new(&self.store, table)
                .read_all(ChangelogOffset(upto), ChangelogOffset(Epoch(u64::MAX)))?;
            let mut rows = parts[0].len() as u64;
            for change in later {
                rows += change.len() as u64;
                parts.push(change.negate());
            }
            return Ok((consolidate(&t.schema, &parts)?, rows));
        }
        let schema = lock(&t).schema.clone();
        let parts = ChangelogSource::new(&self.store, table)
            .read_all(ChangelogOffset(after), ChangelogOffset(upto))?;
        let rows: u64 = parts.iter().map(|c| c.len() as u64).sum();
        Ok((consolidate(&schema, &parts)?, rows))
    }

    /// Bytes of a table's live changelog entries (keys and values), and the newest changelog
    /// sequence number its durable snapshot holds (0: none). Reads the whole changelog.
    ///
    /// # Errors
    /// `42P01` for an unknown table; store errors.
    pub(super) fn storage(&self, id: RelationId) -> Result<(u64, u64)> {
        let t = self.get(id)?;
        let snapshot_seq = lock(&t).snapshot_seq;
        Ok((self.store.changelog_bytes(id)?, snapshot_seq))
    }

    /// After epoch `processed`: takes a snapshot of the tables' instance if one is due (when
    /// a table changed and `force`, the interval passed, or a table changed by
    /// [`TABLE_SNAPSHOT_MAX_ROWS`] rows), then truncates each table's changelog through what
    /// the snapshot holds of epochs `<= keep_after` (what no recovery can need). The
    /// snapshot is taken with every table locked, so that it holds each table exactly at its
    /// recorded position; it costs a flush and hard links. A failure is logged and retried
    /// at a later barrier: the changelog is kept until a snapshot succeeds.
    pub(super) fn snapshot_all(&self, keep_after: Epoch, force: bool) {
        let mut tables: Vec<(RelationId, Arc<Mutex<TableData>>)> = lock(&self.by_id)
            .iter()
            .map(|(id, t)| (*id, Arc::clone(t)))
            .collect();
        tables.sort_by_key(|(id, _)| *id);
        if let Some(ts) = &self.state {
            let (mut changed, mut most) = (0usize, 0usize);
            for (_, t) in &tables {
                let rows = lock(t).unsnapshotted_rows;
                changed += rows;
                most = most.max(rows);
            }
            let due = changed > 0
                && (force
                    || lock(&ts.taken_at).elapsed() >= self.snapshot_interval
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
}

impl Dataflow {
    /// The newest epoch through which no recovery can need a table's changelog: every job
    /// recovers either from a checkpoint (and replays the changelog after its epoch; every
    /// retained checkpoint counts) or from its inputs' contents (no changelog), and no
    /// further than epoch `processed`. A job with checkpointing on but no completed
    /// checkpoint yet holds the whole changelog.
    pub(super) fn changelog_needed_after(&self, processed: Epoch) -> Epoch {
        self.jobs
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
}

/// The engine's table operations, over its [`Tables`].
impl Engine {
    /// The latest acknowledged contents of a table (read-your-writes) and its indexes,
    /// frozen together in O(1).
    ///
    /// # Errors
    /// `42P01` when the table does not exist.
    pub fn table_snapshot(&self, id: RelationId) -> Result<IndexedSnapshot> {
        let t = self.tables.get(id)?;
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
        if let Ok(t) = self.tables.get(id) {
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
    /// `42P01` when the table does not exist; store errors.
    pub fn table_storage(&self, id: RelationId) -> Result<(u64, u64)> {
        self.tables.storage(id)
    }

    /// Writes a change to a table: validated, appended to its changelog (synced), applied.
    /// Returns once the write is durable; views see it after the next barrier. Waits first
    /// while the write backlog is full (see [`MAX_BACKLOG_ROWS`]). Returns the rows written:
    /// a table with a watermark drops late rows (see [`EventTime`]).
    ///
    /// # Errors
    /// Constraint violations (`23502`, `23505`) and store errors; nothing is written then.
    /// `0A000` for a retraction (DELETE, UPDATE) of an append-only table. `57P01` once the
    /// engine is shutting down.
    pub fn write(&self, table: RelationId, change: ChangeBatch) -> Result<usize> {
        self.write_unless(table, change, &|| None)
    }

    /// [`Engine::write`] for a statement that may be stopped while it writes: `abandon` is
    /// asked after the backlog wait and again once the change is validated, just before it
    /// is appended to the changelog (the point after which the write lands whole); when it
    /// gives an error, nothing is written and that error is returned. A canceled `INSERT`,
    /// or one whose connection closed at shutdown, so stops without a write to undo.
    ///
    /// # Errors
    /// As [`Engine::write`]; `abandon`'s error.
    pub fn write_unless(
        &self,
        table: RelationId,
        change: ChangeBatch,
        abandon: &Abandon<'_>,
    ) -> Result<usize> {
        self.check_running()?;
        self.check_writable(table)?;
        if change.is_empty() {
            return Ok(0);
        }
        if change.weights.iter().any(|w| w.is_some_and(|w| w < 0)) {
            self.check_retractable(table)?;
        }
        self.tables
            .wait_for_backlog(|| self.clock.request_tick(), || self.is_stopping());
        if let Some(e) = abandon() {
            return Err(e);
        }
        let open = self.clock.open();
        self.tables
            .write_at(table, change, *open, None, Some(abandon))
    }

    /// Checks a transaction block's write before the block commits (see [`Tables::check`]):
    /// the table writable, a retraction allowed, the change valid on top of the block's
    /// earlier writes to the table (`pending`, their net change). Writes nothing; returns
    /// the change with its lengths fitted, as it is to be written at `COMMIT`, and the
    /// block's new net change to the table.
    ///
    /// # Errors
    /// As [`Engine::write`].
    pub fn check_write(
        &self,
        table: RelationId,
        pending: Option<&ChangeBatch>,
        change: ChangeBatch,
    ) -> Result<(ChangeBatch, ChangeBatch)> {
        self.check_running()?;
        self.check_writable(table)?;
        if change.weights.iter().any(|w| w.is_some_and(|w| w < 0)) {
            self.check_retractable(table)?;
        }
        self.tables.check(table, pending, change)
    }

    /// Writes a committed transaction block's changes, one net change per table, as one
    /// (see [`Tables::write_many`]): durable together, seen by views at one epoch. Returns
    /// the rows written.
    ///
    /// # Errors
    /// As [`Engine::write`]; `40001` when another session dropped one of the tables; nothing
    /// is written then.
    pub fn write_many(&self, writes: Vec<(RelationId, ChangeBatch)>) -> Result<usize> {
        self.check_running()?;
        let writes: Vec<(RelationId, ChangeBatch)> =
            writes.into_iter().filter(|(_, c)| !c.is_empty()).collect();
        {
            let catalog = lock(&self.catalog);
            if writes.iter().any(|(id, _)| catalog.get(*id).is_none()) {
                return Err(Error::data(
                    "40001",
                    "could not serialize access: a table this transaction writes was dropped \
                     by another session; the transaction is rolled back",
                ));
            }
        }
        if writes.is_empty() {
            return Ok(0);
        }
        for (id, _) in &writes {
            self.check_writable(*id)?;
        }
        self.tables
            .wait_for_backlog(|| self.clock.request_tick(), || self.is_stopping());
        let open = self.clock.open();
        self.tables.write_many(writes, *open)
    }

    /// The committed rows of `table` whose primary key (`index` `None`) or unique index
    /// `index` equals that of a row of `probe` (see [`Tables::rows_with_key`]).
    ///
    /// # Errors
    /// As [`Tables::rows_with_key`].
    pub fn rows_with_key(
        &self,
        table: RelationId,
        index: Option<RelationId>,
        probe: &arrow::array::RecordBatch,
    ) -> Result<arrow::array::RecordBatch> {
        self.tables.rows_with_key(table, index, probe)
    }

    /// `0A000` when table `id` is append-only (`DELETE` and `UPDATE` retract rows).
    ///
    /// # Errors
    /// As said.
    pub fn check_retractable(&self, id: RelationId) -> Result<()> {
        let catalog = lock(&self.catalog);
        if let Some(def) = catalog.get(id)
            && def.time.append_only
        {
            return Err(Error::not_supported(format!(
                "cannot delete or update rows of append-only table \"{}\"",
                def.name
            )));
        }
        Ok(())
    }

    /// `0A000` when table `id` is fed by a connector (statements cannot write to it).
    ///
    /// # Errors
    /// As said.
    pub fn check_writable(&self, id: RelationId) -> Result<()> {
        let catalog = lock(&self.catalog);
        if let Some(def) = catalog.get(id)
            && let Some(c) = &def.connector
        {
            return Err(Error::not_supported(format!(
                "cannot write to table \"{}\": it is fed by the {} connector",
                def.name, c.connector
            )));
        }
        Ok(())
    }

    /// The rows of an `INSERT` into table `id` that are not late (see [`Tables::drop_late_rows`]):
    /// rows later than the table's watermark are dropped and counted now, so the statement's
    /// count and `RETURNING` show only the rows it writes.
    ///
    /// # Errors
    /// `42P01` when the table is gone; Arrow errors.
    pub fn drop_late_rows(
        &self,
        id: RelationId,
        rows: arrow::array::RecordBatch,
    ) -> Result<arrow::array::RecordBatch> {
        self.tables.drop_late_rows(id, rows)
    }

    /// The watermarks of every table with a `WATERMARK FOR` clause and of every view whose
    /// output carries one (`weir_catalog.watermarks`), tables first, each by relation id.
    pub fn watermark_infos(&self) -> Vec<WatermarkInfo> {
        let catalog = self.catalog();
        let mut out = Vec::new();
        for def in catalog.relations().filter(|d| d.is_table()) {
            let Some(w) = &def.time.watermark else {
                continue;
            };
            let (value, late) = self.tables.event_time(def.id).unwrap_or((None, 0));
            out.push(WatermarkInfo {
                relation: def.name.clone(),
                kind: def.kind_name(),
                column: def.schema.field(w.column).name().clone(),
                watermark: value,
                late_rows: Some(late),
                definition: Some(w.text.clone()),
            });
        }
        let df = lock(&self.dataflow);
        for def in catalog.relations().filter(|d| !d.is_table()) {
            let Some(job) = df.jobs.get(&def.id) else {
                continue;
            };
            for &c in &def.time.watermark_columns {
                out.push(WatermarkInfo {
                    relation: def.name.clone(),
                    kind: def.kind_name(),
                    column: def.schema.field(c).name().clone(),
                    watermark: crate::stream::watermark_of(&job.watermarks, c).cloned(),
                    late_rows: None,
                    definition: None,
                });
            }
        }
        out
    }

    /// Takes a snapshot of the tables now if any table changed since the last one (as at
    /// shutdown), and truncates their changelogs behind it. Errors are logged.
    pub fn snapshot_tables_now(&self) {
        let df = lock(&self.dataflow);
        self.snapshot_tables(&df, self.visible().epoch, true);
    }

    /// After epoch `processed`: the tables' snapshot if due, and changelog truncation behind
    /// what every job's recovery may need (see [`Tables::snapshot_all`]).
    pub(super) fn snapshot_tables(&self, df: &Dataflow, processed: Epoch, force: bool) {
        self.tables
            .snapshot_all(df.changelog_needed_after(processed), force);
    }
}

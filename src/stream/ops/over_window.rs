//! `OverWindow`: window functions (`OVER (PARTITION BY ... ORDER BY ... [frame])`) and Top-N
//! (`ORDER BY ... LIMIT n [OFFSET m]`, and `row_number()/rank()/dense_rank() ... <= n` per
//! partition), maintained partition by partition with retractions.
//!
//! State: one ordered state table of the input rows, keyed by (partition values, order values,
//! then the whole row), so a partition is one key prefix and its rows come out of a prefix scan
//! already in window order (ties in the declared order broken by the rest of the row, which
//! makes the result deterministic). An epoch that touches a partition reads the partition
//! before and after applying its changes, evaluates the window functions over both with
//! DataFusion's window expressions (the same code that answers a batch `SELECT`, so frames,
//! peers and NULL ordering follow it), and emits the difference.
//!
//! Cost per epoch: O(rows of the touched partitions) without a limit. With a limit (a Top-N)
//! only the leading rows of a touched partition are read: `offset + n` for `LIMIT`, and for a
//! ranking function compared `<= n`, rows until the rank passes `n` (doubling reads), so a
//! Top-N costs O(n + log size) per touched partition however large the partition grows. A
//! deleted row of the top is replaced by the next one from state. Session windows
//! ([`WindowOutput::Sessions`]) read only the sessions within the gap of a change: O(rows of
//! those sessions + log size) per changed time.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt64Type};
use arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::window::WindowExpr;

use crate::common::ChangeBatch;
use crate::error::Result;
use crate::state::StateTable;
use crate::state::table::{KeyLayout, batch_from_columns, consolidate, prefix_successor};
use crate::stream::{EpochContext, Operator, StateVisitor, input_path, state_name};

/// Which rows of each partition the operator emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowOutput {
    /// Every row, with the window functions' values appended (`rank_limit`: a filter above
    /// keeps only rows whose window column `.0` (a `row_number`, `rank` or `dense_rank`
    /// output, by index among the window expressions) is at most `.1`; rows past it may be
    /// left out, and are, so only a partition's leading rows are read).
    All {
        /// `(window expression index, largest kept value)`.
        rank_limit: Option<(usize, u64)>,
    },
    /// `ORDER BY ... LIMIT fetch OFFSET skip`: the rows at positions `skip..skip + fetch`
    /// (`fetch` `None`: to the end) of each partition, no columns added.
    Slice {
        /// Rows skipped (OFFSET).
        skip: usize,
        /// Rows kept after them (LIMIT); `None` for no limit.
        fetch: Option<usize>,
    },
    /// Every row with its session's bounds: the window expressions are all
    /// [`weir_session_start`/`weir_session_end`](crate::sql::functions::session) with this gap
    /// (nanoseconds), ordered by one ascending timestamp. A change reads and re-evaluates
    /// only the sessions within `gap` of its rows' times, not the whole partition.
    ///
    /// With `on_close` (a view that emits on window close, over an append-only input whose
    /// time column carries a watermark) a session's rows are emitted once, when the watermark
    /// passes its end (they can no longer change), and leave the state then; the output
    /// carries the watermark on the session-end column.
    Sessions {
        /// The session gap in nanoseconds (positive).
        gap_ns: i64,
        /// The output column of the session's end, if the window computes it.
        end: Option<usize>,
        /// Emit closed sessions only, and forget them.
        on_close: bool,
    },
}

/// One `ORDER BY` key of the window (or of a Top-N): the same shape as an aggregate call's.
pub use crate::stream::ops::hash_agg::AggOrder as WindowOrder;

/// Window functions or a Top-N over partitions of the input (see the module docs).
///
/// Output: the input columns, then one column per window expression (none for a slice).
/// State table `over_window.rows`: columns `__part_i` (partition values), `__order_j` (order
/// values), then the input columns; keyed in that order, order columns by their options.
pub struct OverWindow {
    /// The input operator.
    pub input: Box<dyn Operator>,
    partition: Vec<Arc<dyn PhysicalExpr>>,
    order: Vec<WindowOrder>,
    window: Vec<Arc<dyn WindowExpr>>,
    output: WindowOutput,
    schema: SchemaRef,
    part_converter: Option<RowConverter>,
    rows: StateTable,
    /// Number of leading state columns before the input's (partition + order values).
    lead: usize,
    /// For [`WindowOutput::Sessions`]: the time column's key encoding and the gap in its unit.
    sessions: Option<SessionKeys>,
    /// For sessions emitted on close: state table `over_window.session_times`, columns
    /// `__time` (the time column's type) and `__part` (the partition's key bytes, binary),
    /// keyed by both, the count the stored rows at that time in that partition: the open
    /// rows in time order, to find the sessions a watermark closes without a full scan.
    times: Option<StateTable>,
    /// For sessions emitted on close: the input column of the time (whose watermark closes
    /// sessions).
    time_column: Option<usize>,
}

/// State keys `[lower, upper)`; no upper bound when `None`.
type KeyBounds = (Vec<u8>, Option<Vec<u8>>);

/// How a session window finds the rows near a time: the time's part of the state key.
struct SessionKeys {
    /// The row encoding of the time column, with its sort options (the state key's).
    converter: RowConverter,
    /// The time column's type.
    data_type: DataType,
    /// Bytes of one encoded (non-NULL) time.
    width: usize,
    /// The gap in the time's unit.
    gap: i64,
}

impl SessionKeys {
    fn new(order: &WindowOrder, gap_ns: i64) -> Result<Self> {
        let DataType::Timestamp(unit, _) = &order.data_type else {
            return Err(crate::error::Error::Internal(format!(
                "session windows over {}",
                order.data_type
            )));
        };
        let converter = RowConverter::new(vec![SortField::new_with_options(
            order.data_type.clone(),
            order.options,
        )])?;
        let gap = (gap_ns / crate::sql::functions::session::unit_ns(*unit)).max(1);
        let mut keys = SessionKeys {
            converter,
            data_type: order.data_type.clone(),
            width: 0,
            gap,
        };
        keys.width = keys.encode(0)?.len();
        Ok(keys)
    }

    /// The key encoding of time `t` (in the column's unit).
    fn encode(&self, t: i64) -> Result<Vec<u8>> {
        let raw: ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![t]));
        let value = arrow::compute::cast(&raw, &self.data_type)?;
        let rows = self.converter.convert_columns(&[value])?;
        Ok(rows.row(0).data().to_vec())
    }

    /// The time in a state key whose partition prefix is `prefix_len` bytes long; `None` for
    /// a NULL time.
    fn decode(&self, key: &[u8], prefix_len: usize) -> Result<Option<i64>> {
        let Some(bytes) = key.get(prefix_len..prefix_len + self.width) else {
            return Ok(None);
        };
        let parser = self.converter.parser();
        let cols = self.converter.convert_rows([parser.parse(bytes)])?;
        let raw = arrow::compute::cast(&cols[0], &DataType::Int64)?;
        let raw = raw.as_primitive::<arrow::datatypes::Int64Type>();
        Ok(raw.is_valid(0).then(|| raw.value(0)))
    }

    /// The key bounds `[lower, upper)` of partition `prefix`'s rows with times in `lo..=hi`.
    fn bounds(&self, prefix: &[u8], lo: i64, hi: i64) -> Result<KeyBounds> {
        let mut lower = prefix.to_vec();
        lower.extend(self.encode(lo)?);
        let mut upper = prefix.to_vec();
        upper.extend(self.encode(hi)?);
        Ok((lower, prefix_successor(&upper)))
    }
}

impl OverWindow {
    /// Builds the operator. `partition_types` are the partition expressions' types; every
    /// window expression must share `partition` and `order`; `schema` is the input schema
    /// followed by one field per window expression (nothing added for a slice).
    ///
    /// # Errors
    /// Arrow errors when a partition or order type has no row encoding.
    pub fn try_new(
        input: Box<dyn Operator>,
        partition: Vec<Arc<dyn PhysicalExpr>>,
        partition_types: Vec<DataType>,
        order: Vec<WindowOrder>,
        window: Vec<Arc<dyn WindowExpr>>,
        output: WindowOutput,
        schema: SchemaRef,
    ) -> Result<Self> {
        let input_schema = input.schema();
        let part_converter = if partition.is_empty() {
            None
        } else {
            Some(RowConverter::new(
                partition_types
                    .iter()
                    .cloned()
                    .map(SortField::new)
                    .collect(),
            )?)
        };
        let mut fields = Vec::new();
        let mut key = Vec::new();
        for (i, t) in partition_types.iter().enumerate() {
            key.push((fields.len(), SortOptions::default()));
            fields.push(Field::new(format!("__part_{i}"), t.clone(), true));
        }
        for (j, o) in order.iter().enumerate() {
            key.push((fields.len(), o.options));
            fields.push(Field::new(
                format!("__order_{j}"),
                o.data_type.clone(),
                true,
            ));
        }
        let lead = fields.len();
        fields.extend(input_schema.fields().iter().map(|f| f.as_ref().clone()));
        let layout = KeyLayout::with_options(Arc::new(Schema::new(fields)), &key)?;
        let sessions = match (output, order.as_slice()) {
            (WindowOutput::Sessions { gap_ns, .. }, [o]) => Some(SessionKeys::new(o, gap_ns)?),
            _ => None,
        };
        let (times, time_column) = match (output, order.as_slice()) {
            (WindowOutput::Sessions { on_close: true, .. }, [o]) => {
                let any: &dyn PhysicalExpr = o.expr.as_ref();
                let column = any
                    .downcast_ref::<datafusion::physical_expr::expressions::Column>()
                    .map(|c| c.index())
                    .ok_or_else(|| {
                        crate::error::Error::Internal(format!(
                            "session windows emitted on close order by a column, not {}",
                            o.expr
                        ))
                    })?;
                let schema = Arc::new(Schema::new(vec![
                    Field::new("__time", o.data_type.clone(), true),
                    Field::new("__part", DataType::Binary, true),
                ]));
                let layout = KeyLayout::with_options(
                    schema,
                    &[(0, SortOptions::default()), (1, SortOptions::default())],
                )?;
                (
                    Some(StateTable::with_layout(Arc::new(layout))),
                    Some(column),
                )
            }
            _ => (None, None),
        };
        Ok(OverWindow {
            input,
            partition,
            order,
            window,
            output,
            schema,
            part_converter,
            rows: StateTable::with_layout(Arc::new(layout)),
            lead,
            sessions,
            times,
            time_column,
        })
    }

    /// The state rows of a change (partition and order values, then the row) and each row's
    /// partition key prefix.
    fn state_rows(&self, change: &ChangeBatch) -> Result<(ChangeBatch, Vec<Box<[u8]>>)> {
        let n = change.len();
        let batch = &change.batch;
        let parts = self
            .partition
            .iter()
            .map(|e| Ok(e.evaluate(batch)?.into_array(n)?))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let keys: Vec<Box<[u8]>> = match &self.part_converter {
            Some(conv) => {
                let rows = conv.convert_columns(&parts)?;
                (0..n).map(|i| Box::from(rows.row(i).data())).collect()
            }
            None => vec![Box::from(&[][..]); n],
        };
        let mut columns = parts;
        for o in &self.order {
            columns.push(o.expr.evaluate(batch)?.into_array(n)?);
        }
        columns.extend(batch.columns().iter().cloned());
        let rows = batch_from_columns(self.rows.schema(), columns, n)?;
        Ok((ChangeBatch::new(rows, change.weights.clone())?, keys))
    }

    /// The first `limit` rows (duplicates repeated; all when `None`) of the partition with
    /// key prefix `prefix`, in window order, as a batch of the input schema; and whether the
    /// partition has more.
    fn read(&self, prefix: &[u8], limit: Option<usize>) -> Result<(RecordBatch, bool)> {
        let upper = prefix_successor(prefix);
        self.read_range(prefix, upper.as_deref(), limit)
    }

    /// As [`OverWindow::read`], of the rows with keys in `[lower, upper)`.
    fn read_range(
        &self,
        lower: &[u8],
        upper: Option<&[u8]>,
        limit: Option<usize>,
    ) -> Result<(RecordBatch, bool)> {
        let (all, more) = self.read_state(lower, upper, limit)?;
        let input = self.input.schema();
        let batch =
            batch_from_columns(&input, all.columns()[self.lead..].to_vec(), all.num_rows())?;
        Ok((batch, more))
    }

    /// The first `limit` state rows (of the state schema, each repeated by its count; all
    /// when `None`) with keys in `[lower, upper)`, and whether there are more.
    fn read_state(
        &self,
        lower: &[u8],
        upper: Option<&[u8]>,
        limit: Option<usize>,
    ) -> Result<(RecordBatch, bool)> {
        let mut keys: Vec<Box<[u8]>> = Vec::new();
        let mut more = false;
        self.rows.scan_range_while(lower, upper, &mut |k, c| {
            if limit.is_some_and(|l| keys.len() >= l) {
                more = true;
                return Ok(false);
            }
            for _ in 0..c.max(0) {
                if limit.is_some_and(|l| keys.len() >= l) {
                    more = true;
                    break;
                }
                keys.push(Box::from(k));
            }
            Ok(!more)
        })?;
        let all = self
            .rows
            .layout()
            .decode(keys.iter().map(|k| k.as_ref()), keys.len())?;
        Ok((all, more))
    }

    /// The window functions' values over one partition's rows (in window order).
    fn evaluate(&self, rows: &RecordBatch) -> Result<Vec<ArrayRef>> {
        let n = rows.num_rows();
        let offset = self.input.schema().fields().len();
        self.window
            .iter()
            .enumerate()
            .map(|(j, w)| {
                let target = self.schema.field(offset + j).data_type();
                let values = if n == 0 {
                    arrow::array::new_empty_array(target)
                } else {
                    w.evaluate(rows)?
                };
                Ok(if values.data_type() == target {
                    values
                } else {
                    arrow::compute::cast(&values, target)?
                })
            })
            .collect()
    }

    /// The output rows of the partition with key prefix `prefix` as the state now holds it.
    fn partition_output(&self, prefix: &[u8]) -> Result<RecordBatch> {
        match self.output {
            WindowOutput::Slice { skip, fetch } => {
                let limit = fetch.map(|f| skip.saturating_add(f));
                let (rows, _) = self.read(prefix, limit)?;
                let start = skip.min(rows.num_rows());
                Ok(rows.slice(start, rows.num_rows() - start))
            }
            WindowOutput::All { rank_limit: None } | WindowOutput::Sessions { .. } => {
                let (rows, _) = self.read(prefix, None)?;
                self.with_window_columns(&rows)
            }
            WindowOutput::All {
                rank_limit: Some((j, max)),
            } => {
                // Ranks never decrease along the partition and a row's rank depends only on
                // the rows before it: read more until a row ranks past `max`.
                let mut limit = usize::try_from(max).unwrap_or(usize::MAX).saturating_add(1);
                loop {
                    let (rows, more) = self.read(prefix, Some(limit))?;
                    let out = self.with_window_columns(&rows)?;
                    let offset = self.input.schema().fields().len();
                    let ranks = out.column(offset + j);
                    let last = ranks.len().checked_sub(1);
                    let past = match last {
                        Some(l) => rank_value(ranks, l)? > max,
                        None => true,
                    };
                    if !more || past {
                        return Ok(out);
                    }
                    limit = limit.saturating_mul(2);
                }
            }
        }
    }

    /// The key ranges `[lower, upper)` a session window re-evaluates for changes at `times`
    /// of the partitions `touched` (state not yet changed): per partition, the sessions
    /// within the gap of a changed time, merged where they come within the gap of each other.
    /// Outside them no row's session changes: a row changes a session only through the rows
    /// chained to it by steps of at most the gap, and the search stops where the gap is
    /// wider. A NULL time (no session) takes the whole partition.
    fn session_ranges(
        &self,
        touched: &[Box<[u8]>],
        times: &[Vec<Option<i64>>],
    ) -> Result<Vec<KeyBounds>> {
        let Some(sk) = &self.sessions else {
            return Ok(Vec::new());
        };
        let mut ranges = Vec::new();
        for (prefix, times) in touched.iter().zip(times) {
            if times.iter().any(Option::is_none) {
                ranges.push((prefix.to_vec(), prefix_successor(prefix)));
                continue;
            }
            let mut ts: Vec<i64> = times.iter().flatten().copied().collect();
            ts.sort_unstable();
            ts.dedup();
            let mut found: Vec<(i64, i64)> = Vec::new();
            for t in ts {
                if found.last().is_some_and(|(lo, hi)| *lo <= t && t <= *hi) {
                    continue;
                }
                found.push(self.session_around(sk, prefix, t)?);
            }
            found.sort_unstable();
            let mut merged: Vec<(i64, i64)> = Vec::new();
            for (lo, hi) in found {
                match merged.last_mut() {
                    Some((_, h)) if lo.saturating_sub(*h) <= sk.gap => *h = (*h).max(hi),
                    _ => merged.push((lo, hi)),
                }
            }
            for (lo, hi) in merged {
                ranges.push(sk.bounds(prefix, lo, hi)?);
            }
        }
        Ok(ranges)
    }

    /// The times `(first, last)` spanned by partition `prefix`'s stored rows chained to time
    /// `t` by steps of at most the gap (`(t, t)` when none is within the gap). One seek per
    /// step to the left, and a read of the rows within the gap per step to the right.
    fn session_around(&self, sk: &SessionKeys, prefix: &[u8], t: i64) -> Result<(i64, i64)> {
        let (mut lo, mut hi) = (t, t);
        // Leftwards: the first row in [lo - gap, lo).
        while lo > i64::MIN {
            let (a, b) = sk.bounds(prefix, lo.saturating_sub(sk.gap), lo - 1)?;
            let mut first = None;
            self.rows.scan_range_while(&a, b.as_deref(), &mut |k, c| {
                if c > 0 {
                    first = Some(k.to_vec());
                    return Ok(false);
                }
                Ok(true)
            })?;
            match first.map(|k| sk.decode(&k, prefix.len())).transpose()? {
                Some(Some(m)) if m < lo => lo = m,
                _ => break,
            }
        }
        // Rightwards: the last row in (hi, hi + gap].
        while hi < i64::MAX {
            let (a, b) = sk.bounds(prefix, hi + 1, hi.saturating_add(sk.gap))?;
            let mut last = None;
            self.rows.scan_range_while(&a, b.as_deref(), &mut |k, c| {
                if c > 0 {
                    last = Some(k.to_vec());
                }
                Ok(true)
            })?;
            match last.map(|k| sk.decode(&k, prefix.len())).transpose()? {
                Some(Some(m)) if m > hi => hi = m,
                _ => break,
            }
        }
        Ok((lo, hi))
    }

    /// Sessions emitted on close: stores the epoch's rows (`changes`, in the state's
    /// schema; the input only inserts), then emits and forgets every session the input's
    /// watermark on the time has passed: those whose end (last time plus the gap) is below
    /// it, which no row still to come (at or above the watermark) can join. Candidates are
    /// the open rows more than a gap below the watermark, read in time order from the
    /// `session_times` table: O(those rows + emitted rows) per epoch.
    fn close_sessions(
        &mut self,
        ctx: &EpochContext,
        changes: &[ChangeBatch],
    ) -> Result<Vec<ChangeBatch>> {
        let time_at = self.partition.len();
        for change in changes {
            self.rows.apply(change)?;
            let times = self.session_times(&change.batch, time_at)?;
            if let Some(table) = &mut self.times {
                table.apply(&ChangeBatch::new(times, change.weights.clone())?)?;
            }
        }
        let (Some(sk), Some(column)) = (&self.sessions, self.time_column) else {
            return Ok(vec![]);
        };
        let watermark = self.input.watermarks(ctx);
        let Some(w) = crate::stream::watermark_of(&watermark, column) else {
            return Ok(vec![]);
        };
        let w = match arrow::compute::cast(&w.to_array()?, &DataType::Int64)?
            .as_primitive_opt::<arrow::datatypes::Int64Type>()
        {
            Some(a) if a.is_valid(0) => a.value(0),
            _ => return Ok(vec![]),
        };
        // The open rows whose time is more than a gap below the watermark, per partition in
        // time order.
        let limit = w.saturating_sub(sk.gap);
        let mut candidates: Vec<(Box<[u8]>, Vec<i64>)> = Vec::new();
        let mut index: HashMap<Box<[u8]>, usize> = HashMap::new();
        if let Some(table) = &self.times {
            let upper = sk.encode(limit)?;
            let mut keys: Vec<Box<[u8]>> = Vec::new();
            table.scan_range_while(&[], Some(&upper), &mut |k, c| {
                if c > 0 {
                    keys.push(Box::from(k));
                }
                Ok(true)
            })?;
            let decoded = table
                .layout()
                .decode(keys.iter().map(|k| k.as_ref()), keys.len())?;
            let at = arrow::compute::cast(decoded.column(0), &DataType::Int64)?;
            let at = at.as_primitive::<arrow::datatypes::Int64Type>();
            let parts = decoded.column(1).as_binary::<i32>();
            for i in 0..decoded.num_rows() {
                if at.is_null(i) {
                    continue;
                }
                let part: Box<[u8]> = Box::from(parts.value(i));
                let slot = *index.entry(part.clone()).or_insert_with(|| {
                    candidates.push((part, Vec::new()));
                    candidates.len() - 1
                });
                candidates[slot].1.push(at.value(i));
            }
        }
        let mut out = Vec::new();
        for (prefix, times) in &candidates {
            let mut done: Option<i64> = None;
            for &t in times {
                if done.is_some_and(|hi| t <= hi) {
                    continue;
                }
                let (lo, hi) = self.session_around(sk, prefix, t)?;
                if hi.saturating_add(sk.gap) >= w {
                    // Still open; every later candidate of the partition is inside it.
                    break;
                }
                let (lower, upper) = sk.bounds(prefix, lo, hi)?;
                let (state, _) = self.read_state(&lower, upper.as_deref(), None)?;
                if state.num_rows() > 0 {
                    let rows = batch_from_columns(
                        &self.input.schema(),
                        state.columns()[self.lead..].to_vec(),
                        state.num_rows(),
                    )?;
                    out.push(ChangeBatch::inserts(self.with_window_columns(&rows)?));
                    let times = self.session_times(&state, time_at)?;
                    self.rows.apply(&ChangeBatch::deletes(state))?;
                    if let Some(table) = &mut self.times {
                        table.apply(&ChangeBatch::deletes(times))?;
                    }
                }
                done = Some(hi);
            }
        }
        Ok(out)
    }

    /// The `session_times` rows of state rows `state` (of the state schema): each row's time
    /// (column `t`) and its partition's key bytes.
    fn session_times(&self, state: &RecordBatch, t: usize) -> Result<RecordBatch> {
        let n = state.num_rows();
        let parts: Vec<Vec<u8>> = match &self.part_converter {
            Some(conv) => {
                let rows = conv.convert_columns(&state.columns()[..self.partition.len()])?;
                (0..n).map(|i| rows.row(i).data().to_vec()).collect()
            }
            None => vec![Vec::new(); n],
        };
        let parts: ArrayRef = Arc::new(arrow::array::BinaryArray::from_iter_values(parts));
        let schema = self
            .times
            .as_ref()
            .map(|table| table.schema().clone())
            .ok_or_else(|| crate::error::Error::Internal("no session times".into()))?;
        batch_from_columns(&schema, vec![state.column(t).clone(), parts], n)
    }

    /// The output rows of a region as the state now holds it: for a session window, the
    /// rows with keys in `[lower, upper)` (a range of [`OverWindow::session_ranges`]);
    /// otherwise the partition whose key prefix is `lower`.
    fn region_output(&self, (lower, upper): &KeyBounds) -> Result<RecordBatch> {
        if self.sessions.is_some() {
            let (rows, _) = self.read_range(lower, upper.as_deref(), None)?;
            self.with_window_columns(&rows)
        } else {
            self.partition_output(lower)
        }
    }

    fn with_window_columns(&self, rows: &RecordBatch) -> Result<RecordBatch> {
        let mut columns = rows.columns().to_vec();
        columns.extend(self.evaluate(rows)?);
        batch_from_columns(&self.schema, columns, rows.num_rows())
    }
}

/// A ranking function's value at row `i` (`row_number`, `rank` and `dense_rank` are UInt64 in
/// DataFusion; a cast to another integer type is read as well).
fn rank_value(values: &ArrayRef, i: usize) -> Result<u64> {
    if let Some(v) = values.as_primitive_opt::<UInt64Type>() {
        return Ok(v.value(i));
    }
    let cast = arrow::compute::cast(&values.slice(i, 1), &DataType::UInt64)?;
    Ok(cast.as_primitive::<UInt64Type>().value(0))
}

impl Operator for OverWindow {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process(&mut self, ctx: &EpochContext) -> Result<Vec<ChangeBatch>> {
        let mut changes = Vec::new();
        let mut touched: Vec<Box<[u8]>> = Vec::new();
        // Per touched partition (by index in `touched`), the times its changes carry (session
        // windows only).
        let mut times: Vec<Vec<Option<i64>>> = Vec::new();
        let mut seen: HashMap<Box<[u8]>, usize> = HashMap::new();
        for change in self.input.process(ctx)? {
            if change.is_empty() {
                continue;
            }
            let (rows, keys) = self.state_rows(&change)?;
            // Only a session window kept up to date reads its changes' times.
            let raw = match (&self.sessions, &self.times) {
                (Some(_), None) => Some(arrow::compute::cast(
                    rows.batch.column(self.partition.len()),
                    &DataType::Int64,
                )?),
                _ => None,
            };
            for (i, k) in keys.into_iter().enumerate() {
                let idx = match seen.get(&k) {
                    Some(idx) => *idx,
                    None => {
                        seen.insert(k.clone(), touched.len());
                        touched.push(k);
                        times.push(Vec::new());
                        touched.len() - 1
                    }
                };
                if let Some(raw) = &raw {
                    let raw = raw.as_primitive::<arrow::datatypes::Int64Type>();
                    times[idx].push(raw.is_valid(i).then(|| raw.value(i)));
                }
            }
            changes.push(rows);
        }
        if self.times.is_some() {
            return self.close_sessions(ctx, &changes);
        }
        if changes.is_empty() {
            return Ok(vec![]);
        }
        let mut out = Vec::with_capacity(touched.len() * 2);
        // What each change can alter: the touched partitions, or a session window's
        // sessions near the changed times.
        let regions = if self.sessions.is_some() {
            self.session_ranges(&touched, &times)?
        } else {
            touched.iter().map(|p| (p.to_vec(), None)).collect()
        };
        for region in &regions {
            let before = self.region_output(region)?;
            if before.num_rows() > 0 {
                out.push(ChangeBatch::deletes(before));
            }
        }
        for change in &changes {
            self.rows.apply(change)?;
        }
        for region in &regions {
            let after = self.region_output(region)?;
            if after.num_rows() > 0 {
                out.push(ChangeBatch::inserts(after));
            }
        }
        if out.is_empty() {
            return Ok(vec![]);
        }
        // Rows whose value did not change cancel out.
        let net = consolidate(&self.schema, &out)?;
        Ok(if net.is_empty() { vec![] } else { vec![net] })
    }

    fn watermarks(&self, ctx: &EpochContext) -> crate::stream::Watermarks {
        // Sessions emitted on close: every session still to come ends at or above the
        // input's watermark on the time (it was open then).
        match (self.output, self.time_column) {
            (
                WindowOutput::Sessions {
                    end: Some(end),
                    on_close: true,
                    ..
                },
                Some(column),
            ) => crate::stream::watermark_of(&self.input.watermarks(ctx), column)
                .map(|w| vec![(end, w.clone())])
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    fn visit_state(&mut self, path: &str, f: &mut StateVisitor<'_>) -> Result<()> {
        f(&state_name(path, "over_window.rows"), &mut self.rows)?;
        if let Some(times) = &mut self.times {
            f(&state_name(path, "over_window.session_times"), times)?;
        }
        self.input.visit_state(&input_path(path, "input"), f)
    }

    fn restore(&mut self) -> Result<()> {
        // The row table is the whole state.
        self.input.restore()
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        let part: Vec<String> = self.partition.iter().map(|e| e.to_string()).collect();
        let order: Vec<String> = self
            .order
            .iter()
            .map(|o| {
                format!(
                    "{}{}",
                    o.expr,
                    if o.options.descending { " DESC" } else { "" }
                )
            })
            .collect();
        let what = match self.output {
            WindowOutput::Slice { skip, fetch } => format!(
                "StreamTopN: limit={} offset={skip}",
                fetch.map_or("ALL".to_string(), |f| f.to_string())
            ),
            WindowOutput::Sessions {
                gap_ns, on_close, ..
            } => format!(
                "StreamSessionWindow: gap={}s{}",
                gap_ns as f64 / 1e9,
                if on_close {
                    " emit on window close (state tables: rows keyed by (partition, time, row), \
                     open rows keyed by (time, partition))"
                } else {
                    ""
                }
            ),
            WindowOutput::All { rank_limit } => {
                let names: Vec<&str> = self.window.iter().map(|w| w.name()).collect();
                let limit = rank_limit
                    .map(|(j, max)| format!(" rank_limit=[{} <= {max}]", names[j]))
                    .unwrap_or_default();
                format!("StreamOverWindow: [{}]{limit}", names.join(", "))
            }
        };
        out.push(format!(
            "{}{what} partition_by=[{}] order_by=[{}] (state table: rows keyed by (partition, order, row))",
            "  ".repeat(depth),
            part.join(", "),
            order.join(", "),
        ));
        self.input.explain(depth + 1, out);
    }
}

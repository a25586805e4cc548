//! `TemporalFilter`: a filter that compares a row's time with `now()`, whose rows enter or
//! leave the view as time passes (RisingWave's and Materialize's temporal filters):
//!
//! ```text
//!  WHERE ts > now() - INTERVAL '1 hour'   (a lower bound: each row leaves when it gets old)
//!  WHERE ts <= now()                      (an upper bound: each row enters when its time comes)
//! ```
//!
//! `now()` is the wall-clock time of the epoch ([`EpochContext::now_ns`]). The compared side
//! (`t`, any expression of the row) is the state table's leading key, so the rows whose
//! predicate flips as `now()` grows are the first ones of the table: a lower bound keeps the
//! visible rows and retracts them from the oldest `t` up until the first row still visible; an
//! upper bound keeps the rows not yet visible and emits them from the oldest `t` up. Cost per
//! epoch: O(log n + rows that enter or leave), plus the epoch's changes; a row whose `t` is
//! NULL never passes and is not kept.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, TimestampNanosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;

use crate::common::ChangeBatch;
use crate::error::{Error, Result};
use crate::state::StateTable;
use crate::state::table::{KeyLayout, batch_from_columns};
use crate::stream::{EpochContext, Operator, StateVisitor, input_path, state_name};

/// Rows read from the state table per step of an epoch's scan.
const SCAN_ROWS: usize = 1024;

/// Which way the bound moves rows as time passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemporalBound {
    /// `t > f(now())` or `>=`: a row is visible until `now()` catches up with it.
    Lower,
    /// `t < f(now())` or `<=`: a row becomes visible once `now()` passes it.
    Upper,
}

/// A temporal filter (see the module docs).
///
/// State table `temporal_filter.rows`: columns `__t` (the compared time), then the input
/// columns, keyed by `__t` ascending: the visible rows (lower bound) or the rows still to come
/// (upper bound).
pub struct TemporalFilter {
    /// The input operator.
    pub input: Box<dyn Operator>,
    /// The compared side `t`, over the input schema.
    time: Arc<dyn PhysicalExpr>,
    /// The predicate over the input schema followed by one column `__now`
    /// (`Timestamp(ns, "+00:00")`, the epoch's time).
    predicate: Arc<dyn PhysicalExpr>,
    bound: TemporalBound,
    rows: StateTable,
    display: String,
}

impl TemporalFilter {
    /// Builds the operator: `time` is the compared side of type `time_type`; `predicate` the
    /// whole comparison with `now()` read from a last column `__now`.
    ///
    /// # Errors
    /// Arrow errors when `time_type` has no row encoding.
    pub fn try_new(
        input: Box<dyn Operator>,
        time: Arc<dyn PhysicalExpr>,
        time_type: DataType,
        predicate: Arc<dyn PhysicalExpr>,
        bound: TemporalBound,
        display: String,
    ) -> Result<Self> {
        let mut fields = vec![Field::new("__t", time_type, true)];
        fields.extend(input.schema().fields().iter().map(|f| f.as_ref().clone()));
        let layout = KeyLayout::new(Arc::new(Schema::new(fields)), &[0])?;
        Ok(TemporalFilter {
            input,
            time,
            predicate,
            bound,
            rows: StateTable::with_layout(Arc::new(layout)),
            display,
        })
    }

    /// The predicate over rows of the input schema at time `now_ns`; NULL counts as false.
    fn passes(&self, rows: &RecordBatch, now_ns: i64) -> Result<BooleanArray> {
        let n = rows.num_rows();
        let now: ArrayRef =
            Arc::new(TimestampNanosecondArray::from(vec![now_ns; n]).with_timezone("+00:00"));
        let mut fields: Vec<Field> = rows
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new("__now", now.data_type().clone(), true));
        let mut columns = rows.columns().to_vec();
        columns.push(now);
        let batch = batch_from_columns(&Arc::new(Schema::new(fields)), columns, n)?;
        let mask = self.predicate.evaluate(&batch)?.into_array(n)?;
        let mask = mask
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| Error::plan("42804", "argument of WHERE must be type boolean"))?;
        Ok((0..n)
            .map(|i| Some(mask.is_valid(i) && mask.value(i)))
            .collect())
    }

    /// The state rows of a change: `__t`, then the row.
    fn state_rows(&self, change: &ChangeBatch) -> Result<ChangeBatch> {
        let n = change.len();
        let mut columns = vec![self.time.evaluate(&change.batch)?.into_array(n)?];
        columns.extend(change.batch.columns().iter().cloned());
        let rows = batch_from_columns(self.rows.schema(), columns, n)?;
        ChangeBatch::new(rows, change.weights.clone())
    }

    /// The rows at the front of the state whose predicate has flipped at `now_ns`, with their
    /// counts as weights, removed from the state: retractions (lower bound) or insertions
    /// (upper bound) of the input schema.
    fn take_flipped(&mut self, now_ns: i64) -> Result<Vec<ChangeBatch>> {
        let flipped_value = self.bound == TemporalBound::Upper;
        let mut out = Vec::new();
        loop {
            let mut keys: Vec<(Box<[u8]>, i64)> = Vec::new();
            self.rows.scan_prefix_while(&[], &mut |k, c| {
                if c > 0 {
                    keys.push((Box::from(k), c));
                }
                Ok(keys.len() < SCAN_ROWS)
            })?;
            if keys.is_empty() {
                return Ok(out);
            }
            let all = self
                .rows
                .layout()
                .decode(keys.iter().map(|(k, _)| k.as_ref()), keys.len())?;
            let input = batch_from_columns(
                &self.input.schema(),
                all.columns()[1..].to_vec(),
                keys.len(),
            )?;
            let passes = self.passes(&input, now_ns)?;
            let flipped = (0..keys.len())
                .take_while(|i| passes.value(*i) == flipped_value)
                .count();
            if flipped == 0 {
                return Ok(out);
            }
            let counts: Vec<i64> = keys[..flipped].iter().map(|(_, c)| *c).collect();
            let rows = ChangeBatch::new(all.slice(0, flipped), counts.into())?;
            self.rows.apply(&rows.negate())?;
            let emitted = ChangeBatch::new(input.slice(0, flipped), rows.weights.clone())?;
            out.push(if self.bound == TemporalBound::Lower {
                emitted.negate()
            } else {
                emitted
            });
            if flipped < keys.len() || keys.len() < SCAN_ROWS {
                return Ok(out);
            }
        }
    }
}

impl Operator for TemporalFilter {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }

    fn process(&mut self, ctx: &EpochContext) -> Result<Vec<ChangeBatch>> {
        // Time first: the state then holds what is right at this epoch's `now()`, which the
        // epoch's changes are filtered by.
        let mut out = self.take_flipped(ctx.now_ns)?;
        for change in self.input.process(ctx)? {
            if change.is_empty() {
                continue;
            }
            let rows = self.state_rows(&change)?;
            let has_time: BooleanArray = (0..rows.len())
                .map(|i| Some(rows.batch.column(0).is_valid(i)))
                .collect();
            let passes = self.passes(&change.batch, ctx.now_ns)?;
            let fails = arrow::compute::not(&passes)?;
            let visible = change.filter(&passes)?;
            // Lower bound: the state is the visible rows; upper bound: those still to come.
            let kept = match self.bound {
                TemporalBound::Lower => rows.filter(&passes)?,
                TemporalBound::Upper => rows.filter(&arrow::compute::and(&fails, &has_time)?)?,
            };
            self.rows.apply(&kept)?;
            if !visible.is_empty() {
                out.push(visible);
            }
        }
        Ok(out.into_iter().filter(|c| !c.is_empty()).collect())
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        let kept = match self.bound {
            TemporalBound::Lower => "the visible rows",
            TemporalBound::Upper => "the rows still to come",
        };
        out.push(format!(
            "{}StreamTemporalFilter: {} (state table: {kept}, keyed by {})",
            "  ".repeat(depth),
            self.display,
            self.time
        ));
        self.input.explain(depth + 1, out);
    }

    fn visit_state(&mut self, path: &str, f: &mut StateVisitor<'_>) -> Result<()> {
        f(&state_name(path, "temporal_filter.rows"), &mut self.rows)?;
        self.input.visit_state(&input_path(path, "input"), f)
    }

    fn restore(&mut self) -> Result<()> {
        self.input.restore()
    }
}

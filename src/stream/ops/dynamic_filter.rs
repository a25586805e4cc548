//! `DynamicFilter`: the rows of one input compared with the single row of another, whose
//! value moves as that input changes (RisingWave's dynamic filter):
//!
//! ```text
//!  SELECT id, x FROM t WHERE x > (SELECT sum(y) FROM s)
//! ```
//!
//! The compared value of each row of `t` (`x`, any expression of the row) leads the key of a
//! state table, so when the threshold (`sum(y)`) moves from `a` to `b` the rows whose verdict
//! flips are the ones between `a` and `b`: one key range. Cost per epoch: the changes of `t`
//! (each compared with the threshold), plus O(log n + rows between the old and the new
//! threshold) when it moves; a plain cross join with a filter would read every row of `t` on
//! each move.

use std::ops::Bound;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::PhysicalExpr;

use crate::common::ChangeBatch;
use crate::error::{Error, Result};
use crate::state::StateTable;
use crate::state::table::{KeyLayout, KeyRange, batch_from_columns};
use crate::stream::{EpochContext, Operator, StateVisitor, input_path, state_name};

/// Floats as SQL compares them, for the key order: `-0` as `0` and every NaN as one positive
/// NaN, so that Arrow's row encoding (IEEE 754 total order) orders them as PostgreSQL's
/// float comparison does (`-0 = 0`; NaN equal to NaN and above every other value). Other
/// types unchanged.
fn canonical(values: ArrayRef) -> ArrayRef {
    use arrow::array::AsArray;
    use arrow::datatypes::{Float32Type, Float64Type};
    match values.data_type() {
        DataType::Float64 => Arc::new(
            values
                .as_primitive::<Float64Type>()
                .unary::<_, Float64Type>(|v| {
                    if v == 0.0 {
                        0.0
                    } else if v.is_nan() {
                        f64::NAN
                    } else {
                        v
                    }
                }),
        ),
        DataType::Float32 => Arc::new(
            values
                .as_primitive::<Float32Type>()
                .unary::<_, Float32Type>(|v| {
                    if v == 0.0 {
                        0.0
                    } else if v.is_nan() {
                        f32::NAN
                    } else {
                        v
                    }
                }),
        ),
        _ => values,
    }
}

/// How a row's value must compare with the threshold to pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `value < threshold`.
    Lt,
    /// `value <= threshold`.
    LtEq,
    /// `value > threshold`.
    Gt,
    /// `value >= threshold`.
    GtEq,
}

impl Comparison {
    /// Whether `value` passes against `threshold`, both in the state's key encoding (which
    /// orders values as the type does: Arrow's row format, floats made canonical first).
    fn holds(self, value: &[u8], threshold: &[u8]) -> bool {
        match self {
            Comparison::Lt => value < threshold,
            Comparison::LtEq => value <= threshold,
            Comparison::Gt => value > threshold,
            Comparison::GtEq => value >= threshold,
        }
    }

    /// The SQL operator.
    pub fn symbol(self) -> &'static str {
        match self {
            Comparison::Lt => "<",
            Comparison::LtEq => "<=",
            Comparison::Gt => ">",
            Comparison::GtEq => ">=",
        }
    }
}

/// A dynamic filter (see the module docs).
///
/// Inputs: `left`, the filtered rows, and `right`, a stream of at most one row at the end of
/// each epoch (an aggregate without `GROUP BY`). Output: the left rows (the left schema)
/// whose `value` compares with the right row's `threshold` as `comparison` says; none while
/// the right side is empty or its threshold is NULL, and a row whose value is NULL never
/// passes. State tables: `dynamic_filter.rows` (columns `__v`, the compared value, then the
/// left columns; keyed by `__v` ascending; the left rows whose value is not NULL) and
/// `dynamic_filter.threshold` (the right side's rows).
pub struct DynamicFilter {
    left: Box<dyn Operator>,
    right: Box<dyn Operator>,
    /// The compared value, over the left schema.
    value: Arc<dyn PhysicalExpr>,
    /// The threshold, over the right schema, of the value's type.
    threshold: Arc<dyn PhysicalExpr>,
    comparison: Comparison,
    /// Encodes values of the compared type as the first column of `rows`' keys.
    converter: RowConverter,
    rows: StateTable,
    right_rows: StateTable,
    /// The threshold of `right_rows`, encoded ([`Self::current`]), kept between epochs: an
    /// epoch that does not change the right side does not evaluate it again.
    threshold_key: Option<Box<[u8]>>,
}

impl DynamicFilter {
    /// Builds the operator; `value` (over `left`) and `threshold` (over `right`) have type
    /// `value_type`.
    ///
    /// # Errors
    /// Arrow errors when `value_type` or a column type has no row encoding.
    pub fn try_new(
        left: Box<dyn Operator>,
        right: Box<dyn Operator>,
        value: Arc<dyn PhysicalExpr>,
        threshold: Arc<dyn PhysicalExpr>,
        value_type: DataType,
        comparison: Comparison,
    ) -> Result<Self> {
        let mut fields = vec![Field::new("__v", value_type.clone(), true)];
        fields.extend(left.schema().fields().iter().map(|f| f.as_ref().clone()));
        let layout = KeyLayout::new(Arc::new(Schema::new(fields)), &[0])?;
        let right_rows = StateTable::new(right.schema())?;
        Ok(DynamicFilter {
            left,
            right,
            value,
            threshold,
            comparison,
            converter: RowConverter::new(vec![SortField::new(value_type)])?,
            rows: StateTable::with_layout(Arc::new(layout)),
            right_rows,
            threshold_key: None,
        })
    }

    /// Encodes one column of values; `None` for NULLs.
    fn encode(&self, values: &ArrayRef) -> Result<Vec<Option<Box<[u8]>>>> {
        let rows = self
            .converter
            .convert_columns(std::slice::from_ref(values))?;
        Ok((0..values.len())
            .map(|i| values.is_valid(i).then(|| Box::from(rows.row(i).data())))
            .collect())
    }

    /// The current threshold, encoded: `None` while the right side has no row or its
    /// threshold is NULL.
    ///
    /// # Errors
    /// `21000` when the right side holds more than one row.
    fn current(&self) -> Result<Option<Box<[u8]>>> {
        if self.right_rows.is_empty() {
            return Ok(None);
        }
        if self.right_rows.len() > 1 {
            return Err(Error::plan(
                "21000",
                "more than one row returned by a subquery used as an expression",
            ));
        }
        let row = self.right_rows.to_batch()?;
        let t = canonical(self.threshold.evaluate(&row)?.into_array(1)?);
        Ok(self.encode(&t)?.pop().flatten())
    }

    /// The state rows of a left change whose value is not NULL (`__v`, then the row), and
    /// their encoded values.
    fn state_rows(&self, change: &ChangeBatch) -> Result<(ChangeBatch, Vec<Box<[u8]>>)> {
        let n = change.len();
        let v = canonical(self.value.evaluate(&change.batch)?.into_array(n)?);
        let encoded = self.encode(&v)?;
        let mut columns = vec![v];
        columns.extend(change.batch.columns().iter().cloned());
        let rows = ChangeBatch::new(
            batch_from_columns(self.rows.schema(), columns, n)?,
            change.weights.clone(),
        )?;
        let valid: BooleanArray = encoded.iter().map(|e| Some(e.is_some())).collect();
        Ok((
            rows.filter(&valid)?,
            encoded.into_iter().flatten().collect(),
        ))
    }

    /// The key range holding every row whose verdict may differ between thresholds `old`
    /// and `new` (at least one of them known).
    fn flip_range(&self, old: Option<&[u8]>, new: Option<&[u8]>) -> KeyRange {
        // Keys start with the value's encoding; a key whose value is `t` lies in
        // [enc(t), successor(enc(t))).
        let after = |t: &[u8]| KeyRange::prefix(t.to_vec()).upper;
        let from = |t: &[u8]| Bound::Included(t.to_vec());
        let upper_to_lower = |b: Bound<Vec<u8>>| match b {
            Bound::Excluded(s) => Some(Bound::Included(s)),
            _ => None,
        };
        let empty = KeyRange {
            lower: Bound::Included(vec![1]),
            upper: Bound::Excluded(vec![0]),
        };
        match (old, new) {
            (Some(a), Some(b)) => {
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                KeyRange {
                    lower: from(lo),
                    upper: after(hi),
                }
            }
            (Some(t), None) | (None, Some(t)) => match self.comparison {
                // The rows passing against `t`.
                Comparison::Gt => match upper_to_lower(after(t)) {
                    Some(lower) => KeyRange {
                        lower,
                        upper: Bound::Unbounded,
                    },
                    None => empty,
                },
                Comparison::GtEq => KeyRange {
                    lower: from(t),
                    upper: Bound::Unbounded,
                },
                Comparison::Lt => KeyRange {
                    lower: Bound::Unbounded,
                    upper: Bound::Excluded(t.to_vec()),
                },
                Comparison::LtEq => KeyRange {
                    lower: Bound::Unbounded,
                    upper: after(t),
                },
            },
            (None, None) => empty,
        }
    }

    /// The rows whose verdict differs between thresholds `old` and `new`: insertions of
    /// those that pass now only, retractions of those that passed before only (left schema).
    fn flipped(&self, old: Option<&[u8]>, new: Option<&[u8]>) -> Result<Vec<ChangeBatch>> {
        let range = self.flip_range(old, new);
        let left_schema = self.left.schema();
        let mut out = Vec::new();
        for batch in self.rows.snapshot().scan(&range, None)? {
            let n = batch.num_rows();
            if n == 0 {
                continue;
            }
            let values = self.encode(batch.column(0))?;
            let passes =
                |t: Option<&[u8]>, v: &[u8]| t.is_some_and(|t| self.comparison.holds(v, t));
            let mut keep = Vec::with_capacity(n);
            let mut weights = Vec::with_capacity(n);
            for v in &values {
                let v = v.as_deref().ok_or_else(|| {
                    Error::Internal("dynamic filter state holds a NULL value".into())
                })?;
                let (before, after) = (passes(old, v), passes(new, v));
                keep.push(Some(before != after));
                if before != after {
                    weights.push(if after { 1 } else { -1 });
                }
            }
            let rows = batch_from_columns(&left_schema, batch.columns()[1..].to_vec(), n)?;
            let rows = arrow::compute::filter_record_batch(&rows, &BooleanArray::from(keep))?;
            if rows.num_rows() > 0 {
                out.push(ChangeBatch::new(rows, weights.into())?);
            }
        }
        Ok(out)
    }
}

impl Operator for DynamicFilter {
    fn schema(&self) -> SchemaRef {
        self.left.schema()
    }

    fn process(&mut self, ctx: &EpochContext) -> Result<Vec<ChangeBatch>> {
        // Δout = ΔL against the old threshold, then the rows of the new L whose verdict the
        // threshold's move flips.
        let old = self.threshold_key.clone();
        let mut out = Vec::new();
        for change in self.left.process(ctx)? {
            if change.is_empty() {
                continue;
            }
            let (rows, values) = self.state_rows(&change)?;
            self.rows.apply(&rows)?;
            let Some(t) = old.as_deref() else {
                continue;
            };
            let passes: BooleanArray = values
                .iter()
                .map(|v| Some(self.comparison.holds(v, t)))
                .collect();
            let passed = rows.filter(&passes)?;
            if !passed.is_empty() {
                let left = batch_from_columns(
                    &self.left.schema(),
                    passed.batch.columns()[1..].to_vec(),
                    passed.len(),
                )?;
                out.push(ChangeBatch::new(left, passed.weights.clone())?);
            }
        }
        let mut moved = false;
        for change in self.right.process(ctx)? {
            if !change.is_empty() {
                self.right_rows.apply(&change)?;
                moved = true;
            }
        }
        if moved {
            let new = self.current()?;
            if new != old {
                out.extend(self.flipped(old.as_deref(), new.as_deref())?);
            }
            self.threshold_key = new;
        }
        Ok(out)
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        out.push(format!(
            "{}StreamDynamicFilter: {} {} {} (state tables: the left rows keyed by {}, and the right row)",
            "  ".repeat(depth),
            self.value,
            self.comparison.symbol(),
            self.threshold,
            self.value
        ));
        self.left.explain(depth + 1, out);
        self.right.explain(depth + 1, out);
    }

    fn visit_state(&mut self, path: &str, f: &mut StateVisitor<'_>) -> Result<()> {
        f(&state_name(path, "dynamic_filter.rows"), &mut self.rows)?;
        f(
            &state_name(path, "dynamic_filter.threshold"),
            &mut self.right_rows,
        )?;
        self.left.visit_state(&input_path(path, "left"), f)?;
        self.right.visit_state(&input_path(path, "right"), f)
    }

    fn restore(&mut self) -> Result<()> {
        self.left.restore()?;
        self.right.restore()?;
        self.threshold_key = self.current()?;
        Ok(())
    }
}

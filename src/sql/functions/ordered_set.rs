//! PostgreSQL's ordered-set aggregates that DataFusion lacks (PostgreSQL docs, 9.21
//! "Aggregate Functions", table 9.62; `orderedsetaggs.c`):
//!
//! ```text
//!  mode() WITHIN GROUP (ORDER BY x)                 -> type of x
//!      the most frequent non-NULL value; of equally frequent ones, the first in the order
//!  percentile_disc(f) WITHIN GROUP (ORDER BY x)     -> type of x
//!      the first non-NULL value whose position in the order is at least f · n (0 <= f <= 1)
//!  percentile_cont(f) WITHIN GROUP (ORDER BY x)     -> double precision (x read as one)
//!      the value at position f · (n - 1), interpolated between its neighbours
//! ```
//!
//! `percentile_cont` replaces DataFusion's, which reads a descending order as the fraction
//! 1 - f of the ascending one (`percentile_cont(0.3) WITHIN GROUP (ORDER BY x DESC)` over
//! 1..4 was 3.0999999999999996; PostgreSQL interpolates in the order asked: 3.1).
//!
//! Both ignore NULL inputs and are NULL without a non-NULL input (or with a NULL `f`); an `f`
//! outside [0, 1] is 22003 `percentile value f is not between 0 and 1`. The value picking is
//! shared with the materialized-view aggregate ([`mode_index`], [`disc_position`]), which keeps
//! each group's values ordered in a state table.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Field, FieldRef, Schema};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, ColumnarValue, Signature, Volatility,
};

use crate::error::Error;
use crate::sql::semantics::ours;

/// Which ordered-set aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrderedSetKind {
    /// `mode()`.
    Mode,
    /// `percentile_disc(f)`.
    PercentileDisc,
    /// `percentile_cont(f)`.
    PercentileCont,
}

/// `mode()` or `percentile_disc(f)` `WITHIN GROUP (ORDER BY x)` for batch queries (see the
/// module docs). DataFusion passes `x` as the first argument and the `ORDER BY` as the call's
/// ordering. Memory: every non-NULL value of a group until it is evaluated.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct OrderedSet {
    kind: OrderedSetKind,
    signature: Signature,
}

impl OrderedSet {
    /// The aggregate of `kind`.
    pub fn new(kind: OrderedSetKind) -> Self {
        OrderedSet {
            kind,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

/// 22003 for a fraction outside [0, 1], as PostgreSQL words it.
pub fn check_fraction(f: f64) -> crate::error::Result<f64> {
    if (0.0..=1.0).contains(&f) {
        Ok(f)
    } else {
        Err(Error::data(
            "22003",
            format!("percentile value {f} is not between 0 and 1"),
        ))
    }
}

/// The index, among a group's distinct non-NULL values in the aggregate's order with their
/// counts, of `mode()`'s value: the largest count, the first one on a tie. `None` when empty.
pub fn mode_index(counts: &[i64]) -> Option<usize> {
    let mut best: Option<(usize, i64)> = None;
    for (i, c) in counts.iter().enumerate() {
        if *c > 0 && best.is_none_or(|(_, b)| *c > b) {
            best = Some((i, *c));
        }
    }
    best.map(|(i, _)| i)
}

/// `percentile_cont(f)` of `n` ordered values, `value(i)` the 0-based `i`th (PostgreSQL's
/// `percentile_cont_final_common`): the rows at floor and ceil of f · (n - 1), interpolated.
/// `None` for `n == 0`.
pub fn cont_value(f: f64, n: i64, value: impl Fn(i64) -> f64) -> Option<f64> {
    if n <= 0 {
        return None;
    }
    let position = f * (n - 1) as f64;
    let (first, second) = (position.floor(), position.ceil());
    let lo = value(first as i64);
    if first == second {
        return Some(lo);
    }
    let hi = value(second as i64);
    Some(lo + (position - first) * (hi - lo))
}

/// The 0-based position, among `n` ordered non-NULL values, of `percentile_disc(f)`'s value:
/// the first whose 1-based position reaches f · n (PostgreSQL: `ceil(f * n)`, at least 1).
/// `None` for `n == 0`.
pub fn disc_position(f: f64, n: i64) -> Option<i64> {
    if n <= 0 {
        return None;
    }
    let rank = (f * n as f64).ceil() as i64;
    Some(rank.clamp(1, n) - 1)
}

impl AggregateUDFImpl for OrderedSet {
    fn name(&self) -> &str {
        match self.kind {
            OrderedSetKind::Mode => "mode",
            OrderedSetKind::PercentileDisc => "percentile_disc",
            OrderedSetKind::PercentileCont => "percentile_cont",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match (self.kind, arg_types) {
            (OrderedSetKind::Mode, [x]) => Ok(vec![x.clone()]),
            (OrderedSetKind::PercentileDisc, [x, f]) if f.is_numeric() || f.is_null() => {
                Ok(vec![x.clone(), DataType::Float64])
            }
            (OrderedSetKind::PercentileCont, [x, f])
                if (x.is_numeric() || x.is_null()) && (f.is_numeric() || f.is_null()) =>
            {
                Ok(vec![DataType::Float64, DataType::Float64])
            }
            _ => Err(DataFusionError::Plan(format!(
                "{} takes {} WITHIN GROUP (ORDER BY one expression)",
                self.name(),
                match self.kind {
                    OrderedSetKind::Mode => "no argument and",
                    OrderedSetKind::PercentileDisc => "a fraction and",
                    OrderedSetKind::PercentileCont => "a fraction and a number",
                }
            ))),
        }
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn supports_within_group_clause(&self) -> bool {
        true
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> Result<Vec<FieldRef>> {
        let item = Field::new_list_field(args.input_fields[0].data_type().clone(), true);
        Ok(vec![
            Arc::new(Field::new(
                format!("{}[values]", args.name),
                DataType::List(Arc::new(item)),
                true,
            )),
            // A fraction read from the group's rows (`percentile_cont(g * 0.1)`), and whether
            // one was read.
            Arc::new(Field::new(
                format!("{}[fraction]", args.name),
                DataType::Float64,
                true,
            )),
            Arc::new(Field::new(
                format!("{}[fraction_seen]", args.name),
                DataType::Boolean,
                true,
            )),
        ])
    }

    fn accumulator(&self, args: AccumulatorArgs<'_>) -> Result<Box<dyn Accumulator>> {
        let descending = args.order_bys.first().is_some_and(|s| s.options.descending);
        let mut per_group = false;
        let fraction = match self.kind {
            OrderedSetKind::Mode => None,
            OrderedSetKind::PercentileDisc | OrderedSetKind::PercentileCont => {
                // A constant evaluates without input rows; another fraction (of the group's
                // columns, as PostgreSQL allows) is read from the group's first row.
                let empty = RecordBatch::new_empty(Arc::new(Schema::empty()));
                match args.exprs.get(1).map(|e| e.evaluate(&empty)) {
                    Some(Ok(ColumnarValue::Scalar(v))) => Some(fraction_of(&v)?),
                    _ => {
                        per_group = true;
                        Some(None)
                    }
                }
            }
        };
        Ok(Box::new(OrderedSetAccumulator {
            kind: self.kind,
            per_group,
            fraction_seen: false,
            fraction,
            descending,
            data_type: args.expr_fields[0].data_type().clone(),
            values: Vec::new(),
        }))
    }
}

/// A fraction's value: `None` for NULL; 22003 outside [0, 1].
fn fraction_of(v: &ScalarValue) -> Result<Option<f64>> {
    match v.cast_to(&DataType::Float64)? {
        ScalarValue::Float64(Some(f)) => Ok(Some(check_fraction(f).map_err(ours)?)),
        _ => Ok(None),
    }
}

/// A group's non-NULL values, in arrival order, until evaluated.
#[derive(Debug)]
struct OrderedSetAccumulator {
    kind: OrderedSetKind,
    /// The fraction is not a constant: it is read from the group's first row.
    per_group: bool,
    /// Whether `fraction` was read (only for `per_group`).
    fraction_seen: bool,
    /// `percentile_disc`'s fraction (`Some(None)`: NULL); `None` for `mode`.
    fraction: Option<Option<f64>>,
    descending: bool,
    data_type: DataType,
    values: Vec<ArrayRef>,
}

impl OrderedSetAccumulator {
    fn push(&mut self, values: &ArrayRef) -> Result<()> {
        let kept = if values.null_count() > 0 {
            arrow::compute::filter(values, &arrow::compute::is_not_null(values)?)?
        } else {
            Arc::clone(values)
        };
        if !kept.is_empty() {
            self.values.push(kept);
        }
        Ok(())
    }
}

impl Accumulator for OrderedSetAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if self.per_group && !self.fraction_seen && !values[1].is_empty() {
            self.fraction = Some(fraction_of(&ScalarValue::try_from_array(&values[1], 0)?)?);
            self.fraction_seen = true;
        }
        self.push(&values[0])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let null = ScalarValue::try_from(&self.data_type)?;
        if self.values.is_empty() || self.fraction == Some(None) {
            return Ok(null);
        }
        let parts: Vec<&dyn Array> = self.values.iter().map(|a| a.as_ref()).collect();
        let all = arrow::compute::concat(&parts)?;
        let order = SortOptions {
            descending: self.descending,
            nulls_first: false,
        };
        let indices = arrow::compute::sort_to_indices(&all, Some(order), None)?;
        let sorted = arrow::compute::take(&all, &indices, None)?;
        let at = match (self.kind, self.fraction) {
            (OrderedSetKind::PercentileCont, Some(Some(f))) => {
                let sorted = arrow::compute::cast(&sorted, &DataType::Float64)?;
                let sorted = sorted.as_primitive::<arrow::datatypes::Float64Type>();
                let v = cont_value(f, sorted.len() as i64, |i| sorted.value(i as usize));
                return Ok(ScalarValue::Float64(v));
            }
            (OrderedSetKind::PercentileDisc, Some(Some(f))) => {
                disc_position(f, sorted.len() as i64).map(|p| p as usize)
            }
            _ => {
                // Runs of equal values, in order; the longest, the first on a tie.
                let runs =
                    arrow::compute::kernels::partition::partition(&[Arc::clone(&sorted)])?.ranges();
                let counts: Vec<i64> = runs.iter().map(|r| r.len() as i64).collect();
                mode_index(&counts).map(|i| runs[i].start)
            }
        };
        match at {
            Some(i) => ScalarValue::try_from_array(&sorted, i),
            None => Ok(null),
        }
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self
                .values
                .iter()
                .map(|a| a.get_array_memory_size())
                .sum::<usize>()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let parts: Vec<&dyn Array> = self.values.iter().map(|a| a.as_ref()).collect();
        let all = if parts.is_empty() {
            arrow::array::new_empty_array(&self.data_type)
        } else {
            arrow::compute::concat(&parts)?
        };
        Ok(vec![
            ScalarValue::List(Arc::new(
                datafusion::common::utils::SingleRowListArrayBuilder::new(all)
                    .with_nullable(true)
                    .build_list_array(),
            )),
            ScalarValue::Float64(self.fraction.flatten()),
            ScalarValue::Boolean(Some(self.fraction_seen)),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists = states[0]
            .as_any()
            .downcast_ref::<arrow::array::ListArray>()
            .ok_or_else(|| DataFusionError::Internal("ordered-set state is not a list".into()))?;
        for i in 0..lists.len() {
            if lists.is_valid(i) {
                self.push(&lists.value(i))?;
            }
        }
        if self.per_group && !self.fraction_seen {
            let seen = states[2].as_boolean();
            if let Some(i) = (0..seen.len()).find(|i| seen.is_valid(*i) && seen.value(*i)) {
                self.fraction = Some(fraction_of(&ScalarValue::try_from_array(&states[1], i)?)?);
                self.fraction_seen = true;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_takes_the_first_of_equally_frequent_values() {
        assert_eq!(mode_index(&[1, 2, 2]), Some(1));
        assert_eq!(mode_index(&[3, 1, 3]), Some(0));
        assert_eq!(mode_index(&[0, 0]), None);
        assert_eq!(mode_index(&[]), None);
    }

    #[test]
    fn disc_position_is_the_ceiling_of_f_n() {
        // PostgreSQL 15: percentile_disc(f) over 1..4 is 1 for 0 and 0.25, 2 for 0.5, 4 for 1.
        assert_eq!(disc_position(0.0, 4), Some(0));
        assert_eq!(disc_position(0.25, 4), Some(0));
        assert_eq!(disc_position(0.5, 4), Some(1));
        assert_eq!(disc_position(0.51, 4), Some(2));
        assert_eq!(disc_position(1.0, 4), Some(3));
        assert_eq!(disc_position(0.5, 0), None);
        assert!(check_fraction(1.5).is_err());
        // percentile_cont(0.3) WITHIN GROUP (ORDER BY x DESC) over 1..4: 3.1 in PostgreSQL 15.
        let desc = [4.0, 3.0, 2.0, 1.0];
        assert_eq!(cont_value(0.3, 4, |i| desc[i as usize]), Some(3.1));
        assert_eq!(cont_value(0.5, 4, |i| desc[i as usize]), Some(2.5));
        assert_eq!(cont_value(1.0, 1, |_| 7.0), Some(7.0));
        assert!(check_fraction(-0.0).is_ok());
    }
}

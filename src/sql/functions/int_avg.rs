//! `avg` of an integer argument as PostgreSQL types it (docs, 9.21 "Aggregate Functions":
//! `avg(smallint | integer | bigint)` is `numeric`; `int8_avg` / `numeric_avg` in
//! `numeric.c`):
//!
//! ```text
//!  avg(smallint | integer | bigint) -> numeric   sum / count, rounded half away from zero
//! ```
//!
//! DataFusion's `avg` of an integer column is `double precision`. PostgreSQL divides the exact
//! sum by the count with `select_div_scale`, whose scale gives at least 16 significant digits
//! (16 decimals for averages from 1 up to 10,000, more below 1, fewer above). An Arrow decimal
//! column has one scale, so Weir keeps [`AVG_SCALE`] = 16 decimals for every value: the text
//! PostgreSQL prints for averages in that common range, and the same numeric value (to 16
//! decimals) elsewhere. [`PgIntAvg`] keeps the exact sum (so batch queries, window frames and
//! views, whose aggregates keep the same sum and count in their state tables, agree, and a
//! retraction leaves no residue); [`crate::sql::semantics::PgSumTypes`] puts it in place of
//! `avg` for integer arguments.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal128Array, Int64Array};
use arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef, Int64Type, i256};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature, Volatility};

use crate::sql::semantics::div_round;

/// The decimals of an integer average (see the module docs).
pub const AVG_SCALE: i8 = 16;

/// The result type of [`PgIntAvg`]: `numeric` of 38 digits, [`AVG_SCALE`] decimals.
pub const AVG_TYPE: DataType = DataType::Decimal128(38, AVG_SCALE);

/// `avg` over `smallint`, `integer` or `bigint` (`Int16`, `Int32`, `Int64`; smaller integers
/// widen), result [`AVG_TYPE`]. State: the count of non-NULL values (`Int64`) and their sum
/// (`Decimal128(38, 0)`: exact, as the sum of up to 2^64 bigints fits).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgIntAvg {
    signature: Signature,
}

impl PgIntAvg {
    /// The aggregate, for integer arguments only.
    pub fn new() -> Self {
        PgIntAvg {
            signature: Signature::uniform(
                1,
                vec![DataType::Int16, DataType::Int32, DataType::Int64],
                Volatility::Immutable,
            ),
        }
    }
}

impl Default for PgIntAvg {
    fn default() -> Self {
        Self::new()
    }
}

impl AggregateUDFImpl for PgIntAvg {
    fn name(&self) -> &str {
        "avg"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(AVG_TYPE)
    }

    fn accumulator(
        &self,
        args: AccumulatorArgs<'_>,
    ) -> datafusion::common::Result<Box<dyn Accumulator>> {
        if args.is_distinct {
            return Err(datafusion::common::DataFusionError::NotImplemented(
                "avg(DISTINCT integer)".into(),
            ));
        }
        Ok(Box::new(IntAvg { n: 0, sum: 0 }))
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> datafusion::common::Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new(
                format_state_name(args.name, "count"),
                DataType::Int64,
                true,
            )),
            Arc::new(Field::new(
                format_state_name(args.name, "sum"),
                DataType::Decimal128(38, 0),
                true,
            )),
        ])
    }
}

/// The average of `n` integers whose sum is `sum`, in units of 10^-[`AVG_SCALE`], rounded
/// half away from zero as PostgreSQL's numeric division rounds; `None` for no values (NULL).
/// Views' aggregates evaluate their averages with it too.
pub fn int_avg_value(n: i64, sum: i128) -> Option<i128> {
    if n <= 0 {
        return None;
    }
    // |sum| < 2^127 and 10^16 < 2^54: the product fits in 256 bits; |average| ≤ 2^63, so
    // the quotient fits in 38 digits.
    let num = i256::from_i128(sum).wrapping_mul(i256::from_i128(10i128.pow(AVG_SCALE as u32)));
    div_round(num, i256::from_i128(n as i128))?.to_i128()
}

/// One group's average: the count of non-NULL values and their exact sum.
#[derive(Debug)]
struct IntAvg {
    n: i64,
    sum: i128,
}

impl IntAvg {
    /// Adds (`weight` 1) or retracts (-1) the non-NULL values of `values`.
    fn apply(&mut self, values: &ArrayRef, weight: i64) -> datafusion::common::Result<()> {
        let values = arrow::compute::cast(values, &DataType::Int64)?;
        let values = values.as_primitive::<Int64Type>();
        for i in 0..values.len() {
            if values.is_valid(i) {
                self.sum += values.value(i) as i128 * weight as i128;
                self.n += weight;
            }
        }
        Ok(())
    }
}

impl Accumulator for IntAvg {
    fn update_batch(&mut self, values: &[ArrayRef]) -> datafusion::common::Result<()> {
        self.apply(&values[0], 1)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> datafusion::common::Result<()> {
        self.apply(&values[0], -1)
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn evaluate(&mut self) -> datafusion::common::Result<ScalarValue> {
        Ok(ScalarValue::Decimal128(
            int_avg_value(self.n, self.sum),
            38,
            AVG_SCALE,
        ))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }

    fn state(&mut self) -> datafusion::common::Result<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::Int64(Some(self.n)),
            ScalarValue::Decimal128(Some(self.sum), 38, 0),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> datafusion::common::Result<()> {
        let n: &Int64Array = states[0].as_primitive();
        let sums: &Decimal128Array = states[1].as_primitive::<Decimal128Type>();
        for i in 0..n.len() {
            if n.is_null(i) || sums.is_null(i) {
                continue;
            }
            self.sum += sums.value(i);
            self.n += n.value(i);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int32Array;
    use arrow::datatypes::DecimalType;

    fn text(v: Option<i128>) -> String {
        v.map(|v| Decimal128Type::format_decimal(v, 38, AVG_SCALE))
            .unwrap_or_else(|| "NULL".into())
    }

    #[test]
    fn averages_round_half_away_from_zero_at_16_decimals() {
        // PostgreSQL 15: avg of (1, 2) is 1.5000000000000000; of (1, 2, 2) 1.6666666666666667;
        // of (-1, -2, -2) -1.6666666666666667.
        assert_eq!(text(int_avg_value(2, 3)), "1.5000000000000000");
        assert_eq!(text(int_avg_value(3, 5)), "1.6666666666666667");
        assert_eq!(text(int_avg_value(3, -5)), "-1.6666666666666667");
        assert_eq!(text(int_avg_value(0, 0)), "NULL");
        // Two bigints of 2^63 - 1: the sum passes 2^64, the average is exact.
        let max = i64::MAX as i128;
        assert_eq!(
            text(int_avg_value(2, 2 * max)),
            "9223372036854775807.0000000000000000"
        );
    }

    #[test]
    fn retraction_and_merge_keep_the_exact_sum() {
        let mut a = IntAvg { n: 0, sum: 0 };
        a.update_batch(&[Arc::new(Int32Array::from(vec![
            Some(1),
            None,
            Some(2),
            Some(9),
        ]))])
        .unwrap();
        a.retract_batch(&[Arc::new(Int32Array::from(vec![9]))])
            .unwrap();
        let mut b = IntAvg { n: 0, sum: 0 };
        b.update_batch(&[Arc::new(Int64Array::from(vec![i64::MAX, i64::MAX]))])
            .unwrap();
        let state = b.state().unwrap();
        let arrays: Vec<ArrayRef> = state.iter().map(|s| s.to_array().unwrap()).collect();
        a.merge_batch(&arrays).unwrap();
        // (1 + 2 + 2 (2^63 - 1)) / 4
        let expected = (3 + 2 * (i64::MAX as i128)) * 10i128.pow(16) / 4;
        assert_eq!(
            a.evaluate().unwrap(),
            ScalarValue::Decimal128(Some(expected), 38, AVG_SCALE)
        );
    }
}

//! `sum(real)` and `sum(double precision)` as PostgreSQL types and checks them (docs, 9.21
//! "Aggregate Functions"; `float4pl` / `float8pl` in `float.c`):
//!
//! ```text
//!  sum(real)             -> real               22003 "value out of range: overflow"
//!  sum(double precision) -> double precision   when the sum of finite values is infinite
//! ```
//!
//! DataFusion's `sum` of a `real` column is `double precision` and overflows to `Infinity`.
//! [`PgFloatSum`] keeps an [`ExactSum`] (so batch queries, window frames and views, which keep
//! the same accumulator in their state tables, give the same correctly rounded sum, and a
//! retraction leaves no residue); [`crate::sql::semantics::PgSumTypes`] puts it in place of
//! `sum` for floating-point arguments.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, Int64Array};
use arrow::datatypes::{DataType, Field, FieldRef, Float64Type};
use datafusion::common::{DataFusionError, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature, Volatility};

use crate::common::exact_sum::ExactSum;
use crate::error::Error;

/// `sum` over `real` (`Float32`, result `Float32`) or `double precision` (`Float64`, result
/// `Float64`). State: the count of non-NULL values (`Int64`) and the [`ExactSum`]'s bytes
/// (`Binary`). Evaluation fails with 22003 as the module docs say.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgFloatSum {
    signature: Signature,
}

impl PgFloatSum {
    /// The aggregate, for `real` and `double precision` arguments only.
    pub fn new() -> Self {
        PgFloatSum {
            signature: Signature::uniform(
                1,
                vec![DataType::Float32, DataType::Float64],
                Volatility::Immutable,
            ),
        }
    }
}

impl Default for PgFloatSum {
    fn default() -> Self {
        Self::new()
    }
}

impl AggregateUDFImpl for PgFloatSum {
    fn name(&self) -> &str {
        "sum"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(match arg_types.first() {
            Some(DataType::Float32 | DataType::Float16) => DataType::Float32,
            _ => DataType::Float64,
        })
    }

    fn accumulator(
        &self,
        args: AccumulatorArgs<'_>,
    ) -> datafusion::common::Result<Box<dyn Accumulator>> {
        Ok(Box::new(FloatSum {
            real: args.return_field.data_type() == &DataType::Float32,
            avg: false,
            n: 0,
            sum: ExactSum::default(),
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> datafusion::common::Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new(
                format_state_name(args.name, "n"),
                DataType::Int64,
                true,
            )),
            Arc::new(Field::new(
                format_state_name(args.name, "sum"),
                DataType::Binary,
                true,
            )),
        ])
    }
}

/// One group's sum: the count of non-NULL values and their exact sum.
#[derive(Debug)]
struct FloatSum {
    /// The result is `real`.
    real: bool,
    /// The result is the average (a `double precision`), not the sum.
    avg: bool,
    n: i64,
    sum: ExactSum,
}

impl FloatSum {
    /// Adds (`weight` 1) or retracts (-1) the non-NULL values of `values`.
    fn apply(&mut self, values: &ArrayRef, weight: i64) -> datafusion::common::Result<()> {
        let values = arrow::compute::cast(values, &DataType::Float64)?;
        let values = values.as_primitive::<Float64Type>();
        for i in 0..values.len() {
            if values.is_valid(i) {
                self.sum.add(values.value(i), weight);
                self.n += weight;
            }
        }
        Ok(())
    }
}

/// The accumulator of `avg(real)` and `avg(double precision)` (result `double precision`)
/// over a window frame that slides: the exact sum of the frame's values divided by their
/// count, as PostgreSQL computes each frame's average afresh (its float `avg` has no inverse
/// transition: docs, 38.12.1 "Moving-Aggregate Mode"). DataFusion's running sum kept a
/// residue of the values that left the frame (`1e20, 1, 1` over two rows gave 0.5 for the
/// last frame, not 1). Fails with 22003 as [`float_sum_value`] when the sum overflows.
pub fn float_avg_accumulator() -> Box<dyn Accumulator> {
    Box::new(FloatSum {
        real: false,
        avg: true,
        n: 0,
        sum: ExactSum::default(),
    })
}

/// The value of a float sum of `n` non-NULL values whose exact sum is `sum`, as PostgreSQL's
/// `sum(real)` (`real`, a `Float32`) or `sum(double precision)` (a `Float64`) gives it: NULL
/// for no values. Views' aggregates evaluate their sums with it too.
///
/// # Errors
/// 22003 `value out of range: overflow` when the sum of finite values overflows the type.
pub fn float_sum_value(n: i64, sum: &ExactSum, real: bool) -> crate::error::Result<ScalarValue> {
    let overflow = || Error::data("22003", "value out of range: overflow");
    Ok(match (real, n == 0) {
        (true, true) => ScalarValue::Float32(None),
        (true, false) => ScalarValue::Float32(Some(sum.pg_value_f32().ok_or_else(overflow)?)),
        (false, true) => ScalarValue::Float64(None),
        (false, false) => ScalarValue::Float64(Some(sum.pg_value_f64().ok_or_else(overflow)?)),
    })
}

impl Accumulator for FloatSum {
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
        let sum = float_sum_value(self.n, &self.sum, self.real && !self.avg)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(match sum {
            ScalarValue::Float64(Some(s)) if self.avg => {
                ScalarValue::Float64(Some(s / self.n as f64))
            }
            other => other,
        })
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + ExactSum::HEAP_BYTES
    }

    fn state(&mut self) -> datafusion::common::Result<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::Int64(Some(self.n)),
            ScalarValue::Binary(Some(self.sum.to_bytes())),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> datafusion::common::Result<()> {
        let n: &Int64Array = states[0].as_primitive();
        let sums: &BinaryArray = states[1].as_binary();
        for i in 0..n.len() {
            if n.is_null(i) || sums.is_null(i) {
                continue;
            }
            let other = ExactSum::from_bytes(sums.value(i)).ok_or_else(|| {
                DataFusionError::Internal("float sum state that does not decode".into())
            })?;
            self.sum.merge(&other);
            self.n += n.value(i);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float32Array, Float64Array};

    fn acc(real: bool) -> FloatSum {
        FloatSum {
            real,
            avg: false,
            n: 0,
            sum: ExactSum::default(),
        }
    }

    #[test]
    fn real_sum_is_real_and_overflow_is_22003() {
        let mut a = acc(true);
        let v: ArrayRef = Arc::new(Float32Array::from(vec![Some(0.1f32), None, Some(0.2)]));
        a.update_batch(&[v]).unwrap();
        // 0.1f32 + 0.2f32 exactly is 0.300000004470348358154296875, nearest f32 0.3f32.
        assert_eq!(a.evaluate().unwrap(), ScalarValue::Float32(Some(0.3)));

        let mut a = acc(true);
        let big: ArrayRef = Arc::new(Float32Array::from(vec![3e38f32, 3e38]));
        a.update_batch(&[big]).unwrap();
        let e = a.evaluate().unwrap_err().to_string();
        assert!(e.contains("value out of range: overflow"), "{e}");
        // Taking one back brings it into range again.
        a.retract_batch(&[Arc::new(Float32Array::from(vec![3e38f32]))])
            .unwrap();
        assert_eq!(a.evaluate().unwrap(), ScalarValue::Float32(Some(3e38)));
    }

    #[test]
    fn double_sum_overflows_only_without_infinite_inputs() {
        let mut a = acc(false);
        a.update_batch(&[Arc::new(Float64Array::from(vec![1e308, 1e308]))])
            .unwrap();
        assert!(a.evaluate().is_err());
        a.update_batch(&[Arc::new(Float64Array::from(vec![f64::INFINITY]))])
            .unwrap();
        assert_eq!(
            a.evaluate().unwrap(),
            ScalarValue::Float64(Some(f64::INFINITY))
        );
        let mut empty = acc(false);
        empty
            .update_batch(&[Arc::new(Float64Array::from(vec![None::<f64>]))])
            .unwrap();
        assert_eq!(empty.evaluate().unwrap(), ScalarValue::Float64(None));
    }

    #[test]
    fn sliding_average_keeps_no_residue() {
        let mut a = float_avg_accumulator();
        a.update_batch(&[Arc::new(Float64Array::from(vec![1e20, 1.0]))])
            .unwrap();
        a.retract_batch(&[Arc::new(Float64Array::from(vec![1e20]))])
            .unwrap();
        a.update_batch(&[Arc::new(Float64Array::from(vec![Some(2.0), None]))])
            .unwrap();
        // (1 + 2) / 2 exactly; a running sum would give (0 + 2) / 2.
        assert_eq!(a.evaluate().unwrap(), ScalarValue::Float64(Some(1.5)));
        a.retract_batch(&[Arc::new(Float64Array::from(vec![1.0, 2.0]))])
            .unwrap();
        assert_eq!(a.evaluate().unwrap(), ScalarValue::Float64(None));
    }

    #[test]
    fn states_merge() {
        let mut a = acc(false);
        a.update_batch(&[Arc::new(Float64Array::from(vec![1e20, 1.0]))])
            .unwrap();
        let mut b = acc(false);
        b.update_batch(&[Arc::new(Float64Array::from(vec![-1e20]))])
            .unwrap();
        let state = b.state().unwrap();
        let arrays: Vec<ArrayRef> = state.iter().map(|s| s.to_array().unwrap()).collect();
        a.merge_batch(&arrays).unwrap();
        // Exactly 1 (a running f64 sum would give 0).
        assert_eq!(a.evaluate().unwrap(), ScalarValue::Float64(Some(1.0)));
    }
}

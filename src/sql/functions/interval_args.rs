//! `coalesce`, `nullif`, `greatest` and `least` over intervals and the date and time types,
//! as PostgreSQL has them:
//! - an `interval`, `timestamp`, `timestamptz`, `date` or `time` argument beside untyped
//!   literals (`coalesce(iv, '1 hour')`, `coalesce(ts, '2024-01-01')`) makes them of its type
//!   (docs 10.5 "UNION, CASE, and Related Constructs": an `unknown` input takes the type of
//!   the others), where DataFusion finds no common type with `text` and the call fails while
//!   it is planned;
//! - `greatest` and `least` of intervals compare them as PostgreSQL's `interval_cmp` does (a
//!   month is 30 days, a day 24 hours: `greatest('1 mon', '29 days 25 hours')` is the
//!   second), where DataFusion compares months, then days, then nanoseconds. Of equal values
//!   the first is kept (`greatest('24 hours', '1 day')` is `24:00:00`), as PostgreSQL's
//!   `ExecEvalMinMax` keeps it;
//! - `nullif` of intervals or floats compares them as `=` does (`nullif('1 day', '24 hours')`
//!   and `nullif('-0'::float8, 0)` are NULL), where DataFusion compared their bits.
//!
//! Every other call is DataFusion's function, which these wrap.

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, IntervalMonthDayNanoArray};
use arrow::datatypes::{DataType, FieldRef, IntervalMonthDayNano, IntervalUnit};
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};

use crate::sql::semantics::{interval_cmp_value, shape_result};

/// DataFusion's `coalesce`, `nullif`, `greatest` or `least` (`inner`), whose argument types
/// resolve a date, time or interval type beside text or NULL arguments to that type for all
/// of them, and which picks the greatest or least of intervals by PostgreSQL's order.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct IntervalArgs {
    inner: ScalarUDF,
    /// `Greater` for `greatest`, `Less` for `least`, `None` for `coalesce` and `nullif`.
    pick: Option<Ordering>,
    /// A user-defined signature in place of the inner function's own (`nullif`'s is
    /// "comparable", whose coercion [`ScalarUDFImpl::coerce_types`] would not see).
    signature: Option<Signature>,
}

impl IntervalArgs {
    /// `coalesce`, wrapping DataFusion's (`inner`).
    pub fn coalesce(inner: ScalarUDF) -> Self {
        IntervalArgs {
            inner,
            pick: None,
            signature: None,
        }
    }

    /// `nullif`, wrapping DataFusion's (`inner`); other argument types coerce as its own
    /// signature does.
    pub fn nullif(inner: ScalarUDF) -> Self {
        IntervalArgs {
            inner,
            pick: None,
            signature: Some(Signature::user_defined(Volatility::Immutable)),
        }
    }

    /// `greatest`, wrapping DataFusion's (`inner`).
    pub fn greatest(inner: ScalarUDF) -> Self {
        IntervalArgs {
            inner,
            pick: Some(Ordering::Greater),
            signature: None,
        }
    }

    /// `least`, wrapping DataFusion's (`inner`).
    pub fn least(inner: ScalarUDF) -> Self {
        IntervalArgs {
            inner,
            pick: Some(Ordering::Less),
            signature: None,
        }
    }
}

/// Of each row's non-NULL intervals in `args`, the first that no later one beats in
/// direction `pick` by [`interval_cmp_value`]; NULL when all are NULL.
fn pick_intervals(args: &[ColumnarValue], rows: usize, pick: Ordering) -> Result<ArrayRef> {
    let arrays = args
        .iter()
        .map(|a| a.to_array(rows))
        .collect::<Result<Vec<_>>>()?;
    let arrays = arrays
        .iter()
        .map(|a| {
            a.as_any()
                .downcast_ref::<IntervalMonthDayNanoArray>()
                .ok_or_else(|| {
                    DataFusionError::Internal(format!(
                        "an interval argument of type {}",
                        a.data_type()
                    ))
                })
        })
        .collect::<Result<Vec<_>>>()?;
    let out: IntervalMonthDayNanoArray = (0..rows)
        .map(|i| {
            let mut best: Option<IntervalMonthDayNano> = None;
            for a in &arrays {
                if a.is_null(i) {
                    continue;
                }
                let v = a.value(i);
                let beats =
                    best.is_none_or(|b| interval_cmp_value(v).cmp(&interval_cmp_value(b)) == pick);
                if beats {
                    best = Some(v);
                }
            }
            best
        })
        .collect();
    Ok(Arc::new(out))
}

/// The type of every argument when one is an `interval`, `timestamp[tz]`, `date` or `time`
/// and the others are of that type, text or untyped NULLs (at least one text); `None`
/// otherwise.
fn temporal_args(arg_types: &[DataType]) -> Option<Vec<DataType>> {
    let temporal = arg_types.iter().find(|t| {
        matches!(
            t,
            DataType::Interval(_)
                | DataType::Timestamp(..)
                | DataType::Date32
                | DataType::Time32(_)
                | DataType::Time64(_)
        )
    })?;
    let target = match temporal {
        DataType::Interval(_) => DataType::Interval(IntervalUnit::MonthDayNano),
        other => other.clone(),
    };
    let textual =
        |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    (arg_types.iter().any(textual)
        && arg_types
            .iter()
            .all(|t| textual(t) || t.is_null() || t == temporal))
    .then(|| vec![target; arg_types.len()])
}

/// `nullif(a, b)` of intervals: NULL where `a = b` as PostgreSQL compares intervals
/// (`nullif('1 day', '24 hours')` is NULL), else `a`.
fn nullif_intervals(args: &[ColumnarValue], rows: usize) -> Result<ArrayRef> {
    let arrays = args
        .iter()
        .map(|a| a.to_array(rows))
        .collect::<Result<Vec<_>>>()?;
    let [a, b] = arrays.as_slice() else {
        return Err(DataFusionError::Internal("nullif of two arguments".into()));
    };
    let (Some(a), Some(b)) = (
        a.as_any().downcast_ref::<IntervalMonthDayNanoArray>(),
        b.as_any().downcast_ref::<IntervalMonthDayNanoArray>(),
    ) else {
        return Err(DataFusionError::Internal(
            "nullif of two intervals of one unit".into(),
        ));
    };
    let out: IntervalMonthDayNanoArray = a
        .iter()
        .zip(b.iter())
        .map(|(x, y)| match (x, y) {
            (Some(x), Some(y)) if interval_cmp_value(x) == interval_cmp_value(y) => None,
            (x, _) => x,
        })
        .collect();
    Ok(Arc::new(out))
}

/// `nullif(a, b)` of floats: NULL where `a = b` as PostgreSQL compares floats (`-0 = 0`,
/// `NaN = NaN`: `nullif('-0'::float8, 0)` is NULL, so `y / nullif(f, 0)` never divides by a
/// zero), else `a`, of `a`'s type (`real` or `double precision`).
fn nullif_floats(args: &[ColumnarValue], rows: usize) -> Result<ArrayRef> {
    let arrays = args
        .iter()
        .map(|a| a.to_array(rows))
        .collect::<Result<Vec<_>>>()?;
    let [a, b] = arrays.as_slice() else {
        return Err(DataFusionError::Internal("nullif of two arguments".into()));
    };
    let out_type = a.data_type().clone();
    let as_f64 = |x: &ArrayRef| -> Result<Float64Array> {
        Ok(arrow::compute::cast(x, &DataType::Float64)?
            .as_primitive::<arrow::datatypes::Float64Type>()
            .clone())
    };
    let (x, y) = (as_f64(a)?, as_f64(b)?);
    let key = crate::sql::equal_keys::float_key64;
    let out: Float64Array = x
        .iter()
        .zip(y.iter())
        .map(|(x, y)| match (x, y) {
            (Some(x), Some(y)) if key(x).to_bits() == key(y).to_bits() => None,
            (x, _) => x,
        })
        .collect();
    Ok(arrow::compute::cast(&out, &out_type)?)
}

impl ScalarUDFImpl for IntervalArgs {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        self.inner.inner().schema_name(args)
    }

    fn signature(&self) -> &Signature {
        self.signature
            .as_ref()
            .unwrap_or_else(|| self.inner.signature())
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn is_strict(&self) -> bool {
        self.inner.inner().is_strict()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let intervals = matches!(args.return_field.data_type(), DataType::Interval(_));
        match self.pick {
            Some(pick) if intervals => {
                let out = pick_intervals(&args.args, args.number_rows, pick)?;
                shape_result(&args.args, out)
            }
            None if intervals && self.signature.is_some() => {
                let out = nullif_intervals(&args.args, args.number_rows)?;
                shape_result(&args.args, out)
            }
            None if self.signature.is_some()
                && matches!(
                    args.return_field.data_type(),
                    DataType::Float64 | DataType::Float32
                ) =>
            {
                let out = nullif_floats(&args.args, args.number_rows)?;
                shape_result(&args.args, out)
            }
            _ => self.inner.invoke_with_args(args),
        }
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        self.inner.inner().simplify(args, info)
    }

    fn conditional_arguments<'a>(
        &self,
        args: &'a [Expr],
    ) -> Option<(Vec<&'a Expr>, Vec<&'a Expr>)> {
        self.inner.inner().conditional_arguments(args)
    }

    fn short_circuits(&self) -> bool {
        self.inner.short_circuits()
    }

    fn output_ordering(&self, inputs: &[ExprProperties]) -> Result<SortProperties> {
        self.inner.output_ordering(inputs)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match temporal_args(arg_types) {
            Some(types) => Ok(types),
            // The inner function's own signature (`nullif`'s "comparable").
            None if self.signature.is_some() => super::coerce_as_signature(arg_types, &self.inner),
            None => self.inner.coerce_types(arg_types),
        }
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_time_or_interval_beside_text_or_null_makes_them_all_of_its_type() {
        let iv = DataType::Interval(IntervalUnit::MonthDayNano);
        assert_eq!(
            temporal_args(&[iv.clone(), DataType::Utf8, DataType::Null]),
            Some(vec![iv.clone(); 3])
        );
        let ts = DataType::Timestamp(arrow::datatypes::TimeUnit::Nanosecond, None);
        assert_eq!(
            temporal_args(&[DataType::Utf8, ts.clone()]),
            Some(vec![ts.clone(); 2])
        );
        assert_eq!(temporal_args(&[iv.clone(), iv.clone()]), None);
        assert_eq!(temporal_args(&[iv.clone(), DataType::Int64]), None);
        assert_eq!(temporal_args(&[ts, DataType::Date32, DataType::Utf8]), None);
        assert_eq!(temporal_args(&[DataType::Utf8, DataType::Utf8]), None);
    }

    #[test]
    fn greatest_and_least_compare_intervals_as_postgresql() {
        let iv = |months, days, hours: i64| {
            Some(IntervalMonthDayNano::new(
                months,
                days,
                hours * 3_600_000_000_000,
            ))
        };
        let col = |v: Vec<Option<IntervalMonthDayNano>>| {
            ColumnarValue::Array(Arc::new(IntervalMonthDayNanoArray::from(v)))
        };
        // Row 0: '1 mon' and '29 days 25 hours' (the second is greater); row 1: '24 hours'
        // and '1 day' (equal: the first is kept); row 2: NULL and '1 day'; row 3: NULLs.
        let args = [
            col(vec![iv(1, 0, 0), iv(0, 0, 24), None, None]),
            col(vec![iv(0, 29, 25), iv(0, 1, 0), iv(0, 1, 0), None]),
        ];
        let greatest = pick_intervals(&args, 4, Ordering::Greater).unwrap();
        let greatest = greatest
            .as_any()
            .downcast_ref::<IntervalMonthDayNanoArray>()
            .unwrap();
        let want: IntervalMonthDayNanoArray =
            vec![iv(0, 29, 25), iv(0, 0, 24), iv(0, 1, 0), None].into();
        assert_eq!(greatest, &want);
        let least = pick_intervals(&args, 4, Ordering::Less).unwrap();
        let least = least
            .as_any()
            .downcast_ref::<IntervalMonthDayNanoArray>()
            .unwrap();
        let want: IntervalMonthDayNanoArray =
            vec![iv(1, 0, 0), iv(0, 0, 24), iv(0, 1, 0), None].into();
        assert_eq!(least, &want);
    }
}

//! `coalesce`, `greatest` and `least` over intervals, as PostgreSQL has them:
//! - an `interval` argument beside untyped literals (`coalesce(iv, '1 hour')`) makes them
//!   intervals (docs 10.5 "UNION, CASE, and Related Constructs": an `unknown` input takes the
//!   type of the others), where DataFusion finds no common type of `interval` and `text` and
//!   the call fails while it is planned;
//! - `greatest` and `least` of intervals compare them as PostgreSQL's `interval_cmp` does (a
//!   month is 30 days, a day 24 hours: `greatest('1 mon', '29 days 25 hours')` is the
//!   second), where DataFusion compares months, then days, then nanoseconds. Of equal values
//!   the first is kept (`greatest('24 hours', '1 day')` is `24:00:00`), as PostgreSQL's
//!   `ExecEvalMinMax` keeps it.
//!
//! Every other call is DataFusion's function, which these wrap.

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, IntervalMonthDayNanoArray};
use arrow::datatypes::{DataType, FieldRef, IntervalMonthDayNano, IntervalUnit};
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature,
};

use crate::sql::semantics::{interval_cmp_value, shape_result};

/// DataFusion's `coalesce`, `greatest` or `least` (`inner`), whose argument types resolve
/// an `interval` beside text or NULL arguments to `interval` for all of them, and which
/// picks the greatest or least of intervals by PostgreSQL's order.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct IntervalArgs {
    inner: ScalarUDF,
    /// `Greater` for `greatest`, `Less` for `least`, `None` for `coalesce`.
    pick: Option<Ordering>,
}

impl IntervalArgs {
    /// `coalesce`, wrapping DataFusion's (`inner`).
    pub fn coalesce(inner: ScalarUDF) -> Self {
        IntervalArgs { inner, pick: None }
    }

    /// `greatest`, wrapping DataFusion's (`inner`).
    pub fn greatest(inner: ScalarUDF) -> Self {
        IntervalArgs {
            inner,
            pick: Some(Ordering::Greater),
        }
    }

    /// `least`, wrapping DataFusion's (`inner`).
    pub fn least(inner: ScalarUDF) -> Self {
        IntervalArgs {
            inner,
            pick: Some(Ordering::Less),
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

/// `interval` for every argument when one is an `interval` and the others are intervals,
/// text or untyped NULLs; `None` otherwise.
fn intervals(arg_types: &[DataType]) -> Option<Vec<DataType>> {
    let interval = |t: &DataType| matches!(t, DataType::Interval(_));
    let fits = |t: &DataType| {
        interval(t)
            || matches!(
                t,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
            )
    };
    (arg_types.iter().any(interval)
        && !arg_types.iter().all(interval)
        && arg_types.iter().all(fits))
    .then(|| vec![DataType::Interval(IntervalUnit::MonthDayNano); arg_types.len()])
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
        self.inner.signature()
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
        match self.pick {
            Some(pick) if matches!(args.return_field.data_type(), DataType::Interval(_)) => {
                let out = pick_intervals(&args.args, args.number_rows, pick)?;
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
        match intervals(arg_types) {
            Some(types) => Ok(types),
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
    fn an_interval_beside_text_or_null_makes_them_all_intervals() {
        let iv = DataType::Interval(IntervalUnit::MonthDayNano);
        assert_eq!(
            intervals(&[iv.clone(), DataType::Utf8, DataType::Null]),
            Some(vec![iv.clone(); 3])
        );
        assert_eq!(intervals(&[iv.clone(), iv.clone()]), None);
        assert_eq!(intervals(&[iv.clone(), DataType::Int64]), None);
        assert_eq!(intervals(&[DataType::Utf8, DataType::Utf8]), None);
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

//! The bounds of session windows: `weir_session_start(ts, gap)` and `weir_session_end(ts,
//! gap)`, window functions over `PARTITION BY key ORDER BY ts` that the `SESSION` window table
//! function ([`crate::sql::windows`]) is rewritten into.
//!
//! A session is a maximal run of a partition's rows, in time order, in which each row follows
//! the one before by at most `gap`: Flink SQL's session windows ("Windowing table-valued
//! functions", `SESSION`), where each row opens the window `[ts, ts + gap]` and windows that
//! intersect (`TimeWindow.intersects`: touching ends count) merge. A row's `window_start` is
//! the time of its session's first row and its `window_end` the time of the last row plus
//! `gap`:
//!
//! ```text
//!  ts (gap 10 s):  00:00  00:04  00:14  00:30  00:40
//!  window_start    00:00  00:00  00:00  00:30  00:30
//!  window_end      00:24  00:24  00:24  00:50  00:50
//! ```
//!
//! A row whose `ts` is NULL is in no session (both bounds NULL). `gap` is a fixed duration:
//! an interval's days count as 24 hours; months are refused. The functions sort the partition
//! themselves, so they hold under any `ORDER BY`; the streaming operator
//! ([`crate::stream::ops::over_window`]) evaluates them over the sessions a change touches only.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use arrow::datatypes::{DataType, Field, FieldRef, IntervalMonthDayNano, TimeUnit};
use datafusion::common::{Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::function::{PartitionEvaluatorArgs, WindowUDFFieldArgs};
use datafusion::logical_expr::{
    PartitionEvaluator, Signature, Volatility, WindowUDF, WindowUDFImpl,
};
use datafusion::physical_expr::PhysicalExpr;

/// Name of the function giving a row's session start.
pub const SESSION_START: &str = "weir_session_start";
/// Name of the function giving a row's session end (its last row's time plus the gap).
pub const SESSION_END: &str = "weir_session_end";

/// Nanoseconds per day.
const NS_PER_DAY: i64 = 86_400_000_000_000;

/// `weir_session_start` or `weir_session_end` (see the module docs). Arguments: a timestamp
/// or date-free time column (`Timestamp` of any unit and zone) and the gap (an interval);
/// result: the timestamp's type.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SessionBound {
    end: bool,
    signature: Signature,
}

impl SessionBound {
    /// The start (`end` false) or end function.
    pub fn new(end: bool) -> Self {
        SessionBound {
            end,
            signature: Signature::any(2, Volatility::Immutable),
        }
    }

    /// Both functions, to register.
    pub fn all() -> [WindowUDF; 2] {
        [
            WindowUDF::new_from_impl(SessionBound::new(false)),
            WindowUDF::new_from_impl(SessionBound::new(true)),
        ]
    }
}

impl WindowUDFImpl for SessionBound {
    fn name(&self) -> &str {
        if self.end { SESSION_END } else { SESSION_START }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn expressions(
        &self,
        expr_args: datafusion::logical_expr::function::ExpressionArgs<'_>,
    ) -> Vec<Arc<dyn PhysicalExpr>> {
        // Both arguments (the default passes the first alone).
        expr_args.input_exprs().to_vec()
    }

    fn partition_evaluator(
        &self,
        _args: PartitionEvaluatorArgs<'_>,
    ) -> Result<Box<dyn PartitionEvaluator>> {
        Ok(Box::new(SessionEvaluator { end: self.end }))
    }

    fn field(&self, field_args: WindowUDFFieldArgs<'_>) -> Result<FieldRef> {
        let types: Vec<DataType> = field_args
            .input_fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        match types.as_slice() {
            [t @ DataType::Timestamp(_, _), DataType::Interval(_)] => {
                Ok(Arc::new(Field::new(field_args.name(), t.clone(), true)))
            }
            _ => plan_err!(
                "{} takes a timestamp and an interval, not {types:?}",
                self.name()
            ),
        }
    }
}

/// Evaluates one partition of [`SessionBound`].
#[derive(Debug)]
struct SessionEvaluator {
    end: bool,
}

impl PartitionEvaluator for SessionEvaluator {
    fn evaluate_all(&mut self, values: &[ArrayRef], num_rows: usize) -> Result<ArrayRef> {
        let [ts, gap] = values else {
            return exec_err!("session bounds take two arguments");
        };
        let DataType::Timestamp(unit, _) = ts.data_type() else {
            return exec_err!("session bounds take a timestamp, not {}", ts.data_type());
        };
        let gap = match (!gap.is_empty())
            .then(|| ScalarValue::try_from_array(gap, 0))
            .transpose()?
        {
            Some(ScalarValue::IntervalMonthDayNano(Some(v))) => gap_in(v, *unit)?,
            Some(ScalarValue::IntervalDayTime(Some(v))) => gap_in(
                IntervalMonthDayNano::new(0, v.days, i64::from(v.milliseconds) * 1_000_000),
                *unit,
            )?,
            None => 0,
            Some(other) => return exec_err!("a session gap must be an interval, not {other}"),
        };
        let raw = arrow::compute::cast(ts, &DataType::Int64)?;
        let raw = raw.as_primitive::<arrow::datatypes::Int64Type>();
        let bounds = session_bounds(raw, gap, self.end, num_rows)?;
        Ok(arrow::compute::cast(&bounds, ts.data_type())?)
    }
}

/// `gap` in `unit`s of a timestamp.
///
/// # Errors
/// A gap with months, or one that is not positive.
fn gap_in(gap: IntervalMonthDayNano, unit: TimeUnit) -> Result<i64> {
    if gap.months != 0 {
        return exec_err!("a session gap cannot have months");
    }
    let ns = i64::from(gap.days)
        .saturating_mul(NS_PER_DAY)
        .saturating_add(gap.nanoseconds);
    if ns <= 0 {
        return exec_err!("a session gap must be positive");
    }
    Ok(match unit {
        TimeUnit::Second => ns / 1_000_000_000,
        TimeUnit::Millisecond => ns / 1_000_000,
        TimeUnit::Microsecond => ns / 1_000,
        TimeUnit::Nanosecond => ns,
    })
}

/// For each of the `n` times in `ts` (in any order), its session's start or end (see the
/// module docs); NULL for a NULL time. O(n log n).
///
/// # Errors
/// `22008` `timestamp out of range` for an end past the largest timestamp (as PostgreSQL's
/// `timestamp + interval` reports it).
fn session_bounds(
    ts: &arrow::array::Int64Array,
    gap: i64,
    end: bool,
    n: usize,
) -> Result<ArrayRef> {
    let mut order: Vec<usize> = (0..n).filter(|&i| ts.is_valid(i)).collect();
    order.sort_by_key(|&i| ts.value(i));
    let mut out: Vec<Option<i64>> = vec![None; n];
    let mut first = 0;
    while first < order.len() {
        let mut last = first;
        while last + 1 < order.len()
            && ts
                .value(order[last + 1])
                .saturating_sub(ts.value(order[last]))
                <= gap
        {
            last += 1;
        }
        let bound = if end {
            ts.value(order[last]).checked_add(gap).ok_or_else(|| {
                datafusion::common::DataFusionError::External(Box::new(crate::error::Error::data(
                    "22008",
                    "timestamp out of range",
                )))
            })?
        } else {
            ts.value(order[first])
        };
        for &i in &order[first..=last] {
            out[i] = Some(bound);
        }
        first = last + 1;
    }
    Ok(Arc::new(Int64Array::from(out)))
}

/// The gap of a session bound call, in nanoseconds, if `e` is the literal interval the
/// rewrite passes (a positive fixed duration).
pub fn literal_gap_ns(e: &datafusion::logical_expr::Expr) -> Option<i64> {
    use datafusion::logical_expr::Expr;
    let value = match e {
        Expr::Literal(v, _) => v,
        Expr::Cast(c) => return literal_gap_ns(&c.expr),
        _ => return None,
    };
    let gap = match value {
        ScalarValue::IntervalMonthDayNano(Some(v)) => *v,
        ScalarValue::IntervalDayTime(Some(v)) => {
            IntervalMonthDayNano::new(0, v.days, i64::from(v.milliseconds) * 1_000_000)
        }
        _ => return None,
    };
    gap_in(gap, TimeUnit::Nanosecond).ok()
}

/// Nanoseconds per `unit` of a timestamp.
pub fn unit_ns(unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The module docs' example, worked out by hand, with the rows out of order and a NULL.
    #[test]
    fn sessions_merge_rows_at_most_a_gap_apart() {
        let s = 1_000;
        let ts = Int64Array::from(vec![
            Some(14 * s),
            Some(0),
            None,
            Some(40 * s),
            Some(4 * s),
            Some(30 * s),
        ]);
        let start = session_bounds(&ts, 10 * s, false, 6).unwrap();
        let end = session_bounds(&ts, 10 * s, true, 6).unwrap();
        let v = |a: &ArrayRef| -> Vec<Option<i64>> {
            a.as_primitive::<arrow::datatypes::Int64Type>()
                .iter()
                .collect()
        };
        assert_eq!(
            v(&start),
            [Some(0), Some(0), None, Some(30 * s), Some(0), Some(30 * s)]
        );
        assert_eq!(
            v(&end),
            [
                Some(24 * s),
                Some(24 * s),
                None,
                Some(50 * s),
                Some(24 * s),
                Some(50 * s)
            ]
        );
    }

    /// Rows exactly a gap apart share a session (Flink's windows merge when they touch);
    /// one nanosecond more splits them.
    #[test]
    fn touching_windows_merge() {
        let ts = Int64Array::from(vec![0, 10, 21]);
        let start = session_bounds(&ts, 10, false, 3).unwrap();
        assert_eq!(
            start
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec(),
            [0, 0, 21]
        );
    }

    /// An end past the largest timestamp is PostgreSQL's `22008`, not a clamped time.
    #[test]
    fn end_out_of_range() {
        let ts = Int64Array::from(vec![i64::MAX - 5]);
        let e = session_bounds(&ts, 10, true, 1).unwrap_err();
        assert!(e.to_string().contains("timestamp out of range"), "{e}");
        assert!(session_bounds(&ts, 10, false, 1).is_ok());
    }

    #[test]
    fn gap_units() {
        let g = IntervalMonthDayNano::new(0, 1, 500_000_000);
        assert_eq!(gap_in(g, TimeUnit::Millisecond).unwrap(), 86_400_500);
        assert!(gap_in(IntervalMonthDayNano::new(1, 0, 0), TimeUnit::Second).is_err());
        assert!(gap_in(IntervalMonthDayNano::new(0, 0, -1), TimeUnit::Second).is_err());
    }
}

//! `justify_hours`, `justify_days` and `justify_interval` (PostgreSQL docs, 9.9 "Date/Time
//! Functions"), and the difference of two timestamps, which PostgreSQL's `timestamp_mi`
//! returns justified into days and time:
//!
//! ```text
//!  justify_hours(INTERVAL '27 hours')                 1 day 03:00:00
//!  justify_days(INTERVAL '35 days')                   1 mon 5 days
//!  justify_interval(INTERVAL '1 mon -1 hour')         29 days 23:00:00
//!  TIMESTAMP '2020-01-03 05:00' - TIMESTAMP '2020-01-01'   2 days 05:00:00   (DataFusion: 53:00:00)
//! ```
//!
//! A day is 24 hours and a month 30 days here, as in PostgreSQL; each part keeps the sign
//! of the whole where PostgreSQL's functions make it so.

use std::sync::Arc;

use arrow::array::{AsArray, IntervalMonthDayNanoArray};
use arrow::datatypes::{DataType, IntervalMonthDayNano, IntervalMonthDayNanoType, IntervalUnit};
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::sql::semantics::shape_result;

/// Nanoseconds per day, the unit of Arrow's interval time.
const NS_PER_DAY: i64 = 86_400_000_000_000;

/// Days per month in the justification (PostgreSQL's `DAYS_PER_MONTH`).
const DAYS_PER_MONTH: i32 = 30;

/// Which justification a [`Justify`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Whole days of the time moved into days (`justify_hours`).
    Hours,
    /// Whole months of the days moved into months (`justify_days`).
    Days,
    /// Both, with the parts' signs made to agree (`justify_interval`).
    Interval,
}

/// Moves whole days of `v`'s time into its days, the time keeping the days' sign
/// (PostgreSQL's `interval_justify_hours`). Saturates at the 32-bit day bound.
fn justify_hours(v: IntervalMonthDayNano) -> IntervalMonthDayNano {
    let whole = v.nanoseconds / NS_PER_DAY;
    let days = v
        .days
        .saturating_add(i32::try_from(whole).unwrap_or(i32::MAX));
    let (days, time) = days_time_agree(days, v.nanoseconds - whole * NS_PER_DAY);
    IntervalMonthDayNano::new(v.months, days, time)
}

/// `days` and `time` (less than a day) with the time given the days' sign, a day moved
/// between them when their signs differ.
fn days_time_agree(days: i32, time: i64) -> (i32, i64) {
    if days > 0 && time < 0 {
        (days - 1, time + NS_PER_DAY)
    } else if days < 0 && time > 0 {
        (days + 1, time - NS_PER_DAY)
    } else {
        (days, time)
    }
}

/// Moves whole 30-day months of `v`'s days into its months, the days keeping the months'
/// sign (PostgreSQL's `interval_justify_days`).
fn justify_days(v: IntervalMonthDayNano) -> IntervalMonthDayNano {
    let whole = v.days / DAYS_PER_MONTH;
    let mut months = v.months.saturating_add(whole);
    let mut days = v.days - whole * DAYS_PER_MONTH;
    if months > 0 && days < 0 {
        days += DAYS_PER_MONTH;
        months -= 1;
    } else if months < 0 && days > 0 {
        days -= DAYS_PER_MONTH;
        months += 1;
    }
    IntervalMonthDayNano::new(months, days, v.nanoseconds)
}

/// Both justifications, then one sign for all parts (PostgreSQL's
/// `interval_justify_interval`).
fn justify_interval(v: IntervalMonthDayNano) -> IntervalMonthDayNano {
    let (mut months, mut days, mut time) = (v.months, v.days, v.nanoseconds);
    let whole_days = time / NS_PER_DAY;
    time -= whole_days * NS_PER_DAY;
    days = days.saturating_add(i32::try_from(whole_days).unwrap_or(i32::MAX));
    let whole_months = days / DAYS_PER_MONTH;
    days -= whole_months * DAYS_PER_MONTH;
    months = months.saturating_add(whole_months);
    if months > 0 && (days < 0 || (days == 0 && time < 0)) {
        days += DAYS_PER_MONTH;
        months -= 1;
    } else if months < 0 && (days > 0 || (days == 0 && time > 0)) {
        days -= DAYS_PER_MONTH;
        months += 1;
    }
    let (days, time) = days_time_agree(days, time);
    IntervalMonthDayNano::new(months, days, time)
}

/// `justify_hours(interval)`, `justify_days(interval)`, `justify_interval(interval)`: see the
/// module docs; NULL stays NULL. Returns `interval`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Justify {
    kind: Kind,
    signature: Signature,
}

impl Justify {
    /// The function of `kind`.
    pub fn new(kind: Kind) -> Self {
        Justify {
            kind,
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for Justify {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Hours => "justify_hours",
            Kind::Days => "justify_days",
            Kind::Interval => "justify_interval",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match &arg_types[0] {
            DataType::Interval(_) | DataType::Duration(_) | DataType::Null => {
                Ok(DataType::Interval(IntervalUnit::MonthDayNano))
            }
            other => Err(super::math::no_function(
                self.name(),
                std::slice::from_ref(other),
            )),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let array = args.args[0].to_array(args.number_rows)?;
        let mdn = arrow::compute::cast(&array, &DataType::Interval(IntervalUnit::MonthDayNano))?;
        let f = match self.kind {
            Kind::Hours => justify_hours,
            Kind::Days => justify_days,
            Kind::Interval => justify_interval,
        };
        let out: IntervalMonthDayNanoArray = mdn
            .as_primitive::<IntervalMonthDayNanoType>()
            .iter()
            .map(|v| v.map(f))
            .collect();
        shape_result(&args.args, Arc::new(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000_000_000;

    fn iv(months: i32, days: i32, hours: i64) -> IntervalMonthDayNano {
        IntervalMonthDayNano::new(months, days, hours * HOUR)
    }

    #[test]
    fn justifications_match_postgresql() {
        // Expected values from PostgreSQL 15.
        assert_eq!(justify_hours(iv(0, 0, 27)), iv(0, 1, 3));
        assert_eq!(justify_hours(iv(0, 0, 53)), iv(0, 2, 5));
        assert_eq!(justify_hours(iv(0, 0, -53)), iv(0, -2, -5));
        assert_eq!(justify_hours(iv(0, 1, -3)), iv(0, 0, 21));
        assert_eq!(justify_days(iv(0, 35, 0)), iv(1, 5, 0));
        assert_eq!(justify_days(iv(1, -35, 0)), iv(0, -5, 0));
        assert_eq!(justify_days(iv(1, -5, 0)), iv(0, 25, 0));
        assert_eq!(justify_interval(iv(1, 0, -1)), iv(0, 29, 23));
        assert_eq!(justify_interval(iv(0, 0, 24 * 31)), iv(1, 1, 0));
        assert_eq!(justify_interval(iv(-1, 0, 1)), iv(0, -29, -23));
    }
}

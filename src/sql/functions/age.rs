//! `age(a, b)`: the difference of two timestamps as years, months, days and time, PostgreSQL's
//! "symbolic" result (PostgreSQL docs, 9.9 "Date/Time Functions"; `timestamp_age` in
//! `timestamp.c`):
//!
//! ```text
//!  age(timestamp '2001-04-10', timestamp '1957-06-13')   43 years 9 mons 27 days
//!  age(timestamp '2024-03-01', timestamp '2023-01-31')   1 year 1 mon 1 day
//!  age(timestamp '2023-01-31', timestamp '2024-03-01')   -1 years -1 mons -1 days
//! ```
//!
//! Each field of `b` is taken from the same field of `a` (microseconds, seconds, ..., years;
//! all negated when `a` is earlier), then a negative field borrows from the next one: 60
//! seconds, 60 minutes, 24 hours, the days of the month before the later date's month, 12
//! months; the result has the sign of `a - b`. `age(b)` is `age(current_date, b)` (midnight).
//! A `timestamptz` is taken in UTC.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, IntervalMonthDayNanoArray};
use arrow::datatypes::{
    DataType, IntervalMonthDayNano, IntervalUnit, TimeUnit, TimestampMicrosecondType,
};
use chrono::{Datelike, NaiveDateTime, Timelike};
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// The calendar fields of a timestamp, as `age` subtracts them.
struct Fields {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    micros: i64,
}

fn fields(t: &NaiveDateTime) -> Fields {
    Fields {
        year: i64::from(t.year()),
        month: i64::from(t.month()),
        day: i64::from(t.day()),
        hour: i64::from(t.hour()),
        minute: i64::from(t.minute()),
        second: i64::from(t.second()),
        micros: i64::from(t.nanosecond() / 1_000),
    }
}

/// The days of `month` (1-12) of `year`.
fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if leap => 29,
        _ => 28,
    }
}

/// `age(a, b)` of two timestamps (see the module docs), as an interval.
pub fn age(a: &NaiveDateTime, b: &NaiveDateTime) -> IntervalMonthDayNano {
    let (fa, fb) = (fields(a), fields(b));
    let negative = a < b;
    let sign = if negative { -1 } else { 1 };
    let mut micros = sign * (fa.micros - fb.micros);
    let mut second = sign * (fa.second - fb.second);
    let mut minute = sign * (fa.minute - fb.minute);
    let mut hour = sign * (fa.hour - fb.hour);
    let mut day = sign * (fa.day - fb.day);
    let mut month = sign * (fa.month - fb.month);
    let mut year = sign * (fa.year - fb.year);
    while micros < 0 {
        micros += 1_000_000;
        second -= 1;
    }
    while second < 0 {
        second += 60;
        minute -= 1;
    }
    while minute < 0 {
        minute += 60;
        hour -= 1;
    }
    while hour < 0 {
        hour += 24;
        day -= 1;
    }
    // The month borrowed from is the earlier timestamp's (PostgreSQL takes `a`'s when `a`
    // is earlier, else `b`'s).
    let earlier = if negative { &fa } else { &fb };
    while day < 0 {
        day += days_in_month(earlier.year, earlier.month);
        month -= 1;
    }
    while month < 0 {
        month += 12;
        year -= 1;
    }
    let months = sign * (year * 12 + month);
    let days = sign * day;
    let nanos = sign * ((((hour * 60 + minute) * 60 + second) * 1_000_000 + micros) * 1_000);
    IntervalMonthDayNano::new(
        i32::try_from(months).unwrap_or(i32::MAX),
        i32::try_from(days).unwrap_or(i32::MAX),
        nanos,
    )
}

/// `age(timestamp, timestamp)` and `age(timestamp)` (dates read as midnight, `timestamptz`
/// in UTC), returning `interval`. NULL when an argument is NULL.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Age {
    signature: Signature,
}

impl Age {
    /// The function.
    pub fn new() -> Self {
        Age {
            signature: Signature::user_defined(Volatility::Stable),
        }
    }
}

impl Default for Age {
    fn default() -> Self {
        Self::new()
    }
}

impl ScalarUDFImpl for Age {
    fn name(&self) -> &str {
        "age"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let ok = matches!(arg_types.len(), 1 | 2)
            && arg_types.iter().all(|t| {
                matches!(
                    t,
                    DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 | DataType::Null
                ) || t.is_string()
            });
        if !ok {
            return Err(super::math::no_function("age", arg_types));
        }
        Ok(vec![
            DataType::Timestamp(TimeUnit::Microsecond, None);
            arg_types.len()
        ])
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Interval(IntervalUnit::MonthDayNano))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays: Vec<ArrayRef> = ColumnarValue::values_to_arrays(&args.args)?;
        let values: Vec<_> = arrays
            .iter()
            .map(|a| a.as_primitive::<TimestampMicrosecondType>())
            .collect();
        let today = chrono::Utc::now()
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .unwrap_or_default();
        let at = |i: usize, row: usize| -> Option<NaiveDateTime> {
            let a = values[i];
            let r = if a.len() == 1 { 0 } else { row };
            a.is_valid(r)
                .then(|| chrono::DateTime::from_timestamp_micros(a.value(r)))
                .flatten()
                .map(|t| t.naive_utc())
        };
        let out: IntervalMonthDayNanoArray = (0..args.number_rows)
            .map(|row| {
                let (a, b) = if values.len() == 2 {
                    (at(0, row), at(1, row))
                } else {
                    (Some(today), at(0, row))
                };
                Some(age(&a?, &b?))
            })
            .collect();
        crate::sql::semantics::shape_result(&args.args, Arc::new(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f").unwrap()
    }

    #[test]
    fn ages_borrow_as_postgresql() {
        // PostgreSQL 15: age('2001-04-10', '1957-06-13') 43 years 9 mons 27 days;
        // age('2024-03-01', '2023-01-31') 1 year 1 mon 1 day; the reverse
        // -1 years -1 mons -1 days; age('2024-03-01 00:00', '2024-02-28 23:59:59.5')
        // 1 day 00:00:00.5.
        assert_eq!(
            age(&ts("2001-04-10 00:00:00"), &ts("1957-06-13 00:00:00")),
            IntervalMonthDayNano::new(43 * 12 + 9, 27, 0)
        );
        assert_eq!(
            age(&ts("2024-03-01 00:00:00"), &ts("2023-01-31 00:00:00")),
            IntervalMonthDayNano::new(13, 1, 0)
        );
        assert_eq!(
            age(&ts("2023-01-31 00:00:00"), &ts("2024-03-01 00:00:00")),
            IntervalMonthDayNano::new(-13, -1, 0)
        );
        assert_eq!(
            age(&ts("2024-03-01 00:00:00"), &ts("2024-02-28 23:59:59.5")),
            IntervalMonthDayNano::new(0, 1, 500_000_000)
        );
    }
}

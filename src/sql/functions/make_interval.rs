//! `make_interval(years, months, weeks, days, hours, mins, secs)` (PostgreSQL docs, 9.9
//! "Date/Time Functions"; `make_interval` in its `timestamp.c`): an interval of
//! `years · 12 + months` months, `weeks · 7 + days` days and `hours`, `mins`, `secs` of time
//! (`secs` a `double precision`, rounded to microseconds). Called with names or fewer
//! arguments (`make_interval(days => 3)`), the missing ones are 0: the call is completed by
//! [`crate::sql::parse`] before planning.
//!
//! ```text
//!  make_interval(1, 2)              ─►  1 year 2 mons
//!  make_interval(days => 10)        ─►  10 days
//!  make_interval(secs => 1.5)       ─►  00:00:01.5
//! ```
//!
//! Errors: an integer argument past `integer`, `22003`; a result past the interval's range
//! or an infinite or NaN `secs`, `22008` `interval out of range`. Any NULL argument gives NULL.

use std::sync::Arc;

use arrow::array::{Array, AsArray, IntervalMonthDayNanoArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type, IntervalMonthDayNano, IntervalUnit};
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::Error;
use crate::sql::semantics::ours;

/// The function (see the module docs).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct MakeInterval {
    signature: Signature,
}

impl MakeInterval {
    /// The function (stateless).
    pub fn new() -> Self {
        MakeInterval {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl Default for MakeInterval {
    fn default() -> Self {
        Self::new()
    }
}

/// The interval of the seven arguments (module docs); `Err` with its SQLSTATE.
pub fn make_interval(parts: [i64; 6], secs: f64) -> crate::error::Result<IntervalMonthDayNano> {
    let out_of_range = || Error::data("22008", "interval out of range");
    let mut ints = [0i32; 6];
    for (slot, v) in ints.iter_mut().zip(parts) {
        *slot = i32::try_from(v).map_err(|_| Error::data("22003", "integer out of range"))?;
    }
    let [years, months, weeks, days, hours, mins] = ints.map(i64::from);
    if !secs.is_finite() {
        return Err(out_of_range());
    }
    let months = i32::try_from(years * 12 + months).map_err(|_| out_of_range())?;
    let days = i32::try_from(weeks * 7 + days).map_err(|_| out_of_range())?;
    let secs_micros = (secs * 1e6).round_ties_even();
    if secs_micros.abs() >= 9.2e18 {
        return Err(out_of_range());
    }
    let micros = (hours * 3_600_000_000)
        .checked_add(mins * 60_000_000)
        .and_then(|m| m.checked_add(secs_micros as i64))
        .ok_or_else(out_of_range)?;
    let nanos = micros.checked_mul(1000).ok_or_else(out_of_range)?;
    Ok(IntervalMonthDayNano::new(months, days, nanos))
}

impl ScalarUDFImpl for MakeInterval {
    fn name(&self) -> &str {
        "make_interval"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        // PostgreSQL's integer parameters take no numeric (`days => 1.5` is 42883).
        let integer = |t: &DataType| t.is_integer() || t.is_null();
        let number = |t: &DataType| t.is_numeric() || t.is_null();
        if arg_types.len() != 7 || !arg_types[..6].iter().all(integer) || !number(&arg_types[6]) {
            return Err(crate::sql::functions::math::no_function(
                "make_interval",
                arg_types,
            ));
        }
        let mut types = vec![DataType::Int64; 6];
        types.push(DataType::Float64);
        Ok(types)
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Interval(IntervalUnit::MonthDayNano))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let ints: Vec<_> = arrays[..6]
            .iter()
            .map(|a| a.as_primitive::<Int64Type>())
            .collect();
        let secs = arrays[6].as_primitive::<Float64Type>();
        let mut out = Vec::with_capacity(args.number_rows);
        for row in 0..args.number_rows {
            if secs.is_null(row) || ints.iter().any(|a| a.is_null(row)) {
                out.push(None);
                continue;
            }
            let parts: [i64; 6] = std::array::from_fn(|i| ints[i].value(row));
            out.push(Some(make_interval(parts, secs.value(row)).map_err(ours)?));
        }
        crate::sql::semantics::shape_result(
            &args.args,
            Arc::new(IntervalMonthDayNanoArray::from(out)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_add_up_as_postgresql_adds_them() {
        // make_interval(1, 2, 1, 3, 4, 5, 6.5) is '1 year 2 mons 10 days 04:05:06.5'.
        let v = make_interval([1, 2, 1, 3, 4, 5], 6.5).unwrap();
        assert_eq!(v.months, 14);
        assert_eq!(v.days, 10);
        assert_eq!(
            v.nanoseconds,
            ((4 * 3600 + 5 * 60) * 1_000_000 + 6_500_000) * 1000
        );
        // Seconds are rounded to microseconds.
        let v = make_interval([0; 6], 0.0000015).unwrap();
        assert_eq!(v.nanoseconds, 2000);
        assert!(make_interval([0; 6], f64::INFINITY).is_err());
        assert!(make_interval([i64::from(i32::MAX), 0, 0, 0, 0, 0], 0.0).is_err());
        assert!(make_interval([1 << 40, 0, 0, 0, 0, 0], 0.0).is_err());
    }
}

//! `to_char(value, format)`: PostgreSQL's formatting of date/time and numeric values as text.
//!
//! PostgreSQL docs, 9.8 "Data Type Formatting Functions": Table 9.26 "Template Patterns for
//! Date/Time Formatting", Table 9.27 "Template Pattern Modifiers for Date/Time Formatting",
//! Table 9.28 "Template Patterns for Numeric Formatting", Table 9.29 "Template Pattern
//! Modifiers for Numeric Formatting", and the usage notes after each table.
//!
//! ```text
//!  to_char(ts, 'FMDay, DD Mon YYYY HH24:MI')   ─► "Sunday, 05 Nov 2023 01:40"
//!          │            │
//!          │            └─ parsed once per distinct format into Text / Field nodes
//!          └─ each row: Moment { year, mon, mday, hour, ..., iso week, julian day, zone }
//!
//!  to_char(1234.5, '9G999D99')                 ─► " 1,234.50"
//!          │        │
//!          │        └─ parsed into nodes and a digit layout (digits before/after the point,
//!          │           sign placement, fill mode, roman numerals, exponent, multiplier)
//!          └─ each row: the value as sign + digit string (rounded to the format's decimals),
//!             then laid out over the nodes
//! ```
//!
//! Weir formats as PostgreSQL does in the C locale: English month and day names (`TM` changes
//! nothing but the padding), `.` as decimal point, `,` as group separator, `+`/`-` as signs
//! and a space for the currency symbol `L`. A `timestamptz` prints its zone (`TZ`) as the
//! abbreviation of the session's zone at that instant (`EST`, `EDT`, `IST`), as `UTC` when the
//! zone is a zero offset and as `+hh[:mm]` for other offsets; a `timestamp` without time zone prints an empty
//! `TZ` and offset `+00`. A `date` formats as the `timestamptz` of its midnight (UTC), a `time`
//! or a duration as an interval, as PostgreSQL's implicit casts do.
//!
//! Integers and `numeric` round half away from zero; `real` and `double precision` round as C's
//! `printf` does, keeping at most 6 and 15 significant digits. `smallint` and `integer` take
//! the floating-point path for `EEEE`, as PostgreSQL does.

use std::sync::Arc;

use arrow::array::timezone::Tz;
use arrow::array::{Array, ArrayRef, AsArray, StringArray, StringBuilder};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal32Type, Decimal64Type, Decimal128Type, Decimal256Type,
    DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType, DurationSecondType,
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    IntervalDayTimeType, IntervalMonthDayNanoType, IntervalUnit, IntervalYearMonthType,
    Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Offset, TimeDelta, TimeZone, Timelike};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::Error;

// ---------------------------------------------------------------------------------------------
// The function

/// `to_char(value, format)` with PostgreSQL's template patterns (PostgreSQL docs, 9.8 "Data
/// Type Formatting Functions"), replacing DataFusion's `to_char`, which takes chrono's
/// `strftime` formats.
///
/// The value is a `timestamp` or `timestamptz` (any unit), a `date`, an `interval`, a `time`,
/// a duration, an integer, a `numeric` or a floating-point number; the format is text. A NULL
/// value or format gives NULL, as does an empty format for a date/time value (an empty format
/// gives an empty string for a number, as in PostgreSQL).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ToChar {
    signature: Signature,
}

impl Default for ToChar {
    fn default() -> Self {
        Self::new()
    }
}

impl ToChar {
    /// The `to_char` function.
    pub fn new() -> Self {
        ToChar {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ToChar {
    fn name(&self) -> &str {
        "to_char"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        // Unsupported types pass through unchanged; `return_type` names them in its error.
        Ok(arg_types
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let t = match t {
                    DataType::Dictionary(_, v) => v.as_ref().clone(),
                    other => other.clone(),
                };
                match (i, t) {
                    (0, DataType::Float16) => DataType::Float32,
                    (
                        1,
                        DataType::Null | DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View,
                    ) => DataType::Utf8,
                    (_, t) => t,
                }
            })
            .collect())
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        let ok = arg_types.len() == 2
            && (is_datetime(&arg_types[0]) || is_number(&arg_types[0]))
            && matches!(arg_types[1], DataType::Utf8 | DataType::Null);
        if !ok {
            let names: Vec<String> = arg_types.iter().map(super::pg_type_name).collect();
            return Err(ours(Error::plan(
                "42883",
                format!(
                    "function to_char({}) does not exist; to_char takes a date/time, interval or \
                     number and a text format",
                    names.join(", ")
                ),
            )));
        }
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value, format] = args.args.as_slice() else {
            return Err(DataFusionError::Internal(
                "to_char expects two arguments".to_string(),
            ));
        };
        let all_scalar =
            matches!(value, ColumnarValue::Scalar(_)) && matches!(format, ColumnarValue::Scalar(_));
        let rows = if all_scalar { 1 } else { args.number_rows };
        let values = value.to_array(rows)?;
        let out = match format {
            ColumnarValue::Scalar(s) => {
                let f = match s {
                    ScalarValue::Utf8(f) | ScalarValue::LargeUtf8(f) | ScalarValue::Utf8View(f) => {
                        f.clone()
                    }
                    ScalarValue::Null => None,
                    other => {
                        return Err(DataFusionError::Internal(format!(
                            "to_char format of type {}",
                            other.data_type()
                        )));
                    }
                };
                to_char_array(&values, Formats::One(f.as_deref()))?
            }
            ColumnarValue::Array(a) => {
                let a = if a.data_type() == &DataType::Utf8 {
                    Arc::clone(a)
                } else {
                    arrow::compute::cast(a, &DataType::Utf8)?
                };
                to_char_array(&values, Formats::Each(a.as_string::<i32>()))?
            }
        };
        if all_scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
        } else {
            Ok(ColumnarValue::Array(out))
        }
    }
}

/// Wraps one of Weir's errors so it crosses DataFusion with its SQLSTATE.
fn ours(e: Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

fn is_datetime(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Timestamp(..)
            | DataType::Date32
            | DataType::Date64
            | DataType::Interval(_)
            | DataType::Duration(_)
            | DataType::Time32(_)
            | DataType::Time64(_)
            | DataType::Null
    )
}

fn is_number(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Float16
            | DataType::Float32
            | DataType::Float64
            | DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..)
    )
}

/// The format argument: one for all rows, or one per row.
enum Formats<'a> {
    One(Option<&'a str>),
    Each(&'a StringArray),
}

impl Formats<'_> {
    fn get(&self, i: usize) -> Option<&str> {
        match self {
            Formats::One(f) => *f,
            Formats::Each(a) => (!a.is_null(i)).then(|| a.value(i)),
        }
    }
}

/// Reads row `i` of the value column as what `to_char` formats.
enum Reader<'a> {
    Null,
    Moment(Box<dyn Fn(usize) -> Result<Moment> + 'a>),
    Number(Box<dyn Fn(usize) -> Number + 'a>),
}

fn reader(values: &ArrayRef) -> Result<Reader<'_>> {
    fn int<'a, T>(values: &'a ArrayRef, small: bool) -> Reader<'a>
    where
        T: arrow::datatypes::ArrowPrimitiveType,
        T::Native: Into<i128>,
    {
        let a = values.as_primitive::<T>();
        Reader::Number(Box::new(move |i| Number::Int {
            v: a.value(i).into(),
            small,
        }))
    }
    fn decimal<'a, T>(values: &'a ArrayRef, scale: i8) -> Reader<'a>
    where
        T: arrow::datatypes::ArrowPrimitiveType,
        T::Native: std::fmt::Display,
    {
        let a = values.as_primitive::<T>();
        Reader::Number(Box::new(move |i| Number::Dec {
            text: a.value(i).to_string(),
            scale: i64::from(scale),
        }))
    }
    fn stamp<'a, T>(
        values: &'a ArrayRef,
        per_sec: i64,
        zone: Option<Tz>,
        named: Option<chrono_tz::Tz>,
    ) -> Reader<'a>
    where
        T: arrow::datatypes::ArrowPrimitiveType<Native = i64>,
    {
        let a = values.as_primitive::<T>();
        Reader::Moment(Box::new(move |i| {
            let mut m = moment_from_timestamp(a.value(i), per_sec, zone.as_ref())?;
            if let Some(z) = named {
                m.abbrev = zone_abbreviation(z, a.value(i), per_sec);
            }
            Ok(m)
        }))
    }
    fn elapsed<'a, T>(values: &'a ArrayRef, micros_per_unit: i64, nanos: bool) -> Reader<'a>
    where
        T: arrow::datatypes::ArrowPrimitiveType,
        T::Native: Into<i64>,
    {
        let a = values.as_primitive::<T>();
        Reader::Moment(Box::new(move |i| {
            let v: i64 = a.value(i).into();
            let micros = if nanos {
                v / 1000
            } else {
                v.checked_mul(micros_per_unit)
                    .ok_or_else(interval_out_of_range)?
            };
            Ok(moment_from_interval(0, 0, micros))
        }))
    }

    Ok(match values.data_type() {
        DataType::Null => Reader::Null,
        DataType::Timestamp(unit, tz) => {
            let zone = match tz {
                None => None,
                Some(name) => Some(name.parse::<Tz>().map_err(|_| {
                    ours(Error::data(
                        "22023",
                        format!("time zone \"{name}\" not recognized"),
                    ))
                })?),
            };
            // A zone of the IANA database shows its abbreviation (`EST`) for `TZ`.
            let named = tz.as_deref().and_then(super::datetime_input::zone_by_name);
            match unit {
                TimeUnit::Second => stamp::<TimestampSecondType>(values, 1, zone, named),
                TimeUnit::Millisecond => {
                    stamp::<TimestampMillisecondType>(values, 1_000, zone, named)
                }
                TimeUnit::Microsecond => {
                    stamp::<TimestampMicrosecondType>(values, 1_000_000, zone, named)
                }
                TimeUnit::Nanosecond => {
                    stamp::<TimestampNanosecondType>(values, 1_000_000_000, zone, named)
                }
            }
        }
        DataType::Date32 => {
            let a = values.as_primitive::<Date32Type>();
            Reader::Moment(Box::new(move |i| {
                let date = a
                    .value(i)
                    .checked_add(UNIX_EPOCH_DAYS_FROM_CE)
                    .and_then(NaiveDate::from_num_days_from_ce_opt)
                    .ok_or_else(date_out_of_range)?;
                Ok(moment_from_datetime(
                    date.and_time(chrono::NaiveTime::MIN),
                    Some(0),
                ))
            }))
        }
        DataType::Date64 => {
            let a = values.as_primitive::<Date64Type>();
            let utc: Tz = "+00:00".parse().map_err(DataFusionError::from)?;
            Reader::Moment(Box::new(move |i| {
                moment_from_timestamp(a.value(i), 1_000, Some(&utc))
            }))
        }
        DataType::Interval(IntervalUnit::YearMonth) => {
            let a = values.as_primitive::<IntervalYearMonthType>();
            Reader::Moment(Box::new(move |i| {
                Ok(moment_from_interval(i64::from(a.value(i)), 0, 0))
            }))
        }
        DataType::Interval(IntervalUnit::DayTime) => {
            let a = values.as_primitive::<IntervalDayTimeType>();
            Reader::Moment(Box::new(move |i| {
                let v = a.value(i);
                Ok(moment_from_interval(
                    0,
                    i64::from(v.days),
                    i64::from(v.milliseconds) * 1000,
                ))
            }))
        }
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            let a = values.as_primitive::<IntervalMonthDayNanoType>();
            Reader::Moment(Box::new(move |i| {
                let v = a.value(i);
                Ok(moment_from_interval(
                    i64::from(v.months),
                    i64::from(v.days),
                    v.nanoseconds / 1000,
                ))
            }))
        }
        DataType::Duration(TimeUnit::Second) => {
            elapsed::<DurationSecondType>(values, 1_000_000, false)
        }
        DataType::Duration(TimeUnit::Millisecond) => {
            elapsed::<DurationMillisecondType>(values, 1_000, false)
        }
        DataType::Duration(TimeUnit::Microsecond) => {
            elapsed::<DurationMicrosecondType>(values, 1, false)
        }
        DataType::Duration(TimeUnit::Nanosecond) => {
            elapsed::<DurationNanosecondType>(values, 1, true)
        }
        DataType::Time32(TimeUnit::Millisecond) => {
            elapsed::<Time32MillisecondType>(values, 1_000, false)
        }
        DataType::Time32(_) => elapsed::<Time32SecondType>(values, 1_000_000, false),
        DataType::Time64(TimeUnit::Nanosecond) => elapsed::<Time64NanosecondType>(values, 1, true),
        DataType::Time64(_) => elapsed::<Time64MicrosecondType>(values, 1, false),
        DataType::Int8 => int::<Int8Type>(values, true),
        DataType::Int16 => int::<Int16Type>(values, true),
        DataType::Int32 => int::<Int32Type>(values, true),
        DataType::UInt8 => int::<UInt8Type>(values, true),
        DataType::UInt16 => int::<UInt16Type>(values, true),
        DataType::Int64 => int::<Int64Type>(values, false),
        DataType::UInt32 => int::<UInt32Type>(values, false),
        DataType::UInt64 => int::<UInt64Type>(values, false),
        DataType::Float16 => {
            let a = values.as_primitive::<Float16Type>();
            Reader::Number(Box::new(move |i| Number::F32(a.value(i).to_f32())))
        }
        DataType::Float32 => {
            let a = values.as_primitive::<Float32Type>();
            Reader::Number(Box::new(move |i| Number::F32(a.value(i))))
        }
        DataType::Float64 => {
            let a = values.as_primitive::<Float64Type>();
            Reader::Number(Box::new(move |i| Number::F64(a.value(i))))
        }
        DataType::Decimal32(_, s) => decimal::<Decimal32Type>(values, *s),
        DataType::Decimal64(_, s) => decimal::<Decimal64Type>(values, *s),
        DataType::Decimal128(_, s) => decimal::<Decimal128Type>(values, *s),
        DataType::Decimal256(_, s) => decimal::<Decimal256Type>(values, *s),
        other => {
            return Err(ours(Error::plan(
                "42883",
                format!(
                    "function to_char({}, text) does not exist",
                    super::pg_type_name(other)
                ),
            )));
        }
    })
}

/// A parsed format, kept while consecutive rows share the format text.
enum Template {
    DateTime(Vec<DtNode>),
    Number(NumFormat),
}

fn to_char_array(values: &ArrayRef, formats: Formats<'_>) -> Result<ArrayRef> {
    let n = values.len();
    let read = reader(values)?;
    let nulls = values.logical_nulls();
    let mut out = StringBuilder::with_capacity(n, n * 16);
    let mut cached: Option<(String, Template)> = None;
    for i in 0..n {
        let Some(fmt) = formats.get(i) else {
            out.append_null();
            continue;
        };
        if matches!(read, Reader::Null) || nulls.as_ref().is_some_and(|b| b.is_null(i)) {
            out.append_null();
            continue;
        }
        if cached.as_ref().is_none_or(|(text, _)| text != fmt) {
            let template = match read {
                Reader::Number(_) => Template::Number(parse_number_format(fmt)?),
                _ => Template::DateTime(parse_datetime_format(fmt)),
            };
            cached = Some((fmt.to_string(), template));
        }
        let Some((_, template)) = &cached else {
            out.append_null();
            continue;
        };
        match (&read, template) {
            (Reader::Moment(get), Template::DateTime(nodes)) => {
                if fmt.is_empty() {
                    out.append_null();
                } else {
                    out.append_value(format_moment(nodes, &get(i)?)?);
                }
            }
            (Reader::Number(get), Template::Number(f)) => {
                out.append_value(format_number(f, &get(i))?);
            }
            _ => out.append_null(),
        }
    }
    Ok(Arc::new(out.finish()))
}

// ---------------------------------------------------------------------------------------------
// Date/time values

/// Days from 0001-01-01 (day 1) to 1970-01-01.
const UNIX_EPOCH_DAYS_FROM_CE: i32 = 719_163;

/// The Julian day number of 0000-12-31 (1 BC), which is day 0 of chrono's days from CE.
const JULIAN_DAY_OF_CE_ZERO: i64 = 1_721_425;

/// The calendar fields of a date/time value or an interval, as the patterns read them.
///
/// For a date/time, `year` is astronomical (0 is 1 BC) and `wday` counts from Sunday = 0. For
/// an interval (PostgreSQL's `interval_to_char`), `year` and `mon` split the months, `mday` is
/// the days, the time fields split the microseconds (all truncating toward zero), and `yday`
/// approximates the whole span in days as (years × 12 + months) × 30 + days.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Moment {
    year: i64,
    mon: i64,
    mday: i64,
    hour: i64,
    min: i64,
    sec: i64,
    usec: i64,
    yday: i64,
    wday: i64,
    iso_year: i64,
    iso_week: i64,
    iso_yday: i64,
    julian: i64,
    /// The UTC offset in seconds of a value with a time zone; `None` for one without.
    zone: Option<i32>,
    /// The zone's abbreviation at that instant (`EST`, `EDT`) for a zone of the IANA
    /// database; `None` for fixed offsets, which show as `+hh[:mm]`.
    abbrev: Option<String>,
    interval: bool,
}

/// The abbreviation of `zone` at `v` units (`per_sec` a second) after the epoch, as the zone
/// database names it (`EST`); for a zone without a letter abbreviation its offset as the
/// database writes it (`+04`, `+0545`, `+1030`).
fn zone_abbreviation(zone: chrono_tz::Tz, v: i64, per_sec: i64) -> Option<String> {
    use chrono_tz::OffsetName;
    let utc = DateTime::from_timestamp(v.div_euclid(per_sec), 0)?.naive_utc();
    let offset = zone.offset_from_utc_datetime(&utc);
    if let Some(name) = offset.abbreviation() {
        return Some(name.to_string());
    }
    let seconds = offset.fix().local_minus_utc();
    let sign = if seconds < 0 { '-' } else { '+' };
    let (h, m) = (seconds.abs() / 3600, seconds.abs() % 3600 / 60);
    Some(if m == 0 {
        format!("{sign}{h:02}")
    } else {
        format!("{sign}{h:02}{m:02}")
    })
}

fn timestamp_out_of_range() -> DataFusionError {
    ours(Error::data("22008", "timestamp out of range"))
}

fn date_out_of_range() -> DataFusionError {
    ours(Error::data("22008", "date out of range"))
}

fn interval_out_of_range() -> DataFusionError {
    ours(Error::data("22008", "interval out of range"))
}

/// A timestamp of `per_sec` units per second since the Unix epoch, shown in `zone` if any.
fn moment_from_timestamp(v: i64, per_sec: i64, zone: Option<&Tz>) -> Result<Moment> {
    let secs = v.div_euclid(per_sec);
    let nanos = v.rem_euclid(per_sec) * (1_000_000_000 / per_sec);
    let utc = u32::try_from(nanos)
        .ok()
        .and_then(|n| DateTime::from_timestamp(secs, n))
        .ok_or_else(timestamp_out_of_range)?
        .naive_utc();
    match zone {
        None => Ok(moment_from_datetime(utc, None)),
        Some(tz) => {
            let offset = tz.offset_from_utc_datetime(&utc).fix().local_minus_utc();
            let local = utc
                .checked_add_signed(TimeDelta::seconds(i64::from(offset)))
                .ok_or_else(timestamp_out_of_range)?;
            Ok(moment_from_datetime(local, Some(offset)))
        }
    }
}

fn moment_from_datetime(dt: NaiveDateTime, zone: Option<i32>) -> Moment {
    let date = dt.date();
    let iso = date.iso_week();
    let weekday = date.weekday();
    Moment {
        year: i64::from(date.year()),
        mon: i64::from(date.month()),
        mday: i64::from(date.day()),
        hour: i64::from(dt.hour()),
        min: i64::from(dt.minute()),
        sec: i64::from(dt.second()),
        usec: i64::from(dt.nanosecond().min(999_999_999) / 1000),
        yday: i64::from(date.ordinal()),
        wday: i64::from(weekday.num_days_from_sunday()),
        iso_year: i64::from(iso.year()),
        iso_week: i64::from(iso.week()),
        iso_yday: i64::from((iso.week() - 1) * 7 + weekday.number_from_monday()),
        julian: i64::from(date.num_days_from_ce()) + JULIAN_DAY_OF_CE_ZERO,
        zone,
        abbrev: None,
        interval: false,
    }
}

/// An interval of `months`, `days` and `micros`, split as PostgreSQL's `interval2itm` does.
fn moment_from_interval(months: i64, days: i64, micros: i64) -> Moment {
    const HOUR: i64 = 3_600_000_000;
    const MINUTE: i64 = 60_000_000;
    const SECOND: i64 = 1_000_000;
    let (year, mon) = (months / 12, months % 12);
    let hour = micros / HOUR;
    let rest = micros - hour * HOUR;
    let min = rest / MINUTE;
    let rest = rest - min * MINUTE;
    let sec = rest / SECOND;
    let usec = rest - sec * SECOND;
    let iso_year = span_iso_year(year, mon, days);
    Moment {
        year,
        mon,
        mday: days,
        hour,
        min,
        sec,
        usec,
        yday: (year * 12 + mon) * 30 + days,
        wday: 0,
        iso_year,
        iso_week: span_iso_week(year, mon, days),
        iso_yday: span_julian_day(year, mon, days) - span_iso_year_start(iso_year) + 1,
        julian: span_julian_day(year, mon, days),
        zone: None,
        abbrev: None,
        interval: true,
    }
}

// The ISO and Julian-day patterns of an interval read its year, month and day fields as if
// they were a date (any integers). These helpers do that arithmetic with integer division
// truncating toward zero, as PostgreSQL's does, so out-of-range fields give PostgreSQL's
// results. Dates themselves use chrono.

/// The Julian day number of year `y`, month `m`, day `d` of the proleptic Gregorian calendar
/// (years counted from March, so that a leap day ends its year).
fn span_julian_day(y: i64, m: i64, d: i64) -> i64 {
    let (y, m) = if m > 2 {
        (y + 4800, m + 1)
    } else {
        (y + 4799, m + 13)
    };
    let century = y / 100;
    y * 365 - 32167 + y / 4 - century + century / 4 + 7834 * m / 256 + d
}

/// Day of the week of a Julian day number, Sunday = 0.
fn julian_weekday(j: i64) -> i64 {
    (j + 1).rem_euclid(7)
}

/// The Julian day of the Monday that starts ISO year `y` (the week holding January 4).
fn span_iso_year_start(y: i64) -> i64 {
    let jan4 = span_julian_day(y, 1, 4);
    jan4 - julian_weekday(jan4 - 1)
}

fn span_iso_week(y: i64, m: i64, d: i64) -> i64 {
    let day = span_julian_day(y, m, d);
    let mut start = span_iso_year_start(y);
    if day < start {
        start = span_iso_year_start(y - 1);
    }
    let mut week = (day - start) / 7 + 1;
    if week >= 52 {
        let next = span_iso_year_start(y + 1);
        if day >= next {
            week = (day - next) / 7 + 1;
        }
    }
    week
}

fn span_iso_year(y: i64, m: i64, d: i64) -> i64 {
    let day = span_julian_day(y, m, d);
    let mut year = y;
    let mut start = span_iso_year_start(y);
    if day < start {
        year -= 1;
        start = span_iso_year_start(year);
    }
    if (day - start) / 7 + 1 >= 52 && day >= span_iso_year_start(year + 1) {
        year += 1;
    }
    year
}

// ---------------------------------------------------------------------------------------------
// Date/time templates (Tables 9.26 and 9.27)

/// Letter case of a name pattern: `MONTH`, `Month`, `month`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Case {
    Upper,
    Capital,
    Lower,
}

impl Case {
    fn apply(self, s: &str) -> String {
        match self {
            Case::Upper => s.to_ascii_uppercase(),
            Case::Capital => s.to_string(),
            Case::Lower => s.to_ascii_lowercase(),
        }
    }
}

/// How a meridiem or era indicator is spelled: `AM`, `am`, `A.M.` or `a.m.`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Marker {
    Upper,
    Lower,
    UpperDots,
    LowerDots,
}

impl Marker {
    /// `word` (`AM`, `PM`, `AD` or `BC`) in this spelling.
    fn spell(self, word: &str) -> String {
        let word = match self {
            Marker::Upper | Marker::UpperDots => word.to_ascii_uppercase(),
            Marker::Lower | Marker::LowerDots => word.to_ascii_lowercase(),
        };
        match self {
            Marker::Upper | Marker::Lower => word,
            Marker::UpperDots | Marker::LowerDots => word.chars().flat_map(|c| [c, '.']).collect(),
        }
    }
}

/// A date/time template pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DtKey {
    /// `HH`, `HH12`: hour of day (01–12).
    Hour12,
    /// `HH24`: hour of day (00–23).
    Hour24,
    /// `MI`: minute.
    Minute,
    /// `SS`: second.
    Second,
    /// `MS`, `US`, `FF1`–`FF6`: the first n digits of the fraction of the second.
    Fraction(u8),
    /// `SSSS`, `SSSSS`: seconds past midnight.
    SecondOfDay,
    /// `AM`, `PM`, `A.M.`, `P.M.` and lower case.
    Meridiem(Marker),
    /// `AD`, `BC`, `A.D.`, `B.C.` and lower case.
    Era(Marker),
    /// `Y,YYY`: year with a comma.
    YearComma,
    /// `YYYY`, `YYY`, `YY`, `Y`: the last n digits of the year.
    Year(u8),
    /// `IYYY`, `IYY`, `IY`, `I`: the last n digits of the ISO 8601 week-numbering year.
    IsoYear(u8),
    /// `MONTH`, `Month`, `month`: full month name, padded to 9 characters.
    MonthName(Case),
    /// `MON`, `Mon`, `mon`: abbreviated month name.
    MonthAbbr(Case),
    /// `MM`: month number (01–12).
    MonthNumber,
    /// `DAY`, `Day`, `day`: full day name, padded to 9 characters.
    DayName(Case),
    /// `DY`, `Dy`, `dy`: abbreviated day name.
    DayAbbr(Case),
    /// `DDD`: day of year (001–366).
    DayOfYear,
    /// `IDDD`: day of ISO 8601 week-numbering year (001–371).
    IsoDayOfYear,
    /// `DD`: day of month (01–31).
    DayOfMonth,
    /// `D`: day of the week, Sunday (1) to Saturday (7).
    DayOfWeek,
    /// `ID`: ISO 8601 day of the week, Monday (1) to Sunday (7).
    IsoDayOfWeek,
    /// `W`: week of month (1–5), the first week starting on the first day of the month.
    WeekOfMonth,
    /// `WW`: week number of year (1–53), the first week starting on the first day of the year.
    WeekOfYear,
    /// `IW`: week number of ISO 8601 week-numbering year (01–53).
    IsoWeek,
    /// `CC`: century (2 digits); the twenty-first century starts on 2001-01-01.
    Century,
    /// `J`: Julian day (days since November 24, 4714 BC at local midnight).
    Julian,
    /// `Q`: quarter.
    Quarter,
    /// `RM`, `rm`: month in Roman numerals (I–XII; I is January).
    RomanMonth { upper: bool },
    /// `TZ`, `tz`: time-zone abbreviation.
    ZoneName { upper: bool },
    /// `TZH`: time-zone hours.
    ZoneHours,
    /// `TZM`: time-zone minutes.
    ZoneMinutes,
    /// `OF`: time-zone offset from UTC (`+hh` or `+hh:mm`).
    ZoneOffset,
    /// `FX`: fixed format (affects input only).
    FixedFormat,
}

impl DtKey {
    /// Whether the pattern has a meaning for an interval (PostgreSQL: "Intervals are not tied
    /// to specific calendar dates").
    fn valid_for_interval(self) -> bool {
        !matches!(
            self,
            DtKey::Era(_)
                | DtKey::MonthName(_)
                | DtKey::MonthAbbr(_)
                | DtKey::DayName(_)
                | DtKey::DayAbbr(_)
                | DtKey::DayOfWeek
                | DtKey::IsoDayOfWeek
                | DtKey::ZoneName { .. }
                | DtKey::ZoneHours
                | DtKey::ZoneMinutes
                | DtKey::ZoneOffset
        )
    }
}

/// The date/time patterns; matching is case-sensitive and takes the longest pattern.
pub(super) const DT_KEYWORDS: &[(&str, DtKey)] = {
    use DtKey::*;
    &[
        ("A.D.", Era(Marker::UpperDots)),
        ("A.M.", Meridiem(Marker::UpperDots)),
        ("AD", Era(Marker::Upper)),
        ("AM", Meridiem(Marker::Upper)),
        ("B.C.", Era(Marker::UpperDots)),
        ("BC", Era(Marker::Upper)),
        ("CC", Century),
        ("DAY", DayName(Case::Upper)),
        ("DDD", DayOfYear),
        ("DD", DayOfMonth),
        ("DY", DayAbbr(Case::Upper)),
        ("Day", DayName(Case::Capital)),
        ("Dy", DayAbbr(Case::Capital)),
        ("D", DayOfWeek),
        ("FF1", Fraction(1)),
        ("FF2", Fraction(2)),
        ("FF3", Fraction(3)),
        ("FF4", Fraction(4)),
        ("FF5", Fraction(5)),
        ("FF6", Fraction(6)),
        ("FX", FixedFormat),
        ("HH24", Hour24),
        ("HH12", Hour12),
        ("HH", Hour12),
        ("IDDD", IsoDayOfYear),
        ("ID", IsoDayOfWeek),
        ("IW", IsoWeek),
        ("IYYY", IsoYear(4)),
        ("IYY", IsoYear(3)),
        ("IY", IsoYear(2)),
        ("I", IsoYear(1)),
        ("J", Julian),
        ("MI", Minute),
        ("MM", MonthNumber),
        ("MONTH", MonthName(Case::Upper)),
        ("MON", MonthAbbr(Case::Upper)),
        ("MS", Fraction(3)),
        ("Month", MonthName(Case::Capital)),
        ("Mon", MonthAbbr(Case::Capital)),
        ("OF", ZoneOffset),
        ("P.M.", Meridiem(Marker::UpperDots)),
        ("PM", Meridiem(Marker::Upper)),
        ("Q", Quarter),
        ("RM", RomanMonth { upper: true }),
        ("SSSSS", SecondOfDay),
        ("SSSS", SecondOfDay),
        ("SS", Second),
        ("TZH", ZoneHours),
        ("TZM", ZoneMinutes),
        ("TZ", ZoneName { upper: true }),
        ("US", Fraction(6)),
        ("WW", WeekOfYear),
        ("W", WeekOfMonth),
        ("Y,YYY", YearComma),
        ("YYYY", Year(4)),
        ("YYY", Year(3)),
        ("YY", Year(2)),
        ("Y", Year(1)),
        ("a.d.", Era(Marker::LowerDots)),
        ("a.m.", Meridiem(Marker::LowerDots)),
        ("ad", Era(Marker::Lower)),
        ("am", Meridiem(Marker::Lower)),
        ("b.c.", Era(Marker::LowerDots)),
        ("bc", Era(Marker::Lower)),
        ("cc", Century),
        ("day", DayName(Case::Lower)),
        ("ddd", DayOfYear),
        ("dd", DayOfMonth),
        ("dy", DayAbbr(Case::Lower)),
        ("d", DayOfWeek),
        ("ff1", Fraction(1)),
        ("ff2", Fraction(2)),
        ("ff3", Fraction(3)),
        ("ff4", Fraction(4)),
        ("ff5", Fraction(5)),
        ("ff6", Fraction(6)),
        ("fx", FixedFormat),
        ("hh24", Hour24),
        ("hh12", Hour12),
        ("hh", Hour12),
        ("iddd", IsoDayOfYear),
        ("id", IsoDayOfWeek),
        ("iw", IsoWeek),
        ("iyyy", IsoYear(4)),
        ("iyy", IsoYear(3)),
        ("iy", IsoYear(2)),
        ("i", IsoYear(1)),
        ("j", Julian),
        ("mi", Minute),
        ("mm", MonthNumber),
        ("month", MonthName(Case::Lower)),
        ("mon", MonthAbbr(Case::Lower)),
        ("ms", Fraction(3)),
        ("of", ZoneOffset),
        ("p.m.", Meridiem(Marker::LowerDots)),
        ("pm", Meridiem(Marker::Lower)),
        ("q", Quarter),
        ("rm", RomanMonth { upper: false }),
        ("sssss", SecondOfDay),
        ("ssss", SecondOfDay),
        ("ss", Second),
        ("tzh", ZoneHours),
        ("tzm", ZoneMinutes),
        ("tz", ZoneName { upper: false }),
        ("us", Fraction(6)),
        ("ww", WeekOfYear),
        ("w", WeekOfMonth),
        ("y,yyy", YearComma),
        ("yyyy", Year(4)),
        ("yyy", Year(3)),
        ("yy", Year(2)),
        ("y", Year(1)),
    ]
};

/// One piece of a parsed date/time format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum DtNode {
    /// Text copied to the output.
    Text(String),
    /// A pattern with its modifiers.
    Field {
        key: DtKey,
        /// `FM` prefix: no padding.
        fill: bool,
        /// `TM` prefix: translation mode (names are not padded).
        translate: bool,
        /// `TH` (upper) or `th` (lower) suffix: ordinal number suffix.
        ordinal: Option<bool>,
    },
}

/// The longest keyword of `keywords` that `s` starts with.
fn longest_keyword<K: Copy>(s: &str, keywords: &[(&str, K)]) -> Option<(usize, K)> {
    keywords
        .iter()
        .filter(|(k, _)| s.starts_with(k))
        .max_by_key(|(k, _)| k.len())
        .map(|(k, key)| (k.len(), *key))
}

/// Reads text that is not a pattern at the start of `s` into `out`; returns the bytes read.
///
/// `"..."` is literal text, in which a backslash makes the next character literal; outside
/// double quotes, a backslash is kept unless it precedes a double quote, which it makes
/// literal. Any other character is copied.
fn read_text(s: &str, out: &mut String) -> usize {
    let mut chars = s.char_indices().peekable();
    let Some((_, first)) = chars.next() else {
        return 0;
    };
    if first == '"' {
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return i + 1,
                '\\' => match chars.next() {
                    Some((_, escaped)) => out.push(escaped),
                    None => {
                        out.push('\\');
                        return s.len();
                    }
                },
                c => out.push(c),
            }
        }
        s.len()
    } else if first == '\\' && s[1..].starts_with('"') {
        out.push('"');
        2
    } else {
        out.push(first);
        first.len_utf8()
    }
}

/// Parses a date/time format (PostgreSQL docs, Tables 9.26 and 9.27).
pub(super) fn parse_datetime_format(fmt: &str) -> Vec<DtNode> {
    let mut nodes = Vec::new();
    let mut text = String::new();
    let mut rest = fmt;
    while !rest.is_empty() {
        let (mut fill, mut translate) = (false, false);
        if rest.starts_with("FM") || rest.starts_with("fm") {
            fill = true;
            rest = &rest[2..];
        } else if rest.starts_with("TM") || rest.starts_with("tm") {
            translate = true;
            rest = &rest[2..];
        }
        if rest.is_empty() {
            break;
        }
        if let Some((len, key)) = longest_keyword(rest, DT_KEYWORDS) {
            rest = &rest[len..];
            let mut ordinal = None;
            if let Some(r) = rest.strip_prefix("TH") {
                ordinal = Some(true);
                rest = r;
            } else if let Some(r) = rest.strip_prefix("th") {
                ordinal = Some(false);
                rest = r;
            } else if let Some(r) = rest.strip_prefix("SP") {
                // Spell mode is not implemented in PostgreSQL either; it is accepted and ignored.
                rest = r;
            }
            if !text.is_empty() {
                nodes.push(DtNode::Text(std::mem::take(&mut text)));
            }
            nodes.push(DtNode::Field {
                key,
                fill,
                translate,
                ordinal,
            });
        } else {
            let used = read_text(rest, &mut text);
            rest = &rest[used..];
        }
    }
    if !text.is_empty() {
        nodes.push(DtNode::Text(text));
    }
    nodes
}

pub(super) const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

pub(super) const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// Roman numerals of the months, December first.
pub(super) const ROMAN_MONTHS: [&str; 12] = [
    "XII", "XI", "X", "IX", "VIII", "VII", "VI", "V", "IV", "III", "II", "I",
];

/// `v` as C's `%0*d` writes it: zero-padded to `width` characters, the sign included.
fn padded(v: i64, width: usize) -> String {
    format!("{v:0width$}")
}

/// The ordinal suffix of the number ending `digits` (`st`, `nd`, `rd`, `th`).
fn ordinal_suffix(digits: &str, upper: bool) -> Result<&'static str> {
    let b = digits.as_bytes();
    let Some(&last) = b.last().filter(|c| c.is_ascii_digit()) else {
        return Err(ours(Error::data(
            "22P02",
            format!("\"{digits}\" is not a number"),
        )));
    };
    let suffix = if b.len() > 1 && b[b.len() - 2] == b'1' {
        "th"
    } else {
        match last {
            b'1' => "st",
            b'2' => "nd",
            b'3' => "rd",
            _ => "th",
        }
    };
    Ok(match (upper, suffix) {
        (false, s) => s,
        (true, "st") => "ST",
        (true, "nd") => "ND",
        (true, "rd") => "RD",
        (true, _) => "TH",
    })
}

fn zone_abbrev(offset: i32) -> String {
    if offset == 0 {
        return "UTC".to_string();
    }
    let sign = if offset < 0 { '-' } else { '+' };
    let (h, m) = (offset.abs() / 3600, offset.abs() % 3600 / 60);
    if m == 0 {
        format!("{sign}{h:02}")
    } else {
        format!("{sign}{h:02}:{m:02}")
    }
}

/// Formats a date/time value or an interval (PostgreSQL docs, Tables 9.26 and 9.27).
fn format_moment(nodes: &[DtNode], m: &Moment) -> Result<String> {
    let mut out = String::new();
    for node in nodes {
        let (key, fill, translate, ordinal) = match node {
            DtNode::Text(t) => {
                out.push_str(t);
                continue;
            }
            DtNode::Field {
                key,
                fill,
                translate,
                ordinal,
            } => (key, fill, translate, ordinal),
        };
        if m.interval && !key.valid_for_interval() {
            return Err(ours(Error::data(
                "22007",
                "invalid format specification for an interval value (intervals are not tied \
                 to specific calendar dates)",
            )));
        }
        let start = out.len();
        if write_field(&mut out, *key, *fill, *translate, m)
            && out.len() > start
            && let Some(upper) = ordinal
        {
            let suffix = ordinal_suffix(&out[start..], *upper)?;
            out.push_str(suffix);
        }
    }
    Ok(out)
}

/// Writes one pattern; returns whether it is a number (which may take an ordinal suffix).
fn write_field(out: &mut String, key: DtKey, fill: bool, translate: bool, m: &Moment) -> bool {
    // A year as printed: years BC count from 1 (astronomical 0 is 1 BC); interval years as is.
    let adjust = |y: i64| if m.interval || y > 0 { y } else { 1 - y };
    // Width of a two-digit field that may be negative (interval fields).
    let width2 = |v: i64| {
        if fill {
            0
        } else if v >= 0 {
            2
        } else {
            3
        }
    };
    let name = |s: &str, case: Case, pad: bool| {
        let s = case.apply(s);
        if pad && !fill && !translate {
            format!("{s:<9}")
        } else {
            s
        }
    };
    match key {
        DtKey::Hour12 => {
            let h = if m.hour % 12 == 0 { 12 } else { m.hour % 12 };
            out.push_str(&padded(h, width2(m.hour)));
        }
        DtKey::Hour24 => out.push_str(&padded(m.hour, width2(m.hour))),
        DtKey::Minute => out.push_str(&padded(m.min, width2(m.min))),
        DtKey::Second => out.push_str(&padded(m.sec, width2(m.sec))),
        DtKey::Fraction(n) => {
            let v = m.usec / 10_i64.pow(6 - u32::from(n));
            out.push_str(&padded(v, usize::from(n)));
        }
        DtKey::SecondOfDay => {
            out.push_str(&(m.hour * 3600 + m.min * 60 + m.sec).to_string());
        }
        DtKey::Meridiem(marker) => {
            out.push_str(&marker.spell(if m.hour % 24 >= 12 { "PM" } else { "AM" }));
            return false;
        }
        DtKey::Era(marker) => {
            out.push_str(&marker.spell(if m.year <= 0 { "BC" } else { "AD" }));
            return false;
        }
        DtKey::YearComma => {
            let y = adjust(m.year);
            let thousands = y / 1000;
            out.push_str(&format!("{thousands},{:03}", y - thousands * 1000));
        }
        DtKey::Year(n) | DtKey::IsoYear(n) => {
            let year = adjust(m.year);
            let v = if matches!(key, DtKey::Year(_)) {
                year
            } else {
                adjust(m.iso_year)
            };
            let (v, width) = match n {
                4 => (v, 4),
                3 => (v % 1000, 3),
                2 => (v % 100, 2),
                _ => (v % 10, 1),
            };
            let width = if n == 1 {
                1
            } else if fill {
                0
            } else if year >= 0 {
                width
            } else {
                width + 1
            };
            out.push_str(&padded(v, width));
        }
        DtKey::MonthName(case) | DtKey::MonthAbbr(case) => {
            if let Some(month) = usize::try_from(m.mon - 1).ok().and_then(|i| MONTHS.get(i)) {
                if matches!(key, DtKey::MonthName(_)) {
                    out.push_str(&name(month, case, true));
                } else {
                    out.push_str(&name(&month[..3], case, false));
                }
            }
            return false;
        }
        DtKey::MonthNumber => out.push_str(&padded(m.mon, width2(m.mon))),
        DtKey::DayName(case) | DtKey::DayAbbr(case) => {
            if let Some(day) = usize::try_from(m.wday).ok().and_then(|i| DAYS.get(i)) {
                if matches!(key, DtKey::DayName(_)) {
                    out.push_str(&name(day, case, true));
                } else {
                    out.push_str(&name(&day[..3], case, false));
                }
            }
            return false;
        }
        DtKey::DayOfYear => out.push_str(&padded(m.yday, if fill { 0 } else { 3 })),
        DtKey::IsoDayOfYear => out.push_str(&padded(m.iso_yday, if fill { 0 } else { 3 })),
        DtKey::DayOfMonth => out.push_str(&padded(m.mday, if fill { 0 } else { 2 })),
        DtKey::DayOfWeek => out.push_str(&(m.wday + 1).to_string()),
        DtKey::IsoDayOfWeek => {
            out.push_str(&(if m.wday == 0 { 7 } else { m.wday }).to_string());
        }
        DtKey::WeekOfMonth => out.push_str(&((m.mday - 1) / 7 + 1).to_string()),
        DtKey::WeekOfYear => {
            out.push_str(&padded((m.yday - 1) / 7 + 1, if fill { 0 } else { 2 }));
        }
        DtKey::IsoWeek => out.push_str(&padded(m.iso_week, if fill { 0 } else { 2 })),
        DtKey::Century => {
            let c = if m.interval {
                m.year / 100
            } else if m.year > 0 {
                (m.year - 1) / 100 + 1
            } else {
                m.year / 100 - 1
            };
            if (-99..=99).contains(&c) {
                out.push_str(&padded(c, width2(c)));
            } else {
                out.push_str(&c.to_string());
            }
        }
        DtKey::Julian => out.push_str(&m.julian.to_string()),
        DtKey::Quarter => {
            if m.mon != 0 {
                out.push_str(&((m.mon - 1) / 3 + 1).to_string());
            }
        }
        DtKey::RomanMonth { upper } => {
            if m.mon != 0 || m.year != 0 {
                let index = if m.mon == 0 {
                    if m.year >= 0 { 0 } else { 11 }
                } else if m.mon < 0 {
                    -(m.mon + 1)
                } else {
                    12 - m.mon
                };
                if let Some(r) = usize::try_from(index)
                    .ok()
                    .and_then(|i| ROMAN_MONTHS.get(i))
                {
                    let r = if upper {
                        (*r).to_string()
                    } else {
                        r.to_ascii_lowercase()
                    };
                    if fill {
                        out.push_str(&r);
                    } else {
                        out.push_str(&format!("{r:<4}"));
                    }
                }
            }
            return false;
        }
        DtKey::ZoneName { upper } => {
            if let Some(offset) = m.zone {
                let abbrev = m.abbrev.clone().unwrap_or_else(|| zone_abbrev(offset));
                if upper {
                    out.push_str(&abbrev);
                } else {
                    out.push_str(&abbrev.to_ascii_lowercase());
                }
            }
            return false;
        }
        DtKey::ZoneHours => {
            let offset = m.zone.unwrap_or(0);
            let sign = if offset >= 0 { '+' } else { '-' };
            out.push_str(&format!("{sign}{:02}", offset.abs() / 3600));
            return false;
        }
        DtKey::ZoneMinutes => {
            out.push_str(&format!("{:02}", m.zone.unwrap_or(0).abs() % 3600 / 60));
            return false;
        }
        DtKey::ZoneOffset => {
            let offset = m.zone.unwrap_or(0);
            let sign = if offset >= 0 { '+' } else { '-' };
            let hours = i64::from(offset.abs() / 3600);
            out.push(sign);
            out.push_str(&padded(hours, if fill { 0 } else { 2 }));
            if offset.abs() % 3600 != 0 {
                out.push_str(&format!(":{:02}", offset.abs() % 3600 / 60));
            }
            return false;
        }
        DtKey::FixedFormat => return false,
    }
    true
}

// ---------------------------------------------------------------------------------------------
// Numbers (Tables 9.28 and 9.29)

/// A number to format.
#[derive(Debug, Clone, PartialEq)]
enum Number {
    /// An integer; `small` for `smallint` and `integer` (which format `EEEE` through `double
    /// precision`, as PostgreSQL's `int4_to_char` does).
    Int { v: i128, small: bool },
    /// A `numeric`: the signed integer `text` times 10^-`scale`.
    Dec { text: String, scale: i64 },
    /// `double precision`.
    F64(f64),
    /// `real`.
    F32(f32),
}

/// A numeric template pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumKey {
    /// `,`: group separator.
    Comma,
    /// `.`: decimal point.
    Point,
    /// `0`: digit position that is kept even if it is a leading zero.
    Zero,
    /// `9`: digit position (blank for a leading zero).
    Nine,
    /// `B`: accepted, no effect.
    Blank,
    /// `C`: accepted, no effect.
    C,
    /// `D`: decimal point (locale).
    D,
    /// `EEEE`: exponent for scientific notation.
    Eeee,
    /// `FM`: fill mode (no padding blanks or trailing zeros).
    Fm,
    /// `G`: group separator (locale).
    G,
    /// `L`: currency symbol (locale).
    L,
    /// `MI`: minus sign in the given position (if the number < 0).
    Mi,
    /// `PL`: plus sign in the given position (if the number > 0).
    Pl,
    /// `PR`: negative value in angle brackets.
    Pr,
    /// `RN`: Roman numeral (1–3999), upper case.
    RomanUpper,
    /// `rn`: Roman numeral, lower case.
    RomanLower,
    /// `SG`: plus or minus sign in the given position.
    Sg,
    /// `SP`: accepted, no effect.
    Sp,
    /// `S`: sign anchored to the number.
    S,
    /// `TH`: upper-case ordinal suffix.
    ThUpper,
    /// `th`: lower-case ordinal suffix.
    ThLower,
    /// `V`: shift by 10^n digits (n is the number of 9s after `V`).
    V,
}

/// The numeric patterns; matching is case-sensitive and takes the longest pattern.
const NUM_KEYWORDS: &[(&str, NumKey)] = {
    use NumKey::*;
    &[
        (",", Comma),
        (".", Point),
        ("0", Zero),
        ("9", Nine),
        ("B", Blank),
        ("C", C),
        ("D", D),
        ("EEEE", Eeee),
        ("FM", Fm),
        ("G", G),
        ("L", L),
        ("MI", Mi),
        ("PL", Pl),
        ("PR", Pr),
        ("RN", RomanUpper),
        ("SG", Sg),
        ("SP", Sp),
        ("S", S),
        ("TH", ThUpper),
        ("V", V),
        ("b", Blank),
        ("c", C),
        ("d", D),
        ("eeee", Eeee),
        ("fm", Fm),
        ("g", G),
        ("l", L),
        ("mi", Mi),
        ("pl", Pl),
        ("pr", Pr),
        ("rn", RomanLower),
        ("sg", Sg),
        ("sp", Sp),
        ("s", S),
        ("th", ThLower),
        ("v", V),
    ]
};

#[derive(Debug, Clone, PartialEq, Eq)]
enum NumNode {
    Key(NumKey),
    Text(String),
}

/// Where an `S` sign goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SignAnchor {
    None,
    /// Before the first digit written.
    Pre,
    /// After the last digit.
    Post,
}

/// The digit layout of a numeric format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NumLayout {
    /// Digit positions before the decimal point.
    pre: i64,
    /// Digit positions after the decimal point.
    post: i64,
    /// Digits shifted by `V`.
    multi: i64,
    /// Digit positions before an `S` that comes before the decimal point.
    pre_sign: i64,
    /// One-based position of the first `0` before the decimal point.
    zero_start: i64,
    /// Position of the last `0`.
    zero_end: i64,
    anchor: SignAnchor,
    decimal: bool,
    zero: bool,
    blank: bool,
    fill: bool,
    sign_anchored: bool,
    bracket: bool,
    minus: bool,
    plus: bool,
    roman: bool,
    shift: bool,
    eeee: bool,
}

/// A parsed numeric format.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NumFormat {
    nodes: Vec<NumNode>,
    layout: NumLayout,
}

fn format_syntax(message: &str) -> DataFusionError {
    ours(Error::plan("42601", message))
}

/// Parses a numeric format (PostgreSQL docs, Tables 9.28 and 9.29), refusing the combinations
/// PostgreSQL refuses.
fn parse_number_format(fmt: &str) -> Result<NumFormat> {
    let mut nodes = Vec::new();
    let mut text = String::new();
    let mut l = NumLayout {
        pre: 0,
        post: 0,
        multi: 0,
        pre_sign: 0,
        zero_start: 0,
        zero_end: 0,
        anchor: SignAnchor::None,
        decimal: false,
        zero: false,
        blank: false,
        fill: false,
        sign_anchored: false,
        bracket: false,
        minus: false,
        plus: false,
        roman: false,
        shift: false,
        eeee: false,
    };
    let mut rest = fmt;
    while !rest.is_empty() {
        let Some((len, key)) = longest_keyword(rest, NUM_KEYWORDS) else {
            let used = read_text(rest, &mut text);
            rest = &rest[used..];
            continue;
        };
        rest = &rest[len..];
        if !text.is_empty() {
            nodes.push(NumNode::Text(std::mem::take(&mut text)));
        }
        nodes.push(NumNode::Key(key));
        if l.eeee && key != NumKey::Eeee {
            return Err(format_syntax("\"EEEE\" must be the last pattern used"));
        }
        match key {
            NumKey::Nine => {
                if l.bracket {
                    return Err(format_syntax("\"9\" must be ahead of \"PR\""));
                }
                if l.shift {
                    l.multi += 1;
                } else if l.decimal {
                    l.post += 1;
                } else {
                    l.pre += 1;
                }
            }
            NumKey::Zero => {
                if l.bracket {
                    return Err(format_syntax("\"0\" must be ahead of \"PR\""));
                }
                if !l.zero && !l.decimal {
                    l.zero = true;
                    l.zero_start = l.pre + 1;
                }
                if l.decimal {
                    l.post += 1;
                } else {
                    l.pre += 1;
                }
                l.zero_end = l.pre + l.post;
            }
            NumKey::Blank => {
                if l.pre == 0 && l.post == 0 && !l.zero {
                    l.blank = true;
                }
            }
            NumKey::D | NumKey::Point => {
                if l.decimal {
                    return Err(format_syntax("multiple decimal points"));
                }
                if l.shift {
                    return Err(format_syntax("cannot use \"V\" and decimal point together"));
                }
                l.decimal = true;
            }
            NumKey::Fm => l.fill = true,
            NumKey::S => {
                if l.sign_anchored {
                    return Err(format_syntax("cannot use \"S\" twice"));
                }
                if l.plus || l.minus || l.bracket {
                    return Err(format_syntax(
                        "cannot use \"S\" and \"PL\"/\"MI\"/\"SG\"/\"PR\" together",
                    ));
                }
                if !l.decimal {
                    l.anchor = SignAnchor::Pre;
                    l.pre_sign = l.pre;
                    l.sign_anchored = true;
                } else if l.anchor == SignAnchor::None {
                    l.anchor = SignAnchor::Post;
                    l.sign_anchored = true;
                }
            }
            NumKey::Mi => {
                if l.sign_anchored {
                    return Err(format_syntax("cannot use \"S\" and \"MI\" together"));
                }
                l.minus = true;
            }
            NumKey::Pl => {
                if l.sign_anchored {
                    return Err(format_syntax("cannot use \"S\" and \"PL\" together"));
                }
                l.plus = true;
            }
            NumKey::Sg => {
                if l.sign_anchored {
                    return Err(format_syntax("cannot use \"S\" and \"SG\" together"));
                }
                l.minus = true;
                l.plus = true;
            }
            NumKey::Pr => {
                if l.sign_anchored || l.plus || l.minus {
                    return Err(format_syntax(
                        "cannot use \"PR\" and \"S\"/\"PL\"/\"MI\"/\"SG\" together",
                    ));
                }
                l.bracket = true;
            }
            NumKey::RomanUpper | NumKey::RomanLower => l.roman = true,
            NumKey::V => {
                if l.decimal {
                    return Err(format_syntax("cannot use \"V\" and decimal point together"));
                }
                l.shift = true;
            }
            NumKey::Eeee => {
                if l.eeee {
                    return Err(format_syntax("cannot use \"EEEE\" twice"));
                }
                if l.blank
                    || l.fill
                    || l.sign_anchored
                    || l.bracket
                    || l.minus
                    || l.plus
                    || l.roman
                    || l.shift
                {
                    return Err(format_syntax(
                        "\"EEEE\" is incompatible with other formats (\"EEEE\" may only be \
                         used together with digit and decimal point patterns)",
                    ));
                }
                l.eeee = true;
            }
            NumKey::Comma
            | NumKey::C
            | NumKey::G
            | NumKey::L
            | NumKey::Sp
            | NumKey::ThUpper
            | NumKey::ThLower => {}
        }
    }
    if !text.is_empty() {
        nodes.push(NumNode::Text(text));
    }
    Ok(NumFormat { nodes, layout: l })
}

/// The magnitude `digits` × 10^-`scale`, rounded half away from zero to `to` decimals, as
/// the digits of the result × 10^`to` (at least one digit).
fn rescale(digits: &[u8], scale: i64, to: i64) -> Vec<u8> {
    let mut d = digits.to_vec();
    if to >= scale {
        d.resize(d.len() + (to - scale) as usize, b'0');
    } else {
        let dropped = (scale - to) as usize;
        let keep = d.len().saturating_sub(dropped);
        let round_up = d.len() >= dropped && d[keep] >= b'5';
        d.truncate(keep);
        if round_up {
            let mut i = d.len();
            loop {
                if i == 0 {
                    d.insert(0, b'1');
                    break;
                }
                i -= 1;
                if d[i] == b'9' {
                    d[i] = b'0';
                } else {
                    d[i] += 1;
                    break;
                }
            }
        }
    }
    let first = d.iter().position(|&c| c != b'0').unwrap_or(d.len());
    d.drain(..first);
    if d.is_empty() {
        d.push(b'0');
    }
    d
}

/// Unscaled `digits` with `post` of them after a decimal point, as `numeric_out` writes them.
fn decimal_text(digits: &[u8], post: i64) -> Vec<u8> {
    let post = post as usize;
    let mut d = digits.to_vec();
    if d.len() <= post {
        let mut padded = vec![b'0'; post + 1 - d.len()];
        padded.extend_from_slice(&d);
        d = padded;
    }
    if post > 0 {
        d.insert(d.len() - post, b'.');
    }
    d
}

/// Splits a signed integer text into (negative, digits).
fn split_sign(text: &str) -> (bool, &[u8]) {
    match text.strip_prefix('-') {
        Some(d) => (true, d.as_bytes()),
        None => (false, text.as_bytes()),
    }
}

/// `pre` + `post` + 1 `#`s with a point after the first `pre`: a number too wide for the
/// format.
fn overflow_text(pre: i64, post: i64) -> Vec<u8> {
    let mut t = vec![b'#'; (pre + post + 1) as usize];
    t[pre as usize] = b'.';
    t
}

/// Compares the digits before the point with the format's: returns the text to lay out and
/// the count of leading digit positions left blank.
fn fit(l: &NumLayout, text: Vec<u8>) -> (Vec<u8>, i64) {
    let pre_len = text.iter().position(|&c| c == b'.').unwrap_or(text.len()) as i64;
    if pre_len < l.pre {
        (text, l.pre - pre_len)
    } else if pre_len > l.pre {
        (overflow_text(l.pre, l.post), 0)
    } else {
        (text, 0)
    }
}

/// The sign and digits of an exact decimal, rounded to the format's decimals.
fn numeric_text(l: &mut NumLayout, neg: bool, digits: &[u8], scale: i64) -> (Vec<u8>, i64, u8) {
    let mut scale = scale;
    if l.shift {
        scale -= l.multi;
        l.pre += l.multi;
    }
    let rounded = rescale(digits, scale, l.post);
    let sign = if neg && rounded != b"0" { b'-' } else { b'+' };
    let (text, spaces) = fit(l, decimal_text(&rounded, l.post));
    (text, spaces, sign)
}

/// A floating-point number as C's `%.*f` writes it in PostgreSQL (which spells out `NaN` and
/// `Infinity`).
fn c_fixed(v: f64, decimals: i64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v < 0.0 { "-Infinity" } else { "Infinity" }.to_string()
    } else {
        format!("{:.*}", decimals as usize, v)
    }
}

/// The sign and digits of a floating-point number, keeping at most `max_digits` significant
/// digits (C's `DBL_DIG` or `FLT_DIG`). `NaN` and `Infinity` are laid out as if they were
/// digits, as PostgreSQL does.
fn float_text(l: &mut NumLayout, v: f64, max_digits: i64) -> (Vec<u8>, i64, u8) {
    let int_len = c_fixed(v.abs(), 0).len() as i64;
    if int_len >= max_digits {
        l.post = 0;
    } else if int_len + l.post > max_digits {
        l.post = max_digits - int_len;
    }
    let s = c_fixed(v, l.post);
    let (sign, body) = match s.strip_prefix('-') {
        Some(b) => (b'-', b),
        None => (b'+', s.as_str()),
    };
    let (text, spaces) = fit(l, body.as_bytes().to_vec());
    (text, spaces, sign)
}

/// `EEEE` of a floating-point number: C's `%+.*e` with a space for the plus sign.
fn float_sci(l: &NumLayout, v: f64) -> String {
    if !v.is_finite() {
        let mut t = vec![b'#'; (l.pre + l.post + 6) as usize];
        t[0] = b' ';
        t[(l.pre + 1) as usize] = b'.';
        return String::from_utf8_lossy(&t).into_owned();
    }
    let s = format!("{:.*e}", l.post as usize, v.abs());
    let (mantissa, exp) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let sign = if v.is_sign_negative() { '-' } else { ' ' };
    format!("{sign}{mantissa}e{exp:+03}")
}

/// `EEEE` of an exact decimal: one digit before the point, rounded half away from zero (which
/// may carry to `10.00e+00`, as in PostgreSQL).
fn numeric_sci(l: &NumLayout, neg: bool, digits: &[u8], scale: i64) -> String {
    let first = digits.iter().position(|&c| c != b'0');
    let Some(first) = first else {
        let zero = decimal_text(b"0", l.post);
        return format!(" {}e+00", String::from_utf8_lossy(&zero));
    };
    let digits = &digits[first..];
    let exp = digits.len() as i64 - 1 - scale;
    let significand = rescale(digits, digits.len() as i64 - 1, l.post);
    let text = decimal_text(&significand, l.post);
    let sign = if neg { '-' } else { ' ' };
    format!("{sign}{}e{exp:+03}", String::from_utf8_lossy(&text))
}

/// Roman numerals of 1–3999; fifteen `#`s otherwise.
fn int_to_roman(n: i64) -> String {
    if !(1..=3999).contains(&n) {
        return "#".repeat(15);
    }
    const PARTS: [(i64, &str); 13] = [
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ];
    let mut n = n;
    let mut out = String::new();
    for (value, letters) in PARTS {
        while n >= value {
            out.push_str(letters);
            n -= value;
        }
    }
    out
}

fn integer_out_of_range() -> DataFusionError {
    ours(Error::data("22003", "integer out of range"))
}

/// The Roman numeral of a number: integers and `numeric` must fit `integer`; floating-point
/// numbers round half to even.
fn roman_of(n: &Number) -> Result<String> {
    let int = |v: i128| -> Result<i64> {
        i32::try_from(v)
            .map(i64::from)
            .map_err(|_| integer_out_of_range())
    };
    let float = |v: f64| {
        let r = v.round_ties_even();
        if (f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&r) {
            int_to_roman(r as i64)
        } else {
            int_to_roman(0)
        }
    };
    Ok(match n {
        Number::Int { v, .. } => int_to_roman(int(*v)?),
        Number::Dec { text, scale } => {
            let (neg, digits) = split_sign(text);
            let r = rescale(digits, *scale, 0);
            if r.len() > 12 {
                return Err(integer_out_of_range());
            }
            let v: i128 = String::from_utf8_lossy(&r).parse().unwrap_or(0);
            int_to_roman(int(if neg { -v } else { v })?)
        }
        Number::F64(v) => float(*v),
        Number::F32(v) => float(f64::from(*v)),
    })
}

/// Formats a number (PostgreSQL docs, Tables 9.28 and 9.29).
fn format_number(f: &NumFormat, n: &Number) -> Result<String> {
    let mut l = f.layout;
    if l.roman {
        let roman = roman_of(n)?;
        return lay_out(&f.nodes, l, roman.as_bytes(), 0, 0);
    }
    if l.eeee {
        // The whole output is the number in scientific notation.
        return Ok(match n {
            Number::Int { v, small: true } => float_sci(&l, *v as f64),
            Number::Int { v, small: false } => {
                let text = v.to_string();
                let (neg, digits) = split_sign(&text);
                numeric_sci(&l, neg, digits, 0)
            }
            Number::Dec { text, scale } => {
                let (neg, digits) = split_sign(text);
                numeric_sci(&l, neg, digits, *scale)
            }
            Number::F64(v) => float_sci(&l, *v),
            Number::F32(v) => float_sci(&l, f64::from(*v)),
        });
    }
    let (text, spaces, sign) = match n {
        Number::Int { v, .. } => {
            let text = v.to_string();
            let (neg, digits) = split_sign(&text);
            numeric_text(&mut l, neg, digits, 0)
        }
        Number::Dec { text, scale } => {
            let (neg, digits) = split_sign(text);
            numeric_text(&mut l, neg, digits, *scale)
        }
        Number::F64(v) => {
            let mut v = *v;
            if l.shift {
                v *= 10_f64.powi(l.multi.clamp(0, 400) as i32);
                l.pre += l.multi;
            }
            float_text(&mut l, v, 15)
        }
        Number::F32(v) => {
            let mut v = *v;
            if l.shift {
                v *= 10_f32.powi(l.multi.clamp(0, 400) as i32);
                l.pre += l.multi;
            }
            float_text(&mut l, f64::from(v), 6)
        }
    };
    lay_out(&f.nodes, l, &text, spaces, sign)
}

/// The position of the last non-zero digit after the decimal point of `number`, or of the
/// point itself if all those digits are zero; `None` without a point.
fn last_relevant_digit(number: &[u8]) -> Option<usize> {
    let point = number.iter().position(|&c| c == b'.')?;
    Some(
        number[point + 1..]
            .iter()
            .rposition(|&c| c != b'0')
            .map_or(point, |i| point + 1 + i),
    )
}

/// Lays the number `number` (digits with an optional point, or `#`s, or a Roman numeral) out
/// over the format's nodes: `spaces` leading digit positions are blank (or zeros for `0`
/// positions), the sign goes where the format puts it.
fn lay_out(
    nodes: &[NumNode],
    l: NumLayout,
    number: &[u8],
    spaces: i64,
    sign: u8,
) -> Result<String> {
    let mut l = l;
    let mut spaces = spaces;
    let mut sign = sign;
    let mut out: Vec<u8> = Vec::with_capacity(nodes.len() + number.len() + 4);
    if l.zero_start > 0 {
        l.zero_start -= 1;
    }
    let mut sign_wrote = false;
    if l.roman {
        l = NumLayout {
            pre: 0,
            post: 0,
            pre_sign: 0,
            anchor: SignAnchor::None,
            decimal: false,
            zero: false,
            blank: false,
            sign_anchored: false,
            bracket: false,
            minus: false,
            plus: false,
            shift: false,
            eeee: false,
            ..l
        };
        spaces = 0;
        sign = 0;
    } else if l.plus || l.minus {
        // MI/PL/SG write the sign themselves; with PL alone, a minus sign still goes before
        // the digits.
        sign_wrote = !l.plus || l.minus;
    } else {
        if sign != b'-' && l.fill {
            l.bracket = false;
        }
        sign_wrote = sign == b'+' && l.fill && !l.sign_anchored;
        if l.anchor == SignAnchor::Pre && l.pre == l.pre_sign {
            l.anchor = SignAnchor::Post;
        }
    }
    let mut num_count = l.post + l.pre - 1;
    let mut last_relevant = None;
    if l.fill && l.decimal {
        last_relevant = last_relevant_digit(number);
        if let Some(lr) = last_relevant
            && l.zero_end > spaces
        {
            let last_zero = ((number.len() as i64 - 1).min(l.zero_end - spaces)).max(0) as usize;
            if lr < last_zero {
                last_relevant = Some(last_zero);
            }
        }
    }
    if !sign_wrote && spaces == 0 {
        num_count += 1;
    }
    let at = |i: usize| number.get(i).copied().unwrap_or(0);
    let sign_text: &[u8] = if sign == b'-' { b"-" } else { b"+" };
    let mut num_in = false;
    let mut num_curr: i64 = 0;
    let mut p: usize = 0;
    for node in nodes {
        let key = match node {
            NumNode::Text(t) => {
                out.extend_from_slice(t.as_bytes());
                continue;
            }
            NumNode::Key(k) => *k,
        };
        match key {
            NumKey::Nine | NumKey::Zero | NumKey::Point | NumKey::D => {
                if l.roman {
                    continue;
                }
                num_in = false;
                let predec_space = !l.zero && p == 0 && at(0) == b'0' && l.post != 0;
                let relevant_is_point = last_relevant.is_some_and(|i| at(i) == b'.');
                // The sign, just before the first digit written.
                if !sign_wrote
                    && (num_curr >= spaces || (l.zero && l.zero_start == num_curr))
                    && (!predec_space || relevant_is_point)
                {
                    if l.sign_anchored {
                        if l.anchor == SignAnchor::Pre {
                            out.extend_from_slice(sign_text);
                            sign_wrote = true;
                        }
                    } else if l.bracket {
                        out.push(if sign == b'+' { b' ' } else { b'<' });
                        sign_wrote = true;
                    } else if sign == b'+' {
                        if !l.fill {
                            out.push(b' ');
                        }
                        sign_wrote = true;
                    } else if sign == b'-' {
                        out.push(b'-');
                        sign_wrote = true;
                    }
                }
                if num_curr < spaces && (l.zero_start > num_curr || !l.zero) {
                    if !l.fill {
                        out.push(b' ');
                    }
                } else if l.zero && num_curr < spaces && l.zero_start <= num_curr {
                    out.push(b'0');
                    num_in = true;
                } else {
                    if at(p) == b'.' {
                        out.push(b'.');
                    } else if last_relevant.is_some_and(|lr| p > lr) && key != NumKey::Zero {
                        // A trailing zero dropped by fill mode.
                    } else if predec_space {
                        if !l.fill {
                            out.push(b' ');
                        } else if relevant_is_point {
                            out.push(b'0');
                        }
                    } else {
                        out.push(at(p));
                        num_in = true;
                    }
                    if p < number.len() {
                        p += 1;
                    }
                }
                let mut end = num_count + i64::from(spaces > 0) + i64::from(l.decimal);
                if last_relevant == Some(p) {
                    end = num_curr;
                }
                if num_curr + 1 == end {
                    if sign_wrote && l.bracket {
                        out.push(if sign == b'+' { b' ' } else { b'>' });
                    } else if l.sign_anchored && l.anchor == SignAnchor::Post {
                        out.extend_from_slice(sign_text);
                    }
                }
                num_curr += 1;
            }
            NumKey::Comma | NumKey::G => {
                if num_in {
                    out.push(b',');
                } else if !l.fill {
                    out.push(b' ');
                }
            }
            // The C locale has no currency symbol; PostgreSQL writes a space.
            NumKey::L => out.push(b' '),
            NumKey::RomanUpper | NumKey::RomanLower => {
                let r = String::from_utf8_lossy(number);
                let r = if key == NumKey::RomanLower {
                    r.to_ascii_lowercase()
                } else {
                    r.into_owned()
                };
                if l.fill {
                    out.extend_from_slice(r.as_bytes());
                } else {
                    out.extend_from_slice(format!("{r:>15}").as_bytes());
                }
            }
            NumKey::ThUpper | NumKey::ThLower => {
                if l.roman || at(0) == b'#' || sign == b'-' || l.decimal {
                    continue;
                }
                let digits = String::from_utf8_lossy(number);
                out.extend_from_slice(ordinal_suffix(&digits, key == NumKey::ThUpper)?.as_bytes());
            }
            NumKey::Mi => {
                if sign == b'-' {
                    out.push(b'-');
                } else if !l.fill {
                    out.push(b' ');
                }
            }
            NumKey::Pl => {
                if sign == b'+' {
                    out.push(b'+');
                } else if !l.fill {
                    out.push(b' ');
                }
            }
            NumKey::Sg => out.push(sign),
            NumKey::Blank
            | NumKey::C
            | NumKey::Eeee
            | NumKey::Fm
            | NumKey::Pr
            | NumKey::Sp
            | NumKey::S
            | NumKey::V => {}
        }
    }
    // A missing digit (the number ran out) ends the text, as in PostgreSQL.
    if let Some(end) = out.iter().position(|&c| c == 0) {
        out.truncate(end);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2023-11-05 01:40:07.123456, a Sunday.
    fn sample() -> NaiveDateTime {
        NaiveDate::from_ymd_opt(2023, 11, 5)
            .unwrap()
            .and_hms_micro_opt(1, 40, 7, 123_456)
            .unwrap()
    }

    fn ts(dt: NaiveDateTime, fmt: &str) -> String {
        format_moment(&parse_datetime_format(fmt), &moment_from_datetime(dt, None)).unwrap()
    }

    fn tstz(dt: NaiveDateTime, fmt: &str) -> String {
        format_moment(
            &parse_datetime_format(fmt),
            &moment_from_datetime(dt, Some(0)),
        )
        .unwrap()
    }

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_opt(h, mi, s)
            .unwrap()
    }

    fn span(months: i64, days: i64, micros: i64, fmt: &str) -> Result<String> {
        format_moment(
            &parse_datetime_format(fmt),
            &moment_from_interval(months, days, micros),
        )
    }

    fn num(n: Number, fmt: &str) -> String {
        format_number(&parse_number_format(fmt).unwrap(), &n).unwrap()
    }

    fn dec(text: &str, scale: i64) -> Number {
        Number::Dec {
            text: text.to_string(),
            scale,
        }
    }

    fn int(v: i128) -> Number {
        Number::Int { v, small: true }
    }

    #[test]
    fn common_date_time_patterns() {
        let t = sample();
        assert_eq!(
            ts(t, "YYYY-MM-DD HH24:MI:SS.US"),
            "2023-11-05 01:40:07.123456"
        );
        assert_eq!(ts(t, "YYYY-MM-DD"), "2023-11-05");
        assert_eq!(ts(t, "HH:MI"), "01:40");
        assert_eq!(ts(t, "HH12:MI AM"), "01:40 AM");
        assert_eq!(ts(t, "Day, DD Month YYYY"), "Sunday   , 05 November  2023");
        assert_eq!(ts(t, "FMDay, FMDD FMMonth"), "Sunday, 5 November");
        assert_eq!(ts(t, "DAY day DY Dy dy"), "SUNDAY    sunday    SUN Sun sun");
        assert_eq!(
            ts(t, "MONTH|month|MON|Mon|mon"),
            "NOVEMBER |november |NOV|Nov|nov"
        );
        assert_eq!(ts(t, "TMDay TMMonth"), "Sunday November");
    }

    #[test]
    fn numeric_date_fields() {
        let t = sample();
        // Day of year: 31+28+31+30+31+30+31+31+30+31 = 304 days before November, plus 5.
        assert_eq!(ts(t, "DDD"), "309");
        // ISO week 1 of 2023 starts on Monday 2023-01-02; the 5th of November is the Sunday
        // of week 44, the 308th day of the ISO year.
        assert_eq!(ts(t, "IW"), "44");
        assert_eq!(ts(t, "IDDD"), "308");
        assert_eq!(ts(t, "IYYY IYY IY I"), "2023 023 23 3");
        assert_eq!(ts(t, "Q"), "4");
        assert_eq!(ts(t, "WW"), "45");
        assert_eq!(ts(t, "W"), "1");
        assert_eq!(ts(t, "D ID"), "1 7");
        assert_eq!(ts(t, "CC"), "21");
        assert_eq!(ts(t, "J"), "2460254");
        assert_eq!(ts(t, "Y,YYY YYYY YYY YY Y"), "2,023 2023 023 23 3");
        assert_eq!(ts(t, "RM|rm|FMRM"), "XI  |xi  |XI");
        assert_eq!(ts(t, "MM"), "11");
        assert_eq!(ts(t, "BC AD b.c. a.d."), "AD AD a.d. a.d.");
    }

    #[test]
    fn time_fields() {
        let t = sample();
        assert_eq!(ts(t, "HH HH12 HH24 MI SS"), "01 01 01 40 07");
        assert_eq!(ts(t, "MS US"), "123 123456");
        assert_eq!(
            ts(t, "FF1 FF2 FF3 FF4 FF5 FF6"),
            "1 12 123 1234 12345 123456"
        );
        assert_eq!(ts(t, "SSSS SSSSS"), "6007 6007");
        assert_eq!(ts(t, "am pm A.M. p.m."), "am am A.M. a.m.");
        assert_eq!(ts(t, "FMHH24:FMMI:FMSS"), "1:40:7");
        let afternoon = at(2023, 11, 5, 13, 5, 0);
        assert_eq!(ts(afternoon, "HH12:MI PM HH24"), "01:05 PM 13");
        assert_eq!(ts(afternoon, "pm P.M. a.m."), "pm P.M. p.m.");
        let midnight = at(2023, 11, 5, 0, 30, 0);
        assert_eq!(ts(midnight, "HH12 HH AM"), "12 12 AM");
        let noon = at(2023, 11, 5, 12, 0, 0);
        assert_eq!(ts(noon, "HH12 AM"), "12 PM");
    }

    #[test]
    fn ordinal_suffixes() {
        let t = sample();
        assert_eq!(ts(t, "DDth"), "05th");
        assert_eq!(ts(t, "DDTH"), "05TH");
        assert_eq!(ts(t, "FMDDth"), "5th");
        for (day, want) in [
            (1, "01st"),
            (2, "02nd"),
            (3, "03rd"),
            (4, "04th"),
            (11, "11th"),
            (12, "12th"),
            (13, "13th"),
            (21, "21st"),
            (22, "22nd"),
            (23, "23rd"),
            (31, "31st"),
        ] {
            assert_eq!(ts(at(2023, 10, day, 0, 0, 0), "DDth"), want);
        }
        // 2023-01-11 is day 011 of the year: "11" takes "th".
        assert_eq!(ts(at(2023, 1, 11, 0, 0, 0), "DDDth"), "011th");
        assert_eq!(ts(at(2023, 4, 11, 0, 0, 0), "DDDth"), "101st");
        // TH on a name is ignored.
        assert_eq!(ts(t, "Monthth"), "November ");
    }

    #[test]
    fn zones() {
        let t = sample();
        assert_eq!(ts(t, "TZ|tz|OF|TZH:TZM"), "||+00|+00:00");
        assert_eq!(tstz(t, "TZ|tz|OF|TZH:TZM"), "UTC|utc|+00|+00:00");
        let m = moment_from_datetime(t, Some(5 * 3600 + 1800));
        assert_eq!(
            format_moment(&parse_datetime_format("TZ OF FMOF TZH TZM"), &m).unwrap(),
            "+05:30 +05:30 +5:30 +05 30"
        );
        let m = moment_from_datetime(t, Some(-8 * 3600));
        assert_eq!(
            format_moment(&parse_datetime_format("TZ OF TZH"), &m).unwrap(),
            "-08 -08 -08"
        );
    }

    /// The zone database's abbreviations, as PostgreSQL 15 prints them for `TZ` (New York is
    /// EST in January, EDT in July; Kathmandu and Lord Howe have numeric ones, +0545 and
    /// +1030/+11).
    #[test]
    fn zone_abbreviations() {
        use super::zone_abbreviation;
        let zone = |n: &str| crate::sql::functions::datetime_input::zone_by_name(n).unwrap();
        // 2024-01-15 and 2024-07-15, 12:00 UTC, in seconds.
        let (winter, summer) = (1_705_320_000, 1_721_044_800);
        let ny = zone("America/New_York");
        assert_eq!(zone_abbreviation(ny, winter, 1).as_deref(), Some("EST"));
        assert_eq!(zone_abbreviation(ny, summer, 1).as_deref(), Some("EDT"));
        let kathmandu = zone("Asia/Kathmandu");
        assert_eq!(
            zone_abbreviation(kathmandu, summer, 1).as_deref(),
            Some("+0545")
        );
        let lord_howe = zone("Australia/Lord_Howe");
        assert_eq!(
            zone_abbreviation(lord_howe, summer, 1).as_deref(),
            Some("+1030")
        );
        assert_eq!(
            zone_abbreviation(lord_howe, winter, 1).as_deref(),
            Some("+11")
        );
    }

    #[test]
    fn zone_of_arrow_timestamps() {
        // 2023-11-05 01:40:07.123456 UTC in microseconds.
        let micros = 1_699_148_407_123_456;
        let utc: Tz = "+00:00".parse().unwrap();
        let m = moment_from_timestamp(micros, 1_000_000, Some(&utc)).unwrap();
        assert_eq!(m, moment_from_datetime(sample(), Some(0)));
        let plus2: Tz = "+02:00".parse().unwrap();
        let m = moment_from_timestamp(micros, 1_000_000, Some(&plus2)).unwrap();
        assert_eq!(
            format_moment(&parse_datetime_format("HH24:MI TZ"), &m).unwrap(),
            "03:40 +02"
        );
        // Before the epoch, the fraction still counts forward from the second.
        let m = moment_from_timestamp(-1, 1_000_000, None).unwrap();
        assert_eq!(
            format_moment(&parse_datetime_format("YYYY-MM-DD HH24:MI:SS.US"), &m).unwrap(),
            "1969-12-31 23:59:59.999999"
        );
        assert!(moment_from_timestamp(i64::MAX, 1, None).is_err());
    }

    #[test]
    fn literal_text() {
        let t = sample();
        assert_eq!(ts(t, "\"Day\" Day"), "Day Sunday   ");
        assert_eq!(ts(t, "\"Year\": YYYY"), "Year: 2023");
        assert_eq!(ts(t, "\\\"YYYY\\\""), "\"2023\"");
        assert_eq!(ts(t, "\"a\\\"b\""), "a\"b");
        // Outside quotes a backslash before anything else is kept.
        assert_eq!(ts(t, "a\\b"), "a\\b");
        // Not patterns: copied ("y" is a pattern). "FM" before a non-pattern disappears.
        assert_eq!(ts(t, "xyz ok; FMxx"), "x3z ok; xx");
        assert_eq!(ts(t, "Am"), "Am");
        // "Yyyy" is Y then yyy.
        assert_eq!(ts(t, "Yyyy"), "3023");
        // An unterminated quote runs to the end.
        assert_eq!(ts(t, "YYYY\"MM"), "2023MM");
        // Non-ASCII text is copied whole.
        assert_eq!(ts(t, "DD·MM€"), "05·11€");
        // FX and SP are accepted and print nothing.
        assert_eq!(ts(t, "FXDD DDSP"), "05 05");
    }

    #[test]
    fn years_before_christ() {
        // Astronomical year -43 is 44 BC.
        let t = at(-43, 3, 15, 0, 0, 0);
        assert_eq!(ts(t, "YYYY BC B.C. ad"), "0044 BC B.C. bc");
        assert_eq!(ts(t, "Y,YYY YYY YY Y"), "0,044 044 44 4");
        // 44 BC is in the first century BC (100 BC to 1 BC).
        assert_eq!(ts(t, "CC"), "-01");
        // Year 1 BC is astronomical year 0.
        let t = at(0, 12, 31, 0, 0, 0);
        assert_eq!(ts(t, "YYYY BC"), "0001 BC");
        assert_eq!(ts(t, "J"), "1721425");
        let t = at(2000, 6, 1, 0, 0, 0);
        assert_eq!(ts(t, "CC"), "20");
        let t = at(2001, 1, 1, 0, 0, 0);
        assert_eq!(ts(t, "CC"), "21");
    }

    #[test]
    fn iso_year_boundaries() {
        // 2021-01-01 is a Friday: ISO week 53 of 2020.
        let t = at(2021, 1, 1, 0, 0, 0);
        assert_eq!(ts(t, "IYYY-IW-ID IDDD"), "2020-53-5 369");
        // 2024-12-30 is a Monday: ISO week 1 of 2025.
        let t = at(2024, 12, 30, 0, 0, 0);
        assert_eq!(ts(t, "IYYY-IW-ID IDDD DDD"), "2025-01-1 001 365");
    }

    #[test]
    fn intervals() {
        // 1 year 2 months 3 days 04:05:06.789
        let micros = ((4 * 60 + 5) * 60 + 6) * 1_000_000 + 789_000;
        assert_eq!(
            span(14, 3, micros, "YYYY-MM-DD HH24:MI:SS.MS").unwrap(),
            "0001-02-03 04:05:06.789"
        );
        // (12 + 2) * 30 + 3 days.
        assert_eq!(span(14, 3, micros, "DDD").unwrap(), "423");
        assert_eq!(span(14, 3, micros, "Q RM").unwrap(), "1 II  ");
        // 30 hours: HH24 is not reduced, HH is the hour on a 12-hour clock.
        assert_eq!(
            span(0, 0, 30 * 3_600_000_000, "HH24 HH12 AM SSSS").unwrap(),
            "30 06 AM 108000"
        );
        // Negative fields keep their sign; two-digit fields widen to fit it.
        assert_eq!(
            span(-14, -3, -micros, "YYYY MM DD HH24 MI SS").unwrap(),
            "-0001 -02 -3 -04 -05 -06"
        );
        assert!(span(1, 0, 0, "Month").is_err());
        assert!(span(1, 0, 0, "Dy").is_err());
        assert!(span(1, 0, 0, "TZ").is_err());
        assert!(span(1, 0, 0, "AD").is_err());
        assert!(span(1, 0, 0, "D").is_err());
    }

    #[test]
    fn empty_and_plain_formats() {
        assert_eq!(ts(sample(), "hello"), "hello");
        assert!(parse_datetime_format("").is_empty());
    }

    #[test]
    fn numbers_from_the_docs() {
        // Examples of the table "to_char Examples" in the C locale.
        assert_eq!(num(dec("-1", 1), "99.99"), "  -.10");
        assert_eq!(num(dec("-1", 1), "FM9.99"), "-.1");
        assert_eq!(num(dec("-1", 1), "FM90.99"), "-0.1");
        assert_eq!(num(dec("1", 1), "0.9"), " 0.1");
        assert_eq!(num(int(12), "9990999.9"), "    0012.0");
        assert_eq!(num(int(12), "FM9990999.9"), "0012.");
        assert_eq!(num(int(485), "999"), " 485");
        assert_eq!(num(int(-485), "999"), "-485");
        assert_eq!(num(int(485), "9 9 9"), " 4 8 5");
        assert_eq!(num(int(1485), "9,999"), " 1,485");
        assert_eq!(num(int(1485), "9G999"), " 1,485");
        assert_eq!(num(dec("1485", 1), "999.999"), " 148.500");
        assert_eq!(num(dec("1485", 1), "FM999.999"), "148.5");
        assert_eq!(num(dec("1485", 1), "FM999.990"), "148.500");
        assert_eq!(num(dec("1485", 1), "999D999"), " 148.500");
        assert_eq!(num(dec("31485", 1), "9G999D999"), " 3,148.500");
        assert_eq!(num(int(-485), "999S"), "485-");
        assert_eq!(num(int(-485), "999MI"), "485-");
        assert_eq!(num(int(485), "999MI"), "485 ");
        assert_eq!(num(int(485), "FM999MI"), "485");
        assert_eq!(num(int(485), "SG999"), "+485");
        assert_eq!(num(int(-485), "SG999"), "-485");
        assert_eq!(num(int(-485), "9SG99"), "4-85");
        assert_eq!(num(int(-485), "999PR"), "<485>");
        assert_eq!(num(int(485), "RN"), "        CDLXXXV");
        assert_eq!(num(int(485), "FMRN"), "CDLXXXV");
        assert_eq!(num(dec("52", 1), "FMRN"), "V");
        assert_eq!(num(int(482), "999th"), " 482nd");
        assert_eq!(num(int(485), "\"Good number:\"999"), "Good number: 485");
        assert_eq!(
            num(dec("4858", 1), "\"Pre:\"999\" Post:\" .999"),
            "Pre: 485 Post: .800"
        );
        assert_eq!(num(int(12), "99V999"), " 12000");
        assert_eq!(num(dec("124", 1), "99V999"), " 12400");
        assert_eq!(num(dec("1245", 2), "99V9"), " 125");
        assert_eq!(num(dec("4859", 7), "9.99EEEE"), " 4.86e-04");
    }

    #[test]
    fn number_signs_and_padding() {
        // Without FM the sign takes a position (a space for a positive number).
        assert_eq!(num(int(5), "999"), "   5");
        assert_eq!(num(int(5), "FM999"), "5");
        assert_eq!(num(int(-5), "FM999"), "-5");
        assert_eq!(num(int(5), "S999"), "  +5");
        assert_eq!(num(int(5), "FMS999"), "+5");
        assert_eq!(num(int(5), "000"), " 005");
        assert_eq!(num(int(-5), "000"), "-005");
        // PL alone writes '+' where it stands and still reserves the sign position.
        assert_eq!(num(int(485), "PL999"), "+ 485");
        assert_eq!(num(int(-485), "PL999"), " -485");
        assert_eq!(num(int(5), "9PR"), " 5 ");
        assert_eq!(num(int(-5), "FM9PR"), "<5>");
        assert_eq!(num(int(5), "FM9PR"), "5");
        // The decimal point: zero before it is blank with 9, kept with 0.
        assert_eq!(num(dec("5", 1), "9.9"), "  .5");
        assert_eq!(num(dec("5", 1), "0.9"), " 0.5");
        assert_eq!(num(int(5), "FM9.99"), "5.");
        assert_eq!(num(int(0), "FM9.99"), "0.");
        assert_eq!(num(int(0), "9"), " 0");
        // Grouping separators before the first digit are blank (or dropped with FM).
        assert_eq!(num(int(5), "9,999"), "     5");
        assert_eq!(num(int(5), "FM9,999"), "5");
        assert_eq!(num(int(1234567), "9,999,999"), " 1,234,567");
        // Currency symbol: the C locale has none; PostgreSQL writes a space.
        assert_eq!(num(int(485), "L999"), "  485");
    }

    #[test]
    fn number_rounding_and_overflow() {
        // numeric rounds half away from zero.
        assert_eq!(num(dec("25", 1), "9"), " 3");
        assert_eq!(num(dec("-25", 1), "9"), "-3");
        assert_eq!(num(dec("-4", 1), "9"), " 0");
        assert_eq!(num(dec("9995", 3), "9.99"), " #.##");
        assert_eq!(num(dec("999", 1), "99.9"), " 99.9");
        assert_eq!(num(dec("9999", 2), "99.9"), " ##.#");
        assert_eq!(num(int(1234), "99"), " ##");
        assert_eq!(num(dec("5", 1), ".99"), " .##");
        // double precision rounds as printf does (half to even on the binary value).
        assert_eq!(num(Number::F64(2.5), "9"), " 2");
        assert_eq!(num(Number::F64(3.5), "9"), " 4");
        assert_eq!(num(Number::F64(-0.4), "9"), "-0");
        assert_eq!(num(Number::F64(1234.5678), "9999.99"), " 1234.57");
        assert_eq!(num(Number::F64(f64::NAN), "99999"), "   NaN");
        assert_eq!(num(Number::F64(f64::INFINITY), "999.99"), " ###.##");
        assert_eq!(num(Number::F64(f64::NEG_INFINITY), "999"), "-###");
        // At most 15 significant digits of a double, 6 of a real.
        assert_eq!(
            num(Number::F64(0.1), "9.99999999999999999"),
            "  .10000000000000"
        );
        assert_eq!(num(Number::F32(0.1), "9.9999999"), "  .10000");
    }

    #[test]
    fn number_scientific_and_roman() {
        assert_eq!(num(dec("12345678", 4), "9999.99EEEE"), " 1.23e+03");
        assert_eq!(num(int(0), "9.99EEEE"), " 0.00e+00");
        assert_eq!(num(dec("0", 0), "9.99EEEE"), " 0.00e+00");
        assert_eq!(num(dec("9995", 3), "9.99EEEE"), " 10.00e+00");
        assert_eq!(num(dec("-1234", 7), "9.9EEEE"), "-1.2e-04");
        assert_eq!(num(Number::F64(1e100), "9.99EEEE"), " 1.00e+100");
        assert_eq!(num(Number::F64(-1234.5), "9.9EEEE"), "-1.2e+03");
        assert_eq!(num(Number::F64(f64::NAN), "9.99EEEE"), " #.######");
        // Text around EEEE is not printed.
        assert_eq!(num(int(12), "xx9.99EEEEyy"), " 1.20e+01");
        assert_eq!(
            num(
                Number::Int {
                    v: 12,
                    small: false
                },
                "9EEEE"
            ),
            " 1e+01"
        );
        assert_eq!(num(int(1994), "RN"), "        MCMXCIV");
        assert_eq!(num(int(1994), "FMrn"), "mcmxciv");
        assert_eq!(num(int(4000), "RN"), "###############");
        assert_eq!(num(int(0), "RN"), "###############");
        assert_eq!(num(dec("19945", 1), "FMRN"), "MCMXCV");
        assert_eq!(num(Number::F64(2.5), "FMRN"), "II");
        assert_eq!(num(int(1994), "\"x\"FMRN\"y\""), "xMCMXCIVy");
        assert!(
            format_number(
                &parse_number_format("RN").unwrap(),
                &dec("100000000000000000000", 0)
            )
            .is_err()
        );
    }

    #[test]
    fn number_ordinals_and_shift() {
        assert_eq!(num(int(1), "9th"), " 1st");
        assert_eq!(num(int(12), "99TH"), " 12TH");
        assert_eq!(num(int(23), "FM99th"), "23rd");
        // No suffix for negative numbers or with a decimal point.
        assert_eq!(num(int(-1), "9th"), "-1");
        assert_eq!(num(dec("15", 1), "9.9th"), " 1.5");
        // A 0 after V is a digit position, not a shift.
        assert_eq!(num(int(12), "99V0"), "  12");
        assert_eq!(num(int(12), "0V99"), " ###");
        assert_eq!(num(Number::F64(12.5), "99V9"), " 125");
    }

    #[test]
    fn number_format_errors() {
        for bad in [
            "9.9.9",
            "9V9.9",
            "9.9V9",
            "S9S",
            "PR9",
            "FM9.9EEEE",
            "9.9EEEEEEEE",
            "9.9EEEE9",
            "S9MI",
            "MI9PR",
        ] {
            assert!(parse_number_format(bad).is_err(), "{bad}");
        }
        assert!(
            format_number(
                &parse_number_format("999th").unwrap(),
                &Number::F64(f64::NAN)
            )
            .is_err()
        );
    }

    #[test]
    fn number_keywords_without_output() {
        assert_eq!(num(int(5), "9C"), " 5");
        assert_eq!(num(int(5), "9B"), " 5");
        assert_eq!(num(int(5), "9SP"), " 5");
        assert_eq!(num(int(5), "Rn"), "Rn");
        assert_eq!(num(int(5), "E9"), "E 5");
        assert_eq!(num(int(5), ""), "");
    }

    #[test]
    fn columns_with_nulls_and_formats_per_row() {
        use arrow::array::{Int64Array, TimestampMicrosecondArray};
        let micros = 1_699_148_407_123_456;
        let values: ArrayRef = Arc::new(
            TimestampMicrosecondArray::from(vec![Some(micros), None, Some(0), Some(micros)])
                .with_timezone("+00:00"),
        );
        let out = to_char_array(&values, Formats::One(Some("YYYY-MM-DD TZ"))).unwrap();
        let out = out.as_string::<i32>();
        assert_eq!(out.value(0), "2023-11-05 UTC");
        assert!(out.is_null(1));
        assert_eq!(out.value(2), "1970-01-01 UTC");

        let formats = StringArray::from(vec![Some("HH24:MI"), Some("YYYY"), None, Some("")]);
        let out = to_char_array(&values, Formats::Each(&formats)).unwrap();
        let out = out.as_string::<i32>();
        assert_eq!(out.value(0), "01:40");
        assert!(out.is_null(1));
        assert!(out.is_null(2));
        // An empty format gives NULL for a date/time.
        assert!(out.is_null(3));

        let out = to_char_array(&values, Formats::One(None)).unwrap();
        assert_eq!(out.null_count(), 4);

        let numbers: ArrayRef = Arc::new(Int64Array::from(vec![Some(7), None]));
        let out = to_char_array(&numbers, Formats::One(Some("FM9th"))).unwrap();
        let out = out.as_string::<i32>();
        assert_eq!(out.value(0), "7th");
        assert!(out.is_null(1));
        let out = to_char_array(&numbers, Formats::One(Some(""))).unwrap();
        assert_eq!(out.as_string::<i32>().value(0), "");
    }

    #[test]
    fn other_column_types() {
        use arrow::array::{
            Date32Array, Decimal128Array, Float32Array, IntervalMonthDayNanoArray, NullArray,
            Time64MicrosecondArray, TimestampSecondArray,
        };
        use arrow::datatypes::IntervalMonthDayNano;
        let one = |values: ArrayRef, fmt: &str| -> String {
            let out = to_char_array(&values, Formats::One(Some(fmt))).unwrap();
            out.as_string::<i32>().value(0).to_string()
        };
        // 2023-11-05 is day 19666 after 1970-01-01; a date shows as UTC midnight.
        let date: ArrayRef = Arc::new(Date32Array::from(vec![19666]));
        assert_eq!(
            one(date, "FMMonth DD, YYYY HH24 TZ"),
            "November 05, 2023 00 UTC"
        );
        let secs: ArrayRef = Arc::new(TimestampSecondArray::from(vec![1_699_148_407]));
        assert_eq!(one(secs, "HH24:MI:SS TZ OF"), "01:40:07  +00");
        let interval: ArrayRef = Arc::new(IntervalMonthDayNanoArray::from(vec![
            IntervalMonthDayNano::new(14, 3, 3_723_000_000_000),
        ]));
        assert_eq!(
            one(interval, "YYYY MM DD HH24:MI:SS"),
            "0001 02 03 01:02:03"
        );
        let time: ArrayRef = Arc::new(Time64MicrosecondArray::from(vec![
            (13 * 3600 + 5 * 60) * 1_000_000,
        ]));
        assert_eq!(one(time, "HH12:MI AM"), "01:05 PM");
        let numeric: ArrayRef = Arc::new(
            Decimal128Array::from(vec![123_456])
                .with_precision_and_scale(10, 2)
                .unwrap(),
        );
        assert_eq!(one(numeric, "9,999.9"), " 1,234.6");
        let real: ArrayRef = Arc::new(Float32Array::from(vec![1.5]));
        assert_eq!(one(real, "9.99"), " 1.50");
        let nulls: ArrayRef = Arc::new(NullArray::new(2));
        let out = to_char_array(&nulls, Formats::One(Some("YYYY"))).unwrap();
        assert_eq!(out.null_count(), 2);
    }

    #[test]
    fn signature_checks() {
        let f = ToChar::new();
        let ts = DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()));
        assert_eq!(
            f.coerce_types(&[ts.clone(), DataType::Utf8View]).unwrap(),
            vec![ts.clone(), DataType::Utf8]
        );
        assert_eq!(
            f.return_type(&[ts.clone(), DataType::Utf8]).unwrap(),
            DataType::Utf8
        );
        assert!(f.return_type(&[DataType::Utf8, DataType::Utf8]).is_err());
        assert!(f.return_type(std::slice::from_ref(&ts)).is_err());
        assert!(f.return_type(&[ts, DataType::Int32]).is_err());
    }
}

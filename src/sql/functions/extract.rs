//! `EXTRACT(field FROM source)` and `date_part('field', source)` as PostgreSQL 14+ computes
//! them (PostgreSQL docs, 9.9.1 "EXTRACT, date_part"):
//!
//! ```text
//!  EXTRACT(second FROM TIMESTAMP '2020-03-15 10:20:30.5')   numeric   30.500000
//!  date_part('second', TIMESTAMP '2020-03-15 10:20:30.5')   double    30.5
//!  EXTRACT(epoch FROM INTERVAL '1 year')                     numeric   31557600.000000
//!  EXTRACT(hour FROM DATE '2020-01-01')                      0A000 unit "hour" not supported for type date
//! ```
//!
//! `EXTRACT` is `numeric`: `second` and `epoch` of a timestamp, time or interval carry six
//! decimals, `milliseconds` three, `julian` of a timestamp twenty, every other field none.
//! `date_part` is `double precision` with the same values. DataFusion's `date_part` dropped
//! the fraction of `second`, counted a year of an interval as 360 days in `epoch` and read
//! a `timestamptz` in UTC; here a `timestamptz`'s fields are those of its local time in the
//! session's `TimeZone`, as PostgreSQL reads them.
//!
//! The parse rewrites of [`crate::sql::parse`] turn `EXTRACT(f FROM x)` into
//! `weir_extract('f', x)`; [`DatePart`] replaces DataFusion's `date_part`.

use std::sync::Arc;

use arrow::array::timezone::Tz;
use arrow::array::{Array, ArrayRef, AsArray, Decimal128Array, Float64Array};
use arrow::datatypes::{
    DataType, Date32Type, Field, FieldRef, IntervalMonthDayNanoType, IntervalUnit,
    Time64MicrosecondType, TimeUnit, TimestampMicrosecondType,
};
use chrono::{Datelike, NaiveDate, NaiveDateTime, Offset, Timelike};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::Error;
use crate::sql::semantics::{ours, shape_result};

/// The precision of `EXTRACT`'s `numeric` results: below 38 digits so that their scale is
/// shown (`30.500000`), as PostgreSQL shows it, also of a `sum` of them (DataFusion's sum
/// adds ten digits). The widest value, a timestamp's `julian` with twenty decimals, has
/// seven integer digits.
const EXTRACT_PRECISION: u8 = 27;

/// Microseconds per second, minute, hour and day.
const US_PER_SECOND: i64 = 1_000_000;
const US_PER_MINUTE: i64 = 60 * US_PER_SECOND;
const US_PER_HOUR: i64 = 60 * US_PER_MINUTE;
const US_PER_DAY: i64 = 24 * US_PER_HOUR;

/// The Julian day number of 0001-01-01 less one (chrono's `num_days_from_ce` is 1 there).
const JULIAN_OF_CE: i64 = 1_721_425;

/// A field `EXTRACT` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Microseconds,
    Milliseconds,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
    Decade,
    Century,
    Millennium,
    Dow,
    Isodow,
    Doy,
    Epoch,
    Julian,
    Isoyear,
    Timezone,
    TimezoneHour,
    TimezoneMinute,
}

impl Unit {
    /// The unit a field name (any case, PostgreSQL's spellings and abbreviations) names.
    fn parse(name: &str) -> Option<Unit> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "microsecond" | "microseconds" | "microsecon" | "us" | "usec" | "usecs"
            | "useconds" => Unit::Microseconds,
            "millisecond" | "milliseconds" | "millisecon" | "ms" | "msec" | "msecs"
            | "mseconds" => Unit::Milliseconds,
            "second" | "seconds" | "s" | "sec" | "secs" => Unit::Second,
            "minute" | "minutes" | "m" | "min" | "mins" => Unit::Minute,
            "hour" | "hours" | "h" | "hr" | "hrs" => Unit::Hour,
            "day" | "days" | "d" => Unit::Day,
            "week" | "weeks" | "w" => Unit::Week,
            "month" | "months" | "mon" | "mons" => Unit::Month,
            "quarter" | "qtr" => Unit::Quarter,
            "year" | "years" | "y" | "yr" | "yrs" => Unit::Year,
            "decade" | "decades" | "dec" | "decs" => Unit::Decade,
            "century" | "centuries" | "c" | "cent" => Unit::Century,
            "millennium" | "millennia" | "mil" | "mils" => Unit::Millennium,
            "dow" => Unit::Dow,
            "isodow" => Unit::Isodow,
            "doy" => Unit::Doy,
            "epoch" => Unit::Epoch,
            "julian" | "j" => Unit::Julian,
            "isoyear" => Unit::Isoyear,
            "timezone" => Unit::Timezone,
            "timezone_h" | "timezone_hour" => Unit::TimezoneHour,
            "timezone_m" | "timezone_minute" => Unit::TimezoneMinute,
            _ => return None,
        })
    }
}

/// The kind of value a field is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Timestamp,
    TimestampTz,
    Date,
    Time,
    Interval,
}

impl Source {
    fn of(t: &DataType) -> Option<Source> {
        Some(match t {
            DataType::Timestamp(_, None) => Source::Timestamp,
            DataType::Timestamp(_, Some(_)) => Source::TimestampTz,
            DataType::Date32 | DataType::Date64 => Source::Date,
            DataType::Time32(_) | DataType::Time64(_) => Source::Time,
            DataType::Interval(_) | DataType::Duration(_) => Source::Interval,
            _ => return None,
        })
    }

    fn type_name(self) -> &'static str {
        match self {
            Source::Timestamp => "timestamp without time zone",
            Source::TimestampTz => "timestamp with time zone",
            Source::Date => "date",
            Source::Time => "time without time zone",
            Source::Interval => "interval",
        }
    }

    /// The decimals of `unit` read from this source.
    ///
    /// # Errors
    /// `0A000` `unit "hour" not supported for type date` for a unit this source lacks.
    fn scale(self, unit: Unit, name: &str) -> std::result::Result<i8, Error> {
        use Unit::*;
        let supported = match self {
            Source::Timestamp => !matches!(unit, Timezone | TimezoneHour | TimezoneMinute),
            Source::TimestampTz => true,
            Source::Date => !matches!(
                unit,
                Microseconds
                    | Milliseconds
                    | Second
                    | Minute
                    | Hour
                    | Timezone
                    | TimezoneHour
                    | TimezoneMinute
            ),
            Source::Time => matches!(
                unit,
                Microseconds | Milliseconds | Second | Minute | Hour | Epoch
            ),
            Source::Interval => !matches!(
                unit,
                Week | Dow
                    | Isodow
                    | Doy
                    | Julian
                    | Isoyear
                    | Timezone
                    | TimezoneHour
                    | TimezoneMinute
            ),
        };
        if !supported {
            return Err(Error::not_supported(format!(
                "unit \"{}\" not supported for type {}",
                name.trim().to_ascii_lowercase(),
                self.type_name()
            )));
        }
        Ok(match (unit, self) {
            (Second | Epoch, Source::Date) => 0,
            (Second | Epoch, _) => 6,
            (Milliseconds, _) => 3,
            (Julian, Source::Timestamp | Source::TimestampTz) => 20,
            _ => 0,
        })
    }
}

/// The unit a field name names.
///
/// # Errors
/// `22023` `unit "foo" not recognized for type date` for a name PostgreSQL does not know.
fn unit_of(name: &str, source: Source) -> std::result::Result<Unit, Error> {
    Unit::parse(name).ok_or_else(|| {
        Error::data(
            "22023",
            format!(
                "unit \"{}\" not recognized for type {}",
                name.trim().to_ascii_lowercase(),
                source.type_name()
            ),
        )
    })
}

/// PostgreSQL's year of a chrono year: there is no year 0, 1 BC is -1.
fn pg_year(chrono_year: i32) -> i64 {
    let y = i64::from(chrono_year);
    if y > 0 { y } else { y - 1 }
}

/// The value of `unit` of a date and time (local, with `offset` seconds east of UTC, and
/// `epoch_us` the instant's microseconds since 1970), scaled by 10^`scale`.
fn datetime_field(t: NaiveDateTime, offset: i64, epoch_us: i64, unit: Unit, scale: i8) -> i128 {
    let year = pg_year(t.year());
    let us_of_minute =
        i64::from(t.second()) * US_PER_SECOND + i64::from(t.and_utc().timestamp_subsec_micros());
    let whole = match unit {
        // Scales 6 and 3 (and 0 for microseconds) all count microseconds.
        Unit::Microseconds | Unit::Milliseconds | Unit::Second => {
            return i128::from(us_of_minute);
        }
        Unit::Epoch => {
            return if scale == 0 {
                i128::from(epoch_us.div_euclid(US_PER_SECOND))
            } else {
                i128::from(epoch_us)
            };
        }
        Unit::Julian => {
            let day = i128::from(i64::from(t.date().num_days_from_ce()) + JULIAN_OF_CE);
            if scale == 0 {
                return day;
            }
            let us_of_day = i128::from(
                i64::from(t.num_seconds_from_midnight()) * US_PER_SECOND
                    + i64::from(t.and_utc().timestamp_subsec_micros()),
            );
            let unit = 10i128.pow(u32::from(scale.unsigned_abs()));
            let day_us = i128::from(US_PER_DAY);
            return day * unit + (us_of_day * unit + day_us / 2) / day_us;
        }
        Unit::Minute => i64::from(t.minute()),
        Unit::Hour => i64::from(t.hour()),
        Unit::Day => i64::from(t.day()),
        Unit::Week => i64::from(t.iso_week().week()),
        Unit::Month => i64::from(t.month()),
        Unit::Quarter => (i64::from(t.month()) - 1) / 3 + 1,
        Unit::Year => year,
        Unit::Decade if year >= 0 => year / 10,
        Unit::Decade => -((8 - (year - 1)) / 10),
        Unit::Century if year > 0 => (year + 99) / 100,
        Unit::Century => -((99 - (year - 1)) / 100),
        Unit::Millennium if year > 0 => (year + 999) / 1000,
        Unit::Millennium => -((999 - (year - 1)) / 1000),
        Unit::Dow => i64::from(t.weekday().num_days_from_sunday()),
        Unit::Isodow => i64::from(t.weekday().number_from_monday()),
        Unit::Doy => i64::from(t.ordinal()),
        Unit::Isoyear => pg_year(t.iso_week().year()),
        Unit::Timezone => offset,
        Unit::TimezoneHour => offset / 3600,
        Unit::TimezoneMinute => (offset / 60) % 60,
    };
    i128::from(whole) * 10i128.pow(u32::from(scale.unsigned_abs()))
}

/// The value of `unit` of an interval of `months`, `days` and `micros`, scaled by
/// 10^`scale` (PostgreSQL's `interval_part`: the time split into hours, minutes and seconds
/// with its sign; a year is 365.25 days and a month 30 in `epoch`).
fn interval_field(months: i32, days: i32, micros: i64, unit: Unit, scale: i8) -> i128 {
    let (years, month) = (i64::from(months / 12), i64::from(months % 12));
    let hours = micros / US_PER_HOUR;
    let minutes = (micros % US_PER_HOUR) / US_PER_MINUTE;
    let us_of_minute = micros % US_PER_MINUTE;
    let whole = match unit {
        Unit::Microseconds | Unit::Milliseconds | Unit::Second => {
            return i128::from(us_of_minute);
        }
        Unit::Epoch => {
            let seconds = years * 31_557_600 + month * 30 * 86_400 + i64::from(days) * 86_400;
            return i128::from(seconds) * i128::from(US_PER_SECOND) + i128::from(micros);
        }
        Unit::Minute => minutes,
        Unit::Hour => hours,
        Unit::Day => i64::from(days),
        Unit::Month => month,
        Unit::Quarter => month / 3 + 1,
        Unit::Year => years,
        Unit::Decade => years / 10,
        Unit::Century => years / 100,
        Unit::Millennium => years / 1000,
        // Refused by `Source::scale` before any value is read.
        _ => 0,
    };
    i128::from(whole) * 10i128.pow(u32::from(scale.unsigned_abs()))
}

/// `unit` of each value of `array`, scaled by 10^`scale`; a `timestamptz` read in `zone`.
fn field_values(
    array: &dyn Array,
    source: Source,
    unit: Unit,
    scale: i8,
    zone: Option<&Tz>,
) -> Result<Vec<Option<i128>>> {
    Ok(match source {
        Source::Timestamp | Source::TimestampTz => {
            let us =
                arrow::compute::cast(array, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
            us.as_primitive::<TimestampMicrosecondType>()
                .iter()
                .map(|v| {
                    let v = v?;
                    let utc = chrono::DateTime::from_timestamp_micros(v)?;
                    let (local, offset) = match zone {
                        Some(z) if source == Source::TimestampTz => {
                            let at = utc.with_timezone(z);
                            (
                                at.naive_local(),
                                i64::from(at.offset().fix().local_minus_utc()),
                            )
                        }
                        _ => (utc.naive_utc(), 0),
                    };
                    Some(datetime_field(local, offset, v, unit, scale))
                })
                .collect()
        }
        Source::Date => {
            let days = arrow::compute::cast(array, &DataType::Date32)?;
            days.as_primitive::<Date32Type>()
                .iter()
                .map(|d| {
                    let d = d?;
                    let date = NaiveDate::from_num_days_from_ce_opt(d.checked_add(719_163)?)?;
                    let epoch_us = i64::from(d) * US_PER_DAY;
                    Some(datetime_field(
                        date.and_time(chrono::NaiveTime::MIN),
                        0,
                        epoch_us,
                        unit,
                        scale,
                    ))
                })
                .collect()
        }
        Source::Time => {
            let us = arrow::compute::cast(array, &DataType::Time64(TimeUnit::Microsecond))?;
            us.as_primitive::<Time64MicrosecondType>()
                .iter()
                .map(|v| v.map(|v| interval_field(0, 0, v, unit, scale)))
                .collect()
        }
        Source::Interval => {
            let mdn = arrow::compute::cast(array, &DataType::Interval(IntervalUnit::MonthDayNano))?;
            mdn.as_primitive::<IntervalMonthDayNanoType>()
                .iter()
                .map(|v| {
                    v.map(|v| interval_field(v.months, v.days, v.nanoseconds / 1000, unit, scale))
                })
                .collect()
        }
    })
}

/// `weir_extract('field', x)` (`EXTRACT(field FROM x)`, `numeric`) and `date_part('field', x)`
/// (`double precision`) of a timestamp, `timestamptz`, date, time or interval; NULL stays
/// NULL. A `timestamptz` is read in `zone`, the session's `TimeZone` (`None`: UTC).
///
/// Errors: `22023` for a field PostgreSQL does not know, `0A000` for one the type lacks
/// (`hour` of a date), 42883 for another type of `x`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct DatePart {
    numeric: bool,
    zone: Option<String>,
    signature: Signature,
}

impl DatePart {
    /// `EXTRACT`'s function name.
    pub const EXTRACT: &'static str = "weir_extract";

    /// `weir_extract` when `numeric`, else `date_part`; a `timestamptz` read in `zone`.
    pub fn new(numeric: bool, zone: Option<String>) -> Self {
        DatePart {
            numeric,
            zone,
            signature: Signature::any(2, Volatility::Immutable),
        }
    }

    /// Whether `name` is one of this module's functions (rebuilt with a session's zone).
    pub fn is_named(name: &str) -> Option<bool> {
        match name {
            Self::EXTRACT => Some(true),
            "date_part" => Some(false),
            _ => None,
        }
    }

    fn source(&self, t: &DataType) -> Result<Source> {
        Source::of(t).ok_or_else(|| {
            crate::sql::functions::math::no_function(self.name(), &[DataType::Utf8, t.clone()])
        })
    }
}

impl ScalarUDFImpl for DatePart {
    fn name(&self) -> &str {
        if self.numeric {
            Self::EXTRACT
        } else {
            "date_part"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Err(DataFusionError::Internal(
            "date_part's type comes from return_field_from_args".into(),
        ))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        let source = self.source(args.arg_fields[1].data_type())?;
        let t = if self.numeric {
            let name = match args.scalar_arguments.first() {
                Some(Some(ScalarValue::Utf8(Some(n)) | ScalarValue::Utf8View(Some(n)))) => {
                    n.clone()
                }
                _ => {
                    return Err(ours(Error::not_supported(
                        "EXTRACT of a field that is not a constant",
                    )));
                }
            };
            let unit = unit_of(&name, source).map_err(ours)?;
            let scale = source.scale(unit, &name).map_err(ours)?;
            DataType::Decimal128(EXTRACT_PRECISION, scale)
        } else {
            DataType::Float64
        };
        Ok(Arc::new(Field::new(self.name(), t, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let names = args.args[0].to_array(args.number_rows)?;
        let names = arrow::compute::cast(&names, &DataType::Utf8)?;
        let names = names.as_string::<i32>();
        let values = args.args[1].to_array(args.number_rows)?;
        let source = self.source(values.data_type())?;
        let zone: Option<Tz> = self.zone.as_deref().map(str::parse).transpose()?;
        // One field for the whole batch when it is a constant (always, for EXTRACT).
        let constant = matches!(args.args[0], ColumnarValue::Scalar(_));
        let mut out: Vec<Option<(i128, i8)>> = Vec::with_capacity(values.len());
        if constant {
            if names.is_null(0) {
                out.resize(values.len(), None);
            } else {
                let name = names.value(0);
                let unit = unit_of(name, source).map_err(ours)?;
                let scale = source.scale(unit, name).map_err(ours)?;
                out.extend(
                    field_values(values.as_ref(), source, unit, scale, zone.as_ref())?
                        .into_iter()
                        .map(|v| v.map(|v| (v, scale))),
                );
            }
        } else {
            for i in 0..values.len() {
                if names.is_null(i) || values.is_null(i) {
                    out.push(None);
                    continue;
                }
                let name = names.value(i);
                let unit = unit_of(name, source).map_err(ours)?;
                let scale = source.scale(unit, name).map_err(ours)?;
                let one = values.slice(i, 1);
                let v = field_values(one.as_ref(), source, unit, scale, zone.as_ref())?;
                out.push(v[0].map(|v| (v, scale)));
            }
        }
        let result: ArrayRef = match args.return_field.data_type() {
            DataType::Decimal128(p, s) => Arc::new(
                out.into_iter()
                    .map(|v| v.map(|(v, _)| v))
                    .collect::<Decimal128Array>()
                    .with_precision_and_scale(*p, *s)?,
            ),
            _ => Arc::new(
                out.into_iter()
                    .map(|v| v.map(|(v, s)| super::text_output::decimal_to_f64(v, s)))
                    .collect::<Float64Array>(),
            ),
        };
        shape_result(&args.args, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f").unwrap()
    }

    #[test]
    fn timestamp_fields_match_postgresql() {
        // Expected values from PostgreSQL 15.
        let t = at("2020-03-15 10:20:30.5");
        let epoch = t.and_utc().timestamp_micros();
        let f = |unit, scale| datetime_field(t, 0, epoch, unit, scale);
        assert_eq!(f(Unit::Second, 6), 30_500_000);
        assert_eq!(f(Unit::Milliseconds, 3), 30_500_000);
        assert_eq!(f(Unit::Microseconds, 0), 30_500_000);
        assert_eq!(f(Unit::Epoch, 6), 1_584_267_630_500_000);
        assert_eq!(f(Unit::Hour, 0), 10);
        assert_eq!(f(Unit::Dow, 0), 0);
        assert_eq!(f(Unit::Isodow, 0), 7);
        assert_eq!(f(Unit::Quarter, 0), 1);
        let noon = at("2020-01-01 12:00:00");
        let julian = datetime_field(noon, 0, 0, Unit::Julian, 20);
        assert_eq!(julian, 245_885_050_000_000_000_000_000_000);
        assert_eq!(datetime_field(noon, 0, 0, Unit::Century, 0), 21);
        assert_eq!(
            datetime_field(at("2000-01-01 00:00:00"), 0, 0, Unit::Century, 0),
            20
        );
        assert_eq!(
            datetime_field(at("2001-01-01 00:00:00"), 0, 0, Unit::Millennium, 0),
            3
        );
        assert_eq!(
            datetime_field(at("2021-01-01 00:00:00"), 0, 0, Unit::Week, 0),
            53
        );
        assert_eq!(
            datetime_field(at("2021-01-01 00:00:00"), 0, 0, Unit::Isoyear, 0),
            2020
        );
        // 5 BC is chrono's year -4.
        let bc = NaiveDate::from_ymd_opt(-4, 1, 1)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap();
        assert_eq!(datetime_field(bc, 0, 0, Unit::Year, 0), -5);
        assert_eq!(datetime_field(noon, -14_400, 0, Unit::TimezoneHour, 0), -4);
    }

    #[test]
    fn interval_fields_match_postgresql() {
        // '1 year 1 mon 1 day 1.5 sec': 31557600 + 2592000 + 86400 + 1.5 seconds.
        assert_eq!(
            interval_field(13, 1, 1_500_000, Unit::Epoch, 6),
            34_236_001_500_000
        );
        assert_eq!(interval_field(12, 0, 0, Unit::Epoch, 6), 31_557_600_000_000);
        assert_eq!(interval_field(0, 0, -30 * US_PER_HOUR, Unit::Hour, 0), -30);
        assert_eq!(
            interval_field(0, 0, -1_500_000, Unit::Second, 6),
            -1_500_000
        );
        assert_eq!(interval_field(-14, 0, 0, Unit::Month, 0), -2);
        assert_eq!(interval_field(-14, 0, 0, Unit::Year, 0), -1);
        assert_eq!(interval_field(5, 0, 0, Unit::Quarter, 0), 2);
        assert_eq!(interval_field(0, 0, 61_500_000 * 60, Unit::Minute, 0), 1);
        assert!(Source::Date.scale(Unit::Hour, "hour").is_err());
        assert!(Source::Interval.scale(Unit::Dow, "dow").is_err());
        assert!(unit_of("foo", Source::Date).is_err());
    }
}

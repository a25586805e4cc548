//! `timezone(zone, ts)`, which `ts AT TIME ZONE zone` is rewritten to (by
//! [`crate::sql::parse`]), with PostgreSQL's meaning (docs, 9.9.4 "AT TIME ZONE"):
//!
//! ```text
//!  timestamptz AT TIME ZONE zone  ─► timestamp    the wall-clock time in `zone` at that instant
//!  timestamp   AT TIME ZONE zone  ─► timestamptz  the instant that wall-clock time in `zone` is
//! ```
//!
//! DataFusion plans `AT TIME ZONE` as a cast to a timestamp with that zone, which keeps a
//! `timestamptz` the same instant (so `now() AT TIME ZONE 'UTC'` printed the session's local
//! time, typed `timestamptz`).
//!
//! `zone` is text, as PostgreSQL takes it: an IANA zone name or abbreviation that the zone
//! database names (`Asia/Tokyo`, `utc`, `EST`; case-insensitive), or a POSIX-style offset
//! (`+05`, `-03:30`, `UTC+3`), whose sign is *west* of UTC as POSIX has it (`'+05'` is
//! UTC−5); or an `interval` (east of UTC: `INTERVAL '05:30'` is UTC+5:30). A wall-clock time
//! that a zone's clocks skip (a spring-forward gap) is read with the offset in force before
//! the jump, and one they show twice (fall-back) as the later instant: both as PostgreSQL
//! (docs, B.1 "Handling of Invalid or Ambiguous Timestamps").

use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::datatypes::{DataType, Int64Type, IntervalMonthDayNanoType, TimeUnit};
use chrono::{DateTime, NaiveDateTime, Offset, TimeZone};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::Error;

/// The `timestamptz` time zone Weir's sessions give values (DataFusion's `time_zone` option).
const UTC_ZONE: &str = "+00:00";

/// `timezone(zone text | interval, ts timestamp | timestamptz)`: see the module docs. The
/// result keeps the time unit of `ts`; a NULL zone or timestamp gives NULL.
///
/// # Errors
/// `22023` `time zone "<zone>" not recognized` for text that names no zone (PostgreSQL's
/// code and message); `22008` `timestamp out of range` when the result leaves chrono's range.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct AtTimeZone {
    signature: Signature,
}

impl Default for AtTimeZone {
    fn default() -> Self {
        AtTimeZone {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

/// A zone to convert in: a named zone of the IANA database, or a fixed offset.
#[derive(Debug, Clone, Copy)]
enum Zone {
    Named(chrono_tz::Tz),
    /// Seconds east of UTC (an interval zone may pass a day, as PostgreSQL allows).
    Fixed(i64),
}

fn unrecognized(text: &str) -> DataFusionError {
    DataFusionError::External(Box::new(Error::data(
        "22023",
        format!("time zone \"{text}\" not recognized"),
    )))
}

fn out_of_range() -> DataFusionError {
    DataFusionError::External(Box::new(Error::data("22008", "timestamp out of range")))
}

/// `[+-]h[h][:mm[:ss]]` as seconds, the sign as written (positive without one).
fn offset_seconds(text: &str) -> Option<i32> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let mut parts = rest.split(':');
    let mut total = 0i32;
    for (i, scale) in [3600, 60, 1].into_iter().enumerate() {
        let Some(p) = parts.next() else {
            break;
        };
        let bound = if i == 0 { 2 } else { 59 };
        if p.is_empty() || p.len() > 2 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let v: i32 = p.parse().ok()?;
        if i > 0 && (v > bound || p.len() != 2) {
            return None;
        }
        total += v * scale;
    }
    if parts.next().is_some() || total > 15 * 3600 {
        return None;
    }
    Some(if negative { -total } else { total })
}

/// Parses `zone` text as PostgreSQL's `AT TIME ZONE` does (see the module docs).
fn parse_zone(text: &str) -> Result<Zone> {
    let t = text.trim();
    if let Some(z) = super::datetime_input::zone_by_name(t) {
        return Ok(Zone::Named(z));
    }
    // POSIX: `+05`, `UTC+3`, `GMT-2` are that many hours *west* of Greenwich.
    let posix = ["UTC", "GMT"]
        .iter()
        .find_map(|p| {
            t.get(..p.len())
                .filter(|h| h.eq_ignore_ascii_case(p))
                .map(|_| &t[p.len()..])
        })
        .unwrap_or(t);
    let starts_numeric = posix
        .bytes()
        .next()
        .is_some_and(|b| b == b'+' || b == b'-' || b.is_ascii_digit());
    match offset_seconds(posix).filter(|_| starts_numeric) {
        Some(west) => Ok(Zone::Fixed(-i64::from(west))),
        None => Err(unrecognized(text)),
    }
}

/// The zone of an `interval` value: its time part as an offset east of UTC. PostgreSQL
/// refuses intervals with months or days.
fn interval_zone(v: arrow::datatypes::IntervalMonthDayNano) -> Result<Zone> {
    let invalid = || {
        DataFusionError::External(Box::new(Error::data(
            "22023",
            "interval time zone must not include months or days",
        )))
    };
    if v.months != 0 || v.days != 0 {
        return Err(invalid());
    }
    Ok(Zone::Fixed(v.nanoseconds / 1_000_000_000))
}

/// Nanoseconds per unit of `unit`.
fn scale(unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

/// `v` units of `unit` after the epoch as a date and time (UTC).
fn to_naive(v: i64, unit: TimeUnit) -> Option<NaiveDateTime> {
    let per_second = 1_000_000_000 / scale(unit);
    let secs = v.div_euclid(per_second);
    let nanos = (v.rem_euclid(per_second) * scale(unit)) as u32;
    DateTime::from_timestamp(secs, nanos).map(|d| d.naive_utc())
}

/// A date and time (UTC) as units of `unit` after the epoch.
fn from_naive(t: NaiveDateTime, unit: TimeUnit) -> Option<i64> {
    let t = t.and_utc();
    let per_second = 1_000_000_000 / scale(unit);
    t.timestamp()
        .checked_mul(per_second)?
        .checked_add(i64::from(t.timestamp_subsec_nanos()) / scale(unit))
}

/// The offset (seconds east of UTC) of `zone` at the UTC time `utc`.
fn offset_at(zone: Zone, utc: NaiveDateTime) -> i64 {
    match zone {
        Zone::Named(z) => i64::from(z.offset_from_utc_datetime(&utc).fix().local_minus_utc()),
        Zone::Fixed(seconds) => seconds,
    }
}

/// The UTC time of the wall-clock time `local` in `zone` (gaps and repeats as the module
/// docs say).
fn local_to_utc(zone: Zone, local: NaiveDateTime) -> Option<NaiveDateTime> {
    match zone {
        Zone::Named(z) => super::datetime_input::resolve_wall_clock(&z, local),
        Zone::Fixed(_) => {
            local.checked_sub_signed(chrono::Duration::seconds(offset_at(zone, local)))
        }
    }
}

impl ScalarUDFImpl for AtTimeZone {
    fn name(&self) -> &str {
        "timezone"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [zone, ts] = arg_types else {
            return Err(DataFusionError::Plan(
                "timezone(zone, timestamp) takes two arguments".into(),
            ));
        };
        let zone = match zone {
            DataType::Interval(_) => {
                DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano)
            }
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => {
                DataType::Utf8
            }
            other => {
                return Err(DataFusionError::Plan(format!(
                    "AT TIME ZONE takes a zone of type text or interval, not {}",
                    super::pg_type_name(other)
                )));
            }
        };
        let ts = match ts {
            DataType::Timestamp(..) => ts.clone(),
            // An untyped literal is a `timestamptz`, as PostgreSQL resolves it.
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => {
                DataType::Timestamp(TimeUnit::Nanosecond, Some(UTC_ZONE.into()))
            }
            other => {
                return Err(DataFusionError::Plan(format!(
                    "AT TIME ZONE takes a timestamp or timestamptz, not {}",
                    super::pg_type_name(other)
                )));
            }
        };
        Ok(vec![zone, ts])
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types.get(1) {
            Some(DataType::Timestamp(unit, Some(_))) => Ok(DataType::Timestamp(*unit, None)),
            Some(DataType::Timestamp(unit, None)) => {
                Ok(DataType::Timestamp(*unit, Some(UTC_ZONE.into())))
            }
            other => Err(DataFusionError::Plan(format!(
                "AT TIME ZONE takes a timestamp, not {other:?}"
            ))),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let DataType::Timestamp(unit, from_zone) = args.args[1].data_type() else {
            return Err(DataFusionError::Plan(
                "AT TIME ZONE takes a timestamp".into(),
            ));
        };
        let to_local = from_zone.is_some();
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = if scalar { 1 } else { args.number_rows };
        let zones = args.args[0].to_array(rows)?;
        // The timestamps as their numbers of `unit` after the epoch.
        let values = arrow::compute::cast(&args.args[1].to_array(rows)?, &DataType::Int64)?;
        let values = values.as_primitive::<Int64Type>();
        // Text zones repeat: parse each distinct text once.
        let mut last: Option<(String, Zone)> = None;
        let mut zone_of = |i: usize| -> Result<Option<Zone>> {
            if zones.is_null(i) {
                return Ok(None);
            }
            match zones.data_type() {
                DataType::Interval(_) => Ok(Some(interval_zone(
                    zones.as_primitive::<IntervalMonthDayNanoType>().value(i),
                )?)),
                _ => {
                    let text = zones.as_string::<i32>().value(i);
                    if let Some((t, z)) = &last
                        && t == text
                    {
                        return Ok(Some(*z));
                    }
                    let z = parse_zone(text)?;
                    last = Some((text.to_string(), z));
                    Ok(Some(z))
                }
            }
        };
        let mut out = Vec::with_capacity(rows);
        for i in 0..rows {
            let (Some(zone), false) = (zone_of(i)?, values.is_null(i)) else {
                out.push(None);
                continue;
            };
            let t = to_naive(values.value(i), unit).ok_or_else(out_of_range)?;
            let converted = if to_local {
                let offset = offset_at(zone, t);
                t.checked_add_signed(chrono::Duration::seconds(offset))
            } else {
                local_to_utc(zone, t)
            };
            let v = converted
                .and_then(|c| from_naive(c, unit))
                .ok_or_else(out_of_range)?;
            out.push(Some(v));
        }
        let out: PrimitiveArray<Int64Type> = out.into_iter().collect();
        let target = self.return_type(&[zones.data_type().clone(), args.args[1].data_type()])?;
        let out: ArrayRef = arrow::compute::cast(&out, &target)?;
        if scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
        } else {
            Ok(ColumnarValue::Array(out))
        }
    }
}

/// The zone of a session's `TimeZone` in Arrow's form (`Europe/Berlin`, or `-03:00` east of
/// UTC with the SQL sign) as the zone argument of `timezone(zone, ts)`: a name as text, an
/// offset as an `interval` (which `timezone` reads east of UTC).
pub fn session_zone_argument(arrow_zone: &str) -> ScalarValue {
    match arrow_offset_seconds(arrow_zone) {
        Some(seconds) => ScalarValue::IntervalMonthDayNano(Some(
            arrow::datatypes::IntervalMonthDayNano::new(0, 0, seconds * 1_000_000_000),
        )),
        None => ScalarValue::Utf8(Some(arrow_zone.to_string())),
    }
}

/// Seconds east of UTC of an offset in Arrow's form (`+05:30`, `-03:00`).
fn arrow_offset_seconds(text: &str) -> Option<i64> {
    let (sign, rest) = match text.as_bytes().first()? {
        b'+' => (1, &text[1..]),
        b'-' => (-1, &text[1..]),
        _ => return None,
    };
    let (h, m) = rest.split_once(':').unwrap_or((rest, "0"));
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    Some(sign * (h * 3600 + m * 60))
}

/// A zone in Arrow's form (see [`session_zone_argument`]).
fn arrow_zone(text: &str) -> Result<Zone> {
    if let Some(seconds) = arrow_offset_seconds(text) {
        return Ok(Zone::Fixed(seconds));
    }
    super::datetime_input::zone_by_name(text)
        .map(Zone::Named)
        .ok_or_else(|| unrecognized(text))
}

/// `weir_tstz_plus_interval(ts timestamptz, i interval)`: `ts + i` (or `ts - i`) in a
/// session whose `TimeZone` is not UTC, as PostgreSQL's `timestamptz_pl_interval` computes it
/// (`src/backend/utils/adt/timestamp.c`): the months, then the days are added to the
/// wall-clock time in the zone, each converted back to an instant there, and the time part
/// to the instant. So `+ interval '1 day'` across a daylight-saving change keeps the clock
/// time (23 or 25 hours later) while `+ interval '24 hours'` does not. A month that lacks the
/// day ends on its last day (`2024-01-31 + 1 month` = `2024-02-29`). Returns the type of `ts`;
/// NULL in, NULL out.
///
/// # Errors
/// `22008` `timestamp out of range` when the result leaves chrono's range.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ZonedIntervalAdd {
    /// The session's zone in Arrow's form.
    zone: String,
    /// `ts - i`: the interval is negated first, as PostgreSQL's `timestamptz_mi_interval`.
    subtract: bool,
    signature: Signature,
}

impl ZonedIntervalAdd {
    /// `ts + i` (`subtract`: `ts - i`) with wall-clock arithmetic in `zone` (Arrow's form).
    pub fn new(zone: &str, subtract: bool) -> Self {
        ZonedIntervalAdd {
            zone: zone.to_string(),
            subtract,
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

/// `t` (UTC) moved by `f` applied to its wall-clock time in `zone`, back as UTC.
fn on_wall_clock(
    zone: Zone,
    t: NaiveDateTime,
    f: impl FnOnce(NaiveDateTime) -> Option<NaiveDateTime>,
) -> Option<NaiveDateTime> {
    let local = t.checked_add_signed(chrono::Duration::seconds(offset_at(zone, t)))?;
    local_to_utc(zone, f(local)?)
}

impl ScalarUDFImpl for ZonedIntervalAdd {
    fn name(&self) -> &str {
        if self.subtract {
            "weir_tstz_minus_interval"
        } else {
            "weir_tstz_plus_interval"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let DataType::Timestamp(unit, _) = args.args[0].data_type() else {
            return Err(DataFusionError::Plan(format!(
                "{} takes a timestamptz",
                self.name()
            )));
        };
        let zone = arrow_zone(&self.zone)?;
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = if scalar { 1 } else { args.number_rows };
        let values = arrow::compute::cast(&args.args[0].to_array(rows)?, &DataType::Int64)?;
        let values = values.as_primitive::<Int64Type>();
        let intervals = arrow::compute::cast(
            &args.args[1].to_array(rows)?,
            &DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano),
        )?;
        let intervals = intervals.as_primitive::<IntervalMonthDayNanoType>();
        let sign = if self.subtract { -1 } else { 1 };
        let mut out = Vec::with_capacity(rows);
        for i in 0..rows {
            if values.is_null(i) || intervals.is_null(i) {
                out.push(None);
                continue;
            }
            let iv = intervals.value(i);
            let months = i64::from(iv.months) * sign;
            let days = i64::from(iv.days) * sign;
            let nanos = iv.nanoseconds.checked_mul(sign).ok_or_else(out_of_range)?;
            let mut t = to_naive(values.value(i), unit).ok_or_else(out_of_range)?;
            if months != 0 {
                t = on_wall_clock(zone, t, |local| {
                    let m = chrono::Months::new(u32::try_from(months.unsigned_abs()).ok()?);
                    if months > 0 {
                        local.checked_add_months(m)
                    } else {
                        local.checked_sub_months(m)
                    }
                })
                .ok_or_else(out_of_range)?;
            }
            if days != 0 {
                t = on_wall_clock(zone, t, |local| {
                    local.checked_add_signed(chrono::Duration::days(days))
                })
                .ok_or_else(out_of_range)?;
            }
            let t = t
                .checked_add_signed(chrono::Duration::nanoseconds(nanos))
                .ok_or_else(out_of_range)?;
            out.push(Some(from_naive(t, unit).ok_or_else(out_of_range)?));
        }
        let out: PrimitiveArray<Int64Type> = out.into_iter().collect();
        let out: ArrayRef = arrow::compute::cast(&out, &args.args[0].data_type())?;
        crate::sql::semantics::shape_result(&args.args, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(zone: &str, utc: &str) -> String {
        let t = NaiveDateTime::parse_from_str(utc, "%Y-%m-%d %H:%M").unwrap();
        let z = parse_zone(zone).unwrap();
        let off = offset_at(z, t);
        (t + chrono::Duration::seconds(off))
            .format("%Y-%m-%d %H:%M")
            .to_string()
    }

    fn utc(zone: &str, wall: &str) -> String {
        let t = NaiveDateTime::parse_from_str(wall, "%Y-%m-%d %H:%M").unwrap();
        local_to_utc(parse_zone(zone).unwrap(), t)
            .unwrap()
            .format("%Y-%m-%d %H:%M")
            .to_string()
    }

    #[test]
    fn zones_follow_postgresql() {
        // Values from PostgreSQL 15.
        assert_eq!(local("UTC", "2024-01-01 12:00"), "2024-01-01 12:00");
        assert_eq!(local("utc", "2024-01-01 12:00"), "2024-01-01 12:00");
        assert_eq!(local("Asia/Tokyo", "2024-01-01 12:00"), "2024-01-01 21:00");
        assert_eq!(local("+05", "2024-01-01 12:00"), "2024-01-01 07:00");
        assert_eq!(local("-03:30", "2024-01-01 12:00"), "2024-01-01 15:30");
        assert_eq!(local("UTC+3", "2024-01-01 12:00"), "2024-01-01 09:00");
        assert_eq!(local("EST", "2024-01-01 12:00"), "2024-01-01 07:00");
        // A repeated wall-clock time is the later instant; a skipped one takes the offset
        // before the jump.
        assert_eq!(
            utc("America/New_York", "2018-11-04 01:30"),
            "2018-11-04 06:30"
        );
        assert_eq!(
            utc("America/New_York", "2018-03-11 02:30"),
            "2018-03-11 07:30"
        );
        assert_eq!(utc("Asia/Tokyo", "2024-01-01 12:00"), "2024-01-01 03:00");
        // An interval zone may pass a day (PostgreSQL: `AT TIME ZONE interval '25 hours'`).
        let t = NaiveDateTime::parse_from_str("2024-01-01 00:00", "%Y-%m-%d %H:%M").unwrap();
        let z = interval_zone(arrow::datatypes::IntervalMonthDayNano::new(
            0,
            0,
            25 * 3_600_000_000_000,
        ))
        .unwrap();
        assert_eq!(offset_at(z, t), 25 * 3600);
        for bad in ["Nowhere/Land", "", "+16", "5:3", "UTC+", "abc"] {
            assert!(parse_zone(bad).is_err(), "{bad}");
        }
    }
}

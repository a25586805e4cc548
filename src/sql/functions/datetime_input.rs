//! PostgreSQL's input forms of `interval` and `timestamp[tz]` text that Arrow's parsers refuse,
//! rewritten into forms they take (PostgreSQL docs, 8.5.1 "Date/Time Input" and 8.5.4
//! "Interval Input"):
//!
//! ```text
//!  '1 day 02:03:04'            ─► '1 day 02 hours 03 minutes 04 seconds'
//!  '-02:03:04.5'               ─► '-02 hours -03 minutes -04.5 seconds'
//!  '1 year 2 mons 3 days'      ─► '1 year 2 months 3 days'     (PostgreSQL's own output form)
//!  '@ 3 hrs 5 mins'            ─► '3 hours 5 minutes'
//!  '2023-11-05 01:40-07:00'    ─► '2023-11-05 01:40:00-07:00'  (a time without seconds)
//!  '2023-11-05 01:40:07-07'    ─► '2023-11-05 01:40:07-07:00'  (an offset of hours only)
//! ```
//!
//! A cast from text to `interval` or a timestamp type (`'...'::interval`, `CAST(s AS
//! TIMESTAMPTZ)`, the casts type coercion adds) is rewritten by [`crate::sql::semantics`] to
//! cast `pg_interval_text(s)` or `pg_timestamp_text(s)` instead; text in a form Arrow takes
//! passes unchanged. Text neither form of which parses is refused here, as PostgreSQL
//! reports it: `22007` `invalid input syntax for type interval: "..."`, quoting it as written.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::timezone::Tz;
use arrow::array::{ArrayRef, AsArray, StringArray};
use arrow::compute::kernels::cast_utils::{parse_interval_month_day_nano, string_to_datetime};
use arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::Error;

/// Which input form a [`DateTimeText`] rewrites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// `interval` text (see [`interval_text`]).
    Interval,
    /// `timestamp` / `timestamptz` text (see [`timestamp_text`]).
    Timestamp,
    /// `date` text: a timestamp's text is its date (PostgreSQL's `date_in` ignores a time
    /// and a zone after the date: `'2024-01-02 12:00'::date` is `2024-01-02`).
    Date,
    /// `time` text: a clock time (`hh:mm[:ss[.f]]`, Arrow's parser reads the rest) or
    /// `allballs` (midnight); text without a `:` is `22007` (Arrow's parser read `'1'` as
    /// midnight).
    Time,
}

/// `pg_interval_text(text)` / `pg_timestamp_text(text)` / `pg_date_text(text)`: the text in a
/// form Arrow's cast parses, row by row (NULL stays NULL).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct DateTimeText {
    target: Target,
    /// The cast's type as PostgreSQL names it in errors (`interval`, `timestamp`,
    /// `timestamp with time zone`).
    type_name: &'static str,
    /// For a cast to `timestamptz`: the session's time zone in Arrow's form
    /// ([`TimeZoneSetting::arrow`]), that text without an offset is read in (PostgreSQL
    /// docs, 8.5.1.3); `None` for UTC and the other targets.
    zone: Option<String>,
    /// The session's time zone (Arrow's form; `None` for UTC) whatever the target: the zone
    /// whose clock `'now'` and `'today'` read for a `timestamp` or a `date`.
    session_zone: Option<String>,
    signature: Signature,
}

impl DateTimeText {
    /// The function for a cast to `target`, named `type_name` in errors.
    pub fn new(target: Target, type_name: &'static str) -> Self {
        DateTimeText {
            target,
            type_name,
            zone: None,
            session_zone: None,
            signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
        }
    }

    /// The same function reading text without an offset in `zone` (Arrow's form), for a
    /// cast to `timestamptz`.
    pub fn in_zone(mut self, zone: Option<String>) -> Self {
        self.zone = zone;
        self
    }

    /// The same function with the session's time zone (Arrow's form, `None` for UTC), for
    /// the special values `'now'`, `'today'`, `'tomorrow'` and `'yesterday'`.
    pub fn in_session_zone(mut self, zone: Option<String>) -> Self {
        self.session_zone = zone;
        self
    }

    /// The function's name for `target`.
    pub fn name_of(target: Target) -> &'static str {
        match target {
            Target::Interval => "pg_interval_text",
            Target::Timestamp => "pg_timestamp_text",
            Target::Date => "pg_date_text",
            Target::Time => "pg_time_text",
        }
    }
}

impl ScalarUDFImpl for DateTimeText {
    fn name(&self) -> &str {
        Self::name_of(self.target)
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let zone: Option<Tz> = self.zone.as_deref().map(str::parse).transpose()?;
        super::map_text(&args, |s| self.convert(s, zone.as_ref()))
    }
}

/// `pg_timestamp_out(timestamp)`: a timestamp as text in PostgreSQL's output form (docs,
/// 8.5.2 "Date/Time Output", `DateStyle` ISO): `2015-07-15 00:00:09.999`, seconds always
/// shown, a fraction only when non-zero, in microseconds without trailing zeros; a
/// `timestamp with time zone` in the session's time zone with its UTC offset. Arrow's cast
/// writes an ISO 8601 `T` between date and time instead, so `CAST(ts AS text)` is rewritten
/// to this function by [`crate::sql::semantics`]. Nanoseconds are truncated to
/// microseconds, PostgreSQL's precision.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TimestampOutput {
    /// The session's time zone in Arrow's form ([`TimeZoneSetting::arrow`]) a
    /// `timestamptz` is shown in; `None` for UTC.
    zone: Option<String>,
    signature: Signature,
}

impl Default for TimestampOutput {
    fn default() -> Self {
        TimestampOutput {
            zone: None,
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl TimestampOutput {
    /// The function's name.
    pub const NAME: &'static str = "pg_timestamp_out";

    /// The same function showing a `timestamptz` in `zone` (Arrow's form; `None` for UTC).
    pub fn in_zone(mut self, zone: Option<String>) -> Self {
        self.zone = zone;
        self
    }
}

/// PostgreSQL's text of an interval of `months`, `days` and `micros` microseconds, in its
/// default `IntervalStyle` `postgres` (`EncodeInterval` in its `datetime.c`): years, `mons`
/// and days, each only when not zero, in the plural unless 1; then the time as
/// `[-]HH:MM:SS[.ffffff]` (fractional zeros trimmed) when it is not zero or nothing else was
/// printed. A part after a negative one carries an explicit `+` when positive
/// (`-1 days +02:00:00`).
pub fn interval_out(months: i32, days: i32, micros: i64) -> String {
    let mut out = String::new();
    let mut is_zero = true;
    let mut is_before = false;
    let mut part = |value: i64, unit: &str, out: &mut String| {
        if value == 0 {
            return;
        }
        if !is_zero {
            out.push(' ');
        }
        if is_before && value > 0 {
            out.push('+');
        }
        out.push_str(&format!(
            "{value} {unit}{}",
            if value != 1 { "s" } else { "" }
        ));
        is_before = value < 0;
        is_zero = false;
    };
    part(i64::from(months / 12), "year", &mut out);
    part(i64::from(months % 12), "mon", &mut out);
    part(i64::from(days), "day", &mut out);
    if is_zero || micros != 0 {
        let minus = micros < 0;
        let abs = micros.unsigned_abs();
        let (hours, rest) = (abs / 3_600_000_000, abs % 3_600_000_000);
        let (minutes, rest) = (rest / 60_000_000, rest % 60_000_000);
        let (seconds, fraction) = (rest / 1_000_000, rest % 1_000_000);
        if !is_zero {
            out.push(' ');
        }
        out.push_str(if minus {
            "-"
        } else if is_before {
            "+"
        } else {
            ""
        });
        out.push_str(&format!("{hours:02}:{minutes:02}:{seconds:02}"));
        if fraction != 0 {
            let digits = format!("{fraction:06}");
            out.push('.');
            out.push_str(digits.trim_end_matches('0'));
        }
    }
    out
}

/// [`interval_out`] of each interval of `array` (any interval unit); NULL stays NULL.
///
/// # Errors
/// Arrow's cast errors, for an array that is not of an interval type.
pub fn interval_text_array(
    array: &dyn arrow::array::Array,
) -> std::result::Result<arrow::array::StringArray, arrow::error::ArrowError> {
    use arrow::array::AsArray;
    let mdn = arrow::compute::cast(
        array,
        &arrow::datatypes::DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano),
    )?;
    Ok(mdn
        .as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>()
        .iter()
        .map(|v| v.map(|v| interval_out(v.months, v.days, v.nanoseconds / 1000)))
        .collect())
}

/// PostgreSQL's text of each timestamp of `array` (any unit): a `timestamptz` shown in
/// `zone` with its offset (`+00` when `zone` is `None`), a `timestamp` without; NULL, and a
/// value outside chrono's range, give NULL.
///
/// # Errors
/// Arrow's cast errors, for an array that is not of a timestamp type.
pub fn timestamp_text_array(
    array: &dyn arrow::array::Array,
    zone: Option<&Tz>,
) -> std::result::Result<StringArray, arrow::error::ArrowError> {
    let with_zone = matches!(array.data_type(), DataType::Timestamp(_, Some(_)));
    let micros = arrow::compute::cast(
        array,
        &DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None),
    )?;
    Ok(micros
        .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
        .iter()
        .map(|m| {
            m.and_then(|m| match zone {
                Some(z) if with_zone => timestamptz_out(m, z),
                _ => timestamp_out(m, with_zone),
            })
        })
        .collect())
}

/// PostgreSQL's text of a timestamp `micros` microseconds from the Unix epoch (`+00` after
/// it `with_zone`); `None` outside chrono's range. Query results sent as text use it too.
pub fn timestamp_out(micros: i64, with_zone: bool) -> Option<String> {
    let t = chrono::DateTime::from_timestamp_micros(micros)?.naive_utc();
    let mut text = naive_out(t, micros);
    if with_zone {
        text.push_str("+00");
    }
    Some(text)
}

/// PostgreSQL's text of a `timestamptz` `micros` microseconds from the Unix epoch, shown
/// in `zone` (the session's `TimeZone`): local date and time, then the zone's UTC offset
/// at that instant as `+HH`, `+HH:MM` or `+HH:MM:SS` (PostgreSQL docs, "Date/Time
/// Output", ISO style). `None` outside chrono's range.
pub fn timestamptz_out(micros: i64, zone: &Tz) -> Option<String> {
    use chrono::Offset;
    let local = chrono::DateTime::from_timestamp_micros(micros)?.with_timezone(zone);
    let mut text = naive_out(local.naive_local(), micros);
    text.push_str(&utc_offset_text(local.offset().fix().local_minus_utc()));
    Some(text)
}

/// An offset east of UTC in seconds as PostgreSQL prints it: `+05`, `-03:30`, `+00:19:32`.
fn utc_offset_text(seconds: i32) -> String {
    let sign = if seconds < 0 { '-' } else { '+' };
    let s = seconds.unsigned_abs();
    let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60);
    match (m, sec) {
        (0, 0) => format!("{sign}{h:02}"),
        (_, 0) => format!("{sign}{h:02}:{m:02}"),
        _ => format!("{sign}{h:02}:{m:02}:{sec:02}"),
    }
}

/// A session's time zone, parsed from its `TimeZone` setting by [`parse_time_zone`].
#[derive(Debug, Clone)]
pub struct TimeZoneSetting {
    /// The value to store and show (`SHOW timezone`): the name as the IANA database spells
    /// it, or the number of hours as written.
    pub setting: String,
    /// The zone in Arrow's form (`Europe/Berlin`, `-07:00`): what [`Tz`] parses.
    pub arrow: String,
    /// The zone.
    pub zone: Tz,
}

/// Parses a `TimeZone` setting as PostgreSQL accepts it: a time zone name of the IANA
/// database (case-insensitive: `Europe/Berlin`, `utc`) or a number of hours east of UTC
/// (`-7`, `5.5`, the SQL sign convention PostgreSQL's `SET TIME ZONE` uses, at most 15).
/// `None` for anything else, POSIX zone specifications (`+05:30`, whose sign is inverted)
/// included.
pub fn parse_time_zone(text: &str) -> Option<TimeZoneSetting> {
    let text = text.trim();
    let (setting, arrow) = if let Ok(hours) = text.parse::<f64>() {
        if !hours.is_finite() || hours.abs() > 15.0 {
            return None;
        }
        let minutes = (hours * 60.0).round() as i64;
        let sign = if minutes < 0 { '-' } else { '+' };
        let m = minutes.unsigned_abs();
        (
            text.to_string(),
            format!("{sign}{:02}:{:02}", m / 60, m % 60),
        )
    } else {
        let name = zone_by_name(text)?.name();
        (name.to_string(), name.to_string())
    };
    let zone = arrow.parse().ok()?;
    Some(TimeZoneSetting {
        setting,
        arrow,
        zone,
    })
}

/// The zone of the IANA database named `name`, case-insensitively (`utc`, `Europe/Berlin`).
pub fn zone_by_name(name: &str) -> Option<chrono_tz::Tz> {
    chrono_tz::TZ_VARIANTS
        .iter()
        .find(|z| z.name().eq_ignore_ascii_case(name))
        .copied()
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff]` of `t`, trailing fractional zeros dropped; the
/// fraction is taken from `micros`.
fn naive_out(t: chrono::NaiveDateTime, micros: i64) -> String {
    let mut text = t.format("%Y-%m-%d %H:%M:%S").to_string();
    let frac = micros.rem_euclid(1_000_000);
    if frac != 0 {
        let digits = format!("{frac:06}");
        text.push('.');
        text.push_str(digits.trim_end_matches('0'));
    }
    text
}

impl ScalarUDFImpl for TimestampOutput {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let from = args.args[0].data_type();
        let DataType::Timestamp(_, zone) = &from else {
            return Err(DataFusionError::Plan(format!(
                "{} takes a timestamp, not {from}",
                Self::NAME
            )));
        };
        let array = args.args[0].to_array(args.number_rows)?;
        let shown_in: Option<Tz> = match (zone, &self.zone) {
            (Some(_), Some(z)) => Some(z.parse()?),
            _ => None,
        };
        let out = timestamp_text_array(&array, shown_in.as_ref())?;
        let out: ArrayRef = Arc::new(out);
        if matches!(args.args[0], ColumnarValue::Scalar(_)) {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
        } else {
            Ok(ColumnarValue::Array(out))
        }
    }
}

/// One text value read as a cast to `target` reads it (see [`DateTimeText`]; `type_name`
/// `timestamp` ignores a zone in the text, `timestamp with time zone` reads text without an
/// offset in `zone`; `'today'`, `'now'`, ... are read on the clock of `session_zone`, Arrow's
/// form, `None` for UTC): the text in a form Arrow's cast parses. COPY FROM reads its fields
/// so.
///
/// # Errors
/// `22007` when the text is no `type_name`.
pub fn read_datetime_text(
    target: Target,
    type_name: &'static str,
    s: &str,
    zone: Option<&Tz>,
    session_zone: Option<&str>,
) -> Result<String> {
    DateTimeText::new(target, type_name)
        .in_session_zone(session_zone.map(String::from))
        .convert(s, zone)
}

/// True when `t` has a fraction of seconds of more than six digits (PostgreSQL rounds it to
/// the microsecond).
fn more_than_micros(t: &str) -> bool {
    t.split('.')
        .skip(1)
        .any(|f| f.bytes().take_while(u8::is_ascii_digit).count() > 6)
}

/// `t` rounded to the microsecond, half to even, as PostgreSQL's `timestamp_in` rounds the
/// fraction it reads (`rint(frac * 1000000)`): `23:59:59.9999995` is the next midnight.
fn round_to_micros(t: chrono::NaiveDateTime) -> chrono::NaiveDateTime {
    use chrono::Timelike;
    let nanos = i64::from(t.nanosecond() % 1_000_000_000);
    let micros = (nanos as f64 / 1000.0).round_ties_even() as i64;
    t + chrono::TimeDelta::nanoseconds(micros * 1000 - nanos)
}

impl DateTimeText {
    /// One value: rewritten if that makes it parse, else as written when Arrow parses it.
    ///
    /// # Errors
    /// `22007` `invalid input syntax for type <type>: "<text>"` (PostgreSQL's message) when
    /// neither parses.
    fn convert(&self, s: &str, zone: Option<&Tz>) -> Result<String> {
        if self.target == Target::Time {
            let t = s.trim();
            return if t.eq_ignore_ascii_case("allballs") {
                Ok("00:00:00".into())
            } else if t.contains(':') {
                Ok(s.to_string())
            } else {
                Err(DataFusionError::External(Box::new(Error::data(
                    "22007",
                    format!("invalid input syntax for type {}: \"{s}\"", self.type_name),
                ))))
            };
        }
        if self.target != Target::Interval
            && let Some(text) = self.special_value(s, zone)?
        {
            return Ok(text);
        }
        // A zone named after the time (`2024-03-10 02:30:00 America/New_York`): the wall
        // clock read in that zone; a `timestamp` ignores it, as it ignores offsets.
        if self.target == Target::Timestamp
            && let Some((rest, named)) = split_zone_name(s)
        {
            let naive = DateTimeText::new(Target::Timestamp, "timestamp").convert(rest, None)?;
            if self.type_name == "timestamp" {
                return Ok(naive);
            }
            let local = string_to_datetime(&chrono::Utc, &naive)
                .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))?
                .naive_utc();
            if let Some(utc) = resolve_wall_clock(&named, local) {
                return Ok(utc
                    .and_utc()
                    .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true));
            }
        }
        // The text Arrow's cast reads for `t`, if it parses. Read in the session's zone (an
        // offset in the text wins), a timestamptz is written with its UTC offset so that
        // the cast to UTC needs no zone.
        let parsed = |t: &str| -> Option<String> {
            match (self.target, zone) {
                (Target::Interval, _) => parse_interval_month_day_nano(t).ok().map(|_| t.into()),
                (Target::Time, _) => Some(t.into()),
                (Target::Date, _) => {
                    use arrow::compute::kernels::cast_utils::Parser;
                    arrow::datatypes::Date32Type::parse(t).map(|_| t.into())
                }
                (Target::Timestamp, None) if more_than_micros(t) => {
                    string_to_datetime(&chrono::Utc, t).ok().map(|at| {
                        round_to_micros(at.naive_utc())
                            .format("%Y-%m-%dT%H:%M:%S%.6f")
                            .to_string()
                    })
                }
                (Target::Timestamp, None) => {
                    string_to_datetime(&chrono::Utc, t).ok().map(|_| t.into())
                }
                (Target::Timestamp, Some(zone)) => string_to_datetime(zone, t)
                    .ok()
                    .map(|at| {
                        round_to_micros(at.naive_utc())
                            .and_utc()
                            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
                    })
                    .or_else(|| {
                        // No offset in the text and a wall-clock time the zone's clocks
                        // skip or repeat (Arrow refuses both): resolved as PostgreSQL does.
                        let local = string_to_datetime(&chrono::Utc, t).ok()?.naive_utc();
                        let utc = resolve_wall_clock(zone, local)?.and_utc();
                        Some(utc.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
                    }),
            }
        };
        let rewritten = match self.target {
            Target::Interval => interval_text(s),
            // PostgreSQL's `timestamp` and `date` input ignore a zone in the text (docs,
            // 8.5.1.3).
            Target::Date | Target::Timestamp if self.type_name != "timestamp with time zone" => {
                match without_zone(s) {
                    Cow::Borrowed(b) => timestamp_text(b),
                    Cow::Owned(o) => Cow::Owned(timestamp_text(&o).into_owned()),
                }
            }
            Target::Timestamp | Target::Date | Target::Time => timestamp_text(s),
        };
        parsed(&rewritten)
            .or_else(|| {
                matches!(rewritten, Cow::Owned(_))
                    .then(|| parsed(s))
                    .flatten()
            })
            // Date text that is no date is left to the cast, whose error names the field
            // out of range (`22008`) or the bad syntax (`22007`) as PostgreSQL does.
            .or_else(|| (self.target == Target::Date).then(|| s.to_string()))
            .ok_or_else(|| {
                DataFusionError::External(Box::new(Error::data(
                    "22007",
                    format!("invalid input syntax for type {}: \"{s}\"", self.type_name),
                )))
            })
    }
}

impl DateTimeText {
    /// The special date/time input values (PostgreSQL docs, 8.5.1.4 "Special Values") in
    /// the form Arrow's cast reads: `epoch` (1970-01-01 00:00 UTC), `now` (the current time),
    /// `today`, `tomorrow` and `yesterday` (midnight of that day on the clock of the session's
    /// zone, or of `zone` read for a `timestamptz`); `None` for other text. As in
    /// PostgreSQL, the value is taken when the text is read: a constant in a materialized
    /// view keeps the time the view was created.
    ///
    /// # Errors
    /// `0A000` for `infinity` and `-infinity`, which Weir's timestamps (nanoseconds in 64
    /// bits) cannot hold.
    fn special_value(&self, s: &str, zone: Option<&Tz>) -> Result<Option<String>> {
        let word = s.trim().to_ascii_lowercase();
        let days = match word.as_str() {
            "epoch" | "now" => None,
            "today" => Some(0),
            "tomorrow" => Some(1),
            "yesterday" => Some(-1),
            "infinity" | "+infinity" | "-infinity" => {
                return Err(DataFusionError::External(Box::new(Error::not_supported(
                    format!(
                        "the special value '{word}' of type {} is not supported (timestamps \
                         run from 1677 to 2262)",
                        self.type_name
                    ),
                ))));
            }
            _ => return Ok(None),
        };
        let with_zone = self.type_name == "timestamp with time zone";
        let clock: Tz = match (zone, &self.session_zone) {
            (Some(z), _) => *z,
            (None, Some(z)) => z.parse()?,
            (None, None) => "+00:00".parse()?,
        };
        let utc = if word == "epoch" {
            chrono::DateTime::UNIX_EPOCH
        } else {
            chrono::Utc::now()
        };
        let local = utc.with_timezone(&clock).naive_local();
        let local = match days {
            None if word == "epoch" => utc.naive_utc(),
            None => local,
            Some(d) => local
                .date()
                .checked_add_signed(chrono::TimeDelta::days(d))
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .ok_or_else(|| DataFusionError::Execution("date out of range".into()))?,
        };
        Ok(Some(match self.target {
            Target::Date => local.format("%Y-%m-%d").to_string(),
            Target::Timestamp if with_zone => {
                let at = match days {
                    None => utc.naive_utc(),
                    Some(_) => resolve_wall_clock(&clock, local).ok_or_else(|| {
                        DataFusionError::Execution("timestamp out of range".into())
                    })?,
                };
                at.and_utc()
                    .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
            }
            Target::Timestamp | Target::Interval | Target::Time => {
                local.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
            }
        }))
    }
}

/// Timestamp text ending in a zone's name (`... America/New_York`, `... utc`): the text
/// before it and the zone; `None` when the last word names no zone of the IANA database.
fn split_zone_name(s: &str) -> Option<(&str, chrono_tz::Tz)> {
    let s = s.trim_end();
    let cut = s.rfind(char::is_whitespace)?;
    let word = &s[cut + 1..];
    if !word.bytes().any(|b| b.is_ascii_alphabetic()) || !word.contains('/') && word.len() < 3 {
        return None;
    }
    Some((s[..cut].trim_end(), zone_by_name(word)?))
}

/// The UTC time of the wall-clock time `local` in `zone`: a time the zone's clocks skip (a
/// spring-forward gap) with the offset in force before the jump, one they show twice
/// (fall-back) as the later instant, both as PostgreSQL resolves them (docs, B.1 "Handling of
/// Invalid or Ambiguous Timestamps"). `None` outside chrono's range.
pub fn resolve_wall_clock<Z: chrono::TimeZone>(
    zone: &Z,
    local: chrono::NaiveDateTime,
) -> Option<chrono::NaiveDateTime> {
    use chrono::{LocalResult, Offset};
    match zone.from_local_datetime(&local) {
        LocalResult::Single(t) => Some(t.naive_utc()),
        LocalResult::Ambiguous(a, b) => Some(a.naive_utc().max(b.naive_utc())),
        LocalResult::None => {
            // In a gap: the offset in force a day before (no zone jumps twice in a day).
            let before = local.checked_sub_signed(chrono::Duration::days(1))?;
            let offset = zone
                .offset_from_utc_datetime(&before)
                .fix()
                .local_minus_utc();
            local.checked_sub_signed(chrono::Duration::seconds(i64::from(offset)))
        }
    }
}

/// PostgreSQL's unit abbreviations (and `mons`, its output form) as Arrow's interval parser
/// names the units.
fn interval_unit(word: &str) -> Option<&'static str> {
    Some(match word.to_ascii_lowercase().as_str() {
        "y" | "yr" | "yrs" => "years",
        "mon" | "mons" => "months",
        "w" => "weeks",
        "d" => "days",
        "h" | "hr" | "hrs" => "hours",
        "m" | "min" | "mins" => "minutes",
        "s" | "sec" | "secs" => "seconds",
        "ms" | "msec" | "msecs" => "milliseconds",
        "us" | "usec" | "usecs" => "microseconds",
        _ => return None,
    })
}

/// Whether `token` is a number as interval text writes one (`1`, `-2.5`, `+3`, `.5`).
fn is_plain_number(token: &str) -> bool {
    let digits = token.strip_prefix(['+', '-']).unwrap_or(token);
    !digits.is_empty()
        && digits.bytes().any(|b| b.is_ascii_digit())
        && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && digits.bytes().filter(|b| *b == b'.').count() <= 1
}

/// Whether `word` names an interval unit (PostgreSQL's abbreviations or Arrow's names,
/// singular or plural).
fn is_unit_word(word: &str) -> bool {
    if interval_unit(word).is_some() {
        return true;
    }
    matches!(
        word.to_ascii_lowercase().as_str(),
        "millennium"
            | "millennia"
            | "millenniums"
            | "century"
            | "centuries"
            | "decade"
            | "decades"
            | "year"
            | "years"
            | "month"
            | "months"
            | "week"
            | "weeks"
            | "day"
            | "days"
            | "hour"
            | "hours"
            | "minute"
            | "minutes"
            | "second"
            | "seconds"
            | "millisecond"
            | "milliseconds"
            | "microsecond"
            | "microseconds"
            | "nanosecond"
            | "nanoseconds"
    )
}

/// `[+-]h:mm[:ss[.f]]` as (negative, hours, minutes, seconds).
fn clock_time(token: &str) -> Option<(bool, &str, &str, &str)> {
    let (negative, rest) = match token.as_bytes().first()? {
        b'-' => (true, &token[1..]),
        b'+' => (false, &token[1..]),
        _ => (false, token),
    };
    let mut parts = rest.split(':');
    let h = parts.next()?;
    let m = parts.next()?;
    let s = parts.next().unwrap_or("0");
    if parts.next().is_some() {
        return None;
    }
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    let seconds_ok = match s.split_once('.') {
        Some((whole, frac)) => digits(whole) && digits(frac),
        None => digits(s),
    };
    (digits(h) && digits(m) && seconds_ok).then_some((negative, h, m, s))
}

/// Interval text in PostgreSQL's forms rewritten for Arrow's parser: clock times
/// (`02:03:04`, signed) become hours, minutes and seconds; unit abbreviations and `mons`
/// become Arrow's unit names; a leading `@` goes. Unchanged when nothing applies.
pub fn interval_text(s: &str) -> Cow<'_, str> {
    let mut changed = false;
    let mut out: Vec<String> = Vec::new();
    let tokens: Vec<&str> = s.split_whitespace().collect();
    for (i, &token) in tokens.iter().enumerate() {
        // A number no unit follows is seconds (`'1'` is `00:00:01`, `'1 day 1'` one day and
        // a second), where Arrow's parser took it for months.
        if is_plain_number(token) && !tokens.get(i + 1).is_some_and(|next| is_unit_word(next)) {
            let number = token.strip_prefix('+').unwrap_or(token);
            out.push(format!("{number} seconds"));
            changed = true;
            continue;
        }
        if token == "@" {
            changed = true;
            continue;
        }
        if let Some((negative, h, m, sec)) = clock_time(token) {
            let sign = if negative { "-" } else { "" };
            out.push(format!(
                "{sign}{h} hours {sign}{m} minutes {sign}{sec} seconds"
            ));
            changed = true;
            continue;
        }
        if let Some(unit) = interval_unit(token) {
            out.push(unit.to_string());
            changed = true;
            continue;
        }
        // An explicit plus sign (PostgreSQL's output writes one after a negative field:
        // `-1 days +02:00:00`, `-1 year +2 mons`), which Arrow's parser refuses.
        if let Some(number) = token
            .strip_prefix('+')
            .filter(|n| n.starts_with(|c: char| c.is_ascii_digit() || c == '.'))
        {
            out.push(number.to_string());
            changed = true;
            continue;
        }
        out.push(token.to_string());
    }
    if changed {
        Cow::Owned(out.join(" "))
    } else {
        Cow::Borrowed(s)
    }
}

/// Timestamp text without the UTC offset or zone after its time (`+02`, `-07:00`, `Z`,
/// `UTC`), which PostgreSQL ignores in a `timestamp` without time zone ("silently ignore
/// any time zone indication", docs, 8.5.1.3); unchanged when there is none.
pub fn without_zone(s: &str) -> Cow<'_, str> {
    let t = s.trim();
    let Some(sep) = t.find([' ', 'T']) else {
        return Cow::Borrowed(s);
    };
    let clock = t[sep + 1..].trim_start();
    let end = clock
        .find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.'))
        .unwrap_or(clock.len());
    let rest = clock[end..].trim_start();
    let era = ["BC", "AD"].iter().any(|e| rest.eq_ignore_ascii_case(e));
    let zone = rest.starts_with(['+', '-'])
        || rest.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    if end == 0 || rest.is_empty() || era || !zone {
        return Cow::Borrowed(s);
    }
    Cow::Owned(format!("{} {}", &t[..sep], &clock[..end]))
}

/// Timestamp text in PostgreSQL's forms rewritten for Arrow's parser: a time of hours and
/// minutes gets `:00` seconds, and a UTC offset of hours only (`-07`) gets `:00` minutes.
/// Unchanged when nothing applies.
pub fn timestamp_text(s: &str) -> Cow<'_, str> {
    let t = s.trim();
    // The time starts after the date and one space or 'T'.
    let Some(sep) = t.find([' ', 'T']) else {
        return Cow::Borrowed(s);
    };
    let (date, rest) = t.split_at(sep);
    let time = rest[1..].trim_start();
    let b = time.as_bytes();
    let two_digits =
        |i: usize| b.len() >= i + 2 && b[i].is_ascii_digit() && b[i + 1].is_ascii_digit();
    let hour_len = if two_digits(0) {
        2
    } else if b.first().is_some_and(|c| c.is_ascii_digit()) {
        1
    } else {
        return Cow::Borrowed(s);
    };
    if b.get(hour_len) != Some(&b':') || !two_digits(hour_len + 1) {
        return Cow::Borrowed(s);
    }
    let mut clock_end = hour_len + 3;
    let mut time = time.to_string();
    let mut changed = false;
    if b.get(clock_end) != Some(&b':') {
        time.insert_str(clock_end, ":00");
        changed = true;
        clock_end += 3;
    } else {
        // Past the seconds and any fraction.
        clock_end += 1;
        while time
            .as_bytes()
            .get(clock_end)
            .is_some_and(|c| c.is_ascii_digit() || *c == b'.')
        {
            clock_end += 1;
        }
    }
    // An offset of hours only: `+05`, `-7`.
    let zone = time[clock_end..].trim_start();
    let zb = zone.as_bytes();
    let hours_only = matches!(zb.first(), Some(b'+' | b'-'))
        && (2..=3).contains(&zb.len())
        && zb[1..].iter().all(u8::is_ascii_digit);
    if hours_only {
        let sign = &zone[..1];
        let hours = format!("{:0>2}", &zone[1..]);
        time = format!("{}{sign}{hours}:00", &time[..clock_end]);
        changed = true;
    }
    if changed {
        Cow::Owned(format!("{date} {time}"))
    } else {
        Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn intervals_print_as_postgresql() {
        // PostgreSQL 15's output for the same values.
        let h = 3_600_000_000i64;
        for (months, days, micros, text) in [
            (0, 0, 1_500_000, "00:00:01.5"),
            (0, -1, 2 * h, "-1 days +02:00:00"),
            (0, 1, -2 * h, "1 day -02:00:00"),
            (-14, 0, 0, "-1 years -2 mons"),
            (11, 0, 0, "11 mons"),
            (0, 0, 36 * h, "36:00:00"),
            (0, 0, -1_250_000, "-00:00:01.25"),
            (0, 0, 0, "00:00:00"),
            (
                1,
                -3,
                4 * h + 5 * 60_000_000 + 6_000_007,
                "1 mon -3 days +04:05:06.000007",
            ),
            (-1, 1, -500_000, "-1 mons +1 day -00:00:00.5"),
            (0, 1, 0, "1 day"),
            (1203, 0, h, "100 years 3 mons 01:00:00"),
            (0, 2, 100_000, "2 days 00:00:00.1"),
        ] {
            assert_eq!(interval_out(months, days, micros), text);
        }
    }

    use super::*;

    #[test]
    fn interval_forms() {
        assert_eq!(
            interval_text("1 day 02:03:04"),
            "1 day 02 hours 03 minutes 04 seconds"
        );
        assert_eq!(
            interval_text("-02:03:04.5"),
            "-02 hours -03 minutes -04.5 seconds"
        );
        assert_eq!(interval_text("1 year 2 mons"), "1 year 2 months");
        assert_eq!(interval_text("@ 3 hrs 5 mins"), "3 hours 5 minutes");
        assert_eq!(interval_text("10:30"), "10 hours 30 minutes 0 seconds");
        assert_eq!(interval_text("1 mon"), "1 months");
        assert_eq!(interval_text("-1 year +2 mons"), "-1 year 2 months");
        assert_eq!(interval_text("+3 days"), "3 days");
        assert!(matches!(interval_text("3 days"), Cow::Borrowed(_)));
        assert!(matches!(interval_text("nonsense"), Cow::Borrowed(_)));
        // A number without a unit is seconds (PostgreSQL 15: `'1'::interval` is `00:00:01`,
        // `'1 day 1'` is `1 day 00:00:01`).
        assert_eq!(interval_text("1"), "1 seconds");
        assert_eq!(interval_text("+2.5"), "2.5 seconds");
        assert_eq!(interval_text("1 day -1"), "1 day -1 seconds");
        assert_eq!(interval_text("1 year 1 mon"), "1 year 1 months");
    }

    /// New York skips 02:00–03:00 on 2024-03-10 (-05 before) and shows 01:00–02:00 twice on
    /// 2024-11-03 (-04, then -05): PostgreSQL reads `02:30` as 07:30 UTC and `01:30` as
    /// 06:30 UTC.
    #[test]
    fn skipped_and_repeated_wall_clock_times() {
        use super::{DateTimeText, Target};
        let zone: arrow::array::timezone::Tz = "America/New_York".parse().unwrap();
        // The instant the text is read as, in UTC.
        let read = |s: &str| {
            let text = DateTimeText::new(Target::Timestamp, "timestamp with time zone")
                .convert(s, Some(&zone))
                .unwrap();
            chrono::DateTime::parse_from_rfc3339(&text)
                .unwrap()
                .naive_utc()
                .to_string()
        };
        assert_eq!(read("2024-03-10 02:30:00"), "2024-03-10 07:30:00");
        assert_eq!(read("2024-11-03 01:30"), "2024-11-03 06:30:00");
        assert_eq!(read("2024-07-01 10:00:00"), "2024-07-01 14:00:00");
        assert_eq!(read("2024-03-10 02:30:00+00"), "2024-03-10 02:30:00");
    }

    #[test]
    fn timestamp_zones_are_dropped() {
        use super::without_zone;
        assert_eq!(
            without_zone("2020-01-02 03:04:05+02"),
            "2020-01-02 03:04:05"
        );
        assert_eq!(
            without_zone("2020-01-02T03:04:05.5Z"),
            "2020-01-02 03:04:05.5"
        );
        assert_eq!(without_zone("2020-01-02 03:04 -07:00"), "2020-01-02 03:04");
        assert_eq!(
            without_zone("2020-01-02 03:04:05 UTC"),
            "2020-01-02 03:04:05"
        );
        assert_eq!(without_zone("2020-01-02 03:04:05"), "2020-01-02 03:04:05");
        assert_eq!(without_zone("2020-01-02"), "2020-01-02");
        assert_eq!(
            without_zone("2020-01-02 03:04:05 BC"),
            "2020-01-02 03:04:05 BC"
        );
    }

    #[test]
    fn timestamp_forms() {
        assert_eq!(
            timestamp_text("2023-11-05 01:40-07:00"),
            "2023-11-05 01:40:00-07:00"
        );
        assert_eq!(
            timestamp_text("2023-11-05 01:40:07-07"),
            "2023-11-05 01:40:07-07:00"
        );
        assert_eq!(
            timestamp_text("2023-11-05 01:40:07.25+5"),
            "2023-11-05 01:40:07.25+05:00"
        );
        assert_eq!(timestamp_text("2023-11-05 1:40"), "2023-11-05 1:40:00");
        assert!(matches!(
            timestamp_text("2023-11-05 01:40:07+00:00"),
            Cow::Borrowed(_)
        ));
        assert!(matches!(timestamp_text("2023-11-05"), Cow::Borrowed(_)));
        assert!(matches!(timestamp_text("garbage"), Cow::Borrowed(_)));
    }

    #[test]
    fn timestamps_print_as_postgresql() {
        // 2015-07-15 00:00:09.999 UTC is 1,436,918,409,999,000 µs after the epoch.
        assert_eq!(
            timestamp_out(1_436_918_409_999_000, false).unwrap(),
            "2015-07-15 00:00:09.999"
        );
        assert_eq!(
            timestamp_out(1_436_918_400_000_000, true).unwrap(),
            "2015-07-15 00:00:00+00"
        );
        assert_eq!(
            timestamp_out(-1, false).unwrap(),
            "1969-12-31 23:59:59.999999"
        );
        assert_eq!(
            timestamp_out(120_000, false).unwrap(),
            "1970-01-01 00:00:00.12"
        );
    }
}

/// `pg_timestamp_precision(ts)`: a `timestamp[tz]` of microseconds (`Timestamp(µs, tz)`,
/// same type out) rounded to the seconds or milliseconds of `timestamp(0)` / `timestamp(3)`
/// (Arrow's second and millisecond units), half away from zero, as PostgreSQL's
/// `AdjustTimestampForTypmod` rounds (`'10:00:00.5'::timestamp(0)` is 10:00:01; before 1970
/// `'1969-12-31 23:59:59.5'`, -0.5 s, is 23:59:59, -1 s). A cast to the
/// coarser unit after it is then exact; Arrow's cast alone truncates.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TimestampPrecision {
    /// Microseconds per unit kept: 1,000,000 (seconds) or 1,000 (milliseconds).
    step: i64,
    signature: Signature,
}

impl TimestampPrecision {
    /// The name the rewrite of casts uses.
    pub const NAME: &'static str = "pg_timestamp_precision";

    /// Rounding to `unit` (`Second` or `Millisecond`; finer units keep every microsecond).
    pub fn new(unit: arrow::datatypes::TimeUnit) -> Self {
        TimestampPrecision {
            step: unit_step(unit),
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

/// The microseconds per unit of `unit` for [`round_timestamps`]: 1,000,000 for seconds,
/// 1,000 for milliseconds, 1 for finer units.
pub fn unit_step(unit: arrow::datatypes::TimeUnit) -> i64 {
    use arrow::datatypes::TimeUnit;
    match unit {
        TimeUnit::Second => 1_000_000,
        TimeUnit::Millisecond => 1_000,
        _ => 1,
    }
}

/// A `Timestamp(µs, tz)` array rounded to multiples of `step` µs half away from zero (see
/// [`TimestampPrecision`]); COPY FROM rounds what it stores in `timestamp(0)` and
/// `timestamp(3)` columns with it too.
///
/// # Errors
/// `22008` `timestamp out of range` past `i64` microseconds; an internal error for an array
/// of another type.
pub fn round_timestamps(array: &ArrayRef, step: i64) -> crate::error::Result<ArrayRef> {
    use arrow::datatypes::TimestampMicrosecondType;
    let Some(values) = array.as_primitive_opt::<TimestampMicrosecondType>() else {
        return Err(Error::Internal(format!(
            "rounding timestamps of {}",
            array.data_type()
        )));
    };
    let rounded: arrow::array::PrimitiveArray<TimestampMicrosecondType> = values
        .iter()
        .map(|v| {
            v.map(|v| {
                round_micros(v, step).ok_or_else(|| Error::data("22008", "timestamp out of range"))
            })
            .transpose()
        })
        .collect::<crate::error::Result<_>>()?;
    Ok(Arc::new(rounded.with_data_type(array.data_type().clone())))
}

/// `v` µs rounded to a multiple of `step` µs, half away from zero; `None` past `i64`.
fn round_micros(v: i64, step: i64) -> Option<i64> {
    let half = step / 2;
    let q = if v >= 0 {
        v.checked_add(half)? / step
    } else {
        -((v.checked_neg()?.checked_add(half)?) / step)
    };
    q.checked_mul(step)
}

impl ScalarUDFImpl for TimestampPrecision {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        use arrow::datatypes::TimeUnit;
        let from = args.args[0].data_type();
        let DataType::Timestamp(TimeUnit::Microsecond, _) = &from else {
            return Err(DataFusionError::Plan(format!(
                "{} takes a timestamp of microseconds, not {from}",
                Self::NAME
            )));
        };
        let array = args.args[0].to_array(args.number_rows)?;
        let out = round_timestamps(&array, self.step)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        if matches!(args.args[0], ColumnarValue::Scalar(_)) {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
        } else {
            Ok(ColumnarValue::Array(out))
        }
    }
}

#[cfg(test)]
mod precision_tests {
    use super::round_micros;

    #[test]
    fn timestamps_round_half_away_from_zero() {
        // PostgreSQL 15: '10:00:00.5'::timestamp(0) is 10:00:01, '10:00:00.4999' 10:00:00;
        // '1969-12-31 23:59:59.5' (-0.5 s) is 23:59:59 (-1 s); '.1235'::timestamp(3) '.124'.
        assert_eq!(
            round_micros(36_000_500_000, 1_000_000),
            Some(36_001_000_000)
        );
        assert_eq!(
            round_micros(36_000_499_900, 1_000_000),
            Some(36_000_000_000)
        );
        assert_eq!(round_micros(-500_000, 1_000_000), Some(-1_000_000));
        assert_eq!(round_micros(-499_999, 1_000_000), Some(0));
        assert_eq!(round_micros(123_500, 1_000), Some(124_000));
        assert_eq!(round_micros(i64::MAX, 1_000_000), None);
    }
}

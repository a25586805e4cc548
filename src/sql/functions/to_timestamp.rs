//! `to_date(text, format)` and `to_timestamp(text, format)`: PostgreSQL's reading of dates and
//! times by template patterns (PostgreSQL docs, 9.8 "Data Type Formatting Functions", Table
//! 9.26 and the usage notes after Table 9.27), replacing DataFusion's functions of those
//! names, which take chrono's `strftime` formats (`to_date('2024-03-05', 'YYYY-MM-DD')` failed).
//!
//! ```text
//!  to_timestamp('05 Mar 2024 2:07 pm', 'DD Mon YYYY HH:MI AM')  ─► 2024-03-05 14:07:00+00
//!                                       │
//!                                       └─ the same pattern nodes as to_char's
//!                                          (crate::sql::functions::to_char), read left to right
//! ```
//!
//! The reading follows PostgreSQL's rules (docs, usage notes): blanks at the start of the input
//! and around values are skipped unless `FX` is given; a separator in the format (a blank or a
//! character that is neither a letter nor a digit) matches one separator of the input or
//! nothing; other characters of the format skip one input character. A number reads all its
//! digits unless the next pattern follows with no separator, when it reads the pattern's width
//! (`YYYYMMDD`). Fields not given default to January 1st, midnight; input left over is ignored.
//! A year of fewer than four digits read by `YYY`, `YY` or `Y` is the one nearest 2020 (`95`
//! is 1995). `MS`, `US` and `FF1`–`FF6` are fractions of a second (`SS.MS` of `12.3` is 12.3
//! s). `TZH`, `TZM` and `OF` give the input's UTC offset; without them, `to_timestamp` reads
//! the time in the session's zone.
//!
//! Errors (PostgreSQL's codes): `22007` for input that does not match a pattern (`invalid value
//! "abcd" for "YYYY"`) and an hour past 12 for a 12-hour pattern; `22008` for a date or time
//! that does not exist (`2024-02-30`, hour 25) or lies outside Weir's range (years 1677 to 2262
//! for a timestamp, no years before 1 AD: a format without a year is PostgreSQL's 1 BC, which
//! Weir cannot hold); `0A000` for the `TZ` pattern in input.

use std::sync::Arc;

use arrow::array::timezone::Tz;
use arrow::array::{Array, ArrayRef, AsArray, Date32Array, TimestampNanosecondArray};
use arrow::datatypes::{DataType, FieldRef, TimeUnit};
use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone};
use datafusion::common::config::ConfigOptions;
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

use super::to_char::{DT_KEYWORDS, DtKey, DtNode, MONTHS, ROMAN_MONTHS, parse_datetime_format};
use crate::error::Error;

/// Which function: the result type and whether times and zones count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Target {
    /// `to_date`: a `date`; time fields are read and ignored.
    Date,
    /// `to_timestamp`: a `timestamptz`.
    Timestamp,
}

/// Refuses a NaN or infinite `to_timestamp(double precision)` argument, which DataFusion
/// turned into a date near the ends of its range (or 1970 for NaN). PostgreSQL gives
/// `infinity` for the infinities, which Weir's timestamps cannot hold.
///
/// # Errors
/// `22008`: `timestamp cannot be NaN` (PostgreSQL's words), `timestamp out of range:
/// "Infinity"`.
fn finite_seconds(seconds: &ColumnarValue, rows: usize) -> Result<()> {
    use arrow::datatypes::{Float32Type, Float64Type};
    let values = seconds.to_array(rows)?;
    let bad = match values.data_type() {
        DataType::Float64 => values
            .as_primitive::<Float64Type>()
            .iter()
            .flatten()
            .find(|v| !v.is_finite()),
        DataType::Float32 => values
            .as_primitive::<Float32Type>()
            .iter()
            .flatten()
            .map(f64::from)
            .find(|v| !v.is_finite()),
        _ => None,
    };
    match bad {
        Some(v) if v.is_nan() => Err(ours(Error::data("22008", "timestamp cannot be NaN"))),
        Some(v) => Err(ours(Error::data(
            "22008",
            format!(
                "timestamp out of range: \"{}\"",
                if v > 0.0 { "Infinity" } else { "-Infinity" }
            ),
        ))),
        None => Ok(()),
    }
}

/// `to_date` / `to_timestamp` (see the module docs). A call that is not `(text, text)` (the
/// one-argument `to_timestamp(double precision)` of epoch seconds, DataFusion's other forms)
/// is DataFusion's function, which this one wraps. NULL in, NULL out.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgToDateTime {
    target: Target,
    /// DataFusion's function of the same name.
    inner: ScalarUDF,
    /// The zone `to_timestamp` reads a time without an offset in, Arrow's form (`Europe/Berlin`,
    /// `-07:00`); `None`: UTC. Set by the analyzer from the session's `TimeZone` (see
    /// [`Self::in_zone`]), so a view keeps the zone it was created in.
    zone: Option<String>,
    signature: Signature,
}

impl PgToDateTime {
    /// `to_date`, wrapping DataFusion's `to_date` (`inner`).
    pub fn to_date(inner: ScalarUDF) -> Self {
        Self::new(Target::Date, inner)
    }

    /// `to_timestamp`, wrapping DataFusion's `to_timestamp` (`inner`).
    pub fn to_timestamp(inner: ScalarUDF) -> Self {
        Self::new(Target::Timestamp, inner)
    }

    fn new(target: Target, inner: ScalarUDF) -> Self {
        PgToDateTime {
            target,
            inner,
            zone: None,
            signature: Signature::variadic_any(Volatility::Immutable),
        }
    }

    /// The same function reading times in `zone` (Arrow's form; `None`: UTC).
    pub fn in_zone(&self, zone: Option<String>) -> Self {
        PgToDateTime {
            zone,
            ..Self::new(self.target, self.inner.clone())
        }
    }
}

/// Text, or an untyped NULL (`to_date(NULL, 'YYYY')` is NULL).
fn textual(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
    )
}

fn ours(e: Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

impl ScalarUDFImpl for PgToDateTime {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match (self.target, arg_types) {
            (Target::Date, [a, b]) if textual(a) && textual(b) => Ok(DataType::Date32),
            _ => self.inner.return_type(arg_types),
        }
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        match (self.target, args.arg_fields) {
            (Target::Date, [a, b]) if textual(a.data_type()) && textual(b.data_type()) => {
                Ok(Arc::new(arrow::datatypes::Field::new(
                    self.name(),
                    DataType::Date32,
                    true,
                )))
            }
            // DataFusion's `to_timestamp` is a `timestamptz` in the session's DataFusion zone
            // for text input, whatever the format.
            _ => self.inner.return_field_from_args(args),
        }
    }

    fn with_updated_config(&self, config: &ConfigOptions) -> Option<ScalarUDF> {
        let inner = self.inner.inner().with_updated_config(config)?;
        Some(ScalarUDF::new_from_impl(PgToDateTime {
            zone: self.zone.clone(),
            ..Self::new(self.target, inner)
        }))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let pg_form = args.args.len() == 2 && args.args.iter().all(|a| textual(&a.data_type()));
        if !pg_form {
            if let [seconds] = args.args.as_slice() {
                finite_seconds(seconds, args.number_rows)?;
            }
            return self.inner.invoke_with_args(args);
        }
        let zone: Option<Tz> = self.zone.as_deref().map(str::parse).transpose()?;
        let texts = cast_utf8(&args.args[0].to_array(args.number_rows)?)?;
        let formats = cast_utf8(&args.args[1].to_array(args.number_rows)?)?;
        let (texts, formats) = (texts.as_string::<i32>(), formats.as_string::<i32>());
        // One format, read once, is the usual case.
        let mut parsed: Option<(String, Vec<DtNode>)> = None;
        let mut days = Vec::with_capacity(texts.len());
        let mut nanos = Vec::with_capacity(texts.len());
        for i in 0..texts.len() {
            if texts.is_null(i) || formats.is_null(i) {
                days.push(None);
                nanos.push(None);
                continue;
            }
            let fmt = formats.value(i);
            if parsed.as_ref().is_none_or(|(f, _)| f != fmt) {
                parsed = Some((fmt.to_string(), parse_datetime_format(fmt)));
            }
            let nodes = parsed.as_ref().map_or(&[][..], |(_, n)| n.as_slice());
            let fields = read(texts.value(i), nodes).map_err(ours)?;
            match self.target {
                Target::Date => {
                    // The time is not kept, but a time that does not exist is an error.
                    fields.time(texts.value(i)).map_err(ours)?;
                    let date = fields.date(texts.value(i)).map_err(ours)?;
                    days.push(Some(
                        (date - NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default()).num_days()
                            as i32,
                    ));
                }
                Target::Timestamp => {
                    nanos.push(Some(
                        fields
                            .instant_nanos(texts.value(i), zone.as_ref())
                            .map_err(ours)?,
                    ));
                }
            }
        }
        let out: ArrayRef = match self.target {
            Target::Date => Arc::new(Date32Array::from(days)),
            Target::Timestamp => {
                let utc: ArrayRef =
                    Arc::new(TimestampNanosecondArray::from(nanos).with_timezone("+00:00"));
                let want = args.return_type().clone();
                if want == *utc.data_type() {
                    utc
                } else if matches!(want, DataType::Timestamp(TimeUnit::Nanosecond, _)) {
                    arrow::compute::cast(&utc, &want)?
                } else {
                    utc
                }
            }
        };
        crate::sql::semantics::shape_result(&args.args, out)
    }
}

fn cast_utf8(a: &ArrayRef) -> Result<ArrayRef> {
    Ok(arrow::compute::cast(a, &DataType::Utf8)?)
}

// ---------------------------------------------------------------------------------------------
// Reading the input

/// The fields read from one input (each `None` when its pattern was not given).
#[derive(Debug, Default, Clone, PartialEq)]
struct Fields {
    year: Option<i64>,
    /// Digits read for the year and the pattern's width (for the 2020 adjustment).
    year_short: bool,
    bc: bool,
    century: Option<i64>,
    month: Option<i64>,
    day: Option<i64>,
    day_of_year: Option<i64>,
    julian: Option<i64>,
    iso_year: Option<i64>,
    iso_week: Option<i64>,
    iso_day: Option<i64>,
    iso_day_of_year: Option<i64>,
    week_of_month: Option<i64>,
    week_of_year: Option<i64>,
    /// A Gregorian date pattern was read (`YYYY`, `MM`, `DD`, `DDD`, `WW`, ...).
    gregorian: bool,
    /// An ISO 8601 week-date pattern was read (`IYYY`, `IW`, `ID`, `IDDD`).
    iso: bool,
    hour: Option<i64>,
    twelve_hour: bool,
    pm: Option<bool>,
    minute: Option<i64>,
    second: Option<i64>,
    second_of_day: Option<i64>,
    /// Nanoseconds.
    fraction: Option<i64>,
    offset_hours: Option<i64>,
    offset_minutes: Option<i64>,
    offset_negative: bool,
}

/// `date/time field value out of range: "<input>"` (`22008`).
fn out_of_range(input: &str) -> Error {
    Error::data(
        "22008",
        format!("date/time field value out of range: \"{input}\""),
    )
}

/// The pattern as the user writes it, for messages (`YYYY`).
fn pattern_name(key: DtKey) -> &'static str {
    DT_KEYWORDS
        .iter()
        .find(|(_, k)| *k == key)
        .map_or("?", |(name, _)| name)
}

fn invalid_value(value: &str, key: DtKey, detail: &str) -> Error {
    Error::data(
        "22007",
        format!(
            "invalid value \"{value}\" for \"{}\": {detail}",
            pattern_name(key)
        ),
    )
}

/// The digits a numeric pattern reads at most when the next pattern follows it directly.
fn width(key: DtKey) -> Option<usize> {
    Some(match key {
        DtKey::Year(n) | DtKey::IsoYear(n) | DtKey::Fraction(n) => usize::from(n),
        DtKey::Hour12
        | DtKey::Hour24
        | DtKey::Minute
        | DtKey::Second
        | DtKey::MonthNumber
        | DtKey::DayOfMonth
        | DtKey::IsoWeek
        | DtKey::WeekOfYear
        | DtKey::Century => 2,
        DtKey::DayOfYear | DtKey::IsoDayOfYear => 3,
        DtKey::DayOfWeek | DtKey::IsoDayOfWeek | DtKey::WeekOfMonth | DtKey::Quarter => 1,
        DtKey::SecondOfDay => 5,
        DtKey::YearComma => 5,
        DtKey::Julian => return None,
        _ => return None,
    })
}

fn is_separator(c: char) -> bool {
    !c.is_alphanumeric()
}

/// The input from `at`, cut to at most `n` characters (for messages).
fn chunk(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

/// The longest of `words` that `s` starts with, ignoring case: its index and length in bytes.
fn match_word(s: &str, words: &[&str]) -> Option<(usize, usize)> {
    words
        .iter()
        .enumerate()
        .filter(|(_, w)| {
            s.len() >= w.len()
                && s.is_char_boundary(w.len())
                && s[..w.len()].eq_ignore_ascii_case(w)
        })
        .max_by_key(|(_, w)| w.len())
        .map(|(i, w)| (i, w.len()))
}

fn skip_blanks(s: &str) -> &str {
    s.trim_start_matches(char::is_whitespace)
}

/// Reads `input` by `nodes` (see the module docs).
fn read(input: &str, nodes: &[DtNode]) -> std::result::Result<Fields, Error> {
    let mut f = Fields::default();
    let mut rest = input;
    let mut fixed = false;
    for (at, node) in nodes.iter().enumerate() {
        match node {
            DtNode::Text(text) => {
                for c in text.chars() {
                    if fixed {
                        let mut chars = rest.chars();
                        chars.next();
                        rest = chars.as_str();
                    } else if c.is_whitespace() {
                        rest = skip_blanks(rest);
                    } else if is_separator(c) {
                        let trimmed = skip_blanks(rest);
                        match trimmed.chars().next() {
                            Some(s) if is_separator(s) => rest = &trimmed[s.len_utf8()..],
                            _ => rest = trimmed,
                        }
                    } else {
                        let mut chars = rest.chars();
                        chars.next();
                        rest = chars.as_str();
                    }
                }
            }
            DtNode::Field { key, .. } => {
                let key = *key;
                if key == DtKey::FixedFormat {
                    fixed = true;
                    continue;
                }
                if !fixed {
                    rest = skip_blanks(rest);
                }
                if rest.is_empty() {
                    // Fields past the end of the input keep their defaults.
                    break;
                }
                let adjacent = matches!(nodes.get(at + 1), Some(DtNode::Field { key, .. })
                    if *key != DtKey::FixedFormat);
                rest = read_field(&mut f, key, rest, adjacent)?;
            }
        }
    }
    Ok(f)
}

/// Reads one pattern's value at the start of `s` into `f`; returns the input after it.
fn read_field<'a>(
    f: &mut Fields,
    key: DtKey,
    s: &'a str,
    adjacent: bool,
) -> std::result::Result<&'a str, Error> {
    use DtKey::*;
    let no_match = "the given value did not match any of the allowed values for this field";
    match key {
        IsoYear(_) | IsoWeek | IsoDayOfWeek | IsoDayOfYear => f.iso = true,
        Year(_)
        | YearComma
        | MonthNumber
        | MonthName(_)
        | MonthAbbr(_)
        | RomanMonth { .. }
        | DayOfMonth
        | DayOfYear
        | WeekOfMonth
        | WeekOfYear => f.gregorian = true,
        _ => {}
    }
    if f.iso && f.gregorian {
        return Err(Error::data(
            "22007",
            "invalid combination of date conventions: do not mix Gregorian and ISO week \
             date conventions in a formatting template",
        ));
    }
    match key {
        MonthName(_) | MonthAbbr(_) => {
            let abbreviations: Vec<&str> = MONTHS.iter().map(|m| &m[..3]).collect();
            let found = match key {
                MonthName(_) => match_word(s, &MONTHS).or_else(|| match_word(s, &abbreviations)),
                _ => match_word(s, &abbreviations),
            };
            let (i, len) = found.ok_or_else(|| invalid_value(s, key, no_match))?;
            f.month = Some(i as i64 + 1);
            Ok(&s[len..])
        }
        DayName(_) | DayAbbr(_) => {
            let abbreviations: Vec<&str> = super::to_char::DAYS.iter().map(|d| &d[..3]).collect();
            let found = match key {
                DayName(_) => {
                    match_word(s, &super::to_char::DAYS).or_else(|| match_word(s, &abbreviations))
                }
                _ => match_word(s, &abbreviations),
            };
            let (_, len) = found.ok_or_else(|| invalid_value(s, key, no_match))?;
            // The day of the week is read and not used (as in PostgreSQL).
            Ok(&s[len..])
        }
        Meridiem(_) => {
            let (i, len) = match_word(s, &["am", "pm", "a.m.", "p.m."])
                .ok_or_else(|| invalid_value(s, key, no_match))?;
            f.pm = Some(i % 2 == 1);
            Ok(&s[len..])
        }
        Era(_) => {
            let (i, len) = match_word(s, &["ad", "bc", "a.d.", "b.c."])
                .ok_or_else(|| invalid_value(s, key, no_match))?;
            f.bc = i % 2 == 1;
            Ok(&s[len..])
        }
        RomanMonth { .. } => {
            let (i, len) =
                match_word(s, &ROMAN_MONTHS).ok_or_else(|| invalid_value(s, key, no_match))?;
            // December first.
            f.month = Some(12 - i as i64);
            Ok(&s[len..])
        }
        ZoneName { .. } => Err(Error::not_supported(
            "the \"TZ\" format pattern in to_timestamp and to_date",
        )),
        ZoneHours | ZoneOffset => {
            let (negative, digits) = match s.chars().next() {
                Some('-') => (true, &s[1..]),
                Some('+') => (false, &s[1..]),
                _ => (false, s),
            };
            let (hours, mut rest) = number(digits, Some(2), key)?;
            f.offset_negative = negative;
            f.offset_hours = Some(hours);
            if key == ZoneOffset
                && let Some(after) = rest.strip_prefix(':')
            {
                let (minutes, r) = number(after, Some(2), key)?;
                f.offset_minutes = Some(minutes);
                rest = r;
            }
            Ok(rest)
        }
        YearComma => {
            let digits: String = s
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == ',')
                .collect();
            let year: i64 = digits
                .replace(',', "")
                .parse()
                .map_err(|_| invalid_value(chunk(s, 5), key, "value must be an integer"))?;
            f.year = Some(year);
            Ok(&s[digits.len()..])
        }
        FixedFormat => Ok(s),
        _ => {
            let max = if adjacent { width(key) } else { None };
            let (v, rest) = number(s, max, key)?;
            let read = s.len() - rest.len();
            match key {
                Year(n) => {
                    f.year = Some(v);
                    f.year_short = n < 4 && read < 4;
                }
                IsoYear(_) => f.iso_year = Some(v),
                Century => f.century = Some(v),
                MonthNumber => f.month = Some(v),
                DayOfMonth => f.day = Some(v),
                DayOfYear => f.day_of_year = Some(v),
                IsoDayOfYear => f.iso_day_of_year = Some(v),
                WeekOfMonth => f.week_of_month = Some(v),
                WeekOfYear => f.week_of_year = Some(v),
                Julian => f.julian = Some(v),
                IsoWeek => f.iso_week = Some(v),
                IsoDayOfWeek => f.iso_day = Some(v),
                Hour12 => {
                    f.hour = Some(v);
                    f.twelve_hour = true;
                }
                Hour24 => f.hour = Some(v),
                Minute => f.minute = Some(v),
                Second => f.second = Some(v),
                SecondOfDay => f.second_of_day = Some(v),
                Fraction(n) => {
                    let digits = u32::try_from(read).unwrap_or(u32::MAX);
                    if digits > u32::from(n) {
                        return Err(Error::data(
                            "22008",
                            format!("date/time field value out of range: \"{}\"", chunk(s, read)),
                        ));
                    }
                    f.fraction = Some(v * 10_i64.pow(9 - digits));
                }
                ZoneMinutes => f.offset_minutes = Some(v),
                // Read and not used, as in PostgreSQL: day of the week, week of the month
                // or year, quarter.
                _ => {}
            }
            Ok(rest)
        }
    }
}

/// A run of digits (at most `max`) at the start of `s`.
fn number(s: &str, max: Option<usize>, key: DtKey) -> std::result::Result<(i64, &str), Error> {
    let len = s
        .char_indices()
        .take_while(|(i, c)| c.is_ascii_digit() && max.is_none_or(|m| *i < m))
        .count();
    if len == 0 {
        let shown = chunk(s, width(key).unwrap_or(4).max(1));
        return Err(invalid_value(shown, key, "value must be an integer"));
    }
    let v: i64 = s[..len].parse().map_err(|_| {
        Error::data(
            "22008",
            format!(
                "value for \"{}\" in source string is out of range",
                pattern_name(key)
            ),
        )
    })?;
    Ok((v, &s[len..]))
}

/// PostgreSQL's year nearest 2020 for a year of fewer than four digits
/// (`adjust_partial_year_to_2020` in `formatting.c`).
fn nearest_2020(year: i64) -> i64 {
    match year {
        0..70 => year + 2000,
        70..100 => year + 1900,
        100..520 => year + 2000,
        520..1000 => year + 1000,
        _ => year,
    }
}

impl Fields {
    /// The date the fields give.
    fn date(&self, input: &str) -> std::result::Result<NaiveDate, Error> {
        if let Some(j) = self.julian {
            // Julian day 2440588 is 1970-01-01.
            let days = i32::try_from(j - 2_440_588).map_err(|_| out_of_range(input))?;
            return NaiveDate::from_ymd_opt(1970, 1, 1)
                .and_then(|d| d.checked_add_signed(chrono::TimeDelta::days(i64::from(days))))
                .ok_or_else(|| out_of_range(input));
        }
        if self.iso {
            // Monday of the ISO year's first week, then days on (a week past the year's
            // last rolls over into the next, as in PostgreSQL).
            let y = self.iso_year.unwrap_or(1);
            let y = i32::try_from(y).map_err(|_| out_of_range(input))?;
            let monday = NaiveDate::from_isoywd_opt(y, 1, chrono::Weekday::Mon)
                .ok_or_else(|| out_of_range(input))?;
            let days = match self.iso_day_of_year {
                Some(d) => d - 1,
                None => (self.iso_week.unwrap_or(1) - 1) * 7 + self.iso_day.unwrap_or(1) - 1,
            };
            return monday
                .checked_add_signed(
                    chrono::TimeDelta::try_days(days).ok_or_else(|| out_of_range(input))?,
                )
                .filter(|d| d.year() >= 1)
                .ok_or_else(|| out_of_range(input));
        }
        let mut year = match (self.year, self.century) {
            (Some(y), _) if self.year_short => nearest_2020(y),
            (Some(y), _) => y,
            (None, Some(c)) => (c - 1) * 100 + 1,
            // PostgreSQL's year 1 BC: outside Weir's dates.
            (None, None) => 0,
        };
        if self.bc {
            year = 1 - year;
        }
        if year < 1 {
            return Err(out_of_range(input));
        }
        let year = i32::try_from(year).map_err(|_| out_of_range(input))?;
        // A week of the year counts from January 1st, a week of the month from its 1st.
        let day_of_year = self.day_of_year.or(match (self.month, self.day) {
            (None, None) => self.week_of_year.map(|w| (w - 1) * 7 + 1),
            _ => None,
        });
        if let (Some(doy), None) = (day_of_year, self.month) {
            let doy = u32::try_from(doy).map_err(|_| out_of_range(input))?;
            return NaiveDate::from_yo_opt(year, doy).ok_or_else(|| out_of_range(input));
        }
        let month = u32::try_from(self.month.unwrap_or(1)).map_err(|_| out_of_range(input))?;
        let day = self
            .day
            .or(self.week_of_month.map(|w| (w - 1) * 7 + 1))
            .unwrap_or(1);
        let day = u32::try_from(day).map_err(|_| out_of_range(input))?;
        NaiveDate::from_ymd_opt(year, month, day).ok_or_else(|| out_of_range(input))
    }

    /// The time of day the fields give.
    fn time(&self, input: &str) -> std::result::Result<NaiveTime, Error> {
        let (mut hour, mut minute, mut second) = (
            self.hour.unwrap_or(0),
            self.minute.unwrap_or(0),
            self.second.unwrap_or(0),
        );
        if let Some(s) = self.second_of_day {
            hour = s / 3600;
            minute = s / 60 % 60;
            second = s % 60;
        }
        if self.twelve_hour && !(1..=12).contains(&hour) {
            return Err(Error::data(
                "22007",
                format!(
                    "hour \"{hour}\" is invalid for the 12-hour clock: use the 24-hour \
                     clock, or give an hour between 1 and 12"
                ),
            ));
        }
        match self.pm {
            Some(true) if hour < 12 => hour += 12,
            Some(false) if hour == 12 => hour = 0,
            _ => {}
        }
        let nanos = u32::try_from(self.fraction.unwrap_or(0)).map_err(|_| out_of_range(input))?;
        let part = |v: i64| u32::try_from(v).map_err(|_| out_of_range(input));
        NaiveTime::from_hms_nano_opt(part(hour)?, part(minute)?, part(second)?, nanos)
            .ok_or_else(|| out_of_range(input))
    }

    /// Nanoseconds since 1970-01-01 00:00 UTC of the instant the fields give: the time in
    /// the input's offset if given, else in `zone` (UTC when `None`). A wall-clock time the
    /// zone skips is read with the offset in force before the gap, one it repeats as the
    /// later instant.
    fn instant_nanos(&self, input: &str, zone: Option<&Tz>) -> std::result::Result<i64, Error> {
        let local = NaiveDateTime::new(self.date(input)?, self.time(input)?);
        let utc = if self.offset_hours.is_some() || self.offset_minutes.is_some() {
            if self.offset_hours.unwrap_or(0) > 15 || self.offset_minutes.unwrap_or(0) > 59 {
                return Err(Error::data(
                    "22009",
                    format!("time zone displacement out of range: \"{input}\""),
                ));
            }
            let seconds =
                self.offset_hours.unwrap_or(0) * 3600 + self.offset_minutes.unwrap_or(0) * 60;
            let seconds = if self.offset_negative {
                -seconds
            } else {
                seconds
            };
            local - chrono::TimeDelta::seconds(seconds)
        } else if let Some(zone) = zone {
            match zone.from_local_datetime(&local) {
                // A time the clocks repeat is the later one, standard time (as PostgreSQL
                // reads it).
                chrono::LocalResult::Single(t) | chrono::LocalResult::Ambiguous(_, t) => {
                    t.naive_utc()
                }
                chrono::LocalResult::None => {
                    let before = zone
                        .offset_from_utc_datetime(&(local - chrono::TimeDelta::days(1)))
                        .fix()
                        .local_minus_utc();
                    local - chrono::TimeDelta::seconds(i64::from(before))
                }
            }
        } else {
            local
        };
        if utc.year() < 1 {
            return Err(out_of_range(input));
        }
        utc.and_utc()
            .timestamp_nanos_opt()
            .ok_or_else(|| Error::data("22008", format!("timestamp out of range: \"{input}\"")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(input: &str, fmt: &str) -> std::result::Result<String, String> {
        read(input, &parse_datetime_format(fmt))
            .and_then(|f| f.date(input))
            .map(|d| d.to_string())
            .map_err(|e| e.to_string())
    }

    fn stamp(input: &str, fmt: &str) -> std::result::Result<String, String> {
        read(input, &parse_datetime_format(fmt))
            .and_then(|f| f.instant_nanos(input, None))
            .map(|n| {
                chrono::DateTime::from_timestamp_nanos(n)
                    .naive_utc()
                    .to_string()
            })
            .map_err(|e| e.to_string())
    }

    // Expected values: PostgreSQL 15 on the same calls (TimeZone UTC).
    #[test]
    fn dates_read_as_postgresql_reads_them() {
        assert_eq!(date("2024-03-05", "YYYY-MM-DD").unwrap(), "2024-03-05");
        assert_eq!(date("20240305", "YYYYMMDD").unwrap(), "2024-03-05");
        assert_eq!(date("2024-3-5 junk", "YYYY-MM-DD").unwrap(), "2024-03-05");
        assert_eq!(date("2024", "YYYY-MM-DD").unwrap(), "2024-01-01");
        assert_eq!(date("95-03-05", "YY-MM-DD").unwrap(), "1995-03-05");
        assert_eq!(date("2024 065", "YYYY DDD").unwrap(), "2024-03-05");
        assert_eq!(
            date("March 5, 2024", "Month DD, YYYY").unwrap(),
            "2024-03-05"
        );
        assert_eq!(date("2024-Mar-05", "YYYY-Mon-DD").unwrap(), "2024-03-05");
        assert_eq!(date("2024/03/05", "YYYY-MM-DD").unwrap(), "2024-03-05");
        assert!(
            date("2024-02-30", "YYYY-MM-DD")
                .unwrap_err()
                .contains("out of range")
        );
        assert!(
            date("2024-13-01", "YYYY-MM-DD")
                .unwrap_err()
                .contains("out of range")
        );
        assert!(
            date("abcd-01-01", "YYYY-MM-DD")
                .unwrap_err()
                .contains("\"abcd\"")
        );
        assert!(
            date("2024-foo-05", "YYYY-Mon-DD")
                .unwrap_err()
                .contains("\"Mon\"")
        );
        assert_eq!(date("2024 12 3", "YYYY MM W").unwrap(), "2024-12-15");
        assert_eq!(date("2024 3", "YYYY WW").unwrap(), "2024-01-15");
        assert_eq!(date("2024 60", "IYYY IDDD").unwrap(), "2024-02-29");
        assert_eq!(date("2024-W53-7", "IYYY-\"W\"IW-ID").unwrap(), "2025-01-05");
        assert!(
            date("2024 10 3", "YYYY IW ID")
                .unwrap_err()
                .contains("combination")
        );
    }

    #[test]
    fn timestamps_read_as_postgresql_reads_them() {
        assert_eq!(
            stamp("2024-03-05 14:07:09.5", "YYYY-MM-DD HH24:MI:SS.MS").unwrap(),
            "2024-03-05 14:07:09.500"
        );
        assert_eq!(
            stamp("05 Mar 2024 2:07 pm", "DD Mon YYYY HH:MI AM").unwrap(),
            "2024-03-05 14:07:00"
        );
        assert_eq!(
            stamp("2024-03-05 14:07 +05:30", "YYYY-MM-DD HH24:MI TZH:TZM").unwrap(),
            "2024-03-05 08:37:00"
        );
        assert_eq!(
            stamp("  2024   03 05", "YYYY MM DD").unwrap(),
            "2024-03-05 00:00:00"
        );
        assert!(
            stamp("2024-03-05 25:00", "YYYY-MM-DD HH24:MI")
                .unwrap_err()
                .contains("out of range")
        );
        assert!(
            stamp("2024 13:00", "YYYY HH:MI")
                .unwrap_err()
                .contains("12-hour")
        );
    }
}

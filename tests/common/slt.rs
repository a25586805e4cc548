//! The sqllogictest engine the SQL test suites share: a pgwire client that runs each record
//! with the simple or the extended query protocol and renders values as PostgreSQL's text form
//! (NULL as `NULL`, the empty string as `(empty)`).

use std::time::Duration;

use async_trait::async_trait;
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType};
use tokio_postgres::types::{FromSql, Type};

/// The pgwire protocol a [`Pg`] sends each record with.
#[derive(Clone, Copy, PartialEq)]
pub enum Protocol {
    /// One `Query` message; every value arrives as text.
    Simple,
    /// `Parse`/`Bind`/`Execute`; values arrive in binary and are decoded by [`Raw`].
    Extended,
}

/// A sqllogictest connection to a pgwire server.
pub struct Pg {
    /// The connected client.
    pub client: tokio_postgres::Client,
    /// How records are sent.
    pub protocol: Protocol,
}

/// A failed record: the server's error (displayed as its message alone) or a client error.
#[derive(Debug)]
pub struct PgError(pub tokio_postgres::Error);

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.as_db_error() {
            Some(db) => write!(f, "{}", db.message()),
            None => write!(f, "{}", self.0),
        }
    }
}

impl std::error::Error for PgError {}

/// Any value as raw bytes plus its type, decoded to PostgreSQL's text form by hand.
pub struct Raw(pub String);

impl<'a> FromSql<'a> for Raw {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let s = match *ty {
            Type::BOOL => {
                if raw[0] != 0 {
                    "t".into()
                } else {
                    "f".into()
                }
            }
            Type::INT2 => i16::from_sql(ty, raw)?.to_string(),
            Type::INT4 => i32::from_sql(ty, raw)?.to_string(),
            Type::INT8 => i64::from_sql(ty, raw)?.to_string(),
            Type::FLOAT4 => {
                let v = f32::from_sql(ty, raw)?;
                pg_float_text(f64::from(v), v.to_string(), format!("{v:e}"), 6)
            }
            Type::FLOAT8 => {
                let v = f64::from_sql(ty, raw)?;
                pg_float_text(v, v.to_string(), format!("{v:e}"), 15)
            }
            Type::NUMERIC => decode_numeric(raw),
            Type::DATE => {
                let days = i32::from_sql(&Type::INT4, raw)?;
                let d = chrono::NaiveDate::from_ymd_opt(2000, 1, 1).unwrap()
                    + chrono::Duration::days(days as i64);
                d.to_string()
            }
            Type::TIMESTAMP | Type::TIMESTAMPTZ => {
                let us = i64::from_sql(&Type::INT8, raw)?;
                let base = chrono::NaiveDate::from_ymd_opt(2000, 1, 1)
                    .unwrap()
                    .and_hms_opt(0, 0, 0)
                    .unwrap();
                let t = base + chrono::Duration::microseconds(us);
                let mut s = t.format("%Y-%m-%d %H:%M:%S%.f").to_string();
                if *ty == Type::TIMESTAMPTZ {
                    s.push_str("+00");
                }
                s
            }
            Type::TIME => {
                // `time_send`: microseconds since midnight.
                let us = i64::from_sql(&Type::INT8, raw)?;
                let t = chrono::NaiveTime::MIN + chrono::Duration::microseconds(us);
                let mut s = t.format("%H:%M:%S").to_string();
                let fraction = us.rem_euclid(1_000_000);
                if fraction != 0 {
                    s.push_str(format!(".{fraction:06}").trim_end_matches('0'));
                }
                s
            }
            Type::INTERVAL => {
                let micros = i64::from_be_bytes(raw[0..8].try_into()?);
                let days = i32::from_be_bytes(raw[8..12].try_into()?);
                let months = i32::from_be_bytes(raw[12..16].try_into()?);
                interval_text(months, days, micros)
            }
            _ if matches!(ty.kind(), tokio_postgres::types::Kind::Array(_)) => array_text(raw)?,
            _ => String::from_utf8_lossy(raw).to_string(),
        };
        Ok(Raw(s))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// An array in PostgreSQL's binary form (`array_send`: dimensions, NULL flag, element type
/// OID, each dimension's length and lower bound, then each element's length, -1 for NULL, and
/// bytes) as its text form (`array_out`): `{1,2}`, `{{1,2},{3,4}}`, `NULL` for a NULL
/// element, an element in double quotes when it is empty, `NULL`, or holds a space, a comma,
/// a brace, a quote or a backslash.
fn array_text(raw: &[u8]) -> Result<String, Box<dyn std::error::Error + Sync + Send>> {
    let int = |at: usize| -> Result<i32, Box<dyn std::error::Error + Sync + Send>> {
        Ok(i32::from_be_bytes(
            raw.get(at..at + 4).ok_or("short array")?.try_into()?,
        ))
    };
    let dims = usize::try_from(int(0)?)?;
    let element = Type::from_oid(u32::try_from(int(8)?)?).unwrap_or(Type::TEXT);
    let lengths = (0..dims)
        .map(|d| Ok(usize::try_from(int(12 + 8 * d)?)?))
        .collect::<Result<Vec<usize>, Box<dyn std::error::Error + Sync + Send>>>()?;
    let mut at = 12 + 8 * dims;
    let mut items = Vec::new();
    for _ in 0..lengths.iter().product::<usize>() * usize::from(dims > 0) {
        let len = int(at)?;
        at += 4;
        if len < 0 {
            items.push("NULL".to_string());
            continue;
        }
        let bytes = raw.get(at..at + len as usize).ok_or("short array")?;
        at += len as usize;
        let text = Raw::from_sql(&element, bytes)?.0;
        let plain = !text.is_empty()
            && !text.eq_ignore_ascii_case("NULL")
            && !text.contains([' ', ',', '{', '}', '"', '\\']);
        items.push(if plain {
            text
        } else {
            format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
        });
    }
    // Nest the elements by dimension, innermost first.
    for len in lengths.iter().skip(1).rev() {
        items = items
            .chunks(*len)
            .map(|c| format!("{{{}}}", c.join(",")))
            .collect();
    }
    Ok(format!("{{{}}}", items.join(",")))
}

/// An interval in PostgreSQL's output style `postgres` (its `EncodeInterval`): years, months
/// and days each with its sign (`+` when an earlier part was negative) and `s` unless
/// exactly 1, then the time as `[+-]HH:MM:SS[.f]`
/// (`+` when an earlier part was negative), `00:00:00` when all are zero.
fn interval_text(months: i32, days: i32, micros: i64) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut negative_before = false;
    for (value, unit) in [(months / 12, "year"), (months % 12, "mon"), (days, "day")] {
        if value != 0 {
            let plural = if value == 1 { "" } else { "s" };
            let plus = if negative_before && value > 0 {
                "+"
            } else {
                ""
            };
            parts.push(format!("{plus}{value} {unit}{plural}"));
            negative_before = value < 0;
        }
    }
    if micros != 0 || parts.is_empty() {
        let sign = if micros < 0 {
            "-"
        } else if negative_before {
            "+"
        } else {
            ""
        };
        let m = micros.unsigned_abs();
        let (h, rest) = (m / 3_600_000_000, m % 3_600_000_000);
        let (min, rest) = (rest / 60_000_000, rest % 60_000_000);
        let (sec, frac) = (rest / 1_000_000, rest % 1_000_000);
        let mut t = format!("{sign}{h:02}:{min:02}:{sec:02}");
        if frac > 0 {
            t.push_str(format!(".{frac:06}").trim_end_matches('0'));
        }
        parts.push(t);
    }
    parts.join(" ")
}

/// Decodes PostgreSQL's binary numeric (base-10000 digits) to its text form.
fn decode_numeric(raw: &[u8]) -> String {
    let n = |i: usize| i16::from_be_bytes([raw[i], raw[i + 1]]);
    let ndigits = n(0) as usize;
    let weight = n(2) as i32;
    let sign = n(4) as u16;
    let dscale = n(6) as usize;
    if sign == 0xC000 {
        return "NaN".into();
    }
    let digits: Vec<i32> = (0..ndigits).map(|i| n(8 + 2 * i) as i32).collect();
    let mut int = String::new();
    for w in 0..=weight.max(0) {
        let d = if w <= weight {
            digits.get(w as usize).copied().unwrap_or(0)
        } else {
            0
        };
        if int.is_empty() {
            int = d.to_string()
        } else {
            int.push_str(&format!("{d:04}"))
        }
    }
    if weight < 0 {
        int = "0".into();
    }
    let mut frac = String::new();
    let mut idx = weight + 1;
    while frac.len() < dscale {
        let d = if idx >= 0 {
            digits.get(idx as usize).copied().unwrap_or(0)
        } else {
            0
        };
        frac.push_str(&format!("{d:04}"));
        idx += 1;
    }
    frac.truncate(dscale);
    let mut s = if sign == 0x4000 {
        format!("-{int}")
    } else {
        int
    };
    if dscale > 0 {
        s.push('.');
        s.push_str(&frac);
    }
    s
}

#[async_trait]
impl AsyncDB for Pg {
    type Error = PgError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, PgError> {
        // A parenthesized query (`(SELECT ...) INTERSECT ...`) is a query too.
        let lower = sql
            .trim_start()
            .trim_start_matches(|c: char| c == '(' || c.is_whitespace())
            .to_ascii_lowercase();
        let is_query = [
            "select", "show", "with", "values", "explain", "table", "fetch",
        ]
        .iter()
        .any(|k| lower.starts_with(k))
            || lower.contains(" returning ");
        if self.protocol == Protocol::Extended && is_query {
            let rows = self.client.query(sql, &[]).await.map_err(PgError)?;
            let mut out = Vec::new();
            let mut width = 0;
            for r in &rows {
                width = r.len();
                let mut row = Vec::new();
                for i in 0..r.len() {
                    let v: Option<Raw> = r.try_get(i).map_err(PgError)?;
                    row.push(match v {
                        None => "NULL".into(),
                        Some(Raw(s)) if s.is_empty() => "(empty)".into(),
                        Some(Raw(s)) => s,
                    });
                }
                out.push(row);
            }
            return Ok(DBOutput::Rows {
                types: vec![DefaultColumnType::Any; width],
                rows: out,
            });
        }
        if self.protocol == Protocol::Extended && !lower.starts_with("copy") {
            let n = self.client.execute(sql, &[]).await.map_err(PgError)?;
            return Ok(DBOutput::StatementComplete(n));
        }
        let msgs = self.client.simple_query(sql).await.map_err(PgError)?;
        let mut rows = Vec::new();
        let mut width = None;
        let mut affected = 0;
        for m in msgs {
            match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => {
                    width = Some(r.len());
                    rows.push(
                        (0..r.len())
                            .map(|i| match r.get(i) {
                                None => "NULL".to_string(),
                                Some("") => "(empty)".to_string(),
                                Some(s) => s.to_string(),
                            })
                            .collect(),
                    );
                }
                tokio_postgres::SimpleQueryMessage::RowDescription(d) => width = Some(d.len()),
                tokio_postgres::SimpleQueryMessage::CommandComplete(n) => affected = n,
                _ => {}
            }
        }
        match width {
            Some(w) => Ok(DBOutput::Rows {
                types: vec![DefaultColumnType::Any; w],
                rows,
            }),
            None => Ok(DBOutput::StatementComplete(affected)),
        }
    }

    async fn shutdown(&mut self) {}

    async fn sleep(dur: Duration) {
        tokio::time::sleep(dur).await;
    }

    fn error_sql_state(err: &Self::Error) -> Option<String> {
        err.0.code().map(|c| c.code().to_string())
    }
}

/// A float as PostgreSQL's text output shows it (`float8out`/`float4out` with the default
/// `extra_float_digits = 1`): the shortest digits that read back to the value (`shortest`,
/// Rust's `Display`, which finds the same digits), in exponent form when the decimal exponent
/// (of `scientific`, Rust's `{:e}`) is below -4 or at least `fixed_below` (15 for double
/// precision, 6 for real: `1e+20`, `1e-05`, `1.234567e+06`), and `Infinity`, `-Infinity`,
/// `NaN`.
fn pg_float_text(x: f64, shortest: String, scientific: String, fixed_below: i32) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` gives the same shortest digits: `1e20`, `1.5e-7`.
    let (mantissa, exp) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..fixed_below).contains(&exp) {
        return shortest;
    }
    format!(
        "{mantissa}e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

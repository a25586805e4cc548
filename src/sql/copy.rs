//! `COPY table FROM STDIN` and `COPY table | (query) TO STDOUT` in PostgreSQL's text and CSV
//! formats.
//!
//! Follows PostgreSQL's `COPY` reference: text format (tab-separated, `\N` for NULL, backslash
//! escapes) and CSV format (`HEADER`, `DELIMITER`, `NULL`, `QUOTE`, `ESCAPE`). A COPY is applied
//! whole or not at all: the first bad row aborts it, naming its line and column.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, StringBuilder};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::sql::sqlparser::ast::{CopyLegacyCsvOption, CopyLegacyOption, CopyOption};

use crate::error::{Error, Result};

/// The options of one COPY FROM STDIN or TO STDOUT.
#[derive(Debug, Clone)]
pub struct CopyFormat {
    /// CSV (true) or text (false).
    pub csv: bool,
    /// PostgreSQL's binary format (COPY FROM only; see [`crate::sql::copy_binary`]).
    pub binary: bool,
    /// The first line is a header (skipped on input, the column names on output).
    pub header: bool,
    /// Field separator (byte).
    pub delimiter: u8,
    /// The string that means NULL.
    pub null: String,
    /// CSV quote character.
    pub quote: u8,
    /// CSV escape character.
    pub escape: u8,
    /// The session's `TimeZone` in Arrow's form (`America/New_York`, `-03:00`), that
    /// `timestamptz` text without an offset is read in; `None` for UTC.
    pub zone: Option<String>,
}

impl CopyFormat {
    /// Reads COPY's options (both the modern `WITH (...)` and the legacy forms psql sends).
    ///
    /// # Errors
    /// `0A000` for unsupported options; `22023` for bad values; `42601` for text or CSV
    /// options beside the binary format.
    pub fn from_options(options: &[CopyOption], legacy: &[CopyLegacyOption]) -> Result<Self> {
        let mut csv = false;
        let mut binary = false;
        let mut header = false;
        let mut delimiter = None;
        let mut null = None;
        let mut quote = b'"';
        let mut escape = None;
        let byte = |c: char, what: &str| -> Result<u8> {
            if c.is_ascii() {
                Ok(c as u8)
            } else {
                Err(Error::setting(format!(
                    "COPY {what} must be a single one-byte character"
                )))
            }
        };
        for o in options {
            match o {
                CopyOption::Format(f) => match f.value.to_ascii_lowercase().as_str() {
                    "csv" => (csv, binary) = (true, false),
                    "text" => (csv, binary) = (false, false),
                    "binary" => (csv, binary) = (false, true),
                    other => {
                        return Err(Error::setting(format!(
                            "COPY format \"{other}\" not recognized; use text or csv"
                        )));
                    }
                },
                CopyOption::Header(h) => header = *h,
                CopyOption::Delimiter(c) => delimiter = Some(byte(*c, "delimiter")?),
                CopyOption::Null(s) => null = Some(s.clone()),
                CopyOption::Quote(c) => quote = byte(*c, "quote")?,
                CopyOption::Escape(c) => escape = Some(byte(*c, "escape")?),
                CopyOption::Encoding(e)
                    if e.eq_ignore_ascii_case("utf8") || e.eq_ignore_ascii_case("utf-8") => {}
                other => {
                    return Err(Error::not_supported(format!(
                        "COPY option {other} is not supported"
                    )));
                }
            }
        }
        for o in legacy {
            match o {
                CopyLegacyOption::Csv(opts) => {
                    csv = true;
                    for c in opts {
                        match c {
                            CopyLegacyCsvOption::Header => header = true,
                            CopyLegacyCsvOption::Quote(q) => quote = byte(*q, "quote")?,
                            CopyLegacyCsvOption::Escape(e) => escape = Some(byte(*e, "escape")?),
                            other => {
                                return Err(Error::not_supported(format!(
                                    "COPY option {other} is not supported"
                                )));
                            }
                        }
                    }
                }
                CopyLegacyOption::Header => header = true,
                CopyLegacyOption::Delimiter(c) => delimiter = Some(byte(*c, "delimiter")?),
                CopyLegacyOption::Null(s) => null = Some(s.clone()),
                CopyLegacyOption::Binary => binary = true,
                other => {
                    return Err(Error::not_supported(format!(
                        "COPY option {other} is not supported"
                    )));
                }
            }
        }
        if binary {
            let text_option = [
                (csv, "CSV"),
                (header, "HEADER"),
                (delimiter.is_some(), "DELIMITER"),
                (null.is_some(), "NULL"),
                (escape.is_some(), "ESCAPE"),
            ]
            .into_iter()
            .find(|(set, _)| *set);
            if let Some((_, name)) = text_option {
                return Err(Error::plan(
                    "42601",
                    format!("cannot specify {name} in BINARY mode"),
                ));
            }
        }
        if header && !csv {
            return Err(Error::not_supported(
                "COPY HEADER is available only in CSV mode",
            ));
        }
        Ok(CopyFormat {
            csv,
            binary,
            header,
            delimiter: delimiter.unwrap_or(if csv { b',' } else { b'\t' }),
            null: null.unwrap_or_else(|| if csv { String::new() } else { "\\N".into() }),
            quote,
            escape: escape.unwrap_or(quote),
            zone: None,
        })
    }
}

/// One line of `COPY ... TO STDOUT` data (PostgreSQL's COPY reference, "File Formats"): the
/// fields' PostgreSQL text forms (`None` for NULL) joined by the delimiter, ending in `\n`.
/// Text format writes NULL as the NULL string (`\N`) and escapes backslash, newline,
/// carriage return, tab and the delimiter with a backslash; CSV writes NULL as the NULL
/// string (empty) unquoted, and quotes a field that holds the delimiter, the quote, a line
/// break, or equals the NULL string (so an empty string is `""`), doubling quotes inside.
pub fn copy_out_line(fields: &[Option<&[u8]>], format: &CopyFormat) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push(format.delimiter);
        }
        let Some(v) = field else {
            out.extend_from_slice(format.null.as_bytes());
            continue;
        };
        if format.csv {
            let needs_quotes = v.is_empty() && format.null.is_empty()
                || *v == format.null.as_bytes()
                || v.iter().any(|&b| {
                    b == format.delimiter || b == format.quote || b == b'\n' || b == b'\r'
                });
            if needs_quotes {
                out.push(format.quote);
                for &b in v.iter() {
                    if b == format.quote || b == format.escape {
                        out.push(format.escape);
                    }
                    out.push(b);
                }
                out.push(format.quote);
            } else {
                out.extend_from_slice(v);
            }
        } else {
            for &b in v.iter() {
                match b {
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    b'\t' => out.extend_from_slice(b"\\t"),
                    d if d == format.delimiter => {
                        out.push(b'\\');
                        out.push(d);
                    }
                    other => out.push(other),
                }
            }
        }
    }
    out.push(b'\n');
    out
}

/// Parses COPY data into one batch of `schema`, where `columns` are the target columns (the
/// others are NULL).
///
/// # Errors
/// `22P04` for a row with too few or too many fields, `22P02` for a value that does not parse,
/// `22021` for invalid UTF-8; each names the table, line and column like PostgreSQL's CONTEXT.
pub fn parse(
    data: &[u8],
    format: &CopyFormat,
    table: &str,
    schema: &SchemaRef,
    columns: &[usize],
) -> Result<RecordBatch> {
    if format.binary {
        return crate::sql::copy_binary::parse(data, table, schema, columns);
    }
    let mut builders: Vec<StringBuilder> = columns.iter().map(|_| StringBuilder::new()).collect();
    let mut lines: Vec<u64> = Vec::new();
    let width = columns.len();
    let field_error =
        |line: u64, msg: String| Error::data("22P04", format!("{msg} (COPY {table}, line {line})"));
    if format.csv {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .delimiter(format.delimiter)
            .quote(format.quote)
            .escape(if format.escape == format.quote {
                None
            } else {
                Some(format.escape)
            })
            .double_quote(format.escape == format.quote)
            .flexible(true)
            .from_reader(data);
        let mut record = csv::ByteRecord::new();
        let mut first = true;
        loop {
            let more = reader.read_byte_record(&mut record).map_err(|e| {
                Error::data("22P04", format!("malformed CSV data: {e} (COPY {table})"))
            })?;
            if !more {
                break;
            }
            let line = record.position().map(|p| p.line()).unwrap_or(0);
            // The record's bytes, to tell a quoted field from an unquoted one.
            let raw = record
                .position()
                .and_then(|p| data.get(p.byte() as usize..reader.position().byte() as usize))
                .unwrap_or_default();
            if first && format.header {
                first = false;
                continue;
            }
            first = false;
            if record.len() == 1 && record.get(0) == Some(b"\\.") {
                break;
            }
            if record.len() < width {
                let missing = schema.field(columns[record.len()]).name();
                return Err(field_error(
                    line,
                    format!("missing data for column \"{missing}\""),
                ));
            }
            if record.len() > width {
                return Err(field_error(
                    line,
                    "extra data after last expected column".into(),
                ));
            }
            let mut quoted: Option<Vec<bool>> = None;
            for (j, f) in record.iter().enumerate() {
                let s = std::str::from_utf8(f).map_err(|_| {
                    Error::data("22021", format!("invalid byte sequence for encoding \"UTF8\" (COPY {table}, line {line})"))
                })?;
                // PostgreSQL: a field is NULL when it matches the NULL string and no quote was
                // seen in it (`,"",` is an empty string, `,,` NULL by default).
                let is_null = s == format.null
                    && !quoted
                        .get_or_insert_with(|| csv_quoted_fields(raw, format))
                        .get(j)
                        .copied()
                        .unwrap_or(false);
                if is_null {
                    builders[j].append_null();
                } else {
                    builders[j].append_value(s);
                }
            }
            lines.push(line);
        }
    } else {
        let text = std::str::from_utf8(data).map_err(|_| {
            Error::data(
                "22021",
                format!("invalid byte sequence for encoding \"UTF8\" (COPY {table})"),
            )
        })?;
        for (i, raw) in text.split('\n').enumerate() {
            let line = i as u64 + 1;
            let raw = raw.strip_suffix('\r').unwrap_or(raw);
            if raw == "\\." {
                break;
            }
            if raw.is_empty() && i + 1 == text.split('\n').count() {
                break;
            }
            let fields: Vec<&str> = raw.split(format.delimiter as char).collect();
            if fields.len() < width {
                let missing = schema.field(columns[fields.len()]).name();
                return Err(field_error(
                    line,
                    format!("missing data for column \"{missing}\""),
                ));
            }
            if fields.len() > width {
                return Err(field_error(
                    line,
                    "extra data after last expected column".into(),
                ));
            }
            for (j, f) in fields.iter().enumerate() {
                if *f == format.null {
                    builders[j].append_null();
                } else {
                    let value = unescape_text(f).map_err(|m| {
                        Error::data("22021", format!("{m} (COPY {table}, line {line})"))
                    })?;
                    builders[j].append_value(value);
                }
            }
            lines.push(line);
        }
    }
    let n = lines.len();
    let mut out: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| arrow::array::new_null_array(f.data_type(), n))
        .collect();
    for (j, mut b) in builders.into_iter().enumerate() {
        let col = columns[j];
        let field = schema.field(col);
        let strings: ArrayRef = Arc::new(b.finish());
        let typed = convert(&strings, field.data_type(), format.zone.as_deref())?;
        if typed.null_count() > strings.null_count() {
            for (i, line) in lines.iter().enumerate().take(n) {
                if typed.is_null(i) && !strings.is_null(i) {
                    let value = strings
                        .as_any()
                        .downcast_ref::<arrow::array::StringArray>()
                        .map(|a| a.value(i).to_string())
                        .unwrap_or_default();
                    // A number the column cannot hold (`999999.999` in a `numeric(8,2)`).
                    if matches!(field.data_type(), DataType::Decimal128(..))
                        && value.trim().parse::<f64>().is_ok_and(f64::is_finite)
                    {
                        return Err(Error::data(
                            "22003",
                            format!(
                                "numeric field overflow (COPY {}, line {}, column {}: \"{}\")",
                                table,
                                line,
                                field.name(),
                                value
                            ),
                        ));
                    }
                    return Err(Error::data(
                        "22P02",
                        format!(
                            "invalid input syntax for type {}: \"{}\" (COPY {}, line {}, column {})",
                            pg_type_name(field.data_type()),
                            value,
                            table,
                            line,
                            field.name()
                        ),
                    ));
                }
            }
        }
        out[col] = typed;
    }
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(n));
    // Nullable here: NOT NULL is checked by the engine with PostgreSQL's error.
    let schema = crate::common::schema::nullable_schema(schema);
    Ok(RecordBatch::try_new_with_options(schema, out, &options)?)
}

/// Casts text to a column type; values that do not parse become NULL (found by the caller).
/// Timestamps and intervals are read in PostgreSQL's input forms as a cast reads them
/// (`timestamptz` text without an offset in `zone`, the session's zone in Arrow's form; a
/// zone in `timestamp` text ignored).
fn convert(strings: &ArrayRef, to: &DataType, zone: Option<&str>) -> Result<ArrayRef> {
    use crate::sql::functions::datetime_input::{Target, read_datetime_text};
    if to == &DataType::Utf8 {
        return Ok(strings.clone());
    }
    let texts = strings.as_any().downcast_ref::<arrow::array::StringArray>();
    let reading = match to {
        DataType::Interval(_) => Some((Target::Interval, "interval", None)),
        DataType::Timestamp(_, None) => Some((Target::Timestamp, "timestamp", None)),
        DataType::Date32 => Some((Target::Date, "date", None)),
        DataType::Timestamp(_, Some(_)) => {
            let zone: Option<arrow::array::timezone::Tz> = zone.map(str::parse).transpose()?;
            Some((Target::Timestamp, "timestamp with time zone", zone))
        }
        _ => None,
    };
    // Numbers as a cast reads them: `1e3` for a `numeric`, `1e400` out of a float's range.
    if let (Some(texts), Some(target)) = (
        texts,
        crate::sql::functions::number_input::NumberTarget::of(to),
    ) {
        let reader = crate::sql::functions::number_input::NumberText::new(target);
        let read: arrow::array::StringArray = texts
            .iter()
            .map(|v| v.map(|s| reader.convert(s).unwrap_or_else(|_| s.to_string())))
            .collect();
        return convert_with_arrow(&(Arc::new(read) as ArrayRef), to);
    }
    if let (Some(texts), Some((target, name, at))) = (texts, reading) {
        // Text neither form reads is left as written, for the cast to refuse.
        let read: arrow::array::StringArray = texts
            .iter()
            .map(|v| {
                v.map(|s| {
                    read_datetime_text(target, name, s, at.as_ref(), zone)
                        .unwrap_or_else(|_| s.to_string())
                })
            })
            .collect();
        let read: ArrayRef = Arc::new(read);
        // `timestamp(0)` and `timestamp(3)` round to their precision, as a cast does.
        if let DataType::Timestamp(
            unit @ (arrow::datatypes::TimeUnit::Second | arrow::datatypes::TimeUnit::Millisecond),
            tz,
        ) = to
        {
            use crate::sql::functions::datetime_input::{round_timestamps, unit_step};
            let micros = convert_with_arrow(
                &read,
                &DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, tz.clone()),
            )?;
            let rounded = round_timestamps(&micros, unit_step(*unit))?;
            return Ok(arrow::compute::cast(&rounded, to)?);
        }
        return convert_with_arrow(&read, to);
    }
    convert_with_arrow(strings, to)
}

/// Arrow's cast of text to `to`; values that do not parse become NULL.
fn convert_with_arrow(strings: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
    let options = CastOptions {
        safe: true,
        ..Default::default()
    };
    let strings = if matches!(to, DataType::Boolean) {
        // PostgreSQL's boolean input also takes these spellings.
        match strings.as_any().downcast_ref::<arrow::array::StringArray>() {
            Some(a) => {
                let normalized: arrow::array::StringArray = a
                    .iter()
                    .map(|v| v.map(|s| s.trim().to_ascii_lowercase()))
                    .collect();
                Arc::new(normalized) as ArrayRef
            }
            None => strings.clone(),
        }
    } else {
        strings.clone()
    };
    Ok(cast_with_options(&strings, to, &options)?)
}

/// PostgreSQL's name for an Arrow type, for messages.
pub fn pg_type_name(t: &DataType) -> String {
    match t {
        DataType::Boolean => "boolean".into(),
        DataType::Int16 => "smallint".into(),
        DataType::Int32 => "integer".into(),
        DataType::Int64 => "bigint".into(),
        DataType::Float32 => "real".into(),
        DataType::Float64 => "double precision".into(),
        DataType::Decimal128(..) | DataType::Decimal256(..) => "numeric".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "text".into(),
        DataType::Date32 | DataType::Date64 => "date".into(),
        DataType::Timestamp(_, None) => "timestamp".into(),
        DataType::Timestamp(_, Some(_)) => "timestamp with time zone".into(),
        DataType::Interval(_) => "interval".into(),
        other => other.to_string(),
    }
}

/// Undoes the backslash escapes of COPY's text format, as PostgreSQL's
/// `CopyReadAttributesText` does (docs, COPY "Text Format"): `\b \f \n \r \t \v`, `\digits`
/// (one to three octal digits) and `\xdigits` (one or two hex digits) for a byte, and any
/// other character after a backslash for itself (`\\`, `\x` without a hex digit).
///
/// # Errors
/// The message of `22021` when the bytes are not UTF-8 or hold a zero byte (PostgreSQL:
/// `invalid byte sequence for encoding "UTF8"`).
fn unescape_text(s: &str) -> std::result::Result<std::borrow::Cow<'_, str>, String> {
    if !s.contains('\\') {
        return Ok(std::borrow::Cow::Borrowed(s));
    }
    let bytes = s.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        i += 1;
        if c != b'\\' {
            out.push(c);
            continue;
        }
        let Some(&e) = bytes.get(i) else {
            out.push(b'\\');
            break;
        };
        i += 1;
        match e {
            b'0'..=b'7' => {
                let mut v = u32::from(e - b'0');
                for _ in 0..2 {
                    match bytes.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                // Three octal digits reach 0o777; PostgreSQL keeps the low byte.
                out.push((v & 0xff) as u8);
            }
            b'x' if bytes.get(i).is_some_and(u8::is_ascii_hexdigit) => {
                let mut v = 0u8;
                for _ in 0..2 {
                    match bytes.get(i) {
                        Some(d) if d.is_ascii_hexdigit() => {
                            v = v * 16 + (*d as char).to_digit(16).unwrap_or(0) as u8;
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push(v);
            }
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'v' => out.push(11),
            other => out.push(other),
        }
    }
    if out.contains(&0) {
        return Err("invalid byte sequence for encoding \"UTF8\": 0x00".into());
    }
    String::from_utf8(out)
        .map(std::borrow::Cow::Owned)
        .map_err(|e| {
            let at = e.utf8_error().valid_up_to();
            let bad = e.as_bytes().get(at).copied().unwrap_or(0);
            format!("invalid byte sequence for encoding \"UTF8\": 0x{bad:02x}")
        })
}

/// Whether each field of one CSV record (its raw bytes) had a quote character in it, as
/// PostgreSQL's `CopyReadAttributesCSV` tracks it (`saw_quote`): only an unquoted field can
/// be NULL.
fn csv_quoted_fields(raw: &[u8], format: &CopyFormat) -> Vec<bool> {
    let mut out = Vec::new();
    let (mut in_quotes, mut saw_quote, mut escaped) = (false, false, false);
    for &b in raw {
        if escaped {
            escaped = false;
            continue;
        }
        if in_quotes {
            if b == format.escape && format.escape != format.quote {
                escaped = true;
            } else if b == format.quote {
                in_quotes = false;
            }
            continue;
        }
        if b == format.quote {
            in_quotes = true;
            saw_quote = true;
        } else if b == format.delimiter {
            out.push(saw_quote);
            saw_quote = false;
        } else if b == b'\n' || b == b'\r' {
            break;
        }
    }
    out.push(saw_quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Utf8, true),
        ]))
    }

    fn fmt(csv: bool) -> CopyFormat {
        CopyFormat {
            csv,
            binary: false,
            header: csv,
            delimiter: if csv { b',' } else { b'\t' },
            null: if csv { "NA".into() } else { "\\N".into() },
            quote: b'"',
            escape: b'"',
            zone: None,
        }
    }

    #[test]
    fn csv_with_header_and_null() {
        let b = parse(
            b"a,b\n1,x\nNA,\"y,z\"\n",
            &fmt(true),
            "t",
            &schema(),
            &[0, 1],
        )
        .unwrap();
        assert_eq!(b.num_rows(), 2);
        assert!(b.column(0).is_null(1));
    }

    /// PostgreSQL's rule: only an unquoted field matching the NULL string is NULL; a quoted
    /// empty field is an empty string (the default CSV NULL string is empty).
    #[test]
    fn quoted_csv_field_is_never_null() {
        let mut f = fmt(true);
        f.header = false;
        f.null = String::new();
        let b = parse(
            b"1,\"\"\n2,\n,\"a\"\"\"\n\"\",\"\"\r\n",
            &f,
            "t",
            &schema(),
            &[0, 1],
        );
        // Row 4's `""` in the integer column is an empty string, not NULL: 22P02 as in
        // PostgreSQL.
        assert_eq!(b.unwrap_err().sqlstate(), "22P02");
        let b = parse(
            b"1,\"\"\n2,\n,\"a\"\"\"\n3,\"x,\"\"\"\r\n",
            &f,
            "t",
            &schema(),
            &[0, 1],
        )
        .unwrap();
        let text = arrow::array::AsArray::as_string::<i32>(b.column(1));
        assert_eq!(b.num_rows(), 4);
        assert!(b.column(1).is_valid(0) && text.value(0).is_empty());
        assert!(b.column(1).is_null(1));
        assert!(b.column(0).is_null(2) && text.value(2) == "a\"");
        assert_eq!(text.value(3), "x,\"");
    }

    #[test]
    fn bad_value_names_line_and_column() {
        let e = parse(b"a,b\n1,x\nzz,y\n", &fmt(true), "t", &schema(), &[0, 1]).unwrap_err();
        assert_eq!(e.sqlstate(), "22P02");
        let m = e.to_string();
        assert!(
            m.contains("line 3") && m.contains("column a") && m.contains("\"zz\""),
            "{m}"
        );
    }

    #[test]
    fn text_format_escapes_and_null() {
        let b = parse(
            b"1\ta\\tb\n\\N\t\\N\n",
            &fmt(false),
            "t",
            &schema(),
            &[0, 1],
        )
        .unwrap();
        assert_eq!(b.num_rows(), 2);
        assert!(b.column(1).is_null(1));
    }

    /// Fields are read as casts read text (expected values by hand: 10:00 in New York in
    /// July is 14:00 UTC; `+02` in `timestamp` text is ignored; PostgreSQL's interval output
    /// form `1 day 02:03:04` is a day and 7,384 seconds, which Arrow's parser refuses).
    #[test]
    fn fields_are_read_as_casts_read_text() {
        use arrow::array::AsArray;
        use arrow::datatypes::{
            Field, IntervalMonthDayNanoType, IntervalUnit, Schema, TimeUnit,
            TimestampNanosecondType,
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new(
                "at",
                DataType::Timestamp(TimeUnit::Nanosecond, Some("+00:00".into())),
                true,
            ),
            Field::new("p", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
            Field::new("i", DataType::Interval(IntervalUnit::MonthDayNano), true),
        ]));
        let mut f = fmt(false);
        f.zone = Some("America/New_York".into());
        let b = parse(
            b"2024-07-01 10:00\t2024-07-01 10:00:00+02\t1 day 02:03:04\n",
            &f,
            "t",
            &schema,
            &[0, 1, 2],
        )
        .unwrap();
        let nanos = |c: usize| {
            b.column(c)
                .as_primitive::<TimestampNanosecondType>()
                .value(0)
        };
        // 2024-07-01 14:00 UTC and 10:00, in seconds after the epoch.
        assert_eq!(nanos(0), 1_719_842_400 * 1_000_000_000);
        assert_eq!(nanos(1), 1_719_828_000 * 1_000_000_000);
        let i = b
            .column(2)
            .as_primitive::<IntervalMonthDayNanoType>()
            .value(0);
        assert_eq!(
            (i.months, i.days, i.nanoseconds),
            (0, 1, 7_384 * 1_000_000_000)
        );
    }

    #[test]
    fn missing_field_is_an_error() {
        let e = parse(b"1\n", &fmt(false), "t", &schema(), &[0, 1]).unwrap_err();
        assert_eq!(e.sqlstate(), "22P04");
    }
}

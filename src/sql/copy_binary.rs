//! `COPY table FROM STDIN (FORMAT binary)`: PostgreSQL's binary COPY file format, as
//! asyncpg's `copy_records_to_table` and psycopg's `copy.write_row` with set types send it.
//!
//! The format (PostgreSQL's COPY reference, "Binary Format"): an 11-byte signature
//! `PGCOPY\n\xff\r\n\0`, a 32-bit flags field (bit 16: OIDs included, which Weir refuses),
//! a 32-bit header-extension length and that many bytes; then one tuple per row: a 16-bit
//! field count (`-1` ends the data), and per field a 32-bit length (`-1` is NULL) and the
//! value in its type's binary send format. All integers are big-endian.
//!
//! Each value must be in the binary format of its column's type, as PostgreSQL requires;
//! the values are decoded with `postgres-types` (`FromSql`) and, for numeric,
//! `rust_decimal`.

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, IntervalMonthDayNano, SchemaRef, TimeUnit};
use datafusion::common::ScalarValue;
use postgres_types::{FromSql, Type};

use crate::error::{Error, Result};

/// The first bytes of every binary COPY stream.
const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";

/// The header flag that says each row starts with an OID.
const FLAGS_WITH_OIDS: u32 = 1 << 16;

/// A cursor over the COPY data that refuses reads past its end.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
    table: &'a str,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len());
        let Some(end) = end else {
            return Err(Error::data(
                "22P04",
                format!("unexpected EOF in COPY data (COPY {})", self.table),
            ));
        };
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn i16(&mut self) -> Result<i16> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Parses binary COPY data into one batch of `schema`, where `columns` are the target
/// columns in the data's order (the others are NULL).
///
/// # Errors
/// `22P04` for a bad signature, a row whose field count is not the number of target
/// columns, or data that ends early; `0A000` for data with OIDs; `22P03` ("incorrect
/// binary data format") for a value that is not its column type's binary form; `22003` for
/// a numeric that does not fit the column. Each names the table, row and column.
pub fn parse(
    data: &[u8],
    table: &str,
    schema: &SchemaRef,
    columns: &[usize],
) -> Result<RecordBatch> {
    let mut r = Reader { data, at: 0, table };
    if data.len() < SIGNATURE.len() || &data[..SIGNATURE.len()] != SIGNATURE {
        return Err(Error::data(
            "22P04",
            format!("COPY file signature not recognized (COPY {table})"),
        ));
    }
    r.take(SIGNATURE.len())?;
    let flags = r.i32()? as u32;
    if flags & FLAGS_WITH_OIDS != 0 {
        return Err(Error::data(
            "22P04",
            format!("invalid COPY file header (WITH OIDS) (COPY {table})"),
        ));
    }
    let extension = r.i32()?;
    let extension = usize::try_from(extension).map_err(|_| {
        Error::data(
            "22P04",
            format!("invalid COPY file header (wrong length) (COPY {table})"),
        )
    })?;
    r.take(extension)?;
    let mut values: Vec<Vec<ScalarValue>> = columns.iter().map(|_| Vec::new()).collect();
    let mut row = 0u64;
    loop {
        // PostgreSQL accepts the end of the data in place of the -1 trailer.
        if r.at == data.len() {
            break;
        }
        let count = r.i16()?;
        if count == -1 {
            if r.at != data.len() {
                return Err(Error::data(
                    "22P04",
                    format!("received copy data after EOF marker (COPY {table})"),
                ));
            }
            break;
        }
        row += 1;
        if usize::try_from(count).ok() != Some(columns.len()) {
            return Err(Error::data(
                "22P04",
                format!(
                    "row field count is {count}, expected {} (COPY {table}, line {row})",
                    columns.len()
                ),
            ));
        }
        for (j, &col) in columns.iter().enumerate() {
            let field = schema.field(col);
            let len = r.i32()?;
            let value = if len == -1 {
                ScalarValue::try_from(field.data_type())?
            } else {
                let len = usize::try_from(len).map_err(|_| {
                    Error::data(
                        "22P04",
                        format!(
                            "invalid field size (COPY {table}, line {row}, column {})",
                            field.name()
                        ),
                    )
                })?;
                let raw = r.take(len)?;
                decode(raw, field.data_type()).map_err(|e| match e {
                    Decode::Format(why) => Error::data(
                        "22P03",
                        format!(
                            "incorrect binary data format: {why} (COPY {table}, line {row}, column {})",
                            field.name()
                        ),
                    ),
                    Decode::Range(why) => Error::data(
                        "22003",
                        format!(
                            "{why} (COPY {table}, line {row}, column {})",
                            field.name()
                        ),
                    ),
                    Decode::Encoding => Error::data(
                        "22021",
                        format!(
                            "invalid byte sequence for encoding \"UTF8\" (COPY {table}, line {row}, column {})",
                            field.name()
                        ),
                    ),
                    Decode::Unsupported(what) => Error::not_supported(format!(
                        "COPY binary format: {what} (COPY {table}, line {row}, column {})",
                        field.name()
                    )),
                })?
            };
            values[j].push(value);
        }
    }
    let n = row as usize;
    let mut out: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| arrow::array::new_null_array(f.data_type(), n))
        .collect();
    for (j, column) in values.into_iter().enumerate() {
        let col = columns[j];
        if n > 0 {
            let array = ScalarValue::iter_to_array(column)?;
            out[col] = arrow::compute::cast(&array, schema.field(col).data_type())?;
        }
    }
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(n));
    // Nullable here: NOT NULL is checked by the engine with PostgreSQL's error.
    let schema = crate::common::schema::nullable_schema(schema);
    Ok(RecordBatch::try_new_with_options(schema, out, &options)?)
}

/// Why one value did not decode.
enum Decode {
    /// Not the type's binary form (`22P03`).
    Format(String),
    /// A valid value that the column cannot hold (`22003`).
    Range(String),
    /// Text that is not UTF-8 (`22021`).
    Encoding,
    /// A value Weir cannot hold, or a column type without a binary decoder here (`0A000`).
    Unsupported(String),
}

fn from_sql<'a, T: FromSql<'a>>(ty: &Type, raw: &'a [u8]) -> std::result::Result<T, Decode> {
    T::from_sql(ty, raw).map_err(|e| Decode::Format(e.to_string()))
}

/// The byte length of a fixed-size type's binary form, and its PostgreSQL name.
fn fixed_size(t: &DataType) -> Option<(usize, &'static str)> {
    Some(match t {
        DataType::Boolean => (1, "boolean"),
        DataType::Int16 => (2, "smallint"),
        DataType::Int32 => (4, "integer"),
        DataType::Int64 => (8, "bigint"),
        DataType::Float32 => (4, "real"),
        DataType::Float64 => (8, "double precision"),
        DataType::Date32 => (4, "date"),
        DataType::Timestamp(..) => (8, "timestamp"),
        DataType::Interval(_) => (16, "interval"),
        _ => return None,
    })
}

/// One value in the binary send format of `t`'s PostgreSQL type.
fn decode(raw: &[u8], t: &DataType) -> std::result::Result<ScalarValue, Decode> {
    if let Some((size, name)) = fixed_size(t)
        && raw.len() != size
    {
        return Err(Decode::Format(format!(
            "a {name} is {size} bytes, not {}",
            raw.len()
        )));
    }
    Ok(match t {
        DataType::Boolean => ScalarValue::Boolean(Some(from_sql(&Type::BOOL, raw)?)),
        DataType::Int16 => ScalarValue::Int16(Some(from_sql(&Type::INT2, raw)?)),
        DataType::Int32 => ScalarValue::Int32(Some(from_sql(&Type::INT4, raw)?)),
        DataType::Int64 => ScalarValue::Int64(Some(from_sql(&Type::INT8, raw)?)),
        DataType::Float32 => ScalarValue::Float32(Some(from_sql(&Type::FLOAT4, raw)?)),
        DataType::Float64 => ScalarValue::Float64(Some(from_sql(&Type::FLOAT8, raw)?)),
        DataType::Utf8 => ScalarValue::Utf8(Some(
            std::str::from_utf8(raw)
                .map_err(|_| Decode::Encoding)?
                .to_string(),
        )),
        DataType::Date32 => {
            let d: chrono::NaiveDate = from_sql(&Type::DATE, raw)?;
            let days = d
                .signed_duration_since(chrono::NaiveDate::default())
                .num_days();
            ScalarValue::Date32(Some(
                i32::try_from(days)
                    .map_err(|_| Decode::Range(format!("date out of range: \"{d}\"")))?,
            ))
        }
        DataType::Timestamp(unit, zone) => {
            let ts = if zone.is_some() {
                from_sql::<chrono::DateTime<chrono::Utc>>(&Type::TIMESTAMPTZ, raw)?.naive_utc()
            } else {
                from_sql::<chrono::NaiveDateTime>(&Type::TIMESTAMP, raw)?
            };
            let utc = ts.and_utc();
            let value = match unit {
                TimeUnit::Second => Some(utc.timestamp()),
                TimeUnit::Millisecond => Some(utc.timestamp_millis()),
                TimeUnit::Microsecond => Some(utc.timestamp_micros()),
                TimeUnit::Nanosecond => utc.timestamp_nanos_opt(),
            }
            .ok_or_else(|| Decode::Range(format!("timestamp out of range: \"{ts}\"")))?;
            match unit {
                TimeUnit::Second => ScalarValue::TimestampSecond(Some(value), zone.clone()),
                TimeUnit::Millisecond => {
                    ScalarValue::TimestampMillisecond(Some(value), zone.clone())
                }
                TimeUnit::Microsecond => {
                    ScalarValue::TimestampMicrosecond(Some(value), zone.clone())
                }
                TimeUnit::Nanosecond => ScalarValue::TimestampNanosecond(Some(value), zone.clone()),
            }
        }
        DataType::Decimal128(precision, scale) => {
            // numeric_send's sign word (bytes 4..6): 0xC000 NaN, 0xD000 and 0xF000 ±Infinity.
            match raw.get(4..6) {
                Some([0xC0, 0x00]) => {
                    return Err(Decode::Unsupported(
                        "numeric NaN (Weir's numeric has no NaN)".into(),
                    ));
                }
                Some([0xD0 | 0xF0, 0x00]) => {
                    return Err(Decode::Range(format!(
                        "numeric field overflow: a field with precision {precision}, scale {scale} cannot hold an infinite value"
                    )));
                }
                _ => {}
            }
            // Read as text (rust_decimal's 96 bits hold fewer digits than a column can),
            // then cast to the column's type, rounded to its scale as numeric_recv does.
            let text = numeric_binary_text(raw).map_err(|e| Decode::Range(e.to_string()))?;
            ScalarValue::Utf8(Some(text.clone()))
                .cast_to(&DataType::Decimal128(*precision, *scale))
                .map_err(|_| {
                    Decode::Range(format!(
                        "numeric field overflow: a field with precision {precision}, scale {scale} cannot hold {text}"
                    ))
                })?
        }
        DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano) => {
            // PostgreSQL's interval_send: microseconds (int64), days (int32), months (int32).
            let [
                m0,
                m1,
                m2,
                m3,
                m4,
                m5,
                m6,
                m7,
                d0,
                d1,
                d2,
                d3,
                o0,
                o1,
                o2,
                o3,
            ] = raw
            else {
                return Err(Decode::Format(format!(
                    "an interval is 16 bytes, not {}",
                    raw.len()
                )));
            };
            let micros = i64::from_be_bytes([*m0, *m1, *m2, *m3, *m4, *m5, *m6, *m7]);
            let days = i32::from_be_bytes([*d0, *d1, *d2, *d3]);
            let months = i32::from_be_bytes([*o0, *o1, *o2, *o3]);
            let nanos = micros
                .checked_mul(1000)
                .ok_or_else(|| Decode::Range("interval out of range".into()))?;
            ScalarValue::IntervalMonthDayNano(Some(IntervalMonthDayNano::new(months, days, nanos)))
        }
        other => return Err(Decode::Unsupported(format!("columns of type {other}"))),
    })
}

/// The text of a `numeric` in PostgreSQL's binary form (`numeric_send`: digit count, weight
/// of the first base-10000 digit, sign, display scale, then the digits).
///
/// # Errors
/// `22P03` for a truncated value; `0A000` for NaN and the infinities (Weir's `numeric`
/// holds neither).
pub fn numeric_binary_text(b: &[u8]) -> crate::error::Result<String> {
    let bad = || Error::data("22P03", "invalid binary numeric parameter");
    let word = |i: usize| -> crate::error::Result<i16> {
        b.get(i..i + 2)
            .map(|w| i16::from_be_bytes([w[0], w[1]]))
            .ok_or_else(bad)
    };
    let (ndigits, weight, sign, dscale) = (word(0)?, word(2)?, word(4)? as u16, word(6)?);
    if sign == 0xC000 || sign == 0xD000 || sign == 0xF000 {
        return Err(Error::not_supported(
            "numeric NaN and infinity parameters (Weir's numeric holds neither)",
        ));
    }
    let digits = (0..usize::try_from(ndigits).map_err(|_| bad())?)
        .map(|k| word(8 + 2 * k))
        .collect::<crate::error::Result<Vec<i16>>>()?;
    let digit = |w: i32| -> i16 {
        usize::try_from(w)
            .ok()
            .and_then(|k| digits.get(k).copied())
            .unwrap_or(0)
    };
    let mut out = String::new();
    if sign == 0x4000 {
        out.push('-');
    }
    // Integer part: base-10000 digits of weight `weight` down to 0.
    if weight < 0 {
        out.push('0');
    } else {
        for w in 0..=i32::from(weight) {
            let d = digit(w);
            if w == 0 {
                out.push_str(&d.to_string());
            } else {
                out.push_str(&format!("{d:04}"));
            }
        }
    }
    if dscale > 0 {
        out.push('.');
        let mut frac = String::new();
        let mut w = i32::from(weight) + 1;
        while frac.len() < dscale as usize {
            frac.push_str(&format!("{:04}", digit(w)));
            w += 1;
        }
        frac.truncate(dscale as usize);
        out.push_str(&frac);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Field, Int32Type, Int64Type, Schema};
    use std::sync::Arc;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("qty", DataType::Int32, true),
            Field::new("price", DataType::Decimal128(10, 2), true),
        ]))
    }

    /// Binary COPY data written by hand from PostgreSQL's format description.
    fn data(rows: &[Vec<Option<Vec<u8>>>]) -> Vec<u8> {
        let mut out = SIGNATURE.to_vec();
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes());
        for row in rows {
            out.extend_from_slice(&(row.len() as i16).to_be_bytes());
            for f in row {
                match f {
                    None => out.extend_from_slice(&(-1i32).to_be_bytes()),
                    Some(v) => {
                        out.extend_from_slice(&(v.len() as i32).to_be_bytes());
                        out.extend_from_slice(v);
                    }
                }
            }
        }
        out.extend_from_slice(&(-1i16).to_be_bytes());
        out
    }

    #[test]
    fn rows_with_nulls_into_chosen_columns() {
        let bytes = data(&[
            vec![
                Some(40i64.to_be_bytes().to_vec()),
                Some(b"fay".to_vec()),
                Some(9i32.to_be_bytes().to_vec()),
            ],
            vec![Some((-2i64).to_be_bytes().to_vec()), None, None],
        ]);
        let batch = parse(&bytes, "t", &schema(), &[0, 1, 2]).unwrap();
        assert_eq!(batch.num_rows(), 2);
        let ids = batch.column(0).as_primitive::<Int64Type>();
        assert_eq!((ids.value(0), ids.value(1)), (40, -2));
        assert_eq!(batch.column(1).as_string::<i32>().value(0), "fay");
        assert!(batch.column(1).is_null(1));
        assert_eq!(batch.column(2).as_primitive::<Int32Type>().value(0), 9);
        assert!(batch.column(3).is_null(0) && batch.column(3).is_null(1));
    }

    #[test]
    fn numeric_in_postgres_binary_form() {
        // 12.5 as numeric_send writes it: ndigits 2, weight 0, sign +, dscale 1, digits
        // 12 and 5000 (base 10000).
        let mut v = Vec::new();
        for x in [2i16, 0, 0, 1, 12, 5000] {
            v.extend_from_slice(&x.to_be_bytes());
        }
        let bytes = data(&[vec![Some(1i64.to_be_bytes().to_vec()), Some(v)]]);
        let batch = parse(&bytes, "t", &schema(), &[0, 3]).unwrap();
        let price = batch
            .column(3)
            .as_primitive::<arrow::datatypes::Decimal128Type>();
        assert_eq!(price.value(0), 1250);
    }

    /// numeric_send words for a value, then its text (worked out by hand: base-10000
    /// digits, the first of weight `weight`).
    #[test]
    fn numeric_binary_text_keeps_every_digit() {
        let text = |words: &[i16]| {
            let mut v = Vec::new();
            for x in words {
                v.extend_from_slice(&x.to_be_bytes());
            }
            numeric_binary_text(&v).unwrap()
        };
        // 12345678901234567891.5: 1234 5678 9012 3456 7891 . 5000.
        assert_eq!(
            text(&[6, 4, 0, 1, 1234, 5678, 9012, 3456, 7891, 5000]),
            "12345678901234567891.5"
        );
        // -0.000123: weight -1, digits 0001 2300, dscale 6.
        assert_eq!(text(&[2, -1, 0x4000, 6, 1, 2300]), "-0.000123");
        // 1e20: one digit 1 of weight 5 (10000^5), dscale 0.
        assert_eq!(text(&[1, 5, 0, 0, 1]), "100000000000000000000");
        // 0 with dscale 2.
        assert_eq!(text(&[0, 0, 0, 2]), "0.00");
    }

    #[test]
    fn wrong_width_and_wrong_type_are_errors() {
        let bytes = data(&[vec![Some(1i64.to_be_bytes().to_vec())]]);
        let e = parse(&bytes, "t", &schema(), &[0, 1]).unwrap_err();
        assert_eq!(e.sqlstate(), "22P04", "{e}");
        // A 4-byte int4 where the column is bigint.
        let bytes = data(&[vec![Some(1i32.to_be_bytes().to_vec())]]);
        let e = parse(&bytes, "t", &schema(), &[0]).unwrap_err();
        assert_eq!(e.sqlstate(), "22P03", "{e}");
        // Data after the trailer.
        let mut bytes = data(&[vec![Some(1i64.to_be_bytes().to_vec())]]);
        bytes.extend_from_slice(b"junk");
        let e = parse(&bytes, "t", &schema(), &[0]).unwrap_err();
        assert_eq!(e.sqlstate(), "22P04", "{e}");
        // Text that is not UTF-8.
        let bytes = data(&[vec![
            Some(1i64.to_be_bytes().to_vec()),
            Some(vec![0xff, 0xfe]),
        ]]);
        let e = parse(&bytes, "t", &schema(), &[0, 1]).unwrap_err();
        assert_eq!(e.sqlstate(), "22021", "{e}");
        // numeric Infinity (numeric_send: ndigits 0, weight 0, sign 0xD000, dscale 0).
        let inf = [0u8, 0, 0, 0, 0xD0, 0, 0, 0].to_vec();
        let bytes = data(&[vec![Some(1i64.to_be_bytes().to_vec()), Some(inf)]]);
        let e = parse(&bytes, "t", &schema(), &[0, 3]).unwrap_err();
        assert_eq!(e.sqlstate(), "22003", "{e}");
        let e = parse(b"PGCOPY\n", "t", &schema(), &[0]).unwrap_err();
        assert_eq!(e.sqlstate(), "22P04", "{e}");
        // Data that ends inside a field.
        let mut bytes = data(&[vec![Some(1i64.to_be_bytes().to_vec())]]);
        bytes.truncate(bytes.len() - 5);
        let e = parse(&bytes, "t", &schema(), &[0]).unwrap_err();
        assert_eq!(e.sqlstate(), "22P04", "{e}");
    }
}

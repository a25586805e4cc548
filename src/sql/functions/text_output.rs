//! PostgreSQL's text form of the values whose Arrow cast to text differs (PostgreSQL docs,
//! 8.1 "Numeric Types", 8.15.6 "Array Input and Output Syntax", 8.4 "Binary Data Types"):
//!
//! ```text
//!                            Arrow              PostgreSQL
//!  1::float8::text           1.0                1
//!  'Infinity'::float8::text  inf                Infinity
//!  1e20::float8::text        1e20               1e+20
//!  1.25::numeric::text       1.2500000000       1.25
//!  ARRAY[1, 2]::text         [1, 2]             {1,2}
//!  ARRAY['a b', NULL]::text  [a b, ]            {"a b",NULL}
//!  ARRAY[true]::text         [true]             {t}
//!  'hi'::bytea::text         hi                 \x6869
//! ```
//!
//! A cast of such a value to text (written, or added by type coercion as in `'x' || 1.5e0`)
//! is rewritten by [`crate::sql::semantics`] to [`TextOutput`]; the same forms are what a
//! client receives for these types, so a value and its text agree.
//!
//! A `numeric` cast to `double precision` or `real` is rewritten to [`NumericToFloat`]:
//! Arrow divides the integer by a power of ten in floating point, which can miss the nearest
//! float (`9.999999999999999::float8` gave `10`); PostgreSQL reads the decimal text, which is
//! correctly rounded.

use std::sync::Arc;

use arrow::array::timezone::Tz;
use arrow::array::{Array, ArrayRef, AsArray, Float32Array, Float64Array, StringArray};
use arrow::datatypes::{
    DataType, Decimal128Type, Float32Type, Float64Type, Time64MicrosecondType, TimeUnit,
};
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::server::handler::{pg_float, pg_float32, pg_numeric};
use crate::sql::semantics::{NUMERIC_MAX_PRECISION, shape_result};

/// Whether a cast from `t` to text is rewritten to [`TextOutput`]: floats, `numeric`,
/// arrays and `bytea`.
pub fn differs_from_arrow(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Float16
            | DataType::Float32
            | DataType::Float64
            | DataType::Decimal128(..)
            | DataType::List(_)
            | DataType::LargeList(_)
            | DataType::FixedSizeList(..)
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::Time32(_)
            | DataType::Time64(_)
    )
}

/// `pg_text_out(x)`: PostgreSQL's text of `x` (see the module docs), a `timestamptz` in an
/// array shown in the session's time zone; NULL stays NULL. Returns `text`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TextOutput {
    /// The session's time zone in Arrow's form; `None` for UTC.
    zone: Option<String>,
    signature: Signature,
}

impl TextOutput {
    /// The function's name.
    pub const NAME: &'static str = "pg_text_out";

    /// The function showing `timestamptz` elements in `zone` (Arrow's form; `None` for UTC).
    pub fn new(zone: Option<String>) -> Self {
        TextOutput {
            zone,
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for TextOutput {
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
        let array = args.args[0].to_array(args.number_rows)?;
        let zone: Option<Tz> = self.zone.as_deref().map(str::parse).transpose()?;
        let out = texts(array.as_ref(), zone.as_ref(), false)?;
        shape_result(&args.args, Arc::new(out))
    }
}

/// PostgreSQL's text of each value of `array`; `element` when the values are an array's
/// elements (booleans print `t`/`f` there, as in `array_out`).
///
/// # Errors
/// Arrow's cast errors for a type without a text form.
pub fn texts(array: &dyn Array, zone: Option<&Tz>, element: bool) -> Result<StringArray> {
    Ok(match array.data_type() {
        DataType::Float64 => array
            .as_primitive::<Float64Type>()
            .iter()
            .map(|v| v.map(pg_float))
            .collect(),
        DataType::Float32 => array
            .as_primitive::<Float32Type>()
            .iter()
            .map(|v| v.map(pg_float32))
            .collect(),
        DataType::Float16 => {
            let wide = arrow::compute::cast(array, &DataType::Float32)?;
            return texts(wide.as_ref(), zone, element);
        }
        DataType::Decimal128(p, s) => array
            .as_primitive::<Decimal128Type>()
            .iter()
            .map(|v| v.map(|v| pg_numeric(v, *s, *p == NUMERIC_MAX_PRECISION)))
            .collect(),
        DataType::Boolean if element => array
            .as_boolean()
            .iter()
            .map(|v| v.map(|b| if b { "t" } else { "f" }))
            .collect(),
        DataType::Interval(_) => super::datetime_input::interval_text_array(array)?,
        DataType::Timestamp(..) => super::datetime_input::timestamp_text_array(array, zone)?,
        DataType::Time32(_) | DataType::Time64(_) => {
            let us = arrow::compute::cast(array, &DataType::Time64(TimeUnit::Microsecond))?;
            us.as_primitive::<Time64MicrosecondType>()
                .iter()
                .map(|v| v.map(time_out))
                .collect()
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            let bytes = arrow::compute::cast(array, &DataType::LargeBinary)?;
            bytes
                .as_binary::<i64>()
                .iter()
                .map(|v| v.map(bytea_hex))
                .collect()
        }
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            array_texts(
                list.values().as_ref(),
                list.offsets().iter().copied(),
                list,
                zone,
            )?
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            array_texts(
                list.values().as_ref(),
                list.offsets().iter().copied(),
                list,
                zone,
            )?
        }
        DataType::FixedSizeList(_, n) => {
            let list = array.as_fixed_size_list();
            let n = usize::try_from(*n).unwrap_or(0);
            let offsets = (0..=list.len()).map(|i| i * n);
            array_texts(list.values().as_ref(), offsets, list, zone)?
        }
        DataType::Utf8 => array.as_string::<i32>().clone(),
        _ => {
            let text = arrow::compute::cast(array, &DataType::Utf8)?;
            text.as_string::<i32>().clone()
        }
    })
}

/// PostgreSQL's text of a time of day `micros` microseconds after midnight:
/// `HH:MM:SS`, then the fraction without trailing zeros when it is not zero (`time_out`).
pub fn time_out(micros: i64) -> String {
    let (seconds, fraction) = (micros.div_euclid(1_000_000), micros.rem_euclid(1_000_000));
    let mut out = format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    if fraction != 0 {
        let digits = format!("{fraction:06}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    out
}

/// `bytea` output in PostgreSQL's default `hex` format: `\x` and two lowercase hex digits
/// per byte.
fn bytea_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(2 + 2 * bytes.len());
    out.push_str("\\x");
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The `{...}` text of each list of `lists`, whose elements are `values[offsets[i]..
/// offsets[i + 1]]`: elements joined by `,`, `NULL` for a NULL element, nested arrays as
/// they are, other elements double-quoted when `array_out` quotes them.
fn array_texts<O>(
    values: &dyn Array,
    offsets: impl Iterator<Item = O>,
    lists: &dyn Array,
    zone: Option<&Tz>,
) -> Result<StringArray>
where
    O: TryInto<usize> + Copy,
{
    let nested = matches!(
        values.data_type(),
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..)
    );
    let elements = texts(values, zone, true)?;
    let bounds: Vec<usize> = offsets
        .map(|o| {
            o.try_into()
                .map_err(|_| DataFusionError::Internal("negative list offset".into()))
        })
        .collect::<Result<_>>()?;
    Ok(bounds
        .windows(2)
        .enumerate()
        .map(|(row, w)| {
            if lists.is_null(row) {
                return None;
            }
            let mut out = String::from("{");
            for i in w[0]..w[1] {
                if i > w[0] {
                    out.push(',');
                }
                if elements.is_null(i) {
                    out.push_str("NULL");
                } else if nested {
                    out.push_str(elements.value(i));
                } else {
                    push_element(&mut out, elements.value(i));
                }
            }
            out.push('}');
            Some(out)
        })
        .collect())
}

/// Appends one array element's text, in double quotes (`"` and `\` escaped by `\`) when it
/// is empty, is `NULL` in any case, or holds `"`, `\`, `{`, `}`, `,` or white space
/// (PostgreSQL's `array_out`).
fn push_element(out: &mut String, text: &str) {
    let quote = text.is_empty()
        || text.eq_ignore_ascii_case("null")
        || text
            .chars()
            .any(|c| matches!(c, '"' | '\\' | '{' | '}' | ',') || c.is_ascii_whitespace());
    if !quote {
        out.push_str(text);
        return;
    }
    out.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

/// `pg_numeric_float(x)`: a `numeric` as the nearest `double precision` (or `real`, for
/// [`NumericToFloat::real`]), as PostgreSQL's `numeric_float8` reads the decimal's text;
/// NULL stays NULL.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct NumericToFloat {
    real: bool,
    signature: Signature,
}

impl NumericToFloat {
    /// The function's name.
    pub const NAME: &'static str = "pg_numeric_float";

    /// The conversion to `double precision`, or to `real` when `real`.
    pub fn new(real: bool) -> Self {
        NumericToFloat {
            real,
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

/// Powers of ten exactly representable in a double (10^0 ..= 10^22).
const EXACT_POWERS: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The double nearest to `v`·10^-`scale`. When `v` and 10^`scale` are both exact doubles one
/// division is correctly rounded (Clinger's fast path, "How to Read Floating Point Numbers
/// Accurately", PLDI 1990); otherwise the decimal text is parsed, which is.
pub fn decimal_to_f64(v: i128, scale: i8) -> f64 {
    if let Ok(s) = usize::try_from(scale)
        && s < EXACT_POWERS.len()
        && v.unsigned_abs() <= 1 << 53
    {
        return v as f64 / EXACT_POWERS[s];
    }
    pg_numeric(v, scale, false).parse().unwrap_or(f64::NAN)
}

/// The `real` nearest to `v`·10^-`scale`, read from the decimal text (one rounding, not two).
pub fn decimal_to_f32(v: i128, scale: i8) -> f32 {
    if let Ok(s) = usize::try_from(scale)
        && s <= 10
        && v.unsigned_abs() <= 1 << 24
    {
        return v as f32 / EXACT_POWERS[s] as f32;
    }
    pg_numeric(v, scale, false).parse().unwrap_or(f32::NAN)
}

impl ScalarUDFImpl for NumericToFloat {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(if self.real {
            DataType::Float32
        } else {
            DataType::Float64
        })
    }

    /// NULL only for NULL: the result is nullable as the argument is (a cast's nullability,
    /// which the plan above it was derived with).
    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs<'_>,
    ) -> Result<arrow::datatypes::FieldRef> {
        let nullable = args.arg_fields.first().is_none_or(|f| f.is_nullable());
        Ok(std::sync::Arc::new(arrow::datatypes::Field::new(
            self.name(),
            self.return_type(&[])?,
            nullable,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let array = args.args[0].to_array(args.number_rows)?;
        let DataType::Decimal128(_, scale) = *array.data_type() else {
            return Err(DataFusionError::Plan(format!(
                "{} takes a numeric, not {}",
                Self::NAME,
                array.data_type()
            )));
        };
        let decimals = array.as_primitive::<Decimal128Type>();
        let out: ArrayRef = if self.real {
            Arc::new(
                decimals
                    .iter()
                    .map(|v| v.map(|v| decimal_to_f32(v, scale)))
                    .collect::<Float32Array>(),
            )
        } else {
            Arc::new(
                decimals
                    .iter()
                    .map(|v| v.map(|v| decimal_to_f64(v, scale)))
                    .collect::<Float64Array>(),
            )
        };
        shape_result(&args.args, out)
    }
}

/// `pg_bytea_in(text)`: text read as PostgreSQL's `byteain` reads it (docs, 8.4 "Binary Data
/// Types"): `\x` then pairs of hex digits (white space between pairs allowed), or the escape
/// format, where `\\` is a backslash and `\ooo` an octal byte; NULL stays NULL. Arrow's
/// cast takes the text's own bytes (`'\x00ff'` was six bytes, not two).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ByteaInput {
    signature: Signature,
}

impl Default for ByteaInput {
    fn default() -> Self {
        ByteaInput {
            signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
        }
    }
}

impl ByteaInput {
    /// The function's name.
    pub const NAME: &'static str = "pg_bytea_in";
}

/// The bytes of `bytea` input text `s` (see [`ByteaInput`]).
///
/// # Errors
/// PostgreSQL's: `22023` `invalid hexadecimal digit: "z"` and `invalid hexadecimal data:
/// odd number of digits`; `22P02` `invalid input syntax for type bytea`.
pub fn bytea_in(s: &str) -> std::result::Result<Vec<u8>, crate::error::Error> {
    use crate::error::Error;
    if let Some(hex) = s.strip_prefix("\\x") {
        let mut out = Vec::with_capacity(hex.len() / 2);
        let mut chars = hex.chars();
        let digit = |c: char| {
            c.to_digit(16)
                .ok_or_else(|| Error::data("22023", format!("invalid hexadecimal digit: \"{c}\"")))
        };
        // White space may stand between pairs of digits (PostgreSQL's `hex_decode`).
        while let Some(high) = chars.next() {
            if high.is_ascii_whitespace() {
                continue;
            }
            let high = digit(high)?;
            let Some(low) = chars.next() else {
                return Err(Error::data(
                    "22023",
                    "invalid hexadecimal data: odd number of digits",
                ));
            };
            out.push((high * 16 + digit(low)?) as u8);
        }
        return Ok(out);
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
        } else if bytes.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else if let Some(octal) = bytes.get(i + 1..i + 4)
            && matches!(octal[0], b'0'..=b'3')
            && octal[1..].iter().all(|b| matches!(b, b'0'..=b'7'))
        {
            out.push(octal.iter().fold(0u8, |acc, b| acc * 8 + (b - b'0')));
            i += 4;
        } else {
            return Err(Error::data("22P02", "invalid input syntax for type bytea"));
        }
    }
    Ok(out)
}

impl ScalarUDFImpl for ByteaInput {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Binary)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let array = args.args[0].to_array(args.number_rows)?;
        let out: arrow::array::BinaryArray = array
            .as_string::<i32>()
            .iter()
            .map(|v| {
                v.map(bytea_in)
                    .transpose()
                    .map_err(|e| DataFusionError::External(Box::new(e)))
            })
            .collect::<Result<_>>()?;
        shape_result(&args.args, Arc::new(out))
    }
}

/// `octet_length(text | bytea)`: the number of bytes (`integer`), PostgreSQL's
/// `octet_length` of text and of a `bytea`, and its `length` and `char_length` of a `bytea`
/// (docs, 9.5 "Binary String Functions"; [`crate::sql::semantics`] gives those calls of a
/// `bytea` to this function). It replaces DataFusion's `octet_length`, which takes text only;
/// DataFusion's `length` of a `bytea` read the bytes as UTF-8 text and counted characters
/// (`'\xc3a9'` was 1, `'\xff'` an error). [`OctetLength::bits`] is `bit_length(text |
/// bytea)`: 8 times as many (DataFusion's `bit_length` takes text only).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct OctetLength {
    signature: Signature,
    /// Counts bits (`bit_length`), not bytes.
    bits: bool,
}

impl OctetLength {
    /// `bit_length(text | bytea)`: the number of bits (`integer`), 8 per byte.
    pub fn bits() -> Self {
        OctetLength {
            bits: true,
            ..OctetLength::default()
        }
    }
}

impl Default for OctetLength {
    fn default() -> Self {
        OctetLength {
            bits: false,
            signature: Signature::uniform(
                1,
                vec![
                    DataType::Utf8,
                    DataType::LargeUtf8,
                    DataType::Utf8View,
                    DataType::Binary,
                    DataType::LargeBinary,
                    DataType::BinaryView,
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for OctetLength {
    fn name(&self) -> &str {
        if self.bits {
            "bit_length"
        } else {
            "octet_length"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let array = args.args[0].to_array(args.number_rows)?;
        let array = match array.data_type() {
            DataType::Utf8View => arrow::compute::cast(&array, &DataType::Utf8)?,
            DataType::BinaryView => arrow::compute::cast(&array, &DataType::Binary)?,
            _ => array,
        };
        // Bytes, for text as for `bytea` (Arrow's `length` counts a string's bytes).
        let out = if self.bits {
            arrow::compute::kernels::length::bit_length(&array)?
        } else {
            arrow::compute::kernels::length::length(&array)?
        };
        let out = arrow::compute::cast(&out, &DataType::Int32)?;
        shape_result(&args.args, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_elements_are_quoted_as_array_out_quotes_them() {
        let mut out = String::new();
        for e in [
            "a",
            "a b",
            "",
            "NULL",
            "null",
            "x\"y",
            "back\\slash",
            "{",
            "1,2",
            "é",
        ] {
            push_element(&mut out, e);
            out.push('|');
        }
        assert_eq!(
            out,
            r#"a|"a b"|""|"NULL"|"null"|"x\"y"|"back\\slash"|"{"|"1,2"|é|"#
        );
    }

    #[test]
    fn numerics_convert_to_the_nearest_float() {
        // 9.999999999999999 lies 0.78e-15 above the double 9.999999999999998224 and
        // 1e-15 below 10.
        assert_eq!(
            decimal_to_f64(9_999_999_999_999_999, 15),
            9.999_999_999_999_998
        );
        assert_eq!(decimal_to_f64(1, 1), 0.1);
        assert_eq!(decimal_to_f64(-15, 1), -1.5);
        assert_eq!(decimal_to_f64(12_345, -2), 1_234_500.0);
        assert_eq!(
            decimal_to_f64(123_456_789_123_456_789, 9),
            123_456_789.123_456_79
        );
        assert_eq!(decimal_to_f32(11, 1), 1.1_f32);
        assert_eq!(decimal_to_f32(123_456_789_123, 3), 123_456_789.123_f32);
        assert_eq!(bytea_hex(b"hi\x00"), "\\x686900");
        assert_eq!(time_out(37_230_250_000), "10:20:30.25");
        assert_eq!(time_out(37_230_000_000), "10:20:30");
    }

    #[test]
    fn bytea_input_reads_hex_and_escape_formats() {
        assert_eq!(bytea_in("\\x00ff").unwrap(), vec![0, 255]);
        assert_eq!(bytea_in("\\x00 FF").unwrap(), vec![0, 255]);
        assert_eq!(bytea_in("\\x").unwrap(), Vec::<u8>::new());
        assert_eq!(bytea_in("ab\\\\c\\001").unwrap(), b"ab\\c\x01".to_vec());
        assert!(bytea_in("\\x0").is_err());
        assert!(bytea_in("\\xzz").is_err());
        assert!(bytea_in("a\\9").is_err());
        assert!(bytea_in("a\\").is_err());
    }
}

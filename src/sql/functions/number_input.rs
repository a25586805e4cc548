//! PostgreSQL's input rules for `double precision`, `real` and `numeric` text where Arrow's
//! parsers differ (PostgreSQL docs, 8.1 "Numeric Types", and its `float8in`, `float4in` and
//! `numeric_in`):
//!
//! ```text
//!  '1e400'::float8      Arrow: Infinity     PostgreSQL: 22003 "1e400" is out of range for type double precision
//!  '1e-400'::float8     Arrow: 0            PostgreSQL: 22003 (a non-zero value that underflows)
//!  '1e5'::numeric       Arrow: refused      PostgreSQL: 100000
//!  '1.5E-3'::numeric    Arrow: refused      PostgreSQL: 0.0015
//! ```
//!
//! A cast from text to one of these types is rewritten by [`crate::sql::semantics`] to cast
//! `pg_number_text(s)` instead: float text passes unchanged once checked, numeric text in
//! exponent form is written out in positional form; anything else passes to Arrow's cast,
//! whose errors [`crate::error`] reports as PostgreSQL does.

use arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::Error;

/// The type a [`NumberText`] checks text for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NumberTarget {
    /// `double precision` (64-bit float).
    Double,
    /// `real` (32-bit float).
    Real,
    /// `numeric` (Weir's 128-bit decimal).
    Numeric,
}

impl NumberTarget {
    /// The target of a cast to `t`, if text casts to it are checked here.
    pub fn of(t: &DataType) -> Option<Self> {
        match t {
            DataType::Float64 => Some(NumberTarget::Double),
            DataType::Float32 => Some(NumberTarget::Real),
            DataType::Decimal128(..) => Some(NumberTarget::Numeric),
            _ => None,
        }
    }

    fn type_name(self) -> &'static str {
        match self {
            NumberTarget::Double => "double precision",
            NumberTarget::Real => "real",
            NumberTarget::Numeric => "numeric",
        }
    }
}

/// `pg_number_text(text)`: the text of a number in the form Arrow's cast to the target reads
/// as PostgreSQL does (see the module docs); NULL stays NULL.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct NumberText {
    target: NumberTarget,
    signature: Signature,
}

impl NumberText {
    /// The function's name.
    pub const NAME: &'static str = "pg_number_text";

    /// The function for casts to `target`.
    pub fn new(target: NumberTarget) -> Self {
        NumberText {
            target,
            signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
        }
    }

    /// `s` in the form Arrow's cast reads as PostgreSQL does (numeric exponent text written
    /// out positionally; anything Arrow refuses passed unchanged for it to refuse).
    ///
    /// # Errors
    /// 22003 for text out of the target's range.
    pub fn convert(&self, s: &str) -> Result<String> {
        let out_of_range = || {
            DataFusionError::External(Box::new(Error::data(
                "22003",
                format!(
                    "\"{s}\" is out of range for type {}",
                    self.target.type_name()
                ),
            )))
        };
        let t = s.trim();
        match self.target {
            NumberTarget::Double | NumberTarget::Real => {
                let infinite_text = t
                    .trim_start_matches(['+', '-'])
                    .to_ascii_lowercase()
                    .starts_with("inf");
                let (infinite, zero) = if self.target == NumberTarget::Double {
                    let Ok(v) = t.parse::<f64>() else {
                        return Ok(s.to_string());
                    };
                    (v.is_infinite(), v == 0.0)
                } else {
                    let Ok(v) = t.parse::<f32>() else {
                        return Ok(s.to_string());
                    };
                    (v.is_infinite(), v == 0.0)
                };
                // float8in: a finite text whose value overflows, or a non-zero one that
                // underflows to 0, is out of range.
                let nonzero_digits =
                    mantissa(t).is_some_and(|m| m.bytes().any(|b| (b'1'..=b'9').contains(&b)));
                if (infinite && !infinite_text) || (zero && nonzero_digits) {
                    return Err(out_of_range());
                }
                Ok(s.to_string())
            }
            NumberTarget::Numeric => {
                let written = positional(t);
                let text = written.as_deref().unwrap_or(t);
                // More integer digits than Weir's numeric holds (38): PostgreSQL's own format
                // holds them; Weir's cannot.
                if integer_digits(text).is_some_and(|n| n > NUMERIC_DIGITS) {
                    return Err(DataFusionError::External(Box::new(Error::data(
                        "22003",
                        "value overflows numeric format",
                    ))));
                }
                Ok(written.unwrap_or_else(|| s.to_string()))
            }
        }
    }
}

/// The digits Weir's `numeric` holds (`Decimal128`'s precision).
const NUMERIC_DIGITS: usize = 38;

/// The number of integer digits of positional number text (`-00123.45`: 3), leading zeros
/// not counted; `None` for other text.
fn integer_digits(t: &str) -> Option<usize> {
    let t = t.trim_start_matches(['+', '-']);
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    let well_formed = !(int.is_empty() && frac.is_empty())
        && int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit());
    well_formed.then(|| int.trim_start_matches('0').len())
}

/// The mantissa of `t` (before any exponent), without its sign.
fn mantissa(t: &str) -> Option<&str> {
    let t = t.trim_start_matches(['+', '-']);
    let m = t.split(['e', 'E']).next()?;
    (!m.is_empty() && m.bytes().all(|b| b.is_ascii_digit() || b == b'.')).then_some(m)
}

/// `1.5e3` as `1500`, `-2E-2` as `-0.02`: exponent form written out; `None` for text in
/// another form (left to Arrow). Exponents are bounded at ±1000 (beyond, the value is 0 or
/// past any numeric Weir holds).
fn positional(t: &str) -> Option<String> {
    let (m, e) = t.split_once(['e', 'E'])?;
    let exp: i64 = e.parse::<i64>().ok()?.clamp(-1000, 1000);
    let (sign, m) = match m.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", m.strip_prefix('+').unwrap_or(m)),
    };
    let (int, frac) = m.split_once('.').unwrap_or((m, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let digits = format!("{int}{frac}");
    let point = int.len() as i64 + exp;
    let body = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(usize::try_from(-point).ok()?))
    } else if point >= digits.len() as i64 {
        format!(
            "{digits}{}",
            "0".repeat(usize::try_from(point).ok()? - digits.len())
        )
    } else {
        let p = usize::try_from(point).ok()?;
        format!("{}.{}", &digits[..p], &digits[p..])
    };
    Some(format!("{sign}{body}"))
}

impl ScalarUDFImpl for NumberText {
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
        super::map_text(&args, |s| self.convert(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponent_forms_are_written_out() {
        assert_eq!(positional("1e5").as_deref(), Some("100000"));
        assert_eq!(positional("1.5E-3").as_deref(), Some("0.0015"));
        assert_eq!(positional("-2e-2").as_deref(), Some("-0.02"));
        assert_eq!(positional("+12.34e1").as_deref(), Some("123.4"));
        assert_eq!(positional(".5e1").as_deref(), Some("5"));
        assert_eq!(positional("123"), None);
        assert_eq!(positional("1e"), None);
        assert_eq!(positional("xe5"), None);
        let n = NumberText::new(NumberTarget::Numeric);
        assert!(n.convert("1e50").is_err());
        assert!(n.convert("1e100000").is_err());
        assert!(
            n.convert("123456789012345678901234567890123456789")
                .is_err()
        );
        assert_eq!(n.convert("1e37").unwrap().len(), 38);
        assert_eq!(n.convert("0001.5").unwrap(), "0001.5");
    }

    #[test]
    fn float_text_out_of_range() {
        let f = NumberText::new(NumberTarget::Double);
        assert!(f.convert("1e400").is_err());
        assert!(f.convert("-1e400").is_err());
        assert!(f.convert("1e-400").is_err());
        assert_eq!(f.convert(" Infinity").unwrap(), " Infinity");
        assert_eq!(f.convert("0e10").unwrap(), "0e10");
        assert_eq!(f.convert("1e308").unwrap(), "1e308");
        assert_eq!(f.convert("abc").unwrap(), "abc");
        let r = NumberText::new(NumberTarget::Real);
        assert!(r.convert("1e39").is_err());
        assert_eq!(r.convert("1e38").unwrap(), "1e38");
    }
}

/// `weir_float_digits(x)`: a `double precision` as the text of its 15 significant digits, a
/// `real` of its 6 (C's `%.15g` / `%.6g`, `DBL_DIG` / `FLT_DIG`), which is how PostgreSQL
/// casts a float to `numeric` (`float8_numeric`, `float4_numeric` in `numeric.c`):
/// `1e19::float8::numeric` is `10000000000000000000` and `12345678901.5::float8::numeric`
/// `12345678901.5`, not the float's exact binary value (`9999999999999999143.3...`). The
/// text is read by the `numeric` cast above it ([`NumberText`]). NULL stays NULL.
///
/// # Errors
/// `0A000` for NaN and the infinities (Weir's `numeric` holds neither).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct FloatDigits {
    signature: Signature,
}

impl FloatDigits {
    /// The function.
    pub fn new() -> Self {
        FloatDigits {
            signature: Signature::uniform(
                1,
                vec![DataType::Float32, DataType::Float64],
                Volatility::Immutable,
            ),
        }
    }
}

impl Default for FloatDigits {
    fn default() -> Self {
        Self::new()
    }
}

/// `v`'s text with `digits` significant digits, in exponent form (`1.50000000000000e1`).
fn float_digits(v: f64, digits: usize) -> Result<String> {
    if !v.is_finite() {
        let what = if v.is_nan() { "NaN" } else { "infinity" };
        return Err(DataFusionError::External(Box::new(Error::not_supported(
            format!("cannot convert {what} to numeric"),
        ))));
    }
    Ok(format!("{:.*e}", digits - 1, v))
}

impl ScalarUDFImpl for FloatDigits {
    fn name(&self) -> &str {
        "weir_float_digits"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        use arrow::array::{Array, AsArray, StringArray};
        use arrow::datatypes::{Float32Type, Float64Type};
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let a = &arrays[0];
        let out: StringArray = match a.data_type() {
            DataType::Float32 => a
                .as_primitive::<Float32Type>()
                .iter()
                .map(|v| v.map(|v| float_digits(f64::from(v), 6)).transpose())
                .collect::<Result<_>>()?,
            _ => {
                let a = arrow::compute::cast(a, &DataType::Float64)?;
                a.as_primitive::<Float64Type>()
                    .iter()
                    .map(|v| v.map(|v| float_digits(v, 15)).transpose())
                    .collect::<Result<_>>()?
            }
        };
        crate::sql::semantics::shape_result(&args.args, std::sync::Arc::new(out))
    }
}

#[cfg(test)]
mod float_digits_tests {
    use super::*;

    #[test]
    fn floats_keep_their_significant_digits_only() {
        // PostgreSQL 15: 1e19::float8::numeric is 10000000000000000000, (1e15 + 0.5)::float8
        // ::numeric 1000000000000000 (its 16th digit is dropped), 12345678901.5::float8
        // ::numeric 12345678901.5.
        assert_eq!(float_digits(1e19, 15).unwrap(), "1.00000000000000e19");
        assert_eq!(float_digits(1e15 + 0.5, 15).unwrap(), "1.00000000000000e15");
        assert_eq!(
            float_digits(12345678901.5, 15).unwrap(),
            "1.23456789015000e10"
        );
        assert_eq!(float_digits(0.1, 6).unwrap(), "1.00000e-1");
        assert!(float_digits(f64::NAN, 15).is_err());
    }
}

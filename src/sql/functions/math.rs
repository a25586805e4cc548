//! PostgreSQL's mathematical functions that DataFusion lacks or names differently (PostgreSQL
//! docs, 9.3 "Mathematical Functions and Operators"):
//!
//! ```text
//!  ceiling(x)      DataFusion's ceil (same result), under PostgreSQL's other name
//!  sign(x)         DataFusion's signum: -1, 0 or +1
//!  mod(y, x)       y % x: the remainder, with the dividend's sign; integers and numeric
//!                  (PostgreSQL has no mod of double precision: 42883)
//!  round(x)        double precision: to the nearest integer, ties to even (`rint`);
//!                  numeric: half away from zero, scale 0
//!  round(x, n)     numeric only: to n decimals (n < 0: to 10^-n), scale max(n, 0)
//!  trunc(x)        towards zero; trunc(x, n) as round(x, n)
//! ```

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal128Array, Float64Array};
use arrow::datatypes::{DataType, Decimal128Type, Field, FieldRef, Float64Type, Int64Type, i256};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::type_coercion::binary::BinaryTypeCoercer;
use datafusion::logical_expr::{
    ColumnarValue, Operator, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};

use crate::error::Error;
use crate::sql::semantics::{NUMERIC_MAX_PRECISION, div_round, ours};
use datafusion::prelude::SessionContext;

/// Registers `ceiling`, `sign`, `mod`, `round` and `trunc` in `ctx` (the last two in place of
/// DataFusion's, which round halves of `double precision` away from zero and keep a
/// `numeric`'s scale).
pub fn register(ctx: &SessionContext) {
    for name in ["round", "trunc"] {
        ctx.deregister_udf(name);
    }
    ctx.register_udf(ScalarUDF::new_from_impl(PgRound::new(false)));
    ctx.register_udf(ScalarUDF::new_from_impl(PgRound::new(true)));
    let ceil = datafusion::functions::math::ceil();
    ctx.register_udf(ceil.as_ref().clone().with_aliases(["ceiling"]));
    let signum = datafusion::functions::math::signum();
    ctx.register_udf(signum.as_ref().clone().with_aliases(["sign"]));
    ctx.register_udf(ScalarUDF::new_from_impl(PgMod::new()));
    // PostgreSQL's `variance` is `var_samp`.
    let var_samp = datafusion::functions_aggregate::variance::var_samp_udaf();
    ctx.register_udaf(var_samp.as_ref().clone().with_aliases(["variance"]));
}

/// `mod(y, x)`: `y % x` for two integers or `numeric`s (their common type, as `%` coerces
/// them: `mod(7, 2.5)` is `numeric` 2.0). Errors: 22012 `division by zero` for a zero `x`;
/// 42883 for other argument types.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgMod {
    signature: Signature,
}

impl PgMod {
    /// The function (stateless).
    pub fn new() -> Self {
        PgMod {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl Default for PgMod {
    fn default() -> Self {
        Self::new()
    }
}

/// Integers, `numeric` and the NULL type (an untyped NULL argument).
fn exact_number(t: &DataType) -> bool {
    t.is_integer() || matches!(t, DataType::Decimal128(..) | DataType::Null)
}

impl ScalarUDFImpl for PgMod {
    fn name(&self) -> &str {
        "mod"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let refused = || {
            let types: Vec<String> = arg_types.iter().map(ToString::to_string).collect();
            DataFusionError::Plan(format!(
                "No function matches the given name and argument types 'mod({})'.",
                types.join(", ")
            ))
        };
        let [a, b] = arg_types else {
            return Err(refused());
        };
        if !exact_number(a) || !exact_number(b) {
            return Err(refused());
        }
        let (a, b) = match (a, b) {
            (DataType::Null, DataType::Null) => (DataType::Int32, DataType::Int32),
            (DataType::Null, t) | (t, DataType::Null) => (t.clone(), t.clone()),
            (a, b) => BinaryTypeCoercer::new(a, &Operator::Modulo, b).get_input_types()?,
        };
        Ok(vec![a, b])
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [a, b] => BinaryTypeCoercer::new(a, &Operator::Modulo, b).get_result_type(),
            _ => Err(DataFusionError::Internal("mod takes two arguments".into())),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out = arrow::compute::kernels::numeric::rem(&arrays[0], &arrays[1])?;
        let out = if out.data_type() == args.return_field.data_type() {
            out
        } else {
            arrow::compute::cast(&out, args.return_field.data_type())?
        };
        Ok(ColumnarValue::Array(Arc::clone(&out)))
    }
}

/// `round(x [, n])` (`trunc: false`) and `trunc(x [, n])` as PostgreSQL defines them
/// (`dround`/`dtrunc` in its `float.c`, `numeric_round`/`numeric_trunc` in `numeric.c`):
///
/// ```text
///  round(double precision) -> double precision   nearest integer, ties to even (rint)
///  round(numeric)          -> numeric            half away from zero, scale 0
///  round(numeric, integer) -> numeric            n decimals (n < 0: to 10^-n), scale max(n, 0)
///  trunc(...)                                    the same shapes, towards zero
/// ```
///
/// A `real` or an integer argument is read as `double precision` (PostgreSQL's resolution;
/// `round(5, 1)` reads 5 as `numeric`). A constant `n` sets the result's scale; a column `n`
/// rounds each value at the argument's scale. Errors: 42883 for `round(double precision,
/// integer)` and other types; 22003 `numeric field overflow` when a rounded value passes 38
/// digits.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgRound {
    trunc: bool,
    signature: Signature,
}

impl PgRound {
    /// `round` (`trunc: false`) or `trunc`.
    pub fn new(trunc: bool) -> Self {
        PgRound {
            trunc,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// The result type for an argument of type `arg` and a constant `n` (`None`: absent or
    /// not constant).
    fn result_type(&self, arg: &DataType, n: Option<i64>, two_args: bool) -> Result<DataType> {
        match arg {
            DataType::Decimal128(p, s) => {
                let scale = match (two_args, n) {
                    (false, _) => 0,
                    (true, Some(n)) => n.clamp(0, i64::from(NUMERIC_MAX_PRECISION)) as i8,
                    (true, None) => *s,
                };
                let precision = if *p >= NUMERIC_MAX_PRECISION {
                    NUMERIC_MAX_PRECISION
                } else {
                    // Integer digits, the kept decimals, and a carry (9.5 rounds to 10).
                    let digits = i16::from(*p) - i16::from(*s) + i16::from(scale) + 1;
                    digits.clamp(1, i16::from(NUMERIC_MAX_PRECISION)) as u8
                };
                Ok(DataType::Decimal128(precision, scale))
            }
            _ => Ok(DataType::Float64),
        }
    }
}

impl ScalarUDFImpl for PgRound {
    fn name(&self) -> &str {
        if self.trunc { "trunc" } else { "round" }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let refused = || {
            let types: Vec<String> = arg_types
                .iter()
                .map(crate::sql::functions::pg_type_name)
                .collect();
            DataFusionError::Plan(format!(
                "No function matches the given name and argument types '{}({})'.",
                self.name(),
                types.join(", ")
            ))
        };
        match arg_types {
            [DataType::Decimal128(..)] => Ok(arg_types.to_vec()),
            [t] if t.is_numeric() || t.is_null() => Ok(vec![DataType::Float64]),
            [x, n] if n.is_integer() || n.is_null() => {
                let x = match x {
                    DataType::Decimal128(..) => x.clone(),
                    DataType::Null => DataType::Decimal128(NUMERIC_MAX_PRECISION, 10),
                    t if t.is_integer() => DataType::Decimal128(20, 0),
                    _ => return Err(refused()),
                };
                Ok(vec![x, DataType::Int64])
            }
            _ => Err(refused()),
        }
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.result_type(&arg_types[0], None, arg_types.len() == 2)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        let n = match args.scalar_arguments.get(1) {
            Some(Some(v)) => match v.cast_to(&DataType::Int64)? {
                ScalarValue::Int64(n) => n,
                _ => None,
            },
            _ => None,
        };
        let two = args.arg_fields.len() == 2;
        let t = self.result_type(args.arg_fields[0].data_type(), n, two)?;
        Ok(Arc::new(Field::new(self.name(), t, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out: ArrayRef = match (arrays[0].data_type(), args.return_field.data_type()) {
            (DataType::Decimal128(_, s), DataType::Decimal128(p, out_scale)) => {
                let x = arrays[0].as_primitive::<Decimal128Type>();
                let n = arrays.get(1).map(|n| n.as_primitive::<Int64Type>());
                let limit = i256::from_i128(10).wrapping_pow(u32::from(*p));
                let overflow = || ours(Error::data("22003", "numeric field overflow"));
                let mut out = Vec::with_capacity(x.len());
                for i in 0..x.len() {
                    let places = match n {
                        None => Some(0),
                        Some(n) if n.is_null(i) => None,
                        Some(n) => Some(n.value(i)),
                    };
                    let (Some(places), true) = (places, x.is_valid(i)) else {
                        out.push(None);
                        continue;
                    };
                    let v = self
                        .round_decimal(x.value(i), *s, places, *out_scale)
                        .ok_or_else(overflow)?;
                    if v.wrapping_abs() >= limit {
                        return Err(overflow());
                    }
                    out.push(Some(v.as_i128()));
                }
                Arc::new(Decimal128Array::from(out).with_precision_and_scale(*p, *out_scale)?)
            }
            _ => {
                let x = arrays[0].as_primitive::<Float64Type>();
                let f = if self.trunc {
                    f64::trunc
                } else {
                    f64::round_ties_even
                };
                Arc::new(x.unary::<_, Float64Type>(f)) as Arc<Float64Array>
            }
        };
        if args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)))
        {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
        } else {
            Ok(ColumnarValue::Array(out))
        }
    }
}

impl PgRound {
    /// `v`·10^-`scale` rounded (or truncated) to `places` decimals, as a value of scale
    /// `out_scale`; `None` on overflow.
    fn round_decimal(&self, v: i128, scale: i8, places: i64, out_scale: i8) -> Option<i256> {
        let v = i256::from_i128(v);
        let pow =
            |k: i64| -> Option<i256> { i256::from_i128(10).checked_pow(u32::try_from(k).ok()?) };
        // Drop `scale - places` digits (none when the value has no more decimals than kept).
        let drop = i64::from(scale) - places.max(-40);
        let (kept, kept_scale) = if drop > 0 {
            let Some(d) = pow(drop) else {
                // More digits dropped than any value holds: zero.
                return Some(i256::ZERO);
            };
            let q = if self.trunc {
                v.checked_div(d)?
            } else {
                div_round(v, d)?
            };
            (q, places.max(-40))
        } else {
            (v, i64::from(scale))
        };
        // Back to the result's scale (the decimals a constant `n` asks for, or the argument's).
        let shift = i64::from(out_scale) - kept_scale;
        if shift >= 0 {
            kept.checked_mul(pow(shift)?)
        } else {
            // A column `n` beyond the argument's scale: the value is already exact.
            kept.checked_div(pow(-shift)?)
        }
    }
}

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
//!  div(y, x)       numeric integer quotient, truncated towards zero
//!  factorial(n)    n! as numeric
//!  width_bucket(operand, low, high, count)   the bucket number, exact for numeric
//!  scale(x), min_scale(x), trim_scale(x)     a numeric's shown and least decimals
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
use crate::sql::semantics::{NUMERIC_MAX_PRECISION, display_scale, div_round, ours};
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
    ctx.register_udf(ScalarUDF::new_from_impl(PgDiv::new()));
    ctx.deregister_udf("factorial");
    ctx.register_udf(ScalarUDF::new_from_impl(Factorial::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(WidthBucket::new()));
    for kind in [
        NumericInfoKind::Scale,
        NumericInfoKind::MinScale,
        NumericInfoKind::TrimScale,
    ] {
        ctx.register_udf(ScalarUDF::new_from_impl(NumericInfo::new(kind)));
    }
    let ceil = datafusion::functions::math::ceil();
    ctx.register_udf(ceil.as_ref().clone().with_aliases(["ceiling"]));
    let signum = datafusion::functions::math::signum();
    ctx.register_udf(signum.as_ref().clone().with_aliases(["sign"]));
    ctx.register_udf(ScalarUDF::new_from_impl(PgMod::new()));
    // PostgreSQL's `variance` is `var_samp`.
    let var_samp = datafusion::functions_aggregate::variance::var_samp_udaf();
    ctx.register_udaf(var_samp.as_ref().clone().with_aliases(["variance"]));
}

/// PostgreSQL's 42883 for a call of `name` with argument types it has no version for.
pub(crate) fn no_function(name: &str, arg_types: &[DataType]) -> DataFusionError {
    let types: Vec<String> = arg_types
        .iter()
        .map(crate::sql::functions::pg_type_name)
        .collect();
    DataFusionError::Plan(format!(
        "No function matches the given name and argument types '{name}({})'.",
        types.join(", ")
    ))
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
        let refused = || no_function("mod", arg_types);
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
                    // A constant `n` fixes the decimals PostgreSQL prints (`round(6::numeric,
                    // 2)` is 6.00): one digit less marks the result as constrained, which
                    // keeps its trailing zeros (38 digits print as an unconstrained numeric).
                    if two_args && n.is_some() {
                        NUMERIC_MAX_PRECISION - 1
                    } else {
                        NUMERIC_MAX_PRECISION
                    }
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
        let refused = || no_function(self.name(), arg_types);
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
        crate::sql::semantics::shape_result(&args.args, out)
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

/// The display scale of a `numeric` value `v`·10^-`scale` of precision `p` ([`display_scale`]:
/// a constrained `numeric(p, s)` keeps `s`; an unconstrained one shows its decimals without
/// trailing zeros). `trimmed`: always the least decimals that hold the value (`min_scale`).
fn value_scale(v: i128, p: u8, scale: i8, trimmed: bool) -> i32 {
    let p = if trimmed { NUMERIC_MAX_PRECISION } else { p };
    i32::from(display_scale(v, p, scale).max(0))
}

/// Which numeric helper a [`NumericInfo`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NumericInfoKind {
    /// `scale(numeric) -> integer`: the decimals the value shows.
    Scale,
    /// `min_scale(numeric) -> integer`: the fewest decimals that hold the value exactly.
    MinScale,
    /// `trim_scale(numeric) -> numeric`: the value without trailing fractional zeros.
    TrimScale,
}

/// `scale`, `min_scale` and `trim_scale` of a `numeric` (PostgreSQL docs, 9.3, table 9.5). An
/// integer argument is read as `numeric`; NULL gives NULL.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct NumericInfo {
    kind: NumericInfoKind,
    signature: Signature,
}

impl NumericInfo {
    /// The function of `kind`.
    pub fn new(kind: NumericInfoKind) -> Self {
        NumericInfo {
            kind,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for NumericInfo {
    fn name(&self) -> &str {
        match self.kind {
            NumericInfoKind::Scale => "scale",
            NumericInfoKind::MinScale => "min_scale",
            NumericInfoKind::TrimScale => "trim_scale",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [t @ DataType::Decimal128(..)] => Ok(vec![t.clone()]),
            [t] if t.is_integer() => Ok(vec![DataType::Decimal128(20, 0)]),
            [DataType::Null] => Ok(vec![DataType::Decimal128(NUMERIC_MAX_PRECISION, 10)]),
            _ => Err(no_function(self.name(), arg_types)),
        }
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match (self.kind, &arg_types[0]) {
            (NumericInfoKind::TrimScale, DataType::Decimal128(_, s)) => {
                Ok(DataType::Decimal128(NUMERIC_MAX_PRECISION, *s))
            }
            (NumericInfoKind::TrimScale, _) => Ok(DataType::Decimal128(NUMERIC_MAX_PRECISION, 0)),
            _ => Ok(DataType::Int32),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let DataType::Decimal128(p, s) = *arrays[0].data_type() else {
            return Err(DataFusionError::Internal(format!(
                "{} called on {}",
                self.name(),
                arrays[0].data_type()
            )));
        };
        let x = arrays[0].as_primitive::<Decimal128Type>();
        let out: ArrayRef = match self.kind {
            NumericInfoKind::TrimScale => Arc::new(
                x.clone()
                    .with_precision_and_scale(NUMERIC_MAX_PRECISION, s)?,
            ),
            kind => {
                let trimmed = kind == NumericInfoKind::MinScale;
                Arc::new(x.unary_opt::<_, arrow::datatypes::Int32Type>(|v| {
                    Some(value_scale(v, p, s, trimmed))
                }))
            }
        };
        crate::sql::semantics::shape_result(&args.args, out)
    }
}

/// `div(y, x)`: the integer quotient of two `numeric`s, truncated towards zero (PostgreSQL
/// docs, 9.3: `div(9, 4)` is 2, `div(-7.5, 2)` is -3), a `numeric` of scale 0. Integer
/// arguments are read as `numeric`. Errors: 22012 `division by zero`; 22003 past 38 digits.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgDiv {
    signature: Signature,
}

impl PgDiv {
    /// The function (stateless).
    pub fn new() -> Self {
        PgDiv {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl Default for PgDiv {
    fn default() -> Self {
        Self::new()
    }
}

/// `t` as `numeric`: decimals as they are, integers and NULL as `numeric(20, 0)`; `None` for
/// other types.
fn as_numeric(t: &DataType) -> Option<DataType> {
    match t {
        DataType::Decimal128(..) => Some(t.clone()),
        t if t.is_integer() || t.is_null() => Some(DataType::Decimal128(20, 0)),
        _ => None,
    }
}

impl ScalarUDFImpl for PgDiv {
    fn name(&self) -> &str {
        "div"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let converted: Option<Vec<DataType>> = arg_types.iter().map(as_numeric).collect();
        match converted {
            Some(types) if types.len() == 2 => Ok(types),
            _ => Err(no_function("div", arg_types)),
        }
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Decimal128(NUMERIC_MAX_PRECISION, 0))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (DataType::Decimal128(_, s1), DataType::Decimal128(_, s2)) =
            (arrays[0].data_type(), arrays[1].data_type())
        else {
            return Err(DataFusionError::Internal(
                "div called on non-numeric".into(),
            ));
        };
        let common = (*s1).max(*s2);
        let scale_up = |v: i128, s: i8| -> Option<i256> {
            i256::from_i128(v).checked_mul(i256::from_i128(10).checked_pow((common - s) as u32)?)
        };
        let overflow = || ours(Error::data("22003", "numeric field overflow"));
        let limit = i256::from_i128(10).wrapping_pow(u32::from(NUMERIC_MAX_PRECISION));
        let y = arrays[0].as_primitive::<Decimal128Type>();
        let x = arrays[1].as_primitive::<Decimal128Type>();
        let mut out = Vec::with_capacity(y.len());
        for i in 0..y.len() {
            if y.is_null(i) || x.is_null(i) {
                out.push(None);
                continue;
            }
            if x.value(i) == 0 {
                return Err(ours(Error::data("22012", "division by zero")));
            }
            let a = scale_up(y.value(i), *s1).ok_or_else(overflow)?;
            let b = scale_up(x.value(i), *s2).ok_or_else(overflow)?;
            // i256 division truncates towards zero, as PostgreSQL's div does.
            let q = a.checked_div(b).ok_or_else(overflow)?;
            if q.wrapping_abs() >= limit {
                return Err(overflow());
            }
            out.push(Some(q.as_i128()));
        }
        let out: ArrayRef = Arc::new(
            Decimal128Array::from(out).with_precision_and_scale(NUMERIC_MAX_PRECISION, 0)?,
        );
        crate::sql::semantics::shape_result(&args.args, out)
    }
}

/// `width_bucket(operand, low, high, count)`: the bucket of `operand` among `count` equal
/// buckets spanning [low, high) (PostgreSQL docs, 9.3; `width_bucket_numeric` and
/// `width_bucket_float8`): 0 below the range, `count + 1` at or past its end; `low > high`
/// numbers the buckets downwards. Of `numeric`s (integers read as `numeric`) exactly, of
/// `double precision` as PostgreSQL computes it. An integer result.
///
/// Errors (SQLSTATE 2201G): `count must be greater than zero`, `lower bound cannot equal
/// upper bound`, and for `double precision` `operand, lower bound, and upper bound cannot be
/// NaN` and `lower and upper bounds must be finite`; 22003 `integer out of range` for a
/// `count + 1` past `integer`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct WidthBucket {
    signature: Signature,
}

impl WidthBucket {
    /// The function (stateless).
    pub fn new() -> Self {
        WidthBucket {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl Default for WidthBucket {
    fn default() -> Self {
        Self::new()
    }
}

fn bucket_error(message: &str) -> DataFusionError {
    ours(Error::data("2201G", message))
}

/// The bucket of `operand` (module docs of [`WidthBucket`]), for exact values at one scale.
fn numeric_bucket(operand: i256, low: i256, high: i256, count: i32) -> Result<i32> {
    if count <= 0 {
        return Err(bucket_error("count must be greater than zero"));
    }
    if low == high {
        return Err(bucket_error("lower bound cannot equal upper bound"));
    }
    let past_end = || {
        count
            .checked_add(1)
            .ok_or_else(|| ours(Error::data("22003", "integer out of range")))
    };
    let (from, to, at) = if low < high {
        if operand < low {
            return Ok(0);
        }
        if operand >= high {
            return past_end();
        }
        (low, high, operand)
    } else {
        if operand > low {
            return Ok(0);
        }
        if operand <= high {
            return past_end();
        }
        // Counted downwards: mirror the range.
        (
            low.wrapping_neg(),
            high.wrapping_neg(),
            operand.wrapping_neg(),
        )
    };
    let overflow = || ours(Error::data("22003", "numeric field overflow"));
    let n = (at - from)
        .checked_mul(i256::from_i128(i128::from(count)))
        .ok_or_else(overflow)?;
    let q = n.checked_div(to - from).ok_or_else(overflow)?;
    Ok(q.as_i128() as i32 + 1)
}

/// The bucket of a `double precision` `operand` as PostgreSQL 15's `width_bucket_float8`.
fn float_bucket(operand: f64, low: f64, high: f64, count: i32) -> Result<i32> {
    if count <= 0 {
        return Err(bucket_error("count must be greater than zero"));
    }
    if operand.is_nan() || low.is_nan() || high.is_nan() {
        return Err(bucket_error(
            "operand, lower bound, and upper bound cannot be NaN",
        ));
    }
    if low.is_infinite() || high.is_infinite() {
        return Err(bucket_error("lower and upper bounds must be finite"));
    }
    if low == high {
        return Err(bucket_error("lower bound cannot equal upper bound"));
    }
    let past_end = || {
        count
            .checked_add(1)
            .ok_or_else(|| ours(Error::data("22003", "integer out of range")))
    };
    let c = f64::from(count);
    // count · (x - from) / (to - from) + 1 in double precision, then truncated, as
    // PostgreSQL 15 computes it (the + 1 can round 0.9999999999999999 + 1 up to 2:
    // width_bucket(0.3, 0.1, 0.5, 2) is 2); halved first when the span overflows; downwards
    // (from > to) the distances are taken from `from` the other way.
    let bucket = |from: f64, to: f64, x: f64| {
        let sign = if from < to { 1.0 } else { -1.0 };
        let raw = if (to - from).is_finite() {
            c * ((x - from) * sign) / ((to - from) * sign)
        } else {
            c * ((x / 2.0 - from / 2.0) * sign) / ((to / 2.0 - from / 2.0) * sign)
        };
        ((raw + 1.0) as i32).clamp(1, count)
    };
    if low < high {
        if operand < low {
            return Ok(0);
        }
        if operand >= high {
            return past_end();
        }
    } else {
        if operand > low {
            return Ok(0);
        }
        if operand <= high {
            return past_end();
        }
    }
    Ok(bucket(low, high, operand))
}

impl ScalarUDFImpl for WidthBucket {
    fn name(&self) -> &str {
        "width_bucket"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let refused = || no_function("width_bucket", arg_types);
        let [a, b, c, n] = arg_types else {
            return Err(refused());
        };
        if !(n.is_integer() || n.is_null()) {
            return Err(refused());
        }
        let bounds = [a, b, c];
        if bounds
            .iter()
            .any(|t| matches!(t, DataType::Float32 | DataType::Float64))
        {
            if !bounds.iter().all(|t| t.is_numeric() || t.is_null()) {
                return Err(refused());
            }
            return Ok(vec![
                DataType::Float64,
                DataType::Float64,
                DataType::Float64,
                DataType::Int64,
            ]);
        }
        let numeric: Option<Vec<DataType>> = bounds.iter().map(|t| as_numeric(t)).collect();
        let numeric = numeric.ok_or_else(refused)?;
        // One decimal type for the three, so their values compare at one scale.
        let scale = numeric
            .iter()
            .map(|t| match t {
                DataType::Decimal128(_, s) => *s,
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        let common = DataType::Decimal128(NUMERIC_MAX_PRECISION, scale);
        Ok(vec![
            common.clone(),
            common.clone(),
            common,
            DataType::Int64,
        ])
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let counts = arrays[3].as_primitive::<Int64Type>();
        let mut out = Vec::with_capacity(args.number_rows);
        for row in 0..args.number_rows {
            if arrays.iter().any(|a| a.is_null(row)) {
                out.push(None);
                continue;
            }
            let count = i32::try_from(counts.value(row))
                .map_err(|_| ours(Error::data("22003", "integer out of range")))?;
            let bucket = match arrays[0].data_type() {
                DataType::Float64 => {
                    let v = |i: usize| arrays[i].as_primitive::<Float64Type>().value(row);
                    float_bucket(v(0), v(1), v(2), count)?
                }
                _ => {
                    let v = |i: usize| {
                        i256::from_i128(arrays[i].as_primitive::<Decimal128Type>().value(row))
                    };
                    numeric_bucket(v(0), v(1), v(2), count)?
                }
            };
            out.push(Some(bucket));
        }
        let out: ArrayRef = Arc::new(arrow::array::Int32Array::from(out));
        crate::sql::semantics::shape_result(&args.args, out)
    }
}

/// `factorial(n)`: `n!` as a `numeric` (PostgreSQL's `numeric_fac`; DataFusion's is a
/// `bigint`, 22003 from 21!). Column: `numeric(38, 0)`; 33! is the largest that fits in 38
/// digits.
///
/// # Errors
/// `22003` "factorial of a negative number is undefined" for `n < 0` (PostgreSQL 15's
/// code); `22003` "value overflows numeric format" for `n > 33`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Factorial {
    signature: Signature,
}

impl Factorial {
    /// The function (stateless).
    pub fn new() -> Self {
        Factorial {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl Default for Factorial {
    fn default() -> Self {
        Self::new()
    }
}

/// `n!` in 128 bits; `None` past 33!.
fn factorial_of(n: i64) -> Option<i128> {
    (2..=n)
        .try_fold(1i128, |acc, k| acc.checked_mul(i128::from(k)))
        .filter(|v| *v < 10i128.pow(38))
}

impl ScalarUDFImpl for Factorial {
    fn name(&self) -> &str {
        "factorial"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [t] if t.is_integer() || t.is_null() => Ok(vec![DataType::Int64]),
            _ => Err(no_function("factorial", arg_types)),
        }
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Decimal128(NUMERIC_MAX_PRECISION, 0))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let n = arrays[0].as_primitive::<Int64Type>();
        let mut out = Vec::with_capacity(n.len());
        for v in n.iter() {
            out.push(match v {
                None => None,
                Some(v) if v < 0 => {
                    return Err(ours(Error::data(
                        "22003",
                        "factorial of a negative number is undefined",
                    )));
                }
                Some(v) => {
                    Some(factorial_of(v).ok_or_else(|| {
                        ours(Error::data("22003", "value overflows numeric format"))
                    })?)
                }
            });
        }
        let array: ArrayRef = Arc::new(
            Decimal128Array::from(out).with_precision_and_scale(NUMERIC_MAX_PRECISION, 0)?,
        );
        crate::sql::semantics::shape_result(&args.args, array)
    }
}

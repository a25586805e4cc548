//! PostgreSQL's evaluation rules where DataFusion's defaults differ: integer overflow is an
//! error, `numeric` arithmetic has bounded cost and PostgreSQL's result scales, `x op
//! ANY(array)` follows SQL's NULL rule, and `sum(bigint)` and `avg(integer)` are `numeric`.
//! Intervals and floats compare, group and sort by PostgreSQL's equality in
//! [`super::equal_keys`], a rule that runs after this one.
//!
//! ```text
//!  LogicalPlan ─► DataFusion analyzer (type coercion, ...) ─► PgSemantics (this module)
//!     a + b    (integers)          ─► int_add(a, b)        checked: 22003 "integer out of range"
//!     a * b    (numeric, 38 digits) ─► numeric_mul(a, b)    exact in 256 bits, rounded to scale
//!     a / b    (numeric)            ─► numeric_div(a, b)    rounded to PostgreSQL's decimals
//! ```
//!
//! The rewrites run after DataFusion's type coercion (so operand types are final) in every
//! plan a session executes or compiles into a materialized view, so `SELECT` and views agree.
//! Output names are kept (`a + b` stays the column's name).
//!
//! `numeric` (PostgreSQL docs, 8.1.2 "Arbitrary Precision Numbers"): Weir stores a `numeric`
//! as a 128-bit decimal of at most 38 digits; unconstrained `numeric` has scale 10. PostgreSQL
//! keeps every digit of a product; here a product whose exact scale does not fit is rounded
//! to [`NUMERIC_MAX_SCALE`] decimals (never fewer than its operands have), and a quotient is
//! rounded to the decimals PostgreSQL's `select_div_scale` gives its values (at least 16
//! significant digits), held in a column of [`NUMERIC_MAX_SCALE`] decimals unless its integer
//! digits need the room ([`numeric_div_scale`]). A result beyond 38 digits is error 22003,
//! never a wrap or a runaway.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Decimal128Array, Scalar};
use arrow::datatypes::{
    DataType, Decimal128Type, IntervalMonthDayNanoType, IntervalUnit, TimeUnit, i256,
};
use arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, DataFusionError, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    AggregateUDF, BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, SortExpr, TypeSignature, Volatility,
    WindowFunctionDefinition,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionContext;

use crate::error::Error;
use crate::sql::functions::datetime_input::{DateTimeText, Target, TimestampOutput};
use crate::sql::functions::float_sum::PgFloatSum;
use crate::sql::functions::int_avg::{PgIntAvg, PgNumericSum};

/// The most decimals a `numeric` product keeps when its exact scale does not fit in 38
/// digits, and the decimals of a `numeric` quotient's column (see [`numeric_div_scale`]).
pub const NUMERIC_MAX_SCALE: i8 = 20;

/// The most digits of a `numeric` (a 128-bit decimal).
pub const NUMERIC_MAX_PRECISION: u8 = 38;

/// Registers the functions and the analyzer rule of this module in `ctx`.
pub fn register(ctx: &SessionContext) {
    for op in [IntOp::Add, IntOp::Sub, IntOp::Mul, IntOp::Neg] {
        ctx.register_udf(ScalarUDF::new_from_impl(CheckedInt::new(op)));
    }
    ctx.register_udf(ScalarUDF::new_from_impl(NumericArith::new(NumOp::Mul)));
    ctx.register_udf(ScalarUDF::new_from_impl(NumericArith::new(NumOp::Div)));
    for op in [FloatOp::Add, FloatOp::Sub, FloatOp::Mul, FloatOp::Div] {
        ctx.register_udf(ScalarUDF::new_from_impl(FloatArith::new(op)));
    }
    ctx.register_udf(ScalarUDF::new_from_impl(IntervalScale::new(false)));
    ctx.register_udf(ScalarUDF::new_from_impl(IntervalScale::new(true)));
    ctx.register_udf(ScalarUDF::new_from_impl(IntervalOutput::new()));
    // `x::varchar(n)` is `varchar(x::varchar, n)` (`crate::sql::parse`): `left` by the name
    // PostgreSQL shows for the cast's column; `x::char(n)` is `bpchar(x::varchar, n)`, which
    // also drops trailing spaces.
    ctx.register_udf(
        datafusion::functions::unicode::left()
            .as_ref()
            .clone()
            .with_aliases(["varchar"]),
    );
    ctx.register_udf(ScalarUDF::new_from_impl(
        crate::sql::functions::bpchar::Bpchar::default(),
    ));
    {
        use datafusion::execution::FunctionRegistry;
        let state = ctx.state_ref();
        // Registering a planner cannot fail (SessionState's registry only pushes it).
        let _ = state
            .write()
            .register_expr_planner(Arc::new(IntervalTimesNumber));
    }
    ctx.register_udf(ScalarUDF::new_from_impl(IntervalCmpKey::new()));
    super::equal_keys::register(ctx);
    ctx.register_udf(ScalarUDF::new_from_impl(AnyOp::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(ArrayTextCompare::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(
        crate::sql::functions::array_cmp::ArrayContains::default(),
    ));
    ctx.register_udf(ScalarUDF::new_from_impl(OneRow::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(ArrayOrEmpty::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(CastNamed::new()));
    ctx.register_udf(crate::sql::temporal::WallClock::udf(
        crate::sql::temporal::PROC_TIME,
    ));
    ctx.register_udf(crate::sql::temporal::LookupSide::udf());
    for f in crate::sql::functions::session::SessionBound::all() {
        ctx.register_udwf(f);
    }
}

/// `weir_cast_named(value, type)`: `value` unchanged; the type's text only tells apart the
/// names of expressions that differ in a cast ([`crate::sql::names::name_casts`]).
#[derive(Debug, PartialEq, Eq, Hash)]
struct CastNamed {
    signature: Signature,
}

impl CastNamed {
    fn new() -> Self {
        CastNamed {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for CastNamed {
    fn name(&self) -> &str {
        crate::sql::names::CAST_NAMED_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        Ok(args.args[0].clone())
    }
}

/// The analyzer rules of a session: `INTERSECT ALL`/`EXCEPT ALL` by row counts
/// ([`super::set_ops`]), [`PgSumTypes`], [`PgOperandTypes`], DataFusion's, then [`PgSemantics`] on the coerced
/// types and DataFusion's type coercion again around its new result types, `EXISTS` and `IN`
/// over one-row aggregates ([`super::decorrelate::SingleRowSubqueries`]), values PostgreSQL calls equal as one key ([`super::equal_keys`]), `EXISTS` as a
/// value ([`super::decorrelate::ExistsAsValues`]), then the decorrelation of the scalar subqueries DataFusion cannot decorrelate
/// ([`super::decorrelate`]).
pub fn analyzer_rules() -> Vec<Arc<dyn AnalyzerRule + Send + Sync>> {
    let mut rules: Vec<Arc<dyn AnalyzerRule + Send + Sync>> = vec![
        Arc::new(super::set_ops::PgSetOperationTypes),
        Arc::new(super::set_ops::SetOperationsAll),
        Arc::new(PgSumTypes),
        Arc::new(PgOperandTypes),
    ];
    rules.extend(datafusion::optimizer::Analyzer::new().rules);
    rules.push(Arc::new(PgSemantics));
    // PgSemantics gives some expressions PostgreSQL's result types (a `numeric` quotient has
    // 20 decimals where DataFusion's has 14, `floor` of a `numeric` none): the expressions
    // around them were coerced for the old types (`a / 3 > 1` compared 20 decimals with 14,
    // an arrow error), so they are coerced again.
    rules.push(Arc::new(Recoerce(
        datafusion::optimizer::analyzer::type_coercion::TypeCoercion::new(),
    )));
    rules.push(Arc::new(super::decorrelate::SingleRowSubqueries));
    rules.push(Arc::new(super::equal_keys::EqualKeys));
    rules.push(Arc::new(super::decorrelate::ExistsAsValues));
    rules.push(Arc::new(super::decorrelate::DecorrelateScalarSubqueries));
    rules
}

/// DataFusion's type coercion, run again only on plans where [`PgSemantics`] gave an
/// expression a type of its own (a `numeric` quotient or product, `floor`/`ceil` of a
/// `numeric`): coercing a whole plan again costs more than linear time in a deep expression
/// (a chain of 400 `+` took 18 s instead of 0.7 s), so other plans skip it.
#[derive(Debug)]
struct Recoerce(datafusion::optimizer::analyzer::type_coercion::TypeCoercion);

impl AnalyzerRule for Recoerce {
    fn name(&self) -> &str {
        "weir_recoerce"
    }

    fn analyze(
        &self,
        plan: LogicalPlan,
        config: &ConfigOptions,
    ) -> datafusion::common::Result<LogicalPlan> {
        if retyped(&plan) {
            self.0.analyze(plan, config)
        } else {
            Ok(plan)
        }
    }
}

/// True when an expression of `plan` (or of its subqueries) calls one of the functions
/// whose result type differs from DataFusion's for the same operator.
fn retyped(plan: &LogicalPlan) -> bool {
    use datafusion::common::tree_node::TreeNodeRecursion;
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        let _ = node.apply_expressions(|e| {
            let _ = e.apply(|e| {
                if let Expr::ScalarFunction(f) = e
                    && matches!(
                        f.func.name(),
                        "numeric_div" | "numeric_mul" | "floor" | "ceil"
                    )
                {
                    found = true;
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            });
            Ok(if found {
                TreeNodeRecursion::Stop
            } else {
                TreeNodeRecursion::Continue
            })
        });
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    found
}

/// Wraps one of Weir's errors so it crosses DataFusion with its SQLSTATE.
pub(crate) fn ours(e: Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

fn out_of_range(t: &DataType) -> DataFusionError {
    let name = match t {
        DataType::Int16 => "smallint",
        DataType::Int32 => "integer",
        DataType::Int64 => "bigint",
        _ => "numeric",
    };
    ours(Error::data("22003", format!("{name} out of range")))
}

/// Returns a scalar when every argument was one (constant folding keeps constants small).
pub(crate) fn shape_result(
    args: &[ColumnarValue],
    out: ArrayRef,
) -> datafusion::common::Result<ColumnarValue> {
    if args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_))) && out.len() == 1 {
        Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
    } else {
        Ok(ColumnarValue::Array(out))
    }
}

// ---------------------------------------------------------------------------------------------
// Checked integer arithmetic

/// An integer operator whose overflow is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum IntOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Neg,
    Shl,
    Shr,
    /// The `integer` range check of an `integer` result computed as a `bigint` (`gcd`).
    Int4,
}

/// `int_add`, `int_sub`, `int_mul`, `int_div`, `int_mod` (two integers of one type) and
/// `int_neg` (one): integer arithmetic that raises 22003 `integer out of range`
/// (`smallint`/`bigint`) on overflow and 22012 on a zero divisor, as PostgreSQL's `int4pl`
/// and friends do, where DataFusion's operators wrap or widen.
///
/// `int_shl(a, n)` and `int_shr(a, n)`: `a << n` and `a >> n` in `a`'s type, the count taken
/// modulo the type's width as PostgreSQL's `int4shl` does on x86-64 (`smallint` is shifted
/// as an `integer` and truncated; DataFusion shifts in `bigint`, `2::int4 << 31` was
/// 4294967296 where PostgreSQL gives 0).
///
/// `int4_check(x)`: `x` (a `bigint`) unchanged, or 22003 `integer out of range` past
/// `integer`'s range, for functions DataFusion computes in `bigint` whose PostgreSQL result
/// is an `integer` (`gcd(-2147483648, 0)`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedInt {
    op: IntOp,
    signature: Signature,
}

impl CheckedInt {
    fn new(op: IntOp) -> Self {
        let arity = if matches!(op, IntOp::Neg | IntOp::Int4) {
            1
        } else {
            2
        };
        CheckedInt {
            op,
            signature: Signature::any(arity, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for CheckedInt {
    fn name(&self) -> &str {
        match self.op {
            IntOp::Add => "int_add",
            IntOp::Sub => "int_sub",
            IntOp::Mul => "int_mul",
            IntOp::Div => "int_div",
            IntOp::Rem => "int_mod",
            IntOp::Neg => "int_neg",
            IntOp::Shl => "int_shl",
            IntOp::Shr => "int_shr",
            IntOp::Int4 => "int4_check",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let t = arrays[0].data_type().clone();
        let result = match self.op {
            IntOp::Add => arrow::compute::kernels::numeric::add(&arrays[0], &arrays[1]),
            IntOp::Sub => arrow::compute::kernels::numeric::sub(&arrays[0], &arrays[1]),
            IntOp::Mul => arrow::compute::kernels::numeric::mul(&arrays[0], &arrays[1]),
            IntOp::Div => arrow::compute::kernels::numeric::div(&arrays[0], &arrays[1]),
            IntOp::Rem => arrow::compute::kernels::numeric::rem(&arrays[0], &arrays[1]),
            IntOp::Neg => arrow::compute::kernels::numeric::neg(&arrays[0]),
            IntOp::Shl | IntOp::Shr => shift(&arrays[0], &arrays[1], self.op == IntOp::Shl),
            IntOp::Int4 => {
                let v = arrays[0].as_primitive::<arrow::datatypes::Int64Type>();
                if v.iter().flatten().any(|x| i32::try_from(x).is_err()) {
                    return Err(out_of_range(&DataType::Int32));
                }
                Ok(Arc::clone(&arrays[0]))
            }
        };
        let out = result.map_err(|e| match e {
            ArrowError::ArithmeticOverflow(_) => out_of_range(&t),
            ArrowError::DivideByZero => ours(Error::data("22012", "division by zero")),
            other => DataFusionError::ArrowError(Box::new(other), None),
        })?;
        shape_result(&args.args, out)
    }
}

/// `a << n` (`left`) or `a >> n` over an integer array `a` and a count array `n` (any integer
/// type), in `a`'s type; see [`CheckedInt`].
fn shift(a: &ArrayRef, n: &ArrayRef, left: bool) -> Result<ArrayRef, ArrowError> {
    use arrow::array::PrimitiveArray;
    use arrow::datatypes::{Int16Type, Int32Type, Int64Type};
    let n = arrow::compute::cast(n, &DataType::Int64)?;
    let n = n.as_primitive::<Int64Type>();
    // The count as the machine takes it: its low bits (x86-64 masks it by the width).
    let count = |i: usize| n.value(i) as u32;
    let nulls = arrow::buffer::NullBuffer::union(a.nulls(), n.nulls());
    let out: ArrayRef = match a.data_type() {
        DataType::Int16 => {
            let a = a.as_primitive::<Int16Type>();
            let v = (0..a.len()).map(|i| {
                let x = i32::from(a.value(i));
                let r = if left {
                    x.wrapping_shl(count(i))
                } else {
                    x.wrapping_shr(count(i))
                };
                r as i16
            });
            Arc::new(PrimitiveArray::<Int16Type>::new(v.collect(), nulls))
        }
        DataType::Int32 => {
            let a = a.as_primitive::<Int32Type>();
            let v = (0..a.len()).map(|i| {
                if left {
                    a.value(i).wrapping_shl(count(i))
                } else {
                    a.value(i).wrapping_shr(count(i))
                }
            });
            Arc::new(PrimitiveArray::<Int32Type>::new(v.collect(), nulls))
        }
        DataType::Int64 => {
            let a = a.as_primitive::<Int64Type>();
            let v = (0..a.len()).map(|i| {
                if left {
                    a.value(i).wrapping_shl(count(i))
                } else {
                    a.value(i).wrapping_shr(count(i))
                }
            });
            Arc::new(PrimitiveArray::<Int64Type>::new(v.collect(), nulls))
        }
        other => {
            return Err(ArrowError::ComputeError(format!(
                "shift of a {other} is not an integer shift"
            )));
        }
    };
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// float arithmetic

/// A float operator whose overflow, underflow or zero divisor is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum FloatOp {
    Add,
    Sub,
    Mul,
    Div,
}

impl FloatOp {
    fn name(self) -> &'static str {
        match self {
            FloatOp::Add => "float_add",
            FloatOp::Sub => "float_sub",
            FloatOp::Mul => "float_mul",
            FloatOp::Div => "float_div",
        }
    }

    /// `a op b`; a NaN result is the positive NaN (`Infinity - Infinity` gives a NaN with the
    /// sign bit set on x86, which Arrow's total order would put before every number, where
    /// PostgreSQL has one NaN, above every number).
    fn apply64(self, a: f64, b: f64) -> f64 {
        let r = match self {
            FloatOp::Add => a + b,
            FloatOp::Sub => a - b,
            FloatOp::Mul => a * b,
            FloatOp::Div => a / b,
        };
        if r.is_nan() { f64::NAN } else { r }
    }

    /// [`FloatOp::apply64`] for `real`.
    fn apply32(self, a: f32, b: f32) -> f32 {
        let r = match self {
            FloatOp::Add => a + b,
            FloatOp::Sub => a - b,
            FloatOp::Mul => a * b,
            FloatOp::Div => a / b,
        };
        if r.is_nan() { f32::NAN } else { r }
    }

    /// PostgreSQL's checks of one result `r = a op b` (`float.h`: `float8_pl`, `float8_mi`,
    /// `float8_mul`, `float8_div` and their `float4` twins): an infinite result of finite
    /// operands is 22003 `value out of range: overflow`; a zero product of non-zero operands,
    /// or a zero quotient of a non-zero dividend and a finite divisor, is 22003 `value out of
    /// range: underflow`; a zero divisor is 22012 `division by zero` unless the dividend is
    /// NaN.
    fn check(self, a: f64, b: f64, r: f64) -> datafusion::common::Result<()> {
        if self == FloatOp::Div && b == 0.0 && !a.is_nan() {
            return Err(ours(Error::data("22012", "division by zero")));
        }
        if r.is_infinite() && a.is_finite() && b.is_finite() {
            return Err(ours(Error::data("22003", "value out of range: overflow")));
        }
        let underflow = r == 0.0
            && a != 0.0
            && match self {
                FloatOp::Mul => b != 0.0,
                FloatOp::Div => b.is_finite(),
                FloatOp::Add | FloatOp::Sub => false,
            };
        if underflow {
            return Err(ours(Error::data("22003", "value out of range: underflow")));
        }
        Ok(())
    }
}

/// `float_add(a, b)`, `float_sub`, `float_mul`, `float_div` over two `float8` (or two
/// `real`): PostgreSQL's float operators, whose result is checked as [`FloatOp::check`]
/// says. Arrow's arithmetic gives Infinity, zero or NaN instead.
#[derive(Debug, PartialEq, Eq, Hash)]
struct FloatArith {
    op: FloatOp,
    signature: Signature,
}

impl FloatArith {
    fn new(op: FloatOp) -> Self {
        FloatArith {
            op,
            signature: Signature::one_of(
                vec![
                    TypeSignature::Exact(vec![DataType::Float64, DataType::Float64]),
                    TypeSignature::Exact(vec![DataType::Float32, DataType::Float32]),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for FloatArith {
    fn name(&self) -> &str {
        self.op.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        use arrow::datatypes::{Float32Type, Float64Type};
        let op = self.op;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out: ArrayRef = match arrays[0].data_type() {
            DataType::Float32 => {
                let (a, b) = (
                    arrays[0].as_primitive::<Float32Type>(),
                    arrays[1].as_primitive::<Float32Type>(),
                );
                let r: arrow::array::Float32Array =
                    arrow::compute::binary(a, b, |x: f32, y: f32| op.apply32(x, y))?;
                for i in 0..r.len() {
                    if r.is_valid(i) {
                        op.check(
                            f64::from(a.value(i)),
                            f64::from(b.value(i)),
                            f64::from(r.value(i)),
                        )?;
                    }
                }
                Arc::new(r)
            }
            _ => {
                let (a, b) = (
                    arrays[0].as_primitive::<Float64Type>(),
                    arrays[1].as_primitive::<Float64Type>(),
                );
                let r: arrow::array::Float64Array =
                    arrow::compute::binary(a, b, |x: f64, y: f64| op.apply64(x, y))?;
                for i in 0..r.len() {
                    if r.is_valid(i) {
                        op.check(a.value(i), b.value(i), r.value(i))?;
                    }
                }
                Arc::new(r)
            }
        };
        shape_result(&args.args, out)
    }
}

// ---------------------------------------------------------------------------------------------
// interval times or divided by a number

/// `interval_mul(interval, float8)` and `interval_div(interval, float8)`: PostgreSQL's
/// `interval_mul`/`interval_div` (`timestamp.c`). Months and days are scaled and truncated;
/// their fractions cascade down (a month as 30 days, a day as 86,400 s, rounded to the
/// microsecond), never up; the time part is scaled and rounded to the microsecond
/// (`interval '1 month' * 1.5` is `1 mon 15 days`, `interval '1 day' / 4` is `06:00:00`).
/// A result out of range is 22008 `interval out of range`; division by zero 22012.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalScale {
    divide: bool,
    signature: Signature,
}

impl IntervalScale {
    fn new(divide: bool) -> Self {
        IntervalScale {
            divide,
            signature: Signature::exact(
                vec![
                    DataType::Interval(IntervalUnit::MonthDayNano),
                    DataType::Float64,
                ],
                Volatility::Immutable,
            ),
        }
    }
}

/// One interval scaled as PostgreSQL's `interval_mul` (`divide` false) or `interval_div`.
fn scale_interval(
    v: arrow::datatypes::IntervalMonthDayNano,
    factor: f64,
    divide: bool,
) -> datafusion::common::Result<arrow::datatypes::IntervalMonthDayNano> {
    const DAYS_PER_MONTH: f64 = 30.0;
    const SECS_PER_DAY: f64 = 86_400.0;
    let out_of_range = || ours(Error::data("22008", "interval out of range"));
    // TSROUND: to the microsecond.
    let ts_round = |x: f64| (x * 1e6).round_ties_even() / 1e6;
    if divide && factor == 0.0 {
        return Err(ours(Error::data("22012", "division by zero")));
    }
    let scale = |x: f64| if divide { x / factor } else { x * factor };
    let whole_i32 = |x: f64| {
        if x.is_nan() || x > f64::from(i32::MAX) || x < f64::from(i32::MIN) {
            Err(out_of_range())
        } else {
            Ok(x as i32)
        }
    };
    let months_scaled = scale(f64::from(v.months));
    let days_scaled = scale(f64::from(v.days));
    let months = whole_i32(months_scaled)?;
    let mut days = whole_i32(days_scaled)?;
    let month_remainder_days = ts_round((months_scaled - f64::from(months)) * DAYS_PER_MONTH);
    let mut sec_remainder = ts_round(
        (days_scaled - f64::from(days) + month_remainder_days - month_remainder_days.trunc())
            * SECS_PER_DAY,
    );
    if sec_remainder.abs() >= SECS_PER_DAY {
        let whole_days = (sec_remainder / SECS_PER_DAY).trunc();
        days = days.saturating_add(whole_i32(whole_days)?);
        sec_remainder -= whole_days * SECS_PER_DAY;
    }
    days = days.saturating_add(whole_i32(month_remainder_days.trunc())?);
    let micros = (scale(v.nanoseconds as f64 / 1e3) + sec_remainder * 1e6).round_ties_even();
    if micros.is_nan() || micros.abs() >= 9.2e15 {
        return Err(out_of_range());
    }
    Ok(arrow::datatypes::IntervalMonthDayNano::new(
        months,
        days,
        micros as i64 * 1000,
    ))
}

impl ScalarUDFImpl for IntervalScale {
    fn name(&self) -> &str {
        if self.divide {
            "interval_div"
        } else {
            "interval_mul"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(DataType::Interval(IntervalUnit::MonthDayNano))
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        use arrow::datatypes::Float64Type;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let spans = arrays[0].as_primitive::<IntervalMonthDayNanoType>();
        let factors = arrays[1].as_primitive::<Float64Type>();
        let out: arrow::array::IntervalMonthDayNanoArray = spans
            .iter()
            .zip(factors.iter())
            .map(|(span, factor)| match (span, factor) {
                (Some(s), Some(f)) => scale_interval(s, f, self.divide).map(Some),
                _ => Ok(None),
            })
            .collect::<datafusion::common::Result<_>>()?;
        shape_result(&args.args, Arc::new(out))
    }
}

/// `interval_text(interval)`: PostgreSQL's text of an interval
/// ([`interval_out`](crate::sql::functions::datetime_input::interval_out)), what
/// `interval::text` gives (Arrow's cast prints `0 years 0 mons 1 days ...`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalOutput {
    signature: Signature,
}

impl IntervalOutput {
    fn new() -> Self {
        IntervalOutput {
            signature: Signature::exact(
                vec![DataType::Interval(IntervalUnit::MonthDayNano)],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for IntervalOutput {
    fn name(&self) -> &str {
        "interval_text"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out = crate::sql::functions::datetime_input::interval_text_array(&arrays[0])?;
        shape_result(&args.args, Arc::new(out))
    }
}

// ---------------------------------------------------------------------------------------------
// numeric multiplication and division

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum NumOp {
    Mul,
    Div,
}

/// `numeric_mul(a, b)` and `numeric_div(a, b)` over 128-bit decimals: computed exactly in 256
/// bits, then rounded half away from zero (PostgreSQL's rounding) to the result scale of
/// [`numeric_result_scale`]. A result beyond 38 digits is 22003; a zero divisor 22012.
#[derive(Debug, PartialEq, Eq, Hash)]
struct NumericArith {
    op: NumOp,
    signature: Signature,
}

impl NumericArith {
    fn new(op: NumOp) -> Self {
        NumericArith {
            op,
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

/// The result scale of a `numeric` product of operands of scales `s1` and `s2` (see the
/// module docs).
pub fn numeric_result_scale(s1: i8, s2: i8) -> i8 {
    let widest = s1.max(s2).max(NUMERIC_MAX_SCALE);
    (s1.saturating_add(s2)).min(widest)
}

/// The column scale of a `numeric` quotient of `Decimal128(p1, s1)` by `Decimal128(p2, s2)`:
/// [`NUMERIC_MAX_SCALE`] decimals (the operands' when they have more), fewer when the
/// quotient's integer digits need the room: a dividend of `p1 - s1` integer digits divided
/// by at least 10^-`s2` has at most `p1 - s1 + s2` (`bigint / 3.0`: 21 digits, 17 decimals).
/// An unconstrained `numeric` (38 digits) dividend keeps 18 integer digits, and an
/// unconstrained divisor's 10 decimals are not counted (`1::bigint / 3::numeric` keeps 18
/// decimals, not 8; a quotient past the room is 22003). Each value is rounded to
/// PostgreSQL's scale for it ([`pg_div_scale`]), then held at this scale.
pub fn numeric_div_scale(p1: u8, s1: i8, p2: u8, s2: i8) -> i8 {
    let max = NUMERIC_MAX_PRECISION as i8;
    let widest = s1.max(s2).max(NUMERIC_MAX_SCALE).min(max);
    if p1 >= NUMERIC_MAX_PRECISION {
        return widest;
    }
    let divisor_decimals = if p2 >= NUMERIC_MAX_PRECISION { 0 } else { s2 };
    let int_digits = i16::from(p1) - i16::from(s1) + i16::from(divisor_decimals);
    let room = (i16::from(max) - int_digits).clamp(0, i16::from(max)) as i8;
    widest.min(room)
}

/// An integer literal cast to `numeric` (as type coercion casts `1` in `1 / 3.0`) as a
/// `numeric` literal of just its digits; any other expression as it is.
fn tight_decimal_literal(e: Expr) -> Expr {
    let int = |v: &ScalarValue| match v {
        ScalarValue::Int64(Some(i)) => Some(*i),
        ScalarValue::Int32(Some(i)) => Some(i64::from(*i)),
        ScalarValue::Int16(Some(i)) => Some(i64::from(*i)),
        _ => None,
    };
    if let Expr::Cast(c) = &e
        && let DataType::Decimal128(_, 0) = c.field.data_type()
        && let Expr::Literal(v, _) = c.expr.as_ref()
        && let Some(i) = int(v)
    {
        let digits = (i.unsigned_abs().checked_ilog10().unwrap_or(0) + 1) as u8;
        return Expr::Literal(
            ScalarValue::Decimal128(Some(i128::from(i)), digits, 0),
            None,
        );
    }
    e
}

/// The weight and first digit of `v`·10^-`scale` in PostgreSQL's base-10,000 form (the
/// digit group holding the leading non-zero digit, and that group's value): (0, 0) for zero.
fn base10000_lead(v: i128, scale: i8) -> (i32, u32) {
    let a = v.unsigned_abs();
    if a == 0 {
        return (0, 0);
    }
    let exponent = a.ilog10() as i32 - i32::from(scale);
    let weight = exponent.div_euclid(4);
    let k = i32::from(scale) + 4 * weight;
    let first = if k >= 0 {
        a / 10u128.pow(k as u32)
    } else {
        a * 10u128.pow((-k) as u32)
    };
    (weight, first as u32)
}

/// The decimals PostgreSQL gives the quotient of `x`·10^-`sx` by `y`·10^-`sy` whose display
/// scales are `dx` and `dy` (`select_div_scale` in PostgreSQL's `numeric.c`): at least 16
/// significant digits (`NUMERIC_MIN_SIG_DIGITS`) by the quotient's estimated weight, and no
/// fewer than either operand's display scale: 10 / 3 has 16 decimals, 1 / 3.0 has 20,
/// 9223372036854775807 / 3.0 has 1.
pub fn pg_div_scale(x: i128, sx: i8, dx: i8, y: i128, sy: i8, dy: i8) -> i32 {
    let (w1, d1) = base10000_lead(x, sx);
    let (w2, d2) = base10000_lead(y, sy);
    let mut qweight = w1 - w2;
    if d1 <= d2 {
        qweight -= 1;
    }
    (16 - qweight * 4)
        .max(i32::from(dx))
        .max(i32::from(dy))
        .max(0)
}

/// The display scale of a value `v`·10^-`scale` of a `Decimal128(p, scale)` column:
/// `scale` for a constrained `numeric` (p < 38), as PostgreSQL's `numeric(p, s)` holds; an
/// unconstrained one does not keep the scale it was written with, so its decimals without
/// trailing zeros (as it prints).
pub(crate) fn display_scale(v: i128, p: u8, scale: i8) -> i8 {
    if p < NUMERIC_MAX_PRECISION || scale <= 0 {
        return scale;
    }
    let mut d = scale;
    let mut a = v.unsigned_abs();
    if a == 0 {
        return 0;
    }
    while d > 0 && a.is_multiple_of(10) {
        a /= 10;
        d -= 1;
    }
    d
}

fn pow10(n: u32) -> Option<i256> {
    i256::from_i128(10).checked_pow(n)
}

/// `n / d` rounded half away from zero; `None` when `d` is zero.
pub(crate) fn div_round(n: i256, d: i256) -> Option<i256> {
    let q = n.checked_div(d)?;
    let r = n.checked_rem(d)?;
    let twice = r.checked_mul(i256::from_i128(2))?;
    if twice.wrapping_abs() >= d.wrapping_abs() {
        let negative = (n < i256::ZERO) != (d < i256::ZERO);
        Some(if negative {
            q.checked_sub(i256::ONE)?
        } else {
            q.checked_add(i256::ONE)?
        })
    } else {
        Some(q)
    }
}

impl ScalarUDFImpl for NumericArith {
    fn name(&self) -> &str {
        match self.op {
            NumOp::Mul => "numeric_mul",
            NumOp::Div => "numeric_div",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        match (&arg_types[0], &arg_types[1]) {
            (DataType::Decimal128(p1, s1), DataType::Decimal128(p2, s2)) => {
                Ok(DataType::Decimal128(
                    NUMERIC_MAX_PRECISION,
                    match self.op {
                        NumOp::Mul => numeric_result_scale(*s1, *s2),
                        NumOp::Div => numeric_div_scale(*p1, *s1, *p2, *s2),
                    },
                ))
            }
            (a, b) => Err(DataFusionError::Plan(format!(
                "{} expects two numeric arguments, got {a} and {b}",
                self.name()
            ))),
        }
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (DataType::Decimal128(p1, s1), DataType::Decimal128(p2, s2)) =
            (arrays[0].data_type(), arrays[1].data_type())
        else {
            return Err(DataFusionError::Internal(format!(
                "{} called on non-decimal arguments",
                self.name()
            )));
        };
        let (p1, s1, p2, s2) = (*p1, *s1, *p2, *s2);
        let scale = match self.op {
            NumOp::Mul => numeric_result_scale(s1, s2),
            NumOp::Div => numeric_div_scale(p1, s1, p2, s2),
        };
        let a = arrays[0].as_primitive::<Decimal128Type>();
        let b = arrays[1].as_primitive::<Decimal128Type>();
        let limit = pow10(u32::from(NUMERIC_MAX_PRECISION)).unwrap_or(i256::MAX);
        let overflow = || ours(Error::data("22003", "numeric field overflow"));
        let mut out = Vec::with_capacity(a.len());
        for i in 0..a.len() {
            if a.is_null(i) || b.is_null(i) {
                out.push(None);
                continue;
            }
            let x = i256::from_i128(a.value(i));
            let y = i256::from_i128(b.value(i));
            let v = match self.op {
                NumOp::Mul => {
                    // x·y has scale s1+s2 (< 10^76, fits); round it to `scale`.
                    let shift = i32::from(s1) + i32::from(s2) - i32::from(scale);
                    let p = x.checked_mul(y).ok_or_else(overflow)?;
                    if shift > 0 {
                        div_round(p, pow10(shift as u32).ok_or_else(overflow)?)
                            .ok_or_else(overflow)?
                    } else {
                        p
                    }
                }
                NumOp::Div => {
                    if y == i256::ZERO {
                        return Err(ours(Error::data("22012", "division by zero")));
                    }
                    // Rounded at PostgreSQL's scale for these values (at most the column's),
                    // then held at the column's: x·10^(r+s2-s1) / y, times 10^(scale-r).
                    let (xv, yv) = (a.value(i), b.value(i));
                    let r = pg_div_scale(
                        xv,
                        s1,
                        display_scale(xv, p1, s1),
                        yv,
                        s2,
                        display_scale(yv, p2, s2),
                    )
                    .min(i32::from(scale));
                    let k = r + i32::from(s2) - i32::from(s1);
                    let (n, d) = if k >= 0 {
                        let f = pow10(k as u32).ok_or_else(overflow)?;
                        (x.checked_mul(f).ok_or_else(overflow)?, y)
                    } else {
                        let f = pow10((-k) as u32).ok_or_else(overflow)?;
                        (x, y.checked_mul(f).ok_or_else(overflow)?)
                    };
                    let q = div_round(n, d).ok_or_else(overflow)?;
                    let up = pow10((i32::from(scale) - r) as u32).ok_or_else(overflow)?;
                    q.checked_mul(up).ok_or_else(overflow)?
                }
            };
            if v.wrapping_abs() >= limit {
                return Err(overflow());
            }
            out.push(Some(v.to_i128().ok_or_else(overflow)?));
        }
        let array = Decimal128Array::from(out)
            .with_precision_and_scale(NUMERIC_MAX_PRECISION, scale)
            .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))?;
        shape_result(&args.args, Arc::new(array))
    }
}

// ---------------------------------------------------------------------------------------------
// Interval comparison

/// Nanoseconds in PostgreSQL's normalised interval day (24 hours) and month (30 days), the
/// units `interval_cmp` uses (PostgreSQL's `interval_cmp_value`).
const NANOS_PER_DAY: i128 = 86_400_000_000_000;
const DAYS_PER_MONTH: i128 = 30;

/// An interval as nanoseconds with a month of 30 days and a day of 24 hours: its place in
/// PostgreSQL's interval order (`interval_cmp_value`).
pub(crate) fn interval_cmp_value(v: arrow::datatypes::IntervalMonthDayNano) -> i128 {
    (i128::from(v.months) * DAYS_PER_MONTH + i128::from(v.days)) * NANOS_PER_DAY
        + i128::from(v.nanoseconds)
}

/// `interval_cmp_key(interval) -> numeric(38,0)`: the interval as nanoseconds with a month
/// of 30 days and a day of 24 hours, so `INTERVAL '48 hours' > INTERVAL '1 day'` holds and
/// `ORDER BY` an interval sorts as PostgreSQL does.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalCmpKey {
    signature: Signature,
}

impl IntervalCmpKey {
    fn new() -> Self {
        IntervalCmpKey {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for IntervalCmpKey {
    fn name(&self) -> &str {
        "interval_cmp_key"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(DataType::Decimal128(NUMERIC_MAX_PRECISION, 0))
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let mdn =
            arrow::compute::cast(&arrays[0], &DataType::Interval(IntervalUnit::MonthDayNano))?;
        let mdn = mdn.as_primitive::<IntervalMonthDayNanoType>();
        let keys: Decimal128Array = mdn.iter().map(|v| v.map(interval_cmp_value)).collect();
        let keys = keys
            .with_precision_and_scale(NUMERIC_MAX_PRECISION, 0)
            .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))?;
        shape_result(&args.args, Arc::new(keys))
    }
}

// ---------------------------------------------------------------------------------------------
// SIMILAR TO

/// `x [NOT] SIMILAR TO 'pattern' [ESCAPE 'c']` as PostgreSQL matches it (docs 9.7.2): the
/// whole string must match, `%` is any string, `_` any character, `.` `^` `$` are literal, and
/// `|` `*` `+` `?` `{m,n}` `( )` `[...]` are regular-expression operators; a `[NOT] ~` match
/// of the translated, anchored regular expression. DataFusion's own `SIMILAR TO` takes the
/// pattern as an unanchored regular expression (`'abc' SIMILAR TO 'b'` was true). A pattern
/// that is not a constant is refused (`0A000`) rather than matched that way.
fn similar_to(
    like: datafusion::logical_expr::expr::Like,
) -> datafusion::common::Result<Transformed<Expr>> {
    let pattern = match like.pattern.as_ref() {
        Expr::Literal(
            ScalarValue::Utf8(p) | ScalarValue::LargeUtf8(p) | ScalarValue::Utf8View(p),
            _,
        ) => p.clone(),
        Expr::Literal(ScalarValue::Null, _) => None,
        Expr::Cast(c) if matches!(c.expr.as_ref(), Expr::Literal(v, _) if v.is_null()) => None,
        _ => {
            return Err(ours(Error::not_supported(
                "SIMILAR TO with a pattern that is not a constant is not supported",
            )));
        }
    };
    let regex = pattern.map(|p| similar_to_regex(&p, like.escape_char.or(Some('\\'))));
    let op = if like.negated {
        Operator::RegexNotMatch
    } else {
        Operator::RegexMatch
    };
    Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
        like.expr,
        op,
        Box::new(Expr::Literal(ScalarValue::Utf8(regex), None)),
    ))))
}

/// The anchored regular expression (Rust `regex` syntax) of a `SIMILAR TO` pattern, following
/// PostgreSQL's `similar_escape`; `escape` is the escape character (`None`: `ESCAPE ''`).
fn similar_to_regex(pattern: &str, escape: Option<char>) -> String {
    let mut out = String::from("(?s)^(?:");
    let mut escaped = false;
    let mut in_bracket = false;
    let mut bracket_start = false;
    for c in pattern.chars() {
        if escaped {
            out.push_str(&regex_syntax_escape(c));
            escaped = false;
        } else if Some(c) == escape {
            escaped = true;
        } else if in_bracket {
            // `]` first in a bracket (or after `^`) is a member, not the end.
            if c == ']' && !bracket_start {
                in_bracket = false;
            }
            bracket_start = bracket_start && c == '^';
            if c == '\\' || (c == '[' && !bracket_start) {
                out.push('\\');
            }
            out.push(c);
        } else {
            match c {
                '[' => {
                    in_bracket = true;
                    bracket_start = true;
                    out.push('[');
                }
                '%' => out.push_str(".*"),
                '_' => out.push('.'),
                '(' => out.push_str("(?:"),
                '.' | '^' | '$' | '\\' => {
                    out.push('\\');
                    out.push(c);
                }
                c => out.push(c),
            }
        }
    }
    if escaped {
        // A trailing escape character escapes nothing: PostgreSQL matches it literally.
        if let Some(e) = escape {
            out.push_str(&regex_syntax_escape(e));
        }
    }
    out.push_str(")$");
    out
}

/// `c` as a literal in a regular expression.
fn regex_syntax_escape(c: char) -> String {
    if matches!(
        c,
        '\\' | '.'
            | '+'
            | '*'
            | '?'
            | '('
            | ')'
            | '|'
            | '['
            | ']'
            | '{'
            | '}'
            | '^'
            | '$'
            | '#'
            | '&'
            | '-'
            | '~'
    ) {
        format!("\\{c}")
    } else {
        c.to_string()
    }
}

// ---------------------------------------------------------------------------------------------
// Rounding before a cast to an integer type

/// `weir_rint(x)`: `x` rounded to an integral value as PostgreSQL's casts to integer types
/// round, in `x`'s type: a float to nearest, ties to even (`rint`, `float8` to `int4` in its
/// `int.c`/`float.c`), a `numeric` half away from zero (`numeric_int4` in `numeric.c`), and
/// each element of an array of them (`array[1, 2.5]::int[]` is `{1,3}`), where Arrow's cast
/// truncates (`2.7::float8::int` is 3, `2.5` is 2, `-2.5` is -2).
#[derive(Debug, PartialEq, Eq, Hash)]
struct RoundTiesEven {
    signature: Signature,
}

impl RoundTiesEven {
    fn new() -> Self {
        RoundTiesEven {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

/// `values` rounded as [`RoundTiesEven`] rounds (lists element by element); other types as
/// they are. Errors: an overflow rounding a `numeric` of 38 digits.
fn round_integral(values: &ArrayRef) -> datafusion::common::Result<ArrayRef> {
    use arrow::datatypes::{Float32Type, Float64Type};
    Ok(match values.data_type() {
        DataType::Float32 => Arc::new(
            values
                .as_primitive::<Float32Type>()
                .unary::<_, Float32Type>(f32::round_ties_even),
        ),
        DataType::Float64 => Arc::new(
            values
                .as_primitive::<Float64Type>()
                .unary::<_, Float64Type>(f64::round_ties_even),
        ),
        DataType::Decimal128(p, scale) if *scale > 0 => {
            let unit = i256::from_i128(10).wrapping_pow(*scale as u32);
            let rounded = values
                .as_primitive::<Decimal128Type>()
                .try_unary::<_, Decimal128Type, _>(|v| {
                    div_round(i256::from_i128(v), unit)
                        .and_then(|q| q.checked_mul(unit))
                        .and_then(|r| r.to_i128())
                        .ok_or_else(|| {
                            arrow::error::ArrowError::ComputeError("numeric field overflow".into())
                        })
                })?;
            Arc::new(rounded.with_precision_and_scale(*p, *scale)?)
        }
        DataType::List(f) => {
            let list = values.as_list::<i32>();
            Arc::new(arrow::array::ListArray::try_new(
                Arc::clone(f),
                list.offsets().clone(),
                round_integral(list.values())?,
                list.nulls().cloned(),
            )?)
        }
        _ => Arc::clone(values),
    })
}

impl ScalarUDFImpl for RoundTiesEven {
    fn name(&self) -> &str {
        "weir_rint"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out = round_integral(&arrays[0])?;
        shape_result(&args.args, out)
    }
}

/// True for the types whose cast to an integer type PostgreSQL rounds: floats, `numeric` with
/// decimals, and arrays of them.
fn rounds_to_integer(t: &DataType) -> bool {
    match t {
        DataType::Float32 | DataType::Float64 => true,
        DataType::Decimal128(_, scale) => *scale > 0,
        DataType::List(f) => rounds_to_integer(f.data_type()),
        _ => false,
    }
}

/// True for integer types and arrays of them.
fn integer_or_array(t: &DataType) -> bool {
    match t {
        DataType::List(f) => integer_or_array(f.data_type()),
        t => t.is_integer(),
    }
}

/// A cast of a float or a numeric to an integer type, rounding first as PostgreSQL's casts
/// do (floats to nearest, ties to even; numerics half away from zero, `numeric_int4` in its
/// `numeric.c`), where Arrow's cast truncates. Other casts: `None`.
fn rounding_int_cast(
    c: &datafusion::logical_expr::Cast,
    schema: &DFSchema,
) -> datafusion::common::Result<Option<Expr>> {
    let rounded_already = matches!(c.expr.as_ref(), Expr::ScalarFunction(f)
        if f.func.name() == "weir_rint");
    if !integer_or_array(c.field.data_type())
        || rounded_already
        || !rounds_to_integer(&c.expr.get_type(schema)?)
    {
        return Ok(None);
    }
    let rounded = Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::new(ScalarUDF::new_from_impl(RoundTiesEven::new())),
        vec![c.expr.as_ref().clone()],
    ));
    Ok(Some(Expr::Cast(datafusion::logical_expr::Cast {
        expr: Box::new(rounded),
        field: Arc::clone(&c.field),
    })))
}

// ---------------------------------------------------------------------------------------------
// x op ANY(array)

/// `weir_one_row(list, name)`: a scalar subquery's value from its rows gathered into a list
/// ([`crate::sql::parse::ONE_ROW_FUNCTION`]): NULL for a NULL or empty list, the element of a
/// one-element list, and for more elements PostgreSQL's error `21000` ("more than one row
/// returned by a subquery used as an expression"). `name`, the column's name, is for the
/// output names only.
#[derive(Debug, PartialEq, Eq, Hash)]
struct OneRow {
    signature: Signature,
}

impl OneRow {
    fn new() -> Self {
        OneRow {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for OneRow {
    fn name(&self) -> &str {
        crate::sql::parse::ONE_ROW_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        match &arg_types[0] {
            DataType::Null => Ok(DataType::Null),
            t => list_element_type(t).cloned().ok_or_else(|| {
                DataFusionError::Internal(format!("{} of a non-list: {t}", self.name()))
            }),
        }
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let input = &arrays[0];
        if input.data_type() == &DataType::Null {
            return shape_result(&args.args, Arc::clone(input));
        }
        let list = input.as_list::<i32>();
        let mut indices: Vec<Option<u32>> = Vec::with_capacity(list.len());
        let offsets = list.offsets();
        for i in 0..list.len() {
            let (start, end) = (offsets[i], offsets[i + 1]);
            if list.is_null(i) || start == end {
                indices.push(None);
            } else if end - start > 1 {
                return Err(ours(Error::data(
                    "21000",
                    "more than one row returned by a subquery used as an expression",
                )));
            } else {
                indices.push(Some(start as u32));
            }
        }
        let out = arrow::compute::take(
            list.values().as_ref(),
            &arrow::array::UInt32Array::from(indices),
            None,
        )?;
        shape_result(&args.args, out)
    }
}

/// `weir_array_or_empty(list)` ([`crate::sql::parse::ARRAY_OR_EMPTY_FUNCTION`]): the list,
/// or an empty list of the same type where it is NULL. The value of `ARRAY(subquery)`
/// (PostgreSQL docs, 4.2.12: `{}` when the subquery returns no rows) from the `array_agg`
/// of the subquery's rows, which is NULL for none. A NULL of type `null` gives `{}` of
/// element type `null`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ArrayOrEmpty {
    signature: Signature,
}

impl ArrayOrEmpty {
    fn new() -> Self {
        ArrayOrEmpty {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ArrayOrEmpty {
    fn name(&self) -> &str {
        crate::sql::parse::ARRAY_OR_EMPTY_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        match &arg_types[0] {
            DataType::Null => Ok(DataType::new_list(DataType::Null, true)),
            t @ DataType::List(_) => Ok(t.clone()),
            t => Err(DataFusionError::Internal(format!(
                "{} of a non-list: {t}",
                self.name()
            ))),
        }
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let input = &arrays[0];
        if input.data_type() == &DataType::Null {
            let empty = arrow::array::ListArray::new(
                Arc::new(arrow::datatypes::Field::new_list_field(
                    DataType::Null,
                    true,
                )),
                arrow::buffer::OffsetBuffer::new_zeroed(input.len()),
                arrow::array::new_empty_array(&DataType::Null),
                None,
            );
            return shape_result(&args.args, Arc::new(empty));
        }
        let list = input.as_list::<i32>();
        if list.null_count() == 0 {
            return shape_result(&args.args, Arc::clone(input));
        }
        // The elements of the non-NULL rows, and offsets in which a NULL row is empty.
        let offsets = list.offsets();
        let mut kept: Vec<u32> = Vec::new();
        let mut lengths: Vec<usize> = Vec::with_capacity(list.len());
        for i in 0..list.len() {
            if list.is_null(i) {
                lengths.push(0);
            } else {
                let (start, end) = (offsets[i] as u32, offsets[i + 1] as u32);
                kept.extend(start..end);
                lengths.push((end - start) as usize);
            }
        }
        let values = arrow::compute::take(
            list.values().as_ref(),
            &arrow::array::UInt32Array::from(kept),
            None,
        )?;
        let DataType::List(field) = list.data_type() else {
            return Err(DataFusionError::Internal(format!(
                "{} of a non-list",
                self.name()
            )));
        };
        let out = arrow::array::ListArray::try_new(
            Arc::clone(field),
            arrow::buffer::OffsetBuffer::from_lengths(lengths),
            values,
            None,
        )?;
        shape_result(&args.args, Arc::new(out))
    }
}

/// `weir_array_text_compare(x, text, op)`: `x op text` where the text looks like an array
/// ([`crate::sql::parse::ARRAY_TEXT_COMPARE_FUNCTION`]), a `boolean`. [`PgOperandTypes`] turns
/// every call back into the comparison before type coercion ([`array_text_operands`]); the
/// call itself is never evaluated.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ArrayTextCompare {
    signature: Signature,
}

impl ArrayTextCompare {
    fn new() -> Self {
        ArrayTextCompare {
            signature: Signature::any(3, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ArrayTextCompare {
    fn name(&self) -> &str {
        crate::sql::parse::ARRAY_TEXT_COMPARE_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(
        &self,
        _args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        Err(DataFusionError::Internal(
            "an array text comparison is planned as a comparison".into(),
        ))
    }
}

/// `weir_any_op(x, array, op)`: `x op ANY(array)` by PostgreSQL's rule (docs 9.24.3): NULL for
/// a NULL array; true if some element compares true; else NULL if `x` or some element is
/// NULL; else false (so an empty array gives false).
#[derive(Debug, PartialEq, Eq, Hash)]
struct AnyOp {
    signature: Signature,
}

impl AnyOp {
    fn new() -> Self {
        AnyOp {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

fn list_element_type(t: &DataType) -> Option<&DataType> {
    match t {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            Some(f.data_type())
        }
        _ => None,
    }
}

/// `values` in a form whose Arrow comparisons are PostgreSQL's: floats with `-0` as `0` and
/// one NaN (above every number, as Arrow's total order has it), intervals as their
/// [`interval_cmp_value`] (a month is 30 days, a day 24 hours); other types unchanged.
pub(crate) fn comparable(values: &ArrayRef) -> ArrayRef {
    use arrow::array::{Float32Array, Float64Array};
    use arrow::datatypes::{Float32Type, Float64Type, IntervalMonthDayNanoType};
    let float = crate::sql::equal_keys::float_key64;
    match values.data_type() {
        DataType::Float64 => Arc::new(
            values
                .as_primitive::<Float64Type>()
                .iter()
                .map(|v| v.map(float))
                .collect::<Float64Array>(),
        ),
        DataType::Float32 => Arc::new(
            values
                .as_primitive::<Float32Type>()
                .iter()
                .map(|v| v.map(|v| float(f64::from(v)) as f32))
                .collect::<Float32Array>(),
        ),
        DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano) => Arc::new(
            values
                .as_primitive::<IntervalMonthDayNanoType>()
                .iter()
                .map(|v| v.map(interval_cmp_value))
                .collect::<Decimal128Array>(),
        ),
        _ => Arc::clone(values),
    }
}

impl ScalarUDFImpl for AnyOp {
    fn name(&self) -> &str {
        crate::sql::parse::ANY_OP_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> datafusion::common::Result<Vec<DataType>> {
        let [needle, haystack, _] = arg_types else {
            return Err(DataFusionError::Plan(
                "ANY expects a value and an array".into(),
            ));
        };
        let elem = list_element_type(haystack).ok_or_else(|| {
            ours(Error::plan(
                "42809",
                format!("op ANY/ALL (array) requires array on right side, got {haystack}"),
            ))
        })?;
        let common = if elem == &DataType::Null {
            needle.clone()
        } else if needle == &DataType::Null {
            elem.clone()
        } else {
            datafusion::logical_expr::type_coercion::binary::comparison_coercion(needle, elem)
                .ok_or_else(|| {
                    ours(Error::plan(
                        "42883",
                        format!("operator does not exist: {needle} = ANY ({haystack})"),
                    ))
                })?
        };
        let list = DataType::List(Arc::new(arrow::datatypes::Field::new_list_field(
            common.clone(),
            true,
        )));
        Ok(vec![common, list, DataType::Utf8])
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        use arrow::compute::kernels::cmp;
        let op = match &args.args[2] {
            ColumnarValue::Scalar(s) => s.to_string(),
            ColumnarValue::Array(_) => {
                return Err(DataFusionError::Plan(
                    "the operator of ANY must be a constant".into(),
                ));
            }
        };
        let arrays = ColumnarValue::values_to_arrays(&args.args[..2])?;
        let needle = &comparable(&arrays[0]);
        let lists = arrays[1].as_list::<i32>();
        let mut out = Vec::with_capacity(needle.len());
        for i in 0..needle.len() {
            if lists.is_null(i) {
                out.push(None);
                continue;
            }
            let elems = comparable(&lists.value(i));
            if elems.is_empty() {
                out.push(Some(false));
                continue;
            }
            if needle.is_null(i) {
                out.push(None);
                continue;
            }
            let x = Scalar::new(needle.slice(i, 1));
            // `x op e` for every element e (written as `e op' x`).
            let r: BooleanArray = match op.as_str() {
                "=" => cmp::eq(&elems, &x),
                "<>" => cmp::neq(&elems, &x),
                "<" => cmp::gt(&elems, &x),
                "<=" => cmp::gt_eq(&elems, &x),
                ">" => cmp::lt(&elems, &x),
                ">=" => cmp::lt_eq(&elems, &x),
                other => {
                    return Err(DataFusionError::Plan(format!(
                        "operator {other} is not supported with ANY"
                    )));
                }
            }?;
            let any_true = r.iter().any(|v| v == Some(true));
            let any_null = r.null_count() > 0;
            out.push(if any_true {
                Some(true)
            } else if any_null {
                None
            } else {
                Some(false)
            });
        }
        shape_result(&args.args[..2], Arc::new(BooleanArray::from(out)))
    }
}

// ---------------------------------------------------------------------------------------------
// Operand types: date ± interval, numeric or integer meeting float

/// The analyzer rule that types two kinds of mixed operands as PostgreSQL does, before
/// DataFusion's type coercion (which would type them otherwise):
/// - `date ± interval` (`date_pl_interval`, docs 9.9 "Date/Time Functions and Operators") is
///   a `timestamp`, the date at midnight plus the interval, its time part kept
///   (`date '2024-03-10' + interval '36 hours'` is `2024-03-11 12:00:00`), where DataFusion
///   stays a `date` and drops the time; `date + integer` (days, a `date`) is left alone;
/// - a `numeric` meeting a `double precision`/`real` in a comparison, `BETWEEN`, `IN`,
///   arithmetic, `CASE` results or `COALESCE`/`NULLIF`/`GREATEST`/`LEAST` is read as
///   `double precision` (PostgreSQL's implicit cast numeric to float8), where DataFusion casts
///   the float to a decimal (failing on `1e20` and on `'Infinity'`). Decimal literals are
///   numeric, so `float_col = 2.5` is the common case;
/// - a `real` meeting an integer in arithmetic or a comparison is computed in `double
///   precision` (see [`real_meets_integer`]);
/// - a `character(n)` operand compared with an untyped literal, a parameter or a `varchar`
///   ignores trailing spaces on both sides ([`super::char_compare`]).
#[derive(Debug)]
pub struct PgOperandTypes;

impl AnalyzerRule for PgOperandTypes {
    fn name(&self) -> &str {
        "weir_pg_operand_types"
    }

    fn analyze(
        &self,
        plan: LogicalPlan,
        _config: &ConfigOptions,
    ) -> datafusion::common::Result<LogicalPlan> {
        Ok(plan
            .transform_up_with_subqueries(|plan| {
                let schema = merge_schema(&plan.inputs());
                let preserver = NamePreserver::new(&plan);
                plan.map_expressions(|e| {
                    keeping_names(&preserver, e, |e| {
                        let e = explicit_bigint_casts(e, &schema)?.data;
                        e.transform_up(|e| {
                            array_text_operands(e, &schema)?
                                .transform_data(|e| array_operators(e, &schema))?
                                .transform_data(regex_dot_matches_newline)?
                                .transform_data(padded_lengths)?
                                .transform_data(|e| int4_to_hex(e, &schema))?
                                .transform_data(|e| date_interval_arith(e, &schema))?
                                .transform_data(|e| unknown_literals(e, &schema))?
                                .transform_data(|e| float_meets_numeric(e, &schema))?
                                .transform_data(|e| {
                                    super::equal_keys::window_order_keys(e, &schema)
                                })?
                                .transform_data(|e| super::char_compare::char_operands(e, &schema))?
                                .transform_data(|e| bytea_length(e, &schema))
                        })
                    })
                })
            })?
            .data)
    }
}

/// An untyped literal that looks like an array compared with an expression (`arr = '{1,2}'`,
/// `'{a}' <> arr`, `arr @> '{1}'`; the parser made each a call of [`ArrayTextCompare`]) as
/// the comparison again: with the text read as the other side's array type when that is an
/// array, as PostgreSQL reads an unknown literal beside an array (`array_in`, docs 8.15.2),
/// each element of the one-dimensional text read as the element type; else with the text as
/// it was (`json_text = '{"a":1}'`).
///
/// # Errors
/// `22P02` when an element is not valid input for the element type, or the text is not a
/// one-dimensional array (`malformed array literal`).
fn array_text_operands(
    e: Expr,
    schema: &DFSchema,
) -> datafusion::common::Result<Transformed<Expr>> {
    let Expr::ScalarFunction(f) = &e else {
        return Ok(Transformed::no(e));
    };
    let (Some(x), Some(Expr::Literal(ScalarValue::Utf8(Some(literal)), _)), Some(op)) =
        (f.args.first(), f.args.get(1), f.args.get(2))
    else {
        return Ok(Transformed::no(e));
    };
    if f.name() != crate::sql::parse::ARRAY_TEXT_COMPARE_FUNCTION {
        return Ok(Transformed::no(e));
    }
    let op = match op {
        Expr::Literal(ScalarValue::Utf8(Some(op)), _) => match op.as_str() {
            "=" => Operator::Eq,
            "<>" => Operator::NotEq,
            "<" => Operator::Lt,
            "<=" => Operator::LtEq,
            ">" => Operator::Gt,
            ">=" => Operator::GtEq,
            "@>" => Operator::AtArrow,
            "<@" => Operator::ArrowAt,
            "IS DISTINCT FROM" => Operator::IsDistinctFrom,
            "IS NOT DISTINCT FROM" => Operator::IsNotDistinctFrom,
            _ => return Ok(Transformed::no(e)),
        },
        _ => return Ok(Transformed::no(e)),
    };
    let element_type = match x.get_type(schema)? {
        // Containment ignores dimensions (`array[[1,2],[3,4]] @> '{4}'`): the text is read
        // as an array of the innermost elements.
        t @ (DataType::List(_) | DataType::LargeList(_))
            if matches!(op, Operator::AtArrow | Operator::ArrowAt) =>
        {
            Some(super::functions::array_cmp::leaf(&t).clone())
        }
        DataType::List(f) | DataType::LargeList(f) => Some(f.data_type().clone()),
        _ => None,
    };
    let Some(element_type) = element_type else {
        return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
            Box::new(x.clone()),
            op,
            Box::new(f.args[1].clone()),
        ))));
    };
    let malformed = || {
        ours(Error::data(
            "22P02",
            format!("malformed array literal: \"{literal}\""),
        ))
    };
    let elements = crate::sql::parse::array_text_elements(literal).ok_or_else(malformed)?;
    // A `numeric` element is read with all its digits (`{1.49}` beside a `numeric(2,1)` is
    // not 1.5), as an unknown literal beside a number is.
    let element_type = unknown_read_as(&element_type);
    let values = elements
        .into_iter()
        .map(|el| {
            ScalarValue::Utf8(el.clone())
                .cast_to(&element_type)
                .map_err(|_| {
                    ours(Error::data(
                        "22P02",
                        format!(
                            "invalid input syntax for type {}: \"{}\"",
                            crate::sql::copy::pg_type_name(&element_type),
                            el.unwrap_or_default()
                        ),
                    ))
                })
        })
        .collect::<datafusion::common::Result<Vec<_>>>()?;
    let array = Expr::Literal(
        ScalarValue::List(ScalarValue::new_list_nullable(&values, &element_type)),
        None,
    );
    let has_all = |a: Expr, b: Expr| {
        Expr::ScalarFunction(ScalarFunction::new_udf(
            Arc::new(ScalarUDF::new_from_impl(
                super::functions::array_cmp::ArrayContains::default(),
            )),
            vec![a, b],
        ))
    };
    Ok(Transformed::yes(match op {
        Operator::AtArrow => has_all(x.clone(), array),
        Operator::ArrowAt => has_all(array, x.clone()),
        op => Expr::BinaryExpr(BinaryExpr::new(Box::new(x.clone()), op, Box::new(array))),
    }))
}

/// `<`, `<=`, `>`, `>=` of arrays as [`ArrayOrder`](super::functions::array_cmp::ArrayOrder):
/// PostgreSQL's rule for NULL elements (`@>` and `<@` the parser wrote as calls of
/// [`ArrayContains`](super::functions::array_cmp::ArrayContains)); `=`, `<>` and `IS [NOT]
/// DISTINCT FROM` too for arrays of floats and intervals, whose elements DataFusion compared
/// by their bits. Other arrays' equalities stay DataFusion's, which agree (two NULL elements
/// are equal) and stay equi-join keys.
fn array_operators(e: Expr, schema: &DFSchema) -> datafusion::common::Result<Transformed<Expr>> {
    use super::functions::array_cmp::ArrayOrder;
    let array = |e: &Expr| {
        matches!(
            e.get_type(schema),
            Ok(DataType::List(_) | DataType::LargeList(_))
        )
    };
    // Equality of arrays whose elements DataFusion compares by their bits (`-0` and `0`,
    // `1 day` and `24 hours`).
    let numeric_equality = |e: &Expr| match e.get_type(schema) {
        Ok(t @ (DataType::List(_) | DataType::LargeList(_))) => matches!(
            super::functions::array_cmp::leaf(&t),
            DataType::Float16 | DataType::Float32 | DataType::Float64 | DataType::Interval(_)
        ),
        _ => false,
    };
    let ordering = |op: Operator| {
        matches!(
            op,
            Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq
        )
    };
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if (ordering(op) && (array(&left) || array(&right)))
                || (!ordering(op) && (numeric_equality(&left) || numeric_equality(&right))) =>
        {
            match ArrayOrder::new(op) {
                Some(udf) => Ok(Transformed::yes(Expr::ScalarFunction(
                    ScalarFunction::new_udf(
                        Arc::new(ScalarUDF::new_from_impl(udf)),
                        vec![*left, *right],
                    ),
                ))),
                None => Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr {
                    left,
                    op,
                    right,
                }))),
            }
        }
        other => Ok(Transformed::no(other)),
    }
}

/// `x ~ p`, `x ~* p`, `x !~ p`, `x !~* p` with `(?s)` before the pattern, so that `.` matches
/// a newline, as it does in PostgreSQL's regular expressions (docs 9.7.3.5: newline-sensitive
/// matching is an option, off by default); the `regex` crate's `.` does not. A constant
/// pattern's word-boundary escapes are read as PostgreSQL's
/// ([`pg_pattern`](super::functions::regex::pg_pattern)). NULL stays NULL.
fn regex_dot_matches_newline(e: Expr) -> datafusion::common::Result<Transformed<Expr>> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(
                op,
                Operator::RegexMatch
                    | Operator::RegexIMatch
                    | Operator::RegexNotMatch
                    | Operator::RegexNotIMatch
            ) =>
        {
            let right = match *right {
                Expr::Literal(ScalarValue::Utf8(Some(p)), m) => Expr::Literal(
                    ScalarValue::Utf8(Some(format!(
                        "(?s){}",
                        super::functions::regex::pg_pattern(&p)
                    ))),
                    m,
                ),
                Expr::Literal(v, m) if v.is_null() => Expr::Literal(v, m),
                other => Expr::BinaryExpr(BinaryExpr::new(
                    Box::new(Expr::Literal(ScalarValue::Utf8(Some("(?s)".into())), None)),
                    Operator::StringConcat,
                    Box::new(other),
                )),
            };
            Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                left,
                op,
                Box::new(right),
            ))))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// `lpad(s, n [, fill])` and `rpad(...)` with a negative length read as 0 (an empty
/// string, as PostgreSQL gives); DataFusion's panicked on a negative length that is not a
/// constant (a constant is left alone: DataFusion's gives the empty string for it). A NULL
/// length stays NULL.
fn padded_lengths(e: Expr) -> datafusion::common::Result<Transformed<Expr>> {
    match e {
        Expr::ScalarFunction(mut f)
            if matches!(f.name(), "lpad" | "rpad")
                && f.args.len() >= 2
                && !matches!(&f.args[1], Expr::Literal(..) | Expr::Case(_)) =>
        {
            let n = f.args[1].clone();
            let negative = Expr::BinaryExpr(BinaryExpr::new(
                Box::new(n.clone()),
                Operator::Lt,
                Box::new(Expr::Literal(ScalarValue::Int64(Some(0)), None)),
            ));
            f.args[1] = Expr::Case(datafusion::logical_expr::expr::Case::new(
                None,
                vec![(
                    Box::new(negative),
                    Box::new(Expr::Literal(ScalarValue::Int64(Some(0)), None)),
                )],
                Some(Box::new(n)),
            ));
            Ok(Transformed::yes(Expr::ScalarFunction(f)))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// `to_hex` of an `integer` or `smallint` (a column, a cast, an integer literal within
/// `integer`'s range) as the hexadecimal of its 32 bits (`to_hex(-1)` is `ffffffff`,
/// PostgreSQL's `to_hex(integer)`); DataFusion's took the 64 bits of a `bigint`.
fn int4_to_hex(e: Expr, schema: &DFSchema) -> datafusion::common::Result<Transformed<Expr>> {
    match e {
        Expr::ScalarFunction(mut f)
            if f.name() == "to_hex"
                && f.args.len() == 1
                && (int4_literal(&f.args[0]).is_some()
                    || matches!(
                        f.args[0].get_type(schema),
                        Ok(DataType::Int32 | DataType::Int16 | DataType::Int8)
                    )) =>
        {
            let x = f.args[0].clone().cast_to(&DataType::Int64, schema)?;
            f.args[0] = Expr::BinaryExpr(BinaryExpr::new(
                Box::new(x),
                Operator::BitwiseAnd,
                Box::new(Expr::Literal(ScalarValue::Int64(Some(0xFFFF_FFFF)), None)),
            ));
            Ok(Transformed::yes(Expr::ScalarFunction(f)))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// `length`, `char_length` and `character_length` of a `bytea` as its number of bytes
/// ([`super::functions::text_output::OctetLength`]).
///
/// # Errors
/// `42883` for these functions of a number, `boolean`, date/time value or array, which
/// PostgreSQL does not have (`bit_length(123)`; DataFusion read the value as its text).
fn bytea_length(e: Expr, schema: &DFSchema) -> datafusion::common::Result<Transformed<Expr>> {
    if let Expr::ScalarFunction(f) = &e
        && matches!(
            f.name(),
            "length" | "char_length" | "character_length" | "octet_length" | "bit_length"
        )
        && let [arg] = f.args.as_slice()
    {
        let t = arg.get_type(schema)?;
        let array = list_element_type(&t).is_some();
        if t.is_numeric() || t.is_temporal() || t == DataType::Boolean || array {
            let name = match (arg, list_element_type(&t)) {
                (Expr::Literal(ScalarValue::Int64(Some(v)), _), _) if i32::try_from(*v).is_ok() => {
                    "integer".to_string()
                }
                (_, Some(element)) => format!("{}[]", crate::sql::copy::pg_type_name(element)),
                _ => crate::sql::copy::pg_type_name(&t),
            };
            return Err(ours(Error::plan(
                "42883",
                format!("function {}({name}) does not exist", f.name()),
            )));
        }
    }
    match e {
        Expr::ScalarFunction(f)
            if matches!(f.name(), "length" | "char_length" | "character_length")
                && f.args.len() == 1
                && matches!(
                    f.args[0].get_type(schema)?,
                    DataType::Binary | DataType::LargeBinary | DataType::BinaryView
                ) =>
        {
            let udf = Arc::new(ScalarUDF::new_from_impl(
                super::functions::text_output::OctetLength::default(),
            ));
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(udf, f.args),
            )))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// `e` with each cast of an `integer` or `smallint` to `bigint` the user wrote (`a::bigint`)
/// cast once more to `bigint`. Type coercion later widens an `integer` beside a `bigint` by
/// the same cast, which [`PgSemantics`] undoes to compute `int_col + 1` as PostgreSQL does,
/// in 32 bits; the doubled cast keeps a written one (`a::bigint * 100000` is 64-bit
/// arithmetic) from being taken for coercion's. The optimizer drops the extra cast.
fn explicit_bigint_casts(
    e: Expr,
    schema: &DFSchema,
) -> datafusion::common::Result<Transformed<Expr>> {
    use datafusion::common::tree_node::TreeNodeRecursion;
    let narrow = |e: &Expr| {
        matches!(
            e.get_type(schema),
            Ok(DataType::Int32 | DataType::Int16 | DataType::Int8)
        )
    };
    e.transform_down(|e| match e {
        Expr::Cast(c) if *c.field.data_type() == DataType::Int64 => match c.expr.as_ref() {
            // Already doubled (the rule ran before on this expression).
            Expr::Cast(inner)
                if *inner.field.data_type() == DataType::Int64 && narrow(&inner.expr) =>
            {
                Ok(Transformed::new(
                    Expr::Cast(c),
                    false,
                    TreeNodeRecursion::Jump,
                ))
            }
            inner if narrow(inner) => {
                let once = Expr::Cast(c);
                Ok(Transformed::new(
                    Expr::Cast(datafusion::logical_expr::Cast::new(
                        Box::new(once),
                        DataType::Int64,
                    )),
                    true,
                    TreeNodeRecursion::Jump,
                ))
            }
            _ => Ok(Transformed::no(Expr::Cast(c))),
        },
        other => Ok(Transformed::no(other)),
    })
}

/// `date ± interval` (or `interval + date`) with the date cast to a timestamp; other
/// expressions unchanged (also those whose operand types are not known yet).
fn date_interval_arith(
    e: Expr,
    schema: &DFSchema,
) -> datafusion::common::Result<Transformed<Expr>> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
        return Ok(Transformed::no(e));
    };
    let date = |t: &Option<DataType>| matches!(t, Some(DataType::Date32 | DataType::Date64));
    let interval = |t: &Option<DataType>| matches!(t, Some(DataType::Interval(_)));
    let (lt, rt) = (left.get_type(schema).ok(), right.get_type(schema).ok());
    let applies = match op {
        Operator::Plus => (date(&lt) && interval(&rt)) || (interval(&lt) && date(&rt)),
        Operator::Minus => date(&lt) && interval(&rt),
        _ => false,
    };
    if !applies {
        return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr {
            left,
            op,
            right,
        })));
    }
    let timestamp = DataType::Timestamp(arrow::datatypes::TimeUnit::Nanosecond, None);
    let at_midnight =
        |e: Box<Expr>, t: &Option<DataType>| -> datafusion::common::Result<Box<Expr>> {
            Ok(if date(t) {
                Box::new(e.cast_to(&timestamp, schema)?)
            } else {
                e
            })
        };
    Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
        left: at_midnight(left, &lt)?,
        op,
        right: at_midnight(right, &rt)?,
    })))
}

/// Plans `interval * number`, `number * interval` and `interval / number` as
/// [`IntervalScale`] (the number as `double precision`, PostgreSQL's
/// `interval_mul(interval, float8)`). DataFusion has no such operators and fails while
/// planning the expression, before any analyzer rule could rewrite it, so this is an
/// [`ExprPlanner`](datafusion::logical_expr::planner::ExprPlanner) for binary operators.
/// It also plans `timestamp - timestamp` as the difference justified into days and time
/// ([`super::functions::justify`]): the planned type is `interval` from the start, where a
/// later rewrite would change the type of a plan the analyzer has checked.
#[derive(Debug)]
struct IntervalTimesNumber;

impl datafusion::logical_expr::planner::ExprPlanner for IntervalTimesNumber {
    fn plan_binary_op(
        &self,
        expr: datafusion::logical_expr::planner::RawBinaryExpr,
        schema: &DFSchema,
    ) -> datafusion::common::Result<
        datafusion::logical_expr::planner::PlannerResult<
            datafusion::logical_expr::planner::RawBinaryExpr,
        >,
    > {
        use datafusion::logical_expr::planner::PlannerResult;
        use datafusion::sql::sqlparser::ast::BinaryOperator;
        let mut expr = expr;
        let (mut lt, mut rt) = (
            expr.left.get_type(schema).ok(),
            expr.right.get_type(schema).ok(),
        );
        // An untyped literal beside a date, time or interval takes the type PostgreSQL's
        // operator resolution gives it (`iv = '1 day'`, `ts + '1 hour'`).
        let unknown =
            |e: &Expr| untyped_literal(e) || matches!(e, Expr::Literal(ScalarValue::Null, _));
        if unknown(&expr.left)
            && let Some(t) = unknown_beside_datetime(&expr.op, rt.as_ref(), false)?
        {
            expr.left = expr.left.cast_to(&t, schema)?;
            lt = Some(t);
        } else if unknown(&expr.right)
            && let Some(t) = unknown_beside_datetime(&expr.op, lt.as_ref(), true)?
        {
            expr.right = expr.right.cast_to(&t, schema)?;
            rt = Some(t);
        }
        // The difference of two timestamps is justified into days and time, as
        // PostgreSQL's `timestamp_mi` returns it (`2 days 05:00:00`, not `53:00:00`).
        let timestamp = |t: &Option<DataType>| matches!(t, Some(DataType::Timestamp(..)));
        if expr.op == BinaryOperator::Minus && timestamp(&lt) && timestamp(&rt) {
            use super::functions::justify::{Justify, Kind};
            let difference = Expr::BinaryExpr(BinaryExpr::new(
                Box::new(expr.left),
                Operator::Minus,
                Box::new(expr.right),
            ));
            return Ok(PlannerResult::Planned(Expr::ScalarFunction(
                ScalarFunction::new_udf(
                    Arc::new(ScalarUDF::new_from_impl(Justify::new(Kind::Hours))),
                    vec![difference],
                ),
            )));
        }
        // An untyped literal beside a number in arithmetic is read as that number's type
        // (PostgreSQL resolves `unknown` to the other operand's type: `'1' + 1` is 2, `'a' + 1`
        // is `22P02`); DataFusion refuses to add text to a number.
        let untyped = untyped_literal;
        let arithmetic = matches!(
            expr.op,
            BinaryOperator::Plus
                | BinaryOperator::Minus
                | BinaryOperator::Multiply
                | BinaryOperator::Divide
                | BinaryOperator::Modulo
        );
        match (&lt, &rt) {
            (_, Some(t)) if arithmetic && untyped(&expr.left) && t.is_numeric() => {
                expr.left = expr.left.cast_to(&unknown_read_as(t), schema)?;
            }
            (Some(t), _) if arithmetic && untyped(&expr.right) && t.is_numeric() => {
                expr.right = expr.right.cast_to(&unknown_read_as(t), schema)?;
            }
            _ => {}
        }
        self.plan_interval_scale(expr, schema, lt, rt)
    }
}

/// Whether `e` is a string literal as written, PostgreSQL's `unknown`.
fn untyped_literal(e: &Expr) -> bool {
    matches!(e, Expr::Literal(ScalarValue::Utf8(Some(_)), _))
}

/// The type PostgreSQL reads an untyped literal as when it is an operand of `op` beside an
/// operand of type `other` (on its left when `literal_on_right`), for the date and time
/// types, where DataFusion finds no common type; `None` for other operands. PostgreSQL's
/// operator resolution (docs 10.2 "Operators"): an `interval` beside an `interval` in a
/// comparison, `+` or `-`, a `double precision` factor of an `interval`, an `interval` added
/// to a `timestamp`, `timestamptz` or `time`, and of the other operand's type on either side
/// of a `-` with a `timestamp`, `time` or `date` (`ts - '2024-01-01'` is an `interval`,
/// `ts - '1 hour'` is `22007`). An untyped NULL is read alike.
///
/// # Errors
/// `date + unknown` is `42725`: `date + integer`, `date + interval` and `date + time` are
/// all candidates, so PostgreSQL refuses to choose. Other arithmetic (`date * '2'`) is
/// `42883` `operator does not exist`, naming the types as PostgreSQL does.
fn unknown_beside_datetime(
    op: &datafusion::sql::sqlparser::ast::BinaryOperator,
    other: Option<&DataType>,
    literal_on_right: bool,
) -> datafusion::common::Result<Option<DataType>> {
    use datafusion::sql::sqlparser::ast::BinaryOperator as Op;
    let interval = DataType::Interval(IntervalUnit::MonthDayNano);
    let Some(other) = other else {
        return Ok(None);
    };
    let comparison = matches!(
        op,
        Op::Eq | Op::NotEq | Op::Lt | Op::LtEq | Op::Gt | Op::GtEq
    );
    let arithmetic = matches!(
        op,
        Op::Plus | Op::Minus | Op::Multiply | Op::Divide | Op::Modulo
    );
    let temporal = matches!(
        other,
        DataType::Interval(_)
            | DataType::Timestamp(..)
            | DataType::Date32
            | DataType::Date64
            | DataType::Time32(_)
            | DataType::Time64(_)
    );
    let no_operator = || {
        let other = crate::sql::functions::pg_type_name(other);
        let (l, r) = if literal_on_right {
            (other.as_str(), "unknown")
        } else {
            ("unknown", other.as_str())
        };
        ours(Error::plan(
            "42883",
            format!("operator does not exist: {l} {op} {r}"),
        ))
    };
    let resolved = match other {
        DataType::Interval(_) => match op {
            _ if comparison => Some(interval),
            Op::Plus | Op::Minus => Some(interval),
            Op::Multiply => Some(DataType::Float64),
            Op::Divide if literal_on_right => Some(DataType::Float64),
            _ => None,
        },
        DataType::Timestamp(..) | DataType::Time32(_) | DataType::Time64(_) => match op {
            Op::Plus => Some(interval),
            Op::Minus => Some(other.clone()),
            _ => None,
        },
        DataType::Date32 | DataType::Date64 => match op {
            Op::Plus => {
                return Err(ours(Error::plan(
                    "42725",
                    "operator is not unique: date + unknown",
                )));
            }
            Op::Minus => Some(other.clone()),
            _ => None,
        },
        _ => None,
    };
    match resolved {
        None if temporal && arithmetic => Err(no_operator()),
        resolved => Ok(resolved),
    }
}

impl IntervalTimesNumber {
    /// `interval * number`, `number * interval` and `interval / number` as [`IntervalScale`];
    /// other operators as planned.
    fn plan_interval_scale(
        &self,
        expr: datafusion::logical_expr::planner::RawBinaryExpr,
        schema: &DFSchema,
        lt: Option<DataType>,
        rt: Option<DataType>,
    ) -> datafusion::common::Result<
        datafusion::logical_expr::planner::PlannerResult<
            datafusion::logical_expr::planner::RawBinaryExpr,
        >,
    > {
        use datafusion::logical_expr::planner::PlannerResult;
        use datafusion::sql::sqlparser::ast::BinaryOperator;
        let interval = |t: &Option<DataType>| matches!(t, Some(DataType::Interval(_)));
        let number = |t: &Option<DataType>| t.as_ref().is_some_and(DataType::is_numeric);
        let (span, factor, divide) = match expr.op {
            BinaryOperator::Multiply if interval(&lt) && number(&rt) => {
                (&expr.left, &expr.right, false)
            }
            BinaryOperator::Multiply if number(&lt) && interval(&rt) => {
                (&expr.right, &expr.left, false)
            }
            BinaryOperator::Divide if interval(&lt) && number(&rt) => {
                (&expr.left, &expr.right, true)
            }
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let span = span
            .clone()
            .cast_to(&DataType::Interval(IntervalUnit::MonthDayNano), schema)?;
        let factor = factor.clone().cast_to(&DataType::Float64, schema)?;
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            ScalarFunction::new_udf(
                Arc::new(ScalarUDF::new_from_impl(IntervalScale::new(divide))),
                vec![span, factor],
            ),
        )))
    }
}

/// Whether `t` is a floating-point type.
fn is_float_type(t: &Option<DataType>) -> bool {
    matches!(
        t,
        Some(DataType::Float16 | DataType::Float32 | DataType::Float64)
    )
}

/// Whether `t` is a decimal (`numeric`) type.
fn is_decimal_type(t: &Option<DataType>) -> bool {
    matches!(t, Some(DataType::Decimal128(..) | DataType::Decimal256(..)))
}

/// The operands of `exprs` that are `numeric` cast to `double precision`, when another is a
/// float; `None` when they do not mix.
fn floats_for_numerics(
    exprs: &[&Expr],
    schema: &DFSchema,
) -> datafusion::common::Result<Option<Vec<Expr>>> {
    let types: Vec<Option<DataType>> = exprs.iter().map(|e| e.get_type(schema).ok()).collect();
    if !(types.iter().any(is_float_type) && types.iter().any(is_decimal_type)) {
        return Ok(None);
    }
    exprs
        .iter()
        .zip(&types)
        .map(|(e, t)| {
            Ok(if is_decimal_type(t) {
                (*e).clone().cast_to(&DataType::Float64, schema)?
            } else {
                (*e).clone()
            })
        })
        .collect::<datafusion::common::Result<Vec<_>>>()
        .map(Some)
}

/// `exprs` with each string literal (an untyped literal, PostgreSQL's `unknown`) cast to the
/// type the other expressions share, when they share one that is no string type (PostgreSQL
/// resolves an `unknown` operand to the type of the others: docs, 10.5 "UNION, CASE, and
/// Related Constructs", and 10.2 "Operators"); `None` when nothing applies. NULLs and
/// expressions whose type is not known yet count for nothing.
fn unknown_as_others(
    exprs: &[&Expr],
    schema: &DFSchema,
) -> datafusion::common::Result<Option<Vec<Expr>>> {
    let untyped = |e: &Expr| matches!(e, Expr::Literal(ScalarValue::Utf8(Some(_)), _));
    if !exprs.iter().any(|e| untyped(e)) {
        return Ok(None);
    }
    let mut known = exprs
        .iter()
        .filter(|e| !untyped(e))
        .filter_map(|e| e.get_type(schema).ok())
        .filter(|t| !t.is_null());
    let Some(target) = known.next() else {
        return Ok(None);
    };
    let textual = matches!(
        target,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    );
    if textual || known.any(|t| t != target) {
        return Ok(None);
    }
    let target = unknown_read_as(&target);
    exprs
        .iter()
        .map(|e| {
            Ok(if untyped(e) {
                (*e).clone().cast_to(&target, schema)?
            } else {
                (*e).clone()
            })
        })
        .collect::<datafusion::common::Result<Vec<_>>>()
        .map(Some)
}

/// The type an untyped literal resolved to `t` is read as: `t`, but an unconstrained
/// `numeric` for a `numeric` of any precision and scale (`'2' - 0.5` must not read `'2'` as a
/// `numeric(1, 1)`).
fn unknown_read_as(t: &DataType) -> DataType {
    match t {
        DataType::Decimal128(..) | DataType::Decimal256(..) => {
            DataType::Decimal128(NUMERIC_MAX_PRECISION, 10)
        }
        other => other.clone(),
    }
}

/// One node of [`PgOperandTypes`]' rule for untyped literals (see [`unknown_as_others`]):
/// the results of `CASE` and the arguments of `COALESCE`, `NULLIF`, `GREATEST` and `LEAST`
/// (`CASE WHEN c THEN 1 ELSE '2' END` is a number, where DataFusion made it text). An
/// arithmetic operand is typed while planning (see [`IntervalTimesNumber`]).
fn unknown_literals(e: Expr, schema: &DFSchema) -> datafusion::common::Result<Transformed<Expr>> {
    match e {
        // A comparison of an untyped literal with a `numeric` reads the literal with all its
        // digits (`n = '1.49'` with `n` 1.5 is false), where DataFusion cast it to `n`'s
        // scale, rounding it.
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if super::equal_keys::is_comparison(op)
                && (untyped_literal(&left) || untyped_literal(&right))
                && is_decimal_type(&left.get_type(schema).ok())
                    != is_decimal_type(&right.get_type(schema).ok()) =>
        {
            let full = DataType::Decimal128(NUMERIC_MAX_PRECISION, 10);
            let read = |e: Box<Expr>| -> datafusion::common::Result<Box<Expr>> {
                Ok(if untyped_literal(&e) {
                    Box::new(e.cast_to(&full, schema)?)
                } else {
                    e
                })
            };
            Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                read(left)?,
                op,
                read(right)?,
            ))))
        }
        e => result_operands(e, |v| unknown_as_others(v, schema)),
    }
}

/// Whether `left op right` is arithmetic or a comparison of a `real` and an integer, which
/// PostgreSQL computes in `double precision` (its operators `float48pl`, `float48eq`, ...
/// win over `float4pl` because `float8` is the preferred numeric type: docs 10.2 "Operators").
/// DataFusion computes them in `real` (`2::real / 3` is `0.6666667`, PostgreSQL's
/// `0.6666666666666666`).
fn real_meets_integer(left: &Expr, right: &Expr, op: Operator, schema: &DFSchema) -> bool {
    let (Ok(lt), Ok(rt)) = (left.get_type(schema), right.get_type(schema)) else {
        return false;
    };
    let real = |t: &DataType| matches!(t, DataType::Float32);
    let integer = |t: &DataType| t.is_integer();
    let mixed = (real(&lt) && integer(&rt)) || (integer(&lt) && real(&rt));
    // The operators that negate are the comparisons (and LIKE and regex matches, which take
    // no numbers).
    mixed && (op.is_numerical_operators() || op.negate().is_some())
}

/// One node of [`PgOperandTypes`]' numeric-meets-float rule.
fn float_meets_numeric(
    e: Expr,
    schema: &DFSchema,
) -> datafusion::common::Result<Transformed<Expr>> {
    Ok(match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if real_meets_integer(&left, &right, op, schema) =>
        {
            Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                Box::new(left.cast_to(&DataType::Float64, schema)?),
                op,
                Box::new(right.cast_to(&DataType::Float64, schema)?),
            )))
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            match floats_for_numerics(&[&left, &right], schema)? {
                Some(mut v) => {
                    let right = v.pop().expect("invariant: two operands");
                    let left = v.pop().expect("invariant: two operands");
                    Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                        Box::new(left),
                        op,
                        Box::new(right),
                    )))
                }
                None => Transformed::no(Expr::BinaryExpr(BinaryExpr { left, op, right })),
            }
        }
        other => result_operands(other, |v| floats_for_numerics(v, schema))?,
    })
}

/// `e` with the results of a `CASE` (or the arguments of `COALESCE`, `NULLIF`, `GREATEST`,
/// `LEAST`, or the operands of `BETWEEN` and `IN (list)`) replaced by what `retype` makes of them, when it makes anything; other
/// expressions unchanged.
fn result_operands(
    e: Expr,
    retype: impl Fn(&[&Expr]) -> datafusion::common::Result<Option<Vec<Expr>>>,
) -> datafusion::common::Result<Transformed<Expr>> {
    use datafusion::logical_expr::expr::{Between, Case, InList};
    Ok(match e {
        Expr::Case(c) => {
            let mut results: Vec<&Expr> =
                c.when_then_expr.iter().map(|(_, t)| t.as_ref()).collect();
            if let Some(e) = &c.else_expr {
                results.push(e);
            }
            match retype(&results)? {
                Some(v) => {
                    let mut v = v.into_iter();
                    let when_then = c
                        .when_then_expr
                        .iter()
                        .map(|(w, _)| {
                            (
                                w.clone(),
                                Box::new(v.next().expect("invariant: one per branch")),
                            )
                        })
                        .collect();
                    let else_expr = c
                        .else_expr
                        .as_ref()
                        .map(|_| Box::new(v.next().expect("invariant: the ELSE result")));
                    Transformed::yes(Expr::Case(Case::new(c.expr.clone(), when_then, else_expr)))
                }
                None => Transformed::no(Expr::Case(c)),
            }
        }
        Expr::ScalarFunction(f)
            if matches!(f.func.name(), "coalesce" | "nullif" | "greatest" | "least") =>
        {
            let args: Vec<&Expr> = f.args.iter().collect();
            match retype(&args)? {
                Some(args) => Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(
                    Arc::clone(&f.func),
                    args,
                ))),
                None => Transformed::no(Expr::ScalarFunction(f)),
            }
        }
        // The tested value and the bounds or list (`iv BETWEEN '1 hour' AND '1 day'`).
        Expr::Between(b) => match retype(&[&b.expr, &b.low, &b.high])? {
            Some(v) => {
                let [expr, low, high]: [Expr; 3] = v
                    .try_into()
                    .map_err(|_| DataFusionError::Internal("BETWEEN of three operands".into()))?;
                Transformed::yes(Expr::Between(Between::new(
                    Box::new(expr),
                    b.negated,
                    Box::new(low),
                    Box::new(high),
                )))
            }
            None => Transformed::no(Expr::Between(b)),
        },
        Expr::InList(l) => {
            let mut all: Vec<&Expr> = vec![&l.expr];
            all.extend(l.list.iter());
            match retype(&all)? {
                Some(mut v) => {
                    let expr = v.remove(0);
                    Transformed::yes(Expr::InList(InList::new(Box::new(expr), v, l.negated)))
                }
                None => Transformed::no(Expr::InList(l)),
            }
        }
        other => Transformed::no(other),
    })
}

// ---------------------------------------------------------------------------------------------
// sum

/// The analyzer rule that gives `sum` PostgreSQL's result types (docs, 9.21 "Aggregate
/// Functions"): `sum(bigint)` is `numeric`, so it never overflows (its argument is cast to
/// `numeric` before DataFusion's type coercion, which then types everything above it
/// consistently); `sum(smallint)` and `sum(integer)` are `bigint` as in DataFusion;
/// `sum(real)` is `real` and `sum(double precision)` fails with 22003 when it overflows
/// ([`PgFloatSum`] in place of DataFusion's `sum`; `sum(DISTINCT ...)` of floats keeps
/// DataFusion's); `sum(numeric)` is exact and fails with 22003 past its precision
/// ([`PgNumericSum`]; DataFusion's wraps around). The same holds for `sum(...) OVER (...)`. `avg` of an integer argument is
/// `numeric`, and of a `numeric` one rounded to 16 decimals or the argument's ([`PgIntAvg`];
/// `avg(DISTINCT ...)` is [`crate::sql::functions::int_avg::PgAvg`]'s).
#[derive(Debug)]
pub struct PgSumTypes;

impl AnalyzerRule for PgSumTypes {
    fn name(&self) -> &str {
        "weir_pg_sum_types"
    }

    fn analyze(
        &self,
        plan: LogicalPlan,
        _config: &ConfigOptions,
    ) -> datafusion::common::Result<LogicalPlan> {
        Ok(plan
            .transform_up_with_subqueries(|plan| {
                if !matches!(&plan, LogicalPlan::Aggregate(_) | LogicalPlan::Window(_)) {
                    return Ok(Transformed::no(plan));
                }
                let schema = merge_schema(&plan.inputs());
                // A single bigint argument of `sum`, as `numeric`.
                let widen = |args: &mut Vec<Expr>| -> bool {
                    let bigint = args.len() == 1
                        && matches!(
                            args[0].get_type(&schema),
                            Ok(DataType::Int64 | DataType::UInt64)
                        );
                    if bigint {
                        let arg = args.remove(0);
                        args.push(Expr::Cast(datafusion::logical_expr::Cast::new(
                            Box::new(arg),
                            DataType::Decimal128(NUMERIC_MAX_PRECISION, 0),
                        )));
                    }
                    bigint
                };
                // A single `real` or `double precision` argument, not yet given to
                // PgFloatSum (this rule may see a plan twice).
                let float = |f: &Arc<AggregateUDF>, args: &[Expr]| -> bool {
                    args.len() == 1
                        && (f.inner().as_ref() as &dyn std::any::Any)
                            .downcast_ref::<PgFloatSum>()
                            .is_none()
                        && matches!(
                            args[0].get_type(&schema),
                            Ok(DataType::Float16 | DataType::Float32 | DataType::Float64)
                        )
                };
                // A single numeric argument of `sum` (a bigint one once widened), not yet
                // given to PgNumericSum.
                let numeric = |f: &Arc<AggregateUDF>, args: &[Expr], distinct: bool| -> bool {
                    !distinct
                        && args.len() == 1
                        && (f.inner().as_ref() as &dyn std::any::Any)
                            .downcast_ref::<PgNumericSum>()
                            .is_none()
                        && matches!(args[0].get_type(&schema), Ok(DataType::Decimal128(_, _)))
                };
                // A single integer or numeric argument of `avg`, not yet given to PgIntAvg.
                let int_avg = |f: &Arc<AggregateUDF>, args: &[Expr], distinct: bool| -> bool {
                    !distinct
                        && args.len() == 1
                        && (f.inner().as_ref() as &dyn std::any::Any)
                            .downcast_ref::<PgIntAvg>()
                            .is_none()
                        && crate::sql::functions::int_avg::exact_avg(
                            args[0].get_type(&schema).ok().as_ref(),
                        )
                };
                map_node_exprs(plan, |e| match e {
                    Expr::AggregateFunction(mut af)
                        if af.func.name() == "avg"
                            && int_avg(&af.func, &af.params.args, af.params.distinct) =>
                    {
                        af.func = Arc::new(AggregateUDF::new_from_impl(PgIntAvg::new()));
                        Ok(Transformed::yes(Expr::AggregateFunction(af)))
                    }
                    Expr::WindowFunction(mut wf)
                        if matches!(&wf.fun,
                                WindowFunctionDefinition::AggregateUDF(f)
                                    if f.name() == "avg"
                                        && int_avg(f, &wf.params.args, wf.params.distinct)) =>
                    {
                        wf.fun = WindowFunctionDefinition::AggregateUDF(Arc::new(
                            AggregateUDF::new_from_impl(PgIntAvg::new()),
                        ));
                        Ok(Transformed::yes(Expr::WindowFunction(wf)))
                    }
                    Expr::AggregateFunction(mut af) if af.func.name() == "sum" => {
                        if !af.params.distinct && float(&af.func, &af.params.args) {
                            af.func = Arc::new(AggregateUDF::new_from_impl(PgFloatSum::new()));
                            return Ok(Transformed::yes(Expr::AggregateFunction(af)));
                        }
                        let widened = widen(&mut af.params.args);
                        if numeric(&af.func, &af.params.args, af.params.distinct) {
                            af.func = Arc::new(AggregateUDF::new_from_impl(PgNumericSum::new()));
                            return Ok(Transformed::yes(Expr::AggregateFunction(af)));
                        }
                        Ok(if widened {
                            Transformed::yes(Expr::AggregateFunction(af))
                        } else {
                            Transformed::no(Expr::AggregateFunction(af))
                        })
                    }
                    // `sum(bigint) OVER (...)` as well.
                    Expr::WindowFunction(mut wf)
                        if matches!(&wf.fun,
                                WindowFunctionDefinition::AggregateUDF(f) if f.name() == "sum") =>
                    {
                        let float_sum = matches!(&wf.fun,
                                WindowFunctionDefinition::AggregateUDF(f)
                                    if float(f, &wf.params.args));
                        if float_sum && !wf.params.distinct {
                            wf.fun = WindowFunctionDefinition::AggregateUDF(Arc::new(
                                AggregateUDF::new_from_impl(PgFloatSum::new()),
                            ));
                            return Ok(Transformed::yes(Expr::WindowFunction(wf)));
                        }
                        let widened = widen(&mut wf.params.args);
                        let numeric_sum = matches!(&wf.fun,
                                WindowFunctionDefinition::AggregateUDF(f)
                                    if numeric(f, &wf.params.args, wf.params.distinct));
                        if numeric_sum {
                            wf.fun = WindowFunctionDefinition::AggregateUDF(Arc::new(
                                AggregateUDF::new_from_impl(PgNumericSum::new()),
                            ));
                            return Ok(Transformed::yes(Expr::WindowFunction(wf)));
                        }
                        Ok(if widened {
                            Transformed::yes(Expr::WindowFunction(wf))
                        } else {
                            Transformed::no(Expr::WindowFunction(wf))
                        })
                    }
                    other => Ok(Transformed::no(other)),
                })
            })?
            .data)
    }
}

/// `e` (an expression of a plan node) rewritten by `f`, under the name it had (`preserver`
/// is the node's). A grouping set (`ROLLUP (a % 2)`, `CUBE`, `GROUPING SETS`) keeps each of
/// its expressions' names instead: the aggregate names its columns after them, and a set
/// under an alias is no longer a grouping set to DataFusion (its planning then fails with
/// `No field named ...`).
fn keeping_names(
    preserver: &NamePreserver,
    e: Expr,
    mut f: impl FnMut(Expr) -> datafusion::common::Result<Transformed<Expr>>,
) -> datafusion::common::Result<Transformed<Expr>> {
    use datafusion::logical_expr::GroupingSet;
    let mut each = |e: Expr| -> datafusion::common::Result<(Expr, bool)> {
        let saved = preserver.save(&e);
        let t = f(e)?;
        Ok(if t.transformed {
            (saved.restore(t.data), true)
        } else {
            (t.data, false)
        })
    };
    let mut all = |exprs: Vec<Expr>| -> datafusion::common::Result<(Vec<Expr>, bool)> {
        let mut changed = false;
        let mut out = Vec::with_capacity(exprs.len());
        for e in exprs {
            let (e, c) = each(e)?;
            changed |= c;
            out.push(e);
        }
        Ok((out, changed))
    };
    let (e, changed) = match e {
        Expr::GroupingSet(GroupingSet::Rollup(exprs)) => {
            let (exprs, c) = all(exprs)?;
            (Expr::GroupingSet(GroupingSet::Rollup(exprs)), c)
        }
        Expr::GroupingSet(GroupingSet::Cube(exprs)) => {
            let (exprs, c) = all(exprs)?;
            (Expr::GroupingSet(GroupingSet::Cube(exprs)), c)
        }
        Expr::GroupingSet(GroupingSet::GroupingSets(sets)) => {
            let mut changed = false;
            let mut out = Vec::with_capacity(sets.len());
            for set in sets {
                let (set, c) = all(set)?;
                changed |= c;
                out.push(set);
            }
            (Expr::GroupingSet(GroupingSet::GroupingSets(out)), changed)
        }
        e => {
            return Ok({
                let (e, c) = each(e)?;
                if c {
                    Transformed::yes(e)
                } else {
                    Transformed::no(e)
                }
            });
        }
    };
    Ok(if changed {
        Transformed::yes(e)
    } else {
        Transformed::no(e)
    })
}

/// Rewrites every expression of one plan node bottom-up with `f`, keeping the node's output
/// names, and recomputes its schema when anything changed.
pub(crate) fn map_node_exprs(
    plan: LogicalPlan,
    mut f: impl FnMut(Expr) -> datafusion::common::Result<Transformed<Expr>>,
) -> datafusion::common::Result<Transformed<LogicalPlan>> {
    let preserver = NamePreserver::new(&plan);
    let t = plan.map_expressions(|e| keeping_names(&preserver, e, |e| e.transform_up(&mut f)))?;
    if t.transformed {
        t.map_data(|p| p.recompute_schema())
    } else {
        Ok(t)
    }
}

// ---------------------------------------------------------------------------------------------
// The analyzer rule

/// The analyzer rule that applies this module's rewrites (see the module docs).
#[derive(Debug)]
pub struct PgSemantics;

impl AnalyzerRule for PgSemantics {
    fn name(&self) -> &str {
        "weir_pg_semantics"
    }

    fn analyze(
        &self,
        plan: LogicalPlan,
        config: &ConfigOptions,
    ) -> datafusion::common::Result<LogicalPlan> {
        let zone = config
            .extensions
            .get::<SessionSettings>()
            .map(|s| s.time_zone_arrow.as_str())
            .filter(|z| !z.is_empty());
        Ok(plan
            .transform_up_with_subqueries(|p| rewrite_plan(p, zone))?
            .data)
    }
}

datafusion::common::extensions_options! {
    /// The session settings Weir's analyzer rules read, carried in DataFusion's config
    /// (`weir.*`) because a rule sees only the config.
    pub struct SessionSettings {
        /// The session's `TimeZone` in Arrow's form (`Europe/Berlin`, `-07:00`), that text
        /// cast to `timestamptz` without an offset is read in; empty for UTC.
        pub time_zone_arrow: String, default = String::new()
    }
}

impl datafusion::common::config::ConfigExtension for SessionSettings {
    const PREFIX: &'static str = "weir";
}

fn rewrite_plan(
    plan: LogicalPlan,
    zone: Option<&str>,
) -> datafusion::common::Result<Transformed<LogicalPlan>> {
    let mut schema = merge_schema(&plan.inputs());
    if let LogicalPlan::TableScan(ts) = &plan {
        let source =
            DFSchema::try_from_qualified_schema(ts.table_name.clone(), &ts.source.schema())?;
        schema.merge(&source);
    }
    let placed = array_null_placement(plan, &schema)?;
    let (plan, placed) = (placed.data, placed.transformed);
    let preserver = NamePreserver::new(&plan);
    let transformed = plan.map_expressions(|e| {
        keeping_names(&preserver, e, |e| {
            let (e, changed) = rewrite_tree(e, &schema, zone)?;
            Ok(if changed {
                Transformed::yes(e)
            } else {
                Transformed::no(e)
            })
        })
    })?;
    if transformed.transformed {
        transformed.map_data(|p| p.recompute_schema())
    } else {
        Ok(Transformed::new_transformed(transformed.data, placed))
    }
}

/// `ORDER BY arr ASC NULLS FIRST` and `ORDER BY arr DESC NULLS LAST` of an array as
/// `ORDER BY arr IS NULL <placement>, arr <direction>` with the direction's default NULL
/// placement. Arrow orders a list's elements with the key's own options, so the NULL
/// placement also moved NULL elements (`{1,NULL}` before `{1,2}` under `DESC NULLS LAST`);
/// PostgreSQL places only NULL arrays so and orders elements by `array_cmp`, NULL after
/// every value (the default placement of each direction gives that).
fn array_null_placement(
    plan: LogicalPlan,
    schema: &DFSchema,
) -> datafusion::common::Result<Transformed<LogicalPlan>> {
    let LogicalPlan::Sort(sort) = plan else {
        return Ok(Transformed::no(plan));
    };
    let moved = |s: &SortExpr| {
        s.asc == s.nulls_first
            && matches!(
                s.expr.get_type(schema),
                Ok(DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..))
            )
    };
    if !sort.expr.iter().any(moved) {
        return Ok(Transformed::no(LogicalPlan::Sort(sort)));
    }
    let expr = sort
        .expr
        .into_iter()
        .flat_map(|s| {
            if moved(&s) {
                vec![
                    SortExpr::new(s.expr.clone().is_null(), !s.nulls_first, false),
                    SortExpr::new(s.expr, s.asc, !s.asc),
                ]
            } else {
                vec![s]
            }
        })
        .collect();
    Ok(Transformed::yes(LogicalPlan::Sort(
        datafusion::logical_expr::Sort { expr, ..sort },
    )))
}

fn is_interval(t: &DataType) -> bool {
    matches!(t, DataType::Interval(_))
}

fn is_float(t: &DataType) -> bool {
    matches!(t, DataType::Float32 | DataType::Float64)
}

fn is_int(t: &DataType) -> bool {
    matches!(t, DataType::Int16 | DataType::Int32 | DataType::Int64)
}

fn call(name: &str, args: Vec<Expr>) -> Expr {
    let udf: Arc<ScalarUDF> = match name {
        "int_add" => Arc::new(ScalarUDF::new_from_impl(CheckedInt::new(IntOp::Add))),
        "int_sub" => Arc::new(ScalarUDF::new_from_impl(CheckedInt::new(IntOp::Sub))),
        "int_mul" => Arc::new(ScalarUDF::new_from_impl(CheckedInt::new(IntOp::Mul))),
        "int_neg" => Arc::new(ScalarUDF::new_from_impl(CheckedInt::new(IntOp::Neg))),
        "int_div" => Arc::new(ScalarUDF::new_from_impl(CheckedInt::new(IntOp::Div))),
        "int_mod" => Arc::new(ScalarUDF::new_from_impl(CheckedInt::new(IntOp::Rem))),
        "int_shl" => Arc::new(ScalarUDF::new_from_impl(CheckedInt::new(IntOp::Shl))),
        "int_shr" => Arc::new(ScalarUDF::new_from_impl(CheckedInt::new(IntOp::Shr))),
        "int4_check" => Arc::new(ScalarUDF::new_from_impl(CheckedInt::new(IntOp::Int4))),
        "numeric_mul" => Arc::new(ScalarUDF::new_from_impl(NumericArith::new(NumOp::Mul))),
        "float_add" => Arc::new(ScalarUDF::new_from_impl(FloatArith::new(FloatOp::Add))),
        "float_sub" => Arc::new(ScalarUDF::new_from_impl(FloatArith::new(FloatOp::Sub))),
        "float_mul" => Arc::new(ScalarUDF::new_from_impl(FloatArith::new(FloatOp::Mul))),
        "float_div" => Arc::new(ScalarUDF::new_from_impl(FloatArith::new(FloatOp::Div))),
        _ => Arc::new(ScalarUDF::new_from_impl(NumericArith::new(NumOp::Div))),
    };
    Expr::ScalarFunction(ScalarFunction::new_udf(udf, args))
}

/// `interval_cmp_key(e)`: an interval expression's key in PostgreSQL's order, a `numeric`.
pub(crate) fn interval_key(e: Expr) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::new(ScalarUDF::new_from_impl(IntervalCmpKey::new())),
        vec![e],
    ))
}

/// Rewrites one expression tree bottom-up; returns whether anything changed.
fn rewrite_tree(
    e: Expr,
    schema: &DFSchema,
    zone: Option<&str>,
) -> datafusion::common::Result<(Expr, bool)> {
    let wide = e.transform_down(|e| Ok(duration_product(e)))?;
    let fine = wide
        .data
        .transform_down(|e| microsecond_interval_arith(e, schema))?;
    let t = fine.data.transform_up(|e| rewrite_expr(e, schema, zone))?;
    Ok((
        t.data,
        wide.transformed || fine.transformed || t.transformed,
    ))
}

/// `timestamp(0)` or `timestamp(3)` (Arrow's second and millisecond units) plus or minus an
/// interval, computed in microseconds as PostgreSQL computes every timestamp: Arrow's
/// arithmetic kept the operand's unit and dropped the interval's finer part (`m + interval
/// '0.4996 second'` of a `timestamp(3)` lost 0.0006 s). A cast back to the column's precision
/// then rounds ([`super::functions::datetime_input::TimestampPrecision`]).
fn microsecond_interval_arith(
    e: Expr,
    schema: &DFSchema,
) -> datafusion::common::Result<Transformed<Expr>> {
    let Expr::BinaryExpr(b) = e else {
        return Ok(Transformed::no(e));
    };
    if !matches!(b.op, Operator::Plus | Operator::Minus) {
        return Ok(Transformed::no(Expr::BinaryExpr(b)));
    }
    let coarse = |t: &DataType| {
        matches!(
            t,
            DataType::Timestamp(TimeUnit::Second | TimeUnit::Millisecond, _)
        )
    };
    let lt = b.left.get_type(schema)?;
    let rt = b.right.get_type(schema)?;
    let widen = |side: Box<Expr>, t: &DataType| -> Box<Expr> {
        let DataType::Timestamp(_, tz) = t else {
            return side;
        };
        Box::new(Expr::Cast(datafusion::logical_expr::Cast::new(
            side,
            DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
        )))
    };
    if coarse(&lt) && is_interval(&rt) {
        let BinaryExpr { left, op, right } = b;
        return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
            left: widen(left, &lt),
            op,
            right,
        })));
    }
    if b.op == Operator::Plus && is_interval(&lt) && coarse(&rt) {
        let BinaryExpr { left, op, right } = b;
        return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
            left,
            op,
            right: widen(right, &rt),
        })));
    }
    Ok(Transformed::no(Expr::BinaryExpr(b)))
}

/// `date + n` as DataFusion plans it, `date + CAST(CAST(n * 86400 AS Duration(s)) AS
/// interval)`: the product of seconds is DataFusion's, in `bigint`, and stays one (checked)
/// rather than being read as a product of two `integer`s (`date '2000-01-01' + 24856`
/// overflowed `integer`).
fn duration_product(e: Expr) -> Transformed<Expr> {
    match e {
        Expr::Cast(c) if matches!(c.field.data_type(), DataType::Duration(_)) => match *c.expr {
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Multiply,
                right,
            }) => Transformed::yes(Expr::Cast(datafusion::logical_expr::Cast {
                expr: Box::new(call("int_mul", vec![*left, *right])),
                field: c.field,
            })),
            inner => Transformed::no(Expr::Cast(datafusion::logical_expr::Cast {
                expr: Box::new(inner),
                field: c.field,
            })),
        },
        other => Transformed::no(other),
    }
}

/// PostgreSQL's error for a call whose constant argument it refuses, where DataFusion
/// returns a value: `nth_value(x, 0)` (`22016` `argument of nth_value must be greater than
/// zero`; DataFusion gave NULLs) and `chr(0)` (`54000` `null character not permitted`;
/// DataFusion gave a NUL character, which PostgreSQL's text cannot hold).
fn constant_argument_error(e: &Expr) -> Option<Error> {
    let int = |a: Option<&Expr>| match a {
        Some(Expr::Literal(v, _)) => v.cast_to(&DataType::Int64).ok().and_then(|v| match v {
            ScalarValue::Int64(Some(i)) => Some(i),
            _ => None,
        }),
        _ => None,
    };
    match e {
        Expr::WindowFunction(w)
            if w.fun.name() == "nth_value" && int(w.params.args.get(1)).is_some_and(|n| n <= 0) =>
        {
            Some(Error::data(
                "22016",
                "argument of nth_value must be greater than zero",
            ))
        }
        Expr::ScalarFunction(f) if f.func.name() == "chr" && int(f.args.first()) == Some(0) => {
            Some(Error::data("54000", "null character not permitted"))
        }
        _ => None,
    }
}

/// The type of `e`, an operand this rule has rewritten: the checked arithmetic functions
/// return their first argument's type, and a cast its target, without asking DataFusion,
/// whose `get_type` of a function call names every call below it (a chain of `n` additions
/// cost O(n^2) per node, O(n^3) for the rule).
fn operand_type(e: &Expr, schema: &DFSchema) -> datafusion::common::Result<DataType> {
    let mut e = e;
    loop {
        match e {
            Expr::ScalarFunction(f)
                if !f.args.is_empty()
                    && matches!(
                        f.func.name(),
                        "int_add"
                            | "int_sub"
                            | "int_mul"
                            | "int_div"
                            | "int_mod"
                            | "int_shl"
                            | "int_shr"
                            | "int_neg"
                            | "float_add"
                            | "float_sub"
                            | "float_mul"
                    ) =>
            {
                e = &f.args[0];
            }
            Expr::Cast(c) => return Ok(c.field.data_type().clone()),
            other => return other.get_type(schema),
        }
    }
}

/// `e` as an `integer` expression when it is an `integer`/`smallint` widened to `bigint`, or a
/// `bigint` literal within `integer`'s range (how PostgreSQL types an integer literal).
fn as_int32(e: &Expr, schema: &DFSchema) -> Option<Expr> {
    match e {
        Expr::Cast(c) => match operand_type(&c.expr, schema).ok()? {
            DataType::Int32 => Some(c.expr.as_ref().clone()),
            DataType::Int16 => Some(
                c.expr
                    .as_ref()
                    .clone()
                    .cast_to(&DataType::Int32, schema)
                    .ok()?,
            ),
            _ => None,
        },
        Expr::Literal(ScalarValue::Int64(Some(v)), _) => i32::try_from(*v)
            .ok()
            .map(|v| Expr::Literal(ScalarValue::Int32(Some(v)), None)),
        // `-2147483647` is a negated literal until constant folding.
        Expr::Negative(inner) => match inner.as_ref() {
            Expr::Literal(ScalarValue::Int64(Some(v)), _) => v
                .checked_neg()
                .and_then(|n| i32::try_from(n).ok())
                .map(|n| Expr::Literal(ScalarValue::Int32(Some(n)), None)),
            _ => None,
        },
        _ => None,
    }
}

/// `e` in the integer type PostgreSQL gives it when DataFusion widened it to `bigint`: the
/// `smallint` or `integer` expression under a widening cast, an integer literal within
/// `integer`'s range as an `integer`. `None` when `e` is not such.
fn narrowest_int(e: &Expr, schema: &DFSchema) -> Option<Expr> {
    match e {
        Expr::Cast(c)
            if matches!(
                operand_type(&c.expr, schema).ok()?,
                DataType::Int16 | DataType::Int32
            ) =>
        {
            Some(c.expr.as_ref().clone())
        }
        other => as_int32(other, schema),
    }
}

/// One node of [`rewrite_tree`]; `zone` is the session's time zone (Arrow's form, `None`
/// for UTC).
fn rewrite_expr(
    e: Expr,
    schema: &DFSchema,
    zone: Option<&str>,
) -> datafusion::common::Result<Transformed<Expr>> {
    if let Some(err) = constant_argument_error(&e) {
        return Err(ours(err));
    }
    match e {
        // `timestamptz ± interval` in a session whose `TimeZone` is not UTC adds months and
        // days on the zone's wall clock (see `ZonedIntervalAdd`).
        Expr::BinaryExpr(b) if zone.is_some() && zoned_interval_arith(&b, schema)?.is_some() => {
            let swapped = zoned_interval_arith(&b, schema)?.unwrap_or(false);
            let BinaryExpr { left, op, right } = b;
            let (ts, interval) = if swapped {
                (*right, *left)
            } else {
                (*left, *right)
            };
            let udf = super::functions::at_time_zone::ZonedIntervalAdd::new(
                zone.unwrap_or_default(),
                op == Operator::Minus,
            );
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(
                    Arc::new(ScalarUDF::new_from_impl(udf)),
                    vec![ts, interval],
                ),
            )))
        }
        // In a session whose `TimeZone` is not UTC, a `timestamptz` becomes a date, a
        // `timestamp` or a time of day as its wall-clock time in that zone, and a
        // `timestamp` or date becomes the instant its wall-clock time is there (PostgreSQL
        // docs, 8.5.1.3); Arrow's casts read both in UTC.
        Expr::Cast(c) if zone.is_some() && zoned_cast(&c, schema)?.is_some() => {
            let (to_local, unit) = zoned_cast(&c, schema)?.unwrap_or((true, TimeUnit::Microsecond));
            let z = zone.unwrap_or_default();
            let target = c.field.data_type().clone();
            let input = if to_local {
                *c.expr
            } else {
                c.expr.cast_to(&DataType::Timestamp(unit, None), schema)?
            };
            let converted = in_zone(z, input);
            Ok(Transformed::yes(Expr::Cast(
                datafusion::logical_expr::Cast::new(Box::new(converted), target),
            )))
        }
        // `date_trunc` of a `timestamptz` truncates its wall-clock time in the session's zone
        // (a day starts at local midnight; DataFusion's `date_trunc` does so in the zone the
        // value is labelled with, and keeps the offset of an hour the clocks repeat, as
        // PostgreSQL's `timestamptz_trunc` does); the result is labelled UTC again.
        Expr::ScalarFunction(f)
            if zone.is_some()
                && f.func.name() == "date_trunc"
                && f.args.len() == 2
                && matches!(
                    f.args[1].get_type(schema)?,
                    DataType::Timestamp(_, Some(tz)) if Some(tz.as_ref()) != zone
                ) =>
        {
            let original = f.args[1].get_type(schema)?;
            let mut args = f.args;
            let ts = args.pop().unwrap_or(Expr::Literal(ScalarValue::Null, None));
            args.push(labelled_in(ts, &original, zone));
            let truncated = Expr::ScalarFunction(ScalarFunction::new_udf(f.func, args));
            Ok(Transformed::yes(Expr::Cast(
                datafusion::logical_expr::Cast::new(Box::new(truncated), original),
            )))
        }
        // `to_timestamp(text, format)` reads a time without an offset in the session's zone.
        Expr::ScalarFunction(f)
            if zone.is_some()
                && f.args.len() == 2
                && f.func
                    .inner()
                    .downcast_ref::<super::functions::to_timestamp::PgToDateTime>()
                    .is_some() =>
        {
            let zoned = f
                .func
                .inner()
                .downcast_ref::<super::functions::to_timestamp::PgToDateTime>()
                .map(|t| t.in_zone(zone.map(str::to_string)));
            match zoned {
                Some(udf) => Ok(Transformed::yes(Expr::ScalarFunction(
                    ScalarFunction::new_udf(Arc::new(ScalarUDF::new_from_impl(udf)), f.args),
                ))),
                None => Ok(Transformed::no(Expr::ScalarFunction(f))),
            }
        }
        // `to_char` of a `timestamptz` shows it in the session's zone.
        Expr::ScalarFunction(f)
            if zone.is_some()
                && f.func.name() == "to_char"
                && matches!(
                    f.args.first().map(|a| a.get_type(schema)).transpose()?,
                    Some(DataType::Timestamp(_, Some(tz))) if Some(tz.as_ref()) != zone
                ) =>
        {
            let original = f.args[0].get_type(schema)?;
            let mut args = f.args;
            let ts = std::mem::replace(&mut args[0], Expr::Literal(ScalarValue::Null, None));
            args[0] = labelled_in(ts, &original, zone);
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(f.func, args),
            )))
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let lt = operand_type(&left, schema)?;
            let rt = operand_type(&right, schema)?;
            // PostgreSQL has no `%` for floats (`mod` and `%` take integers and numeric).
            if op == Operator::Modulo && (is_float(&lt) || is_float(&rt)) {
                return Err(ours(Error::plan(
                    "42883",
                    format!(
                        "operator does not exist: {} % {}",
                        crate::sql::functions::pg_type_name(&lt),
                        crate::sql::functions::pg_type_name(&rt)
                    ),
                )));
            }
            // `a << n`: in `a`'s own type (a `smallint` or `integer` column, an integer
            // literal), where DataFusion widened `a` to the count's `bigint`.
            if matches!(op, Operator::BitwiseShiftLeft | Operator::BitwiseShiftRight)
                && is_int(&lt)
                && is_int(&rt)
            {
                let a = narrowest_int(&left, schema).unwrap_or_else(|| left.as_ref().clone());
                let name = if op == Operator::BitwiseShiftLeft {
                    "int_shl"
                } else {
                    "int_shr"
                };
                let shifted = call(name, vec![a.clone(), *right]);
                return Ok(Transformed::yes(if operand_type(&a, schema)? == lt {
                    shifted
                } else {
                    Expr::Cast(datafusion::logical_expr::Cast::new(Box::new(shifted), lt))
                }));
            }
            let name = match op {
                Operator::Divide | Operator::Modulo if is_int(&lt) && lt == rt => {
                    Some(if op == Operator::Divide {
                        "int_div"
                    } else {
                        "int_mod"
                    })
                }
                Operator::Plus | Operator::Minus | Operator::Multiply
                    if is_int(&lt) && lt == rt =>
                {
                    Some(match op {
                        Operator::Plus => "int_add",
                        Operator::Minus => "int_sub",
                        _ => "int_mul",
                    })
                }
                Operator::Plus | Operator::Minus | Operator::Multiply
                    if is_float(&lt) && lt == rt =>
                {
                    Some(match op {
                        Operator::Plus => "float_add",
                        Operator::Minus => "float_sub",
                        _ => "float_mul",
                    })
                }
                Operator::Multiply => match (&lt, &rt) {
                    (DataType::Decimal128(p1, _), DataType::Decimal128(p2, _))
                        if u16::from(*p1) + u16::from(*p2) + 1
                            > u16::from(NUMERIC_MAX_PRECISION) =>
                    {
                        Some("numeric_mul")
                    }
                    _ => None,
                },
                Operator::Divide => match (&lt, &rt) {
                    (DataType::Decimal128(..), DataType::Decimal128(..)) => Some("numeric_div"),
                    (DataType::Float64, DataType::Float64)
                    | (DataType::Float32, DataType::Float32) => Some("float_div"),
                    _ => None,
                },
                _ => None,
            };
            Ok(match name {
                Some(n) if n.starts_with("int_") && lt == DataType::Int64 => {
                    // `int_col + 1`: DataFusion widens both to bigint; PostgreSQL adds two
                    // integers (an integer literal is an `integer`) and overflows as one.
                    match (as_int32(&left, schema), as_int32(&right, schema)) {
                        (Some(l), Some(r)) => {
                            Transformed::yes(Expr::Cast(datafusion::logical_expr::Cast::new(
                                Box::new(call(n, vec![l, r])),
                                DataType::Int64,
                            )))
                        }
                        _ => Transformed::yes(call(n, vec![*left, *right])),
                    }
                }
                // `1 / 3.0`: the integer literal is read as a decimal of its own digits, not
                // of bigint's 20, so that the quotient's column keeps PostgreSQL's 20
                // decimals (see `numeric_div_scale`).
                Some(n @ "numeric_div") => {
                    Transformed::yes(call(n, vec![tight_decimal_literal(*left), *right]))
                }
                Some(n) => Transformed::yes(call(n, vec![*left, *right])),
                None => Transformed::no(Expr::BinaryExpr(BinaryExpr { left, op, right })),
            })
        }
        // A negated literal stays as it is (constant folding computes it; `-2147483647` is an
        // `integer` literal for `as_int32`).
        Expr::Negative(inner)
            if !matches!(inner.as_ref(), Expr::Literal(..)) && is_int(&inner.get_type(schema)?) =>
        {
            Ok(Transformed::yes(call("int_neg", vec![*inner])))
        }
        // `floor`/`ceil` of a `numeric` is an integral `numeric` (scale 0, PostgreSQL's
        // `numeric_floor`); DataFusion keeps the argument's scale (`floor(1.5)` = `1.0`).
        Expr::ScalarFunction(f)
            if matches!(f.func.name(), "floor" | "ceil") && f.args.len() == 1 =>
        {
            match f.args[0].get_type(schema)? {
                DataType::Decimal128(p, s) if s > 0 => {
                    // One more integer digit than the argument's, for the argument too
                    // (DataFusion rounds in its type): ceil(9.5) = 10.
                    let wider = p.saturating_add(1).min(NUMERIC_MAX_PRECISION);
                    let digits =
                        (i16::from(p) - i16::from(s) + 1).clamp(1, NUMERIC_MAX_PRECISION.into());
                    let arg = f.args[0]
                        .clone()
                        .cast_to(&DataType::Decimal128(wider, s), schema)?;
                    let rounded = Expr::ScalarFunction(ScalarFunction::new_udf(
                        Arc::clone(&f.func),
                        vec![arg],
                    ));
                    Ok(Transformed::yes(Expr::Cast(
                        datafusion::logical_expr::Cast::new(
                            Box::new(rounded),
                            DataType::Decimal128(digits as u8, 0),
                        ),
                    )))
                }
                _ => Ok(Transformed::no(Expr::ScalarFunction(f))),
            }
        }
        // A timestamp cast to text prints PostgreSQL's output form.
        Expr::Cast(c)
            if matches!(c.field.data_type(), DataType::Utf8)
                && matches!(c.expr.get_type(schema)?, DataType::Timestamp(..)) =>
        {
            let udf = Arc::new(ScalarUDF::new_from_impl(
                TimestampOutput::default().in_zone(zone.map(str::to_string)),
            ));
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(udf, vec![*c.expr]),
            )))
        }
        // So does an interval cast to text.
        Expr::Cast(c)
            if matches!(c.field.data_type(), DataType::Utf8)
                && matches!(c.expr.get_type(schema)?, DataType::Interval(_)) =>
        {
            let interval = c
                .expr
                .cast_to(&DataType::Interval(IntervalUnit::MonthDayNano), schema)?;
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(
                    Arc::new(ScalarUDF::new_from_impl(IntervalOutput::new())),
                    vec![interval],
                ),
            )))
        }
        // A `timestamptz`'s fields are read in the session's time zone.
        Expr::ScalarFunction(f)
            if zone.is_some()
                && f.args.len() == 2
                && super::functions::extract::DatePart::is_named(f.name()).is_some()
                && matches!(f.args[1].get_type(schema)?, DataType::Timestamp(_, Some(_))) =>
        {
            use super::functions::extract::DatePart;
            let numeric = DatePart::is_named(f.name()) == Some(true);
            let udf = Arc::new(ScalarUDF::new_from_impl(DatePart::new(
                numeric,
                zone.map(str::to_string),
            )));
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(udf, f.args),
            )))
        }
        // Floats, numerics, arrays and bytea cast to text print PostgreSQL's forms.
        Expr::Cast(c)
            if matches!(c.field.data_type(), DataType::Utf8)
                && super::functions::text_output::differs_from_arrow(&c.expr.get_type(schema)?) =>
        {
            use super::functions::text_output::TextOutput;
            let udf = Arc::new(ScalarUDF::new_from_impl(TextOutput::new(
                zone.map(str::to_string),
            )));
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(udf, vec![*c.expr]),
            )))
        }
        // Text cast to `bytea` is read in PostgreSQL's hex or escape format.
        Expr::Cast(c)
            if matches!(
                c.field.data_type(),
                DataType::Binary | DataType::LargeBinary | DataType::BinaryView
            ) && matches!(c.expr.get_type(schema)?, DataType::Utf8) =>
        {
            use super::functions::text_output::ByteaInput;
            let udf = Arc::new(ScalarUDF::new_from_impl(ByteaInput::default()));
            let bytes = Expr::ScalarFunction(ScalarFunction::new_udf(udf, vec![*c.expr]));
            Ok(Transformed::yes(
                if matches!(c.field.data_type(), DataType::Binary) {
                    bytes
                } else {
                    Expr::Cast(datafusion::logical_expr::Cast::new(
                        Box::new(bytes),
                        c.field.data_type().clone(),
                    ))
                },
            ))
        }
        // A numeric cast to a float is the float nearest its decimal value.
        Expr::Cast(c)
            if matches!(c.field.data_type(), DataType::Float64 | DataType::Float32)
                && matches!(c.expr.get_type(schema)?, DataType::Decimal128(..)) =>
        {
            use super::functions::text_output::NumericToFloat;
            let real = matches!(c.field.data_type(), DataType::Float32);
            let udf = Arc::new(ScalarUDF::new_from_impl(NumericToFloat::new(real)));
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(udf, vec![*c.expr]),
            )))
        }
        // A float cast to `numeric` keeps the float's significant digits (15 of a `double
        // precision`, 6 of a `real`), as PostgreSQL's `float8_numeric`.
        Expr::Cast(c)
            if matches!(c.field.data_type(), DataType::Decimal128(..))
                && matches!(
                    c.expr.get_type(schema)?,
                    DataType::Float64 | DataType::Float32
                ) =>
        {
            use super::functions::number_input::{FloatDigits, NumberTarget, NumberText};
            let digits = Expr::ScalarFunction(ScalarFunction::new_udf(
                Arc::new(ScalarUDF::new_from_impl(FloatDigits::new())),
                vec![*c.expr],
            ));
            let text = Expr::ScalarFunction(ScalarFunction::new_udf(
                Arc::new(ScalarUDF::new_from_impl(NumberText::new(
                    NumberTarget::Numeric,
                ))),
                vec![digits],
            ));
            Ok(Transformed::yes(Expr::Cast(
                datafusion::logical_expr::Cast {
                    expr: Box::new(text),
                    field: c.field,
                },
            )))
        }
        // `concat`, `concat_ws` and `format` print a boolean as its output function does (`t`, `f`),
        // where a cast to text gives `true` (PostgreSQL's `concat` calls each argument's
        // output function).
        Expr::ScalarFunction(mut f)
            if matches!(f.name(), "concat" | "concat_ws" | "format")
                && f.args.iter().any(|a| boolean_as_text(a, schema)) =>
        {
            for a in &mut f.args {
                if boolean_as_text(a, schema) {
                    let Expr::Cast(c) = a.clone() else { continue };
                    // CASE b WHEN true THEN 't' WHEN false THEN 'f' END: NULL stays NULL.
                    let arm = |b: bool, t: &str| {
                        (
                            Box::new(Expr::Literal(ScalarValue::Boolean(Some(b)), None)),
                            Box::new(Expr::Literal(ScalarValue::from(t), None)),
                        )
                    };
                    *a = Expr::Case(datafusion::logical_expr::expr::Case::new(
                        Some(c.expr),
                        vec![arm(true, "t"), arm(false, "f")],
                        None,
                    ));
                }
            }
            Ok(Transformed::yes(Expr::ScalarFunction(f)))
        }
        // `gcd` and `lcm` of `integer`s are `integer`s (22003 past its range); DataFusion
        // computes them in `bigint`.
        Expr::ScalarFunction(f)
            if matches!(f.func.name(), "gcd" | "lcm")
                && f.args.len() == 2
                && f.args.iter().all(|a| as_int32(a, schema).is_some()) =>
        {
            Ok(Transformed::yes(call(
                "int4_check",
                vec![Expr::ScalarFunction(f)],
            )))
        }
        Expr::SimilarTo(like) => similar_to(like),
        // A timestamp or text cast to `timestamp(0)` / `timestamp(3)` (Arrow's second and
        // millisecond units) is rounded to that precision, as PostgreSQL rounds
        // (`'10:00:00.7'::timestamp(0)` is 10:00:01; Arrow's cast truncated), then cast.
        Expr::Cast(c) if coarse_timestamp_cast(&c, schema)? => {
            let target = c.field.data_type().clone();
            let DataType::Timestamp(unit, tz) = target.clone() else {
                return Ok(Transformed::no(Expr::Cast(c)));
            };
            let from = c.expr.get_type(schema)?;
            let micros = datafusion::logical_expr::Cast::new(
                c.expr,
                DataType::Timestamp(TimeUnit::Microsecond, tz),
            );
            let micros = if matches!(from, DataType::Timestamp(..)) {
                Expr::Cast(micros)
            } else {
                datetime_text_cast(micros, schema, zone)?.data
            };
            let rounded = Expr::ScalarFunction(ScalarFunction::new_udf(
                Arc::new(ScalarUDF::new_from_impl(
                    super::functions::datetime_input::TimestampPrecision::new(unit),
                )),
                vec![micros],
            ));
            Ok(Transformed::yes(Expr::Cast(
                datafusion::logical_expr::Cast::new(Box::new(rounded), target),
            )))
        }
        // An array of arrays cast to an array type: Weir's arrays have one dimension, and
        // Arrow's cast wrote each sub-array as one text element (`{"[a, ]","[, b]"}`).
        Expr::Cast(c)
            if is_nested_list(&c.expr.get_type(schema)?)
                && !is_nested_list(c.field.data_type()) =>
        {
            Err(DataFusionError::External(Box::new(
                crate::error::Error::not_supported("multidimensional arrays are not supported"),
            )))
        }
        // `character(n)` or `varchar` cast to text is `text` (see `AsText`).
        Expr::Cast(c)
            if *c.field.data_type() == DataType::Utf8
                && c.expr.get_type(schema)? == DataType::Utf8
                && crate::common::schema::PgTextType::of(c.expr.to_field(schema)?.1.metadata())
                    != crate::common::schema::PgTextType::Text =>
        {
            Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(
                    Arc::new(ScalarUDF::new_from_impl(
                        super::functions::bpchar::AsText::default(),
                    )),
                    vec![*c.expr],
                ),
            )))
        }
        // Text cast to an interval or a timestamp reads PostgreSQL's input forms too.
        Expr::Cast(c) => match rounding_int_cast(&c, schema)? {
            Some(rounded) => Ok(Transformed::yes(rounded)),
            None => datetime_text_cast(c, schema, zone),
        },
        other => Ok(Transformed::no(other)),
    }
}

/// True when `e` is a boolean cast to text (DataFusion's coercion of a `concat` argument).
fn boolean_as_text(e: &Expr, schema: &DFSchema) -> bool {
    matches!(e, Expr::Cast(c)
        if matches!(c.field.data_type(), DataType::Utf8 | DataType::Utf8View)
            && matches!(c.expr.get_type(schema), Ok(DataType::Boolean)))
}

/// For `ts ± interval` or `interval + ts` with `ts` a `timestamptz`: `Some(swapped)`, true
/// when the interval is on the left; `None` for other expressions.
fn zoned_interval_arith(
    b: &BinaryExpr,
    schema: &DFSchema,
) -> datafusion::common::Result<Option<bool>> {
    if !matches!(b.op, Operator::Plus | Operator::Minus) {
        return Ok(None);
    }
    let lt = b.left.get_type(schema)?;
    let rt = b.right.get_type(schema)?;
    let tstz = |t: &DataType| matches!(t, DataType::Timestamp(_, Some(_)));
    Ok(if tstz(&lt) && is_interval(&rt) {
        Some(false)
    } else if b.op == Operator::Plus && is_interval(&lt) && tstz(&rt) {
        Some(true)
    } else {
        None
    })
}

/// For a cast between a `timestamptz` and a type without a zone: `Some((true, unit))` from a
/// `timestamptz` of `unit` to a date, `timestamp` or time of day; `Some((false, unit))` from
/// a `timestamp` or date to a `timestamptz` of `unit`; `None` for other casts.
fn zoned_cast(
    c: &datafusion::logical_expr::Cast,
    schema: &DFSchema,
) -> datafusion::common::Result<Option<(bool, TimeUnit)>> {
    let from = c.expr.get_type(schema)?;
    Ok(match (&from, c.field.data_type()) {
        (
            DataType::Timestamp(unit, Some(_)),
            DataType::Date32
            | DataType::Date64
            | DataType::Timestamp(_, None)
            | DataType::Time32(_)
            | DataType::Time64(_),
        ) => Some((true, *unit)),
        (
            DataType::Timestamp(_, None) | DataType::Date32 | DataType::Date64,
            DataType::Timestamp(unit, Some(_)),
        ) => Some((false, *unit)),
        _ => None,
    })
}

/// The `timestamptz` `ts` (of type `original`) labelled with the zone `zone` (Arrow's form):
/// the same instants, which Arrow's and DataFusion's kernels then read on that zone's clock.
fn labelled_in(ts: Expr, original: &DataType, zone: Option<&str>) -> Expr {
    let DataType::Timestamp(unit, _) = original else {
        return ts;
    };
    Expr::Cast(datafusion::logical_expr::Cast::new(
        Box::new(ts),
        DataType::Timestamp(*unit, zone.map(Arc::from)),
    ))
}

/// `timezone(zone, e)` for the session's zone `zone` (Arrow's form): a `timestamptz` as its
/// wall-clock time there, or a `timestamp` as the instant it is there.
fn in_zone(zone: &str, e: Expr) -> Expr {
    use super::functions::at_time_zone::{AtTimeZone, session_zone_argument};
    let udf = Arc::new(ScalarUDF::new_from_impl(AtTimeZone::default()));
    Expr::ScalarFunction(ScalarFunction::new_udf(
        udf,
        vec![Expr::Literal(session_zone_argument(zone), None), e],
    ))
}

/// Whether `c` casts a finer timestamp (microseconds, nanoseconds) or text to a timestamp of
/// seconds or milliseconds, not already rounded by [`super::functions::datetime_input::
/// TimestampPrecision`].
fn coarse_timestamp_cast(
    c: &datafusion::logical_expr::Cast,
    schema: &DFSchema,
) -> datafusion::common::Result<bool> {
    if !matches!(
        c.field.data_type(),
        DataType::Timestamp(TimeUnit::Second | TimeUnit::Millisecond, _)
    ) {
        return Ok(false);
    }
    if matches!(c.expr.as_ref(), Expr::ScalarFunction(f)
        if f.name() == super::functions::datetime_input::TimestampPrecision::NAME)
    {
        return Ok(false);
    }
    Ok(matches!(
        c.expr.get_type(schema)?,
        DataType::Timestamp(TimeUnit::Microsecond | TimeUnit::Nanosecond, _)
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
    ))
}

/// Whether `t` is an array whose elements are arrays (a multidimensional array).
fn is_nested_list(t: &DataType) -> bool {
    matches!(t, DataType::List(item) | DataType::LargeList(item)
        if matches!(item.data_type(), DataType::List(_) | DataType::LargeList(_)))
}

/// A cast of text (not already rewritten) to an interval or a timestamp type, rewritten to
/// cast the text as [`super::functions::datetime_input`] reads it; other casts unchanged.
fn datetime_text_cast(
    c: datafusion::logical_expr::Cast,
    schema: &DFSchema,
    zone: Option<&str>,
) -> datafusion::common::Result<Transformed<Expr>> {
    let (target, type_name) = match c.field.data_type() {
        DataType::Interval(_) => (Target::Interval, "interval"),
        DataType::Timestamp(_, Some(_)) => (Target::Timestamp, "timestamp with time zone"),
        DataType::Timestamp(_, None) => (Target::Timestamp, "timestamp"),
        DataType::Date32 => (Target::Date, "date"),
        DataType::Time64(_) | DataType::Time32(_) => (Target::Time, "time without time zone"),
        _ => return number_text_cast(c, schema),
    };
    let rewritten = matches!(c.expr.as_ref(), Expr::ScalarFunction(f)
        if f.name() == DateTimeText::name_of(target));
    let from = c.expr.get_type(schema)?;
    if rewritten
        || !matches!(
            from,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        )
    {
        return Ok(Transformed::no(Expr::Cast(c)));
    }
    let text = if from == DataType::Utf8 {
        *c.expr
    } else {
        Expr::Cast(datafusion::logical_expr::Cast::new(c.expr, DataType::Utf8))
    };
    // Text without an offset cast to `timestamptz` is read in the session's time zone.
    let session_zone = zone.map(str::to_string);
    let zone = matches!(c.field.data_type(), DataType::Timestamp(_, Some(_)))
        .then(|| session_zone.clone())
        .flatten();
    let udf = Arc::new(ScalarUDF::new_from_impl(
        DateTimeText::new(target, type_name)
            .in_zone(zone)
            .in_session_zone(session_zone),
    ));
    Ok(Transformed::yes(Expr::Cast(
        datafusion::logical_expr::Cast {
            expr: Box::new(Expr::ScalarFunction(ScalarFunction::new_udf(
                udf,
                vec![text],
            ))),
            field: c.field,
        },
    )))
}

/// A cast of text (not already rewritten) to `double precision`, `real` or `numeric`,
/// rewritten to cast the text as [`super::functions::number_input`] checks it; other casts
/// unchanged.
fn number_text_cast(
    c: datafusion::logical_expr::Cast,
    schema: &DFSchema,
) -> datafusion::common::Result<Transformed<Expr>> {
    use super::functions::number_input::{NumberTarget, NumberText};
    let Some(target) = NumberTarget::of(c.field.data_type()) else {
        return Ok(Transformed::no(Expr::Cast(c)));
    };
    let rewritten =
        matches!(c.expr.as_ref(), Expr::ScalarFunction(f) if f.name() == NumberText::NAME);
    if rewritten || c.expr.get_type(schema)? != DataType::Utf8 {
        return Ok(Transformed::no(Expr::Cast(c)));
    }
    let udf = Arc::new(ScalarUDF::new_from_impl(NumberText::new(target)));
    Ok(Transformed::yes(Expr::Cast(
        datafusion::logical_expr::Cast {
            expr: Box::new(Expr::ScalarFunction(ScalarFunction::new_udf(
                udf,
                vec![*c.expr],
            ))),
            field: c.field,
        },
    )))
}

/// The type of PostgreSQL's `numeric` without a type modifier in Weir: DataFusion's
/// `NUMERIC`, 38 digits with 10 decimals.
pub const UNCONSTRAINED_NUMERIC: DataType = DataType::Decimal128(NUMERIC_MAX_PRECISION, 10);

/// `plan` with its parameters that DataFusion typed `numeric(p, s)` after the other operand
/// (`v = $1`, `v + $1` with a `numeric(10,2)` column) typed as an unconstrained `numeric`
/// ([`UNCONSTRAINED_NUMERIC`]), as PostgreSQL types them: a parameter's type carries no type
/// modifier, so its value keeps its decimals. Typed as the column, `1.005` was rounded to
/// `1.01` before it was compared or added (asyncpg and node-postgres, which let the server
/// type their parameters, matched the row holding `1.01` with `v = $1`). A write still rounds
/// the value to the column's scale when it stores it; `$1::numeric(10,2)` rounds as cast.
///
/// # Errors
/// DataFusion's, when a node cannot be rebuilt with its new schema.
pub fn unconstrained_numeric_parameters(
    plan: LogicalPlan,
) -> datafusion::common::Result<LogicalPlan> {
    let constrained = |p: &datafusion::logical_expr::expr::Placeholder| {
        p.field.as_ref().is_some_and(|f| {
            matches!(f.data_type(), DataType::Decimal128(..))
                && *f.data_type() != UNCONSTRAINED_NUMERIC
        })
    };
    let mut any = false;
    plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                any |= matches!(e, Expr::Placeholder(p) if constrained(p));
                Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
            })
        })
    })?;
    if !any {
        return Ok(plan);
    }
    Ok(plan
        .transform_up_with_subqueries(|node| {
            let node = node
                .map_expressions(|e| {
                    e.transform_up(|e| match e {
                        Expr::Placeholder(mut p) if constrained(&p) => {
                            p.field = p.field.map(|f| {
                                Arc::new(f.as_ref().clone().with_data_type(UNCONSTRAINED_NUMERIC))
                            });
                            Ok(Transformed::yes(Expr::Placeholder(p)))
                        }
                        other => Ok(Transformed::no(other)),
                    })
                })?
                .data;
            Ok(Transformed::yes(node.recompute_schema()?))
        })?
        .data)
}

/// PostgreSQL types an integer literal that fits in 32 bits as `integer` (`SELECT 1` is
/// `int4`: docs, 4.1.2.6 "Numeric Constants"); DataFusion as `bigint`. Select-list items
/// that are such literals (`SELECT 1`, `SELECT -5 AS n`), or integer arithmetic over `integer`
/// columns, such literals and differences of dates (`SELECT a + 1`, `SELECT d - e`), or
/// `coalesce`, `greatest`, `least` and `nullif`
/// of them and NULLs (`SELECT coalesce(a, 0)`), and the columns of a `VALUES` list whose rows
/// are all such literals (or NULL), are made `integer` here (and `sum`, `min` and `max` of
/// such literals or arithmetic read them as `integer`s: `sum(1)` is a `bigint`), in the query's output and in its
/// derived tables, `UNION` branches and subqueries: drivers see PostgreSQL's type
/// (node-postgres returned a `bigint` as a string), and the values compute as PostgreSQL's
/// do (`sum(x) / 2` over `VALUES (1), (2)` sums `integer`s to a `bigint` and divides as
/// integers, where a `bigint`'s sum was a `numeric`). Literals inside other expressions keep
/// DataFusion's typing (the integer operators of this module already compute them as
/// PostgreSQL does). Runs on a statement's plan before analysis, whose type coercion then
/// retypes the nodes above (a `UNION` of `1` and `3000000000` is a `bigint`). A recursive
/// query keeps DataFusion's types.
///
/// # Errors
/// DataFusion's, when a node cannot be rebuilt.
pub fn int4_output_literals(plan: LogicalPlan) -> datafusion::common::Result<LogicalPlan> {
    // A recursive query's work table was typed by its first term when planned: it keeps
    // DataFusion's types.
    let mut recursive = false;
    plan.apply_with_subqueries(|p| {
        use datafusion::common::tree_node::TreeNodeRecursion;
        recursive = matches!(p, LogicalPlan::RecursiveQuery(_));
        Ok(if recursive {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    })?;
    if recursive {
        return Ok(plan);
    }
    Ok(plan
        .transform_up_with_subqueries(|p| {
            Ok(match p {
                LogicalPlan::Projection(p) => Transformed::yes(int4_projection(p)?),
                LogicalPlan::Values(v) => Transformed::yes(int4_values(v)?),
                LogicalPlan::Aggregate(a) => Transformed::yes(int4_aggregate(a)?),
                LogicalPlan::Filter(f) => {
                    let input_schema = Arc::clone(f.input.schema());
                    let predicate = int4_within(f.predicate, &input_schema).data;
                    Transformed::yes(LogicalPlan::Filter(
                        datafusion::logical_expr::Filter::try_new(predicate, f.input)?,
                    ))
                }
                LogicalPlan::Sort(mut sort) => {
                    let input_schema = Arc::clone(sort.input.schema());
                    for key in &mut sort.expr {
                        let e = std::mem::replace(
                            &mut key.expr,
                            Expr::Literal(ScalarValue::Null, None),
                        );
                        key.expr = int4_within(e, &input_schema).data;
                    }
                    Transformed::yes(LogicalPlan::Sort(sort))
                }
                // Typed again from its branches (by the first; type coercion then finds
                // the type common to all), not kept from when they were `bigint`s.
                LogicalPlan::Union(u) => Transformed::yes(LogicalPlan::Union(
                    datafusion::logical_expr::Union::try_new_with_loose_types(u.inputs)?,
                )),
                other => Transformed::yes(other.recompute_schema()?),
            })
        })?
        .data)
}

/// An integer literal within `integer`'s range (`5`, `-5`) as an `integer` literal.
fn int4_literal(e: &Expr) -> Option<Expr> {
    let v = match e {
        Expr::Literal(ScalarValue::Int64(Some(v)), _) => *v,
        Expr::Negative(inner) => match inner.as_ref() {
            Expr::Literal(ScalarValue::Int64(Some(v)), _) => v.checked_neg()?,
            _ => return None,
        },
        _ => return None,
    };
    i32::try_from(v)
        .ok()
        .map(|v| Expr::Literal(ScalarValue::Int32(Some(v)), None))
}

/// The columns of `v` whose rows are all integer literals within `integer`'s range (or
/// NULL, at least one a number) as `integer`s.
fn int4_values(v: datafusion::logical_expr::Values) -> datafusion::common::Result<LogicalPlan> {
    let width = v.schema.fields().len();
    let narrow: Vec<bool> = (0..width)
        .map(|c| {
            v.schema.field(c).data_type() == &DataType::Int64
                && v.values.iter().all(|row| {
                    row.get(c).is_some_and(|e| {
                        int4_literal(e).is_some()
                            || matches!(e.clone().unalias_nested().data, Expr::Literal(v, _)
                                if v.is_null())
                            || matches!(e, Expr::Cast(c) if matches!(c.expr.as_ref(),
                                Expr::Literal(v, _) if v.is_null()))
                    })
                })
                && v.values
                    .iter()
                    .any(|row| row.get(c).and_then(int4_literal).is_some())
        })
        .collect();
    if !narrow.contains(&true) {
        return Ok(LogicalPlan::Values(v));
    }
    let values = v
        .values
        .into_iter()
        .map(|row| {
            row.into_iter()
                .enumerate()
                .map(|(c, e)| match (narrow.get(c), int4_literal(&e)) {
                    (Some(true), Some(int4)) => int4,
                    (Some(true), None) => Expr::Literal(ScalarValue::Int32(None), None),
                    _ => e,
                })
                .collect()
        })
        .collect();
    let fields: Vec<_> = v
        .schema
        .iter()
        .enumerate()
        .map(|(c, (q, f))| {
            let f = if narrow.get(c) == Some(&true) {
                Arc::new(f.as_ref().clone().with_data_type(DataType::Int32))
            } else {
                Arc::clone(f)
            };
            (q.cloned(), f)
        })
        .collect();
    let schema = DFSchema::new_with_metadata(fields, v.schema.metadata().clone())?;
    Ok(LogicalPlan::Values(datafusion::logical_expr::Values {
        schema: Arc::new(schema),
        values,
    }))
}

/// True when `e` is an integer literal within `integer`'s range, an expression of type
/// `integer` or `smallint` (a column, a cast, `length(x)`), or [`int4_arithmetic`] over
/// them.
fn leaf_or_arith(e: &Expr, schema: &DFSchema) -> bool {
    match e {
        Expr::Literal(ScalarValue::Int64(Some(v)), _) => i32::try_from(*v).is_ok(),
        Expr::Literal(ScalarValue::Int32(Some(_)), _) => true,
        Expr::Literal(..) => false,
        other => {
            matches!(
                other.get_type(schema),
                Ok(DataType::Int32 | DataType::Int16)
            ) || int4_arithmetic(other, schema)
                || date_difference(other, schema)
        }
    }
}
/// True when `e` is `date - date`, which PostgreSQL types `integer` (days; `date_mi`),
/// DataFusion `bigint`.
fn date_difference(e: &Expr, schema: &DFSchema) -> bool {
    matches!(e, Expr::BinaryExpr(BinaryExpr { left, op: Operator::Minus, right })
        if matches!(left.get_type(schema), Ok(DataType::Date32))
            && matches!(right.get_type(schema), Ok(DataType::Date32))
            && matches!(e.get_type(schema), Ok(DataType::Int64)))
}
/// True when `e` is integer arithmetic PostgreSQL types `integer`: `+ - * / %` and
/// negation over `integer` and `smallint` expressions and integer literals within
/// `integer`'s range (at least one operator; DataFusion types it `bigint`, the literals
/// being `bigint`). Arithmetic DataFusion types `smallint` (`smallint + smallint`) is
/// PostgreSQL's `smallint` too, and is not one.
fn int4_arithmetic(e: &Expr, schema: &DFSchema) -> bool {
    if matches!(e.get_type(schema), Ok(DataType::Int16)) {
        return false;
    }
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            matches!(
                op,
                Operator::Plus
                    | Operator::Minus
                    | Operator::Multiply
                    | Operator::Divide
                    | Operator::Modulo
            ) && leaf_or_arith(left, schema)
                && leaf_or_arith(right, schema)
        }
        Expr::Negative(inner) => {
            !matches!(inner.as_ref(), Expr::Literal(..)) && leaf_or_arith(inner, schema)
        }
        _ => false,
    }
}
/// PostgreSQL's type of `e` when it is `coalesce`, `greatest`, `least`, `nullif` or a `CASE`
/// whose results are `integer` or `smallint` expressions, integer literals within `integer`'s
/// range, arithmetic over them and NULLs, and DataFusion types it `bigint` because of a
/// literal (`coalesce(int_col, 0)`, `CASE WHEN c THEN 1 ELSE 2 END`): `integer`, their common
/// type (docs 10.5), except `nullif` of a `smallint`, which is the type of its first argument
/// (docs 9.18.3: `smallint = integer` needs no promotion); `integer[]` for an `ARRAY[...]` of
/// such elements. `None` otherwise.
fn int4_call_type(e: &Expr, schema: &DFSchema) -> Option<DataType> {
    let int4_or_null = |a: &Expr| {
        matches!(
            a,
            Expr::Literal(ScalarValue::Null | ScalarValue::Int64(None), _)
        ) || leaf_or_arith(a, schema)
    };
    let not_null = |a: &Expr| !matches!(a, Expr::Literal(ScalarValue::Null, _));
    // `ARRAY[1, 2]` and `ARRAY[i, i + 1]` are `integer[]` (the common type of the elements,
    // docs 4.2.12), where DataFusion's literals made them `bigint[]`.
    if let Expr::ScalarFunction(f) = e
        && f.name() == "make_array"
    {
        let bigints = matches!(e.get_type(schema),
            Ok(DataType::List(el)) if el.data_type() == &DataType::Int64);
        return (bigints && f.args.iter().any(not_null) && f.args.iter().all(int4_or_null)).then(
            || {
                DataType::List(Arc::new(arrow::datatypes::Field::new_list_field(
                    DataType::Int32,
                    true,
                )))
            },
        );
    }
    // A `CASE` is typed by its first result until type coercion (`CASE ... THEN s ELSE 1
    // END` reads `smallint` here, `bigint` after it).
    if !matches!(e, Expr::Case(_)) && !matches!(e.get_type(schema), Ok(DataType::Int64)) {
        return None;
    }
    match e {
        Expr::ScalarFunction(f)
            if matches!(f.name(), "coalesce" | "greatest" | "least" | "nullif")
                && f.args.iter().any(not_null)
                && f.args.iter().all(int4_or_null) =>
        {
            let first_small = f.name() == "nullif"
                && f.args
                    .first()
                    .is_some_and(|a| matches!(operand_type(a, schema), Ok(DataType::Int16)));
            Some(if first_small {
                DataType::Int16
            } else {
                DataType::Int32
            })
        }
        Expr::Case(c) => {
            let results: Vec<&Expr> = c
                .when_then_expr
                .iter()
                .map(|(_, then)| then.as_ref())
                .chain(c.else_expr.as_deref())
                .collect();
            // Only when a result is a `bigint` to DataFusion (a literal, arithmetic beside
            // one): with `smallint` and `integer` results alone its type is PostgreSQL's.
            let widened = results
                .iter()
                .any(|r| matches!(operand_type(r, schema), Ok(DataType::Int64)));
            (widened && results.iter().all(|r| int4_or_null(r))).then_some(DataType::Int32)
        }
        _ => None,
    }
}

/// An aggregate's `sum`, `min` and `max` of an integer literal within `integer`'s range or of
/// [`int4_arithmetic`] read an `integer` (`sum(1)` is `bigint` in PostgreSQL, whose `sum` of
/// an `integer` is a `bigint`; DataFusion's literal made it `sum(bigint)`, a `numeric`), and
/// such grouping keys are `integer`s ([`int4_narrowed`]). Each keeps its output column's
/// name.
fn int4_aggregate(
    a: datafusion::logical_expr::Aggregate,
) -> datafusion::common::Result<LogicalPlan> {
    use datafusion::logical_expr::Aggregate;
    let input_schema = Arc::clone(a.input.schema());
    let mut out = Vec::with_capacity(a.aggr_expr.len());
    for e in a.aggr_expr {
        let Expr::AggregateFunction(f) = &e else {
            out.push(e);
            continue;
        };
        let narrow = match f.params.args.as_slice() {
            [arg] if matches!(f.func.name(), "sum" | "min" | "max" | "array_agg") => {
                let calls = int4_calls(arg.clone(), &input_schema);
                int4_narrowed(&calls.data, &input_schema)
                    .or_else(|| calls.transformed.then_some(calls.data))
            }
            _ => None,
        };
        let name = e.schema_name().to_string();
        let Some(arg) = narrow else {
            // `GROUPING(e)` names a grouping key as written.
            if f.func.name() == "grouping" {
                out.push(e);
                continue;
            }
            // Other aggregates' arguments (`count(DISTINCT coalesce(i, 0) + 1)`) compute
            // their `integer` parts as `integer`s.
            let mut f = f.clone();
            let mut changed = false;
            f.params.args = f
                .params
                .args
                .into_iter()
                .map(|a| {
                    let w = int4_within(a, &input_schema);
                    changed |= w.transformed;
                    w.data
                })
                .collect();
            out.push(if changed {
                Expr::AggregateFunction(f).alias(name)
            } else {
                e
            });
            continue;
        };
        let mut f = f.clone();
        f.params.args = vec![arg];
        out.push(Expr::AggregateFunction(f).alias(name));
    }
    // A grouping key PostgreSQL types `integer` (`GROUP BY s + 1`) is one, under its name.
    let group_expr = a
        .group_expr
        .into_iter()
        .map(|e| {
            let name = e.schema_name().to_string();
            let calls = int4_calls(e.clone(), &input_schema);
            match int4_narrowed(&calls.data, &input_schema) {
                Some(narrow) => narrow.alias(name),
                // A grouping set's keys keep their names (the output's columns are named by
                // them).
                None if matches!(e, Expr::GroupingSet(_)) => e,
                None => {
                    let w = int4_arithmetic_parts(calls.data, &input_schema);
                    if w.transformed || calls.transformed {
                        w.data.alias(name)
                    } else {
                        e
                    }
                }
            }
        })
        .collect();
    Ok(LogicalPlan::Aggregate(Aggregate::try_new(
        a.input, group_expr, out,
    )?))
}

/// `e` with each call of [`int4_call_type`] inside it (`coalesce(i, 0)`) read as the `integer` it is, so
/// that arithmetic over it (`coalesce(i, 0) + 1`) computes in 32 bits, `22003` past them, as
/// PostgreSQL's does (in `bigint` it gave 2147483648 for `i` = 2147483647). The cast cannot
/// fail: every argument is an `integer` or NULL.
fn int4_calls(e: Expr, schema: &DFSchema) -> Transformed<Expr> {
    let original = e.clone();
    e.transform_up(|x| {
        Ok(match int4_call_type(&x, schema) {
            Some(t) => Transformed::yes(Expr::Cast(datafusion::logical_expr::Cast::new(
                Box::new(x),
                t,
            ))),
            None => Transformed::no(x),
        })
    })
    .unwrap_or_else(|_| Transformed::no(original))
}

/// `e` as an `integer` when PostgreSQL types it `integer` and DataFusion `bigint`: an
/// integer literal within `integer`'s range, [`int4_arithmetic`], [`int4_call_type`] or
/// [`date_difference`]. Arithmetic is computed as PostgreSQL computes it (32-bit, `22003`
/// past it), so the cast back cannot fail.
fn int4_narrowed(e: &Expr, schema: &DFSchema) -> Option<Expr> {
    if let Some(int4) = int4_literal(e) {
        return Some(int4);
    }
    let t = if int4_arithmetic(e, schema) || date_difference(e, schema) {
        DataType::Int32
    } else {
        int4_call_type(e, schema)?
    };
    Some(Expr::Cast(datafusion::logical_expr::Cast::new(
        Box::new(e.clone()),
        t,
    )))
}

/// `e` with each largest part PostgreSQL types `integer` and DataFusion `bigint` (integer
/// arithmetic over `integer` expressions and literals, and the calls of [`int4_call_type`])
/// computed as that type, so that it is `22003` past 32 bits where PostgreSQL's is: in a
/// `WHERE`, `ORDER BY` or grouping key, or inside another call (`abs(coalesce(i, 0) + 1)`),
/// as in an output column. A comparison around it widens it again as PostgreSQL's does.
fn int4_within(e: Expr, schema: &DFSchema) -> Transformed<Expr> {
    let calls = int4_calls(e, schema);
    let changed = calls.transformed;
    let parts = int4_arithmetic_parts(calls.data, schema);
    Transformed::new_transformed(parts.data, parts.transformed || changed)
}

/// `e` with each largest [`int4_arithmetic`] part cast to `integer` (the second step of
/// [`int4_within`], for an expression whose calls were read already).
fn int4_arithmetic_parts(e: Expr, schema: &DFSchema) -> Transformed<Expr> {
    use datafusion::common::tree_node::TreeNodeRecursion;
    e.transform_down(|x| {
        Ok(if int4_arithmetic(&x, schema) {
            Transformed::new(
                Expr::Cast(datafusion::logical_expr::Cast::new(
                    Box::new(x),
                    DataType::Int32,
                )),
                true,
                TreeNodeRecursion::Jump,
            )
        } else {
            Transformed::no(x)
        })
    })
    .expect("invariant: the rewrite returns no error")
}

/// A projection's items that are integer literals or `integer` arithmetic as `integer`s (see
/// [`int4_output_literals`]); its schema recomputed either way (its input may have changed).
fn int4_projection(
    p: datafusion::logical_expr::Projection,
) -> datafusion::common::Result<LogicalPlan> {
    use datafusion::logical_expr::Projection;
    let input_schema = Arc::clone(p.input.schema());
    let exprs: Vec<Expr> = p
        .expr
        .iter()
        .map(|e| {
            let (inner, name) = match e {
                Expr::Alias(a) => (a.expr.as_ref(), a.name.clone()),
                other => (other, other.schema_name().to_string()),
            };
            let calls = int4_calls(inner.clone(), &input_schema);
            let (inner, e) = if calls.transformed {
                (calls.data.clone(), calls.data.alias(name.clone()))
            } else {
                (inner.clone(), e.clone())
            };
            let inner = &inner;
            if let Some(int4) = int4_narrowed(inner, &input_schema) {
                return int4.alias(name);
            }
            let within = |e: Expr| {
                let w = int4_arithmetic_parts(inner.clone(), &input_schema);
                if w.transformed {
                    w.data.alias(name.clone())
                } else {
                    e
                }
            };
            if !matches!(inner, Expr::ScalarFunction(_)) {
                return within(e);
            }
            // `pg_typeof` of such an expression names PostgreSQL's type: its argument is
            // narrowed as an output column is.
            let retyped = inner.clone().transform_up(|x| match &x {
                Expr::ScalarFunction(f) if f.name() == "pg_typeof" && f.args.len() == 1 => {
                    match int4_narrowed(&f.args[0], &input_schema) {
                        Some(arg) => {
                            let mut f = f.clone();
                            f.args = vec![arg];
                            Ok(Transformed::yes(Expr::ScalarFunction(f)))
                        }
                        None => Ok(Transformed::no(x)),
                    }
                }
                _ => Ok(Transformed::no(x)),
            });
            match retyped {
                Ok(t) if t.transformed => t.data.alias(name),
                _ => within(e),
            }
        })
        .collect();
    Ok(LogicalPlan::Projection(Projection::try_new(
        exprs, p.input,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_scales() {
        assert_eq!(numeric_result_scale(10, 10), 20);
        assert_eq!(numeric_result_scale(20, 10), 20);
        assert_eq!(numeric_result_scale(2, 2), 4);
        assert_eq!(numeric_result_scale(30, 2), 30);
        assert_eq!(numeric_div_scale(10, 2, 5, 2), 20);
        assert_eq!(numeric_div_scale(38, 25, 5, 2), 25);
        assert_eq!(numeric_div_scale(38, 10, 20, 0), 20);
        // bigint (20 digits) / 3.0: 21 integer digits leave 17 decimals.
        assert_eq!(numeric_div_scale(20, 0, 2, 1), 17);
        assert_eq!(numeric_div_scale(37, 0, 20, 10), 0);
        // bigint / unconstrained numeric: the divisor's 10 decimals are not counted.
        assert_eq!(numeric_div_scale(20, 0, 38, 10), 18);
    }

    #[test]
    fn quotients_take_postgresql_display_scales() {
        // select_div_scale as PostgreSQL 15 prints these quotients: 10 / 3 =
        // 3.3333333333333333, 1 / 3.0 = 0.33333333333333333333, 1000000.0 / 3 =
        // 333333.333333333333, 9223372036854775807 / 3.0 = 3074457345618258602.3,
        // 12345678901234567890.5 / 7.5 = 1646090520164609052.1, 1 / 30000 =
        // 0.000033333333333333333333, 0 / 7 = 0.00000000000000000000.
        assert_eq!(pg_div_scale(10, 0, 0, 3, 0, 0), 16);
        assert_eq!(pg_div_scale(1, 0, 0, 30, 1, 1), 20);
        assert_eq!(pg_div_scale(10_000_000, 1, 1, 3, 0, 0), 12);
        assert_eq!(pg_div_scale(i128::from(i64::MAX), 0, 0, 30, 1, 1), 1);
        assert_eq!(pg_div_scale(123_456_789_012_345_678_905, 1, 1, 75, 1, 1), 1);
        assert_eq!(pg_div_scale(1, 0, 0, 30_000, 0, 0), 24);
        assert_eq!(pg_div_scale(0, 0, 0, 7, 0, 0), 20);
        assert_eq!(base10000_lead(1, 30), (-8, 100));
        assert_eq!(display_scale(15_000_000_000, 38, 10), 1);
        assert_eq!(display_scale(1_500, 10, 3), 3);
        assert_eq!(display_scale(0, 38, 10), 0);
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        let r = |n: i128, d: i128| div_round(i256::from_i128(n), i256::from_i128(d)).unwrap();
        assert_eq!(r(15, 10), i256::from_i128(2));
        assert_eq!(r(-15, 10), i256::from_i128(-2));
        assert_eq!(r(14, 10), i256::from_i128(1));
        assert_eq!(r(-14, 10), i256::from_i128(-1));
        assert_eq!(r(15, -10), i256::from_i128(-2));
        assert!(div_round(i256::ONE, i256::ZERO).is_none());
    }
}

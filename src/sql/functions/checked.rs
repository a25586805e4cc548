//! PostgreSQL's errors for DataFusion's mathematical functions (and one edge result of an
//! array function), by wrapping them: DataFusion follows IEEE 754 and returns `-Infinity`,
//! `NaN` or `Infinity` where PostgreSQL raises an error (`float.c`, `dlog1`, `dexp`, `dpow`,
//! `dsqrt`; docs, 9.3 "Mathematical Functions and Operators"):
//!
//! ```text
//!  ln(0), log(0), log10(0)        2201E  cannot take logarithm of zero
//!  ln(-1), log(-1), log(-2, 8)    2201E  cannot take logarithm of a negative number
//!  log(1, 8)                      22012  division by zero
//!  exp(1000), power(10, 400)      22003  value out of range: overflow
//!  exp(-1000), power(10, -400)    22003  value out of range: underflow
//!  power(0, -1)                   2201F  zero raised to a negative power is undefined
//!  power(-8, 1.0/3)               2201F  a negative number raised to a non-integer power
//!                                        yields a complex result
//!  sqrt(-1)                       2201F  cannot take square root of a negative number
//!  array_length('{}'::int[], 1)   NULL   (PostgreSQL: an empty array has no dimensions;
//!                                        DataFusion returns 0)
//! ```
//!
//! NaN and infinite arguments keep their IEEE results (`ln('Infinity')` is `Infinity`, as in
//! PostgreSQL); overflow and underflow are errors only for finite arguments.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use arrow::datatypes::{DataType, FieldRef, Float64Type, Int64Type};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};
use datafusion::prelude::SessionContext;

use crate::error::Error;
use crate::sql::semantics::ours;

/// Which of PostgreSQL's rules a [`Checked`] function follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// `ln(x)`, `log(x)`, `log10(x)`, `log(b, x)`: `x` (and `b`) positive, `b` not 1.
    Log,
    /// `exp(x)`: no overflow or underflow.
    Exp,
    /// `power(x, y)`: PostgreSQL's domain, no overflow or underflow.
    Power,
    /// `sqrt(x)`: `x` not negative.
    Sqrt,
    /// `array_length(a, d)`: NULL for an empty array.
    ArrayLength,
}

/// DataFusion's function `inner` under its own name, with PostgreSQL's errors for `rule`
/// (see the module docs). Arguments and results are `inner`'s.
///
/// # Errors
/// The SQLSTATEs the module docs list, and `inner`'s own.
#[derive(Debug)]
pub struct Checked {
    inner: Arc<ScalarUDF>,
    rule: Rule,
}

impl PartialEq for Checked {
    fn eq(&self, other: &Self) -> bool {
        self.rule == other.rule && self.inner.name() == other.inner.name()
    }
}

impl Eq for Checked {}

impl std::hash::Hash for Checked {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.rule.hash(state);
        self.inner.name().hash(state);
    }
}

/// Replaces DataFusion's `ln`, `log`, `log10`, `exp`, `power`, `sqrt` and `array_length`
/// in `ctx` with their [`Checked`] forms.
pub fn register(ctx: &SessionContext) {
    use datafusion::functions::math;
    let wrapped = [
        (math::ln(), Rule::Log),
        (math::log(), Rule::Log),
        (math::log10(), Rule::Log),
        (math::exp(), Rule::Exp),
        (math::power(), Rule::Power),
        (math::sqrt(), Rule::Sqrt),
        (
            datafusion::functions_nested::length::array_length_udf(),
            Rule::ArrayLength,
        ),
    ];
    for (inner, rule) in wrapped {
        // With its aliases (`pow`, `list_length`), which would keep the built-in.
        ctx.deregister_udf(inner.name());
        for alias in inner.aliases() {
            ctx.deregister_udf(alias);
        }
        ctx.register_udf(ScalarUDF::new_from_impl(Checked { inner, rule }));
    }
}

fn log_of_zero() -> DataFusionError {
    ours(Error::data("2201E", "cannot take logarithm of zero"))
}

fn log_of_negative() -> DataFusionError {
    ours(Error::data(
        "2201E",
        "cannot take logarithm of a negative number",
    ))
}

fn overflow() -> DataFusionError {
    ours(Error::data("22003", "value out of range: overflow"))
}

fn underflow() -> DataFusionError {
    ours(Error::data("22003", "value out of range: underflow"))
}

/// The values of a numeric argument as doubles (NULL as NaN, which no rule refuses).
fn doubles(arg: &ColumnarValue, rows: usize) -> Result<Vec<f64>> {
    let array = arg.to_array(rows)?;
    if !array.data_type().is_numeric() {
        return Ok(vec![f64::NAN; rows]);
    }
    let array = arrow::compute::cast(&array, &DataType::Float64)?;
    let array = array.as_primitive::<Float64Type>();
    Ok((0..rows)
        .map(|i| {
            if array.is_null(i) {
                f64::NAN
            } else {
                array.value(i)
            }
        })
        .collect())
}

impl Checked {
    /// Checks the arguments of one call (`args[k][i]` is argument `k` of row `i`) before
    /// `inner` runs, and its result `out[i]` after.
    fn check(&self, args: &[Vec<f64>], out: &[f64]) -> Result<()> {
        let finite = |i: usize| args.iter().all(|a| a[i].is_finite());
        for (i, &r) in out.iter().enumerate() {
            match self.rule {
                Rule::Log => {
                    for a in args {
                        if a[i] == 0.0 {
                            return Err(log_of_zero());
                        }
                        if a[i] < 0.0 {
                            return Err(log_of_negative());
                        }
                    }
                    if args.len() == 2 && args[0][i] == 1.0 {
                        return Err(ours(Error::data("22012", "division by zero")));
                    }
                }
                Rule::Exp if finite(i) => {
                    if r.is_infinite() {
                        return Err(overflow());
                    }
                    if r == 0.0 {
                        return Err(underflow());
                    }
                }
                Rule::Power => {
                    let (x, y) = (args[0][i], args[1][i]);
                    if x == 0.0 && y < 0.0 {
                        return Err(ours(Error::data(
                            "2201F",
                            "zero raised to a negative power is undefined",
                        )));
                    }
                    if x < 0.0 && y.is_finite() && y.floor() != y {
                        return Err(ours(Error::data(
                            "2201F",
                            "a negative number raised to a non-integer power yields a complex result",
                        )));
                    }
                    if finite(i) && r.is_infinite() {
                        return Err(overflow());
                    }
                    if finite(i) && r == 0.0 && x != 0.0 {
                        return Err(underflow());
                    }
                }
                Rule::Sqrt if args[0][i] < 0.0 => {
                    return Err(ours(Error::data(
                        "2201F",
                        "cannot take square root of a negative number",
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl ScalarUDFImpl for Checked {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = if args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)))
        {
            1
        } else {
            args.number_rows
        };
        if self.rule == Rule::ArrayLength {
            let lengths = self.inner.invoke_with_args(args)?;
            return empty_as_null(lengths);
        }
        let values = args
            .args
            .iter()
            .map(|a| doubles(a, rows))
            .collect::<Result<Vec<_>>>()?;
        // Domain errors first (PostgreSQL checks the arguments before computing).
        let nan = vec![f64::NAN; rows];
        self.check(&values, &nan)?;
        let result = self.inner.invoke_with_args(args)?;
        let out = doubles(&result, rows)?;
        self.check(&values, &out)?;
        Ok(result)
    }
}

/// `array_length`'s result with zeros as NULL.
fn empty_as_null(lengths: ColumnarValue) -> Result<ColumnarValue> {
    match lengths {
        ColumnarValue::Scalar(ScalarValue::UInt64(Some(0)) | ScalarValue::Int64(Some(0))) => Ok(
            ColumnarValue::Scalar(ScalarValue::try_from(&lengths.data_type())?),
        ),
        ColumnarValue::Scalar(s) => Ok(ColumnarValue::Scalar(s)),
        ColumnarValue::Array(a) => {
            let as_i64 = arrow::compute::cast(&a, &DataType::Int64)?;
            let kept: Int64Array = as_i64
                .as_primitive::<Int64Type>()
                .iter()
                .map(|v| v.filter(|n| *n != 0))
                .collect();
            let out: ArrayRef = arrow::compute::cast(&kept, a.data_type())?;
            Ok(ColumnarValue::Array(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Checked, Rule};

    fn checked(rule: Rule) -> Checked {
        Checked {
            inner: datafusion::functions::math::ln(),
            rule,
        }
    }

    fn code(r: datafusion::common::Result<()>) -> Option<&'static str> {
        r.err().map(|e| crate::error::Error::from(e).sqlstate())
    }

    #[test]
    fn rules_follow_postgresql() {
        let log = checked(Rule::Log);
        assert_eq!(code(log.check(&[vec![0.0]], &[f64::NAN])), Some("2201E"));
        assert_eq!(code(log.check(&[vec![-1.0]], &[f64::NAN])), Some("2201E"));
        assert_eq!(
            code(log.check(&[vec![1.0], vec![8.0]], &[f64::NAN])),
            Some("22012")
        );
        assert_eq!(code(log.check(&[vec![2.0]], &[0.69])), None);
        let exp = checked(Rule::Exp);
        assert_eq!(
            code(exp.check(&[vec![1000.0]], &[f64::INFINITY])),
            Some("22003")
        );
        assert_eq!(code(exp.check(&[vec![-1000.0]], &[0.0])), Some("22003"));
        assert_eq!(code(exp.check(&[vec![f64::NEG_INFINITY]], &[0.0])), None);
        assert_eq!(
            code(exp.check(&[vec![f64::INFINITY]], &[f64::INFINITY])),
            None
        );
        let pow = checked(Rule::Power);
        assert_eq!(
            code(pow.check(&[vec![0.0], vec![-1.0]], &[f64::NAN])),
            Some("2201F")
        );
        assert_eq!(
            code(pow.check(&[vec![-8.0], vec![0.5]], &[f64::NAN])),
            Some("2201F")
        );
        assert_eq!(code(pow.check(&[vec![-8.0], vec![3.0]], &[-512.0])), None);
        assert_eq!(
            code(pow.check(&[vec![10.0], vec![400.0]], &[f64::INFINITY])),
            Some("22003")
        );
        assert_eq!(
            code(pow.check(&[vec![10.0], vec![-400.0]], &[0.0])),
            Some("22003")
        );
        assert_eq!(code(pow.check(&[vec![0.0], vec![2.0]], &[0.0])), None);
        let sqrt = checked(Rule::Sqrt);
        assert_eq!(code(sqrt.check(&[vec![-1.0]], &[f64::NAN])), Some("2201F"));
        assert_eq!(code(sqrt.check(&[vec![f64::NAN]], &[f64::NAN])), None);
    }
}

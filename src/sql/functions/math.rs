//! PostgreSQL's mathematical functions that DataFusion lacks or names differently (PostgreSQL
//! docs, 9.3 "Mathematical Functions and Operators"):
//!
//! ```text
//!  ceiling(x)      DataFusion's ceil (same result), under PostgreSQL's other name
//!  sign(x)         DataFusion's signum: -1, 0 or +1
//!  mod(y, x)       y % x: the remainder, with the dividend's sign; integers and numeric
//!                  (PostgreSQL has no mod of double precision: 42883)
//! ```

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::type_coercion::binary::BinaryTypeCoercer;
use datafusion::logical_expr::{
    ColumnarValue, Operator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;

/// Registers `ceiling`, `sign` and `mod` in `ctx`.
pub fn register(ctx: &SessionContext) {
    let ceil = datafusion::functions::math::ceil();
    ctx.register_udf(ceil.as_ref().clone().with_aliases(["ceiling"]));
    let signum = datafusion::functions::math::signum();
    ctx.register_udf(signum.as_ref().clone().with_aliases(["sign"]));
    ctx.register_udf(ScalarUDF::new_from_impl(PgMod::new()));
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

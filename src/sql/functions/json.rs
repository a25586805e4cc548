//! `json_build_object` and `json_build_array` (PostgreSQL docs, 9.16.1 "JSON Creation
//! Functions"): an object of alternating keys and values, or an array of the arguments, as
//! PostgreSQL writes them:
//!
//! ```text
//!  json_build_object('a', 1, 'b', 'x', 'c', NULL)   ─►  {"a" : 1, "b" : "x", "c" : null}
//!  json_build_object()                              ─►  {}
//!  json_build_array(1, 'a', NULL, ARRAY[2, 3])      ─►  [1, "a", null, [2,3]]
//!  json_build_array()                               ─►  []
//! ```
//!
//! Keys are taken as text; values become JSON by type as PostgreSQL's `to_json` does:
//! numbers and booleans as themselves (`NaN` and `Infinity` as strings), arrays as JSON
//! arrays, composite values as objects, everything else as its text in a JSON string. The
//! result is `json` text (Weir shows it as `text`). Errors: an odd number of arguments,
//! `22023` ("argument list must have even number of elements"); a NULL key, `22023`
//! ("argument 1 cannot be null"). SQLAlchemy's column reflection calls it.

use std::sync::Arc;

use arrow::array::{Array, StringArray};
use arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};

use crate::error::Error;

/// `json_build_object(key, value, ...)`, returning `json` text (module docs).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct JsonBuildObject {
    signature: Signature,
}

impl JsonBuildObject {
    /// The function.
    pub fn new() -> Self {
        JsonBuildObject {
            signature: Signature::one_of(
                vec![TypeSignature::Nullary, TypeSignature::VariadicAny],
                Volatility::Stable,
            ),
        }
    }
}

impl Default for JsonBuildObject {
    fn default() -> Self {
        Self::new()
    }
}

fn data_error(code: &'static str, message: &str) -> DataFusionError {
    DataFusionError::External(Box::new(Error::Data {
        code,
        message: message.to_string(),
    }))
}

impl ScalarUDFImpl for JsonBuildObject {
    fn name(&self) -> &str {
        "json_build_object"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if !args.args.len().is_multiple_of(2) {
            return Err(data_error(
                "22023",
                "argument list must have even number of elements",
            ));
        }
        let n = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let mut out = Vec::with_capacity(n);
        for row in 0..n {
            let mut text = String::from("{");
            for (i, pair) in arrays.chunks(2).enumerate() {
                let key = ScalarValue::try_from_array(&pair[0], row)?;
                if key.is_null() {
                    let message = format!("argument {} cannot be null", 2 * i + 1);
                    return Err(data_error("22023", &message));
                }
                if i > 0 {
                    text.push_str(", ");
                }
                push_string(&mut text, &scalar_text(&key)?);
                text.push_str(" : ");
                push_json(&mut text, &ScalarValue::try_from_array(&pair[1], row)?)?;
            }
            text.push('}');
            out.push(text);
        }
        let out = Arc::new(StringArray::from(out));
        if args.args.is_empty() {
            return Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some("{}".into()))));
        }
        crate::sql::semantics::shape_result(&args.args, out)
    }
}

/// `json_build_array(value, ...)`, returning `json` text (module docs).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct JsonBuildArray {
    signature: Signature,
}

impl Default for JsonBuildArray {
    fn default() -> Self {
        JsonBuildArray {
            signature: Signature::one_of(
                vec![TypeSignature::Nullary, TypeSignature::VariadicAny],
                Volatility::Stable,
            ),
        }
    }
}

impl ScalarUDFImpl for JsonBuildArray {
    fn name(&self) -> &str {
        "json_build_array"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if args.args.is_empty() {
            return Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some("[]".into()))));
        }
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let mut out = Vec::with_capacity(args.number_rows);
        for row in 0..args.number_rows {
            let mut text = String::from("[");
            for (i, array) in arrays.iter().enumerate() {
                if i > 0 {
                    text.push_str(", ");
                }
                push_json(&mut text, &ScalarValue::try_from_array(array, row)?)?;
            }
            text.push(']');
            out.push(text);
        }
        crate::sql::semantics::shape_result(&args.args, Arc::new(StringArray::from(out)))
    }
}

/// A value's text, as a cast to `text` gives it.
fn scalar_text(v: &ScalarValue) -> Result<String> {
    match v.cast_to(&DataType::Utf8)? {
        ScalarValue::Utf8(Some(s)) => Ok(s),
        other => Ok(other.to_string()),
    }
}

/// Appends `s` as a JSON string.
fn push_string(out: &mut String, s: &str) {
    // serde_json escapes as RFC 8259 requires; it cannot fail on a &str.
    out.push_str(&serde_json::Value::String(s.to_string()).to_string());
}

/// Appends `v` as JSON (module docs).
fn push_json(out: &mut String, v: &ScalarValue) -> Result<()> {
    if v.is_null() {
        out.push_str("null");
        return Ok(());
    }
    match v {
        ScalarValue::Boolean(Some(b)) => out.push_str(if *b { "true" } else { "false" }),
        ScalarValue::Int8(_)
        | ScalarValue::Int16(_)
        | ScalarValue::Int32(_)
        | ScalarValue::Int64(_)
        | ScalarValue::UInt8(_)
        | ScalarValue::UInt16(_)
        | ScalarValue::UInt32(_)
        | ScalarValue::UInt64(_)
        | ScalarValue::Decimal128(..)
        | ScalarValue::Decimal256(..) => out.push_str(&scalar_text(v)?),
        ScalarValue::Float64(Some(f)) if f.is_finite() => {
            out.push_str(&crate::server::handler::pg_float(*f))
        }
        ScalarValue::Float32(Some(f)) if f.is_finite() => {
            out.push_str(&crate::server::handler::pg_float32(*f))
        }
        ScalarValue::Float64(Some(f)) => push_string(out, &crate::server::handler::pg_float(*f)),
        ScalarValue::Float32(Some(f)) => push_string(out, &crate::server::handler::pg_float32(*f)),
        ScalarValue::List(list) => {
            out.push('[');
            let values = list.value(0);
            for i in 0..values.len() {
                if i > 0 {
                    out.push(',');
                }
                push_json(out, &ScalarValue::try_from_array(&values, i)?)?;
            }
            out.push(']');
        }
        ScalarValue::Struct(s) => {
            out.push('{');
            for (i, (field, column)) in s.fields().iter().zip(s.columns()).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_string(out, field.name());
                out.push(':');
                push_json(out, &ScalarValue::try_from_array(column, 0)?)?;
            }
            out.push('}');
        }
        other => push_string(out, &scalar_text(other)?),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use datafusion::prelude::SessionContext;

    async fn one(sql: &str) -> std::result::Result<String, String> {
        let ctx = SessionContext::new();
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(
            super::JsonBuildObject::new(),
        ));
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(
            super::JsonBuildArray::default(),
        ));
        let batches = ctx
            .sql(sql)
            .await
            .map_err(|e| e.to_string())?
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        let v = datafusion::common::ScalarValue::try_from_array(batches[0].column(0), 0)
            .map_err(|e| e.to_string())?;
        Ok(v.to_string())
    }

    /// Expected values from PostgreSQL 15 (`SELECT json_build_object(...)` in psql).
    #[tokio::test]
    async fn objects_as_postgresql_writes_them() {
        assert_eq!(one("SELECT json_build_object()").await.unwrap(), "{}");
        assert_eq!(
            one("SELECT json_build_object('a', 1, 'b', 'x\"y', 'c', NULL, 'd', true)")
                .await
                .unwrap(),
            r#"{"a" : 1, "b" : "x\"y", "c" : null, "d" : true}"#
        );
        assert_eq!(
            one("SELECT json_build_object(1, 2.5::double precision, 'n', 'NaN'::double precision, 'l', make_array(1, 2))")
                .await
                .unwrap(),
            r#"{"1" : 2.5, "n" : "NaN", "l" : [1,2]}"#
        );
        assert_eq!(one("SELECT json_build_array()").await.unwrap(), "[]");
        assert_eq!(
            one("SELECT json_build_array(1, 'a', NULL, make_array(2, 3), false)")
                .await
                .unwrap(),
            r#"[1, "a", null, [2,3], false]"#
        );
        let odd = one("SELECT json_build_object('a')").await.unwrap_err();
        assert!(odd.contains("even number"), "{odd}");
        let null_key = one("SELECT json_build_object(NULL, 1)").await.unwrap_err();
        assert!(null_key.contains("argument 1 cannot be null"), "{null_key}");
    }
}

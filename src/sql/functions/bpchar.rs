//! `bpchar(text, n)`: the cast `x::char(n)` (the parser writes it so, see
//! [`crate::sql::parse`]). PostgreSQL's `bpchar` (docs 8.3 "Character Types") cuts the value
//! to `n` characters in an explicit cast and treats trailing spaces as insignificant; Weir
//! keeps a `character(n)` value without them (as a table's `character(n)` column stores
//! it), so `'a'::char(3) = 'a  '::char(3)` and `length('a  '::char(3))` is 1.

use std::sync::Arc;

use arrow::array::{Array, AsArray, StringArray};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue, cast::as_int64_array};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};

use crate::common::schema::PgTextType;

use crate::sql::semantics::shape_result;

/// The function (see the module docs). Returns `text`; NULL in, NULL out.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Bpchar {
    signature: Signature,
}

impl Default for Bpchar {
    fn default() -> Self {
        Bpchar {
            signature: Signature::new(
                TypeSignature::Exact(vec![DataType::Utf8, DataType::Int64]),
                Volatility::Immutable,
            ),
        }
    }
}

/// `v` cut to `n` characters, without trailing spaces.
fn blank_padded(v: &str, n: i64) -> &str {
    let n = usize::try_from(n).unwrap_or(0);
    let cut = match v.char_indices().nth(n) {
        Some((at, _)) => &v[..at],
        None => v,
    };
    cut.trim_end_matches(' ')
}

impl ScalarUDFImpl for Bpchar {
    fn name(&self) -> &str {
        "bpchar"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    /// `text` marked `character(n)` ([`PgTextType::Bpchar`], with `n` when it is a
    /// constant), so a comparison with the result ignores trailing spaces.
    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        let n = match args.scalar_arguments.get(1) {
            Some(Some(ScalarValue::Int64(Some(n)))) => usize::try_from(*n).ok(),
            _ => None,
        };
        Ok(Arc::new(
            Field::new(self.name(), DataType::Utf8, true)
                .with_metadata(PgTextType::Bpchar(n).metadata()),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let values = args.args[0].to_array(args.number_rows)?;
        let lengths = args.args[1].to_array(args.number_rows)?;
        let values = values.as_string::<i32>();
        let lengths = as_int64_array(&lengths)?;
        let out: StringArray = (0..values.len())
            .map(|i| {
                (!values.is_null(i) && !lengths.is_null(i))
                    .then(|| blank_padded(values.value(i), lengths.value(i)))
            })
            .collect();
        shape_result(&args.args, Arc::new(out))
    }
}

/// `pg_as_text(x)`: a `character(n)` or `varchar` value cast to `text`, the value unchanged
/// (Weir keeps `character(n)` values without their padding, which the cast drops: docs 8.3)
/// but no longer marked as those types, so it is sent as `text` (OID 25) without padding.
/// DataFusion drops a cast from text to text and keeps the operand's marking, so
/// `'ab'::char(5)::text` was sent as `character(5)`, `'ab   '`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct AsText {
    signature: Signature,
}

impl AsText {
    /// The function's name.
    pub const NAME: &'static str = "pg_as_text";
}

impl Default for AsText {
    fn default() -> Self {
        AsText {
            signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for AsText {
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
        Ok(args.args[0].clone())
    }
}

#[cfg(test)]
mod tests {
    use super::blank_padded;

    #[test]
    fn values_are_cut_and_lose_trailing_spaces() {
        assert_eq!(blank_padded("a  ", 3), "a");
        assert_eq!(blank_padded("abc", 2), "ab");
        assert_eq!(blank_padded("a b ", 3), "a b");
        assert_eq!(blank_padded(" ", 1), "");
        assert_eq!(blank_padded("éé ", 2), "éé");
    }
}

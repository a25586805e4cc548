//! `make_date(year, month, day)` (PostgreSQL docs 9.9): DataFusion's, with PostgreSQL's
//! check of the year. PostgreSQL has no year 0 and reads a negative year as BC
//! (`make_date(-1, 1, 1)` is 1 BC, DataFusion's year 0): Weir has no BC dates (their input
//! and output forms), so both are `22008` "date field value out of range", where DataFusion
//! made a date one year off.

use std::sync::Arc;

use arrow::array::AsArray;
use arrow::datatypes::{DataType, Int32Type};
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

use crate::error::Error;
use crate::sql::semantics::ours;

/// The function (see the module docs); wraps DataFusion's `make_date`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct MakeDate {
    inner: Arc<ScalarUDF>,
}

impl MakeDate {
    /// The function, over DataFusion's.
    pub fn new() -> Self {
        MakeDate {
            inner: datafusion::functions::datetime::make_date(),
        }
    }
}

impl Default for MakeDate {
    fn default() -> Self {
        Self::new()
    }
}

impl ScalarUDFImpl for MakeDate {
    fn name(&self) -> &str {
        "make_date"
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if let Some(year) = args.args.first()
            && year.data_type() == DataType::Int32
        {
            let years = year.to_array(args.number_rows)?;
            if let Some(y) = years
                .as_primitive::<Int32Type>()
                .iter()
                .flatten()
                .find(|y| *y <= 0)
            {
                return Err(ours(Error::data(
                    "22008",
                    format!("date field value out of range: year {y} (Weir's dates are AD)"),
                )));
            }
        }
        self.inner.invoke_with_args(args)
    }
}

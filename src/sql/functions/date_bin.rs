//! `date_bin(stride, source [, origin])` (PostgreSQL docs 9.9.3 "date_bin"): the start of
//! the bin of width `stride`, counted from `origin` (default 1970-01-01 00:00), that holds
//! `source`. Rounds down for sources before the origin, as PostgreSQL 15 and DataFusion do.
//!
//! DataFusion's function subtracts the origin from the source in 64-bit nanoseconds and gives
//! NULL when the two lie more than 292 years apart (a TUMBLE or HOP window with an offset of
//! `INTERVAL '-90000' DAY` had a NULL `window_start`). Here the distance is taken in 128 bits
//! for the strides and types Weir's timestamps have (a stride of days and smaller units, a
//! nanosecond source); other calls go to DataFusion's. As in PostgreSQL, a stride with months
//! is `0A000`, one not greater than zero `22008`, and a NULL argument gives NULL.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, TimestampNanosecondArray};
use arrow::datatypes::{DataType, FieldRef, TimeUnit, TimestampNanosecondType};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

use crate::error::Error;
use crate::sql::semantics::{ours, shape_result};

/// The function (see the module docs); wraps DataFusion's `date_bin`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct DateBin {
    inner: Arc<ScalarUDF>,
}

impl DateBin {
    /// The function, over DataFusion's.
    pub fn new() -> Self {
        DateBin {
            inner: datafusion::functions::datetime::date_bin(),
        }
    }
}

impl Default for DateBin {
    fn default() -> Self {
        Self::new()
    }
}

/// A constant stride in nanoseconds; `None` for other strides (a column).
///
/// # Errors
/// PostgreSQL's: `0A000` for a stride with months or years, `22008` for one not greater
/// than zero.
fn stride_nanos(v: &ColumnarValue) -> Result<Option<i128>> {
    let ns = match v {
        ColumnarValue::Scalar(ScalarValue::IntervalMonthDayNano(Some(i))) => {
            if i.months != 0 {
                return Err(ours(Error::not_supported(
                    "timestamps cannot be binned into intervals containing months or years",
                )));
            }
            i128::from(i.days) * 86_400_000_000_000 + i128::from(i.nanoseconds)
        }
        ColumnarValue::Scalar(ScalarValue::IntervalDayTime(Some(i))) => {
            i128::from(i.days) * 86_400_000_000_000 + i128::from(i.milliseconds) * 1_000_000
        }
        _ => return Ok(None),
    };
    if ns <= 0 {
        return Err(ours(Error::data(
            "22008",
            "stride must be greater than zero",
        )));
    }
    Ok(Some(ns))
}

/// An origin in nanoseconds since 1970.
fn origin_nanos(v: &ColumnarValue) -> Option<i128> {
    let (v, per) = match v {
        ColumnarValue::Scalar(ScalarValue::TimestampNanosecond(Some(v), _)) => (*v, 1),
        ColumnarValue::Scalar(ScalarValue::TimestampMicrosecond(Some(v), _)) => (*v, 1_000),
        ColumnarValue::Scalar(ScalarValue::TimestampMillisecond(Some(v), _)) => (*v, 1_000_000),
        ColumnarValue::Scalar(ScalarValue::TimestampSecond(Some(v), _)) => (*v, 1_000_000_000),
        _ => return None,
    };
    Some(i128::from(v) * per)
}

impl ScalarUDFImpl for DateBin {
    fn name(&self) -> &str {
        "date_bin"
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

    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let stride = match args.args.first() {
            Some(v) => stride_nanos(v)?,
            None => None,
        };
        // A NULL origin (or stride) makes every bin NULL, as in PostgreSQL (a strict
        // function).
        if args
            .args
            .iter()
            .any(|a| matches!(a, ColumnarValue::Scalar(v) if v.is_null()))
        {
            let t = self.return_type(
                &args
                    .args
                    .iter()
                    .map(ColumnarValue::data_type)
                    .collect::<Vec<_>>(),
            )?;
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from(&t)?));
        }
        let origin = match args.args.get(2) {
            None => Some(0),
            Some(o) => origin_nanos(o),
        };
        let source_type = args.args.get(1).map(ColumnarValue::data_type);
        let (Some(stride), Some(origin), Some(DataType::Timestamp(TimeUnit::Nanosecond, zone))) =
            (stride, origin, source_type)
        else {
            return self.inner.invoke_with_args(args);
        };
        let source = args.args[1].to_array(args.number_rows)?;
        let source = source.as_primitive::<TimestampNanosecondType>();
        let mut out = Vec::with_capacity(source.len());
        for v in source.iter() {
            out.push(match v {
                None => None,
                Some(v) => {
                    let v = i128::from(v);
                    let bin = v - (v - origin).rem_euclid(stride);
                    Some(
                        i64::try_from(bin)
                            .map_err(|_| ours(Error::data("22008", "timestamp out of range")))?,
                    )
                }
            });
        }
        let array: ArrayRef = Arc::new(TimestampNanosecondArray::from(out).with_timezone_opt(zone));
        shape_result(&args.args, array)
    }
}

/// `date_trunc(field, x)` as PostgreSQL resolves it: DataFusion's, except that a `date` is
/// read as a `timestamptz` (PostgreSQL has no `date` form; the date's implicit cast goes to
/// the preferred type, `timestamptz`, at midnight in the session's zone), so the result is a
/// `timestamptz` (DataFusion made the date a `timestamp`). Text and timestamps are taken as
/// DataFusion takes them. The fields `decade`, `century` and `millennium`, which DataFusion
/// lacks, start at the first year of each (2020, 2001, 2001 for 2024: centuries and millennia
/// count from year 1). Errors: 42883 for other argument types.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PgDateTrunc {
    inner: datafusion::logical_expr::ScalarUDF,
    signature: Signature,
}

impl PgDateTrunc {
    /// Wraps DataFusion's `date_trunc`.
    pub fn new(inner: datafusion::logical_expr::ScalarUDF) -> Self {
        PgDateTrunc {
            inner,
            signature: Signature::user_defined(datafusion::logical_expr::Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for PgDateTrunc {
    fn name(&self) -> &str {
        "date_trunc"
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        use arrow::datatypes::TimeUnit;
        let [field, x] = arg_types else {
            return Err(super::math::no_function("date_trunc", arg_types));
        };
        if !(field.is_string() || field.is_null()) {
            return Err(super::math::no_function("date_trunc", arg_types));
        }
        let x = match x {
            DataType::Date32 | DataType::Date64 => {
                DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
            }
            t if t.is_string() || t.is_null() => DataType::Timestamp(TimeUnit::Nanosecond, None),
            t @ (DataType::Timestamp(..) | DataType::Time32(_) | DataType::Time64(_)) => t.clone(),
            _ => return Err(super::math::no_function("date_trunc", arg_types)),
        };
        Ok(vec![DataType::Utf8, x])
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types.get(1).cloned().unwrap_or(DataType::Timestamp(
            arrow::datatypes::TimeUnit::Nanosecond,
            None,
        )))
    }

    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs<'_>,
    ) -> Result<arrow::datatypes::FieldRef> {
        self.inner.inner().return_field_from_args(args)
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        // `decade`, `century` and `millennium`, which DataFusion lacks: the year's start,
        // moved back to the first year of its decade (2020), century (2001) or millennium
        // (2001), as PostgreSQL counts them (centuries and millennia start at year 1).
        let coarse = match args.args.first() {
            Some(ColumnarValue::Scalar(
                ScalarValue::Utf8(Some(f)) | ScalarValue::Utf8View(Some(f)),
            )) => match f.to_ascii_lowercase().as_str() {
                "decade" | "decades" => Some(10),
                "century" | "centuries" => Some(100),
                "millennium" | "millennia" => Some(1000),
                _ => None,
            },
            _ => None,
        };
        let Some(span) = coarse else {
            return self.inner.inner().invoke_with_args(args);
        };
        let shape = args.args.clone();
        let rows = args.number_rows;
        args.args[0] = ColumnarValue::Scalar(ScalarValue::Utf8(Some("year".into())));
        let years = self.inner.inner().invoke_with_args(args)?.to_array(rows)?;
        let out_type = years.data_type().clone();
        let DataType::Timestamp(_, zone) = &out_type else {
            return Err(ours(Error::not_supported(format!(
                "date_trunc of a {} by a field longer than a year",
                super::pg_type_name(&out_type)
            ))));
        };
        let tz: Option<arrow::array::timezone::Tz> = zone.as_deref().map(str::parse).transpose()?;
        let nanos = arrow::compute::cast(
            &years,
            &DataType::Timestamp(TimeUnit::Nanosecond, zone.clone()),
        )?;
        let first_year = |y: i32| -> i32 {
            if span == 10 {
                y - y.rem_euclid(10)
            } else {
                (y - 1).div_euclid(span) * span + 1
            }
        };
        let moved = |v: i64| -> Option<i64> {
            use chrono::{Datelike, TimeZone};
            let utc = chrono::DateTime::from_timestamp_nanos(v);
            match &tz {
                Some(tz) => {
                    let local = utc.with_timezone(tz).naive_local();
                    let start = local.with_year(first_year(local.year()))?;
                    tz.from_local_datetime(&start)
                        .earliest()?
                        .timestamp_nanos_opt()
                }
                None => {
                    let naive = utc.naive_utc();
                    naive
                        .with_year(first_year(naive.year()))?
                        .and_utc()
                        .timestamp_nanos_opt()
                }
            }
        };
        let out: TimestampNanosecondArray = nanos
            .as_primitive::<TimestampNanosecondType>()
            .iter()
            .map(|v| match v {
                None => Ok(None),
                Some(v) => moved(v)
                    .map(Some)
                    .ok_or_else(|| ours(Error::data("22008", "timestamp out of range"))),
            })
            .collect::<Result<_>>()?;
        let out: ArrayRef = Arc::new(out.with_timezone_opt(zone.clone()));
        shape_result(&shape, arrow::compute::cast(&out, &out_type)?)
    }

    fn output_ordering(
        &self,
        input: &[datafusion::logical_expr::sort_properties::ExprProperties],
    ) -> Result<datafusion::logical_expr::sort_properties::SortProperties> {
        self.inner.inner().output_ordering(input)
    }
}

//! SQL functions that follow PostgreSQL where DataFusion's built-in of the same name does not.
//!
//! ```text
//!  to_char(timestamp | timestamptz | date | interval | time, text)  PostgreSQL template patterns
//!  to_char(smallint | integer | bigint | numeric | real | double precision, text)
//!  timezone(text | interval, timestamp | timestamptz)               `AT TIME ZONE`
//!  ceiling(x), sign(x), mod(y, x), round(x [, n]), trunc(x [, n])   see `math`
//!  mode(), percentile_disc(f), percentile_cont(f) WITHIN GROUP (...)  see `ordered_set`
//!  make_interval(years, months, weeks, days, hours, mins, secs)     see `make_interval`
//!  EXTRACT(field FROM x), date_part('field', x)                    see `extract`
//!  justify_hours(i), justify_days(i), justify_interval(i)           see `justify`
//!  coalesce, nullif, greatest, least of dates, times, intervals     see `interval_args`
//! ```
//!
//! [`register`] installs them in a DataFusion context, replacing the built-ins.

pub mod age;
pub mod array_cmp;
pub mod at_time_zone;
pub mod bpchar;
pub mod checked;
pub mod date_bin;
pub mod datetime_input;
pub mod encoding;
pub mod extract;
pub mod float_sum;
pub mod int_avg;
pub mod interval_args;
pub mod json;
pub mod justify;
pub mod make_date;
pub mod make_interval;
pub mod math;
pub mod number_input;
pub mod ordered_set;
pub mod pg_info;
pub mod regex;
pub mod session;
pub mod text_format;
pub mod text_output;
pub mod to_char;
pub mod to_timestamp;

use arrow::datatypes::DataType;

use datafusion::logical_expr::{AggregateUDF, ScalarUDF};
use datafusion::prelude::SessionContext;

/// Registers Weir's SQL functions in `ctx`, replacing DataFusion's functions of the same name.
///
/// A replaced built-in is deregistered first, with its aliases (`to_char`'s `date_format`):
/// an alias left behind would still hold the built-in, and a context state rebuilt from its
/// function list (as the `pg_catalog` setup does) could then put it back under the name.
pub fn register(ctx: &SessionContext) {
    ctx.deregister_udf("to_char");
    ctx.register_udf(ScalarUDF::new_from_impl(to_char::ToChar::new()));
    ctx.register_udf(ScalarUDF::new_from_impl(at_time_zone::AtTimeZone::default()));
    // PostgreSQL's template patterns for `(text, format)`; other calls go to DataFusion's.
    for (name, wrap) in [
        (
            "to_date",
            to_timestamp::PgToDateTime::to_date as fn(ScalarUDF) -> _,
        ),
        ("to_timestamp", to_timestamp::PgToDateTime::to_timestamp),
    ] {
        if let Ok(inner) = datafusion::execution::FunctionRegistry::udf(ctx, name) {
            ctx.deregister_udf(name);
            ctx.register_udf(ScalarUDF::new_from_impl(wrap(inner.as_ref().clone())));
        }
    }
    if let Ok(inner) = datafusion::execution::FunctionRegistry::udf(ctx, "date_trunc") {
        ctx.deregister_udf("date_trunc");
        ctx.register_udf(ScalarUDF::new_from_impl(date_bin::PgDateTrunc::new(
            inner.as_ref().clone(),
        )));
    }
    for (inner, wrap) in [
        (
            datafusion::functions::core::coalesce(),
            interval_args::IntervalArgs::coalesce as fn(ScalarUDF) -> _,
        ),
        (
            datafusion::functions::core::nullif(),
            interval_args::IntervalArgs::nullif,
        ),
        (
            datafusion::functions::core::greatest(),
            interval_args::IntervalArgs::greatest,
        ),
        (
            datafusion::functions::core::least(),
            interval_args::IntervalArgs::least,
        ),
    ] {
        ctx.deregister_udf(inner.name());
        ctx.register_udf(ScalarUDF::new_from_impl(wrap(inner.as_ref().clone())));
    }
    ctx.deregister_udf("date_bin");
    ctx.register_udf(ScalarUDF::new_from_impl(date_bin::DateBin::new()));
    ctx.deregister_udf("make_date");
    ctx.register_udf(ScalarUDF::new_from_impl(make_date::MakeDate::new()));
    math::register(ctx);
    checked::register(ctx);
    if let Ok(inner) = datafusion::execution::FunctionRegistry::udf(ctx, "substr") {
        ctx.deregister_udf("substr");
        ctx.deregister_udf("substring");
        ctx.register_udf(ScalarUDF::new_from_impl(regex::PgSubstring::new(
            inner.as_ref().clone(),
        )));
    }
    ctx.deregister_udf("regexp_replace");
    ctx.register_udf(ScalarUDF::new_from_impl(regex::RegexpReplace::default()));
    ctx.deregister_udf("regexp_match");
    ctx.register_udf(ScalarUDF::new_from_impl(regex::RegexpMatch::default()));
    // PostgreSQL's array_remove and array_replace act on every matching element,
    // DataFusion's on the first: its `_all` functions serve under PostgreSQL's names.
    for (pg, all) in [
        ("array_remove", "array_remove_all"),
        ("array_replace", "array_replace_all"),
    ] {
        let every = ctx.state().scalar_functions().get(all).cloned();
        if let Some(every) = every {
            ctx.deregister_udf(pg);
            ctx.register_udf(every.as_ref().clone().with_aliases([pg]));
        }
    }
    // PostgreSQL's `avg` (`numeric` for integers): replaces DataFusion's under both names, so
    // a state rebuilt from the function map (random order) cannot bring the old one back
    // through its alias.
    ctx.deregister_udaf("avg");
    ctx.register_udaf(AggregateUDF::new_from_impl(int_avg::PgAvg::new()));
    // `every(b)` is the SQL standard's name of `bool_and` (PostgreSQL docs, 9.21).
    let bool_and = ctx.state().aggregate_functions().get("bool_and").cloned();
    if let Some(bool_and) = bool_and {
        ctx.deregister_udaf("bool_and");
        ctx.register_udaf(bool_and.as_ref().clone().with_aliases(["every"]));
    }
    // `octet_length` of a `bytea` too (DataFusion's takes text only).
    ctx.deregister_udf("octet_length");
    ctx.register_udf(ScalarUDF::new_from_impl(text_output::OctetLength::default()));
    ctx.register_udf(ScalarUDF::new_from_impl(text_output::OctetLength::bits()));
    ctx.deregister_udf("date_part");
    ctx.deregister_udf("datepart");
    ctx.register_udf(ScalarUDF::new_from_impl(extract::DatePart::new(
        false, None,
    )));
    ctx.register_udf(ScalarUDF::new_from_impl(extract::DatePart::new(true, None)));
    for kind in [
        justify::Kind::Hours,
        justify::Kind::Days,
        justify::Kind::Interval,
    ] {
        ctx.register_udf(ScalarUDF::new_from_impl(justify::Justify::new(kind)));
    }
    ctx.register_udf(ScalarUDF::new_from_impl(make_interval::MakeInterval::new()));
    for kind in [
        text_format::Kind::QuoteLiteral,
        text_format::Kind::QuoteNullable,
        text_format::Kind::Format,
    ] {
        ctx.register_udf(ScalarUDF::new_from_impl(text_format::TextFormat::new(kind)));
    }
    ctx.register_udf(ScalarUDF::new_from_impl(text_format::RegexpSplit::new()));
    for upper in [true, false] {
        let name = if upper { "upper" } else { "lower" };
        ctx.deregister_udf(name);
        ctx.register_udf(ScalarUDF::new_from_impl(text_format::CaseMap::new(upper)));
    }
    ctx.register_udf(ScalarUDF::new_from_impl(age::Age::new()));
    for (name, decode) in [("encode", false), ("decode", true)] {
        ctx.deregister_udf(name);
        ctx.register_udf(ScalarUDF::new_from_impl(encoding::Encoding::new(decode)));
    }
    ctx.deregister_udaf("percentile_cont");
    ctx.deregister_udaf("quantile_cont");
    for kind in [
        ordered_set::OrderedSetKind::Mode,
        ordered_set::OrderedSetKind::PercentileDisc,
        ordered_set::OrderedSetKind::PercentileCont,
    ] {
        ctx.register_udaf(AggregateUDF::new_from_impl(ordered_set::OrderedSet::new(
            kind,
        )));
    }
}

/// The types `inner`'s own signature coerces `arg_types` to (for a wrapper whose
/// `coerce_types` handles some argument types itself and leaves the rest to the wrapped
/// function's signature).
///
/// # Errors
/// DataFusion's planning error when the signature takes no such arguments.
pub(crate) fn coerce_as_signature(
    arg_types: &[DataType],
    inner: &ScalarUDF,
) -> datafusion::common::Result<Vec<DataType>> {
    let fields: Vec<arrow::datatypes::FieldRef> = arg_types
        .iter()
        .map(|t| std::sync::Arc::new(arrow::datatypes::Field::new("a", t.clone(), true)))
        .collect();
    Ok(
        datafusion::logical_expr::type_coercion::functions::fields_with_udf(&fields, inner)?
            .iter()
            .map(|f| f.data_type().clone())
            .collect(),
    )
}

/// The PostgreSQL name of an Arrow type as Weir maps them (`integer` for `Int32`, `text` for
/// `Utf8`, `integer[]` for a list of `Int32`); the Arrow name for a type PostgreSQL lacks.
pub(crate) fn pg_type_name(t: &DataType) -> String {
    match t {
        DataType::List(f) | DataType::LargeList(f) => format!("{}[]", pg_type_name(f.data_type())),
        DataType::Dictionary(_, v) => pg_type_name(v),
        DataType::Null => "unknown".into(),
        DataType::Boolean => "boolean".into(),
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => "smallint".into(),
        DataType::Int32 | DataType::UInt16 => "integer".into(),
        DataType::Int64 | DataType::UInt32 | DataType::UInt64 => "bigint".into(),
        DataType::Float16 | DataType::Float32 => "real".into(),
        DataType::Float64 => "double precision".into(),
        DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => "numeric".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "text".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "bytea".into(),
        DataType::Date32 | DataType::Date64 => "date".into(),
        DataType::Timestamp(_, None) => "timestamp without time zone".into(),
        DataType::Timestamp(_, Some(_)) => "timestamp with time zone".into(),
        DataType::Interval(_) | DataType::Duration(_) => "interval".into(),
        DataType::Time32(_) | DataType::Time64(_) => "time without time zone".into(),
        other => other.to_string(),
    }
}

/// A function of one text argument applied row by row (NULL stays NULL): `f`'s text, or its
/// error, for each value.
///
/// # Errors
/// `f`'s first error.
pub(crate) fn map_text(
    args: &datafusion::logical_expr::ScalarFunctionArgs,
    f: impl Fn(&str) -> datafusion::common::Result<String>,
) -> datafusion::common::Result<datafusion::logical_expr::ColumnarValue> {
    use arrow::array::{ArrayRef, AsArray, StringArray};
    use datafusion::common::ScalarValue;
    use datafusion::logical_expr::ColumnarValue;
    let convert = |v: Option<&str>| v.map(&f).transpose();
    match &args.args[0] {
        ColumnarValue::Scalar(ScalarValue::Utf8(v)) => Ok(ColumnarValue::Scalar(
            ScalarValue::Utf8(convert(v.as_deref())?),
        )),
        other => {
            let array = other.to_array(args.number_rows)?;
            let out: StringArray = array
                .as_string::<i32>()
                .iter()
                .map(convert)
                .collect::<datafusion::common::Result<_>>()?;
            Ok(ColumnarValue::Array(std::sync::Arc::new(out) as ArrayRef))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use datafusion::execution::session_state::SessionStateBuilder;

    #[tokio::test]
    async fn to_char_stays_replaced_when_the_state_is_rebuilt() {
        // The state's function map has a random order per context: try several.
        for _ in 0..16 {
            let ctx = SessionContext::new();
            register(&ctx);
            let state = ctx.state_ref();
            let existing = state.read().clone();
            *state.write() = SessionStateBuilder::new_from_existing(existing).build();
            let functions = ctx.state().scalar_functions().clone();
            assert!(functions["to_char"].inner().is::<to_char::ToChar>());
            assert!(!functions.contains_key("date_format"));
        }
        let ctx = SessionContext::new();
        register(&ctx);
        let batches = ctx
            .sql("SELECT to_char(TIMESTAMP '2023-11-05 13:40:07', 'YYYY-MM-DD HH:MI PM')")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(
            batches[0].column(0).as_string::<i32>().value(0),
            "2023-11-05 01:40 PM"
        );
    }

    #[tokio::test]
    async fn avg_stays_replaced_when_the_state_is_rebuilt() {
        // DataFusion's `avg` answers to `mean` too: left under that alias, a rebuilt state
        // could put it back under `avg` (the map's order is random per context).
        for _ in 0..16 {
            let ctx = SessionContext::new();
            register(&ctx);
            let state = ctx.state_ref();
            let existing = state.read().clone();
            *state.write() = SessionStateBuilder::new_from_existing(existing).build();
            let functions = ctx.state().aggregate_functions().clone();
            assert!(functions["avg"].inner().is::<int_avg::PgAvg>());
            assert!(functions["mean"].inner().is::<int_avg::PgAvg>());
        }
    }
}

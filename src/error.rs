//! The crate-wide error type and its mapping to PostgreSQL SQLSTATE codes.
//!
//! Variants say who is at fault (after DataFusion's `DataFusionError`): the user's SQL
//! ([`Error::Parse`], [`Error::Plan`], [`Error::NotSupported`]), the user's data
//! ([`Error::Data`]), the catalog ([`Error::Catalog`]), a running view ([`Error::Execution`]),
//! storage ([`Error::State`], [`Error::Io`]) or Weir itself ([`Error::Internal`]).
//! Codes follow PostgreSQL's Appendix A, "PostgreSQL Error Codes".

use datafusion::error::DataFusionError;

/// Crate-wide result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every error Weir reports; [`Error::sqlstate`] gives the code sent to clients.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The SQL text does not parse (`42601`).
    #[error("{0}")]
    Parse(String),
    /// The statement parses but cannot be planned; carries its own SQLSTATE
    /// (e.g. `42P01` undefined table, `42703` undefined column, `42804` datatype mismatch).
    #[error("{message}")]
    Plan {
        /// PostgreSQL SQLSTATE code, five characters.
        code: &'static str,
        /// Human-readable message.
        message: String,
    },
    /// A construct Weir does not support (`0A000`); the message names the construct.
    #[error("{0}")]
    NotSupported(String),
    /// Bad data: a value that does not parse, a division by zero, an overflow, a duplicate key.
    #[error("{message}")]
    Data {
        /// PostgreSQL SQLSTATE code (`22P02`, `22012`, `22003`, `23505`, `23502`, ...).
        code: &'static str,
        /// Human-readable message.
        message: String,
    },
    /// A catalog conflict: an object exists already or does not exist, or a dependency blocks a drop.
    #[error("{message}")]
    Catalog {
        /// PostgreSQL SQLSTATE code (`42P07`, `42P01`, `2BP01`, ...).
        code: &'static str,
        /// Human-readable message.
        message: String,
    },
    /// An invalid session setting (`22023` bad value, `42704` unknown name).
    #[error("{message}")]
    Setting {
        /// PostgreSQL SQLSTATE code.
        code: &'static str,
        /// Human-readable message naming the allowed values.
        message: String,
    },
    /// A materialized view's job failed at run time; reading it reports this.
    #[error("materialized view \"{view}\" failed: {source}")]
    Execution {
        /// The view's name.
        view: String,
        /// What went wrong inside the view's dataflow.
        source: Box<Error>,
    },
    /// The state store (RocksDB) failed.
    #[error("state store error: {0}")]
    State(String),
    /// An operating-system I/O error.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A statement was canceled (`57014`): by a client's cancel request ("canceling statement
    /// due to user request") or by `statement_timeout` ("canceling statement due to statement
    /// timeout"), PostgreSQL's messages.
    #[error("{0}")]
    QueryCanceled(&'static str),
    /// A bug in Weir: an invariant did not hold.
    #[error("internal error: {0}. This is a bug in Weir; please report it")]
    Internal(String),
}

impl Error {
    /// Builds an [`Error::Plan`].
    pub fn plan(code: &'static str, message: impl Into<String>) -> Self {
        Error::Plan {
            code,
            message: message.into(),
        }
    }

    /// Builds an [`Error::Data`].
    pub fn data(code: &'static str, message: impl Into<String>) -> Self {
        Error::Data {
            code,
            message: message.into(),
        }
    }

    /// Builds an [`Error::Catalog`].
    pub fn catalog(code: &'static str, message: impl Into<String>) -> Self {
        Error::Catalog {
            code,
            message: message.into(),
        }
    }

    /// Builds an [`Error::Setting`] with SQLSTATE `22023` (invalid_parameter_value).
    pub fn setting(message: impl Into<String>) -> Self {
        Error::Setting {
            code: "22023",
            message: message.into(),
        }
    }

    /// Builds an [`Error::NotSupported`].
    pub fn not_supported(message: impl Into<String>) -> Self {
        Error::NotSupported(message.into())
    }

    /// The PostgreSQL SQLSTATE code for this error (five characters).
    pub fn sqlstate(&self) -> &'static str {
        match self {
            Error::Parse(_) => "42601",
            Error::Plan { code, .. }
            | Error::Data { code, .. }
            | Error::Catalog { code, .. }
            | Error::Setting { code, .. } => code,
            Error::NotSupported(_) => "0A000",
            Error::QueryCanceled(_) => "57014",
            Error::Execution { source, .. } => source.sqlstate(),
            Error::State(_) | Error::Io(_) => "58030",
            Error::Internal(_) => "XX000",
        }
    }
}

impl From<DataFusionError> for Error {
    fn from(e: DataFusionError) -> Self {
        classify_datafusion(e)
    }
}

impl From<arrow::error::ArrowError> for Error {
    fn from(e: arrow::error::ArrowError) -> Self {
        classify_datafusion(DataFusionError::ArrowError(Box::new(e), None))
    }
}

impl From<rocksdb::Error> for Error {
    fn from(e: rocksdb::Error) -> Self {
        Error::State(e.to_string())
    }
}

/// Arrow's `V is too large to store in a Decimal128 of precision P. Max is M` (a value that
/// does not fit a `numeric(p, s)`) as PostgreSQL's `22003` `numeric field overflow`, with its
/// DETAIL's wording in the message.
fn numeric_field_overflow(message: &str) -> Option<Error> {
    let rest = message
        .split("is too large to store in a Decimal128 of precision ")
        .nth(1)?;
    let (precision, rest) = rest.split_once('.')?;
    let precision: u32 = precision.trim().parse().ok()?;
    let max = rest.split("Max is ").nth(1)?.trim();
    let scale = max.split_once('.').map_or(0, |(_, f)| {
        f.chars().take_while(char::is_ascii_digit).count() as u32
    });
    let limit = precision.saturating_sub(scale);
    Some(Error::data(
        "22003",
        format!(
            "numeric field overflow: a field with precision {precision}, scale {scale} must \
             round to an absolute value less than 10^{limit}"
        ),
    ))
}

/// Maps a DataFusion error onto the nearest PostgreSQL error class.
///
/// DataFusion reports most user errors as `Plan`, `Schema` or `Execution` with a message; the
/// SQLSTATE is chosen from the error kind and, where the kind is too coarse, the message text.
fn classify_datafusion(e: DataFusionError) -> Error {
    // Our own errors travel through DataFusion as `External`; give them back unchanged.
    let e = match e {
        DataFusionError::External(b) => match b.downcast::<Error>() {
            Ok(ours) => return *ours,
            Err(b) => DataFusionError::External(b),
        },
        DataFusionError::Context(_, inner) => return classify_datafusion(*inner),
        DataFusionError::Shared(inner) => match std::sync::Arc::try_unwrap(inner) {
            Ok(inner) => return classify_datafusion(inner),
            Err(inner) => DataFusionError::Shared(inner),
        },
        other => other,
    };
    let e = e.find_root();
    let message = strip_df_prefix(&e.to_string());
    if message.contains("subquery returned more than one row") {
        return Error::data(
            "21000",
            "more than one row returned by a subquery used as an expression",
        );
    }
    if message.contains("does not support logical expression ScalarSubquery") {
        // DataFusion decorrelates a correlated scalar subquery when its correlation is an
        // equality (`x.k = t.k`), Weir's rule when it is an aggregate over a filter
        // (`crate::sql::decorrelate`); other shapes reach the executor.
        return Error::not_supported(
            "this correlated scalar subquery is not supported: it must be an aggregate (such as count or max) or be correlated by equalities only",
        );
    }
    if message.contains("only support Literal types for field at idx") {
        // DataFusion's lag/lead take a constant default only.
        return Error::not_supported(
            "lag and lead with a default value that is not a constant are not supported",
        );
    }
    if let Some(e) = no_matching_function(&message) {
        return e;
    }
    if let Some(e) = numeric_field_overflow(&message) {
        return e;
    }
    if let Some(e) = invalid_text_input(&message) {
        return e;
    }
    if let Some(e) = integer_cast_overflow(&message) {
        return e;
    }
    if let Some(e) = timestamp_nanos_overflow(&message) {
        return e;
    }
    if let Some(e) = invalid_regex(&message) {
        return e;
    }
    // `make_date(2024, 13, 1)`: DataFusion's "Month value '13' is out of range" (and "Day
    // value ...").
    if (message.starts_with("Month value '") || message.starts_with("Day value '"))
        && message.ends_with("' is out of range")
    {
        return Error::data("22008", format!("date field value out of range: {message}"));
    }
    // `make_date(2024, 2, 30)`: DataFusion's "Unable to parse date from 2024, 2, 30".
    if let Some(fields) = message.strip_prefix("Unable to parse date from ") {
        return Error::data(
            "22008",
            format!(
                "date field value out of range: {}",
                fields
                    .split(", ")
                    .enumerate()
                    .map(|(i, f)| match f.parse::<i64>() {
                        Ok(v) if i > 0 => format!("{v:02}"),
                        _ => f.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join("-")
            ),
        );
    }
    if let Some(e) = query_shape_error(&message) {
        return e;
    }
    let lower = message.to_ascii_lowercase();
    match e {
        DataFusionError::SQL(..) => Error::Parse(message),
        DataFusionError::NotImplemented(_) => Error::NotSupported(message),
        DataFusionError::ResourcesExhausted(_) => Error::data("53200", message),
        DataFusionError::SchemaError(..) => {
            if lower.contains("no field named") || lower.contains("column") {
                Error::plan("42703", message)
            } else if lower.contains("ambiguous") {
                Error::plan("42702", message)
            } else {
                Error::plan("42P01", message)
            }
        }
        _ => {
            if lower.contains("non-nullable but contains null") {
                let column = message.split('\'').nth(1).unwrap_or("?");
                return Error::data(
                    "23502",
                    format!("null value in column \"{column}\" violates not-null constraint"),
                );
            }
            // DataFusion's "Order by column out of bounds, specified: 4, max: 2":
            // PostgreSQL's `42P10`.
            if let Some(rest) = message
                .split("Order by column out of bounds, specified: ")
                .nth(1)
            {
                let position = rest.split(',').next().unwrap_or(rest).trim();
                return Error::plan(
                    "42P10",
                    format!("ORDER BY position {position} is not in select list"),
                );
            }
            // DataFusion's "table 'weir.public.t' not found": PostgreSQL's words.
            if let Some(rest) = message.split("table '").nth(1)
                && let Some(name) = rest.strip_suffix("' not found")
            {
                let name = name.rsplit('.').next().unwrap_or(name);
                return Error::plan("42P01", format!("relation \"{name}\" does not exist"));
            }
            let code = if lower.contains("divide by zero") || lower.contains("division by zero") {
                "22012"
            } else if lower.contains("overflow") || lower.contains("out of range") {
                "22003"
            } else if lower.contains("cannot cast string")
                || lower.contains("invalid input syntax")
                || lower.contains("error parsing")
                || lower.contains("cannot parse")
                || lower.contains("cast error")
            {
                "22P02"
            } else if lower.contains("table") && lower.contains("not found") {
                "42P01"
            } else if lower.contains("invalid function")
                || lower.contains("function") && lower.contains("not found")
            {
                "42883"
            } else if lower.contains("cannot be cast")
                || lower.contains("cannot coerce")
                || lower.contains("does not support")
                || lower.contains("type coercion")
                || lower.contains("no coercion")
                || lower.contains("cannot infer common")
                || lower.contains("mismatch")
            {
                "42804"
            } else if matches!(e, DataFusionError::Plan(_)) {
                "42601"
            } else if matches!(
                e,
                DataFusionError::Execution(_) | DataFusionError::ArrowError(..)
            ) {
                "22000"
            } else {
                "XX000"
            };
            match code {
                "XX000" => Error::Internal(message),
                c if c.starts_with("22") => Error::data(c, message),
                c => Error::plan(c, message),
            }
        }
    }
}

/// DataFusion's planning errors for query shapes PostgreSQL also refuses, with its codes and
/// messages: a column neither grouped nor aggregated (`42803` `column "t.x" must appear in
/// the GROUP BY clause or be used in an aggregate function`), nested aggregates (`42803`), a
/// negative `LIMIT` (`2201W`) or `OFFSET` (`2201X`). DataFusion's were all `42601`. Also
/// argument errors DataFusion reports as `22000`: `ntile(0)` (`22014`), `split_part(s, d, 0)`
/// (`22023`), `substr(s, i, -1)` (`22011`); and a repeated column name (`INSERT INTO t (a,
/// a)`: `42701`).
fn query_shape_error(message: &str) -> Option<Error> {
    if message.contains("must appear in the GROUP BY clause") {
        let column = message.split("column \"").nth(1)?.split('"').next()?;
        return Some(Error::plan(
            "42803",
            format!(
                "column \"{column}\" must appear in the GROUP BY clause or be used in an aggregate function"
            ),
        ));
    }
    if message.contains("Aggregate function calls cannot be nested") {
        return Some(Error::plan(
            "42803",
            "aggregate function calls cannot be nested",
        ));
    }
    if message.contains("NTILE requires a positive integer") {
        return Some(Error::data(
            "22014",
            "argument of ntile must be greater than zero",
        ));
    }
    if message.contains("field position must not be zero") {
        // split_part(s, sep, 0) (PostgreSQL's split_part).
        return Some(Error::data("22023", "field position must not be zero"));
    }
    if message.starts_with("negative count not allowed") {
        // substr(s, start, count) with a negative count (PostgreSQL's text_substring).
        return Some(Error::data(
            "22011",
            "negative substring length not allowed",
        ));
    }
    if let Some(rest) = message.strip_prefix("Schema contains duplicate unqualified field name ") {
        // `INSERT INTO t (a, a)` and `CREATE TABLE t (a int, a int)`.
        let column = rest.trim().trim_matches('"');
        return Some(Error::plan(
            "42701",
            format!("column \"{column}\" specified more than once"),
        ));
    }
    if message.starts_with("LIMIT must be >= 0") {
        return Some(Error::data("2201W", "LIMIT must not be negative"));
    }
    if message.starts_with("OFFSET must be >=0") {
        return Some(Error::data("2201X", "OFFSET must not be negative"));
    }
    None
}

/// The regex crate's `regex parse error: ... error: unclosed group`, from the regular
/// expression operators and functions, as PostgreSQL reports a pattern that does not
/// compile: `2201B` `invalid regular expression: unclosed group`.
fn invalid_regex(message: &str) -> Option<Error> {
    if !message.contains("regex parse error") {
        return None;
    }
    let detail = message
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .unwrap_or("it does not compile");
    Some(Error::data(
        "2201B",
        format!("invalid regular expression: {detail}"),
    ))
}

/// The rest of Arrow's cast error `message` after `start` (with or without its "Cast error: ").
fn cast_error<'a>(message: &'a str, start: &str) -> Option<&'a str> {
    message
        .strip_prefix("Cast error: ")
        .unwrap_or(message)
        .strip_prefix(start)
}

/// Arrow's "Cannot cast string 'abc' to value of Int32 type" as PostgreSQL says it: `22P02`
/// `invalid input syntax for type integer: "abc"`. `NaN` and `Infinity`, which PostgreSQL's
/// `numeric` holds and Weir's (a 128-bit decimal) cannot, are `0A000` naming them.
fn invalid_text_input(message: &str) -> Option<Error> {
    // Booleans' parse error says "value" where the others say "string".
    let rest = cast_error(message, "Cannot cast string '")
        .or_else(|| cast_error(message, "Cannot cast value '"))?;
    let (value, target) = rest.rsplit_once("' to value of ")?;
    let target = target.strip_suffix(" type")?;
    let type_name = target
        .parse::<arrow::datatypes::DataType>()
        .map(|t| crate::sql::functions::pg_type_name(&t))
        .ok()?;
    let special = matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "nan" | "infinity" | "+infinity" | "-infinity" | "inf" | "+inf" | "-inf"
    );
    let integer = matches!(type_name.as_str(), "smallint" | "integer" | "bigint");
    let digits = value.trim().trim_start_matches(['+', '-']);
    if integer && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        // Well formed, but past the type's range (PostgreSQL's int4in and its kin).
        return Some(Error::data(
            "22003",
            format!("value \"{value}\" is out of range for type {type_name}"),
        ));
    }
    if type_name == "date" || type_name.starts_with("time") {
        // PostgreSQL's datetime input: fields out of range (`2024-02-30`, `25:00`) are
        // `22008`, text of no date or time shape `22007`.
        let numeric_fields = value
            .trim()
            .split(['-', ':', ' ', 'T', '/', '.'])
            .filter(|f| !f.is_empty())
            .collect::<Vec<_>>();
        let shaped = numeric_fields.len() >= 2
            && numeric_fields
                .iter()
                .all(|f| f.bytes().all(|b| b.is_ascii_digit()));
        return Some(if shaped {
            Error::data(
                "22008",
                format!("date/time field value out of range: \"{value}\""),
            )
        } else {
            Error::data(
                "22007",
                format!("invalid input syntax for type {type_name}: \"{value}\""),
            )
        });
    }
    if type_name == "numeric" && special {
        return Some(Error::NotSupported(format!(
            "numeric value \"{value}\": NaN and infinity in numeric are not supported (use double precision)"
        )));
    }
    Some(Error::data(
        "22P02",
        format!("invalid input syntax for type {type_name}: \"{value}\""),
    ))
}

/// Arrow's "Can't cast value 32768 to type Int16" (a number cast to a narrower integer type;
/// "value of 32768 is out of range Int16" from a decimal) as PostgreSQL says it: `22003` `smallint out of range`.
fn integer_cast_overflow(message: &str) -> Option<Error> {
    // A float's cast: "Can't cast value 1e20 to type Int32"; a decimal's: "value of
    // 100000000000000000000 is out of range Int32".
    let target = match cast_error(message, "Can't cast value ") {
        Some(rest) => rest.rsplit_once(" to type ")?.1,
        None => {
            cast_error(message, "value of ")?
                .rsplit_once(" is out of range ")?
                .1
        }
    };
    let type_name = match target.trim() {
        "Int16" => "smallint",
        "Int32" => "integer",
        "Int64" => "bigint",
        _ => return None,
    };
    Some(Error::data("22003", format!("{type_name} out of range")))
}

/// Arrow's "Overflow converting 9999-12-31 00:00:00 to Nanosecond. The dates that can be
/// represented as nanoseconds have to be between ..." as PostgreSQL words a timestamp out of
/// its range: `22008` `timestamp out of range: "9999-12-31 00:00:00"`, with Weir's range
/// (its timestamps are nanoseconds since 1970, DataFusion's `TIMESTAMP`) in the message.
fn timestamp_nanos_overflow(message: &str) -> Option<Error> {
    let rest = cast_error(message, "Overflow converting ")?;
    let (value, _) = rest.split_once(" to Nanosecond")?;
    Some(Error::data(
        "22008",
        format!(
            "timestamp out of range: \"{value}\" (timestamps run from 1677-09-21 to 2262-04-11)"
        ),
    ))
}

/// Trims DataFusion's "Error during planning: " style prefixes so users see the message itself.
/// DataFusion's "Failed to coerce arguments to satisfy a call to 'f' function: coercion from
/// <types> to the signature <every signature>" (and "No function matches the given name and
/// argument types 'f(<types>)'") as PostgreSQL says it: `42883` `function
/// f(integer, text) does not exist`, without the list of signatures. `date_bin` over a column
/// that is no time (a `TUMBLE` or `HOP` over the wrong column) is `42804` naming the type.
fn no_matching_function(message: &str) -> Option<Error> {
    let (name, args) = if let Some(rest) =
        message.strip_prefix("Failed to coerce arguments to satisfy a call to '")
    {
        let (name, rest) = rest.split_once("' function: coercion from ")?;
        (name, rest.split_once(" to the signature")?.0)
    } else {
        // "... No function matches the given name and argument types 'abs(Utf8)'. ..."
        let (_, rest) =
            message.split_once("No function matches the given name and argument types '")?;
        let (call, _) = rest.split_once("'.")?;
        let (name, args) = call.split_once('(')?;
        (name, args.strip_suffix(')')?)
    };
    // Split at the commas outside parentheses (`Timestamp(ns, "+00:00")` is one type).
    let mut types = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, ch) in args.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                types.push(&args[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    types.push(&args[start..]);
    let types: Vec<String> = types
        .into_iter()
        .map(|t| {
            let t = t.trim();
            t.parse::<arrow::datatypes::DataType>()
                .map(|t| crate::sql::functions::pg_type_name(&t))
                .unwrap_or_else(|_| t.to_string())
        })
        .collect();
    if name == "date_bin"
        && types.first().is_some_and(|t| t == "interval")
        && types
            .get(1)
            .is_some_and(|t| !t.starts_with("timestamp") && t != "date")
    {
        return Some(Error::plan(
            "42804",
            format!(
                "a window's time column (TUMBLE, HOP, date_bin) must be of type timestamp or \
                 timestamp with time zone, but it is of type {}",
                types[1]
            ),
        ));
    }
    Some(Error::plan(
        "42883",
        format!("function {name}({}) does not exist", types.join(", ")),
    ))
}

fn strip_df_prefix(s: &str) -> String {
    let mut out = s.trim();
    for prefix in [
        "Error during planning: ",
        "Execution error: ",
        "Arrow error: ",
        "Schema error: ",
        "SQL error: ",
        "This feature is not implemented: ",
        "Optimizer rule 'simplify_expressions' failed\ncaused by\n",
        "Compute error: ",
        "Resources exhausted: ",
        "External error: ",
        "Divide by zero error",
    ] {
        if prefix == "Divide by zero error" {
            if out.starts_with(prefix) {
                return "division by zero".to_string();
            }
            continue;
        }
        while let Some(rest) = out.strip_prefix(prefix) {
            out = rest.trim();
        }
    }
    if out.contains("Divide by zero") {
        return "division by zero".to_string();
    }
    out.to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn decimal_overflow_is_numeric_field_overflow() {
        let e = Error::from(arrow::error::ArrowError::InvalidArgumentError(
            "12345.60 is too large to store in a Decimal128 of precision 6. Max is 9999.99".into(),
        ));
        assert_eq!(e.sqlstate(), "22003");
        assert!(
            e.to_string()
                .contains("numeric field overflow: a field with precision 6, scale 2 must round to an absolute value less than 10^4"),
            "{e}"
        );
    }

    use super::*;

    #[test]
    fn divide_by_zero_maps_to_22012() {
        let e: Error =
            DataFusionError::ArrowError(Box::new(arrow::error::ArrowError::DivideByZero), None)
                .into();
        assert_eq!(e.sqlstate(), "22012");
        assert_eq!(e.to_string(), "division by zero");
    }

    #[test]
    fn timestamps_beyond_nanoseconds_are_22008() {
        let e: Error = DataFusionError::ArrowError(
            Box::new(arrow::error::ArrowError::CastError(
                "Overflow converting 9999-12-31 00:00:00 to Nanosecond. The dates that can be represented as nanoseconds have to be between 1677-09-21T00:12:44.0 and 2262-04-11T23:47:16.854775804".into(),
            )),
            None,
        )
        .into();
        assert_eq!(e.sqlstate(), "22008");
        assert_eq!(
            e.to_string(),
            "timestamp out of range: \"9999-12-31 00:00:00\" (timestamps run from 1677-09-21 to 2262-04-11)"
        );
    }

    #[test]
    fn bad_text_input_is_postgresql_message() {
        let cast = |m: &str| -> Error {
            DataFusionError::ArrowError(
                Box::new(arrow::error::ArrowError::CastError(m.into())),
                None,
            )
            .into()
        };
        let e = cast("Cannot cast string 'a'b' to value of Int32 type");
        assert_eq!(e.sqlstate(), "22P02");
        assert_eq!(
            e.to_string(),
            "invalid input syntax for type integer: \"a'b\""
        );
        let e = cast("Cannot cast value 'maybe' to value of Boolean type");
        assert_eq!(
            e.to_string(),
            "invalid input syntax for type boolean: \"maybe\""
        );
        let e = cast("Cannot cast string 'x' to value of Decimal128(38, 10) type");
        assert_eq!(
            e.to_string(),
            "invalid input syntax for type numeric: \"x\""
        );
        let e = cast("Cannot cast string 'NaN' to value of Decimal128(38, 10) type");
        assert_eq!(e.sqlstate(), "0A000");
    }

    #[test]
    fn not_implemented_maps_to_0a000() {
        let e: Error = DataFusionError::NotImplemented("x".into()).into();
        assert_eq!(e.sqlstate(), "0A000");
    }
}

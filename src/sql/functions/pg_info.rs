//! PostgreSQL's system information functions that drivers and tools call (PostgreSQL docs,
//! 9.26 "System Information Functions and Operators", and 9.27 "System Administration
//! Functions" for `pg_sleep`):
//!
//! ```text
//!  version()                      text   'PostgreSQL 16.6 (Weir 0.1.0) on x86_64-linux, ...'
//!  session_user, current_user     text   the user named at connection startup (also
//!  current_role, user                    `current_role` and `user`)
//!  current_catalog                text   'weir', as current_database()
//!  pg_typeof(any)                 text   the argument's PostgreSQL type name ('integer', ...)
//!  pg_encoding_to_char(integer)   text   'UTF8' for 6, '' for an unknown encoding number
//!  col_description(oid, integer)  text   NULL (Weir keeps no comments)
//!  obj_description(oid [, name])  text   NULL
//!  shobj_description(oid, name)   text   NULL
//!  pg_sleep(double precision)     void   sleeps that many seconds (fractions allowed)
//!  pg_size_pretty(bigint)         text   '10 kB': bytes in PostgreSQL's units and rounding
//!  pg_function_is_visible(oid)    bool   true (one schema search path, no overloads hidden)
//!  pg_type_is_visible(oid)        bool   true
//!  pg_collation_is_visible(oid)   bool   true
//!  _pg_expandarray(anyarray)      (x, n)[] the elements with their 1-based positions; a
//!                                        SELECT list's call is unnested into rows
//!                                        (`information_schema._pg_expandarray`, which
//!                                        pgjdbc's getPrimaryKeys calls; see
//!                                        `crate::sql::parse`)
//!  json_build_object(k, v, ...)   json   see `super::json`
//!  pg_get_function_result(oid)    text   NULL (Weir has no user-defined functions)
//!  pg_get_function_arguments(oid) text   NULL
//!  pg_table_size(regclass)        bigint NULL: relation sizes are not measured (all
//!  pg_indexes_size(regclass)      bigint NULL   relations share one RocksDB instance;
//!  pg_relation_size(regclass)     bigint NULL   `weir_catalog.memory` shows its use)
//!  pg_total_relation_size(...)    bigint NULL
//!  pg_database_size(name | oid)   bigint NULL
//!  pg_get_serial_sequence(t, c)   text   NULL (Weir has no sequences)
//!  to_regtype(text)               oid    the type's OID ('integer' → 23), NULL if unknown
//!  pg_advisory_unlock_all()       void   does nothing (Weir takes no advisory locks)
//!  current_setting(text [, bool]) text   the session's value of a setting, as SHOW prints
//!                                        it; 42704 for an unknown name, NULL instead when
//!                                        the second argument is true
//!  set_config(text, text, bool)   text   sets a setting (the session applies it before the
//!                                        query runs) and returns the new value
//! ```
//!
//! `version()` starts `PostgreSQL <server_version>` because drivers parse it (SQLAlchemy reads
//! the major and minor version from it), as RisingWave's and Materialize's do.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, StringArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use datafusion::prelude::SessionContext;

use crate::error::Error;

/// Registers the functions of this module in `ctx` (after the `pg_catalog` setup, whose
/// `session_user` and `pg_encoding_to_char` they replace), for a connection of `user`.
pub fn register(
    ctx: &SessionContext,
    user: &str,
    interrupt: Arc<crate::session::interrupt::Interrupt>,
) {
    ctx.deregister_udf("version");
    let udfs: Vec<ScalarUDF> = vec![
        ScalarUDF::new_from_impl(Constant::new("version", version_text())),
        ScalarUDF::new_from_impl(Constant::new(
            "current_catalog",
            crate::session::DATABASE.to_string(),
        )),
        ScalarUDF::new_from_impl(PgTypeof::new()),
        ScalarUDF::new_from_impl(PgEncodingToChar::new()),
        ScalarUDF::new_from_impl(AlwaysNull::text("col_description", &[2])),
        ScalarUDF::new_from_impl(AlwaysNull::text("obj_description", &[1, 2])),
        ScalarUDF::new_from_impl(AlwaysNull::text("shobj_description", &[2])),
        ScalarUDF::new_from_impl(AlwaysNull::text("pg_get_function_result", &[1])),
        ScalarUDF::new_from_impl(AlwaysNull::text("pg_get_function_arguments", &[1])),
        ScalarUDF::new_from_impl(Visible::new("pg_function_is_visible")),
        ScalarUDF::new_from_impl(Visible::new("pg_type_is_visible")),
        ScalarUDF::new_from_impl(Visible::new("pg_collation_is_visible")),
        ScalarUDF::new_from_impl(ExpandArray::new()),
        ScalarUDF::new_from_impl(super::json::JsonBuildObject::new()),
        ScalarUDF::new_from_impl(super::json::JsonBuildArray::default()),
        ScalarUDF::new_from_impl(super::json::ToJson::new(false)),
        ScalarUDF::new_from_impl(super::json::ToJson::new(true)),
        ScalarUDF::new_from_impl(super::json::JsonAgg::new(false)),
        ScalarUDF::new_from_impl(super::json::JsonAgg::new(true)),
        ScalarUDF::new_from_impl(PgSizePretty::new()),
        ScalarUDF::new_from_impl(AlwaysNull::size("pg_table_size")),
        ScalarUDF::new_from_impl(AlwaysNull::size("pg_indexes_size")),
        ScalarUDF::new_from_impl(AlwaysNull::size("pg_relation_size")),
        ScalarUDF::new_from_impl(AlwaysNull::size("pg_total_relation_size")),
        ScalarUDF::new_from_impl(AlwaysNull::size("pg_database_size")),
        ScalarUDF::new_from_impl(AlwaysNull::text("pg_get_serial_sequence", &[2])),
        ScalarUDF::new_from_impl(ToRegtype::new()),
        ScalarUDF::new_from_impl(PgSleep::new(interrupt)),
        ScalarUDF::new_from_impl(Constant::void("pg_advisory_unlock_all")),
    ];
    for udf in udfs {
        ctx.register_udf(udf);
    }
    register_user(ctx, user);
}

/// Registers `current_setting` in `ctx` over the session's settings `values` ((name, value),
/// names in lower case, as [`crate::settings::SessionVars::all`] lists them), and
/// `set_config`, whose effect the session applies before planning (this function only
/// returns the value set).
pub fn register_settings(ctx: &SessionContext, values: Vec<(String, String)>) {
    ctx.register_udf(ScalarUDF::new_from_impl(CurrentSetting {
        values,
        signature: Signature::one_of(
            vec![
                TypeSignature::Exact(vec![DataType::Utf8]),
                TypeSignature::Exact(vec![DataType::Utf8, DataType::Boolean]),
            ],
            Volatility::Stable,
        ),
    }));
    ctx.register_udf(ScalarUDF::new_from_impl(SetConfig {
        signature: Signature::exact(
            vec![DataType::Utf8, DataType::Utf8, DataType::Boolean],
            Volatility::Volatile,
        ),
    }));
}

/// `current_setting(name [, missing_ok])`: the session's settings as of the statement.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CurrentSetting {
    values: Vec<(String, String)>,
    signature: Signature,
}

impl ScalarUDFImpl for CurrentSetting {
    fn name(&self) -> &str {
        "current_setting"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let names = args.args[0].to_array(n)?;
        let names = names.as_string::<i32>();
        let missing_ok = match args.args.get(1) {
            Some(a) => Some(a.to_array(n)?),
            None => None,
        };
        let mut out: Vec<Option<String>> = Vec::with_capacity(n);
        for i in 0..n {
            if names.is_null(i) {
                out.push(None);
                continue;
            }
            let name = names.value(i).trim().to_ascii_lowercase();
            match self.values.iter().find(|(k, _)| *k == name) {
                Some((_, v)) => out.push(Some(v.clone())),
                None => {
                    let ok = missing_ok
                        .as_ref()
                        .is_some_and(|m| m.as_boolean().is_valid(i) && m.as_boolean().value(i));
                    if !ok {
                        return Err(DataFusionError::External(Box::new(Error::Setting {
                            code: "42704",
                            message: format!("unrecognized configuration parameter \"{name}\""),
                        })));
                    }
                    out.push(None);
                }
            }
        }
        Ok(ColumnarValue::Array(Arc::new(StringArray::from(out))))
    }
}

/// `set_config(name, value, is_local)`: returns `value`; the session sets the setting before
/// the statement is planned (see [`register_settings`]).
#[derive(Debug, PartialEq, Eq, Hash)]
struct SetConfig {
    signature: Signature,
}

impl ScalarUDFImpl for SetConfig {
    fn name(&self) -> &str {
        "set_config"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        Ok(args.args[1].clone())
    }
}

/// Sets the user `session_user`, `current_user`, `current_role` and `user` return in `ctx`
/// (Weir has no `SET ROLE`, so all four are the user named at startup). Each keeps its own
/// name, which is also the column's name, as in PostgreSQL (`SELECT current_user` shows a
/// `current_user` column).
pub fn register_user(ctx: &SessionContext, user: &str) {
    for name in ["session_user", "current_user", "current_role", "user"] {
        ctx.register_udf(ScalarUDF::new_from_impl(Constant::new(
            name,
            user.to_string(),
        )));
    }
}

/// `version()`'s text: PostgreSQL's form, naming the protocol version Weir follows (the
/// `server_version` setting's default) and Weir's own version.
pub fn version_text() -> String {
    let pg = crate::settings::SessionVars::default()
        .get("server_version")
        .unwrap_or_else(|_| "16.6".to_string());
    format!(
        "PostgreSQL {pg} (Weir {}) on {}-{}, 64-bit",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH,
        std::env::consts::OS
    )
}

/// A function of no arguments whose value is fixed for the session (`version()`,
/// `session_user`), or NULL for a `void` function.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Constant {
    name: &'static str,
    value: Option<String>,
    signature: Signature,
}

impl Constant {
    fn new(name: &'static str, value: String) -> Self {
        Constant {
            name,
            value: Some(value),
            signature: Signature::nullary(Volatility::Stable),
        }
    }

    /// A `void` function that does nothing (PostgreSQL prints its result as empty).
    fn void(name: &'static str) -> Self {
        Constant {
            name,
            value: None,
            signature: Signature::nullary(Volatility::Volatile),
        }
    }
}

impl ScalarUDFImpl for Constant {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(self.value.clone())))
    }
}

/// `pg_typeof(any)`: the PostgreSQL name of the argument's type, one per row (PostgreSQL
/// returns `regtype`, which prints as this name).
#[derive(Debug, PartialEq, Eq, Hash)]
struct PgTypeof {
    signature: Signature,
}

impl PgTypeof {
    fn new() -> Self {
        PgTypeof {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for PgTypeof {
    fn name(&self) -> &str {
        "pg_typeof"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = super::pg_type_name(&args.args[0].data_type());
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(name))))
    }
}

/// PostgreSQL's encoding names by number (`pg_wchar.h`'s `pg_enc`, server and client
/// encodings).
const ENCODINGS: [&str; 42] = [
    "SQL_ASCII",
    "EUC_JP",
    "EUC_CN",
    "EUC_KR",
    "EUC_TW",
    "EUC_JIS_2004",
    "UTF8",
    "MULE_INTERNAL",
    "LATIN1",
    "LATIN2",
    "LATIN3",
    "LATIN4",
    "LATIN5",
    "LATIN6",
    "LATIN7",
    "LATIN8",
    "LATIN9",
    "LATIN10",
    "WIN1256",
    "WIN1258",
    "WIN866",
    "WIN874",
    "KOI8R",
    "WIN1251",
    "WIN1252",
    "ISO_8859_5",
    "ISO_8859_6",
    "ISO_8859_7",
    "ISO_8859_8",
    "WIN1250",
    "WIN1253",
    "WIN1254",
    "WIN1255",
    "WIN1257",
    "KOI8U",
    "SJIS",
    "BIG5",
    "GBK",
    "UHC",
    "GB18030",
    "JOHAB",
    "SHIFT_JIS_2004",
];

/// `pg_encoding_to_char(integer)`: an encoding's name by number; `''` for an unknown number,
/// NULL for NULL. Takes any integer type (Weir's integer literals are `bigint`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct PgEncodingToChar {
    signature: Signature,
}

impl PgEncodingToChar {
    fn new() -> Self {
        PgEncodingToChar {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for PgEncodingToChar {
    fn name(&self) -> &str {
        "pg_encoding_to_char"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [t] if t.is_integer() || t.is_null() => Ok(vec![DataType::Int64]),
            _ => Err(function_does_not_exist(
                "pg_encoding_to_char",
                arg_types,
                "pg_encoding_to_char takes one integer",
            )),
        }
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let numbers = arrays[0].as_primitive::<Int64Type>();
        let out: StringArray = numbers
            .iter()
            .map(|n| {
                n.map(|n| {
                    usize::try_from(n)
                        .ok()
                        .and_then(|i| ENCODINGS.get(i))
                        .copied()
                        .unwrap_or("")
                })
            })
            .collect();
        crate::sql::semantics::shape_result(&args.args, Arc::new(out))
    }
}

/// Functions whose answer is always NULL in Weir, with PostgreSQL's arities and result
/// types:
/// - `col_description`, `obj_description`, `shobj_description` (`text`): an object's
///   comment (Weir has no `COMMENT ON`);
/// - `pg_get_function_result`, `pg_get_function_arguments`, `pg_get_serial_sequence`
///   (`text`): Weir has no user-defined functions or sequences;
/// - `pg_table_size`, `pg_indexes_size`, `pg_relation_size` (with an optional fork name),
///   `pg_total_relation_size`, `pg_database_size` (`bigint`, bytes): Weir keeps every
///   relation in one RocksDB instance and does not measure them one by one (PostgreSQL
///   also answers NULL for an oid it does not know).
#[derive(Debug, PartialEq, Eq, Hash)]
struct AlwaysNull {
    name: &'static str,
    result: DataType,
    signature: Signature,
}

impl AlwaysNull {
    /// A `text` function taking any arguments in one of these numbers.
    fn text(name: &'static str, arities: &[usize]) -> Self {
        let forms = arities.iter().map(|n| TypeSignature::Any(*n)).collect();
        AlwaysNull {
            name,
            result: DataType::Utf8,
            signature: Signature::one_of(forms, Volatility::Stable),
        }
    }

    /// A size in bytes (`bigint`) of a relation or database, with one or two arguments.
    fn size(name: &'static str) -> Self {
        AlwaysNull {
            name,
            result: DataType::Int64,
            signature: Signature::one_of(
                vec![TypeSignature::Any(1), TypeSignature::Any(2)],
                Volatility::Volatile,
            ),
        }
    }
}

impl ScalarUDFImpl for AlwaysNull {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.result.clone())
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        Ok(ColumnarValue::Scalar(ScalarValue::try_new_null(
            &self.result,
        )?))
    }
}

/// `pg_function_is_visible(oid)`, `pg_type_is_visible(oid)`: whether the object is visible
/// in the search path; true for every object (NULL for NULL), as Weir's objects all live in
/// schemas on the path and none hides another of the same name.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Visible {
    name: &'static str,
    signature: Signature,
}

impl Visible {
    fn new(name: &'static str) -> Self {
        Visible {
            name,
            signature: Signature::any(1, Volatility::Stable),
        }
    }
}

impl ScalarUDFImpl for Visible {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let nulls = arrays[0].logical_nulls();
        let out: BooleanArray = (0..arrays[0].len())
            .map(|i| (!nulls.as_ref().is_some_and(|n| n.is_null(i))).then_some(true))
            .collect();
        crate::sql::semantics::shape_result(&args.args, Arc::new(out))
    }
}

/// `_pg_expandarray(anyarray)`: for each array, the list of its elements with their 1-based
/// positions, as structs `(x anyelement, n integer)`; NULL for a NULL array. PostgreSQL's
/// `information_schema._pg_expandarray` is the set-returning form; the parser puts a call in
/// a SELECT list under `unnest` ([`crate::sql::parse::EXPAND_ARRAY_FUNCTION`]).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ExpandArray {
    signature: Signature,
}

impl ExpandArray {
    fn new() -> Self {
        ExpandArray {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }

    fn struct_fields(element: &DataType) -> arrow::datatypes::Fields {
        arrow::datatypes::Fields::from(vec![
            arrow::datatypes::Field::new("x", element.clone(), true),
            arrow::datatypes::Field::new("n", DataType::Int32, false),
        ])
    }
}

impl ScalarUDFImpl for ExpandArray {
    fn name(&self) -> &str {
        crate::sql::parse::EXPAND_ARRAY_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match &arg_types[0] {
            DataType::List(f) => Ok(DataType::new_list(
                DataType::Struct(Self::struct_fields(f.data_type())),
                true,
            )),
            other => Err(DataFusionError::External(Box::new(Error::plan(
                "42883",
                format!(
                    "function _pg_expandarray({}) does not exist",
                    super::pg_type_name(other)
                ),
            )))),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let list = arrays[0].as_list::<i32>();
        let DataType::List(element) = list.data_type() else {
            return Err(DataFusionError::Internal(
                "_pg_expandarray of a non-list".into(),
            ));
        };
        let offsets = list.offsets();
        let first = offsets[0] as usize;
        let last = offsets[offsets.len() - 1] as usize;
        let values = list.values().slice(first, last - first);
        let mut positions = Vec::with_capacity(values.len());
        for w in offsets.windows(2) {
            positions.extend(1..=(w[1] - w[0]));
        }
        let structs = arrow::array::StructArray::try_new(
            Self::struct_fields(element.data_type()),
            vec![values, Arc::new(arrow::array::Int32Array::from(positions))],
            None,
        )?;
        let rebased = arrow::buffer::OffsetBuffer::new(
            offsets
                .iter()
                .map(|o| o - offsets[0])
                .collect::<Vec<i32>>()
                .into(),
        );
        let out = arrow::array::ListArray::try_new(
            Arc::new(arrow::datatypes::Field::new_list_field(
                structs.data_type().clone(),
                true,
            )),
            rebased,
            Arc::new(structs),
            list.nulls().cloned(),
        )?;
        crate::sql::semantics::shape_result(&args.args, Arc::new(out))
    }
}

/// `pg_size_pretty(bigint)`: a byte count in the largest unit that keeps the number under a
/// limit, as PostgreSQL's `dbsize.c` does: bytes below 10,240; then kB, MB, GB, TB, PB (powers
/// of 1,024) below 20,480, the last unit rounded half away from zero (`10240` → `10 kB`,
/// `1048575` → `1024 kB`, `-1` → `-1 bytes`). Integer and numeric arguments are taken as
/// `bigint`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct PgSizePretty {
    signature: Signature,
}

impl PgSizePretty {
    fn new() -> Self {
        PgSizePretty {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

/// PostgreSQL's text for `bytes` (see [`PgSizePretty`]).
fn size_pretty(bytes: i64) -> String {
    // (name, limit, rounded, bits of the unit)
    const UNITS: [(&str, i64, bool, u32); 6] = [
        ("bytes", 10 * 1024, false, 0),
        ("kB", 20 * 1024 - 1, true, 10),
        ("MB", 20 * 1024 - 1, true, 20),
        ("GB", 20 * 1024 - 1, true, 30),
        ("TB", 20 * 1024 - 1, true, 40),
        ("PB", 20 * 1024 - 1, true, 50),
    ];
    let half_rounded = |x: i64| (x + if x < 0 { -1 } else { 1 }) / 2;
    let mut size = bytes;
    for (i, (name, limit, round, bits)) in UNITS.iter().enumerate() {
        let last = i + 1 == UNITS.len();
        if last || size.unsigned_abs() < limit.unsigned_abs() {
            let shown = if *round { half_rounded(size) } else { size };
            return format!("{shown} {name}");
        }
        let (_, _, next_round, next_bits) = UNITS[i + 1];
        // One bit more is kept when the next unit rounds, one less when this one did.
        let shift = next_bits - bits - u32::from(next_round) + u32::from(*round);
        size /= 1_i64 << shift;
    }
    unreachable!("the last unit always answers")
}

impl ScalarUDFImpl for PgSizePretty {
    fn name(&self) -> &str {
        "pg_size_pretty"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [t] if t.is_numeric() || t.is_null() => Ok(vec![DataType::Int64]),
            _ => Err(function_does_not_exist(
                "pg_size_pretty",
                arg_types,
                "pg_size_pretty takes a number of bytes",
            )),
        }
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out: StringArray = arrays[0]
            .as_primitive::<Int64Type>()
            .iter()
            .map(|n| n.map(size_pretty))
            .collect();
        crate::sql::semantics::shape_result(&args.args, Arc::new(out))
    }
}

/// PostgreSQL's built-in type OIDs (`pg_type.dat`) by the names `to_regtype` accepts.
const TYPE_OIDS: [(&str, i32); 40] = [
    ("bool", 16),
    ("boolean", 16),
    ("bytea", 17),
    ("char", 18),
    ("name", 19),
    ("int8", 20),
    ("bigint", 20),
    ("int2", 21),
    ("smallint", 21),
    ("int4", 23),
    ("integer", 23),
    ("int", 23),
    ("text", 25),
    ("oid", 26),
    ("json", 114),
    ("float4", 700),
    ("real", 700),
    ("float8", 701),
    ("double precision", 701),
    ("bpchar", 1042),
    ("character", 1042),
    ("varchar", 1043),
    ("character varying", 1043),
    ("date", 1082),
    ("time", 1083),
    ("time without time zone", 1083),
    ("timestamp", 1114),
    ("timestamp without time zone", 1114),
    ("timestamptz", 1184),
    ("timestamp with time zone", 1184),
    ("interval", 1186),
    ("numeric", 1700),
    ("decimal", 1700),
    ("uuid", 2950),
    ("jsonb", 3802),
    ("int4[]", 1007),
    ("integer[]", 1007),
    ("int8[]", 1016),
    ("bigint[]", 1016),
    ("text[]", 1009),
];

/// `to_regtype(text)`: the OID of the type the text names (`'integer'`, `'int4'`,
/// `'pg_catalog.text'`, `'bigint[]'`), NULL for a type Weir does not have (`'hstore'`), as
/// PostgreSQL answers for an unknown name instead of an error. Returns the OID as an `oid`
/// (PostgreSQL's `regtype` prints the type's name instead), which is what drivers compare it
/// with (`WHERE t.oid = to_regtype($1)`, psycopg's type lookup).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ToRegtype {
    signature: Signature,
}

impl ToRegtype {
    fn new() -> Self {
        ToRegtype {
            signature: Signature::user_defined(Volatility::Stable),
        }
    }
}

/// The OID of the type named `name` (see [`ToRegtype`]).
fn type_oid(name: &str) -> Option<i32> {
    let lower = name.trim().to_ascii_lowercase();
    let bare = lower.strip_prefix("pg_catalog.").unwrap_or(&lower);
    let bare = bare.trim_matches('"');
    TYPE_OIDS
        .iter()
        .find(|(n, _)| *n == bare)
        .map(|(_, oid)| *oid)
}

impl ScalarUDFImpl for ToRegtype {
    fn name(&self) -> &str {
        "to_regtype"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 | DataType::Null] => {
                Ok(vec![DataType::Utf8])
            }
            _ => Err(function_does_not_exist(
                "to_regtype",
                arg_types,
                "to_regtype takes a type's name as text",
            )),
        }
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out: arrow::array::Int32Array = arrays[0]
            .as_string::<i32>()
            .iter()
            .map(|n| n.and_then(type_oid))
            .collect();
        crate::sql::semantics::shape_result(&args.args, Arc::new(out))
    }
}

/// `pg_sleep(seconds)`: blocks the statement for that many seconds (a fraction allowed; NULL,
/// zero or negative: no wait), once per row, then returns NULL (PostgreSQL's `void` prints
/// as an empty value). Runs on a tokio worker: the wait is moved off the worker's task queue
/// with `block_in_place` where the runtime allows it. A cancel request or the session's
/// `statement_timeout` ends the wait with `57014`, as in PostgreSQL.
#[derive(Debug)]
struct PgSleep {
    signature: Signature,
    /// The session's cancel state.
    interrupt: Arc<crate::session::interrupt::Interrupt>,
}

impl PgSleep {
    fn new(interrupt: Arc<crate::session::interrupt::Interrupt>) -> Self {
        PgSleep {
            signature: Signature::user_defined(Volatility::Volatile),
            interrupt,
        }
    }
}

// One `pg_sleep` per session; its identity is its name and signature.
impl PartialEq for PgSleep {
    fn eq(&self, other: &Self) -> bool {
        self.signature == other.signature
    }
}

impl Eq for PgSleep {}

impl std::hash::Hash for PgSleep {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.signature.hash(state);
    }
}

impl ScalarUDFImpl for PgSleep {
    fn name(&self) -> &str {
        "pg_sleep"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        match arg_types {
            [t] if t.is_numeric() || t.is_null() => Ok(vec![DataType::Float64]),
            _ => Err(function_does_not_exist(
                "pg_sleep",
                arg_types,
                "pg_sleep takes a number of seconds",
            )),
        }
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let seconds = arrays[0].as_primitive::<Float64Type>();
        let total: f64 = seconds
            .iter()
            .flatten()
            .filter(|s| s.is_finite() && *s > 0.0)
            .sum();
        if total > 0.0 {
            let wait = Duration::from_secs_f64(total.min(u32::MAX as f64));
            let in_multi_thread_runtime = tokio::runtime::Handle::try_current()
                .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
            let slept = if in_multi_thread_runtime {
                tokio::task::block_in_place(|| self.interrupt.sleep(wait))
            } else {
                self.interrupt.sleep(wait)
            };
            slept.map_err(|e| DataFusionError::External(Box::new(e)))?;
        }
        let out: ArrayRef = Arc::new(StringArray::new_null(seconds.len()));
        crate::sql::semantics::shape_result(&args.args, out)
    }
}

/// 42883 for a call no form of the function takes.
fn function_does_not_exist(name: &str, arg_types: &[DataType], hint: &str) -> DataFusionError {
    let names: Vec<String> = arg_types.iter().map(super::pg_type_name).collect();
    DataFusionError::External(Box::new(Error::plan(
        "42883",
        format!(
            "function {name}({}) does not exist; {hint}",
            names.join(", ")
        ),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Array;

    async fn one(ctx: &SessionContext, sql: &str) -> Option<String> {
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let col = arrow::compute::cast(batches[0].column(0), &DataType::Utf8).unwrap();
        let col = col.as_string::<i32>();
        (!col.is_null(0)).then(|| col.value(0).to_string())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn information_functions_answer_as_postgresql() {
        let ctx = SessionContext::new();
        register(&ctx, "alice", Arc::default());
        let v = one(&ctx, "SELECT version()").await.unwrap();
        assert!(v.starts_with("PostgreSQL 16.6 (Weir "), "{v}");
        assert_eq!(
            one(&ctx, "SELECT pg_encoding_to_char(6)").await.unwrap(),
            "UTF8"
        );
        assert_eq!(
            one(&ctx, "SELECT pg_encoding_to_char(0)").await.unwrap(),
            "SQL_ASCII"
        );
        assert_eq!(
            one(&ctx, "SELECT pg_encoding_to_char(99)").await.unwrap(),
            ""
        );
        assert_eq!(one(&ctx, "SELECT pg_encoding_to_char(NULL)").await, None);
        assert_eq!(
            one(&ctx, "SELECT pg_typeof(CAST(1 AS INT))").await.unwrap(),
            "integer"
        );
        assert_eq!(one(&ctx, "SELECT pg_typeof('x')").await.unwrap(), "text");
        assert_eq!(one(&ctx, "SELECT col_description(1, 2)").await, None);
        assert_eq!(one(&ctx, "SELECT obj_description(1)").await, None);
        assert_eq!(
            one(&ctx, "SELECT obj_description(1, 'pg_class')").await,
            None
        );
        let start = std::time::Instant::now();
        assert_eq!(one(&ctx, "SELECT pg_sleep(0.2)").await, None);
        assert!(start.elapsed() >= Duration::from_millis(200));
        assert_eq!(one(&ctx, "SELECT pg_sleep(-1)").await, None);
        assert_eq!(
            one(&ctx, "SELECT pg_function_is_visible(1)").await.unwrap(),
            "true"
        );
        assert_eq!(one(&ctx, "SELECT pg_table_size(1)").await, None);
        // OIDs from PostgreSQL's pg_type.dat.
        assert_eq!(
            one(&ctx, "SELECT to_regtype('integer')").await.unwrap(),
            "23"
        );
        assert_eq!(
            one(&ctx, "SELECT to_regtype('pg_catalog.timestamptz')")
                .await
                .unwrap(),
            "1184"
        );
        assert_eq!(one(&ctx, "SELECT to_regtype('hstore')").await, None);
        assert_eq!(
            one(&ctx, "SELECT pg_get_serial_sequence('t', 'a')").await,
            None
        );
    }

    /// Expected texts worked out by hand from PostgreSQL's rule (dbsize.c): below 10,240
    /// bytes as is; else the count in half-units of the smallest unit where it is below
    /// 20,479, rounded half away from zero to whole units.
    #[test]
    fn size_pretty_follows_postgresql() {
        let cases: [(i64, &str); 13] = [
            (0, "0 bytes"),
            (10239, "10239 bytes"),
            (-10239, "-10239 bytes"),
            (10240, "10 kB"),
            // 10,484,736 bytes are 10,239 kB, 20,478 half-kB: still kB.
            (10_484_736, "10239 kB"),
            // 10,485,248 bytes are 20,479 half-kB: MB, 19 half-MB rounded to 10.
            (10_485_248, "10 MB"),
            // 20,971,520 bytes are 40,960 half-kB, 40 half-MB: 20 MB.
            (20_971_520, "20 MB"),
            (1_048_575, "1024 kB"),
            (1536, "1536 bytes"),
            (123_456_789, "118 MB"),
            (-123_456_789, "-118 MB"),
            (1_i64 << 40, "1024 GB"),
            (i64::MAX, "8192 PB"),
        ];
        for (bytes, text) in cases {
            assert_eq!(size_pretty(bytes), text, "{bytes}");
        }
    }
}

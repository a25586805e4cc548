//! Output column names of a SELECT list, PostgreSQL's way.
//!
//! DataFusion names an unaliased expression by its text (`count(*)`, `Int64(1)`); PostgreSQL
//! by its `FigureColname` (parser/parse_target.c: the alias; else a column's name; else a
//! function's name; a cast's type name; else `?column?`). Results and materialized views'
//! columns are shown under PostgreSQL's names ([`shown_names`]).
//!
//! PostgreSQL also lets a SELECT list repeat a name (`SELECT 1, 1`, `SELECT 38 AS c, -x AS
//! c`); a DataFusion plan may not. Such a query is planned with unique internal aliases
//! ([`unique_output_names`]).

use datafusion::sql::sqlparser::ast::{
    AccessExpr, DataType, ExactNumberInfo, Expr, Ident, OrderByKind, Query, Select, SelectItem,
    SetExpr, Statement, TimezoneInfo, Value,
};

/// The name PostgreSQL shows for an unaliased SELECT-list expression.
pub fn figure_name(e: &Expr) -> String {
    figure(e).0
}

/// PostgreSQL's `FigureColnameInternal`: a name and its strength (2: a column, function or
/// keyword construct; 1: a `CASE` or a cast's type name; 0: nothing better than `?column?`).
/// A cast keeps its argument's name when that is strong, else takes the type's name (`1::int`
/// is `int4`, `(a + 1)::text` is `text`).
fn figure(e: &Expr) -> (String, u8) {
    fn ident(i: &Ident) -> String {
        if i.quote_style.is_some() {
            i.value.clone()
        } else {
            i.value.to_ascii_lowercase()
        }
    }
    let strong = |n: &str| (n.to_string(), 2);
    match e {
        Expr::Identifier(i) => (ident(i), 2),
        Expr::CompoundIdentifier(parts) => parts
            .last()
            .map(|p| (ident(p), 2))
            .unwrap_or_else(|| ("?column?".into(), 0)),
        // `ARRAY(subquery)` as the parser rewrites it (`crate::sql::parse`):
        // `weir_array_or_empty((...))`.
        Expr::Function(f) if is_array_subquery(f) => strong("array"),
        // A scalar subquery as the parser rewrites it (`crate::sql::parse`):
        // `weir_one_row((SELECT array_agg(e) AS name ...))`.
        Expr::Function(f) if one_row_subquery(f).is_some() => match one_row_subquery(f) {
            Some(name) if name != "?column?" => (name.to_string(), 2),
            _ => ("?column?".into(), 0),
        },
        // `x op ANY (array)` and `x IN (subquery)` as the parser rewrites them
        // (`crate::sql::parse`): an operator, `?column?`.
        Expr::Function(f)
            if f.name
                .to_string()
                .eq_ignore_ascii_case(crate::sql::parse::ANY_OP_FUNCTION) =>
        {
            ("?column?".into(), 0)
        }
        // `x::varchar(n)` as the parser rewrites it (`crate::sql::parse`): `varchar(CAST(x AS
        // varchar), n)`, named as the cast.
        Expr::Function(f) if length_cast(f).is_some() => {
            length_cast(f).map(figure).unwrap_or_default()
        }
        Expr::Function(f) => f
            .name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(|i| match ident(i).as_str() {
                // The SQL-standard spellings PostgreSQL turns into other functions.
                "trim" => strong("btrim"),
                // `EXTRACT(f FROM x)` as the parser rewrites it.
                crate::sql::functions::extract::DatePart::EXTRACT => strong("extract"),
                n => strong(n),
            })
            .unwrap_or_else(|| ("?column?".into(), 0)),
        // `($1::int4)`: a parameter the client declared, as the protocol layer writes it
        // (`crate::sql::parse::declare_parameter_types`); PostgreSQL names `SELECT $1`
        // `?column?`.
        Expr::Nested(inner)
            if matches!(inner.as_ref(), Expr::Cast { expr, .. }
                if matches!(expr.as_ref(), Expr::Value(v)
                    if matches!(v.value, datafusion::sql::sqlparser::ast::Value::Placeholder(_)))) =>
        {
            ("?column?".into(), 0)
        }
        Expr::Nested(inner) | Expr::Collate { expr: inner, .. } => figure(inner),
        Expr::Cast {
            expr, data_type, ..
        } => {
            let (name, strength) = figure(expr);
            if strength <= 1 {
                (type_name(data_type), 1)
            } else {
                (name, strength)
            }
        }
        Expr::TypedString(ts) => (type_name(&ts.data_type), 1),
        Expr::Interval(_) => ("interval".into(), 1),
        Expr::Case { .. } => ("case".into(), 1),
        // `NOT EXISTS` is an operator over `EXISTS`: `?column?`.
        Expr::Exists { negated: false, .. } => strong("exists"),
        Expr::Array(_) => strong("array"),
        Expr::Tuple(_) => strong("row"),
        Expr::Extract { .. } => strong("extract"),
        Expr::Substring { .. } => strong("substring"),
        Expr::Trim { .. } => strong("btrim"),
        Expr::Position { .. } => strong("position"),
        Expr::Overlay { .. } => strong("overlay"),
        Expr::Ceil { .. } => strong("ceil"),
        Expr::Floor { .. } => strong("floor"),
        Expr::AtTimeZone { .. } => strong("timezone"),
        // Field selection and subscripts (PostgreSQL's A_Indirection): the last field name,
        // else the base expression's name (`(r).x` is `x`, `conkey[1]` is `conkey`).
        Expr::CompoundFieldAccess { root, access_chain } => access_chain
            .iter()
            .rev()
            .find_map(|a| match a {
                AccessExpr::Dot(Expr::Identifier(i)) => Some(ident(i)),
                AccessExpr::Dot(Expr::Value(v)) => match &v.value {
                    Value::SingleQuotedString(name) | Value::DoubleQuotedString(name) => {
                        Some(name.clone())
                    }
                    _ => None,
                },
                _ => None,
            })
            .map(|name| (name, 2))
            .unwrap_or_else(|| figure(root)),
        Expr::Subquery(q) => match first_item_name(q) {
            Some(n) => (n, 2),
            None => ("?column?".into(), 0),
        },
        _ => ("?column?".into(), 0),
    }
}

/// The column name of the scalar subquery when `f` is the parser's form of one,
/// `weir_one_row(<subquery>, '<name>')`.
fn one_row_subquery(f: &datafusion::sql::sqlparser::ast::Function) -> Option<&str> {
    use datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    if !f
        .name
        .to_string()
        .eq_ignore_ascii_case(crate::sql::parse::ONE_ROW_FUNCTION)
    {
        return None;
    }
    match &f.args {
        FunctionArguments::List(list) => match list.args.as_slice() {
            [
                FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Subquery(_))),
                FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v))),
            ] => match &v.value {
                Value::SingleQuotedString(name) => Some(name.as_str()),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// The cast of `varchar(CAST(x AS varchar), n)` / `bpchar(...)`, the parser's form of a cast
/// to a length-limited string.
fn length_cast(f: &datafusion::sql::sqlparser::ast::Function) -> Option<&Expr> {
    use datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    let name = f.name.to_string();
    if !(name.eq_ignore_ascii_case("varchar") || name.eq_ignore_ascii_case("bpchar")) {
        return None;
    }
    match &f.args {
        FunctionArguments::List(list) => match list.args.as_slice() {
            [
                FunctionArg::Unnamed(FunctionArgExpr::Expr(cast @ Expr::Cast { .. })),
                FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(_))),
            ] => Some(cast),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `f` is the rewritten form of `ARRAY(subquery)`: `weir_array_or_empty(<subquery>)`.
fn is_array_subquery(f: &datafusion::sql::sqlparser::ast::Function) -> bool {
    use datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    let FunctionArguments::List(list) = &f.args else {
        return false;
    };
    matches!(
        list.args.as_slice(),
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Subquery(
            _
        )))]
    ) && f
        .name
        .to_string()
        .eq_ignore_ascii_case(crate::sql::parse::ARRAY_OR_EMPTY_FUNCTION)
}

/// The name PostgreSQL gives a cast to `t` when its argument has no name of its own: the
/// last word of the type's internal name (`int4`, `float8`, `varchar`, `timestamptz`).
fn type_name(t: &DataType) -> String {
    match t {
        DataType::Int(_) | DataType::Integer(_) | DataType::Int4(_) => "int4".into(),
        DataType::BigInt(_) | DataType::Int8(_) => "int8".into(),
        DataType::SmallInt(_) | DataType::Int2(_) => "int2".into(),
        DataType::Real | DataType::Float4 => "float4".into(),
        DataType::Double(_) | DataType::DoublePrecision | DataType::Float8 => "float8".into(),
        DataType::Float(info) => match info {
            ExactNumberInfo::Precision(p) | ExactNumberInfo::PrecisionAndScale(p, _)
                if *p <= 24 =>
            {
                "float4".into()
            }
            _ => "float8".into(),
        },
        DataType::Numeric(_) | DataType::Decimal(_) | DataType::Dec(_) => "numeric".into(),
        DataType::Bool | DataType::Boolean => "bool".into(),
        DataType::Varchar(_) | DataType::CharacterVarying(_) | DataType::CharVarying(_) => {
            "varchar".into()
        }
        DataType::Char(_) | DataType::Character(_) => "bpchar".into(),
        DataType::Timestamp(_, tz) => match tz {
            TimezoneInfo::WithTimeZone | TimezoneInfo::Tz => "timestamptz".into(),
            _ => "timestamp".into(),
        },
        DataType::Time(_, tz) => match tz {
            TimezoneInfo::WithTimeZone | TimezoneInfo::Tz => "timetz".into(),
            _ => "time".into(),
        },
        DataType::Custom(name, _) => name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(|i| i.value.to_ascii_lowercase())
            .unwrap_or_else(|| "?column?".into()),
        // PostgreSQL names a cast to an array type after its element type (`'{1}'::int[]`
        // is `int4`).
        DataType::Array(
            datafusion::sql::sqlparser::ast::ArrayElemTypeDef::SquareBracket(inner, _)
            | datafusion::sql::sqlparser::ast::ArrayElemTypeDef::AngleBracket(inner)
            | datafusion::sql::sqlparser::ast::ArrayElemTypeDef::Parenthesis(inner),
        ) => type_name(inner),
        DataType::Array(_) => "array".into(),
        other => {
            let text = other.to_string().to_ascii_lowercase();
            text.split(['(', ' '])
                .next()
                .unwrap_or("?column?")
                .to_string()
        }
    }
}

/// The shown name of the first output column of a query (a scalar subquery's name).
fn first_item_name(q: &Query) -> Option<String> {
    match leftmost_select(&q.body)?.projection.first()? {
        SelectItem::UnnamedExpr(e) => Some(figure_name(e)),
        SelectItem::ExprWithAlias { alias, .. } => Some(alias_name(alias)),
        _ => None,
    }
}

/// The SELECT whose list names a query's columns: the body itself, or the leftmost branch
/// of a set operation (PostgreSQL names a `UNION`'s columns after its first branch).
fn leftmost_select(body: &SetExpr) -> Option<&Select> {
    match body {
        SetExpr::Select(s) => Some(s),
        SetExpr::Query(q) => leftmost_select(&q.body),
        SetExpr::SetOperation { left, .. } => leftmost_select(left),
        _ => None,
    }
}

fn alias_name(alias: &Ident) -> String {
    if alias.quote_style.is_some() {
        alias.value.clone()
    } else {
        alias.value.to_ascii_lowercase()
    }
}

/// The output names PostgreSQL shows for a query whose plan names its columns
/// `planned` (DataFusion names unaliased expressions by their text: `count(*)`, `Int64(1)`).
/// Each unaliased SELECT-list item gets [`figure_name`]; a wildcard's columns keep their
/// names. `None` when the statement is not a query, its list has more than one wildcard, or
/// the names would not change.
pub fn shown_names(stmt: &Statement, planned: &[String]) -> Option<Vec<String>> {
    let Statement::Query(query) = stmt else {
        return None;
    };
    let select = leftmost_select(&query.body)?;
    let items = &select.projection;
    let wildcards = items
        .iter()
        .filter(|i| {
            matches!(
                i,
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
            )
        })
        .count();
    if wildcards > 1 || (wildcards == 0 && items.len() != planned.len()) {
        return None;
    }
    if items.len() - wildcards > planned.len() {
        return None;
    }
    let mut names = planned.to_vec();
    let mut from_end = false;
    for (i, item) in items.iter().enumerate() {
        let name = match item {
            SelectItem::UnnamedExpr(e) => figure_name(e),
            SelectItem::ExprWithAlias { alias, .. } => alias_name(alias),
            _ => {
                from_end = true;
                continue;
            }
        };
        // Items after the wildcard are counted from the end of the output.
        let at = if from_end {
            planned.len() - (items.len() - i)
        } else {
            i
        };
        names[at] = name;
    }
    (names != planned).then_some(names)
}

/// The start of the internal output names of [`unique_output_names`].
pub const INTERNAL_PREFIX: &str = "weir_output_";

/// The statement with every SELECT-list item aliased to a unique internal name, and the names
/// to show; `None` when the statement is not a plain SELECT or its list has a wildcard.
pub fn unique_output_names(stmt: &Statement) -> Option<(Statement, Vec<String>)> {
    let mut stmt = stmt.clone();
    let Statement::Query(query) = &mut stmt else {
        return None;
    };
    let SetExpr::Select(select) = query.body.as_mut() else {
        return None;
    };
    let mut names = Vec::with_capacity(select.projection.len());
    for (i, item) in select.projection.iter_mut().enumerate() {
        let internal = Ident::new(format!("{INTERNAL_PREFIX}{i}"));
        let (expr, name) = match item {
            SelectItem::UnnamedExpr(e) => (e.clone(), figure_name(e)),
            SelectItem::ExprWithAlias { expr, alias } => (expr.clone(), alias_name(alias)),
            _ => return None,
        };
        *item = SelectItem::ExprWithAlias {
            expr,
            alias: internal,
        };
        names.push(name);
    }
    // ORDER BY may name an output column (PostgreSQL prefers an output column's name to an
    // input column's), which now has another name: such a name becomes the column's
    // position. Other expressions refer to input columns, which keep their names.
    if let Some(order) = &mut query.order_by {
        let OrderByKind::Expressions(exprs) = &mut order.kind else {
            return None;
        };
        for o in exprs {
            if let Expr::Identifier(ident) = &o.expr {
                let name = alias_name(ident);
                let mut at = names.iter().enumerate().filter(|(_, n)| **n == name);
                match (at.next(), at.next()) {
                    (Some((i, _)), None) => {
                        o.expr = Expr::Value(
                            Value::Number((i + 1).to_string(), false).with_empty_span(),
                        );
                    }
                    // Ambiguous: PostgreSQL refuses it (42702); so does the plan.
                    (Some(_), Some(_)) => return None,
                    _ => {}
                }
            }
        }
    }
    Some((stmt, names))
}

/// The ORDER BY items of each `SELECT` in `stmt` that are a bare name of one output column
/// computed from something else (`SELECT v::text ... ORDER BY v`, `SELECT -v AS v ... ORDER
/// BY v`) replaced by that column's position: PostgreSQL resolves a bare ORDER BY name to an
/// output column first and to an input column only when no output column has the name
/// (docs, 7.5 "Sorting Rows"; `findTargetlistEntrySQL92`), where DataFusion took the input
/// column. A name several output columns have for the same expression is the first's
/// position. A list with a wildcard, a name two output columns have for different
/// expressions (PostgreSQL's `42702`, [`check_order_by_ambiguity`]), `DISTINCT ON` (whose
/// keys resolve alike in PostgreSQL, here to the input columns) and set operations (whose
/// ORDER BY sees output columns only) are left as written.
pub fn order_by_output_names(stmt: &mut Statement) {
    use datafusion::sql::sqlparser::ast::{VisitMut, VisitorMut};
    use std::ops::ControlFlow;
    struct Names;
    impl VisitorMut for Names {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            // `ORDER BY (1)` is the output column's number as `ORDER BY 1` is (PostgreSQL's
            // grammar keeps no parentheses); DataFusion sorted by the constant.
            if let Some(order) = &mut query.order_by
                && let OrderByKind::Expressions(exprs) = &mut order.kind
            {
                for o in exprs.iter_mut() {
                    let mut e = &o.expr;
                    while let Expr::Nested(inner) = e {
                        e = inner;
                    }
                    if matches!(e, Expr::Value(v) if matches!(v.value, Value::Number(..))) {
                        o.expr = e.clone();
                    }
                }
            }
            let SetExpr::Select(select) = query.body.as_ref() else {
                return ControlFlow::Continue(());
            };
            // DISTINCT ON's keys must lead the ORDER BY as written.
            if matches!(
                select.distinct,
                Some(datafusion::sql::sqlparser::ast::Distinct::On(_))
            ) {
                return ControlFlow::Continue(());
            }
            let Some(order) = &mut query.order_by else {
                return ControlFlow::Continue(());
            };
            let OrderByKind::Expressions(exprs) = &mut order.kind else {
                return ControlFlow::Continue(());
            };
            // (name, expression, aliased)
            let mut names = Vec::with_capacity(select.projection.len());
            for item in &select.projection {
                match item {
                    SelectItem::UnnamedExpr(e) => names.push((figure_name(e), e, false)),
                    SelectItem::ExprWithAlias { alias, expr } => {
                        names.push((alias_name(alias), expr, true))
                    }
                    _ => return ControlFlow::Continue(()),
                }
            }
            for o in exprs {
                let Expr::Identifier(ident) = &o.expr else {
                    continue;
                };
                let name = alias_name(ident);
                let mut at = names.iter().enumerate().filter(|(_, (n, ..))| *n == name);
                let Some((i, (_, expr, aliased))) = at.next() else {
                    continue;
                };
                // More columns of the name: the same expression (`SELECT a AS x, a AS x`,
                // whose first column PostgreSQL sorts by), or ambiguous (refused before).
                let more = at.next().is_some();
                if names.iter().any(|(n, e, _)| *n == name && e != expr) {
                    continue;
                }
                // The column itself (`SELECT v ... ORDER BY v`, `SELECT t.v ...`): as written.
                let itself = !aliased
                    && !more
                    && matches!(expr, Expr::Identifier(_) | Expr::CompoundIdentifier(_));
                if !itself {
                    o.expr =
                        Expr::Value(Value::Number((i + 1).to_string(), false).with_empty_span());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = VisitMut::visit(stmt, &mut Names);
}

/// Name of the identity function [`name_casts`] wraps casts in (see
/// `crate::sql::semantics`'s `CastNamed`).
pub const CAST_NAMED_FUNCTION: &str = "weir_cast_named";

/// The statement with each cast of a column or expression (not of a literal or parameter)
/// wrapped as `weir_cast_named(CAST(x AS t), 't')`, for a query DataFusion refuses because
/// two expressions that differ only in a cast share a name: DataFusion names a cast by its
/// argument alone, so `max(ts), max(ts::date)` are both `max(ts)` in one aggregate, and
/// `GROUP BY x::text, x` repeats `x`. The wrapper (the value unchanged) carries the type in
/// its name. The output names are figured before, from the statement as written.
pub fn name_casts(stmt: &Statement) -> Statement {
    use datafusion::sql::sqlparser::ast::{VisitMut, VisitorMut};
    struct Casts;
    impl VisitorMut for Casts {
        type Break = ();
        fn post_visit_expr(&mut self, e: &mut Expr) -> std::ops::ControlFlow<()> {
            if let Expr::Cast {
                expr, data_type, ..
            } = e
                && !matches!(expr.as_ref(), Expr::Value(_))
            {
                let tag = Expr::value(Value::SingleQuotedString(data_type.to_string()));
                let cast = std::mem::replace(e, Expr::value(Value::Null));
                *e = crate::sql::parse::function_call(CAST_NAMED_FUNCTION, vec![cast, tag]);
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut stmt = stmt.clone();
    let _ = VisitMut::visit(&mut stmt, &mut Casts);
    stmt
}

/// True when `e`, an `ORDER BY` key of a set operation, names one of its output columns: a
/// name, a qualified name (left to the planner), an output column's number, or one of these in
/// parentheses. PostgreSQL sorts a set operation's result by its columns only
/// (`transformSetOperationStmt`: `0A000` for any other expression).
fn output_column_reference(e: &Expr) -> bool {
    match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => true,
        Expr::Value(v) => matches!(v.value, Value::Number(..)),
        Expr::Nested(inner) => output_column_reference(inner),
        _ => false,
    }
}

/// The integer an `ORDER BY` key is when it is an integer constant (`2`, `(2)`, `-1`): a
/// column's position.
fn constant_position(e: &Expr) -> Option<i64> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        Expr::Nested(inner) => constant_position(inner),
        Expr::UnaryOp {
            op: datafusion::sql::sqlparser::ast::UnaryOperator::Minus,
            expr,
        } => constant_position(expr).map(|p| -p),
        _ => None,
    }
}

/// Refuses an `ORDER BY` item that is a bare name two output columns of its `SELECT` have for
/// different expressions (`SELECT a AS x, b AS x FROM t ORDER BY x`), as PostgreSQL does
/// (`findTargetlistEntrySQL92`: two matches whose expressions differ); DataFusion refused it
/// with its internal message about unique projection names. In a set operation (`... UNION
/// ... ORDER BY x`) the names are its leftmost branch's, and any two alike are ambiguous. A
/// select list with a wildcard is left to the plan.
///
/// # Errors
/// `42702` `ORDER BY "x" is ambiguous`; `0A000` for an expression (`a + 1`) as a set
/// operation's `ORDER BY` key ([`output_column_reference`]); `42703` for a name that is not
/// one of a set operation's output columns; `42P10` for a position below 1.
pub fn check_order_by_ambiguity(stmt: &Statement) -> crate::error::Result<()> {
    use datafusion::sql::sqlparser::ast::{Visit, Visitor};
    use std::ops::ControlFlow;
    struct Ambiguity;
    impl Visitor for Ambiguity {
        type Break = crate::error::Error;
        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<Self::Break> {
            let Some(order) = &query.order_by else {
                return ControlFlow::Continue(());
            };
            // A set operation's output columns are named by its leftmost branch; two of one
            // name are different columns (PostgreSQL compares the output columns, not the
            // branch's expressions).
            // `ORDER BY 0` and `ORDER BY -1` name no column (`42P10`, as for a position past
            // the last column).
            if let OrderByKind::Expressions(exprs) = &order.kind {
                for o in exprs {
                    if let Some(position) = constant_position(&o.expr)
                        && position < 1
                    {
                        return ControlFlow::Break(crate::error::Error::plan(
                            "42P10",
                            format!("ORDER BY position {position} is not in select list"),
                        ));
                    }
                }
            }
            let mut body = query.body.as_ref();
            let mut set_operation = false;
            while let SetExpr::SetOperation { left, .. } = body {
                body = left.as_ref();
                set_operation = true;
            }
            let SetExpr::Select(select) = body else {
                return ControlFlow::Continue(());
            };
            let OrderByKind::Expressions(exprs) = &order.kind else {
                return ControlFlow::Continue(());
            };
            if set_operation
                && let Some(o) = exprs.iter().find(|o| !output_column_reference(&o.expr))
            {
                return ControlFlow::Break(crate::error::Error::NotSupported(format!(
                    "invalid UNION/INTERSECT/EXCEPT ORDER BY clause: {} is an expression; only \
                     result column names or numbers can be used (add it to every SELECT, or \
                     move the set operation into a FROM clause)",
                    o.expr
                )));
            }
            let mut items: Vec<(String, &Expr)> = Vec::with_capacity(select.projection.len());
            for item in &select.projection {
                match item {
                    SelectItem::UnnamedExpr(e) => items.push((figure_name(e), e)),
                    SelectItem::ExprWithAlias { alias, expr } => {
                        items.push((alias_name(alias), expr))
                    }
                    _ => return ControlFlow::Continue(()),
                }
            }
            for o in exprs {
                let Expr::Identifier(ident) = &o.expr else {
                    continue;
                };
                let name = alias_name(ident);
                let mut matches = items.iter().filter(|(n, _)| *n == name).map(|(_, e)| e);
                // A set operation's ORDER BY sees its output columns only.
                if set_operation && !items.iter().any(|(n, _)| *n == name) {
                    return ControlFlow::Break(crate::error::Error::plan(
                        "42703",
                        format!("column \"{}\" does not exist", ident.value),
                    ));
                }
                if let Some(first) = matches.next()
                    && matches.any(|e| set_operation || e != first)
                {
                    return ControlFlow::Break(crate::error::Error::plan(
                        "42702",
                        format!("ORDER BY \"{}\" is ambiguous", ident.value),
                    ));
                }
            }
            ControlFlow::Continue(())
        }
    }
    match Visit::visit(stmt, &mut Ambiguity) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_of_expressions_are_named_by_their_type() {
        let stmt = crate::sql::parse::parse_one(
            "SELECT max(ts), max(ts::date), '1'::int, $1::text FROM t GROUP BY x::text",
        )
        .unwrap();
        let named = name_casts(&stmt).to_string();
        assert!(
            named.contains("max(weir_cast_named(ts::DATE, 'DATE'))"),
            "{named}"
        );
        assert!(
            named.contains("GROUP BY weir_cast_named(x::TEXT, 'TEXT')"),
            "{named}"
        );
        // Literals and parameters keep their casts as they are.
        assert!(
            named.contains("'1'::INT,") && named.contains("$1::TEXT"),
            "{named}"
        );
    }

    #[test]
    fn repeated_names_are_kept() {
        let stmt =
            crate::sql::parse::parse_one("SELECT 1, 1, x AS c, -x AS c, count(*), t.y FROM t")
                .unwrap();
        let (renamed, names) = unique_output_names(&stmt).unwrap();
        assert_eq!(names, ["?column?", "?column?", "c", "c", "count", "y"]);
        assert!(renamed.to_string().contains("weir_output_5"));
    }

    #[test]
    fn names_follow_postgres() {
        let stmt = crate::sql::parse::parse_one(
            "SELECT count(*), 1, x + 1, 1::int, '1'::text, (a + 1)::text, x::bigint, \
             CASE WHEN x THEN 1 END, CASE WHEN x THEN 1 END::float, (SELECT max(y) FROM u), \
             EXISTS (SELECT 1), DATE '2020-01-01', CAST(1.5 AS double precision) AS \"Q\" FROM t",
        )
        .unwrap();
        let planned: Vec<String> = (0..13).map(|i| format!("p{i}")).collect();
        let names = shown_names(&stmt, &planned).unwrap();
        assert_eq!(
            names,
            [
                "count", "?column?", "?column?", "int4", "text", "text", "x", "case", "float8",
                "max", "exists", "date", "Q"
            ]
        );
    }

    #[test]
    fn a_wildcard_keeps_its_columns() {
        let stmt = crate::sql::parse::parse_one("SELECT 1, *, count(*) FROM t").unwrap();
        let planned = ["Int64(1)", "a", "b", "count(*)"].map(String::from);
        assert_eq!(
            shown_names(&stmt, &planned).unwrap(),
            ["?column?", "a", "b", "count"]
        );
        let same = crate::sql::parse::parse_one("SELECT a, b FROM t").unwrap();
        assert!(shown_names(&same, &planned[1..3]).is_none());
    }

    #[test]
    fn rewritten_forms_keep_postgres_names() {
        let stmt = crate::sql::parse::parse_one(
            "SELECT x = ANY(ARRAY[1]), x IN (SELECT 1), x::varchar(3), 5::varchar(2), \
             ts AT TIME ZONE 'UTC' FROM t",
        )
        .unwrap();
        let planned: Vec<String> = (0..5).map(|i| format!("p{i}")).collect();
        assert_eq!(
            shown_names(&stmt, &planned).unwrap(),
            ["?column?", "?column?", "x", "varchar", "timezone"]
        );
    }

    #[test]
    fn derived_tables_name_their_columns() {
        let stmt = crate::sql::parse::parse_one(
            "WITH c AS (SELECT count(*), x FROM t GROUP BY x) \
             SELECT * FROM (SELECT sum(x), x + 1, x + 2, y FROM t) s, \
             (SELECT max(x) FROM t) AS m(named), c",
        )
        .unwrap()
        .to_string();
        assert!(stmt.contains("count(*) AS \"count\", x FROM"), "{stmt}");
        assert!(
            stmt.contains("sum(x) AS \"sum\", x + 1, x + 2, y FROM"),
            "{stmt}"
        );
        assert!(stmt.contains("SELECT max(x) FROM t) AS m"), "{stmt}");
        // A name its query's ORDER BY or GROUP BY reads stays an input column's there.
        let stmt = crate::sql::parse::parse_one(
            "SELECT * FROM (SELECT x::text, upper(b) FROM t GROUP BY x, b ORDER BY -x) s",
        )
        .unwrap()
        .to_string();
        assert!(!stmt.contains("AS \"x\""), "{stmt}");
        assert!(stmt.contains("AS \"upper\""), "{stmt}");
    }

    #[test]
    fn wildcards_are_left_alone() {
        let stmt = crate::sql::parse::parse_one("SELECT *, 1 FROM t").unwrap();
        assert!(unique_output_names(&stmt).is_none());
    }
}

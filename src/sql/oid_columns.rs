//! Which result columns of a query hold OIDs, so that they are described to a client as `oid`
//! and `oid[]` as PostgreSQL describes them.
//!
//! PostgreSQL keeps the type `oid` through the expressions that do not change a value's type:
//! a `CASE` whose branches are `oid` (or NULL), a scalar subquery selecting an `oid`, `min`,
//! `max` and `coalesce` of `oid`s; `array_agg` of an `oid` and `ARRAY[..]` of `oid`s are `oid[]`
//! (PostgreSQL docs, 10.5 "UNION, CASE, and Related Constructs", 9.21 "Aggregate Functions").
//! Weir's catalog columns carry arrow-pg's `oid` marker (an `Int32` field's metadata), but
//! DataFusion rebuilds the field of a `CASE` or an aggregate from its type alone and drops it.
//! Drivers need the type: asyncpg decodes its own type-introspection query, whose
//! `attrtypoids` column is `CASE WHEN .. THEN (SELECT array_agg(atttypid) ..) ELSE NULL END`,
//! with the built-in codecs it has for `oid[]` and `text[]` only; an `int4[]` there makes it
//! introspect `int4[]` with the same query, without end.
//!
//! [`oid_columns`] follows a logical plan (as planned from SQL, before DataFusion's analyzer
//! and optimizer) from its scans up and tells, per result column, whether it is an OID or an
//! array of OIDs; [`mark`] puts the marker on those columns of the result schema.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::JoinType;
use datafusion::logical_expr::logical_plan::Distinct;
use datafusion::logical_expr::{Expr, LogicalPlan};

/// What a result column holds, as far as OIDs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OidKind {
    /// An `oid` (an `Int32` column).
    Oid,
    /// An `oid[]` (a `List` of `Int32`).
    OidArray,
}

/// Plans nested deeper than this are not followed (their columns keep DataFusion's fields).
const MAX_DEPTH: usize = 256;

/// The OID kind of each result column of `plan`, in its schema's order (`None`: not an OID,
/// or not known to be one). A column is an OID when its field carries arrow-pg's `oid`
/// marker or when it is derived from OIDs by the expressions the module lists.
pub fn oid_columns(plan: &LogicalPlan) -> Vec<Option<OidKind>> {
    columns(plan, 0)
}

/// `schema` with arrow-pg's `oid` marker on each column `kinds` names an OID (an `Int32`
/// column) or an array of OIDs (a `List` or `LargeList` of `Int32`, marked on the list's own
/// field); other columns and a `kinds` of another length leave it as it is.
pub fn mark(schema: SchemaRef, kinds: &[Option<OidKind>]) -> SchemaRef {
    use arrow_pg::datatypes::PG_OID_ALIAS_KEY;
    if kinds.len() != schema.fields().len() {
        return schema;
    }
    let fits = |f: &Field, kind: Option<OidKind>| match (kind, f.data_type()) {
        (Some(OidKind::Oid), DataType::Int32) => !f.metadata().contains_key(PG_OID_ALIAS_KEY),
        (Some(OidKind::OidArray), DataType::List(item) | DataType::LargeList(item)) => {
            item.data_type() == &DataType::Int32
        }
        _ => false,
    };
    if !schema.fields().iter().zip(kinds).any(|(f, k)| fits(f, *k)) {
        return schema;
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .zip(kinds)
        .map(|(f, k)| {
            let mut f = f.as_ref().clone();
            if fits(&f, *k) {
                f.metadata_mut()
                    .insert(PG_OID_ALIAS_KEY.to_string(), "oid".to_string());
            }
            f
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The OID kind of each parameter `$n` of `sql` (index `n - 1`) that the statement casts to
/// `oid` or `oid[]` (`$1::oid[]`, asyncpg's type introspection), as PostgreSQL describes such
/// a parameter; the other parameters, and all of a statement that does not parse, are `None`.
/// DataFusion plans the cast as one to `int4` (`int4[]`), whose description would make a
/// client encode the value with an `int4[]` codec it may have to look up first.
pub fn oid_parameters(sql: &str) -> Vec<Option<OidKind>> {
    use crate::sql::dialect::WeirDialect;
    use datafusion::sql::sqlparser::ast::{
        ArrayElemTypeDef, DataType as SqlType, Expr as SqlExpr, Value, visit_expressions,
    };
    use datafusion::sql::sqlparser::parser::Parser;
    use std::ops::ControlFlow;
    fn is_oid(t: &SqlType) -> bool {
        matches!(t, SqlType::Custom(name, args) if args.is_empty()
            && name.0.last().and_then(|p| p.as_ident())
                .is_some_and(|i| i.value.eq_ignore_ascii_case("oid")))
    }
    let mut out: Vec<Option<OidKind>> = Vec::new();
    if !sql.to_ascii_lowercase().contains("oid") {
        return out;
    }
    let Ok(statements) = Parser::parse_sql(&WeirDialect, sql) else {
        return out;
    };
    let _ = visit_expressions(&statements, |e| {
        if let SqlExpr::Cast {
            expr, data_type, ..
        } = e
            && let SqlExpr::Value(v) = expr.as_ref()
            && let Value::Placeholder(p) = &v.value
            && let Some(n) = p.strip_prefix('$').and_then(|n| n.parse::<usize>().ok())
            && n >= 1
        {
            let kind = match data_type {
                t if is_oid(t) => Some(OidKind::Oid),
                SqlType::Array(ArrayElemTypeDef::SquareBracket(t, _))
                | SqlType::Array(ArrayElemTypeDef::AngleBracket(t))
                    if is_oid(t) =>
                {
                    Some(OidKind::OidArray)
                }
                _ => None,
            };
            if let Some(kind) = kind {
                if out.len() < n {
                    out.resize(n, None);
                }
                out[n - 1] = Some(kind);
            }
        }
        ControlFlow::<()>::Continue(())
    });
    out
}

/// Whether `field` is an `Int32` with arrow-pg's OID marker (any alias: `regclass` is an OID).
fn marked(field: &Field) -> Option<OidKind> {
    (field.data_type() == &DataType::Int32
        && field
            .metadata()
            .contains_key(arrow_pg::datatypes::PG_OID_ALIAS_KEY))
    .then_some(OidKind::Oid)
}

fn columns(plan: &LogicalPlan, depth: usize) -> Vec<Option<OidKind>> {
    let own: Vec<Option<OidKind>> = plan.schema().fields().iter().map(|f| marked(f)).collect();
    if depth > MAX_DEPTH {
        return own;
    }
    let derived = derived_columns(plan, depth + 1);
    if derived.len() != own.len() {
        return own;
    }
    own.into_iter()
        .zip(derived)
        .map(|(own, derived)| own.or(derived))
        .collect()
}

/// The kinds `plan`'s node derives from its inputs (empty when it derives none).
fn derived_columns(plan: &LogicalPlan, depth: usize) -> Vec<Option<OidKind>> {
    match plan {
        LogicalPlan::Projection(p) => {
            let input = columns(&p.input, depth);
            p.expr
                .iter()
                .map(|e| expr_kind(e, &p.input, &input, depth))
                .collect()
        }
        LogicalPlan::Aggregate(a) => {
            if a.group_expr
                .iter()
                .any(|e| matches!(e, Expr::GroupingSet(_)))
            {
                return vec![];
            }
            let input = columns(&a.input, depth);
            a.group_expr
                .iter()
                .chain(&a.aggr_expr)
                .map(|e| expr_kind(e, &a.input, &input, depth))
                .collect()
        }
        LogicalPlan::Window(w) => {
            let mut input = columns(&w.input, depth);
            input.extend(
                w.window_expr
                    .iter()
                    .map(|e| expr_kind(e, &w.input, &[], depth)),
            );
            input
        }
        LogicalPlan::Distinct(Distinct::On(on)) => {
            let input = columns(&on.input, depth);
            on.select_expr
                .iter()
                .map(|e| expr_kind(e, &on.input, &input, depth))
                .collect()
        }
        LogicalPlan::Join(j) => {
            let left = || columns(&j.left, depth);
            let right = || columns(&j.right, depth);
            match j.join_type {
                JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full => {
                    let mut out = left();
                    out.extend(right());
                    out
                }
                JoinType::LeftSemi | JoinType::LeftAnti => left(),
                JoinType::RightSemi | JoinType::RightAnti => right(),
                JoinType::LeftMark => {
                    let mut out = left();
                    out.push(None);
                    out
                }
                JoinType::RightMark => {
                    let mut out = right();
                    out.push(None);
                    out
                }
            }
        }
        LogicalPlan::Union(u) => {
            let inputs: Vec<_> = u.inputs.iter().map(|i| columns(i, depth)).collect();
            let width = plan.schema().fields().len();
            (0..width)
                .map(|c| {
                    let first = inputs.first().and_then(|i| i.get(c).copied().flatten());
                    first.filter(|k| inputs.iter().all(|i| i.get(c) == Some(&Some(*k))))
                })
                .collect()
        }
        LogicalPlan::RecursiveQuery(r) => columns(&r.static_term, depth),
        LogicalPlan::Filter(_)
        | LogicalPlan::Sort(_)
        | LogicalPlan::Limit(_)
        | LogicalPlan::SubqueryAlias(_)
        | LogicalPlan::Repartition(_)
        | LogicalPlan::Distinct(Distinct::All(_)) => match plan.inputs().first() {
            Some(input) => columns(input, depth),
            None => vec![],
        },
        _ => vec![],
    }
}

/// The kind of `e` evaluated over `input`, whose columns' kinds are `kinds`.
fn expr_kind(
    e: &Expr,
    input: &LogicalPlan,
    kinds: &[Option<OidKind>],
    depth: usize,
) -> Option<OidKind> {
    let kind = |e: &Expr| expr_kind(e, input, kinds, depth);
    match e {
        Expr::Column(c) => input
            .schema()
            .maybe_index_of_column(c)
            .and_then(|i| kinds.get(i).copied().flatten()),
        Expr::Alias(a) => kind(&a.expr),
        Expr::Cast(c) => kind(&c.expr),
        Expr::TryCast(c) => kind(&c.expr),
        Expr::ScalarSubquery(sq) => columns(&sq.subquery, depth).first().copied().flatten(),
        Expr::Case(case) => all_same(
            case.when_then_expr
                .iter()
                .map(|(_, then)| then.as_ref())
                .chain(case.else_expr.as_deref()),
            kind,
        ),
        Expr::ScalarFunction(f) => {
            match f.func.name() {
                "coalesce" | "nullif" | "greatest" | "least" => all_same(f.args.iter(), kind),
                "make_array" => (all_same(f.args.iter(), kind) == Some(OidKind::Oid))
                    .then_some(OidKind::OidArray),
                // Weir's forms of `ARRAY(subquery)` and of a scalar subquery (see `parse`).
                "weir_array_or_empty" => f.args.first().and_then(kind),
                "weir_one_row" => (f.args.first().and_then(kind) == Some(OidKind::OidArray))
                    .then_some(OidKind::Oid),
                _ => None,
            }
        }
        Expr::AggregateFunction(f) => {
            let arg = f.params.args.first().and_then(kind);
            match f.func.name() {
                "array_agg" => (arg == Some(OidKind::Oid)).then_some(OidKind::OidArray),
                "min" | "max" | "first_value" | "last_value" | "any_value" => arg,
                _ => None,
            }
        }
        _ => None,
    }
}

/// The kind every expression of `exprs` but the NULL literals has (`None` when they differ or
/// all are NULL): the type PostgreSQL resolves for a `CASE` or `coalesce` of them.
fn all_same<'a>(
    exprs: impl Iterator<Item = &'a Expr>,
    kind: impl Fn(&Expr) -> Option<OidKind>,
) -> Option<OidKind> {
    let mut found = None;
    for e in exprs.filter(|e| !is_null_literal(e)) {
        match (found, kind(e)) {
            (_, None) => return None,
            (None, k) => found = k,
            (Some(f), Some(k)) if f != k => return None,
            _ => {}
        }
    }
    found
}

fn is_null_literal(e: &Expr) -> bool {
    match e {
        Expr::Literal(v, _) => v.is_null(),
        Expr::Cast(c) => is_null_literal(&c.expr),
        Expr::TryCast(c) => is_null_literal(&c.expr),
        Expr::Alias(a) => is_null_literal(&a.expr),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn oid_field(name: &str) -> Field {
        Field::new(name, DataType::Int32, true).with_metadata(HashMap::from([(
            arrow_pg::datatypes::PG_OID_ALIAS_KEY.to_string(),
            "oid".to_string(),
        )]))
    }

    async fn kinds(sql: &str) -> Vec<Option<OidKind>> {
        let ctx = datafusion::prelude::SessionContext::new();
        let schema = Arc::new(Schema::new(vec![
            oid_field("id"),
            oid_field("rel"),
            Field::new("n", DataType::Int32, true),
            Field::new("kind", DataType::Utf8, true),
        ]));
        let empty = datafusion::datasource::MemTable::try_new(schema, vec![vec![]]).unwrap();
        ctx.register_table("t", Arc::new(empty)).unwrap();
        let plan = ctx.state().create_logical_plan(sql).await.unwrap();
        oid_columns(&plan)
    }

    #[tokio::test]
    async fn oids_are_followed_through_expressions() {
        use OidKind::*;
        assert_eq!(
            kinds("SELECT id, n, rel AS r FROM t").await,
            vec![Some(Oid), None, Some(Oid)]
        );
        assert_eq!(
            kinds(
                "SELECT CASE WHEN kind = 'c' THEN id ELSE NULL END, \
                 CASE WHEN kind = 'c' THEN id ELSE n END, \
                 coalesce(id, rel), coalesce(id, n) FROM t"
            )
            .await,
            vec![Some(Oid), None, Some(Oid), None]
        );
        assert_eq!(
            kinds(
                "SELECT array_agg(id ORDER BY n), array_agg(n), max(rel), count(id), kind \
                 FROM t GROUP BY kind"
            )
            .await,
            vec![Some(OidArray), None, Some(Oid), None, None]
        );
        assert_eq!(
            kinds(
                "SELECT a.kind, CASE WHEN a.kind = 'c' THEN \
                 (SELECT array_agg(b.rel) FROM t b WHERE b.id = a.id) END, \
                 (SELECT max(b.id) FROM t b WHERE b.n = a.n) FROM t a"
            )
            .await,
            vec![None, Some(OidArray), Some(Oid)]
        );
        assert_eq!(
            kinds("SELECT x.id, y.n FROM t x JOIN t y ON x.id = y.rel").await,
            vec![Some(Oid), None]
        );
        assert_eq!(
            kinds("SELECT id FROM t UNION ALL SELECT rel FROM t").await,
            vec![Some(Oid)]
        );
        assert_eq!(
            kinds("SELECT n FROM t UNION ALL SELECT n FROM t").await,
            vec![None]
        );
        assert_eq!(
            kinds("SELECT ARRAY[id, rel], ARRAY[id, n] FROM t").await,
            vec![Some(OidArray), None]
        );
    }

    #[test]
    fn parameters_cast_to_oid() {
        use OidKind::*;
        assert_eq!(
            oid_parameters("SELECT * FROM t WHERE id = any($2::oid[]) AND rel = $1::oid"),
            vec![Some(Oid), Some(OidArray)]
        );
        assert_eq!(
            oid_parameters("SELECT CAST($1 AS oid), $2::int, $3::pg_catalog.oid"),
            vec![Some(Oid), None, Some(Oid)]
        );
        assert_eq!(oid_parameters("SELECT $1::int4[]"), vec![]);
        assert_eq!(oid_parameters("SELECT $1::oid FROM"), vec![]);
    }

    #[test]
    fn only_int32_columns_and_lists_of_int32_are_marked() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new(
                "b",
                DataType::List(Arc::new(Field::new_list_field(DataType::Int32, true))),
                true,
            ),
            Field::new("c", DataType::Int64, true),
            Field::new(
                "d",
                DataType::List(Arc::new(Field::new_list_field(DataType::Int64, true))),
                true,
            ),
        ]));
        let marked = mark(
            schema,
            &[
                Some(OidKind::Oid),
                Some(OidKind::OidArray),
                Some(OidKind::Oid),
                Some(OidKind::OidArray),
            ],
        );
        let has = |i: usize| {
            marked
                .field(i)
                .metadata()
                .contains_key(arrow_pg::datatypes::PG_OID_ALIAS_KEY)
        };
        assert_eq!((has(0), has(1), has(2), has(3)), (true, true, false, false));
    }
}

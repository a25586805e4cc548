//! `count(t.*)` over the side of an outer join that may be padded with NULLs.
//!
//! PostgreSQL's `count(t.*)` counts the rows whose whole-row value `t` is not NULL; on the
//! side of an outer join that a missing match pads, that value is NULL, so
//! `SELECT a.id, count(b.*) FROM a LEFT JOIN b ON b.a_id = a.id GROUP BY a.id` counts each
//! `a`'s matches, 0 for none (docs, 4.2.7 "Aggregate Expressions": `count(expression)` counts
//! the input rows where the value is not null). DataFusion reads `count(b.*)` as `count(*)`,
//! which counts the padded row too: 1 for an `a` without matches.
//!
//! A row of `b` that a `LEFT JOIN b ON ... b.c = e ...` keeps matched its condition, so its
//! `b.c` is not NULL, and a padded row's `b.c` is NULL: `count(b.c)` counts what `count(b.*)`
//! counts. This rewrite, on the statement before DataFusion plans it, replaces `count(t.*)`
//! in a `SELECT` list or `HAVING` by `count(t.c)` when `t` is the right side of a `LEFT JOIN`
//! (the left side of a `RIGHT JOIN`) of that `SELECT`'s `FROM` whose `ON` has a top-level
//! conjunct `t.c = ...` or `... = t.c`, or whose `USING` names `c`.
//!
//! Any other relation `t` that an outer join of the `FROM` may pad (either side of a `FULL
//! JOIN`, everything left of a `RIGHT JOIN`, the right side of a `LEFT JOIN` without such an
//! equality) is read through a derived table that adds a column [`ROW_MARKER`] holding
//! `true` to each of its rows, `(SELECT t.*, true AS __weir_row FROM t) AS t`, and
//! `count(t.*)` becomes `count(t.__weir_row)`: the marker is NULL exactly on the padded rows
//! (a real row whose columns are all NULL still counts, as in PostgreSQL). A `SELECT` that
//! also reads `*` or `t.*` as columns keeps `count(t.*)` as it is (the marker would show), as
//! does a relation that is not a table or derived table (a `LATERAL` subquery); there
//! `count(t.*)` still counts padded rows, as `count(*)` (see docs/sql.md). Relations within
//! parenthesized joins are marked whenever the `FROM` has an outer join anywhere.
//! `count(DISTINCT t.*)` is refused (`0A000`) by [`check_count_distinct_row`]: DataFusion
//! counted one value per group. Where `t` is never padded, `count(t.*)` is
//! `count(*)`, as in PostgreSQL.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, DuplicateTreatment, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    Ident, JoinConstraint, JoinOperator, ObjectName, Query, Select, SelectItem, SetExpr, Statement,
    TableFactor, TableWithJoins, Value, VisitMut, VisitorMut, visit_expressions,
    visit_expressions_mut,
};
use datafusion_pg_catalog::sql::rules::SqlStatementRewriteRule;

/// The column a padded relation's derived table adds (`true` on each of its rows, NULL on a
/// padded one); named so that no table's column meets it.
pub const ROW_MARKER: &str = "__weir_row";

/// The rewrite as one of the parser's statement rules (see the module docs).
#[derive(Debug)]
pub struct CountRowRule;

impl SqlStatementRewriteRule for CountRowRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = s.visit(&mut CountRowVisitor);
        s
    }
}

struct CountRowVisitor;

impl VisitorMut for CountRowVisitor {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        rewrite_set_expr(&mut query.body);
        ControlFlow::Continue(())
    }
}

fn rewrite_set_expr(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => rewrite_select(select),
        SetExpr::SetOperation { left, right, .. } => {
            rewrite_set_expr(left);
            rewrite_set_expr(right);
        }
        _ => {}
    }
}

/// A relation's name as a qualifier refers to it: its alias, else its table's last name part.
fn factor_name(factor: &TableFactor) -> Option<Ident> {
    match factor {
        TableFactor::Table { alias: Some(a), .. } | TableFactor::Derived { alias: Some(a), .. } => {
            Some(a.name.clone())
        }
        TableFactor::Table {
            name, alias: None, ..
        } => name.0.last().and_then(|p| p.as_ident()).cloned(),
        _ => None,
    }
}

/// Whether two identifiers name the same thing (unquoted ones are case-insensitive).
fn same_ident(a: &Ident, b: &Ident) -> bool {
    let fold = |i: &Ident| {
        if i.quote_style.is_some() {
            i.value.clone()
        } else {
            i.value.to_lowercase()
        }
    };
    fold(a) == fold(b)
}

/// The column `qualifier.c` of a top-level equality conjunct of `on`, if there is one.
fn equality_column(on: &Expr, qualifier: &Ident) -> Option<Expr> {
    match on {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => equality_column(left, qualifier).or_else(|| equality_column(right, qualifier)),
        Expr::Nested(inner) => equality_column(inner, qualifier),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => [left.as_ref(), right.as_ref()]
            .into_iter()
            .find_map(|side| match side {
                Expr::CompoundIdentifier(parts)
                    if parts.len() == 2 && same_ident(&parts[0], qualifier) =>
                {
                    Some(side.clone())
                }
                _ => None,
            }),
        _ => None,
    }
}

/// The column standing for `qualifier.*` when `factor`, joined with `constraint`, is padded.
fn padded_key(factor: &TableFactor, constraint: &JoinConstraint) -> Option<(Ident, Expr)> {
    let name = factor_name(factor)?;
    let key = match constraint {
        JoinConstraint::On(on) => equality_column(on, &name)?,
        JoinConstraint::Using(columns) => {
            let column = columns.first()?.0.last()?.as_ident()?.clone();
            Expr::CompoundIdentifier(vec![name.clone(), column])
        }
        _ => return None,
    };
    Some((name, key))
}

fn rewrite_select(select: &mut Select) {
    // Relations an equality of their own join's condition keys, and every relation an
    // outer join may pad.
    let mut keys: Vec<(Ident, Expr)> = Vec::new();
    let mut padded: Vec<Ident> = Vec::new();
    for from in &select.from {
        for (i, join) in from.joins.iter().enumerate() {
            match &join.join_operator {
                JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => {
                    keys.extend(padded_key(&join.relation, c));
                    padded.extend(factor_name(&join.relation));
                }
                JoinOperator::Right(c) | JoinOperator::RightOuter(c) => {
                    // `a RIGHT JOIN b ON ...` pads `a` when it is one relation.
                    if i == 0 {
                        keys.extend(padded_key(&from.relation, c));
                    }
                    padded.extend(factor_name(&from.relation));
                    padded.extend(
                        from.joins[..i]
                            .iter()
                            .filter_map(|j| factor_name(&j.relation)),
                    );
                }
                JoinOperator::FullOuter(_) => {
                    padded.extend(factor_name(&from.relation));
                    padded.extend(
                        from.joins[..=i]
                            .iter()
                            .filter_map(|j| factor_name(&j.relation)),
                    );
                }
                _ => {}
            }
        }
    }
    // The relations of parenthesized joins (`(a LEFT JOIN b ON ...)`, `a LEFT JOIN (b RIGHT
    // JOIN c ON ...) ON ...`), when the FROM has an outer join anywhere, may be padded: they
    // are marked (a marker on a relation that is never padded counts what `count(*)` does).
    if select.from.iter().any(has_outer_join) {
        for from in &select.from {
            for factor in
                std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation))
            {
                if let TableFactor::NestedJoin {
                    table_with_joins, ..
                } = factor
                {
                    nested_names(table_with_joins, &mut padded);
                }
            }
        }
    }
    if padded.is_empty() {
        return;
    }
    // Padded relations without a key are read with a row marker, unless the select list
    // would show it.
    let shows = |name: &Ident| {
        select.projection.iter().any(|item| match item {
            SelectItem::Wildcard(_) => true,
            SelectItem::QualifiedWildcard(kind, _) => match kind {
                datafusion::sql::sqlparser::ast::SelectItemQualifiedWildcardKind::ObjectName(
                    ObjectName(parts),
                ) => parts
                    .last()
                    .and_then(|p| p.as_ident())
                    .is_none_or(|i| same_ident(i, name)),
                _ => true,
            },
            _ => false,
        })
    };
    let mut marked: Vec<Ident> = Vec::new();
    let mut find = |e: &Expr| {
        if let Some(qualifier) = count_row_qualifier(e)
            && padded.iter().any(|p| same_ident(p, &qualifier))
            && !keys.iter().any(|(k, _)| same_ident(k, &qualifier))
            && !marked.iter().any(|m| same_ident(m, &qualifier))
            && !shows(&qualifier)
        {
            marked.push(qualifier);
        }
        ControlFlow::<()>::Continue(())
    };
    let _ = visit_expressions(&select.projection, &mut find);
    let _ = visit_expressions(&select.having, &mut find);
    // Only relations whose derived table could be built get the marker.
    marked.retain(|name| select.from.iter_mut().any(|from| mark_in(from, name)));
    for name in &marked {
        keys.push((
            name.clone(),
            Expr::CompoundIdentifier(vec![name.clone(), Ident::new(ROW_MARKER)]),
        ));
    }
    if keys.is_empty() {
        return;
    }
    let replace = |e: &mut Expr| {
        if let Some(key) = count_row_key(e, &keys) {
            set_count_argument(e, key);
        }
        ControlFlow::<()>::Continue(())
    };
    for item in &mut select.projection {
        let _ = visit_expressions_mut(item, replace);
    }
    if let Some(having) = &mut select.having {
        let _ = visit_expressions_mut(having, replace);
    }
}

/// Whether `from` has an outer join, also within parenthesized joins.
fn has_outer_join(from: &TableWithJoins) -> bool {
    from.joins.iter().any(|j| {
        matches!(
            j.join_operator,
            JoinOperator::Left(_)
                | JoinOperator::LeftOuter(_)
                | JoinOperator::Right(_)
                | JoinOperator::RightOuter(_)
                | JoinOperator::FullOuter(_)
        )
    }) || std::iter::once(&from.relation)
        .chain(from.joins.iter().map(|j| &j.relation))
        .any(|f| matches!(f, TableFactor::NestedJoin { table_with_joins, .. } if has_outer_join(table_with_joins)))
}

/// The names of the relations within `from`, parenthesized joins included.
fn nested_names(from: &TableWithJoins, out: &mut Vec<Ident>) {
    for factor in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation)) {
        match factor {
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => nested_names(table_with_joins, out),
            other => out.extend(factor_name(other)),
        }
    }
}

/// Marks the relation `name` of `from` ([`mark_rows`]), looking into parenthesized joins;
/// false when there is none to mark.
fn mark_in(from: &mut TableWithJoins, name: &Ident) -> bool {
    std::iter::once(&mut from.relation)
        .chain(from.joins.iter_mut().map(|j| &mut j.relation))
        .any(|factor| match factor {
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => mark_in(table_with_joins, name),
            other => {
                factor_name(other).is_some_and(|n| same_ident(&n, name)) && mark_rows(other, name)
            }
        })
}

/// Replaces `factor` (named `name`) by `(SELECT name.*, true AS __weir_row FROM factor) AS
/// name`; a `LATERAL` subquery (which may name the tables before it, so cannot move into
/// another one) gets the marker as one more item of its own select list (and of its alias's
/// column list). False, leaving it alone, for any other factor.
fn mark_rows(factor: &mut TableFactor, name: &Ident) -> bool {
    if let TableFactor::Derived {
        lateral: true,
        subquery,
        alias,
        ..
    } = factor
    {
        let SetExpr::Select(select) = subquery.body.as_mut() else {
            return false;
        };
        // An aggregate without `GROUP BY` yields one row for every row before it (padded
        // still where the join's `ON` fails); its marker reads `count(*)` to be on every
        // one (see `crate::sql::lateral_aggregates`).
        let mut expr = Expr::Value(Value::Boolean(true).with_empty_span());
        if crate::sql::lateral_aggregates::is_ungrouped_aggregate(select) {
            expr = crate::sql::lateral_aggregates::behind_count(expr);
        }
        let marker = Ident::new(ROW_MARKER);
        select.projection.push(SelectItem::ExprWithAlias {
            expr,
            alias: marker.clone(),
        });
        if let Some(alias) = alias
            && !alias.columns.is_empty()
        {
            alias
                .columns
                .push(datafusion::sql::sqlparser::ast::TableAliasColumnDef {
                    name: marker,
                    data_type: None,
                });
        }
        return true;
    }
    if !matches!(
        factor,
        TableFactor::Table { .. } | TableFactor::Derived { lateral: false, .. }
    ) {
        return false;
    }
    let sql = format!("SELECT * FROM (SELECT {name}.*, true AS {ROW_MARKER} FROM t) AS {name}");
    let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
    let Ok(mut statements) = datafusion::sql::sqlparser::parser::Parser::parse_sql(&dialect, &sql)
    else {
        return false;
    };
    let Some(Statement::Query(mut query)) = statements.pop() else {
        return false;
    };
    let SetExpr::Select(outer) = query.body.as_mut() else {
        return false;
    };
    if outer.from.is_empty() {
        return false;
    }
    let mut derived = outer.from.swap_remove(0).relation;
    let TableFactor::Derived { subquery, .. } = &mut derived else {
        return false;
    };
    let SetExpr::Select(inner) = subquery.body.as_mut() else {
        return false;
    };
    let Some(from) = inner.from.first_mut() else {
        return false;
    };
    // The parsed `t` goes where `factor` was, `factor` into the derived table's FROM.
    std::mem::swap(&mut from.relation, factor);
    *factor = derived;
    true
}

/// The qualifier `t` of `e` when it is `count(t.*)` without `DISTINCT`.
fn count_row_qualifier(e: &Expr) -> Option<Ident> {
    let Expr::Function(f) = e else {
        return None;
    };
    let is_count = f.name.0.len() == 1
        && f.name.0[0]
            .as_ident()
            .is_some_and(|i| i.value.eq_ignore_ascii_case("count"));
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    let distinct = matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct));
    if !is_count || distinct || list.args.len() != 1 {
        return None;
    }
    let FunctionArg::Unnamed(FunctionArgExpr::QualifiedWildcard(ObjectName(parts))) = &list.args[0]
    else {
        return None;
    };
    let [part] = parts.as_slice() else {
        return None;
    };
    part.as_ident().cloned()
}

/// The key column for `e` when it is `count(t.*)` (no `DISTINCT`) with `t` among `keys`.
fn count_row_key(e: &Expr, keys: &[(Ident, Expr)]) -> Option<Expr> {
    let qualifier = count_row_qualifier(e)?;
    keys.iter()
        .find(|(name, _)| same_ident(name, &qualifier))
        .map(|(_, key)| key.clone())
}

fn set_count_argument(e: &mut Expr, key: Expr) {
    if let Expr::Function(f) = e
        && let FunctionArguments::List(list) = &mut f.args
    {
        list.args = vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(key))];
    }
}

/// Refuses `count(DISTINCT t.*)`, which DataFusion read as counting one value per group
/// (PostgreSQL counts the distinct whole-row values of `t`).
///
/// # Errors
/// `0A000` naming the construct.
pub fn check_count_distinct_row(stmt: &Statement) -> crate::error::Result<()> {
    let found = datafusion::sql::sqlparser::ast::visit_expressions(stmt, |e| {
        if let Expr::Function(f) = e
            && f.name.0.len() == 1
            && f.name.0[0]
                .as_ident()
                .is_some_and(|i| i.value.eq_ignore_ascii_case("count"))
            && let FunctionArguments::List(list) = &f.args
            && matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct))
            && list.args.iter().any(|a| {
                matches!(
                    a,
                    FunctionArg::Unnamed(
                        FunctionArgExpr::QualifiedWildcard(_) | FunctionArgExpr::Wildcard
                    )
                )
            })
        {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    if found.is_break() {
        return Err(crate::error::Error::not_supported(
            "count(DISTINCT t.*) (the distinct whole-row values of a relation) is not supported; \
             count the distinct values of its columns instead",
        ));
    }
    Ok(())
}

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
//! conjunct `t.c = ...` or `... = t.c`, or whose `USING` names `c`. Elsewhere `count(t.*)` is
//! left as it is: where `t` is never padded it is `count(*)`, as in PostgreSQL; a padded side
//! without such an equality (a `FULL JOIN`, a condition without an equality on `t`) still
//! counts its padded rows (see docs/sql.md).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, JoinConstraint,
    JoinOperator, ObjectName, Query, Select, SetExpr, Statement, TableFactor, VisitMut, VisitorMut,
    visit_expressions_mut,
};
use datafusion_pg_catalog::sql::rules::SqlStatementRewriteRule;

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
    let mut keys: Vec<(Ident, Expr)> = Vec::new();
    for from in &select.from {
        for (i, join) in from.joins.iter().enumerate() {
            match &join.join_operator {
                JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => {
                    keys.extend(padded_key(&join.relation, c));
                }
                // `a RIGHT JOIN b ON ...` pads `a` when it is one relation.
                JoinOperator::Right(c) | JoinOperator::RightOuter(c) if i == 0 => {
                    keys.extend(padded_key(&from.relation, c));
                }
                _ => {}
            }
        }
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

/// The key column for `e` when it is `count(t.*)` (no `DISTINCT`) with `t` among `keys`.
fn count_row_key(e: &Expr, keys: &[(Ident, Expr)]) -> Option<Expr> {
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
    if !is_count || list.duplicate_treatment.is_some() || list.args.len() != 1 {
        return None;
    }
    let FunctionArg::Unnamed(FunctionArgExpr::QualifiedWildcard(ObjectName(parts))) = &list.args[0]
    else {
        return None;
    };
    let [part] = parts.as_slice() else {
        return None;
    };
    let qualifier = part.as_ident()?;
    keys.iter()
        .find(|(name, _)| same_ident(name, qualifier))
        .map(|(_, key)| key.clone())
}

fn set_count_argument(e: &mut Expr, key: Expr) {
    if let Expr::Function(f) = e
        && let FunctionArguments::List(list) = &mut f.args
    {
        list.args = vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(key))];
    }
}

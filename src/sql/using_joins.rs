//! `JOIN ... USING (...)` and `NATURAL JOIN` with PostgreSQL's output columns.
//!
//! In PostgreSQL (docs, 7.2.1.1 "Joined Tables") a USING or NATURAL join outputs each join
//! column once, first and in the USING list's order, followed by the other columns of the left
//! side and then of the right side. An unqualified reference to a join column means the
//! *merged* column: the left side's value for an inner or left join, the right side's for a
//! right join and `COALESCE(left, right)` for a full join (parser/parse_clause.c,
//! `buildMergedJoinVar`). DataFusion instead keeps the columns in their sides' order and binds
//! an unqualified join column to the left side's column, which is NULL on the right-only rows
//! of a RIGHT or FULL join: those rows come out with a NULL key, and a `WHERE` or `GROUP BY` on
//! the key sees it too.
//!
//! This rewrite runs on the statement before DataFusion plans it. For each `SELECT` whose
//! `FROM` holds a USING or NATURAL join it works out the columns of every relation of the
//! `FROM` (its caller plans a probe `SELECT * FROM <relation>` for each, [`probes`]), then
//! ([`rewrite`]):
//! - replaces each unqualified reference to a merged column in the SELECT list, `WHERE`,
//!   `GROUP BY`, `HAVING`, `QUALIFY`, window definitions and `ORDER BY` (unless it names an
//!   output column there) by the merged column's expression, keeping the name in the SELECT
//!   list (`k` becomes `COALESCE(a.k, b.k) AS k`);
//! - expands an unqualified `*` into PostgreSQL's column order.
//!
//! Qualified references (`a.k`) and `a.*` keep their meaning. A `SELECT` whose relations cannot
//! all be named (a derived table or function without an alias), whose probe fails to plan, or
//! that uses a join kind PostgreSQL does not have, is left as it was. References from inside a
//! subquery to an outer query's merged column are not rewritten.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Cte, Expr, GroupByExpr, Ident, JoinConstraint, JoinOperator, ObjectNamePart,
    OrderByKind, Query, Select, SelectItem, SetExpr, Statement, TableFactor, TableWithJoins,
    VisitMut, VisitorMut, With,
};

/// The probe queries of a statement: `[WITH <ctes in scope>] SELECT * FROM <relation>` for
/// every relation of every `FROM` that [`rewrite`] will change, in the order [`rewrite`] takes
/// their column names.
pub fn probes(stmt: &Statement) -> Vec<Query> {
    let mut walker = Walker {
        scopes: Vec::new(),
        mode: Mode::Collect(Vec::new()),
    };
    let mut copy = stmt.clone();
    let _ = copy.visit(&mut walker);
    match walker.mode {
        Mode::Collect(probes) => probes,
        Mode::Apply(_) => Vec::new(),
    }
}

/// Turns each parenthesized join with an alias that holds a USING or NATURAL join
/// (`(a FULL JOIN b USING (k)) AS j`) into the derived table `(SELECT * FROM a FULL JOIN b
/// USING (k)) AS j`, whose `*` [`rewrite`] then expands to PostgreSQL's columns: the merged
/// `k` once, then the others. PostgreSQL's alias names the join's own output columns and
/// hides the tables inside it (docs, 7.2.1.1); DataFusion kept both sides' `k` under the
/// alias (`k` and `k:1`, the left one NULL on a FULL join's right-only rows), so a join on
/// `j.k` or a `*` over `j` went wrong.
pub fn derive_aliased_joins(stmt: &mut Statement) {
    struct Derive;
    impl VisitorMut for Derive {
        type Break = ();
        fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
            if let TableFactor::NestedJoin {
                table_with_joins,
                alias: Some(_),
            } = factor
                && has_using_join(table_with_joins)
                && let Some(derived) = derived_join(factor)
            {
                *factor = derived;
            }
            ControlFlow::Continue(())
        }
    }
    let _ = stmt.visit(&mut Derive);
}

/// `(SELECT * FROM <join>) AS <alias>` of a parenthesized join with an alias.
fn derived_join(factor: &TableFactor) -> Option<TableFactor> {
    let TableFactor::NestedJoin {
        table_with_joins,
        alias: Some(alias),
    } = factor
    else {
        return None;
    };
    let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
    let mut statements =
        datafusion::sql::sqlparser::parser::Parser::parse_sql(&dialect, "SELECT * FROM t").ok()?;
    let Some(Statement::Query(mut query)) = statements.pop() else {
        return None;
    };
    let SetExpr::Select(select) = query.body.as_mut() else {
        return None;
    };
    select.from = vec![table_with_joins.as_ref().clone()];
    Some(TableFactor::Derived {
        lateral: false,
        subquery: query,
        alias: Some(alias.clone()),
        sample: None,
    })
}

/// Rewrites the statement's USING and NATURAL joins' column references (module docs).
/// `columns` holds, for each query of [`probes`] in its order, the names of its output columns,
/// or `None` when it did not plan (the `SELECT` it belongs to is then left as it was).
pub fn rewrite(stmt: &mut Statement, columns: Vec<Option<Vec<String>>>) {
    let mut walker = Walker {
        scopes: Vec::new(),
        mode: Mode::Apply(columns.into_iter()),
    };
    let _ = stmt.visit(&mut walker);
}

enum Mode {
    Collect(Vec<Query>),
    Apply(std::vec::IntoIter<Option<Vec<String>>>),
}

/// Walks every query, outermost first, keeping the CTEs in scope.
struct Walker {
    scopes: Vec<Vec<Cte>>,
    mode: Mode,
}

impl VisitorMut for Walker {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        self.scopes.push(
            query
                .with
                .as_ref()
                .map(|w| w.cte_tables.clone())
                .unwrap_or_default(),
        );
        let order_by_names = match query.body.as_mut() {
            SetExpr::Select(select) => self.select(select),
            body => {
                self.set_expr(body);
                None
            }
        };
        if let (Some((merged, outputs)), Some(order_by)) = (order_by_names, query.order_by.as_mut())
            && let OrderByKind::Expressions(exprs) = &mut order_by.kind
        {
            for o in exprs {
                let names_output =
                    matches!(&o.expr, Expr::Identifier(i) if outputs.contains(&normal(i)));
                if !names_output {
                    replace_references(&mut o.expr, &merged);
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        self.scopes.pop();
        ControlFlow::Continue(())
    }
}

/// A column of a `FROM` item: its name and the expression an unqualified reference means.
#[derive(Clone)]
struct Column {
    name: String,
    expr: Expr,
}

impl Walker {
    /// The `SELECT`s of a set operation's branches (a nested `Query` is visited on its own).
    fn set_expr(&mut self, body: &mut SetExpr) {
        match body {
            SetExpr::Select(select) => {
                self.select(select);
            }
            SetExpr::SetOperation { left, right, .. } => {
                self.set_expr(left);
                self.set_expr(right);
            }
            _ => {}
        }
    }

    /// Handles one `SELECT`; on a rewrite, returns its merged columns and output names (for
    /// the query's `ORDER BY`).
    fn select(&mut self, select: &mut Select) -> Option<(HashMap<String, Expr>, HashSet<String>)> {
        if !select.from.iter().any(has_using_join) {
            return None;
        }
        let mut leaves = Vec::new();
        for twj in &select.from {
            leaf_factors(twj, &mut leaves);
        }
        let columns: Vec<Option<Vec<String>>> = match &mut self.mode {
            Mode::Collect(probes) => {
                for leaf in &leaves {
                    probes.push(probe(leaf, &self.scopes));
                }
                return None;
            }
            Mode::Apply(columns) => leaves.iter().map(|_| columns.next().flatten()).collect(),
        };
        let mut by_leaf = columns.into_iter();
        let mut all = Vec::new();
        let mut merged_names = Vec::new();
        // On a copy: a FROM whose columns cannot all be worked out is left as it was.
        let mut from = select.from.clone();
        for twj in &mut from {
            all.extend(from_item(twj, &mut by_leaf, &mut merged_names)?);
        }
        select.from = from;
        // A merged column's name that another column of the FROM also has is ambiguous
        // (PostgreSQL: 42702); DataFusion reports it, so it is left alone here.
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for c in &all {
            *counts.entry(c.name.as_str()).or_default() += 1;
        }
        let merged: HashMap<String, Expr> = all
            .iter()
            .filter(|c| merged_names.contains(&c.name) && counts[c.name.as_str()] == 1)
            .map(|c| (c.name.clone(), c.expr.clone()))
            .collect();

        let mut projection = Vec::with_capacity(select.projection.len());
        for item in std::mem::take(&mut select.projection) {
            match item {
                SelectItem::Wildcard(options) if plain_wildcard(&options) => {
                    projection.extend(all.iter().map(|c| SelectItem::ExprWithAlias {
                        expr: c.expr.clone(),
                        alias: Ident::with_quote('"', c.name.clone()),
                    }));
                }
                SelectItem::UnnamedExpr(Expr::Identifier(i))
                    if merged.contains_key(&normal(&i)) =>
                {
                    projection.push(SelectItem::ExprWithAlias {
                        expr: merged[&normal(&i)].clone(),
                        alias: i,
                    });
                }
                SelectItem::UnnamedExpr(mut e) => {
                    replace_references(&mut e, &merged);
                    projection.push(SelectItem::UnnamedExpr(e));
                }
                SelectItem::ExprWithAlias { mut expr, alias } => {
                    replace_references(&mut expr, &merged);
                    projection.push(SelectItem::ExprWithAlias { expr, alias });
                }
                other => projection.push(other),
            }
        }
        select.projection = projection;
        let outputs = select
            .projection
            .iter()
            .filter_map(|item| match item {
                SelectItem::ExprWithAlias { alias, .. } => Some(normal(alias)),
                SelectItem::UnnamedExpr(Expr::Identifier(i)) => Some(normal(i)),
                _ => None,
            })
            .collect();

        for e in select
            .selection
            .iter_mut()
            .chain(select.having.iter_mut())
            .chain(select.qualify.iter_mut())
        {
            replace_references(e, &merged);
        }
        if let GroupByExpr::Expressions(exprs, _) = &mut select.group_by {
            for e in exprs {
                replace_references(e, &merged);
            }
        }
        for w in &mut select.named_window {
            let mut replacer = Replacer {
                merged: &merged,
                depth: 0,
            };
            let _ = w.visit(&mut replacer);
        }
        Some((merged, outputs))
    }
}

/// Whether a `FROM` item holds a USING or NATURAL join (at any nesting).
fn has_using_join(twj: &TableWithJoins) -> bool {
    let nested = |f: &TableFactor| match f {
        TableFactor::NestedJoin {
            table_with_joins,
            alias: None,
        } => has_using_join(table_with_joins),
        _ => false,
    };
    nested(&twj.relation)
        || twj.joins.iter().any(|j| {
            nested(&j.relation)
                || matches!(
                    constraint(&j.join_operator),
                    Some((_, JoinConstraint::Using(_) | JoinConstraint::Natural))
                )
        })
}

/// The relations of a `FROM` item, left to right (an unaliased parenthesized join is opened).
fn leaf_factors<'a>(twj: &'a TableWithJoins, out: &mut Vec<&'a TableFactor>) {
    let leaf = |f: &'a TableFactor, out: &mut Vec<&'a TableFactor>| match f {
        TableFactor::NestedJoin {
            table_with_joins,
            alias: None,
        } => leaf_factors(table_with_joins, out),
        f => out.push(f),
    };
    leaf(&twj.relation, out);
    for j in &twj.joins {
        leaf(&j.relation, out);
    }
}

/// `[WITH <ctes in scope>] SELECT * FROM <factor>`.
pub(crate) fn probe(factor: &TableFactor, scopes: &[Vec<Cte>]) -> Query {
    let mut query = match crate::sql::parse::parse_one("SELECT * FROM weir_probe") {
        Ok(Statement::Query(q)) => *q,
        _ => unreachable!("a fixed query parses"),
    };
    if let SetExpr::Select(select) = query.body.as_mut() {
        select.from[0].relation = factor.clone();
    }
    // Outer scopes first (an inner CTE may use them); a name an inner scope defines again
    // shadows the outer one.
    let mut ctes: Vec<Cte> = Vec::new();
    for scope in scopes.iter().rev() {
        for cte in scope.iter().rev() {
            if !ctes
                .iter()
                .any(|c| c.alias.name.value == cte.alias.name.value)
            {
                ctes.push(cte.clone());
            }
        }
    }
    ctes.reverse();
    if !ctes.is_empty() {
        query.with = Some(With {
            with_token:
                datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
            recursive: false,
            cte_tables: ctes,
        });
    }
    query
}

/// The kind and constraint of a join PostgreSQL has; `None` for other kinds.
fn constraint(op: &JoinOperator) -> Option<(Kind, &JoinConstraint)> {
    Some(match op {
        JoinOperator::Join(c) | JoinOperator::Inner(c) | JoinOperator::CrossJoin(c) => {
            (Kind::Inner, c)
        }
        JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (Kind::Left, c),
        JoinOperator::Right(c) | JoinOperator::RightOuter(c) => (Kind::Right, c),
        JoinOperator::FullOuter(c) => (Kind::Full, c),
        _ => return None,
    })
}

#[derive(Clone, Copy)]
enum Kind {
    Inner,
    Left,
    Right,
    Full,
}

/// The columns of a `FROM` item in PostgreSQL's order; `None` when a relation's columns are
/// unknown or cannot be referred to, or the join kind is not PostgreSQL's. Names of merged
/// columns are added to `merged`.
///
/// A USING or NATURAL join with a join on either side is turned into `ON` equalities of the
/// sides' merged columns: DataFusion would compare the first side's own column instead
/// (`a FULL JOIN b USING (k) FULL JOIN c USING (k)` must match `c.k` with
/// `COALESCE(a.k, b.k)`). Its references and `*` are rewritten anyway, so the USING form's
/// own meaning is no longer needed.
fn from_item(
    twj: &mut TableWithJoins,
    leaves: &mut impl Iterator<Item = Option<Vec<String>>>,
    merged: &mut Vec<String>,
) -> Option<Vec<Column>> {
    let mut left_is_join = is_open_join(&twj.relation);
    let mut columns = factor_columns(&mut twj.relation, leaves, merged)?;
    for join in &mut twj.joins {
        let right_is_join = is_open_join(&join.relation);
        let right = factor_columns(&mut join.relation, leaves, merged)?;
        let on_equalities = left_is_join || right_is_join;
        left_is_join = true;
        let (kind, constraint) = constraint(&join.join_operator)?;
        let names: Vec<String> = match constraint {
            JoinConstraint::Using(names) => names
                .iter()
                .map(|n| match n.0.last() {
                    Some(ObjectNamePart::Identifier(i)) => Some(normal(i)),
                    _ => None,
                })
                .collect::<Option<_>>()?,
            JoinConstraint::Natural => {
                let mut common = Vec::new();
                for c in &columns {
                    if right.iter().any(|r| r.name == c.name) && !common.contains(&c.name) {
                        common.push(c.name.clone());
                    }
                }
                common
            }
            _ => {
                columns.extend(right);
                continue;
            }
        };
        let mut used_left = HashSet::new();
        let mut used_right = HashSet::new();
        let mut out = Vec::with_capacity(columns.len() + right.len());
        let mut on: Option<Expr> = None;
        for name in &names {
            let l = columns.iter().position(|c| &c.name == name)?;
            let r = right.iter().position(|c| &c.name == name)?;
            used_left.insert(l);
            used_right.insert(r);
            let equal = Expr::BinaryOp {
                left: Box::new(Expr::Nested(Box::new(columns[l].expr.clone()))),
                op: BinaryOperator::Eq,
                right: Box::new(Expr::Nested(Box::new(right[r].expr.clone()))),
            };
            on = Some(match on {
                None => equal,
                Some(e) => Expr::BinaryOp {
                    left: Box::new(e),
                    op: BinaryOperator::And,
                    right: Box::new(equal),
                },
            });
            let expr = match kind {
                Kind::Inner | Kind::Left => columns[l].expr.clone(),
                Kind::Right => right[r].expr.clone(),
                Kind::Full => coalesce(columns[l].expr.clone(), right[r].expr.clone()),
            };
            out.push(Column {
                name: name.clone(),
                expr,
            });
            merged.push(name.clone());
        }
        let rest_left = columns
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !used_left.contains(i));
        let rest_right = right
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !used_right.contains(i));
        out.extend(rest_left.chain(rest_right).map(|(_, c)| c));
        columns = out;
        if on_equalities && let Some(on) = on {
            *constraint_mut(&mut join.join_operator)? = JoinConstraint::On(on);
        }
    }
    Some(columns)
}

/// Whether a relation is a parenthesized join without an alias (its columns are a join's).
fn is_open_join(factor: &TableFactor) -> bool {
    matches!(factor, TableFactor::NestedJoin { alias: None, .. })
}

/// The constraint of a join kind [`constraint`] takes.
fn constraint_mut(op: &mut JoinOperator) -> Option<&mut JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::CrossJoin(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c) => Some(c),
        _ => None,
    }
}

/// The columns of one relation: an unaliased parenthesized join is opened; any other relation
/// takes its probe's column names, referred to through its alias or table name.
fn factor_columns(
    factor: &mut TableFactor,
    leaves: &mut impl Iterator<Item = Option<Vec<String>>>,
    merged: &mut Vec<String>,
) -> Option<Vec<Column>> {
    if let TableFactor::NestedJoin {
        table_with_joins,
        alias: None,
    } = factor
    {
        return from_item(table_with_joins, leaves, merged);
    }
    let names = leaves.next().flatten()?;
    let qualifier: Vec<Ident> = match factor {
        TableFactor::Table { alias: Some(a), .. }
        | TableFactor::Derived { alias: Some(a), .. }
        | TableFactor::TableFunction { alias: Some(a), .. }
        | TableFactor::Function { alias: Some(a), .. }
        | TableFactor::UNNEST { alias: Some(a), .. }
        | TableFactor::NestedJoin { alias: Some(a), .. } => vec![a.name.clone()],
        TableFactor::Table {
            name, alias: None, ..
        } => name
            .0
            .iter()
            .map(|p| p.as_ident().cloned())
            .collect::<Option<_>>()?,
        _ => return None,
    };
    Some(
        names
            .into_iter()
            .map(|name| {
                let mut parts = qualifier.clone();
                parts.push(Ident::with_quote('"', name.clone()));
                Column {
                    name,
                    expr: Expr::CompoundIdentifier(parts),
                }
            })
            .collect(),
    )
}

fn coalesce(left: Expr, right: Expr) -> Expr {
    crate::sql::parse::function_call("coalesce", vec![left, right])
}

/// A `*` without `EXCLUDE`, `EXCEPT`, `REPLACE`, `RENAME`, `ILIKE` or an alias.
fn plain_wildcard(o: &datafusion::sql::sqlparser::ast::WildcardAdditionalOptions) -> bool {
    o.opt_ilike.is_none()
        && o.opt_exclude.is_none()
        && o.opt_except.is_none()
        && o.opt_replace.is_none()
        && o.opt_rename.is_none()
        && o.opt_alias.is_none()
}

/// An identifier as PostgreSQL folds it: quoted as written, else lower case.
fn normal(i: &Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_ascii_lowercase()
    }
}

/// Replaces unqualified references to merged columns in `e`, outside its subqueries.
fn replace_references(e: &mut Expr, merged: &HashMap<String, Expr>) {
    if merged.is_empty() {
        return;
    }
    let mut replacer = Replacer { merged, depth: 0 };
    let _ = e.visit(&mut replacer);
}

struct Replacer<'a> {
    merged: &'a HashMap<String, Expr>,
    /// How many subqueries deep the visit is (only depth 0 is rewritten).
    depth: usize,
}

impl VisitorMut for Replacer<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if self.depth == 0
            && let Expr::Identifier(i) = expr
            && let Some(m) = self.merged.get(&normal(i))
        {
            *expr = Expr::Nested(Box::new(m.clone()));
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::parse::parse_one;

    fn rewritten(sql: &str, columns: &[&[&str]]) -> String {
        let mut stmt = parse_one(sql).unwrap();
        assert_eq!(probes(&stmt).len(), columns.len(), "probes of {sql}");
        let columns = columns
            .iter()
            .map(|c| Some(c.iter().map(|s| s.to_string()).collect()))
            .collect();
        rewrite(&mut stmt, columns);
        stmt.to_string()
    }

    #[test]
    fn full_join_merges_with_coalesce_and_orders_columns() {
        let sql = rewritten(
            "SELECT * FROM c FULL JOIN d USING (k)",
            &[&["x", "k"], &["y", "k"]],
        );
        assert_eq!(
            sql,
            r#"SELECT coalesce(c."k", d."k") AS "k", c."x" AS "x", d."y" AS "y" FROM c FULL JOIN d USING(k)"#
        );
    }

    #[test]
    fn right_join_reference_takes_the_right_column() {
        let sql = rewritten(
            "SELECT k, count(*) FROM a AS l RIGHT JOIN b USING (k) WHERE k > 1 GROUP BY k ORDER BY k",
            &[&["k", "x"], &["k", "y"]],
        );
        assert_eq!(
            sql,
            r#"SELECT b."k" AS k, count(*) FROM a AS l RIGHT JOIN b USING(k) WHERE (b."k") > 1 GROUP BY (b."k") ORDER BY k"#
        );
    }

    #[test]
    fn natural_join_finds_common_columns_and_nesting_composes() {
        // The second join's left side is a join: it matches on the merged column, as ON.
        let sql = rewritten(
            "SELECT k FROM a NATURAL JOIN b FULL JOIN c USING (k)",
            &[&["k", "x"], &["k", "y"], &["k"]],
        );
        assert_eq!(
            sql,
            r#"SELECT coalesce(a."k", c."k") AS k FROM a NATURAL JOIN b FULL JOIN c ON (a."k") = (c."k")"#
        );
    }

    #[test]
    fn subqueries_and_unknown_relations_are_left_alone() {
        // Nothing to do without USING; a probe that failed leaves the SELECT as it was.
        assert!(probes(&parse_one("SELECT * FROM a JOIN b ON a.k = b.k").unwrap()).is_empty());
        let mut stmt = parse_one("SELECT k FROM a FULL JOIN b USING (k)").unwrap();
        rewrite(&mut stmt, vec![Some(vec!["k".into()]), None]);
        assert_eq!(stmt.to_string(), "SELECT k FROM a FULL JOIN b USING(k)");
        // The outer query's probes come before the subquery's.
        let sql = rewritten(
            "SELECT k, (SELECT max(k) FROM t) FROM a FULL JOIN b USING (k)",
            &[&["k"], &["k"]],
        );
        assert_eq!(
            sql,
            r#"SELECT coalesce(a."k", b."k") AS k, (SELECT max(k) FROM t) FROM a FULL JOIN b USING(k)"#
        );
    }
}

//! `UPDATE ... FROM`, `DELETE ... USING` and `UPDATE ... SET (a, b) = (x, y)` (PostgreSQL's
//! reference pages "UPDATE" and "DELETE"), which DataFusion does not plan, rewritten before
//! planning into forms it does, with the same rows changed:
//!
//! ```text
//!  DELETE FROM t USING s WHERE c          ─►  DELETE FROM t WHERE EXISTS (SELECT 1 FROM s WHERE c)
//!  UPDATE t SET a = e FROM s WHERE c      ─►  UPDATE t SET a = (SELECT first_value(e) FROM s WHERE c)
//!                                                   WHERE EXISTS (SELECT 1 FROM s WHERE c)
//!  UPDATE t SET (a, b) = (x, y)           ─►  UPDATE t SET a = x, b = y
//! ```
//!
//! `c` may name the target's columns (its name or alias), as in PostgreSQL; the subqueries
//! are correlated through them. A target row joined to several rows of `s` is updated once
//! from one of them, which PostgreSQL leaves unspecified too ("only one of the join rows will
//! be used to update the target row, but which one will be used is not readily
//! predictable"); here each assigned column takes the first joined row's value on its own,
//! so two columns may come from different rows of such an ambiguous join. `RETURNING` sees
//! the target's columns only.

use datafusion::sql::sqlparser::ast::{
    Assignment, AssignmentTarget, Expr, Statement, TableWithJoins, UpdateTableFromKind,
};

use crate::error::{Error, Result};
use crate::sql::parse::parse_one;

/// An `UPDATE`'s `SET (a, b) = (x, y)` as `SET a = x, b = y`; other statements are left
/// alone.
///
/// # Errors
/// `42601` for a column list assigned a list of another length (PostgreSQL's "number of
/// columns does not match number of values"); `0A000` for a column list assigned a
/// subquery (`SET (a, b) = (SELECT ...)`) or another expression.
pub fn split_assignment_tuples(stmt: &mut Statement) -> Result<()> {
    if let Statement::Update(u) = stmt {
        u.assignments = split_tuples(std::mem::take(&mut u.assignments))?;
    }
    Ok(())
}

/// `DELETE ... USING` and `UPDATE ... FROM` rewritten as the module describes; other
/// statements are left alone.
///
/// # Errors
/// `42601` when a rewritten subquery does not parse (a construct that prints back as
/// something else).
pub fn rewrite_joins(stmt: &mut Statement) -> Result<()> {
    match stmt {
        Statement::Delete(d) => {
            if let Some(using) = d.using.take() {
                let exists = exists_over(&using, d.selection.as_ref())?;
                d.selection = Some(exists);
            }
        }
        Statement::Update(u) => {
            let from = match u.from.take() {
                Some(UpdateTableFromKind::AfterSet(f) | UpdateTableFromKind::BeforeSet(f)) => f,
                None => return Ok(()),
            };
            for a in &mut u.assignments {
                let value = std::mem::replace(
                    &mut a.value,
                    Expr::value(datafusion::sql::sqlparser::ast::Value::Null),
                );
                a.value = subquery_expr(&format!(
                    "SELECT first_value({value}) FROM {}{}",
                    list(&from),
                    where_clause(u.selection.as_ref())
                ))?;
            }
            let exists = exists_over(&from, u.selection.as_ref())?;
            u.selection = Some(exists);
        }
        _ => {}
    }
    Ok(())
}

/// `a, b` of the tables as written.
fn list(tables: &[TableWithJoins]) -> String {
    tables
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn where_clause(condition: Option<&Expr>) -> String {
    condition.map(|c| format!(" WHERE {c}")).unwrap_or_default()
}

/// `EXISTS (SELECT 1 FROM tables [WHERE condition])`.
fn exists_over(tables: &[TableWithJoins], condition: Option<&Expr>) -> Result<Expr> {
    let query = query_of(&format!(
        "SELECT 1 FROM {}{}",
        list(tables),
        where_clause(condition)
    ))?;
    Ok(Expr::Exists {
        subquery: query,
        negated: false,
    })
}

/// `(query)` as a scalar subquery.
fn subquery_expr(sql: &str) -> Result<Expr> {
    Ok(Expr::Subquery(query_of(sql)?))
}

fn query_of(sql: &str) -> Result<Box<datafusion::sql::sqlparser::ast::Query>> {
    match parse_one(sql)? {
        Statement::Query(q) => Ok(q),
        _ => Err(Error::Internal(format!("{sql} did not parse as a query"))),
    }
}

/// `SET (a, b) = (x, y)` as `SET a = x, b = y`.
fn split_tuples(assignments: Vec<Assignment>) -> Result<Vec<Assignment>> {
    let mut out = Vec::with_capacity(assignments.len());
    for a in assignments {
        let AssignmentTarget::Tuple(columns) = a.target else {
            out.push(a);
            continue;
        };
        let values = match a.value {
            Expr::Tuple(values) => values,
            Expr::Nested(one) => vec![*one],
            Expr::Subquery(_) => {
                return Err(Error::not_supported(
                    "UPDATE ... SET (columns) = (SELECT ...) (assign each column on its own)",
                ));
            }
            other => {
                return Err(Error::not_supported(format!(
                    "UPDATE ... SET (columns) = {other} (assign each column on its own)"
                )));
            }
        };
        if values.len() != columns.len() {
            return Err(Error::Parse(
                "number of columns does not match number of values".into(),
            ));
        }
        for (column, value) in columns.into_iter().zip(values) {
            out.push(Assignment {
                target: AssignmentTarget::ColumnName(column),
                value,
            });
        }
    }
    Ok(out)
}

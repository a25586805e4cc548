//! A `WITH` clause before `INSERT`, `UPDATE` or `DELETE` (PostgreSQL's reference pages of the
//! three, "with_query"), which DataFusion does not plan: the parser reads such a statement
//! as a query whose body is the data-changing statement. It is lifted into the statement,
//! with the same meaning:
//!
//! ```text
//!  WITH x AS (q) INSERT INTO t SELECT .. FROM x      ─►  INSERT INTO t WITH x AS (q) SELECT .. FROM x
//!  WITH x AS (q) DELETE FROM t WHERE a IN (SELECT .. FROM x)
//!                                                    ─►  DELETE FROM t WHERE a IN (WITH x AS (q) SELECT .. FROM x)
//!  WITH x AS (q) UPDATE t SET .. FROM x WHERE ..     ─►  UPDATE t SET .. FROM (q) AS x WHERE ..
//! ```
//!
//! Every query inside the statement gets the clause (after its own common table
//! expressions of other names), and a table of `FROM` or `USING` named after one becomes
//! that query (with the expressions before it). The target table itself is never one, as in
//! PostgreSQL. Each common table expression is so evaluated once per use rather than once;
//! they read, so the rows changed are the same. `WITH RECURSIVE` and data-changing
//! statements inside `WITH` are refused (`0A000`).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
use datafusion::sql::sqlparser::ast::{
    Cte, Query, SetExpr, Statement, TableAlias, TableFactor, TableWithJoins, UpdateTableFromKind,
    VisitMut, VisitorMut, With,
};

use crate::error::{Error, Result};

/// `stmt` with a `WITH` clause before `INSERT`, `UPDATE` or `DELETE` moved into it (see the
/// module docs); any other statement unchanged.
///
/// # Errors
/// `0A000` for `WITH RECURSIVE` before such a statement, and for a common table expression
/// that changes data (`WITH d AS (DELETE ... RETURNING *) ...`).
pub fn lift(stmt: Statement) -> Result<Statement> {
    let Statement::Query(query) = stmt else {
        return Ok(stmt);
    };
    if !matches!(
        query.body.as_ref(),
        SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_)
    ) {
        if let Some(with) = &query.with {
            refuse_changing_ctes(with)?;
        }
        return Ok(Statement::Query(query));
    }
    let Query { with, body, .. } = *query;
    let (SetExpr::Insert(inner) | SetExpr::Update(inner) | SetExpr::Delete(inner)) = *body else {
        return Err(Error::Internal(
            "a data-changing query body went missing".into(),
        ));
    };
    let Some(with) = with else {
        return Ok(inner);
    };
    if with.recursive {
        return Err(Error::not_supported(
            "WITH RECURSIVE before INSERT, UPDATE or DELETE is not supported",
        ));
    }
    refuse_changing_ctes(&with)?;
    let mut lifter = Lifter { with };
    Ok(match inner {
        Statement::Insert(mut insert) => {
            if let Some(source) = &mut insert.source {
                lifter.give(source);
            }
            let _ = insert.returning.visit(&mut lifter);
            Statement::Insert(insert)
        }
        Statement::Update(mut update) => {
            let _ = update.assignments.visit(&mut lifter);
            let _ = update.from.visit(&mut lifter);
            let _ = update.selection.visit(&mut lifter);
            let _ = update.returning.visit(&mut lifter);
            if let Some(
                UpdateTableFromKind::AfterSet(from) | UpdateTableFromKind::BeforeSet(from),
            ) = &mut update.from
            {
                lifter.replace_tables(from);
            }
            Statement::Update(update)
        }
        Statement::Delete(mut delete) => {
            let _ = delete.using.visit(&mut lifter);
            let _ = delete.selection.visit(&mut lifter);
            let _ = delete.returning.visit(&mut lifter);
            if let Some(using) = &mut delete.using {
                lifter.replace_tables(using);
            }
            Statement::Delete(delete)
        }
        other => other,
    })
}

/// `0A000` when a common table expression of `with` changes data (PostgreSQL's
/// data-modifying `WITH`, which Weir does not run).
fn refuse_changing_ctes(with: &With) -> Result<()> {
    for cte in &with.cte_tables {
        if matches!(
            cte.query.body.as_ref(),
            SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_)
        ) {
            return Err(Error::not_supported(format!(
                "data-changing statements in WITH (\"{}\") are not supported",
                cte.alias.name.value
            )));
        }
    }
    Ok(())
}

/// Gives a `WITH` clause's common table expressions to the queries and tables of a
/// statement (see the module docs).
struct Lifter {
    with: With,
}

impl Lifter {
    /// The common table expression a table name refers to, with its position.
    fn cte_named(&self, name: &str) -> Option<(usize, &Cte)> {
        self.with
            .cte_tables
            .iter()
            .enumerate()
            .find(|(_, c)| c.alias.name.value.eq_ignore_ascii_case(name))
    }

    /// `query` with the clause's expressions it does not define itself before its own.
    fn give(&self, query: &mut Query) {
        give_ctes(query, &self.with.cte_tables);
    }

    /// The tables of a `FROM` or `USING` list (and of their joins) named after a common table
    /// expression, replaced by its query (given the expressions before it) under that name.
    /// The queries inside got the whole clause already.
    fn replace_tables(&self, tables: &mut [TableWithJoins]) {
        for t in tables {
            self.replace_table(&mut t.relation);
            for join in &mut t.joins {
                self.replace_table(&mut join.relation);
            }
        }
    }

    fn replace_table(&self, factor: &mut TableFactor) {
        let TableFactor::Table {
            name, alias, args, ..
        } = factor
        else {
            return;
        };
        if args.is_some() || name.0.len() != 1 {
            return;
        }
        let Some(ident) = name.0[0].as_ident() else {
            return;
        };
        let Some((at, cte)) = self.cte_named(&ident.value) else {
            return;
        };
        let mut subquery = cte.query.clone();
        // A common table expression sees those before it.
        give_ctes(&mut subquery, &self.with.cte_tables[..at]);
        let alias = alias.clone().unwrap_or_else(|| TableAlias {
            explicit: true,
            name: cte.alias.name.clone(),
            columns: cte.alias.columns.clone(),
            at: None,
        });
        *factor = TableFactor::Derived {
            lateral: false,
            subquery,
            alias: Some(alias),
            sample: None,
        };
    }
}

/// Puts `ctes` before `query`'s own common table expressions, leaving out those whose name it
/// defines itself (its own win, as the nearer scope).
fn give_ctes(query: &mut Query, ctes: &[Cte]) {
    if ctes.is_empty() {
        return;
    }
    match &mut query.with {
        None => {
            query.with = Some(With {
                with_token: AttachedToken::empty(),
                recursive: false,
                cte_tables: ctes.to_vec(),
            });
        }
        Some(own) => {
            let mut merged: Vec<Cte> = ctes
                .iter()
                .filter(|c| {
                    !own.cte_tables
                        .iter()
                        .any(|o| o.alias.name.value.eq_ignore_ascii_case(&c.alias.name.value))
                })
                .cloned()
                .collect();
            merged.append(&mut own.cte_tables);
            own.cte_tables = merged;
        }
    }
}

impl VisitorMut for Lifter {
    type Break = ();

    // After the query's own subqueries were visited: the expressions given here are not
    // visited again.
    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        self.give(query);
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use crate::sql::parse::parse_one;

    fn lifted(sql: &str) -> String {
        parse_one(sql).unwrap().to_string()
    }

    #[test]
    fn insert_takes_the_clause() {
        assert_eq!(
            lifted("WITH x AS (SELECT 1 AS a) INSERT INTO t SELECT a FROM x"),
            "INSERT INTO t WITH x AS (SELECT 1 AS a) SELECT a FROM x"
        );
    }

    #[test]
    fn delete_subquery_takes_the_clause() {
        assert_eq!(
            lifted("WITH x AS (SELECT 1 AS a) DELETE FROM t WHERE a IN (SELECT a FROM x)"),
            "DELETE FROM t WHERE a IN (WITH x AS (SELECT 1 AS a) SELECT a FROM x)"
        );
    }

    #[test]
    fn from_table_becomes_the_query() {
        assert_eq!(
            lifted(
                "WITH x (k) AS (SELECT 1), y AS (SELECT k FROM x) UPDATE t SET v = y.k FROM y WHERE t.k = y.k"
            ),
            "UPDATE t SET v = y.k FROM (WITH x (k) AS (SELECT 1) SELECT k FROM x) AS y WHERE t.k = y.k"
        );
    }

    #[test]
    fn refusals() {
        assert!(parse_one("WITH RECURSIVE x AS (SELECT 1) DELETE FROM t").is_err());
        assert!(parse_one("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d").is_err());
    }
}

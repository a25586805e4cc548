//! Column alias lists shorter than their relation: `FROM t AS j(a)` (and a CTE's `WITH c(a) AS
//! (...)`) renames `t`'s first column and keeps the others' names (PostgreSQL docs, 7.2.1.2 "Table and Column Aliases": "If fewer
//! column aliases are specified than the actual table has columns, the remaining columns are
//! not renamed"). DataFusion requires one name per column (`42601`), so a statement it refuses
//! for that reason is planned again with each short list filled up with the remaining
//! columns' own names, which its caller learns by planning a probe `SELECT * FROM <relation>`
//! for each relation with an alias list ([`probes`], then [`fill`]). A list longer than the
//! relation's columns is PostgreSQL's `42P10`.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;
use datafusion::sql::sqlparser::ast::{
    Cte, Query, Statement, TableAlias, TableAliasColumnDef, TableFactor, VisitMut, VisitorMut, With,
};

use crate::error::{Error, Result};

/// True when `message` is DataFusion's refusal of an alias list whose length differs from
/// its relation's columns.
pub fn is_alias_list_error(message: &str) -> bool {
    message.contains("names given as column alias")
}

/// The probe queries of `stmt`: `[WITH <ctes it names>] SELECT * FROM <relation>` for each
/// relation with a column alias list, in the order [`fill`] takes their column names.
pub fn probes(stmt: &Statement) -> Vec<Query> {
    let mut walker = Walker {
        scopes: Vec::new(),
        mode: Mode::Collect(Vec::new()),
    };
    let mut copy = stmt.clone();
    let _ = copy.visit(&mut walker);
    match walker.mode {
        Mode::Collect(probes) => probes,
        Mode::Fill(..) => Vec::new(),
    }
}

/// Fills each short alias list of `stmt` with the remaining columns' names. `columns` holds,
/// for each query of [`probes`] in its order, the names of its output columns, or `None` when
/// it did not plan (that list is left as it was).
///
/// Returns whether a list was filled.
///
/// # Errors
/// `42P10` `table "j" has 1 columns available but 2 columns specified` for a list longer than
/// its relation's columns.
pub fn fill(stmt: &mut Statement, columns: Vec<Option<Vec<String>>>) -> Result<bool> {
    let mut walker = Walker {
        scopes: Vec::new(),
        mode: Mode::Fill(columns.into_iter(), None, false),
    };
    let _ = stmt.visit(&mut walker);
    match walker.mode {
        Mode::Fill(_, Some(e), _) => Err(e),
        Mode::Fill(_, None, filled) => Ok(filled),
        Mode::Collect(_) => Ok(false),
    }
}

enum Mode {
    Collect(Vec<Query>),
    /// The relations' columns in walk order, the first refusal, and whether a list grew.
    Fill(std::vec::IntoIter<Option<Vec<String>>>, Option<Error>, bool),
}

/// Walks every query, outermost first, keeping the CTEs in scope.
struct Walker {
    scopes: Vec<Vec<Cte>>,
    mode: Mode,
}

/// The alias of a relation that can carry a column alias list.
fn alias_mut(factor: &mut TableFactor) -> Option<&mut TableAlias> {
    match factor {
        TableFactor::Table { alias, .. }
        | TableFactor::Derived { alias, .. }
        | TableFactor::TableFunction { alias, .. }
        | TableFactor::Function { alias, .. }
        | TableFactor::UNNEST { alias, .. }
        | TableFactor::NestedJoin { alias, .. } => alias.as_mut(),
        _ => None,
    }
}

/// The CTEs of `scopes` that `factor` names, and those they name in turn (a CTE's body may
/// read an earlier one), innermost definition of a name first.
fn named_ctes(factor: &TableFactor, scopes: &[Vec<Cte>]) -> Vec<Vec<Cte>> {
    ctes_named_in(&factor.to_string(), scopes)
}

/// The CTEs of `scopes` that `text` names, and those they name in turn.
fn ctes_named_in(text: &str, scopes: &[Vec<Cte>]) -> Vec<Vec<Cte>> {
    // The words of a query's text: a CTE it names is among them.
    fn words(text: &str) -> HashSet<String> {
        text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(str::to_ascii_lowercase)
            .collect()
    }
    let mut named = words(text);
    let mut wanted: HashSet<String> = HashSet::new();
    loop {
        let before = wanted.len();
        for scope in scopes {
            for cte in scope {
                let name = cte.alias.name.value.to_ascii_lowercase();
                if !wanted.contains(&name) && named.contains(&name) {
                    wanted.insert(name);
                    named.extend(words(&cte.query.to_string()));
                }
            }
        }
        if wanted.len() == before {
            break;
        }
    }
    scopes
        .iter()
        .map(|scope| {
            scope
                .iter()
                .filter(|c| wanted.contains(&c.alias.name.value.to_ascii_lowercase()))
                .cloned()
                .collect()
        })
        .collect()
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
        // A CTE's column list (`WITH c(a) AS (SELECT x, y ...)`): its query, with the CTEs
        // it names, is the probe.
        let Some(with) = &mut query.with else {
            return ControlFlow::Continue(());
        };
        for (i, cte) in with.cte_tables.iter_mut().enumerate() {
            if cte.alias.columns.is_empty() {
                continue;
            }
            match &mut self.mode {
                Mode::Collect(probes) => {
                    let mut probe = cte.query.as_ref().clone();
                    if probe.with.is_none() {
                        // Outer scopes and the CTEs defined before this one.
                        let mut scopes = self.scopes.clone();
                        if let Some(last) = scopes.last_mut() {
                            last.truncate(i);
                        }
                        let ctes: Vec<Cte> = ctes_named_in(&probe.to_string(), &scopes)
                            .into_iter()
                            .flatten()
                            .collect();
                        if !ctes.is_empty() {
                            probe.with = Some(With {
                                with_token: AttachedToken::empty(),
                                recursive: false,
                                cte_tables: ctes,
                            });
                        }
                    }
                    probes.push(probe);
                }
                Mode::Fill(..) => {
                    if self.fill_alias(&mut cte.alias, "WITH query").is_break() {
                        return ControlFlow::Break(());
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        self.scopes.pop();
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let Some(alias) = alias_mut(factor) else {
            return ControlFlow::Continue(());
        };
        if alias.columns.is_empty() {
            return ControlFlow::Continue(());
        }
        match &mut self.mode {
            Mode::Collect(probes) => {
                let mut bare = factor.clone();
                if let Some(a) = alias_mut(&mut bare) {
                    a.columns.clear();
                }
                let scopes = named_ctes(&bare, &self.scopes);
                probes.push(super::using_joins::probe(&bare, &scopes));
            }
            Mode::Fill(..) => {
                let mut alias = alias.clone();
                let flow = self.fill_alias(&mut alias, "table");
                if let Some(a) = alias_mut(factor) {
                    *a = alias;
                }
                return flow;
            }
        }
        ControlFlow::Continue(())
    }
}

impl Walker {
    /// Fills `alias`'s list with the next probe's remaining column names (in [`fill`]);
    /// `what` names the relation in the error (`table`, `WITH query`).
    fn fill_alias(&mut self, alias: &mut TableAlias, what: &str) -> ControlFlow<()> {
        let Mode::Fill(columns, error, filled) = &mut self.mode else {
            return ControlFlow::Continue(());
        };
        let Some(Some(names)) = columns.next() else {
            return ControlFlow::Continue(());
        };
        if alias.columns.len() > names.len() {
            *error = Some(Error::plan(
                "42P10",
                format!(
                    "{what} \"{}\" has {} columns available but {} columns specified",
                    alias.name.value,
                    names.len(),
                    alias.columns.len()
                ),
            ));
            return ControlFlow::Break(());
        }
        let given = alias.columns.len();
        *filled |= given < names.len();
        alias
            .columns
            .extend(names[given..].iter().map(|n| TableAliasColumnDef {
                name: quoted(n),
                data_type: None,
            }));
        ControlFlow::Continue(())
    }
}

/// `name` as an identifier that keeps its case.
fn quoted(name: &str) -> datafusion::sql::sqlparser::ast::Ident {
    datafusion::sql::sqlparser::ast::Ident::with_quote('"', name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lists_are_filled_and_long_ones_refused() {
        let mut stmt =
            crate::sql::parse::parse_one("SELECT * FROM t AS j(a), (SELECT 1 AS x, 2 AS y) d(p)")
                .unwrap();
        let probes = probes(&stmt);
        assert_eq!(probes.len(), 2);
        assert_eq!(probes[0].to_string(), "SELECT * FROM t AS j");
        let filled = fill(
            &mut stmt,
            vec![
                Some(vec!["k".into(), "Value".into()]),
                Some(vec!["x".into(), "y".into()]),
            ],
        )
        .unwrap();
        assert!(filled);
        assert_eq!(
            stmt.to_string(),
            "SELECT * FROM t AS j (a, \"Value\"), (SELECT 1 AS x, 2 AS y) d (p, \"y\")"
        );
        let mut long = crate::sql::parse::parse_one("SELECT * FROM t j(a, b, c)").unwrap();
        let err = fill(&mut long, vec![Some(vec!["k".into(), "v".into()])]).unwrap_err();
        assert_eq!(err.sqlstate(), "42P10");
    }

    #[test]
    fn cte_column_lists_are_filled() {
        let mut stmt = crate::sql::parse::parse_one(
            "WITH a AS (SELECT 1 AS x), c(p) AS (SELECT x, 2 AS y FROM a) SELECT * FROM c",
        )
        .unwrap();
        let probes = probes(&stmt);
        assert_eq!(
            probes[0].to_string(),
            "WITH a AS (SELECT 1 AS x) SELECT x, 2 AS y FROM a"
        );
        assert!(fill(&mut stmt, vec![Some(vec!["x".into(), "y".into()])]).unwrap());
        assert_eq!(
            stmt.to_string(),
            "WITH a AS (SELECT 1 AS x), c (p, \"y\") AS (SELECT x, 2 AS y FROM a) SELECT * FROM c"
        );
    }

    #[test]
    fn probes_carry_the_ctes_they_name() {
        let stmt = crate::sql::parse::parse_one(
            "WITH a AS (SELECT 1 AS x), b AS (SELECT x, 2 AS y FROM a), c AS (SELECT 3) \
             SELECT * FROM b AS j(p)",
        )
        .unwrap();
        let probes = probes(&stmt);
        assert_eq!(
            probes[0].to_string(),
            "WITH a AS (SELECT 1 AS x), b AS (SELECT x, 2 AS y FROM a) SELECT * FROM b AS j"
        );
    }
}

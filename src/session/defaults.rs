//! Column defaults (PostgreSQL docs, 5.2 "Default Values"): `CREATE TABLE t (..., c type
//! DEFAULT expr)` keeps `expr` as written; an `INSERT` that leaves `c` out, writes `DEFAULT`
//! in its `VALUES`, or is `INSERT ... DEFAULT VALUES`, and an `UPDATE ... SET c = DEFAULT`,
//! get the expression, evaluated by the statement (`now()` is the statement's time). A column
//! without a default gets NULL.
//!
//! The statement is rewritten before it is planned:
//!
//! ```text
//!  INSERT INTO t (a) VALUES (1), (DEFAULT)      ─► INSERT INTO t (a, c) VALUES (1, expr_c), (expr_a, expr_c)
//!  INSERT INTO t VALUES (1)                     ─► INSERT INTO t VALUES (1, expr_c)   (missing trailing values)
//!  INSERT INTO t (a) SELECT x FROM s            ─► INSERT INTO t (a, c) SELECT __weir_source.*, expr_c FROM (SELECT x FROM s) AS __weir_source
//!  INSERT INTO t SELECT x FROM s               ─► INSERT INTO t (a, c) SELECT ... (as above; a SELECT of fewer columns than t)
//!  INSERT INTO t DEFAULT VALUES                 ─► INSERT INTO t VALUES (expr_a, ..., expr_c)
//!  UPDATE t SET c = DEFAULT                     ─► UPDATE t SET c = expr_c
//! ```

use crate::sql::dialect::WeirDialect;
use datafusion::sql::sqlparser::ast::{
    ColumnOption, Expr, Ident, Query, SelectItem, SetExpr, Statement, Value,
};
use datafusion::sql::sqlparser::parser::Parser;

use crate::catalog::RelationDef;
use crate::error::{Error, Result};

/// The alias of an `INSERT ... SELECT`'s source when defaults are added beside it.
const SOURCE: &str = "__weir_source";

/// The `DEFAULT` expressions of a `CREATE TABLE`'s columns as written, by column index
/// (`None`: no default).
pub fn declared(stmt: &Statement) -> Vec<Option<String>> {
    let Statement::CreateTable(ct) = stmt else {
        return Vec::new();
    };
    ct.columns
        .iter()
        .map(|c| {
            c.options.iter().find_map(|o| match &o.option {
                ColumnOption::Default(e) => Some(e.to_string()),
                _ => None,
            })
        })
        .collect()
}

/// True when `e` is the keyword `DEFAULT` standing for a value.
fn is_default(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
}

/// Column `i`'s default expression (NULL without one).
///
/// # Errors
/// `XX000` when the stored text does not parse (it was written by `CREATE TABLE`).
fn default_of(def: &RelationDef, i: usize) -> Result<Expr> {
    match def.column_defaults.get(i).and_then(Option::as_ref) {
        Some(text) => Parser::new(&WeirDialect)
            .try_with_sql(text)
            .and_then(|mut p| p.parse_expr())
            .map_err(|e| Error::Internal(format!("stored default {text:?}: {e}"))),
        None => Ok(Expr::Value(Value::Null.into())),
    }
}

/// The index of column `name` in `def` (names compared as the planner does: unquoted
/// identifiers in lower case).
fn column_index(def: &RelationDef, name: &Ident) -> Option<usize> {
    let wanted = if name.quote_style.is_some() {
        name.value.clone()
    } else {
        name.value.to_lowercase()
    };
    def.schema.fields().iter().position(|f| *f.name() == wanted)
}

/// Rewrites an `INSERT` or `UPDATE` of table `def` as the module docs say; other statements
/// are left alone.
///
/// # Errors
/// `42703` for a column of the `INSERT`'s list that the table lacks, as PostgreSQL names it.
pub fn fill(stmt: &mut Statement, def: &RelationDef) -> Result<()> {
    match stmt {
        Statement::Update(u) => {
            for a in &mut u.assignments {
                if !is_default(&a.value) {
                    continue;
                }
                let datafusion::sql::sqlparser::ast::AssignmentTarget::ColumnName(name) = &a.target
                else {
                    continue;
                };
                let Some(last) = name.0.last().and_then(|p| p.as_ident()) else {
                    continue;
                };
                if let Some(i) = column_index(def, last) {
                    a.value = default_of(def, i)?;
                }
            }
            Ok(())
        }
        Statement::Insert(insert) => {
            let width = def.schema.fields().len();
            // The table's column index of each position of the insert's list.
            let mut targets: Vec<usize> = if insert.columns.is_empty() {
                (0..width).collect()
            } else {
                insert
                    .columns
                    .iter()
                    .map(|c| {
                        let last = c.0.last().and_then(|p| p.as_ident()).cloned();
                        last.as_ref()
                            .and_then(|c| column_index(def, c))
                            .ok_or_else(|| {
                                Error::plan(
                                    "42703",
                                    format!(
                                        "column \"{c}\" of relation \"{}\" does not exist",
                                        def.name
                                    ),
                                )
                            })
                    })
                    .collect::<Result<_>>()?
            };
            let Some(source) = insert.source.as_mut() else {
                // INSERT ... DEFAULT VALUES.
                let row = (0..width)
                    .map(|i| default_of(def, i))
                    .collect::<Result<Vec<_>>>()?;
                insert.columns.clear();
                insert.source = Some(Box::new(values_query(&row)?));
                return Ok(());
            };
            // Without a list, a SELECT of fewer columns fills the table's first columns, as in
            // PostgreSQL; the list is written out so that the rest get their defaults.
            if insert.columns.is_empty()
                && !matches!(source.body.as_ref(), SetExpr::Values(_))
                && let Some(n) = select_width(&source.body)
                && n < width
            {
                insert.columns = (0..n)
                    .map(|i| Ident::with_quote('"', def.schema.field(i).name()).into())
                    .collect();
                targets.truncate(n);
            }
            // Columns the list leaves out that have a default (all others get NULL anyway).
            let listed = !insert.columns.is_empty();
            let missing: Vec<usize> = if listed {
                (0..width)
                    .filter(|i| !targets.contains(i))
                    .filter(|&i| def.column_defaults.get(i).is_some_and(Option::is_some))
                    .collect()
            } else {
                Vec::new()
            };
            if let SetExpr::Values(values) = source.body.as_mut() {
                for row in &mut values.rows {
                    let row = &mut row.content;
                    for (j, e) in row.iter_mut().enumerate() {
                        if is_default(e)
                            && let Some(&i) = targets.get(j)
                        {
                            *e = default_of(def, i)?;
                        }
                    }
                    // Without a list, missing trailing values are their columns' defaults.
                    if !listed && row.len() < width {
                        for i in row.len()..width {
                            row.push(default_of(def, i)?);
                        }
                    }
                    for &i in &missing {
                        row.push(default_of(def, i)?);
                    }
                }
            } else if !missing.is_empty() {
                let extra = missing
                    .iter()
                    .map(|&i| Ok((default_of(def, i)?, format!("__weir_default_{i}"))))
                    .collect::<Result<Vec<_>>>()?;
                let beside = select_beside(source, &extra)?;
                **source = beside;
            }
            for &i in &missing {
                insert
                    .columns
                    .push(Ident::with_quote('"', def.schema.field(i).name()).into());
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The number of columns a query body yields, when its select lists say it without planning
/// (`None` for `*`, `t.*` and other forms).
fn select_width(body: &SetExpr) -> Option<usize> {
    match body {
        SetExpr::Select(s) => s
            .projection
            .iter()
            .all(|item| {
                matches!(
                    item,
                    SelectItem::UnnamedExpr(_) | SelectItem::ExprWithAlias { .. }
                )
            })
            .then_some(s.projection.len()),
        SetExpr::SetOperation { left, .. } => select_width(left),
        SetExpr::Query(q) => select_width(&q.body),
        SetExpr::Values(v) => v.rows.first().map(|r| r.content.len()),
        _ => None,
    }
}

/// Parses `sql`, a query this module wrote.
fn parse_query(sql: &str) -> Result<Query> {
    Parser::new(&WeirDialect)
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_query())
        .map(|q| *q)
        .map_err(|e| Error::Internal(format!("rewritten INSERT source {sql:?}: {e}")))
}

/// `VALUES (row)` as a query.
fn values_query(row: &[Expr]) -> Result<Query> {
    let items: Vec<String> = row.iter().map(ToString::to_string).collect();
    parse_query(&format!("VALUES ({})", items.join(", ")))
}

/// `SELECT __weir_source.*, extra... FROM (inner) AS __weir_source`.
fn select_beside(inner: &Query, extra: &[(Expr, String)]) -> Result<Query> {
    let mut items = vec![format!("{SOURCE}.*")];
    items.extend(extra.iter().map(|(e, alias)| format!("{e} AS {alias}")));
    parse_query(&format!(
        "SELECT {} FROM ({inner}) AS {SOURCE}",
        items.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sql: &str) -> Statement {
        Parser::parse_sql(&WeirDialect, sql).unwrap().remove(0)
    }

    #[test]
    fn defaults_are_kept_as_written() {
        let stmt =
            parse("CREATE TABLE t (a INT, b TEXT DEFAULT 'x' || 'y', c TIMESTAMPTZ DEFAULT now())");
        assert_eq!(
            declared(&stmt),
            vec![None, Some("'x' || 'y'".into()), Some("now()".into())]
        );
    }
}

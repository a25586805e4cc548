//! Output column names of a SELECT list, PostgreSQL's way, for queries whose names repeat.
//!
//! PostgreSQL lets a SELECT list repeat a name (`SELECT 1, 1`, `SELECT 38 AS c, -x AS c`); a
//! DataFusion plan may not. Such a query is planned with unique internal aliases and its
//! result is shown under the names PostgreSQL gives (its `FigureColname`, parser/parse_target.c:
//! the alias; else a column's name; else a function's name; else `?column?`).

use datafusion::sql::sqlparser::ast::{
    Expr, Ident, OrderByKind, SelectItem, SetExpr, Statement, Value, ValueWithSpan,
};

/// The name PostgreSQL shows for an unaliased SELECT-list expression.
pub fn figure_name(e: &Expr) -> String {
    fn ident(i: &Ident) -> String {
        if i.quote_style.is_some() {
            i.value.clone()
        } else {
            i.value.to_ascii_lowercase()
        }
    }
    match e {
        Expr::Identifier(i) => ident(i),
        Expr::CompoundIdentifier(parts) => parts.last().map(ident).unwrap_or_default(),
        Expr::Function(f) => f
            .name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(ident)
            .unwrap_or_else(|| "?column?".into()),
        Expr::Nested(inner) => figure_name(inner),
        Expr::Cast { expr, .. } => figure_name(expr),
        Expr::Case { .. } => "case".into(),
        _ => "?column?".into(),
    }
}

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
        let internal = Ident::new(format!("weir_output_{i}"));
        let (expr, name) = match item {
            SelectItem::UnnamedExpr(e) => (e.clone(), figure_name(e)),
            SelectItem::ExprWithAlias { expr, alias } => {
                let name = if alias.quote_style.is_some() {
                    alias.value.clone()
                } else {
                    alias.value.to_ascii_lowercase()
                };
                (expr.clone(), name)
            }
            _ => return None,
        };
        *item = SelectItem::ExprWithAlias {
            expr,
            alias: internal,
        };
        names.push(name);
    }
    // ORDER BY may name an output column by its alias, which now has another name; ordinal
    // positions (`ORDER BY 1`) still hold.
    if let Some(order) = &query.order_by {
        let positional = match &order.kind {
            OrderByKind::Expressions(exprs) => exprs.iter().all(|o| {
                matches!(
                    &o.expr,
                    Expr::Value(ValueWithSpan {
                        value: Value::Number(..),
                        ..
                    })
                )
            }),
            OrderByKind::All(_) => false,
        };
        if !positional {
            return None;
        }
    }
    Some((stmt, names))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn wildcards_are_left_alone() {
        let stmt = crate::sql::parse::parse_one("SELECT *, 1 FROM t").unwrap();
        assert!(unique_output_names(&stmt).is_none());
    }
}

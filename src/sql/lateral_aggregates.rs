//! Items without an aggregate in a `LATERAL` aggregate subquery.
//!
//! An aggregate without `GROUP BY` yields exactly one row, also over no rows, so in
//! PostgreSQL `t LEFT JOIN LATERAL (SELECT max(x.v) AS m, true AS seen FROM x WHERE x.k =
//! t.k) s ON true` has `seen = true` for every row of `t` (docs, 7.2.1.5 "LATERAL
//! Subqueries"). DataFusion decorrelates such a subquery into a grouped join and evaluates the
//! empty groups' aggregates for the outer rows without matches (`count` 0, `max` NULL), but an
//! item that reads no aggregate (a constant) came out NULL there. This rewrite makes each such
//! item read one (`CASE WHEN count(*) >= 0 THEN true END AS seen`), which DataFusion's
//! empty-group evaluation then computes; the item keeps its name.

use std::ops::ControlFlow;

use crate::sql::parse::AGGREGATES;
use datafusion::sql::sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentList, FunctionArguments,
    GroupByExpr, Ident, ObjectName, Select, SelectItem, SetExpr, Statement, TableFactor, Value,
    VisitMut, VisitorMut, visit_expressions,
};
use datafusion_pg_catalog::sql::rules::SqlStatementRewriteRule;

/// The aggregate functions beyond PostgreSQL's common ones ([`AGGREGATES`]) whose call, without
/// `OVER`, also makes a `SELECT` an aggregate query: PostgreSQL's statistics aggregates and
/// DataFusion's own.
const MORE_AGGREGATES: &[&str] = &[
    "mean",
    "median",
    "corr",
    "covar_samp",
    "covar_pop",
    "regr_slope",
    "regr_intercept",
    "regr_count",
    "regr_r2",
    "regr_avgx",
    "regr_avgy",
    "regr_sxx",
    "regr_syy",
    "regr_sxy",
    "approx_distinct",
    "approx_median",
];

/// True when `e` calls an aggregate function (not as a window function).
fn has_aggregate(e: &Expr) -> bool {
    visit_expressions(e, |x| {
        if let Expr::Function(f) = x
            && f.over.is_none()
            && f.name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| {
                AGGREGATES
                    .iter()
                    .chain(MORE_AGGREGATES)
                    .any(|a| i.value.eq_ignore_ascii_case(a))
            })
        {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    })
    .is_break()
}

/// True when `select` is an aggregate without `GROUP BY` (one row, also over no rows).
pub fn is_ungrouped_aggregate(select: &Select) -> bool {
    let grouped = match &select.group_by {
        GroupByExpr::All(_) => true,
        GroupByExpr::Expressions(exprs, _) => !exprs.is_empty(),
    };
    !grouped
        && select.projection.iter().any(|item| match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                has_aggregate(e)
            }
            _ => false,
        })
}

/// Refuses a `LATERAL` aggregate subquery without `GROUP BY` that has a `HAVING`
/// (`LATERAL (SELECT count(*) FROM x WHERE x.k = t.k HAVING count(*) > 1)`): DataFusion's
/// decorrelation drops the `HAVING`, keeping the rows it removes.
///
/// # Errors
/// `0A000` naming the construct.
pub fn check_having(stmt: &Statement) -> crate::error::Result<()> {
    use datafusion::sql::sqlparser::ast::{Visit, Visitor};
    struct Having;
    impl Visitor for Having {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            if let TableFactor::Derived {
                lateral: true,
                subquery,
                ..
            } = factor
                && let SetExpr::Select(select) = subquery.body.as_ref()
                && select.having.is_some()
                && is_ungrouped_aggregate(select)
            {
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    if stmt.visit(&mut Having).is_break() {
        return Err(crate::error::Error::not_supported(
            "HAVING in a LATERAL subquery that aggregates without GROUP BY is not supported",
        ));
    }
    Ok(())
}

/// `CASE WHEN count(*) >= 0 THEN e END`: `e` on every row of an aggregate without `GROUP BY`
/// (see the module docs).
pub fn behind_count(e: Expr) -> Expr {
    let count = Expr::Function(Function {
        name: ObjectName::from(vec![Ident::new("count")]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: vec![FunctionArg::Unnamed(FunctionArgExpr::Wildcard)],
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    });
    let zero = Expr::Value(Value::Number("0".into(), false).with_empty_span());
    Expr::Case {
        case_token: datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(
        ),
        end_token: datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
        operand: None,
        conditions: vec![datafusion::sql::sqlparser::ast::CaseWhen {
            condition: Expr::BinaryOp {
                left: Box::new(count),
                op: datafusion::sql::sqlparser::ast::BinaryOperator::GtEq,
                right: Box::new(zero),
            },
            result: e,
        }],
        else_result: None,
    }
}

/// The rewrite as one of the parser's statement rules (see the module docs).
#[derive(Debug)]
pub struct LateralAggregateRule;

impl SqlStatementRewriteRule for LateralAggregateRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = s.visit(&mut LateralAggregates);
        s
    }
}

struct LateralAggregates;

impl VisitorMut for LateralAggregates {
    type Break = ();

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Derived {
            lateral: true,
            subquery,
            ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        let SetExpr::Select(select) = subquery.body.as_mut() else {
            return ControlFlow::Continue(());
        };
        if !is_ungrouped_aggregate(select) {
            return ControlFlow::Continue(());
        }
        for item in &mut select.projection {
            match item {
                SelectItem::UnnamedExpr(e) if !has_aggregate(e) => {
                    let alias = Ident::with_quote('"', crate::sql::names::figure_name(e));
                    let expr = behind_count(e.clone());
                    *item = SelectItem::ExprWithAlias { expr, alias };
                }
                SelectItem::ExprWithAlias { expr, .. } if !has_aggregate(expr) => {
                    *expr = behind_count(expr.clone());
                }
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
        let mut statements =
            datafusion::sql::sqlparser::parser::Parser::parse_sql(&dialect, sql).unwrap();
        LateralAggregateRule
            .rewrite(statements.pop().unwrap())
            .to_string()
    }

    #[test]
    fn constants_of_lateral_aggregates_read_count() {
        assert_eq!(
            rewritten(
                "SELECT * FROM t LEFT JOIN LATERAL (SELECT max(v) AS m, true AS seen, 5 FROM x WHERE x.k = t.k) s ON true"
            ),
            "SELECT * FROM t LEFT JOIN LATERAL (SELECT max(v) AS m, CASE WHEN count(*) >= 0 THEN true END AS seen, CASE WHEN count(*) >= 0 THEN 5 END AS \"?column?\" FROM x WHERE x.k = t.k) s ON true"
        );
        // Grouped, not an aggregate, or not LATERAL: unchanged.
        for sql in [
            "SELECT * FROM t LEFT JOIN LATERAL (SELECT max(v), 1 FROM x WHERE x.k = t.k GROUP BY x.g) AS s ON true",
            "SELECT * FROM t LEFT JOIN LATERAL (SELECT v, 1 FROM x WHERE x.k = t.k) AS s ON true",
            "SELECT * FROM t LEFT JOIN (SELECT max(v), 1 FROM x) AS s ON true",
        ] {
            assert_eq!(rewritten(sql), sql);
        }
    }
}

//! Decorrelation of the correlated scalar subqueries DataFusion leaves in place.
//!
//! DataFusion's `scalar_subquery_to_join` rewrites a correlated scalar subquery into a join
//! only when its correlation is an equality (`x.k = t.k`); any other correlation
//! (`x.b < t.b`) stays a subquery that no executor can run. [`DecorrelateScalarSubqueries`]
//! rewrites those, for the common shape of an aggregate without `GROUP BY` over a filter
//! that holds the correlation:
//!
//! ```text
//!  SELECT (SELECT agg(..) FROM x WHERE p(x, t)) FROM t
//!  ⇒  t LEFT JOIN (SELECT k, agg(..) FILTER (WHERE present)            -- one row per k
//!                  FROM (SELECT DISTINCT t.c AS k FROM t) d
//!                  LEFT JOIN (SELECT x.*, true AS present FROM x) ON p(x, d.k)
//!                  GROUP BY k) s
//!       ON t.c IS NOT DISTINCT FROM s.k      -- as (t.c IS NULL) = (s.k IS NULL)
//!                                            --    AND coalesce(t.c, d) = coalesce(s.k, d)
//! ```
//!
//! Outer columns read by the aggregates' arguments or the subquery's projection
//! (`(SELECT max(x.a + t.b) FROM x WHERE x.c < t.c)`) read the distinct values' columns too.
//!
//! This is the "magic set" decorrelation of Neumann and Kemper ("Unnesting Arbitrary Queries",
//! BTW 2015): the subquery is evaluated once per distinct value of the outer columns it
//! reads. The left join keeps outer values without matching rows, and the `FILTER` keeps
//! their padding row out of every aggregate, so `count` gives 0 and `sum` NULL there, as the
//! subquery would on no rows; the subquery's own projection then applies to those values.
//! An aggregate without `GROUP BY` yields exactly one row, so PostgreSQL's error for a
//! subquery of two rows (21000) cannot arise in this shape.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, ExprSchema, JoinType, NullEquality, Result};
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::logical_plan::{Filter, Projection};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    BinaryExpr, Expr, LogicalPlan, LogicalPlanBuilder, Operator, Subquery, lit,
};
use datafusion::optimizer::AnalyzerRule;

/// The analyzer rule (see the module docs). Runs after type coercion; rewrites subqueries in
/// projections and filters, innermost first.
#[derive(Debug)]
pub struct DecorrelateScalarSubqueries;

impl AnalyzerRule for DecorrelateScalarSubqueries {
    fn name(&self) -> &str {
        "weir_decorrelate_scalar_subqueries"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let mut next = 0usize;
        Ok(plan
            .transform_up_with_subqueries(|p| rewrite_node(p, &mut next))?
            .data)
    }
}

/// `EXISTS (subquery)` as a value (in a `SELECT` list, or under `OR` or `CASE` in a `WHERE`)
/// rewritten to the scalar subquery `(SELECT count(*) > 0 FROM subquery)` (`NOT EXISTS`:
/// `= 0`), which the rule above or DataFusion's decorrelates. DataFusion plans `EXISTS` only
/// as a top-level conjunct of a `WHERE` (a semi join), which is left as it is; elsewhere it
/// had no physical plan. The subquery's own projection, `DISTINCT` and `ORDER BY` are
/// dropped first: they do not change whether it has rows. Runs before
/// [`DecorrelateScalarSubqueries`].
#[derive(Debug)]
pub struct ExistsAsValues;

impl AnalyzerRule for ExistsAsValues {
    fn name(&self) -> &str {
        "weir_exists_as_values"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        Ok(plan
            .transform_up_with_subqueries(|p| match p {
                LogicalPlan::Filter(f) => {
                    // Top-level conjuncts stay semi joins.
                    let conjuncts: Vec<Expr> = split_conjunction(&f.predicate)
                        .into_iter()
                        .cloned()
                        .collect();
                    let mut changed = false;
                    let mut out = Vec::with_capacity(conjuncts.len());
                    for c in conjuncts {
                        if matches!(c, Expr::Exists(_)) {
                            out.push(c);
                        } else {
                            let t = c.transform_up(exists_as_value)?;
                            changed |= t.transformed;
                            out.push(t.data);
                        }
                    }
                    if !changed {
                        return Ok(Transformed::no(LogicalPlan::Filter(f)));
                    }
                    let predicate = datafusion::logical_expr::utils::conjunction(out)
                        .unwrap_or_else(|| lit(true));
                    Ok(Transformed::yes(LogicalPlan::Filter(Filter::try_new(
                        predicate, f.input,
                    )?)))
                }
                other => crate::sql::semantics::map_node_exprs(other, exists_as_value),
            })?
            .data)
    }
}

/// `EXISTS`, `IN` and `NOT IN` over a subquery that is an aggregate without `GROUP BY` (or
/// `HAVING`, or a limit), which yields exactly one row whatever its input: `EXISTS` is
/// `true` (`NOT EXISTS` `false`) and `x [NOT] IN (subquery)` is `x = (subquery)` (`<>`), a
/// scalar subquery, whose NULL and `count`-of-no-rows are PostgreSQL's. DataFusion planned
/// them as semi and anti joins on the aggregate's rows per correlated key, which has no row
/// for a key without input rows (`EXISTS (SELECT count(*) ... WHERE b.k = a.k)` was false
/// there, `a.g IN (SELECT count(*) ...)` never matched 0). Runs before [`ExistsAsValues`].
#[derive(Debug)]
pub struct SingleRowSubqueries;

impl AnalyzerRule for SingleRowSubqueries {
    fn name(&self) -> &str {
        "weir_single_row_subqueries"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        Ok(plan
            .transform_up_with_subqueries(|p| {
                crate::sql::semantics::map_node_exprs(p, single_row_subquery)
            })?
            .data)
    }
}

/// Whether `plan` yields exactly one row: an aggregate without grouping under projections
/// and aliases only.
fn one_row_plan(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Projection(p) => one_row_plan(&p.input),
        LogicalPlan::SubqueryAlias(a) => one_row_plan(&a.input),
        LogicalPlan::Aggregate(a) => a.group_expr.is_empty(),
        _ => false,
    }
}

/// One expression as [`SingleRowSubqueries`] rewrites it.
fn single_row_subquery(e: Expr) -> Result<Transformed<Expr>> {
    match e {
        Expr::Exists(x) if one_row_plan(&x.subquery.subquery) => {
            Ok(Transformed::yes(lit(!x.negated)))
        }
        Expr::InSubquery(q)
            if q.subquery.subquery.schema().fields().len() == 1
                && one_row_plan(&q.subquery.subquery) =>
        {
            let op = if q.negated {
                Operator::NotEq
            } else {
                Operator::Eq
            };
            Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                q.expr,
                op,
                Box::new(Expr::ScalarSubquery(q.subquery)),
            ))))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// One `EXISTS` expression as [`ExistsAsValues`] rewrites it.
fn exists_as_value(e: Expr) -> Result<Transformed<Expr>> {
    let Expr::Exists(exists) = e else {
        return Ok(Transformed::no(e));
    };
    let mut plan = Arc::clone(&exists.subquery.subquery);
    loop {
        plan = match plan.as_ref() {
            LogicalPlan::Projection(p) => Arc::clone(&p.input),
            LogicalPlan::Distinct(datafusion::logical_expr::Distinct::All(input)) => {
                Arc::clone(input)
            }
            LogicalPlan::Sort(s) if s.fetch.is_none() => Arc::clone(&s.input),
            _ => break,
        };
    }
    let op = if exists.negated {
        Operator::Eq
    } else {
        Operator::Gt
    };
    let rows = "__weir_exists_rows";
    let counted = LogicalPlanBuilder::from(plan)
        .aggregate(
            Vec::<Expr>::new(),
            vec![datafusion::functions_aggregate::expr_fn::count(lit(1i64)).alias(rows)],
        )?
        .project(vec![
            Expr::BinaryExpr(BinaryExpr::new(
                Box::new(Expr::Column(Column::from_name(rows))),
                op,
                Box::new(lit(0i64)),
            ))
            .alias("exists"),
        ])?
        .build()?;
    Ok(Transformed::yes(Expr::ScalarSubquery(Subquery {
        subquery: Arc::new(counted),
        outer_ref_columns: exists.subquery.outer_ref_columns,
        spans: exists.subquery.spans,
    })))
}

/// The parts of a subquery this rule can rewrite.
struct Shape<'a> {
    /// The subquery's projection over the aggregate's output, if any (one expression).
    projection: Option<&'a Expr>,
    aggregate: &'a datafusion::logical_expr::logical_plan::Aggregate,
    /// The filter under the aggregate: its predicate holds every outer reference.
    filter: &'a Filter,
}

fn shape(sq: &Subquery) -> Option<Shape<'_>> {
    let mut plan = sq.subquery.as_ref();
    let mut projection = None;
    if let LogicalPlan::Projection(p) = plan {
        if p.expr.len() != 1 {
            return None;
        }
        projection = Some(&p.expr[0]);
        plan = p.input.as_ref();
    }
    let LogicalPlan::Aggregate(aggregate) = plan else {
        return None;
    };
    if !aggregate.group_expr.is_empty() {
        return None;
    }
    let LogicalPlan::Filter(filter) = aggregate.input.as_ref() else {
        return None;
    };
    let below = filter
        .input
        .exists(|p| Ok(p.contains_outer_reference()))
        .unwrap_or(true);
    if below || !filter.predicate.contains_outer() {
        return None;
    }
    Some(Shape {
        projection,
        aggregate,
        filter,
    })
}

/// True when some correlated conjunct is not `inner column = outer column`: the case
/// DataFusion does not decorrelate.
fn needs_rewrite(filter: &Filter) -> bool {
    split_conjunction(&filter.predicate).into_iter().any(|c| {
        if !c.contains_outer() {
            return false;
        }
        !matches!(c, Expr::BinaryExpr(BinaryExpr { left, op: Operator::Eq, right })
        if matches!(
            (left.as_ref(), right.as_ref()),
            (Expr::Column(_), Expr::OuterReferenceColumn(..))
                | (Expr::OuterReferenceColumn(..), Expr::Column(_))
        ))
    })
}

/// True when the aggregates' arguments or the subquery's projection read the outer row, which
/// DataFusion's decorrelation of equality correlations does not allow.
fn reads_outer_above_filter(s: &Shape<'_>) -> bool {
    s.aggregate.aggr_expr.iter().any(Expr::contains_outer)
        || s.projection.is_some_and(Expr::contains_outer)
}

/// The outer columns a subquery reads, once each, in order of appearance.
fn outer_columns(sq: &Subquery) -> Vec<Column> {
    let mut out: Vec<Column> = Vec::new();
    for e in &sq.outer_ref_columns {
        let _ = e.apply(|e| {
            if let Expr::OuterReferenceColumn(_, c) = e
                && !out.contains(c)
            {
                out.push(c.clone());
            }
            Ok(TreeNodeRecursion::Continue)
        });
    }
    out
}

/// The first rewritable subquery among `exprs` whose outer columns all come from `input`.
fn candidate(exprs: &[Expr], input: &LogicalPlan) -> Option<Subquery> {
    let mut found = None;
    for e in exprs {
        let _ = e.apply(|e| {
            if let Expr::ScalarSubquery(sq) = e
                && let Some(s) = shape(sq)
                && (needs_rewrite(s.filter) || reads_outer_above_filter(&s))
                && outer_columns(sq)
                    .iter()
                    .all(|c| input.schema().has_column(c))
            {
                found = Some(sq.clone());
                return Ok(TreeNodeRecursion::Stop);
            }
            Ok(TreeNodeRecursion::Continue)
        });
        if found.is_some() {
            break;
        }
    }
    found
}

fn rewrite_node(plan: LogicalPlan, next: &mut usize) -> Result<Transformed<LogicalPlan>> {
    let mut plan = plan;
    let mut changed = false;
    // A filter's output columns before its first rewrite: the filter keeps them.
    let mut filter_columns: Option<Vec<Expr>> = None;
    loop {
        let (exprs, input) = match &plan {
            LogicalPlan::Projection(p) => (p.expr.clone(), p.input.clone()),
            LogicalPlan::Filter(f) => (vec![f.predicate.clone()], f.input.clone()),
            _ => break,
        };
        let Some(sq) = candidate(&exprs, &input) else {
            break;
        };
        let (joined, value) = decorrelate(input.clone(), &sq, *next)?;
        *next += 1;
        let replace = |e: Expr| -> Result<Expr> {
            Ok(e.transform_up(|e| match e {
                Expr::ScalarSubquery(s) if s == sq => {
                    Ok(Transformed::yes(Expr::Column(value.clone())))
                }
                other => Ok(Transformed::no(other)),
            })?
            .data)
        };
        plan = match plan {
            LogicalPlan::Projection(p) => {
                let preserver = NamePreserver::new_for_projection();
                let exprs = p
                    .expr
                    .into_iter()
                    .map(|e| {
                        let saved = preserver.save(&e);
                        Ok(saved.restore(replace(e)?))
                    })
                    .collect::<Result<Vec<_>>>()?;
                LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(joined))?)
            }
            LogicalPlan::Filter(f) => {
                // The filter stays on top while its other subqueries are rewritten (`EXISTS
                // (...) OR EXISTS (...)`), each joined in below it.
                filter_columns.get_or_insert_with(|| {
                    input
                        .schema()
                        .columns()
                        .into_iter()
                        .map(Expr::Column)
                        .collect()
                });
                let predicate = replace(f.predicate)?;
                LogicalPlan::Filter(Filter::try_new(predicate, Arc::new(joined))?)
            }
            other => other,
        };
        changed = true;
    }
    if let Some(columns) = filter_columns {
        // The filter's output keeps the columns it had.
        plan = LogicalPlanBuilder::from(plan).project(columns)?.build()?;
    }
    Ok(if changed {
        Transformed::yes(plan)
    } else {
        Transformed::no(plan)
    })
}

/// Joins `outer` with the subquery evaluated once per distinct value of its outer columns;
/// returns the joined plan (the outer columns, then the subquery's) and the column holding
/// the subquery's value.
fn decorrelate(outer: Arc<LogicalPlan>, sq: &Subquery, n: usize) -> Result<(LogicalPlan, Column)> {
    let s = shape(sq).expect("checked by candidate");
    let alias = format!("__weir_sq{n}");
    let present = format!("__weir_sq{n}_present");
    let value_name = format!("__weir_sq{n}_value");
    let columns = outer_columns(sq);
    let key = |i: usize| Column::new(Some(alias.as_str()), format!("k{i}"));

    // The distinct values of the outer columns.
    let distinct = LogicalPlanBuilder::from(outer.as_ref().clone())
        .project(
            columns
                .iter()
                .enumerate()
                .map(|(i, c)| Expr::Column(c.clone()).alias(format!("k{i}"))),
        )?
        .distinct()?
        .alias(alias.as_str())?
        .build()?;

    // The subquery's rows, marked so that a padding row can be told apart.
    let inner_columns = s
        .filter
        .input
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column);
    let inner = LogicalPlanBuilder::from(s.filter.input.as_ref().clone())
        .project(inner_columns.chain(std::iter::once(lit(true).alias(present.as_str()))))?
        .build()?;

    // Outer references, in the predicate, the aggregates' arguments and the projection, read
    // the distinct values' columns instead.
    let positions: HashMap<&Column, usize> =
        columns.iter().enumerate().map(|(i, c)| (c, i)).collect();
    let to_keys = |e: Expr| -> Result<Expr> {
        Ok(e.transform_up(|e| match e {
            Expr::OuterReferenceColumn(_, c) => {
                let i = positions[&c];
                Ok(Transformed::yes(Expr::Column(key(i))))
            }
            other => Ok(Transformed::no(other)),
        })?
        .data)
    };
    let predicate = to_keys(s.filter.predicate.clone())?;

    let marker = Expr::Column(Column::new_unqualified(present.as_str())).is_not_null();
    let aggregates = s
        .aggregate
        .aggr_expr
        .iter()
        .enumerate()
        .map(|(j, e)| {
            let name = s
                .aggregate
                .schema
                .field(s.aggregate.group_expr.len() + j)
                .name()
                .clone();
            let filtered = to_keys(e.clone().unalias())?
                .transform_up(|e| match e {
                    Expr::AggregateFunction(mut af) => {
                        af.params.filter = Some(Box::new(match af.params.filter.take() {
                            Some(f) => f.as_ref().clone().and(marker.clone()),
                            None => marker.clone(),
                        }));
                        Ok(Transformed::yes(Expr::AggregateFunction(
                            AggregateFunction {
                                func: af.func,
                                params: af.params,
                            },
                        )))
                    }
                    other => Ok(Transformed::no(other)),
                })?
                .data;
            Ok(filtered.alias(name))
        })
        .collect::<Result<Vec<_>>>()?;
    let group: Vec<Expr> = (0..columns.len()).map(|i| Expr::Column(key(i))).collect();
    let value = match s.projection {
        Some(e) => to_keys(e.clone().unalias())?,
        None => Expr::Column(Column::new_unqualified(
            s.aggregate
                .schema
                .field(s.aggregate.group_expr.len())
                .name(),
        )),
    };
    let per_key = LogicalPlanBuilder::from(distinct)
        .join_on(inner, JoinType::Left, [predicate])?
        .aggregate(group.clone(), aggregates)?
        .project(
            group
                .into_iter()
                .chain(std::iter::once(value.alias(value_name.as_str()))),
        )?
        .build()?;

    // Each outer row meets the row of its values, NULLs included. The keys are compared as
    // `(c IS NULL) = (k IS NULL) AND coalesce(c, d) = coalesce(k, d)`, never NULL, rather
    // than by a join whose NULLs are equal: the optimizer may move the comparison with the
    // subquery's value (`p1.k = (SELECT ...)`) into this join, where NULLs equal would let
    // `NULL = NULL` through.
    let mut on = Vec::with_capacity(columns.len());
    for (i, c) in columns.iter().enumerate() {
        let t = outer.schema().field_from_column(c)?.data_type().clone();
        let Ok(d) = datafusion::common::ScalarValue::new_default(&t) else {
            on.clear();
            break;
        };
        let (l, r) = (Expr::Column(c.clone()), Expr::Column(key(i)));
        let both_null = l.clone().is_null().eq(r.clone().is_null());
        let coalesced =
            |e: Expr| datafusion::functions::core::expr_fn::coalesce(vec![e, lit(d.clone())]);
        on.push(both_null.and(coalesced(l).eq(coalesced(r))));
    }
    let joined = if on.len() == columns.len() {
        LogicalPlanBuilder::from(outer.as_ref().clone())
            .join_on(per_key, JoinType::Left, on)?
            .build()?
    } else {
        // A key type without a default value: NULLs equal in the join.
        LogicalPlanBuilder::from(outer.as_ref().clone())
            .join_detailed(
                per_key,
                JoinType::Left,
                (
                    columns.clone(),
                    (0..columns.len()).map(key).collect::<Vec<_>>(),
                ),
                None,
                NullEquality::NullEqualsNull,
            )?
            .build()?
    };
    Ok((joined, Column::new_unqualified(value_name)))
}

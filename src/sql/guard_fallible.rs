//! A logical optimizer rule that evaluates a condition's fallible parts only for the rows the
//! rest of the condition keeps.
//!
//! PostgreSQL evaluates `WHERE b <> 0 AND a / b > 1` row by row and stops at the first false
//! conjunct, so the division never sees the row with `b = 0`; likewise `b = 0 OR a / b > 1`
//! stops at the first true disjunct (its docs, 4.2.14 "Expression Evaluation Rules", describe
//! this short-circuit; it is what users rely on). DataFusion evaluates both sides of `AND`
//! over the whole batch, so the division failed with `22012` on a row the other side removes.
//! The same happens when the optimizer merges a subquery's `WHERE b <> 0` into an outer
//! `WHERE a / b > 1`.
//!
//! In a filter's predicate (a `WHERE`, `HAVING` or a join's non-equality condition) each
//! fallible conjunct (one that divides, takes a remainder, or reads text as another type) is
//! evaluated under the infallible ones, through `CASE`, which evaluates a branch only for the
//! rows that take it:
//!
//! ```text
//!  b <> 0 AND a / b > 1          ─►  b <> 0 AND CASE WHEN b <> 0 THEN a / b > 1 ELSE false END
//!  b = 0 OR a / b > 1            ─►  CASE WHEN b = 0 THEN true ELSE a / b > 1 END
//! ```
//!
//! An `OR`'s fallible disjunct is guarded as a condition of its own, so
//! `(b <> 0 AND a / b > 1) OR c` divides only where `c` is not true and `b <> 0`; the
//! conditions of aggregates' `FILTER (WHERE ...)` are guarded as a filter's are, and their
//! fallible arguments are read under the filter (`sum(CASE WHEN b <> 0 THEN a / b END)
//! FILTER (WHERE b <> 0)`).
//!
//! In a filter a NULL condition drops the row as false does, so these forms keep every
//! row the original keeps. The infallible conjuncts stay where they were, so the dataflow
//! still sees them (temporal filters, join keys). Guards are only immutable expressions
//! without subqueries. Cost: one walk of each filter's predicate per optimizer pass.

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::Case;
use datafusion::logical_expr::utils::{
    conjunction, disjunction, split_binary_owned, split_conjunction_owned,
};
use datafusion::logical_expr::{
    Aggregate, BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator, Volatility,
};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use arrow::datatypes::DataType;

/// The rule (see the module docs).
#[derive(Debug, Default)]
pub struct GuardFallible;

/// DataFusion's optimizer rules, `push_down_filter` kept out of aggregates without `GROUP BY`
/// ([`KeepGlobalAggregateFilters`](crate::sql::push_down_filter::KeepGlobalAggregateFilters)),
/// `single_distinct_aggregation_to_group_by` keeping the aggregate's column types
/// ([`TypedSingleDistinct`](crate::sql::single_distinct::TypedSingleDistinct)), with
/// [`GuardFallible`] twice: before common subexpression
/// elimination, which would otherwise compute an expression that both a guarded condition
/// and another expression use (`count(*) FILTER (WHERE b <> 0 AND a / b > 1)` beside
/// `sum(a / b) FILTER (WHERE b <> 0)`) for every row, in a projection below them; and last,
/// for the conditions the other rules merged (a subquery's `WHERE b <> 0` into the outer
/// `WHERE a / b > 1`).
pub fn optimizer_rules() -> Vec<std::sync::Arc<dyn OptimizerRule + Send + Sync>> {
    let mut rules = datafusion::optimizer::Optimizer::new().rules;
    for rule in &mut rules {
        if rule.name() == "push_down_filter" {
            *rule = std::sync::Arc::new(
                crate::sql::push_down_filter::KeepGlobalAggregateFilters::default(),
            );
        } else if rule.name() == "single_distinct_aggregation_to_group_by" {
            *rule =
                std::sync::Arc::new(crate::sql::single_distinct::TypedSingleDistinct::default());
        }
    }
    let at = rules
        .iter()
        .position(|r| r.name() == "common_sub_expression_eliminate")
        .unwrap_or(rules.len());
    rules.insert(at, std::sync::Arc::new(GuardFallible));
    rules.push(std::sync::Arc::new(GuardFallible));
    rules
}

impl OptimizerRule for GuardFallible {
    fn name(&self) -> &str {
        "weir_guard_fallible"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        match plan {
            LogicalPlan::Filter(mut f) => {
                let schema = f.input.schema().clone();
                let t = guard_condition(f.predicate, &schema)?;
                f.predicate = t.data;
                Ok(Transformed::new_transformed(
                    LogicalPlan::Filter(f),
                    t.transformed,
                ))
            }
            LogicalPlan::Join(mut j) if j.filter.is_some() => {
                let schema = j
                    .left
                    .schema()
                    .join(j.right.schema())
                    .map(std::sync::Arc::new)
                    .unwrap_or_else(|_| j.schema.clone());
                let Some(filter) = j.filter.take() else {
                    return Ok(Transformed::no(LogicalPlan::Join(j)));
                };
                let t = guard_condition(filter, &schema)?;
                j.filter = Some(t.data);
                Ok(Transformed::new_transformed(
                    LogicalPlan::Join(j),
                    t.transformed,
                ))
            }
            LogicalPlan::Aggregate(a) => guard_aggregate_filters(a),
            other => Ok(Transformed::no(other)),
        }
    }
}

/// An aggregate whose `FILTER (WHERE ...)` conditions are guarded as a filter's are (a row
/// whose condition is NULL is left out, as one whose condition is false). An aggregate whose
/// text changed keeps its output column's name.
fn guard_aggregate_filters(mut agg: Aggregate) -> Result<Transformed<LogicalPlan>> {
    let schema = agg.input.schema().clone();
    let mut changed = false;
    let mut out = Vec::with_capacity(agg.aggr_expr.len());
    for e in std::mem::take(&mut agg.aggr_expr) {
        let name = e.schema_name().to_string();
        let t = e.transform_up(|e| match e {
            Expr::AggregateFunction(mut af) => match af.params.filter.take() {
                Some(f) => {
                    let t = guard_condition(*f, &schema)?;
                    let mut changed = t.transformed;
                    let filter = t.data;
                    // `sum(a / b) FILTER (WHERE b <> 0)`: the aggregate reads its arguments
                    // only on the rows its filter keeps, but common subexpression
                    // elimination takes them as read on every row, and would compute an
                    // `a / b` used elsewhere too for every row below the aggregate. Under
                    // `CASE WHEN filter THEN a / b END` it is read where the filter holds.
                    if usable_guard(&filter) {
                        for arg in &mut af.params.args {
                            if can_fail(arg, &schema) {
                                let inner =
                                    std::mem::replace(arg, Expr::Literal(ScalarValue::Null, None));
                                *arg = Expr::Case(Case::new(
                                    None,
                                    vec![(Box::new(filter.clone()), Box::new(inner))],
                                    None,
                                ));
                                changed = true;
                            }
                        }
                    }
                    af.params.filter = Some(Box::new(filter));
                    Ok(Transformed::new_transformed(
                        Expr::AggregateFunction(af),
                        changed,
                    ))
                }
                None => Ok(Transformed::no(Expr::AggregateFunction(af))),
            },
            other => Ok(Transformed::no(other)),
        })?;
        changed |= t.transformed;
        let e = t.data;
        out.push(if !t.transformed || e.schema_name().to_string() == name {
            e
        } else {
            e.alias(name)
        });
    }
    if !changed {
        agg.aggr_expr = out;
        return Ok(Transformed::no(LogicalPlan::Aggregate(agg)));
    }
    let agg = Aggregate::try_new(agg.input, agg.group_expr, out)?;
    Ok(Transformed::yes(LogicalPlan::Aggregate(agg)))
}

/// True for text types (whose cast to another type can fail on the value).
fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// True when `e` is a literal other than zero and NULL.
fn nonzero_literal(e: &Expr) -> bool {
    match e {
        Expr::Literal(v, _) => !v.is_null() && !is_zero(v),
        _ => false,
    }
}

/// True when `v` is a numeric zero.
fn is_zero(v: &ScalarValue) -> bool {
    ScalarValue::new_zero(&v.data_type()).is_ok_and(|z| z == *v)
}

/// True when evaluating `e` can fail on some row's values: a division or remainder (by
/// anything but a non-zero literal), or a cast of text to another type. A `CASE` is not
/// looked into: it already evaluates its branches only where they apply.
fn can_fail(e: &Expr, schema: &DFSchema) -> bool {
    let mut found = false;
    let _ = e.apply(|e| {
        let fallible = match e {
            Expr::Case(_) => return Ok(TreeNodeRecursion::Jump),
            Expr::BinaryExpr(b) => {
                matches!(b.op, Operator::Divide | Operator::Modulo) && !nonzero_literal(&b.right)
            }
            Expr::ScalarFunction(f) => {
                matches!(
                    f.func.name(),
                    "numeric_div" | "float_div" | "mod" | "int_div" | "int_mod"
                ) && !f.args.get(1).is_some_and(nonzero_literal)
            }
            Expr::Cast(c) => {
                !is_text(c.field.data_type()) && c.expr.get_type(schema).is_ok_and(|t| is_text(&t))
            }
            _ => false,
        };
        if fallible {
            found = true;
            Ok(TreeNodeRecursion::Stop)
        } else {
            Ok(TreeNodeRecursion::Continue)
        }
    });
    found
}

/// True when `e` may guard another expression: immutable and without subqueries (it is
/// evaluated a second time inside the `CASE`).
fn usable_guard(e: &Expr) -> bool {
    let mut ok = true;
    let _ = e.apply(|e| {
        let bad = match e {
            Expr::ScalarSubquery(_) | Expr::InSubquery(_) | Expr::Exists(_) => true,
            Expr::ScalarFunction(f) => f.func.signature().volatility != Volatility::Immutable,
            _ => false,
        };
        if bad {
            ok = false;
            Ok(TreeNodeRecursion::Stop)
        } else {
            Ok(TreeNodeRecursion::Continue)
        }
    });
    ok
}

/// `CASE WHEN when THEN then ELSE otherwise END`.
fn case(when: Expr, then: Expr, otherwise: Expr) -> Expr {
    Expr::Case(Case::new(
        None,
        vec![(Box::new(when), Box::new(then))],
        Some(Box::new(otherwise)),
    ))
}

/// A filter's condition with its fallible conjuncts (and the fallible disjuncts of its `OR`
/// conjuncts) guarded as the module docs show; unchanged when nothing can guard them.
fn guard_condition(predicate: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let conjuncts = split_conjunction_owned(predicate);
    let guards: Vec<Expr> = conjuncts
        .iter()
        .filter(|c| !can_fail(c, schema) && usable_guard(c))
        .cloned()
        .collect();
    let guard = conjunction(guards);
    let mut changed = false;
    let mut out = Vec::with_capacity(conjuncts.len());
    for c in conjuncts {
        if !can_fail(&c, schema) {
            out.push(c);
            continue;
        }
        let (c, guarded) = guard_disjunction(c, schema)?;
        changed |= guarded;
        let c = match &guard {
            Some(g) => {
                changed = true;
                case(
                    g.clone(),
                    c,
                    Expr::Literal(ScalarValue::Boolean(Some(false)), None),
                )
            }
            None => c,
        };
        out.push(c);
    }
    let predicate =
        conjunction(out).unwrap_or(Expr::Literal(ScalarValue::Boolean(Some(true)), None));
    Ok(Transformed::new_transformed(predicate, changed))
}

/// `d1 OR d2 OR ...` with its fallible disjuncts evaluated only for rows where the
/// infallible ones are not true (`CASE WHEN safe THEN true ELSE rest END`, and whether it
/// changed), each of them guarded as a condition of its own; other expressions unchanged.
///
/// # Errors
/// None in practice (DataFusion's tree walks return `Result`).
fn guard_disjunction(e: Expr, schema: &DFSchema) -> Result<(Expr, bool)> {
    if !matches!(
        &e,
        Expr::BinaryExpr(BinaryExpr {
            op: Operator::Or,
            ..
        })
    ) {
        return Ok((e, false));
    }
    let (safe, rest): (Vec<Expr>, Vec<Expr>) = split_binary_owned(e, Operator::Or)
        .into_iter()
        .partition(|d| !can_fail(d, schema) && usable_guard(d));
    // A fallible disjunct is itself a condition: `(b <> 0 AND a / b > 1) OR ...` guards its
    // division by its own conjuncts. Under AND and OR alone, reading a NULL as false keeps
    // every row the condition keeps (Kleene logic: a true result does not depend on an
    // unknown input), so the nested guards are as sound as the top-level ones; NOT is not
    // looked through.
    let mut nested = false;
    let mut guarded = Vec::with_capacity(rest.len());
    for d in rest {
        let t = guard_condition(d, schema)?;
        nested |= t.transformed;
        guarded.push(t.data);
    }
    let rest = guarded;
    Ok(
        match (disjunction(safe.clone()), disjunction(rest.clone())) {
            (Some(s), Some(r)) => (
                case(s, Expr::Literal(ScalarValue::Boolean(Some(true)), None), r),
                true,
            ),
            _ => (
                disjunction(safe.into_iter().chain(rest))
                    .unwrap_or(Expr::Literal(ScalarValue::Boolean(Some(false)), None)),
                nested,
            ),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, Schema};
    use datafusion::logical_expr::{col, lit};
    use std::ops::Div;

    fn schema() -> DFSchema {
        DFSchema::try_from(Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Int32, true),
            Field::new("s", DataType::Utf8, true),
        ]))
        .unwrap()
    }

    #[test]
    fn fallible_conjuncts_are_guarded_by_the_others() {
        let s = schema();
        let p = col("b")
            .not_eq(lit(0))
            .and(col("a").div(col("b")).gt(lit(1)));
        let t = guard_condition(p, &s).unwrap();
        assert!(t.transformed);
        assert_eq!(
            t.data.to_string(),
            "b != Int32(0) AND CASE WHEN b != Int32(0) THEN a / b > Int32(1) ELSE Boolean(false) END"
        );
        // Once guarded, a second pass leaves it alone.
        let again = guard_condition(t.data.clone(), &s).unwrap();
        assert!(!again.transformed);
        assert_eq!(again.data, t.data);
    }

    #[test]
    fn fallible_disjuncts_wait_for_the_others() {
        let s = schema();
        let p = col("b").eq(lit(0)).or(col("a").div(col("b")).gt(lit(1)));
        let t = guard_condition(p, &s).unwrap();
        assert_eq!(
            t.data.to_string(),
            "CASE WHEN b = Int32(0) THEN Boolean(true) ELSE a / b > Int32(1) END"
        );
    }

    #[test]
    fn conjunctions_inside_disjunctions_are_guarded() {
        let s = schema();
        let p = col("b")
            .not_eq(lit(0))
            .and(col("a").div(col("b")).gt(lit(1)))
            .or(col("a").is_null());
        let t = guard_condition(p, &s).unwrap();
        assert_eq!(
            t.data.to_string(),
            "CASE WHEN a IS NULL THEN Boolean(true) ELSE b != Int32(0) AND CASE WHEN b != \
             Int32(0) THEN a / b > Int32(1) ELSE Boolean(false) END END"
        );
        let again = guard_condition(t.data.clone(), &s).unwrap();
        assert!(!again.transformed);
    }

    #[test]
    fn infallible_conditions_and_literal_divisors_are_left_alone() {
        let s = schema();
        for p in [
            col("a").gt(lit(1)).and(col("b").lt(lit(3))),
            col("a").gt(lit(1)).and(col("a").div(lit(2)).gt(lit(1))),
        ] {
            let t = guard_condition(p.clone(), &s).unwrap();
            assert!(!t.transformed);
            assert_eq!(t.data, p);
        }
        // A cast of text is fallible; a division by zero is too.
        assert!(can_fail(
            &col("s").cast_to(&DataType::Int32, &s).unwrap(),
            &s
        ));
        assert!(can_fail(&col("a").div(lit(0)), &s));
    }
}

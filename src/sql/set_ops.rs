//! `INTERSECT ALL` and `EXCEPT ALL` with SQL's multiset semantics.
//!
//! SQL (ISO 9075, 7.13 `<query expression>`; PostgreSQL docs section 7.4) defines them by row
//! counts: a row that appears `m` times on the left and `n` times on the right appears
//! `min(m, n)` times in `INTERSECT ALL` and `max(m - n, 0)` times in `EXCEPT ALL`. DataFusion
//! plans both as a plain semi (anti) join of the left input on every column, which keeps all
//! `m` copies of a left row found on the right (and none of one found there, for `EXCEPT
//! ALL`).
//!
//! [`SetOperationsAll`] rewrites those joins: each side numbers the copies of each row
//! (`row_number() OVER (PARTITION BY every column)`), so the `k`th copy on the left matches
//! only the `k`th copy on the right. A semi join of the numbered rows then keeps copies
//! `1..=min(m, n)`, an anti join copies `n+1..=m`, and a projection drops the numbers. The
//! distinct forms (whose left input DataFusion makes distinct first) are left alone: with one
//! copy per row the plain join is already right. The rewritten plan is ordinary SQL, so a
//! view maintains it with its window and semi-join operators.

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, DFSchema, NullEquality};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::{
    Distinct, Expr, ExprFunctionExt, Join, JoinType, LogicalPlan, LogicalPlanBuilder,
};
use datafusion::optimizer::AnalyzerRule;

/// The name of the columns that number the copies of a row on each side (`_l1`, `_r1`, ...
/// added: side and rewrite).
const COPY_NUMBER: &str = "__weir_copy_number";

/// The analyzer rule of the module docs. Runs first, before DataFusion's type coercion, so
/// the rewritten join's keys are coerced as the original's would have been.
#[derive(Debug, Default)]
pub struct SetOperationsAll;

impl AnalyzerRule for SetOperationsAll {
    fn name(&self) -> &str {
        "weir_set_operations_all"
    }

    fn analyze(
        &self,
        plan: LogicalPlan,
        _config: &ConfigOptions,
    ) -> datafusion::common::Result<LogicalPlan> {
        // Each rewritten join numbers its sides in columns of its own, so a set operation
        // over another one never sees two columns of one name.
        let mut rewritten = 0usize;
        Ok(plan
            .transform_up_with_subqueries(|plan| match plan {
                LogicalPlan::Join(join) if is_set_operation_all(&join) => {
                    rewritten += 1;
                    Ok(Transformed::yes(rewrite(join, rewritten)?))
                }
                other => Ok(Transformed::no(other)),
            })?
            .data)
    }
}

/// Whether `join` is DataFusion's plan of `INTERSECT ALL` (`EXCEPT ALL`): a semi (anti) join
/// without a filter, NULLs equal, on each column of the left paired with the same position on
/// the right, whose left input is not made distinct (and not numbered already).
fn is_set_operation_all(join: &Join) -> bool {
    let left = join.left.schema();
    let right = join.right.schema();
    matches!(join.join_type, JoinType::LeftSemi | JoinType::LeftAnti)
        && join.filter.is_none()
        && join.null_equality == NullEquality::NullEqualsNull
        && join.on.len() == left.fields().len()
        && join.on.len() == right.fields().len()
        && !matches!(join.left.as_ref(), LogicalPlan::Distinct(Distinct::All(_)))
        && left
            .fields()
            .last()
            .is_none_or(|f| !f.name().starts_with(COPY_NUMBER))
        && join.on.iter().enumerate().all(|(i, (l, r))| {
            matches!(l, Expr::Column(c) if c.name == *left.field(i).name())
                && matches!(r, Expr::Column(c) if c.name == *right.field(i).name())
        })
}

/// Every column of `schema`, qualified as it is there.
fn columns(schema: &DFSchema) -> Vec<Column> {
    schema.columns()
}

/// `input` with a last column numbering the copies of each distinct row (1, 2, ...).
fn numbered(input: Arc<LogicalPlan>, side: &str) -> datafusion::common::Result<LogicalPlan> {
    let partition: Vec<Expr> = columns(input.schema())
        .into_iter()
        .map(Expr::Column)
        .collect();
    let number = datafusion::functions_window::expr_fn::row_number()
        .partition_by(partition)
        .build()?
        .alias(format!("{COPY_NUMBER}_{side}"));
    LogicalPlanBuilder::from(input)
        .window(vec![number])?
        .build()
}

/// The numbered semi (anti) join of the module docs, projected to the left's columns; the
/// number columns are told apart from other rewrites' by `id`.
fn rewrite(join: Join, id: usize) -> datafusion::common::Result<LogicalPlan> {
    let kept = columns(join.left.schema());
    let left = numbered(join.left, &format!("l{id}"))?;
    let right = numbered(join.right, &format!("r{id}"))?;
    let left_keys = columns(left.schema());
    let right_keys = columns(right.schema());
    LogicalPlanBuilder::from(left)
        .join_detailed(
            right,
            join.join_type,
            (left_keys, right_keys),
            None,
            NullEquality::NullEqualsNull,
        )?
        .project(kept.into_iter().map(Expr::Column))?
        .build()
}

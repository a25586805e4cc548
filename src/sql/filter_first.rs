//! A physical optimizer rule that keeps a query's `WHERE` before its `SELECT` list.
//!
//! DataFusion's projection pushdown moves a projection below a filter whenever the projection
//! narrows the columns (`FilterExec::try_swapping_with_projection`), so `SELECT id, c / (id - 3)
//! FROM t WHERE id <> 3` computed `c / (id - 3)` for the row the filter removes and failed with
//! 22012, where PostgreSQL evaluates the select list only for rows that pass `WHERE` (its docs,
//! 7.2 "Table Expressions" and 4.2.14 "Expression Evaluation Rules"). [`FilterFirst`] runs
//! after DataFusion's rules and puts such a filter back below a projection that computes
//! anything (a projection of bare columns cannot fail and stays where it is).

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;

/// The rule (see the module docs). Cost: one walk of the physical plan.
#[derive(Debug, Default)]
pub struct FilterFirst;

/// `predicate` over a projection's output rewritten over the projection's input; `None` when
/// it reads an output that is not a bare input column.
fn through_projection(
    predicate: &Arc<dyn PhysicalExpr>,
    projection: &ProjectionExec,
) -> Option<Arc<dyn PhysicalExpr>> {
    let mut ok = true;
    let rewritten = Arc::clone(predicate)
        .transform_up(|e| {
            let Some(c) = e.downcast_ref::<Column>() else {
                return Ok(Transformed::no(e));
            };
            match projection.expr().get(c.index()) {
                Some(p) if p.expr.is::<Column>() => Ok(Transformed::yes(Arc::clone(&p.expr))),
                _ => {
                    ok = false;
                    Ok(Transformed::no(e))
                }
            }
        })
        .data()
        .ok()?;
    ok.then_some(rewritten)
}

impl PhysicalOptimizerRule for FilterFirst {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(filter) = node.downcast_ref::<FilterExec>() else {
                return Ok(Transformed::no(node));
            };
            let Some(projection) = filter.input().downcast_ref::<ProjectionExec>() else {
                return Ok(Transformed::no(node));
            };
            let computes = projection.expr().iter().any(|p| !p.expr.is::<Column>());
            if !computes || filter.projection().is_some() || filter.fetch().is_some() {
                return Ok(Transformed::no(node));
            }
            let Some(predicate) = through_projection(filter.predicate(), projection) else {
                return Ok(Transformed::no(node));
            };
            let below = FilterExec::try_new(predicate, Arc::clone(projection.input()))?
                .with_default_selectivity(filter.default_selectivity())?;
            let above = ProjectionExec::try_new(projection.expr().to_vec(), Arc::new(below))?;
            Ok(Transformed::yes(Arc::new(above) as Arc<dyn ExecutionPlan>))
        })
        .data()
    }

    fn name(&self) -> &str {
        "weir_filter_first"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

//! DataFusion's filter push-down, except through an aggregate that has a row without input.
//!
//! `SELECT count(*) FROM t` has one row even when `t` is empty, so a condition above it cannot
//! move below it: `(SELECT count(*) AS c FROM t) s WHERE false` has no rows, but
//! `SELECT count(*) FROM t WHERE false` has one (`0`). DataFusion's `push_down_filter` (55.2)
//! pushes every conjunct whose columns are all grouping columns below an `Aggregate`, and a
//! conjunct without columns passes that test vacuously. It reaches an aggregate without
//! `GROUP BY` when a join's condition is pushed into its side: `a LEFT JOIN (SELECT count(*)
//! AS c FROM b) s ON false` gave `c = 0` on every row of `a` instead of NULL, in queries and in
//! views.
//!
//! [`KeepGlobalAggregateFilters`] runs DataFusion's rule on every node but a filter (or a
//! chain of filters, which the rule merges and pushes on) directly above an aggregate without
//! grouping expressions; such a filter stays where it is. Aggregates with `GROUP BY` (one row
//! per group of input rows; `GROUPING SETS` keep the grouping columns in the condition) are
//! pushed through as before. Cost: one look at a filter's inputs per optimizer pass.

use datafusion::common::Result;
use datafusion::common::tree_node::Transformed;
use datafusion::logical_expr::LogicalPlan;
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::push_down_filter::PushDownFilter;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// The rule (see the module docs); it takes `push_down_filter`'s place in the optimizer.
#[derive(Debug, Default)]
pub struct KeepGlobalAggregateFilters {
    inner: PushDownFilter,
}

/// Whether `plan` is a filter, or a chain of them, directly above an aggregate without
/// grouping expressions.
fn above_global_aggregate(plan: &LogicalPlan) -> bool {
    let mut node = plan;
    while let LogicalPlan::Filter(f) = node {
        node = f.input.as_ref();
    }
    !std::ptr::eq(node, plan)
        && matches!(node, LogicalPlan::Aggregate(a) if a.group_expr.is_empty())
}

impl OptimizerRule for KeepGlobalAggregateFilters {
    fn name(&self) -> &str {
        // The name of the rule it stands for, so that rule lists that look for it find it.
        self.inner.name()
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        self.inner.apply_order()
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        if above_global_aggregate(&plan) {
            return Ok(Transformed::no(plan));
        }
        self.inner.rewrite(plan, config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::functions_aggregate::count::count_all;
    use datafusion::logical_expr::{LogicalPlanBuilder, col, lit, table_scan};
    use datafusion::optimizer::OptimizerContext;

    fn scan() -> LogicalPlanBuilder {
        let schema = Schema::new(vec![Field::new("k", DataType::Int32, true)]);
        table_scan(Some("t"), &schema, None).unwrap()
    }

    /// The positions of the filter and of the aggregate in the rewritten plan's text (the
    /// node above comes first).
    fn filter_and_aggregate(plan: LogicalPlan) -> (usize, usize) {
        let rule = KeepGlobalAggregateFilters::default();
        let out = rule.rewrite(plan, &OptimizerContext::new()).unwrap().data;
        let text = format!("{}", out.display_indent());
        let filter = text.find("Filter").expect("the filter is kept");
        (filter, text.find("Aggregate").unwrap())
    }

    #[test]
    fn a_condition_stays_above_an_aggregate_without_group_by() {
        let plan = scan()
            .aggregate(
                Vec::<datafusion::logical_expr::Expr>::new(),
                vec![count_all()],
            )
            .unwrap()
            .filter(lit(false))
            .unwrap()
            .build()
            .unwrap();
        let (filter, aggregate) = filter_and_aggregate(plan);
        assert!(filter < aggregate, "the filter went below the aggregate");
    }

    #[test]
    fn a_condition_on_a_grouping_column_is_still_pushed() {
        let plan = scan()
            .aggregate(vec![col("k")], vec![count_all()])
            .unwrap()
            .filter(col("k").eq(lit(1)))
            .unwrap()
            .build()
            .unwrap();
        let (filter, aggregate) = filter_and_aggregate(plan);
        assert!(aggregate < filter, "the filter stayed above the aggregate");
    }
}

//! DataFusion's rewrite of an aggregate with one `DISTINCT` argument, keeping the aggregate's
//! column types.
//!
//! `SELECT g, count(DISTINCT x), sum(x) FROM t GROUP BY g` is planned by DataFusion's
//! `single_distinct_aggregation_to_group_by` (55.2) as two aggregates: the inner one groups by
//! `(g, x)` and sums `x` per pair, the outer one groups by `g`, counts the pairs and sums the
//! inner sums. A sum of `numeric(p, s)` is `numeric(p + 10, s)`
//! ([`crate::sql::functions::int_avg::sum_precision`]), so the outer sum of the inner sums is
//! `numeric(p + 20, s)` where the plan above was typed for `numeric(p + 10, s)`: a `HAVING
//! sum(x) > 0` compared two decimal types and failed (`Invalid comparison operation:
//! Decimal128(30, 2) > Decimal128(20, 2)`). [`TypedSingleDistinct`] runs the rule and casts
//! each column whose type it changed back to the aggregate's type (the values are the same;
//! the precision is only the bound they are checked against).

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::tree_node::Transformed;
use datafusion::logical_expr::{Cast, Expr, LogicalPlan, Projection};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::single_distinct_to_groupby::SingleDistinctToGroupBy;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// The rule (see the module docs); it takes DataFusion's rule's place in the optimizer.
#[derive(Debug, Default)]
pub struct TypedSingleDistinct {
    inner: SingleDistinctToGroupBy,
}

impl OptimizerRule for TypedSingleDistinct {
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
        let before = Arc::clone(plan.schema());
        let t = self.inner.rewrite(plan, config)?;
        if !t.transformed {
            return Ok(t);
        }
        let after = Arc::clone(t.data.schema());
        let same = before.fields().len() == after.fields().len()
            && before
                .fields()
                .iter()
                .zip(after.fields())
                .all(|(b, a)| b.data_type() == a.data_type());
        if same || before.fields().len() != after.fields().len() {
            return Ok(t);
        }
        let exprs = after
            .iter()
            .zip(before.iter())
            .map(|((q, f), (bq, bf))| {
                let column = Expr::Column(datafusion::common::Column::new(q.cloned(), f.name()));
                let e = if f.data_type() == bf.data_type() {
                    column
                } else {
                    Expr::Cast(Cast::new(Box::new(column), bf.data_type().clone()))
                };
                e.alias_qualified(bq.cloned(), bf.name())
            })
            .collect();
        Ok(Transformed::yes(LogicalPlan::Projection(
            Projection::try_new(exprs, Arc::new(t.data))?,
        )))
    }
}

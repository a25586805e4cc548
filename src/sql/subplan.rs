//! Correlated scalar subqueries evaluated once per distinct outer value, for the shapes no
//! decorrelation handles.
//!
//! DataFusion turns a correlated subquery into a join when its correlation is an equality in a
//! filter, and [`crate::sql::decorrelate`] does when it is an aggregate over a filter. Other
//! shapes reach the physical planner, which cannot run them: a subquery over a recursive CTE
//! seeded by the outer row (asyncpg's type introspection), or one whose `FROM` unnests an
//! outer column (`ARRAY(SELECT 'toast.' || x FROM unnest(tc.reloptions) x)`, psql's `\d+`).
//! PostgreSQL runs such a subquery as a *SubPlan*, once per outer row (PostgreSQL docs, 14.1
//! "Using EXPLAIN"). A batch query here does the same, once per distinct value of the outer
//! columns the subquery reads, and joins the values in:
//!
//! ```text
//!  Projection: .., (subquery reading t.c) ..        Projection: .., __weir_subplanN.value ..
//!    input                                     ⇒      Left Join: t.c = __weir_subplanN.k0 (NULL = NULL)
//!                                                       input
//!                                                       Values: (c₁, value of the subquery with t.c = c₁), ..
//! ```
//!
//! The distinct values come from running `SELECT DISTINCT c FROM input` first; a subquery
//! that only appears in the `THEN` branches of searched `CASE`s is evaluated only for the
//! values whose row satisfies one of their conditions (asyncpg asks for domains' base types
//! under `CASE WHEN t.typtype = 'd'`). The work is one query per distinct value, so the
//! number of values is bounded by [`MAX_SUBPLAN_VALUES`]. Materialized views never take this
//! path: their plans are refused before (a view must be maintained by change, not re-run).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::RecordBatch;
use arrow::datatypes::{Field, Schema};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, JoinType, NullEquality, Result, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::logical_plan::{Filter, Projection, Values};
use datafusion::logical_expr::{EmptyRelation, Expr, LogicalPlan, LogicalPlanBuilder, Subquery};

/// The most distinct outer values one correlated subquery is evaluated for (one query each).
pub const MAX_SUBPLAN_VALUES: usize = 10_000;

/// Whether a physical planning error is DataFusion's refusal of a subquery or an outer
/// reference left in the plan: the case [`candidate`] and [`replace`] can mend.
pub fn is_unplannable_subquery(e: &DataFusionError) -> bool {
    let message = e.to_string();
    message.contains("does not support undecorrelated Subquery")
        || message.contains("does not support logical expression")
            && (message.contains("ScalarSubquery") || message.contains("OuterReferenceColumn"))
}

/// Whether a subquery has a shape DataFusion's decorrelation does not take: a recursive CTE,
/// a `LIMIT`, a correlated derived table or table function (`FROM unnest(t.a)`), or an outer
/// column read outside a filter. Such subqueries are evaluated first; the rest only when the
/// plan still cannot run without them (each evaluation is a query per outer value, which
/// DataFusion's join does not need).
fn beyond_decorrelation(sq: &Subquery) -> bool {
    sq.subquery
        .exists(|node| {
            Ok(match node {
                LogicalPlan::RecursiveQuery(_)
                | LogicalPlan::Limit(_)
                | LogicalPlan::Subquery(_) => true,
                LogicalPlan::Filter(_) => false,
                other => {
                    let mut outer = false;
                    other.apply_expressions(|e| {
                        outer = outer || e.contains_outer();
                        Ok(TreeNodeRecursion::Continue)
                    })?;
                    outer
                }
            })
        })
        .unwrap_or(true)
}

/// A correlated scalar subquery in a projection or filter, with what evaluating it needs.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The projection or filter that holds the subquery.
    node: LogicalPlan,
    /// The subquery.
    subquery: Subquery,
    /// The outer columns it reads (columns of the node's input), once each.
    pub outer: Vec<Column>,
    /// The plan of the distinct values of `outer` the subquery is needed for.
    pub keys: LogicalPlan,
}

impl Candidate {
    /// The subquery's plan with the outer columns bound to `row` (one value per column of
    /// [`Candidate::outer`], in order): an uncorrelated query of one column.
    ///
    /// # Errors
    /// A DataFusion error when the plan cannot be rebuilt.
    pub fn bound(&self, row: &[ScalarValue]) -> Result<LogicalPlan> {
        let bind = |e: Expr| -> Result<Transformed<Expr>> {
            e.transform_up(|e| match e {
                Expr::OuterReferenceColumn(_, ref c) => {
                    match self.outer.iter().position(|o| o == c) {
                        Some(i) => Ok(Transformed::yes(Expr::Literal(row[i].clone(), None))),
                        None => Ok(Transformed::no(e)),
                    }
                }
                other => Ok(Transformed::no(other)),
            })
        };
        let bound = self
            .subquery
            .subquery
            .as_ref()
            .clone()
            .transform_up_with_subqueries(|node| {
                let node = match node {
                    // A nested subquery no longer reads the values bound here.
                    LogicalPlan::Subquery(mut s) => {
                        s.outer_ref_columns.retain(|e| {
                            !matches!(e, Expr::OuterReferenceColumn(_, c) if self.outer.contains(c))
                        });
                        LogicalPlan::Subquery(s)
                    }
                    other => other,
                };
                let node = node.map_expressions(bind)?;
                // A derived table (`FROM unnest(t.a) x`) that read only those values is now
                // an uncorrelated plan, which the physical planner takes without its wrapper.
                Ok(match node.data {
                    LogicalPlan::Subquery(s) if s.subquery.all_out_ref_exprs().is_empty() => {
                        Transformed::yes(s.subquery.as_ref().clone())
                    }
                    other => Transformed::new_transformed(other, node.transformed),
                })
            })?
            .data;
        Ok(bound)
    }

    /// The node with the subquery replaced by its values: `input LEFT JOIN values`, keyed on
    /// the outer columns with NULL matching NULL, and the node over it keeping its output
    /// columns and names. `rows` are the distinct outer values, `values` the subquery's value
    /// for each. The relation of values is named `__weir_subplan<n>`, `n` unique in the
    /// process.
    ///
    /// # Errors
    /// A DataFusion error when a plan cannot be built.
    pub fn replace(
        &self,
        plan: LogicalPlan,
        rows: Vec<Vec<ScalarValue>>,
        values: Vec<ScalarValue>,
    ) -> Result<LogicalPlan> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let alias = format!("__weir_subplan{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let input = self.node.inputs()[0].clone();
        let mut fields: Vec<Field> = self
            .outer
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (_, f) = input.schema().qualified_field_from_column(c)?;
                Ok(Field::new(format!("k{i}"), f.data_type().clone(), true)
                    .with_metadata(f.metadata().clone()))
            })
            .collect::<Result<_>>()?;
        // The value keeps the subquery's column metadata (an `oid` column stays one).
        let value = self.subquery.subquery.schema().field(0);
        fields.push(
            Field::new("value", value.data_type().clone(), true)
                .with_metadata(value.metadata().clone()),
        );
        let schema = Arc::new(DFSchema::try_from_qualified_schema(
            alias.as_str(),
            &Schema::new(fields),
        )?);
        let table = if rows.is_empty() {
            LogicalPlan::EmptyRelation(EmptyRelation {
                produce_one_row: false,
                schema,
            })
        } else {
            LogicalPlan::Values(Values {
                schema,
                values: rows
                    .into_iter()
                    .zip(values)
                    .map(|(row, value)| {
                        row.into_iter()
                            .chain(std::iter::once(value))
                            .map(|v| Expr::Literal(v, None))
                            .collect()
                    })
                    .collect(),
            })
        };
        let keys: Vec<Column> = (0..self.outer.len())
            .map(|i| Column::new(Some(alias.as_str()), format!("k{i}")))
            .collect();
        let joined = LogicalPlanBuilder::from(input.clone())
            .join_detailed(
                table,
                JoinType::Left,
                (self.outer.clone(), keys),
                None,
                NullEquality::NullEqualsNull,
            )?
            .build()?;
        let joined = Arc::new(joined);
        let value = Expr::Column(Column::new(Some(alias.as_str()), "value"));
        let target = Expr::ScalarSubquery(self.subquery.clone());
        let swap = |e: Expr| -> Result<Expr> {
            Ok(e.transform_up(|e| {
                if e == target {
                    Ok(Transformed::yes(value.clone()))
                } else {
                    Ok(Transformed::no(e))
                }
            })?
            .data)
        };
        let replacement = match &self.node {
            LogicalPlan::Projection(p) => {
                let preserver = NamePreserver::new_for_projection();
                let exprs = p
                    .expr
                    .iter()
                    .map(|e| {
                        let saved = preserver.save(e);
                        Ok(saved.restore(swap(e.clone())?))
                    })
                    .collect::<Result<Vec<_>>>()?;
                LogicalPlan::Projection(Projection::try_new(exprs, joined)?)
            }
            LogicalPlan::Filter(f) => {
                let filtered =
                    LogicalPlan::Filter(Filter::try_new(swap(f.predicate.clone())?, joined)?);
                // The filter's output keeps the columns it had.
                let columns = input.schema().columns().into_iter().map(Expr::Column);
                LogicalPlanBuilder::from(filtered)
                    .project(columns)?
                    .build()?
            }
            other => other.clone(),
        };
        // Every copy of the node (a derived table written twice reads the same values).
        Ok(plan
            .transform_up(|p| {
                if p == self.node {
                    Ok(Transformed::yes(replacement.clone()))
                } else {
                    Ok(Transformed::no(p))
                }
            })?
            .data)
    }
}

/// The outer columns a subquery reads, once each, in order of appearance: every outer
/// reference in its plan and the plans nested in it (`Subquery::outer_ref_columns` misses
/// those of a correlated derived table), that `input` provides.
fn outer_columns(sq: &Subquery, input: &LogicalPlan) -> Vec<Column> {
    let mut out: Vec<Column> = Vec::new();
    let _ = sq.subquery.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                if let Expr::OuterReferenceColumn(_, c) = e
                    && !out.contains(c)
                    && input.schema().has_column(c)
                {
                    out.push(c.clone());
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    out
}

/// Where a subquery appears in an expression: `Some(condition)` under the `THEN` of a
/// searched `CASE` branch (the conjunction of the enclosing branches' conditions), `None`
/// elsewhere.
fn guards(e: &Expr, target: &Expr, guard: Option<&Expr>, out: &mut Vec<Option<Expr>>) {
    if e == target {
        out.push(guard.cloned());
        return;
    }
    if let Expr::Case(case) = e
        && case.expr.is_none()
    {
        for (when, then) in &case.when_then_expr {
            guards(when, target, guard, out);
            let plain = !when.exists(|w| Ok(is_subquery(w))).unwrap_or(true);
            let inner = match (plain, guard) {
                (false, _) => None,
                (true, None) => Some(when.as_ref().clone()),
                (true, Some(g)) => Some(g.clone().and(when.as_ref().clone())),
            };
            guards(then, target, inner.as_ref(), out);
        }
        if let Some(other) = &case.else_expr {
            guards(other, target, guard, out);
        }
        return;
    }
    let _ = e.apply_children(|c| {
        guards(c, target, guard, out);
        Ok(TreeNodeRecursion::Continue)
    });
}

fn is_subquery(e: &Expr) -> bool {
    matches!(
        e,
        Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_) | Expr::SetComparison(_)
    )
}

/// The first correlated scalar subquery of `plan` (outside other subqueries) held by a
/// projection or filter whose input provides outer columns it reads, with the plan of
/// the outer values to evaluate it for; with `hard_only`, the first of a shape DataFusion
/// cannot decorrelate (see [`beyond_decorrelation`]).
///
/// # Errors
/// A DataFusion error when the plan of outer values cannot be built.
pub fn candidate(plan: &LogicalPlan, hard_only: bool) -> Result<Option<Candidate>> {
    let mut found = None;
    plan.apply(|node| {
        let exprs: Vec<&Expr> = match node {
            LogicalPlan::Projection(p) => p.expr.iter().collect(),
            LogicalPlan::Filter(f) => vec![&f.predicate],
            _ => return Ok(TreeNodeRecursion::Continue),
        };
        let input = node.inputs()[0];
        for e in &exprs {
            e.apply(|e| {
                if let Expr::ScalarSubquery(sq) = e {
                    let outer = outer_columns(sq, input);
                    if !outer.is_empty() && (!hard_only || beyond_decorrelation(sq)) {
                        found = Some((node.clone(), sq.clone(), outer));
                        return Ok(TreeNodeRecursion::Stop);
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })?;
            if found.is_some() {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    let Some((node, subquery, outer)) = found else {
        return Ok(None);
    };
    let target = Expr::ScalarSubquery(subquery.clone());
    let mut places = Vec::new();
    node.apply_expressions(|e| {
        guards(e, &target, None, &mut places);
        Ok(TreeNodeRecursion::Continue)
    })?;
    let input = node.inputs()[0].clone();
    let mut keys = LogicalPlanBuilder::from(input);
    if !places.is_empty() && places.iter().all(Option::is_some) {
        let any = places
            .into_iter()
            .flatten()
            .reduce(Expr::or)
            .expect("not empty");
        keys = keys.filter(any)?;
    }
    let keys = keys
        .project(outer.iter().cloned().map(Expr::Column))?
        .distinct()?
        .build()?;
    Ok(Some(Candidate {
        node,
        subquery,
        outer,
        keys,
    }))
}

/// The value of a scalar subquery from its rows: NULL for none, the value for one.
///
/// # Errors
/// `Ok(None)` for more than one row (PostgreSQL's 21000, raised by the caller); a DataFusion
/// error when a value cannot be read.
pub fn single_value(batches: &[RecordBatch], empty: &Field) -> Result<Option<ScalarValue>> {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    match rows {
        0 => Ok(Some(ScalarValue::try_from(empty.data_type())?)),
        1 => {
            let b = batches.iter().find(|b| b.num_rows() == 1).expect("one row");
            Ok(Some(ScalarValue::try_from_array(b.column(0), 0)?))
        }
        _ => Ok(None),
    }
}

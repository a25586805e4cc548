//! A view's streaming plan as data: the operator tree the streaming planner
//! ([`crate::sql::stream_plan`]) produces from a query, and the building of fresh operators
//! from it. A job keeps its plan to build its operators again (at a restart, or to load a
//! checkpoint into them).

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::window::WindowExpr;

use crate::common::RelationId;
use crate::error::Result;
use crate::stream::Operator;
use crate::stream::ops::dynamic_filter::{Comparison, DynamicFilter};
use crate::stream::ops::exchange::{Exchange, ExchangeInput};
use crate::stream::ops::filter::Filter;
use crate::stream::ops::hash_agg::{AggCall, HashAgg};
use crate::stream::ops::hash_join::{HashJoin, JoinBound, JoinKind, JoinSide};
use crate::stream::ops::over_window::{OverWindow, WindowOrder, WindowOutput};
use crate::stream::ops::project::Project;
use crate::stream::ops::scan::Scan;
use crate::stream::ops::semi_join::{SemiJoin, SemiKind};
use crate::stream::ops::temporal_filter::{TemporalBound, TemporalFilter};
use crate::stream::ops::union::Union;
use crate::stream::ops::values::Values;

/// A view's streaming plan.
#[derive(Clone)]
pub struct StreamPlan {
    /// The operator tree.
    pub root: StreamNode,
    /// The relations (tables and views) the tree reads.
    pub sources: BTreeSet<RelationId>,
    /// The output columns that identify a row (the group columns of an aggregate, carried
    /// through projections and filters); empty when none is known (the whole row is the key).
    /// The view's state table orders its rows by them first.
    pub stream_key: Vec<usize>,
    /// The output schema, every field nullable.
    pub schema: SchemaRef,
    /// Whether the output changes as time passes (a temporal filter): the job then runs
    /// every epoch.
    pub time_driven: bool,
    /// Whether the output only ever grows (no retractions): append-only inputs through
    /// filters, projections and unions, or an aggregate that emits on window close.
    pub append_only: bool,
    /// The output columns that carry a watermark (see [`crate::stream::watermark`]).
    pub watermark_columns: Vec<usize>,
}

/// One operator of a [`StreamPlan`] and its inputs; each variant holds what its operator is
/// built from (see the operator's documentation in [`crate::stream::ops`]). Expressions are
/// DataFusion physical expressions over the input's schema.
#[derive(Clone)]
pub enum StreamNode {
    /// Reads one relation's changes ([`Scan`]).
    Scan {
        /// The relation read.
        relation: RelationId,
        /// Its name, for EXPLAIN.
        name: String,
        /// Column indices kept, in output order; `None` keeps all.
        projection: Option<Vec<usize>>,
        /// Output schema.
        schema: SchemaRef,
        /// Whether the relation only ever grows (an `APPEND ONLY` table, a connector table,
        /// a view that emits on window close).
        append_only: bool,
        /// The relation's columns (indices into its full schema) that carry a watermark.
        watermark_columns: Vec<usize>,
    },
    /// Keeps the changes whose rows satisfy a predicate ([`Filter`]).
    Filter {
        /// The input.
        input: Box<StreamNode>,
        /// The predicate.
        predicate: Arc<dyn PhysicalExpr>,
        /// The predicate as SQL, for EXPLAIN.
        display: String,
    },
    /// One expression per output column ([`Project`]).
    Project {
        /// The input.
        input: Box<StreamNode>,
        /// One expression per output column.
        exprs: Vec<Arc<dyn PhysicalExpr>>,
        /// Output schema.
        schema: SchemaRef,
    },
    /// A grouped aggregate, or DISTINCT without calls ([`HashAgg`]).
    HashAgg {
        /// The input.
        input: Box<StreamNode>,
        /// The group expressions.
        group_exprs: Vec<Arc<dyn PhysicalExpr>>,
        /// Their types.
        group_types: Vec<DataType>,
        /// The aggregate calls.
        aggs: Vec<AggCall>,
        /// Output schema: the group columns, then one column per call.
        schema: SchemaRef,
        /// `EMIT ON WINDOW CLOSE` on the first group column ([`HashAgg::emit_on_window_close`]).
        emit_on_window_close: bool,
    },
    /// An equi-join, inner or outer ([`HashJoin`]).
    HashJoin {
        /// The left input.
        left: Box<StreamNode>,
        /// The right input.
        right: Box<StreamNode>,
        /// Key expressions over the left input.
        left_keys: Vec<Arc<dyn PhysicalExpr>>,
        /// Key expressions over the right input.
        right_keys: Vec<Arc<dyn PhysicalExpr>>,
        /// The keys' common types.
        key_types: Vec<DataType>,
        /// Inner, left, right or full.
        kind: JoinKind,
        /// Output schema: the left columns, then the right ones.
        schema: SchemaRef,
        /// Whether NULL keys match each other (`IS NOT DISTINCT FROM`).
        nulls_match: bool,
        /// Bounds between the sides' watermarked columns, for state cleaning and output
        /// watermarks of an inner join (see [`JoinBound`]).
        bounds: Vec<JoinBound>,
        /// An outer join's condition beyond the key, over the output schema
        /// ([`HashJoin::with_condition`]); an inner join's is a filter above it.
        condition: Option<Arc<dyn PhysicalExpr>>,
        /// A processing-time temporal join: the right side is looked up by the left's rows
        /// and its own changes emit nothing ([`HashJoin::with_lookup`]).
        lookup: bool,
    },
    /// A semi or anti join: `IN`, `EXISTS` and their negations ([`SemiJoin`]).
    SemiJoin {
        /// The left input (its rows are the output).
        left: Box<StreamNode>,
        /// The right input.
        right: Box<StreamNode>,
        /// Key expressions over the left input.
        left_keys: Vec<Arc<dyn PhysicalExpr>>,
        /// Key expressions over the right input.
        right_keys: Vec<Arc<dyn PhysicalExpr>>,
        /// The keys' common types.
        key_types: Vec<DataType>,
        /// Semi, anti or NULL-aware anti (`NOT IN`).
        kind: SemiKind,
        /// Whether NULL keys match each other.
        nulls_match: bool,
    },
    /// Window functions or a Top-N per partition ([`OverWindow`]).
    OverWindow {
        /// The input.
        input: Box<StreamNode>,
        /// The `PARTITION BY` expressions (none: one partition).
        partition: Vec<Arc<dyn PhysicalExpr>>,
        /// Their types.
        partition_types: Vec<DataType>,
        /// The `ORDER BY` keys.
        order: Vec<WindowOrder>,
        /// The window functions, each over `partition` and `order` (none for a Top-N slice).
        window: Vec<Arc<dyn WindowExpr>>,
        /// Which rows are emitted.
        output: WindowOutput,
        /// Output schema: the input columns, then one per window function.
        schema: SchemaRef,
    },
    /// A filter comparing the row's time with `now()` ([`TemporalFilter`]).
    TemporalFilter {
        /// The input.
        input: Box<StreamNode>,
        /// The compared side, over the input schema.
        time: Arc<dyn PhysicalExpr>,
        /// Its type.
        time_type: DataType,
        /// The comparison over the input schema plus a last column `__now`.
        predicate: Arc<dyn PhysicalExpr>,
        /// Whether rows leave (lower bound) or enter (upper bound) as time passes.
        bound: TemporalBound,
        /// The conjunct as SQL, for EXPLAIN.
        display: String,
    },
    /// The left rows whose value compares with the right side's single row
    /// ([`DynamicFilter`]).
    DynamicFilter {
        /// The filtered rows.
        left: Box<StreamNode>,
        /// At most one row (an aggregate without `GROUP BY`).
        right: Box<StreamNode>,
        /// The compared value, over the left schema.
        value: Arc<dyn PhysicalExpr>,
        /// The threshold, over the right schema.
        threshold: Arc<dyn PhysicalExpr>,
        /// Their type.
        value_type: DataType,
        /// `value <comparison> threshold`.
        comparison: Comparison,
    },
    /// `UNION ALL` of inputs of one schema ([`Union`]).
    Union {
        /// The inputs.
        inputs: Vec<StreamNode>,
        /// Output schema.
        schema: SchemaRef,
    },
    /// Constant rows, emitted in the first epoch ([`Values`]).
    Values {
        /// The rows (every field nullable).
        rows: RecordBatch,
        /// What they come from, for EXPLAIN.
        display: String,
    },
}

impl StreamNode {
    /// Whether the node's output only ever grows (no retractions): a scan of an append-only
    /// relation through filters, projections and unions, or an aggregate emitting on window
    /// close over such an input.
    pub fn append_only(&self) -> bool {
        match self {
            StreamNode::Scan { append_only, .. } => *append_only,
            StreamNode::Filter { input, .. } | StreamNode::Project { input, .. } => {
                input.append_only()
            }
            StreamNode::HashAgg {
                input,
                emit_on_window_close,
                ..
            } => *emit_on_window_close && input.append_only(),
            StreamNode::Union { inputs, .. } => inputs.iter().all(StreamNode::append_only),
            StreamNode::Values { .. } => true,
            // A temporal join emits each left row's matches (or its padding) once and never
            // takes them back.
            StreamNode::HashJoin {
                left,
                right,
                kind,
                lookup,
                ..
            } => {
                (*kind == JoinKind::Inner || *lookup && *kind == JoinKind::Left)
                    && left.append_only()
                    && (*lookup || right.append_only())
            }
            StreamNode::OverWindow {
                input,
                output: WindowOutput::Sessions { on_close: true, .. },
                ..
            } => input.append_only(),
            _ => false,
        }
    }

    /// The relations read by the table sides of processing-time temporal joins
    /// ([`HashJoin::with_lookup`]): a backfill feeds them before the rest, so that the
    /// stream's rows already stored look up the table's rows already stored.
    pub fn lookup_relations(&self) -> BTreeSet<RelationId> {
        fn walk(node: &StreamNode, under_lookup: bool, out: &mut BTreeSet<RelationId>) {
            match node {
                StreamNode::Scan { relation, .. } => {
                    if under_lookup {
                        out.insert(*relation);
                    }
                }
                StreamNode::Values { .. } => {}
                StreamNode::Filter { input, .. }
                | StreamNode::TemporalFilter { input, .. }
                | StreamNode::Project { input, .. }
                | StreamNode::HashAgg { input, .. }
                | StreamNode::OverWindow { input, .. } => walk(input, under_lookup, out),
                StreamNode::HashJoin {
                    left,
                    right,
                    lookup,
                    ..
                } => {
                    walk(left, under_lookup, out);
                    walk(right, under_lookup || *lookup, out);
                }
                StreamNode::SemiJoin { left, right, .. }
                | StreamNode::DynamicFilter { left, right, .. } => {
                    walk(left, under_lookup, out);
                    walk(right, under_lookup, out);
                }
                StreamNode::Union { inputs, .. } => {
                    for i in inputs {
                        walk(i, under_lookup, out);
                    }
                }
            }
        }
        let mut out = BTreeSet::new();
        walk(self, false, &mut out);
        out
    }

    /// The output schema (every field nullable).
    pub fn schema(&self) -> SchemaRef {
        match self {
            StreamNode::Scan { schema, .. }
            | StreamNode::Project { schema, .. }
            | StreamNode::HashAgg { schema, .. }
            | StreamNode::HashJoin { schema, .. }
            | StreamNode::OverWindow { schema, .. }
            | StreamNode::Union { schema, .. } => Arc::clone(schema),
            StreamNode::Filter { input, .. } | StreamNode::TemporalFilter { input, .. } => {
                input.schema()
            }
            StreamNode::SemiJoin { left, .. } | StreamNode::DynamicFilter { left, .. } => {
                left.schema()
            }
            StreamNode::Values { rows, .. } => rows.schema(),
        }
    }

    /// The number of output columns.
    pub fn width(&self) -> usize {
        self.schema().fields().len()
    }

    /// The output columns that carry a watermark: as the operators' `watermarks` compute
    /// them (see [`crate::stream::watermark`]), decided from the plan alone.
    pub fn watermark_columns(&self) -> Vec<usize> {
        use crate::stream::watermark::watermarked_exprs;
        match self {
            StreamNode::Scan {
                projection,
                watermark_columns,
                ..
            } => match projection {
                None => watermark_columns.clone(),
                Some(p) => p
                    .iter()
                    .enumerate()
                    .filter(|(_, i)| watermark_columns.contains(i))
                    .map(|(o, _)| o)
                    .collect(),
            },
            // A temporal filter has none: the rows it lets in or out as time passes arrived
            // earlier, below its input's later watermarks.
            StreamNode::Filter { input, .. } => input.watermark_columns(),
            StreamNode::Project { input, exprs, .. } => {
                watermarked_exprs(exprs, &input.watermark_columns())
            }
            StreamNode::HashAgg {
                input, group_exprs, ..
            } => watermarked_exprs(group_exprs, &input.watermark_columns()),
            StreamNode::Union { inputs, .. } => {
                let mut all = inputs.iter().map(StreamNode::watermark_columns);
                let first = all.next().unwrap_or_default();
                all.fold(first, |acc, w| {
                    acc.into_iter().filter(|c| w.contains(c)).collect()
                })
            }
            StreamNode::HashJoin {
                left,
                right,
                kind: JoinKind::Inner,
                bounds,
                ..
            } => {
                let (lw, rw) = (left.watermark_columns(), right.watermark_columns());
                let width = left.width();
                let mut out: Vec<usize> = bounds
                    .iter()
                    .filter_map(|b| {
                        let (own, other) = match b.side {
                            JoinSide::Left => (&lw, &rw),
                            JoinSide::Right => (&rw, &lw),
                        };
                        let other_column = crate::stream::watermark::monotone_column(&b.other)?;
                        (own.contains(&b.column) && other.contains(&other_column))
                            .then_some(b.column + if b.side == JoinSide::Right { width } else { 0 })
                    })
                    .collect();
                out.sort_unstable();
                out.dedup();
                out
            }
            // Sessions emitted on close: the session end (see `OverWindow::watermarks`).
            StreamNode::OverWindow {
                output:
                    WindowOutput::Sessions {
                        end: Some(end),
                        on_close: true,
                        ..
                    },
                ..
            } => vec![*end],
            _ => Vec::new(),
        }
    }

    /// Builds fresh operators for this node and its inputs, their state tables empty and
    /// on the heap (a job then moves them into its state backend), every operator one
    /// instance.
    ///
    /// # Errors
    /// Errors of the operators' constructors (a key type Arrow cannot encode in its row
    /// format).
    pub fn build(&self) -> Result<Box<dyn Operator>> {
        self.build_with(&Build::serial())
    }

    /// [`StreamNode::build`] with `how.parallelism` instances of every keyed operator that
    /// can be split by key (a grouped aggregate, an equi-join, a semi or anti join other than
    /// `NOT IN`, an OVER window with `PARTITION BY`), each behind an [`Exchange`].
    ///
    /// # Errors
    /// As [`StreamNode::build`].
    pub fn build_with(&self, how: &Build) -> Result<Box<dyn Operator>> {
        Ok(match self {
            StreamNode::Scan {
                relation,
                name,
                projection,
                schema,
                ..
            } => Box::new(Scan {
                relation: *relation,
                name: name.clone(),
                projection: projection.clone(),
                schema: schema.clone(),
            }),
            StreamNode::Filter {
                input,
                predicate,
                display,
            } => Box::new(Filter {
                input: input.build_with(how)?,
                predicate: Arc::clone(predicate),
                display: display.clone(),
            }),
            StreamNode::Project {
                input,
                exprs,
                schema,
            } => Box::new(Project {
                input: input.build_with(how)?,
                exprs: exprs.clone(),
                schema: schema.clone(),
            }),
            StreamNode::TemporalFilter {
                input,
                time,
                time_type,
                predicate,
                bound,
                display,
            } => Box::new(TemporalFilter::try_new(
                input.build_with(how)?,
                Arc::clone(time),
                time_type.clone(),
                Arc::clone(predicate),
                *bound,
                display.clone(),
            )?),
            StreamNode::DynamicFilter {
                left,
                right,
                value,
                threshold,
                value_type,
                comparison,
            } => Box::new(DynamicFilter::try_new(
                left.build_with(how)?,
                right.build_with(how)?,
                Arc::clone(value),
                Arc::clone(threshold),
                value_type.clone(),
                *comparison,
            )?),
            StreamNode::Union { inputs, schema } => Box::new(Union {
                inputs: inputs
                    .iter()
                    .map(|i| i.build_with(how))
                    .collect::<Result<Vec<_>>>()?,
                schema: schema.clone(),
            }),
            StreamNode::Values { rows, display } => Box::new(Values {
                rows: rows.clone(),
                emitted: false,
                display: display.clone(),
            }),
            StreamNode::HashAgg { .. }
            | StreamNode::HashJoin { .. }
            | StreamNode::SemiJoin { .. }
            | StreamNode::OverWindow { .. } => {
                let inputs = self
                    .children()
                    .into_iter()
                    .map(|c| c.build_with(how))
                    .collect::<Result<Vec<_>>>()?;
                match self.keys().filter(|_| how.parallelism > 1) {
                    None => self.build_keyed(inputs)?,
                    Some(keys) => Box::new(Exchange::try_new(
                        inputs
                            .into_iter()
                            .zip(keys)
                            .map(|(upstream, (edge, keys, key_types))| ExchangeInput {
                                upstream,
                                edge,
                                keys,
                                key_types,
                            })
                            .collect(),
                        how.parallelism,
                        Arc::clone(&how.alignment_ns),
                        |feeds| self.build_keyed(feeds),
                    )?),
                }
            }
        })
    }

    /// The inputs of an aggregate, join or OVER window, in order.
    fn children(&self) -> Vec<&StreamNode> {
        match self {
            StreamNode::HashAgg { input, .. } | StreamNode::OverWindow { input, .. } => {
                vec![input]
            }
            StreamNode::HashJoin { left, right, .. } | StreamNode::SemiJoin { left, right, .. } => {
                vec![left, right]
            }
            _ => Vec::new(),
        }
    }

    /// For an operator that can be split by key: per input (in [`StreamNode::children`]'s
    /// order) its edge name, key expressions and key types. `None` for the others: stateless
    /// operators, a global aggregate, an OVER window without `PARTITION BY` (one partition),
    /// a join without an equi-key, and `NOT IN`, whose answer depends on whether the right
    /// side holds a NULL anywhere.
    #[allow(clippy::type_complexity)]
    fn keys(&self) -> Option<Vec<(&'static str, Vec<Arc<dyn PhysicalExpr>>, Vec<DataType>)>> {
        match self {
            StreamNode::HashAgg {
                group_exprs,
                group_types,
                ..
            } if !group_exprs.is_empty() => {
                Some(vec![("input", group_exprs.clone(), group_types.clone())])
            }
            StreamNode::OverWindow {
                partition,
                partition_types,
                ..
            } if !partition.is_empty() => {
                Some(vec![("input", partition.clone(), partition_types.clone())])
            }
            StreamNode::HashJoin {
                left_keys,
                right_keys,
                key_types,
                ..
            } if !key_types.is_empty() => Some(vec![
                ("left", left_keys.clone(), key_types.clone()),
                ("right", right_keys.clone(), key_types.clone()),
            ]),
            StreamNode::SemiJoin {
                left_keys,
                right_keys,
                key_types,
                kind,
                ..
            } if !key_types.is_empty() && *kind != SemiKind::NullAwareAnti => Some(vec![
                ("left", left_keys.clone(), key_types.clone()),
                ("right", right_keys.clone(), key_types.clone()),
            ]),
            _ => None,
        }
    }

    /// Builds this aggregate, join or OVER window over the given input operators (its
    /// children's, or an exchange's feeds).
    fn build_keyed(&self, inputs: Vec<Box<dyn Operator>>) -> Result<Box<dyn Operator>> {
        let mut inputs = inputs.into_iter();
        let mut next = || {
            inputs.next().ok_or_else(|| {
                crate::error::Error::Internal("operator built without its input".into())
            })
        };
        Ok(match self {
            StreamNode::HashAgg {
                group_exprs,
                group_types,
                aggs,
                schema,
                emit_on_window_close,
                ..
            } => {
                let agg = HashAgg::try_new(
                    next()?,
                    group_exprs.clone(),
                    group_types.clone(),
                    aggs.clone(),
                    schema.clone(),
                )?;
                Box::new(if *emit_on_window_close {
                    agg.emit_on_window_close()?
                } else {
                    agg
                })
            }
            StreamNode::HashJoin {
                left_keys,
                right_keys,
                key_types,
                kind,
                schema,
                nulls_match,
                bounds,
                condition,
                lookup,
                ..
            } => Box::new(
                HashJoin::try_new(
                    next()?,
                    next()?,
                    left_keys.clone(),
                    right_keys.clone(),
                    key_types.clone(),
                    *kind,
                    schema.clone(),
                )?
                .with_nulls_matching(*nulls_match)
                .with_condition(condition.clone())
                .with_bounds(bounds.clone())?
                .with_lookup(*lookup),
            ),
            StreamNode::SemiJoin {
                left_keys,
                right_keys,
                key_types,
                kind,
                nulls_match,
                ..
            } => Box::new(
                SemiJoin::try_new(
                    next()?,
                    next()?,
                    left_keys.clone(),
                    right_keys.clone(),
                    key_types.clone(),
                    *kind,
                )?
                .with_nulls_matching(*nulls_match),
            ),
            StreamNode::OverWindow {
                partition,
                partition_types,
                order,
                window,
                output,
                schema,
                ..
            } => Box::new(OverWindow::try_new(
                next()?,
                partition.clone(),
                partition_types.clone(),
                order.clone(),
                window.clone(),
                *output,
                schema.clone(),
            )?),
            _ => {
                return Err(crate::error::Error::Internal(
                    "build_keyed of an operator without a key".into(),
                ));
            }
        })
    }
}

/// How a plan's operators are built: how many parallel instances a keyed operator gets, and
/// the job's alignment clock its exchanges add to.
#[derive(Clone, Default)]
pub struct Build {
    /// Instances per keyed operator (`streaming.parallelism`); 1 builds no exchange.
    pub parallelism: usize,
    /// The job's barrier alignment time, in ns: the exchanges add the time between their
    /// first and last instance finishing an epoch batch.
    pub alignment_ns: Arc<std::sync::atomic::AtomicU64>,
}

impl Build {
    /// `parallelism` instances of each keyed operator (at least 1), a fresh alignment clock.
    pub fn new(parallelism: usize) -> Self {
        Build {
            parallelism: parallelism.max(1),
            alignment_ns: Arc::default(),
        }
    }

    /// One instance of every operator.
    pub fn serial() -> Self {
        Self::new(1)
    }
}

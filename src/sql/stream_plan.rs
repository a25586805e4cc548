//! The streaming planner: translates the optimized `LogicalPlan` of a view's query into a
//! [`StreamPlan`], the operator tree the runtime builds (see [`crate::stream::plan`]).
//!
//! Every node is translated or refused with SQLSTATE `0A000` naming the construct: a view is
//! maintained incrementally or not created, never answered wrongly.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{DFSchema, JoinType, ScalarValue};
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{
    Distinct, Expr, ExprSchemable, FetchType, LogicalPlan, SkipType, SortExpr,
};
use datafusion::physical_expr::{PhysicalExpr, create_physical_expr};

use crate::common::RelationId;
use crate::common::schema::nullable_schema;
use crate::error::{Error, Result};
use crate::sql::functions::session;
use crate::sql::provider::RelationProvider;
use crate::stream::ops::hash_agg::{AggCall, AggKind};
use crate::stream::ops::hash_join::{JoinBound, JoinKind, JoinSide};
use crate::stream::ops::over_window::{WindowOrder, WindowOutput};
use crate::stream::ops::semi_join::SemiKind;
use crate::stream::ops::temporal_filter::TemporalBound;
use crate::stream::plan::{StreamNode, StreamPlan};

/// Whether `plan` is the table side of a processing-time temporal join: a filter on
/// [`crate::sql::lookup_join::LOOKUP_SIDE`] under aliases and projections.
fn is_lookup_side(plan: &LogicalPlan) -> bool {
    let marks = |e: &Expr| crate::sql::temporal::calls(e, crate::sql::lookup_join::LOOKUP_SIDE);
    match plan {
        LogicalPlan::SubqueryAlias(a) => is_lookup_side(&a.input),
        LogicalPlan::Projection(p) => is_lookup_side(&p.input),
        LogicalPlan::Filter(f) => marks(&f.predicate) || is_lookup_side(&f.input),
        LogicalPlan::TableScan(t) => t.filters.iter().any(marks),
        _ => false,
    }
}

/// Whether `plan` yields at most one row whatever its inputs hold: an aggregate without
/// `GROUP BY` (exactly one row), a constant relation of at most one row, or such a plan under
/// projections, filters, aliases and sorts. An `array_agg` without `GROUP BY` (how `IN
/// (subquery)` under `OR` and a subquery without an aggregate are rewritten) does not count:
/// its one row holds every row of its input, so each change would cost them all.
fn at_most_one_row(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Aggregate(a) => {
            a.group_expr.is_empty()
                && !a.aggr_expr.iter().any(|e| {
                    let e = match e {
                        Expr::Alias(a) => a.expr.as_ref(),
                        e => e,
                    };
                    matches!(e, Expr::AggregateFunction(f) if f.func.name() == "array_agg")
                })
        }
        LogicalPlan::Values(v) => v.values.len() <= 1,
        LogicalPlan::EmptyRelation(_) => true,
        LogicalPlan::Projection(p) => at_most_one_row(&p.input),
        LogicalPlan::Filter(f) => at_most_one_row(&f.input),
        LogicalPlan::SubqueryAlias(a) => at_most_one_row(&a.input),
        LogicalPlan::Sort(s) => at_most_one_row(&s.input),
        _ => false,
    }
}

/// Whether `plan` is the one row of an `array_agg` without `GROUP BY` (under projections,
/// filters, aliases and sorts): how `IN (subquery)` under `OR` or as a value, and `op ANY` /
/// `op ALL (subquery)`, are rewritten (see [`at_most_one_row`]).
fn gathers_rows(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Aggregate(a) => {
            a.group_expr.is_empty()
                && a.aggr_expr.iter().any(|e| {
                    let e = match e {
                        Expr::Alias(a) => a.expr.as_ref(),
                        e => e,
                    };
                    matches!(e, Expr::AggregateFunction(f) if f.func.name() == "array_agg")
                })
        }
        LogicalPlan::Projection(p) => gathers_rows(&p.input),
        LogicalPlan::Filter(f) => gathers_rows(&f.input),
        LogicalPlan::SubqueryAlias(a) => gathers_rows(&a.input),
        LogicalPlan::Sort(s) => gathers_rows(&s.input),
        _ => false,
    }
}

/// A projection of a filtered join without an equi-key whose one side holds at most one row,
/// where one conjunct compares an expression of the other side with one of the single row
/// and nothing above the join reads the single row's columns otherwise (`SELECT id FROM t
/// WHERE x > (SELECT sum(y) FROM s)`): a [`StreamNode::DynamicFilter`], whose cost follows
/// the rows the threshold's move flips instead of every row. `None` when the plan has
/// another shape (it is then planned as a cross join and a filter).
fn dynamic_filter(
    p: &datafusion::logical_expr::Projection,
    sources: &mut BTreeSet<RelationId>,
) -> Result<Option<StreamNode>> {
    use crate::stream::ops::dynamic_filter::Comparison;
    use datafusion::logical_expr::utils::split_conjunction;
    use datafusion::logical_expr::{BinaryExpr, Operator as Op};
    let (filter, j) = match p.input.as_ref() {
        LogicalPlan::Filter(f) => match f.input.as_ref() {
            LogicalPlan::Join(j) => (Some(&f.predicate), j),
            _ => return Ok(None),
        },
        LogicalPlan::Join(j) => (None, j),
        _ => return Ok(None),
    };
    if !j.on.is_empty() {
        return Ok(None);
    }
    // The side of many rows and the single-row side. An outer join's ON conditions pad
    // rows instead of dropping them, so only a WHERE above it may filter.
    let (many, one) = match j.join_type {
        JoinType::Inner if at_most_one_row(&j.right) => (&j.left, &j.right),
        JoinType::Inner if at_most_one_row(&j.left) => (&j.right, &j.left),
        JoinType::Left if j.filter.is_none() && at_most_one_row(&j.right) => (&j.left, &j.right),
        JoinType::Right if j.filter.is_none() && at_most_one_row(&j.left) => (&j.right, &j.left),
        _ => return Ok(None),
    };
    let conjuncts: Vec<&Expr> = filter
        .into_iter()
        .chain(j.filter.as_ref())
        .flat_map(split_conjunction)
        .collect();
    let reads_only = |e: &Expr, side: &LogicalPlan| {
        e.column_refs()
            .iter()
            .all(|c| side.schema().index_of_column(c).is_ok())
    };
    if conjuncts
        .iter()
        .any(|c| crate::sql::temporal::contains_now(c))
        || !p.expr.iter().all(|e| reads_only(e, many))
    {
        return Ok(None);
    }
    let mut found = None;
    let mut rest = Vec::new();
    for c in conjuncts {
        if reads_only(c, many) {
            rest.push(c.clone());
            continue;
        }
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = c else {
            return Ok(None);
        };
        // `value <op> threshold`, or the other way round with the operator swapped.
        let (value, threshold, op) = if reads_only(left, many) && reads_only(right, one) {
            (left, right, *op)
        } else if reads_only(left, one) && reads_only(right, many) {
            match op.swap() {
                Some(swapped) => (right, left, swapped),
                None => return Ok(None),
            }
        } else {
            return Ok(None);
        };
        let comparison = match op {
            Op::Lt => Comparison::Lt,
            Op::LtEq => Comparison::LtEq,
            Op::Gt => Comparison::Gt,
            Op::GtEq => Comparison::GtEq,
            _ => return Ok(None),
        };
        if found.is_some() || value.column_refs().is_empty() {
            return Ok(None);
        }
        found = Some((
            value.as_ref().clone(),
            threshold.as_ref().clone(),
            comparison,
        ));
    }
    let Some((value, threshold, comparison)) = found else {
        return Ok(None);
    };
    let value_type = value.get_type(many.schema())?;
    if threshold.get_type(one.schema())? != value_type {
        return Ok(None);
    }
    let left = build(many, sources)?;
    let right = build(one, sources)?;
    let mut node = StreamNode::DynamicFilter {
        value: physical(&value, many.schema())?,
        threshold: physical(&threshold, one.schema())?,
        value_type,
        comparison,
        left: Box::new(left),
        right: Box::new(right),
    };
    if let Some(rest) = datafusion::logical_expr::utils::conjunction(rest) {
        node = StreamNode::Filter {
            input: Box::new(node),
            predicate: physical(&rest, many.schema())?,
            display: rest.to_string(),
        };
    }
    let exprs = p
        .expr
        .iter()
        .map(|e| physical(e, many.schema()))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(StreamNode::Project {
        input: Box::new(node),
        exprs,
        schema: nullable_schema(p.schema.as_arrow()),
    }))
}

/// The columns of `plan`'s output that identify a row (its stream key), when the plan shows
/// one: the group columns of an aggregate, carried through projections that keep them and
/// filters. Empty when none is known (the whole row is then the key). A view's state table
/// orders its rows by these columns first, so a filter on them narrows a read to a key range.
fn stream_key(plan: &LogicalPlan) -> Vec<usize> {
    match plan {
        // With grouping sets: every grouping expression and the grouping id.
        LogicalPlan::Aggregate(a) => (0..a.group_expr_len().unwrap_or(0)).collect(),
        LogicalPlan::Filter(f) => stream_key(&f.input),
        LogicalPlan::SubqueryAlias(a) => stream_key(&a.input),
        LogicalPlan::Sort(s) => stream_key(&s.input),
        LogicalPlan::Projection(p) => {
            let input_key = stream_key(&p.input);
            let input_schema = p.input.schema();
            let mut out = Vec::new();
            for k in input_key {
                let (qualifier, field) = input_schema.qualified_field(k);
                let found = p.expr.iter().position(|e| {
                    let e = match e {
                        Expr::Alias(a) => a.expr.as_ref(),
                        e => e,
                    };
                    matches!(e, Expr::Column(c)
                        if c.name == *field.name() && c.relation.as_ref() == qualifier)
                });
                match found {
                    Some(i) if !out.contains(&i) => out.push(i),
                    // A key column projected away (or twice): no key is known.
                    _ => return Vec::new(),
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

/// Plans a view's query for streaming: its operator tree, the relations it reads, its stream
/// key and output schema.
///
/// # Errors
/// [`Error::NotSupported`] (`0A000`) for constructs that cannot be maintained incrementally;
/// `42804` for join keys whose types cannot be compared.
pub fn plan(logical: &LogicalPlan) -> Result<StreamPlan> {
    plan_view(logical, false)
}

/// [`plan`], with `EMIT ON WINDOW CLOSE` when `emit_on_window_close`: the query's top
/// aggregate (below projections and `HAVING` only) then emits each group once, when the
/// watermark of a group column passes it, and keeps only the open groups.
///
/// # Errors
/// As [`plan`]; `0A000` for `EMIT ON WINDOW CLOSE` without such an aggregate, without a
/// group column carrying a watermark, or over an input that retracts rows.
pub fn plan_view(logical: &LogicalPlan, emit_on_window_close: bool) -> Result<StreamPlan> {
    let mut sources = BTreeSet::new();
    let mut root = build(logical, &mut sources)?;
    if emit_on_window_close {
        root = emit_on_close(root)?;
    }
    Ok(StreamPlan {
        time_driven: time_driven(&root),
        append_only: root.append_only(),
        watermark_columns: root.watermark_columns(),
        root,
        sources,
        stream_key: stream_key(logical),
        schema: nullable_schema(logical.schema().as_arrow()),
    })
}

/// Whether session windows below projections and filters of `node` stay open to changes
/// (not emitted on close: no watermark on their time, or an input that retracts).
fn open_sessions(node: &StreamNode) -> bool {
    match node {
        StreamNode::Project { input, .. } | StreamNode::Filter { input, .. } => {
            open_sessions(input)
        }
        StreamNode::OverWindow {
            output: WindowOutput::Sessions { on_close, .. },
            ..
        } => !on_close,
        _ => false,
    }
}

/// Makes session windows below projections and filters of `node` emit each session once,
/// when it closes ([`WindowOutput::Sessions`] `on_close`), where their input is append-only
/// and their time column carries a watermark; other nodes are left as they are.
fn close_sessions(node: StreamNode) -> Result<StreamNode> {
    below_projections(node, &mut |mut node| {
        if let StreamNode::OverWindow {
            input,
            order,
            output: WindowOutput::Sessions { end, on_close, .. },
            ..
        } = &mut node
        {
            let time = order.first().and_then(|o| {
                let any: &dyn PhysicalExpr = o.expr.as_ref();
                any.downcast_ref::<datafusion::physical_expr::expressions::Column>()
                    .map(|c| c.index())
            });
            *on_close = order.len() == 1
                && end.is_some()
                && input.append_only()
                && time.is_some_and(|t| input.watermark_columns().contains(&t));
        }
        Ok(node)
    })
}

/// Applies `f` to the first node below the projections and filters at the top of `node`,
/// keeping them above its result.
///
/// # Errors
/// Whatever `f` returns.
fn below_projections(
    node: StreamNode,
    f: &mut dyn FnMut(StreamNode) -> Result<StreamNode>,
) -> Result<StreamNode> {
    match node {
        StreamNode::Project {
            input,
            exprs,
            schema,
        } => Ok(StreamNode::Project {
            input: Box::new(below_projections(*input, f)?),
            exprs,
            schema,
        }),
        StreamNode::Filter {
            input,
            predicate,
            display,
        } => Ok(StreamNode::Filter {
            input: Box::new(below_projections(*input, f)?),
            predicate,
            display,
        }),
        other => f(other),
    }
}

/// Makes the top aggregate of `node` emit on window close, its watermarked group column
/// first (a projection on top restores the column order).
fn emit_on_close(node: StreamNode) -> Result<StreamNode> {
    below_projections(node, &mut emit_aggregate_on_close)
}

/// [`emit_on_close`] of the aggregate itself.
fn emit_aggregate_on_close(node: StreamNode) -> Result<StreamNode> {
    use crate::stream::watermark::monotone_column;
    match node {
        StreamNode::HashAgg {
            input,
            group_exprs,
            group_types,
            aggs,
            schema,
            ..
        } => {
            let input = Box::new(close_sessions(*input)?);
            if open_sessions(&input) {
                return Err(Error::not_supported(
                    "EMIT ON WINDOW CLOSE over SESSION windows needs an APPEND ONLY table (or a \
                     view that emits on window close) whose time column carries a watermark \
                     (WATERMARK FOR)",
                ));
            }
            if !input.append_only() {
                return Err(Error::not_supported(
                    "EMIT ON WINDOW CLOSE over an input that retracts rows; it needs \
                     APPEND ONLY tables (or views that emit on window close) read through \
                     filters, projections, unions and window table functions",
                ));
            }
            let watermarked = input.watermark_columns();
            let k = group_exprs
                .iter()
                .position(|e| monotone_column(e).is_some_and(|c| watermarked.contains(&c)))
                .ok_or_else(|| {
                    Error::not_supported(
                        "EMIT ON WINDOW CLOSE without a GROUP BY column that carries a \
                         watermark (window_start or window_end of TUMBLE or HOP, or window_end \
                         of SESSION, over a table with WATERMARK FOR, or that column itself)",
                    )
                })?;
            let g = group_exprs.len();
            let mut order = vec![k];
            order.extend((0..g).filter(|&i| i != k));
            let mut fields: Vec<Field> = order.iter().map(|&i| schema.field(i).clone()).collect();
            fields.extend(schema.fields()[g..].iter().map(|f| f.as_ref().clone()));
            let agg = StreamNode::HashAgg {
                input,
                group_exprs: order.iter().map(|&i| Arc::clone(&group_exprs[i])).collect(),
                group_types: order.iter().map(|&i| group_types[i].clone()).collect(),
                aggs,
                schema: Arc::new(Schema::new(fields)),
                emit_on_window_close: true,
            };
            if k == 0 {
                return Ok(agg);
            }
            let exprs = (0..schema.fields().len())
                .map(|i| {
                    let at = if i < g {
                        order.iter().position(|&o| o == i).unwrap_or(i)
                    } else {
                        i
                    };
                    Arc::new(datafusion::physical_expr::expressions::Column::new(
                        schema.field(i).name(),
                        at,
                    )) as Arc<dyn PhysicalExpr>
                })
                .collect();
            Ok(StreamNode::Project {
                input: Box::new(agg),
                exprs,
                schema,
            })
        }
        _ => Err(Error::not_supported(
            "EMIT ON WINDOW CLOSE needs a GROUP BY aggregate at the top of the query (only \
             projections and HAVING above it)",
        )),
    }
}

/// The bounds between an inner join's sides that watermarks can use (see [`JoinBound`]):
/// from the equi-key pairs `on` (in their common type) and the conjuncts of the join's
/// filter, each read as `x >= y` (`x = y` both ways, `x BETWEEN lo AND hi` as `x >= lo` and
/// `hi >= x`, a strict `>` as the weaker `>=`). `x` must be a plain column of one side once
/// constants added to or subtracted from it are moved across (`r.ts + INTERVAL '5' SECOND >=
/// l.ts` is `r.ts >= l.ts - INTERVAL '5' SECOND`); `y` must read only the other side and be
/// non-decreasing in one of its watermarked columns. Per side the first bound that can
/// expire rows orders the side's expiry index: one whose side never retracts, or whose
/// column carries the side's own watermark.
fn join_bounds(
    j: &datafusion::logical_expr::Join,
    on: &[(Expr, Expr)],
    left: &StreamNode,
    right: &StreamNode,
) -> Vec<JoinBound> {
    use datafusion::logical_expr::{Between, BinaryExpr, Operator as Op};
    let mut at_least: Vec<(Expr, Expr)> = Vec::new();
    // A key matching NULL with NULL (`IS NOT DISTINCT FROM`) is no bound: a NULL row still to
    // come would match a stored NULL row.
    let on = if j.null_equality == datafusion::common::NullEquality::NullEqualsNull {
        &[]
    } else {
        on
    };
    for (l, r) in on {
        at_least.push((l.clone(), r.clone()));
        at_least.push((r.clone(), l.clone()));
    }
    if let Some(f) = &j.filter {
        for c in datafusion::logical_expr::utils::split_conjunction(f) {
            match c {
                Expr::Between(Between {
                    expr,
                    negated: false,
                    low,
                    high,
                }) => {
                    at_least.push((expr.as_ref().clone(), low.as_ref().clone()));
                    at_least.push((high.as_ref().clone(), expr.as_ref().clone()));
                }
                Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
                    let (l, r) = (left.as_ref().clone(), right.as_ref().clone());
                    match op {
                        Op::GtEq | Op::Gt => at_least.push((l, r)),
                        Op::LtEq | Op::Lt => at_least.push((r, l)),
                        Op::Eq => {
                            at_least.push((l.clone(), r.clone()));
                            at_least.push((r, l));
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
    }
    let constant = |e: &Expr| e.column_refs().is_empty();
    let watermarked = [left.watermark_columns(), right.watermark_columns()];
    let append_only = [left.append_only(), right.append_only()];
    let schemas = [j.left.schema(), j.right.schema()];
    let mut bounds: Vec<JoinBound> = Vec::new();
    for (mut x, mut y) in at_least {
        // Move constants added to or subtracted from `x` over to `y`.
        while let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &x {
            let (inner, moved) = match op {
                Op::Plus if constant(right) => (left, y.clone() - right.as_ref().clone()),
                Op::Plus if constant(left) => (right, y.clone() - left.as_ref().clone()),
                Op::Minus if constant(right) => (left, y.clone() + right.as_ref().clone()),
                _ => break,
            };
            let inner = inner.as_ref().clone();
            (x, y) = (inner, moved);
        }
        let Expr::Column(c) = &x else {
            continue;
        };
        let side = if schemas[0].has_column(c) {
            JoinSide::Left
        } else if schemas[1].has_column(c) {
            JoinSide::Right
        } else {
            continue;
        };
        let (own, other) = match side {
            JoinSide::Left => (0, 1),
            JoinSide::Right => (1, 0),
        };
        let refs = y.column_refs();
        if refs.is_empty() || refs.iter().any(|r| !schemas[other].has_column(r)) {
            continue;
        }
        let (Ok(column), Ok(bound)) = (
            schemas[own].index_of_column(c),
            physical(&y, schemas[other]),
        ) else {
            continue;
        };
        let Some(other_column) = crate::stream::watermark::monotone_column(&bound) else {
            continue;
        };
        if !watermarked[other].contains(&other_column) {
            continue;
        }
        bounds.push(JoinBound {
            side,
            column,
            other: bound,
            expires: false,
            own_watermark: !append_only[own],
        });
    }
    for (i, side) in [JoinSide::Left, JoinSide::Right].into_iter().enumerate() {
        if let Some(b) = bounds
            .iter_mut()
            .find(|b| b.side == side && (!b.own_watermark || watermarked[i].contains(&b.column)))
        {
            b.expires = true;
        }
    }
    bounds
}

/// Whether a tree has a temporal filter.
fn time_driven(node: &StreamNode) -> bool {
    match node {
        StreamNode::TemporalFilter { .. } => true,
        StreamNode::Scan { .. } | StreamNode::Values { .. } => false,
        StreamNode::Filter { input, .. }
        | StreamNode::Project { input, .. }
        | StreamNode::HashAgg { input, .. }
        | StreamNode::OverWindow { input, .. } => time_driven(input),
        StreamNode::HashJoin { left, right, .. }
        | StreamNode::SemiJoin { left, right, .. }
        | StreamNode::DynamicFilter { left, right, .. } => time_driven(left) || time_driven(right),
        StreamNode::Union { inputs, .. } => inputs.iter().any(time_driven),
    }
}

/// A `WHERE` conjunct comparing the row's time with `now()` as a temporal filter over `input`:
/// `t op f(now())` or `f(now()) op t`, `op` one of `<`, `<=`, `>`, `>=`, `t` without `now()`,
/// `f(now())` without columns.
///
/// # Errors
/// `0A000` for any other use of `now()`.
fn temporal_filter(input: StreamNode, conjunct: &Expr, schema: &DFSchema) -> Result<StreamNode> {
    use datafusion::logical_expr::{BinaryExpr, Operator as Op};
    let refuse = || now_refused(conjunct);
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = conjunct else {
        return Err(refuse());
    };
    let columns = |e: &Expr| !e.column_refs().is_empty();
    let (time, op) = if !crate::sql::temporal::contains_now(left) && columns(left) {
        if columns(right) {
            return Err(refuse());
        }
        (left.as_ref(), *op)
    } else if !crate::sql::temporal::contains_now(right) && columns(right) {
        if columns(left) {
            return Err(refuse());
        }
        (right.as_ref(), op.swap().ok_or_else(refuse)?)
    } else {
        return Err(refuse());
    };
    let now_side = if std::ptr::eq(time, left.as_ref()) {
        right.as_ref()
    } else {
        left.as_ref()
    };
    if !crate::sql::temporal::non_decreasing_in_now(now_side) {
        return Err(refuse());
    }
    let bound = match op {
        Op::Gt | Op::GtEq => TemporalBound::Lower,
        Op::Lt | Op::LtEq => TemporalBound::Upper,
        _ => return Err(refuse()),
    };
    // The comparison reads `now()` from a last column `__now`.
    let now_field = arrow::datatypes::Field::new("__now", crate::sql::temporal::now_type(), true);
    let with_now = schema.join(&DFSchema::from_unqualified_fields(
        vec![now_field].into(),
        Default::default(),
    )?)?;
    let predicate = conjunct
        .clone()
        .transform_up(|e| {
            Ok(if crate::sql::temporal::is_now(&e) {
                datafusion::common::tree_node::Transformed::yes(Expr::Column(
                    datafusion::common::Column::from_name("__now"),
                ))
            } else {
                datafusion::common::tree_node::Transformed::no(e)
            })
        })?
        .data;
    Ok(StreamNode::TemporalFilter {
        input: Box::new(input),
        time: physical(time, schema)?,
        time_type: time.get_type(schema)?,
        predicate: create_physical_expr(
            &predicate,
            &with_now,
            &ExecutionProps::new(),
            &PhysicalPlanningContext::default(),
        )?,
        bound,
        display: conjunct.to_string(),
    })
}

/// Translates `plan`'s node and its inputs, recording the relations read in `sources`.
fn build(plan: &LogicalPlan, sources: &mut BTreeSet<RelationId>) -> Result<StreamNode> {
    build_hinted(plan, sources, None)
}

/// A filter above a node keeps only rows whose output column `column` is at most `max`:
/// when that column is a ranking window function's, the window operator reads only each
/// partition's leading rows (a Top-N).
#[derive(Debug, Clone, Copy)]
struct RankHint {
    column: usize,
    max: u64,
}

/// As [`build`], with a [`RankHint`] from a filter above `plan` (through projections that pass
/// the column on, aliases and other filters).
fn build_hinted(
    plan: &LogicalPlan,
    sources: &mut BTreeSet<RelationId>,
    hint: Option<RankHint>,
) -> Result<StreamNode> {
    match plan {
        LogicalPlan::Projection(p) => {
            if let Some(node) = dynamic_filter(p, sources)? {
                return Ok(node);
            }
            let hint = hint.and_then(|h| {
                let mut e = match &p.expr[h.column] {
                    Expr::Alias(a) => a.expr.as_ref(),
                    e => e,
                };
                // A cast between integer types keeps the order (ranks are cast to bigint).
                if let Expr::Cast(c) = e
                    && c.field.data_type().is_integer()
                {
                    e = c.expr.as_ref();
                }
                match e {
                    Expr::Column(c) => p
                        .input
                        .schema()
                        .index_of_column(c)
                        .ok()
                        .map(|column| RankHint { column, max: h.max }),
                    _ => None,
                }
            });
            let input = build_hinted(&p.input, sources, hint)?;
            let proc_time = p
                .expr
                .iter()
                .find(|e| crate::sql::temporal::contains_proctime(e));
            if let Some(e) = proc_time
                && !input.append_only()
            {
                return Err(Error::not_supported(format!(
                    "PROCTIME() in a materialized view over rows that can be retracted ({e}): \
                     it needs APPEND ONLY tables or connector tables read through filters, \
                     projections and unions"
                )));
            }
            let exprs = p
                .expr
                .iter()
                .map(|e| physical_with_proctime(e, p.input.schema()))
                .collect::<Result<Vec<_>>>()?;
            Ok(StreamNode::Project {
                input: Box::new(input),
                exprs,
                schema: nullable_schema(p.schema.as_arrow()),
            })
        }
        LogicalPlan::Filter(f) => {
            let hint = rank_hint(&f.predicate, f.input.schema()).or(hint);
            let mut node = build_hinted(&f.input, sources, hint)?;
            let (temporal, plain): (Vec<&Expr>, Vec<&Expr>) =
                datafusion::logical_expr::utils::split_conjunction(&f.predicate)
                    .into_iter()
                    .partition(|c| crate::sql::temporal::contains_now(c));
            if let Some(rest) =
                datafusion::logical_expr::utils::conjunction(plain.into_iter().cloned())
            {
                node = StreamNode::Filter {
                    input: Box::new(node),
                    predicate: physical(&rest, f.input.schema())?,
                    display: rest.to_string(),
                };
            }
            for c in temporal {
                node = temporal_filter(node, c, f.input.schema())?;
            }
            Ok(node)
        }
        LogicalPlan::TableScan(scan) => {
            if scan.fetch.is_some() {
                return Err(Error::not_supported(
                    "LIMIT in a materialized view is not supported",
                ));
            }
            let provider = datafusion::datasource::source_as_provider(&scan.source)?;
            let relation = provider
                .as_ref()
                .downcast_ref::<RelationProvider>()
                .ok_or_else(|| {
                    Error::not_supported(format!(
                        "reading {} (a system table) in a materialized view is not supported",
                        scan.table_name
                    ))
                })?;
            sources.insert(relation.id);
            let schema = nullable_schema(scan.projected_schema.as_arrow());
            let mut op = StreamNode::Scan {
                relation: relation.id,
                name: relation.name.clone(),
                projection: scan.projection.clone(),
                schema,
                append_only: relation.append_only,
                watermark_columns: relation.watermark_columns.clone(),
            };
            for f in &scan.filters {
                let predicate = physical(f, &scan.projected_schema)?;
                op = StreamNode::Filter {
                    input: Box::new(op),
                    predicate,
                    display: f.to_string(),
                };
            }
            Ok(op)
        }
        LogicalPlan::SubqueryAlias(a) => build_hinted(&a.input, sources, hint),
        LogicalPlan::Sort(s) => {
            if let Some(fetch) = s.fetch {
                return top_n(s, 0, Some(fetch), sources);
            }
            // A view is an unordered set: its rows are ordered by the query that reads it.
            build(&s.input, sources)
        }
        LogicalPlan::Aggregate(a) => {
            let input = build(&a.input, sources)?;
            let in_schema = a.input.schema();
            let mut group_exprs = Vec::new();
            let mut group_types = Vec::new();
            if let [Expr::GroupingSet(sets)] = a.group_expr.as_slice() {
                return grouping_sets(a, sets, sources);
            }
            for (i, g) in a.group_expr.iter().enumerate() {
                if matches!(g, Expr::GroupingSet(_)) {
                    return Err(Error::not_supported(
                        "GROUPING SETS, CUBE and ROLLUP beside other GROUP BY items in a \
                         materialized view are not supported",
                    ));
                }
                group_exprs.push(physical(g, in_schema)?);
                group_types.push(a.schema.field(i).data_type().clone());
            }
            let mut aggs = Vec::new();
            for (j, e) in a.aggr_expr.iter().enumerate() {
                let out_type = a.schema.field(a.group_expr.len() + j).data_type().clone();
                aggs.push(agg_call(e, in_schema, out_type)?);
            }
            let schema = nullable_schema(a.schema.as_arrow());
            Ok(StreamNode::HashAgg {
                input: Box::new(input),
                group_exprs,
                group_types,
                aggs,
                schema,
                emit_on_window_close: false,
            })
        }
        LogicalPlan::Distinct(Distinct::All(input)) => {
            let op = build(input, sources)?;
            let schema = nullable_schema(input.schema().as_arrow());
            let group_exprs: Vec<Arc<dyn PhysicalExpr>> = (0..schema.fields().len())
                .map(|i| {
                    Arc::new(datafusion::physical_expr::expressions::Column::new(
                        schema.field(i).name(),
                        i,
                    )) as Arc<dyn PhysicalExpr>
                })
                .collect();
            let types = schema
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect();
            Ok(StreamNode::HashAgg {
                input: Box::new(op),
                group_exprs,
                group_types: types,
                aggs: vec![],
                schema,
                emit_on_window_close: false,
            })
        }
        LogicalPlan::Join(j) => {
            let semi = match j.join_type {
                JoinType::LeftSemi => Some(SemiKind::Semi),
                JoinType::LeftAnti if j.null_aware => Some(SemiKind::NullAwareAnti),
                JoinType::LeftAnti => Some(SemiKind::Anti),
                _ => None,
            };
            let kind = match j.join_type {
                JoinType::Inner => JoinKind::Inner,
                JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti => JoinKind::Left,
                JoinType::Right => JoinKind::Right,
                JoinType::Full => JoinKind::Full,
                other => {
                    return Err(Error::not_supported(format!(
                        "{other} join (from IN, EXISTS or a correlated subquery) in a materialized view is not supported"
                    )));
                }
            };
            // A join without an equi-key runs as one with a constant key when one side holds at
            // most one row (a global aggregate, as `WHERE x > (SELECT sum(y) FROM t)` plans):
            // a change of the other side then pairs with that row alone. An outer join must
            // not preserve the single-row side: its padding would count the other side's rows
            // on every change of them.
            let cross = j.on.is_empty();
            if cross {
                let (one_left, one_right) = (at_most_one_row(&j.left), at_most_one_row(&j.right));
                let allowed = semi.is_none()
                    && match kind {
                        JoinKind::Inner => one_left || one_right,
                        JoinKind::Left => one_right,
                        JoinKind::Right => one_left,
                        JoinKind::Full => false,
                    };
                if !allowed {
                    return Err(Error::not_supported(if semi.is_some() {
                        "IN, NOT IN, EXISTS or NOT EXISTS matched by no equality (a row such as (a, b) NOT IN (subquery), or a correlation by non-equalities only) in a materialized view is not supported"
                    } else if gathers_rows(&j.left) || gathers_rows(&j.right) {
                        "IN (subquery) under OR or as a value, and comparisons with ANY or ALL (subquery), in a materialized view are not supported"
                    } else {
                        "a join without an equality condition (cross join) in a materialized view is not supported, unless one side is a single row (an aggregate without GROUP BY) that an outer join does not preserve"
                    }));
                }
            }
            if j.filter.is_some() && semi.is_some() {
                return Err(Error::not_supported(
                    "IN, EXISTS or NOT EXISTS with a correlation that is not an equality in a materialized view is not supported",
                ));
            }
            // A processing-time temporal join: the right side is looked up, never joined on
            // its own changes ([`crate::sql::lookup_join`]).
            let lookup = is_lookup_side(&j.right);
            if is_lookup_side(&j.left) {
                return Err(Error::not_supported(
                    "FOR SYSTEM_TIME AS OF on the left side of a join: the table looked up must \
                     be the right side of JOIN or LEFT JOIN",
                ));
            }
            if lookup && (semi.is_some() || !matches!(kind, JoinKind::Inner | JoinKind::Left)) {
                return Err(Error::not_supported(
                    "FOR SYSTEM_TIME AS OF in a RIGHT or FULL join, or under IN or EXISTS: a \
                     temporal join is a JOIN or LEFT JOIN with the table looked up on the right",
                ));
            }
            // A correlated NOT IN (`v NOT IN (SELECT w FROM b WHERE b.k = a.k)`) plans as one
            // anti join on (k, v): its NULL rule holds per correlation value, which the
            // operator (one NULL rule over the whole right side) does not keep.
            if semi == Some(SemiKind::NullAwareAnti) && j.on.len() > 1 {
                return Err(Error::not_supported(
                    "NOT IN over a correlated subquery in a materialized view is not supported \
                     (NOT EXISTS with the same condition is, when the values cannot be NULL)",
                ));
            }
            let nulls_match = j.null_equality == datafusion::common::NullEquality::NullEqualsNull;
            if nulls_match && semi == Some(SemiKind::NullAwareAnti) {
                return Err(Error::not_supported(
                    "NOT IN matching NULL keys in a materialized view is not supported",
                ));
            }
            let left = build(&j.left, sources)?;
            let right = build(&j.right, sources)?;
            if lookup && !left.append_only() {
                return Err(Error::not_supported(
                    "FOR SYSTEM_TIME AS OF over rows that can be retracted: the stream side of a \
                     temporal join must be APPEND ONLY tables or connector tables read through \
                     filters, projections and unions",
                ));
            }
            let mut left_keys = Vec::new();
            let mut right_keys = Vec::new();
            let mut key_types = Vec::new();
            let mut on = Vec::new();
            for (l, r) in &j.on {
                let lt = datafusion::logical_expr::ExprSchemable::get_type(l, j.left.schema())?;
                let rt = datafusion::logical_expr::ExprSchemable::get_type(r, j.right.schema())?;
                let (le, re) = if lt == rt {
                    (l.clone(), r.clone())
                } else {
                    // Compare in a common type, as the batch join would after coercion.
                    let common =
                        datafusion::logical_expr::type_coercion::binary::comparison_coercion(
                            &lt, &rt,
                        )
                        .ok_or_else(|| {
                            Error::plan("42804", format!("cannot join {lt} with {rt}"))
                        })?;
                    (
                        l.clone().cast_to(&common, j.left.schema())?,
                        r.clone().cast_to(&common, j.right.schema())?,
                    )
                };
                key_types.push(datafusion::logical_expr::ExprSchemable::get_type(
                    &le,
                    j.left.schema(),
                )?);
                left_keys.push(physical(&le, j.left.schema())?);
                right_keys.push(physical(&re, j.right.schema())?);
                on.push((le, re));
            }
            if let Some(semi) = semi {
                return Ok(StreamNode::SemiJoin {
                    left: Box::new(left),
                    right: Box::new(right),
                    left_keys,
                    right_keys,
                    key_types,
                    kind: semi,
                    nulls_match,
                });
            }
            let schema = nullable_schema(j.schema.as_arrow());
            let bounds = if kind == JoinKind::Inner && !cross && !lookup {
                join_bounds(j, &on, &left, &right)
            } else {
                Vec::new()
            };
            // An outer join evaluates its other conditions per pair, to know which rows to
            // pad; an inner join filters its output (the same rows), keeping its bounds.
            let condition = match &j.filter {
                Some(f) if kind != JoinKind::Inner => Some(physical(f, &j.schema)?),
                _ => None,
            };
            // A side without columns (`FROM t, (SELECT 1) AS x` with nothing of `x` read)
            // gets one constant column, which the join's rows need to count (Arrow's row
            // format of no columns has no rows); a projection above drops it again.
            let (left_width, right_width) = (left.width(), right.width());
            let padded = left_width == 0 || right_width == 0;
            if padded && condition.is_some() {
                return Err(Error::not_supported(
                    "an outer join with a condition beyond its keys whose one side has no \
                     column read in a materialized view is not supported",
                ));
            }
            let (left, right, join_schema) = if padded {
                let pad = |node: StreamNode| -> StreamNode {
                    if node.width() > 0 {
                        return node;
                    }
                    StreamNode::Project {
                        input: Box::new(node),
                        exprs: vec![datafusion::physical_expr::expressions::lit(
                            datafusion::common::ScalarValue::Int32(Some(1)),
                        )],
                        schema: Arc::new(Schema::new(vec![Field::new(
                            "__row",
                            arrow::datatypes::DataType::Int32,
                            true,
                        )])),
                    }
                };
                let (left, right) = (pad(left), pad(right));
                let mut fields: Vec<Field> = Vec::new();
                for side in [&left, &right] {
                    fields.extend(side.schema().fields().iter().map(|f| f.as_ref().clone()));
                }
                (left, right, Arc::new(Schema::new(fields)))
            } else {
                (left, right, Arc::clone(&schema))
            };
            let mut op = StreamNode::HashJoin {
                left: Box::new(left),
                right: Box::new(right),
                left_keys,
                right_keys,
                key_types,
                kind,
                schema: join_schema,
                nulls_match,
                bounds,
                condition,
                lookup,
            };
            if padded {
                // The join's columns without the constant ones.
                let skip_left = usize::from(left_width == 0);
                let exprs = (0..schema.fields().len())
                    .map(|i| {
                        let at = if i < left_width { i } else { i + skip_left };
                        Arc::new(datafusion::physical_expr::expressions::Column::new(
                            schema.field(i).name(),
                            at,
                        )) as Arc<dyn PhysicalExpr>
                    })
                    .collect();
                op = StreamNode::Project {
                    input: Box::new(op),
                    exprs,
                    schema,
                };
            }
            if let Some(f) = j.filter.as_ref().filter(|_| kind == JoinKind::Inner) {
                let predicate = physical(f, &j.schema)?;
                op = StreamNode::Filter {
                    input: Box::new(op),
                    predicate,
                    display: f.to_string(),
                };
            }
            Ok(op)
        }
        LogicalPlan::Union(u) => {
            let inputs = u
                .inputs
                .iter()
                .map(|i| build(i, sources))
                .collect::<Result<Vec<_>>>()?;
            Ok(StreamNode::Union {
                inputs,
                schema: nullable_schema(u.schema.as_arrow()),
            })
        }
        LogicalPlan::Limit(l) => {
            let skip = match l.get_skip_type()? {
                SkipType::Literal(s) => s,
                SkipType::UnsupportedExpr => {
                    return Err(Error::not_supported(
                        "OFFSET that is not a constant in a materialized view is not supported",
                    ));
                }
            };
            let fetch = match l.get_fetch_type()? {
                FetchType::Literal(f) => f,
                FetchType::UnsupportedExpr => {
                    return Err(Error::not_supported(
                        "LIMIT that is not a constant in a materialized view is not supported",
                    ));
                }
            };
            match l.input.as_ref() {
                LogicalPlan::Sort(s) => top_n(s, skip, fetch, sources),
                LogicalPlan::Distinct(Distinct::On(d)) if d.sort_expr.is_some() => {
                    distinct_on_top_n(d, skip, fetch, sources)
                }
                _ if skip == 0 && fetch.is_none() => build(&l.input, sources),
                _ => Err(Error::not_supported(
                    "LIMIT or OFFSET without ORDER BY in a materialized view is not supported \
                     (which rows it keeps is not defined; add ORDER BY)",
                )),
            }
        }
        LogicalPlan::Window(w) => over_window(w, sources, hint),
        LogicalPlan::Values(v) => {
            let schema = nullable_schema(v.schema.as_arrow());
            let rows = values_batch(&schema, &v.values)?;
            Ok(StreamNode::Values {
                rows,
                display: "VALUES".into(),
            })
        }
        LogicalPlan::EmptyRelation(e) => {
            // No FROM (one row of no columns) or a WHERE that is always false (no rows).
            let schema = nullable_schema(e.schema.as_arrow());
            let n = usize::from(e.produce_one_row);
            let rows = if schema.fields().is_empty() {
                let options = RecordBatchOptions::new().with_row_count(Some(n));
                RecordBatch::try_new_with_options(schema, vec![], &options)?
            } else if n == 0 {
                RecordBatch::new_empty(schema)
            } else {
                let columns = schema
                    .fields()
                    .iter()
                    .map(|f| arrow::array::new_null_array(f.data_type(), n))
                    .collect();
                RecordBatch::try_new(schema, columns)?
            };
            Ok(StreamNode::Values {
                rows,
                display: if n == 0 { "empty" } else { "one row" }.into(),
            })
        }
        LogicalPlan::RecursiveQuery(_) => Err(Error::not_supported(
            "WITH RECURSIVE in a materialized view is not supported",
        )),
        LogicalPlan::Unnest(_) => Err(Error::not_supported(
            "UNNEST in a materialized view is not supported",
        )),
        LogicalPlan::Distinct(Distinct::On(d)) => distinct_on(d, sources),
        other => Err(Error::not_supported(format!(
            "{} in a materialized view is not supported",
            other
                .display()
                .to_string()
                .split(':')
                .next()
                .unwrap_or("this construct")
        ))),
    }
}

/// `SELECT DISTINCT ON (keys) exprs ... [ORDER BY ...]`: of each group of rows with equal
/// `keys` (NULLs equal), the first in the `ORDER BY` order, `exprs` evaluated on it
/// (PostgreSQL's `DISTINCT ON`, docs section 7.3.3). A Top-1 per partition: an
/// [`StreamNode::OverWindow`] slice partitioned by the keys, then a projection. PostgreSQL
/// leaves the row unpredictable when the order has ties (or there is no `ORDER BY`); here ties
/// are broken by the rest of the row, so the answer is one of PostgreSQL's and deterministic.
fn distinct_on(
    d: &datafusion::logical_expr::DistinctOn,
    sources: &mut BTreeSet<RelationId>,
) -> Result<StreamNode> {
    let in_schema = d.input.schema();
    let input = build(&d.input, sources)?;
    let partition = d
        .on_expr
        .iter()
        .map(|e| physical(e, in_schema))
        .collect::<Result<Vec<_>>>()?;
    let partition_types = d
        .on_expr
        .iter()
        .map(|e| Ok(e.get_type(in_schema)?))
        .collect::<Result<Vec<_>>>()?;
    let order = window_order(d.sort_expr.as_deref().unwrap_or_default(), in_schema)?;
    let first = StreamNode::OverWindow {
        input: Box::new(input),
        partition,
        partition_types,
        order,
        window: vec![],
        output: WindowOutput::Slice {
            skip: 0,
            fetch: Some(1),
        },
        schema: nullable_schema(in_schema.as_arrow()),
    };
    let exprs = d
        .select_expr
        .iter()
        .map(|e| physical(e, in_schema))
        .collect::<Result<Vec<_>>>()?;
    Ok(StreamNode::Project {
        input: Box::new(first),
        exprs,
        schema: nullable_schema(d.schema.as_arrow()),
    })
}

/// `SELECT DISTINCT ON (keys) exprs ... ORDER BY ... LIMIT n [OFFSET m]`: the rows of
/// [`distinct_on`], then the Top-N of them in the `ORDER BY` order. DataFusion keeps that
/// order inside the `DISTINCT ON` node (over its input's columns), so each key is taken as
/// the output column the select list computes from the same expression.
///
/// # Errors
/// `0A000` when an `ORDER BY` key is not in the select list; as [`build`] for the input.
fn distinct_on_top_n(
    d: &datafusion::logical_expr::DistinctOn,
    skip: usize,
    fetch: Option<usize>,
    sources: &mut BTreeSet<RelationId>,
) -> Result<StreamNode> {
    let out = d.schema.as_ref();
    let keys = d
        .sort_expr
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|k| {
            let at = d
                .select_expr
                .iter()
                .position(|e| e.clone().unalias() == k.expr.clone().unalias())
                .ok_or_else(|| {
                    Error::not_supported(format!(
                        "DISTINCT ON with LIMIT or OFFSET ordered by {}, which the select list \
                         does not show, in a materialized view is not supported (select it)",
                        k.expr
                    ))
                })?;
            let (qualifier, field) = out.qualified_field(at);
            Ok(SortExpr {
                expr: Expr::Column(datafusion::common::Column::new(
                    qualifier.cloned(),
                    field.name(),
                )),
                asc: k.asc,
                nulls_first: k.nulls_first,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let input = distinct_on(d, sources)?;
    top_n_over(input, &keys, out, skip, fetch)
}

/// Most grouping sets one aggregate of a view may have: each set is maintained by its own
/// aggregate operator and state table.
const MAX_GROUPING_SETS: usize = 64;

/// `GROUP BY GROUPING SETS (...)`, `ROLLUP (...)` or `CUBE (...)` (PostgreSQL docs section
/// 7.2.4): one hash aggregate per grouping set over its own copy of the input, each projected
/// to the full output (the expressions outside the set NULL, then DataFusion's internal
/// `__grouping_id`), and a union of them all.
///
/// The grouping id is computed as DataFusion's batch aggregate computes it, so `GROUPING(...)`
/// (rewritten by DataFusion into bit tests of it) answers alike: bit `n - 1 - i` is set when
/// the `i`th of the `n` distinct grouping expressions is not in the set, and a set that
/// repeats an earlier one carries its repeat count above bit `n`, so every set's rows stay
/// distinct (the stream key is the group columns and the id).
///
/// # Errors
/// `0A000` for more than [`MAX_GROUPING_SETS`] sets; as [`build`] for the input.
fn grouping_sets(
    a: &datafusion::logical_expr::Aggregate,
    sets: &datafusion::logical_expr::GroupingSet,
    sources: &mut BTreeSet<RelationId>,
) -> Result<StreamNode> {
    use datafusion::logical_expr::GroupingSet;
    use datafusion::physical_expr::expressions::{Column, Literal};
    let distinct = sets.distinct_expr();
    let n = distinct.len();
    let too_many = || {
        Error::not_supported(format!(
            "more than {MAX_GROUPING_SETS} grouping sets in a materialized view are not supported"
        ))
    };
    // `true` where the expression is left out of the set (NULL in its rows).
    let patterns: Vec<Vec<bool>> = match sets {
        GroupingSet::Rollup(_) => (0..=n)
            .rev()
            .map(|k| (0..n).map(|i| i >= k).collect())
            .collect(),
        GroupingSet::Cube(_) => {
            if n >= usize::BITS as usize || (1usize << n) > MAX_GROUPING_SETS {
                return Err(too_many());
            }
            (0..1usize << n)
                .map(|mask| (0..n).map(|i| mask & (1 << i) == 0).collect())
                .collect()
        }
        GroupingSet::GroupingSets(groups) => groups
            .iter()
            .map(|g| distinct.iter().map(|e| !g.contains(e)).collect())
            .collect(),
    };
    if patterns.len() > MAX_GROUPING_SETS {
        return Err(too_many());
    }
    let in_schema = a.input.schema();
    let out_schema = nullable_schema(a.schema.as_arrow());
    let id_type = out_schema.field(n).data_type().clone();
    let mut repeats: std::collections::HashMap<&[bool], u64> = std::collections::HashMap::new();
    let mut inputs = Vec::with_capacity(patterns.len());
    for pattern in &patterns {
        let repeat = repeats.entry(pattern.as_slice()).or_insert(0);
        let semantic = pattern
            .iter()
            .fold(0u64, |acc, &null| (acc << 1) | u64::from(null));
        let id = ScalarValue::UInt64(Some(semantic | (*repeat << n))).cast_to(&id_type)?;
        *repeat += 1;
        let kept: Vec<usize> = (0..n).filter(|&i| !pattern[i]).collect();
        let mut fields: Vec<Field> = kept.iter().map(|&i| out_schema.field(i).clone()).collect();
        let mut group_exprs = Vec::with_capacity(kept.len());
        let mut group_types = Vec::with_capacity(kept.len());
        for &i in &kept {
            group_exprs.push(physical(distinct[i], in_schema)?);
            group_types.push(out_schema.field(i).data_type().clone());
        }
        let mut aggs = Vec::with_capacity(a.aggr_expr.len());
        for (j, e) in a.aggr_expr.iter().enumerate() {
            let field = out_schema.field(n + 1 + j);
            aggs.push(agg_call(e, in_schema, field.data_type().clone())?);
            fields.push(field.clone());
        }
        let agg_schema = Arc::new(Schema::new(fields));
        let agg = StreamNode::HashAgg {
            input: Box::new(build(&a.input, sources)?),
            group_exprs,
            group_types,
            aggs,
            schema: Arc::clone(&agg_schema),
            emit_on_window_close: false,
        };
        let mut exprs: Vec<Arc<dyn PhysicalExpr>> = Vec::with_capacity(out_schema.fields().len());
        for i in 0..n {
            exprs.push(match kept.iter().position(|&k| k == i) {
                Some(p) => Arc::new(Column::new(agg_schema.field(p).name(), p)),
                None => Arc::new(Literal::new(ScalarValue::try_from(
                    out_schema.field(i).data_type(),
                )?)),
            });
        }
        exprs.push(Arc::new(Literal::new(id)));
        for j in 0..a.aggr_expr.len() {
            let p = kept.len() + j;
            exprs.push(Arc::new(Column::new(agg_schema.field(p).name(), p)));
        }
        inputs.push(StreamNode::Project {
            input: Box::new(agg),
            exprs,
            schema: Arc::clone(&out_schema),
        });
    }
    Ok(StreamNode::Union {
        inputs,
        schema: out_schema,
    })
}

/// `ORDER BY ... LIMIT fetch OFFSET skip`: a Top-N over the whole input.
fn top_n(
    sort: &datafusion::logical_expr::Sort,
    skip: usize,
    fetch: Option<usize>,
    sources: &mut BTreeSet<RelationId>,
) -> Result<StreamNode> {
    let input = build(&sort.input, sources)?;
    top_n_over(input, &sort.expr, sort.input.schema(), skip, fetch)
}

/// The rows `skip..skip + fetch` of `input` (of `schema`) in the order of `keys`: an
/// [`StreamNode::OverWindow`] slice over one partition.
///
/// # Errors
/// As [`window_order`].
fn top_n_over(
    input: StreamNode,
    keys: &[SortExpr],
    schema: &DFSchema,
    skip: usize,
    fetch: Option<usize>,
) -> Result<StreamNode> {
    Ok(StreamNode::OverWindow {
        input: Box::new(input),
        partition: vec![],
        partition_types: vec![],
        order: window_order(keys, schema)?,
        window: vec![],
        output: WindowOutput::Slice { skip, fetch },
        schema: nullable_schema(schema.as_arrow()),
    })
}

/// The physical `ORDER BY` keys of a window or a Top-N.
fn window_order(keys: &[SortExpr], schema: &DFSchema) -> Result<Vec<WindowOrder>> {
    keys.iter()
        .map(|k| {
            Ok(WindowOrder {
                expr: physical(&k.expr, schema)?,
                data_type: k.expr.get_type(schema)?,
                options: arrow::compute::SortOptions {
                    descending: !k.asc,
                    nulls_first: k.nulls_first,
                },
            })
        })
        .collect()
}

/// The ranking window functions: a row's value depends only on the rows before it and never
/// decreases along the partition.
const RANKING: [&str; 3] = ["row_number", "rank", "dense_rank"];

/// A window node: its functions must share one `PARTITION BY` and `ORDER BY` (DataFusion puts
/// functions with other keys in other window nodes).
fn over_window(
    w: &datafusion::logical_expr::logical_plan::Window,
    sources: &mut BTreeSet<RelationId>,
    hint: Option<RankHint>,
) -> Result<StreamNode> {
    let in_schema = w.input.schema();
    let mut spec: Option<(&[Expr], &[SortExpr])> = None;
    let mut names = Vec::new();
    let mut gaps = Vec::new();
    for e in &w.window_expr {
        let inner = match e {
            Expr::Alias(a) => a.expr.as_ref(),
            e => e,
        };
        let Expr::WindowFunction(f) = inner else {
            return Err(Error::not_supported(format!(
                "window expression {e} in a materialized view is not supported"
            )));
        };
        let this = (
            f.params.partition_by.as_slice(),
            f.params.order_by.as_slice(),
        );
        match spec {
            None => spec = Some(this),
            Some(s) if s == this => {}
            Some(_) => {
                return Err(Error::not_supported(
                    "window functions with different PARTITION BY or ORDER BY in one window of \
                     a materialized view are not supported",
                ));
            }
        }
        names.push(f.fun.name().to_ascii_lowercase());
        gaps.push(f.params.args.get(1).and_then(session::literal_gap_ns));
    }
    let (partition_by, order_by) = spec.ok_or_else(|| Error::Internal("empty window".into()))?;
    let input = build(&w.input, sources)?;
    let partition = partition_by
        .iter()
        .map(|e| physical(e, in_schema))
        .collect::<Result<Vec<_>>>()?;
    let partition_types = partition_by
        .iter()
        .map(|e| Ok(e.get_type(in_schema)?))
        .collect::<Result<Vec<_>>>()?;
    let order = window_order(order_by, in_schema)?;
    let window = w
        .window_expr
        .iter()
        .map(|e| {
            Ok(datafusion::physical_planner::create_window_expr(
                e,
                in_schema,
                &ExecutionProps::new(),
                &PhysicalPlanningContext::default(),
            )?)
        })
        .collect::<Result<Vec<_>>>()?;
    let inputs = in_schema.fields().len();
    let rank_limit = hint.and_then(|h| {
        let j = h.column.checked_sub(inputs)?;
        let all_ranking = names.iter().all(|n| RANKING.contains(&n.as_str()));
        all_ranking.then_some((j, h.max))
    });
    // Session bounds alone, over one ascending time, with one gap: read only the sessions
    // a change touches.
    let is_session = |n: &String| n == session::SESSION_START || n == session::SESSION_END;
    let session_gap = match (gaps.first(), order.as_slice()) {
        (Some(Some(gap)), [o])
            if names.iter().all(is_session)
                && gaps.iter().all(|g| g == &Some(*gap))
                && !o.options.descending
                && matches!(o.data_type, arrow::datatypes::DataType::Timestamp(_, _)) =>
        {
            Some(*gap)
        }
        _ => None,
    };
    let output = match session_gap {
        Some(gap_ns) => WindowOutput::Sessions {
            gap_ns,
            end: names
                .iter()
                .position(|n| n == session::SESSION_END)
                .map(|j| in_schema.fields().len() + j),
            on_close: false,
        },
        None => WindowOutput::All { rank_limit },
    };
    Ok(StreamNode::OverWindow {
        input: Box::new(input),
        partition,
        partition_types,
        order,
        window,
        output,
        schema: nullable_schema(w.schema.as_arrow()),
    })
}

/// The bound a filter puts on one column, when one of its conjuncts is `column <= n`,
/// `column < n`, `column = n` (or the same reversed) for an integer constant `n`.
fn rank_hint(predicate: &Expr, schema: &DFSchema) -> Option<RankHint> {
    use datafusion::logical_expr::{BinaryExpr, Operator as Op};
    let conjuncts = datafusion::logical_expr::utils::split_conjunction(predicate);
    conjuncts.into_iter().find_map(|c| {
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = c else {
            return None;
        };
        // A column, or a column cast to another integer type (ranks are cast to bigint).
        let column_of = |e: &Expr| match e {
            Expr::Column(c) => Some(c.clone()),
            Expr::Cast(c) if c.field.data_type().is_integer() => match c.expr.as_ref() {
                Expr::Column(col) => Some(col.clone()),
                _ => None,
            },
            _ => None,
        };
        let (column, op, value) = match (left.as_ref(), right.as_ref()) {
            (e, Expr::Literal(v, _)) => (column_of(e)?, *op, v),
            (Expr::Literal(v, _), e) => (column_of(e)?, op.swap()?, v),
            _ => return None,
        };
        let n = match value.cast_to(&arrow::datatypes::DataType::Int64).ok()? {
            ScalarValue::Int64(Some(n)) => n,
            _ => return None,
        };
        let max = match op {
            Op::LtEq | Op::Eq => n,
            Op::Lt => n - 1,
            _ => return None,
        };
        Some(RankHint {
            column: schema.index_of_column(&column).ok()?,
            max: u64::try_from(max.max(0)).ok()?,
        })
    })
}

/// Evaluates the constant rows of a `VALUES` list into one batch of `schema`.
fn values_batch(schema: &SchemaRef, rows: &[Vec<Expr>]) -> Result<RecordBatch> {
    let empty = DFSchema::empty();
    let one_row = RecordBatch::try_new_with_options(
        Arc::new(arrow::datatypes::Schema::empty()),
        vec![],
        &RecordBatchOptions::new().with_row_count(Some(1)),
    )?;
    let mut columns: Vec<Vec<ArrayRef>> =
        vec![Vec::with_capacity(rows.len()); schema.fields().len()];
    for row in rows {
        for (i, e) in row.iter().enumerate() {
            let value = physical(e, &empty)?.evaluate(&one_row)?.into_array(1)?;
            let target = schema.field(i).data_type();
            let value = if value.data_type() == target {
                value
            } else {
                arrow::compute::cast(&value, target)?
            };
            columns[i].push(value);
        }
    }
    let columns = columns
        .iter()
        .zip(schema.fields())
        .map(|(parts, f)| {
            if parts.is_empty() {
                Ok(arrow::array::new_empty_array(f.data_type()))
            } else {
                let refs: Vec<&dyn arrow::array::Array> =
                    parts.iter().map(|a| a.as_ref()).collect();
                Ok(arrow::compute::concat(&refs)?)
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &options,
    )?)
}

/// `0A000` for `now()` in `e`, which is not a temporal filter.
fn now_refused(e: &Expr) -> Error {
    Error::not_supported(format!(
        "now() in a materialized view is supported only in a temporal filter, a WHERE \
         condition comparing a column with now() plus or minus constants (ts > now() - \
         INTERVAL '1 hour'), not in {}",
        crate::sql::temporal::shown(e)
    ))
}

fn physical(e: &Expr, schema: &DFSchema) -> Result<Arc<dyn PhysicalExpr>> {
    if crate::sql::temporal::contains_proctime(e) {
        return Err(Error::not_supported(format!(
            "PROCTIME() in a materialized view is supported only in a SELECT list: {e}"
        )));
    }
    physical_with_proctime(e, schema)
}

/// [`physical`], taking `PROCTIME()` (a SELECT list's expressions).
fn physical_with_proctime(e: &Expr, schema: &DFSchema) -> Result<Arc<dyn PhysicalExpr>> {
    if crate::sql::temporal::contains_now(e) {
        return Err(now_refused(e));
    }
    Ok(create_physical_expr(
        e,
        schema,
        &ExecutionProps::new(),
        &PhysicalPlanningContext::default(),
    )?)
}

/// True when an ordered-set aggregate's `WITHIN GROUP (ORDER BY x DESC)` is descending.
fn within_group_descending(order_by: &[SortExpr]) -> bool {
    order_by.first().is_some_and(|s| !s.asc)
}

fn agg_call(
    e: &Expr,
    in_schema: &DFSchema,
    out_type: arrow::datatypes::DataType,
) -> Result<AggCall> {
    let inner = match e {
        Expr::Alias(a) => a.expr.as_ref(),
        other => other,
    };
    let Expr::AggregateFunction(af) = inner else {
        return Err(Error::not_supported(format!(
            "aggregate expression {e} is not supported"
        )));
    };
    let name = af.func.name().to_ascii_lowercase();
    let params = &af.params;
    let kind = match (name.as_str(), params.distinct) {
        ("count", false) => AggKind::Count,
        ("count", true) => AggKind::CountDistinct,
        ("sum", false) => AggKind::Sum,
        ("avg" | "mean", false) => AggKind::Avg,
        ("min", _) => AggKind::Min,
        ("max", _) => AggKind::Max,
        // false < true: every value true is the minimum being true.
        ("bool_and", _) => AggKind::Min,
        ("bool_or", _) => AggKind::Max,
        ("bit_and", _) => AggKind::BitAnd,
        ("bit_or", _) => AggKind::BitOr,
        ("bit_xor", false) => AggKind::BitXor,
        ("var" | "var_samp" | "var_sample", false) => AggKind::Variance {
            population: false,
            root: false,
        },
        ("var_pop" | "var_population", false) => AggKind::Variance {
            population: true,
            root: false,
        },
        ("stddev" | "stddev_samp", false) => AggKind::Variance {
            population: false,
            root: true,
        },
        ("stddev_pop", false) => AggKind::Variance {
            population: true,
            root: true,
        },
        ("string_agg", false) => AggKind::StringAgg,
        ("array_agg", false) => AggKind::ArrayAgg,
        ("mode", false) => AggKind::Mode {
            descending: within_group_descending(&params.order_by),
        },
        ("percentile_disc", false) => AggKind::PercentileDisc {
            descending: within_group_descending(&params.order_by),
        },
        ("percentile_cont", false) => AggKind::PercentileCont {
            descending: within_group_descending(&params.order_by),
        },
        (n, true) => {
            return Err(Error::not_supported(format!(
                "{n}(DISTINCT ...) in a materialized view is not supported"
            )));
        }
        (n, false) => {
            return Err(Error::not_supported(format!(
                "aggregate function {n} in a materialized view is not supported (supported: \
                 count, sum, avg, min, max, bool_and, bool_or, bit_and, bit_or, bit_xor, \
                 var_samp, var_pop, stddev_samp, stddev_pop, string_agg, array_agg, mode, \
                 percentile_disc, percentile_cont, count(DISTINCT))"
            )));
        }
    };
    let percentile = matches!(
        kind,
        AggKind::PercentileDisc { .. } | AggKind::PercentileCont { .. }
    );
    let expected_args = if kind == AggKind::StringAgg || percentile {
        2
    } else {
        1
    };
    if params.args.len() != expected_args {
        return Err(Error::not_supported(format!(
            "{name} with {} arguments in a materialized view is not supported",
            params.args.len()
        )));
    }
    let delimiter = if kind == AggKind::StringAgg {
        match &params.args[1] {
            Expr::Literal(v, _) => match v {
                ScalarValue::Utf8(d) | ScalarValue::LargeUtf8(d) | ScalarValue::Utf8View(d) => {
                    d.clone().unwrap_or_default()
                }
                ScalarValue::Null => String::new(),
                other => other.to_string(),
            },
            other => {
                return Err(Error::not_supported(format!(
                    "string_agg with a delimiter that is not a constant ({other}) in a materialized view is not supported"
                )));
            }
        }
    } else {
        String::new()
    };
    let fraction = if percentile {
        let Expr::Literal(v, _) = &params.args[1] else {
            return Err(Error::not_supported(format!(
                "{name} with a fraction that is not a constant in a materialized view is not \
                 supported"
            )));
        };
        match v.cast_to(&arrow::datatypes::DataType::Float64)? {
            ScalarValue::Float64(Some(f)) => {
                Some(crate::sql::functions::ordered_set::check_fraction(f)?)
            }
            _ => None,
        }
    } else {
        None
    };
    // Only string_agg and array_agg depend on the order of their input; min and max of an
    // interval keep their values in PostgreSQL's interval order (`crate::sql::equal_keys`).
    let arg_is_interval = matches!(
        datafusion::logical_expr::ExprSchemable::get_type(&params.args[0], in_schema)?,
        arrow::datatypes::DataType::Interval(_)
    );
    let order_by = if matches!(kind, AggKind::StringAgg | AggKind::ArrayAgg) {
        window_order(&params.order_by, in_schema)?
    } else if matches!(kind, AggKind::Min | AggKind::Max) && arg_is_interval {
        let key = crate::sql::semantics::interval_key(params.args[0].clone());
        vec![WindowOrder {
            expr: physical(&key, in_schema)?,
            data_type: datafusion::logical_expr::ExprSchemable::get_type(&key, in_schema)?,
            options: arrow::compute::SortOptions {
                descending: kind == AggKind::Max,
                nulls_first: true,
            },
        }]
    } else {
        Vec::new()
    };
    let filter = params
        .filter
        .as_ref()
        .map(|f| physical(f, in_schema))
        .transpose()?;
    let arg_expr = &params.args[0];
    let arg_type = datafusion::logical_expr::ExprSchemable::get_type(arg_expr, in_schema)?;
    // Refused here, when the view is created, not when its first row arrives.
    if matches!(kind, AggKind::Sum | AggKind::Avg) && !(arg_type.is_numeric() || arg_type.is_null())
    {
        return Err(Error::not_supported(format!(
            "{name}({}) in a materialized view is not supported (sum and avg of numbers \
             are)",
            crate::sql::functions::pg_type_name(&arg_type)
        )));
    }
    Ok(AggCall {
        kind,
        arg: physical(arg_expr, in_schema)?,
        arg_type,
        out_type,
        filter,
        order_by,
        delimiter,
        fraction,
        display: e.schema_name().to_string(),
    })
}

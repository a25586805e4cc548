//! Values PostgreSQL calls equal as one key: intervals and floating-point numbers as
//! grouping, distinct, join and partition keys, and intervals as `min`/`max` arguments.
//!
//! PostgreSQL's interval equality counts a month as 30 days and a day as 24 hours, so
//! `INTERVAL '1 day' = INTERVAL '24 hours'` and `INTERVAL '1 mon' = INTERVAL '30 days'`
//! (`interval_cmp_value` and `interval_hash` in `timestamp.c`); its float equality has
//! `-0 = 0` and one NaN equal to itself (`float8_cmp_internal`, `hashfloat8`, which hashes
//! -0 as 0). Arrow compares and hashes an interval by its three parts and a float by its
//! bits, so DataFusion, and a view's operators, which key their state by Arrow's row
//! encoding, would put `1 day` and `24 hours`, or `0` and `-0`, in two groups.
//!
//! ```text
//!  GROUP BY i                 ─► GROUP BY interval_cmp_key(i), i shown as min(i)
//!  GROUP BY f                 ─► GROUP BY weir_float_key(f), shown as it
//!  SELECT DISTINCT i / f      ─► the same GROUP BY
//!  count(DISTINCT i)          ─► count(DISTINCT interval_cmp_key(i))
//!  PARTITION BY i / f         ─► PARTITION BY interval_cmp_key(i) / weir_float_key(f)
//!  OVER (ORDER BY i)          ─► OVER (ORDER BY interval_cmp_key(i))  (before type coercion)
//!  OVER (ORDER BY f)          ─► OVER (ORDER BY weir_float_key(f))
//!  DISTINCT ON (i / f) ... ORDER BY i / f  ─► the same on keys
//!  x1 = x2, x1 < x2, ...      ─► key(x1) = key(x2), ...
//!  JOIN ... ON (a.i = b.i)    ─► ON interval_cmp_key(a.i) = interval_cmp_key(b.i)
//!                                 (INTERSECT / EXCEPT, whose joins are planned with keys)
//!  x IN (SELECT y ...)        ─► key(x) IN (SELECT key(y) ...)
//!  x IN (a, b), x BETWEEN a AND b   ─► the same on keys
//!  min(i), max(i)             ─► IntervalMinMax: by the normalised value, then by parts
//!  min(f), max(f)             ─► min(weir_float_key(f)), ...
//!  ORDER BY i / f             ─► ORDER BY interval_cmp_key(i) / weir_float_key(f)
//!  array_agg(x ORDER BY i)    ─► array_agg(x ORDER BY interval_cmp_key(i))
//! ```
//!
//! A group of equal intervals written in different units shows one of them, as PostgreSQL's
//! does (which one PostgreSQL shows depends on the order rows arrive in); here always the
//! least by (normalised value, months, days, nanoseconds), so a view and a `SELECT` agree and
//! a view's answer does not depend on the order of its input. A group of `0` and `-0` shows
//! `0`. `GROUPING SETS`, `ROLLUP` and `CUBE` keep Arrow's equality.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray};
use arrow::datatypes::{
    DataType, Field, FieldRef, Float32Type, Float64Type, IntervalMonthDayNano,
    IntervalMonthDayNanoType,
};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::expr::{AggregateFunction, ScalarFunction};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::{format_state_name, merge_schema};
use datafusion::logical_expr::{
    Accumulator, Aggregate, AggregateUDF, AggregateUDFImpl, BinaryExpr, ColumnarValue, Distinct,
    DistinctOn, Expr, ExprSchemable, LogicalPlan, Operator, Projection, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionContext;

use super::semantics::{interval_key, map_node_exprs, shape_result};

/// Prefix of the columns a group's key and shown value get in the rewritten `Aggregate`
/// (`__weir_group_key_0`, `__weir_group_rep_0`).
const KEY_PREFIX: &str = "__weir_group_key_";
const REP_PREFIX: &str = "__weir_group_rep_";

/// Registers [`FloatKey`] (views' plans name it).
pub fn register(ctx: &SessionContext) {
    ctx.register_udf(ScalarUDF::new_from_impl(FloatKey::new()));
}

/// The analyzer rule of the module docs. Runs after DataFusion's type coercion.
#[derive(Debug, Default)]
pub struct EqualKeys;

impl AnalyzerRule for EqualKeys {
    fn name(&self) -> &str {
        "weir_equal_keys"
    }

    fn analyze(
        &self,
        plan: LogicalPlan,
        _config: &ConfigOptions,
    ) -> datafusion::common::Result<LogicalPlan> {
        Ok(plan.transform_up_with_subqueries(rewrite_plan)?.data)
    }
}

/// The kinds of values whose equality is not their bits'.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Interval,
    Float,
}

fn kind_of(t: &DataType) -> Option<KeyKind> {
    match t {
        DataType::Interval(_) => Some(KeyKind::Interval),
        DataType::Float16 | DataType::Float32 | DataType::Float64 => Some(KeyKind::Float),
        _ => None,
    }
}

/// The kind of `e`'s values; `None` for other types and for a key already (this rule may see
/// a plan twice).
fn expr_kind(e: &Expr, schema: &DFSchema) -> Option<KeyKind> {
    let inner = match e {
        Expr::Alias(a) => a.expr.as_ref(),
        e => e,
    };
    if is_float_key(inner) {
        return None;
    }
    e.get_type(schema).ok().and_then(|t| kind_of(&t))
}

fn is_interval(e: &Expr, schema: &DFSchema) -> bool {
    expr_kind(e, schema) == Some(KeyKind::Interval)
}

/// `e`'s key: equal keys exactly when PostgreSQL calls the values equal.
fn key(e: Expr, kind: KeyKind) -> Expr {
    match kind {
        KeyKind::Interval => interval_key(e),
        KeyKind::Float => Expr::ScalarFunction(ScalarFunction::new_udf(
            Arc::new(ScalarUDF::new_from_impl(FloatKey::new())),
            vec![e],
        )),
    }
}

fn rewrite_plan(plan: LogicalPlan) -> datafusion::common::Result<Transformed<LogicalPlan>> {
    match plan {
        LogicalPlan::Distinct(Distinct::All(input))
            if input
                .schema()
                .fields()
                .iter()
                .any(|f| kind_of(f.data_type()).is_some()) =>
        {
            // SELECT DISTINCT as the GROUP BY of every column (DataFusion's optimizer does the
            // same later), so the group rewrite below applies.
            let group: Vec<Expr> = input
                .schema()
                .columns()
                .into_iter()
                .map(Expr::Column)
                .collect();
            let agg = Aggregate::try_new(input, group, vec![])?;
            Ok(Transformed::yes(group_by_key(agg)?))
        }
        LogicalPlan::Aggregate(agg) => {
            let schema = agg.input.schema().clone();
            let plain_groups = !agg
                .group_expr
                .iter()
                .any(|g| matches!(g, Expr::GroupingSet(_)));
            let keyed_groups = plain_groups
                && agg
                    .group_expr
                    .iter()
                    .any(|g| expr_kind(g, &schema).is_some());
            let (agg, changed) = rewrite_aggregates(agg, &schema)?;
            if keyed_groups {
                Ok(Transformed::yes(group_by_key(agg)?))
            } else if changed {
                Ok(Transformed::yes(LogicalPlan::Aggregate(agg)))
            } else {
                Ok(Transformed::no(LogicalPlan::Aggregate(agg)))
            }
        }
        LogicalPlan::Window(_) => {
            let schema = merge_schema(&plan.inputs());
            map_node_exprs(plan, |e| match e {
                Expr::WindowFunction(mut wf) => {
                    let mut changed = false;
                    for p in &mut wf.params.partition_by {
                        if let Some(kind) = expr_kind(p, &schema) {
                            *p = key(p.clone(), kind);
                            changed = true;
                        }
                    }
                    // A float ORDER BY ranks `-0` and `0` as peers (intervals got their key
                    // before type coercion, see `window_order_keys`). The key is the same
                    // float otherwise, so a RANGE frame's offsets still apply.
                    for o in &mut wf.params.order_by {
                        if expr_kind(&o.expr, &schema) == Some(KeyKind::Float) {
                            o.expr = key(o.expr.clone(), KeyKind::Float);
                            changed = true;
                        }
                    }
                    Ok(if changed {
                        Transformed::yes(Expr::WindowFunction(wf))
                    } else {
                        Transformed::no(Expr::WindowFunction(wf))
                    })
                }
                other => Ok(Transformed::no(other)),
            })
        }
        // DISTINCT ON (i) / (f) keeps one row per key, and its ORDER BY sorts by keys.
        LogicalPlan::Distinct(Distinct::On(on))
            if on
                .on_expr
                .iter()
                .chain(on.sort_expr.iter().flatten().map(|s| &s.expr))
                .any(|e| expr_kind(e, on.input.schema()).is_some()) =>
        {
            let schema = on.input.schema().clone();
            let keyed = |e: Expr| match expr_kind(&e, &schema) {
                Some(kind) => key(e, kind),
                None => e,
            };
            let on_expr = on.on_expr.into_iter().map(keyed).collect();
            let sort_expr = on.sort_expr.map(|sorts| {
                sorts
                    .into_iter()
                    .map(|mut s| {
                        s.expr = keyed(s.expr);
                        s
                    })
                    .collect()
            });
            Ok(Transformed::yes(LogicalPlan::Distinct(Distinct::On(
                DistinctOn::try_new(on_expr, on.select_expr, sort_expr, on.input)?,
            ))))
        }
        // ORDER BY an interval or a float sorts by its key (Arrow orders an interval by its
        // parts, and puts `-NaN` first and `-0` before `0`).
        LogicalPlan::Sort(mut sort)
            if sort
                .expr
                .iter()
                .any(|s| expr_kind(&s.expr, sort.input.schema()).is_some()) =>
        {
            for s in &mut sort.expr {
                if let Some(kind) = expr_kind(&s.expr, sort.input.schema()) {
                    s.expr = key(s.expr.clone(), kind);
                }
            }
            Ok(Transformed::yes(LogicalPlan::Sort(sort)))
        }
        LogicalPlan::Join(mut join)
            if join
                .on
                .iter()
                .any(|(l, _)| expr_kind(l, join.left.schema()).is_some()) =>
        {
            for (l, r) in &mut join.on {
                if let Some(kind) = expr_kind(l, join.left.schema()) {
                    *l = key(l.clone(), kind);
                    *r = key(r.clone(), kind);
                }
            }
            Ok(Transformed::yes(LogicalPlan::Join(join)))
        }
        other => Ok(Transformed::no(other)),
    }?
    .transform_data(key_predicates)
}

/// An interval `ORDER BY` of a window function (`rank() OVER (ORDER BY i)`) on the interval's
/// key. Runs before DataFusion's type coercion, which refuses a `RANGE` frame (the default
/// one) ordered by an interval.
pub(crate) fn window_order_keys(
    e: Expr,
    schema: &DFSchema,
) -> datafusion::common::Result<Transformed<Expr>> {
    match e {
        Expr::WindowFunction(mut wf)
            if wf
                .params
                .order_by
                .iter()
                .any(|o| is_interval(&o.expr, schema)) =>
        {
            for o in &mut wf.params.order_by {
                if is_interval(&o.expr, schema) {
                    o.expr = interval_key(o.expr.clone());
                }
            }
            Ok(Transformed::yes(Expr::WindowFunction(wf)))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// True when `e` is already a `weir_float_key` call (this rule may see a plan twice).
fn is_float_key(e: &Expr) -> bool {
    matches!(e, Expr::ScalarFunction(f) if f.func.name() == "weir_float_key")
}

/// True for a comparison operator (`=`, `<>`, `<`, `<=`, `>`, `>=`, `IS [NOT] DISTINCT FROM`).
pub(crate) fn is_comparison(op: Operator) -> bool {
    matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
            | Operator::IsDistinctFrom
            | Operator::IsNotDistinctFrom
    )
}

/// Comparisons, `x IN (SELECT y ...)`, `x IN (a, b)` and `x BETWEEN a AND b` of intervals or
/// floats, on their keys (the optimizer turns `IN (SELECT ...)` and join conditions into
/// joins on those keys).
fn key_predicates(plan: LogicalPlan) -> datafusion::common::Result<Transformed<LogicalPlan>> {
    let schema = merge_schema(&plan.inputs());
    map_node_exprs(plan, |e| match e {
        Expr::BinaryExpr(b) if is_comparison(b.op) => {
            match (expr_kind(&b.left, &schema), expr_kind(&b.right, &schema)) {
                (Some(l), Some(r)) if l == r => Ok(Transformed::yes(Expr::BinaryExpr(
                    BinaryExpr::new(Box::new(key(*b.left, l)), b.op, Box::new(key(*b.right, l))),
                ))),
                _ => Ok(Transformed::no(Expr::BinaryExpr(b))),
            }
        }
        Expr::InSubquery(mut q) if q.subquery.subquery.schema().fields().len() == 1 => {
            let Some(kind) = expr_kind(&q.expr, &schema) else {
                return Ok(Transformed::no(Expr::InSubquery(q)));
            };
            let inner = q.subquery.subquery.clone();
            let (qualifier, field) = inner.schema().qualified_field(0);
            let column = Expr::Column(Column::new(qualifier.cloned(), field.name()));
            let keyed = Projection::try_new(vec![key(column, kind).alias(field.name())], inner)?;
            q.subquery.subquery = Arc::new(LogicalPlan::Projection(keyed));
            q.expr = Box::new(key(*q.expr, kind));
            Ok(Transformed::yes(Expr::InSubquery(q)))
        }
        Expr::InList(mut l) => {
            let Some(kind) = expr_kind(&l.expr, &schema) else {
                return Ok(Transformed::no(Expr::InList(l)));
            };
            l.expr = Box::new(key(*l.expr, kind));
            l.list = l.list.into_iter().map(|e| key(e, kind)).collect();
            Ok(Transformed::yes(Expr::InList(l)))
        }
        Expr::Between(mut b) => {
            let Some(kind) = expr_kind(&b.expr, &schema) else {
                return Ok(Transformed::no(Expr::Between(b)));
            };
            b.expr = Box::new(key(*b.expr, kind));
            b.low = Box::new(key(*b.low, kind));
            b.high = Box::new(key(*b.high, kind));
            Ok(Transformed::yes(Expr::Between(b)))
        }
        other => Ok(Transformed::no(other)),
    })
}

/// `min`/`max` of an interval as [`IntervalMinMax`]; `count(DISTINCT x)` of an interval or
/// float as `count(DISTINCT key(x))`; an interval `ORDER BY` inside a call on its key. Output
/// names are kept.
fn rewrite_aggregates(
    mut agg: Aggregate,
    schema: &DFSchema,
) -> datafusion::common::Result<(Aggregate, bool)> {
    let mut changed = false;
    let mut out = Vec::with_capacity(agg.aggr_expr.len());
    for e in std::mem::take(&mut agg.aggr_expr) {
        let name = e.schema_name().to_string();
        let t = e.transform_up(|e| match e {
            Expr::AggregateFunction(mut af) => {
                let mut changed = false;
                for o in &mut af.params.order_by {
                    if is_interval(&o.expr, schema) {
                        o.expr = interval_key(o.expr.clone());
                        changed = true;
                    }
                }
                let one_kind = if af.params.args.len() == 1 {
                    expr_kind(&af.params.args[0], schema)
                } else {
                    None
                };
                let fname = af.func.name().to_ascii_lowercase();
                let ours = (af.func.inner().as_ref() as &dyn std::any::Any)
                    .downcast_ref::<IntervalMinMax>()
                    .is_some();
                match (fname.as_str(), one_kind) {
                    ("min" | "max", Some(KeyKind::Interval)) if !ours => {
                        af.func = Arc::new(AggregateUDF::new_from_impl(IntervalMinMax::new(
                            fname == "max",
                        )));
                        changed = true;
                    }
                    // A float's extremes by its key: the NaN of `-NaN` is the largest value.
                    ("min" | "max", Some(KeyKind::Float)) => {
                        af.params.args[0] = key(af.params.args[0].clone(), KeyKind::Float);
                        changed = true;
                    }
                    ("count", Some(kind)) if af.params.distinct => {
                        af.params.args[0] = key(af.params.args[0].clone(), kind);
                        changed = true;
                    }
                    _ => {}
                }
                Ok(if changed {
                    Transformed::yes(Expr::AggregateFunction(af))
                } else {
                    Transformed::no(Expr::AggregateFunction(af))
                })
            }
            other => Ok(Transformed::no(other)),
        })?;
        if t.transformed {
            changed = true;
            let e = t.data;
            out.push(if e.schema_name().to_string() == name {
                e
            } else {
                e.alias(name)
            });
        } else {
            out.push(t.data);
        }
    }
    if changed {
        agg = Aggregate::try_new(agg.input, agg.group_expr, out)?;
    } else {
        agg.aggr_expr = out;
    }
    Ok((agg, changed))
}

/// `GROUP BY x` of an interval or float `x` as `GROUP BY key(x)`, with `min(x)` shown in an
/// interval's place and the key itself in a float's, under a projection that gives the
/// original output columns their names.
fn group_by_key(agg: Aggregate) -> datafusion::common::Result<LogicalPlan> {
    let in_schema = agg.input.schema().clone();
    let out_schema = agg.schema.clone();
    let mut groups = Vec::with_capacity(agg.group_expr.len());
    let mut aggs = agg.aggr_expr.clone();
    // Per group column: the expression the projection shows for it (`None`: the group's own).
    let mut shown: Vec<Option<Expr>> = Vec::with_capacity(out_schema.fields().len());
    for (i, g) in agg.group_expr.iter().enumerate() {
        let (qualifier, field) = out_schema.qualified_field(i);
        let key_name = format!("{KEY_PREFIX}{i}");
        match expr_kind(g, &in_schema) {
            Some(KeyKind::Interval) => {
                let rep = format!("{REP_PREFIX}{i}");
                groups.push(interval_key(g.clone()).alias(&key_name));
                aggs.push(
                    Expr::AggregateFunction(AggregateFunction::new_udf(
                        Arc::new(AggregateUDF::new_from_impl(IntervalMinMax::new(false))),
                        vec![g.clone()],
                        false,
                        None,
                        vec![],
                        None,
                    ))
                    .alias(&rep),
                );
                shown.push(Some(
                    Expr::Column(rep.as_str().into())
                        .alias_qualified(qualifier.cloned(), field.name()),
                ));
            }
            Some(KeyKind::Float) => {
                groups.push(key(g.clone(), KeyKind::Float).alias(&key_name));
                shown.push(None);
            }
            None => {
                groups.push(g.clone());
                shown.push(None);
            }
        }
    }
    let new = Aggregate::try_new(agg.input.clone(), groups, aggs)?;
    let new_schema = new.schema.clone();
    let mut exprs = Vec::with_capacity(out_schema.fields().len());
    for (i, s) in shown.into_iter().enumerate() {
        let (q, f) = new_schema.qualified_field(i);
        exprs.push(s.unwrap_or_else(|| {
            let (oq, of) = out_schema.qualified_field(i);
            Expr::Column(Column::new(q.cloned(), f.name())).alias_qualified(oq.cloned(), of.name())
        }));
    }
    let groups_len = agg.group_expr.len();
    for j in 0..agg.aggr_expr.len() {
        let (q, f) = new_schema.qualified_field(groups_len + j);
        let (oq, of) = out_schema.qualified_field(groups_len + j);
        exprs.push(
            Expr::Column(Column::new(q.cloned(), f.name())).alias_qualified(oq.cloned(), of.name()),
        );
    }
    Ok(LogicalPlan::Projection(Projection::try_new(
        exprs,
        Arc::new(LogicalPlan::Aggregate(new)),
    )?))
}

/// An interval's place in PostgreSQL's order, then its parts: a total order whose ties are
/// only identical values.
fn order_key(v: IntervalMonthDayNano) -> (i128, i32, i32, i64) {
    (
        super::semantics::interval_cmp_value(v),
        v.months,
        v.days,
        v.nanoseconds,
    )
}

/// `min(interval)` or `max(interval)` by PostgreSQL's interval order (`interval_smaller`,
/// `interval_larger`), equal values in different units ordered by their parts (see the module
/// docs). Argument and result: `interval` (Arrow `Interval(MonthDayNano)`); state: the value
/// so far. NULLs are skipped; no values gives NULL.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct IntervalMinMax {
    max: bool,
    signature: Signature,
}

impl IntervalMinMax {
    /// `max` when `max`, else `min`.
    pub fn new(max: bool) -> Self {
        IntervalMinMax {
            max,
            signature: Signature::new(TypeSignature::Any(1), Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for IntervalMinMax {
    fn name(&self) -> &str {
        if self.max { "max" } else { "min" }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(DataType::Interval(
            arrow::datatypes::IntervalUnit::MonthDayNano,
        ))
    }

    fn accumulator(
        &self,
        _args: AccumulatorArgs<'_>,
    ) -> datafusion::common::Result<Box<dyn Accumulator>> {
        Ok(Box::new(MinMaxAcc {
            max: self.max,
            best: None,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs<'_>) -> datafusion::common::Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format_state_name(args.name, "value"),
            DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano),
            true,
        ))])
    }
}

#[derive(Debug)]
struct MinMaxAcc {
    max: bool,
    best: Option<IntervalMonthDayNano>,
}

impl Accumulator for MinMaxAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> datafusion::common::Result<()> {
        let values = arrow::compute::cast(
            &values[0],
            &DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano),
        )?;
        for v in values
            .as_primitive::<IntervalMonthDayNanoType>()
            .iter()
            .flatten()
        {
            let better = match self.best {
                None => true,
                Some(b) => {
                    let (k, kb) = (order_key(v), order_key(b));
                    if self.max { k > kb } else { k < kb }
                }
            };
            if better {
                self.best = Some(v);
            }
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> datafusion::common::Result<()> {
        self.update_batch(states)
    }

    fn state(&mut self) -> datafusion::common::Result<Vec<ScalarValue>> {
        Ok(vec![self.evaluate()?])
    }

    fn evaluate(&mut self) -> datafusion::common::Result<ScalarValue> {
        Ok(ScalarValue::IntervalMonthDayNano(self.best))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

/// `weir_float_key(x)`: a `real` or `double precision` with `-0` as `0` and every NaN as the
/// one positive NaN, so equal keys are values PostgreSQL calls equal. Same type as `x`; NULL
/// stays NULL.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct FloatKey {
    signature: Signature,
}

impl FloatKey {
    /// The function.
    pub fn new() -> Self {
        FloatKey {
            signature: Signature::uniform(
                1,
                vec![DataType::Float32, DataType::Float64],
                Volatility::Immutable,
            ),
        }
    }
}

impl Default for FloatKey {
    fn default() -> Self {
        Self::new()
    }
}

/// `v` with `-0` as `0` and NaN as the positive NaN.
pub(crate) fn float_key64(v: f64) -> f64 {
    if v.is_nan() {
        f64::NAN
    } else if v == 0.0 {
        0.0
    } else {
        v
    }
}

impl ScalarUDFImpl for FloatKey {
    fn name(&self) -> &str {
        "weir_float_key"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(match arg_types.first() {
            Some(DataType::Float32) => DataType::Float32,
            _ => DataType::Float64,
        })
    }

    /// NULL only for NULL: nullable as the argument is, so a grouping on it keeps the
    /// nullability a plan above (a union over a `DISTINCT`) was derived with.
    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs<'_>,
    ) -> datafusion::common::Result<arrow::datatypes::FieldRef> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let nullable = args.arg_fields.first().is_none_or(|f| f.is_nullable());
        Ok(Arc::new(arrow::datatypes::Field::new(
            self.name(),
            self.return_type(&types)?,
            nullable,
        )))
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out: ArrayRef = match arrays[0].data_type() {
            DataType::Float32 => Arc::new(
                arrays[0]
                    .as_primitive::<Float32Type>()
                    .unary::<_, Float32Type>(|v| float_key64(f64::from(v)) as f32),
            ),
            _ => {
                let a = arrow::compute::cast(&arrays[0], &DataType::Float64)?;
                Arc::new(
                    a.as_primitive::<Float64Type>()
                        .unary::<_, Float64Type>(float_key64),
                )
            }
        };
        shape_result(&args.args, out)
    }
}

/// The array of intervals `values` (for tests).
#[cfg(test)]
fn intervals(values: &[(i32, i32, i64)]) -> ArrayRef {
    Arc::new(arrow::array::IntervalMonthDayNanoArray::from_iter_values(
        values
            .iter()
            .map(|&(m, d, n)| IntervalMonthDayNano::new(m, d, n)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000_000_000;

    #[test]
    fn float_keys_make_zeros_and_nans_one() {
        assert_eq!(float_key64(-0.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(float_key64(-f64::NAN).to_bits(), f64::NAN.to_bits());
        assert_eq!(float_key64(-1.5), -1.5);
    }

    #[test]
    fn min_and_max_follow_postgresql_order_then_parts() {
        // 25 hours > 1 day (Arrow's part order says the opposite); 1 mon = 30 days.
        let v = intervals(&[
            (0, 1, 0),
            (0, 0, 25 * HOUR),
            (0, 30, 0),
            (1, 0, 0),
            (0, 0, 24 * HOUR),
        ]);
        let mut max = MinMaxAcc {
            max: true,
            best: None,
        };
        max.update_batch(std::slice::from_ref(&v)).unwrap();
        assert_eq!(
            max.evaluate().unwrap(),
            ScalarValue::IntervalMonthDayNano(Some(IntervalMonthDayNano::new(1, 0, 0)))
        );
        let mut min = MinMaxAcc {
            max: false,
            best: None,
        };
        min.update_batch(&[v]).unwrap();
        assert_eq!(
            min.evaluate().unwrap(),
            ScalarValue::IntervalMonthDayNano(Some(IntervalMonthDayNano::new(0, 0, 24 * HOUR)))
        );
    }
}

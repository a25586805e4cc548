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

use arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, DFSchema, NullEquality};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::ExprSchemable;
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
    is_set_operation(join)
        && !matches!(join.left.as_ref(), LogicalPlan::Distinct(Distinct::All(_)))
        && join
            .left
            .schema()
            .fields()
            .last()
            .is_none_or(|f| !f.name().starts_with(COPY_NUMBER))
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

/// Gives the columns of `UNION` / `INTERSECT` / `EXCEPT` branches and of `VALUES` lists that
/// mix `real`/`double precision` with `numeric` PostgreSQL's type: the float (docs, 10.5
/// "UNION, CASE, and Related Constructs": the preferred type of the numeric category,
/// `double precision`, or `real` when no branch is `double precision`). DataFusion chose
/// `numeric`, which merged floats that differ only past its decimals (`0.30000000000000004`
/// and `0.3` became one row of a `UNION`) and failed on `NaN` and infinities (a view over such
/// a union failed). A branch's untyped string literal (`SELECT 1 UNION SELECT '2'`) takes the
/// other branches' type, where DataFusion made the column `text`. Runs before DataFusion's
/// type coercion, which then unifies the branches as their columns now say.
#[derive(Debug, Default)]
pub struct PgSetOperationTypes;

/// The float type a column mixing floats and `numeric` takes, if it does (`types`: the
/// column's type in each branch or row).
fn float_over_numeric<'a>(types: impl Iterator<Item = &'a DataType> + Clone) -> Option<DataType> {
    let numeric = types.clone().any(|t| matches!(t, DataType::Decimal128(..)));
    let double = types
        .clone()
        .any(|t| matches!(t, DataType::Float64 | DataType::Float16));
    let real = types.clone().any(|t| matches!(t, DataType::Float32));
    match (numeric, double, real) {
        (true, true, _) => Some(DataType::Float64),
        (true, false, true) => Some(DataType::Float32),
        _ => None,
    }
}

impl AnalyzerRule for PgSetOperationTypes {
    fn name(&self) -> &str {
        "weir_pg_set_operation_types"
    }

    fn analyze(
        &self,
        plan: LogicalPlan,
        _config: &ConfigOptions,
    ) -> datafusion::common::Result<LogicalPlan> {
        // Once a branch changed, every node above it derives its schema again before it is
        // looked at (a union over a changed union must see the float).
        let mut changed = false;
        Ok(plan
            .transform_up_with_subqueries(|plan| {
                let plan = if changed {
                    match plan {
                        LogicalPlan::TableScan(_)
                        | LogicalPlan::Values(_)
                        | LogicalPlan::EmptyRelation(_) => plan,
                        LogicalPlan::Union(u) => union_of(u.inputs)?,
                        other => other.recompute_schema()?,
                    }
                } else {
                    plan
                };
                let t = match plan {
                    LogicalPlan::Union(union) => union_types(union)?,
                    LogicalPlan::Join(join) if is_set_operation(&join) => join_types(join)?,
                    LogicalPlan::Values(values) => values_types(values)?,
                    other => Transformed::no(other),
                };
                changed |= t.transformed;
                // Reported as changed, so the caller keeps the rewritten plan.
                Ok(Transformed::new_transformed(t.data, changed))
            })?
            .data)
    }
}

/// Whether `join` is DataFusion's plan of `INTERSECT` or `EXCEPT` (either form): a semi or
/// anti join without a filter, NULLs equal, of each column of the left with the column in
/// the same position on the right.
fn is_set_operation(join: &Join) -> bool {
    let left = join.left.schema();
    let right = join.right.schema();
    matches!(join.join_type, JoinType::LeftSemi | JoinType::LeftAnti)
        && join.filter.is_none()
        && join.null_equality == NullEquality::NullEqualsNull
        && join.on.len() == left.fields().len()
        && join.on.len() == right.fields().len()
        && join.on.iter().enumerate().all(|(i, (l, r))| {
            matches!(l, Expr::Column(c) if c.name == *left.field(i).name())
                && matches!(r, Expr::Column(c) if c.name == *right.field(i).name())
        })
}

/// `input` with the columns that have a target type cast to it, names and qualifiers kept.
fn cast_columns(
    input: Arc<LogicalPlan>,
    targets: &[Option<DataType>],
) -> datafusion::common::Result<Arc<LogicalPlan>> {
    let schema = input.schema().clone();
    let needs = schema
        .fields()
        .iter()
        .zip(targets)
        .any(|(f, t)| t.as_ref().is_some_and(|t| f.data_type() != t));
    if !needs {
        return Ok(input);
    }
    let exprs: Vec<Expr> = schema
        .iter()
        .zip(targets)
        .map(|((q, f), t)| {
            let col = Expr::Column(Column::new(q.cloned(), f.name()));
            match t {
                Some(t) if f.data_type() != t => Expr::Cast(datafusion::logical_expr::Cast::new(
                    Box::new(col),
                    t.clone(),
                ))
                .alias_qualified(q.cloned(), f.name()),
                _ => col,
            }
        })
        .collect();
    Ok(Arc::new(
        LogicalPlanBuilder::from(input).project(exprs)?.build()?,
    ))
}

/// An `INTERSECT` / `EXCEPT` join with the `numeric` columns of either side cast to the
/// float the other side has in that position.
fn join_types(join: Join) -> datafusion::common::Result<Transformed<LogicalPlan>> {
    let left = join.left.schema().clone();
    let right = join.right.schema().clone();
    let targets: Vec<Option<DataType>> = left
        .fields()
        .iter()
        .zip(right.fields())
        .map(|(l, r)| float_over_numeric([l.data_type(), r.data_type()].into_iter()))
        .collect();
    // An untyped literal on one side takes the other side's type.
    let literal_targets = |side: &LogicalPlan, other: &DFSchema| -> Vec<Option<DataType>> {
        (0..targets.len())
            .map(|j| {
                let typed = other.field(j).data_type();
                (is_unknown_literal(side, j) && !is_string(typed) && *typed != DataType::Null)
                    .then(|| typed.clone())
            })
            .collect()
    };
    let left_literals = literal_targets(&join.left, &right);
    let right_literals = literal_targets(&join.right, &left);
    let (left_literals, right_literals) = if left_literals
        .iter()
        .zip(&right_literals)
        .any(|(l, r)| l.is_some() && r.is_some())
    {
        // Both sides untyped in a column: text, as they are.
        (vec![None; targets.len()], vec![None; targets.len()])
    } else {
        (left_literals, right_literals)
    };
    if targets.iter().all(Option::is_none)
        && left_literals
            .iter()
            .chain(&right_literals)
            .all(Option::is_none)
    {
        return Ok(Transformed::no(LogicalPlan::Join(join)));
    }
    let with = |literals: &[Option<DataType>]| -> Vec<Option<DataType>> {
        targets
            .iter()
            .zip(literals)
            .map(|(t, l)| l.clone().or_else(|| t.clone()))
            .collect()
    };
    let rebuilt = Join {
        left: cast_columns(join.left.clone(), &with(&left_literals))?,
        right: cast_columns(join.right.clone(), &with(&right_literals))?,
        ..join
    };
    Ok(Transformed::yes(
        LogicalPlan::Join(rebuilt).recompute_schema()?,
    ))
}

/// A `UNION`'s branches with their `numeric` columns cast to the float another branch has in
/// that position.
fn union_types(
    union: datafusion::logical_expr::Union,
) -> datafusion::common::Result<Transformed<LogicalPlan>> {
    let width = union.schema.fields().len();
    let targets: Vec<Option<DataType>> = (0..width)
        .map(|j| {
            let types: Vec<DataType> = union
                .inputs
                .iter()
                .filter_map(|i| i.schema().fields().get(j).map(|f| f.data_type().clone()))
                .collect();
            float_over_numeric(types.iter())
        })
        .collect();
    // Per branch, the type each of its untyped literal columns takes.
    let unknown: Vec<Vec<Option<DataType>>> = (0..width)
        .map(|j| {
            let columns: Vec<(bool, DataType)> = union
                .inputs
                .iter()
                .map(|i| {
                    (
                        is_unknown_literal(i, j),
                        i.schema().field(j).data_type().clone(),
                    )
                })
                .collect();
            let target = resolved_type(columns.iter().filter(|(u, _)| !u).map(|(_, t)| t));
            columns
                .iter()
                .map(|(u, _)| if *u { target.clone() } else { None })
                .collect()
        })
        .collect();
    if targets.iter().all(Option::is_none) && unknown.iter().flatten().all(Option::is_none) {
        return Ok(Transformed::no(LogicalPlan::Union(union)));
    }
    let inputs = union
        .inputs
        .into_iter()
        .enumerate()
        .map(|(b, input)| {
            let targets: Vec<Option<DataType>> = targets
                .iter()
                .zip(&unknown)
                .map(|(t, u)| u[b].clone().or_else(|| t.clone()))
                .collect();
            cast_columns(input, &targets)
        })
        .collect::<datafusion::common::Result<Vec<_>>>()?;
    Ok(Transformed::yes(union_of(inputs)?))
}

/// Whether column `j` of a set operation's branch is an untyped string literal (`'2'`, not
/// `'2'::text`), which PostgreSQL resolves as the type of the other branches' column (docs
/// 10.5, "UNION, CASE, and Related Constructs": unknown inputs are ignored when the type is
/// chosen, then converted to it; text only when every input is unknown).
fn is_unknown_literal(branch: &LogicalPlan, j: usize) -> bool {
    match branch {
        LogicalPlan::Projection(p) => p.expr.get(j).is_some_and(|e| {
            matches!(
                e.clone().unalias(),
                Expr::Literal(
                    datafusion::common::ScalarValue::Utf8(Some(_))
                        | datafusion::common::ScalarValue::Utf8View(Some(_)),
                    _
                )
            )
        }),
        LogicalPlan::SubqueryAlias(a) => is_unknown_literal(&a.input, j),
        LogicalPlan::Distinct(Distinct::All(input)) => is_unknown_literal(input, j),
        _ => false,
    }
}

fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8)
}

/// The type the typed branches of a column resolve to (DataFusion's comparison coercion of
/// them, which its union coercion also uses); `None` when no branch is typed or the typed
/// branches are text (the literal needs no cast).
fn resolved_type<'a>(mut types: impl Iterator<Item = &'a DataType>) -> Option<DataType> {
    let first = types.next()?.clone();
    let t = types.try_fold(first, |acc, t| {
        datafusion::logical_expr::type_coercion::binary::comparison_coercion(&acc, t)
    })?;
    (!is_string(&t) && t != DataType::Null).then_some(t)
}

/// A union of `inputs` whose schema is the first input's names and types, each column
/// nullable when it is in any input (DataFusion's coercion, which runs after, unifies the
/// types; the physical plan derives nullability so, and refuses a logical schema that
/// differs).
fn union_of(inputs: Vec<Arc<LogicalPlan>>) -> datafusion::common::Result<LogicalPlan> {
    let union = datafusion::logical_expr::Union::try_new_with_loose_types(inputs)?;
    let fields: Vec<(
        Option<datafusion::common::TableReference>,
        Arc<arrow::datatypes::Field>,
    )> = union
        .schema
        .iter()
        .enumerate()
        .map(|(i, (q, f))| {
            let nullable = union.inputs.iter().any(|input| {
                input
                    .schema()
                    .fields()
                    .get(i)
                    .is_some_and(|f| f.is_nullable())
            });
            (
                q.cloned(),
                Arc::new(
                    f.as_ref()
                        .clone()
                        .with_nullable(nullable || f.is_nullable()),
                ),
            )
        })
        .collect();
    let schema = DFSchema::new_with_metadata(fields, union.schema.metadata().clone())?;
    Ok(LogicalPlan::Union(datafusion::logical_expr::Union {
        inputs: union.inputs,
        schema: Arc::new(schema),
    }))
}

/// A `VALUES` list's `numeric` values cast to the float another row has in that column (its
/// planner cast the floats to `numeric`: those casts are dropped).
fn values_types(
    values: datafusion::logical_expr::Values,
) -> datafusion::common::Result<Transformed<LogicalPlan>> {
    let empty = DFSchema::empty();
    // A value's own type: a float the planner cast to `numeric` is a float.
    let own = |e: &Expr| -> datafusion::common::Result<DataType> {
        if let Expr::Cast(c) = e
            && matches!(c.field.data_type(), DataType::Decimal128(..))
        {
            let inner = c.expr.get_type(&empty)?;
            if matches!(
                inner,
                DataType::Float16 | DataType::Float32 | DataType::Float64
            ) {
                return Ok(inner);
            }
        }
        e.get_type(&empty)
    };
    let width = values.schema.fields().len();
    let mut targets = Vec::with_capacity(width);
    for j in 0..width {
        let types = values
            .values
            .iter()
            .map(|row| own(&row[j]))
            .collect::<datafusion::common::Result<Vec<_>>>()?;
        targets.push(float_over_numeric(types.iter()));
    }
    if targets.iter().all(Option::is_none) {
        return Ok(Transformed::no(LogicalPlan::Values(values)));
    }
    let rows = values
        .values
        .into_iter()
        .map(|row| {
            row.into_iter()
                .zip(&targets)
                .map(|(e, t)| {
                    let Some(t) = t else { return Ok(e) };
                    let e = match e {
                        Expr::Cast(c)
                            if matches!(c.field.data_type(), DataType::Decimal128(..))
                                && matches!(
                                    c.expr.get_type(&empty)?,
                                    DataType::Float16 | DataType::Float32 | DataType::Float64
                                ) =>
                        {
                            *c.expr
                        }
                        other => other,
                    };
                    Ok(if e.get_type(&empty)? == *t {
                        e
                    } else {
                        Expr::Cast(datafusion::logical_expr::Cast::new(Box::new(e), t.clone()))
                    })
                })
                .collect::<datafusion::common::Result<Vec<_>>>()
        })
        .collect::<datafusion::common::Result<Vec<_>>>()?;
    let fields: Vec<(
        Option<datafusion::common::TableReference>,
        Arc<arrow::datatypes::Field>,
    )> = values
        .schema
        .iter()
        .zip(&targets)
        .map(|((q, f), t)| {
            let f = match t {
                Some(t) => Arc::new(f.as_ref().clone().with_data_type(t.clone())),
                None => f.clone(),
            };
            (q.cloned(), f)
        })
        .collect();
    let schema = DFSchema::new_with_metadata(fields, values.schema.metadata().clone())?;
    Ok(Transformed::yes(LogicalPlan::Values(
        datafusion::logical_expr::Values {
            schema: Arc::new(schema),
            values: rows,
        },
    )))
}

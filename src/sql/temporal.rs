//! `now()` in materialized views: temporal filters, and the time functions a view refuses.
//!
//! A batch query evaluates `now()` once, at its start (DataFusion folds it into a constant).
//! A view lives on, so a folded `now()` would freeze the view at its creation time: a wrong
//! answer ever after. A view's plan therefore has each `now()` (and `current_timestamp`, its
//! alias) replaced by [`STREAM_NOW`], a volatile function the optimizer leaves alone, before it
//! is optimized ([`mark_now`]). The streaming planner takes it only in a temporal filter, a
//! `WHERE` conjunct comparing an expression of the row with an expression of `now()` and
//! constants (`ts > now() - INTERVAL '1 hour'`), which becomes a
//! [`crate::stream::ops::temporal_filter::TemporalFilter`]; anywhere else it is `0A000`. So
//! are the other functions whose value changes from run to run (`random()`, `current_date`,
//! `current_time`, `localtime`, `localtimestamp`, `uuid()`: [`check_view_functions`]).

use std::sync::Arc;

use arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::error::{Error, Result};

/// The name of the function that stands for `now()` in a view's plan.
pub const STREAM_NOW: &str = "weir_stream_now";

/// The name of the processing-time function, Flink SQL's `PROCTIME()`.
pub const PROC_TIME: &str = "proctime";

/// A volatile function of no arguments giving the wall-clock time as `timestamptz`
/// (nanoseconds, UTC), under one of two names:
///
/// - [`STREAM_NOW`], `now()` in a view: volatile, so never folded into a constant; what
///   evaluates it outside a temporal filter gets the wall-clock time;
/// - [`PROC_TIME`], `PROCTIME()`: the time at which the row is processed (Flink SQL's
///   processing-time attribute, "Time Attributes"). In a batch query, the time the query
///   evaluates it; in a materialized view, the time the view's dataflow computes the row
///   (once per batch of rows), so a view may use it only in its SELECT list over rows that
///   are never retracted (a retraction computed later would not cancel the row it retracts).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct WallClock {
    name: &'static str,
    signature: Signature,
}

impl WallClock {
    /// The function under `name` ([`STREAM_NOW`] or [`PROC_TIME`]).
    pub fn udf(name: &'static str) -> ScalarUDF {
        ScalarUDF::new_from_impl(WallClock {
            name,
            signature: Signature::nullary(Volatility::Volatile),
        })
    }
}

impl ScalarUDFImpl for WallClock {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(now_type())
    }

    fn invoke_with_args(
        &self,
        _args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        Ok(ColumnarValue::Scalar(
            datafusion::common::ScalarValue::TimestampNanosecond(
                Some(crate::stream::wall_clock_ns()),
                Some("+00:00".into()),
            ),
        ))
    }
}

/// `weir_lookup_side()`: true; marks the table side of a processing-time temporal join
/// ([`crate::sql::lookup_join`]). Volatile, so the optimizer keeps it where the rewrite put it.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct LookupSide {
    signature: Signature,
}

impl LookupSide {
    /// The function, to register.
    pub fn udf() -> ScalarUDF {
        ScalarUDF::new_from_impl(LookupSide {
            signature: Signature::nullary(Volatility::Volatile),
        })
    }
}

impl ScalarUDFImpl for LookupSide {
    fn name(&self) -> &str {
        crate::sql::lookup_join::LOOKUP_SIDE
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(
        &self,
        _args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        Ok(ColumnarValue::Scalar(
            datafusion::common::ScalarValue::Boolean(Some(true)),
        ))
    }
}

/// Whether `e` calls the scalar function named `name` anywhere.
pub fn calls(e: &Expr, name: &str) -> bool {
    let mut found = false;
    let _ = e.apply(|n| {
        if matches!(n, Expr::ScalarFunction(f) if f.name() == name) {
            found = true;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}

/// Whether `e` calls `PROCTIME()`.
pub fn contains_proctime(e: &Expr) -> bool {
    calls(e, PROC_TIME)
}

/// `now()`'s type: `timestamptz` (nanoseconds, UTC), as DataFusion's `now()`.
pub fn now_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("+00:00".into()))
}

fn stream_now() -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::new(WallClock::udf(STREAM_NOW)),
        vec![],
    ))
}

/// `e` as SQL-ish text for an error message, `now()` under its own name.
pub fn shown(e: &Expr) -> String {
    e.to_string().replace(&format!("{STREAM_NOW}()"), "now()")
}

/// Whether `e` is a call of `now()` (as [`STREAM_NOW`]).
pub fn is_now(e: &Expr) -> bool {
    matches!(e, Expr::ScalarFunction(f) if f.name() == STREAM_NOW)
}

/// Whether `e` never decreases as `now()` grows: `now()` itself, a cast of such an expression,
/// or such an expression plus or minus one without `now()` and without columns (the forms
/// `now() - INTERVAL '1 hour'`, `now()::date + 1`). Only these bound a temporal filter.
pub fn non_decreasing_in_now(e: &Expr) -> bool {
    use datafusion::logical_expr::{BinaryExpr, Operator};
    let constant = |e: &Expr| !contains_now(e) && e.column_refs().is_empty();
    match e {
        e if is_now(e) => true,
        Expr::Cast(c) => non_decreasing_in_now(&c.expr),
        Expr::TryCast(c) => non_decreasing_in_now(&c.expr),
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Plus,
            right,
        }) => {
            (non_decreasing_in_now(left) && constant(right))
                || (constant(left) && non_decreasing_in_now(right))
        }
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Minus,
            right,
        }) => non_decreasing_in_now(left) && constant(right),
        _ => false,
    }
}

/// Whether `e` calls `now()` (as [`STREAM_NOW`]).
pub fn contains_now(e: &Expr) -> bool {
    calls(e, STREAM_NOW)
}

/// Replaces every `now()` of a view's (unoptimized) plan by [`STREAM_NOW`], and refuses the
/// other functions whose value changes from run to run ([`check_view_functions`]).
///
/// # Errors
/// `0A000` naming such a function.
pub fn mark_now(plan: LogicalPlan) -> Result<LogicalPlan> {
    check_view_functions(&plan)?;
    let plan = plan
        .transform_up_with_subqueries(|node| {
            // Output columns keep their names (`now()` stays `now()`).
            let names = NamePreserver::new(&node);
            node.map_expressions(|e| {
                let saved = names.save(&e);
                let rewritten = e.transform_up(|e| match &e {
                    Expr::ScalarFunction(f) if f.name() == "now" && f.args.is_empty() => {
                        Ok(Transformed::yes(stream_now()))
                    }
                    _ => Ok(Transformed::no(e)),
                })?;
                Ok(rewritten.update_data(|e| saved.restore(e)))
            })
        })?
        .data;
    Ok(plan)
}

/// Refuses, with `0A000`, the functions whose value changes from run to run that a view
/// cannot maintain: volatile ones (`random()`, `uuid()`) and the time functions other than
/// `now()` (`current_date`, `current_time`, `localtime`, `localtimestamp`). `PROCTIME()` passes
/// here; the streaming planner takes it in a SELECT list over rows never retracted.
///
/// # Errors
/// As said.
pub fn check_view_functions(plan: &LogicalPlan) -> Result<()> {
    let mut bad: Option<String> = None;
    plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|n| {
                if let Expr::ScalarFunction(f) = n {
                    let name = f.name();
                    let volatile = f.func.signature().volatility == Volatility::Volatile;
                    let time = matches!(
                        name,
                        "current_date" | "current_time" | "localtime" | "localtimestamp"
                    );
                    if (volatile || time)
                        && name != STREAM_NOW
                        && name != PROC_TIME
                        && name != crate::sql::lookup_join::LOOKUP_SIDE
                    {
                        bad = Some(name.to_string());
                        return Ok(TreeNodeRecursion::Stop);
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })?;
        Ok(if bad.is_some() {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    })?;
    match bad {
        Some(name) => Err(Error::not_supported(format!(
            "{name}() in a materialized view is not supported: its value changes from run to \
             run (now() is supported in a temporal filter: WHERE ts > now() - INTERVAL '1 hour')"
        ))),
        None => Ok(()),
    }
}

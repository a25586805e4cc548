//! Watermarks through expressions and multi-input operators.
//!
//! A watermark on an input column says every row still to come has a value `>=` it there
//! (Flink's definition; RisingWave's column watermarks). An expression keeps a watermark when
//! it is non-decreasing in that one column: the column itself, casts between time types,
//! `+`/`-` of a constant, and `date_bin`/`date_trunc` with constant width and origin (what
//! `TUMBLE` and `HOP` are rewritten into). Its watermark is then the expression evaluated
//! at the input's watermark. Anything else has none.

use std::sync::Arc;

use arrow::array::new_null_array;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{ColumnarValue, Operator as BinaryOp};
use datafusion::physical_expr::expressions::{BinaryExpr, CastExpr, Column, Literal, TryCastExpr};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};

use crate::stream::{Watermarks, watermark_of};

fn is_time(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64
    )
}

fn is_constant(e: &Arc<dyn PhysicalExpr>) -> bool {
    e.is::<Literal>() || collect_columns(e).is_empty()
}

/// The one input column `e` is non-decreasing in, if it is.
pub fn monotone_column(e: &Arc<dyn PhysicalExpr>) -> Option<usize> {
    let any: &dyn PhysicalExpr = e.as_ref();
    if let Some(c) = any.downcast_ref::<Column>() {
        return Some(c.index());
    }
    if let Some(c) = any.downcast_ref::<CastExpr>() {
        return is_time(c.cast_type())
            .then(|| monotone_column(c.expr()))
            .flatten();
    }
    if let Some(c) = any.downcast_ref::<TryCastExpr>() {
        return is_time(c.cast_type())
            .then(|| monotone_column(c.expr()))
            .flatten();
    }
    if let Some(b) = any.downcast_ref::<BinaryExpr>() {
        return match b.op() {
            BinaryOp::Plus if is_constant(b.left()) => monotone_column(b.right()),
            BinaryOp::Plus | BinaryOp::Minus if is_constant(b.right()) => monotone_column(b.left()),
            _ => None,
        };
    }
    if let Some(f) = any.downcast_ref::<ScalarFunctionExpr>() {
        let args = f.args();
        return match f.name() {
            "date_bin" if args.len() >= 2 => (is_constant(&args[0])
                && args[2..].iter().all(is_constant))
            .then(|| monotone_column(&args[1]))
            .flatten(),
            "date_trunc" if args.len() == 2 => is_constant(&args[0])
                .then(|| monotone_column(&args[1]))
                .flatten(),
            _ => None,
        };
    }
    None
}

/// The watermark of `e` (over `schema`) given its input's watermarks, if `e` keeps one.
pub fn through_expr(
    e: &Arc<dyn PhysicalExpr>,
    schema: &SchemaRef,
    input: &Watermarks,
) -> Option<ScalarValue> {
    let column = monotone_column(e)?;
    let w = watermark_of(input, column)?;
    // One row: the watermark in its column, NULL elsewhere (`e` reads no other column).
    let columns = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if i == column {
                w.to_array_of_size(1)
            } else {
                Ok(new_null_array(f.data_type(), 1))
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    let nullable: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(nullable)), columns).ok()?;
    let value = match e.evaluate(&batch).ok()? {
        ColumnarValue::Scalar(s) => s,
        ColumnarValue::Array(a) => ScalarValue::try_from_array(&a, 0).ok()?,
    };
    (!value.is_null()).then_some(value)
}

/// The watermarks of an operator whose output column `i` (of `out`) is `exprs[i]` over its
/// input (of schema `input_schema`, watermarks `input`): a projection's columns, an
/// aggregate's group columns.
pub fn through_exprs(
    exprs: &[Arc<dyn PhysicalExpr>],
    input_schema: &SchemaRef,
    out: &SchemaRef,
    input: &Watermarks,
) -> Watermarks {
    if input.is_empty() {
        return Watermarks::new();
    }
    exprs
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let w = through_expr(e, input_schema, input)?;
            let t = out.field(i).data_type();
            Some((
                i,
                if w.data_type() == *t {
                    w
                } else {
                    w.cast_to(t).ok()?
                },
            ))
        })
        .collect()
}

/// Which of `exprs` keep a watermark of one of the input columns `watermarked` (decided from
/// the plan alone, as [`through_exprs`] at run time).
pub fn watermarked_exprs(exprs: &[Arc<dyn PhysicalExpr>], watermarked: &[usize]) -> Vec<usize> {
    exprs
        .iter()
        .enumerate()
        .filter(|(_, e)| monotone_column(e).is_some_and(|c| watermarked.contains(&c)))
        .map(|(i, _)| i)
        .collect()
}

/// The watermarks of a multi-input operator's output whose column `i` is column `i` of every
/// input (a union): per column, the least of the inputs' watermarks, if every input has one.
pub fn least_of(inputs: &[Watermarks], columns: usize) -> Watermarks {
    (0..columns)
        .filter_map(|c| {
            let mut least: Option<ScalarValue> = None;
            for w in inputs {
                let v = watermark_of(w, c)?;
                least = Some(match least {
                    Some(l) if l <= *v => l,
                    _ => v.clone(),
                });
            }
            least.map(|l| (c, l))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::testing::physical;
    use arrow::datatypes::TimeUnit;

    fn ts_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
        ]))
    }

    /// 2024-01-01 00:00:11 in ns.
    const T11: i64 = 1_704_067_211_000_000_000;

    fn at(ns: i64) -> ScalarValue {
        ScalarValue::TimestampNanosecond(Some(ns), None)
    }

    #[test]
    fn monotone_expressions_carry_the_watermark_through() {
        let s = ts_schema();
        let input: Watermarks = vec![(1, at(T11))];
        let w = |sql: &str| through_expr(&physical(sql, &s), &s, &input);
        assert_eq!(w("ts"), Some(at(T11)));
        assert_eq!(w("ts - INTERVAL '1 second'"), Some(at(T11 - 1_000_000_000)));
        // TUMBLE's window_start and window_end.
        assert_eq!(
            w("date_bin(INTERVAL '10 seconds', ts)"),
            Some(at(T11 - 1_000_000_000))
        );
        assert_eq!(
            w("date_bin(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds'"),
            Some(at(T11 + 9_000_000_000))
        );
        assert_eq!(
            w("date_trunc('minute', ts)"),
            Some(at(T11 - 11_000_000_000))
        );
        // Not non-decreasing in ts, or another column.
        assert_eq!(w("TIMESTAMP '2030-01-01 00:00:00' - ts"), None);
        assert_eq!(w("id"), None);
        assert_eq!(w("extract(second FROM ts)"), None);
        assert_eq!(
            watermarked_exprs(&[physical("ts", &s), physical("id + 1", &s)], &[1]),
            vec![0]
        );
    }

    #[test]
    fn a_union_has_the_least_watermark_of_columns_every_input_has() {
        let a: Watermarks = vec![(0, at(5)), (1, at(9))];
        let b: Watermarks = vec![(0, at(7))];
        assert_eq!(least_of(&[a.clone(), b], 2), vec![(0, at(5))]);
        assert_eq!(least_of(&[a.clone(), Watermarks::new()], 2), vec![]);
        assert_eq!(least_of(std::slice::from_ref(&a), 2), a);
    }
}

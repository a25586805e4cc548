//! `HashAgg`: incremental GROUP BY with count, sum, avg, min, max, count(DISTINCT), bool_and,
//! bool_or, bit_and, bit_or, bit_xor, variance and standard deviation, string_agg and
//! array_agg (with `ORDER BY` inside the call), the ordered-set aggregates mode,
//! percentile_disc and percentile_cont, each with an optional `FILTER (WHERE ...)`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, Decimal128Array, Int64Array, UInt32Array,
};
use arrow::compute::SortOptions;
use arrow::datatypes::{
    DataType, Decimal128Type, Field, Float64Type, Int64Type, Schema, SchemaRef,
};
use arrow::row::{RowConverter, Rows, SortField};
use datafusion::common::utils::SingleRowListArrayBuilder;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::scalar::ScalarValue;

use crate::common::ChangeBatch;
use crate::common::exact_sum::ExactSum;
use crate::error::{Error, Result};
use crate::sql::functions::float_sum::float_sum_value;
use crate::sql::functions::int_avg::{AVG_SCALE, avg_value, int_avg_value, sum_value};
use crate::sql::functions::ordered_set::{cont_value, disc_position, mode_index};
use crate::state::StateTable;
use crate::state::table::{KeyLayout, batch_from_columns, consolidate};

use crate::state::table::KeyRange;
use crate::stream::watermark::through_expr;
use crate::stream::{EpochContext, Operator, StateVisitor, Watermarks, input_path, state_name};

/// The aggregate functions maintained incrementally (with retractions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggKind {
    /// `count(x)`, and `count(*)` as `count(1)`: non-null values, weighted.
    Count,
    /// `sum(x)`: NULL when no non-null value remains.
    Sum,
    /// `avg(x)`: sum / count of non-null values.
    Avg,
    /// `min(x)`: kept as a multiset of values, so deleting the minimum finds the next one.
    Min,
    /// `max(x)`: as `Min`.
    Max,
    /// `count(DISTINCT x)`: a multiset of values; the result is its number of distinct keys.
    CountDistinct,
    /// `bit_and(x)` over integers: per bit, the number of values with the bit set; a bit is
    /// in the result when all values have it.
    BitAnd,
    /// `bit_or(x)`: a bit is in the result when some value has it (per-bit counts).
    BitOr,
    /// `bit_xor(x)`: a bit is in the result when an odd number of values has it.
    BitXor,
    /// `var_samp`/`var_pop`/`stddev_samp`/`stddev_pop`: a multiset of values; a changed group
    /// is recomputed from it in two passes (mean, then squared deviations), so retractions
    /// leave no rounding residue. `population`: divide by n, else n - 1 (NULL for one
    /// value); `root`: the standard deviation.
    Variance {
        /// Population (n) rather than sample (n - 1) statistics.
        population: bool,
        /// Square root of the variance.
        root: bool,
    },
    /// `string_agg(x, delimiter [ORDER BY ...])`: the non-NULL values in order, joined by a
    /// constant delimiter; kept as a multiset of (order keys, value) rows.
    StringAgg,
    /// `array_agg(x [ORDER BY ...])`: the values, NULLs included, in order; as `StringAgg`.
    ArrayAgg,
    /// `mode() WITHIN GROUP (ORDER BY x [DESC])`: a multiset of the non-NULL values in the
    /// call's order; the most frequent, the first on a tie.
    Mode {
        /// `ORDER BY x DESC`.
        descending: bool,
    },
    /// `percentile_disc(f) WITHIN GROUP (ORDER BY x [DESC])`: as `Mode`; the first value
    /// whose position reaches f · n ([`AggCall::fraction`]).
    PercentileDisc {
        /// `ORDER BY x DESC`.
        descending: bool,
    },
    /// `percentile_cont(f) WITHIN GROUP (ORDER BY x [DESC])` of `double precision`: as
    /// `Mode`; the value at position f · (n - 1), interpolated between its neighbours.
    PercentileCont {
        /// `ORDER BY x DESC`.
        descending: bool,
    },
}

impl AggKind {
    /// True when the call's value table holds its values in descending order: `max`, and the
    /// ordered-set aggregates `WITHIN GROUP (ORDER BY x DESC)`.
    fn descending(self) -> bool {
        match self {
            AggKind::Max => true,
            AggKind::Mode { descending }
            | AggKind::PercentileDisc { descending }
            | AggKind::PercentileCont { descending } => descending,
            _ => false,
        }
    }

    /// True for the aggregates that keep an ordered multiset of their values per group.
    fn keeps_values(self) -> bool {
        matches!(
            self,
            AggKind::Min
                | AggKind::Max
                | AggKind::CountDistinct
                | AggKind::Variance { .. }
                | AggKind::StringAgg
                | AggKind::ArrayAgg
                | AggKind::Mode { .. }
                | AggKind::PercentileDisc { .. }
                | AggKind::PercentileCont { .. }
        )
    }
}

/// One `ORDER BY` key: inside an aggregate call (`string_agg(x, ',' ORDER BY y DESC)`), or of a
/// window or Top-N ([`crate::stream::ops::over_window`]).
#[derive(Clone, Debug)]
pub struct AggOrder {
    /// The key over the input schema.
    pub expr: Arc<dyn PhysicalExpr>,
    /// The key's type.
    pub data_type: DataType,
    /// Direction and NULL placement.
    pub options: SortOptions,
}

/// One aggregate call of a GROUP BY.
#[derive(Clone)]
pub struct AggCall {
    /// Which function.
    pub kind: AggKind,
    /// The argument over the input schema.
    pub arg: Arc<dyn PhysicalExpr>,
    /// The argument's type.
    pub arg_type: DataType,
    /// The result type (as DataFusion's planner gives it).
    pub out_type: DataType,
    /// `FILTER (WHERE ...)`: only rows for which it is true reach the aggregate.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// `ORDER BY` inside the call (used by `StringAgg` and `ArrayAgg`; empty otherwise).
    pub order_by: Vec<AggOrder>,
    /// `string_agg`'s delimiter (a constant; NULL joins with nothing, as in PostgreSQL).
    pub delimiter: String,
    /// `percentile_disc`'s and `percentile_cont`'s fraction, in [0, 1] (`None`: NULL, so the
    /// result is NULL); unused by the other calls.
    pub fraction: Option<f64>,
    /// Display name, for EXPLAIN.
    pub display: String,
}

/// Per-group accumulator of one call: its scalar part. The aggregates that keep values keep
/// them in the call's value state table, not here.
#[derive(Debug, Clone, PartialEq)]
enum Acc {
    Count(i64),
    /// Integer sum (i128: no overflow before 2^127).
    SumInt {
        n: i64,
        sum: i128,
    },
    /// Float sum: exact, so retractions leave no residue ([`ExactSum`]).
    SumFloat {
        n: i64,
        sum: ExactSum,
    },
    /// Decimal sum in units of the argument's scale.
    SumDecimal {
        n: i64,
        sum: i128,
    },
    /// Per bit (least significant first), the weighted number of values with it set; `n`:
    /// the number of non-NULL values.
    Bits {
        n: i64,
        ones: Box<[i64; 64]>,
    },
    /// `count(DISTINCT x)`: the number of distinct values in the value state table.
    Distinct(i64),
    /// Min, max, variance, string_agg, array_agg: all in the value state table.
    Values,
}

/// A group's accumulators: its number of input rows (sum of weights) and one [`Acc`] per call.
#[derive(Debug, Clone, PartialEq)]
struct GroupAcc {
    count: i64,
    accs: Vec<Acc>,
}

/// A group changed in the current epoch.
struct Touched {
    key: Box<[u8]>,
    /// The accumulators stored before this epoch (`None`: no row stored for the group).
    old: Option<GroupAcc>,
    /// The accumulators with this epoch's changes.
    acc: GroupAcc,
    /// The output row emitted for the group before this epoch, if any.
    old_out: Option<Vec<ScalarValue>>,
}

/// Incremental hash aggregation.
///
/// Input: any schema. Output: the group columns, then one column per aggregate call
/// (DataFusion's `Aggregate` schema). Stream key: the group columns.
///
/// State, all in state tables (in the state backend, not in memory):
/// - the group table: one row per group, keyed by the group columns (`__group_<i>`), then
///   `__rows` (the group's input rows, Int64) and each call's accumulator columns: count
///   (Int64); sum and avg (`n` Int64, and the sum as Decimal128(38, 0) for integers and
///   decimals in the argument's scale, Float64 for floats); bit_and/or/xor (`n`, and 64
///   per-bit counts as 512 bytes of Binary); count(DISTINCT) (the number of distinct values);
/// - per call that keeps its values (min, max, count(DISTINCT), variance, string_agg,
///   array_agg, mode, percentile_disc, percentile_cont), a value table: the multiset of (group columns, `ORDER BY` keys of the call,
///   value), so a group's values are one prefix scan in the call's order. `max` stores its
///   values descending, so min and max are each the first row of the group's prefix.
///
/// Per epoch, for each changed group: one point read of its accumulator row, the changes'
/// values written to the value tables, and one accumulator row written back; the group's
/// previous output row is recomputed from the state as it was before the epoch. On the
/// barrier each changed group emits `-1` of its previous row and `+1` of its new row (nothing
/// when unchanged); a group whose count drops to zero is retracted and its row deleted.
/// Cost: O(changed groups × log n), plus, for variance, string_agg, array_agg and the
/// ordered-set aggregates, the values
/// of the changed groups (their result depends on all of them). Without GROUP BY there is one
/// group that always exists, so the view has one row even over empty input.
pub struct HashAgg {
    /// The input operator.
    pub input: Box<dyn Operator>,
    group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    aggs: Vec<AggCall>,
    schema: SchemaRef,
    key_converter: Option<RowConverter>,
    /// The accumulators of a new group (they fix the group table's columns).
    template: Vec<Acc>,
    /// One row per group (see the type's docs).
    groups: StateTable,
    /// Per call, its value table when it keeps values.
    values: Vec<Option<StateTable>>,
    /// Whether an epoch has run since the operator was built (the global aggregate's row is
    /// then known to be out).
    started: bool,
    /// `EMIT ON WINDOW CLOSE`: the first group column alone, to encode its watermark as a
    /// key bound (see [`HashAgg::emit_on_window_close`]); `None` emits on update.
    close_on: Option<RowConverter>,
}

/// One change batch evaluated against the group keys, arguments and filters.
struct Evaluated {
    len: usize,
    keys: Option<Rows>,
    group_cols: Vec<ArrayRef>,
    args: Vec<ArgValues>,
    keep: Vec<Option<BooleanArray>>,
}

impl Evaluated {
    fn key(&self, i: usize) -> &[u8] {
        match &self.keys {
            Some(k) => k.row(i).data(),
            None => &[],
        }
    }

    /// Whether row `i` reaches call `j` (a FILTER that is NULL keeps it out, as false does).
    fn kept(&self, j: usize, i: usize) -> bool {
        self.keep[j]
            .as_ref()
            .is_none_or(|k| k.is_valid(i) && k.value(i))
    }
}

/// The index of the distinct value holding the 0-based `position` of a multiset given as its
/// distinct values' counts, in order (the last one past the end).
fn nth_of_multiset(counts: &[i64], position: i64) -> usize {
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c.max(&0);
        if position < seen {
            return i;
        }
    }
    counts.len().saturating_sub(1)
}

fn template_for(a: &AggCall) -> Acc {
    match a.kind {
        AggKind::Count => Acc::Count(0),
        AggKind::Sum | AggKind::Avg => match &a.arg_type {
            DataType::Float16 | DataType::Float32 | DataType::Float64 => Acc::SumFloat {
                n: 0,
                sum: ExactSum::default(),
            },
            DataType::Decimal128(_, _) | DataType::Decimal256(_, _) => {
                Acc::SumDecimal { n: 0, sum: 0 }
            }
            _ => Acc::SumInt { n: 0, sum: 0 },
        },
        AggKind::BitAnd | AggKind::BitOr | AggKind::BitXor => Acc::Bits {
            n: 0,
            ones: Box::new([0; 64]),
        },
        AggKind::CountDistinct => Acc::Distinct(0),
        _ => Acc::Values,
    }
}

/// The group table's columns of one accumulator.
fn acc_fields(j: usize, acc: &Acc) -> Vec<Field> {
    let f = |name: &str, t: DataType| Field::new(format!("__acc_{j}_{name}"), t, true);
    let wide = DataType::Decimal128(38, 0);
    match acc {
        Acc::Count(_) => vec![f("count", DataType::Int64)],
        Acc::SumInt { .. } | Acc::SumDecimal { .. } => {
            vec![f("n", DataType::Int64), f("sum", wide)]
        }
        Acc::SumFloat { .. } => vec![f("n", DataType::Int64), f("sum", DataType::Binary)],
        Acc::Bits { .. } => vec![f("n", DataType::Int64), f("ones", DataType::Binary)],
        Acc::Distinct(_) => vec![f("distinct", DataType::Int64)],
        Acc::Values => vec![],
    }
}

impl HashAgg {
    /// Builds the operator; `group_types` are the types of the group expressions.
    ///
    /// # Errors
    /// Arrow errors when a group, argument or order key type has no row encoding.
    pub fn try_new(
        input: Box<dyn Operator>,
        group_exprs: Vec<Arc<dyn PhysicalExpr>>,
        group_types: Vec<DataType>,
        aggs: Vec<AggCall>,
        schema: SchemaRef,
    ) -> Result<Self> {
        let key_converter = if group_exprs.is_empty() {
            None
        } else {
            Some(RowConverter::new(
                group_types.iter().cloned().map(SortField::new).collect(),
            )?)
        };
        let group_fields: Vec<Field> = group_types
            .iter()
            .enumerate()
            .map(|(i, t)| Field::new(format!("__group_{i}"), t.clone(), true))
            .collect();
        let template: Vec<Acc> = aggs.iter().map(template_for).collect();
        let mut fields = group_fields.clone();
        fields.push(Field::new("__rows", DataType::Int64, true));
        for (j, acc) in template.iter().enumerate() {
            fields.extend(acc_fields(j, acc));
        }
        let groups = StateTable::new(Arc::new(Schema::new(fields)))?;
        let values = aggs
            .iter()
            .map(|a| {
                if !a.kind.keeps_values() {
                    return Ok(None);
                }
                let g = group_fields.len();
                let mut fields = group_fields.clone();
                let mut key: Vec<(usize, SortOptions)> =
                    (0..g).map(|i| (i, SortOptions::default())).collect();
                for (k, o) in a.order_by.iter().enumerate() {
                    fields.push(Field::new(
                        format!("__order_{k}"),
                        o.data_type.clone(),
                        true,
                    ));
                    key.push((g + k, o.options));
                }
                fields.push(Field::new("__value", a.arg_type.clone(), true));
                // Max keeps its values descending: its result is the first of the group. The
                // ordered-set aggregates keep them in their WITHIN GROUP order.
                let value_order = SortOptions {
                    descending: a.kind.descending(),
                    nulls_first: true,
                };
                key.push((fields.len() - 1, value_order));
                let layout = KeyLayout::with_options(Arc::new(Schema::new(fields)), &key)?;
                Ok(Some(StateTable::with_layout(Arc::new(layout))))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(HashAgg {
            input,
            group_exprs,
            aggs,
            schema,
            key_converter,
            template,
            groups,
            values,
            started: false,
            close_on: None,
        })
    }

    /// Makes the aggregate emit on window close (RisingWave's `EMIT ON WINDOW CLOSE`; Flink's
    /// window aggregation): no output while a group changes; once the watermark of the
    /// first group column passes a group's value there, the group is final, so its row is
    /// emitted once (an insert, never retracted) and its state deleted. The input must be
    /// append-only (the planner checks). Closing reads only the closed groups: a range of the
    /// group table below the watermark, O(log n + closed groups), so the state holds the open
    /// windows only.
    ///
    /// # Errors
    /// `0A000` without a group column; Arrow errors encoding its type.
    pub fn emit_on_window_close(mut self) -> Result<Self> {
        let Some(first) = self.group_exprs.first() else {
            return Err(Error::not_supported(
                "EMIT ON WINDOW CLOSE without GROUP BY",
            ));
        };
        let t = first.data_type(self.input.schema().as_ref())?;
        self.close_on = Some(RowConverter::new(vec![SortField::new(t)])?);
        Ok(self)
    }

    /// Emits and deletes the groups whose first group column is below its watermark.
    fn close_windows(&mut self, ctx: &EpochContext) -> Result<Vec<ChangeBatch>> {
        let Some(conv) = &self.close_on else {
            return Ok(vec![]);
        };
        let input = self.input.watermarks(ctx);
        if input.is_empty() {
            return Ok(vec![]);
        }
        let in_schema = self.input.schema();
        let Some(w) = through_expr(&self.group_exprs[0], &in_schema, &input) else {
            return Ok(vec![]);
        };
        let t = self.groups.schema().field(0).data_type().clone();
        let w = if w.data_type() == t {
            w
        } else {
            w.cast_to(&t)?
        };
        let below = KeyRange::below(conv, &w)?;
        let closed = self.groups.snapshot().scan(&below, None)?;
        let g = self.group_exprs.len();
        let mut out = Vec::new();
        for batch in &closed {
            if batch.num_rows() == 0 {
                continue;
            }
            let accs = self.decode_accs(batch)?;
            let keys = match &self.key_converter {
                Some(k) => k.convert_columns(&batch.columns()[..g])?,
                None => return Err(Error::Internal("window close without group".into())),
            };
            let mut values = Vec::with_capacity(accs.len());
            for (i, acc) in accs.iter().enumerate() {
                values.push(self.outputs(keys.row(i).data(), acc)?);
            }
            let mut columns: Vec<ArrayRef> = batch.columns()[..g].to_vec();
            for j in 0..self.aggs.len() {
                let col = ScalarValue::iter_to_array(values.iter().map(|v| v[j].clone()))?;
                let target = self.schema.field(g + j).data_type();
                columns.push(if col.data_type() != target {
                    arrow::compute::cast(&col, target)?
                } else {
                    col
                });
            }
            let rows = batch_from_columns(&self.schema, columns, batch.num_rows())?;
            out.push(ChangeBatch::inserts(rows));
        }
        if out.is_empty() {
            return Ok(out);
        }
        for batch in closed {
            self.groups.apply(&ChangeBatch::deletes(batch))?;
        }
        for table in self.values.iter_mut().flatten() {
            for batch in table.snapshot().scan(&below, None)? {
                table.apply(&ChangeBatch::deletes(batch))?;
            }
        }
        Ok(out)
    }

    fn is_global(&self) -> bool {
        self.key_converter.is_none()
    }

    fn evaluate(&self, change: &ChangeBatch) -> Result<Evaluated> {
        let n = change.len();
        let batch = &change.batch;
        let group_cols = self
            .group_exprs
            .iter()
            .map(|e| Ok(e.evaluate(batch)?.into_array(n)?))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let keys = match &self.key_converter {
            Some(conv) => Some(conv.convert_columns(&group_cols)?),
            None => None,
        };
        let mut args = Vec::with_capacity(self.aggs.len());
        let mut keep = Vec::with_capacity(self.aggs.len());
        for a in &self.aggs {
            let arr = a.arg.evaluate(batch)?.into_array(n)?;
            let order = a
                .order_by
                .iter()
                .map(|o| Ok(o.expr.evaluate(batch)?.into_array(n)?))
                .collect::<Result<Vec<ArrayRef>>>()?;
            args.push(ArgValues::new(a.kind, &a.arg_type, arr, order)?);
            keep.push(match &a.filter {
                Some(f) => {
                    let mask = f.evaluate(batch)?.into_array(n)?;
                    let mask = mask.as_boolean_opt().ok_or_else(|| {
                        Error::plan("42804", "argument of FILTER must be type boolean")
                    })?;
                    Some(mask.clone())
                }
                None => None,
            });
        }
        Ok(Evaluated {
            len: n,
            keys,
            group_cols,
            args,
            keep,
        })
    }

    /// Reads the stored accumulators of the touched groups (one seek each, through one
    /// iterator) and the output each had before this epoch.
    fn load(&self, touched: &mut [Touched]) -> Result<()> {
        let mut found: Vec<(usize, Box<[u8]>)> = Vec::new();
        let keys: Vec<&[u8]> = touched.iter().map(|g| g.key.as_ref()).collect();
        self.groups.scan_prefixes_while(&keys, &mut |t, k, _| {
            found.push((t, Box::from(k)));
            Ok(false)
        })?;
        if found.is_empty() {
            return Ok(());
        }
        let batch = self
            .groups
            .layout()
            .decode(found.iter().map(|(_, k)| k.as_ref()), found.len())?;
        let accs = self.decode_accs(&batch)?;
        for ((t, _), acc) in found.into_iter().zip(accs) {
            let group = &mut touched[t];
            group.acc = acc.clone();
            group.old_out = Some(self.outputs(&group.key, &acc)?);
            group.old = Some(acc);
        }
        Ok(())
    }

    /// The accumulators of each row of a batch of the group table.
    fn decode_accs(&self, batch: &arrow::array::RecordBatch) -> Result<Vec<GroupAcc>> {
        let g = self.group_exprs.len();
        let int = |c: usize| -> Result<&Int64Array> {
            batch
                .column(c)
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(|| Error::Internal("group table column is not Int64".into()))
        };
        let rows = int(g)?;
        let mut out: Vec<GroupAcc> = (0..batch.num_rows())
            .map(|i| GroupAcc {
                count: rows.value(i),
                accs: Vec::with_capacity(self.template.len()),
            })
            .collect();
        let mut col = g + 1;
        for t in &self.template {
            let width = acc_fields(0, t).len();
            for (i, group) in out.iter_mut().enumerate() {
                let acc = match t {
                    Acc::Count(_) => Acc::Count(int(col)?.value(i)),
                    Acc::Distinct(_) => Acc::Distinct(int(col)?.value(i)),
                    Acc::SumInt { .. } | Acc::SumDecimal { .. } => {
                        let n = int(col)?.value(i);
                        let sum = batch
                            .column(col + 1)
                            .as_primitive_opt::<Decimal128Type>()
                            .ok_or_else(|| Error::Internal("sum column is not decimal".into()))?
                            .value(i);
                        if matches!(t, Acc::SumInt { .. }) {
                            Acc::SumInt { n, sum }
                        } else {
                            Acc::SumDecimal { n, sum }
                        }
                    }
                    Acc::SumFloat { .. } => {
                        let column = batch.column(col + 1);
                        let sum = match column.as_binary_opt::<i32>() {
                            Some(bytes) => {
                                ExactSum::from_bytes(bytes.value(i)).ok_or_else(|| {
                                    Error::Internal("sum column holds no exact sum".into())
                                })?
                            }
                            // State written before sums were exact: a plain f64.
                            None => {
                                let mut sum = ExactSum::default();
                                let old =
                                    column.as_primitive_opt::<Float64Type>().ok_or_else(|| {
                                        Error::Internal("sum column is not binary".into())
                                    })?;
                                sum.add(old.value(i), 1);
                                sum
                            }
                        };
                        Acc::SumFloat {
                            n: int(col)?.value(i),
                            sum,
                        }
                    }
                    Acc::Bits { .. } => {
                        let bytes = batch
                            .column(col + 1)
                            .as_binary_opt::<i32>()
                            .ok_or_else(|| Error::Internal("bits column is not binary".into()))?
                            .value(i);
                        let mut ones = Box::new([0i64; 64]);
                        for (b, chunk) in bytes.chunks_exact(8).enumerate().take(64) {
                            let mut le = [0u8; 8];
                            le.copy_from_slice(chunk);
                            ones[b] = i64::from_le_bytes(le);
                        }
                        Acc::Bits {
                            n: int(col)?.value(i),
                            ones,
                        }
                    }
                    Acc::Values => Acc::Values,
                };
                group.accs.push(acc);
            }
            col += width;
        }
        Ok(out)
    }

    /// The group table rows of `(group key, accumulators)` with their weights.
    fn encode_accs(&self, rows: &[(&[u8], &GroupAcc, i64)]) -> Result<ChangeBatch> {
        let n = rows.len();
        let mut columns: Vec<ArrayRef> = Vec::new();
        if let Some(conv) = &self.key_converter {
            let parser = conv.parser();
            columns.extend(conv.convert_rows(rows.iter().map(|(k, _, _)| parser.parse(k)))?);
        }
        columns.push(Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|(_, a, _)| a.count),
        )));
        for (j, t) in self.template.iter().enumerate() {
            let accs = || rows.iter().map(move |(_, a, _)| &a.accs[j]);
            let n_of = |acc: &Acc| match acc {
                Acc::Count(c) | Acc::Distinct(c) => *c,
                Acc::SumInt { n, .. }
                | Acc::SumFloat { n, .. }
                | Acc::SumDecimal { n, .. }
                | Acc::Bits { n, .. } => *n,
                Acc::Values => 0,
            };
            match t {
                Acc::Values => {}
                Acc::Count(_) | Acc::Distinct(_) => {
                    columns.push(Arc::new(Int64Array::from_iter_values(accs().map(n_of))));
                }
                Acc::SumInt { .. } | Acc::SumDecimal { .. } => {
                    columns.push(Arc::new(Int64Array::from_iter_values(accs().map(n_of))));
                    let sums = accs().map(|a| match a {
                        Acc::SumInt { sum, .. } | Acc::SumDecimal { sum, .. } => *sum,
                        _ => 0,
                    });
                    columns.push(Arc::new(
                        Decimal128Array::from_iter_values(sums).with_precision_and_scale(38, 0)?,
                    ));
                }
                Acc::SumFloat { .. } => {
                    columns.push(Arc::new(Int64Array::from_iter_values(accs().map(n_of))));
                    let sums: Vec<Vec<u8>> = accs()
                        .map(|a| match a {
                            Acc::SumFloat { sum, .. } => sum.to_bytes(),
                            _ => ExactSum::default().to_bytes(),
                        })
                        .collect();
                    columns.push(Arc::new(BinaryArray::from_iter_values(sums)));
                }
                Acc::Bits { .. } => {
                    columns.push(Arc::new(Int64Array::from_iter_values(accs().map(n_of))));
                    let bytes: Vec<Vec<u8>> = accs()
                        .map(|a| match a {
                            Acc::Bits { ones, .. } => {
                                ones.iter().flat_map(|c| c.to_le_bytes()).collect()
                            }
                            _ => Vec::new(),
                        })
                        .collect();
                    columns.push(Arc::new(BinaryArray::from_iter_values(bytes)));
                }
            }
        }
        let batch = batch_from_columns(self.groups.schema(), columns, n)?;
        let weights: Int64Array = rows.iter().map(|(_, _, w)| *w).collect::<Vec<_>>().into();
        ChangeBatch::new(batch, weights)
    }

    /// The output values of a group with accumulators `acc` (value tables as they are now).
    fn outputs(&self, key: &[u8], acc: &GroupAcc) -> Result<Vec<ScalarValue>> {
        let mut out = Vec::with_capacity(self.aggs.len());
        for (j, a) in self.aggs.iter().enumerate() {
            let v = match &acc.accs[j] {
                Acc::Values => {
                    let table = self.values[j].as_ref().ok_or_else(|| {
                        Error::Internal("aggregate that keeps values without a table".into())
                    })?;
                    let mut keys: Vec<Box<[u8]>> = Vec::new();
                    let mut counts: Vec<i64> = Vec::new();
                    let first_only = matches!(a.kind, AggKind::Min | AggKind::Max);
                    table.scan_prefix_while(key, &mut |k, c| {
                        keys.push(Box::from(k));
                        counts.push(c);
                        Ok(!first_only)
                    })?;
                    let batch = table
                        .layout()
                        .decode(keys.iter().map(|k| k.as_ref()), keys.len())?;
                    let values = batch.column(batch.num_columns() - 1).clone();
                    self.value_of(j, values, &counts)?
                }
                acc => self.value(j, acc)?,
            };
            out.push(v);
        }
        Ok(out)
    }

    fn value(&self, call: usize, acc: &Acc) -> Result<ScalarValue> {
        let a = &self.aggs[call];
        let v = match (a.kind, acc) {
            (AggKind::Count, Acc::Count(c)) => ScalarValue::Int64(Some(*c)),
            (AggKind::CountDistinct, Acc::Distinct(c)) => ScalarValue::Int64(Some(*c)),
            (AggKind::Sum, Acc::SumInt { n, sum }) => {
                if *n == 0 {
                    ScalarValue::Int64(None)
                } else {
                    let v = i64::try_from(*sum)
                        .map_err(|_| Error::data("22003", "bigint out of range"))?;
                    ScalarValue::Int64(Some(v))
                }
            }
            // PostgreSQL's `sum(real)` is `real`; both fail with 22003 on overflow (as
            // PgFloatSum in batch queries).
            (AggKind::Sum, Acc::SumFloat { n, sum }) => {
                float_sum_value(*n, sum, a.out_type == DataType::Float32)?
            }
            (AggKind::Sum, Acc::SumDecimal { n, sum }) => {
                let (p, s) = match &a.out_type {
                    DataType::Decimal128(p, s) => (*p, *s),
                    _ => (38, self.arg_scale(call)),
                };
                // PostgreSQL's `sum(numeric)` never wraps (PgNumericSum in batch queries).
                ScalarValue::Decimal128(sum_value(*n, *sum)?, p, s)
            }
            // PostgreSQL's `avg(integer)` is `numeric` (PgIntAvg in batch queries).
            (AggKind::Avg, Acc::SumInt { n, sum }) => match &a.out_type {
                DataType::Decimal128(p, s) if *s == AVG_SCALE => {
                    ScalarValue::Decimal128(int_avg_value(*n, *sum), *p, *s)
                }
                _ => ScalarValue::Float64(if *n == 0 {
                    None
                } else {
                    Some(*sum as f64 / *n as f64)
                }),
            },
            (AggKind::Avg, Acc::SumFloat { n, sum }) => ScalarValue::Float64(if *n == 0 {
                None
            } else {
                Some(sum.value() / *n as f64)
            }),
            (AggKind::Avg, Acc::SumDecimal { n, sum }) => {
                let scale = self.arg_scale(call);
                match &a.out_type {
                    // PostgreSQL's `avg(numeric)`, as PgIntAvg in batch queries: 16 decimals
                    // or the argument's, rounded half away from zero.
                    DataType::Decimal128(p, s) if *s >= scale => {
                        ScalarValue::Decimal128(avg_value(*n, *sum, scale, *s)?, *p, *s)
                    }
                    _ => ScalarValue::Float64(if *n == 0 {
                        None
                    } else {
                        Some(*sum as f64 / 10f64.powi(scale as i32) / *n as f64)
                    }),
                }
            }
            (AggKind::BitAnd | AggKind::BitOr | AggKind::BitXor, Acc::Bits { n, ones }) => {
                if *n == 0 {
                    ScalarValue::Int64(None)
                } else {
                    let mut bits = 0u64;
                    for (b, c) in ones.iter().enumerate() {
                        let set = match a.kind {
                            AggKind::BitAnd => *c == *n,
                            AggKind::BitOr => *c > 0,
                            _ => c.rem_euclid(2) == 1,
                        };
                        if set {
                            bits |= 1 << b;
                        }
                    }
                    ScalarValue::Int64(Some(bits as i64))
                }
            }
            _ => {
                return Err(Error::Internal(
                    "aggregate state does not match its call".into(),
                ));
            }
        };
        Ok(v)
    }

    /// The scale of a decimal argument (0 for others).
    fn arg_scale(&self, call: usize) -> i8 {
        match &self.aggs[call].arg_type {
            DataType::Decimal128(_, s) | DataType::Decimal256(_, s) => *s,
            _ => 0,
        }
    }

    /// The result of a call that keeps values, from a group's distinct values in the call's
    /// order and each one's count (min and max: the first value only).
    fn value_of(&self, call: usize, values: ArrayRef, counts: &[i64]) -> Result<ScalarValue> {
        let a = &self.aggs[call];
        let v =
            match a.kind {
                AggKind::Min | AggKind::Max => {
                    if values.is_empty() {
                        ScalarValue::try_from(&a.arg_type)?
                    } else {
                        ScalarValue::try_from_array(&values, 0)?
                    }
                }
                AggKind::Variance { population, root } => {
                    let values = arrow::compute::cast(&values, &DataType::Float64)?;
                    let values = values.as_primitive::<Float64Type>();
                    let n: i64 = counts.iter().sum();
                    let v = if n == 0 || (n == 1 && !population) {
                        None
                    } else {
                        let mut sum = 0.0;
                        for (i, c) in counts.iter().enumerate() {
                            sum += values.value(i) * *c as f64;
                        }
                        let mean = sum / n as f64;
                        let mut m2 = 0.0;
                        for (i, c) in counts.iter().enumerate() {
                            let d = values.value(i) - mean;
                            m2 += d * d * *c as f64;
                        }
                        let var = m2 / if population { n } else { n - 1 } as f64;
                        Some(if root { var.sqrt() } else { var })
                    };
                    ScalarValue::Float64(v)
                }
                AggKind::StringAgg => {
                    if values.is_empty() {
                        ScalarValue::Utf8(None)
                    } else {
                        let values = arrow::compute::cast(&values, &DataType::Utf8)?;
                        let values = values.as_string::<i32>();
                        let mut out = String::new();
                        let mut first = true;
                        for (i, c) in counts.iter().enumerate() {
                            for _ in 0..*c {
                                if !first {
                                    out.push_str(&a.delimiter);
                                }
                                first = false;
                                out.push_str(values.value(i));
                            }
                        }
                        ScalarValue::Utf8(Some(out))
                    }
                }
                AggKind::ArrayAgg => {
                    if values.is_empty() {
                        ScalarValue::try_from(&a.out_type)?
                    } else {
                        let mut take = Vec::new();
                        for (i, c) in counts.iter().enumerate() {
                            take.extend(std::iter::repeat_n(i as u32, (*c).max(0) as usize));
                        }
                        let values = arrow::compute::take(&values, &UInt32Array::from(take), None)?;
                        SingleRowListArrayBuilder::new(values).build_list_scalar()
                    }
                }
                AggKind::Mode { .. } => match mode_index(counts) {
                    Some(i) => ScalarValue::try_from_array(&values, i)?,
                    None => ScalarValue::try_from(&a.out_type)?,
                },
                AggKind::PercentileDisc { .. } => {
                    let n: i64 = counts.iter().sum();
                    match a.fraction.and_then(|f| disc_position(f, n)) {
                        Some(position) => {
                            ScalarValue::try_from_array(&values, nth_of_multiset(counts, position))?
                        }
                        None => ScalarValue::try_from(&a.out_type)?,
                    }
                }
                AggKind::PercentileCont { .. } => {
                    let n: i64 = counts.iter().sum();
                    let values = arrow::compute::cast(&values, &DataType::Float64)?;
                    let values = values.as_primitive::<Float64Type>();
                    ScalarValue::Float64(a.fraction.and_then(|f| {
                        cont_value(f, n, |i| values.value(nth_of_multiset(counts, i)))
                    }))
                }
                _ => {
                    return Err(Error::Internal("aggregate does not keep values".into()));
                }
            };
        Ok(v)
    }

    /// Applies one evaluated change: the touched groups' accumulators (in memory until the
    /// barrier) and the value tables (written now).
    fn update(
        &mut self,
        e: &Evaluated,
        change: &ChangeBatch,
        index: &HashMap<Box<[u8]>, usize>,
        touched: &mut [Touched],
    ) -> Result<()> {
        let weights = change.weights.values();
        let slots: Vec<usize> = (0..change.len())
            .map(|i| {
                index
                    .get(e.key(i))
                    .copied()
                    .ok_or_else(|| Error::Internal("group not touched".into()))
            })
            .collect::<Result<_>>()?;
        for (i, w) in weights.iter().enumerate() {
            touched[slots[i]].acc.count += w;
        }
        for j in 0..self.aggs.len() {
            let arg = &e.args[j];
            if let ArgValues::Values { arr, order } = arg {
                self.update_values(j, e, change, arr, order, index, touched)?;
                continue;
            }
            for (i, w) in weights.iter().enumerate() {
                if e.kept(j, i) {
                    arg.update(&mut touched[slots[i]].acc.accs[j], i, *w)?;
                }
            }
        }
        Ok(())
    }

    /// Writes one change's values of call `j` to its value table; for count(DISTINCT),
    /// moves the touched groups' distinct counts by the values whose count crossed zero.
    #[allow(clippy::too_many_arguments)]
    fn update_values(
        &mut self,
        j: usize,
        e: &Evaluated,
        change: &ChangeBatch,
        arr: &ArrayRef,
        order: &[ArrayRef],
        index: &HashMap<Box<[u8]>, usize>,
        touched: &mut [Touched],
    ) -> Result<()> {
        let kind = self.aggs[j].kind;
        let n = change.len();
        let mask: BooleanArray = (0..n)
            .map(|i| Some(e.kept(j, i) && (kind == AggKind::ArrayAgg || arr.is_valid(i))))
            .collect();
        let table = self.values[j]
            .as_mut()
            .ok_or_else(|| Error::Internal("aggregate that keeps values without a table".into()))?;
        let mut columns = e.group_cols.clone();
        columns.extend(order.iter().cloned());
        columns.push(arr.clone());
        let rows = ChangeBatch::new(
            batch_from_columns(table.schema(), columns, n)?,
            change.weights.clone(),
        )?
        .filter(&mask)?;
        if rows.is_empty() {
            return Ok(());
        }
        if kind != AggKind::CountDistinct {
            return table.apply(&rows);
        }
        let rows = consolidate(table.schema(), &[rows])?;
        if rows.is_empty() {
            return Ok(());
        }
        let before = table.counts(&rows.batch)?;
        let g = self.group_exprs.len();
        let keys = match &self.key_converter {
            Some(conv) => Some(conv.convert_columns(&rows.batch.columns()[..g])?),
            None => None,
        };
        for (i, (b, w)) in before.iter().zip(rows.weights.values()).enumerate() {
            let after = b + w;
            let step = match (*b > 0, after > 0) {
                (false, true) => 1,
                (true, false) => -1,
                _ => 0,
            };
            if step == 0 {
                continue;
            }
            let key: &[u8] = match &keys {
                Some(k) => k.row(i).data(),
                None => &[],
            };
            let t = index
                .get(key)
                .copied()
                .ok_or_else(|| Error::Internal("group not touched".into()))?;
            if let Acc::Distinct(c) = &mut touched[t].acc.accs[j] {
                *c += step;
            }
        }
        table.apply(&rows)
    }

    /// At the barrier: each touched group's accumulator row written back and its output
    /// changes (the retraction of its old row, its new row).
    fn flush(&mut self, touched: Vec<Touched>) -> Result<Vec<ChangeBatch>> {
        let global = self.is_global();
        let mut writes: Vec<(&[u8], &GroupAcc, i64)> = Vec::new();
        let mut keys: Vec<&[u8]> = Vec::new();
        let mut values: Vec<Vec<ScalarValue>> = Vec::new();
        let mut weights: Vec<i64> = Vec::new();
        let mut news: Vec<Option<Vec<ScalarValue>>> = Vec::with_capacity(touched.len());
        for t in &touched {
            if t.acc.count < 0 {
                return Err(Error::Internal("group count below zero".into()));
            }
            let alive = t.acc.count > 0 || global;
            news.push(if alive {
                Some(self.outputs(&t.key, &t.acc)?)
            } else {
                None
            });
        }
        for (t, new) in touched.iter().zip(news) {
            let alive = new.is_some();
            if t.old.as_ref() != Some(&t.acc) || !alive {
                if let Some(old) = &t.old {
                    writes.push((&t.key, old, -1));
                }
                if alive {
                    writes.push((&t.key, &t.acc, 1));
                }
            }
            if t.old_out == new {
                continue;
            }
            if let Some(old) = &t.old_out {
                keys.push(&t.key);
                values.push(old.clone());
                weights.push(-1);
            }
            if let Some(new) = new {
                keys.push(&t.key);
                values.push(new);
                weights.push(1);
            }
        }
        if !writes.is_empty() {
            let rows = self.encode_accs(&writes)?;
            self.groups.apply(&rows)?;
        }
        if keys.is_empty() {
            return Ok(vec![]);
        }
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        if let Some(conv) = &self.key_converter {
            let parser = conv.parser();
            columns.extend(conv.convert_rows(keys.iter().map(|k| parser.parse(k)))?);
        }
        let offset = columns.len();
        for j in 0..self.aggs.len() {
            let col = ScalarValue::iter_to_array(values.iter().map(|v| v[j].clone()))?;
            let target = self.schema.field(offset + j).data_type();
            let col = if col.data_type() != target {
                arrow::compute::cast(&col, target)?
            } else {
                col
            };
            columns.push(col);
        }
        let batch = batch_from_columns(&self.schema, columns, keys.len())?;
        Ok(vec![ChangeBatch::new(batch, weights.into())?])
    }
}

/// An aggregate argument column, pre-cast to the accumulator's working type.
enum ArgValues {
    Count(ArrayRef),
    Int(ArrayRef),
    Float(ArrayRef),
    Decimal(ArrayRef),
    Bits(ArrayRef),
    /// The value and the call's `ORDER BY` keys, for the value table.
    Values {
        arr: ArrayRef,
        order: Vec<ArrayRef>,
    },
}

impl ArgValues {
    fn new(
        kind: AggKind,
        arg_type: &DataType,
        arr: ArrayRef,
        order: Vec<ArrayRef>,
    ) -> Result<Self> {
        Ok(match kind {
            AggKind::Count => ArgValues::Count(arr),
            AggKind::Sum | AggKind::Avg => match arg_type {
                DataType::Float16 | DataType::Float32 | DataType::Float64 => {
                    ArgValues::Float(arrow::compute::cast(&arr, &DataType::Float64)?)
                }
                DataType::Decimal128(_, _) => ArgValues::Decimal(arr),
                DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
                | DataType::Null => ArgValues::Int(arrow::compute::cast(&arr, &DataType::Int64)?),
                other => {
                    return Err(Error::not_supported(format!(
                        "sum/avg over {other} in a materialized view"
                    )));
                }
            },
            AggKind::BitAnd | AggKind::BitOr | AggKind::BitXor => {
                if !arg_type.is_integer() {
                    return Err(Error::not_supported(format!(
                        "bit_and/bit_or/bit_xor over {arg_type} in a materialized view"
                    )));
                }
                ArgValues::Bits(arrow::compute::cast(&arr, &DataType::Int64)?)
            }
            // The rest keep their values (`AggKind::keeps_values`).
            _ => ArgValues::Values { arr, order },
        })
    }

    fn update(&self, acc: &mut Acc, i: usize, w: i64) -> Result<()> {
        match (self, acc) {
            (ArgValues::Count(a), Acc::Count(c)) => {
                if a.is_valid(i) {
                    *c += w;
                }
            }
            (ArgValues::Int(a), Acc::SumInt { n, sum }) => {
                if a.is_valid(i) {
                    *n += w;
                    *sum += a.as_primitive::<Int64Type>().value(i) as i128 * w as i128;
                }
            }
            (ArgValues::Float(a), Acc::SumFloat { n, sum }) => {
                if a.is_valid(i) {
                    *n += w;
                    sum.add(a.as_primitive::<Float64Type>().value(i), w);
                }
            }
            (ArgValues::Decimal(a), Acc::SumDecimal { n, sum }) => {
                if a.is_valid(i) {
                    *n += w;
                    // Checked: a sum past 38 digits fails (22003) instead of wrapping.
                    *sum = a
                        .as_primitive::<Decimal128Type>()
                        .value(i)
                        .checked_mul(w as i128)
                        .and_then(|v| sum.checked_add(v))
                        .ok_or_else(|| Error::data("22003", "numeric field overflow"))?;
                }
            }
            (ArgValues::Bits(a), Acc::Bits { n, ones }) => {
                if a.is_valid(i) {
                    *n += w;
                    let v = a.as_primitive::<Int64Type>().value(i) as u64;
                    for (b, c) in ones.iter_mut().enumerate() {
                        if v & (1 << b) != 0 {
                            *c += w;
                        }
                    }
                }
            }
            _ => {
                return Err(Error::Internal(
                    "aggregate argument does not match its state".into(),
                ));
            }
        }
        Ok(())
    }
}

impl Operator for HashAgg {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process(&mut self, input: &EpochContext) -> Result<Vec<ChangeBatch>> {
        let changes: Vec<ChangeBatch> = self
            .input
            .process(input)?
            .into_iter()
            .filter(|c| !c.is_empty())
            .collect();
        let evaluated = changes
            .iter()
            .map(|c| self.evaluate(c))
            .collect::<Result<Vec<_>>>()?;
        // The groups this epoch touches, in first-seen order.
        let mut index: HashMap<Box<[u8]>, usize> = HashMap::new();
        let mut touched: Vec<Touched> = Vec::new();
        let fresh = GroupAcc {
            count: 0,
            accs: self.template.clone(),
        };
        let mut touch = |key: &[u8]| {
            if !index.contains_key(key) {
                index.insert(Box::from(key), touched.len());
                touched.push(Touched {
                    key: Box::from(key),
                    old: None,
                    acc: fresh.clone(),
                    old_out: None,
                });
            }
        };
        if !self.started && self.is_global() {
            // The global aggregate's row exists from the first epoch on, even over empty
            // input (when its row is stored already, this changes nothing).
            touch(&[]);
        }
        self.started = true;
        for e in &evaluated {
            for i in 0..e.len {
                touch(e.key(i));
            }
        }
        let mut out = Vec::new();
        if !touched.is_empty() {
            self.load(&mut touched)?;
            for (e, c) in evaluated.iter().zip(&changes) {
                self.update(e, c, &index, &mut touched)?;
            }
            out = self.flush(touched)?;
        }
        if self.close_on.is_some() {
            // Open windows emit nothing; the closed ones once, final.
            return self.close_windows(input);
        }
        Ok(out)
    }

    fn watermarks(&self, ctx: &EpochContext) -> Watermarks {
        let input = self.input.watermarks(ctx);
        crate::stream::watermark::through_exprs(
            &self.group_exprs,
            &self.input.schema(),
            &self.schema,
            &input,
        )
    }

    fn visit_state(&mut self, path: &str, f: &mut StateVisitor<'_>) -> Result<()> {
        f(&state_name(path, "hash_agg.groups"), &mut self.groups)?;
        for (i, t) in self.values.iter_mut().enumerate() {
            if let Some(t) = t {
                f(&state_name(path, &format!("hash_agg.values.{i}")), t)?;
            }
        }
        self.input.visit_state(&input_path(path, "input"), f)
    }

    fn restore(&mut self) -> Result<()> {
        // The group and value tables are the whole state: nothing to re-derive.
        self.input.restore()
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        let keys: Vec<String> = self.group_exprs.iter().map(|e| e.to_string()).collect();
        let aggs: Vec<&str> = self.aggs.iter().map(|a| a.display.as_str()).collect();
        let kept: Vec<&str> = self
            .aggs
            .iter()
            .zip(&self.values)
            .filter(|(_, t)| t.is_some())
            .map(|(a, _)| a.display.as_str())
            .collect();
        let values = if kept.is_empty() {
            String::new()
        } else {
            format!("; values of [{}] keyed by (group, value)", kept.join(", "))
        };
        let emit = if self.close_on.is_some() {
            format!(" emit on window close of {}", keys[0])
        } else {
            String::new()
        };
        out.push(format!(
            "{}StreamHashAgg: group_key=[{}] aggs=[{}]{} (state tables: accumulators keyed by [{}]{})",
            "  ".repeat(depth),
            keys.join(", "),
            aggs.join(", "),
            emit,
            keys.join(", "),
            values
        ));
        self.input.explain(depth + 1, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::testing::{Rel, epoch, expect, physical, restore_into, run, schema};

    fn call(kind: AggKind, arg: &str, input: &SchemaRef, out_type: DataType) -> AggCall {
        let expr = physical(arg, input);
        let arg_type = expr.data_type(input.as_ref()).unwrap();
        AggCall {
            kind,
            arg: expr,
            arg_type,
            out_type,
            filter: None,
            order_by: vec![],
            delimiter: String::new(),
            fraction: None,
            display: format!("{kind:?}({arg})"),
        }
    }

    /// `SELECT g, count(*), count(v), sum(v), min(v), max(v) FROM r GROUP BY g`.
    fn per_group(r: &Rel) -> HashAgg {
        per_group_over(r.scan(), &r.schema)
    }

    /// [`per_group`] over `input`, whose rows have the schema `s`.
    fn per_group_over(input: Box<dyn Operator>, s: &SchemaRef) -> HashAgg {
        HashAgg::try_new(
            input,
            vec![physical("g", s)],
            vec![DataType::Utf8],
            vec![
                call(AggKind::Count, "1", s, DataType::Int64),
                call(AggKind::Count, "v", s, DataType::Int64),
                call(AggKind::Sum, "v", s, DataType::Int64),
                call(AggKind::Min, "v", s, DataType::Int64),
                call(AggKind::Max, "v", s, DataType::Int64),
            ],
            schema("g:utf8 n:i64 nv:i64 total:i64 least:i64 most:i64"),
        )
        .unwrap()
    }

    /// [`per_group`] split into `n` instances by the hash of `g`, each over its feed.
    fn per_group_in_parallel(r: &Rel, n: usize) -> crate::stream::ops::exchange::Exchange {
        use crate::stream::ops::exchange::{Exchange, ExchangeInput};
        let s = r.schema.clone();
        Exchange::try_new(
            vec![ExchangeInput {
                upstream: r.scan(),
                edge: "input",
                keys: vec![physical("g", &s)],
                key_types: vec![DataType::Utf8],
            }],
            n,
            Arc::default(),
            |mut feeds| Ok(Box::new(per_group_over(feeds.remove(0), &s)) as Box<dyn Operator>),
        )
        .unwrap()
    }

    #[test]
    fn split_into_instances_by_key_emits_what_one_instance_would() {
        use crate::stream::ops::exchange::PARALLEL_MIN_ROWS;
        let r = Rel::new(1, ROWS);
        let mut par = per_group_in_parallel(&r, 3);
        // Small epochs: the instances run in turn.
        let out = run(
            &mut par,
            &epoch(&[(&r, "+1 | 'a', 1\n+1 | 'b', 2\n+1 | NULL, 3")]),
        );
        assert_eq!(
            out,
            expect("+1 | 'a', 1, 1, 1, 1, 1\n+1 | 'b', 1, 1, 2, 2, 2\n+1 | NULL, 1, 1, 3, 3, 3")
        );
        let out = run(&mut par, &epoch(&[(&r, "-1 | 'a', 1\n+1 | 'b', 4")]));
        assert_eq!(
            out,
            expect("-1 | 'a', 1, 1, 1, 1, 1\n-1 | 'b', 1, 1, 2, 2, 2\n+1 | 'b', 2, 2, 6, 2, 4")
        );
        // A large epoch: the instances run on threads. Groups g0..g9, values 0..n-1; group
        // gk holds the values congruent to k mod 10.
        let n = 10_000;
        assert!(n >= PARALLEL_MIN_ROWS);
        let rows: Vec<String> = (0..n).map(|i| format!("+1 | 'g{}', {i}", i % 10)).collect();
        let out = run(&mut par, &epoch(&[(&r, &rows.join("\n"))]));
        let per = n / 10;
        let want: Vec<String> = (0..10)
            .map(|k| {
                let total: usize = (0..per).map(|j| j * 10 + k).sum();
                format!(
                    "+1 | 'g{k}', {per}, {per}, {total}, {k}, {}",
                    (per - 1) * 10 + k
                )
            })
            .collect();
        assert_eq!(out, expect(&want.join("\n")));
        // Each instance holds only its own groups: 'b', NULL and g0..g9 across three.
        let mut groups = 0;
        let mut names = Vec::new();
        par.visit_state("root", &mut |name, t| {
            if name.ends_with("hash_agg.groups") {
                groups += t.len();
                names.push(name.to_string());
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(groups, 12);
        assert_eq!(
            names,
            [
                "root#0:hash_agg.groups",
                "root#1:hash_agg.groups",
                "root#2:hash_agg.groups"
            ]
        );
    }

    /// `SELECT count(*), sum(v) FROM r`.
    fn global(r: &Rel) -> HashAgg {
        let s = &r.schema;
        HashAgg::try_new(
            r.scan(),
            vec![],
            vec![],
            vec![
                call(AggKind::Count, "1", s, DataType::Int64),
                call(AggKind::Sum, "v", s, DataType::Int64),
            ],
            schema("n:i64 total:i64"),
        )
        .unwrap()
    }

    const ROWS: &str = "g:utf8 v:i64";

    /// The first three epochs of [`count_sum_min_max_per_group_across_epochs`], with the
    /// output each must give.
    fn first_epochs(r: &Rel, op: &mut HashAgg) {
        let out = run(
            op,
            &epoch(&[
                (r, "+1 | 'a', 5\n+1 | 'a', 3\n+1 | 'b', NULL"),
                (r, "+2 | 'a', 7\n+1 | NULL, 4"),
            ]),
        );
        assert_eq!(
            out,
            expect(
                "+1 | 'a', 4, 4, 22, 3, 7\n\
                 +1 | 'b', 1, 0, NULL, NULL, NULL\n\
                 +1 | NULL, 1, 1, 4, 4, 4"
            )
        );
        // The minimum goes: the next one comes from the stored values; one of the two
        // copies of the maximum goes: it stays the maximum.
        let out = run(op, &epoch(&[(r, "-1 | 'a', 3\n-1 | 'a', 7")]));
        assert_eq!(
            out,
            expect("-1 | 'a', 4, 4, 22, 3, 7\n+1 | 'a', 2, 2, 12, 5, 7")
        );
        let out = run(
            op,
            &epoch(&[(r, "-1 | 'a', 7\n+1 | 'b', 10\n-1 | NULL, 4\n+1 | NULL, 6")]),
        );
        assert_eq!(
            out,
            expect(
                "-1 | 'a', 2, 2, 12, 5, 7\n+1 | 'a', 1, 1, 5, 5, 5\n\
                 -1 | 'b', 1, 0, NULL, NULL, NULL\n+1 | 'b', 2, 1, 10, 10, 10\n\
                 -1 | NULL, 1, 1, 4, 4, 4\n+1 | NULL, 1, 1, 6, 6, 6"
            )
        );
    }

    #[test]
    fn count_sum_min_max_per_group_across_epochs() {
        let r = Rel::new(1, ROWS);
        let mut op = per_group(&r);
        first_epochs(&r, &mut op);
        assert!(run(&mut op, &EpochContext::default()).is_empty());
        assert!(run(&mut op, &epoch(&[(&r, "")])).is_empty());
        // The group's last row goes: the group's row is retracted.
        let out = run(&mut op, &epoch(&[(&r, "-1 | 'a', 5")]));
        assert_eq!(out, expect("-1 | 'a', 1, 1, 5, 5, 5"));
        // Changes that cancel within the epoch change nothing.
        let out = run(&mut op, &epoch(&[(&r, "+1 | 'b', 1"), (&r, "-1 | 'b', 1")]));
        assert!(out.is_empty());
        // A group that went comes back fresh.
        let out = run(&mut op, &epoch(&[(&r, "+1 | 'a', 9")]));
        assert_eq!(out, expect("+1 | 'a', 1, 1, 9, 9, 9"));
        // The NULL group goes like any other.
        let out = run(&mut op, &epoch(&[(&r, "-1 | NULL, 6")]));
        assert_eq!(out, expect("-1 | NULL, 1, 1, 6, 6, 6"));
        // Only NULL values left: count(v) 0, sum/min/max NULL, the group still there.
        let out = run(&mut op, &epoch(&[(&r, "-1 | 'b', 10")]));
        assert_eq!(
            out,
            expect("-1 | 'b', 2, 1, 10, 10, 10\n+1 | 'b', 1, 0, NULL, NULL, NULL")
        );
    }

    #[test]
    fn weights_count_as_copies() {
        let r = Rel::new(1, ROWS);
        let mut op = per_group(&r);
        let out = run(&mut op, &epoch(&[(&r, "+3 | 'a', 2\n+2 | 'a', 1")]));
        assert_eq!(out, expect("+1 | 'a', 5, 5, 8, 1, 2"));
        // One of the two copies of the minimum goes: it is still the minimum.
        let out = run(&mut op, &epoch(&[(&r, "-1 | 'a', 1")]));
        assert_eq!(
            out,
            expect("-1 | 'a', 5, 5, 8, 1, 2\n+1 | 'a', 4, 4, 7, 1, 2")
        );
        let out = run(&mut op, &epoch(&[(&r, "-1 | 'a', 1\n-2 | 'a', 2")]));
        assert_eq!(
            out,
            expect("-1 | 'a', 4, 4, 7, 1, 2\n+1 | 'a', 1, 1, 2, 2, 2")
        );
        let out = run(&mut op, &epoch(&[(&r, "-1 | 'a', 2")]));
        assert_eq!(out, expect("-1 | 'a', 1, 1, 2, 2, 2"));
    }

    #[test]
    fn restored_groups_continue_from_their_state() {
        let r = Rel::new(1, ROWS);
        let mut op = per_group(&r);
        first_epochs(&r, &mut op);
        let mut fresh = per_group(&r);
        restore_into(&mut op, &mut fresh).unwrap();
        let next = epoch(&[(&r, "-1 | 'a', 5\n+1 | 'b', 20\n+1 | 'c', 1")]);
        let expected = expect(
            "-1 | 'a', 1, 1, 5, 5, 5\n\
             -1 | 'b', 2, 1, 10, 10, 10\n+1 | 'b', 3, 2, 30, 10, 20\n\
             +1 | 'c', 1, 1, 1, 1, 1",
        );
        assert_eq!(run(&mut op, &next), expected);
        assert_eq!(run(&mut fresh, &next), expected);
        // The maximum goes after the restore: the next one comes from the restored values.
        let next = epoch(&[(&r, "-1 | 'b', 20")]);
        let expected = expect("-1 | 'b', 3, 2, 30, 10, 20\n+1 | 'b', 2, 1, 10, 10, 10");
        assert_eq!(run(&mut op, &next), expected);
        assert_eq!(run(&mut fresh, &next), expected);
    }

    #[test]
    fn global_aggregate_has_a_row_over_empty_input() {
        let r = Rel::new(1, "v:i64");
        let mut op = global(&r);
        assert_eq!(
            run(&mut op, &EpochContext::default()),
            expect("+1 | 0, NULL")
        );
        let out = run(&mut op, &epoch(&[(&r, "+1 | 1\n+1 | 2\n+1 | NULL")]));
        assert_eq!(out, expect("-1 | 0, NULL\n+1 | 3, 3"));
        assert!(run(&mut op, &EpochContext::default()).is_empty());
        let out = run(&mut op, &epoch(&[(&r, "-1 | 1\n-1 | 2\n-1 | NULL")]));
        assert_eq!(out, expect("-1 | 3, 3\n+1 | 0, NULL"));
        // A restored global aggregate does not emit its row again.
        let mut fresh = global(&r);
        restore_into(&mut op, &mut fresh).unwrap();
        assert!(run(&mut fresh, &EpochContext::default()).is_empty());
        let next = epoch(&[(&r, "+2 | 5")]);
        let expected = expect("-1 | 0, NULL\n+1 | 2, 10");
        assert_eq!(run(&mut fresh, &next), expected);
        assert_eq!(run(&mut op, &next), expected);
    }

    #[test]
    fn float_sum_and_avg_return_to_null_when_no_value_is_left() {
        let r = Rel::new(1, "g:i64 x:f64 y:i64");
        let s = &r.schema;
        let mut op = HashAgg::try_new(
            r.scan(),
            vec![physical("g", s)],
            vec![DataType::Int64],
            vec![
                call(AggKind::Sum, "x", s, DataType::Float64),
                call(AggKind::Avg, "y", s, DataType::Float64),
            ],
            schema("g:i64 sx:f64 ay:f64"),
        )
        .unwrap();
        let out = run(
            &mut op,
            &epoch(&[(&r, "+1 | 1, 0.5, 1\n+2 | 1, 0.25, 4\n+1 | NULL, NULL, NULL")]),
        );
        assert_eq!(out, expect("+1 | 1, 1.0, 3.0\n+1 | NULL, NULL, NULL"));
        let out = run(
            &mut op,
            &epoch(&[(&r, "-2 | 1, 0.25, 4\n+1 | 1, NULL, NULL")]),
        );
        assert_eq!(out, expect("-1 | 1, 1.0, 3.0\n+1 | 1, 0.5, 1.0"));
        let out = run(&mut op, &epoch(&[(&r, "-1 | 1, 0.5, 1")]));
        assert_eq!(out, expect("-1 | 1, 0.5, 1.0\n+1 | 1, NULL, NULL"));
    }

    #[test]
    fn count_distinct_and_filter_clause() {
        let r = Rel::new(1, ROWS);
        let build = || {
            let s = &r.schema;
            let mut filtered = call(AggKind::Count, "v", s, DataType::Int64);
            filtered.filter = Some(physical("v > 1", s));
            HashAgg::try_new(
                r.scan(),
                vec![physical("g", s)],
                vec![DataType::Utf8],
                vec![
                    call(AggKind::CountDistinct, "v", s, DataType::Int64),
                    filtered,
                ],
                schema("g:utf8 distinct_v:i64 big_v:i64"),
            )
            .unwrap()
        };
        let mut op = build();
        let out = run(
            &mut op,
            &epoch(&[(&r, "+2 | 'a', 1\n+1 | 'a', 2\n+1 | 'a', NULL")]),
        );
        assert_eq!(out, expect("+1 | 'a', 2, 1"));
        // One of two copies of a value goes: still two distinct values.
        assert!(run(&mut op, &epoch(&[(&r, "-1 | 'a', 1")])).is_empty());
        let out = run(&mut op, &epoch(&[(&r, "-1 | 'a', 1\n+1 | 'a', 3")]));
        assert_eq!(out, expect("-1 | 'a', 2, 1\n+1 | 'a', 2, 2"));
        let out = run(&mut op, &epoch(&[(&r, "+1 | 'a', 3\n-1 | 'a', 2")]));
        assert_eq!(out, expect("-1 | 'a', 2, 2\n+1 | 'a', 1, 2"));
        let mut fresh = build();
        restore_into(&mut op, &mut fresh).unwrap();
        let next = epoch(&[(&r, "-2 | 'a', 3")]);
        let expected = expect("-1 | 'a', 1, 2\n+1 | 'a', 0, 0");
        assert_eq!(run(&mut op, &next), expected);
        assert_eq!(run(&mut fresh, &next), expected);
    }

    #[test]
    fn group_without_aggregates_is_distinct() {
        let r = Rel::new(1, "k:utf8");
        let s = &r.schema;
        let mut op = HashAgg::try_new(
            r.scan(),
            vec![physical("k", s)],
            vec![DataType::Utf8],
            vec![],
            schema("k:utf8"),
        )
        .unwrap();
        let out = run(&mut op, &epoch(&[(&r, "+2 | 'a'\n+1 | 'b'\n+1 | NULL")]));
        assert_eq!(out, expect("+1 | 'a'\n+1 | 'b'\n+1 | NULL"));
        assert!(run(&mut op, &epoch(&[(&r, "-1 | 'a'")])).is_empty());
        let out = run(&mut op, &epoch(&[(&r, "-1 | 'a'\n-1 | NULL")]));
        assert_eq!(out, expect("-1 | 'a'\n-1 | NULL"));
    }
}

//! `HashAgg`: incremental GROUP BY with count, sum, avg, min, max, count(DISTINCT), bool_and,
//! bool_or, bit_and, bit_or, bit_xor, variance and standard deviation, string_agg and
//! array_agg (with `ORDER BY` inside the call), each with an optional `FILTER (WHERE ...)`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, UInt32Array};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Decimal128Type, Float64Type, Int64Type, SchemaRef};
use arrow::row::{RowConverter, SortField};
use datafusion::common::utils::SingleRowListArrayBuilder;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::scalar::ScalarValue;

use crate::error::{Error, Result};
use crate::state::StateTable;
use crate::state::table::batch_from_columns;
use crate::stream::change::ChangeBatch;
use crate::stream::{EpochInput, Operator};

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
}

impl AggKind {
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
        )
    }
}

/// One `ORDER BY` key inside an aggregate call (`string_agg(x, ',' ORDER BY y DESC)`).
pub struct AggOrder {
    /// The key over the input schema.
    pub expr: Arc<dyn PhysicalExpr>,
    /// The key's type.
    pub data_type: DataType,
    /// Direction and NULL placement.
    pub options: SortOptions,
}

/// One aggregate call of a GROUP BY.
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
    /// Display name, for EXPLAIN.
    pub display: String,
}

/// Per-group state of one aggregate call.
#[derive(Debug, Clone)]
enum Acc {
    Count(i64),
    SumInt {
        n: i64,
        sum: i128,
    },
    SumFloat {
        n: i64,
        sum: f64,
    },
    SumDecimal {
        n: i64,
        sum: i128,
        scale: i8,
    },
    /// Value row bytes (order-preserving) to count.
    Values(BTreeMap<Box<[u8]>, i64>),
    /// Per bit (least significant first), the weighted number of values with it set; `n`:
    /// the number of non-NULL values.
    Bits {
        n: i64,
        ones: Box<[i64; 64]>,
    },
}

struct Group {
    /// Number of input rows in the group (sum of weights).
    count: i64,
    accs: Vec<Acc>,
    /// The aggregate values last emitted for the group, if a row is out.
    emitted: Option<Vec<ScalarValue>>,
    /// Changed in the current epoch (its key is in `HashAgg::dirty`).
    dirty: bool,
}

/// Incremental hash aggregation.
///
/// Input: any schema. Output: the group columns, then one column per aggregate call
/// (DataFusion's `Aggregate` schema). Stream key: the group columns. State: one entry per group
/// (key bytes in Arrow's row format), holding the row count and each call's accumulator; min,
/// max and count(DISTINCT) keep a multiset of values. Weights add to counts and sums. On the
/// barrier, each changed group emits `-1` of its previous row and `+1` of its new row (nothing
/// when unchanged); a group whose count drops to zero is retracted and forgotten. Without GROUP
/// BY there is one group that always exists, so the view has one row even over empty input.
pub struct HashAgg {
    /// The input operator.
    pub input: Box<dyn Operator>,
    group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    aggs: Vec<AggCall>,
    schema: SchemaRef,
    key_converter: Option<RowConverter>,
    arg_converters: Vec<Option<RowConverter>>,
    groups: HashMap<Box<[u8]>, Group>,
    dirty: Vec<Box<[u8]>>,
    started: bool,
    /// The input rows seen so far (a multiset): the durable form of the groups, which are
    /// re-derived from it on restore.
    seen: StateTable,
}

impl HashAgg {
    /// Builds the operator; `group_types` are the types of the group expressions.
    ///
    /// # Errors
    /// Arrow errors when a group or argument type has no row encoding.
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
                group_types.into_iter().map(SortField::new).collect(),
            )?)
        };
        let arg_converters = aggs
            .iter()
            .map(|a| match a.kind {
                k if k.keeps_values() => {
                    // Order keys first, then the value: the multiset iterates in call order.
                    let mut fields: Vec<SortField> = a
                        .order_by
                        .iter()
                        .map(|o| SortField::new_with_options(o.data_type.clone(), o.options))
                        .collect();
                    fields.push(SortField::new(a.arg_type.clone()));
                    RowConverter::new(fields).map(Some)
                }
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let seen = StateTable::unordered(input.schema())?;
        Ok(HashAgg {
            seen,
            input,
            group_exprs,
            aggs,
            schema,
            key_converter,
            arg_converters,
            groups: HashMap::new(),
            dirty: Vec::new(),
            started: false,
        })
    }

    fn new_accs(&self) -> Vec<Acc> {
        self.aggs
            .iter()
            .map(|a| match a.kind {
                AggKind::Count => Acc::Count(0),
                AggKind::Sum | AggKind::Avg => match &a.arg_type {
                    DataType::Float16 | DataType::Float32 | DataType::Float64 => {
                        Acc::SumFloat { n: 0, sum: 0.0 }
                    }
                    DataType::Decimal128(_, s) | DataType::Decimal256(_, s) => Acc::SumDecimal {
                        n: 0,
                        sum: 0,
                        scale: *s,
                    },
                    _ => Acc::SumInt { n: 0, sum: 0 },
                },
                AggKind::BitAnd | AggKind::BitOr | AggKind::BitXor => Acc::Bits {
                    n: 0,
                    ones: Box::new([0; 64]),
                },
                // The rest keep their values (`AggKind::keeps_values`).
                _ => Acc::Values(BTreeMap::new()),
            })
            .collect()
    }

    fn apply(&mut self, change: &ChangeBatch) -> Result<()> {
        let n = change.len();
        let batch = &change.batch;
        let keys = match &self.key_converter {
            Some(conv) => {
                let cols = self
                    .group_exprs
                    .iter()
                    .map(|e| Ok(e.evaluate(batch)?.into_array(n)?))
                    .collect::<Result<Vec<ArrayRef>>>()?;
                Some(conv.convert_columns(&cols)?)
            }
            None => None,
        };
        let mut args: Vec<ArgValues> = Vec::with_capacity(self.aggs.len());
        let mut keep: Vec<Option<BooleanArray>> = Vec::with_capacity(self.aggs.len());
        for (a, conv) in self.aggs.iter().zip(&self.arg_converters) {
            let arr = a.arg.evaluate(batch)?.into_array(n)?;
            let order = a
                .order_by
                .iter()
                .map(|o| Ok(o.expr.evaluate(batch)?.into_array(n)?))
                .collect::<Result<Vec<ArrayRef>>>()?;
            args.push(ArgValues::new(
                a.kind,
                &a.arg_type,
                arr,
                order,
                conv.as_ref(),
            )?);
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
        let template = self.new_accs();
        for (i, w) in change.weights.values().iter().enumerate() {
            let key: &[u8] = match &keys {
                Some(k) => k.row(i).data(),
                None => &[],
            };
            if !self.groups.contains_key(key) {
                let g = Group {
                    count: 0,
                    accs: template.clone(),
                    emitted: None,
                    dirty: false,
                };
                self.groups.insert(key.into(), g);
            }
            let group = self
                .groups
                .get_mut(key)
                .ok_or_else(|| Error::Internal("group vanished".into()))?;
            if !group.dirty {
                group.dirty = true;
                self.dirty.push(key.into());
            }
            group.count += w;
            for ((acc, arg), keep) in group.accs.iter_mut().zip(&args).zip(&keep) {
                // A FILTER that is NULL keeps the row out, as false does.
                if keep.as_ref().is_none_or(|k| k.is_valid(i) && k.value(i)) {
                    arg.update(acc, i, *w)?;
                }
            }
        }
        Ok(())
    }

    fn value(&self, call: usize, acc: &Acc) -> Result<ScalarValue> {
        let a = &self.aggs[call];
        let v = match (a.kind, acc) {
            (AggKind::Count, Acc::Count(c)) => ScalarValue::Int64(Some(*c)),
            (AggKind::Sum, Acc::SumInt { n, sum }) => {
                if *n == 0 {
                    ScalarValue::Int64(None)
                } else {
                    let v = i64::try_from(*sum)
                        .map_err(|_| Error::data("22003", "bigint out of range"))?;
                    ScalarValue::Int64(Some(v))
                }
            }
            (AggKind::Sum, Acc::SumFloat { n, sum }) => {
                ScalarValue::Float64(if *n == 0 { None } else { Some(*sum) })
            }
            (AggKind::Sum, Acc::SumDecimal { n, sum, scale }) => {
                let (p, s) = match &a.out_type {
                    DataType::Decimal128(p, s) => (*p, *s),
                    _ => (38, *scale),
                };
                ScalarValue::Decimal128(if *n == 0 { None } else { Some(*sum) }, p, s)
            }
            (AggKind::Avg, Acc::SumInt { n, sum }) => ScalarValue::Float64(if *n == 0 {
                None
            } else {
                Some(*sum as f64 / *n as f64)
            }),
            (AggKind::Avg, Acc::SumFloat { n, sum }) => ScalarValue::Float64(if *n == 0 {
                None
            } else {
                Some(*sum / *n as f64)
            }),
            (AggKind::Avg, Acc::SumDecimal { n, sum, scale }) => match &a.out_type {
                DataType::Decimal128(p, s) => {
                    if *n == 0 {
                        ScalarValue::Decimal128(None, *p, *s)
                    } else {
                        let shift = (*s as i32 - *scale as i32).max(0) as u32;
                        let num = sum * 10i128.pow(shift);
                        let d = *n as i128;
                        // Round half away from zero, as PostgreSQL's numeric division does.
                        let q = if (num >= 0) == (d >= 0) {
                            (num + d / 2) / d
                        } else {
                            (num - d / 2) / d
                        };
                        ScalarValue::Decimal128(Some(q), *p, *s)
                    }
                }
                _ => ScalarValue::Float64(if *n == 0 {
                    None
                } else {
                    Some(*sum as f64 / 10f64.powi(*scale as i32) / *n as f64)
                }),
            },
            (AggKind::CountDistinct, Acc::Values(m)) => ScalarValue::Int64(Some(m.len() as i64)),
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
            (AggKind::Variance { population, root }, Acc::Values(m)) => {
                let (values, counts) = self.decode_values(call, m)?;
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
            (AggKind::StringAgg, Acc::Values(m)) => {
                if m.is_empty() {
                    ScalarValue::Utf8(None)
                } else {
                    let (values, counts) = self.decode_values(call, m)?;
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
            (AggKind::ArrayAgg, Acc::Values(m)) => {
                if m.is_empty() {
                    ScalarValue::try_from(&a.out_type)?
                } else {
                    let (values, counts) = self.decode_values(call, m)?;
                    let mut take = Vec::new();
                    for (i, c) in counts.iter().enumerate() {
                        take.extend(std::iter::repeat_n(i as u32, (*c).max(0) as usize));
                    }
                    let values = arrow::compute::take(&values, &UInt32Array::from(take), None)?;
                    SingleRowListArrayBuilder::new(values).build_list_scalar()
                }
            }
            (AggKind::Min | AggKind::Max, Acc::Values(m)) => {
                let pick = if a.kind == AggKind::Min {
                    m.keys().next()
                } else {
                    m.keys().next_back()
                };
                match pick {
                    None => ScalarValue::try_from(&a.arg_type)?,
                    Some(bytes) => {
                        let col = self.decode(call, std::iter::once(bytes.as_ref()))?;
                        ScalarValue::try_from_array(&col, 0)?
                    }
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

    /// The values of multiset keys of a call (the value column; order keys dropped).
    fn decode<'a>(&self, call: usize, keys: impl Iterator<Item = &'a [u8]>) -> Result<ArrayRef> {
        let conv = self.arg_converters[call]
            .as_ref()
            .ok_or_else(|| Error::Internal("multiset aggregate without converter".into()))?;
        let parser = conv.parser();
        conv.convert_rows(keys.map(|k| parser.parse(k)))?
            .pop()
            .ok_or_else(|| Error::Internal("multiset aggregate without a value".into()))
    }

    /// The distinct values of a call's multiset in its order and each one's count.
    fn decode_values(
        &self,
        call: usize,
        m: &BTreeMap<Box<[u8]>, i64>,
    ) -> Result<(ArrayRef, Vec<i64>)> {
        let values = self.decode(call, m.keys().map(|k| k.as_ref()))?;
        Ok((values, m.values().copied().collect()))
    }

    /// Flushes the changed groups at the barrier: the retraction of each old row and its new row.
    fn flush(&mut self) -> Result<Vec<ChangeBatch>> {
        let mut dirty = std::mem::take(&mut self.dirty);
        if !self.started && self.key_converter.is_none() {
            // The global aggregate's single row exists from the start, even over empty input.
            if !self.groups.contains_key(&[][..]) {
                let accs = self.new_accs();
                self.groups.insert(
                    Box::from(&[][..]),
                    Group {
                        count: 0,
                        accs,
                        emitted: None,
                        dirty: false,
                    },
                );
            }
            dirty.push(Box::from(&[][..]));
        }
        self.started = true;
        dirty.dedup();
        let mut keys: Vec<Box<[u8]>> = Vec::new();
        let mut values: Vec<Vec<ScalarValue>> = Vec::new();
        let mut weights: Vec<i64> = Vec::new();
        for key in dirty {
            let Some(group) = self.groups.get_mut(&key) else {
                continue;
            };
            group.dirty = false;
            let group = self
                .groups
                .get(&key)
                .ok_or_else(|| Error::Internal("group vanished".into()))?;
            let alive = group.count > 0 || self.key_converter.is_none();
            if group.count < 0 {
                return Err(Error::Internal("group count below zero".into()));
            }
            let new = if alive {
                let mut v = Vec::with_capacity(group.accs.len());
                for (i, acc) in group.accs.iter().enumerate() {
                    v.push(self.value(i, acc)?);
                }
                Some(v)
            } else {
                None
            };
            let old = group.emitted.clone();
            if old == new {
                continue;
            }
            if let Some(old) = old {
                keys.push(key.clone());
                values.push(old);
                weights.push(-1);
            }
            if let Some(new) = &new {
                keys.push(key.clone());
                values.push(new.clone());
                weights.push(1);
            }
            if alive {
                if let Some(g) = self.groups.get_mut(&key) {
                    g.emitted = new;
                }
            } else {
                self.groups.remove(&key);
            }
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
    /// Rows of (order keys, value); `nulls`: the value column when NULL values are skipped.
    Rows {
        nulls: Option<ArrayRef>,
        rows: arrow::row::Rows,
    },
}

impl ArgValues {
    fn new(
        kind: AggKind,
        arg_type: &DataType,
        arr: ArrayRef,
        mut order: Vec<ArrayRef>,
        conv: Option<&RowConverter>,
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
            _ => {
                let conv =
                    conv.ok_or_else(|| Error::Internal("missing argument converter".into()))?;
                order.push(arr.clone());
                let rows = conv.convert_columns(&order)?;
                let nulls = (kind != AggKind::ArrayAgg).then_some(arr);
                ArgValues::Rows { nulls, rows }
            }
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
                    *sum += a.as_primitive::<Float64Type>().value(i) * w as f64;
                    if *n == 0 {
                        // Exact reset: no value left, no rounding residue.
                        *sum = 0.0;
                    }
                }
            }
            (ArgValues::Decimal(a), Acc::SumDecimal { n, sum, .. }) => {
                if a.is_valid(i) {
                    *n += w;
                    *sum += a.as_primitive::<Decimal128Type>().value(i) * w as i128;
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
            (ArgValues::Rows { nulls, rows }, Acc::Values(m)) => {
                if nulls.as_ref().is_none_or(|a| a.is_valid(i)) {
                    let key = rows.row(i);
                    let bytes: &[u8] = key.as_ref();
                    match m.get_mut(bytes) {
                        Some(c) => {
                            *c += w;
                            if *c == 0 {
                                m.remove(bytes);
                            }
                        }
                        None => {
                            m.insert(bytes.into(), w);
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

    fn process(&mut self, input: &EpochInput) -> Result<Vec<ChangeBatch>> {
        for change in self.input.process(input)? {
            if !change.is_empty() {
                self.apply(&change)?;
                self.seen.apply(&change)?;
            }
        }
        self.flush()
    }

    fn visit_state(&mut self, f: &mut dyn FnMut(&mut StateTable) -> Result<()>) -> Result<()> {
        f(&mut self.seen)?;
        self.input.visit_state(f)
    }

    fn restore(&mut self) -> Result<()> {
        self.input.restore()?;
        let rows = self.seen.to_change()?;
        if !rows.is_empty() {
            self.apply(&rows)?;
        }
        // The groups' rows are already in the restored view contents: flush only to record
        // them as emitted.
        self.flush()?;
        Ok(())
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        let keys: Vec<String> = self.group_exprs.iter().map(|e| e.to_string()).collect();
        let aggs: Vec<&str> = self.aggs.iter().map(|a| a.display.as_str()).collect();
        out.push(format!(
            "{}StreamHashAgg: group_key=[{}] aggs=[{}] (state table: input rows; groups keyed by [{}])",
            "  ".repeat(depth),
            keys.join(", "),
            aggs.join(", "),
            keys.join(", ")
        ));
        self.input.explain(depth + 1, out);
    }
}

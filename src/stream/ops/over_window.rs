//! `OverWindow`: window functions (`OVER (PARTITION BY ... ORDER BY ... [frame])`) and Top-N
//! (`ORDER BY ... LIMIT n [OFFSET m]`, and `row_number()/rank()/dense_rank() ... <= n` per
//! partition), maintained partition by partition with retractions.
//!
//! State: one ordered state table of the input rows, keyed by (partition values, order values,
//! then the whole row), so a partition is one key prefix and its rows come out of a prefix scan
//! already in window order (ties in the declared order broken by the rest of the row, which
//! makes the result deterministic). An epoch that touches a partition reads the partition
//! before and after applying its changes, evaluates the window functions over both with
//! DataFusion's window expressions (the same code that answers a batch `SELECT`, so frames,
//! peers and NULL ordering follow it), and emits the difference.
//!
//! Cost per epoch: O(rows of the touched partitions) without a limit. With a limit (a Top-N)
//! only the leading rows of a touched partition are read: `offset + n` for `LIMIT`, and for a
//! ranking function compared `<= n`, rows until the rank passes `n` (doubling reads), so a
//! Top-N costs O(n + log size) per touched partition however large the partition grows. A
//! deleted row of the top is replaced by the next one from state.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt64Type};
use arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::window::WindowExpr;

use crate::common::ChangeBatch;
use crate::error::Result;
use crate::state::StateTable;
use crate::state::table::{KeyLayout, batch_from_columns, consolidate};
use crate::stream::{EpochContext, Operator, StateVisitor, input_path, state_name};

/// Which rows of each partition the operator emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowOutput {
    /// Every row, with the window functions' values appended (`rank_limit`: a filter above
    /// keeps only rows whose window column `.0` (a `row_number`, `rank` or `dense_rank`
    /// output, by index among the window expressions) is at most `.1`; rows past it may be
    /// left out, and are, so only a partition's leading rows are read).
    All {
        /// `(window expression index, largest kept value)`.
        rank_limit: Option<(usize, u64)>,
    },
    /// `ORDER BY ... LIMIT fetch OFFSET skip`: the rows at positions `skip..skip + fetch`
    /// (`fetch` `None`: to the end) of each partition, no columns added.
    Slice {
        /// Rows skipped (OFFSET).
        skip: usize,
        /// Rows kept after them (LIMIT); `None` for no limit.
        fetch: Option<usize>,
    },
}

/// One `ORDER BY` key of the window (or of a Top-N): the same shape as an aggregate call's.
pub use crate::stream::ops::hash_agg::AggOrder as WindowOrder;

/// Window functions or a Top-N over partitions of the input (see the module docs).
///
/// Output: the input columns, then one column per window expression (none for a slice).
/// State table `over_window.rows`: columns `__part_i` (partition values), `__order_j` (order
/// values), then the input columns; keyed in that order, order columns by their options.
pub struct OverWindow {
    /// The input operator.
    pub input: Box<dyn Operator>,
    partition: Vec<Arc<dyn PhysicalExpr>>,
    order: Vec<WindowOrder>,
    window: Vec<Arc<dyn WindowExpr>>,
    output: WindowOutput,
    schema: SchemaRef,
    part_converter: Option<RowConverter>,
    rows: StateTable,
    /// Number of leading state columns before the input's (partition + order values).
    lead: usize,
}

impl OverWindow {
    /// Builds the operator. `partition_types` are the partition expressions' types; every
    /// window expression must share `partition` and `order`; `schema` is the input schema
    /// followed by one field per window expression (nothing added for a slice).
    ///
    /// # Errors
    /// Arrow errors when a partition or order type has no row encoding.
    pub fn try_new(
        input: Box<dyn Operator>,
        partition: Vec<Arc<dyn PhysicalExpr>>,
        partition_types: Vec<DataType>,
        order: Vec<WindowOrder>,
        window: Vec<Arc<dyn WindowExpr>>,
        output: WindowOutput,
        schema: SchemaRef,
    ) -> Result<Self> {
        let input_schema = input.schema();
        let part_converter = if partition.is_empty() {
            None
        } else {
            Some(RowConverter::new(
                partition_types
                    .iter()
                    .cloned()
                    .map(SortField::new)
                    .collect(),
            )?)
        };
        let mut fields = Vec::new();
        let mut key = Vec::new();
        for (i, t) in partition_types.iter().enumerate() {
            key.push((fields.len(), SortOptions::default()));
            fields.push(Field::new(format!("__part_{i}"), t.clone(), true));
        }
        for (j, o) in order.iter().enumerate() {
            key.push((fields.len(), o.options));
            fields.push(Field::new(
                format!("__order_{j}"),
                o.data_type.clone(),
                true,
            ));
        }
        let lead = fields.len();
        fields.extend(input_schema.fields().iter().map(|f| f.as_ref().clone()));
        let layout = KeyLayout::with_options(Arc::new(Schema::new(fields)), &key)?;
        Ok(OverWindow {
            input,
            partition,
            order,
            window,
            output,
            schema,
            part_converter,
            rows: StateTable::with_layout(Arc::new(layout)),
            lead,
        })
    }

    /// The state rows of a change (partition and order values, then the row) and each row's
    /// partition key prefix.
    fn state_rows(&self, change: &ChangeBatch) -> Result<(ChangeBatch, Vec<Box<[u8]>>)> {
        let n = change.len();
        let batch = &change.batch;
        let parts = self
            .partition
            .iter()
            .map(|e| Ok(e.evaluate(batch)?.into_array(n)?))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let keys: Vec<Box<[u8]>> = match &self.part_converter {
            Some(conv) => {
                let rows = conv.convert_columns(&parts)?;
                (0..n).map(|i| Box::from(rows.row(i).data())).collect()
            }
            None => vec![Box::from(&[][..]); n],
        };
        let mut columns = parts;
        for o in &self.order {
            columns.push(o.expr.evaluate(batch)?.into_array(n)?);
        }
        columns.extend(batch.columns().iter().cloned());
        let rows = batch_from_columns(self.rows.schema(), columns, n)?;
        Ok((ChangeBatch::new(rows, change.weights.clone())?, keys))
    }

    /// The first `limit` rows (duplicates repeated; all when `None`) of the partition with
    /// key prefix `prefix`, in window order, as a batch of the input schema; and whether the
    /// partition has more.
    fn read(&self, prefix: &[u8], limit: Option<usize>) -> Result<(RecordBatch, bool)> {
        let mut keys: Vec<Box<[u8]>> = Vec::new();
        let mut more = false;
        self.rows.scan_prefix_while(prefix, &mut |k, c| {
            if limit.is_some_and(|l| keys.len() >= l) {
                more = true;
                return Ok(false);
            }
            for _ in 0..c.max(0) {
                if limit.is_some_and(|l| keys.len() >= l) {
                    more = true;
                    break;
                }
                keys.push(Box::from(k));
            }
            Ok(!more)
        })?;
        let all = self
            .rows
            .layout()
            .decode(keys.iter().map(|k| k.as_ref()), keys.len())?;
        let input = self.input.schema();
        let batch = batch_from_columns(&input, all.columns()[self.lead..].to_vec(), keys.len())?;
        Ok((batch, more))
    }

    /// The window functions' values over one partition's rows (in window order).
    fn evaluate(&self, rows: &RecordBatch) -> Result<Vec<ArrayRef>> {
        let n = rows.num_rows();
        let offset = self.input.schema().fields().len();
        self.window
            .iter()
            .enumerate()
            .map(|(j, w)| {
                let target = self.schema.field(offset + j).data_type();
                let values = if n == 0 {
                    arrow::array::new_empty_array(target)
                } else {
                    w.evaluate(rows)?
                };
                Ok(if values.data_type() == target {
                    values
                } else {
                    arrow::compute::cast(&values, target)?
                })
            })
            .collect()
    }

    /// The output rows of the partition with key prefix `prefix` as the state now holds it.
    fn partition_output(&self, prefix: &[u8]) -> Result<RecordBatch> {
        match self.output {
            WindowOutput::Slice { skip, fetch } => {
                let limit = fetch.map(|f| skip.saturating_add(f));
                let (rows, _) = self.read(prefix, limit)?;
                let start = skip.min(rows.num_rows());
                Ok(rows.slice(start, rows.num_rows() - start))
            }
            WindowOutput::All { rank_limit: None } => {
                let (rows, _) = self.read(prefix, None)?;
                self.with_window_columns(&rows)
            }
            WindowOutput::All {
                rank_limit: Some((j, max)),
            } => {
                // Ranks never decrease along the partition and a row's rank depends only on
                // the rows before it: read more until a row ranks past `max`.
                let mut limit = usize::try_from(max).unwrap_or(usize::MAX).saturating_add(1);
                loop {
                    let (rows, more) = self.read(prefix, Some(limit))?;
                    let out = self.with_window_columns(&rows)?;
                    let offset = self.input.schema().fields().len();
                    let ranks = out.column(offset + j);
                    let last = ranks.len().checked_sub(1);
                    let past = match last {
                        Some(l) => rank_value(ranks, l)? > max,
                        None => true,
                    };
                    if !more || past {
                        return Ok(out);
                    }
                    limit = limit.saturating_mul(2);
                }
            }
        }
    }

    fn with_window_columns(&self, rows: &RecordBatch) -> Result<RecordBatch> {
        let mut columns = rows.columns().to_vec();
        columns.extend(self.evaluate(rows)?);
        batch_from_columns(&self.schema, columns, rows.num_rows())
    }
}

/// A ranking function's value at row `i` (`row_number`, `rank` and `dense_rank` are UInt64 in
/// DataFusion; a cast to another integer type is read as well).
fn rank_value(values: &ArrayRef, i: usize) -> Result<u64> {
    if let Some(v) = values.as_primitive_opt::<UInt64Type>() {
        return Ok(v.value(i));
    }
    let cast = arrow::compute::cast(&values.slice(i, 1), &DataType::UInt64)?;
    Ok(cast.as_primitive::<UInt64Type>().value(0))
}

impl Operator for OverWindow {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process(&mut self, ctx: &EpochContext) -> Result<Vec<ChangeBatch>> {
        let mut changes = Vec::new();
        let mut touched: Vec<Box<[u8]>> = Vec::new();
        let mut seen: HashMap<Box<[u8]>, ()> = HashMap::new();
        for change in self.input.process(ctx)? {
            if change.is_empty() {
                continue;
            }
            let (rows, keys) = self.state_rows(&change)?;
            for k in keys {
                if !seen.contains_key(&k) {
                    seen.insert(k.clone(), ());
                    touched.push(k);
                }
            }
            changes.push(rows);
        }
        if changes.is_empty() {
            return Ok(vec![]);
        }
        let mut out = Vec::with_capacity(touched.len() * 2);
        for prefix in &touched {
            let before = self.partition_output(prefix)?;
            if before.num_rows() > 0 {
                out.push(ChangeBatch::deletes(before));
            }
        }
        for change in &changes {
            self.rows.apply(change)?;
        }
        for prefix in &touched {
            let after = self.partition_output(prefix)?;
            if after.num_rows() > 0 {
                out.push(ChangeBatch::inserts(after));
            }
        }
        if out.is_empty() {
            return Ok(vec![]);
        }
        // Rows whose value did not change cancel out.
        let net = consolidate(&self.schema, &out)?;
        Ok(if net.is_empty() { vec![] } else { vec![net] })
    }

    fn visit_state(&mut self, path: &str, f: &mut StateVisitor<'_>) -> Result<()> {
        f(&state_name(path, "over_window.rows"), &mut self.rows)?;
        self.input.visit_state(&input_path(path, "input"), f)
    }

    fn restore(&mut self) -> Result<()> {
        // The row table is the whole state.
        self.input.restore()
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        let part: Vec<String> = self.partition.iter().map(|e| e.to_string()).collect();
        let order: Vec<String> = self
            .order
            .iter()
            .map(|o| {
                format!(
                    "{}{}",
                    o.expr,
                    if o.options.descending { " DESC" } else { "" }
                )
            })
            .collect();
        let what = match self.output {
            WindowOutput::Slice { skip, fetch } => format!(
                "StreamTopN: limit={} offset={skip}",
                fetch.map_or("ALL".to_string(), |f| f.to_string())
            ),
            WindowOutput::All { rank_limit } => {
                let names: Vec<&str> = self.window.iter().map(|w| w.name()).collect();
                let limit = rank_limit
                    .map(|(j, max)| format!(" rank_limit=[{} <= {max}]", names[j]))
                    .unwrap_or_default();
                format!("StreamOverWindow: [{}]{limit}", names.join(", "))
            }
        };
        out.push(format!(
            "{}{what} partition_by=[{}] order_by=[{}] (state table: rows keyed by (partition, order, row))",
            "  ".repeat(depth),
            part.join(", "),
            order.join(", "),
        ));
        self.input.explain(depth + 1, out);
    }
}

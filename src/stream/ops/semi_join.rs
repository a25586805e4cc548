//! `SemiJoin`: incremental left semi and anti joins (`IN`, `EXISTS`, `NOT EXISTS`, `NOT IN`).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{Error, Result};
use crate::state::StateTable;
use crate::state::table::{batch_from_columns, row_converter};
use crate::stream::change::ChangeBatch;
use crate::stream::{EpochInput, Operator};

/// Row bytes (Arrow row format) to their count.
type RowCounts = HashMap<Box<[u8]>, i64>;

/// Which left rows a [`SemiJoin`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SemiKind {
    /// Rows with a matching right row (`IN (subquery)`, `EXISTS`).
    Semi,
    /// Rows without one (`NOT EXISTS`); a NULL key matches nothing, so its row is kept.
    Anti,
    /// `NOT IN (subquery)` with PostgreSQL's NULL rule: a row is kept when the right side is
    /// empty, or when its key is not NULL, matches no right row, and no right key is NULL
    /// (else `x NOT IN (...)` is NULL or false).
    NullAwareAnti,
}

/// Incremental semi/anti equi-join. Output: the left rows (left schema) that pass.
///
/// State: each side's rows as a multiset (checkpointed), and derived from them the left rows
/// by join key and the right side's count per key, its total and its NULL-key count.
/// Per epoch: `L'⋉R' − L⋉R = (L⋉R' − L⋉R) + ΔL⋉R'`; the first term re-evaluates only the
/// left rows whose key's right count crossed zero, or every left row when the right side's
/// total or NULL count crossed zero (`NOT IN` only).
pub struct SemiJoin {
    left: Box<dyn Operator>,
    right: Box<dyn Operator>,
    left_keys: Vec<Arc<dyn PhysicalExpr>>,
    right_keys: Vec<Arc<dyn PhysicalExpr>>,
    kind: SemiKind,
    /// Whether NULL keys match each other (`INTERSECT`, `EXCEPT`) instead of nothing.
    nulls_match: bool,
    schema: SchemaRef,
    key_converter: RowConverter,
    left_rows: RowConverter,
    /// Left rows by key (`None`: a key with a NULL): row bytes to count.
    left_by_key: HashMap<Option<Box<[u8]>>, RowCounts>,
    /// Right rows per non-NULL key.
    right_counts: RowCounts,
    right_total: i64,
    right_nulls: i64,
    left_seen: StateTable,
    right_seen: StateTable,
}

/// What decides whether a left row passes: its key's right count and the right side's totals.
#[derive(Clone, Copy)]
struct RightView {
    total: i64,
    nulls: i64,
}

impl SemiJoin {
    /// Builds the join. `key_types` are the common types of the key pairs.
    ///
    /// # Errors
    /// Arrow errors when a key type has no row encoding.
    pub fn try_new(
        left: Box<dyn Operator>,
        right: Box<dyn Operator>,
        left_keys: Vec<Arc<dyn PhysicalExpr>>,
        right_keys: Vec<Arc<dyn PhysicalExpr>>,
        key_types: Vec<arrow::datatypes::DataType>,
        kind: SemiKind,
    ) -> Result<Self> {
        let key_converter = RowConverter::new(key_types.into_iter().map(SortField::new).collect())?;
        let schema = left.schema();
        let left_rows = row_converter(&schema)?;
        let left_seen = StateTable::unordered(schema.clone())?;
        let right_seen = StateTable::unordered(right.schema())?;
        Ok(SemiJoin {
            left,
            right,
            left_keys,
            right_keys,
            kind,
            nulls_match: false,
            schema,
            key_converter,
            left_rows,
            left_by_key: HashMap::new(),
            right_counts: HashMap::new(),
            right_total: 0,
            right_nulls: 0,
            left_seen,
            right_seen,
        })
    }

    /// Makes NULL keys match each other, as DataFusion plans `INTERSECT` and `EXCEPT`
    /// (a NULL key is then an ordinary key).
    pub fn with_nulls_matching(mut self, nulls_match: bool) -> Self {
        self.nulls_match = nulls_match;
        self
    }

    fn passes(&self, key: Option<&[u8]>, count: i64, right: RightView) -> bool {
        match self.kind {
            SemiKind::Semi => key.is_some() && count > 0,
            SemiKind::Anti => key.is_none() || count == 0,
            SemiKind::NullAwareAnti => {
                right.total == 0 || (key.is_some() && count == 0 && right.nulls == 0)
            }
        }
    }

    /// Each row's key bytes (`None` when a key column is NULL).
    fn keys(
        &self,
        exprs: &[Arc<dyn PhysicalExpr>],
        change: &ChangeBatch,
    ) -> Result<Vec<Option<Box<[u8]>>>> {
        let n = change.len();
        let cols = exprs
            .iter()
            .map(|e| Ok(e.evaluate(&change.batch)?.into_array(n)?))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let rows = self.key_converter.convert_columns(&cols)?;
        Ok((0..n)
            .map(|i| {
                if !self.nulls_match && cols.iter().any(|c| c.is_null(i)) {
                    None
                } else {
                    Some(Box::from(rows.row(i).data()))
                }
            })
            .collect())
    }

    /// Applies right changes to the right state; returns the keys whose count crossed zero.
    fn apply_right(&mut self, change: &ChangeBatch) -> Result<Vec<Box<[u8]>>> {
        let keys = self.keys(&self.right_keys.clone(), change)?;
        let mut crossed = Vec::new();
        for (key, w) in keys
            .into_iter()
            .zip(change.weights.values().iter().copied())
        {
            self.right_total += w;
            match key {
                None => self.right_nulls += w,
                Some(k) => {
                    let c = self.right_counts.entry(k.clone()).or_default();
                    let before = *c;
                    *c += w;
                    let after = *c;
                    if after < 0 {
                        return Err(Error::Internal("semi join right count below zero".into()));
                    }
                    if after == 0 {
                        self.right_counts.remove(&k);
                    }
                    if (before == 0) != (after == 0) {
                        crossed.push(k);
                    }
                }
            }
        }
        Ok(crossed)
    }

    /// Applies left changes to the left state, emitting each row that passes now.
    fn apply_left(&mut self, change: &ChangeBatch, out: &mut Vec<(Box<[u8]>, i64)>) -> Result<()> {
        let keys = self.keys(&self.left_keys.clone(), change)?;
        let rows = self.left_rows.convert_columns(change.batch.columns())?;
        let right = RightView {
            total: self.right_total,
            nulls: self.right_nulls,
        };
        for (i, (key, w)) in keys
            .into_iter()
            .zip(change.weights.values().iter().copied())
            .enumerate()
        {
            let row: &[u8] = rows.row(i).data();
            let count = key
                .as_ref()
                .and_then(|k| self.right_counts.get(k))
                .copied()
                .unwrap_or(0);
            if self.passes(key.as_deref(), count, right) {
                out.push((Box::from(row), w));
            }
            let bucket = self.left_by_key.entry(key.clone()).or_default();
            let c = bucket.entry(Box::from(row)).or_default();
            *c += w;
            if *c == 0 {
                bucket.remove(row);
            }
            if bucket.is_empty() {
                self.left_by_key.remove(&key);
            }
        }
        Ok(())
    }

    /// Emits, for the stored left rows under `keys` (all when `None`), new minus old verdicts.
    fn reevaluate(
        &self,
        keys: Option<&[Box<[u8]>]>,
        old: RightView,
        old_counts: &RowCounts,
        out: &mut Vec<(Box<[u8]>, i64)>,
    ) {
        let new = RightView {
            total: self.right_total,
            nulls: self.right_nulls,
        };
        let mut visit = |key: &Option<Box<[u8]>>, rows: &RowCounts| {
            let now = key
                .as_ref()
                .and_then(|k| self.right_counts.get(k))
                .copied()
                .unwrap_or(0);
            let then = key
                .as_ref()
                .map(|k| old_counts.get(k).copied().unwrap_or(now))
                .unwrap_or(0);
            let sign = i64::from(self.passes(key.as_deref(), now, new))
                - i64::from(self.passes(key.as_deref(), then, old));
            if sign != 0 {
                for (row, c) in rows {
                    out.push((row.clone(), sign * c));
                }
            }
        };
        match keys {
            None => {
                for (k, rows) in &self.left_by_key {
                    visit(k, rows);
                }
            }
            Some(keys) => {
                for k in keys {
                    let k = Some(k.clone());
                    if let Some(rows) = self.left_by_key.get(&k) {
                        visit(&k, rows);
                    }
                }
            }
        }
    }

    fn build(&self, out: Vec<(Box<[u8]>, i64)>) -> Result<ChangeBatch> {
        let n = out.len();
        let parser = self.left_rows.parser();
        let columns = self
            .left_rows
            .convert_rows(out.iter().map(|(r, _)| parser.parse(r)))?;
        let batch = batch_from_columns(&self.schema, columns, n)?;
        let weights: Int64Array = out.iter().map(|(_, w)| *w).collect::<Vec<_>>().into();
        ChangeBatch::new(batch, weights)
    }
}

impl Operator for SemiJoin {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process(&mut self, input: &EpochInput) -> Result<Vec<ChangeBatch>> {
        let left = self.left.process(input)?;
        let right = self.right.process(input)?;
        let mut out = Vec::new();
        // First the stored left rows against the new right side (L⋉R' − L⋉R).
        let old = RightView {
            total: self.right_total,
            nulls: self.right_nulls,
        };
        let mut crossed: Vec<Box<[u8]>> = Vec::new();
        let mut old_counts: RowCounts = HashMap::new();
        for c in &right {
            // Remember each key's count before this epoch, once.
            for k in self
                .keys(&self.right_keys.clone(), c)?
                .into_iter()
                .flatten()
            {
                let before = self.right_counts.get(&k).copied().unwrap_or(0);
                old_counts.entry(k).or_insert(before);
            }
            crossed.extend(self.apply_right(c)?);
            self.right_seen.apply(c)?;
        }
        let global = self.kind == SemiKind::NullAwareAnti
            && ((old.total == 0) != (self.right_total == 0)
                || (old.nulls == 0) != (self.right_nulls == 0));
        if global {
            self.reevaluate(None, old, &old_counts, &mut out);
        } else if !crossed.is_empty() {
            crossed.sort();
            crossed.dedup();
            self.reevaluate(Some(&crossed), old, &old_counts, &mut out);
        }
        // Then the left changes against the new right side (ΔL⋉R').
        for c in &left {
            self.apply_left(c, &mut out)?;
            self.left_seen.apply(c)?;
        }
        if out.is_empty() {
            return Ok(vec![]);
        }
        Ok(vec![self.build(out)?])
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        let on: Vec<String> = self
            .left_keys
            .iter()
            .zip(&self.right_keys)
            .map(|(l, r)| format!("{l} = {r}"))
            .collect();
        out.push(format!(
            "{}StreamSemiJoin: {:?} on [{}] (state tables: left rows; right rows, counted per key)",
            "  ".repeat(depth),
            self.kind,
            on.join(", ")
        ));
        self.left.explain(depth + 1, out);
        self.right.explain(depth + 1, out);
    }

    fn visit_state(&mut self, f: &mut dyn FnMut(&mut StateTable) -> Result<()>) -> Result<()> {
        f(&mut self.left_seen)?;
        f(&mut self.right_seen)?;
        self.left.visit_state(f)?;
        self.right.visit_state(f)
    }

    fn restore(&mut self) -> Result<()> {
        self.left.restore()?;
        self.right.restore()?;
        // Re-derive the working maps; the rows they produce are already in the view.
        let mut discard = Vec::new();
        let right = self.right_seen.to_change()?;
        if !right.is_empty() {
            self.apply_right(&right)?;
        }
        let left = self.left_seen.to_change()?;
        if !left.is_empty() {
            self.apply_left(&left, &mut discard)?;
        }
        Ok(())
    }
}

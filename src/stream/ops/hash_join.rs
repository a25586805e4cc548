//! `HashJoin`: incremental inner, left, right and full outer equi-join.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, UInt32Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use datafusion::common::ScalarValue;
use datafusion::physical_expr::PhysicalExpr;

use crate::common::ChangeBatch;
use crate::error::{Error, Result};
use crate::state::StateTable;
use crate::state::table::{KeyRange, batch_from_columns, row_converter};
use crate::stream::watermark::through_expr;
use crate::stream::{
    EpochContext, Operator, StateVisitor, Watermarks, advance_watermarks, input_path, state_name,
    watermark_of,
};

/// Which rows an equi-join keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    /// Matched pairs only.
    Inner,
    /// Matched pairs, and left rows without a match padded with NULLs.
    Left,
    /// Matched pairs, and right rows without a match padded with NULLs.
    Right,
    /// Both paddings.
    Full,
}

/// One input of a join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinSide {
    /// The left input.
    Left,
    /// The right input.
    Right,
}

impl JoinSide {
    fn other(self) -> JoinSide {
        match self {
            JoinSide::Left => JoinSide::Right,
            JoinSide::Right => JoinSide::Left,
        }
    }

    fn at(self) -> usize {
        match self {
            JoinSide::Left => 0,
            JoinSide::Right => 1,
        }
    }
}

/// A lower bound that every joined row satisfies: `side.column >= other(row of the other
/// side)`, `other` an expression non-decreasing in one column of the other side (a column,
/// `± interval`, `date_trunc`; see [`crate::stream::watermark`]). An equi-key of two plain
/// columns gives one bound per side (`l.k >= r.k` and `r.k >= l.k`); an interval condition
/// `l.ts BETWEEN r.ts - INTERVAL '5' SECOND AND r.ts + INTERVAL '5' SECOND` gives
/// `l.ts >= r.ts - 5 s` and `r.ts >= l.ts - 5 s`.
///
/// With watermarks a bound does two things, as Flink's interval join and RisingWave's
/// window and interval joins use them:
/// - **state cleaning**: a stored row of `side` whose `column` is below `other` evaluated at
///   the other side's watermark can match no row still to come, so it is deleted;
/// - **output watermarks** (inner joins): every output row still to come has
///   `column >= min(side's watermark, other(other side's watermark))`.
#[derive(Clone)]
pub struct JoinBound {
    /// The side whose column is bounded.
    pub side: JoinSide,
    /// The bounded column, an index into that side's schema.
    pub column: usize,
    /// The bound, over the other side's schema.
    pub other: Arc<dyn PhysicalExpr>,
    /// Whether this bound orders the side's expiry index (at most one bound per side).
    pub expires: bool,
    /// Whether a row expires only once it is also below the side's own watermark in
    /// `column`: the side may retract rows, and a retraction still to come must find its
    /// row in state.
    pub own_watermark: bool,
}

/// A side's expiry index: its stored rows ordered by the bounded column first, so that the
/// rows a watermark expires are one key range. Columns: the bounded column's value, then
/// the side's state columns.
struct Expiry {
    /// Index into the join's bounds.
    bound: usize,
    index: StateTable,
    /// Encodes a threshold of the bounded column's type the way the index's first column is.
    converter: RowConverter,
}

/// An output row under construction: left row bytes, right row bytes (None = NULL padding).
type OutRow = (Option<Box<[u8]>>, Option<Box<[u8]>>, i64);

/// What a change needs to know of one join key: the other side's rows with it (row bytes,
/// count) and their total, and this side's total before the change's rows so far. With a
/// join condition, `degree[j]` is instead the number of this side's rows (so far) that match
/// the other side's `j`th row under it.
struct KeyState {
    other: Vec<(Box<[u8]>, i64)>,
    other_total: i64,
    this_total: i64,
    degree: Vec<i64>,
}

/// Pairs evaluated under a join condition at once (bounds the batch built for it).
const CONDITION_CHUNK: usize = 8192;

/// Incremental equi-join (Δ(L⋈R) = ΔL⋈R + L'⋈ΔR).
///
/// Input: a left and a right stream. Output: left columns then right columns (DataFusion's
/// `Join` schema). State: one state table per side holding its rows keyed by (join key, row):
/// columns `__join_key_<i>` (the evaluated key expressions) then the side's columns, all
/// in the key, so that the rows with one join key are one prefix scan (in the state backend,
/// not in memory). A change reads, once per distinct join key in it, the other side's rows
/// with that key, then writes its own rows as one batch. Rows whose key has a NULL never
/// match (SQL `=`) and are not kept, unless the join was built with
/// [`HashJoin::with_nulls_matching`] (`IS NOT DISTINCT FROM`). For outer joins a preserved
/// row with no match is emitted padded with NULLs; when the first match arrives the padded
/// row is retracted, and when the last match leaves it is emitted again.
///
/// An outer join may have a condition beyond the key ([`HashJoin::with_condition`], the
/// `ON` clause's other conjuncts, PostgreSQL's join semantics): a pair matches when its keys
/// are equal and the condition is true, and a preserved row is padded while it has no
/// match. Each change then evaluates the condition on its rows paired with the other side's
/// rows of their key and, where the other side is preserved, finds each of those rows'
/// matches (its degree) among this side's rows of the key: O(rows of the key on both sides)
/// state read and O(their product) condition evaluations per changed key; no more state is
/// kept.
pub struct HashJoin {
    left: Box<dyn Operator>,
    right: Box<dyn Operator>,
    left_keys: Vec<Arc<dyn PhysicalExpr>>,
    right_keys: Vec<Arc<dyn PhysicalExpr>>,
    kind: JoinKind,
    /// Whether NULL keys match each other (`IS NOT DISTINCT FROM`) instead of nothing (`=`).
    nulls_match: bool,
    /// The condition a pair of rows with equal keys must also meet, over the output schema.
    condition: Option<Arc<dyn PhysicalExpr>>,
    schema: SchemaRef,
    key_converter: RowConverter,
    /// The number of join key columns (the leading columns of each side's state table).
    key_count: usize,
    left_rows: RowConverter,
    right_rows: RowConverter,
    /// Each side's rows keyed by (join key, row); see the type's docs.
    left_state: StateTable,
    right_state: StateTable,
    /// Whether the join has no equi-key and joins on a constant one instead (every row of
    /// each side under one key; planned only when one side holds at most one row).
    cross: bool,
    /// Bounds between the sides' columns that watermarks turn into state cleaning and output
    /// watermarks (see [`JoinBound`]).
    bounds: Vec<JoinBound>,
    /// Per side (left, right): its expiry index, when a bound of the side expires rows.
    expiry: [Option<Expiry>; 2],
    /// Rows deleted from state by watermarks so far (both sides); not checkpointed.
    expired_rows: u64,
    /// The latest watermarks seen of each input (left, right): an epoch may advance one
    /// side only. Not checkpointed: after a restart they are known again once they advance.
    marks: [Watermarks; 2],
    /// A processing-time temporal join ([`HashJoin::with_lookup`]).
    lookup: bool,
}

/// The schema of a side's state table: the join key columns, then the side's columns (all
/// nullable).
pub(crate) fn side_schema(key_types: &[DataType], side: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = key_types
        .iter()
        .enumerate()
        .map(|(i, t)| Field::new(format!("__join_key_{i}"), t.clone(), true))
        .collect();
    fields.extend(
        side.fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true)),
    );
    Arc::new(Schema::new(fields))
}

impl HashJoin {
    /// Builds the join. Without keys (`key_types` empty) it is a cross join: every row of
    /// each side is kept under one constant key, so a change of one side pairs with all of
    /// the other's rows; the planner builds one only when a side holds at most one row.
    ///
    /// # Errors
    /// Arrow errors when a key or column type has no row encoding.
    #[allow(clippy::too_many_arguments)]
    pub fn try_new(
        left: Box<dyn Operator>,
        right: Box<dyn Operator>,
        left_keys: Vec<Arc<dyn PhysicalExpr>>,
        right_keys: Vec<Arc<dyn PhysicalExpr>>,
        key_types: Vec<arrow::datatypes::DataType>,
        kind: JoinKind,
        schema: SchemaRef,
    ) -> Result<Self> {
        // No equi-key (a cross join with a single-row side): every row has the same key.
        let cross = key_types.is_empty();
        let (left_keys, right_keys, key_types) = if cross {
            let constant = || -> Arc<dyn PhysicalExpr> {
                Arc::new(datafusion::physical_expr::expressions::Literal::new(
                    ScalarValue::Boolean(Some(true)),
                ))
            };
            (vec![constant()], vec![constant()], vec![DataType::Boolean])
        } else {
            (left_keys, right_keys, key_types)
        };
        let key_converter = RowConverter::new(
            key_types
                .iter()
                .cloned()
                .map(arrow::row::SortField::new)
                .collect(),
        )?;
        let left_rows = row_converter(&left.schema())?;
        let right_rows = row_converter(&right.schema())?;
        let left_state = StateTable::new(side_schema(&key_types, &left.schema()))?;
        let right_state = StateTable::new(side_schema(&key_types, &right.schema()))?;
        Ok(HashJoin {
            left,
            right,
            left_keys,
            right_keys,
            kind,
            nulls_match: false,
            condition: None,
            schema,
            key_converter,
            key_count: key_types.len(),
            left_rows,
            right_rows,
            left_state,
            right_state,
            cross,
            bounds: Vec::new(),
            expiry: [None, None],
            expired_rows: 0,
            marks: [Watermarks::new(), Watermarks::new()],
            lookup: false,
        })
    }

    /// Makes the join a processing-time temporal join (Flink SQL's lookup join, `FOR
    /// SYSTEM_TIME AS OF` a `PROCTIME()` column): each left row is joined with the right rows
    /// stored when it is processed (an epoch's right changes first), and emitted once; right
    /// changes update the right state and emit nothing, so rows already joined keep what
    /// they were joined with. Left rows are not stored (the planner takes only an
    /// append-only left input). Inner and left joins.
    pub fn with_lookup(mut self, lookup: bool) -> Self {
        self.lookup = lookup;
        self
    }

    /// Adds the bounds between the sides' columns (see [`JoinBound`]); the one bound per side
    /// marked `expires` gets an expiry index. Only an inner join uses them: an outer join's
    /// padding counts every row of a key, so its rows never expire.
    ///
    /// # Errors
    /// Arrow errors when the bounded column's type has no row encoding.
    pub fn with_bounds(mut self, bounds: Vec<JoinBound>) -> Result<Self> {
        if self.kind != JoinKind::Inner {
            return Ok(self);
        }
        for (i, b) in bounds.iter().enumerate() {
            if !b.expires || self.expiry[b.side.at()].is_some() {
                continue;
            }
            let state = match b.side {
                JoinSide::Left => &self.left_state,
                JoinSide::Right => &self.right_state,
            };
            let t = self
                .input_schema(b.side)
                .field(b.column)
                .data_type()
                .clone();
            let mut fields = vec![Field::new("__expire_at", t.clone(), true)];
            fields.extend(state.schema().fields().iter().map(|f| f.as_ref().clone()));
            self.expiry[b.side.at()] = Some(Expiry {
                bound: i,
                index: StateTable::new(Arc::new(Schema::new(fields)))?,
                converter: RowConverter::new(vec![SortField::new(t)])?,
            });
        }
        self.bounds = bounds;
        Ok(self)
    }

    /// The schema of `side`'s input.
    fn input_schema(&self, side: JoinSide) -> SchemaRef {
        match side {
            JoinSide::Left => self.left.schema(),
            JoinSide::Right => self.right.schema(),
        }
    }

    /// Rows deleted from the join's state by watermarks since the operator was built.
    pub fn expired_rows(&self) -> u64 {
        self.expired_rows
    }

    /// Takes in the inputs' watermarks as of the end of `ctx`: each column's latest.
    fn note_watermarks(&mut self, ctx: &EpochContext) {
        let inputs = [self.left.watermarks(ctx), self.right.watermarks(ctx)];
        for (marks, input) in self.marks.iter_mut().zip(inputs) {
            advance_watermarks(marks, input);
        }
    }

    /// What bound `b` says of its column given the inputs' watermarks: `other` at the other
    /// side's watermark, in the column's type.
    fn bound_at(&self, b: &JoinBound, w: &[Watermarks; 2]) -> Option<ScalarValue> {
        let other = b.side.other();
        let v = through_expr(&b.other, &self.input_schema(other), &w[other.at()])?;
        let own_schema = self.input_schema(b.side);
        let t = own_schema.field(b.column).data_type();
        if v.data_type() == *t {
            Some(v)
        } else {
            v.cast_to(t).ok()
        }
    }

    /// Deletes the stored rows the watermarks of `w` expire: per side with an expiry index,
    /// the rows whose bounded column is below the bound at the other side's watermark (and
    /// below the side's own watermark when it may retract). O(log n + rows expired).
    fn expire(&mut self, w: &[Watermarks; 2]) -> Result<()> {
        for side in [JoinSide::Left, JoinSide::Right] {
            let Some(e) = &self.expiry[side.at()] else {
                continue;
            };
            let b = &self.bounds[e.bound];
            let Some(mut threshold) = self.bound_at(b, w) else {
                continue;
            };
            if b.own_watermark {
                let Some(own) = watermark_of(&w[side.at()], b.column) else {
                    continue;
                };
                let own = if own.data_type() == threshold.data_type() {
                    own.clone()
                } else {
                    own.cast_to(&threshold.data_type())?
                };
                if own < threshold {
                    threshold = own;
                }
            }
            let below = KeyRange::below(&e.converter, &threshold)?;
            let expired = e.index.snapshot().scan(&below, None)?;
            let e = self.expiry[side.at()].as_mut().expect("checked above");
            let state = match side {
                JoinSide::Left => &mut self.left_state,
                JoinSide::Right => &mut self.right_state,
            };
            for batch in expired {
                if batch.num_rows() == 0 {
                    continue;
                }
                self.expired_rows += batch.num_rows() as u64;
                let rows = batch_from_columns(
                    state.schema(),
                    batch.columns()[1..].to_vec(),
                    batch.num_rows(),
                )?;
                state.apply(&ChangeBatch::deletes(rows))?;
                e.index.apply(&ChangeBatch::deletes(batch))?;
            }
        }
        Ok(())
    }

    /// Makes NULL keys match each other, as `a.k IS NOT DISTINCT FROM b.k` asks (the row
    /// format encodes NULL as a value of its own, so equal keys stay equal bytes).
    pub fn with_nulls_matching(mut self, nulls_match: bool) -> Self {
        self.nulls_match = nulls_match;
        self
    }

    /// Adds a condition beyond the key (an expression over the output schema, NULL counting
    /// as false) that a pair must meet to match: an outer join's `ON a.k = b.k AND <condition>`.
    /// (An inner join filters its output instead, which is the same and keeps its bounds.)
    pub fn with_condition(mut self, condition: Option<Arc<dyn PhysicalExpr>>) -> Self {
        self.condition = condition;
        self
    }

    /// Whether the join condition holds for each (left row, right row) pair of row bytes;
    /// all true without one.
    ///
    /// # Errors
    /// Errors evaluating the condition (as PostgreSQL's for its expression).
    fn condition_holds(&self, pairs: &[(&[u8], &[u8])]) -> Result<Vec<bool>> {
        let Some(condition) = &self.condition else {
            return Ok(vec![true; pairs.len()]);
        };
        let mut out = Vec::with_capacity(pairs.len());
        for chunk in pairs.chunks(CONDITION_CHUNK) {
            let n = chunk.len();
            let mut columns = side_columns(&self.left_rows, chunk.iter().map(|p| Some(p.0)), n)?;
            columns.extend(side_columns(
                &self.right_rows,
                chunk.iter().map(|p| Some(p.1)),
                n,
            )?);
            let batch = batch_from_columns(&self.schema, columns, n)?;
            let values = condition.evaluate(&batch)?.into_array(n)?;
            let values = values
                .as_boolean_opt()
                .ok_or_else(|| Error::Internal("join condition is not boolean".into()))?;
            out.extend((0..n).map(|i| values.is_valid(i) && values.value(i)));
        }
        Ok(out)
    }

    fn preserves(&self, side: JoinSide) -> bool {
        match side {
            JoinSide::Left => matches!(self.kind, JoinKind::Left | JoinKind::Full),
            JoinSide::Right => matches!(self.kind, JoinKind::Right | JoinKind::Full),
        }
    }

    /// Joins one change of `side` against the other side's state (appending the output rows
    /// to `out`), then applies it to this side's state.
    fn apply(&mut self, side: JoinSide, change: &ChangeBatch, out: &mut Vec<OutRow>) -> Result<()> {
        let n = change.len();
        let exprs = if side == JoinSide::Left {
            &self.left_keys
        } else {
            &self.right_keys
        };
        let key_cols = exprs
            .iter()
            .map(|e| Ok(e.evaluate(&change.batch)?.into_array(n)?))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let keys = self.key_converter.convert_columns(&key_cols)?;
        let conv = if side == JoinSide::Left {
            &self.left_rows
        } else {
            &self.right_rows
        };
        let rows = conv.convert_columns(change.batch.columns())?;
        let this_preserved = self.preserves(side);
        let other_preserved = self.preserves(if side == JoinSide::Left {
            JoinSide::Right
        } else {
            JoinSide::Left
        });
        let (this, other) = match side {
            JoinSide::Left => (&self.left_state, &self.right_state),
            JoinSide::Right => (&self.right_state, &self.left_state),
        };
        let pair = |mine: &[u8], theirs: Option<&[u8]>, w: i64| -> OutRow {
            let mine = Some(Box::from(mine));
            let theirs = theirs.map(Box::from);
            match side {
                JoinSide::Left => (mine, theirs, w),
                JoinSide::Right => (theirs, mine, w),
            }
        };
        let has_null_key = |i: usize| !self.nulls_match && key_cols.iter().any(|c| c.is_null(i));
        // The distinct keys of the change, and their state read before any row is joined: the
        // other side's rows with each key, and (where the other side is padded) this side's
        // count, each side through one iterator with one seek per key.
        let mut slot: HashMap<&[u8], usize> = HashMap::new();
        let mut distinct: Vec<&[u8]> = Vec::new();
        for i in 0..n {
            if !has_null_key(i) {
                let key: &[u8] = keys.row(i).data();
                slot.entry(key).or_insert_with(|| {
                    distinct.push(key);
                    distinct.len() - 1
                });
            }
        }
        let mut states: Vec<KeyState> = distinct
            .iter()
            .map(|_| KeyState {
                other: Vec::new(),
                other_total: 0,
                this_total: 0,
                degree: Vec::new(),
            })
            .collect();
        other.scan_prefixes_while(&distinct, &mut |j, k, c| {
            states[j]
                .other
                .push((Box::from(&k[distinct[j].len()..]), c));
            states[j].other_total += c;
            Ok(true)
        })?;
        if other_preserved {
            // This side's rows matter only to pad the other side's rows.
            let padded: Vec<usize> = (0..distinct.len())
                .filter(|j| states[*j].other_total > 0)
                .collect();
            if self.condition.is_none() {
                let counts = this.count_prefixes(padded.iter().map(|j| distinct[*j]))?;
                for (j, c) in padded.into_iter().zip(counts) {
                    states[j].this_total = c;
                }
            } else {
                // Each other row's degree: the matches among this side's rows of the key.
                let prefixes: Vec<&[u8]> = padded.iter().map(|j| distinct[*j]).collect();
                let mut mine: Vec<Vec<(Box<[u8]>, i64)>> = vec![Vec::new(); padded.len()];
                this.scan_prefixes_while(&prefixes, &mut |p, k, c| {
                    mine[p].push((Box::from(&k[prefixes[p].len()..]), c));
                    Ok(true)
                })?;
                for (p, j) in padded.iter().enumerate() {
                    let state = &states[*j];
                    let mut pairs = Vec::with_capacity(mine[p].len() * state.other.len());
                    for (t, _) in &mine[p] {
                        for (o, _) in &state.other {
                            pairs.push(match side {
                                JoinSide::Left => (t.as_ref(), o.as_ref()),
                                JoinSide::Right => (o.as_ref(), t.as_ref()),
                            });
                        }
                    }
                    let holds = self.condition_holds(&pairs)?;
                    let mut degree = vec![0i64; state.other.len()];
                    let width = state.other.len();
                    for (ti, (_, count)) in mine[p].iter().enumerate() {
                        for (oj, d) in degree.iter_mut().enumerate() {
                            if holds[ti * width + oj] {
                                *d += count;
                            }
                        }
                    }
                    states[*j].degree = degree;
                }
            }
        }
        // With a condition: which of the other side's rows of its key each change row matches.
        let change_matches: Option<Vec<bool>> = if self.condition.is_some() {
            let mut pairs = Vec::new();
            for i in 0..n {
                if has_null_key(i) {
                    continue;
                }
                let row: &[u8] = rows.row(i).data();
                for (o, _) in &states[slot[keys.row(i).data()]].other {
                    pairs.push(match side {
                        JoinSide::Left => (row, o.as_ref()),
                        JoinSide::Right => (o.as_ref(), row),
                    });
                }
            }
            Some(self.condition_holds(&pairs)?)
        } else {
            None
        };
        let mut next_match = 0usize;
        let mut kept = Vec::with_capacity(n);
        for (i, w) in change.weights.values().iter().copied().enumerate() {
            let row: &[u8] = rows.row(i).data();
            let has_null_key = has_null_key(i);
            kept.push(!has_null_key);
            if has_null_key {
                // A NULL key matches nothing and needs no state: its padded row comes and goes
                // with its own weight.
                if this_preserved {
                    out.push(pair(row, None, w));
                }
                continue;
            }
            let key: &[u8] = keys.row(i).data();
            let state = &mut states[slot[key]];
            if let Some(matches) = &change_matches {
                let holds = &matches[next_match..next_match + state.other.len()];
                next_match += state.other.len();
                let mut matched = false;
                for (j, (orow, c)) in state.other.iter().enumerate() {
                    if !holds[j] {
                        continue;
                    }
                    matched = true;
                    out.push(pair(row, Some(orow), w * c));
                    if other_preserved {
                        let before = state.degree[j];
                        state.degree[j] += w;
                        let after = state.degree[j];
                        if after < 0 {
                            return Err(Error::Internal("join row degree below zero".into()));
                        }
                        // The other row was padded while it had no match.
                        let sign = padding_change(before, after);
                        if sign != 0 {
                            out.push(padded_other(side, orow, sign * c));
                        }
                    }
                }
                if this_preserved && !matched {
                    out.push(pair(row, None, w));
                }
                continue;
            }
            for (orow, c) in &state.other {
                out.push(pair(row, Some(orow), w * c));
            }
            if this_preserved && state.other_total == 0 {
                out.push(pair(row, None, w));
            }
            if other_preserved && state.other_total > 0 {
                let before = state.this_total;
                state.this_total += w;
                let after = state.this_total;
                if after < 0 {
                    return Err(Error::Internal("join side count below zero".into()));
                }
                // The other side's rows with this key were padded while this side had none.
                let sign = padding_change(before, after);
                if sign != 0 {
                    for (orow, c) in &state.other {
                        out.push(padded_other(side, orow, sign * c));
                    }
                }
            }
        }
        drop(states);
        if self.lookup && side == JoinSide::Left {
            // A temporal join's left rows are looked up, never stored.
            return Ok(());
        }
        let state = match side {
            JoinSide::Left => &mut self.left_state,
            JoinSide::Right => &mut self.right_state,
        };
        let mut columns = key_cols;
        columns.extend(change.batch.columns().iter().cloned());
        let stored = ChangeBatch::new(
            batch_from_columns(state.schema(), columns, n)?,
            change.weights.clone(),
        )?;
        let stored = if kept.iter().all(|k| *k) {
            stored
        } else {
            stored.filter(&BooleanArray::from(kept))?
        };
        state.apply(&stored)?;
        if let Some(e) = &mut self.expiry[side.at()] {
            // The bounded column sits after the join key columns.
            let at = self.key_count + self.bounds[e.bound].column;
            let mut columns = vec![Arc::clone(stored.batch.column(at))];
            columns.extend(stored.batch.columns().iter().cloned());
            let rows = stored.len();
            e.index.apply(&ChangeBatch::new(
                batch_from_columns(e.index.schema(), columns, rows)?,
                stored.weights.clone(),
            )?)?;
        }
        Ok(())
    }

    fn build(&self, out: Vec<OutRow>) -> Result<ChangeBatch> {
        let n = out.len();
        let mut columns = side_columns(&self.left_rows, out.iter().map(|r| r.0.as_deref()), n)?;
        columns.extend(side_columns(
            &self.right_rows,
            out.iter().map(|r| r.1.as_deref()),
            n,
        )?);
        let weights: Vec<i64> = out.iter().map(|r| r.2).collect();
        let batch = batch_from_columns(&self.schema, columns, n)?;
        ChangeBatch::new(batch, weights.into())
    }
}

/// The change to a preserved row's NULL-padded copy when its matches go from `before` to
/// `after`: -1 when the first match arrives, +1 when the last one leaves, else 0.
fn padding_change(before: i64, after: i64) -> i64 {
    match (before == 0, after == 0) {
        (true, false) => -1,
        (false, true) => 1,
        _ => 0,
    }
}

/// `weight` copies of the other side's row `orow` padded with NULLs for `side` (the side of
/// the change).
fn padded_other(side: JoinSide, orow: &[u8], weight: i64) -> OutRow {
    match side {
        JoinSide::Left => (None, Some(Box::from(orow)), weight),
        JoinSide::Right => (Some(Box::from(orow)), None, weight),
    }
}

/// Decodes one side's columns for the output rows; `None` rows become NULLs.
fn side_columns<'a>(
    conv: &RowConverter,
    rows: impl Iterator<Item = Option<&'a [u8]>>,
    n: usize,
) -> Result<Vec<ArrayRef>> {
    let parser = conv.parser();
    let mut present: Vec<&[u8]> = Vec::with_capacity(n);
    let mut indices: Vec<Option<u32>> = Vec::with_capacity(n);
    for r in rows {
        match r {
            Some(bytes) => {
                indices.push(Some(present.len() as u32));
                present.push(bytes);
            }
            None => indices.push(None),
        }
    }
    let decoded = conv.convert_rows(present.iter().map(|b| parser.parse(b)))?;
    if present.len() == n {
        return Ok(decoded);
    }
    let idx = UInt32Array::from(indices);
    decoded
        .iter()
        .map(|c| Ok(arrow::compute::take(c.as_ref(), &idx, None)?))
        .collect()
}

impl Operator for HashJoin {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process(&mut self, input: &EpochContext) -> Result<Vec<ChangeBatch>> {
        let left = self.left.process(input)?;
        let right = self.right.process(input)?;
        let mut out = Vec::new();
        if self.lookup {
            // The right side's changes of the epoch first, silently; then the left rows
            // look them up.
            let mut silent = Vec::new();
            for c in right.iter().filter(|c| !c.is_empty()) {
                self.apply(JoinSide::Right, c, &mut silent)?;
            }
            for c in left.iter().filter(|c| !c.is_empty()) {
                self.apply(JoinSide::Left, c, &mut out)?;
            }
            if out.is_empty() {
                return Ok(vec![]);
            }
            return Ok(vec![self.build(out)?]);
        }
        for c in left.iter().filter(|c| !c.is_empty()) {
            self.apply(JoinSide::Left, c, &mut out)?;
        }
        for c in right.iter().filter(|c| !c.is_empty()) {
            self.apply(JoinSide::Right, c, &mut out)?;
        }
        if !self.bounds.is_empty() && !input.watermarks.is_empty() {
            self.note_watermarks(input);
            let marks = std::mem::take(&mut self.marks);
            let expired = self.expire(&marks);
            self.marks = marks;
            expired?;
        }
        if out.is_empty() {
            return Ok(vec![]);
        }
        Ok(vec![self.build(out)?])
    }

    /// An inner join's output column bounded by a [`JoinBound`] keeps the lesser of its
    /// side's watermark and the bound at the other side's watermark (the largest such value
    /// when several bounds hold); an outer join's padded rows have none. The inputs'
    /// watermarks are the latest ones [`Operator::process`] took in.
    fn watermarks(&self, _ctx: &EpochContext) -> Watermarks {
        if self.kind != JoinKind::Inner || self.bounds.is_empty() {
            return Watermarks::new();
        }
        let w = &self.marks;
        let width = self.left.schema().fields().len();
        let mut out = Watermarks::new();
        for b in &self.bounds {
            let Some(own) = watermark_of(&w[b.side.at()], b.column) else {
                continue;
            };
            let Some(other) = self.bound_at(b, w) else {
                continue;
            };
            let least = if *own < other { own.clone() } else { other };
            let column = b.column + if b.side == JoinSide::Right { width } else { 0 };
            match out.iter_mut().find(|(c, _)| *c == column) {
                Some((_, v)) if *v < least => *v = least,
                Some(_) => {}
                None => out.push((column, least)),
            }
        }
        out
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        let on: Vec<String> = self
            .left_keys
            .iter()
            .zip(&self.right_keys)
            .map(|(l, r)| format!("{l} = {r}"))
            .collect();
        let condition = self
            .condition
            .as_ref()
            .map(|c| format!(" condition={c}"))
            .unwrap_or_default();
        if self.cross {
            out.push(format!(
                "{}StreamHashJoin: {:?} cross join with a single-row side{condition} (state tables: left and right rows)",
                "  ".repeat(depth),
                self.kind,
            ));
        } else {
            out.push(format!(
                "{}StreamHashJoin: {:?} on [{}]{condition} {}",
                "  ".repeat(depth),
                self.kind,
                on.join(", "),
                if self.lookup {
                    "temporal (lookup of the right side at processing time; state table: right rows keyed by the join key)"
                } else {
                    "(state tables: left and right rows keyed by the join key)"
                }
            ));
        }
        for e in self.expiry.iter().flatten() {
            let b = &self.bounds[e.bound];
            let (side, schema) = match b.side {
                JoinSide::Left => ("left", self.left.schema()),
                JoinSide::Right => ("right", self.right.schema()),
            };
            out.push(format!(
                "{}  state cleaning: {side} rows expire when {} < {} at the {} watermark",
                "  ".repeat(depth),
                schema.field(b.column).name(),
                b.other,
                match b.side {
                    JoinSide::Left => "right input's",
                    JoinSide::Right => "left input's",
                }
            ));
        }
        self.left.explain(depth + 1, out);
        self.right.explain(depth + 1, out);
    }

    fn visit_state(&mut self, path: &str, f: &mut StateVisitor<'_>) -> Result<()> {
        f(&state_name(path, "hash_join.left"), &mut self.left_state)?;
        f(&state_name(path, "hash_join.right"), &mut self.right_state)?;
        if let Some(e) = &mut self.expiry[0] {
            f(&state_name(path, "hash_join.left_expiry"), &mut e.index)?;
        }
        if let Some(e) = &mut self.expiry[1] {
            f(&state_name(path, "hash_join.right_expiry"), &mut e.index)?;
        }
        self.left.visit_state(&input_path(path, "left"), f)?;
        self.right.visit_state(&input_path(path, "right"), f)
    }

    fn restore(&mut self) -> Result<()> {
        // The side state tables are the whole state: nothing to re-derive.
        self.left.restore()?;
        self.right.restore()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::testing::{Rel, epoch, expect, physical, restore_into, run, schema};
    use datafusion::common::ScalarValue;

    fn sides() -> (Rel, Rel) {
        (
            Rel::new(1, "id:i64 k:i64 a:utf8"),
            Rel::new(2, "rk:i64 b:utf8"),
        )
    }

    /// `l JOIN r ON l.k = r.rk` of the given kind.
    fn join(l: &Rel, r: &Rel, kind: JoinKind) -> HashJoin {
        HashJoin::try_new(
            l.scan(),
            r.scan(),
            vec![physical("k", &l.schema)],
            vec![physical("rk", &r.schema)],
            vec![DataType::Int64],
            kind,
            schema("id:i64 k:i64 a:utf8 rk:i64 b:utf8"),
        )
        .unwrap()
    }

    #[test]
    fn inner_join_across_epochs() {
        let (l, r) = sides();
        let mut op = join(&l, &r, JoinKind::Inner);
        // Both sides in one epoch join once; a NULL key matches nothing.
        let out = run(
            &mut op,
            &epoch(&[
                (&l, "+1 | 1, 10, 'x'\n+1 | 2, 20, 'y'\n+1 | 3, NULL, 'z'"),
                (&r, "+1 | 10, 'p'"),
            ]),
        );
        assert_eq!(out, expect("+1 | 1, 10, 'x', 10, 'p'"));
        // Right rows join the left rows stored in an earlier epoch, with their weights.
        let out = run(&mut op, &epoch(&[(&r, "+2 | 20, 'q'\n+1 | NULL, 'n'")]));
        assert_eq!(out, expect("+2 | 2, 20, 'y', 20, 'q'"));
        // A left row joins a stored right row; the right row's retraction then retracts
        // both of its joined rows, the one of this epoch included.
        let out = run(
            &mut op,
            &epoch(&[(&l, "+1 | 4, 10, 'w'"), (&r, "-1 | 10, 'p'")]),
        );
        assert_eq!(out, expect("-1 | 1, 10, 'x', 10, 'p'"));
        // An update on one side updates every joined row.
        let out = run(&mut op, &epoch(&[(&l, "-1 | 2, 20, 'y'\n+1 | 2, 20, 'Y'")]));
        assert_eq!(
            out,
            expect("-2 | 2, 20, 'y', 20, 'q'\n+2 | 2, 20, 'Y', 20, 'q'")
        );
        assert!(run(&mut op, &EpochContext::default()).is_empty());
        assert!(run(&mut op, &epoch(&[(&l, ""), (&r, "")])).is_empty());
        let out = run(&mut op, &epoch(&[(&r, "+1 | 10, 'p2'")]));
        assert_eq!(
            out,
            expect("+1 | 1, 10, 'x', 10, 'p2'\n+1 | 4, 10, 'w', 10, 'p2'")
        );
        // Rows with a NULL key come and go without output.
        let out = run(
            &mut op,
            &epoch(&[(&l, "-1 | 3, NULL, 'z'"), (&r, "-1 | NULL, 'n'")]),
        );
        assert!(out.is_empty());
    }

    #[test]
    fn left_join_pads_until_a_match_appears_and_after_it_goes() {
        let (l, r) = sides();
        let mut op = join(&l, &r, JoinKind::Left);
        let out = run(
            &mut op,
            &epoch(&[(&l, "+1 | 1, 10, 'x'\n+1 | 3, NULL, 'z'\n+2 | 5, 30, 'v'")]),
        );
        assert_eq!(
            out,
            expect(
                "+1 | 1, 10, 'x', NULL, NULL\n\
                 +1 | 3, NULL, 'z', NULL, NULL\n\
                 +2 | 5, 30, 'v', NULL, NULL"
            )
        );
        // The first match retracts the padded row (with its weight); a NULL right key
        // matches nothing and is not padded.
        let out = run(
            &mut op,
            &epoch(&[(&r, "+1 | 10, 'p'\n+1 | NULL, 'n'\n+1 | 30, 's'")]),
        );
        assert_eq!(
            out,
            expect(
                "-1 | 1, 10, 'x', NULL, NULL\n+1 | 1, 10, 'x', 10, 'p'\n\
                 -2 | 5, 30, 'v', NULL, NULL\n+2 | 5, 30, 'v', 30, 's'"
            )
        );
        // A second match adds a row only.
        let out = run(&mut op, &epoch(&[(&r, "+1 | 10, 'p2'")]));
        assert_eq!(out, expect("+1 | 1, 10, 'x', 10, 'p2'"));
        // The last match goes: the padded row comes back.
        let out = run(&mut op, &epoch(&[(&r, "-1 | 10, 'p'\n-1 | 10, 'p2'")]));
        assert_eq!(
            out,
            expect(
                "-1 | 1, 10, 'x', 10, 'p'\n-1 | 1, 10, 'x', 10, 'p2'\n\
                 +1 | 1, 10, 'x', NULL, NULL"
            )
        );
        // Retractions of padded rows, NULL key or not.
        let out = run(
            &mut op,
            &epoch(&[(&l, "-1 | 3, NULL, 'z'\n-1 | 1, 10, 'x'")]),
        );
        assert_eq!(
            out,
            expect("-1 | 3, NULL, 'z', NULL, NULL\n-1 | 1, 10, 'x', NULL, NULL")
        );
        // A left row and its match in the same epoch: no padding in the net output.
        let out = run(
            &mut op,
            &epoch(&[(&l, "+1 | 6, 40, 'u'"), (&r, "+1 | 40, 't'")]),
        );
        assert_eq!(out, expect("+1 | 6, 40, 'u', 40, 't'"));
        assert!(run(&mut op, &EpochContext::default()).is_empty());
    }

    #[test]
    fn right_join_pads_right_rows() {
        let (l, r) = sides();
        let mut op = join(&l, &r, JoinKind::Right);
        let out = run(
            &mut op,
            &epoch(&[
                (&l, "+1 | 9, NULL, 'n'"),
                (&r, "+1 | 10, 'p'\n+1 | NULL, 'm'"),
            ]),
        );
        assert_eq!(
            out,
            expect("+1 | NULL, NULL, NULL, 10, 'p'\n+1 | NULL, NULL, NULL, NULL, 'm'")
        );
        let out = run(&mut op, &epoch(&[(&l, "+1 | 1, 10, 'x'")]));
        assert_eq!(
            out,
            expect("-1 | NULL, NULL, NULL, 10, 'p'\n+1 | 1, 10, 'x', 10, 'p'")
        );
        let out = run(&mut op, &epoch(&[(&l, "-1 | 1, 10, 'x'")]));
        assert_eq!(
            out,
            expect("+1 | NULL, NULL, NULL, 10, 'p'\n-1 | 1, 10, 'x', 10, 'p'")
        );
    }

    #[test]
    fn full_join_pads_both_sides() {
        let (l, r) = sides();
        let mut op = join(&l, &r, JoinKind::Full);
        let out = run(&mut op, &epoch(&[(&r, "+1 | 20, 'q'\n+1 | NULL, 'n'")]));
        assert_eq!(
            out,
            expect("+1 | NULL, NULL, NULL, 20, 'q'\n+1 | NULL, NULL, NULL, NULL, 'n'")
        );
        let out = run(&mut op, &epoch(&[(&l, "+2 | 2, 20, 'y'")]));
        assert_eq!(
            out,
            expect("-1 | NULL, NULL, NULL, 20, 'q'\n+2 | 2, 20, 'y', 20, 'q'")
        );
        let out = run(&mut op, &epoch(&[(&l, "-1 | 2, 20, 'y'")]));
        assert_eq!(out, expect("-1 | 2, 20, 'y', 20, 'q'"));
        let out = run(&mut op, &epoch(&[(&l, "-1 | 2, 20, 'y'")]));
        assert_eq!(
            out,
            expect("-1 | 2, 20, 'y', 20, 'q'\n+1 | NULL, NULL, NULL, 20, 'q'")
        );
        let out = run(&mut op, &epoch(&[(&r, "-1 | NULL, 'n'\n-1 | 20, 'q'")]));
        assert_eq!(
            out,
            expect("-1 | NULL, NULL, NULL, NULL, 'n'\n-1 | NULL, NULL, NULL, 20, 'q'")
        );
        let out = run(
            &mut op,
            &epoch(&[(&l, "+1 | 7, 70, 'l'\n+1 | 8, NULL, 'm'")]),
        );
        assert_eq!(
            out,
            expect("+1 | 7, 70, 'l', NULL, NULL\n+1 | 8, NULL, 'm', NULL, NULL")
        );
    }

    #[test]
    fn null_keys_match_when_asked() {
        let (l, r) = sides();
        let mut op = join(&l, &r, JoinKind::Inner).with_nulls_matching(true);
        let out = run(
            &mut op,
            &epoch(&[
                (&l, "+1 | 3, NULL, 'z'"),
                (&r, "+1 | NULL, 'n'\n+1 | 10, 'p'"),
            ]),
        );
        assert_eq!(out, expect("+1 | 3, NULL, 'z', NULL, 'n'"));
        let out = run(&mut op, &epoch(&[(&r, "-1 | NULL, 'n'")]));
        assert_eq!(out, expect("-1 | 3, NULL, 'z', NULL, 'n'"));
    }

    #[test]
    fn a_restored_join_continues_from_its_state() {
        let (l, r) = sides();
        let mut op = join(&l, &r, JoinKind::Left);
        run(
            &mut op,
            &epoch(&[(&l, "+1 | 1, 10, 'x'\n+2 | 5, 30, 'v'\n+1 | 3, NULL, 'z'")]),
        );
        run(&mut op, &epoch(&[(&r, "+1 | 10, 'p'\n+1 | 30, 's'")]));
        let mut fresh = join(&l, &r, JoinKind::Left);
        restore_into(&mut op, &mut fresh).unwrap();
        let next = epoch(&[
            (&r, "-1 | 10, 'p'"),
            (&l, "-2 | 5, 30, 'v'\n+1 | 6, 30, 'u'"),
        ]);
        let expected = expect(
            "-1 | 1, 10, 'x', 10, 'p'\n+1 | 1, 10, 'x', NULL, NULL\n\
             -2 | 5, 30, 'v', 30, 's'\n+1 | 6, 30, 'u', 30, 's'",
        );
        assert_eq!(run(&mut op, &next), expected);
        assert_eq!(run(&mut fresh, &next), expected);
        let next = epoch(&[(&r, "-1 | 30, 's'")]);
        let expected = expect("-1 | 6, 30, 'u', 30, 's'\n+1 | 6, 30, 'u', NULL, NULL");
        assert_eq!(run(&mut op, &next), expected);
        assert_eq!(run(&mut fresh, &next), expected);
    }

    /// `l JOIN r ON l.k = r.rk AND l.ts BETWEEN r.rts - 5 AND r.rts + 1` without the filter
    /// (the join alone; the filter above it would drop unmatched pairs): the bounds
    /// `l.ts >= r.rts - 5` and `r.rts >= l.ts - 1`, integers standing for times.
    fn interval_join(l: &Rel, r: &Rel, own_watermark: bool) -> HashJoin {
        HashJoin::try_new(
            l.scan(),
            r.scan(),
            vec![physical("k", &l.schema)],
            vec![physical("rk", &r.schema)],
            vec![DataType::Int64],
            JoinKind::Inner,
            schema("k:i64 ts:i64 a:utf8 rk:i64 rts:i64 b:utf8"),
        )
        .unwrap()
        .with_bounds(vec![
            JoinBound {
                side: JoinSide::Left,
                column: 1,
                other: physical("rts - 5", &r.schema),
                expires: true,
                own_watermark,
            },
            JoinBound {
                side: JoinSide::Right,
                column: 1,
                other: physical("ts - 1", &l.schema),
                expires: true,
                own_watermark: false,
            },
        ])
        .unwrap()
    }

    fn with_watermarks(mut ctx: EpochContext, marks: &[(&Rel, i64)]) -> EpochContext {
        for (rel, w) in marks {
            ctx.watermarks
                .insert(rel.id, vec![(1, ScalarValue::Int64(Some(*w)))]);
        }
        ctx
    }

    #[test]
    fn watermarks_expire_rows_no_later_row_can_match() {
        let l = Rel::new(1, "k:i64 ts:i64 a:utf8");
        let r = Rel::new(2, "rk:i64 rts:i64 b:utf8");
        let mut op = interval_join(&l, &r, false);
        let out = run(
            &mut op,
            &epoch(&[(&l, "+1 | 1, 10, 'a10'"), (&r, "+1 | 1, 12, 'b12'")]),
        );
        assert_eq!(out, expect("+1 | 1, 10, 'a10', 1, 12, 'b12'"));
        // Left watermark 18, right 17: left rows below 17 - 5 = 12 and right rows below
        // 18 - 1 = 17 can match nothing still to come.
        let ctx = with_watermarks(EpochContext::default(), &[(&l, 18), (&r, 17)]);
        assert!(run(&mut op, &ctx).is_empty());
        assert_eq!(op.expired_rows(), 2);
        // Output watermarks: ts >= min(18, 17 - 5) = 12, rts >= min(17, 18 - 1) = 17.
        assert_eq!(
            op.watermarks(&ctx),
            vec![
                (1, ScalarValue::Int64(Some(12))),
                (4, ScalarValue::Int64(Some(17)))
            ]
        );
        // New rows join only what is left: without the expiry the join would also pair
        // (20, 12) and (10, 19).
        let out = run(
            &mut op,
            &epoch(&[(&l, "+1 | 1, 20, 'a20'"), (&r, "+1 | 1, 19, 'b19'")]),
        );
        assert_eq!(out, expect("+1 | 1, 20, 'a20', 1, 19, 'b19'"));
        // The expiry indexes are state: a restored join expires the same rows.
        let mut fresh = interval_join(&l, &r, false);
        restore_into(&mut op, &mut fresh).unwrap();
        let ctx = with_watermarks(EpochContext::default(), &[(&l, 30), (&r, 30)]);
        assert!(run(&mut fresh, &ctx).is_empty());
        assert_eq!(fresh.expired_rows(), 2);
        let out = run(&mut fresh, &epoch(&[(&l, "+1 | 1, 31, 'a31'")]));
        assert!(out.is_empty());
    }

    #[test]
    fn a_side_that_retracts_keeps_rows_until_its_own_watermark_passes() {
        let l = Rel::new(1, "k:i64 ts:i64 a:utf8");
        let r = Rel::new(2, "rk:i64 rts:i64 b:utf8");
        let mut op = interval_join(&l, &r, true);
        run(
            &mut op,
            &epoch(&[(&l, "+1 | 1, 10, 'a10'"), (&r, "+1 | 1, 12, 'b12'")]),
        );
        // The right watermark alone would expire the left row (10 < 20 - 5), but the left
        // side may still retract it: its own watermark (8) has not passed it.
        let ctx = with_watermarks(EpochContext::default(), &[(&l, 8), (&r, 20)]);
        run(&mut op, &ctx);
        assert_eq!(op.expired_rows(), 0);
        let out = run(&mut op, &epoch(&[(&l, "-1 | 1, 10, 'a10'")]));
        assert_eq!(out, expect("-1 | 1, 10, 'a10', 1, 12, 'b12'"));
        run(&mut op, &epoch(&[(&l, "+1 | 1, 11, 'a11'")]));
        let ctx = with_watermarks(EpochContext::default(), &[(&l, 12), (&r, 20)]);
        run(&mut op, &ctx);
        // a11 is below both 20 - 5 and its own watermark 12: it expires. b12 is not below
        // 12 - 1: it stays.
        assert_eq!(op.expired_rows(), 1);
    }
}

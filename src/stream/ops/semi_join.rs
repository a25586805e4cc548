//! `SemiJoin`: incremental left semi and anti joins (`IN`, `EXISTS`, `NOT EXISTS`, `NOT IN`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, Rows, SortField};
use datafusion::physical_expr::PhysicalExpr;

use crate::common::ChangeBatch;
use crate::error::{Error, Result};
use crate::state::StateTable;
use crate::state::table::{batch_from_columns, row_converter};
use crate::stream::ops::hash_join::side_schema;
use crate::stream::{EpochContext, Operator, StateVisitor, input_path, state_name};

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
/// State, in state tables (in the state backend, not in memory):
/// - the left rows keyed by (join key, row): columns `__join_key_<i>` then the left columns,
///   so a key's rows are one prefix scan. Rows whose key has a NULL are kept only for `NOT
///   IN` (their verdict changes when the right side becomes empty or not); for `IN` and `NOT
///   EXISTS` it never changes;
/// - the right side's join keys (`__semi_key_<i>`), a multiset: a key's count is its number
///   of right rows; and the right keys with a NULL apart (their count decides `NOT IN`).
///
/// Per epoch: `L'⋉R' − L⋉R = (L⋉R' − L⋉R) + ΔL⋉R'`; the first term re-reads only the left
/// rows of the keys whose right count crossed zero (one prefix scan each), or every left row
/// when the right side's total or NULL count crossed zero (`NOT IN` only). The second costs
/// one right-count lookup per distinct key of the change. So an epoch costs O(change × log n)
/// plus the left rows whose verdict flips.
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
    /// Left rows keyed by (join key, row).
    left_state: StateTable,
    /// The right side's keys without a NULL (all keys when NULLs match).
    right_state: StateTable,
    /// The right side's keys with a NULL.
    right_nulls: StateTable,
}

/// What decides whether a left row passes: its key's right count and the right side's totals.
#[derive(Clone, Copy)]
struct RightView {
    total: i64,
    nulls: i64,
}

/// One change's join keys: their columns, encodings, and which have a NULL that matches
/// nothing.
struct Keys {
    cols: Vec<ArrayRef>,
    rows: Rows,
    null: Vec<bool>,
}

impl Keys {
    fn key(&self, i: usize) -> Option<&[u8]> {
        (!self.null[i]).then(|| self.rows.row(i).data())
    }
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
        key_types: Vec<DataType>,
        kind: SemiKind,
    ) -> Result<Self> {
        let key_converter =
            RowConverter::new(key_types.iter().cloned().map(SortField::new).collect())?;
        let schema = left.schema();
        let left_rows = row_converter(&schema)?;
        let left_state = StateTable::new(side_schema(&key_types, &schema))?;
        let key_schema = Arc::new(Schema::new(
            key_types
                .iter()
                .enumerate()
                .map(|(i, t)| Field::new(format!("__semi_key_{i}"), t.clone(), true))
                .collect::<Vec<_>>(),
        ));
        let right_state = StateTable::new(key_schema.clone())?;
        let right_nulls = StateTable::new(key_schema)?;
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
            left_state,
            right_state,
            right_nulls,
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

    fn right_view(&self) -> RightView {
        RightView {
            total: self.right_state.len() + self.right_nulls.len(),
            nulls: self.right_nulls.len(),
        }
    }

    /// Evaluates the join keys of a change.
    fn keys(&self, exprs: &[Arc<dyn PhysicalExpr>], change: &ChangeBatch) -> Result<Keys> {
        let n = change.len();
        let cols = exprs
            .iter()
            .map(|e| Ok(e.evaluate(&change.batch)?.into_array(n)?))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let rows = self.key_converter.convert_columns(&cols)?;
        let null = (0..n)
            .map(|i| !self.nulls_match && cols.iter().any(|c| c.is_null(i)))
            .collect();
        Ok(Keys { cols, rows, null })
    }

    /// The right count of `key` now, read once per epoch and key.
    fn right_count(&self, cache: &mut HashMap<Box<[u8]>, i64>, key: &[u8]) -> Result<i64> {
        if let Some(c) = cache.get(key) {
            return Ok(*c);
        }
        let c = self.right_state.count_prefix(key)?;
        cache.insert(Box::from(key), c);
        Ok(c)
    }

    /// Reads the right counts of the change's keys not yet in `cache`, all through one
    /// iterator (one seek per distinct key), so that [`SemiJoin::right_count`] finds them.
    fn prefetch_right_counts(
        &self,
        cache: &mut HashMap<Box<[u8]>, i64>,
        keys: &Keys,
        n: usize,
    ) -> Result<()> {
        let mut seen: HashSet<&[u8]> = HashSet::new();
        let missing: Vec<&[u8]> = (0..n)
            .filter_map(|i| keys.key(i))
            .filter(|k| !cache.contains_key(*k) && seen.insert(*k))
            .collect();
        let counts = self.right_state.count_prefixes(missing.iter().copied())?;
        for (k, c) in missing.into_iter().zip(counts) {
            cache.insert(Box::from(k), c);
        }
        Ok(())
    }

    /// Applies a right change to the right state, recording each key's count before the
    /// epoch in `before` and its count now in `now`.
    fn apply_right(
        &mut self,
        change: &ChangeBatch,
        before: &mut HashMap<Box<[u8]>, i64>,
        now: &mut HashMap<Box<[u8]>, i64>,
    ) -> Result<()> {
        let keys = self.keys(&self.right_keys, change)?;
        self.prefetch_right_counts(now, &keys, change.len())?;
        for (i, w) in change.weights.values().iter().enumerate() {
            let Some(k) = keys.key(i) else { continue };
            let c = self.right_count(now, k)?;
            before.entry(Box::from(k)).or_insert(c);
            let after = c + w;
            if after < 0 {
                return Err(Error::Internal("semi join right count below zero".into()));
            }
            now.insert(Box::from(k), after);
        }
        let n = change.len();
        let stored = ChangeBatch::new(
            batch_from_columns(self.right_state.schema(), keys.cols, n)?,
            change.weights.clone(),
        )?;
        if keys.null.iter().any(|x| *x) {
            let null = BooleanArray::from(keys.null.clone());
            let kept = arrow::compute::not(&null)?;
            self.right_nulls.apply(&stored.filter(&null)?)?;
            self.right_state.apply(&stored.filter(&kept)?)
        } else {
            self.right_state.apply(&stored)
        }
    }

    /// Applies a left change to the left state, emitting each row that passes now.
    fn apply_left(
        &mut self,
        change: &ChangeBatch,
        counts: &mut HashMap<Box<[u8]>, i64>,
        out: &mut Vec<(Box<[u8]>, i64)>,
    ) -> Result<()> {
        let keys = self.keys(&self.left_keys, change)?;
        self.prefetch_right_counts(counts, &keys, change.len())?;
        let rows = self.left_rows.convert_columns(change.batch.columns())?;
        let right = self.right_view();
        for (i, w) in change.weights.values().iter().enumerate() {
            let key = keys.key(i);
            let count = match key {
                Some(k) => self.right_count(counts, k)?,
                None => 0,
            };
            if self.passes(key, count, right) {
                out.push((Box::from(rows.row(i).data()), *w));
            }
        }
        // A NULL key's verdict changes only for NOT IN; elsewhere its row need not be kept.
        let keep_nulls = self.kind == SemiKind::NullAwareAnti;
        let n = change.len();
        let mut columns = keys.cols;
        columns.extend(change.batch.columns().iter().cloned());
        let stored = ChangeBatch::new(
            batch_from_columns(self.left_state.schema(), columns, n)?,
            change.weights.clone(),
        )?;
        if keep_nulls || !keys.null.iter().any(|x| *x) {
            self.left_state.apply(&stored)
        } else {
            let kept: BooleanArray = keys.null.iter().map(|x| Some(!x)).collect();
            self.left_state.apply(&stored.filter(&kept)?)
        }
    }

    /// Emits new minus old verdicts for the stored left rows of the keys in `crossed`.
    fn reevaluate_keys(
        &self,
        crossed: &[(Box<[u8]>, i64, i64)],
        old: RightView,
        new: RightView,
        out: &mut Vec<(Box<[u8]>, i64)>,
    ) -> Result<()> {
        for (key, then, now) in crossed {
            let sign = i64::from(self.passes(Some(key), *now, new))
                - i64::from(self.passes(Some(key), *then, old));
            if sign == 0 {
                continue;
            }
            self.left_state.scan_prefix(key, &mut |k, c| {
                out.push((Box::from(&k[key.len()..]), sign * c));
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Emits new minus old verdicts for every stored left row (the right side's total or
    /// NULL count crossed zero under `NOT IN`). O(left rows).
    fn reevaluate_all(
        &self,
        old: RightView,
        new: RightView,
        before: &HashMap<Box<[u8]>, i64>,
        counts: &mut HashMap<Box<[u8]>, i64>,
        out: &mut Vec<(Box<[u8]>, i64)>,
    ) -> Result<()> {
        let stored = self.left_state.rows()?;
        if stored.is_empty() {
            return Ok(());
        }
        let batch = self
            .left_state
            .layout()
            .decode(stored.iter().map(|(k, _)| k.as_ref()), stored.len())?;
        let nkeys = self.left_keys.len();
        let key_cols = &batch.columns()[..nkeys];
        let keys = self.key_converter.convert_columns(key_cols)?;
        for (i, (k, c)) in stored.iter().enumerate() {
            let key_bytes = keys.row(i).data();
            let key = (self.nulls_match || key_cols.iter().all(|col| col.is_valid(i)))
                .then_some(key_bytes);
            let (then, now) = match key {
                Some(kb) => {
                    let now = self.right_count(counts, kb)?;
                    (before.get(kb).copied().unwrap_or(now), now)
                }
                None => (0, 0),
            };
            let sign =
                i64::from(self.passes(key, now, new)) - i64::from(self.passes(key, then, old));
            if sign != 0 {
                out.push((Box::from(&k[key_bytes.len()..]), sign * c));
            }
        }
        Ok(())
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

    fn process(&mut self, input: &EpochContext) -> Result<Vec<ChangeBatch>> {
        let left = self.left.process(input)?;
        let right = self.right.process(input)?;
        let mut out = Vec::new();
        // First the stored left rows against the new right side (L⋉R' − L⋉R).
        let old = self.right_view();
        let mut before: HashMap<Box<[u8]>, i64> = HashMap::new();
        let mut counts: HashMap<Box<[u8]>, i64> = HashMap::new();
        for c in right.iter().filter(|c| !c.is_empty()) {
            self.apply_right(c, &mut before, &mut counts)?;
        }
        let new = self.right_view();
        let global = self.kind == SemiKind::NullAwareAnti
            && ((old.total == 0) != (new.total == 0) || (old.nulls == 0) != (new.nulls == 0));
        if global {
            self.reevaluate_all(old, new, &before, &mut counts, &mut out)?;
        } else {
            let mut crossed: Vec<(Box<[u8]>, i64, i64)> = before
                .iter()
                .map(|(k, then)| (k.clone(), *then, counts.get(k).copied().unwrap_or(0)))
                .filter(|(_, then, now)| (*then == 0) != (*now == 0))
                .collect();
            crossed.sort();
            self.reevaluate_keys(&crossed, old, new, &mut out)?;
        }
        // Then the left changes against the new right side (ΔL⋉R').
        for c in left.iter().filter(|c| !c.is_empty()) {
            self.apply_left(c, &mut counts, &mut out)?;
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
            "{}StreamSemiJoin: {:?} on [{}] (state tables: left rows keyed by the join key; right join keys counted)",
            "  ".repeat(depth),
            self.kind,
            on.join(", ")
        ));
        self.left.explain(depth + 1, out);
        self.right.explain(depth + 1, out);
    }

    fn visit_state(&mut self, path: &str, f: &mut StateVisitor<'_>) -> Result<()> {
        f(&state_name(path, "semi_join.left"), &mut self.left_state)?;
        f(&state_name(path, "semi_join.right"), &mut self.right_state)?;
        f(
            &state_name(path, "semi_join.right_nulls"),
            &mut self.right_nulls,
        )?;
        self.left.visit_state(&input_path(path, "left"), f)?;
        self.right.visit_state(&input_path(path, "right"), f)
    }

    fn restore(&mut self) -> Result<()> {
        // The state tables are the whole state: nothing to re-derive.
        self.left.restore()?;
        self.right.restore()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::testing::{Rel, epoch, expect, physical, restore_into, run};

    fn sides() -> (Rel, Rel) {
        (Rel::new(1, "id:i64 k:i64"), Rel::new(2, "rk:i64"))
    }

    /// `l WHERE l.k [NOT] IN / [NOT] EXISTS (r.rk)`, by `kind`.
    fn semi(l: &Rel, r: &Rel, kind: SemiKind) -> SemiJoin {
        SemiJoin::try_new(
            l.scan(),
            r.scan(),
            vec![physical("k", &l.schema)],
            vec![physical("rk", &r.schema)],
            vec![DataType::Int64],
            kind,
        )
        .unwrap()
    }

    /// Epochs 1 to 5 of [`semi_join_follows_matches_across_epochs`].
    fn semi_first_epochs(l: &Rel, r: &Rel, op: &mut SemiJoin) {
        let out = run(
            op,
            &epoch(&[(l, "+1 | 1, 10\n+1 | 2, 20\n+1 | 3, NULL"), (r, "+1 | 10")]),
        );
        assert_eq!(out, expect("+1 | 1, 10"));
        // More matches of a matched key, and a NULL right key, change nothing.
        assert!(run(op, &epoch(&[(r, "+1 | 10\n+1 | NULL")])).is_empty());
        assert!(run(op, &epoch(&[(r, "-1 | 10")])).is_empty());
        // The last match goes.
        assert_eq!(run(op, &epoch(&[(r, "-1 | 10")])), expect("-1 | 1, 10"));
        // A match for a stored row and for a new row (weight 2) in one epoch.
        let out = run(op, &epoch(&[(r, "+1 | 20"), (l, "+2 | 4, 20")]));
        assert_eq!(out, expect("+1 | 2, 20\n+2 | 4, 20"));
    }

    #[test]
    fn semi_join_follows_matches_across_epochs() {
        let (l, r) = sides();
        let mut op = semi(&l, &r, SemiKind::Semi);
        semi_first_epochs(&l, &r, &mut op);
        // A left update moves its row to a key without a match.
        let out = run(&mut op, &epoch(&[(&l, "-1 | 2, 20\n+1 | 2, 10")]));
        assert_eq!(out, expect("-1 | 2, 20"));
        assert!(run(&mut op, &EpochContext::default()).is_empty());
        assert!(run(&mut op, &epoch(&[(&l, ""), (&r, "")])).is_empty());
        // One key gains its first match while another loses its last.
        let out = run(&mut op, &epoch(&[(&r, "+1 | 10\n-1 | 20")]));
        assert_eq!(out, expect("+1 | 1, 10\n+1 | 2, 10\n-2 | 4, 20"));
        assert!(run(&mut op, &epoch(&[(&r, "-1 | NULL")])).is_empty());
        // A NULL left key never passes, in or out.
        assert!(run(&mut op, &epoch(&[(&l, "-1 | 3, NULL")])).is_empty());
    }

    #[test]
    fn a_restored_semi_join_continues_from_its_state() {
        let (l, r) = sides();
        let mut op = semi(&l, &r, SemiKind::Semi);
        semi_first_epochs(&l, &r, &mut op);
        let mut fresh = semi(&l, &r, SemiKind::Semi);
        restore_into(&mut op, &mut fresh).unwrap();
        let next = epoch(&[(&r, "+1 | 10\n-1 | 20"), (&l, "+1 | 6, 10")]);
        let expected = expect("+1 | 1, 10\n-1 | 2, 20\n-2 | 4, 20\n+1 | 6, 10");
        assert_eq!(run(&mut op, &next), expected);
        assert_eq!(run(&mut fresh, &next), expected);
    }

    #[test]
    fn anti_join_keeps_rows_without_a_match() {
        let (l, r) = sides();
        let mut op = semi(&l, &r, SemiKind::Anti);
        let out = run(
            &mut op,
            &epoch(&[
                (&l, "+1 | 1, 10\n+1 | 2, 20\n+1 | 3, NULL"),
                (&r, "+1 | 10"),
            ]),
        );
        // NOT EXISTS: a NULL key matches nothing, so its row is kept.
        assert_eq!(out, expect("+1 | 2, 20\n+1 | 3, NULL"));
        assert!(run(&mut op, &epoch(&[(&r, "+1 | NULL")])).is_empty());
        assert_eq!(
            run(&mut op, &epoch(&[(&r, "+2 | 20")])),
            expect("-1 | 2, 20")
        );
        assert_eq!(
            run(&mut op, &epoch(&[(&r, "-1 | 10")])),
            expect("+1 | 1, 10")
        );
        assert!(run(&mut op, &epoch(&[(&r, "-1 | 20")])).is_empty());
        let out = run(&mut op, &epoch(&[(&l, "-1 | 3, NULL\n+3 | 5, 50")]));
        assert_eq!(out, expect("-1 | 3, NULL\n+3 | 5, 50"));
        assert!(run(&mut op, &EpochContext::default()).is_empty());
        assert_eq!(
            run(&mut op, &epoch(&[(&r, "-1 | 20")])),
            expect("+1 | 2, 20")
        );
        // The restored join sees the same right counts.
        let mut fresh = semi(&l, &r, SemiKind::Anti);
        restore_into(&mut op, &mut fresh).unwrap();
        let next = epoch(&[(&r, "+1 | 50\n+1 | 20")]);
        let expected = expect("-1 | 2, 20\n-3 | 5, 50");
        assert_eq!(run(&mut op, &next), expected);
        assert_eq!(run(&mut fresh, &next), expected);
    }

    /// Epochs 1 to 4 of [`not_in_follows_the_null_rule`].
    fn not_in_first_epochs(l: &Rel, r: &Rel, op: &mut SemiJoin) {
        // Over an empty right side every row passes, a NULL key too.
        let out = run(op, &epoch(&[(l, "+1 | 1, 10\n+1 | 2, 20\n+1 | 3, NULL")]));
        assert_eq!(out, expect("+1 | 1, 10\n+1 | 2, 20\n+1 | 3, NULL"));
        // A right row: its key's rows go, and so does the NULL key's row (NULL NOT IN (10)
        // is NULL).
        let out = run(op, &epoch(&[(r, "+1 | 10")]));
        assert_eq!(out, expect("-1 | 1, 10\n-1 | 3, NULL"));
        // A NULL right key: nothing passes (20 NOT IN (10, NULL) is NULL).
        assert_eq!(run(op, &epoch(&[(r, "+1 | NULL")])), expect("-1 | 2, 20"));
        assert!(run(op, &epoch(&[(l, "+1 | 4, 30")])).is_empty());
    }

    #[test]
    fn not_in_follows_the_null_rule() {
        let (l, r) = sides();
        let mut op = semi(&l, &r, SemiKind::NullAwareAnti);
        not_in_first_epochs(&l, &r, &mut op);
        // The NULL right key goes: the rows without a match come back.
        let out = run(&mut op, &epoch(&[(&r, "-1 | NULL")]));
        assert_eq!(out, expect("+1 | 2, 20\n+1 | 4, 30"));
        // The right side empties: every row passes again.
        let out = run(&mut op, &epoch(&[(&r, "-1 | 10")]));
        assert_eq!(out, expect("+1 | 1, 10\n+1 | 3, NULL"));
        assert!(run(&mut op, &EpochContext::default()).is_empty());
        assert_eq!(
            run(&mut op, &epoch(&[(&l, "-1 | 3, NULL")])),
            expect("-1 | 3, NULL")
        );
        // A first right row again, then a key that gains a match while the side is not
        // empty.
        assert_eq!(
            run(&mut op, &epoch(&[(&r, "+1 | 20")])),
            expect("-1 | 2, 20")
        );
        assert_eq!(
            run(&mut op, &epoch(&[(&r, "+1 | 30")])),
            expect("-1 | 4, 30")
        );
        assert_eq!(
            run(&mut op, &epoch(&[(&r, "-1 | 30")])),
            expect("+1 | 4, 30")
        );
    }

    #[test]
    fn a_restored_not_in_continues_from_its_state() {
        let (l, r) = sides();
        let mut op = semi(&l, &r, SemiKind::NullAwareAnti);
        not_in_first_epochs(&l, &r, &mut op);
        let mut fresh = semi(&l, &r, SemiKind::NullAwareAnti);
        restore_into(&mut op, &mut fresh).unwrap();
        let next = epoch(&[(&r, "-1 | NULL")]);
        let expected = expect("+1 | 2, 20\n+1 | 4, 30");
        assert_eq!(run(&mut op, &next), expected);
        assert_eq!(run(&mut fresh, &next), expected);
        let next = epoch(&[(&r, "-1 | 10")]);
        let expected = expect("+1 | 1, 10\n+1 | 3, NULL");
        assert_eq!(run(&mut op, &next), expected);
        assert_eq!(run(&mut fresh, &next), expected);
    }

    #[test]
    fn null_keys_match_when_asked() {
        let (l, r) = sides();
        let mut op = semi(&l, &r, SemiKind::Semi).with_nulls_matching(true);
        let out = run(
            &mut op,
            &epoch(&[(&l, "+1 | 3, NULL\n+1 | 1, 10"), (&r, "+1 | NULL")]),
        );
        assert_eq!(out, expect("+1 | 3, NULL"));
        assert_eq!(
            run(&mut op, &epoch(&[(&r, "-1 | NULL")])),
            expect("-1 | 3, NULL")
        );
        let mut op = semi(&l, &r, SemiKind::Anti).with_nulls_matching(true);
        let out = run(
            &mut op,
            &epoch(&[(&l, "+1 | 3, NULL\n+1 | 1, 10"), (&r, "+1 | NULL")]),
        );
        assert_eq!(out, expect("+1 | 1, 10"));
        assert_eq!(
            run(&mut op, &epoch(&[(&r, "-1 | NULL")])),
            expect("+1 | 3, NULL")
        );
    }
}

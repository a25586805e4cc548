//! Secondary indexes (`CREATE INDEX`): a relation's rows kept again in an ordered state table
//! keyed by the index's columns (a covering index, as RisingWave's and Materialize's are),
//! and the uniqueness checks of unique indexes and primary keys.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, RecordBatch};
use arrow::row::Rows;

use crate::catalog::IndexDef;
use crate::common::ChangeBatch;
use crate::error::{Error, Result};
use crate::state::StateTable;
use crate::state::table::KeyLayout;

/// A secondary index's definition and rows (a table's or a view's).
pub struct SecondaryIndex {
    pub def: IndexDef,
    pub rows: StateTable,
}

impl SecondaryIndex {
    /// Builds the index `def` over `rows` (all of them, O(n log n)).
    ///
    /// # Errors
    /// `23505` when a unique index finds a key (without NULLs) on two rows; Arrow errors.
    pub fn build(def: &IndexDef, rows: &StateTable) -> Result<Self> {
        let schema = rows.schema().clone();
        let key: Vec<(usize, bool)> = def
            .columns
            .iter()
            .map(|c| (c.column, c.descending))
            .collect();
        let layout = Arc::new(KeyLayout::with_directions(schema, &key)?);
        let mut table = StateTable::with_layout(layout).stored(rows.backend())?;
        let all = rows.to_change()?;
        if def.unique {
            let keys = table.layout().encode_key(&all.batch)?;
            let mut seen: HashSet<&[u8]> = HashSet::new();
            for (i, w) in all.weights.values().iter().enumerate() {
                if key_has_null(&all.batch, &key, i) {
                    continue;
                }
                if *w > 1 || !seen.insert(keys.row(i).data()) {
                    return Err(Error::data(
                        "23505",
                        format!(
                            "could not create unique index \"{}\": Key ({})=({}) is duplicated",
                            def.name,
                            key_names(&all.batch, &key),
                            key_values(&all.batch, &key, i)
                        ),
                    ));
                }
            }
        }
        table.apply(&all)?;
        Ok(SecondaryIndex {
            def: def.clone(),
            rows: table,
        })
    }

    /// Checks that `change` (already valid for the table) leaves no key of this unique
    /// index on two rows. O(rows of the change × log n).
    pub fn check_unique(&self, change: &ChangeBatch) -> Result<()> {
        if !self.def.unique {
            return Ok(());
        }
        let key: Vec<(usize, bool)> = self
            .def
            .columns
            .iter()
            .map(|c| (c.column, c.descending))
            .collect();
        let keys = self.rows.layout().encode_key(&change.batch)?;
        let skip: Vec<bool> = (0..change.len())
            .map(|i| key_has_null(&change.batch, &key, i))
            .collect();
        if let Some(i) = first_duplicate(&self.rows, &keys, change, &skip)? {
            return Err(Error::data(
                "23505",
                format!(
                    "duplicate key value violates unique constraint \"{}\": Key ({})=({}) already exists",
                    self.def.name,
                    key_names(&change.batch, &key),
                    key_values(&change.batch, &key, i)
                ),
            ));
        }
        Ok(())
    }
}

/// Whether row `i` of `batch` has a NULL in one of the `key` columns (PostgreSQL's unique
/// indexes treat NULLs as distinct).
pub fn key_has_null(batch: &RecordBatch, key: &[(usize, bool)], i: usize) -> bool {
    key.iter().any(|(c, _)| batch.column(*c).is_null(i))
}

pub fn key_names(batch: &RecordBatch, key: &[(usize, bool)]) -> String {
    key.iter()
        .map(|(c, _)| batch.schema().field(*c).name().clone())
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn key_values(batch: &RecordBatch, key: &[(usize, bool)], i: usize) -> String {
    key.iter()
        .map(|(c, _)| {
            arrow::util::display::array_value_to_string(batch.column(*c), i).unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The first row of `change` whose key (in `keys`, one per row; rows with `skip` set are
/// not checked) would be on more than one row of `table` once `change` is applied: the
/// table's rows with that key prefix plus the change's net weight for it.
///
/// # Errors
/// RocksDB read errors of a stored table.
pub fn first_duplicate(
    table: &StateTable,
    keys: &Rows,
    change: &ChangeBatch,
    skip: &[bool],
) -> Result<Option<usize>> {
    let mut delta: HashMap<&[u8], i64> = HashMap::new();
    for (i, w) in change.weights.values().iter().enumerate() {
        if !skip[i] {
            *delta.entry(keys.row(i).data()).or_default() += w;
        }
    }
    let checked: Vec<usize> = change
        .weights
        .values()
        .iter()
        .enumerate()
        .filter(|(i, w)| !skip[*i] && **w > 0)
        .map(|(i, _)| i)
        .collect();
    let held = table.count_prefixes(checked.iter().map(|i| keys.row(*i).data()))?;
    Ok(checked
        .into_iter()
        .zip(held)
        .find(|(i, held)| held + delta[keys.row(*i).data()] > 1)
        .map(|(i, _)| i))
}

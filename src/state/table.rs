//! `StateTable`: a multiset of rows keyed by their order-preserving byte encoding.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, SortField};

use crate::error::{Error, Result};
use crate::stream::change::ChangeBatch;

/// Keys changed since the last checkpoint, back to back in one buffer.
#[derive(Default)]
struct ChangedKeys {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

/// A multiset of rows of one schema: row bytes (Arrow's row format) to a positive count.
///
/// Used for a table's contents, a materialized view's contents and a join side. Reads see
/// every applied change; the owner decides when a snapshot is published.
pub struct StateTable {
    schema: SchemaRef,
    converter: RowConverter,
    rows: HashMap<Box<[u8]>, i64>,
    /// Sum of all counts (the number of rows with duplicates).
    total: i64,
    /// The epoch write buffer: keys changed since the last checkpoint, appended back to back
    /// (duplicates allowed; cheaper than a set on the hot path). `None` when changes are not
    /// tracked, so the next checkpoint must write the whole table.
    dirty: Option<ChangedKeys>,
}

impl std::fmt::Debug for StateTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateTable")
            .field("rows", &self.total)
            .finish()
    }
}

impl StateTable {
    /// An empty state table for rows of `schema`.
    ///
    /// # Errors
    /// Arrow errors when a column type has no row encoding.
    pub fn new(schema: SchemaRef) -> Result<Self> {
        let converter = row_converter(&schema)?;
        Ok(StateTable {
            schema,
            converter,
            rows: HashMap::new(),
            total: 0,
            dirty: None,
        })
    }

    /// Starts recording changed keys for incremental checkpoints (the next
    /// [`StateTable::take_changes`] then returns only what changed from now on).
    pub fn track_changes(&mut self) {
        self.dirty = Some(ChangedKeys::default());
    }

    /// Stops recording changed keys (the next checkpoint must write the whole table).
    pub fn untrack(&mut self) {
        self.dirty = None;
    }

    /// The rows changed since the last call (or since tracking began), each with its current
    /// count (0 = deleted); `None` when changes were not tracked and the whole table must be
    /// written. Tracking continues afterwards.
    pub fn take_changes(&mut self) -> Option<Vec<(Box<[u8]>, i64)>> {
        let dirty = self.dirty.replace(ChangedKeys::default())?;
        let mut seen: HashSet<&[u8]> = HashSet::with_capacity(dirty.ends.len());
        let mut out = Vec::with_capacity(dirty.ends.len());
        let mut start = 0;
        for end in &dirty.ends {
            let k = &dirty.bytes[start..*end];
            start = *end;
            if seen.insert(k) {
                let c = self.rows.get(k).copied().unwrap_or(0);
                out.push((Box::from(k), c));
            }
        }
        Some(out)
    }

    /// Every distinct row's key bytes (Arrow row format) and count.
    pub fn rows(&self) -> impl Iterator<Item = (&[u8], i64)> {
        self.rows.iter().map(|(k, c)| (k.as_ref(), *c))
    }

    /// Loads a row from a checkpoint (key bytes in this table's row format, count > 0),
    /// without recording it as a change.
    pub fn load_row(&mut self, key: &[u8], count: i64) {
        if count > 0 {
            self.total += count;
            *self.rows.entry(key.into()).or_default() += count;
        }
    }

    /// The row schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Number of rows, duplicates counted.
    pub fn len(&self) -> i64 {
        self.total
    }

    /// True when no row is present.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Applies a change batch: each row's count moves by its weight.
    ///
    /// # Errors
    /// [`Error::Internal`] if a count would become negative (a retraction of a missing row).
    pub fn apply(&mut self, change: &ChangeBatch) -> Result<()> {
        if change.is_empty() {
            return Ok(());
        }
        let rows = self.converter.convert_columns(change.batch.columns())?;
        let no_columns = change.batch.num_columns() == 0;
        for (i, w) in change.weights.values().iter().enumerate() {
            // Rows of a schema without columns are all the empty row.
            let bytes: &[u8] = if no_columns { &[] } else { rows.row(i).data() };
            if let Some(d) = &mut self.dirty {
                d.bytes.extend_from_slice(bytes);
                d.ends.push(d.bytes.len());
            }
            match self.rows.get_mut(bytes) {
                Some(c) => {
                    *c += w;
                    if *c == 0 {
                        self.rows.remove(bytes);
                    } else if *c < 0 {
                        return Err(Error::Internal("state table row count below zero".into()));
                    }
                }
                None => {
                    if *w < 0 {
                        return Err(Error::Internal(
                            "retraction of a row that is not in the state table".into(),
                        ));
                    }
                    if *w > 0 {
                        self.rows.insert(bytes.into(), *w);
                    }
                }
            }
            self.total += w;
        }
        Ok(())
    }

    /// The count of each row of `batch` (0 when absent), in order.
    ///
    /// # Errors
    /// Arrow errors when `batch` has another schema.
    pub fn counts(&self, batch: &RecordBatch) -> Result<Vec<i64>> {
        let rows = self.converter.convert_columns(batch.columns())?;
        Ok((0..batch.num_rows())
            .map(|i| {
                let key: &[u8] = if batch.num_columns() == 0 {
                    &[]
                } else {
                    rows.row(i).data()
                };
                self.rows.get(key).copied().unwrap_or(0)
            })
            .collect())
    }

    /// All rows (each repeated by its count) as one batch.
    ///
    /// # Errors
    /// Arrow errors from decoding.
    pub fn to_batch(&self) -> Result<RecordBatch> {
        let parser = self.converter.parser();
        let iter = self
            .rows
            .iter()
            .flat_map(|(k, c)| std::iter::repeat_n(k, *c as usize))
            .map(|k| parser.parse(k));
        let columns = self.converter.convert_rows(iter)?;
        batch_from_columns(&self.schema, columns, self.total as usize)
    }

    /// The contents as a change batch of inserts, each distinct row once with its count.
    ///
    /// # Errors
    /// Arrow errors from decoding.
    pub fn to_change(&self) -> Result<ChangeBatch> {
        let parser = self.converter.parser();
        let columns = self
            .converter
            .convert_rows(self.rows.keys().map(|k| parser.parse(k)))?;
        let batch = batch_from_columns(&self.schema, columns, self.rows.len())?;
        let weights = self.rows.values().copied().collect::<Vec<_>>().into();
        ChangeBatch::new(batch, weights)
    }
}

/// Sums change batches of one schema into one: each distinct row once with its net weight,
/// rows whose weights cancel left out (replaying several epochs as one).
///
/// # Errors
/// Arrow errors when a batch does not fit `schema`.
pub fn consolidate(schema: &SchemaRef, parts: &[ChangeBatch]) -> Result<ChangeBatch> {
    let converter = row_converter(schema)?;
    let mut net: HashMap<Box<[u8]>, i64> = HashMap::new();
    let mut order: Vec<Box<[u8]>> = Vec::new();
    for part in parts {
        if part.is_empty() {
            continue;
        }
        let rows = converter.convert_columns(part.batch.columns())?;
        let no_columns = part.batch.num_columns() == 0;
        for (i, w) in part.weights.values().iter().enumerate() {
            let key: &[u8] = if no_columns { &[] } else { rows.row(i).data() };
            match net.get_mut(key) {
                Some(c) => *c += w,
                None => {
                    net.insert(key.into(), *w);
                    order.push(key.into());
                }
            }
        }
    }
    let kept: Vec<(&Box<[u8]>, i64)> = order
        .iter()
        .map(|k| (k, net[k]))
        .filter(|(_, w)| *w != 0)
        .collect();
    let parser = converter.parser();
    let columns = converter.convert_rows(kept.iter().map(|(k, _)| parser.parse(k)))?;
    let batch = batch_from_columns(schema, columns, kept.len())?;
    let weights = kept.iter().map(|(_, w)| *w).collect::<Vec<_>>().into();
    ChangeBatch::new(batch, weights)
}

/// A row converter over every column of `schema`.
///
/// # Errors
/// Arrow errors when a type has no row encoding.
pub fn row_converter(schema: &SchemaRef) -> Result<RowConverter> {
    let fields = schema
        .fields()
        .iter()
        .map(|f| SortField::new(f.data_type().clone()))
        .collect();
    Ok(RowConverter::new(fields)?)
}

/// Builds a batch from columns, also when the schema has no columns.
///
/// # Errors
/// Arrow errors when the columns do not fit the schema.
pub fn batch_from_columns(
    schema: &SchemaRef,
    columns: Vec<ArrayRef>,
    rows: usize,
) -> Result<RecordBatch> {
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        columns,
        &options,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    fn change(vals: Vec<Option<&str>>, w: Vec<i64>) -> ChangeBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)]));
        let b = RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(vals))]).unwrap();
        ChangeBatch::new(b, Int64Array::from(w)).unwrap()
    }

    #[test]
    fn multiset_counts_duplicates_and_retractions() {
        let c = change(vec![Some("a"), Some("a"), None], vec![1, 1, 1]);
        let mut t = StateTable::new(c.schema()).unwrap();
        t.apply(&c).unwrap();
        assert_eq!(t.len(), 3);
        t.apply(&change(vec![Some("a")], vec![-1])).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.to_batch().unwrap().num_rows(), 2);
        assert!(t.apply(&change(vec![Some("zz")], vec![-1])).is_err());
    }
}

//! `StateTable`: a multiset of rows kept in key order, with O(1) snapshots for readers.
//!
//! Rows are keyed by their memcomparable encoding in Arrow's row format
//! (`arrow::row`, whose byte order equals the rows' sort order), with the table's key columns
//! encoded first. Because Arrow's row encoding of several columns is the concatenation of the
//! columns' encodings, the encoding of the first `j` key columns is a byte prefix of every
//! row's key: an equality on leading key columns is a prefix scan, a comparison on the next
//! key column a range scan.
//!
//! The rows live in the [`StateBackend`] (RocksDB; see [`StateTable::stored`]): writes are
//! blind merges of weights, a [`StateSnapshot`] is a RocksDB snapshot, O(1) to take. Without a
//! backend they are a persistent B+-tree in memory (`imbl::OrdMap`), whose snapshot shares
//! every node with the live table (a later write copies only the nodes on its path). Either
//! way publishing an epoch to readers is independent of the table's size, and a reader at an
//! epoch never sees a later write.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::row::{RowConverter, Rows, SortField};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use imbl::OrdMap;
use rocksdb::WriteBatch;
use tracing::warn;

use crate::common::ChangeBatch;
use crate::error::{Error, Result};
pub use crate::state::backend::PrefixVisitor;
use crate::state::backend::{StateBackend, StoreSnapshot, encode_count, stored_key};

/// A row's key: its columns in key order, in Arrow's row format.
pub type RowKey = Arc<[u8]>;

/// A row's key bytes and its count (the number of copies of the row; 0 = deleted).
pub type KeyCount = (Box<[u8]>, i64);

/// Rows per batch when a snapshot is decoded for a reader.
pub const SCAN_BATCH_ROWS: usize = 65_536;

/// How a state table orders its rows: the declared key columns first, then the others in
/// schema order; every column takes part in the key (the table is a multiset of rows).
#[derive(Debug)]
pub struct KeyLayout {
    schema: SchemaRef,
    /// Column indexes of `schema` in key order (a permutation of `0..schema.len()`).
    order: Vec<usize>,
    /// How many leading columns of `order` were declared as the key (primary key, group key).
    key_len: usize,
    /// Per position of `order`: the column's direction and NULL placement (an index's
    /// `DESC` column sorts descending with NULLs first, as PostgreSQL's `DESC` default; an
    /// aggregate's `ORDER BY` inside the call may ask for any).
    options: Vec<SortOptions>,
    converter: RowConverter,
}

impl KeyLayout {
    /// The layout of rows of `schema` keyed by the columns `key` (indexes into `schema`).
    ///
    /// # Errors
    /// Arrow errors when a column type has no row encoding.
    pub fn new(schema: SchemaRef, key: &[usize]) -> Result<Self> {
        let key: Vec<(usize, bool)> = key.iter().map(|c| (*c, false)).collect();
        Self::with_directions(schema, &key)
    }

    /// The layout of rows of `schema` keyed by the columns `key`, each `(column, descending)`:
    /// a secondary index's columns with their `ASC`/`DESC`.
    ///
    /// # Errors
    /// Arrow errors when a column type has no row encoding.
    pub fn with_directions(schema: SchemaRef, key: &[(usize, bool)]) -> Result<Self> {
        let key: Vec<(usize, SortOptions)> = key
            .iter()
            .map(|(c, d)| {
                (
                    *c,
                    SortOptions {
                        descending: *d,
                        nulls_first: true,
                    },
                )
            })
            .collect();
        Self::with_options(schema, &key)
    }

    /// The layout of rows of `schema` keyed by the columns `key`, each `(column, options)`
    /// (direction and NULL placement); the remaining columns follow ascending, NULLs first.
    ///
    /// # Errors
    /// Arrow errors when a column type has no row encoding.
    pub fn with_options(schema: SchemaRef, key: &[(usize, SortOptions)]) -> Result<Self> {
        let mut order: Vec<usize> = key.iter().map(|(c, _)| *c).collect();
        let mut options: Vec<SortOptions> = key.iter().map(|(_, o)| *o).collect();
        for i in 0..schema.fields().len() {
            if !order.contains(&i) {
                order.push(i);
                options.push(SortOptions::default());
            }
        }
        let converter = converter_for(&schema, &order, &options)?;
        Ok(KeyLayout {
            schema,
            order,
            key_len: key.len(),
            options,
            converter,
        })
    }

    /// The row schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Column indexes of the declared key, in key order.
    pub fn key_columns(&self) -> &[usize] {
        &self.order[..self.key_len]
    }

    /// The encodings of the declared key columns of each row of `batch` (of this layout's
    /// schema): the key prefixes [`StateTable::count_prefix`] takes.
    ///
    /// # Errors
    /// Arrow errors when `batch` has another schema.
    pub fn encode_key(&self, batch: &RecordBatch) -> Result<Rows> {
        let converter = converter_for(
            &self.schema,
            &self.order[..self.key_len],
            &self.options[..self.key_len],
        )?;
        let columns: Vec<ArrayRef> = self.order[..self.key_len]
            .iter()
            .map(|i| batch.column(*i).clone())
            .collect();
        Ok(converter.convert_columns(&columns)?)
    }

    /// Encodes the rows of `batch` (of this layout's schema).
    fn encode(&self, batch: &RecordBatch) -> Result<Rows> {
        let columns: Vec<ArrayRef> = self
            .order
            .iter()
            .map(|i| batch.column(*i).clone())
            .collect();
        Ok(self.converter.convert_columns(&columns)?)
    }

    /// Decodes row keys (as [`StateTable::scan_prefix`] passes them) into a batch of
    /// `rows` rows, columns in schema order.
    ///
    /// # Errors
    /// Arrow errors when a key is not of this layout.
    pub fn decode<'a>(
        &self,
        keys: impl Iterator<Item = &'a [u8]>,
        rows: usize,
    ) -> Result<RecordBatch> {
        if self.order.is_empty() {
            return batch_from_columns(&self.schema, Vec::new(), rows);
        }
        let parser = self.converter.parser();
        let in_key_order = self.converter.convert_rows(keys.map(|k| parser.parse(k)))?;
        let mut columns: Vec<Option<ArrayRef>> = vec![None; self.order.len()];
        for (pos, col) in in_key_order.into_iter().enumerate() {
            columns[self.order[pos]] = Some(col);
        }
        let columns = columns
            .into_iter()
            .map(|c| c.expect("permutation"))
            .collect();
        batch_from_columns(&self.schema, columns, rows)
    }

    /// The key prefix of the first `values.len()` columns in key order holding `values`
    /// (each already of its column's type).
    fn prefix(&self, values: &[ScalarValue]) -> Result<Vec<u8>> {
        let n = values.len();
        let converter = converter_for(&self.schema, &self.order[..n], &self.options[..n])?;
        let arrays = values
            .iter()
            .map(|v| v.to_array())
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let rows = converter.convert_columns(&arrays)?;
        Ok(rows.row(0).data().to_vec())
    }
}

/// A byte range of keys to read: what a filter on leading key columns leaves of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    /// Lower bound.
    pub lower: Bound<Vec<u8>>,
    /// Upper bound.
    pub upper: Bound<Vec<u8>>,
}

impl KeyRange {
    /// Every key.
    pub fn all() -> Self {
        KeyRange {
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
        }
    }

    /// Every key that starts with `prefix`.
    pub fn prefix(prefix: Vec<u8>) -> Self {
        let upper = match prefix_successor(&prefix) {
            Some(s) => Bound::Excluded(s),
            None => Bound::Unbounded,
        };
        KeyRange {
            lower: Bound::Included(prefix),
            upper,
        }
    }

    /// Every key whose first column is below `value`: `value` encoded by `first` (a row
    /// converter of the first key column alone, with its sort options), as an exclusive
    /// upper bound. Arrow's row format of several columns starts with the first column's
    /// encoding, so a key whose first column equals `value` sorts after the bound.
    ///
    /// # Errors
    /// Arrow errors when `value` does not have the converter's type.
    pub fn below(first: &RowConverter, value: &ScalarValue) -> Result<Self> {
        let bound = first
            .convert_columns(&[value.to_array()?])?
            .row(0)
            .data()
            .to_vec();
        Ok(KeyRange {
            lower: Bound::Unbounded,
            upper: Bound::Excluded(bound),
        })
    }

    fn as_refs(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        fn b(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
            match b {
                Bound::Included(v) => Bound::Included(v.as_slice()),
                Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
                Bound::Unbounded => Bound::Unbounded,
            }
        }
        (b(&self.lower), b(&self.upper))
    }

    /// True when no key can lie in the range.
    fn is_empty(&self) -> bool {
        match (&self.lower, &self.upper) {
            (Bound::Included(l), Bound::Included(u)) => l > u,
            (Bound::Included(l), Bound::Excluded(u))
            | (Bound::Excluded(l), Bound::Included(u))
            | (Bound::Excluded(l), Bound::Excluded(u)) => l >= u,
            _ => false,
        }
    }
}

/// The smallest byte string greater than every string that starts with `prefix` (`None`:
/// there is none, every longer string qualifies).
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut s = prefix.to_vec();
    while let Some(last) = s.pop() {
        if last < u8::MAX {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

/// Where a state table keeps its rows.
enum RowMap {
    /// In memory, in key order with O(1) snapshots.
    Ordered(OrdMap<RowKey, i64>),
    /// In memory, unordered and cheaper to update: an operator's private state, which no
    /// reader scans.
    Hashed(HashMap<RowKey, i64>),
    /// In the state backend (RocksDB), in key order: tables, their indexes and views.
    Stored(StoredRows),
}

/// A state table's rows in the [`StateBackend`], under its own table id.
///
/// Writes are blind (merged counts, see [`StateBackend`]): a retraction of a row that is not
/// there is not detected as it is in memory; a count that ends at zero or below reads as no
/// row.
struct StoredRows {
    backend: Arc<StateBackend>,
    id: u64,
}

impl StoredRows {
    fn key(&self, row: &[u8]) -> Vec<u8> {
        stored_key(self.id, row)
    }
}

impl Drop for StoredRows {
    /// A dropped table's rows are removed from the backend (one range tombstone).
    fn drop(&mut self) {
        if let Err(e) = self.backend.drop_table(self.id) {
            warn!(error = %e, table = self.id, "could not drop a stored state table's rows");
        }
    }
}

impl RowMap {
    fn get(&self, k: &[u8]) -> Result<Option<i64>> {
        Ok(match self {
            RowMap::Ordered(m) => m.get(k).copied(),
            RowMap::Hashed(m) => m.get(k).copied(),
            RowMap::Stored(s) => s.backend.get(&s.key(k))?,
        })
    }

    fn len(&self) -> usize {
        match self {
            RowMap::Ordered(m) => m.len(),
            RowMap::Hashed(m) => m.len(),
            // Unknown without a scan; only a capacity hint.
            RowMap::Stored(_) => 0,
        }
    }

    /// Calls `f` on every row (key bytes, count): in key order unless hashed.
    fn for_each(&self, f: &mut dyn FnMut(&[u8], i64) -> Result<()>) -> Result<()> {
        match self {
            RowMap::Ordered(m) => m.iter().try_for_each(|(k, c)| f(k, *c)),
            RowMap::Hashed(m) => m.iter().try_for_each(|(k, c)| f(k, *c)),
            RowMap::Stored(s) => s.backend.scan(None, s.id, &[], None, &mut |k, c| {
                f(k, c)?;
                Ok(true)
            }),
        }
    }

    /// Moves the count of `k` by `w` (in memory); `Err` when it would go below zero.
    fn add_in_memory(&mut self, k: &[u8], w: i64) -> Result<()> {
        let count = match self {
            RowMap::Ordered(m) => m.get_mut(k),
            RowMap::Hashed(m) => m.get_mut(k),
            RowMap::Stored(_) => {
                return Err(Error::Internal(
                    "in-memory update of a stored state table".into(),
                ));
            }
        };
        match count {
            Some(c) => {
                *c += w;
                if *c < 0 {
                    return Err(Error::Internal("state table row count below zero".into()));
                }
                if *c == 0 {
                    match self {
                        RowMap::Ordered(m) => drop(m.remove(k)),
                        RowMap::Hashed(m) => drop(m.remove(k)),
                        RowMap::Stored(_) => {}
                    }
                }
            }
            None if w < 0 => {
                return Err(Error::Internal(
                    "retraction of a row that is not in the state table".into(),
                ));
            }
            None if w > 0 => match self {
                RowMap::Ordered(m) => drop(m.insert(Arc::from(k), w)),
                RowMap::Hashed(m) => drop(m.insert(Arc::from(k), w)),
                RowMap::Stored(_) => {}
            },
            None => {}
        }
        Ok(())
    }
}

/// A multiset of rows of one schema: row keys (see [`KeyLayout`]) to a positive count.
///
/// Used for a table's contents, a materialized view's contents and an operator's input.
/// Reads see every applied change; [`StateTable::snapshot`] freezes the current rows for a
/// reader in O(1). Rows live in memory or, once [`StateTable::stored`], in the
/// [`StateBackend`] (RocksDB), where memory is a bounded cache.
pub struct StateTable {
    layout: Arc<KeyLayout>,
    rows: RowMap,
    /// Sum of all counts (the number of rows with duplicates).
    total: i64,
}

impl std::fmt::Debug for StateTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateTable")
            .field("rows", &self.total)
            .finish()
    }
}

impl StateTable {
    /// An empty state table for rows of `schema`, ordered by all columns in schema order.
    ///
    /// # Errors
    /// Arrow errors when a column type has no row encoding.
    pub fn new(schema: SchemaRef) -> Result<Self> {
        Self::with_key(schema, &[])
    }

    /// An empty state table for rows of `schema` ordered by the columns `key` first (indexes
    /// into `schema`: a primary key, a group key), then by the remaining columns.
    ///
    /// # Errors
    /// Arrow errors when a column type has no row encoding.
    pub fn with_key(schema: SchemaRef, key: &[usize]) -> Result<Self> {
        Ok(StateTable {
            layout: Arc::new(KeyLayout::new(schema, key)?),
            rows: RowMap::Ordered(OrdMap::new()),
            total: 0,
        })
    }

    /// An empty ordered state table with the given layout (a secondary index's, see
    /// [`KeyLayout::with_directions`]).
    pub fn with_layout(layout: Arc<KeyLayout>) -> Self {
        StateTable {
            layout,
            rows: RowMap::Ordered(OrdMap::new()),
            total: 0,
        }
    }

    /// An empty state table kept in a hash map: an operator's private state, cheaper to
    /// update, whose rows no reader scans in order (`rows()` and `to_change()` come in no
    /// particular order; `snapshot()` and `count_prefix()` cost O(n)).
    ///
    /// # Errors
    /// Arrow errors when a column type has no row encoding.
    pub fn unordered(schema: SchemaRef) -> Result<Self> {
        Ok(StateTable {
            layout: Arc::new(KeyLayout::new(schema, &[])?),
            rows: RowMap::Hashed(HashMap::new()),
            total: 0,
        })
    }

    /// This table with its rows in `backend` (when given; otherwise unchanged): its rows
    /// leave the heap. O(rows held) once; a new table holds none.
    ///
    /// # Errors
    /// RocksDB write errors.
    pub fn stored(mut self, backend: Option<&Arc<StateBackend>>) -> Result<Self> {
        self.store_in(backend)?;
        Ok(self)
    }

    /// Moves this table's rows into `backend` (when given), as [`StateTable::stored`]; the
    /// rows of an unordered table are then kept in key order too.
    ///
    /// # Errors
    /// RocksDB write errors.
    pub fn store_in(&mut self, backend: Option<&Arc<StateBackend>>) -> Result<()> {
        let Some(backend) = backend else {
            return Ok(());
        };
        if matches!(self.rows, RowMap::Stored(_)) {
            return Ok(());
        }
        self.store_as(backend, backend.allocate())
    }

    /// Moves this table's rows into `backend` under the table id `id`, which the caller keeps
    /// unique in that backend (a relation's id, so that the rows are found again after a
    /// restart); rows already stored there under `id` belong to the table.
    ///
    /// # Errors
    /// RocksDB write errors.
    pub fn store_as(&mut self, backend: &Arc<StateBackend>, id: u64) -> Result<()> {
        if matches!(self.rows, RowMap::Stored(_)) {
            return Ok(());
        }
        let stored = StoredRows {
            backend: Arc::clone(backend),
            id,
        };
        let mut batch = WriteBatch::default();
        self.rows.for_each(&mut |k, c| {
            batch.put(stored.key(k), encode_count(c));
            Ok(())
        })?;
        backend.write(batch)?;
        self.rows = RowMap::Stored(stored);
        Ok(())
    }

    /// The backend holding the rows, when they are stored.
    pub fn backend(&self) -> Option<&Arc<StateBackend>> {
        match &self.rows {
            RowMap::Stored(s) => Some(&s.backend),
            _ => None,
        }
    }

    /// The key layout.
    pub fn layout(&self) -> &Arc<KeyLayout> {
        &self.layout
    }

    /// Every distinct row's key bytes and count, in key order (unordered tables: in no
    /// particular order). O(n).
    ///
    /// # Errors
    /// RocksDB read errors of a stored table.
    pub fn rows(&self) -> Result<Vec<KeyCount>> {
        let mut out = Vec::with_capacity(self.rows.len());
        self.rows.for_each(&mut |k, c| {
            out.push((Box::from(k), c));
            Ok(())
        })?;
        Ok(out)
    }

    /// Loads rows from a checkpoint or a table snapshot (key bytes in this table's layout,
    /// counts > 0). Keys already present add up.
    ///
    /// # Errors
    /// RocksDB errors of a stored table.
    pub fn load_rows<'a>(&mut self, rows: impl IntoIterator<Item = (&'a [u8], i64)>) -> Result<()> {
        const WRITE_BATCH_ROWS: usize = 16_384;
        match &mut self.rows {
            RowMap::Stored(s) => {
                let mut batch = WriteBatch::default();
                for (k, c) in rows {
                    if c <= 0 {
                        continue;
                    }
                    batch.merge(s.key(k), encode_count(c));
                    self.total += c;
                    if batch.len() >= WRITE_BATCH_ROWS {
                        s.backend.write(std::mem::take(&mut batch))?;
                    }
                }
                s.backend.write(batch)?;
            }
            _ => {
                for (k, c) in rows {
                    if c > 0 {
                        self.total += c;
                        self.rows.add_in_memory(k, c)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The row schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.layout.schema
    }

    /// Number of rows, duplicates counted.
    pub fn len(&self) -> i64 {
        self.total
    }

    /// True when no row is present.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The table id (key prefix) of a table whose rows live in the state backend; `None`
    /// for rows on the heap.
    pub fn stored_id(&self) -> Option<u64> {
        match &self.rows {
            RowMap::Stored(s) => Some(s.id),
            _ => None,
        }
    }

    /// Sets the total count of a table whose rows were restored from a native checkpoint
    /// (the backend already holds them; the count was recorded with the checkpoint).
    pub fn set_total(&mut self, total: i64) {
        self.total = total;
    }

    /// Applies a change batch: each row's count moves by its weight. O(rows × log n).
    ///
    /// # Errors
    /// [`Error::Internal`] if a count would become negative (a retraction of a missing row);
    /// RocksDB errors of a stored table (then nothing of the batch is applied).
    pub fn apply(&mut self, change: &ChangeBatch) -> Result<()> {
        if change.is_empty() {
            return Ok(());
        }
        let no_columns = change.batch.num_columns() == 0;
        let rows = if no_columns {
            None
        } else {
            Some(self.layout.encode(&change.batch)?)
        };
        // Rows of a schema without columns are all the empty row.
        let key = |i: usize| -> &[u8] {
            match &rows {
                Some(r) => r.row(i).data(),
                None => &[],
            }
        };
        if let RowMap::Stored(s) = &self.rows {
            // Blind writes: each distinct row's net weight is merged into its stored count
            // (the backend's merge operator adds), without reading it first; in key order,
            // which makes the memtable inserts cheaper.
            let mut net: HashMap<&[u8], i64> = HashMap::with_capacity(change.len());
            for (i, w) in change.weights.values().iter().enumerate() {
                *net.entry(key(i)).or_default() += w;
            }
            let mut net: Vec<(&[u8], i64)> = net.into_iter().filter(|(_, w)| *w != 0).collect();
            net.sort_unstable_by(|a, b| a.0.cmp(b.0));
            let mut batch = WriteBatch::default();
            for (k, w) in net {
                batch.merge(s.key(k), encode_count(w));
            }
            s.backend.write(batch)?;
        } else {
            for (i, w) in change.weights.values().iter().enumerate() {
                self.rows.add_in_memory(key(i), *w)?;
            }
        }
        self.total += change.weights.values().iter().sum::<i64>();
        Ok(())
    }

    /// The count of each row of `batch` (0 when absent), in order. O(rows × log n).
    ///
    /// # Errors
    /// Arrow errors when `batch` has another schema; RocksDB read errors.
    pub fn counts(&self, batch: &RecordBatch) -> Result<Vec<i64>> {
        if batch.num_columns() == 0 {
            let c = self.rows.get(&[])?.unwrap_or(0);
            return Ok(vec![c; batch.num_rows()]);
        }
        let rows = self.layout.encode(batch)?;
        (0..batch.num_rows())
            .map(|i| Ok(self.rows.get(rows.row(i).data())?.unwrap_or(0)))
            .collect()
    }

    /// The number of rows (duplicates counted) whose key starts with `prefix` (a key prefix
    /// as encoded by [`KeyLayout`] for the leading key columns). O(log n + matches).
    ///
    /// # Errors
    /// RocksDB read errors.
    pub fn count_prefix(&self, prefix: &[u8]) -> Result<i64> {
        let mut sum = 0;
        self.scan_prefix(prefix, &mut |_, c| {
            sum += c;
            Ok(())
        })?;
        Ok(sum)
    }

    /// Calls `f(key bytes, count)` on every row whose key starts with `prefix`, in key order
    /// (unordered tables: in no particular order, O(n)). O(log n + matches).
    ///
    /// # Errors
    /// RocksDB read errors; errors of `f`.
    pub fn scan_prefix(
        &self,
        prefix: &[u8],
        f: &mut dyn FnMut(&[u8], i64) -> Result<()>,
    ) -> Result<()> {
        self.scan_prefix_while(prefix, &mut |k, c| {
            f(k, c)?;
            Ok(true)
        })
    }

    /// As [`StateTable::scan_prefix`], stopping at the first row for which `f` returns
    /// `false`: the first row of a prefix (a group's minimum) costs one seek, O(log n).
    ///
    /// # Errors
    /// RocksDB read errors; errors of `f`.
    pub fn scan_prefix_while(
        &self,
        prefix: &[u8],
        f: &mut dyn FnMut(&[u8], i64) -> Result<bool>,
    ) -> Result<()> {
        let upper = prefix_successor(prefix);
        self.scan_range_while(prefix, upper.as_deref(), f)
    }

    /// Calls `f(key bytes, count)` on every row whose key is at least `lower` and below
    /// `upper` (no upper bound when `None`), in key order (unordered tables: in no particular
    /// order, O(n)), stopping at the first row for which `f` returns `false`.
    /// O(log n + rows visited).
    ///
    /// # Errors
    /// RocksDB read errors; errors of `f`.
    pub fn scan_range_while(
        &self,
        lower: &[u8],
        upper: Option<&[u8]>,
        f: &mut dyn FnMut(&[u8], i64) -> Result<bool>,
    ) -> Result<()> {
        let upper_bound = match upper {
            Some(u) => Bound::Excluded(u),
            None => Bound::Unbounded,
        };
        match &self.rows {
            RowMap::Ordered(m) => {
                for (k, c) in m.range::<_, [u8]>((Bound::Included(lower), upper_bound)) {
                    if !f(k, *c)? {
                        break;
                    }
                }
                Ok(())
            }
            RowMap::Hashed(m) => {
                let within = |k: &[u8]| k >= lower && upper.is_none_or(|u| k < u);
                for (k, c) in m.iter().filter(|(k, _)| within(k)) {
                    if !f(k, *c)? {
                        break;
                    }
                }
                Ok(())
            }
            RowMap::Stored(s) => s
                .backend
                .scan(None, s.id, lower, upper, &mut |k, c| f(k, c)),
        }
    }

    /// For each of `prefixes` (by its index), `f(index, key bytes, count)` on the rows whose
    /// key starts with it, in key order, until `f` returns `false` for that prefix: as
    /// [`StateTable::scan_prefix_while`] on each, but a stored table reads them all through
    /// one iterator, prefixes in key order. O(prefixes × log n + rows visited).
    ///
    /// # Errors
    /// RocksDB read errors; errors of `f`.
    pub fn scan_prefixes_while(&self, prefixes: &[&[u8]], f: &mut PrefixVisitor<'_>) -> Result<()> {
        match &self.rows {
            RowMap::Stored(s) => s.backend.scan_prefixes(s.id, prefixes, f),
            _ => {
                for (i, p) in prefixes.iter().enumerate() {
                    self.scan_prefix_while(p, &mut |k, c| f(i, k, c))?;
                }
                Ok(())
            }
        }
    }

    /// For each of `prefixes`, the number of rows (duplicates counted) whose key starts with
    /// it, as [`StateTable::count_prefix`]; a stored table reads them all through one
    /// iterator. O(prefixes × log n + matches).
    ///
    /// # Errors
    /// RocksDB read errors.
    pub fn count_prefixes<'a>(
        &self,
        prefixes: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Vec<i64>> {
        match &self.rows {
            RowMap::Stored(s) => s.backend.count_prefixes(s.id, prefixes),
            _ => prefixes.into_iter().map(|p| self.count_prefix(p)).collect(),
        }
    }

    /// All rows (each repeated by its count) as one batch, in key order. O(n).
    ///
    /// # Errors
    /// Arrow errors from decoding; RocksDB read errors.
    pub fn to_batch(&self) -> Result<RecordBatch> {
        let rows = self.rows()?;
        let iter = rows
            .iter()
            .flat_map(|(k, c)| std::iter::repeat_n(k.as_ref(), *c as usize));
        self.layout.decode(iter, self.total as usize)
    }

    /// The contents as a change batch of inserts, each distinct row once with its count.
    ///
    /// # Errors
    /// Arrow errors from decoding; RocksDB read errors.
    pub fn to_change(&self) -> Result<ChangeBatch> {
        let rows = self.rows()?;
        let batch = self
            .layout
            .decode(rows.iter().map(|(k, _)| k.as_ref()), rows.len())?;
        let weights = rows.iter().map(|(_, c)| *c).collect::<Vec<_>>().into();
        ChangeBatch::new(batch, weights)
    }

    /// The current rows, frozen for a reader. O(1) for an ordered or stored table (the
    /// snapshot shares its nodes, or is a RocksDB snapshot); O(n) for an
    /// [`StateTable::unordered`] one.
    pub fn snapshot(&self) -> StateSnapshot {
        let rows = match &self.rows {
            RowMap::Ordered(m) => SnapshotRows::Memory(m.clone()),
            RowMap::Hashed(m) => {
                SnapshotRows::Memory(m.iter().map(|(k, c)| (Arc::clone(k), *c)).collect())
            }
            RowMap::Stored(s) => SnapshotRows::Stored {
                snapshot: Arc::new(s.backend.snapshot()),
                id: s.id,
            },
        };
        StateSnapshot {
            layout: Arc::clone(&self.layout),
            rows,
            total: self.total,
        }
    }
}

/// The rows a [`StateSnapshot`] reads.
#[derive(Clone)]
enum SnapshotRows {
    Memory(OrdMap<RowKey, i64>),
    Stored {
        snapshot: Arc<StoreSnapshot>,
        id: u64,
    },
}

/// The rows of a [`StateTable`] as of one moment (an epoch for a view, an acknowledged write
/// for a table): what a `SELECT` reads. Later writes to the table do not show.
#[derive(Clone)]
pub struct StateSnapshot {
    layout: Arc<KeyLayout>,
    rows: SnapshotRows,
    total: i64,
}

impl std::fmt::Debug for StateSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateSnapshot")
            .field("rows", &self.total)
            .finish()
    }
}

impl StateSnapshot {
    /// The key layout.
    pub fn layout(&self) -> &Arc<KeyLayout> {
        &self.layout
    }

    /// The row schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.layout.schema
    }

    /// Number of rows, duplicates counted.
    pub fn len(&self) -> i64 {
        self.total
    }

    /// True when no row is present.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The rows whose keys lie in `range` (each repeated by its count), in key order, as
    /// batches of at most 65,536 rows, stopping after `limit` rows. O(log n + rows read).
    ///
    /// # Errors
    /// Arrow errors from decoding; RocksDB read errors.
    pub fn scan(&self, range: &KeyRange, limit: Option<usize>) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        if range.is_empty() {
            return Ok(out);
        }
        self.scan_into(range, limit, SCAN_BATCH_ROWS, &mut |b| {
            out.push(b);
            Ok(())
        })?;
        Ok(out)
    }

    /// Calls `f` on every row of the snapshot (each repeated by its count), in key order, in
    /// batches of at most `batch_rows` rows: a reader of the whole table that holds one
    /// batch at a time. No call when the snapshot is empty.
    ///
    /// # Errors
    /// Arrow errors from decoding; RocksDB read errors; errors of `f`.
    pub fn for_each_batch(
        &self,
        batch_rows: usize,
        f: &mut dyn FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        self.scan_into(&KeyRange::all(), None, batch_rows.max(1), &mut |b| {
            if b.num_rows() > 0 { f(b) } else { Ok(()) }
        })
    }

    /// Reads the rows of `range` from its start until at least `max_rows` rows (copies
    /// counted; a row's copies are never split) are read: one batch, and the part of the
    /// range still to read (`None` when the range is done). A reader that resumes with the
    /// rest holds one batch at a time. O(log n + rows read).
    ///
    /// # Errors
    /// Arrow errors from decoding; RocksDB read errors.
    pub fn scan_chunk(
        &self,
        range: &KeyRange,
        max_rows: usize,
    ) -> Result<(RecordBatch, Option<KeyRange>)> {
        let mut keys: Vec<Box<[u8]>> = Vec::new();
        let mut counts: Vec<usize> = Vec::new();
        let mut taken = 0usize;
        let mut last: Option<Vec<u8>> = None;
        if !range.is_empty() {
            self.walk(range, &mut |k, c| {
                keys.push(Box::from(k));
                counts.push(c.max(0) as usize);
                taken += c.max(0) as usize;
                if taken >= max_rows.max(1) {
                    last = Some(k.to_vec());
                    return Ok(false);
                }
                Ok(true)
            })?;
        }
        let batch = self.layout.decode(
            keys.iter()
                .zip(&counts)
                .flat_map(|(k, c)| std::iter::repeat_n(k.as_ref(), *c)),
            taken,
        )?;
        let rest = last.map(|k| KeyRange {
            lower: Bound::Excluded(k),
            upper: range.upper.clone(),
        });
        Ok((batch, rest))
    }

    /// Calls `f(key bytes, count)` on the rows of `range` in key order until it returns
    /// `false`.
    fn walk(&self, range: &KeyRange, f: &mut dyn FnMut(&[u8], i64) -> Result<bool>) -> Result<()> {
        match &self.rows {
            SnapshotRows::Memory(m) => {
                for (k, c) in m.range::<_, [u8]>(range.as_refs()) {
                    if !f(k, *c)? {
                        break;
                    }
                }
                Ok(())
            }
            SnapshotRows::Stored { snapshot, id } => {
                // RocksDB iterates [lower, upper): an excluded lower key and an included
                // upper key move to their successors (the key followed by a zero byte).
                let successor = |k: &Vec<u8>| {
                    let mut s = k.clone();
                    s.push(0);
                    s
                };
                let lower = match &range.lower {
                    Bound::Included(k) => k.clone(),
                    Bound::Excluded(k) => successor(k),
                    Bound::Unbounded => Vec::new(),
                };
                let upper = match &range.upper {
                    Bound::Included(k) => Some(successor(k)),
                    Bound::Excluded(k) => Some(k.clone()),
                    Bound::Unbounded => None,
                };
                snapshot
                    .backend()
                    .scan(Some(snapshot), *id, &lower, upper.as_deref(), f)
            }
        }
    }

    fn scan_into(
        &self,
        range: &KeyRange,
        limit: Option<usize>,
        batch_rows: usize,
        sink: &mut dyn FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let mut reader = ScanBatches {
            layout: &self.layout,
            limit: limit.unwrap_or(usize::MAX),
            taken: 0,
            batch_rows,
            keys: Vec::new(),
            emitted: false,
            sink,
        };
        self.walk(range, &mut |k, c| reader.push(k, c))?;
        reader.finish()
    }

    /// Whether `filter` can narrow a scan of this snapshot (see [`StateSnapshot::key_range`]).
    pub fn can_narrow(layout: &KeyLayout, filter: &Expr) -> bool {
        key_comparison(layout, filter).is_some()
    }

    /// The narrowest key range that holds every row satisfying all of `filters` (a
    /// conjunction), from comparisons `column op literal` (`=`, `<`, `<=`, `>`, `>=`) on
    /// leading columns in key order: equalities on a prefix of the key, then one range on the
    /// next column. Other filters do not narrow the range; the caller still applies every
    /// filter to the rows read (the range may hold rows that fail them, e.g. NULLs).
    ///
    /// # Errors
    /// Arrow errors while encoding a literal.
    pub fn key_range(&self, filters: &[Expr]) -> Result<KeyRange> {
        key_range(&self.layout, filters)
    }
}

/// Gathers scanned rows into decoded batches of at most [`SCAN_BATCH_ROWS`] rows.
struct ScanBatches<'a> {
    layout: &'a KeyLayout,
    limit: usize,
    taken: usize,
    batch_rows: usize,
    keys: Vec<Box<[u8]>>,
    /// Whether a batch went to the sink yet.
    emitted: bool,
    sink: &'a mut dyn FnMut(RecordBatch) -> Result<()>,
}

impl ScanBatches<'_> {
    /// Adds a row `count` times; `false` once the limit is reached.
    fn push(&mut self, key: &[u8], count: i64) -> Result<bool> {
        for _ in 0..count {
            if self.taken == self.limit {
                return Ok(false);
            }
            self.keys.push(Box::from(key));
            self.taken += 1;
            if self.keys.len() >= self.batch_rows {
                self.flush()?;
            }
        }
        Ok(self.taken < self.limit)
    }

    fn flush(&mut self) -> Result<()> {
        let n = self.keys.len();
        let batch = self
            .layout
            .decode(self.keys.iter().map(|k| k.as_ref()), n)?;
        self.keys.clear();
        self.emitted = true;
        (self.sink)(batch)
    }

    /// Sends the last rows (an empty batch when there were none: a reader's schema).
    fn finish(mut self) -> Result<()> {
        if !self.keys.is_empty() || !self.emitted {
            self.flush()?;
        }
        Ok(())
    }
}

/// A relation's rows and its secondary indexes' rows (the same rows ordered by other keys),
/// frozen together, each an O(1) [`StateSnapshot`]: what a `SELECT` reads from a table or a
/// materialized view.
#[derive(Debug, Clone)]
pub struct IndexedSnapshot {
    /// The rows in the relation's own key order.
    pub rows: StateSnapshot,
    /// One snapshot per secondary index (`CREATE INDEX`), in creation order.
    pub indexes: Vec<StateSnapshot>,
}

impl IndexedSnapshot {
    /// A relation without secondary indexes.
    pub fn plain(rows: StateSnapshot) -> Self {
        IndexedSnapshot {
            rows,
            indexes: Vec::new(),
        }
    }

    /// The snapshot to read for a conjunction of `filters`, with its key range: the one whose
    /// leading key columns the filters constrain most (more leading equalities first, then a
    /// bound on the next column), the relation's own rows on a tie. O(filters × indexes).
    ///
    /// # Errors
    /// Arrow errors while encoding a literal.
    pub fn choose(&self, filters: &[Expr]) -> Result<(&StateSnapshot, KeyRange)> {
        let mut best = &self.rows;
        let mut best_score = narrowing(&self.rows.layout, filters);
        for index in &self.indexes {
            let score = narrowing(&index.layout, filters);
            if score > best_score {
                best = index;
                best_score = score;
            }
        }
        Ok((best, best.key_range(filters)?))
    }
}

/// How much `filters` narrow a scan in `layout`: (leading key columns fixed by equalities,
/// whether the next one is bounded).
fn narrowing(layout: &KeyLayout, filters: &[Expr]) -> (usize, bool) {
    let comparisons: Vec<_> = filters
        .iter()
        .filter_map(|f| key_comparison(layout, f))
        .collect();
    let mut fixed = 0;
    while comparisons
        .iter()
        .any(|(p, op, _)| *p == fixed && *op == Operator::Eq)
    {
        fixed += 1;
    }
    let bounded = comparisons.iter().any(|(p, _, _)| *p == fixed);
    (fixed, bounded)
}

/// A comparison `column op literal` usable on a key: (position in key order, op, value).
fn key_comparison(layout: &KeyLayout, filter: &Expr) -> Option<(usize, Operator, ScalarValue)> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = filter else {
        return None;
    };
    let (column, op, value) = match (left.as_ref(), right.as_ref()) {
        (Expr::Column(c), Expr::Literal(v, _)) => (c, *op, v),
        (Expr::Literal(v, _), Expr::Column(c)) => (c, op.swap()?, v),
        _ => return None,
    };
    if !matches!(
        op,
        Operator::Eq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq
    ) || value.is_null()
    {
        return None;
    }
    let index = layout.schema.index_of(&column.name).ok()?;
    let field = layout.schema.field(index);
    // Only types whose row-format byte order is SQL's order and whose equality is byte
    // equality (floats are not: -0 = 0, and NaN; intervals compare normalised).
    let ordered = matches!(
        field.data_type(),
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Boolean
            | DataType::Date32
            | DataType::Date64
            | DataType::Timestamp(_, _)
            | DataType::Decimal128(_, _)
    );
    if !ordered || &value.data_type() != field.data_type() {
        return None;
    }
    let position = layout.order.iter().position(|c| *c == index)?;
    // On a descending column a greater value has a smaller key.
    let op = if layout.options[position].descending {
        op.swap()?
    } else {
        op
    };
    Some((position, op, value.clone()))
}

fn key_range(layout: &KeyLayout, filters: &[Expr]) -> Result<KeyRange> {
    let comparisons: Vec<_> = filters
        .iter()
        .filter_map(|f| key_comparison(layout, f))
        .collect();
    let mut prefix: Vec<ScalarValue> = Vec::new();
    loop {
        let position = prefix.len();
        let eq = comparisons
            .iter()
            .find(|(p, op, _)| *p == position && *op == Operator::Eq);
        match eq {
            Some((_, _, v)) => prefix.push(v.clone()),
            None => break,
        }
    }
    let position = prefix.len();
    let base = if prefix.is_empty() {
        KeyRange::all()
    } else {
        KeyRange::prefix(layout.prefix(&prefix)?)
    };
    if position >= layout.order.len() {
        return Ok(base);
    }
    let mut range = base;
    let with = |v: &ScalarValue| -> Result<Vec<u8>> {
        let mut values = prefix.clone();
        values.push(v.clone());
        layout.prefix(&values)
    };
    // Within the prefix, one lower and one upper bound on the next column narrow further;
    // several bounds on it take the tightest of each kind.
    for (p, op, v) in &comparisons {
        if *p != position {
            continue;
        }
        let key = with(v)?;
        let (lower, upper) = match op {
            Operator::Gt => (prefix_successor(&key).map(Bound::Included), None),
            Operator::GtEq => (Some(Bound::Included(key)), None),
            Operator::Lt => (None, Some(Bound::Excluded(key))),
            Operator::LtEq => (
                None,
                Some(match prefix_successor(&key) {
                    Some(s) => Bound::Excluded(s),
                    None => Bound::Unbounded,
                }),
            ),
            _ => (None, None),
        };
        if *op == Operator::Gt && lower.is_none() {
            // Nothing is greater than a key of all 0xFF bytes.
            return Ok(KeyRange {
                lower: Bound::Excluded(Vec::new()),
                upper: Bound::Excluded(Vec::new()),
            });
        }
        if let Some(l) = lower {
            range.lower = tighter_lower(range.lower, l);
        }
        if let Some(u) = upper {
            range.upper = tighter_upper(range.upper, u);
        }
    }
    Ok(range)
}

fn tighter_lower(a: Bound<Vec<u8>>, b: Bound<Vec<u8>>) -> Bound<Vec<u8>> {
    match (&a, &b) {
        (Bound::Unbounded, _) => b,
        (_, Bound::Unbounded) => a,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            if y > x || (y == x && matches!(b, Bound::Excluded(_))) {
                b
            } else {
                a
            }
        }
    }
}

fn tighter_upper(a: Bound<Vec<u8>>, b: Bound<Vec<u8>>) -> Bound<Vec<u8>> {
    match (&a, &b) {
        (Bound::Unbounded, _) => b,
        (_, Bound::Unbounded) => a,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            if y < x || (y == x && matches!(b, Bound::Excluded(_))) {
                b
            } else {
                a
            }
        }
    }
}

fn converter_for(
    schema: &SchemaRef,
    columns: &[usize],
    options: &[SortOptions],
) -> Result<RowConverter> {
    let fields = columns
        .iter()
        .zip(options)
        .map(|(i, o)| SortField::new_with_options(schema.field(*i).data_type().clone(), *o))
        .collect();
    Ok(RowConverter::new(fields)?)
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

    /// A state backend in a temporary directory (kept alive by the returned guard).
    fn stored_backend(limit: u64) -> (tempfile::TempDir, Arc<StateBackend>) {
        let dir = tempfile::tempdir().unwrap();
        let backend = StateBackend::open(&dir.path().join("state"), limit).unwrap();
        (dir, backend)
    }

    /// Runs `check` on a table in memory and on one in the state backend.
    fn on_both_backends(check: impl Fn(Option<&Arc<StateBackend>>)) {
        check(None);
        let (_dir, backend) = stored_backend(64 << 20);
        check(Some(&backend));
    }

    #[test]
    fn multiset_counts_duplicates_and_retractions() {
        on_both_backends(|backend| {
            let c = change(vec![Some("a"), Some("a"), None], vec![1, 1, 1]);
            let mut t = StateTable::new(c.schema())
                .unwrap()
                .stored(backend)
                .unwrap();
            t.apply(&c).unwrap();
            assert_eq!(t.len(), 3);
            assert_eq!(t.rows().unwrap().len(), 2);
            t.apply(&change(vec![Some("a")], vec![-1])).unwrap();
            assert_eq!(t.len(), 2);
            assert_eq!(t.to_batch().unwrap().num_rows(), 2);
            if backend.is_none() {
                // In memory a retraction of a missing row is caught; stored writes are blind.
                assert!(t.apply(&change(vec![Some("zz")], vec![-1])).is_err());
            }
            // A retraction within the batch that inserts the row is fine.
            t.apply(&change(vec![Some("b"), Some("b")], vec![1, -1]))
                .unwrap();
            assert_eq!(
                t.counts(&change(vec![Some("a"), Some("b"), None], vec![1, 1, 1]).batch)
                    .unwrap(),
                vec![1, 0, 1]
            );
            t.apply(&change(vec![Some("a"), None], vec![-1, -1]))
                .unwrap();
            assert!(t.is_empty());
            assert!(t.rows().unwrap().is_empty());
        });
    }

    #[test]
    fn stored_tables_load_and_drop_their_rows() {
        let (_dir, backend) = stored_backend(64 << 20);
        let c = change(vec![Some("a"), Some("b"), Some("c")], vec![1, 2, 1]);
        let mut t = StateTable::new(c.schema())
            .unwrap()
            .stored(Some(&backend))
            .unwrap();
        t.apply(&c).unwrap();
        t.apply(&change(vec![Some("c")], vec![-1])).unwrap();
        let counts: Vec<i64> = t.rows().unwrap().iter().map(|(_, c)| *c).collect();
        assert_eq!(counts, vec![1, 2], "a, b; c was deleted");
        // Loading the rows into another stored table reproduces them; the tables do not mix.
        let mut u = StateTable::new(c.schema())
            .unwrap()
            .stored(Some(&backend))
            .unwrap();
        let rows = t.rows().unwrap();
        u.load_rows(rows.iter().map(|(k, c)| (k.as_ref(), *c)))
            .unwrap();
        u.load_rows(rows.iter().map(|(k, c)| (k.as_ref(), *c)))
            .unwrap();
        assert_eq!(u.len(), 6);
        assert_eq!(t.len(), 3);
        let snapshot = u.snapshot();
        drop(u);
        // The snapshot still reads the dropped table's rows; a new table starts empty.
        assert_eq!(
            snapshot.scan(&KeyRange::all(), None).unwrap()[0].num_rows(),
            6
        );
        let v = StateTable::new(c.schema())
            .unwrap()
            .stored(Some(&backend))
            .unwrap();
        assert!(v.rows().unwrap().is_empty());
        assert_eq!(t.to_batch().unwrap().num_rows(), 3);
    }

    #[test]
    fn stored_rows_beyond_the_memory_limit_stay_readable() {
        // 16 MiB of budget, about 60 MiB of rows: most of them are read back from disk.
        let (_dir, backend) = stored_backend(16 << 20);
        let mut t = keyed(0).stored(Some(&backend)).unwrap();
        let n = 600_000i64;
        for chunk in 0..6 {
            let ids: Vec<i64> = (chunk * n / 6..(chunk + 1) * n / 6).collect();
            let vs: Vec<String> = ids.iter().map(|i| format!("{i:0>80}")).collect();
            let b = RecordBatch::try_new(
                t.schema().clone(),
                vec![
                    Arc::new(StringArray::from(vs)),
                    Arc::new(Int64Array::from(ids.clone())),
                ],
            )
            .unwrap();
            t.apply(&ChangeBatch::new(b, Int64Array::from(vec![1; ids.len()])).unwrap())
                .unwrap();
        }
        let usage = backend.usage();
        assert!(usage.cache <= usage.limit + (4 << 20), "{usage:?}");
        let s = t.snapshot();
        use datafusion::prelude::{col, lit};
        assert_eq!(ids_in(&s, &[col("id").eq(lit(123_456i64))]), vec![123_456]);
        assert_eq!(
            ids_in(&s, &[col("id").gt_eq(lit(n - 3))]),
            vec![n - 3, n - 2, n - 1]
        );
        let all = ids_in(&s, &[]);
        assert_eq!(all.len() as i64, n);
        assert!(all.iter().enumerate().all(|(i, id)| *id == i as i64));
    }

    fn keyed(n: i64) -> StateTable {
        let schema = Arc::new(Schema::new(vec![
            Field::new("v", DataType::Utf8, true),
            Field::new("id", DataType::Int64, true),
        ]));
        let ids: Vec<i64> = (0..n).map(|i| i - n / 2).collect();
        let vs: Vec<String> = ids.iter().map(|i| format!("v{i}")).collect();
        let b = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vs)),
                Arc::new(Int64Array::from(ids)),
            ],
        )
        .unwrap();
        let mut t = StateTable::with_key(schema, &[1]).unwrap();
        t.apply(&ChangeBatch::new(b, Int64Array::from(vec![1; n as usize])).unwrap())
            .unwrap();
        t
    }

    fn ids_in(s: &StateSnapshot, filters: &[Expr]) -> Vec<i64> {
        ids_in_range(s, &s.key_range(filters).unwrap())
    }

    #[test]
    fn key_ranges_read_only_the_matching_rows() {
        on_both_backends(key_ranges_on);
    }

    fn key_ranges_on(backend: Option<&Arc<StateBackend>>) {
        use datafusion::prelude::{col, lit};
        let t = keyed(0).stored(backend).unwrap();
        let mut t = t;
        t.apply(&keyed(1000).to_change().unwrap()).unwrap();
        let s = t.snapshot();
        // Key order is numeric order, negatives first (memcomparable encoding).
        assert_eq!(ids_in(&s, &[]).len(), 1000);
        assert!(ids_in(&s, &[]).windows(2).all(|w| w[0] < w[1]));
        assert_eq!(ids_in(&s, &[col("id").eq(lit(7i64))]), vec![7]);
        assert_eq!(ids_in(&s, &[col("id").eq(lit(-7i64))]), vec![-7]);
        assert_eq!(ids_in(&s, &[col("id").eq(lit(5000i64))]), Vec::<i64>::new());
        assert_eq!(
            ids_in(&s, &[col("id").gt(lit(495i64))]),
            vec![496, 497, 498, 499]
        );
        assert_eq!(
            ids_in(&s, &[lit(-498i64).gt_eq(col("id"))]),
            vec![-500, -499, -498]
        );
        assert_eq!(
            ids_in(&s, &[col("id").gt_eq(lit(3i64)), col("id").lt(lit(6i64))]),
            vec![3, 4, 5]
        );
        assert_eq!(
            ids_in(&s, &[col("id").lt_eq(lit(3i64)), col("id").gt(lit(1i64))]),
            vec![2, 3]
        );
        // A filter on a non-key column, or of another type, does not narrow.
        let r = s.key_range(&[col("v").eq(lit("v3"))]).unwrap();
        assert_eq!(s.scan(&r, None).unwrap()[0].num_rows(), 1000);
        assert!(!StateSnapshot::can_narrow(
            t.layout(),
            &col("id").eq(lit(7i32))
        ));
        // A limit stops the read.
        assert_eq!(
            s.scan(&KeyRange::all(), Some(10)).unwrap()[0].num_rows(),
            10
        );
    }

    #[test]
    fn snapshots_do_not_see_later_writes() {
        on_both_backends(|backend| {
            let mut t = keyed(10).stored(backend).unwrap();
            let before = t.snapshot();
            let all = t.to_change().unwrap();
            t.apply(&all.negate()).unwrap();
            assert_eq!(t.len(), 0);
            assert_eq!(before.len(), 10);
            assert_eq!(ids_in(&before, &[]).len(), 10);
            assert!(ids_in(&t.snapshot(), &[]).is_empty());
        });
    }

    #[test]
    fn an_index_serves_filters_its_relation_key_cannot() {
        use datafusion::prelude::{col, lit};
        let t = keyed(1000);
        // A descending index on `id`, and the table keyed by `id` ascending.
        let layout =
            Arc::new(KeyLayout::with_directions(t.schema().clone(), &[(1, true)]).unwrap());
        let mut index = StateTable::with_layout(layout);
        index.apply(&t.to_change().unwrap()).unwrap();
        let desc = index.snapshot();
        assert!(ids_in(&desc, &[]).windows(2).all(|w| w[0] > w[1]));
        // Ranges on a descending column keep SQL's meaning and read only their rows.
        let read = |f: Expr| {
            let range = desc.key_range(std::slice::from_ref(&f)).unwrap();
            ids_in_range(&desc, &range)
        };
        assert_eq!(read(col("id").gt(lit(497i64))), vec![499, 498]);
        assert_eq!(read(col("id").lt_eq(lit(-499i64))), vec![-499, -500]);
        assert_eq!(read(col("id").eq(lit(3i64))), vec![3]);
        assert_eq!(read(lit(498i64).lt(col("id"))), vec![499]);
        // A relation keyed by `v` chooses the index for a filter on `id`, its own rows else.
        let by_v = {
            let mut v = StateTable::with_key(t.schema().clone(), &[0]).unwrap();
            v.apply(&t.to_change().unwrap()).unwrap();
            v.snapshot()
        };
        let both = IndexedSnapshot {
            rows: by_v,
            indexes: vec![desc.clone()],
        };
        let filters = [col("id").gt_eq(lit(498i64))];
        let (chosen, range) = both.choose(&filters).unwrap();
        assert!(Arc::ptr_eq(chosen.layout(), desc.layout()));
        assert_eq!(ids_in_range(chosen, &range), vec![499, 498]);
        let filters = [col("v").eq(lit("v7"))];
        let (chosen, range) = both.choose(&filters).unwrap();
        assert!(Arc::ptr_eq(chosen.layout(), both.rows.layout()));
        assert_eq!(ids_in_range(chosen, &range), vec![7]);
    }

    fn ids_in_range(s: &StateSnapshot, range: &KeyRange) -> Vec<i64> {
        s.scan(range, None)
            .unwrap()
            .iter()
            .flat_map(|b| {
                b.column(1)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect()
    }

    #[test]
    fn prefix_successor_skips_trailing_max_bytes() {
        assert_eq!(prefix_successor(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_successor(&[1, 255, 255]), Some(vec![2]));
        assert_eq!(prefix_successor(&[255]), None);
        assert_eq!(prefix_successor(&[]), None);
    }
}

//! The durable store: one RocksDB instance holding the catalog and every table's changelog.

use std::fs::File;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use fs2::FileExt;
use rocksdb::{DB, Direction, IteratorMode, Options, WriteBatch, WriteOptions};

use crate::common::ChangeBatch;
use crate::common::Epoch;
use crate::error::{Error, Result};

/// Memtable size of the changelog store (bytes); at most two are kept.
const STORE_WRITE_BUFFER_BYTES: usize = 16 << 20;

/// Block cache of the changelog store (bytes), index and filter blocks included.
const STORE_BLOCK_CACHE_BYTES: usize = 8 << 20;

/// Name of the reserved weight column in an encoded changelog entry.
const WEIGHT_COLUMN: &str = "__weir_weight";

/// One record of a table's changelog, as read back from the store.
#[derive(Debug, Clone)]
pub struct ChangelogEntry {
    /// Position of the entry in its table's changelog (its source offset), from 1.
    pub seq: u64,
    /// The epoch the write was acknowledged in.
    pub epoch: Epoch,
    /// The rows and their weights.
    pub change: ChangeBatch,
}

/// A table's contents as snapshotted in the store by earlier versions (rows under
/// `s/<table id>/<row key>`, position under `m/table_snapshot/<id>`); read once at start,
/// replaced by the table's first native snapshot (see [`crate::state::TableSnapshots`]).
#[derive(Debug)]
pub struct TableSnapshot {
    /// The newest changelog sequence number the snapshot holds.
    pub seq: u64,
    /// The epoch of that entry.
    pub epoch: Epoch,
    /// Row keys (the table's state-table layout) and counts, in key order.
    pub rows: Vec<(Box<[u8]>, i64)>,
}

/// The RocksDB store under the data directory, with an exclusive lock on the directory.
///
/// Keys: `m/<name>` for metadata (the catalog), `c/<table id: u64 BE>/<seq: u64 BE>` for
/// changelog entries, whose value is `<epoch: u64 BE>` followed by an Arrow IPC stream of one
/// batch (the table's columns plus a weight column); `s/<table id>/<row key>` for table
/// snapshots of earlier versions (see [`TableSnapshot`]).
pub struct Store {
    db: DB,
    dir: PathBuf,
    /// Held for the life of the store: a second server on the same directory fails to lock it.
    _lock: File,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.dir).finish()
    }
}

impl Store {
    /// Opens (creating if needed) the store in `dir`.
    ///
    /// # Errors
    /// [`Error::State`] when another server holds the directory or RocksDB fails to open.
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let lock_path = dir.join("LOCK.weir");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)?;
        if lock.try_lock_exclusive().is_err() {
            return Err(Error::State(format!(
                "data directory {} is in use by another Weir server (lock file {})",
                dir.display(),
                lock_path.display()
            )));
        }
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        // The changelog is truncated behind each table snapshot: most of it never leaves
        // the first levels, written uncompressed.
        opts.set_compression_per_level(&crate::state::backend::UNCOMPRESSED_TOP_LEVELS);
        // A small, fixed memory footprint beside the state backend's budget: the changelog
        // is written once and read back only at restart and backfill, so two 16 MB memtables
        // and an 8 MB block cache holding the index and filter blocks are enough (RocksDB's
        // defaults, 2 × 64 MB of memtables and index blocks outside any cache, grew with the
        // data).
        opts.set_write_buffer_size(STORE_WRITE_BUFFER_BYTES);
        opts.set_max_write_buffer_number(2);
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_block_cache(&rocksdb::Cache::new_lru_cache(STORE_BLOCK_CACHE_BYTES));
        table.set_cache_index_and_filter_blocks(true);
        table.set_pin_l0_filter_and_index_blocks_in_cache(true);
        opts.set_block_based_table_factory(&table);
        let db = DB::open(&opts, dir.join("db"))?;
        Ok(Store {
            db,
            dir: dir.to_path_buf(),
            _lock: lock,
        })
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads a metadata value.
    ///
    /// # Errors
    /// [`Error::State`] on a RocksDB failure.
    pub fn get_meta(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(meta_key(key))?)
    }

    /// Writes a metadata value, synced to disk before returning.
    ///
    /// # Errors
    /// [`Error::State`] on a RocksDB failure.
    pub fn put_meta(&self, key: &str, value: &[u8]) -> Result<()> {
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.put_opt(meta_key(key), value, &wo)?;
        Ok(())
    }

    /// Appends entries to one table's changelog atomically and synced (one RocksDB write batch):
    /// after it returns, the write survives `kill -9` and power loss.
    ///
    /// # Errors
    /// [`Error::State`] on a RocksDB failure; Arrow errors when encoding fails.
    pub fn append_changelog(
        &self,
        table_id: u64,
        entries: &[(u64, Epoch, &ChangeBatch)],
    ) -> Result<()> {
        self.append_changelog_at(table_id, entries, None)
    }

    /// The offset a table's connector reached, as stored with the rows it produced by
    /// [`Store::append_changelog_at`]; `None` before its first write.
    ///
    /// # Errors
    /// [`Error::State`] on a RocksDB failure or a corrupt value.
    pub fn source_offset(&self, table_id: u64) -> Result<Option<u64>> {
        match self.db.get(meta_key(&source_meta(table_id)))? {
            None => Ok(None),
            Some(v) => {
                let bytes: [u8; 8] = v.as_slice().try_into().map_err(|_| {
                    Error::State(format!("corrupt source offset of table {table_id}"))
                })?;
                Ok(Some(u64::from_be_bytes(bytes)))
            }
        }
    }

    /// Appends entries to one table's changelog as [`Store::append_changelog`] does and, when
    /// `offset` is given, records it as the table's connector offset in the same RocksDB
    /// write batch: the rows and the offset they bring the source to are durable together or
    /// not at all (a source resumes after that offset, so no row is lost or repeated).
    ///
    /// # Errors
    /// As [`Store::append_changelog`].
    pub fn append_changelog_at(
        &self,
        table_id: u64,
        entries: &[(u64, Epoch, &ChangeBatch)],
        offset: Option<u64>,
    ) -> Result<()> {
        let mut wb = WriteBatch::default();
        if let Some(o) = offset {
            wb.put(meta_key(&source_meta(table_id)), o.to_be_bytes());
        }
        put_entries(&mut wb, table_id, entries)?;
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(wb, &wo)?;
        Ok(())
    }

    /// Appends changelog entries of several tables (table id, its entries) in one synced
    /// write batch: a committed transaction block's writes are durable together or not at
    /// all.
    ///
    /// # Errors
    /// As [`Store::append_changelog`].
    pub fn append_changelogs(&self, tables: &[(u64, Vec<ChangelogEntryRef<'_>>)]) -> Result<()> {
        let mut wb = WriteBatch::default();
        for (table_id, entries) in tables {
            put_entries(&mut wb, *table_id, entries)?;
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(wb, &wo)?;
        Ok(())
    }

    /// Reads a table's whole changelog in order.
    ///
    /// # Errors
    /// [`Error::State`] on a RocksDB failure or a corrupt entry.
    pub fn read_changelog(&self, table_id: u64) -> Result<Vec<ChangelogEntry>> {
        // Epochs start at 1, so (0, max] is the whole changelog.
        self.read_changelog_range(table_id, Epoch(0), Epoch(u64::MAX))
    }

    /// Reads the changelog entries of epochs in `(after, upto]`, in order (a job's source
    /// rewound to the offset `after`). Entries outside the range are not decoded.
    ///
    /// # Errors
    /// [`Error::State`] on a RocksDB failure or a corrupt entry.
    pub fn read_changelog_range(
        &self,
        table_id: u64,
        after: Epoch,
        upto: Epoch,
    ) -> Result<Vec<ChangelogEntry>> {
        self.scan_changelog(table_id, 0, after, upto)
    }

    /// Reads the changelog entries after sequence number `seq` (exclusive), in order: the
    /// tail a table replays on top of its snapshot. Entries up to `seq` are not read.
    ///
    /// # Errors
    /// [`Error::State`] on a RocksDB failure or a corrupt entry.
    pub fn read_changelog_after(&self, table_id: u64, seq: u64) -> Result<Vec<ChangelogEntry>> {
        self.scan_changelog(table_id, seq.saturating_add(1), Epoch(0), Epoch(u64::MAX))
    }

    /// The entries from sequence number `from_seq` on whose epochs lie in `(after, upto]`;
    /// entries outside the range are not decoded.
    fn scan_changelog(
        &self,
        table_id: u64,
        from_seq: u64,
        after: Epoch,
        upto: Epoch,
    ) -> Result<Vec<ChangelogEntry>> {
        let prefix = changelog_prefix(table_id);
        let start = changelog_key(table_id, from_seq);
        let mut out = Vec::new();
        for item in self
            .db
            .iterator(IteratorMode::From(&start, Direction::Forward))
        {
            let (key, value) = item?;
            if !key.starts_with(&prefix) {
                break;
            }
            if value.len() < 8 {
                return Err(Error::State(format!(
                    "corrupt changelog entry of table {table_id}"
                )));
            }
            let epoch = Epoch(u64::from_be_bytes(value[..8].try_into().unwrap_or([0; 8])));
            if epoch <= after {
                continue;
            }
            if epoch > upto {
                // Epochs grow with the sequence number.
                break;
            }
            let seq = u64::from_be_bytes(key[prefix.len()..].try_into().map_err(|_| {
                Error::State(format!("corrupt changelog key for table {table_id}"))
            })?);
            let change = decode_change(&value[8..])?;
            out.push(ChangelogEntry { seq, epoch, change });
        }
        Ok(out)
    }

    /// Deletes changelog entries `1..=through` of a table (which the caller guarantees no
    /// recovery needs any more; nothing when `through` is 0) and, with `drop_legacy`, the
    /// snapshot an earlier version kept in the store: one synced write batch.
    ///
    /// # Errors
    /// [`Error::State`] on a RocksDB failure.
    pub fn truncate_changelog(&self, table_id: u64, through: u64, drop_legacy: bool) -> Result<()> {
        let mut wb = WriteBatch::default();
        if through > 0 {
            wb.delete_range(
                changelog_key(table_id, 0),
                changelog_key(table_id, through.saturating_add(1)),
            );
        }
        if drop_legacy {
            wb.delete_range(snapshot_prefix(table_id), snapshot_prefix(table_id + 1));
            wb.delete(meta_key(&snapshot_meta(table_id)));
            wb.delete(meta_key(&source_meta(table_id)));
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(wb, &wo)?;
        Ok(())
    }

    /// A table's snapshot: its position (the newest changelog sequence number and epoch it
    /// holds) and its rows (row key, count), in key order; `None` when none was written.
    ///
    /// # Errors
    /// [`Error::State`] on a RocksDB failure or a corrupt entry.
    pub fn read_table_snapshot(&self, table_id: u64) -> Result<Option<TableSnapshot>> {
        let Some(position) = self.db.get(meta_key(&snapshot_meta(table_id)))? else {
            return Ok(None);
        };
        let corrupt = || Error::State(format!("corrupt snapshot of table {table_id}"));
        if position.len() != 16 {
            return Err(corrupt());
        }
        let seq = u64::from_be_bytes(position[..8].try_into().map_err(|_| corrupt())?);
        let epoch = Epoch(u64::from_be_bytes(
            position[8..].try_into().map_err(|_| corrupt())?,
        ));
        let prefix = snapshot_prefix(table_id);
        let mut rows = Vec::new();
        for item in self
            .db
            .iterator(IteratorMode::From(&prefix, Direction::Forward))
        {
            let (key, value) = item?;
            if !key.starts_with(&prefix) {
                break;
            }
            let count = i64::from_be_bytes(value.as_ref().try_into().map_err(|_| corrupt())?);
            rows.push((Box::from(&key[prefix.len()..]), count));
        }
        Ok(Some(TableSnapshot { seq, epoch, rows }))
    }

    /// Bytes (keys and values) of a table's live changelog entries. Reads them all: for
    /// benches and tests.
    ///
    /// # Errors
    /// [`Error::State`] on a RocksDB failure.
    pub fn changelog_bytes(&self, table_id: u64) -> Result<u64> {
        let from = changelog_prefix(table_id);
        let to = changelog_prefix(table_id + 1);
        let mut total = 0u64;
        for item in self
            .db
            .iterator(IteratorMode::From(&from, Direction::Forward))
        {
            let (key, value) = item?;
            if key.as_ref() >= to.as_slice() {
                break;
            }
            total += (key.len() + value.len()) as u64;
        }
        Ok(total)
    }

    /// Deletes a table's whole changelog and snapshot (on `DROP TABLE`).
    ///
    /// # Errors
    /// [`Error::State`] on a RocksDB failure.
    pub fn delete_changelog(&self, table_id: u64) -> Result<()> {
        let mut wb = WriteBatch::default();
        wb.delete_range(snapshot_prefix(table_id), snapshot_prefix(table_id + 1));
        wb.delete(meta_key(&snapshot_meta(table_id)));
        wb.delete(meta_key(&source_meta(table_id)));
        wb.delete_range(changelog_prefix(table_id), changelog_prefix(table_id + 1));
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(wb, &wo)?;
        Ok(())
    }
}

fn meta_key(key: &str) -> Vec<u8> {
    let mut k = b"m/".to_vec();
    k.extend_from_slice(key.as_bytes());
    k
}

fn snapshot_prefix(table_id: u64) -> Vec<u8> {
    let mut k = b"s/".to_vec();
    k.extend_from_slice(&table_id.to_be_bytes());
    k
}

fn snapshot_meta(table_id: u64) -> String {
    format!("table_snapshot/{table_id}")
}

fn source_meta(table_id: u64) -> String {
    format!("source_offset/{table_id}")
}

fn changelog_prefix(table_id: u64) -> Vec<u8> {
    let mut k = b"c/".to_vec();
    k.extend_from_slice(&table_id.to_be_bytes());
    k
}

fn changelog_key(table_id: u64, seq: u64) -> Vec<u8> {
    let mut k = changelog_prefix(table_id);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// Encodes a change batch as an Arrow IPC stream with the weights as a last column.
fn encode_change(change: &ChangeBatch, out: &mut Vec<u8>) -> Result<()> {
    let schema = change.schema();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(WEIGHT_COLUMN, DataType::Int64, false));
    let full = Arc::new(Schema::new(fields));
    let mut columns = change.batch.columns().to_vec();
    columns.push(Arc::new(change.weights.clone()));
    let batch = RecordBatch::try_new(Arc::clone(&full), columns)?;
    let mut writer = StreamWriter::try_new(out, &full)?;
    writer.write(&batch)?;
    writer.finish()?;
    Ok(())
}

fn decode_change(bytes: &[u8]) -> Result<ChangeBatch> {
    let reader = StreamReader::try_new(Cursor::new(bytes), None)?;
    let schema = reader.schema();
    let mut batches = Vec::new();
    for b in reader {
        batches.push(b?);
    }
    let batch = arrow::compute::concat_batches(&schema, &batches)?;
    let n = batch.num_columns();
    if n == 0 || schema.field(n - 1).name() != WEIGHT_COLUMN {
        return Err(Error::State("changelog entry has no weight column".into()));
    }
    let weights = batch
        .column(n - 1)
        .as_any()
        .downcast_ref::<Int64Array>()
        .cloned()
        .ok_or_else(|| Error::State("changelog weight column is not Int64".into()))?;
    let rows = batch.project(&(0..n - 1).collect::<Vec<_>>())?;
    if weights.null_count() > 0 {
        return Err(Error::State("changelog weight column has nulls".into()));
    }
    ChangeBatch::new(rows, weights)
}

/// A changelog entry to write: (sequence number, epoch, rows).
pub type ChangelogEntryRef<'a> = (u64, Epoch, &'a ChangeBatch);

/// Puts changelog entries (sequence number, epoch, rows) of table `table_id` in `wb`.
///
/// # Errors
/// [`Error::State`] when a change cannot be encoded.
fn put_entries(
    wb: &mut WriteBatch,
    table_id: u64,
    entries: &[(u64, Epoch, &ChangeBatch)],
) -> Result<()> {
    for (seq, epoch, change) in entries {
        let mut value = epoch.0.to_be_bytes().to_vec();
        encode_change(change, &mut value)?;
        wb.put(changelog_key(table_id, *seq), value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::StringArray;

    #[test]
    fn changelog_round_trip_and_lock() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(
            Store::open(dir.path()).is_err(),
            "second open must fail on the lock"
        );
        let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)]));
        let batch = RecordBatch::try_new(
            schema,
            vec![Arc::new(StringArray::from(vec![Some("a"), None]))],
        )
        .unwrap();
        let change = ChangeBatch::new(batch, Int64Array::from(vec![1, -1])).unwrap();
        store
            .append_changelog(7, &[(1, Epoch(3), &change)])
            .unwrap();
        store
            .append_changelog(8, &[(1, Epoch(4), &change)])
            .unwrap();
        let back = store.read_changelog(7).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].epoch, Epoch(3));
        assert_eq!(back[0].change.weights.values().to_vec(), vec![1, -1]);
        assert_eq!(back[0].change.batch, change.batch);
        store.delete_changelog(7).unwrap();
        assert!(store.read_changelog(7).unwrap().is_empty());
        assert_eq!(store.read_changelog(8).unwrap().len(), 1);
    }
}

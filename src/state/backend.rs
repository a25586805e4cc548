//! The state backend: a RocksDB instance that holds the rows of state tables off the heap,
//! in key order, under a memory budget.
//!
//! Every stored [`StateTable`](super::StateTable) gets an id; its rows live under the key
//! `<table id: u64 BE><row key>` with the value `<count: i64 LE>`, so a table is one
//! contiguous key range and a key prefix of a table is a contiguous sub-range (prefix and
//! range scans are RocksDB range iterations). Writes go to the memtable without a WAL: the
//! backend is a working store, rebuilt at every start from the durable store (tables'
//! snapshots and changelogs) and from checkpoints, so it is emptied when it opens. Each
//! materialized view's job has a sibling instance of its own (same options, same budget), so
//! that a native RocksDB checkpoint of the sibling is a checkpoint of the job's state.
//!
//! Memory: RocksDB's block cache and its memtables share one budget, `--memory-limit`
//! (the memtables are charged to the cache through a write buffer manager, as RocksDB's
//! "Write Buffer Manager" wiki page describes); rows beyond it are on disk.

use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use rocksdb::{
    BlockBasedOptions, Cache, DB, Options, ReadOptions, SnapshotWithThreadMode, WriteBatch,
    WriteBufferManager, WriteOptions,
};

use crate::error::{Error, Result};

/// The memory budget when none is given: a quarter of the machine's memory, at least 256 MiB
/// (1 GiB when the machine's memory cannot be read).
pub fn default_memory_limit() -> u64 {
    const FLOOR: u64 = 256 << 20;
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    match total {
        Some(bytes) => (bytes / 4).max(FLOOR),
        None => 1 << 30,
    }
}

/// Parses a memory size: bytes, or a number with `kB`, `MB`, `GB` or `TB` (powers of 1024, as
/// PostgreSQL reads memory settings), e.g. `512MB`, `1GB`.
///
/// # Errors
/// A message naming the accepted forms.
pub fn parse_memory_size(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1 << 10,
        "mb" | "m" => 1 << 20,
        "gb" | "g" => 1 << 30,
        "tb" | "t" => 1 << 40,
        _ => {
            return Err(format!(
                "invalid memory size \"{text}\": use bytes or a number with kB, MB, GB or TB"
            ));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid memory size \"{text}\": expected a number"))?;
    let bytes = (value * scale as f64) as u64;
    if bytes < (16 << 20) {
        return Err(format!(
            "memory limit \"{text}\" is too small: at least 16MB"
        ));
    }
    Ok(bytes)
}

/// Memory in use by the backend (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryUsage {
    /// The budget (`--memory-limit`).
    pub limit: u64,
    /// Block cache in use, memtables included (they are charged to the cache).
    pub cache: u64,
    /// Memtables (rows written and not yet flushed to disk).
    pub memtables: u64,
    /// Estimated bytes of live rows on disk.
    pub disk: u64,
}

/// What every RocksDB instance of the process shares: one block cache, one write buffer
/// manager charging the memtables to it, the budget, and the open instances (for
/// [`StateBackend::usage`]).
struct Shared {
    cache: Cache,
    buffers: WriteBufferManager,
    limit: u64,
    instances: std::sync::Mutex<Vec<Weak<StateBackend>>>,
}

impl Shared {
    fn new(limit: u64) -> Arc<Self> {
        let cache = Cache::new_lru_cache(limit as usize);
        // Memtables take at most half of the budget, charged to the cache so that cache and
        // memtables together stay within it.
        let buffers = WriteBufferManager::new_write_buffer_manager_with_cache(
            (limit / 2) as usize,
            // Writes wait for a flush rather than grow the memtables past the budget.
            true,
            cache.clone(),
        );
        // Two flush threads for all instances (RocksDB's default is one): at a checkpoint the
        // jobs due flush together (see [`StateBackend::begin_flush`]). They belong to RocksDB's
        // process-wide default environment, which every instance uses.
        match rocksdb::Env::new() {
            Ok(mut env) => env.set_high_priority_background_threads(2),
            Err(e) => tracing::warn!(error = %e, "cannot size RocksDB's flush threads"),
        }
        Arc::new(Shared {
            cache,
            buffers,
            limit,
            instances: std::sync::Mutex::new(Vec::new()),
        })
    }
}

/// `f(prefix index, row key bytes, count) -> go on with this prefix?`, as called by
/// [`StateTable::scan_prefixes_while`](super::StateTable::scan_prefixes_while).
pub type PrefixVisitor<'a> = dyn FnMut(usize, &[u8], i64) -> Result<bool> + 'a;

/// A visitor of stored rows: `f(table id, row key, count)`.
pub(crate) type RowVisitor<'a> = dyn FnMut(u64, &[u8], i64) -> Result<()> + 'a;

/// How [`StateBackend::open_sibling`] treats the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Empty: anything in the directory is removed first.
    Fresh,
    /// The database already in the directory (the files of a restored checkpoint).
    Existing,
}

/// The most sorted runs a job's instance keeps (universal compaction's `max_read_amp`): a
/// read of a key checks each run's bloom filter, a scan merges one iterator per run.
const MAX_SORTED_RUNS: u32 = 12;

/// Of a job's state (universal compaction), the share of the data, oldest first, that is
/// compressed, in percent.
const COMPRESSED_PERCENT: u32 = 80;

/// Compression by level for leveled compaction (RocksDB's seven levels): none for the
/// flushes (L0) and L1, LZ4 below.
pub(crate) const UNCOMPRESSED_TOP_LEVELS: [rocksdb::DBCompressionType; 7] = [
    rocksdb::DBCompressionType::None,
    rocksdb::DBCompressionType::None,
    rocksdb::DBCompressionType::Lz4,
    rocksdb::DBCompressionType::Lz4,
    rocksdb::DBCompressionType::Lz4,
    rocksdb::DBCompressionType::Lz4,
    rocksdb::DBCompressionType::Lz4,
];

/// How an instance is read, which decides whether its memtables keep a bloom filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// Point lookups of keys mostly absent (primary-key checks on inserts): each memtable
    /// keeps a bloom filter of its keys (5% of the memtable's size, allocated with it).
    Lookups,
    /// Iterators (operators read by prefix): no memtable bloom filter, which would cost
    /// memory per instance and serve no read.
    Scans,
}

/// One RocksDB instance behind stored state tables (see the module docs). The root instance
/// ([`StateBackend::open`]) holds tables and their indexes; each materialized view's job has a
/// sibling ([`StateBackend::open_sibling`]) holding its operators' state and the view's rows,
/// so that a native RocksDB checkpoint of the sibling is a checkpoint of the job. All share
/// one memory budget.
pub struct StateBackend {
    db: Arc<DB>,
    shared: Arc<Shared>,
    dir: PathBuf,
    next_id: AtomicU64,
    write: WriteOptions,
    /// Declared after `db`, so it runs once the database is closed: removes a sibling's
    /// directory (a job's working state is disposable once replaced or dropped).
    _cleanup: Option<RemoveDir>,
}

/// Removes a directory when dropped.
struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.0.display(), error = %e, "cannot remove a state directory");
        }
    }
}

impl std::fmt::Debug for StateBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateBackend")
            .field("dir", &self.dir)
            .field("limit", &self.shared.limit)
            .finish()
    }
}

impl StateBackend {
    /// Opens the root backend, empty, in `dir` (anything there is removed first) with a
    /// memory budget of `limit` bytes shared by it and every sibling opened from it.
    ///
    /// # Errors
    /// [`Error::State`] when the directory cannot be emptied or RocksDB fails to open.
    pub fn open(dir: &Path, limit: u64) -> Result<Arc<Self>> {
        Self::open_in(
            Shared::new(limit),
            dir,
            OpenMode::Fresh,
            Reads::Lookups,
            false,
        )
    }

    /// Opens the database already in `dir` on its own, with a budget of `limit` bytes (to read
    /// a checkpoint's rows out when state is kept on the heap).
    ///
    /// # Errors
    /// [`Error::State`] when RocksDB fails to open.
    pub fn open_existing(dir: &Path, limit: u64) -> Result<Arc<Self>> {
        Self::open_in(
            Shared::new(limit),
            dir,
            OpenMode::Existing,
            Reads::Scans,
            false,
        )
    }

    /// Opens another instance in `dir` under this one's memory budget (block cache and write
    /// buffer manager). The directory is removed when the instance is dropped.
    ///
    /// # Errors
    /// [`Error::State`] on I/O errors or when RocksDB fails to open.
    pub fn open_sibling(&self, dir: &Path, mode: OpenMode, reads: Reads) -> Result<Arc<Self>> {
        Self::open_in(Arc::clone(&self.shared), dir, mode, reads, true)
    }

    fn open_in(
        shared: Arc<Shared>,
        dir: &Path,
        mode: OpenMode,
        reads: Reads,
        remove_on_drop: bool,
    ) -> Result<Arc<Self>> {
        if mode == OpenMode::Fresh && dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| {
                Error::State(format!(
                    "cannot empty state directory {}: {e}",
                    dir.display()
                ))
            })?;
        }
        std::fs::create_dir_all(dir)?;
        let limit = shared.limit;
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&shared.cache);
        // Index and bloom filter blocks are charged to the cache too, partitioned (as RocksDB's
        // "Partitioned Index/Filters" wiki page recommends when memory is bounded): a lookup
        // loads one small partition, not a whole file's filter; the top levels stay pinned.
        table.set_cache_index_and_filter_blocks(true);
        table.set_bloom_filter(10.0, false);
        table.set_index_type(rocksdb::BlockBasedIndexType::TwoLevelIndexSearch);
        table.set_partition_filters(true);
        table.set_metadata_block_size(4096);
        table.set_pin_top_level_index_and_filter(true);
        table.set_cache_index_and_filter_blocks_with_high_priority(true);
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        // Flushes and the first level are written uncompressed: most of what is written
        // there is rewritten soon by a compaction, and compressing it cost 12% of a
        // write-bound load's CPU (docs/performance.md); the larger, older levels are
        // compressed (RocksDB's tuning guide recommends no compression for L0 and L1).
        opts.set_compression_per_level(&UNCOMPRESSED_TOP_LEVELS);
        opts.set_block_based_table_factory(&table);
        opts.set_write_buffer_manager(&shared.buffers);
        // A job's instance (read by scans) flushes at every checkpoint's sync phase, which the
        // barrier waits for: small memtables keep that flush short, as RocksDB flushes full
        // ones in the background while the epoch runs (universal compaction, below, keeps
        // the many small runs from rewriting the state).
        let most = if reads == Reads::Scans {
            8 << 20
        } else {
            64 << 20
        };
        opts.set_write_buffer_size(((limit / 8) as usize).clamp(1 << 20, most));
        if reads == Reads::Scans {
            // A job's instance flushes at every checkpoint, and a checkpoint persists the SST
            // files the previous one does not hold. Leveled compaction would merge each small
            // flush into the level below and rewrite it; universal compaction merges the small
            // new runs among themselves and leaves the large old run alone (RocksDB wiki,
            // "Universal Compaction"), so a small change persists little.
            opts.set_compaction_style(rocksdb::DBCompactionStyle::Universal);
        }
        opts.set_max_write_buffer_number(4);
        if reads == Reads::Lookups {
            // A bloom filter over whole keys in the memtables: a read of a key not written
            // recently (most inserts) skips the memtables' skip lists.
            opts.set_memtable_whole_key_filtering(true);
            opts.set_memtable_prefix_bloom_ratio(0.05);
        }
        // The default column family opened by name, so that batched MultiGet can address it.
        opts.set_merge_operator_associative("weir_add_counts", add_counts);
        opts.set_compaction_filter(
            "weir_drop_zero_counts",
            |_level: u32, _key: &[u8], value: &[u8]| {
                if decode_count(value) <= 0 {
                    rocksdb::CompactionDecision::Remove
                } else {
                    rocksdb::CompactionDecision::Keep
                }
            },
        );
        let default =
            rocksdb::ColumnFamilyDescriptor::new(rocksdb::DEFAULT_COLUMN_FAMILY_NAME, opts.clone());
        let db = DB::open_cf_descriptors(&opts, dir, [default])?;
        if reads == Reads::Scans {
            // Universal compaction merges runs of similar size (each at most 1% larger than
            // the newer ones together); when the number of runs reaches the trigger (4) and
            // no such set exists, it falls back to merging the two newest runs whatever
            // their sizes. With checkpoint-sized flushes that fallback made one run absorb
            // every new flush: each checkpoint re-persisted a run that grew with the state
            // (1 MB for 8 KB of change at 10 MB of state). Allowing up to `MAX_SORTED_RUNS`
            // runs (RocksDB's `max_read_amp`) leaves room for the size-ratio merges, whose
            // runs double in size (a byte is rewritten log2(state / flush) times); the
            // fallback fires only past 2^(MAX_SORTED_RUNS - 1) flushes' worth of state, and
            // then merges runs of at most state / 2^(MAX_SORTED_RUNS - 1).
            db.set_options(&[(
                "compaction_options_universal",
                // Universal compaction compresses only the oldest `COMPRESSED_PERCENT` of
                // the data (the large old runs); flushes and merges of the new small runs
                // stay uncompressed.
                &format!(
                    "{{max_read_amp={MAX_SORTED_RUNS};compression_size_percent={COMPRESSED_PERCENT}}}"
                ),
            )])?;
        }
        let mut write = WriteOptions::default();
        write.disable_wal(true);
        let backend = Arc::new(StateBackend {
            db: Arc::new(db),
            shared: Arc::clone(&shared),
            dir: dir.to_path_buf(),
            next_id: AtomicU64::new(1),
            write,
            _cleanup: remove_on_drop.then(|| RemoveDir(dir.to_path_buf())),
        });
        let mut instances = shared.instances.lock().unwrap_or_else(|e| e.into_inner());
        instances.retain(|w| w.strong_count() > 0);
        instances.push(Arc::downgrade(&backend));
        Ok(backend)
    }

    /// Flushes the memtables to SST files (and waits for it).
    ///
    /// # Errors
    /// [`Error::State`] on RocksDB errors.
    pub fn flush(&self) -> Result<()> {
        self.db
            .flush()
            .map_err(|e| Error::State(format!("state flush: {e}")))
    }

    /// Starts a flush of the memtables without waiting for it: the active memtable becomes
    /// immutable now, with exactly the writes made so far. A [`Self::checkpoint`] right after
    /// (with no write between) waits for this flush instead of starting one, so several
    /// instances flush in parallel when each starts before any waits.
    ///
    /// # Errors
    /// [`Error::State`] on RocksDB errors.
    pub fn begin_flush(&self) -> Result<()> {
        let mut opts = rocksdb::FlushOptions::default();
        opts.set_wait(false);
        self.db
            .flush_opt(&opts)
            .map_err(|e| Error::State(format!("state flush: {e}")))
    }

    /// A native RocksDB checkpoint of this instance in `path` (which must not exist): the
    /// memtables are flushed, then every live SST file is hard-linked (copied across file
    /// systems) and the small metadata files are written. Costs the memtables' flush and one
    /// link per file, not the rows stored.
    ///
    /// # Errors
    /// [`Error::State`] on RocksDB or I/O errors.
    pub fn checkpoint(&self, path: &Path) -> Result<()> {
        self.flush()?;
        rocksdb::checkpoint::Checkpoint::new(&self.db)
            .and_then(|c| c.create_checkpoint(path))
            .map_err(|e| Error::State(format!("native checkpoint: {e}")))
    }

    /// The directory of this instance.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes every row of the tables not allocated yet (ids from the next one on): after
    /// the tables of a restored checkpoint were allocated again in their original order,
    /// what remains is derived state to rebuild (secondary indexes).
    ///
    /// # Errors
    /// RocksDB write errors.
    pub(crate) fn drop_unallocated(&self) -> Result<()> {
        let next = self.next_id.load(Ordering::Relaxed);
        let mut batch = WriteBatch::default();
        batch.delete_range(table_prefix(next), table_prefix(u64::MAX));
        self.write(batch)
    }

    /// Every row of every table of this instance: `f(table id, row key, count)` in key order.
    ///
    /// # Errors
    /// RocksDB read errors; errors of `f`.
    pub(crate) fn scan_all(&self, f: &mut RowVisitor<'_>) -> Result<()> {
        let mut it = self.db.raw_iterator();
        it.seek_to_first();
        while it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            if k.len() < 8 || v.len() < 8 {
                return Err(Error::State(format!(
                    "corrupt state row in {}",
                    self.dir.display()
                )));
            }
            let count = decode_count(v);
            if count > 0 {
                let id = u64::from_be_bytes(k[..8].try_into().unwrap_or([0; 8]));
                f(id, &k[8..], count)?;
            }
            it.next();
        }
        it.status()?;
        Ok(())
    }

    /// Allocates table ids from `first` on (if the next id is lower): ids below it are the
    /// caller's to assign (see [`StateTable::store_as`](super::StateTable::store_as)).
    pub(crate) fn allocate_from(&self, first: u64) {
        self.next_id.fetch_max(first, Ordering::Relaxed);
    }

    /// A new table id: the key prefix of a new stored state table.
    pub(crate) fn allocate(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The memory budget in bytes.
    pub fn limit(&self) -> u64 {
        self.shared.limit
    }

    /// Memory and disk in use now, by every instance sharing this one's budget.
    pub fn usage(&self) -> MemoryUsage {
        let instances: Vec<Arc<StateBackend>> = self
            .shared
            .instances
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let mut usage = MemoryUsage {
            limit: self.shared.limit,
            cache: self.shared.cache.get_usage() as u64,
            memtables: 0,
            disk: 0,
        };
        for b in &instances {
            let prop = |name: &str| b.db.property_int_value(name).ok().flatten().unwrap_or(0);
            usage.memtables += prop("rocksdb.cur-size-all-mem-tables");
            usage.disk += prop("rocksdb.estimate-live-data-size");
        }
        usage
    }

    /// The count of a stored key; `None` when absent (or merged down to zero).
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<i64>> {
        Ok(self
            .db
            .get_pinned(key)?
            .map(|v| decode_count(&v))
            .filter(|c| *c > 0))
    }

    pub(crate) fn write(&self, batch: WriteBatch) -> Result<()> {
        Ok(self.db.write_opt(batch, &self.write)?)
    }

    /// Removes every row of table `id` (one range tombstone).
    pub(crate) fn drop_table(&self, id: u64) -> Result<()> {
        let mut batch = WriteBatch::default();
        batch.delete_range(table_prefix(id), table_prefix(id + 1));
        self.write(batch)
    }

    /// The rows of table `id` whose row keys lie in `[lower, upper)` (`upper = None`: to the
    /// table's end), read at `snapshot` (or now), in key order: `f(row key, count)` until it
    /// returns `false`.
    ///
    /// # Errors
    /// RocksDB read errors.
    pub(crate) fn scan(
        &self,
        snapshot: Option<&StoreSnapshot>,
        id: u64,
        lower: &[u8],
        upper: Option<&[u8]>,
        f: &mut dyn FnMut(&[u8], i64) -> Result<bool>,
    ) -> Result<()> {
        let mut opts = ReadOptions::default();
        let mut low = table_prefix(id).to_vec();
        low.extend_from_slice(lower);
        let high = match upper {
            Some(u) => {
                let mut h = table_prefix(id).to_vec();
                h.extend_from_slice(u);
                h
            }
            None => table_prefix(id + 1).to_vec(),
        };
        opts.set_iterate_lower_bound(low.clone());
        opts.set_iterate_upper_bound(high);
        if let Some(s) = snapshot {
            opts.set_snapshot(&s.snapshot);
        }
        let mut it = self.db.raw_iterator_opt(opts);
        it.seek(&low);
        while it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            let count = decode_count(v);
            if count > 0 && !f(&k[8..], count)? {
                return Ok(());
            }
            it.next();
        }
        it.status()?;
        Ok(())
    }

    /// For each prefix, the sum of the counts of table `id`'s rows whose row key starts with
    /// it, read through one iterator (seeking is much cheaper than opening an iterator).
    ///
    /// # Errors
    /// RocksDB read errors.
    pub(crate) fn count_prefixes<'a>(
        &self,
        id: u64,
        prefixes: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Vec<i64>> {
        let prefixes: Vec<&[u8]> = prefixes.into_iter().collect();
        let mut out = vec![0; prefixes.len()];
        self.scan_prefixes(id, &prefixes, &mut |i, _, c| {
            out[i] += c;
            Ok(true)
        })?;
        Ok(out)
    }

    /// For each of `prefixes` (by its index), `f(index, row key, count)` on the rows of table
    /// `id` whose row key starts with it, in key order, until `f` returns `false` for that
    /// prefix. One iterator serves all prefixes, visited in key order: one seek each, not one
    /// iterator each.
    ///
    /// # Errors
    /// RocksDB read errors; errors of `f`.
    pub(crate) fn scan_prefixes(
        &self,
        id: u64,
        prefixes: &[&[u8]],
        f: &mut PrefixVisitor<'_>,
    ) -> Result<()> {
        if prefixes.is_empty() {
            return Ok(());
        }
        let mut order: Vec<usize> = (0..prefixes.len()).collect();
        order.sort_by(|a, b| prefixes[*a].cmp(prefixes[*b]));
        let mut opts = ReadOptions::default();
        opts.set_iterate_lower_bound(table_prefix(id).to_vec());
        opts.set_iterate_upper_bound(table_prefix(id + 1).to_vec());
        let mut it = self.db.raw_iterator_opt(opts);
        let mut wanted = Vec::new();
        for i in order {
            wanted.clear();
            wanted.extend_from_slice(&table_prefix(id));
            wanted.extend_from_slice(prefixes[i]);
            it.seek(&wanted);
            while it.valid() {
                let (Some(k), Some(v)) = (it.key(), it.value()) else {
                    break;
                };
                if !k.starts_with(&wanted) {
                    break;
                }
                let count = decode_count(v);
                if count > 0 && !f(i, &k[8..], count)? {
                    break;
                }
                it.next();
            }
            it.status()?;
        }
        Ok(())
    }

    /// A consistent view of every stored table as of now, kept until dropped.
    pub(crate) fn snapshot(self: &Arc<Self>) -> StoreSnapshot {
        let snapshot = self.db.snapshot();
        // SAFETY: the snapshot borrows the database; `StoreSnapshot` holds an `Arc` of the
        // same database and drops the snapshot first (see its `Drop`), so the database
        // outlives it.
        let snapshot: SnapshotWithThreadMode<'static, DB> = unsafe {
            std::mem::transmute::<SnapshotWithThreadMode<'_, DB>, SnapshotWithThreadMode<'static, DB>>(
                snapshot,
            )
        };
        StoreSnapshot {
            snapshot: ManuallyDrop::new(snapshot),
            backend: Arc::clone(self),
        }
    }
}

/// A RocksDB snapshot of the backend: what a reader at one epoch sees.
pub struct StoreSnapshot {
    snapshot: ManuallyDrop<SnapshotWithThreadMode<'static, DB>>,
    backend: Arc<StateBackend>,
}

impl StoreSnapshot {
    /// The backend the snapshot reads.
    pub(crate) fn backend(&self) -> &Arc<StateBackend> {
        &self.backend
    }
}

impl Drop for StoreSnapshot {
    fn drop(&mut self) {
        // SAFETY: dropped once, here, while `backend` (and so the database) is still alive.
        unsafe { ManuallyDrop::drop(&mut self.snapshot) }
    }
}

/// The key prefix of table `id`.
pub(crate) fn table_prefix(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

/// The stored key of `row` in table `id`.
pub(crate) fn stored_key(id: u64, row: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + row.len());
    k.extend_from_slice(&table_prefix(id));
    k.extend_from_slice(row);
    k
}

pub(crate) fn encode_count(c: i64) -> [u8; 8] {
    c.to_le_bytes()
}

/// The merge operator of counts: the stored count plus every merged weight (a row's count
/// moves by the weights of its changes without being read first).
fn add_counts(
    _key: &[u8],
    existing: Option<&[u8]>,
    operands: &rocksdb::MergeOperands,
) -> Option<Vec<u8>> {
    let mut sum = existing.map(decode_count).unwrap_or(0);
    for op in operands {
        sum += decode_count(op);
    }
    Some(encode_count(sum).to_vec())
}

fn decode_count(v: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&v[..8]);
    i64::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_parse_like_postgres_settings() {
        assert_eq!(parse_memory_size("1GB"), Ok(1 << 30));
        assert_eq!(parse_memory_size("512MB"), Ok(512 << 20));
        assert_eq!(parse_memory_size("1.5GB"), Ok(3 << 29));
        assert_eq!(parse_memory_size("33554432"), Ok(32 << 20));
        assert!(parse_memory_size("1XB").is_err());
        assert!(parse_memory_size("1kB").is_err(), "below the floor");
        assert!(parse_memory_size("").is_err());
    }
}

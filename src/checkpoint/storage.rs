//! Checkpoint storage of one job, and its working RocksDB.
//!
//! ```text
//!  <data-dir>/jobs/<job>/db/            working RocksDB (WAL off: disposable, rebuilt on restore)
//!  <checkpoint-dir>/<job>/shared/       SST files, named <incarnation>-<file>, shared by
//!                                       checkpoints and counted by reference
//!  <checkpoint-dir>/<job>/chk-<id>/     MANIFEST, CURRENT, OPTIONS (rocksdb) or state.bin
//!                                       (memory), and _metadata.json, written last: a checkpoint
//!                                       is completed exactly when its _metadata.json exists
//! ```
//!
//! State rows are stored under the key `[state table number: u32 BE][row bytes]` with the row's
//! count (i64 LE) as value; the row bytes are Arrow's row format of the state table's schema.
//! With `rocksdb`, a checkpoint writes the rows changed since the previous one, flushes and takes
//! a native RocksDB checkpoint (hard links); only SST files not already in `shared/` are new
//! (Flink's incremental RocksDB checkpoints work the same way). With `memory`, a checkpoint is a
//! full snapshot in `state.bin`: records of `[table u32][key length u32][key][count i64]`, LE.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use rocksdb::{DB, IteratorMode, Options, WriteBatch, WriteOptions};
use serde::{Deserialize, Serialize};
use tracing::{debug, info, warn};

use super::StateBackendKind;
use crate::error::{Error, Result};

/// One state table's part of a checkpoint's sync phase.
#[derive(Debug)]
pub enum TableChanges {
    /// Every row (the table was not tracked, or the backend keeps full snapshots).
    Full(Vec<(Box<[u8]>, i64)>),
    /// Rows changed since the previous checkpoint with their new counts (0 = gone).
    Delta(Vec<(Box<[u8]>, i64)>),
}

/// The rows of every state table of a job (by state table number), as loaded on restore.
#[derive(Debug, Default)]
pub struct StateImage {
    /// Per state table: (row bytes, count).
    pub tables: Vec<Vec<(Box<[u8]>, i64)>>,
}

impl StateImage {
    /// Total rows loaded (distinct rows).
    pub fn rows(&self) -> usize {
        self.tables.iter().map(|t| t.len()).sum()
    }

    fn push(&mut self, table: usize, key: &[u8], count: i64) {
        if self.tables.len() <= table {
            self.tables.resize_with(table + 1, Vec::new);
        }
        self.tables[table].push((key.into(), count));
    }
}

/// A file of a checkpoint kept in `shared/`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SharedFile {
    /// The file's name in the working RocksDB.
    pub name: String,
    /// Its name in `shared/`.
    pub shared: String,
    /// Size in bytes.
    pub size: u64,
}

/// A completed checkpoint's metadata (`_metadata.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// Checkpoint id, increasing per job.
    pub id: u64,
    /// The epoch whose end the state reflects; sources resume after it.
    pub epoch: u64,
    /// `rocksdb` or `memory`.
    pub backend: String,
    /// SST files in `shared/` (rocksdb).
    pub files: Vec<SharedFile>,
    /// Full size of the state in bytes (all files the checkpoint needs).
    pub state_bytes: u64,
    /// Bytes this checkpoint wrote (new files only).
    pub persisted_bytes: u64,
    /// Trigger time, ms since the Unix epoch.
    pub trigger_unix_ms: i64,
    /// Completion time, ms since the Unix epoch.
    pub end_unix_ms: i64,
    /// Source offsets: each source relation id and the last epoch of it included.
    pub offsets: BTreeMap<u64, u64>,
    /// The layout of the operators' state tables ([`STATE_FORMAT`] when written; 0 in
    /// manifests written before the field existed).
    #[serde(default)]
    pub state_format: u32,
}

/// The layout version of the operators' state tables in a checkpoint. A checkpoint of another
/// version cannot be restored (its rows are keyed differently) and is discarded at open: the
/// view is then rebuilt from its inputs. 1: join sides keyed by (join key, row); 2: an
/// aggregate keeps accumulator rows per group and value tables, not its input rows.
pub const STATE_FORMAT: u32 = 2;

/// What the sync phase leaves for the async phase.
#[derive(Debug)]
pub enum PendingSnapshot {
    /// A native RocksDB checkpoint (hard links) in a temporary directory.
    RocksDb {
        /// The temporary directory.
        tmp: PathBuf,
        /// Each SST file's name in `shared/`, fixed when the snapshot was taken.
        shared_names: HashMap<String, String>,
    },
    /// A full copy of the state.
    Memory {
        /// Every state table's rows.
        image: StateImage,
    },
}

/// One job's checkpoints and working state database.
pub struct CheckpointStorage {
    dir: PathBuf,
    work_dir: PathBuf,
    backend: StateBackendKind,
    db: Option<DB>,
    incarnation: String,
    /// Files of the working DB that came from `shared/` on restore: name to shared name.
    restored: HashMap<String, String>,
    /// Shared file to the number of completed (or committing) checkpoints using it.
    refs: HashMap<String, usize>,
    completed: BTreeMap<u64, Manifest>,
    /// Bumped whenever the working database is replaced (reset or restore): state changes
    /// captured before must not be written into the new one.
    generation: u64,
    /// The last retention policy (`checkpoint.retained`, downstream epochs), applied again as
    /// soon as a checkpoint commits; 0 until the first policy arrives.
    retained: usize,
    pins: Vec<u64>,
}

impl std::fmt::Debug for CheckpointStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointStorage")
            .field("dir", &self.dir)
            .field("completed", &self.completed.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn io(context: &str, path: &Path, e: std::io::Error) -> Error {
    Error::State(format!("{context} {}: {e}", path.display()))
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn table_prefix(table: u32) -> [u8; 4] {
    table.to_be_bytes()
}

fn sync_dir(path: &Path) {
    if let Ok(f) = fs::File::open(path) {
        let _ = f.sync_all();
    }
}

impl CheckpointStorage {
    /// Opens a job's checkpoint directory: loads completed checkpoints, deletes what an
    /// interrupted checkpoint left (directories without `_metadata.json`, unreferenced shared
    /// files). The working database is opened by [`Self::reset_working`] or [`Self::restore`].
    ///
    /// # Errors
    /// [`Error::State`] on I/O errors or an unreadable manifest.
    pub fn open(dir: PathBuf, work_dir: PathBuf, backend: StateBackendKind) -> Result<Self> {
        fs::create_dir_all(dir.join("shared")).map_err(|e| io("cannot create", &dir, e))?;
        fs::create_dir_all(&work_dir).map_err(|e| io("cannot create", &work_dir, e))?;
        let mut completed = BTreeMap::new();
        for entry in fs::read_dir(&dir).map_err(|e| io("cannot read", &dir, e))? {
            let entry = entry.map_err(|e| io("cannot read", &dir, e))?;
            let name = entry.file_name().to_string_lossy().to_string();
            if name == "shared" {
                continue;
            }
            let meta = entry.path().join("_metadata.json");
            let parsed = name
                .strip_prefix("chk-")
                .and_then(|n| n.parse::<u64>().ok());
            match (parsed, meta.exists()) {
                (Some(id), true) => {
                    let bytes = fs::read(&meta).map_err(|e| io("cannot read", &meta, e))?;
                    let m: Manifest = serde_json::from_slice(&bytes).map_err(|e| {
                        Error::State(format!("corrupt checkpoint {}: {e}", meta.display()))
                    })?;
                    if m.state_format == STATE_FORMAT {
                        completed.insert(id, m);
                    } else {
                        info!(
                            path = %entry.path().display(),
                            format = m.state_format,
                            "discarding a checkpoint of another state format"
                        );
                        let _ = fs::remove_dir_all(entry.path());
                    }
                }
                _ => {
                    debug!(path = %entry.path().display(), "removing an incomplete checkpoint");
                    let _ = fs::remove_dir_all(entry.path());
                }
            }
        }
        let mut storage = CheckpointStorage {
            dir,
            work_dir,
            backend,
            db: None,
            incarnation: format!("{:x}", now_nanos()),
            restored: HashMap::new(),
            refs: HashMap::new(),
            completed,
            generation: 0,
            retained: 0,
            pins: Vec::new(),
        };
        for m in storage.completed.values() {
            for f in &m.files {
                *storage.refs.entry(f.shared.clone()).or_default() += 1;
            }
        }
        storage.delete_unreferenced()?;
        Ok(storage)
    }

    fn shared_dir(&self) -> PathBuf {
        self.dir.join("shared")
    }

    fn chk_dir(&self, id: u64) -> PathBuf {
        self.dir.join(format!("chk-{id}"))
    }

    fn db_dir(&self) -> PathBuf {
        self.work_dir.join("db")
    }

    /// The working database's generation (see the field's doc).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The backend this storage serves.
    pub fn backend(&self) -> StateBackendKind {
        self.backend
    }

    /// The job's checkpoint directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn delete_unreferenced(&mut self) -> Result<()> {
        let shared = self.shared_dir();
        for entry in fs::read_dir(&shared).map_err(|e| io("cannot read", &shared, e))? {
            let entry = entry.map_err(|e| io("cannot read", &shared, e))?;
            let name = entry.file_name().to_string_lossy().to_string();
            if !self.refs.contains_key(&name) {
                let _ = fs::remove_file(entry.path());
            }
        }
        Ok(())
    }

    /// Completed checkpoints, oldest first.
    pub fn completed(&self) -> impl Iterator<Item = &Manifest> {
        self.completed.values()
    }

    /// The highest checkpoint id ever used here (0 when none).
    pub fn max_id(&self) -> u64 {
        self.completed.keys().next_back().copied().unwrap_or(0)
    }

    fn open_db(path: &Path) -> Result<DB> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        opts.set_max_open_files(256);
        DB::open(&opts, path).map_err(|e| Error::State(format!("job state database: {e}")))
    }

    /// Starts from empty state: a fresh working database (rocksdb).
    ///
    /// # Errors
    /// [`Error::State`] on I/O or RocksDB errors.
    pub fn reset_working(&mut self) -> Result<()> {
        self.generation += 1;
        self.db = None;
        self.restored.clear();
        self.incarnation = format!("{:x}", now_nanos());
        if self.backend == StateBackendKind::RocksDb {
            let path = self.db_dir();
            if path.exists() {
                fs::remove_dir_all(&path).map_err(|e| io("cannot remove", &path, e))?;
            }
            self.db = Some(Self::open_db(&path)?);
        }
        Ok(())
    }

    /// Restores checkpoint `id`: the working database becomes the checkpoint's (hard links of
    /// its shared files) and every state row is returned.
    ///
    /// # Errors
    /// [`Error::State`] when the checkpoint is missing or its files are unreadable.
    pub fn restore(&mut self, id: u64) -> Result<StateImage> {
        let manifest = self
            .completed
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::State(format!("checkpoint {id} is not available")))?;
        let chk = self.chk_dir(id);
        self.generation += 1;
        self.db = None;
        self.restored.clear();
        self.incarnation = format!("{:x}", now_nanos());
        let mut image = StateImage::default();
        if manifest.backend == "memory" {
            let path = chk.join("state.bin");
            let bytes = fs::read(&path).map_err(|e| io("cannot read", &path, e))?;
            decode_image(&bytes, &mut image)?;
            if self.backend == StateBackendKind::RocksDb {
                // The job moved from memory to rocksdb: start its database from the image.
                self.reset_working()?;
                self.write_changes(
                    image
                        .tables
                        .iter()
                        .map(|t| TableChanges::Full(t.clone()))
                        .collect(),
                )?;
            }
            return Ok(image);
        }
        let path = self.db_dir();
        if path.exists() {
            fs::remove_dir_all(&path).map_err(|e| io("cannot remove", &path, e))?;
        }
        fs::create_dir_all(&path).map_err(|e| io("cannot create", &path, e))?;
        for f in &manifest.files {
            let from = self.shared_dir().join(&f.shared);
            let to = path.join(&f.name);
            fs::hard_link(&from, &to)
                .or_else(|_| fs::copy(&from, &to).map(|_| ()))
                .map_err(|e| io("cannot restore", &from, e))?;
            self.restored.insert(f.name.clone(), f.shared.clone());
        }
        for entry in fs::read_dir(&chk).map_err(|e| io("cannot read", &chk, e))? {
            let entry = entry.map_err(|e| io("cannot read", &chk, e))?;
            let name = entry.file_name().to_string_lossy().to_string();
            if name != "_metadata.json" {
                fs::copy(entry.path(), path.join(&name))
                    .map_err(|e| io("cannot restore", &entry.path(), e))?;
            }
        }
        let db = Self::open_db(&path)?;
        for item in db.iterator(IteratorMode::Start) {
            let (k, v) = item.map_err(|e| Error::State(format!("job state database: {e}")))?;
            if k.len() < 4 || v.len() != 8 {
                return Err(Error::State(format!(
                    "corrupt state row in checkpoint {id}"
                )));
            }
            let table = u32::from_be_bytes([k[0], k[1], k[2], k[3]]) as usize;
            let count = i64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8]));
            image.push(table, &k[4..], count);
        }
        self.db = Some(db);
        if self.backend == StateBackendKind::Memory {
            self.db = None;
        }
        Ok(image)
    }

    /// Writes state changes into the working database (rocksdb; the WAL is off, a checkpoint
    /// makes them durable). A no-op for `memory`.
    ///
    /// # Errors
    /// [`Error::State`] on RocksDB errors.
    pub fn write_changes(&mut self, tables: Vec<TableChanges>) -> Result<()> {
        if self.backend != StateBackendKind::RocksDb {
            return Ok(());
        }
        if self.db.is_none() {
            self.reset_working()?;
        }
        let Some(db) = &self.db else {
            return Err(Error::State("job state database is not open".into()));
        };
        let mut batch = WriteBatch::default();
        for (i, t) in tables.iter().enumerate() {
            let prefix = table_prefix(i as u32);
            let (rows, full) = match t {
                TableChanges::Full(rows) => (rows, true),
                TableChanges::Delta(rows) => (rows, false),
            };
            if full {
                batch.delete_range(prefix, table_prefix(i as u32 + 1));
            }
            for (k, c) in rows {
                let mut key = Vec::with_capacity(4 + k.len());
                key.extend_from_slice(&prefix);
                key.extend_from_slice(k);
                if *c > 0 {
                    batch.put(&key, c.to_le_bytes());
                } else if !full {
                    batch.delete(&key);
                }
            }
        }
        let mut opts = WriteOptions::default();
        opts.disable_wal(true);
        db.write_opt(batch, &opts)
            .map_err(|e| Error::State(format!("job state database: {e}")))
    }

    /// The sync phase of checkpoint `id`: for rocksdb, flush and take a native RocksDB
    /// checkpoint (hard links) into a temporary directory; for memory, keep the full image.
    ///
    /// # Errors
    /// [`Error::State`] on RocksDB or I/O errors.
    pub fn snapshot(&mut self, id: u64, image: Option<StateImage>) -> Result<PendingSnapshot> {
        match self.backend {
            StateBackendKind::Memory => Ok(PendingSnapshot::Memory {
                image: image.unwrap_or_default(),
            }),
            StateBackendKind::RocksDb => {
                if self.db.is_none() {
                    self.reset_working()?;
                }
                let Some(db) = &self.db else {
                    return Err(Error::State("job state database is not open".into()));
                };
                db.flush()
                    .map_err(|e| Error::State(format!("job state database: {e}")))?;
                let tmp = self.dir.join(format!("chk-{id}.tmp"));
                if tmp.exists() {
                    let _ = fs::remove_dir_all(&tmp);
                }
                rocksdb::checkpoint::Checkpoint::new(db)
                    .and_then(|c| c.create_checkpoint(&tmp))
                    .map_err(|e| Error::State(format!("native checkpoint: {e}")))?;
                let mut shared_names = HashMap::new();
                for entry in fs::read_dir(&tmp).map_err(|e| io("cannot read", &tmp, e))? {
                    let entry = entry.map_err(|e| io("cannot read", &tmp, e))?;
                    let name = entry.file_name().to_string_lossy().to_string();
                    if name.ends_with(".sst") {
                        let shared = self
                            .restored
                            .get(&name)
                            .cloned()
                            .unwrap_or_else(|| format!("{}-{}", self.incarnation, name));
                        shared_names.insert(name, shared);
                    }
                }
                Ok(PendingSnapshot::RocksDb { tmp, shared_names })
            }
        }
    }

    /// The async phase, part one: moves the snapshot's files into place and counts the bytes.
    /// Returns the manifest to commit; the checkpoint is not completed until
    /// [`Self::commit`]. New shared files are referenced from now on.
    ///
    /// # Errors
    /// [`Error::State`] on I/O errors; nothing of the checkpoint is kept then.
    pub fn persist(
        &mut self,
        mut manifest: Manifest,
        pending: PendingSnapshot,
    ) -> Result<Manifest> {
        let chk = self.chk_dir(manifest.id);
        let result = self.persist_inner(&mut manifest, pending, &chk);
        if let Err(e) = result {
            self.release(&manifest);
            let _ = fs::remove_dir_all(&chk);
            return Err(e);
        }
        Ok(manifest)
    }

    fn persist_inner(
        &mut self,
        manifest: &mut Manifest,
        pending: PendingSnapshot,
        chk: &Path,
    ) -> Result<()> {
        match pending {
            PendingSnapshot::Memory { image } => {
                fs::create_dir_all(chk).map_err(|e| io("cannot create", chk, e))?;
                let bytes = encode_image(&image);
                let path = chk.join("state.bin");
                write_synced(&path, &bytes)?;
                manifest.backend = "memory".into();
                manifest.state_bytes = bytes.len() as u64;
                manifest.persisted_bytes = bytes.len() as u64;
            }
            PendingSnapshot::RocksDb { tmp, shared_names } => {
                manifest.backend = "rocksdb".into();
                let shared = self.shared_dir();
                let mut small = 0u64;
                let mut entries: Vec<_> = fs::read_dir(&tmp)
                    .map_err(|e| io("cannot read", &tmp, e))?
                    .filter_map(|e| e.ok())
                    .collect();
                entries.sort_by_key(|e| e.file_name());
                for entry in entries {
                    let name = entry.file_name().to_string_lossy().to_string();
                    let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
                    if !name.ends_with(".sst") {
                        small += size;
                        continue;
                    }
                    let Some(shared_name) = shared_names.get(&name).cloned() else {
                        return Err(Error::State(format!(
                            "unexpected file {name} in a snapshot"
                        )));
                    };
                    let target = shared.join(&shared_name);
                    let count = self.refs.entry(shared_name.clone()).or_default();
                    if *count == 0 && !target.exists() {
                        fs::rename(entry.path(), &target)
                            .map_err(|e| io("cannot move", &entry.path(), e))?;
                        manifest.persisted_bytes += size;
                    } else {
                        let _ = fs::remove_file(entry.path());
                    }
                    *count += 1;
                    manifest.state_bytes += size;
                    manifest.files.push(SharedFile {
                        name,
                        shared: shared_name,
                        size,
                    });
                }
                manifest.state_bytes += small;
                manifest.persisted_bytes += small;
                sync_dir(&shared);
                if chk.exists() {
                    let _ = fs::remove_dir_all(chk);
                }
                fs::rename(&tmp, chk).map_err(|e| io("cannot move", &tmp, e))?;
            }
        }
        Ok(())
    }

    /// The async phase, part two: writes `_metadata.json` atomically; the checkpoint is
    /// completed from then on.
    ///
    /// # Errors
    /// [`Error::State`] on I/O errors; the checkpoint is dropped then.
    pub fn commit(&mut self, manifest: Manifest) -> Result<()> {
        let chk = self.chk_dir(manifest.id);
        let bytes = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| Error::State(format!("checkpoint metadata: {e}")))?;
        let tmp = chk.join("_metadata.json.tmp");
        let result = write_synced(&tmp, &bytes).and_then(|()| {
            fs::rename(&tmp, chk.join("_metadata.json")).map_err(|e| io("cannot write", &tmp, e))
        });
        if let Err(e) = result {
            self.release(&manifest);
            let _ = fs::remove_dir_all(&chk);
            return Err(e);
        }
        sync_dir(&chk);
        sync_dir(&self.dir);
        self.completed.insert(manifest.id, manifest);
        if self.retained > 0 {
            let (retained, pins) = (self.retained, std::mem::take(&mut self.pins));
            self.retain_policy(retained, &pins);
        }
        Ok(())
    }

    /// Drops a persisted but uncommitted checkpoint (aborted or expired): its directory and
    /// every shared file no other checkpoint uses.
    pub fn discard(&mut self, manifest: &Manifest) {
        self.release(manifest);
        let _ = fs::remove_dir_all(self.chk_dir(manifest.id));
    }

    /// Removes a temporary snapshot that never reached [`Self::persist`].
    pub fn discard_pending(&mut self, pending: PendingSnapshot) {
        if let PendingSnapshot::RocksDb { tmp, .. } = pending {
            let _ = fs::remove_dir_all(tmp);
        }
    }

    fn release(&mut self, manifest: &Manifest) {
        for f in &manifest.files {
            if let Some(c) = self.refs.get_mut(&f.shared) {
                *c = c.saturating_sub(1);
                if *c == 0 {
                    self.refs.remove(&f.shared);
                    let path = self.shared_dir().join(&f.shared);
                    if let Err(e) = fs::remove_file(&path) {
                        warn!(path = %path.display(), error = %e, "cannot delete a shared file");
                    }
                }
            }
        }
    }

    /// Keeps the completed checkpoints in `keep` and deletes the others, with every shared
    /// file that no kept checkpoint references.
    pub fn retain(&mut self, keep: &BTreeSet<u64>) {
        let doomed: Vec<u64> = self
            .completed
            .keys()
            .filter(|id| !keep.contains(id))
            .copied()
            .collect();
        for id in doomed {
            if let Some(m) = self.completed.remove(&id) {
                // The metadata goes first: a crash half-way leaves an incomplete directory,
                // which the next open removes.
                let _ = fs::remove_file(self.chk_dir(id).join("_metadata.json"));
                self.discard(&m);
                debug!(checkpoint = id, "checkpoint dropped");
            }
        }
    }

    /// Retention: keeps the newest `retained` completed checkpoints and, for each epoch in
    /// `bounds` (checkpoints kept by downstream views), the newest checkpoint at or before it,
    /// so that a view over this one can be recovered consistently. Returns the kept epochs.
    pub fn retain_policy(&mut self, retained: usize, bounds: &[u64]) -> Vec<u64> {
        self.retained = retained;
        self.pins = bounds.to_vec();
        let mut keep: BTreeSet<u64> = self
            .completed
            .keys()
            .rev()
            .take(retained)
            .copied()
            .collect();
        for b in bounds {
            if let Some(m) = self.completed.values().rev().find(|m| m.epoch <= *b) {
                keep.insert(m.id);
            }
        }
        self.retain(&keep);
        self.completed.values().map(|m| m.epoch).collect()
    }

    /// Deletes every checkpoint and the working database (the view was dropped).
    pub fn destroy(&mut self) {
        self.completed.clear();
        self.refs.clear();
        self.db = None;
        let _ = fs::remove_dir_all(&self.dir);
        let _ = fs::remove_dir_all(&self.work_dir);
    }

    /// Names of the files in `shared/` (for tests and diagnostics).
    ///
    /// # Errors
    /// [`Error::State`] on I/O errors.
    pub fn shared_files(&self) -> Result<Vec<String>> {
        let shared = self.shared_dir();
        let mut out = Vec::new();
        for entry in fs::read_dir(&shared).map_err(|e| io("cannot read", &shared, e))? {
            let entry = entry.map_err(|e| io("cannot read", &shared, e))?;
            out.push(entry.file_name().to_string_lossy().to_string());
        }
        out.sort();
        Ok(out)
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = fs::File::create(path).map_err(|e| io("cannot create", path, e))?;
    f.write_all(bytes)
        .map_err(|e| io("cannot write", path, e))?;
    f.sync_all().map_err(|e| io("cannot sync", path, e))
}

fn encode_image(image: &StateImage) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, t) in image.tables.iter().enumerate() {
        for (k, c) in t {
            out.extend_from_slice(&(i as u32).to_le_bytes());
            out.extend_from_slice(&(k.len() as u32).to_le_bytes());
            out.extend_from_slice(k);
            out.extend_from_slice(&c.to_le_bytes());
        }
    }
    out
}

fn decode_image(mut bytes: &[u8], image: &mut StateImage) -> Result<()> {
    let corrupt = || Error::State("corrupt state.bin in a memory checkpoint".into());
    let take = |b: &mut &[u8], n: usize| -> Result<Vec<u8>> {
        if b.len() < n {
            return Err(corrupt());
        }
        let (head, tail) = b.split_at(n);
        *b = tail;
        Ok(head.to_vec())
    };
    while !bytes.is_empty() {
        let t = u32::from_le_bytes(take(&mut bytes, 4)?.try_into().map_err(|_| corrupt())?);
        let n = u32::from_le_bytes(take(&mut bytes, 4)?.try_into().map_err(|_| corrupt())?);
        let key = take(&mut bytes, n as usize)?;
        let c = i64::from_le_bytes(take(&mut bytes, 8)?.try_into().map_err(|_| corrupt())?);
        image.push(t as usize, &key, c);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize, offset: usize) -> Vec<(Box<[u8]>, i64)> {
        (0..n)
            .map(|i| {
                let k = format!("key-{:08}", i + offset)
                    .into_bytes()
                    .into_boxed_slice();
                (k, 1)
            })
            .collect()
    }

    fn manifest(id: u64) -> Manifest {
        Manifest {
            id,
            epoch: id * 10,
            backend: String::new(),
            files: vec![],
            state_bytes: 0,
            persisted_bytes: 0,
            trigger_unix_ms: 0,
            end_unix_ms: 0,
            offsets: BTreeMap::new(),
            state_format: STATE_FORMAT,
        }
    }

    #[test]
    fn rocksdb_checkpoints_are_incremental_and_shared_files_counted() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = CheckpointStorage::open(
            dir.path().join("chk"),
            dir.path().join("work"),
            StateBackendKind::RocksDb,
        )
        .unwrap();
        s.reset_working().unwrap();
        s.write_changes(vec![TableChanges::Full(rows(50_000, 0))])
            .unwrap();
        let p = s.snapshot(1, None).unwrap();
        let m1 = s.persist(manifest(1), p).unwrap();
        s.commit(m1.clone()).unwrap();
        s.write_changes(vec![TableChanges::Delta(rows(10, 50_000))])
            .unwrap();
        let p = s.snapshot(2, None).unwrap();
        let m2 = s.persist(manifest(2), p).unwrap();
        s.commit(m2.clone()).unwrap();
        assert!(m2.persisted_bytes * 20 < m2.state_bytes, "{m2:?}");
        // Retaining only the newest keeps the first SST (still used) and drops chk-1.
        s.retain(&BTreeSet::from([2]));
        assert!(!dir.path().join("chk/chk-1").exists());
        for f in &m2.files {
            assert!(dir.path().join("chk/shared").join(&f.shared).exists());
        }
        let image = s.restore(2).unwrap();
        assert_eq!(image.rows(), 50_010);
    }

    #[test]
    fn memory_checkpoints_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = CheckpointStorage::open(
            dir.path().join("chk"),
            dir.path().join("work"),
            StateBackendKind::Memory,
        )
        .unwrap();
        let image = StateImage {
            tables: vec![rows(3, 0), vec![], rows(2, 7)],
        };
        let p = s.snapshot(1, Some(image)).unwrap();
        let m = s.persist(manifest(1), p).unwrap();
        s.commit(m).unwrap();
        let back = s.restore(1).unwrap();
        assert_eq!(back.tables[0].len(), 3);
        assert_eq!(back.tables[2].len(), 2);
    }

    #[test]
    fn checkpoints_of_another_state_format_are_discarded_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            CheckpointStorage::open(
                dir.path().join("chk"),
                dir.path().join("work"),
                StateBackendKind::Memory,
            )
            .unwrap()
        };
        let mut s = open();
        for id in [1, 2] {
            let image = StateImage {
                tables: vec![rows(3, 0)],
            };
            let p = s.snapshot(id, Some(image)).unwrap();
            let m = s.persist(manifest(id), p).unwrap();
            s.commit(m).unwrap();
        }
        drop(s);
        // Checkpoint 1 as an older version wrote it: no `state_format` field.
        let meta = dir.path().join("chk/chk-1/_metadata.json");
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
        json.as_object_mut().unwrap().remove("state_format");
        std::fs::write(&meta, serde_json::to_vec(&json).unwrap()).unwrap();
        let s = open();
        let ids: Vec<u64> = s.completed().map(|m| m.id).collect();
        assert_eq!(ids, vec![2]);
        assert!(!dir.path().join("chk/chk-1").exists());
    }
}

//! Checkpoint storage of one job, and where its live state database lives.
//!
//! ```text
//!  <data-dir>/jobs/<job>/db-<incarnation>/  the job's live state (a sibling instance of the
//!                                       state backend; WAL off: disposable, replaced on restore)
//!  <checkpoint-dir>/<job>/shared/       SST files, named <incarnation>-<file>, shared by
//!                                       checkpoints and counted by reference
//!  <checkpoint-dir>/<job>/chk-<id>/     MANIFEST, CURRENT, OPTIONS (rocksdb) or state.bin
//!                                       (memory), and _metadata.json, written last: a checkpoint
//!                                       is completed exactly when its _metadata.json exists
//! ```
//!
//! The job's state tables live in its own RocksDB instance (see
//! [`StateBackend::open_sibling`]): each under the key `[table id: u64 BE][row bytes]` with the
//! row's count (i64 LE) as value, the ids allocated in the job's state visiting order from 1.
//! With `rocksdb`, a checkpoint is a native RocksDB checkpoint of that live instance: its
//! memtables are flushed and its SST files hard-linked; only files not already in `shared/` are
//! new (Flink's incremental RocksDB checkpoints work the same way). Nothing is copied row by
//! row, and restoring links the files back and opens them. With `memory`, a checkpoint is a
//! full snapshot in `state.bin`: records of `[table u32][key length u32][key][count i64]`, LE.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tracing::{debug, info, warn};

use super::StateBackendKind;
use crate::error::{Error, Result};
use crate::state::StateBackend;
use crate::state::backend::{OpenMode, Reads};
use crate::state::files::{io, now_nanos, sync_dir};

/// What the sync phase of a checkpoint reads.
pub enum SnapshotSource {
    /// The job's live RocksDB instance: a native checkpoint of it.
    Live(Arc<StateBackend>),
    /// Every state table's rows (the `memory` backend, or state kept on the heap).
    Image(StateImage),
}

/// One state table of a job in a checkpoint: its name (see
/// [`crate::stream::Operator::visit_state`]), its table id in the job's RocksDB instance (0
/// for state on the heap) and its total count (rows with duplicates).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateTableEntry {
    /// The table's name, as `root/left:hash_join.left` (the view's rows: `view`).
    pub name: String,
    /// Its table id (key prefix) in the job's instance.
    pub id: u64,
    /// Its total count.
    pub rows: i64,
}

/// A restored checkpoint, ready for the job to take over.
pub enum Restored {
    /// A native checkpoint opened as the job's live state: each state table is found again by
    /// its name, under the id `tables` gives it.
    Live {
        /// The opened instance.
        backend: Arc<StateBackend>,
        /// The state tables.
        tables: Vec<StateTableEntry>,
    },
    /// Every state table's rows, to load into fresh state.
    Image(StateImage),
}

/// The rows of every state table of a job, as written by a `memory` checkpoint and loaded on
/// restore.
#[derive(Debug, Default)]
pub struct StateImage {
    /// Per state table: (row bytes, count).
    pub tables: Vec<Vec<(Box<[u8]>, i64)>>,
    /// The state tables' names, one per entry of `tables` (filled on restore from the
    /// manifest; a checkpoint stores them there).
    pub names: Vec<String>,
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
    /// The job's state tables: names, ids and total counts (a `memory` image's rows are
    /// in this order in `state.bin`).
    #[serde(default)]
    pub tables: Vec<StateTableEntry>,
}

/// The layout version of the operators' state tables in a checkpoint. A checkpoint of another
/// version cannot be restored (its rows are keyed differently) and is discarded at open: the
/// view is then rebuilt from its inputs. 1: join sides keyed by (join key, row); 2: an
/// aggregate keeps accumulator rows per group and value tables, not its input rows; 3: a
/// native checkpoint of the job's live instance, tables keyed by a u64 id; 4: state tables
/// found by name, not by visiting order.
pub const STATE_FORMAT: u32 = 4;

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

/// One job's checkpoints, and where its live state database lives.
pub struct CheckpointStorage {
    dir: PathBuf,
    work_dir: PathBuf,
    backend: StateBackendKind,
    /// Names the live database's directory and its new files in `shared/`.
    incarnation: String,
    /// Files of the live DB that came from `shared/` on restore: name to shared name.
    restored: HashMap<String, String>,
    /// Shared file to the number of completed (or committing) checkpoints using it.
    refs: HashMap<String, usize>,
    completed: BTreeMap<u64, Manifest>,
    /// Bumped whenever the live database is replaced (reset or restore): a snapshot taken
    /// before belongs to the old state and is not committed.
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

impl CheckpointStorage {
    /// Opens a job's checkpoint directory: loads completed checkpoints, deletes what an
    /// interrupted checkpoint left (directories without `_metadata.json`, unreferenced shared
    /// files). The live database is opened by [`Self::reset_working`] or [`Self::restore`].
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
                    // A damaged manifest costs this checkpoint, not the view (nor the
                    // server): recovery takes an older one, or rebuilds from the tables.
                    let m: Manifest = match serde_json::from_slice(&bytes) {
                        Ok(m) => m,
                        Err(e) => {
                            warn!(
                                path = %meta.display(),
                                error = %e,
                                "discarding a checkpoint whose manifest is damaged"
                            );
                            let _ = fs::remove_dir_all(entry.path());
                            continue;
                        }
                    };
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
        self.work_dir.join(format!("db-{}", self.incarnation))
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

    /// Starts from empty state: a fresh live database, a sibling of `root`.
    ///
    /// # Errors
    /// [`Error::State`] on I/O or RocksDB errors.
    pub fn reset_working(&mut self, root: &StateBackend) -> Result<Arc<StateBackend>> {
        self.generation += 1;
        self.restored.clear();
        self.incarnation = format!("{:x}", now_nanos());
        root.open_sibling(&self.db_dir(), OpenMode::Fresh, Reads::Scans)
    }

    /// Restores checkpoint `id`. A native checkpoint becomes the live database (hard links of
    /// its shared files, opened as a sibling of `root`); without `root` (state on the heap) its
    /// rows are read out. A memory checkpoint's rows are returned.
    ///
    /// # Errors
    /// [`Error::State`] when the checkpoint is missing or its files are unreadable.
    pub fn restore(&mut self, id: u64, root: Option<&StateBackend>) -> Result<Restored> {
        let manifest = self
            .completed
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::State(format!("checkpoint {id} is not available")))?;
        let chk = self.chk_dir(id);
        self.generation += 1;
        self.restored.clear();
        self.incarnation = format!("{:x}", now_nanos());
        if manifest.backend == "memory" {
            let path = chk.join("state.bin");
            let bytes = fs::read(&path).map_err(|e| io("cannot read", &path, e))?;
            let mut image = StateImage::default();
            decode_image(&bytes, &mut image)?;
            image.names = manifest.tables.iter().map(|t| t.name.clone()).collect();
            // Tables without rows end `state.bin` unseen.
            if image.tables.len() < image.names.len() {
                image.tables.resize_with(image.names.len(), Vec::new);
            }
            return Ok(Restored::Image(image));
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
        match root {
            Some(root) => Ok(Restored::Live {
                backend: root.open_sibling(&path, OpenMode::Existing, Reads::Scans)?,
                tables: manifest.tables.clone(),
            }),
            None => {
                // State on the heap: read the rows out of a temporary instance. Ids not in
                // the manifest hold derived state (indexes), rebuilt by the job.
                let index: HashMap<u64, usize> = manifest
                    .tables
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (t.id, i))
                    .collect();
                let reader = StateBackend::open_existing(&path, 64 << 20)?;
                let mut image = StateImage {
                    names: manifest.tables.iter().map(|t| t.name.clone()).collect(),
                    ..StateImage::default()
                };
                image.tables.resize_with(image.names.len(), Vec::new);
                reader.scan_all(&mut |table, key, count| {
                    if let Some(i) = index.get(&table) {
                        image.push(*i, key, count);
                    }
                    Ok(())
                })?;
                drop(reader);
                let _ = fs::remove_dir_all(&path);
                Ok(Restored::Image(image))
            }
        }
    }

    /// The sync phase of checkpoint `id`: a native RocksDB checkpoint of the live instance
    /// (flush and hard links) into a temporary directory, or the full image.
    ///
    /// # Errors
    /// [`Error::State`] on RocksDB or I/O errors.
    pub fn snapshot(&mut self, id: u64, source: SnapshotSource) -> Result<PendingSnapshot> {
        match source {
            SnapshotSource::Image(image) => Ok(PendingSnapshot::Memory { image }),
            SnapshotSource::Live(db) => {
                let tmp = self.dir.join(format!("chk-{id}.tmp"));
                if tmp.exists() {
                    let _ = fs::remove_dir_all(&tmp);
                }
                db.checkpoint(&tmp)?;
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

    /// Deletes the completed checkpoints whose state tables (by name) are not exactly
    /// `names`, the state tables of the job's plan, with every shared file only they use,
    /// as [`Self::open`] does for another [`STATE_FORMAT`]: such a checkpoint was written
    /// by another plan and cannot be restored. Returns the deleted ids, oldest first.
    pub fn discard_mismatched(&mut self, names: &BTreeSet<String>) -> Vec<u64> {
        let doomed: Vec<u64> = self
            .completed
            .values()
            .filter(|m| {
                m.tables.len() != names.len() || m.tables.iter().any(|t| !names.contains(&t.name))
            })
            .map(|m| m.id)
            .collect();
        for id in &doomed {
            if let Some(m) = self.completed.remove(id) {
                info!(
                    checkpoint = id,
                    "discarding a checkpoint whose state tables differ from the plan's"
                );
                let _ = fs::remove_file(self.chk_dir(*id).join("_metadata.json"));
                self.discard(&m);
            }
        }
        doomed
    }

    /// Deletes completed checkpoint `id`, which could not be restored (a file of it is
    /// missing or damaged): the next recovery takes an older checkpoint or rebuilds the view
    /// from its inputs. Shared files other checkpoints reference stay.
    pub fn discard_damaged(&mut self, id: u64) {
        if let Some(m) = self.completed.remove(&id) {
            let _ = fs::remove_file(self.chk_dir(id).join("_metadata.json"));
            self.discard(&m);
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

    /// Deletes every checkpoint (the view was dropped). The live database's directory goes
    /// when the job's instance is dropped.
    pub fn destroy(&mut self) {
        self.completed.clear();
        self.refs.clear();
        let _ = fs::remove_dir_all(&self.dir);
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
            tables: vec![],
        }
    }

    /// Writes `rows` into table 1 of `db` (as a state table with id 1 would hold them).
    fn put(db: &StateBackend, rows: &[(Box<[u8]>, i64)]) {
        let mut batch = rocksdb::WriteBatch::default();
        for (k, c) in rows {
            batch.put(
                crate::state::backend::stored_key(1, k),
                crate::state::backend::encode_count(*c),
            );
        }
        db.write(batch).unwrap();
    }

    #[test]
    fn rocksdb_checkpoints_are_incremental_and_shared_files_counted() {
        let dir = tempfile::tempdir().unwrap();
        let root = StateBackend::open(&dir.path().join("state"), 64 << 20).unwrap();
        let mut s = CheckpointStorage::open(
            dir.path().join("chk"),
            dir.path().join("work"),
            StateBackendKind::RocksDb,
        )
        .unwrap();
        let live = s.reset_working(&root).unwrap();
        put(&live, &rows(50_000, 0));
        let p = s.snapshot(1, SnapshotSource::Live(live.clone())).unwrap();
        let m1 = s.persist(manifest(1), p).unwrap();
        s.commit(m1.clone()).unwrap();
        put(&live, &rows(10, 50_000));
        let p = s.snapshot(2, SnapshotSource::Live(live.clone())).unwrap();
        let mut m2 = manifest(2);
        m2.tables = vec![StateTableEntry {
            name: "view".into(),
            id: 1,
            rows: 50_010,
        }];
        let m2 = s.persist(m2, p).unwrap();
        s.commit(m2.clone()).unwrap();
        assert!(m2.persisted_bytes * 20 < m2.state_bytes, "{m2:?}");
        // Retaining only the newest keeps the first SST (still used) and drops chk-1.
        s.retain(&BTreeSet::from([2]));
        assert!(!dir.path().join("chk/chk-1").exists());
        for f in &m2.files {
            assert!(dir.path().join("chk/shared").join(&f.shared).exists());
        }
        // Rows written after the checkpoint are not in it.
        put(&live, &rows(5, 90_000));
        let old_dir = live.dir().to_path_buf();
        drop(live);
        assert!(!old_dir.exists(), "a replaced live database is removed");
        let Restored::Live { backend, .. } = s.restore(2, Some(&root)).unwrap() else {
            panic!("a native checkpoint restores as a live database");
        };
        let mut n = 0;
        backend
            .scan_all(&mut |table, _, c| {
                assert_eq!((table, c), (1, 1));
                n += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(n, 50_010);
        // The same checkpoint read out as rows, for state on the heap.
        let Restored::Image(image) = s.restore(2, None).unwrap() else {
            panic!("without a root the rows are read out");
        };
        assert_eq!(image.tables.len(), 1);
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
            names: vec![],
        };
        let p = s.snapshot(1, SnapshotSource::Image(image)).unwrap();
        let m = s.persist(manifest(1), p).unwrap();
        s.commit(m).unwrap();
        let Restored::Image(back) = s.restore(1, None).unwrap() else {
            panic!("a memory checkpoint restores as rows");
        };
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
                names: vec![],
            };
            let p = s.snapshot(id, SnapshotSource::Image(image)).unwrap();
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

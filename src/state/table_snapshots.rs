//! Native snapshots of the tables' state: every table's rows (and its secondary indexes) live
//! in one RocksDB instance of their own, and a snapshot is a native RocksDB checkpoint of it, so
//! a snapshot costs a memtable flush and one hard link per file, not a copy of the rows changed.
//!
//! ```text
//!  <data-dir>/tables/live-<incarnation>/   the tables' live instance (disposable)
//!  <data-dir>/tables/snap-<n>/             a snapshot: RocksDB checkpoint files, then
//!                                          positions.json, written last
//! ```
//!
//! A snapshot records, per table, the newest changelog sequence number it holds; restart opens
//! the newest complete snapshot as the live instance and replays each table's changelog after
//! its position. Only the newest snapshot is kept: a new one is complete (its `positions.json`
//! synced, its directory renamed into place) before the older ones are deleted.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use tracing::debug;

use crate::error::{Error, Result};
use crate::state::StateBackend;
use crate::state::backend::{OpenMode, Reads};
use crate::state::files::{io, now_nanos, sync_dir};

/// Where a snapshot stands in one table's changelog, and what the table held then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotPosition {
    /// The newest changelog sequence number the snapshot holds.
    pub seq: u64,
    /// The epoch of that entry.
    pub epoch: u64,
    /// The table's rows (duplicates counted) at that point.
    pub rows: i64,
    /// For a table with a watermark, the largest event time among those rows, in
    /// nanoseconds since the Unix epoch (absent otherwise, and in older snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_event_time: Option<i64>,
}

/// Each table's position in a snapshot, by the table's relation id.
pub type Positions = BTreeMap<u64, SnapshotPosition>;

#[derive(Serialize, Deserialize)]
struct PositionsFile {
    tables: Positions,
}

/// The snapshots and the live instance of the tables (see the module docs).
#[derive(Debug)]
pub struct TableSnapshots {
    dir: PathBuf,
    /// The number of the next snapshot.
    next: AtomicU64,
}

const POSITIONS: &str = "positions.json";

impl TableSnapshots {
    /// Opens the tables' directory, creating it, and removes what a crash may have left: live
    /// instances of an earlier run and snapshots that were not completed.
    ///
    /// # Errors
    /// [`Error::State`] on I/O errors, and for a snapshot directory without its positions
    /// (damage no crash leaves).
    pub fn open(dir: PathBuf) -> Result<Self> {
        fs::create_dir_all(&dir).map_err(|e| io("cannot create", &dir, e))?;
        for entry in fs::read_dir(&dir).map_err(|e| io("cannot read", &dir, e))? {
            let entry = entry.map_err(|e| io("cannot read", &dir, e))?;
            let name = entry.file_name().to_string_lossy().to_string();
            let snapshot = name.starts_with("snap-") && !name.ends_with(".tmp");
            if snapshot && !entry.path().join(POSITIONS).exists() {
                // A snapshot is renamed into place only once its positions are synced, so no
                // crash leaves one without them: the directory was damaged. Removing it
                // would start every table empty (the changelog before it is gone).
                return Err(Error::State(format!(
                    "table snapshot {} has no {POSITIONS}: the data directory is damaged \
                     (restore it from a backup); Weir does not start without it, which would \
                     lose the tables' rows",
                    entry.path().display()
                )));
            }
            let stale = !snapshot;
            if stale {
                debug!(path = %entry.path().display(), "removing a stale table directory");
                let path = entry.path();
                let removed = if path.is_dir() {
                    fs::remove_dir_all(&path)
                } else {
                    fs::remove_file(&path)
                };
                removed.map_err(|e| io("cannot remove", &path, e))?;
            }
        }
        let snapshots = TableSnapshots {
            dir,
            next: AtomicU64::new(1),
        };
        let next = snapshots
            .complete()?
            .last()
            .map(|(n, _)| n + 1)
            .unwrap_or(1);
        snapshots.next.store(next, Ordering::Relaxed);
        Ok(snapshots)
    }

    fn snap_dir(&self, n: u64) -> PathBuf {
        self.dir.join(format!("snap-{n}"))
    }

    /// The numbers of the complete snapshots, oldest first.
    fn complete(&self) -> Result<Vec<(u64, PathBuf)>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(|e| io("cannot read", &self.dir, e))? {
            let entry = entry.map_err(|e| io("cannot read", &self.dir, e))?;
            let name = entry.file_name().to_string_lossy().to_string();
            let Some(n) = name
                .strip_prefix("snap-")
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if entry.path().join(POSITIONS).exists() {
                out.push((n, entry.path()));
            }
        }
        out.sort();
        Ok(out)
    }

    /// The tables' live instance, a sibling of `root`: the newest complete snapshot opened
    /// (its files hard-linked into a fresh directory) with each table's position, or an
    /// empty instance and no positions. Costs one link per file, not a read of the rows.
    ///
    /// # Errors
    /// [`Error::State`] on I/O or RocksDB errors, or an unreadable `positions.json`.
    pub fn live(&self, root: &StateBackend) -> Result<(Arc<StateBackend>, Positions)> {
        let live = self.dir.join(format!("live-{:x}", now_nanos()));
        let Some((_, snap)) = self.complete()?.pop() else {
            return Ok((
                root.open_sibling(&live, OpenMode::Fresh, Reads::Lookups)?,
                Positions::new(),
            ));
        };
        let path = snap.join(POSITIONS);
        let bytes = fs::read(&path).map_err(|e| io("cannot read", &path, e))?;
        let positions: PositionsFile = serde_json::from_slice(&bytes)
            .map_err(|e| Error::State(format!("corrupt {}: {e}", path.display())))?;
        fs::create_dir_all(&live).map_err(|e| io("cannot create", &live, e))?;
        for entry in fs::read_dir(&snap).map_err(|e| io("cannot read", &snap, e))? {
            let entry = entry.map_err(|e| io("cannot read", &snap, e))?;
            let name = entry.file_name().to_string_lossy().to_string();
            if name == POSITIONS {
                continue;
            }
            let to = live.join(&name);
            if name.ends_with(".sst") {
                fs::hard_link(entry.path(), &to)
                    .or_else(|_| fs::copy(entry.path(), &to).map(|_| ()))
                    .map_err(|e| io("cannot restore", &entry.path(), e))?;
            } else {
                // MANIFEST, CURRENT, OPTIONS: the live instance rewrites them.
                fs::copy(entry.path(), &to).map_err(|e| io("cannot restore", &entry.path(), e))?;
            }
        }
        Ok((
            root.open_sibling(&live, OpenMode::Existing, Reads::Lookups)?,
            positions.tables,
        ))
    }

    /// Takes a snapshot of `live`, which holds every table at `positions`, and once it is
    /// durable deletes the older ones. The caller keeps writers out until it returns. Cost: a
    /// flush of `live`'s memtables and one hard link per file.
    ///
    /// # Errors
    /// [`Error::State`] on I/O or RocksDB errors; the previous snapshot is kept then.
    pub fn take(&self, live: &StateBackend, positions: &Positions) -> Result<()> {
        let older = self.complete()?;
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let target = self.snap_dir(n);
        let tmp = target.with_extension("tmp");
        if tmp.exists() {
            fs::remove_dir_all(&tmp).map_err(|e| io("cannot remove", &tmp, e))?;
        }
        live.checkpoint(&tmp)?;
        let bytes = serde_json::to_vec(&PositionsFile {
            tables: positions.clone(),
        })
        .map_err(|e| Error::State(format!("table snapshot positions: {e}")))?;
        let path = tmp.join(POSITIONS);
        let mut f = fs::File::create(&path).map_err(|e| io("cannot create", &path, e))?;
        f.write_all(&bytes)
            .and_then(|()| f.sync_all())
            .map_err(|e| io("cannot write", &path, e))?;
        sync_dir(&tmp);
        fs::rename(&tmp, &target).map_err(|e| io("cannot move", &tmp, e))?;
        sync_dir(&self.dir);
        for (_, dir) in older {
            let _ = fs::remove_dir_all(&dir);
        }
        Ok(())
    }

    /// Bytes of the newest snapshot's files (for tests and benches).
    ///
    /// # Errors
    /// [`Error::State`] on I/O errors.
    pub fn bytes(&self) -> Result<u64> {
        let Some((_, snap)) = self.complete()?.pop() else {
            return Ok(0);
        };
        let mut total = 0;
        for entry in fs::read_dir(&snap).map_err(|e| io("cannot read", &snap, e))? {
            let entry = entry.map_err(|e| io("cannot read", &snap, e))?;
            total += entry.metadata().map(|m| m.len()).unwrap_or(0);
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(db: &StateBackend, from: u32, n: u32) {
        let mut batch = rocksdb::WriteBatch::default();
        for i in from..from + n {
            batch.put(
                crate::state::backend::stored_key(1, &i.to_be_bytes()),
                crate::state::backend::encode_count(1),
            );
        }
        db.write(batch).unwrap();
    }

    fn count(db: &StateBackend) -> usize {
        let mut n = 0;
        db.scan_all(&mut |_, _, _| {
            n += 1;
            Ok(())
        })
        .unwrap();
        n
    }

    #[test]
    fn a_snapshot_reopens_as_the_live_instance_and_replaces_older_ones() {
        let dir = tempfile::tempdir().unwrap();
        let root = StateBackend::open(&dir.path().join("state"), 64 << 20).unwrap();
        let snaps = TableSnapshots::open(dir.path().join("t")).unwrap();
        let (live, positions) = snaps.live(&root).unwrap();
        assert!(positions.is_empty());
        put(&live, 0, 1000);
        let at = |seq, epoch, rows| {
            Positions::from([(
                7,
                SnapshotPosition {
                    seq,
                    epoch,
                    rows,
                    max_event_time: None,
                },
            )])
        };
        let p1 = at(3, 2, 1000);
        snaps.take(&live, &p1).unwrap();
        put(&live, 1000, 10);
        let p2 = at(4, 3, 1010);
        snaps.take(&live, &p2).unwrap();
        // Written after the snapshot: not in it.
        put(&live, 5000, 7);
        drop(live);
        assert_eq!(
            snaps.complete().unwrap().len(),
            1,
            "older snapshots are deleted"
        );
        // A snapshot directory without its positions is damage no crash leaves: open
        // refuses it rather than start the tables empty.
        fs::create_dir_all(dir.path().join("t/snap-8")).unwrap();
        let err = TableSnapshots::open(dir.path().join("t")).unwrap_err();
        assert!(err.to_string().contains("has no positions.json"), "{err}");
        fs::remove_dir_all(dir.path().join("t/snap-8")).unwrap();
        // An interrupted snapshot is ignored and removed at open.
        fs::create_dir_all(dir.path().join("t/snap-9.tmp")).unwrap();
        let snaps = TableSnapshots::open(dir.path().join("t")).unwrap();
        assert!(!dir.path().join("t/snap-9.tmp").exists());
        let (live, positions) = snaps.live(&root).unwrap();
        assert_eq!(positions, p2);
        assert_eq!(count(&live), 1010);
        // The live instance changes without touching the snapshot.
        put(&live, 2000, 5);
        drop(live);
        let (live, _) = snaps.live(&root).unwrap();
        assert_eq!(count(&live), 1010);
        assert!(snaps.bytes().unwrap() > 0);
        // The next snapshot is numbered after the ones found at open.
        snaps.take(&live, &p2).unwrap();
        assert_eq!(snaps.complete().unwrap().last().unwrap().0, 3);
    }
}

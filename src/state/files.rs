//! Small file-system helpers shared by table snapshots and checkpoint storage.

use std::fs;
use std::path::Path;

use crate::error::Error;

/// An I/O error on `path` as [`Error::State`], with what was being done.
pub(crate) fn io(context: &str, path: &Path, e: std::io::Error) -> Error {
    Error::State(format!("{context} {}: {e}", path.display()))
}

/// Nanoseconds since the Unix epoch: a name no earlier run of the process has used.
pub(crate) fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Syncs a directory, so that renames and new entries in it survive a crash (best effort).
pub(crate) fn sync_dir(path: &Path) {
    if let Ok(f) = fs::File::open(path) {
        let _ = f.sync_all();
    }
}

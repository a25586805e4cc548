//! State: the durable store under `--data-dir` and the ordered state tables of tables, views
//! and operators, kept in the state backend (RocksDB, memory bounded by `--memory-limit`).
//!
//! ```text
//!   tables' changelogs ──► Store: RocksDB (WAL on, synced)   key: c/<table id>/<seq>
//!   catalog            ──► Store                             key: m/catalog
//!   a table's rows and ──► its own StateBackend instance under <data dir>/tables/<id>/,
//!   its indexes             snapshotted natively (RocksDB checkpoints, see table_snapshots)
//!   a view's rows and  ──► its job's own StateBackend instance under <data dir>/jobs/<id>/,
//!   operator state          checkpointed natively (see crate::checkpoint)
//!   (all instances: no WAL, key <state table id><row key> -> count, one memory budget;
//!    replaced at start by the newest snapshot or checkpoint, or rebuilt)
//! ```
pub mod backend;
pub(crate) mod files;
pub mod index;
pub mod store;
pub mod table;
pub mod table_snapshots;

pub use backend::StateBackend;
pub use store::Store;
pub use table::{IndexedSnapshot, KeyRange, StateSnapshot, StateTable};
pub use table_snapshots::{Positions, SnapshotPosition, TableSnapshots};

//! State: the durable store under `--data-dir` and the ordered state tables of tables, views
//! and operators, kept in the state backend (RocksDB, memory bounded by `--memory-limit`).
//!
//! ```text
//!   tables' changelogs ──► Store: RocksDB (WAL on, synced)   key: c/<table id>/<seq>
//!   catalog            ──► Store                             key: m/catalog
//!   table snapshots    ──► Store                             key: s/<table id>/<row key>
//!   tables, indexes,   ──► StateTable in the StateBackend: RocksDB under <data dir>/state,
//!   views, operators'       no WAL, key <state table id><row key> -> count; emptied at start
//!   input rows              and refilled from snapshots, changelogs and checkpoints
//! ```
pub mod backend;
pub mod index;
pub mod store;
pub mod table;

pub use backend::StateBackend;
pub use store::Store;
pub use table::{IndexedSnapshot, KeyRange, StateSnapshot, StateTable};

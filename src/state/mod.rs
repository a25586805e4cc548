//! State: the durable store under `--data-dir` and the ordered in-memory state tables of
//! tables, views and operators (persistent B+-trees: a reader's snapshot costs O(1)).
//!
//! ```text
//!   tables' changelogs ──► RocksDB (WAL on, synced writes)   key: c/<table id>/<seq>
//!   catalog            ──► RocksDB                           key: m/catalog
//!   operator state     ──► StateTable (memory backend; rebuilt by replay on restart)
//! ```

pub mod index;
pub mod store;
pub mod table;

pub use store::Store;
pub use table::{IndexedSnapshot, KeyRange, StateSnapshot, StateTable};

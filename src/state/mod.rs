//! State: the durable store under `--data-dir` and the in-memory state tables of operators.
//!
//! ```text
//!   tables' changelogs ──► RocksDB (WAL on, synced writes)   key: c/<table id>/<seq>
//!   catalog            ──► RocksDB                           key: m/catalog
//!   operator state     ──► StateTable (memory backend; rebuilt by replay on restart)
//! ```

pub mod store;
pub mod table;

pub use store::Store;
pub use table::StateTable;

//! The bottom of the crate: the types every layer shares (epochs, relation ids, change
//! batches, schema helpers). It depends on nothing in the crate but [`crate::error`].

pub mod change;
pub mod exact_sum;
pub mod schema;

pub use change::ChangeBatch;

/// A monotonically increasing epoch number; epoch *e* names the slice of input acknowledged
/// before the barrier that closes *e*. An opaque ordinal, not a timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Epoch(pub u64);

/// Identifier of a relation (table or materialized view) in the catalog.
pub type RelationId = u64;

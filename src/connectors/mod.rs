//! Sources of changes for the dataflow, behind one trait: a [`Source`] yields a relation's
//! change batches between two of its offsets, in order, so that a job can resume a source
//! exactly where its checkpoint left it (Flink's "replayable source" contract: a checkpoint
//! records each source's offset, and recovery reads from there).
//!
//! A table's changelog is the first source ([`changelog::ChangelogSource`]); generators and
//! external systems implement the same trait, each with its own offset type.

pub mod changelog;
pub mod nexmark;

use std::fmt::Debug;

use crate::common::{ChangeBatch, RelationId};
use crate::error::Result;

/// A position in a source's stream. Offsets of one source are totally ordered; a source
/// resumes *after* an offset, so a checkpoint that records offset `o` holds every change up
/// to and including `o`. Stored in checkpoint manifests as a `u64`.
pub trait Offset: Copy + Ord + Debug + Send + Sync {
    /// The offset before any change.
    const START: Self;

    /// The offset as stored in a checkpoint manifest.
    fn to_stored(self) -> u64;

    /// The offset a manifest stored.
    fn from_stored(stored: u64) -> Self;
}

/// A replayable source of one relation's changes.
pub trait Source {
    /// The source's position type.
    type Offset: Offset;

    /// The relation whose changes the source yields.
    fn relation(&self) -> RelationId;

    /// Calls `f` with every change after `after` up to and including `upto`, in offset order,
    /// each with the offset it belongs to. Reading the same range twice yields the same
    /// changes (as long as the range is retained).
    ///
    /// # Errors
    /// Errors reading the source (storage failures, corrupt entries); errors of `f`.
    fn read(
        &self,
        after: Self::Offset,
        upto: Self::Offset,
        f: &mut dyn FnMut(Self::Offset, ChangeBatch) -> Result<()>,
    ) -> Result<()>;

    /// Every change after `after` up to `upto`, collected (see [`Source::read`]).
    ///
    /// # Errors
    /// As [`Source::read`].
    fn read_all(&self, after: Self::Offset, upto: Self::Offset) -> Result<Vec<ChangeBatch>> {
        let mut out = Vec::new();
        self.read(after, upto, &mut |_, change| {
            out.push(change);
            Ok(())
        })?;
        Ok(out)
    }
}

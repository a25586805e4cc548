//! The dataflow runtime: change batches, epochs and operators, one job per materialized view.
//!
//! ```text
//!  table changelogs ──(epoch e's change batches)──► job A: scan ─► filter ─► hash_agg ─► materialize
//!                                                   job B: scan(A) ─► project ─► materialize
//!  barrier clock: closes epoch e at every table at once; each job then runs epoch e through its
//!  operator tree (all of e's input first, then the barrier: every operator flushes its state),
//!  in creation order, so a view over a view sees its upstream's output of the same epoch.
//! ```
//!
//! Inside a job the operator tree is evaluated one epoch at a time: `process` pulls the epoch's
//! changes from its inputs, applies them to its state tables and returns its output changes,
//! which is the barrier-aligned execution of Flink's model (an operator sees every input's
//! records of epoch *e* before the barrier of *e*) without channels inside a job.

pub mod job;
pub mod ops;
pub mod plan;
#[cfg(test)]
pub(crate) mod testing;

use std::collections::HashMap;

use arrow::datatypes::SchemaRef;

use crate::common::{ChangeBatch, RelationId};
use crate::error::Result;
use crate::state::StateTable;

/// The input of one epoch for a job: each source relation's changes in that epoch.
#[derive(Debug, Default)]
pub struct EpochInput {
    /// Changes per relation, in the relation's full schema.
    pub changes: HashMap<RelationId, Vec<ChangeBatch>>,
}

impl EpochInput {
    /// The changes of `relation` in this epoch (empty when none).
    pub fn of(&self, relation: RelationId) -> &[ChangeBatch] {
        self.changes
            .get(&relation)
            .map(|v| v.as_slice())
            .unwrap_or(&[])
    }
}

/// A streaming operator: consumes its inputs' changes of one epoch, updates its state and
/// returns its own output changes for the epoch (what it emits before forwarding the barrier).
pub trait Operator: Send {
    /// The output schema (every field nullable).
    fn schema(&self) -> SchemaRef;

    /// Processes one epoch: the changes of its inputs, then the barrier.
    ///
    /// # Errors
    /// Expression evaluation errors (division by zero, bad casts) and state errors; after an
    /// error the operator's state is undefined and the job rebuilds it.
    fn process(&mut self, input: &EpochInput) -> Result<Vec<ChangeBatch>>;

    /// Appends this operator and its inputs to an EXPLAIN listing, indented by `depth`.
    fn explain(&self, depth: usize, out: &mut Vec<String>);

    /// Visits the state tables of this operator, then of its inputs (pre-order). The order is
    /// the same for every build of the same plan; checkpoints number state tables by it.
    ///
    /// # Errors
    /// Whatever `f` returns.
    fn visit_state(&mut self, f: &mut dyn FnMut(&mut StateTable) -> Result<()>) -> Result<()>;

    /// Rebuilds the operator's working structures from its state tables after they were
    /// loaded from a checkpoint, inputs first; emits nothing.
    ///
    /// # Errors
    /// Evaluation errors while re-deriving keys.
    fn restore(&mut self) -> Result<()>;
}

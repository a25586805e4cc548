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
pub mod watermark;

use std::collections::HashMap;

use arrow::datatypes::SchemaRef;
use datafusion::common::ScalarValue;

use crate::common::{ChangeBatch, Epoch, RelationId};
use crate::error::Result;
use crate::state::StateTable;

/// What every operator of a job sees while it processes one epoch: the epoch, the wall-clock
/// time it closed at (what `now()` is for temporal filters), and each source relation's
/// changes in it (read by the scans).
#[derive(Debug, Default)]
pub struct EpochContext {
    /// The epoch being processed (`Epoch(0)` for a backfill, which reads contents rather than
    /// an epoch's changes).
    pub epoch: Epoch,
    /// Wall-clock time of the epoch, in nanoseconds since the Unix epoch (UTC).
    pub now_ns: i64,
    /// Changes per relation, in the relation's full schema.
    pub changes: HashMap<RelationId, Vec<ChangeBatch>>,
    /// Watermarks per relation as of the end of this epoch (a table's from its watermark
    /// clause, a view's from its job's output); a relation absent here has not advanced.
    /// Only the last piece of an epoch split into batches carries them.
    pub watermarks: HashMap<RelationId, Watermarks>,
}

/// Watermarks of a relation or an operator's output: (column index, watermark) pairs, the
/// watermark a value of the column's type. Every row still to come has a value `>=` the
/// watermark in that column (Flink's and RisingWave's definition); a column not listed has
/// none.
pub type Watermarks = Vec<(usize, ScalarValue)>;

/// The watermark of `column` in `w`, if any.
pub fn watermark_of(w: &Watermarks, column: usize) -> Option<&ScalarValue> {
    w.iter().find(|(c, _)| *c == column).map(|(_, v)| v)
}

/// Takes `newer` into `into`: per column the larger watermark (a watermark never moves
/// back), columns new to `into` added.
pub fn advance_watermarks(into: &mut Watermarks, newer: Watermarks) {
    for (column, value) in newer {
        match into.iter_mut().find(|(c, _)| *c == column) {
            Some((_, old)) if *old < value => *old = value,
            Some(_) => {}
            None => into.push((column, value)),
        }
    }
}

/// The wall-clock time now, in nanoseconds since the Unix epoch (UTC).
pub fn wall_clock_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl EpochContext {
    /// The context of `epoch` at the current wall-clock time, with no changes yet.
    pub fn new(epoch: Epoch) -> Self {
        EpochContext {
            epoch,
            now_ns: wall_clock_ns(),
            changes: HashMap::new(),
            watermarks: HashMap::new(),
        }
    }

    /// The changes of `relation` in this epoch (empty when none).
    pub fn of(&self, relation: RelationId) -> &[ChangeBatch] {
        self.changes
            .get(&relation)
            .map(|v| v.as_slice())
            .unwrap_or(&[])
    }
}

/// A visitor of named state tables: `f(name, table)` (see [`Operator::visit_state`]).
pub type StateVisitor<'a> = dyn FnMut(&str, &mut StateTable) -> Result<()> + 'a;

/// The name of state table `table` of the operator at `path` (see [`Operator::visit_state`]).
pub fn state_name(path: &str, table: &str) -> String {
    format!("{path}:{table}")
}

/// The path of an operator's input along `edge` (`input`, `left`, `right`, or an index).
pub fn input_path(path: &str, edge: &str) -> String {
    format!("{path}/{edge}")
}

/// A streaming operator: consumes its inputs' changes of one epoch, updates its state and
/// returns its own output changes for the epoch (what it emits before forwarding the barrier).
pub trait Operator: Send {
    /// The output schema (every field nullable).
    fn schema(&self) -> SchemaRef;

    /// Processes one epoch, `ctx`: the changes of its inputs, then the barrier.
    ///
    /// # Errors
    /// Expression evaluation errors (division by zero, bad casts) and state errors; after an
    /// error the operator's state is undefined and the job rebuilds it.
    fn process(&mut self, ctx: &EpochContext) -> Result<Vec<ChangeBatch>>;

    /// Appends this operator and its inputs to an EXPLAIN listing, indented by `depth`.
    fn explain(&self, depth: usize, out: &mut Vec<String>);

    /// Visits the state tables of this operator, then of its inputs, each with its name:
    /// `path` (this operator's place in the tree: `root`, then `/input`, `/left`, `/right` or
    /// `/<i>` per edge from the root) and the table's own name after a colon, as
    /// `root/left:hash_join.left`. Checkpoints find each table again by its name.
    ///
    /// # Errors
    /// Whatever `f` returns.
    fn visit_state(&mut self, path: &str, f: &mut StateVisitor<'_>) -> Result<()>;

    /// The watermarks of the operator's output as of the end of the epoch `ctx` (after
    /// [`Operator::process`] of it): what its inputs' watermarks say of its output columns.
    /// None by default (an operator that cannot say which values are still to come).
    fn watermarks(&self, _ctx: &EpochContext) -> Watermarks {
        Watermarks::new()
    }

    /// Rebuilds the operator's working structures from its state tables after they were
    /// loaded from a checkpoint, inputs first; emits nothing.
    ///
    /// # Errors
    /// Evaluation errors while re-deriving keys.
    fn restore(&mut self) -> Result<()>;
}

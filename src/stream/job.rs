//! A job: the running dataflow of one materialized view and its current contents.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::logical_expr::LogicalPlan;

use crate::error::{Error, Result};
use crate::state::StateTable;
use crate::stream::change::ChangeBatch;
use crate::stream::{EpochInput, Operator, RelationId, plan};

/// Whether a job is maintaining its view.
#[derive(Debug, Clone)]
pub enum JobStatus {
    /// Maintaining the view.
    Running,
    /// An epoch failed (for example a division by zero on one row). The view reports the error
    /// until a later epoch rebuilds it successfully from its inputs' current contents.
    Failed {
        /// SQLSTATE of the error.
        code: &'static str,
        /// The error message.
        message: String,
    },
}

/// The dataflow of one materialized view: its operator tree and materialized contents.
pub struct Job {
    /// The view's relation id.
    pub view: RelationId,
    /// The view's name.
    pub name: String,
    /// The optimized logical plan (kept to rebuild the operator tree).
    plan: LogicalPlan,
    root: Box<dyn Operator>,
    /// The relations read.
    pub sources: BTreeSet<RelationId>,
    /// The view's schema (every field nullable).
    pub schema: SchemaRef,
    /// The view's rows (the materialize operator's state table).
    contents: StateTable,
    /// Running or failed.
    pub status: JobStatus,
}

impl Job {
    /// Compiles a job from an optimized plan; its contents start empty.
    ///
    /// # Errors
    /// [`Error::NotSupported`] for constructs that cannot be maintained incrementally.
    pub fn try_new(
        view: RelationId,
        name: String,
        plan: LogicalPlan,
        schema: SchemaRef,
    ) -> Result<Self> {
        let mut sources = BTreeSet::new();
        let root = plan::build(&plan, &mut sources)?;
        let contents = StateTable::new(schema.clone())?;
        Ok(Job {
            view,
            name,
            plan,
            root,
            sources,
            schema,
            contents,
            status: JobStatus::Running,
        })
    }

    /// EXPLAIN lines of the operator tree, materialize on top.
    pub fn explain(&self) -> Vec<String> {
        let cols: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        let mut out = vec![format!(
            "StreamMaterialize: {} columns=[{}] (state table: the view's rows, keyed by all columns)",
            self.name,
            cols.join(", ")
        )];
        self.root.explain(1, &mut out);
        out
    }

    /// Runs one epoch through the operator tree and applies the result to the view's contents.
    /// Returns the view's changes (in the view's schema) for downstream jobs.
    ///
    /// # Errors
    /// Evaluation errors; the job is then `Failed` and must be rebuilt.
    pub fn process(&mut self, input: &EpochInput) -> Result<Vec<ChangeBatch>> {
        let result = self.root.process(input).and_then(|out| {
            let out = out
                .into_iter()
                .filter(|c| !c.is_empty())
                .map(|c| c.with_schema(self.schema.clone()))
                .collect::<Result<Vec<_>>>()?;
            for c in &out {
                self.contents.apply(c)?;
            }
            Ok(out)
        });
        if let Err(e) = &result {
            self.status = JobStatus::Failed {
                code: e.sqlstate(),
                message: e.to_string(),
            };
        }
        result
    }

    /// Rebuilds the operator tree and contents from the full contents of the inputs, given as
    /// one epoch of inserts. Used at creation (backfill), at restart and to heal a failed job.
    ///
    /// # Errors
    /// Evaluation errors; the job is left `Failed`.
    pub fn rebuild(&mut self, snapshot: &EpochInput) -> Result<()> {
        let mut sources = BTreeSet::new();
        self.root = plan::build(&self.plan, &mut sources)?;
        self.contents = StateTable::new(self.schema.clone())?;
        self.status = JobStatus::Running;
        self.process(snapshot)?;
        Ok(())
    }

    /// The view's rows as a batch.
    ///
    /// # Errors
    /// Arrow errors from decoding.
    pub fn snapshot(&self) -> Result<Arc<RecordBatch>> {
        Ok(Arc::new(self.contents.to_batch()?))
    }

    /// The view's rows as a change batch of inserts (to backfill a downstream view).
    ///
    /// # Errors
    /// Arrow errors from decoding; [`Error::Execution`] when the job has failed.
    pub fn contents_as_change(&self) -> Result<ChangeBatch> {
        if let JobStatus::Failed { code, message } = &self.status {
            return Err(Error::Execution {
                view: self.name.clone(),
                source: Box::new(Error::data(code, message.clone())),
            });
        }
        self.contents.to_change()
    }
}

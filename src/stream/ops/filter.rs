//! `Filter`: keeps the rows whose predicate is true.

use std::sync::Arc;

use arrow::array::BooleanArray;
use arrow::datatypes::SchemaRef;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{Error, Result};
use crate::state::StateTable;
use crate::stream::change::ChangeBatch;
use crate::stream::{EpochInput, Operator};

/// Keeps input rows whose predicate (a DataFusion `PhysicalExpr`) is true; NULL drops the row.
/// Weights pass through unchanged (a retraction is filtered exactly like its insert); no state.
pub struct Filter {
    /// The input operator.
    pub input: Box<dyn Operator>,
    /// The predicate over the input schema.
    pub predicate: Arc<dyn PhysicalExpr>,
    /// The predicate as SQL-ish text, for EXPLAIN.
    pub display: String,
}

impl Operator for Filter {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }

    fn process(&mut self, input: &EpochInput) -> Result<Vec<ChangeBatch>> {
        let mut out = Vec::new();
        for change in self.input.process(input)? {
            if change.is_empty() {
                continue;
            }
            let mask = self
                .predicate
                .evaluate(&change.batch)?
                .into_array(change.len())?;
            let mask = mask
                .as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or_else(|| Error::plan("42804", "argument of WHERE must be type boolean"))?;
            let kept = change.filter(mask)?;
            if !kept.is_empty() {
                out.push(kept);
            }
        }
        Ok(out)
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        out.push(format!(
            "{}StreamFilter: {} (stateless)",
            "  ".repeat(depth),
            self.display
        ));
        self.input.explain(depth + 1, out);
    }

    fn visit_state(&mut self, f: &mut dyn FnMut(&mut StateTable) -> Result<()>) -> Result<()> {
        self.input.visit_state(f)
    }

    fn restore(&mut self) -> Result<()> {
        self.input.restore()
    }
}

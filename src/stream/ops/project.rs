//! `Project`: evaluates one expression per output column.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::Result;
use crate::state::StateTable;
use crate::stream::change::ChangeBatch;
use crate::stream::{EpochInput, Operator};

/// Evaluates DataFusion `PhysicalExpr`s on each input batch; weights pass through unchanged.
/// Output schema: one column per expression. No state.
pub struct Project {
    /// The input operator.
    pub input: Box<dyn Operator>,
    /// One expression per output column, over the input schema.
    pub exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// Output schema.
    pub schema: SchemaRef,
}

impl Operator for Project {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process(&mut self, input: &EpochInput) -> Result<Vec<ChangeBatch>> {
        let mut out = Vec::new();
        for change in self.input.process(input)? {
            if change.is_empty() {
                continue;
            }
            let n = change.len();
            let mut columns = Vec::with_capacity(self.exprs.len());
            for (e, f) in self.exprs.iter().zip(self.schema.fields()) {
                let col = e.evaluate(&change.batch)?.into_array(n)?;
                let col = if col.data_type() != f.data_type() {
                    arrow::compute::cast(&col, f.data_type())?
                } else {
                    col
                };
                columns.push(col);
            }
            out.push(change.with_columns(self.schema.clone(), columns)?);
        }
        Ok(out)
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        let cols: Vec<String> = self
            .exprs
            .iter()
            .zip(self.schema.fields())
            .map(|(e, f)| format!("{} AS {}", e, f.name()))
            .collect();
        out.push(format!(
            "{}StreamProject: {} (stateless)",
            "  ".repeat(depth),
            cols.join(", ")
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

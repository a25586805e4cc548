//! `Scan`: reads one relation's changes of the epoch.

use arrow::datatypes::SchemaRef;

use crate::error::Result;
use crate::state::StateTable;
use crate::stream::change::ChangeBatch;
use crate::stream::{EpochInput, Operator, RelationId};

/// Reads the epoch's changes of a table or upstream view, keeping the projected columns.
///
/// Input: the relation's changelog; output: the projected columns, weights unchanged; no state.
pub struct Scan {
    /// The relation read.
    pub relation: RelationId,
    /// Its name, for EXPLAIN.
    pub name: String,
    /// Column indices kept, in output order; `None` keeps all.
    pub projection: Option<Vec<usize>>,
    /// Output schema.
    pub schema: SchemaRef,
}

impl Operator for Scan {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process(&mut self, input: &EpochInput) -> Result<Vec<ChangeBatch>> {
        input
            .of(self.relation)
            .iter()
            .map(|c| {
                let columns = match &self.projection {
                    Some(p) => p.iter().map(|i| c.batch.column(*i).clone()).collect(),
                    None => c.batch.columns().to_vec(),
                };
                c.with_columns(self.schema.clone(), columns)
            })
            .collect()
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        let cols: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        out.push(format!(
            "{}StreamScan: {} columns=[{}] (stateless; reads the changelog from its source offset)",
            "  ".repeat(depth),
            self.name,
            cols.join(", ")
        ));
    }

    fn visit_state(&mut self, _f: &mut dyn FnMut(&mut StateTable) -> Result<()>) -> Result<()> {
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        Ok(())
    }
}

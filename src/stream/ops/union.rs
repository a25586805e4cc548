//! `Union`: UNION ALL of several inputs.

use arrow::datatypes::SchemaRef;

use crate::error::Result;
use crate::state::StateTable;
use crate::stream::change::ChangeBatch;
use crate::stream::{EpochInput, Operator};

/// UNION ALL: forwards every input's changes under the output schema; weights unchanged,
/// no state. Barrier alignment over its inputs is given by epoch-at-a-time evaluation.
pub struct Union {
    /// The inputs, all with the output's column types.
    pub inputs: Vec<Box<dyn Operator>>,
    /// Output schema.
    pub schema: SchemaRef,
}

impl Operator for Union {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process(&mut self, input: &EpochInput) -> Result<Vec<ChangeBatch>> {
        let mut out = Vec::new();
        for i in &mut self.inputs {
            for change in i.process(input)? {
                let columns = change
                    .batch
                    .columns()
                    .iter()
                    .zip(self.schema.fields())
                    .map(|(c, f)| {
                        if c.data_type() == f.data_type() {
                            Ok(c.clone())
                        } else {
                            arrow::compute::cast(c, f.data_type())
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                out.push(change.with_columns(self.schema.clone(), columns)?);
            }
        }
        Ok(out)
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        out.push(format!(
            "{}StreamUnionAll: {} inputs (stateless)",
            "  ".repeat(depth),
            self.inputs.len()
        ));
        for i in &self.inputs {
            i.explain(depth + 1, out);
        }
    }

    fn visit_state(&mut self, f: &mut dyn FnMut(&mut StateTable) -> Result<()>) -> Result<()> {
        for i in &mut self.inputs {
            i.visit_state(f)?;
        }
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        for i in &mut self.inputs {
            i.restore()?;
        }
        Ok(())
    }
}

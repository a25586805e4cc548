//! `Union`: UNION ALL of several inputs.

use arrow::datatypes::SchemaRef;

use crate::common::ChangeBatch;
use crate::error::Result;
use crate::stream::{EpochContext, Operator, StateVisitor, input_path};

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

    fn process(&mut self, input: &EpochContext) -> Result<Vec<ChangeBatch>> {
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

    fn watermarks(&self, ctx: &EpochContext) -> crate::stream::Watermarks {
        let inputs: Vec<_> = self.inputs.iter().map(|i| i.watermarks(ctx)).collect();
        crate::stream::watermark::least_of(&inputs, self.schema.fields().len())
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

    fn visit_state(&mut self, path: &str, f: &mut StateVisitor<'_>) -> Result<()> {
        for (n, i) in self.inputs.iter_mut().enumerate() {
            i.visit_state(&input_path(path, &n.to_string()), f)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::testing::{Rel, epoch, expect, restore_into, run, schema};

    #[test]
    fn forwards_both_inputs_with_their_weights() {
        let a = Rel::new(1, "k:utf8 v:i64");
        let b = Rel::new(2, "k:utf8 v:i32");
        let mut u = Union {
            inputs: vec![a.scan(), b.scan()],
            schema: schema("k:utf8 v:i64"),
        };
        let out = run(
            &mut u,
            &epoch(&[
                (&a, "+1 | 'x', 1\n+2 | 'y', NULL"),
                (&b, "+1 | 'x', 1\n+1 | 'z', 3"),
            ]),
        );
        assert_eq!(out, expect("+2 | 'x', 1\n+2 | 'y', NULL\n+1 | 'z', 3"));
        let out = run(
            &mut u,
            &epoch(&[(&a, "-1 | 'x', 1"), (&b, "-1 | 'z', 3\n+1 | 'z', 4")]),
        );
        assert_eq!(out, expect("-1 | 'x', 1\n-1 | 'z', 3\n+1 | 'z', 4"));
        let out = run(&mut u, &epoch(&[(&a, ""), (&b, "-1 | 'x', 1")]));
        assert_eq!(out, expect("-1 | 'x', 1"));
        // An insert on one side and its retraction on the other cancel.
        let out = run(&mut u, &epoch(&[(&a, "+1 | 'q', 5"), (&b, "-1 | 'q', 5")]));
        assert!(out.is_empty());
        assert!(run(&mut u, &EpochContext::default()).is_empty());
    }

    #[test]
    fn the_same_input_twice_doubles_the_weights() {
        let a = Rel::new(1, "v:i64");
        let mut u = Union {
            inputs: vec![a.scan(), a.scan()],
            schema: schema("v:i64"),
        };
        let out = run(&mut u, &epoch(&[(&a, "+1 | 1\n-3 | 2\n+1 | NULL")]));
        assert_eq!(out, expect("+2 | 1\n-6 | 2\n+2 | NULL"));
        let mut v = Union {
            inputs: vec![a.scan(), a.scan()],
            schema: schema("v:i64"),
        };
        restore_into(&mut u, &mut v).unwrap();
        assert_eq!(run(&mut v, &epoch(&[(&a, "-1 | 1")])), expect("-2 | 1"));
    }
}

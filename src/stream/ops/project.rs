//! `Project`: evaluates one expression per output column.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::physical_expr::PhysicalExpr;

use crate::common::ChangeBatch;
use crate::error::Result;
use crate::stream::{EpochContext, Operator, StateVisitor, input_path};

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

    fn process(&mut self, input: &EpochContext) -> Result<Vec<ChangeBatch>> {
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

    fn watermarks(&self, ctx: &EpochContext) -> crate::stream::Watermarks {
        let input = self.input.watermarks(ctx);
        crate::stream::watermark::through_exprs(
            &self.exprs,
            &self.input.schema(),
            &self.schema,
            &input,
        )
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

    fn visit_state(&mut self, path: &str, f: &mut StateVisitor<'_>) -> Result<()> {
        self.input.visit_state(&input_path(path, "input"), f)
    }

    fn restore(&mut self) -> Result<()> {
        self.input.restore()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::testing::{Rel, epoch, expect, physical, run, schema};

    const SCHEMA: &str = "id:i64 name:utf8 v:f64";

    fn project(r: &Rel, exprs: &[&str], out: &str) -> Project {
        Project {
            input: r.scan(),
            exprs: exprs.iter().map(|e| physical(e, &r.schema)).collect(),
            schema: schema(out),
        }
    }

    #[test]
    fn evaluates_each_expression_and_keeps_weights() {
        let r = Rel::new(1, SCHEMA);
        let mut p = project(
            &r,
            &["id", "v * 2", "name IS NULL"],
            "id:i64 twice:f64 anon:bool",
        );
        let out = run(
            &mut p,
            &epoch(&[(&r, "+1 | 1, 'a', 2.5\n+2 | 2, NULL, NULL\n-1 | 3, 'c', 1.0")]),
        );
        assert_eq!(
            out,
            expect("+1 | 1, 5.0, false\n+2 | 2, NULL, true\n-1 | 3, 2.0, false")
        );
        let out = run(
            &mut p,
            &epoch(&[(&r, "-1 | 1, 'a', 2.5\n+1 | 1, 'a', 3.0")]),
        );
        assert_eq!(out, expect("-1 | 1, 5.0, false\n+1 | 1, 6.0, false"));
        // An update of a column no expression reads cancels out.
        let out = run(
            &mut p,
            &epoch(&[(&r, "-1 | 1, 'a', 3.0\n+1 | 1, 'z', 3.0")]),
        );
        assert!(out.is_empty());
        assert!(run(&mut p, &EpochContext::default()).is_empty());
        assert!(run(&mut p, &epoch(&[(&r, "")])).is_empty());
    }

    #[test]
    fn rows_that_project_alike_add_up() {
        let r = Rel::new(1, SCHEMA);
        let mut p = project(&r, &["v"], "v:f64");
        let out = run(
            &mut p,
            &epoch(&[
                (&r, "+1 | 1, 'a', 1.0\n+2 | 2, 'b', 1.0"),
                (&r, "-1 | 3, 'c', 1.0\n+1 | 4, 'd', NULL\n+1 | 5, 'e', NULL"),
            ]),
        );
        assert_eq!(out, expect("+2 | 1.0\n+2 | NULL"));
    }

    #[test]
    fn casts_to_the_output_types() {
        let r = Rel::new(1, SCHEMA);
        let mut p = project(&r, &["id + 1", "id"], "x:i32 y:f64");
        let out = run(
            &mut p,
            &epoch(&[(&r, "+1 | 1, 'a', 0.0\n-3 | NULL, 'b', 0.0")]),
        );
        assert_eq!(out, expect("+1 | 2, 1.0\n-3 | NULL, NULL"));
    }

    #[test]
    fn evaluation_errors_are_returned() {
        let r = Rel::new(1, SCHEMA);
        let mut p = project(&r, &["10 / (id - 1)"], "x:i64");
        let out = run(&mut p, &epoch(&[(&r, "+1 | 3, 'a', 0.0")]));
        assert_eq!(out, expect("+1 | 5"));
        assert!(p.process(&epoch(&[(&r, "+1 | 1, 'a', 0.0")])).is_err());
    }
}

//! `Scan`: reads one relation's changes of the epoch.

use arrow::datatypes::SchemaRef;

use crate::common::ChangeBatch;
use crate::common::RelationId;
use crate::error::Result;
use crate::stream::{EpochContext, Operator, StateVisitor, Watermarks};

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

    fn process(&mut self, input: &EpochContext) -> Result<Vec<ChangeBatch>> {
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

    fn watermarks(&self, ctx: &EpochContext) -> Watermarks {
        let Some(w) = ctx.watermarks.get(&self.relation) else {
            return Watermarks::new();
        };
        match &self.projection {
            None => w.clone(),
            Some(p) => p
                .iter()
                .enumerate()
                .filter_map(|(out, i)| crate::stream::watermark_of(w, *i).map(|v| (out, v.clone())))
                .collect(),
        }
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

    fn visit_state(&mut self, _path: &str, _f: &mut StateVisitor<'_>) -> Result<()> {
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::testing::{Rel, epoch, expect, run, schema};

    #[test]
    fn forwards_its_relations_changes_with_their_weights() {
        let r = Rel::new(1, "id:i64 name:utf8 v:f64");
        let other = Rel::new(2, "x:i64");
        let mut scan = r.scan();
        let out = run(
            scan.as_mut(),
            &epoch(&[
                (&r, "+1 | 1, 'a', 2.5\n+3 | 2, NULL, 0.0"),
                (&other, "+1 | 9"),
            ]),
        );
        assert_eq!(out, expect("+1 | 1, 'a', 2.5\n+3 | 2, NULL, 0.0"));
        let out = run(
            scan.as_mut(),
            &epoch(&[(&r, "-1 | 1, 'a', 2.5\n+1 | 1, 'b', 2.5\n-2 | 2, NULL, 0.0")]),
        );
        assert_eq!(
            out,
            expect("-1 | 1, 'a', 2.5\n+1 | 1, 'b', 2.5\n-2 | 2, NULL, 0.0")
        );
        assert!(run(scan.as_mut(), &EpochContext::default()).is_empty());
        assert!(run(scan.as_mut(), &epoch(&[(&other, "-1 | 9")])).is_empty());
        assert!(run(scan.as_mut(), &epoch(&[(&r, "")])).is_empty());
    }

    #[test]
    fn projection_keeps_the_chosen_columns_in_order() {
        let r = Rel::new(1, "id:i64 name:utf8 v:f64");
        let mut scan = Scan {
            relation: 1,
            name: "r".into(),
            projection: Some(vec![2, 0]),
            schema: schema("v:f64 id:i64"),
        };
        let out = run(
            &mut scan,
            &epoch(&[(&r, "+1 | 1, 'a', 2.5\n+1 | 2, 'b', 2.5\n-2 | 3, NULL, NULL")]),
        );
        assert_eq!(out, expect("+1 | 2.5, 1\n+1 | 2.5, 2\n-2 | NULL, 3"));
        // Rows that differ only in a column the scan drops become the same row.
        let out = run(
            &mut scan,
            &epoch(&[(
                &r,
                "+1 | 4, 'x', 1.0\n+1 | 4, 'y', 1.0\n-1 | 5, 'x', 0.0\n+1 | 5, 'y', 0.0",
            )]),
        );
        assert_eq!(out, expect("+2 | 1.0, 4"));
    }
}

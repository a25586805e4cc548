//! `Filter`: keeps the rows whose predicate is true.

use std::sync::Arc;

use arrow::array::BooleanArray;
use arrow::datatypes::SchemaRef;
use datafusion::physical_expr::PhysicalExpr;

use crate::common::ChangeBatch;
use crate::error::{Error, Result};
use crate::stream::{EpochContext, Operator, StateVisitor, input_path};

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

    fn process(&mut self, input: &EpochContext) -> Result<Vec<ChangeBatch>> {
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

    fn watermarks(&self, ctx: &EpochContext) -> crate::stream::Watermarks {
        self.input.watermarks(ctx)
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        out.push(format!(
            "{}StreamFilter: {} (stateless)",
            "  ".repeat(depth),
            self.display
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
    use crate::stream::testing::{Rel, epoch, expect, physical, restore_into, run};

    const SCHEMA: &str = "id:i64 name:utf8 v:f64";

    fn filter(r: &Rel, predicate: &str) -> Filter {
        Filter {
            input: r.scan(),
            predicate: physical(predicate, &r.schema),
            display: predicate.into(),
        }
    }

    #[test]
    fn keeps_rows_whose_predicate_is_true_with_their_weights() {
        let r = Rel::new(1, SCHEMA);
        let other = Rel::new(2, SCHEMA);
        let mut f = filter(&r, "v > 1");
        let out = run(
            &mut f,
            &epoch(&[
                (&r, "+1 | 1, 'a', 2.5\n+1 | 2, 'b', 0.5\n+1 | 3, 'c', NULL"),
                (&r, "+3 | 4, NULL, 5.0"),
                (&other, "+1 | 9, 'z', 9.0"),
            ]),
        );
        assert_eq!(out, expect("+1 | 1, 'a', 2.5\n+3 | 4, NULL, 5.0"));
        // Retractions are filtered as their inserts were; an update may cross the predicate
        // either way.
        let out = run(
            &mut f,
            &epoch(&[(
                &r,
                "-2 | 4, NULL, 5.0\n\
                 -1 | 1, 'a', 2.5\n+1 | 1, 'a', 0.5\n\
                 -1 | 2, 'b', 0.5\n+1 | 2, 'b', 1.5\n\
                 -1 | 3, 'c', NULL",
            )]),
        );
        assert_eq!(
            out,
            expect("-2 | 4, NULL, 5.0\n-1 | 1, 'a', 2.5\n+1 | 2, 'b', 1.5")
        );
        assert!(run(&mut f, &EpochContext::default()).is_empty());
        assert!(run(&mut f, &epoch(&[(&r, "")])).is_empty());
        assert!(run(&mut f, &epoch(&[(&r, "+1 | 5, 'e', 1.0")])).is_empty());
    }

    #[test]
    fn null_is_not_true() {
        let r = Rel::new(1, SCHEMA);
        let rows = "+1 | 1, 'x', NULL\n+1 | 2, 'y', NULL\n+1 | 3, 'x', 0.0\n+1 | 4, NULL, 2.0";
        let cases = [
            // NOT NULL is NULL.
            ("NOT (v > 1)", "+1 | 3, 'x', 0.0"),
            // NULL OR true is true; NULL OR false is NULL.
            (
                "v > 1 OR name = 'x'",
                "+1 | 1, 'x', NULL\n+1 | 3, 'x', 0.0\n+1 | 4, NULL, 2.0",
            ),
            // NULL AND false is false, NULL AND true is NULL: only true AND true passes.
            ("v < 1 AND name = 'x'", "+1 | 3, 'x', 0.0"),
            ("name IS NULL", "+1 | 4, NULL, 2.0"),
            ("v = v", "+1 | 3, 'x', 0.0\n+1 | 4, NULL, 2.0"),
        ];
        for (predicate, expected) in cases {
            let mut f = filter(&r, predicate);
            let out = run(&mut f, &epoch(&[(&r, rows)]));
            assert_eq!(out, expect(expected), "{predicate}");
            let negated = rows.replace("+1 |", "-1 |");
            let out = run(&mut f, &epoch(&[(&r, negated.as_str())]));
            assert_eq!(
                out,
                expect(&expected.replace("+1 |", "-1 |")),
                "{predicate}"
            );
        }
    }

    #[test]
    fn errors_are_returned() {
        let r = Rel::new(1, SCHEMA);
        let mut f = filter(&r, "v");
        assert!(f.process(&epoch(&[(&r, "+1 | 1, 'a', 1.0")])).is_err());
        let mut f = filter(&r, "10 / (id - 1) > 0");
        assert!(f.process(&epoch(&[(&r, "+1 | 2, 'a', 1.0")])).is_ok());
        assert!(f.process(&epoch(&[(&r, "+1 | 1, 'a', 1.0")])).is_err());
    }

    #[test]
    fn a_restored_filter_filters_as_before() {
        let r = Rel::new(1, SCHEMA);
        let mut f = filter(&r, "v > 1");
        run(&mut f, &epoch(&[(&r, "+1 | 1, 'a', 2.5")]));
        let mut g = filter(&r, "v > 1");
        restore_into(&mut f, &mut g).unwrap();
        let next = epoch(&[(&r, "-1 | 1, 'a', 2.5\n+1 | 2, 'b', 0.0")]);
        assert_eq!(run(&mut g, &next), expect("-1 | 1, 'a', 2.5"));
        assert_eq!(run(&mut f, &next), run(&mut g, &next));
    }
}

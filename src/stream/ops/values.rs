//! `Values`: a constant relation (`VALUES`, a query without `FROM`, a `WHERE` that is always
//! false, a table function such as `generate_series`).

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use crate::common::ChangeBatch;
use crate::error::Result;
use crate::stream::{EpochContext, Operator, StateVisitor};

/// Emits its rows as inserts in the first epoch it processes, then nothing: a constant input
/// never changes. No inputs; no state table: after a restore from a checkpoint the rows are
/// already in the restored state downstream, so [`Operator::restore`] marks them emitted.
pub struct Values {
    /// The rows (every field nullable), possibly none.
    pub rows: RecordBatch,
    /// Whether the rows were emitted.
    pub emitted: bool,
    /// What the rows come from, for EXPLAIN.
    pub display: String,
}

impl Operator for Values {
    fn schema(&self) -> SchemaRef {
        self.rows.schema()
    }

    fn process(&mut self, _input: &EpochContext) -> Result<Vec<ChangeBatch>> {
        if self.emitted {
            return Ok(vec![]);
        }
        self.emitted = true;
        if self.rows.num_rows() == 0 {
            return Ok(vec![]);
        }
        Ok(vec![ChangeBatch::inserts(self.rows.clone())])
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        out.push(format!(
            "{}StreamValues: {} ({} rows, emitted once; no state)",
            "  ".repeat(depth),
            self.display,
            self.rows.num_rows()
        ));
    }

    fn visit_state(&mut self, _path: &str, _f: &mut StateVisitor<'_>) -> Result<()> {
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        self.emitted = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn values() -> Values {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
        let rows =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2]))]).unwrap();
        Values {
            rows,
            emitted: false,
            display: "VALUES".into(),
        }
    }

    #[test]
    fn emits_once() {
        let mut v = values();
        let first = v.process(&EpochContext::default()).unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].len(), 2);
        assert!(v.process(&EpochContext::default()).unwrap().is_empty());
    }

    #[test]
    fn restored_values_are_not_emitted_again() {
        let mut v = values();
        v.restore().unwrap();
        assert!(v.process(&EpochContext::default()).unwrap().is_empty());
    }

    #[test]
    fn emits_its_rows_as_inserts_once_whatever_the_input() {
        use crate::stream::testing::{Rel, epoch, expect, run};

        let r = Rel::new(1, "k:utf8 v:i64");
        let rows = r.batch("+1 | 'a', 1\n+1 | NULL, NULL\n+1 | 'a', 1").batch;
        let mut v = Values {
            rows,
            emitted: false,
            display: "VALUES".into(),
        };
        let input = epoch(&[(&r, "-1 | 'a', 1")]);
        assert_eq!(run(&mut v, &input), expect("+2 | 'a', 1\n+1 | NULL, NULL"));
        assert!(run(&mut v, &input).is_empty());
        assert!(run(&mut v, &EpochContext::default()).is_empty());
    }
}

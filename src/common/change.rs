//! Change batches: the unit of data in every dataflow.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, UInt32Array};
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;

use crate::error::Result;

/// An Arrow `RecordBatch` plus one signed weight per row (DBSP / Materialize style).
///
/// Shape: `weights.len() == batch.num_rows()`, no null weights. A weight of `+n` inserts the row
/// `n` times, `-n` retracts it `n` times; an update is a `-1` of the old row and a `+1` of the
/// new one. Weights may be any non-zero value; a batch need not be consolidated.
#[derive(Debug, Clone)]
pub struct ChangeBatch {
    /// The rows, in the schema of the stream that carries them.
    pub batch: RecordBatch,
    /// One weight per row of `batch`.
    pub weights: Int64Array,
}

impl ChangeBatch {
    /// A batch whose rows are all inserts (weight `+1`).
    pub fn inserts(batch: RecordBatch) -> Self {
        let weights = Int64Array::from(vec![1i64; batch.num_rows()]);
        ChangeBatch { batch, weights }
    }

    /// A batch whose rows are all retractions (weight `-1`).
    pub fn deletes(batch: RecordBatch) -> Self {
        let weights = Int64Array::from(vec![-1i64; batch.num_rows()]);
        ChangeBatch { batch, weights }
    }

    /// Builds a change batch from rows and explicit weights.
    ///
    /// # Errors
    /// [`crate::error::Error::Internal`] when the lengths differ.
    pub fn new(batch: RecordBatch, weights: Int64Array) -> Result<Self> {
        if batch.num_rows() != weights.len() {
            return Err(crate::error::Error::Internal(format!(
                "change batch has {} rows but {} weights",
                batch.num_rows(),
                weights.len()
            )));
        }
        Ok(ChangeBatch { batch, weights })
    }

    /// Rows `offset..offset + len` (zero-copy).
    ///
    /// # Panics
    /// When the range is out of bounds (as `RecordBatch::slice`).
    pub fn slice(&self, offset: usize, len: usize) -> Self {
        ChangeBatch {
            batch: self.batch.slice(offset, len),
            weights: self.weights.slice(offset, len),
        }
    }

    /// The rows in order as consecutive pieces of at most `max_rows` rows each (zero-copy;
    /// none for an empty batch; `max_rows` 0 counts as 1).
    pub fn pieces(&self, max_rows: usize) -> impl Iterator<Item = ChangeBatch> + '_ {
        let step = max_rows.max(1);
        (0..self.len())
            .step_by(step)
            .map(move |offset| self.slice(offset, step.min(self.len() - offset)))
    }

    /// An empty change batch of the given schema.
    pub fn empty(schema: SchemaRef) -> Self {
        ChangeBatch {
            batch: RecordBatch::new_empty(schema),
            weights: Int64Array::from(Vec::<i64>::new()),
        }
    }

    /// Number of rows (not the sum of weights).
    pub fn len(&self) -> usize {
        self.batch.num_rows()
    }

    /// True when the batch holds no rows.
    pub fn is_empty(&self) -> bool {
        self.batch.num_rows() == 0
    }

    /// The schema of the rows.
    pub fn schema(&self) -> SchemaRef {
        self.batch.schema()
    }

    /// Keeps the rows where `mask` is true (nulls count as false), with their weights.
    ///
    /// # Errors
    /// Arrow errors when `mask` has the wrong length.
    pub fn filter(&self, mask: &BooleanArray) -> Result<Self> {
        let mask = if mask.null_count() > 0 {
            arrow::compute::prep_null_mask_filter(mask)
        } else {
            mask.clone()
        };
        let batch = filter_record_batch(&self.batch, &mask)?;
        let weights = arrow::compute::filter(&self.weights, &mask)?;
        let weights = weights
            .as_any()
            .downcast_ref::<Int64Array>()
            .cloned()
            .ok_or_else(|| crate::error::Error::Internal("weights are not Int64".into()))?;
        Ok(ChangeBatch { batch, weights })
    }

    /// The rows at `indices` (in that order), with their weights.
    ///
    /// # Errors
    /// Arrow errors when an index is out of bounds.
    pub fn take(&self, indices: &UInt32Array) -> Result<Self> {
        let batch = arrow::compute::take_record_batch(&self.batch, indices)?;
        let weights = arrow::compute::take(&self.weights, indices, None)?;
        let weights = weights
            .as_any()
            .downcast_ref::<Int64Array>()
            .cloned()
            .ok_or_else(|| crate::error::Error::Internal("weights are not Int64".into()))?;
        Ok(ChangeBatch { batch, weights })
    }

    /// Replaces the columns, keeping the weights; `schema` must describe `columns`.
    ///
    /// # Errors
    /// Arrow errors when the columns do not match the schema.
    pub fn with_columns(&self, schema: SchemaRef, columns: Vec<ArrayRef>) -> Result<Self> {
        let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(self.len()));
        let batch = RecordBatch::try_new_with_options(schema, columns, &options)?;
        Ok(ChangeBatch {
            batch,
            weights: self.weights.clone(),
        })
    }

    /// The same rows with every weight negated.
    pub fn negate(&self) -> Self {
        let weights: Int64Array = self.weights.iter().map(|w| w.map(|w| -w)).collect();
        ChangeBatch {
            batch: self.batch.clone(),
            weights,
        }
    }

    /// Concatenates change batches of one schema.
    ///
    /// # Errors
    /// Arrow errors when the schemas differ.
    pub fn concat(schema: &SchemaRef, parts: &[ChangeBatch]) -> Result<Self> {
        if parts.len() == 1 {
            return Ok(parts[0].clone());
        }
        let batches: Vec<&RecordBatch> = parts.iter().map(|p| &p.batch).collect();
        let batch = arrow::compute::concat_batches(schema, batches)?;
        let weights: Vec<&dyn Array> = parts.iter().map(|p| &p.weights as &dyn Array).collect();
        let weights = arrow::compute::concat(&weights)?;
        let weights = weights
            .as_any()
            .downcast_ref::<Int64Array>()
            .cloned()
            .ok_or_else(|| crate::error::Error::Internal("weights are not Int64".into()))?;
        Ok(ChangeBatch { batch, weights })
    }

    /// Reinterprets the rows under `schema` (same types, possibly other names or nullability).
    ///
    /// # Errors
    /// Arrow errors when the column types differ.
    pub fn with_schema(&self, schema: SchemaRef) -> Result<Self> {
        let columns = self.batch.columns().to_vec();
        self.with_columns(Arc::clone(&schema), columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int32Array;
    use arrow::datatypes::{DataType, Field, Schema};

    fn batch(values: Vec<i32>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int32, true)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int32Array::from(values))]).unwrap()
    }

    #[test]
    fn filter_keeps_weights_aligned() {
        let cb = ChangeBatch::new(batch(vec![1, 2, 3]), Int64Array::from(vec![1, -1, 2])).unwrap();
        let mask = BooleanArray::from(vec![Some(false), Some(true), None]);
        let out = cb.filter(&mask).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out.weights.value(0), -1);
    }

    #[test]
    fn negate_flips_signs() {
        let cb = ChangeBatch::inserts(batch(vec![1, 2]));
        assert_eq!(cb.negate().weights.values().to_vec(), vec![-1, -1]);
    }
}

//! Streaming operators, one file each.

pub mod filter;
pub mod hash_agg;
pub mod hash_join;
pub mod project;
pub mod scan;
pub mod semi_join;
pub mod union;
pub mod values;

use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};

/// The schema with every field nullable: operator outputs may carry NULLs that the logical
/// schema declared impossible (an outer join's padding, a retraction of an empty group).
pub fn nullable_schema(schema: &Schema) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    Arc::new(Schema::new(fields))
}

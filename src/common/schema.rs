//! Schema helpers shared by the planner, the operators and the state tables.

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

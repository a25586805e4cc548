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

/// Field metadata key naming the PostgreSQL type of a `Utf8` column when it is not `text`:
/// `bpchar` (`character(n)`) or `varchar` (`character varying`). Set on a table's columns
/// by [`crate::catalog::RelationDef::typed_schema`] and on the cast `x::char(n)`; DataFusion
/// carries field metadata through column references, aliases, joins and unions, so a view's
/// columns keep it too.
pub const PG_TEXT_TYPE_KEY: &str = "weir.pg_text_type";

/// Field metadata key of a `character(n)` column's length `n` (characters), beside
/// [`PG_TEXT_TYPE_KEY`].
pub const PG_CHAR_LENGTH_KEY: &str = "weir.pg_char_length";

/// The PostgreSQL string type a `Utf8` field is declared with (see [`PG_TEXT_TYPE_KEY`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgTextType {
    /// `text` (no marker).
    Text,
    /// `character varying` / `varchar(n)`.
    Varchar,
    /// `character(n)`, with `n` when known.
    Bpchar(Option<usize>),
}

impl PgTextType {
    /// The type `metadata` (a field's) declares.
    pub fn of(metadata: &std::collections::HashMap<String, String>) -> Self {
        match metadata.get(PG_TEXT_TYPE_KEY).map(String::as_str) {
            Some("bpchar") => PgTextType::Bpchar(
                metadata
                    .get(PG_CHAR_LENGTH_KEY)
                    .and_then(|n| n.parse().ok()),
            ),
            Some("varchar") => PgTextType::Varchar,
            _ => PgTextType::Text,
        }
    }

    /// The metadata entries declaring this type (none for `text`).
    pub fn metadata(self) -> std::collections::HashMap<String, String> {
        let mut m = std::collections::HashMap::new();
        match self {
            PgTextType::Text => {}
            PgTextType::Varchar => {
                m.insert(PG_TEXT_TYPE_KEY.to_string(), "varchar".to_string());
            }
            PgTextType::Bpchar(n) => {
                m.insert(PG_TEXT_TYPE_KEY.to_string(), "bpchar".to_string());
                if let Some(n) = n {
                    m.insert(PG_CHAR_LENGTH_KEY.to_string(), n.to_string());
                }
            }
        }
        m
    }
}

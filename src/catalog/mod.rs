//! The catalog: tables, materialized views and secondary indexes, their schemas, keys,
//! dependencies and ids.
//!
//! Persisted as JSON under the store's `m/catalog` key on every DDL statement.

pub mod roles;

use std::collections::BTreeMap;

use arrow::datatypes::{Schema, SchemaRef};
use serde::{Deserialize, Serialize};

use crate::common::RelationId;
use crate::error::{Error, Result};

/// What kind of relation a catalog entry is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum RelationKind {
    /// A table: a durable changelog of writes.
    Table {
        /// Column indices of the primary key (empty: none).
        primary_key: Vec<usize>,
    },
    /// A materialized view, maintained incrementally by its job.
    MaterializedView {
        /// The defining query, as written after `AS`.
        query: String,
        /// Session settings captured at creation (`checkpoint.*`, `restart.*`, `state.backend`).
        settings: BTreeMap<String, String>,
    },
}

/// One relation of the catalog.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RelationDef {
    /// Unique id, never reused.
    pub id: RelationId,
    /// Name in schema `public` (lower-case unless quoted).
    pub name: String,
    /// Column names and types.
    pub schema: Schema,
    /// Table or view.
    pub kind: RelationKind,
    /// Relations this one reads (for views).
    pub depends_on: Vec<RelationId>,
    /// The connector feeding a table (`CREATE TABLE ... WITH (connector = ...)`); `None` for
    /// tables written by statements, and in catalogs written before connectors existed.
    #[serde(default)]
    pub connector: Option<ConnectorDef>,
    /// A table's event time: `APPEND ONLY` and its watermark (absent in catalogs written
    /// before event time existed, and for views).
    #[serde(default)]
    pub time: TableTime,
    /// The type modifiers of a table's columns as declared, by column index (lengths of
    /// `varchar(n)` and `char(n)`, which Arrow keeps as `Utf8`; `numeric(p, s)`); columns past
    /// the end have none (empty in catalogs written before they were kept, and for views).
    #[serde(default)]
    pub type_modifiers: Vec<TypeModifier>,
    /// The name of a table's primary key index (`<table>_pkey`, or `<table>_pkey1`, ... when
    /// that name was taken, as PostgreSQL chooses it); `None` in catalogs written before it
    /// was kept, where it is `<table>_pkey`.
    #[serde(default)]
    pub primary_key_index: Option<String>,
    /// A table's column defaults (`DEFAULT expr`) as written, by column index (`None`: no
    /// default, so NULL); columns past the end have none (empty in catalogs written before
    /// defaults were kept, and for views). See `crate::session::defaults`.
    #[serde(default)]
    pub column_defaults: Vec<Option<String>>,
    /// Set while a transaction that dropped the relation is open: the transaction's token
    /// (see [`Catalog::hide`]). Such a relation is invisible to name lookups (`42P01`, as
    /// after PostgreSQL's `DROP`) but keeps its rows and job until the transaction ends:
    /// `COMMIT` drops it, `ROLLBACK` shows it again. Its name stays taken for other
    /// transactions, which PostgreSQL would make wait for the dropping one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_by: Option<u64>,
}

/// A column's declared PostgreSQL type modifier (docs 8.1.2 "Arbitrary Precision Numbers",
/// 8.3 "Character Types").
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub enum TypeModifier {
    /// None (`text`, `numeric`, `integer`, ...).
    #[default]
    None,
    /// `varchar(n)` / `character varying(n)`; `None`: no limit.
    Varchar(Option<u32>),
    /// `char(n)` / `character(n)` (`char` alone is `char(1)`).
    Char(u32),
    /// `numeric(precision, scale)`.
    Numeric(u8, i8),
}

impl TypeModifier {
    /// The most characters a value may have, if limited.
    pub fn limit(self) -> Option<u32> {
        match self {
            TypeModifier::Varchar(Some(n)) | TypeModifier::Char(n) => Some(n),
            _ => None,
        }
    }

    /// The column's PostgreSQL type OID when its Arrow type does not give it: 1043
    /// `varchar`, 1042 `bpchar`.
    pub fn type_oid(self) -> Option<i32> {
        match self {
            TypeModifier::Varchar(_) => Some(1043),
            TypeModifier::Char(_) => Some(1042),
            _ => None,
        }
    }

    /// PostgreSQL's `atttypmod`: a length plus 4 (`VARHDRSZ`), `((precision << 16) | scale)
    /// + 4` for `numeric`, -1 without a modifier.
    pub fn typmod(self) -> i32 {
        match self {
            TypeModifier::Numeric(p, s) => ((i32::from(p) << 16) | (i32::from(s) & 0x7ff)) + 4,
            _ => self
                .limit()
                .and_then(|n| i32::try_from(n).ok())
                .map_or(-1, |n| n.saturating_add(4)),
        }
    }

    /// The type's name in PostgreSQL's messages (`character varying(3)`, `character(4)`).
    pub fn sql_name(self) -> String {
        match self {
            TypeModifier::Varchar(None) => "character varying".into(),
            TypeModifier::Varchar(Some(n)) => format!("character varying({n})"),
            TypeModifier::Char(n) => format!("character({n})"),
            TypeModifier::Numeric(p, s) => format!("numeric({p},{s})"),
            TypeModifier::None => "text".into(),
        }
    }
}

/// A table's event-time declarations (`CREATE TABLE ... (..., WATERMARK FOR ts AS ts -
/// INTERVAL '5 seconds') APPEND ONLY`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TableTime {
    /// The table takes inserts only (`UPDATE` and `DELETE` are `0A000`); a connector table
    /// is append-only too; a view is when it emits on window close.
    #[serde(default)]
    pub append_only: bool,
    /// The watermark, if declared.
    #[serde(default)]
    pub watermark: Option<WatermarkDef>,
    /// For a view, its output columns that carry a watermark (from its plan).
    #[serde(default)]
    pub watermark_columns: Vec<usize>,
}

impl TableTime {
    /// The columns of the relation that carry a watermark: a table's watermark column, a
    /// view's watermarked output columns.
    pub fn watermarked(&self) -> Vec<usize> {
        match &self.watermark {
            Some(w) => vec![w.column],
            None => self.watermark_columns.clone(),
        }
    }
}

/// A table's watermark: after each epoch, the largest value of `column` written so far minus
/// `delay_us`; rows written below it are late, dropped and counted (Flink's and RisingWave's
/// bounded-out-of-orderness watermark).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WatermarkDef {
    /// The event-time column (a `TIMESTAMP` or `TIMESTAMPTZ`, NOT NULL), an index into the
    /// table's schema.
    pub column: usize,
    /// The delay, in microseconds (>= 0).
    pub delay_us: i64,
    /// The watermark expression as written.
    pub text: String,
}

/// A table's connector: the generator that appends rows to it, as written in `WITH (...)`
/// and validated at `CREATE TABLE`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ConnectorDef {
    /// The connector's name; `nexmark` is the only one.
    pub connector: String,
    /// Which Nexmark table: `person`, `auction` or `bid`.
    pub table: String,
    /// Events of the whole stream (all three tables); `None`: endless.
    pub events: Option<u64>,
    /// Wall-clock pacing in events per second; 0: as fast as possible.
    pub events_per_second: u64,
    /// Seed of every draw.
    pub seed: u64,
    /// Events per second of event time (sets `date_time`).
    pub event_rate: f64,
}

impl RelationDef {
    /// The schema as a shared reference.
    pub fn schema_ref(&self) -> SchemaRef {
        std::sync::Arc::new(self.schema.clone())
    }

    /// The schema as the planner sees it: a table's `character(n)` and `character varying`
    /// columns carry their PostgreSQL type in field metadata
    /// ([`crate::common::schema::PgTextType`]), which comparisons follow (`character(n)`
    /// ignores trailing spaces) and clients are told; a view's columns have it from its plan.
    pub fn typed_schema(&self) -> SchemaRef {
        use crate::common::schema::PgTextType;
        if self
            .type_modifiers
            .iter()
            .all(|m| !matches!(m, TypeModifier::Char(_) | TypeModifier::Varchar(_)))
        {
            return self.schema_ref();
        }
        let fields: Vec<arrow::datatypes::Field> = self
            .schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let t = match self.type_modifier(i) {
                    TypeModifier::Char(n) => PgTextType::Bpchar(usize::try_from(n).ok()),
                    TypeModifier::Varchar(_) => PgTextType::Varchar,
                    _ => return f.as_ref().clone(),
                };
                let mut metadata = f.metadata().clone();
                metadata.extend(t.metadata());
                f.as_ref().clone().with_metadata(metadata)
            })
            .collect();
        std::sync::Arc::new(Schema::new_with_metadata(
            fields,
            self.schema.metadata().clone(),
        ))
    }

    /// The declared type modifier of column `column`.
    pub fn type_modifier(&self, column: usize) -> TypeModifier {
        self.type_modifiers.get(column).copied().unwrap_or_default()
    }

    /// The name of the unique index behind a table's primary key, if it has one (PostgreSQL
    /// shows a primary key as an index and reserves its name).
    pub fn primary_key_index_name(&self) -> Option<String> {
        match &self.kind {
            RelationKind::Table { primary_key } if !primary_key.is_empty() => Some(
                self.primary_key_index
                    .clone()
                    .unwrap_or_else(|| format!("{}_pkey", self.name)),
            ),
            _ => None,
        }
    }

    /// True for tables.
    pub fn is_table(&self) -> bool {
        matches!(self.kind, RelationKind::Table { .. })
    }

    /// "table" or "materialized view", for messages.
    pub fn kind_name(&self) -> &'static str {
        if self.is_table() {
            "table"
        } else {
            "materialized view"
        }
    }
}

/// One column of a secondary index.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct IndexColumn {
    /// Index into the relation's schema.
    pub column: usize,
    /// `DESC` (NULLs first, PostgreSQL's default for `DESC`).
    pub descending: bool,
}

/// A secondary index (`CREATE [UNIQUE] INDEX name ON relation (columns)`): the relation's
/// rows kept again in an ordered state table keyed by `columns` first, so that filters on
/// its leading columns read a key range. Its rows are derived (from the table's contents or
/// the view's rows) when the server starts, never stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IndexDef {
    /// Unique id, from the relations' id sequence.
    pub id: RelationId,
    /// Name in schema `public` (shared with tables and views, as in PostgreSQL).
    pub name: String,
    /// The table or materialized view indexed.
    pub relation: RelationId,
    /// The key columns, in index order.
    pub columns: Vec<IndexColumn>,
    /// `UNIQUE`: writes that would repeat a key without NULLs fail with `23505` (tables only).
    pub unique: bool,
}

/// All relations, by id (creation order, so a view comes after everything it reads), and
/// the secondary indexes on them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Catalog {
    next_id: RelationId,
    relations: BTreeMap<RelationId, RelationDef>,
    /// Secondary indexes by id (absent in catalogs written before indexes existed).
    #[serde(default)]
    indexes: BTreeMap<RelationId, IndexDef>,
}

impl Catalog {
    /// Decodes a persisted catalog.
    ///
    /// # Errors
    /// [`Error::State`] when the JSON is corrupt.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| Error::State(format!("corrupt catalog: {e}")))
    }

    /// Encodes the catalog for persistence.
    ///
    /// # Errors
    /// [`Error::Internal`] if serialization fails.
    pub fn to_json(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(self).map_err(|e| Error::Internal(format!("catalog encoding: {e}")))
    }

    /// Allocates a new relation id.
    pub fn allocate_id(&mut self) -> RelationId {
        self.next_id += 1;
        self.next_id
    }

    /// Looks a relation up by name; relations hidden by an open transaction's `DROP` are
    /// not found.
    pub fn by_name(&self, name: &str) -> Option<&RelationDef> {
        self.relations
            .values()
            .find(|r| r.name == name && r.dropped_by.is_none())
    }

    /// Looks a relation up by id.
    pub fn get(&self, id: RelationId) -> Option<&RelationDef> {
        self.relations.get(&id)
    }

    /// All relations in id order, those hidden by an open transaction's `DROP` included (the
    /// engine keeps their rows and jobs until it ends).
    pub fn relations(&self) -> impl Iterator<Item = &RelationDef> {
        self.relations.values()
    }

    /// The relations users see, in id order: not those hidden by an open transaction's
    /// `DROP`.
    pub fn visible(&self) -> impl Iterator<Item = &RelationDef> {
        self.relations.values().filter(|r| r.dropped_by.is_none())
    }

    /// The indexes users see, in id order: not those on relations hidden by an open
    /// transaction's `DROP`.
    pub fn visible_indexes(&self) -> impl Iterator<Item = &IndexDef> {
        self.indexes
            .values()
            .filter(|i| self.get(i.relation).is_some_and(|r| r.dropped_by.is_none()))
    }

    /// Looks an index up by name; indexes on relations hidden by an open transaction's
    /// `DROP` are not found.
    pub fn index_by_name(&self, name: &str) -> Option<&IndexDef> {
        self.visible_indexes().find(|i| i.name == name)
    }

    /// The indexes on a relation, in creation order.
    pub fn indexes_on(&self, relation: RelationId) -> Vec<IndexDef> {
        self.indexes
            .values()
            .filter(|i| i.relation == relation)
            .cloned()
            .collect()
    }

    /// All indexes in id order.
    pub fn indexes(&self) -> impl Iterator<Item = &IndexDef> {
        self.indexes.values()
    }

    /// Whether `name` is taken by a relation or an index, for a new relation or index of
    /// transaction `txn`: what a transaction dropped itself is free to it, what another
    /// open transaction dropped is not (it may come back).
    pub fn name_taken(&self, name: &str, txn: Option<u64>) -> bool {
        let hidden_from = |r: &RelationDef| r.dropped_by.is_some() && r.dropped_by == txn;
        self.relations
            .values()
            .any(|r| r.name == name && !hidden_from(r))
            || self
                .indexes
                .values()
                .any(|i| i.name == name && !self.get(i.relation).is_some_and(&hidden_from))
            || self
                .relations
                .values()
                .any(|r| r.primary_key_index_name().as_deref() == Some(name) && !hidden_from(r))
    }

    /// The visible table whose primary key index is named `name`.
    pub fn primary_key_owner(&self, name: &str) -> Option<&RelationDef> {
        self.visible()
            .find(|r| r.primary_key_index_name().as_deref() == Some(name))
    }

    /// The name PostgreSQL gives the primary key index of a new table `table` of transaction
    /// `txn`: `<table>_pkey`, or with the first number from 1 that makes it free.
    pub fn free_primary_key_index_name(&self, table: &str, txn: Option<u64>) -> String {
        let base = format!("{table}_pkey");
        std::iter::once(base.clone())
            .chain((1..).map(|i| format!("{base}{i}")))
            .find(|n| n != table && !self.name_taken(n, txn))
            .unwrap_or(base)
    }

    /// Hides `ids` for transaction `txn` (its `DROP`, see [`RelationDef::dropped_by`]).
    pub fn hide(&mut self, ids: &[RelationId], txn: u64) {
        for id in ids {
            if let Some(r) = self.relations.get_mut(id) {
                r.dropped_by = Some(txn);
            }
        }
    }

    /// Shows again the relations `hidden` (a transaction's `ROLLBACK`), except one whose
    /// name a visible relation has taken meanwhile (left hidden, for the start-up rule of
    /// [`Catalog::resolve_hidden`]). Returns whether anything changed.
    pub fn unhide(&mut self, hidden: &[RelationId]) -> bool {
        let mut changed = false;
        for id in hidden {
            let Some(name) = self.relations.get(id).map(|r| r.name.clone()) else {
                continue;
            };
            if self.by_name(&name).is_none() {
                if let Some(r) = self.relations.get_mut(id) {
                    r.dropped_by = None;
                }
                changed = true;
            }
        }
        changed
    }

    /// At start, the relations hidden by a transaction that never ended (the server stopped
    /// or crashed inside it, or inside its `COMMIT` before its drops were made) come back,
    /// as a rolled-back transaction's would: a visible relation that took one's name since
    /// can only be the same transaction's (another transaction's `CREATE` of the name is
    /// refused while it is hidden), so it goes, with the views on it. Returns the ids
    /// removed, for their rows and state to go too.
    pub fn resolve_hidden(&mut self) -> Vec<RelationId> {
        let hidden: Vec<RelationId> = self
            .relations
            .values()
            .filter(|r| r.dropped_by.is_some())
            .map(|r| r.id)
            .collect();
        let mut removed = Vec::new();
        for id in hidden {
            let name = self.relations[&id].name.clone();
            if let Some(newer) = self.by_name(&name).map(|r| r.id) {
                for doomed in self.dependents_closure(newer) {
                    self.remove(doomed);
                    removed.push(doomed);
                }
            }
            // Likewise an index it created under the name of one of the relation's.
            let names: Vec<String> = self
                .indexes
                .values()
                .filter(|i| i.relation == id)
                .map(|i| i.name.clone())
                .collect();
            self.indexes.retain(|_, i| {
                i.relation == id
                    || !names.contains(&i.name)
                    || self
                        .relations
                        .get(&i.relation)
                        .is_some_and(|r| r.dropped_by.is_some())
            });
            if let Some(r) = self.relations.get_mut(&id) {
                r.dropped_by = None;
            }
        }
        removed
    }

    /// Adds an index.
    pub fn insert_index(&mut self, def: IndexDef) {
        self.indexes.insert(def.id, def);
    }

    /// Removes an index.
    pub fn remove_index(&mut self, id: RelationId) -> Option<IndexDef> {
        self.indexes.remove(&id)
    }

    /// Adds a relation.
    pub fn insert(&mut self, def: RelationDef) {
        self.relations.insert(def.id, def);
    }

    /// Removes a relation and the indexes on it.
    pub fn remove(&mut self, id: RelationId) -> Option<RelationDef> {
        self.indexes.retain(|_, i| i.relation != id);
        self.relations.remove(&id)
    }

    /// The views that read `id` directly.
    pub fn dependents(&self, id: RelationId) -> Vec<RelationId> {
        self.relations
            .values()
            .filter(|r| r.depends_on.contains(&id))
            .map(|r| r.id)
            .collect()
    }

    /// `id` and every view that reads it, directly or not, in reverse creation order (the
    /// order to drop them in).
    pub fn dependents_closure(&self, id: RelationId) -> Vec<RelationId> {
        let mut out = vec![id];
        let mut i = 0;
        while i < out.len() {
            for d in self.dependents(out[i]) {
                if !out.contains(&d) {
                    out.push(d);
                }
            }
            i += 1;
        }
        out.sort_unstable_by(|a, b| b.cmp(a));
        out
    }
}

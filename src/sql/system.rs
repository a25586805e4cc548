//! The `weir_catalog` schema: system tables over the running jobs and their checkpoints.
//!
//! - `weir_catalog.jobs`: one row per materialized view's job: `name`, `status` (`RUNNING`,
//!   `RESTARTING`, `FAILED`), `restarts`, one text column per captured setting (dots become
//!   underscores: `checkpoint_interval`, `state_backend`, `restart_strategy`, ...),
//!   `last_checkpoint_id`, `last_checkpoint_epoch`, the last recovery (`recovered_checkpoint_id`,
//!   `recovered_epoch`, `replayed_rows`: changelog rows read after the restored epoch) and
//!   `failure`.
//! - `weir_catalog.checkpoints`: one row per checkpoint (the last 1000 per job): `job`,
//!   `checkpoint_id`, `epoch`, `status` (`IN_PROGRESS`, `COMPLETED`, `FAILED`, `EXPIRED`),
//!   `trigger_time`, `end_time` (timestamptz), `duration_ms`, `alignment_ms`, `state_bytes`
//!   (full state size), `persisted_bytes` (bytes this checkpoint wrote), `failure_reason`.
//! - `weir_catalog.memory`: one row on the state backend's memory (bytes, all `bigint`):
//!   `limit_bytes` (`--memory-limit`), `cache_bytes` (RocksDB block cache in use, memtables
//!   included), `memtable_bytes`, `disk_bytes` (estimated live rows on disk) and `rss_bytes`
//!   (the server process's resident memory, from `/proc/self/status`; NULL elsewhere).
//! - `weir_catalog.watermarks`: one row per column that carries a watermark: `relation`,
//!   `kind` (`table` or `materialized view`), `column_name`, `watermark` (as of the last
//!   epoch, as text; NULL before the first row), `late_rows` (a table's rows dropped as late
//!   since the server started), `definition` (a table's watermark expression).
//! - `weir_catalog.state_tables`: one row per state table of each job, as of its last
//!   processed epoch: `job`, `state_table` (`view` for the view's rows, otherwise the
//!   operator's place in the plan and the table's name, as `root/input:hash_join.left`;
//!   instance `i` of an operator split by `streaming.parallelism` adds `#i`, as
//!   `root/input#1:hash_join.left`),
//!   `rows` (copies counted). Shows state growing, or staying flat as watermarks clean it.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::datasource::MemTable;
use datafusion::error::Result as DfResult;

use crate::catalog::TypeModifier;
use crate::engine::Engine;
use crate::settings::SessionVars;

const TABLES: &[&str] = &[
    "checkpoints",
    "jobs",
    "memory",
    "sources",
    "state_tables",
    "watermarks",
];

/// The `weir_catalog` schema.
#[derive(Debug)]
pub struct WeirCatalogSchema {
    engine: Arc<Engine>,
}

impl WeirCatalogSchema {
    /// The schema over `engine`'s jobs.
    pub fn new(engine: Arc<Engine>) -> Self {
        WeirCatalogSchema { engine }
    }
}

fn setting_names() -> Vec<String> {
    SessionVars::default().job_settings().into_keys().collect()
}

fn column_name(setting: &str) -> String {
    setting.replace('.', "_")
}

fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
}

/// The schema of `weir_catalog.jobs`.
pub fn jobs_schema() -> SchemaRef {
    let mut fields = vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("status", DataType::Utf8, false),
        Field::new("restarts", DataType::Int64, false),
    ];
    for s in setting_names() {
        fields.push(Field::new(column_name(&s), DataType::Utf8, true));
    }
    fields.extend([
        Field::new("last_checkpoint_id", DataType::Int64, true),
        Field::new("last_checkpoint_epoch", DataType::Int64, true),
        Field::new("recovered_checkpoint_id", DataType::Int64, true),
        Field::new("recovered_epoch", DataType::Int64, true),
        Field::new("replayed_rows", DataType::Int64, true),
        Field::new("failure", DataType::Utf8, true),
    ]);
    Arc::new(Schema::new(fields))
}

/// The schema of `weir_catalog.checkpoints`.
pub fn checkpoints_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("job", DataType::Utf8, false),
        Field::new("checkpoint_id", DataType::Int64, false),
        Field::new("epoch", DataType::Int64, false),
        Field::new("status", DataType::Utf8, false),
        Field::new("trigger_time", ts_type(), false),
        Field::new("end_time", ts_type(), true),
        Field::new("duration_ms", DataType::Int64, true),
        Field::new("alignment_ms", DataType::Int64, false),
        Field::new("state_bytes", DataType::Int64, true),
        Field::new("persisted_bytes", DataType::Int64, true),
        Field::new("failure_reason", DataType::Utf8, true),
    ]))
}

fn jobs_batch(engine: &Engine) -> DfResult<RecordBatch> {
    let visible = engine.visible();
    let jobs = &visible.jobs;
    let text = |f: &dyn Fn(&crate::engine::JobInfo) -> Option<String>| -> ArrayRef {
        Arc::new(StringArray::from(jobs.iter().map(f).collect::<Vec<_>>()))
    };
    let int = |f: &dyn Fn(&crate::engine::JobInfo) -> Option<i64>| -> ArrayRef {
        Arc::new(Int64Array::from(jobs.iter().map(f).collect::<Vec<_>>()))
    };
    let last: Vec<Option<(u64, u64)>> = jobs
        .iter()
        .map(|j| {
            j.history
                .as_ref()
                .and_then(|h| h.last_completed())
                .map(|(id, e)| (id, e.0))
        })
        .collect();
    let mut columns: Vec<ArrayRef> = vec![
        text(&|j| Some(j.name.clone())),
        text(&|j| Some(j.status.to_string())),
        int(&|j| Some(j.restarts as i64)),
    ];
    for s in setting_names() {
        columns.push(text(&|j| j.settings.get(&s).cloned()));
    }
    columns.push(Arc::new(Int64Array::from(
        last.iter()
            .map(|l| l.map(|(id, _)| id as i64))
            .collect::<Vec<_>>(),
    )));
    columns.push(Arc::new(Int64Array::from(
        last.iter()
            .map(|l| l.map(|(_, e)| e as i64))
            .collect::<Vec<_>>(),
    )));
    columns.push(int(&|j| {
        j.recovery
            .as_ref()
            .and_then(|r| r.checkpoint_id.map(|c| c as i64))
    }));
    columns.push(int(&|j| j.recovery.as_ref().map(|r| r.epoch.0 as i64)));
    columns.push(int(&|j| {
        j.recovery.as_ref().map(|r| r.replayed_rows as i64)
    }));
    columns.push(text(&|j| j.failure.clone()));
    Ok(RecordBatch::try_new(jobs_schema(), columns)?)
}

fn checkpoints_batch(engine: &Engine) -> DfResult<RecordBatch> {
    let visible = engine.visible();
    let records: Vec<crate::checkpoint::CheckpointRecord> = visible
        .jobs
        .iter()
        .filter_map(|j| j.history.as_ref())
        .flat_map(|h| h.records())
        .collect();
    let ts = |v: Vec<Option<i64>>| -> ArrayRef {
        Arc::new(
            TimestampMicrosecondArray::from(
                v.into_iter()
                    .map(|x| x.map(|ms| ms * 1000))
                    .collect::<Vec<_>>(),
            )
            .with_timezone("+00:00"),
        )
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(
            records.iter().map(|r| r.job.clone()).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            records
                .iter()
                .map(|r| r.checkpoint_id as i64)
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            records.iter().map(|r| r.epoch as i64).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            records
                .iter()
                .map(|r| r.status.as_str())
                .collect::<Vec<_>>(),
        )),
        ts(records.iter().map(|r| Some(r.trigger_unix_ms)).collect()),
        ts(records.iter().map(|r| r.end_unix_ms).collect()),
        Arc::new(Int64Array::from(
            records.iter().map(|r| r.duration_ms).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            records.iter().map(|r| r.alignment_ms).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            records.iter().map(|r| r.state_bytes).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            records
                .iter()
                .map(|r| r.persisted_bytes)
                .collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            records
                .iter()
                .map(|r| r.failure_reason.clone())
                .collect::<Vec<_>>(),
        )),
    ];
    Ok(RecordBatch::try_new(checkpoints_schema(), columns)?)
}

/// The schema of `weir_catalog.memory`.
pub fn memory_schema() -> SchemaRef {
    Arc::new(Schema::new(
        [
            "limit_bytes",
            "cache_bytes",
            "memtable_bytes",
            "disk_bytes",
            "rss_bytes",
        ]
        .iter()
        .map(|n| Field::new(*n, DataType::Int64, true))
        .collect::<Vec<_>>(),
    ))
}

/// The process's resident set size in bytes (Linux), `None` elsewhere.
fn resident_bytes() -> Option<i64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn memory_batch(engine: &Engine) -> DfResult<RecordBatch> {
    let usage = engine.memory_usage();
    let value = |v: u64| -> ArrayRef { Arc::new(Int64Array::from(vec![Some(v as i64)])) };
    let columns = vec![
        value(usage.limit),
        value(usage.cache),
        value(usage.memtables),
        value(usage.disk),
        Arc::new(Int64Array::from(vec![resident_bytes()])) as ArrayRef,
    ];
    Ok(RecordBatch::try_new(memory_schema(), columns)?)
}

/// The schema of `weir_catalog.sources`: one row per connector table.
pub fn sources_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("connector", DataType::Utf8, false),
        Field::new("nexmark_table", DataType::Utf8, false),
        Field::new("offset_events", DataType::Int64, false),
        Field::new("total_events", DataType::Int64, true),
        Field::new("rows", DataType::Int64, false),
        Field::new("status", DataType::Utf8, false),
        Field::new("failure", DataType::Utf8, true),
    ]))
}

fn sources_batch(engine: &Engine) -> DfResult<RecordBatch> {
    let rows = engine.sources();
    let text = |f: &dyn Fn(&crate::engine::SourceInfo) -> Option<String>| -> ArrayRef {
        Arc::new(StringArray::from(rows.iter().map(f).collect::<Vec<_>>()))
    };
    let int = |f: &dyn Fn(&crate::engine::SourceInfo) -> Option<i64>| -> ArrayRef {
        Arc::new(Int64Array::from(rows.iter().map(f).collect::<Vec<_>>()))
    };
    let columns = vec![
        text(&|r| Some(r.name.clone())),
        text(&|r| Some(r.connector.clone())),
        text(&|r| Some(r.nexmark_table.clone())),
        int(&|r| Some(r.offset_events as i64)),
        int(&|r| r.total_events.map(|e| e as i64)),
        int(&|r| Some(r.rows as i64)),
        text(&|r| Some(r.status.to_string())),
        text(&|r| r.failure.clone()),
    ];
    Ok(RecordBatch::try_new(sources_schema(), columns)?)
}

/// The schema of `weir_catalog.watermarks`: one row per column that carries a watermark, of
/// a table (its `WATERMARK FOR` column) or a view (a column its plan keeps the watermark of).
pub fn watermarks_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("relation", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("column_name", DataType::Utf8, false),
        Field::new("watermark", DataType::Utf8, true),
        Field::new("late_rows", DataType::Int64, true),
        Field::new("definition", DataType::Utf8, true),
    ]))
}

/// The schema of `weir_catalog.state_tables`: one row per state table of each job.
pub fn state_tables_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("job", DataType::Utf8, false),
        Field::new("state_table", DataType::Utf8, false),
        Field::new("rows", DataType::Int64, false),
    ]))
}

fn state_tables_batch(engine: &Engine) -> DfResult<RecordBatch> {
    let visible = engine.visible();
    let rows: Vec<(&str, &str, i64)> = visible
        .jobs
        .iter()
        .flat_map(|j| {
            j.state_rows
                .iter()
                .map(|(t, n)| (j.name.as_str(), t.as_str(), *n))
        })
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
    ];
    Ok(RecordBatch::try_new(state_tables_schema(), columns)?)
}

/// A watermark as PostgreSQL prints a value of its type (`2024-01-01 00:00:05`, and
/// `2024-01-01 00:00:05+00` for a `timestamptz`: an offset of whole hours without minutes).
fn watermark_text(v: &ScalarValue) -> Option<String> {
    let ScalarValue::Utf8(Some(s)) = v.cast_to(&DataType::Utf8).ok()? else {
        return None;
    };
    let mut s = s.replacen('T', " ", 1);
    if s.ends_with('Z') {
        s.pop();
        s.push_str("+00");
    } else if s.len() > 6 {
        let tail = &s.as_bytes()[s.len() - 6..];
        if matches!(tail[0], b'+' | b'-') && &tail[3..] == b":00" {
            s.truncate(s.len() - 3);
        }
    }
    Some(s)
}

fn watermarks_batch(engine: &Engine) -> DfResult<RecordBatch> {
    let rows = engine.watermark_infos();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.relation.as_str()),
        )),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.kind))),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.column.as_str()),
        )),
        Arc::new(StringArray::from(
            rows.iter()
                .map(|r| r.watermark.as_ref().and_then(watermark_text))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter()
                .map(|r| r.late_rows.map(|n| n as i64))
                .collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            rows.iter()
                .map(|r| r.definition.clone())
                .collect::<Vec<_>>(),
        )),
    ];
    Ok(RecordBatch::try_new(watermarks_schema(), columns)?)
}

#[async_trait]
impl SchemaProvider for WeirCatalogSchema {
    fn table_names(&self) -> Vec<String> {
        TABLES.iter().map(|t| t.to_string()).collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let batch = match name {
            "jobs" => jobs_batch(&self.engine)?,
            "checkpoints" => checkpoints_batch(&self.engine)?,
            "memory" => memory_batch(&self.engine)?,
            "sources" => sources_batch(&self.engine)?,
            "watermarks" => watermarks_batch(&self.engine)?,
            "state_tables" => state_tables_batch(&self.engine)?,
            _ => return Ok(None),
        };
        let table = MemTable::try_new(batch.schema(), vec![vec![batch]])?;
        Ok(Some(Arc::new(table)))
    }

    fn table_exist(&self, name: &str) -> bool {
        TABLES.contains(&name)
    }
}

/// The schema of Weir's system tables (`jobs`, `checkpoints`, `memory`, `sources`).
pub const SYSTEM_SCHEMA: &str = "weir_catalog";

/// The OID of the primary key index of the table with catalog id `id` is this plus `id`
/// (in `pg_class` and `pg_index`).
pub const PRIMARY_KEY_OID_BASE: i32 = 2_000_000;

/// The OID of the primary key constraint (in `pg_constraint`) of the table with catalog id
/// `id` is this plus `id`.
pub const PRIMARY_KEY_CONSTRAINT_OID_BASE: i32 = 3_000_000;

/// The OID of the secondary index with catalog id `id` in `pg_class` and `pg_index`
/// (datafusion-pg-catalog numbers tables and views from 16384 up; indexes get a range of
/// their own).
pub const INDEX_OID_BASE: i32 = 1_000_000;

/// `pg_catalog` as datafusion-pg-catalog builds it, with Weir's corrections: materialized
/// views get `relkind = 'm'` in `pg_class` (the library knows only tables and views), so
/// that psql's `\dm` lists them and `\d name` calls them materialized views; secondary
/// indexes appear in `pg_class` (`relkind = 'i'`, and `relhasindex` on their relations)
/// and in `pg_index`, so that psql's `\di` and the `Indexes:` of `\d name` show them;
/// `pg_matviews` lists the materialized views.
#[derive(Debug)]
pub struct PgCatalogOverlay {
    inner: Arc<dyn SchemaProvider>,
    engine: Arc<Engine>,
}

impl PgCatalogOverlay {
    /// Wraps the library's `pg_catalog` schema.
    pub fn new(inner: Arc<dyn SchemaProvider>, engine: Arc<Engine>) -> Self {
        PgCatalogOverlay { inner, engine }
    }

    /// One entry per secondary index and per table's primary key.
    fn indexes(&self) -> Vec<IndexRow> {
        catalog_indexes(&self.engine.catalog())
    }
}

/// An index as `pg_class`, `pg_index` and `pg_get_indexdef` show it: a secondary index or a
/// table's primary key (PostgreSQL backs a primary key with a unique index named
/// `<table>_pkey`).
#[derive(Debug, Clone)]
struct IndexRow {
    oid: i32,
    name: String,
    relation: String,
    /// The indexed relation's column names.
    column_names: Vec<String>,
    /// attnums (1-based).
    keys: Vec<i32>,
    descending: Vec<bool>,
    unique: bool,
    primary: bool,
}

/// Every index of `catalog`: its secondary indexes (OIDs from [`INDEX_OID_BASE`]) and its
/// tables' primary keys (OIDs from [`PRIMARY_KEY_OID_BASE`]).
fn catalog_indexes(catalog: &crate::catalog::Catalog) -> Vec<IndexRow> {
    let names = |r: &crate::catalog::RelationDef| -> Vec<String> {
        r.schema.fields().iter().map(|f| f.name().clone()).collect()
    };
    let secondary = catalog.visible_indexes().filter_map(|i| {
        let relation = catalog.get(i.relation)?;
        Some(IndexRow {
            oid: INDEX_OID_BASE + i32::try_from(i.id).ok()?,
            name: i.name.clone(),
            relation: relation.name.clone(),
            column_names: names(relation),
            keys: i.columns.iter().map(|c| c.column as i32 + 1).collect(),
            descending: i.columns.iter().map(|c| c.descending).collect(),
            unique: i.unique,
            primary: false,
        })
    });
    let primary = catalog.visible().filter_map(|r| {
        let crate::catalog::RelationKind::Table { primary_key } = &r.kind else {
            return None;
        };
        Some(IndexRow {
            oid: PRIMARY_KEY_OID_BASE + i32::try_from(r.id).ok()?,
            name: r.primary_key_index_name()?,
            relation: r.name.clone(),
            column_names: names(r),
            keys: primary_key.iter().map(|c| *c as i32 + 1).collect(),
            descending: vec![false; primary_key.len()],
            unique: true,
            primary: true,
        })
    });
    secondary.chain(primary).collect()
}

#[async_trait]
impl SchemaProvider for PgCatalogOverlay {
    fn table_names(&self) -> Vec<String> {
        let mut names = self.inner.table_names();
        if !names.iter().any(|n| n == "pg_indexes") {
            names.push("pg_indexes".into());
        }
        names
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        if name == "pg_indexes" && !self.inner.table_exist(name) {
            return pg_indexes(&self.indexes()).map(Some);
        }
        let table = self.inner.table(name).await?;
        match name {
            "pg_class" => {
                let views: std::collections::HashSet<String> = self
                    .engine
                    .catalog()
                    .visible()
                    .filter(|r| !r.is_table())
                    .map(|r| r.name.clone())
                    .collect();
                let indexes = self.indexes();
                let namespace = self.inner.table("pg_namespace").await?;
                Ok(table.map(|inner| {
                    Arc::new(Overlaid {
                        inner,
                        with: Overlay::Class {
                            views,
                            indexes,
                            namespace,
                        },
                    }) as Arc<dyn TableProvider>
                }))
            }
            "pg_index" | "pg_constraint" => {
                let Some(class) = self.inner.table("pg_class").await? else {
                    return Ok(table);
                };
                let indexes = self.indexes();
                let with = if name == "pg_index" {
                    Overlay::Index { class, indexes }
                } else {
                    Overlay::Constraint { class, indexes }
                };
                Ok(table.map(|inner| Arc::new(Overlaid { inner, with }) as Arc<dyn TableProvider>))
            }
            "pg_attribute" => {
                let (Some(class), Some(namespace)) = (
                    self.inner.table("pg_class").await?,
                    self.inner.table("pg_namespace").await?,
                ) else {
                    return Ok(table);
                };
                let modifiers = self
                    .engine
                    .catalog()
                    .visible()
                    .map(|r| {
                        let columns = r
                            .schema
                            .fields()
                            .iter()
                            .enumerate()
                            .map(|(c, f)| ColumnType {
                                modifier: r.type_modifier(c),
                                oid: column_type_oid(f),
                            })
                            .collect();
                        (r.name.clone(), columns)
                    })
                    .collect();
                Ok(table.map(|inner| {
                    Arc::new(Overlaid {
                        inner,
                        with: Overlay::Attribute {
                            class,
                            namespace,
                            modifiers,
                        },
                    }) as Arc<dyn TableProvider>
                }))
            }
            "pg_matviews" => {
                let indexes = self.indexes();
                let views = self
                    .engine
                    .catalog()
                    .visible()
                    .filter_map(|r| match &r.kind {
                        crate::catalog::RelationKind::MaterializedView { query, .. } => {
                            Some(MatViewRow {
                                name: r.name.clone(),
                                has_indexes: indexes.iter().any(|i| i.relation == r.name),
                                definition: view_definition(query),
                            })
                        }
                        _ => None,
                    })
                    .collect();
                Ok(table.map(|inner| {
                    Arc::new(Overlaid {
                        inner,
                        with: Overlay::MatViews { views },
                    }) as Arc<dyn TableProvider>
                }))
            }
            _ => Ok(table),
        }
    }

    fn table_exist(&self, name: &str) -> bool {
        name == "pg_indexes" || self.inner.table_exist(name)
    }
}

/// Reads every row of `table`.
async fn read_all(
    table: &Arc<dyn TableProvider>,
    state: &dyn datafusion::catalog::Session,
) -> DfResult<Vec<RecordBatch>> {
    let plan = table.scan(state, None, &[], None).await?;
    datafusion::physical_plan::collect(plan, state.task_ctx()).await
}

/// One row of `schema` with `values` by column name; other columns NULL when nullable,
/// else their type's zero (`0`, `false`, `''`).
fn one_row(
    schema: &SchemaRef,
    values: &std::collections::HashMap<&str, ScalarValue>,
) -> DfResult<RecordBatch> {
    let columns = schema
        .fields()
        .iter()
        .map(|f| {
            let v = match values.get(f.name().as_str()) {
                Some(v) => v.cast_to(f.data_type())?,
                None if f.is_nullable() => ScalarValue::try_new_null(f.data_type())?,
                None => ScalarValue::new_default(f.data_type())?,
            };
            v.to_array_of_size(1)
        })
        .collect::<DfResult<Vec<ArrayRef>>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// (`oid`, `relname`, `relnamespace`) of each relation in `pg_class` batches.
fn class_entries(batches: &[RecordBatch]) -> Vec<(ScalarValue, String, ScalarValue)> {
    let mut out = Vec::new();
    for b in batches {
        let schema = b.schema();
        let (Ok(oid), Ok(name), Ok(ns)) = (
            schema.index_of("oid"),
            schema.index_of("relname"),
            schema.index_of("relnamespace"),
        ) else {
            continue;
        };
        for i in 0..b.num_rows() {
            let (Ok(ScalarValue::Utf8(Some(n))), Ok(o), Ok(s)) = (
                ScalarValue::try_from_array(b.column(name), i),
                ScalarValue::try_from_array(b.column(oid), i),
                ScalarValue::try_from_array(b.column(ns), i),
            ) else {
                continue;
            };
            out.push((o, n, s));
        }
    }
    out
}

/// `relname` → (`oid`, `relnamespace`) of the relations in `pg_class` batches.
fn class_oids(
    batches: &[RecordBatch],
) -> std::collections::HashMap<String, (ScalarValue, ScalarValue)> {
    class_entries(batches)
        .into_iter()
        .map(|(o, n, s)| (n, (o, s)))
        .collect()
}

fn memory_exec(
    batches: Vec<RecordBatch>,
    schema: SchemaRef,
    projection: Option<&Vec<usize>>,
) -> DfResult<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
    datafusion::datasource::memory::MemorySourceConfig::try_new_exec(
        &[batches],
        schema,
        projection.cloned(),
    )
    .map(|p| p as Arc<dyn datafusion::physical_plan::ExecutionPlan>)
}

/// A table of the library's `pg_catalog` with Weir's rows and corrections.
#[derive(Debug)]
struct Overlaid {
    inner: Arc<dyn TableProvider>,
    with: Overlay,
}

/// What an [`Overlaid`] table changes.
#[derive(Debug)]
enum Overlay {
    /// `pg_class`: `relkind` set to `'m'` for Weir's materialized views, `relhasindex` for
    /// relations with secondary indexes, and one row per index (`relkind = 'i'`, `relam`
    /// 403: btree).
    /// Also `relkind = 'v'` for the relations of the `weir_catalog` schema: they are
    /// computed on read like PostgreSQL's system views, and so stay out of the lists of
    /// user tables that psql's `\dt`, SQLAlchemy and JDBC's `getTables` draw from `pg_class`.
    Class {
        views: std::collections::HashSet<String>,
        indexes: Vec<IndexRow>,
        /// The library's `pg_namespace`, for the OID of `weir_catalog`.
        namespace: Option<Arc<dyn TableProvider>>,
    },
    /// `pg_attribute`: `atttypmod` of the columns of Weir's tables declared with one
    /// (`varchar(n)`, `char(n)`, `numeric(p, s)`: psql's `\d`, JDBC's `getColumns` and
    /// SQLAlchemy show it), and `atttypid` as the protocol describes the column (the library
    /// shows `varchar`, `bpchar`, `interval` and arrays as `text`).
    Attribute {
        /// The library's `pg_class` and `pg_namespace`, for the OIDs of the relations.
        class: Arc<dyn TableProvider>,
        namespace: Arc<dyn TableProvider>,
        /// Each table's and materialized view's column types, by name (schema `public`).
        modifiers: std::collections::HashMap<String, Vec<ColumnType>>,
    },
    /// `pg_index`: one row per secondary index and primary key (after the library's rows);
    /// the vector columns as arrays ([`VECTOR_COLUMNS`]).
    Index {
        /// The library's `pg_class`, for the OIDs of the indexed relations.
        class: Arc<dyn TableProvider>,
        indexes: Vec<IndexRow>,
    },
    /// `pg_matviews`: one row per materialized view (the library's table is empty).
    MatViews { views: Vec<MatViewRow> },
    /// `pg_constraint`: one row per table's primary key (`contype = 'p'`, after the
    /// library's rows); `conkey` and `confkey` as arrays.
    Constraint {
        /// The library's `pg_class`, for the OIDs and schemas of the tables.
        class: Arc<dyn TableProvider>,
        indexes: Vec<IndexRow>,
    },
}

/// The columns that PostgreSQL types as `int2vector`, `oidvector` or `int2[]` and the
/// library keeps as text (`'1 2'`, `'[1, 2]'`), with their element types: Weir shows them
/// as arrays, which `unnest`, subscripts and `_pg_expandarray` take (SQLAlchemy's and
/// pgjdbc's primary key and index reflection read `indkey` so).
const VECTOR_COLUMNS: &[(&str, DataType)] = &[
    ("indkey", DataType::Int16),
    ("indoption", DataType::Int16),
    ("indcollation", DataType::Int32),
    ("indclass", DataType::Int32),
    ("conkey", DataType::Int16),
    ("confkey", DataType::Int16),
];

/// `schema` with the [`VECTOR_COLUMNS`] it has as lists of their element types.
fn with_vector_columns(schema: &SchemaRef) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(
            |f| match VECTOR_COLUMNS.iter().find(|(n, _)| n == f.name()) {
                Some((_, element)) if f.data_type() == &DataType::Utf8 => Field::new(
                    f.name(),
                    DataType::new_list(element.clone(), true),
                    f.is_nullable(),
                ),
                _ => f.as_ref().clone(),
            },
        )
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The numbers of a vector's text: `'1 2'` (int2vector), `'{1,2}'` or `'[1, 2]'`.
fn vector_elements(text: &str) -> Vec<i64> {
    text.split(|c: char| c.is_whitespace() || ",[]{}".contains(c))
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// `batches` (of `schema`, the library's) converted to [`with_vector_columns`]`(schema)`:
/// each vector column's text parsed into an array; NULL stays NULL.
fn vector_rows(batches: Vec<RecordBatch>, schema: &SchemaRef) -> DfResult<Vec<RecordBatch>> {
    let target = with_vector_columns(schema);
    batches
        .into_iter()
        .map(|b| {
            let columns = b
                .columns()
                .iter()
                .zip(target.fields())
                .map(|(column, field)| {
                    let DataType::List(element) = field.data_type() else {
                        return Ok(Arc::clone(column));
                    };
                    let Some(text) =
                        arrow::array::cast::AsArray::as_string_opt::<i32>(column.as_ref())
                    else {
                        return Ok(Arc::clone(column));
                    };
                    let lists = (0..arrow::array::Array::len(text))
                        .map(|i| {
                            if arrow::array::Array::is_null(text, i) {
                                return ScalarValue::try_new_null(field.data_type());
                            }
                            let values = vector_elements(text.value(i))
                                .into_iter()
                                .map(|v| ScalarValue::Int64(Some(v)).cast_to(element.data_type()))
                                .collect::<DfResult<Vec<_>>>()?;
                            Ok(ScalarValue::List(ScalarValue::new_list_nullable(
                                &values,
                                element.data_type(),
                            )))
                        })
                        .collect::<DfResult<Vec<_>>>()?;
                    if lists.is_empty() {
                        return Ok(arrow::array::new_empty_array(field.data_type()));
                    }
                    ScalarValue::iter_to_array(lists)
                })
                .collect::<DfResult<Vec<ArrayRef>>>()?;
            Ok(RecordBatch::try_new(Arc::clone(&target), columns)?)
        })
        .collect()
}

#[async_trait]
impl TableProvider for Overlaid {
    fn schema(&self) -> SchemaRef {
        match self.with {
            Overlay::Index { .. } | Overlay::Constraint { .. } => {
                with_vector_columns(&self.inner.schema())
            }
            Overlay::Class { .. } => with_class_columns(&self.inner.schema()),
            _ => self.inner.schema(),
        }
    }

    fn table_type(&self) -> datafusion::datasource::TableType {
        self.inner.table_type()
    }

    async fn scan(
        &self,
        state: &dyn datafusion::catalog::Session,
        projection: Option<&Vec<usize>>,
        _filters: &[datafusion::logical_expr::Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        let batches = read_all(&self.inner, state).await?;
        let schema = self.inner.schema();
        let out = match &self.with {
            Overlay::Class {
                views,
                indexes,
                namespace,
            } => {
                let system = match namespace {
                    Some(n) => namespace_oid(&read_all(n, state).await?, SYSTEM_SCHEMA),
                    None => None,
                };
                let rows = class_rows(batches, &schema, views, indexes, system.as_ref())?;
                with_reloptions(rows)?
            }
            Overlay::Attribute {
                class,
                namespace,
                modifiers,
            } => {
                let public = namespace_oid(&read_all(namespace, state).await?, "public");
                let tables = public_relations(&read_all(class, state).await?, public.as_ref());
                attribute_rows(batches, &schema, &tables, modifiers)?
            }
            Overlay::Index { class, indexes } => {
                let oids = class_oids(&read_all(class, state).await?);
                vector_rows(index_rows(batches, &schema, &oids, indexes)?, &schema)?
            }
            Overlay::Constraint { class, indexes } => {
                let oids = class_oids(&read_all(class, state).await?);
                vector_rows(constraint_rows(batches, &schema, &oids, indexes)?, &schema)?
            }
            Overlay::MatViews { views } => matview_rows(batches, &schema, views)?,
        };
        memory_exec(out, self.schema(), projection)
    }
}

/// A materialized view as `pg_matviews` shows it.
#[derive(Debug, Clone)]
struct MatViewRow {
    name: String,
    /// Whether an index is built on it.
    has_indexes: bool,
    /// Its query, as [`view_definition`] gives it.
    definition: String,
}

/// `batches` of `pg_matviews` (`schema`) followed by one row per view of `views`: schema
/// `public`, owner `postgres` (every relation's `relowner` is 0, which `pg_get_userbyid`
/// names `postgres`), no tablespace, always populated (a view is computed when created).
fn matview_rows(
    mut batches: Vec<RecordBatch>,
    schema: &SchemaRef,
    views: &[MatViewRow],
) -> DfResult<Vec<RecordBatch>> {
    for v in views {
        let values = std::collections::HashMap::from([
            ("schemaname", ScalarValue::from("public")),
            ("matviewname", ScalarValue::from(v.name.as_str())),
            ("matviewowner", ScalarValue::from("postgres")),
            ("hasindexes", ScalarValue::Boolean(Some(v.has_indexes))),
            ("ispopulated", ScalarValue::Boolean(Some(true))),
            ("definition", ScalarValue::from(v.definition.as_str())),
        ]);
        batches.push(one_row(schema, &values)?);
    }
    Ok(batches)
}

/// A view's query as PostgreSQL's `pg_get_viewdef` and `pg_matviews.definition` show it: a
/// leading space, the query, `;` (the query as written after `AS`, where PostgreSQL
/// deparses it).
fn view_definition(query: &str) -> String {
    format!(" {};", query.trim().trim_end_matches(';'))
}

/// The `oid` of the schema `name` in `pg_namespace` batches.
fn namespace_oid(batches: &[RecordBatch], name: &str) -> Option<ScalarValue> {
    batches.iter().find_map(|b| {
        let schema = b.schema();
        let (oid, nspname) = (
            schema.index_of("oid").ok()?,
            schema.index_of("nspname").ok()?,
        );
        (0..b.num_rows()).find_map(|i| {
            let n = ScalarValue::try_from_array(b.column(nspname), i).ok()?;
            (n == ScalarValue::Utf8(Some(name.to_string())))
                .then(|| ScalarValue::try_from_array(b.column(oid), i).ok())
                .flatten()
        })
    })
}

/// `oid` → `relname` of the relations of schema `public` (OID `public`) in `pg_class`
/// batches.
fn public_relations(
    batches: &[RecordBatch],
    public: Option<&ScalarValue>,
) -> std::collections::HashMap<ScalarValue, String> {
    class_entries(batches)
        .into_iter()
        .filter(|(_, _, ns)| Some(ns) == public)
        .map(|(o, n, _)| (o, n))
        .collect()
}

/// A column's type as `pg_attribute` shows it.
#[derive(Debug, Clone, Copy)]
struct ColumnType {
    /// The declared modifier (`varchar(n)`, `char(n)`, `numeric(p, s)`), for `atttypmod`.
    modifier: TypeModifier,
    /// The PostgreSQL type OID the protocol describes the column with, for `atttypid`.
    oid: Option<i32>,
}

/// The PostgreSQL type OID of a relation's column of Arrow field `f`, as a result row
/// describes it: `varchar` (1043) and `bpchar` (1042) from the field's text type marker,
/// otherwise arrow-pg's mapping of the Arrow type (`interval` 1186, `int4[]` 1007, ...).
fn column_type_oid(f: &Field) -> Option<i32> {
    use crate::common::schema::PgTextType;
    if f.data_type() == &DataType::Utf8 {
        match PgTextType::of(f.metadata()) {
            PgTextType::Varchar => return Some(1043),
            PgTextType::Bpchar(_) => return Some(1042),
            PgTextType::Text => {}
        }
    }
    let oid = arrow_pg::datatypes::into_pg_type(f.data_type()).ok()?.oid();
    i32::try_from(oid).ok()
}

/// `pg_attribute`'s rows with `atttypid` and `atttypmod` set from the column types of the
/// relations in `tables` (OID → name).
fn attribute_rows(
    batches: Vec<RecordBatch>,
    schema: &SchemaRef,
    tables: &std::collections::HashMap<ScalarValue, String>,
    modifiers: &std::collections::HashMap<String, Vec<ColumnType>>,
) -> DfResult<Vec<RecordBatch>> {
    let (Ok(rel_idx), Ok(num_idx), Ok(typ_idx), Ok(mod_idx)) = (
        schema.index_of("attrelid"),
        schema.index_of("attnum"),
        schema.index_of("atttypid"),
        schema.index_of("atttypmod"),
    ) else {
        return Ok(batches);
    };
    let mut out = Vec::with_capacity(batches.len());
    for b in batches {
        if b.num_rows() == 0 {
            out.push(b);
            continue;
        }
        let mut types = Vec::with_capacity(b.num_rows());
        let mut mods = Vec::with_capacity(b.num_rows());
        for i in 0..b.num_rows() {
            let old_type = ScalarValue::try_from_array(b.column(typ_idx), i)?;
            let old_mod = ScalarValue::try_from_array(b.column(mod_idx), i)?;
            let column = tables
                .get(&ScalarValue::try_from_array(b.column(rel_idx), i)?)
                .and_then(|name| modifiers.get(name))
                .and_then(|columns| {
                    let num = ScalarValue::try_from_array(b.column(num_idx), i).ok()?;
                    let num =
                        usize::try_from(i64::try_from(num.cast_to(&DataType::Int64).ok()?).ok()?)
                            .ok()?;
                    columns.get(num.checked_sub(1)?).copied()
                });
            let Some(column) = column else {
                types.push(old_type);
                mods.push(old_mod);
                continue;
            };
            let m = column.modifier;
            types.push(match m.type_oid().or(column.oid) {
                Some(oid) => {
                    ScalarValue::Int32(Some(oid)).cast_to(b.column(typ_idx).data_type())?
                }
                None => old_type,
            });
            mods.push(if m == TypeModifier::None {
                old_mod
            } else {
                ScalarValue::Int32(Some(m.typmod())).cast_to(b.column(mod_idx).data_type())?
            });
        }
        let mut columns = b.columns().to_vec();
        columns[typ_idx] = ScalarValue::iter_to_array(types)?;
        columns[mod_idx] = ScalarValue::iter_to_array(mods)?;
        out.push(RecordBatch::try_new(b.schema(), columns)?);
    }
    Ok(out)
}

/// The `pg_class` columns the library lacks, added after its own: `reloptions` (`text[]`,
/// the storage parameters of `WITH (...)`; NULL, as for a PostgreSQL relation created without
/// any). SQLAlchemy's table reflection and psql's `\d+` read it.
fn class_extra_fields() -> Vec<Field> {
    vec![Field::new(
        "reloptions",
        DataType::new_list(DataType::Utf8, true),
        true,
    )]
}

/// `schema` (the library's `pg_class`) with [`class_extra_fields`] when it lacks them.
fn with_class_columns(schema: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    for extra in class_extra_fields() {
        if schema.index_of(extra.name()).is_err() {
            fields.push(extra);
        }
    }
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// `pg_class` batches with the [`class_extra_fields`] they lack, all NULL.
fn with_reloptions(batches: Vec<RecordBatch>) -> DfResult<Vec<RecordBatch>> {
    batches
        .into_iter()
        .map(|b| {
            let schema = with_class_columns(&b.schema());
            let mut columns = b.columns().to_vec();
            for f in schema.fields().iter().skip(columns.len()) {
                columns.push(arrow::array::new_null_array(f.data_type(), b.num_rows()));
            }
            Ok(RecordBatch::try_new(schema, columns)?)
        })
        .collect()
}

/// `pg_class`'s rows with Weir's corrections and its indexes' rows; `system` is the OID of
/// the `weir_catalog` schema, whose relations are shown as views.
fn class_rows(
    batches: Vec<RecordBatch>,
    schema: &SchemaRef,
    views: &std::collections::HashSet<String>,
    indexes: &[IndexRow],
    system: Option<&ScalarValue>,
) -> DfResult<Vec<RecordBatch>> {
    let (Ok(name_idx), Ok(kind_idx), Ok(has_index_idx), Ok(ns_idx)) = (
        schema.index_of("relname"),
        schema.index_of("relkind"),
        schema.index_of("relhasindex"),
        schema.index_of("relnamespace"),
    ) else {
        return Ok(batches);
    };
    let indexed: std::collections::HashSet<&str> =
        indexes.iter().map(|i| i.relation.as_str()).collect();
    let oids = class_oids(&batches);
    let mut out = Vec::with_capacity(batches.len() + indexes.len());
    for b in batches {
        let names = arrow::array::cast::AsArray::as_string_opt::<i32>(b.column(name_idx).as_ref());
        let kinds = arrow::array::cast::AsArray::as_string_opt::<i32>(b.column(kind_idx).as_ref());
        let (Some(names), Some(kinds)) = (names, kinds) else {
            out.push(b);
            continue;
        };
        let fixed: StringArray = (0..b.num_rows())
            .map(|i| {
                let kind = arrow::array::Array::is_valid(kinds, i).then(|| kinds.value(i));
                let in_system = system.is_some_and(|oid| {
                    ScalarValue::try_from_array(b.column(ns_idx), i).is_ok_and(|ns| &ns == oid)
                });
                match kind {
                    Some("r") if in_system => Some("v"),
                    Some("v") if views.contains(names.value(i)) && !in_system => Some("m"),
                    k => k,
                }
            })
            .collect();
        let has_index: arrow::array::BooleanArray = (0..b.num_rows())
            .map(|i| {
                let flag = b
                    .column(has_index_idx)
                    .as_any()
                    .downcast_ref::<arrow::array::BooleanArray>()
                    .map(|a| a.value(i))
                    .unwrap_or(false);
                Some(flag || indexed.contains(names.value(i)))
            })
            .collect();
        let mut columns = b.columns().to_vec();
        columns[kind_idx] = Arc::new(fixed);
        columns[has_index_idx] = Arc::new(has_index);
        out.push(RecordBatch::try_new(b.schema(), columns)?);
    }
    for index in indexes {
        let Some((_, namespace)) = oids.get(&index.relation) else {
            continue;
        };
        let values = std::collections::HashMap::from([
            ("oid", ScalarValue::Int32(Some(index.oid))),
            ("relname", ScalarValue::Utf8(Some(index.name.clone()))),
            ("relnamespace", namespace.clone()),
            ("relam", ScalarValue::Int32(Some(403))),
            ("relfilenode", ScalarValue::Int32(Some(index.oid))),
            ("relpersistence", ScalarValue::Utf8(Some("p".into()))),
            ("relkind", ScalarValue::Utf8(Some("i".into()))),
            (
                "relnatts",
                ScalarValue::Int16(Some(index.keys.len() as i16)),
            ),
            ("relispopulated", ScalarValue::Boolean(Some(true))),
            ("relreplident", ScalarValue::Utf8(Some("n".into()))),
        ]);
        out.push(one_row(schema, &values)?);
    }
    Ok(out)
}

/// `pg_index`'s rows and one row per secondary index.
fn index_rows(
    mut out: Vec<RecordBatch>,
    schema: &SchemaRef,
    oids: &std::collections::HashMap<String, (ScalarValue, ScalarValue)>,
    indexes: &[IndexRow],
) -> DfResult<Vec<RecordBatch>> {
    for index in indexes {
        let Some((relation, _)) = oids.get(&index.relation) else {
            continue;
        };
        let join = |v: Vec<String>| ScalarValue::Utf8(Some(v.join(" ")));
        let n = index.keys.len() as i16;
        let values = std::collections::HashMap::from([
            ("indexrelid", ScalarValue::Int32(Some(index.oid))),
            ("indrelid", relation.clone()),
            ("indnatts", ScalarValue::Int16(Some(n))),
            ("indnkeyatts", ScalarValue::Int16(Some(n))),
            ("indisunique", ScalarValue::Boolean(Some(index.unique))),
            ("indisprimary", ScalarValue::Boolean(Some(index.primary))),
            ("indimmediate", ScalarValue::Boolean(Some(true))),
            ("indisvalid", ScalarValue::Boolean(Some(true))),
            ("indisready", ScalarValue::Boolean(Some(true))),
            ("indislive", ScalarValue::Boolean(Some(true))),
            (
                "indkey",
                join(index.keys.iter().map(|k| k.to_string()).collect()),
            ),
            ("indcollation", join(vec!["0".into(); index.keys.len()])),
            ("indclass", join(vec!["0".into(); index.keys.len()])),
            (
                // INDOPTION_DESC | INDOPTION_NULLS_FIRST for DESC (PostgreSQL's pg_index.h)
                "indoption",
                join(
                    index
                        .descending
                        .iter()
                        .map(|d| if *d { "3" } else { "0" }.to_string())
                        .collect(),
                ),
            ),
        ]);
        out.push(one_row(schema, &values)?);
    }
    Ok(out)
}

/// `pg_constraint`'s rows and one row per table's primary key (as PostgreSQL records the
/// constraint beside its index `<table>_pkey`: `contype = 'p'`, `conindid` the index,
/// `conkey` the key's attnums), with `conkey` as the library's text.
fn constraint_rows(
    mut out: Vec<RecordBatch>,
    schema: &SchemaRef,
    oids: &std::collections::HashMap<String, (ScalarValue, ScalarValue)>,
    indexes: &[IndexRow],
) -> DfResult<Vec<RecordBatch>> {
    for index in indexes.iter().filter(|i| i.primary) {
        let Some((relation, namespace)) = oids.get(&index.relation) else {
            continue;
        };
        let keys: Vec<String> = index.keys.iter().map(|k| k.to_string()).collect();
        let text = |v: &str| ScalarValue::Utf8(Some(v.to_string()));
        let values = std::collections::HashMap::from([
            (
                "oid",
                ScalarValue::Int32(Some(
                    index.oid - PRIMARY_KEY_OID_BASE + PRIMARY_KEY_CONSTRAINT_OID_BASE,
                )),
            ),
            ("conname", text(&index.name)),
            ("connamespace", namespace.clone()),
            ("contype", text("p")),
            ("convalidated", ScalarValue::Boolean(Some(true))),
            ("conrelid", relation.clone()),
            ("conindid", ScalarValue::Int32(Some(index.oid))),
            ("confupdtype", text(" ")),
            ("confdeltype", text(" ")),
            ("confmatchtype", text(" ")),
            ("conislocal", ScalarValue::Boolean(Some(true))),
            ("connoinherit", ScalarValue::Boolean(Some(true))),
            ("conkey", text(&keys.join(" "))),
        ]);
        out.push(one_row(schema, &values)?);
    }
    Ok(out)
}

/// `pg_get_indexdef(index_oid [, column integer, pretty boolean])`: the `CREATE INDEX`
/// statement of an index, a secondary index or a table's primary key (PostgreSQL's form:
/// `CREATE [UNIQUE] INDEX name ON public.rel USING btree (a, b DESC)`), or with a column
/// number `k > 0` the name of its `k`-th column; NULL for an OID that is no index. psql's
/// `\d` reads it for `Indexes:`.
///
/// Built by [`PgGetIndexDef::constraints`], it is `pg_get_constraintdef(constraint_oid [,
/// pretty boolean])` instead: a primary key constraint's definition, `PRIMARY KEY (a, b)`
/// (Weir's only constraints besides NOT NULL, which PostgreSQL 15 keeps out of
/// `pg_constraint`); NULL for another OID. pgAdmin, DBeaver and pg_dump read it.
#[derive(Debug)]
pub struct PgGetIndexDef {
    /// Weak: a view's plan could hold the function, and the engine holds the views.
    engine: std::sync::Weak<Engine>,
    /// `pg_get_constraintdef` rather than `pg_get_indexdef`.
    constraint: bool,
    signature: datafusion::logical_expr::Signature,
}

impl PgGetIndexDef {
    /// The function over `engine`'s catalog.
    pub fn new(engine: &Arc<Engine>) -> Self {
        PgGetIndexDef {
            engine: Arc::downgrade(engine),
            constraint: false,
            signature: datafusion::logical_expr::Signature::variadic_any(
                datafusion::logical_expr::Volatility::Stable,
            ),
        }
    }

    /// `pg_get_constraintdef` over `engine`'s catalog.
    pub fn constraints(engine: &Arc<Engine>) -> Self {
        PgGetIndexDef {
            constraint: true,
            ..Self::new(engine)
        }
    }

    fn definition(&self, oid: i64, column: i64) -> Option<String> {
        let engine = self.engine.upgrade()?;
        let oid = i32::try_from(oid).ok()?;
        // A primary key's constraint OID is its index's, moved to the constraints' range.
        let index = catalog_indexes(&engine.catalog()).into_iter().find(|i| {
            if self.constraint {
                i.primary && i.oid - PRIMARY_KEY_OID_BASE + PRIMARY_KEY_CONSTRAINT_OID_BASE == oid
            } else {
                i.oid == oid
            }
        })?;
        let name = |attnum: i32| -> Option<String> {
            let c = usize::try_from(attnum - 1).ok()?;
            Some(crate::sql::functions::text_format::quote_ident(
                index.column_names.get(c)?,
            ))
        };
        if self.constraint {
            let columns = index.keys.iter().map(|k| name(*k));
            let columns = columns.collect::<Option<Vec<String>>>()?;
            return Some(format!("PRIMARY KEY ({})", columns.join(", ")));
        }
        if column > 0 {
            let k = usize::try_from(column - 1).ok()?;
            return name(*index.keys.get(k)?);
        }
        index_definition(&index)
    }
}

/// The `CREATE [UNIQUE] INDEX name ON public.rel USING btree (a, b DESC)` statement of an
/// index, as PostgreSQL's `pg_get_indexdef` writes it; `None` when a key is no column.
fn index_definition(index: &IndexRow) -> Option<String> {
    let columns = index
        .keys
        .iter()
        .zip(&index.descending)
        .map(|(k, d)| {
            let c = usize::try_from(*k - 1).ok()?;
            let n = crate::sql::functions::text_format::quote_ident(index.column_names.get(c)?);
            Some(if *d { format!("{n} DESC") } else { n })
        })
        .collect::<Option<Vec<String>>>()?;
    Some(format!(
        "CREATE {}INDEX {} ON public.{} USING btree ({})",
        if index.unique { "UNIQUE " } else { "" },
        crate::sql::functions::text_format::quote_ident(&index.name),
        crate::sql::functions::text_format::quote_ident(&index.relation),
        columns.join(", ")
    ))
}

/// `pg_catalog.pg_indexes` (PostgreSQL docs 54.11): one row per index, `schemaname`,
/// `tablename`, `indexname` (`name`), `tablespace` (NULL: the default) and `indexdef`
/// (`text`, as [`index_definition`]).
fn pg_indexes(indexes: &[IndexRow]) -> DfResult<Arc<dyn TableProvider>> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("schemaname", DataType::Utf8, true),
        Field::new("tablename", DataType::Utf8, true),
        Field::new("indexname", DataType::Utf8, true),
        Field::new("tablespace", DataType::Utf8, true),
        Field::new("indexdef", DataType::Utf8, true),
    ]));
    let column = |f: &dyn Fn(&IndexRow) -> Option<String>| -> ArrayRef {
        Arc::new(indexes.iter().map(f).collect::<StringArray>())
    };
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            column(&|_| Some("public".into())),
            column(&|i| Some(i.relation.clone())),
            column(&|i| Some(i.name.clone())),
            column(&|_| None),
            column(&index_definition),
        ],
    )?;
    Ok(Arc::new(MemTable::try_new(schema, vec![vec![batch]])?))
}

impl PartialEq for PgGetIndexDef {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Weak::ptr_eq(&self.engine, &other.engine) && self.constraint == other.constraint
    }
}

impl Eq for PgGetIndexDef {}

impl std::hash::Hash for PgGetIndexDef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::sync::Weak::as_ptr(&self.engine).hash(state);
        self.constraint.hash(state);
    }
}

impl datafusion::logical_expr::ScalarUDFImpl for PgGetIndexDef {
    fn name(&self) -> &str {
        if self.constraint {
            "pg_get_constraintdef"
        } else {
            "pg_get_indexdef"
        }
    }

    fn signature(&self) -> &datafusion::logical_expr::Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(
        &self,
        args: datafusion::logical_expr::ScalarFunctionArgs,
    ) -> DfResult<datafusion::logical_expr::ColumnarValue> {
        if self.constraint && !(1..=2).contains(&args.args.len()) {
            return Err(datafusion::error::DataFusionError::Plan(
                "pg_get_constraintdef takes a constraint OID, and optionally a pretty flag".into(),
            ));
        }
        if args.args.is_empty() || args.args.len() > 3 {
            return Err(datafusion::error::DataFusionError::Plan(
                "pg_get_indexdef takes an index OID, and optionally a column number and a pretty flag"
                    .into(),
            ));
        }
        let n = args.number_rows;
        let arrays = datafusion::logical_expr::ColumnarValue::values_to_arrays(&args.args)?;
        let as_i64 = |a: &ArrayRef| arrow::compute::cast(a, &DataType::Int64);
        let oids = as_i64(&arrays[0])?;
        let oids = arrow::array::cast::AsArray::as_primitive::<arrow::datatypes::Int64Type>(&oids);
        // pg_get_constraintdef's second argument is the pretty flag, no column number.
        let columns = match arrays.get(1).filter(|_| !self.constraint) {
            Some(a) => Some(as_i64(a)?),
            None => None,
        };
        let columns = columns
            .as_ref()
            .map(arrow::array::cast::AsArray::as_primitive::<arrow::datatypes::Int64Type>);
        let out: StringArray = (0..n)
            .map(|i| {
                if arrow::array::Array::is_null(oids, i) {
                    return None;
                }
                let column = match columns {
                    Some(c) if arrow::array::Array::is_null(c, i) => return None,
                    Some(c) => c.value(i),
                    None => 0,
                };
                self.definition(oids.value(i), column)
            })
            .collect();
        Ok(datafusion::logical_expr::ColumnarValue::Array(Arc::new(
            out,
        )))
    }
}

/// `weir_view_definition(name text) → text`: the defining query of the materialized view
/// `name`, as PostgreSQL's `pg_get_viewdef` shows one (a leading space, the query, `;`),
/// with the query as it was written after `AS`; NULL for a name that is no view. Weir's
/// form of `pg_get_viewdef(oid)` (see [`crate::sql::parse`]), which looks the OID's name up
/// in `pg_class` first; psql's `\d+` of a view reads it.
#[derive(Debug)]
pub struct ViewDefinition {
    /// Weak: a view's plan could hold the function, and the engine holds the views.
    engine: std::sync::Weak<Engine>,
    signature: datafusion::logical_expr::Signature,
}

impl ViewDefinition {
    /// The function over `engine`'s catalog.
    pub fn new(engine: &Arc<Engine>) -> Self {
        ViewDefinition {
            engine: Arc::downgrade(engine),
            signature: datafusion::logical_expr::Signature::exact(
                vec![DataType::Utf8],
                datafusion::logical_expr::Volatility::Stable,
            ),
        }
    }
}

impl PartialEq for ViewDefinition {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Weak::ptr_eq(&self.engine, &other.engine)
    }
}

impl Eq for ViewDefinition {}

impl std::hash::Hash for ViewDefinition {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::sync::Weak::as_ptr(&self.engine).hash(state);
    }
}

impl datafusion::logical_expr::ScalarUDFImpl for ViewDefinition {
    fn name(&self) -> &str {
        "weir_view_definition"
    }

    fn signature(&self) -> &datafusion::logical_expr::Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(
        &self,
        args: datafusion::logical_expr::ScalarFunctionArgs,
    ) -> DfResult<datafusion::logical_expr::ColumnarValue> {
        let n = args.number_rows;
        let arrays = datafusion::logical_expr::ColumnarValue::values_to_arrays(&args.args)?;
        let names = arrow::compute::cast(&arrays[0], &DataType::Utf8)?;
        let names = arrow::array::cast::AsArray::as_string::<i32>(&names);
        let catalog = self.engine.upgrade().map(|e| e.catalog());
        let out: StringArray = (0..n)
            .map(|i| {
                if arrow::array::Array::is_null(names, i) {
                    return None;
                }
                let name = names.value(i);
                catalog.as_ref()?.visible().find_map(|r| match &r.kind {
                    crate::catalog::RelationKind::MaterializedView { query, .. }
                        if r.name == name =>
                    {
                        Some(view_definition(query))
                    }
                    _ => None,
                })
            })
            .collect();
        Ok(datafusion::logical_expr::ColumnarValue::Array(Arc::new(
            out,
        )))
    }
}

/// Weir's roles for datafusion-pg-catalog's `pg_roles` (what psql's `\du` and drivers read):
/// name, `rolsuper` and `rolcanlogin`; Weir's roles have no other attributes, so those are
/// false. A session's user that is no role (a trusted connection) is not listed, as it is not
/// a role.
#[derive(Debug, Clone)]
pub struct RoleCatalog {
    /// Weak: the engine holds the shared `pg_catalog` schema that holds this.
    engine: std::sync::Weak<Engine>,
}

impl RoleCatalog {
    /// The roles of `engine`.
    pub fn new(engine: &Arc<Engine>) -> Self {
        RoleCatalog {
            engine: Arc::downgrade(engine),
        }
    }
}

#[async_trait]
impl datafusion_pg_catalog::pg_catalog::context::PgCatalogContextProvider for RoleCatalog {
    async fn roles(&self) -> Vec<String> {
        let Some(engine) = self.engine.upgrade() else {
            return Vec::new();
        };
        engine.roles().into_iter().map(|r| r.name).collect()
    }

    /// Always a role: one dropped since [`Self::roles`] listed it shows without attributes
    /// (the library expects every listed name to resolve).
    async fn role(&self, name: &str) -> Option<datafusion_pg_catalog::pg_catalog::context::Role> {
        let role = self.engine.upgrade().and_then(|e| e.role(name));
        Some(datafusion_pg_catalog::pg_catalog::context::Role {
            name: name.to_string(),
            is_superuser: role.as_ref().is_some_and(|r| r.superuser),
            can_login: role.as_ref().is_some_and(|r| r.login),
            can_create_db: false,
            can_create_role: false,
            can_create_user: false,
            can_replication: false,
            grants: Vec::new(),
            inherited_roles: Vec::new(),
        })
    }
}

/// The relations datafusion-pg-catalog lists in `pg_class`, `pg_attribute` and `pg_namespace`:
/// database `weir` with schemas `pg_catalog`, `public` and `weir_catalog`. It reads the
/// engine's catalog at each query, as a session's own schemas do, but belongs to no session,
/// so one `pg_catalog` schema can serve them all ([`shared_pg_catalog`]).
#[derive(Debug, Clone)]
struct EngineCatalogInfo {
    /// Weak: the engine holds the schema that holds this.
    engine: std::sync::Weak<Engine>,
    /// The shared `pg_catalog` schema itself, set once it is built (weak for the same reason).
    pg_catalog: Arc<std::sync::OnceLock<std::sync::Weak<dyn SchemaProvider>>>,
}

impl EngineCatalogInfo {
    fn schema(&self, catalog: &str, schema: &str) -> Option<Arc<dyn SchemaProvider>> {
        if catalog != crate::session::DATABASE {
            return None;
        }
        match schema {
            "pg_catalog" => self.pg_catalog.get()?.upgrade(),
            "public" => Some(Arc::new(crate::sql::provider::PublicSchema::new(
                self.engine.upgrade()?,
            ))),
            SYSTEM_SCHEMA => Some(Arc::new(WeirCatalogSchema::new(self.engine.upgrade()?))),
            _ => None,
        }
    }

    async fn table(
        &self,
        catalog: &str,
        schema: &str,
        table: &str,
    ) -> DfResult<Option<Arc<dyn TableProvider>>> {
        match self.schema(catalog, schema) {
            Some(s) => s.table(table).await,
            None => Ok(None),
        }
    }
}

#[async_trait]
impl datafusion_pg_catalog::pg_catalog::catalog_info::CatalogInfo for EngineCatalogInfo {
    async fn catalog_names(&self) -> DfResult<Vec<String>> {
        Ok(vec![crate::session::DATABASE.to_string()])
    }

    async fn schema_names(&self, catalog: &str) -> DfResult<Option<Vec<String>>> {
        Ok((catalog == crate::session::DATABASE).then(|| {
            ["pg_catalog", "public", SYSTEM_SCHEMA]
                .map(String::from)
                .to_vec()
        }))
    }

    async fn table_names(&self, catalog: &str, schema: &str) -> DfResult<Option<Vec<String>>> {
        Ok(self.schema(catalog, schema).map(|s| s.table_names()))
    }

    async fn table_schema(
        &self,
        catalog: &str,
        schema: &str,
        table: &str,
    ) -> DfResult<Option<SchemaRef>> {
        Ok(self
            .table(catalog, schema, table)
            .await?
            .map(|t| t.schema()))
    }

    async fn table_type(
        &self,
        catalog: &str,
        schema: &str,
        table: &str,
    ) -> DfResult<Option<datafusion::datasource::TableType>> {
        Ok(self
            .table(catalog, schema, table)
            .await?
            .map(|t| t.table_type()))
    }
}

/// The `pg_catalog` schema every session of `engine` reads (before
/// [`PgCatalogOverlay`] adds Weir's rows).
///
/// datafusion-pg-catalog numbers relations, schemas and their row types (OIDs from 16384) in
/// the order it first meets them, and keeps the numbers in its schema. One schema per
/// session gave a table a different OID in each session, so a driver that looked an OID up
/// on one connection of a pool and used it on another read the wrong relation. This schema
/// is built once per engine, so an OID means one relation for as long as the server runs.
/// OIDs are not kept across restarts (PostgreSQL's are); drivers look them up per
/// connection.
///
/// # Errors
/// `Error::Internal` when the library cannot build its static tables.
pub fn shared_pg_catalog(engine: &Arc<Engine>) -> crate::error::Result<Arc<dyn SchemaProvider>> {
    engine.pg_catalog(|| {
        let info = EngineCatalogInfo {
            engine: Arc::downgrade(engine),
            pg_catalog: Arc::new(std::sync::OnceLock::new()),
        };
        let internal = |e: datafusion::error::DataFusionError| {
            crate::error::Error::Internal(format!("pg_catalog setup: {e}"))
        };
        let statics = Arc::new(
            datafusion_pg_catalog::pg_catalog::PgCatalogStaticTables::try_new()
                .map_err(internal)?,
        );
        let pg: Arc<dyn SchemaProvider> = Arc::new(
            datafusion_pg_catalog::pg_catalog::PgCatalogSchemaProvider::try_new(
                info.clone(),
                statics,
                RoleCatalog::new(engine),
            )
            .map_err(internal)?,
        );
        let _ = info.pg_catalog.set(Arc::downgrade(&pg));
        Ok(pg)
    })
}

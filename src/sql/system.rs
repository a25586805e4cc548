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

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::Result as DfResult;

use crate::engine::Engine;
use crate::session::SessionVars;

const TABLES: &[&str] = &["checkpoints", "jobs"];

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

#[async_trait]
impl SchemaProvider for WeirCatalogSchema {
    fn table_names(&self) -> Vec<String> {
        TABLES.iter().map(|t| t.to_string()).collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let batch = match name {
            "jobs" => jobs_batch(&self.engine)?,
            "checkpoints" => checkpoints_batch(&self.engine)?,
            _ => return Ok(None),
        };
        let table = MemTable::try_new(batch.schema(), vec![vec![batch]])?;
        Ok(Some(Arc::new(table)))
    }

    fn table_exist(&self, name: &str) -> bool {
        TABLES.contains(&name)
    }
}

/// `pg_catalog` as datafusion-pg-catalog builds it, with one correction: materialized views
/// get `relkind = 'm'` in `pg_class` (the library knows only tables and views), so that psql's
/// `\dm` lists them and `\d name` calls them materialized views.
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
}

#[async_trait]
impl SchemaProvider for PgCatalogOverlay {
    fn table_names(&self) -> Vec<String> {
        self.inner.table_names()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let table = self.inner.table(name).await?;
        if name != "pg_class" {
            return Ok(table);
        }
        let views: std::collections::HashSet<String> = self
            .engine
            .catalog()
            .relations()
            .filter(|r| !r.is_table())
            .map(|r| r.name.clone())
            .collect();
        Ok(table
            .map(|inner| Arc::new(PgClassWithMatViews { inner, views }) as Arc<dyn TableProvider>))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.inner.table_exist(name)
    }
}

/// `pg_class` with `relkind` set to `'m'` for Weir's materialized views.
#[derive(Debug)]
struct PgClassWithMatViews {
    inner: Arc<dyn TableProvider>,
    views: std::collections::HashSet<String>,
}

#[async_trait]
impl TableProvider for PgClassWithMatViews {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
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
        let plan = self.inner.scan(state, None, &[], None).await?;
        let batches = datafusion::physical_plan::collect(plan, state.task_ctx()).await?;
        let schema = self.inner.schema();
        let (Ok(name_idx), Ok(kind_idx)) = (schema.index_of("relname"), schema.index_of("relkind"))
        else {
            return datafusion::datasource::memory::MemorySourceConfig::try_new_exec(
                &[batches],
                schema,
                projection.cloned(),
            )
            .map(|p| p as Arc<dyn datafusion::physical_plan::ExecutionPlan>);
        };
        let mut out = Vec::with_capacity(batches.len());
        for b in batches {
            let names =
                arrow::array::cast::AsArray::as_string_opt::<i32>(b.column(name_idx).as_ref());
            let kinds =
                arrow::array::cast::AsArray::as_string_opt::<i32>(b.column(kind_idx).as_ref());
            let (Some(names), Some(kinds)) = (names, kinds) else {
                out.push(b);
                continue;
            };
            let fixed: StringArray = (0..b.num_rows())
                .map(|i| {
                    let kind = arrow::array::Array::is_valid(kinds, i).then(|| kinds.value(i));
                    match kind {
                        Some("v") if self.views.contains(names.value(i)) => Some("m"),
                        k => k,
                    }
                })
                .collect();
            let mut columns = b.columns().to_vec();
            columns[kind_idx] = Arc::new(fixed);
            out.push(RecordBatch::try_new(b.schema(), columns)?);
        }
        datafusion::datasource::memory::MemorySourceConfig::try_new_exec(
            &[out],
            schema,
            projection.cloned(),
        )
        .map(|p| p as Arc<dyn datafusion::physical_plan::ExecutionPlan>)
    }
}

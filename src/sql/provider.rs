//! DataFusion catalog adapters: the `public` schema and one `TableProvider` per relation.

use std::sync::{Arc, Mutex, Weak};

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};

use crate::common::RelationId;
use crate::engine::{Engine, ViewState, Visible};
use crate::state::table::{KeyLayout, SCAN_BATCH_ROWS};
use crate::state::{KeyRange, StateSnapshot};

/// The `public` schema: every table and materialized view of the catalog.
///
/// A statement pins one [`Visible`] snapshot so that all the views it reads are at one epoch.
#[derive(Debug)]
pub struct PublicSchema {
    engine: Arc<Engine>,
    pinned: Arc<Mutex<Option<Arc<Visible>>>>,
}

impl PublicSchema {
    /// A schema over the engine's catalog.
    pub fn new(engine: Arc<Engine>) -> Self {
        PublicSchema {
            engine,
            pinned: Arc::new(Mutex::new(None)),
        }
    }

    /// Pins the views' snapshot for the next statement (`None` unpins).
    pub fn pin(&self, visible: Option<Arc<Visible>>) {
        *self.pinned.lock().unwrap_or_else(|e| e.into_inner()) = visible;
    }
}

#[async_trait]
impl SchemaProvider for PublicSchema {
    fn table_names(&self) -> Vec<String> {
        self.engine
            .catalog()
            .relations()
            .map(|r| r.name.clone())
            .collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let Some(def) = self.engine.relation(name) else {
            return Ok(None);
        };
        let layouts = self
            .engine
            .key_layouts(def.id, def.schema_ref())
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(Some(Arc::new(RelationProvider {
            id: def.id,
            name: def.name.clone(),
            schema: def.typed_schema(),
            layouts,
            is_table: def.is_table(),
            append_only: def.time.append_only || def.connector.is_some(),
            watermark_columns: def.time.watermarked(),
            engine: Arc::downgrade(&self.engine),
            pinned: Arc::clone(&self.pinned),
        }) as Arc<dyn TableProvider>))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.engine.relation(name).is_some()
    }
}

/// A table or materialized view as DataFusion sees it.
#[derive(Debug)]
pub struct RelationProvider {
    /// Catalog id.
    pub id: RelationId,
    /// Name.
    pub name: String,
    schema: SchemaRef,
    /// How the relation's rows are ordered, then each secondary index's order (for filter
    /// pushdown).
    layouts: Vec<Arc<KeyLayout>>,
    is_table: bool,
    /// Whether the relation only ever grows (see `TableTime::append_only`).
    pub append_only: bool,
    /// Its columns that carry a watermark.
    pub watermark_columns: Vec<usize>,
    /// Weak: a job's plan keeps its providers, and the engine keeps the jobs.
    engine: Weak<Engine>,
    pinned: Arc<Mutex<Option<Arc<Visible>>>>,
}

#[async_trait]
impl TableProvider for RelationProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        if self.is_table {
            TableType::Base
        } else {
            TableType::View
        }
    }

    /// Filters `column op literal` on a leading key column (a table's primary key, else its
    /// first columns; a view's group or stream key; an index's first columns) narrow the scan
    /// to a key range; DataFusion still applies them to the rows read (`Inexact`).
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if self.layouts.iter().any(|l| StateSnapshot::can_narrow(l, f)) {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    /// Reads the relation's snapshot (a table's latest acknowledged rows, a view's rows at
    /// the statement's pinned epoch): O(log n + rows in the filters' key range).
    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let engine = self
            .engine
            .upgrade()
            .ok_or_else(|| DataFusionError::Execution("the server is shutting down".into()))?;
        let snapshot = if self.is_table {
            engine
                .table_snapshot(self.id)
                .map_err(|e| DataFusionError::External(Box::new(e)))?
        } else {
            let pinned = self
                .pinned
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let visible = pinned.unwrap_or_else(|| engine.visible());
            match visible.views.get(&self.id) {
                Some(ViewState::Ready(s)) => s.clone(),
                Some(ViewState::Failed {
                    view,
                    code,
                    message,
                }) => {
                    return Err(DataFusionError::External(Box::new(
                        crate::error::Error::Execution {
                            view: view.clone(),
                            source: Box::new(crate::error::Error::data(code, message.clone())),
                        },
                    )));
                }
                None => {
                    return Err(DataFusionError::Plan(format!(
                        "materialized view \"{}\" is not available",
                        self.name
                    )));
                }
            }
        };
        let external = |e: crate::error::Error| DataFusionError::External(Box::new(e));
        // The relation's own rows or the index that the filters narrow most.
        let (chosen, range) = snapshot.choose(filters).map_err(external)?;
        // A limit reaches the scan only when no filter remains above it.
        let partition = SnapshotPartition {
            schema: self.schema.clone(),
            rows: chosen.clone(),
            range,
            limit,
        };
        Ok(Arc::new(StreamingTableExec::try_new(
            self.schema.clone(),
            vec![Arc::new(partition)],
            projection,
            Vec::new(),
            false,
            limit,
        )?))
    }
}

/// One relation's rows in a key range, read from a frozen snapshot batch by batch
/// ([`SCAN_BATCH_ROWS`] rows) as the query pulls them: a full scan holds one batch of the
/// relation at a time, not all of it.
#[derive(Debug)]
struct SnapshotPartition {
    schema: SchemaRef,
    rows: StateSnapshot,
    range: KeyRange,
    limit: Option<usize>,
}

impl PartitionStream for SnapshotPartition {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let schema = self.schema.clone();
        let start = (self.rows.clone(), Some(self.range.clone()), self.limit);
        let stream = futures::stream::unfold(start, move |(rows, range, left)| {
            let schema = schema.clone();
            async move {
                let range = range?;
                if left == Some(0) {
                    return None;
                }
                let max = left.map_or(SCAN_BATCH_ROWS, |l| l.min(SCAN_BATCH_ROWS));
                let read = rows
                    .scan_chunk(&range, max)
                    .map_err(|e| DataFusionError::External(Box::new(e)))
                    .and_then(|(b, rest)| {
                        // The snapshot's field names may differ from the relation's.
                        let b = if b.schema() != schema {
                            arrow::array::RecordBatch::try_new(schema, b.columns().to_vec())?
                        } else {
                            b
                        };
                        Ok((b, rest))
                    });
                Some(match read {
                    Ok((b, rest)) => {
                        let left = left.map(|l| l.saturating_sub(b.num_rows()));
                        (Ok(b), (rows, rest, left))
                    }
                    Err(e) => (Err(e), (rows, None, Some(0))),
                })
            }
        });
        Box::pin(RecordBatchStreamAdapter::new(self.schema.clone(), stream))
    }
}

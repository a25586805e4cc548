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

use std::collections::HashMap;

use arrow::array::{BooleanArray, RecordBatch, RecordBatchOptions, UInt32Array};
use futures::StreamExt;

use crate::common::{ChangeBatch, RelationId};
use crate::engine::{Engine, ViewState, Visible};
use crate::state::table::row_converter;
use crate::state::table::{KeyLayout, SCAN_BATCH_ROWS};
use crate::state::{KeyRange, StateSnapshot};

/// The `public` schema: every table and materialized view of the catalog.
///
/// A statement pins one [`Visible`] snapshot so that all the views it reads are at one epoch.
#[derive(Debug)]
pub struct PublicSchema {
    engine: Arc<Engine>,
    pinned: Arc<Mutex<Option<Arc<Visible>>>>,
    pending: Pending,
}

/// A session's open transaction block's writes not yet committed: each table's net change
/// (rows with signed weights, in the table's columns), which the session's own reads of the
/// table see on top of its committed rows.
pub type Pending = Arc<Mutex<HashMap<RelationId, Arc<ChangeBatch>>>>;

impl PublicSchema {
    /// A schema over the engine's catalog.
    pub fn new(engine: Arc<Engine>) -> Self {
        PublicSchema {
            engine,
            pinned: Arc::new(Mutex::new(None)),
            pending: Pending::default(),
        }
    }

    /// Sets the block's uncommitted writes the session's reads see (empty: none).
    pub fn set_pending(&self, pending: HashMap<RelationId, Arc<ChangeBatch>>) {
        *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = pending;
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
            .visible()
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
            pending: Arc::clone(&self.pending),
            primary_key: match &def.kind {
                crate::catalog::RelationKind::Table { primary_key } => primary_key.clone(),
                _ => Vec::new(),
            },
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
    pending: Pending,
    /// A table's primary key columns (empty: none).
    primary_key: Vec<usize>,
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
    /// the statement's pinned epoch): O(log n + rows in the filters' key range). Inside a
    /// transaction block that wrote to the table, its uncommitted net change is merged in
    /// (its retracted rows left out, its inserted rows added): O(rows of the change) more.
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
        let pending = if self.is_table {
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&self.id)
                .cloned()
        } else {
            None
        };
        // A limit reaches the scan only when no filter remains above it; with a block's
        // changes merged in, rows are taken out after the scan, so none is cut short.
        let limit = if pending.is_some() { None } else { limit };
        let base = SnapshotPartition {
            schema: self.schema.clone(),
            rows: chosen.clone(),
            range,
            limit,
        };
        let partition: Arc<dyn PartitionStream> = match pending {
            Some(change) => Arc::new(PendingPartition::new(base, &change, &self.primary_key)?),
            None => Arc::new(base),
        };
        Ok(Arc::new(StreamingTableExec::try_new(
            self.schema.clone(),
            vec![partition],
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

/// A table's primary key columns and the encodings of the keys a block changed.
type TouchedKeys = (Vec<usize>, std::collections::HashSet<Box<[u8]>>);

/// A table's rows as a transaction block sees them: the committed rows of `base` without the
/// rows the block's net change retracts (each once per unit of weight), then the rows it
/// inserts (repeated by weight). In a table with a primary key, every committed row with a
/// key the block changed is left out instead, so the block sees its own version of each such
/// key even when another session has committed another one since (its `COMMIT` then fails).
#[derive(Debug)]
struct PendingPartition {
    base: SnapshotPartition,
    /// Row encoding of a retracted row → how many of its copies are to be left out.
    retracted: HashMap<Box<[u8]>, i64>,
    /// The primary key columns and the encodings of the keys the block changed.
    touched: Option<TouchedKeys>,
    /// The inserted rows, in the relation's schema.
    inserted: RecordBatch,
}

impl PendingPartition {
    /// Merges `change` (in the table's columns) into `base`.
    ///
    /// # Errors
    /// Arrow errors when the change does not fit the relation's schema.
    fn new(base: SnapshotPartition, change: &ChangeBatch, primary_key: &[usize]) -> DfResult<Self> {
        let schema = base.schema.clone();
        let touched = if primary_key.is_empty() {
            None
        } else {
            let keys = key_converter(&schema, primary_key)?.convert_columns(
                &primary_key
                    .iter()
                    .map(|c| change.batch.column(*c).clone())
                    .collect::<Vec<_>>(),
            )?;
            Some((
                primary_key.to_vec(),
                keys.iter().map(|k| k.data().into()).collect(),
            ))
        };
        let converter =
            row_converter(&schema).map_err(|e| DataFusionError::External(Box::new(e)))?;
        let rows = converter.convert_columns(change.batch.columns())?;
        let mut retracted: HashMap<Box<[u8]>, i64> = HashMap::new();
        let mut take: Vec<u32> = Vec::new();
        for (i, w) in change.weights.values().iter().enumerate() {
            if *w < 0 {
                *retracted.entry(rows.row(i).data().into()).or_default() -= w;
            } else {
                take.extend(std::iter::repeat_n(i as u32, *w as usize));
            }
        }
        let indices = UInt32Array::from(take);
        let columns = change
            .batch
            .columns()
            .iter()
            .map(|c| arrow::compute::take(c, &indices, None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let inserted = RecordBatch::try_new_with_options(
            schema,
            columns,
            &RecordBatchOptions::new().with_row_count(Some(indices.len())),
        )?;
        Ok(PendingPartition {
            base,
            retracted,
            touched,
            inserted,
        })
    }
}

impl PartitionStream for PendingPartition {
    fn schema(&self) -> &SchemaRef {
        &self.base.schema
    }

    fn execute(&self, ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let schema = self.base.schema.clone();
        let mut retracted = self.retracted.clone();
        let converter = row_converter(&schema);
        if let Some((columns, keys)) = self.touched.clone() {
            let converter = key_converter(&schema, &columns);
            let committed = self.base.execute(ctx).map(move |batch| {
                let batch = batch?;
                let converter = converter
                    .as_ref()
                    .map_err(|e| DataFusionError::Execution(e.to_string()))?;
                let cols: Vec<_> = columns.iter().map(|c| batch.column(*c).clone()).collect();
                let rows = converter.convert_columns(&cols)?;
                let keep: BooleanArray = (0..batch.num_rows())
                    .map(|i| Some(!keys.contains(rows.row(i).data())))
                    .collect();
                Ok(arrow::compute::filter_record_batch(&batch, &keep)?)
            });
            let inserted = self.inserted.clone();
            let stream = committed.chain(futures::stream::once(async move { Ok(inserted) }));
            return Box::pin(RecordBatchStreamAdapter::new(schema, stream));
        }
        let committed = self.base.execute(ctx).map(move |batch| {
            let batch = batch?;
            if retracted.is_empty() {
                return Ok(batch);
            }
            let converter = converter
                .as_ref()
                .map_err(|e| DataFusionError::Execution(e.to_string()))?;
            let rows = converter.convert_columns(batch.columns())?;
            let keep: BooleanArray = (0..batch.num_rows())
                .map(|i| match retracted.get_mut(rows.row(i).data()) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        Some(false)
                    }
                    _ => Some(true),
                })
                .collect();
            Ok(arrow::compute::filter_record_batch(&batch, &keep)?)
        });
        let inserted = self.inserted.clone();
        let stream = committed.chain(futures::stream::once(async move { Ok(inserted) }));
        Box::pin(RecordBatchStreamAdapter::new(schema, stream))
    }
}

/// A row converter over the `columns` of `schema` (a primary key).
///
/// # Errors
/// Arrow errors when a type has no row encoding.
fn key_converter(schema: &SchemaRef, columns: &[usize]) -> DfResult<arrow::row::RowConverter> {
    Ok(arrow::row::RowConverter::new(
        columns
            .iter()
            .map(|c| arrow::row::SortField::new(schema.field(*c).data_type().clone()))
            .collect(),
    )?)
}

//! DataFusion catalog adapters: the `public` schema and one `TableProvider` per relation.

use std::sync::{Arc, Mutex, Weak};

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use crate::engine::{Engine, ViewState, Visible};
use crate::stream::RelationId;

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
        Ok(self.engine.relation(name).map(|def| {
            Arc::new(RelationProvider {
                id: def.id,
                name: def.name.clone(),
                schema: def.schema_ref(),
                is_table: def.is_table(),
                engine: Arc::downgrade(&self.engine),
                pinned: Arc::clone(&self.pinned),
            }) as Arc<dyn TableProvider>
        }))
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
    is_table: bool,
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

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let engine = self
            .engine
            .upgrade()
            .ok_or_else(|| DataFusionError::Execution("the server is shutting down".into()))?;
        let batch = if self.is_table {
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
                Some(ViewState::Ready(b)) => b.clone(),
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
        let batch = if batch.schema() != self.schema {
            arrow::array::RecordBatch::try_new(self.schema.clone(), batch.columns().to_vec())?
        } else {
            batch.as_ref().clone()
        };
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            self.schema.clone(),
            projection.cloned(),
        )?)
    }
}

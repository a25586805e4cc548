//! Catalog changes: tables, materialized views (created, altered, resumed, dropped) and
//! secondary indexes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use arrow::datatypes::SchemaRef;
use tracing::{info, warn};

use crate::catalog::{
    Catalog, ConnectorDef, IndexDef, RelationDef, RelationKind, TableTime, TypeModifier,
};
use crate::checkpoint::JobSettings;
use crate::error::{Error, Result};
use crate::settings::SessionVars;
use crate::state::index::SecondaryIndex;
use crate::stream::job::{Job, JobStatus};
use crate::stream::plan::StreamPlan;

use super::{Dataflow, Engine, lock, name_free};
use crate::common::RelationId;

/// What `CREATE TABLE` declares of a table.
#[derive(Debug, Clone)]
pub struct TableSpec {
    /// The columns (names, Arrow types, nullability).
    pub schema: SchemaRef,
    /// Column indices of the primary key (empty: none).
    pub primary_key: Vec<usize>,
    /// The connector feeding the table, if any.
    pub connector: Option<ConnectorDef>,
    /// `APPEND ONLY` and the watermark.
    pub time: TableTime,
    /// The columns' declared type modifiers by column index (`varchar(n)` lengths that
    /// writes are held to, `numeric(p, s)`).
    pub type_modifiers: Vec<TypeModifier>,
    /// The columns' `DEFAULT` expressions as written, by column index.
    pub column_defaults: Vec<Option<String>>,
}

impl Engine {
    pub(super) fn persist_catalog(&self, catalog: &Catalog) -> Result<()> {
        self.store.put_meta("catalog", &catalog.to_json()?)
    }

    /// Creates a table as `spec` declares it, in transaction `txn` (a name that transaction
    /// dropped is free to it, see [`Catalog::name_taken`]).
    ///
    /// # Errors
    /// `42P07` when the name is taken (unless `if_not_exists`); store errors; `57P01` once the
    /// engine is shutting down.
    pub fn create_table(
        &self,
        name: &str,
        spec: TableSpec,
        if_not_exists: bool,
        txn: Option<u64>,
    ) -> Result<bool> {
        let TableSpec {
            schema,
            primary_key,
            connector,
            time,
            type_modifiers,
            column_defaults,
        } = spec;
        let _df = lock(&self.dataflow);
        self.check_running()?;
        let mut catalog = lock(&self.catalog);
        if !name_free(&catalog, name, if_not_exists, txn)? {
            return Ok(false);
        }
        let id = catalog.allocate_id();
        let def = RelationDef {
            id,
            name: name.to_string(),
            schema: schema.as_ref().clone(),
            kind: RelationKind::Table {
                primary_key: primary_key.clone(),
            },
            depends_on: vec![],
            connector,
            time,
            primary_key_index: (!primary_key.is_empty())
                .then(|| catalog.free_primary_key_index_name(name, txn)),
            type_modifiers,
            column_defaults,
            dropped_by: None,
        };
        let data = self.tables.new_table(&def)?;
        let mut next = catalog.clone();
        next.insert(def);
        self.persist_catalog(&next)?;
        *catalog = next;
        self.tables.insert(id, data);
        info!(table = name, id, "table created");
        Ok(true)
    }

    /// Creates a materialized view: builds its job from the streaming plan `plan` makes (called
    /// once the name is known to be free, so that a taken name is reported first) with the
    /// captured `settings` (validated again here), backfills it from the current contents of
    /// its inputs (as of the last processed epoch) and makes it visible before returning. The
    /// view depends on the relations its job reads and on those named in `reads` (the
    /// relations its query names). `txn` is the creating transaction (see
    /// [`Catalog::name_taken`]).
    ///
    /// # Errors
    /// `42P07` when the name is taken (unless `if_not_exists`), `0A000` for unsupported
    /// constructs, `22023` for settings breaking a rule, and any error evaluating the query on
    /// the existing data; `57P01` once the engine is shutting down.
    #[allow(clippy::too_many_arguments)]
    pub fn create_view(
        &self,
        name: &str,
        query: &str,
        reads: &[String],
        plan: impl FnOnce() -> Result<StreamPlan>,
        settings: BTreeMap<String, String>,
        if_not_exists: bool,
        txn: Option<u64>,
    ) -> Result<bool> {
        let settings = SessionVars::validate_job_settings(&settings, &[])?;
        let mut df = lock(&self.dataflow);
        self.check_running()?;
        if !name_free(&lock(&self.catalog), name, if_not_exists, txn)? {
            return Ok(false);
        }
        let plan = plan()?;
        // A view with a temporal filter replays a recovered epoch with the time of the
        // replay, not the time it first ran at, so a view reading its output could keep rows
        // it already consumed the retraction of: refused until epochs record their time.
        if let Some(upstream) = plan
            .sources
            .iter()
            .filter_map(|s| df.jobs.get(s))
            .find(|j| j.time_driven())
        {
            return Err(Error::not_supported(format!(
                "a materialized view over \"{}\", a view with a temporal filter (now()), is \
                 not supported; read its tables with the temporal filter instead",
                upstream.name
            )));
        }
        let schema = plan.schema.clone();
        let time = TableTime {
            append_only: plan.append_only,
            watermark: None,
            watermark_columns: plan.watermark_columns.clone(),
        };
        let mut catalog = lock(&self.catalog).clone();
        // The relations the query names, also those whose scan the optimizer dropped (a
        // `WHERE` that is never true): a DROP of one must find the view, as PostgreSQL's does.
        let named: BTreeSet<crate::common::RelationId> = reads
            .iter()
            .filter_map(|n| catalog.by_name(n).map(|d| d.id))
            .collect();
        let id = catalog.allocate_id();
        let coordinator = self.coordinator(id, name, &settings)?;
        // An id is never reused, but a crash between here and the catalog write could leave
        // files behind: start clean.
        coordinator.retain(&BTreeSet::new());
        let mut job = Job::try_new(
            id,
            name.to_string(),
            plan,
            schema.clone(),
            Some(coordinator),
            self.rows_in.clone(),
        )?;
        let snapshot = self.snapshot_input(&df, &job)?;
        job.rebuild(&snapshot)?;
        let depends_on = job
            .sources
            .iter()
            .chain(&named)
            .copied()
            .collect::<BTreeSet<_>>();
        let depends_on = depends_on.into_iter().collect();
        catalog.insert(RelationDef {
            id,
            name: name.to_string(),
            schema: schema.as_ref().clone(),
            kind: RelationKind::MaterializedView {
                query: query.to_string(),
                settings,
            },
            depends_on,
            connector: None,
            time,
            type_modifiers: Vec::new(),
            primary_key_index: None,
            column_defaults: Vec::new(),
            dropped_by: None,
        });
        self.persist_catalog(&catalog)?;
        *lock(&self.catalog) = catalog;
        df.jobs.insert(id, job);
        self.publish(&df, None)?;
        info!(view = name, id, "materialized view created");
        Ok(true)
    }

    /// `ALTER MATERIALIZED VIEW name SET (setting = value, ...)`: validates the new values
    /// against the job's other settings (the seed's rules) and applies them to the running
    /// job. A new `state.backend` takes effect with the next checkpoint (a full one).
    ///
    /// # Errors
    /// `42P01` unknown view, `42704` unknown setting, `22023` bad value or broken rule;
    /// `57P01` once the engine is shutting down.
    pub fn alter_view_settings(&self, name: &str, changes: &[(String, String)]) -> Result<()> {
        let mut df = lock(&self.dataflow);
        self.check_running()?;
        let mut catalog = lock(&self.catalog).clone();
        let def = self.view_def(&catalog, name)?;
        let RelationKind::MaterializedView { query, settings } = &def.kind else {
            return Err(Error::Internal("not a view".into()));
        };
        for (k, _) in changes {
            let k = k.to_ascii_lowercase();
            if k == "streaming.parallelism" {
                return Err(Error::not_supported(format!(
                    "changing streaming.parallelism of materialized view \"{name}\" is not supported; \
                     create the view again with the new setting"
                )));
            }
            if !(k.starts_with("checkpoint.") || k.starts_with("restart.") || k == "state.backend")
            {
                return Err(Error::Setting {
                    code: "42704",
                    message: format!(
                        "\"{k}\" is not a setting of a materialized view's job; allowed: checkpoint.*, restart.*, state.backend"
                    ),
                });
            }
        }
        // A view created before streaming.parallelism existed runs one instance per operator.
        let mut base = settings.clone();
        base.entry("streaming.parallelism".to_string())
            .or_insert_with(|| "1".to_string());
        let next = SessionVars::validate_job_settings(&base, changes)?;
        let parsed = JobSettings::from_values(&next)?;
        let job = df
            .jobs
            .get_mut(&def.id)
            .ok_or_else(|| Error::Internal("view without a job".into()))?;
        let old_backend = job.settings().map(|s| s.backend);
        if old_backend != Some(parsed.backend) {
            if let Some(c) = job.coordinator.as_mut() {
                c.abort_all("state.backend changed");
                if let Err(e) = c.shutdown() {
                    warn!(view = name, error = %e, "state writer stopped abnormally");
                }
            }
            let coordinator = self.coordinator(def.id, name, &next)?;
            job.coordinator = Some(coordinator);
        } else if let Some(c) = job.coordinator.as_mut() {
            c.set_settings(parsed.clone());
        }
        job.restart = crate::checkpoint::RestartTracker::new(parsed.restart.clone());
        let mut updated = def.clone();
        updated.kind = RelationKind::MaterializedView {
            query: query.clone(),
            settings: next,
        };
        catalog.insert(updated);
        self.persist_catalog(&catalog)?;
        *lock(&self.catalog) = catalog;
        self.publish(&df, None)?;
        info!(view = name, "materialized view settings changed");
        Ok(())
    }

    /// `ALTER MATERIALIZED VIEW name RESUME`: restarts a failed (or restarting) view at the
    /// next barrier from its last checkpoint, with its restart strategy's count reset.
    ///
    /// # Errors
    /// `42P01` unknown view; `55000` when the view is running; `57P01` once the engine is
    /// shutting down.
    pub fn resume_view(&self, name: &str) -> Result<()> {
        let mut df = lock(&self.dataflow);
        self.check_running()?;
        let catalog = lock(&self.catalog).clone();
        let def = self.view_def(&catalog, name)?;
        let affected = df.downstream_closure(def.id);
        let job = df
            .jobs
            .get_mut(&def.id)
            .ok_or_else(|| Error::Internal("view without a job".into()))?;
        if matches!(job.status, JobStatus::Running) {
            return Err(Error::data(
                "55000",
                format!("materialized view \"{name}\" is running; RESUME restarts a failed view"),
            ));
        }
        job.restart.reset();
        let at = Instant::now();
        for m in affected {
            if let Some(j) = df.jobs.get_mut(&m)
                && !matches!(j.status, JobStatus::Running)
            {
                j.status = JobStatus::Restarting {
                    at,
                    message: "resumed by ALTER MATERIALIZED VIEW ... RESUME".into(),
                };
            }
        }
        drop(df);
        self.clock.request_tick();
        Ok(())
    }

    pub(super) fn view_def(&self, catalog: &Catalog, name: &str) -> Result<RelationDef> {
        match catalog.by_name(name) {
            Some(d) if !d.is_table() => Ok(d.clone()),
            Some(_) => Err(Error::catalog(
                "42809",
                format!("\"{name}\" is a table, not a materialized view"),
            )),
            None => Err(Error::catalog(
                "42P01",
                format!("materialized view \"{name}\" does not exist"),
            )),
        }
    }

    /// The EXPLAIN lines of a view's job, with `parallelism` instances of each keyed
    /// operator.
    ///
    /// # Errors
    /// `0A000` for unsupported constructs.
    pub fn explain_view(
        &self,
        name: &str,
        plan: StreamPlan,
        parallelism: usize,
    ) -> Result<Vec<String>> {
        Job::explain_plan(name, &plan, parallelism)
    }

    /// `CREATE [UNIQUE] INDEX name ON relation (columns)`: builds a secondary index over the
    /// relation's current rows (a table's acknowledged contents, a view's rows at the last
    /// epoch), then keeps it up to date with every write (tables) or epoch (views). Reads
    /// with filters on its leading columns then scan a key range of it. `columns` are
    /// `(column index, descending)`. O(n log n) to build; O(log n) per changed row after.
    ///
    /// # Errors
    /// `42P07` when the name is taken (unless `if_not_exists`), `42P01` unknown relation,
    /// `0A000` a unique index on a materialized view, `23505` a unique index over duplicate
    /// keys; `57P01` once the engine is shutting down. `txn` is the creating transaction (see
    /// [`Catalog::name_taken`]).
    pub fn create_index(
        &self,
        name: &str,
        relation: &str,
        columns: Vec<crate::catalog::IndexColumn>,
        unique: bool,
        if_not_exists: bool,
        txn: Option<u64>,
    ) -> Result<bool> {
        let mut df = lock(&self.dataflow);
        self.check_running()?;
        let mut catalog = lock(&self.catalog).clone();
        if !name_free(&catalog, name, if_not_exists, txn)? {
            return Ok(false);
        }
        let Some(target) = catalog.by_name(relation).cloned() else {
            return Err(Error::catalog(
                "42P01",
                format!("relation \"{relation}\" does not exist"),
            ));
        };
        if unique && !target.is_table() {
            return Err(Error::not_supported(
                "CREATE UNIQUE INDEX on a materialized view is not supported (a view's rows are derived; only a table's writes can be refused)",
            ));
        }
        let def = IndexDef {
            id: catalog.allocate_id(),
            name: name.to_string(),
            relation: target.id,
            columns,
            unique,
        };
        catalog.insert_index(def.clone());
        if target.is_table() {
            let data = self.tables.get(target.id)?;
            let mut data = lock(&data);
            let built = SecondaryIndex::build(&def, &data.contents)?;
            self.persist_catalog(&catalog)?;
            data.indexes.push(built);
        } else {
            let job = df
                .jobs
                .get_mut(&target.id)
                .ok_or_else(|| Error::Internal("view without a job".into()))?;
            job.add_index(&def)?;
            if let Err(e) = self.persist_catalog(&catalog) {
                job.remove_index(def.id);
                return Err(e);
            }
        }
        *lock(&self.catalog) = catalog;
        self.publish(&df, None)?;
        info!(index = name, relation, "index created");
        Ok(true)
    }

    /// `DROP INDEX name`.
    ///
    /// # Errors
    /// `42704` when it does not exist (unless `if_exists`), `42809` when the name is a table
    /// or view; `57P01` once the engine is shutting down.
    pub fn drop_index(&self, name: &str, if_exists: bool) -> Result<bool> {
        let mut df = lock(&self.dataflow);
        self.check_running()?;
        let mut catalog = lock(&self.catalog).clone();
        let Some(def) = index_drop_target(&catalog, name, if_exists)? else {
            return Ok(false);
        };
        catalog.remove_index(def.id);
        self.persist_catalog(&catalog)?;
        if let Ok(data) = self.tables.get(def.relation) {
            lock(&data).indexes.retain(|i| i.def.id != def.id);
        } else if let Some(job) = df.jobs.get_mut(&def.relation) {
            job.remove_index(def.id);
        }
        *lock(&self.catalog) = catalog;
        self.publish(&df, None)?;
        info!(index = name, "index dropped");
        Ok(true)
    }

    /// Checks a `DROP INDEX` of `name` without making it: `false` when there is nothing to
    /// drop (`IF EXISTS`).
    ///
    /// # Errors
    /// As [`Engine::drop_index`].
    pub fn check_drop_index(&self, name: &str, if_exists: bool) -> Result<bool> {
        Ok(index_drop_target(&lock(&self.catalog), name, if_exists)?.is_some())
    }

    /// Drops the relations a rolled-back transaction created (`created`, oldest first),
    /// newest first, with the views on them; those gone already are skipped.
    ///
    /// # Errors
    /// Store errors; `57P01` once the engine is shutting down.
    pub fn drop_created(&self, created: &[RelationId]) -> Result<()> {
        if created.is_empty() {
            return Ok(());
        }
        let mut df = lock(&self.dataflow);
        self.check_running()?;
        let catalog = lock(&self.catalog).clone();
        let mut doomed: Vec<RelationId> = Vec::new();
        for id in created.iter().rev() {
            if catalog.get(*id).is_some() {
                doomed.extend(catalog.dependents_closure(*id));
            }
        }
        doomed.sort_unstable_by(|a, b| b.cmp(a));
        doomed.dedup();
        self.remove_relations(&mut df, catalog, &doomed)?;
        info!(
            dropped = doomed.len(),
            "dropped what a rolled-back transaction created"
        );
        Ok(())
    }

    /// Drops a table or view (and, with `cascade`, the views that read it), with the views'
    /// checkpoints and state.
    ///
    /// # Errors
    /// `42P01` when it does not exist (unless `if_exists`), `42809` when it is of the other
    /// kind, `2BP01` when views depend on it and `cascade` is false; `57P01` once the engine
    /// is shutting down.
    pub fn drop_relation(
        &self,
        name: &str,
        table: bool,
        if_exists: bool,
        cascade: bool,
    ) -> Result<bool> {
        let mut df = lock(&self.dataflow);
        self.check_running()?;
        let catalog = lock(&self.catalog).clone();
        let Some((def, dependents)) = drop_target(&catalog, name, table, if_exists, None)? else {
            return Ok(false);
        };
        if !dependents.is_empty() && !cascade {
            return Err(dependents_error(&def, name, &dependents));
        }
        let doomed = catalog.dependents_closure(def.id);
        self.remove_relations(&mut df, catalog, &doomed)?;
        info!(relation = name, dropped = doomed.len(), "dropped");
        Ok(true)
    }

    /// `DROP TABLE` (`table`) or `DROP MATERIALIZED VIEW` of `name` in transaction `txn`:
    /// hides it (and with `cascade` the views that read it) until the transaction ends, see
    /// [`RelationDef::dropped_by`]; [`Engine::drop_hidden`] drops them at `COMMIT`,
    /// [`Engine::unhide`] shows them again at `ROLLBACK`. Views the transaction hid already
    /// do not hold the drop back. Returns the ids hidden (none when there was nothing to
    /// drop).
    ///
    /// # Errors
    /// As [`Engine::drop_relation`].
    pub fn hide_relation(
        &self,
        name: &str,
        table: bool,
        if_exists: bool,
        cascade: bool,
        txn: u64,
    ) -> Result<Vec<RelationId>> {
        let df = lock(&self.dataflow);
        self.check_running()?;
        let mut catalog = lock(&self.catalog).clone();
        let Some((def, dependents)) = drop_target(&catalog, name, table, if_exists, Some(txn))?
        else {
            return Ok(Vec::new());
        };
        if !dependents.is_empty() && !cascade {
            return Err(dependents_error(&def, name, &dependents));
        }
        let ids: Vec<RelationId> = catalog
            .dependents_closure(def.id)
            .into_iter()
            .filter(|id| catalog.get(*id).is_some_and(|r| r.dropped_by.is_none()))
            .collect();
        catalog.hide(&ids, txn);
        self.persist_catalog(&catalog)?;
        *lock(&self.catalog) = catalog;
        self.publish(&df, None)?;
        info!(relation = name, "hidden until its transaction ends");
        Ok(ids)
    }

    /// The `COMMIT` of a transaction: drops the relations `hidden` its `DROP`s hid (see
    /// [`Engine::hide_relation`]), with every view that reads them.
    ///
    /// # Errors
    /// Store errors; `57P01` once the engine is shutting down (the relations stay hidden,
    /// and come back at the next start as the transaction did not commit).
    pub fn drop_hidden(&self, hidden: &[RelationId]) -> Result<()> {
        let mut df = lock(&self.dataflow);
        self.check_running()?;
        let catalog = lock(&self.catalog).clone();
        let mut doomed: Vec<RelationId> = Vec::new();
        for id in hidden {
            if catalog.get(*id).is_some() {
                doomed.extend(catalog.dependents_closure(*id));
            }
        }
        if doomed.is_empty() {
            return Ok(());
        }
        doomed.sort_unstable_by(|a, b| b.cmp(a));
        doomed.dedup();
        self.remove_relations(&mut df, catalog, &doomed)?;
        info!(dropped = doomed.len(), "dropped at commit");
        Ok(())
    }

    /// The `ROLLBACK` of a transaction (or its end without `COMMIT`, or a `ROLLBACK TO` a
    /// savepoint before them): shows again the relations `hidden` its `DROP`s hid. Runs
    /// while the engine shuts down too (a connection closed then rolls back).
    ///
    /// # Errors
    /// Store errors writing the catalog.
    pub fn unhide(&self, hidden: &[RelationId]) -> Result<()> {
        let df = lock(&self.dataflow);
        let mut catalog = lock(&self.catalog).clone();
        if !catalog.unhide(hidden) {
            return Ok(());
        }
        self.persist_catalog(&catalog)?;
        *lock(&self.catalog) = catalog;
        if !self.is_stopping() {
            self.publish(&df, None)?;
        }
        Ok(())
    }

    /// Removes `doomed` (ids in the order to drop them: views before what they read) from
    /// `catalog`, makes that durable, then stops their jobs and sources and drops their
    /// checkpoints, state and rows.
    ///
    /// # Errors
    /// Store errors.
    fn remove_relations(
        &self,
        df: &mut Dataflow,
        mut catalog: Catalog,
        doomed: &[RelationId],
    ) -> Result<()> {
        for id in doomed {
            catalog.remove(*id);
        }
        self.persist_catalog(&catalog)?;
        for id in doomed {
            if let Some(job) = df.jobs.remove(id)
                && let Some(mut c) = job.coordinator
            {
                c.abort_all("the view was dropped");
                // The writer only finishes the aborted checkpoints' sync phase; its files go.
                if let Err(e) = c.shutdown() {
                    warn!(view = %job.name, error = %e, "state writer stopped abnormally");
                }
                c.destroy();
            }
            // Its source (if any) stops before the table goes.
            self.stop_source(*id);
            // A table's rows leave the tables' instance with it; the next snapshot drops them.
            self.tables.remove(*id)?;
        }
        *lock(&self.catalog) = catalog;
        self.publish(df, None)
    }
}

/// The index a `DROP INDEX name` drops; `None` when it does not exist and `if_exists`.
///
/// # Errors
/// `42704` when it does not exist (unless `if_exists`), `2BP01` for a primary key's index,
/// `42809` when the name is a table or view.
fn index_drop_target(catalog: &Catalog, name: &str, if_exists: bool) -> Result<Option<IndexDef>> {
    if let Some(def) = catalog.index_by_name(name) {
        return Ok(Some(def.clone()));
    }
    if let Some(table) = catalog.primary_key_owner(name) {
        return Err(Error::catalog(
            "2BP01",
            format!(
                "cannot drop index {name} because constraint {name} on table {} requires it",
                table.name
            ),
        ));
    }
    if let Some(r) = catalog.by_name(name) {
        return Err(Error::catalog(
            "42809",
            format!("\"{name}\" is not an index (it is a {})", r.kind_name()),
        ));
    }
    if if_exists {
        return Ok(None);
    }
    Err(Error::catalog(
        "42704",
        format!("index \"{name}\" does not exist"),
    ))
}

/// The relation a `DROP TABLE` (`table`) or `DROP MATERIALIZED VIEW` of `name` drops and the
/// names of the views that depend on it (but those transaction `txn` dropped already);
/// `None` when it does not exist and `if_exists`.
///
/// # Errors
/// `42P01` when it does not exist (unless `if_exists`), `42809` when it is of the other kind
/// or an index.
fn drop_target(
    catalog: &Catalog,
    name: &str,
    table: bool,
    if_exists: bool,
    txn: Option<u64>,
) -> Result<Option<(RelationDef, Vec<String>)>> {
    let Some(def) = catalog.by_name(name).cloned() else {
        if catalog.index_by_name(name).is_some() {
            let what = if table { "table" } else { "materialized view" };
            return Err(Error::catalog(
                "42809",
                format!("\"{name}\" is an index, not a {what}; use DROP INDEX"),
            ));
        }
        if if_exists {
            return Ok(None);
        }
        let what = if table { "table" } else { "materialized view" };
        return Err(Error::catalog(
            "42P01",
            format!("{what} \"{name}\" does not exist"),
        ));
    };
    if def.is_table() != table {
        return Err(Error::catalog(
            "42809",
            format!(
                "\"{}\" is a {}, not a {}",
                name,
                def.kind_name(),
                if table { "table" } else { "materialized view" }
            ),
        ));
    }
    let dependents = catalog
        .dependents(def.id)
        .iter()
        .filter_map(|d| catalog.get(*d))
        .filter(|d| d.dropped_by.is_none() || d.dropped_by != txn)
        .map(|d| d.name.clone())
        .collect();
    Ok(Some((def, dependents)))
}

/// `2BP01` for a drop of `def` (named `name`) without `CASCADE` while the views `dependents`
/// depend on it.
fn dependents_error(def: &RelationDef, name: &str, dependents: &[String]) -> Error {
    Error::catalog(
        "2BP01",
        format!(
            "cannot drop {} {} because other objects depend on it (materialized view {}); use DROP ... CASCADE",
            def.kind_name(),
            name,
            dependents.join(", ")
        ),
    )
}

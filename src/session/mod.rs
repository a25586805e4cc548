//! One connection's state: its variables, its DataFusion context and an open COPY.

pub mod cursors;
pub mod defaults;
pub mod dml_joins;
pub mod execute;
pub mod interrupt;
pub mod memory;
mod roles;
pub mod upsert;

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::execution::context::SessionContext;
use datafusion::prelude::SessionConfig;

use crate::common::RelationId;
use crate::engine::Engine;
use crate::error::{Error, Result};
pub use crate::settings::SessionVars;
use crate::sql::copy::CopyFormat;
use crate::sql::provider::PublicSchema;
pub use execute::{Output, recover_views, split_statements};

/// The name of the single database (DataFusion catalog).
pub const DATABASE: &str = "weir";

/// A COPY FROM STDIN waiting for its data.
#[derive(Debug)]
pub struct PendingCopy {
    /// Target table.
    pub table: RelationId,
    /// Its name, for messages.
    pub table_name: String,
    /// Target column indices, in data order.
    pub columns: Vec<usize>,
    /// Parsing options.
    pub format: CopyFormat,
    /// Bytes received so far.
    pub data: Vec<u8>,
}

/// One client session.
pub struct Session {
    /// The shared engine.
    pub engine: Arc<Engine>,
    /// `SET` variables.
    pub vars: SessionVars,
    /// DataFusion context for planning and batch queries.
    pub ctx: SessionContext,
    /// The `public` schema (pins a view snapshot per statement).
    pub schema: Arc<PublicSchema>,
    /// A COPY in progress.
    pub copy: Option<PendingCopy>,
    /// The memory pool of this session's queries (`query.memory_limit_mb`).
    pub memory: Arc<memory::QueryMemoryPool>,
    /// The session's user, as the connection's startup message named it.
    pub user: String,
    /// Inside `BEGIN` ... `COMMIT`: the block's writes so far, written at `COMMIT`.
    pub transaction: Option<TransactionBlock>,
    /// Outside a block, the writes of the statements run since the extended protocol's last
    /// Sync, or of the statements of one simple Query so far: PostgreSQL runs them as one
    /// implicit transaction (protocol docs 55.2.3 "Extended Query" and 55.2.2.1 "Multiple
    /// Statements in a Simple Query"), so they are undone when one of them fails.
    /// (table, change written), oldest first; writes to append-only tables are not kept (they
    /// cannot be undone).
    pub implicit: Option<Vec<(RelationId, crate::common::ChangeBatch)>>,
    /// In the implicit transaction of a simple Query of several statements, its DDL:
    /// relations it created (dropped again when a later statement fails) and its `DROP`s of
    /// tables, views and indexes (made when it ends well), as in a transaction block.
    pub implicit_ddl: Option<TransactionDdl>,
    /// This session's transaction token: relations its open block's (or implicit
    /// transaction's) `DROP`s hid carry it (see [`crate::catalog::RelationDef::dropped_by`]).
    pub txn: u64,
    /// Writes that reached their table but not yet the undo log: a statement writes on a
    /// blocking thread, which pushes its change here (holding the lock from before the
    /// write starts); the statement then moves it to the log. When the statement's future
    /// is dropped meanwhile (the connection closed at server shutdown), the write still
    /// lands here, and the connection's end waits for it and undoes it with its block or
    /// implicit transaction, so a client told `57P01` finds none of it stored.
    pub landed: Arc<tokio::sync::Mutex<Vec<(RelationId, crate::common::ChangeBatch)>>>,
    /// The zone `timestamptz` results are shown in (the `TimeZone` setting).
    pub display_zone: arrow::array::timezone::Tz,
    /// The running statement's cancel state (cancel requests, `statement_timeout`).
    pub interrupt: Arc<interrupt::Interrupt>,
    /// Open cursors (`DECLARE`), by name.
    pub cursors: cursors::Cursors,
    /// Notices and warnings of the running statement, sent to the client before its result
    /// (see [`Session::notify`]).
    pub notices: Vec<Notice>,
    /// The values of the [`REPORTED`] settings the client was last told of.
    reported: Vec<String>,
}

/// What a statement sends the client before its result ([`Session::take_messages`]).
#[derive(Debug, Default)]
pub struct Messages {
    /// Its notices and warnings.
    pub notices: Vec<Notice>,
    /// The [`REPORTED`] settings it changed: reported name, new value.
    pub parameters: Vec<(&'static str, String)>,
}

/// The settings PostgreSQL reports to the client with a ParameterStatus message whenever they
/// change (its `GUC_REPORT` settings that a `SET` can change; protocol docs, 55.2.7
/// "Asynchronous Operations"): the name they are reported under, Weir's setting name. Drivers
/// read them: psycopg shows `timestamptz` values in the reported `TimeZone`.
pub const REPORTED: [(&str, &str); 6] = [
    ("TimeZone", "timezone"),
    ("DateStyle", "datestyle"),
    ("IntervalStyle", "intervalstyle"),
    ("application_name", "application_name"),
    ("client_encoding", "client_encoding"),
    ("standard_conforming_strings", "standard_conforming_strings"),
];

/// The values of the [`REPORTED`] settings in `vars`, in that order.
fn reported_values(vars: &SessionVars) -> Vec<String> {
    REPORTED
        .iter()
        .map(|(_, name)| vars.get(name).unwrap_or_default())
        .collect()
}

/// The level of a [`Notice`], lowest first (PostgreSQL's `elog` levels a client is sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NoticeLevel {
    /// `NOTICE`: something the user may want to know (`... does not exist, skipping`).
    Notice,
    /// `WARNING`: probably not what the user meant (`COMMIT` outside a block).
    Warning,
}

impl NoticeLevel {
    /// The severity word of the protocol's NoticeResponse.
    pub fn severity(self) -> &'static str {
        match self {
            NoticeLevel::Notice => "NOTICE",
            NoticeLevel::Warning => "WARNING",
        }
    }
}

/// A message for the client beside a statement's result: PostgreSQL's NoticeResponse
/// (protocol docs 55.2.6 "Asynchronous Operations": a notice may come at any time; Weir sends
/// a statement's notices before its CommandComplete, as PostgreSQL does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// NOTICE or WARNING.
    pub level: NoticeLevel,
    /// The SQLSTATE (`00000` for a plain notice, `25P01`, `42P07`, ...).
    pub code: &'static str,
    /// The message, PostgreSQL's words.
    pub message: String,
}

/// A transaction block (`BEGIN` ... `COMMIT`): its writes, kept in the session until
/// `COMMIT`, its savepoints and its DDL.
///
/// Each write is checked when its statement runs (constraints against the table's committed
/// rows plus the block's earlier writes) but not written: other sessions and views do not see
/// it, and the session's own reads of the table see it merged in
/// ([`crate::sql::provider::Pending`]). `COMMIT` writes every table's net change at once
/// ([`crate::engine::Engine::write_many`]: durable together, seen by views at one epoch);
/// `ROLLBACK` drops them, and `ROLLBACK TO SAVEPOINT` the ones after the savepoint. A
/// crash before `COMMIT` loses the block, as in PostgreSQL.
#[derive(Debug, Default)]
pub struct TransactionBlock {
    /// (table, change), oldest first: the block's writes, not yet written.
    pub writes: Vec<(RelationId, crate::common::ChangeBatch)>,
    /// Each table's net change of `writes` (rows with their summed weights).
    pub net: HashMap<RelationId, Arc<crate::common::ChangeBatch>>,
    /// Writes of the implicit transaction that `BEGIN` took over (already written: a simple
    /// Query's statements before its `BEGIN`), undone at `ROLLBACK`.
    pub applied: Vec<(RelationId, crate::common::ChangeBatch)>,
    /// The savepoints, oldest first.
    pub savepoints: Vec<Savepoint>,
    /// The block's `CREATE`s and `DROP`s.
    pub ddl: TransactionDdl,
    /// `BEGIN READ ONLY`: writes and DDL are `25006`.
    pub read_only: bool,
    /// A statement of the block failed: until `ROLLBACK` (or `ROLLBACK TO` a savepoint set
    /// before the failure) every other statement is refused with `25P02`, and `COMMIT`
    /// rolls the block back, as in PostgreSQL.
    pub aborted: bool,
    /// The session's settings at `BEGIN`: a `ROLLBACK` restores them (PostgreSQL undoes a
    /// `SET` of a transaction that aborts).
    pub settings_at_begin: Option<crate::settings::SessionVars>,
    /// Once a `SET LOCAL` ran in the block: the settings without its `SET LOCAL`s, which
    /// `COMMIT` restores (a `SET LOCAL` lasts until the block ends; a plain `SET` after it
    /// in the block applies here too and outlives the block).
    pub settings_without_local: Option<crate::settings::SessionVars>,
}

/// A savepoint of a transaction block (`SAVEPOINT name`): how far the block's writes and DDL
/// had gone when it was set, and the settings then, for `ROLLBACK TO` to undo what came
/// after.
#[derive(Debug, Clone)]
pub struct Savepoint {
    /// Its name.
    pub name: String,
    /// `writes.len()` of the block then.
    pub writes: usize,
    /// `ddl.created.len()` then.
    pub created: usize,
    /// `ddl.hid.len()` then.
    pub hid: usize,
    /// `ddl.index_drops.len()` then.
    pub index_drops: usize,
    /// `ddl.created_indexes.len()` then.
    pub created_indexes: usize,
    /// The session's settings then: `ROLLBACK TO` restores them (PostgreSQL undoes the
    /// `SET`s of a subtransaction that rolls back).
    pub settings: crate::settings::SessionVars,
    /// The block's `settings_without_local` then.
    pub settings_without_local: Option<crate::settings::SessionVars>,
}

/// The DDL of a transaction block, or of an implicit transaction spanning several
/// statements (see [`Session::implicit_ddl`]): undone at `ROLLBACK` (or a statement's
/// failure), made final at `COMMIT`.
#[derive(Debug, Default)]
pub struct TransactionDdl {
    /// The tables and materialized views it created (at once, durable), oldest first:
    /// dropped again, newest first, when it rolls back.
    pub created: Vec<RelationId>,
    /// The relations its `DROP TABLE` and `DROP MATERIALIZED VIEW`s hid (see
    /// [`crate::engine::Engine::hide_relation`]), in the order hidden: dropped at `COMMIT`,
    /// shown again when it rolls back.
    pub hid: Vec<RelationId>,
    /// Its `DROP INDEX`es, checked when they ran and made at `COMMIT`.
    pub index_drops: Vec<String>,
    /// The indexes it created (at once, durable), oldest first: dropped again when it rolls
    /// back.
    pub created_indexes: Vec<String>,
}

/// The next session's transaction token (see [`Session::txn`]); unique within the process,
/// which is enough: relations hidden by a transaction are resolved at start.
static NEXT_TXN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Session {
    /// A new session on `engine`.
    ///
    /// # Errors
    /// [`Error::Internal`] if the DataFusion catalog cannot be set up.
    pub fn new(engine: Arc<Engine>) -> Result<Self> {
        let mut config = SessionConfig::new()
            .with_default_catalog_and_schema(DATABASE, "public")
            .with_information_schema(true)
            .with_target_partitions(2);
        config.options_mut().sql_parser.map_string_types_to_utf8view = false;
        // `1.5` is a `numeric` literal, as in PostgreSQL (see `crate::sql::parse`'s
        // `NumericLiteralRule` for the literals' texts).
        config.options_mut().sql_parser.parse_float_as_decimal = true;
        // TIMESTAMPTZ columns carry UTC; timestamps are stored and shown in UTC.
        config.options_mut().execution.time_zone = Some("+00:00".to_string());
        config
            .options_mut()
            .extensions
            .insert(crate::sql::semantics::SessionSettings::default());
        let vars = engine.default_vars();
        let memory = Arc::new(memory::QueryMemoryPool::new(
            vars.query_memory_limit_bytes(),
        ));
        let runtime = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
            .with_memory_pool(memory.clone())
            .build_arc()
            .map_err(|e| Error::Internal(format!("runtime setup: {e}")))?;
        let state = datafusion::execution::session_state::SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime)
            .with_default_features()
            .with_analyzer_rules(crate::sql::semantics::analyzer_rules())
            .with_optimizer_rules(crate::sql::guard_fallible::optimizer_rules())
            // After DataFusion's rules: WHERE before the SELECT list's computations.
            .with_physical_optimizer_rule(Arc::new(crate::sql::filter_first::FilterFirst))
            .build();
        let ctx = SessionContext::new_with_state(state);
        crate::sql::semantics::register(&ctx);
        crate::sql::functions::register(&ctx);
        let schema = Arc::new(PublicSchema::new(Arc::clone(&engine)));
        let catalog = ctx
            .catalog(DATABASE)
            .ok_or_else(|| Error::Internal("default catalog missing".into()))?;
        catalog
            .register_schema("public", schema.clone())
            .map_err(|e| Error::Internal(format!("registering schema: {e}")))?;
        datafusion_pg_catalog::pg_catalog::setup_pg_catalog(
            &ctx,
            DATABASE,
            crate::sql::system::RoleCatalog::new(&engine),
        )
        .map_err(|e| Error::Internal(format!("pg_catalog setup: {e}")))?;
        catalog
            .register_schema(
                crate::sql::system::SYSTEM_SCHEMA,
                Arc::new(crate::sql::system::WeirCatalogSchema::new(Arc::clone(
                    &engine,
                ))),
            )
            .map_err(|e| Error::Internal(format!("registering schema: {e}")))?;
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(
            crate::sql::system::PgGetIndexDef::new(&engine),
        ));
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(
            crate::sql::system::ViewDefinition::new(&engine),
        ));
        // In place of the library's, which left `Abc` and keywords unquoted.
        ctx.deregister_udf("quote_ident");
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(
            crate::sql::functions::text_format::TextFormat::new(
                crate::sql::functions::text_format::Kind::QuoteIdent,
            ),
        ));
        // In place of the library's, which gives '' for every constraint.
        ctx.deregister_udf("pg_get_constraintdef");
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_impl(
            crate::sql::system::PgGetIndexDef::constraints(&engine),
        ));
        // The library's functions stay; its schema gives way to the one all sessions share
        // (one OID per relation across sessions), under Weir's rows (psql's \dm needs relkind
        // 'm' for materialized views).
        let pg = crate::sql::system::shared_pg_catalog(&engine)?;
        catalog
            .register_schema(
                "pg_catalog",
                Arc::new(crate::sql::system::PgCatalogOverlay::new(
                    pg,
                    Arc::clone(&engine),
                )),
            )
            .map_err(|e| Error::Internal(format!("registering schema: {e}")))?;
        // After the pg_catalog setup, whose `session_user` and `pg_encoding_to_char` these
        // replace; the user is set by `set_user` once the connection's startup names it.
        let interrupt = Arc::new(interrupt::Interrupt::default());
        crate::sql::functions::pg_info::register(&ctx, DEFAULT_USER, Arc::clone(&interrupt));
        let display_zone = vars.time_zone().zone;
        let reported = reported_values(&vars);
        let session = Session {
            engine,
            vars,
            ctx,
            schema,
            copy: None,
            memory,
            user: DEFAULT_USER.to_string(),
            transaction: None,
            implicit: None,
            implicit_ddl: None,
            txn: NEXT_TXN.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            landed: Arc::default(),
            display_zone,
            interrupt,
            cursors: cursors::Cursors::default(),
            notices: Vec::new(),
            reported,
        };
        session.register_settings();
        Ok(session)
    }

    /// Takes a change of the session's settings into what depends on them: the query
    /// memory limit and the values `current_setting` reads.
    pub(crate) fn settings_changed(&mut self) {
        self.memory.set_limit(self.vars.query_memory_limit_bytes());
        let zone = self.vars.time_zone();
        self.display_zone = zone.zone;
        {
            // Released before `register_settings`, which takes the same lock.
            let state = self.ctx.state_ref();
            let mut state = state.write();
            if let Some(settings) = state
                .config_mut()
                .options_mut()
                .extensions
                .get_mut::<crate::sql::semantics::SessionSettings>()
            {
                settings.time_zone_arrow = if zone.setting == "UTC" {
                    String::new()
                } else {
                    zone.arrow
                };
            }
        }
        self.register_settings();
    }

    /// Registers `current_setting` and `set_config` over the session's current settings
    /// (again after each change: the function holds the values it reads).
    pub(crate) fn register_settings(&self) {
        crate::sql::functions::pg_info::register_settings(
            &self.ctx,
            self.vars
                .all()
                .into_iter()
                .map(|(name, value, _)| (name.to_ascii_lowercase(), value))
                .collect(),
        );
    }

    /// Queues a notice or warning for the client, unless `client_min_messages` asks for
    /// higher levels only (`warning` drops notices, `error` both; the `debug` levels and
    /// `log` let both through).
    pub fn notify(&mut self, level: NoticeLevel, code: &'static str, message: impl Into<String>) {
        let min = self
            .vars
            .get("client_min_messages")
            .unwrap_or_default()
            .to_ascii_lowercase();
        let sent = match min.as_str() {
            "error" => false,
            "warning" => level >= NoticeLevel::Warning,
            _ => true,
        };
        if sent {
            self.notices.push(Notice {
                level,
                code,
                message: message.into(),
            });
        }
    }

    /// The notices queued so far, taken.
    pub fn take_notices(&mut self) -> Vec<Notice> {
        std::mem::take(&mut self.notices)
    }

    /// What the client is to be sent beside the result of the statement that just ran: its
    /// notices ([`Session::take_notices`]) and the reported settings it changed
    /// ([`Session::take_parameter_changes`]).
    pub fn take_messages(&mut self) -> Messages {
        Messages {
            notices: self.take_notices(),
            parameters: self.take_parameter_changes(),
        }
    }

    /// The [`REPORTED`] settings whose values changed since the last call (a `SET`, `RESET`,
    /// or a `ROLLBACK` that undid one), each with the name it is reported under and its new
    /// value (the connection's startup reported the values the session began with).
    pub fn take_parameter_changes(&mut self) -> Vec<(&'static str, String)> {
        let now = reported_values(&self.vars);
        let changed = REPORTED
            .iter()
            .zip(now.iter().zip(&self.reported))
            .filter(|(_, (new, old))| new != old)
            .map(|((reported, _), (new, _))| (*reported, new.clone()))
            .collect();
        self.reported = now;
        changed
    }

    /// `statement_timeout`, `None` when it is 0 (no limit).
    pub fn statement_timeout(&self) -> Option<std::time::Duration> {
        match self.vars.statement_timeout_ms() {
            0 => None,
            ms => Some(std::time::Duration::from_millis(ms)),
        }
    }

    /// Applies the connection's startup parameters (`application_name`, `TimeZone`, the
    /// `-c` switches of `options`, ...) as the session's defaults; see
    /// [`SessionVars::apply_startup`].
    ///
    /// # Errors
    /// `22023` for a value a setting refuses, `55P02` for a read-only setting.
    pub fn apply_startup<'a>(
        &mut self,
        params: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<()> {
        self.vars.apply_startup(params)?;
        self.settings_changed();
        // The startup's ParameterStatus messages report these values.
        self.reported = reported_values(&self.vars);
        Ok(())
    }

    /// Names the session's user (from the connection's startup message): what
    /// `session_user` and `current_user` return.
    pub fn set_user(&mut self, user: &str) {
        crate::sql::functions::pg_info::register_user(&self.ctx, user);
        self.user = user.to_string();
        let superuser = self.is_superuser();
        self.vars.set_superuser(superuser);
        self.register_settings();
    }
}

/// The session user when the startup message names none.
pub const DEFAULT_USER: &str = "postgres";

impl Drop for Session {
    fn drop(&mut self) {
        // pg_catalog's schema provider holds the context's catalog list, which holds the
        // schema: a reference cycle. Deregistering the schemas breaks it, so the session's
        // memory (and its handle on the engine) is freed when the connection ends.
        if let Some(catalog) = self.ctx.catalog(DATABASE) {
            let _ = catalog.deregister_schema("pg_catalog", true);
            let _ = catalog.deregister_schema("public", true);
            let _ = catalog.deregister_schema(crate::sql::system::SYSTEM_SCHEMA, true);
        }
    }
}

/// UTC as a zone to show `timestamptz` values in.
///
/// # Panics
/// Never: `+00:00` is a valid offset.
pub(crate) fn utc_zone() -> arrow::array::timezone::Tz {
    "+00:00"
        .parse()
        .expect("invariant: +00:00 is a valid offset")
}

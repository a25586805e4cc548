//! pgwire handler implementations over a [`Session`].

use std::fmt::Debug;
use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use arrow_pg::datatypes::{arrow_schema_to_pg_fields, into_pg_type};
use async_trait::async_trait;
use futures::{Sink, SinkExt};
use pgwire::api::DEFAULT_NAME;
use pgwire::api::auth::noop::NoopStartupHandler;
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::sasl::scram::ScramAuth;
use pgwire::api::auth::{DefaultServerParameterProvider, ServerParameterProvider, StartupHandler};
use pgwire::api::cancel::CancelHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::send_describe_response;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{CopyResponse, FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::stmt::QueryParser;
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{ClientInfo, ClientPortalStore, PgWireServerHandlers, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::cancel::CancelRequest;
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};
use pgwire::messages::data::{NoData, ParameterDescription};
use pgwire::messages::extendedquery::{Describe, Execute, TARGET_TYPE_BYTE_STATEMENT};
use pgwire::messages::response::TransactionStatus;
use pgwire::messages::simplequery::Query;
use tokio::sync::Mutex;
use tracing::Instrument;

use super::auth;
use crate::common::schema::PgTextType;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::session::Session;
use crate::session::interrupt::Interrupt;
use crate::session::memory::batch_bytes;
use crate::session::{Output, split_statements};
use arrow::array::timezone::Tz;

/// All handlers of one connection, sharing its session.
pub struct Handlers {
    inner: Arc<Conn>,
}

/// The server's running sessions by their cancel key (the process ID and secret key each
/// connection gets in `BackendKeyData`), for cancel requests, which come on a connection of
/// their own (PostgreSQL protocol, 55.2.7 "Canceling Requests in Progress").
#[derive(Debug, Default)]
pub struct CancelKeys {
    sessions: std::sync::Mutex<std::collections::HashMap<CancelKey, std::sync::Weak<Interrupt>>>,
}

/// A connection's process ID and secret key (bytes: 4 in protocol 3.0, 32 in 3.2).
type CancelKey = (i32, Vec<u8>);

impl CancelKeys {
    fn insert(&self, key: CancelKey, interrupt: &Arc<Interrupt>) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.retain(|_, i| i.strong_count() > 0);
        sessions.insert(key, Arc::downgrade(interrupt));
    }

    /// Cancels every session's running statement (the server is shutting down). A
    /// statement that blocks its connection's task (`pg_sleep`) cannot be reached through
    /// the task; its session's [`Interrupt`] can.
    pub fn cancel_all(&self) {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        for interrupt in sessions.values().filter_map(std::sync::Weak::upgrade) {
            interrupt.cancel();
        }
    }

    fn remove(&self, key: &CancelKey) {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

/// Answers a cancel request: cancels the running statement of the session with that key;
/// an unknown key is ignored, as PostgreSQL does (the requester gets no reply either way).
pub struct CancelRequests {
    keys: Arc<CancelKeys>,
}

#[async_trait]
impl CancelHandler for CancelRequests {
    async fn on_cancel_request(&self, request: CancelRequest) {
        let key = (request.pid, request.secret_key.to_bytes().to_vec());
        let interrupt = self
            .keys
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .and_then(std::sync::Weak::upgrade);
        match interrupt {
            Some(i) => {
                tracing::debug!(pid = request.pid, "cancel request");
                i.cancel();
            }
            None => tracing::debug!(pid = request.pid, "cancel request for no session"),
        }
    }
}

/// One connection's session behind an async lock (pgwire calls handlers sequentially).
pub struct Conn {
    session: Mutex<Session>,
    parser: Arc<Parser>,
    auth: Authentication,
    /// Set once the first SASL message arrived (the initial response; later ones are
    /// continuations).
    sasl_started: std::sync::atomic::AtomicBool,
    /// The server's cancel keys, and this connection's once its startup is done.
    cancel_keys: Arc<CancelKeys>,
    cancel_key: std::sync::Mutex<Option<CancelKey>>,
    /// The session's cancel state (also reachable without the session's lock).
    interrupt: Arc<Interrupt>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(key) = self
            .cancel_key
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            self.cancel_keys.remove(&key);
        }
    }
}

/// How this connection authenticates.
enum Authentication {
    Trust,
    /// pgwire's SASL handler (per connection: it holds the exchange's state).
    Scram(Box<SASLAuthStartupHandler<ReportedParameters>>),
}

/// The extended-protocol query parser: plans at Parse time to learn parameter and result types.
pub struct Parser {
    session: std::sync::Weak<Conn>,
}

/// A prepared statement.
#[derive(Debug, Clone)]
pub struct Prepared {
    sql: String,
    params: Vec<Option<DataType>>,
    /// The parameters cast to `oid` or `oid[]`, described as such.
    param_oids: Vec<Option<crate::sql::oid_columns::OidKind>>,
    schema: Option<SchemaRef>,
}

impl Handlers {
    /// Handlers with a fresh session, authenticating with `method`.
    ///
    /// # Errors
    /// Session setup errors.
    pub fn new(
        engine: Arc<Engine>,
        method: auth::AuthMethod,
        cancel_keys: Arc<CancelKeys>,
    ) -> Result<Self> {
        let auth = match method {
            auth::AuthMethod::Trust => Authentication::Trust,
            auth::AuthMethod::ScramSha256 => {
                let mut scram = ScramAuth::new(Arc::new(auth::RoleVerifiers {
                    engine: Arc::clone(&engine),
                }));
                scram.set_iterations(crate::catalog::roles::SCRAM_ITERATIONS as usize);
                Authentication::Scram(Box::new(
                    SASLAuthStartupHandler::new(Arc::new(ReportedParameters)).with_scram(scram),
                ))
            }
        };
        let session = Session::new(engine)?;
        let interrupt = Arc::clone(&session.interrupt);
        let inner = Arc::new_cyclic(|weak| Conn {
            session: Mutex::new(session),
            parser: Arc::new(Parser {
                session: weak.clone(),
            }),
            auth,
            sasl_started: std::sync::atomic::AtomicBool::new(false),
            cancel_keys,
            cancel_key: std::sync::Mutex::new(None),
            interrupt,
        });
        Ok(Handlers { inner })
    }

    /// Stops the running statement as a cancel request would (the connection is being
    /// closed at shutdown): a query ends, and a write not yet appended to its table's
    /// changelog writes nothing (see `Engine::write_unless`).
    pub fn interrupt_statement(&self) {
        self.inner.interrupt.cancel();
    }

    /// Ends the connection's session: a transaction block still open (the client closed the
    /// connection or sent Terminate inside it, or the server is shutting down) is rolled
    /// back, as PostgreSQL does when a backend exits.
    pub async fn close(&self) {
        let mut session = self.inner.session.lock().await;
        if let Err(e) = session.end_connection().await {
            tracing::warn!(error = %e, "rolling back the open transaction block at disconnect");
        }
    }
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.inner.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.inner.clone()
    }

    fn startup_handler(&self) -> Arc<impl pgwire::api::auth::StartupHandler> {
        self.inner.clone()
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        self.inner.clone()
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        Arc::new(CancelRequests {
            keys: Arc::clone(&self.inner.cancel_keys),
        })
    }
}

/// Startup without a password (`trust`): pgwire's no-op handler, which reports pgwire's
/// default settings; those Weir's differ from are reported again ([`startup_parameters`]).
struct Trust;

#[async_trait]
impl NoopStartupHandler for Trust {
    async fn post_startup<C>(
        &self,
        client: &mut C,
        _message: pgwire::messages::PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let sent = DefaultServerParameterProvider::default()
            .server_parameters(client)
            .unwrap_or_default();
        let ours = ReportedParameters
            .server_parameters(client)
            .unwrap_or_default();
        let mut changed: Vec<_> = ours
            .into_iter()
            .filter(|(name, value)| sent.get(name) != Some(value))
            .collect();
        changed.sort();
        for (name, value) in changed {
            client
                .feed(PgWireBackendMessage::ParameterStatus(
                    pgwire::messages::startup::ParameterStatus::new(name, value),
                ))
                .await?;
        }
        Ok(())
    }
}

/// The settings reported to the client at startup (ParameterStatus): [`startup_parameters`]
/// with the [`crate::session::REPORTED`] settings as the connection's startup parameters set
/// them (`application_name`, `TimeZone`, `options=-c DateStyle=...`), so that a driver is
/// told the values the session has.
struct ReportedParameters;

impl ServerParameterProvider for ReportedParameters {
    fn server_parameters<C>(&self, client: &C) -> Option<std::collections::HashMap<String, String>>
    where
        C: ClientInfo,
    {
        let mut params = startup_parameters().server_parameters(client)?;
        let mut vars = crate::settings::SessionVars::default();
        // A refused value fails the startup before this is asked; defaults otherwise.
        let _ = vars.apply_startup(
            client
                .metadata()
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str())),
        );
        for (reported, name) in crate::session::REPORTED {
            if let Ok(value) = vars.get(name) {
                params.insert(reported.to_string(), value);
            }
        }
        Some(params)
    }
}

/// The settings reported to the client at startup (ParameterStatus): pgwire's defaults with
/// the values of Weir's own settings where they are Weir's (`server_version`, `TimeZone`,
/// `DateStyle`, `IntervalStyle`), so that what drivers are told is what `SHOW` gives (pgwire
/// reported `DateStyle` `ISO, YMD`, Weir shows and follows `ISO, MDY`).
fn startup_parameters() -> DefaultServerParameterProvider {
    let vars = crate::settings::SessionVars::default();
    let mut p = DefaultServerParameterProvider::default();
    let take = |name: &str, into: &mut String| {
        if let Ok(v) = vars.get(name) {
            *into = v;
        }
    };
    take("server_version", &mut p.server_version);
    take("timezone", &mut p.time_zone);
    take("datestyle", &mut p.date_style);
    take("intervalstyle", &mut p.interval_style);
    p
}

/// The database a connection may name: Weir's one database, or `postgres` (the name tools
/// connect to first); anything else is `3D000`, as in PostgreSQL.
fn known_database(name: &str) -> bool {
    name == crate::session::DATABASE || name == "postgres"
}

#[async_trait]
impl StartupHandler for Conn {
    /// Checks the startup message's database and user, then authenticates with the
    /// connection's method; names the session's user.
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: pgwire::messages::PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let pgwire::messages::PgWireFrontendMessage::Startup(startup) = &message {
            let Some(user) = startup.parameters.get("user").filter(|u| !u.is_empty()) else {
                return Err(auth::fatal(
                    "28000",
                    "no PostgreSQL user name specified in startup packet".into(),
                ));
            };
            let database = startup.parameters.get("database").unwrap_or(user);
            if !known_database(database) {
                return Err(auth::fatal(
                    "3D000",
                    format!("database \"{database}\" does not exist"),
                ));
            }
            let mut session = self.session.lock().await;
            if let Some(role) = session.engine.role(user)
                && !role.login
            {
                return Err(auth::fatal(
                    "28000",
                    format!("role \"{user}\" is not permitted to log in"),
                ));
            }
            session.set_user(user);
            let params = startup
                .parameters
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str()));
            if let Err(e) = session.apply_startup(params) {
                return Err(auth::fatal(e.sqlstate(), e.to_string()));
            }
        }
        let result = match &self.auth {
            Authentication::Trust => Trust.on_startup(client, message).await,
            Authentication::Scram(scram) => {
                if let pgwire::messages::PgWireFrontendMessage::PasswordMessageFamily(
                    pgwire::messages::startup::PasswordMessageFamily::Raw(body),
                ) = &message
                    && !self
                        .sasl_started
                        .swap(true, std::sync::atomic::Ordering::Relaxed)
                    && !auth::is_sasl_initial_response(body)
                {
                    return Err(auth::fatal(
                        "08P01",
                        "invalid SASLInitialResponse message".into(),
                    ));
                }
                let result = scram.on_startup(client, message).await;
                scram_result(client, result)
            }
        };
        // Once the connection is ready, its BackendKeyData was sent: cancel requests may
        // name it from now on.
        if result.is_ok()
            && matches!(
                client.state(),
                pgwire::api::PgWireConnectionState::ReadyForQuery
            )
        {
            let mut own = self.cancel_key.lock().unwrap_or_else(|p| p.into_inner());
            if own.is_none() {
                let (pid, secret) = client.pid_and_secret_key();
                let key = (pid, secret.to_bytes().to_vec());
                self.cancel_keys.insert(key.clone(), &self.interrupt);
                *own = Some(key);
            }
        }
        result
    }
}

/// pgwire's SCRAM outcome, with a failed password reported as PostgreSQL reports it.
fn scram_result<C: ClientInfo>(client: &C, result: PgWireResult<()>) -> PgWireResult<()> {
    match result {
        Err(PgWireError::InvalidPassword(_)) => {
            let user = client
                .metadata()
                .get(pgwire::api::METADATA_USER)
                .cloned()
                .unwrap_or_default();
            Err(auth::fatal(
                "28P01",
                format!("password authentication failed for user \"{user}\""),
            ))
        }
        other => other,
    }
}

/// Converts an error into a PostgreSQL ErrorResponse.
fn error_info(e: &Error) -> ErrorInfo {
    ErrorInfo::new("ERROR".to_owned(), e.sqlstate().to_owned(), e.to_string())
}

fn pg_error(e: &Error) -> PgWireError {
    PgWireError::UserError(Box::new(error_info(e)))
}

fn command_tag(tag: &str) -> Tag {
    let parts: Vec<&str> = tag.split(' ').collect();
    let num = |s: &str| s.parse::<usize>().ok();
    match parts.as_slice() {
        [cmd, oid, rows] if num(oid).is_some() && num(rows).is_some() => Tag::new(cmd)
            .with_oid(oid.parse().unwrap_or(0))
            .with_rows(num(rows).unwrap_or(0)),
        [cmd, rows] if num(rows).is_some() => Tag::new(cmd).with_rows(num(rows).unwrap_or(0)),
        _ => Tag::new(tag),
    }
}

/// The wire response of `out`; `zone` is the session's `TimeZone`, that `timestamptz`
/// text is shown in.
fn to_response(
    out: Output,
    format: &Format,
    zone: &Tz,
    reservation: ResultReservation,
) -> PgWireResult<Response> {
    // A Bind with a result format code per column must have as many as the rows have
    // columns (pgwire indexed past the list and panicked, dropping the connection).
    if let (
        Format::Individual(codes),
        Output::Rows { schema, .. } | Output::Returning { schema, .. },
    ) = (format, &out)
        && codes.len() != schema.fields().len()
    {
        return Ok(Response::Error(Box::new(error_info(&Error::plan(
            "08P01",
            format!(
                "bind message has {} result formats but query has {} columns",
                codes.len(),
                schema.fields().len()
            ),
        )))));
    }
    Ok(match out {
        Output::Rows { schema, batches } => {
            Response::Query(query_response(&schema, batches, format, zone, reservation)?)
        }
        Output::Returning {
            schema,
            batches,
            tag,
        } => {
            let mut response = query_response(&schema, batches, format, zone, reservation)?;
            response.set_command_tag(&tag);
            Response::Query(response)
        }
        Output::Command(tag) => Response::Execution(command_tag(&tag)),
        Output::TransactionStart(tag) => Response::TransactionStart(Tag::new(&tag)),
        Output::TransactionEnd(tag) => Response::TransactionEnd(Tag::new(&tag)),
        Output::CopyIn { columns, binary } => Response::CopyIn(CopyResponse::new(
            i8::from(binary),
            columns,
            futures::stream::empty(),
        )),
        Output::CopyOut {
            schema,
            batches,
            format,
        } => Response::CopyOut(copy_out_response(
            &schema,
            batches,
            &format,
            zone,
            reservation,
        )?),
        Output::Empty => Response::EmptyQuery,
    })
}

/// `COPY ... TO STDOUT`: each row as one CopyData message of `format` (text or CSV), its
/// fields in the text form a query's rows are sent in. A header line (CSV `HEADER`) travels
/// in the first row's message, so that the command tag's count (`COPY n`, one per message)
/// stays the number of rows; with no rows it is a message of its own.
fn copy_out_response(
    schema: &SchemaRef,
    batches: Vec<arrow::array::RecordBatch>,
    format: &crate::sql::copy::CopyFormat,
    zone: &Tz,
    mut reservation: ResultReservation,
) -> PgWireResult<CopyResponse> {
    use futures::StreamExt;
    let fields = Arc::new(pg_fields(schema, &Format::UnifiedText)?);
    let header = format.header.then(|| {
        let names: Vec<Option<&[u8]>> = schema
            .fields()
            .iter()
            .map(|f| Some(f.name().as_bytes()))
            .collect();
        crate::sql::copy::copy_out_line(&names, format)
    });
    let has_rows = batches.iter().any(|b| b.num_rows() > 0);
    let format = format.clone();
    let zone = *zone;
    let mut header_left = header.clone().filter(|_| has_rows);
    // Encoded a batch at a time, as the client reads (see `query_response`).
    let lines = futures::stream::iter(batches).flat_map(move |b| {
        reservation.release(&b);
        let mut rows = Vec::with_capacity(b.num_rows());
        let encoded = pg_text_columns(b, &Format::UnifiedText, &zone)
            .map_err(|e| pg_error(&e))
            .and_then(|b| encode_rows(&fields, &b, &mut rows));
        let mut messages = Vec::with_capacity(rows.len() + 1);
        if let Err(e) = encoded {
            messages.push(Err(e));
        }
        for row in rows {
            messages.push(row.and_then(|row| {
                let values = data_row_fields(&row)?;
                let mut line = header_left.take().unwrap_or_default();
                line.extend(crate::sql::copy::copy_out_line(&values, &format));
                Ok(CopyData::new(bytes::Bytes::from(line)))
            }));
        }
        futures::stream::iter(messages)
    });
    // With no rows the header is a message of its own.
    let lone_header = header
        .filter(|_| !has_rows)
        .map(|line| Ok(CopyData::new(bytes::Bytes::from(line))));
    Ok(CopyResponse::new(
        0,
        schema.fields().len(),
        lines.chain(futures::stream::iter(lone_header)),
    ))
}

/// The field values of an encoded data row (`None` for NULL): each field is a 4-byte
/// big-endian length (-1 for NULL) and that many bytes (protocol docs, "DataRow").
fn data_row_fields(row: &pgwire::messages::data::DataRow) -> PgWireResult<Vec<Option<&[u8]>>> {
    let data: &[u8] = &row.data;
    let mut at = 0usize;
    let mut out = Vec::with_capacity(row.field_count.max(0) as usize);
    let malformed = || pg_error(&Error::Internal("malformed data row".into()));
    for _ in 0..row.field_count {
        let len_bytes: [u8; 4] = data
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(malformed)?;
        at += 4;
        let len = i32::from_be_bytes(len_bytes);
        if len < 0 {
            out.push(None);
        } else {
            let end = at + len as usize;
            out.push(Some(data.get(at..end).ok_or_else(malformed)?));
            at = end;
        }
    }
    Ok(out)
}

/// The columns of `schema` as described to a client (arrow-pg's types), with a column of no
/// type (`SELECT NULL`, an untyped parameter `SELECT $1`) described as `text`: PostgreSQL
/// resolves an output column of type `unknown` as `text` (docs, 10.5 "UNION, CASE, and
/// Related Constructs", and the release notes of PostgreSQL 10). Such a column holds only
/// NULLs when planned without parameter values; with them bound, it holds their text.
///
/// A catalog column is described as `oid`, as PostgreSQL's catalogs declare their OID
/// columns (`pg_class.relnamespace`, `pg_attribute.attrelid`, `atttypid`), where
/// datafusion-pg-catalog marks some as `regnamespace`, `regclass` or `regtype`, whose
/// values drivers read as names (psycopg returned `'16454'`, asyncpg a string). The marker
/// survives only on its own 4-byte integer: DataFusion keeps a column's marker through a
/// cast, and `c.oid::int8` or `c.oid::text` is a `bigint` or `text` (as in PostgreSQL),
/// whose values an `oid` description would make a binary client misread.
fn pg_fields(schema: &arrow::datatypes::Schema, format: &Format) -> PgWireResult<Vec<FieldInfo>> {
    use arrow_pg::datatypes::PG_OID_ALIAS_KEY;
    // arrow-pg encodes arrays of one dimension only; an array of arrays is refused by name
    // rather than as its internal error.
    if let Some(f) = schema.fields().iter().find(|f| {
        matches!(f.data_type(), DataType::List(item) | DataType::LargeList(item)
            if matches!(item.data_type(), DataType::List(_) | DataType::LargeList(_)))
    }) {
        return Err(pg_error(&Error::not_supported(format!(
            "multidimensional arrays (column \"{}\") are not supported",
            f.name()
        ))));
    }
    let described;
    let schema = if schema.fields().iter().any(|f| oid_marker_to_fix(f)) {
        let fields: Vec<arrow::datatypes::Field> = schema
            .fields()
            .iter()
            .map(|f| {
                let mut f = f.as_ref().clone();
                if oid_marker_to_fix(&f) {
                    if f.data_type() == &DataType::Int32 {
                        f.metadata_mut()
                            .insert(PG_OID_ALIAS_KEY.to_string(), "oid".to_string());
                    } else {
                        f.metadata_mut().remove(PG_OID_ALIAS_KEY);
                    }
                }
                f
            })
            .collect();
        described = arrow::datatypes::Schema::new(fields);
        &described
    } else {
        schema
    };
    let fields = arrow_schema_to_pg_fields(schema, format, None)?;
    Ok(fields
        .into_iter()
        .zip(schema.fields())
        .map(|(info, f)| {
            if f.data_type() == &DataType::Null {
                FieldInfo::new(info.name().into(), None, None, Type::TEXT, info.format())
            } else if f.data_type() == &DataType::Utf8
                && PgTextType::of(f.metadata()) != PgTextType::Text
            {
                let t = match PgTextType::of(f.metadata()) {
                    PgTextType::Varchar => Type::VARCHAR,
                    _ => Type::BPCHAR,
                };
                FieldInfo::new(info.name().into(), None, None, t, info.format())
            } else if is_oid_array(f) {
                // Its 4-byte elements are written as `oid`s: an array's binary form names
                // the element type of its description.
                FieldInfo::new(
                    info.name().into(),
                    None,
                    None,
                    Type::OID_ARRAY,
                    info.format(),
                )
            } else {
                info
            }
        })
        .collect())
}

/// Whether `f` carries an OID type marker other than `oid` on a 4-byte integer, or any on
/// values that are no longer a 4-byte OID or an array of them (see [`pg_fields`]).
fn oid_marker_to_fix(f: &arrow::datatypes::Field) -> bool {
    match f.metadata().get(arrow_pg::datatypes::PG_OID_ALIAS_KEY) {
        Some(kind) => (f.data_type() != &DataType::Int32 && !is_oid_array(f)) || kind != "oid",
        None => false,
    }
}

/// Whether `f` is an array of 4-byte integers marked as OIDs: `oid[]` (the marker is the
/// list field's, see [`crate::sql::oid_columns`]).
fn is_oid_array(f: &arrow::datatypes::Field) -> bool {
    matches!(f.data_type(), DataType::List(item) | DataType::LargeList(item)
        if item.data_type() == &DataType::Int32)
        && f.metadata()
            .get(arrow_pg::datatypes::PG_OID_ALIAS_KEY)
            .map(String::as_str)
            == Some("oid")
}

/// The rows of a result as data rows, encoded a batch at a time as pgwire sends them: the
/// connection's writer waits for the client when its socket buffer is full, so an encoded
/// copy of the whole result never builds up. The batches not yet sent stay reserved in the
/// session's memory pool.
fn query_response(
    schema: &SchemaRef,
    batches: Vec<arrow::array::RecordBatch>,
    format: &Format,
    zone: &Tz,
    mut reservation: ResultReservation,
) -> PgWireResult<QueryResponse> {
    use futures::StreamExt;
    let fields = Arc::new(pg_fields(schema, format)?);
    let encoding = Arc::clone(&fields);
    let format = format.clone();
    let zone = *zone;
    let rows = futures::stream::iter(batches).flat_map(move |b| {
        reservation.release(&b);
        let mut rows = Vec::with_capacity(b.num_rows());
        let encoded = pg_text_columns(b, &format, &zone)
            .map_err(|e| pg_error(&e))
            .and_then(|b| encode_rows(&encoding, &b, &mut rows));
        if let Err(e) = encoded {
            rows.push(Err(e));
        }
        futures::stream::iter(rows)
    });
    Ok(QueryResponse::new(fields, rows))
}

/// The memory of a result's batches not yet sent, reserved in the session's query memory
/// pool (`query.memory_limit_mb`); released batch by batch as they are encoded, and wholly
/// when the response is dropped (sent, or the connection gone).
struct ResultReservation(datafusion::execution::memory_pool::MemoryReservation);

impl ResultReservation {
    fn empty(pool: &Arc<crate::session::memory::QueryMemoryPool>) -> Self {
        ResultReservation(crate::session::memory::result_reservation(pool))
    }

    /// Reserves the memory of `out`'s rows, which wait here for the client to read them (a
    /// client that stops reading held them without bound). The rows of a write's
    /// `RETURNING` are reserved whatever the pool holds: the write is done, and an error
    /// here would report a write that stays as failed.
    ///
    /// # Errors
    /// `53200` when the pool cannot hold the rows of a query or a `COPY ... TO`: a
    /// statement error, so the statements after it do not run and an implicit transaction
    /// is undone.
    fn for_output(
        out: &Output,
        pool: &Arc<crate::session::memory::QueryMemoryPool>,
    ) -> Result<Self> {
        let r = Self::empty(pool);
        match out {
            Output::Rows { batches, .. } | Output::CopyOut { batches, .. } => {
                let bytes: usize = batches.iter().map(batch_bytes).sum();
                crate::session::memory::reserve_result(&r.0, bytes, pool.limit())?;
            }
            Output::Returning { batches, .. } => {
                r.0.grow(batches.iter().map(batch_bytes).sum());
            }
            _ => {}
        }
        Ok(r)
    }

    /// `batch` is being sent: its memory is no longer held here.
    fn release(&mut self, batch: &arrow::array::RecordBatch) {
        self.0.shrink(batch_bytes(batch).min(self.0.size()));
    }
}

/// Encodes `batch` as data rows of `fields`, stopping at the first value that cannot be
/// encoded. Every `numeric` is sent as [`PgText`] (all its digits and its scale: `0.0`
/// keeps its decimal, `1e-30` its 30); an unconstrained one (38 digits) drops its trailing
/// fractional zeros, as its text form does (see [`pg_numeric`]).
fn encode_rows(
    fields: &Arc<Vec<pgwire::api::results::FieldInfo>>,
    batch: &arrow::array::RecordBatch,
    rows: &mut Vec<PgWireResult<pgwire::messages::data::DataRow>>,
) -> PgWireResult<()> {
    use arrow::array::{Array, AsArray};
    use arrow_pg::encoder::Encoder;
    let schema = batch.schema();
    let mut encoder = pgwire::api::results::DataRowEncoder::new(fields.clone());
    for r in 0..batch.num_rows() {
        for (c, col) in batch.columns().iter().enumerate() {
            let field = schema.field(c);
            match col.data_type() {
                DataType::Decimal128(p, scale) => {
                    let trim = *p == crate::sql::semantics::NUMERIC_MAX_PRECISION;
                    let value = (!col.is_null(r)).then(|| {
                        let v = col
                            .as_primitive::<arrow::datatypes::Decimal128Type>()
                            .value(r);
                        PgText(pg_numeric(v, *scale, trim))
                    });
                    Encoder::encode_field(&mut encoder, &value, &fields[c])?;
                }
                // A binary array of unconstrained numerics: each element drops its trailing
                // fractional zeros as a scalar does (arrow-pg sent the column's scale, 10).
                DataType::List(item)
                    if fields[c].format() == pgwire::api::results::FieldFormat::Binary
                        && matches!(item.data_type(), DataType::Decimal128(p, _)
                            if *p == crate::sql::semantics::NUMERIC_MAX_PRECISION) =>
                {
                    let scale = match item.data_type() {
                        DataType::Decimal128(_, s) => *s,
                        _ => 0,
                    };
                    let value = (!col.is_null(r)).then(|| {
                        let list = col.as_list::<i32>().value(r);
                        let values = list.as_primitive::<arrow::datatypes::Decimal128Type>();
                        (0..values.len())
                            .map(|i| {
                                (!values.is_null(i))
                                    .then(|| PgText(pg_numeric(values.value(i), scale, true)))
                            })
                            .collect::<Vec<_>>()
                    });
                    Encoder::encode_field(&mut encoder, &value, &fields[c])?;
                }
                // An array's text made by `pg_text_columns`, sent as it is (pgwire would
                // quote it as one text element).
                DataType::Utf8
                    if matches!(fields[c].datatype().kind(), postgres_types::Kind::Array(_)) =>
                {
                    let value = (!col.is_null(r))
                        .then(|| PgText(col.as_string::<i32>().value(r).to_string()));
                    Encoder::encode_field(&mut encoder, &value, &fields[c])?;
                }
                // arrow-pg encodes an interval's slot without looking at its null bit.
                DataType::Interval(_) if col.is_null(r) => {
                    Encoder::encode_field(&mut encoder, &None::<i64>, &fields[c])?;
                }
                _ => arrow_pg::encoder::encode_value(&mut encoder, col, r, field, &fields[c])?,
            }
        }
        rows.push(Ok(encoder.take_row()));
    }
    Ok(())
}

/// Renders the text-format columns whose PostgreSQL text form differs from arrow-pg's:
/// floating point (shortest round-trip digits, `Infinity`, `NaN`), intervals
/// ([`interval_out`](crate::sql::functions::datetime_input::interval_out)), times of day
/// (`10:20:30`, the fraction only when not zero), arrays
/// ([`texts`](crate::sql::functions::text_output::texts)) and timestamps
/// (`YYYY-MM-DD HH:MM:SS[.ffffff]`; a timestamptz in `zone`, the session's `TimeZone`,
/// with its UTC offset, as PostgreSQL prints it). The column keeps its PostgreSQL type;
/// only the bytes sent change.
fn pg_text_columns(
    batch: arrow::array::RecordBatch,
    format: &Format,
    zone: &Tz,
) -> Result<arrow::array::RecordBatch> {
    use arrow::array::{Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    let schema = batch.schema();
    let mut changed = false;
    let mut columns = batch.columns().to_vec();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    for (i, col) in batch.columns().iter().enumerate() {
        // A `character(n)` value is sent padded to `n` characters, in either format (Weir
        // keeps it without the trailing spaces).
        if let (DataType::Utf8, PgTextType::Bpchar(Some(n))) =
            (col.data_type(), PgTextType::of(schema.field(i).metadata()))
        {
            columns[i] = Arc::new(blank_padded(col.as_ref(), n));
            changed = true;
            continue;
        }
        if format.format_for(i) != pgwire::api::results::FieldFormat::Text {
            continue;
        }
        // PostgreSQL's text forms (`pg_text_out`'s): floats (`1`, `1e+20`, `Infinity`),
        // `numeric` at its display scale, intervals, times of day, timestamps (`timestamptz`
        // in the session's zone), and arrays of these (`{1.5,2}`).
        let text: Option<StringArray> = match col.data_type() {
            DataType::Interval(_)
            | DataType::Float64
            | DataType::Float32
            | DataType::Decimal128(..)
            | DataType::Time32(_)
            | DataType::Time64(_)
            | DataType::Timestamp(..)
            | DataType::List(_)
            | DataType::LargeList(_)
            | DataType::FixedSizeList(..) => Some(crate::sql::functions::text_output::texts(
                col.as_ref(),
                Some(zone),
                false,
            )?),
            _ => None,
        };
        if let Some(t) = text {
            debug_assert_eq!(t.len(), col.len());
            columns[i] = Arc::new(t);
            fields[i] = Field::new(fields[i].name(), DataType::Utf8, true);
            changed = true;
        }
    }
    if !changed {
        return Ok(batch);
    }
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(arrow::array::RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &options,
    )?)
}

/// The values of a `character(n)` column (`Utf8`) padded with spaces to `n` characters.
fn blank_padded(col: &dyn arrow::array::Array, n: usize) -> arrow::array::StringArray {
    use arrow::array::{Array, AsArray};
    let values = col.as_string::<i32>();
    (0..values.len())
        .map(|r| {
            (!values.is_null(r)).then(|| {
                let v = values.value(r);
                let short = n.saturating_sub(v.chars().count());
                let mut s = String::with_capacity(v.len() + short);
                s.push_str(v);
                s.extend(std::iter::repeat_n(' ', short));
                s
            })
        })
        .collect()
}

/// The text of a `numeric` value `v`·10^-`scale`. An unconstrained `numeric` (38 digits)
/// does not know the scale each value was written with, so its trailing fractional zeros
/// are dropped (`13.125`, not `13.125000…`); `numeric(p,s)` prints `s` decimals as
/// PostgreSQL does.
pub(crate) fn pg_numeric(v: i128, scale: i8, trim: bool) -> String {
    let negative = v < 0;
    let digits = v.unsigned_abs().to_string();
    let mut s = if scale <= 0 {
        let mut d = digits;
        if d != "0" {
            d.extend(std::iter::repeat_n('0', usize::from(scale.unsigned_abs())));
        }
        d
    } else {
        let scale = usize::from(scale.unsigned_abs());
        let padded = if digits.len() <= scale {
            format!("{}{digits}", "0".repeat(scale + 1 - digits.len()))
        } else {
            digits
        };
        let (int, frac) = padded.split_at(padded.len() - scale);
        let frac = if trim {
            frac.trim_end_matches('0')
        } else {
            frac
        };
        if frac.is_empty() {
            int.to_string()
        } else {
            format!("{int}.{frac}")
        }
    };
    if negative && s.bytes().any(|b| b != b'0' && b != b'.') {
        s.insert(0, '-');
    }
    s
}

/// A value already in PostgreSQL's text form, sent as that text in a text-format column: a
/// `numeric` ([`pg_numeric`]) or an array (`{1,"a b"}`, made by `pg_text_columns`; pgwire
/// would quote it as one text element). In a binary-format column a `numeric` goes in
/// PostgreSQL's binary form (`numeric_send` in PostgreSQL's `numeric.c`: the digit count, the
/// weight of the first digit, the sign, the display scale, then base-10,000 digits as 16-bit
/// integers), every one of its 38 digits (`rust_decimal`, which pgwire's own numeric encoding
/// uses, holds 28); other values go as their text.
#[derive(Debug)]
struct PgText(String);

impl PgText {
    /// The binary form of a `numeric` value (see the type's docs).
    fn numeric_binary(&self) -> Vec<u8> {
        let (negative, digits) = match self.0.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, self.0.as_str()),
        };
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        let int = int.trim_start_matches('0');
        let dscale = frac.len() as u16;
        // Whole groups of four: the integer part padded on the left, the fraction on the right.
        let int = format!("{}{int}", "0".repeat((4 - int.len() % 4) % 4));
        let frac = format!("{frac}{}", "0".repeat((4 - frac.len() % 4) % 4));
        let group = |s: &str| -> Vec<i16> {
            s.as_bytes()
                .chunks(4)
                .map(|c| c.iter().fold(0i16, |n, d| n * 10 + i16::from(d - b'0')))
                .collect()
        };
        let mut groups = group(&int);
        let mut weight = groups.len() as i16 - 1;
        groups.extend(group(&frac));
        let leading = groups.iter().take_while(|g| **g == 0).count();
        groups.drain(..leading);
        weight -= leading as i16;
        while groups.last() == Some(&0) {
            groups.pop();
        }
        if groups.is_empty() {
            weight = 0;
        }
        let sign: u16 = if negative && !groups.is_empty() {
            0x4000
        } else {
            0
        };
        let mut out = Vec::with_capacity(8 + 2 * groups.len());
        out.extend_from_slice(&(groups.len() as i16).to_be_bytes());
        out.extend_from_slice(&weight.to_be_bytes());
        out.extend_from_slice(&sign.to_be_bytes());
        out.extend_from_slice(&dscale.to_be_bytes());
        for g in groups {
            out.extend_from_slice(&g.to_be_bytes());
        }
        out
    }
}

impl postgres_types::ToSql for PgText {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<postgres_types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        if *ty == Type::NUMERIC {
            out.extend_from_slice(&self.numeric_binary());
        } else {
            out.extend_from_slice(self.0.as_bytes());
        }
        Ok(postgres_types::IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC || matches!(ty.kind(), postgres_types::Kind::Array(_))
    }

    postgres_types::to_sql_checked!();
}

impl pgwire::types::ToSqlText for PgText {
    fn to_sql_text(
        &self,
        _ty: &Type,
        out: &mut bytes::BytesMut,
        _format_options: &pgwire::types::format::FormatOptions,
    ) -> std::result::Result<postgres_types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(self.0.as_bytes());
        Ok(postgres_types::IsNull::No)
    }
}

/// PostgreSQL's spelling of a non-finite float, if `f` is one.
fn non_finite(f: f64) -> Option<String> {
    if f.is_nan() {
        Some("NaN".into())
    } else if f.is_infinite() {
        Some(if f > 0.0 { "Infinity" } else { "-Infinity" }.into())
    } else {
        None
    }
}

/// PostgreSQL's text form of a double: the shortest digits that round-trip, in fixed notation
/// when the decimal exponent is in [-4, 15) and as `1.5e+16` / `1e-05` otherwise (PostgreSQL's
/// `float8out` with `extra_float_digits` > 0, the default; `d2s.c`).
pub(crate) fn pg_float(f: f64) -> String {
    non_finite(f).unwrap_or_else(|| shortest_text(format!("{f}"), format!("{f:e}"), 15))
}

/// PostgreSQL's text form of a real: as [`pg_float`] with fixed notation for decimal
/// exponents in [-4, 6) (`float4out`; `f2s.c`).
pub(crate) fn pg_float32(f: f32) -> String {
    non_finite(f64::from(f)).unwrap_or_else(|| shortest_text(format!("{f}"), format!("{f:e}"), 6))
}

/// Chooses between the shortest round-trip digits in fixed notation (`fixed`, Rust's `{}`) and
/// in scientific notation (`scientific`, Rust's `{:e}`, e.g. `-1.5e-7`) as PostgreSQL does:
/// fixed when the exponent is in [-4, `fixed_below`), else the scientific digits with a signed
/// exponent of at least two digits (`-1.5e-07`).
fn shortest_text(fixed: String, scientific: String, fixed_below: i32) -> String {
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return fixed;
    };
    let Ok(exponent) = exponent.parse::<i32>() else {
        return fixed;
    };
    if (-4..fixed_below).contains(&exponent) {
        fixed
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    }
}

/// The transaction status ReadyForQuery reports, as the session has it: no block (`I`), a
/// block (`T`), a block a failed statement aborted (`E`). pgwire derives it from the
/// responses instead, which is wrong after a failed `COMMIT` (PostgreSQL ends the block: `I`,
/// where pgwire said `E`, and a driver that believed it opened no new block).
fn block_status(session: &Session) -> TransactionStatus {
    match &session.transaction {
        None => TransactionStatus::Idle,
        Some(block) if block.aborted => TransactionStatus::Error,
        Some(_) => TransactionStatus::Transaction,
    }
}

#[async_trait]
impl SimpleQueryHandler for Conn {
    /// A simple Query: its statements' responses (see `do_query`), then ReadyForQuery with
    /// the session's transaction status ([`block_status`]); pgwire's parts send each
    /// response.
    async fn on_query<C>(&self, client: &mut C, query: Query) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        use pgwire::api::PgWireConnectionState;
        use pgwire::api::query::{send_execution_response, send_query_response};
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        client.set_state(PgWireConnectionState::QueryInProgress);
        let responses = self.simple_responses(&query.query).await?;
        let mut copy_in = false;
        for (notices, response) in responses {
            send_notices(client, notices).await?;
            match response {
                Response::EmptyQuery => {
                    client
                        .feed(PgWireBackendMessage::EmptyQueryResponse(
                            pgwire::messages::response::EmptyQueryResponse::new(),
                        ))
                        .await?;
                }
                Response::Query(results) => send_query_response(client, results, true).await?,
                Response::Execution(tag)
                | Response::TransactionStart(tag)
                | Response::TransactionEnd(tag) => send_execution_response(client, tag).await?,
                Response::Error(e) => {
                    client
                        .feed(PgWireBackendMessage::ErrorResponse((*e).into()))
                        .await?;
                }
                Response::CopyIn(result) => {
                    pgwire::api::copy::send_copy_in_response(client, result).await?;
                    copy_in = true;
                }
                Response::CopyOut(result) => {
                    pgwire::api::copy::send_copy_out_response(client, result).await?;
                }
                Response::CopyBoth(_) => {
                    return Err(PgWireError::UserError(Box::new(error_info(
                        &Error::not_supported("COPY BOTH"),
                    ))));
                }
            }
        }
        let status = block_status(&*self.session.lock().await);
        client.set_transaction_status(status);
        if copy_in {
            // ReadyForQuery follows the COPY's data (CopyDone or CopyFail).
            client.set_state(PgWireConnectionState::CopyInProgress(false));
        } else {
            client.set_state(PgWireConnectionState::ReadyForQuery);
            client
                .send(PgWireBackendMessage::ReadyForQuery(
                    pgwire::messages::response::ReadyForQuery::new(status),
                ))
                .await?;
        }
        Ok(())
    }

    async fn do_query<C>(&self, _client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        Ok(self
            .simple_responses(query)
            .await?
            .into_iter()
            .map(|(_, response)| response)
            .collect())
    }
}

/// Sends a statement's notices and warnings ([`crate::session::Notice`]) and the settings it
/// changed that PostgreSQL reports (ParameterStatus), before its result.
async fn send_notices<C>(client: &mut C, messages: crate::session::Messages) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    for (name, value) in messages.parameters {
        client
            .feed(PgWireBackendMessage::ParameterStatus(
                pgwire::messages::startup::ParameterStatus::new(name.to_string(), value),
            ))
            .await?;
    }
    for n in messages.notices {
        let info = ErrorInfo::new(
            n.level.severity().to_string(),
            n.code.to_string(),
            n.message,
        );
        client
            .feed(PgWireBackendMessage::NoticeResponse(info.into()))
            .await?;
    }
    Ok(())
}

impl Conn {
    /// The responses of a simple Query's statements, each with the notices it raised: the
    /// statements of one Query are one implicit transaction (see `Session::implicit`); the
    /// first that fails ends the Query with its error.
    async fn simple_responses(
        &self,
        query: &str,
    ) -> PgWireResult<Vec<(crate::session::Messages, Response)>> {
        let mut session = self.session.lock().await;
        let mut responses = Vec::new();
        // The statements of one Query are one implicit transaction (see `Session::implicit`);
        // after a COMMIT or ROLLBACK among them, those that follow are a new one.
        let statements = split_statements(query);
        let several = statements.len() > 1;
        for stmt in statements {
            if several {
                session.begin_implicit_of_several();
            } else {
                session.begin_implicit();
            }
            // The span goes with the future (`instrument`), not a guard held across the
            // await: a guard entered on one worker thread and dropped on another corrupts
            // the subscriber's span stack.
            let span = tracing::debug_span!("statement", sql = %truncate(&stmt));
            let interrupt = Arc::clone(&session.interrupt);
            let timeout = session.statement_timeout();
            let result = interruptible(
                &interrupt,
                cancellable(&stmt),
                timeout,
                session.execute(&stmt).instrument(span),
            )
            .await;
            if interrupted(&result) {
                session.after_panic();
            }
            let result = result.and_then(|out| {
                let reservation = ResultReservation::for_output(&out, &session.memory)?;
                Ok((out, reservation))
            });
            match result {
                Ok((out, reservation)) => {
                    let copy = matches!(out, Output::CopyIn { .. });
                    let response = to_response(
                        out,
                        &Format::UnifiedText,
                        &session.display_zone,
                        reservation,
                    );
                    let notices = session.take_messages();
                    responses.push((notices, response?));
                    if copy {
                        break;
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, code = e.sqlstate(), "statement failed");
                    session.statement_failed().await;
                    let notices = session.take_messages();
                    responses.push((notices, Response::Error(Box::new(error_info(&e)))));
                    break;
                }
            }
        }
        if let Err(e) = session.commit_implicit().await {
            responses.push((
                session.take_messages(),
                Response::Error(Box::new(error_info(&e))),
            ));
        }
        if responses.is_empty() {
            responses.push((session.take_messages(), Response::EmptyQuery));
        }
        Ok(responses)
    }
}

/// How the message of a statement's panic starts ([`guarded`]).
const PANIC_PREFIX: &str = "a statement panicked: ";

/// Runs a statement's future, turning a panic inside it (a bug in Weir or in a library it
/// calls) into an `XX000` error for that statement, logged, so the connection survives
/// (the caller then puts the session in order with `Session::after_panic`).
async fn guarded<T>(statement: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(statement).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_string());
            tracing::error!(panic = %message, "a statement panicked");
            Err(Error::Internal(format!("{PANIC_PREFIX}{message}")))
        }
    }
}

/// Runs a statement ([`guarded`]) under the session's cancel state: it starts with the
/// `statement_timeout` deadline, and a query (see [`cancellable`]) is abandoned, its future
/// dropped, with `57014` once a cancel request or the deadline comes. Other statements run
/// to their end (their writes are not undone half way); `pg_sleep` checks the cancel state
/// itself.
async fn interruptible<T>(
    interrupt: &Interrupt,
    cancellable: bool,
    timeout: Option<std::time::Duration>,
    statement: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    interrupt.start(timeout);
    let result = if cancellable {
        tokio::select! {
            result = guarded(statement) => result,
            e = interrupt.interrupted() => Err(e),
        }
    } else {
        guarded(statement).await
    };
    interrupt.finish();
    result
}

/// Whether a statement was stopped half way (a panic or a cancel): the session is then put
/// in order with `Session::after_panic`.
fn interrupted<T>(result: &Result<T>) -> bool {
    match result {
        Err(Error::Internal(m)) => m.starts_with(PANIC_PREFIX),
        Err(Error::QueryCanceled(_)) => true,
        _ => false,
    }
}

/// Whether a statement only reads, so that dropping it half way loses nothing: `SELECT`,
/// `VALUES`, `TABLE`, `WITH`, `SHOW`, `EXPLAIN` (not `EXPLAIN ANALYZE`) and `FLUSH` (a wait).
fn cancellable(sql: &str) -> bool {
    let mut words = sql
        .trim_start()
        .trim_start_matches('(')
        .split(|c: char| c.is_whitespace() || c == '(')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase);
    match words.next().as_deref() {
        Some("select" | "values" | "table" | "show" | "flush" | "declare" | "fetch" | "move") => {
            true
        }
        // `WITH ... INSERT/UPDATE/DELETE` writes: any such word makes it run to its end.
        Some("with") => !sql
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .any(|w| {
                ["insert", "update", "delete"]
                    .iter()
                    .any(|k| w.eq_ignore_ascii_case(k))
            }),
        Some("explain") => words.next().as_deref() != Some("analyze"),
        _ => false,
    }
}

/// The name a declared parameter type is cast to, for the types whose values have one
/// meaning. Text types (`text`, `varchar`: pgjdbc's `setString` declares `varchar` for any
/// value) and unknown ones are left to the type the parameter's use implies.
fn declared_type_name(t: &Type) -> Option<&'static str> {
    Some(match *t {
        Type::BOOL => "bool",
        Type::INT2 => "int2",
        Type::INT4 => "int4",
        Type::INT8 => "int8",
        Type::FLOAT4 => "float4",
        Type::FLOAT8 => "float8",
        Type::NUMERIC => "numeric",
        Type::DATE => "date",
        Type::TIME => "time",
        Type::TIMESTAMP => "timestamp",
        Type::TIMESTAMPTZ => "timestamptz",
        Type::INTERVAL => "interval",
        Type::BYTEA => "bytea",
        // Arrays: a `text[]` has one meaning too (no driver declares it for other values).
        Type::BOOL_ARRAY => "bool[]",
        Type::INT2_ARRAY => "int2[]",
        Type::INT4_ARRAY => "int4[]",
        Type::INT8_ARRAY => "int8[]",
        Type::FLOAT4_ARRAY => "float4[]",
        Type::FLOAT8_ARRAY => "float8[]",
        Type::NUMERIC_ARRAY => "numeric[]",
        Type::TEXT_ARRAY => "text[]",
        Type::VARCHAR_ARRAY => "varchar[]",
        Type::DATE_ARRAY => "date[]",
        Type::TIMESTAMP_ARRAY => "timestamp[]",
        Type::TIMESTAMPTZ_ARRAY => "timestamptz[]",
        _ => return None,
    })
}

fn truncate(s: &str) -> String {
    let s = s.trim();
    if s.len() > 200 {
        let mut end = 200;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &s[..end])
    } else {
        s.to_string()
    }
}

#[async_trait]
impl QueryParser for Parser {
    type Statement = Prepared;

    /// Plans a statement of a Parse message. A parameter whose type the client declared is
    /// read as that type ([`crate::sql::parse::declare_parameter_types`]); the others get the
    /// types their use implies.
    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Prepared>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let conn = self
            .session
            .upgrade()
            .ok_or_else(|| pg_error(&Error::Internal("session closed".into())))?;
        let declared: Vec<Option<&str>> = types
            .iter()
            .map(|t| t.as_ref().and_then(declared_type_name))
            .collect();
        let sql = crate::sql::parse::declare_parameter_types(sql, &declared);
        let mut session = conn.session.lock().await;
        // Planning a Parse can take as long as running a query: a cancel request or the
        // `statement_timeout` ends it too (only plans are made, nothing is written).
        let interrupt = Arc::clone(&session.interrupt);
        let timeout = session.statement_timeout();
        let described = interruptible(&interrupt, true, timeout, session.describe(&sql)).await;
        if interrupted(&described) {
            session.after_panic();
        }
        let (params, schema) = match described {
            Ok(d) => d,
            // A Parse that fails fails its transaction as a statement would (PostgreSQL
            // aborts the block on any error of the extended protocol's messages).
            Err(e) => {
                session.statement_failed().await;
                return Err(pg_error(&e));
            }
        };
        let param_oids = crate::sql::oid_columns::oid_parameters(&sql);
        Ok(Some(Prepared {
            sql,
            params,
            param_oids,
            schema,
        }))
    }

    fn get_parameter_types(&self, stmt: &Prepared) -> PgWireResult<Vec<Type>> {
        use crate::sql::oid_columns::OidKind;
        stmt.params
            .iter()
            .enumerate()
            .map(
                |(i, t)| match (t, stmt.param_oids.get(i).copied().flatten()) {
                    (Some(DataType::Int32), Some(OidKind::Oid)) => Ok(Type::OID),
                    (Some(DataType::List(item)), Some(OidKind::OidArray))
                        if item.data_type() == &DataType::Int32 =>
                    {
                        Ok(Type::OID_ARRAY)
                    }
                    (Some(t), _) => into_pg_type(t),
                    // Nothing gives the parameter a type (`SELECT $1`): PostgreSQL resolves it
                    // as `text`.
                    (None, _) => Ok(Type::TEXT),
                },
            )
            .collect()
    }

    fn get_result_schema(
        &self,
        stmt: &Prepared,
        format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        match &stmt.schema {
            Some(s) => pg_fields(s, format.unwrap_or(&Format::UnifiedText)),
            None => Ok(vec![]),
        }
    }
}

#[async_trait]
impl ExtendedQueryHandler for Conn {
    type Statement = Prepared;
    type QueryParser = Parser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.parser.clone()
    }

    /// Execute, with a row limit of zero or less meaning every row (protocol docs, 55.7
    /// "Message Formats": "zero denotes no limit"; PostgreSQL's `exec_execute_message` reads
    /// a negative one so too). pgwire reads the limit as unsigned, so -1 asked for 2^64 - 1
    /// rows and its buffer allocation panicked, dropping the connection.
    async fn on_execute<C>(&self, client: &mut C, mut message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if message.max_rows < 0 {
            message.max_rows = 0;
        }
        self._on_execute(client, message).await
    }

    /// Sync ends the implicit transaction of the statements run since the last one,
    /// keeping their writes; then pgwire's answer (ReadyForQuery).
    async fn on_sync<C>(
        &self,
        client: &mut C,
        message: pgwire::messages::extendedquery::Sync,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let _ = message;
        let status = {
            let mut session = self.session.lock().await;
            if let Err(e) = session.commit_implicit().await {
                tracing::warn!(error = %e, "ending the implicit transaction at Sync");
            }
            block_status(&session)
        };
        client.set_transaction_status(status);
        // pgwire's own Sync (its default `on_sync`, which an override replaces).
        client.portal_store().rm_portal(DEFAULT_NAME);
        client
            .send(PgWireBackendMessage::ReadyForQuery(
                pgwire::messages::response::ReadyForQuery::new(client.transaction_status()),
            ))
            .await?;
        client.flush().await?;
        Ok(())
    }

    /// Describe, with PostgreSQL's answers for a cursor's portal and for a prepared statement
    /// that returns no rows
    /// (`INSERT ... VALUES ($1)`): ParameterDescription, then NoData (protocol docs, 55.2.3
    /// "Extended Query"). pgwire's default sends an empty RowDescription instead when the
    /// statement has parameters, and pgjdbc then takes the statement for a query and fails
    /// `executeUpdate` ("A result was returned when none was expected").
    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if message.target_type == TARGET_TYPE_BYTE_STATEMENT {
            let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
            if let Some(Entry::Value(stmt)) = client.portal_store().get_statement(name) {
                let described = self.do_describe_statement(client, &stmt).await?;
                if described.fields.is_empty() {
                    let oids = described.parameters.iter().map(|t| t.oid()).collect();
                    client
                        .send(PgWireBackendMessage::ParameterDescription(
                            ParameterDescription::new(oids),
                        ))
                        .await?;
                    client
                        .send(PgWireBackendMessage::NoData(NoData::new()))
                        .await?;
                } else {
                    send_describe_response(client, &described).await?;
                }
                return Ok(());
            }
        }
        // A cursor is a portal too (PostgreSQL's DECLARE reference): psycopg describes the
        // portal of the cursor it declared to learn the rows' columns.
        if message.target_type != TARGET_TYPE_BYTE_STATEMENT {
            let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
            if client.portal_store().get_portal(name).is_none() {
                let schema = self.session.lock().await.cursors.schema(name);
                if let Some(schema) = schema {
                    let fields = pg_fields(&schema, &Format::UnifiedText)?;
                    let described = pgwire::api::results::DescribePortalResponse::new(fields);
                    send_describe_response(client, &described).await?;
                    return Ok(());
                }
            }
        }
        self._on_describe(client, message).await
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Prepared>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: pgwire::api::store::PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let stmt = &portal.statement.statement;
        let mut session = self.session.lock().await;
        let params = if portal.parameter_len() > 0 {
            Some(bind_parameters(
                portal,
                &stmt.params,
                &session.vars.time_zone(),
            ))
        } else {
            None
        };
        // A parameter value that does not decode fails the transaction as the statement would.
        let params = match params.transpose() {
            Ok(p) => p,
            Err(e) => {
                session.statement_failed().await;
                return Err(e);
            }
        };
        session.begin_implicit();
        let interrupt = Arc::clone(&session.interrupt);
        let timeout = session.statement_timeout();
        let result = interruptible(
            &interrupt,
            cancellable(&stmt.sql),
            timeout,
            session.execute_with_params(&stmt.sql, params),
        )
        .await;
        if interrupted(&result) {
            session.after_panic();
        }
        let result = result
            .and_then(|out| same_result_type(stmt.schema.as_deref(), out))
            .and_then(|out| {
                let reservation = ResultReservation::for_output(&out, &session.memory)?;
                Ok((out, reservation))
            });
        send_notices(client, session.take_messages()).await?;
        match result {
            Ok((out, reservation)) => to_response(
                out,
                &portal.result_column_format,
                &session.display_zone,
                reservation,
            ),
            // An error, not an error response: pgwire then discards the messages up to the
            // next Sync, as PostgreSQL does, and the statements run since the last Sync are
            // undone (their implicit transaction fails).
            Err(e) => {
                session.statement_failed().await;
                Err(PgWireError::UserError(Box::new(error_info(&e))))
            }
        }
    }
}

/// `out`, when its columns have the types the prepared statement described (`prepared`):
/// a table dropped and created again with other columns since the Parse would otherwise send
/// rows the client decodes as the old types (asyncpg read a `real` as the `integer` of its
/// bits). A column whose type was unknown (a NULL) matches any.
///
/// # Errors
/// `0A000` `cached plan must not change result type`, as PostgreSQL reports it; the client
/// prepares the statement again.
fn same_result_type(prepared: Option<&arrow::datatypes::Schema>, out: Output) -> Result<Output> {
    let (Some(before), Output::Rows { schema, .. } | Output::Returning { schema, .. }) =
        (prepared, &out)
    else {
        return Ok(out);
    };
    let pg = |t: &DataType| into_pg_type(t).ok().map(|t| t.oid());
    let same = before.fields().len() == schema.fields().len()
        && before
            .fields()
            .iter()
            .zip(schema.fields().iter())
            .all(|(a, b)| {
                matches!(a.data_type(), DataType::Null)
                    || matches!(b.data_type(), DataType::Null)
                    || pg(a.data_type()) == pg(b.data_type())
            });
    if same {
        Ok(out)
    } else {
        Err(Error::not_supported(
            "cached plan must not change result type",
        ))
    }
}

/// The values of a portal's parameters, read by arrow-pg as the client's declared type or
/// else the type the statement implies (`inferred`).
///
/// A NULL whose type neither gives (psycopg sends `None` untyped: `SELECT coalesce($1,
/// 'x')`) arrow-pg leaves out of its list, which left `$1` without a value (`42601` "No value
/// found for placeholder"); it is put back as an untyped NULL, which takes the type its use
/// gives it, as PostgreSQL's `unknown` NULL does.
///
/// Dates, times, timestamps and intervals in text format are read as a cast reads their
/// text ([`datetime_text_parameters`]), in the session's time zone `zone`.
///
/// # Errors
/// arrow-pg's, for a value that does not decode as its type; `22007` for date/time text
/// that is none; `42P18` when some other parameter has no value.
fn bind_parameters(
    portal: &Portal<Prepared>,
    inferred: &[Option<DataType>],
    zone: &crate::sql::functions::datetime_input::TimeZoneSetting,
) -> PgWireResult<datafusion::common::ParamValues> {
    use datafusion::common::{ParamValues, ScalarValue};
    if let Format::Individual(codes) = &portal.parameter_format
        && codes.len() != portal.parameter_len()
    {
        return Err(pg_error(&Error::plan(
            "08P01",
            format!(
                "bind message has {} parameter formats but {} parameters",
                codes.len(),
                portal.parameter_len()
            ),
        )));
    }
    for i in 0..portal.parameter_len() {
        check_parameter(portal, i, inferred.get(i).and_then(Option::as_ref))
            .map_err(|e| pg_error(&e))?;
    }
    let types: Vec<Option<&DataType>> = inferred.iter().map(|t| t.as_ref()).collect();
    let datetimes = datetime_text_parameters(portal, inferred, zone).map_err(|e| pg_error(&e))?;
    let mut values = if datetimes.iter().all(Option::is_none) {
        arrow_pg::datatypes::df::deserialize_parameters(portal, &types)?
    } else {
        // arrow-pg reads the others; the date/time values read here stand in its place as
        // NULLs of their type, then take their slots back.
        let mut others = Portal::<()>::default();
        others.statement = Arc::new(pgwire::api::stmt::StoredStatement::new(
            String::new(),
            (),
            portal.statement.parameter_types.clone(),
        ));
        others.parameter_format = portal.parameter_format.clone();
        others.parameters = portal
            .parameters
            .iter()
            .zip(&datetimes)
            .map(|(bytes, read)| if read.is_some() { None } else { bytes.clone() })
            .collect();
        let mut values = arrow_pg::datatypes::df::deserialize_parameters(&others, &types)?;
        if let ParamValues::List(list) = &mut values
            && list.len() == datetimes.len()
        {
            for (slot, read) in list.iter_mut().zip(datetimes) {
                if let Some(v) = read {
                    *slot = v.into();
                }
            }
        } else {
            values = arrow_pg::datatypes::df::deserialize_parameters(portal, &types)?;
        }
        values
    };
    let n = portal.parameter_len();
    if let ParamValues::List(list) = &mut values
        && list.len() < n
    {
        for i in 0..n {
            let declared = declared_type(portal, i);
            let untyped = declared.is_none() && inferred.get(i).is_none_or(Option::is_none);
            if untyped && portal.parameters.get(i).is_some_and(Option::is_none) {
                list.insert(i.min(list.len()), ScalarValue::Null.into());
            }
        }
        if list.len() != n {
            return Err(pg_error(&Error::plan(
                "42P18",
                format!(
                    "could not determine data type of parameter ${}",
                    list.len() + 1
                ),
            )));
        }
    }
    // `numeric` parameters are read here: arrow-pg reads them through a 96-bit decimal
    // whose rescaling silently drops digits (12345678901234567890 came in as
    // 1234567890123456789), and refuses 37- and 38-digit values. Text arrays are read again
    // ([`text_array_parameter`]).
    if let ParamValues::List(list) = &mut values
        && list.len() == n
    {
        for (i, slot) in list.iter_mut().enumerate() {
            if let Some(value) = text_array_parameter(portal, i, slot.value())? {
                *slot = value.into();
                continue;
            }
            check_text_parameter(portal, i, slot.value()).map_err(|e| pg_error(&e))?;
            let declared = portal.statement.parameter_types.get(i).cloned().flatten();
            let target = inferred.get(i).cloned().flatten();
            let numeric = match &declared {
                Some(t) if *t != Type::UNKNOWN => *t == Type::NUMERIC,
                _ => matches!(target, Some(DataType::Decimal128(..))),
            };
            if !numeric {
                continue;
            }
            let Some(bytes) = portal.parameters.get(i).cloned().flatten() else {
                continue;
            };
            let text = match portal.parameter_format.format_for(i) {
                pgwire::api::results::FieldFormat::Binary => {
                    crate::sql::copy_binary::numeric_binary_text(&bytes)
                }
                pgwire::api::results::FieldFormat::Text => String::from_utf8(bytes.to_vec())
                    .map_err(|_| Error::data("22021", "invalid UTF-8 in a numeric parameter")),
            }
            .map_err(|e| pg_error(&e))?;
            *slot = numeric_parameter(&text, target.as_ref())
                .map_err(|e| pg_error(&e))?
                .into();
        }
    }
    Ok(values)
}

/// The type the Parse message declared for parameter `i` of `portal`; `None` when it declared
/// none or `unknown` (OID 0 or 705).
fn declared_type(portal: &Portal<Prepared>, i: usize) -> Option<Type> {
    portal
        .statement
        .parameter_types
        .get(i)
        .cloned()
        .flatten()
        .filter(|t| *t != Type::UNKNOWN)
}

/// The text-format parameters of `portal` that are dates, times, timestamps or intervals (the
/// client's declared type, or else the one the statement implies, `inferred`), read as a cast
/// of their text reads it ([`read_datetime_text`](crate::sql::functions::datetime_input::
/// read_datetime_text): PostgreSQL's input forms, `'13:00'` for a time, `'2000-01-01 00:00
/// America/Los_Angeles'` and text without an offset in the session's zone `zone` for a
/// `timestamptz`, an interval in PostgreSQL's output form `'-1 days +02:00:00'`); `None` for
/// the other parameters, which arrow-pg reads. arrow-pg's own reading refused those forms
/// (`22P02`), which node-postgres and psycopg2 send as they are, all in text.
///
/// # Errors
/// `22007` `invalid input syntax for type <type>` for text that is none; `22021` for text
/// that is not UTF-8; `22008` for a value out of Weir's range.
fn datetime_text_parameters(
    portal: &Portal<Prepared>,
    inferred: &[Option<DataType>],
    zone: &crate::sql::functions::datetime_input::TimeZoneSetting,
) -> Result<Vec<Option<datafusion::common::ScalarValue>>> {
    use crate::sql::functions::datetime_input::{Target, read_datetime_text};
    use arrow::datatypes::{IntervalUnit, TimeUnit};
    let mut out = Vec::with_capacity(portal.parameter_len());
    for i in 0..portal.parameter_len() {
        let bytes = match portal.parameters.get(i) {
            Some(Some(b))
                if portal.parameter_format.format_for(i)
                    == pgwire::api::results::FieldFormat::Text =>
            {
                b
            }
            _ => {
                out.push(None);
                continue;
            }
        };
        let declared = declared_type(portal, i);
        let inferred = inferred.get(i).cloned().flatten();
        let kind = match declared {
            Some(t) => t,
            None => match inferred.as_ref().map(into_pg_type) {
                Some(Ok(t)) => t,
                _ => {
                    out.push(None);
                    continue;
                }
            },
        };
        // The Arrow type to read into: the statement's when it is of the declared kind.
        let (target, type_name, to) = match (&kind, inferred) {
            (&Type::DATE, Some(DataType::Date32) | None) => {
                (Target::Date, "date", DataType::Date32)
            }
            (&Type::TIME, Some(t @ (DataType::Time64(_) | DataType::Time32(_)))) => {
                (Target::Time, "time without time zone", t)
            }
            (&Type::TIME, None) => (
                Target::Time,
                "time without time zone",
                DataType::Time64(TimeUnit::Microsecond),
            ),
            (&Type::TIMESTAMP, Some(t @ DataType::Timestamp(_, None))) => {
                (Target::Timestamp, "timestamp", t)
            }
            (&Type::TIMESTAMP, None) => (
                Target::Timestamp,
                "timestamp",
                DataType::Timestamp(TimeUnit::Microsecond, None),
            ),
            (&Type::TIMESTAMPTZ, Some(t @ DataType::Timestamp(_, Some(_)))) => {
                (Target::Timestamp, "timestamp with time zone", t)
            }
            (&Type::TIMESTAMPTZ, None) => (
                Target::Timestamp,
                "timestamp with time zone",
                DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
            ),
            (&Type::INTERVAL, Some(t @ DataType::Interval(_))) => (Target::Interval, "interval", t),
            (&Type::INTERVAL, None) => (
                Target::Interval,
                "interval",
                DataType::Interval(IntervalUnit::MonthDayNano),
            ),
            _ => {
                out.push(None);
                continue;
            }
        };
        let text = std::str::from_utf8(bytes)
            .map_err(|_| Error::data("22021", format!("invalid UTF-8 in parameter ${}", i + 1)))?;
        let invalid = || {
            Error::data(
                "22007",
                format!("invalid input syntax for type {type_name}: \"{text}\""),
            )
        };
        let offsetless_in = (type_name == "timestamp with time zone").then_some(&zone.zone);
        let session_zone = (zone.setting != "UTC").then_some(zone.arrow.as_str());
        let read = read_datetime_text(target, type_name, text, offsetless_in, session_zone)
            .map_err(|_| invalid())?;
        let strings = arrow::array::StringArray::from(vec![read]);
        let options = arrow::compute::CastOptions {
            safe: false,
            ..Default::default()
        };
        // Text that reads as a date or time but does not fit Weir's range (timestamps run
        // from 1677-09-21 to 2262-04-11).
        let typed = arrow::compute::cast_with_options(&strings, &to, &options).map_err(|_| {
            Error::data(
                "22008",
                format!("date/time field value out of range: \"{text}\""),
            )
        })?;
        let value = datafusion::common::ScalarValue::try_from_array(&typed, 0)?;
        out.push(Some(value));
    }
    Ok(out)
}

/// Checks text parameter `i` as arrow-pg read it (`value`) against what PostgreSQL's input
/// functions accept: a value that arrow-pg turned into NULL (a timestamp past Weir's range,
/// 1677-09-21 to 2262-04-11, as node-postgres sends any `Date`) and a float text out of the
/// type's range (`1e400`, which Rust reads as infinity; PostgreSQL's `float8in` refuses it)
/// were stored silently.
///
/// # Errors
/// `22008` for a date or time arrow-pg could not hold; `22P02` for another value it could
/// not hold; `22003` for float text out of range.
fn check_text_parameter(
    portal: &Portal<Prepared>,
    i: usize,
    value: &datafusion::common::ScalarValue,
) -> Result<()> {
    use datafusion::common::ScalarValue;
    if portal.parameter_format.format_for(i) != pgwire::api::results::FieldFormat::Text {
        return Ok(());
    }
    let Some(Some(bytes)) = portal.parameters.get(i) else {
        return Ok(());
    };
    let text = String::from_utf8_lossy(bytes);
    if value.is_null() {
        let dt = value.data_type();
        return Err(if dt.is_temporal() {
            Error::data(
                "22008",
                format!("date/time field value out of range: \"{text}\""),
            )
        } else {
            Error::data(
                "22P02",
                format!("invalid input syntax for parameter ${}: \"{text}\"", i + 1),
            )
        });
    }
    let (infinite, type_name) = match value {
        ScalarValue::Float64(Some(f)) => (f.is_infinite(), "double precision"),
        ScalarValue::Float32(Some(f)) => (f.is_infinite(), "real"),
        _ => (false, ""),
    };
    let spelled = text
        .trim()
        .trim_start_matches(['+', '-'])
        .to_ascii_lowercase();
    if infinite && spelled != "infinity" && spelled != "inf" {
        return Err(Error::data(
            "22003",
            format!("\"{}\" is out of range for type {type_name}", text.trim()),
        ));
    }
    Ok(())
}

/// Checks parameter `i` before arrow-pg reads it: a binary one of a fixed-size type for its
/// length (a short interval made pgwire panic and drop the connection), and the range of
/// timestamps, times and intervals, which arrow-pg turned into NULLs (a timestamp past
/// 2262, Weir's nanosecond range) or wrapped (an interval of 2^63 - 1 µs) silently.
/// Binary forms are PostgreSQL's `*_send` (µs since 2000-01-01 for timestamps; µs, days,
/// months for an interval).
///
/// # Errors
/// `08P01` `insufficient data left in message` for a short value; `22P03` for a long one;
/// `22008` for a value out of Weir's range; `22021` for a zero byte in a value given as text
/// (text format, or a binary `text`, `varchar`, `bpchar` or `name`, declared so or, not
/// declared, of the text type the statement implies, `inferred`, or of none), which
/// PostgreSQL's encoding check refuses (a text value cannot hold one), and for such a value
/// that is not UTF-8.
fn check_parameter(portal: &Portal<Prepared>, i: usize, inferred: Option<&DataType>) -> Result<()> {
    let Some(Some(bytes)) = portal.parameters.get(i) else {
        return Ok(());
    };
    let declared = portal.statement.parameter_types.get(i).cloned().flatten();
    let binary = portal.parameter_format.format_for(i) == pgwire::api::results::FieldFormat::Binary;
    let textual = !binary
        || match &declared {
            Some(t) => matches!(*t, Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME),
            // Described to the client as `text` when the statement implies no type.
            None => matches!(
                inferred,
                None | Some(DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
            ),
        };
    if textual && bytes.contains(&0) {
        return Err(Error::data(
            "22021",
            "invalid byte sequence for encoding \"UTF8\": 0x00",
        ));
    }
    if textual && let Err(e) = std::str::from_utf8(bytes) {
        let bad = bytes.get(e.valid_up_to()).copied().unwrap_or_default();
        return Err(Error::data(
            "22021",
            format!("invalid byte sequence for encoding \"UTF8\": 0x{bad:02x}"),
        ));
    }
    if !binary {
        return Ok(());
    }
    let Some(declared) = declared else {
        return Ok(());
    };
    let size = match declared {
        Type::BOOL => 1,
        Type::INT2 => 2,
        Type::INT4 | Type::FLOAT4 | Type::DATE | Type::OID => 4,
        Type::INT8 | Type::FLOAT8 | Type::TIME | Type::TIMESTAMP | Type::TIMESTAMPTZ => 8,
        Type::INTERVAL => 16,
        _ => return Ok(()),
    };
    if bytes.len() < size {
        return Err(Error::plan("08P01", "insufficient data left in message"));
    }
    if bytes.len() > size {
        return Err(Error::data(
            "22P03",
            format!("incorrect binary data format in bind parameter {}", i + 1),
        ));
    }
    let int64 = |b: &[u8]| i64::from_be_bytes(b.try_into().unwrap_or([0; 8]));
    // µs from 1970-01-01 to 2000-01-01, PostgreSQL's epoch.
    const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
    match declared {
        Type::TIMESTAMP | Type::TIMESTAMPTZ => {
            let micros = int64(bytes);
            let nanos = micros
                .checked_add(PG_EPOCH_MICROS)
                .and_then(|m| m.checked_mul(1000));
            if nanos.is_none() {
                return Err(Error::data(
                    "22008",
                    "timestamp out of range (timestamps run from 1677-09-21 to 2262-04-11)",
                ));
            }
        }
        Type::TIME => {
            let micros = int64(bytes);
            if !(0..=86_400_000_000).contains(&micros) {
                return Err(Error::data("22008", "time out of range"));
            }
        }
        Type::INTERVAL if int64(&bytes[..8]).checked_mul(1000).is_none() => {
            return Err(Error::data("22008", "interval out of range"));
        }
        _ => {}
    }
    Ok(())
}

/// Parameter `i` of `portal` read again when it is a one-dimensional array in text format
/// (`{a,"NULL",""}`), as PostgreSQL reads array text ([`crate::sql::parse::
/// array_text_elements`]: a quoted `"NULL"` is the text NULL, `""` the empty string, white
/// space around a bare element dropped), each element then cast to the element type of
/// arrow-pg's value (`read`); arrow-pg read `"NULL"` and `""` as NULLs and kept the spaces.
/// `None` when the parameter is not such an array.
///
/// # Errors
/// `22021` for text that is not UTF-8; `22P02` for a malformed array or an element that is
/// not of the element type.
fn text_array_parameter(
    portal: &Portal<Prepared>,
    i: usize,
    read: &datafusion::common::ScalarValue,
) -> PgWireResult<Option<datafusion::common::ScalarValue>> {
    use datafusion::common::ScalarValue;
    let ScalarValue::List(list) = read else {
        return Ok(None);
    };
    let element_type = list.value_type();
    if matches!(element_type, DataType::List(_)) {
        return Ok(None);
    }
    if portal.parameter_format.format_for(i) != pgwire::api::results::FieldFormat::Text {
        return Ok(None);
    }
    let Some(bytes) = portal.parameters.get(i).cloned().flatten() else {
        return Ok(None);
    };
    let text = String::from_utf8(bytes.to_vec())
        .map_err(|_| pg_error(&Error::data("22021", "invalid UTF-8 in an array parameter")))?;
    let malformed = || {
        pg_error(&Error::data(
            "22P02",
            format!("malformed array literal: \"{text}\""),
        ))
    };
    let elements = crate::sql::parse::array_text_elements(&text).ok_or_else(malformed)?;
    let strings: arrow::array::ArrayRef = Arc::new(arrow::array::StringArray::from(elements));
    let options = arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    let typed = arrow::compute::cast_with_options(&strings, &element_type, &options)
        .map_err(|e| pg_error(&Error::from(e)))?;
    let scalars = (0..typed.len())
        .map(|j| ScalarValue::try_from_array(&typed, j))
        .collect::<datafusion::common::Result<Vec<_>>>()
        .map_err(|e| pg_error(&Error::from(e)))?;
    Ok(Some(ScalarValue::List(ScalarValue::new_list_nullable(
        &scalars,
        &element_type,
    ))))
}

/// A `numeric` parameter's text as the value the statement expects: its inferred `numeric`
/// type when it has one (rounded to its scale), else a decimal of the text's own scale.
///
/// # Errors
/// `22P02` for text that is not a number; `22003` for one out of range.
fn numeric_parameter(
    text: &str,
    target: Option<&DataType>,
) -> Result<datafusion::common::ScalarValue> {
    use crate::sql::functions::number_input::{NumberTarget, NumberText};
    use datafusion::common::ScalarValue;
    let positional = NumberText::new(NumberTarget::Numeric)
        .convert(text)
        .map_err(|e| Error::data("22003", e.to_string()))?;
    let t = positional.trim();
    let scale = t
        .split_once('.')
        .map_or(0, |(_, f)| f.bytes().take_while(u8::is_ascii_digit).count());
    let integer = t
        .split('.')
        .next()
        .unwrap_or("")
        .trim_start_matches(['-', '+', '0'])
        .len();
    let p = crate::sql::semantics::NUMERIC_MAX_PRECISION;
    let own = DataType::Decimal128(p, scale.min(usize::from(p).saturating_sub(integer)) as i8);
    let to = match target {
        Some(t @ DataType::Decimal128(..)) => t.clone(),
        _ => own,
    };
    ScalarValue::Utf8(Some(t.to_string()))
        .cast_to(&to)
        .map_err(|_| {
            Error::data(
                "22P02",
                format!("invalid input syntax for type numeric: \"{text}\""),
            )
        })
}

#[async_trait]
impl CopyHandler for Conn {
    async fn on_copy_data<C>(&self, _client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.session.lock().await.copy_data(&copy_data.data);
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let result = self.session.lock().await.copy_done().await;
        match result {
            Ok(n) => {
                let tag = Tag::new("COPY").with_rows(n);
                client
                    .send(PgWireBackendMessage::CommandComplete(tag.into()))
                    .await?;
                Ok(())
            }
            Err(e) => Err(pg_error(&e)),
        }
    }

    async fn on_copy_fail<C>(&self, _client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.session.lock().await.copy_fail();
        PgWireError::UserError(Box::new(ErrorInfo::new(
            "ERROR".to_owned(),
            "57014".to_owned(),
            format!("COPY from stdin failed: {}", fail.message),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::{PgText, pg_float, pg_float32, pg_numeric};

    /// Expected texts are PostgreSQL 15's (`SELECT 1e15::float8, ...` with psql).
    #[test]
    fn float_text() {
        let doubles = [
            (1e15, "1e+15"),
            (1e16, "1e+16"),
            (123456789012345.0, "123456789012345"),
            (1234567890123456.0, "1.234567890123456e+15"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (0.00012345, "0.00012345"),
            (1.5e300, "1.5e+300"),
            (-2.5e-300, "-2.5e-300"),
            (-0.0, "-0"),
            (1e100, "1e+100"),
            (0.1 + 0.2, "0.30000000000000004"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (f, want) in doubles {
            assert_eq!(pg_float(f), want, "{f}");
        }
        let reals = [
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (3e38, "3e+38"),
            (1e-4, "0.0001"),
            (1.5e-5, "1.5e-05"),
            (100000.0, "100000"),
            (1000000.0, "1e+06"),
        ];
        for (f, want) in reals {
            assert_eq!(pg_float32(f), want, "{f}");
        }
    }

    #[test]
    fn numeric_text() {
        assert_eq!(pg_numeric(13_125, 3, false), "13.125");
        assert_eq!(pg_numeric(131_250_000, 7, true), "13.125");
        assert_eq!(pg_numeric(150, 2, false), "1.50");
        assert_eq!(pg_numeric(-5, 2, false), "-0.05");
        assert_eq!(pg_numeric(100_000, 5, true), "1");
        assert_eq!(pg_numeric(0, 10, true), "0");
        assert_eq!(pg_numeric(0, 2, false), "0.00");
        assert_eq!(pg_numeric(-12, 0, false), "-12");
    }

    /// The binary form as PostgreSQL's `numeric_send` writes it (header: ndigits, weight,
    /// sign, dscale; then base-10,000 digits), worked out by hand.
    #[test]
    fn numeric_binary() {
        let words = |s: &str| -> Vec<i16> {
            PgText(s.into())
                .numeric_binary()
                .chunks(2)
                .map(|c| i16::from_be_bytes([c[0], c[1]]))
                .collect()
        };
        // 12345.678 = 1·10000 + 2345 + 6780/10000
        assert_eq!(words("12345.678"), [3, 1, 0, 3, 1, 2345, 6780]);
        // -0.00012 = -(1/10000 + 2000/10000²), dscale 5
        assert_eq!(words("-0.00012"), [2, -1, 0x4000, 5, 1, 2000]);
        // 0.00000012 = 12/10000², the leading zero group dropped
        assert_eq!(words("0.00000012"), [1, -2, 0, 8, 12]);
        assert_eq!(words("0"), [0, 0, 0, 0]);
        assert_eq!(words("100000000"), [1, 2, 0, 0, 1]);
        // 38 digits: 9223372036854775807.3333333333333333333
        assert_eq!(
            words("9223372036854775807.3333333333333333333"),
            [
                10, 4, 0, 19, 922, 3372, 368, 5477, 5807, 3333, 3333, 3333, 3333, 3330
            ]
        );
    }
}

//! Arrow Flight SQL in front of a [`QueryService`]: statements (direct and prepared, with bound
//! parameters), updates, bulk ingest, cancellation, sessions, and the metadata calls ADBC and JDBC
//! make on connect (SQL info, catalogs, schemas, tables, table types, primary keys). Results stream
//! from the engine's batches; nothing is buffered whole.
//!
//! A session (current catalog and schema) lives across calls when the client keeps the
//! `arrow_flight_session_id` cookie SQE hands out on `SetSessionOptions` or on a `USE`; without it
//! every call starts from the configured defaults.
//!
//! It never checks a credential: the gateway's authentication layer puts the caller's
//! [`Principal`] and [`Credential`] into the request extensions before a call reaches this service.
//!
//! Every handle it hands out (tickets, prepared statements, sessions) is random and belongs to the
//! principal that made it: anyone else presenting it gets the answer of a handle that does not
//! exist, save that an admin (as the [`QueryService`] judges it: `is_admin`, the one rule) may
//! cancel anyone's result. Each kind is a [`HandleMap`]: results nobody fetches and prepared statements nobody uses
//! expire (a result when it has waited the result timeout, a prepared statement when it has not
//! been used for the idle time), which frees their query slots; the gateway's reaper expires them
//! through [`ProtocolHandles`].
//!
//! What a client can make the server keep between calls is capped per principal, so that one user
//! cannot take the memory or the room everyone else needs: prepared statements (a count, and the
//! bytes of their text and bound parameters), results not yet fetched, and sessions. A statement
//! longer than the engine runs is refused when it is prepared, not kept until it is executed: 80
//! prepared statements of 15 MB each took a server from 150 MB to 1.44 GB before.

mod session_options;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::{DataType, Schema};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightServiceServer;
use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionCancelQueryRequest, ActionCancelQueryResult, ActionClosePreparedStatementRequest,
    ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult, Any,
    CommandGetCatalogs, CommandGetDbSchemas, CommandGetPrimaryKeys, CommandGetSqlInfo,
    CommandGetTableTypes, CommandGetTables, CommandPreparedStatementQuery,
    CommandPreparedStatementUpdate, CommandStatementIngest, CommandStatementQuery,
    CommandStatementUpdate, DoPutPreparedStatementResult, ProstMessageExt, SqlInfo,
    TableExistsOption, TableNotExistOption, TicketStatementQuery,
};
use arrow_flight::{
    Action, CancelFlightInfoRequest, CancelFlightInfoResult, CancelStatus, FlightDescriptor,
    FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse, Ticket,
};
use futures::future::{AbortHandle, Abortable};
use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message;
use session_options::{
    CANCEL_FLIGHT_INFO, CLOSE_SESSION, CLOSED, CloseSessionResult, GET_SESSION_OPTIONS,
    GetSessionOptionsResult, INVALID_NAME, INVALID_VALUE, OptionValue, SESSION_COOKIE,
    SET_SESSION_OPTIONS, SessionOptionValue, SetSessionOptionsError, SetSessionOptionsRequest,
    SetSessionOptionsResult, session_id_from_cookies,
};
use sqe_sessions::{
    Caps, Credential, ErrorCode, HandleMap, IfExists, IfMissing, IngestTarget, MAX_PARAMETERS,
    Principal, ProtocolHandles, QueryResult, QueryService, Refused, Session, SessionStore,
    SqeError, bind_parameters, check_statement_length, quote_identifier, random_handle,
    too_many_parameters,
};
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status, Streaming};

/// How long a session may sit unused before it is forgotten.
const SESSION_IDLE: Duration = Duration::from_secs(3600);

/// The call header naming the client's statements (Trino's `X-Trino-Source`), and the most of it
/// kept.
pub const SOURCE_HEADER: &str = "x-sqe-source";
const SOURCE_LIMIT: usize = 256;

/// The answer for a ticket that does not exist, or is not the caller's.
const NO_RESULT: &str = "result not found (already fetched, or expired)";
/// The answer for a prepared statement that does not exist, or is not the caller's.
const NO_PREPARED: &str = "prepared statement not found (closed?)";

/// How refusals name the prepared statements' caps.
const PREPARED_CAPS: Caps = Caps {
    entries: "Flight SQL prepared statements",
    count_setting: "[server] max_prepared_statements_per_user",
    bytes_setting: Some("[server] max_prepared_statement_bytes_per_user"),
    release: "close one (ClosePreparedStatement), or wait until one has been unused for [server] prepared_statement_idle_secs",
};
/// How refusals name the cap on results waiting for their DoGet.
const RESULT_CAPS: Caps = Caps {
    entries: "Flight SQL results not yet fetched",
    count_setting: "[server] max_flight_results_per_user",
    bytes_setting: None,
    release: "fetch (DoGet) or cancel one first",
};
/// How refusals name the cap on sessions.
const SESSION_CAPS: Caps = Caps {
    entries: "Flight SQL sessions",
    count_setting: "[server] max_flight_sessions_per_user",
    bytes_setting: None,
    release: "close one (CloseSession), or wait until one has been unused for an hour",
};

type Stream_<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The result with strings and binaries in Arrow's classic types, as they go on the wire. The
/// engine scans them as views (`Utf8View`, `BinaryView`), which came to Arrow's format in 1.4
/// (2024): clients built on older Arrow libraries cannot read them.
fn without_views(mut result: QueryResult) -> QueryResult {
    let classic = |t: &DataType| match t {
        DataType::Utf8View => Some(DataType::Utf8),
        DataType::BinaryView => Some(DataType::Binary),
        _ => None,
    };
    if !result
        .schema
        .fields()
        .iter()
        .any(|f| classic(f.data_type()).is_some())
    {
        return result;
    }
    let fields: Vec<_> = result
        .schema
        .fields()
        .iter()
        .map(|f| match classic(f.data_type()) {
            Some(t) => Arc::new(f.as_ref().clone().with_data_type(t)),
            None => f.clone(),
        })
        .collect();
    let schema = Arc::new(Schema::new_with_metadata(
        fields,
        result.schema.metadata().clone(),
    ));
    let to = schema.clone();
    result.batches = Box::pin(result.batches.map(move |batch| {
        let batch = batch?;
        let columns = batch
            .columns()
            .iter()
            .zip(to.fields())
            .map(|(c, f)| arrow::compute::cast(c, f.data_type()))
            .collect::<Result<Vec<_>, _>>()
            .and_then(|c| RecordBatch::try_new(to.clone(), c))
            .map_err(|e| SqeError::internal(format!("result columns: {e}")))?;
        Ok(columns)
    }));
    result.schema = schema;
    result
}

/// Maps each error code to a gRPC status. Exhaustive: a new code must be placed here.
pub fn status(e: &SqeError) -> Status {
    let m = e.message().to_string();
    match e.code() {
        ErrorCode::InvalidInput => Status::invalid_argument(m),
        ErrorCode::NotFound => Status::not_found(m),
        ErrorCode::AlreadyExists => Status::already_exists(m),
        ErrorCode::Unsupported => Status::unimplemented(m),
        ErrorCode::Conflict => Status::aborted(m),
        ErrorCode::PermissionDenied => Status::permission_denied(m),
        ErrorCode::Unauthenticated => Status::unauthenticated(m),
        ErrorCode::ResourceExhausted => Status::resource_exhausted(m),
        ErrorCode::Cancelled => Status::cancelled(m),
        ErrorCode::External => Status::unavailable(m),
        ErrorCode::Internal => Status::internal(m),
    }
}

/// A fault of the server while answering: logged under an id, which is all the client sees.
fn internal(e: impl std::fmt::Display) -> Status {
    status(&SqeError::internal(e.to_string()))
}

/// Bound parameter rows, each a list of SQL literals.
type Rows = Arc<Vec<Vec<String>>>;

struct Prepared {
    /// The client's text as it arrived (an `Arc<str>` would copy it once more).
    sql: Arc<String>,
    /// Bound parameter rows. An update runs once per row. Shared, so that a call binds them
    /// without holding the map.
    rows: Rows,
}

impl Prepared {
    /// The bytes it holds, as the per-principal cap counts them: its text, and each bound row and
    /// value with what the server keeps for it besides its text.
    fn bytes(&self) -> usize {
        self.sql.len() + self.rows.iter().map(|row| row_bytes(row)).sum::<usize>()
    }
}

fn row_bytes(row: &[String]) -> usize {
    std::mem::size_of::<Vec<String>>()
        + row
            .iter()
            .map(|value| std::mem::size_of::<String>() + value.len())
            .sum::<usize>()
}

pub struct FlightSqlConfig {
    pub default_catalog: String,
    pub default_schema: String,
    /// A result not fetched within this time is dropped, which cancels its query.
    pub result_timeout: Duration,
    /// A prepared statement not used for this long is closed.
    pub prepared_idle: Duration,
    /// Prepared statements one principal holds at most (`[server]
    /// max_prepared_statements_per_user`).
    pub max_prepared_per_user: usize,
    /// The most bytes one principal's prepared statements hold, their text and bound parameters
    /// (`[server] max_prepared_statement_bytes_per_user`).
    pub max_prepared_bytes_per_user: usize,
    /// Results waiting for their DoGet one principal holds at most (`[server]
    /// max_flight_results_per_user`).
    pub max_results_per_user: usize,
    /// Sessions one principal holds at most (`[server] max_flight_sessions_per_user`).
    pub max_sessions_per_user: usize,
}

impl FlightSqlConfig {
    /// Calls without a session land in `catalog`.`default`.
    pub fn new(catalog: &str) -> Self {
        Self {
            default_catalog: catalog.to_string(),
            default_schema: "default".into(),
            result_timeout: Duration::from_secs(300),
            prepared_idle: Duration::from_secs(3600),
            max_prepared_per_user: 256,
            max_prepared_bytes_per_user: 64 << 20,
            max_results_per_user: 64,
            max_sessions_per_user: 64,
        }
    }
}

pub struct SqeFlightSql {
    service: Arc<dyn QueryService>,
    config: FlightSqlConfig,
    sessions: SessionStore,
    sql_info: SqlInfoData,
    /// Prepared statements by handle, expiring when unused for the idle time.
    prepared: HandleMap<Vec<u8>, Prepared>,
    /// Results waiting for their DoGet, by ticket. Each holds a query slot, so a result nobody
    /// fetches expires (is dropped, which cancels it) once it has waited the result timeout.
    results: HandleMap<Vec<u8>, QueryResult>,
    /// Results being streamed by a DoGet, by ticket, so CancelFlightInfo can stop them; each
    /// leaves the map when its stream ends.
    streaming: Arc<HandleMap<Vec<u8>, AbortHandle>>,
}

impl SqeFlightSql {
    pub fn new(service: Arc<dyn QueryService>, config: FlightSqlConfig) -> Arc<Self> {
        let prepared = HandleMap::new()
            .idle_after(config.prepared_idle)
            .at_most_per_owner(config.max_prepared_per_user)
            .at_most_bytes_per_owner(Prepared::bytes, config.max_prepared_bytes_per_user);
        let results = HandleMap::new()
            .idle_after(config.result_timeout)
            .at_most_per_owner(config.max_results_per_user);
        Arc::new(SqeFlightSql {
            service,
            sessions: SessionStore::new(SESSION_IDLE, config.max_sessions_per_user),
            config,
            sql_info: sql_info(),
            prepared,
            results,
            streaming: Arc::new(HandleMap::new()),
        })
    }
}

impl ProtocolHandles for SqeFlightSql {
    fn protocol(&self) -> &'static str {
        "flight_sql"
    }

    /// Drops results nobody fetched within the result timeout (cancelling their queries and
    /// freeing their slots), and closes prepared statements and sessions idle for longer than
    /// allowed.
    fn expire_idle(&self) -> usize {
        self.results.expire_idle() + self.prepared.expire_idle() + self.sessions.expire_idle()
    }

    fn open_work_name(&self) -> &'static str {
        "flight_results"
    }

    /// Results planned and not yet fetched (one being fetched is a request still open).
    fn open_work(&self) -> usize {
        self.results.len()
    }
}

/// The largest message a client may send (a command, or one batch of a bulk ingest); a larger
/// one gets OUT_OF_RANGE (tonic refuses it while decoding).
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// The Flight service to mount in the gateway.
pub fn server(flight: Arc<SqeFlightSql>) -> FlightServiceServer<SqeFlightSql> {
    FlightServiceServer::from_arc(flight).max_decoding_message_size(MAX_MESSAGE_BYTES)
}

/// What GetSqlInfo reports.
fn sql_info() -> SqlInfoData {
    let mut b = SqlInfoDataBuilder::new();
    b.append(SqlInfo::FlightSqlServerName, "SQE");
    b.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
    b.append(SqlInfo::FlightSqlServerArrowVersion, "58");
    b.append(SqlInfo::FlightSqlServerReadOnly, false);
    b.append(SqlInfo::FlightSqlServerSql, true);
    b.append(SqlInfo::FlightSqlServerSubstrait, false);
    // SQL_SUPPORTED_TRANSACTION_NONE: every statement commits on its own.
    b.append(SqlInfo::FlightSqlServerTransaction, 0i32);
    b.append(SqlInfo::FlightSqlServerCancel, true);
    b.append(SqlInfo::FlightSqlServerBulkIngestion, true);
    b.append(SqlInfo::FlightSqlServerIngestTransactionsSupported, false);
    b.append(SqlInfo::SqlDdlCatalog, false);
    b.append(SqlInfo::SqlDdlSchema, true);
    b.append(SqlInfo::SqlDdlTable, true);
    b.append(SqlInfo::SqlIdentifierQuoteChar, "\"");
    b.build().expect("static SQL info is well-formed")
}

/// A `set-cookie` header handing the client its session id.
fn set_session_cookie(metadata: &mut MetadataMap, session: &Session) {
    if let Ok(v) = format!("{SESSION_COOKIE}={}", session.id).parse() {
        metadata.insert("set-cookie", v);
    }
}

/// The statement handle inside a ticket SQE issued, if it is one.
fn statement_handle(ticket: &[u8]) -> Option<Vec<u8>> {
    let any = Any::decode(ticket).ok()?;
    let t: TicketStatementQuery = any.unpack().ok()??;
    Some(t.statement_handle.to_vec())
}

/// A value as a SQL literal, for binding a parameter.
fn literal(array: &dyn Array, row: usize) -> Result<String, Status> {
    if array.is_null(row) {
        return Ok("NULL".into());
    }
    let text = ArrayFormatter::try_new(array, &FormatOptions::default())
        .map(|f| f.value(row).to_string())
        .map_err(|e| Status::invalid_argument(format!("parameter: {e}")))?;
    let quoted = |prefix: &str| format!("{prefix}'{}'", text.replace('\'', "''"));
    Ok(match array.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => quoted(""),
        DataType::Date32 | DataType::Date64 => quoted("DATE "),
        DataType::Timestamp(_, _) => format!("TIMESTAMP '{}'", text.replace('T', " ")),
        DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Float32
        | DataType::Float64
        | DataType::Decimal128(_, _) => text,
        other => {
            return Err(Status::unimplemented(format!(
                "parameters of type {other} are not supported"
            )));
        }
    })
}

/// Who is calling (`anonymous` on a server that lets loopback callers in without credentials).
fn caller<T>(request: &Request<T>) -> Principal {
    request
        .extensions()
        .get::<Principal>()
        .cloned()
        .unwrap_or_else(|| Principal::new("anonymous"))
}

/// A new handle for a ticket or a prepared statement.
fn new_handle() -> Vec<u8> {
    random_handle().into_bytes()
}

impl SqeFlightSql {
    /// The caller's session: the stored one its cookie names (if it is theirs), else a fresh one
    /// with the configured defaults. The second value says whether it was stored.
    fn session_of<T>(&self, request: &Request<T>) -> (Session, bool) {
        let principal = caller(request);
        let stored = request
            .metadata()
            .get_all("cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(session_id_from_cookies)
            .and_then(|id| self.sessions.get(id, &principal));
        let found = stored.is_some();
        let mut session = stored.unwrap_or_else(|| {
            Session::new(
                principal,
                &self.config.default_catalog,
                &self.config.default_schema,
            )
        });
        session.credential = request.extensions().get::<Credential>().cloned();
        session.protocol = "flight-sql";
        // The client's name for its statements (dbt-sqe sends a model's query tag), shown as the
        // `source` of each in system.runtime.queries.
        if let Some(source) = request
            .metadata()
            .get(SOURCE_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|s| !s.is_empty())
        {
            session.source = Some(source.chars().take(SOURCE_LIMIT).collect());
        }
        (session, found)
    }

    fn session<T>(&self, request: &Request<T>) -> Session {
        self.session_of(request).0
    }

    /// Applies what a statement changed (`USE`) to the caller's session and keeps it. True if the
    /// session is new, so the client needs its cookie.
    fn keep_changes(
        &self,
        session: &mut Session,
        stored: bool,
        result: &QueryResult,
    ) -> Result<bool, Status> {
        let Some(update) = &result.session_update else {
            return Ok(false);
        };
        session.apply(update);
        self.keep_session(session)?;
        Ok(!stored)
    }

    /// Keeps the caller's session, unless they hold as many as they may.
    fn keep_session(&self, session: &Session) -> Result<(), Status> {
        self.sessions
            .put(session)
            .map_err(|refused| refusal(refused, &session.principal, &SESSION_CAPS))
    }

    /// Keeps `owner`'s prepared statement under `handle` (replacing theirs there), unless their
    /// prepared statements would be more, or hold more bytes, than they may.
    fn keep_prepared(
        &self,
        handle: Vec<u8>,
        owner: &Principal,
        prepared: Prepared,
    ) -> Result<(), Status> {
        self.prepared
            .insert(handle, &owner.name, prepared)
            .map_err(|refused| refusal(refused, owner, &PREPARED_CAPS))
    }

    async fn run(&self, session: &Session, sql: &str) -> Result<QueryResult, Status> {
        self.service
            .execute(session, sql)
            .await
            .map_err(|e| status(&e))
    }

    /// Runs `sql` and parks its result under a new ticket; the FlightInfo points the client there.
    async fn start<T>(
        &self,
        request: &Request<T>,
        sql: &str,
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        let (mut session, stored) = self.session_of(request);
        // Refused before the statement runs, so that a refusal never follows work done. (Two
        // calls of one principal at the cap may both get here; the later insert then refuses.)
        self.results
            .admits(&session.principal.name)
            .map_err(|refused| refusal(refused, &session.principal, &RESULT_CAPS))?;
        let result = self.run(&session, sql).await?;
        let new_session = self.keep_changes(&mut session, stored, &result)?;
        let result = without_views(result);
        let schema = result.schema.clone();
        let handle = new_handle();
        self.results
            .insert(handle.clone(), &session.principal.name, result)
            .map_err(|refused| refusal(refused, &session.principal, &RESULT_CAPS))?;
        let ticket = TicketStatementQuery {
            statement_handle: handle.into(),
        };
        let info = FlightInfo::new()
            .try_with_schema(&schema)
            .map_err(internal)?
            .with_endpoint(
                FlightEndpoint::new().with_ticket(Ticket::new(ticket.as_any().encode_to_vec())),
            )
            .with_descriptor(descriptor);
        let mut response = Response::new(info);
        if new_session {
            set_session_cookie(response.metadata_mut(), &session);
        }
        Ok(response)
    }

    /// Runs each statement to the end and returns the rows they wrote (0 for DDL). Each is made
    /// only when its turn comes, so that many rows of parameters never hold all their statements
    /// at once.
    async fn update<T>(
        &self,
        request: &Request<T>,
        statements: impl IntoIterator<Item = Result<String, Status>> + Send,
    ) -> Result<i64, Status> {
        let (mut session, stored) = self.session_of(request);
        let mut total = 0;
        for sql in statements {
            let mut result = self.run(&session, &sql?).await?;
            while let Some(batch) = result.batches.next().await {
                batch.map_err(|e| status(&e))?;
            }
            // Kept only for a session the client can name again (it has the cookie).
            if stored && let Some(update) = &result.session_update {
                session.apply(update);
                self.keep_session(&session)?;
            }
            total += result.update_count.unwrap_or(0) as i64;
        }
        Ok(total)
    }

    /// Runs `f` on the caller's prepared statement `handle`, marking it used; another
    /// principal's is as missing as a closed one.
    fn with_prepared<R>(
        &self,
        handle: &[u8],
        caller: &Principal,
        f: impl FnOnce(&mut Prepared) -> Result<R, Status>,
    ) -> Result<R, Status> {
        self.prepared
            .get(handle, &caller.name, |p| Some(f(p)))
            .unwrap_or_else(|| Err(Status::not_found(NO_PREPARED)))
    }

    /// The caller's prepared statement `handle`: its text and bound rows.
    fn prepared_of(
        &self,
        handle: &[u8],
        caller: &Principal,
    ) -> Result<(Arc<String>, Rows), Status> {
        self.with_prepared(handle, caller, |p| Ok((p.sql.clone(), p.rows.clone())))
    }

    /// `sql` with each row of parameters bound (once without any if there are no rows), each
    /// statement made when it is asked for.
    fn bind<'a>(
        sql: &'a str,
        rows: &'a [Vec<String>],
    ) -> impl Iterator<Item = Result<String, Status>> + Send + 'a {
        const NO_PARAMETERS: &[Vec<String>] = &[Vec::new()];
        let rows = if rows.is_empty() { NO_PARAMETERS } else { rows };
        rows.iter()
            .map(move |row| bind_parameters(sql, row).map_err(Status::invalid_argument))
    }

    /// A query's SQL: at most one parameter row.
    fn bound_query(&self, handle: &[u8], caller: &Principal) -> Result<String, Status> {
        let (sql, rows) = self.prepared_of(handle, caller)?;
        if rows.len() > 1 {
            return Err(Status::invalid_argument(
                "a query takes one row of parameters; several rows are for updates",
            ));
        }
        let row = rows.first().map(Vec::as_slice).unwrap_or_default();
        bind_parameters(&sql, row).map_err(Status::invalid_argument)
    }

    /// Stops a result, if `caller` may (its owner, or an admin as the service judges it): one
    /// still parked is dropped, one streaming is aborted.
    fn cancel(&self, handle: &[u8], caller: &Principal) -> bool {
        let admin = self.service.is_admin(caller);
        let may = |owner: &str| admin || owner == caller.name;
        // A parked result dropped is a cancelled query.
        if self
            .results
            .remove_where(handle, |owner, _| may(owner))
            .is_some()
        {
            return true;
        }
        match self.streaming.remove_where(handle, |owner, _| may(owner)) {
            Some(abort) => {
                abort.abort();
                true
            }
            None => false,
        }
    }

    fn cancel_info(&self, info: &FlightInfo, caller: &Principal) -> bool {
        let mut any = false;
        for endpoint in &info.endpoint {
            if let Some(handle) = endpoint
                .ticket
                .as_ref()
                .and_then(|t| statement_handle(&t.ticket))
            {
                any |= self.cancel(&handle, caller);
            }
        }
        any
    }

    /// `SetSessionOptions`: `catalog` and `schema`, checked by running `USE` with them.
    async fn set_session_options(
        &self,
        request: &Request<Action>,
    ) -> Result<Response<Stream_<arrow_flight::Result>>, Status> {
        let options = SetSessionOptionsRequest::decode(request.get_ref().body.as_ref())
            .map_err(|e| Status::invalid_argument(format!("SetSessionOptionsRequest: {e}")))?;
        let (mut session, stored) = self.session_of(request);
        let mut errors = HashMap::new();
        let mut catalog = session.catalog.clone();
        let mut schema = session.schema.clone();
        for (name, value) in &options.session_options {
            let text = match &value.option_value {
                Some(OptionValue::StringValue(s)) => Some(s.clone()),
                _ => None,
            };
            match (name.as_str(), text) {
                ("catalog", Some(v)) => catalog = v,
                ("schema", Some(v)) => schema = v,
                ("catalog" | "schema", None) => {
                    errors.insert(name.clone(), INVALID_VALUE);
                }
                _ => {
                    errors.insert(name.clone(), INVALID_NAME);
                }
            }
        }
        if (catalog.as_str(), schema.as_str())
            != (session.catalog.as_str(), session.schema.as_str())
        {
            let sql = format!(
                "USE {}.{}",
                quote_identifier(&catalog),
                quote_identifier(&schema)
            );
            match self.run(&session, &sql).await {
                Ok(result) => {
                    if let Some(update) = &result.session_update {
                        session.apply(update);
                    }
                }
                Err(_) => {
                    for key in ["catalog", "schema"] {
                        if options.session_options.contains_key(key) {
                            errors.insert(key.to_string(), INVALID_VALUE);
                        }
                    }
                }
            }
        }
        self.keep_session(&session)?;
        let result = SetSessionOptionsResult {
            errors: errors
                .into_iter()
                .map(|(k, value)| (k, SetSessionOptionsError { value }))
                .collect(),
        };
        let mut response = Self::action_result(result.encode_to_vec());
        if !stored {
            set_session_cookie(response.metadata_mut(), &session);
        }
        Ok(response)
    }

    fn action_result(body: Vec<u8>) -> Response<Stream_<arrow_flight::Result>> {
        let result = arrow_flight::Result { body: body.into() };
        Response::new(Box::pin(futures::stream::once(async move { Ok(result) })))
    }

    /// Streams a batch as a Flight response.
    fn one_batch(batch: RecordBatch) -> Response<Stream_<arrow_flight::FlightData>> {
        let schema = batch.schema();
        let stream = FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .build(futures::stream::once(async move { Ok(batch) }))
            .map_err(Status::from);
        Response::new(Box::pin(stream))
    }

    /// Rows of a metadata query, as strings.
    async fn rows<T>(&self, request: &Request<T>, sql: &str) -> Result<Vec<Vec<String>>, Status> {
        let result = self.run(&self.session(request), sql).await?;
        let batches: Vec<RecordBatch> =
            result.batches.try_collect().await.map_err(|e| status(&e))?;
        let mut rows = Vec::new();
        for b in &batches {
            let formatters: Vec<ArrayFormatter<'_>> = b
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref(), &FormatOptions::default()))
                .collect::<Result<_, _>>()
                .map_err(internal)?;
            for r in 0..b.num_rows() {
                rows.push(formatters.iter().map(|f| f.value(r).to_string()).collect());
            }
        }
        Ok(rows)
    }

    /// A table's schema as the caller reads it: of the columns they may read when they read it
    /// by columns (empty when they may read none).
    async fn table_schema<T>(
        &self,
        request: &Request<T>,
        catalog: &str,
        schema: &str,
        table: &str,
    ) -> Result<Schema, Status> {
        let name = [catalog, schema, table].map(quote_identifier).join(".");
        let session = self.session(request);
        match self
            .run(&session, &format!("SELECT * FROM {name} LIMIT 0"))
            .await
        {
            Ok(result) => return Ok(result.schema.as_ref().clone()),
            Err(e) if e.code() == tonic::Code::PermissionDenied => {}
            Err(e) => return Err(e),
        }
        let columns = self
            .rows(
                request,
                &format!(
                    "SELECT column_name FROM system.jdbc.columns WHERE {} ORDER BY ordinal_position",
                    conditions(&[
                        ("table_cat", "=", Some(catalog)),
                        ("table_schem", "=", Some(schema)),
                        ("table_name", "=", Some(table)),
                    ])
                ),
            )
            .await?;
        if columns.is_empty() {
            return Ok(Schema::empty());
        }
        let list: Vec<String> = columns.iter().map(|c| quote_identifier(&c[0])).collect();
        let sql = format!("SELECT {} FROM {name} LIMIT 0", list.join(", "));
        match self.run(&session, &sql).await {
            Ok(result) => Ok(result.schema.as_ref().clone()),
            Err(e) if e.code() == tonic::Code::PermissionDenied => Ok(Schema::empty()),
            Err(e) => Err(e),
        }
    }

    fn info_for(
        command: impl ProstMessageExt,
        schema: &Schema,
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        let info = FlightInfo::new()
            .try_with_schema(schema)
            .map_err(internal)?
            .with_endpoint(
                FlightEndpoint::new().with_ticket(Ticket::new(command.as_any().encode_to_vec())),
            )
            .with_descriptor(descriptor);
        Ok(Response::new(info))
    }
}

/// A WHERE clause from a metadata command's optional filters (`TRUE` when there are none).
fn conditions(filters: &[(&str, &str, Option<&str>)]) -> String {
    let mut parts: Vec<String> = filters
        .iter()
        .filter_map(|(column, op, value)| {
            value.map(|v| format!("{column} {op} '{}'", v.replace('\'', "''")))
        })
        .collect();
    if parts.is_empty() {
        parts.push("TRUE".to_string());
    }
    parts.join(" AND ")
}

#[tonic::async_trait]
impl FlightSqlService for SqeFlightSql {
    type FlightService = SqeFlightSql;

    /// Basic credentials were checked by the authentication layer; hand back the caller's own
    /// bearer token for the next calls.
    async fn do_handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Stream_<HandshakeResponse>>, Status> {
        let token = request
            .extensions()
            .get::<Credential>()
            .map(|c| c.expose().to_string());
        let reply = HandshakeResponse {
            protocol_version: 0,
            payload: token.clone().unwrap_or_default().into(),
        };
        let mut response: Response<Stream_<HandshakeResponse>> =
            Response::new(Box::pin(futures::stream::once(async move { Ok(reply) })));
        if let Some(t) = token
            && let Ok(v) = format!("Bearer {t}").parse()
        {
            response.metadata_mut().insert("authorization", v);
        }
        Ok(response)
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let descriptor = request.get_ref().clone();
        self.start(&request, &query.query, descriptor).await
    }

    async fn get_flight_info_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let sql = self.bound_query(&query.prepared_statement_handle, &caller(&request))?;
        let descriptor = request.get_ref().clone();
        self.start(&request, &sql, descriptor).await
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        request: Request<Ticket>,
    ) -> Result<
        Response<<Self as arrow_flight::flight_service_server::FlightService>::DoGetStream>,
        Status,
    > {
        let handle = ticket.statement_handle.to_vec();
        let owner = caller(&request).name;
        let result = self
            .results
            .remove(&handle[..], &owner)
            .ok_or_else(|| Status::not_found(NO_RESULT))?;
        // Registered while it streams, so CancelFlightInfo can stop it; a cancelled stream ends
        // with CANCELLED rather than looking complete.
        let (abort, registration) = AbortHandle::new_pair();
        self.streaming
            .insert(handle.clone(), &owner, abort.clone())
            .map_err(|refused| internal(format!("a stream was not registered: {refused:?}")))?;
        let unregister = Unregister {
            streaming: self.streaming.clone(),
            handle,
            owner,
        };
        let ending = futures::stream::once(async move {
            drop(unregister);
            abort.is_aborted().then(|| {
                Err(FlightError::Tonic(Box::new(Status::cancelled(
                    "query cancelled",
                ))))
            })
        })
        .filter_map(futures::future::ready);
        let batches = Abortable::new(result.batches, registration)
            .map_err(|e| FlightError::Tonic(Box::new(status(&e))))
            .chain(ending);
        let stream = FlightDataEncoderBuilder::new()
            .with_schema(result.schema)
            .build(batches)
            .map_err(Status::from);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn do_put_statement_update(
        &self,
        command: CommandStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        self.update(&request, [Ok(command.query)]).await
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        request: Request<arrow_flight::Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        // Preparing must not run anything: the schema arrives with the FlightInfo at execution.
        // What could never run is not kept.
        check_statement_length(&query.query).map_err(|e| status(&e))?;
        let handle = new_handle();
        let prepared = Prepared {
            sql: Arc::new(query.query),
            rows: Rows::default(),
        };
        self.keep_prepared(handle.clone(), &caller(&request), prepared)?;
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: handle.into(),
            dataset_schema: bytes::Bytes::new(),
            parameter_schema: bytes::Bytes::new(),
        })
    }

    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        let who = caller(&request);
        let handle = query.prepared_statement_handle.to_vec();
        // Checked before the parameters are read, so nobody else's statement costs a decode.
        let (sql, _) = self.prepared_of(&handle, &who)?;
        let rows = parameter_rows(request, self.config.max_prepared_bytes_per_user).await?;
        let prepared = Prepared {
            sql,
            rows: Arc::new(rows),
        };
        self.keep_prepared(handle.clone(), &who, prepared)?;
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(handle.into()),
        })
    }

    async fn do_put_prepared_statement_update(
        &self,
        query: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        // An update's parameters come in its own DoPut (a query's in an earlier one).
        let who = caller(&request);
        let handle = query.prepared_statement_handle.to_vec();
        let (sql, kept) = self.prepared_of(&handle, &who)?;
        let (metadata, extensions, stream) = request.into_parts();
        let rows = parameter_rows(
            Request::new(stream),
            self.config.max_prepared_bytes_per_user,
        )
        .await?;
        let request = Request::from_parts(metadata, extensions, ());
        let rows = if rows.is_empty() {
            kept
        } else {
            let rows = Arc::new(rows);
            let prepared = Prepared {
                sql: sql.clone(),
                rows: rows.clone(),
            };
            self.keep_prepared(handle, &who, prepared)?;
            rows
        };
        self.update(&request, Self::bind(&sql, &rows)).await
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        request: Request<arrow_flight::Action>,
    ) -> Result<(), Status> {
        let who = caller(&request);
        self.prepared
            .remove(query.prepared_statement_handle.as_ref(), &who.name);
        Ok(())
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        Self::info_for(query, &schema, request.into_inner())
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<Ticket>,
    ) -> Result<
        Response<<Self as arrow_flight::flight_service_server::FlightService>::DoGetStream>,
        Status,
    > {
        let mut builder = query.into_builder();
        for row in self.rows(&request, "SHOW CATALOGS").await? {
            builder.append(&row[0]);
        }
        Ok(Self::one_batch(builder.build().map_err(internal)?))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        Self::info_for(query, &schema, request.into_inner())
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<Ticket>,
    ) -> Result<
        Response<<Self as arrow_flight::flight_service_server::FlightService>::DoGetStream>,
        Status,
    > {
        let rows = self
            .rows(
                &request,
                &format!(
                    "SELECT table_catalog, table_schem FROM system.jdbc.schemas WHERE {} ORDER BY 1, 2",
                    conditions(&[
                        ("table_catalog", "=", query.catalog.as_deref()),
                        ("table_schem", "LIKE", query.db_schema_filter_pattern.as_deref()),
                    ])
                ),
            )
            .await?;
        let mut builder = query.into_builder();
        for row in &rows {
            builder.append(&row[0], &row[1]);
        }
        Ok(Self::one_batch(builder.build().map_err(internal)?))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        Self::info_for(query, &schema, request.into_inner())
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        request: Request<Ticket>,
    ) -> Result<
        Response<<Self as arrow_flight::flight_service_server::FlightService>::DoGetStream>,
        Status,
    > {
        let include_schema = query.include_schema;
        let rows = self
            .rows(
                &request,
                &format!(
                    "SELECT table_cat, table_schem, table_name, table_type FROM system.jdbc.tables \
                     WHERE {} ORDER BY 1, 2, 3",
                    conditions(&[
                        ("table_cat", "=", query.catalog.as_deref()),
                        (
                            "table_schem",
                            "LIKE",
                            query.db_schema_filter_pattern.as_deref()
                        ),
                        (
                            "table_name",
                            "LIKE",
                            query.table_name_filter_pattern.as_deref()
                        ),
                    ])
                ),
            )
            .await?;
        let types = query.table_types.clone();
        let mut builder = query.into_builder();
        for row in &rows {
            let kind = row[3].as_str();
            if !types.is_empty() && !types.iter().any(|t| t == kind) {
                continue;
            }
            let schema = if include_schema {
                self.table_schema(&request, &row[0], &row[1], &row[2])
                    .await?
            } else {
                Schema::empty()
            };
            builder
                .append(&row[0], &row[1], &row[2], kind, &schema)
                .map_err(internal)?;
        }
        Ok(Self::one_batch(builder.build().map_err(internal)?))
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        Self::info_for(query, &schema, request.into_inner())
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        _request: Request<Ticket>,
    ) -> Result<
        Response<<Self as arrow_flight::flight_service_server::FlightService>::DoGetStream>,
        Status,
    > {
        let mut builder = query.into_builder();
        builder.append("TABLE");
        builder.append("VIEW");
        Ok(Self::one_batch(builder.build().map_err(internal)?))
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder(&self.sql_info).schema();
        Self::info_for(query, &schema, request.into_inner())
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        _request: Request<Ticket>,
    ) -> Result<
        Response<<Self as arrow_flight::flight_service_server::FlightService>::DoGetStream>,
        Status,
    > {
        let batch = query
            .into_builder(&self.sql_info)
            .build()
            .map_err(internal)?;
        Ok(Self::one_batch(batch))
    }

    async fn get_flight_info_primary_keys(
        &self,
        query: CommandGetPrimaryKeys,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        Self::info_for(query, &primary_keys_schema(), request.into_inner())
    }

    /// Iceberg tables SQE creates declare no keys: the answer is the table's (empty) key list,
    /// after checking the table exists.
    async fn do_get_primary_keys(
        &self,
        query: CommandGetPrimaryKeys,
        request: Request<Ticket>,
    ) -> Result<
        Response<<Self as arrow_flight::flight_service_server::FlightService>::DoGetStream>,
        Status,
    > {
        let session = self.session(&request);
        let name = format!(
            "{}.{}.{}",
            quote_identifier(query.catalog.as_deref().unwrap_or(&session.catalog)),
            quote_identifier(query.db_schema.as_deref().unwrap_or(&session.schema)),
            quote_identifier(&query.table)
        );
        self.run(&session, &format!("SELECT * FROM {name} LIMIT 0"))
            .await?;
        Ok(Self::one_batch(RecordBatch::new_empty(Arc::new(
            primary_keys_schema(),
        ))))
    }

    async fn do_put_statement_ingest(
        &self,
        command: CommandStatementIngest,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        if command.temporary {
            return Err(Status::unimplemented("temporary tables are not supported"));
        }
        if command.transaction_id.is_some() {
            return Err(Status::unimplemented("transactions are not supported"));
        }
        let options = command.table_definition_options.unwrap_or_default();
        let if_missing = match TableNotExistOption::try_from(options.if_not_exist) {
            Ok(TableNotExistOption::Create) => IfMissing::Create,
            _ => IfMissing::Fail,
        };
        let if_exists = match TableExistsOption::try_from(options.if_exists) {
            Ok(TableExistsOption::Append) => IfExists::Append,
            Ok(TableExistsOption::Replace) => IfExists::Replace,
            _ => IfExists::Fail,
        };
        let target = IngestTarget {
            catalog: command.catalog.filter(|c| !c.is_empty()),
            schema: command.schema.filter(|s| !s.is_empty()),
            table: command.table,
            if_missing,
            if_exists,
        };
        let session = self.session(&request);
        let flight_data = request
            .into_inner()
            .map_err(|e| FlightError::Tonic(Box::new(e)));
        let mut decoded =
            arrow_flight::decode::FlightRecordBatchStream::new_from_flight_data(flight_data);
        // The schema arrives with the first message; the batches stream on into the writer.
        let first = decoded.next().await.transpose().map_err(Status::from)?;
        let schema = decoded
            .schema()
            .cloned()
            .ok_or_else(|| Status::invalid_argument("bulk ingest sent no schema"))?;
        let batches = futures::stream::iter(first.map(Ok))
            .chain(decoded)
            .map_err(|e| SqeError::invalid(format!("bulk ingest: {e}")))
            .boxed();
        let mut result = self
            .service
            .ingest(&session, target, schema, batches)
            .await
            .map_err(|e| status(&e))?;
        while let Some(batch) = result.batches.next().await {
            batch.map_err(|e| status(&e))?;
        }
        Ok(result.update_count.unwrap_or(0) as i64)
    }

    async fn do_action_cancel_query(
        &self,
        query: ActionCancelQueryRequest,
        request: Request<Action>,
    ) -> Result<ActionCancelQueryResult, Status> {
        let info = FlightInfo::decode(query.info.as_ref())
            .map_err(|e| Status::invalid_argument(format!("FlightInfo: {e}")))?;
        // ActionCancelQueryResult.CancelResult: CANCELLED = 1, NOT_CANCELLABLE = 3.
        let result = if self.cancel_info(&info, &caller(&request)) {
            1
        } else {
            3
        };
        Ok(ActionCancelQueryResult { result })
    }

    /// Flight's own actions: sessions and CancelFlightInfo.
    async fn do_action_fallback(
        &self,
        request: Request<Action>,
    ) -> Result<
        Response<<Self as arrow_flight::flight_service_server::FlightService>::DoActionStream>,
        Status,
    > {
        match request.get_ref().r#type.as_str() {
            SET_SESSION_OPTIONS => self.set_session_options(&request).await,
            GET_SESSION_OPTIONS => {
                let session = self.session(&request);
                let result = GetSessionOptionsResult {
                    session_options: HashMap::from([
                        (
                            "catalog".to_string(),
                            SessionOptionValue::string(session.catalog),
                        ),
                        (
                            "schema".to_string(),
                            SessionOptionValue::string(session.schema),
                        ),
                    ]),
                };
                Ok(Self::action_result(result.encode_to_vec()))
            }
            CLOSE_SESSION => {
                let (session, stored) = self.session_of(&request);
                if stored {
                    self.sessions.remove(&session.id, &session.principal);
                }
                let result = CloseSessionResult { status: CLOSED };
                Ok(Self::action_result(result.encode_to_vec()))
            }
            CANCEL_FLIGHT_INFO => {
                let cancel = CancelFlightInfoRequest::decode(request.get_ref().body.as_ref())
                    .map_err(|e| {
                        Status::invalid_argument(format!("CancelFlightInfoRequest: {e}"))
                    })?;
                let cancelled = cancel
                    .info
                    .as_ref()
                    .is_some_and(|i| self.cancel_info(i, &caller(&request)));
                let status = if cancelled {
                    CancelStatus::Cancelled
                } else {
                    CancelStatus::NotCancellable
                };
                let result = CancelFlightInfoResult {
                    status: status as i32,
                };
                Ok(Self::action_result(result.encode_to_vec()))
            }
            other => Err(Status::invalid_argument(format!(
                "unknown action '{other}'"
            ))),
        }
    }

    async fn list_custom_actions(&self) -> Option<Vec<Result<arrow_flight::ActionType, Status>>> {
        let action = |name: &str, description: &str| {
            Ok(arrow_flight::ActionType {
                r#type: name.to_string(),
                description: description.to_string(),
            })
        };
        Some(vec![
            action(SET_SESSION_OPTIONS, "Set the session's catalog and schema"),
            action(GET_SESSION_OPTIONS, "The session's catalog and schema"),
            action(CLOSE_SESSION, "Forget the session"),
            action(CANCEL_FLIGHT_INFO, "Cancel a running query"),
        ])
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}

/// The answer of a refused insert into one of the maps, naming the cap met.
fn refusal(refused: Refused, owner: &Principal, caps: &Caps) -> Status {
    status(&refused.error(&owner.name, caps))
}

/// Parameter rows sent with a DoPut, each as SQL literals; refused once they hold more than
/// `most_bytes` (as a prepared statement's bytes count them), which no principal may keep.
async fn parameter_rows(
    request: Request<PeekableFlightDataStream>,
    most_bytes: usize,
) -> Result<Vec<Vec<String>>, Status> {
    let flight_data = request
        .into_inner()
        .map_err(|e| FlightError::Tonic(Box::new(e)));
    let mut decoded =
        arrow_flight::decode::FlightRecordBatchStream::new_from_flight_data(flight_data);
    let mut rows = Vec::new();
    let (mut values, mut bytes) = (0usize, 0usize);
    // Counted and turned into literals as they arrive, so a flood of parameters stops at a limit
    // with at most one batch held besides.
    while let Some(batch) = decoded.next().await.transpose().map_err(Status::from)? {
        values += batch.num_rows() * batch.num_columns();
        if values > MAX_PARAMETERS {
            return Err(Status::invalid_argument(too_many_parameters(values)));
        }
        for row in 0..batch.num_rows() {
            let literals = batch
                .columns()
                .iter()
                .map(|c| literal(c.as_ref(), row))
                .collect::<Result<Vec<_>, _>>()?;
            bytes += row_bytes(&literals);
            if bytes > most_bytes {
                return Err(status(&SqeError::new(
                    ErrorCode::ResourceExhausted,
                    format!(
                        "the parameters bound hold more than the {most_bytes} bytes one user's \
                         Flight SQL prepared statements may hold ([server] \
                         max_prepared_statement_bytes_per_user); load many rows with bulk ingest"
                    ),
                )));
            }
            rows.push(literals);
        }
    }
    Ok(rows)
}

/// The columns of a GetPrimaryKeys answer, as the Flight SQL spec lays them out.
fn primary_keys_schema() -> Schema {
    use arrow::datatypes::Field;
    Schema::new(vec![
        Field::new("catalog_name", DataType::Utf8, true),
        Field::new("db_schema_name", DataType::Utf8, true),
        Field::new("table_name", DataType::Utf8, false),
        Field::new("column_name", DataType::Utf8, false),
        Field::new("key_name", DataType::Utf8, true),
        Field::new("key_sequence", DataType::Int32, false),
    ])
}

/// Removes a streaming result's cancel handle when its stream ends or is dropped.
struct Unregister {
    streaming: Arc<HandleMap<Vec<u8>, AbortHandle>>,
    handle: Vec<u8>,
    owner: String,
}

impl Drop for Unregister {
    fn drop(&mut self) {
        self.streaming.remove(&self.handle[..], &self.owner);
    }
}

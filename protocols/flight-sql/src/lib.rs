//! Arrow Flight SQL in front of a [`QueryService`]: statements (direct and prepared, with bound
//! parameters), updates, and the metadata calls ADBC and JDBC make on connect (catalogs, schemas,
//! tables, table types). Results stream from the engine's batches; nothing is buffered whole.
//!
//! It never checks a credential: the gateway's authentication layer puts the caller's
//! [`Principal`] and [`Credential`] into the request extensions before a call reaches this service.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::{DataType, Schema};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightServiceServer;
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, CommandGetCatalogs, CommandGetDbSchemas,
    CommandGetTableTypes, CommandGetTables, CommandPreparedStatementQuery,
    CommandPreparedStatementUpdate, CommandStatementQuery, CommandStatementUpdate,
    DoPutPreparedStatementResult, ProstMessageExt, SqlInfo, TicketStatementQuery,
};
use arrow_flight::{
    FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse, Ticket,
};
use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message;
use sqe_sessions::{
    Credential, ErrorCode, Principal, QueryResult, QueryService, Session, SqeError, bind_parameters,
};
use tonic::{Request, Response, Status, Streaming};

/// How long a result may wait for its DoGet.
const UNFETCHED_AFTER: Duration = Duration::from_secs(300);

type Stream_<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

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

struct Prepared {
    sql: String,
    params: Vec<String>,
}

pub struct FlightSqlConfig {
    pub default_catalog: String,
    pub default_schema: String,
}

pub struct SqeFlightSql {
    service: Arc<dyn QueryService>,
    config: FlightSqlConfig,
    prepared: Mutex<HashMap<Vec<u8>, Prepared>>,
    /// Results waiting for their DoGet, by ticket, with when they were parked. Each holds a query
    /// slot, so results nobody fetches are dropped (cancelled) after `UNFETCHED_AFTER`.
    results: Mutex<HashMap<Vec<u8>, (Instant, QueryResult)>>,
}

/// The Flight service to mount in the gateway.
pub fn service(
    service: Arc<dyn QueryService>,
    config: FlightSqlConfig,
) -> FlightServiceServer<SqeFlightSql> {
    FlightServiceServer::new(SqeFlightSql {
        service,
        config,
        prepared: Mutex::new(HashMap::new()),
        results: Mutex::new(HashMap::new()),
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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

impl SqeFlightSql {
    fn session<T>(&self, request: &Request<T>) -> Session {
        let principal = request
            .extensions()
            .get::<Principal>()
            .cloned()
            .unwrap_or_else(|| Principal::new("anonymous"));
        let mut session = Session::new(
            principal,
            &self.config.default_catalog,
            &self.config.default_schema,
        );
        session.credential = request.extensions().get::<Credential>().cloned();
        session
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
        let result = self.run(&self.session(request), sql).await?;
        let schema = result.schema.clone();
        let handle = uuid::Uuid::new_v4().as_bytes().to_vec();
        {
            let mut results = lock(&self.results);
            results.retain(|_, (parked, _)| parked.elapsed() < UNFETCHED_AFTER);
            results.insert(handle.clone(), (Instant::now(), result));
        }
        let ticket = TicketStatementQuery {
            statement_handle: handle.into(),
        };
        let info = FlightInfo::new()
            .try_with_schema(&schema)
            .map_err(|e| Status::internal(e.to_string()))?
            .with_endpoint(
                FlightEndpoint::new().with_ticket(Ticket::new(ticket.as_any().encode_to_vec())),
            )
            .with_descriptor(descriptor);
        Ok(Response::new(info))
    }

    /// Runs `sql` to the end and returns the rows it wrote (0 for DDL).
    async fn update(&self, session: &Session, sql: &str) -> Result<i64, Status> {
        let mut result = self.run(session, sql).await?;
        while let Some(batch) = result.batches.next().await {
            batch.map_err(|e| status(&e))?;
        }
        Ok(result.update_count.unwrap_or(0) as i64)
    }

    fn bound_sql(&self, handle: &[u8]) -> Result<String, Status> {
        let prepared = lock(&self.prepared);
        let p = prepared
            .get(handle)
            .ok_or_else(|| Status::not_found("prepared statement not found (closed?)"))?;
        bind_parameters(&p.sql, &p.params).map_err(Status::invalid_argument)
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
                .map_err(|e| Status::internal(e.to_string()))?;
            for r in 0..b.num_rows() {
                rows.push(formatters.iter().map(|f| f.value(r).to_string()).collect());
            }
        }
        Ok(rows)
    }

    fn info_for(
        command: impl ProstMessageExt,
        schema: &Schema,
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        let info = FlightInfo::new()
            .try_with_schema(schema)
            .map_err(|e| Status::internal(e.to_string()))?
            .with_endpoint(
                FlightEndpoint::new().with_ticket(Ticket::new(command.as_any().encode_to_vec())),
            )
            .with_descriptor(descriptor);
        Ok(Response::new(info))
    }
}

fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
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
        let sql = self.bound_sql(&query.prepared_statement_handle)?;
        let descriptor = request.get_ref().clone();
        self.start(&request, &sql, descriptor).await
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        _request: Request<Ticket>,
    ) -> Result<
        Response<<Self as arrow_flight::flight_service_server::FlightService>::DoGetStream>,
        Status,
    > {
        let (_, result) = lock(&self.results)
            .remove(ticket.statement_handle.as_ref())
            .ok_or_else(|| Status::not_found("result not found (already fetched, or expired)"))?;
        let batches = result
            .batches
            .map_err(|e| FlightError::Tonic(Box::new(status(&e))));
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
        self.update(&self.session(&request), &command.query).await
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        _request: Request<arrow_flight::Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        // Preparing must not run anything: the schema arrives with the FlightInfo at execution.
        let handle = uuid::Uuid::new_v4().as_bytes().to_vec();
        lock(&self.prepared).insert(
            handle.clone(),
            Prepared {
                sql: query.query,
                params: Vec::new(),
            },
        );
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
        let flight_data = request
            .into_inner()
            .map_err(|e| FlightError::Tonic(Box::new(e)));
        let batches: Vec<RecordBatch> =
            arrow_flight::decode::FlightRecordBatchStream::new_from_flight_data(flight_data)
                .try_collect()
                .await
                .map_err(Status::from)?;
        // One set of parameters: the first row bound.
        let mut params = Vec::new();
        if let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) {
            if batches.iter().map(|b| b.num_rows()).sum::<usize>() > 1 {
                return Err(Status::unimplemented(
                    "binding more than one row of parameters is not supported",
                ));
            }
            for column in batch.columns() {
                params.push(literal(column.as_ref(), 0)?);
            }
        }
        let handle = query.prepared_statement_handle.to_vec();
        let mut prepared = lock(&self.prepared);
        let p = prepared
            .get_mut(&handle)
            .ok_or_else(|| Status::not_found("prepared statement not found (closed?)"))?;
        p.params = params;
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(handle.into()),
        })
    }

    async fn do_put_prepared_statement_update(
        &self,
        query: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let sql = self.bound_sql(&query.prepared_statement_handle)?;
        self.update(&self.session(&request), &sql).await
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        _request: Request<arrow_flight::Action>,
    ) -> Result<(), Status> {
        lock(&self.prepared).remove(query.prepared_statement_handle.as_ref());
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
        Ok(Self::one_batch(
            builder
                .build()
                .map_err(|e| Status::internal(e.to_string()))?,
        ))
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
                "SELECT catalog_name, schema_name FROM information_schema.schemata ORDER BY 1, 2",
            )
            .await?;
        let mut builder = query.into_builder();
        for row in rows.iter().filter(|r| r[0] != "system") {
            builder.append(&row[0], &row[1]);
        }
        Ok(Self::one_batch(
            builder
                .build()
                .map_err(|e| Status::internal(e.to_string()))?,
        ))
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
                "SELECT table_catalog, table_schema, table_name, table_type FROM information_schema.tables \
                 WHERE table_schema <> 'information_schema' ORDER BY 1, 2, 3",
            )
            .await?;
        let mut builder = query.into_builder();
        for row in rows.iter().filter(|r| r[0] != "system") {
            let kind = if row[3] == "VIEW" { "VIEW" } else { "TABLE" };
            let schema = if include_schema {
                let sql = format!(
                    "SELECT * FROM {}.{}.{} LIMIT 0",
                    quote_ident(&row[0]),
                    quote_ident(&row[1]),
                    quote_ident(&row[2])
                );
                self.run(&self.session(&request), &sql)
                    .await?
                    .schema
                    .as_ref()
                    .clone()
            } else {
                Schema::empty()
            };
            builder
                .append(&row[0], &row[1], &row[2], kind, &schema)
                .map_err(|e| Status::internal(e.to_string()))?;
        }
        Ok(Self::one_batch(
            builder
                .build()
                .map_err(|e| Status::internal(e.to_string()))?,
        ))
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
        Ok(Self::one_batch(
            builder
                .build()
                .map_err(|e| Status::internal(e.to_string()))?,
        ))
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}

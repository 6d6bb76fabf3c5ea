//! A sqllogictest connection over Arrow Flight SQL, as a driver would use it: queries through
//! GetFlightInfo + DoGet, everything else through DoPut updates, and one server-side session kept by
//! its `arrow_flight_session_id` cookie (opened with SetSessionOptions), so `USE` carries over.

use arrow::array::RecordBatch;
use arrow_flight::Action;
use arrow_flight::sql::client::FlightSqlServiceClient;
use futures::TryStreamExt;
use sqe_sessions::SqeError;
use sqllogictest::{DBOutput, DefaultColumnType};
use tonic::transport::{Channel, Endpoint};

use crate::rows_output;

pub struct FlightDb {
    client: FlightSqlServiceClient<Channel>,
}

fn flight_error(e: impl std::fmt::Display) -> SqeError {
    // The server's message, without the transport's wrapping.
    let text = e.to_string();
    let message = text
        .split_once("message: \"")
        .and_then(|(_, rest)| rest.split_once("\", details"))
        .map(|(m, _)| m.replace("\\\"", "\"").replace("\\'", "'"))
        .unwrap_or(text);
    SqeError::invalid(message)
}

/// The statements that return rows (by their first words); everything else is sent as an update.
fn returns_rows(sql: &str) -> bool {
    let first = sql
        .trim_start_matches(|c: char| c.is_whitespace() || c == '(')
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let procedure = || {
        sql.split_whitespace()
            .any(|w| w.eq_ignore_ascii_case("execute"))
    };
    match first.as_str() {
        "select" | "with" | "values" | "show" | "describe" | "explain" | "table" | "copy"
        | "call" => true,
        // A table procedure answers with its figures.
        "alter" => procedure(),
        _ => false,
    }
}

impl FlightDb {
    /// Connects and opens a session whose catalog and schema are `catalog`.`schema`.
    pub async fn connect(addr: &str, catalog: &str, schema: &str) -> Result<Self, SqeError> {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| SqeError::internal(e.to_string()))?
            .connect()
            .await
            .map_err(|e| SqeError::internal(format!("connect: {e}")))?;
        let mut client = FlightSqlServiceClient::new(channel);
        // SetSessionOptions { catalog, schema } (Flight.proto field numbers), by hand: arrow-flight
        // has no type for it.
        let body = session_options(&[("catalog", catalog), ("schema", schema)]);
        let response = client
            .inner_mut()
            .do_action(Action::new("SetSessionOptions", body))
            .await
            .map_err(|e| SqeError::internal(format!("SetSessionOptions: {e}")))?;
        let cookie = response
            .metadata()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .ok_or_else(|| SqeError::internal("no session cookie in the SetSessionOptions reply"))?
            .to_string();
        client.set_header("cookie", cookie);
        Ok(Self { client })
    }
}

/// A `SetSessionOptionsRequest` with string values, encoded.
fn session_options(options: &[(&str, &str)]) -> Vec<u8> {
    fn field(tag: u8, bytes: &[u8], out: &mut Vec<u8>) {
        out.push(tag << 3 | 2);
        let mut len = bytes.len();
        loop {
            let b = (len & 0x7f) as u8;
            len >>= 7;
            if len == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
        out.extend_from_slice(bytes);
    }
    let mut out = Vec::new();
    for (key, value) in options {
        let mut option_value = Vec::new();
        field(1, value.as_bytes(), &mut option_value);
        let mut entry = Vec::new();
        field(1, key.as_bytes(), &mut entry);
        field(2, &option_value, &mut entry);
        field(1, &entry, &mut out);
    }
    out
}

#[async_trait::async_trait]
impl sqllogictest::AsyncDB for FlightDb {
    type Error = SqeError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SqeError> {
        if !returns_rows(sql) {
            let count = self
                .client
                .execute_update(sql.to_string(), None)
                .await
                .map_err(flight_error)?;
            return Ok(DBOutput::StatementComplete(count as u64));
        }
        let info = self
            .client
            .execute(sql.to_string(), None)
            .await
            .map_err(flight_error)?;
        let schema = info.clone().try_decode_schema().map_err(flight_error)?;
        let mut batches: Vec<RecordBatch> = Vec::new();
        for endpoint in info.endpoint {
            let Some(ticket) = endpoint.ticket else {
                continue;
            };
            let stream = self.client.do_get(ticket).await.map_err(flight_error)?;
            let mut got: Vec<RecordBatch> = stream.try_collect().await.map_err(flight_error)?;
            batches.append(&mut got);
        }
        rows_output(&schema, batches)
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "sqe-flight-sql"
    }

    async fn sleep(dur: std::time::Duration) {
        tokio::time::sleep(dur).await;
    }
}

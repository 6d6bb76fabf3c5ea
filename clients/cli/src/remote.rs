//! Remote mode: the shell's statements go to an sqe-server over Arrow Flight SQL. The server behind
//! the same [`QueryService`] trait the embedded engine implements, so the shell does not care which.

use std::sync::Arc;

use arrow::datatypes::Schema;
use arrow_flight::Ticket;
use arrow_flight::sql::client::FlightSqlServiceClient;
use futures::{StreamExt, TryStreamExt};
use sqe_sessions::{ErrorCode, QueryResult, QueryService, Session, SqeError, SqeResult};
use tokio::sync::Mutex;
use tonic::transport::{Channel, Endpoint};

pub struct FlightRemote {
    client: Arc<Mutex<FlightSqlServiceClient<Channel>>>,
}

fn remote_error(e: impl std::fmt::Display) -> SqeError {
    let text = e.to_string();
    // tonic statuses print as "status: Code, message: \"…\", …": keep the message.
    let message = text
        .split("message: \"")
        .nth(1)
        .and_then(|m| m.split('"').next())
        .map(str::to_string)
        .unwrap_or(text);
    SqeError::new(ErrorCode::External, message)
}

impl FlightRemote {
    /// Connects; signs in with a bearer token or, through the Flight handshake, a user and password.
    pub async fn connect(
        host: &str,
        port: u16,
        token: Option<String>,
        user: Option<(String, String)>,
    ) -> SqeResult<Self> {
        let channel = Endpoint::from_shared(format!("http://{host}:{port}"))
            .map_err(remote_error)?
            .connect()
            .await
            .map_err(|e| {
                SqeError::new(
                    ErrorCode::External,
                    format!("cannot connect to {host}:{port}: {e}"),
                )
            })?;
        let mut client = FlightSqlServiceClient::new(channel);
        if let Some(t) = token {
            client.set_token(t);
        } else if let Some((user, password)) = user {
            client
                .handshake(&user, &password)
                .await
                .map_err(remote_error)?;
        }
        Ok(Self {
            client: Arc::new(Mutex::new(client)),
        })
    }
}

#[async_trait::async_trait]
impl QueryService for FlightRemote {
    async fn execute(&self, _session: &Session, sql: &str) -> SqeResult<QueryResult> {
        let info = self
            .client
            .lock()
            .await
            .execute(sql.to_string(), None)
            .await
            .map_err(remote_error)?;
        let schema = Arc::new(
            info.clone()
                .try_decode_schema()
                .unwrap_or_else(|_| Schema::empty()),
        );
        let tickets: Vec<Ticket> = info.endpoint.into_iter().filter_map(|e| e.ticket).collect();
        let client = self.client.clone();
        let batches = futures::stream::iter(tickets)
            .then(move |ticket| {
                let client = client.clone();
                async move {
                    client
                        .lock()
                        .await
                        .do_get(ticket)
                        .await
                        .map_err(remote_error)
                }
            })
            .map_ok(|stream| stream.map_err(remote_error))
            .try_flatten()
            .boxed();
        Ok(QueryResult {
            schema,
            batches,
            update_count: None,
            session_update: None,
        })
    }
}

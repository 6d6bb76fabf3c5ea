//! Remote mode: the shell's statements go to an sqe-server over Arrow Flight SQL. The server behind
//! the same [`QueryService`] trait the embedded engine implements, so the shell does not care which.

use std::sync::Arc;

use arrow::datatypes::Schema;
use arrow_flight::Ticket;
use arrow_flight::sql::client::FlightSqlServiceClient;
use futures::{StreamExt, TryStreamExt};
use sqe_sessions::{ErrorCode, QueryResult, QueryService, Session, SqeError, SqeResult};
use tokio::sync::Mutex;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

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

/// An error with its causes, which is where transport errors say what went wrong.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

/// How the server's certificate is checked.
pub enum Tls {
    /// Against the public web roots.
    WebRoots,
    /// Against this CA certificate (PEM).
    Ca(Vec<u8>),
}

impl FlightRemote {
    /// Connects; signs in with a bearer token or, through the Flight handshake, a user and password.
    pub async fn connect(
        host: &str,
        port: u16,
        tls: Option<Tls>,
        token: Option<String>,
        user: Option<(String, String)>,
    ) -> SqeResult<Self> {
        let plain = tls.is_none();
        let scheme = if plain { "http" } else { "https" };
        let mut endpoint =
            Endpoint::from_shared(format!("{scheme}://{host}:{port}")).map_err(remote_error)?;
        if let Some(tls) = tls {
            let config = match tls {
                Tls::WebRoots => ClientTlsConfig::new().with_webpki_roots(),
                Tls::Ca(pem) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)),
            };
            endpoint = endpoint
                .tls_config(config.domain_name(host))
                .map_err(remote_error)?;
        }
        let channel = endpoint.connect().await.map_err(|e| {
            SqeError::new(
                ErrorCode::External,
                format!("cannot connect to {host}:{port}: {}", with_causes(&e)),
            )
        })?;
        let mut client = FlightSqlServiceClient::new(channel);
        if plain {
            // Any gRPC answer, even "unauthenticated", shows the server speaks plain HTTP/2; a TLS
            // server answers nothing a client without TLS can read.
            let probe = client
                .inner_mut()
                .list_actions(tonic::Request::new(arrow_flight::Empty {}))
                .await;
            if let Err(status) = probe
                && !matches!(
                    status.code(),
                    tonic::Code::Unauthenticated
                        | tonic::Code::PermissionDenied
                        | tonic::Code::Unimplemented
                )
            {
                return Err(SqeError::new(
                    ErrorCode::External,
                    format!(
                        "cannot connect to {host}:{port}: no answer over plain gRPC (does the server use TLS? then connect with --tls or --tls-ca)"
                    ),
                ));
            }
        }
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

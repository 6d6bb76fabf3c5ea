//! The Model Context Protocol at `/mcp` (Streamable HTTP, rmcp's server), for agents such as
//! Claude Code and Codex: tools to list catalogs, schemas and tables, describe and sample tables,
//! and run read-only SQL (and, when the server allows it, changes) as the caller.
//!
//! The endpoint is an OAuth resource server, never a credential proxy: the gateway's resource
//! layer (sqe-identity) authenticates every request with the caller's own bearer token, and each
//! tool call runs as that caller through the one `QueryService`. An `Mcp-Session-Id` belongs to
//! the principal that opened it: anyone else presenting it gets the answer for an unknown session.
//! The owners are a [`HandleMap`] ([`McpSessions`]), capped in all and per principal (`[mcp]
//! max_sessions_per_user`), so that one user's agents cannot take every session rmcp keeps.

mod results;
mod tools;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use sqe_sessions::{
    AtCapacity, Caps, HandleMap, Principal, ProtocolHandles, QueryService, Refused,
};

/// What the MCP endpoint does (the gateway fills it from `[mcp]`).
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// The catalog and schema tool calls start in.
    pub catalog: String,
    pub schema: String,
    /// Whether `execute_sql_change` exists at all.
    pub allow_writes: bool,
    /// Roles one of which a caller must hold to make changes (besides the write scope and the
    /// engine's own privileges).
    pub write_roles: Vec<String>,
    /// The scope every read tool needs.
    pub read_scope: String,
    /// The scope `execute_sql_change` needs.
    pub write_scope: String,
    /// Most rows in one answer.
    pub max_rows: usize,
    /// Most bytes of JSON rows in one answer; its text is cut there too (agents' clients take
    /// messages of about 1 MiB).
    pub max_bytes: usize,
    /// `Origin`s a browser may call from; requests with any other `Origin` are refused (403).
    pub allowed_origins: Vec<String>,
    /// `Host`s the endpoint answers to (DNS rebinding); an entry without a port allows any port.
    pub allowed_hosts: Vec<String>,
    /// Most MCP sessions open at once, and for one principal (`[mcp] max_sessions_per_user`).
    pub max_sessions: usize,
    pub max_sessions_per_principal: usize,
}

impl McpConfig {
    pub fn new(catalog: impl Into<String>) -> Self {
        Self {
            catalog: catalog.into(),
            schema: "default".into(),
            allow_writes: false,
            write_roles: Vec::new(),
            read_scope: "sqe:read".into(),
            write_scope: "sqe:write".into(),
            max_rows: 1000,
            max_bytes: 256 << 10,
            allowed_origins: Vec::new(),
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            max_sessions: 10_000,
            max_sessions_per_principal: 64,
        }
    }
}

/// The largest JSON-RPC request body taken.
const MAX_BODY_BYTES: usize = 1 << 20;

/// How long an idle session stays bound to its principal (rmcp closes sessions idle for 5 minutes).
const SESSION_IDLE: Duration = Duration::from_secs(600);

/// `/mcp`: the MCP endpoint, its sessions bound to their owners in `sessions`. Put the resource
/// layer (authentication) around it.
pub fn router(
    service: Arc<dyn QueryService>,
    config: McpConfig,
    sessions: Arc<McpSessions>,
) -> Router {
    let config = Arc::new(config);
    let handler = tools::SqeMcp {
        service,
        config: config.clone(),
    };
    let mut transport = StreamableHttpServerConfig::default()
        .with_allowed_hosts(config.allowed_hosts.clone())
        .with_max_request_body_bytes(MAX_BODY_BYTES);
    transport = if config.allowed_origins.is_empty() {
        transport.enforce_origin_validation()
    } else {
        transport.with_allowed_origins(config.allowed_origins.clone())
    };
    let mut manager = LocalSessionManager::default();
    // Answers are kept for clients that resume a stream; briefly, as they can be large.
    manager.session_config.completed_cache_ttl = Duration::from_secs(10);
    let mcp = StreamableHttpService::new(move || Ok(handler.clone()), Arc::new(manager), transport);
    Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(
            sessions,
            bind_sessions,
        ))
}

/// RFC 9728's metadata document of the resource: where its tokens come from and what scopes
/// it knows. Served at `/.well-known/oauth-protected-resource` and its `/mcp` form, without
/// authentication.
pub fn metadata_router(
    resource: &str,
    authorization_servers: &[String],
    config: &McpConfig,
) -> Router {
    let document = Arc::new(json!({
        "resource": resource,
        "authorization_servers": authorization_servers,
        "scopes_supported": [config.read_scope, config.write_scope],
        "bearer_methods_supported": ["header"],
        "resource_name": "SQE",
    }));
    let serve = move || {
        let document = document.clone();
        async move { axum::Json(Value::clone(&document)) }
    };
    Router::new()
        .route("/.well-known/oauth-protected-resource", get(serve.clone()))
        .route("/.well-known/oauth-protected-resource/mcp", get(serve))
}

/// Which principal opened each MCP session, idle after ten minutes; a new session past the
/// caps (`max_sessions`, `max_sessions_per_principal`) is refused.
pub struct McpSessions {
    owners: HandleMap<String, ()>,
}

impl McpSessions {
    pub fn new(config: &McpConfig) -> Arc<Self> {
        let owners = HandleMap::new()
            .idle_after(SESSION_IDLE)
            .at_most(config.max_sessions, AtCapacity::Refuse)
            .at_most_per_owner(config.max_sessions_per_principal);
        Arc::new(Self { owners })
    }
}

impl ProtocolHandles for McpSessions {
    fn protocol(&self) -> &'static str {
        "mcp"
    }

    /// Forgets the owners of sessions idle for ten minutes (rmcp has closed those by then).
    fn expire_idle(&self) -> usize {
        self.owners.expire_idle()
    }

    fn open_work_name(&self) -> &'static str {
        "mcp_results"
    }

    /// None: every MCP answer is sent within its request, which a shutdown waits for anyway.
    fn open_work(&self) -> usize {
        0
    }
}

/// How refusals name the cap on one user's sessions.
const SESSION_CAPS: Caps = Caps {
    entries: "MCP sessions",
    count_setting: "[mcp] max_sessions_per_user",
    bytes_setting: None,
    release: "close one (DELETE /mcp), or wait until one has been unused for ten minutes",
};

/// The answer to a new session past a cap: 429 for the caller's own cap, 503 for the server's.
fn refusal(caller: &str, refused: Refused) -> Response {
    let status = match refused {
        Refused::OwnerFull { .. } | Refused::OwnerBytes { .. } => StatusCode::TOO_MANY_REQUESTS,
        Refused::Full { .. } | Refused::Taken => StatusCode::SERVICE_UNAVAILABLE,
    };
    let error = refused.error(caller, &SESSION_CAPS);
    (status, error.message().to_string()).into_response()
}

const SESSION_HEADER: &str = "mcp-session-id";

/// Binds each session to the principal that opened it. A request naming a session someone else
/// opened goes on naming one that does not exist, and so gets rmcp's own answer for that.
async fn bind_sessions(
    State(sessions): State<Arc<McpSessions>>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = request
        .extensions()
        .get::<Principal>()
        .map(|p| p.name.clone())
        .unwrap_or_default();
    let named = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let deleting = request.method() == axum::http::Method::DELETE;
    if let Some(id) = &named {
        let own = sessions
            .owners
            .get(id.as_str(), &caller, |_| Some(()))
            .is_some();
        if own && deleting {
            sessions.owners.remove(id.as_str(), &caller);
        }
        if !own {
            tracing::info!(principal = %caller, "mcp session of another principal or none");
            let unknown = uuid::Uuid::new_v4().simple().to_string();
            if let Ok(v) = HeaderValue::from_str(&unknown) {
                request.headers_mut().insert(SESSION_HEADER, v);
            }
        }
    } else if let Err(refused) = sessions.owners.admits(&caller) {
        return refusal(&caller, refused);
    }
    let mut response = next.run(request).await;
    // A session rmcp no longer knows (closed, expired) is no longer anyone's.
    if let Some(id) = &named
        && response.status() == StatusCode::NOT_FOUND
    {
        sessions.owners.remove(id.as_str(), &caller);
    }
    // rmcp answers a closed session 202; clients (Python's SDK) look for 200 or 204.
    if deleting && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    if named.is_none()
        && let Some(id) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
        && let Err(refused) = sessions.owners.insert(id.to_string(), &caller, ())
    {
        // Only when others took the last places while rmcp opened this one: the cap holds, and
        // the session, owned by nobody, answers no one and ends with rmcp's idle timeout.
        tracing::warn!(principal = %caller, ?refused, "mcp session refused past the cap");
        return refusal(&caller, refused);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn answer(response: Response) -> (StatusCode, String) {
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn refusals_name_the_cap_and_its_setting() {
        assert_eq!(
            answer(refusal("bob", Refused::OwnerFull { held: 64 })).await,
            (
                StatusCode::TOO_MANY_REQUESTS,
                "bob holds 64 MCP sessions, the most one user may ([mcp] max_sessions_per_user): close one (DELETE /mcp), or wait until one has been unused for ten minutes".to_string()
            )
        );
        assert_eq!(
            answer(refusal("bob", Refused::Full { held: 10_000 })).await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "the server holds 10000 MCP sessions, the most it may: try again later".to_string()
            )
        );
    }
}

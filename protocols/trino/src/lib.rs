//! The Trino HTTP protocol: `POST /v1/statement` starts a query, the client follows `nextUri` to
//! page through results fed from the engine's batch stream, `DELETE` on `nextUri` cancels.
//!
//! Each request carries its session in headers (user, catalog, schema, session properties, prepared
//! statements); the protocol turns them into a [`Session`] and calls the [`QueryService`]. It knows
//! nothing of the engine, and never looks at a credential: an authentication layer in front of it
//! puts the caller's [`Principal`] (and credential) into the request extensions.
//!
//! A query belongs to the user it runs as. Its page URIs carry a random slug besides the query id,
//! and a request from anyone else gets the same 404 as a query that does not exist; only an admin
//! (as the [`QueryService`] judges it: `is_admin`, the one rule) may cancel another user's query. The queries are a [`HandleMap`]: a
//! query nobody polls for `client_timeout` (while no page of it is being served) expires, which
//! cancels it and frees its slot; the gateway's reaper expires them through [`ProtocolHandles`].
//! A query its user cancelled or an admin killed answers its user's next poll with Trino's error
//! for that (`USER_CANCELED`, `ADMINISTRATIVELY_KILLED`), as a Trino client expects.
//!
//! One user holds at most `max_queries_per_user` queries whose last page is unread, so that one
//! user's abandoned queries cannot crowd out everyone else's; a query past the cap is refused
//! before it runs. The server keeps nothing of a client's prepared statements (the client sends
//! them back in headers), but a `PREPARE` answer carries its statement until it is read, so a
//! statement longer than the engine runs is refused at `PREPARE` as it would be at `EXECUTE`.

mod spooling;
mod statements;
pub mod types;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use futures::StreamExt;
use serde_json::{Value, json};
use sqe_sessions::{
    AtCapacity, BatchStream, Caps, Credential, ErrorCode, HandleMap, Principal, ProtocolHandles,
    QueryService, Session, SessionUpdate, SqeError, check_statement_length, random_handle,
};
use tokio::sync::mpsc;

use crate::spooling::{Encoding, Kept, Segment};
use crate::statements::{ClientStatement, parse_prepared_header, resolve};

/// How long one GET waits for rows before answering "still running".
const PAGE_WAIT: Duration = Duration::from_millis(500);
/// Rows per page at most.
const PAGE_ROWS: usize = 4096;
/// Rows per segment at most for a client of the spooling protocol (`spooling`).
const SEGMENT_ROWS: usize = 256 * 1024;
/// How long a segment gathers rows at most before it goes as it is (short of a full segment): a
/// query that yields rows slowly still gets its first ones to the client, in segments large
/// enough to be worth a request each.
const SEGMENT_WAIT: Duration = Duration::from_secs(1);
/// Segments one page carries at most.
const PAGE_SEGMENTS: usize = 4;
/// The bytes of rows (as Arrow holds them) one page (or segment) carries at most: wide rows make
/// short pages.
const PAGE_BYTES: usize = 8 << 20;
/// How refusals name the cap on one user's queries.
const QUERY_CAPS: Caps = Caps {
    entries: "Trino queries whose last page is unread",
    count_setting: "[server] max_trino_queries_per_user",
    bytes_setting: None,
    release: "read one to its end or cancel it, or wait until one has been unpolled for [server] client_timeout_secs",
};
/// Defaults for requests that name no catalog or schema, and who may act for whom.
#[derive(Debug, Clone)]
pub struct TrinoConfig {
    pub default_catalog: String,
    pub default_schema: String,
    /// Principals allowed to run as another user (`X-Trino-User` different from themselves).
    pub impersonators: Vec<String>,
    /// Served over TLS: the `nextUri`s handed out are `https://` (unless a proxy says otherwise in
    /// `X-Forwarded-Proto`).
    pub https: bool,
    /// A query whose client has not asked for a page for this long is cancelled (Trino's
    /// `query.client.timeout`).
    pub client_timeout: Duration,
    /// Queries whose last page is unread one user holds at most (`[server]
    /// max_trino_queries_per_user`); past it a new one is refused before it runs.
    pub max_queries_per_user: usize,
}

impl TrinoConfig {
    /// Requests without X-Trino-Catalog/Schema land in `catalog`.`default`; nobody may impersonate.
    pub fn new(catalog: &str) -> Self {
        Self {
            default_catalog: catalog.to_string(),
            default_schema: "default".into(),
            impersonators: Vec::new(),
            https: false,
            client_timeout: Duration::from_secs(300),
            max_queries_per_user: 64,
        }
    }
}

/// What the query task hands to the pages.
enum Event {
    Started {
        schema: Arc<Schema>,
        update_count: Option<u64>,
        session_update: Option<SessionUpdate>,
    },
    Batch(arrow::array::RecordBatch),
    /// Rows made ready for a client of the spooling protocol.
    Segment(Segment),
    Failed(SqeError),
    /// The last event of a query that ran to its end. A channel that closes without it means the
    /// query was cancelled.
    Finished,
}

struct Query {
    id: String,
    /// The random part of the page URIs, which only the client that started the query has.
    slug: String,
    /// The user the query runs as; nobody else can see or cancel it (but an admin may cancel).
    user: String,
    started: Instant,
    events: tokio::sync::Mutex<QueryPages>,
    /// Header changes this query reports (PREPARE/DEALLOCATE are answered without the engine).
    headers: Vec<(HeaderName, String)>,
    update_type: Option<String>,
    /// The spooling protocol's encoding the client asked for, if any SQE speaks.
    encoding: Option<Encoding>,
}

/// A segment the gateway keeps until its client fetched and acknowledged it (see `spooling`).
struct KeptSegment {
    /// The query it is part of.
    query: String,
    /// What a fetch of it presents in the segment key header.
    key: String,
    bytes: Bytes,
    /// Its bytes in the count of all kept segments' bytes, until it is dropped.
    _counted: Counted,
}

/// Bytes counted in a shared total for as long as this lives.
struct Counted {
    total: Arc<AtomicUsize>,
    bytes: usize,
}

impl Counted {
    /// Counts `bytes` in `total`, unless that would take it past `most`.
    fn within(total: &Arc<AtomicUsize>, bytes: usize, most: usize) -> Option<Self> {
        total
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(bytes).filter(|sum| *sum <= most)
            })
            .ok()?;
        Some(Self {
            total: total.clone(),
            bytes,
        })
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.total.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// How a query that a user or an admin ended answers its owner's next poll, as Trino's does: the
/// error its client expects instead of a missing query's 404.
struct Ended {
    slug: String,
    started: Instant,
    /// Trino's error name, code and message.
    name: &'static str,
    code: i64,
    message: &'static str,
}

/// Ended queries kept for their owner's next poll, at most; past it the oldest go.
const ENDED_KEPT: usize = 10_000;

/// A query as the map of queries holds it. Its task (the statement feeding the pages) ends when
/// the query leaves the map: read to its end, cancelled, or expired.
struct Running {
    query: Arc<Query>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct QueryPages {
    rx: mpsc::Receiver<Event>,
    token: u64,
    columns: Option<Value>,
    update_count: Option<u64>,
    session_update: Option<SessionUpdate>,
    rows: u64,
    /// The last page sent, repeated if the client asks for the same token again (a retry).
    last_page: Option<(u64, Bytes)>,
    /// The rows of a batch that did not fit in the last page.
    pending: Option<RecordBatch>,
}

pub struct TrinoService {
    service: Arc<dyn QueryService>,
    config: TrinoConfig,
    /// By query id, each owned by the user it runs as; a query whose page is being served is in
    /// use, and so never idle.
    queries: HandleMap<String, Running>,
    /// Queries cancelled or killed, by id, each owned by its user, for one more answer each.
    ended: HandleMap<String, Ended>,
    /// Spooled segments by handle, each owned by its query's user.
    segments: HandleMap<String, KeptSegment>,
    /// The bytes of all kept segments.
    segment_bytes: Arc<AtomicUsize>,
    sequence: AtomicU64,
}

impl TrinoService {
    pub fn new(service: Arc<dyn QueryService>, config: TrinoConfig) -> Arc<Self> {
        let queries = HandleMap::new()
            .idle_after(config.client_timeout)
            .at_most_per_owner(config.max_queries_per_user)
            .in_use_when(|r: &Running| r.query.events.try_lock().is_err());
        let ended = HandleMap::new()
            .idle_after(config.client_timeout)
            .at_most(ENDED_KEPT, AtCapacity::EvictLeastRecentlyUsed);
        let segments = HandleMap::new()
            .idle_after(config.client_timeout.max(spooling::SEGMENT_KEPT_FOR))
            .at_most(spooling::SPOOLED_SEGMENTS, AtCapacity::Refuse)
            .at_most_bytes_per_owner(
                |s: &KeptSegment| s.bytes.len(),
                spooling::SPOOLED_BYTES_PER_USER,
            );
        Arc::new(Self {
            service,
            config,
            queries,
            ended,
            segments,
            segment_bytes: Arc::default(),
            sequence: AtomicU64::new(0),
        })
    }

    /// Keeps `segment` of `query` for its client to fetch, and says where; None when the owner's
    /// or the server's cap on kept segments is met (it then rides inline).
    fn keep(&self, segment: &Segment, query: &Query, base: &str) -> Option<Kept> {
        let size = segment.bytes.len();
        let counted = Counted::within(&self.segment_bytes, size, spooling::SPOOLED_BYTES)?;
        let handle = random_handle();
        let kept = KeptSegment {
            query: query.id.clone(),
            key: random_handle(),
            bytes: segment.bytes.clone(),
            _counted: counted,
        };
        let key = kept.key.clone();
        self.segments
            .insert(handle.clone(), &query.user, kept)
            .ok()?;
        Some(Kept {
            uri: format!("{base}/v1/spooled/download/{handle}"),
            ack_uri: format!("{base}/v1/spooled/ack/{handle}"),
            key,
        })
    }

    /// Drops the kept segments of query `id` (cancelled: nobody will fetch them).
    fn drop_segments(&self, id: &str) {
        let handles = self
            .segments
            .list(|handle, _, s| (s.query == id).then(|| handle.clone()));
        for handle in handles.into_iter().flatten() {
            self.segments.remove_where(&handle, |_, _| true);
        }
    }

    /// Whether a request presenting segment `kept` with these credentials and headers may have
    /// it: its key must be the segment's, and credentials, if it carries any, must be those of
    /// the segment's owner (or of someone acting as them).
    fn may_fetch(
        &self,
        owner: &str,
        kept: &KeptSegment,
        principal: Option<&Principal>,
        headers: &HeaderMap,
    ) -> bool {
        let key = header(headers, spooling::SEGMENT_KEY).unwrap_or_default();
        let signed_in_as_owner = match principal {
            None => true,
            Some(p) => self
                .acting_user(Some(p.clone()), headers)
                .is_ok_and(|acting| acting.name == owner),
        };
        same_secret(key, &kept.key) && signed_in_as_owner
    }

    fn next_id(&self) -> String {
        let n = self.sequence.fetch_add(1, Ordering::Relaxed) + 1;
        let suffix: String = uuid::Uuid::new_v4()
            .simple()
            .to_string()
            .chars()
            .take(5)
            .collect();
        format!(
            "{}_{n:05}_{suffix}",
            chrono::Utc::now().format("%Y%m%d_%H%M%S")
        )
    }

    /// The query `id` with page slug `slug`, if it exists and `user` may see it; anyone else gets
    /// the same nothing as for a query that does not exist.
    /// Asking for it marks it used.
    fn query_of(&self, id: &str, slug: &str, user: &str) -> Option<Arc<Query>> {
        self.queries.get(id, user, |r| {
            (r.query.slug == slug).then(|| r.query.clone())
        })
    }

    /// Whether a request may end a query of a given user: that user may, and so may an admin (the
    /// signed-in principal, as the service judges it).
    fn may_end(&self, principal: Option<Principal>, headers: &HeaderMap) -> impl Fn(&str) -> bool {
        let admin = principal.as_ref().is_some_and(|p| self.service.is_admin(p));
        let acting = self.acting_user(principal, headers).ok().map(|u| u.name);
        move |user| admin || acting.as_deref() == Some(user)
    }

    /// Ends the query `id` if `may` allows it (given its owner), and keeps what its owner's next
    /// poll answers: Trino's `USER_CANCELED` when the owner ended it, `ADMINISTRATIVELY_KILLED`
    /// when an admin did. False when there was no such query to end.
    fn end(&self, id: &str, by: Option<&str>, may: impl FnOnce(&str, &Running) -> bool) -> bool {
        let mut owner = String::new();
        let Some(running) = self.queries.remove_where(id, |user, r| {
            owner = user.to_string();
            may(user, r)
        }) else {
            return false;
        };
        let (name, code, message) = if by == Some(owner.as_str()) {
            ("USER_CANCELED", 3, "Query was canceled")
        } else {
            (
                "ADMINISTRATIVELY_KILLED",
                38,
                "Query killed. No message provided.",
            )
        };
        let ended = Ended {
            slug: running.query.slug.clone(),
            started: running.query.started,
            name,
            code,
            message,
        };
        // Leaving the map ends the query's task; its kept segments go too.
        drop(running);
        self.drop_segments(id);
        // The id is new to this map unless it was ended before (which cannot happen twice).
        let _ = self.ended.insert(id.to_string(), &owner, ended);
        true
    }

    /// Who a request acts as: the authenticated principal, or the user it names in
    /// `X-Trino-User` when that principal may impersonate, or when nobody authenticated (a server
    /// that lets loopback callers in without credentials).
    fn acting_user(
        &self,
        principal: Option<Principal>,
        headers: &HeaderMap,
    ) -> Result<Principal, (StatusCode, String)> {
        let named = header(headers, "x-trino-user").or_else(|| header(headers, "x-presto-user"));
        match (principal, named) {
            (Some(p), Some(user))
                if p.name != user && !self.config.impersonators.contains(&p.name) =>
            {
                Err((
                    StatusCode::FORBIDDEN,
                    format!(
                        "Access Denied: user {} cannot impersonate user {user}",
                        p.name
                    ),
                ))
            }
            (Some(p), Some(user)) if p.name != user => Ok(Principal::new(user)),
            (Some(p), _) => Ok(p),
            (None, Some(user)) => Ok(Principal::new(user)),
            (None, None) => Err((StatusCode::BAD_REQUEST, "X-Trino-User must be set".into())),
        }
    }

    /// The ids and users of running queries (for a registry view and tests).
    pub fn running(&self) -> Vec<(String, String)> {
        self.queries
            .list(|id, user, _| (id.clone(), user.to_string()))
    }
}

impl ProtocolHandles for TrinoService {
    fn protocol(&self) -> &'static str {
        "trino"
    }

    /// Cancels and forgets the queries whose client has not asked for a page within the client
    /// timeout, which frees their slots. A page being served is not idle.
    fn expire_idle(&self) -> usize {
        self.ended.expire_idle();
        self.segments.expire_idle() + self.queries.expire_idle()
    }

    fn open_work_name(&self) -> &'static str {
        "trino_queries"
    }

    /// Queries whose client has not yet read all their rows: their last page, or a segment
    /// spooled for them (a finished query's pages and segments may still be waiting).
    fn open_work(&self) -> usize {
        let mut queries = self.queries.list(|id, _, _| id.clone());
        queries.extend(self.segments.list(|_, _, s| s.query.clone()));
        queries.sort_unstable();
        queries.dedup();
        queries.len()
    }
}

/// The largest statement body accepted; a larger one gets 413 before it is read whole. (The
/// engine's own limit on statement text is lower.)
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// The Trino routes, to be mounted in the gateway's HTTP server.
pub fn router(trino: Arc<TrinoService>) -> Router {
    Router::new()
        .route("/v1/statement", post(post_statement))
        .route(
            "/v1/statement/executing/{id}/{slug}/{token}",
            get(get_page).head(heartbeat).delete(cancel),
        )
        .route(
            "/v1/statement/queued/{id}/{slug}/{token}",
            get(get_page).head(heartbeat).delete(cancel),
        )
        .route("/v1/query/{id}", axum::routing::delete(kill))
        .route("/v1/info", get(info))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(trino)
}

/// The routes of spooled segments, to be mounted where a request without credentials gets in
/// (clients fetch segments without them; a segment's handle and key are the proof), but one with
/// credentials is authenticated: its principal must then be the segment's owner.
pub fn segment_router(trino: Arc<TrinoService>) -> Router {
    Router::new()
        .route("/v1/spooled/download/{handle}", get(download_segment))
        .route(
            "/v1/spooled/ack/{handle}",
            get(acknowledge_segment).delete(acknowledge_segment),
        )
        .with_state(trino)
}

/// Whether two secrets are equal, in a time that does not depend on where they differ.
fn same_secret(presented: &str, kept: &str) -> bool {
    presented.len() == kept.len()
        && presented
            .bytes()
            .zip(kept.bytes())
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}

fn segment_not_found() -> Response {
    reject(StatusCode::NOT_FOUND, "segment not found")
}

/// A spooled segment's bytes, for the request that may have it; anyone else gets the answer of a
/// segment that does not exist.
async fn download_segment(
    State(trino): State<Arc<TrinoService>>,
    Path(handle): Path<String>,
    principal: Option<Extension<Principal>>,
    headers: HeaderMap,
) -> Response {
    let principal = principal.map(|Extension(p)| p);
    let bytes = trino.segments.get_where(&handle, |owner, kept| {
        trino
            .may_fetch(owner, kept, principal.as_ref(), &headers)
            .then(|| kept.bytes.clone())
    });
    match bytes {
        Some(bytes) => (
            [(axum::http::header::CONTENT_TYPE, "application/octet-stream")],
            bytes,
        )
            .into_response(),
        None => segment_not_found(),
    }
}

/// The client is done with a segment: it goes. Only a request that may fetch it may.
async fn acknowledge_segment(
    State(trino): State<Arc<TrinoService>>,
    Path(handle): Path<String>,
    principal: Option<Extension<Principal>>,
    headers: HeaderMap,
) -> Response {
    let principal = principal.map(|Extension(p)| p);
    let removed = trino.segments.remove_where(&handle, |owner, kept| {
        trino.may_fetch(owner, kept, principal.as_ref(), &headers)
    });
    match removed {
        Some(_) => StatusCode::OK.into_response(),
        None => segment_not_found(),
    }
}

async fn info() -> Json<Value> {
    Json(json!({
        "nodeVersion": {"version": format!("sqe-{}", env!("CARGO_PKG_VERSION"))},
        "environment": "sqe",
        "coordinator": true,
        "starting": false,
        "uptime": "0.00s",
    }))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// A protocol-level failure before any query exists: plain text with an HTTP status.
fn reject(status: StatusCode, message: impl Into<String>) -> Response {
    (status, message.into()).into_response()
}

fn base_url(headers: &HeaderMap, config: &TrinoConfig) -> String {
    let host = header(headers, "host").unwrap_or("127.0.0.1");
    let own = if config.https { "https" } else { "http" };
    let scheme = header(headers, "x-forwarded-proto").unwrap_or(own);
    format!("{scheme}://{host}")
}

/// Trino's error triple for each code. Exhaustive: a new code must be placed here.
fn trino_error(e: &SqeError) -> (&'static str, i64, &'static str) {
    match e.code() {
        ErrorCode::InvalidInput if e.message().starts_with("syntax error") => {
            ("SYNTAX_ERROR", 1, "USER_ERROR")
        }
        ErrorCode::InvalidInput => ("GENERIC_USER_ERROR", 0, "USER_ERROR"),
        ErrorCode::NotFound => ("NOT_FOUND", 5, "USER_ERROR"),
        ErrorCode::AlreadyExists => ("ALREADY_EXISTS", 12, "USER_ERROR"),
        ErrorCode::Unsupported => ("NOT_SUPPORTED", 13, "USER_ERROR"),
        ErrorCode::Conflict => ("TRANSACTION_CONFLICT", 17, "USER_ERROR"),
        ErrorCode::PermissionDenied => ("PERMISSION_DENIED", 4, "USER_ERROR"),
        ErrorCode::Unauthenticated => ("PERMISSION_DENIED", 4, "USER_ERROR"),
        ErrorCode::Cancelled => ("USER_CANCELED", 3, "USER_ERROR"),
        ErrorCode::ResourceExhausted => (
            "GENERIC_INSUFFICIENT_RESOURCES",
            131_072,
            "INSUFFICIENT_RESOURCES",
        ),
        ErrorCode::External => ("GENERIC_EXTERNAL_ERROR", 16_777_216, "EXTERNAL"),
        ErrorCode::Internal => ("GENERIC_INTERNAL_ERROR", 65_536, "INTERNAL_ERROR"),
    }
}

fn stats(state: &str, started: Instant, rows: u64) -> Value {
    let elapsed = started.elapsed().as_millis() as u64;
    json!({
        "state": state,
        "queued": state == "QUEUED",
        "scheduled": state != "QUEUED",
        "nodes": 1,
        "totalSplits": 0, "queuedSplits": 0, "runningSplits": 0, "completedSplits": 0,
        "cpuTimeMillis": elapsed, "wallTimeMillis": elapsed, "queuedTimeMillis": 0, "elapsedTimeMillis": elapsed,
        "processedRows": rows, "processedBytes": 0, "physicalInputBytes": 0, "peakMemoryBytes": 0, "spilledBytes": 0,
    })
}

fn error_body(id: &str, base: &str, started: Instant, e: &SqeError) -> Value {
    let (name, code, kind) = trino_error(e);
    failed_body(id, base, started, (name, code, kind), e.message())
}

/// A failed query's answer: Trino's error triple (name, code, type) and message.
fn failed_body(
    id: &str,
    base: &str,
    started: Instant,
    (name, code, kind): (&str, i64, &str),
    message: &str,
) -> Value {
    json!({
        "id": id,
        "infoUri": format!("{base}/ui/query.html?{id}"),
        "stats": stats("FAILED", started, 0),
        "error": {
            "message": message,
            "errorCode": code,
            "errorName": name,
            "errorType": kind,
            "failureInfo": {"type": name, "message": message, "suppressed": [], "stack": []},
        },
        "warnings": [],
    })
}

/// The session a request describes.
fn session_from(
    headers: &HeaderMap,
    config: &TrinoConfig,
    principal: Principal,
    credential: Option<Credential>,
) -> Session {
    let catalog = header(headers, "x-trino-catalog")
        .unwrap_or(&config.default_catalog)
        .to_string();
    let schema = header(headers, "x-trino-schema")
        .unwrap_or(&config.default_schema)
        .to_string();
    let mut session = Session::new(principal, catalog, schema);
    session.credential = credential;
    session.protocol = "trino";
    if let Some(tz) = header(headers, "x-trino-time-zone") {
        session.time_zone = tz.to_string();
    }
    for value in headers
        .get_all("x-trino-session")
        .iter()
        .filter_map(|v| v.to_str().ok())
    {
        for pair in value.split(',') {
            if let Some((k, v)) = pair.split_once('=') {
                let v = urlencoding::decode(v.trim())
                    .map(|s| s.into_owned())
                    .unwrap_or_default();
                session.properties.insert(k.trim().to_string(), v);
            }
        }
    }
    if let Some(source) = header(headers, "x-trino-source") {
        session.source = Some(source.to_string());
    }
    if let Some(tags) = header(headers, "x-trino-client-tags") {
        session.client_tags = tags
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect();
    }
    session
}

/// Trino's update type for a statement, from its first words.
fn update_type(sql: &str) -> Option<String> {
    let words: Vec<String> = sql
        .split_whitespace()
        .take(2)
        .map(|w| w.to_ascii_uppercase())
        .collect();
    let first = words.first()?.as_str();
    Some(match first {
        "INSERT" => "INSERT".into(),
        "DELETE" => "DELETE".into(),
        "UPDATE" => "UPDATE".into(),
        "MERGE" => "MERGE".into(),
        "TRUNCATE" => "TRUNCATE TABLE".into(),
        "CREATE" | "DROP" | "ALTER" => {
            format!("{first} {}", words.get(1).map(String::as_str).unwrap_or(""))
                .trim()
                .to_string()
        }
        "USE" => "USE".into(),
        _ => return None,
    })
}

/// A statement the protocol answers itself (PREPARE, DEALLOCATE): it succeeds with no rows.
fn answered_here(tx: mpsc::Sender<Event>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let started = Event::Started {
            schema: Arc::new(Schema::empty()),
            update_count: None,
            session_update: None,
        };
        if tx.send(started).await.is_ok() {
            let _ = tx.send(Event::Finished).await;
        }
    })
}

async fn post_statement(
    State(trino): State<Arc<TrinoService>>,
    principal: Option<Extension<Principal>>,
    credential: Option<Extension<Credential>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let signed_in = principal.as_ref().map(|Extension(p)| p.name.clone());
    let principal = match trino.acting_user(principal.map(|Extension(p)| p), &headers) {
        Ok(p) => p,
        Err((status, message)) => return reject(status, message),
    };
    // A statement run for someone else (impersonation) carries no token: the signed-in caller's
    // own would reach catalogs with its rights, not the user's.
    let credential = credential.filter(|_| signed_in.as_deref() == Some(principal.name.as_str()));
    let sql = body.trim();
    if sql.is_empty() {
        return reject(StatusCode::BAD_REQUEST, "SQL statement is empty");
    }
    let id = trino.next_id();
    let mut session = session_from(
        &headers,
        &trino.config,
        principal,
        credential.map(|Extension(c)| c),
    );
    session.query_id = Some(id.clone());
    let user = session.principal.name.clone();
    let base = base_url(&headers, &trino.config);
    let started = Instant::now();
    let prepared_values: Vec<&str> = headers
        .get_all("x-trino-prepared-statement")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let prepared = parse_prepared_header(&prepared_values);
    let encoding = Encoding::chosen(header(&headers, "x-trino-query-data-encoding"));

    let (tx, rx) = mpsc::channel(2);
    let (admit, admitted) = tokio::sync::oneshot::channel::<()>();
    let mut extra_headers = Vec::new();
    let mut update = update_type(sql);
    let task = match resolve(sql, &prepared) {
        Err(message) => {
            let e = SqeError::invalid(message);
            return (StatusCode::OK, Json(error_body(&id, &base, started, &e))).into_response();
        }
        Ok(ClientStatement::Prepare { name, sql }) => {
            // What could never run is not kept for the client to read back.
            if let Err(e) = check_statement_length(&sql) {
                return (StatusCode::OK, Json(error_body(&id, &base, started, &e))).into_response();
            }
            extra_headers.push((
                HeaderName::from_static("x-trino-added-prepare"),
                format!("{name}={}", urlencoding::encode(&sql)),
            ));
            update = Some("PREPARE".into());
            answered_here(tx)
        }
        Ok(ClientStatement::Deallocate(name)) => {
            extra_headers.push((HeaderName::from_static("x-trino-deallocated-prepare"), name));
            update = Some("DEALLOCATE".into());
            answered_here(tx)
        }
        Ok(ClientStatement::Run(sql)) => {
            let service = trino.service.clone();
            tokio::spawn(async move {
                // Nothing runs before the query is kept: a query past the user's cap never starts.
                if admitted.await.is_err() {
                    return;
                }
                let mut result = match service.execute(&session, &sql).await {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = tx.send(Event::Failed(e)).await;
                        return;
                    }
                };
                let started = Event::Started {
                    schema: result.schema.clone(),
                    update_count: result.update_count,
                    session_update: result.session_update.take(),
                };
                if tx.send(started).await.is_err() {
                    return;
                }
                if let Some(encoding) = encoding {
                    return spool(result.batches, encoding, &tx).await;
                }
                while let Some(batch) = result.batches.next().await {
                    let event = match batch {
                        Ok(b) => Event::Batch(b),
                        Err(e) => Event::Failed(e),
                    };
                    if tx.send(event).await.is_err() {
                        return;
                    }
                }
                let _ = tx.send(Event::Finished).await;
            })
        }
    };
    let slug = random_handle();
    let query = Arc::new(Query {
        id: id.clone(),
        slug: slug.clone(),
        user,
        started,
        events: tokio::sync::Mutex::new(QueryPages {
            rx,
            token: 0,
            columns: None,
            update_count: None,
            session_update: None,
            rows: 0,
            last_page: None,
            pending: None,
        }),
        headers: extra_headers,
        update_type: update,
        encoding,
    });
    let owner = query.user.clone();
    let running = Running { query, task };
    // A refused query is dropped, which ends its task before it has run anything.
    if let Err(refused) = trino.queries.insert(id.clone(), &owner, running) {
        let e = refused.error(&owner, &QUERY_CAPS);
        return (StatusCode::OK, Json(error_body(&id, &base, started, &e))).into_response();
    }
    // The task may have ended already (a statement answered here); nothing then waits for this.
    let _ = admit.send(());
    let body = json!({
        "id": id,
        "infoUri": format!("{base}/ui/query.html?{id}"),
        "nextUri": format!("{base}/v1/statement/queued/{id}/{slug}/1"),
        "stats": stats("QUEUED", started, 0),
        "warnings": [],
    });
    Json(body).into_response()
}

/// Feeds `tx` a result's rows as segments in `encoding`, each made as soon as the channel has
/// room for it: encoding and compressing the next segments overlap with the client's decoding of
/// the last. A segment holds up to `SEGMENT_ROWS` rows and `PAGE_BYTES` of Arrow data, and goes
/// sooner once its first row has waited `SEGMENT_WAIT`.
async fn spool(mut batches: BatchStream, encoding: Encoding, tx: &mpsc::Sender<Event>) {
    let mut rows = types::JsonRows::default();
    let mut bytes = 0usize;
    let mut offset = 0u64;
    // When the segment gathering now got its first row.
    let mut since = tokio::time::Instant::now();
    // Sends the rows gathered as a segment; false when nobody reads the query any more.
    let flush = |rows: &mut types::JsonRows, bytes: &mut usize, offset: &mut u64| {
        let gathered = std::mem::take(rows);
        let first = *offset;
        *offset += gathered.len() as u64;
        *bytes = 0;
        async move {
            if gathered.is_empty() {
                return true;
            }
            match tokio::task::spawn_blocking(move || encoding.segment(gathered, first)).await {
                Ok(segment) => tx.send(Event::Segment(segment)).await.is_ok(),
                Err(_) => false,
            }
        }
    };
    loop {
        let next = match rows.is_empty() {
            true => Some(batches.next().await),
            false => tokio::time::timeout_at(since + SEGMENT_WAIT, batches.next())
                .await
                .ok(),
        };
        let mut batch = match next {
            // The segment has gathered rows long enough: the client gets those there are.
            None => {
                if !flush(&mut rows, &mut bytes, &mut offset).await {
                    return;
                }
                continue;
            }
            Some(None) => {
                if flush(&mut rows, &mut bytes, &mut offset).await {
                    let _ = tx.send(Event::Finished).await;
                }
                return;
            }
            // A failed query's page carries the error, not the rows before it.
            Some(Some(Err(e))) => {
                let _ = tx.send(Event::Failed(e)).await;
                return;
            }
            Some(Some(Ok(batch))) => batch,
        };
        while batch.num_rows() > 0 {
            if rows.is_empty() {
                since = tokio::time::Instant::now();
            }
            let room = PAGE_BYTES.saturating_sub(bytes);
            let (take, size) = sqe_sessions::rows_within(&batch, room, SEGMENT_ROWS - rows.len());
            rows.push_batch(&batch.slice(0, take));
            bytes += size;
            batch = batch.slice(take, batch.num_rows() - take);
            let full = rows.len() >= SEGMENT_ROWS || bytes >= PAGE_BYTES || batch.num_rows() > 0;
            if full && !flush(&mut rows, &mut bytes, &mut offset).await {
                return;
            }
        }
    }
}

fn not_found(id: &str) -> Response {
    reject(StatusCode::NOT_FOUND, format!("query {id} not found"))
}

async fn get_page(
    State(trino): State<Arc<TrinoService>>,
    Path((id, slug, token)): Path<(String, String, u64)>,
    principal: Option<Extension<Principal>>,
    headers: HeaderMap,
) -> Response {
    let Ok(user) = trino.acting_user(principal.map(|Extension(p)| p), &headers) else {
        return not_found(&id);
    };
    let Some(query) = trino.query_of(&id, &slug, &user.name) else {
        // A query its owner or an admin ended answers its owner with why, as Trino's does.
        let base = base_url(&headers, &trino.config);
        let ended = trino.ended.get(&id, &user.name, |e| {
            (e.slug == slug).then(|| {
                failed_body(
                    &id,
                    &base,
                    e.started,
                    (e.name, e.code, "USER_ERROR"),
                    e.message,
                )
            })
        });
        return match ended {
            Some(body) => Json(body).into_response(),
            None => not_found(&id),
        };
    };
    let base = base_url(&headers, &trino.config);
    let mut pages = query.events.lock().await;
    if let Some((t, page)) = &pages.last_page
        && *t == token
    {
        return respond(&query, &pages, page.clone());
    }
    if token != pages.token + 1 {
        return reject(
            StatusCode::GONE,
            format!("token {token} of query {id} is not the next page"),
        );
    }
    pages.token = token;

    let mut data = types::JsonRows::default();
    let mut segments = Vec::new();
    let mut failure = None;
    let mut finished = false;
    let mut deadline = tokio::time::Instant::now() + PAGE_WAIT;
    let mut bytes = 0usize;
    let first_row = pages.rows;
    while data.len() < PAGE_ROWS && bytes < PAGE_BYTES && segments.len() < PAGE_SEGMENTS {
        let event = if let Some(rest) = pages.pending.take() {
            Event::Batch(rest)
        } else {
            match tokio::time::timeout_at(deadline, pages.rx.recv()).await {
                Err(_) => break,
                Ok(None) => {
                    failure = Some(SqeError::new(ErrorCode::Cancelled, "Query was canceled"));
                    break;
                }
                Ok(Some(e)) => e,
            }
        };
        match event {
            Event::Started {
                schema,
                update_count,
                session_update,
            } => {
                pages.columns = Some(if schema.fields().is_empty() {
                    json!([{"name": "result", "type": "boolean", "typeSignature": {"rawType": "boolean", "arguments": []}}])
                } else {
                    types::columns(&schema)
                });
                if schema.fields().is_empty() {
                    data.push_value(&json!([true]));
                }
                pages.update_count = update_count;
                pages.session_update = session_update;
            }
            Event::Batch(batch) => {
                let (take, size) =
                    sqe_sessions::rows_within(&batch, PAGE_BYTES - bytes, PAGE_ROWS - data.len());
                if take < batch.num_rows() {
                    pages.pending = Some(batch.slice(take, batch.num_rows() - take));
                }
                pages.rows += take as u64;
                data.push_batch(&batch.slice(0, take));
                bytes += size;
                if pages.pending.is_some() {
                    break;
                }
                if !data.is_empty() {
                    // Send what we have rather than wait for a full page.
                    if tokio::time::Instant::now() + Duration::from_millis(50) > deadline {
                        break;
                    }
                }
            }
            Event::Segment(segment) => {
                pages.rows += segment.rows;
                segments.push(segment);
                // More segments go in this page only if they are ready now.
                deadline = tokio::time::Instant::now();
            }
            Event::Failed(e) => {
                failure = Some(e);
                break;
            }
            Event::Finished => {
                finished = true;
                break;
            }
        }
    }

    let page = if let Some(e) = failure {
        // A failed query's page carries the error, not the rows before it.
        data = types::JsonRows::default();
        error_body(&query.id, &base, query.started, &e)
    } else {
        let state = if finished { "FINISHED" } else { "RUNNING" };
        let mut body = json!({
            "id": query.id,
            "infoUri": format!("{base}/ui/query.html?{}", query.id),
            "stats": stats(state, query.started, pages.rows),
            "warnings": [],
        });
        if let Some(columns) = &pages.columns {
            body["columns"] = columns.clone();
        }
        if let Some(encoding) = query.encoding {
            // A statement's own row (`true` for one that returns none) joins the segments.
            if !data.is_empty() {
                segments.push(encoding.segment(std::mem::take(&mut data), first_row));
            }
            if !segments.is_empty() {
                body["data"] = encoding.data(segments, |s| trino.keep(s, &query, &base));
            }
        }
        if !finished {
            body["nextUri"] = json!(format!(
                "{base}/v1/statement/executing/{}/{}/{}",
                query.id,
                query.slug,
                token + 1
            ));
        }
        if let Some(t) = &query.update_type {
            body["updateType"] = json!(t);
        }
        if let Some(n) = pages.update_count {
            body["updateCount"] = json!(n);
        }
        body
    };
    let done = page.get("nextUri").is_none();
    // Plain pages' rows go into the page's text as they were written.
    let page = Bytes::from(with_rows(&page, data));
    pages.last_page = Some((token, page.clone()));
    let response = respond(&query, &pages, page);
    if done {
        drop(pages);
        trino.queries.remove(&query.id, &query.user);
    }
    response
}

/// `page`'s JSON with `rows` as its `data`, if there are any.
fn with_rows(page: &Value, rows: types::JsonRows) -> Vec<u8> {
    let mut text = serde_json::to_vec(page).unwrap_or_else(|_| b"{}".to_vec());
    if !rows.is_empty() && text.last() == Some(&b'}') {
        text.pop();
        if text.len() > 1 {
            text.push(b',');
        }
        text.extend_from_slice(br#""data":"#);
        text.extend_from_slice(&rows.into_array());
        text.push(b'}');
    }
    text
}

fn respond(query: &Query, pages: &QueryPages, page: Bytes) -> Response {
    let mut response = (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        page,
    )
        .into_response();
    let headers = response.headers_mut();
    let mut set = |name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), v);
        }
    };
    if let Some(update) = &pages.session_update {
        if let Some(c) = &update.catalog {
            set("x-trino-set-catalog", c);
        }
        if let Some(s) = &update.schema {
            set("x-trino-set-schema", s);
        }
        for (name, value) in &update.set_properties {
            let pair = format!("{name}={}", urlencoding::encode(value));
            if let Ok(v) = HeaderValue::from_str(&pair) {
                headers.append(HeaderName::from_static("x-trino-set-session"), v);
            }
        }
        for name in &update.reset_properties {
            if let Ok(v) = HeaderValue::from_str(name) {
                headers.append(HeaderName::from_static("x-trino-clear-session"), v);
            }
        }
    }
    for (name, value) in &query.headers {
        if let Ok(v) = HeaderValue::from_str(value) {
            headers.insert(name.clone(), v);
        }
    }
    response
}

/// A client's heartbeat (trino-python sends one on `nextUri` every 30 s while it downloads a
/// spooled segment): the query counts as polled, and no page is taken. Someone else's query, or
/// one that does not exist, answers 404.
async fn heartbeat(
    State(trino): State<Arc<TrinoService>>,
    Path((id, slug, _token)): Path<(String, String, u64)>,
    principal: Option<Extension<Principal>>,
    headers: HeaderMap,
) -> StatusCode {
    let user = trino.acting_user(principal.map(|Extension(p)| p), &headers);
    match user.ok().and_then(|u| trino.query_of(&id, &slug, &u.name)) {
        Some(_) => StatusCode::OK,
        None => StatusCode::NOT_FOUND,
    }
}

/// Cancels a query: its own user may, and so may an admin. Idempotent: a query that already ended
/// (clients cancel on close) is simply gone. Someone else's query gets the answer of a missing one,
/// and goes on.
async fn cancel(
    State(trino): State<Arc<TrinoService>>,
    Path((id, slug, _token)): Path<(String, String, u64)>,
    principal: Option<Extension<Principal>>,
    headers: HeaderMap,
) -> Response {
    let by = trino
        .acting_user(principal.clone().map(|Extension(p)| p), &headers)
        .ok()
        .map(|p| p.name);
    let may_end = trino.may_end(principal.map(|Extension(p)| p), &headers);
    trino.end(&id, by.as_deref(), |user, r| {
        r.query.slug == slug && may_end(user)
    });
    StatusCode::NO_CONTENT.into_response()
}

/// Trino's `DELETE /v1/query/{id}`: ends a query by its id alone, for an admin (who sees the id in
/// `system.runtime.queries`) or the query's own user. Anyone else gets the 404 of a missing query.
async fn kill(
    State(trino): State<Arc<TrinoService>>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
    headers: HeaderMap,
) -> Response {
    let by = trino
        .acting_user(principal.clone().map(|Extension(p)| p), &headers)
        .ok()
        .map(|p| p.name);
    let may_end = trino.may_end(principal.map(|Extension(p)| p), &headers);
    match trino.end(&id, by.as_deref(), |user, _| may_end(user)) {
        true => StatusCode::NO_CONTENT.into_response(),
        false => not_found(&id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_types_follow_trino() {
        assert_eq!(
            update_type("insert into t values (1)").as_deref(),
            Some("INSERT")
        );
        assert_eq!(
            update_type("CREATE TABLE t (a int)").as_deref(),
            Some("CREATE TABLE")
        );
        assert_eq!(update_type("SELECT 1"), None);
    }

    #[test]
    fn syntax_errors_are_trino_syntax_errors() {
        let e = SqeError::invalid("syntax error: Expected: an expression");
        assert_eq!(trino_error(&e), ("SYNTAX_ERROR", 1, "USER_ERROR"));
    }
}

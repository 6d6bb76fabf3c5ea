//! Admission and the query registry, in front of every statement a front end runs.
//!
//! At most `max_concurrent_queries` statements hold a slot at once; up to `max_queued` more wait, each
//! at most `queue_timeout`, and past that a caller gets a "server busy" error at once. A slot is held
//! until the result stream ends or is dropped (which cancels the query). Every statement is recorded,
//! with its user, SQL, state, times and rows, and the registry is readable as
//! `system.runtime.queries`: each user reads their own queries in full, an admin reads everyone's,
//! and of other users' queries the rest see only that they exist (state and times, no user, text
//! or error).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use datafusion::arrow::array::RecordBatch;
use futures::Stream;
use sqe_sessions::{BatchStream, ErrorCode, Session, SqeError, SqeResult};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

use crate::guard::catching_panics;

/// Finished queries kept for `system.runtime.queries`.
const KEEP_FINISHED: usize = 1000;
/// The longest statement text the registry keeps (longer ones are cut, with `…`).
const KEEP_SQL: usize = 64 * 1024;

/// At most `limit` bytes of `text`, cut on a character boundary.
fn capped(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

#[derive(Debug, Clone)]
pub struct AdmissionConfig {
    pub max_concurrent_queries: usize,
    pub max_queued: usize,
    pub queue_timeout: Duration,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self {
            max_concurrent_queries: 32,
            max_queued: 256,
            queue_timeout: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryState {
    Queued,
    Running,
    Finished,
    Failed,
    Cancelled,
}

impl QueryState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            QueryState::Queued => "QUEUED",
            QueryState::Running => "RUNNING",
            QueryState::Finished => "FINISHED",
            QueryState::Failed => "FAILED",
            QueryState::Cancelled => "CANCELLED",
        }
    }
}

#[derive(Debug, Clone)]
pub struct QueryInfo {
    /// The registry's own number for the statement.
    pub id: u64,
    /// The id clients see: the protocol's (Trino's query id), else the number.
    pub query_id: String,
    pub user: String,
    pub sql: String,
    pub state: QueryState,
    pub created_ms: i64,
    pub ended_ms: Option<i64>,
    pub rows: u64,
    pub error: Option<String>,
    /// What the client said it is (Trino's `X-Trino-Source`).
    pub source: Option<String>,
    /// The authorization decisions taken for it (governance/): what was allowed or
    /// denied, which row filters and column masks applied.
    pub decisions: Vec<String>,
}

/// Decisions kept per statement; past this, one last line says how many were left out.
const KEEP_DECISIONS: usize = 64;

tokio::task_local! {
    /// The registry row of the statement the current task plans.
    static STATEMENT: (Arc<QueryRegistry>, u64);
}

/// Records an authorization decision on the statement being planned (and in its log span).
pub(crate) fn record_decision(decision: impl Into<String>) {
    let decision = decision.into();
    tracing::info!(decision = %decision, "authorization");
    let _ = STATEMENT.try_with(|(registry, id)| {
        registry.update(*id, |q| {
            if q.decisions.len() < KEEP_DECISIONS {
                q.decisions.push(decision);
            } else if q.decisions.len() == KEEP_DECISIONS {
                q.decisions.push("… (more decisions left out)".to_string());
            }
        })
    });
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[derive(Debug, Default)]
pub struct QueryRegistry {
    queries: Mutex<VecDeque<QueryInfo>>,
    next_id: AtomicUsize,
}

impl QueryRegistry {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<QueryInfo>> {
        self.queries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn register(&self, session: &Session, sql: &str) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) as u64 + 1;
        self.lock().push_back(QueryInfo {
            id,
            query_id: session.query_id.clone().unwrap_or_else(|| id.to_string()),
            user: session.principal.name.clone(),
            sql: capped(sql, KEEP_SQL),
            state: QueryState::Queued,
            created_ms: now_ms(),
            ended_ms: None,
            rows: 0,
            error: None,
            source: session.source.clone(),
            decisions: Vec::new(),
        });
        id
    }

    fn update(&self, id: u64, f: impl FnOnce(&mut QueryInfo)) {
        if let Some(q) = self.lock().iter_mut().find(|q| q.id == id) {
            f(q);
        }
    }

    /// Records a query's end; past `KEEP_FINISHED` finished queries, the oldest are forgotten.
    fn end(&self, id: u64, state: QueryState, rows: u64, error: Option<String>) {
        let mut queries = self.lock();
        if let Some(q) = queries.iter_mut().find(|q| q.id == id) {
            q.state = state;
            q.rows = rows;
            q.error = error;
            q.ended_ms = Some(now_ms());
        }
        let mut finished = queries.iter().filter(|q| q.ended_ms.is_some()).count();
        while finished > KEEP_FINISHED {
            match queries.iter().position(|q| q.ended_ms.is_some()) {
                Some(pos) => {
                    queries.remove(pos);
                    finished -= 1;
                }
                None => break,
            }
        }
    }

    /// How many statements are queued or running.
    pub fn active(&self) -> usize {
        self.lock().iter().filter(|q| q.ended_ms.is_none()).count()
    }

    /// The queries known now, oldest first.
    pub fn snapshot(&self) -> Vec<QueryInfo> {
        self.lock().iter().cloned().collect()
    }
}

/// Slots for running statements.
#[derive(Debug)]
pub struct Admission {
    config: AdmissionConfig,
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
}

impl Admission {
    pub fn new(config: AdmissionConfig) -> Self {
        let slots = Arc::new(Semaphore::new(config.max_concurrent_queries.max(1)));
        Self {
            config,
            slots,
            waiting: AtomicUsize::new(0),
        }
    }

    async fn admit(&self) -> SqeResult<OwnedSemaphorePermit> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(permit);
        }
        let busy = |what: String| {
            SqeError::new(
                ErrorCode::ResourceExhausted,
                format!("server busy: {what}; try again later"),
            )
        };
        let ahead = self.waiting.fetch_add(1, Ordering::SeqCst);
        // Its place in the queue is given back however the wait ends (a caller who goes away too).
        let _waiting = Waiting(&self.waiting);
        if ahead >= self.config.max_queued {
            return Err(busy(format!(
                "{} queries are running and the queue of {} is full",
                self.config.max_concurrent_queries, self.config.max_queued
            )));
        }
        let waited = tokio::time::timeout(
            self.config.queue_timeout,
            self.slots.clone().acquire_owned(),
        )
        .await;
        match waited {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(SqeError::internal("admission closed")),
            Err(_) => Err(busy(format!(
                "no query slot freed up within {}s",
                self.config.queue_timeout.as_secs()
            ))),
        }
    }
}

/// A statement counted as waiting for a slot, until dropped.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A statement between its registration and its result stream: if the caller goes away meanwhile
/// (a cancelled request, an abandoned query ended by the reaper), it is recorded as cancelled,
/// not left queued or running.
struct Unfinished {
    registry: Arc<QueryRegistry>,
    id: u64,
    span: tracing::Span,
    ended: bool,
}

impl Unfinished {
    fn end(&mut self, state: QueryState, error: Option<&str>) {
        self.ended = true;
        self.span.in_scope(|| {
            tracing::info!(state = state.as_str(), error, "statement ended");
        });
        self.registry
            .end(self.id, state, 0, error.map(str::to_string));
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if !self.ended {
            self.end(QueryState::Cancelled, None);
        }
    }
}

/// Admits a statement and records it; `run` produces its result stream.
pub async fn admitted<F, Fut>(
    admission: &Admission,
    registry: &Arc<QueryRegistry>,
    session: &Session,
    sql: &str,
    run: F,
) -> SqeResult<sqe_sessions::QueryResult>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = SqeResult<sqe_sessions::QueryResult>>,
{
    let id = registry.register(session, sql);
    let query_id = session.query_id.clone().unwrap_or_else(|| id.to_string());
    // One span per statement, for every line logged while it plans and runs; never the credential.
    let span = tracing::info_span!(
        "statement",
        query_id = %query_id,
        principal = %session.principal.name,
        protocol = session.protocol,
        catalog = %session.catalog,
    );
    let mut unfinished = Unfinished {
        registry: registry.clone(),
        id,
        span: span.clone(),
        ended: false,
    };
    let permit = match admission.admit().instrument(span.clone()).await {
        Ok(p) => p,
        Err(e) => {
            unfinished.end(QueryState::Failed, Some(e.message()));
            return Err(e);
        }
    };
    registry.update(id, |q| q.state = QueryState::Running);
    let started = std::time::Instant::now();
    match STATEMENT
        .scope((registry.clone(), id), run())
        .instrument(span.clone())
        .await
    {
        Ok(mut result) => {
            // From here the result stream records how the statement ends.
            unfinished.ended = true;
            // A panic while computing rows ends the stream with an error, recorded as a failure.
            let inner = catching_panics(std::mem::replace(
                &mut result.batches,
                Box::pin(futures::stream::empty()),
            ));
            let tracked = Tracked {
                inner,
                rows: 0,
                outcome: None,
                registry: registry.clone(),
                id,
                span,
                started,
                _permit: permit,
            };
            result.batches = Box::pin(tracked);
            Ok(result)
        }
        Err(e) => {
            let state = if e.code() == ErrorCode::Cancelled {
                QueryState::Cancelled
            } else {
                QueryState::Failed
            };
            unfinished.end(state, Some(e.message()));
            Err(e)
        }
    }
}

/// A result stream that holds its query slot and reports how it ended.
struct Tracked {
    inner: BatchStream,
    rows: u64,
    outcome: Option<(QueryState, Option<String>)>,
    registry: Arc<QueryRegistry>,
    id: u64,
    span: tracing::Span,
    started: std::time::Instant,
    _permit: OwnedSemaphorePermit,
}

impl Stream for Tracked {
    type Item = SqeResult<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(batch))) => self.rows += batch.num_rows() as u64,
            Poll::Ready(Some(Err(e))) => {
                self.outcome = Some((QueryState::Failed, Some(e.message().to_string())))
            }
            Poll::Ready(None) if self.outcome.is_none() => {
                self.outcome = Some((QueryState::Finished, None))
            }
            _ => {}
        }
        polled
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        // Dropped before its end: the caller cancelled (or went away).
        let (state, error) = self.outcome.take().unwrap_or((QueryState::Cancelled, None));
        self.span.in_scope(|| {
            tracing::info!(
                state = state.as_str(),
                rows = self.rows,
                millis = self.started.elapsed().as_millis() as u64,
                error = error.as_deref(),
                "statement ended"
            )
        });
        self.registry.end(self.id, state, self.rows, error);
    }
}

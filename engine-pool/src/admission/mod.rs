//! Admission and the query registry, in front of every statement a front end runs.
//!
//! At most `max_concurrent_queries` statements hold a slot at once, and at most
//! `max_running_per_user` of one user; up to `max_queued` more wait (`max_queued_per_user` of one
//! user), each at most `queue_timeout`, and past that a caller gets a "server busy" error naming
//! the limit. Freed slots go to the waiting users in turn (slots.rs). A slot is held until the
//! result stream ends or is dropped (which cancels the query), or until nobody has read the result
//! for `idle_slot`: then the statement gives its slot back and stays paused (its operators stop once
//! their buffers fill), and takes a slot again, waiting its turn, when its reader comes back. So a
//! client that stops reading cannot keep a slot from everyone else. Every statement is recorded,
//! with its user, SQL, state, times and rows, and the registry is readable as
//! `system.runtime.queries`: each user reads their own queries in full, an admin reads everyone's,
//! and of other users' queries the rest see only that they exist (state and times, no user, text
//! or error).

mod slots;

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use datafusion::arrow::array::RecordBatch;
use futures::Stream;
use sqe_sessions::{BatchStream, ErrorCode, Session, SqeResult};
use tracing::Instrument;

use crate::guard::catching_panics;
use slots::{Limits, Slot, Slots};

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
    /// Statements one user may run at once; a quarter of `max_concurrent_queries` if unset.
    pub max_running_per_user: Option<usize>,
    /// Statements one user may have waiting at once; a quarter of `max_queued` if unset.
    pub max_queued_per_user: Option<usize>,
    /// How long a result may go unread before its statement gives its slot back.
    pub idle_slot: Duration,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self {
            max_concurrent_queries: 32,
            max_queued: 256,
            queue_timeout: Duration::from_secs(60),
            max_running_per_user: None,
            max_queued_per_user: None,
            idle_slot: Duration::from_secs(5),
        }
    }
}

impl AdmissionConfig {
    fn limits(&self) -> Limits {
        let quarter = |n: usize| (n / 4).max(1);
        Limits {
            total: self.max_concurrent_queries,
            per_user: self
                .max_running_per_user
                .unwrap_or_else(|| quarter(self.max_concurrent_queries)),
            queued: self.max_queued,
            queued_per_user: self
                .max_queued_per_user
                .unwrap_or_else(|| quarter(self.max_queued)),
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

/// Slots for running statements, and the statements holding one.
pub struct Admission {
    config: AdmissionConfig,
    slots: Arc<Slots>,
    /// The slots of statements with a result to read, watched for results nobody reads.
    held: Arc<Mutex<Vec<Weak<Held>>>>,
    /// The watch over `held`, started with the first statement.
    watch: OnceLock<()>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A statement's slot while its result is read, and since when nobody has asked for more rows
/// (`None` while a reader waits for them).
struct Held {
    slot: Mutex<Option<Slot>>,
    unread_since: Mutex<Option<Instant>>,
}

impl Held {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Slot>> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn unread_since(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.unread_since.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Admission {
    pub fn new(config: AdmissionConfig) -> Self {
        let slots = Slots::new(config.limits());
        Self {
            config,
            slots,
            held: Arc::new(Mutex::new(Vec::new())),
            watch: OnceLock::new(),
        }
    }

    async fn admit(&self, user: &str) -> SqeResult<Slot> {
        self.slots.admit(user, self.config.queue_timeout).await
    }

    /// Keeps `slot` for a statement whose result is being read, and starts the watch that takes
    /// the slot of a result nobody reads.
    fn hold(&self, slot: Slot) -> Arc<Held> {
        let held = Arc::new(Held {
            slot: Mutex::new(Some(slot)),
            unread_since: Mutex::new(Some(Instant::now())),
        });
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::downgrade(&held));
        self.watch.get_or_init(|| {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(watch_unread(
                    Arc::downgrade(&self.held),
                    self.config.idle_slot,
                ));
            }
        });
        held
    }
}

/// Every so often, takes the slot of each statement whose result nobody has read for `idle`. Ends
/// with the engine.
async fn watch_unread(held: Weak<Mutex<Vec<Weak<Held>>>>, idle: Duration) {
    let every = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
    loop {
        tokio::time::sleep(every).await;
        let Some(held) = held.upgrade() else {
            return;
        };
        let live: Vec<Arc<Held>> = {
            let mut list = held.lock().unwrap_or_else(|p| p.into_inner());
            list.retain(|h| h.strong_count() > 0);
            list.iter().filter_map(Weak::upgrade).collect()
        };
        for h in live {
            let unread = h
                .unread_since()
                .is_some_and(|since| since.elapsed() >= idle);
            if unread {
                // Dropped here, the slot goes to the next statement in turn.
                let taken = h.slot().take();
                if taken.is_some() {
                    tracing::debug!("a result unread for {}s gave its slot back", idle.as_secs());
                }
            }
        }
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
    let permit = match admission
        .admit(&session.principal.name)
        .instrument(span.clone())
        .await
    {
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
                held: admission.hold(permit),
                slots: Arc::clone(&admission.slots),
                user: session.principal.name.clone(),
                queue_timeout: admission.config.queue_timeout,
                readmit: None,
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

/// A result stream that holds its query slot (giving it back while nobody reads, taking one again
/// when they do) and reports how it ended.
struct Tracked {
    inner: BatchStream,
    rows: u64,
    outcome: Option<(QueryState, Option<String>)>,
    registry: Arc<QueryRegistry>,
    id: u64,
    span: tracing::Span,
    started: std::time::Instant,
    held: Arc<Held>,
    slots: Arc<Slots>,
    user: String,
    queue_timeout: Duration,
    /// Waiting for a slot again, after the watch took it.
    readmit: Option<Pin<Box<dyn Future<Output = SqeResult<Slot>> + Send>>>,
}

impl Stream for Tracked {
    type Item = SqeResult<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.outcome.is_some() {
            return Poll::Ready(None);
        }
        // A reader asks: the result is not unread (whatever it waits for).
        *self.held.unread_since() = None;
        if self.held.slot().is_none() {
            let this = &mut *self;
            let readmit = this.readmit.get_or_insert_with(|| {
                let (slots, user, timeout) = (
                    Arc::clone(&this.slots),
                    this.user.clone(),
                    this.queue_timeout,
                );
                Box::pin(async move { slots.admit(&user, timeout).await })
            });
            match readmit.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(slot)) => {
                    this.readmit = None;
                    *this.held.slot() = Some(slot);
                }
                Poll::Ready(Err(e)) => {
                    this.readmit = None;
                    this.outcome = Some((QueryState::Failed, Some(e.message().to_string())));
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
        let polled = self.inner.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(batch))) => {
                self.rows += batch.num_rows() as u64;
                *self.held.unread_since() = Some(Instant::now());
            }
            Poll::Ready(Some(Err(e))) => {
                self.outcome = Some((QueryState::Failed, Some(e.message().to_string())));
                self.held.slot().take();
            }
            Poll::Ready(None) => {
                if self.outcome.is_none() {
                    self.outcome = Some((QueryState::Finished, None));
                }
                // Read to its end: the slot is free now, not when the stream is dropped.
                self.held.slot().take();
                return Poll::Ready(None);
            }
            Poll::Pending => {}
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

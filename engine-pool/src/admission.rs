//! Admission and the query registry, in front of every statement a front end runs.
//!
//! At most `max_concurrent_queries` statements hold a slot at once; up to `max_queued` more wait, each
//! at most `queue_timeout`, and past that a caller gets a "server busy" error at once. A slot is held
//! until the result stream ends or is dropped (which cancels the query). Every statement is recorded,
//! with its user, SQL, state, times and rows, and the registry is readable as
//! `system.runtime.queries`.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::Result as DFResult;
use futures::Stream;
use sqe_sessions::{BatchStream, ErrorCode, Session, SqeError, SqeResult};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::catalog::information::{Catalogs, JdbcSchema, MetadataSchema};

/// Finished queries kept for `system.runtime.queries`.
const KEEP_FINISHED: usize = 1000;

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
    fn as_str(self) -> &'static str {
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
    pub id: u64,
    pub user: String,
    pub sql: String,
    pub state: QueryState,
    pub created_ms: i64,
    pub ended_ms: Option<i64>,
    pub rows: u64,
    pub error: Option<String>,
    /// What the client said it is (Trino's `X-Trino-Source`).
    pub source: Option<String>,
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
            user: session.principal.name.clone(),
            sql: sql.to_string(),
            state: QueryState::Queued,
            created_ms: now_ms(),
            ended_ms: None,
            rows: 0,
            error: None,
            source: session.source.clone(),
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
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.config.max_queued {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
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
        self.waiting.fetch_sub(1, Ordering::SeqCst);
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
    let permit = match admission.admit().await {
        Ok(p) => p,
        Err(e) => {
            registry.end(id, QueryState::Failed, 0, Some(e.message().to_string()));
            return Err(e);
        }
    };
    registry.update(id, |q| q.state = QueryState::Running);
    match run().await {
        Ok(mut result) => {
            let inner = std::mem::replace(&mut result.batches, Box::pin(futures::stream::empty()));
            let tracked = Tracked {
                inner,
                rows: 0,
                outcome: None,
                registry: registry.clone(),
                id,
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
            registry.end(id, state, 0, Some(e.message().to_string()));
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
        self.registry.end(self.id, state, self.rows, error);
    }
}

/// Trino's `system` catalog: `runtime.queries` (running and recent queries), and the `jdbc` and
/// `metadata` tables drivers read.
#[derive(Debug)]
pub struct SystemCatalog {
    registry: Arc<QueryRegistry>,
    catalogs: Catalogs,
}

impl SystemCatalog {
    pub fn new(registry: Arc<QueryRegistry>, catalogs: Catalogs) -> Self {
        Self { registry, catalogs }
    }
}

impl CatalogProvider for SystemCatalog {
    fn schema_names(&self) -> Vec<String> {
        vec![
            "jdbc".to_string(),
            "metadata".to_string(),
            "runtime".to_string(),
        ]
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        let catalogs = self.catalogs.clone();
        match name {
            "jdbc" => return Some(Arc::new(JdbcSchema { catalogs })),
            "metadata" => return Some(Arc::new(MetadataSchema { catalogs })),
            _ => {}
        }
        (name == "runtime").then(|| {
            Arc::new(RuntimeSchema {
                registry: self.registry.clone(),
            }) as Arc<dyn SchemaProvider>
        })
    }
}

#[derive(Debug)]
struct RuntimeSchema {
    registry: Arc<QueryRegistry>,
}

#[async_trait]
impl SchemaProvider for RuntimeSchema {
    fn table_names(&self) -> Vec<String> {
        vec!["queries".to_string()]
    }

    async fn table(&self, name: &str) -> DFResult<Option<Arc<dyn TableProvider>>> {
        if name != "queries" {
            return Ok(None);
        }
        let queries = self.registry.snapshot();
        let ts = || DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
        let schema = Arc::new(Schema::new(vec![
            Field::new("query_id", DataType::Utf8, false),
            Field::new("state", DataType::Utf8, false),
            Field::new("user", DataType::Utf8, false),
            Field::new("query", DataType::Utf8, false),
            Field::new("created", ts(), false),
            Field::new("end", ts(), true),
            Field::new("rows", DataType::Int64, false),
            Field::new("error_message", DataType::Utf8, true),
            Field::new("source", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(
                    queries.iter().map(|q| q.id.to_string()).collect::<Vec<_>>(),
                )),
                Arc::new(StringArray::from(
                    queries.iter().map(|q| q.state.as_str()).collect::<Vec<_>>(),
                )),
                Arc::new(StringArray::from(
                    queries.iter().map(|q| q.user.clone()).collect::<Vec<_>>(),
                )),
                Arc::new(StringArray::from(
                    queries.iter().map(|q| q.sql.clone()).collect::<Vec<_>>(),
                )),
                Arc::new(
                    TimestampMillisecondArray::from(
                        queries.iter().map(|q| q.created_ms).collect::<Vec<_>>(),
                    )
                    .with_timezone("UTC"),
                ),
                Arc::new(
                    TimestampMillisecondArray::from(
                        queries.iter().map(|q| q.ended_ms).collect::<Vec<_>>(),
                    )
                    .with_timezone("UTC"),
                ),
                Arc::new(Int64Array::from(
                    queries.iter().map(|q| q.rows as i64).collect::<Vec<_>>(),
                )),
                Arc::new(StringArray::from(
                    queries.iter().map(|q| q.error.clone()).collect::<Vec<_>>(),
                )),
                Arc::new(StringArray::from(
                    queries.iter().map(|q| q.source.clone()).collect::<Vec<_>>(),
                )),
            ],
        )?;
        Ok(Some(Arc::new(MemTable::try_new(
            schema,
            vec![vec![batch]],
        )?)))
    }

    fn table_exist(&self, name: &str) -> bool {
        name == "queries"
    }
}

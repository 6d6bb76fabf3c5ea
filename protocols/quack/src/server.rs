//! Quack's conversation, transport aside: one message in, one message out. A connection request
//! is authenticated with its token (by the caller's own identity chain, given as a function) and
//! opens a session of that principal; a prepare runs its statement as that session and answers
//! with the first chunks; fetches stream the rest, a batch at a time, never holding the whole
//! result; a disconnect closes the session. A session id is 128 random bits: another client
//! presenting one it does not own gets the answer for an unknown one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use futures::StreamExt;
use futures::future::BoxFuture;
use sqe_sessions::{BatchStream, Credential, Principal, QueryService, Session, SqeResult};

use crate::chunk::MAX_ROWS;
use crate::message::{self, Request, read_request};

/// Chunks in one prepare or fetch answer (DuckDB's `quack_fetch_batch_chunks`).
pub const CHUNKS_PER_ANSWER: usize = 12;

/// Turns a connection's token into who it is (the gateway's identity chain).
pub type Authenticate = Arc<
    dyn Fn(String) -> BoxFuture<'static, SqeResult<(Principal, Option<Credential>)>> + Send + Sync,
>;

/// What a Quack server needs besides the engine.
pub struct QuackConfig {
    pub catalog: String,
    pub schema: String,
    pub authenticate: Authenticate,
    /// Sessions one principal may hold; past it a connection is refused.
    pub max_sessions_per_principal: usize,
    /// A session unused for this long is closed by [`QuackServer::reap`].
    pub idle: Duration,
}

/// A client's open result.
struct Open {
    id: i128,
    batches: BatchStream,
    /// What is left of a batch cut at a chunk's size.
    pending: Option<RecordBatch>,
    /// The index the next fetched batch gets (the prepare's is 0).
    next_index: u64,
    done: bool,
}

struct QuackSession {
    session: Session,
    result: Option<Open>,
}

type Shared = Arc<tokio::sync::Mutex<QuackSession>>;

pub struct QuackServer {
    service: Arc<dyn QueryService>,
    config: QuackConfig,
    sessions: Mutex<HashMap<String, (Shared, String, Instant)>>,
}

impl QuackServer {
    pub fn new(service: Arc<dyn QueryService>, config: QuackConfig) -> Self {
        Self {
            service,
            config,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Answers one message.
    pub async fn handle(&self, body: &[u8]) -> Vec<u8> {
        let (header, request) = match read_request(body) {
            Ok(read) => read,
            Err(e) => return message::error(&e.to_string()),
        };
        match request {
            Request::Connect {
                auth, min_version, ..
            } => self.connect(auth, min_version).await,
            Request::Disconnect => {
                let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
                sessions.remove(&header.connection_id);
                message::success()
            }
            other => {
                let Some(shared) = self.session(&header.connection_id) else {
                    return message::error("Invalid connection id");
                };
                let mut session = shared.lock().await;
                match other {
                    Request::Prepare { sql } => self.prepare(&mut session, &sql).await,
                    Request::Fetch { result } => fetch(&mut session, result).await,
                    Request::Append { .. } => {
                        message::error("appending over Quack is not supported yet")
                    }
                    Request::Connect { .. } | Request::Disconnect => {
                        message::error("Unsupported message type for server")
                    }
                }
            }
        }
    }

    /// Closes the sessions unused for longer than `idle`, and with them their open results (each
    /// holds a running statement): what clients left behind. How many were closed.
    pub fn reap(&self) -> usize {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let before = sessions.len();
        let idle = self.config.idle;
        sessions.retain(|_, (_, _, used)| used.elapsed() < idle);
        before - sessions.len()
    }

    /// Sessions open now.
    pub fn open_sessions(&self) -> usize {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    fn session(&self, id: &str) -> Option<Shared> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let (shared, _, used) = sessions.get_mut(id)?;
        *used = Instant::now();
        Some(shared.clone())
    }

    async fn connect(&self, auth: String, min_version: u64) -> Vec<u8> {
        if min_version > message::QUACK_VERSION {
            return message::error(
                "Unsupported Quack version - server only supports version 1 of quack",
            );
        }
        let (principal, credential) = match (self.config.authenticate)(auth).await {
            Ok(who) => who,
            Err(e) => return message::error(&format!("Authentication failed: {}", e.message())),
        };
        let id = uuid::Uuid::new_v4().simple().to_string().to_uppercase();
        let mut session =
            Session::new(principal.clone(), &self.config.catalog, &self.config.schema);
        session.credential = credential;
        session.protocol = "quack";
        let shared = Arc::new(tokio::sync::Mutex::new(QuackSession {
            session,
            result: None,
        }));
        {
            let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            let idle = self.config.idle;
            sessions.retain(|_, (_, _, used)| used.elapsed() < idle);
            let held = sessions
                .values()
                .filter(|(_, owner, _)| *owner == principal.name)
                .count();
            if held >= self.config.max_sessions_per_principal {
                return message::error(&format!(
                    "{} holds {held} Quack sessions, the most one user may: DETACH one",
                    principal.name
                ));
            }
            sessions.insert(id.clone(), (shared, principal.name, Instant::now()));
        }
        message::connected(&id, concat!("sqe-", env!("CARGO_PKG_VERSION")), "sqe")
    }

    async fn prepare(&self, session: &mut QuackSession, sql: &str) -> Vec<u8> {
        // A new statement closes the session's earlier result.
        session.result = None;
        let result = match self.service.execute(&session.session, sql).await {
            Ok(result) => result,
            Err(e) => return message::error(e.message()),
        };
        if let Some(update) = &result.session_update {
            session.session.apply(update);
        }
        let id = uuid::Uuid::new_v4().as_u128() as i128;
        let schema: SchemaRef = if result.schema.fields().is_empty() {
            // Statements without rows answer as DuckDB's own server does.
            Arc::new(Schema::new(vec![Field::new(
                "Success",
                DataType::Boolean,
                true,
            )]))
        } else {
            result.schema.clone()
        };
        let mut open = Open {
            id,
            batches: result.batches,
            pending: None,
            next_index: 1,
            done: false,
        };
        let chunks = match next_chunks(&mut open).await {
            Ok(chunks) => chunks,
            Err(e) => return e,
        };
        let chunks = if result.schema.fields().is_empty() {
            Vec::new()
        } else {
            chunks
        };
        let more = !open.done;
        let answer = message::prepared(&schema, &chunks, more, id);
        session.result = Some(open);
        answer.unwrap_or_else(|e| message::error(&e))
    }
}

async fn fetch(session: &mut QuackSession, id: i128) -> Vec<u8> {
    let Some(open) = session.result.as_mut().filter(|r| r.id == id) else {
        return message::error("Result has been closed");
    };
    let chunks = match next_chunks(open).await {
        Ok(chunks) => chunks,
        Err(e) => return e,
    };
    if chunks.is_empty() {
        return message::fetched(&[], None).unwrap_or_else(|e| message::error(&e));
    }
    let index = open.next_index;
    open.next_index += 1;
    message::fetched(&chunks, Some(index)).unwrap_or_else(|e| message::error(&e))
}

/// Up to [`CHUNKS_PER_ANSWER`] chunks of at most [`MAX_ROWS`] rows from the result; an error is
/// the answer to send.
async fn next_chunks(open: &mut Open) -> Result<Vec<RecordBatch>, Vec<u8>> {
    let mut chunks = Vec::new();
    while chunks.len() < CHUNKS_PER_ANSWER {
        let batch = match open.pending.take() {
            Some(batch) => batch,
            None if open.done => break,
            None => match open.batches.next().await {
                None => {
                    open.done = true;
                    break;
                }
                Some(Err(e)) => {
                    open.done = true;
                    return Err(message::error(e.message()));
                }
                Some(Ok(batch)) => batch,
            },
        };
        if batch.num_rows() == 0 {
            continue;
        }
        let take = batch.num_rows().min(MAX_ROWS);
        if take < batch.num_rows() {
            open.pending = Some(batch.slice(take, batch.num_rows() - take));
        }
        chunks.push(batch.slice(0, take));
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Reader, Writer};
    use arrow::array::Int64Array;
    use sqe_sessions::{QueryResult, SqeError};

    /// Answers `rows N` with N rows of one BIGINT column, in batches of 5,000; anything else fails.
    struct Counting;

    #[async_trait::async_trait]
    impl QueryService for Counting {
        async fn execute(&self, session: &Session, sql: &str) -> SqeResult<QueryResult> {
            let n: i64 = sql
                .strip_prefix("rows ")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| {
                    SqeError::invalid(format!("{} cannot run '{sql}'", session.principal.name))
                })?;
            let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
            let batches: Vec<SqeResult<RecordBatch>> = (0..n)
                .step_by(5000)
                .map(|start| {
                    let end = (start + 5000).min(n);
                    RecordBatch::try_new(
                        schema.clone(),
                        vec![Arc::new(Int64Array::from_iter_values(start..end))],
                    )
                    .map_err(|e| SqeError::internal(e.to_string()))
                })
                .collect();
            Ok(QueryResult {
                schema,
                batches: futures::stream::iter(batches).boxed(),
                update_count: None,
                session_update: None,
            })
        }
    }

    fn server() -> QuackServer {
        let authenticate: Authenticate = Arc::new(|token: String| {
            Box::pin(async move {
                match token.as_str() {
                    "alice-token" => Ok((Principal::new("alice"), None)),
                    _ => Err(SqeError::new(
                        sqe_sessions::ErrorCode::Unauthenticated,
                        "unknown token",
                    )),
                }
            })
        });
        QuackServer::new(
            Arc::new(Counting),
            QuackConfig {
                catalog: "iceberg".into(),
                schema: "default".into(),
                authenticate,
                max_sessions_per_principal: 2,
                idle: Duration::from_secs(60),
            },
        )
    }

    fn request(kind: u8, session: &str, body: impl FnOnce(&mut Writer)) -> Vec<u8> {
        let mut w = Writer::new();
        w.field(1).uleb(u64::from(kind));
        if !session.is_empty() {
            w.field(2).string(session);
        }
        w.field(3).uleb(1).end();
        body(&mut w);
        w.end();
        w.into_bytes()
    }

    /// The answer's header (type, connection id) and a reader at its body.
    fn answer(bytes: &[u8]) -> (u8, String, Reader<'_>) {
        let mut r = Reader::new(bytes);
        r.begin()
            .and_then(|_| r.expect(1))
            .unwrap_or_else(|e| panic!("{e}"));
        let kind = r.u8().unwrap_or_else(|e| panic!("{e}"));
        let id = if r.has(2).unwrap_or(false) {
            r.string().unwrap_or_default()
        } else {
            String::new()
        };
        r.expect(3)
            .and_then(|_| r.uleb())
            .and_then(|_| r.end())
            .unwrap_or_else(|e| panic!("{e}"));
        (kind, id, r)
    }

    fn error_text(bytes: &[u8]) -> String {
        let (kind, _, mut r) = answer(bytes);
        assert_eq!(kind, message::kind::ERROR_RESPONSE);
        r.begin()
            .and_then(|_| r.expect(1))
            .and_then(|_| r.string())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Rows in an answer's chunk list (field `id`), and what follows it.
    fn rows_in(r: &mut Reader<'_>) -> usize {
        let mut rows = 0;
        for _ in 0..r.count().unwrap_or_else(|e| panic!("{e}")) {
            assert_eq!(r.bool(), Ok(true));
            let chunk = crate::chunk::read_wrapper(r).unwrap_or_else(|e| panic!("{e}"));
            assert!(chunk.rows <= MAX_ROWS);
            rows += chunk.rows;
        }
        rows
    }

    #[tokio::test]
    async fn results_stream_in_bounded_answers() {
        let quack = server();
        let connected = quack
            .handle(&request(message::kind::CONNECTION_REQUEST, "", |w| {
                w.field(1).string("alice-token");
            }))
            .await;
        let (kind, session, _) = answer(&connected);
        assert_eq!(
            (kind, session.len()),
            (message::kind::CONNECTION_RESPONSE, 32)
        );

        // 60,000 rows in batches of 5,000: 12 chunks of at most 2,048 rows (2,048, 2,048, 904 a
        // batch) with the prepare, then fetches of up to 12 more.
        let prepared = quack
            .handle(&request(message::kind::PREPARE_REQUEST, &session, |w| {
                w.field(1).string("rows 60000");
            }))
            .await;
        let (kind, _, mut r) = answer(&prepared);
        assert_eq!(kind, message::kind::PREPARE_RESPONSE);
        r.begin().unwrap_or_else(|e| panic!("{e}"));
        r.expect(1).unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..r.count().unwrap_or(0) {
            crate::chunk::LogicalType::read(&mut r).unwrap_or_else(|e| panic!("{e}"));
        }
        r.expect(2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.count().and_then(|_| r.string()), Ok("n".to_string()));
        assert_eq!(r.expect(3).and_then(|_| r.bool()), Ok(true));
        r.expect(4).unwrap_or_else(|e| panic!("{e}"));
        let mut total = rows_in(&mut r);
        assert_eq!(total, 4 * 5000);
        r.expect(5).unwrap_or_else(|e| panic!("{e}"));
        let result = r.hugeint().unwrap_or_else(|e| panic!("{e}"));
        let mut indices = Vec::new();
        loop {
            let fetched = quack
                .handle(&request(message::kind::FETCH_REQUEST, &session, |w| {
                    w.field(1).hugeint(result);
                }))
                .await;
            let (kind, _, mut r) = answer(&fetched);
            assert_eq!(kind, message::kind::FETCH_RESPONSE);
            r.begin().unwrap_or_else(|e| panic!("{e}"));
            if r.has(1).unwrap_or(false) {
                total += rows_in(&mut r);
                r.expect(2).unwrap_or_else(|e| panic!("{e}"));
                indices.push(r.uleb().unwrap_or_else(|e| panic!("{e}")));
            } else {
                r.expect(2).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(r.uleb(), Ok(message::NO_INDEX));
                break;
            }
        }
        assert_eq!(total, 60_000);
        assert_eq!(indices, [1, 2]);

        // Another result id, another session's id, a failing statement, a bad token.
        let stale = quack
            .handle(&request(message::kind::FETCH_REQUEST, &session, |w| {
                w.field(1).hugeint(result ^ 1);
            }))
            .await;
        assert_eq!(error_text(&stale), "Result has been closed");
        let stranger = quack
            .handle(&request(
                message::kind::PREPARE_REQUEST,
                "0123456789ABCDEF0123456789ABCDEF",
                |w| {
                    w.field(1).string("rows 1");
                },
            ))
            .await;
        assert_eq!(error_text(&stranger), "Invalid connection id");
        let failed = quack
            .handle(&request(message::kind::PREPARE_REQUEST, &session, |w| {
                w.field(1).string("DROP TABLE t");
            }))
            .await;
        assert_eq!(error_text(&failed), "alice cannot run 'DROP TABLE t'");
        let refused = quack
            .handle(&request(message::kind::CONNECTION_REQUEST, "", |w| {
                w.field(1).string("nope");
            }))
            .await;
        assert_eq!(error_text(&refused), "Authentication failed: unknown token");
        // At most two sessions for alice; a disconnect frees one.
        let connect = request(message::kind::CONNECTION_REQUEST, "", |w| {
            w.field(1).string("alice-token");
        });
        assert_eq!(
            answer(&quack.handle(&connect).await).0,
            message::kind::CONNECTION_RESPONSE
        );
        assert_eq!(
            error_text(&quack.handle(&connect).await),
            "alice holds 2 Quack sessions, the most one user may: DETACH one"
        );
        quack
            .handle(&request(
                message::kind::DISCONNECT_MESSAGE,
                &session,
                |_| {},
            ))
            .await;
        assert_eq!(
            answer(&quack.handle(&connect).await).0,
            message::kind::CONNECTION_RESPONSE
        );
        // Sessions left idle are closed by the reaper, their results with them.
        assert_eq!(quack.reap(), 0);
        assert_eq!(quack.open_sessions(), 2);
        // Garbage is an error answer, not a crash.
        assert!(
            error_text(&quack.handle(&[0xde, 0xad]).await).starts_with("malformed Quack message")
        );
    }
}

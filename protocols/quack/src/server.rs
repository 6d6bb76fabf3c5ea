//! Quack's conversation, transport aside: one message in, one message out. A connection request
//! is authenticated with its token (by the caller's own identity chain, given as a function) and
//! opens a session of that principal; a prepare runs its statement as that session and answers
//! with the first chunks; fetches stream the rest, a batch at a time, never holding the whole
//! result; a disconnect closes the session. A session id is 128 random bits, and the only proof a
//! later message carries of who sends it (it is handed only to the client that authenticated):
//! presenting an id nobody was handed gets the answer for an unknown one. The sessions are a
//! [`HandleMap`] capped per principal (`[quack] max_sessions_per_user`), whose idle sessions
//! expire with their open results. A prepare runs its statement at once and keeps only its open
//! result, one a session; a statement longer than the engine runs is refused before anything else
//! reads it, in the engine's words.
//!
//! Appends stream into one bulk ingest per table, so that an `INSERT` from DuckDB, which arrives
//! as one append per 2,048 rows with nothing to mark its end, lands as one Iceberg commit. The
//! commit is made when the session's next other message arrives, when the appends pause for
//! [`APPEND_QUIET`], or at COMMIT when DuckDB opened a transaction (it does around DDL, e.g. for
//! `CREATE TABLE … AS`); a ROLLBACK, or a session that ends inside a transaction, stores nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use futures::StreamExt;
use futures::future::BoxFuture;
use sqe_sessions::{
    BatchStream, Caps, Credential, HandleMap, IfExists, IfMissing, IngestTarget, Principal,
    ProtocolHandles, QueryResult, QueryService, Session, SqeError, SqeResult,
    check_statement_length,
};
use tokio::sync::{mpsc, oneshot};

use crate::attach::{self, Asked, Directory};
use crate::chunk::{Chunk, LogicalType, MAX_ROWS};
use crate::message::{self, Request, read_request};

/// Chunks in one prepare or fetch answer at most, as DuckDB's own server sends them
/// (`quack_fetch_batch_chunks`; 48 cost its client as much or more, measured against DuckDB's
/// own server).
pub const CHUNKS_PER_ANSWER: usize = 12;

/// The bytes of rows in one answer at most: wide rows come in smaller chunks.
pub const ANSWER_BYTES: usize = 16 << 20;

/// How long appends may pause before what they carried is committed.
pub const APPEND_QUIET: Duration = Duration::from_millis(300);

/// Tables one transaction may append to at once (each holds an ingest open until COMMIT).
pub const MAX_TABLES_APPENDED: usize = 8;

/// How refusals name the cap on one user's sessions.
const SESSION_CAPS: Caps = Caps {
    entries: "Quack sessions",
    count_setting: "[quack] max_sessions_per_user",
    bytes_setting: None,
    release: "DETACH one, or wait until one has been unused for [server] result_timeout_secs",
};

/// Turns a connection's token into who it is (the gateway's identity chain).
pub type Authenticate = Arc<
    dyn Fn(String) -> BoxFuture<'static, SqeResult<(Principal, Option<Credential>)>> + Send + Sync,
>;

/// What a Quack server needs besides the engine.
pub struct QuackConfig {
    pub catalog: String,
    pub schema: String,
    pub authenticate: Authenticate,
    /// Sessions one principal may hold (`[quack] max_sessions_per_user`); past it a connection
    /// is refused.
    pub max_sessions_per_principal: usize,
    /// A session unused for this long expires, and its open result with it (the gateway's reaper
    /// closes it through [`ProtocolHandles::expire_idle`]).
    pub idle: Duration,
}

/// One answer's chunks and whether the result ends with them, or the error answer to send.
type Answer = Result<(Vec<RecordBatch>, bool), Vec<u8>>;

/// A client's open result: answers read ahead by a task of their own (see [`read_ahead`]).
struct Open {
    id: i128,
    /// Each answer's chunks, and whether the result ended with them; closed at the end.
    answers: mpsc::Receiver<Answer>,
    /// The index the next fetched batch gets (the prepare's is 0).
    next_index: u64,
    /// Whether the client was told the result ended (or failed): it fetches until an answer
    /// without chunks, so a result whose last rows went out is open until that answer goes too.
    ended: bool,
}

impl Open {
    /// Whether the client is still to read the result to its end. A shutdown that stopped
    /// listening once the last rows went out would fail the client's fetch of the end.
    fn unread(&self) -> bool {
        !self.ended
    }
}

/// Answers a result's statement may run ahead of the client by: the engine and the chunking go
/// on while earlier answers travel, holding at most this many answers' rows.
const READ_AHEAD: usize = 2;

/// Cuts `batches` into answers for as long as the client takes them (see [`next_chunks`]); stops,
/// dropping the statement, at the end of the rows, at an error, or when the result is closed.
async fn read_ahead(mut batches: BatchStream, answers: mpsc::Sender<Answer>) {
    let mut pending = None;
    loop {
        // A closed result stops the statement at once, mid-answer too.
        let answer = tokio::select! {
            answer = next_chunks(&mut batches, &mut pending) => answer,
            () = answers.closed() => return,
        };
        let last = !matches!(answer, Ok((_, false)));
        if answers.send(answer).await.is_err() || last {
            return;
        }
    }
}

/// Appended rows on their way into one table: an ingest reading them as they come.
struct Appending {
    schema: String,
    table: String,
    arrow: SchemaRef,
    rows: mpsc::Sender<RecordBatch>,
    /// Set when the rows are to be committed; an ingest whose rows end without it fails.
    commit: Arc<AtomicBool>,
    done: tokio::task::JoinHandle<SqeResult<QueryResult>>,
    /// The number of the last append taken (the quiet timer commits only if no later one came).
    last: u64,
}

impl Appending {
    /// Ends the rows and waits for the commit.
    async fn finish(self) -> Result<(), String> {
        self.commit.store(true, Ordering::SeqCst);
        drop(self.rows);
        let what = format!("{}.{}", self.schema, self.table);
        match self.done.await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!(
                "the rows appended to {what} were not stored: {}",
                e.message()
            )),
            Err(e) => Err(format!("the rows appended to {what} were not stored: {e}")),
        }
    }
}

struct QuackSession {
    session: Session,
    result: Option<Open>,
    /// What the client's ATTACH listed (kept for its scans and appends).
    directory: Option<Directory>,
    /// One per table rows are being appended to (several only inside a transaction).
    appending: Vec<Appending>,
    /// Open when DuckDB began a transaction: the statements without rows it ran since.
    transaction: Option<Vec<String>>,
    /// A commit of appended rows that failed after the appends were answered, told next time.
    failed: Option<String>,
}

impl QuackSession {
    /// Commits what was appended, outside a transaction, and tells of an earlier failure.
    async fn settle(&mut self) -> Result<(), String> {
        if let Some(failed) = self.failed.take() {
            self.appending.clear();
            return Err(failed);
        }
        if self.transaction.is_none() {
            finish_all(std::mem::take(&mut self.appending)).await?;
        }
        Ok(())
    }
}

type Shared = Arc<tokio::sync::Mutex<QuackSession>>;

pub struct QuackServer {
    service: Arc<dyn QueryService>,
    config: QuackConfig,
    /// By connection id, owned by the principal that connected; each message marks its session
    /// used.
    sessions: HandleMap<String, Shared>,
}

impl QuackServer {
    pub fn new(service: Arc<dyn QueryService>, config: QuackConfig) -> Self {
        let sessions = HandleMap::new()
            .idle_after(config.idle)
            .at_most_per_owner(config.max_sessions_per_principal);
        Self {
            service,
            config,
            sessions,
        }
    }

    /// Answers one message.
    pub async fn handle(&self, body: &[u8]) -> Vec<u8> {
        let (header, request) = match read_request(body) {
            Ok(read) => read,
            Err(e) => return message::error(&e.to_string()),
        };
        if let Request::Connect {
            auth, min_version, ..
        } = request
        {
            return self.connect(auth, min_version).await;
        }
        let Some(shared) = self.session(&header.connection_id) else {
            return match request {
                Request::Disconnect => message::success(),
                _ => message::error("Invalid connection id"),
            };
        };
        let mut session = shared.lock().await;
        match request {
            Request::Append {
                schema,
                table,
                chunk,
            } => self
                .append(&shared, &mut session, schema, table, chunk)
                .await
                .map_or_else(|e| message::error(&e), |()| message::success()),
            Request::Disconnect => {
                // The connection id is the proof of who sends it: whoever holds it may close it.
                self.sessions
                    .remove_where(&header.connection_id, |_, _| true);
                // Inside a transaction nothing appended is kept; outside, it is committed.
                if session.transaction.is_some() {
                    session.appending.clear();
                }
                match session.settle().await {
                    Ok(()) => message::success(),
                    Err(e) => message::error(&e),
                }
            }
            other => {
                if let Err(e) = session.settle().await {
                    return message::error(&e);
                }
                match other {
                    Request::Prepare { sql } => self.prepare(&mut session, &sql).await,
                    Request::Fetch { result } => {
                        let taken = fetch(&mut session, result).await;
                        // Chunks are written out without the session, so that DuckDB's
                        // concurrent fetches overlap: the next one reads on meanwhile.
                        drop(session);
                        match taken {
                            Ok((chunks, index)) => message::fetched(&chunks, index)
                                .unwrap_or_else(|e| message::error(&e)),
                            Err(answer) => answer,
                        }
                    }
                    _ => message::error("Unsupported message type for server"),
                }
            }
        }
    }

    /// Sessions open now.
    pub fn open_sessions(&self) -> usize {
        self.sessions.len()
    }

    fn session(&self, id: &str) -> Option<Shared> {
        self.sessions
            .get_by_bearer(id, |shared| Some(shared.clone()))
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
            directory: None,
            appending: Vec::new(),
            transaction: None,
            failed: None,
        }));
        if let Err(refused) = self.sessions.insert(id.clone(), &principal.name, shared) {
            return message::error(refused.error(&principal.name, &SESSION_CAPS).message());
        }
        message::connected(&id, concat!("sqe-", env!("CARGO_PKG_VERSION")), "sqe")
    }

    async fn prepare(&self, session: &mut QuackSession, sql: &str) -> Vec<u8> {
        // A new statement closes the session's earlier result.
        session.result = None;
        if let Err(e) = check_statement_length(sql) {
            return message::error(e.message());
        }
        let (result, expected) = match self.run(session, sql).await {
            Ok(ran) => ran,
            Err(e) => return message::error(e.message()),
        };
        if let Some(update) = &result.session_update {
            session.session.apply(update);
        }
        if let Some(expected) = &expected
            && let Err(e) = same_types(&result.schema, expected)
        {
            return message::error(&e);
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
        let (sender, answers) = mpsc::channel(READ_AHEAD);
        tokio::spawn(read_ahead(result.batches, sender));
        let mut open = Open {
            id,
            answers,
            next_index: 1,
            ended: false,
        };
        let (chunks, done) = match open.answers.recv().await {
            None => (Vec::new(), true),
            Some(Err(e)) => return e,
            Some(Ok(answer)) => answer,
        };
        // A prepare answer that holds every row tells the client not to fetch.
        open.ended = done;
        let chunks = if result.schema.fields().is_empty() {
            Vec::new()
        } else {
            chunks
        };
        let answer = message::prepared(&schema, &chunks, !done, id);
        session.result = Some(open);
        answer.unwrap_or_else(|e| message::error(&e))
    }

    /// Runs a prepared statement: what DuckDB's ATTACH sends is answered for it (with the DuckDB
    /// types a scan must arrive as), anything else goes to the engine as written.
    async fn run(
        &self,
        s: &mut QuackSession,
        sql: &str,
    ) -> SqeResult<(QueryResult, Option<Vec<Option<LogicalType>>>)> {
        let service = self.service.as_ref();
        let catalog = s.session.catalog.clone();
        let ran = match attach::recognize(sql) {
            None => {
                let ran = service.execute(&s.session, sql).await?;
                let changed = ran.schema.fields().is_empty() || ran.update_count.is_some();
                if changed && let Some(statements) = &mut s.transaction {
                    // Kept for ROLLBACK to name, by its first words: `CREATE TABLE s.t`.
                    let head = sql.split(['(', ';']).next().unwrap_or_default();
                    let words: Vec<&str> = head.split_whitespace().take(4).collect();
                    statements.push(words.join(" "));
                }
                ran
            }
            Some(Asked::Schemata) => attach::schemata(service, &s.session).await?,
            Some(Asked::Tables) => {
                let directory = Directory::list(service, &s.session).await?;
                let answer = directory.answer()?;
                s.directory = Some(directory);
                answer
            }
            Some(Asked::Scan { table, items }) => {
                let Some(listed) = self.listed(s, None, &table).await? else {
                    if items.is_empty() {
                        // `FROM t` of a table no ATTACH listed: DuckDB's shorthand.
                        let sql =
                            format!("SELECT * FROM {}", sqe_sessions::quote_identifier(&table));
                        return Ok((service.execute(&s.session, &sql).await?, None));
                    }
                    return Err(SqeError::not_found(format!(
                        "table '{table}' not found in catalog '{catalog}'"
                    )));
                };
                let sql = listed.scan(&catalog, &items).map_err(SqeError::invalid)?;
                let expected = listed.expected(&items);
                return Ok((service.execute(&s.session, &sql).await?, Some(expected)));
            }
            Some(Asked::From { name }) => {
                let name: Vec<String> = std::iter::once(catalog.as_str())
                    .chain(name.iter().map(String::as_str))
                    .map(sqe_sessions::quote_identifier)
                    .collect();
                let sql = format!("SELECT * FROM {}", name.join("."));
                service.execute(&s.session, &sql).await?
            }
            Some(Asked::Begin) => {
                if s.transaction.is_some() {
                    return Err(SqeError::invalid(
                        "cannot start a transaction within a transaction",
                    ));
                }
                s.transaction = Some(Vec::new());
                no_rows()
            }
            Some(Asked::Commit) => {
                s.transaction = None;
                finish_all(std::mem::take(&mut s.appending))
                    .await
                    .map_err(SqeError::invalid)?;
                no_rows()
            }
            Some(Asked::Rollback) => {
                // Dropped unfinished, the appended rows end in an error: nothing is committed.
                s.appending.clear();
                let ran = s.transaction.take().unwrap_or_default();
                if !ran.is_empty() {
                    return Err(SqeError::unsupported(format!(
                        "ROLLBACK kept no appended rows, but cannot undo what already ran: SQE \
                         commits each statement as it runs ({})",
                        ran.join("; ")
                    )));
                }
                no_rows()
            }
        };
        Ok((ran, None))
    }

    /// The listed table a scan or an append names; the listing is made again when it misses
    /// (a table created since, or a client that appends without attaching first).
    async fn listed(
        &self,
        s: &mut QuackSession,
        schema: Option<&str>,
        table: &str,
    ) -> SqeResult<Option<attach::Listed>> {
        let find = |directory: &Directory| -> SqeResult<Option<attach::Listed>> {
            Ok(match schema {
                Some(schema) => directory.get(schema, table),
                None => directory
                    .find(table, &s.session.schema)
                    .map_err(SqeError::invalid)?,
            }
            .cloned())
        };
        if let Some(directory) = &s.directory
            && let Some(found) = find(directory)?
        {
            return Ok(Some(found));
        }
        let directory = Directory::list(self.service.as_ref(), &s.session).await?;
        let found = find(&directory)?;
        s.directory = Some(directory);
        Ok(found)
    }

    /// Takes one append: its rows go to the ingest of their table, begun by the first of them.
    async fn append(
        &self,
        shared: &Shared,
        s: &mut QuackSession,
        schema: String,
        table: String,
        chunk: Option<Chunk>,
    ) -> Result<(), String> {
        if let Some(failed) = s.failed.take() {
            s.appending.clear();
            return Err(failed);
        }
        let result = self.append_rows(shared, s, &schema, &table, chunk).await;
        if result.is_err()
            && let Some(at) = s
                .appending
                .iter()
                .position(|a| a.schema == schema && a.table == table)
        {
            // A failed append fails its INSERT: what came before it since the last commit is
            // not stored either (DuckDB marks no end between one INSERT and the next).
            s.appending.remove(at);
            return result.map_err(|e| {
                format!("{e} (the rows appended to {schema}.{table} since its last commit were not stored either)")
            });
        }
        result
    }

    async fn append_rows(
        &self,
        shared: &Shared,
        s: &mut QuackSession,
        schema: &str,
        table: &str,
        chunk: Option<Chunk>,
    ) -> Result<(), String> {
        let chunk = chunk.ok_or("an append without rows")?;
        let listed = self
            .listed(s, Some(schema), table)
            .await
            .map_err(|e| e.message().to_string())?
            .ok_or_else(|| format!("table '{}.{schema}.{table}' not found", s.session.catalog))?;
        let names: Vec<String> = listed.columns.iter().map(|(n, _)| n.clone()).collect();
        let batch = crate::arrow_in::to_batch(&chunk, &names)
            .map_err(|e| format!("rows appended to {schema}.{table}: {e}"))?;
        // Outside a transaction, rows for another table end what was appended before; rows of
        // other types for the same table do anywhere.
        let ends = |a: &Appending| {
            let same = a.schema == schema && a.table == table;
            (same && a.arrow != batch.schema()) || (!same && s.transaction.is_none())
        };
        let (ended, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut s.appending).into_iter().partition(ends);
        s.appending = kept;
        finish_all(ended).await?;
        let at = match s
            .appending
            .iter()
            .position(|a| a.schema == schema && a.table == table)
        {
            Some(at) => at,
            None => {
                if s.appending.len() >= MAX_TABLES_APPENDED {
                    return Err(format!(
                        "a transaction appends to {MAX_TABLES_APPENDED} tables at most"
                    ));
                }
                let (appending, started) = self.begin_append(s, schema, table, batch.schema());
                s.appending.push(appending);
                let at = s.appending.len() - 1;
                self.send(s, at, batch).await?;
                // The first rows are answered once the ingest reads them, so that a table the
                // caller may not write to is refused at once.
                let appending = &mut s.appending[at];
                tokio::select! {
                    Ok(()) = started => {}
                    ended = &mut appending.done => {
                        s.appending.remove(at);
                        let why = match ended {
                            Ok(Err(e)) => e.message().to_string(),
                            Ok(Ok(_)) => "the ingest ended before reading them".into(),
                            Err(e) => e.to_string(),
                        };
                        return Err(format!("the rows appended to {schema}.{table} were not stored: {why}"));
                    }
                }
                self.quiet_commit(shared, s, at);
                return Ok(());
            }
        };
        self.send(s, at, batch).await?;
        self.quiet_commit(shared, s, at);
        Ok(())
    }

    /// Hands rows to the ingest at `at`; if it ended early, its error is the answer.
    async fn send(
        &self,
        s: &mut QuackSession,
        at: usize,
        batch: RecordBatch,
    ) -> Result<(), String> {
        static APPENDS: AtomicU64 = AtomicU64::new(0);
        let appending = &mut s.appending[at];
        appending.last = APPENDS.fetch_add(1, Ordering::Relaxed);
        if appending.rows.send(batch).await.is_err() {
            return s.appending.remove(at).finish().await;
        }
        Ok(())
    }

    /// Outside a transaction, commits the appends at `at` unless another comes within
    /// [`APPEND_QUIET`].
    fn quiet_commit(&self, shared: &Shared, s: &QuackSession, at: usize) {
        if s.transaction.is_some() {
            return;
        }
        let taken = s.appending[at].last;
        let shared = shared.clone();
        tokio::spawn(async move {
            tokio::time::sleep(APPEND_QUIET).await;
            let mut s = shared.lock().await;
            if s.transaction.is_none()
                && let Some(at) = s.appending.iter().position(|a| a.last == taken)
                && let Err(e) = s.appending.remove(at).finish().await
            {
                tracing::warn!("quack: {e}");
                s.failed = Some(e);
            }
        });
    }

    /// An ingest into `schema.table` reading rows from a channel; a signal when it first reads.
    fn begin_append(
        &self,
        s: &QuackSession,
        schema: &str,
        table: &str,
        arrow: SchemaRef,
    ) -> (Appending, oneshot::Receiver<()>) {
        let (rows, receiver) = mpsc::channel::<RecordBatch>(1);
        let (started, read) = oneshot::channel();
        let commit = Arc::new(AtomicBool::new(false));
        let stream = futures::stream::unfold(
            (receiver, Some(started), commit.clone(), false),
            |(mut receiver, mut started, commit, ended)| async move {
                if ended {
                    return None;
                }
                if let Some(started) = started.take() {
                    let _ = started.send(());
                }
                match receiver.recv().await {
                    Some(batch) => Some((Ok(batch), (receiver, None, commit, false))),
                    None if commit.load(Ordering::SeqCst) => None,
                    None => Some((
                        Err(SqeError::new(
                            sqe_sessions::ErrorCode::Cancelled,
                            "the appended rows were rolled back",
                        )),
                        (receiver, None, commit, true),
                    )),
                }
            },
        )
        .boxed();
        let target = IngestTarget {
            catalog: Some(s.session.catalog.clone()),
            schema: Some(schema.to_string()),
            table: table.to_string(),
            if_missing: IfMissing::Fail,
            if_exists: IfExists::Append,
        };
        let service = self.service.clone();
        let session = s.session.clone();
        let ingest_schema = arrow.clone();
        let done = tokio::spawn(async move {
            service
                .ingest(&session, target, ingest_schema, stream)
                .await
        });
        (
            Appending {
                schema: schema.to_string(),
                table: table.to_string(),
                arrow,
                rows,
                commit,
                done,
                last: 0,
            },
            read,
        )
    }
}

impl ProtocolHandles for QuackServer {
    fn protocol(&self) -> &'static str {
        "quack"
    }

    /// Closes the sessions unused for longer than `idle`, and with them their open results (each
    /// holds a running statement): what clients left behind.
    fn expire_idle(&self) -> usize {
        self.sessions.expire_idle()
    }

    fn open_work_name(&self) -> &'static str {
        "quack_results"
    }

    /// Sessions whose result the client has not read to its end, or that are answering a message
    /// now. DuckDB fetches a result in one request per answer, so between two of them nothing
    /// else is open that a shutdown would wait for.
    fn open_work(&self) -> usize {
        let sessions = self.sessions.list(|_, _, shared| shared.clone());
        sessions
            .iter()
            .filter(|shared| match shared.try_lock() {
                Ok(session) => session.result.as_ref().is_some_and(Open::unread),
                Err(_busy) => true,
            })
            .count()
    }
}

/// Commits each of `appending`; the first failure is the answer (the others are still made).
async fn finish_all(appending: Vec<Appending>) -> Result<(), String> {
    let mut failed = None;
    for appending in appending {
        if let Err(e) = appending.finish().await {
            failed.get_or_insert(e);
        }
    }
    failed.map_or(Ok(()), Err)
}

/// A result without rows.
fn no_rows() -> QueryResult {
    QueryResult {
        schema: Arc::new(Schema::empty()),
        batches: futures::stream::empty().boxed(),
        update_count: None,
        session_update: None,
    }
}

/// An attached table's scan must answer with the types its listing gave DuckDB, which reads the
/// values by them.
fn same_types(schema: &Schema, expected: &[Option<LogicalType>]) -> Result<(), String> {
    for (field, want) in schema.fields().iter().zip(expected) {
        let Some(want) = want else { continue };
        let got = crate::arrow_out::logical_type(field)?;
        if got != *want {
            return Err(format!(
                "column '{}' is {} now, {} when it was attached: DETACH and ATTACH again",
                field.name(),
                got.sql(),
                want.sql()
            ));
        }
    }
    Ok(())
}

/// The next chunks of the session's result `id` and the batch index they carry (None once it
/// is read to the end); an error is the answer to send.
async fn fetch(
    session: &mut QuackSession,
    id: i128,
) -> Result<(Vec<RecordBatch>, Option<u64>), Vec<u8>> {
    let Some(open) = session.result.as_mut().filter(|r| r.id == id) else {
        return Err(message::error("Result has been closed"));
    };
    let chunks = match open.answers.recv().await {
        None => Vec::new(),
        Some(Ok((chunks, _))) => chunks,
        Some(Err(error)) => {
            open.ended = true;
            return Err(error);
        }
    };
    if chunks.is_empty() {
        open.ended = true;
        return Ok((chunks, None));
    }
    let index = open.next_index;
    open.next_index += 1;
    Ok((chunks, Some(index)))
}

/// Up to [`CHUNKS_PER_ANSWER`] chunks of at most [`MAX_ROWS`] rows from the result, holding no
/// more than [`ANSWER_BYTES`] between them (wide rows make smaller chunks; a chunk holds one row at
/// least); an error is the answer to send.
async fn next_chunks(batches: &mut BatchStream, pending: &mut Option<RecordBatch>) -> Answer {
    let mut chunks = Vec::new();
    let mut bytes = 0usize;
    while chunks.len() < CHUNKS_PER_ANSWER && bytes < ANSWER_BYTES {
        let batch = match pending.take() {
            Some(batch) => batch,
            None => match batches.next().await {
                None => return Ok((chunks, true)),
                Some(Err(e)) => return Err(message::error(e.message())),
                Some(Ok(batch)) => batch,
            },
        };
        if batch.num_rows() == 0 {
            continue;
        }
        let (take, size) = sqe_sessions::rows_within(&batch, ANSWER_BYTES - bytes, MAX_ROWS);
        if take < batch.num_rows() {
            *pending = Some(batch.slice(take, batch.num_rows() - take));
        }
        chunks.push(batch.slice(0, take));
        bytes += size;
    }
    Ok((chunks, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Reader, Writer};
    use arrow::array::Int64Array;
    use sqe_sessions::{QueryResult, SqeError};
    use std::sync::Mutex;

    /// Answers `rows N` with N rows of one BIGINT column, in batches of 5,000, and what an ATTACH
    /// lists: tables `s.t` (n BIGINT, l INTEGER[]) and `s.locked`, which refuses appends. Appended
    /// rows are committed (recorded) only when their stream ends without an error.
    #[derive(Default)]
    struct Counting {
        commits: Arc<Mutex<Vec<(String, usize)>>>,
    }

    fn table_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new(
                "l",
                DataType::List(Arc::new(Field::new_list_field(DataType::Int32, true))),
                true,
            ),
        ]))
    }

    fn rows_of(schema: SchemaRef, batches: Vec<SqeResult<RecordBatch>>) -> QueryResult {
        QueryResult {
            schema,
            batches: futures::stream::iter(batches).boxed(),
            update_count: None,
            session_update: None,
        }
    }

    #[async_trait::async_trait]
    impl QueryService for Counting {
        async fn execute(&self, session: &Session, sql: &str) -> SqeResult<QueryResult> {
            if sql.contains("FROM information_schema.tables") {
                let schema = Arc::new(Schema::new(
                    ["table_schema", "table_name", "table_type"]
                        .map(|n| Field::new(n, DataType::Utf8, false))
                        .to_vec(),
                ));
                let column = |v: [&str; 3]| Arc::new(arrow::array::StringArray::from(v.to_vec()));
                let batch = RecordBatch::try_new(
                    schema.clone(),
                    vec![
                        column(["s", "s", "s"]),
                        column(["locked", "t", "u"]),
                        column(["BASE TABLE", "BASE TABLE", "BASE TABLE"]),
                    ],
                )
                .map_err(|e| SqeError::internal(e.to_string()))?;
                return Ok(rows_of(schema, vec![Ok(batch)]));
            }
            if sql.ends_with(" LIMIT 0") {
                return Ok(rows_of(table_schema(), vec![]));
            }
            if let Some(n) = sql
                .strip_prefix("wide ")
                .and_then(|n| n.parse::<usize>().ok())
            {
                // n rows of a megabyte each, in one batch.
                let schema = Arc::new(Schema::new(vec![Field::new("w", DataType::Utf8, false)]));
                let text = "x".repeat(1 << 20);
                let values = arrow::array::StringArray::from_iter_values((0..n).map(|_| &text));
                let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(values)])
                    .map_err(|e| SqeError::internal(e.to_string()))?;
                return Ok(rows_of(schema, vec![Ok(batch)]));
            }
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
            Ok(rows_of(schema, batches))
        }

        async fn ingest(
            &self,
            _session: &Session,
            target: IngestTarget,
            _schema: SchemaRef,
            mut batches: BatchStream,
        ) -> SqeResult<QueryResult> {
            if target.table == "locked" {
                return Err(SqeError::new(
                    sqe_sessions::ErrorCode::PermissionDenied,
                    "Access Denied: Cannot insert into table iceberg.s.locked",
                ));
            }
            let mut rows = 0;
            while let Some(batch) = batches.next().await {
                rows += batch?.num_rows();
            }
            self.commits
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((target.table, rows));
            Ok(rows_of(Arc::new(Schema::empty()), vec![]))
        }
    }

    fn server() -> QuackServer {
        server_over(Arc::new(Counting::default()), 2)
    }

    fn server_over(service: Arc<Counting>, max_sessions_per_principal: usize) -> QuackServer {
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
            service,
            QuackConfig {
                catalog: "iceberg".into(),
                schema: "default".into(),
                authenticate,
                max_sessions_per_principal,
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
        let (mut total, result) = prepared_rows(&prepared, "n");
        assert_eq!(total, 4 * 5000);
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
        // A statement longer than SQE runs is refused in the engine's words before anything reads
        // it (the service here would answer "cannot run").
        let long = format!("rows 1 --{}", "x".repeat(sqe_sessions::MAX_STATEMENT_BYTES));
        let too_long = quack
            .handle(&request(message::kind::PREPARE_REQUEST, &session, |w| {
                w.field(1).string(&long);
            }))
            .await;
        assert_eq!(
            error_text(&too_long),
            format!(
                "statement is {} bytes long, more than the 1000000 bytes SQE accepts",
                long.len()
            )
        );
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
            "alice holds 2 Quack sessions, the most one user may ([quack] max_sessions_per_user): DETACH one, or wait until one has been unused for [server] result_timeout_secs"
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
        assert_eq!(quack.expire_idle(), 0);
        assert_eq!(quack.open_sessions(), 2);
        // Garbage is an error answer, not a crash.
        assert!(
            error_text(&quack.handle(&[0xde, 0xad]).await).starts_with("malformed Quack message")
        );
    }

    async fn connect(quack: &QuackServer) -> String {
        let connected = quack
            .handle(&request(message::kind::CONNECTION_REQUEST, "", |w| {
                w.field(1).string("alice-token");
            }))
            .await;
        answer(&connected).1
    }

    async fn prepare(quack: &QuackServer, session: &str, sql: &str) -> Vec<u8> {
        quack
            .handle(&request(message::kind::PREPARE_REQUEST, session, |w| {
                w.field(1).string(sql);
            }))
            .await
    }

    /// An append of `rows` rows (n = 0.., l = [n]) to `s.table`, as DuckDB sends it.
    fn append_message(session: &str, table: &str, rows: i64) -> Vec<u8> {
        let lists = arrow::array::ListArray::from_iter_primitive::<arrow::datatypes::Int32Type, _, _>(
            (0..rows).map(|n| Some(vec![Some(n as i32)])),
        );
        let batch = RecordBatch::try_new(
            table_schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(0..rows)),
                Arc::new(lists),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        request(message::kind::APPEND_REQUEST, session, |w| {
            w.field(1)
                .string("s")
                .field(2)
                .string(table)
                .field(3)
                .bool(true);
            w.field(300);
            crate::arrow_out::write_chunk(w, &batch).unwrap_or_else(|e| panic!("{e}"));
            w.end();
        })
    }

    /// A prepare answer of one column `name` with more to fetch: its rows and its result id.
    fn prepared_rows(bytes: &[u8], name: &str) -> (usize, i128) {
        let (kind, _, mut r) = answer(bytes);
        assert_eq!(kind, message::kind::PREPARE_RESPONSE);
        r.begin().unwrap_or_else(|e| panic!("{e}"));
        r.expect(1).unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..r.count().unwrap_or(0) {
            crate::chunk::LogicalType::read(&mut r).unwrap_or_else(|e| panic!("{e}"));
        }
        r.expect(2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.count().and_then(|_| r.string()), Ok(name.to_string()));
        assert_eq!(r.expect(3).and_then(|_| r.bool()), Ok(true));
        r.expect(4).unwrap_or_else(|e| panic!("{e}"));
        let rows = rows_in(&mut r);
        r.expect(5).unwrap_or_else(|e| panic!("{e}"));
        (rows, r.hugeint().unwrap_or_else(|e| panic!("{e}")))
    }

    fn is_success(bytes: &[u8]) -> bool {
        answer(bytes).0 == message::kind::SUCCESS_RESPONSE
    }

    #[tokio::test]
    async fn appends_land_as_one_commit_when_rows_stop_coming() {
        let service = Arc::new(Counting::default());
        let quack = server_over(service.clone(), 2);
        let commits = || {
            service
                .commits
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        };
        let session = connect(&quack).await;

        // An INSERT of 5,000 rows: three appends, one commit, made before the next statement runs.
        for rows in [2048, 2048, 904] {
            assert!(is_success(
                &quack.handle(&append_message(&session, "t", rows)).await
            ));
        }
        assert_eq!(commits(), []);
        assert_eq!(
            answer(&prepare(&quack, &session, "rows 1").await).0,
            message::kind::PREPARE_RESPONSE
        );
        assert_eq!(commits(), [("t".to_string(), 5000)]);
        // Or when the appends pause.
        assert!(is_success(
            &quack.handle(&append_message(&session, "t", 7)).await
        ));
        tokio::time::sleep(APPEND_QUIET * 3).await;
        assert_eq!(commits().last(), Some(&("t".to_string(), 7)));

        // In a transaction (DuckDB opens one around DDL): at COMMIT, and never after a ROLLBACK
        // or a disconnect.
        assert!(
            answer(&prepare(&quack, &session, "BEGIN TRANSACTION").await).0
                == message::kind::PREPARE_RESPONSE
        );
        assert!(is_success(
            &quack.handle(&append_message(&session, "t", 3)).await
        ));
        tokio::time::sleep(APPEND_QUIET * 2).await;
        assert_eq!(commits().len(), 2);
        prepare(&quack, &session, "COMMIT").await;
        assert_eq!(commits().last(), Some(&("t".to_string(), 3)));
        prepare(&quack, &session, "BEGIN TRANSACTION").await;
        assert!(is_success(
            &quack.handle(&append_message(&session, "t", 4)).await
        ));
        assert_eq!(
            answer(&prepare(&quack, &session, "ROLLBACK").await).0,
            message::kind::PREPARE_RESPONSE
        );
        prepare(&quack, &session, "BEGIN TRANSACTION").await;
        assert_eq!(
            error_text(&prepare(&quack, &session, "BEGIN TRANSACTION").await),
            "cannot start a transaction within a transaction"
        );
        assert!(is_success(
            &quack.handle(&append_message(&session, "t", 5)).await
        ));
        quack
            .handle(&request(
                message::kind::DISCONNECT_MESSAGE,
                &session,
                |_| {},
            ))
            .await;
        tokio::time::sleep(APPEND_QUIET * 2).await;
        assert_eq!(commits().len(), 3);

        // A transaction may append to several tables: all are kept until COMMIT, or none.
        let session = connect(&quack).await;
        for end in ["ROLLBACK", "COMMIT"] {
            prepare(&quack, &session, "BEGIN TRANSACTION").await;
            for table in ["t", "u", "t"] {
                assert!(is_success(
                    &quack.handle(&append_message(&session, table, 2)).await
                ));
            }
            tokio::time::sleep(APPEND_QUIET * 2).await;
            assert_eq!(commits().len(), 3);
            prepare(&quack, &session, end).await;
        }
        assert_eq!(commits()[3..], [("t".to_string(), 4), ("u".to_string(), 2)]);
        // A failed append fails the rows appended before it, too.
        assert!(is_success(
            &quack.handle(&append_message(&session, "t", 2)).await
        ));
        let one_column = request(message::kind::APPEND_REQUEST, &session, |w| {
            w.field(1)
                .string("s")
                .field(2)
                .string("t")
                .field(3)
                .bool(true);
            w.field(300);
            crate::chunk::tests::write_int_chunk(w, &[Some(1)]);
            w.end();
        });
        assert_eq!(
            error_text(&quack.handle(&one_column).await),
            "rows appended to s.t: the rows have 1 columns, the table 2 (the rows appended to s.t \
             since its last commit were not stored either)"
        );
        tokio::time::sleep(APPEND_QUIET * 2).await;
        assert_eq!(commits().len(), 5);

        // A table the caller may not write to refuses the first append; an unknown one is named.
        let session = connect(&quack).await;
        assert_eq!(
            error_text(&quack.handle(&append_message(&session, "locked", 1)).await),
            "the rows appended to s.locked were not stored: Access Denied: Cannot insert into table iceberg.s.locked"
        );
        assert_eq!(
            error_text(&quack.handle(&append_message(&session, "nowhere", 1)).await),
            "table 'iceberg.s.nowhere' not found"
        );
        assert_eq!(commits().len(), 5);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Truncated, corrupted and extended messages of every kind are answered (most with an
        /// error), never a panic, and the server goes on answering.
        #[test]
        fn damaged_messages_are_answered(
            seed in 0usize..4,
            cut in proptest::prelude::any::<proptest::sample::Index>(),
            flips in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()), 0..6),
            tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8),
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap_or_else(|e| panic!("{e}"));
            runtime.block_on(async {
                let quack = server_over(Arc::new(Counting::default()), 3);
                let session = connect(&quack).await;
                let mut body = match seed {
                    0 => append_message(&session, "t", 300),
                    1 => request(message::kind::PREPARE_REQUEST, &session, |w| {
                        w.field(1).string("SELECT #2, #1 FROM t");
                    }),
                    2 => request(message::kind::CONNECTION_REQUEST, "", |w| {
                        w.field(1).string("alice-token");
                    }),
                    _ => request(message::kind::FETCH_REQUEST, &session, |w| {
                        w.field(1).hugeint(1);
                    }),
                };
                for (at, byte) in &flips {
                    let i = at.index(body.len());
                    body[i] = *byte;
                }
                body.truncate(cut.index(body.len() + 1));
                body.extend(&tail);
                let answered = quack.handle(&body).await;
                assert!(!answered.is_empty());
                let fresh = connect(&quack).await;
                let fine = prepare(&quack, &fresh, "rows 3").await;
                assert_eq!(answer(&fine).0, message::kind::PREPARE_RESPONSE);
            });
        }
    }

    /// A shutdown waits for a result its client has not read to the end, not for one it has, nor
    /// for a session without one.
    #[tokio::test]
    async fn unread_results_are_open_work() {
        let quack = server();
        let idle = connect(&quack).await;
        let reading = connect(&quack).await;
        assert_eq!((quack.open_sessions(), quack.open_work()), (2, 0));
        let (first, result) = prepared_rows(&prepare(&quack, &reading, "rows 60000").await, "n");
        assert_eq!(quack.open_work(), 1);
        let fetch = request(message::kind::FETCH_REQUEST, &reading, |w| {
            w.field(1).hugeint(result);
        });
        // Every answer with rows leaves the result open, the last one's too: the client fetches
        // once more to be told the end, and a shutdown waits for that.
        let mut rows = 0;
        while quack.open_work() > 0 {
            let bytes = quack.handle(&fetch).await;
            let (kind, _, mut r) = answer(&bytes);
            assert_eq!(kind, message::kind::FETCH_RESPONSE);
            r.begin().unwrap_or_else(|e| panic!("{e}"));
            if r.has(1).unwrap_or(false) {
                rows += rows_in(&mut r);
                assert_eq!(quack.open_work(), 1, "after {rows} rows");
            } else {
                assert_eq!(quack.open_work(), 0);
            }
        }
        assert_eq!(rows + first, 60_000);
        // Read to its end: the session stays, with nothing for a shutdown to wait for.
        assert_eq!(quack.open_sessions(), 2);
        let (_, result) = prepared_rows(&prepare(&quack, &idle, "rows 60000").await, "n");
        assert_ne!(result, 0);
        assert_eq!(quack.open_work(), 1);
        quack
            .handle(&request(message::kind::DISCONNECT_MESSAGE, &idle, |_| {}))
            .await;
        assert_eq!((quack.open_sessions(), quack.open_work()), (1, 0));
    }

    #[tokio::test]
    async fn wide_rows_come_in_smaller_chunks() {
        let quack = server();
        let session = connect(&quack).await;
        // 40 rows of a megabyte: no answer carries much more than ANSWER_BYTES.
        let mut answered = vec![prepare(&quack, &session, "wide 40").await];
        let (mut total, result) = prepared_rows(&answered[0], "w");
        loop {
            let fetched = quack
                .handle(&request(message::kind::FETCH_REQUEST, &session, |w| {
                    w.field(1).hugeint(result);
                }))
                .await;
            let (_, _, mut r) = answer(&fetched);
            r.begin().unwrap_or_else(|e| panic!("{e}"));
            if !r.has(1).unwrap_or(false) {
                break;
            }
            total += rows_in(&mut r);
            answered.push(fetched);
        }
        assert_eq!(total, 40);
        assert!(answered.len() >= 3, "{} answers", answered.len());
        for a in &answered {
            assert!(
                a.len() < ANSWER_BYTES + (2 << 20),
                "an answer of {} bytes",
                a.len()
            );
        }
    }
}

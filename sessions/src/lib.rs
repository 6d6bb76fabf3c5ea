//! The protocol-neutral core every SQE front end shares: who is asking ([`Principal`], [`Credential`]),
//! the state of their conversation ([`Session`]), the one call every protocol makes ([`QueryService`]),
//! and the one error type with a code each protocol maps exhaustively ([`SqeError`], [`ErrorCode`]).
//!
//! Nothing here knows about a wire protocol or about DataFusion.

mod batch_bytes;
mod error;
mod handles;
mod results;
mod session;
mod sql_text;
mod store;
mod value_types;

pub use batch_bytes::rows_within;
pub use error::{ErrorCode, SqeError, SqeResult};
pub use handles::{AtCapacity, Caps, HandleMap, ProtocolHandles, Refused, random_handle};
pub use session::{Credential, Principal, Scopes, Session, SessionUpdate};
pub use sql_text::{
    MAX_PARAMETERS, MAX_STATEMENT_BYTES, bind_parameters, check_statement_length, quote_identifier,
    too_many_parameters,
};
pub use store::SessionStore;
pub use value_types::{INSTANT, JSON_EXTENSION, ZONE, is_json_field, zoned_type, zoned_unit};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use futures::stream::BoxStream;

/// A stream of result batches; an error ends it.
pub type BatchStream = BoxStream<'static, SqeResult<RecordBatch>>;

/// What one statement produced.
pub struct QueryResult {
    /// The schema of the batches in `batches` (for statements that return no rows, an empty schema).
    pub schema: SchemaRef,
    /// The rows, streamed.
    pub batches: BatchStream,
    /// Rows written by INSERT / CTAS, when the statement was a write.
    pub update_count: Option<u64>,
    /// Session state the statement changed (`USE`), for the caller to apply and, where a protocol
    /// reports such changes (Trino's `X-Trino-Set-Catalog`), to report.
    pub session_update: Option<SessionUpdate>,
}

impl std::fmt::Debug for QueryResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryResult")
            .field("schema", &self.schema)
            .field("update_count", &self.update_count)
            .field("session_update", &self.session_update)
            .finish_non_exhaustive()
    }
}

/// What to do when the target of a bulk ingest does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfMissing {
    Create,
    Fail,
}

/// What to do when the target of a bulk ingest exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfExists {
    Fail,
    Append,
    Replace,
}

/// The table a bulk ingest writes to; catalog and schema default to the session's.
#[derive(Debug, Clone)]
pub struct IngestTarget {
    pub catalog: Option<String>,
    pub schema: Option<String>,
    pub table: String,
    pub if_missing: IfMissing,
    pub if_exists: IfExists,
}

/// The one call every protocol makes. Implemented by the engine; protocols depend only on this trait.
#[async_trait::async_trait]
pub trait QueryService: Send + Sync {
    /// Runs exactly one SQL statement as `session`'s principal.
    async fn execute(&self, session: &Session, sql: &str) -> SqeResult<QueryResult>;

    /// Runs `sql` as `execute` does if it is exactly one statement that only reads (a query
    /// without a data-modifying part, EXPLAIN, SHOW, DESCRIBE); refuses anything else, saying why.
    async fn execute_read_only(&self, _session: &Session, _sql: &str) -> SqeResult<QueryResult> {
        Err(SqeError::unsupported(
            "read-only statements are not supported",
        ))
    }

    /// Writes a stream of rows with `schema` into `target` (Flight SQL's bulk ingest). The result
    /// is a write's: its `update_count` is the number of rows written.
    async fn ingest(
        &self,
        _session: &Session,
        _target: IngestTarget,
        _schema: SchemaRef,
        _batches: BatchStream,
    ) -> SqeResult<QueryResult> {
        Err(SqeError::unsupported("bulk ingest is not supported"))
    }

    /// Whether `principal` is an admin, who may end any user's queries and results, reads
    /// everyone's queries and is not held by access rules. This is the one rule: protocols ask it
    /// here and never decide it themselves. SQE's engine answers: a holder of one of `[auth]
    /// admin_roles`; with no admin roles set, everyone when `[access] default` is `"allow"` and
    /// nobody when it is `"deny"`. A service that has no admins keeps the default: nobody.
    fn is_admin(&self, _principal: &Principal) -> bool {
        false
    }
}

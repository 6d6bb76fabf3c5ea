//! One error type for every front end. Each protocol maps [`ErrorCode`] to its own wire code with an
//! exhaustive `match`, so a new code forces a decision everywhere.
//!
//! The text of an internal error never reaches a client: it is logged when the error is made, under
//! an id that the error's own message names, so a user can quote it and an operator can find it.

use std::fmt;

/// Longest message sent to a client; longer text is cut (the full text stays in the log).
const MAX_MESSAGE_LEN: usize = 4096;

/// Protocol-neutral classification of a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// Malformed SQL, a type error, a bad argument: the caller can fix the statement.
    InvalidInput,
    /// A table, schema, catalog, column or file that does not exist.
    NotFound,
    /// Something with that name exists already.
    AlreadyExists,
    /// A valid request the engine does not support (yet).
    Unsupported,
    /// A concurrent change won the race (e.g. an Iceberg commit conflict that retries did not resolve).
    Conflict,
    /// The caller is not allowed to do this.
    PermissionDenied,
    /// The caller could not be identified.
    Unauthenticated,
    /// Out of memory, too many queries, a queue timeout.
    ResourceExhausted,
    /// The query was cancelled.
    Cancelled,
    /// A failure of a dependency (object store, catalog service) rather than of the request.
    External,
    /// A bug, an unexpected state, or a fault of the server's own files; its text is logged and
    /// the client is told only an id to quote.
    Internal,
}

impl ErrorCode {
    /// A stable name for logs and wire protocols that carry a textual code.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput => "INVALID_INPUT",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::AlreadyExists => "ALREADY_EXISTS",
            ErrorCode::Unsupported => "NOT_SUPPORTED",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::PermissionDenied => "PERMISSION_DENIED",
            ErrorCode::Unauthenticated => "UNAUTHENTICATED",
            ErrorCode::ResourceExhausted => "RESOURCE_EXHAUSTED",
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::External => "EXTERNAL",
            ErrorCode::Internal => "INTERNAL",
        }
    }
}

/// An error with a code and a message fit for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqeError {
    code: ErrorCode,
    message: String,
}

pub type SqeResult<T> = Result<T, SqeError>;

impl SqeError {
    /// An error with `message` for the caller; for [`ErrorCode::Internal`], `message` goes to the
    /// log and the caller gets a generic message with the id it was logged under.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let mut message: String = message.into();
        if code == ErrorCode::Internal {
            let id = &uuid::Uuid::new_v4().simple().to_string()[..12];
            tracing::error!(error_id = id, "internal error: {message}");
            return Self {
                code,
                message: format!("internal error {id}; the log has the details"),
            };
        }
        if message.len() > MAX_MESSAGE_LEN {
            let mut cut = MAX_MESSAGE_LEN;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        Self { code, message }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    pub fn already_exists(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::AlreadyExists, message)
    }

    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unsupported, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    pub fn code(&self) -> ErrorCode {
        self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for SqeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SqeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_text_stays_out_of_the_message() {
        let err = SqeError::internal("/srv/warehouse/x.parquet: unexpected end of file");
        assert_eq!(err.code(), ErrorCode::Internal);
        assert!(!err.message().contains("/srv"), "{}", err.message());
        let id = err
            .message()
            .strip_prefix("internal error ")
            .and_then(|m| m.strip_suffix("; the log has the details"));
        assert!(
            id.is_some_and(|id| id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit())),
            "{}",
            err.message()
        );
    }

    #[test]
    fn long_messages_are_capped_on_a_char_boundary() {
        let err = SqeError::invalid("é".repeat(MAX_MESSAGE_LEN));
        assert!(err.message().len() <= MAX_MESSAGE_LEN + "…".len());
        assert!(err.message().ends_with('…'));
    }
}

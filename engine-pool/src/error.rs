//! Turning DataFusion and Iceberg errors into [`SqeError`]s: classified by root cause, reduced to one
//! line that names the problem, internal details kept out of the message.

use datafusion::error::DataFusionError;
use sqe_sessions::{ErrorCode, SqeError};

const PREFIXES: &[&str] = &[
    "Error during planning: ",
    "Schema error: ",
    "SQL error: ",
    "This feature is not implemented: ",
    "Execution error: ",
    "Arrow error: ",
    "External error: ",
    "Parquet error: ",
    "Invalid argument error: ",
    "Object Store error: ",
    "IO error: ",
    "Cast error: ",
    "Parser error: ",
    "ParserError(",
];

/// One line, without the wrapper prefixes DataFusion and Arrow add.
pub fn one_line(message: &str) -> String {
    let mut s = message.trim();
    loop {
        let before = s;
        for p in PREFIXES {
            if let Some(rest) = s.strip_prefix(p) {
                s = rest.trim_start();
            }
        }
        if s == before {
            break;
        }
    }
    let s = s
        .strip_suffix(')')
        .filter(|_| message.contains("ParserError("))
        .unwrap_or(s);
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn from_iceberg(e: iceberg::Error) -> SqeError {
    use iceberg::ErrorKind as K;
    let code = match e.kind() {
        K::TableNotFound | K::NamespaceNotFound => ErrorCode::NotFound,
        K::TableAlreadyExists | K::NamespaceAlreadyExists => ErrorCode::AlreadyExists,
        K::FeatureUnsupported => ErrorCode::Unsupported,
        K::CatalogCommitConflicts => ErrorCode::Conflict,
        K::DataInvalid | K::PreconditionFailed => ErrorCode::InvalidInput,
        _ => ErrorCode::Internal,
    };
    // iceberg's Display appends context and a backtrace on later lines: keep the message.
    SqeError::new(code, one_line(e.message()))
}

pub fn from_datafusion(e: DataFusionError) -> SqeError {
    let root = e.find_root();
    if let DataFusionError::External(inner) = root {
        if let Some(ice) = inner.downcast_ref::<iceberg::Error>() {
            return from_iceberg(ice.clone_for_report());
        }
        if let Some(sqe) = inner.downcast_ref::<SqeError>() {
            return sqe.clone();
        }
    }
    let message = one_line(&root.to_string());
    let code = match root {
        DataFusionError::SQL(..) => ErrorCode::InvalidInput,
        DataFusionError::NotImplemented(_) => ErrorCode::Unsupported,
        DataFusionError::ResourcesExhausted(_) => ErrorCode::ResourceExhausted,
        DataFusionError::Internal(_) => ErrorCode::Internal,
        DataFusionError::ObjectStore(_) | DataFusionError::IoError(_) => {
            if message.contains("not found") || message.contains("No such file") {
                ErrorCode::NotFound
            } else {
                ErrorCode::External
            }
        }
        DataFusionError::SchemaError(..) => {
            if message.contains("No field named") {
                ErrorCode::NotFound
            } else {
                ErrorCode::InvalidInput
            }
        }
        DataFusionError::Plan(m) if m.contains("not found") => ErrorCode::NotFound,
        _ => ErrorCode::InvalidInput,
    };
    if code == ErrorCode::Internal {
        log::error!("internal error: {root}");
    }
    SqeError::new(code, message)
}

/// iceberg errors are not `Clone`; rebuild one with the same kind and message.
trait CloneForReport {
    fn clone_for_report(&self) -> iceberg::Error;
}

impl CloneForReport for iceberg::Error {
    fn clone_for_report(&self) -> iceberg::Error {
        iceberg::Error::new(self.kind(), self.message().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_stripped_and_lines_joined() {
        assert_eq!(
            one_line("Error during planning: table 'a.b.c' not found\n  more"),
            "table 'a.b.c' not found more"
        );
    }

    #[test]
    fn unknown_table_is_not_found() {
        let e = from_datafusion(DataFusionError::Plan(
            "table 'iceberg.default.nope' not found".into(),
        ));
        assert_eq!(
            (e.code(), e.message()),
            (
                ErrorCode::NotFound,
                "table 'iceberg.default.nope' not found"
            )
        );
    }
}

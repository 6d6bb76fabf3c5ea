//! Turning DataFusion and Iceberg errors into [`SqeError`]s: classified by root cause, reduced to one
//! line that names the problem, internal details kept out of the message.

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use sqe_sessions::{ErrorCode, SqeError};

/// What a remote catalog refused, or why it could not be reached, kept as the source of an
/// iceberg error so that the engine tells the caller the catalog's own words with a code of their
/// own (see [`from_iceberg`]), rather than an internal error.
#[derive(Debug)]
pub struct CatalogRefusal {
    pub code: ErrorCode,
    pub message: String,
}

impl std::fmt::Display for CatalogRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CatalogRefusal {}

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

/// A remote catalog's own answer (a refusal, an outage), which is the caller's to read.
fn catalog_refusal(e: &(dyn std::error::Error + 'static)) -> Option<SqeError> {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(refusal) = err.downcast_ref::<CatalogRefusal>() {
            return Some(SqeError::new(refusal.code, refusal.message.clone()));
        }
        next = err.source();
    }
    None
}

/// An object store's failure (S3 and the like, through iceberg's OpenDAL storage) anywhere in
/// `e`'s chain of sources. It is the caller's to read: it names the store, the operation and the
/// object, and no credential.
fn storage_failure(e: &(dyn std::error::Error + 'static)) -> Option<SqeError> {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(failure) = err.downcast_ref::<opendal::Error>() {
            let code = match failure.kind() {
                opendal::ErrorKind::NotFound => ErrorCode::NotFound,
                opendal::ErrorKind::PermissionDenied => ErrorCode::PermissionDenied,
                _ => ErrorCode::External,
            };
            let text = one_line(&failure.to_string());
            return Some(SqeError::new(code, format!("object storage: {text}")));
        }
        next = err.source();
    }
    None
}

pub fn from_iceberg(e: iceberg::Error) -> SqeError {
    use iceberg::ErrorKind as K;
    if let Some(refusal) = catalog_refusal(&e).or_else(|| storage_failure(&e)) {
        return refusal;
    }
    let code = match e.kind() {
        K::TableNotFound | K::NamespaceNotFound => ErrorCode::NotFound,
        K::TableAlreadyExists | K::NamespaceAlreadyExists => ErrorCode::AlreadyExists,
        K::FeatureUnsupported => ErrorCode::Unsupported,
        K::CatalogCommitConflicts => ErrorCode::Conflict,
        K::DataInvalid | K::PreconditionFailed => ErrorCode::InvalidInput,
        K::Unexpected => ErrorCode::Internal,
        // ErrorKind is non-exhaustive: a kind added later is a server fault until placed above.
        _ => ErrorCode::Internal,
    };
    // iceberg's Display appends context and a backtrace on later lines: keep the message.
    SqeError::new(code, one_line(e.message()))
}

/// A missing file the caller named is theirs to fix; any other I/O failure is the server's.
fn io_code(kind: std::io::ErrorKind) -> ErrorCode {
    if kind == std::io::ErrorKind::NotFound {
        ErrorCode::NotFound
    } else {
        ErrorCode::Internal
    }
}

/// Arrow's errors: bad values in the caller's data or query are theirs; a broken file, stream or
/// buffer is the server's.
fn arrow_code(e: &ArrowError) -> ErrorCode {
    match e {
        ArrowError::CastError(_)
        | ArrowError::ParseError(_)
        | ArrowError::DivideByZero
        | ArrowError::ArithmeticOverflow(_)
        | ArrowError::ComputeError(_)
        | ArrowError::InvalidArgumentError(_)
        | ArrowError::SchemaError(_)
        | ArrowError::CsvError(_)
        | ArrowError::JsonError(_) => ErrorCode::InvalidInput,
        ArrowError::NotYetImplemented(_) => ErrorCode::Unsupported,
        ArrowError::MemoryError(_) => ErrorCode::ResourceExhausted,
        ArrowError::IoError(_, io) => io_code(io.kind()),
        ArrowError::ExternalError(_)
        | ArrowError::IpcError(_)
        | ArrowError::ParquetError(_)
        | ArrowError::AvroError(_)
        | ArrowError::CDataInterface(_)
        | ArrowError::DictionaryKeyOverflowError
        | ArrowError::RunEndIndexOverflowError
        | ArrowError::OffsetOverflowError(_) => ErrorCode::Internal,
    }
}

fn code_of(root: &DataFusionError, message: &str) -> ErrorCode {
    match root {
        DataFusionError::SQL(..)
        | DataFusionError::Configuration(_)
        | DataFusionError::Execution(_) => ErrorCode::InvalidInput,
        DataFusionError::Plan(m) if m.contains("not found") => ErrorCode::NotFound,
        DataFusionError::Plan(_) => ErrorCode::InvalidInput,
        DataFusionError::SchemaError(..) if message.contains("No field named") => {
            ErrorCode::NotFound
        }
        DataFusionError::SchemaError(..) => ErrorCode::InvalidInput,
        DataFusionError::NotImplemented(_) => ErrorCode::Unsupported,
        DataFusionError::ResourcesExhausted(_) => ErrorCode::ResourceExhausted,
        DataFusionError::ArrowError(e, _) => arrow_code(e),
        DataFusionError::IoError(e) => io_code(e.kind()),
        DataFusionError::ObjectStore(e) => {
            if matches!(**e, datafusion::object_store::Error::NotFound { .. }) {
                ErrorCode::NotFound
            } else {
                ErrorCode::Internal
            }
        }
        // A failed read of a Parquet file, a task that died, a fault outside DataFusion.
        DataFusionError::ParquetError(_)
        | DataFusionError::ExecutionJoin(_)
        | DataFusionError::External(_)
        | DataFusionError::Internal(_)
        | DataFusionError::Substrait(_)
        | DataFusionError::Ffi(_) => ErrorCode::Internal,
        // Wrappers: the wrapped error decides.
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            code_of(inner.find_root(), message)
        }
        DataFusionError::Shared(inner) => code_of(inner.find_root(), message),
        DataFusionError::Collection(errors) => errors
            .first()
            .map_or(ErrorCode::Internal, |e| code_of(e.find_root(), message)),
    }
}

pub fn from_datafusion(e: DataFusionError) -> SqeError {
    if let Some(failure) = storage_failure(&e) {
        return failure;
    }
    let root = e.find_root();
    if let DataFusionError::External(inner) = root {
        if let Some(ice) = inner.downcast_ref::<iceberg::Error>() {
            return catalog_refusal(ice)
                .or_else(|| storage_failure(ice))
                .unwrap_or_else(|| from_iceberg(ice.clone_for_report()));
        }
        if let Some(sqe) = inner.downcast_ref::<SqeError>() {
            return sqe.clone();
        }
    }
    let message = one_line(&root.to_string());
    if let Some(out_of_range) = crate::trino_sql::overflow_text::out_of_range(&message) {
        return SqeError::new(ErrorCode::InvalidInput, out_of_range);
    }
    match code_of(root, &message) {
        // The log gets all of it, context included (the caller gets only the id).
        ErrorCode::Internal => SqeError::internal(e.to_string()),
        code => SqeError::new(code, message),
    }
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
    fn broken_files_are_the_servers_fault() {
        let parquet = DataFusionError::ParquetError(Box::new(
            datafusion::parquet::errors::ParquetError::EOF("/srv/w/t/data.parquet".into()),
        ));
        let e = from_datafusion(parquet);
        assert_eq!(e.code(), ErrorCode::Internal);
        assert!(!e.message().contains("/srv"), "{}", e.message());
        let cast = DataFusionError::ArrowError(
            Box::new(ArrowError::CastError(
                "Cannot cast string 'x' to Int32".into(),
            )),
            None,
        );
        assert_eq!(
            from_datafusion(cast).message(),
            "Cannot cast string 'x' to Int32"
        );
        let missing = DataFusionError::IoError(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "/data/nope.csv",
        ));
        assert_eq!(from_datafusion(missing).code(), ErrorCode::NotFound);
    }

    #[test]
    fn integer_casts_out_of_range_in_trinos_words() {
        let cast = DataFusionError::Context(
            "Optimizer rule 'simplify_expressions' failed".into(),
            Box::new(DataFusionError::ArrowError(
                Box::new(ArrowError::CastError(
                    "Can't cast value 3000000000 to type Int32".into(),
                )),
                None,
            )),
        );
        let e = from_datafusion(cast);
        assert_eq!(
            (e.code(), e.message()),
            (
                ErrorCode::InvalidInput,
                "Out of range for integer: 3000000000"
            )
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

//! The SQE engine: DataFusion over Iceberg catalogs. It owns statement routing (queries to DataFusion;
//! DDL, writes, SHOW and time travel to SQE's own code), the SQLite-backed warehouse catalog, metadata
//! tables and the file table functions. It knows nothing of wire protocols: front ends call it through
//! [`sqe_sessions::QueryService`].

mod access;
mod admission;
mod attach;
pub mod catalog;
mod column_masks;
mod column_privileges;
mod ddl;
mod dialect;
mod engine;
pub mod error;
mod file_access;
mod files;
pub mod guard;
mod ingest;
mod object_stores;
mod optimizer;
mod prepass;
mod ranger;
mod read_only;
mod row_filters;
mod secret_store;
mod secrets;
mod session_properties;
mod show_functions;
mod show_stats;
mod trino_sql;
pub mod types;
mod views;
mod write;

pub use access::AccessDefault;
pub use admission::{AdmissionConfig, QueryInfo, QueryRegistry, QueryState};
pub use catalog::hms::HmsConfig;
pub use catalog::rest::{RestAuth, RestCatalogConfig};
pub use catalog::sql::PostgresConfig;
pub use engine::{Engine, EngineConfig, PersistentSecrets};
pub use file_access::{FileAccess, FileRules};
pub use guard::WORKER_STACK;
pub use prepass::{ends_in_statement, is_incomplete, split_statements};
pub use ranger::RangerConfig;

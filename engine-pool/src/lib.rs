//! The SQE engine: DataFusion over Iceberg catalogs. [`Engine`] (engine.rs) coordinates the parts,
//! each a folder or a file: statement/ (parsing), planner/ (from a statement to a plan its caller may
//! run), governance/ (who may do what), catalog/ (the Iceberg catalogs, scans, metadata tables),
//! write/ (appends, removals, DDL, views), show/, trino_sql/ (Trino's semantics), optimizer/ (SQE's
//! physical rules), files/, secrets/, and admission/ (slots shared fairly among users, and the query
//! registry). It knows nothing of wire protocols: front ends call it through
//! [`sqe_sessions::QueryService`].

mod admission;
mod attach;
pub mod catalog;
mod context;
mod engine;
pub mod error;
mod files;
mod governance;
pub mod guard;
mod names;
mod object_stores;
mod optimizer;
mod planner;
mod secrets;
mod session_properties;
mod session_scoped;
mod show;
mod statement;
mod trino_sql;
pub mod types;
mod write;

pub use admission::{AdmissionConfig, QueryInfo, QueryRegistry, QueryState};
pub use catalog::hms::HmsConfig;
pub use catalog::rest::{RestAuth, RestCatalogConfig};
pub use catalog::sql::PostgresConfig;
pub use engine::{Engine, EngineConfig, PersistentSecrets};
pub use files::policy::{FileAccess, FileRules};
pub use governance::model::AccessDefault;
pub use governance::ranger::RangerConfig;
pub use guard::WORKER_STACK;
pub use statement::prepass::{ends_in_statement, is_incomplete, split_statements};
pub use write::maintain::duration as parse_duration;

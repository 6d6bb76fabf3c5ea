//! Statements that change what the catalogs hold: rows (INSERT and CREATE TABLE AS, append.rs;
//! Flight SQL's bulk ingest, ingest.rs; TRUNCATE and DELETE of every row, remove.rs, through the
//! snapshot producer of change.rs), schemas and tables (CREATE, DROP, ALTER TABLE: ddl.rs)
//! and views (views.rs). Each checks the caller's privileges with governance before it changes
//! anything, and commits to Iceberg as one atomic compare-and-swap on the catalog.

pub mod append;
pub mod change;
pub mod ddl;
pub mod ingest;
pub mod remove;
pub mod views;

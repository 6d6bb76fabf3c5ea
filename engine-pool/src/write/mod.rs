//! Statements that change what the catalogs hold: rows (INSERT and CREATE TABLE AS, append.rs;
//! Flight SQL's bulk ingest, ingest.rs), schemas and tables (CREATE, DROP, ALTER TABLE: ddl.rs)
//! and views (views.rs). Each checks the caller's privileges with governance before it changes
//! anything, and commits to Iceberg as one atomic compare-and-swap on the catalog.

pub mod append;
pub mod ddl;
pub mod ingest;
pub mod views;

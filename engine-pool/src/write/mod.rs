//! Statements that change what the catalogs hold: rows (INSERT and CREATE TABLE AS, append.rs;
//! INSERT OVERWRITE, overwrite.rs; Flight SQL's bulk ingest, ingest.rs; TRUNCATE and DELETE of
//! whole files, remove.rs; DELETE, UPDATE and MERGE of single rows, rows.rs and merge.rs; data
//! files written for all of them by files.rs, and the snapshots that remove files made by
//! change.rs), table maintenance (maintain.rs), branches and tags (refs.rs; writes to a branch, target.rs), schemas and tables (CREATE, DROP, ALTER TABLE: ddl.rs; column changes, columns.rs; sort orders, sorting.rs) and views (views.rs). Each
//! checks the caller's privileges with governance before it changes anything, and commits to
//! Iceberg as one atomic compare-and-swap on the catalog.

pub mod append;
pub mod change;
pub mod columns;
pub mod ddl;
pub mod files;
pub mod ingest;
pub mod maintain;
pub mod merge;
pub mod overwrite;
pub mod patch;
pub mod refs;
pub mod remove;
pub mod rows;
pub mod sorting;
pub mod target;
pub mod views;

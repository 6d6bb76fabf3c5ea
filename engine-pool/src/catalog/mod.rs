//! Iceberg catalogs and their DataFusion providers.

pub mod backend;
mod balance;
pub(crate) mod column_stats;
pub(crate) mod deletion_vectors;
mod disk_cache;
mod file_io_store;
mod file_plan;
pub mod hms;
pub mod information;
pub mod metadata_tables;
pub mod mounts;
pub mod object_cache;
mod parquet_read;
pub mod policy_store;
mod predicate;
pub mod provider;
mod read_ahead;
pub mod rest;
pub(crate) mod row_ids;
pub mod scan;
pub mod sql;
pub(crate) mod sql_db;
pub mod storage;
pub mod system;
mod thrift;
pub mod view;

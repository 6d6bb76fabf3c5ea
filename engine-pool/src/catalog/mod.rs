//! Iceberg catalogs and their DataFusion providers.

mod column_stats;
pub(crate) mod dynamic_filter;
pub mod information;
pub mod metadata_tables;
mod parquet_read;
pub mod provider;
pub mod scan;
pub mod sqlite;

//! Iceberg catalogs and their DataFusion providers.

pub mod information;
pub mod metadata_tables;
pub mod provider;
pub mod scan;
pub mod sqlite;

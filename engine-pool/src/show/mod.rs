//! SHOW and DESCRIBE, in Trino's shape (its column names and type spellings): what the caller may
//! see of the catalogs (SHOW CATALOGS, SCHEMAS, TABLES, COLUMNS; DESCRIBE; SHOW CREATE TABLE and
//! VIEW), of the engine (SHOW FUNCTIONS: functions.rs) and of a table's statistics (SHOW STATS:
//! stats.rs).

pub mod functions;
pub mod stats;

//! Files a statement reads or writes directly, outside any catalog: the file table functions
//! (`read_parquet`, `read_csv`, `read_json`, a bare path in FROM) and the policy deciding which
//! paths they, `COPY … TO`, a table's `location` and `ATTACH` may reach.

pub mod policy;
pub mod table_functions;

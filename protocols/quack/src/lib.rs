//! DuckDB's Quack protocol (version 1, as DuckDB 1.5.5 speaks it; WIRE.md holds the facts): the
//! BinarySerializer codec, the messages and DuckDB's DataChunks. The server that puts them in front
//! of a `QueryService` comes next (issue 17).

pub mod arrow_out;
pub mod chunk;
pub mod codec;
pub mod message;

//! DuckDB's Quack protocol (version 1, as DuckDB 1.5.5 speaks it; WIRE.md holds the facts): the
//! BinarySerializer codec, the messages, DuckDB's DataChunks and the conversation (connect,
//! prepare, fetch, disconnect) in front of a `QueryService`. Its HTTP listener, appends and the
//! emulation of what DuckDB's ATTACH asks come next (issue 17).

pub mod arrow_out;
pub mod chunk;
pub mod codec;
pub mod message;
pub mod server;

//! DuckDB's Quack protocol (version 1, as DuckDB 1.5.5 speaks it; WIRE.md holds the facts): the
//! BinarySerializer codec, the messages, DuckDB's DataChunks both ways, the conversation (connect,
//! prepare, fetch, append, disconnect) in front of a `QueryService`, what DuckDB's ATTACH asks, and
//! `POST /quack`.

pub mod arrow_in;
pub mod arrow_out;
pub mod attach;
pub mod chunk;
pub mod codec;
pub mod message;
pub mod server;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

/// The largest Quack message taken (an append of 2,048 wide rows fits many times over).
const MAX_BODY_BYTES: usize = 64 << 20;

/// `POST /quack`: one message in, one out, always HTTP 200 (failures are error messages), whatever
/// content type the client sends (DuckDB sends application/octet-stream, ADBC application/duckdb).
pub fn router(server: Arc<server::QuackServer>) -> Router {
    // (The gateway keeps `server` too, to reap idle sessions and, at shutdown, to wait for the
    // results clients are still reading.)
    async fn post(
        State(server): State<Arc<server::QuackServer>>,
        body: Bytes,
    ) -> impl IntoResponse {
        let answer = server.handle(&body).await;
        ([(header::CONTENT_TYPE, "application/vnd.duckdb")], answer)
    }
    Router::new()
        .route("/quack", axum::routing::post(post))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(server)
}

//! The HTTP authentication layer: one place per transport that reads credentials. It puts the
//! [`Principal`](sqe_sessions::Principal) and [`Credential`](sqe_sessions::Credential) into the
//! request extensions, or answers 401 saying why.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sqe_sessions::ErrorCode;

use crate::{Authenticator, Presented};

fn refuse(grpc: bool, status: StatusCode, message: &str) -> Response {
    if grpc {
        // gRPC callers read the outcome from grpc-status / grpc-message, not the HTTP status.
        let code = if status == StatusCode::UNAUTHORIZED {
            "16"
        } else {
            "14"
        };
        let mut response = StatusCode::OK.into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        headers.insert("grpc-status", HeaderValue::from_static(code));
        if let Ok(v) = HeaderValue::from_str(&percent_encode(message)) {
            headers.insert("grpc-message", v);
        }
        return response;
    }
    let mut response = (status, message.to_string()).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"sqe\", Basic realm=\"sqe\""),
        );
    }
    response
}

/// gRPC's grpc-message encoding: printable ASCII except `%` as is, everything else as %XX.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Logs a refused request: the access log names the peer, the path and the reason, never what
/// was presented.
pub(crate) fn refusal_log(request: &Request) -> impl Fn(&str) + use<> {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.to_string())
        .unwrap_or_default();
    let path = request.uri().path().to_string();
    move |reason: &str| {
        tracing::warn!(remote = %peer, path = %path, reason, "authentication failed");
    }
}

/// Use with `axum::middleware::from_fn_with_state(authenticator, http_layer)`. Serves HTTP and gRPC
/// routes alike: a gRPC request is refused with a gRPC status.
pub async fn http_layer(
    State(auth): State<Arc<Authenticator>>,
    mut request: Request,
    next: Next,
) -> Response {
    let grpc = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    let value = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let refused = refusal_log(&request);
    let failed = |e: &sqe_sessions::SqeError| refused(e.message());
    let presented = match Presented::from_authorization(value) {
        Ok(p) => p,
        Err(e) => {
            failed(&e);
            return refuse(grpc, StatusCode::UNAUTHORIZED, e.message());
        }
    };
    match auth.authenticate(&presented).await {
        Ok(Some(who)) => {
            request.extensions_mut().insert(who.principal);
            if let Some(c) = who.credential {
                request.extensions_mut().insert(c);
            }
            next.run(request).await
        }
        Ok(None) => next.run(request).await,
        Err(e) => {
            failed(&e);
            match e.code() {
                ErrorCode::External => refuse(grpc, StatusCode::SERVICE_UNAVAILABLE, e.message()),
                _ => refuse(grpc, StatusCode::UNAUTHORIZED, e.message()),
            }
        }
    }
}

/// [`http_layer`] for routes whose URI and headers are themselves the caller's proof (a spooled
/// Trino segment's, handed to one client in an authenticated answer, which clients fetch without
/// credentials, as from an object store): a request that presents no credentials passes as
/// nobody; one that does is authenticated as on every other route, and refused when they fail.
pub async fn optional_http_layer(
    state: State<Arc<Authenticator>>,
    request: Request,
    next: Next,
) -> Response {
    if !request.headers().contains_key(header::AUTHORIZATION) {
        return next.run(request).await;
    }
    http_layer(state, request, next).await
}

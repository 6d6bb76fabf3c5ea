//! The HTTP authentication layer: one place per transport that reads credentials. It puts the
//! [`Principal`](sqe_sessions::Principal) and [`Credential`](sqe_sessions::Credential) into the
//! request extensions, or answers 401 saying why.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sqe_sessions::ErrorCode;

use crate::{Authenticator, Presented};

fn refuse(status: StatusCode, message: &str) -> Response {
    let mut response = (status, message.to_string()).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"sqe\", Basic realm=\"sqe\""),
        );
    }
    response
}

/// Use with `axum::middleware::from_fn_with_state(authenticator, http_layer)`.
pub async fn http_layer(
    State(auth): State<Arc<Authenticator>>,
    mut request: Request,
    next: Next,
) -> Response {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let presented = match Presented::from_authorization(value) {
        Ok(p) => p,
        Err(e) => return refuse(StatusCode::UNAUTHORIZED, e.message()),
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
        Err(e) => match e.code() {
            ErrorCode::External => refuse(StatusCode::SERVICE_UNAVAILABLE, e.message()),
            _ => refuse(StatusCode::UNAUTHORIZED, e.message()),
        },
    }
}

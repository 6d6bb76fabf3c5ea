//! An OAuth 2.0 protected resource (RFC 6750, RFC 9728, RFC 8707), for endpoints such as MCP that
//! take only bearer tokens meant for themselves. A request without a token is answered 401 with a
//! `WWW-Authenticate` challenge that links the resource's metadata document; a token for another
//! audience, expired or forged, 401 `invalid_token`; a token without any of the resource's scopes,
//! 403 `insufficient_scope`. A caller let through has its [`Principal`], its own [`Credential`] and
//! its [`Scopes`] in the request's extensions.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sqe_sessions::{ErrorCode, Principal, Scopes};

use crate::{Authenticator, Presented};

/// Who may call the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceMode {
    /// Tokens the identity provider issued for this resource, and static principals' tokens.
    Oidc,
    /// Static principals' tokens only.
    Static,
    /// Anyone: a caller without a token is `anonymous` with the read scope (never with an identity
    /// provider, writes or `production_mode`: the gateway refuses that configuration).
    Anonymous,
}

/// A protected resource: whom its tokens must be for and what it advertises.
#[derive(Debug)]
pub struct ResourceServer {
    pub authenticator: Arc<Authenticator>,
    pub mode: ResourceMode,
    /// The resource's canonical URI, which a token's `aud` must name (RFC 8707).
    pub resource: String,
    /// Where the resource's metadata document is (RFC 9728), for the challenge.
    pub metadata_url: String,
    /// The scope that lets a caller in (reading), named in challenges.
    pub read_scope: String,
    /// A scope that also lets a caller in (writing).
    pub write_scope: String,
}

impl ResourceServer {
    /// RFC 6750's challenge: the metadata document, the scope, and what was wrong.
    fn challenge(&self, status: StatusCode, error: Option<(&str, &str)>) -> Response {
        let mut value = format!(
            "Bearer resource_metadata=\"{}\", scope=\"{}\"",
            self.metadata_url, self.read_scope
        );
        if let Some((code, description)) = error {
            // Quoted-string: no quotes or backslashes inside.
            let description = description.replace(['"', '\\'], "'");
            value.push_str(&format!(
                ", error=\"{code}\", error_description=\"{description}\""
            ));
        }
        let message = error
            .map(|(_, d)| d)
            .unwrap_or("a bearer token is required");
        let mut response = (status, message.to_string()).into_response();
        if let Ok(v) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        response
    }
}

/// Use with `axum::middleware::from_fn_with_state(server, resource_layer)`.
pub async fn resource_layer(
    State(server): State<Arc<ResourceServer>>,
    mut request: Request,
    next: Next,
) -> Response {
    let refused = crate::layer::refusal_log(&request);
    let value = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let token = match Presented::from_authorization(value) {
        Ok(Presented::Bearer(token)) => token,
        Ok(Presented::None) if server.mode == ResourceMode::Anonymous => {
            request.extensions_mut().insert(Principal::new("anonymous"));
            request
                .extensions_mut()
                .insert(Scopes(vec![server.read_scope.clone()]));
            return next.run(request).await;
        }
        Ok(Presented::None) => {
            refused("no token");
            return server.challenge(StatusCode::UNAUTHORIZED, None);
        }
        Ok(Presented::Basic { .. }) | Err(_) => {
            refused("not a bearer token");
            return server.challenge(
                StatusCode::UNAUTHORIZED,
                Some(("invalid_request", "send a Bearer token")),
            );
        }
    };
    let who = if server.mode == ResourceMode::Oidc {
        server
            .authenticator
            .authenticate_for(&token, &server.resource)
            .await
    } else if server.authenticator.is_static_token(&token) {
        server
            .authenticator
            .authenticate(&Presented::Bearer(token))
            .await
            .and_then(|w| {
                w.ok_or_else(|| {
                    sqe_sessions::SqeError::new(ErrorCode::Unauthenticated, "unknown token")
                })
            })
    } else {
        Err(sqe_sessions::SqeError::new(
            ErrorCode::Unauthenticated,
            "unknown token",
        ))
    };
    let mut who = match who {
        Ok(who) => who,
        Err(e) if e.code() == ErrorCode::External => {
            refused(e.message());
            return (StatusCode::SERVICE_UNAVAILABLE, e.message().to_string()).into_response();
        }
        Err(e) => {
            refused(e.message());
            return server.challenge(
                StatusCode::UNAUTHORIZED,
                Some(("invalid_token", e.message())),
            );
        }
    };
    // Without an identity provider, a static principal configured without scopes reads; with
    // one, a static principal reaches the resource only with the scopes it is given.
    if !who.issued && who.scopes.is_empty() && server.mode != ResourceMode::Oidc {
        who.scopes.push(server.read_scope.clone());
    }
    let scopes = Scopes(who.scopes);
    if !scopes.has(&server.read_scope) && !scopes.has(&server.write_scope) {
        refused("insufficient scope");
        return server.challenge(
            StatusCode::FORBIDDEN,
            Some((
                "insufficient_scope",
                &format!("the token lacks the scope {}", server.read_scope),
            )),
        );
    }
    request.extensions_mut().insert(who.principal);
    if let Some(c) = who.credential {
        request.extensions_mut().insert(c);
    }
    request.extensions_mut().insert(scopes);
    next.run(request).await
}

//! Who is calling. One [`Authenticator`] turns what a request presents (a bearer token, a username and
//! password, or nothing) into a [`Principal`] and the caller's own [`Credential`], which the session
//! carries on to catalogs and storage. Protocols never look at a token: [`http_layer`] puts the result
//! into the request's extensions.
//!
//! Checked in order: static principals (named tokens from environment variables), OIDC bearer tokens
//! (JWT signature against the issuer's JWKS, issuer, audience, exp/nbf, an algorithm allow-list), and
//! for a username and password the OIDC password grant, then the client-credentials grant (a service
//! principal presenting its own client id and secret). Validated tokens are cached by hash until they
//! expire.

mod config;
mod layer;
mod resource;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
pub use config::{IdentityConfig, OidcConfig, StaticPrincipal};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
pub use layer::{http_layer, optional_http_layer};
pub use resource::{ResourceMode, ResourceServer, resource_layer};
use serde_json::Value;
use sha2::{Digest, Sha256};
use sqe_sessions::{Credential, ErrorCode, Principal, SqeError, SqeResult};

/// Most cached validations kept; past it, expired entries go, then everything.
const CACHE_LIMIT: usize = 10_000;

/// What a request presented.
#[derive(Clone, PartialEq, Eq)]
pub enum Presented {
    None,
    Bearer(String),
    Basic { user: String, password: String },
}

impl std::fmt::Debug for Presented {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Presented::None => f.write_str("None"),
            Presented::Bearer(_) => f.write_str("Bearer(***)"),
            Presented::Basic { user, .. } => write!(f, "Basic({user}, ***)"),
        }
    }
}

impl Presented {
    /// Reads an `Authorization` header value.
    pub fn from_authorization(value: Option<&str>) -> SqeResult<Self> {
        let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(Presented::None);
        };
        let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
        let rest = rest.trim();
        if scheme.eq_ignore_ascii_case("bearer") && !rest.is_empty() {
            return Ok(Presented::Bearer(rest.to_string()));
        }
        if scheme.eq_ignore_ascii_case("basic") {
            // Some clients (the Go Flight SQL driver) leave out the padding.
            let lenient = base64::engine::GeneralPurpose::new(
                &base64::alphabet::STANDARD,
                base64::engine::GeneralPurposeConfig::new()
                    .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
            );
            let decoded = lenient
                .decode(rest)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| unauthenticated("malformed Basic credentials"))?;
            let (user, password) = decoded
                .split_once(':')
                .ok_or_else(|| unauthenticated("malformed Basic credentials"))?;
            return Ok(Presented::Basic {
                user: user.to_string(),
                password: password.to_string(),
            });
        }
        Err(unauthenticated(
            "unsupported Authorization scheme; use Bearer or Basic",
        ))
    }
}

/// A caller SQE knows.
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub principal: Principal,
    /// The caller's own token (never a password), to pass on.
    pub credential: Option<Credential>,
    /// What the token may be used for (its `scope` or `scp` claim; a static principal's
    /// `scopes`).
    pub scopes: Vec<String>,
    /// Whom the token is for (its `aud` claim).
    pub audiences: Vec<String>,
    /// Whether an identity provider issued the token (not a static principal's).
    pub issued: bool,
}

/// A claim holding one word, several in one string (`scope`), or a list of them.
fn words(claim: Option<&Value>) -> Vec<String> {
    match claim {
        Some(Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// Refuses a token an identity provider issued for someone else than `audience` (a static
/// principal's token is for this server alone).
fn check_audience(who: &Authenticated, audience: &str) -> SqeResult<()> {
    if !who.issued || who.audiences.iter().any(|a| a == audience) {
        return Ok(());
    }
    Err(unauthenticated("token audience is not accepted"))
}

fn unauthenticated(message: impl Into<String>) -> SqeError {
    SqeError::new(ErrorCode::Unauthenticated, message)
}

struct Jwks {
    keys: Option<JwkSet>,
    fetched: Option<Instant>,
}

pub struct Authenticator {
    config: IdentityConfig,
    http: reqwest::Client,
    /// Each static principal's token, and who it is with its scopes.
    static_tokens: Vec<(String, (Principal, Vec<String>))>,
    jwks: tokio::sync::Mutex<Jwks>,
    /// sha256 of what was presented -> (who, valid until).
    cache: Mutex<HashMap<[u8; 32], (Authenticated, Instant)>>,
    /// Audiences of resources that take tokens of their own (MCP's endpoint): a token for one of
    /// them is for that resource alone.
    reserved: std::sync::RwLock<Vec<String>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn digest(parts: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    h.finalize().into()
}

/// The `alg` a token claims, read without trusting it.
fn claimed_algorithm(token: &str) -> Option<String> {
    let header = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header.trim_end_matches('='))
        .ok()?;
    let json: Value = serde_json::from_slice(&bytes).ok()?;
    json.get("alg")?.as_str().map(str::to_string)
}

impl Authenticator {
    /// Builds the chain; static tokens are read from their environment variables now.
    pub fn new(config: IdentityConfig) -> Result<Self, String> {
        let mut static_tokens = Vec::new();
        for s in &config.static_principals {
            let token = std::env::var(&s.token_env).map_err(|_| {
                format!(
                    "static principal '{}': environment variable {} is not set",
                    s.name, s.token_env
                )
            })?;
            if token.len() < 16 {
                return Err(format!(
                    "static principal '{}': its token must be at least 16 characters",
                    s.name
                ));
            }
            let principal = Principal {
                name: s.name.clone(),
                roles: s.roles.clone(),
            };
            static_tokens.push((token, (principal, s.scopes.clone())));
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        Ok(Self {
            config,
            http,
            static_tokens,
            jwks: tokio::sync::Mutex::new(Jwks {
                keys: None,
                fetched: None,
            }),
            cache: Mutex::new(HashMap::new()),
            reserved: std::sync::RwLock::new(Vec::new()),
        })
    }

    /// Keeps tokens issued for `audience` (a resource such as MCP's endpoint) to that resource:
    /// `authenticate` refuses them unless they are also for `[auth.oidc] audience`.
    pub fn reserve_audience(&self, audience: &str) {
        let mut reserved = self.reserved.write().unwrap_or_else(|p| p.into_inner());
        reserved.push(audience.to_string());
    }

    pub fn allows_anonymous(&self) -> bool {
        self.config.allow_anonymous
    }

    /// Whether anything can authenticate a caller (an IdP or static tokens).
    pub fn has_authenticator(&self) -> bool {
        self.config.oidc.is_some() || !self.static_tokens.is_empty()
    }

    /// Who presented this. `Ok(None)`: nothing was presented and anonymous access is allowed.
    /// A token must be for `[auth.oidc] audience` when one is set.
    pub async fn authenticate(&self, presented: &Presented) -> SqeResult<Option<Authenticated>> {
        let audience = self.config.oidc.as_ref().and_then(|o| o.audience.clone());
        let who = self.authenticate_any(presented).await?;
        if let Some(who) = &who {
            if let Some(audience) = &audience {
                check_audience(who, audience)?;
            }
            let reserved = self.reserved.read().unwrap_or_else(|p| p.into_inner());
            let ours = audience.is_some_and(|a| who.audiences.contains(&a));
            if who.issued && !ours && who.audiences.iter().any(|a| reserved.contains(a)) {
                return Err(unauthenticated("token audience is not accepted"));
            }
        }
        Ok(who)
    }

    /// Who presented a bearer token meant for `resource` (RFC 8707: its `aud` names it), or a
    /// static principal's token.
    pub async fn authenticate_for(&self, token: &str, resource: &str) -> SqeResult<Authenticated> {
        let who = self
            .authenticate_any(&Presented::Bearer(token.to_string()))
            .await?
            .ok_or_else(|| unauthenticated("unknown token"))?;
        check_audience(&who, resource)?;
        Ok(who)
    }

    /// Whether the token is one of the static principals' (no identity provider issued it).
    pub fn is_static_token(&self, token: &str) -> bool {
        self.static_principal(token).is_some()
    }

    async fn authenticate_any(&self, presented: &Presented) -> SqeResult<Option<Authenticated>> {
        match presented {
            Presented::None if self.config.allow_anonymous => Ok(None),
            Presented::None => Err(unauthenticated(
                "authentication required: send a Bearer token or Basic credentials",
            )),
            Presented::Bearer(token) => {
                if let Some((principal, scopes)) = self.static_principal(token) {
                    return Ok(Some(Authenticated {
                        principal,
                        credential: Some(Credential::bearer(token.clone())),
                        scopes,
                        audiences: Vec::new(),
                        issued: false,
                    }));
                }
                let key = digest(&["bearer", token]);
                if let Some(hit) = self.cached(&key) {
                    return Ok(Some(hit));
                }
                let (who, expires) = self.validate_jwt(token).await?;
                self.remember(key, &who, expires);
                Ok(Some(who))
            }
            Presented::Basic { user, password } => {
                let key = digest(&["basic", user, password]);
                if let Some(hit) = self.cached(&key) {
                    return Ok(Some(hit));
                }
                let token = self.exchange(user, password).await?;
                let (who, expires) = self.validate_jwt(&token).await?;
                self.remember(key, &who, expires);
                Ok(Some(who))
            }
        }
    }

    fn static_principal(&self, token: &str) -> Option<(Principal, Vec<String>)> {
        // Compare every entry fully so timing does not tell which prefix matched.
        let mut found = None;
        for (t, p) in &self.static_tokens {
            let same = t.len() == token.len()
                && t.bytes()
                    .zip(token.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0;
            if same {
                found = Some(p.clone());
            }
        }
        found
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Authenticated> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(key)
            .filter(|(_, until)| *until > Instant::now())
            .map(|(a, _)| a.clone())
    }

    fn remember(&self, key: [u8; 32], who: &Authenticated, expires_at: u64) {
        let ttl = Duration::from_secs(expires_at.saturating_sub(now_secs()));
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHE_LIMIT {
            let now = Instant::now();
            cache.retain(|_, (_, until)| *until > now);
            if cache.len() >= CACHE_LIMIT {
                cache.clear();
            }
        }
        cache.insert(key, (who.clone(), Instant::now() + ttl));
    }

    fn oidc(&self) -> SqeResult<&OidcConfig> {
        self.config
            .oidc
            .as_ref()
            .ok_or_else(|| unauthenticated("unknown token"))
    }

    async fn discover(&self, oidc: &OidcConfig) -> SqeResult<Value> {
        let url = oidc.discovery_url.clone().unwrap_or_else(|| {
            format!(
                "{}/.well-known/openid-configuration",
                oidc.issuer.trim_end_matches('/')
            )
        });
        let response = self.http.get(&url).send().await.map_err(|e| {
            tracing::warn!("OIDC discovery at {url} failed: {e}");
            SqeError::new(ErrorCode::External, "the identity provider is unreachable")
        })?;
        response.json::<Value>().await.map_err(|_| {
            SqeError::new(
                ErrorCode::External,
                "the identity provider's discovery document is invalid",
            )
        })
    }

    async fn endpoint(
        &self,
        oidc: &OidcConfig,
        configured: &Option<String>,
        field: &str,
    ) -> SqeResult<String> {
        if let Some(url) = configured {
            return Ok(url.clone());
        }
        let doc = self.discover(oidc).await?;
        doc.get(field)
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .ok_or_else(|| {
                SqeError::new(
                    ErrorCode::External,
                    format!("the identity provider publishes no {field}"),
                )
            })
    }

    /// The key for `kid`, refetching the JWKS when the kid is unknown (at most once per interval).
    async fn key_for(&self, oidc: &OidcConfig, kid: Option<&str>) -> SqeResult<DecodingKey> {
        let mut jwks = self.jwks.lock().await;
        let find = |set: &JwkSet| match kid {
            Some(k) => set.find(k).cloned(),
            None => set.keys.first().cloned(),
        };
        if let Some(jwk) = jwks.keys.as_ref().and_then(find) {
            return DecodingKey::from_jwk(&jwk)
                .map_err(|_| unauthenticated("the issuer's key is unusable"));
        }
        let min_interval = Duration::from_secs(oidc.jwks_refresh_min_secs);
        if jwks.fetched.is_some_and(|t| t.elapsed() < min_interval) {
            return Err(unauthenticated(
                "token is signed by a key the issuer does not publish",
            ));
        }
        let url = self.endpoint(oidc, &oidc.jwks_url, "jwks_uri").await?;
        let set: JwkSet = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|_| {
                SqeError::new(ErrorCode::External, "the identity provider is unreachable")
            })?
            .json()
            .await
            .map_err(|_| {
                SqeError::new(
                    ErrorCode::External,
                    "the identity provider's JWKS is invalid",
                )
            })?;
        jwks.fetched = Some(Instant::now());
        let jwk = find(&set);
        jwks.keys = Some(set);
        match jwk {
            Some(jwk) => DecodingKey::from_jwk(&jwk)
                .map_err(|_| unauthenticated("the issuer's key is unusable")),
            None => Err(unauthenticated(
                "token is signed by a key the issuer does not publish",
            )),
        }
    }

    /// Checks a JWT; returns who it names and when it expires (epoch seconds).
    async fn validate_jwt(&self, token: &str) -> SqeResult<(Authenticated, u64)> {
        let oidc = self.oidc()?;
        let alg = claimed_algorithm(token).ok_or_else(|| unauthenticated("malformed token"))?;
        let allowed: Vec<Algorithm> = oidc
            .algorithms
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect();
        let algorithm = alg
            .parse::<Algorithm>()
            .ok()
            .filter(|a| allowed.contains(a))
            .ok_or_else(|| unauthenticated(format!("token algorithm '{alg}' is not allowed")))?;
        let header =
            jsonwebtoken::decode_header(token).map_err(|_| unauthenticated("malformed token"))?;
        let key = self.key_for(oidc, header.kid.as_deref()).await?;
        // Only the token's own (allowed) algorithm: jsonwebtoken wants one key family per validation.
        let mut validation = Validation::new(algorithm);
        validation.leeway = oidc.leeway_secs;
        validation.validate_nbf = true;
        validation.set_issuer(&[oidc.issuer.as_str()]);
        // Checked by the caller, which knows whom the token must be for (`check_audience`).
        validation.validate_aud = false;
        validation.set_required_spec_claims(&["exp", "iss"]);
        let data = jsonwebtoken::decode::<Value>(token, &key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as K;
            unauthenticated(match e.kind() {
                K::ExpiredSignature => "token expired",
                K::ImmatureSignature => "token is not valid yet",
                K::InvalidSignature => "token signature is invalid",
                K::InvalidAudience => "token audience is not accepted",
                K::InvalidIssuer => "token issuer is not accepted",
                K::InvalidAlgorithm => "token algorithm is not allowed",
                K::MissingRequiredClaim(_) => "token lacks a required claim (exp, iss)",
                _ => "token is invalid",
            })
        })?;
        let claims = data.claims;
        let name = oidc
            .principal_claims
            .iter()
            .find_map(|c| claims.get(c).and_then(|v| v.as_str()))
            .ok_or_else(|| {
                unauthenticated(format!(
                    "token names no principal (claims {})",
                    oidc.principal_claims.join(", ")
                ))
            })?;
        let mut roles = Vec::new();
        for claim in &oidc.role_claims {
            match claims.get(claim) {
                Some(Value::Array(items)) => {
                    roles.extend(items.iter().filter_map(|v| v.as_str().map(str::to_string)))
                }
                Some(Value::String(s)) => roles.extend(s.split_whitespace().map(str::to_string)),
                _ => {}
            }
        }
        let expires = claims.get("exp").and_then(|v| v.as_u64()).unwrap_or(0);
        let who = Authenticated {
            principal: Principal {
                name: name.to_string(),
                roles,
            },
            credential: Some(Credential::bearer(token.to_string())),
            scopes: words(claims.get("scope").or(claims.get("scp"))),
            // RFC 7519: a string `aud` is one audience.
            audiences: match claims.get("aud") {
                Some(Value::String(one)) => vec![one.clone()],
                other => words(other),
            },
            issued: true,
        };
        Ok((who, expires))
    }

    /// Exchanges a username and password (or a client id and secret) for the caller's own token.
    async fn exchange(&self, user: &str, password: &str) -> SqeResult<String> {
        let oidc = self
            .config
            .oidc
            .as_ref()
            .ok_or_else(|| unauthenticated("username/password sign-in is not configured"))?;
        let url = self
            .endpoint(oidc, &oidc.token_url, "token_endpoint")
            .await?;
        let client_secret = oidc
            .client_secret_env
            .as_ref()
            .and_then(|e| std::env::var(e).ok());
        let mut form: Vec<(&str, &str)> = vec![
            ("grant_type", "password"),
            ("username", user),
            ("password", password),
        ];
        if let Some(id) = &oidc.client_id {
            form.push(("client_id", id));
        }
        if let Some(secret) = &client_secret {
            form.push(("client_secret", secret));
        }
        if let Some(scope) = &oidc.scope {
            form.push(("scope", scope));
        }
        if let Some(token) = self.token_request(&url, &form).await? {
            return Ok(token);
        }
        // Not a user: maybe a service principal presenting its own client id and secret.
        let mut form: Vec<(&str, &str)> = vec![
            ("grant_type", "client_credentials"),
            ("client_id", user),
            ("client_secret", password),
        ];
        if let Some(scope) = &oidc.scope {
            form.push(("scope", scope));
        }
        match self.token_request(&url, &form).await? {
            Some(token) => Ok(token),
            None => Err(unauthenticated("invalid username or password")),
        }
    }

    /// POSTs a token request; `Ok(None)` when the IdP refuses the credentials.
    async fn token_request(&self, url: &str, form: &[(&str, &str)]) -> SqeResult<Option<String>> {
        let response = self.http.post(url).form(form).send().await.map_err(|_| {
            SqeError::new(ErrorCode::External, "the identity provider is unreachable")
        })?;
        let status = response.status();
        if status.is_client_error() {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(SqeError::new(
                ErrorCode::External,
                format!("the identity provider answered {status}"),
            ));
        }
        let body: Value = response.json().await.map_err(|_| {
            SqeError::new(
                ErrorCode::External,
                "the identity provider's token response is invalid",
            )
        })?;
        Ok(body
            .get("access_token")
            .and_then(|t| t.as_str())
            .map(str::to_string))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_headers() {
        // Unpadded, as the Go Flight SQL driver sends it: "alice:wrong".
        assert_eq!(
            Presented::from_authorization(Some("Basic YWxpY2U6d3Jvbmc")).ok(),
            Some(Presented::Basic {
                user: "alice".into(),
                password: "wrong".into()
            })
        );
        assert_eq!(
            Presented::from_authorization(None).ok(),
            Some(Presented::None)
        );
        assert_eq!(
            Presented::from_authorization(Some("Bearer abc")).ok(),
            Some(Presented::Bearer("abc".into()))
        );
        assert_eq!(
            Presented::from_authorization(Some("Basic YWxpY2U6cHc6eA==")).ok(),
            Some(Presented::Basic {
                user: "alice".into(),
                password: "pw:x".into()
            })
        );
        assert_eq!(
            Presented::from_authorization(Some("Digest x"))
                .err()
                .map(|e| e.message().to_string())
                .as_deref(),
            Some("unsupported Authorization scheme; use Bearer or Basic")
        );
        assert_eq!(
            format!("{:?}", Presented::Bearer("secret".into())),
            "Bearer(***)"
        );
    }

    #[test]
    fn the_claimed_algorithm_is_read_without_verifying() {
        // {"alg":"none"}.{"sub":"x"}.
        assert_eq!(
            claimed_algorithm("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.").as_deref(),
            Some("none")
        );
    }

    #[tokio::test]
    async fn anonymous_only_when_allowed() {
        let closed =
            Authenticator::new(IdentityConfig::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            closed
                .authenticate(&Presented::None)
                .await
                .err()
                .map(|e| e.code()),
            Some(ErrorCode::Unauthenticated)
        );
        let open = Authenticator::new(IdentityConfig {
            allow_anonymous: true,
            ..IdentityConfig::default()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            open.authenticate(&Presented::None)
                .await
                .is_ok_and(|a| a.is_none())
        );
        assert_eq!(
            open.authenticate(&Presented::Bearer("x".into()))
                .await
                .err()
                .map(|e| e.message().to_string())
                .as_deref(),
            Some("unknown token")
        );
    }
}

//! The `[auth]` section of `sqe.toml`.

use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct IdentityConfig {
    /// Requests that present nothing run as the user they name: loopback addresses only, never with
    /// `production_mode`. Off unless set (or no configuration file is given).
    pub allow_anonymous: bool,
    /// An OpenID Connect identity provider.
    pub oidc: Option<OidcConfig>,
    /// Named bearer tokens, each read from an environment variable.
    #[serde(rename = "static")]
    pub static_principals: Vec<StaticPrincipal>,
    /// Principals that may run queries as another user they name (Trino's `X-Trino-User`), such
    /// as a BI server that signs in once for its viewers. Nobody else may.
    pub impersonators: Vec<String>,
    /// Principals holding one of these roles (from the token's role claims, or a static
    /// principal's `roles`) may cancel any query and read everyone's in `system.runtime.queries`.
    /// With none set, everyone may when `[access] default` is `"allow"`, nobody when `"deny"`
    /// (the engine's `QueryService::is_admin` decides, for every protocol).
    pub admin_roles: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OidcConfig {
    /// Must equal the tokens' `iss`.
    pub issuer: String,
    /// Defaults to `<issuer>/.well-known/openid-configuration`.
    pub discovery_url: Option<String>,
    /// Overrides the discovered `jwks_uri`.
    pub jwks_url: Option<String>,
    /// Overrides the discovered `token_endpoint` (password and client-credentials grants).
    pub token_url: Option<String>,
    /// Tokens must carry this audience; unset accepts any.
    pub audience: Option<String>,
    /// Signature algorithms accepted (`none` never is).
    pub algorithms: Vec<String>,
    /// Claims tried in order for the principal's name.
    pub principal_claims: Vec<String>,
    /// Claims holding roles or groups.
    pub role_claims: Vec<String>,
    /// Client id SQE uses for the password grant.
    pub client_id: Option<String>,
    /// Environment variable holding that client's secret.
    pub client_secret_env: Option<String>,
    /// Scope requested in token exchanges.
    pub scope: Option<String>,
    /// Clock skew tolerated on exp/nbf.
    pub leeway_secs: u64,
    /// An unknown `kid` refetches the JWKS at most this often.
    pub jwks_refresh_min_secs: u64,
}

impl Default for OidcConfig {
    fn default() -> Self {
        Self {
            issuer: String::new(),
            discovery_url: None,
            jwks_url: None,
            token_url: None,
            audience: None,
            algorithms: vec!["RS256".into(), "ES256".into()],
            principal_claims: vec!["preferred_username".into(), "sub".into()],
            role_claims: vec!["roles".into(), "groups".into()],
            client_id: None,
            client_secret_env: None,
            scope: None,
            leeway_secs: 30,
            jwks_refresh_min_secs: 30,
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StaticPrincipal {
    pub name: String,
    /// Environment variable holding the token.
    pub token_env: String,
    #[serde(default)]
    pub roles: Vec<String>,
    /// What the token may be used for, as a token's `scope` claim says (MCP's read and write
    /// scopes).
    #[serde(default)]
    pub scopes: Vec<String>,
}

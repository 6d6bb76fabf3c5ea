//! `sqe.toml`, layered: built-in defaults < the file < `SQE_SECTION__KEY` environment variables.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
pub use sqe_identity::IdentityConfig;

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerConfig,
    pub catalog: CatalogConfig,
    /// `[catalogs.NAME]`: more catalogs, each mounted under its name.
    pub catalogs: std::collections::BTreeMap<String, CatalogSection>,
    pub auth: IdentityConfig,
    pub engine: EngineSection,
    pub files: FilesSection,
    pub secrets: SecretsSection,
    pub access: AccessSection,
    pub mcp: McpSection,
    pub quack: QuackSection,
    pub log: LogSection,
}

/// `[quack]`: DuckDB's Quack protocol (`ATTACH 'quack:host:port'`), on a port of its own and at
/// `/quack` on the HTTP port.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct QuackSection {
    /// Off unless set.
    pub enabled: bool,
    /// DuckDB's default Quack port (0 picks a free one).
    pub port: u16,
    /// Sessions (attached DuckDB clients) one user may hold open; past it a connection is refused.
    pub max_sessions_per_user: usize,
}

impl Default for QuackSection {
    fn default() -> Self {
        Self {
            enabled: false,
            port: 9494,
            max_sessions_per_user: 64,
        }
    }
}

/// `[mcp]`: the Model Context Protocol endpoint at `/mcp` on the HTTP port, for agents.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct McpSection {
    /// Off unless set.
    pub enabled: bool,
    /// The endpoint's canonical URI, which tokens' `aud` must name (RFC 8707); by default
    /// `http[s]://<listening address>/mcp`.
    pub resource: Option<String>,
    /// Where clients get tokens, for the metadata document; by default `[auth.oidc] issuer`.
    pub authorization_servers: Vec<String>,
    /// The scope every read tool needs.
    pub read_scope: String,
    /// The scope `execute_sql_change` needs.
    pub write_scope: String,
    /// Whether `execute_sql_change` exists (it then also needs the write scope and one of
    /// `write_roles`, besides the caller's own privileges).
    pub allow_writes: bool,
    pub write_roles: Vec<String>,
    /// Most rows and bytes (of JSON rows) in one answer; the rest is cut with a notice.
    pub max_rows: usize,
    pub max_bytes: usize,
    /// Browser origins allowed to call; a request with any other `Origin` gets 403.
    pub allowed_origins: Vec<String>,
    /// Host names the endpoint answers to (DNS rebinding); loopback names and the resource's
    /// host by default.
    pub allowed_hosts: Vec<String>,
    /// Sessions one user may hold open; past it a new one is refused (429).
    pub max_sessions_per_user: usize,
    pub auth: McpAuthSection,
}

impl Default for McpSection {
    fn default() -> Self {
        Self {
            enabled: false,
            resource: None,
            authorization_servers: Vec::new(),
            read_scope: "sqe:read".into(),
            write_scope: "sqe:write".into(),
            allow_writes: false,
            write_roles: Vec::new(),
            max_rows: 1000,
            max_bytes: 256 << 10,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_sessions_per_user: sqe_mcp::McpConfig::new("").max_sessions_per_principal,
            auth: McpAuthSection::default(),
        }
    }
}

/// `[mcp.auth]`: who may call the MCP endpoint.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct McpAuthSection {
    /// `"oidc"` (tokens the identity provider issued for this resource; the default with
    /// `[auth.oidc]`), `"static"` (the `[[auth.static]]` principals' tokens; the default without
    /// an identity provider) or `"anonymous"` (anyone, as `anonymous`, reading; refused with an
    /// identity provider, writes or `production_mode`).
    pub mode: Option<McpAuthMode>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum McpAuthMode {
    Oidc,
    Static,
    Anonymous,
}

impl Config {
    /// Who may call `/mcp`, as configured or implied.
    pub fn mcp_auth_mode(&self) -> Result<McpAuthMode, String> {
        let mode = match self.mcp.auth.mode {
            Some(mode) => mode,
            None if self.auth.oidc.is_some() => McpAuthMode::Oidc,
            None if !self.auth.static_principals.is_empty() => McpAuthMode::Static,
            None => {
                return Err("[mcp] needs a way to authenticate agents: [auth.oidc], [[auth.static]] or [mcp.auth] mode = \"anonymous\"".into());
            }
        };
        match mode {
            McpAuthMode::Oidc if self.auth.oidc.is_none() => {
                Err("[mcp.auth] mode = \"oidc\" needs [auth.oidc]".into())
            }
            McpAuthMode::Static if self.auth.static_principals.is_empty() => {
                Err("[mcp.auth] mode = \"static\" needs [[auth.static]] principals".into())
            }
            McpAuthMode::Anonymous if self.auth.oidc.is_some() => Err(
                "[mcp.auth] mode = \"anonymous\" is refused when an identity provider is configured".into(),
            ),
            McpAuthMode::Anonymous if self.server.production_mode => {
                Err("production_mode = true forbids [mcp.auth] mode = \"anonymous\"".into())
            }
            McpAuthMode::Anonymous if self.mcp.allow_writes => {
                Err("[mcp.auth] mode = \"anonymous\" is refused with [mcp] allow_writes = true".into())
            }
            McpAuthMode::Anonymous if !self.server.host.is_loopback() => Err(format!(
                "refusing anonymous MCP access on {}: it is for loopback addresses only",
                self.server.host
            )),
            mode => Ok(mode),
        }
    }
}

/// `[access]`: what no GRANT, REVOKE or DENY decides (see the README's "Privileges").
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AccessSection {
    /// `"owner"` (the default with an authenticator: anyone may read and create, and only the
    /// owner, a grantee or an admin may write to, alter or drop what someone owns), `"allow"` (the
    /// default without one: everyone may do what nothing denies) or `"deny"` (nothing not
    /// granted); `production_mode` requires `"deny"`.
    pub default: Option<AccessDefaultSetting>,
    /// The environment variable holding the key of HASH column masks (16 characters or more);
    /// without it each catalog makes and keeps a random key of its own.
    pub mask_key_env: Option<String>,
    /// A SQLite file keeping the privileges, roles, owners, row filters, masks and tags of the
    /// catalogs whose own database keeps none (REST, Hive Metastore); without it, GRANT and the
    /// rest are refused there.
    pub store: Option<PathBuf>,
    /// `"sqe"` (the default: GRANT, row filters and masks kept by SQE) or `"ranger"` (Apache
    /// Ranger's policies, downloaded as `[access.ranger]` says, for its catalogs).
    pub engine: AccessEngine,
    pub ranger: Option<RangerSection>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum AccessEngine {
    #[default]
    Sqe,
    Ranger,
}

/// `[access.ranger]`: where Ranger's policies for a Hive service are downloaded from.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RangerSection {
    /// `https://ranger:6182/service/plugins/policies/download/<service>`.
    pub policy_url: String,
    /// The catalogs the policies govern; every catalog of the server if unset.
    pub catalogs: Option<Vec<String>>,
    #[serde(default = "RangerSection::default_refresh")]
    pub refresh_secs: u64,
    /// How long the last policies hold when downloads fail; then everything is refused.
    #[serde(default = "RangerSection::default_grace")]
    pub grace_secs: u64,
    /// Basic credentials for the download, the password in an environment variable.
    pub username: Option<String>,
    pub password_env: Option<String>,
}

impl RangerSection {
    fn default_refresh() -> u64 {
        30
    }

    fn default_grace() -> u64 {
        300
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum AccessDefaultSetting {
    Allow,
    Deny,
    Owner,
}

impl AccessSection {
    /// What the engine decides where no privilege does: the configured default, else `owner` on a
    /// server with an authenticator (users who sign in cannot change each other's tables) and
    /// `allow` on one without (a loopback server, as the shell).
    pub fn engine_default(&self, has_authenticator: bool) -> sqe_engine::AccessDefault {
        match (self.default, has_authenticator) {
            (Some(AccessDefaultSetting::Allow), _) | (None, false) => {
                sqe_engine::AccessDefault::Allow
            }
            (Some(AccessDefaultSetting::Deny), _) => sqe_engine::AccessDefault::Deny,
            (Some(AccessDefaultSetting::Owner), _) | (None, true) => {
                sqe_engine::AccessDefault::Owner
            }
        }
    }

    /// Ranger's configuration for the engine, when `engine = "ranger"`; `all` names every catalog
    /// of the server.
    pub fn ranger(&self, all: Vec<String>) -> Result<Option<sqe_engine::RangerConfig>, String> {
        match (self.engine, &self.ranger) {
            (AccessEngine::Sqe, None) => Ok(None),
            (AccessEngine::Sqe, Some(_)) => {
                Err("[access.ranger] is set but [access] engine is not \"ranger\"".to_string())
            }
            (AccessEngine::Ranger, None) => {
                Err("[access] engine = \"ranger\" needs [access.ranger] policy_url".to_string())
            }
            (AccessEngine::Ranger, Some(r)) => {
                if r.refresh_secs == 0 || r.grace_secs < r.refresh_secs {
                    return Err(
                        "[access.ranger]: refresh_secs must be at least 1 and grace_secs at least refresh_secs"
                            .to_string(),
                    );
                }
                let basic = match (&r.username, &r.password_env) {
                    (Some(user), Some(var)) => Some((
                        user.clone(),
                        std::env::var(var).map_err(|_| {
                            format!("[access.ranger] password_env: the environment variable {var} is not set")
                        })?,
                    )),
                    (None, None) => None,
                    _ => {
                        return Err(
                            "[access.ranger]: username and password_env go together".to_string()
                        );
                    }
                };
                Ok(Some(sqe_engine::RangerConfig {
                    policy_url: r.policy_url.clone(),
                    catalogs: r.catalogs.clone().unwrap_or(all),
                    refresh: std::time::Duration::from_secs(r.refresh_secs),
                    grace: std::time::Duration::from_secs(r.grace_secs),
                    basic,
                }))
            }
        }
    }

    /// The HASH masks' key from `mask_key_env`, if set.
    pub fn mask_key(&self) -> Result<Option<Vec<u8>>, String> {
        let Some(var) = &self.mask_key_env else {
            return Ok(None);
        };
        let key = std::env::var(var).map_err(|_| {
            format!("[access] mask_key_env: the environment variable {var} is not set")
        })?;
        if key.len() < 16 {
            return Err(format!(
                "[access] mask_key_env: the key in {var} is shorter than 16 characters"
            ));
        }
        Ok(Some(key.into_bytes()))
    }
}

/// Persistent secrets (`CREATE PERSISTENT SECRET`): each user's own, sealed in one file with a key
/// derived from a passphrase the environment holds.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SecretsSection {
    /// The environment variable holding the passphrase (16 characters or more); without it,
    /// persistent secrets are refused.
    pub key_env: Option<String>,
    /// The file they are kept in; `secrets.json` in the default warehouse if unset.
    pub path: Option<PathBuf>,
}

/// What the file functions (`read_parquet`, `read_csv`, `read_json`, a bare path), `COPY … TO` and
/// a table's `location` may reach on the server, which runs them as its own user for everyone.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FilesSection {
    /// Any local path (never a catalog's warehouse).
    pub allow_local_paths: bool,
    /// Local paths under these directories.
    pub allowed_local_prefixes: Vec<PathBuf>,
    /// `http://` and `https://` URLs (read only).
    pub allow_http: bool,
    /// Object store URLs under these prefixes (`s3://bucket/shared/`).
    pub allowed_object_prefixes: Vec<String>,
    /// Catalog URIs a session may `ATTACH`, under these prefixes.
    pub allowed_catalog_uris: Vec<String>,
}

impl FilesSection {
    pub fn access(&self) -> sqe_engine::FileAccess {
        sqe_engine::FileAccess::Restricted(sqe_engine::FileRules {
            allow_local_paths: self.allow_local_paths,
            allowed_local_prefixes: self
                .allowed_local_prefixes
                .iter()
                .map(|p| expand_home(p))
                .collect(),
            allow_http: self.allow_http,
            allowed_object_prefixes: self.allowed_object_prefixes.clone(),
            allowed_catalog_uris: self.allowed_catalog_uris.clone(),
        })
    }
}

/// The server's log, on standard error.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LogSection {
    /// `error`, `warn`, `info`, `debug` or `trace`, or a filter such as `info,sqe_engine=debug`;
    /// `RUST_LOG` overrides it.
    pub level: String,
    /// `text` or `json` (one object per line).
    pub format: String,
}

impl Default for LogSection {
    fn default() -> Self {
        Self {
            level: "info".into(),
            format: "text".into(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EngineSection {
    /// Statements running at once.
    pub max_concurrent_queries: usize,
    /// Statements waiting for a slot; past this, "server busy" at once.
    pub max_queued: usize,
    /// How long a statement waits for a slot before "server busy".
    pub queue_timeout_secs: u64,
    /// Statements one user may run at once; a quarter of `max_concurrent_queries` if unset.
    pub max_running_per_user: Option<usize>,
    /// Statements one user may have waiting; a quarter of `max_queued` if unset.
    pub max_queued_per_user: Option<usize>,
    /// Seconds a result may go unread before its statement gives its slot back (taking one again,
    /// in turn, when its client reads on).
    pub idle_slot_secs: u64,
    /// MiB of table files in object stores kept in memory for later scans (0: none); an eighth
    /// of the engine's memory limit, at most 2 GiB, if unset.
    pub object_cache_mb: Option<usize>,
    /// A directory of the server's own where the object cache also keeps what it reads, so that
    /// it outlives memory's room and restarts; none if unset.
    pub object_cache_dir: Option<std::path::PathBuf>,
    /// MiB that directory holds at most; 10240 if unset.
    pub object_cache_disk_mb: Option<u64>,
    /// The shortest retention `expire_snapshots` and `remove_orphan_files` may be given, as Trino
    /// writes durations (`7d`, `36h`); 7 days if unset.
    pub maintenance_min_retention: Option<String>,
}

impl Default for EngineSection {
    fn default() -> Self {
        let d = sqe_engine::AdmissionConfig::default();
        Self {
            max_concurrent_queries: d.max_concurrent_queries,
            max_queued: d.max_queued,
            queue_timeout_secs: d.queue_timeout.as_secs(),
            max_running_per_user: d.max_running_per_user,
            max_queued_per_user: d.max_queued_per_user,
            idle_slot_secs: d.idle_slot.as_secs(),
            object_cache_mb: None,
            object_cache_dir: None,
            object_cache_disk_mb: None,
            maintenance_min_retention: None,
        }
    }
}

impl EngineSection {
    pub fn admission(&self) -> sqe_engine::AdmissionConfig {
        sqe_engine::AdmissionConfig {
            max_concurrent_queries: self.max_concurrent_queries,
            max_queued: self.max_queued,
            queue_timeout: std::time::Duration::from_secs(self.queue_timeout_secs),
            max_running_per_user: self.max_running_per_user,
            max_queued_per_user: self.max_queued_per_user,
            idle_slot: std::time::Duration::from_secs(self.idle_slot_secs),
        }
    }

    /// The minimum retention of table maintenance, when set; an error names a bad value.
    pub fn maintenance_min_retention(&self) -> Result<Option<std::time::Duration>, String> {
        self.maintenance_min_retention
            .as_deref()
            .map(|text| {
                sqe_engine::parse_duration(text)
                    .map_err(|e| format!("[engine] maintenance_min_retention: {}", e.message()))
            })
            .transpose()
    }

    /// Bytes of the engine's object store cache, when set.
    pub fn object_cache_bytes(&self) -> Option<usize> {
        self.object_cache_mb.map(|mb| mb.saturating_mul(1 << 20))
    }

    /// Bytes of the object cache's directory, when set.
    pub fn object_cache_disk_bytes(&self) -> Option<u64> {
        self.object_cache_disk_mb
            .map(|mb| mb.saturating_mul(1 << 20))
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address every listener binds.
    pub host: IpAddr,
    /// Trino HTTP port (0 picks a free one).
    pub http_port: u16,
    /// Arrow Flight SQL port (0 picks a free one).
    pub flight_port: u16,
    /// Refuse insecure combinations at startup.
    pub production_mode: bool,
    /// TLS on both listeners, when set.
    pub tls: Option<TlsConfig>,
    /// A Trino query whose client has not asked for a page for this long is cancelled.
    pub client_timeout_secs: u64,
    /// A Flight SQL result not fetched within this time is dropped (its query cancelled).
    pub result_timeout_secs: u64,
    /// A Flight SQL prepared statement not used for this long is closed.
    pub prepared_statement_idle_secs: u64,
    /// Flight SQL prepared statements one user may hold open, and the bytes of their text and
    /// bound parameters; past either a new one is refused.
    pub max_prepared_statements_per_user: usize,
    pub max_prepared_statement_bytes_per_user: usize,
    /// Flight SQL results waiting for their DoGet one user may hold.
    pub max_flight_results_per_user: usize,
    /// Flight SQL sessions (cookies) one user may hold.
    pub max_flight_sessions_per_user: usize,
    /// Trino queries whose last page is unread one user may hold; past it a new one is refused
    /// before it runs.
    pub max_trino_queries_per_user: usize,
    /// How often abandoned queries, results and prepared statements are looked for.
    pub reaper_interval_secs: u64,
    /// On SIGTERM or Ctrl-C, how long running statements may take to finish (no new ones are
    /// accepted meanwhile) before the server stops anyway.
    pub shutdown_grace_secs: u64,
}

/// A PEM certificate chain and its private key.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CatalogConfig {
    /// Warehouse of the default catalog.
    pub warehouse: PathBuf,
    /// Name of the default catalog.
    pub name: String,
    /// More warehouses, each mounted as its own catalog.
    pub mounts: Vec<Mount>,
}

/// A catalog mounted by `[catalogs.NAME]`, told apart by its `type`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CatalogSection {
    /// A local warehouse: a SQLite catalog and Parquet files in one directory.
    Sqlite { warehouse: PathBuf },
    /// An Iceberg REST catalog.
    Rest(RestSection),
    /// An Iceberg JDBC catalog in PostgreSQL (pyiceberg's SQL catalog tables).
    Jdbc(JdbcSection),
    /// A Hive Metastore, whose Iceberg tables are read.
    Hms(HmsSection),
}

#[derive(Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HmsSection {
    /// `thrift://host:port`.
    pub uri: String,
    /// Storage properties for the tables' files (`s3.endpoint`, …).
    #[serde(default)]
    pub properties: std::collections::BTreeMap<String, String>,
    /// Where the tables keep their files (see the REST section's `locations`).
    #[serde(default)]
    pub locations: Vec<String>,
}

/// Property names, not their values (which may be storage keys).
impl std::fmt::Debug for HmsSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HmsSection")
            .field("uri", &self.uri)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .field("locations", &self.locations)
            .finish()
    }
}

impl HmsSection {
    pub fn engine_config(&self) -> sqe_engine::HmsConfig {
        sqe_engine::HmsConfig {
            uri: self.uri.clone(),
            properties: self.properties.clone(),
            locations: self.locations.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JdbcSection {
    /// `postgresql://user@host:port/dbname`.
    pub uri: String,
    /// The environment variable holding the database password, if it needs one.
    pub password_env: Option<String>,
    /// The local directory new tables' files go to.
    pub warehouse: PathBuf,
}

impl JdbcSection {
    /// The engine's configuration of this catalog, with the password read from the environment.
    pub fn engine_config(
        &self,
        name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<sqe_engine::PostgresConfig, String> {
        if !(self.uri.starts_with("postgresql://") || self.uri.starts_with("postgres://")) {
            return Err(format!(
                "[catalogs.{name}] uri must be a postgresql:// URL (PostgreSQL is the JDBC catalog SQE speaks), got '{}'",
                self.uri
            ));
        }
        let password = match &self.password_env {
            Some(var) => Some(env(var).ok_or_else(|| {
                format!("[catalogs.{name}]: the environment variable {var} is not set")
            })?),
            None => None,
        };
        Ok(sqe_engine::PostgresConfig {
            uri: self.uri.clone(),
            password,
            warehouse: self.warehouse.clone(),
        })
    }
}

/// How SQE authenticates to a REST catalog.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum RestAuthMode {
    /// Each caller's own bearer token, as the gateway received it.
    #[default]
    Passthrough,
    /// The bearer token in the environment variable `token_env`, for everyone.
    Static,
    /// The engine's own OAuth2 client credentials (`client_id:client_secret` in the environment
    /// variable `credential_env`), for catalogs not tied to users.
    ClientCredentials,
    /// No credential.
    None,
}

#[derive(Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RestSection {
    /// The catalog's base URL, the part before `/v1/`.
    pub uri: String,
    /// The warehouse to ask the catalog's `/v1/config` about.
    pub warehouse: Option<String>,
    /// The path prefix after `/v1/`, if the catalog's config does not give one.
    pub prefix: Option<String>,
    #[serde(default)]
    pub auth: RestAuthMode,
    /// `static`: the environment variable holding the token.
    pub token_env: Option<String>,
    /// `client_credentials`: the environment variable holding `client_id:client_secret`.
    pub credential_env: Option<String>,
    /// `client_credentials`: the OAuth2 scope to ask for.
    pub scope: Option<String>,
    /// `client_credentials`: a token endpoint other than the catalog's own.
    pub oauth2_server_uri: Option<String>,
    /// Further client and storage properties (`s3.endpoint`, `header.X-…`).
    #[serde(default)]
    pub properties: std::collections::BTreeMap<String, String>,
    /// Where the catalog's tables keep their files (`s3://bucket/prefix/`, `/srv/lake`). The
    /// server touches no other file for them (besides what `[files]` lets anyone read); without
    /// it, any object store but no local path.
    #[serde(default)]
    pub locations: Vec<String>,
}

/// Property names, not their values (which may be storage keys).
impl std::fmt::Debug for RestSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestSection")
            .field("uri", &self.uri)
            .field("warehouse", &self.warehouse)
            .field("prefix", &self.prefix)
            .field("auth", &self.auth)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .field("locations", &self.locations)
            .finish()
    }
}

impl RestSection {
    /// The engine's configuration of this catalog, with secrets read from the environment.
    pub fn engine_config(
        &self,
        name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<sqe_engine::RestCatalogConfig, String> {
        use sqe_engine::RestAuth;
        let secret = |key: &Option<String>, what: &str| -> Result<String, String> {
            let var = key.as_deref().ok_or_else(|| {
                format!(
                    "[catalogs.{name}] auth = \"{what}\" needs {}",
                    if what == "static" {
                        "token_env"
                    } else {
                        "credential_env"
                    }
                )
            })?;
            env(var).filter(|v| !v.is_empty()).ok_or_else(|| {
                format!("[catalogs.{name}]: the environment variable {var} is not set")
            })
        };
        let auth = match self.auth {
            RestAuthMode::Passthrough => RestAuth::Passthrough,
            RestAuthMode::None => RestAuth::None,
            RestAuthMode::Static => RestAuth::Static {
                token: secret(&self.token_env, "static")?,
            },
            RestAuthMode::ClientCredentials => RestAuth::ClientCredentials {
                credential: secret(&self.credential_env, "client_credentials")?,
                scope: self.scope.clone(),
                oauth2_server_uri: self.oauth2_server_uri.clone(),
            },
        };
        Ok(sqe_engine::RestCatalogConfig {
            uri: self.uri.clone(),
            warehouse: self.warehouse.clone(),
            prefix: self.prefix.clone(),
            auth,
            properties: self.properties.clone(),
            locations: self.locations.clone(),
        })
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Mount {
    pub name: String,
    pub warehouse: PathBuf,
}

impl Default for ServerConfig {
    fn default() -> Self {
        let flight = sqe_flight_sql::FlightSqlConfig::new("");
        Self {
            host: IpAddr::from([127, 0, 0, 1]),
            http_port: 8080,
            flight_port: 50051,
            production_mode: false,
            tls: None,
            client_timeout_secs: 300,
            result_timeout_secs: 300,
            prepared_statement_idle_secs: 3600,
            max_prepared_statements_per_user: flight.max_prepared_per_user,
            max_prepared_statement_bytes_per_user: flight.max_prepared_bytes_per_user,
            max_flight_results_per_user: flight.max_results_per_user,
            max_flight_sessions_per_user: flight.max_sessions_per_user,
            max_trino_queries_per_user: sqe_trino::TrinoConfig::new("").max_queries_per_user,
            reaper_interval_secs: 10,
            shutdown_grace_secs: 30,
        }
    }
}

/// `~/x` as a path under the home directory.
pub fn expand_home(path: &Path) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(rest),
        Err(_) => path.to_path_buf(),
    }
}

impl Default for CatalogConfig {
    fn default() -> Self {
        Self {
            warehouse: sqe_engine::EngineConfig::default_warehouse(),
            name: "iceberg".into(),
            mounts: Vec::new(),
        }
    }
}

/// Parses an environment value as TOML (number, boolean, array…), else takes it as a string.
fn env_value(raw: &str) -> toml::Value {
    match format!("v = {raw}").parse::<toml::Table>() {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| toml::Value::String(raw.to_string())),
        Err(_) => toml::Value::String(raw.to_string()),
    }
}

impl Config {
    /// Loads `path` (or only defaults), then applies `SQE_SECTION__KEY` overrides from `env`.
    pub fn load(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, String> {
        let mut table = match path {
            Some(p) => std::fs::read_to_string(p)
                .map_err(|e| format!("cannot read {}: {e}", p.display()))?
                .parse::<toml::Table>()
                .map_err(|e| format!("{}: {e}", p.display()))?,
            None => toml::Table::new(),
        };
        for (key, value) in env {
            let Some(rest) = key.strip_prefix("SQE_") else {
                continue;
            };
            let Some((section, field)) = rest.split_once("__") else {
                continue;
            };
            let section = table
                .entry(section.to_ascii_lowercase())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let toml::Value::Table(section) = section else {
                return Err(format!("{key}: [{}] is not a section", rest));
            };
            section.insert(field.to_ascii_lowercase(), env_value(&value));
        }
        let anonymous = match table.get("auth").and_then(|a| a.get("allow_anonymous")) {
            None => None,
            Some(toml::Value::Boolean(b)) => Some(*b),
            Some(other) => {
                return Err(format!(
                    "invalid configuration: auth.allow_anonymous must be true or false, not {other}"
                ));
            }
        };
        let mut config: Config = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| format!("invalid configuration: {}", e.message()))?;
        // Without an authenticator, and unless the configuration says otherwise, callers who
        // present nothing run as the user they name (validate keeps that to loopback addresses).
        config.auth.allow_anonymous = anonymous.unwrap_or(!config.has_authenticator());
        config.catalog.warehouse = expand_home(&config.catalog.warehouse);
        config.secrets.path = config.secrets.path.as_deref().map(expand_home);
        config.engine.object_cache_dir = config.engine.object_cache_dir.as_deref().map(expand_home);
        for mount in &mut config.catalog.mounts {
            mount.warehouse = expand_home(&mount.warehouse);
        }
        for section in config.catalogs.values_mut() {
            match section {
                CatalogSection::Sqlite { warehouse } => *warehouse = expand_home(warehouse),
                CatalogSection::Jdbc(jdbc) => jdbc.warehouse = expand_home(&jdbc.warehouse),
                CatalogSection::Rest(_) | CatalogSection::Hms(_) => {}
            }
        }
        config.validate()?;
        Ok(config)
    }

    pub fn has_authenticator(&self) -> bool {
        self.auth.oidc.is_some() || !self.auth.static_principals.is_empty()
    }

    /// Refuses combinations that would expose data.
    pub fn validate(&self) -> Result<(), String> {
        let has_authenticator = self.has_authenticator();
        let loopback = self.server.host.is_loopback();
        if !loopback && !has_authenticator {
            return Err(format!(
                "refusing to listen on {}: without an authenticator ([auth.oidc] or [[auth.static]]) SQE serves loopback addresses only",
                self.server.host
            ));
        }
        if !loopback && self.auth.allow_anonymous {
            return Err(format!(
                "refusing anonymous access on {}: allow_anonymous is for loopback addresses only",
                self.server.host
            ));
        }
        if self.server.production_mode && self.auth.allow_anonymous {
            return Err("production_mode = true forbids auth.allow_anonymous = true".into());
        }
        if self.server.production_mode && self.access.default != Some(AccessDefaultSetting::Deny) {
            return Err(
                "production_mode = true requires [access] default = \"deny\" (grant what users may do)"
                    .into(),
            );
        }
        if self.server.production_mode && !loopback && self.server.tls.is_none() {
            return Err(format!(
                "production_mode = true forbids serving credentials in plain text on {}: configure [server.tls]",
                self.server.host
            ));
        }
        if !self.auth.allow_anonymous && !has_authenticator {
            return Err("no way to authenticate: set auth.allow_anonymous = true, [auth.oidc] or [[auth.static]]".into());
        }
        if !["text", "json"].contains(&self.log.format.as_str()) {
            return Err(format!(
                "log.format must be \"text\" or \"json\", not \"{}\"",
                self.log.format
            ));
        }
        for (name, section) in &self.catalogs {
            if let CatalogSection::Rest(rest) = section
                && rest.auth == RestAuthMode::Passthrough
                && !has_authenticator
            {
                return Err(format!(
                    "[catalogs.{name}] passes each caller's own token on, so the server needs an authenticator ([auth.oidc] or [[auth.static]])"
                ));
            }
        }
        if self.mcp.enabled {
            self.mcp_auth_mode()?;
            if self.mcp.max_rows == 0 || self.mcp.max_bytes == 0 {
                return Err("[mcp] max_rows and max_bytes must be at least 1".into());
            }
            if self.mcp.allow_writes && self.mcp.write_roles.is_empty() {
                return Err(
                    "[mcp] allow_writes = true needs write_roles (the roles that may make changes)"
                        .into(),
                );
            }
        }
        if self.server.reaper_interval_secs == 0 {
            return Err("server.reaper_interval_secs must be at least 1".into());
        }
        let server = &self.server;
        for (name, cap) in [
            (
                "[server] max_prepared_statements_per_user",
                server.max_prepared_statements_per_user,
            ),
            (
                "[server] max_prepared_statement_bytes_per_user",
                server.max_prepared_statement_bytes_per_user,
            ),
            (
                "[server] max_flight_results_per_user",
                server.max_flight_results_per_user,
            ),
            (
                "[server] max_flight_sessions_per_user",
                server.max_flight_sessions_per_user,
            ),
            (
                "[server] max_trino_queries_per_user",
                server.max_trino_queries_per_user,
            ),
            (
                "[mcp] max_sessions_per_user",
                self.mcp.max_sessions_per_user,
            ),
            (
                "[quack] max_sessions_per_user",
                self.quack.max_sessions_per_user,
            ),
        ] {
            if cap == 0 {
                return Err(format!(
                    "{name} must be at least 1 (it caps what one user may make the server keep)"
                ));
            }
        }
        if let Some(oidc) = &self.auth.oidc {
            if oidc.issuer.is_empty() {
                return Err("[auth.oidc] needs an issuer".into());
            }
            if oidc
                .algorithms
                .iter()
                .any(|a| a.eq_ignore_ascii_case("none"))
            {
                return Err("[auth.oidc] algorithms must not include 'none'".into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_config_states_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sqe.toml.example");
        let example = Config::load(Some(&path), Vec::new()).unwrap_or_else(|e| panic!("{e}"));
        let defaults = Config::load(None, Vec::new()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(example, defaults);
        // And the example names every section a user can set.
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        for section in [
            "[server]",
            "[catalog]",
            "[auth]",
            "[engine]",
            "[files]",
            "[log]",
            "[mcp]",
            "[quack]",
        ] {
            assert!(text.contains(section), "{section} is missing");
        }
    }

    #[test]
    fn users_who_sign_in_cannot_change_each_others_tables_by_default() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("sqe.toml");
        let load = |text: &str| {
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
            let config = Config::load(Some(&path), Vec::new()).unwrap_or_else(|e| panic!("{e}"));
            config.access.engine_default(config.has_authenticator())
        };
        let oidc = "[auth.oidc]\nissuer = \"http://127.0.0.1:1\"\n";
        assert_eq!(load(""), sqe_engine::AccessDefault::Allow);
        assert_eq!(load(oidc), sqe_engine::AccessDefault::Owner);
        assert_eq!(
            load("[[auth.static]]\nname = \"etl\"\ntoken_env = \"ETL_TOKEN\"\n"),
            sqe_engine::AccessDefault::Owner
        );
        for (setting, default) in [
            ("allow", sqe_engine::AccessDefault::Allow),
            ("deny", sqe_engine::AccessDefault::Deny),
            ("owner", sqe_engine::AccessDefault::Owner),
        ] {
            let text = format!("{oidc}[access]\ndefault = \"{setting}\"\n");
            assert_eq!(load(&text), default, "{setting}");
            let text = format!("[access]\ndefault = \"{setting}\"\n");
            assert_eq!(load(&text), default, "{setting} without an authenticator");
        }
    }

    #[test]
    fn a_config_without_auth_serves_loopback_anonymously() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("sqe.toml");
        std::fs::write(&path, "[server]\nhttp_port = 0\n").unwrap_or_else(|e| panic!("{e}"));
        let config = Config::load(Some(&path), Vec::new()).unwrap_or_else(|e| panic!("{e}"));
        assert!(config.auth.allow_anonymous);
        std::fs::write(
            &path,
            "[auth.oidc]\nissuer = \"http://127.0.0.1:1\"\n[server]\nhost = \"0.0.0.0\"\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let config = Config::load(Some(&path), Vec::new()).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !config.auth.allow_anonymous,
            "an authenticator turns it off"
        );
    }

    #[test]
    fn ranger_settings_are_checked() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("sqe.toml");
        let ranger = |toml: &str| {
            std::fs::write(&path, toml).unwrap_or_else(|e| panic!("{e}"));
            let config = Config::load(Some(&path), Vec::new()).unwrap_or_else(|e| panic!("{e}"));
            config
                .access
                .ranger(vec!["iceberg".into()])
                .map(|r| r.map(|r| (r.catalogs, r.refresh.as_secs(), r.grace.as_secs())))
        };
        let url = "policy_url = \"http://127.0.0.1:1/service/plugins/policies/download/hive\"";
        assert_eq!(
            ranger(&format!(
                "[access]\nengine = \"ranger\"\n[access.ranger]\n{url}\n"
            )),
            Ok(Some((vec!["iceberg".to_string()], 30, 300)))
        );
        assert_eq!(ranger("[access]\n"), Ok(None));
        assert_eq!(
            ranger("[access]\nengine = \"ranger\"\n"),
            Err("[access] engine = \"ranger\" needs [access.ranger] policy_url".to_string())
        );
        assert_eq!(
            ranger(&format!("[access.ranger]\n{url}\n")),
            Err("[access.ranger] is set but [access] engine is not \"ranger\"".to_string())
        );
        assert_eq!(
            ranger(&format!(
                "[access]\nengine = \"ranger\"\n[access.ranger]\n{url}\nrefresh_secs = 60\ngrace_secs = 10\n"
            )),
            Err("[access.ranger]: refresh_secs must be at least 1 and grace_secs at least refresh_secs".to_string())
        );
    }

    #[test]
    fn mcp_authentication_is_one_that_fits() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("sqe.toml");
        let load = |toml: &str| {
            std::fs::write(&path, toml).unwrap_or_else(|e| panic!("{e}"));
            Config::load(Some(&path), Vec::new()).and_then(|c| c.mcp_auth_mode())
        };
        let oidc = "[auth.oidc]\nissuer = \"http://127.0.0.1:1\"\n";
        assert_eq!(
            load(&format!("[mcp]\nenabled = true\n{oidc}")),
            Ok(McpAuthMode::Oidc)
        );
        assert_eq!(
            load("[mcp]\nenabled = true\n"),
            Err("[mcp] needs a way to authenticate agents: [auth.oidc], [[auth.static]] or [mcp.auth] mode = \"anonymous\"".into())
        );
        assert_eq!(
            load("[mcp]\nenabled = true\n[mcp.auth]\nmode = \"anonymous\"\n"),
            Ok(McpAuthMode::Anonymous)
        );
        for (toml, refusal) in [
            (
                format!("[mcp]\nenabled = true\n[mcp.auth]\nmode = \"anonymous\"\n{oidc}"),
                "[mcp.auth] mode = \"anonymous\" is refused when an identity provider is configured",
            ),
            (
                "[mcp]\nenabled = true\nallow_writes = true\nwrite_roles = [\"w\"]\n[mcp.auth]\nmode = \"anonymous\"\n".to_string(),
                "[mcp.auth] mode = \"anonymous\" is refused with [mcp] allow_writes = true",
            ),
            (
                format!("[mcp]\nenabled = true\nallow_writes = true\n{oidc}"),
                "[mcp] allow_writes = true needs write_roles (the roles that may make changes)",
            ),
            (
                "[mcp]\nenabled = true\n[mcp.auth]\nmode = \"static\"\n".to_string(),
                "[mcp.auth] mode = \"static\" needs [[auth.static]] principals",
            ),
        ] {
            assert_eq!(load(&toml), Err(refusal.to_string()), "{toml}");
        }
    }

    #[test]
    fn environment_overrides_the_file() {
        let env = vec![
            ("SQE_SERVER__HTTP_PORT".to_string(), "9999".to_string()),
            ("SQE_CATALOG__NAME".to_string(), "lake".to_string()),
            ("HOME".to_string(), "/x".to_string()),
        ];
        let config = Config::load(None, env).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (config.server.http_port, config.catalog.name.as_str()),
            (9999, "lake")
        );
    }

    #[test]
    fn unsafe_settings_are_refused() {
        let open = vec![("SQE_SERVER__HOST".to_string(), "0.0.0.0".to_string())];
        assert_eq!(
            Config::load(None, open).err().as_deref(),
            Some(
                "refusing to listen on 0.0.0.0: without an authenticator ([auth.oidc] or [[auth.static]]) SQE serves loopback addresses only"
            )
        );
        let prod = vec![(
            "SQE_SERVER__PRODUCTION_MODE".to_string(),
            "true".to_string(),
        )];
        assert_eq!(
            Config::load(None, prod).err().as_deref(),
            Some("production_mode = true forbids auth.allow_anonymous = true")
        );
        let open_prod = vec![
            (
                "SQE_SERVER__PRODUCTION_MODE".to_string(),
                "true".to_string(),
            ),
            ("SQE_AUTH__ALLOW_ANONYMOUS".to_string(), "false".to_string()),
        ];
        let refused = Config::load(None, open_prod).err();
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("[access] default")),
            "{refused:?}"
        );
        let no_room = vec![(
            "SQE_SERVER__MAX_PREPARED_STATEMENTS_PER_USER".to_string(),
            "0".to_string(),
        )];
        assert_eq!(
            Config::load(None, no_room).err().as_deref(),
            Some(
                "[server] max_prepared_statements_per_user must be at least 1 (it caps what one user may make the server keep)"
            )
        );
        let typo = vec![("SQE_SERVER__HTTP_PROT".to_string(), "1".to_string())];
        assert!(
            Config::load(None, typo)
                .err()
                .is_some_and(|e| e.contains("http_prot"))
        );
    }
}

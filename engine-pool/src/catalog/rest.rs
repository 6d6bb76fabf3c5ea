//! Iceberg REST catalogs (Polaris, Nessie, Lakekeeper, Unity, Glue's and S3 Tables' REST
//! endpoints), through iceberg-catalog-rest.
//!
//! In `passthrough` mode the catalog sees the caller's own bearer token on every request: each
//! token gets a client of its own, kept until the token expires and never used for anyone else.
//! A session without a token cannot reach such a catalog at all. In the other modes every
//! session shares one client holding the engine's own credential (for catalogs not tied to users).
//!
//! The client asks for vended storage credentials (`X-Iceberg-Access-Delegation`); what the catalog
//! hands back with a table goes to that table's file IO, which reaches local files and S3 (and
//! S3-alikes: `s3.endpoint`, `s3.path-style-access`, `s3.region`) through OpenDAL. A property the
//! mount configures wins over a vended one (iceberg-rust merges them so), and OpenDAL falls back on
//! the standard environment (`AWS_*`) for what neither gives.
//!
//! Views go through the REST spec's view endpoints when the catalog serves them: its `/v1/config`
//! lists them among its `endpoints`, or the mount says so with `view-endpoints-supported = "true"`
//! (pyiceberg's property, for catalogs that list no endpoints). Without them a catalog keeps no
//! views for SQE, and no statement asks it for one.
//!
//! HTTP failures come back as the catalog said them (a refusal is the caller's permission error,
//! naming the catalog), never as an internal error, and no token ever appears in a message or a
//! log line.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine as _;
use iceberg::spec::ViewMetadata;
use iceberg::table::Table;
use iceberg::{
    Catalog, CatalogBuilder, Error, ErrorKind, Namespace, NamespaceIdent, Result, TableCommit,
    TableCreation, TableIdent, TableRequirement, TableUpdate,
};
use iceberg_catalog_rest::{RestCatalog, RestCatalogBuilder};
use sha2::{Digest, Sha256};
use sqe_sessions::{ErrorCode, Session, SqeError, SqeResult};

use super::backend::{CatalogMount, CatalogRef, SqeCatalog};
use super::storage::CatalogStorageFactory;
use super::view::{self, ViewChange, ViewDefinition};
use crate::error::CatalogRefusal;
use crate::files::policy::Confinement;

/// How SQE authenticates to a REST catalog.
#[derive(Clone, PartialEq, Eq)]
pub enum RestAuth {
    /// The calling user's own bearer token, per session.
    Passthrough,
    /// A fixed bearer token of the engine's.
    Static { token: String },
    /// The engine's own OAuth2 client credentials (`client_id:client_secret`), exchanged by the
    /// client at the catalog's token endpoint (or `oauth2_server_uri`).
    ClientCredentials {
        credential: String,
        scope: Option<String>,
        oauth2_server_uri: Option<String>,
    },
    /// No credential (a catalog open to all).
    None,
}

impl fmt::Debug for RestAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RestAuth::Passthrough => "Passthrough",
            RestAuth::Static { .. } => "Static(***)",
            RestAuth::ClientCredentials { .. } => "ClientCredentials(***)",
            RestAuth::None => "None",
        })
    }
}

/// A REST catalog as the configuration mounts it.
#[derive(Clone)]
pub struct RestCatalogConfig {
    /// The catalog's base URI (the part before `/v1/`).
    pub uri: String,
    /// The warehouse the catalog's `/v1/config` is asked about, if it serves several.
    pub warehouse: Option<String>,
    /// The path prefix after `/v1/`, when the catalog does not hand one out in its config.
    pub prefix: Option<String>,
    pub auth: RestAuth,
    /// Further client and file IO properties (`s3.endpoint`, `header.X-…`, …).
    pub properties: BTreeMap<String, String>,
    /// Where the catalog's tables keep their files (`s3://bucket/prefix/`, `/srv/lake`), as the
    /// operator declares it. On a server nothing else is read or written for its tables, apart
    /// from what the file functions may read; undeclared, any object store but no local path.
    pub locations: Vec<String>,
}

/// How long connecting to a catalog, and one request to it, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Property names, not their values (which may be storage keys).
impl fmt::Debug for RestCatalogConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestCatalogConfig")
            .field("uri", &self.uri)
            .field("warehouse", &self.warehouse)
            .field("prefix", &self.prefix)
            .field("auth", &self.auth)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .field("locations", &self.locations)
            .finish()
    }
}

/// The mount property saying that the catalog serves Iceberg's view endpoints though its
/// `/v1/config` lists no `endpoints` (the name pyiceberg reads).
const VIEW_ENDPOINTS_SUPPORTED: &str = "view-endpoints-supported";
/// The entry of `/v1/config`'s `endpoints` that says the catalog serves views.
const LOAD_VIEW_ENDPOINT: &str = "GET /v1/{prefix}/namespaces/{namespace}/views/{view}";
/// The most SQE reads of one answer to a request it sends itself.
const MAX_ANSWER_BYTES: usize = 16 << 20;
/// The most view names SQE takes from one namespace's listing, over all its pages.
const MAX_LISTED_VIEWS: usize = 100_000;
/// The most pages SQE asks for of one listing.
const MAX_LIST_PAGES: usize = 1_000;
/// The most bytes SQE reads of one listing, over all its pages.
const MAX_LIST_BYTES: usize = 64 << 20;
/// How long one listing may take, over all its pages.
const LIST_DEADLINE: Duration = Duration::from_secs(120);

/// Clients kept for passthrough tokens; past this the expired ones go, then the oldest.
const MAX_CLIENTS: usize = 1024;
/// How long a client for a token that is not a JWT (no `exp` to read) is kept.
const OPAQUE_TOKEN_TTL: Duration = Duration::from_secs(300);

/// A mounted REST catalog.
pub struct RestMount {
    name: String,
    config: RestCatalogConfig,
    /// The one client every session uses, unless the mode is passthrough.
    shared: Option<CatalogRef>,
    /// Passthrough clients by the SHA-256 of their token, with when the token expires.
    clients: Mutex<HashMap<[u8; 32], (Instant, CatalogRef)>>,
    /// One connection pool for all of this catalog's clients (a token is a header, not a pool).
    http: reqwest::Client,
    /// Where its tables' files may be.
    confinement: Confinement,
}

impl fmt::Debug for RestMount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestMount")
            .field("name", &self.name)
            .field("uri", &self.config.uri)
            .field("auth", &self.config.auth)
            .finish()
    }
}

impl RestMount {
    pub fn new(name: &str, config: RestCatalogConfig, confinement: Confinement) -> SqeResult<Self> {
        if !(config.uri.starts_with("http://") || config.uri.starts_with("https://")) {
            return Err(SqeError::invalid(format!(
                "catalog '{name}': uri must be an http:// or https:// URL, got '{}'",
                config.uri
            )));
        }
        // A catalog that stops answering fails the statement rather than holding it forever.
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| SqeError::internal(format!("catalog '{name}': HTTP client: {e}")))?;
        let shared = match &config.auth {
            RestAuth::Passthrough => None,
            RestAuth::Static { token } => {
                Some(client(name, &config, Some(token), &http, &confinement)?)
            }
            RestAuth::ClientCredentials { .. } | RestAuth::None => {
                Some(client(name, &config, None, &http, &confinement)?)
            }
        };
        Ok(Self {
            name: name.to_string(),
            config,
            shared,
            clients: Mutex::new(HashMap::new()),
            http,
            confinement,
        })
    }

    fn passthrough(&self, session: &Session) -> SqeResult<CatalogRef> {
        let Some(credential) = &session.credential else {
            return Err(SqeError::new(
                ErrorCode::Unauthenticated,
                format!(
                    "catalog '{}' is reached with the caller's own token, and this session has none: sign in with a bearer token",
                    self.name
                ),
            ));
        };
        let token = credential.expose();
        let now = Instant::now();
        let expires = token_expiry(token, now);
        if expires <= now {
            return Err(SqeError::new(
                ErrorCode::Unauthenticated,
                "the session's token has expired: sign in again",
            ));
        }
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((until, catalog)) = clients.get(&key)
            && *until > now
        {
            return Ok(catalog.clone());
        }
        if clients.len() >= MAX_CLIENTS {
            clients.retain(|_, (until, _)| *until > now);
            if clients.len() >= MAX_CLIENTS
                && let Some(oldest) = clients.iter().min_by_key(|(_, (u, _))| *u).map(|(k, _)| *k)
            {
                clients.remove(&oldest);
            }
        }
        let catalog = client(
            &self.name,
            &self.config,
            Some(token),
            &self.http,
            &self.confinement,
        )?;
        clients.insert(key, (expires, catalog.clone()));
        Ok(catalog)
    }
}

impl CatalogMount for RestMount {
    fn shared_catalog(&self) -> Option<CatalogRef> {
        self.shared.clone()
    }

    fn bind(&self, session: &Session) -> SqeResult<CatalogRef> {
        match &self.shared {
            Some(catalog) => Ok(catalog.clone()),
            None => self.passthrough(session),
        }
    }
}

/// When a client for `token` stops being usable: the JWT's `exp` (already checked by the
/// gateway's authenticator), or a few minutes for a token that is not a JWT.
fn token_expiry(token: &str, now: Instant) -> Instant {
    let exp = token
        .split('.')
        .nth(1)
        .and_then(|payload| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(payload.trim_end_matches('='))
                .ok()
        })
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|claims| claims.get("exp").and_then(|e| e.as_u64()));
    let Some(exp) = exp else {
        return now + OPAQUE_TOKEN_TTL;
    };
    let unix_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    match exp.checked_sub(unix_now) {
        Some(left) => now + Duration::from_secs(left),
        None => now,
    }
}

/// A client for the catalog, with `token` as its bearer token if given.
fn client(
    name: &str,
    config: &RestCatalogConfig,
    token: Option<&str>,
    http: &reqwest::Client,
    confinement: &Confinement,
) -> SqeResult<CatalogRef> {
    let mut props: HashMap<String, String> = config
        .properties
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    props.insert(
        "uri".to_string(),
        config.uri.trim_end_matches('/').to_string(),
    );
    props
        .entry("header.X-Iceberg-Access-Delegation".to_string())
        .or_insert_with(|| "vended-credentials".to_string());
    if let Some(w) = &config.warehouse {
        props.insert("warehouse".to_string(), w.clone());
    }
    if let Some(p) = &config.prefix {
        props.insert("prefix".to_string(), p.clone());
    }
    if let Some(t) = token {
        props.insert("token".to_string(), t.to_string());
    }
    if let RestAuth::ClientCredentials {
        credential,
        scope,
        oauth2_server_uri,
    } = &config.auth
    {
        props.insert("credential".to_string(), credential.clone());
        if let Some(s) = scope {
            props.insert("scope".to_string(), s.clone());
        }
        if let Some(u) = oauth2_server_uri {
            props.insert("oauth2-server-uri".to_string(), u.clone());
        }
    }
    let runtime = iceberg::Runtime::try_current()
        .map_err(|e| SqeError::internal(format!("catalog '{name}': {e}")))?;
    let builder = RestCatalogBuilder::default()
        .with_client(http.clone())
        .with_storage_factory(Arc::new(CatalogStorageFactory::new(
            name,
            confinement.clone(),
        )))
        .with_runtime(runtime);
    // `load` only checks the properties; the client connects on its first request.
    let catalog = futures::executor::block_on(builder.load(name, props))
        .map_err(|e| SqeError::invalid(format!("catalog '{name}': {}", e.message())))?;
    let headers = config
        .properties
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("header.")?.to_string(), v.clone())))
        .collect();
    let committer = match &config.auth {
        RestAuth::ClientCredentials { .. } => None,
        _ => Some(Committer {
            http: http.clone(),
            token: token.map(str::to_string),
            prefix: config.prefix.clone(),
            warehouse: config.warehouse.clone(),
            headers,
        }),
    };
    let views_declared = config
        .properties
        .get(VIEW_ENDPOINTS_SUPPORTED)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    Ok(Arc::new(RestClient {
        name: name.to_string(),
        uri: config.uri.clone(),
        inner: catalog,
        committer,
        views_declared,
        settings: tokio::sync::OnceCell::new(),
    }))
}

/// What SQE needs to send a commit to a REST catalog itself: iceberg-catalog-rest only sends the
/// commits iceberg's own transactions build. Not for `client_credentials`, whose token only
/// iceberg-catalog-rest holds.
struct Committer {
    http: reqwest::Client,
    token: Option<String>,
    prefix: Option<String>,
    warehouse: Option<String>,
    /// `header.*` properties, sent on every request as iceberg-catalog-rest sends them.
    headers: Vec<(String, String)>,
}

/// What SQE reads of a catalog's `/v1/config`.
struct Settings {
    /// The path prefix after `/v1/`: the mount's, else the one the catalog hands out.
    prefix: Option<String>,
    /// Whether the catalog serves the view endpoints.
    views: bool,
}

/// One client of a REST catalog. Its `Debug` shows no credential.
struct RestClient {
    name: String,
    uri: String,
    inner: RestCatalog,
    committer: Option<Committer>,
    /// The mount says the catalog serves views, whatever its config lists.
    views_declared: bool,
    /// Read from the catalog on the first request SQE sends itself.
    settings: tokio::sync::OnceCell<Settings>,
}

impl fmt::Debug for RestClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestClient")
            .field("name", &self.name)
            .field("uri", &self.uri)
            .finish()
    }
}

impl RestClient {
    /// A request to the catalog with the client's token and headers.
    fn request(
        &self,
        committer: &Committer,
        method: reqwest::Method,
        url: reqwest::Url,
    ) -> reqwest::RequestBuilder {
        let mut request = committer.http.request(method, url);
        if let Some(token) = &committer.token {
            request = request.bearer_auth(token);
        }
        for (name, value) in &committer.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        request
    }

    fn unreachable(&self, e: reqwest::Error) -> Error {
        tracing::debug!("catalog '{}': {e}", self.name);
        let message = format!("catalog '{}' cannot be reached at {}", self.name, self.uri);
        Error::new(ErrorKind::Unexpected, message.clone()).with_source(CatalogRefusal {
            code: ErrorCode::External,
            message,
        })
    }

    fn url(&self, segments: &[&str]) -> Result<reqwest::Url> {
        let mut url = reqwest::Url::parse(self.uri.trim_end_matches('/')).map_err(|e| {
            Error::new(
                ErrorKind::DataInvalid,
                format!("catalog '{}': uri: {e}", self.name),
            )
        })?;
        url.path_segments_mut()
            .map_err(|()| {
                Error::new(
                    ErrorKind::DataInvalid,
                    format!("catalog '{}': uri cannot take a path", self.name),
                )
            })?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    /// What the catalog's `/v1/config` says, asked once per client.
    async fn settings(&self, committer: &Committer) -> Result<&Settings> {
        self.settings
            .get_or_try_init(|| async {
                let mut url = self.url(&["v1", "config"])?;
                if let Some(w) = &committer.warehouse {
                    url.query_pairs_mut().append_pair("warehouse", w);
                }
                let (status, text) = self
                    .call(committer, reqwest::Method::GET, url, None)
                    .await?;
                if status != 200 {
                    return Err(self.refused(status, &text));
                }
                let config: serde_json::Value = serde_json::from_str(&text).map_err(|_| {
                    self.answered("its config with something that is not JSON".to_string())
                })?;
                let prefix = committer.prefix.clone().or_else(|| {
                    config
                        .pointer("/overrides/prefix")
                        .and_then(|p| p.as_str())
                        .map(str::to_string)
                });
                let listed = config
                    .get("endpoints")
                    .and_then(|e| e.as_array())
                    .is_some_and(|list| {
                        list.iter().any(|e| e.as_str() == Some(LOAD_VIEW_ENDPOINT))
                    });
                Ok(Settings {
                    prefix,
                    views: self.views_declared || listed,
                })
            })
            .await
    }

    /// Sends a request of SQE's own and reads the answer, up to [`MAX_ANSWER_BYTES`].
    async fn call(
        &self,
        committer: &Committer,
        method: reqwest::Method,
        url: reqwest::Url,
        body: Option<&serde_json::Value>,
    ) -> Result<(u16, String)> {
        let mut request = self.request(committer, method, url);
        if let Some(body) = body {
            request = request.json(body);
        }
        let mut response = request.send().await.map_err(|e| self.unreachable(e))?;
        let status = response.status().as_u16();
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.unreachable(e))? {
            if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(self.answered(format!(
                    "more than {} MiB to one request",
                    MAX_ANSWER_BYTES >> 20
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// The catalog's refusal of a request SQE sent itself.
    fn refused(&self, status: u16, text: &str) -> Error {
        self.explain(Error::new(
            ErrorKind::Unexpected,
            format!("status: {status}, json: {text}"),
        ))
    }

    /// An answer SQE cannot use: the catalog's fault, said with what was wrong.
    fn answered(&self, what: String) -> Error {
        let message = format!("catalog '{}' ({}) answered {what}", self.name, self.uri);
        Error::new(ErrorKind::Unexpected, message.clone()).with_source(CatalogRefusal {
            code: ErrorCode::External,
            message,
        })
    }

    /// The client's committer, when the catalog serves views.
    async fn views(&self) -> Result<Option<&Committer>> {
        let Some(committer) = &self.committer else {
            return Ok(None);
        };
        Ok(self.settings(committer).await?.views.then_some(committer))
    }

    /// `…/namespaces/{namespace}/views[/{name}]`.
    async fn view_url(
        &self,
        committer: &Committer,
        namespace: &NamespaceIdent,
        name: Option<&str>,
    ) -> Result<reqwest::Url> {
        let prefix = self.settings(committer).await?.prefix.clone();
        let namespace = namespace.join("\u{1f}");
        let mut segments = vec!["v1"];
        segments.extend(prefix.as_deref());
        segments.extend(["namespaces", &namespace, "views"]);
        segments.extend(name);
        self.url(&segments)
    }

    /// A request about the view `ident`: its status and answer, or None if the catalog keeps no
    /// views.
    async fn on_view(
        &self,
        method: reqwest::Method,
        ident: &TableIdent,
    ) -> Result<Option<(u16, String)>> {
        let Some(committer) = self.views().await? else {
            return Ok(None);
        };
        let url = self
            .view_url(committer, &ident.namespace, Some(&ident.name))
            .await?;
        self.call(committer, method, url, None).await.map(Some)
    }

    /// The view's metadata, if the catalog has a view of that name.
    async fn fetch_view(&self, ident: &TableIdent) -> Result<Option<ViewMetadata>> {
        let Some((status, text)) = self.on_view(reqwest::Method::GET, ident).await? else {
            return Ok(None);
        };
        match status {
            200 => {}
            // No view of that name, or none this caller may load as one: whatever holds the
            // name (a table, nothing) is then looked up as a table, which says what it is.
            403..=405 => return Ok(None),
            _ => return Err(self.refused(status, &text)),
        }
        let answer: serde_json::Value = serde_json::from_str(&text).map_err(|_| {
            self.answered("with something that is not an Iceberg REST response".to_string())
        })?;
        let metadata = answer.get("metadata").cloned().unwrap_or_default();
        serde_json::from_value(metadata).map(Some).map_err(|e| {
            self.answered(format!(
                "view metadata for '{ident}' that cannot be read: {e}"
            ))
        })
    }

    /// The catalog's own words for a failed request: its HTTP status and the message of its
    /// error body (the REST spec's `{"error": {"message", "type", "code"}}`), or what went wrong
    /// reaching it. iceberg-catalog-rest keeps the status and body only in the error's context,
    /// which its `Display` prints.
    fn explain(&self, e: Error) -> Error {
        if e.kind() != ErrorKind::Unexpected {
            return e;
        }
        let text = e.to_string();
        let status = text
            .split_once("status: ")
            .and_then(|(_, rest)| rest.get(..3))
            .and_then(|s| s.parse::<u16>().ok());
        let refusal = match status {
            Some(status) => {
                let said = text
                    .split_once("json: ")
                    .and_then(|(_, rest)| error_message(rest))
                    .unwrap_or_default();
                let code = match status {
                    401 | 419 => ErrorCode::Unauthenticated,
                    403 => ErrorCode::PermissionDenied,
                    404 => ErrorCode::NotFound,
                    409 => ErrorCode::Conflict,
                    400 | 406 | 422 => ErrorCode::InvalidInput,
                    429 | 503 => ErrorCode::ResourceExhausted,
                    _ => ErrorCode::External,
                };
                let said = if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                };
                CatalogRefusal {
                    code,
                    message: format!(
                        "catalog '{}' ({}) answered HTTP {status}{said}",
                        self.name, self.uri
                    ),
                }
            }
            None if e.message().contains("the commit state is unknown") => CatalogRefusal {
                code: ErrorCode::External,
                message: format!(
                    "catalog '{}' ({}) failed the commit: {}",
                    self.name,
                    self.uri,
                    e.message()
                ),
            },
            None if e.message().starts_with("Failed to parse response") => {
                match text
                    .split_once("json: ")
                    .and_then(|(_, rest)| unreadable_column(rest))
                {
                    Some((column, kind)) => CatalogRefusal {
                        code: ErrorCode::Unsupported,
                        message: format!(
                            "catalog '{}' answered with a table whose column '{column}' is of type {kind}, which SQE does not read yet",
                            self.name
                        ),
                    },
                    None => CatalogRefusal {
                        code: ErrorCode::External,
                        message: format!(
                            "catalog '{}' ({}) answered with something that is not an Iceberg REST response",
                            self.name, self.uri
                        ),
                    },
                }
            }
            None if e.message() == "Failed to execute http request" => CatalogRefusal {
                code: ErrorCode::External,
                message: format!("catalog '{}' cannot be reached at {}", self.name, self.uri),
            },
            None => return e,
        };
        Error::new(ErrorKind::Unexpected, refusal.message.clone()).with_source(refusal)
    }
}

/// The first column, in a table's metadata in the LoadTable answer at the start of `text`, of a
/// type iceberg-rust 0.10 cannot load (format version 3's variant, geometry and geography, and
/// unknown), with that type: why the answer did not parse.
fn unreadable_column(text: &str) -> Option<(String, String)> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>();
    let body = values.next()?.ok()?;
    let schemas = body.get("metadata")?.get("schemas")?.as_array()?;
    schemas.iter().find_map(|schema| {
        let fields = schema.get("fields")?.as_array()?;
        fields
            .iter()
            .find_map(|f| unreadable_type(f.get("type")?, f.get("name")?.as_str()?.to_string()))
    })
}

/// The path and name of the first type in `kind` (of the column or field at `path`) that
/// iceberg-rust cannot load.
fn unreadable_type(kind: &serde_json::Value, path: String) -> Option<(String, String)> {
    match kind {
        serde_json::Value::String(name) => {
            let unreadable = ["variant", "unknown", "geometry", "geography"]
                .iter()
                .any(|t| name.starts_with(t));
            unreadable.then(|| (path, name.clone()))
        }
        serde_json::Value::Object(nested) => {
            if let Some(fields) = nested.get("fields").and_then(|f| f.as_array()) {
                return fields.iter().find_map(|f| {
                    let name = f.get("name")?.as_str()?;
                    unreadable_type(f.get("type")?, format!("{path}.{name}"))
                });
            }
            ["element", "key", "value"]
                .iter()
                .find_map(|part| unreadable_type(nested.get(*part)?, format!("{path}.{part}")))
        }
        _ => None,
    }
}

/// The `message` of an Iceberg REST error body at the start of `text` (which may go on after it).
fn error_message(text: &str) -> Option<String> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>();
    let body = values.next()?.ok()?;
    let error = body.get("error").unwrap_or(&body);
    let message = error.get("message")?.as_str()?;
    Some(message.chars().take(500).collect())
}

#[async_trait]
impl Catalog for RestClient {
    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> Result<Vec<NamespaceIdent>> {
        self.inner
            .list_namespaces(parent)
            .await
            .map_err(|e| self.explain(e))
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<Namespace> {
        self.inner
            .create_namespace(namespace, properties)
            .await
            .map_err(|e| self.explain(e))
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        self.inner
            .get_namespace(namespace)
            .await
            .map_err(|e| self.explain(e))
    }

    /// By GET, not HEAD: not every catalog serves HEAD.
    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        match self.get_namespace(namespace).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NamespaceNotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn update_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<()> {
        self.inner
            .update_namespace(namespace, properties)
            .await
            .map_err(|e| self.explain(e))
    }

    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> Result<()> {
        self.inner
            .drop_namespace(namespace)
            .await
            .map_err(|e| self.explain(e))
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        self.inner
            .list_tables(namespace)
            .await
            .map_err(|e| self.explain(e))
    }

    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        mut creation: TableCreation,
    ) -> Result<Table> {
        // The REST protocol's create names no format version: a catalog takes it from the
        // `format-version` property (and keeps it out of the table's properties).
        if creation.format_version != iceberg::spec::FormatVersion::V2 {
            let version = (creation.format_version as u8).to_string();
            creation
                .properties
                .insert("format-version".to_string(), version);
        }
        self.inner
            .create_table(namespace, creation)
            .await
            .map_err(|e| self.explain(e))
    }

    async fn load_table(&self, table: &TableIdent) -> Result<Table> {
        self.inner
            .load_table(table)
            .await
            .map_err(|e| self.explain(e))
    }

    async fn drop_table(&self, table: &TableIdent) -> Result<()> {
        self.inner
            .drop_table(table)
            .await
            .map_err(|e| self.explain(e))
    }

    async fn purge_table(&self, table: &TableIdent) -> Result<()> {
        self.inner
            .purge_table(table)
            .await
            .map_err(|e| self.explain(e))
    }

    /// By GET, not HEAD: not every catalog serves HEAD.
    async fn table_exists(&self, table: &TableIdent) -> Result<bool> {
        match self.load_table(table).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> Result<()> {
        self.inner
            .rename_table(src, dest)
            .await
            .map_err(|e| self.explain(e))
    }

    async fn register_table(&self, table: &TableIdent, metadata_location: String) -> Result<Table> {
        self.inner
            .register_table(table, metadata_location)
            .await
            .map_err(|e| self.explain(e))
    }

    async fn update_table(&self, commit: TableCommit) -> Result<Table> {
        self.inner
            .update_table(commit)
            .await
            .map_err(|e| self.explain(e))
    }
}

#[async_trait]
impl SqeCatalog for RestClient {
    /// Sends the commit itself (see [`Committer`]), then reads the table back.
    async fn commit_updates(
        &self,
        ident: &TableIdent,
        requirements: Vec<TableRequirement>,
        updates: Vec<TableUpdate>,
    ) -> Result<Table> {
        let Some(committer) = &self.committer else {
            return Err(Error::new(
                ErrorKind::FeatureUnsupported,
                format!(
                    "this change to '{ident}' cannot be sent to catalog '{}' with client_credentials yet",
                    self.name
                ),
            ));
        };
        let prefix = self.settings(committer).await?.prefix.clone();
        let namespace = ident.namespace.join("\u{1f}");
        let mut segments = vec!["v1"];
        segments.extend(prefix.as_deref());
        segments.extend(["namespaces", &namespace, "tables", &ident.name]);
        let url = self.url(&segments)?;
        let body = serde_json::json!({
            "identifier": {"namespace": ident.namespace.as_ref(), "name": ident.name},
            "requirements": requirements,
            "updates": updates,
        });
        let response = self
            .request(committer, reqwest::Method::POST, url)
            .json(&body)
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        let status = response.status().as_u16();
        match status {
            200 => {}
            409 => {
                return Err(Error::new(
                    ErrorKind::CatalogCommitConflicts,
                    format!("'{ident}' was changed meanwhile; run the statement again"),
                ));
            }
            _ => {
                let text = response.text().await.unwrap_or_default();
                return Err(self.explain(Error::new(
                    ErrorKind::Unexpected,
                    format!("status: {status}, json: {text}"),
                )));
            }
        }
        self.load_table(ident).await
    }

    /// Asked of the catalog (its `/v1/config`) on first use; a catalog reached with
    /// `client_credentials` keeps none for SQE (see [`Committer`]).
    fn supports_views(&self) -> bool {
        self.committer.is_some()
    }

    async fn load_view(&self, ident: &TableIdent) -> Result<Option<ViewDefinition>> {
        match self.fetch_view(ident).await? {
            Some(metadata) => view::definition(&metadata).map(Some),
            None => Ok(None),
        }
    }

    async fn view_exists(&self, ident: &TableIdent) -> Result<bool> {
        Ok(self.fetch_view(ident).await?.is_some())
    }

    async fn view_names(&self, namespace: &str) -> Result<Vec<String>> {
        let Some(committer) = self.views().await? else {
            return Ok(Vec::new());
        };
        let ns = NamespaceIdent::new(namespace.to_string());
        let mut names = Vec::new();
        // An empty token asks a catalog that pages for its first page.
        let mut page = String::new();
        let (started, mut read) = (Instant::now(), 0);
        for pages in 1.. {
            if pages > MAX_LIST_PAGES {
                return Err(self.answered(format!(
                    "more than {MAX_LIST_PAGES} pages listing the views of schema '{namespace}'"
                )));
            }
            if read > MAX_LIST_BYTES || started.elapsed() > LIST_DEADLINE {
                return Err(self.answered(format!(
                    "more than {} MiB or {} s listing the views of schema '{namespace}'",
                    MAX_LIST_BYTES >> 20,
                    LIST_DEADLINE.as_secs()
                )));
            }
            let mut url = self.view_url(committer, &ns, None).await?;
            url.query_pairs_mut().append_pair("pageToken", &page);
            let (status, text) = self
                .call(committer, reqwest::Method::GET, url, None)
                .await?;
            read += text.len();
            if status != 200 {
                return Err(self.refused(status, &text));
            }
            let answer: serde_json::Value = serde_json::from_str(&text).map_err(|_| {
                self.answered("with something that is not an Iceberg REST response".to_string())
            })?;
            let listed = answer.get("identifiers").and_then(|i| i.as_array());
            for id in listed.into_iter().flatten() {
                if let Some(name) = id.get("name").and_then(|n| n.as_str()) {
                    names.push(name.to_string());
                }
            }
            if names.len() > MAX_LISTED_VIEWS {
                return Err(self.answered(format!(
                    "more than {MAX_LISTED_VIEWS} views in schema '{namespace}'"
                )));
            }
            match answer.get("next-page-token").and_then(|t| t.as_str()) {
                Some(token) if !token.is_empty() && token != page => page = token.to_string(),
                _ => break,
            }
        }
        names.sort();
        names.dedup();
        Ok(names)
    }

    async fn create_view(
        &self,
        ident: &TableIdent,
        change: ViewChange,
        replace: bool,
    ) -> Result<()> {
        let Some(committer) = self.views().await? else {
            return Err(Error::new(
                ErrorKind::FeatureUnsupported,
                format!(
                    "cannot create view '{ident}': catalog '{}' does not serve Iceberg's view endpoints (its /v1/config lists none; a mount property {VIEW_ENDPOINTS_SUPPORTED} = \"true\" says it does)",
                    self.name
                ),
            ));
        };
        if self.table_exists(ident).await? {
            return Err(Error::new(
                ErrorKind::TableAlreadyExists,
                format!("'{ident}' already exists"),
            ));
        }
        let (url, body) = match self.fetch_view(ident).await? {
            Some(_) if !replace => {
                return Err(Error::new(
                    ErrorKind::TableAlreadyExists,
                    format!("view '{ident}' already exists"),
                ));
            }
            Some(previous) => (
                self.view_url(committer, &ident.namespace, Some(&ident.name))
                    .await?,
                view::replace_request(&ident.namespace, &ident.name, &previous, &change)?,
            ),
            None => (
                self.view_url(committer, &ident.namespace, None).await?,
                view::create_request(&ident.name, &change)?,
            ),
        };
        let replacing = body.get("updates").is_some();
        let (status, text) = self
            .call(committer, reqwest::Method::POST, url, Some(&body))
            .await?;
        match status {
            200 => Ok(()),
            409 if replacing => Err(Error::new(
                ErrorKind::CatalogCommitConflicts,
                format!("view '{ident}' was changed meanwhile; try again"),
            )
            .with_retryable(true)),
            409 => Err(Error::new(
                ErrorKind::TableAlreadyExists,
                format!("'{ident}' already exists"),
            )),
            _ => Err(self.refused(status, &text)),
        }
    }

    async fn drop_view(&self, ident: &TableIdent) -> Result<()> {
        let missing = || {
            Error::new(
                ErrorKind::TableNotFound,
                format!("view '{ident}' does not exist"),
            )
        };
        let Some((status, text)) = self.on_view(reqwest::Method::DELETE, ident).await? else {
            return Err(missing());
        };
        match status {
            200 | 204 => Ok(()),
            404 => Err(missing()),
            _ => Err(self.refused(status, &text)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt_with_exp(exp: u64) -> String {
        let enc = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        format!(
            "{}.{}.sig",
            enc(r#"{"alg":"RS256"}"#),
            enc(&format!(r#"{{"sub":"alice","exp":{exp}}}"#))
        )
    }

    fn unix_now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }

    #[test]
    fn columns_of_types_iceberg_rust_cannot_load_are_found_by_name() {
        let answer = |fields: &str| {
            format!(
                r#"{{"metadata-location": "m", "metadata": {{"schemas": [{{"type": "struct", "fields": {fields}}}]}}}}, context: more"#
            )
        };
        let found = |fields: &str| unreadable_column(&answer(fields));
        assert_eq!(
            found(
                r#"[{"id": 1, "name": "id", "type": "long"}, {"id": 2, "name": "v", "type": "variant"}]"#
            ),
            Some(("v".into(), "variant".into()))
        );
        assert_eq!(
            found(
                r#"[{"id": 1, "name": "r", "type": {"type": "struct", "fields": [{"id": 2, "name": "g", "type": "geometry(ogc:crs84)"}]}}]"#
            ),
            Some(("r.g".into(), "geometry(ogc:crs84)".into()))
        );
        assert_eq!(
            found(
                r#"[{"id": 1, "name": "m", "type": {"type": "map", "key-id": 2, "key": "string", "value-id": 3, "value": {"type": "list", "element-id": 4, "element": "geography"}}}]"#
            ),
            Some(("m.value.element".into(), "geography".into()))
        );
        assert_eq!(
            found(r#"[{"id": 1, "name": "t", "type": "timestamp_ns"}]"#),
            None
        );
        assert_eq!(unreadable_column("not json"), None);
    }

    #[test]
    fn a_jwt_client_lives_until_the_token_expires() {
        let now = Instant::now();
        let until = token_expiry(&jwt_with_exp(unix_now() + 600), now);
        let left = until.duration_since(now).as_secs();
        assert!((590..=600).contains(&left), "{left}");
        assert_eq!(token_expiry(&jwt_with_exp(unix_now() - 5), now), now);
        assert_eq!(token_expiry("opaque-token", now), now + OPAQUE_TOKEN_TTL);
    }

    #[test]
    fn reads_the_message_of_a_rest_error_body() {
        let text = r#"{"error":{"message":"no grant on bronze","type":"ForbiddenException","code":403}} } => Received"#;
        assert_eq!(error_message(text).as_deref(), Some("no grant on bronze"));
        assert_eq!(error_message("not json"), None);
    }

    fn session_with(token: Option<&str>) -> Session {
        let mut s = Session::new(sqe_sessions::Principal::new("alice"), "lake", "default");
        s.credential = token.map(sqe_sessions::Credential::bearer);
        s
    }

    fn passthrough_mount() -> RestMount {
        let config = RestCatalogConfig {
            uri: "http://127.0.0.1:1".to_string(),
            warehouse: None,
            prefix: None,
            auth: RestAuth::Passthrough,
            properties: BTreeMap::new(),
            locations: Vec::new(),
        };
        RestMount::new("lake", config, Confinement::default()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[tokio::test]
    async fn passthrough_gives_each_token_its_own_client() {
        let mount = passthrough_mount();
        let alice = jwt_with_exp(unix_now() + 600);
        let bob = jwt_with_exp(unix_now() + 601);
        let a1 = mount
            .bind(&session_with(Some(&alice)))
            .unwrap_or_else(|e| panic!("{e}"));
        let a2 = mount
            .bind(&session_with(Some(&alice)))
            .unwrap_or_else(|e| panic!("{e}"));
        let b = mount
            .bind(&session_with(Some(&bob)))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(Arc::ptr_eq(&a1, &a2));
        assert!(!Arc::ptr_eq(&a1, &b));
        assert!(!format!("{a1:?} {mount:?}").contains(&alice));
    }

    #[tokio::test]
    async fn passthrough_refuses_a_session_without_a_live_token() {
        let mount = passthrough_mount();
        let none = mount.bind(&session_with(None)).err().map(|e| e.code());
        assert_eq!(none, Some(ErrorCode::Unauthenticated));
        let expired = jwt_with_exp(unix_now() - 10);
        let e = mount.bind(&session_with(Some(&expired))).err();
        assert_eq!(e.map(|e| e.code()), Some(ErrorCode::Unauthenticated));
    }
}

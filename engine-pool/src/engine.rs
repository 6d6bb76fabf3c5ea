//! The engine: one DataFusion session state over the mounted Iceberg catalogs, and the routing of each
//! statement to DataFusion (queries, EXPLAIN) or to SQE's own DDL, writes and SHOW handling.

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::catalog::{
    CatalogProvider, CatalogProviderList, MemoryCatalogProvider, MemoryCatalogProviderList,
    MemorySchemaProvider, SchemaProvider, TableProvider,
};
use datafusion::common::ScalarValue;
use datafusion::dataframe::DataFrame;
use datafusion::execution::FunctionRegistry;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::cache::cache_manager::CacheManagerConfig;
use datafusion::execution::context::SessionState;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::logical_expr::{ColumnarValue, LogicalPlan, Volatility, create_udf};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::{CopyToSource, DFParser, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, Ident, ObjectName, Statement, TableAlias, TableFactor,
    TableFunctionArgs, Value, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::{DuckDbDialect, GenericDialect};
use datafusion::sql::sqlparser::parser::Parser;
use futures::{StreamExt, TryStreamExt};
use iceberg::{NamespaceIdent, TableIdent};
use sqe_sessions::{
    BatchStream, ErrorCode, IngestTarget, QueryResult, QueryService, Session, SqeError, SqeResult,
};

use crate::admission::{Admission, AdmissionConfig, QueryRegistry, SystemCatalog, admitted};
use crate::attach::{SessionMounts, SessionScoped};
use crate::catalog::backend::{CatalogMount, CatalogRef, SharedMount};
use crate::catalog::hms::{HmsCatalog, HmsConfig};
use crate::catalog::information::{Catalogs, WithInformationSchema};
use crate::catalog::provider::{IcebergCatalogProvider, load_table_opt};
use crate::catalog::rest::{RestCatalogConfig, RestMount};
use crate::catalog::sql::{PostgresConfig, SqlCatalog};
use crate::ddl::starts_with_words;
use crate::error::{from_datafusion, from_iceberg};
use crate::file_access::{Access, Confinement, FileAccess};
use crate::files::{FileFormat, FileOptions, OptionValue, file_table};
use crate::guard::{Planning, check_depth, check_length};
use crate::object_stores::{ObjectStores, S3Settings};
use crate::optimizer::SqeOptimizerOptions;
use crate::prepass::{FILE_MARKER, Prepared, TIME_TRAVEL_MARKER, TimeTravel, TravelKind, prepare};
use crate::secret_store::SecretStore;
use crate::secrets::{CreateSecret, Secret, is_create_secret, recorded_text};
use crate::session_properties::{check_session, max_run_time, time_zone};
use crate::views::{PlannedView, WithViews};

/// Trino's `system` catalog: `system.runtime.queries`.
pub(crate) const SYSTEM_CATALOG: &str = "system";

/// The catalog that holds per-query tables (time travel, file functions); never listed.
pub(crate) const QUERY_CATALOG: &str = "__sqe";
pub(crate) const QUERY_SCHEMA: &str = "q";

/// Where each mounted catalog keeps its warehouse, and how many statements may run at once.
#[derive(Debug, Clone, Default)]
pub struct EngineConfig {
    /// (catalog name, warehouse directory); the first is the default catalog.
    pub catalogs: Vec<(String, PathBuf)>,
    /// Iceberg REST catalogs, by name.
    pub rest_catalogs: Vec<(String, RestCatalogConfig)>,
    /// Catalogs in a PostgreSQL database (Iceberg's JDBC / pyiceberg's SQL catalog), by name.
    pub postgres_catalogs: Vec<(String, PostgresConfig)>,
    /// Hive Metastores whose Iceberg tables are read, by name.
    pub hms_catalogs: Vec<(String, HmsConfig)>,
    pub admission: AdmissionConfig,
    /// Partitions each query runs in (and each table scan is spread over); the core count if unset.
    pub target_partitions: Option<usize>,
    /// DataFusion settings by their full name (`datafusion.execution.batch_size`, …), applied to
    /// every statement; an unknown name or a bad value is refused when the engine opens.
    pub options: Vec<(String, String)>,
    /// Bytes all running statements may hold in hash tables, sorts and aggregations together;
    /// a statement that needs more spills to disk where it can and fails otherwise, and the
    /// process lives on. Three quarters of the machine's memory if unset.
    pub memory_limit: Option<usize>,
    /// Principals holding one of these roles read every user's queries in
    /// `system.runtime.queries`.
    pub admin_roles: Vec<String>,
    /// What no privilege decides (access.rs): allow (the embedded shell) or deny.
    pub access_default: crate::access::AccessDefault,
    /// The key of HASH column masks (column_masks.rs); each catalog makes its own when unset.
    pub mask_key: Option<Vec<u8>>,
    /// A SQLite file keeping the policies (access.rs) of the catalogs that keep none in their own
    /// database (REST, Hive Metastore): `[access] store`.
    pub policy_store: Option<PathBuf>,
    /// Ranger's policies in place of SQE's own, for the catalogs named (ranger.rs).
    pub ranger: Option<crate::ranger::RangerConfig>,
    /// Which files the file functions, COPY and table locations may reach (all, embedded).
    pub files: FileAccess,
    /// Where persistent secrets are kept, and the passphrase their key is derived from; without
    /// it, `CREATE PERSISTENT SECRET` is refused.
    pub persistent_secrets: Option<PersistentSecrets>,
}

/// The store of persistent secrets: a file, and the passphrase that seals it.
#[derive(Clone)]
pub struct PersistentSecrets {
    pub path: PathBuf,
    pub passphrase: String,
}

impl std::fmt::Debug for PersistentSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentSecrets")
            .field("path", &self.path)
            .finish()
    }
}

impl EngineConfig {
    /// The default warehouse: `~/.sqe/warehouse`, mounted as `iceberg`.
    pub fn default_warehouse() -> PathBuf {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."))
            .join(".sqe")
            .join("warehouse")
    }
}

/// Who runs a statement, as its session state carries it to the table providers that answer
/// differently for each caller (`system.runtime.queries`). A state without one is nobody's.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caller {
    pub name: String,
    pub admin: bool,
}

impl Caller {
    pub fn of(config: &SessionConfig) -> Self {
        config
            .get_extension::<Caller>()
            .map(|c| c.as_ref().clone())
            .unwrap_or_default()
    }
}

pub struct Engine {
    /// Every mounted catalog, by name.
    pub(crate) catalogs: BTreeMap<String, Arc<dyn CatalogMount>>,
    /// True when some catalog is reached with each session's own credential: every statement
    /// then gets a catalog list of its own, holding that session's clients.
    per_session: bool,
    /// Catalogs sessions attached for themselves (`ATTACH`).
    pub(crate) session_mounts: SessionMounts,
    /// Secrets sessions made for themselves (`CREATE SECRET`).
    pub(crate) session_secrets: SessionScoped<Secret>,
    pub(crate) persistent_secrets: Option<SecretStore>,
    default_catalog: String,
    pub(crate) admin_roles: Vec<String>,
    /// `[access] default = "allow"`: what no privilege row decides is allowed.
    pub(crate) access_default_allow: bool,
    pub(crate) mask_key: Option<Vec<u8>>,
    pub(crate) policy_store: Option<Arc<dyn crate::access::PolicyDb>>,
    pub(crate) ranger: Option<Arc<crate::ranger::Ranger>>,
    files: FileAccess,
    state: SessionState,
    admission: Admission,
    registry: Arc<QueryRegistry>,
    /// Set when the server shuts down: statements already running finish, new ones are refused.
    draining: std::sync::atomic::AtomicBool,
    /// Keeps a `--memory` warehouse alive for as long as the engine.
    _scratch: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("catalogs", &self.catalogs.keys())
            .finish()
    }
}

/// A table a statement resolved before planning, registered under a generated name.
type QueryTables = Vec<(String, Arc<dyn TableProvider>)>;

impl Engine {
    pub fn open(config: EngineConfig) -> SqeResult<Self> {
        Self::build(config, None)
    }

    /// An engine whose warehouse lives in a temporary directory removed on drop.
    pub fn in_memory() -> SqeResult<Self> {
        let dir = tempfile::tempdir()
            .map_err(|e| SqeError::internal(format!("temporary warehouse: {e}")))?;
        let config = EngineConfig {
            catalogs: vec![("iceberg".to_string(), dir.path().to_path_buf())],
            ..EngineConfig::default()
        };
        Self::build(config, Some(dir))
    }

    fn build(config: EngineConfig, scratch: Option<tempfile::TempDir>) -> SqeResult<Self> {
        let Some((default_catalog, _)) = config.catalogs.first().cloned() else {
            return Err(SqeError::invalid("at least one catalog must be mounted"));
        };
        let mut mounts: Vec<(String, Arc<dyn CatalogMount>)> = Vec::new();
        let warehouses: Vec<PathBuf> = (config.catalogs.iter().map(|(_, dir)| dir))
            .chain(config.postgres_catalogs.iter().map(|(_, pg)| &pg.warehouse))
            .cloned()
            .collect();
        let confine = |own: Option<&Path>, declared: &[String], any_object_store: bool| {
            Confinement::new(&config.files, own, declared, any_object_store, &warehouses)
        };
        for (name, dir) in &config.catalogs {
            let name = name.to_lowercase();
            let catalog = SqlCatalog::open(&name, dir).map_err(from_iceberg)?;
            let catalog = catalog.confined(confine(Some(dir), &[], false));
            mounts.push((name, Arc::new(SharedMount::new(Arc::new(catalog)))));
        }
        for (name, pg) in &config.postgres_catalogs {
            let name = name.to_lowercase();
            let catalog = SqlCatalog::open_postgres(&name, pg).map_err(from_iceberg)?;
            let catalog = catalog.confined(confine(Some(&pg.warehouse), &[], false));
            mounts.push((name, Arc::new(SharedMount::new(Arc::new(catalog)))));
        }
        for (name, rest) in &config.rest_catalogs {
            let name = name.to_lowercase();
            let confinement = confine(None, &rest.locations, true);
            let mount = RestMount::new(&name, rest.clone(), confinement)?;
            mounts.push((name.clone(), Arc::new(mount)));
        }
        for (name, hms) in &config.hms_catalogs {
            let name = name.to_lowercase();
            let confinement = confine(None, &hms.locations, true);
            let catalog = HmsCatalog::new(&name, hms, confinement).map_err(from_iceberg)?;
            mounts.push((name, Arc::new(SharedMount::new(Arc::new(catalog)))));
        }
        let list = Arc::new(MemoryCatalogProviderList::new());
        let mut catalogs = BTreeMap::new();
        for (name, mount) in mounts {
            if catalogs.contains_key(&name) || name == QUERY_CATALOG || name == SYSTEM_CATALOG {
                return Err(SqeError::invalid(format!(
                    "catalog name '{name}' is used twice"
                )));
            }
            if let Some(catalog) = mount.shared_catalog() {
                list.register_catalog(name.clone(), catalog_provider(&name, catalog));
            }
            catalogs.insert(name, mount);
        }
        let per_session = catalogs.values().any(|m| m.shared_catalog().is_none());
        let registry = Arc::new(QueryRegistry::default());
        register_system_catalog(&list, &registry);
        // information_schema is SQE's own (Trino's shape, per catalog), not DataFusion's.
        let mut session_config =
            SessionConfig::new().with_option_extension(SqeOptimizerOptions::default());
        if let Some(n) = config.target_partitions {
            session_config = session_config.with_target_partitions(n.max(1));
        }
        crate::trino::configure(&mut session_config);
        for (key, value) in &config.options {
            session_config
                .options_mut()
                .set(key, value)
                .map_err(|e| SqeError::invalid(format!("setting {key} = {value}: {e}")))?;
        }
        let session_config = session_config
            .with_information_schema(false)
            .with_default_catalog_and_schema(default_catalog.clone(), "default")
            .with_create_default_catalog_and_schema(false);
        let mut runtime = RuntimeEnvBuilder::new()
            .with_object_store_registry(Arc::new(ObjectStores::new(S3Settings::new())));
        if let Some(bytes) = config.memory_limit.or_else(default_memory_limit) {
            runtime = runtime.with_memory_limit(bytes, 1.0);
        }
        let builder = SessionStateBuilder::new()
            .with_config(session_config)
            .with_runtime_env(runtime.build_arc().map_err(from_datafusion)?)
            .with_catalog_list(list)
            .with_default_features()
            .with_analyzer_rules(crate::trino::analyzer_rules());
        let mut builder = crate::optimizer::install(builder);
        builder
            .expr_planners()
            .get_or_insert_with(Vec::new)
            .insert(0, Arc::new(crate::trino::TrinoOperators));
        let mut state = builder.build();
        // Trino's functions, over DataFusion's of the same names.
        sqe_functions::register(&mut state).map_err(from_datafusion)?;
        // Until a session says otherwise (state_for), the time zone is UTC, and no groups.
        state
            .register_udf(text_constant("current_timezone", "UTC".to_string()))
            .map_err(from_datafusion)?;
        state
            .register_udf(groups_constant(&[]))
            .map_err(from_datafusion)?;
        // `version()` is the server's version, as in Trino.
        state
            .register_udf(text_constant(
                "version",
                format!("sqe-{}", env!("CARGO_PKG_VERSION")),
            ))
            .map_err(from_datafusion)?;
        Ok(Self {
            catalogs,
            per_session,
            session_mounts: SessionMounts::new("attached catalogs", "DETACH"),
            session_secrets: SessionScoped::new("secrets", "DROP SECRET"),
            persistent_secrets: persistent_secrets(&config)?,
            default_catalog: default_catalog.to_lowercase(),
            admin_roles: config.admin_roles.clone(),
            mask_key: config.mask_key.clone(),
            policy_store: match &config.policy_store {
                Some(path) => Some(crate::catalog::sql::policy_store(path).map_err(from_iceberg)?),
                None => None,
            },
            ranger: config
                .ranger
                .clone()
                .map(crate::ranger::Ranger::start)
                .transpose()?,
            access_default_allow: config.access_default == crate::access::AccessDefault::Allow,
            files: config.files.clone(),
            state,
            admission: Admission::new(config.admission.clone()),
            registry,
            draining: std::sync::atomic::AtomicBool::new(false),
            _scratch: scratch,
        })
    }

    /// Every statement run through [`QueryService::execute`], running or recent.
    pub fn registry(&self) -> &Arc<QueryRegistry> {
        &self.registry
    }

    pub fn default_catalog(&self) -> &str {
        &self.default_catalog
    }

    /// The mounted catalogs' names.
    pub fn catalog_names(&self) -> Vec<String> {
        self.catalogs.keys().cloned().collect()
    }

    /// From now on new statements are refused; running ones go on.
    pub fn drain(&self) {
        self.draining
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Statements queued or running now.
    pub fn running(&self) -> usize {
        self.registry.active()
    }

    fn accepting(&self) -> SqeResult<()> {
        if self.draining.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(SqeError::new(
                ErrorCode::ResourceExhausted,
                "the server is shutting down and accepts no new statements",
            ));
        }
        Ok(())
    }

    /// Refuses a path the file policy does not allow for `access`.
    pub(crate) fn check_path(&self, path: &str, access: Access) -> SqeResult<()> {
        if matches!(self.files, FileAccess::Unrestricted) {
            return Ok(());
        }
        self.files.check(path, access, &self.warehouses())
    }

    /// The local warehouses of the catalogs the server mounts.
    fn warehouses(&self) -> Vec<PathBuf> {
        self.catalogs
            .values()
            .filter_map(|c| c.local_warehouse().map(Path::to_path_buf))
            .collect()
    }

    /// Where the tables of a catalog a session attaches may keep their files: its own warehouse
    /// (`own`), and what the session's file functions could read anyway.
    pub(crate) fn attached_confinement(&self, own: Option<&Path>) -> Confinement {
        Confinement::new(&self.files, own, &[], false, &self.warehouses())
    }

    /// The catalog `name` as `session` reaches it.
    pub(crate) fn catalog(&self, session: &Session, name: &str) -> SqeResult<CatalogRef> {
        self.mount(session, name)?.bind(session)
    }

    /// The catalog the server mounts as `name`, or else the one `session` attached.
    pub(crate) fn mount(&self, session: &Session, name: &str) -> SqeResult<Arc<dyn CatalogMount>> {
        self.catalogs
            .get(name)
            .cloned()
            .or_else(|| self.session_mounts.get(session, name))
            .ok_or_else(|| SqeError::not_found(format!("catalog '{name}' does not exist")))
    }

    /// Refuses a catalog URI (`ATTACH`) the server's `[files]` policy does not allow.
    pub(crate) fn check_catalog_uri(&self, uri: &str) -> SqeResult<()> {
        self.files.check_catalog_uri(uri)
    }

    /// The session state for one statement: the session's current catalog and schema, plus the
    /// tables the statement resolved itself.
    fn state_for(&self, session: &Session, tables: QueryTables) -> SqeResult<SessionState> {
        self.state_with(session, tables, Vec::new())
    }

    /// [`state_for`](Self::state_for), in which the names of `views` are those views.
    fn state_with(
        &self,
        session: &Session,
        tables: QueryTables,
        views: Vec<PlannedView>,
    ) -> SqeResult<SessionState> {
        let mut config = self.state.config().clone().with_extension(Arc::new(Caller {
            name: session.principal.name.clone(),
            admin: session.principal.has_any_role(&self.admin_roles),
        }));
        if let Some(visibility) = self.visibility(session) {
            config = config.with_extension(Arc::new(visibility));
        }
        config.options_mut().catalog.default_catalog = session.catalog.clone();
        config.options_mut().catalog.default_schema = session.schema.clone();
        // The session's zone: `now()` is in it, and `TIMESTAMP WITH TIME ZONE` is a timestamp in it.
        config.options_mut().execution.time_zone = Some(time_zone(session)?);
        let mut builder =
            SessionStateBuilder::new_from_existing(self.state.clone()).with_config(config);
        if let Some(runtime) = self.session_runtime(session)? {
            builder = builder.with_runtime_env(runtime);
        }
        let attached = self.session_mounts.of(session);
        if !tables.is_empty() || self.per_session || !attached.is_empty() || !views.is_empty() {
            // The engine's shared catalogs, this session's own, and one holding this statement's
            // own tables.
            let list = Arc::new(MemoryCatalogProviderList::new());
            let shared = self.state.catalog_list();
            for name in shared.catalog_names() {
                if let Some(catalog) = shared.catalog(&name) {
                    list.register_catalog(name, catalog);
                }
            }
            if self.per_session || !attached.is_empty() {
                let own = self
                    .catalogs
                    .iter()
                    .map(|(n, m)| (n.clone(), m.clone()))
                    .filter(|(_, m)| m.shared_catalog().is_none());
                for (name, mount) in own.chain(attached) {
                    let provider: Arc<dyn CatalogProvider> = match mount.bind(session) {
                        Ok(catalog) => catalog_provider(&name, catalog),
                        // The statement may not touch this catalog; if it does, it gets why not.
                        Err(e) => Arc::new(Unreachable(e)),
                    };
                    list.register_catalog(name, provider);
                }
                register_system_catalog(&list, &self.registry);
            }
            let mut by_catalog: BTreeMap<String, HashMap<String, HashMap<String, _>>> =
                BTreeMap::new();
            for (catalog, schema, name, view) in views {
                by_catalog
                    .entry(catalog)
                    .or_default()
                    .entry(schema)
                    .or_default()
                    .insert(name, view);
            }
            for (name, views) in by_catalog {
                let inner = list.catalog(&name);
                list.register_catalog(name, Arc::new(WithViews { inner, views }));
            }
            let schema = Arc::new(MemorySchemaProvider::new());
            for (name, provider) in tables {
                schema
                    .register_table(name, provider)
                    .map_err(from_datafusion)?;
            }
            let query_catalog = Arc::new(MemoryCatalogProvider::new());
            query_catalog
                .register_schema(QUERY_SCHEMA, schema)
                .map_err(from_datafusion)?;
            list.register_catalog(QUERY_CATALOG.to_string(), query_catalog);
            builder = builder.with_catalog_list(list);
        }
        let mut state = builder.build();
        // Fixes now()/current_timestamp for the statement (DataFusion folds them to this instant).
        state.mark_start_execution();
        // `current_user` is the session's principal.
        state
            .register_udf(text_constant(
                "current_user",
                session.principal.name.clone(),
            ))
            .map_err(from_datafusion)?;
        // `current_groups()`: the principal's groups (the roles its token carries).
        state
            .register_udf(groups_constant(&session.principal.roles))
            .map_err(from_datafusion)?;
        // The session's catalog and schema, and its roles (access.rs).
        for (name, value) in [
            ("current_catalog", &session.catalog),
            ("current_schema", &session.schema),
        ] {
            state
                .register_udf(text_constant(name, value.clone()))
                .map_err(from_datafusion)?;
        }
        for udf in self.role_functions(session) {
            state.register_udf(udf).map_err(from_datafusion)?;
        }
        // `current_timezone()` is the session's (Trino's `X-Trino-Time-Zone`), UTC by default.
        let zone = time_zone(session)?;
        state
            .register_udf(text_constant("current_timezone", zone))
            .map_err(from_datafusion)?;
        Ok(state)
    }

    /// A runtime of the statement's own when the session reaches object stores with a secret of
    /// its own: the engine's memory and spill space, but object stores with that secret and caches
    /// no other session shares.
    fn session_runtime(&self, session: &Session) -> SqeResult<Option<Arc<RuntimeEnv>>> {
        let Some(secret) = self.s3_secret(session)? else {
            return Ok(None);
        };
        let shared = self.state.runtime_env();
        RuntimeEnvBuilder::from_runtime_env(shared)
            .with_cache_manager(CacheManagerConfig::default())
            .with_object_store_registry(Arc::new(ObjectStores::new(secret.storage_properties())))
            .build_arc()
            .map(Some)
            .map_err(from_datafusion)
    }

    /// Runs one statement.
    pub async fn run(&self, session: &Session, sql: &str) -> SqeResult<QueryResult> {
        let mut prepared = prepare(sql)?;
        if starts_with_word(&prepared.sql, "attach") {
            return self.attach(session, &prepared.sql).await;
        }
        if starts_with_word(&prepared.sql, "detach") {
            return self.detach(session, &prepared.sql);
        }
        if starts_with_words(&prepared.sql, &["show", "functions"]) {
            let rest = prepared.sql.trim_start()["show".len()..].trim_start()["functions".len()..]
                .to_string();
            return crate::show_functions::show_functions(&self.state, &rest);
        }
        if starts_with_words(&prepared.sql, &["show", "stats"]) {
            let rest =
                prepared.sql.trim_start()["show".len()..].trim_start()["stats".len()..].to_string();
            return crate::show_stats::show_stats(self, session, &rest).await;
        }
        if starts_with_words(&prepared.sql, &["show", "secrets"]) {
            return self.show_secrets(session);
        }
        if starts_with_words(&prepared.sql, &["show", "grants"]) {
            return self.show_grants(session, &prepared.sql);
        }
        if starts_with_words(&prepared.sql, &["create", "row", "filter"])
            || starts_with_words(&prepared.sql, &["drop", "row", "filter"])
            || starts_with_words(&prepared.sql, &["show", "row", "filters"])
        {
            return self.run_row_filter_statement(session, &prepared.sql).await;
        }
        if (starts_with_words(&prepared.sql, &["alter", "table"])
            || starts_with_words(&prepared.sql, &["alter", "tag"])
            || starts_with_words(&prepared.sql, &["show", "masks"])
            || starts_with_words(&prepared.sql, &["show", "tags"]))
            && let Some(done) = self.run_mask_statement(session, &prepared.sql).await
        {
            return done;
        }
        if starts_with_word(&prepared.sql, "copy") {
            return self.copy_to(session, &prepared).await;
        }
        // Trino's `RESET SESSION name` is the parser's `RESET name`.
        if starts_with_word(&prepared.sql, "reset") {
            let rest = prepared.sql.trim_start()["reset".len()..].trim_start();
            if starts_with_word(rest, "session") {
                prepared.sql = format!("RESET {}", &rest["session".len()..]);
            }
        }
        if starts_with_word(&prepared.sql, "grant")
            || starts_with_word(&prepared.sql, "deny")
            || starts_with_word(&prepared.sql, "revoke")
        {
            prepared.sql = crate::access::grant_words(&prepared.sql);
        }
        let secret = is_create_secret(&prepared.sql);
        // CREATE [PERSISTENT | TEMPORARY] SECRET is DuckDB's statement, parsed as DuckDB spells it.
        let parsed = if secret {
            Parser::parse_sql(&DuckDbDialect {}, &prepared.sql)
        } else {
            Parser::parse_sql(&crate::dialect::SqeDialect::default(), &prepared.sql)
        };
        let mut statements = parsed.map_err(|e| {
            if secret {
                // The parser's message may quote the secret's values.
                return SqeError::invalid(
                    "syntax error in CREATE SECRET: expected CREATE SECRET name (TYPE t, KEY 'value', …)",
                );
            }
            let text = e.to_string();
            let text = text.trim_start_matches("sql parser error: ");
            let position = if text.contains(" at Line: ") {
                ""
            } else {
                " at the end of the statement"
            };
            SqeError::invalid(format!("syntax error: {text}{position}"))
        })?;
        let statement = match statements.len() {
            1 => statements.remove(0),
            0 => return Err(SqeError::invalid("empty statement")),
            n => {
                return Err(SqeError::invalid(format!(
                    "expected one statement, got {n}"
                )));
            }
        };
        check_depth(&statement)?;
        // A view keeps its SQL as written, before Trino's rewrites.
        if let Statement::CreateView(cv) = &statement {
            return self.create_view(session, cv, &prepared).await;
        }
        if let Some(result) = self.run_access_statement(session, &statement).await {
            return result;
        }
        let mut statement = statement;
        crate::trino::rewrite_statement(&mut statement)?;
        self.dispatch(session, statement, prepared).await
    }

    async fn dispatch(
        &self,
        session: &Session,
        mut statement: Statement,
        prepared: Prepared,
    ) -> SqeResult<QueryResult> {
        match &statement {
            Statement::Query(_) | Statement::Explain { .. } => {
                let tables = self
                    .resolve_relations(session, &mut statement, &prepared)
                    .await?;
                self.run_query(session, statement, tables).await
            }
            Statement::Insert(_) => {
                let tables = self
                    .resolve_relations(session, &mut statement, &prepared)
                    .await?;
                let Statement::Insert(insert) = statement else {
                    unreachable_statement()?
                };
                self.insert(session, insert, tables).await
            }
            Statement::CreateTable(ct) if ct.query.is_some() => {
                let tables = self
                    .resolve_relations(session, &mut statement, &prepared)
                    .await?;
                let Statement::CreateTable(ct) = statement else {
                    unreachable_statement()?
                };
                self.create_table_as(session, ct, prepared.partitioned_by, tables)
                    .await
            }
            Statement::CreateSecret {
                or_replace,
                temporary,
                if_not_exists,
                name,
                storage_specifier,
                secret_type,
                options,
            } => self.create_secret(
                session,
                CreateSecret {
                    or_replace: *or_replace,
                    temporary: *temporary,
                    if_not_exists: *if_not_exists,
                    name: name.clone(),
                    storage_specifier: storage_specifier.clone(),
                    secret_type: secret_type.clone(),
                    options: options.clone(),
                },
            ),
            Statement::DropSecret {
                if_exists, name, ..
            } => self.drop_secret(session, name, *if_exists),
            _ => self.run_ddl(session, statement, prepared).await,
        }
    }

    /// `COPY (query) TO 'file'`: DataFusion's own statement, which writes a file.
    async fn copy_to(&self, session: &Session, prepared: &Prepared) -> SqeResult<QueryResult> {
        let mut statements = DFParser::parse_sql_with_dialect(&prepared.sql, &GenericDialect {})
            .map_err(from_datafusion)?;
        let (Some(DFStatement::CopyTo(mut copy)), None) =
            (statements.pop_front(), statements.pop_front())
        else {
            return Err(SqeError::invalid(
                "expected one COPY (query) TO 'path' statement",
            ));
        };
        self.check_path(&copy.target, Access::Write)?;
        if let CopyToSource::Query(query) = &copy.source {
            check_depth(query.as_ref())?;
        }
        let tables = match &mut copy.source {
            CopyToSource::Query(query) => {
                let mut statement = Statement::Query(query.clone());
                let tables = self
                    .resolve_relations(session, &mut statement, prepared)
                    .await?;
                if let Statement::Query(q) = statement {
                    *query = q;
                }
                tables
            }
            CopyToSource::Relation(_) => Vec::new(),
        };
        let state = self.state_for(session, tables)?;
        let statement = DFStatement::CopyTo(copy);
        self.authorize_statement(session, &state, &statement)?;
        let plan = state
            .statement_to_plan(statement)
            .await
            .map_err(from_datafusion)?;
        let plan = self.apply_policies(session, &state, plan)?;
        self.authorize_columns(session, &state, &plan)?;
        self.stream_plan(state, plan).await
    }

    /// Plans a query (or EXPLAIN) with DataFusion and streams its result.
    async fn run_query(
        &self,
        session: &Session,
        statement: Statement,
        tables: QueryTables,
    ) -> SqeResult<QueryResult> {
        let (state, plan) = self.plan(session, statement, tables).await?;
        self.stream_plan(state, plan).await
    }

    async fn stream_plan(&self, state: SessionState, plan: LogicalPlan) -> SqeResult<QueryResult> {
        let df = DataFrame::new(state, plan);
        let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
        let stream = df.execute_stream().await.map_err(from_datafusion)?;
        Ok(QueryResult {
            schema,
            batches: stream.map_err(from_datafusion).boxed(),
            update_count: None,
            session_update: None,
        })
    }

    pub(crate) async fn plan(
        &self,
        session: &Session,
        statement: Statement,
        tables: QueryTables,
    ) -> SqeResult<(SessionState, LogicalPlan)> {
        let chain = crate::views::ViewChain::default();
        let (state, plan) = self
            .plan_statement(session, statement, tables, &chain)
            .await?;
        if matches!(plan, LogicalPlan::Explain(_) | LogicalPlan::Analyze(_)) {
            // A plan shows a filter's condition and (analyzed) the rows before it.
            crate::row_filters::refuse_describing_filtered(&plan, "EXPLAIN")?;
            return Ok((state, plan));
        }
        if plan_has_side_effects(&plan) {
            return Err(SqeError::unsupported(
                "this statement is not supported here",
            ));
        }
        // Analyzed now, so that the result's schema is the one its rows will have: Trino's
        // semantics (trino.rs) change some types after DataFusion's type coercion.
        let plan = state
            .analyzer()
            .execute_and_check(plan, state.config_options(), |_, _| {})
            .map_err(from_datafusion)?;
        Ok((state, plan))
    }

    /// Plans a statement with DataFusion (not yet analyzed), with the views it reads planned first.
    /// `chain`: the views being planned around this statement (views.rs).
    pub(crate) async fn plan_statement(
        &self,
        session: &Session,
        statement: Statement,
        tables: QueryTables,
        chain: &crate::views::ViewChain,
    ) -> SqeResult<(SessionState, LogicalPlan)> {
        let statement = DFStatement::Statement(Box::new(statement));
        let mut state = self.state_for(session, tables.clone())?;
        self.authorize_statement(session, &state, &statement)?;
        let views = self.plan_views(session, &state, &statement, chain).await?;
        if !views.is_empty() {
            state = self.state_with(session, tables, views)?;
        }
        let plan = state
            .statement_to_plan(statement)
            .await
            .map_err(from_datafusion)?;
        let plan = self.apply_policies(session, &state, plan)?;
        self.authorize_columns(session, &state, &plan)?;
        Ok((state, plan))
    }

    /// Plans one query given as text, as `run` would (Trino's rewrites, the relations SQE resolves
    /// itself, the caller's rights), without running it.
    pub(crate) async fn plan_sql(
        &self,
        session: &Session,
        sql: &str,
    ) -> SqeResult<(SessionState, LogicalPlan)> {
        let prepared = prepare(sql)?;
        let mut statements =
            Parser::parse_sql(&crate::dialect::SqeDialect::default(), &prepared.sql)
                .map_err(|e| SqeError::invalid(format!("syntax error: {e}")))?;
        let (Some(mut statement), None) = (statements.pop(), statements.pop()) else {
            return Err(SqeError::invalid("expected one query"));
        };
        check_depth(&statement)?;
        crate::trino::rewrite_statement(&mut statement)?;
        let tables = self
            .resolve_relations(session, &mut statement, &prepared)
            .await?;
        self.plan(session, statement, tables).await
    }

    /// Runs `SELECT <expr>` and returns its single value.
    async fn eval_scalar(
        &self,
        session: &Session,
        expr: &Expr,
        cast_to: Option<&str>,
    ) -> SqeResult<ScalarValue> {
        let sql = match cast_to {
            Some(ty) => format!("SELECT CAST(({expr}) AS {ty})"),
            None => format!("SELECT {expr}"),
        };
        let result = Box::pin(self.run(session, &sql)).await?;
        let batches: Vec<RecordBatch> = result.batches.try_collect().await?;
        let batch = batches.iter().find(|b| b.num_rows() > 0);
        match batch {
            Some(b) if b.num_columns() == 1 => {
                ScalarValue::try_from_array(b.column(0), 0).map_err(from_datafusion)
            }
            _ => Err(SqeError::invalid(format!(
                "'{expr}' did not produce a value"
            ))),
        }
    }

    /// Finds the relations SQE resolves itself (time travel, file functions, bare paths), loads
    /// them, and points the statement at per-query names.
    pub(crate) async fn resolve_relations(
        &self,
        session: &Session,
        statement: &mut Statement,
        prepared: &Prepared,
    ) -> SqeResult<QueryTables> {
        let travel_aliases = prepared
            .time_travel
            .iter()
            .map(|t| {
                t.table
                    .0
                    .last()
                    .and_then(|p| p.as_ident())
                    .cloned()
                    .unwrap_or_else(|| Ident::new("t"))
            })
            .collect();
        let mut collector = RelationRewriter {
            jobs: Vec::new(),
            error: None,
            travel_aliases,
        };
        let _ = statement.visit(&mut collector);
        if let Some(e) = collector.error {
            return Err(e);
        }
        let mut tables = Vec::new();
        for (name, job) in collector.jobs {
            let provider = match job {
                RelationJob::TimeTravel(n) => {
                    let travel = prepared
                        .time_travel
                        .get(n)
                        .ok_or_else(|| SqeError::internal("time travel marker without a clause"))?;
                    self.time_travel_provider(session, travel).await?
                }
                RelationJob::BarePath(n) => {
                    let path = prepared
                        .files
                        .get(n)
                        .ok_or_else(|| SqeError::internal("file marker without a path"))?;
                    self.check_path(path, Access::Read)?;
                    let format = FileFormat::from_path(path).ok_or_else(|| {
                        SqeError::invalid(format!(
                            "cannot tell the format of '{path}' from its extension; use read_parquet, read_csv or read_json"
                        ))
                    })?;
                    let ctx = SessionContext::new_with_state(self.state_for(session, Vec::new())?);
                    file_table(&ctx, format, vec![path.clone()], Vec::new()).await?
                }
                RelationJob::FileFunction {
                    format,
                    paths,
                    options,
                } => {
                    for path in &paths {
                        self.check_path(path, Access::Read)?;
                    }
                    let ctx = SessionContext::new_with_state(self.state_for(session, Vec::new())?);
                    file_table(&ctx, format, paths, options).await?
                }
            };
            tables.push((name, provider));
        }
        Ok(tables)
    }

    async fn time_travel_provider(
        &self,
        session: &Session,
        travel: &TimeTravel,
    ) -> SqeResult<Arc<dyn TableProvider>> {
        let (catalog_name, namespace, name) = self.resolve_name(session, &travel.table)?;
        let object = crate::access::Object::table(&catalog_name, &namespace, &name);
        self.authorize_read(session, &object, || {
            SqeError::not_found(format!(
                "table '{catalog_name}.{namespace}.{name}' does not exist"
            ))
        })?;
        let catalog = self.catalog(session, &catalog_name)?;
        let ident = TableIdent::new(NamespaceIdent::new(namespace.clone()), name.clone());
        let table = load_table_opt(catalog.as_ref(), &ident)
            .await
            .map_err(from_iceberg)?
            .ok_or_else(|| {
                SqeError::not_found(format!(
                    "table '{catalog_name}.{namespace}.{name}' does not exist"
                ))
            })?;
        let snapshot_id = match travel.kind {
            TravelKind::Version => {
                let v = self.eval_scalar(session, &travel.expr, None).await?;
                let id = match v {
                    ScalarValue::Int64(Some(v)) => v,
                    ScalarValue::Int32(Some(v)) => i64::from(v),
                    ScalarValue::UInt64(Some(v)) => i64::try_from(v).unwrap_or(i64::MAX),
                    other => {
                        return Err(SqeError::invalid(format!(
                            "FOR VERSION AS OF needs a snapshot id (bigint), got {other}"
                        )));
                    }
                };
                if table.metadata().snapshot_by_id(id).is_none() {
                    return Err(SqeError::not_found(format!(
                        "snapshot {id} does not exist in table '{namespace}.{name}'"
                    )));
                }
                id
            }
            TravelKind::Timestamp => {
                let v = self
                    .eval_scalar(session, &travel.expr, Some("TIMESTAMP"))
                    .await?;
                let millis = match v {
                    ScalarValue::TimestampSecond(Some(s), _) => s.saturating_mul(1_000),
                    ScalarValue::TimestampMillisecond(Some(ms), _) => ms,
                    ScalarValue::TimestampMicrosecond(Some(us), _) => us.div_euclid(1_000),
                    ScalarValue::TimestampNanosecond(Some(ns), _) => ns.div_euclid(1_000_000),
                    _ => {
                        return Err(SqeError::invalid(format!(
                            "FOR TIMESTAMP AS OF needs a timestamp, got {}",
                            travel.expr
                        )));
                    }
                };
                table
                    .metadata()
                    .history()
                    .iter()
                    .filter(|l| l.timestamp_ms <= millis)
                    .max_by_key(|l| l.timestamp_ms)
                    .map(|l| l.snapshot_id)
                    .ok_or_else(|| {
                        let at = chrono::DateTime::from_timestamp_millis(millis)
                            .map(|t| t.to_rfc3339())
                            .unwrap_or_else(|| millis.to_string());
                        SqeError::not_found(format!(
                            "table '{namespace}.{name}' has no snapshot at or before {at}"
                        ))
                    })?
            }
        };
        // Known as its table, so that its row filters and column masks apply (row_filters.rs).
        let provider = crate::catalog::scan::IcebergScanProvider::try_new(table, Some(snapshot_id))
            .map_err(from_iceberg)?
            .in_catalog(&catalog_name)
            .with_manifests(catalog.manifest_cache());
        Ok(Arc::new(provider))
    }

    /// (catalog, schema, table) for a name, qualified by the session's current catalog and schema.
    pub(crate) fn resolve_name(
        &self,
        session: &Session,
        name: &ObjectName,
    ) -> SqeResult<(String, String, String)> {
        let parts = object_parts(name)?;
        match parts.as_slice() {
            [t] => Ok((session.catalog.clone(), session.schema.clone(), t.clone())),
            [s, t] => Ok((session.catalog.clone(), s.clone(), t.clone())),
            [c, s, t] => Ok((c.clone(), s.clone(), t.clone())),
            _ => Err(SqeError::invalid(format!(
                "'{name}' is not a valid table name"
            ))),
        }
    }
}

/// DataFusion's view of a mounted catalog, with Trino's `information_schema`.
fn catalog_provider(name: &str, catalog: CatalogRef) -> Arc<dyn CatalogProvider> {
    let provider = Arc::new(IcebergCatalogProvider::new(name, catalog));
    Arc::new(WithInformationSchema::new(name, provider))
}

/// Trino's `system` catalog over the catalogs of `list`.
fn register_system_catalog(list: &Arc<MemoryCatalogProviderList>, registry: &Arc<QueryRegistry>) {
    let all: Weak<dyn CatalogProviderList> = Arc::downgrade(list) as _;
    let system = Arc::new(SystemCatalog::new(registry.clone(), Catalogs(all)));
    list.register_catalog(
        SYSTEM_CATALOG.to_string(),
        Arc::new(WithInformationSchema::new(SYSTEM_CATALOG, system)),
    );
}

/// A catalog this session cannot reach (no credential for a passthrough catalog): listed as
/// empty, and any table in it fails with the reason.
#[derive(Debug)]
struct Unreachable(SqeError);

impl CatalogProvider for Unreachable {
    fn schema_names(&self) -> Vec<String> {
        Vec::new()
    }

    fn schema(&self, _name: &str) -> Option<Arc<dyn SchemaProvider>> {
        Some(Arc::new(UnreachableSchema(self.0.clone())))
    }
}

#[derive(Debug)]
struct UnreachableSchema(SqeError);

#[async_trait::async_trait]
impl SchemaProvider for UnreachableSchema {
    fn table_names(&self) -> Vec<String> {
        Vec::new()
    }

    async fn table(
        &self,
        _name: &str,
    ) -> datafusion::error::Result<Option<Arc<dyn TableProvider>>> {
        Err(datafusion::error::DataFusionError::External(Box::new(
            self.0.clone(),
        )))
    }

    fn table_exist(&self, _name: &str) -> bool {
        false
    }
}

/// `current_groups()`: these groups, sorted, as an array of varchar.
fn groups_constant(groups: &[String]) -> Arc<datafusion::logical_expr::ScalarUDF> {
    let mut groups = groups.to_vec();
    groups.sort();
    groups.dedup();
    let values: Vec<ScalarValue> = groups
        .into_iter()
        .map(|g| ScalarValue::Utf8(Some(g)))
        .collect();
    let value = ScalarValue::List(ScalarValue::new_list_nullable(&values, &DataType::Utf8));
    Arc::new(create_udf(
        "current_groups",
        vec![],
        value.data_type(),
        Volatility::Immutable,
        Arc::new(move |_: &[ColumnarValue]| Ok(ColumnarValue::Scalar(value.clone()))),
    ))
}

/// A function of no arguments that returns `value`.
fn text_constant(name: &str, value: String) -> Arc<datafusion::logical_expr::ScalarUDF> {
    let value = ScalarValue::Utf8(Some(value));
    Arc::new(create_udf(
        name,
        vec![],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(move |_: &[ColumnarValue]| Ok(ColumnarValue::Scalar(value.clone()))),
    ))
}

/// Ends `batches` with an error from `exceeded` if they are not done by `deadline`; what is still
/// running is dropped (cancelled) then.
fn until_deadline(
    batches: BatchStream,
    deadline: tokio::time::Instant,
    exceeded: impl Fn() -> SqeError + Send + 'static,
) -> BatchStream {
    let mut inner = Some(batches);
    let mut timer = Box::pin(tokio::time::sleep_until(deadline));
    futures::stream::poll_fn(move |cx| {
        let Some(stream) = inner.as_mut() else {
            return std::task::Poll::Ready(None);
        };
        if let std::task::Poll::Ready(item) = stream.poll_next_unpin(cx) {
            if item.is_none() {
                inner = None;
            }
            return std::task::Poll::Ready(item);
        }
        if timer.as_mut().poll(cx).is_ready() {
            inner = None;
            return std::task::Poll::Ready(Some(Err(exceeded())));
        }
        std::task::Poll::Pending
    })
    .boxed()
}

/// Three quarters of the machine's memory (Linux), leaving room for everything DataFusion does not
/// account: batches in flight, the catalog, the protocols.
fn default_memory_limit() -> Option<usize> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: usize = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib / 4 * 3 * 1024)
}

/// A duration as Trino prints it in errors: `10.00s`, `5.00m`.
fn display_duration(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.2}s")
    } else if s < 3600.0 {
        format!("{:.2}m", s / 60.0)
    } else if s < 86400.0 {
        format!("{:.2}h", s / 3600.0)
    } else {
        format!("{:.2}d", s / 86400.0)
    }
}

fn starts_with_word(sql: &str, word: &str) -> bool {
    sql.trim_start()
        .get(..word.len())
        .is_some_and(|w| w.eq_ignore_ascii_case(word))
        && sql.trim_start()[word.len()..]
            .chars()
            .next()
            .is_none_or(|c| c.is_whitespace() || c == '(' || c == ';')
}

fn unreachable_statement<T>() -> SqeResult<T> {
    Err(SqeError::internal(
        "statement changed kind while resolving relations",
    ))
}

/// True if DataFusion planned something that would change state (its own DDL/DML): SQE routes those
/// statements itself, so reaching here means an unsupported form.
fn plan_has_side_effects(plan: &LogicalPlan) -> bool {
    matches!(
        plan,
        LogicalPlan::Ddl(_)
            | LogicalPlan::Dml(_)
            | LogicalPlan::Copy(_)
            | LogicalPlan::Statement(_)
    )
}

/// Normalised identifier parts: unquoted names fold to lower case, quoted ones stay as written.
pub(crate) fn object_parts(name: &ObjectName) -> SqeResult<Vec<String>> {
    name.0
        .iter()
        .map(|p| {
            p.as_ident()
                .map(normalize_ident)
                .ok_or_else(|| SqeError::invalid(format!("'{name}' is not a valid name")))
        })
        .collect()
}

pub(crate) fn normalize_ident(id: &Ident) -> String {
    if id.quote_style.is_some() {
        id.value.clone()
    } else {
        id.value.to_lowercase()
    }
}

enum RelationJob {
    TimeTravel(usize),
    BarePath(usize),
    FileFunction {
        format: FileFormat,
        paths: Vec<String>,
        options: FileOptions,
    },
}

struct RelationRewriter {
    jobs: Vec<(String, RelationJob)>,
    error: Option<SqeError>,
    /// The table name each time-travel marker stands for, to alias the replacement with.
    travel_aliases: Vec<Ident>,
}

fn literal(expr: &Expr) -> Option<OptionValue> {
    match expr {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => {
                Some(OptionValue::Str(s.clone()))
            }
            Value::Boolean(b) => Some(OptionValue::Bool(*b)),
            Value::Number(n, _) => Some(OptionValue::Number(n.to_string())),
            _ => None,
        },
        Expr::Identifier(id) => match id.value.to_ascii_lowercase().as_str() {
            "true" => Some(OptionValue::Bool(true)),
            "false" => Some(OptionValue::Bool(false)),
            _ => None,
        },
        _ => None,
    }
}

fn file_function_args(
    name: &str,
    args: &TableFunctionArgs,
) -> SqeResult<(Vec<String>, FileOptions)> {
    let mut paths = Vec::new();
    let mut options = Vec::new();
    for (i, arg) in args.args.iter().enumerate() {
        match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) if i == 0 => match e {
                Expr::Array(arr) => {
                    for el in &arr.elem {
                        match literal(el) {
                            Some(OptionValue::Str(s)) => paths.push(s),
                            _ => {
                                return Err(SqeError::invalid(format!(
                                    "{name}() paths must be strings"
                                )));
                            }
                        }
                    }
                }
                other => match literal(other) {
                    Some(OptionValue::Str(s)) => paths.push(s),
                    _ => {
                        return Err(SqeError::invalid(format!(
                            "{name}() needs a path string as its first argument"
                        )));
                    }
                },
            },
            FunctionArg::Named {
                name: key,
                arg: FunctionArgExpr::Expr(e),
                ..
            }
            | FunctionArg::ExprNamed {
                name: Expr::Identifier(key),
                arg: FunctionArgExpr::Expr(e),
                ..
            } => {
                let value = literal(e).ok_or_else(|| {
                    SqeError::invalid(format!(
                        "option '{}' of {name}() must be a literal",
                        key.value
                    ))
                })?;
                options.push((key.value.to_ascii_lowercase(), value));
            }
            other => {
                return Err(SqeError::invalid(format!(
                    "unexpected argument '{other}' to {name}()"
                )));
            }
        }
    }
    Ok((paths, options))
}

impl VisitorMut for RelationRewriter {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table {
            name, alias, args, ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        let single = match name.0.as_slice() {
            [part] => part.as_ident().map(|i| i.value.clone()),
            _ => None,
        };
        let n = self.jobs.len();
        let generated = format!("t{n}");
        let job = if let Some(s) = single
            .as_deref()
            .and_then(|s| s.strip_prefix(TIME_TRAVEL_MARKER))
        {
            s.parse().ok().map(RelationJob::TimeTravel)
        } else if let Some(s) = single.as_deref().and_then(|s| s.strip_prefix(FILE_MARKER)) {
            s.parse().ok().map(RelationJob::BarePath)
        } else if let (Some(fargs), Some(fname)) = (args.as_ref(), single.as_deref()) {
            match FileFormat::from_function(fname) {
                Some(format) => match file_function_args(fname, fargs) {
                    Ok((paths, options)) => Some(RelationJob::FileFunction {
                        format,
                        paths,
                        options,
                    }),
                    Err(e) => {
                        self.error = Some(e);
                        return ControlFlow::Break(());
                    }
                },
                None => None,
            }
        } else {
            None
        };
        let Some(job) = job else {
            return ControlFlow::Continue(());
        };
        if alias.is_none()
            && let RelationJob::TimeTravel(i) = job
            && let Some(original) = self.travel_aliases.get(i)
        {
            // Keep `t.col` working after the name is replaced: the original table name becomes the alias.
            *alias = Some(TableAlias {
                explicit: false,
                name: original.clone(),
                columns: Vec::new(),
                at: None,
            });
        }
        *name = ObjectName::from(vec![
            Ident::new(QUERY_CATALOG),
            Ident::new(QUERY_SCHEMA),
            Ident::new(generated.clone()),
        ]);
        *args = None;
        self.jobs.push((generated, job));
        ControlFlow::Continue(())
    }
}

#[async_trait::async_trait]
impl QueryService for Engine {
    async fn execute_read_only(&self, session: &Session, sql: &str) -> SqeResult<QueryResult> {
        check_length(sql)?;
        crate::read_only::check_read_only(sql)?;
        self.execute(session, sql).await
    }

    /// Admits the statement (or answers "server busy"), records it, and runs it as `session`'s
    /// principal. Statements SQE runs for itself (time-travel expressions) go through `run` directly.
    async fn execute(&self, session: &Session, sql: &str) -> SqeResult<QueryResult> {
        self.accepting()?;
        check_length(sql)?;
        // A secret's values stay out of the query registry.
        let recorded = recorded_text(sql);
        check_session(session)?;
        match max_run_time(session) {
            None => {
                admitted(&self.admission, &self.registry, session, &recorded, || {
                    Planning::new(self.run(session, sql))
                })
                .await
            }
            // `query_max_run_time`: from now (queueing included) to the last row.
            Some(limit) => {
                let deadline = tokio::time::Instant::now() + limit;
                let exceeded = move || {
                    SqeError::new(
                        ErrorCode::ResourceExhausted,
                        format!(
                            "Query exceeded maximum time limit of {}",
                            display_duration(limit)
                        ),
                    )
                };
                admitted(
                    &self.admission,
                    &self.registry,
                    session,
                    &recorded,
                    || async move {
                        let planning = Planning::new(self.run(session, sql));
                        let mut result = tokio::time::timeout_at(deadline, planning)
                            .await
                            .map_err(|_| exceeded())??;
                        result.batches = until_deadline(result.batches, deadline, exceeded);
                        Ok(result)
                    },
                )
                .await
            }
        }
    }

    async fn ingest(
        &self,
        session: &Session,
        target: IngestTarget,
        schema: SchemaRef,
        batches: BatchStream,
    ) -> SqeResult<QueryResult> {
        self.accepting()?;
        let what = format!(
            "-- bulk ingest into {}.{}.{}",
            target.catalog.as_deref().unwrap_or(&session.catalog),
            target.schema.as_deref().unwrap_or(&session.schema),
            target.table
        );
        admitted(&self.admission, &self.registry, session, &what, || {
            self.ingest_rows(session, target, schema, batches)
        })
        .await
    }

    /// An admin holds one of the admin roles; without admin roles, an engine that allows by
    /// default makes everyone one (the embedded shell), and one that denies makes nobody one.
    fn is_admin(&self, principal: &sqe_sessions::Principal) -> bool {
        principal.has_any_role(&self.admin_roles)
            || (self.admin_roles.is_empty() && self.access_default_allow)
    }
}

/// A result of rows built in memory (SHOW, DESCRIBE).
pub(crate) fn rows_result(
    schema: Schema,
    columns: Vec<datafusion::arrow::array::ArrayRef>,
) -> SqeResult<QueryResult> {
    let schema = Arc::new(schema);
    let batch = RecordBatch::try_new(schema.clone(), columns)
        .map_err(|e| SqeError::internal(e.to_string()))?;
    Ok(QueryResult {
        schema,
        batches: futures::stream::once(async move { Ok(batch) }).boxed(),
        update_count: None,
        session_update: None,
    })
}

/// A result for a statement that returns nothing.
pub(crate) fn empty_result() -> QueryResult {
    QueryResult {
        schema: Arc::new(Schema::empty()),
        batches: futures::stream::empty().boxed(),
        update_count: None,
        session_update: None,
    }
}

/// A one-row `rows` result for writes, as Trino reports them.
pub(crate) fn update_result(rows: u64) -> SqeResult<QueryResult> {
    let mut r = rows_result(
        Schema::new(vec![datafusion::arrow::datatypes::Field::new(
            "rows",
            DataType::Int64,
            false,
        )]),
        vec![Arc::new(datafusion::arrow::array::Int64Array::from(vec![
            rows as i64,
        ]))],
    )?;
    r.update_count = Some(rows);
    Ok(r)
}

/// The secret store `config` names, if it names one.
fn persistent_secrets(config: &EngineConfig) -> SqeResult<Option<SecretStore>> {
    config
        .persistent_secrets
        .as_ref()
        .map(|p| SecretStore::new(p.path.clone(), p.passphrase.clone()))
        .transpose()
}

//! The engine: one DataFusion session state over the mounted Iceberg catalogs, and the routing of each
//! statement to DataFusion (queries, EXPLAIN) or to SQE's own DDL, writes and SHOW handling.

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::{Arc, Weak};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
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
use datafusion::sql::parser::{CopyToSource, CopyToStatement, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, Ident, ObjectName, Statement, TableAlias, TableFactor,
    TableFunctionArgs, Value, VisitMut, VisitorMut,
};
use futures::{StreamExt, TryStreamExt};
use iceberg::{NamespaceIdent, TableIdent};
use sqe_sessions::{
    BatchStream, ErrorCode, IngestTarget, QueryResult, QueryService, Session, SqeError, SqeResult,
};

use crate::admission::{Admission, AdmissionConfig, QueryRegistry, admitted};
use crate::catalog::backend::CatalogRef;
use crate::catalog::hms::HmsConfig;
use crate::catalog::information::{Catalogs, WithInformationSchema};
use crate::catalog::mounts::{MountConfig, Mounts};
use crate::catalog::provider::{IcebergCatalogProvider, load_table_opt};
use crate::catalog::rest::RestCatalogConfig;
use crate::catalog::sql::PostgresConfig;
use crate::catalog::system::{Caller, SystemCatalog};
use crate::error::{from_datafusion, from_iceberg};
use crate::files::policy::{Access, FileAccess, FilePolicy};
use crate::files::table_functions::{FileFormat, FileOptions, OptionValue, file_table};
use crate::governance::Governance;
use crate::guard::{Planning, check_length};
use crate::names::{QUERY_CATALOG, QUERY_SCHEMA, SYSTEM_CATALOG, resolve_name};
use crate::object_stores::{ObjectStores, S3Settings};
use crate::optimizer::SqeOptimizerOptions;
use crate::secrets::Secret;
use crate::secrets::store::SecretStore;
use crate::session_properties::{check_session, max_run_time, time_zone};
use crate::session_scoped::SessionScoped;
use crate::statement::prepass::{
    FILE_MARKER, Prepared, TIME_TRAVEL_MARKER, TimeTravel, TravelKind,
};
use crate::statement::{self, Parsed, SqeStatement, recorded_text};
use crate::views::{PlannedView, WithViews};

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
    pub access_default: crate::governance::model::AccessDefault,
    /// The key of HASH column masks (column_masks.rs); each catalog makes its own when unset.
    pub mask_key: Option<Vec<u8>>,
    /// A SQLite file keeping the policies (access.rs) of the catalogs that keep none in their own
    /// database (REST, Hive Metastore): `[access] store`.
    pub policy_store: Option<PathBuf>,
    /// Ranger's policies in place of SQE's own, for the catalogs named (ranger.rs).
    pub ranger: Option<crate::governance::ranger::RangerConfig>,
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

pub struct Engine {
    /// The catalogs statements reach: the server's and those sessions attached.
    pub(crate) mounts: Arc<Mounts>,
    /// Secrets sessions made for themselves (`CREATE SECRET`).
    pub(crate) session_secrets: SessionScoped<Secret>,
    pub(crate) persistent_secrets: Option<SecretStore>,
    default_catalog: String,
    /// Privileges, row filters, masks, Ranger: who may do what, and what they see.
    pub(crate) governance: Arc<Governance>,
    pub(crate) files: FilePolicy,
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
            .field("catalogs", &self.mounts.server().keys())
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
        let mounts = Mounts::open(
            MountConfig {
                warehouses: &config.catalogs,
                postgres: &config.postgres_catalogs,
                rest: &config.rest_catalogs,
                hms: &config.hms_catalogs,
            },
            &config.files,
        )?;
        let mounts = Arc::new(mounts);
        let list = Arc::new(MemoryCatalogProviderList::new());
        for (name, mount) in mounts.server() {
            if let Some(catalog) = mount.shared_catalog() {
                list.register_catalog(name.clone(), catalog_provider(name, catalog));
            }
        }
        let registry = Arc::new(QueryRegistry::default());
        register_system_catalog(&list, &registry);
        // information_schema is SQE's own (Trino's shape, per catalog), not DataFusion's.
        let mut session_config =
            SessionConfig::new().with_option_extension(SqeOptimizerOptions::default());
        if let Some(n) = config.target_partitions {
            session_config = session_config.with_target_partitions(n.max(1));
        }
        crate::trino_sql::configure(&mut session_config);
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
            .with_analyzer_rules(crate::trino_sql::analyzer_rules());
        let mut builder = crate::optimizer::install(builder);
        builder
            .expr_planners()
            .get_or_insert_with(Vec::new)
            .insert(0, Arc::new(crate::trino_sql::TrinoOperators));
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
            files: FilePolicy::new(config.files.clone(), mounts.local_warehouses()),
            governance: Arc::new(Governance::new(
                Arc::clone(&mounts),
                config.admin_roles.clone(),
                config.access_default,
                config.mask_key.clone(),
                config.policy_store.as_ref(),
                config.ranger.clone(),
            )?),
            mounts,
            session_secrets: SessionScoped::new("secrets", "DROP SECRET"),
            persistent_secrets: persistent_secrets(&config)?,
            default_catalog: default_catalog.to_lowercase(),
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
        self.mounts.server().keys().cloned().collect()
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
            admin: self.governance.is_admin(&session.principal),
        }));
        if let Some(visibility) = self.governance.visibility(session) {
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
        let attached = self.mounts.attached().of(session);
        let per_session = self.mounts.per_session();
        if !tables.is_empty() || per_session || !attached.is_empty() || !views.is_empty() {
            // The engine's shared catalogs, this session's own, and one holding this statement's
            // own tables.
            let list = Arc::new(MemoryCatalogProviderList::new());
            let shared = self.state.catalog_list();
            for name in shared.catalog_names() {
                if let Some(catalog) = shared.catalog(&name) {
                    list.register_catalog(name, catalog);
                }
            }
            if per_session || !attached.is_empty() {
                let own = self
                    .mounts
                    .server()
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
        for udf in self.governance.role_functions(session) {
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
        let Parsed {
            statement,
            prepared,
        } = statement::parse(sql)?;
        match statement {
            SqeStatement::Query(mut statement) => {
                let tables = self
                    .resolve_relations(session, &mut statement, &prepared)
                    .await?;
                self.run_query(session, statement, tables).await
            }
            SqeStatement::Insert(insert) => {
                let mut statement = Statement::Insert(insert);
                let tables = self
                    .resolve_relations(session, &mut statement, &prepared)
                    .await?;
                let Statement::Insert(insert) = statement else {
                    unreachable_statement()?
                };
                self.insert(session, insert, tables).await
            }
            SqeStatement::CreateTableAs(create) => {
                let mut statement = Statement::CreateTable(create);
                let tables = self
                    .resolve_relations(session, &mut statement, &prepared)
                    .await?;
                let Statement::CreateTable(create) = statement else {
                    unreachable_statement()?
                };
                self.create_table_as(session, create, prepared.partitioned_by, tables)
                    .await
            }
            SqeStatement::CreateView(view) => self.create_view(session, &view, &prepared).await,
            SqeStatement::Copy(copy) => self.copy_to(session, copy, &prepared).await,
            SqeStatement::Attach(attach) => self.attach(session, attach).await,
            SqeStatement::Detach(detach) => self.detach(session, detach),
            SqeStatement::ShowFunctions { like } => {
                crate::show_functions::show_functions(&self.state, like.as_deref())
            }
            SqeStatement::ShowStats { table } => {
                crate::show_stats::show_stats(self, session, &table).await
            }
            SqeStatement::ShowSecrets => self.show_secrets(session),
            SqeStatement::ShowGrants { on } => self.governance.show_grants(session, on.as_ref()),
            SqeStatement::ShowSession => crate::session_properties::show_session(session),
            SqeStatement::RowFilter(filter) => self.run_row_filter_statement(session, filter).await,
            SqeStatement::Mask(mask) => self.run_mask_statement(session, mask).await,
            SqeStatement::Access(statement) => {
                self.governance
                    .run_access_statement(session, &statement)
                    .await
            }
            SqeStatement::CreateSecret(secret) => self.create_secret(session, secret),
            SqeStatement::DropSecret { name, if_exists } => {
                self.drop_secret(session, &name, if_exists)
            }
            SqeStatement::Catalog(statement) => self.run_ddl(session, statement, prepared).await,
        }
    }

    /// `COPY (query) TO 'file'`: DataFusion's own statement, which writes a file.
    async fn copy_to(
        &self,
        session: &Session,
        mut copy: CopyToStatement,
        prepared: &Prepared,
    ) -> SqeResult<QueryResult> {
        self.files.check(&copy.target, Access::Write)?;
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
        self.governance
            .authorize_statement(session, &state, &statement)?;
        let plan = state
            .statement_to_plan(statement)
            .await
            .map_err(from_datafusion)?;
        let plan = self.governance.check_plan(session, &state, plan)?;
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
            crate::governance::row_filters::refuse_describing_filtered(&plan, "EXPLAIN")?;
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
        self.governance
            .authorize_statement(session, &state, &statement)?;
        let views = self.plan_views(session, &state, &statement, chain).await?;
        if !views.is_empty() {
            state = self.state_with(session, tables, views)?;
        }
        let plan = state
            .statement_to_plan(statement)
            .await
            .map_err(from_datafusion)?;
        let plan = self.governance.check_plan(session, &state, plan)?;
        Ok((state, plan))
    }

    /// Plans one query given as text, as `run` would (Trino's rewrites, the relations SQE resolves
    /// itself, the caller's rights), without running it.
    pub(crate) async fn plan_sql(
        &self,
        session: &Session,
        sql: &str,
    ) -> SqeResult<(SessionState, LogicalPlan)> {
        let (mut statement, prepared) = statement::parse_query(sql)?;
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
                    self.files.check(path, Access::Read)?;
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
                        self.files.check(path, Access::Read)?;
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
        let (catalog_name, namespace, name) = resolve_name(session, &travel.table)?;
        let object = crate::governance::model::Object::table(&catalog_name, &namespace, &name);
        self.governance.authorize_read(session, &object, || {
            SqeError::not_found(format!(
                "table '{catalog_name}.{namespace}.{name}' does not exist"
            ))
        })?;
        let catalog = self.mounts.bind(session, &catalog_name)?;
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
        statement::parse_read_only(sql)?;
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

    /// The governance part's one rule ([`Governance::is_admin`]).
    fn is_admin(&self, principal: &sqe_sessions::Principal) -> bool {
        self.governance.is_admin(principal)
    }
}

/// The secret store `config` names, if it names one.
fn persistent_secrets(config: &EngineConfig) -> SqeResult<Option<SecretStore>> {
    config
        .persistent_secrets
        .as_ref()
        .map(|p| SecretStore::new(p.path.clone(), p.passphrase.clone()))
        .transpose()
}

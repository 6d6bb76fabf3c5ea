//! The engine: the coordinator of the parts. It opens them from an [`EngineConfig`] (the catalogs,
//! governance, secrets, the file policy, the planner over DataFusion's session state), admits each
//! statement ([`QueryService::execute`]), parses it ([`crate::statement`]) and hands it, with a
//! [`Ctx`] of the parts, to the handler of its kind in one match; a query's plan comes from the
//! planner and streams back. It decides nothing a part decides: who may do what is governance's,
//! what a statement is the parser's.

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{CatalogProviderList, MemoryCatalogProviderList};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::{FunctionRegistry, SessionStateBuilder};
use datafusion::prelude::SessionConfig;
use datafusion::sql::parser::{CopyToSource, CopyToStatement, Statement as DFStatement};
use futures::StreamExt;
use sqe_sessions::{
    BatchStream, ErrorCode, IngestTarget, QueryResult, QueryService, Session, SqeError, SqeResult,
};

use crate::admission::{Admission, AdmissionConfig, QueryRegistry, admitted};
use crate::catalog::hms::HmsConfig;
use crate::catalog::mounts::{MountConfig, Mounts};
use crate::catalog::object_cache::ObjectCache;
use crate::catalog::rest::RestCatalogConfig;
use crate::catalog::sql::PostgresConfig;
use crate::context::Ctx;
use crate::error::from_datafusion;
use crate::files::policy::{Access, FileAccess, FilePolicy};
use crate::governance::Governance;
use crate::guard::{Planning, check_length};
use crate::object_stores::{ObjectStores, S3Settings};
use crate::optimizer::SqeOptimizerOptions;
use crate::planner::views::ViewChain;
use crate::planner::{
    Planner, catalog_provider, groups_constant, register_system_catalog, text_constant,
};
use crate::secrets::Secrets;
use crate::secrets::store::SecretStore;
use crate::session_properties::{check_session, max_run_time};
use crate::show::{self, functions as show_functions, stats as show_stats};
use crate::statement::prepass::Prepared;
use crate::statement::{self, Parsed, SqeStatement, recorded_text};
use crate::write::{append, ddl, ingest, maintain, refs, remove, rows, views};
use crate::{attach, governance, session_properties};

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
    /// Bytes of table files in object stores kept in memory for later scans
    /// (catalog/object_cache.rs); 0 keeps none. An eighth of the memory limit, at most 2 GiB,
    /// if unset.
    pub object_cache_bytes: Option<usize>,
    /// A directory of the server's own where the object cache also keeps what it reads, so that
    /// it outlives memory's room and the process (catalog/disk_cache.rs); none if unset.
    pub object_cache_dir: Option<PathBuf>,
    /// Bytes the object cache's directory holds at most; 10 GiB if unset.
    pub object_cache_disk_bytes: Option<u64>,
    /// Principals holding one of these roles are admins (with none, everyone is where
    /// `access_default` allows, nobody where it denies: [`Governance::is_admin`]): they may do
    /// anything, read everyone's queries and cancel them.
    pub admin_roles: Vec<String>,
    /// What no privilege decides (governance/model.rs): allow (the embedded shell) or deny.
    pub access_default: crate::governance::model::AccessDefault,
    /// The key of HASH column masks (governance/column_masks.rs); each catalog makes its own when
    /// unset.
    pub mask_key: Option<Vec<u8>>,
    /// A SQLite file keeping the policies (governance/) of the catalogs that keep none in their own
    /// database (REST, Hive Metastore): `[access] store`.
    pub policy_store: Option<PathBuf>,
    /// Ranger's policies in place of SQE's own, for the catalogs named (governance/ranger.rs).
    pub ranger: Option<crate::governance::ranger::RangerConfig>,
    /// Which files the file functions, COPY and table locations may reach (all, embedded).
    pub files: FileAccess,
    /// Where persistent secrets are kept, and the passphrase their key is derived from; without
    /// it, `CREATE PERSISTENT SECRET` is refused.
    pub persistent_secrets: Option<PersistentSecrets>,
    /// The shortest retention `expire_snapshots` and `remove_orphan_files` may be given (files of
    /// a commit in flight are younger): 7 days if unset.
    pub maintenance_min_retention: Option<std::time::Duration>,
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
    mounts: Arc<Mounts>,
    /// Secrets sessions made for themselves, and persistent ones (`CREATE SECRET`).
    secrets: Arc<Secrets>,
    default_catalog: String,
    /// Privileges, row filters, masks, Ranger: who may do what, and what they see.
    governance: Arc<Governance>,
    files: Arc<FilePolicy>,
    /// The shortest retention table maintenance may be given.
    min_retention: std::time::Duration,
    /// From a statement to its plan, as its caller may run it.
    planner: Planner,
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
        let memory_limit = config.memory_limit.or_else(default_memory_limit);
        let object_cache = config
            .object_cache_bytes
            .unwrap_or_else(|| memory_limit.map_or(0, |m| (m / 8).min(2 << 30)));
        let mut object_cache = ObjectCache::new(object_cache);
        if let Some(dir) = &config.object_cache_dir {
            let disk = config.object_cache_disk_bytes.unwrap_or(10 << 30);
            object_cache = object_cache.with_disk(dir, disk)?;
        }
        let session_config = session_config
            .with_extension(Arc::new(object_cache))
            .with_information_schema(false)
            .with_default_catalog_and_schema(default_catalog.clone(), "default")
            .with_create_default_catalog_and_schema(false);
        let mut runtime = RuntimeEnvBuilder::new()
            .with_object_store_registry(Arc::new(ObjectStores::new(S3Settings::new())));
        if let Some(bytes) = memory_limit {
            runtime = runtime.with_memory_limit(bytes, 1.0);
        }
        let builder = SessionStateBuilder::new()
            .with_config(session_config)
            .with_runtime_env(runtime.build_arc().map_err(from_datafusion)?)
            .with_catalog_list(list)
            .with_default_features()
            .with_analyzer_rules(crate::trino_sql::analyzer_rules());
        let mut builder =
            crate::optimizer::install(builder, Arc::new(crate::catalog::scan::data_identity))
                // Row filters are a plan node of governance's own, with a physical planner of its own.
                .with_query_planner(Arc::new(governance::row_filters::SqeQueryPlanner));
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
        let files = Arc::new(FilePolicy::new(
            config.files.clone(),
            mounts.local_warehouses(),
        ));
        let governance = Arc::new(Governance::new(
            Arc::clone(&mounts),
            config.admin_roles.clone(),
            config.access_default,
            config.mask_key.clone(),
            config.policy_store.as_ref(),
            config.ranger.clone(),
        )?);
        let secrets = Arc::new(Secrets::new(persistent_secrets(&config)?));
        Ok(Self {
            planner: Planner::new(
                state,
                Arc::clone(&mounts),
                Arc::clone(&governance),
                Arc::clone(&secrets),
                Arc::clone(&files),
                Arc::clone(&registry),
            ),
            files,
            min_retention: config
                .maintenance_min_retention
                .unwrap_or(maintain::DEFAULT_MIN_RETENTION),
            governance,
            mounts,
            secrets,
            default_catalog: default_catalog.to_lowercase(),
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

    /// One statement's view of the engine, for its handler.
    fn ctx<'a>(&'a self, session: &'a Session) -> Ctx<'a> {
        Ctx {
            session,
            mounts: &self.mounts,
            governance: &self.governance,
            planner: &self.planner,
            secrets: &self.secrets,
            files: &self.files,
            min_retention: self.min_retention,
        }
    }

    /// Runs one statement.
    pub async fn run(&self, session: &Session, sql: &str) -> SqeResult<QueryResult> {
        let Parsed {
            statement,
            prepared,
        } = statement::parse(sql)?;
        let ctx = self.ctx(session);
        match statement {
            SqeStatement::Query(mut statement) => {
                let planner = &self.planner;
                let tables = planner
                    .resolve_relations(session, &mut statement, &prepared)
                    .await?;
                let (state, plan) = planner.plan(session, statement, tables).await?;
                Planner::stream(state, plan).await
            }
            SqeStatement::Insert(mut insert) => {
                let tables = self
                    .planner
                    .resolve_relations(session, &mut insert, &prepared)
                    .await?;
                append::insert(&ctx, insert, tables).await
            }
            SqeStatement::CreateTableAs(mut create) => {
                let tables = self
                    .planner
                    .resolve_relations(session, &mut create, &prepared)
                    .await?;
                append::create_table_as(&ctx, create, prepared.partitioned_by, tables).await
            }
            SqeStatement::RemoveRows {
                table,
                verb,
                filter,
            } => remove::remove_rows(&ctx, &table, verb, filter.as_ref(), &prepared).await,
            SqeStatement::UpdateRows {
                table,
                assignments,
                filter,
            } => rows::update_rows(&ctx, &table, &assignments, filter.as_ref(), &prepared).await,
            SqeStatement::Merge(statement) => rows::merge_into(&ctx, &statement, &prepared).await,
            SqeStatement::CreateView(view) => views::create_view(&ctx, &view, &prepared).await,
            SqeStatement::Copy(copy) => copy_to(&ctx, copy, &prepared).await,
            SqeStatement::Attach(attach) => attach::attach(&ctx, attach).await,
            SqeStatement::Detach(detach) => attach::detach(&ctx, detach),
            SqeStatement::ShowFunctions { like } => {
                show_functions::show_functions(self.planner.state(), like.as_deref())
            }
            SqeStatement::ShowStats { table } => show_stats::show_stats(&ctx, &table).await,
            SqeStatement::ShowSecrets => self.secrets.show_secrets(session),
            SqeStatement::ShowGrants { on } => self.governance.show_grants(session, on.as_ref()),
            SqeStatement::ShowSession => session_properties::show_session(session),
            SqeStatement::RowFilter(filter) => {
                governance::statements::run_row_filter_statement(&ctx, filter).await
            }
            SqeStatement::Mask(mask) => {
                governance::statements::run_mask_statement(&ctx, mask).await
            }
            SqeStatement::Access(statement) => {
                self.governance
                    .run_access_statement(session, &statement)
                    .await
            }
            SqeStatement::CreateSecret(secret) => self.secrets.create_secret(session, secret),
            SqeStatement::DropSecret { name, if_exists } => {
                self.secrets.drop_secret(session, &name, if_exists)
            }
            SqeStatement::Procedure(call) => maintain::run(&ctx, call).await,
            SqeStatement::Ref(statement) => refs::run(&ctx, statement).await,
            SqeStatement::Column(statement) => ddl::alter_column(&ctx, statement).await,
            SqeStatement::Ddl(statement) => ddl::run(&ctx, statement, prepared).await,
            SqeStatement::Show(statement) => show::run(&ctx, statement).await,
            SqeStatement::Session(statement) => {
                session_properties::run(&self.mounts, session, statement).await
            }
        }
    }
}

/// `COPY (query) TO 'file'`: DataFusion's own statement, which writes a file where the file
/// policy allows.
async fn copy_to(
    ctx: &Ctx<'_>,
    mut copy: CopyToStatement,
    prepared: &Prepared,
) -> SqeResult<QueryResult> {
    ctx.files.check(&copy.target, Access::Write)?;
    let tables = match &mut copy.source {
        CopyToSource::Query(query) => {
            ctx.planner
                .resolve_relations(ctx.session, query, prepared)
                .await?
        }
        CopyToSource::Relation(_) => Vec::new(),
    };
    let statement = DFStatement::CopyTo(copy);
    let chain = ViewChain::default();
    let (state, plan) = ctx
        .planner
        .plan_statement(ctx.session, statement, tables, &chain)
        .await?;
    Planner::stream(state, plan).await
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
        admitted(&self.admission, &self.registry, session, &what, || async move {
            ingest::ingest_rows(&self.ctx(session), target, schema, batches).await
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

//! Planning a statement as its caller may run it: the session state for one statement (the
//! caller's catalogs, bound to their own credential; the tables SQE resolved itself; the views it
//! reads, planned first), then DataFusion's plan, checked by governance before and after.
//!
//! Every plan the engine runs comes from [`Planner::plan_statement`]: it authorizes the tables a
//! statement names before planning (so no planner error describes a hidden table), plans the views
//! it reads (views.rs), plans the statement, and puts the plan behind the caller's row filters and
//! masks and checks the columns it reads. relations.rs resolves what DataFusion cannot: time
//! travel, the file table functions and bare paths.

mod relations;
pub mod views;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::catalog::{
    CatalogProvider, CatalogProviderList, MemoryCatalogProvider, MemoryCatalogProviderList,
    MemorySchemaProvider, SchemaProvider, TableProvider,
};
use datafusion::common::ScalarValue;
use datafusion::dataframe::DataFrame;
use datafusion::execution::cache::cache_manager::CacheManagerConfig;
use datafusion::execution::context::SessionState;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::execution::{FunctionRegistry, SessionStateBuilder};
use datafusion::logical_expr::{ColumnarValue, LogicalPlan, Volatility, create_udf};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::Statement;
use futures::{StreamExt, TryStreamExt};
use sqe_sessions::{QueryResult, Session, SqeError, SqeResult};

use crate::admission::QueryRegistry;
use crate::catalog::backend::CatalogRef;
use crate::catalog::information::{CallerListing, Catalogs, WithInformationSchema};
use crate::catalog::mounts::Mounts;
use crate::catalog::provider::IcebergCatalogProvider;
use crate::catalog::system::{Caller, SystemCatalog};
use crate::error::from_datafusion;
use crate::files::policy::FilePolicy;
use crate::governance::Governance;
use crate::names::{QUERY_CATALOG, QUERY_SCHEMA, SYSTEM_CATALOG};
use crate::object_stores::ObjectStores;
use crate::secrets::Secrets;
use crate::session_properties::time_zone;
use crate::statement;
use views::{PlannedView, ViewChain, WithViews};

/// A table a statement resolved before planning, registered under a generated name.
pub(crate) type QueryTables = Vec<(String, Arc<dyn TableProvider>)>;

/// The planning part of an engine: see the module docs.
pub(crate) struct Planner {
    /// The engine's session state: its functions, rules and shared catalogs; each statement's
    /// state is made from it.
    state: SessionState,
    mounts: Arc<Mounts>,
    governance: Arc<Governance>,
    /// For a session's own object store credentials (an s3 secret).
    secrets: Arc<Secrets>,
    /// For the paths the file functions and bare paths name.
    files: Arc<FilePolicy>,
    /// For `system.runtime.queries` in each statement's own catalog list.
    registry: Arc<QueryRegistry>,
}

impl Planner {
    pub fn new(
        state: SessionState,
        mounts: Arc<Mounts>,
        governance: Arc<Governance>,
        secrets: Arc<Secrets>,
        files: Arc<FilePolicy>,
        registry: Arc<QueryRegistry>,
    ) -> Self {
        Self {
            state,
            mounts,
            governance,
            secrets,
            files,
            registry,
        }
    }

    /// The engine's session state, as no statement changed it (its functions, for SHOW FUNCTIONS).
    pub fn state(&self) -> &SessionState {
        &self.state
    }

    /// The session state for one statement: the session's current catalog and schema, plus the
    /// tables the statement resolved itself.
    pub(crate) fn state_for(
        &self,
        session: &Session,
        tables: QueryTables,
    ) -> SqeResult<SessionState> {
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
            config = config.with_extension(Arc::new(CallerListing(Arc::new(visibility))));
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
        // The session's catalog and schema, and its roles (governance/).
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
        let Some(secret) = self.secrets.s3_secret(session)? else {
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

    /// Plans a query or an EXPLAIN: [`Self::plan_statement`], refused if DataFusion planned a
    /// change of state (SQE runs those itself), analyzed so that its schema is its rows'.
    pub(crate) async fn plan(
        &self,
        session: &Session,
        statement: Statement,
        tables: QueryTables,
    ) -> SqeResult<(SessionState, LogicalPlan)> {
        let chain = ViewChain::default();
        let statement = DFStatement::Statement(Box::new(statement));
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
        // semantics (trino_sql/) change some types after DataFusion's type coercion.
        let plan = state
            .analyzer()
            .execute_and_check(plan, state.config_options(), |_, _| {})
            .map_err(from_datafusion)?;
        Ok((state, plan))
    }

    /// Plans a statement with DataFusion (not yet analyzed) as `session`'s caller may run it: the
    /// one path from a statement to a plan. The tables it names are authorized first, the views
    /// it reads planned, and the plan checked ([`Governance::check_plan`]). `chain`: the views
    /// being planned around this statement (views.rs).
    pub(crate) async fn plan_statement(
        &self,
        session: &Session,
        statement: DFStatement,
        tables: QueryTables,
        chain: &ViewChain,
    ) -> SqeResult<(SessionState, LogicalPlan)> {
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

    /// Runs a plan, its rows streamed.
    pub(crate) async fn stream(state: SessionState, plan: LogicalPlan) -> SqeResult<QueryResult> {
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
}

/// DataFusion's view of a mounted catalog, with Trino's `information_schema`.
pub(crate) fn catalog_provider(name: &str, catalog: CatalogRef) -> Arc<dyn CatalogProvider> {
    let provider = Arc::new(IcebergCatalogProvider::new(name, catalog));
    Arc::new(WithInformationSchema::new(name, provider))
}

/// Trino's `system` catalog over the catalogs of `list`.
pub(crate) fn register_system_catalog(
    list: &Arc<MemoryCatalogProviderList>,
    registry: &Arc<QueryRegistry>,
) {
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
pub(crate) fn groups_constant(groups: &[String]) -> Arc<datafusion::logical_expr::ScalarUDF> {
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
pub(crate) fn text_constant(name: &str, value: String) -> Arc<datafusion::logical_expr::ScalarUDF> {
    let value = ScalarValue::Utf8(Some(value));
    Arc::new(create_udf(
        name,
        vec![],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(move |_: &[ColumnarValue]| Ok(ColumnarValue::Scalar(value.clone()))),
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

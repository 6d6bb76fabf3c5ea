//! Views: `CREATE [OR REPLACE] VIEW`, `DROP VIEW`, `SHOW CREATE VIEW`, and a view's expansion when
//! a statement names it.
//!
//! A view is kept in its catalog as Iceberg's view spec says (catalog/view.rs), with its SQL as
//! written and the catalog and schema its names resolve in. Reading one plans that SQL again as the
//! caller, so a view never reaches more than its reader may (Trino's `SECURITY INVOKER`, the only
//! kind SQE has): the caller's own token goes on to every table the view reads.
//!
//! Expansion happens before DataFusion plans the statement: the relations it names (DataFusion's
//! own resolution, which knows CTE names from tables) are looked up, each view is planned, and the
//! statement is planned against catalogs in which those names are the planned views.

use crate::governance::model::{Object, Privilege};
use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema as ArrowSchema};
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::common::Column;
use datafusion::datasource::ViewTable;
use datafusion::error::Result as DFResult;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{CreateView, ObjectName, Statement};
use datafusion::sql::sqlparser::parser::Parser;
use iceberg::arrow::arrow_schema_to_schema_auto_assign_ids;
use iceberg::{NamespaceIdent, TableIdent};
use sqe_sessions::{ErrorCode, QueryResult, Session, SqeError, SqeResult};

use crate::catalog::view::{ViewChange, ViewDefinition};
use crate::engine::Engine;
use crate::error::{from_datafusion, from_iceberg};
use crate::guard::check_depth;
use crate::names::{QUERY_CATALOG, SYSTEM_CATALOG, qualified, table_ident};
use crate::statement::prepass::{Prepared, prepare};

/// How deep views may read views.
const MAX_VIEW_DEPTH: usize = 32;

/// How many views one statement may expand, over all its levels: a view read twice by each view
/// it is read by would otherwise double the work at every level.
const MAX_VIEWS_PER_STATEMENT: usize = 500;

/// The views being planned around a statement, outermost first, and how many its outermost
/// statement has expanded so far.
#[derive(Debug, Default)]
pub(crate) struct ViewChain {
    names: Vec<String>,
    expanded: Arc<std::sync::atomic::AtomicUsize>,
}

impl ViewChain {
    /// The chain inside the view `full`.
    fn inside(&self, full: &str) -> Self {
        let mut names = self.names.clone();
        names.push(full.to_string());
        Self {
            names,
            expanded: Arc::clone(&self.expanded),
        }
    }
}

/// A view a statement reads, planned: `(catalog, schema, view)`, and the view.
pub(crate) type PlannedView = (String, String, String, Arc<dyn TableProvider>);

impl Engine {
    pub(crate) async fn create_view(
        &self,
        session: &Session,
        cv: &CreateView,
        prepared: &Prepared,
    ) -> SqeResult<QueryResult> {
        if cv.materialized {
            return Err(SqeError::unsupported(
                "CREATE MATERIALIZED VIEW is not supported",
            ));
        }
        if cv.temporary || cv.or_alter || cv.to.is_some() {
            return Err(SqeError::unsupported(
                "only CREATE [OR REPLACE] VIEW name [COMMENT '…'] AS query is supported",
            ));
        }
        if !prepared.files.is_empty() || !prepared.time_travel.is_empty() {
            return Err(SqeError::unsupported(
                "a view cannot name a file path or read a table AS OF a version; use read_parquet(…) and the like in a view",
            ));
        }
        let (catalog_name, ident) = table_ident(session, &cv.name)?;
        let catalog = self.mounts.bind(session, &catalog_name)?;
        let full = qualified(&catalog_name, &ident);
        if !catalog.supports_views() {
            return Err(SqeError::unsupported(format!(
                "cannot create view '{full}': catalog '{catalog_name}' does not keep views"
            )));
        }
        if let Some(why) = catalog.read_only() {
            return Err(SqeError::unsupported(why));
        }
        let schema_object = Object::schema(&catalog_name, &ident.namespace.join("."));
        self.governance
            .authorize(session, Privilege::Create, &schema_object, || {
                SqeError::internal("a schema is never hidden")
            })?;
        let view_object = Object::table(&catalog_name, &ident.namespace.join("."), &ident.name);
        let replaces = cv.or_replace && catalog.view_exists(&ident).await.map_err(from_iceberg)?;
        if replaces {
            self.governance
                .authorize(session, Privilege::Drop, &view_object, || {
                    SqeError::invalid(format!(
                        "cannot create view '{full}': a view of that name exists"
                    ))
                })?;
        }
        if cv.if_not_exists && catalog.view_exists(&ident).await.map_err(from_iceberg)? {
            return Ok(QueryResult::empty());
        }
        let sql = cv.query.to_string();
        let schema_name = ident.namespace.join(".");
        // Planned now as every reader will plan it: this checks it, and gives its columns.
        let as_view = in_view(session, &catalog_name, &schema_name);
        let (state, plan) = self
            .plan_view_sql(&as_view, &sql, &ViewChain::default().inside(&full))
            .await?;
        let plan = state
            .analyzer()
            .execute_and_check(plan, state.config_options(), |_, _| {})
            .map_err(from_datafusion)?;
        let fields = plan.schema().fields();
        let names: Vec<String> = if cv.columns.is_empty() {
            fields.iter().map(|f| f.name().clone()).collect()
        } else if cv.columns.len() == fields.len() {
            cv.columns.iter().map(|c| c.name.value.clone()).collect()
        } else {
            return Err(SqeError::invalid(format!(
                "view '{full}' names {} columns but its query has {}",
                cv.columns.len(),
                fields.len()
            )));
        };
        for (i, n) in names.iter().enumerate() {
            if names[..i].iter().any(|m| m.eq_ignore_ascii_case(n)) {
                return Err(SqeError::invalid(format!(
                    "column name '{n}' is given more than once in view '{full}'"
                )));
            }
        }
        let arrow = ArrowSchema::new(
            fields
                .iter()
                .zip(&names)
                .map(|(f, n)| Field::new(n, storable(f.data_type()), true))
                .collect::<Vec<_>>(),
        );
        let schema = arrow_schema_to_schema_auto_assign_ids(&arrow).map_err(|e| {
            SqeError::unsupported(format!(
                "view '{full}' has a column type a view cannot keep: {}",
                e.message()
            ))
        })?;
        let change = ViewChange {
            sql,
            default_catalog: catalog_name.clone(),
            default_schema: schema_name,
            schema,
            comment: cv.comment.clone(),
            owner: session.principal.name.clone(),
        };
        catalog
            .create_view(&ident, change, replaces)
            .await
            .map_err(from_iceberg)?;
        // A replaced view keeps its owner and privileges.
        if !replaces {
            self.governance.record_owner(session, &view_object)?;
        }
        Ok(QueryResult::empty())
    }

    pub(crate) async fn drop_view(
        &self,
        session: &Session,
        name: &ObjectName,
        if_exists: bool,
    ) -> SqeResult<()> {
        let (catalog_name, ident) = table_ident(session, name)?;
        let catalog = self.mounts.bind(session, &catalog_name)?;
        let full = qualified(&catalog_name, &ident);
        let object = Object::table(&catalog_name, &ident.namespace.join("."), &ident.name);
        match self
            .governance
            .authorize(session, Privilege::Drop, &object, || {
                SqeError::not_found(format!("view '{full}' does not exist"))
            }) {
            Err(e) if if_exists && e.code() == sqe_sessions::ErrorCode::NotFound => return Ok(()),
            other => other?,
        }
        if catalog.supports_views() {
            // Dropped without reading its metadata, which may be what is broken.
            match catalog.drop_view(&ident).await {
                Ok(()) => return self.governance.forget_object(session, &object),
                Err(e) if e.kind() == iceberg::ErrorKind::TableNotFound => {}
                Err(e) => return Err(from_iceberg(e)),
            }
        }
        if catalog.table_exists(&ident).await.map_err(from_iceberg)? {
            return Err(SqeError::invalid(format!(
                "'{full}' is a table, not a view; drop it with DROP TABLE"
            )));
        }
        if if_exists {
            return Ok(());
        }
        Err(SqeError::not_found(format!("view '{full}' does not exist")))
    }

    /// The view of that name, if there is one: `(catalog, ident, definition)`.
    pub(crate) async fn find_view(
        &self,
        session: &Session,
        name: &ObjectName,
    ) -> SqeResult<Option<(String, TableIdent, ViewDefinition)>> {
        let (catalog_name, ident) = table_ident(session, name)?;
        let catalog = self.mounts.bind(session, &catalog_name)?;
        if !catalog.supports_views() {
            return Ok(None);
        }
        let view = catalog.load_view(&ident).await.map_err(from_iceberg)?;
        Ok(view.map(|v| (catalog_name, ident, v)))
    }

    /// `SHOW CREATE VIEW`, in Trino's form.
    pub(crate) async fn show_create_view(
        &self,
        session: &Session,
        name: &ObjectName,
    ) -> SqeResult<QueryResult> {
        let (catalog_name, ident) = table_ident(session, name)?;
        let object = Object::table(&catalog_name, &ident.namespace.join("."), &ident.name);
        self.governance.authorize_visible(session, &object, || {
            SqeError::not_found(format!("view '{object}' does not exist"))
        })?;
        let Some((catalog, ident, view)) = self.find_view(session, name).await? else {
            let (catalog_name, ident) = table_ident(session, name)?;
            return Err(SqeError::not_found(format!(
                "view '{}' does not exist",
                qualified(&catalog_name, &ident)
            )));
        };
        let comment = match &view.comment {
            Some(c) => format!(" COMMENT '{}'", c.replace('\'', "''")),
            None => String::new(),
        };
        let text = format!(
            "CREATE VIEW {}{comment} SECURITY INVOKER AS\n{}",
            qualified(&catalog, &ident),
            view.sql
        );
        QueryResult::column("Create View", vec![text])
    }

    /// Plans the views among the relations `statement` reads. `chain` holds the views being
    /// planned around this statement, outermost first.
    pub(crate) async fn plan_views(
        &self,
        session: &Session,
        state: &SessionState,
        statement: &DFStatement,
        chain: &ViewChain,
    ) -> SqeResult<Vec<PlannedView>> {
        let references = state
            .resolve_table_references(statement)
            .map_err(from_datafusion)?;
        let mut planned: Vec<PlannedView> = Vec::new();
        for reference in references {
            let r = reference.resolve(&session.catalog, &session.schema);
            let (c, s, t) = (
                r.catalog.to_string(),
                r.schema.to_string(),
                r.table.to_string(),
            );
            let own = c == QUERY_CATALOG || c == SYSTEM_CATALOG;
            if own || s == "information_schema" || t.contains('$') {
                continue;
            }
            if planned.iter().any(|p| p.0 == c && p.1 == s && p.2 == t) {
                continue;
            }
            // A catalog that cannot be reached is the planner's to report.
            let Ok(catalog) = self.mounts.bind(session, &c) else {
                continue;
            };
            if !catalog.supports_views() {
                continue;
            }
            let ident = TableIdent::new(NamespaceIdent::new(s.clone()), t.clone());
            let Some(view) = catalog.load_view(&ident).await.map_err(from_iceberg)? else {
                continue;
            };
            let full = qualified(&c, &ident);
            if let Some(at) = chain.names.iter().position(|v| *v == full) {
                let mut cycle = chain.names[at..].to_vec();
                cycle.push(full.clone());
                return Err(SqeError::invalid(format!(
                    "view '{full}' refers to itself: {}",
                    cycle.join(" → ")
                )));
            }
            if chain.names.len() >= MAX_VIEW_DEPTH {
                return Err(SqeError::invalid(format!(
                    "view '{full}' is nested more than {MAX_VIEW_DEPTH} views deep"
                )));
            }
            let expanded = chain
                .expanded
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if expanded >= MAX_VIEWS_PER_STATEMENT {
                return Err(SqeError::invalid(format!(
                    "the statement reads more than {MAX_VIEWS_PER_STATEMENT} views, counting each time a view reads another"
                )));
            }
            let inner = chain.inside(&full);
            let home = view.default_catalog.clone().unwrap_or_else(|| c.clone());
            let as_view = in_view(session, &home, &view.default_schema);
            let (_, plan) = Box::pin(self.plan_view_sql(&as_view, &view.sql, &inner))
                .await
                .map_err(|e| match e.code() {
                    // The innermost view that failed says so itself.
                    _ if e.message().starts_with("view '") => e,
                    ErrorCode::Internal => e,
                    code => SqeError::new(
                        code,
                        format!("view '{full}' cannot be read: {}", e.message()),
                    ),
                })?;
            let plan = named_as_created(plan, &view, &full)?;
            let table: Arc<dyn TableProvider> = Arc::new(ViewTable::new(plan, Some(view.sql)));
            planned.push((c, s, t, table));
        }
        Ok(planned)
    }

    /// Plans a view's SQL (not yet analyzed) as `session` would, with the views it reads.
    async fn plan_view_sql(
        &self,
        session: &Session,
        sql: &str,
        chain: &ViewChain,
    ) -> SqeResult<(SessionState, LogicalPlan)> {
        let prepared = prepare(sql)?;
        let mut statements = Parser::parse_sql(
            &crate::statement::dialect::SqeDialect::default(),
            &prepared.sql,
        )
        .map_err(|e| SqeError::invalid(format!("syntax error in a view: {e}")))?;
        let mut statement = match (statements.pop(), statements.is_empty()) {
            (Some(s @ Statement::Query(_)), true) => s,
            _ => return Err(SqeError::invalid("a view's SQL must be one query")),
        };
        check_depth(&statement)?;
        crate::trino_sql::rewrite_statement(&mut statement)?;
        let tables = self
            .resolve_relations(session, &mut statement, &prepared)
            .await?;
        self.plan_statement(session, statement, tables, chain).await
    }
}

/// `session` as a view's SQL sees it: its names resolve in the view's catalog and schema.
fn in_view(session: &Session, catalog: &str, schema: &str) -> Session {
    let mut s = session.clone();
    s.catalog = catalog.to_string();
    s.schema = schema.to_string();
    s
}

/// A column type as a view's schema keeps it (Iceberg has neither unsigned integers nor a type
/// of its own for NULL): text of any kind is a string, an unsigned integer the signed type holding
/// it (`row_number()` is a bigint, as in Trino), NULL a varchar.
fn storable(ty: &DataType) -> DataType {
    match ty {
        DataType::Utf8View | DataType::LargeUtf8 | DataType::Null => DataType::Utf8,
        DataType::BinaryView | DataType::LargeBinary => DataType::Binary,
        DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 | DataType::UInt64 => DataType::Int64,
        other => other.clone(),
    }
}

/// The view's rows under the names it was created with, whatever its query calls them now.
fn named_as_created(
    plan: LogicalPlan,
    view: &ViewDefinition,
    full: &str,
) -> SqeResult<LogicalPlan> {
    let names: Vec<&str> = view
        .schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    let columns = plan.schema().columns();
    if columns.len() != names.len() {
        return Err(SqeError::invalid(format!(
            "view '{full}' is stale: it was created with {} columns and its query now gives {}; recreate it",
            names.len(),
            columns.len()
        )));
    }
    if columns.iter().zip(&names).all(|(c, n)| c.name == *n) {
        return Ok(plan);
    }
    let exprs: Vec<Expr> = columns
        .into_iter()
        .zip(names)
        .map(|(c, n)| Expr::Column(Column::new(c.relation, c.name)).alias(n))
        .collect();
    LogicalPlanBuilder::from(plan)
        .project(exprs)
        .and_then(|b| b.build())
        .map_err(from_datafusion)
}

/// A catalog in which some names are views planned for one statement.
#[derive(Debug)]
pub(crate) struct WithViews {
    pub inner: Option<Arc<dyn CatalogProvider>>,
    pub views: HashMap<String, HashMap<String, Arc<dyn TableProvider>>>,
}

impl CatalogProvider for WithViews {
    fn schema_names(&self) -> Vec<String> {
        let mut names = self
            .inner
            .as_ref()
            .map(|c| c.schema_names())
            .unwrap_or_default();
        for schema in self.views.keys() {
            if !names.contains(schema) {
                names.push(schema.clone());
            }
        }
        names
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        let inner = self.inner.as_ref().and_then(|c| c.schema(name));
        match self.views.get(name) {
            Some(views) => Some(Arc::new(SchemaWithViews {
                inner,
                views: views.clone(),
            })),
            None => inner,
        }
    }
}

#[derive(Debug)]
struct SchemaWithViews {
    inner: Option<Arc<dyn SchemaProvider>>,
    views: HashMap<String, Arc<dyn TableProvider>>,
}

#[async_trait]
impl SchemaProvider for SchemaWithViews {
    fn table_names(&self) -> Vec<String> {
        let mut names = self
            .inner
            .as_ref()
            .map(|s| s.table_names())
            .unwrap_or_default();
        names.extend(self.views.keys().cloned());
        names
    }

    async fn table(&self, name: &str) -> DFResult<Option<Arc<dyn TableProvider>>> {
        if let Some(view) = self.views.get(name) {
            return Ok(Some(view.clone()));
        }
        match &self.inner {
            Some(s) => s.table(name).await,
            None => Ok(None),
        }
    }

    fn table_exist(&self, name: &str) -> bool {
        self.views.contains_key(name) || self.inner.as_ref().is_some_and(|s| s.table_exist(name))
    }
}

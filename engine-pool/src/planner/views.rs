//! A view's expansion when a statement reads it: the relations the statement names (DataFusion's
//! own resolution, which knows CTE names from tables) are looked up, each view's SQL is planned
//! again as the caller, in the view's catalog and schema (Trino's `SECURITY INVOKER`, the only kind
//! SQE has: a view never reaches more than its reader may, and the caller's own token goes on to
//! every table it reads), and the statement is planned against catalogs in which those names are
//! the planned views.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::common::Column;
use datafusion::datasource::ViewTable;
use datafusion::error::Result as DFResult;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder};
use datafusion::sql::parser::Statement as DFStatement;
use iceberg::{NamespaceIdent, TableIdent};
use sqe_sessions::{ErrorCode, Session, SqeError, SqeResult};

use super::Planner;
use crate::catalog::view::ViewDefinition;
use crate::error::{from_datafusion, from_iceberg};
use crate::names::{QUERY_CATALOG, SYSTEM_CATALOG, qualified};
use crate::statement::parse_view;

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
    pub(crate) fn inside(&self, full: &str) -> Self {
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

impl Planner {
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
    pub(crate) async fn plan_view_sql(
        &self,
        session: &Session,
        sql: &str,
        chain: &ViewChain,
    ) -> SqeResult<(SessionState, LogicalPlan)> {
        let (mut statement, prepared) = parse_view(sql)?;
        let tables = self
            .resolve_relations(session, &mut statement, &prepared)
            .await?;
        let statement = DFStatement::Statement(Box::new(statement));
        self.plan_statement(session, statement, tables, chain).await
    }
}

/// `session` as a view's SQL sees it: its names resolve in the view's catalog and schema.
pub(crate) fn in_view(session: &Session, catalog: &str, schema: &str) -> Session {
    let mut s = session.clone();
    s.catalog = catalog.to_string();
    s.schema = schema.to_string();
    s
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

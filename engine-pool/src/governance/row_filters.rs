//! Row filters: a boolean SQL expression per table for a user or a role, which the rows of that
//! table pass before anything else in a statement sees them.
//!
//! ```sql
//! CREATE ROW FILTER eu_only ON sales USING (region = 'eu') FOR ROLE analyst
//! DROP ROW FILTER [IF EXISTS] eu_only ON sales
//! SHOW ROW FILTERS ON sales
//! ```
//!
//! The table's owner (or an admin) makes and drops them; they are kept beside the privileges
//! (model.rs) and apply to every caller they name, by user or by role (admins included: the
//! filter is the data's, not the caller's rights). Several filters for one caller all apply.
//!
//! Each statement's plan gets a [`RowFilterNode`] right above every scan of a filtered table,
//! before any optimizer rule runs: a barrier no condition, projection or common subexpression of
//! the statement crosses, so nothing the statement computes sees the other rows: queries,
//! subqueries, CTEs, views (whose bodies are planned, and filtered, in their own schema), CTAS,
//! INSERT … SELECT and COPY alike. A filter's expression reads only the table's own columns and
//! may use `current_user`, `current_roles()` and `is_role_in_session(…)`. Time travel is filtered
//! too. What cannot be filtered is refused to the callers a filter names: the table's metadata
//! tables (`t$files` shows column bounds), `SHOW STATS` and `EXPLAIN`. Column masks
//! (column_masks.rs) are placed by the same pass, above the row filters.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNodeRecursion};
use datafusion::common::{Column, DataFusionError};
use datafusion::execution::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan, Projection};
use datafusion::physical_plan::ExecutionPlan;
use sqe_sessions::{ErrorCode, Session, SqeError, SqeResult};

use super::Governance;
use crate::catalog::policy_store::PolicyDb;
use crate::governance::column_masks::Mask;
use crate::governance::model::Object;

/// A row filter in a statement's plan: its condition over the rows of the scan below, and a
/// barrier to the optimizer. DataFusion's rules see a node they do not know: no condition of the
/// statement is pushed into it or below it (`prevent_predicate_push_down_columns`: every column),
/// and no expression of the statement (a common subexpression, a projection) is moved below it, so
/// nothing the statement computes ever runs on a row the filter hides (a failing cast would print
/// its value). Only the columns the statement and the condition use are read below it. Planned as a
/// `FilterExec` behind a [`RowFilterBarrier`] ([`RowFilterPlanner`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub(crate) struct RowFilterNode {
    input: LogicalPlan,
    predicate: Expr,
}

impl datafusion::logical_expr::UserDefinedLogicalNodeCore for RowFilterNode {
    fn name(&self) -> &str {
        "RowFilter"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.input]
    }

    fn schema(&self) -> &datafusion::common::DFSchemaRef {
        self.input.schema()
    }

    fn expressions(&self) -> Vec<Expr> {
        vec![self.predicate.clone()]
    }

    /// The condition is its owner's to read (EXPLAIN is refused to the callers it names anyway).
    fn fmt_for_explain(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "RowFilter")
    }

    fn with_exprs_and_inputs(
        &self,
        mut exprs: Vec<Expr>,
        mut inputs: Vec<LogicalPlan>,
    ) -> datafusion::common::Result<Self> {
        match (exprs.pop(), inputs.pop()) {
            (Some(predicate), Some(input)) if exprs.is_empty() && inputs.is_empty() => {
                Ok(Self { input, predicate })
            }
            _ => datafusion::common::internal_err!("RowFilter has one input and one condition"),
        }
    }

    /// The columns asked for and those the condition reads.
    fn necessary_children_exprs(&self, output_columns: &[usize]) -> Option<Vec<Vec<usize>>> {
        let schema = self.input.schema();
        let mut needed: BTreeSet<usize> = output_columns.iter().copied().collect();
        for column in self.predicate.column_refs() {
            needed.insert(schema.index_of_column(column).ok()?);
        }
        Some(vec![needed.into_iter().collect()])
    }
}

/// Plans a [`RowFilterNode`]: its condition in a `FilterExec`, behind a [`RowFilterBarrier`].
#[derive(Debug)]
pub(crate) struct RowFilterPlanner;

#[async_trait::async_trait]
impl datafusion::physical_planner::ExtensionPlanner for RowFilterPlanner {
    async fn plan_extension(
        &self,
        planner: &dyn datafusion::physical_planner::PhysicalPlanner,
        node: &dyn datafusion::logical_expr::UserDefinedLogicalNode,
        logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        session_state: &SessionState,
    ) -> datafusion::common::Result<Option<Arc<dyn ExecutionPlan>>> {
        let Some(node) = node.as_any().downcast_ref::<RowFilterNode>() else {
            return Ok(None);
        };
        let ([logical], [input]) = (logical_inputs, physical_inputs) else {
            return datafusion::common::internal_err!("RowFilter has one input");
        };
        let predicate =
            planner.create_physical_expr(&node.predicate, logical.schema(), session_state)?;
        let filter =
            datafusion::physical_plan::filter::FilterExec::try_new(predicate, Arc::clone(input))?;
        Ok(Some(RowFilterBarrier::over(Arc::new(filter))))
    }
}

/// SQE's physical planner: DataFusion's, with the row filters' nodes and the optimizer's.
#[derive(Debug)]
pub(crate) struct SqeQueryPlanner;

#[async_trait::async_trait]
impl datafusion::execution::context::QueryPlanner for SqeQueryPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &SessionState,
    ) -> datafusion::common::Result<Arc<dyn ExecutionPlan>> {
        use datafusion::physical_planner::PhysicalPlanner;
        let mut planners = crate::optimizer::extension_planners();
        planners.push(Arc::new(RowFilterPlanner));
        datafusion::physical_planner::DefaultPhysicalPlanner::with_extension_planners(planners)
            .create_physical_plan(logical_plan, session_state)
            .await
    }
}

/// Passes its input's rows on and stops the optimizer at itself: no filter is pushed into its
/// input, no projection moved below it (the defaults of [`ExecutionPlan`]). Above each row filter.
#[derive(Debug)]
pub(crate) struct RowFilterBarrier {
    input: Arc<dyn ExecutionPlan>,
}

impl RowFilterBarrier {
    fn over(input: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        Arc::new(Self { input })
    }
}

impl datafusion::physical_plan::DisplayAs for RowFilterBarrier {
    fn fmt_as(
        &self,
        _t: datafusion::physical_plan::DisplayFormatType,
        f: &mut std::fmt::Formatter,
    ) -> std::fmt::Result {
        write!(f, "RowFilterBarrier")
    }
}

impl ExecutionPlan for RowFilterBarrier {
    fn name(&self) -> &str {
        "RowFilterBarrier"
    }

    fn properties(&self) -> &Arc<datafusion::physical_plan::PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> datafusion::common::Result<Arc<dyn ExecutionPlan>> {
        match <[_; 1]>::try_from(children) {
            Ok([input]) => Ok(Self::over(input)),
            Err(_) => datafusion::common::internal_err!("RowFilterBarrier has one input"),
        }
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<datafusion::execution::TaskContext>,
    ) -> datafusion::common::Result<datafusion::execution::SendableRecordBatchStream> {
        self.input.execute(partition, context)
    }

    fn partition_statistics(
        &self,
        partition: Option<usize>,
    ) -> datafusion::common::Result<Arc<datafusion::common::Statistics>> {
        self.input.partition_statistics(partition)
    }
}

/// Whether SQE placed a row filter or a column mask anywhere in `plan` (before optimization).
pub(crate) fn is_governed_plan(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        if is_governed(node) {
            found = true;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}

/// Statistics and plans describe a table's rows before its row filters and masks: refused to
/// the callers they name.
pub(crate) fn refuse_describing_filtered(plan: &LogicalPlan, what: &str) -> SqeResult<()> {
    if is_governed_plan(plan) {
        return Err(SqeError::new(
            ErrorCode::PermissionDenied,
            format!(
                "Access Denied: {what} is not available on a table with a row filter or column mask that applies to you"
            ),
        ));
    }
    Ok(())
}

/// One filter: (grantee kind, grantee, expression).
type Rule = (String, String, String);

/// One catalog's row filters and column masks, by (schema, table), and the caller's roles there.
#[derive(Default)]
struct CatalogPolicies {
    filters: HashMap<(String, String), Vec<Rule>>,
    masks: HashMap<(String, String), Vec<crate::governance::column_masks::Rule>>,
    tags: crate::governance::column_masks::Tags,
    tag_masks: HashMap<String, Vec<crate::governance::column_masks::TagMask>>,
    roles: BTreeSet<String>,
    /// Ranger's policies and the caller as they see them, in place of the above (ranger.rs).
    ranger: Option<(
        Arc<crate::governance::ranger::RangerPolicies>,
        crate::governance::model::Who,
    )>,
}

/// A statement's view of the row filters and column masks of the catalogs it reads, read once
/// per catalog.
struct StatementPolicies<'a> {
    governance: &'a Governance,
    session: &'a Session,
    catalogs: HashMap<String, CatalogPolicies>,
}

impl<'a> StatementPolicies<'a> {
    fn new(governance: &'a Governance, session: &'a Session) -> Self {
        Self {
            governance,
            session,
            catalogs: HashMap::new(),
        }
    }

    fn catalog(&mut self, catalog: &str) -> SqeResult<&CatalogPolicies> {
        if !self.catalogs.contains_key(catalog)
            && let Some(ranger) = self
                .governance
                .ranger
                .as_ref()
                .filter(|r| r.governs(catalog))
        {
            let who = crate::governance::model::Who {
                name: self.session.principal.name.clone(),
                roles: self.session.principal.roles.iter().cloned().collect(),
                admin: false,
            };
            let read = CatalogPolicies {
                ranger: Some((ranger.current()?, who)),
                ..CatalogPolicies::default()
            };
            self.catalogs.insert(catalog.to_string(), read);
        }
        if !self.catalogs.contains_key(catalog) {
            let handle = self.governance.mounts.bind(self.session, catalog)?;
            let read = match self.governance.policy_db_of(catalog, &handle) {
                Some(db) => {
                    let filters = read_rules(db, catalog)?;
                    let masks = crate::governance::column_masks::read_masks(db, catalog)?;
                    let tags = crate::governance::column_masks::read_tags(db, catalog)?;
                    // Where no policy is, nothing more to read (PostgreSQL: no more round trips).
                    let none = filters.is_empty() && masks.is_empty() && tags.is_empty();
                    CatalogPolicies {
                        tag_masks: match tags.is_empty() {
                            true => HashMap::new(),
                            false => crate::governance::column_masks::read_tag_masks(db, catalog)?,
                        },
                        roles: match none {
                            true => BTreeSet::new(),
                            false => caller_roles(db, catalog, self.session)?,
                        },
                        filters,
                        masks,
                        tags,
                        ranger: None,
                    }
                }
                None => CatalogPolicies::default(),
            };
            self.catalogs.insert(catalog.to_string(), read);
        }
        Ok(&self.catalogs[catalog])
    }

    fn applies(&self, catalog: &str, kind: &str, grantee: &str) -> bool {
        match kind {
            "user" => grantee == self.session.principal.name,
            _ => self.catalogs[catalog].roles.contains(grantee),
        }
    }

    /// The row filters that apply to the caller on `object`.
    fn filters_for(&mut self, object: &Object) -> SqeResult<Vec<String>> {
        let key = (
            object.schema.clone(),
            object.table.clone().unwrap_or_default(),
        );
        let policies = self.catalog(&object.catalog)?;
        if let Some((ranger, who)) = &policies.ranger {
            return Ok(ranger.row_filter(who, object).into_iter().collect());
        }
        let rules = policies.filters.get(&key).cloned();
        Ok(rules
            .into_iter()
            .flatten()
            .filter(|(kind, grantee, _)| self.applies(&object.catalog, kind, grantee))
            .map(|(_, _, expr)| expr)
            .collect())
    }

    /// The mask that applies to the caller on each masked column of `object`, by field id: the
    /// column's own for the user, else for the first of their roles by name; else its tags' (by
    /// tag name), in the same order.
    fn masks_for(
        &mut self,
        object: &Object,
        ids: Option<&HashMap<String, i32>>,
    ) -> SqeResult<HashMap<i32, Mask>> {
        let key = (
            object.schema.clone(),
            object.table.clone().unwrap_or_default(),
        );
        let policies = self.catalog(&object.catalog)?;
        if let Some((ranger, who)) = &policies.ranger {
            // Ranger masks by name: the table's current names (an older snapshot's columns are
            // masked by their field ids, whatever they were called then).
            let Some(ids) = ids else {
                // A scan without field ids (a metadata table): refused to anyone masked.
                return Ok(match ranger.masks_any(who, object) {
                    true => HashMap::from([(-1, Mask::Null)]),
                    false => HashMap::new(),
                });
            };
            return Ok(ids
                .iter()
                .filter_map(|(name, id)| Some((*id, ranger.mask(who, object, name)?)))
                .collect());
        }
        let rules = policies.masks.get(&key).cloned();
        let tagged: Vec<(i32, Vec<crate::governance::column_masks::TagMask>)> = policies
            .tags
            .get(&key)
            .into_iter()
            .flatten()
            .filter_map(|(id, tag)| Some((*id, policies.tag_masks.get(tag)?.clone())))
            .collect();
        let mut masks = HashMap::new();
        for (field_id, kind, grantee, mask) in rules.into_iter().flatten() {
            if self.applies(&object.catalog, &kind, &grantee) {
                masks.entry(field_id).or_insert(mask);
            }
        }
        for (field_id, rules) in tagged {
            for (kind, grantee, mask) in rules {
                if !masks.contains_key(&field_id) && self.applies(&object.catalog, &kind, &grantee)
                {
                    masks.insert(field_id, mask);
                }
            }
        }
        Ok(masks)
    }

    fn hash_key(&self, catalog: &str) -> SqeResult<Option<Vec<u8>>> {
        let handle = self.governance.mounts.bind(self.session, catalog)?;
        match self.governance.policy_db_of(catalog, &handle) {
            Some(db) => crate::governance::column_masks::hash_key(
                self.governance.mask_key(),
                db,
                catalog,
                false,
            ),
            // Ranger's catalogs: the configured key alone.
            None => Ok(self.governance.mask_key().map(<[u8]>::to_vec)),
        }
    }
}

fn read_rules(db: &dyn PolicyDb, catalog: &str) -> SqeResult<HashMap<(String, String), Vec<Rule>>> {
    let rows = db.query(
        "SELECT schema_name, table_name, grantee_kind, grantee, expression
         FROM sqe_row_filters WHERE catalog_name = $1 ORDER BY filter_name",
        &[catalog],
    )?;
    let mut rules: HashMap<(String, String), Vec<Rule>> = HashMap::new();
    for r in rows.into_iter().filter(|r| r.len() == 5) {
        let t: Vec<String> = r.into_iter().map(Option::unwrap_or_default).collect();
        rules
            .entry((t[0].clone(), t[1].clone()))
            .or_default()
            .push((t[2].clone(), t[3].clone(), t[4].clone()));
    }
    Ok(rules)
}

/// The token's roles and those the catalog grants the caller.
fn caller_roles(
    db: &dyn PolicyDb,
    catalog: &str,
    session: &Session,
) -> SqeResult<BTreeSet<String>> {
    let mut roles: BTreeSet<String> = session.principal.roles.iter().cloned().collect();
    roles.extend(crate::governance::model::granted_roles(
        db,
        catalog,
        &session.principal.name,
    )?);
    Ok(roles)
}

fn external(e: SqeError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// Whether `node` is a row filter or the column masks SQE placed (see [`Engine::apply_policies`]).
fn is_governed(node: &LogicalPlan) -> bool {
    match node {
        LogicalPlan::Extension(e) => e.node.as_any().is::<RowFilterNode>(),
        LogicalPlan::Projection(p) => p.expr.iter().any(crate::governance::column_masks::is_mask),
        _ => false,
    }
}

impl Governance {
    /// `plan` with each scan of a governed table behind its row filters and then its column
    /// masks (see the module docs here and in column_masks.rs). Scans already governed (a view's
    /// body, planned before) are left as they are.
    pub(crate) fn apply_policies(
        &self,
        session: &Session,
        state: &SessionState,
        plan: LogicalPlan,
    ) -> SqeResult<LogicalPlan> {
        let mut governance = StatementPolicies::new(self, session);
        // Set when a mask made a required column nullable: the plan's schemas are then redone.
        let mut nullable = false;
        let plan = plan
            .transform_down_with_subqueries(|node| {
                if is_governed(&node) {
                    return Ok(Transformed::new(node, false, TreeNodeRecursion::Jump));
                }
                let LogicalPlan::TableScan(scan) = &node else {
                    return Ok(Transformed::no(node));
                };
                let Some((object, table)) = self.scanned_object(session, scan) else {
                    return Ok(Transformed::no(node));
                };
                let iceberg = datafusion::datasource::source_as_provider(&scan.source)
                    .ok()
                    .and_then(|p| {
                        p.as_ref()
                            .downcast_ref::<crate::catalog::scan::IcebergScanProvider>()
                            .map(|p| (p.field_ids().clone(), p.table_uuid(), p.current_field_ids()))
                    });
                let expressions = governance.filters_for(&object).map_err(external)?;
                let masks = governance
                    .masks_for(&object, iceberg.as_ref().map(|(_, _, current)| current))
                    .map_err(external)?;
                if expressions.is_empty() && masks.is_empty() {
                    return Ok(Transformed::no(node));
                }
                if table.contains('$') {
                    return Err(external(SqeError::new(
                        ErrorCode::PermissionDenied,
                        format!(
                            "Access Denied: Cannot select from table {}.{}.{table}: a row filter or column mask on {object} applies to you",
                            object.catalog, object.schema
                        ),
                    )));
                }
                let columns = Arc::clone(&scan.projected_schema);
                let mut governed = node;
                if !expressions.is_empty() {
                    crate::admission::record_decision(format!(
                        "row filter on {object}: {}",
                        expressions.join(" AND ")
                    ));
                }
                let mut predicate: Option<Expr> = None;
                for sql in expressions {
                    // The policy's text is its owner's to read: the caller gets a refusal,
                    // the log the details.
                    let expr = state
                        .create_logical_expr(&sql, columns.as_ref())
                        .map_err(|e| {
                            tracing::warn!(object = %object, filter = %sql, error = %e, "row filter cannot be applied");
                            external(SqeError::new(
                                ErrorCode::PermissionDenied,
                                format!("Access Denied: a row filter on {object} applies to you and cannot be applied here (its owner may look into the server's log)"),
                            ))
                        })?;
                    predicate = Some(match predicate {
                        Some(p) => p.and(expr),
                        None => expr,
                    });
                }
                if let Some(predicate) = predicate {
                    governed = LogicalPlan::Extension(datafusion::logical_expr::Extension {
                        node: Arc::new(RowFilterNode {
                            input: governed,
                            predicate,
                        }),
                    });
                }
                if !masks.is_empty() {
                    let Some((ids, table_uuid, _)) = &iceberg else {
                        return Err(external(SqeError::new(
                            ErrorCode::PermissionDenied,
                            format!("Access Denied: the column masks on {object} cannot be applied to this scan"),
                        )));
                    };
                    let key = match masks.values().any(|m| *m == Mask::Hash) {
                        true => governance.hash_key(&object.catalog).map_err(external)?,
                        false => None,
                    };
                    let mut exprs = Vec::with_capacity(columns.fields().len());
                    for (qualifier, field) in columns.iter() {
                        let column = Expr::Column(Column::new(qualifier.cloned(), field.name()));
                        let id = ids.get(field.name());
                        let mask = id.and_then(|id| masks.get(id));
                        let column_key = match (&key, id) {
                            (Some(key), Some(id)) => Some(crate::governance::column_masks::column_hash_key(
                                key, table_uuid, *id,
                            )),
                            _ => None,
                        };
                        // A mask that does not fit the column's type (a tag's, or the column's
                        // type changed since) shows NULL.
                        let fitted = mask.map(|m| match m.fits(field.data_type()) {
                            true => m.clone(),
                            false => Mask::Null,
                        });
                        exprs.push(match &fitted {
                            None => column,
                            Some(mask) => {
                                nullable |= !field.is_nullable();
                                crate::admission::record_decision(format!(
                                    "mask {mask} on {object}.{}",
                                    field.name()
                                ));
                                crate::governance::column_masks::masked(
                                    mask,
                                    column,
                                    field.data_type(),
                                    state,
                                    &columns,
                                    column_key.as_deref(),
                                )
                                .map_err(|e| {
                                    tracing::warn!(object = %object, column = field.name(), mask = %mask, error = %e, "column mask cannot be applied");
                                    external(SqeError::new(
                                        ErrorCode::PermissionDenied,
                                        format!(
                                            "Access Denied: a mask on column '{}' of {object} applies to you and cannot be applied here (its owner may look into the server's log)",
                                            field.name()
                                        ),
                                    ))
                                })?
                                .alias_qualified(qualifier.cloned(), field.name())
                            }
                        });
                    }
                    governed = LogicalPlan::Projection(Projection::try_new(
                        exprs,
                        Arc::new(governed),
                    )?);
                }
                Ok(Transformed::new(governed, true, TreeNodeRecursion::Jump))
            })
            .map(|t| t.data)
            .map_err(crate::error::from_datafusion)?;
        if !nullable {
            return Ok(plan);
        }
        // The nodes above a masked required column still call it NOT NULL: recompute them, or a
        // `c IS NULL` could be folded to false.
        plan.transform_up_with_subqueries(|node| match node {
            LogicalPlan::TableScan(_) => Ok(Transformed::no(node)),
            LogicalPlan::Union(u) => Ok(Transformed::yes(LogicalPlan::Union(
                datafusion::logical_expr::Union::try_new(u.inputs)?,
            ))),
            other => other.recompute_schema().map(Transformed::yes),
        })
        .map(|t| t.data)
        .map_err(crate::error::from_datafusion)
    }
}

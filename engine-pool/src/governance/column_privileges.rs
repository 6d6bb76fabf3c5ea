//! SELECT on single columns: `GRANT SELECT (a, b) ON TABLE t TO {USER | ROLE} x`, `DENY SELECT (c)
//! ON TABLE t TO …`, `REVOKE SELECT (a) ON TABLE t FROM …`.
//!
//! A caller holding SELECT on some columns of a table (and none on the table) sees the table and
//! may read those columns; a column DENY takes one column from a caller who may read the table.
//! The rows are kept by the columns' Iceberg field ids, so a renamed column keeps its grants and a
//! column dropped and added again under its old name starts with none.
//!
//! Which columns a statement reads is known once it is planned: for a caller whose access to a
//! table it reads is by columns, the plan is optimized (DataFusion then projects each scan onto
//! the columns the statement uses, in its output, conditions, joins or aggregates) and every column
//! a scan reads must be theirs; `count(*)` reads none. A plan whose scans the optimizer drops (it
//! can have no rows) is checked on every column it names. Anyone else pays nothing for this.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::execution::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::sqlparser::ast::{GrantObjects, Ident};
use sqe_sessions::{ErrorCode, QueryResult, Session, SqeError, SqeResult};

use super::Governance;
use crate::catalog::scan::IcebergScanProvider;
use crate::governance::model::{ColumnAccess, Object};
use crate::names::resolve_name;

impl Governance {
    /// GRANT / DENY (`effect`) or REVOKE (`None`) of SELECT on `columns` of one table.
    pub(crate) async fn change_column_privileges(
        &self,
        session: &Session,
        grant: bool,
        effect: Option<&str>,
        columns: &[Ident],
        objects: Option<&GrantObjects>,
        grantees: &[(String, String)],
    ) -> SqeResult<QueryResult> {
        let Some(GrantObjects::Tables(names)) = objects else {
            return Err(SqeError::unsupported(
                "SELECT on columns is granted ON TABLE name",
            ));
        };
        let [name] = names.as_slice() else {
            return Err(SqeError::unsupported(
                "SELECT on columns is granted on one table at a time",
            ));
        };
        let (catalog, schema, table) = resolve_name(session, name)?;
        let object = Object::table(&catalog, &schema, &table);
        self.may_change_columns(session, &object, grant)?;
        let (_, _, loaded) = self.mounts.table(session, name).await?;
        let current = loaded.metadata().current_schema().clone();
        let mut field_ids = Vec::with_capacity(columns.len());
        for column in columns {
            let wanted = crate::names::normalize_ident(column);
            let field = current
                .as_struct()
                .fields()
                .iter()
                .find(|f| f.name == wanted)
                .ok_or_else(|| {
                    SqeError::not_found(format!(
                        "column '{wanted}' does not exist in table {object}"
                    ))
                })?;
            field_ids.push(field.id.to_string());
        }
        let handle = self.mounts.bind(session, &catalog)?;
        let db = self.policy_db_of(&catalog, &handle).ok_or_else(|| {
            SqeError::unsupported(format!(
                "catalog '{catalog}' keeps no privileges (only SQLite and PostgreSQL catalogs do)"
            ))
        })?;
        for (kind, grantee) in grantees {
            for id in &field_ids {
                let key = [&catalog, &schema, &table, id, kind, grantee];
                let key: Vec<&str> = key.iter().map(|s| s.as_str()).collect();
                match effect {
                    None => {
                        db.execute(
                            "DELETE FROM sqe_column_privileges WHERE catalog_name = $1
                             AND schema_name = $2 AND table_name = $3 AND field_id = $4
                             AND grantee_kind = $5 AND grantee = $6",
                            &key,
                        )?;
                    }
                    Some(effect) => {
                        let mut row = key.clone();
                        row.push(effect);
                        db.execute(
                            "DELETE FROM sqe_column_privileges WHERE catalog_name = $1
                             AND schema_name = $2 AND table_name = $3 AND field_id = $4
                             AND grantee_kind = $5 AND grantee = $6 AND effect = $7",
                            &row,
                        )?;
                        row.push(&session.principal.name);
                        db.execute(
                            "INSERT INTO sqe_column_privileges (catalog_name, schema_name,
                             table_name, field_id, grantee_kind, grantee, effect, granted_by)
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                            &row,
                        )?;
                    }
                }
            }
        }
        Ok(QueryResult::empty())
    }

    /// Refuses a planned statement that reads a column the caller may not read (see the module
    /// doc).
    pub(crate) fn authorize_columns(
        &self,
        session: &Session,
        state: &SessionState,
        plan: &LogicalPlan,
    ) -> SqeResult<()> {
        if self.is_admin(&session.principal) {
            return Ok(());
        }
        let mut scanned: Vec<(Object, String)> = Vec::new();
        let _ = plan.apply_with_subqueries(|node| {
            if let LogicalPlan::TableScan(scan) = node
                && let Some(found) = self.scanned_object(session, scan)
            {
                scanned.push(found);
            }
            Ok(TreeNodeRecursion::Continue)
        });
        let mut limited: HashMap<String, (Object, ColumnAccess)> = HashMap::new();
        let mut checked: BTreeSet<String> = BTreeSet::new();
        for (object, name) in scanned {
            let key = object.to_string();
            if checked.insert(key.clone())
                && let Some(access) = self.column_access(session, &object)?
            {
                limited.insert(key.clone(), (object.clone(), access));
            }
            // A metadata table (`t$files`) shows every column's bounds: not for a reader by
            // columns.
            if name.contains('$') && limited.contains_key(&key) {
                return Err(SqeError::new(
                    ErrorCode::PermissionDenied,
                    format!(
                        "Access Denied: Cannot select from table {}.{}.{name}: you may read only some columns of {object}",
                        object.catalog, object.schema
                    ),
                ));
            }
        }
        if limited.is_empty() {
            return Ok(());
        }
        let optimized = state
            .optimize(plan)
            .map_err(crate::error::from_datafusion)?;
        let mut refused = self.columns_refused(session, &limited, &optimized);
        // The optimizer drops the scans of a query that can have no rows (`LIMIT 0`, `WHERE
        // false`), whose result still names and types the columns it asks for: such a plan is
        // checked with every column it names, as only the projections are pruned.
        if refused.is_none()
            && self.scans_of(session, &optimized, &limited) < self.scans_of(session, plan, &limited)
        {
            let analyzed = state
                .analyzer()
                .execute_and_check(plan.clone(), state.config_options(), |_, _| {})
                .and_then(|plan| {
                    let rule =
                        datafusion::optimizer::optimize_projections::OptimizeProjections::new();
                    datafusion::optimizer::Optimizer::with_rules(vec![Arc::new(rule)]).optimize(
                        plan,
                        state,
                        |_, _| {},
                    )
                })
                .map_err(crate::error::from_datafusion)?;
            refused = self.columns_refused(session, &limited, &analyzed);
        }
        match refused {
            None => Ok(()),
            Some((object, columns)) => {
                crate::admission::record_decision(format!(
                    "deny SELECT on columns [{}] of {object}",
                    columns.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
                Err(SqeError::new(
                    ErrorCode::PermissionDenied,
                    format!(
                        "Access Denied: Cannot select from columns [{}] in table {object}",
                        columns.into_iter().collect::<Vec<_>>().join(", ")
                    ),
                ))
            }
        }
    }

    /// How many scans of the `limited` tables a plan holds.
    fn scans_of(
        &self,
        session: &Session,
        plan: &LogicalPlan,
        limited: &HashMap<String, (Object, ColumnAccess)>,
    ) -> usize {
        let mut scans = 0;
        let _ = plan.apply_with_subqueries(|node| {
            if let LogicalPlan::TableScan(scan) = node
                && let Some((object, _)) = self.scanned_object(session, scan)
                && limited.contains_key(&object.to_string())
            {
                scans += 1;
            }
            Ok(TreeNodeRecursion::Continue)
        });
        scans
    }

    /// The first scan of a plan (projected onto the columns used) that reads columns of a
    /// `limited` table the caller may not read, and those columns.
    fn columns_refused(
        &self,
        session: &Session,
        limited: &HashMap<String, (Object, ColumnAccess)>,
        plan: &LogicalPlan,
    ) -> Option<(Object, BTreeSet<String>)> {
        let mut refused = None;
        let _ = plan.apply_with_subqueries(|node| {
            let LogicalPlan::TableScan(scan) = node else {
                return Ok(TreeNodeRecursion::Continue);
            };
            let Some((object, _)) = self.scanned_object(session, scan) else {
                return Ok(TreeNodeRecursion::Continue);
            };
            let Some((_, access)) = limited.get(&object.to_string()) else {
                return Ok(TreeNodeRecursion::Continue);
            };
            let source = scan.source.schema();
            let mut read: BTreeSet<String> = match &scan.projection {
                Some(indices) => indices
                    .iter()
                    .map(|i| source.field(*i).name().clone())
                    .collect(),
                None => source.fields().iter().map(|f| f.name().clone()).collect(),
            };
            for filter in &scan.filters {
                read.extend(filter.column_refs().into_iter().map(|c| c.name.clone()));
            }
            let ids = datafusion::datasource::source_as_provider(&scan.source)
                .ok()
                .and_then(|p| {
                    p.as_ref()
                        .downcast_ref::<IcebergScanProvider>()
                        .map(|p| p.field_ids().clone())
                })
                .unwrap_or_default();
            let denied: BTreeSet<String> = read
                .into_iter()
                .filter(|c| !ids.get(c).is_some_and(|id| access.reads(*id)))
                .collect();
            if !denied.is_empty() {
                refused = Some((object, denied));
                return Ok(TreeNodeRecursion::Stop);
            }
            Ok(TreeNodeRecursion::Continue)
        });
        refused
    }

    /// The catalog table a scan reads (through SQE's time-travel name too) and the name scanned
    /// (`t$files` for a metadata table of `t`); None for what is no catalog table (`system`,
    /// `information_schema`, files).
    pub(crate) fn scanned_object(
        &self,
        session: &Session,
        scan: &datafusion::logical_expr::TableScan,
    ) -> Option<(Object, String)> {
        let provider = datafusion::datasource::source_as_provider(&scan.source).ok();
        let iceberg = provider
            .as_ref()
            .and_then(|p| p.as_ref().downcast_ref::<IcebergScanProvider>());
        let (catalog, schema, table) = match iceberg.and_then(|p| p.origin()) {
            Some(origin) => origin,
            None => {
                let full = scan
                    .table_name
                    .clone()
                    .resolve(&session.catalog, &session.schema);
                (
                    full.catalog.to_string(),
                    full.schema.to_string(),
                    full.table.to_string(),
                )
            }
        };
        // A catalog's tables are Iceberg scans, its metadata tables `t$…`; anything else (a file
        // read as `?table?`) is none.
        if (iceberg.is_none() && !table.contains('$'))
            || catalog == crate::names::QUERY_CATALOG
            || catalog == "system"
            || schema == "information_schema"
            || self.mounts.mount(session, &catalog).is_err()
        {
            return None;
        }
        let base = table.split('$').next().unwrap_or(&table);
        Some((Object::table(&catalog, &schema, base), table.clone()))
    }
}

//! Whether a caller may do what a statement asks, decided before it is planned: reading the tables
//! and views it names, writing, creating, dropping, altering; and what listings show them.

use std::collections::BTreeSet;

use datafusion::sql::sqlparser::ast::Statement;
use sqe_sessions::{ErrorCode, Session, SqeError, SqeResult};

use super::Governance;
use super::model::{ColumnAccess, Object, Privilege, decide};
use crate::names::resolve_name;

impl Governance {
    /// Refuses `privilege` on `object` unless the caller holds it. `absent` is the error for an
    /// object the caller may not see at all (the one they would get if it did not exist).
    pub(crate) fn authorize(
        &self,
        session: &Session,
        privilege: Privilege,
        object: &Object,
        absent: impl FnOnce() -> SqeError,
    ) -> SqeResult<()> {
        let Some((policies, who)) = self.policies_for(session, &object.catalog)? else {
            return Ok(());
        };
        decide(&policies, &who, privilege, object, absent)
    }

    /// Refuses reading `object` unless the caller holds SELECT on it or on some of its columns
    /// (whose use [`Engine::authorize_columns`] checks once the statement is planned).
    pub(crate) fn authorize_read(
        &self,
        session: &Session,
        object: &Object,
        absent: impl FnOnce() -> SqeError,
    ) -> SqeResult<()> {
        let Some((policies, who)) = self.policies_for(session, &object.catalog)? else {
            return Ok(());
        };
        if !policies.allows(&who, Privilege::Select, object) && policies.reads_some(&who, object) {
            crate::admission::record_decision(format!("allow SELECT on columns of {object}"));
            return Ok(());
        }
        decide(&policies, &who, Privilege::Select, object, absent)
    }

    /// What the caller may read of `object` where it is not all of it.
    pub(crate) fn column_access(
        &self,
        session: &Session,
        object: &Object,
    ) -> SqeResult<Option<ColumnAccess>> {
        Ok(self
            .policies_for(session, &object.catalog)?
            .and_then(|(policies, who)| policies.column_access(&who, object)))
    }

    /// Whether the caller may grant (`grant`) or deny and revoke SELECT on `object`'s columns; the
    /// error to give when not.
    pub(crate) fn may_change_columns(
        &self,
        session: &Session,
        object: &Object,
        grant: bool,
    ) -> SqeResult<()> {
        let Some((policies, who)) = self.policies_for(session, &object.catalog)? else {
            return Ok(());
        };
        let allowed = match grant {
            true => policies.may_grant(&who, Privilege::Select, object),
            false => policies.owns(&who, object),
        };
        if allowed {
            return Ok(());
        }
        if !policies.visible(&who, object) {
            return Err(SqeError::not_found(format!(
                "table '{object}' does not exist"
            )));
        }
        Err(SqeError::new(
            ErrorCode::PermissionDenied,
            format!(
                "Access Denied: Cannot {} privileges on {object}",
                if grant { "grant" } else { "change" }
            ),
        ))
    }

    /// Refuses anyone but the object's owner and the admins (`absent` when they cannot see it).
    pub(crate) fn authorize_owner(
        &self,
        session: &Session,
        object: &Object,
        absent: impl FnOnce() -> SqeError,
    ) -> SqeResult<()> {
        let Some((policies, who)) = self.policies_for(session, &object.catalog)? else {
            return Ok(());
        };
        if policies.owns(&who, object) {
            return Ok(());
        }
        if object.table.is_some() && !policies.visible(&who, object) {
            return Err(absent());
        }
        Err(SqeError::new(
            ErrorCode::PermissionDenied,
            format!("Access Denied: only the owner of {object} or an admin may do this"),
        ))
    }

    /// The names among `tables` (of one schema) the caller may see.
    pub(crate) fn visible_tables(
        &self,
        session: &Session,
        catalog: &str,
        schema: &str,
        tables: Vec<String>,
    ) -> SqeResult<Vec<String>> {
        let Some((policies, who)) = self.policies_for(session, catalog)? else {
            return Ok(tables);
        };
        Ok(tables
            .into_iter()
            .filter(|t| policies.visible(&who, &Object::table(catalog, schema, t)))
            .collect())
    }

    /// Checks, before a statement is planned, that the caller may read every table and view it
    /// names (in subqueries and CTEs too; a view's own body is checked when it is planned, in its
    /// schema), so that planning never describes a table the caller may not see. Tables SQE
    /// resolved itself, `information_schema` and `system` are not catalog tables. `EXPLAIN INSERT`
    /// needs INSERT on its target as well.
    pub(crate) fn authorize_statement(
        &self,
        session: &Session,
        state: &datafusion::execution::SessionState,
        statement: &datafusion::sql::parser::Statement,
    ) -> SqeResult<()> {
        if self.is_admin(&session.principal) {
            return Ok(());
        }
        let names = state
            .resolve_table_references(statement)
            .map_err(crate::error::from_datafusion)?;
        let functions = table_function_calls(statement);
        for name in names {
            // `generate_series(1, 10)` is a function's rows, no table (unless the statement also
            // names a table of that name).
            if functions.contains(&name.to_string()) {
                continue;
            }
            let full = name.resolve(&session.catalog, &session.schema);
            let (catalog, schema, table) = (&*full.catalog, &*full.schema, &*full.table);
            if catalog == crate::names::QUERY_CATALOG
                || catalog == "system"
                || schema == "information_schema"
                || self.mounts.mount(session, catalog).is_err()
            {
                continue;
            }
            // A metadata table (`t$files`) is its table's.
            let base = table.split('$').next().unwrap_or(table);
            let object = Object::table(catalog, schema, base);
            self.authorize_read(session, &object, || {
                SqeError::not_found(format!("table '{catalog}.{schema}.{table}' not found"))
            })?;
        }
        if let datafusion::sql::parser::Statement::Statement(inner) = statement
            && let Statement::Explain { statement, .. } = inner.as_ref()
            && let Statement::Insert(insert) = statement.as_ref()
            && let datafusion::sql::sqlparser::ast::TableObject::TableName(name) = &insert.table
        {
            let (catalog, schema, table) = resolve_name(session, name)?;
            let object = Object::table(&catalog, &schema, &table);
            self.authorize(session, Privilege::Insert, &object, || {
                SqeError::not_found(format!("table '{object}' not found"))
            })?;
        }
        Ok(())
    }

    /// Refuses to describe a table or view the caller holds no privilege on, as if it did not
    /// exist (`absent`).
    pub(crate) fn authorize_visible(
        &self,
        session: &Session,
        object: &Object,
        absent: impl FnOnce() -> SqeError,
    ) -> SqeResult<()> {
        match self.policies_for(session, &object.catalog)? {
            Some((policies, who)) if !policies.visible(&who, object) => Err(absent()),
            _ => Ok(()),
        }
    }
}

/// The names a statement calls as table functions (`FROM generate_series(1, 10)`) and never
/// reads as tables.
fn table_function_calls(statement: &datafusion::sql::parser::Statement) -> BTreeSet<String> {
    use datafusion::sql::sqlparser::ast::{TableFactor, Visit, Visitor};
    use std::ops::ControlFlow;
    #[derive(Default)]
    struct Calls {
        functions: BTreeSet<String>,
        tables: BTreeSet<String>,
    }
    impl Visitor for Calls {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table { name, args, .. } = factor {
                let text = crate::names::object_parts(name)
                    .map(|p| p.join("."))
                    .unwrap_or_default();
                match args {
                    Some(_) => self.functions.insert(text),
                    None => self.tables.insert(text),
                };
            }
            ControlFlow::Continue(())
        }
    }
    let datafusion::sql::parser::Statement::Statement(inner) = statement else {
        return BTreeSet::new();
    };
    let mut calls = Calls::default();
    let _ = inner.visit(&mut calls);
    calls.functions.difference(&calls.tables).cloned().collect()
}

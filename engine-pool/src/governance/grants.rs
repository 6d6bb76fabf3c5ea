//! The statements that change privileges and roles, and SHOW GRANTS: `GRANT`, `DENY`, `REVOKE`
//! (on catalogs, schemas, tables and, for SELECT, columns), `CREATE ROLE`, `DROP ROLE`, `GRANT
//! ROLE … TO USER …`. See model.rs for what they mean.

use datafusion::sql::sqlparser::ast::{
    Action, GrantObjects, Grantee, GranteeName, GranteesType, ObjectName, Privileges, Statement,
};
use sqe_sessions::{ErrorCode, QueryResult, Session, SqeError, SqeResult};

use super::Governance;
use super::model::{GRANTABLE, Object, Policies, Privilege, role_exists};
use crate::catalog::policy_store::PolicyDb;
use crate::names::{resolve_name, schema_name};

impl Governance {
    /// GRANT, REVOKE, DENY (privileges and roles), CREATE ROLE.
    pub(crate) async fn run_access_statement(
        &self,
        session: &Session,
        statement: &Statement,
    ) -> SqeResult<QueryResult> {
        match statement {
            Statement::Grant(g) => match &g.privileges {
                Privileges::Actions(actions)
                    if actions.iter().all(|a| matches!(a, Action::Role { .. })) =>
                {
                    self.role_members(session, actions, &g.grantees, true)
                }
                _ => {
                    self.change_privileges(
                        session,
                        Change::Grant {
                            grant_option: g.with_grant_option,
                        },
                        &g.privileges,
                        g.objects.as_ref(),
                        &g.grantees,
                    )
                    .await
                }
            },
            Statement::Deny(d) => {
                self.change_privileges(
                    session,
                    Change::Deny,
                    &d.privileges,
                    Some(&d.objects),
                    &d.grantees,
                )
                .await
            }
            Statement::Revoke(r) => match &r.privileges {
                Privileges::Actions(actions)
                    if actions.iter().all(|a| matches!(a, Action::Role { .. })) =>
                {
                    self.role_members(session, actions, &r.grantees, false)
                }
                _ => {
                    self.change_privileges(
                        session,
                        Change::Revoke,
                        &r.privileges,
                        r.objects.as_ref(),
                        &r.grantees,
                    )
                    .await
                }
            },
            Statement::CreateRole(c) => c
                .names
                .iter()
                .try_for_each(|n| self.create_role(session, n, c.if_not_exists))
                .map(|_| QueryResult::empty()),
            other => Err(SqeError::internal(format!(
                "not a privilege statement: {}",
                other.to_string().chars().take(40).collect::<String>()
            ))),
        }
    }

    /// The database of the session's catalog, for roles; refused where the catalog keeps none.
    fn role_db(&self, session: &Session) -> SqeResult<crate::catalog::backend::CatalogRef> {
        if !self.is_admin(&session.principal) {
            return Err(SqeError::new(
                ErrorCode::PermissionDenied,
                "Access Denied: only an admin manages roles",
            ));
        }
        let handle = self.mounts.bind(session, &session.catalog)?;
        if self.policy_db_of(&session.catalog, &handle).is_none() {
            return Err(self.no_policies(&session.catalog));
        }
        Ok(handle)
    }

    fn create_role(
        &self,
        session: &Session,
        name: &ObjectName,
        if_not_exists: bool,
    ) -> SqeResult<()> {
        let role = single_name(name, "role")?;
        let handle = self.role_db(session)?;
        let db = self
            .policy_db_of(&session.catalog, &handle)
            .ok_or_else(|| self.no_policies(&session.catalog))?;
        if role_exists(db, &session.catalog, &role)? {
            if if_not_exists {
                return Ok(());
            }
            return Err(SqeError::already_exists(format!(
                "role '{role}' already exists"
            )));
        }
        db.execute(
            "INSERT INTO sqe_roles (catalog_name, role_name) VALUES ($1, $2)",
            &[&session.catalog, &role],
        )?;
        Ok(())
    }

    /// `DROP ROLE r`: the role, its members and its privileges.
    pub(crate) fn drop_role(
        &self,
        session: &Session,
        name: &ObjectName,
        if_exists: bool,
    ) -> SqeResult<()> {
        let role = single_name(name, "role")?;
        let handle = self.role_db(session)?;
        let db = self
            .policy_db_of(&session.catalog, &handle)
            .ok_or_else(|| self.no_policies(&session.catalog))?;
        if !role_exists(db, &session.catalog, &role)? {
            if if_exists {
                return Ok(());
            }
            return Err(SqeError::not_found(format!("role '{role}' does not exist")));
        }
        let catalog = session.catalog.as_str();
        db.execute(
            "DELETE FROM sqe_roles WHERE catalog_name = $1 AND role_name = $2",
            &[catalog, &role],
        )?;
        db.execute(
            "DELETE FROM sqe_role_members WHERE catalog_name = $1 AND role_name = $2",
            &[catalog, &role],
        )?;
        db.execute(
            "DELETE FROM sqe_privileges WHERE catalog_name = $1 AND grantee_kind = 'role' AND grantee = $2",
            &[catalog, &role],
        )?;
        Ok(())
    }

    /// `GRANT ROLE r TO USER u` and `REVOKE ROLE r FROM USER u`.
    fn role_members(
        &self,
        session: &Session,
        actions: &[Action],
        grantees: &[Grantee],
        add: bool,
    ) -> SqeResult<QueryResult> {
        let handle = self.role_db(session)?;
        let db = self
            .policy_db_of(&session.catalog, &handle)
            .ok_or_else(|| self.no_policies(&session.catalog))?;
        let catalog = session.catalog.as_str();
        for action in actions {
            let Action::Role { role } = action else {
                continue;
            };
            let role = single_name(role, "role")?;
            if !role_exists(db, catalog, &role)? {
                return Err(SqeError::not_found(format!("role '{role}' does not exist")));
            }
            for grantee in grantees {
                let (kind, member) = grantee_of(grantee)?;
                if kind != "user" {
                    return Err(SqeError::unsupported("roles are granted to users only"));
                }
                db.execute(
                    "DELETE FROM sqe_role_members WHERE catalog_name = $1 AND role_name = $2 AND member = $3",
                    &[catalog, &role, &member],
                )?;
                if add {
                    db.execute(
                        "INSERT INTO sqe_role_members (catalog_name, role_name, member) VALUES ($1, $2, $3)",
                        &[catalog, &role, &member],
                    )?;
                }
            }
        }
        Ok(QueryResult::empty())
    }

    async fn change_privileges(
        &self,
        session: &Session,
        change: Change,
        privileges: &Privileges,
        objects: Option<&GrantObjects>,
        grantees: &[Grantee],
    ) -> SqeResult<QueryResult> {
        if let Privileges::Actions(actions) = privileges
            && let [
                Action::Select {
                    columns: Some(columns),
                },
            ] = actions.as_slice()
        {
            let grant = matches!(change, Change::Grant { .. });
            let grant_option = matches!(change, Change::Grant { grant_option: true });
            let effect = match change {
                Change::Grant { .. } => Some("grant"),
                Change::Deny => Some("deny"),
                Change::Revoke => None,
            };
            if grant_option {
                return Err(SqeError::unsupported(
                    "privileges on columns are granted without GRANT OPTION",
                ));
            }
            let grantees = grantees
                .iter()
                .map(grantee_of)
                .collect::<SqeResult<Vec<_>>>()?;
            return self
                .change_column_privileges(session, grant, effect, columns, objects, &grantees)
                .await;
        }
        let privileges = privileges_of(privileges)?;
        let objects = self.objects_of(session, objects)?;
        let grantees = grantees
            .iter()
            .map(grantee_of)
            .collect::<SqeResult<Vec<_>>>()?;
        for object in &objects {
            let handle = self.mounts.bind(session, &object.catalog)?;
            let db = self
                .policy_db_of(&object.catalog, &handle)
                .ok_or_else(|| self.no_policies(&object.catalog))?;
            self.check_exists(session, object).await?;
            // Who may: an admin, the owner, or (to grant) one holding the privilege WITH GRANT
            // OPTION; DENY and REVOKE are the owner's and the admins'.
            if let Some((policies, who)) = self.policies_for(session, &object.catalog)? {
                let allowed = privileges.iter().all(|p| match change {
                    Change::Grant { .. } => policies.may_grant(&who, *p, object),
                    _ => policies.owns(&who, object),
                });
                if !allowed {
                    if object.table.is_some() && !policies.visible(&who, object) {
                        return Err(SqeError::not_found(format!(
                            "table '{object}' does not exist"
                        )));
                    }
                    return Err(SqeError::new(
                        ErrorCode::PermissionDenied,
                        format!(
                            "Access Denied: Cannot {} privileges on {object}",
                            change.verb()
                        ),
                    ));
                }
            }
            let (schema, table) = object.key();
            for (grantee_kind, grantee) in &grantees {
                for privilege in &privileges {
                    let base: [&str; 6] = [
                        &object.catalog,
                        &schema,
                        &table,
                        grantee_kind,
                        grantee,
                        privilege.name(),
                    ];
                    match change {
                        Change::Revoke => {
                            db.execute(
                                "DELETE FROM sqe_privileges WHERE catalog_name = $1 AND schema_name = $2
                                 AND table_name = $3 AND grantee_kind = $4 AND grantee = $5 AND privilege = $6",
                                &base,
                            )?;
                        }
                        Change::Grant { grant_option } => put_privilege(
                            db,
                            &base,
                            "grant",
                            grant_option,
                            &session.principal.name,
                        )?,
                        Change::Deny => {
                            put_privilege(db, &base, "deny", false, &session.principal.name)?
                        }
                    }
                }
            }
        }
        Ok(QueryResult::empty())
    }

    /// The schemas and tables a GRANT names, qualified by the session's catalog and schema.
    fn objects_of(
        &self,
        session: &Session,
        objects: Option<&GrantObjects>,
    ) -> SqeResult<Vec<Object>> {
        match objects {
            Some(GrantObjects::Tables(names)) => names
                .iter()
                .map(|n| {
                    let (c, s, t) = resolve_name(session, n)?;
                    Ok(Object::table(&c, &s, &t))
                })
                .collect(),
            Some(GrantObjects::Schemas(names)) => names
                .iter()
                .map(|n| {
                    let (c, s) = schema_name(session, n)?;
                    Ok(Object::schema(&c, &s))
                })
                .collect(),
            // `ON CATALOG c`, which the parser knows as `ON DATABASE c` (see `grant_words`).
            Some(GrantObjects::Databases(names)) => names
                .iter()
                .map(|n| {
                    let name = single_name(n, "catalog")?;
                    self.mounts.mount(session, &name).map_err(|_| {
                        SqeError::not_found(format!("catalog '{name}' does not exist"))
                    })?;
                    Ok(Object::catalog(&name))
                })
                .collect(),
            _ => Err(SqeError::unsupported(
                "privileges are granted ON TABLE name, ON SCHEMA name or ON CATALOG name",
            )),
        }
    }

    /// Refuses a grant on a schema or table that does not exist.
    async fn check_exists(&self, session: &Session, object: &Object) -> SqeResult<()> {
        let handle = self.mounts.bind(session, &object.catalog)?;
        if object.schema.is_empty() {
            return Ok(());
        }
        let ns = iceberg::NamespaceIdent::new(object.schema.clone());
        let exists = match &object.table {
            None => handle.namespace_exists(&ns).await,
            Some(t) => {
                let ident = iceberg::TableIdent::new(ns, t.clone());
                match handle.table_exists(&ident).await {
                    Ok(true) => Ok(true),
                    Ok(false) if handle.supports_views() => handle.view_exists(&ident).await,
                    other => other,
                }
            }
        }
        .map_err(crate::error::from_iceberg)?;
        if exists {
            return Ok(());
        }
        let kind = if object.table.is_some() {
            "table"
        } else {
            "schema"
        };
        Err(SqeError::not_found(format!(
            "{kind} '{object}' does not exist"
        )))
    }

    /// `SHOW GRANTS [ON TABLE t | ON SCHEMA s]`: the privileges of the session's catalog (an
    /// admin's view: all of them; anyone else's: their own and their roles', and those on what
    /// they own).
    pub(crate) fn show_grants(
        &self,
        session: &Session,
        on: Option<&GrantObjects>,
    ) -> SqeResult<QueryResult> {
        let on = match on {
            Some(objects) => self.objects_of(session, Some(objects))?.pop(),
            None => None,
        };
        let catalog = on
            .as_ref()
            .map_or(session.catalog.clone(), |o| o.catalog.clone());
        let handle = self.mounts.bind(session, &catalog)?;
        let db = self
            .policy_db_of(&catalog, &handle)
            .ok_or_else(|| self.no_policies(&catalog))?;
        let who = self.who(session, Some(db), &catalog)?;
        let policies = Policies::read(db, &catalog, self.default)?;
        let mut rows: Vec<Vec<String>> = policies
            .grants
            .iter()
            .filter(|g| {
                let (schema, table) = &g.object;
                let on = Object {
                    catalog: catalog.clone(),
                    schema: schema.clone(),
                    table: (!table.is_empty()).then(|| table.clone()),
                };
                // An admin sees every grant; the owner of a table or schema those on it; anyone
                // else those to them and their roles.
                who.admin
                    || (!schema.is_empty() && policies.owns(&who, &on))
                    || match g.grantee.0.as_str() {
                        "user" => g.grantee.1 == who.name,
                        _ => who.roles.contains(&g.grantee.1),
                    }
            })
            .filter(|g| on.as_ref().is_none_or(|o| g.object == o.key()))
            .map(|g| {
                let (schema, table) = g.object.clone();
                vec![
                    g.grantee.1.clone(),
                    g.grantee.0.to_uppercase(),
                    catalog.clone(),
                    schema,
                    table,
                    if g.deny { "DENY" } else { "GRANT" }.to_string() + " " + g.privilege.name(),
                    if g.grant_option { "YES" } else { "NO" }.to_string(),
                ]
            })
            .collect();
        rows.sort();
        QueryResult::text(
            &[
                "Grantee",
                "Grantee Type",
                "Catalog",
                "Schema",
                "Table",
                "Privilege",
                "Grantable",
            ],
            &rows,
        )
    }
}

#[derive(Debug, Clone, Copy)]
enum Change {
    Grant { grant_option: bool },
    Revoke,
    Deny,
}

impl Change {
    fn verb(self) -> &'static str {
        match self {
            Change::Grant { .. } => "grant",
            Change::Revoke => "revoke",
            Change::Deny => "deny",
        }
    }
}

fn put_privilege(
    db: &dyn PolicyDb,
    base: &[&str; 6],
    effect: &str,
    grant_option: bool,
    by: &str,
) -> SqeResult<()> {
    db.execute(
        "DELETE FROM sqe_privileges WHERE catalog_name = $1 AND schema_name = $2 AND table_name = $3
         AND grantee_kind = $4 AND grantee = $5 AND privilege = $6 AND effect = $7",
        &[base[0], base[1], base[2], base[3], base[4], base[5], effect],
    )?;
    let option = if grant_option { "true" } else { "false" };
    db.execute(
        "INSERT INTO sqe_privileges (catalog_name, schema_name, table_name, grantee_kind, grantee,
         privilege, effect, grant_option, granted_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            base[0], base[1], base[2], base[3], base[4], base[5], effect, option, by,
        ],
    )?;
    Ok(())
}

/// A one-part name (a role, a user), at most 255 characters.
fn single_name(name: &ObjectName, what: &str) -> SqeResult<String> {
    let parts = crate::names::object_parts(name)?;
    match parts.as_slice() {
        [one] if !one.is_empty() && one.len() <= 255 => Ok(one.clone()),
        _ => Err(SqeError::invalid(format!(
            "'{name}' is not a valid {what} name"
        ))),
    }
}

/// ("user" | "role", name) of a grantee; a bare name is a user, as in Trino.
fn grantee_of(grantee: &Grantee) -> SqeResult<(String, String)> {
    let kind = match grantee.grantee_type {
        GranteesType::User | GranteesType::None => "user",
        GranteesType::Role => "role",
        _ => {
            return Err(SqeError::unsupported(format!(
                "privileges go to a USER or a ROLE, not to {grantee}"
            )));
        }
    };
    let Some(GranteeName::ObjectName(name)) = &grantee.name else {
        return Err(SqeError::invalid(format!(
            "'{grantee}' is not a user or role name"
        )));
    };
    Ok((kind.to_string(), single_name(name, kind)?))
}

fn privileges_of(privileges: &Privileges) -> SqeResult<Vec<Privilege>> {
    match privileges {
        Privileges::All { .. } => Ok(GRANTABLE.to_vec()),
        Privileges::Actions(actions) => actions
            .iter()
            .map(|a| match a {
                Action::Select { columns: None } => Ok(Privilege::Select),
                Action::Insert { columns: None } => Ok(Privilege::Insert),
                Action::Update { columns: None } => Ok(Privilege::Update),
                Action::Delete => Ok(Privilege::Delete),
                Action::Drop => Ok(Privilege::Drop),
                Action::Create { obj_type: None } => Ok(Privilege::Create),
                // ALTER, which the parser does not know, spelled MODIFY (see `grant_words`).
                Action::Modify { modify_type: None } => Ok(Privilege::Alter),
                Action::Select { .. } => Err(SqeError::unsupported(
                    "SELECT on columns is granted on its own: GRANT SELECT (a, b) ON TABLE t TO …",
                )),
                Action::Insert { .. } | Action::Update { .. } => Err(SqeError::unsupported(
                    "only SELECT is granted on columns",
                )),
                other => Err(SqeError::unsupported(format!(
                    "privilege {other} is not supported (SELECT, INSERT, UPDATE, DELETE, DROP, CREATE, ALTER, ALL PRIVILEGES)"
                ))),
            })
            .collect(),
    }
}

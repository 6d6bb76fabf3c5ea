//! Who may do what to which table: privileges granted, revoked and denied with SQL, kept in the
//! catalog's own database beside its tables, and checked on every statement's path.
//!
//! - **Privileges** `SELECT`, `INSERT`, `UPDATE`, `DELETE`, `DROP`, `CREATE` (on a schema: making
//!   tables and views in it) and `ALL PRIVILEGES`, on a catalog (every schema in it: `ON CATALOG
//!   c`), a schema (every table in it) or a table, to a user or a role: `GRANT SELECT ON TABLE s.t
//!   TO USER bob`, `GRANT ALL PRIVILEGES ON SCHEMA s TO ROLE analyst WITH GRANT OPTION`, `REVOKE
//!   …`, `DENY …`. A DENY wins over every GRANT. SELECT on single columns: column_privileges.rs.
//! - **Roles** come from the token (its roles/groups claim) or from the catalog:
//!   `CREATE ROLE analyst`, `GRANT ROLE analyst TO USER bob`, `REVOKE ROLE …`, `DROP ROLE …`.
//! - **Owners**: whoever creates a schema, table or view owns it and may do anything to it,
//!   including granting on it. The engine's admin roles (`[auth] admin_roles`) may do anything
//!   anywhere; without admin roles and with `[access] default = "allow"` (the embedded shell, a
//!   loopback server) everyone is an admin, as before.
//! - **Nothing granted, nothing seen**: a table on which a user holds no privilege at all is
//!   absent for them (`table '…' not found`; missing from `SHOW TABLES`, `information_schema`,
//!   `system.jdbc` and Flight's GetTables; not described by `DESCRIBE` or `SHOW CREATE`); a table
//!   they can see but not read gets `Access Denied: Cannot select from table …`.
//! - **The default** for what no row decides is `[access] default`: `allow` (the embedded shell)
//!   or `deny`.
//!
//! Reads are checked on the table names of each statement before it is planned (in subqueries,
//! CTEs and the views it reads, whose bodies are checked when they are planned, with the reader's
//! rights in the view's schema), so that no planner error describes a hidden table; time travel
//! and COPY, which SQE plans itself, are checked on their own. Row filters: row_filters.rs; column
//! masks: column_masks.rs.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use datafusion::arrow::array::StringArray;
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::sql::sqlparser::ast::{
    Action, GrantObjects, Grantee, GranteeName, GranteesType, ObjectName, Privileges, Statement,
};
use sqe_sessions::{ErrorCode, QueryResult, Session, SqeError, SqeResult};

use crate::engine::Engine;
use crate::names::{resolve_name, schema_name};

/// What no privilege row decides: `[access] default`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AccessDefault {
    /// Everything not denied is allowed (the embedded shell; a server without `[access]`).
    #[default]
    Allow,
    /// Nothing not granted is allowed.
    Deny,
}

/// What a privilege allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Privilege {
    Select,
    Insert,
    Update,
    Delete,
    Drop,
    Create,
    /// Changing a table's definition (columns, properties, name). Masks, tags and row filters
    /// stay their owner's: ALTER does not let anyone unmask a column.
    Alter,
}

/// The privileges `ALL PRIVILEGES` stands for.
const GRANTABLE: [Privilege; 7] = [
    Privilege::Select,
    Privilege::Insert,
    Privilege::Update,
    Privilege::Delete,
    Privilege::Drop,
    Privilege::Create,
    Privilege::Alter,
];

impl Privilege {
    fn name(self) -> &'static str {
        match self {
            Privilege::Select => "SELECT",
            Privilege::Insert => "INSERT",
            Privilege::Update => "UPDATE",
            Privilege::Delete => "DELETE",
            Privilege::Drop => "DROP",
            Privilege::Create => "CREATE",
            Privilege::Alter => "ALTER",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        GRANTABLE.into_iter().find(|p| p.name() == name)
    }

    /// Trino's words for a refusal: "Cannot select from table c.s.t".
    fn refusal(self, object: &Object) -> String {
        let target = object.to_string();
        let kind = if object.table.is_some() {
            "table"
        } else {
            "schema"
        };
        let what = match self {
            Privilege::Select => format!("select from {kind} {target}"),
            Privilege::Insert => format!("insert into {kind} {target}"),
            Privilege::Update => format!("update {kind} {target}"),
            Privilege::Delete => format!("delete from {kind} {target}"),
            Privilege::Drop => format!("drop {kind} {target}"),
            Privilege::Create => format!("create tables in schema {target}"),
            Privilege::Alter => format!("alter {kind} {target}"),
        };
        format!("Access Denied: Cannot {what}")
    }
}

/// A schema (no table) or a table of a catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Object {
    pub catalog: String,
    pub schema: String,
    pub table: Option<String>,
}

impl Object {
    pub(crate) fn table(catalog: &str, schema: &str, table: &str) -> Self {
        Self {
            catalog: catalog.to_string(),
            schema: schema.to_string(),
            table: Some(table.to_string()),
        }
    }

    /// A whole catalog (its key: no schema, no table).
    pub(crate) fn catalog(catalog: &str) -> Self {
        Self {
            catalog: catalog.to_string(),
            schema: String::new(),
            table: None,
        }
    }

    pub(crate) fn schema(catalog: &str, schema: &str) -> Self {
        Self {
            catalog: catalog.to_string(),
            schema: schema.to_string(),
            table: None,
        }
    }

    /// The row key in the policy tables: the schema, and the table or `''` for the schema itself
    /// (kept apart: a schema or table name may hold a dot).
    fn key(&self) -> (String, String) {
        (self.schema.clone(), self.table.clone().unwrap_or_default())
    }
}

impl std::fmt::Display for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.table {
            Some(t) => write!(f, "{}.{}.{t}", self.catalog, self.schema),
            None if self.schema.is_empty() => write!(f, "{}", self.catalog),
            None => write!(f, "{}.{}", self.catalog, self.schema),
        }
    }
}

/// A catalog's database, as the policy tables need it: text in, text out (`$1`, `$2`, …).
pub trait PolicyDb: Send + Sync {
    fn query(&self, sql: &str, args: &[&str]) -> SqeResult<Vec<Vec<Option<String>>>>;
    fn execute(&self, sql: &str, args: &[&str]) -> SqeResult<u64>;
}

/// SQE's tables in a catalog's database (pyiceberg ignores them).
pub const POLICY_TABLES: &str = "CREATE TABLE IF NOT EXISTS sqe_privileges (
        catalog_name VARCHAR(255) NOT NULL,
        schema_name VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL,
        grantee_kind VARCHAR(8) NOT NULL,
        grantee VARCHAR(255) NOT NULL,
        privilege VARCHAR(16) NOT NULL,
        effect VARCHAR(8) NOT NULL,
        grant_option VARCHAR(5) NOT NULL,
        granted_by VARCHAR(255) NOT NULL,
        PRIMARY KEY (catalog_name, schema_name, table_name, grantee_kind, grantee, privilege, effect));
    CREATE TABLE IF NOT EXISTS sqe_owners (
        catalog_name VARCHAR(255) NOT NULL,
        schema_name VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL,
        owner VARCHAR(255) NOT NULL,
        PRIMARY KEY (catalog_name, schema_name, table_name));
    CREATE TABLE IF NOT EXISTS sqe_roles (
        catalog_name VARCHAR(255) NOT NULL,
        role_name VARCHAR(255) NOT NULL,
        PRIMARY KEY (catalog_name, role_name));
    CREATE TABLE IF NOT EXISTS sqe_role_members (
        catalog_name VARCHAR(255) NOT NULL,
        role_name VARCHAR(255) NOT NULL,
        member VARCHAR(255) NOT NULL,
        PRIMARY KEY (catalog_name, role_name, member));
    CREATE TABLE IF NOT EXISTS sqe_row_filters (
        catalog_name VARCHAR(255) NOT NULL,
        schema_name VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL,
        filter_name VARCHAR(255) NOT NULL,
        grantee_kind VARCHAR(8) NOT NULL,
        grantee VARCHAR(255) NOT NULL,
        expression VARCHAR(4000) NOT NULL,
        PRIMARY KEY (catalog_name, schema_name, table_name, filter_name));
    CREATE TABLE IF NOT EXISTS sqe_column_masks (
        catalog_name VARCHAR(255) NOT NULL,
        schema_name VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL,
        field_id VARCHAR(16) NOT NULL,
        grantee_kind VARCHAR(8) NOT NULL,
        grantee VARCHAR(255) NOT NULL,
        mask_kind VARCHAR(16) NOT NULL,
        argument VARCHAR(4000) NOT NULL,
        PRIMARY KEY (catalog_name, schema_name, table_name, field_id, grantee_kind, grantee));
    CREATE TABLE IF NOT EXISTS sqe_column_privileges (
        catalog_name VARCHAR(255) NOT NULL,
        schema_name VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL,
        field_id VARCHAR(16) NOT NULL,
        grantee_kind VARCHAR(8) NOT NULL,
        grantee VARCHAR(255) NOT NULL,
        effect VARCHAR(8) NOT NULL,
        granted_by VARCHAR(255) NOT NULL,
        PRIMARY KEY (catalog_name, schema_name, table_name, field_id, grantee_kind, grantee, effect));
    CREATE TABLE IF NOT EXISTS sqe_column_tags (
        catalog_name VARCHAR(255) NOT NULL,
        schema_name VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL,
        field_id VARCHAR(16) NOT NULL,
        tag_name VARCHAR(255) NOT NULL,
        PRIMARY KEY (catalog_name, schema_name, table_name, field_id, tag_name));
    CREATE TABLE IF NOT EXISTS sqe_tag_masks (
        catalog_name VARCHAR(255) NOT NULL,
        tag_name VARCHAR(255) NOT NULL,
        grantee_kind VARCHAR(8) NOT NULL,
        grantee VARCHAR(255) NOT NULL,
        mask_kind VARCHAR(16) NOT NULL,
        argument VARCHAR(4000) NOT NULL,
        PRIMARY KEY (catalog_name, tag_name, grantee_kind, grantee));
    CREATE TABLE IF NOT EXISTS sqe_mask_keys (
        catalog_name VARCHAR(255) NOT NULL PRIMARY KEY,
        key_hex VARCHAR(128) NOT NULL);";

/// One privilege row.
#[derive(Debug, Clone)]
struct Grant {
    object: (String, String),
    grantee: (String, String),
    privilege: Privilege,
    deny: bool,
    grant_option: bool,
}

/// The caller, as the policies see them.
#[derive(Debug, Clone)]
pub(crate) struct Who {
    pub name: String,
    /// The token's roles and those granted in the catalog.
    pub roles: BTreeSet<String>,
    pub admin: bool,
}

/// Which tables a non-admin caller may see, for the listings (`information_schema`,
/// `system.jdbc`, Flight's GetTables): carried in the statement's config, each catalog's policies
/// read on the first row that needs them. A catalog whose policies cannot be read shows nothing.
pub(crate) struct Visibility {
    who: Who,
    default_allow: bool,
    catalogs: HashMap<String, crate::catalog::backend::CatalogRef>,
    /// `[access] store`, for the catalogs that keep no policies of their own.
    store: Option<Arc<dyn PolicyDb>>,
    ranger: Option<Arc<crate::governance::ranger::Ranger>>,
    read: std::sync::Mutex<HashMap<String, Option<(Policies, Who)>>>,
}

impl std::fmt::Debug for Visibility {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Visibility")
            .field("who", &self.who.name)
            .finish()
    }
}

impl Visibility {
    pub(crate) fn sees(&self, catalog: &str, schema: &str, table: &str) -> bool {
        let mut read = self.read.lock().unwrap_or_else(|p| p.into_inner());
        let known = read
            .entry(catalog.to_string())
            .or_insert_with(|| self.policies(catalog));
        match known {
            Some((policies, who)) => policies.visible(who, &Object::table(catalog, schema, table)),
            None => false,
        }
    }

    /// Whether listings show the caller the column of field id `field_id` of a table.
    pub(crate) fn lists_column(
        &self,
        catalog: &str,
        schema: &str,
        table: &str,
        field_id: i32,
    ) -> bool {
        let mut read = self.read.lock().unwrap_or_else(|p| p.into_inner());
        let known = read
            .entry(catalog.to_string())
            .or_insert_with(|| self.policies(catalog));
        let Some((policies, who)) = known else {
            return false;
        };
        let object = Object::table(catalog, schema, table);
        policies.visible(who, &object)
            && policies
                .column_access(who, &object)
                .is_none_or(|access| access.lists(field_id))
    }

    /// A catalog's policies and the caller with the roles it grants them; None if unreadable.
    fn policies(&self, catalog: &str) -> Option<(Policies, Who)> {
        let mut who = self.who.clone();
        if let Some(ranger) = self.ranger.as_ref().filter(|r| r.governs(catalog)) {
            let policies = Policies::without_rows(false, Some(ranger.current().ok()?));
            return Some((policies, who));
        }
        let Some(db) = self
            .catalogs
            .get(catalog)
            .and_then(|c| c.policy_db().or(self.store.as_deref()))
        else {
            return Some((Policies::without_rows(self.default_allow, None), who));
        };
        who.roles
            .extend(granted_roles(db, catalog, &who.name).ok()?);
        Some((Policies::read(db, catalog, self.default_allow).ok()?, who))
    }
}

/// A catalog's policies, read once for a statement.
struct Policies {
    grants: Vec<Grant>,
    /// SELECT granted or denied on single columns (by field id) of a table.
    columns: Vec<ColumnGrant>,
    owners: HashMap<(String, String), String>,
    default_allow: bool,
    /// Ranger's policies, in place of all the above, for a catalog they govern (ranger.rs).
    ranger: Option<Arc<crate::governance::ranger::RangerPolicies>>,
}

/// One column privilege row.
#[derive(Debug, Clone)]
struct ColumnGrant {
    object: (String, String),
    field_id: i32,
    grantee: (String, String),
    deny: bool,
}

/// What a caller may read of a table, where it is not everything: the columns (field ids) granted
/// to them and those denied, and whether SELECT on the whole table is theirs.
#[derive(Debug, Clone, Default)]
pub(crate) struct ColumnAccess {
    pub table_select: bool,
    pub granted: BTreeSet<i32>,
    pub denied: BTreeSet<i32>,
}

impl ColumnAccess {
    pub(crate) fn reads(&self, field_id: i32) -> bool {
        !self.denied.contains(&field_id) && (self.table_select || self.granted.contains(&field_id))
    }

    /// Whether listings and DESCRIBE show the column: all but those denied, or only those
    /// granted to a caller who reads the table by columns (one who may only write to it sees
    /// every column it may write).
    pub(crate) fn lists(&self, field_id: i32) -> bool {
        !self.denied.contains(&field_id)
            && (self.table_select || self.granted.is_empty() || self.granted.contains(&field_id))
    }
}

impl Policies {
    /// A catalog that keeps no policy rows: the default decides, or Ranger's policies.
    fn without_rows(
        default_allow: bool,
        ranger: Option<Arc<crate::governance::ranger::RangerPolicies>>,
    ) -> Self {
        Self {
            grants: Vec::new(),
            columns: Vec::new(),
            owners: HashMap::new(),
            default_allow,
            ranger,
        }
    }

    fn read(db: &dyn PolicyDb, catalog: &str, default_allow: bool) -> SqeResult<Self> {
        let rows = db.query(
            "SELECT schema_name, table_name, grantee_kind, grantee, privilege, effect, grant_option
             FROM sqe_privileges WHERE catalog_name = $1",
            &[catalog],
        )?;
        let text = |v: &Option<String>| v.clone().unwrap_or_default();
        let grants = rows
            .iter()
            .filter(|r| r.len() == 7)
            .filter_map(|r| {
                Some(Grant {
                    object: (text(&r[0]), text(&r[1])),
                    grantee: (text(&r[2]), text(&r[3])),
                    privilege: Privilege::parse(&text(&r[4]))?,
                    deny: text(&r[5]) == "deny",
                    grant_option: text(&r[6]) == "true",
                })
            })
            .collect();
        let owners = db
            .query(
                "SELECT schema_name, table_name, owner FROM sqe_owners WHERE catalog_name = $1",
                &[catalog],
            )?
            .iter()
            .filter(|r| r.len() == 3)
            .map(|r| ((text(&r[0]), text(&r[1])), text(&r[2])))
            .collect();
        let columns = db
            .query(
                "SELECT schema_name, table_name, field_id, grantee_kind, grantee, effect
                 FROM sqe_column_privileges WHERE catalog_name = $1",
                &[catalog],
            )?
            .iter()
            .filter(|r| r.len() == 6)
            .filter_map(|r| {
                Some(ColumnGrant {
                    object: (text(&r[0]), text(&r[1])),
                    field_id: text(&r[2]).parse().ok()?,
                    grantee: (text(&r[3]), text(&r[4])),
                    deny: text(&r[5]) == "deny",
                })
            })
            .collect();
        Ok(Self {
            grants,
            columns,
            owners,
            default_allow,
            ranger: None,
        })
    }

    /// The caller's column privileges on a table: granted and denied field ids.
    fn column_rules(&self, who: &Who, object: &Object) -> (BTreeSet<i32>, BTreeSet<i32>) {
        let table = object.key();
        let (mut granted, mut denied) = (BTreeSet::new(), BTreeSet::new());
        for c in self.columns.iter().filter(|c| c.object == table) {
            let to = match c.grantee.0.as_str() {
                "user" => c.grantee.1 == who.name,
                _ => who.roles.contains(&c.grantee.1),
            };
            if to {
                if c.deny {
                    denied.insert(c.field_id);
                } else {
                    granted.insert(c.field_id);
                }
            }
        }
        (granted, denied)
    }

    /// Whether a row DENYs `privilege` on `object` (or its schema) to the caller.
    fn denies(&self, who: &Who, privilege: Privilege, object: &Object) -> bool {
        self.about(who, object)
            .any(|g| g.privilege == privilege && g.deny)
    }

    /// What the caller may read of `object`; None for all of it.
    fn column_access(&self, who: &Who, object: &Object) -> Option<ColumnAccess> {
        if who.admin || self.owns(who, object) {
            return None;
        }
        let table_select = self.allows(who, Privilege::Select, object);
        let (granted, denied) = self.column_rules(who, object);
        if table_select && denied.is_empty() {
            return None;
        }
        Some(ColumnAccess {
            table_select,
            granted,
            denied,
        })
    }

    /// Whether the caller may read some of `object`: SELECT on it, or on some of its columns
    /// (then the columns a statement reads are checked once it is planned).
    fn reads_some(&self, who: &Who, object: &Object) -> bool {
        self.allows(who, Privilege::Select, object)
            || (!self.denies(who, Privilege::Select, object)
                && !self.column_rules(who, object).0.is_empty())
    }

    fn owns(&self, who: &Who, object: &Object) -> bool {
        if self.ranger.is_some() {
            return false;
        }
        let owner_of = |table: &str| {
            self.owners
                .get(&(object.schema.clone(), table.to_string()))
                .is_some_and(|o| *o == who.name)
        };
        owner_of("") || object.table.as_deref().is_some_and(owner_of)
    }

    /// The rows about `object` (or its schema, or the whole catalog) that name the caller or one
    /// of their roles.
    fn about<'a>(&'a self, who: &'a Who, object: &Object) -> impl Iterator<Item = &'a Grant> {
        let schema = (object.schema.clone(), String::new());
        let table = object.key();
        self.grants.iter().filter(move |g| {
            let catalog = g.object.0.is_empty() && g.object.1.is_empty();
            let on = catalog || g.object == schema || g.object == table;
            let to = match g.grantee.0.as_str() {
                "user" => g.grantee.1 == who.name,
                _ => who.roles.contains(&g.grantee.1),
            };
            on && to
        })
    }

    fn allows(&self, who: &Who, privilege: Privilege, object: &Object) -> bool {
        if who.admin || self.owns(who, object) {
            return true;
        }
        if let Some(ranger) = &self.ranger {
            return ranger.allows(who, privilege, object);
        }
        let mut granted = false;
        for g in self.about(who, object).filter(|g| g.privilege == privilege) {
            if g.deny {
                return false;
            }
            granted = true;
        }
        granted || self.default_allow
    }

    /// Whether the caller may grant `privilege` on `object` to others.
    fn may_grant(&self, who: &Who, privilege: Privilege, object: &Object) -> bool {
        if who.admin || self.owns(who, object) {
            return true;
        }
        if self.ranger.is_some() {
            return false;
        }
        let rows = || self.about(who, object).filter(|g| g.privilege == privilege);
        !rows().any(|g| g.deny) && rows().any(|g| g.grant_option)
    }

    /// Whether the object exists for the caller at all: they hold some privilege on it.
    fn visible(&self, who: &Who, object: &Object) -> bool {
        if let Some(ranger) = &self.ranger {
            return who.admin || ranger.visible(who, object);
        }
        who.admin
            || self.owns(who, object)
            || self.about(who, object).any(|g| !g.deny)
            || (object.table.is_some() && !self.column_rules(who, object).0.is_empty())
            || (self.default_allow && GRANTABLE.iter().any(|p| self.allows(who, *p, object)))
    }
}

impl Engine {
    /// The caller, with the roles the catalog grants them.
    fn who(&self, session: &Session, db: Option<&dyn PolicyDb>, catalog: &str) -> SqeResult<Who> {
        let mut roles: BTreeSet<String> = session.principal.roles.iter().cloned().collect();
        if let Some(db) = db {
            roles.extend(granted_roles(db, catalog, &session.principal.name)?);
        }
        Ok(Who {
            name: session.principal.name.clone(),
            roles,
            admin: self.is_admin(session),
        })
    }

    /// What the listings may show this caller; None for an admin (everything).
    pub(crate) fn visibility(&self, session: &Session) -> Option<Visibility> {
        if self.is_admin(session) {
            return None;
        }
        let catalogs = self
            .mounts
            .server()
            .keys()
            .filter_map(|name| Some((name.clone(), self.mounts.bind(session, name).ok()?)))
            .collect();
        Some(Visibility {
            who: Who {
                name: session.principal.name.clone(),
                roles: session.principal.roles.iter().cloned().collect(),
                admin: false,
            },
            default_allow: self.access_default_allow,
            catalogs,
            store: self.policy_store.clone(),
            ranger: self.ranger.clone(),
            read: std::sync::Mutex::new(HashMap::new()),
        })
    }

    /// An admin may do anything; without admin roles, an engine that allows by default makes
    /// everyone one (the embedded shell).
    pub(crate) fn is_admin(&self, session: &Session) -> bool {
        session.principal.has_any_role(&self.admin_roles)
            || (self.admin_roles.is_empty() && self.access_default_allow)
    }

    /// The policies of `catalog` and the caller as they see them; None for an admin (nothing to
    /// check).
    fn policies_for(&self, session: &Session, catalog: &str) -> SqeResult<Option<(Policies, Who)>> {
        if self.is_admin(session) {
            return Ok(None);
        }
        let handle = self.mounts.bind(session, catalog)?;
        let db = self.policy_db_of(catalog, &handle);
        let who = self.who(session, db, catalog)?;
        let policies = match db {
            Some(db) => Policies::read(db, catalog, self.access_default_allow)?,
            None => Policies::without_rows(
                self.access_default_allow,
                match &self.ranger {
                    Some(r) if r.governs(catalog) => Some(r.current()?),
                    _ => None,
                },
            ),
        };
        Ok(Some((policies, who)))
    }

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

    /// The database `catalog`'s policies are kept in: its own, else (for the server's own
    /// catalogs, never one a session attached) `[access] store`.
    pub(crate) fn policy_db_of<'a>(
        &'a self,
        catalog: &str,
        handle: &'a crate::catalog::backend::CatalogRef,
    ) -> Option<&'a dyn PolicyDb> {
        if self.ranger.as_ref().is_some_and(|r| r.governs(catalog)) {
            return None;
        }
        handle.policy_db().or_else(|| {
            self.mounts
                .is_server_catalog(catalog)
                .then_some(self.policy_store.as_deref())
                .flatten()
        })
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

    /// Records the caller as the owner of an object they created (where the catalog keeps
    /// policies), replacing any earlier owner of that name.
    pub(crate) fn record_owner(&self, session: &Session, object: &Object) -> SqeResult<()> {
        let handle = self.mounts.bind(session, &object.catalog)?;
        let Some(db) = self.policy_db_of(&object.catalog, &handle) else {
            return Ok(());
        };
        let (schema, table) = object.key();
        db.execute(
            "DELETE FROM sqe_owners WHERE catalog_name = $1 AND schema_name = $2 AND table_name = $3",
            &[&object.catalog, &schema, &table],
        )?;
        db.execute(
            "INSERT INTO sqe_owners (catalog_name, schema_name, table_name, owner) VALUES ($1, $2, $3, $4)",
            &[&object.catalog, &schema, &table, &session.principal.name],
        )?;
        Ok(())
    }

    /// Moves the owner, privileges, row filters and column masks of a renamed table to its new name, replacing
    /// any left there.
    pub(crate) fn move_object(
        &self,
        session: &Session,
        from: &Object,
        to: &Object,
    ) -> SqeResult<()> {
        self.forget_object(session, to)?;
        let handle = self.mounts.bind(session, &from.catalog)?;
        let Some(db) = self.policy_db_of(&from.catalog, &handle) else {
            return Ok(());
        };
        let ((schema, table), (new_schema, new_table)) = (from.key(), to.key());
        for rows in [
            "sqe_owners",
            "sqe_privileges",
            "sqe_row_filters",
            "sqe_column_masks",
            "sqe_column_privileges",
            "sqe_column_tags",
        ] {
            db.execute(
                &format!(
                    "UPDATE {rows} SET schema_name = $4, table_name = $5
                     WHERE catalog_name = $1 AND schema_name = $2 AND table_name = $3"
                ),
                &[&from.catalog, &schema, &table, &new_schema, &new_table],
            )?;
        }
        Ok(())
    }

    /// Forgets the owner, privileges, row filters and column masks of a dropped object: a table made again under
    /// its name starts with none.
    pub(crate) fn forget_object(&self, session: &Session, object: &Object) -> SqeResult<()> {
        let handle = self.mounts.bind(session, &object.catalog)?;
        let Some(db) = self.policy_db_of(&object.catalog, &handle) else {
            return Ok(());
        };
        let (schema, table) = object.key();
        for rows in [
            "sqe_owners",
            "sqe_privileges",
            "sqe_row_filters",
            "sqe_column_masks",
            "sqe_column_privileges",
            "sqe_column_tags",
        ] {
            db.execute(
                &format!(
                    "DELETE FROM {rows} WHERE catalog_name = $1 AND schema_name = $2 AND table_name = $3"
                ),
                &[&object.catalog, &schema, &table],
            )?;
        }
        Ok(())
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
        if self.is_admin(session) {
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

    /// GRANT, REVOKE, DENY, CREATE ROLE, DROP ROLE; None for any other statement.
    pub(crate) async fn run_access_statement(
        &self,
        session: &Session,
        statement: &Statement,
    ) -> Option<SqeResult<QueryResult>> {
        let result = match statement {
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
            _ => return None,
        };
        Some(result)
    }

    /// The database of the session's catalog, for roles; refused where the catalog keeps none.
    fn role_db(&self, session: &Session) -> SqeResult<crate::catalog::backend::CatalogRef> {
        if !self.is_admin(session) {
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
    /// admin's view: all of them; anyone else's: their own and their roles').
    pub(crate) fn show_grants(&self, session: &Session, sql: &str) -> SqeResult<QueryResult> {
        let rest = sql.trim().trim_end_matches(';');
        let words: Vec<&str> = rest.split_whitespace().collect();
        let on = match words.as_slice() {
            [_, _] => None,
            [_, _, on, kind, name] if on.eq_ignore_ascii_case("on") => {
                let parts: Vec<String> = name
                    .split('.')
                    .map(|p| p.trim_matches('"').to_string())
                    .collect();
                let object_name = ObjectName::from(
                    parts
                        .iter()
                        .map(|p| datafusion::sql::sqlparser::ast::Ident::new(p.clone()))
                        .collect::<Vec<_>>(),
                );
                let objects = if kind.eq_ignore_ascii_case("table") {
                    GrantObjects::Tables(vec![object_name])
                } else if kind.eq_ignore_ascii_case("schema") {
                    GrantObjects::Schemas(vec![object_name])
                } else {
                    return Err(SqeError::invalid(
                        "expected SHOW GRANTS [ON TABLE t | ON SCHEMA s]",
                    ));
                };
                self.objects_of(session, Some(&objects))?.pop()
            }
            _ => {
                return Err(SqeError::invalid(
                    "expected SHOW GRANTS [ON TABLE t | ON SCHEMA s]",
                ));
            }
        };
        let catalog = on
            .as_ref()
            .map_or(session.catalog.clone(), |o| o.catalog.clone());
        let handle = self.mounts.bind(session, &catalog)?;
        let db = self
            .policy_db_of(&catalog, &handle)
            .ok_or_else(|| self.no_policies(&catalog))?;
        let who = self.who(session, Some(db), &catalog)?;
        let policies = Policies::read(db, &catalog, self.access_default_allow)?;
        let mut rows: Vec<Vec<String>> = policies
            .grants
            .iter()
            .filter(|g| {
                who.admin
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

/// The roles the catalog grants `member`.
pub(crate) fn granted_roles(
    db: &dyn PolicyDb,
    catalog: &str,
    member: &str,
) -> SqeResult<Vec<String>> {
    let rows = db.query(
        "SELECT role_name FROM sqe_role_members WHERE catalog_name = $1 AND member = $2",
        &[catalog, member],
    )?;
    Ok(rows
        .into_iter()
        .filter_map(|r| r.into_iter().next().flatten())
        .collect())
}

fn role_exists(db: &dyn PolicyDb, catalog: &str, role: &str) -> SqeResult<bool> {
    Ok(!db
        .query(
            "SELECT role_name FROM sqe_roles WHERE catalog_name = $1 AND role_name = $2",
            &[catalog, role],
        )?
        .is_empty())
}

/// Allows `privilege` on `object` or refuses it (`absent` for an object the caller may not see at
/// all, the error they would get if it did not exist); either way recorded on the statement, and
/// refusals logged in its span (its query id, principal and protocol).
fn decide(
    policies: &Policies,
    who: &Who,
    privilege: Privilege,
    object: &Object,
    absent: impl FnOnce() -> SqeError,
) -> SqeResult<()> {
    if policies.allows(who, privilege, object) {
        crate::admission::record_decision(format!("allow {} on {object}", privilege.name()));
        return Ok(());
    }
    crate::admission::record_decision(format!("deny {} on {object}", privilege.name()));
    if object.table.is_some() && !policies.visible(who, object) {
        return Err(absent());
    }
    Err(SqeError::new(
        ErrorCode::PermissionDenied,
        privilege.refusal(object),
    ))
}

/// A GRANT, DENY or REVOKE in the words the SQL parser knows: `ON CATALOG c` as `ON DATABASE c`,
/// and the privilege ALTER (before the ON) as MODIFY.
pub(crate) fn grant_words(sql: &str) -> String {
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let dialect = crate::dialect::SqeDialect::default();
    let Ok(mut tokens) = Tokenizer::new(&dialect, sql).tokenize() else {
        return sql.to_string();
    };
    let words: Vec<usize> = (0..tokens.len())
        .filter(|i| !matches!(tokens[*i], Token::Whitespace(_)))
        .collect();
    let is = |t: &Token, w: &str| matches!(t, Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w));
    if let Some(on) = words.iter().position(|i| is(&tokens[*i], "on")) {
        for i in &words[..on] {
            if is(&tokens[*i], "alter") {
                tokens[*i] = Token::make_keyword("MODIFY");
            }
        }
    }
    for pair in words.windows(2) {
        if is(&tokens[pair[0]], "on") && is(&tokens[pair[1]], "catalog") {
            tokens[pair[1]] = Token::make_keyword("DATABASE");
        }
    }
    tokens.iter().map(|t| t.to_string()).collect()
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

impl Engine {
    fn no_policies(&self, catalog: &str) -> SqeError {
        if self.ranger.as_ref().is_some_and(|r| r.governs(catalog)) {
            return SqeError::unsupported(format!(
                "catalog '{catalog}' takes its privileges from Ranger: change them there"
            ));
        }
        SqeError::unsupported(format!(
            "catalog '{catalog}' keeps no privileges (only SQLite and PostgreSQL catalogs do, or [access] store)"
        ))
    }
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

impl Engine {
    /// `current_roles()` (sorted) and `is_role_in_session('r')`: the token's roles and those the
    /// server's catalogs grant the caller, read only when a statement calls one of them (both fold
    /// to constants when the statement is planned).
    pub(crate) fn role_functions(
        &self,
        session: &Session,
    ) -> Vec<Arc<datafusion::logical_expr::ScalarUDF>> {
        use datafusion::common::ScalarValue;
        use datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
        let token: BTreeSet<String> = session.principal.roles.iter().cloned().collect();
        // Roles the server's own catalogs grant (never one a session attached, whose database its
        // user may write), whichever catalog the session is in.
        let handles: Vec<(String, crate::catalog::backend::CatalogRef)> = self
            .mounts
            .server()
            .keys()
            .filter_map(|c| Some((c.clone(), self.mounts.bind(session, c).ok()?)))
            .collect();
        let name = session.principal.name.clone();
        let store = self.policy_store.clone();
        let roles = Arc::new(std::sync::OnceLock::<BTreeSet<String>>::new());
        let read = {
            let roles = Arc::clone(&roles);
            move || -> BTreeSet<String> {
                roles
                    .get_or_init(|| {
                        let mut all = token.clone();
                        for (catalog, handle) in &handles {
                            if let Some(db) = handle.policy_db().or(store.as_deref()) {
                                all.extend(granted_roles(db, catalog, &name).unwrap_or_default());
                            }
                        }
                        all
                    })
                    .clone()
            }
        };
        let list_type = DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)));
        let current = {
            let read = read.clone();
            create_udf(
                "current_roles",
                vec![],
                list_type,
                Volatility::Immutable,
                Arc::new(move |_: &[ColumnarValue]| {
                    let values: Vec<ScalarValue> = read()
                        .into_iter()
                        .map(|r| ScalarValue::Utf8(Some(r)))
                        .collect();
                    Ok(ColumnarValue::Scalar(ScalarValue::List(
                        ScalarValue::new_list_nullable(&values, &DataType::Utf8),
                    )))
                }),
            )
        };
        let member = create_udf(
            "is_role_in_session",
            vec![DataType::Utf8],
            DataType::Boolean,
            Volatility::Immutable,
            Arc::new(move |args: &[ColumnarValue]| {
                let roles = read();
                match args.first() {
                    Some(ColumnarValue::Scalar(s)) => {
                        let role = match s {
                            ScalarValue::Utf8(r)
                            | ScalarValue::LargeUtf8(r)
                            | ScalarValue::Utf8View(r) => r.clone(),
                            _ => None,
                        };
                        Ok(ColumnarValue::Scalar(ScalarValue::Boolean(
                            role.map(|r| roles.contains(&r)),
                        )))
                    }
                    Some(ColumnarValue::Array(a)) => {
                        let text = datafusion::arrow::compute::cast(a, &DataType::Utf8)?;
                        let text =
                            text.as_any().downcast_ref::<StringArray>().ok_or_else(|| {
                                datafusion::error::DataFusionError::Internal("text".into())
                            })?;
                        let out: datafusion::arrow::array::BooleanArray =
                            text.iter().map(|r| r.map(|r| roles.contains(r))).collect();
                        Ok(ColumnarValue::Array(Arc::new(out)))
                    }
                    None => Err(datafusion::error::DataFusionError::Plan(
                        "is_role_in_session takes a role name".into(),
                    )),
                }
            }),
        );
        vec![Arc::new(current), Arc::new(member)]
    }
}

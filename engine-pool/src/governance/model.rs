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

use sqe_sessions::{ErrorCode, SqeError, SqeResult};

use crate::catalog::information::ListingRules;
use crate::catalog::policy_store::PolicyDb;
pub(crate) use crate::governance::terms::{GRANTABLE, Object, Privilege, Who};

/// What no privilege row decides: `[access] default`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AccessDefault {
    /// Everything not denied is allowed (the embedded shell; a server without an authenticator).
    #[default]
    Allow,
    /// Nothing not granted is allowed.
    Deny,
    /// Anyone may read and create; writing to, altering or dropping what someone else owns (a
    /// table, or a table or schema in a schema someone else owns) takes a grant, or being an
    /// admin. What nobody owns is anyone's to change, as under `Allow`. A server with an
    /// authenticator defaults to this.
    Owner,
}

/// One privilege row.
#[derive(Debug, Clone)]
pub(crate) struct Grant {
    pub(crate) object: (String, String),
    pub(crate) grantee: (String, String),
    pub(crate) privilege: Privilege,
    pub(crate) deny: bool,
    pub(crate) grant_option: bool,
}

/// Which tables a non-admin caller may see, for the listings (`information_schema`,
/// `system.jdbc`, Flight's GetTables): carried in the statement's config, each catalog's policies
/// read on the first row that needs them. A catalog whose policies cannot be read shows nothing.
pub(crate) struct Visibility {
    pub(crate) who: Who,
    pub(crate) default: AccessDefault,
    pub(crate) catalogs: HashMap<String, crate::catalog::backend::CatalogRef>,
    /// `[access] store`, for the catalogs that keep no policies of their own.
    pub(crate) store: Option<Arc<dyn PolicyDb>>,
    pub(crate) ranger: Option<Arc<crate::governance::ranger::Ranger>>,
    pub(crate) read: std::sync::Mutex<HashMap<String, Option<(Policies, Who)>>>,
}

impl std::fmt::Debug for Visibility {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Visibility")
            .field("who", &self.who.name)
            .finish()
    }
}

impl ListingRules for Visibility {
    fn sees(&self, catalog: &str, schema: &str, table: &str) -> bool {
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
    fn lists_column(&self, catalog: &str, schema: &str, table: &str, field_id: i32) -> bool {
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
}

impl Visibility {
    /// A catalog's policies and the caller with the roles it grants them; None if unreadable.
    pub(crate) fn policies(&self, catalog: &str) -> Option<(Policies, Who)> {
        let mut who = self.who.clone();
        if let Some(ranger) = self.ranger.as_ref().filter(|r| r.governs(catalog)) {
            let policies =
                Policies::without_rows(AccessDefault::Deny, Some(ranger.current().ok()?));
            return Some((policies, who));
        }
        let Some(db) = self
            .catalogs
            .get(catalog)
            .and_then(|c| c.policy_db().or(self.store.as_deref()))
        else {
            return Some((Policies::without_rows(self.default, None), who));
        };
        who.roles
            .extend(granted_roles(db, catalog, &who.name).ok()?);
        Some((Policies::read(db, catalog, self.default).ok()?, who))
    }
}

/// A catalog's policies, read once for a statement.
pub(crate) struct Policies {
    pub(crate) grants: Vec<Grant>,
    /// SELECT granted or denied on single columns (by field id) of a table.
    pub(crate) columns: Vec<ColumnGrant>,
    pub(crate) owners: HashMap<(String, String), String>,
    pub(crate) default: AccessDefault,
    /// Ranger's policies, in place of all the above, for a catalog they govern (ranger.rs).
    pub(crate) ranger: Option<Arc<crate::governance::ranger::RangerPolicies>>,
}

/// One column privilege row.
#[derive(Debug, Clone)]
pub(crate) struct ColumnGrant {
    pub(crate) object: (String, String),
    pub(crate) field_id: i32,
    pub(crate) grantee: (String, String),
    pub(crate) deny: bool,
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
    pub(crate) fn without_rows(
        default: AccessDefault,
        ranger: Option<Arc<crate::governance::ranger::RangerPolicies>>,
    ) -> Self {
        Self {
            grants: Vec::new(),
            columns: Vec::new(),
            owners: HashMap::new(),
            default,
            ranger,
        }
    }

    pub(crate) fn read(
        db: &dyn PolicyDb,
        catalog: &str,
        default: AccessDefault,
    ) -> SqeResult<Self> {
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
            default,
            ranger: None,
        })
    }

    /// The caller's column privileges on a table: granted and denied field ids.
    pub(crate) fn column_rules(
        &self,
        who: &Who,
        object: &Object,
    ) -> (BTreeSet<i32>, BTreeSet<i32>) {
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
    pub(crate) fn denies(&self, who: &Who, privilege: Privilege, object: &Object) -> bool {
        self.about(who, object)
            .any(|g| g.privilege == privilege && g.deny)
    }

    /// What the caller may read of `object`; None for all of it.
    pub(crate) fn column_access(&self, who: &Who, object: &Object) -> Option<ColumnAccess> {
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
    pub(crate) fn reads_some(&self, who: &Who, object: &Object) -> bool {
        self.allows(who, Privilege::Select, object)
            || (!self.denies(who, Privilege::Select, object)
                && !self.column_rules(who, object).0.is_empty())
    }

    pub(crate) fn owns(&self, who: &Who, object: &Object) -> bool {
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
    pub(crate) fn about<'a>(
        &'a self,
        who: &'a Who,
        object: &Object,
    ) -> impl Iterator<Item = &'a Grant> {
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

    pub(crate) fn allows(&self, who: &Who, privilege: Privilege, object: &Object) -> bool {
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
        granted
            || match self.default {
                AccessDefault::Allow => true,
                AccessDefault::Deny => false,
                AccessDefault::Owner => match privilege {
                    Privilege::Select | Privilege::Create => true,
                    Privilege::Insert
                    | Privilege::Update
                    | Privilege::Delete
                    | Privilege::Drop
                    | Privilege::Alter => !self.owned(object),
                },
            }
    }

    /// Whether anyone owns `object`: the table, or its schema.
    pub(crate) fn owned(&self, object: &Object) -> bool {
        let owner_of = |table: &str| {
            self.owners
                .contains_key(&(object.schema.clone(), table.to_string()))
        };
        owner_of("") || object.table.as_deref().is_some_and(owner_of)
    }

    /// Whether the caller may grant `privilege` on `object` to others.
    pub(crate) fn may_grant(&self, who: &Who, privilege: Privilege, object: &Object) -> bool {
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
    pub(crate) fn visible(&self, who: &Who, object: &Object) -> bool {
        if let Some(ranger) = &self.ranger {
            return who.admin || ranger.visible(who, object);
        }
        who.admin
            || self.owns(who, object)
            || self.about(who, object).any(|g| !g.deny)
            || (object.table.is_some() && !self.column_rules(who, object).0.is_empty())
            || (self.default != AccessDefault::Deny
                && GRANTABLE.iter().any(|p| self.allows(who, *p, object)))
    }
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

pub(crate) fn role_exists(db: &dyn PolicyDb, catalog: &str, role: &str) -> SqeResult<bool> {
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
pub(crate) fn decide(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Alice owns table s.t, Carol owns schema c; bob holds INSERT on s.g and is denied SELECT on
    /// s.d.
    fn policies(default: AccessDefault) -> Policies {
        let text = |a: &str, b: &str| (a.to_string(), b.to_string());
        let grant = |table: &str, privilege, deny| Grant {
            object: text("s", table),
            grantee: text("user", "bob"),
            privilege,
            deny,
            grant_option: false,
        };
        Policies {
            grants: vec![
                grant("g", Privilege::Insert, false),
                grant("d", Privilege::Select, true),
            ],
            columns: Vec::new(),
            owners: HashMap::from([
                (text("s", "t"), "alice".into()),
                (text("c", ""), "carol".into()),
            ]),
            default,
            ranger: None,
        }
    }

    fn who(name: &str) -> Who {
        Who {
            name: name.to_string(),
            roles: BTreeSet::new(),
            admin: false,
        }
    }

    #[test]
    fn the_owner_default_protects_what_someone_owns() {
        let p = policies(AccessDefault::Owner);
        let (bob, alice) = (who("bob"), who("alice"));
        let alices = Object::table("cat", "s", "t");
        let unowned = Object::table("cat", "s", "u");
        let in_carols_schema = Object::table("cat", "c", "x");
        // Reading and creating are anyone's.
        assert!(p.allows(&bob, Privilege::Select, &alices));
        assert!(p.visible(&bob, &alices));
        assert!(p.allows(&bob, Privilege::Create, &Object::schema("cat", "c")));
        // Changing what someone else owns is not, a table or anything in their schema.
        for privilege in [
            Privilege::Insert,
            Privilege::Update,
            Privilege::Delete,
            Privilege::Drop,
            Privilege::Alter,
        ] {
            assert!(!p.allows(&bob, privilege, &alices), "{privilege:?}");
            assert!(
                !p.allows(&bob, privilege, &in_carols_schema),
                "{privilege:?}"
            );
            assert!(p.allows(&alice, privilege, &alices), "{privilege:?}");
            assert!(p.allows(&bob, privilege, &unowned), "{privilege:?}");
        }
        // A grant opens what the default closes; a deny closes what it opens.
        let granted = Object::table("cat", "s", "g");
        assert!(p.allows(&bob, Privilege::Insert, &granted));
        assert!(!p.allows(&bob, Privilege::Select, &Object::table("cat", "s", "d")));
        // An admin may do anything.
        let admin = Who {
            admin: true,
            ..who("ada")
        };
        assert!(p.allows(&admin, Privilege::Drop, &alices));
    }

    #[test]
    fn allow_and_deny_decide_alike_for_owned_and_unowned() {
        let bob = who("bob");
        let alices = Object::table("cat", "s", "t");
        let allow = policies(AccessDefault::Allow);
        assert!(allow.allows(&bob, Privilege::Drop, &alices));
        let deny = policies(AccessDefault::Deny);
        assert!(!deny.allows(&bob, Privilege::Select, &alices));
        assert!(!deny.visible(&bob, &alices));
        assert!(deny.allows(&bob, Privilege::Insert, &Object::table("cat", "s", "g")));
    }
}

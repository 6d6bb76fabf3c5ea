//! Who may do what, and what they see: privileges (GRANT, DENY, REVOKE, roles, owners), row
//! filters, column masks and tags, column privileges, and Ranger's policies in place of SQE's own.
//!
//! [`Governance`] holds it all for the engine: the admin roles, what no privilege decides, the key
//! of HASH masks, the policy store of the catalogs that keep none, and Ranger. Its one
//! [`Governance::is_admin`] is the rule the engine and the protocols ask. Before a statement is
//! planned the tables it names are checked ([`Governance::authorize_statement`], authorize.rs);
//! once planned, its scans are put behind their row filters and masks and the columns it reads are
//! checked ([`Governance::check_plan`]). The policies themselves are kept in the catalog's own
//! database ([`crate::catalog::policy_store`]); model.rs reads and judges them; row_filters.rs,
//! column_masks.rs and column_privileges.rs apply them to plans; grants.rs and statements.rs hold
//! the statements that change them.

pub mod authorize;
pub mod column_masks;
pub mod column_privileges;
pub mod grants;
pub mod model;
pub mod ranger;
pub mod row_filters;
pub mod statements;
pub mod terms;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::array::StringArray;
use datafusion::arrow::datatypes::{DataType, Field};
use sqe_sessions::{Principal, Session, SqeError, SqeResult};

use crate::catalog::mounts::Mounts;
use crate::catalog::policy_store::PolicyDb;
use crate::error::from_iceberg;
use model::{AccessDefault, Object, Policies, Visibility, Who, granted_roles};
use ranger::{Ranger, RangerConfig};

/// The governance part of an engine: see the module docs.
pub(crate) struct Governance {
    /// The catalogs whose policies it reads, as each caller reaches them.
    mounts: Arc<Mounts>,
    admin_roles: Vec<String>,
    /// `[access] default`: what no privilege row decides.
    default: AccessDefault,
    /// The key of HASH column masks (column_masks.rs); each catalog makes its own when unset.
    mask_key: Option<Vec<u8>>,
    /// `[access] store`: the policies of the catalogs that keep none in their own database.
    policy_store: Option<Arc<dyn PolicyDb>>,
    /// Ranger's policies in place of SQE's own, for the catalogs it governs.
    ranger: Option<Arc<Ranger>>,
}

impl std::fmt::Debug for Governance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Governance")
            .field("admin_roles", &self.admin_roles)
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

impl Governance {
    pub fn new(
        mounts: Arc<Mounts>,
        admin_roles: Vec<String>,
        default: AccessDefault,
        mask_key: Option<Vec<u8>>,
        policy_store: Option<&PathBuf>,
        ranger: Option<RangerConfig>,
    ) -> SqeResult<Self> {
        Ok(Self {
            mounts,
            admin_roles,
            default,
            mask_key,
            policy_store: match policy_store {
                Some(path) => {
                    Some(crate::catalog::sql_db::policy_store(path).map_err(from_iceberg)?)
                }
                None => None,
            },
            ranger: ranger.map(Ranger::start).transpose()?,
        })
    }

    /// The one rule for "is this caller an admin", which the engine and every protocol ask: a
    /// principal holding one of `[auth] admin_roles`; or, where no admin roles are configured and
    /// what no privilege decides is allowed (`[access] default = "allow"`: the embedded shell, a
    /// loopback server), everyone, as Trino's allow-all access control lets anyone do anything. An
    /// admin may do anything, read everyone's queries and cancel them.
    pub fn is_admin(&self, principal: &Principal) -> bool {
        principal.has_any_role(&self.admin_roles)
            || (self.admin_roles.is_empty() && self.default == AccessDefault::Allow)
    }

    /// A planned statement as the caller may run it: each scan of a governed table behind its
    /// row filters and masks (row_filters.rs), then refused if it reads a column the caller may
    /// not (column_privileges.rs). Every plan the engine runs passes here once.
    pub fn check_plan(
        &self,
        session: &Session,
        state: &datafusion::execution::SessionState,
        plan: datafusion::logical_expr::LogicalPlan,
    ) -> SqeResult<datafusion::logical_expr::LogicalPlan> {
        let plan = self.apply_policies(session, state, plan)?;
        self.authorize_columns(session, state, &plan)?;
        Ok(plan)
    }

    /// The key HASH masks are derived from when `[access] mask_key_env` names one.
    pub(crate) fn mask_key(&self) -> Option<&[u8]> {
        self.mask_key.as_deref()
    }

    /// The caller, with the roles the catalog grants them.
    fn who(&self, session: &Session, db: Option<&dyn PolicyDb>, catalog: &str) -> SqeResult<Who> {
        let mut roles: BTreeSet<String> = session.principal.roles.iter().cloned().collect();
        if let Some(db) = db {
            roles.extend(granted_roles(db, catalog, &session.principal.name)?);
        }
        Ok(Who {
            name: session.principal.name.clone(),
            roles,
            admin: self.is_admin(&session.principal),
        })
    }

    /// What the listings may show this caller; None for an admin (everything).
    pub(crate) fn visibility(&self, session: &Session) -> Option<Visibility> {
        if self.is_admin(&session.principal) {
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
            default: self.default,
            catalogs,
            store: self.policy_store.clone(),
            ranger: self.ranger.clone(),
            read: std::sync::Mutex::new(HashMap::new()),
        })
    }

    /// The policies of `catalog` and the caller as they see them; None for an admin (nothing to
    /// check).
    fn policies_for(&self, session: &Session, catalog: &str) -> SqeResult<Option<(Policies, Who)>> {
        if self.is_admin(&session.principal) {
            return Ok(None);
        }
        let handle = self.mounts.bind(session, catalog)?;
        let db = self.policy_db_of(catalog, &handle);
        let who = self.who(session, db, catalog)?;
        let policies = match db {
            Some(db) => Policies::read(db, catalog, self.default)?,
            None => Policies::without_rows(
                self.default,
                match &self.ranger {
                    Some(r) if r.governs(catalog) => Some(r.current()?),
                    _ => None,
                },
            ),
        };
        Ok(Some((policies, who)))
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

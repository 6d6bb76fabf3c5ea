//! The catalogs a statement can reach, by name: those the server mounts (its configuration's
//! SQLite, PostgreSQL, REST and Hive Metastore catalogs) and those the calling session attached
//! for itself. Every part of the engine asks here for a catalog *as the caller reaches it*
//! ([`Mounts::bind`]), so that a passthrough catalog always carries the caller's own token.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::ObjectName;
use iceberg::table::Table;
use iceberg::{NamespaceIdent, TableIdent};
use sqe_sessions::{Session, SqeError, SqeResult};

use super::backend::{CatalogMount, CatalogRef, SharedMount};
use super::hms::{HmsCatalog, HmsConfig};
use super::provider::load_table_opt;
use super::rest::{RestCatalogConfig, RestMount};
use super::sql::{PostgresConfig, SqlCatalog};
use super::view::ViewDefinition;
use crate::error::from_iceberg;
use crate::files::policy::{Confinement, FileAccess};
use crate::names::{QUERY_CATALOG, SYSTEM_CATALOG, qualified, table_ident};
use crate::session_scoped::SessionScoped;

/// The catalogs a server's configuration mounts, by kind, each under its name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MountConfig<'a> {
    /// Local warehouses (SQLite catalog + files); the first is the default catalog.
    pub warehouses: &'a [(String, PathBuf)],
    pub postgres: &'a [(String, PostgresConfig)],
    pub rest: &'a [(String, RestCatalogConfig)],
    pub hms: &'a [(String, HmsConfig)],
}

pub(crate) struct Mounts {
    /// The server's catalogs, by name.
    server: BTreeMap<String, Arc<dyn CatalogMount>>,
    /// Catalogs sessions attached for themselves (`ATTACH`).
    attached: SessionScoped<Arc<dyn CatalogMount>>,
}

impl std::fmt::Debug for Mounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mounts")
            .field("server", &self.server.keys())
            .finish_non_exhaustive()
    }
}

impl Mounts {
    /// Opens the configured catalogs; a name used twice (or one SQE keeps for itself) is refused.
    /// Each catalog's tables are confined to what `files` allows besides its own warehouse.
    pub fn open(config: MountConfig<'_>, files: &FileAccess) -> SqeResult<Self> {
        let mut mounts: Vec<(String, Arc<dyn CatalogMount>)> = Vec::new();
        let warehouses: Vec<PathBuf> = (config.warehouses.iter().map(|(_, dir)| dir))
            .chain(config.postgres.iter().map(|(_, pg)| &pg.warehouse))
            .cloned()
            .collect();
        let confine = |own: Option<&Path>, declared: &[String], any_object_store: bool| {
            Confinement::new(files, own, declared, any_object_store, &warehouses)
        };
        for (name, dir) in config.warehouses {
            let name = name.to_lowercase();
            let catalog = SqlCatalog::open(&name, dir).map_err(from_iceberg)?;
            let catalog = catalog.confined(confine(Some(dir), &[], false));
            mounts.push((name, Arc::new(SharedMount::new(Arc::new(catalog)))));
        }
        for (name, pg) in config.postgres {
            let name = name.to_lowercase();
            let catalog = SqlCatalog::open_postgres(&name, pg).map_err(from_iceberg)?;
            let catalog = catalog.confined(confine(Some(&pg.warehouse), &[], false));
            mounts.push((name, Arc::new(SharedMount::new(Arc::new(catalog)))));
        }
        for (name, rest) in config.rest {
            let name = name.to_lowercase();
            let confinement = confine(None, &rest.locations, true);
            let mount = RestMount::new(&name, rest.clone(), confinement)?;
            mounts.push((name.clone(), Arc::new(mount)));
        }
        for (name, hms) in config.hms {
            let name = name.to_lowercase();
            let confinement = confine(None, &hms.locations, true);
            let catalog = HmsCatalog::new(&name, hms, confinement).map_err(from_iceberg)?;
            mounts.push((name, Arc::new(SharedMount::new(Arc::new(catalog)))));
        }
        let mut server = BTreeMap::new();
        for (name, mount) in mounts {
            if server.contains_key(&name) || name == QUERY_CATALOG || name == SYSTEM_CATALOG {
                return Err(SqeError::invalid(format!(
                    "catalog name '{name}' is used twice"
                )));
            }
            server.insert(name, mount);
        }
        Ok(Self {
            server,
            attached: SessionScoped::new("attached catalogs", "DETACH"),
        })
    }

    /// The catalog `name` as `session` reaches it.
    pub fn bind(&self, session: &Session, name: &str) -> SqeResult<CatalogRef> {
        self.mount(session, name)?.bind(session)
    }

    /// The catalog the server mounts as `name`, or else the one `session` attached.
    pub fn mount(&self, session: &Session, name: &str) -> SqeResult<Arc<dyn CatalogMount>> {
        self.server
            .get(name)
            .cloned()
            .or_else(|| self.attached.get(session, name))
            .ok_or_else(|| SqeError::not_found(format!("catalog '{name}' does not exist")))
    }

    /// The server's catalogs, by name.
    pub fn server(&self) -> &BTreeMap<String, Arc<dyn CatalogMount>> {
        &self.server
    }

    /// Whether the server mounts `name` (a catalog no session attached).
    pub fn is_server_catalog(&self, name: &str) -> bool {
        self.server.contains_key(name)
    }

    /// True when some server catalog is reached with each session's own credential: every
    /// statement then gets a catalog list of its own, holding that session's clients.
    pub fn per_session(&self) -> bool {
        self.server.values().any(|m| m.shared_catalog().is_none())
    }

    /// The catalogs sessions attached (`ATTACH` adds to it, `DETACH` takes away).
    pub fn attached(&self) -> &SessionScoped<Arc<dyn CatalogMount>> {
        &self.attached
    }

    /// The local warehouses of the server's catalogs, which the file functions never reach.
    pub fn local_warehouses(&self) -> Vec<PathBuf> {
        self.server
            .values()
            .filter_map(|c| c.local_warehouse().map(Path::to_path_buf))
            .collect()
    }

    /// The catalog `catalog` as `session` reaches it, if it holds the schema `schema`; else a
    /// not-found error naming the schema.
    pub async fn schema(
        &self,
        session: &Session,
        catalog: &str,
        schema: &str,
    ) -> SqeResult<CatalogRef> {
        let handle = self.bind(session, catalog)?;
        let exists = handle
            .namespace_exists(&NamespaceIdent::new(schema.to_string()))
            .await
            .map_err(from_iceberg)?;
        if !exists {
            return Err(SqeError::not_found(format!(
                "schema '{catalog}.{schema}' does not exist"
            )));
        }
        Ok(handle)
    }

    /// The view `name` (qualified by the session), if there is one: its catalog, identifier and
    /// definition. A catalog that keeps no views has none.
    pub async fn view(
        &self,
        session: &Session,
        name: &ObjectName,
    ) -> SqeResult<Option<(String, TableIdent, ViewDefinition)>> {
        let (catalog, ident) = table_ident(session, name)?;
        let handle = self.bind(session, &catalog)?;
        if !handle.supports_views() {
            return Ok(None);
        }
        let view = handle.load_view(&ident).await.map_err(from_iceberg)?;
        Ok(view.map(|v| (catalog, ident, v)))
    }

    /// The table `name` (qualified by the session), or an error naming it: not found, or a view
    /// where a table was wanted.
    pub async fn table(
        &self,
        session: &Session,
        name: &ObjectName,
    ) -> SqeResult<(String, TableIdent, Table)> {
        let (catalog, ident) = table_ident(session, name)?;
        let handle = self.bind(session, &catalog)?;
        let Some(table) = load_table_opt(handle.as_ref(), &ident)
            .await
            .map_err(from_iceberg)?
        else {
            let full = qualified(&catalog, &ident);
            if handle.supports_views() && handle.view_exists(&ident).await.map_err(from_iceberg)? {
                return Err(SqeError::invalid(format!(
                    "'{full}' is a view, not a table"
                )));
            }
            return Err(SqeError::not_found(format!(
                "table '{full}' does not exist"
            )));
        };
        Ok((catalog, ident, table))
    }
}

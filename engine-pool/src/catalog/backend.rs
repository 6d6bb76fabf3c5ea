//! The catalog seam: what the engine needs of an Iceberg catalog, and how a mounted catalog is
//! reached by one session.
//!
//! A [`CatalogMount`] is what the configuration mounts under a name. For each statement the engine
//! asks it for the catalog *as the calling session reaches it* ([`CatalogMount::bind`]): a local
//! SQLite warehouse is the same for everyone, while a REST catalog in passthrough mode is a client
//! that carries the caller's own bearer token and is never shared with another user.
//!
//! Everything past `bind` works on an [`SqeCatalog`]: iceberg's [`Catalog`] plus the few things SQE
//! needs on top (listings by name, a raw compare-and-swap commit, where the warehouse lives).

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use iceberg::table::Table;
use iceberg::{Catalog, Error, ErrorKind, NamespaceIdent, Result, TableIdent};
use iceberg::{TableRequirement, TableUpdate};
use sqe_sessions::{Session, SqeResult};

use super::view::{ViewChange, ViewDefinition};

/// An Iceberg catalog as the engine uses it.
#[async_trait]
pub trait SqeCatalog: Catalog {
    /// The local directory this catalog keeps its tables in, if it has one. The file functions
    /// may never reach into it, and dropping a table removes its folders there.
    fn local_warehouse(&self) -> Option<&Path> {
        None
    }

    /// Why nothing can be written through this catalog, if nothing can: a write is refused with
    /// this before it writes a file.
    fn read_only(&self) -> Option<String> {
        None
    }

    /// The database SQE keeps this catalog's privileges, owners and roles in (governance/model.rs), if it
    /// keeps them here.
    fn policy_db(&self) -> Option<&dyn crate::catalog::policy_store::PolicyDb> {
        None
    }

    /// The manifests this catalog's scans have read, if it keeps them (a catalog every session
    /// reaches the same way).
    fn manifest_cache(&self) -> Option<Arc<super::column_stats::ManifestCache>> {
        None
    }

    /// Namespace names, sorted, when they can be had without waiting on the network (DataFusion
    /// asks for listings synchronously); `None` for a remote catalog.
    fn namespace_names_now(&self) -> Option<Vec<String>> {
        None
    }

    /// Table names of a namespace, sorted, under the same condition.
    fn table_names_now(&self, _namespace: &str) -> Option<Vec<String>> {
        None
    }

    /// Namespace names (one level, dot-joined), sorted.
    async fn namespace_names(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .list_namespaces(None)
            .await?
            .iter()
            .map(|ns| ns.join("."))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Table names in a namespace, sorted.
    async fn table_names(&self, namespace: &str) -> Result<Vec<String>> {
        let ns = NamespaceIdent::new(namespace.to_string());
        let mut names: Vec<String> = self
            .list_tables(&ns)
            .await?
            .into_iter()
            .map(|t| t.name)
            .collect();
        names.sort();
        Ok(names)
    }

    /// Whether this catalog keeps views. Without them, no statement pays for looking one up.
    fn supports_views(&self) -> bool {
        false
    }

    /// The view of that name, if there is one.
    async fn load_view(&self, _ident: &TableIdent) -> Result<Option<ViewDefinition>> {
        Ok(None)
    }

    /// Whether there is a view of that name (without reading its metadata).
    async fn view_exists(&self, ident: &TableIdent) -> Result<bool> {
        let names = self.view_names(&ident.namespace.join(".")).await?;
        Ok(names.contains(&ident.name))
    }

    /// View names in a namespace, sorted.
    async fn view_names(&self, _namespace: &str) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// Creates a view, or gives an existing view a new version when `replace` holds. A table of
    /// that name is never replaced.
    async fn create_view(
        &self,
        ident: &TableIdent,
        _view: ViewChange,
        _replace: bool,
    ) -> Result<()> {
        Err(Error::new(
            ErrorKind::FeatureUnsupported,
            format!("cannot create view '{ident}': this catalog does not keep views"),
        ))
    }

    /// Drops a view; a `TableNotFound` error if there is no view of that name.
    async fn drop_view(&self, ident: &TableIdent) -> Result<()> {
        Err(Error::new(
            ErrorKind::TableNotFound,
            format!("view '{ident}' does not exist"),
        ))
    }

    /// Applies `updates` if `requirements` still hold, as one compare-and-swap on the catalog.
    /// For changes iceberg's `Transaction` cannot express (a column rename keeping its field id).
    async fn commit_updates(
        &self,
        ident: &TableIdent,
        _requirements: Vec<TableRequirement>,
        _updates: Vec<TableUpdate>,
    ) -> Result<Table> {
        Err(Error::new(
            ErrorKind::FeatureUnsupported,
            format!("this change to '{ident}' is not supported by this catalog"),
        ))
    }
}

/// A catalog handle as one statement uses it.
pub type CatalogRef = Arc<dyn SqeCatalog>;

/// A catalog mounted under a name.
pub trait CatalogMount: Send + Sync + std::fmt::Debug {
    /// The local directory this catalog keeps its tables in, if it has one.
    fn local_warehouse(&self) -> Option<&Path> {
        None
    }

    /// The catalog, if every session reaches it the same way (then one DataFusion provider serves
    /// them all); `None` if each session must [`bind`](Self::bind) its own.
    fn shared_catalog(&self) -> Option<CatalogRef>;

    /// The catalog as `session` reaches it. Cheap: a remote client connects on first use.
    fn bind(&self, session: &Session) -> SqeResult<CatalogRef>;
}

/// A catalog every session reaches the same way (a local warehouse, a remote catalog with the
/// engine's own credential).
#[derive(Debug)]
pub struct SharedMount {
    catalog: CatalogRef,
}

impl SharedMount {
    pub fn new(catalog: CatalogRef) -> Self {
        Self { catalog }
    }
}

impl CatalogMount for SharedMount {
    fn local_warehouse(&self) -> Option<&Path> {
        self.catalog.local_warehouse()
    }

    fn shared_catalog(&self) -> Option<CatalogRef> {
        Some(self.catalog.clone())
    }

    fn bind(&self, _session: &Session) -> SqeResult<CatalogRef> {
        Ok(self.catalog.clone())
    }
}

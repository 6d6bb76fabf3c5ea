//! An Iceberg catalog kept in SQL tables, in the layout pyiceberg's `SqlCatalog` uses (Iceberg's JDBC
//! catalog has the same two tables), so the same warehouse can be opened by SQE, by pyiceberg and by
//! the database's own tools: a SQLite file inside a local warehouse directory, or a PostgreSQL
//! database (`type = "jdbc"`).
//!
//! Commits are compare-and-swap on `metadata_location`: the UPDATE only matches the row whose pointer is
//! still the one the commit started from, so two processes writing one warehouse never lose a write; the
//! loser gets a retryable conflict and iceberg's transaction retries it on fresh metadata.
//!
//! Statements run on the blocking pool, except SQLite's listings, which DataFusion asks for
//! synchronously. PostgreSQL is connected on first use and again after the connection is lost (a
//! read is tried once more on a fresh connection), so a database that restarts is reached again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use iceberg::io::{FileIO, FileIOBuilder};
use iceberg::spec::{TableMetadata, TableMetadataBuilder};
use iceberg::table::Table;
use iceberg::{
    Catalog, Error, ErrorKind, MetadataLocation, Namespace, NamespaceIdent, Result, TableCommit,
    TableCreation, TableIdent, TableRequirement, TableUpdate,
};
use rusqlite::Connection;

use super::backend::SqeCatalog;
use super::column_stats::ManifestCache;
use super::sql_db::{
    ADD_TYPE_COLUMN, CREATE_TABLES, Conn, Db, WriteError, ns_from_key, ns_key, sqlite_err,
};
use super::storage::CatalogStorageFactory;
use super::view::{self, ViewChange, ViewDefinition};
use crate::files::policy::Confinement;

/// The file name of the catalog inside a warehouse directory.
pub const CATALOG_FILE: &str = "catalog.db";

pub struct SqlCatalog {
    name: String,
    /// Where new tables' files go (a local directory).
    warehouse: PathBuf,
    /// SQLite answers listings at once; PostgreSQL only on the blocking pool.
    sqlite: bool,
    db: Arc<Db>,
    file_io: FileIO,
    /// Tables already read, by name and metadata file. A metadata file never changes once written
    /// and every commit writes a new one, so an entry is right for as long as the catalog row still
    /// points at its file; each lookup reads the row first, which sees commits by other processes.
    /// A cached table also keeps its manifests cached (iceberg-rust's object cache).
    tables: Mutex<HashMap<(String, String), Table>>,
    /// Manifests the scans of these tables have read (column statistics).
    manifests: Arc<ManifestCache>,
}

/// Tables kept in [`SqliteCatalog::tables`]; past this the cache starts over.
const CACHED_TABLES: usize = 256;

impl std::fmt::Debug for SqlCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlCatalog")
            .field("name", &self.name)
            .field("warehouse", &self.warehouse)
            .finish()
    }
}

/// A schema or table name becomes a folder of the warehouse: it must be one, and only one, folder
/// name (`..` would climb out, `a/b` reach into another).
fn folder_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']) {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            format!("{what} name '{name}' is not allowed here: it cannot be a folder name"),
        ));
    }
    Ok(())
}

/// Whether `dir` holds a `metadata` folder of `*.metadata.json` files and nothing else.
fn only_view_metadata(dir: &Path) -> bool {
    let names = |d: &Path| -> Option<Vec<String>> {
        std::fs::read_dir(d)
            .ok()?
            .map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect()
    };
    names(dir).is_some_and(|n| n == ["metadata"])
        && names(&dir.join("metadata"))
            .is_some_and(|files| files.iter().all(|f| f.ends_with(".metadata.json")))
}

/// A PostgreSQL catalog database, as a mount names it.
#[derive(Clone)]
pub struct PostgresConfig {
    /// `postgresql://user@host:port/dbname` (or the key=value form).
    pub uri: String,
    /// The password, if the database wants one (kept out of the URI, and of logs).
    pub password: Option<String>,
    /// Where new tables' files go (a local directory).
    pub warehouse: PathBuf,
}

impl std::fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("uri", &self.uri)
            .field("warehouse", &self.warehouse)
            .finish()
    }
}

/// Makes `dir` (creating it) and gives its canonical path.
fn warehouse_dir(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| {
        Error::new(
            ErrorKind::Unexpected,
            format!("cannot create warehouse directory {}: {e}", dir.display()),
        )
    })?;
    dir.canonicalize()
        .map_err(|e| Error::new(ErrorKind::Unexpected, format!("{}: {e}", dir.display())))
}

impl SqlCatalog {
    /// Opens (creating if needed) the SQLite catalog of the warehouse at `warehouse`, and makes sure
    /// its `default` namespace exists.
    pub fn open(name: &str, warehouse: &Path) -> Result<Self> {
        let warehouse = warehouse_dir(warehouse)?;
        let conn = Connection::open(warehouse.join(CATALOG_FILE)).map_err(sqlite_err)?;
        conn.busy_timeout(Duration::from_secs(10))
            .map_err(sqlite_err)?;
        conn.execute_batch(CREATE_TABLES).map_err(sqlite_err)?;
        let has_type: bool = conn
            .prepare(
                "SELECT 1 FROM pragma_table_info('iceberg_tables') WHERE name = 'iceberg_type'",
            )
            .and_then(|mut s| s.exists([]))
            .map_err(sqlite_err)?;
        if !has_type {
            conn.execute(ADD_TYPE_COLUMN, []).map_err(sqlite_err)?;
        }
        let catalog = Self::with(name, warehouse, Conn::Sqlite(conn));
        let default = NamespaceIdent::new("default".to_string());
        if !catalog.db.namespace_exists_sync(&default)? {
            catalog
                .db
                .create_namespace_sync(&default, &HashMap::new())?;
        }
        Ok(catalog)
    }

    /// A catalog in a PostgreSQL database, connected on first use.
    pub fn open_postgres(name: &str, config: &PostgresConfig) -> Result<Self> {
        let invalid =
            |what: String| Error::new(ErrorKind::DataInvalid, format!("catalog '{name}': {what}"));
        let mut pg: postgres::Config = config
            .uri
            .parse()
            .map_err(|e| invalid(format!("uri is not a PostgreSQL connection string: {e}")))?;
        if let Some(password) = &config.password {
            pg.password(password);
        }
        pg.connect_timeout(Duration::from_secs(10));
        // A database that stops answering fails the statement instead of holding the catalog.
        pg.keepalives(true);
        pg.keepalives_idle(Duration::from_secs(30));
        pg.tcp_user_timeout(Duration::from_secs(30));
        pg.options("-c statement_timeout=30000");
        let host = pg
            .get_hosts()
            .first()
            .map(|h| match h {
                postgres::config::Host::Tcp(h) => h.clone(),
                postgres::config::Host::Unix(p) => p.display().to_string(),
            })
            .ok_or_else(|| invalid("uri names no host".into()))?;
        let port = pg.get_ports().first().copied().unwrap_or(5432);
        let warehouse = warehouse_dir(&config.warehouse)?;
        Ok(Self::with(
            name,
            warehouse,
            Conn::Postgres {
                config: Box::new(pg),
                address: format!("{host}:{port}"),
                client: None,
            },
        ))
    }

    fn with(name: &str, warehouse: PathBuf, conn: Conn) -> Self {
        Self {
            sqlite: matches!(conn, Conn::Sqlite(_)),
            name: name.to_string(),
            warehouse,
            db: Arc::new(Db {
                name: name.to_string(),
                conn: Mutex::new(conn),
                policies_ready: std::sync::atomic::AtomicBool::new(false),
            }),
            file_io: FileIOBuilder::new(Arc::new(CatalogStorageFactory::new(
                name,
                Confinement::default(),
            )))
            .build(),
            tables: Mutex::new(HashMap::new()),
            manifests: Arc::default(),
        }
    }

    /// The catalog with its tables' files kept to `confinement` (see [`Confinement`]).
    pub fn confined(mut self, confinement: Confinement) -> Self {
        let factory = CatalogStorageFactory::new(&self.name, confinement);
        self.file_io = FileIOBuilder::new(Arc::new(factory)).build();
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn warehouse(&self) -> &Path {
        &self.warehouse
    }

    pub fn file_io(&self) -> &FileIO {
        &self.file_io
    }

    /// Runs `f` on the catalog's rows on the blocking pool: a statement may wait out another
    /// process's lock (the busy timeout), which must not hold a runtime thread meanwhile.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Db) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| Error::new(ErrorKind::Unexpected, format!("catalog call failed: {e}")))?
    }

    fn table_from(
        &self,
        ident: &TableIdent,
        location: String,
        metadata: TableMetadata,
    ) -> Result<Table> {
        Table::builder()
            .identifier(ident.clone())
            .metadata(metadata)
            .metadata_location(location)
            .file_io(self.file_io.clone())
            .runtime(iceberg::Runtime::try_current()?)
            .build()
    }

    /// A table directory under the warehouse that no other table uses.
    fn new_table_location(&self, ns: &NamespaceIdent, name: &str) -> String {
        let base = self.warehouse.join(ns_key(ns));
        let mut dir = base.join(name);
        if dir.exists() {
            dir = base.join(format!("{name}-{}", uuid::Uuid::new_v4().simple()));
        }
        dir.to_string_lossy().into_owned()
    }

    /// Removes a table's or view's folder if it is one of the warehouse's; locations elsewhere are
    /// not ours to delete. The location comes from metadata: `..` and links are resolved before
    /// it is judged, or `<warehouse>/../elsewhere` would pass for a folder of the warehouse.
    async fn remove_own_folder(&self, location: &str) -> Result<()> {
        let dir = Path::new(location.strip_prefix("file://").unwrap_or(location));
        let real = |p: &Path| p.canonicalize().ok();
        let inside = match (real(dir), real(&self.warehouse)) {
            (Some(dir), Some(warehouse)) if dir.starts_with(&warehouse) && dir != warehouse => {
                Some(dir)
            }
            _ => None,
        };
        if let Some(dir) = inside {
            tokio::task::spawn_blocking(move || {
                std::fs::remove_dir_all(&dir).map_err(|e| {
                    Error::new(
                        ErrorKind::Unexpected,
                        format!("removing {}: {e}", dir.display()),
                    )
                })
            })
            .await
            .map_err(|e| Error::new(ErrorKind::Unexpected, format!("removing a table: {e}")))??;
        }
        Ok(())
    }

    /// Applies `updates` to the table if `requirements` still hold, writing a new metadata file and
    /// swapping the catalog pointer only if nobody else moved it meanwhile.
    pub async fn commit(
        &self,
        ident: &TableIdent,
        requirements: Vec<TableRequirement>,
        updates: Vec<TableUpdate>,
    ) -> Result<Table> {
        let current = self.load_table(ident).await?;
        self.commit_on(current, requirements, updates).await
    }

    /// The compare-and-swap itself, from `current` as the commit's base.
    async fn commit_on(
        &self,
        current: Table,
        requirements: Vec<TableRequirement>,
        updates: Vec<TableUpdate>,
    ) -> Result<Table> {
        let ident = current.identifier().clone();
        let ident = &ident;
        for requirement in &requirements {
            requirement.check(Some(current.metadata()))?;
        }
        let old_location = current.metadata_location_result()?.to_string();
        let mut builder = current
            .metadata()
            .clone()
            .into_builder(Some(old_location.clone()));
        for update in updates {
            builder = update.apply(builder)?;
        }
        let metadata = builder.build()?.metadata;
        let new_location = MetadataLocation::from_str(&old_location)?
            .with_next_version()
            .with_new_metadata(&metadata);
        metadata.write_to(&self.file_io, &new_location).await?;
        let new_location = new_location.to_string();
        let swapped = {
            let (new_location, ident) = (new_location.clone(), ident.clone());
            self.blocking(move |db| db.swap_metadata(&ident, &old_location, &new_location))
                .await?
        };
        if !swapped {
            // Someone else committed first: our metadata file was never visible; remove it.
            let _ = self.file_io.delete(&new_location).await;
            return Err(Error::new(
                ErrorKind::CatalogCommitConflicts,
                format!(
                    "table '{}.{}' was changed by another writer",
                    ns_key(&ident.namespace),
                    ident.name
                ),
            )
            .with_retryable(true));
        }
        self.table_from(ident, new_location, metadata)
    }
}

#[async_trait]
impl Catalog for SqlCatalog {
    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> Result<Vec<NamespaceIdent>> {
        if parent.is_some() {
            return Ok(Vec::new());
        }
        self.blocking(|db| db.namespace_names())
            .await?
            .iter()
            .map(|n| ns_from_key(n))
            .collect()
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<Namespace> {
        for part in namespace.iter() {
            folder_name("schema", part)?;
            if part.contains('.') {
                return Err(Error::new(
                    ErrorKind::DataInvalid,
                    format!("schema name '{part}' is not allowed here: it cannot hold a dot"),
                ));
            }
        }
        let (ns, props) = (namespace.clone(), properties.clone());
        self.blocking(move |db| db.create_namespace_sync(&ns, &props))
            .await?;
        Ok(Namespace::with_properties(namespace.clone(), properties))
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        let ns = namespace.clone();
        let props = self
            .blocking(move |db| db.namespace_properties(&ns))
            .await?;
        Ok(Namespace::with_properties(namespace.clone(), props))
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        let ns = namespace.clone();
        self.blocking(move |db| db.namespace_exists_sync(&ns)).await
    }

    async fn update_namespace(
        &self,
        _namespace: &NamespaceIdent,
        _properties: HashMap<String, String>,
    ) -> Result<()> {
        Err(Error::new(
            ErrorKind::FeatureUnsupported,
            "updating schema properties is not supported",
        ))
    }

    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> Result<()> {
        let ns = namespace.clone();
        self.blocking(move |db| db.drop_namespace(&ns)).await
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        let key = ns_key(namespace);
        Ok(self
            .blocking(move |db| db.table_names(&key))
            .await?
            .into_iter()
            .map(|name| TableIdent::new(namespace.clone(), name))
            .collect())
    }

    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        creation: TableCreation,
    ) -> Result<Table> {
        folder_name("table", &creation.name)?;
        if !self.namespace_exists(namespace).await? {
            return Err(Error::new(
                ErrorKind::NamespaceNotFound,
                format!("schema '{}' does not exist", ns_key(namespace)),
            ));
        }
        let ident = TableIdent::new(namespace.clone(), creation.name.clone());
        if self.table_exists(&ident).await? {
            return Err(Error::new(
                ErrorKind::TableAlreadyExists,
                format!(
                    "table '{}.{}' already exists",
                    ns_key(namespace),
                    ident.name
                ),
            ));
        }
        let location = match &creation.location {
            Some(l) => l.clone(),
            None => self.new_table_location(namespace, &creation.name),
        };
        let creation = TableCreation {
            location: Some(location.clone()),
            ..creation
        };
        let metadata = TableMetadataBuilder::from_table_creation(creation)?
            .build()?
            .metadata;
        let metadata_location = MetadataLocation::new_with_metadata(location, &metadata);
        metadata.write_to(&self.file_io, &metadata_location).await?;
        let metadata_location = metadata_location.to_string();
        let (row, location) = (ident.clone(), metadata_location.clone());
        let inserted = self
            .blocking(move |db| Ok(db.insert_table(&row, &location)))
            .await?;
        match inserted {
            Ok(_) => self.table_from(&ident, metadata_location, metadata),
            Err(e) => {
                let _ = self.file_io.delete(&metadata_location).await;
                Err(match e {
                    WriteError::Taken => Error::new(
                        ErrorKind::TableAlreadyExists,
                        format!(
                            "table '{}.{}' already exists",
                            ns_key(namespace),
                            ident.name
                        ),
                    ),
                    WriteError::Failed(e) => e,
                })
            }
        }
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<Table> {
        let row = ident.clone();
        let location = self.blocking(move |db| db.metadata_location(&row)).await?;
        let key = (ident.to_string(), location.clone());
        let cached = || self.tables.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(table) = cached().get(&key) {
            return Ok(table.clone());
        }
        let metadata = TableMetadata::read_from(&self.file_io, &location).await?;
        let table = self.table_from(ident, location, metadata)?;
        let mut tables = cached();
        if tables.len() >= CACHED_TABLES {
            tables.clear();
        }
        tables.insert(key, table.clone());
        Ok(table)
    }

    async fn drop_table(&self, ident: &TableIdent) -> Result<()> {
        let row = ident.clone();
        let removed = self.blocking(move |db| db.delete_table(&row)).await?;
        if !removed {
            return Err(Error::new(
                ErrorKind::TableNotFound,
                format!(
                    "table '{}.{}' does not exist",
                    ns_key(&ident.namespace),
                    ident.name
                ),
            ));
        }
        Ok(())
    }

    async fn purge_table(&self, ident: &TableIdent) -> Result<()> {
        let table = self.load_table(ident).await?;
        self.drop_table(ident).await?;
        iceberg::drop_table_data(&table).await?;
        // A table directory inside the warehouse belongs to this table alone: remove what is left
        // (empty folders, files of aborted writes).
        self.remove_own_folder(table.metadata().location()).await
    }

    async fn table_exists(&self, ident: &TableIdent) -> Result<bool> {
        let row = ident.clone();
        match self.blocking(move |db| db.metadata_location(&row)).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> Result<()> {
        folder_name("table", &dest.name)?;
        let (src, dest) = (src.clone(), dest.clone());
        self.blocking(move |db| db.rename_table(&src, &dest)).await
    }

    async fn register_table(&self, ident: &TableIdent, metadata_location: String) -> Result<Table> {
        let metadata = TableMetadata::read_from(&self.file_io, &metadata_location).await?;
        let (row, location) = (ident.clone(), metadata_location.clone());
        let name = ident.clone();
        self.blocking(move |db| {
            db.insert_table(&row, &location).map_err(|e| match e {
                WriteError::Taken => Error::new(
                    ErrorKind::TableAlreadyExists,
                    format!("table '{name}' already exists"),
                ),
                WriteError::Failed(e) => e,
            })
        })
        .await?;
        self.table_from(ident, metadata_location, metadata)
    }

    async fn update_table(&self, mut commit: TableCommit) -> Result<Table> {
        let ident = commit.identifier().clone();
        let requirements = commit.take_requirements();
        let updates = commit.take_updates();
        self.commit(&ident, requirements, updates).await
    }
}

#[async_trait]
impl SqeCatalog for SqlCatalog {
    fn local_warehouse(&self) -> Option<&Path> {
        Some(&self.warehouse)
    }

    fn policy_db(&self) -> Option<&dyn crate::catalog::policy_store::PolicyDb> {
        Some(self.db.as_ref())
    }

    fn manifest_cache(&self) -> Option<Arc<ManifestCache>> {
        Some(self.manifests.clone())
    }

    /// SQLite answers at once; PostgreSQL is a network call, never made on a runtime thread.
    fn namespace_names_now(&self) -> Option<Vec<String>> {
        self.sqlite.then(|| self.db.namespace_names().ok())?
    }

    fn table_names_now(&self, namespace: &str) -> Option<Vec<String>> {
        self.sqlite.then(|| self.db.table_names(namespace).ok())?
    }

    async fn namespace_names(&self) -> Result<Vec<String>> {
        self.blocking(|db| db.namespace_names()).await
    }

    async fn table_names(&self, namespace: &str) -> Result<Vec<String>> {
        let namespace = namespace.to_string();
        self.blocking(move |db| db.table_names(&namespace)).await
    }

    async fn commit_updates(
        &self,
        ident: &TableIdent,
        requirements: Vec<TableRequirement>,
        updates: Vec<TableUpdate>,
    ) -> Result<Table> {
        self.commit(ident, requirements, updates).await
    }

    fn supports_views(&self) -> bool {
        true
    }

    async fn load_view(&self, ident: &TableIdent) -> Result<Option<ViewDefinition>> {
        let row = ident.clone();
        let Some(location) = self.blocking(move |db| db.view_location(&row)).await? else {
            return Ok(None);
        };
        let metadata = view::read(&self.file_io, &location).await?;
        view::definition(&metadata).map(Some)
    }

    async fn view_exists(&self, ident: &TableIdent) -> Result<bool> {
        let row = ident.clone();
        Ok(self
            .blocking(move |db| db.view_location(&row))
            .await?
            .is_some())
    }

    async fn view_names(&self, namespace: &str) -> Result<Vec<String>> {
        let namespace = namespace.to_string();
        self.blocking(move |db| db.view_names(&namespace)).await
    }

    async fn create_view(
        &self,
        ident: &TableIdent,
        change: ViewChange,
        replace: bool,
    ) -> Result<()> {
        folder_name("view", &ident.name)?;
        let namespace = &ident.namespace;
        if !self.namespace_exists(namespace).await? {
            return Err(Error::new(
                ErrorKind::NamespaceNotFound,
                format!("schema '{}' does not exist", ns_key(namespace)),
            ));
        }
        let taken = || {
            Error::new(
                ErrorKind::TableAlreadyExists,
                format!("'{}.{}' already exists", ns_key(namespace), ident.name),
            )
        };
        if self.table_exists(ident).await? {
            return Err(taken());
        }
        let row = ident.clone();
        let existing = self.blocking(move |db| db.view_location(&row)).await?;
        match existing {
            Some(_) if !replace => Err(Error::new(
                ErrorKind::TableAlreadyExists,
                format!("view '{}.{}' already exists", ns_key(namespace), ident.name),
            )),
            Some(old) => {
                let previous = view::read(&self.file_io, &old).await?;
                let versions = previous.versions().len();
                let location = previous.location().to_string();
                let metadata = view::replaced_metadata(previous, &change)?;
                let path = view::metadata_path(&location, versions);
                view::write(&self.file_io, &path, &metadata).await?;
                let (row, new) = (ident.clone(), path.clone());
                if self
                    .blocking(move |db| db.swap_metadata(&row, &old, &new))
                    .await?
                {
                    return Ok(());
                }
                let _ = self.file_io.delete(&path).await;
                Err(Error::new(
                    ErrorKind::CatalogCommitConflicts,
                    format!(
                        "view '{}.{}' was changed meanwhile; try again",
                        ns_key(namespace),
                        ident.name
                    ),
                )
                .with_retryable(true))
            }
            None => {
                let location = self.new_table_location(namespace, &ident.name);
                let metadata = view::new_metadata(&location, &change)?;
                let path = view::metadata_path(&location, 0);
                view::write(&self.file_io, &path, &metadata).await?;
                let (row, at) = (ident.clone(), path.clone());
                match self
                    .blocking(move |db| Ok(db.insert_row(&row, &at, "VIEW")))
                    .await?
                {
                    Ok(_) => Ok(()),
                    Err(e) => {
                        let _ = self.file_io.delete(&path).await;
                        Err(match e {
                            WriteError::Taken => taken(),
                            WriteError::Failed(e) => e,
                        })
                    }
                }
            }
        }
    }

    async fn drop_view(&self, ident: &TableIdent) -> Result<()> {
        let row = ident.clone();
        let location = self.blocking(move |db| db.view_location(&row)).await?;
        let row = ident.clone();
        if self.blocking(move |db| db.delete_view(&row)).await? {
            // The view's folder goes too when it holds nothing but view metadata.
            let folder = match location {
                Some(l) => view::read(&self.file_io, &l)
                    .await
                    .ok()
                    .map(|m| m.location().to_string()),
                None => None,
            };
            if let Some(folder) = folder
                && only_view_metadata(Path::new(folder.strip_prefix("file://").unwrap_or(&folder)))
            {
                self.remove_own_folder(&folder).await?;
            }
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::TableNotFound,
            format!(
                "view '{}.{}' does not exist",
                ns_key(&ident.namespace),
                ident.name
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// While another process holds the catalog locked, a catalog call waits for it on the blocking
    /// pool: the runtime (here a single thread) goes on running other tasks, and the call succeeds
    /// once the lock is gone.
    #[tokio::test]
    async fn a_locked_catalog_does_not_hold_the_runtime() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let catalog = Arc::new(SqlCatalog::open("c", dir.path()).unwrap_or_else(|e| panic!("{e}")));
        let other =
            Connection::open(dir.path().join(CATALOG_FILE)).unwrap_or_else(|e| panic!("{e}"));
        other
            .execute_batch("BEGIN EXCLUSIVE")
            .unwrap_or_else(|e| panic!("{e}"));
        let waiting = tokio::spawn({
            let catalog = catalog.clone();
            async move { catalog.list_namespaces(None).await }
        });
        // Had the call blocked this thread, the sleep would end only after the busy timeout, with
        // the call failed on the lock.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiting.is_finished());
        other
            .execute_batch("COMMIT")
            .unwrap_or_else(|e| panic!("{e}"));
        let names = waiting
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names, vec![NamespaceIdent::new("default".into())]);
    }

    /// Catalogs written by older tools have no `iceberg_type` column; SQE adds it (pyiceberg needs it)
    /// and treats the existing rows as tables.
    #[tokio::test]
    async fn opens_a_catalog_without_iceberg_type() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        {
            let conn =
                Connection::open(dir.path().join(CATALOG_FILE)).unwrap_or_else(|e| panic!("{e}"));
            conn.execute_batch(
                "CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, table_namespace VARCHAR(255) NOT NULL,
                   table_name VARCHAR(255) NOT NULL, metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000),
                   PRIMARY KEY (catalog_name, table_namespace, table_name));
                 INSERT INTO iceberg_tables VALUES ('iceberg', 'old', 'legacy', '/nowhere/v1.metadata.json', NULL);",
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
        let catalog = SqlCatalog::open("iceberg", dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            catalog.table_names_now("old"),
            Some(vec!["legacy".to_string()])
        );
        assert_eq!(
            catalog.namespace_names_now(),
            Some(vec!["default".to_string(), "old".to_string()])
        );
        let has_column = catalog
            .db
            .strings(
                "SELECT name FROM pragma_table_info('iceberg_tables') WHERE name = 'iceberg_type'",
                &[],
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(has_column, vec!["iceberg_type".to_string()]);
    }

    /// A commit whose base is no longer current is refused as a retryable conflict, and the
    /// metadata file it wrote is removed.
    #[tokio::test]
    async fn stale_commit_is_a_retryable_conflict() {
        use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let catalog = SqlCatalog::open("iceberg", dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let schema = Schema::builder()
            .with_fields(vec![Arc::new(NestedField::optional(
                1,
                "id",
                Type::Primitive(PrimitiveType::Long),
            ))])
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let ns = NamespaceIdent::new("default".to_string());
        let base = catalog
            .create_table(
                &ns,
                TableCreation::builder()
                    .name("t".to_string())
                    .schema(schema)
                    .build(),
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let props = |v: &str| {
            vec![TableUpdate::SetProperties {
                updates: HashMap::from([("k".to_string(), v.to_string())]),
            }]
        };
        let ident = base.identifier().clone();
        let metadata_dir = dir
            .path()
            .canonicalize()
            .unwrap_or_else(|e| panic!("{e}"))
            .join("default/t/metadata");
        let files = || {
            std::fs::read_dir(&metadata_dir)
                .map(|d| d.count())
                .unwrap_or(0)
        };

        catalog
            .commit_on(base.clone(), vec![], props("first"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let before = files();
        let lost = catalog.commit_on(base, vec![], props("second")).await;
        let err = lost
            .err()
            .unwrap_or_else(|| panic!("a stale commit must fail"));
        assert_eq!(err.kind(), ErrorKind::CatalogCommitConflicts);
        assert!(err.retryable());
        assert_eq!(
            files(),
            before,
            "the loser's metadata file must not stay behind"
        );
        let current = catalog
            .load_table(&ident)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            current.metadata().properties().get("k").map(String::as_str),
            Some("first")
        );
    }
}

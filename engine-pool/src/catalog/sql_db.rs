//! The database behind a SQL catalog (sql.rs's `SqlCatalog`): one connection, to a SQLite
//! file or a PostgreSQL database, and the statements on the catalog's rows (pyiceberg's
//! `iceberg_tables` and `iceberg_namespace_properties`) and on SQE's policy tables. Statements take
//! text parameters numbered `$1`, `$2`, … on both.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iceberg::{Error, ErrorKind, NamespaceIdent, Result, TableIdent};
use rusqlite::Connection;

use crate::error::CatalogRefusal;

/// A namespace with no properties is recorded by this row, as pyiceberg does.
pub(super) const EXISTS_PROPERTY: &str = "exists";

/// The catalog's rows: its name and connection, shared with the blocking threads that use them.
pub(super) struct Db {
    pub(super) name: String,
    pub(super) conn: Mutex<Conn>,
    /// SQE's policy tables exist (governance/).
    pub(super) policies_ready: std::sync::atomic::AtomicBool,
}

pub(super) enum Conn {
    Sqlite(Connection),
    /// Connected on first use; `None` again after the connection was lost.
    Postgres {
        config: Box<postgres::Config>,
        /// `host:port`, for errors.
        address: String,
        client: Option<Box<postgres::Client>>,
    },
}

impl Drop for Db {
    /// The PostgreSQL client runs a runtime of its own, which may not be shut down inside another
    /// one (the engine is dropped in async code): it goes on a thread of its own.
    fn drop(&mut self) {
        let conn = self.conn.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Conn::Postgres { client, .. } = conn
            && let Some(client) = client.take()
        {
            let _ = std::thread::Builder::new()
                .name("sqe-pg-close".into())
                .spawn(move || drop(client));
        }
    }
}

/// How a write to the catalog's rows failed.
pub(super) enum WriteError {
    /// A row with that key exists already.
    Taken,
    Failed(Error),
}

impl From<Error> for WriteError {
    fn from(e: Error) -> Self {
        WriteError::Failed(e)
    }
}

pub(super) fn sqlite_err(e: rusqlite::Error) -> Error {
    if let rusqlite::Error::SqliteFailure(f, _) = &e
        && matches!(
            f.code,
            rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
        )
    {
        return Error::new(
            ErrorKind::CatalogCommitConflicts,
            format!("catalog is busy: {e}"),
        )
        .with_retryable(true);
    }
    Error::new(
        ErrorKind::Unexpected,
        format!("catalog database error: {e}"),
    )
}

pub(super) fn ns_key(ns: &NamespaceIdent) -> String {
    ns.join(".")
}

pub(super) fn ns_from_key(key: &str) -> Result<NamespaceIdent> {
    NamespaceIdent::from_vec(key.split('.').map(str::to_string).collect())
}

/// The catalog's tables, as pyiceberg creates them.
pub(super) const CREATE_TABLES: &str = "CREATE TABLE IF NOT EXISTS iceberg_tables (
        catalog_name VARCHAR(255) NOT NULL,
        table_namespace VARCHAR(255) NOT NULL,
        table_name VARCHAR(255) NOT NULL,
        metadata_location VARCHAR(1000),
        previous_metadata_location VARCHAR(1000),
        iceberg_type VARCHAR(5),
        PRIMARY KEY (catalog_name, table_namespace, table_name));
    CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
        catalog_name VARCHAR(255) NOT NULL,
        namespace VARCHAR(255) NOT NULL,
        property_key VARCHAR(255) NOT NULL,
        property_value VARCHAR(1000) NOT NULL,
        PRIMARY KEY (catalog_name, namespace, property_key));";

/// Catalogs written by older tools lack `iceberg_type`; pyiceberg needs it, so it is added.
pub(super) const ADD_TYPE_COLUMN: &str =
    "ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)";

/// A PostgreSQL error as an iceberg error: a lost or refused connection names the database and is
/// the caller's to read (the database is a dependency that failed); anything else is the server's.
pub(super) fn postgres_err(name: &str, address: &str, e: &postgres::Error) -> Error {
    use postgres::error::SqlState;
    if e.code().is_some_and(|c| {
        *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
    }) {
        return Error::new(
            ErrorKind::CatalogCommitConflicts,
            format!("catalog is busy: {e}"),
        )
        .with_retryable(true);
    }
    if lost(e) {
        let refusal = CatalogRefusal {
            code: sqe_sessions::ErrorCode::External,
            message: format!(
                "catalog '{name}' (PostgreSQL at {address}) cannot be reached: {}",
                std::error::Error::source(e)
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| e.to_string())
            ),
        };
        return Error::new(ErrorKind::Unexpected, refusal.message.clone()).with_source(refusal);
    }
    Error::new(
        ErrorKind::Unexpected,
        format!("catalog database error: {e}"),
    )
}

/// Whether a PostgreSQL error means the connection is gone (or never came), rather than a
/// statement the database refused.
pub(super) fn lost(e: &postgres::Error) -> bool {
    e.is_closed()
        || std::error::Error::source(e)
            .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
        || (e.code().is_none() && e.to_string().contains("connect"))
}

/// A row of text columns; a column of another type is an error, not a panic.
pub(super) fn text_row(
    row: &postgres::Row,
) -> std::result::Result<Vec<Option<String>>, postgres::Error> {
    (0..row.len()).map(|i| row.try_get(i)).collect()
}

/// SQE's policy tables live in the catalog's database, made on first use.
/// A database of SQE's policies alone (`[access] store`), for the catalogs that keep none.
pub fn policy_store(path: &Path) -> Result<Arc<dyn crate::catalog::policy_store::PolicyDb>> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::new(
                ErrorKind::Unexpected,
                format!("[access] store: cannot make {}: {e}", dir.display()),
            )
        })?;
    }
    let conn = Connection::open(path).map_err(sqlite_err)?;
    conn.busy_timeout(Duration::from_secs(10))
        .map_err(sqlite_err)?;
    Ok(Arc::new(Db {
        name: "policy store".to_string(),
        conn: Mutex::new(Conn::Sqlite(conn)),
        policies_ready: std::sync::atomic::AtomicBool::new(false),
    }))
}

impl crate::catalog::policy_store::PolicyDb for Db {
    /// A database without the tables that cannot make them (read-only) holds no policies; any
    /// other failure is an error (a statement is never allowed for want of its policies).
    fn query(&self, sql: &str, args: &[&str]) -> sqe_sessions::SqeResult<Vec<Vec<Option<String>>>> {
        self.off_runtime(|| {
            let made = self.policy_tables();
            match Db::query(self, sql, args) {
                Err(_) if made.is_err() && !self.has_policy_tables() => Ok(Vec::new()),
                Err(e) => Err(crate::error::from_iceberg(e)),
                Ok(rows) => Ok(rows),
            }
        })
    }

    fn execute(&self, sql: &str, args: &[&str]) -> sqe_sessions::SqeResult<u64> {
        self.off_runtime(|| {
            self.policy_tables()?;
            self.change(sql, args).map_err(crate::error::from_iceberg)
        })
    }
}

impl Db {
    /// Runs `f` where the PostgreSQL client may block (it drives a runtime of its own, which may
    /// not start on a runtime thread): on a thread of its own for PostgreSQL, here for SQLite.
    pub(super) fn off_runtime<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let sqlite = matches!(
            &*self.conn.lock().unwrap_or_else(|p| p.into_inner()),
            Conn::Sqlite(_)
        );
        if sqlite {
            return f();
        }
        std::thread::scope(|s| match s.spawn(f).join() {
            Ok(v) => v,
            Err(panic) => std::panic::resume_unwind(panic),
        })
    }

    /// Whether the policy tables exist (in a database that could not make them).
    pub(super) fn has_policy_tables(&self) -> bool {
        Db::query(
            self,
            "SELECT grantee FROM sqe_privileges WHERE catalog_name = $1 AND grantee = $1",
            &[""],
        )
        .is_ok()
    }

    /// Creates SQE's policy tables once per process.
    pub(super) fn policy_tables(&self) -> sqe_sessions::SqeResult<()> {
        if self
            .policies_ready
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return Ok(());
        }
        let mut conn = self.conn().map_err(crate::error::from_iceberg)?;
        let made = match &mut *conn {
            Conn::Sqlite(c) => c
                .execute_batch(crate::catalog::policy_store::POLICY_TABLES)
                .map_err(sqlite_err),
            Conn::Postgres { .. } => self.on_postgres(&mut conn, |c| {
                c.batch_execute(crate::catalog::policy_store::POLICY_TABLES)
            }),
        };
        made.map_err(crate::error::from_iceberg)?;
        self.policies_ready
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }
}

/// The value of a statement parameter, which in the catalog's tables is always text.
pub(super) type Args<'a> = &'a [&'a str];

impl Db {
    pub(super) fn conn(&self) -> Result<std::sync::MutexGuard<'_, Conn>> {
        Ok(self.conn.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Runs a query of text columns. `sql` numbers its parameters `$1`, `$2`, … (SQLite reads them
    /// as `?1`, `?2`, …).
    pub(super) fn query(&self, sql: &str, args: Args) -> Result<Vec<Vec<Option<String>>>> {
        let mut conn = self.conn()?;
        match &mut *conn {
            Conn::Sqlite(c) => {
                // Kept compiled by the connection: planning a query looks tables up by the same
                // few statements.
                let mut stmt = c
                    .prepare_cached(&sql.replace('$', "?"))
                    .map_err(sqlite_err)?;
                let columns = stmt.column_count();
                let rows = stmt
                    .query_map(rusqlite::params_from_iter(args), |r| {
                        (0..columns)
                            .map(|i| r.get::<_, Option<String>>(i))
                            .collect()
                    })
                    .map_err(sqlite_err)?
                    .collect::<rusqlite::Result<Vec<Vec<Option<String>>>>>()
                    .map_err(sqlite_err)?;
                Ok(rows)
            }
            Conn::Postgres { .. } => {
                let read = |client: &mut postgres::Client| {
                    let params: Vec<&(dyn postgres::types::ToSql + Sync)> =
                        args.iter().map(|a| a as _).collect();
                    client.query(sql, &params)?.iter().map(text_row).collect()
                };
                let connected = |conn: &Conn| {
                    matches!(
                        conn,
                        Conn::Postgres {
                            client: Some(_),
                            ..
                        }
                    )
                };
                let had = connected(&conn);
                match self.on_postgres(&mut conn, read) {
                    // The first use of a connection the database dropped (it restarted) fails
                    // having done nothing: a read is tried once more, on a new connection.
                    Err(_) if had && !connected(&conn) => self.on_postgres(&mut conn, read),
                    result => result,
                }
            }
        }
    }

    /// Runs a change; `WriteError::Taken` if it broke a key.
    pub(super) fn execute(&self, sql: &str, args: Args) -> std::result::Result<u64, WriteError> {
        let mut conn = self.conn()?;
        match &mut *conn {
            Conn::Sqlite(c) => {
                match c.execute(&sql.replace('$', "?"), rusqlite::params_from_iter(args)) {
                    Ok(n) => Ok(n as u64),
                    Err(rusqlite::Error::SqliteFailure(f, _))
                        if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                    {
                        Err(WriteError::Taken)
                    }
                    Err(e) => Err(WriteError::Failed(sqlite_err(e))),
                }
            }
            Conn::Postgres { .. } => {
                let mut taken = false;
                let result = self.on_postgres(&mut conn, |client| {
                    let params: Vec<&(dyn postgres::types::ToSql + Sync)> =
                        args.iter().map(|a| a as _).collect();
                    client.execute(sql, &params).inspect_err(|e| {
                        taken = e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION);
                    })
                });
                match result {
                    Ok(n) => Ok(n),
                    Err(_) if taken => Err(WriteError::Taken),
                    Err(e) => Err(WriteError::Failed(e)),
                }
            }
        }
    }

    /// `execute` for changes that break no key in normal use.
    pub(super) fn change(&self, sql: &str, args: Args) -> Result<u64> {
        self.execute(sql, args).map_err(|e| match e {
            WriteError::Taken => Error::new(ErrorKind::Unexpected, "catalog row already exists"),
            WriteError::Failed(e) => e,
        })
    }

    /// Runs `f` on the PostgreSQL client, connecting (and creating the catalog's tables) first if
    /// there is no live connection. A connection that failed is dropped, so the next call connects
    /// again.
    pub(super) fn on_postgres<T>(
        &self,
        conn: &mut Conn,
        f: impl FnOnce(&mut postgres::Client) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        let name = &self.name;
        let Conn::Postgres {
            config,
            address,
            client,
        } = conn
        else {
            return Err(Error::new(
                ErrorKind::Unexpected,
                "not a PostgreSQL catalog",
            ));
        };
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            let mut fresh = config
                .connect(postgres::NoTls)
                .map_err(|e| postgres_err(name, address, &e))?;
            // Create or change the catalog's tables only when they need it: a login that may only
            // read and write the rows of existing tables works too.
            let present: Vec<String> = fresh
                .query(
                    "SELECT column_name::text FROM information_schema.columns
                     WHERE table_schema = current_schema() AND table_name = 'iceberg_tables'",
                    &[],
                )
                .map_err(|e| postgres_err(name, address, &e))?
                .iter()
                .filter_map(|r| r.try_get::<_, String>(0).ok())
                .collect();
            let namespaces = fresh
                .query(
                    "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema()
                     AND table_name = 'iceberg_namespace_properties'",
                    &[],
                )
                .map_err(|e| postgres_err(name, address, &e))?;
            if present.is_empty() || namespaces.is_empty() {
                fresh
                    .batch_execute(CREATE_TABLES)
                    .map_err(|e| postgres_err(name, address, &e))?;
            } else if !present.iter().any(|c| c == "iceberg_type") {
                fresh
                    .batch_execute(ADD_TYPE_COLUMN)
                    .map_err(|e| postgres_err(name, address, &e))?;
            }
            *client = Some(Box::new(fresh));
        }
        let Some(live) = client.as_mut() else {
            return Err(Error::new(ErrorKind::Unexpected, "no catalog connection"));
        };
        match f(live) {
            Ok(v) => Ok(v),
            Err(e) => {
                if lost(&e) || live.is_closed() {
                    *client = None;
                }
                Err(postgres_err(name, address, &e))
            }
        }
    }

    pub(super) fn strings(&self, sql: &str, args: Args) -> Result<Vec<String>> {
        Ok(self
            .query(sql, args)?
            .into_iter()
            .filter_map(|row| row.into_iter().next().flatten())
            .collect())
    }

    /// Namespace names, sorted.
    pub fn namespace_names(&self) -> Result<Vec<String>> {
        self.strings(
            "SELECT namespace FROM iceberg_namespace_properties WHERE catalog_name = $1
             UNION SELECT table_namespace FROM iceberg_tables WHERE catalog_name = $1
             ORDER BY 1",
            &[&self.name],
        )
    }

    /// Table names in a namespace, sorted.
    pub fn table_names(&self, namespace: &str) -> Result<Vec<String>> {
        self.strings(
            "SELECT table_name FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2
             AND (iceberg_type IS NULL OR iceberg_type = 'TABLE') ORDER BY 1",
            &[&self.name, namespace],
        )
    }

    pub(super) fn namespace_exists_sync(&self, ns: &NamespaceIdent) -> Result<bool> {
        let key = ns_key(ns);
        let found = self.strings(
            "SELECT namespace FROM iceberg_namespace_properties WHERE catalog_name = $1 AND namespace = $2
             UNION SELECT table_namespace FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2",
            &[&self.name, &key],
        )?;
        Ok(!found.is_empty())
    }

    pub(super) fn create_namespace_sync(
        &self,
        ns: &NamespaceIdent,
        properties: &HashMap<String, String>,
    ) -> Result<()> {
        let key = ns_key(ns);
        let exists = || {
            Error::new(
                ErrorKind::NamespaceAlreadyExists,
                format!("schema '{key}' already exists"),
            )
        };
        let marked = self.strings(
            "SELECT namespace FROM iceberg_namespace_properties WHERE catalog_name = $1 AND namespace = $2",
            &[&self.name, &key],
        )?;
        if !marked.is_empty() {
            return Err(exists());
        }
        let mut props: Vec<(&str, &str)> = properties
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if props.is_empty() {
            props.push((EXISTS_PROPERTY, "true"));
        }
        for (k, v) in props {
            match self.execute(
                "INSERT INTO iceberg_namespace_properties VALUES ($1, $2, $3, $4)",
                &[&self.name, &key, k, v],
            ) {
                Ok(_) => {}
                // Someone created it meanwhile.
                Err(WriteError::Taken) => return Err(exists()),
                Err(WriteError::Failed(e)) => return Err(e),
            }
        }
        Ok(())
    }

    /// Records a new table's row; `WriteError::Taken` if the name is taken.
    pub(super) fn insert_table(
        &self,
        ident: &TableIdent,
        metadata_location: &str,
    ) -> std::result::Result<u64, WriteError> {
        self.insert_row(ident, metadata_location, "TABLE")
    }

    /// Records a new row of `kind` (`TABLE` or `VIEW`); `WriteError::Taken` if the name is taken,
    /// by a table or a view.
    pub(super) fn insert_row(
        &self,
        ident: &TableIdent,
        metadata_location: &str,
        kind: &str,
    ) -> std::result::Result<u64, WriteError> {
        self.execute(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name,
             metadata_location, previous_metadata_location, iceberg_type)
             VALUES ($1, $2, $3, $4, NULL, $5)",
            &[
                &self.name,
                &ns_key(&ident.namespace),
                &ident.name,
                metadata_location,
                kind,
            ],
        )
    }

    /// Points a table's or view's row at new metadata if it still points at `old` (which names
    /// that one row); false if it does not.
    pub(super) fn swap_metadata(&self, ident: &TableIdent, old: &str, new: &str) -> Result<bool> {
        let changed = self.change(
            "UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = $2
             WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5
             AND metadata_location = $2",
            &[new, old, &self.name, &ns_key(&ident.namespace), &ident.name],
        )?;
        Ok(changed == 1)
    }

    /// Removes a table's row; false if there was none.
    pub(super) fn delete_table(&self, ident: &TableIdent) -> Result<bool> {
        let removed = self.change(
            "DELETE FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2
             AND table_name = $3 AND (iceberg_type IS NULL OR iceberg_type = 'TABLE')",
            &[&self.name, &ns_key(&ident.namespace), &ident.name],
        )?;
        Ok(removed > 0)
    }

    pub(super) fn drop_namespace(&self, ns: &NamespaceIdent) -> Result<()> {
        let key = ns_key(ns);
        if !self.namespace_exists_sync(ns)? {
            return Err(Error::new(
                ErrorKind::NamespaceNotFound,
                format!("schema '{key}' does not exist"),
            ));
        }
        if !self.table_names(&key)?.is_empty() || !self.view_names(&key)?.is_empty() {
            return Err(Error::new(
                ErrorKind::PreconditionFailed,
                format!("schema '{key}' is not empty"),
            ));
        }
        self.change(
            "DELETE FROM iceberg_namespace_properties WHERE catalog_name = $1 AND namespace = $2",
            &[&self.name, &key],
        )?;
        Ok(())
    }

    /// A namespace's properties (without the marker row of one that has none).
    pub(super) fn namespace_properties(
        &self,
        ns: &NamespaceIdent,
    ) -> Result<HashMap<String, String>> {
        if !self.namespace_exists_sync(ns)? {
            return Err(Error::new(
                ErrorKind::NamespaceNotFound,
                format!("schema '{}' does not exist", ns_key(ns)),
            ));
        }
        let rows = self.query(
            "SELECT property_key, property_value FROM iceberg_namespace_properties
             WHERE catalog_name = $1 AND namespace = $2",
            &[&self.name, &ns_key(ns)],
        )?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let mut row = row.into_iter();
                Some((row.next()??, row.next()??))
            })
            .filter(|(k, _)| k != EXISTS_PROPERTY)
            .collect())
    }

    pub(super) fn metadata_location(&self, ident: &TableIdent) -> Result<String> {
        let found = self.strings(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1
             AND table_namespace = $2 AND table_name = $3
             AND (iceberg_type IS NULL OR iceberg_type = 'TABLE')",
            &[&self.name, &ns_key(&ident.namespace), &ident.name],
        )?;
        found.into_iter().next().ok_or_else(|| {
            Error::new(
                ErrorKind::TableNotFound,
                format!(
                    "table '{}.{}' does not exist",
                    ns_key(&ident.namespace),
                    ident.name
                ),
            )
        })
    }

    /// View names in a namespace, sorted.
    pub fn view_names(&self, namespace: &str) -> Result<Vec<String>> {
        self.strings(
            "SELECT table_name FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2
             AND iceberg_type = 'VIEW' ORDER BY 1",
            &[&self.name, namespace],
        )
    }

    /// Where a view's metadata is, if there is a view of that name.
    pub(super) fn view_location(&self, ident: &TableIdent) -> Result<Option<String>> {
        Ok(self
            .strings(
                "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1
                 AND table_namespace = $2 AND table_name = $3 AND iceberg_type = 'VIEW'",
                &[&self.name, &ns_key(&ident.namespace), &ident.name],
            )?
            .into_iter()
            .next())
    }

    /// Removes a view's row; false if there was none.
    pub(super) fn delete_view(&self, ident: &TableIdent) -> Result<bool> {
        let removed = self.change(
            "DELETE FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2
             AND table_name = $3 AND iceberg_type = 'VIEW'",
            &[&self.name, &ns_key(&ident.namespace), &ident.name],
        )?;
        Ok(removed > 0)
    }

    pub(super) fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> Result<()> {
        let changed = self.execute(
            "UPDATE iceberg_tables SET table_namespace = $1, table_name = $2
             WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5
             AND (iceberg_type IS NULL OR iceberg_type = 'TABLE')",
            &[
                &ns_key(&dest.namespace),
                &dest.name,
                &self.name,
                &ns_key(&src.namespace),
                &src.name,
            ],
        );
        match changed {
            Ok(0) => Err(Error::new(
                ErrorKind::TableNotFound,
                format!("table '{}' does not exist", src.name),
            )),
            Ok(_) => Ok(()),
            Err(WriteError::Taken) => Err(Error::new(
                ErrorKind::TableAlreadyExists,
                format!("table '{}' already exists", dest.name),
            )),
            Err(WriteError::Failed(e)) => Err(e),
        }
    }
}

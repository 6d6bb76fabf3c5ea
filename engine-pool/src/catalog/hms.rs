//! Iceberg tables registered in a Hive Metastore, read through its Thrift API.
//!
//! An Iceberg table in HMS is an entry whose parameters say `table_type = ICEBERG` and name the
//! table's current metadata file (`metadata_location`); everything else is in that file. SQE asks
//! HMS for databases (namespaces), for the Iceberg tables among a database's tables and for a
//! table's metadata location, and reads the table as any other. It does not write: committing
//! through HMS needs its table locks, which iceberg-rust 0.10.1 does not take, so every change is
//! refused with a message that says so.
//!
//! Views are entries of type `VIRTUAL_VIEW`. SQE reads the two kinds other engines write: Trino's
//! (its definition as base64 JSON in the view text, `/* Presto View: … */`) and Iceberg's
//! (`table_type = iceberg-view`, a view metadata file). A view of Hive's own (HiveQL) is refused
//! by name.
//!
//! HMS has no notion of the caller's token here (no Kerberos, no SASL): the catalog is reached the
//! same way for every session. Calls go over one connection at a time; a connection that broke
//! while idle is opened again once.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use iceberg::io::{FileIO, FileIOBuilder};
use iceberg::spec::TableMetadata;
use iceberg::table::Table;
use iceberg::{
    Catalog, Error, ErrorKind, Namespace, NamespaceIdent, Result, TableCommit, TableCreation,
    TableIdent,
};
use sqe_sessions::ErrorCode;

use super::backend::SqeCatalog;
use super::storage::CatalogStorageFactory;
use super::thrift::{Call, ThriftError, Value, read_reply};
use super::view::{self, ViewDefinition};
use crate::error::CatalogRefusal;
use crate::files::policy::Confinement;

/// A Hive Metastore as the configuration mounts it.
#[derive(Clone)]
pub struct HmsConfig {
    /// `thrift://host:port` (the port defaults to 9083).
    pub uri: String,
    /// File IO properties for the tables' storage (`s3.endpoint`, …).
    pub properties: BTreeMap<String, String>,
    /// Where the catalog's tables keep their files, as the operator declares it (see
    /// [`Confinement`]).
    pub locations: Vec<String>,
}

/// Property names, not their values (which may be storage keys).
impl fmt::Debug for HmsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HmsConfig")
            .field("uri", &self.uri)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .field("locations", &self.locations)
            .finish()
    }
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Tables asked for in one `get_table_objects_by_name`.
const TABLES_PER_CALL: usize = 200;
/// Tables read and kept (with their manifests cached), by name and metadata file.
const CACHED_TABLES: usize = 256;

pub struct HmsCatalog {
    name: String,
    uri: String,
    address: String,
    file_io: FileIO,
    conn: Arc<Mutex<Option<Connection>>>,
    seq: AtomicI32,
    tables: Mutex<HashMap<(String, String), Table>>,
}

impl fmt::Debug for HmsCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HmsCatalog")
            .field("name", &self.name)
            .field("uri", &self.uri)
            .finish()
    }
}

struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Connection {
    fn open(address: &str) -> std::io::Result<Self> {
        let mut last = None;
        for addr in address.to_socket_addrs()? {
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(stream) => {
                    stream.set_read_timeout(Some(CALL_TIMEOUT))?;
                    stream.set_write_timeout(Some(CALL_TIMEOUT))?;
                    stream.set_nodelay(true)?;
                    return Ok(Self {
                        reader: BufReader::new(stream.try_clone()?),
                        writer: stream,
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::ErrorKind::AddrNotAvailable.into()))
    }

    fn round_trip(
        &mut self,
        call: &[u8],
        method: &str,
        seq: i32,
    ) -> std::result::Result<Value, ThriftError> {
        self.writer.write_all(call)?;
        self.writer.flush()?;
        read_reply(&mut self.reader, method, seq)
    }
}

/// Sends `call` on the open connection, or a new one; a connection that fails before answering
/// was perhaps closed by the server while idle, and gets one fresh try (every call here reads).
fn exchange(
    conn: &mut Option<Connection>,
    address: &str,
    call: &[u8],
    method: &str,
    seq: i32,
) -> std::result::Result<Value, ThriftError> {
    loop {
        let fresh = conn.is_none();
        let open = match conn {
            Some(open) => open,
            None => conn.insert(Connection::open(address)?),
        };
        match open.round_trip(call, method, seq) {
            Ok(value) => return Ok(value),
            // The server refused the call and the reply was read whole: the stream is in step.
            Err(e @ ThriftError::Application(_)) => return Err(e),
            Err(ThriftError::Io(_)) if !fresh => *conn = None,
            Err(e) => {
                *conn = None;
                return Err(e);
            }
        }
    }
}

/// What a call answered: its result, or the exception HMS declared for it (field id, message).
enum Answer {
    Value(Value),
    Refused(i16, String),
}

impl HmsCatalog {
    pub fn new(name: &str, config: &HmsConfig, confinement: Confinement) -> Result<Self> {
        let invalid =
            |m: String| Error::new(ErrorKind::DataInvalid, format!("catalog '{name}': {m}"));
        let rest = config.uri.strip_prefix("thrift://").ok_or_else(|| {
            invalid(format!(
                "uri must be thrift://host:port, got '{}'",
                config.uri
            ))
        })?;
        let host_port = rest.trim_end_matches('/');
        if host_port.is_empty() || host_port.contains('/') {
            return Err(invalid(format!(
                "uri must be thrift://host:port, got '{}'",
                config.uri
            )));
        }
        let address = if host_port
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
            host_port.to_string()
        } else {
            format!("{host_port}:9083")
        };
        let factory = CatalogStorageFactory::new(name, confinement);
        let file_io = FileIOBuilder::new(Arc::new(factory))
            .with_props(config.properties.iter())
            .build();
        Ok(Self {
            name: name.to_string(),
            uri: config.uri.clone(),
            address,
            file_io,
            conn: Arc::new(Mutex::new(None)),
            seq: AtomicI32::new(1),
            tables: Mutex::new(HashMap::new()),
        })
    }

    fn refusal(&self, code: ErrorCode, message: String) -> Error {
        Error::new(ErrorKind::Unexpected, message.clone())
            .with_source(CatalogRefusal { code, message })
    }

    /// Calls `method` with `args` (built on a [`Call`]) on the blocking pool.
    async fn call(&self, method: &'static str, args: impl FnOnce(Call) -> Call) -> Result<Answer> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let bytes = args(Call::new(method, seq)).finish();
        let (conn, address) = (self.conn.clone(), self.address.clone());
        let result = tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            exchange(&mut conn, &address, &bytes, method, seq)
        })
        .await
        .map_err(|e| Error::new(ErrorKind::Unexpected, format!("catalog call failed: {e}")))?;
        let body = result.map_err(|e| {
            let (name, uri) = (&self.name, &self.uri);
            match e {
                ThriftError::Io(e) => self.refusal(
                    ErrorCode::External,
                    format!("catalog '{name}' cannot be reached at {uri}: {e}"),
                ),
                other => self.refusal(
                    ErrorCode::External,
                    format!("catalog '{name}' (Hive Metastore at {uri}) failed {method}: {other}"),
                ),
            }
        })?;
        if let Some(value) = body.field(0) {
            return Ok(Answer::Value(value.clone()));
        }
        let first = match &body {
            Value::Struct(fields) => fields.first(),
            _ => None,
        };
        match first {
            Some((id, exception)) => {
                let message = exception.field(1).and_then(Value::as_str).unwrap_or("");
                Ok(Answer::Refused(*id, message.to_string()))
            }
            None => Err(self.refusal(
                ErrorCode::External,
                format!(
                    "catalog '{}' (Hive Metastore at {}) answered {method} with nothing",
                    self.name, self.uri
                ),
            )),
        }
    }

    /// What HMS said when it refused a call for a reason SQE does not turn into "not found".
    fn answered(&self, method: &str, message: &str) -> Error {
        self.refusal(
            ErrorCode::External,
            format!(
                "catalog '{}' (Hive Metastore at {}) refused {method}: {message}",
                self.name, self.uri
            ),
        )
    }

    fn refused(&self, what: &str) -> Error {
        Error::new(ErrorKind::FeatureUnsupported, self.why_read_only(what))
    }

    fn why_read_only(&self, what: &str) -> String {
        format!(
            "catalog '{}' is a Hive Metastore, which SQE reads but does not change: {what} is not possible through it yet (iceberg-rust 0.10.1 cannot commit through HMS); use pyiceberg, Spark or Trino for that",
            self.name
        )
    }

    /// Every entry of a database: its tables and views, as `get_table_objects_by_name` gives them.
    async fn entries(&self, namespace: &NamespaceIdent) -> Result<Vec<Value>> {
        let db = Self::database(namespace)?;
        let name = db.clone();
        let names = match self.call("get_all_tables", |c| c.string(1, &name)).await? {
            Answer::Value(names) => names.strings(),
            Answer::Refused(_, message) => return Err(self.answered("get_all_tables", &message)),
        };
        // HMS lists no table for a database that does not exist, rather than refusing.
        if names.is_empty() && !self.namespace_exists(namespace).await? {
            return Err(Error::new(
                ErrorKind::NamespaceNotFound,
                format!("namespace '{db}' does not exist"),
            ));
        }
        let mut all = Vec::new();
        for chunk in names.chunks(TABLES_PER_CALL) {
            let (name, chunk) = (db.clone(), chunk.to_vec());
            match self
                .call("get_table_objects_by_name", |c| {
                    c.string(1, &name).strings(2, &chunk)
                })
                .await?
            {
                Answer::Value(entries) => {
                    all.extend(entries.as_list().unwrap_or_default().to_vec())
                }
                Answer::Refused(_, message) => {
                    return Err(self.answered("get_table_objects_by_name", &message));
                }
            }
        }
        Ok(all)
    }

    fn database(namespace: &NamespaceIdent) -> Result<String> {
        match namespace.as_ref().as_slice() {
            [db] => Ok(db.clone()),
            _ => Err(Error::new(
                ErrorKind::NamespaceNotFound,
                format!(
                    "namespace '{}' does not exist: a Hive Metastore has one level of databases",
                    namespace.join(".")
                ),
            )),
        }
    }

    /// The HMS entry of a table or view (`get_table`), if there is one.
    async fn entry(&self, db: &str, table: &str) -> Result<Option<Value>> {
        match self
            .call("get_table", |c| c.string(1, db).string(2, table))
            .await?
        {
            Answer::Value(entry) => Ok(Some(entry)),
            // get_table's exceptions: 1 MetaException, 2 NoSuchObjectException.
            Answer::Refused(2, _) => Ok(None),
            Answer::Refused(_, message) => Err(self.answered("get_table", &message)),
        }
    }

    /// The metadata location of `ident`, if it is an Iceberg table.
    async fn metadata_location(&self, ident: &TableIdent) -> Result<String> {
        let db = Self::database(&ident.namespace)?;
        let table = ident.name.clone();
        let not_found = || {
            Error::new(
                ErrorKind::TableNotFound,
                format!("table '{db}.{table}' does not exist"),
            )
        };
        let entry = self.entry(&db, &table).await?.ok_or_else(not_found)?;
        let param = |key: &str| param(&entry, key);
        if !is_iceberg(&entry) {
            return Err(Error::new(
                ErrorKind::FeatureUnsupported,
                format!(
                    "'{}.{db}.{table}' is a Hive table, not an Iceberg table: SQE reads only Iceberg tables from a Hive Metastore",
                    self.name
                ),
            ));
        }
        param("metadata_location")
            .map(str::to_string)
            .ok_or_else(|| {
                self.answered(
                    "get_table",
                    &format!("the Iceberg table '{db}.{table}' has no metadata_location"),
                )
            })
    }
}

/// A parameter of an HMS entry (Table's field 9), its key in any case.
fn param<'a>(entry: &'a Value, key: &str) -> Option<&'a str> {
    entry
        .field(9)
        .map(Value::string_pairs)
        .unwrap_or_default()
        .into_iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
}

fn is_iceberg(entry: &Value) -> bool {
    param(entry, "table_type").is_some_and(|t| t.eq_ignore_ascii_case("iceberg"))
}

/// What an HMS entry that is a view holds.
enum HmsView {
    /// An Iceberg view: its metadata file.
    Iceberg(String),
    /// A view Trino created: its definition, base64 JSON.
    Trino(String),
    /// A view of Hive's own (HiveQL), or one SQE cannot place.
    Hive,
}

/// The view an HMS entry is, if it is one (Table's field 12 is its type, 10 its view text).
fn view_of(entry: &Value) -> Option<HmsView> {
    let table_type = entry.field(12).and_then(Value::as_str)?;
    if !table_type.eq_ignore_ascii_case("VIRTUAL_VIEW") {
        return None;
    }
    if param(entry, "table_type").is_some_and(|t| t.eq_ignore_ascii_case("iceberg-view")) {
        return Some(match param(entry, "metadata_location") {
            Some(location) => HmsView::Iceberg(location.to_string()),
            None => HmsView::Hive,
        });
    }
    let text = entry.field(10).and_then(Value::as_str).unwrap_or("").trim();
    Some(
        match text
            .strip_prefix("/* Presto View: ")
            .and_then(|t| t.strip_suffix("*/"))
        {
            Some(encoded) => HmsView::Trino(encoded.trim().to_string()),
            None => HmsView::Hive,
        },
    )
}

/// A view as Trino keeps it in HMS: `{"originalSql", "catalog", "schema", "columns": [{"name",
/// "type"}], "owner", "comment", …}`. Its names resolve in the view's own catalog (Trino's name
/// for that catalog may not be SQE's) and in the schema it names.
fn trino_view(encoded: &str, full: &str, db: &str) -> Result<ViewDefinition> {
    use base64::Engine as _;
    use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};
    let bad = |why: &str| {
        Error::new(
            ErrorKind::DataInvalid,
            format!(
                "view '{full}', as Trino keeps it in the Hive Metastore, cannot be read: {why}"
            ),
        )
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| bad(&e.to_string()))?;
    let definition: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| bad(&e.to_string()))?;
    let sql = definition["originalSql"]
        .as_str()
        .ok_or_else(|| bad("it has no SQL"))?;
    let columns = definition["columns"]
        .as_array()
        .ok_or_else(|| bad("it has no columns"))?;
    let mut ids = crate::types::FieldIds::default();
    let mut fields = Vec::with_capacity(columns.len());
    for column in columns {
        let name = column["name"]
            .as_str()
            .ok_or_else(|| bad("a column has no name"))?;
        let id = ids.fresh();
        // A type SQE does not read is shown as varchar; the view's query gives the real one.
        let ty = column["type"]
            .as_str()
            .and_then(|t| crate::types::trino_text_to_iceberg(t, &mut ids))
            .unwrap_or(Type::Primitive(PrimitiveType::String));
        fields.push(NestedField::optional(id, name, ty).into());
    }
    let text = |key: &str| definition[key].as_str().map(str::to_string);
    Ok(ViewDefinition {
        sql: sql.to_string(),
        default_catalog: None,
        default_schema: text("schema").unwrap_or_else(|| db.to_string()),
        schema: Schema::builder().with_fields(fields).build()?,
        comment: text("comment"),
        owner: text("owner"),
    })
}

#[async_trait]
impl Catalog for HmsCatalog {
    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> Result<Vec<NamespaceIdent>> {
        if parent.is_some() {
            return Ok(Vec::new());
        }
        match self.call("get_all_databases", |c| c).await? {
            Answer::Value(names) => Ok(names
                .strings()
                .into_iter()
                .map(NamespaceIdent::new)
                .collect()),
            Answer::Refused(_, message) => Err(self.answered("get_all_databases", &message)),
        }
    }

    async fn create_namespace(
        &self,
        _namespace: &NamespaceIdent,
        _properties: HashMap<String, String>,
    ) -> Result<Namespace> {
        Err(self.refused("creating a schema"))
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        let db = Self::database(namespace)?;
        let name = db.clone();
        match self.call("get_database", |c| c.string(1, &name)).await? {
            Answer::Value(database) => {
                let mut props: HashMap<String, String> = database
                    .field(4)
                    .map(Value::string_pairs)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                if let Some(location) = database.field(3).and_then(Value::as_str) {
                    props.insert("location".to_string(), location.to_string());
                }
                if let Some(comment) = database.field(2).and_then(Value::as_str) {
                    props.insert("comment".to_string(), comment.to_string());
                }
                Ok(Namespace::with_properties(namespace.clone(), props))
            }
            // get_database's exceptions: 1 NoSuchObjectException, 2 MetaException.
            Answer::Refused(1, _) => Err(Error::new(
                ErrorKind::NamespaceNotFound,
                format!("namespace '{db}' does not exist"),
            )),
            Answer::Refused(_, message) => Err(self.answered("get_database", &message)),
        }
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        match self.get_namespace(namespace).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NamespaceNotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn update_namespace(
        &self,
        _namespace: &NamespaceIdent,
        _properties: HashMap<String, String>,
    ) -> Result<()> {
        Err(self.refused("changing a schema"))
    }

    async fn drop_namespace(&self, _namespace: &NamespaceIdent) -> Result<()> {
        Err(self.refused("dropping a schema"))
    }

    /// The Iceberg tables of a database (HMS lists its Hive tables too; they are left out).
    async fn list_tables(&self, namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        Ok(self
            .entries(namespace)
            .await?
            .iter()
            .filter(|entry| is_iceberg(entry))
            .filter_map(|entry| entry.field(1).and_then(Value::as_str))
            .map(|table| TableIdent::new(namespace.clone(), table.to_string()))
            .collect())
    }

    async fn create_table(
        &self,
        _namespace: &NamespaceIdent,
        _creation: TableCreation,
    ) -> Result<Table> {
        Err(self.refused("creating a table"))
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<Table> {
        let location = self.metadata_location(ident).await?;
        let key = (ident.to_string(), location.clone());
        let cached = || self.tables.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(table) = cached().get(&key) {
            return Ok(table.clone());
        }
        let metadata = TableMetadata::read_from(&self.file_io, &location).await?;
        let table = Table::builder()
            .identifier(ident.clone())
            .metadata(metadata)
            .metadata_location(location)
            .file_io(self.file_io.clone())
            .readonly(true)
            .runtime(iceberg::Runtime::try_current()?)
            .build()?;
        let mut tables = cached();
        if tables.len() >= CACHED_TABLES {
            tables.clear();
        }
        tables.insert(key, table.clone());
        Ok(table)
    }

    async fn drop_table(&self, _table: &TableIdent) -> Result<()> {
        Err(self.refused("dropping a table"))
    }

    async fn purge_table(&self, _table: &TableIdent) -> Result<()> {
        Err(self.refused("dropping a table"))
    }

    async fn table_exists(&self, table: &TableIdent) -> Result<bool> {
        match self.metadata_location(table).await {
            Ok(_) => Ok(true),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::TableNotFound | ErrorKind::NamespaceNotFound
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    async fn rename_table(&self, _src: &TableIdent, _dest: &TableIdent) -> Result<()> {
        Err(self.refused("renaming a table"))
    }

    async fn register_table(&self, _table: &TableIdent, _location: String) -> Result<Table> {
        Err(self.refused("registering a table"))
    }

    async fn update_table(&self, _commit: TableCommit) -> Result<Table> {
        Err(self.refused("changing a table"))
    }
}

#[async_trait]
impl SqeCatalog for HmsCatalog {
    fn read_only(&self) -> Option<String> {
        Some(self.why_read_only("writing to a table"))
    }

    fn supports_views(&self) -> bool {
        true
    }

    async fn load_view(&self, ident: &TableIdent) -> Result<Option<ViewDefinition>> {
        let Ok(db) = Self::database(&ident.namespace) else {
            return Ok(None);
        };
        let Some(entry) = self.entry(&db, &ident.name).await? else {
            return Ok(None);
        };
        let full = format!("{}.{db}.{}", self.name, ident.name);
        match view_of(&entry) {
            None => Ok(None),
            Some(HmsView::Iceberg(location)) => {
                let metadata = view::read(&self.file_io, &location).await?;
                view::definition(&metadata).map(Some)
            }
            Some(HmsView::Trino(encoded)) => trino_view(&encoded, &full, &db).map(Some),
            Some(HmsView::Hive) => Err(Error::new(
                ErrorKind::FeatureUnsupported,
                format!(
                    "'{full}' is a Hive view (HiveQL): SQE reads the views Trino and Iceberg keep in a Hive Metastore, not Hive's own"
                ),
            )),
        }
    }

    /// The views SQE can read (Trino's and Iceberg's), sorted.
    async fn view_names(&self, namespace: &str) -> Result<Vec<String>> {
        let namespace = NamespaceIdent::new(namespace.to_string());
        let mut names: Vec<String> = self
            .entries(&namespace)
            .await?
            .iter()
            .filter(|entry| {
                matches!(
                    view_of(entry),
                    Some(HmsView::Trino(_) | HmsView::Iceberg(_))
                )
            })
            .filter_map(|entry| entry.field(1).and_then(Value::as_str).map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }

    async fn create_view(
        &self,
        _ident: &TableIdent,
        _view: view::ViewChange,
        _replace: bool,
    ) -> Result<()> {
        Err(self.refused("creating a view"))
    }

    async fn drop_view(&self, _ident: &TableIdent) -> Result<()> {
        Err(self.refused("dropping a view"))
    }
}

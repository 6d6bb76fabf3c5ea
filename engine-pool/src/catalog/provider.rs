//! DataFusion's view of an Iceberg catalog. Unlike iceberg-datafusion's providers, nothing is listed
//! once and kept: every lookup asks the catalog, so a table another process created or changed is seen
//! by the next statement. Names with a `$` suffix are Iceberg metadata tables (`"t$snapshots"`).

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::error::{DataFusionError, Result as DFResult};
use iceberg::table::Table;
use iceberg::{ErrorKind, NamespaceIdent, TableIdent};

use super::backend::{CatalogRef, SqeCatalog};
use super::metadata_tables::{MetadataTable, metadata_table_provider};
use super::scan::IcebergScanProvider;

fn df_err(e: iceberg::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

#[derive(Debug)]
pub struct IcebergCatalogProvider {
    /// The name SQE mounts it under, which its scans carry (their policies are looked up by it).
    name: String,
    catalog: CatalogRef,
}

impl IcebergCatalogProvider {
    pub fn new(name: &str, catalog: CatalogRef) -> Self {
        Self {
            name: name.to_string(),
            catalog,
        }
    }

    pub fn catalog(&self) -> &CatalogRef {
        &self.catalog
    }
}

impl CatalogProvider for IcebergCatalogProvider {
    /// A remote catalog is not listed here (DataFusion asks synchronously): the listings SQE
    /// answers itself (SHOW, information_schema, system.jdbc) list it asynchronously.
    fn schema_names(&self) -> Vec<String> {
        self.catalog.namespace_names_now().unwrap_or_default()
    }

    /// For a remote catalog any name gives a provider: whether the schema exists is the
    /// catalog's answer when a table in it is looked up.
    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        if let Some(names) = self.catalog.namespace_names_now()
            && !names.iter().any(|n| n == name)
        {
            return None;
        }
        Some(Arc::new(IcebergSchemaProvider {
            catalog_name: self.name.clone(),
            catalog: self.catalog.clone(),
            namespace: NamespaceIdent::new(name.to_string()),
        }))
    }
}

#[derive(Debug)]
pub struct IcebergSchemaProvider {
    catalog_name: String,
    catalog: CatalogRef,
    namespace: NamespaceIdent,
}

/// Loads a table, `Ok(None)` if it does not exist.
pub async fn load_table_opt(
    catalog: &dyn SqeCatalog,
    ident: &TableIdent,
) -> iceberg::Result<Option<Table>> {
    match catalog.load_table(ident).await {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A read-only provider for the table at `snapshot_id` (the current snapshot when `None`), of the
/// SQE catalog `catalog_name`.
pub async fn scan_provider(
    table: Table,
    snapshot_id: Option<i64>,
    catalog_name: &str,
    catalog: &dyn SqeCatalog,
) -> DFResult<Arc<dyn TableProvider>> {
    let table = match snapshot_id {
        Some(_) => table,
        None => read_with_current_schema(table).map_err(df_err)?,
    };
    let provider = IcebergScanProvider::try_new(table, snapshot_id)
        .map_err(df_err)?
        .in_catalog(catalog_name)
        .with_manifests(catalog.manifest_cache());
    Ok(Arc::new(provider))
}

/// iceberg-rust scans the current snapshot with the schema that snapshot was written with, so after
/// `ALTER TABLE` (before the next write) a renamed or added column is "not found". Reading the
/// current table must use the current schema; columns still resolve by field id, so pointing the
/// current snapshot at the current schema is exactly the read Trino and Spark do.
pub(crate) fn read_with_current_schema(table: Table) -> iceberg::Result<Table> {
    let metadata = table.metadata();
    let current_schema = metadata.current_schema_id();
    let Some(snapshot) = metadata.current_snapshot() else {
        return Ok(table);
    };
    if snapshot.schema_id().is_none_or(|id| id == current_schema) {
        return Ok(table);
    }
    let snapshot_id = snapshot.snapshot_id();
    let invalid = |e: serde_json::Error| {
        iceberg::Error::new(ErrorKind::DataInvalid, format!("table metadata: {e}"))
    };
    let mut json = serde_json::to_value(metadata).map_err(invalid)?;
    if let Some(snapshots) = json.get_mut("snapshots").and_then(|s| s.as_array_mut()) {
        for s in snapshots {
            if s.get("snapshot-id").and_then(|v| v.as_i64()) == Some(snapshot_id) {
                s["schema-id"] = serde_json::Value::from(current_schema);
            }
        }
    }
    let metadata: iceberg::spec::TableMetadata = serde_json::from_value(json).map_err(invalid)?;
    with_metadata(&table, metadata)
}

/// `table` (its name, files and metadata location) with `metadata` in place of its own: a view of
/// it that is never committed.
pub(crate) fn with_metadata(
    table: &Table,
    metadata: iceberg::spec::TableMetadata,
) -> iceberg::Result<Table> {
    let mut builder = Table::builder()
        .identifier(table.identifier().clone())
        .metadata(metadata)
        .file_io(table.file_io().clone())
        .runtime(iceberg::Runtime::try_current()?);
    if let Some(location) = table.metadata_location() {
        builder = builder.metadata_location(location.to_string());
    }
    builder.build()
}

#[async_trait]
impl SchemaProvider for IcebergSchemaProvider {
    fn table_names(&self) -> Vec<String> {
        self.catalog
            .table_names_now(&self.namespace.join("."))
            .unwrap_or_default()
    }

    async fn table(&self, name: &str) -> DFResult<Option<Arc<dyn TableProvider>>> {
        let (base, meta) = match name.split_once('$') {
            Some((base, kind)) => match MetadataTable::parse(kind) {
                Some(kind) => (base, Some(kind)),
                None => {
                    return Err(DataFusionError::Plan(format!(
                        "unknown metadata table '{kind}' (known: {})",
                        MetadataTable::NAMES.join(", ")
                    )));
                }
            },
            None => (name, None),
        };
        let ident = TableIdent::new(self.namespace.clone(), base.to_string());
        let Some(table) = load_table_opt(self.catalog.as_ref(), &ident)
            .await
            .map_err(df_err)?
        else {
            return Ok(None);
        };
        match meta {
            Some(kind) => Ok(Some(
                metadata_table_provider(&table, kind)
                    .await
                    .map_err(df_err)?,
            )),
            None => Ok(Some(
                scan_provider(table, None, &self.catalog_name, self.catalog.as_ref()).await?,
            )),
        }
    }

    fn table_exist(&self, name: &str) -> bool {
        self.table_names().iter().any(|n| n == name)
    }
}

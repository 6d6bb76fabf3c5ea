//! The metadata tables BI tools and drivers read on connect, in Trino's shape:
//! `information_schema` in every catalog (only that catalog's objects, Trino type names), and
//! `system.jdbc.*` / `system.metadata.*` across all catalogs.
//!
//! Everything is listed when a table is scanned, so what another process created is seen. The
//! listings of tables, views and columns go only through the schemas and tables a statement names
//! in its filters (`table_schema = 'x'`, `table_name IN (…)`, and `table_cat` in `system.jdbc`):
//! a driver asking for one table's columns reads that table alone, and a user of a catalog that
//! refuses them a listing of all its namespaces still sees the tables of the one they name.
//! A table whose metadata cannot be read is left out of listings rather than failing them.

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{CatalogProvider, CatalogProviderList, SchemaProvider, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::datasource::{MemTable, TableType};
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::{Expr, Operator, TableProviderFilterPushDown};
use iceberg::spec::{NestedFieldRef, PrimitiveType, Type};
use iceberg::{NamespaceIdent, TableIdent};

use super::provider::{IcebergCatalogProvider, load_table_opt};
use crate::types::trino_type_name;

pub const INFORMATION_SCHEMA: &str = "information_schema";

/// A catalog with Trino's `information_schema` added.
#[derive(Debug)]
pub struct WithInformationSchema {
    name: String,
    inner: Arc<dyn CatalogProvider>,
}

impl WithInformationSchema {
    pub fn new(name: impl Into<String>, inner: Arc<dyn CatalogProvider>) -> Self {
        Self {
            name: name.into(),
            inner,
        }
    }
}

impl CatalogProvider for WithInformationSchema {
    fn schema_names(&self) -> Vec<String> {
        let mut names = self.inner.schema_names();
        names.push(INFORMATION_SCHEMA.to_string());
        names.sort();
        names
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        if name == INFORMATION_SCHEMA {
            return Some(Arc::new(InformationSchema {
                catalog: (self.name.clone(), self.inner.clone()),
            }));
        }
        self.inner.schema(name)
    }
}

/// One catalog, by name. Listings see the catalog's own schemas plus `information_schema`.
type Named = (String, Arc<dyn CatalogProvider>);

/// An Iceberg catalog's provider, whose listings are asked for asynchronously (a remote catalog
/// answers nothing to DataFusion's synchronous ones).
fn iceberg_of(catalog: &Named) -> Option<&IcebergCatalogProvider> {
    catalog.1.downcast_ref::<IcebergCatalogProvider>()
}

async fn schema_names(catalog: &Named) -> Vec<String> {
    let mut names = match iceberg_of(catalog) {
        Some(iceberg) => iceberg
            .catalog()
            .namespace_names()
            .await
            .unwrap_or_default(),
        None => catalog.1.schema_names(),
    };
    if !names.iter().any(|n| n == INFORMATION_SCHEMA) {
        names.push(INFORMATION_SCHEMA.to_string());
    }
    names.sort();
    names
}

fn schema_of(catalog: &Named, schema: &str) -> Option<Arc<dyn SchemaProvider>> {
    if schema == INFORMATION_SCHEMA {
        return Some(Arc::new(InformationSchema {
            catalog: catalog.clone(),
        }));
    }
    catalog.1.schema(schema)
}

/// A column as the metadata tables show it.
struct ColumnInfo {
    name: String,
    type_name: String,
    jdbc_type: i64,
    nullable: bool,
    comment: Option<String>,
    /// A table's Iceberg field id: column privileges are kept by it.
    field_id: Option<i32>,
}

/// A table or view, with its columns when they were asked for.
struct TableInfo {
    catalog: String,
    schema: String,
    name: String,
    view: bool,
    comment: Option<String>,
    columns: Vec<ColumnInfo>,
    /// A view's SQL, when its columns were asked for.
    definition: Option<String>,
}

/// What a listing needs: just names, or each table's columns and comment too (which loads it).
#[derive(Clone, Copy, PartialEq)]
enum Detail {
    Names,
    Columns,
}

/// The catalogs, schemas and tables a statement's filters narrow a listing to (`None`: all).
#[derive(Debug, Clone, Default)]
struct Scope {
    catalogs: Option<Vec<String>>,
    schemas: Option<Vec<String>>,
    tables: Option<Vec<String>>,
}

impl Scope {
    /// From filters over a listing whose catalog, schema and table columns are `keys`.
    fn of(filters: &[Expr], keys: [&str; 3]) -> Self {
        let [catalog, schema, table] = keys.map(|k| named(filters, k));
        Self {
            catalogs: catalog,
            schemas: schema,
            tables: table,
        }
    }

    fn wants(list: &Option<Vec<String>>, name: &str) -> bool {
        list.as_ref().is_none_or(|l| l.iter().any(|n| n == name))
    }
}

/// Past this many names in an `IN` list a listing goes through everything instead: each name
/// costs a request to a remote catalog.
const MAX_SCOPED_NAMES: usize = 64;

/// The names a filter conjunct allows `column` to hold, if it allows only some: `column = 'x'`,
/// `column IN ('x', …)`, or an OR of those; sorted, each once.
fn named(filters: &[Expr], column: &str) -> Option<Vec<String>> {
    let mut names = filters.iter().find_map(|f| names_in(f, column))?;
    names.sort();
    names.dedup();
    (names.len() <= MAX_SCOPED_NAMES).then_some(names)
}

fn names_in(e: &Expr, column: &str) -> Option<Vec<String>> {
    let is_column = |e: &Expr| matches!(e, Expr::Column(c) if c.name == column);
    let text = |e: &Expr| match e {
        Expr::Literal(v, _) => literal_text(v),
        Expr::Cast(c) => match c.expr.as_ref() {
            Expr::Literal(v, _) => literal_text(v),
            _ => None,
        },
        _ => None,
    };
    match e {
        Expr::BinaryExpr(b) if b.op == Operator::Eq => {
            if is_column(&b.left) {
                text(&b.right).map(|v| vec![v])
            } else if is_column(&b.right) {
                text(&b.left).map(|v| vec![v])
            } else {
                None
            }
        }
        Expr::BinaryExpr(b) if b.op == Operator::Or => {
            let mut names = names_in(&b.left, column)?;
            names.extend(names_in(&b.right, column)?);
            Some(names)
        }
        Expr::InList(l) if !l.negated && is_column(&l.expr) => l.list.iter().map(text).collect(),
        _ => None,
    }
}

fn literal_text(v: &ScalarValue) -> Option<String> {
    v.try_as_str().flatten().map(str::to_string)
}

/// The listings made when they are scanned.
#[derive(Debug, Clone, Copy)]
enum Listing {
    InformationTables,
    InformationViews,
    InformationColumns,
    JdbcTables,
    JdbcColumns,
}

impl Listing {
    fn columns(self) -> Columns {
        match self {
            Listing::InformationTables => TABLES,
            Listing::InformationViews => VIEWS,
            Listing::InformationColumns => COLUMNS,
            Listing::JdbcTables => JDBC_TABLES_COLUMNS,
            Listing::JdbcColumns => JDBC_COLUMNS,
        }
    }

    /// Its catalog, schema and table columns.
    fn keys(self) -> [&'static str; 3] {
        match self {
            Listing::JdbcTables | Listing::JdbcColumns => JDBC_KEYS,
            _ => INFORMATION_KEYS,
        }
    }
}

/// A metadata table listed when it is scanned, through the [`Scope`] of the scan's filters.
#[derive(Debug)]
struct Deferred {
    listing: Listing,
    catalogs: Vec<Named>,
}

impl Deferred {
    fn table(listing: Listing, catalogs: Vec<Named>) -> Arc<dyn TableProvider> {
        Arc::new(Self { listing, catalogs })
    }
}

#[async_trait]
impl TableProvider for Deferred {
    fn schema(&self) -> SchemaRef {
        schema_of_columns(self.listing.columns())
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    /// Every filter comes to the scan to narrow the listing, and is applied again above it.
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DFResult<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn datafusion::catalog::Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        let scope = Scope::of(filters, self.listing.keys());
        let catalogs = &self.catalogs;
        let listed = match self.listing {
            Listing::InformationTables => information_tables(catalogs, &scope).await?,
            Listing::InformationViews => information_views(catalogs, &scope).await?,
            Listing::InformationColumns => information_columns(catalogs, &scope).await?,
            Listing::JdbcTables => jdbc_tables(catalogs, &scope).await?,
            Listing::JdbcColumns => jdbc_columns(catalogs, &scope).await?,
        };
        listed.scan(state, projection, filters, limit).await
    }
}

/// The schemas named in `only` that `catalog` has, as the catalog spells them (a catalog that
/// matches names in any case must not list a schema under the caller's spelling of it).
async fn scoped_schemas(catalog: &Named, only: &[String]) -> Vec<String> {
    let known = schema_names(catalog).await;
    let iceberg = iceberg_of(catalog);
    if known.iter().any(|n| n != INFORMATION_SCHEMA) || iceberg.is_none() {
        return only.iter().filter(|n| known.contains(n)).cloned().collect();
    }
    // A catalog that lists no schema to this caller (a REST catalog may refuse them the whole
    // listing) is asked for each named one.
    let mut found = Vec::new();
    for name in only {
        if name == INFORMATION_SCHEMA {
            found.push(name.clone());
            continue;
        }
        let asked = NamespaceIdent::new(name.clone());
        let answer = iceberg.map(|i| i.catalog());
        if let Some(catalog) = answer
            && let Ok(namespace) = catalog.get_namespace(&asked).await
            && namespace.name().join(".") == *name
        {
            found.push(name.clone());
        }
    }
    found
}

async fn list_tables(catalogs: &[Named], detail: Detail, scope: &Scope) -> Vec<TableInfo> {
    let mut out = Vec::new();
    for catalog in catalogs {
        if !Scope::wants(&scope.catalogs, &catalog.0) {
            continue;
        }
        let schemas = match &scope.schemas {
            Some(only) => scoped_schemas(catalog, only).await,
            None => schema_names(catalog).await,
        };
        for schema_name in schemas {
            let Some(schema) = schema_of(catalog, &schema_name) else {
                continue;
            };
            let mut names: Vec<(String, bool)> = match iceberg_of(catalog) {
                Some(iceberg) if schema_name != INFORMATION_SCHEMA => {
                    let catalog = iceberg.catalog();
                    let tables = catalog.table_names(&schema_name).await.unwrap_or_default();
                    let views = catalog.view_names(&schema_name).await.unwrap_or_default();
                    let tables = tables.into_iter().map(|t| (t, false));
                    tables.chain(views.into_iter().map(|v| (v, true))).collect()
                }
                _ => schema
                    .table_names()
                    .into_iter()
                    .map(|t| (t, false))
                    .collect(),
            };
            names.retain(|(name, _)| Scope::wants(&scope.tables, name));
            names.sort();
            for (name, view) in names {
                let mut info = TableInfo {
                    catalog: catalog.0.clone(),
                    schema: schema_name.clone(),
                    name,
                    view,
                    comment: None,
                    columns: Vec::new(),
                    definition: None,
                };
                if detail == Detail::Columns && !describe(catalog, &*schema, &mut info).await {
                    continue;
                }
                out.push(info);
            }
        }
    }
    out
}

/// The views of `catalogs`, with their SQL.
async fn list_views(catalogs: &[Named], scope: &Scope) -> Vec<TableInfo> {
    let mut views = list_tables(catalogs, Detail::Names, scope).await;
    views.retain(|t| t.view);
    let mut out = Vec::with_capacity(views.len());
    for mut info in views {
        let Some(catalog) = catalogs.iter().find(|c| c.0 == info.catalog) else {
            continue;
        };
        let Some(schema) = schema_of(catalog, &info.schema) else {
            continue;
        };
        if describe(catalog, &*schema, &mut info).await {
            out.push(info);
        }
    }
    out
}

/// Fills in a table's columns and comment; false if the table cannot be read.
async fn describe(catalog: &Named, schema: &dyn SchemaProvider, info: &mut TableInfo) -> bool {
    if let Some(columns) = generated_columns(schema, &info.name) {
        info.columns = columns
            .iter()
            .map(|(name, ty)| ColumnInfo {
                name: name.to_string(),
                type_name: sqe_functions::type_name(ty),
                jdbc_type: arrow_jdbc_type(ty),
                nullable: true,
                comment: None,
                field_id: None,
            })
            .collect();
        return true;
    }
    // Iceberg tables: their own schema (Iceberg types, column docs) and the `comment` property.
    if let Some(iceberg) = catalog.1.downcast_ref::<IcebergCatalogProvider>() {
        let ident = TableIdent::from_strs([info.schema.as_str(), info.name.as_str()]);
        let Ok(ident) = ident else { return false };
        if info.view {
            let Ok(Some(view)) = iceberg.catalog().load_view(&ident).await else {
                return false;
            };
            info.comment = view.comment;
            info.definition = Some(view.sql);
            info.columns = iceberg_columns(view.schema.as_struct().fields(), false);
            return true;
        }
        let Ok(Some(table)) = load_table_opt(iceberg.catalog().as_ref(), &ident).await else {
            return false;
        };
        let metadata = table.metadata();
        info.comment = metadata.properties().get("comment").cloned();
        info.columns = iceberg_columns(metadata.current_schema().as_struct().fields(), true);
        return true;
    }
    match schema.table(&info.name).await {
        Ok(Some(table)) => {
            info.view = table.table_type() == TableType::View;
            info.columns = table
                .schema()
                .fields()
                .iter()
                .map(|f| ColumnInfo {
                    name: f.name().clone(),
                    type_name: sqe_functions::type_name(f.data_type()),
                    jdbc_type: arrow_jdbc_type(f.data_type()),
                    nullable: f.is_nullable(),
                    comment: None,
                    field_id: None,
                })
                .collect();
            true
        }
        _ => false,
    }
}

/// Columns of an Iceberg table (`table`, with their field ids) or view.
fn iceberg_columns(fields: &[NestedFieldRef], table: bool) -> Vec<ColumnInfo> {
    fields
        .iter()
        .map(|f| ColumnInfo {
            name: f.name.clone(),
            type_name: trino_type_name(&f.field_type),
            jdbc_type: iceberg_jdbc_type(&f.field_type),
            nullable: !f.required,
            comment: f.doc.clone(),
            field_id: table.then_some(f.id),
        })
        .collect()
}

// java.sql.Types codes, as Trino's JDBC metadata reports them.
const JDBC_BOOLEAN: i64 = 16;
const JDBC_TINYINT: i64 = -6;
const JDBC_SMALLINT: i64 = 5;
const JDBC_INTEGER: i64 = 4;
const JDBC_BIGINT: i64 = -5;
const JDBC_REAL: i64 = 7;
const JDBC_DOUBLE: i64 = 8;
const JDBC_DECIMAL: i64 = 3;
const JDBC_VARCHAR: i64 = 12;
const JDBC_VARBINARY: i64 = -3;
const JDBC_DATE: i64 = 91;
const JDBC_TIME: i64 = 92;
const JDBC_TIMESTAMP: i64 = 93;
const JDBC_TIMESTAMP_TZ: i64 = 2014;
const JDBC_ARRAY: i64 = 2003;
const JDBC_JAVA_OBJECT: i64 = 2000;

fn iceberg_jdbc_type(ty: &Type) -> i64 {
    match ty {
        Type::Primitive(p) => match p {
            PrimitiveType::Boolean => JDBC_BOOLEAN,
            PrimitiveType::Int => JDBC_INTEGER,
            PrimitiveType::Long => JDBC_BIGINT,
            PrimitiveType::Float => JDBC_REAL,
            PrimitiveType::Double => JDBC_DOUBLE,
            PrimitiveType::Decimal { .. } => JDBC_DECIMAL,
            PrimitiveType::Date => JDBC_DATE,
            PrimitiveType::Time => JDBC_TIME,
            PrimitiveType::Timestamp | PrimitiveType::TimestampNs => JDBC_TIMESTAMP,
            PrimitiveType::Timestamptz | PrimitiveType::TimestamptzNs => JDBC_TIMESTAMP_TZ,
            PrimitiveType::String => JDBC_VARCHAR,
            PrimitiveType::Uuid => JDBC_JAVA_OBJECT,
            PrimitiveType::Fixed(_) | PrimitiveType::Binary => JDBC_VARBINARY,
        },
        Type::List(_) => JDBC_ARRAY,
        Type::Map(_) | Type::Struct(_) => JDBC_JAVA_OBJECT,
    }
}

fn arrow_jdbc_type(ty: &DataType) -> i64 {
    use DataType as D;
    match ty {
        D::Boolean => JDBC_BOOLEAN,
        D::Int8 | D::UInt8 => JDBC_TINYINT,
        D::Int16 | D::UInt16 => JDBC_SMALLINT,
        D::Int32 | D::UInt32 => JDBC_INTEGER,
        D::Int64 | D::UInt64 => JDBC_BIGINT,
        D::Float16 | D::Float32 => JDBC_REAL,
        D::Float64 => JDBC_DOUBLE,
        D::Decimal32(..) | D::Decimal64(..) | D::Decimal128(..) | D::Decimal256(..) => JDBC_DECIMAL,
        D::Utf8 | D::LargeUtf8 | D::Utf8View => JDBC_VARCHAR,
        D::Binary | D::LargeBinary | D::BinaryView | D::FixedSizeBinary(_) => JDBC_VARBINARY,
        D::Date32 | D::Date64 => JDBC_DATE,
        D::Time32(_) | D::Time64(_) => JDBC_TIME,
        D::Timestamp(_, None) => JDBC_TIMESTAMP,
        D::Timestamp(_, Some(_)) => JDBC_TIMESTAMP_TZ,
        D::List(_) | D::LargeList(_) | D::FixedSizeList(..) | D::ListView(_) => JDBC_ARRAY,
        _ => JDBC_JAVA_OBJECT,
    }
}

/// One value of a metadata row.
enum Cell {
    Text(Option<String>),
    Int(Option<i64>),
    Bool(Option<bool>),
}

fn text(s: impl Into<String>) -> Cell {
    Cell::Text(Some(s.into()))
}

const NULL_TEXT: Cell = Cell::Text(None);
const NULL_INT: Cell = Cell::Int(None);

/// A table of metadata rows; every column is nullable text, bigint or boolean.
fn rows_table(columns: Columns, rows: Vec<Vec<Cell>>) -> DFResult<Arc<dyn TableProvider>> {
    listed_table(columns, rows, None)
}

/// A table of rows about columns, each of the Iceberg field id in `field_ids` (or of no such
/// column), shown only to callers who may read that column.
fn column_rows_table(
    columns: Columns,
    rows: Vec<Vec<Cell>>,
    field_ids: Vec<Option<i32>>,
) -> DFResult<Arc<dyn TableProvider>> {
    listed_table(columns, rows, Some(field_ids))
}

fn schema_of_columns(columns: Columns) -> SchemaRef {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(|(name, ty)| Field::new(*name, ty.clone(), true))
            .collect::<Vec<_>>(),
    ))
}

fn listed_table(
    columns: Columns,
    rows: Vec<Vec<Cell>>,
    field_ids: Option<Vec<Option<i32>>>,
) -> DFResult<Arc<dyn TableProvider>> {
    let schema = schema_of_columns(columns);
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len());
    for (i, (_, ty)) in columns.iter().enumerate() {
        let cells = rows.iter().map(|r| &r[i]);
        let array: ArrayRef = match ty {
            DataType::Int64 => Arc::new(Int64Array::from_iter(cells.map(|c| match c {
                Cell::Int(v) => *v,
                _ => None,
            }))),
            DataType::Boolean => Arc::new(BooleanArray::from_iter(cells.map(|c| match c {
                Cell::Bool(v) => *v,
                _ => None,
            }))),
            _ => Arc::new(StringArray::from_iter(cells.map(|c| match c {
                Cell::Text(v) => v.clone(),
                _ => None,
            }))),
        };
        arrays.push(array);
    }
    let batch = RecordBatch::try_new(schema.clone(), arrays)?;
    // Rows that name a table are shown only for the tables the caller may see.
    let position = |names: &[&str]| columns.iter().position(|(n, _)| names.contains(n));
    if let (Some(c), Some(s), Some(t)) = (
        position(&["table_catalog", "table_cat"]),
        position(&["table_schema", "table_schem"]),
        position(&["table_name"]),
    ) {
        return Ok(Arc::new(Listed {
            batch,
            keys: [c, s, t],
            field_ids,
        }));
    }
    Ok(Arc::new(MemTable::try_new(schema, vec![vec![batch]])?))
}

/// What the listings may show a statement's caller, as the governance part decides it: the
/// tables they may see, and of a table the columns they may read. The catalog side only asks.
pub(crate) trait ListingRules: Send + Sync + std::fmt::Debug {
    fn sees(&self, catalog: &str, schema: &str, table: &str) -> bool;
    fn lists_column(&self, catalog: &str, schema: &str, table: &str, field_id: i32) -> bool;
}

/// The caller's [`ListingRules`], carried in a statement's config; without it (an admin), the
/// listings show everything.
#[derive(Debug, Clone)]
pub(crate) struct CallerListing(pub Arc<dyn ListingRules>);

/// Metadata rows naming tables (by catalog, schema and table), of which each caller sees those of
/// the tables they may see ([`CallerListing`] in the statement's config), and of rows about columns
/// those of the columns they may read.
#[derive(Debug)]
struct Listed {
    batch: RecordBatch,
    keys: [usize; 3],
    /// Each row's column, by Iceberg field id, for rows about columns.
    field_ids: Option<Vec<Option<i32>>>,
}

#[async_trait]
impl TableProvider for Listed {
    fn schema(&self) -> SchemaRef {
        self.batch.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn datafusion::catalog::Session,
        projection: Option<&Vec<usize>>,
        filters: &[datafusion::logical_expr::Expr],
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        let batch = match state.config().get_extension::<CallerListing>() {
            None => self.batch.clone(),
            Some(listing) => {
                let visibility = &listing.0;
                let text = |i: usize| {
                    self.batch
                        .column(self.keys[i])
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .cloned()
                };
                let (Some(c), Some(s), Some(t)) = (text(0), text(1), text(2)) else {
                    return Err(datafusion::error::DataFusionError::Internal(
                        "a listing's names are text".into(),
                    ));
                };
                let column = |r: usize| self.field_ids.as_ref().and_then(|ids| ids[r]);
                let keep: BooleanArray = (0..self.batch.num_rows())
                    .map(|r| {
                        let (c, s, t) = (c.value(r), s.value(r), t.value(r));
                        Some(match column(r) {
                            Some(id) => visibility.lists_column(c, s, t, id),
                            None => visibility.sees(c, s, t),
                        })
                    })
                    .collect();
                datafusion::arrow::compute::filter_record_batch(&self.batch, &keep)?
            }
        };
        let table = MemTable::try_new(self.batch.schema(), vec![vec![batch]])?;
        table.scan(state, projection, filters, limit).await
    }
}

const T: DataType = DataType::Utf8;
const I: DataType = DataType::Int64;
const B: DataType = DataType::Boolean;

type Columns = &'static [(&'static str, DataType)];

const SCHEMATA: Columns = &[("catalog_name", T), ("schema_name", T)];
const TABLES: Columns = &[
    ("table_catalog", T),
    ("table_schema", T),
    ("table_name", T),
    ("table_type", T),
];
const VIEWS: Columns = &[
    ("table_catalog", T),
    ("table_schema", T),
    ("table_name", T),
    ("view_definition", T),
];
const COLUMNS: Columns = &[
    ("table_catalog", T),
    ("table_schema", T),
    ("table_name", T),
    ("column_name", T),
    ("ordinal_position", I),
    ("column_default", T),
    ("is_nullable", T),
    ("data_type", T),
    ("comment", T),
    ("extra_info", T),
];
const JDBC_CATALOGS: Columns = &[("table_cat", T)];
const JDBC_SCHEMAS: Columns = &[("table_schem", T), ("table_catalog", T)];
const JDBC_TABLE_TYPES: Columns = &[("table_type", T)];
const JDBC_TABLES_COLUMNS: Columns = &[
    ("table_cat", T),
    ("table_schem", T),
    ("table_name", T),
    ("table_type", T),
    ("remarks", T),
    ("type_cat", T),
    ("type_schem", T),
    ("type_name", T),
    ("self_referencing_col_name", T),
    ("ref_generation", T),
];
const JDBC_COLUMNS: Columns = &[
    ("table_cat", T),
    ("table_schem", T),
    ("table_name", T),
    ("column_name", T),
    ("data_type", I),
    ("type_name", T),
    ("column_size", I),
    ("buffer_length", I),
    ("decimal_digits", I),
    ("num_prec_radix", I),
    ("nullable", I),
    ("remarks", T),
    ("column_def", T),
    ("sql_data_type", I),
    ("sql_datetime_sub", I),
    ("char_octet_length", I),
    ("ordinal_position", I),
    ("is_nullable", T),
    ("scope_catalog", T),
    ("scope_schema", T),
    ("scope_table", T),
    ("source_data_type", I),
    ("is_autoincrement", T),
    ("is_generatedcolumn", T),
];
const JDBC_TYPES: Columns = &[
    ("type_name", T),
    ("data_type", I),
    ("precision", I),
    ("literal_prefix", T),
    ("literal_suffix", T),
    ("create_params", T),
    ("nullable", I),
    ("case_sensitive", B),
    ("searchable", I),
    ("unsigned_attribute", B),
    ("fixed_prec_scale", B),
    ("auto_increment", B),
    ("local_type_name", T),
    ("minimum_scale", I),
    ("maximum_scale", I),
    ("sql_data_type", I),
    ("sql_datetime_sub", I),
    ("num_prec_radix", I),
];
const METADATA_CATALOGS: Columns = &[
    ("catalog_name", T),
    ("connector_id", T),
    ("connector_name", T),
];
const TABLE_COMMENTS: Columns = &[
    ("catalog_name", T),
    ("schema_name", T),
    ("table_name", T),
    ("comment", T),
];

/// The tables of one of SQE's metadata schemas, by name, with their columns.
type Tables = &'static [(&'static str, Columns)];

const INFORMATION: Tables = &[
    ("columns", COLUMNS),
    ("schemata", SCHEMATA),
    ("tables", TABLES),
    ("views", VIEWS),
];
const JDBC: Tables = &[
    ("catalogs", JDBC_CATALOGS),
    ("columns", JDBC_COLUMNS),
    ("schemas", JDBC_SCHEMAS),
    ("table_types", JDBC_TABLE_TYPES),
    ("tables", JDBC_TABLES_COLUMNS),
    ("types", JDBC_TYPES),
];
/// Trino's `system.metadata.materialized_views`: SQE has none, but dbt and BI tools ask.
const MATERIALIZED_VIEWS: Columns = &[
    ("catalog_name", T),
    ("schema_name", T),
    ("name", T),
    ("storage_catalog", T),
    ("storage_schema", T),
    ("storage_table", T),
    ("freshness", T),
    ("last_fresh_time", T),
    ("comment", T),
    ("definition", T),
];
const METADATA: Tables = &[
    ("catalogs", METADATA_CATALOGS),
    ("materialized_views", MATERIALIZED_VIEWS),
    ("table_comments", TABLE_COMMENTS),
];

fn names(tables: Tables) -> Vec<String> {
    tables.iter().map(|(n, _)| n.to_string()).collect()
}

fn columns_of(tables: Tables, table: &str) -> Option<Columns> {
    tables.iter().find(|(n, _)| *n == table).map(|(_, c)| *c)
}

/// The columns of SQE's own metadata tables, known without computing their rows (which may list
/// these very tables).
fn generated_columns(schema: &dyn SchemaProvider, table: &str) -> Option<Columns> {
    let any = schema;
    let tables = if any.is::<InformationSchema>() {
        INFORMATION
    } else if any.is::<JdbcSchema>() {
        JDBC
    } else if any.is::<MetadataSchema>() {
        METADATA
    } else {
        return None;
    };
    columns_of(tables, table)
}

/// `<catalog>.information_schema`: `schemata`, `tables`, `columns` and `views` of that catalog.
#[derive(Debug)]
struct InformationSchema {
    catalog: Named,
}

#[async_trait]
impl SchemaProvider for InformationSchema {
    fn table_names(&self) -> Vec<String> {
        names(INFORMATION)
    }

    async fn table(&self, name: &str) -> DFResult<Option<Arc<dyn TableProvider>>> {
        let table = match name {
            "schemata" => rows_table(
                SCHEMATA,
                schema_names(&self.catalog)
                    .await
                    .into_iter()
                    .map(|s| vec![text(&self.catalog.0), text(s)])
                    .collect(),
            )?,
            "tables" => Deferred::table(Listing::InformationTables, vec![self.catalog.clone()]),
            "views" => Deferred::table(Listing::InformationViews, vec![self.catalog.clone()]),
            "columns" => Deferred::table(Listing::InformationColumns, vec![self.catalog.clone()]),
            _ => return Ok(None),
        };
        Ok(Some(table))
    }

    fn table_exist(&self, name: &str) -> bool {
        columns_of(INFORMATION, name).is_some()
    }
}

/// The catalog, schema and table columns of `information_schema`'s listings.
const INFORMATION_KEYS: [&str; 3] = ["table_catalog", "table_schema", "table_name"];
/// The same in `system.jdbc`.
const JDBC_KEYS: [&str; 3] = ["table_cat", "table_schem", "table_name"];

async fn information_tables(catalogs: &[Named], scope: &Scope) -> DFResult<Arc<dyn TableProvider>> {
    rows_table(
        TABLES,
        list_tables(catalogs, Detail::Names, scope)
            .await
            .into_iter()
            .map(|t| {
                let kind = if t.view { "VIEW" } else { "BASE TABLE" };
                vec![text(t.catalog), text(t.schema), text(t.name), text(kind)]
            })
            .collect(),
    )
}

async fn information_views(catalogs: &[Named], scope: &Scope) -> DFResult<Arc<dyn TableProvider>> {
    rows_table(
        VIEWS,
        list_views(catalogs, scope)
            .await
            .into_iter()
            .map(|t| {
                let sql = Cell::Text(t.definition);
                vec![text(t.catalog), text(t.schema), text(t.name), sql]
            })
            .collect(),
    )
}

async fn information_columns(
    catalogs: &[Named],
    scope: &Scope,
) -> DFResult<Arc<dyn TableProvider>> {
    let (mut rows, mut ids) = (Vec::new(), Vec::new());
    for t in list_tables(catalogs, Detail::Columns, scope).await {
        for (i, c) in t.columns.into_iter().enumerate() {
            ids.push(c.field_id);
            rows.push(vec![
                text(&t.catalog),
                text(&t.schema),
                text(&t.name),
                text(c.name),
                Cell::Int(Some(i as i64 + 1)),
                NULL_TEXT,
                text(if c.nullable { "YES" } else { "NO" }),
                text(c.type_name),
                Cell::Text(c.comment),
                NULL_TEXT,
            ]);
        }
    }
    column_rows_table(COLUMNS, rows, ids)
}

/// The engine's catalogs, for the cross-catalog tables in `system`. Weak: the list holds `system`.
#[derive(Debug, Clone)]
pub struct Catalogs(pub Weak<dyn CatalogProviderList>);

impl Catalogs {
    /// Every catalog but the per-statement ones, sorted by name.
    fn all(&self) -> Vec<Named> {
        let Some(list) = self.0.upgrade() else {
            return Vec::new();
        };
        let mut names = list.catalog_names();
        names.retain(|n| !n.starts_with("__"));
        names.sort();
        names
            .into_iter()
            .filter_map(|n| {
                let c = list.catalog(&n)?;
                // Listings look through the information_schema wrapper to the catalog itself.
                let inner = match c.downcast_ref::<WithInformationSchema>() {
                    Some(w) => w.inner.clone(),
                    None => c,
                };
                Some((n, inner))
            })
            .collect()
    }
}

/// `system.jdbc`: what JDBC's DatabaseMetaData (and so DBeaver, Tableau, …) reads.
#[derive(Debug)]
pub struct JdbcSchema {
    pub catalogs: Catalogs,
}

#[async_trait]
impl SchemaProvider for JdbcSchema {
    fn table_names(&self) -> Vec<String> {
        names(JDBC)
    }

    async fn table(&self, name: &str) -> DFResult<Option<Arc<dyn TableProvider>>> {
        let catalogs = self.catalogs.all();
        let table = match name {
            "catalogs" => rows_table(
                JDBC_CATALOGS,
                catalogs.iter().map(|c| vec![text(&c.0)]).collect(),
            )?,
            "schemas" => {
                let mut rows = Vec::new();
                for c in &catalogs {
                    for s in schema_names(c).await {
                        rows.push(vec![text(s), text(&c.0)]);
                    }
                }
                rows_table(JDBC_SCHEMAS, rows)?
            }
            "table_types" => rows_table(
                JDBC_TABLE_TYPES,
                vec![vec![text("TABLE")], vec![text("VIEW")]],
            )?,
            "tables" => Deferred::table(Listing::JdbcTables, catalogs),
            "columns" => Deferred::table(Listing::JdbcColumns, catalogs),
            "types" => jdbc_types()?,
            _ => return Ok(None),
        };
        Ok(Some(table))
    }

    fn table_exist(&self, name: &str) -> bool {
        columns_of(JDBC, name).is_some()
    }
}

async fn jdbc_tables(catalogs: &[Named], scope: &Scope) -> DFResult<Arc<dyn TableProvider>> {
    rows_table(
        JDBC_TABLES_COLUMNS,
        list_tables(catalogs, Detail::Names, scope)
            .await
            .into_iter()
            .map(|t| {
                let kind = if t.view { "VIEW" } else { "TABLE" };
                let mut row = vec![text(t.catalog), text(t.schema), text(t.name)];
                row.push(text(kind));
                row.extend(std::iter::repeat_with(|| NULL_TEXT).take(6));
                row
            })
            .collect(),
    )
}

async fn jdbc_columns(catalogs: &[Named], scope: &Scope) -> DFResult<Arc<dyn TableProvider>> {
    let (mut rows, mut ids) = (Vec::new(), Vec::new());
    for t in list_tables(catalogs, Detail::Columns, scope).await {
        for (i, c) in t.columns.into_iter().enumerate() {
            ids.push(c.field_id);
            let (size, digits) = precision_of(&c.type_name);
            rows.push(vec![
                text(&t.catalog),
                text(&t.schema),
                text(&t.name),
                text(c.name),
                Cell::Int(Some(c.jdbc_type)),
                text(c.type_name),
                Cell::Int(size),
                NULL_INT,
                Cell::Int(digits),
                Cell::Int(size.map(|_| 10)),
                Cell::Int(Some(if c.nullable { 1 } else { 0 })),
                Cell::Text(c.comment),
                NULL_TEXT,
                NULL_INT,
                NULL_INT,
                NULL_INT,
                Cell::Int(Some(i as i64 + 1)),
                text(if c.nullable { "YES" } else { "NO" }),
                NULL_TEXT,
                NULL_TEXT,
                NULL_TEXT,
                NULL_INT,
                text("NO"),
                text("NO"),
            ]);
        }
    }
    column_rows_table(JDBC_COLUMNS, rows, ids)
}

/// Column size and decimal digits of numeric types, as JDBC reports them.
fn precision_of(type_name: &str) -> (Option<i64>, Option<i64>) {
    match type_name {
        "tinyint" => (Some(3), Some(0)),
        "smallint" => (Some(5), Some(0)),
        "integer" => (Some(10), Some(0)),
        "bigint" => (Some(19), Some(0)),
        "real" => (Some(24), None),
        "double" => (Some(53), None),
        t => match t
            .strip_prefix("decimal(")
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|r| r.split_once(','))
        {
            Some((p, s)) => (p.trim().parse().ok(), s.trim().parse().ok()),
            None => (None, None),
        },
    }
}

/// The types a column can be created with.
fn jdbc_types() -> DFResult<Arc<dyn TableProvider>> {
    let types: [(&str, i64, Option<i64>, Option<&str>); 16] = [
        ("boolean", JDBC_BOOLEAN, None, None),
        ("tinyint", JDBC_TINYINT, Some(3), None),
        ("smallint", JDBC_SMALLINT, Some(5), None),
        ("integer", JDBC_INTEGER, Some(10), None),
        ("bigint", JDBC_BIGINT, Some(19), None),
        ("real", JDBC_REAL, Some(24), None),
        ("double", JDBC_DOUBLE, Some(53), None),
        ("decimal", JDBC_DECIMAL, Some(38), Some("precision,scale")),
        ("varchar", JDBC_VARCHAR, None, None),
        ("varbinary", JDBC_VARBINARY, None, None),
        ("date", JDBC_DATE, None, None),
        ("time", JDBC_TIME, None, None),
        ("timestamp", JDBC_TIMESTAMP, None, None),
        ("timestamp with time zone", JDBC_TIMESTAMP_TZ, None, None),
        ("uuid", JDBC_JAVA_OBJECT, None, None),
        ("array", JDBC_ARRAY, None, None),
    ];
    let rows = types
        .iter()
        .map(|(name, code, precision, params)| {
            let numeric = precision.is_some();
            vec![
                text(*name),
                Cell::Int(Some(*code)),
                Cell::Int(*precision),
                NULL_TEXT,
                NULL_TEXT,
                Cell::Text(params.map(str::to_string)),
                Cell::Int(Some(1)),
                Cell::Bool(Some(*name == "varchar")),
                Cell::Int(Some(3)),
                Cell::Bool(Some(!numeric)),
                Cell::Bool(Some(false)),
                Cell::Bool(Some(false)),
                NULL_TEXT,
                Cell::Int(Some(0)),
                Cell::Int(Some(if *name == "decimal" { 38 } else { 0 })),
                NULL_INT,
                NULL_INT,
                Cell::Int(numeric.then_some(10)),
            ]
        })
        .collect();
    rows_table(JDBC_TYPES, rows)
}

/// `system.metadata`: `catalogs`, `table_comments` and (empty) `materialized_views`.
#[derive(Debug)]
pub struct MetadataSchema {
    pub catalogs: Catalogs,
}

#[async_trait]
impl SchemaProvider for MetadataSchema {
    fn table_names(&self) -> Vec<String> {
        names(METADATA)
    }

    async fn table(&self, name: &str) -> DFResult<Option<Arc<dyn TableProvider>>> {
        let catalogs = self.catalogs.all();
        let table = match name {
            "catalogs" => rows_table(
                METADATA_CATALOGS,
                catalogs
                    .iter()
                    .map(|(n, c)| {
                        let iceberg = c.is::<IcebergCatalogProvider>();
                        let connector = if iceberg { "iceberg" } else { "system" };
                        vec![text(n), text(n), text(connector)]
                    })
                    .collect(),
            )?,
            "table_comments" => rows_table(
                TABLE_COMMENTS,
                list_tables(&catalogs, Detail::Columns, &Scope::default())
                    .await
                    .into_iter()
                    .map(|t| {
                        vec![
                            text(t.catalog),
                            text(t.schema),
                            text(t.name),
                            Cell::Text(t.comment),
                        ]
                    })
                    .collect(),
            )?,
            "materialized_views" => rows_table(MATERIALIZED_VIEWS, Vec::new())?,
            _ => return Ok(None),
        };
        Ok(Some(table))
    }

    fn table_exist(&self, name: &str) -> bool {
        columns_of(METADATA, name).is_some()
    }
}

#[cfg(test)]
mod tests {
    use datafusion::logical_expr::{col, lit};

    use super::*;

    #[test]
    fn a_listing_is_narrowed_only_by_filters_that_name_its_values() {
        let schema = |f: Expr| named(&[f], "table_schema");
        let names = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(schema(col("table_schema").eq(lit("a"))), names(&["a"]));
        assert_eq!(schema(lit("a").eq(col("table_schema"))), names(&["a"]));
        // IN lists and ORs of equalities (DataFusion writes short IN lists so), each name once.
        let listed = col("table_schema").in_list(vec![lit("b"), lit("a"), lit("b")], false);
        assert_eq!(schema(listed), names(&["a", "b"]));
        let either = col("table_schema")
            .eq(lit("b"))
            .or(col("table_schema").eq(lit("a")));
        assert_eq!(schema(either), names(&["a", "b"]));
        // Anything that does not name every value it lets through lists everything.
        for open in [
            col("table_schema").in_list(vec![lit("a")], true),
            col("table_schema").like(lit("a%")),
            col("table_schema")
                .eq(lit("a"))
                .or(col("table_name").eq(lit("t"))),
            col("table_name").eq(lit("t")),
            col("table_schema").not_eq(lit("a")),
        ] {
            assert_eq!(schema(open.clone()), None, "{open}");
        }
        let many = (0..=MAX_SCOPED_NAMES)
            .map(|i| lit(format!("s{i}")))
            .collect();
        assert_eq!(schema(col("table_schema").in_list(many, false)), None);
    }
}

//! The statements that change the catalogs' schemas and tables: CREATE SCHEMA and TABLE (Trino's
//! `WITH (partitioning = …)` and Spark's `PARTITIONED BY`), DROP SCHEMA, TABLE, VIEW and ROLE, and
//! ALTER TABLE's name, properties and partitioning (`SET PROPERTIES partitioning = …`), its
//! columns (write/columns.rs), and COMMENT ON TABLE and COLUMN. Each is authorized by governance first; a schema change commits
//! as one compare-and-swap on the table's current schema.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    AlterTableOperation, ColumnOption, CommentObject, CreateTable, CreateTableOptions, Expr,
    ObjectName, ObjectType, SchemaName, SqlOption, Statement, Value,
};
use iceberg::spec::{
    FormatVersion, NestedField, NestedFieldRef, Schema, Transform, UnboundPartitionField,
    UnboundPartitionSpec, UnboundPartitionSpecBuilder,
};
use iceberg::table::Table;
use iceberg::{NamespaceIdent, TableCreation, TableIdent, TableRequirement, TableUpdate};
use sqe_sessions::{QueryResult, SqeError, SqeResult};

use crate::catalog::backend::CatalogRef;
use crate::catalog::provider::load_table_opt;
use crate::context::Ctx;
use crate::error::from_iceberg;
use crate::files::policy::Access;
use crate::governance::model::{Object, Privilege};
use crate::names::{normalize_ident, schema_name, table_ident};
use crate::statement::columns::{ColumnAction, ColumnStatement};
use crate::statement::prepass::Prepared;
use crate::types::{FieldIds, sql_to_iceberg};
use crate::write::columns;
use crate::write::sorting::sort_order;
use crate::write::views::drop_view;

/// A partition field as written in Trino (`'bucket(id, 16)'`) or Spark (`bucket(16, id)`, `days(ts)`).
fn parse_partition_field(text: &str, schema: &Schema) -> SqeResult<(i32, String, Transform)> {
    let text = text.trim().trim_matches('\'');
    let bad = || SqeError::invalid(format!("invalid partition field '{text}'"));
    let column = |name: &str| -> SqeResult<i32> {
        let name = name.trim().trim_matches('"');
        schema
            .field_by_name(name)
            .or_else(|| schema.field_by_name_case_insensitive(name))
            .map(|f| f.id)
            .ok_or_else(|| SqeError::not_found(format!("partition column '{name}' does not exist")))
    };
    let Some((func, args)) = text.split_once('(') else {
        let id = column(text)?;
        let name = text.trim().trim_matches('"').to_lowercase();
        return Ok((id, name, Transform::Identity));
    };
    let args: Vec<&str> = args
        .strip_suffix(')')
        .ok_or_else(bad)?
        .split(',')
        .map(str::trim)
        .collect();
    let func = func.trim().to_lowercase();
    let single = |suffix: &str, t: Transform| -> SqeResult<(i32, String, Transform)> {
        match args.as_slice() {
            [c] => Ok((
                column(c)?,
                format!("{}_{suffix}", c.trim_matches('"').to_lowercase()),
                t,
            )),
            _ => Err(bad()),
        }
    };
    match func.as_str() {
        "year" | "years" => single("year", Transform::Year),
        "month" | "months" => single("month", Transform::Month),
        "day" | "days" | "date" => single("day", Transform::Day),
        "hour" | "hours" | "date_hour" => single("hour", Transform::Hour),
        "bucket" | "truncate" => {
            let [a, b] = args.as_slice() else {
                return Err(bad());
            };
            // Trino writes (column, n); Spark writes (n, column).
            let (col, n) = match (a.parse::<u32>(), b.parse::<u32>()) {
                (Err(_), Ok(n)) => (*a, n),
                (Ok(n), Err(_)) => (*b, n),
                _ => return Err(bad()),
            };
            if n == 0 {
                return Err(SqeError::invalid(format!(
                    "{func} width must be positive in '{text}'"
                )));
            }
            let (suffix, t) = if func == "bucket" {
                ("bucket", Transform::Bucket(n))
            } else {
                ("trunc", Transform::Truncate(n))
            };
            Ok((
                column(col)?,
                format!("{}_{suffix}", col.trim_matches('"').to_lowercase()),
                t,
            ))
        }
        _ => Err(SqeError::invalid(format!(
            "unknown partition transform '{func}' in '{text}'"
        ))),
    }
}

/// The first partition field id of a table (Iceberg's `PARTITION_DATA_ID_START`).
const PARTITION_FIELD_IDS_START: i32 = 1000;

/// The partition spec from `WITH (partitioning = ARRAY[...])` and/or `PARTITIONED BY (...)`.
pub(crate) fn partition_spec(
    schema: &Schema,
    with_entries: Vec<String>,
    partitioned_by: Option<Vec<String>>,
) -> SqeResult<Option<UnboundPartitionSpec>> {
    let entries: Vec<String> = with_entries
        .into_iter()
        .chain(partitioned_by.unwrap_or_default())
        .collect();
    if entries.is_empty() {
        return Ok(None);
    }
    let mut builder: UnboundPartitionSpecBuilder = UnboundPartitionSpec::builder();
    for (i, e) in entries.iter().enumerate() {
        let (source_id, name, transform) = parse_partition_field(e, schema)?;
        // A new table's partition fields are numbered from 1000, as every Iceberg writer numbers
        // them; sent with the spec, since REST catalogs that require them (lakana) refuse it
        // without.
        let field = UnboundPartitionField {
            source_id,
            field_id: Some(PARTITION_FIELD_IDS_START + i as i32),
            name,
            transform,
        };
        builder = builder
            .add_partition_fields([field])
            .map_err(from_iceberg)?;
    }
    Ok(Some(builder.build()))
}

/// Table options from `WITH (...)`.
struct TableOptions {
    /// The entries of `partitioning`.
    partitioning: Vec<String>,
    /// The entries of `sorted_by`.
    sorted_by: Vec<String>,
    /// Iceberg properties (and the location, as `__location`).
    properties: HashMap<String, String>,
    /// `format_version`, 2 unless given.
    format_version: FormatVersion,
}

impl Default for TableOptions {
    fn default() -> Self {
        Self {
            partitioning: Vec::new(),
            sorted_by: Vec::new(),
            properties: HashMap::new(),
            format_version: FormatVersion::V2,
        }
    }
}

/// The Iceberg format version `format_version = 2` (or 3; Spark's `'format-version' = '3'`) asks
/// for.
fn format_version(value: &Expr) -> SqeResult<FormatVersion> {
    let version = match value {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) | Value::SingleQuotedString(n) => Some(n.as_str()),
            _ => None,
        },
        _ => None,
    };
    match version {
        Some("2") => Ok(FormatVersion::V2),
        Some("3") => Ok(FormatVersion::V3),
        _ => Err(SqeError::unsupported(format!(
            "format_version {value} is not supported; use 2 or 3"
        ))),
    }
}

/// The strings of an `ARRAY['…', …]` option named `name`.
fn strings(name: &str, value: &Expr) -> SqeResult<Vec<String>> {
    let bad = || SqeError::invalid(format!("{name} must be an ARRAY of strings"));
    let Expr::Array(array) = value else {
        return Err(bad());
    };
    array
        .elem
        .iter()
        .map(|e| match e {
            Expr::Value(v) => match &v.value {
                Value::SingleQuotedString(s) => Ok(s.clone()),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        })
        .collect()
}

fn table_options(options: &CreateTableOptions) -> SqeResult<TableOptions> {
    let list: &[SqlOption] = match options {
        CreateTableOptions::None => &[],
        CreateTableOptions::With(l)
        | CreateTableOptions::Options(l)
        | CreateTableOptions::Plain(l)
        | CreateTableOptions::TableProperties(l) => l,
    };
    let mut with = TableOptions::default();
    let props = &mut with.properties;
    for opt in list {
        if let SqlOption::Comment(comment) = opt {
            // Where Trino and Spark keep a table's comment.
            props.insert("comment".to_string(), comment.to_string());
            continue;
        }
        let SqlOption::KeyValue { key, value } = opt else {
            return Err(SqeError::invalid(format!(
                "unsupported table option '{opt}'"
            )));
        };
        let key = key.value.to_lowercase();
        let string = |e: &Expr| match e {
            Expr::Value(v) => match &v.value {
                Value::SingleQuotedString(s) => Some(s.clone()),
                Value::Number(n, _) => Some(n.to_string()),
                Value::Boolean(b) => Some(b.to_string()),
                _ => None,
            },
            _ => None,
        };
        match key.as_str() {
            "partitioning" | "partitioned_by" => {
                with.partitioning.extend(strings("partitioning", value)?);
            }
            "sorted_by" => with.sorted_by = strings("sorted_by", value)?,
            "format" => {
                let f = string(value).unwrap_or_default();
                if !f.eq_ignore_ascii_case("parquet") {
                    return Err(SqeError::unsupported(format!(
                        "file format '{f}' is not supported; use PARQUET"
                    )));
                }
            }
            "format_version" | "format-version" => with.format_version = format_version(value)?,
            "location" => {
                props.insert("__location".to_string(), string(value).unwrap_or_default());
            }
            _ => {
                let v = string(value).ok_or_else(|| {
                    SqeError::invalid(format!("table property '{key}' must be a literal"))
                })?;
                props.insert(key, v);
            }
        }
    }
    Ok(with)
}

/// The schema for the columns of a CREATE TABLE.
fn create_schema(ct: &CreateTable) -> SqeResult<Schema> {
    let mut ids = FieldIds::default();
    let mut fields: Vec<NestedFieldRef> = Vec::new();
    for col in &ct.columns {
        let name = normalize_ident(&col.name);
        if fields.iter().any(|f| f.name == name) {
            return Err(SqeError::invalid(format!(
                "column '{name}' is specified more than once"
            )));
        }
        let id = ids.fresh();
        let ty = sql_to_iceberg(&col.data_type, &mut ids)?;
        let required = col
            .options
            .iter()
            .any(|o| matches!(o.option, ColumnOption::NotNull));
        let mut field = NestedField::new(id, name, ty, required);
        for o in &col.options {
            if let ColumnOption::Comment(c) = &o.option {
                field.doc = Some(c.clone());
            }
        }
        fields.push(Arc::new(field));
    }
    Schema::builder()
        .with_fields(fields)
        .build()
        .map_err(from_iceberg)
}

/// Creates a table, failing if it exists (or doing nothing under IF NOT EXISTS: returns `None`).
pub(crate) async fn create_iceberg_table(
    ctx: &Ctx<'_>,
    ct: &CreateTable,
    schema: Schema,
    partitioned_by: Option<Vec<String>>,
) -> SqeResult<Option<(String, TableIdent, Table)>> {
    let session = ctx.session;
    if ct.or_replace {
        return Err(SqeError::unsupported(
            "CREATE OR REPLACE TABLE is not supported",
        ));
    }
    if ct.external || ct.temporary {
        return Err(SqeError::unsupported(
            "only managed Iceberg tables can be created",
        ));
    }
    let (catalog_name, ident) = table_ident(session, &ct.name)?;
    let schema_object = Object::schema(&catalog_name, &ident.namespace.join("."));
    ctx.governance
        .authorize(session, Privilege::Create, &schema_object, || {
            SqeError::internal("a schema is never hidden")
        })?;
    let catalog = ctx.mounts.bind(session, &catalog_name)?;
    if catalog.table_exists(&ident).await.map_err(from_iceberg)? {
        if ct.if_not_exists {
            return Ok(None);
        }
        return Err(SqeError::already_exists(format!(
            "table '{catalog_name}.{}.{}' already exists",
            ident.namespace.join("."),
            ident.name
        )));
    }
    let with = table_options(&ct.table_options)?;
    let mut props = with.properties;
    let spec = partition_spec(&schema, with.partitioning, partitioned_by)?;
    let order = sort_order(&schema, &with.sorted_by)?;
    let location = props.remove("__location").or_else(|| ct.location.clone());
    if let Some(l) = &location {
        ctx.files.check(l, Access::TableLocation)?;
    }
    if let Some(comment) = &ct.comment {
        props.insert("comment".to_string(), comment.to_string());
    }
    let creation = TableCreation::builder()
        .name(ident.name.clone())
        .schema(schema)
        .partition_spec_opt(spec)
        .sort_order(order)
        .format_version(with.format_version)
        .location_opt(location)
        .properties(props)
        .build();
    let table = catalog
        .create_table(&ident.namespace, creation)
        .await
        .map_err(from_iceberg)?;
    let object = Object::table(&catalog_name, &ident.namespace.join("."), &ident.name);
    // A table dropped behind SQE's back (another engine) leaves its policies under the name:
    // the new table starts with none of them.
    ctx.governance.forget_object(session, &object)?;
    ctx.governance.record_owner(session, &object)?;
    Ok(Some((catalog_name, ident, table)))
}

/// CREATE and DROP (schemas, tables, views, roles) and ALTER TABLE; any other statement is refused
/// by name.
pub(crate) async fn run(
    ctx: &Ctx<'_>,
    statement: Statement,
    prepared: Prepared,
) -> SqeResult<QueryResult> {
    let session = ctx.session;
    match statement {
        Statement::CreateTable(ct) => {
            let schema = create_schema(&ct)?;
            create_iceberg_table(ctx, &ct, schema, prepared.partitioned_by).await?;
            Ok(QueryResult::empty())
        }
        Statement::CreateSchema {
            schema_name: created,
            if_not_exists,
            ..
        } => {
            let SchemaName::Simple(name) = created else {
                return Err(SqeError::unsupported(
                    "CREATE SCHEMA ... AUTHORIZATION is not supported",
                ));
            };
            let (catalog_name, schema) = schema_name(session, &name)?;
            let object = Object::schema(&catalog_name, &schema);
            ctx.governance
                .authorize(session, Privilege::Create, &object, || {
                    SqeError::internal("a schema is never hidden")
                })?;
            let catalog = ctx.mounts.bind(session, &catalog_name)?;
            let ns = NamespaceIdent::new(schema.clone());
            if catalog.namespace_exists(&ns).await.map_err(from_iceberg)? {
                if if_not_exists {
                    return Ok(QueryResult::empty());
                }
                return Err(SqeError::already_exists(format!(
                    "schema '{catalog_name}.{schema}' already exists"
                )));
            }
            catalog
                .create_namespace(&ns, HashMap::new())
                .await
                .map_err(from_iceberg)?;
            ctx.governance.forget_object(session, &object)?;
            ctx.governance.record_owner(session, &object)?;
            Ok(QueryResult::empty())
        }
        Statement::Drop {
            object_type,
            if_exists,
            names,
            cascade,
            ..
        } => {
            for name in &names {
                match object_type {
                    ObjectType::Table => drop_table(ctx, name, if_exists).await?,
                    ObjectType::View => drop_view(ctx, name, if_exists).await?,
                    ObjectType::Schema | ObjectType::Database => {
                        drop_schema(ctx, name, if_exists, cascade).await?
                    }
                    ObjectType::Role => ctx.governance.drop_role(session, name, if_exists)?,
                    other => {
                        return Err(SqeError::unsupported(format!(
                            "DROP {other} is not supported"
                        )));
                    }
                }
            }
            Ok(QueryResult::empty())
        }
        Statement::AlterTable(alter) => {
            for op in alter.operations {
                alter_table(ctx, &alter.name, alter.if_exists, op).await?;
            }
            Ok(QueryResult::empty())
        }
        Statement::Comment {
            object_type,
            object_name,
            comment,
            if_exists,
        } => {
            comment_on(ctx, object_type, &object_name, comment, if_exists).await?;
            Ok(QueryResult::empty())
        }
        // Trino's ANALYZE writes number-of-distinct-values sketches into a statistics file; SQE
        // neither writes nor uses them yet (issue 43's statistics-driven join order would).
        Statement::Analyze { .. } => Err(SqeError::unsupported(
            "ANALYZE is not supported: SQE keeps no extended statistics (distinct-value sketches) \
             yet; it plans with the column bounds and counts every data file already carries",
        )),
        other => Err(SqeError::unsupported(format!(
            "statement not supported: {}",
            other.to_string().chars().take(60).collect::<String>()
        ))),
    }
}

pub(crate) async fn drop_table(ctx: &Ctx<'_>, name: &ObjectName, if_exists: bool) -> SqeResult<()> {
    let session = ctx.session;
    let (catalog_name, ident) = table_ident(session, name)?;
    let object = Object::table(&catalog_name, &ident.namespace.join("."), &ident.name);
    match ctx
        .governance
        .authorize(session, Privilege::Drop, &object, || {
            SqeError::not_found(format!("table '{object}' does not exist"))
        }) {
        Err(e) if if_exists && e.code() == sqe_sessions::ErrorCode::NotFound => return Ok(()),
        other => other?,
    }
    let catalog = ctx.mounts.bind(session, &catalog_name)?;
    if !catalog.table_exists(&ident).await.map_err(from_iceberg)? {
        if catalog.supports_views() && catalog.view_exists(&ident).await.map_err(from_iceberg)? {
            return Err(SqeError::invalid(format!(
                "'{catalog_name}.{}.{}' is a view, not a table; drop it with DROP VIEW",
                ident.namespace.join("."),
                ident.name
            )));
        }
        if if_exists {
            return Ok(());
        }
        return Err(SqeError::not_found(format!(
            "table '{catalog_name}.{}.{}' does not exist",
            ident.namespace.join("."),
            ident.name
        )));
    }
    // Purging removes the table's files, and its folder when that is the warehouse's (the
    // catalog knows where the table is; a path made from its name would not).
    catalog.purge_table(&ident).await.map_err(from_iceberg)?;
    ctx.governance.forget_object(session, &object)
}

async fn drop_schema(
    ctx: &Ctx<'_>,
    name: &ObjectName,
    if_exists: bool,
    cascade: bool,
) -> SqeResult<()> {
    let session = ctx.session;
    let (catalog_name, schema) = schema_name(session, name)?;
    let object = Object::schema(&catalog_name, &schema);
    ctx.governance
        .authorize(session, Privilege::Drop, &object, || {
            SqeError::internal("a schema is never hidden")
        })?;
    let catalog = ctx.mounts.bind(session, &catalog_name)?;
    let ns = NamespaceIdent::new(schema.clone());
    if !catalog.namespace_exists(&ns).await.map_err(from_iceberg)? {
        if if_exists {
            return Ok(());
        }
        return Err(SqeError::not_found(format!(
            "schema '{catalog_name}.{schema}' does not exist"
        )));
    }
    let tables = catalog.table_names(&schema).await.map_err(from_iceberg)?;
    let views = catalog.view_names(&schema).await.map_err(from_iceberg)?;
    if !tables.is_empty() || !views.is_empty() {
        if !cascade {
            let what = match (tables.len(), views.len()) {
                (t, 0) => format!("{t} tables"),
                (0, v) => format!("{v} views"),
                (t, v) => format!("{t} tables, {v} views"),
            };
            return Err(SqeError::invalid(format!(
                "schema '{catalog_name}.{schema}' is not empty ({what}); drop them first or use CASCADE"
            )));
        }
        // All or nothing: every table and view in it must be the caller's to drop.
        for name in tables.iter().chain(&views) {
            let inside = Object::table(&catalog_name, &schema, name);
            if ctx
                .governance
                .authorize(session, Privilege::Drop, &inside, || {
                    SqeError::internal("hidden")
                })
                .is_err()
            {
                return Err(SqeError::new(
                    sqe_sessions::ErrorCode::PermissionDenied,
                    format!(
                        "Access Denied: Cannot drop schema {object}: it holds tables or views you may not drop"
                    ),
                ));
            }
        }
        for v in views {
            catalog
                .drop_view(&TableIdent::new(ns.clone(), v.clone()))
                .await
                .map_err(from_iceberg)?;
            ctx.governance
                .forget_object(session, &Object::table(&catalog_name, &schema, &v))?;
        }
        for t in tables {
            catalog
                .purge_table(&TableIdent::new(ns.clone(), t.clone()))
                .await
                .map_err(from_iceberg)?;
            ctx.governance
                .forget_object(session, &Object::table(&catalog_name, &schema, &t))?;
        }
    }
    catalog.drop_namespace(&ns).await.map_err(from_iceberg)?;
    ctx.governance.forget_object(session, &object)
}

/// A table an ALTER statement changes, found and authorized (ALTER privilege).
struct Altered {
    catalog_name: String,
    ident: TableIdent,
    object: Object,
    catalog: CatalogRef,
    table: Table,
}

/// The table `name` for an ALTER statement, or None when it does not exist and `if_exists` says
/// that is fine.
async fn table_to_alter(
    ctx: &Ctx<'_>,
    name: &ObjectName,
    if_exists: bool,
) -> SqeResult<Option<Altered>> {
    let session = ctx.session;
    let (catalog_name, ident) = table_ident(session, name)?;
    let object = Object::table(&catalog_name, &ident.namespace.join("."), &ident.name);
    match ctx
        .governance
        .authorize(session, Privilege::Alter, &object, || {
            SqeError::not_found(format!("table '{object}' does not exist"))
        }) {
        Err(e) if if_exists && e.code() == sqe_sessions::ErrorCode::NotFound => return Ok(None),
        other => other?,
    }
    let catalog = ctx.mounts.bind(session, &catalog_name)?;
    let Some(table) = load_table_opt(catalog.as_ref(), &ident)
        .await
        .map_err(from_iceberg)?
    else {
        if if_exists {
            return Ok(None);
        }
        return Err(SqeError::not_found(format!(
            "table '{catalog_name}.{}.{}' does not exist",
            ident.namespace.join("."),
            ident.name
        )));
    };
    Ok(Some(Altered {
        catalog_name,
        ident,
        object,
        catalog,
        table,
    }))
}

/// A column change SQE parses itself (statement/columns.rs): a field inside a row, or Spark's
/// `ALTER COLUMN c COMMENT`.
pub(crate) async fn alter_column(
    ctx: &Ctx<'_>,
    statement: ColumnStatement,
) -> SqeResult<QueryResult> {
    if let Some(altered) = table_to_alter(ctx, &statement.table, statement.if_table_exists).await? {
        columns::evolve(
            &altered.catalog,
            &altered.table,
            &statement.path,
            statement.action,
        )
        .await?;
    }
    Ok(QueryResult::empty())
}

/// `COMMENT ON TABLE t IS …` (the table's `comment` property, as Trino keeps it) and `COMMENT ON
/// COLUMN t.c IS …` (the column's doc in the schema). IS NULL removes the comment.
async fn comment_on(
    ctx: &Ctx<'_>,
    object_type: CommentObject,
    name: &ObjectName,
    comment: Option<String>,
    if_exists: bool,
) -> SqeResult<()> {
    match object_type {
        CommentObject::Table => {
            let Some(altered) = table_to_alter(ctx, name, if_exists).await? else {
                return Ok(());
            };
            let changes = match comment {
                Some(text) => vec![TableUpdate::SetProperties {
                    updates: HashMap::from([("comment".to_string(), text)]),
                }],
                None => vec![TableUpdate::RemoveProperties {
                    removals: vec!["comment".to_string()],
                }],
            };
            altered
                .catalog
                .commit_updates(altered.table.identifier(), Vec::new(), changes)
                .await
                .map_err(from_iceberg)?;
            Ok(())
        }
        CommentObject::Column => {
            let (table, column) = match name.0.split_last() {
                Some((column, table)) if !table.is_empty() => (table, column),
                _ => {
                    return Err(SqeError::invalid(format!(
                        "COMMENT ON COLUMN names a table's column, as t.c, not '{name}'"
                    )));
                }
            };
            let column = column
                .as_ident()
                .map(normalize_ident)
                .ok_or_else(|| SqeError::invalid(format!("'{column}' is not a column name")))?;
            let table = ObjectName(table.to_vec());
            let Some(altered) = table_to_alter(ctx, &table, if_exists).await? else {
                return Ok(());
            };
            columns::evolve(
                &altered.catalog,
                &altered.table,
                &[column],
                ColumnAction::Comment(comment),
            )
            .await
        }
        other => Err(SqeError::unsupported(format!(
            "COMMENT ON {other} is not supported: COMMENT ON TABLE and COMMENT ON COLUMN are"
        ))),
    }
}

async fn alter_table(
    ctx: &Ctx<'_>,
    name: &ObjectName,
    if_exists: bool,
    op: AlterTableOperation,
) -> SqeResult<()> {
    let session = ctx.session;
    let Some(Altered {
        catalog_name,
        ident,
        object,
        catalog,
        table,
    }) = table_to_alter(ctx, name, if_exists).await?
    else {
        return Ok(());
    };
    if let Some(change) = columns::from_operation(&op) {
        let (path, action) = change?;
        return columns::evolve(&catalog, &table, &path, action).await;
    }
    let schema = table.metadata().current_schema().clone();
    match op {
        AlterTableOperation::RenameTable { table_name } => {
            let target = match table_name {
                datafusion::sql::sqlparser::ast::RenameTableNameKind::To(n)
                | datafusion::sql::sqlparser::ast::RenameTableNameKind::As(n) => n,
            };
            let (target_catalog, target_ident) = table_ident(session, &target)?;
            if target_catalog != catalog_name {
                return Err(SqeError::unsupported(
                    "a table cannot be renamed into another catalog",
                ));
            }
            let to = Object::table(
                &catalog_name,
                &target_ident.namespace.join("."),
                &target_ident.name,
            );
            let target_schema = Object::schema(&catalog_name, &to.schema);
            ctx.governance
                .authorize(session, Privilege::Create, &target_schema, || {
                    SqeError::internal("a schema is never hidden")
                })?;
            catalog
                .rename_table(&ident, &target_ident)
                .await
                .map_err(from_iceberg)?;
            // Its owner and privileges go with it.
            ctx.governance.move_object(session, &object, &to)?;
        }
        AlterTableOperation::SetTblProperties { table_properties } => {
            let metadata = table.metadata();
            let mut requirements = vec![TableRequirement::UuidMatch {
                uuid: metadata.uuid(),
            }];
            let mut changes = Vec::new();
            let named = |o: &SqlOption, name: &str| matches!(o, SqlOption::KeyValue { key, .. } if key.value.eq_ignore_ascii_case(name));
            let (partitioning, properties): (Vec<&SqlOption>, Vec<&SqlOption>) = table_properties
                .iter()
                .partition(|o| named(o, "partitioning"));
            let (sorted_by, properties): (Vec<&SqlOption>, Vec<&SqlOption>) =
                properties.into_iter().partition(|o| named(o, "sorted_by"));
            let (version, properties): (Vec<&SqlOption>, Vec<&SqlOption>) = properties
                .into_iter()
                .partition(|o| named(o, "format_version") || named(o, "format-version"));
            // An upgrade (Iceberg has no way down): files stay as they are.
            if let Some(SqlOption::KeyValue { value, .. }) = version.first() {
                let format_version = format_version(value)?;
                if format_version < metadata.format_version() {
                    return Err(SqeError::invalid(format!(
                        "table '{object}' is of format version {}; a format version is never lowered",
                        metadata.format_version() as u8
                    )));
                }
                changes.push(TableUpdate::UpgradeFormatVersion { format_version });
            }
            // Partition evolution: a new spec, the default from now on; files written before keep
            // theirs, and read as they are.
            if let Some(option) = partitioning.first() {
                let spec = evolved_spec(&schema, option)?;
                changes.push(TableUpdate::AddSpec { spec });
                changes.push(TableUpdate::SetDefaultSpec { spec_id: -1 });
                requirements.push(TableRequirement::DefaultSpecIdMatch {
                    default_spec_id: metadata.default_partition_spec_id(),
                });
                requirements.push(TableRequirement::LastAssignedPartitionIdMatch {
                    last_assigned_partition_id: metadata.last_partition_id(),
                });
            }
            // A new sort order, the default from now on: files written before stay as they are.
            if let Some(SqlOption::KeyValue { value, .. }) = sorted_by.first() {
                let sort_order = sort_order(&schema, &strings("sorted_by", value)?)?;
                changes.push(TableUpdate::AddSortOrder { sort_order });
                changes.push(TableUpdate::SetDefaultSortOrder { sort_order_id: -1 });
                requirements.push(TableRequirement::DefaultSortOrderIdMatch {
                    default_sort_order_id: metadata.default_sort_order_id(),
                });
            }
            let updates = properties
                .into_iter()
                .map(settable_property)
                .collect::<SqeResult<HashMap<String, String>>>()?;
            if !updates.is_empty() {
                changes.push(TableUpdate::SetProperties { updates });
            }
            catalog
                .commit_updates(table.identifier(), requirements, changes)
                .await
                .map_err(from_iceberg)?;
        }
        other => {
            return Err(SqeError::unsupported(format!(
                "ALTER TABLE {other} is not supported"
            )));
        }
    }
    Ok(())
}

/// The spec `partitioning = ARRAY['p', 'bucket(id, 4)', …]` asks for (an empty array: none), its
/// fields left for the catalog to number (a field an earlier spec had keeps its id).
fn evolved_spec(schema: &Schema, option: &SqlOption) -> SqeResult<UnboundPartitionSpec> {
    let bad = || {
        SqeError::invalid(
            "partitioning is set to an array of partition fields, such as ARRAY['p', 'bucket(id, 4)']",
        )
    };
    let SqlOption::KeyValue { value, .. } = option else {
        return Err(bad());
    };
    let Expr::Array(array) = value else {
        return Err(bad());
    };
    let mut builder = UnboundPartitionSpec::builder();
    for element in &array.elem {
        let Expr::Value(v) = element else {
            return Err(bad());
        };
        let (Value::SingleQuotedString(text) | Value::DoubleQuotedString(text)) = &v.value else {
            return Err(bad());
        };
        let (source_id, name, transform) = parse_partition_field(text, schema)?;
        builder = builder
            .add_partition_fields([UnboundPartitionField {
                source_id,
                field_id: None,
                name,
                transform,
            }])
            .map_err(from_iceberg)?;
    }
    Ok(builder.build())
}

/// A table property `ALTER TABLE … SET PROPERTIES` may set: a name (quoted or not) and a literal
/// value. The write modes take `copy-on-write` or `merge-on-read`; the location is not a property
/// to set this way (the partitioning is a spec, [`evolved_spec`]; the format version an upgrade).
fn settable_property(option: &SqlOption) -> SqeResult<(String, String)> {
    let SqlOption::KeyValue { key, value } = option else {
        return Err(SqeError::invalid(format!(
            "SET PROPERTIES takes name = value pairs, not '{option}'"
        )));
    };
    let name = key.value.to_lowercase();
    let value = match value {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => s.clone(),
            Value::Number(n, _) => n.to_string(),
            Value::Boolean(b) => b.to_string(),
            _ => String::new(),
        },
        _ => String::new(),
    };
    if value.is_empty() {
        return Err(SqeError::invalid(format!(
            "table property '{name}' must be set to a literal"
        )));
    }
    match name.as_str() {
        "write.delete.mode" | "write.update.mode" | "write.merge.mode"
            if value != "copy-on-write" && value != "merge-on-read" =>
        {
            Err(SqeError::invalid(format!(
                "table property '{name}' is copy-on-write or merge-on-read, not '{value}'"
            )))
        }
        "write.distribution-mode" if !["none", "hash", "range"].contains(&value.as_str()) => {
            Err(SqeError::invalid(format!(
                "table property '{name}' is none, hash or range, not '{value}'"
            )))
        }
        "location" => Err(SqeError::unsupported(format!(
            "table property '{name}' cannot be changed by SET PROPERTIES"
        ))),
        _ => Ok((name, value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{PrimitiveType, Type};

    fn schema() -> Schema {
        Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::optional(
                    1,
                    "id",
                    Type::Primitive(PrimitiveType::Long),
                )),
                Arc::new(NestedField::optional(
                    2,
                    "ts",
                    Type::Primitive(PrimitiveType::Timestamp),
                )),
            ])
            .build()
            .unwrap_or_else(|_| Schema::builder().build().unwrap_or_else(|_| unreachable!()))
    }

    #[test]
    fn partition_fields_in_trino_and_spark_order() {
        let s = schema();
        assert_eq!(
            parse_partition_field("'bucket(id, 16)'", &s).ok(),
            Some((1, "id_bucket".into(), Transform::Bucket(16)))
        );
        assert_eq!(
            parse_partition_field("bucket(16, id)", &s).ok(),
            Some((1, "id_bucket".into(), Transform::Bucket(16)))
        );
        assert_eq!(
            parse_partition_field("days(ts)", &s).ok(),
            Some((2, "ts_day".into(), Transform::Day))
        );
        assert_eq!(
            parse_partition_field("id", &s).ok(),
            Some((1, "id".into(), Transform::Identity))
        );
        assert_eq!(
            parse_partition_field("weeks(ts)", &s)
                .err()
                .map(|e| e.message().to_string())
                .as_deref(),
            Some("unknown partition transform 'weeks' in 'weeks(ts)'")
        );
    }
}

//! SHOW and DESCRIBE, in Trino's shape (its column names and type spellings): what the caller may
//! see of the catalogs (SHOW CATALOGS, SCHEMAS, TABLES, COLUMNS; DESCRIBE; SHOW CREATE TABLE and
//! VIEW), of the engine (SHOW FUNCTIONS: functions.rs) and of a table's statistics (SHOW STATS:
//! stats.rs). A table the caller holds no privilege on is not listed and not described, and of a
//! table they read by columns only those columns are.

pub mod functions;
pub mod stats;

use std::sync::Arc;

use datafusion::arrow::array::StringArray;
use datafusion::arrow::datatypes::{DataType, Field, Schema as ArrowSchema};
use datafusion::sql::sqlparser::ast::{
    ObjectName, ShowCreateObject, ShowStatementFilter, ShowStatementIn, ShowStatementOptions,
    Statement,
};
use iceberg::TableIdent;
use iceberg::spec::{NestedFieldRef, Transform};
use sqe_sessions::{QueryResult, SqeError, SqeResult};

use crate::context::Ctx;
use crate::error::from_iceberg;
use crate::governance::model::Object;
use crate::names::{SYSTEM_CATALOG, object_parts, qualified, schema_name, table_ident};
use crate::types::trino_type_name;

/// SHOW CATALOGS, SCHEMAS, TABLES and COLUMNS, DESCRIBE, SHOW CREATE TABLE and VIEW.
pub(crate) async fn run(ctx: &Ctx<'_>, statement: Statement) -> SqeResult<QueryResult> {
    let session = ctx.session;
    match statement {
        Statement::ShowCatalogs {
            terse: false,
            history: false,
            show_options,
        } => {
            if show_options.show_in.is_some()
                || show_options.starts_with.is_some()
                || show_options.limit.is_some()
            {
                return Err(SqeError::invalid("expected SHOW CATALOGS [LIKE 'pattern']"));
            }
            let pattern = like_filter(&show_options)?;
            let attached: Vec<String> = ctx
                .mounts
                .attached()
                .of(session)
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            let mut names: Vec<String> = ctx
                .mounts
                .server()
                .keys()
                .map(String::as_str)
                .chain(attached.iter().map(String::as_str))
                .chain([SYSTEM_CATALOG])
                .filter(|c| pattern.as_deref().is_none_or(|p| like(p, c)))
                .map(str::to_string)
                .collect();
            names.sort();
            QueryResult::column("Catalog", names)
        }
        Statement::ShowSchemas { show_options, .. }
        | Statement::ShowDatabases { show_options, .. } => {
            let catalog_name = match show_in(&show_options) {
                Some(n) => object_parts(n)?.pop().unwrap_or_default(),
                None => session.catalog.clone(),
            };
            let catalog = ctx.mounts.bind(session, &catalog_name)?;
            let pattern = like_filter(&show_options)?;
            let mut names = catalog.namespace_names().await.map_err(from_iceberg)?;
            names.push("information_schema".to_string());
            names.sort();
            names.retain(|n| pattern.as_deref().is_none_or(|p| like(p, n)));
            QueryResult::column("Schema", names)
        }
        Statement::ShowTables { show_options, .. } => {
            let (catalog_name, schema) = match show_in(&show_options) {
                Some(n) => schema_name(session, n)?,
                None => (session.catalog.clone(), session.schema.clone()),
            };
            let catalog = ctx.mounts.schema(session, &catalog_name, &schema).await?;
            let pattern = like_filter(&show_options)?;
            let mut names = catalog.table_names(&schema).await.map_err(from_iceberg)?;
            names.extend(catalog.view_names(&schema).await.map_err(from_iceberg)?);
            let mut names =
                ctx.governance
                    .visible_tables(session, &catalog_name, &schema, names)?;
            names.sort();
            names.retain(|n| pattern.as_deref().is_none_or(|p| like(p, n)));
            QueryResult::column("Table", names)
        }
        Statement::ShowColumns { show_options, .. } => {
            let Some(name) = show_in(&show_options) else {
                return Err(SqeError::invalid("SHOW COLUMNS needs FROM <table>"));
            };
            describe(ctx, name).await
        }
        Statement::ExplainTable { table_name, .. } => describe(ctx, &table_name).await,
        Statement::ShowCreate {
            obj_type: ShowCreateObject::Table,
            obj_name,
        } => show_create_table(ctx, &obj_name).await,
        Statement::ShowCreate {
            obj_type: ShowCreateObject::View,
            obj_name,
        } => show_create_view(ctx, &obj_name).await,
        other => Err(SqeError::unsupported(format!(
            "statement not supported: {}",
            other.to_string().chars().take(60).collect::<String>()
        ))),
    }
}

/// `SHOW CREATE VIEW`, in Trino's form.
pub(crate) async fn show_create_view(ctx: &Ctx<'_>, name: &ObjectName) -> SqeResult<QueryResult> {
    let session = ctx.session;
    let (catalog_name, ident) = table_ident(session, name)?;
    let object = Object::table(&catalog_name, &ident.namespace.join("."), &ident.name);
    ctx.governance.authorize_visible(session, &object, || {
        SqeError::not_found(format!("view '{object}' does not exist"))
    })?;
    let Some((catalog, ident, view)) = ctx.mounts.view(session, name).await? else {
        let (catalog_name, ident) = table_ident(session, name)?;
        return Err(SqeError::not_found(format!(
            "view '{}' does not exist",
            qualified(&catalog_name, &ident)
        )));
    };
    let comment = match &view.comment {
        Some(c) => format!(" COMMENT '{}'", c.replace('\'', "''")),
        None => String::new(),
    };
    let text = format!(
        "CREATE VIEW {}{comment} SECURITY INVOKER AS\n{}",
        qualified(&catalog, &ident),
        view.sql
    );
    QueryResult::column("Create View", vec![text])
}

/// SQL's LIKE on names: `%` any run of characters, `_` one character.
pub(crate) fn like(pattern: &str, text: &str) -> bool {
    like_chars(
        &pattern.chars().collect::<Vec<_>>(),
        &text.chars().collect::<Vec<_>>(),
    )
}

/// SQL's LIKE: `%` any run of characters, `_` one character.
pub(crate) fn like_chars(pattern: &[char], text: &[char]) -> bool {
    // Where the last `%` was, and the text position it has taken up to.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '_' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '%' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '%')
}

fn like_filter(options: &ShowStatementOptions) -> SqeResult<Option<String>> {
    match options.filter_position.as_ref().map(|f| match f {
        datafusion::sql::sqlparser::ast::ShowStatementFilterPosition::Infix(f)
        | datafusion::sql::sqlparser::ast::ShowStatementFilterPosition::Suffix(f) => f,
    }) {
        None => Ok(None),
        Some(ShowStatementFilter::Like(p)) | Some(ShowStatementFilter::ILike(p)) => {
            Ok(Some(p.clone()))
        }
        Some(other) => Err(SqeError::unsupported(format!(
            "SHOW ... {other} is not supported; use LIKE"
        ))),
    }
}

fn show_in(options: &ShowStatementOptions) -> Option<&ObjectName> {
    options
        .show_in
        .as_ref()
        .and_then(|ShowStatementIn { parent_name, .. }| parent_name.as_ref())
}

/// A table or view the caller holds no privilege on is described as absent.
pub(crate) fn hidden_is_absent(ctx: &Ctx<'_>, catalog: &str, ident: &TableIdent) -> SqeResult<()> {
    let session = ctx.session;
    let object = Object::table(catalog, &ident.namespace.join("."), &ident.name);
    ctx.governance.authorize_visible(session, &object, || {
        SqeError::not_found(format!("table '{object}' does not exist"))
    })
}

async fn describe(ctx: &Ctx<'_>, name: &ObjectName) -> SqeResult<QueryResult> {
    let session = ctx.session;
    let (catalog_name, ident) = table_ident(session, name)?;
    hidden_is_absent(ctx, &catalog_name, &ident)?;
    let catalog = ctx.mounts.bind(session, &catalog_name)?;
    if !catalog.table_exists(&ident).await.map_err(from_iceberg)?
        && let Some((_, _, view)) = ctx.mounts.view(session, name).await?
    {
        let fields = view.schema.as_struct().fields();
        return describe_rows(fields, vec![String::new(); fields.len()]);
    }
    let (_, ident, table) = ctx.mounts.table(session, name).await?;
    let schema = table.metadata().current_schema();
    let spec = table.metadata().default_partition_spec();
    let fields = listed_columns(ctx, &catalog_name, &ident, schema.as_struct().fields())?;
    let extra: Vec<String> = fields
        .iter()
        .map(|f| {
            let parts: Vec<String> = spec
                .fields()
                .iter()
                .filter(|p| p.source_id == f.id)
                .map(|p| format!("partition key ({})", partition_label(&p.transform, &f.name)))
                .collect();
            parts.join(", ")
        })
        .collect();
    describe_rows(&fields, extra)
}

/// The columns of a table that DESCRIBE and SHOW CREATE show the caller: those they may read
/// when they read it by columns.
fn listed_columns(
    ctx: &Ctx<'_>,
    catalog: &str,
    ident: &TableIdent,
    fields: &[NestedFieldRef],
) -> SqeResult<Vec<NestedFieldRef>> {
    let session = ctx.session;
    let object = Object::table(catalog, &ident.namespace.join("."), &ident.name);
    let access = ctx.governance.column_access(session, &object)?;
    Ok(fields
        .iter()
        .filter(|f| access.as_ref().is_none_or(|a| a.lists(f.id)))
        .cloned()
        .collect())
}

async fn show_create_table(ctx: &Ctx<'_>, name: &ObjectName) -> SqeResult<QueryResult> {
    let session = ctx.session;
    let (catalog_name, ident) = table_ident(session, name)?;
    hidden_is_absent(ctx, &catalog_name, &ident)?;
    let (catalog, ident, table) = ctx.mounts.table(session, name).await?;
    let schema = table.metadata().current_schema();
    let fields = listed_columns(ctx, &catalog_name, &ident, schema.as_struct().fields())?;
    let columns: Vec<String> = fields
        .iter()
        .map(|f| {
            let name = crate::names::sql_name(&f.name);
            let mut line = format!("   {name} {}", trino_type_name(&f.field_type));
            if f.required {
                line.push_str(" NOT NULL");
            }
            if let Some(doc) = &f.doc {
                line.push_str(&format!(" COMMENT '{}'", doc.replace('\'', "''")));
            }
            line
        })
        .collect();
    let mut with = vec![
        "   format = 'PARQUET'".to_string(),
        format!(
            "   format_version = {}",
            table.metadata().format_version() as u8
        ),
    ];
    let spec = table.metadata().default_partition_spec();
    if !spec.is_unpartitioned() {
        let parts: Vec<String> = spec
            .fields()
            .iter()
            .filter_map(|p| {
                let col = fields.iter().find(|f| f.id == p.source_id)?;
                Some(format!("'{}'", partition_label(&p.transform, &col.name)))
            })
            .collect();
        if !parts.is_empty() {
            with.push(format!("   partitioning = ARRAY[{}]", parts.join(", ")));
        }
    }
    let sorted_by = crate::write::sorting::sorted_by(table.metadata());
    if !sorted_by.is_empty() {
        let fields: Vec<String> = sorted_by
            .iter()
            .map(|f| format!("'{}'", f.replace('\'', "''")))
            .collect();
        with.push(format!("   sorted_by = ARRAY[{}]", fields.join(", ")));
    }
    with.push(format!("   location = '{}'", table.metadata().location()));
    let text = format!(
        "CREATE TABLE {catalog}.{}.{} (\n{}\n)\nWITH (\n{}\n)",
        ident.namespace.join("."),
        ident.name,
        columns.join(",\n"),
        with.join(",\n")
    );
    QueryResult::column("Create Table", vec![text])
}

/// DESCRIBE's rows, in Trino's shape: one per column, `extra` saying more of each.
fn describe_rows(fields: &[NestedFieldRef], extra: Vec<String>) -> SqeResult<QueryResult> {
    QueryResult::rows(
        ArrowSchema::new(vec![
            Field::new("Column", DataType::Utf8, false),
            Field::new("Type", DataType::Utf8, false),
            Field::new("Extra", DataType::Utf8, false),
            Field::new("Comment", DataType::Utf8, true),
        ]),
        vec![
            Arc::new(StringArray::from(
                fields.iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                fields
                    .iter()
                    .map(|f| trino_type_name(&f.field_type))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(extra)),
            Arc::new(StringArray::from(
                fields.iter().map(|f| f.doc.clone()).collect::<Vec<_>>(),
            )),
        ],
    )
}

/// Trino's spelling of a partition field.
fn partition_label(t: &Transform, column: &str) -> String {
    match t {
        Transform::Identity => column.to_string(),
        Transform::Year => format!("year({column})"),
        Transform::Month => format!("month({column})"),
        Transform::Day => format!("day({column})"),
        Transform::Hour => format!("hour({column})"),
        Transform::Bucket(n) => format!("bucket({column}, {n})"),
        Transform::Truncate(w) => format!("truncate({column}, {w})"),
        Transform::Void => format!("void({column})"),
        Transform::Unknown => format!("unknown({column})"),
    }
}

#[cfg(test)]
mod tests {
    use super::like;

    #[test]
    fn like_patterns() {
        assert!(like("date%", "date_add"));
        assert!(like("%add", "date_add"));
        assert!(like("d_te%", "date_add"));
        assert!(like("%_%", "x"));
        assert!(!like("date", "date_add"));
        assert!(!like("%sub", "substr"));
        assert!(like("%", ""));
        assert!(like("t%", "tab"));
        assert!(like("t_b", "tab"));
        assert!(!like("t_", "tab"));
    }

    #[test]
    fn many_wildcards_do_not_backtrack_without_end() {
        // A matcher that tried every split at each `%` would take 2^40 steps here.
        let pattern = format!("{}b", "%".repeat(40));
        assert!(!like(&pattern, &"a".repeat(200)));
        assert!(like(&pattern, &format!("{}b", "a".repeat(200))));
    }
}

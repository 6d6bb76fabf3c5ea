//! Views: `CREATE [OR REPLACE] VIEW`, `DROP VIEW` and `SHOW CREATE VIEW`.
//!
//! A view is kept in its catalog as Iceberg's view spec says (catalog/view.rs), with its SQL as
//! written and the catalog and schema its names resolve in. It is planned when it is created, as
//! every reader will plan it (which checks it and gives its columns); reading one plans that SQL
//! again as the caller (planner/views.rs), so a view never reaches more than its reader may.

use crate::governance::model::{Object, Privilege};

use datafusion::arrow::datatypes::{DataType, Field, Schema as ArrowSchema};
use datafusion::sql::sqlparser::ast::{CreateView, ObjectName};
use iceberg::arrow::arrow_schema_to_schema_auto_assign_ids;
use sqe_sessions::{QueryResult, SqeError, SqeResult};

use crate::catalog::view::ViewChange;
use crate::context::Ctx;
use crate::error::{from_datafusion, from_iceberg};
use crate::names::{qualified, table_ident};
use crate::planner::views::{ViewChain, in_view};
use crate::statement::prepass::Prepared;

pub(crate) async fn create_view(
    ctx: &Ctx<'_>,
    cv: &CreateView,
    prepared: &Prepared,
) -> SqeResult<QueryResult> {
    let session = ctx.session;
    if cv.materialized {
        return Err(SqeError::unsupported(
            "CREATE MATERIALIZED VIEW is not supported",
        ));
    }
    if cv.temporary || cv.or_alter || cv.to.is_some() {
        return Err(SqeError::unsupported(
            "only CREATE [OR REPLACE] VIEW name [COMMENT '…'] AS query is supported",
        ));
    }
    if !prepared.files.is_empty() || !prepared.time_travel.is_empty() {
        return Err(SqeError::unsupported(
            "a view cannot name a file path or read a table AS OF a version; use read_parquet(…) and the like in a view",
        ));
    }
    let (catalog_name, ident) = table_ident(session, &cv.name)?;
    let catalog = ctx.mounts.bind(session, &catalog_name)?;
    let full = qualified(&catalog_name, &ident);
    if !catalog.supports_views() {
        return Err(SqeError::unsupported(format!(
            "cannot create view '{full}': catalog '{catalog_name}' does not keep views"
        )));
    }
    if let Some(why) = catalog.read_only() {
        return Err(SqeError::unsupported(why));
    }
    let schema_object = Object::schema(&catalog_name, &ident.namespace.join("."));
    ctx.governance
        .authorize(session, Privilege::Create, &schema_object, || {
            SqeError::internal("a schema is never hidden")
        })?;
    let view_object = Object::table(&catalog_name, &ident.namespace.join("."), &ident.name);
    let replaces = cv.or_replace && catalog.view_exists(&ident).await.map_err(from_iceberg)?;
    if replaces {
        ctx.governance
            .authorize(session, Privilege::Drop, &view_object, || {
                SqeError::invalid(format!(
                    "cannot create view '{full}': a view of that name exists"
                ))
            })?;
    }
    if cv.if_not_exists && catalog.view_exists(&ident).await.map_err(from_iceberg)? {
        return Ok(QueryResult::empty());
    }
    let sql = cv.query.to_string();
    let schema_name = ident.namespace.join(".");
    // Planned now as every reader will plan it: this checks it, and gives its columns.
    let as_view = in_view(session, &catalog_name, &schema_name);
    let (state, plan) = ctx
        .planner
        .plan_view_sql(&as_view, &sql, &ViewChain::default().inside(&full))
        .await?;
    let plan = state
        .analyzer()
        .execute_and_check(plan, state.config_options(), |_, _| {})
        .map_err(from_datafusion)?;
    let fields = plan.schema().fields();
    let names: Vec<String> = if cv.columns.is_empty() {
        fields.iter().map(|f| f.name().clone()).collect()
    } else if cv.columns.len() == fields.len() {
        cv.columns.iter().map(|c| c.name.value.clone()).collect()
    } else {
        return Err(SqeError::invalid(format!(
            "view '{full}' names {} columns but its query has {}",
            cv.columns.len(),
            fields.len()
        )));
    };
    for (i, n) in names.iter().enumerate() {
        if names[..i].iter().any(|m| m.eq_ignore_ascii_case(n)) {
            return Err(SqeError::invalid(format!(
                "column name '{n}' is given more than once in view '{full}'"
            )));
        }
    }
    let arrow = ArrowSchema::new(
        fields
            .iter()
            .zip(&names)
            .map(|(f, n)| Field::new(n, storable(f.data_type()), true))
            .collect::<Vec<_>>(),
    );
    let schema = arrow_schema_to_schema_auto_assign_ids(&arrow).map_err(|e| {
        SqeError::unsupported(format!(
            "view '{full}' has a column type a view cannot keep: {}",
            e.message()
        ))
    })?;
    let change = ViewChange {
        sql,
        default_catalog: catalog_name.clone(),
        default_schema: schema_name,
        schema,
        comment: cv.comment.clone(),
        owner: session.principal.name.clone(),
    };
    catalog
        .create_view(&ident, change, replaces)
        .await
        .map_err(from_iceberg)?;
    // A replaced view keeps its owner and privileges.
    if !replaces {
        ctx.governance.record_owner(session, &view_object)?;
    }
    Ok(QueryResult::empty())
}

pub(crate) async fn drop_view(ctx: &Ctx<'_>, name: &ObjectName, if_exists: bool) -> SqeResult<()> {
    let session = ctx.session;
    let (catalog_name, ident) = table_ident(session, name)?;
    let catalog = ctx.mounts.bind(session, &catalog_name)?;
    let full = qualified(&catalog_name, &ident);
    let object = Object::table(&catalog_name, &ident.namespace.join("."), &ident.name);
    match ctx
        .governance
        .authorize(session, Privilege::Drop, &object, || {
            SqeError::not_found(format!("view '{full}' does not exist"))
        }) {
        Err(e) if if_exists && e.code() == sqe_sessions::ErrorCode::NotFound => return Ok(()),
        other => other?,
    }
    if catalog.supports_views() {
        // Dropped without reading its metadata, which may be what is broken.
        match catalog.drop_view(&ident).await {
            Ok(()) => return ctx.governance.forget_object(session, &object),
            Err(e) if e.kind() == iceberg::ErrorKind::TableNotFound => {}
            Err(e) => return Err(from_iceberg(e)),
        }
    }
    if catalog.table_exists(&ident).await.map_err(from_iceberg)? {
        return Err(SqeError::invalid(format!(
            "'{full}' is a table, not a view; drop it with DROP TABLE"
        )));
    }
    if if_exists {
        return Ok(());
    }
    Err(SqeError::not_found(format!("view '{full}' does not exist")))
}

/// A column type as a view's schema keeps it (Iceberg has neither unsigned integers nor a type
/// of its own for NULL): text of any kind is a string, an unsigned integer the signed type holding
/// it (`row_number()` is a bigint, as in Trino), NULL a varchar.
fn storable(ty: &DataType) -> DataType {
    match ty {
        DataType::Utf8View | DataType::LargeUtf8 | DataType::Null => DataType::Utf8,
        DataType::BinaryView | DataType::LargeBinary => DataType::Binary,
        DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 | DataType::UInt64 => DataType::Int64,
        // Iceberg's own precisions (a `timestamp(3)` column is kept as a timestamp, as a table
        // keeps it); the query is planned again whenever the view is read.
        other => crate::types::storable_arrow_type(other).unwrap_or_else(|_| other.clone()),
    }
}

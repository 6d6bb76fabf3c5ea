//! INSERT and CREATE TABLE AS: the query's rows are cast to the table's types, written as Parquet data
//! files (split by partition), and committed as one fast-append snapshot. A write that fails leaves no
//! snapshot, removes the files it wrote, and a failed CTAS removes its table.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema as ArrowSchema};
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::sqlparser::ast::{CreateTable, Insert, ObjectName, Statement, TableObject};
use iceberg::arrow::arrow_schema_to_schema_auto_assign_ids;
use iceberg::spec::DataFile;
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, TableIdent};
use sqe_sessions::{ErrorCode, QueryResult, SqeError, SqeResult};

use crate::catalog::backend::{CatalogRef, SqeCatalog};
use crate::context::Ctx;
use crate::error::from_iceberg;
use crate::governance::model::{Object, Privilege};
use crate::names::{normalize_ident, resolve_name};
use crate::session_properties::Existing;
use crate::types::storable_arrow_type;
use crate::write::change::{self, Change, Committed, Retries, surely_not_committed};
use crate::write::ddl::create_iceberg_table;
use crate::write::files::{cast_to_table, remove_written, write_files};
use crate::write::overwrite::overwrite;
use crate::write::target::Target;

type QueryTables = Vec<(String, Arc<dyn datafusion::catalog::TableProvider>)>;

pub(crate) async fn insert(
    ctx: &Ctx<'_>,
    insert: Insert,
    tables: QueryTables,
) -> SqeResult<QueryResult> {
    let session = ctx.session;
    let TableObject::TableName(name) = &insert.table else {
        return Err(SqeError::unsupported(
            "INSERT INTO TABLE FUNCTION is not supported",
        ));
    };
    let existing = match insert.overwrite {
        true => Existing::Overwrite,
        false => crate::session_properties::insert_existing(session)?,
    };
    let Some(source) = insert.source.clone() else {
        return Err(SqeError::invalid("INSERT needs VALUES or a query"));
    };
    // Spark's `INSERT INTO t.branch_b`: the rows go to branch b of table t.
    let target = Target::of(ctx, name).await;
    let name = &target.name;
    let (catalog_name, schema, table_name) = resolve_name(session, name)?;
    let object = Object::table(&catalog_name, &schema, &table_name);
    ctx.governance
        .authorize(session, Privilege::Insert, &object, || {
            SqeError::not_found(format!(
                "table '{catalog_name}.{schema}.{table_name}' does not exist"
            ))
        })?;
    // Replacing rows removes them: it takes DELETE too, as in Trino, and is refused to a caller
    // who does not see every row (it would remove rows they cannot see).
    if existing == Existing::Overwrite {
        ctx.governance
            .authorize(session, Privilege::Delete, &object, || {
                SqeError::not_found(format!("table '{object}' does not exist"))
            })?;
        if crate::write::remove::governed_for_caller(ctx, &object).await? {
            return Err(SqeError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "Access Denied: Cannot overwrite table {object}: a row filter or a column mask applies to you on it; DELETE and INSERT change only the rows you see"
                ),
            ));
        }
    }
    let (catalog_name, ident, table) = ctx.mounts.table(session, name).await?;
    let (state, plan) = ctx
        .planner
        .plan(session, Statement::Query(source), tables)
        .await?;
    let columns: Option<Vec<String>> =
        (!insert.columns.is_empty()).then(|| insert.columns.iter().map(column_name).collect());
    let plan = cast_to_table(
        plan,
        &table,
        columns.as_deref(),
        &format!(
            "{catalog_name}.{}.{}",
            ident.namespace.join("."),
            ident.name
        ),
    )?;
    let rows = match (existing, &target.branch) {
        (Existing::Append, Some(_)) => {
            let catalog = ctx.mounts.bind(session, &catalog_name)?;
            append_to_branch(ctx, &catalog, &target, &table, &state, plan).await?
        }
        (Existing::Append, None) => {
            let catalog = ctx.mounts.bind(session, &catalog_name)?;
            append(&catalog, &table, &state, plan).await?
        }
        _ => overwrite(ctx, &target, &object, &state, plan, existing).await?,
    };
    QueryResult::written(rows)
}

pub(crate) async fn create_table_as(
    ctx: &Ctx<'_>,
    ct: CreateTable,
    partitioned_by: Option<Vec<String>>,
    tables: QueryTables,
) -> SqeResult<QueryResult> {
    let session = ctx.session;
    if !ct.columns.is_empty() {
        return Err(SqeError::unsupported(
            "CREATE TABLE AS with a column list is not supported; alias the query's columns",
        ));
    }
    let Some(query) = ct.query.clone() else {
        return Err(SqeError::internal("CREATE TABLE AS without a query"));
    };
    let (state, plan) = ctx
        .planner
        .plan(session, Statement::Query(query), tables)
        .await?;
    let mut fields = Vec::new();
    for f in plan.schema().fields() {
        if fields.iter().any(|g: &Field| g.name() == f.name()) {
            return Err(SqeError::invalid(format!(
                "column '{}' appears more than once in the query; give the columns distinct aliases",
                f.name()
            )));
        }
        fields.push(Field::new(
            f.name(),
            storable_arrow_type(f.data_type())?,
            true,
        ));
    }
    let schema =
        arrow_schema_to_schema_auto_assign_ids(&ArrowSchema::new(fields)).map_err(from_iceberg)?;
    let Some((catalog_name, ident, table)) =
        create_iceberg_table(ctx, &ct, schema, partitioned_by).await?
    else {
        return QueryResult::written(0);
    };
    let catalog = ctx.mounts.bind(session, &catalog_name)?;
    let written = match cast_to_table(plan, &table, None, &ident.name) {
        Ok(plan) => append(&catalog, &table, &state, plan).await,
        Err(e) => Err(e),
    };
    match written {
        Ok(rows) => QueryResult::written(rows),
        Err(e) => {
            drop_quietly(catalog.as_ref(), &ident).await;
            Err(e)
        }
    }
}

/// Writes the rows of `plan` into the branch `target` names and commits them as one snapshot
/// on that branch (main is left as it is); a commit that loses the race is made again on the
/// branch's new head. Returns the row count.
async fn append_to_branch(
    ctx: &Ctx<'_>,
    catalog: &CatalogRef,
    target: &Target,
    table: &Table,
    state: &SessionState,
    plan: LogicalPlan,
) -> SqeResult<u64> {
    if let Some(reason) = catalog.read_only() {
        return Err(SqeError::unsupported(reason));
    }
    // The branch is checked (a tag takes no writes) before any file is written.
    target.commit_branch(table)?;
    let prefix = uuid::Uuid::now_v7().to_string();
    let (added, rows) = match write_files(table, state, plan, &prefix).await {
        Ok(written) => written,
        Err(e) => {
            remove_written(table, &prefix).await;
            return Err(e);
        }
    };
    let retries = Retries::of(table);
    let mut lost = 0;
    loop {
        let (_, ident, current) = target.load(ctx).await?;
        let change = Change {
            added: added.clone(),
            branch: target.commit_branch(&current)?,
            ..Change::default()
        };
        match change::commit(catalog.as_ref(), &ident, &current, &change).await {
            Ok(Committed::Done) => return Ok(rows),
            Ok(Committed::Lost) if lost < retries.retries => {
                tokio::time::sleep(retries.wait(lost)).await;
                lost += 1;
            }
            Ok(Committed::Lost) => {
                remove_written(table, &prefix).await;
                let branch = target.branch.as_deref().unwrap_or_default();
                return Err(retries.overtaken(&format!("INSERT INTO branch '{branch}'"), lost));
            }
            Ok(Committed::Unknown(e)) => return Err(e),
            Err(e) => {
                remove_written(table, &prefix).await;
                return Err(e);
            }
        }
    }
}

async fn drop_quietly(catalog: &dyn SqeCatalog, ident: &TableIdent) {
    if let Err(e) = catalog.purge_table(ident).await {
        tracing::warn!("could not remove table {ident} after a failed CREATE TABLE AS: {e}");
    }
}

/// Writes the rows of `plan` into `table` and commits them as one snapshot. Returns the row count.
async fn append(
    catalog: &CatalogRef,
    table: &Table,
    state: &SessionState,
    plan: LogicalPlan,
) -> SqeResult<u64> {
    if let Some(reason) = catalog.read_only() {
        return Err(SqeError::unsupported(reason));
    }
    let prefix = uuid::Uuid::now_v7().to_string();
    let mut outcome_unknown = false;
    let result = write_and_commit(catalog, table, state, plan, &prefix, &mut outcome_unknown).await;
    // A commit whose outcome is unknown (a timeout, a lost connection, a catalog's 5xx) may have
    // made the files part of the table: they stay.
    if result.is_err() && !outcome_unknown {
        remove_written(table, &prefix).await;
    }
    result
}

async fn write_and_commit(
    catalog: &CatalogRef,
    table: &Table,
    state: &SessionState,
    plan: LogicalPlan,
    prefix: &str,
    outcome_unknown: &mut bool,
) -> SqeResult<u64> {
    let (files, rows) = write_files(table, state, plan, prefix).await?;
    if files.is_empty() {
        return Ok(0);
    }
    // A snapshot that would list many manifests merges them (change.rs), which iceberg-rust's
    // append does not.
    if merge_due(table).await? {
        return append_merging(catalog, table, files, outcome_unknown)
            .await
            .map(|()| rows);
    }
    let tx = Transaction::new(table);
    // iceberg-rust's check that no added file is in the table already reads every manifest of the
    // current snapshot, on each append: a commit as slow as the table is old. The files were just
    // written under a fresh UUID-v7 name, so none can be.
    let tx = tx
        .fast_append()
        .with_check_duplicate(false)
        .add_data_files(files)
        .apply(tx)
        .map_err(from_iceberg)?;
    if let Err(e) = tx.commit(catalog.as_ref() as &dyn Catalog).await {
        if surely_not_committed(&e) {
            return Err(from_iceberg(e));
        }
        *outcome_unknown = true;
        let e = from_iceberg(e);
        return Err(SqeError::new(
            e.code(),
            format!(
                "{}; whether the write was committed is unknown, so its files were kept",
                e.message()
            ),
        ));
    }
    Ok(rows)
}

/// Whether an append to `table` now would list enough manifests to merge them.
async fn merge_due(table: &Table) -> SqeResult<bool> {
    let Some(current) = table.metadata().current_snapshot() else {
        return Ok(false);
    };
    let list = table
        .manifest_list_reader(current)
        .load()
        .await
        .map_err(from_iceberg)?;
    Ok(change::ManifestMerge::of(table).due(list.entries().len() + 1))
}

/// Commits `files` as an append whose snapshot merges the manifests it carries over, deciding it
/// again on the table's new head when another writer commits first.
async fn append_merging(
    catalog: &CatalogRef,
    table: &Table,
    files: Vec<DataFile>,
    outcome_unknown: &mut bool,
) -> SqeResult<()> {
    let retries = Retries::of(table);
    let ident = table.identifier().clone();
    let mut current = table.clone();
    let mut lost = 0;
    loop {
        let change = Change {
            added: files.clone(),
            ..Change::default()
        };
        match change::commit(catalog.as_ref(), &ident, &current, &change).await? {
            Committed::Done => return Ok(()),
            Committed::Lost if lost < retries.retries => {
                tokio::time::sleep(retries.wait(lost)).await;
                lost += 1;
                current = catalog.load_table(&ident).await.map_err(from_iceberg)?;
            }
            Committed::Lost => return Err(retries.overtaken("INSERT", lost)),
            Committed::Unknown(e) => {
                *outcome_unknown = true;
                return Err(e);
            }
        }
    }
}

/// A column of an INSERT's column list, which sqlparser gives as a possibly dotted name; a dotted
/// one names no column of the table and is reported as unknown.
fn column_name(name: &ObjectName) -> String {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|part| match part.as_ident() {
            Some(ident) => normalize_ident(ident),
            None => part.to_string(),
        })
        .collect();
    parts.join(".")
}

//! Row-level DELETE, UPDATE and MERGE (merge.rs plans a MERGE), in either write mode:
//! - copy-on-write (Iceberg's default): the data files holding a changed row are written again,
//!   without the deleted rows and with the updated ones' new values, and one `overwrite` snapshot
//!   swaps the old files for the new;
//! - merge-on-read (the table's `write.delete.mode`, `write.update.mode`, `write.merge.mode`):
//!   position delete files name the changed rows (one per partition), updated rows go into new
//!   data files, and no data file is written again.
//!
//! The rows a statement changes are found by a query planned as the caller's own: `SELECT "$path",
//! "$pos"[, new values] FROM t WHERE …` (a MERGE's: `… FROM t RIGHT JOIN source ON …`), over the
//! row-id scan of the table's current snapshot (`catalog/row_ids.rs`), so the caller's privileges,
//! row filters and column masks apply to the WHERE clause, its subqueries and the new values
//! exactly as to a query: a row-filtered caller changes only rows they see, and a WHERE clause on
//! a masked column compares the masked value. The files are then read again raw (the rows the
//! caller does not see, and the columns an UPDATE does not set, are kept as they are), joined
//! with the changed rows by file and position: copy-on-write reads every row of those files,
//! merge-on-read only the changed rows (the reader skips the others by position).
//!
//! A DELETE or UPDATE that loses the race to writers who only appended commits the same files
//! again (the rows they added stay, as if this statement ran first); after any other change, and
//! for a MERGE always (its inserts depend on what the appended rows would have matched), the
//! statement is decided again against the new head, up to the table's `commit.retry.num-retries`
//! times.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray,
};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::{DataType, Field, Schema as ArrowSchema};
use datafusion::common::{Column, JoinType};
use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::{Case, Expr as DFExpr, LogicalPlan, cast, lit};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::{
    Assignment, AssignmentTarget, Expr, Ident, Merge, ObjectName, SelectItem, SetExpr, Statement,
    TableFactor,
};
use futures::{StreamExt, TryStreamExt};
use iceberg::arrow::schema_to_arrow_schema;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, FormatVersion, Struct,
};
use iceberg::table::Table;
use parquet::arrow::{ArrowWriter, PARQUET_FIELD_ID_META_KEY};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use sqe_sessions::{QueryResult, SqeError, SqeResult, quote_identifier};

use crate::catalog::deletion_vectors::{self, Vector};
use crate::catalog::provider::read_with_current_schema;
use crate::catalog::row_ids::{PATH, POS, Reach, read_position_deletes};
use crate::catalog::scan::IcebergScanProvider;
use crate::context::Ctx;
use crate::error::{from_datafusion, from_iceberg};
use crate::governance::model::{Object, Privilege};
use crate::names::{QUERY_CATALOG, QUERY_SCHEMA, normalize_ident, resolve_name};
use crate::planner::Planner;
use crate::statement::prepass::Prepared;
use crate::write::change::{self, Change, Committed, Retries, only_appends_since};
use crate::write::files::{assignable, cast_to_table, remove_written, write_files};
use crate::write::merge::{self, ACTION, Actions, MergePlan};
use crate::write::patch::{SetColumn, patch_files, row_ids};
use crate::write::target::Target;

/// What a row-level statement does to the rows it finds.
pub(crate) enum RowChange<'a> {
    /// `DELETE FROM t WHERE …`.
    Delete,
    /// `UPDATE t SET c = v, … [WHERE …]`, as written.
    Update(&'a [Assignment]),
    /// `MERGE INTO t …`.
    Merge(&'a MergePlan),
}

/// A [`RowChange`] with its assignments resolved against the table.
enum Resolved<'a> {
    Delete,
    /// Each column assigned, and its new value.
    Update(Vec<(String, &'a Expr)>),
    /// The MERGE, its clauses resolved against the table's columns (named here).
    Merge(Box<MergePlan>, Vec<String>),
}

impl RowChange<'_> {
    fn verb(&self) -> &'static str {
        match self {
            RowChange::Delete => "DELETE FROM",
            RowChange::Update(_) => "UPDATE",
            RowChange::Merge(_) => "MERGE INTO",
        }
    }
}

/// `UPDATE t SET … [WHERE …]`: needs the UPDATE privilege on the table (as in Trino).
pub(crate) async fn update_rows(
    ctx: &Ctx<'_>,
    name: &ObjectName,
    assignments: &[Assignment],
    filter: Option<&Expr>,
    prepared: &Prepared,
) -> SqeResult<QueryResult> {
    let target = Target::of(ctx, name).await;
    let (catalog, schema, table) = resolve_name(ctx.session, &target.name)?;
    let object = Object::table(&catalog, &schema, &table);
    ctx.governance
        .authorize(ctx.session, Privilege::Update, &object, || {
            SqeError::not_found(format!("table '{object}' does not exist"))
        })?;
    change_rows(
        ctx,
        &target,
        &object,
        RowChange::Update(assignments),
        filter,
        prepared,
    )
    .await
}

/// `MERGE INTO t …` (merge.rs plans it).
pub(crate) async fn merge_into(
    ctx: &Ctx<'_>,
    statement: &Merge,
    prepared: &Prepared,
) -> SqeResult<QueryResult> {
    // `MERGE INTO t.branch_b …` merges into branch b of table t.
    let mut statement = statement.clone();
    let mut branch = None;
    if let TableFactor::Table { name, .. } = &mut statement.table {
        let target = Target::of(ctx, name).await;
        *name = target.name;
        branch = target.branch;
    }
    let (name, object, plan) = merge::plan(ctx, &statement)?;
    let target = Target {
        name: name.clone(),
        branch,
    };
    change_rows(
        ctx,
        &target,
        &object,
        RowChange::Merge(&plan),
        None,
        prepared,
    )
    .await
}

/// The name each new value of an UPDATE (of the `i`th column a MERGE's clauses set) goes by in the
/// query that finds the rows.
pub(crate) fn value_name(i: usize) -> String {
    format!("__sqe_value_{i}")
}

/// Changes the rows of `object` (`target`'s table, on its branch) for which `filter` is true
/// (every row without one), as `change` says; the caller's privilege on the table was checked.
/// Returns the number of rows changed.
pub(crate) async fn change_rows(
    ctx: &Ctx<'_>,
    target: &Target,
    object: &Object,
    change: RowChange<'_>,
    filter: Option<&Expr>,
    prepared: &Prepared,
) -> SqeResult<QueryResult> {
    let session = ctx.session;
    let catalog = ctx.mounts.bind(session, &object.catalog)?;
    if let Some(reason) = catalog.read_only() {
        return Err(SqeError::unsupported(reason));
    }
    // The change last written, the snapshot it was made from, its rows and its files' prefix.
    let mut written: Option<(Option<i64>, Change, u64, String)> = None;
    let mut retries: Option<Retries> = None;
    let mut lost = 0;
    loop {
        let (_, ident, table) = target.load(ctx).await?;
        let retries = *retries.get_or_insert_with(|| Retries::of(&table));
        let head = table.metadata().current_snapshot().map(|s| s.snapshot_id());
        let resolved = match &change {
            RowChange::Delete => Resolved::Delete,
            RowChange::Update(assignments) => {
                Resolved::Update(assigned_columns(assignments, &table, object)?)
            }
            RowChange::Merge(plan) => {
                let columns: Vec<String> = table
                    .metadata()
                    .current_schema()
                    .as_struct()
                    .fields()
                    .iter()
                    .map(|f| f.name.clone())
                    .collect();
                let mut plan = (*plan).clone();
                plan.resolve(&columns, object)?;
                Resolved::Merge(Box::new(plan), columns)
            }
        };
        // A table no snapshot has written has no rows to change (a MERGE may insert some).
        if head.is_none() && !matches!(resolved, Resolved::Merge(..)) {
            return QueryResult::written(0);
        }
        let (mut files, rows, prefix) = match written.take() {
            // A MERGE's inserts depend on what the appended rows would have matched: decided
            // again.
            Some((made_from, files, rows, prefix))
                if !matches!(resolved, Resolved::Merge(..))
                    && only_appends_since(&table, made_from) =>
            {
                (files, rows, prefix)
            }
            other => {
                if let Some((_, _, _, prefix)) = other {
                    remove_written(&table, &prefix).await;
                }
                let prefix = uuid::Uuid::now_v7().to_string();
                let targets = find_rows(ctx, object, &table, &resolved, filter, prepared).await?;
                let rows = match &resolved {
                    Resolved::Merge(..) => merge::check_matches(&targets)?,
                    Resolved::Update(_) => one_row_each(&targets)?,
                    Resolved::Delete => {
                        targets.iter().map(RecordBatch::num_rows).sum::<usize>() as u64
                    }
                };
                if rows == 0 {
                    return QueryResult::written(0);
                }
                let mor = merge_on_read(&table, &resolved);
                let rewritten = match &resolved {
                    Resolved::Merge(plan, columns) => {
                        let actions = plan.actions(columns);
                        merge_change(ctx, object, &table, &actions, targets, &prefix, mor).await
                    }
                    _ if mor => mark(ctx, object, &table, &resolved, targets, &prefix).await,
                    _ => rewrite(ctx, object, &table, &resolved, targets, &prefix).await,
                };
                match rewritten {
                    Ok(files) => (files, rows, prefix),
                    Err(e) => {
                        remove_written(&table, &prefix).await;
                        return Err(e);
                    }
                }
            }
        };
        files.branch = target.commit_branch(&table)?;
        match change::commit(catalog.as_ref(), &ident, &table, &files).await {
            Ok(Committed::Done) => return QueryResult::written(rows),
            Ok(Committed::Lost) if lost < retries.retries => {
                written = Some((head, files, rows, prefix));
                tokio::time::sleep(retries.wait(lost)).await;
                lost += 1;
            }
            Ok(Committed::Lost) => {
                remove_written(&table, &prefix).await;
                return Err(retries.overtaken(&format!("{} '{object}'", change.verb()), lost));
            }
            // The catalog may have taken it: the files stay.
            Ok(Committed::Unknown(e)) => return Err(e),
            Err(e) => {
                remove_written(&table, &prefix).await;
                return Err(e);
            }
        }
    }
}

/// The name the changed table goes by in the query that finds the rows.
pub(crate) const TARGET: &str = "rows";

/// The rows the statement changes, as the caller's query finds them in snapshot `head` of
/// `table`: each row's `$path` and `$pos`, and for an UPDATE its new values. `prepared` is the
/// statement's own, whose time travel and files its WHERE clause and values may name.
async fn find_rows(
    ctx: &Ctx<'_>,
    object: &Object,
    table: &Table,
    change: &Resolved<'_>,
    filter: Option<&Expr>,
    prepared: &Prepared,
) -> SqeResult<Vec<RecordBatch>> {
    let session = ctx.session;
    let table_name = object.table.as_deref().unwrap_or_default();
    ctx.governance.authorize_read(session, object, || {
        SqeError::not_found(format!("table '{object}' does not exist"))
    })?;
    let sql = format!(
        "SELECT {}, {} FROM {}.{}.{} AS {}",
        quote_identifier(PATH),
        quote_identifier(POS),
        quote_identifier(QUERY_CATALOG),
        quote_identifier(QUERY_SCHEMA),
        quote_identifier(TARGET),
        quote_identifier(table_name),
    );
    let mut statement = match change {
        Resolved::Merge(plan, columns) => plan.query(columns, TARGET, value_name)?,
        _ => crate::statement::parse_query(&sql)?.0,
    };
    // The statement's own WHERE clause and values, already read with Trino's rules, go in as
    // they are.
    if !matches!(change, Resolved::Merge(..)) {
        let Statement::Query(query) = &mut statement else {
            return Err(SqeError::internal("the rows' query is not a query"));
        };
        let SetExpr::Select(select) = query.body.as_mut() else {
            return Err(SqeError::internal("the rows' query is not a SELECT"));
        };
        select.selection = filter.cloned();
        if let Resolved::Update(columns) = change {
            for (i, (_, value)) in columns.iter().enumerate() {
                select.projection.push(SelectItem::ExprWithAlias {
                    expr: (*value).clone(),
                    alias: Ident::with_quote('"', value_name(i)),
                });
            }
        }
    }
    let mut tables = ctx
        .planner
        .resolve_relations(session, &mut statement, prepared)
        .await?;
    // Known as its table, so that its row filters and column masks apply.
    let catalog = ctx.mounts.bind(session, &object.catalog)?;
    let scan = current_rows(table)?
        .in_catalog(&object.catalog)
        .with_manifests(catalog.manifest_cache())
        .with_row_ids(Reach::All);
    tables.push((TARGET.to_string(), Arc::new(scan)));
    let (state, plan) = ctx.planner.plan(session, statement, tables).await?;
    // A MERGE's conditions are evaluated for its action and again for each column's value: a
    // volatile one (random()) could choose one clause for the action and another for a value.
    if let (Resolved::Merge(..), LogicalPlan::Projection(projection)) = (change, &plan)
        && projection.expr.get(2).is_some_and(DFExpr::is_volatile)
    {
        return Err(SqeError::invalid(
            "MERGE's WHEN conditions must not be volatile (random(), uuid(), …): each row must meet them the same way every time",
        ));
    }
    let batches: Vec<RecordBatch> = Planner::stream(state, plan)
        .await?
        .batches
        .try_collect()
        .await?;
    // `$path` as plain strings from here on (the scan gives a dictionary of each file's one).
    batches
        .into_iter()
        .map(|batch| {
            let mut columns = batch.columns().to_vec();
            let mut fields: Vec<_> = batch.schema().fields().iter().cloned().collect();
            columns[0] = datafusion::arrow::compute::cast(&columns[0], &DataType::Utf8)
                .map_err(|e| SqeError::internal(e.to_string()))?;
            fields[0] = Arc::new(fields[0].as_ref().clone().with_data_type(DataType::Utf8));
            RecordBatch::try_new(Arc::new(ArrowSchema::new(fields)), columns)
                .map_err(|e| SqeError::internal(e.to_string()))
        })
        .collect()
}

/// The table's columns an UPDATE assigns, each with its assignment, in the order written;
/// unknown and repeated columns are refused.
fn assigned_columns<'a>(
    assignments: &'a [Assignment],
    table: &Table,
    object: &Object,
) -> SqeResult<Vec<(String, &'a Expr)>> {
    let schema = table.metadata().current_schema();
    let table_name = object.table.as_deref().unwrap_or_default();
    let mut columns: Vec<(String, &Expr)> = Vec::with_capacity(assignments.len());
    for assignment in assignments {
        let AssignmentTarget::ColumnName(target) = &assignment.target else {
            return Err(SqeError::unsupported(
                "UPDATE of a tuple of columns is not supported: assign each column",
            ));
        };
        // `c`, or `t.c` with the table's own name.
        let parts: Vec<String> = target
            .0
            .iter()
            .map(|p| p.as_ident().map(normalize_ident).unwrap_or_default())
            .collect();
        let column = match parts.as_slice() {
            [c] => c.clone(),
            [t, c] if t == table_name => c.clone(),
            _ => {
                return Err(SqeError::not_found(format!(
                    "column '{target}' cannot be resolved in table '{object}'"
                )));
            }
        };
        // Top-level columns only: a quoted "s.x" names no column (a nested field is set with its
        // whole row).
        if schema.as_struct().field_by_name(&column).is_none() {
            return Err(SqeError::not_found(format!(
                "column '{column}' cannot be resolved in table '{object}'"
            )));
        }
        if columns.iter().any(|(c, _)| *c == column) {
            return Err(SqeError::invalid(format!(
                "column '{column}' is assigned more than once"
            )));
        }
        columns.push((column, &assignment.value));
    }
    Ok(columns)
}

/// Writes the files that hold a changed row again, from snapshot `head`'s raw rows: every row but
/// the changed ones as it is (the reader skips those by position), and an UPDATE's changed rows with
/// their new values. Returns the change that swaps them.
async fn rewrite(
    ctx: &Ctx<'_>,
    object: &Object,
    table: &Table,
    change: &Resolved<'_>,
    targets: Vec<RecordBatch>,
    prefix: &str,
) -> SqeResult<Change> {
    let mut rows = rows_of(&targets)?;
    let removed = change::with_their_deletes(table, rows.keys().cloned().collect()).await?;
    let table_name = object.to_string();
    // An UPDATE writes only the columns it sets where it can.
    let mut added = match change {
        Resolved::Update(assigned) => {
            let sets = set_columns(table, assigned)?;
            let (added, patched) = patch_files(
                table,
                &targets,
                &sets,
                None,
                &HashSet::new(),
                prefix,
                &table_name,
            )
            .await?;
            rows.retain(|path, _| !patched.contains(path));
            added
        }
        _ => Vec::new(),
    };
    if rows.is_empty() {
        return Ok(Change {
            removed,
            added,
            ..Change::default()
        });
    }
    let rows = Arc::new(rows);
    let state = ctx.planner.state_for(ctx.session, Vec::new())?;
    let session = SessionContext::new_with_state(state.clone());
    let kept = unchanged(&session, table, rows.clone())?;
    let plan = match change {
        Resolved::Delete => kept,
        Resolved::Update(assigned) => {
            let updated = updated(
                &session,
                table,
                targets,
                rows.clone(),
                assigned,
                &table_name,
            )?;
            kept.union(updated).map_err(from_datafusion)?
        }
        Resolved::Merge(..) => {
            return Err(SqeError::internal("a MERGE is not rewritten as an UPDATE"));
        }
    };
    let plan = cast_to_table(plan.into_unoptimized_plan(), table, None, &table_name)?;
    added.extend(write_files(table, &state, plan, prefix).await?.0);
    Ok(Change {
        removed,
        added,
        ..Change::default()
    })
}

/// The columns an UPDATE sets (`assigned`, in order), with where its rows hold their new values.
fn set_columns(table: &Table, assigned: &[(String, &Expr)]) -> SqeResult<Vec<SetColumn>> {
    let fields = table.metadata().current_schema().as_struct().fields();
    assigned
        .iter()
        .enumerate()
        .map(|(i, (column, _))| {
            let index = fields
                .iter()
                .position(|f| f.name == *column)
                .ok_or_else(|| SqeError::internal(format!("no column '{column}' to set")))?;
            Ok(SetColumn {
                index,
                values: value_name(i),
                clauses: None,
            })
        })
        .collect()
}

/// The rows of the files of `rows` but those, as they are, in the table's columns.
pub(crate) fn unchanged(
    session: &SessionContext,
    table: &Table,
    rows: Arc<HashMap<String, Vec<i64>>>,
) -> SqeResult<DataFrame> {
    let table_schema =
        schema_to_arrow_schema(table.metadata().current_schema()).map_err(from_iceberg)?;
    let scan = current_rows(table)?.with_row_ids(Reach::Except(rows));
    session
        .read_table(Arc::new(scan))
        .and_then(|df| {
            df.select(
                table_schema
                    .fields()
                    .iter()
                    .map(|f| {
                        cast(
                            DFExpr::Column(Column::from_name(f.name())),
                            f.data_type().clone(),
                        )
                        .alias(f.name())
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .map_err(from_datafusion)
}

/// An UPDATE's changed rows (`targets`, at `rows`) with their new values, in the table's columns:
/// the rows read raw by position (the columns it does not set keep their values) and joined with
/// `targets` by file and position.
fn updated(
    session: &SessionContext,
    table: &Table,
    targets: Vec<RecordBatch>,
    rows: Arc<HashMap<String, Vec<i64>>>,
    assigned: &[(String, &Expr)],
    table_name: &str,
) -> SqeResult<DataFrame> {
    let raw = current_rows(table)?.with_row_ids(Reach::Rows(rows));
    let raw = session
        .read_table(Arc::new(raw))
        .and_then(|df| df.alias("r"))
        .map_err(from_datafusion)?;
    let changed = session
        .read_batches(targets)
        .and_then(|df| df.alias("q"))
        .map_err(from_datafusion)?;
    let exprs = new_values(table, &changed, assigned, table_name)?;
    let keys = [PATH, POS];
    changed
        .join(raw, JoinType::Inner, &keys, &keys, None)
        .and_then(|df| df.select(exprs))
        .map_err(from_datafusion)
}

/// Whether `table` writes this change merge-on-read: its `write.delete.mode` (DELETE),
/// `write.update.mode` (UPDATE) or `write.merge.mode` (MERGE) is `merge-on-read`, and its format
/// has deletes (version 2: position delete files; 3: deletion vectors; version 1 has none, and is
/// written copy-on-write).
fn merge_on_read(table: &Table, change: &Resolved<'_>) -> bool {
    let key = match change {
        Resolved::Delete => "write.delete.mode",
        Resolved::Update(_) => "write.update.mode",
        Resolved::Merge(..) => "write.merge.mode",
    };
    let metadata = table.metadata();
    metadata.format_version() >= FormatVersion::V2
        && metadata
            .properties()
            .get(key)
            .is_some_and(|m| m.eq_ignore_ascii_case("merge-on-read"))
}

/// The change merge-on-read: position delete files name the rows of `targets`, and an UPDATE's
/// rows with their new values go into new data files (the old files stay as they are).
async fn mark(
    ctx: &Ctx<'_>,
    object: &Object,
    table: &Table,
    change: &Resolved<'_>,
    targets: Vec<RecordBatch>,
    prefix: &str,
) -> SqeResult<Change> {
    let (added_deletes, replaced_vectors) = write_deletes(table, &targets, prefix).await?;
    let Resolved::Update(assigned) = change else {
        return Ok(Change {
            added_deletes,
            replaced_vectors,
            ..Change::default()
        });
    };
    let rows = Arc::new(rows_of(&targets)?);
    let state = ctx.planner.state_for(ctx.session, Vec::new())?;
    let session = SessionContext::new_with_state(state.clone());
    let table_name = object.to_string();
    let plan = updated(&session, table, targets, rows, assigned, &table_name)?;
    let plan = cast_to_table(plan.into_unoptimized_plan(), table, None, &table_name)?;
    let (added, _) = write_files(table, &state, plan, prefix).await?;
    Ok(Change {
        added,
        added_deletes,
        replaced_vectors,
        ..Change::default()
    })
}

/// The change a MERGE makes of its rows (`targets`, as [`merge::MergePlan::query`] finds them):
/// the target rows its UPDATE and DELETE clauses act on are changed as rows.rs changes an UPDATE's
/// and a DELETE's, copy-on-write or merge-on-read (`mor`), and the rows its INSERT clauses make are
/// written beside them.
#[allow(clippy::too_many_arguments)]
async fn merge_change(
    ctx: &Ctx<'_>,
    object: &Object,
    table: &Table,
    actions: &Actions,
    targets: Vec<RecordBatch>,
    prefix: &str,
    mor: bool,
) -> SqeResult<Change> {
    let table_name = object.to_string();
    let state = ctx.planner.state_for(ctx.session, Vec::new())?;
    let session = SessionContext::new_with_state(state.clone());
    let action = |c: &str| DFExpr::Column(Column::new(Some("q"), c));
    let among = |list: &[i32]| match list.is_empty() {
        true => lit(false),
        false => action(ACTION).in_list(list.iter().map(|n| lit(*n)).collect(), false),
    };
    let mut changed_actions = actions.updates.clone();
    changed_actions.extend(&actions.deletes);
    // The target rows acted on, by file and position.
    let matched = actions_among(&targets, &changed_actions)?;
    let files = files_of(&matched)?;
    let q = session
        .read_batches(targets)
        .and_then(|df| df.alias("q"))
        .map_err(from_datafusion)?;
    let table_schema =
        schema_to_arrow_schema(table.metadata().current_schema()).map_err(from_iceberg)?;
    // The rows the INSERT clauses make.
    let mut inserted = Vec::with_capacity(table_schema.fields().len());
    let values = q.schema().clone();
    for (i, field) in table_schema.fields().iter().enumerate() {
        let (_, value) = values
            .qualified_field_with_unqualified_name(&value_name(i))
            .map_err(from_datafusion)?;
        assignable(field, value.data_type(), &table_name)?;
        inserted.push(cast(action(&value_name(i)), field.data_type().clone()).alias(field.name()));
    }
    let inserts = q
        .clone()
        .filter(action(PATH).is_null().and(among(&actions.inserts)))
        .and_then(|df| df.select(inserted))
        .map_err(from_datafusion)?;
    let mut added_deletes = Vec::new();
    let mut replaced_vectors = HashSet::new();
    let mut removed = HashSet::new();
    let mut added = Vec::new();
    let mut rows = rows_of(&matched)?;
    if !mor && !files.is_empty() {
        removed = change::with_their_deletes(table, files).await?;
        // Files where only UPDATE clauses acted are written with only the columns they set.
        let deleting = files_of(&actions_among(&matched, &actions.deletes)?)?;
        let sets: Vec<SetColumn> = (0..table_schema.fields().len())
            .filter(|i| !actions.assigned[*i].is_empty())
            .map(|i| SetColumn {
                index: i,
                values: value_name(i),
                clauses: Some(actions.assigned[i].clone()),
            })
            .collect();
        let (written, patched) = patch_files(
            table,
            &matched,
            &sets,
            Some(ACTION),
            &deleting,
            prefix,
            &table_name,
        )
        .await?;
        added = written;
        rows.retain(|path, _| !patched.contains(path));
    }
    let plan = if rows.is_empty() {
        inserts
    } else {
        // Merge-on-read needs the updated rows only; copy-on-write every row of their files.
        let rows = Arc::new(rows);
        let raw = current_rows(table)?.with_row_ids(Reach::Rows(rows.clone()));
        let raw = session
            .read_table(Arc::new(raw))
            .and_then(|df| df.alias("r"))
            .map_err(from_datafusion)?;
        // Each column: the new value where an UPDATE clause that sets it acted, else the old.
        let columns: Vec<DFExpr> = table_schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, field)| {
                let old = cast(
                    DFExpr::Column(Column::new(Some("r"), field.name())),
                    field.data_type().clone(),
                );
                let new = cast(action(&value_name(i)), field.data_type().clone());
                DFExpr::Case(Case::new(
                    None,
                    vec![(Box::new(among(&actions.assigned[i])), Box::new(new))],
                    Some(Box::new(old)),
                ))
                .alias(field.name())
            })
            .collect();
        let keys = [PATH, POS];
        // The rows its UPDATE clauses acted on, with their new values.
        let updated = q
            .filter(action(PATH).is_not_null().and(among(&actions.updates)))
            .and_then(|df| df.join(raw, JoinType::Inner, &keys, &keys, None))
            .and_then(|df| df.select(columns))
            .map_err(from_datafusion)?;
        let changed = if mor {
            // Position deletes name the old rows.
            (added_deletes, replaced_vectors) = write_deletes(table, &matched, prefix).await?;
            updated
        } else {
            // The files are written again: their other rows as they are.
            unchanged(&session, table, rows)?
                .union(updated)
                .map_err(from_datafusion)?
        };
        changed.union(inserts).map_err(from_datafusion)?
    };
    let plan = cast_to_table(plan.into_unoptimized_plan(), table, None, &table_name)?;
    added.extend(write_files(table, &state, plan, prefix).await?.0);
    Ok(Change {
        removed,
        added,
        added_deletes,
        replaced_vectors,
        ..Change::default()
    })
}

/// The target rows of a MERGE's rows (`targets`) that one of `clauses` acts on.
fn actions_among(targets: &[RecordBatch], clauses: &[i32]) -> SqeResult<Vec<RecordBatch>> {
    let mut acted = Vec::with_capacity(targets.len());
    for batch in targets {
        let (Some(paths), Some(numbers)) = (
            batch.column(0).as_any().downcast_ref::<StringArray>(),
            batch.column(2).as_any().downcast_ref::<Int32Array>(),
        ) else {
            return Err(SqeError::internal(
                "MERGE's rows are not (string, bigint, integer)",
            ));
        };
        let keep = BooleanArray::from_iter((0..batch.num_rows()).map(|i| {
            Some(paths.is_valid(i) && numbers.is_valid(i) && clauses.contains(&numbers.value(i)))
        }));
        acted.push(
            filter_record_batch(batch, &keep).map_err(|e| SqeError::internal(e.to_string()))?,
        );
    }
    Ok(acted)
}

/// The number of rows an UPDATE changes, each once: a set-returning function in a new value
/// (`unnest`) would give a row several new versions.
fn one_row_each(targets: &[RecordBatch]) -> SqeResult<u64> {
    let mut seen: HashSet<(&str, i64)> = HashSet::new();
    for row in row_ids_of(targets)? {
        if !seen.insert(row) {
            return Err(SqeError::invalid(
                "an UPDATE's new values must be one row for each row it changes (a set-returning function such as unnest gives several)",
            ));
        }
    }
    Ok(seen.len() as u64)
}

/// A scan of `table`'s current snapshot in its current schema (the snapshot may have been written
/// with an older one: an ALTER TABLE makes no snapshot), as every statement here reads it.
fn current_rows(table: &Table) -> SqeResult<IcebergScanProvider> {
    let table = read_with_current_schema(table.clone()).map_err(from_iceberg)?;
    IcebergScanProvider::try_new(table, None).map_err(from_iceberg)
}

/// The (`$path`, `$pos`) of each changed row of `targets` (a MERGE's inserted rows, which have
/// none, left out).
fn row_ids_of(targets: &[RecordBatch]) -> SqeResult<Vec<(&str, i64)>> {
    let mut rows = Vec::new();
    for batch in targets {
        let (paths, positions) = row_ids(batch)?;
        rows.extend(
            (0..batch.num_rows())
                .filter(|i| paths.is_valid(*i))
                .map(|i| (paths.value(i), positions.value(i))),
        );
    }
    Ok(rows)
}

/// The positions (sorted) of the changed rows of `targets`, by data file.
fn rows_of(targets: &[RecordBatch]) -> SqeResult<HashMap<String, Vec<i64>>> {
    let mut rows: HashMap<String, Vec<i64>> = HashMap::new();
    for (path, pos) in row_ids_of(targets)? {
        match rows.get_mut(path) {
            Some(positions) => positions.push(pos),
            None => {
                rows.insert(path.to_string(), vec![pos]);
            }
        }
    }
    for positions in rows.values_mut() {
        positions.sort_unstable();
        positions.dedup();
    }
    Ok(rows)
}

/// The data files the changed rows of `targets` are in.
fn files_of(targets: &[RecordBatch]) -> SqeResult<HashSet<String>> {
    Ok(row_ids_of(targets)?
        .into_iter()
        .map(|(path, _)| path.to_string())
        .collect())
}

/// Deletion vector files a change writes at once.
const WRITES_AT_ONCE: usize = 16;

/// The field ids Iceberg reserves for a position delete file's columns.
const DELETE_FILE_PATH_ID: &str = "2147483546";
const DELETE_POS_ID: &str = "2147483545";

/// Writes position delete files naming the rows of `targets` (`$path`, `$pos`): one file per
/// partition of the data files they are in, its rows sorted by file and position, as Iceberg's
/// readers apply them (a position delete file applies to the data files of its own partition and
/// spec).
/// The delete files that name the rows of `targets` (merge-on-read), and the data files whose
/// deletion vector they replace: position delete files in format version 2, deletion vectors in 3.
async fn write_deletes(
    table: &Table,
    targets: &[RecordBatch],
    prefix: &str,
) -> SqeResult<(Vec<(i32, DataFile)>, HashSet<String>)> {
    match table.metadata().format_version() {
        FormatVersion::V3 => write_deletion_vectors(table, targets, prefix).await,
        _ => Ok((
            write_position_deletes(table, targets, prefix).await?,
            HashSet::new(),
        )),
    }
}

/// A deletion vector for each data file holding rows of `targets`, all in one Puffin file. A data
/// file's vector holds every position deleted in it (by its earlier vector and by position delete
/// files too), and replaces its earlier vector.
async fn write_deletion_vectors(
    table: &Table,
    targets: &[RecordBatch],
    prefix: &str,
) -> SqeResult<(Vec<(i32, DataFile)>, HashSet<String>)> {
    let live = change::live_files(table).await?;
    let place: HashMap<&str, (i32, &Struct)> = live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .map(|f| (f.path.as_str(), (f.spec_id, f.file.partition())))
        .collect();
    let mut by_file: HashMap<&str, Vec<i64>> = HashMap::new();
    for (path, pos) in row_ids_of(targets)? {
        by_file.entry(path).or_default().push(pos);
    }
    let partitions: HashSet<(i32, &Struct)> = by_file
        .keys()
        .filter_map(|path| place.get(path).copied())
        .collect();
    let mut replaced = HashSet::new();
    let mut read: HashSet<&str> = HashSet::new();
    for f in live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::PositionDeletes)
    {
        let applies = match &f.names_only {
            Some(data_file) => by_file.contains_key(data_file.as_str()),
            None => partitions.contains(&(f.spec_id, f.file.partition())),
        };
        if !applies || !read.insert(f.path.as_str()) {
            continue;
        }
        let earlier = read_position_deletes(table.file_io(), &f.path)
            .await
            .map_err(from_datafusion)?;
        for (data_file, positions) in earlier {
            if let Some(list) = by_file.get_mut(data_file.as_str()) {
                list.extend(positions);
                if change::is_vector(&f.file) {
                    replaced.insert(data_file);
                }
            }
        }
    }
    let mut vectors = Vec::with_capacity(by_file.len());
    for (path, positions) in by_file {
        let Some((spec_id, partition)) = place.get(path).copied() else {
            return Err(SqeError::internal(format!(
                "a changed row is in {path}, which the table's snapshot does not hold"
            )));
        };
        vectors.push(Vector {
            data_file: path.to_string(),
            spec_id,
            partition: partition.clone(),
            positions,
        });
    }
    vectors.sort_by(|a, b| a.data_file.cmp(&b.data_file));
    // One Puffin file a vector. The spec lets a file hold many, but DuckDB 1.5.5, replacing one
    // vector of such a file, drops the file's other vectors with it, and their rows come back.
    let location = table.metadata().location().trim_end_matches('/');
    let written: Vec<Vec<(i32, DataFile)>> = futures::stream::iter(vectors.into_iter().enumerate())
        .map(|(i, vector)| {
            let path = format!("{location}/data/{prefix}-{i:05}-deletes.puffin");
            async move { deletion_vectors::write(table.file_io(), &path, vec![vector]).await }
        })
        .buffer_unordered(WRITES_AT_ONCE)
        .try_collect()
        .await
        .map_err(from_iceberg)?;
    Ok((written.into_iter().flatten().collect(), replaced))
}

async fn write_position_deletes(
    table: &Table,
    targets: &[RecordBatch],
    prefix: &str,
) -> SqeResult<Vec<(i32, DataFile)>> {
    let mut rows = row_ids_of(targets)?;
    rows.sort_unstable();
    rows.dedup();
    let live = change::live_files(table).await?;
    let place: HashMap<&str, (i32, &Struct)> = live
        .iter()
        .map(|f| (f.path.as_str(), (f.spec_id, f.file.partition())))
        .collect();
    // (spec, partition, rows): rows stay sorted within each group. Rows come by file, so the
    // group is looked up once a file.
    type Group<'a> = (i32, &'a Struct, Vec<(&'a str, i64)>);
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<(i32, &Struct), usize> = HashMap::new();
    let mut current: Option<(&str, usize)> = None;
    for (path, pos) in rows {
        let group = match current {
            Some((p, g)) if p == path => g,
            _ => {
                let Some((spec_id, partition)) = place.get(path).copied() else {
                    return Err(SqeError::internal(format!(
                        "a changed row is in {path}, which the table's snapshot does not hold"
                    )));
                };
                let g = *index.entry((spec_id, partition)).or_insert_with(|| {
                    groups.push((spec_id, partition, Vec::new()));
                    groups.len() - 1
                });
                current = Some((path, g));
                g
            }
        };
        groups[group].2.push((path, pos));
    }
    let column = |name: &str, data_type: DataType, id: &str| {
        Field::new(name, data_type, false).with_metadata(HashMap::from([(
            PARQUET_FIELD_ID_META_KEY.to_string(),
            id.to_string(),
        )]))
    };
    let schema = Arc::new(ArrowSchema::new(vec![
        column("file_path", DataType::Utf8, DELETE_FILE_PATH_ID),
        column("pos", DataType::Int64, DELETE_POS_ID),
    ]));
    let location = table.metadata().location().trim_end_matches('/');
    let mut files = Vec::with_capacity(groups.len());
    for (n, (spec_id, partition, rows)) in groups.into_iter().enumerate() {
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            ],
        )
        .map_err(|e| SqeError::internal(e.to_string()))?;
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .build();
        let mut parquet = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut parquet, schema.clone(), Some(properties))
            .map_err(|e| SqeError::internal(e.to_string()))?;
        writer
            .write(&batch)
            .and_then(|_| writer.close().map(|_| ()))
            .map_err(|e| SqeError::internal(e.to_string()))?;
        let path = format!("{location}/data/{prefix}-deletes-{n}.parquet");
        let size = parquet.len() as u64;
        table
            .file_io()
            .new_output(&path)
            .map_err(from_iceberg)?
            .write(parquet.into())
            .await
            .map_err(from_iceberg)?;
        let first = rows[0].0;
        let single = rows.iter().all(|r| r.0 == first);
        let file = DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(path)
            .file_format(DataFileFormat::Parquet)
            .record_count(rows.len() as u64)
            .file_size_in_bytes(size)
            .partition(partition.clone())
            .partition_spec_id(spec_id)
            .referenced_data_file(single.then(|| first.to_string()))
            .build()
            .map_err(|e| SqeError::internal(e.to_string()))?;
        files.push((spec_id, file));
    }
    Ok(files)
}

/// An UPDATE's rows in the table's columns and types: the assigned columns take the new values of
/// `changed` (`q`); the others keep the old values of the files' rows (`r`).
fn new_values(
    table: &Table,
    changed: &DataFrame,
    assigned: &[(String, &Expr)],
    table_name: &str,
) -> SqeResult<Vec<DFExpr>> {
    let table_schema =
        schema_to_arrow_schema(table.metadata().current_schema()).map_err(from_iceberg)?;
    let values = changed.schema().clone();
    let mut exprs = Vec::with_capacity(table_schema.fields().len());
    for field in table_schema.fields() {
        let value = match assigned.iter().position(|(c, _)| c == field.name()) {
            Some(i) => {
                let (_, value) = values
                    .qualified_field_with_unqualified_name(&value_name(i))
                    .map_err(from_datafusion)?;
                assignable(field, value.data_type(), table_name)?;
                DFExpr::Column(Column::new(Some("q"), value_name(i)))
            }
            None => DFExpr::Column(Column::new(Some("r"), field.name())),
        };
        exprs.push(cast(value, field.data_type().clone()).alias(field.name()));
    }
    Ok(exprs)
}

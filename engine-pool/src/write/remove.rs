//! `TRUNCATE TABLE t` and `DELETE FROM t [WHERE …]`. Whole files go, as one snapshot that removes
//! them and rewrites none (no data file is read), when that is exactly the statement: without a
//! WHERE clause every data and delete file of the current snapshot goes; with one that only
//! compares identity partition columns with constants, the files whose partition values make it
//! true, since then it is true of every row they hold (and false or unknown of every row of the
//! others). Any other WHERE clause, and a caller who sees the table through a row filter or a
//! column mask, are row-level deletes (rows.rs).
//!
//! Both take the DELETE privilege on the table (as in Trino). TRUNCATE by a caller with a row
//! filter or a mask is refused (it would remove rows they cannot see). The row count is the rows
//! the removed files held, as the caller would have counted them. A commit that loses the race to
//! another writer is decided again against the new head, a few times, and then fails with a
//! conflict that says so.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{Field, Schema as ArrowSchema};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, Ident, ObjectName, UnaryOperator, VisitMut, VisitorMut,
};
use futures::TryStreamExt;
use iceberg::arrow::type_to_arrow_type;
use iceberg::spec::{Literal, Transform};
use iceberg::table::Table;
use sqe_sessions::{ErrorCode, QueryResult, SqeError, SqeResult, quote_identifier};

use crate::catalog::column_stats::scalar_of;
use crate::context::Ctx;
use crate::error::from_datafusion;
use crate::governance::model::{Object, Privilege};
use crate::governance::row_filters::is_governed_plan;
use crate::names::{normalize_ident, resolve_name};
use crate::planner::Planner;
use crate::statement::prepass::Prepared;
use crate::write::change::{self, Change, Committed, LiveFile, Retries, only_appends_since};
use crate::write::rows::{self, RowChange};
use crate::write::target::Target;

/// Removes the rows of table `name` for which `filter` is true, every row without one; `verb`
/// names the statement in errors.
pub(crate) async fn remove_rows(
    ctx: &Ctx<'_>,
    name: &ObjectName,
    verb: &str,
    filter: Option<&Expr>,
    prepared: &Prepared,
) -> SqeResult<QueryResult> {
    let session = ctx.session;
    let target = Target::of(ctx, name).await;
    let name = &target.name;
    let (catalog_name, schema, table_name) = resolve_name(session, name)?;
    let object = Object::table(&catalog_name, &schema, &table_name);
    ctx.governance
        .authorize(session, Privilege::Delete, &object, || {
            SqeError::not_found(format!("table '{object}' does not exist"))
        })?;
    let catalog = ctx.mounts.bind(session, &catalog_name)?;
    if let Some(reason) = catalog.read_only() {
        return Err(SqeError::unsupported(reason));
    }
    // The change as last decided, and the snapshot it was committed against.
    let mut decided: Option<(i64, Change, u64)> = None;
    let mut retries: Option<Retries> = None;
    let mut lost = 0;
    loop {
        let (_, ident, table) = target.load(ctx).await?;
        let retries = *retries.get_or_insert_with(|| Retries::of(&table));
        let Some(current) = table.metadata().current_snapshot() else {
            return QueryResult::written(0);
        };
        let head = current.snapshot_id();
        // Lost to writers that only appended: the same files go, and the rows they added stay
        // (as if this statement had run before them). Anything else is decided again.
        let (mut change, rows) = match decided.take() {
            Some((tried, change, rows)) if only_appends_since(&table, Some(tried)) => {
                (change, rows)
            }
            _ => {
                let files = change::live_files(&table).await?;
                let removed = match filter {
                    None => files.into_iter().map(|f| f.path).collect(),
                    Some(filter) => {
                        match matching_files(ctx, &table, &table_name, filter, files)? {
                            Some(files) => files,
                            // Not decided by whole files: row by row.
                            None => {
                                return rows::change_rows(
                                    ctx,
                                    &target,
                                    &object,
                                    RowChange::Delete,
                                    Some(filter),
                                    prepared,
                                )
                                .await;
                            }
                        }
                    }
                };
                // Counted as the caller: privileges, row filters and masks decide first.
                let rows = match visible_rows(ctx, &object, head, filter).await? {
                    Some(rows) => rows,
                    // A caller who sees only some rows deletes only those, row by row.
                    None if filter.is_some() || verb == "DELETE FROM" => {
                        return rows::change_rows(
                            ctx,
                            &target,
                            &object,
                            RowChange::Delete,
                            filter,
                            prepared,
                        )
                        .await;
                    }
                    None => {
                        return Err(SqeError::new(
                            ErrorCode::PermissionDenied,
                            format!(
                                "Access Denied: Cannot truncate table {object}: a row filter or a column mask applies to you on it; DELETE FROM removes the rows you see"
                            ),
                        ));
                    }
                };
                let change = Change {
                    removed,
                    ..Change::default()
                };
                (change, rows)
            }
        };
        if change.removed.is_empty() {
            return QueryResult::written(0);
        }
        change.branch = target.commit_branch(&table)?;
        match change::commit(catalog.as_ref(), &ident, &table, &change).await? {
            Committed::Done => return QueryResult::written(rows),
            Committed::Unknown(e) => return Err(e),
            Committed::Lost if lost < retries.retries => {
                decided = Some((head, change, rows));
                tokio::time::sleep(retries.wait(lost)).await;
                lost += 1;
            }
            Committed::Lost => {
                return Err(retries.overtaken(&format!("{verb} '{object}'"), lost));
            }
        }
    }
}

/// Whether a row filter or a column mask stands between the caller and `object`'s rows.
pub(crate) async fn governed_for_caller(ctx: &Ctx<'_>, object: &Object) -> SqeResult<bool> {
    let session = ctx.session;
    let sql = format!(
        "SELECT 1 FROM {}.{}.{}",
        quote_identifier(&object.catalog),
        quote_identifier(&object.schema),
        quote_identifier(object.table.as_deref().unwrap_or_default()),
    );
    let (mut statement, prepared) = crate::statement::parse_query(&sql)?;
    let tables = ctx
        .planner
        .resolve_relations(session, &mut statement, &prepared)
        .await?;
    let (_, plan) = ctx.planner.plan(session, statement, tables).await?;
    Ok(is_governed_plan(&plan))
}

/// The rows of `object`'s snapshot `snapshot_id` (those `filter` is true of, if given), counted as
/// the caller reads them; None when a row filter or a column mask stands between the caller and
/// the table's rows (whole files are then not theirs to remove).
async fn visible_rows(
    ctx: &Ctx<'_>,
    object: &Object,
    snapshot_id: i64,
    filter: Option<&Expr>,
) -> SqeResult<Option<u64>> {
    let session = ctx.session;
    let table = object.table.as_deref().unwrap_or_default();
    let mut sql = format!(
        "SELECT count(*) FROM {}.{}.{} FOR VERSION AS OF {snapshot_id}",
        quote_identifier(&object.catalog),
        quote_identifier(&object.schema),
        quote_identifier(table),
    );
    if let Some(filter) = filter {
        sql.push_str(&format!(" WHERE {filter}"));
    }
    let (mut statement, prepared) = crate::statement::parse_query(&sql)?;
    let tables = ctx
        .planner
        .resolve_relations(session, &mut statement, &prepared)
        .await?;
    let (state, plan) = ctx.planner.plan(session, statement, tables).await?;
    if is_governed_plan(&plan) {
        return Ok(None);
    }
    let batches: Vec<_> = Planner::stream(state, plan)
        .await?
        .batches
        .try_collect()
        .await?;
    let count = batches
        .first()
        .and_then(|b| b.column(0).as_any().downcast_ref::<Int64Array>())
        .filter(|a| !a.is_empty())
        .map_or(0, |a| a.value(0));
    Ok(Some(count.max(0) as u64))
}

/// The files among `files` whose partition values make `filter` true, when `filter` only compares
/// columns every file's partition spec has as identity partition fields with constants; None
/// otherwise (rows, not files, must then be chosen).
pub(crate) fn matching_files(
    ctx: &Ctx<'_>,
    table: &Table,
    table_name: &str,
    filter: &Expr,
    files: Vec<LiveFile>,
) -> SqeResult<Option<HashSet<String>>> {
    let metadata = table.metadata();
    let schema = metadata.current_schema();
    // The filter with `t.c` read as `c`, and the columns it reads.
    let mut filter = filter.clone();
    let mut columns = Columns {
        table: table_name.to_string(),
        names: Vec::new(),
        subquery: false,
        other: None,
    };
    let _ = filter.visit(&mut columns);
    if columns.subquery || columns.other.is_some() {
        return Ok(None);
    }
    let mut fields = Vec::new();
    for name in &columns.names {
        let Some(field) = schema.field_by_name(name) else {
            return Ok(None);
        };
        fields.push(field.clone());
    }
    // Each file's partition value of each column the filter reads.
    let mut values: Vec<Vec<ScalarValue>> = vec![Vec::with_capacity(files.len()); fields.len()];
    for file in &files {
        let spec = metadata
            .partition_spec_by_id(file.spec_id)
            .ok_or_else(|| SqeError::internal(format!("no partition spec {}", file.spec_id)))?;
        for (i, field) in fields.iter().enumerate() {
            let Some(position) = spec
                .fields()
                .iter()
                .position(|p| p.source_id == field.id && p.transform == Transform::Identity)
            else {
                return Ok(None);
            };
            let arrow_type =
                type_to_arrow_type(&field.field_type).map_err(crate::error::from_iceberg)?;
            let value = match file.file.partition().fields().get(position) {
                Some(Some(Literal::Primitive(v))) => field
                    .field_type
                    .as_primitive_type()
                    .and_then(|t| scalar_of(t, v))
                    .filter(|s| s.data_type() == arrow_type),
                Some(None) => ScalarValue::try_from(&arrow_type).ok(),
                _ => None,
            };
            let Some(value) = value else {
                return Ok(None);
            };
            values[i].push(value);
        }
    }
    if files.is_empty() {
        return Ok(Some(HashSet::new()));
    }
    let mut arrays: Vec<ArrayRef> = Vec::new();
    let mut schema_fields = Vec::new();
    for (field, column) in fields.iter().zip(values) {
        let array = ScalarValue::iter_to_array(column).map_err(from_datafusion)?;
        schema_fields.push(Field::new(&field.name, array.data_type().clone(), true));
        arrays.push(array);
    }
    let arrow_schema = Arc::new(ArrowSchema::new(schema_fields));
    let batch = match arrays.is_empty() {
        true => RecordBatch::try_new_with_options(
            arrow_schema.clone(),
            arrays,
            &datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(files.len())),
        ),
        false => RecordBatch::try_new(arrow_schema.clone(), arrays),
    }
    .map_err(|e| SqeError::internal(e.to_string()))?;
    let df_schema = DFSchema::try_from(arrow_schema.as_ref().clone()).map_err(from_datafusion)?;
    // A condition this evaluation cannot take is left to the row-by-row path, which plans it as
    // a query and says what is wrong with it.
    let state = ctx.planner.state();
    let Ok(verdicts) = state
        .create_logical_expr(&filter.to_string(), &df_schema)
        .and_then(|expr| state.create_physical_expr(expr, &df_schema))
        .and_then(|physical| physical.evaluate(&batch))
        .and_then(|v| v.into_array(batch.num_rows()))
    else {
        return Ok(None);
    };
    let Some(verdicts) = verdicts.as_any().downcast_ref::<BooleanArray>() else {
        return Ok(None);
    };
    Ok(Some(
        files
            .into_iter()
            .enumerate()
            .filter(|(i, _)| verdicts.is_valid(*i) && verdicts.value(*i))
            .map(|(_, f)| f.path)
            .collect(),
    ))
}

/// Collects the columns a filter reads, and reads `t.c` (its own table's name before the column)
/// as `c`.
struct Columns {
    table: String,
    names: Vec<String>,
    /// Whether the filter holds a subquery (and was not read further).
    subquery: bool,
    /// A part of the filter that is not a comparison of columns with constants.
    other: Option<String>,
}

impl VisitorMut for Columns {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let column = match expr {
            Expr::Identifier(id) => Some(id.clone()),
            Expr::CompoundIdentifier(parts)
                if parts.len() == 2 && normalize_ident(&parts[0]) == self.table =>
            {
                parts.pop()
            }
            _ => None,
        };
        if let Some(column) = column {
            let name = normalize_ident(&column);
            if !self.names.contains(&name) {
                self.names.push(name.clone());
            }
            *expr = Expr::Identifier(Ident::with_quote('"', name));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if matches!(
            expr,
            Expr::Subquery(_) | Expr::InSubquery { .. } | Expr::Exists { .. }
        ) {
            self.subquery = true;
            return ControlFlow::Break(());
        }
        // Files are chosen by evaluating the condition on their partition values outside the
        // query planner, which applies Trino's rules to casts and functions: only comparisons of
        // columns with constants, which both evaluate alike, choose files (and nothing volatile).
        let plain = match expr {
            Expr::Identifier(_)
            | Expr::CompoundIdentifier(_)
            | Expr::Value(_)
            | Expr::TypedString(_)
            | Expr::Nested(_)
            | Expr::IsNull(_)
            | Expr::IsNotNull(_)
            | Expr::IsTrue(_)
            | Expr::IsFalse(_)
            | Expr::IsNotTrue(_)
            | Expr::IsNotFalse(_)
            | Expr::IsUnknown(_)
            | Expr::IsNotUnknown(_)
            | Expr::IsDistinctFrom(..)
            | Expr::IsNotDistinctFrom(..)
            | Expr::InList { .. }
            | Expr::Between { .. } => true,
            Expr::UnaryOp { op, .. } => matches!(op, UnaryOperator::Not | UnaryOperator::Minus),
            Expr::BinaryOp { op, .. } => matches!(
                op,
                BinaryOperator::Eq
                    | BinaryOperator::NotEq
                    | BinaryOperator::Lt
                    | BinaryOperator::LtEq
                    | BinaryOperator::Gt
                    | BinaryOperator::GtEq
                    | BinaryOperator::And
                    | BinaryOperator::Or
            ),
            _ => false,
        };
        if !plain {
            self.other = Some(expr.to_string());
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

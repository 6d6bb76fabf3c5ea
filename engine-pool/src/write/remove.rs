//! `TRUNCATE TABLE t` and `DELETE FROM t` without a WHERE clause: every row goes, as one snapshot
//! that removes every data and delete file of the current one and rewrites none (no data file is
//! read). A `DELETE` with a WHERE clause is not SQE's yet.
//!
//! Both take the DELETE privilege on the table (as in Trino). A caller who reads the table through
//! a row filter or a column mask would remove rows they cannot see: refused. The row count is the
//! rows the removed snapshot held, as the caller would have counted them. A commit that loses the
//! race to another writer is decided again against the new head, a few times, and then fails
//! with a conflict that says so.

use datafusion::arrow::array::{Array, Int64Array};
use datafusion::sql::sqlparser::ast::ObjectName;
use futures::TryStreamExt;
use iceberg::spec::Operation;
use iceberg::table::Table;
use sqe_sessions::{ErrorCode, QueryResult, SqeError, SqeResult, quote_identifier};

use crate::context::Ctx;
use crate::governance::model::{Object, Privilege};
use crate::governance::row_filters::is_governed_plan;
use crate::names::resolve_name;
use crate::planner::Planner;
use crate::write::change::{self, Change, Committed, Retries};

/// Removes every row of table `name`; `verb` names the statement in errors.
pub(crate) async fn remove_all_rows(
    ctx: &Ctx<'_>,
    name: &ObjectName,
    verb: &str,
) -> SqeResult<QueryResult> {
    let session = ctx.session;
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
        let (_, ident, table) = ctx.mounts.table(session, name).await?;
        let retries = *retries.get_or_insert_with(|| Retries::of(&table));
        let Some(current) = table.metadata().current_snapshot() else {
            return QueryResult::written(0);
        };
        let head = current.snapshot_id();
        // Lost to writers that only appended: the same files go, and the rows they added stay
        // (as if this statement had run before them). Anything else is decided again.
        let (change, rows) = match decided.take() {
            Some((tried, change, rows)) if only_appends_since(&table, tried) => (change, rows),
            _ => {
                let rows = visible_rows(ctx, &object, head).await?;
                let change = Change {
                    removed: change::live_files(&table).await?,
                    added: Vec::new(),
                };
                (change, rows)
            }
        };
        if change.removed.is_empty() {
            return QueryResult::written(0);
        }
        match change::commit(catalog.as_ref(), &ident, &table, &change).await? {
            Committed::Done => return QueryResult::written(rows),
            Committed::Lost if lost < retries.retries => {
                decided = Some((head, change, rows));
                tokio::time::sleep(retries.wait(lost)).await;
                lost += 1;
            }
            Committed::Lost => {
                return Err(SqeError::new(
                    ErrorCode::Conflict,
                    format!(
                        "{verb} '{object}' was overtaken by other writers {} times in a row (the table's commit.retry.num-retries is {}); run it again",
                        lost + 1,
                        retries.retries
                    ),
                ));
            }
        }
    }
}

/// Whether every snapshot of `table` after `snapshot_id`, up to its current one, only appended.
fn only_appends_since(table: &Table, snapshot_id: i64) -> bool {
    let metadata = table.metadata();
    let mut at = metadata.current_snapshot();
    while let Some(snapshot) = at {
        if snapshot.snapshot_id() == snapshot_id {
            return true;
        }
        if snapshot.summary().operation != Operation::Append {
            return false;
        }
        at = snapshot
            .parent_snapshot_id()
            .and_then(|id| metadata.snapshot_by_id(id));
    }
    false
}

/// The rows of `object`'s snapshot `snapshot_id`, counted as the caller reads them; refused when
/// a row filter or a column mask stands between the caller and the table's rows.
async fn visible_rows(ctx: &Ctx<'_>, object: &Object, snapshot_id: i64) -> SqeResult<u64> {
    let session = ctx.session;
    let table = object.table.as_deref().unwrap_or_default();
    let sql = format!(
        "SELECT count(*) FROM {}.{}.{} FOR VERSION AS OF {snapshot_id}",
        quote_identifier(&object.catalog),
        quote_identifier(&object.schema),
        quote_identifier(table),
    );
    let (mut statement, prepared) = crate::statement::parse_query(&sql)?;
    let tables = ctx
        .planner
        .resolve_relations(session, &mut statement, &prepared)
        .await?;
    let (state, plan) = ctx.planner.plan(session, statement, tables).await?;
    if is_governed_plan(&plan) {
        return Err(SqeError::new(
            ErrorCode::PermissionDenied,
            format!(
                "Access Denied: Cannot delete from table {object}: a row filter or a column mask applies to you on it, and removing rows you do not see is not allowed"
            ),
        ));
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
    Ok(count.max(0) as u64)
}

//! What a write names: a table, or one of its branches, as Spark names them (`t.branch_b` for
//! branch `b` of table `t`). INSERT, INSERT OVERWRITE, DELETE, UPDATE, MERGE and TRUNCATE read and
//! decide against the branch's head, and commit on the branch, leaving main as it is; a tag takes
//! no writes.

use datafusion::sql::sqlparser::ast::ObjectName;
use iceberg::TableIdent;
use iceberg::spec::{MAIN_BRANCH, SnapshotReference, SnapshotRetention, TableMetadataBuilder};
use iceberg::table::Table;
use sqe_sessions::{SqeError, SqeResult};

use crate::catalog::provider::with_metadata;
use crate::context::Ctx;
use crate::error::from_iceberg;
use crate::names::normalize_ident;
use crate::write::change::refs;

/// What a write names: a table, or one of its branches.
pub(crate) struct Target {
    /// The table's name.
    pub name: ObjectName,
    /// The branch written; main if None.
    pub branch: Option<String>,
}

impl Target {
    /// What `name` stands for: branch `b` of table `t` when it is `t.branch_b` (Spark's words)
    /// and names no table itself; table `name` otherwise.
    pub(crate) async fn of(ctx: &Ctx<'_>, name: &ObjectName) -> Target {
        let table = Target {
            name: name.clone(),
            branch: None,
        };
        let Some((last, prefix)) = name.0.split_last() else {
            return table;
        };
        let Some(branch) = last
            .as_ident()
            .map(normalize_ident)
            .and_then(|last| Some(last.strip_prefix("branch_")?.to_string()))
            .filter(|b| !b.is_empty())
        else {
            return table;
        };
        if prefix.is_empty() || ctx.mounts.table(ctx.session, name).await.is_ok() {
            return table;
        }
        let prefix = ObjectName(prefix.to_vec());
        match ctx.mounts.table(ctx.session, &prefix).await {
            Ok(_) => Target {
                name: prefix,
                branch: Some(branch),
            },
            Err(_) => table,
        }
    }

    /// The table as it is now (its catalog, identifier and table), seen from the branch: its
    /// current snapshot is the branch's head, so that what a write reads and decides is the
    /// branch's. Never committed as it is: [`Target::commit_branch`] says where a change goes.
    pub(crate) async fn load(&self, ctx: &Ctx<'_>) -> SqeResult<(String, TableIdent, Table)> {
        let (catalog, ident, table) = ctx.mounts.table(ctx.session, &self.name).await?;
        let Some(branch) = &self.branch else {
            return Ok((catalog, ident, table));
        };
        let head = self.retention(&table)?.0;
        let metadata = TableMetadataBuilder::new_from_metadata(table.metadata().clone(), None)
            .set_ref(
                MAIN_BRANCH,
                SnapshotReference::new(head, SnapshotRetention::branch(None, None, None)),
            )
            .and_then(|b| b.build())
            .map_err(from_iceberg)?
            .metadata;
        let seen = with_metadata(&table, metadata).map_err(|e| {
            SqeError::internal(format!("reading branch '{branch}' of '{ident}': {e}"))
        })?;
        Ok((catalog, ident, seen))
    }

    /// The branch a change to `table` (as [`Target::load`] gave it) commits to, with the retention
    /// the branch keeps; None for main.
    pub(crate) fn commit_branch(
        &self,
        table: &Table,
    ) -> SqeResult<Option<(String, SnapshotRetention)>> {
        match &self.branch {
            None => Ok(None),
            Some(branch) => Ok(Some((branch.clone(), self.retention(table)?.1))),
        }
    }

    /// The head and retention of the target's branch in `table`; a tag, or no such branch, is an
    /// error.
    fn retention(&self, table: &Table) -> SqeResult<(i64, SnapshotRetention)> {
        let branch = self.branch.as_deref().unwrap_or(MAIN_BRANCH);
        match refs(table.metadata())?
            .into_iter()
            .find(|(n, _)| n == branch)
        {
            Some((_, r)) if r.is_branch() => Ok((r.snapshot_id, r.retention)),
            Some(_) => Err(SqeError::invalid(format!(
                "'{branch}' is a tag, and a tag takes no writes"
            ))),
            None => Err(SqeError::not_found(format!(
                "table '{}' has no branch '{branch}'",
                table.identifier()
            ))),
        }
    }
}

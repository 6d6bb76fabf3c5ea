//! Branches and tags (statement/refs.rs parses them): a ref is set or removed in one commit, on
//! the condition that it still points where it did when the statement looked (so two statements on
//! one ref cannot both win), retried against the new metadata like any write. Each needs the
//! ALTER privilege on the table. The main branch is never dropped, and no tag is named main.
//!
//! Writes name a branch as Spark does, `t.branch_b` for branch `b` of table `t` ([`Target`]):
//! INSERT, INSERT OVERWRITE, DELETE, UPDATE and MERGE read and decide against the branch's head,
//! and commit on the branch, leaving main as it is.

use datafusion::sql::sqlparser::ast::ObjectName;
use iceberg::TableIdent;
use iceberg::spec::{MAIN_BRANCH, SnapshotReference, SnapshotRetention, TableMetadataBuilder};
use iceberg::table::Table;
use iceberg::{ErrorKind, TableRequirement, TableUpdate};
use sqe_sessions::{QueryResult, SqeError, SqeResult};

use crate::catalog::provider::with_metadata;
use crate::context::Ctx;
use crate::error::from_iceberg;
use crate::names::normalize_ident;
use crate::statement::refs::{RefAction, RefKind, RefStatement};
use crate::write::change::{Retries, surely_not_committed};
use crate::write::maintain::{altered_table, refs};

pub(crate) async fn run(ctx: &Ctx<'_>, statement: RefStatement) -> SqeResult<QueryResult> {
    let (object, catalog) = altered_table(ctx, &statement.table)?;
    let RefStatement { kind, name, .. } = &statement;
    let what = kind.word();
    if *kind == RefKind::Tag && name == MAIN_BRANCH {
        return Err(SqeError::invalid(
            "main is the table's main branch, not a tag",
        ));
    }
    let mut lost = 0;
    loop {
        let (_, ident, table) = ctx.mounts.table(ctx.session, &statement.table).await?;
        let retries = Retries::of(&table);
        let metadata = table.metadata();
        let existing = refs(metadata)?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, r)| r);
        if let Some(r) = &existing {
            let is_branch = r.is_branch();
            if is_branch != (*kind == RefKind::Branch) {
                let other = if is_branch { "branch" } else { "tag" };
                return Err(SqeError::invalid(format!(
                    "'{name}' is a {other} of table '{object}', not a {what}"
                )));
            }
        }
        let update = match &statement.action {
            RefAction::Drop { if_exists } => {
                if name == MAIN_BRANCH {
                    return Err(SqeError::invalid(
                        "the main branch of a table cannot be dropped",
                    ));
                }
                match &existing {
                    None if *if_exists => return Ok(QueryResult::empty()),
                    None => {
                        return Err(SqeError::not_found(format!(
                            "table '{object}' has no {what} '{name}'"
                        )));
                    }
                    Some(_) => TableUpdate::RemoveSnapshotRef {
                        ref_name: name.clone(),
                    },
                }
            }
            RefAction::Set {
                create,
                replace,
                if_not_exists,
                snapshot_id,
                max_ref_age_ms,
                min_snapshots_to_keep,
                max_snapshot_age_ms,
            } => {
                match (&existing, create, replace) {
                    (Some(_), true, false) if *if_not_exists => return Ok(QueryResult::empty()),
                    (Some(_), true, false) => {
                        return Err(SqeError::already_exists(format!(
                            "table '{object}' already has a {what} '{name}'"
                        )));
                    }
                    (None, false, _) => {
                        return Err(SqeError::not_found(format!(
                            "table '{object}' has no {what} '{name}' to replace"
                        )));
                    }
                    _ => {}
                }
                let snapshot = match snapshot_id {
                    Some(id) => *id,
                    None => metadata.current_snapshot_id().ok_or_else(|| {
                        SqeError::invalid(format!(
                            "table '{object}' has no snapshot yet for a {what} to point at"
                        ))
                    })?,
                };
                if metadata.snapshot_by_id(snapshot).is_none() {
                    return Err(SqeError::not_found(format!(
                        "table '{object}' has no snapshot {snapshot}"
                    )));
                }
                let retention = match kind {
                    RefKind::Branch => SnapshotRetention::branch(
                        *min_snapshots_to_keep,
                        *max_snapshot_age_ms,
                        *max_ref_age_ms,
                    ),
                    RefKind::Tag => SnapshotRetention::Tag {
                        max_ref_age_ms: *max_ref_age_ms,
                    },
                };
                TableUpdate::SetSnapshotRef {
                    ref_name: name.clone(),
                    reference: SnapshotReference::new(snapshot, retention),
                }
            }
        };
        let requirements = vec![
            TableRequirement::UuidMatch {
                uuid: metadata.uuid(),
            },
            TableRequirement::RefSnapshotIdMatch {
                r#ref: name.clone(),
                snapshot_id: existing.as_ref().map(|r| r.snapshot_id),
            },
        ];
        match catalog
            .commit_updates(&ident, requirements, vec![update])
            .await
        {
            Ok(_) => return Ok(QueryResult::empty()),
            Err(e)
                if surely_not_committed(&e)
                    && e.kind() == ErrorKind::CatalogCommitConflicts
                    && lost < retries.retries =>
            {
                tokio::time::sleep(retries.wait(lost)).await;
                lost += 1;
            }
            Err(e) if e.kind() == ErrorKind::CatalogCommitConflicts => {
                return Err(
                    retries.overtaken(&format!("ALTER TABLE '{object}' … {what} {name}"), lost)
                );
            }
            Err(e) => return Err(from_iceberg(e)),
        }
    }
}

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

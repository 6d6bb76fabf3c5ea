//! Branches and tags (statement/refs.rs parses them): a ref is set or removed in one commit, on
//! the condition that it still points where it did when the statement looked (so two statements on
//! one ref cannot both win), retried against the new metadata like any write. Each needs the
//! ALTER privilege on the table. The main branch is never dropped, and no tag is named main.
//! Writes to a branch: target.rs.

use iceberg::spec::{MAIN_BRANCH, SnapshotReference, SnapshotRetention};
use iceberg::{ErrorKind, TableRequirement, TableUpdate};
use sqe_sessions::{QueryResult, SqeError, SqeResult};

use crate::context::Ctx;
use crate::error::from_iceberg;
use crate::statement::refs::{RefAction, RefKind, RefStatement};
use crate::write::change::{Retries, refs, surely_not_committed};
use crate::write::maintain::altered_table;

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

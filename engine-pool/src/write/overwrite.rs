//! `INSERT OVERWRITE [TABLE] t SELECT …` (Spark's dynamic partition overwrite), and a Trino
//! client's INSERT under the session property `insert_existing_partitions_behavior = 'OVERWRITE'`:
//! the new rows replace every row of the partitions they go to, and the other partitions stay, in
//! one snapshot. An unpartitioned table is one partition: all its rows are replaced. Under
//! `'ERROR'`, an INSERT into a partition that holds rows fails instead.
//!
//! On a branch (`INSERT OVERWRITE t.branch_b …`) the partitions are the branch's, and main stays.
//!
//! Files of an older partition spec are not in the current spec's partitions and stay, as in
//! Iceberg's own partition replacement. A commit that loses the race is decided again against the
//! new head (the new files stay written) as often as the table's `commit.retry.num-retries` says.

use std::collections::HashSet;

use datafusion::execution::context::SessionState;
use datafusion::logical_expr::LogicalPlan;
use iceberg::spec::Struct;
use sqe_sessions::{ErrorCode, SqeError, SqeResult};

use crate::context::Ctx;
use crate::governance::model::Object;
use crate::session_properties::Existing;
use crate::write::change::{self, Change, Committed, Retries};
use crate::write::files::{remove_written, write_files};
use crate::write::target::Target;

/// Writes the rows of `plan` (in the table's columns and types) into `target` (`object`),
/// replacing the partitions they go to (or failing, under [`Existing::Error`], when any holds
/// rows). Returns the row count.
pub(crate) async fn overwrite(
    ctx: &Ctx<'_>,
    target: &Target,
    object: &Object,
    state: &SessionState,
    plan: LogicalPlan,
    existing: Existing,
) -> SqeResult<u64> {
    let session = ctx.session;
    let catalog = ctx.mounts.bind(session, &object.catalog)?;
    if let Some(reason) = catalog.read_only() {
        return Err(SqeError::unsupported(reason));
    }
    let (_, _, table) = target.load(ctx).await?;
    let prefix = uuid::Uuid::now_v7().to_string();
    let (added, rows) = match write_files(&table, state, plan, &prefix).await {
        Ok(written) => written,
        Err(e) => {
            remove_written(&table, &prefix).await;
            return Err(e);
        }
    };
    if added.is_empty() {
        return Ok(0);
    }
    let partitions: Vec<Struct> = added.iter().map(|f| f.partition().clone()).collect();
    let retries = Retries::of(&table);
    let mut lost = 0;
    loop {
        let (_, ident, table) = target.load(ctx).await?;
        let metadata = table.metadata();
        let spec_id = metadata.default_partition_spec_id();
        let unpartitioned = metadata.default_partition_spec().is_unpartitioned();
        let removed: HashSet<String> = change::live_files(&table)
            .await?
            .into_iter()
            .filter(|f| {
                unpartitioned || (f.spec_id == spec_id && partitions.contains(f.file.partition()))
            })
            .map(|f| f.path)
            .collect();
        if existing == Existing::Error && !removed.is_empty() {
            remove_written(&table, &prefix).await;
            return Err(SqeError::new(
                ErrorCode::AlreadyExists,
                format!(
                    "INSERT into '{object}' would write into partitions that already hold rows, and the session's insert_existing_partitions_behavior is ERROR"
                ),
            ));
        }
        let change = Change {
            removed,
            added: added.clone(),
            branch: target.commit_branch(&table)?,
            ..Change::default()
        };
        match change::commit(catalog.as_ref(), &ident, &table, &change).await {
            Ok(Committed::Done) => return Ok(rows),
            Ok(Committed::Lost) if lost < retries.retries => {
                tokio::time::sleep(retries.wait(lost)).await;
                lost += 1;
            }
            Ok(Committed::Lost) => {
                remove_written(&table, &prefix).await;
                return Err(retries.overtaken(&format!("INSERT OVERWRITE '{object}'"), lost));
            }
            Ok(Committed::Unknown(e)) => return Err(e),
            Err(e) => {
                remove_written(&table, &prefix).await;
                return Err(e);
            }
        }
    }
}

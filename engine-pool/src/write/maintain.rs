//! Table maintenance, as Trino's `ALTER TABLE t EXECUTE …` and Spark's `CALL system.…` run it:
//! - `optimize [(file_size_threshold => '100MB')] [WHERE partition condition]` (Spark:
//!   `rewrite_data_files`): the data files under the threshold, every data file some position
//!   delete file names, and every file of an earlier partition spec, are read (deletes applied)
//!   and written again together under the current spec, as one `replace` snapshot that also drops
//!   the delete files left naming nothing; the rows are the same;
//! - `expire_snapshots(retention_threshold => '7d')` (Spark: also `older_than`, `retain_last`):
//!   removes the snapshots older than the threshold that no branch or tag needs (the head of
//!   each, and the latest `history.expire.min-snapshots-to-keep` of each branch, 1 by default;
//!   iceberg's own action decides, as Iceberg's Java library does), then deletes the manifest
//!   lists, manifests, data and delete files only they referenced;
//! - `remove_orphan_files(retention_threshold => '7d')`: deletes the files in the table's folder
//!   (on local disk or in S3) that no snapshot, metadata file or statistics file refers to and
//!   that are older than the threshold (files of writes that failed or were killed);
//! - `rollback_to_snapshot(id)`: the main branch points at an ancestor of its current snapshot;
//! - `drop_extended_stats`: the table's statistics files go from its metadata (SQE writes none;
//!   Trino's ANALYZE, Spark and others do).
//!
//! Each needs the ALTER privilege on the table (its owner has it). A retention shorter than the
//! server's minimum (`[engine] maintenance_min_retention`, 7 days unless set) is refused, so that
//! nobody removes the files of a commit in flight. Nothing outside the table's own location is
//! ever deleted, whatever its metadata names. A commit that loses the race to another writer is
//! decided again against the new head, up to the table's `commit.retry.num-retries` times.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::{Expr, UnaryOperator, Value};
use iceberg::spec::{
    DataContentType, MAIN_BRANCH, SnapshotRef, SnapshotReference, SnapshotRetention, Struct,
};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, TableIdent, TableRequirement, TableUpdate};
use sqe_sessions::{QueryResult, SqeError, SqeResult};

use crate::catalog::backend::{CatalogRef, SqeCatalog};
use crate::catalog::row_ids::read_position_deletes;
use crate::catalog::storage;
use crate::context::Ctx;
use crate::error::{from_datafusion, from_iceberg};
use crate::governance::model::{Object, Privilege};
use crate::names::resolve_name;
use crate::statement::procedures::ProcedureCall;
use crate::write::change::{
    self, Change, Committed, LiveFile, Retries, refs, surely_not_committed,
};
use crate::write::files::{cast_to_table, remove_written, write_files};
use crate::write::remove::matching_files;
use crate::write::rows::unchanged;

/// The minimum retention when the server sets none, as Trino's.
pub const DEFAULT_MIN_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Runs one procedure call.
pub(crate) async fn run(ctx: &Ctx<'_>, call: ProcedureCall) -> SqeResult<QueryResult> {
    let (object, catalog) = altered_table(ctx, &call.table)?;
    let mut args = Args::new(&call.name, call.args)?;
    if call.filter.is_some() && call.name != "optimize" {
        return Err(SqeError::invalid(format!(
            "{} takes no WHERE clause (only optimize does)",
            call.name
        )));
    }
    let job = Job {
        ctx,
        catalog: catalog.as_ref(),
        call_table: &call.table,
        object: &object,
    };
    let metrics = match call.name.as_str() {
        "optimize" => {
            let threshold = match args.take("file_size_threshold")? {
                Some(e) => data_size(&text(&e, "file_size_threshold")?)?,
                None => 100 << 20,
            };
            args.done()?;
            job.optimize(threshold, call.filter.as_ref()).await?
        }
        "optimize_manifests" => {
            args.done()?;
            job.optimize_manifests().await?
        }
        "expire_snapshots" => {
            // By position, Spark's older_than comes first; a duration there is Trino's retention.
            let mut retention = args.take_named("retention_threshold");
            let mut older_than = args.take("older_than")?;
            if retention.is_none()
                && let Some(e) = older_than
                    .take_if(|e| text(e, "older_than").is_ok_and(|t| duration(&t).is_ok()))
            {
                retention = Some(e);
            }
            let retain_last = match args.take("retain_last")? {
                Some(e) => Some(count(&e, "retain_last")?),
                None => None,
            };
            args.done()?;
            let cutoff = match (retention, older_than) {
                (Some(_), Some(_)) => {
                    return Err(SqeError::invalid(
                        "give either retention_threshold or older_than, not both",
                    ));
                }
                (Some(e), None) => {
                    let retention = duration(&text(&e, "retention_threshold")?)?;
                    check_retention(retention, ctx.min_retention)?;
                    now_ms().saturating_sub(millis(retention))
                }
                (None, Some(e)) => {
                    let at = timestamp_ms(&text(&e, "older_than")?)?;
                    let retention = now_ms().saturating_sub(at).max(0) as u64;
                    check_retention(Duration::from_millis(retention), ctx.min_retention)?;
                    at
                }
                (None, None) => now_ms().saturating_sub(millis(ctx.min_retention)),
            };
            job.expire_snapshots(cutoff, retain_last).await?
        }
        "remove_orphan_files" => {
            let retention = match args.take("retention_threshold")? {
                Some(e) => duration(&text(&e, "retention_threshold")?)?,
                None => ctx.min_retention,
            };
            args.done()?;
            check_retention(retention, ctx.min_retention)?;
            job.remove_orphan_files(retention).await?
        }
        "rollback_to_snapshot" => {
            let Some(id) = args.take("snapshot_id")? else {
                return Err(SqeError::invalid(
                    "rollback_to_snapshot needs the snapshot: rollback_to_snapshot(snapshot_id)",
                ));
            };
            let id = integer(&id, "snapshot_id")?;
            args.done()?;
            job.rollback(id).await?;
            return Ok(QueryResult::empty());
        }
        "drop_extended_stats" => {
            args.done()?;
            job.drop_extended_stats().await?;
            return Ok(QueryResult::empty());
        }
        other => {
            return Err(SqeError::unsupported(format!(
                "unknown table procedure '{other}': SQE runs optimize, optimize_manifests, expire_snapshots, remove_orphan_files, rollback_to_snapshot and drop_extended_stats"
            )));
        }
    };
    metric_rows(&metrics)
}

/// The table `name` names, once the caller may ALTER it, and its writable catalog.
pub(crate) fn altered_table(
    ctx: &Ctx<'_>,
    name: &datafusion::sql::sqlparser::ast::ObjectName,
) -> SqeResult<(Object, CatalogRef)> {
    let (catalog_name, schema, table_name) = resolve_name(ctx.session, name)?;
    let object = Object::table(&catalog_name, &schema, &table_name);
    ctx.governance
        .authorize(ctx.session, Privilege::Alter, &object, || {
            SqeError::not_found(format!("table '{object}' does not exist"))
        })?;
    let catalog = ctx.mounts.bind(ctx.session, &catalog_name)?;
    if let Some(reason) = catalog.read_only() {
        return Err(SqeError::unsupported(reason));
    }
    Ok((object, catalog))
}

/// A procedure's answer as Trino gives it: a `metric_name`, `metric_value` row for each figure.
fn metric_rows(metrics: &[(&str, u64)]) -> SqeResult<QueryResult> {
    let names: Vec<&str> = metrics.iter().map(|m| m.0).collect();
    let values: Vec<i64> = metrics
        .iter()
        .map(|m| i64::try_from(m.1).unwrap_or(i64::MAX))
        .collect();
    QueryResult::rows(
        Schema::new(vec![
            Field::new("metric_name", DataType::Utf8, false),
            Field::new("metric_value", DataType::Int64, false),
        ]),
        vec![
            Arc::new(StringArray::from(names)) as ArrayRef,
            Arc::new(Int64Array::from(values)) as ArrayRef,
        ],
    )
}

/// The arguments of one call, taken by name (or by position, in the procedure's order).
struct Args {
    procedure: String,
    named: Vec<(String, Expr)>,
    positional: std::collections::VecDeque<Expr>,
}

impl Args {
    fn new(procedure: &str, args: Vec<(Option<String>, Expr)>) -> SqeResult<Self> {
        let mut named: Vec<(String, Expr)> = Vec::new();
        let mut positional = std::collections::VecDeque::new();
        for (name, value) in args {
            match name {
                Some(name) if named.iter().any(|(n, _)| *n == name) => {
                    return Err(SqeError::invalid(format!(
                        "argument {name} of {procedure} is given twice"
                    )));
                }
                Some(name) => named.push((name, value)),
                None if !named.is_empty() => {
                    return Err(SqeError::invalid(format!(
                        "arguments of {procedure} by position come before those by name"
                    )));
                }
                None => positional.push_back(value),
            }
        }
        Ok(Self {
            procedure: procedure.to_string(),
            named,
            positional,
        })
    }

    /// The argument `name`: by name, else the next by position.
    fn take(&mut self, name: &str) -> SqeResult<Option<Expr>> {
        if let Some(at) = self.named.iter().position(|(n, _)| n == name) {
            return Ok(Some(self.named.remove(at).1));
        }
        Ok(self.positional.pop_front())
    }

    /// The argument `name`, if given by name.
    fn take_named(&mut self, name: &str) -> Option<Expr> {
        let at = self.named.iter().position(|(n, _)| n == name)?;
        Some(self.named.remove(at).1)
    }

    /// An error naming what is left over.
    fn done(self) -> SqeResult<()> {
        if let Some((name, _)) = self.named.first() {
            return Err(SqeError::invalid(format!(
                "{} has no argument named {name}",
                self.procedure
            )));
        }
        if !self.positional.is_empty() {
            return Err(SqeError::invalid(format!(
                "{} was given too many arguments",
                self.procedure
            )));
        }
        Ok(())
    }
}

fn text(e: &Expr, name: &str) -> SqeResult<String> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) => return Ok(s.clone()),
            Value::Number(n, _) => return Ok(n.clone()),
            _ => {}
        },
        // `TIMESTAMP '…'` for Spark's older_than.
        Expr::TypedString(t) => {
            if let Value::SingleQuotedString(s) = &t.value.value {
                return Ok(s.clone());
            }
        }
        _ => {}
    }
    Err(SqeError::invalid(format!(
        "argument {name} is a string constant, not {e}"
    )))
}

fn integer(e: &Expr, name: &str) -> SqeResult<i64> {
    let (negative, e) = match e {
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => (true, expr.as_ref()),
        e => (false, e),
    };
    let value = match e {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n.parse::<i64>().ok(),
            _ => None,
        },
        _ => None,
    };
    value
        .map(|v| if negative { -v } else { v })
        .ok_or_else(|| SqeError::invalid(format!("argument {name} is an integer, not {e}")))
}

fn count(e: &Expr, name: &str) -> SqeResult<usize> {
    match usize::try_from(integer(e, name)?) {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(SqeError::invalid(format!("argument {name} is at least 1"))),
    }
}

/// A duration as Trino writes one (the session properties' parser), with the units in the error.
pub fn duration(text: &str) -> SqeResult<Duration> {
    crate::session_properties::parse_duration(text).map_err(|_| {
        SqeError::invalid(format!(
            "'{text}' is not a duration: a number and a unit (ns, us, ms, s, m, h, d), such as '7d'"
        ))
    })
}

/// A size as Trino writes one: a number and a unit (`B`, `kB`, `MB`, `GB`, `TB`, each 1024 of the
/// one before).
pub(crate) fn data_size(text: &str) -> SqeResult<u64> {
    let bad = || {
        SqeError::invalid(format!(
            "'{text}' is not a data size: a number and a unit (B, kB, MB, GB, TB), such as '128MB'"
        ))
    };
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(bad)?;
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let scale = match unit.trim() {
        "B" => 1.0,
        "kB" => 1024.0,
        "MB" => 1024.0 * 1024.0,
        "GB" => 1024.0 * 1024.0 * 1024.0,
        "TB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    let bytes = number * scale;
    if !(bytes.is_finite() && bytes < u64::MAX as f64) {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// A duration in Trino's words: days, hours, … with two decimals.
fn spelled(d: Duration) -> String {
    let s = d.as_secs_f64();
    let (value, unit) = if s >= 86400.0 {
        (s / 86400.0, "d")
    } else if s >= 3600.0 {
        (s / 3600.0, "h")
    } else if s >= 60.0 {
        (s / 60.0, "m")
    } else {
        (s, "s")
    };
    format!("{value:.2}{unit}")
}

fn check_retention(retention: Duration, minimum: Duration) -> SqeResult<()> {
    if retention < minimum {
        return Err(SqeError::invalid(format!(
            "retention {} is shorter than the minimum retention the server allows ({}; [engine] maintenance_min_retention)",
            spelled(retention),
            spelled(minimum)
        )));
    }
    Ok(())
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// `YYYY-MM-DD[ HH:MM:SS[.fff]]`, in UTC.
fn timestamp_ms(text: &str) -> SqeResult<i64> {
    let t = text.trim();
    let parsed = chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S%.f")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f"))
        .or_else(|_| {
            chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d")
                .map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default())
        })
        .map_err(|_| {
            SqeError::invalid(format!(
                "'{text}' is not a timestamp: YYYY-MM-DD HH:MM:SS (UTC)"
            ))
        })?;
    Ok(parsed.and_utc().timestamp_millis())
}

/// Whether `path` lies inside the table's folder `location`: the only files maintenance deletes.
fn inside(location: &str, path: &str) -> bool {
    let strip = |p: &str| p.strip_prefix("file://").unwrap_or(p).to_string();
    let (root, path) = (strip(location.trim_end_matches('/')), strip(path));
    path.strip_prefix(&root)
        .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1)
        && !path.split('/').any(|part| part == ".." || part == ".")
}

/// One procedure on one table.
struct Job<'a> {
    ctx: &'a Ctx<'a>,
    catalog: &'a dyn SqeCatalog,
    call_table: &'a datafusion::sql::sqlparser::ast::ObjectName,
    object: &'a Object,
}

/// Every file snapshots refer to: their manifest lists, their manifests, and the data and delete
/// files their entries name (by content): the live entries only, or the deleted ones too.
#[derive(Default)]
struct Referenced {
    lists: HashSet<String>,
    manifests: HashSet<String>,
    files: HashMap<String, DataContentType>,
}

impl Referenced {
    async fn add(&mut self, table: &Table, snapshot: &SnapshotRef, deleted: bool) -> SqeResult<()> {
        self.lists.insert(snapshot.manifest_list().to_string());
        let list = table
            .manifest_list_reader(snapshot)
            .load()
            .await
            .map_err(from_iceberg)?;
        for listed in list.entries() {
            if !self.manifests.insert(listed.manifest_path.clone()) {
                continue;
            }
            let manifest = listed
                .load_manifest(table.file_io())
                .await
                .map_err(from_iceberg)?;
            for entry in manifest
                .entries()
                .iter()
                .filter(|e| deleted || e.is_alive())
            {
                self.files
                    .insert(entry.file_path().to_string(), entry.content_type());
            }
        }
        Ok(())
    }
}

impl Job<'_> {
    async fn load(&self) -> SqeResult<(TableIdent, Table)> {
        let (_, ident, table) = self
            .ctx
            .mounts
            .table(self.ctx.session, self.call_table)
            .await?;
        Ok((ident, table))
    }

    /// Commits the updates `decide` gives for the table as it is (None: nothing to do) against its
    /// main branch's head. When another writer moves the head first, it decides again, up to the
    /// table's `commit.retry.num-retries` times; `what` names the procedure in the error after.
    async fn commit_decided(
        &self,
        what: &str,
        decide: impl Fn(&Table) -> SqeResult<Option<Vec<TableUpdate>>>,
    ) -> SqeResult<()> {
        let mut lost = 0;
        loop {
            let (ident, table) = self.load().await?;
            let retries = Retries::of(&table);
            let Some(updates) = decide(&table)? else {
                return Ok(());
            };
            let requirements = vec![
                TableRequirement::UuidMatch {
                    uuid: table.metadata().uuid(),
                },
                TableRequirement::RefSnapshotIdMatch {
                    r#ref: MAIN_BRANCH.to_string(),
                    snapshot_id: table.metadata().current_snapshot_id(),
                },
            ];
            match self
                .catalog
                .commit_updates(&ident, requirements, updates)
                .await
            {
                Ok(_) => return Ok(()),
                Err(e)
                    if surely_not_committed(&e)
                        && e.kind() == iceberg::ErrorKind::CatalogCommitConflicts => {}
                Err(e) => return Err(from_iceberg(e)),
            }
            if lost >= retries.retries {
                return Err(retries.overtaken(&format!("{what} of '{}'", self.object), lost));
            }
            tokio::time::sleep(retries.wait(lost)).await;
            lost += 1;
        }
    }

    async fn expire_snapshots(
        &self,
        cutoff_ms: i64,
        retain_last: Option<usize>,
    ) -> SqeResult<Vec<(&'static str, u64)>> {
        // iceberg's own action chooses as Iceberg's Java library does: refs past their
        // max-ref-age go, each branch keeps its latest `min-snapshots-to-keep` and its ancestors
        // newer than the cutoff, no ref's head goes, and a table with `gc.enabled=false` refuses.
        // Its commit is retried against the new head when another writer wins the race.
        let (_, before) = self.load().await?;
        let tx = Transaction::new(&before);
        let mut action = tx.expire_snapshots().expire_older_than_ms(cutoff_ms);
        if let Some(n) = retain_last {
            action = action.retain_last(n);
        }
        let catalog: &dyn Catalog = self.catalog;
        let after = action
            .apply(tx)
            .map_err(from_iceberg)?
            .commit(catalog)
            .await
            .map_err(from_iceberg)?;
        let left: HashSet<i64> = after
            .metadata()
            .snapshots()
            .map(|s| s.snapshot_id())
            .collect();
        let expired: Vec<i64> = before
            .metadata()
            .snapshots()
            .map(|s| s.snapshot_id())
            .filter(|id| !left.contains(id))
            .collect();
        let table = before;
        // What the expired snapshots referred to (a file their manifests mark deleted was live in a
        // snapshot before), less what the snapshots left hold live: read from the metadata as it
        // was (the snapshots are gone from the catalog's now).
        let metadata = table.metadata();
        let (mut gone, mut kept) = (Referenced::default(), Referenced::default());
        for snapshot in metadata.snapshots() {
            if expired.contains(&snapshot.snapshot_id()) {
                gone.add(&table, snapshot, true).await?;
            }
        }
        for snapshot in after.metadata().snapshots() {
            kept.add(&after, snapshot, false).await?;
        }
        let location = metadata.location();
        let file_io = table.file_io();
        let delete = |path: String| async move {
            inside(location, &path) && file_io.delete(&path).await.is_ok()
        };
        let (mut data, mut positions, mut equalities, mut manifests, mut lists) = (0, 0, 0, 0, 0);
        for (path, content) in gone.files {
            if kept.files.contains_key(&path) || !delete(path).await {
                continue;
            }
            match content {
                DataContentType::Data => data += 1,
                DataContentType::PositionDeletes => positions += 1,
                DataContentType::EqualityDeletes => equalities += 1,
            }
        }
        for path in gone.manifests {
            if !kept.manifests.contains(&path) && delete(path).await {
                manifests += 1;
            }
        }
        for path in gone.lists {
            if !kept.lists.contains(&path) && delete(path).await {
                lists += 1;
            }
        }
        Ok(vec![
            ("expired_snapshots_count", expired.len() as u64),
            ("deleted_data_files_count", data),
            ("deleted_position_delete_files_count", positions),
            ("deleted_equality_delete_files_count", equalities),
            ("deleted_manifest_files_count", manifests),
            ("deleted_manifest_lists_count", lists),
        ])
    }

    async fn remove_orphan_files(
        &self,
        retention: Duration,
    ) -> SqeResult<Vec<(&'static str, u64)>> {
        let (_, table) = self.load().await?;
        let metadata = table.metadata();
        let location = metadata.location().trim_end_matches('/').to_string();
        let local = location.strip_prefix("file://").unwrap_or(&location);
        let mut live = Referenced::default();
        for snapshot in metadata.snapshots() {
            live.add(&table, snapshot, false).await?;
        }
        let referenced: HashSet<String> = live
            .files
            .into_keys()
            .chain(live.manifests.iter().cloned())
            .chain(live.lists)
            .chain(
                metadata
                    .metadata_log()
                    .iter()
                    .map(|m| m.metadata_file.clone()),
            )
            .chain(
                metadata
                    .statistics_iter()
                    .map(|s| s.statistics_path.clone()),
            )
            .chain(
                metadata
                    .partition_statistics_iter()
                    .map(|s| s.statistics_path.clone()),
            )
            .chain(table.metadata_location().map(str::to_string))
            .map(|p| p.strip_prefix("file://").map(str::to_string).unwrap_or(p))
            .collect();
        let before = SystemTime::now()
            .checked_sub(retention)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let manifests = live.manifests.len() as u64;
        let active = referenced.len() as u64;
        let uuid = metadata.uuid().to_string();
        let (scanned, deleted, bytes) = if local.starts_with('/') {
            let root = PathBuf::from(local);
            tokio::task::spawn_blocking(move || {
                remove_unreferenced(&root, &uuid, &referenced, before)
            })
            .await
            .map_err(|e| SqeError::internal(format!("the orphan file walk stopped: {e}")))??
        } else {
            remove_unreferenced_in_store(&table, &location, &uuid, &referenced, before).await?
        };
        Ok(vec![
            ("processed_manifests_count", manifests),
            ("active_files_count", active),
            ("scanned_files_count", scanned),
            ("deleted_files_count", deleted),
            ("deleted_bytes", bytes),
        ])
    }

    async fn rollback(&self, snapshot_id: i64) -> SqeResult<()> {
        self.commit_decided("rollback_to_snapshot", |table| {
            let metadata = table.metadata();
            if metadata.snapshot_by_id(snapshot_id).is_none() {
                return Err(SqeError::not_found(format!(
                    "table '{}' has no snapshot {snapshot_id}",
                    self.object
                )));
            }
            let head = metadata.current_snapshot_id();
            let mut at = metadata.current_snapshot();
            let mut ancestor = false;
            while let Some(snapshot) = at {
                if snapshot.snapshot_id() == snapshot_id {
                    ancestor = true;
                    break;
                }
                at = snapshot
                    .parent_snapshot_id()
                    .and_then(|id| metadata.snapshot_by_id(id));
            }
            if !ancestor {
                return Err(SqeError::invalid(format!(
                    "snapshot {snapshot_id} is not an ancestor of the current snapshot of '{}'",
                    self.object
                )));
            }
            if head == Some(snapshot_id) {
                return Ok(None);
            }
            let retention = refs(metadata)?
                .into_iter()
                .find(|(name, _)| name == MAIN_BRANCH)
                .map(|(_, r)| r.retention)
                .unwrap_or(SnapshotRetention::branch(None, None, None));
            Ok(Some(vec![TableUpdate::SetSnapshotRef {
                ref_name: MAIN_BRANCH.to_string(),
                reference: SnapshotReference::new(snapshot_id, retention),
            }]))
        })
        .await
    }

    /// Takes the table's statistics files (Trino's extended statistics, or any engine's table and
    /// partition statistics) out of its metadata; remove_orphan_files deletes them later.
    async fn drop_extended_stats(&self) -> SqeResult<()> {
        self.commit_decided("drop_extended_stats", |table| {
            let metadata = table.metadata();
            let tables = metadata
                .statistics_iter()
                .map(|s| TableUpdate::RemoveStatistics {
                    snapshot_id: s.snapshot_id,
                });
            let partitions = metadata.partition_statistics_iter().map(|s| {
                TableUpdate::RemovePartitionStatistics {
                    snapshot_id: s.snapshot_id,
                }
            });
            let updates: Vec<TableUpdate> = tables.chain(partitions).collect();
            Ok((!updates.is_empty()).then_some(updates))
        })
        .await
    }

    /// Merges the table's small manifests into as few as `commit.manifest.target-size-bytes`
    /// allows, in a `replace` snapshot: the files and rows stay as they are.
    async fn optimize_manifests(&self) -> SqeResult<Vec<(&'static str, u64)>> {
        let mut lost = 0;
        loop {
            let (ident, table) = self.load().await?;
            let retries = Retries::of(&table);
            let Some(current) = table.metadata().current_snapshot() else {
                return Ok(vec![
                    ("manifests_count_before", 0),
                    ("manifests_count_after", 0),
                ]);
            };
            let before = table
                .manifest_list_reader(current)
                .load()
                .await
                .map_err(from_iceberg)?
                .entries()
                .len() as u64;
            if before < 2 {
                return Ok(vec![
                    ("manifests_count_before", before),
                    ("manifests_count_after", before),
                ]);
            }
            let change = Change {
                replace: true,
                merge_manifests: true,
                ..Change::default()
            };
            match change::commit(self.catalog, &ident, &table, &change).await? {
                Committed::Done => {
                    let (_, table) = self.load().await?;
                    let after = match table.metadata().current_snapshot() {
                        Some(s) => table
                            .manifest_list_reader(s)
                            .load()
                            .await
                            .map_err(from_iceberg)?
                            .entries()
                            .len() as u64,
                        None => 0,
                    };
                    return Ok(vec![
                        ("manifests_count_before", before),
                        ("manifests_count_after", after),
                    ]);
                }
                Committed::Lost if lost < retries.retries => {
                    tokio::time::sleep(retries.wait(lost)).await;
                    lost += 1;
                }
                Committed::Lost => {
                    return Err(retries
                        .overtaken(&format!("optimize_manifests of '{}'", self.object), lost));
                }
                Committed::Unknown(e) => return Err(e),
            }
        }
    }

    async fn optimize(
        &self,
        threshold: u64,
        filter: Option<&Expr>,
    ) -> SqeResult<Vec<(&'static str, u64)>> {
        let mut lost = 0;
        loop {
            let (ident, table) = self.load().await?;
            let retries = Retries::of(&table);
            let Some(change) = self.compaction(&table, threshold, filter).await? else {
                return Ok(vec![
                    ("rewritten_data_files_count", 0),
                    ("removed_delete_files_count", 0),
                    ("added_data_files_count", 0),
                ]);
            };
            let (change, prefix, rewritten, deletes) = change;
            let added = change.added.len() as u64;
            match change::commit(self.catalog, &ident, &table, &change).await {
                Ok(Committed::Done) => {
                    return Ok(vec![
                        ("rewritten_data_files_count", rewritten),
                        ("removed_delete_files_count", deletes),
                        ("added_data_files_count", added),
                    ]);
                }
                Ok(Committed::Lost) if lost < retries.retries => {
                    remove_written(&table, &prefix).await;
                    tokio::time::sleep(retries.wait(lost)).await;
                    lost += 1;
                }
                Ok(Committed::Lost) => {
                    remove_written(&table, &prefix).await;
                    return Err(retries.overtaken(&format!("optimize of '{}'", self.object), lost));
                }
                Ok(Committed::Unknown(e)) => return Err(e),
                Err(e) => {
                    remove_written(&table, &prefix).await;
                    return Err(e);
                }
            }
        }
    }

    /// The compaction of `table` as it is (of the partitions `filter` chooses, if given): the
    /// change, its files' prefix, and how many data and delete files it removes; None when nothing
    /// needs rewriting.
    async fn compaction(
        &self,
        table: &Table,
        threshold: u64,
        filter: Option<&Expr>,
    ) -> SqeResult<Option<(Change, String, u64, u64)>> {
        let live = change::live_files(table).await?;
        if live
            .iter()
            .any(|f| f.file.content_type() == DataContentType::EqualityDeletes)
        {
            return Err(SqeError::unsupported(format!(
                "optimize of a table with equality delete files is not supported yet ('{}')",
                self.object
            )));
        }
        // The data files each position delete file names.
        let mut named: Vec<(&LiveFile, HashSet<String>)> = Vec::new();
        for f in live
            .iter()
            .filter(|f| f.file.content_type() == DataContentType::PositionDeletes)
        {
            let paths = match &f.names_only {
                Some(path) => HashSet::from([path.clone()]),
                None => read_position_deletes(table.file_io(), &f.path)
                    .await
                    .map_err(from_datafusion)?
                    .into_keys()
                    .collect(),
            };
            named.push((f, paths));
        }
        let with_deletes: HashSet<&str> = named
            .iter()
            .flat_map(|(_, paths)| paths.iter().map(String::as_str))
            .collect();
        // As in Trino, a WHERE clause chooses partitions: it compares identity partition columns
        // with constants, and is decided on each file's partition values.
        let scope: Option<HashSet<String>> = match filter {
            None => None,
            Some(filter) => {
                let data: Vec<LiveFile> = live
                    .iter()
                    .filter(|f| f.file.content_type() == DataContentType::Data)
                    .cloned()
                    .collect();
                let name = self.object.table.as_deref().unwrap_or_default();
                match matching_files(self.ctx, table, name, filter, data)? {
                    Some(files) => Some(files),
                    None => {
                        return Err(SqeError::invalid(format!(
                            "optimize's WHERE may only compare identity partition columns with constants ({filter})"
                        )));
                    }
                }
            }
        };
        // The candidates, by partition: small files, files with deletes, and files written under
        // an earlier partition spec (they are written again under the current one).
        let current_spec = table.metadata().default_partition_spec_id();
        let outdated = |f: &LiveFile| f.spec_id != current_spec;
        let mut groups: HashMap<(i32, &Struct), Vec<&LiveFile>> = HashMap::new();
        for f in live.iter().filter(|f| {
            f.file.content_type() == DataContentType::Data
                && scope.as_ref().is_none_or(|s| s.contains(&f.path))
                && (f.file.file_size_in_bytes() < threshold
                    || with_deletes.contains(f.path.as_str())
                    || outdated(f))
        }) {
            groups
                .entry((f.spec_id, f.file.partition()))
                .or_default()
                .push(f);
        }
        // A partition's one small file without deletes, in the current spec, is as compact as it
        // gets.
        let chosen: HashSet<String> = groups
            .into_values()
            .filter(|files| {
                files.len() > 1
                    || files
                        .iter()
                        .any(|f| with_deletes.contains(f.path.as_str()) || outdated(f))
            })
            .flatten()
            .map(|f| f.path.clone())
            .collect();
        if chosen.is_empty() {
            return Ok(None);
        }
        // Delete files that name only rewritten files (or files no longer live) go with them.
        let data: HashSet<&str> = live
            .iter()
            .filter(|f| f.file.content_type() == DataContentType::Data)
            .map(|f| f.path.as_str())
            .collect();
        let deletes: HashSet<String> = named
            .iter()
            .filter(|(_, paths)| {
                paths
                    .iter()
                    .all(|p| chosen.contains(p) || !data.contains(p.as_str()))
            })
            .map(|(f, _)| f.path.clone())
            .collect();
        let prefix = uuid::Uuid::now_v7().to_string();
        let rows: HashMap<String, Vec<i64>> =
            chosen.iter().map(|p| (p.clone(), Vec::new())).collect();
        let state = self.ctx.planner.state_for(self.ctx.session, Vec::new())?;
        let session = SessionContext::new_with_state(state.clone());
        let written = async {
            let plan = unchanged(&session, table, Arc::new(rows))?;
            let plan = cast_to_table(
                plan.into_unoptimized_plan(),
                table,
                None,
                &self.object.to_string(),
            )?;
            write_files(table, &state, plan, &prefix).await
        }
        .await;
        let added = match written {
            Ok((added, _)) => added,
            Err(e) => {
                remove_written(table, &prefix).await;
                return Err(e);
            }
        };
        let (rewritten, removed_deletes) = (chosen.len() as u64, deletes.len() as u64);
        let change = Change {
            removed: chosen.into_iter().chain(deletes).collect(),
            added,
            replace: true,
            ..Change::default()
        };
        Ok(Some((change, prefix, rewritten, removed_deletes)))
    }
}

/// Deletes the files under `root` that `referenced` does not name and that were last changed
/// before `before`; symbolic links are neither followed nor removed. A metadata file of another
/// table there (a table whose location holds this one's, or lies inside it) stops it before it
/// deletes anything: those files are that table's. One that does not parse (a write killed
/// part-way) is an orphan like any other. Returns the files seen, those deleted and
/// their bytes.
fn remove_unreferenced(
    root: &Path,
    uuid: &str,
    referenced: &HashSet<String>,
    before: SystemTime,
) -> SqeResult<(u64, u64, u64)> {
    let mut unreferenced = Vec::new();
    let mut scanned = 0;
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(SqeError::internal(format!(
                    "listing {}: {e}",
                    folder.display()
                )));
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                folders.push(path);
                continue;
            }
            if !meta.is_file() {
                continue;
            }
            scanned += 1;
            // A file-system catalog's pointer to the current metadata is no orphan.
            let hint = path.file_name().is_some_and(|n| n == "version-hint.text");
            if !hint && path.to_str().is_some_and(|name| !referenced.contains(name)) {
                unreferenced.push((path, meta));
            }
        }
    }
    // A metadata file that does not parse is no other table's: a killed write left it part-way.
    for (path, _) in &unreferenced {
        if !path.to_str().is_some_and(|p| p.ends_with(".metadata.json")) {
            continue;
        }
        if let Some(other) = table_uuid_of(path)
            && other != uuid
        {
            return Err(SqeError::invalid(format!(
                "{} is a metadata file of another table (table-uuid {other}): the table's folder holds another table's files, and remove_orphan_files does not run where tables share a folder",
                path.display()
            )));
        }
    }
    let (mut deleted, mut bytes) = (0, 0);
    for (path, meta) in unreferenced {
        let young = meta.modified().map_or(true, |m| m >= before);
        if !young && std::fs::remove_file(&path).is_ok() {
            deleted += 1;
            bytes += meta.len();
        }
    }
    Ok((scanned, deleted, bytes))
}

/// [`remove_unreferenced`] for a table in an object store: the objects under its location (a
/// folder: `…/t/`, never `…/t2`), compared by bucket and key whatever the scheme names them
/// (`s3`, `s3a`, `s3n`), removed through the table's `FileIO` with the caller's credentials.
async fn remove_unreferenced_in_store(
    table: &Table,
    location: &str,
    uuid: &str,
    referenced: &HashSet<String>,
    before: SystemTime,
) -> SqeResult<(u64, u64, u64)> {
    let file_io = table.file_io();
    let listed = storage::list(file_io, location)
        .await
        .map_err(from_iceberg)?;
    let referenced: HashSet<&str> = referenced.iter().map(|p| object_key(p)).collect();
    let scanned = listed.len() as u64;
    let unreferenced: Vec<_> = listed
        .into_iter()
        .filter(|f| {
            !f.location.ends_with("/version-hint.text")
                && !referenced.contains(object_key(&f.location))
        })
        .collect();
    for file in unreferenced
        .iter()
        .filter(|f| f.location.ends_with(".metadata.json") && f.size <= 64 << 20)
    {
        let Ok(bytes) = file_io
            .new_input(&file.location)
            .map_err(from_iceberg)?
            .read()
            .await
        else {
            continue;
        };
        let other = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|json| Some(json.get("table-uuid")?.as_str()?.to_string()));
        if let Some(other) = other
            && other != uuid
        {
            return Err(SqeError::invalid(format!(
                "{} is a metadata file of another table (table-uuid {other}): the table's folder holds another table's files, and remove_orphan_files does not run where tables share a folder",
                file.location
            )));
        }
    }
    let (mut deleted, mut bytes) = (0, 0);
    for file in unreferenced {
        let young = file.modified.is_none_or(|m| m >= before);
        if !young && file_io.delete(&file.location).await.is_ok() {
            deleted += 1;
            bytes += file.size;
        }
    }
    Ok((scanned, deleted, bytes))
}

/// An object's bucket and key, whatever scheme its URL has.
fn object_key(location: &str) -> &str {
    location
        .split_once("://")
        .map_or(location, |(_, rest)| rest)
}

/// The `table-uuid` of an Iceberg metadata file, if it can be read.
fn table_uuid_of(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    // A metadata file is text of a few MiB at most; a larger one is not read whole.
    let reader = std::io::Read::take(file, 64 << 20);
    let json: serde_json::Value = serde_json::from_reader(reader).ok()?;
    Some(json.get("table-uuid")?.as_str()?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_as_trino_writes_them() {
        assert_eq!(duration("7d").ok(), Some(Duration::from_secs(7 * 86400)));
        assert_eq!(duration(" 1.5h ").ok(), Some(Duration::from_secs(5400)));
        assert_eq!(duration("0s").ok(), Some(Duration::ZERO));
        assert_eq!(duration("250ms").ok(), Some(Duration::from_millis(250)));
        for bad in ["", "7", "d", "7 days", "-1d", "1e400d"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
        assert_eq!(data_size("128MB").ok(), Some(128 << 20));
        assert_eq!(data_size("1kB").ok(), Some(1024));
        assert!(data_size("1mb").is_err());
        assert!(data_size("99999999999TB").is_err());
        assert_eq!(spelled(Duration::from_secs(86400)), "1.00d");
        assert_eq!(spelled(Duration::from_secs(90)), "1.50m");
    }

    #[test]
    fn only_paths_inside_the_table_are_deletable() {
        let root = "/w/s/t";
        assert!(inside(root, "/w/s/t/data/a.parquet"));
        assert!(inside("file:///w/s/t/", "file:///w/s/t/metadata/m.avro"));
        for outside in [
            "/w/s/t",
            "/w/s/t/",
            "/w/s/tt/data/a.parquet",
            "/w/s/t/../u/data/a.parquet",
            "/etc/passwd",
            "s3://b/w/s/t/data/a.parquet",
        ] {
            assert!(!inside(root, outside), "{outside}");
        }
    }
}

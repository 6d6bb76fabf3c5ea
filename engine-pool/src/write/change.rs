//! Snapshots that remove files as well as add them, which iceberg's `Transaction` cannot make (it
//! only appends): the producer behind TRUNCATE and DELETE.
//!
//! A [`Change`] names the live files it removes (data or delete files, by path) and the data files
//! it adds. [`commit`] writes, against the table's current snapshot:
//! - each manifest that holds a removed file again, with that file's entry DELETED and every other
//!   live entry EXISTING (keeping its snapshot id and sequence numbers), in the manifest's own
//!   partition spec; manifests that hold none are carried over as they are;
//! - one data manifest for the added files, whose entries inherit the new sequence number;
//! - the manifests carried over merged into fewer when the snapshot would list many
//!   ([`ManifestMerge`]), as Iceberg's own writers merge them;
//! - the manifest list, and the snapshot with Iceberg's summary counters and totals
//!   (`deleted-data-files`, `deleted-records`, `total-records`, …); its operation is `delete`
//!   when it only removes, `overwrite` when it also adds;
//!
//! and commits it through the catalog's compare-and-swap, on the condition that the table is the
//! same table and its main branch (or the branch the change names) still points at the snapshot
//! the change was made from. A lost
//! race is [`Committed::Lost`]: the caller decides the change again against the new head (what it
//! removes may have changed) and retries.

use std::collections::{HashMap, HashSet};

use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, FormatVersion, MAIN_BRANCH, Manifest,
    ManifestContentType, ManifestEntry, ManifestFile, ManifestListWriter, ManifestStatus,
    ManifestWriter, ManifestWriterBuilder, Operation, Snapshot, SnapshotReference,
    SnapshotRetention, Summary, TableMetadata,
};
use iceberg::table::Table;
use iceberg::{ErrorKind, TableIdent, TableRequirement, TableUpdate};
use sqe_sessions::{ErrorCode, SqeError, SqeResult};

use crate::catalog::backend::SqeCatalog;
use crate::error::{CatalogRefusal, from_iceberg};

/// What one statement changes in a table's files.
#[derive(Debug, Default)]
pub(crate) struct Change {
    /// Live files of the current snapshot that the change removes, by path.
    pub removed: HashSet<String>,
    /// Data files the change adds.
    pub added: Vec<DataFile>,
    /// Position delete files the change adds (merge-on-read), each with the partition spec (and
    /// in the partition) of the data files whose rows it names; in format version 3, deletion
    /// vectors.
    pub added_deletes: Vec<(i32, DataFile)>,
    /// Data files whose deletion vector the change replaces with one of `added_deletes` (a data
    /// file has one vector at most). A vector also goes with its data file, and only then: one
    /// Puffin file may hold the vectors of several data files, so its path in `removed` does not
    /// remove them.
    pub replaced_vectors: HashSet<String>,
    /// The rows stay as they are (a compaction): the snapshot's operation is `replace`.
    pub replace: bool,
    /// The branch the change goes to, and the retention it keeps; the main branch if None.
    pub branch: Option<(String, SnapshotRetention)>,
    /// Merge every small manifest the change carries over, however few (optimize_manifests);
    /// otherwise they are merged when the snapshot would list as many as the table's
    /// `commit.manifest.min-count-to-merge` ([`ManifestMerge`]).
    pub merge_manifests: bool,
}

impl Change {
    /// Whether the change removes the live `entry` (see `replaced_vectors`).
    fn removes(&self, entry: &ManifestEntry) -> bool {
        let file = entry.data_file();
        match (is_vector(file), file.referenced_data_file()) {
            (true, Some(data_file)) => {
                self.removed.contains(&data_file) || self.replaced_vectors.contains(&data_file)
            }
            _ => self.removed.contains(file.file_path()),
        }
    }
}

/// Whether `file` is a deletion vector (format version 3): a blob of a Puffin file.
pub(crate) fn is_vector(file: &DataFile) -> bool {
    file.content_type() == DataContentType::PositionDeletes
        && file.file_format() == iceberg::spec::DataFileFormat::Puffin
}

/// When a commit merges the manifests it carries over into fewer, as Iceberg's writers do, so that
/// a table appended to for years is not planned from one manifest per append: the table's
/// `commit.manifest-merge.enabled` (true), `commit.manifest.min-count-to-merge` (100) and
/// `commit.manifest.target-size-bytes` (8 MB, the most a merged manifest is made of).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ManifestMerge {
    enabled: bool,
    min_count: usize,
    target_bytes: i64,
}

impl ManifestMerge {
    pub(crate) fn of(table: &Table) -> Self {
        let properties = table.metadata().properties();
        let get = |key: &str| properties.get(key).map(|v| v.trim().to_ascii_lowercase());
        Self {
            enabled: get("commit.manifest-merge.enabled").is_none_or(|v| v != "false"),
            min_count: get("commit.manifest.min-count-to-merge")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(100)
                .max(2),
            target_bytes: get("commit.manifest.target-size-bytes")
                .and_then(|v| v.parse::<i64>().ok())
                .filter(|v| *v > 0)
                .unwrap_or(8 << 20),
        }
    }

    /// Whether a snapshot that would list `manifests` manifests gets them merged.
    pub(crate) fn due(&self, manifests: usize) -> bool {
        self.enabled && manifests >= self.min_count
    }
}

/// How a commit ended.
pub(crate) enum Committed {
    /// The change is the table's new current snapshot.
    Done,
    /// Another writer moved the table first; nothing of this change is visible.
    Lost,
    /// The catalog's answer was lost (a timeout, a dropped connection, a 5xx): the change may be
    /// the table's current snapshot or not, so the files it refers to must stay.
    Unknown(SqeError),
}

/// Iceberg's summary counters of one snapshot, and what they add to the totals.
#[derive(Debug, Default)]
struct Counts {
    added_data_files: u64,
    added_records: u64,
    added_size: u64,
    added_delete_files: u64,
    added_position_deletes: u64,
    deleted_data_files: u64,
    deleted_records: u64,
    removed_delete_files: u64,
    removed_position_delete_files: u64,
    removed_equality_delete_files: u64,
    removed_position_deletes: u64,
    removed_equality_deletes: u64,
    removed_size: u64,
}

impl Counts {
    fn remove(&mut self, file: &DataFile) {
        self.removed_size += file.file_size_in_bytes();
        match file.content_type() {
            DataContentType::Data => {
                self.deleted_data_files += 1;
                self.deleted_records += file.record_count();
            }
            DataContentType::PositionDeletes => {
                self.removed_delete_files += 1;
                self.removed_position_delete_files += 1;
                self.removed_position_deletes += file.record_count();
            }
            DataContentType::EqualityDeletes => {
                self.removed_delete_files += 1;
                self.removed_equality_delete_files += 1;
                self.removed_equality_deletes += file.record_count();
            }
        }
    }

    fn add(&mut self, file: &DataFile) {
        self.added_size += file.file_size_in_bytes();
        match file.content_type() {
            DataContentType::Data => {
                self.added_data_files += 1;
                self.added_records += file.record_count();
            }
            _ => {
                self.added_delete_files += 1;
                self.added_position_deletes += file.record_count();
            }
        }
    }

    /// The summary's properties: this snapshot's counters (those that are not zero), and the
    /// totals where the parent's summary has them.
    fn properties(&self, parent: Option<&Summary>) -> HashMap<String, String> {
        let mut out = HashMap::new();
        for (name, value) in [
            ("added-data-files", self.added_data_files),
            ("added-records", self.added_records),
            ("added-files-size", self.added_size),
            ("added-delete-files", self.added_delete_files),
            ("added-position-delete-files", self.added_delete_files),
            ("added-position-deletes", self.added_position_deletes),
            ("deleted-data-files", self.deleted_data_files),
            ("deleted-records", self.deleted_records),
            ("removed-delete-files", self.removed_delete_files),
            (
                "removed-position-delete-files",
                self.removed_position_delete_files,
            ),
            (
                "removed-equality-delete-files",
                self.removed_equality_delete_files,
            ),
            ("removed-position-deletes", self.removed_position_deletes),
            ("removed-equality-deletes", self.removed_equality_deletes),
            ("removed-files-size", self.removed_size),
        ] {
            if value > 0 {
                out.insert(name.to_string(), value.to_string());
            }
        }
        let before = |name: &str| -> Option<u64> {
            let props = &parent?.additional_properties;
            props.get(name)?.parse().ok()
        };
        for (name, added, removed) in [
            ("total-records", self.added_records, self.deleted_records),
            (
                "total-data-files",
                self.added_data_files,
                self.deleted_data_files,
            ),
            (
                "total-delete-files",
                self.added_delete_files,
                self.removed_delete_files,
            ),
            (
                "total-position-deletes",
                self.added_position_deletes,
                self.removed_position_deletes,
            ),
            ("total-equality-deletes", 0, self.removed_equality_deletes),
            ("total-files-size", self.added_size, self.removed_size),
        ] {
            // A table no snapshot has written yet starts from nothing.
            let before = match parent {
                None => Some(0),
                Some(_) => before(name),
            };
            if let Some(before) = before {
                let total = (before + added).saturating_sub(removed);
                out.insert(name.to_string(), total.to_string());
            }
        }
        out
    }
}

/// A snapshot id no snapshot of the table has.
fn new_snapshot_id(table: &Table) -> i64 {
    loop {
        let (high, low) = uuid::Uuid::new_v4().as_u64_pair();
        let id = ((high ^ low) & i64::MAX as u64) as i64;
        if id != 0 && table.metadata().snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

/// Writes `change` as a new snapshot of `table` (as loaded: its current snapshot is the base)
/// and commits it through `catalog`. Removing a file the base does not hold is an error.
pub(crate) async fn commit(
    catalog: &dyn SqeCatalog,
    ident: &TableIdent,
    table: &Table,
    change: &Change,
) -> SqeResult<Committed> {
    let metadata = table.metadata();
    let version = metadata.format_version();
    let encrypted = metadata
        .table_properties()
        .map_err(from_iceberg)?
        .encryption_key_id
        .is_some();
    if encrypted {
        return Err(SqeError::unsupported(format!(
            "removing rows from an encrypted table is not supported ('{ident}')"
        )));
    }
    let branch = change
        .branch
        .as_ref()
        .map_or(MAIN_BRANCH, |(name, _)| name.as_str());
    let base = match &change.branch {
        None => metadata.current_snapshot(),
        Some((name, _)) => Some(metadata.snapshot_for_ref(name).ok_or_else(|| {
            SqeError::not_found(format!("table '{ident}' has no branch '{name}'"))
        })?),
    };
    let file_io = table.file_io();
    let snapshot_id = new_snapshot_id(table);
    let sequence_number = metadata.next_sequence_number();
    let commit = uuid::Uuid::new_v4();
    let location = metadata.location().trim_end_matches('/');
    let schema = metadata.current_schema().clone();
    let mut counts = Counts::default();
    let mut manifests: Vec<ManifestFile> = Vec::new();
    let mut found = HashSet::new();
    // The files this commit writes, removed again if it loses the race.
    let mut written: Vec<String> = Vec::new();
    let next_manifest = |written: &mut Vec<String>| {
        let path = format!("{location}/metadata/{commit}-m{}.avro", written.len());
        written.push(path.clone());
        path
    };

    // The manifests carried over untouched, with what they hold.
    let mut kept: Vec<(ManifestFile, Manifest)> = Vec::new();
    let mut listed_count = 0;
    if let Some(base) = base {
        let list = table
            .manifest_list_reader(base)
            .load()
            .await
            .map_err(from_iceberg)?;
        listed_count = list.entries().len();
        for listed in list.entries() {
            let manifest = listed.load_manifest(file_io).await.map_err(from_iceberg)?;
            // A vector's Puffin file, named in `removed`, is held whether or not the change
            // removes the vector (see `replaced_vectors`).
            found.extend(
                manifest
                    .entries()
                    .iter()
                    .filter(|e| e.is_alive() && is_vector(e.data_file()))
                    .map(|e| e.file_path().to_string()),
            );
            let touched = manifest
                .entries()
                .iter()
                .any(|e| e.is_alive() && change.removes(e));
            if !touched {
                kept.push((listed.clone(), manifest));
                continue;
            }
            let mut writer = manifest_writer(
                table,
                snapshot_id,
                listed.partition_spec_id,
                listed.content,
                next_manifest(&mut written),
            )?;
            for (entry, row_id) in live_entries(listed, &manifest) {
                if change.removes(entry) {
                    found.insert(entry.file_path().to_string());
                    counts.remove(entry.data_file());
                    let sequence = entry.sequence_number().unwrap_or(0);
                    let file_sequence = entry.file_sequence_number.or(Some(sequence));
                    let file = with_row_id(entry.data_file(), listed, row_id)?;
                    writer
                        .add_delete_file(file, sequence, file_sequence)
                        .map_err(from_iceberg)?;
                } else {
                    keep(&mut writer, entry, listed, row_id)?;
                }
            }
            manifests.push(writer.write_manifest_file().await.map_err(from_iceberg)?);
        }
    }
    // The manifests carried over, merged where it is due: each spec's small data (or delete)
    // manifests packed into as few as the target size allows, their live entries EXISTING with
    // the snapshot and sequence numbers they had.
    let added_manifests =
        usize::from(!change.added.is_empty()) + usize::from(!change.added_deletes.is_empty());
    let merge = ManifestMerge::of(table);
    let merging = change.merge_manifests || merge.due(listed_count + added_manifests);
    let target_bytes = merge.target_bytes;
    let mut groups: HashMap<(ManifestContentType, i32), Vec<(ManifestFile, Manifest)>> =
        HashMap::new();
    for (listed, manifest) in kept {
        if !merging || listed.manifest_length >= target_bytes {
            manifests.push(listed);
            continue;
        }
        groups
            .entry((listed.content, listed.partition_spec_id))
            .or_default()
            .push((listed, manifest));
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by_key(|((content, spec), _)| (*content == ManifestContentType::Deletes, *spec));
    for ((content, spec_id), group) in groups {
        let mut bins: Vec<Vec<(ManifestFile, Manifest)>> = Vec::new();
        let mut bytes = 0;
        for item in group {
            if bins.is_empty() || bytes + item.0.manifest_length > target_bytes {
                bins.push(Vec::new());
                bytes = 0;
            }
            bytes += item.0.manifest_length;
            if let Some(bin) = bins.last_mut() {
                bin.push(item);
            }
        }
        for bin in bins {
            if bin.len() < 2 {
                manifests.extend(bin.into_iter().map(|(listed, _)| listed));
                continue;
            }
            let mut writer = manifest_writer(
                table,
                snapshot_id,
                spec_id,
                content,
                next_manifest(&mut written),
            )?;
            for (listed, manifest) in &bin {
                for (entry, row_id) in live_entries(listed, manifest) {
                    keep(&mut writer, entry, listed, row_id)?;
                }
            }
            manifests.push(writer.write_manifest_file().await.map_err(from_iceberg)?);
        }
    }
    if let Some(missing) = change.removed.iter().find(|p| !found.contains(*p)) {
        return Err(SqeError::internal(format!(
            "a change of '{ident}' removes {missing}, which its current snapshot does not hold"
        )));
    }
    if !change.added.is_empty() {
        let mut writer = manifest_writer(
            table,
            snapshot_id,
            metadata.default_partition_spec_id(),
            ManifestContentType::Data,
            next_manifest(&mut written),
        )?;
        for file in &change.added {
            counts.add(file);
            // A negative sequence number: the entry inherits the snapshot's.
            writer.add_file(file.clone(), -1).map_err(from_iceberg)?;
        }
        manifests.push(writer.write_manifest_file().await.map_err(from_iceberg)?);
    }
    // One delete manifest per partition spec the delete files are in.
    let mut specs: Vec<i32> = change
        .added_deletes
        .iter()
        .map(|(spec_id, _)| *spec_id)
        .collect();
    specs.sort_unstable();
    specs.dedup();
    for spec_id in specs {
        if version == FormatVersion::V1 {
            return Err(SqeError::unsupported(format!(
                "delete files need Iceberg format version 2; '{ident}' is version 1"
            )));
        }
        let mut writer = manifest_writer(
            table,
            snapshot_id,
            spec_id,
            ManifestContentType::Deletes,
            next_manifest(&mut written),
        )?;
        for (_, file) in change.added_deletes.iter().filter(|f| f.0 == spec_id) {
            counts.add(file);
            writer.add_file(file.clone(), -1).map_err(from_iceberg)?;
        }
        manifests.push(writer.write_manifest_file().await.map_err(from_iceberg)?);
    }

    let parent = base.map(|b| b.snapshot_id());
    let list_path = format!("{location}/metadata/snap-{snapshot_id}-1-{commit}.avro");
    written.push(list_path.clone());
    let out = file_io
        .new_output(&list_path)
        .map_err(from_iceberg)?
        .writer()
        .await
        .map_err(from_iceberg)?;
    // Format version 3: the rows of each data manifest that has none get ids from the table's
    // next row id on (row lineage), and the snapshot says which.
    let first_row_id = metadata.next_row_id();
    let mut list = match version {
        FormatVersion::V1 => ManifestListWriter::v1(out, snapshot_id, parent),
        FormatVersion::V2 => ManifestListWriter::v2(out, snapshot_id, parent, sequence_number),
        FormatVersion::V3 => ManifestListWriter::v3(
            out,
            snapshot_id,
            parent,
            sequence_number,
            Some(first_row_id),
        ),
    };
    list.add_manifests(manifests.into_iter())
        .map_err(from_iceberg)?;
    let next_row_id = list.next_row_id();
    list.close().await.map_err(from_iceberg)?;

    let removes = !change.removed.is_empty() || !change.added_deletes.is_empty();
    let operation = match (removes, change.added.is_empty()) {
        _ if change.replace => Operation::Replace,
        (false, _) => Operation::Append,
        (true, true) => Operation::Delete,
        (true, false) => Operation::Overwrite,
    };
    let summary = Summary {
        operation,
        additional_properties: counts.properties(base.map(|b| b.summary())),
    };
    let snapshot = Snapshot::builder()
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(parent)
        .with_sequence_number(sequence_number)
        .with_timestamp_ms(chrono::Utc::now().timestamp_millis())
        .with_manifest_list(list_path)
        .with_summary(summary)
        .with_schema_id(schema.schema_id());
    let snapshot = match next_row_id {
        Some(next) => snapshot
            .with_row_range(first_row_id, next - first_row_id)
            .build(),
        None => snapshot.build(),
    };
    let requirements = vec![
        TableRequirement::UuidMatch {
            uuid: metadata.uuid(),
        },
        TableRequirement::RefSnapshotIdMatch {
            r#ref: branch.to_string(),
            snapshot_id: parent,
        },
    ];
    let retention = match &change.branch {
        Some((_, retention)) => retention.clone(),
        None => SnapshotRetention::branch(None, None, None),
    };
    let updates = vec![
        TableUpdate::AddSnapshot { snapshot },
        TableUpdate::SetSnapshotRef {
            ref_name: branch.to_string(),
            reference: SnapshotReference::new(snapshot_id, retention),
        },
    ];
    match catalog.commit_updates(ident, requirements, updates).await {
        Ok(_) => Ok(Committed::Done),
        Err(e) if surely_not_committed(&e) => {
            // Nothing refers to the files this commit wrote.
            for path in &written {
                let _ = file_io.delete(path).await;
            }
            match e.kind() {
                ErrorKind::CatalogCommitConflicts => Ok(Committed::Lost),
                _ => Err(from_iceberg(e)),
            }
        }
        Err(e) => {
            let e = from_iceberg(e);
            Ok(Committed::Unknown(SqeError::new(
                e.code(),
                format!(
                    "{}; whether the change was committed is unknown: read the table to see",
                    e.message()
                ),
            )))
        }
    }
}

/// The table's refs: iceberg-rust keeps them private, but serializes them as the spec has them.
pub(crate) fn refs(metadata: &TableMetadata) -> SqeResult<Vec<(String, SnapshotReference)>> {
    let json = serde_json::to_value(metadata)
        .map_err(|e| SqeError::internal(format!("serializing table metadata: {e}")))?;
    let Some(map) = json.get("refs").and_then(|r| r.as_object()) else {
        return Ok(Vec::new());
    };
    map.iter()
        .map(|(name, value)| {
            serde_json::from_value::<SnapshotReference>(value.clone())
                .map(|r| (name.clone(), r))
                .map_err(|e| SqeError::internal(format!("reading ref {name}: {e}")))
        })
        .collect()
}

/// A writer of one manifest of `content` files in partition spec `spec_id`, at `path`, for the
/// snapshot `snapshot_id` of `table`.
fn manifest_writer(
    table: &Table,
    snapshot_id: i64,
    spec_id: i32,
    content: ManifestContentType,
    path: String,
) -> SqeResult<ManifestWriter> {
    let metadata = table.metadata();
    let spec = metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
        SqeError::internal(format!(
            "no partition spec {spec_id} in '{}'",
            table.identifier()
        ))
    })?;
    let output = table.file_io().new_output(path).map_err(from_iceberg)?;
    let builder = ManifestWriterBuilder::new(
        output,
        Some(snapshot_id),
        metadata.current_schema().clone(),
        spec.as_ref().clone(),
    );
    Ok(match (metadata.format_version(), content) {
        (FormatVersion::V1, _) => builder.build_v1(),
        (FormatVersion::V2, ManifestContentType::Data) => builder.build_v2_data(),
        (FormatVersion::V2, ManifestContentType::Deletes) => builder.build_v2_deletes(),
        (FormatVersion::V3, ManifestContentType::Data) => builder.build_v3_data(),
        (FormatVersion::V3, ManifestContentType::Deletes) => builder.build_v3_deletes(),
    })
}

/// The live entries of `manifest` (listed as `listed`), each with its first row id (format
/// version 3): its own, or the one it inherits, which is the manifest's first row id plus the rows
/// of the entries before it that inherit theirs too. Written again, an entry states it, so that
/// its rows keep their ids.
fn live_entries<'a>(
    listed: &ManifestFile,
    manifest: &'a Manifest,
) -> Vec<(&'a ManifestEntry, Option<i64>)> {
    let mut next = match listed.content {
        ManifestContentType::Data => listed.first_row_id.map(|id| id as i64),
        ManifestContentType::Deletes => None,
    };
    let mut live = Vec::new();
    for entry in manifest.entries() {
        let own = entry.data_file().first_row_id();
        let row_id = match (own, next, entry.status()) {
            (Some(id), _, _) => Some(id),
            (None, _, ManifestStatus::Deleted) | (None, None, _) => None,
            (None, Some(id), _) => {
                next = Some(id + entry.data_file().record_count() as i64);
                Some(id)
            }
        };
        if entry.is_alive() {
            live.push((entry.as_ref(), row_id));
        }
    }
    live
}

/// `file` (of manifest `listed`) stating `row_id` as its first row id, when it inherited it.
fn with_row_id(file: &DataFile, listed: &ManifestFile, row_id: Option<i64>) -> SqeResult<DataFile> {
    let Some(row_id) = row_id.filter(|_| file.first_row_id().is_none()) else {
        return Ok(file.clone());
    };
    let mut builder = DataFileBuilder::default();
    builder
        .content(file.content_type())
        .file_path(file.file_path().to_string())
        .file_format(file.file_format())
        .partition(file.partition().clone())
        .record_count(file.record_count())
        .file_size_in_bytes(file.file_size_in_bytes())
        .column_sizes(file.column_sizes().clone())
        .value_counts(file.value_counts().clone())
        .null_value_counts(file.null_value_counts().clone())
        .nan_value_counts(file.nan_value_counts().clone())
        .lower_bounds(file.lower_bounds().clone())
        .upper_bounds(file.upper_bounds().clone())
        .key_metadata(file.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(file.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(file.equality_ids())
        .first_row_id(Some(row_id))
        .partition_spec_id(listed.partition_spec_id)
        .referenced_data_file(file.referenced_data_file())
        .content_offset(file.content_offset())
        .content_size_in_bytes(file.content_size_in_bytes());
    if let Some(order) = file.sort_order_id() {
        builder.sort_order_id(order);
    }
    builder
        .build()
        .map_err(|e| SqeError::internal(format!("copying the entry of {}: {e}", file.file_path())))
}

/// Writes `entry` of the manifest `listed` again as EXISTING, with the snapshot and sequence
/// numbers it had (entries of older manifests may leave them to be inherited from the list).
fn keep(
    writer: &mut ManifestWriter,
    entry: &ManifestEntry,
    listed: &ManifestFile,
    row_id: Option<i64>,
) -> SqeResult<()> {
    let sequence = entry.sequence_number().unwrap_or(0);
    let file_sequence = entry.file_sequence_number.or(Some(sequence));
    let added_by = entry.snapshot_id().unwrap_or(listed.added_snapshot_id);
    let file = with_row_id(entry.data_file(), listed, row_id)?;
    writer
        .add_existing_file(file, added_by, sequence, file_sequence)
        .map_err(from_iceberg)
}

/// A live file of a snapshot: its path, the partition spec it was written with, its entry, and
/// for a position delete file the one data file it names, if it says so.
#[derive(Clone)]
pub(crate) struct LiveFile {
    pub path: String,
    pub spec_id: i32,
    pub file: DataFile,
    pub names_only: Option<String>,
}

/// `removed` (data files of `table`'s current snapshot), and the position delete files that name
/// only rows of those: nothing is left for them to delete.
pub(crate) async fn with_their_deletes(
    table: &Table,
    mut removed: HashSet<String>,
) -> SqeResult<HashSet<String>> {
    let orphans: Vec<String> = live_files(table)
        .await?
        .into_iter()
        .filter(|f| f.names_only.as_ref().is_some_and(|p| removed.contains(p)))
        .map(|f| f.path)
        .collect();
    removed.extend(orphans);
    Ok(removed)
}

/// Every live file (data and delete files) of `table`'s current snapshot.
pub(crate) async fn live_files(table: &Table) -> SqeResult<Vec<LiveFile>> {
    let mut files = Vec::new();
    let Some(current) = table.metadata().current_snapshot() else {
        return Ok(files);
    };
    let list = table
        .manifest_list_reader(current)
        .load()
        .await
        .map_err(from_iceberg)?;
    for listed in list.entries() {
        let manifest = listed
            .load_manifest(table.file_io())
            .await
            .map_err(from_iceberg)?;
        files.extend(
            manifest
                .entries()
                .iter()
                .filter(|e| e.is_alive())
                .map(|e| LiveFile {
                    path: e.file_path().to_string(),
                    spec_id: listed.partition_spec_id,
                    file: e.data_file().clone(),
                    names_only: match e.data_file().content_type() {
                        DataContentType::PositionDeletes => e.data_file().referenced_data_file(),
                        _ => None,
                    },
                }),
        );
    }
    Ok(files)
}

/// How often, and after what waits, a commit that lost the race is tried again: the table's
/// `commit.retry.num-retries` (4), `commit.retry.min-wait-ms` (100) and `commit.retry.max-wait-ms`
/// (60000), as Iceberg's writers read them; each wait doubles from the least to the most.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retries {
    pub retries: usize,
    min_wait_ms: u64,
    max_wait_ms: u64,
}

impl Retries {
    pub(crate) fn of(table: &Table) -> Self {
        let properties = table.metadata().properties();
        let number = |key: &str, default: u64| {
            properties
                .get(key)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(default)
        };
        Self {
            retries: number("commit.retry.num-retries", 4).min(1000) as usize,
            min_wait_ms: number("commit.retry.min-wait-ms", 100),
            max_wait_ms: number("commit.retry.max-wait-ms", 60_000),
        }
    }

    /// The conflict a statement (`what`, e.g. "DELETE FROM 'cat.s.t'") fails with after losing the
    /// race `lost + 1` times in a row.
    pub(crate) fn overtaken(&self, what: &str, lost: usize) -> SqeError {
        SqeError::new(
            ErrorCode::Conflict,
            format!(
                "{what} was overtaken by other writers {} times in a row (the table's commit.retry.num-retries is {}); run it again",
                lost + 1,
                self.retries
            ),
        )
    }

    /// The wait before retry `n` (from 0).
    pub(crate) fn wait(&self, n: usize) -> std::time::Duration {
        let doubled = self
            .min_wait_ms
            .saturating_mul(1u64 << n.min(32))
            .min(self.max_wait_ms.max(self.min_wait_ms));
        std::time::Duration::from_millis(doubled)
    }
}

/// Whether a failed commit surely changed nothing: the catalog refused it (a lost compare-and-swap,
/// a 4xx answer), so the files it would have added belong to nobody.
pub(crate) fn surely_not_committed(e: &iceberg::Error) -> bool {
    if matches!(
        e.kind(),
        iceberg::ErrorKind::CatalogCommitConflicts | iceberg::ErrorKind::FeatureUnsupported
    ) {
        return true;
    }
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<CatalogRefusal>())
        .is_some_and(|r| {
            matches!(
                r.code,
                ErrorCode::PermissionDenied
                    | ErrorCode::Unauthenticated
                    | ErrorCode::InvalidInput
                    | ErrorCode::NotFound
                    | ErrorCode::Conflict
                    | ErrorCode::AlreadyExists
            )
        })
}

/// Whether every snapshot of `table` after `snapshot_id`, up to its current one, only appended.
pub(crate) fn only_appends_since(table: &Table, snapshot_id: Option<i64>) -> bool {
    let metadata = table.metadata();
    let mut at = metadata.current_snapshot();
    while let Some(snapshot) = at {
        if Some(snapshot.snapshot_id()) == snapshot_id {
            return true;
        }
        // The operation, and counters that say the same: nothing removed, no delete files.
        let summary = snapshot.summary();
        let counted = |key: &str| {
            summary
                .additional_properties
                .get(key)
                .is_some_and(|v| v != "0")
        };
        if summary.operation != Operation::Append
            || [
                "deleted-data-files",
                "removed-delete-files",
                "added-delete-files",
                "deleted-records",
            ]
            .iter()
            .any(|k| counted(k))
        {
            return false;
        }
        at = snapshot
            .parent_snapshot_id()
            .and_then(|id| metadata.snapshot_by_id(id));
    }
    // Back to the table's first snapshot: only appends since a table with none.
    snapshot_id.is_none()
}

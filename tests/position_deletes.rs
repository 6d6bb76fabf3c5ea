//! Commits Iceberg v2 delete files to a table as another engine would (Spark's position deletes,
//! Flink's equality deletes), so that SQE's reads of files it did not write are tested: a delete
//! Parquet file in the table's data directory, a delete manifest, a manifest list holding the
//! current manifests plus that one, and a `delete` snapshot swapped in through the catalog. Test
//! support only: no retries, no validation of the positions.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, FormatVersion, MAIN_BRANCH,
    ManifestListWriter, ManifestWriterBuilder, Operation, Snapshot, SnapshotReference,
    SnapshotRetention, SnapshotSummaryCollector, Summary,
};
use iceberg::{Catalog, TableIdent, TableRequirement, TableUpdate};
use parquet::arrow::{ArrowWriter, PARQUET_FIELD_ID_META_KEY};
use sqe_engine::catalog::sql::SqlCatalog;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Reserved Iceberg field ids of a position-delete file's columns.
const FILE_PATH_FIELD_ID: &str = "2147483546";
const POS_FIELD_ID: &str = "2147483545";

/// Snapshot summary totals carried from the parent snapshot, each with the key that adds to it.
const TOTALS: [(&str, &str); 6] = [
    ("total-data-files", "added-data-files"),
    ("total-delete-files", "added-delete-files"),
    ("total-records", "added-records"),
    ("total-files-size", "added-files-size"),
    ("total-position-deletes", "added-position-deletes"),
    ("total-equality-deletes", "added-equality-deletes"),
];

/// Deletes the rows at `deletes` (data file path as the table's manifests spell it, 0-based row
/// position in that file) from `default.<table>`, in one new snapshot on `main`.
pub async fn commit_position_deletes(
    catalog: &SqlCatalog,
    table: &str,
    deletes: &[(&str, i64)],
) -> Result<(), BoxError> {
    // The delete file: rows sorted by (file_path, pos), columns identified by their field ids.
    let mut rows = deletes.to_vec();
    rows.sort();
    let schema = Arc::new(Schema::new(vec![
        column("file_path", DataType::Utf8, FILE_PATH_FIELD_ID),
        column("pos", DataType::Int64, POS_FIELD_ID),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
        ],
    )?;
    commit_delete_file(
        catalog,
        table,
        batch,
        DataContentType::PositionDeletes,
        None,
    )
    .await
}

/// Deletes the rows of `default.<table>` whose bigint column `name` equals one of `values`, as an
/// unpartitioned equality delete file (Flink's and Spark's streaming writers make them): it applies
/// to every data file written before it.
pub async fn commit_equality_deletes(
    catalog: &SqlCatalog,
    table: &str,
    name: &str,
    values: &[i64],
) -> Result<(), BoxError> {
    let ident = TableIdent::from_strs(["default", table])?;
    let loaded = catalog.load_table(&ident).await?;
    let field = loaded
        .metadata()
        .current_schema()
        .field_by_name(name)
        .ok_or("no such column")?
        .clone();
    let schema = Arc::new(Schema::new(vec![column(
        name,
        DataType::Int64,
        &field.id.to_string(),
    )]));
    let batch = RecordBatch::try_new(
        schema,
        vec![Arc::new(Int64Array::from_iter_values(
            values.iter().copied(),
        ))],
    )?;
    commit_delete_file(
        catalog,
        table,
        batch,
        DataContentType::EqualityDeletes,
        Some(vec![field.id]),
    )
    .await
}

/// A non-null column of a delete file, identified by its field id.
fn column(name: &str, data_type: DataType, id: &str) -> Field {
    Field::new(name, data_type, false).with_metadata(HashMap::from([(
        PARQUET_FIELD_ID_META_KEY.to_string(),
        id.to_string(),
    )]))
}

/// Writes `batch` as a delete file of `content` in `default.<table>`'s data directory and commits
/// it, in a delete manifest of its own, as one new `delete` snapshot on `main`.
async fn commit_delete_file(
    catalog: &SqlCatalog,
    table: &str,
    batch: RecordBatch,
    content: DataContentType,
    equality_ids: Option<Vec<i32>>,
) -> Result<(), BoxError> {
    let ident = TableIdent::from_strs(["default", table])?;
    let table = catalog.load_table(&ident).await?;
    let metadata = table.metadata();
    let file_io = table.file_io();
    // v3 tables take deletion vectors and v3 manifests instead.
    if metadata.format_version() != FormatVersion::V2 {
        return Err("delete files are written for v2 tables only".into());
    }
    let parent = metadata
        .current_snapshot()
        .ok_or("deletes need a table with a snapshot")?;
    // Unique by construction, and readable in file names.
    let snapshot_id = metadata
        .snapshots()
        .map(|s| s.snapshot_id())
        .max()
        .unwrap_or(0)
        + 1;
    let sequence_number = metadata.next_sequence_number();
    let records = batch.num_rows() as u64;
    let mut parquet = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut parquet, batch.schema(), None)?;
    writer.write(&batch)?;
    writer.close()?;
    let delete_path = format!(
        "{}/data/other-engine-deletes-{snapshot_id}.parquet",
        metadata.location()
    );
    let delete_size = parquet.len() as u64;
    file_io
        .new_output(&delete_path)?
        .write(parquet.into())
        .await?;
    let mut builder = DataFileBuilder::default();
    builder
        .content(content)
        .file_path(delete_path)
        .file_format(DataFileFormat::Parquet)
        .record_count(records)
        .file_size_in_bytes(delete_size)
        .partition_spec_id(metadata.default_partition_spec_id());
    if let Some(ids) = equality_ids {
        builder.equality_ids(Some(ids));
    }
    let delete_file = builder.build()?;

    // The delete manifest, then a manifest list with every manifest of the parent snapshot too.
    let manifest_path = format!(
        "{}/metadata/position-deletes-{snapshot_id}-m0.avro",
        metadata.location()
    );
    let mut manifest = ManifestWriterBuilder::new(
        file_io.new_output(&manifest_path)?,
        Some(snapshot_id),
        metadata.current_schema().clone(),
        metadata.default_partition_spec().as_ref().clone(),
    )
    .build_v2_deletes();
    manifest.add_file(delete_file.clone(), sequence_number)?;
    let manifest = manifest.write_manifest_file().await?;
    let manifests = table.manifest_list_reader(parent).load().await?;
    let list_path = format!("{}/metadata/snap-{snapshot_id}.avro", metadata.location());
    let mut list = ManifestListWriter::v2(
        file_io.new_output(&list_path)?.writer().await?,
        snapshot_id,
        Some(parent.snapshot_id()),
        sequence_number,
    );
    list.add_manifests(manifests.consume_entries().into_iter().chain([manifest]))?;
    list.close().await?;

    let mut collector = SnapshotSummaryCollector::default();
    collector.add_file(
        &delete_file,
        metadata.current_schema().clone(),
        metadata.default_partition_spec().clone(),
    );
    let mut summary = collector.build();
    let number = |props: &HashMap<String, String>, key: &str| {
        props.get(key).and_then(|v| v.parse::<u64>().ok())
    };
    for (total, added) in TOTALS {
        if let Some(before) = number(&parent.summary().additional_properties, total) {
            let after = before + number(&summary, added).unwrap_or(0);
            summary.insert(total.to_string(), after.to_string());
        }
    }
    let snapshot = Snapshot::builder()
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(Some(parent.snapshot_id()))
        .with_sequence_number(sequence_number)
        .with_timestamp_ms(now_ms())
        .with_manifest_list(list_path)
        .with_summary(Summary {
            operation: Operation::Delete,
            additional_properties: summary,
        })
        .with_schema_id(metadata.current_schema_id())
        .build();

    // What `Catalog::update_table` applies; its `TableCommit` cannot be built outside iceberg.
    let requirements = vec![
        TableRequirement::UuidMatch {
            uuid: metadata.uuid(),
        },
        TableRequirement::RefSnapshotIdMatch {
            r#ref: MAIN_BRANCH.to_string(),
            snapshot_id: Some(parent.snapshot_id()),
        },
    ];
    let updates = vec![
        TableUpdate::AddSnapshot { snapshot },
        TableUpdate::SetSnapshotRef {
            ref_name: MAIN_BRANCH.to_string(),
            reference: SnapshotReference::new(
                snapshot_id,
                SnapshotRetention::branch(None, None, None),
            ),
        },
    ];
    catalog.commit(&ident, requirements, updates).await?;
    Ok(())
}

/// Milliseconds since the Unix epoch, the unit of snapshot timestamps.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

//! Iceberg metadata tables, with Trino's names and columns: `$snapshots`, `$history`, `$refs`,
//! `$properties`, `$manifests`, `$files`, `$partitions`. Each is built from the table's metadata (and,
//! for the last three, its current manifests) when the query names it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array,
    Float64Array, Int32Array, Int64Array, MapBuilder, RecordBatch, StringArray, StringBuilder,
    StructArray, Time64MicrosecondArray, TimestampMicrosecondArray, TimestampMillisecondArray,
    TimestampNanosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::TableProvider;
use datafusion::datasource::MemTable;
use iceberg::spec::{
    DataContentType, Datum, Literal, PrimitiveLiteral, PrimitiveType, StructType, Type,
};
use iceberg::table::Table;
use iceberg::{Error, ErrorKind, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataTable {
    Snapshots,
    History,
    Refs,
    Properties,
    Manifests,
    Files,
    Partitions,
}

impl MetadataTable {
    pub const NAMES: [&'static str; 7] = [
        "snapshots",
        "history",
        "refs",
        "properties",
        "manifests",
        "files",
        "partitions",
    ];

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name.to_ascii_lowercase().as_str() {
            "snapshots" => Self::Snapshots,
            "history" => Self::History,
            "refs" => Self::Refs,
            "properties" => Self::Properties,
            "manifests" => Self::Manifests,
            "files" => Self::Files,
            "partitions" => Self::Partitions,
            _ => return None,
        })
    }
}

fn arrow_err(e: datafusion::arrow::error::ArrowError) -> Error {
    Error::new(
        ErrorKind::Unexpected,
        format!("building metadata table: {e}"),
    )
}

fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

fn batch(fields: Vec<Field>, columns: Vec<ArrayRef>) -> Result<(SchemaRef, RecordBatch)> {
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(arrow_err)?;
    Ok((schema, batch))
}

fn string_map(rows: &[BTreeMap<String, String>]) -> Result<ArrayRef> {
    let mut b = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for row in rows {
        for (k, v) in row {
            b.keys().append_value(k);
            b.values().append_value(v);
        }
        b.append(true).map_err(arrow_err)?;
    }
    Ok(Arc::new(b.finish()))
}

fn snapshots(table: &Table) -> Result<(SchemaRef, RecordBatch)> {
    let mut snaps: Vec<_> = table.metadata().snapshots().collect();
    snaps.sort_by_key(|s| (s.timestamp_ms(), s.sequence_number()));
    let summaries: Vec<BTreeMap<String, String>> = snaps
        .iter()
        .map(|s| {
            s.summary()
                .additional_properties
                .clone()
                .into_iter()
                .collect()
        })
        .collect();
    let summary_array = string_map(&summaries)?;
    batch(
        vec![
            Field::new("committed_at", ts_type(), false),
            Field::new("snapshot_id", DataType::Int64, false),
            Field::new("parent_id", DataType::Int64, true),
            Field::new("operation", DataType::Utf8, true),
            Field::new("manifest_list", DataType::Utf8, true),
            Field::new("summary", summary_array.data_type().clone(), true),
        ],
        vec![
            Arc::new(
                TimestampMillisecondArray::from(
                    snaps.iter().map(|s| s.timestamp_ms()).collect::<Vec<_>>(),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(Int64Array::from(
                snaps.iter().map(|s| s.snapshot_id()).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                snaps
                    .iter()
                    .map(|s| s.parent_snapshot_id())
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                snaps
                    .iter()
                    .map(|s| Some(s.summary().operation.as_str().to_string()))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                snaps
                    .iter()
                    .map(|s| Some(s.manifest_list().to_string()))
                    .collect::<Vec<_>>(),
            )),
            summary_array,
        ],
    )
}

fn history(table: &Table) -> Result<(SchemaRef, RecordBatch)> {
    let metadata = table.metadata();
    // Ancestors of the current snapshot: walk parent links from it.
    let mut ancestors = HashSet::new();
    let mut cursor = metadata.current_snapshot_id();
    while let Some(id) = cursor {
        if !ancestors.insert(id) {
            break;
        }
        cursor = metadata
            .snapshot_by_id(id)
            .and_then(|s| s.parent_snapshot_id());
    }
    let log = metadata.history();
    batch(
        vec![
            Field::new("made_current_at", ts_type(), false),
            Field::new("snapshot_id", DataType::Int64, false),
            Field::new("parent_id", DataType::Int64, true),
            Field::new("is_current_ancestor", DataType::Boolean, false),
        ],
        vec![
            Arc::new(
                TimestampMillisecondArray::from(
                    log.iter().map(|l| l.timestamp_ms).collect::<Vec<_>>(),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(Int64Array::from(
                log.iter().map(|l| l.snapshot_id).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                log.iter()
                    .map(|l| {
                        metadata
                            .snapshot_by_id(l.snapshot_id)
                            .and_then(|s| s.parent_snapshot_id())
                    })
                    .collect::<Vec<_>>(),
            )),
            Arc::new(BooleanArray::from(
                log.iter()
                    .map(|l| ancestors.contains(&l.snapshot_id))
                    .collect::<Vec<_>>(),
            )),
        ],
    )
}

fn refs(table: &Table) -> Result<(SchemaRef, RecordBatch)> {
    // iceberg-rust keeps `refs` private; its serialized form is the spec's, so read it from there.
    let json = serde_json::to_value(table.metadata())
        .map_err(|e| Error::new(ErrorKind::Unexpected, format!("serializing metadata: {e}")))?;
    let mut rows: Vec<(String, &serde_json::Value)> = json
        .get("refs")
        .and_then(|r| r.as_object())
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v)).collect())
        .unwrap_or_default();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let int = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_i64());
    batch(
        vec![
            Field::new("name", DataType::Utf8, false),
            Field::new("type", DataType::Utf8, false),
            Field::new("snapshot_id", DataType::Int64, false),
            Field::new("max_reference_age_in_ms", DataType::Int64, true),
            Field::new("min_snapshots_to_keep", DataType::Int32, true),
            Field::new("max_snapshot_age_in_ms", DataType::Int64, true),
        ],
        vec![
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.0.clone()).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                rows.iter()
                    .map(|r| {
                        r.1.get("type")
                            .and_then(|t| t.as_str())
                            .unwrap_or("branch")
                            .to_uppercase()
                    })
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                rows.iter()
                    .map(|r| int(r.1, "snapshot-id").unwrap_or(0))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                rows.iter()
                    .map(|r| int(r.1, "max-ref-age-ms"))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Int32Array::from(
                rows.iter()
                    .map(|r| int(r.1, "min-snapshots-to-keep").and_then(|v| i32::try_from(v).ok()))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                rows.iter()
                    .map(|r| int(r.1, "max-snapshot-age-ms"))
                    .collect::<Vec<_>>(),
            )),
        ],
    )
}

fn properties(table: &Table) -> Result<(SchemaRef, RecordBatch)> {
    let props: BTreeMap<_, _> = table.metadata().properties().iter().collect();
    batch(
        vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Utf8, false),
        ],
        vec![
            Arc::new(StringArray::from(
                props.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                props.values().map(|v| v.as_str()).collect::<Vec<_>>(),
            )),
        ],
    )
}

async fn manifests(table: &Table) -> Result<(SchemaRef, RecordBatch)> {
    let list = match table.metadata().current_snapshot() {
        Some(s) => table
            .manifest_list_reader(s)
            .load()
            .await?
            .entries()
            .to_vec(),
        None => Vec::new(),
    };
    let u32s = |f: fn(&iceberg::spec::ManifestFile) -> Option<u32>| {
        Arc::new(Int32Array::from(
            list.iter()
                .map(|m| f(m).map(|v| v as i32))
                .collect::<Vec<_>>(),
        )) as ArrayRef
    };
    let u64s = |f: fn(&iceberg::spec::ManifestFile) -> Option<u64>| {
        Arc::new(Int64Array::from(
            list.iter()
                .map(|m| f(m).map(|v| v as i64))
                .collect::<Vec<_>>(),
        )) as ArrayRef
    };
    batch(
        vec![
            Field::new("path", DataType::Utf8, false),
            Field::new("length", DataType::Int64, false),
            Field::new("partition_spec_id", DataType::Int32, false),
            Field::new("added_snapshot_id", DataType::Int64, false),
            Field::new("added_data_files_count", DataType::Int32, true),
            Field::new("added_rows_count", DataType::Int64, true),
            Field::new("existing_data_files_count", DataType::Int32, true),
            Field::new("existing_rows_count", DataType::Int64, true),
            Field::new("deleted_data_files_count", DataType::Int32, true),
            Field::new("deleted_rows_count", DataType::Int64, true),
        ],
        vec![
            Arc::new(StringArray::from(
                list.iter()
                    .map(|m| m.manifest_path.clone())
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                list.iter().map(|m| m.manifest_length).collect::<Vec<_>>(),
            )),
            Arc::new(Int32Array::from(
                list.iter().map(|m| m.partition_spec_id).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                list.iter().map(|m| m.added_snapshot_id).collect::<Vec<_>>(),
            )),
            u32s(|m| m.added_files_count),
            u64s(|m| m.added_rows_count),
            u32s(|m| m.existing_files_count),
            u64s(|m| m.existing_rows_count),
            u32s(|m| m.deleted_files_count),
            u64s(|m| m.deleted_rows_count),
        ],
    )
}

/// One live file of the current snapshot.
struct LiveFile {
    content: i32,
    path: String,
    format: String,
    spec_id: i32,
    partition: String,
    records: i64,
    size: i64,
}

fn render_literal(value: Option<&Literal>, ty: &Type) -> String {
    let Some(Literal::Primitive(p)) = value else {
        return "null".to_string();
    };
    match (p, ty) {
        (PrimitiveLiteral::Int(days), Type::Primitive(PrimitiveType::Date)) => {
            chrono::DateTime::from_timestamp(i64::from(*days) * 86_400, 0)
                .map(|d| d.date_naive().to_string())
                .unwrap_or_else(|| days.to_string())
        }
        (PrimitiveLiteral::Boolean(v), _) => v.to_string(),
        (PrimitiveLiteral::Int(v), _) => v.to_string(),
        (PrimitiveLiteral::Long(v), _) => v.to_string(),
        (PrimitiveLiteral::Float(v), _) => v.to_string(),
        (PrimitiveLiteral::Double(v), _) => v.to_string(),
        (PrimitiveLiteral::String(v), _) => v.clone(),
        (PrimitiveLiteral::Int128(v), _) => v.to_string(),
        (other, _) => format!("{other:?}"),
    }
}

fn render_partition(partition: &iceberg::spec::Struct, ty: &StructType) -> String {
    let parts: Vec<String> = ty
        .fields()
        .iter()
        .zip(partition.iter())
        .map(|(f, v)| format!("{}={}", f.name, render_literal(v, &f.field_type)))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

async fn live_files(table: &Table) -> Result<Vec<LiveFile>> {
    let Some(snapshot) = table.metadata().current_snapshot() else {
        return Ok(Vec::new());
    };
    let schema = table.metadata().current_schema();
    let list = table.manifest_list_reader(snapshot).load().await?;
    let mut files = Vec::new();
    for manifest_file in list.entries() {
        let spec_id = manifest_file.partition_spec_id;
        let partition_type = match table.metadata().partition_spec_by_id(spec_id) {
            Some(spec) => spec.partition_type(schema)?,
            None => StructType::new(Vec::new()),
        };
        let manifest = manifest_file.load_manifest(table.file_io()).await?;
        for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
            let f = entry.data_file();
            files.push(LiveFile {
                content: match f.content_type() {
                    DataContentType::Data => 0,
                    DataContentType::PositionDeletes => 1,
                    DataContentType::EqualityDeletes => 2,
                },
                path: f.file_path().to_string(),
                format: format!("{:?}", f.file_format()).to_uppercase(),
                spec_id,
                partition: render_partition(f.partition(), &partition_type),
                records: f.record_count() as i64,
                size: f.file_size_in_bytes() as i64,
            });
        }
    }
    Ok(files)
}

/// A live data file's partition (as a grouping key and by field name) and column statistics.
struct DataFileStats {
    key: String,
    values: BTreeMap<String, Option<PrimitiveLiteral>>,
    records: i64,
    size: i64,
    lower: HashMap<i32, Datum>,
    upper: HashMap<i32, Datum>,
    nulls: HashMap<i32, u64>,
    nans: HashMap<i32, u64>,
}

async fn live_data_files(table: &Table) -> Result<Vec<DataFileStats>> {
    let Some(snapshot) = table.metadata().current_snapshot() else {
        return Ok(Vec::new());
    };
    let schema = table.metadata().current_schema();
    let list = table.manifest_list_reader(snapshot).load().await?;
    let mut files = Vec::new();
    for manifest_file in list.entries() {
        let partition_type = match table
            .metadata()
            .partition_spec_by_id(manifest_file.partition_spec_id)
        {
            Some(spec) => spec.partition_type(schema)?,
            None => StructType::new(Vec::new()),
        };
        let manifest = manifest_file.load_manifest(table.file_io()).await?;
        for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
            let f = entry.data_file();
            if f.content_type() != DataContentType::Data {
                continue;
            }
            let values = partition_type
                .fields()
                .iter()
                .zip(f.partition().iter())
                .map(|(field, v)| {
                    let value = match v {
                        Some(Literal::Primitive(p)) => Some(p.clone()),
                        _ => None,
                    };
                    (field.name.clone(), value)
                })
                .collect();
            files.push(DataFileStats {
                key: render_partition(f.partition(), &partition_type),
                values,
                records: f.record_count() as i64,
                size: f.file_size_in_bytes() as i64,
                lower: f.lower_bounds().clone(),
                upper: f.upper_bounds().clone(),
                nulls: f.null_value_counts().clone(),
                nans: f.nan_value_counts().clone(),
            });
        }
    }
    Ok(files)
}

async fn files(table: &Table) -> Result<(SchemaRef, RecordBatch)> {
    let files = live_files(table).await?;
    batch(
        vec![
            Field::new("content", DataType::Int32, false),
            Field::new("file_path", DataType::Utf8, false),
            Field::new("file_format", DataType::Utf8, false),
            Field::new("spec_id", DataType::Int32, false),
            Field::new("partition", DataType::Utf8, false),
            Field::new("record_count", DataType::Int64, false),
            Field::new("file_size_in_bytes", DataType::Int64, false),
        ],
        vec![
            Arc::new(Int32Array::from(
                files.iter().map(|f| f.content).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                files.iter().map(|f| f.path.clone()).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                files.iter().map(|f| f.format.clone()).collect::<Vec<_>>(),
            )),
            Arc::new(Int32Array::from(
                files.iter().map(|f| f.spec_id).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                files
                    .iter()
                    .map(|f| f.partition.clone())
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                files.iter().map(|f| f.records).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                files.iter().map(|f| f.size).collect::<Vec<_>>(),
            )),
        ],
    )
}

/// One partition's totals, and per column (by field id) the bounds and counts of its files.
#[derive(Default)]
struct PartitionTotals {
    values: Vec<Option<PrimitiveLiteral>>,
    records: i64,
    files: i64,
    size: i64,
    columns: BTreeMap<i32, ColumnTotals>,
}

struct ColumnTotals {
    min: Option<Datum>,
    max: Option<Datum>,
    /// None once a file does not report the count.
    nulls: Option<i64>,
    nans: Option<i64>,
}

fn sum(total: Option<i64>, file: Option<&u64>) -> Option<i64> {
    Some(total? + i64::try_from(*file?).ok()?)
}

/// Trino's `$partitions`: `partition row(...)` (partitioned tables only), `record_count`,
/// `file_count`, `total_size`, and `data row(<column> row(min, max, null_count, nan_count))` for
/// each top-level primitive column, from the live data files' statistics.
async fn partitions(table: &Table) -> Result<(SchemaRef, RecordBatch)> {
    let metadata = table.metadata();
    let schema = metadata.current_schema();
    let partition_type = metadata.default_partition_spec().partition_type(schema)?;
    let columns: Vec<(i32, String, PrimitiveType)> = schema
        .as_struct()
        .fields()
        .iter()
        .filter_map(|f| match &*f.field_type {
            Type::Primitive(p) => Some((f.id, f.name.clone(), p.clone())),
            _ => None,
        })
        .collect();
    let mut groups: BTreeMap<String, PartitionTotals> = BTreeMap::new();
    for f in live_data_files(table).await? {
        let g = groups.entry(f.key).or_default();
        if g.files == 0 {
            g.values = partition_type
                .fields()
                .iter()
                .map(|field| f.values.get(&field.name).cloned().flatten())
                .collect();
        }
        g.records += f.records;
        g.files += 1;
        g.size += f.size;
        for (id, _, _) in &columns {
            let c = g.columns.entry(*id).or_insert(ColumnTotals {
                min: None,
                max: None,
                nulls: Some(0),
                nans: Some(0),
            });
            if let Some(lower) = f.lower.get(id)
                && c.min.as_ref().is_none_or(|m| lower < m)
            {
                c.min = Some(lower.clone());
            }
            if let Some(upper) = f.upper.get(id)
                && c.max.as_ref().is_none_or(|m| upper > m)
            {
                c.max = Some(upper.clone());
            }
            c.nulls = sum(c.nulls, f.nulls.get(id));
            c.nans = sum(c.nans, f.nans.get(id));
        }
    }
    let groups: Vec<PartitionTotals> = groups.into_values().collect();

    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    if !partition_type.fields().is_empty() {
        let mut members = Vec::new();
        for (i, pf) in partition_type.fields().iter().enumerate() {
            let Type::Primitive(p) = &*pf.field_type else {
                continue;
            };
            let values: Vec<Option<PrimitiveLiteral>> =
                groups.iter().map(|g| g.values[i].clone()).collect();
            let array = primitive_array(p, &values)?;
            members.push((
                Arc::new(Field::new(&pf.name, array.data_type().clone(), true)),
                array,
            ));
        }
        let partition = StructArray::from(members);
        fields.push(Field::new(
            "partition",
            partition.data_type().clone(),
            false,
        ));
        arrays.push(Arc::new(partition));
    }
    for (name, pick) in [
        (
            "record_count",
            (|g: &PartitionTotals| g.records) as fn(&PartitionTotals) -> i64,
        ),
        ("file_count", |g| g.files),
        ("total_size", |g| g.size),
    ] {
        fields.push(Field::new(name, DataType::Int64, false));
        arrays.push(Arc::new(Int64Array::from(
            groups.iter().map(pick).collect::<Vec<_>>(),
        )));
    }
    let mut data_members = Vec::new();
    for (id, name, ty) in &columns {
        let totals: Vec<Option<&ColumnTotals>> = groups.iter().map(|g| g.columns.get(id)).collect();
        let literal = |d: &Option<Datum>| d.as_ref().map(|d| d.literal().clone());
        let min = primitive_array(
            ty,
            &totals
                .iter()
                .map(|t| t.and_then(|t| literal(&t.min)))
                .collect::<Vec<_>>(),
        )?;
        let max = primitive_array(
            ty,
            &totals
                .iter()
                .map(|t| t.and_then(|t| literal(&t.max)))
                .collect::<Vec<_>>(),
        )?;
        let nulls: ArrayRef = Arc::new(Int64Array::from(
            totals
                .iter()
                .map(|t| t.and_then(|t| t.nulls))
                .collect::<Vec<_>>(),
        ));
        let nans: ArrayRef = Arc::new(Int64Array::from(
            totals
                .iter()
                .map(|t| t.and_then(|t| t.nans))
                .collect::<Vec<_>>(),
        ));
        let column = StructArray::from(vec![
            (
                Arc::new(Field::new("min", min.data_type().clone(), true)),
                min,
            ),
            (
                Arc::new(Field::new("max", max.data_type().clone(), true)),
                max,
            ),
            (
                Arc::new(Field::new("null_count", DataType::Int64, true)),
                nulls,
            ),
            (
                Arc::new(Field::new("nan_count", DataType::Int64, true)),
                nans,
            ),
        ]);
        data_members.push((
            Arc::new(Field::new(name, column.data_type().clone(), true)),
            Arc::new(column) as ArrayRef,
        ));
    }
    let data = if data_members.is_empty() {
        StructArray::new_empty_fields(groups.len(), None)
    } else {
        StructArray::from(data_members)
    };
    fields.push(Field::new("data", data.data_type().clone(), false));
    arrays.push(Arc::new(data));
    batch(fields, arrays)
}

/// Values of one Iceberg primitive type as an Arrow array of the matching type.
fn primitive_array(ty: &PrimitiveType, values: &[Option<PrimitiveLiteral>]) -> Result<ArrayRef> {
    use PrimitiveLiteral as L;
    macro_rules! collect {
        ($array:ty, $pattern:pat => $value:expr) => {
            Arc::new(<$array>::from(
                values
                    .iter()
                    .map(|v| match v {
                        Some($pattern) => Some($value),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            )) as ArrayRef
        };
    }
    let longs = || {
        values
            .iter()
            .map(|v| match v {
                Some(L::Long(t)) => Some(*t),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    Ok(match ty {
        PrimitiveType::Boolean => collect!(BooleanArray, L::Boolean(b) => *b),
        PrimitiveType::Int => collect!(Int32Array, L::Int(i) => *i),
        PrimitiveType::Long => collect!(Int64Array, L::Long(i) => *i),
        PrimitiveType::Float => collect!(Float32Array, L::Float(f) => f.0),
        PrimitiveType::Double => collect!(Float64Array, L::Double(f) => f.0),
        PrimitiveType::Date => collect!(Date32Array, L::Int(d) => *d),
        PrimitiveType::Time => collect!(Time64MicrosecondArray, L::Long(t) => *t),
        PrimitiveType::Timestamp => collect!(TimestampMicrosecondArray, L::Long(t) => *t),
        PrimitiveType::Timestamptz => {
            Arc::new(TimestampMicrosecondArray::from(longs()).with_timezone("UTC"))
        }
        PrimitiveType::TimestampNs => collect!(TimestampNanosecondArray, L::Long(t) => *t),
        PrimitiveType::TimestamptzNs => {
            Arc::new(TimestampNanosecondArray::from(longs()).with_timezone("UTC"))
        }
        PrimitiveType::String => collect!(StringArray, L::String(s) => s.as_str()),
        PrimitiveType::Uuid => {
            collect!(StringArray, L::UInt128(u) => uuid::Uuid::from_u128(*u).to_string())
        }
        PrimitiveType::Decimal { precision, scale } => {
            let a = values
                .iter()
                .map(|v| match v {
                    Some(L::Int128(d)) => Some(*d),
                    _ => None,
                })
                .collect::<Decimal128Array>()
                .with_precision_and_scale(*precision as u8, *scale as i8)
                .map_err(arrow_err)?;
            Arc::new(a)
        }
        PrimitiveType::Fixed(_) | PrimitiveType::Binary => {
            collect!(BinaryArray, L::Binary(b) => b.as_slice())
        }
    })
}

pub async fn metadata_table_provider(
    table: &Table,
    kind: MetadataTable,
) -> Result<Arc<dyn TableProvider>> {
    let (schema, batch) = match kind {
        MetadataTable::Snapshots => snapshots(table)?,
        MetadataTable::History => history(table)?,
        MetadataTable::Refs => refs(table)?,
        MetadataTable::Properties => properties(table)?,
        MetadataTable::Manifests => manifests(table).await?,
        MetadataTable::Files => files(table).await?,
        MetadataTable::Partitions => partitions(table).await?,
    };
    let mem = MemTable::try_new(schema, vec![vec![batch]])
        .map_err(|e| Error::new(ErrorKind::Unexpected, format!("metadata table: {e}")))?;
    Ok(Arc::new(mem))
}

//! Column statistics for DataFusion's planner from the Iceberg manifests: each column's lowest lower
//! bound, highest upper bound and null count over the files a scan reads. With only row counts,
//! DataFusion takes every join key to be distinct and estimates a fact table joined to a 5-row
//! dimension at 5 rows; a key's range caps that estimate.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, ScalarValue};
use iceberg::spec::{
    DataContentType, DataFile, Datum, Manifest, ManifestFile, ManifestList, PrimitiveLiteral,
    PrimitiveType, SnapshotRef,
};
use iceberg::table::Table;

/// Manifest lists and manifests a catalog has read, by path, so that planning a scan does not
/// parse them again (a manifest's Avro schema alone took a millisecond to parse). Iceberg never
/// rewrites a metadata file: a path names the same contents for good. A catalog keeps one for the
/// tables every session reaches the same way; a scan reads only what its table's own metadata,
/// loaded by the caller, names. At most [`HELD_ENTRIES`] data-file entries are held; past that
/// the cache starts over.
#[derive(Default)]
pub struct ManifestCache {
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    lists: HashMap<String, Arc<ManifestList>>,
    manifests: HashMap<String, Arc<Manifest>>,
    entries: usize,
}

const HELD_ENTRIES: usize = 200_000;

/// Counts only: the paths and bounds are the tables' own.
impl fmt::Debug for ManifestCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held = self.held();
        f.debug_struct("ManifestCache")
            .field("lists", &held.lists.len())
            .field("manifests", &held.manifests.len())
            .finish()
    }
}

impl ManifestCache {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) async fn list(
        &self,
        table: &Table,
        snapshot: &SnapshotRef,
    ) -> iceberg::Result<Arc<ManifestList>> {
        let path = snapshot.manifest_list();
        if let Some(list) = self.held().lists.get(path) {
            return Ok(list.clone());
        }
        let list = Arc::new(table.manifest_list_reader(snapshot).load().await?);
        let mut held = self.held();
        if let Some(read) = held.lists.get(path) {
            return Ok(read.clone()); // read meanwhile by another scan
        }
        held.make_room(list.entries().len());
        held.lists.insert(path.to_string(), list.clone());
        Ok(list)
    }

    pub(crate) async fn manifest(
        &self,
        table: &Table,
        file: &ManifestFile,
    ) -> iceberg::Result<Arc<Manifest>> {
        if let Some(manifest) = self.held().manifests.get(&file.manifest_path) {
            return Ok(manifest.clone());
        }
        let manifest = Arc::new(file.load_manifest(table.file_io()).await?);
        let mut held = self.held();
        if let Some(read) = held.manifests.get(&file.manifest_path) {
            return Ok(read.clone());
        }
        held.make_room(manifest.entries().len());
        held.manifests
            .insert(file.manifest_path.clone(), manifest.clone());
        Ok(manifest)
    }
}

impl Held {
    fn make_room(&mut self, entries: usize) {
        if self.entries + entries > HELD_ENTRIES {
            *self = Held::default();
        }
        self.entries += entries;
    }
}

/// Statistics of the columns of `schema` (field ids in `ids`) over the data files at `paths` in
/// `snapshot_id` (the current snapshot if None), reading the manifests through `cache` if there
/// is one. Bounds and counts are estimates: Iceberg may truncate a string's bounds, and delete
/// files and filters remove rows.
pub(crate) async fn from_manifests(
    cache: Option<&ManifestCache>,
    table: &Table,
    snapshot_id: Option<i64>,
    schema: &Schema,
    ids: &HashMap<String, i32>,
    paths: &HashSet<&str>,
) -> iceberg::Result<Vec<ColumnStatistics>> {
    let metadata = table.metadata();
    let snapshot = match snapshot_id {
        Some(id) => metadata.snapshot_by_id(id),
        None => metadata.current_snapshot(),
    };
    let Some(snapshot) = snapshot else {
        return Ok(vec![ColumnStatistics::new_unknown(); schema.fields().len()]);
    };
    let list = match cache {
        Some(cache) => cache.list(table, snapshot).await?,
        None => Arc::new(table.manifest_list_reader(snapshot).load().await?),
    };
    let mut manifests = Vec::new();
    for manifest_file in list.entries() {
        manifests.push(match cache {
            Some(cache) => cache.manifest(table, manifest_file).await?,
            None => Arc::new(manifest_file.load_manifest(table.file_io()).await?),
        });
    }
    let files = manifests
        .iter()
        .flat_map(|m| m.entries())
        .filter(|e| e.is_alive())
        .map(|e| e.data_file())
        .filter(|f| f.content_type() == DataContentType::Data && paths.contains(f.file_path()));
    Ok(from_files(schema, ids, files))
}

/// Statistics of the columns of `schema` (field ids in `ids`) over the data `files`.
pub(crate) fn from_files<'a>(
    schema: &Schema,
    ids: &HashMap<String, i32>,
    files: impl IntoIterator<Item = &'a DataFile>,
) -> Vec<ColumnStatistics> {
    let mut columns: Vec<Column> = schema
        .fields()
        .iter()
        .map(|f| Column {
            id: ids.get(f.name()).copied(),
            min: None,
            max: None,
            nulls: Some(0),
            known: true,
        })
        .collect();
    let mut seen = 0;
    for file in files {
        seen += 1;
        for (column, field) in columns.iter_mut().zip(schema.fields()) {
            let Some(id) = column.id else { continue };
            column.add(
                bound(file.lower_bounds().get(&id), field),
                bound(file.upper_bounds().get(&id), field),
                file.null_value_counts().get(&id).copied(),
            );
        }
    }
    if seen == 0 {
        return vec![ColumnStatistics::new_unknown(); schema.fields().len()];
    }
    columns.into_iter().map(Column::statistics).collect()
}

/// A file's bound of a column as a scalar of the column's type `field` (strings as the views the
/// scans read), None where there is no bound or the types differ (a promoted column's older files).
pub(crate) fn bound(datum: Option<&Datum>, field: &Field) -> Option<ScalarValue> {
    datum
        .and_then(scalar)
        .map(|s| match (s, field.data_type()) {
            (ScalarValue::Utf8(v), DataType::Utf8View) => ScalarValue::Utf8View(v),
            (s, _) => s,
        })
        .filter(|s| s.data_type() == *field.data_type())
}

/// One column's statistics as they are gathered: `known` until a file lacks a bound.
struct Column {
    id: Option<i32>,
    min: Option<ScalarValue>,
    max: Option<ScalarValue>,
    nulls: Option<u64>,
    known: bool,
}

impl Column {
    fn add(&mut self, lower: Option<ScalarValue>, upper: Option<ScalarValue>, nulls: Option<u64>) {
        match (lower, upper) {
            (Some(lower), Some(upper)) if self.known => {
                if self.min.as_ref().is_none_or(|m| lower < *m) {
                    self.min = Some(lower);
                }
                if self.max.as_ref().is_none_or(|m| upper > *m) {
                    self.max = Some(upper);
                }
            }
            _ => self.known = false,
        }
        self.nulls = self.nulls.zip(nulls).map(|(a, b)| a + b);
    }

    fn statistics(self) -> ColumnStatistics {
        let mut stats = ColumnStatistics::new_unknown();
        if self.known
            && let (Some(min), Some(max)) = (self.min, self.max)
        {
            stats.min_value = Precision::Inexact(min);
            stats.max_value = Precision::Inexact(max);
        }
        if let Some(nulls) = self.nulls.and_then(|n| usize::try_from(n).ok())
            && self.id.is_some()
        {
            stats.null_count = Precision::Inexact(nulls);
        }
        stats
    }
}

/// An Iceberg bound as the scalar of the column's Arrow type (None for types not mapped here).
fn scalar(datum: &Datum) -> Option<ScalarValue> {
    scalar_of(datum.data_type(), datum.literal())
}

/// A value of Iceberg type `t` as the scalar of the column's Arrow type (None for types not
/// mapped here, and for NaN, which orders nothing).
pub(crate) fn scalar_of(t: &PrimitiveType, v: &PrimitiveLiteral) -> Option<ScalarValue> {
    Some(match (t, v) {
        (PrimitiveType::Boolean, PrimitiveLiteral::Boolean(b)) => ScalarValue::Boolean(Some(*b)),
        (PrimitiveType::Int, PrimitiveLiteral::Int(v)) => ScalarValue::Int32(Some(*v)),
        (PrimitiveType::Date, PrimitiveLiteral::Int(v)) => ScalarValue::Date32(Some(*v)),
        (PrimitiveType::Long, PrimitiveLiteral::Long(v)) => ScalarValue::Int64(Some(*v)),
        (PrimitiveType::Float, PrimitiveLiteral::Float(v)) => ScalarValue::Float32(Some(v.0)),
        (PrimitiveType::Double, PrimitiveLiteral::Double(v)) => ScalarValue::Float64(Some(v.0)),
        (PrimitiveType::String, PrimitiveLiteral::String(s)) => ScalarValue::Utf8(Some(s.clone())),
        (PrimitiveType::Decimal { precision, scale }, PrimitiveLiteral::Int128(v)) => {
            ScalarValue::Decimal128(
                Some(*v),
                u8::try_from(*precision).ok()?,
                i8::try_from(*scale).ok()?,
            )
        }
        (PrimitiveType::Timestamp, PrimitiveLiteral::Long(v)) => {
            ScalarValue::TimestampMicrosecond(Some(*v), None)
        }
        (PrimitiveType::Timestamptz, PrimitiveLiteral::Long(v)) => {
            ScalarValue::TimestampMicrosecond(Some(*v), Some("+00:00".into()))
        }
        (PrimitiveType::Time, PrimitiveLiteral::Long(v)) => {
            ScalarValue::Time64Microsecond(Some(*v))
        }
        _ => return None,
    })
    // A NaN bound orders nothing.
    .filter(|s| match s {
        ScalarValue::Float32(Some(f)) => !f.is_nan(),
        ScalarValue::Float64(Some(f)) => !f.is_nan(),
        _ => true,
    })
}

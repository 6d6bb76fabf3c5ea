//! Reading planned Iceberg files with DataFusion's own Parquet reader: page-index and row-group
//! pruning, dynamic filters from joins and TopK, cached footers. It serves the scans it can read
//! exactly as Iceberg means them (see [`readable`]); iceberg-rust's reader serves the rest (files
//! with delete files). Local files are read directly; files in object stores through the
//! table's `FileIO` (see `file_io_store`), with the caller's credentials.
//!
//! Columns resolve by Iceberg field id, not by name: [`FieldIds`] rewrites every column a scan
//! touches (projection, pushed filters, pruning) to the file's own column with the same id, so a
//! renamed column reads its old data and a column added later reads as NULL. Inside a nested
//! column the same holds field by field ([`ById`]).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, LargeListArray, ListArray, MapArray, RecordBatch, StructArray,
    new_null_array,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{ScalarValue, Statistics};
use datafusion::config::TableParquetOptions;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::{
    CachedParquetFileReaderFactory, ParquetFileReaderFactory,
};
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::ColumnarValue;
use datafusion::object_store::ObjectStore;
use datafusion::object_store::path::Path as ObjectPath;
use datafusion::parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{Column, lit};
use datafusion::physical_expr_adapter::{
    DefaultPhysicalExprAdapter, PhysicalExprAdapter, PhysicalExprAdapterFactory,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::future::BoxFuture;
use iceberg::io::FileIO;
use iceberg::scan::FileScanTask;
use iceberg::spec::DataFileFormat;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData};

use super::file_io_store::FileIoStore;
use super::object_cache::ObjectCache;
use super::read_ahead::{Footers, ReadAhead};

/// Whether DataFusion's reader reads these tasks exactly as Iceberg means: Parquet files without
/// delete files, at a path it can open.
pub(crate) fn readable(tasks: &[FileScanTask]) -> bool {
    !tasks.is_empty()
        && tasks.iter().all(|t| {
            t.deletes.is_empty()
                && t.data_file_format == DataFileFormat::Parquet
                && (local_path(&t.data_file_path).is_some() || t.data_file_path.contains("://"))
        })
}

/// Whether `t` is a struct, list or map.
pub(crate) fn nested(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Struct(_)
            | DataType::List(_)
            | DataType::LargeList(_)
            | DataType::FixedSizeList(..)
            | DataType::Map(..)
    )
}

/// The local path of `location`: `/p`, `file:///p`, or Hadoop's `file:/p` (Hive Metastore's).
fn local_path(location: &str) -> Option<&str> {
    let path = location
        .strip_prefix("file://")
        .or_else(|| location.strip_prefix("file:"))
        .unwrap_or(location);
    path.starts_with('/').then_some(path)
}

/// The scan of `groups` (one per partition, each a list of byte ranges of files) of a table with
/// `schema` (field ids in `ids`), as a DataFusion `DataSourceExec`. Its partitions share the ranges
/// (DataFusion's `enable_file_stream_work_stealing`, on by default): a partition that runs out of
/// its own takes the next range left, so the groups are where each starts, not all it reads.
/// DataFusion may cut the ranges again where its own even split of the bytes falls, which only adds
/// a range or two.
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan(
    state: &dyn Session,
    file_io: &FileIO,
    schema: SchemaRef,
    ids: &HashMap<String, i32>,
    groups: Vec<Vec<FileScanTask>>,
    projection: Option<&Vec<usize>>,
    limit: Option<usize>,
    statistics: Statistics,
) -> DFResult<Arc<dyn ExecutionPlan>> {
    // DataFusion asks its runtime for the store of the scan's URL; the reader factory below holds
    // the store it actually reads with.
    let url = ObjectStoreUrl::local_filesystem();
    let all_local = groups
        .iter()
        .flatten()
        .all(|t| local_path(&t.data_file_path).is_some());
    let cache = state.config().get_extension::<ObjectCache>();
    let mut through_file_io = (!all_local).then(|| FileIoStore::new(file_io.clone(), cache));
    let groups = groups
        .iter()
        .map(|tasks| {
            tasks
                .iter()
                .map(|task| {
                    let path = match &mut through_file_io {
                        Some(store) => store.add(&task.data_file_path, task.file_size_in_bytes),
                        None => local_object_path(&task.data_file_path)?,
                    };
                    partitioned_file(task, path)
                })
                .collect::<DFResult<Vec<_>>>()
                .map(FileGroup::new)
        })
        .collect::<DFResult<Vec<_>>>()?;
    let through_file_io = through_file_io.map(Arc::new);
    let store: Arc<dyn ObjectStore> = match &through_file_io {
        Some(store) => store.clone(),
        None => state.runtime_env().object_store(&url)?,
    };
    let footers = state.runtime_env().cache_manager.get_file_metadata_cache();
    let options = TableParquetOptions {
        global: state.config_options().execution.parquet.clone(),
        ..Default::default()
    };
    // A file's footer and page index in one read from its end rather than three (the footer's
    // length, the footer, the index): `datafusion.execution.parquet.metadata_size_hint`, 512 KiB
    // by default, which DataFusion's own tables pass on and a source made by hand must be given.
    let hint = options.global.metadata_size_hint;
    let mut source = ParquetSource::new(schema)
        .with_table_parquet_options(options)
        .with_parquet_file_reader_factory(Arc::new(WithPageIndex {
            inner: CachedParquetFileReaderFactory::new(store, footers),
            verify: through_file_io,
            footers: Footers::default(),
        }));
    if let Some(hint) = hint {
        source = source.with_metadata_size_hint(hint);
    }
    let config = FileScanConfigBuilder::new(url, Arc::new(source))
        .with_projection_indices(projection.cloned())?
        .with_file_groups(groups)
        .with_limit(limit)
        .with_statistics(statistics)
        .with_expr_adapter(Some(Arc::new(FieldIds { ids: ids.clone() })))
        .build();
    Ok(DataSourceExec::from_data_source(config))
}

/// DataFusion's cached reader, asked for each file's page index together with its footer.
/// DataFusion 54.1 asks for the footer alone and then, where a filter could prune pages, reads and
/// parses the page index of every column again on each open of each byte range, without caching
/// it: 30% of the work of `count(*)` under a filter on TPC-H's `lineitem` (18 ranges). Asked for
/// both, the metadata cache keeps both, and later opens of the file find the index parsed.
///
/// A file in an object store is first verified by the scan's store (`verify`): the footer may come
/// from DataFusion's cache, which every session shares, and the caller's own credentials must reach
/// the file before anything cached of it is used.
#[derive(Debug)]
struct WithPageIndex {
    inner: CachedParquetFileReaderFactory,
    verify: Option<Arc<FileIoStore>>,
    /// The footers its readers read, for the readers that read ahead.
    footers: Footers,
}

impl ParquetFileReaderFactory for WithPageIndex {
    fn create_reader(
        &self,
        partition_index: usize,
        file: PartitionedFile,
        metadata_size_hint: Option<usize>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> DFResult<Box<dyn AsyncFileReader + Send>> {
        let verify = self
            .verify
            .as_ref()
            .map(|store| (store.clone(), file.object_meta.location.clone()));
        let read_ahead = verify.clone().map(|(store, path)| {
            let range = file.range.as_ref().map_or(0..u64::MAX, |r| {
                u64::try_from(r.start).unwrap_or(0)..u64::try_from(r.end).unwrap_or(u64::MAX)
            });
            ReadAhead::new(store, path, range, self.footers.clone())
        });
        let inner = self
            .inner
            .create_reader(partition_index, file, metadata_size_hint, metrics)?;
        Ok(Box::new(PageIndexReader {
            inner,
            options: ArrowReaderOptions::new(),
            verify,
            read_ahead,
        }))
    }
}

/// A reader that asks for the page index whenever it is asked for metadata.
struct PageIndexReader {
    inner: Box<dyn AsyncFileReader + Send>,
    /// The options of the last metadata request, with the page index asked for.
    options: ArrowReaderOptions,
    /// The scan's store and the file's path in it, for a file in an object store.
    verify: Option<(Arc<FileIoStore>, ObjectPath)>,
    /// The next row groups' chunks on their way, for a file in an object store.
    read_ahead: Option<ReadAhead>,
}

impl AsyncFileReader for PageIndexReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        self.inner.get_bytes(range)
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        let Self {
            inner, read_ahead, ..
        } = self;
        let Some(ahead) = read_ahead else {
            return inner.get_byte_ranges(ranges);
        };
        Box::pin(async move {
            match ahead.read(&ranges).await {
                Some(bytes) => Ok(bytes),
                None => inner.get_byte_ranges(ranges).await,
            }
        })
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        self.options = options
            .cloned()
            .unwrap_or_default()
            .with_page_index_policy(PageIndexPolicy::Optional);
        Box::pin(async move {
            if let Some((store, path)) = &self.verify {
                store
                    .verify(path)
                    .await
                    .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))?;
            }
            let metadata = self.inner.get_metadata(Some(&self.options)).await?;
            if let Some(ahead) = &mut self.read_ahead {
                ahead.set_metadata(metadata.clone());
            }
            Ok(metadata)
        })
    }
}

/// The local file system store's path of a local file. The path goes in literally: Iceberg writes
/// partition values into directory names unescaped, and parsing the path as a URL would change
/// them.
fn local_object_path(location: &str) -> DFResult<ObjectPath> {
    let local = local_path(location)
        .ok_or_else(|| DataFusionError::Internal(format!("not a local file: {location}")))?;
    ObjectPath::from_absolute_path(local).map_err(|e| DataFusionError::External(e.into()))
}

/// One byte range of a file, read by `path` from the scan's store.
fn partitioned_file(task: &FileScanTask, path: ObjectPath) -> DFResult<PartitionedFile> {
    let mut file = PartitionedFile::new(String::new(), task.file_size_in_bytes);
    file.object_meta.location = path;
    let length = if task.length == 0 {
        task.file_size_in_bytes
    } else {
        task.length
    };
    let (start, end) = (task.start, task.start + length);
    let offset = |v: u64| i64::try_from(v).map_err(|e| DataFusionError::External(e.into()));
    Ok(file.with_range(offset(start)?, offset(end)?))
}

/// Resolves a table's columns in each file by field id (the table's column name → its id).
#[derive(Debug)]
struct FieldIds {
    ids: HashMap<String, i32>,
}

impl PhysicalExprAdapterFactory for FieldIds {
    fn create(
        &self,
        logical: SchemaRef,
        physical: SchemaRef,
    ) -> DFResult<Arc<dyn PhysicalExprAdapter>> {
        let in_file: HashMap<i32, &Field> = physical
            .fields()
            .iter()
            .filter_map(|f| Some((field_id(f)?, f.as_ref())))
            .collect();
        // A file written without field ids (imported, not written by an Iceberg writer) is read
        // by column name.
        if in_file.is_empty() {
            return Ok(Arc::new(DefaultPhysicalExprAdapter::new(logical, physical)));
        }
        let mut columns = HashMap::new();
        let mut reshaped = HashMap::new();
        let mut fields: Vec<Field> = Vec::with_capacity(logical.fields().len());
        for field in logical.fields() {
            let name = field.name();
            match self.ids.get(name).and_then(|id| in_file.get(id)) {
                Some(in_file) => {
                    columns.insert(name.clone(), Some(in_file.name().clone()));
                    let mut read = field.as_ref().clone().with_name(in_file.name());
                    // A nested column is read as the file has it and then made the table's by
                    // field id ([`ById`]): DataFusion's own cast would match its fields by name.
                    if in_file.data_type() != field.data_type() && nested(field.data_type()) {
                        read = read.with_data_type(in_file.data_type().clone());
                        reshaped.insert(name.clone(), field.clone());
                    }
                    fields.push(read);
                }
                None => {
                    // Not in this file (added later): read as NULL, under a name no file has.
                    columns.insert(name.clone(), None);
                    fields.push(field.as_ref().clone().with_name(format!("\0{name}")));
                }
            }
        }
        let types = logical
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect();
        Ok(Arc::new(ByFieldId {
            columns,
            nested: reshaped,
            types,
            inner: DefaultPhysicalExprAdapter::new(Arc::new(Schema::new(fields)), physical),
        }))
    }
}

/// The Iceberg field id a Parquet reader put on `field`.
fn field_id(field: &Field) -> Option<i32> {
    field
        .metadata()
        .get(PARQUET_FIELD_ID_META_KEY)?
        .parse()
        .ok()
}

/// [`FieldIds`] for one file: each table column's name in the file (None: not in the file).
#[derive(Debug)]
struct ByFieldId {
    columns: HashMap<String, Option<String>>,
    /// The nested columns whose fields differ in the file: the table's field of each.
    nested: HashMap<String, FieldRef>,
    types: HashMap<String, DataType>,
    /// Casts (promoted types) and indices, by the file's names.
    inner: DefaultPhysicalExprAdapter,
}

impl PhysicalExprAdapter for ByFieldId {
    fn rewrite(&self, expr: Arc<dyn PhysicalExpr>) -> DFResult<Arc<dyn PhysicalExpr>> {
        // Bottom up, each column once: a swap of two names by renames cannot chain.
        let renamed = expr
            .transform_up(|e| {
                let Some(column) = e.downcast_ref::<Column>() else {
                    return Ok(Transformed::no(e));
                };
                match self.columns.get(column.name()) {
                    Some(Some(file_name)) => {
                        let read: Arc<dyn PhysicalExpr> =
                            Arc::new(Column::new(file_name, column.index()));
                        Ok(Transformed::yes(match self.nested.get(column.name()) {
                            Some(to) => Arc::new(ById {
                                read,
                                to: to.clone(),
                            }),
                            None => read,
                        }))
                    }
                    Some(None) => {
                        let null = match self.types.get(column.name()) {
                            Some(data_type) => ScalarValue::try_from(data_type)?,
                            None => ScalarValue::Null,
                        };
                        Ok(Transformed::yes(lit(null)))
                    }
                    None => Ok(Transformed::no(e)),
                }
            })
            .data()?;
        self.inner.rewrite(renamed)
    }
}

/// A nested column of a file in the table's type: at every depth a field of the table's type takes
/// the file's field with the same Iceberg field id (renamed, moved or widened), or NULL when the
/// file has none (added after the file was written); fields the table dropped are left behind.
#[derive(Debug, Clone)]
struct ById {
    read: Arc<dyn PhysicalExpr>,
    to: FieldRef,
}

impl PartialEq for ById {
    fn eq(&self, other: &Self) -> bool {
        self.read.as_ref() == other.read.as_ref() && self.to == other.to
    }
}

impl Eq for ById {}

impl std::hash::Hash for ById {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.read.hash(state);
        self.to.hash(state);
    }
}

impl std::fmt::Display for ById {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} by field id", self.read)
    }
}

impl PhysicalExpr for ById {
    fn data_type(&self, _input_schema: &Schema) -> DFResult<DataType> {
        Ok(self.to.data_type().clone())
    }

    fn nullable(&self, _input_schema: &Schema) -> DFResult<bool> {
        Ok(self.to.is_nullable())
    }

    fn evaluate(&self, batch: &RecordBatch) -> DFResult<ColumnarValue> {
        let read = self.read.evaluate(batch)?.into_array(batch.num_rows())?;
        Ok(ColumnarValue::Array(conform(&read, self.to.data_type())?))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![&self.read]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> DFResult<Arc<dyn PhysicalExpr>> {
        let [read]: [Arc<dyn PhysicalExpr>; 1] = children
            .try_into()
            .map_err(|_| DataFusionError::Internal("a field-id read has one input".into()))?;
        Ok(Arc::new(Self {
            read,
            to: self.to.clone(),
        }))
    }

    fn fmt_sql(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.read.fmt_sql(f)
    }
}

/// `array` (as a file has it) in the type `to`, fields matched by field id at every depth (by name
/// where the file has no ids).
pub(crate) fn conform(array: &ArrayRef, to: &DataType) -> DFResult<ArrayRef> {
    Ok(match (array.data_type(), to) {
        (from, to) if from == to => array.clone(),
        (DataType::Struct(from), DataType::Struct(to_fields)) => {
            let rows = array.as_struct();
            let by_id = from.iter().any(|f| field_id(f).is_some());
            let columns = to_fields
                .iter()
                .map(|field| {
                    let at = from.iter().position(|f| match by_id {
                        true => field_id(f).is_some() && field_id(f) == field_id(field),
                        false => f.name() == field.name(),
                    });
                    match at {
                        Some(i) => conform(rows.column(i), field.data_type()),
                        None => Ok(new_null_array(field.data_type(), rows.len())),
                    }
                })
                .collect::<DFResult<Vec<_>>>()?;
            Arc::new(StructArray::try_new(
                to_fields.clone(),
                columns,
                rows.nulls().cloned(),
            )?)
        }
        (DataType::List(_), DataType::List(element)) => {
            let list = array.as_list::<i32>();
            let values = conform(list.values(), element.data_type())?;
            Arc::new(ListArray::try_new(
                element.clone(),
                list.offsets().clone(),
                values,
                list.nulls().cloned(),
            )?)
        }
        (DataType::LargeList(_), DataType::LargeList(element)) => {
            let list = array.as_list::<i64>();
            let values = conform(list.values(), element.data_type())?;
            Arc::new(LargeListArray::try_new(
                element.clone(),
                list.offsets().clone(),
                values,
                list.nulls().cloned(),
            )?)
        }
        (DataType::Map(..), DataType::Map(entries, sorted)) => {
            let map = array.as_map();
            let read: ArrayRef = Arc::new(map.entries().clone());
            let conformed = conform(&read, entries.data_type())?;
            Arc::new(MapArray::try_new(
                entries.clone(),
                map.offsets().clone(),
                conformed.as_struct().clone(),
                map.nulls().cloned(),
                *sorted,
            )?)
        }
        _ => cast(array, to)?,
    })
}

//! Reading planned Iceberg files with DataFusion's own Parquet reader: page-index and row-group
//! pruning, dynamic filters from joins and TopK, cached footers. It serves the scans it can read
//! exactly as Iceberg means them (see [`readable`]); iceberg-rust's reader serves the rest (delete
//! files, nested columns). Local files are read directly; files in object stores through the
//! table's `FileIO` (see `file_io_store`), with the caller's credentials.
//!
//! Columns resolve by Iceberg field id, not by name: [`FieldIds`] rewrites every column a scan
//! touches (projection, pushed filters, pruning) to the file's own column with the same id, so a
//! renamed column reads its old data and a column added later reads as NULL.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
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

/// Whether DataFusion's reader reads these tasks of a table with `schema` exactly as Iceberg
/// means: Parquet files, no delete files, and only top-level primitive columns (nested fields
/// would resolve by name inside their parent).
pub(crate) fn readable(schema: &Schema, tasks: &[FileScanTask]) -> bool {
    !tasks.is_empty()
        && !schema.fields().iter().any(|f| nested(f.data_type()))
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
        let in_file: HashMap<i32, &String> = physical
            .fields()
            .iter()
            .filter_map(|f| {
                let id = f.metadata().get(PARQUET_FIELD_ID_META_KEY)?.parse().ok()?;
                Some((id, f.name()))
            })
            .collect();
        // A file written without field ids (imported, not written by an Iceberg writer) is read
        // by column name.
        if in_file.is_empty() {
            return Ok(Arc::new(DefaultPhysicalExprAdapter::new(logical, physical)));
        }
        let mut columns = HashMap::new();
        let mut fields: Vec<Field> = Vec::with_capacity(logical.fields().len());
        for field in logical.fields() {
            let name = field.name();
            match self.ids.get(name).and_then(|id| in_file.get(id)) {
                Some(file_name) => {
                    columns.insert(name.clone(), Some((*file_name).clone()));
                    fields.push(field.as_ref().clone().with_name(*file_name));
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
            types,
            inner: DefaultPhysicalExprAdapter::new(Arc::new(Schema::new(fields)), physical),
        }))
    }
}

/// [`FieldIds`] for one file: each table column's name in the file (None: not in the file).
#[derive(Debug)]
struct ByFieldId {
    columns: HashMap<String, Option<String>>,
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
                    Some(Some(file_name)) => Ok(Transformed::yes(Arc::new(Column::new(
                        file_name,
                        column.index(),
                    ))
                        as Arc<dyn PhysicalExpr>)),
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

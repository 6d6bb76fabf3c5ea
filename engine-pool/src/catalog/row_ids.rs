//! The scan behind row-level changes (DELETE, UPDATE, MERGE): the rows of a table's snapshot, each
//! with the data file it is in (`$path`) and its position in that file (`$pos`, from 0), the two
//! values by which Iceberg's position delete files name a row.
//!
//! Positions are counted, so every file is read whole and in order: no byte ranges, no row group
//! or page pruning, no filter inside the reader (files are still pruned by the statement's filters
//! through the manifests). The rows a file's position delete files remove are dropped here, after
//! counting, by the positions those files list for it. A file with equality delete files is
//! refused: its rows' positions among the deleted rows cannot be counted that way.
//!
//! Only the table scan's `with_row_ids` makes this scan, for the statements of `write/rows.rs`:
//! it is the same table to governance (its row filters and column masks apply as to any scan of
//! it), and its two columns are not reachable from a query.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, DictionaryArray, Int32Array, Int64Array, RecordBatch,
    RecordBatchOptions, StringArray,
};
use datafusion::arrow::compute::{cast, filter_record_batch};
use datafusion::arrow::datatypes::{DataType, Field, Schema as ArrowSchema, SchemaRef};
use datafusion::common::Statistics;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use iceberg::arrow::ArrowReaderBuilder;
use iceberg::io::FileIO;
use iceberg::scan::FileScanTask;
use iceberg::spec::DataContentType;
use iceberg::table::Table;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::predicate;

/// The column naming a row's data file.
pub const PATH: &str = "$path";
/// The column holding a row's position in its data file.
pub const POS: &str = "$pos";

/// What a row-id scan reads: the data files of the snapshot, or only these.
#[derive(Debug, Clone, Default)]
pub(crate) struct RowIds {
    pub files: Option<Arc<HashSet<String>>>,
}

/// `schema` with the two row-id columns after the table's.
pub(crate) fn with_row_id_columns(schema: &ArrowSchema) -> ArrowSchema {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(PATH, path_type(), false));
    fields.push(Field::new(POS, DataType::Int64, false));
    ArrowSchema::new_with_metadata(fields, schema.metadata().clone())
}

/// The type of `$path`: one value a file, so a dictionary of it (a copy of the path per row would
/// cost more than the row).
pub(crate) fn path_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

fn iceberg_error(e: iceberg::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// The plan of a row-id scan of `table` (at `snapshot_id`, else its current snapshot), whose
/// columns are `schema` (the table's, then `$path` and `$pos`), read in `iceberg_schema`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn plan(
    table: &Table,
    snapshot_id: Option<i64>,
    schema: &SchemaRef,
    iceberg_schema: &iceberg::spec::Schema,
    row_ids: &RowIds,
    partitions: usize,
    batch_size: usize,
    projection: Option<&Vec<usize>>,
    filters: &[Expr],
) -> DFResult<Arc<dyn ExecutionPlan>> {
    let table_columns = schema.fields().len() - 2;
    let projection: Vec<usize> = projection
        .cloned()
        .unwrap_or_else(|| (0..schema.fields().len()).collect());
    let output = Arc::new(schema.project(&projection)?);
    // The table's columns read; one at least, for the rows' count.
    let mut read: Vec<usize> = projection
        .iter()
        .copied()
        .filter(|i| *i < table_columns)
        .collect();
    if read.is_empty() {
        read.push(0);
    }
    let mut builder = match snapshot_id {
        Some(id) => table.scan().snapshot_id(id),
        None => table.scan(),
    };
    builder = builder.select(read.iter().map(|i| schema.field(*i).name().clone()));
    if let Some(p) = predicate::from_filters(filters, iceberg_schema) {
        builder = builder.with_filter(p);
    }
    let scan = builder.build().map_err(iceberg_error)?;
    let mut tasks: Vec<FileScanTask> = scan
        .plan_files()
        .await
        .map_err(iceberg_error)?
        .try_collect()
        .await
        .map_err(iceberg_error)?;
    if let Some(files) = &row_ids.files {
        tasks.retain(|t| files.contains(&t.data_file_path));
    }
    for task in &mut tasks {
        // Pruning happened at the manifests; inside a file every row is counted.
        task.predicate = None;
        if let Some(equality) = task
            .deletes
            .iter()
            .find(|d| d.file_type == DataContentType::EqualityDeletes)
        {
            return Err(DataFusionError::External(Box::new(
                sqe_sessions::SqeError::unsupported(format!(
                    "rows of data file {} cannot be changed: equality delete file {} applies to it (written by another engine); rewrite the table's data files first",
                    task.data_file_path, equality.file_path
                )),
            )));
        }
    }
    // Whole files, largest first, each to the group with the fewest bytes.
    tasks.sort_by_key(|t| std::cmp::Reverse(t.file_size_in_bytes));
    let mut groups: Vec<(u64, Vec<FileScanTask>)> = vec![(0, Vec::new()); partitions.max(1)];
    for task in tasks {
        if let Some(g) = groups.iter_mut().min_by_key(|g| g.0) {
            g.0 += task.file_size_in_bytes;
            g.1.push(task);
        }
    }
    let groups: Vec<Vec<FileScanTask>> = groups
        .into_iter()
        .map(|(_, g)| g)
        .filter(|g| !g.is_empty())
        .collect();
    let columns = projection
        .iter()
        .map(|i| match *i {
            i if i < table_columns => Source::Read(read.iter().position(|r| *r == i).unwrap_or(0)),
            i if i == table_columns => Source::Path,
            _ => Source::Pos,
        })
        .collect();
    Ok(Arc::new(RowIdScanExec {
        file_io: table.file_io().clone(),
        deletes: Arc::default(),
        properties: Arc::new(PlanProperties::new(
            EquivalenceProperties::new(output.clone()),
            Partitioning::UnknownPartitioning(groups.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        )),
        schema: output,
        groups,
        columns,
        batch_size,
    }))
}

/// Where an output column of a row-id scan comes from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// The reader's column at this index.
    Read(usize),
    Path,
    Pos,
}

/// The positions each position delete file lists, by data file path: read once per scan however
/// many data files it applies to.
type DeleteCache = Mutex<HashMap<String, Arc<HashMap<String, Vec<i64>>>>>;

/// Reads its groups of whole files, one group per partition, each file's rows in order.
pub struct RowIdScanExec {
    file_io: FileIO,
    deletes: Arc<DeleteCache>,
    properties: Arc<PlanProperties>,
    schema: SchemaRef,
    groups: Vec<Vec<FileScanTask>>,
    columns: Vec<Source>,
    batch_size: usize,
}

impl fmt::Debug for RowIdScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowIdScanExec")
            .field("files", &self.groups.iter().map(Vec::len).sum::<usize>())
            .finish_non_exhaustive()
    }
}

impl DisplayAs for RowIdScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let columns: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|c| c.name().as_str())
            .collect();
        write!(
            f,
            "IcebergRowIdScan: files={}, partitions={}, projection=[{}]",
            self.groups.iter().map(Vec::len).sum::<usize>(),
            self.groups.len(),
            columns.join(", ")
        )
    }
}

impl ExecutionPlan for RowIdScanExec {
    fn name(&self) -> &str {
        "IcebergRowIdScan"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn partition_statistics(&self, _partition: Option<usize>) -> DFResult<Arc<Statistics>> {
        Ok(Arc::new(Statistics::new_unknown(&self.schema)))
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let tasks = self.groups.get(partition).cloned().unwrap_or_default();
        let file_io = self.file_io.clone();
        let deletes = self.deletes.clone();
        let schema = self.schema.clone();
        let columns: Arc<[Source]> = self.columns.clone().into();
        let batch_size = self.batch_size;
        let stream = futures::stream::iter(tasks)
            .then(move |task| {
                let (file_io, schema, columns) = (file_io.clone(), schema.clone(), columns.clone());
                let deletes = deletes.clone();
                async move { read_file(file_io, deletes, task, schema, columns, batch_size).await }
            })
            .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            stream,
        )))
    }
}

/// The rows of one data file, numbered, without those its position delete files remove.
async fn read_file(
    file_io: FileIO,
    deletes: Arc<DeleteCache>,
    task: FileScanTask,
    schema: SchemaRef,
    columns: Arc<[Source]>,
    batch_size: usize,
) -> DFResult<futures::stream::BoxStream<'static, DFResult<RecordBatch>>> {
    let deleted = deleted_positions(&file_io, &deletes, &task).await?;
    let path = task.data_file_path.clone();
    let expected = task.record_count;
    let path_for_check = path.clone();
    let counted = Arc::new(AtomicI64::new(0));
    let mut data = task;
    data.deletes.clear();
    data.predicate = None;
    let runtime = iceberg::Runtime::try_current().map_err(iceberg_error)?;
    let reader = ArrowReaderBuilder::new(file_io, runtime)
        .with_batch_size(batch_size)
        .with_data_file_concurrency_limit(1)
        .with_row_group_filtering_enabled(false)
        .with_row_selection_enabled(false)
        .build();
    let batches = reader
        .read(Box::pin(futures::stream::iter([Ok(data)])))
        .map_err(iceberg_error)?
        .stream()
        .map_err(iceberg_error);
    let mut next = 0i64;
    let mut deleted_at = 0usize;
    let count = counted.clone();
    // Positions are counted: every row of the file must have come, or they would be wrong.
    let whole = futures::stream::once(async move {
        let read = counted.load(Ordering::Relaxed);
        match expected {
            Some(rows) if read != rows as i64 => Some(Err(DataFusionError::Execution(format!(
                "read {read} rows of {path_for_check}, whose manifest says {rows}"
            )))),
            _ => None,
        }
    })
    .filter_map(futures::future::ready);
    Ok(batches
        .map(move |batch| {
            let batch = batch?;
            let rows = batch.num_rows();
            let first = next;
            next += rows as i64;
            count.store(next, Ordering::Relaxed);
            let positions = Int64Array::from_iter_values(first..next);
            // Positions only grow: one pass over the sorted deleted positions.
            let keep = (!deleted.is_empty()).then(|| {
                BooleanArray::from_iter(positions.values().iter().map(|p| {
                    while deleted_at < deleted.len() && deleted[deleted_at] < *p {
                        deleted_at += 1;
                    }
                    Some(deleted.get(deleted_at) != Some(p))
                }))
            });
            let mut out: Vec<ArrayRef> = Vec::with_capacity(columns.len());
            for (source, field) in columns.iter().zip(schema.fields()) {
                out.push(match source {
                    Source::Read(i) => {
                        let column = batch.column(*i);
                        if column.data_type() == field.data_type() {
                            column.clone()
                        } else {
                            cast(column, field.data_type())?
                        }
                    }
                    Source::Path => Arc::new(DictionaryArray::new(
                        Int32Array::from(vec![0; rows]),
                        Arc::new(StringArray::from(vec![path.as_str()])),
                    )),
                    Source::Pos => Arc::new(positions.clone()),
                });
            }
            let options = RecordBatchOptions::new().with_row_count(Some(rows));
            let out = RecordBatch::try_new_with_options(schema.clone(), out, &options)?;
            Ok(match keep {
                Some(keep) => filter_record_batch(&out, &keep)?,
                None => out,
            })
        })
        .chain(whole)
        .boxed())
}

/// The positions in `task`'s data file that its position delete files remove, sorted.
async fn deleted_positions(
    file_io: &FileIO,
    cache: &DeleteCache,
    task: &FileScanTask,
) -> DFResult<Vec<i64>> {
    let mut positions = Vec::new();
    for delete in &task.deletes {
        if delete.file_type != DataContentType::PositionDeletes {
            continue;
        }
        let cached = cache
            .lock()
            .ok()
            .and_then(|c| c.get(&delete.file_path).cloned());
        let by_file = match cached {
            Some(by_file) => by_file,
            None => {
                let by_file = Arc::new(read_position_deletes(file_io, &delete.file_path).await?);
                if let Ok(mut c) = cache.lock() {
                    c.insert(delete.file_path.clone(), by_file.clone());
                }
                by_file
            }
        };
        if let Some(listed) = by_file.get(&task.data_file_path) {
            positions.extend_from_slice(listed);
        }
    }
    positions.sort_unstable();
    positions.dedup();
    Ok(positions)
}

/// The positions a position delete file lists, by data file path.
async fn read_position_deletes(
    file_io: &FileIO,
    location: &str,
) -> DFResult<HashMap<String, Vec<i64>>> {
    let bytes = file_io
        .new_input(location)
        .map_err(iceberg_error)?
        .read()
        .await
        .map_err(iceberg_error)?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)?.build()?;
    let mut by_file: HashMap<String, Vec<i64>> = HashMap::new();
    for batch in reader {
        let batch = batch?;
        let (Some(paths), Some(pos)) = (
            batch.column_by_name("file_path"),
            batch.column_by_name("pos"),
        ) else {
            return Err(DataFusionError::Execution(format!(
                "position delete file {location} has no file_path and pos columns"
            )));
        };
        let paths = cast(paths, &DataType::Utf8)?;
        let paths = paths
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| DataFusionError::Internal("file_path is not a string".into()))?;
        let pos = cast(pos, &DataType::Int64)?;
        let pos = pos
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| DataFusionError::Internal("pos is not a long".into()))?;
        for i in 0..batch.num_rows() {
            if paths.is_valid(i) && pos.is_valid(i) {
                match by_file.get_mut(paths.value(i)) {
                    Some(list) => list.push(pos.value(i)),
                    None => {
                        by_file.insert(paths.value(i).to_string(), vec![pos.value(i)]);
                    }
                }
            }
        }
    }
    Ok(by_file)
}

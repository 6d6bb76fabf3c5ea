//! The scan behind row-level changes (DELETE, UPDATE, MERGE): the rows of a table's snapshot, each
//! with the data file it is in (`$path`) and its position in that file (`$pos`, from 0), the two
//! values by which Iceberg's position delete files name a row.
//!
//! Files are read by the parquet crate's reader, which numbers each row it gives (its row-number
//! column), so nothing needs reading in order or whole: a large file is read in byte ranges by
//! several partitions, the statement's filters run inside the reader on their own columns first
//! (the other columns are decoded only for the rows that pass), and a scan of given rows
//! ([`Reach::Rows`]) decodes only those. Rows that position delete files remove are skipped by the
//! reader too. Columns resolve by Iceberg field id; a column a file does not have reads as NULL.
//! The filters are DataFusion's to apply again: here they only spare work.
//!
//! A nested column is made the table's field by field id (parquet_read's `conform`). A file
//! without field ids (resolved by the table's name mapping) or with row group ordinals out of
//! place is read by iceberg-rust's reader instead:
//! whole files in order, positions counted, deleted rows dropped after counting. A file with
//! equality delete files is refused: which of its rows they remove is not known by position.
//!
//! Only the table scan's `with_row_ids` makes this scan, for the statements of `write/rows.rs`:
//! it is the same table to governance (its row filters and column masks apply as to any scan of
//! it), and its two columns are not reachable from a query.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, DictionaryArray, Int32Array, Int64Array, RecordBatch,
    RecordBatchOptions, StringArray,
};
use datafusion::arrow::compute::{cast, filter_record_batch, prep_null_mask_filter};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema as ArrowSchema, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Column, DFSchema, ScalarValue, Statistics};
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::arrow::{ArrowFileReader, ArrowReaderBuilder};
use iceberg::io::{FileIO, FileMetadata};
use iceberg::scan::FileScanTask;
use iceberg::spec::{DataContentType, NestedFieldRef};
use iceberg::table::Table;
use parquet::arrow::arrow_reader::{
    ArrowPredicate, ArrowPredicateFn, ArrowReaderMetadata, ArrowReaderOptions,
    ParquetRecordBatchReaderBuilder, RowFilter, RowSelection,
};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask, RowNumber};
use parquet::file::metadata::ParquetMetaData;

use super::{deletion_vectors, predicate};

/// The column naming a row's data file.
pub const PATH: &str = "$path";
/// The column holding a row's position in its data file.
pub const POS: &str = "$pos";

/// What a row-id scan reads of the snapshot's data files.
#[derive(Debug, Clone, Default)]
pub(crate) enum Reach {
    /// Every row of every file.
    #[default]
    All,
    /// These rows: the positions (sorted) in each file.
    Rows(Arc<HashMap<String, Vec<i64>>>),
    /// Every row of these files but these (positions, sorted): the reader skips them as it skips
    /// deleted rows.
    Except(Arc<HashMap<String, Vec<i64>>>),
}

impl Reach {
    fn takes(&self, path: &str) -> bool {
        match self {
            Reach::All => true,
            Reach::Rows(rows) | Reach::Except(rows) => rows.contains_key(path),
        }
    }

    /// The only rows read of `path`, if only some are.
    fn positions(&self, path: &str) -> Option<&[i64]> {
        match self {
            Reach::Rows(rows) => Some(rows.get(path).map_or(&[], Vec::as_slice)),
            _ => None,
        }
    }

    /// The rows of `path` left out as if deleted.
    fn skipped(&self, path: &str) -> &[i64] {
        match self {
            Reach::Except(rows) => rows.get(path).map_or(&[], Vec::as_slice),
            _ => &[],
        }
    }
}

/// What a row-id scan reads.
#[derive(Debug, Clone, Default)]
pub(crate) struct RowIds {
    pub reach: Reach,
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

/// Files smaller than this are read by one partition whole (the table scan's smallest range).
const SPLIT_BYTES: u64 = 8 * 1024 * 1024;

/// The plan of a row-id scan of `table` (at `snapshot_id`, else its current snapshot), whose
/// columns are `schema` (the table's, then `$path` and `$pos`), read in `iceberg_schema`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn plan(
    table: &Table,
    snapshot_id: Option<i64>,
    schema: &SchemaRef,
    iceberg_schema: &iceberg::spec::Schema,
    row_ids: &RowIds,
    state: &dyn Session,
    projection: Option<&Vec<usize>>,
    filters: &[Expr],
) -> DFResult<Arc<dyn ExecutionPlan>> {
    let table_columns = schema.fields().len() - 2;
    let projection: Vec<usize> = projection
        .cloned()
        .unwrap_or_else(|| (0..schema.fields().len()).collect());
    let output = Arc::new(schema.project(&projection)?);
    let read: Vec<usize> = projection
        .iter()
        .copied()
        .filter(|i| *i < table_columns)
        .collect();
    let mut builder = match snapshot_id {
        Some(id) => table.scan().snapshot_id(id),
        None => table.scan(),
    };
    // The columns are the reader's to choose, file by file.
    builder = builder.select_all();
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
    tasks.retain(|t| row_ids.reach.takes(&t.data_file_path));
    for task in &mut tasks {
        // Pruning happened at the manifests; inside a file every row is the reader's to judge.
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
    let table_schema = Arc::new(ArrowSchema::new(schema.fields()[..table_columns].to_vec()));
    let fields: Vec<NestedFieldRef> = iceberg_schema.as_struct().fields().to_vec();
    // The rows read, for the planner's choice of a join's build side (a MERGE's target against
    // its source): the filters' share of them is the planner's own guess. A scan of given rows
    // is joined with those rows, as many: left to the planner as it is.
    let mut statistics = Statistics::new_unknown(&output);
    if !matches!(row_ids.reach, Reach::Rows(_)) {
        let rows: u64 = tasks.iter().filter_map(|t| t.record_count).sum();
        statistics.num_rows = Precision::Inexact(rows as usize);
    }
    let partitions = state.config().target_partitions().max(1);
    let parts = split(tasks, partitions);
    let groups = spread(parts, partitions);
    let columns = projection
        .iter()
        .map(|i| match *i {
            i if i < table_columns => Source::Table,
            i if i == table_columns => Source::Path,
            _ => Source::Pos,
        })
        .collect();
    let predicates = compile(filters, &table_schema, state);
    Ok(Arc::new(RowIdScanExec {
        reading: Arc::new(Reading {
            file_io: table.file_io().clone(),
            deletes: Arc::default(),
            schema: output.clone(),
            table_schema,
            fields,
            columns,
            read,
            predicates,
            reach: row_ids.reach.clone(),
            batch_size: state.config().batch_size(),
        }),
        statistics: Arc::new(statistics),
        properties: Arc::new(PlanProperties::new(
            EquivalenceProperties::new(output),
            Partitioning::UnknownPartitioning(groups.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        )),
        groups,
    }))
}

/// A byte range of a data file: its row groups that start in it.
#[derive(Debug, Clone)]
struct Part {
    task: Arc<FileScanTask>,
    bytes: Range<u64>,
}

/// The parts of `tasks`: files larger than a partition's share of the bytes (and than
/// [`SPLIT_BYTES`]) in equal byte ranges if `splittable`, the others whole.
fn split(tasks: Vec<FileScanTask>, partitions: usize) -> Vec<Part> {
    let total: u64 = tasks.iter().map(|t| t.file_size_in_bytes).sum();
    let share = (total / partitions as u64).max(SPLIT_BYTES);
    let mut parts = Vec::new();
    for task in tasks {
        let size = task.file_size_in_bytes;
        let task = Arc::new(task);
        let pieces = size.div_ceil(share).max(1);
        let step = size.div_ceil(pieces);
        for n in 0..pieces {
            let start = n * step;
            // The last piece reaches past the end: a row group's start is below the size.
            let end = if n + 1 == pieces {
                u64::MAX
            } else {
                start + step
            };
            parts.push(Part {
                task: task.clone(),
                bytes: start..end,
            });
        }
    }
    parts
}

/// Parts to partitions, balanced by their bytes.
fn spread(parts: Vec<Part>, partitions: usize) -> Vec<Vec<Part>> {
    let bytes = |p: &Part| p.bytes.end.min(p.task.file_size_in_bytes) - p.bytes.start;
    super::balance::balance(parts, partitions, bytes)
}

/// A filter the reader runs on the columns it names before it decodes the others.
struct Predicate {
    /// The table's columns it reads (their indices), in the table's order.
    columns: Vec<usize>,
    /// Those columns' fields: the schema `expr` reads.
    schema: SchemaRef,
    expr: Arc<dyn PhysicalExpr>,
}

/// The pushed `filters` the reader can run: those naming table columns only (not `$path` or
/// `$pos`), not volatile (DataFusion evaluates them again), that DataFusion can plan.
fn compile(filters: &[Expr], table: &SchemaRef, state: &dyn Session) -> Vec<Predicate> {
    let mut predicates = Vec::new();
    for filter in filters {
        if filter.is_volatile() {
            continue;
        }
        let Ok(mut columns) = filter
            .column_refs()
            .iter()
            .map(|c| table.index_of(c.name()))
            .collect::<Result<Vec<usize>, _>>()
        else {
            continue;
        };
        if columns.is_empty() {
            continue;
        }
        columns.sort_unstable();
        columns.dedup();
        let Ok(schema) = table.project(&columns) else {
            continue;
        };
        let schema = Arc::new(schema);
        // The filter's columns may carry the statement's name for the table.
        let unqualified = filter
            .clone()
            .transform(|e| match e {
                Expr::Column(c) => Ok(Transformed::yes(Expr::Column(Column::new_unqualified(
                    c.name,
                )))),
                e => Ok(Transformed::no(e)),
            })
            .data();
        let expr = unqualified.and_then(|f| {
            let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
            state.create_physical_expr(f, &df_schema)
        });
        if let Ok(expr) = expr {
            predicates.push(Predicate {
                columns,
                schema,
                expr,
            });
        }
    }
    predicates
}

/// Where an output column of a row-id scan comes from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// The next of the table's columns read.
    Table,
    Path,
    Pos,
}

/// The positions each position delete file lists, by data file path: read once per scan however
/// many data files it applies to.
type DeleteCache = Mutex<HashMap<String, Arc<HashMap<String, Vec<i64>>>>>;

/// What every part of a row-id scan is read with.
struct Reading {
    file_io: FileIO,
    deletes: Arc<DeleteCache>,
    /// The scan's output.
    schema: SchemaRef,
    /// The table's columns (no `$path`, `$pos`), in the scan's types.
    table_schema: SchemaRef,
    /// The table's columns in Iceberg's terms (field ids, types).
    fields: Vec<NestedFieldRef>,
    columns: Vec<Source>,
    /// The table's columns in the output.
    read: Vec<usize>,
    predicates: Vec<Predicate>,
    reach: Reach,
    batch_size: usize,
}

/// Reads its groups of parts, one group per partition.
pub struct RowIdScanExec {
    reading: Arc<Reading>,
    /// The whole scan's.
    statistics: Arc<Statistics>,
    properties: Arc<PlanProperties>,
    groups: Vec<Vec<Part>>,
}

impl fmt::Debug for RowIdScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowIdScanExec")
            .field("parts", &self.groups.iter().map(Vec::len).sum::<usize>())
            .finish_non_exhaustive()
    }
}

impl DisplayAs for RowIdScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let columns: Vec<&str> = self
            .reading
            .schema
            .fields()
            .iter()
            .map(|c| c.name().as_str())
            .collect();
        write!(
            f,
            "IcebergRowIdScan: parts={}, partitions={}, projection=[{}], filters={}",
            self.groups.iter().map(Vec::len).sum::<usize>(),
            self.groups.len(),
            columns.join(", "),
            self.reading.predicates.len()
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

    fn partition_statistics(&self, partition: Option<usize>) -> DFResult<Arc<Statistics>> {
        Ok(match partition {
            None => self.statistics.clone(),
            Some(_) => Arc::new(Statistics::new_unknown(&self.reading.schema)),
        })
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let parts = self.groups.get(partition).cloned().unwrap_or_default();
        let reading = self.reading.clone();
        let stream = futures::stream::iter(parts)
            .then(move |part| {
                let reading = reading.clone();
                async move {
                    let mut deleted =
                        deleted_positions(&reading.file_io, &reading.deletes, &part.task).await?;
                    let skipped = reading.reach.skipped(&part.task.data_file_path);
                    if !skipped.is_empty() {
                        deleted.extend_from_slice(skipped);
                        deleted.sort_unstable();
                        deleted.dedup();
                    }
                    read_part(reading, part, deleted).await
                }
            })
            .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.reading.schema.clone(),
            stream,
        )))
    }
}

/// Where a table's column comes from in one file.
#[derive(Debug, Clone)]
enum InFile {
    /// The file's top-level column at this index.
    Column(usize),
    /// Not in the file: this value in every row (its identity partition value, or NULL).
    Constant(ScalarValue),
}

/// Each table column in a file (`metadata`), by field id.
fn locate(reading: &Reading, metadata: &ParquetMetaData) -> DFResult<Vec<InFile>> {
    let roots = metadata
        .file_metadata()
        .schema_descr()
        .root_schema()
        .get_fields();
    let position: HashMap<i32, usize> = roots
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let info = t.get_basic_info();
            info.has_id().then(|| (info.id(), i))
        })
        .collect();
    reading
        .fields
        .iter()
        .zip(reading.table_schema.fields())
        .map(|(field, arrow)| {
            Ok(match position.get(&field.id) {
                Some(i) => InFile::Column(*i),
                // Added after the file was written: NULL (iceberg-rust's scans read it so too).
                None => InFile::Constant(ScalarValue::try_from(arrow.data_type())?),
            })
        })
        .collect()
}

/// Whether this reader can number and resolve the rows of a file as Iceberg means them: its
/// columns carry field ids (a file without them, imported from elsewhere, resolves by the table's
/// name mapping, which iceberg-rust's reader applies), and its row groups' ordinals, by which the
/// row-number column counts, are their places in the file.
fn readable(metadata: &ParquetMetaData) -> bool {
    let roots = metadata
        .file_metadata()
        .schema_descr()
        .root_schema()
        .get_fields();
    roots.iter().all(|t| t.get_basic_info().has_id())
        && metadata
            .row_groups()
            .iter()
            .enumerate()
            .all(|(i, g)| g.ordinal().map(i64::from) == Some(i as i64))
}

/// `column` of a batch in the scan's type for it.
fn in_type(column: &ArrayRef, field: &Field) -> Result<ArrayRef, ArrowError> {
    super::parquet_read::conform(column, field.data_type())
        .map_err(|e| ArrowError::ExternalError(Box::new(e)))
}

/// The table's columns `wanted` (indices) from a batch of the file's columns `roots` (sorted),
/// each in the scan's type.
fn table_columns(
    batch: &RecordBatch,
    wanted: &[usize],
    roots: &[usize],
    in_file: &[InFile],
    table: &ArrowSchema,
) -> Result<Vec<ArrayRef>, ArrowError> {
    let rows = batch.num_rows();
    wanted
        .iter()
        .map(|c| match &in_file[*c] {
            InFile::Column(root) => {
                let at = roots
                    .binary_search(root)
                    .map_err(|_| ArrowError::ComputeError(format!("column {root} was not read")))?;
                in_type(batch.column(at), table.field(*c))
            }
            InFile::Constant(v) => v
                .to_array_of_size(rows)
                .map_err(|e| ArrowError::ExternalError(Box::new(e))),
        })
        .collect()
}

/// The file's columns (sorted top-level indices) that hold the table's `columns`.
fn roots_of(columns: &[usize], in_file: &[InFile]) -> Vec<usize> {
    let mut roots: Vec<usize> = columns
        .iter()
        .filter_map(|c| match in_file[*c] {
            InFile::Column(root) => Some(root),
            InFile::Constant(_) => None,
        })
        .collect();
    roots.sort_unstable();
    roots.dedup();
    roots
}

/// The field of the reader's row-number column.
fn row_number() -> FieldRef {
    Arc::new(Field::new("row_number", DataType::Int64, false).with_extension_type(RowNumber))
}

/// The rows of one part of a data file, each with its position, without the rows its position
/// delete files remove (`deleted`, sorted), and of the reach's rows only.
async fn read_part(
    reading: Arc<Reading>,
    part: Part,
    deleted: Vec<i64>,
) -> DFResult<BoxStream<'static, DFResult<RecordBatch>>> {
    let task = &part.task;
    let path = task.data_file_path.clone();
    let input = reading.file_io.new_input(&path).map_err(iceberg_error)?;
    let mut file = ArrowFileReader::new(
        FileMetadata {
            size: task.file_size_in_bytes,
        },
        input.reader().await.map_err(iceberg_error)?,
    );
    let options = ArrowReaderOptions::new().with_virtual_columns(vec![row_number()])?;
    let metadata = ArrowReaderMetadata::load_async(&mut file, options.clone()).await?;
    let rows_in_file = metadata.metadata().file_metadata().num_rows();
    if let Some(rows) = task.record_count
        && rows as i64 != rows_in_file
    {
        return Err(DataFusionError::Execution(format!(
            "{path} holds {rows_in_file} rows, where its manifest says {rows}"
        )));
    }
    if !readable(metadata.metadata()) {
        // Read whole by iceberg-rust's reader, once: by the part where the file starts.
        return match part.bytes.start {
            0 => read_by_iceberg(reading, part.task, deleted).await,
            _ => Ok(futures::stream::empty().boxed()),
        };
    }
    let in_file = locate(&reading, metadata.metadata())?;
    // Strings as views, as the scan declares them, straight from the reader.
    let metadata = match views(&metadata) {
        Some(schema) => {
            ArrowReaderMetadata::try_new(metadata.metadata().clone(), options.with_schema(schema))
                .unwrap_or(metadata)
        }
        None => metadata,
    };
    let parquet = metadata.metadata().clone();
    // The row groups starting in this part, and the positions of their rows.
    let mut groups = Vec::new();
    let mut ranges = Vec::new();
    let mut first = 0i64;
    for (i, group) in parquet.row_groups().iter().enumerate() {
        let rows = group.num_rows();
        let start = group.columns().first().map_or(0, |c| c.byte_range().0);
        if part.bytes.contains(&start) {
            groups.push(i);
            ranges.push(first..first + rows);
        }
        first += rows;
    }
    let only = reading.reach.positions(&path);
    if let Some(last) = only.and_then(|o| o.last())
        && *last >= rows_in_file
    {
        return Err(DataFusionError::Execution(format!(
            "row {last} of {path} was asked for, which holds {rows_in_file} rows"
        )));
    }
    let Some(selection) = select(&ranges, &deleted, only) else {
        return Ok(futures::stream::empty().boxed());
    };
    let descriptor = parquet.file_metadata().schema_descr_ptr();
    let roots = roots_of(&reading.read, &in_file);
    let mut filters: Vec<Box<dyn ArrowPredicate>> = Vec::new();
    for predicate in &reading.predicates {
        let own = roots_of(&predicate.columns, &in_file);
        if own.is_empty() {
            continue;
        }
        let (in_file, table) = (in_file.clone(), reading.table_schema.clone());
        let (columns, schema) = (predicate.columns.clone(), predicate.schema.clone());
        let expr = predicate.expr.clone();
        let mask = ProjectionMask::roots(&descriptor, own.iter().copied());
        filters.push(Box::new(ArrowPredicateFn::new(mask, move |batch| {
            let rows = batch.num_rows();
            let input = table_columns(&batch, &columns, &own, &in_file, &table)?;
            let options = RecordBatchOptions::new().with_row_count(Some(rows));
            let input = RecordBatch::try_new_with_options(schema.clone(), input, &options)?;
            let external = |e: DataFusionError| ArrowError::ExternalError(Box::new(e));
            let value = expr
                .evaluate(&input)
                .and_then(|v| v.into_array(rows))
                .map_err(external)?;
            let keep = value.as_boolean_opt().ok_or_else(|| {
                ArrowError::ComputeError(format!("a filter gave {}", value.data_type()))
            })?;
            Ok(match keep.null_count() {
                0 => keep.clone(),
                _ => prep_null_mask_filter(keep),
            })
        })));
    }
    let mut builder = ParquetRecordBatchStreamBuilder::new_with_metadata(file, metadata)
        .with_row_groups(groups)
        .with_projection(ProjectionMask::roots(&descriptor, roots.iter().copied()))
        .with_batch_size(reading.batch_size);
    if let Some(selection) = selection {
        builder = builder.with_row_selection(selection);
    }
    if !filters.is_empty() {
        builder = builder.with_row_filter(RowFilter::new(filters));
    }
    let stream = builder.build()?;
    Ok(stream
        .map(move |batch| {
            let batch = batch?;
            let rows = batch.num_rows();
            let positions = batch.column(batch.num_columns() - 1).clone();
            let table = table_columns(
                &batch,
                &reading.read,
                &roots,
                &in_file,
                &reading.table_schema,
            )?;
            let out = output(&reading, table, &path, positions, rows)?;
            Ok(out)
        })
        .boxed())
}

/// The file's Arrow schema with its strings as views, if it has any, for
/// [`ArrowReaderOptions::with_schema`] (which takes the file's columns only, not the row number).
fn views(metadata: &ArrowReaderMetadata) -> Option<SchemaRef> {
    let fields = metadata.schema().fields();
    let columns = &fields[..fields.len().saturating_sub(1)];
    let strings = |f: &FieldRef| matches!(f.data_type(), DataType::Utf8 | DataType::LargeUtf8);
    columns.iter().any(strings).then(|| {
        let fields: Vec<FieldRef> = columns
            .iter()
            .map(|f| match strings(f) {
                true => Arc::new(f.as_ref().clone().with_data_type(DataType::Utf8View)),
                false => f.clone(),
            })
            .collect();
        Arc::new(ArrowSchema::new_with_metadata(
            fields,
            metadata.schema().metadata().clone(),
        ))
    })
}

/// The rows to read of the row groups whose rows are `ranges` (positions in the file, in the
/// order read): all but `deleted`, and of `only` only. None if that is no row; Some(None) if it
/// is every row.
fn select(
    ranges: &[Range<i64>],
    deleted: &[i64],
    only: Option<&[i64]>,
) -> Option<Option<RowSelection>> {
    let total: i64 = ranges.iter().map(|r| r.end - r.start).sum();
    if total == 0 {
        return None;
    }
    // What is kept, as ranges of positions in the file.
    let mut kept: Vec<Range<i64>> = Vec::new();
    let mut keep = |p: Range<i64>| match kept.last_mut() {
        // Kept already (a position asked for twice).
        Some(last) if last.end >= p.end => {}
        Some(last) if last.end == p.start => last.end = p.end,
        _ => kept.push(p),
    };
    for range in ranges {
        let skip = &deleted[deleted.partition_point(|d| *d < range.start)
            ..deleted.partition_point(|d| *d < range.end)];
        match only {
            Some(only) => {
                let wanted = &only[only.partition_point(|p| *p < range.start)
                    ..only.partition_point(|p| *p < range.end)];
                for p in wanted {
                    if skip.binary_search(p).is_err() {
                        keep(*p..*p + 1);
                    }
                }
            }
            None => {
                let mut from = range.start;
                for d in skip {
                    if *d > from {
                        keep(from..*d);
                    }
                    from = d + 1;
                }
                if from < range.end {
                    keep(from..range.end);
                }
            }
        }
    }
    let count: i64 = kept.iter().map(|r| r.end - r.start).sum();
    if count == 0 {
        return None;
    }
    if count == total {
        return Some(None);
    }
    // From positions in the file to positions among the rows of the groups read.
    let mut relative = Vec::with_capacity(kept.len());
    let (mut group, mut offset) = (0usize, 0i64);
    for k in kept {
        while k.start >= ranges[group].end {
            offset += ranges[group].end - ranges[group].start;
            group += 1;
        }
        let at = offset + (k.start - ranges[group].start);
        relative.push(at as usize..(at + k.end - k.start) as usize);
    }
    Some(Some(RowSelection::from_consecutive_ranges(
        relative.into_iter(),
        total as usize,
    )))
}

/// The scan's output for `rows` rows of `path`: the table's columns `table` (those read, in
/// order), `$path` and `$pos` (`positions`) where the scan has them.
fn output(
    reading: &Reading,
    table: Vec<ArrayRef>,
    path: &str,
    positions: ArrayRef,
    rows: usize,
) -> Result<RecordBatch, ArrowError> {
    let mut table = table.into_iter();
    let mut out: Vec<ArrayRef> = Vec::with_capacity(reading.columns.len());
    for source in reading.columns.iter() {
        out.push(match source {
            Source::Table => table
                .next()
                .ok_or_else(|| ArrowError::ComputeError("a column was not read".into()))?,
            Source::Path => Arc::new(DictionaryArray::new(
                Int32Array::from(vec![0; rows]),
                Arc::new(StringArray::from(vec![path])),
            )),
            Source::Pos => positions.clone(),
        });
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(reading.schema.clone(), out, &options)
}

/// The rows of one data file by iceberg-rust's reader (a file without field ids), whole and in
/// order, numbered as they come; the rows of `deleted` (sorted) and those outside the reach's are
/// dropped after counting.
async fn read_by_iceberg(
    reading: Arc<Reading>,
    task: Arc<FileScanTask>,
    deleted: Vec<i64>,
) -> DFResult<BoxStream<'static, DFResult<RecordBatch>>> {
    let path = task.data_file_path.clone();
    let expected = task.record_count;
    let path_for_check = path.clone();
    let counted = Arc::new(AtomicI64::new(0));
    let only: Option<Vec<i64>> = reading.reach.positions(&path).map(<[i64]>::to_vec);
    let mut data = Arc::unwrap_or_clone(task);
    data.deletes.clear();
    data.predicate = None;
    // One column at least, for the rows' count.
    let mut read = reading.read.clone();
    if read.is_empty() {
        read.push(0);
    }
    data.project_field_ids = read.iter().map(|i| reading.fields[*i].id).collect();
    let runtime = iceberg::Runtime::try_current().map_err(iceberg_error)?;
    let reader = ArrowReaderBuilder::new(reading.file_io.clone(), runtime)
        .with_batch_size(reading.batch_size)
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
            let keep = BooleanArray::from_iter(positions.values().iter().map(|p| {
                Some(
                    deleted.binary_search(p).is_err()
                        && only.as_ref().is_none_or(|o| o.binary_search(p).is_ok()),
                )
            }));
            let table = reading
                .read
                .iter()
                .zip(batch.columns())
                .map(|(c, column)| in_type(column, reading.table_schema.field(*c)))
                .collect::<Result<Vec<_>, _>>()?;
            let out = output(&reading, table, &path, Arc::new(positions), rows)?;
            Ok(filter_record_batch(&out, &keep)?)
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
pub(crate) async fn read_position_deletes(
    file_io: &FileIO,
    location: &str,
) -> DFResult<HashMap<String, Vec<i64>>> {
    let input = file_io.new_input(location).map_err(iceberg_error)?;
    let bytes = input.read().await.map_err(iceberg_error)?;
    // Format version 3's deletion vectors, in a Puffin file.
    if deletion_vectors::is_puffin(&bytes) {
        return deletion_vectors::read(file_io, location, &bytes)
            .await
            .map_err(iceberg_error);
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::arrow::arrow_reader::RowSelector;

    fn selectors(s: Option<Option<RowSelection>>) -> Option<Option<Vec<(bool, usize)>>> {
        s.map(|s| {
            s.map(|s| {
                let list: Vec<RowSelector> = s.into();
                list.iter().map(|r| (r.skip, r.row_count)).collect()
            })
        })
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn every_row_of_the_groups_read_is_no_selection() {
        assert_eq!(selectors(select(&[0..10, 10..20], &[], None)), Some(None));
        assert_eq!(selectors(select(&[0..10], &[10, 11], None)), Some(None));
    }

    #[test]
    fn deleted_rows_are_skipped_in_positions_among_the_groups_read() {
        // Groups 1 and 3 of a file (rows 10..20 and 40..50): rows 12 and 40 deleted.
        assert_eq!(
            selectors(select(&[10..20, 40..50], &[3, 12, 40, 60], None)),
            Some(Some(vec![
                (false, 2),
                (true, 1),
                (false, 7),
                (true, 1),
                (false, 9)
            ]))
        );
    }

    #[test]
    fn kept_rows_run_on_across_adjacent_groups() {
        assert_eq!(
            selectors(select(&[0..10, 10..20, 20..20, 20..30], &[5, 25], None)),
            Some(Some(vec![
                (false, 5),
                (true, 1),
                (false, 19),
                (true, 1),
                (false, 4)
            ]))
        );
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn only_the_rows_asked_for_and_not_deleted() {
        assert_eq!(
            selectors(select(
                &[10..20, 40..50],
                &[41],
                Some(&[5, 10, 11, 19, 40, 41, 49])
            )),
            Some(Some(vec![
                (false, 2),
                (true, 7),
                (false, 2),
                (true, 8),
                (false, 1)
            ]))
        );
        // Asked for twice: once.
        assert_eq!(
            selectors(select(&[0..10], &[], Some(&[3, 3, 4]))),
            Some(Some(vec![(true, 3), (false, 2), (true, 5)]))
        );
        // None of the rows asked for is in these groups, or all are deleted.
        assert_eq!(selectors(select(&[10..20], &[], Some(&[5, 25]))), None);
        assert_eq!(selectors(select(&[10..20], &[12], Some(&[12]))), None);
        assert_eq!(
            selectors(select(&[0..10], &(0..10).collect::<Vec<_>>(), None)),
            None
        );
    }

    fn task(path: &str, size: u64) -> FileScanTask {
        FileScanTask {
            file_size_in_bytes: size,
            start: 0,
            length: size,
            record_count: None,
            data_file_path: path.to_string(),
            data_file_format: iceberg::spec::DataFileFormat::Parquet,
            schema: Arc::new(
                iceberg::spec::Schema::builder()
                    .build()
                    .expect("an empty schema"),
            ),
            project_field_ids: Vec::new(),
            predicate: None,
            deletes: Vec::new(),
            partition: None,
            partition_spec: None,
            name_mapping: None,
            case_sensitive: true,
        }
    }

    #[test]
    fn large_files_are_read_in_byte_ranges_that_cover_them() {
        let mb = 1024 * 1024;
        let parts = split(vec![task("a", 200 * mb), task("b", 6 * mb)], 2);
        let ranges: Vec<(&str, Range<u64>)> = parts
            .iter()
            .map(|p| (p.task.data_file_path.as_str(), p.bytes.clone()))
            .collect();
        assert_eq!(
            ranges,
            vec![
                ("a", 0..100 * mb),
                ("a", 100 * mb..u64::MAX),
                ("b", 0..u64::MAX)
            ]
        );
        let groups = spread(parts, 2);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups.iter().map(Vec::len).sum::<usize>(), 3);
    }
}

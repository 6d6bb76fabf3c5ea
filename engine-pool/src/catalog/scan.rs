//! SQE's scan of an Iceberg table. The files are planned once, when the query is planned (manifests
//! and files pruned by the pushed-down filters). Each file is cut into byte ranges (a row group
//! belongs to the range holding it), and the ranges are spread over DataFusion's target partitions
//! so that every core reads. DataFusion's reader lets its partitions share the ranges (its work
//! stealing): a partition that is done takes the next unread range, so the cores finish together
//! however unevenly filters and joins thin the ranges' rows (scans DataFusion may run twice keep
//! their own: `optimizer::rerun`). TPC-H SF1 took 0.94 to 0.96× the time of fixed groups
//! (BENCHMARKS.md); sixteen smaller ranges a partition (down to 4 MiB) were 4% slower than eight in
//! one run. Files without delete files are read by DataFusion's own Parquet
//! reader, local ones and ones in object stores alike, columns resolved by field id (see
//! `parquet_read`); files with delete files, and tables with nested columns, by iceberg-rust's
//! reader, which applies the deletes.
//!
//! String columns are scanned as `Utf8View`: a dictionary-encoded page then decodes to views of the
//! dictionary instead of copies of every value, and comparisons and hashes of short strings work on
//! the inline view. Writers cast back to the table's types.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema as ArrowSchema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::Statistics;
use datafusion::common::stats::Precision;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use iceberg::arrow::{ArrowReaderBuilder, schema_to_arrow_schema};
use iceberg::expr::Predicate;
use iceberg::io::FileIO;
use iceberg::scan::FileScanTask;
use iceberg::spec::{DataContentType, DataFileFormat};
use iceberg::table::Table;

use super::{column_stats, file_plan, parquet_read, predicate, row_ids};

fn iceberg_error(e: iceberg::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// Ranges smaller than this are not cut further: a row group is the unit of work anyway.
const MIN_RANGE_BYTES: u64 = 8 * 1024 * 1024;

/// Ranges per partition a large file is cut into. Row groups fall into ranges unevenly (by their
/// midpoints), and the rows a range keeps after filters vary; several ranges per partition, shared
/// between the partitions, even out the work.
const RANGES_PER_PARTITION: u64 = 8;

/// A table (at its current snapshot, or at `snapshot_id`) for DataFusion.
#[derive(Clone)]
pub struct IcebergScanProvider {
    table: Table,
    snapshot_id: Option<i64>,
    schema: SchemaRef,
    /// The Iceberg schema the scan reads with, for the pushed-down predicate's types.
    iceberg_schema: iceberg::spec::SchemaRef,
    /// Each top-level column's field id, by name.
    field_ids: HashMap<String, i32>,
    /// The SQE catalog the table is in, so that the table's policies find its scans by the
    /// table itself, whatever name the statement used (a view's, time travel's).
    catalog_name: Option<String>,
    /// The catalog's manifests already read, for the column statistics.
    manifests: Option<Arc<column_stats::ManifestCache>>,
    /// Set for the scans of row-level changes: every row with its file and position.
    row_ids: Option<row_ids::RowIds>,
}

/// Without the table's file IO, whose properties may hold the caller's token and storage keys.
impl fmt::Debug for IcebergScanProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IcebergScanProvider")
            .field("table", self.table.identifier())
            .field("snapshot_id", &self.snapshot_id)
            .finish()
    }
}

impl IcebergScanProvider {
    /// Reads the current snapshot with the table's current schema, or `snapshot_id` with the schema
    /// that snapshot was written with.
    pub fn try_new(table: Table, snapshot_id: Option<i64>) -> iceberg::Result<Self> {
        let metadata = table.metadata();
        let schema = match snapshot_id {
            Some(id) => {
                let snapshot = metadata.snapshot_by_id(id).ok_or_else(|| {
                    iceberg::Error::new(
                        iceberg::ErrorKind::DataInvalid,
                        format!("snapshot {id} does not exist"),
                    )
                })?;
                snapshot.schema(metadata)?
            }
            None => metadata.current_schema().clone(),
        };
        // Field ids are for iceberg-rust's reader, which resolves columns by them; DataFusion
        // compares top-level field metadata between its logical and physical plans, and a UNION of
        // columns from different tables (different ids) would fail that check. Top-level strings
        // are read as views.
        let arrow = schema_to_arrow_schema(&schema)?;
        let field_ids = schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| (f.name.clone(), f.id))
            .collect();
        let fields: Vec<Field> = arrow
            .fields()
            .iter()
            .map(|f| {
                let mut metadata = f.metadata().clone();
                metadata.remove(PARQUET_FIELD_ID_META_KEY);
                let field = f.as_ref().clone().with_metadata(metadata);
                match field.data_type() {
                    DataType::Utf8 => field.with_data_type(DataType::Utf8View),
                    _ => field,
                }
            })
            .collect();
        Ok(Self {
            schema: Arc::new(ArrowSchema::new_with_metadata(
                fields,
                arrow.metadata().clone(),
            )),
            table,
            snapshot_id,
            iceberg_schema: schema,
            field_ids,
            catalog_name: None,
            manifests: None,
            row_ids: None,
        })
    }

    /// This scan, known as a table of the SQE catalog `name`.
    pub fn in_catalog(mut self, name: &str) -> Self {
        self.catalog_name = Some(name.to_string());
        self
    }

    /// Reads the manifests for the column statistics through the catalog's `cache`.
    pub fn with_manifests(mut self, cache: Option<Arc<column_stats::ManifestCache>>) -> Self {
        self.manifests = cache;
        self
    }

    /// This scan with two more columns, `$path` and `$pos`: each row's data file and its position
    /// in it (see `row_ids`); of the files or rows `reach` names.
    pub(crate) fn with_row_ids(mut self, reach: row_ids::Reach) -> Self {
        if self.row_ids.is_none() {
            self.schema = Arc::new(row_ids::with_row_id_columns(&self.schema));
        }
        self.row_ids = Some(row_ids::RowIds { reach });
        self
    }

    /// (SQE catalog, schema, table) of a scan made with [`Self::in_catalog`].
    pub fn origin(&self) -> Option<(String, String, String)> {
        let ident = self.table.identifier();
        Some((
            self.catalog_name.clone()?,
            ident.namespace().to_url_string(),
            ident.name().to_string(),
        ))
    }

    /// The table's UUID (Iceberg's, for the life of the table, renames included).
    pub fn table_uuid(&self) -> String {
        self.table.metadata().uuid().to_string()
    }

    /// The field id of each top-level column of the table's current schema, by name.
    pub fn current_field_ids(&self) -> HashMap<String, i32> {
        self.table
            .metadata()
            .current_schema()
            .as_struct()
            .fields()
            .iter()
            .map(|f| (f.name.clone(), f.id))
            .collect()
    }

    /// The field id of each top-level column read, by name.
    pub fn field_ids(&self) -> &HashMap<String, i32> {
        &self.field_ids
    }

    /// The files to read, planned by SQE itself where it can (`file_plan`), with their columns'
    /// statistics; `None` for the tables iceberg-rust plans.
    async fn plan_alone(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
    ) -> DFResult<Option<file_plan::PlannedFiles>> {
        let Some(cache) = self.manifests.as_deref() else {
            return Ok(None);
        };
        // Nested columns are read by iceberg-rust's reader, as iceberg-rust plans them (and
        // DataFusion's pruning asserts that a nested type keeps its fields' metadata, the field
        // ids, which a literal's type lacks).
        if self
            .schema
            .fields()
            .iter()
            .any(|f| parquet_read::nested(f.data_type()))
        {
            return Ok(None);
        }
        let columns = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let read: Vec<i32> = columns
            .iter()
            .filter_map(|i| self.field_ids.get(self.schema.field(*i).name()).copied())
            .collect();
        file_plan::plan(
            cache,
            &self.table,
            self.snapshot_id,
            &self.iceberg_schema,
            &self.schema,
            &self.field_ids,
            &read,
            &file_plan::pruning(state, &self.schema, filters),
        )
        .await
        .map_err(iceberg_error)
    }

    /// The files to read, as iceberg-rust plans them: manifests and files pruned by `predicate`,
    /// each with the delete files that apply to it.
    async fn plan_with_iceberg(
        &self,
        projection: Option<&Vec<usize>>,
        predicate: Option<&Predicate>,
    ) -> DFResult<Vec<FileScanTask>> {
        let mut builder = match self.snapshot_id {
            Some(id) => self.table.scan().snapshot_id(id),
            None => self.table.scan(),
        };
        builder = match projection {
            Some(p) => builder.select(p.iter().map(|i| self.schema.field(*i).name().clone())),
            None => builder.select_all(),
        };
        if let Some(p) = predicate {
            builder = builder.with_filter(p.clone());
        }
        let scan = builder.build().map_err(iceberg_error)?;
        scan.plan_files()
            .await
            .map_err(iceberg_error)?
            .try_collect()
            .await
            .map_err(iceberg_error)
    }
}

/// What a scan of `source` reads, when it is one of SQE's Iceberg scans: the table's metadata
/// file (one per version of the table), the snapshot and whether it gives row ids. Two scans with
/// the same answer read the same rows; the optimizer computes such plans once (optimizer/shared_cte.rs).
pub(crate) fn data_identity(source: &dyn datafusion::logical_expr::TableSource) -> Option<String> {
    let provider = source
        .downcast_ref::<datafusion::datasource::DefaultTableSource>()?
        .table_provider
        .downcast_ref::<IcebergScanProvider>()?;
    Some(format!(
        "{}@{:?}{}",
        provider.table.metadata_location()?,
        provider.snapshot_id,
        if provider.row_ids.is_some() {
            "+row ids"
        } else {
            ""
        }
    ))
}

#[async_trait]
impl TableProvider for IcebergScanProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        // Iceberg format version 3's default values for rows written before a column was
        // added: SQE's readers would read NULL there, so such a column is refused by name.
        let read: Vec<&str> = match projection {
            Some(p) => p
                .iter()
                .map(|i| self.schema.field(*i).name().as_str())
                .collect(),
            None => self
                .schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect(),
        };
        if let Some(column) = defaulted(&self.iceberg_schema, &read) {
            return Err(DataFusionError::NotImplemented(format!(
                "column '{column}' has a default value for rows written before it was added (Iceberg format version 3's initial-default), which SQE does not read yet"
            )));
        }
        if let Some(row_ids) = &self.row_ids {
            return row_ids::plan(
                &self.table,
                self.snapshot_id,
                &self.schema,
                &self.iceberg_schema,
                row_ids,
                state,
                projection,
                filters,
            )
            .await;
        }
        let output_schema = match projection {
            Some(p) => Arc::new(self.schema.project(p)?),
            None => self.schema.clone(),
        };
        let predicate = predicate::from_filters(filters, &self.iceberg_schema);
        // What SQE plans alone, DataFusion's reader reads: files it cannot open (a path neither
        // local nor a URL) go to iceberg-rust's reader as iceberg-rust plans them.
        let alone = self
            .plan_alone(state, projection, filters)
            .await?
            .filter(|p| p.tasks.is_empty() || parquet_read::readable(&p.tasks));
        let (tasks, columns) = match alone {
            Some(planned) => (planned.tasks, Some(planned.columns)),
            None => (
                self.plan_with_iceberg(projection, predicate.as_ref())
                    .await?,
                None,
            ),
        };
        let partitions = state.config().target_partitions().max(1);
        let files = tasks.len();
        let datafusion_reads = parquet_read::readable(&tasks);
        let groups = spread(tasks, partitions);
        let all: Vec<&FileScanTask> = groups.iter().flatten().collect();
        // Row counts, and column bounds and null counts from the manifests, for either reader: the
        // planner needs them to choose a join's build side.
        let mut statistics = row_count(&self.schema, &all, predicate.is_none(), None);
        statistics.column_statistics = match columns {
            Some(columns) => columns,
            None => {
                let paths = all.iter().map(|t| t.data_file_path.as_str()).collect();
                column_stats::from_manifests(
                    self.manifests.as_deref(),
                    &self.table,
                    self.snapshot_id,
                    &self.schema,
                    &self.field_ids,
                    &paths,
                )
                .await
                .map_err(iceberg_error)?
            }
        };
        if datafusion_reads {
            // DataFusion's reader opens the files itself: the table's file IO judges them first,
            // as it judges every file it opens (see `storage`).
            for task in &all {
                let file_io = self.table.file_io();
                file_io
                    .new_input(&task.data_file_path)
                    .map_err(iceberg_error)?;
            }
            return parquet_read::plan(
                state,
                self.table.file_io(),
                self.schema.clone(),
                &self.field_ids,
                groups,
                projection,
                limit,
                statistics,
            );
        }
        // Files with position deletes: SQE's own reader of rows by position, which skips the
        // deleted ones as it reads and resolves nested fields by id (row_ids.rs).
        if !all.is_empty() && position_deletes_only(&all) {
            let table_columns: Vec<usize> = (0..self.schema.fields().len()).collect();
            return row_ids::plan(
                &self.table,
                self.snapshot_id,
                &Arc::new(row_ids::with_row_id_columns(&self.schema)),
                &self.iceberg_schema,
                &row_ids::RowIds::default(),
                state,
                Some(projection.unwrap_or(&table_columns)),
                filters,
            )
            .await;
        }
        let read = output_schema
            .fields()
            .iter()
            .filter_map(|f| self.iceberg_schema.field_by_name(f.name()));
        if let Some(column) = reshaped_row(self.table.metadata(), read.map(|f| f.as_ref())) {
            return Err(reshaped_refusal(&column));
        }
        let statistics = match projection {
            Some(p) => statistics.project(Some(p)),
            None => statistics,
        };
        Ok(Arc::new(IcebergScanExec {
            statistics: statistics.with_fetch(limit, 0, 1)?,
            file_io: self.table.file_io().clone(),
            properties: Arc::new(PlanProperties::new(
                EquivalenceProperties::new(output_schema.clone()),
                Partitioning::UnknownPartitioning(groups.len().max(1)),
                EmissionType::Incremental,
                Boundedness::Bounded,
            )),
            schema: output_schema,
            groups,
            files,
            predicate,
            batch_size: state.config().batch_size(),
            limit,
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DFResult<Vec<TableProviderFilterPushDown>> {
        // Pruning only: DataFusion still applies every filter to the rows.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }
}

/// The first of the `columns` of `schema` (or a field inside one, by its path) that has an
/// initial-default.
fn defaulted(schema: &iceberg::spec::Schema, columns: &[&str]) -> Option<String> {
    use iceberg::spec::{NestedFieldRef, Type};
    fn within(field: &NestedFieldRef, path: String) -> Option<String> {
        if field.initial_default.is_some() {
            return Some(path);
        }
        let inner: Vec<&NestedFieldRef> = match field.field_type.as_ref() {
            Type::Struct(s) => s.fields().iter().collect(),
            Type::List(l) => vec![&l.element_field],
            Type::Map(m) => vec![&m.key_field, &m.value_field],
            Type::Primitive(_) => Vec::new(),
        };
        inner
            .into_iter()
            .find_map(|f| within(f, format!("{path}.{}", f.name)))
    }
    columns.iter().find_map(|name| {
        let field = schema.as_struct().field_by_name(name)?;
        within(field, field.name.clone())
    })
}

/// Whether every file is Parquet and every delete file a position delete file.
fn position_deletes_only(tasks: &[&FileScanTask]) -> bool {
    tasks.iter().all(|t| {
        t.data_file_format == DataFileFormat::Parquet
            && t.deletes
                .iter()
                .all(|d| d.file_type == DataContentType::PositionDeletes)
    })
}

/// The first of `columns` whose nested fields an earlier schema of the table had otherwise (other
/// ids, names or order). iceberg-rust's reader casts such a column by name (or by position), which
/// would read a dropped field's data under a new field's name.
pub(crate) fn reshaped_row<'a>(
    metadata: &iceberg::spec::TableMetadata,
    mut columns: impl Iterator<Item = &'a iceberg::spec::NestedField>,
) -> Option<String> {
    use iceberg::spec::Type;
    fn shape(ty: &Type, out: &mut Vec<(i32, String)>) {
        let fields = match ty {
            Type::Struct(s) => s.fields().to_vec(),
            Type::List(l) => vec![l.element_field.clone()],
            Type::Map(m) => vec![m.key_field.clone(), m.value_field.clone()],
            Type::Primitive(_) => return,
        };
        for f in fields {
            out.push((f.id, f.name.clone()));
            shape(&f.field_type, out);
        }
    }
    columns.find_map(|field| {
        let mut now = Vec::new();
        shape(&field.field_type, &mut now);
        if now.is_empty() {
            return None;
        }
        metadata
            .schemas_iter()
            .filter_map(|s| s.field_by_id(field.id))
            .any(|old| {
                let mut then = Vec::new();
                shape(&old.field_type, &mut then);
                then != now
            })
            .then(|| field.name.clone())
    })
}

/// The refusal of a read [`reshaped_row`] finds.
pub(crate) fn reshaped_refusal(column: &str) -> DataFusionError {
    DataFusionError::NotImplemented(format!(
        "column '{column}' of this table had fields added, dropped or renamed, and files with delete files are read by a reader that would match its fields by name; run ALTER TABLE … EXECUTE optimize to fold the deletes in first"
    ))
}

/// A batch from iceberg-rust's reader in the types the scan declares (its strings are `Utf8`).
fn as_declared(schema: &SchemaRef, batch: &RecordBatch) -> DFResult<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c.clone())
            } else {
                cast(c, f.data_type())
            }
        })
        .collect::<Result<Vec<ArrayRef>, _>>()?;
    let rows = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &rows,
    )?)
}

/// Cuts the files into byte ranges and deals them out so each of `partitions` groups gets about the
/// same number of bytes. A file smaller than its share stays whole.
fn spread(tasks: Vec<FileScanTask>, partitions: usize) -> Vec<Vec<FileScanTask>> {
    let length = |t: &FileScanTask| {
        if t.length == 0 {
            t.file_size_in_bytes
        } else {
            t.length
        }
    };
    let total: u64 = tasks.iter().map(length).sum();
    let share = (total / (partitions as u64 * RANGES_PER_PARTITION)).max(MIN_RANGE_BYTES);
    let mut ranges = Vec::new();
    for task in tasks {
        let bytes = length(&task);
        let pieces = bytes.div_ceil(share).max(1);
        if pieces == 1 {
            ranges.push(task);
            continue;
        }
        let step = bytes.div_ceil(pieces);
        let mut start = task.start;
        let end = task.start + bytes;
        while start < end {
            let mut piece = task.clone();
            piece.start = start;
            piece.length = step.min(end - start);
            start += piece.length;
            ranges.push(piece);
        }
    }
    super::balance::balance(ranges, partitions, length)
}

/// Reads its groups of file ranges, one group per partition.
pub struct IcebergScanExec {
    file_io: FileIO,
    properties: Arc<PlanProperties>,
    schema: SchemaRef,
    groups: Vec<Vec<FileScanTask>>,
    files: usize,
    predicate: Option<Predicate>,
    batch_size: usize,
    limit: Option<usize>,
    /// The whole scan's statistics (each partition's are its row count only).
    statistics: Statistics,
    metrics: ExecutionPlanMetricsSet,
}

impl fmt::Debug for IcebergScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IcebergScanExec")
            .field("files", &self.files)
            .field("partitions", &self.groups.len())
            .finish_non_exhaustive()
    }
}

impl DisplayAs for IcebergScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let columns: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|c| c.name().as_str())
            .collect();
        write!(
            f,
            "IcebergScan: files={}, ranges={}, partitions={}, projection=[{}]",
            self.files,
            self.groups.iter().map(Vec::len).sum::<usize>(),
            self.groups.len(),
            columns.join(", ")
        )?;
        if let Some(p) = &self.predicate {
            write!(f, ", predicate=[{p}]")?;
        }
        if let Some(l) = self.limit {
            write!(f, ", limit={l}")?;
        }
        Ok(())
    }
}

/// Rows a range holds, estimated from its file's record count and the share of the file it covers.
/// Row counts from the manifests, so joins build on their smaller side. The count of some ranges
/// is an estimate (a range holds its share of the file's rows); the count of `whole` files (every
/// range of them, no predicate) is exact when no delete file can remove rows, so `count(*)` needs
/// no reading.
fn row_count(
    schema: &SchemaRef,
    tasks: &[&FileScanTask],
    whole: bool,
    limit: Option<usize>,
) -> Statistics {
    let stats = Statistics::new_unknown(schema);
    let cap = |rows: usize| limit.map_or(rows, |l| rows.min(l));
    if whole && tasks.iter().all(|t| t.deletes.is_empty()) {
        let mut files = BTreeMap::new();
        for t in tasks {
            files.insert(t.data_file_path.as_str(), t.record_count);
        }
        if let Some(rows) = files.into_values().sum::<Option<u64>>()
            && let Ok(rows) = usize::try_from(rows)
        {
            return stats.with_num_rows(Precision::Exact(cap(rows)));
        }
    }
    match tasks.iter().map(|t| range_rows(t)).sum::<Option<usize>>() {
        Some(rows) => stats.with_num_rows(Precision::Inexact(cap(rows))),
        None => stats,
    }
}

fn range_rows(t: &FileScanTask) -> Option<usize> {
    let records = t.record_count?;
    if t.length == 0 || t.file_size_in_bytes == 0 || t.length >= t.file_size_in_bytes {
        return usize::try_from(records).ok();
    }
    let share = t.length as f64 / t.file_size_in_bytes as f64;
    Some((records as f64 * share).round() as usize)
}

impl ExecutionPlan for IcebergScanExec {
    fn name(&self) -> &str {
        "IcebergScan"
    }

    fn partition_statistics(&self, partition: Option<usize>) -> DFResult<Arc<Statistics>> {
        let Some(p) = partition else {
            return Ok(Arc::new(self.statistics.clone()));
        };
        let tasks: Vec<&FileScanTask> = self.groups.get(p).into_iter().flatten().collect();
        Ok(Arc::new(row_count(&self.schema, &tasks, false, self.limit)))
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

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let tasks = self.groups.get(partition).cloned().unwrap_or_default();
        let runtime = iceberg::Runtime::try_current().map_err(iceberg_error)?;
        let reader = ArrowReaderBuilder::new(self.file_io.clone(), runtime)
            .with_batch_size(self.batch_size)
            .with_data_file_concurrency_limit(2)
            .with_row_group_filtering_enabled(true)
            .with_row_selection_enabled(true)
            .build();
        let output_rows = MetricBuilder::new(&self.metrics).output_rows(partition);
        let schema = self.schema.clone();
        let stream = reader
            .read(Box::pin(futures::stream::iter(tasks.into_iter().map(Ok))))
            .map_err(iceberg_error)?
            .stream()
            .map_err(iceberg_error)
            // The batches as the plan declares them: strings as views, without the readers' field
            // ids.
            .and_then(move |b| futures::future::ready(as_declared(&schema, &b)))
            .inspect_ok(move |b| output_rows.add(b.num_rows()));
        let stream = match self.limit {
            None => stream.boxed(),
            Some(limit) => {
                let mut remaining = limit;
                stream
                    .try_filter_map(move |batch| {
                        let out = if remaining == 0 {
                            None
                        } else if batch.num_rows() <= remaining {
                            remaining -= batch.num_rows();
                            Some(batch)
                        } else {
                            let b = batch.slice(0, remaining);
                            remaining = 0;
                            Some(b)
                        };
                        futures::future::ready(Ok::<_, DataFusionError>(out))
                    })
                    .boxed()
            }
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            stream,
        )))
    }
}

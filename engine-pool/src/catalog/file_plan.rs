//! The file planning of a scan, done by SQE for the tables it can plan alone: no partitions in
//! any of the table's specs and no delete files in the snapshot (what SQE's own CREATE TABLE and
//! INSERT write), read through a catalog that keeps its parsed manifests ([`ManifestCache`]). The
//! snapshot's live data files come from that cache; a file is kept unless DataFusion's pruning of
//! the scan's filters over the file's column bounds, null counts and row count proves that none
//! of its rows can match. The same pass gives the column statistics of the files kept.
//!
//! iceberg-rust's `plan_files` does this work in spawned tasks that hand each manifest entry on
//! through channels, its `TableScan` checks every column name by building an error (which
//! captures a backtrace whenever `RUST_BACKTRACE` is set), and it reads the cgroup files for the
//! number of cores on every scan: about two thirds of the CPU time of TPC-DS's scan planning
//! (BENCHMARKS.md). Tables with partitions (whose pruning needs the partition transforms) or
//! delete files (which must be matched to the data files) still go through iceberg-rust.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, ColumnStatistics, DFSchema, ScalarValue};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, lit};
use datafusion::physical_optimizer::pruning::PruningPredicate;
use iceberg::scan::FileScanTask;
use iceberg::spec::{DataContentType, DataFile, DataFileFormat, Manifest, ManifestContentType};
use iceberg::table::Table;

use super::column_stats::{self, ManifestCache};

/// The files a scan reads and their columns' statistics.
pub(crate) struct PlannedFiles {
    pub tasks: Vec<FileScanTask>,
    pub columns: Vec<ColumnStatistics>,
}

/// The pruning predicates of a scan's `filters` over its table's `schema`: one per filter that
/// DataFusion can prune with (the others only cost reading a file that a filter then empties).
///
/// They see the string columns as `Utf8`, not as the views the scan reads: DataFusion 54.1 prunes
/// `LIKE 'prefix%'` by comparing the bounds with `Utf8` literals, which a view does not compare
/// with. A boolean column `b` is asked as `b = true`, its value everywhere.
pub(crate) fn pruning(state: &dyn Session, schema: &Schema, filters: &[Expr]) -> Pruning {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8View => f.as_ref().clone().with_data_type(DataType::Utf8),
            _ => f.as_ref().clone(),
        })
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let predicates = match DFSchema::try_from(schema.as_ref().clone()) {
        Ok(columns) => filters
            .iter()
            .filter_map(|filter| {
                let filter = filter
                    .clone()
                    .transform(|e| {
                        Ok(match e {
                            Expr::Literal(ScalarValue::Utf8View(v), meta) => {
                                Transformed::yes(Expr::Literal(ScalarValue::Utf8(v), meta))
                            }
                            // The same value, which DataFusion prunes by the bounds and also
                            // where a file's column is all NULL.
                            Expr::Column(c)
                                if schema
                                    .field_with_name(&c.name)
                                    .is_ok_and(|f| f.data_type() == &DataType::Boolean) =>
                            {
                                Transformed::yes(Expr::Column(c).eq(lit(true)))
                            }
                            e => Transformed::no(e),
                        })
                    })
                    .ok()?
                    .data;
                let expr = state
                    .create_physical_expr(null_as_false(filter), &columns)
                    .ok()?;
                let predicate = PruningPredicate::try_new(expr, Arc::clone(&schema)).ok()?;
                (!predicate.always_true()).then_some(predicate)
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    Pruning { schema, predicates }
}

/// `filter` with each NULL that stands under nothing but AND, OR and NOT as FALSE: no row for which
/// `filter` is TRUE changes, and DataFusion prunes with a FALSE (the planner writes `x IN (1, NULL)`
/// as `x = 1 OR NULL`).
fn null_as_false(filter: Expr) -> Expr {
    match filter {
        Expr::Literal(ScalarValue::Boolean(None), _) => lit(false),
        Expr::Not(inner) => Expr::Not(Box::new(null_as_false(*inner))),
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::And | Operator::Or) =>
        {
            Expr::BinaryExpr(BinaryExpr::new(
                Box::new(null_as_false(*left)),
                op,
                Box::new(null_as_false(*right)),
            ))
        }
        other => other,
    }
}

/// What prunes a scan's files: predicates over the columns of `schema`.
pub(crate) struct Pruning {
    schema: SchemaRef,
    predicates: Vec<PruningPredicate>,
}

/// The data files of `snapshot_id` (the current snapshot if None) that `pruning` keeps, as
/// whole-file tasks reading `project_field_ids`, with the statistics of the columns of `schema`
/// (field ids in `ids`) over them. `None` when the table is not one SQE plans alone (see the
/// module's documentation): the caller then asks iceberg-rust.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn plan(
    cache: &ManifestCache,
    table: &Table,
    snapshot_id: Option<i64>,
    iceberg_schema: &iceberg::spec::SchemaRef,
    schema: &Schema,
    ids: &HashMap<String, i32>,
    project_field_ids: &[i32],
    pruning: &Pruning,
) -> iceberg::Result<Option<PlannedFiles>> {
    let metadata = table.metadata();
    if !metadata
        .partition_specs_iter()
        .all(|s| s.is_unpartitioned())
    {
        return Ok(None);
    }
    let snapshot = match snapshot_id {
        Some(id) => metadata.snapshot_by_id(id),
        None => metadata.current_snapshot(),
    };
    let Some(snapshot) = snapshot else {
        return Ok(None);
    };
    let list = cache.list(table, snapshot).await?;
    if list
        .entries()
        .iter()
        .any(|m| m.content != ManifestContentType::Data)
    {
        return Ok(None);
    }
    let mut manifests: Vec<Arc<Manifest>> = Vec::with_capacity(list.entries().len());
    for manifest_file in list.entries() {
        manifests.push(cache.manifest(table, manifest_file).await?);
    }
    let mut files: Vec<&DataFile> = Vec::new();
    for entry in manifests.iter().flat_map(|m| m.entries()) {
        if !entry.is_alive() {
            continue;
        }
        let file = entry.data_file();
        if file.content_type() != DataContentType::Data
            || file.file_format() != DataFileFormat::Parquet
        {
            return Ok(None);
        }
        files.push(file);
    }
    let bounds = FileBounds {
        files: &files,
        schema: &pruning.schema,
        ids,
    };
    let mut keep = vec![true; files.len()];
    for predicate in &pruning.predicates {
        // A predicate DataFusion cannot evaluate over these bounds prunes nothing.
        if let Ok(kept) = predicate.prune(&bounds) {
            keep.iter_mut().zip(kept).for_each(|(k, p)| *k &= p);
        }
    }
    let kept: Vec<&DataFile> = files
        .iter()
        .zip(&keep)
        .filter_map(|(f, k)| k.then_some(*f))
        .collect();
    let columns = column_stats::from_files(schema, ids, kept.iter().copied());
    let tasks = kept
        .iter()
        .map(|file| FileScanTask {
            file_size_in_bytes: file.file_size_in_bytes(),
            start: 0,
            length: file.file_size_in_bytes(),
            record_count: Some(file.record_count()),
            data_file_path: file.file_path().to_string(),
            data_file_format: file.file_format(),
            schema: Arc::clone(iceberg_schema),
            project_field_ids: project_field_ids.to_vec(),
            predicate: None,
            deletes: Vec::new(),
            partition: Some(file.partition().clone()),
            partition_spec: None,
            name_mapping: None,
            case_sensitive: true,
        })
        .collect();
    Ok(Some(PlannedFiles { tasks, columns }))
}

/// The manifests' statistics of each file, for DataFusion's pruning: a file is a container.
struct FileBounds<'a> {
    files: &'a [&'a DataFile],
    schema: &'a Schema,
    ids: &'a HashMap<String, i32>,
}

impl FileBounds<'_> {
    /// Each file's lower (or upper) bound of `column`, null where it has none. Iceberg's bounds of
    /// floating-point columns leave NaN out, which DataFusion orders above every number: such a
    /// column's bounds count only in files known to hold no NaN.
    fn bounds(&self, column: &Column, upper: bool) -> Option<ArrayRef> {
        let field = self.schema.field_with_name(&column.name).ok()?;
        let id = *self.ids.get(&column.name)?;
        let floating = matches!(
            field.data_type(),
            DataType::Float16 | DataType::Float32 | DataType::Float64
        );
        let unknown = ScalarValue::try_from(field.data_type()).ok()?;
        let values = self.files.iter().map(|file| {
            if floating && file.nan_value_counts().get(&id) != Some(&0) {
                return unknown.clone();
            }
            let bounds = if upper {
                file.upper_bounds()
            } else {
                file.lower_bounds()
            };
            column_stats::bound(bounds.get(&id), field).unwrap_or_else(|| unknown.clone())
        });
        ScalarValue::iter_to_array(values).ok()
    }
}

impl PruningStatistics for FileBounds<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, false)
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, true)
    }

    fn num_containers(&self) -> usize {
        self.files.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let id = *self.ids.get(&column.name)?;
        let counts: UInt64Array = self
            .files
            .iter()
            .map(|f| f.null_value_counts().get(&id).copied())
            .collect();
        Some(Arc::new(counts))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        let rows: UInt64Array = self.files.iter().map(|f| Some(f.record_count())).collect();
        Some(Arc::new(rows))
    }

    fn contained(&self, _: &Column, _: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

//! No answer taken from the bounds of a floating-point column. Not a speed-up: without it a query
//! over a Parquet file holding NaN can silently lose rows or change them.
//!
//! Parquet writers leave NaN out of a column chunk's and a page's min/max (arrow-rs does, as the
//! format asks), and DataFusion 54.1 uses those bounds as if they held every value:
//! - A file's exact statistics answer `max(f)` without a scan, and a file whose min equals its
//!   max has that column replaced by the value when it is opened: with rows 5.0 and NaN, `max(f)`
//!   is 5.0 and `SELECT f` returns 5.0 twice. [`InexactFloatBounds`] runs before every other rule
//!   and marks the bounds of floating-point columns inexact, in a scan's statistics, its file
//!   groups' and each file's.
//! - Row-group and page pruning skip that file for `f <> 5.0` (its bounds are [5.0, 5.0], though
//!   NaN <> 5.0) and for `f > 9.0` (though DataFusion orders NaN above every number).
//!   [`NoFloatBoundPruning`] runs after every other rule and takes each conjunct that reads a
//!   floating-point column out of a Parquet scan's predicate (the query's own filters and the
//!   dynamic filters of joins and TopK alike); the FilterExec above the scan still applies them to
//!   every row, and the other conjuncts still prune.
//!
//! With `pushdown_filters` on, the scan's predicate also filters rows and no FilterExec is left
//! above it, so such a scan keeps its predicate whole. SQE's own Iceberg file planning
//! (`catalog::file_plan`) prunes files by float bounds only where Iceberg counted no NaN.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::TransformedResult;
use datafusion::common::{Result, Statistics};
use datafusion::datasource::physical_plan::{
    FileGroup, FileScanConfigBuilder, FileSource, ParquetSource,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::lit;
use datafusion::physical_expr::utils::{collect_columns, conjunction, split_conjunction};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;

#[derive(Debug)]
pub(crate) struct InexactFloatBounds;

impl PhysicalOptimizerRule for InexactFloatBounds {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        super::exec::change_file_scans(plan, |config| {
            let schema = config.file_source().table_schema().table_schema();
            if !schema.fields().iter().any(|f| holds_float(f.data_type())) {
                return None;
            }
            let mut statistics = config.statistics();
            inexact_floats(&mut statistics, schema);
            let groups = config
                .file_groups
                .iter()
                .map(|group| inexact_group(group, schema))
                .collect();
            let builder = FileScanConfigBuilder::from(config.clone());
            Some(
                builder
                    .with_statistics(statistics)
                    .with_file_groups(groups)
                    .build(),
            )
        })
        .data()
    }

    fn name(&self) -> &str {
        "InexactFloatBounds"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `group` with the float bounds in its statistics and its files' marked inexact.
fn inexact_group(group: &FileGroup, schema: &Schema) -> FileGroup {
    let files = group
        .iter()
        .map(|file| {
            let mut file = file.clone();
            if let Some(statistics) = &mut file.statistics {
                inexact_floats(Arc::make_mut(statistics), schema);
            }
            file
        })
        .collect();
    let mut inexact = FileGroup::new(files);
    if let Some(statistics) = group.file_statistics(None) {
        let mut statistics = statistics.clone();
        inexact_floats(&mut statistics, schema);
        inexact = inexact.with_statistics(Arc::new(statistics));
    }
    inexact
}

/// Marks the bounds and sums of the floating-point columns of `statistics` (over `schema`'s
/// columns, in order) inexact.
fn inexact_floats(statistics: &mut Statistics, schema: &Schema) {
    for (column, field) in statistics.column_statistics.iter_mut().zip(schema.fields()) {
        if holds_float(field.data_type()) {
            column.min_value = std::mem::take(&mut column.min_value).to_inexact();
            column.max_value = std::mem::take(&mut column.max_value).to_inexact();
            column.sum_value = std::mem::take(&mut column.sum_value).to_inexact();
        }
    }
}

#[derive(Debug)]
pub(crate) struct NoFloatBoundPruning;

impl PhysicalOptimizerRule for NoFloatBoundPruning {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        super::exec::change_file_scans(plan, |config| {
            let source = without_float_conjuncts(config.file_source())?;
            Some(
                FileScanConfigBuilder::from(config.clone())
                    .with_source(source)
                    .build(),
            )
        })
        .data()
    }

    fn name(&self) -> &str {
        "NoFloatBoundPruning"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// A Parquet source whose predicate no longer reads floating-point columns; None when `source`
/// is not a Parquet source, filters rows with its predicate, or has no such conjunct.
fn without_float_conjuncts(source: &Arc<dyn FileSource>) -> Option<Arc<dyn FileSource>> {
    let parquet = source.downcast_ref::<ParquetSource>()?;
    if parquet.table_parquet_options().global.pushdown_filters {
        return None;
    }
    let predicate = parquet.filter()?;
    // The predicate is over the table's columns, not the scan's output.
    let schema = source.table_schema().table_schema();
    let conjuncts = split_conjunction(&predicate);
    let kept: Vec<Arc<dyn PhysicalExpr>> = conjuncts
        .iter()
        .filter(|e| !reads_float(e, schema))
        .map(|e| Arc::clone(e))
        .collect();
    if kept.len() == conjuncts.len() {
        return None;
    }
    // A source has no way back to no predicate; `true` prunes nothing.
    let predicate = if kept.is_empty() {
        lit(true)
    } else {
        conjunction(kept)
    };
    Some(Arc::new(parquet.with_predicate(predicate)))
}

/// Whether `expr` reads a column that holds floating-point values, at any depth.
fn reads_float(expr: &Arc<dyn PhysicalExpr>, schema: &Schema) -> bool {
    collect_columns(expr).iter().any(|c| {
        schema
            .fields()
            .get(c.index())
            .is_none_or(|f| holds_float(f.data_type()))
    })
}

fn holds_float(data_type: &DataType) -> bool {
    match data_type {
        DataType::Float16 | DataType::Float32 | DataType::Float64 => true,
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => holds_float(f.data_type()),
        DataType::Struct(fields) => fields.iter().any(|f| holds_float(f.data_type())),
        DataType::Dictionary(_, value) => holds_float(value),
        DataType::RunEndEncoded(_, values) => holds_float(values.data_type()),
        DataType::Union(fields, _) => fields.iter().any(|(_, f)| holds_float(f.data_type())),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Field;

    #[test]
    fn floats_are_found_inside_nested_types() {
        let inner = Arc::new(Field::new("x", DataType::Float32, true));
        assert!(holds_float(&DataType::Float64));
        assert!(holds_float(&DataType::List(Arc::clone(&inner))));
        let fields = vec![Field::new("a", DataType::Int32, true), (*inner).clone()];
        assert!(holds_float(&DataType::Struct(fields.into())));
        assert!(!holds_float(&DataType::Decimal128(10, 2)));
        assert!(!holds_float(&DataType::Utf8View));
    }
}

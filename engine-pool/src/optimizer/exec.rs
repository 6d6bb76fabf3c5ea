//! What the optimizer's own execution plan nodes share.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayData, RecordBatch};
use datafusion::arrow::buffer::Buffer;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result as DFResult;
use datafusion::physical_plan::ExecutionPlan;

/// The one input among `children` given to an exec that has exactly one.
pub(crate) fn only_input(
    mut children: Vec<Arc<dyn ExecutionPlan>>,
    exec: &str,
) -> DFResult<Arc<dyn ExecutionPlan>> {
    match children.pop() {
        Some(input) if children.is_empty() => Ok(input),
        _ => Err(datafusion::error::DataFusionError::Internal(format!(
            "{exec} has exactly one input"
        ))),
    }
}

/// `plan` with each file scan's configuration replaced by what `change` makes of it (None: the
/// scan stays as it is).
pub(crate) fn change_file_scans(
    plan: Arc<dyn ExecutionPlan>,
    change: impl Fn(&FileScanConfig) -> Option<FileScanConfig>,
) -> DFResult<Transformed<Arc<dyn ExecutionPlan>>> {
    plan.transform_up(|node| {
        let Some(scan) = node.downcast_ref::<DataSourceExec>() else {
            return Ok(Transformed::no(node));
        };
        let Some(config) = scan.data_source().downcast_ref::<FileScanConfig>() else {
            return Ok(Transformed::no(node));
        };
        let Some(changed) = change(config) else {
            return Ok(Transformed::no(node));
        };
        let scan = scan.clone().with_data_source(Arc::new(changed));
        Ok(Transformed::yes(Arc::new(scan) as Arc<dyn ExecutionPlan>))
    })
}

/// The memory of `batch`'s buffers whose allocations are not in `seen` yet (which it adds).
/// Aggregates emit slices of one allocation and string views share their data buffers: counted
/// per array, each would count the whole allocation again.
pub(crate) fn unseen_memory(batch: &RecordBatch, seen: &mut HashSet<usize>) -> usize {
    fn walk(data: &ArrayData, seen: &mut HashSet<usize>) -> usize {
        let nulls = data.nulls().map(|n| n.buffer());
        let own: usize = data
            .buffers()
            .iter()
            .chain(nulls)
            .filter(|b| seen.insert(b.data_ptr().as_ptr() as usize))
            .map(Buffer::capacity)
            .sum();
        own + data
            .child_data()
            .iter()
            .map(|c| walk(c, seen))
            .sum::<usize>()
    }
    batch
        .columns()
        .iter()
        .map(|c| walk(&c.to_data(), seen))
        .sum()
}

//! Scans that DataFusion may run twice keep their own byte ranges. Not a speed-up: without it a
//! query can silently lose rows.
//!
//! The partitions of SQE's scans share their byte ranges (DataFusion's work stealing, see
//! `catalog::scan`): each range is handed out once per execution of the scan. DataFusion 54.1's
//! nested loop join, when holding its left side in memory fails, runs that side a second time to
//! spill it to disk, without resetting it; the second run of a shared-range scan would then read
//! only the ranges the first run left. The scans under a nested loop join's left side therefore
//! keep the ranges they were given, which any run reads again in full.

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::datasource::physical_plan::FileScanConfigBuilder;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::joins::NestedLoopJoinExec;

#[derive(Debug)]
pub(crate) struct OwnRangesWhereRunTwice;

impl PhysicalOptimizerRule for OwnRangesWhereRunTwice {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<NestedLoopJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            let left = own_ranges(Arc::clone(join.left()))?;
            if !left.transformed {
                return Ok(Transformed::no(node));
            }
            let children = vec![left.data, Arc::clone(join.right())];
            Ok(Transformed::yes(node.with_new_children(children)?))
        })
        .data()
    }

    fn name(&self) -> &str {
        "OwnRangesWhereRunTwice"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with each file scan in it reading only its own partitions' ranges.
fn own_ranges(plan: Arc<dyn ExecutionPlan>) -> Result<Transformed<Arc<dyn ExecutionPlan>>> {
    super::exec::change_file_scans(plan, |config| {
        (!config.partitioned_by_file_group).then(|| {
            FileScanConfigBuilder::from(config.clone())
                .with_partitioned_by_file_group(true)
                .build()
        })
    })
}

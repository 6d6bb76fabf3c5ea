//! What the optimizer's own execution plan nodes share.

use std::sync::Arc;

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

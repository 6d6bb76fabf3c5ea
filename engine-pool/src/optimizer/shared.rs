//! One computation for identical aggregates.
//!
//! A CTE referenced twice (TPC-H q15's `revenue`: joined once, and once for its maximum) is planned
//! twice, and each copy would read and aggregate its tables. [`ShareAggregates`] finds complete
//! aggregates whose subtrees are identical and deterministic and puts a [`SharedExec`] above each
//! copy: the first copy to run computes its result, and every copy reads that result.
//!
//! The rule runs before the joins hand out their dynamic filters, which would make the copies differ,
//! and a shared result takes no filter from above. Later rules may still rewrite a copy, but only in
//! ways that keep its rows, so any copy's result stands for all of them.
//!
//! What it still wins on DataFusion 54.1, which computes each copy again: TPC-H SF1 q15 0.12 s
//! against 0.20 s without it (`sqe-bench --baseline-set sqe.optimizer.share_aggregates=false`,
//! 2026-12-01; BENCHMARKS.md).

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{DataFusionError, Result as DFResult, Statistics};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{LexOrdering, PhysicalExpr};
use datafusion::physical_expr_common::physical_expr::is_volatile;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties,
    collect_partitioned, displayable,
};
use futures::TryStreamExt;
use tokio::sync::OnceCell;

use super::exec::only_input;

/// The physical optimizer rule; it goes right before DataFusion's post-optimization filter pushdown.
#[derive(Debug)]
pub(crate) struct ShareAggregates;

impl PhysicalOptimizerRule for ShareAggregates {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if !super::switches(config).share_aggregates {
            return Ok(plan);
        }
        let mut copies: HashMap<String, usize> = HashMap::new();
        plan.apply(|node| {
            // A shared CTE's copies (shared_cte.rs) are computed once already.
            if node.is::<SharedExec>() {
                return Ok(TreeNodeRecursion::Jump);
            }
            if let Some(key) = shareable(node) {
                *copies.entry(key).or_default() += 1;
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        let mut results: HashMap<String, Arc<SharedResult>> = copies
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(key, n)| (key, Arc::new(SharedResult::new(n))))
            .collect();
        if results.is_empty() {
            return Ok(plan);
        }
        plan.transform_down(|node| {
            if node.is::<SharedExec>() {
                return Ok(Transformed::new(node, false, TreeNodeRecursion::Jump));
            }
            let Some(result) = shareable(&node).and_then(|key| results.get_mut(&key)) else {
                return Ok(Transformed::no(node));
            };
            let shared = SharedExec::new(node, Arc::clone(result));
            Ok(Transformed::new(
                Arc::new(shared),
                true,
                TreeNodeRecursion::Jump,
            ))
        })
        .data()
    }

    fn name(&self) -> &str {
        "share_aggregates"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The text identifying a complete aggregate whose subtree SQE knows to be deterministic: every
/// node, its expressions, and every file it reads. None for any other node.
fn shareable(node: &Arc<dyn ExecutionPlan>) -> Option<String> {
    let aggregate = node.downcast_ref::<AggregateExec>()?;
    if matches!(aggregate.mode(), AggregateMode::Partial) {
        return None;
    }
    let mut key = String::new();
    let mut known = true;
    node.apply(|n| match describe(n, &mut key) {
        Some(()) => Ok(TreeNodeRecursion::Continue),
        None => {
            known = false;
            Ok(TreeNodeRecursion::Stop)
        }
    })
    .ok()?;
    known.then_some(key)
}

/// Appends one node to `key`; None if the node is of a kind SQE does not inspect, or evaluates a
/// volatile expression (`random()`), whose copies would not agree.
fn describe(node: &Arc<dyn ExecutionPlan>, key: &mut String) -> Option<()> {
    let any = node.as_ref();
    let exprs: Vec<Arc<dyn PhysicalExpr>> = if let Some(a) = any.downcast_ref::<AggregateExec>() {
        let groups = a.group_expr().expr().iter().map(|(e, _)| Arc::clone(e));
        let args = a.aggr_expr().iter().flat_map(|f| f.expressions());
        let filters = a.filter_expr().iter().flatten().cloned();
        groups.chain(args).chain(filters).collect()
    } else if let Some(f) = any.downcast_ref::<FilterExec>() {
        vec![Arc::clone(f.predicate())]
    } else if let Some(p) = any.downcast_ref::<ProjectionExec>() {
        p.expr().iter().map(|e| Arc::clone(&e.expr)).collect()
    } else if let Some(j) = any.downcast_ref::<HashJoinExec>() {
        j.filter()
            .map(|f| Arc::clone(f.expression()))
            .into_iter()
            .collect()
    } else if let Some(s) = any.downcast_ref::<SortExec>() {
        s.expr().iter().map(|e| Arc::clone(&e.expr)).collect()
    } else if any.is::<RepartitionExec>()
        || any.is::<CoalescePartitionsExec>()
        || any.is::<SortPreservingMergeExec>()
    {
        vec![]
    } else if let Some(scan) = any.downcast_ref::<DataSourceExec>() {
        // Files only: a scan's display lists at most a few files, so the key lists them all.
        let config = scan.data_source().downcast_ref::<FileScanConfig>()?;
        for group in &config.file_groups {
            for file in group.iter() {
                let range = file.range.as_ref().map(|r| (r.start, r.end));
                write!(key, "{}@{range:?};", file.object_meta.location).ok()?;
            }
        }
        vec![]
    } else {
        return None;
    };
    if exprs.iter().any(is_volatile) {
        return None;
    }
    writeln!(
        key,
        "{} {}",
        displayable(node.as_ref()).one_line(),
        node.schema()
    )
    .ok()
}

/// The result every copy reads: computed by the first copy to run.
#[derive(Debug)]
pub(super) struct SharedResult {
    copies: usize,
    batches: OnceCell<Result<Computed, Arc<DataFusionError>>>,
}

#[derive(Debug)]
struct Computed {
    partitions: Vec<Vec<RecordBatch>>,
    /// How rows are spread over the partitions and ordered in each, as the computing copy's plan
    /// gave it.
    partitioning: String,
    ordering: Option<LexOrdering>,
    _reservation: MemoryReservation,
}

impl SharedResult {
    pub(super) fn new(copies: usize) -> Self {
        Self {
            copies,
            batches: OnceCell::new(),
        }
    }
}

/// One copy of a shared aggregate or CTE: reads the result the first copy computed.
#[derive(Debug)]
pub(crate) struct SharedExec {
    input: Arc<dyn ExecutionPlan>,
    result: Arc<SharedResult>,
    metrics: ExecutionPlanMetricsSet,
}

impl SharedExec {
    pub(super) fn new(input: Arc<dyn ExecutionPlan>, result: Arc<SharedResult>) -> Self {
        Self {
            input,
            result,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

impl DisplayAs for SharedExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SharedExec: computed once for {} copies",
            self.result.copies
        )
    }
}

impl ExecutionPlan for SharedExec {
    fn name(&self) -> &str {
        "SharedExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let input = only_input(children, self.name())?;
        Ok(Arc::new(Self::new(input, Arc::clone(&self.result))))
    }

    /// A plan run again (a recursive query's next round) must compute afresh: this copy leaves the
    /// plan, and its input runs on its own.
    fn reset_state(self: Arc<Self>) -> DFResult<Arc<dyn ExecutionPlan>> {
        Ok(Arc::clone(&self.input))
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn partition_statistics(&self, partition: Option<usize>) -> DFResult<Arc<Statistics>> {
        self.input.partition_statistics(partition)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let input = Arc::clone(&self.input);
        let result = Arc::clone(&self.result);
        let schema = self.input.schema();
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let stream = futures::stream::once(async move {
            let computed = result
                .batches
                .get_or_init(|| compute(Arc::clone(&input), Arc::clone(&context)))
                .await
                .as_ref()
                .map_err(|e| DataFusionError::Shared(Arc::clone(e)))?;
            let ordering = input.output_ordering();
            if computed.partitioning != input.output_partitioning().to_string()
                || ordering.is_some_and(|o| computed.ordering.as_ref() != Some(o))
            {
                // A later rule gave the copies different partitions or orders: this one runs on
                // its own.
                return input.execute(partition, context);
            }
            // The copies' columns may be named apart (names the optimizer made up for each).
            let schema = input.schema();
            let batches = computed.partitions[partition]
                .iter()
                .map(|b| {
                    if b.schema() == schema {
                        Ok(b.clone())
                    } else {
                        RecordBatch::try_new(Arc::clone(&schema), b.columns().to_vec())
                            .map_err(DataFusionError::from)
                    }
                })
                .collect::<Vec<_>>();
            let stream = futures::stream::iter(batches);
            Ok(
                Box::pin(RecordBatchStreamAdapter::new(input.schema(), stream))
                    as SendableRecordBatchStream,
            )
        })
        .try_flatten()
        .inspect_ok(move |b| baseline.record_output(b.num_rows()));
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// Runs one copy to the end, holding its batches against the memory pool.
async fn compute(
    input: Arc<dyn ExecutionPlan>,
    context: Arc<TaskContext>,
) -> Result<Computed, Arc<DataFusionError>> {
    let reservation = MemoryConsumer::new("SharedExec").register(context.memory_pool());
    let partitioning = input.output_partitioning().to_string();
    let ordering = input.output_ordering().cloned();
    let partitions = collect_partitioned(input, context)
        .await
        .map_err(Arc::new)?;
    let bytes = partitions
        .iter()
        .flatten()
        .map(RecordBatch::get_array_memory_size)
        .sum();
    reservation.try_grow(bytes).map_err(Arc::new)?;
    Ok(Computed {
        partitions,
        partitioning,
        ordering,
        _reservation: reservation,
    })
}

//! Dynamic filters on rows, not only on row groups.
//!
//! When a hash join has built its table, DataFusion hands the probe side's scan a filter on the join
//! keys (their bounds and the built keys), and a TopK hands its scan a bound on the sort key. With
//! `pushdown_filters` off (its default: row-level filters in the Parquet reader cost more than they
//! save on most scans), the scan uses those filters only to skip row groups and pages, and every
//! row still travels up to the join. [`DynamicFilterRows`] puts a [`DynamicFilterExec`] right above
//! each Parquet scan that received dynamic filters: it drops the rows they rule out before anything
//! else sees them. A query whose join keeps a few keys (a correlated subquery's aggregate, a star
//! join with a selective dimension) then aggregates, shuffles and probes only the rows that can join.
//!
//! A filter that keeps nearly every row is dead weight, so each partition stops evaluating it once
//! it has seen that. A static filter right above the scan (the query's own WHERE) runs first, so the
//! dynamic filter looks only at the rows that survive it: the static one is a cheap comparison, the
//! dynamic one a hash lookup.
//!
//! A partitioned join's filter routes each row by the hash of its key to its partition's keys
//! (`CASE hash % n WHEN 0 THEN … IN (…) WHEN 1 THEN … END`). The exec checks the union of the lists
//! instead where every partition built a short list (in TPC-H q17, 44 ms of work instead of 270 ms),
//! and each partition's table in turn where they built tables.
//!
//! Before any of that, a join's filter tests each row's keys in a bitmap of the join's build-side
//! keys (key_bitmap.rs): a cheap test that rules out most of the rows the join cannot match, so the
//! join's own filter looks up only the few that pass; where the bitmap is exact (one integer key
//! whose built values span few enough), the join's own filter is not evaluated at all.
//!
//! A join whose NULL semantics its dynamic filter would break loses the filter, whether this rule
//! is on or not: DataFusion 54.1 builds it from the keys' bounds and values, which drops the NULL
//! keys an INTERSECT or EXCEPT matches, and leaves a `NOT IN`'s anti join unaware of the NULL (or
//! of any row at all) its subquery returns.
//!
//! What it still wins on DataFusion 54.1 (whose own dynamic filters still prune only row groups and
//! pages unless `pushdown_filters` is on): TPC-H SF1 4.36 s against 5.29 s without it; q17 0.22 s
//! against 0.61 s, q18 0.39 s against 0.75 s, q07 0.20 s against 0.35 s (`sqe-bench
//! --baseline-set sqe.optimizer.dynamic_filter_rows=false`, 2026-12-01; BENCHMARKS.md).

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::Schema;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{NullEquality, ScalarValue};
use datafusion::common::{Result as DFResult, Statistics};
use datafusion::datasource::physical_plan::{FileScanConfig, FileSource, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{
    BinaryExpr, CaseExpr, DynamicFilterPhysicalExpr, InListExpr, Literal, in_list, lit,
};
use datafusion::physical_expr::utils::{conjunction, reassign_expr_columns, split_conjunction};
use datafusion::physical_expr_common::physical_expr::{
    snapshot_generation, snapshot_physical_expr,
};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::filter::{FilterExec, batch_filter};
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PlanProperties,
};
use futures::{StreamExt, TryStreamExt};

use super::exec::only_input;
use super::key_bitmap::{BuildKeysExec, KeyBitmap};

/// Rows a partition filters before it judges whether the filter is worth evaluating.
const TRIAL_ROWS: usize = 64 * 1024;

/// Above this share of rows kept, a partition stops evaluating the filter.
const KEEPS_TOO_MANY: f64 = 0.9;

/// The physical optimizer rule: runs after DataFusion's own rules, when dynamic filters have been
/// pushed into the scans.
#[derive(Debug)]
pub(crate) struct DynamicFilterRows;

impl PhysicalOptimizerRule for DynamicFilterRows {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let (plan, unsound) = without_unsound_join_filters(plan)?;
        let switches = super::switches(config);
        if !switches.dynamic_filter_rows {
            return Ok(plan);
        }
        let bitmaps = if switches.join_key_bitmaps {
            join_key_bitmaps(&plan, &unsound)?
        } else {
            Vec::new()
        };
        plan.transform_up(|node| {
            if let Some(predicate) = dynamic_filters_of_scan(&node, &unsound) {
                let bitmaps = bitmaps_of(&predicate, &bitmaps);
                return Ok(Transformed::yes(Arc::new(DynamicFilterExec::new(
                    predicate, bitmaps, node,
                )) as _));
            }
            if let Some(join) = with_build_keys(&node, &bitmaps)? {
                return Ok(Transformed::yes(join));
            }
            static_filter_first(node)
        })
        .data()
    }

    fn name(&self) -> &str {
        "dynamic_filter_rows"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Hash joins that would lose probe rows they need to their dynamic filters lose the filters
/// instead (DataFusion 54.1 builds them from the keys' bounds and values, whatever the join's NULL
/// semantics): a null-aware anti join (`x NOT IN (SELECT y …)`) must see whether its probe side
/// has a NULL, or any row at all, and a join in which NULL equals NULL (INTERSECT, EXCEPT) must
/// see the NULL keys. Without a filter to update, the copy the scans hold stays `true`, and prunes
/// nothing. Returns the plan and the ids of the filters taken away.
fn without_unsound_join_filters(
    plan: Arc<dyn ExecutionPlan>,
) -> DFResult<(Arc<dyn ExecutionPlan>, Vec<u64>)> {
    let mut unsound = Vec::new();
    let plan = plan
        .transform_up(|node| {
            let Some(join) = node.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            let Some(filter) = join.dynamic_filter_expr() else {
                return Ok(Transformed::no(node));
            };
            if !join.null_aware && join.null_equality() != NullEquality::NullEqualsNull {
                return Ok(Transformed::no(node));
            }
            unsound.extend(filter.expression_id());
            Ok(Transformed::yes(join.builder().reset_state().build_exec()?))
        })
        .data()?;
    Ok((plan, unsound))
}

/// The dynamic filters a Parquet scan received, over the scan's output columns, but for those
/// whose ids are in `unsound`; None when it has none, or filters its rows itself
/// (`pushdown_filters`).
fn dynamic_filters_of_scan(
    node: &Arc<dyn ExecutionPlan>,
    unsound: &[u64],
) -> Option<Arc<dyn PhysicalExpr>> {
    let scan = node.downcast_ref::<DataSourceExec>()?;
    let config = scan.data_source().downcast_ref::<FileScanConfig>()?;
    let parquet = config.file_source().downcast_ref::<ParquetSource>()?;
    if parquet.table_parquet_options().global.pushdown_filters {
        return None;
    }
    // The scan holds its predicate over the table's columns; the filter runs over its output.
    let projection = parquet.projection();
    let predicate = parquet.filter()?;
    let filters = split_conjunction(&predicate)
        .into_iter()
        .filter(|e| e.is::<DynamicFilterPhysicalExpr>())
        .filter(|e| e.expression_id().is_none_or(|id| !unsound.contains(&id)))
        .map(|e| match projection {
            Some(p) => p.project_expr(e).ok(),
            None => Some(Arc::clone(e)),
        })
        .collect::<Option<Vec<_>>>()?;
    (!filters.is_empty()).then(|| conjunction(filters))
}

/// A join's dynamic filter and the bitmap of its build side's keys.
type JoinBitmap = (Arc<DynamicFilterPhysicalExpr>, Arc<KeyBitmap>);

/// A new [`KeyBitmap`] for each hash join whose dynamic filter reached a Parquet scan that filters
/// rows with it (see key_bitmap.rs).
fn join_key_bitmaps(plan: &Arc<dyn ExecutionPlan>, unsound: &[u64]) -> DFResult<Vec<JoinBitmap>> {
    let mut pushed: Vec<Arc<dyn PhysicalExpr>> = Vec::new();
    plan.apply(|node| {
        if let Some(predicate) = dynamic_filters_of_scan(node, unsound) {
            pushed.extend(split_conjunction(&predicate).into_iter().cloned());
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    let mut bitmaps = Vec::new();
    plan.apply(|node| {
        if let Some(join) = node.downcast_ref::<HashJoinExec>()
            && let Some(filter) = join.dynamic_filter_expr()
            && !join.left().is::<BuildKeysExec>()
            && pushed.iter().any(|p| same_filter(p, filter))
        {
            let partitions = join.left().output_partitioning().partition_count();
            bitmaps.push((Arc::clone(filter), Arc::new(KeyBitmap::new(partitions))));
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(bitmaps)
}

/// Whether `expr` is (a copy rebound to other columns of) the join's dynamic filter `filter`:
/// copies share the filter's state and its id (`==` also compares the columns).
fn same_filter(expr: &Arc<dyn PhysicalExpr>, filter: &DynamicFilterPhysicalExpr) -> bool {
    expr.is::<DynamicFilterPhysicalExpr>()
        && expr.expression_id().is_some()
        && expr.expression_id() == filter.expression_id()
}

/// The bitmaps of the joins whose dynamic filters are among `predicate`'s conjuncts.
fn bitmaps_of(predicate: &Arc<dyn PhysicalExpr>, bitmaps: &[JoinBitmap]) -> Vec<JoinBitmap> {
    let conjuncts = split_conjunction(predicate);
    bitmaps
        .iter()
        .filter(|(filter, _)| conjuncts.iter().any(|c| same_filter(c, filter)))
        .cloned()
        .collect()
}

/// `node` with a [`BuildKeysExec`] over its build side, if it is a hash join with a bitmap in
/// `bitmaps`.
fn with_build_keys(
    node: &Arc<dyn ExecutionPlan>,
    bitmaps: &[JoinBitmap],
) -> DFResult<Option<Arc<dyn ExecutionPlan>>> {
    let Some(join) = node.downcast_ref::<HashJoinExec>() else {
        return Ok(None);
    };
    let Some(filter) = join.dynamic_filter_expr() else {
        return Ok(None);
    };
    let Some((_, bitmap)) = bitmaps
        .iter()
        .find(|(f, _)| f.expression_id() == filter.expression_id())
    else {
        return Ok(None);
    };
    let keys = join.on().iter().map(|(left, _)| Arc::clone(left)).collect();
    let build = BuildKeysExec::new(Arc::clone(join.left()), keys, Arc::clone(bitmap));
    let children = vec![Arc::new(build) as _, Arc::clone(join.right())];
    Ok(Some(Arc::clone(node).with_new_children(children)?))
}

/// A `FilterExec` over a [`DynamicFilterExec`] (directly, or through a round-robin repartition of
/// a scan's single partition) trades places with it, so that the static filter runs first. The
/// dynamic filter is rebound to the static filter's output columns; if that one projects away a
/// column the dynamic filter needs, the two stay as they are.
fn static_filter_first(
    node: Arc<dyn ExecutionPlan>,
) -> DFResult<Transformed<Arc<dyn ExecutionPlan>>> {
    let Some(filter) = node.downcast_ref::<FilterExec>() else {
        return Ok(Transformed::no(node));
    };
    let Some((predicate, bitmaps, below)) = without_dynamic_filter(filter.input())? else {
        return Ok(Transformed::no(node));
    };
    let filtered = Arc::clone(&node).with_new_children(vec![below])?;
    match reassign_expr_columns(predicate, &filtered.schema()) {
        Ok(predicate) => Ok(Transformed::yes(Arc::new(DynamicFilterExec::new(
            predicate, bitmaps, filtered,
        )))),
        Err(_) => Ok(Transformed::no(node)),
    }
}

/// A dynamic filter's predicate and key bitmaps, and the plan it was lifted from.
type Lifted = (
    Arc<dyn PhysicalExpr>,
    Vec<JoinBitmap>,
    Arc<dyn ExecutionPlan>,
);

/// The predicate of the [`DynamicFilterExec`] at `plan` or below its round-robin repartitions, and
/// `plan` without it.
fn without_dynamic_filter(plan: &Arc<dyn ExecutionPlan>) -> DFResult<Option<Lifted>> {
    if let Some(dynamic) = plan.downcast_ref::<DynamicFilterExec>() {
        return Ok(Some((
            Arc::clone(&dynamic.predicate),
            dynamic.bitmaps.clone(),
            Arc::clone(&dynamic.input),
        )));
    }
    let Some(repartition) = plan.downcast_ref::<RepartitionExec>() else {
        return Ok(None);
    };
    if !matches!(repartition.partitioning(), Partitioning::RoundRobinBatch(_)) {
        return Ok(None);
    }
    match without_dynamic_filter(repartition.input())? {
        Some((predicate, bitmaps, input)) => Ok(Some((
            predicate,
            bitmaps,
            Arc::clone(plan).with_new_children(vec![input])?,
        ))),
        None => Ok(None),
    }
}

/// The filter a partition evaluates, from a snapshot of the dynamic filters. A partitioned join's
/// routing `CASE` (`WHEN 0 THEN <partition 0's keys> WHEN 1 THEN … ELSE false`) is replaced by a
/// filter that keeps a superset of its rows (every row the join can match), which is all a filter
/// in front of the join must do; so only whole conjuncts are replaced, never a `CASE` under a NOT:
/// - where every partition built a short IN list, by one IN list of all their keys;
/// - otherwise by `<partition 0's keys> OR <partition 1's keys> …`, which looks a row up in each
///   partition's table instead of hashing it to find its partition and splitting the batch.
fn cheaper(expr: Arc<dyn PhysicalExpr>, schema: &Schema) -> DFResult<Arc<dyn PhysicalExpr>> {
    let conjuncts = split_conjunction(&expr)
        .into_iter()
        .map(|c| Ok(without_routing(c, schema)?.unwrap_or_else(|| Arc::clone(c))))
        .collect::<DFResult<Vec<_>>>()?;
    Ok(conjunction(conjuncts))
}

/// A routing `CASE` as described at [`cheaper`]; None for any other expression.
fn without_routing(
    expr: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> DFResult<Option<Arc<dyn PhysicalExpr>>> {
    let Some(case) = expr.downcast_ref::<CaseExpr>() else {
        return Ok(None);
    };
    let else_false = case.else_expr().is_none_or(|x| {
        x.downcast_ref::<Literal>()
            .is_some_and(|l| matches!(l.value(), ScalarValue::Boolean(None | Some(false))))
    });
    if !else_false || case.when_then_expr().is_empty() {
        return Ok(None);
    }
    if let Some(list) = union_of_lists(case, schema)? {
        return Ok(Some(list));
    }
    let branches = case
        .when_then_expr()
        .iter()
        .map(|(_, then)| Arc::clone(then));
    Ok(branches.reduce(|a, b| Arc::new(BinaryExpr::new(a, Operator::Or, b)) as _))
}

/// Every branch's `key IN (list)` as one `key IN (every list)`.
fn union_of_lists(case: &CaseExpr, schema: &Schema) -> DFResult<Option<Arc<dyn PhysicalExpr>>> {
    let lists: Option<Vec<&InListExpr>> = case
        .when_then_expr()
        .iter()
        .map(|(_, then)| {
            split_conjunction(then)
                .into_iter()
                .find_map(|c| c.downcast_ref::<InListExpr>())
                .filter(|l| !l.negated())
        })
        .collect();
    let Some(lists) = lists else {
        return Ok(None);
    };
    let Some(first) = lists.first() else {
        return Ok(None);
    };
    if lists.iter().any(|l| l.expr() != first.expr()) {
        return Ok(None);
    }
    let keys = lists
        .iter()
        .flat_map(|l| l.list().iter().cloned())
        .collect();
    Ok(Some(in_list(
        Arc::clone(first.expr()),
        keys,
        &false,
        schema,
    )?))
}

/// Drops the rows its input's dynamic filters rule out, testing first the bitmaps of the joins'
/// build keys where it has them.
#[derive(Debug)]
pub(crate) struct DynamicFilterExec {
    predicate: Arc<dyn PhysicalExpr>,
    bitmaps: Vec<JoinBitmap>,
    input: Arc<dyn ExecutionPlan>,
    metrics: ExecutionPlanMetricsSet,
}

impl DynamicFilterExec {
    fn new(
        predicate: Arc<dyn PhysicalExpr>,
        bitmaps: Vec<JoinBitmap>,
        input: Arc<dyn ExecutionPlan>,
    ) -> Self {
        Self {
            predicate,
            bitmaps,
            input,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// Each of the predicate's join filters that has a bitmap: its keys over this node's rows, and
    /// the bitmap.
    fn prefilters(&self) -> Vec<Prefilter> {
        split_conjunction(&self.predicate)
            .into_iter()
            .filter_map(|c| {
                let (_, bitmap) = self.bitmaps.iter().find(|(f, _)| same_filter(c, f))?;
                Some(Prefilter {
                    conjunct: Arc::clone(c),
                    keys: c.children().into_iter().cloned().collect(),
                    bitmap: Arc::clone(bitmap),
                    seen: 0,
                    kept: 0,
                    state: Testing::On,
                })
            })
            .collect()
    }
}

/// A join's probe keys over the filtered rows, the bitmap of its build keys, and how much it has
/// kept so far (a join that matches nearly every row, such as `lineitem` to all `orders`, is not
/// worth testing).
struct Prefilter {
    /// The join's filter among the predicate's conjuncts.
    conjunct: Arc<dyn PhysicalExpr>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    bitmap: Arc<KeyBitmap>,
    seen: usize,
    kept: usize,
    state: Testing,
}

impl Prefilter {
    /// No bitmap from now on; true where that puts the join's own filter back in the predicate
    /// (it stood in for it). One that kept nearly every row stays out, with its join's filter.
    fn without_bitmap(&mut self) -> bool {
        match self.state {
            Testing::KeepsAll => false,
            Testing::Exact => {
                self.state = Testing::NoBitmap;
                true
            }
            Testing::On | Testing::NoBitmap => {
                self.state = Testing::NoBitmap;
                false
            }
        }
    }
}

/// Whether a [`Prefilter`] is tested.
#[derive(Clone, Copy, PartialEq)]
enum Testing {
    On,
    /// No bitmap, now or ever (given up, keys of other types, keys that fail to evaluate): the
    /// join's own filter still runs.
    NoBitmap,
    /// It kept nearly every row: neither it nor its join's own filter is worth testing.
    KeepsAll,
    /// Its bitmap is exact: it keeps exactly the rows its join's own filter would, so that filter
    /// is not evaluated.
    Exact,
}

impl Testing {
    /// Whether the join's own filter is left out of the predicate.
    fn replaces_join_filter(self) -> bool {
        matches!(self, Testing::KeepsAll | Testing::Exact)
    }
}

impl DisplayAs for DynamicFilterExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DynamicFilterExec: {}", self.predicate)?;
        if !self.bitmaps.is_empty() {
            write!(f, ", key_bitmaps={}", self.bitmaps.len())?;
        }
        Ok(())
    }
}

impl ExecutionPlan for DynamicFilterExec {
    fn name(&self) -> &str {
        "DynamicFilterExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        // Dropping rows keeps the partitioning and the order.
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
        Ok(Arc::new(Self::new(
            Arc::clone(&self.predicate),
            self.bitmaps.clone(),
            input,
        )))
    }

    /// A plan run again (a recursive query's next round) gets new dynamic filters from its joins;
    /// this node's would be stale, so it leaves the plan.
    fn reset_state(self: Arc<Self>) -> DFResult<Arc<dyn ExecutionPlan>> {
        Ok(Arc::clone(&self.input))
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn partition_statistics(&self, partition: Option<usize>) -> DFResult<Arc<Statistics>> {
        let input = Arc::unwrap_or_clone(self.input.partition_statistics(partition)?);
        Ok(Arc::new(input.to_inexact()))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let schema = input.schema();
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let pruned = MetricBuilder::new(&self.metrics).counter("rows_pruned", partition);
        let by_keys = MetricBuilder::new(&self.metrics).counter("rows_pruned_by_keys", partition);
        let mut state = Trial {
            predicate: Arc::clone(&self.predicate),
            prefilters: self.prefilters(),
            schema: Arc::clone(&schema),
            current: None,
            seen: 0,
            kept: 0,
            on: true,
            pruned,
            by_keys,
        };
        let stream = input
            .and_then(move |batch| {
                let timer = baseline.elapsed_compute().timer();
                let out = state.filter(batch);
                timer.done();
                futures::future::ready(out.inspect(|b| {
                    baseline.record_output(b.num_rows());
                }))
            })
            .try_filter(|b| futures::future::ready(b.num_rows() > 0));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            stream.boxed(),
        )))
    }
}

/// One partition's filter, and how much of its input it has kept so far.
struct Trial {
    predicate: Arc<dyn PhysicalExpr>,
    prefilters: Vec<Prefilter>,
    schema: datafusion::arrow::datatypes::SchemaRef,
    /// The predicate as it stood at a generation (None while it is `true`). Taking it rebuilds the
    /// filter's expression (an IN list builds its hash set), so it is taken once per update, not
    /// once per batch.
    current: Option<(u64, Option<Arc<dyn PhysicalExpr>>)>,
    seen: usize,
    kept: usize,
    on: bool,
    pruned: Count,
    by_keys: Count,
}

impl Trial {
    fn filter(&mut self, batch: RecordBatch) -> DFResult<RecordBatch> {
        if !self.on {
            return Ok(batch);
        }
        let rows = batch.num_rows();
        let mut out = batch;
        let mut judged = false;
        if let Some(kept) = self.prefilter(&out)? {
            out = kept;
            self.by_keys.add(rows - out.num_rows());
            judged = true;
        }
        let generation = snapshot_generation(&self.predicate);
        if self.current.as_ref().is_none_or(|(g, _)| *g != generation) {
            let expr = cheaper(snapshot_physical_expr(self.live_predicate())?, &self.schema)?;
            // Until the join has built its table the filter is `true`: nothing to evaluate or judge.
            let always = lit(true);
            let trivial = split_conjunction(&expr)
                .iter()
                .all(|e| e.as_ref() == always.as_ref());
            self.current = Some((generation, (!trivial).then_some(expr)));
        }
        if let Some((_, Some(current))) = &self.current
            && out.num_rows() > 0
        {
            out = batch_filter(&out, current)?;
            judged = true;
        }
        if !judged {
            return Ok(out);
        }
        self.seen += rows;
        self.kept += out.num_rows();
        self.pruned.add(rows - out.num_rows());
        if self.seen >= TRIAL_ROWS && self.kept as f64 > KEEPS_TOO_MANY * self.seen as f64 {
            self.on = false;
        }
        Ok(out)
    }

    /// The rows whose keys the joins' bitmaps may hold; None while no bitmap is ready. The
    /// smallest bitmaps go first (they are the cheapest, and stay in the cache), each testing the
    /// rows the ones before kept.
    fn prefilter(&mut self, batch: &RecordBatch) -> DFResult<Option<RecordBatch>> {
        self.prefilters.sort_by_key(|p| p.bitmap.size());
        let mut kept: Option<RecordBatch> = None;
        for prefilter in self.prefilters.iter_mut() {
            let rows = kept.as_ref().unwrap_or(batch);
            if rows.num_rows() == 0 {
                break;
            }
            if prefilter.bitmap.withdrawn() && prefilter.without_bitmap() {
                self.current = None;
            }
            let testing = matches!(prefilter.state, Testing::On | Testing::Exact);
            if !testing || prefilter.bitmap.size().is_none() {
                continue;
            }
            // Its keys are evaluated before the conjuncts ahead of it in the predicate have
            // filtered the rows: an error is not the query's, the bitmap is left alone.
            let keys = prefilter
                .keys
                .iter()
                .map(|k| k.evaluate(rows)?.into_array(rows.num_rows()))
                .collect::<DFResult<Vec<_>>>();
            let Some(mask) = keys
                .and_then(|keys| prefilter.bitmap.mask(&keys))
                .ok()
                .flatten()
            else {
                if prefilter.without_bitmap() {
                    self.current = None;
                }
                continue;
            };
            if prefilter.state == Testing::On && prefilter.bitmap.exact() {
                // The join's own filter is implied from now on.
                prefilter.state = Testing::Exact;
                self.current = None;
            }
            prefilter.seen += rows.num_rows();
            prefilter.kept += mask.true_count();
            if prefilter.seen >= TRIAL_ROWS
                && prefilter.kept as f64 > KEEPS_TOO_MANY * prefilter.seen as f64
            {
                prefilter.state = Testing::KeepsAll;
                // Its join's own filter keeps as much: the rest of the predicate goes on alone.
                self.current = None;
            }
            kept = Some(filter_record_batch(rows, &mask)?);
        }
        Ok(kept)
    }

    /// The predicate without the joins whose bitmaps keep nearly every row, or are exact: a join
    /// that matches nearly every row is not worth a lookup in its table either (TPC-H q09's
    /// `lineitem` against all of `orders`: a cache miss a row, for nothing), and one whose bitmap
    /// is exact would keep the rows the bitmap kept.
    fn live_predicate(&self) -> Arc<dyn PhysicalExpr> {
        let live: Vec<_> = split_conjunction(&self.predicate)
            .into_iter()
            .filter(|c| {
                !self
                    .prefilters
                    .iter()
                    .any(|p| p.state.replaces_join_filter() && Arc::ptr_eq(&p.conjunct, c))
            })
            .cloned()
            .collect();
        conjunction(live)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Losing its bitmap brings the join's own filter back only where the bitmap stood in for it.
    #[test]
    fn a_lost_bitmap_brings_back_only_the_filter_it_stood_in_for() {
        for (state, back, after) in [
            (Testing::Exact, true, Testing::NoBitmap),
            (Testing::KeepsAll, false, Testing::KeepsAll),
            (Testing::On, false, Testing::NoBitmap),
            (Testing::NoBitmap, false, Testing::NoBitmap),
        ] {
            let mut prefilter = Prefilter {
                conjunct: lit(true),
                keys: Vec::new(),
                bitmap: Arc::new(KeyBitmap::new(1)),
                seen: 0,
                kept: 0,
                state,
            };
            assert_eq!(prefilter.without_bitmap(), back);
            assert!(prefilter.state == after);
        }
    }
}

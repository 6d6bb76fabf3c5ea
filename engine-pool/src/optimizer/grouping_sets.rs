//! GROUPING SETS, CUBE and ROLLUP, each set aggregated from a finer one.
//!
//! DataFusion aggregates grouping sets by repeating every input row once per set, so a ROLLUP of
//! four columns hashes each row five times (TPC-DS q22: 2.3 M rows, 12 M lookups into one table).
//! [`GroupingSetsExec`] takes the place of that partial aggregate: it aggregates the input once, by
//! every grouping column, and then each set from the smallest set already computed that groups by
//! all of the set's columns. A ROLLUP becomes a chain in which each level reads the level above it
//! (q22's coarser levels read 18 thousand rows, not 2.3 million). What it emits are the partial
//! states DataFusion's own partial aggregate would emit, with the same grouping ids, so the final
//! aggregate above is unchanged and the answer is the same.
//!
//! The finest level is held in memory while the coarser ones are computed from it. Where the
//! memory pool will not hold a level, the sets it would have fed get the finest level's rows once
//! per set instead, unmerged (DataFusion's own expansion, over rows already aggregated once): the
//! final aggregate merges them all the same.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, new_null_array};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{DataFusionError, Result as DFResult, ScalarValue};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, InputOrderMode, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};

use super::exec::{only_input, unseen_memory};

/// The physical optimizer rule: a partial aggregate of grouping sets becomes a
/// [`GroupingSetsExec`] where it can.
#[derive(Debug)]
pub(crate) struct GroupingSetsFromFinerSets;

impl PhysicalOptimizerRule for GroupingSetsFromFinerSets {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if !super::switches(config).grouping_sets {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            let Some(aggregate) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            Ok(match GroupingSetsExec::try_new(aggregate)? {
                Some(exec) => Transformed::yes(Arc::new(exec) as Arc<dyn ExecutionPlan>),
                None => Transformed::no(node),
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        "grouping_sets"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// A partial aggregate of grouping sets computed level by level (see the module's docs).
#[derive(Debug)]
pub(crate) struct GroupingSetsExec {
    /// The input aggregated by every grouping column, laid out as the sets' partial aggregate lays
    /// out its rows (grouping id 0).
    finest: Arc<dyn ExecutionPlan>,
    levels: Arc<Levels>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

/// What every partition needs to compute the coarser levels from the finest.
#[derive(Debug)]
struct Levels {
    /// The partial aggregate's output, which every level is relabeled to.
    schema: SchemaRef,
    /// The schema of the partial aggregate's input (the aggregates' arguments are typed by it).
    input_schema: SchemaRef,
    aggregates: Vec<Arc<AggregateFunctionExpr>>,
    /// Whether the finest level is one of the sets (ROLLUP's and CUBE's is).
    finest_is_a_set: bool,
    /// The other sets, coarsest last; each is computed from the finest or an earlier one.
    sets: Vec<Level>,
    /// The finest level's NULL mask: none.
    finest_nulls: Vec<bool>,
    /// How a level merges its rows: by every grouping column and the grouping id.
    merge: PhysicalGroupBy,
    /// The sets' own partial aggregate over no rows, for a partition without any.
    no_rows: Arc<dyn ExecutionPlan>,
    /// How many partitions share the memory budget.
    partitions: usize,
    /// The grouping expressions' names, for EXPLAIN.
    names: Vec<String>,
}

#[derive(Debug)]
struct Level {
    /// Which grouping expressions this set leaves NULL (DataFusion's mask).
    nulls: Vec<bool>,
    /// The level it is aggregated from: None for the finest, else an index into `sets`.
    source: Option<usize>,
}

impl GroupingSetsExec {
    /// The exec for `aggregate` if it is a partial aggregate of grouping sets whose states can
    /// be merged level by level: no DISTINCT or ordered aggregate, no repeated set (DataFusion
    /// numbers repeats in the grouping id), input in no useful order.
    fn try_new(aggregate: &AggregateExec) -> DFResult<Option<Self>> {
        let group_by = aggregate.group_expr();
        let masks = group_by.groups();
        let unique: HashSet<&Vec<bool>> = masks.iter().collect();
        // Sketches compressed again at each merge would answer a little differently.
        let mergeable = aggregate.aggr_expr().iter().all(|a| {
            let name = a.fun().name();
            !a.is_distinct()
                && a.order_bys().is_empty()
                && !name.starts_with("approx_")
                && name != "numeric_histogram"
        });
        if *aggregate.mode() != AggregateMode::Partial
            || !group_by.has_grouping_set()
            || masks.len() < 2
            || unique.len() != masks.len()
            || !mergeable
            || *aggregate.input_order_mode() != InputOrderMode::Linear
            || aggregate.limit_options().is_some()
        {
            return Ok(None);
        }
        let width = group_by.expr().len();
        let finest_group_by = PhysicalGroupBy::new(
            group_by.expr().to_vec(),
            group_by.null_expr().to_vec(),
            vec![vec![false; width]],
            true,
        );
        let finest = AggregateExec::try_new(
            AggregateMode::Partial,
            finest_group_by,
            aggregate.aggr_expr().to_vec(),
            aggregate.filter_expr().to_vec(),
            Arc::clone(aggregate.input()),
            aggregate.input_schema(),
        )?;
        let schema = aggregate.schema();
        if !same_columns(&finest.schema(), &schema) {
            return Ok(None);
        }
        // A level merges rows laid out as `schema`, already in its set's shape (columns it does
        // not group by NULL, its grouping id), by the grouping columns and the id: as the final
        // aggregate merges them, spilling included.
        let keys = (0..=width)
            .map(|i| {
                let name = schema.field(i).name();
                (
                    Arc::new(Column::new(name, i)) as Arc<dyn PhysicalExpr>,
                    name.clone(),
                )
            })
            .collect();
        // A partition without rows still has the empty set's row (count 0), as DataFusion makes it.
        let no_rows = AggregateExec::try_new(
            AggregateMode::Partial,
            group_by.clone(),
            aggregate.aggr_expr().to_vec(),
            aggregate.filter_expr().to_vec(),
            Arc::new(EmptyExec::new(aggregate.input().schema())),
            aggregate.input_schema(),
        )?;
        let finest_is_a_set = masks.iter().any(|m| m.iter().all(|null| !null));
        let mut coarser: Vec<&Vec<bool>> = masks
            .iter()
            .filter(|m| m.iter().any(|null| *null))
            .collect();
        // Finer sets first (fewer NULL columns), so every set's finer sets are computed before it.
        coarser.sort_by_key(|m| m.iter().filter(|null| **null).count());
        let mut sets: Vec<Level> = Vec::with_capacity(coarser.len());
        for nulls in coarser {
            // The coarsest computed set that groups by all of this set's columns.
            let source = sets
                .iter()
                .enumerate()
                .filter(|(_, s)| finer(&s.nulls, nulls))
                .max_by_key(|(_, s)| s.nulls.iter().filter(|null| **null).count())
                .map(|(i, _)| i);
            sets.push(Level {
                nulls: nulls.clone(),
                source,
            });
        }
        let levels = Levels {
            schema: Arc::clone(&schema),
            input_schema: aggregate.input_schema(),
            aggregates: aggregate.aggr_expr().to_vec(),
            finest_is_a_set,
            sets,
            finest_nulls: vec![false; width],
            merge: PhysicalGroupBy::new_single(keys),
            no_rows: Arc::new(no_rows),
            partitions: aggregate.properties().partitioning.partition_count(),
            names: group_by.expr().iter().map(|(_, n)| n.clone()).collect(),
        };
        Ok(Some(Self::new(
            Arc::new(finest),
            Arc::new(levels),
            aggregate,
        )))
    }

    fn new(
        finest: Arc<dyn ExecutionPlan>,
        levels: Arc<Levels>,
        aggregate: &dyn ExecutionPlan,
    ) -> Self {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&levels.schema)),
            aggregate.properties().partitioning.clone(),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        Self {
            finest,
            levels,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }
}

/// Whether `a`'s columns have `b`'s names and types, in order (nullability aside: a level's rows
/// are a subset of what the sets' aggregate emits, so its schema holds them).
fn same_columns(a: &SchemaRef, b: &SchemaRef) -> bool {
    a.fields().len() == b.fields().len()
        && a.fields()
            .iter()
            .zip(b.fields())
            .all(|(x, y)| x.name() == y.name() && x.data_type() == y.data_type())
}

/// Whether the set with NULL mask `finer` groups by every column the set `coarser` groups by.
fn finer(finer: &[bool], coarser: &[bool]) -> bool {
    finer.iter().zip(coarser).all(|(f, c)| *c || !*f)
}

impl DisplayAs for GroupingSetsExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let levels = &self.levels;
        let set = |nulls: &[bool]| {
            let names: Vec<&str> = levels
                .names
                .iter()
                .zip(nulls)
                .filter(|(_, null)| !**null)
                .map(|(n, _)| n.as_str())
                .collect();
            format!("({})", names.join(", "))
        };
        let all = set(&vec![false; levels.names.len()]);
        write!(f, "GroupingSetsExec: finest {all}")?;
        if !levels.finest_is_a_set {
            write!(f, " (not a set)")?;
        }
        for level in &levels.sets {
            let source = match level.source {
                None => all.clone(),
                Some(i) => set(&levels.sets[i].nulls),
            };
            write!(f, ", {} from {source}", set(&level.nulls))?;
        }
        Ok(())
    }
}

impl ExecutionPlan for GroupingSetsExec {
    fn name(&self) -> &str {
        "GroupingSetsExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.finest]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let finest = only_input(children, self.name())?;
        if !same_columns(&finest.schema(), &self.levels.schema) {
            return Err(DataFusionError::Internal(
                "GroupingSetsExec: the finest level's columns changed".into(),
            ));
        }
        Ok(Arc::new(Self {
            finest,
            levels: Arc::clone(&self.levels),
            properties: Arc::clone(&self.properties),
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let finest = self.finest.execute(partition, Arc::clone(&context))?;
        let levels = Arc::clone(&self.levels);
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let unmerged = MetricBuilder::new(&self.metrics).counter("sets_unmerged", partition);
        let stream = futures::stream::once(levels.run(finest, context, unmerged))
            .try_flatten()
            .inspect_ok(move |b| baseline.record_output(b.num_rows()));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.levels.schema),
            stream,
        )))
    }
}

type Batches = futures::stream::BoxStream<'static, DFResult<RecordBatch>>;

impl Levels {
    /// One partition's levels: the finest collected, then each set from its source level.
    async fn run(
        self: Arc<Self>,
        mut finest: SendableRecordBatchStream,
        context: Arc<TaskContext>,
        unmerged: Count,
    ) -> DFResult<Batches> {
        let pool = context.memory_pool();
        let reservation = MemoryConsumer::new("GroupingSetsExec").register(pool);
        // What it holds cannot spill, so all partitions together take no more than an eighth of
        // a bounded pool and leave the rest to the operators that can.
        let budget = match pool.memory_limit() {
            MemoryLimit::Finite(bytes) => bytes / 8 / self.partitions.max(1),
            MemoryLimit::Infinite | MemoryLimit::Unknown => usize::MAX,
        };
        // Each allocation counts once: a level's batches are slices of one.
        let mut seen = HashSet::new();
        let grow = |bytes: usize| {
            reservation.size().saturating_add(bytes) <= budget
                && reservation.try_grow(bytes).is_ok()
        };
        let mut held = Vec::new();
        while let Some(batch) = finest.try_next().await? {
            let batch = self.relabel(batch)?;
            let refused = !grow(unseen_memory(&batch, &mut seen));
            held.push(batch);
            if refused {
                // The pool will not hold the finest level: each of its rows, held and to come, goes
                // out once per set, as DataFusion sends the input's rows.
                unmerged.add(self.sets.len());
                let this = Arc::clone(&self);
                let rest = finest.map(move |b| b.and_then(|b| this.relabel(b)));
                let rows = futures::stream::iter(held.into_iter().map(Ok)).chain(rest);
                let this = Arc::clone(&self);
                let out = rows
                    .map_ok(move |batch| {
                        let every = this.every_set().map(|nulls| this.expand(&batch, nulls));
                        futures::stream::iter(every.collect::<Vec<_>>())
                    })
                    .try_flatten();
                return Ok(counted(out, reservation));
            }
        }
        // Its aggregate's memory goes back to the pool before the levels take theirs.
        drop(finest);
        if held.iter().all(|b| b.num_rows() == 0) {
            return Ok(self.no_rows.execute(0, context)?.boxed());
        }
        let mut computed: Vec<Vec<RecordBatch>> = Vec::with_capacity(self.sets.len());
        for level in &self.sets {
            let source = match level.source {
                None => &held,
                Some(i) => &computed[i],
            };
            let rows: Vec<RecordBatch> = source
                .iter()
                .map(|b| self.expand(b, &level.nulls))
                .collect::<DFResult<_>>()?;
            let merged: DFResult<Vec<RecordBatch>> = self
                .aggregate(rows, &context)?
                .and_then(|b| futures::future::ready(self.relabel(b)))
                .try_collect()
                .await;
            let batches = match merged {
                Err(e) if matches!(e.find_root(), DataFusionError::ResourcesExhausted(_)) => break,
                batches => batches?,
            };
            if !grow(batches.iter().map(|b| unseen_memory(b, &mut seen)).sum()) {
                break;
            }
            computed.push(batches);
        }
        // Sets the pool had no room for go out as the finest level's rows, once per set.
        unmerged.add(self.sets.len() - computed.len());
        let rest: Vec<RecordBatch> = self.sets[computed.len()..]
            .iter()
            .flat_map(|level| held.iter().map(|b| self.expand(b, &level.nulls)))
            .collect::<DFResult<_>>()?;
        let finest = if self.finest_is_a_set {
            held
        } else {
            Vec::new()
        };
        let out = finest
            .into_iter()
            .chain(computed.into_iter().flatten())
            .chain(rest)
            .map(Ok);
        Ok(counted(futures::stream::iter(out), reservation))
    }

    /// The NULL masks of all sets, the finest's included if it is one.
    fn every_set(&self) -> impl Iterator<Item = &[bool]> {
        let finest = self.finest_is_a_set.then_some(self.finest_nulls.as_slice());
        finest
            .into_iter()
            .chain(self.sets.iter().map(|l| l.nulls.as_slice()))
    }

    /// The finest level's rows as rows of the set with NULL mask `nulls`: its columns NULL where
    /// the set has none, its grouping id, the same states (the final aggregate merges them).
    fn expand(&self, batch: &RecordBatch, nulls: &[bool]) -> DFResult<RecordBatch> {
        let rows = batch.num_rows();
        let width = nulls.len();
        let mut columns = Vec::with_capacity(batch.num_columns());
        for (i, null) in nulls.iter().enumerate() {
            columns.push(if *null {
                new_null_array(self.schema.field(i).data_type(), rows)
            } else {
                Arc::clone(batch.column(i))
            });
        }
        // DataFusion's grouping id: one bit per grouping column, the first column highest, set
        // where the column is NULL.
        let id = nulls
            .iter()
            .fold(0u64, |id, null| (id << 1) | u64::from(*null));
        let id = ScalarValue::UInt64(Some(id)).cast_to(self.schema.field(width).data_type())?;
        columns.push(id.to_array_of_size(rows)?);
        columns.extend(batch.columns()[width + 1..].iter().cloned());
        Ok(RecordBatch::try_new(Arc::clone(&self.schema), columns)?)
    }

    /// The partial states of `rows` (laid out as `schema`, each in its set's shape) merged.
    fn aggregate(
        &self,
        rows: Vec<RecordBatch>,
        context: &Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let source = MemorySourceConfig::try_new_exec(&[rows], Arc::clone(&self.schema), None)?;
        let merge = AggregateExec::try_new(
            AggregateMode::PartialReduce,
            self.merge.clone(),
            self.aggregates.clone(),
            vec![None; self.aggregates.len()],
            source,
            Arc::clone(&self.input_schema),
        )?;
        merge.execute(0, Arc::clone(context))
    }

    /// `batch` under the sets' aggregate schema (the levels' own schemas differ in nullability).
    fn relabel(&self, batch: RecordBatch) -> DFResult<RecordBatch> {
        if batch.schema() == self.schema {
            return Ok(batch);
        }
        Ok(RecordBatch::try_new(
            Arc::clone(&self.schema),
            batch.columns().to_vec(),
        )?)
    }
}

/// `rows`, the reservation counting them shrunk by each one read (it goes to the reader).
fn counted(
    rows: impl futures::Stream<Item = DFResult<RecordBatch>> + Send + 'static,
    reservation: MemoryReservation,
) -> Batches {
    let mut seen = HashSet::new();
    rows.inspect_ok(move |b| {
        let bytes = unseen_memory(b, &mut seen);
        reservation.shrink(bytes.min(reservation.size()));
    })
    .boxed()
}

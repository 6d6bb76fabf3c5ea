//! A hash join's sides swapped where SQE's estimates find the build side much the larger.
//!
//! DataFusion builds each hash join's table on the side it estimates smaller. Its estimate of a
//! join's output uses only the last key's distinct count and forgets what the filters below
//! removed, so after two or three joins the side that holds a few dozen rows looks larger than a
//! whole dimension table: TPC-DS q64 built 1.92 M `customer_demographics` rows (174 ms) to look up
//! 49, and q29 876 K `catalog_sales` rows to look up 2. [`SmallerBuildSides`] runs after
//! DataFusion's join selection and estimates each join's sides anew, bottom up:
//! - a table's integer and date columns count their distinct values (at most its rows, and at most
//!   the values between the column's bounds: surrogate keys are dense); so do the other columns of
//!   a table of at most [`FEW_ROWS`] rows (at most its rows), which a GROUP BY of a store's state
//!   or a promotion's name can then be estimated by;
//! - a filter keeps a share of the distinct values as well as of the rows (DataFusion's own rule,
//!   through its statistics registry, which the rest of these estimates plug into);
//! - an equi-join outputs `left × right / max(distinct keys of either side)`, a side's distinct
//!   keys being the product of its key columns' counts up to its rows (so a side unique on its
//!   keys, as a fact table on its line number, matches each row of the other side at most once);
//!   a side whose keys cannot be counted is taken for the smaller side's rows, as a primary key;
//!   and each column keeps the share of its distinct values that the rows it kept imply; a semi
//!   or anti join keeps the share of its side's keys that the other side has;
//! - a GROUP BY outputs the product of its columns' distinct counts, at most its input's rows;
//! - a window keeps its input's rows;
//! - what cannot be estimated (a GROUP BY of a larger table's strings, joins other than hash
//!   joins) stays unknown, and no join above it is swapped.
//!
//! It swaps only where the build side is estimated at twice the probe side and
//! [`MUCH_LARGER_ROWS`] more: in closer calls DataFusion's choice stays, which is mostly a
//! dimension table whose keys then filter the fact table's scan (q61 lost 25% when its filtered
//! `item` became the probe side of a few thousand rows). An aggregate on the probe side stays
//! there too (see [`aggregates`]). Switch: `sqe.optimizer.join_sides`.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{ColumnStatistics, JoinType, Result, ScalarValue, Statistics};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::operator_statistics::{
    ExtendedStatistics, FilterStatisticsProvider, LimitStatisticsProvider,
    PassthroughStatisticsProvider, ProjectionStatisticsProvider, StatisticsProvider,
    StatisticsRegistry, StatisticsResult, UnionStatisticsProvider, ndv_after_selectivity,
};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::windows::{BoundedWindowAggExec, WindowAggExec};
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, PhysicalExpr};

use super::shared::SharedExec;

/// How many more rows than the probe side a build side must be estimated at (as well as twice
/// as many) for the sides to be swapped: a hash table of fewer rows takes a few milliseconds.
pub(crate) const MUCH_LARGER_ROWS: usize = 100_000;

/// The rows of a table small enough for each of its columns to be counted as having at most that
/// many distinct values: a GROUP BY of them is then estimated at no more than a few thousand
/// rows, which no swap turns on (they take [`MUCH_LARGER_ROWS`]).
const FEW_ROWS: usize = 1_000;

/// The rule (module docs), after DataFusion's join selection.
#[derive(Debug)]
pub(crate) struct SmallerBuildSides;

impl PhysicalOptimizerRule for SmallerBuildSides {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !super::switches(config).join_sides || !config.optimizer.join_reordering {
            return Ok(plan);
        }
        let registry = StatisticsRegistry::with_providers(vec![Arc::new(KeyCardinality)]);
        // A side that cannot be estimated is not swapped; nor is a plan failed for it.
        let rows = |plan: &Arc<dyn ExecutionPlan>| -> Option<usize> {
            let stats = registry.compute(plan.as_ref()).ok()?;
            stats.base().num_rows.get_value().copied()
        };
        let optimizer = &config.optimizer;
        let repartition = optimizer.repartition_joins && config.execution.target_partitions > 1;
        plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            // An endless input stays the probe side, where DataFusion put it.
            let endless = |p: &Arc<dyn ExecutionPlan>| p.boundedness().is_unbounded();
            if !join.join_type().supports_swap()
                || join.null_aware
                || endless(join.left())
                || endless(join.right())
                || aggregates(join.right())
            {
                return Ok(Transformed::no(node));
            }
            let (Some(build), Some(probe)) = (rows(join.left()), rows(join.right())) else {
                return Ok(Transformed::no(node));
            };
            if build / 2 < probe || build - probe < MUCH_LARGER_ROWS {
                return Ok(Transformed::no(node));
            }
            // DataFusion's own thresholds for a build side held once for all partitions.
            let bytes = join.right().partition_statistics(None)?.total_byte_size;
            let small = probe < optimizer.hash_join_single_partition_threshold_rows
                && bytes
                    .get_value()
                    .is_none_or(|b| *b < optimizer.hash_join_single_partition_threshold);
            let mode = if small || !repartition {
                PartitionMode::CollectLeft
            } else {
                PartitionMode::Partitioned
            };
            Ok(Transformed::yes(join.swap_inputs(mode)?))
        })
        .data()
    }

    fn name(&self) -> &str {
        "SmallerBuildSides"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Estimates every node from its children's estimates (see the module's comment); nodes it has
/// no rule of its own for go to DataFusion's providers, then to the node's own statistics.
#[derive(Debug)]
struct KeyCardinality;

impl StatisticsProvider for KeyCardinality {
    fn compute_statistics(
        &self,
        plan: &dyn ExecutionPlan,
        children: &[ExtendedStatistics],
    ) -> Result<StatisticsResult> {
        let mut stats = if children.is_empty() {
            table(plan)?
        } else if let Some(join) = plan.downcast_ref::<HashJoinExec>() {
            hash_join(join, children[0].base(), children[1].base())
                .unwrap_or_else(|| Statistics::new_unknown(&plan.schema()))
        } else if let Some(aggregate) = plan.downcast_ref::<AggregateExec>() {
            group_by(aggregate, children[0].base())?
        } else if plan.downcast_ref::<SharedExec>().is_some() {
            children[0].base().clone()
        } else if plan.downcast_ref::<BoundedWindowAggExec>().is_some()
            || plan.downcast_ref::<WindowAggExec>().is_some()
        {
            // Its input's rows and columns, and columns of its own that are not known.
            let mut stats = children[0].base().clone();
            let width = plan.schema().fields().len();
            stats
                .column_statistics
                .resize_with(width, ColumnStatistics::new_unknown);
            stats
        } else {
            datafusion_estimate(plan, children)?
        };
        stats.total_byte_size = Precision::Absent;
        if let Some(&rows) = stats.num_rows.get_value() {
            for column in &mut stats.column_statistics {
                if let Some(&ndv) = column.distinct_count.get_value()
                    && ndv > rows
                {
                    column.distinct_count = Precision::Inexact(rows);
                }
            }
        }
        Ok(StatisticsResult::Computed(ExtendedStatistics::new(stats)))
    }
}

/// Whether `plan` is an aggregate, under nodes that keep its rows. A build side's keys, sent down
/// as a dynamic filter, cut the rows such a probe side aggregates (TPC-H q17 aggregates 6 M
/// `lineitem` rows down to the 6 K of the parts it joins), which no estimate here sees: it stays
/// the probe side.
fn aggregates(plan: &Arc<dyn ExecutionPlan>) -> bool {
    if plan.downcast_ref::<AggregateExec>().is_some() {
        return true;
    }
    let keeps_rows = plan.downcast_ref::<ProjectionExec>().is_some()
        || plan.downcast_ref::<SharedExec>().is_some()
        || plan.downcast_ref::<FilterExec>().is_some()
        || plan.downcast_ref::<RepartitionExec>().is_some()
        || plan.downcast_ref::<CoalescePartitionsExec>().is_some();
    keeps_rows && plan.children().first().is_some_and(|c| aggregates(c))
}

/// DataFusion's providers for filters, projections, limits, unions and the nodes that keep
/// their input's rows; the node's own statistics for the rest, but for other joins (unknown).
fn datafusion_estimate(
    plan: &dyn ExecutionPlan,
    children: &[ExtendedStatistics],
) -> Result<Statistics> {
    let providers: [&dyn StatisticsProvider; 5] = [
        &FilterStatisticsProvider,
        &ProjectionStatisticsProvider,
        &PassthroughStatisticsProvider,
        &LimitStatisticsProvider,
        &UnionStatisticsProvider,
    ];
    for provider in providers {
        if let StatisticsResult::Computed(stats) = provider.compute_statistics(plan, children)? {
            return Ok(stats.base().clone());
        }
    }
    // Other joins: DataFusion's own estimate is the one this module does not trust.
    if children.len() > 1 {
        return Ok(Statistics::new_unknown(&plan.schema()));
    }
    Ok(Arc::unwrap_or_clone(plan.partition_statistics(None)?))
}

/// A scan's statistics with the distinct values of its integer and date columns: at most the rows
/// that are not null, at most the values between the column's bounds; and of its other columns, at
/// most the rows that are not null, where it has at most [`FEW_ROWS`] rows.
fn table(plan: &dyn ExecutionPlan) -> Result<Statistics> {
    let mut stats = Arc::unwrap_or_clone(plan.partition_statistics(None)?);
    let Some(&rows) = stats.num_rows.get_value() else {
        return Ok(stats);
    };
    for column in &mut stats.column_statistics {
        if column.distinct_count.get_value().is_some() {
            continue;
        }
        let nulls = column.null_count.get_value().copied().unwrap_or(0);
        if let (Some(min), Some(max)) = (column.min_value.get_value(), column.max_value.get_value())
            && let (Some(min), Some(max)) = (integer(min), integer(max))
            && min <= max
        {
            let values = usize::try_from(max - min + 1).unwrap_or(usize::MAX);
            column.distinct_count = Precision::Inexact(rows.saturating_sub(nulls).min(values));
        } else if rows <= FEW_ROWS {
            column.distinct_count = Precision::Inexact(rows.saturating_sub(nulls));
        }
    }
    Ok(stats)
}

/// An integer or date bound as a number, the values between two bounds being countable.
fn integer(value: &ScalarValue) -> Option<i128> {
    Some(match value {
        ScalarValue::Int8(v) => i128::from((*v)?),
        ScalarValue::Int16(v) => i128::from((*v)?),
        ScalarValue::Int32(v) | ScalarValue::Date32(v) => i128::from((*v)?),
        ScalarValue::Int64(v) | ScalarValue::Date64(v) => i128::from((*v)?),
        ScalarValue::UInt8(v) => i128::from((*v)?),
        ScalarValue::UInt16(v) => i128::from((*v)?),
        ScalarValue::UInt32(v) => i128::from((*v)?),
        ScalarValue::UInt64(v) => i128::from((*v)?),
        _ => return None,
    })
}

/// The distinct values of `key`, if they can be told (every estimate here holds them to its rows).
fn key_ndv(stats: &Statistics, key: &Arc<dyn PhysicalExpr>) -> Option<usize> {
    key.downcast_ref::<Column>()
        .and_then(|c| stats.column_statistics.get(c.index()))
        .and_then(|s| s.distinct_count.get_value().copied())
        .map(|ndv| ndv.max(1))
}

/// The distinct combinations of a side's keys, if each key's can be told: their product, at most
/// the side's rows.
fn keys_ndv(stats: &Statistics, rows: usize, keys: &[&Arc<dyn PhysicalExpr>]) -> Option<usize> {
    keys.iter()
        .try_fold(1usize, |n, k| Some(n.saturating_mul(key_ndv(stats, k)?)))
        .map(|n| n.min(rows.max(1)))
}

/// An equi-join's estimate: `left × right / max(distinct keys of either side)` (a side whose keys
/// cannot be counted taken for the smaller side's rows) for inner and outer joins, the share of a
/// side's keys the other has for semi and anti joins, with each column's distinct values scaled
/// to the rows its side keeps. None when a side's rows (or a semi join's keys) are unknown: so are
/// the join's, and no join above it is swapped on a guess.
fn hash_join(join: &HashJoinExec, left: &Statistics, right: &Statistics) -> Option<Statistics> {
    let (&left_rows, &right_rows) = (left.num_rows.get_value()?, right.num_rows.get_value()?);
    let left_on: Vec<_> = join.on().iter().map(|(l, _)| l).collect();
    let right_on: Vec<_> = join.on().iter().map(|(_, r)| r).collect();
    let left_keys = keys_ndv(left, left_rows, &left_on);
    let right_keys = keys_ndv(right, right_rows, &right_on);
    // A semi or anti join keeps the rows of one side whose keys the other side has: the share of
    // its keys found there, the other side's keys being among its own where there are fewer.
    let matched = |rows: usize, own: Option<usize>, other: Option<usize>| -> Option<usize> {
        let share = (other? as f64 / own?.max(1) as f64).min(1.0);
        Some((rows as f64 * share).round() as usize)
    };
    let smaller = left_rows.min(right_rows).max(1);
    let keys = match (left_keys, right_keys) {
        (Some(l), Some(r)) => l.max(r),
        (Some(known), None) | (None, Some(known)) => known.max(smaller),
        (None, None) => smaller,
    };
    let inner = (left_rows as f64 * right_rows as f64 / keys as f64).round() as usize;
    let rows = match join.join_type() {
        JoinType::Inner => inner,
        JoinType::Left => inner.max(left_rows),
        JoinType::Right => inner.max(right_rows),
        JoinType::Full => {
            let both = left_rows.saturating_add(right_rows);
            inner.max(both - inner.min(both))
        }
        JoinType::LeftSemi => matched(left_rows, left_keys, right_keys)?,
        JoinType::RightSemi => matched(right_rows, right_keys, left_keys)?,
        JoinType::LeftAnti => left_rows - matched(left_rows, left_keys, right_keys)?,
        JoinType::RightAnti => right_rows - matched(right_rows, right_keys, left_keys)?,
        JoinType::LeftMark => left_rows,
        JoinType::RightMark => right_rows,
    };
    // A side's columns keep the distinct values of the rows that side keeps.
    let kept = |stats: &Statistics, side_rows: usize| -> Vec<ColumnStatistics> {
        let share = if side_rows == 0 {
            1.0
        } else {
            rows as f64 / side_rows as f64
        };
        let mut columns = stats.column_statistics.clone();
        for column in &mut columns {
            if let Some(&ndv) = column.distinct_count.get_value() {
                let ndv = ndv_after_selectivity(ndv, side_rows, share.min(1.0));
                column.distinct_count = Precision::Inexact(ndv);
            }
        }
        columns
    };
    let mark = |stats: &Statistics| {
        let mut columns = stats.column_statistics.clone();
        columns.push(ColumnStatistics::new_unknown());
        columns
    };
    let column_statistics = match join.join_type() {
        JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full => {
            let mut columns = kept(left, left_rows);
            columns.extend(kept(right, right_rows));
            columns
        }
        JoinType::LeftSemi | JoinType::LeftAnti => kept(left, left_rows),
        JoinType::RightSemi | JoinType::RightAnti => kept(right, right_rows),
        JoinType::LeftMark => mark(left),
        JoinType::RightMark => mark(right),
    };
    let stats = Statistics {
        num_rows: Precision::Inexact(rows),
        total_byte_size: Precision::Absent,
        column_statistics,
    };
    Some(stats.project(join.projection.as_ref()))
}

/// A GROUP BY's estimate: the product of its columns' distinct values, at most its input's rows
/// (unknown where a column's cannot be counted, and for grouping sets), one row without GROUP BY.
fn group_by(aggregate: &AggregateExec, input: &Statistics) -> Result<Statistics> {
    let group = aggregate.group_expr();
    if group.groups().len() > 1 {
        return Ok(Statistics::new_unknown(&aggregate.schema()));
    }
    let width = aggregate.schema().fields().len();
    let mut columns = Vec::with_capacity(width);
    let mut groups = Some(1usize);
    for (expr, _) in group.expr() {
        let column = expr
            .downcast_ref::<Column>()
            .and_then(|c| input.column_statistics.get(c.index()))
            .cloned()
            .unwrap_or_else(ColumnStatistics::new_unknown);
        groups = groups
            .zip(column.distinct_count.get_value())
            .map(|(g, &ndv)| g.saturating_mul(ndv.max(1)));
        columns.push(column);
    }
    columns.resize_with(width, ColumnStatistics::new_unknown);
    let input_rows = input.num_rows.get_value().copied();
    // Groups that cannot be counted are not taken for the input's rows: a GROUP BY of strings
    // usually makes far fewer, and an estimate that far off would swap the joins above it.
    let rows = if group.expr().is_empty() {
        Some(1)
    } else {
        match (groups, input_rows) {
            (Some(g), Some(r)) => Some(g.min(r)),
            (g, _) => g,
        }
    };
    Ok(Statistics {
        num_rows: rows.map_or(Precision::Absent, Precision::Inexact),
        total_byte_size: Precision::Absent,
        column_statistics: columns,
    })
}

//! SQE's optimizer rules beside DataFusion's, and where they go in its rule lists. They depend only
//! on DataFusion (no catalog, no session), which keeps the code that a DataFusion upgrade touches in
//! one place. Each rule's module says what it still wins over DataFusion's own plan, measured.
//!
//! Every rule can be switched off by a setting, for a benchmark run or to rule it out when a plan
//! looks wrong: `sqe.optimizer.<rule> = false` (e.g. `sqe-bench --set
//! sqe.optimizer.share_aggregates=false`). A rule stays only while it wins over DataFusion's own
//! plan beyond the noise (measured on each DataFusion upgrade: BENCHMARKS.md); the semi-join rewrite
//! went with 54.1, which gives semi joins the dynamic filter it was written to get.

mod conjunction;
mod decimal;
mod dynamic_filter;
mod eager_aggregate;
mod exec;
mod float_bounds;
mod grouping_sets;
mod join_sides;
mod key_bitmap;
mod one_scan;
mod operator_exprs;
mod rerun;
mod running_window;
mod shared;
mod shared_cte;
mod shifted_sums;
mod text_equality;
mod union_groupings;

use std::sync::Arc;

use datafusion::common::config::{ConfigExtension, ConfigOptions};
use datafusion::common::extensions_options;
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::TableSource;
use datafusion::optimizer::{Optimizer, OptimizerRule};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::physical_planner::ExtensionPlanner;

/// What data a table source stands for, if the engine can tell (see [`install`]).
pub(crate) type SourceIdentity = Arc<dyn Fn(&dyn TableSource) -> Option<String> + Send + Sync>;

extensions_options! {
    /// Switches for SQE's optimizer rules, all on by default.
    pub struct OptimizerSwitches {
        /// Identical aggregates are computed once (shared.rs).
        pub share_aggregates: bool, default = true
        /// A CTE read several times, ending in an aggregate, is computed once (shared_cte.rs);
        /// so are aggregates without GROUP BY over one input (one_scan.rs).
        pub share_ctes: bool, default = true
        /// Dynamic filters drop rows above the Parquet scan (dynamic_filter.rs).
        pub dynamic_filter_rows: bool, default = true
        /// Those of hash joins test a bitmap of the build side's keys first (key_bitmap.rs).
        pub join_key_bitmaps: bool, default = true
        /// Filters evaluate their conjuncts over a bitmap of the passing rows (conjunction.rs).
        pub filter_conjunctions: bool, default = true
        /// Decimal `+ - *` skip per-row overflow checks that cannot fail (decimal.rs).
        pub decimal_arithmetic: bool, default = true
        /// A hash join whose build side is estimated much the larger swaps sides (join_sides.rs).
        pub join_sides: bool, default = true
        /// GROUPING SETS, CUBE and ROLLUP aggregate each set from a finer one (grouping_sets.rs);
        /// a UNION ALL of aggregates over one input is one such aggregate (union_groupings.rs).
        pub grouping_sets: bool, default = true
        /// An aggregate over a join sums by keys before joining the table of its text columns
        /// (eager_aggregate.rs).
        pub eager_aggregation: bool, default = true
        /// Running sums, counts, minima and maxima over a window are one pass over the sorted rows
        /// (running_window.rs).
        pub running_windows: bool, default = true
        /// A text column compared with constants compares 16-byte views (text_equality.rs).
        pub text_equality: bool, default = true
        /// `sum(x + c)` is `sum(x) + c * count(x)` over integers (shifted_sums.rs).
        pub shifted_sums: bool, default = true
    }
}

extensions_options! {
    /// SQE's settings in a DataFusion session, under `sqe.` (DataFusion takes the first part of a
    /// setting's name as its namespace, so `sqe.optimizer.<rule>` lives here).
    pub struct SqeOptimizerOptions {
        /// `sqe.optimizer.<rule>`: whether each of SQE's rules runs.
        pub optimizer: OptimizerSwitches, default = OptimizerSwitches::default()
    }
}

impl ConfigExtension for SqeOptimizerOptions {
    const PREFIX: &'static str = "sqe";
}

/// The switches in force (all on when the session has none).
fn switches(config: &ConfigOptions) -> OptimizerSwitches {
    config
        .extensions
        .get::<SqeOptimizerOptions>()
        .map(|o| o.optimizer.clone())
        .unwrap_or_default()
}

/// Adds SQE's rules to a session being built; its config must carry [`SqeOptimizerOptions`] for
/// the switches to be settable.
///
/// `identity` says what data a table source stands for (None: only itself), for the rules that
/// compute alike plans once: plans name tables, not the data behind a name.
pub(crate) fn install(
    builder: SessionStateBuilder,
    identity: SourceIdentity,
) -> SessionStateBuilder {
    builder
        .with_optimizer_rules(logical_rules(identity))
        .with_physical_optimizer_rules(physical_rules())
}

/// The physical planners of SQE's plan nodes, fresh for each statement's planning.
pub(crate) fn extension_planners() -> Vec<Arc<dyn ExtensionPlanner + Send + Sync>> {
    vec![Arc::new(shared_cte::SharedCtePlanner::default())]
}

/// DataFusion's logical optimizer rules with SQE's: first, sums of shifted integers become one sum
/// and one count; a union of aggregates over one input becomes grouping sets, aggregates over one
/// input and a CTE's references are marked as one computation once subqueries are joins and
/// before any filter moves into them; the filters the pushdown then leaves above a CTE's
/// references go into it as one; then aggregates over joins sum by keys before joining the table
/// of their text columns.
fn logical_rules(identity: SourceIdentity) -> Vec<Arc<dyn OptimizerRule + Send + Sync>> {
    let mut rules = Optimizer::new().rules;
    rules.insert(0, Arc::new(shifted_sums::ShiftedSums));
    // Without DataFusion's filter pushdown there is nothing to place them around.
    if let Some(pushdown) = rules.iter().position(|r| r.name() == "push_down_filter") {
        rules.insert(
            pushdown + 1,
            Arc::new(shared_cte::PushFiltersIntoSharedCtes),
        );
        rules.insert(pushdown + 2, Arc::new(eager_aggregate::EagerAggregation));
        let marks = shared_cte::MarkSharedCtes(Arc::clone(&identity));
        rules.insert(pushdown, Arc::new(marks));
        rules.insert(pushdown, Arc::new(one_scan::OneScan(Arc::clone(&identity))));
        rules.insert(
            pushdown,
            Arc::new(union_groupings::UnionOfGroupings(identity)),
        );
    }
    rules
}

/// DataFusion's physical optimizer rules with SQE's: first the bounds of floating-point columns
/// stop being exact; join sides are checked right after DataFusion's join selection, before
/// distribution and dynamic filters; identical aggregates are shared before the joins hand out
/// dynamic filters (which would make the copies differ); grouping sets from finer sets, dynamic
/// filters on rows, conjunctions, running windows and text equalities come after every DataFusion
/// rule, and last the scans stop pruning by the bounds of floating-point columns.
fn physical_rules() -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let mut rules = PhysicalOptimizer::new().rules;
    // Correctness: before any rule reads a scan's statistics.
    rules.insert(0, Arc::new(float_bounds::InexactFloatBounds));
    if let Some(selection) = rules.iter().position(|r| r.name() == "join_selection") {
        rules.insert(selection + 1, Arc::new(join_sides::SmallerBuildSides));
    }
    let post = rules
        .iter()
        .position(|r| r.name() == "FilterPushdown(Post)")
        .unwrap_or(rules.len());
    rules.insert(post, Arc::new(shared::ShareAggregates));
    rules.push(Arc::new(grouping_sets::GroupingSetsFromFinerSets));
    // Correctness, not a speed-up: after DataFusion's rules have placed the joins' sides.
    rules.push(Arc::new(rerun::OwnRangesWhereRunTwice));
    rules.push(Arc::new(dynamic_filter::DynamicFilterRows));
    rules.push(Arc::new(conjunction::FilterConjunctions));
    rules.push(Arc::new(decimal::DecimalArithmetic));
    rules.push(Arc::new(running_window::RunningWindows));
    rules.push(Arc::new(text_equality::TextEquality));
    // Correctness: once every filter has reached the scans.
    rules.push(Arc::new(float_bounds::NoFloatBoundPruning));
    rules
}

#[cfg(test)]
mod tests {
    use datafusion::prelude::SessionConfig;

    use super::*;

    #[test]
    fn each_rule_is_switched_by_its_setting() {
        let mut config = SessionConfig::new().with_option_extension(SqeOptimizerOptions::default());
        assert!(switches(config.options()).share_aggregates);
        let options = config.options_mut();
        for rule in [
            "share_aggregates",
            "share_ctes",
            "dynamic_filter_rows",
            "join_key_bitmaps",
            "filter_conjunctions",
            "decimal_arithmetic",
            "join_sides",
            "grouping_sets",
            "eager_aggregation",
            "running_windows",
            "text_equality",
            "shifted_sums",
        ] {
            options
                .set(&format!("sqe.optimizer.{rule}"), "false")
                .unwrap_or_else(|e| panic!("{rule}: {e}"));
        }
        let off = switches(config.options());
        assert!(
            !(off.share_aggregates
                || off.share_ctes
                || off.dynamic_filter_rows
                || off.join_key_bitmaps
                || off.filter_conjunctions
                || off.decimal_arithmetic
                || off.join_sides
                || off.grouping_sets
                || off.eager_aggregation
                || off.running_windows
                || off.text_equality
                || off.shifted_sums)
        );
        let unknown = config
            .options_mut()
            .set("sqe.optimizer.no_such_rule", "false");
        assert!(unknown.is_err());
    }
}

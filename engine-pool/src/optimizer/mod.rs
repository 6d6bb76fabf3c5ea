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
mod exec;
mod key_bitmap;
mod operator_exprs;
mod rerun;
mod shared;

use std::sync::Arc;

use datafusion::common::config::{ConfigExtension, ConfigOptions};
use datafusion::common::extensions_options;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;

extensions_options! {
    /// Switches for SQE's optimizer rules, all on by default.
    pub struct OptimizerSwitches {
        /// Identical aggregates are computed once (shared.rs).
        pub share_aggregates: bool, default = true
        /// Dynamic filters drop rows above the Parquet scan (dynamic_filter.rs).
        pub dynamic_filter_rows: bool, default = true
        /// Those of hash joins test a bitmap of the build side's keys first (key_bitmap.rs).
        pub join_key_bitmaps: bool, default = true
        /// Filters evaluate their conjuncts over a bitmap of the passing rows (conjunction.rs).
        pub filter_conjunctions: bool, default = true
        /// Decimal `+ - *` skip per-row overflow checks that cannot fail (decimal.rs).
        pub decimal_arithmetic: bool, default = true
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
pub(crate) fn install(builder: SessionStateBuilder) -> SessionStateBuilder {
    builder.with_physical_optimizer_rules(physical_rules())
}

/// DataFusion's physical optimizer rules with SQE's: identical aggregates are shared before the
/// joins hand out dynamic filters (which would make the copies differ); dynamic filters on rows and
/// conjunctions come after every DataFusion rule.
fn physical_rules() -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let mut rules = PhysicalOptimizer::new().rules;
    let post = rules
        .iter()
        .position(|r| r.name() == "FilterPushdown(Post)")
        .unwrap_or(rules.len());
    rules.insert(post, Arc::new(shared::ShareAggregates));
    // Correctness, not a speed-up: after DataFusion's rules have placed the joins' sides.
    rules.push(Arc::new(rerun::OwnRangesWhereRunTwice));
    rules.push(Arc::new(dynamic_filter::DynamicFilterRows));
    rules.push(Arc::new(conjunction::FilterConjunctions));
    rules.push(Arc::new(decimal::DecimalArithmetic));
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
            "dynamic_filter_rows",
            "join_key_bitmaps",
            "filter_conjunctions",
            "decimal_arithmetic",
        ] {
            options
                .set(&format!("sqe.optimizer.{rule}"), "false")
                .unwrap_or_else(|e| panic!("{rule}: {e}"));
        }
        let off = switches(config.options());
        assert!(
            !(off.share_aggregates
                || off.dynamic_filter_rows
                || off.join_key_bitmaps
                || off.filter_conjunctions
                || off.decimal_arithmetic)
        );
        let unknown = config
            .options_mut()
            .set("sqe.optimizer.no_such_rule", "false");
        assert!(unknown.is_err());
    }
}

//! Semi joins against a unique key become inner joins.
//!
//! `WHERE o_orderkey IN (SELECT l_orderkey … GROUP BY l_orderkey HAVING …)` plans as a semi join of
//! the outer query against the subquery. DataFusion gives a hash join's probe side a dynamic filter
//! of the built keys only for inner joins, so the outer query (three tables joined, in TPC-H q18)
//! is computed in full and only then checked against the subquery's few keys. When the subquery
//! side is unique on the join keys (a GROUP BY on them, or a DISTINCT), each outer row matches at
//! most one of its rows, so the inner join keeps exactly the semi join's rows; the inner join's
//! dynamic filter then reaches down to the outer tables' scans.

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Dependency, NullEquality, Result as DFResult};
use datafusion::logical_expr::{Expr, Join, JoinType, LogicalPlan, LogicalPlanBuilder};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// The logical optimizer rule.
#[derive(Debug)]
pub(crate) struct SemiJoinToInner;

impl OptimizerRule for SemiJoinToInner {
    fn name(&self) -> &str {
        "semi_join_to_inner"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> DFResult<Transformed<LogicalPlan>> {
        if !super::switches(&config.options()).semi_join_to_inner {
            return Ok(Transformed::no(plan));
        }
        let LogicalPlan::Join(join) = &plan else {
            return Ok(Transformed::no(plan));
        };
        // The side whose rows the semi join returns, and the side it only checks.
        let (kept, checked, checked_keys): (_, _, Vec<&Expr>) = match join.join_type {
            JoinType::LeftSemi => (
                &join.left,
                &join.right,
                join.on.iter().map(|(_, r)| r).collect(),
            ),
            JoinType::RightSemi => (
                &join.right,
                &join.left,
                join.on.iter().map(|(l, _)| l).collect(),
            ),
            _ => return Ok(Transformed::no(plan)),
        };
        // NULL keys never match, so a unique key's repeated NULLs cannot duplicate a row.
        if join.null_equality != NullEquality::NullEqualsNothing
            || !unique_on(checked.schema(), &checked_keys)
        {
            return Ok(Transformed::no(plan));
        }
        let Ok(inner) = Join::try_new(
            Arc::clone(&join.left),
            Arc::clone(&join.right),
            join.on.clone(),
            join.filter.clone(),
            JoinType::Inner,
            join.join_constraint,
            join.null_equality,
            false,
        ) else {
            // Both sides have a column of the same qualified name: leave the semi join.
            return Ok(Transformed::no(plan));
        };
        let columns = kept.schema().columns().into_iter().map(Expr::Column);
        match LogicalPlanBuilder::from(LogicalPlan::Join(inner))
            .project(columns)
            .and_then(LogicalPlanBuilder::build)
        {
            Ok(rewritten) => Ok(Transformed::yes(rewritten)),
            Err(_) => Ok(Transformed::no(plan)),
        }
    }
}

/// Whether no two rows of `schema` agree on `keys` (all plain columns): some unique key of the
/// schema (a GROUP BY's keys, a DISTINCT's columns) lies within them.
fn unique_on(schema: &DFSchema, keys: &[&Expr]) -> bool {
    let indices: Option<Vec<usize>> = keys
        .iter()
        .map(|k| match k {
            Expr::Column(c) => schema.index_of_column(c).ok(),
            _ => None,
        })
        .collect();
    let Some(indices) = indices else {
        return false;
    };
    schema.functional_dependencies().iter().any(|d| {
        d.mode == Dependency::Single
            && !d.source_indices.is_empty()
            && d.source_indices.iter().all(|i| indices.contains(i))
    })
}

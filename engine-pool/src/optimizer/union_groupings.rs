//! A UNION ALL of aggregates over one input, each by other columns, is one GROUPING SETS
//! aggregate over that input.
//!
//! Reports written before ROLLUP, and TPC-DS q27 as DuckDB words it, spell subtotals out: `SELECT
//! a, b, avg(x) FROM t GROUP BY a, b UNION ALL SELECT a, NULL, avg(x) FROM t GROUP BY a UNION ALL
//! SELECT NULL, NULL, avg(x) FROM t`. When `t` is a join (q27's five tables), each branch computes
//! it again. [`UnionOfGroupings`] aggregates the input once, by `GROUPING SETS ((a, b), (a), ())`
//! with every branch's functions, and gives each row the columns of the branch its set came from
//! (a CASE on the grouping id): the same rows, as each set holds the groups of one branch. The
//! sets then go to [`GroupingSetsFromFinerSets`](super::grouping_sets), which aggregates each from
//! a finer one.
//!
//! Applied when the branches are projections of aggregates whose inputs are the same plan over the
//! same data, deterministic, grouped by columns, each set of columns once. Switch:
//! `sqe.optimizer.grouping_sets`.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchemaRef, Result as DFResult, ScalarValue};
use datafusion::logical_expr::expr::Case;
use datafusion::logical_expr::utils::grouping_set_to_exprlist;
use datafusion::logical_expr::{
    Aggregate, Expr, ExprSchemable, GroupingSet, LogicalPlan, Projection, Union, col, lit,
};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use super::SourceIdentity;
use super::shared_cte::{deterministic, deterministic_expr, sources};

/// The rule (module docs). It runs with [`OneScan`](super::one_scan::OneScan), before filters
/// move into the branches.
pub(crate) struct UnionOfGroupings(pub(super) SourceIdentity);

impl std::fmt::Debug for UnionOfGroupings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UnionOfGroupings")
    }
}

impl OptimizerRule for UnionOfGroupings {
    fn name(&self) -> &str {
        "union_of_groupings"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> DFResult<Transformed<LogicalPlan>> {
        if !super::switches(&config.options()).grouping_sets {
            return Ok(Transformed::no(plan));
        }
        plan.transform_up(|node| match node {
            LogicalPlan::Union(union) => self.combine(union),
            node => Ok(Transformed::no(node)),
        })
    }
}

/// One branch taken apart: the branch, its aggregate and the expressions its projection
/// computes from that.
struct Branch<'a> {
    plan: &'a Arc<LogicalPlan>,
    aggregate: &'a Aggregate,
    exprs: &'a [Expr],
}

impl UnionOfGroupings {
    /// `union` with the branches over the same input merged into one aggregate each.
    fn combine(&self, union: Union) -> DFResult<Transformed<LogicalPlan>> {
        let schema = Arc::clone(&union.schema);
        // Branches that merge, grouped by input; the rest stay as they are.
        let mut groups: Vec<(Vec<String>, Vec<Branch>)> = Vec::new();
        let mut others = Vec::new();
        for input in &union.inputs {
            let Some(branch) = branch(input) else {
                others.push(Arc::clone(input));
                continue;
            };
            let data = sources(&branch.aggregate.input, &self.0);
            match groups
                .iter_mut()
                .find(|(d, b)| *d == data && b[0].aggregate.input == branch.aggregate.input)
            {
                Some((_, branches)) => branches.push(branch),
                None => groups.push((data, vec![branch])),
            }
        }
        let mut inputs = Vec::new();
        let mut merged = false;
        for (_, branches) in groups {
            if branches.len() > 1
                && let Some(plan) = merge(&branches, &schema)?
            {
                inputs.push(Arc::new(plan));
                merged = true;
            } else {
                inputs.extend(branches.iter().map(|b| Arc::clone(b.plan)));
            }
        }
        if !merged {
            return Ok(Transformed::no(LogicalPlan::Union(union)));
        }
        inputs.extend(others);
        if inputs.len() == 1 {
            return Ok(Transformed::yes(Arc::unwrap_or_clone(inputs.remove(0))));
        }
        Ok(Transformed::yes(LogicalPlan::Union(Union {
            inputs,
            schema,
        })))
    }
}

/// A branch that can merge: a projection of an aggregate grouped by plain columns (no grouping
/// sets of its own) over a deterministic input.
fn branch(plan: &Arc<LogicalPlan>) -> Option<Branch<'_>> {
    let LogicalPlan::Projection(projection) = plan.as_ref() else {
        return None;
    };
    let LogicalPlan::Aggregate(aggregate) = projection.input.as_ref() else {
        return None;
    };
    let plain = aggregate
        .group_expr
        .iter()
        .all(|e| matches!(e, Expr::Column(_)));
    let exprs = aggregate.aggr_expr.iter().chain(&projection.expr);
    if !plain || !deterministic(&aggregate.input) || !exprs.into_iter().all(deterministic_expr) {
        return None;
    }
    Some(Branch {
        plan,
        aggregate,
        exprs: &projection.expr,
    })
}

/// One GROUPING SETS aggregate over the branches' input, and a projection giving each row the
/// columns of its set's branch (None when two branches group by the same columns).
fn merge(branches: &[Branch], schema: &DFSchemaRef) -> DFResult<Option<LogicalPlan>> {
    let sets: Vec<Vec<Expr>> = branches
        .iter()
        .map(|b| b.aggregate.group_expr.clone())
        .collect();
    for (i, set) in sets.iter().enumerate() {
        if sets[..i].iter().any(|s| same_columns(s, set)) {
            return Ok(None);
        }
    }
    let mut functions: Vec<Expr> = Vec::new();
    for b in branches {
        for f in &b.aggregate.aggr_expr {
            if !functions.contains(f) {
                functions.push(f.clone());
            }
        }
    }
    let grouping = vec![Expr::GroupingSet(GroupingSet::GroupingSets(sets.clone()))];
    let columns: Vec<Expr> = grouping_set_to_exprlist(&grouping)?
        .into_iter()
        .cloned()
        .collect();
    // DataFusion's grouping id has a bit per column, 64 at most.
    if columns.len() > 64 {
        return Ok(None);
    }
    let input = Arc::clone(&branches[0].aggregate.input);
    let aggregate = Aggregate::try_new(input, grouping, functions)?;
    let id_type = aggregate
        .schema
        .field_with_unqualified_name(Aggregate::INTERNAL_GROUPING_ID)?
        .data_type()
        .clone();
    let aggregate = Arc::new(LogicalPlan::Aggregate(aggregate));
    // DataFusion's grouping id: a bit per column, the first column's the highest, set where the
    // set leaves the column out.
    let ids = sets
        .iter()
        .map(|set| {
            let id = columns
                .iter()
                .fold(0u64, |id, c| (id << 1) | u64::from(!set.contains(c)));
            ScalarValue::UInt64(Some(id)).cast_to(&id_type)
        })
        .collect::<DFResult<Vec<_>>>()?;
    let id = col(Aggregate::INTERNAL_GROUPING_ID);
    let mut exprs = Vec::with_capacity(schema.fields().len());
    for (j, (qualifier, field)) in schema.iter().enumerate() {
        let mut whens = Vec::with_capacity(branches.len());
        for (b, value) in branches.iter().zip(&ids) {
            let expr = b.exprs[j].clone().unalias();
            let expr = if expr.get_type(aggregate.schema())? == *field.data_type() {
                expr
            } else {
                expr.cast_to(field.data_type(), aggregate.schema())?
            };
            whens.push((Box::new(id.clone().eq(lit(value.clone()))), Box::new(expr)));
        }
        let (_, last) = whens
            .pop()
            .unwrap_or_else(|| unreachable!("two branches or more"));
        let case = Expr::Case(Case::new(None, whens, Some(last)));
        exprs.push(case.alias_qualified(qualifier.cloned(), field.name()));
    }
    let projection = Projection::try_new(exprs, aggregate)?;
    // A grouping set's columns may be NULL; the plan above the union may have been told a column
    // never is.
    let nullable = |f: &datafusion::arrow::datatypes::FieldRef| f.is_nullable();
    let widened = schema
        .fields()
        .iter()
        .zip(projection.schema.fields())
        .any(|(was, now)| !nullable(was) && nullable(now));
    if widened {
        return Ok(None);
    }
    Ok(Some(LogicalPlan::Projection(projection)))
}

/// Whether two GROUP BY lists name the same columns.
fn same_columns(a: &[Expr], b: &[Expr]) -> bool {
    a.len() == b.len() && a.iter().all(|e| b.contains(e))
}

//! Rewriting the row-wise expressions of a physical plan (those of its projections, filters and
//! aggregate arguments), for a rule that changes how arithmetic runs: decimal arithmetic without
//! checks that cannot fail (decimal.rs).

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::Result;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};

/// An expression rewrite, given the schema of the rows it runs over.
pub(crate) type ExprRewrite =
    fn(Arc<dyn PhysicalExpr>, &Schema) -> Result<Transformed<Arc<dyn PhysicalExpr>>>;

/// `plan` with `rewrite` applied to the expressions of its projections, filters and aggregate
/// arguments (where row-wise arithmetic runs).
pub(crate) fn rewrite_operator_expressions(
    plan: Arc<dyn ExecutionPlan>,
    rewrite: ExprRewrite,
) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        if let Some(p) = node.downcast_ref::<ProjectionExec>() {
            let schema = p.input().schema();
            let mut changed = false;
            let mut exprs = Vec::with_capacity(p.expr().len());
            for e in p.expr() {
                let t = rewrite(Arc::clone(&e.expr), &schema)?;
                changed |= t.transformed;
                exprs.push(ProjectionExpr::new(t.data, e.alias.clone()));
            }
            if !changed {
                return Ok(Transformed::no(node));
            }
            let rebuilt = ProjectionExec::try_new(exprs, Arc::clone(p.input()))?;
            return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>));
        }
        if let Some(f) = node.downcast_ref::<FilterExec>() {
            let t = rewrite(Arc::clone(f.predicate()), &f.input().schema())?;
            if !t.transformed {
                return Ok(Transformed::no(node));
            }
            let rebuilt = FilterExecBuilder::from(f).with_predicate(t.data).build()?;
            return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>));
        }
        if let Some(a) = node.downcast_ref::<AggregateExec>() {
            let schema = a.input_schema();
            let mut changed = false;
            let mut aggregates = Vec::with_capacity(a.aggr_expr().len());
            for f in a.aggr_expr() {
                let mut args = Vec::new();
                for arg in f.expressions() {
                    let t = rewrite(arg, &schema)?;
                    changed |= t.transformed;
                    args.push(t.data);
                }
                let order_by = f.order_bys().iter().map(|s| Arc::clone(&s.expr)).collect();
                match f.with_new_expressions(args, order_by) {
                    Some(new) => aggregates.push(Arc::new(new)),
                    None => aggregates.push(Arc::clone(f)),
                }
            }
            if !changed {
                return Ok(Transformed::no(node));
            }
            let rebuilt = a.with_new_aggr_exprs(aggregates);
            return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>));
        }
        Ok(Transformed::no(node))
    })
    .data()
}

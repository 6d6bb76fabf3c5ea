//! Small helpers on DataFusion's logical expressions and plans that the plan rules share
//! (operands.rs, casts.rs, timestamps.rs): a rewrite of every expression of a plan that keeps
//! their names, and tests of a type. They sit below the rules, so that no rule imports another's
//! internals for them.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, IntervalUnit};
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, LogicalPlan, ScalarUDF};

/// Rewrites every expression of every node (subqueries too) with `rewrite`, given the schema
/// the expression reads, keeping each expression's name (the nodes above may refer to it); each
/// node's schema is then computed again by `reschema`, for its rewritten expressions and its
/// inputs' changed types.
pub(super) fn rewrite_plan(
    plan: LogicalPlan,
    rewrite: impl Fn(Expr, &DFSchema) -> Result<Transformed<Expr>>,
    reschema: impl Fn(LogicalPlan) -> Result<LogicalPlan>,
) -> Result<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| {
        let schema = match &node {
            LogicalPlan::TableScan(scan) => scan.projected_schema.as_ref().clone(),
            _ => merge_schema(&node.inputs()),
        };
        let names = datafusion::logical_expr::expr_rewriter::NamePreserver::new(&node);
        node.map_expressions(|e| {
            let name = names.save(&e);
            rewrite(e, &schema).map(|t| t.update_data(|e| name.restore(e)))
        })?
        .map_data(&reschema)
    })
    .map(|t| t.data)
}

/// Replaces `x` with `f(x)`.
pub(super) fn wrap(x: &mut Expr, f: impl FnOnce(Expr) -> Expr) {
    let inner = std::mem::replace(x, Expr::Literal(ScalarValue::Null, None));
    *x = f(inner);
}

pub(super) fn call_udf(f: Arc<ScalarUDF>, x: Expr) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(f, vec![x]))
}

pub(super) fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// Whether `t` is an Arrow interval that stands for Trino's interval day to second (a duration
/// does too, but compares and adds as the time it spans already).
pub(super) fn is_day_second(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Interval(IntervalUnit::DayTime | IntervalUnit::MonthDayNano)
    )
}

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

/// The operands of `e` that its coercion makes one type, grouped: of a binary operator, BETWEEN,
/// IN, CASE (its keys, its results) and a function call (all its arguments, for the caller to
/// judge).
pub(super) fn operand_groups(e: &mut Expr) -> Vec<Vec<&mut Expr>> {
    match e {
        Expr::BinaryExpr(b) => vec![vec![b.left.as_mut(), b.right.as_mut()]],
        Expr::Between(b) => vec![vec![b.expr.as_mut(), b.low.as_mut(), b.high.as_mut()]],
        Expr::InList(i) => {
            let mut group = vec![i.expr.as_mut()];
            group.extend(i.list.iter_mut());
            vec![group]
        }
        Expr::Case(c) => {
            let mut keys: Vec<&mut Expr> = c.expr.iter_mut().map(Box::as_mut).collect();
            let mut results: Vec<&mut Expr> = c.else_expr.iter_mut().map(Box::as_mut).collect();
            for (when, then) in &mut c.when_then_expr {
                if !keys.is_empty() {
                    keys.push(when.as_mut());
                }
                results.push(then.as_mut());
            }
            vec![keys, results]
        }
        Expr::ScalarFunction(f) => vec![f.args.iter_mut().collect()],
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::{Field, Schema, TimeUnit};
    use datafusion::common::tree_node::TreeNode;
    use datafusion::logical_expr::table_scan;
    use datafusion::prelude::{col, lit};

    use super::*;

    #[test]
    fn type_tests() {
        for t in [DataType::Utf8, DataType::LargeUtf8, DataType::Utf8View] {
            assert!(is_text(&t), "{t}");
        }
        assert!(!is_text(&DataType::Binary));
        assert!(is_day_second(&DataType::Interval(IntervalUnit::DayTime)));
        assert!(is_day_second(&DataType::Interval(
            IntervalUnit::MonthDayNano
        )));
        assert!(!is_day_second(&DataType::Interval(IntervalUnit::YearMonth)));
        assert!(!is_day_second(&DataType::Duration(TimeUnit::Millisecond)));
    }

    #[test]
    fn wrap_and_call() {
        let mut e = col("a");
        wrap(&mut e, |x| call_udf(sqe_functions::to_milliseconds(), x));
        assert_eq!(e.to_string(), "to_milliseconds(a)");
    }

    /// Every `Int32(1)` as `Int64(1)`.
    fn widen_ones(e: Expr, _schema: &DFSchema) -> Result<Transformed<Expr>> {
        e.transform_up(|x| {
            Ok(match x {
                Expr::Literal(ScalarValue::Int32(Some(1)), m) => {
                    Transformed::yes(Expr::Literal(ScalarValue::Int64(Some(1)), m))
                }
                other => Transformed::no(other),
            })
        })
    }

    #[test]
    fn a_plan_rewrite_keeps_names_and_retypes() -> Result<()> {
        let schema = Schema::new(vec![Field::new("a", DataType::Int32, true)]);
        let plan = table_scan(Some("t"), &schema, None)?
            .filter(col("a").gt(lit(1)))?
            .project(vec![col("a") + lit(1)])?
            .build()?;
        let rewritten = rewrite_plan(plan, widen_ones, LogicalPlan::recompute_schema)?;
        assert_eq!(
            rewritten.display_indent().to_string(),
            "Projection: t.a + Int64(1) AS t.a + Int32(1)\
             \n  Filter: t.a > Int64(1)\
             \n    TableScan: t"
        );
        let out = rewritten.schema().field(0);
        assert_eq!(
            (out.name().as_str(), out.data_type()),
            ("t.a + Int32(1)", &DataType::Int64)
        );
        Ok(())
    }
}

//! Binary operators as DataFusion's SQL planner builds them ([`TrinoOperators`]), before any
//! analyzer rule runs: the planner refuses to compare times of two units, and has no
//! `interval * n`, `n * interval` or `interval / n`.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{Expr, Operator};
use datafusion::sql::sqlparser::ast;

use super::timestamps::{finest_group, is_zoned, types_of, zoned_operands};

/// The operands of a binary operator, at one timestamp (or time) unit before DataFusion types the
/// operation: DataFusion refuses to compare times of two units while planning, before any
/// analyzer rule runs. And `interval * n`, `n * interval` and `interval / n`, which DataFusion
/// has not.
#[derive(Debug)]
pub(crate) struct TrinoOperators;

impl ExprPlanner for TrinoOperators {
    fn plan_binary_op(
        &self,
        mut expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        use ast::BinaryOperator as Op;
        let mut types = types_of(&[&mut expr.left, &mut expr.right], schema);
        if types.iter().any(is_zoned) {
            let shift = match expr.op {
                Op::Plus => Some(Operator::Plus),
                Op::Minus => Some(Operator::Minus),
                _ => None,
            };
            if let Some(shifted) = zoned_operands(&mut expr.left, shift, &mut expr.right, &types) {
                return Ok(PlannerResult::Planned(shifted));
            }
            types = types_of(&[&mut expr.left, &mut expr.right], schema);
        }
        let interval = |t: &DataType| matches!(t, DataType::Interval(_) | DataType::Duration(_));
        let scaled = match (&expr.op, &types[0], &types[1]) {
            (Op::Multiply | Op::Divide, l, r) if interval(l) && r.is_numeric() => {
                Some((expr.left.clone(), expr.right.clone()))
            }
            (Op::Multiply, l, r) if l.is_numeric() && interval(r) => {
                Some((expr.right.clone(), expr.left.clone()))
            }
            _ => None,
        };
        if let Some((interval, factor)) = scaled {
            let divide = datafusion::prelude::lit(matches!(expr.op, Op::Divide));
            return Ok(PlannerResult::Planned(Expr::ScalarFunction(
                ScalarFunction::new_udf(
                    sqe_functions::interval_scaled(),
                    vec![interval, factor, divide],
                ),
            )));
        }
        let compares = matches!(
            expr.op,
            Op::Eq | Op::NotEq | Op::Lt | Op::LtEq | Op::Gt | Op::GtEq | Op::Spaceship
        );
        finest_group(vec![&mut expr.left, &mut expr.right], &types, compares);
        Ok(PlannerResult::Original(expr))
    }
}

//! Binary operators as DataFusion's SQL planner builds them ([`TrinoOperators`]), before any
//! analyzer rule runs: the planner refuses to compare times of two units, and has no
//! `interval * n`, `n * interval` or `interval / n`; and arithmetic on ranking functions' counts
//! stays in bigints.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{Cast, Expr, Operator};
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
        // DataFusion's ranking functions (`row_number()`, `rank()`, …) count in unsigned
        // integers, Trino's in bigints: arithmetic takes an unsigned operand as a bigint, so that
        // `row_number() - 1` is a bigint as in Trino (DataFusion would make a decimal(20,0) of it,
        // which no date function takes).
        if matches!(expr.op, Op::Plus | Op::Minus | Op::Multiply | Op::Modulo) {
            for (operand, t) in [&mut expr.left, &mut expr.right].into_iter().zip(&types) {
                if t.is_unsigned_integer() {
                    let unsigned = std::mem::replace(operand, datafusion::prelude::lit(0));
                    *operand = Expr::Cast(Cast::new(Box::new(unsigned), DataType::Int64));
                }
            }
        }
        let compares = matches!(
            expr.op,
            Op::Eq | Op::NotEq | Op::Lt | Op::LtEq | Op::Gt | Op::GtEq | Op::Spaceship
        );
        finest_group(vec![&mut expr.left, &mut expr.right], &types, compares);
        Ok(PlannerResult::Original(expr))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::IntervalDayTime;
    use datafusion::common::ScalarValue;
    use datafusion::prelude::{col, lit};

    use super::*;
    use crate::trino_sql::testing::{schema, value};

    fn planned(op: ast::BinaryOperator, left: Expr, right: Expr) -> (bool, String) {
        let schema = schema(&[("i", DataType::Int64)]);
        let raw = RawBinaryExpr { op, left, right };
        match TrinoOperators.plan_binary_op(raw, &schema) {
            Ok(PlannerResult::Planned(e)) => (true, e.to_string()),
            Ok(PlannerResult::Original(raw)) => {
                (false, format!("{} {} {}", raw.left, raw.op, raw.right))
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn intervals_scaled() {
        let day = lit(ScalarValue::IntervalDayTime(Some(IntervalDayTime::new(
            1, 0,
        ))));
        use ast::BinaryOperator as Op;
        assert_eq!(
            planned(Op::Multiply, day.clone(), col("i")),
            (true, "sqe_interval_scaled(IntervalDayTime(\"IntervalDayTime { days: 1, milliseconds: 0 }\"), i, Boolean(false))".to_string())
        );
        assert_eq!(
            planned(Op::Multiply, col("i"), day.clone()),
            (true, "sqe_interval_scaled(IntervalDayTime(\"IntervalDayTime { days: 1, milliseconds: 0 }\"), i, Boolean(false))".to_string())
        );
        assert_eq!(
            planned(Op::Divide, day.clone(), lit(2)),
            (true, "sqe_interval_scaled(IntervalDayTime(\"IntervalDayTime { days: 1, milliseconds: 0 }\"), Int32(2), Boolean(true))".to_string())
        );
        // A number divided by an interval, or numbers: DataFusion's.
        assert_eq!(
            planned(Op::Divide, lit(2), day),
            (
                false,
                "Int32(2) / IntervalDayTime(\"IntervalDayTime { days: 1, milliseconds: 0 }\")"
                    .to_string()
            )
        );
        assert_eq!(
            planned(Op::Plus, col("i"), lit(1)),
            (false, "i + Int32(1)".to_string())
        );
    }

    #[tokio::test]
    async fn values() {
        assert_eq!(
            value("SELECT INTERVAL '1' DAY * 2 = INTERVAL '2' DAY").await,
            "true"
        );
        assert_eq!(
            value("SELECT INTERVAL '3' HOUR / 2 = INTERVAL '90' MINUTE").await,
            "true"
        );
        // Times of two units compare at the finer (DataFusion's planner refuses them).
        assert_eq!(value("SELECT tm_s < tm_ms FROM t").await, "true");
        assert_eq!(value("SELECT tm_s = tm_ms FROM t").await, "false");
    }
}

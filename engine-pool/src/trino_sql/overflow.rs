//! Integer `+`, `-` and `*` fail on overflow, as in Trino (DataFusion's wrap around):
//!
//! - between constants, when the plan is analyzed ([`fold_constant`]): `9223372036854775807 + 1`
//!   is refused there, as DataFusion would fold it with wrapping arithmetic before any row is read;
//! - over columns, in the physical plan ([`CheckedArithmetic`]): the operators of projections,
//!   filters and aggregate arguments check each value (arrow's checked kernels), reported as
//!   "addition overflow: 9223372036854775807 + 1".

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::BinaryExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;

use super::overflow_text::words;

/// Trino's message for an overflowing integer operation.
fn overflow(
    type_name: &str,
    op: Operator,
    a: impl std::fmt::Display,
    b: impl std::fmt::Display,
) -> DataFusionError {
    let (word, sign) = words(op).unwrap_or(("arithmetic", "?"));
    DataFusionError::Execution(format!("{type_name} {word} overflow: {a} {sign} {b}"))
}

/// `a op b` of two integer constants of one type, computed with overflow checks: the constant,
/// an error, or None when the operands are not such constants.
pub(crate) fn fold_constant(
    a: &ScalarValue,
    op: Operator,
    b: &ScalarValue,
) -> Option<Result<ScalarValue>> {
    words(op)?;
    macro_rules! checked {
        ($variant:ident, $name:literal, $x:expr, $y:expr) => {{
            let r = match op {
                Operator::Plus => $x.checked_add($y),
                Operator::Minus => $x.checked_sub($y),
                _ => $x.checked_mul($y),
            };
            Some(match r {
                Some(v) => Ok(ScalarValue::$variant(Some(v))),
                None => Err(overflow($name, op, $x, $y)),
            })
        }};
    }
    match (a, b) {
        (ScalarValue::Int64(Some(x)), ScalarValue::Int64(Some(y))) => {
            checked!(Int64, "bigint", *x, *y)
        }
        (ScalarValue::Int32(Some(x)), ScalarValue::Int32(Some(y))) => {
            checked!(Int32, "integer", *x, *y)
        }
        (ScalarValue::Int16(Some(x)), ScalarValue::Int16(Some(y))) => {
            checked!(Int16, "smallint", *x, *y)
        }
        (ScalarValue::Int8(Some(x)), ScalarValue::Int8(Some(y))) => {
            checked!(Int8, "tinyint", *x, *y)
        }
        _ => None,
    }
}

/// Marks the integer `+ - *` of `expr` to fail on overflow.
fn checked(
    expr: Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> Result<Transformed<Arc<dyn PhysicalExpr>>> {
    expr.transform_up(|e| {
        let Some(b) = e.downcast_ref::<BinaryExpr>() else {
            return Ok(Transformed::no(e));
        };
        if words(*b.op()).is_none()
            || !b.left().data_type(schema)?.is_integer()
            || !b.right().data_type(schema)?.is_integer()
        {
            return Ok(Transformed::no(e));
        }
        let strict = BinaryExpr::new(Arc::clone(b.left()), *b.op(), Arc::clone(b.right()))
            .with_fail_on_overflow(true);
        Ok(Transformed::yes(Arc::new(strict) as Arc<dyn PhysicalExpr>))
    })
}

/// The physical rule: see the module doc. It runs first, before other rules move expressions.
#[derive(Debug, Default)]
pub(crate) struct CheckedArithmetic;

impl PhysicalOptimizerRule for CheckedArithmetic {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        crate::optimizer::operator_exprs::rewrite_operator_expressions(plan, checked)
    }

    fn name(&self) -> &str {
        "checked_arithmetic"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trino_sql::overflow_text::overflow_message;

    #[test]
    fn constants_fold_or_overflow() {
        let big = ScalarValue::Int64(Some(i64::MAX));
        let one = ScalarValue::Int64(Some(1));
        assert_eq!(
            fold_constant(&ScalarValue::Int64(Some(2)), Operator::Multiply, &one).map(|r| r.ok()),
            Some(Some(ScalarValue::Int64(Some(2))))
        );
        let err = fold_constant(&big, Operator::Plus, &one)
            .and_then(|r| r.err())
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("Execution error: bigint addition overflow: 9223372036854775807 + 1")
        );
        assert!(fold_constant(&big, Operator::Divide, &one).is_none());
        assert!(fold_constant(&ScalarValue::Int64(None), Operator::Plus, &one).is_none());
    }

    #[test]
    fn arrow_messages() {
        assert_eq!(
            overflow_message(
                "Arrow error: Arithmetic overflow: Overflow happened on: 4294967296 * 4294967296"
            )
            .as_deref(),
            Some("integer multiplication overflow: 4294967296 * 4294967296")
        );
        assert_eq!(overflow_message("Division by zero"), None);
    }

    #[test]
    fn each_integer_type_names_itself() {
        let fold = |a: ScalarValue, op, b: ScalarValue| {
            fold_constant(&a, op, &b).map(|r| r.map_err(|e| e.to_string()))
        };
        assert_eq!(
            fold(
                ScalarValue::Int8(Some(127)),
                Operator::Plus,
                ScalarValue::Int8(Some(1))
            ),
            Some(Err(
                "Execution error: tinyint addition overflow: 127 + 1".to_string()
            ))
        );
        assert_eq!(
            fold(
                ScalarValue::Int16(Some(-32768)),
                Operator::Minus,
                ScalarValue::Int16(Some(1))
            ),
            Some(Err(
                "Execution error: smallint subtraction overflow: -32768 - 1".to_string()
            ))
        );
        assert_eq!(
            fold(
                ScalarValue::Int32(Some(65536)),
                Operator::Multiply,
                ScalarValue::Int32(Some(65536))
            ),
            Some(Err(
                "Execution error: integer multiplication overflow: 65536 * 65536".to_string()
            ))
        );
        assert_eq!(
            fold(
                ScalarValue::Int32(Some(-7)),
                Operator::Minus,
                ScalarValue::Int32(Some(3))
            ),
            Some(Ok(ScalarValue::Int32(Some(-10))))
        );
        // Two types, or not integers: not this rule's.
        assert_eq!(
            fold(
                ScalarValue::Int32(Some(1)),
                Operator::Plus,
                ScalarValue::Int64(Some(1))
            ),
            None
        );
        assert_eq!(
            fold(
                ScalarValue::Float64(Some(1.0)),
                Operator::Plus,
                ScalarValue::Float64(Some(1.0))
            ),
            None
        );
    }

    #[tokio::test]
    async fn columns_fail_on_overflow() {
        use crate::trino_sql::testing::{error, value};
        let e = error("SELECT big + 1 FROM t").await;
        assert_eq!(
            e,
            "Arrow error: Arithmetic overflow: Overflow happened on: 9223372036854775807 + 1"
        );
        assert_eq!(
            overflow_message(&e).as_deref(),
            Some("integer addition overflow: 9223372036854775807 + 1")
        );
        assert_eq!(value("SELECT big - 1 FROM t").await, "9223372036854775806");
        // Floating point is not checked.
        assert_eq!(value("SELECT f * 2 FROM t").await, "5.0");
    }
}

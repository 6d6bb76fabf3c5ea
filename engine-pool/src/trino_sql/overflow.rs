//! Integer `+`, `-`, `*` and unary `-` fail on overflow, as in Trino, where DataFusion's wrap
//! around: once types are settled ([`CheckedIntegers`], the last analyzer rule), each operator on
//! two integers of one type (or minus on one) becomes `sqe-functions`' checked operator, which
//! fails with Trino's message ("bigint addition overflow: 9223372036854775807 + 1").
//!
//! Why the logical plan, and not the physical plan's `BinaryExpr::with_fail_on_overflow` (what SQE
//! did before, on projections, filters and aggregate arguments):
//! - DataFusion folds constants in its logical optimizer (`simplify_expressions`) by evaluating
//!   them with a wrapping `BinaryExpr`, before any physical rule: `CAST(9223372036854775807 AS
//!   bigint) + 1` became the literal -9223372036854775808 (`EXPLAIN VERBOSE` shows it after
//!   `simplify_expressions`), as did any constant operands other than two bare literals (a cast,
//!   a projection merged into its parent). A checked function folds the constants it can, and one
//!   that fails is left to fail when a row reaches it, so `TRY(…)` and `CASE` still decide;
//! - the physical rule saw three kinds of operator: `GROUP BY x + 1`, `ORDER BY x + 1`, window
//!   arguments and partitions and join conditions wrapped (all checked now: slt
//!   `trino/math.slt`).
//!
//! What it costs: the functions compute a batch with wrapping arithmetic and a branch-free test,
//! faster than arrow's checked kernels the physical rule used (sqe-functions' arithmetic.rs has
//! the figures); TPC-H SF1 against the build before: BENCHMARKS.md (2026-12-05).

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator};
use datafusion::optimizer::AnalyzerRule;
use sqe_functions::IntegerOperator;

use super::exprs::rewrite_plan;

/// The analyzer rule: see the module doc.
#[derive(Debug, Default)]
pub(super) struct CheckedIntegers;

impl AnalyzerRule for CheckedIntegers {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        rewrite_plan(
            plan,
            |e, schema| e.transform_up(|e| checked(e, schema)),
            LogicalPlan::recompute_schema,
        )
    }

    fn name(&self) -> &str {
        "trino_checked_integers"
    }
}

/// The checked operator for a binary operator that has one.
fn integer_operator(op: Operator) -> Option<IntegerOperator> {
    match op {
        Operator::Plus => Some(IntegerOperator::Add),
        Operator::Minus => Some(IntegerOperator::Subtract),
        Operator::Multiply => Some(IntegerOperator::Multiply),
        _ => None,
    }
}

/// `e` as a checked operator when it is an integer `+ - *` or minus. The call keeps the name the
/// operator had (`a + b`), given once: names made from the arguments' names at each level of a
/// chain of calls cost a copy of the whole chain per level, and DataFusion asks for them at
/// every level whenever it asks a call's type.
fn checked(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let integer = |x: &Expr| integer_type(x, schema);
    let op = match &e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => integer_operator(*op)
            .filter(|_| integer(left).is_some() && integer(left) == integer(right)),
        Expr::Negative(x) => integer(x).map(|_| IntegerOperator::Negate),
        _ => None,
    };
    let Some(op) = op else {
        return Ok(Transformed::no(e));
    };
    let name = e.schema_name().to_string();
    let args = match e {
        Expr::BinaryExpr(BinaryExpr { left, right, .. }) => vec![*left, *right],
        Expr::Negative(x) => vec![*x],
        _ => unreachable!("only operators have a checked one"),
    };
    Ok(Transformed::yes(Expr::ScalarFunction(
        ScalarFunction::new_udf(sqe_functions::named_integer_operator(op, name), args),
    )))
}

/// `x`'s type when it is a signed integer. A checked operator has its first argument's type: that
/// is followed down without asking DataFusion, which would name every call on the way.
fn integer_type(x: &Expr, schema: &DFSchema) -> Option<DataType> {
    let mut x = x;
    while let Expr::ScalarFunction(f) = x {
        match f.args.first() {
            Some(first) if sqe_functions::is_integer_operator(&f.func) => x = first,
            _ => break,
        }
    }
    x.get_type(schema).ok().filter(|t| t.is_signed_integer())
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::DataType;
    use datafusion::prelude::{col, lit};

    use super::*;
    use crate::trino_sql::testing::{error, rows, schema, value};

    #[test]
    fn integer_operators_become_checked_ones() {
        let schema = schema(&[
            ("i", DataType::Int32),
            ("j", DataType::Int32),
            ("b", DataType::Int64),
            ("f", DataType::Float64),
            ("d", DataType::Decimal128(10, 2)),
        ]);
        let rewritten = |e: Expr| {
            let t = e
                .transform_up(|e| checked(e, &schema))
                .unwrap_or_else(|e| panic!("{e}"));
            (t.transformed, t.data.to_string())
        };
        assert_eq!(
            rewritten(col("i") + col("j") * col("i")),
            (true, "sqe_add(i, sqe_multiply(j, i))".to_string())
        );
        assert_eq!(
            rewritten(-(col("b") - lit(1i64))),
            (true, "sqe_negate(sqe_subtract(b, Int64(1)))".to_string())
        );
        // Not integers, two types (type coercion casts them to one first), or another operator.
        assert_eq!(rewritten(col("f") * col("f")), (false, "f * f".to_string()));
        assert_eq!(rewritten(-col("d")), (false, "(- d)".to_string()));
        assert_eq!(rewritten(col("i") + col("b")), (false, "i + b".to_string()));
        assert_eq!(rewritten(col("b") / col("b")), (false, "b / b".to_string()));
    }

    #[tokio::test]
    async fn constants_fold_or_fail_when_a_row_reads_them() {
        // The escape of issue 41: a constant that is not a bare literal.
        assert_eq!(
            error("SELECT CAST(9223372036854775807 AS bigint) + 1").await,
            "Execution error: bigint addition overflow: 9223372036854775807 + 1"
        );
        assert_eq!(
            error("SELECT -CAST(-9223372036854775807 - 1 AS bigint)").await,
            "Execution error: bigint negation overflow: -9223372036854775808"
        );
        assert_eq!(value("SELECT CAST(3 AS bigint) * 7 - 1").await, "20");
        // Folded where it fits, left to fail where a row reaches it: no row, no error.
        assert_eq!(
            rows("SELECT 9223372036854775807 + 1 FROM t WHERE false")
                .await
                .map_err(|e| e.to_string()),
            Ok(vec![])
        );
        assert_eq!(
            value("SELECT CASE WHEN i > 100 THEN 9223372036854775807 + i END FROM t").await,
            "NULL"
        );
        assert_eq!(value("SELECT TRY(9223372036854775807 + 1)").await, "NULL");
    }

    #[tokio::test]
    async fn columns_fail_wherever_they_are_computed() {
        let overflow = "Execution error: bigint addition overflow: 9223372036854775807 + 1";
        for sql in [
            "SELECT big + 1 FROM t",
            "SELECT i FROM t WHERE big + 1 > 0",
            "SELECT sum(big + 1) FROM t",
            "SELECT big + 1 FROM t GROUP BY big + 1",
            "SELECT i FROM t ORDER BY big + 1",
            "SELECT row_number() OVER (PARTITION BY big + 1) FROM t",
            "SELECT max(big + 1) OVER (ORDER BY i) FROM t",
            "SELECT a.i FROM t a JOIN t b ON a.big + 1 = b.big",
            "SELECT a.i FROM t a JOIN t b ON a.big + 1 > b.big",
        ] {
            assert_eq!(error(sql).await, overflow, "{sql}");
        }
        assert_eq!(value("SELECT big - 1 FROM t").await, "9223372036854775806");
        assert_eq!(value("SELECT TRY(big * 2) FROM t").await, "NULL");
        assert_eq!(
            error("SELECT i * CAST(2147483647 AS integer) FROM t").await,
            "Execution error: integer multiplication overflow: 7 * 2147483647"
        );
        // Floating point is not checked.
        assert_eq!(value("SELECT f * 2 FROM t").await, "5.0");
    }
}

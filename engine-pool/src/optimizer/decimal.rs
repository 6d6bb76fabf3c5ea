//! Decimal `+`, `-` and `*` without a per-row overflow check where the operands' ranges rule
//! overflow out.
//!
//! Arrow adds, subtracts and multiplies `Decimal128` values with checked 128-bit arithmetic, one
//! branch (and for `*`, a call) per row, which the compiler cannot vectorise: in TPC-H q01 the
//! four products and sums of `l_extendedprice * (1 - l_discount) * (1 + l_tax)` took 30% of the
//! query's CPU. [`DecimalArithmetic`] replaces each such operator of a projection, filter or
//! aggregate argument in the final plan with a [`FastDecimal`], which first takes the largest
//! magnitude of each operand (one pass, no branch per row); when that bound proves no row can
//! overflow, it computes every row with plain wrapping arithmetic, and otherwise hands the batch
//! to arrow's checked kernel. Results, types and errors are arrow's, row for row.
//!
//! What it wins: TPC-H SF1 q01 0.246 s against 0.308 s, the suite 3.68 s against 3.82 s
//! (2026-12-02, BENCHMARKS.md).

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Decimal128Array, PrimitiveArray};
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::compute::{binary, unary};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::BinaryExpr;
use datafusion::physical_expr_common::datum::apply;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;

/// The physical rule: runs after every other, so that no rule downstream has to know
/// [`FastDecimal`] (it offers no bounds or statistics of its own).
#[derive(Debug)]
pub(crate) struct DecimalArithmetic;

impl PhysicalOptimizerRule for DecimalArithmetic {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !super::switches(config).decimal_arithmetic {
            return Ok(plan);
        }
        super::operator_exprs::rewrite_operator_expressions(plan, fast)
    }

    fn name(&self) -> &str {
        "decimal_arithmetic"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `expr` with its decimal `+ - *` replaced by [`FastDecimal`].
fn fast(
    expr: Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> Result<Transformed<Arc<dyn PhysicalExpr>>> {
    expr.transform_up(|e| {
        let Some(b) = e.downcast_ref::<BinaryExpr>() else {
            return Ok(Transformed::no(e));
        };
        let decimal = |x: &Arc<dyn PhysicalExpr>| {
            x.data_type(schema)
                .map(|t| matches!(t, DataType::Decimal128(_, _)))
        };
        let arithmetic = matches!(
            b.op(),
            Operator::Plus | Operator::Minus | Operator::Multiply
        );
        if !arithmetic || !decimal(b.left())? || !decimal(b.right())? {
            return Ok(Transformed::no(e));
        }
        let inner = BinaryExpr::new(Arc::clone(b.left()), *b.op(), Arc::clone(b.right()));
        Ok(Transformed::yes(Arc::new(FastDecimal { inner }) as _))
    })
}

/// A decimal `+`, `-` or `*`: see the module doc. It shows as the operator it replaces.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct FastDecimal {
    inner: BinaryExpr,
}

impl fmt::Display for FastDecimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

impl PhysicalExpr for FastDecimal {
    fn data_type(&self, input_schema: &Schema) -> Result<DataType> {
        self.inner.data_type(input_schema)
    }

    fn nullable(&self, input_schema: &Schema) -> Result<bool> {
        self.inner.nullable(input_schema)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let left = self.inner.left().evaluate(batch)?;
        let right = self.inner.right().evaluate(batch)?;
        let op = *self.inner.op();
        if let Some(array) = unchecked(op, &left, &right) {
            return Ok(ColumnarValue::Array(array));
        }
        match op {
            Operator::Plus => apply(&left, &right, numeric::add),
            Operator::Minus => apply(&left, &right, numeric::sub),
            _ => apply(&left, &right, numeric::mul),
        }
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![self.inner.left(), self.inner.right()]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        let [left, right]: [Arc<dyn PhysicalExpr>; 2] = children.try_into().map_err(|_| {
            datafusion::error::DataFusionError::Internal(
                "a decimal operator has two operands".into(),
            )
        })?;
        let inner = BinaryExpr::new(left, *self.inner.op(), right);
        Ok(Arc::new(Self { inner }))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt_sql(f)
    }
}

/// One operand: its values and precision and scale, or a constant.
enum Operand<'a> {
    Array(&'a Decimal128Array, u8, i8),
    Constant(i128, u8, i8),
}

impl Operand<'_> {
    fn of(value: &ColumnarValue) -> Option<Operand<'_>> {
        match value {
            ColumnarValue::Array(a) => match a.data_type() {
                DataType::Decimal128(p, s) => Some(Operand::Array(a.as_primitive(), *p, *s)),
                _ => None,
            },
            ColumnarValue::Scalar(ScalarValue::Decimal128(Some(v), p, s)) => {
                Some(Operand::Constant(*v, *p, *s))
            }
            ColumnarValue::Scalar(_) => None,
        }
    }

    fn precision_and_scale(&self) -> (u8, i8) {
        match self {
            Operand::Array(_, p, s) | Operand::Constant(_, p, s) => (*p, *s),
        }
    }

    /// A bound on the magnitude of the values, null slots included (their values are arbitrary
    /// but computed on too): for an array, one more than the OR of each value's magnitude less
    /// one at most (`v ^ (v >> 127)`: `v` itself or `-v - 1`), so below twice the largest
    /// magnitude, found in one pass without a branch or a 128-bit comparison per row.
    fn magnitude(&self) -> u128 {
        match self {
            Operand::Array(a, _, _) => {
                let bits = a
                    .values()
                    .iter()
                    .fold(0u128, |m, v| m | (v ^ (v >> 127)) as u128);
                bits + 1
            }
            Operand::Constant(v, _, _) => v.unsigned_abs(),
        }
    }
}

/// `left op right` computed without overflow checks, or None when an operand is not a decimal
/// array or constant (a constant on both sides, a NULL), the result's scale is out of arrow's
/// range, or some row could overflow: the caller then runs arrow's checked kernel.
fn unchecked(op: Operator, left: &ColumnarValue, right: &ColumnarValue) -> Option<ArrayRef> {
    let l = Operand::of(left)?;
    let r = Operand::of(right)?;
    if matches!((&l, &r), (Operand::Constant(..), Operand::Constant(..))) {
        return None;
    }
    let ((p1, s1), (p2, s2)) = (l.precision_and_scale(), r.precision_and_scale());
    if !(0..=38).contains(&s1) || !(0..=38).contains(&s2) {
        return None;
    }
    // Arrow's result types (Hive's decimal rules): see arrow_arith's `decimal_op`.
    let (precision, scale, l_mul, r_mul) = match op {
        Operator::Plus | Operator::Minus => {
            let scale = s1.max(s2);
            let integral = (p1 as i8 - s1).max(p2 as i8 - s2);
            let precision = (scale.saturating_add(integral) as u8)
                .saturating_add(1)
                .min(38);
            let l_mul = 10i128.checked_pow((scale - s1) as u32)?;
            let r_mul = 10i128.checked_pow((scale - s2) as u32)?;
            (precision, scale, l_mul, r_mul)
        }
        Operator::Multiply => {
            let scale = s1 + s2;
            if scale > 38 {
                return None;
            }
            (p1.saturating_add(p2 + 1).min(38), scale, 1, 1)
        }
        _ => return None,
    };
    // No row overflows when the largest magnitudes do not.
    let (lm, rm) = (l.magnitude(), r.magnitude());
    let fits = |x: u128| x <= i128::MAX as u128;
    let bound = match op {
        Operator::Multiply => lm.checked_mul(rm)?,
        _ => lm
            .checked_mul(l_mul as u128)?
            .checked_add(rm.checked_mul(r_mul as u128)?)?,
    };
    if !fits(bound) {
        return None;
    }
    // Operands within 64 bits multiply with one 64-bit multiplication a row.
    let narrow = |m: u128| m <= i64::MAX as u128;
    let short = op == Operator::Multiply && narrow(lm) && narrow(rm);
    let values: PrimitiveArray<Decimal128Type> = match (l, r) {
        (Operand::Array(a, ..), Operand::Array(b, ..)) => match op {
            Operator::Multiply if short => binary(a, b, |x, y| {
                i128::from(x as i64).wrapping_mul(i128::from(y as i64))
            })
            .ok()?,
            Operator::Multiply => binary(a, b, |x, y| x.wrapping_mul(y)).ok()?,
            Operator::Plus if l_mul == 1 && r_mul == 1 => {
                binary(a, b, |x, y| x.wrapping_add(y)).ok()?
            }
            Operator::Minus if l_mul == 1 && r_mul == 1 => {
                binary(a, b, |x, y| x.wrapping_sub(y)).ok()?
            }
            Operator::Plus => binary(a, b, |x, y| {
                x.wrapping_mul(l_mul).wrapping_add(y.wrapping_mul(r_mul))
            })
            .ok()?,
            _ => binary(a, b, |x, y| {
                x.wrapping_mul(l_mul).wrapping_sub(y.wrapping_mul(r_mul))
            })
            .ok()?,
        },
        (Operand::Constant(c, ..), Operand::Array(b, ..)) => {
            let c = c.wrapping_mul(l_mul);
            match op {
                Operator::Multiply => unary(b, |y| c.wrapping_mul(y)),
                Operator::Plus => unary(b, |y| c.wrapping_add(y.wrapping_mul(r_mul))),
                _ => unary(b, |y| c.wrapping_sub(y.wrapping_mul(r_mul))),
            }
        }
        (Operand::Array(a, ..), Operand::Constant(c, ..)) => {
            let c = c.wrapping_mul(r_mul);
            match op {
                Operator::Multiply => unary(a, |x| x.wrapping_mul(c)),
                Operator::Plus => unary(a, |x| x.wrapping_mul(l_mul).wrapping_add(c)),
                _ => unary(a, |x| x.wrapping_mul(l_mul).wrapping_sub(c)),
            }
        }
        (Operand::Constant(..), Operand::Constant(..)) => return None,
    };
    let typed = values.with_precision_and_scale(precision, scale).ok()?;
    Some(Arc::new(typed))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::Decimal128Array;

    use super::*;

    fn decimals(values: &[Option<i128>], p: u8, s: i8) -> ColumnarValue {
        let a = Decimal128Array::from(values.to_vec())
            .with_precision_and_scale(p, s)
            .unwrap_or_else(|e| panic!("{e}"));
        ColumnarValue::Array(Arc::new(a))
    }

    fn constant(v: i128, p: u8, s: i8) -> ColumnarValue {
        ColumnarValue::Scalar(ScalarValue::Decimal128(Some(v), p, s))
    }

    fn arrow(op: Operator, l: &ColumnarValue, r: &ColumnarValue) -> ArrayRef {
        let out = match op {
            Operator::Plus => apply(l, r, numeric::add),
            Operator::Minus => apply(l, r, numeric::sub),
            _ => apply(l, r, numeric::mul),
        };
        match out.unwrap_or_else(|e| panic!("{e}")) {
            ColumnarValue::Array(a) => a,
            ColumnarValue::Scalar(_) => panic!("a scalar from an array operand"),
        }
    }

    /// Every operator, with arrays and constants on either side and scales that differ, gives
    /// arrow's values, nulls and type.
    #[test]
    fn same_answers_as_arrow() {
        let prices = decimals(
            &[Some(905_500), None, Some(-100), Some(1_234_567_890)],
            15,
            2,
        );
        let discounts = decimals(&[Some(4), Some(10), None, Some(0)], 15, 2);
        let rates = decimals(&[Some(1234), Some(-5), Some(0), None], 12, 4);
        let one = constant(1, 20, 0);
        let half = constant(5, 3, 1);
        // Near the edge of 64 bits, where products are made from 64-bit operands.
        let wide = decimals(
            &[Some((1 << 62) - 1), Some(-(1 << 62)), Some(12_345)],
            19,
            0,
        );
        let wider = decimals(&[Some(-(1 << 62)), Some((1 << 62) - 1), Some(-1)], 19, 0);
        let cases = [
            (&wide, &wider),
            (&prices, &discounts),
            (&prices, &rates),
            (&rates, &prices),
            (&one, &discounts),
            (&discounts, &one),
            (&half, &rates),
            (&rates, &half),
        ];
        for op in [Operator::Plus, Operator::Minus, Operator::Multiply] {
            for (l, r) in cases {
                let ours = unchecked(op, l, r).expect("no overflow is possible here");
                let theirs = arrow(op, l, r);
                assert_eq!(ours.data_type(), theirs.data_type(), "{op}");
                assert_eq!(&ours, &theirs, "{op}");
            }
        }
    }

    /// Operands that could overflow go to arrow's checked kernel, which reports the overflow.
    #[test]
    fn possible_overflow_falls_back() {
        let big = decimals(&[Some(10i128.pow(30)), Some(1)], 38, 0);
        assert!(unchecked(Operator::Multiply, &big, &big).is_none());
        assert!(unchecked(Operator::Plus, &big, &big).is_some());
        let huge = decimals(&[Some(i128::MAX - 1)], 38, 0);
        assert!(unchecked(Operator::Plus, &huge, &huge).is_none());
        let scaled = decimals(&[Some(10i128.pow(36))], 38, 0);
        let fraction = decimals(&[Some(1)], 38, 10);
        assert!(unchecked(Operator::Minus, &scaled, &fraction).is_none());
        let null = ColumnarValue::Scalar(ScalarValue::Decimal128(None, 10, 2));
        assert!(unchecked(Operator::Plus, &big, &null).is_none());
    }

    #[test]
    fn overflow_is_still_an_error() {
        let huge = decimals(&[Some(i128::MAX - 1)], 38, 0);
        let expr = FastDecimal {
            inner: BinaryExpr::new(
                Arc::new(datafusion::physical_expr::expressions::Column::new("a", 0)),
                Operator::Plus,
                Arc::new(datafusion::physical_expr::expressions::Column::new("a", 0)),
            ),
        };
        let ColumnarValue::Array(a) = huge else {
            unreachable!()
        };
        let schema = Arc::new(Schema::new(vec![datafusion::arrow::datatypes::Field::new(
            "a",
            a.data_type().clone(),
            true,
        )]));
        let batch = RecordBatch::try_new(schema, vec![a]).unwrap_or_else(|e| panic!("{e}"));
        let err = expr
            .evaluate(&batch)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("Overflow happened on"), "{err}");
    }
}

//! A filter's conjunction, evaluated one conjunct at a time over a bitmap of the rows still passing.
//!
//! DataFusion evaluates `a AND b` by evaluating `a`, and when few rows pass, evaluating `b` on those
//! rows only and writing its answers back into a full-length array one row at a time. With several
//! conjuncts that write-back repeats for each, and TPC-H q12's five-part filter cost as much as
//! decoding its scan. [`Conjunction`] keeps the passing rows as a bitmap instead:
//!
//! - a cheap conjunct (comparisons of columns and constants) runs over the whole batch, and its
//!   answer is ANDed into the bitmap a word at a time;
//! - a costly one (LIKE, IN lists, function calls) runs over the passing rows only, when they are
//!   fewer than half the batch, reading only the columns it needs;
//! - once no row passes, the rest are skipped.
//!
//! NULL counts as false, as it does in a filter: the expression only ever stands as a `FilterExec`'s
//! predicate, put there by [`FilterConjunctions`] after every other rule has run.
//!
//! What it still wins on DataFusion 54.1, in two runs of TPC-H SF1 against the same build without
//! it: 3% of the total (4.47 s against 4.61 s, 4.66 s against 4.79 s), q12 13% and 22% (0.16 s
//! against 0.18 s, 0.18 s against 0.23 s) (`sqe-bench --baseline-set
//! sqe.optimizer.filter_conjunctions=false`, 2026-12-01; BENCHMARKS.md).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, BooleanArray, RecordBatch, RecordBatchOptions};
use datafusion::arrow::buffer::{BooleanBuffer, MutableBuffer};
use datafusion::arrow::compute::filter;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::arrow::util::bit_util;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{
    BinaryExpr, CastExpr, Column, IsNotNullExpr, IsNullExpr, Literal, NotExpr,
};
use datafusion::physical_expr::utils::split_conjunction;
use datafusion::physical_expr_common::physical_expr::fmt_sql;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};

/// The physical optimizer rule: every `FilterExec` with two or more conjuncts gets a [`Conjunction`].
#[derive(Debug)]
pub(crate) struct FilterConjunctions;

impl PhysicalOptimizerRule for FilterConjunctions {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if !super::switches(config).filter_conjunctions {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            let Some(f) = node.downcast_ref::<FilterExec>() else {
                return Ok(Transformed::no(node));
            };
            let conjuncts: Vec<_> = split_conjunction(f.predicate())
                .into_iter()
                .cloned()
                .collect();
            if conjuncts.len() < 2 {
                return Ok(Transformed::no(node));
            }
            let predicate = Arc::new(Conjunction::new(conjuncts));
            let rebuilt = FilterExecBuilder::from(f)
                .with_predicate(predicate)
                .build()?;
            Ok(Transformed::yes(Arc::new(rebuilt) as _))
        })
        .data()
    }

    fn name(&self) -> &str {
        "filter_conjunctions"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `a AND b AND …` as a filter evaluates it.
#[derive(Debug)]
pub(crate) struct Conjunction {
    conjuncts: Vec<Arc<dyn PhysicalExpr>>,
    plans: Vec<Plan>,
}

/// How one conjunct is evaluated.
#[derive(Debug)]
struct Plan {
    cheap: bool,
    /// The input columns the conjunct reads, and the conjunct over just those, in that order.
    columns: Vec<usize>,
    narrow: Arc<dyn PhysicalExpr>,
}

impl Conjunction {
    fn new(conjuncts: Vec<Arc<dyn PhysicalExpr>>) -> Self {
        let plans = conjuncts.iter().map(plan).collect();
        Self { conjuncts, plans }
    }
}

fn plan(expr: &Arc<dyn PhysicalExpr>) -> Plan {
    let mut columns = Vec::new();
    let narrow = Arc::clone(expr)
        .transform_up(|e| {
            let Some(c) = e.downcast_ref::<Column>() else {
                return Ok(Transformed::no(e));
            };
            let at = match columns.iter().position(|&i| i == c.index()) {
                Some(at) => at,
                None => {
                    columns.push(c.index());
                    columns.len() - 1
                }
            };
            Ok(Transformed::yes(Arc::new(Column::new(c.name(), at)) as _))
        })
        .data()
        .unwrap_or_else(|_: DataFusionError| Arc::clone(expr));
    Plan {
        cheap: cheap(expr),
        columns,
        narrow,
    }
}

/// Comparisons, AND/OR, NOT, IS [NOT] NULL and casts over columns and constants: about as costly as
/// the AND that would otherwise skip them.
fn cheap(expr: &Arc<dyn PhysicalExpr>) -> bool {
    let any = expr.as_ref();
    if any.is::<Column>() || any.is::<Literal>() {
        return true;
    }
    if let Some(b) = any.downcast_ref::<BinaryExpr>() {
        use Operator::*;
        return matches!(b.op(), Eq | NotEq | Lt | LtEq | Gt | GtEq | And | Or)
            && cheap(b.left())
            && cheap(b.right());
    }
    if let Some(c) = any.downcast_ref::<CastExpr>() {
        return cheap(c.expr());
    }
    if let Some(n) = any.downcast_ref::<NotExpr>() {
        return cheap(n.arg());
    }
    if let Some(n) = any.downcast_ref::<IsNullExpr>() {
        return cheap(n.arg());
    }
    if let Some(n) = any.downcast_ref::<IsNotNullExpr>() {
        return cheap(n.arg());
    }
    false
}

/// Where a boolean answer is true (NULL is not).
fn truth(value: ColumnarValue, rows: usize) -> DFResult<BooleanBuffer> {
    let array = value.into_array(rows)?;
    let Some(answers) = array.as_boolean_opt() else {
        return Err(DataFusionError::Internal(format!(
            "a filter's conjunct returned {}, not booleans",
            array.data_type()
        )));
    };
    Ok(match answers.nulls() {
        Some(nulls) => answers.values() & nulls.inner(),
        None => answers.values().clone(),
    })
}

/// The rows of `passing` whose answer (one per passing row, in order) is true.
fn scatter(passing: &BooleanBuffer, answers: &BooleanBuffer) -> BooleanBuffer {
    let len = passing.len();
    let mut bits = MutableBuffer::from_len_zeroed(len.div_ceil(8));
    let bytes = bits.as_slice_mut();
    for (row, keep) in passing.set_indices().zip(answers.iter()) {
        if keep {
            bit_util::set_bit(bytes, row);
        }
    }
    BooleanBuffer::new(bits.into(), 0, len)
}

impl PhysicalExpr for Conjunction {
    fn data_type(&self, _input_schema: &Schema) -> DFResult<DataType> {
        Ok(DataType::Boolean)
    }

    fn nullable(&self, _input_schema: &Schema) -> DFResult<bool> {
        Ok(false)
    }

    fn evaluate(&self, batch: &RecordBatch) -> DFResult<ColumnarValue> {
        let rows = batch.num_rows();
        let mut passing: Option<BooleanBuffer> = None;
        for (expr, plan) in self.conjuncts.iter().zip(&self.plans) {
            passing = Some(match passing {
                None => truth(expr.evaluate(batch)?, rows)?,
                Some(p) => {
                    let count = p.count_set_bits();
                    if count == 0 {
                        return Ok(ColumnarValue::Array(Arc::new(BooleanArray::new(p, None))));
                    }
                    if plan.cheap || count * 2 >= rows {
                        &p & &truth(expr.evaluate(batch)?, rows)?
                    } else {
                        let answers = evaluate_on(plan, batch, &p, count)?;
                        scatter(&p, &answers)
                    }
                }
            });
        }
        let passing = passing.unwrap_or_else(|| BooleanBuffer::new_set(rows));
        Ok(ColumnarValue::Array(Arc::new(BooleanArray::new(
            passing, None,
        ))))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        self.conjuncts.iter().collect()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> DFResult<Arc<dyn PhysicalExpr>> {
        Ok(Arc::new(Self::new(children)))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, |f, c| write!(f, "{}", fmt_sql(c.as_ref())))
    }
}

/// The conjunct's answers for the passing rows only.
fn evaluate_on(
    plan: &Plan,
    batch: &RecordBatch,
    passing: &BooleanBuffer,
    count: usize,
) -> DFResult<BooleanBuffer> {
    let mask = BooleanArray::new(passing.clone(), None);
    let columns = plan
        .columns
        .iter()
        .map(|&i| filter(batch.column(i), &mask))
        .collect::<Result<Vec<_>, _>>()?;
    let schema = Arc::new(batch.schema().project(&plan.columns)?);
    let options = RecordBatchOptions::new().with_row_count(Some(count));
    let narrow = RecordBatch::try_new_with_options(schema, columns, &options)?;
    truth(plan.narrow.evaluate(&narrow)?, count)
}

impl fmt::Display for Conjunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, |f, c| write!(f, "{c}"))
    }
}

impl Conjunction {
    /// The conjuncts joined by AND, each written by `one`; an OR in parentheses, as a `BinaryExpr`
    /// AND writes it.
    fn write(
        &self,
        f: &mut fmt::Formatter<'_>,
        one: impl Fn(&mut fmt::Formatter<'_>, &Arc<dyn PhysicalExpr>) -> fmt::Result,
    ) -> fmt::Result {
        for (i, c) in self.conjuncts.iter().enumerate() {
            if i > 0 {
                write!(f, " AND ")?;
            }
            let or = c
                .downcast_ref::<BinaryExpr>()
                .is_some_and(|b| *b.op() == Operator::Or);
            if or {
                write!(f, "(")?;
                one(f, c)?;
                write!(f, ")")?;
            } else {
                one(f, c)?;
            }
        }
        Ok(())
    }
}

impl PartialEq for Conjunction {
    fn eq(&self, other: &Self) -> bool {
        self.conjuncts == other.conjuncts
    }
}

impl Eq for Conjunction {}

impl Hash for Conjunction {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.conjuncts.hash(state);
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::{binary, col, is_null, like, lit};
    use datafusion::physical_expr::utils::conjunction;

    use super::*;

    /// 1000 rows: `a` is the row number, NULL every seventh row; `s` is `x0`..`x9`, `y` every third.
    fn batch() -> RecordBatch {
        let a: Int64Array = (0..1000).map(|i| (i % 7 != 0).then_some(i)).collect();
        let s: StringArray = (0..1000)
            .map(|i| {
                Some(if i % 3 == 0 {
                    "y".to_string()
                } else {
                    format!("x{}", i % 10)
                })
            })
            .collect();
        let schema = Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(a), Arc::new(s)])
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The rows DataFusion's own AND keeps, and the rows the conjunction keeps.
    fn both(conjuncts: Vec<Arc<dyn PhysicalExpr>>) -> (Vec<bool>, Vec<bool>) {
        let batch = batch();
        let and = conjunction(conjuncts.clone())
            .evaluate(&batch)
            .and_then(|v| truth(v, batch.num_rows()))
            .unwrap_or_else(|e| panic!("{e}"));
        let ours = Conjunction::new(conjuncts)
            .evaluate(&batch)
            .and_then(|v| v.into_array(batch.num_rows()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ours.null_count(), 0);
        (
            and.iter().collect(),
            ours.as_boolean().values().iter().collect(),
        )
    }

    #[test]
    fn keeps_the_rows_and_keeps() {
        let schema = batch().schema();
        let a = || col("a", &schema).unwrap_or_else(|e| panic!("{e}"));
        let s = || col("s", &schema).unwrap_or_else(|e| panic!("{e}"));
        let cmp = |l, op, r| binary(l, op, r, &schema).unwrap_or_else(|e| panic!("{e}"));
        let starts = |p: &str| {
            like(false, false, s(), lit(p.to_string()), &schema).unwrap_or_else(|e| panic!("{e}"))
        };
        let cases: Vec<Vec<Arc<dyn PhysicalExpr>>> = vec![
            // Few rows pass the first: the LIKE runs on them only.
            vec![cmp(a(), Operator::Gt, lit(900i64)), starts("x1%")],
            // Most pass: every conjunct runs on the whole batch.
            vec![
                cmp(a(), Operator::Gt, lit(10i64)),
                cmp(a(), Operator::Lt, lit(700i64)),
                starts("x%"),
            ],
            // NULLs in a column the later conjunct reads.
            vec![
                cmp(a(), Operator::Lt, lit(300i64)),
                starts("%2"),
                cmp(a(), Operator::NotEq, lit(52i64)),
            ],
            // None pass: the rest are skipped.
            vec![cmp(a(), Operator::Gt, lit(5000i64)), starts("x%")],
            vec![is_null(a()).unwrap_or_else(|e| panic!("{e}")), starts("y")],
        ];
        for conjuncts in cases {
            let shown = conjunction(conjuncts.clone()).to_string();
            let (and, ours) = both(conjuncts);
            assert_eq!(ours, and, "{shown}");
            assert!(
                and.iter().any(|k| *k) || shown.contains("5000"),
                "{shown} keeps no row"
            );
        }
    }

    #[test]
    fn shows_as_the_and_it_replaces() {
        let schema = batch().schema();
        let a = col("a", &schema).unwrap_or_else(|e| panic!("{e}"));
        let s = col("s", &schema).unwrap_or_else(|e| panic!("{e}"));
        let either = binary(
            binary(Arc::clone(&s), Operator::Eq, lit("y"), &schema)
                .unwrap_or_else(|e| panic!("{e}")),
            Operator::Or,
            binary(s, Operator::Eq, lit("x1"), &schema).unwrap_or_else(|e| panic!("{e}")),
            &schema,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let conjuncts = vec![
            either,
            binary(a, Operator::Gt, lit(1i64), &schema).unwrap_or_else(|e| panic!("{e}")),
        ];
        assert_eq!(
            Conjunction::new(conjuncts.clone()).to_string(),
            conjunction(conjuncts).to_string()
        );
    }
}

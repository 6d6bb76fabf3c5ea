//! A text column compared for equality with constants, one 128-bit comparison a row.
//!
//! SQE reads text as Arrow's string views: 16 bytes a value, holding its length and, up to 12
//! bytes long, the value itself (zero-padded); a longer value keeps its length and first 4 bytes
//! there. Arrow 58's `=` walks each row through several branches (both inline? same length? same
//! prefix?), about 7 ns a row: in TPC-H q12, `l_shipmode IN ('MAIL', 'SHIP')` (two `=` after
//! DataFusion's rewrite) was 28% of the query's CPU. [`TextEquality`] replaces, in projections,
//! filters and aggregate arguments, each `x = 'c'`, `x <> 'c'`, and `x [NOT] IN (<constants>)` of
//! up to [`MOST_CONSTANTS`] constants, over a string-view `x`, with a [`ViewEquals`]: a constant of
//! up to 12 bytes equals a value exactly when their views are equal, a longer one only where the
//! view's length and prefix agree, and only those rows compare their bytes. Results and NULLs
//! are the operator's, row for row; over an array that is not a string view it runs the operator.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, BooleanArray, StringViewArray};
use datafusion::arrow::buffer::BooleanBuffer;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, Operator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, InListExpr, Literal};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;

/// The longest IN list compared constant by constant (DataFusion hashes longer ones).
pub(crate) const MOST_CONSTANTS: usize = 8;

/// The physical rule: runs after DataFusion's, like the other expression rewrites.
#[derive(Debug)]
pub(crate) struct TextEquality;

impl PhysicalOptimizerRule for TextEquality {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !super::switches(config).text_equality {
            return Ok(plan);
        }
        super::operator_exprs::rewrite_operator_expressions(plan, by_views)
    }

    fn name(&self) -> &str {
        "text_equality"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `expr` with each equality of a string view to constants replaced by a [`ViewEquals`].
fn by_views(
    expr: Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> Result<Transformed<Arc<dyn PhysicalExpr>>> {
    expr.transform_up(|e| {
        let found = if let Some(b) = e.downcast_ref::<BinaryExpr>() {
            let negated = match b.op() {
                Operator::Eq => false,
                Operator::NotEq => true,
                _ => return Ok(Transformed::no(e)),
            };
            match (text(b.right()), text(b.left())) {
                (Some(c), None) => Some((b.left(), vec![c], negated)),
                (None, Some(c)) => Some((b.right(), vec![c], negated)),
                _ => None,
            }
        } else if let Some(list) = e.downcast_ref::<InListExpr>() {
            let constants: Option<Vec<Vec<u8>>> = list.list().iter().map(text).collect();
            constants
                .filter(|c| c.len() <= MOST_CONSTANTS)
                .map(|c| (list.expr(), c, list.negated()))
        } else {
            None
        };
        let Some((x, constants, negated)) = found else {
            return Ok(Transformed::no(e));
        };
        if x.data_type(schema)? != DataType::Utf8View {
            return Ok(Transformed::no(e));
        }
        let equals = ViewEquals::new(Arc::clone(x), &constants, negated, Arc::clone(&e));
        Ok(Transformed::yes(Arc::new(equals) as _))
    })
}

/// The bytes of a non-NULL text constant.
fn text(e: &Arc<dyn PhysicalExpr>) -> Option<Vec<u8>> {
    match e.downcast_ref::<Literal>()?.value() {
        ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => Some(s.as_bytes().into()),
        ScalarValue::LargeUtf8(Some(s)) => Some(s.as_bytes().into()),
        _ => None,
    }
}

/// A constant longer than a view holds: its length and first 4 bytes as a view's low half has
/// them, and its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LongConstant {
    head: u64,
    bytes: Vec<u8>,
}

/// `x = c`, `x <> c`, `x IN (…)` or `x NOT IN (…)` over a string view: see the module doc. It
/// shows as the expression it replaces.
#[derive(Debug)]
pub(crate) struct ViewEquals {
    x: Arc<dyn PhysicalExpr>,
    /// The views of the constants of up to 12 bytes.
    short: Vec<u128>,
    long: Vec<LongConstant>,
    negated: bool,
    /// The expression replaced, which runs over arrays of another type.
    replaced: Arc<dyn PhysicalExpr>,
}

impl ViewEquals {
    fn new(
        x: Arc<dyn PhysicalExpr>,
        constants: &[Vec<u8>],
        negated: bool,
        replaced: Arc<dyn PhysicalExpr>,
    ) -> Self {
        let (mut short, mut long) = (Vec::new(), Vec::new());
        for c in constants {
            let mut view = [0u8; 16];
            view[..4].copy_from_slice(&(c.len() as u32).to_le_bytes());
            if c.len() <= 12 {
                view[4..4 + c.len()].copy_from_slice(c);
                short.push(u128::from_le_bytes(view));
            } else {
                view[4..8].copy_from_slice(&c[..4]);
                let head = u128::from_le_bytes(view) as u64;
                long.push(LongConstant {
                    head,
                    bytes: c.clone(),
                });
            }
        }
        Self {
            x,
            short,
            long,
            negated,
            replaced,
        }
    }

    /// Whether each value of `values` equals one of the constants.
    fn matches(&self, values: &StringViewArray) -> BooleanBuffer {
        let views = values.views();
        let len = views.len();
        if self.long.is_empty() {
            return match self.short.as_slice() {
                [one] => BooleanBuffer::collect_bool(len, |i| views[i] == *one),
                [a, b] => BooleanBuffer::collect_bool(len, |i| views[i] == *a || views[i] == *b),
                short => BooleanBuffer::collect_bool(len, |i| short.contains(&views[i])),
            };
        }
        BooleanBuffer::collect_bool(len, |i| {
            let view = views[i];
            self.short.contains(&view)
                || self
                    .long
                    .iter()
                    .any(|c| view as u64 == c.head && values.value(i).as_bytes() == c.bytes)
        })
    }
}

impl PartialEq for ViewEquals {
    fn eq(&self, other: &Self) -> bool {
        self.replaced.as_ref() == other.replaced.as_ref()
    }
}

impl Eq for ViewEquals {}

impl Hash for ViewEquals {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.replaced.hash(state);
    }
}

impl fmt::Display for ViewEquals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.replaced, f)
    }
}

impl PhysicalExpr for ViewEquals {
    fn data_type(&self, _input_schema: &Schema) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn nullable(&self, input_schema: &Schema) -> Result<bool> {
        self.x.nullable(input_schema)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let ColumnarValue::Array(array) = self.x.evaluate(batch)? else {
            return self.replaced.evaluate(batch);
        };
        let Some(values) = array.as_string_view_opt() else {
            return self.replaced.evaluate(batch);
        };
        let mut bits = self.matches(values);
        if self.negated {
            bits = !&bits;
        }
        let result = BooleanArray::new(bits, values.nulls().cloned());
        Ok(ColumnarValue::Array(Arc::new(result)))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![&self.x]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        let [x]: [Arc<dyn PhysicalExpr>; 1] = children.try_into().map_err(|_| {
            datafusion::error::DataFusionError::Internal("a text equality has one operand".into())
        })?;
        // The replaced expression takes the new operand where it had the old one.
        let mut operands: Vec<_> = self.replaced.children().into_iter().cloned().collect();
        if let Some(old) = operands.iter_mut().find(|c| c.as_ref() == self.x.as_ref()) {
            *old = Arc::clone(&x);
        }
        let replaced = Arc::clone(&self.replaced).with_new_children(operands)?;
        Ok(Arc::new(Self {
            x,
            short: self.short.clone(),
            long: self.long.clone(),
            negated: self.negated,
            replaced,
        }))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.replaced.fmt_sql(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::ArrayRef;
    use datafusion::arrow::datatypes::Field;
    use datafusion::physical_expr::expressions::{col, in_list, lit};

    /// The rows of `values` as `expr` over them gives them, before and after the rewrite.
    fn both(values: &[Option<&str>], expr: Arc<dyn PhysicalExpr>) -> (ArrayRef, ArrayRef) {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Utf8View, true)]));
        let array: ArrayRef = Arc::new(StringViewArray::from(values.to_vec()));
        let batch = RecordBatch::try_new(Arc::clone(&schema), vec![array])
            .unwrap_or_else(|e| panic!("{e}"));
        let rewritten = by_views(Arc::clone(&expr), &schema).unwrap_or_else(|e| panic!("{e}"));
        assert!(rewritten.transformed, "{expr}");
        assert!(rewritten.data.is::<ViewEquals>());
        let run = |e: &Arc<dyn PhysicalExpr>| {
            e.evaluate(&batch)
                .and_then(|v| v.into_array(batch.num_rows()))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        (run(&expr), run(&rewritten.data))
    }

    #[test]
    fn equalities_give_the_operators_rows_and_nulls() {
        let values = [
            Some("MAIL"),
            None,
            Some("SHIP"),
            Some(""),
            Some("DELIVER IN PERSON"),
            Some("DELIVER IN PERSOX"),
            Some("DELIVER"),
            Some("MAIL "),
            Some("a value longer than twelve bytes"),
        ];
        let schema = Schema::new(vec![Field::new("x", DataType::Utf8View, true)]);
        let x = col("x", &schema).unwrap_or_else(|e| panic!("{e}"));
        let constant = |s: &str| lit(ScalarValue::Utf8View(Some(s.into())));
        let list = |items: &[&str], negated: bool| {
            let items = items.iter().map(|s| constant(s)).collect();
            in_list(Arc::clone(&x), items, &negated, &schema).unwrap_or_else(|e| panic!("{e}"))
        };
        let binary = |op, c: &str| -> Arc<dyn PhysicalExpr> {
            Arc::new(BinaryExpr::new(Arc::clone(&x), op, constant(c)))
        };
        for expr in [
            binary(Operator::Eq, "MAIL"),
            binary(Operator::NotEq, "MAIL"),
            binary(Operator::Eq, ""),
            binary(Operator::NotEq, ""),
            binary(Operator::Eq, "DELIVER IN PERSON"),
            Arc::new(BinaryExpr::new(
                constant("SHIP"),
                Operator::Eq,
                Arc::clone(&x),
            )),
            list(&["MAIL", "SHIP"], false),
            list(&["MAIL", "SHIP", "DELIVER IN PERSON", ""], true),
            list(
                &["DELIVER IN PERSON", "a value longer than twelve bytes"],
                false,
            ),
        ] {
            let (want, got) = both(&values, Arc::clone(&expr));
            assert_eq!(want.as_boolean(), got.as_boolean(), "{expr}");
        }
    }
}

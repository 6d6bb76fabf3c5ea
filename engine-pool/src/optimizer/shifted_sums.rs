//! `sum(x + c)` as `sum(x) + c * count(x)` for an integer `x` and an integer constant `c`.
//!
//! ClickBench q29 asks for `sum(ResolutionWidth)`, `sum(ResolutionWidth + 1)`, … up to `+ 89`:
//! ninety sums over every row, each adding its constant first (with Trino's overflow check). The
//! sums differ only by their constant times the number of values summed, so [`ShiftedSums`]
//! computes `sum(x)` and `count(x)` once and each `sum(x ± c)` from them. NULLs agree: a NULL `x`
//! is left out of both, and over no value `sum(x)` is NULL, so the result is too.
//!
//! Only where no row's `x + c` can overflow, so that no error is lost: `x` is an integer of up to
//! 32 bits widened to a bigint (as `smallint_column + 1` is typed), and `c` fits 32 bits; the
//! result's `+` and `*` are Trino's checked ones. Over doubles the rounding would differ, and over
//! decimals the result's type would.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, Result, ScalarValue};
use datafusion::functions_aggregate::count::count;
use datafusion::logical_expr::expr::{AggregateFunctionParams, ScalarFunction};
use datafusion::logical_expr::{
    Aggregate, BinaryExpr, Cast, Expr, ExprSchemable, LogicalPlan, Operator, Projection, cast, lit,
};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};
use sqe_functions::IntegerOperator;

#[derive(Debug)]
pub(crate) struct ShiftedSums;

impl OptimizerRule for ShiftedSums {
    fn name(&self) -> &str {
        "shifted_sums"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        if !super::switches(&config.options()).shifted_sums {
            return Ok(Transformed::no(plan));
        }
        let LogicalPlan::Aggregate(aggregate) = plan else {
            return Ok(Transformed::no(plan));
        };
        let shifts: Vec<Option<Shift>> = aggregate
            .aggr_expr
            .iter()
            .map(|e| shifted(e, &aggregate))
            .collect::<Result<_>>()?;
        if shifts.iter().all(Option::is_none) {
            return Ok(Transformed::no(LogicalPlan::Aggregate(aggregate)));
        }
        if !unique_names(&aggregate, &shifts) {
            return Ok(Transformed::no(LogicalPlan::Aggregate(aggregate)));
        }
        computed_once(aggregate, shifts).map(Transformed::yes)
    }
}

/// `sum(x ± c)`, found: `sum(x)`, `count(x)` and `c` with its sign.
struct Shift {
    sum: Expr,
    count: Expr,
    c: i64,
}

/// The shift an aggregate expression of `aggregate` sums, if it is one.
fn shifted(e: &Expr, aggregate: &Aggregate) -> Result<Option<Shift>> {
    let Expr::AggregateFunction(f) = e else {
        return Ok(None);
    };
    let AggregateFunctionParams {
        args,
        distinct: false,
        filter: None,
        order_by,
        ..
    } = &f.params
    else {
        return Ok(None);
    };
    if f.func.name() != "sum" || !order_by.is_empty() {
        return Ok(None);
    }
    let [arg] = args.as_slice() else {
        return Ok(None);
    };
    let (left, op, right) = match arg {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => (left.as_ref(), *op, right.as_ref()),
        Expr::ScalarFunction(call) if call.args.len() == 2 => {
            let op = match call.func.name() {
                "sqe_add" => Operator::Plus,
                "sqe_subtract" => Operator::Minus,
                _ => return Ok(None),
            };
            (&call.args[0], op, &call.args[1])
        }
        _ => return Ok(None),
    };
    let (x, c) = match (op, integer(left), integer(right)) {
        (Operator::Plus, None, Some(c)) => (left, c),
        (Operator::Plus, Some(c), None) => (right, c),
        (Operator::Minus, None, Some(c)) => match c.checked_neg() {
            Some(c) => (left, c),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    let Expr::Cast(Cast {
        expr: narrow,
        field,
    }) = x
    else {
        return Ok(None);
    };
    let from = narrow.get_type(aggregate.input.schema())?;
    let widened = from.is_integer() && from.primitive_width().is_some_and(|w| w <= 4);
    if field.data_type() != &DataType::Int64 || !widened || i32::try_from(c).is_err() {
        return Ok(None);
    }
    let mut sum = f.clone();
    sum.params.args = vec![x.clone()];
    Ok(Some(Shift {
        sum: Expr::AggregateFunction(sum),
        // As the query would spell it: the widening changes no value's NULLness.
        count: count(narrow.as_ref().clone()),
        c,
    }))
}

/// Whether the aggregate expressions the rewrite would compute have one name each, as an
/// aggregate's columns must (two expressions alike but for a cast are named alike).
fn unique_names(aggregate: &Aggregate, shifts: &[Option<Shift>]) -> bool {
    let mut names: HashMap<String, &Expr> = HashMap::new();
    let exprs = aggregate
        .aggr_expr
        .iter()
        .zip(shifts)
        .flat_map(|(e, shift)| match shift {
            None => vec![e],
            Some(s) => vec![&s.sum, &s.count],
        });
    for e in exprs {
        let name = e.schema_name().to_string();
        if names.insert(name, e).is_some_and(|other| other != e) {
            return false;
        }
    }
    true
}

/// The value of an integer constant.
fn integer(e: &Expr) -> Option<i64> {
    let Expr::Literal(value, _) = e else {
        return None;
    };
    match value {
        ScalarValue::Int8(Some(v)) => Some(i64::from(*v)),
        ScalarValue::Int16(Some(v)) => Some(i64::from(*v)),
        ScalarValue::Int32(Some(v)) => Some(i64::from(*v)),
        ScalarValue::Int64(Some(v)) => Some(*v),
        _ => None,
    }
}

/// `aggregate` with each shifted sum computed from `sum(x)` and `count(x)`, under a projection
/// that gives back its columns, names and types.
fn computed_once(aggregate: Aggregate, shifts: Vec<Option<Shift>>) -> Result<LogicalPlan> {
    // The grouping columns, with the grouping id of grouping sets.
    let groups = aggregate.group_expr_len()?;
    let mut exprs: Vec<Expr> = Vec::new();
    // The position of each aggregate expression of the new aggregate.
    let mut at: HashMap<Expr, usize> = HashMap::new();
    let mut add = |e: Expr, exprs: &mut Vec<Expr>| {
        *at.entry(e.clone()).or_insert_with(|| {
            exprs.push(e);
            exprs.len() - 1
        })
    };
    let mut outputs = Vec::with_capacity(aggregate.aggr_expr.len());
    for (e, shift) in aggregate.aggr_expr.iter().zip(&shifts) {
        outputs.push(match shift {
            None => Output::Kept(add(e.clone(), &mut exprs)),
            Some(s) => Output::Shifted {
                sum: add(s.sum.clone(), &mut exprs),
                count: add(s.count.clone(), &mut exprs),
                c: s.c,
            },
        });
    }
    let once = Aggregate::try_new(
        Arc::clone(&aggregate.input),
        aggregate.group_expr.clone(),
        exprs,
    )?;
    let column = |i: usize| Expr::Column(Column::from(once.schema.qualified_field(groups + i)));
    let mut projection: Vec<Expr> = (0..groups)
        .map(|i| Expr::Column(Column::from(once.schema.qualified_field(i))))
        .collect();
    for (i, output) in outputs.into_iter().enumerate() {
        let (qualifier, field) = aggregate.schema.qualified_field(groups + i);
        let value = match output {
            Output::Kept(k) => column(k),
            Output::Shifted { sum, count, c } => {
                let checked = |op, a: Expr, b: Expr| {
                    let f = sqe_functions::integer_operator(op);
                    Expr::ScalarFunction(ScalarFunction::new_udf(f, vec![a, b]))
                };
                let shift = checked(IntegerOperator::Multiply, lit(c), column(count));
                let sum = checked(IntegerOperator::Add, column(sum), shift);
                cast(sum, field.data_type().clone())
            }
        };
        projection.push(value.alias_qualified(qualifier.cloned(), field.name()));
    }
    let input = Arc::new(LogicalPlan::Aggregate(once));
    Ok(LogicalPlan::Projection(Projection::try_new(
        projection, input,
    )?))
}

/// What an aggregate expression becomes.
enum Output {
    /// The expression itself, at this position.
    Kept(usize),
    /// `sum + c * count`, from these positions.
    Shifted { sum: usize, count: usize, c: i64 },
}

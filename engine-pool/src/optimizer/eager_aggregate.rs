//! An aggregate over a join sums the facts by their keys before it joins the table that holds the
//! text it groups by.
//!
//! TPC-DS q04, q11 and q74 total each customer's sales per year: `SELECT c_customer_id,
//! c_first_name, …, d_year, sum(ss_…) FROM customer, store_sales, date_dim WHERE … GROUP BY
//! c_customer_id, c_first_name, …, d_year`. Planned as written, a million sales rows each fetch
//! seven strings of their customer in the join, and the aggregate hashes those strings a million
//! times. [`EagerAggregation`] first sums the sales by what the rest of the query needs of them,
//! the customer key and `d_year` (integers, a fraction of the rows), then joins `customer` to those
//! sums and adds them up by the same columns as before.
//!
//! The answer is the same for any inner join (Yan and Larson's eager group-by): each sales row
//! still reaches every group it reached, through the sum of its key, however many customer rows
//! share that key. Applied when
//! - the aggregate is grouped by plain columns and computes only `sum`, `count`, `min` and `max`
//!   (no DISTINCT, FILTER or ORDER BY), of columns of the other tables;
//! - its input is a tree of inner equi-joins, one of whose tables is read whole (a scan with no
//!   filter, aliased or not: joining it later removes no row sooner; a table under a row filter or
//!   a mask is never one), joined by columns only, and gives the aggregate a text column to group
//!   by;
//! - everything else the aggregate groups by, and the keys that table is joined by, are integers,
//!   dates or booleans (cheap to group by), and the rest of the join is not this rule's own partial
//!   aggregate. Each table that qualifies is tried in turn;
//! - nothing else it groups by is a column of a table the functions read: such columns (ids,
//!   ticket numbers) are nearly as many as the rows, so summing by them first would sum up little
//!   (TPC-DS q30 and q81, grouped by the returning customer, were slower).
//!
//! Switch: `sqe.optimizer.eager_aggregation`.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{
    Column, DFSchema, ExprSchema, NullEquality, Result as DFResult, ScalarValue,
};
use datafusion::functions::core::expr_fn::coalesce;
use datafusion::functions_aggregate::sum::sum_udaf;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::{
    Aggregate, Expr, ExprSchemable, Join, JoinConstraint, JoinType, LogicalPlan, Projection, col,
    lit,
};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// The rule (module docs). It runs once filters have moved into the joins.
#[derive(Debug)]
pub(crate) struct EagerAggregation;

impl OptimizerRule for EagerAggregation {
    fn name(&self) -> &str {
        "eager_aggregation"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> DFResult<Transformed<LogicalPlan>> {
        if !super::switches(&config.options()).eager_aggregation {
            return Ok(Transformed::no(plan));
        }
        plan.transform_up(|node| match node {
            LogicalPlan::Aggregate(aggregate) => match eager(&aggregate) {
                // A plan that cannot be built is one this rule leaves alone.
                Ok(Some(plan)) => Ok(Transformed::yes(plan)),
                Ok(None) | Err(_) => Ok(Transformed::no(LogicalPlan::Aggregate(aggregate))),
            },
            node => Ok(Transformed::no(node)),
        })
    }
}

/// The names of the partial results' columns: `__sqe_eager_0`, …
const PARTIAL_PREFIX: &str = "__sqe_eager_";

/// How an aggregate function's partial results add up.
#[derive(Clone, Copy, PartialEq)]
enum Partial {
    /// `sum`, `min`, `max`: the same function over the partial results.
    Same,
    /// `count`: the sum of the partial counts.
    Count,
}

/// `aggregate` with its functions computed before the join of its text table, or None when the
/// module's conditions do not hold.
fn eager(aggregate: &Aggregate) -> DFResult<Option<LogicalPlan>> {
    let groups: Vec<&Column> = match aggregate
        .group_expr
        .iter()
        .map(|e| match e {
            Expr::Column(c) => Some(c),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
    {
        Some(groups) => groups,
        None => return Ok(None),
    };
    let mut functions = Vec::with_capacity(aggregate.aggr_expr.len());
    for expr in &aggregate.aggr_expr {
        let Some(f) = decomposable(expr) else {
            return Ok(None);
        };
        functions.push(f);
    }
    let mut leaves = Vec::new();
    if !inner_joins(&aggregate.input, &mut leaves) || leaves.len() < 2 {
        return Ok(None);
    }
    let arguments: Vec<&Column> = functions
        .iter()
        .flat_map(|(f, _)| f.params.args.iter().flat_map(|a| a.column_refs()))
        .collect();
    let input_schema = aggregate.input.schema();
    let texts = leaves.iter().filter(|leaf| {
        whole_table(leaf)
            && !arguments.iter().any(|c| leaf.schema().has_column(c))
            && groups.iter().any(|c| {
                leaf.schema().has_column(c) && is_text(column_type(input_schema, c).as_ref())
            })
    });
    // The tables the functions read: their own columns are nearly as many as their rows (ids,
    // ticket numbers), so grouping by one of them would sum up little.
    let facts: Vec<&Arc<LogicalPlan>> = leaves
        .iter()
        .filter(|leaf| arguments.iter().any(|c| leaf.schema().has_column(c)))
        .collect();
    for text in texts {
        let by_fact = groups.iter().any(|c| {
            !text.schema().has_column(c) && facts.iter().any(|f| f.schema().has_column(c))
        });
        if by_fact {
            continue;
        }
        if let Some(plan) = eager_over(aggregate, &groups, &functions, Arc::clone(text))? {
            return Ok(Some(plan));
        }
    }
    Ok(None)
}

/// [`eager`] with `text` as the table joined last.
fn eager_over(
    aggregate: &Aggregate,
    groups: &[&Column],
    functions: &[(AggregateFunction, Partial)],
    text: Arc<LogicalPlan>,
) -> DFResult<Option<LogicalPlan>> {
    let input_schema = aggregate.input.schema();
    // What the rest groups by: its own columns of the GROUP BY, then the keys joining `text`.
    let mut by: Vec<Column> = Vec::new();
    for c in groups {
        if text.schema().has_column(c) {
            continue;
        }
        if !is_narrow(column_type(input_schema, c).as_ref()) {
            return Ok(None);
        }
        if !by.contains(*c) {
            by.push((*c).clone());
        }
    }
    let mut keys = Vec::new();
    let Some(Some(rest)) = without(&aggregate.input, &text, &mut keys) else {
        return Ok(None);
    };
    // Never twice: the rest of this rule's own join is its partial aggregate.
    let partial_already = rest
        .schema()
        .fields()
        .iter()
        .any(|f| f.name().starts_with(PARTIAL_PREFIX));
    if keys.is_empty() || partial_already {
        return Ok(None);
    }
    for (_, key) in &keys {
        if !is_narrow(column_type(rest.schema(), key).as_ref()) {
            return Ok(None);
        }
        if !by.contains(key) {
            by.push(key.clone());
        }
    }

    // The partial results, by the rest's columns and keys.
    let name = |i: usize| format!("{PARTIAL_PREFIX}{i}");
    let partial_exprs = functions
        .iter()
        .enumerate()
        .map(|(i, (f, _))| Expr::AggregateFunction(f.clone()).alias(name(i)))
        .collect();
    let partial = Aggregate::try_new(
        rest,
        by.into_iter().map(Expr::Column).collect(),
        partial_exprs,
    )?;
    let partial = Arc::new(LogicalPlan::Aggregate(partial));
    let on = keys
        .into_iter()
        .map(|(t, r)| (Expr::Column(t), Expr::Column(r)))
        .collect();
    let join = Join::try_new(
        text,
        partial,
        on,
        None,
        JoinType::Inner,
        JoinConstraint::On,
        NullEquality::NullEqualsNothing,
        false,
    )?;
    let join = Arc::new(LogicalPlan::Join(join));

    // The same groups, adding up the partial results.
    let finals = functions
        .iter()
        .enumerate()
        .map(|(i, (f, partial))| {
            let func = match partial {
                Partial::Same => Arc::clone(&f.func),
                Partial::Count => sum_udaf(),
            };
            Expr::AggregateFunction(AggregateFunction::new_udf(
                func,
                vec![col(name(i))],
                false,
                None,
                vec![],
                None,
            ))
            .alias(name(i))
        })
        .collect();
    let total = Aggregate::try_new(join, aggregate.group_expr.clone(), finals)?;
    let total = Arc::new(LogicalPlan::Aggregate(total));

    // The aggregate's own columns, names and types.
    let mut exprs = Vec::with_capacity(aggregate.schema.fields().len());
    for (qualifier, field) in aggregate.schema.iter().take(groups.len()) {
        exprs.push(Expr::Column(Column::new(qualifier.cloned(), field.name())));
    }
    let functions_fields = aggregate.schema.iter().skip(groups.len());
    for (i, ((qualifier, field), (_, partial))) in functions_fields.zip(functions).enumerate() {
        let mut expr = col(name(i));
        if *partial == Partial::Count {
            expr = coalesce(vec![expr, lit(ScalarValue::Int64(Some(0)))]);
        }
        if expr.get_type(total.schema())? != *field.data_type() {
            expr = expr.cast_to(field.data_type(), total.schema())?;
        }
        exprs.push(expr.alias_qualified(qualifier.cloned(), field.name()));
    }
    let projection = Projection::try_new(exprs, total)?;
    let widened = aggregate
        .schema
        .fields()
        .iter()
        .zip(projection.schema.fields())
        .any(|(was, now)| !was.is_nullable() && now.is_nullable());
    if widened || projection.schema.fields().len() != aggregate.schema.fields().len() {
        return Ok(None);
    }
    Ok(Some(LogicalPlan::Projection(projection)))
}

/// The aggregate function of `expr` if its partial results add up: `sum`, `count`, `min` or
/// `max` of one argument, without DISTINCT, FILTER or ORDER BY.
fn decomposable(expr: &Expr) -> Option<(AggregateFunction, Partial)> {
    let Expr::AggregateFunction(f) = expr.clone().unalias() else {
        return None;
    };
    let p = &f.params;
    if p.distinct || p.filter.is_some() || !p.order_by.is_empty() || p.args.len() != 1 {
        return None;
    }
    let partial = match f.func.name() {
        "sum" | "min" | "max" => Partial::Same,
        "count" => Partial::Count,
        _ => return None,
    };
    Some((f, partial))
}

/// Collects the tables of a tree of inner equi-joins (through projections that only pick
/// columns) into `leaves`; false when `plan` is not such a join.
fn inner_joins(plan: &Arc<LogicalPlan>, leaves: &mut Vec<Arc<LogicalPlan>>) -> bool {
    match plan.as_ref() {
        LogicalPlan::Projection(p) if picks_joins(p) => inner_joins(&p.input, leaves),
        LogicalPlan::Join(j) if inner(j) => {
            for side in [&j.left, &j.right] {
                if !inner_joins(side, leaves) {
                    leaves.push(Arc::clone(side));
                }
            }
            true
        }
        _ => false,
    }
}

/// A projection that only picks columns of inner joins.
fn picks_joins(projection: &Projection) -> bool {
    projection.expr.iter().all(|e| matches!(e, Expr::Column(_)))
        && match projection.input.as_ref() {
            LogicalPlan::Projection(p) => picks_joins(p),
            LogicalPlan::Join(j) => inner(j),
            _ => false,
        }
}

fn inner(join: &Join) -> bool {
    join.join_type == JoinType::Inner
        && join.null_equality == NullEquality::NullEqualsNothing
        && !join.null_aware
        && !join.on.is_empty()
}

/// `plan` without the table `text` (None when `plan` is that table), the keys of the joins it was
/// in going to `keys` as (its column, the other side's column). None (outer) when a join of `text`
/// is by anything but columns, or carries a filter.
fn without(
    plan: &Arc<LogicalPlan>,
    text: &Arc<LogicalPlan>,
    keys: &mut Vec<(Column, Column)>,
) -> Option<Option<Arc<LogicalPlan>>> {
    if Arc::ptr_eq(plan, text) {
        return Some(None);
    }
    match plan.as_ref() {
        LogicalPlan::Projection(p) if picks_joins(p) => without(&p.input, text, keys),
        LogicalPlan::Join(j) if inner(j) => {
            let left = without(&j.left, text, keys)?;
            let right = without(&j.right, text, keys)?;
            let (left, right) = match (left, right) {
                (Some(left), Some(right)) => (left, right),
                (None, Some(other)) => return text_side(j, true, other, keys),
                (Some(other), None) => return text_side(j, false, other, keys),
                (None, None) => return None,
            };
            // `text` may be deeper in one side: the keys that name it go up with it.
            let mut on = Vec::with_capacity(j.on.len());
            for (l, r) in &j.on {
                match (names(l, text), names(r, text), l, r) {
                    (false, false, ..) => on.push((l.clone(), r.clone())),
                    (true, false, Expr::Column(t), Expr::Column(o))
                    | (false, true, Expr::Column(o), Expr::Column(t)) => {
                        keys.push((t.clone(), o.clone()))
                    }
                    _ => return None,
                }
            }
            if on.is_empty() || j.filter.as_ref().is_some_and(|f| names(f, text)) {
                return None;
            }
            let join = Join::try_new(
                left,
                right,
                on,
                j.filter.clone(),
                JoinType::Inner,
                j.join_constraint,
                j.null_equality,
                false,
            )
            .ok()?;
            Some(Some(Arc::new(LogicalPlan::Join(join))))
        }
        _ => Some(Some(Arc::clone(plan))),
    }
}

/// The join of `text` (its left side when `text_left`) with `other`: `other`, and the join's keys
/// into `keys`. None when the join is by anything but columns or carries a filter.
fn text_side(
    join: &Join,
    text_left: bool,
    other: Arc<LogicalPlan>,
    keys: &mut Vec<(Column, Column)>,
) -> Option<Option<Arc<LogicalPlan>>> {
    if join.filter.is_some() {
        return None;
    }
    for (l, r) in &join.on {
        let (Expr::Column(l), Expr::Column(r)) = (l, r) else {
            return None;
        };
        let (t, o) = if text_left { (l, r) } else { (r, l) };
        keys.push((t.clone(), o.clone()));
    }
    Some(Some(other))
}

/// Whether `expr` reads a column of `text`.
fn names(expr: &Expr, text: &Arc<LogicalPlan>) -> bool {
    expr.column_refs()
        .iter()
        .any(|c| text.schema().has_column(c))
}

/// A table read whole: a scan with no filter and no limit, under its alias if it has one.
fn whole_table(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::TableScan(scan) => scan.filters.is_empty() && scan.fetch.is_none(),
        LogicalPlan::SubqueryAlias(alias) => whole_table(&alias.input),
        _ => false,
    }
}

fn column_type(schema: &DFSchema, column: &Column) -> Option<DataType> {
    schema
        .field_from_column(column)
        .ok()
        .map(|f| f.data_type().clone())
}

fn is_text(t: Option<&DataType>) -> bool {
    matches!(
        t,
        Some(
            DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::BinaryView
        )
    )
}

/// Integers, dates and booleans: cheap to group by.
fn is_narrow(t: Option<&DataType>) -> bool {
    t.is_some_and(|t| {
        t.is_integer() || matches!(t, DataType::Date32 | DataType::Date64 | DataType::Boolean)
    })
}

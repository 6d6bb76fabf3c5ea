//! The plan, before DataFusion's type coercion ([`TrinoOperands`]), so that a CASE, COALESCE or
//! UNION around the operands takes Trino's type, not DataFusion's: timestamps (and times) of
//! different precisions that meet are each cast to the finest of them (timestamps.rs), a decimal
//! quotient takes Trino's type (quotient.rs), and text cast to a timestamp is read as Trino reads
//! it (no `T`, zone names, a longer fraction rounded); a timestamp with a time zone per value
//! (functions/src/zoned.rs) is compared by its instant, shifted by an interval in its zone, and
//! meets timestamps with one zone in its per-value form. A double that meets a decimal makes it a
//! double (floats.rs).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    BinaryExpr, Cast, Expr, ExprSchemable, LogicalPlan, Operator, TryCast,
};
use datafusion::optimizer::AnalyzerRule;

use super::exprs::{call_udf, is_day_second, is_text, operand_groups, rewrite_plan, wrap};
use super::floats::{float_meeting, floats_over_decimals, values_over_decimals};
use super::quotient::trino_quotient;
use super::timestamps::{
    finest_group, instant_of, is_constant, is_zoned, meeting_type, meeting_unit, types_of,
    zoned_operands,
};

/// Before type coercion: `a / b` of two decimals as `CAST(a / b AS <Trino's type>)`, and
/// timestamps of different precisions that meet (compared, subtracted, in one CASE, COALESCE, IN
/// list, function call or UNION column) each at the finest of them, as Trino coerces them, where
/// DataFusion would cut the finer ones down to the coarsest.
#[derive(Debug)]
pub(super) struct TrinoOperands;

impl AnalyzerRule for TrinoOperands {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let operands = |e: Expr, schema: &DFSchema| {
            e.transform_up(|e| match e {
                Expr::BinaryExpr(BinaryExpr {
                    left,
                    op: Operator::Divide,
                    right,
                }) => trino_quotient(left, right, schema),
                Expr::Cast(Cast { expr, field }) => Ok(
                    match text_to_timestamp(&expr, field.data_type(), false, schema)? {
                        Some(read) => Transformed::yes(read),
                        None => Transformed::no(Expr::Cast(Cast::new_from_field(expr, field))),
                    },
                ),
                Expr::TryCast(TryCast { expr, field }) => Ok(
                    match text_to_timestamp(&expr, field.data_type(), true, schema)? {
                        Some(read) => Transformed::yes(read),
                        None => {
                            Transformed::no(Expr::TryCast(TryCast::new_from_field(expr, field)))
                        }
                    },
                ),
                other => zoned_operands_of(other, schema)?
                    .transform_data(|e| finest_timestamps(e, schema))?
                    .transform_data(|e| floats_over_decimals(e, schema)),
            })
        };
        // A union keeps the types its planner gave it: taken again from its inputs.
        rewrite_plan(plan, operands, |node| match node {
            LogicalPlan::Union(union) => Ok(LogicalPlan::Union(
                datafusion::logical_expr::Union::try_new_with_loose_types(finest_union_inputs(
                    union.inputs,
                )?)?,
            )),
            LogicalPlan::Values(values) => values_over_decimals(values),
            other => other.recompute_schema(),
        })
    }

    fn name(&self) -> &str {
        "trino_operands"
    }
}

/// Text cast to a timestamp, read as Trino reads it (`sqe_cast_timestamp`, whose second argument
/// is a NULL of the type cast to), where DataFusion's cast would read a `T`, or a zone into a
/// timestamp without one, and no zone names. Only casts the query spells: a text DataFusion's
/// coercion casts (a timestamp compared with text) is its own.
fn text_to_timestamp(
    x: &Expr,
    to: &DataType,
    lenient: bool,
    schema: &DFSchema,
) -> Result<Option<Expr>> {
    if !matches!(to, DataType::Timestamp(..)) || !is_text(&x.get_type(schema)?) {
        return Ok(None);
    }
    let mut args = vec![x.clone(), Expr::Literal(ScalarValue::try_from(to)?, None)];
    // Texts from a column into a timestamp with a time zone: each keeps its own zone.
    if matches!(to, DataType::Timestamp(_, Some(_))) && !is_constant(x) {
        args.push(datafusion::prelude::lit(true));
    }
    Ok(Some(Expr::ScalarFunction(ScalarFunction::new_udf(
        sqe_functions::cast_timestamp(lenient),
        args,
    ))))
}

/// `e` with Trino's meaning where its operands are timestamps or intervals (see
/// [`TrinoOperands`]): a timestamp plus an interval, and each group of operands at one timestamp
/// unit, or, for day-to-second intervals compared, by their milliseconds.
fn finest_timestamps(mut e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let compares = match &e {
        Expr::BinaryExpr(b) => {
            b.op.supports_propagation()
                || matches!(b.op, Operator::IsDistinctFrom | Operator::IsNotDistinctFrom)
        }
        Expr::Between(_) | Expr::InList(_) => true,
        _ => false,
    };
    let mut changed = timestamp_plus_interval(&mut e, schema);
    for group in operand_groups(&mut e) {
        let types = types_of(&group, schema);
        changed |= if compares && day_second_intervals(&types) {
            compared_as_millis(group)
        } else {
            finest_group(group, &types, compares)
        };
    }
    Ok(if changed {
        Transformed::yes(e)
    } else {
        Transformed::no(e)
    })
}

/// Whether `types` are day-to-second intervals (or durations, or NULL), not all of them durations
/// (which compare as they are).
fn day_second_intervals(types: &[DataType]) -> bool {
    types
        .iter()
        .all(|t| is_day_second(t) || matches!(t, DataType::Duration(_) | DataType::Null))
        && types.iter().any(is_day_second)
}

/// Day-to-second intervals compared by their milliseconds, as Trino compares them (DataFusion
/// compares days, then nanoseconds: `INTERVAL '25' HOUR` would be less than `INTERVAL '1' DAY`).
fn compared_as_millis(group: Vec<&mut Expr>) -> bool {
    for operand in group {
        wrap(operand, |x| call_udf(sqe_functions::to_milliseconds(), x));
    }
    true
}

/// `timestamp ± interval day to second` as Trino computes it; whether it changed `e`:
/// - a timestamp(0) is a timestamp(3) first, so that the interval's milliseconds are kept (Trino
///   types the sum a timestamp(3); DataFusion keeps the timestamp's unit and drops them);
/// - a zoned timestamp moves by the time the interval spans, its days as 24 hours each (DataFusion
///   adds calendar days in the zone, 23 or 25 hours across a change of offset).
fn timestamp_plus_interval(e: &mut Expr, schema: &DFSchema) -> bool {
    let Expr::BinaryExpr(b) = e else {
        return false;
    };
    let type_of = |x: &Expr| x.get_type(schema).unwrap_or(DataType::Null);
    let (left, right) = (type_of(&b.left), type_of(&b.right));
    let interval = |t: &DataType| is_day_second(t) || matches!(t, DataType::Duration(_));
    let (timestamp, with, (unit, zone), added) = match (b.op, &left, &right) {
        (Operator::Plus | Operator::Minus, DataType::Timestamp(u, z), i) if interval(i) => {
            (&mut b.left, &mut b.right, (*u, z.clone()), i)
        }
        (Operator::Plus, i, DataType::Timestamp(u, z)) if interval(i) => {
            (&mut b.right, &mut b.left, (*u, z.clone()), i)
        }
        _ => return false,
    };
    let mut changed = false;
    if unit == TimeUnit::Second {
        let to = DataType::Timestamp(TimeUnit::Millisecond, zone.clone());
        wrap(timestamp, |x| Expr::Cast(Cast::new(Box::new(x), to)));
        changed = true;
    }
    if zone.is_some() && is_day_second(added) {
        wrap(with, |x| call_udf(sqe_functions::interval_elapsed(), x));
        changed = true;
    }
    changed
}

/// [`zoned_operands`] on a plan's expression: a binary operator, BETWEEN or IN whose operands
/// are timestamps with a time zone per value (as a cast of text from a column gives them).
fn zoned_operands_of(mut e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let group = match &mut e {
        Expr::BinaryExpr(b) => {
            let types = types_of(&[&mut b.left, &mut b.right], schema);
            if !types.iter().any(is_zoned) {
                return Ok(Transformed::no(e));
            }
            let shift = matches!(b.op, Operator::Plus | Operator::Minus).then_some(b.op);
            if let Some(shifted) = zoned_operands(&mut b.left, shift, &mut b.right, &types) {
                return Ok(Transformed::yes(shifted));
            }
            return Ok(Transformed::yes(e));
        }
        Expr::Between(_) | Expr::InList(_) => operand_groups(&mut e).into_iter().flatten(),
        _ => return Ok(Transformed::no(e)),
    };
    let mut changed = false;
    for x in group {
        if x.get_type(schema).is_ok_and(|t| is_zoned(&t)) {
            wrap(x, instant_of);
            changed = true;
        }
    }
    Ok(if changed {
        Transformed::yes(e)
    } else {
        Transformed::no(e)
    })
}

/// A UNION's inputs with each timestamp column at the finest unit any input has it in, and each
/// decimal column a float where another input has a float there.
fn finest_union_inputs(inputs: Vec<Arc<LogicalPlan>>) -> Result<Vec<Arc<LogicalPlan>>> {
    let Some(width) = inputs.first().map(|i| i.schema().fields().len()) else {
        return Ok(inputs);
    };
    let meetings: Vec<Option<Meeting>> = (0..width)
        .map(|c| {
            let types: Vec<DataType> = inputs
                .iter()
                .filter_map(|i| i.schema().fields().get(c).map(|f| f.data_type().clone()))
                .collect();
            match meeting_unit(&types) {
                Some(unit) => Some(Meeting::Timestamps(unit, types.iter().any(is_zoned))),
                None => float_meeting(&types).map(Meeting::Float),
            }
        })
        .collect();
    if meetings.iter().all(Option::is_none) {
        return Ok(inputs);
    }
    inputs
        .into_iter()
        .map(|input| {
            let exprs: Vec<Expr> = input
                .schema()
                .iter()
                .zip(&meetings)
                .map(|((qualifier, field), meeting)| {
                    let column = Expr::Column(datafusion::common::Column::from((qualifier, field)));
                    match meeting.as_ref().and_then(|m| m.type_of(field.data_type())) {
                        Some(to) => Expr::Cast(Cast::new(Box::new(column), to))
                            .alias_qualified(qualifier.cloned(), field.name()),
                        None => column,
                    }
                })
                .collect();
            if exprs.iter().all(|e| matches!(e, Expr::Column(_))) {
                return Ok(input);
            }
            Ok(Arc::new(LogicalPlan::Projection(
                datafusion::logical_expr::Projection::try_new(exprs, input)?,
            )))
        })
        .collect()
}

/// How a UNION's inputs meet in one column.
enum Meeting {
    /// Timestamps at this unit (with a zone per value, or not).
    Timestamps(TimeUnit, bool),
    /// Decimals as this floating-point type.
    Float(DataType),
}

impl Meeting {
    /// The type a column of type `t` is cast to; None when it stays.
    fn type_of(&self, t: &DataType) -> Option<DataType> {
        match self {
            Meeting::Timestamps(unit, zoned) => meeting_type(t, *unit, *zoned),
            Meeting::Float(float) => t.is_decimal().then(|| float.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trino_sql::testing::{plan_in, rows, table_context, value};

    /// The plan of `sql` over the test table after this rule (and no other analyzer rule).
    async fn analyzed(sql: &str) -> String {
        let plan = plan_in(&table_context(), sql).await;
        TrinoOperands
            .analyze(plan, &ConfigOptions::default())
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .display_indent()
            .to_string()
    }

    #[tokio::test]
    async fn timestamps_that_meet_take_the_finest_unit() {
        assert_eq!(
            analyzed("SELECT CASE WHEN i > 0 THEN s ELSE ms END AS c, coalesce(s, ms) AS k FROM t")
                .await,
            "Projection: CASE WHEN t.i > Int64(0) THEN CAST(t.s AS Timestamp(ms)) ELSE t.ms END AS c, coalesce(CAST(t.s AS Timestamp(ms)), t.ms) AS k\
             \n  TableScan: t"
        );
        // DataFusion would cut the finer down to the coarser: 03:04:05.500 to 03:04:05.
        assert_eq!(
            value("SELECT coalesce(CASE WHEN i < 0 THEN s END, ms) FROM t").await,
            "2020-01-02T03:04:05.500"
        );
        assert_eq!(value("SELECT ms IN (s) FROM t").await, "false");
        assert_eq!(value("SELECT ms BETWEEN s AND s FROM t").await, "false");
        let mut union = rows("SELECT s FROM t UNION ALL SELECT ms FROM t")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        union.sort();
        assert_eq!(
            union,
            [["2020-01-02T03:04:05"], ["2020-01-02T03:04:05.500"]]
        );
    }

    #[tokio::test]
    async fn intervals_and_text() {
        // DataFusion compares days, then the rest: 25 hours would be less than a day.
        assert_eq!(
            value("SELECT INTERVAL '25' HOUR > INTERVAL '1' DAY").await,
            "true"
        );
        // A timestamp(0) plus an interval is a timestamp(3): the milliseconds are kept.
        assert_eq!(
            value("SELECT s + INTERVAL '0.5' SECOND FROM t").await,
            "2020-01-02T03:04:05.500"
        );
        // A longer fraction is rounded, not cut.
        assert_eq!(
            value("SELECT CAST(txt AS TIMESTAMP(6)) FROM t").await,
            "2020-01-02T03:04:05.123457"
        );
        assert_eq!(
            analyzed("SELECT CAST(txt AS TIMESTAMP(6)) AS c FROM t").await,
            "Projection: sqe_cast_timestamp(t.txt, TimestampMicrosecond(NULL, None)) AS c\
             \n  TableScan: t"
        );
    }

    #[tokio::test]
    async fn decimal_quotients() {
        assert_eq!(value("SELECT d / 3 FROM t").await, "0.83");
        assert_eq!(
            value("SELECT arrow_typeof(CASE WHEN i > 0 THEN d / 3 ELSE d END) FROM t").await,
            "Decimal128(10, 2)"
        );
    }
}

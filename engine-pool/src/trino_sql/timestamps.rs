//! Where timestamps (and times) meet in an expression, as Trino types them: operands of different
//! precisions each at the finest of them (DataFusion would cut the finer ones down to the
//! coarsest), and timestamps with a time zone per value (functions/src/zoned.rs) read by their
//! instant, or shifted by an interval in their own zone. Shared by the planner's operators
//! (operators.rs) and the analyzer rule before type coercion (operands.rs); the casts after it
//! (casts.rs) read a per-value zone's parts here too.

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{BinaryExpr, Cast, Expr, ExprSchemable, Operator};

use super::exprs::{call_udf, wrap};

/// The unit of a timestamp or time type, and whether it is a time. (Arrow orders units from
/// seconds to nanoseconds: the finest is the largest.)
fn temporal_unit(t: &DataType) -> Option<(bool, TimeUnit)> {
    match t {
        DataType::Timestamp(unit, _) => Some((false, *unit)),
        DataType::Time32(unit) | DataType::Time64(unit) => Some((true, *unit)),
        other => sqe_functions::zoned_unit(other).map(|unit| (false, unit)),
    }
}

/// The unit timestamps of `types` meet at: the finest, when their units differ or when a zone
/// per value meets a timestamp with one zone (which then takes the per-value form).
pub(super) fn meeting_unit(types: &[DataType]) -> Option<TimeUnit> {
    finest_of(types).or_else(|| {
        let one_zone = types
            .iter()
            .any(|t| matches!(t, DataType::Timestamp(_, Some(_))));
        let zoned = types.iter().find_map(sqe_functions::zoned_unit);
        zoned.filter(|_| one_zone)
    })
}

/// The type `t` is cast to where timestamps meet at `unit` ([`meeting_unit`]), a zone per value
/// among them (`zoned`) or not; None when it stays.
pub(super) fn meeting_type(t: &DataType, unit: TimeUnit, zoned: bool) -> Option<DataType> {
    if zoned && matches!(t, DataType::Timestamp(_, Some(_))) {
        return Some(sqe_functions::zoned_type(unit));
    }
    in_unit(t, unit)
}

/// The finest unit among `types` when they hold timestamps (or times) of more than one unit.
fn finest_of<'a>(types: impl IntoIterator<Item = &'a DataType>) -> Option<TimeUnit> {
    let units: Vec<(bool, TimeUnit)> = types.into_iter().filter_map(temporal_unit).collect();
    let (kind, _) = *units.first()?;
    let units: Vec<TimeUnit> = units
        .into_iter()
        .filter(|(k, _)| *k == kind)
        .map(|(_, u)| u)
        .collect();
    let finest = *units.iter().max()?;
    units.iter().any(|u| *u != finest).then_some(finest)
}

/// `t`, a timestamp or time type, in `unit` (None when it is in that unit already).
fn in_unit(t: &DataType, unit: TimeUnit) -> Option<DataType> {
    let to = match t {
        DataType::Timestamp(_, zone) => DataType::Timestamp(unit, zone.clone()),
        DataType::Time32(_) | DataType::Time64(_) => match unit {
            TimeUnit::Second | TimeUnit::Millisecond => DataType::Time32(unit),
            _ => DataType::Time64(unit),
        },
        other if is_zoned(other) => sqe_functions::zoned_type(unit),
        _ => return None,
    };
    (to != *t).then_some(to)
}

pub(super) fn types_of(group: &[&mut Expr], schema: &DFSchema) -> Vec<DataType> {
    group
        .iter()
        .map(|x| x.get_type(schema).unwrap_or(DataType::Null))
        .collect()
}

/// Casts the timestamps (or times) of `group`, of `types`, to the finest unit among them, when
/// they have more than one; whether it changed any. `compares`: the group's operands are compared.
pub(super) fn finest_group(group: Vec<&mut Expr>, types: &[DataType], compares: bool) -> bool {
    let Some(unit) = meeting_unit(types) else {
        return false;
    };
    let zoned = types.iter().any(is_zoned);
    // The coarsest unit a non-constant operand is cast up from: DataFusion's simplifier takes such
    // a cast off again by casting a constant down to that unit, which must then be exact.
    let coarsest = types
        .iter()
        .zip(group.iter())
        .filter(|(_, x)| !is_constant(x))
        .filter_map(|(t, _)| temporal_unit(t).map(|(_, unit)| unit))
        .min();
    for (operand, t) in group.into_iter().zip(types) {
        if temporal_unit(t).is_none() {
            continue;
        }
        if let Some(c) = coarsest
            && compares
            && is_constant(operand)
            && !exact_in(operand, c)
        {
            wrap(operand, |x| call_udf(sqe_functions::opaque(), x));
        }
        if let Some(to) = meeting_type(t, unit, zoned) {
            wrap(operand, |x| Expr::Cast(Cast::new(Box::new(x), to)));
        }
    }
    true
}

/// Whether `e` reads no column.
pub(super) fn is_constant(e: &Expr) -> bool {
    e.column_refs().is_empty()
}

/// Whether the constant `e` is known to be a whole number of `unit`s: a timestamp or time literal,
/// or text cast to one (what `TIMESTAMP '…'` is until it is folded).
fn exact_in(e: &Expr, unit: TimeUnit) -> bool {
    let value = match e {
        Expr::Literal(v, _) => v.clone(),
        Expr::Cast(Cast { expr, field }) => match expr.as_ref() {
            Expr::Literal(v, _) => match v.cast_to(field.data_type()) {
                Ok(v) => v,
                Err(_) => return false,
            },
            _ => return false,
        },
        Expr::ScalarFunction(f) if f.name().ends_with("cast_timestamp") => match &f.args[..] {
            [Expr::Literal(text, _), Expr::Literal(to, _)] => {
                let to = to.data_type();
                let read = text.try_as_str().flatten().map(|t| {
                    ScalarValue::Int64(Some(sqe_functions::read_timestamp(t, &to)?)).cast_to(&to)
                });
                match read {
                    Some(Ok(v)) => v,
                    _ => return false,
                }
            }
            _ => return false,
        },
        _ => return false,
    };
    let per_second: i64 = match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    };
    let (value, own) = match value {
        ScalarValue::TimestampSecond(x, _) => (x, 1),
        ScalarValue::TimestampMillisecond(x, _) => (x, 1_000),
        ScalarValue::TimestampMicrosecond(x, _) => (x, 1_000_000),
        ScalarValue::TimestampNanosecond(x, _) => (x, 1_000_000_000),
        ScalarValue::Time32Second(x) => (x.map(i64::from), 1),
        ScalarValue::Time32Millisecond(x) => (x.map(i64::from), 1_000),
        ScalarValue::Time64Microsecond(x) => (x, 1_000_000),
        ScalarValue::Time64Nanosecond(x) => (x, 1_000_000_000),
        _ => return false,
    };
    own <= per_second || value.is_none_or(|x| x % (own / per_second) == 0)
}

/// Whether `t` is a timestamp with a time zone per value (functions/src/zoned.rs).
pub(super) fn is_zoned(t: &DataType) -> bool {
    sqe_functions::zoned_unit(t).is_some()
}

/// The instant of a timestamp with a time zone per value (a timestamp in UTC).
pub(super) fn instant_of(x: Expr) -> Expr {
    datafusion::functions::core::expr_fn::get_field(x, sqe_functions::INSTANT)
}

/// The zone's name of a timestamp with a time zone per value.
pub(super) fn zone_of(x: Expr) -> Expr {
    datafusion::functions::core::expr_fn::get_field(x, sqe_functions::ZONE)
}

/// Operands that are timestamps with a time zone per value: `x + interval`, `interval + x` and
/// `x - interval` keep each value's zone (its instant shifted, as Trino shifts it: elapsed time,
/// months on the UTC clock), given back; otherwise each such operand becomes its instant (what
/// comparisons and differences read).
pub(super) fn zoned_operands(
    left: &mut Expr,
    shift: Option<Operator>,
    right: &mut Expr,
    types: &[DataType],
) -> Option<Expr> {
    let interval = |t: &DataType| matches!(t, DataType::Interval(_) | DataType::Duration(_));
    let shifted = |x: &Expr, op: Operator, by: &Expr| {
        let zone = zone_of(x.clone());
        let instant = Expr::BinaryExpr(BinaryExpr::new(
            Box::new(instant_of(x.clone())),
            op,
            Box::new(by.clone()),
        ));
        Expr::ScalarFunction(ScalarFunction::new_udf(
            sqe_functions::zoned_value(),
            vec![instant, zone],
        ))
    };
    match (shift, types) {
        (Some(op), [l, r]) if is_zoned(l) && interval(r) => return Some(shifted(left, op, right)),
        (Some(Operator::Plus), [l, r]) if interval(l) && is_zoned(r) => {
            return Some(shifted(right, Operator::Plus, left));
        }
        _ => {}
    }
    for (x, t) in [left, right].into_iter().zip(types) {
        if is_zoned(t) {
            wrap(x, instant_of);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use datafusion::prelude::{col, lit};

    use super::*;
    use crate::trino_sql::testing::schema;

    fn ts(unit: TimeUnit) -> DataType {
        DataType::Timestamp(unit, None)
    }

    fn utc(unit: TimeUnit) -> DataType {
        DataType::Timestamp(unit, Some("UTC".into()))
    }

    #[test]
    fn where_units_meet() {
        use TimeUnit::*;
        assert_eq!(
            meeting_unit(&[ts(Second), ts(Millisecond), DataType::Int64]),
            Some(Millisecond)
        );
        assert_eq!(meeting_unit(&[ts(Millisecond), ts(Millisecond)]), None);
        // Times meet times; the first operand's kind decides which are compared.
        assert_eq!(
            meeting_unit(&[
                DataType::Time32(Second),
                DataType::Time64(Nanosecond),
                ts(Microsecond)
            ]),
            Some(Nanosecond)
        );
        assert_eq!(
            meeting_unit(&[DataType::Time32(Second), ts(Nanosecond)]),
            None
        );
        // A zone per value meeting one zone: the per-value form, at its unit.
        let zoned = sqe_functions::zoned_type(Millisecond);
        assert_eq!(
            meeting_unit(&[zoned.clone(), utc(Millisecond)]),
            Some(Millisecond)
        );
        assert_eq!(meeting_unit(&[zoned.clone(), ts(Millisecond)]), None);

        assert_eq!(
            meeting_type(&utc(Second), Microsecond, true),
            Some(sqe_functions::zoned_type(Microsecond))
        );
        assert_eq!(
            meeting_type(&utc(Second), Microsecond, false),
            Some(utc(Microsecond))
        );
        assert_eq!(
            meeting_type(&DataType::Time32(Second), Microsecond, false),
            Some(DataType::Time64(Microsecond))
        );
        assert_eq!(
            meeting_type(&DataType::Time64(Nanosecond), Millisecond, false),
            Some(DataType::Time32(Millisecond))
        );
        assert_eq!(
            meeting_type(&zoned, Nanosecond, false),
            Some(sqe_functions::zoned_type(Nanosecond))
        );
        assert_eq!(meeting_type(&ts(Millisecond), Millisecond, false), None);
        assert_eq!(meeting_type(&DataType::Utf8, Millisecond, false), None);
    }

    #[test]
    fn constants_exact_in_a_unit() {
        use TimeUnit::*;
        let millis = |v: i64| lit(ScalarValue::TimestampMillisecond(Some(v), None));
        assert!(!exact_in(&millis(1_500), Second));
        assert!(exact_in(&millis(2_000), Second));
        assert!(exact_in(&millis(1_500), Microsecond));
        assert!(exact_in(
            &lit(ScalarValue::TimestampMillisecond(None, None)),
            Second
        ));
        assert!(!exact_in(
            &lit(ScalarValue::Time64Microsecond(Some(1_000_001))),
            Millisecond
        ));
        assert!(exact_in(
            &lit(ScalarValue::Time64Microsecond(Some(1_000_000))),
            Second
        ));
        // Text cast to a timestamp: what the cast gives.
        let cast = |text: &str, unit| Expr::Cast(Cast::new(Box::new(lit(text)), ts(unit)));
        assert!(exact_in(&cast("2020-01-02 03:04:05", Millisecond), Second));
        assert!(!exact_in(
            &cast("2020-01-02 03:04:05.5", Millisecond),
            Second
        ));
        assert!(!exact_in(&col("t"), Second));
        assert!(!exact_in(&lit(5), Second));
        assert!(is_constant(&cast("2020-01-02", Second)));
        assert!(!is_constant(&(col("a") + lit(1))));
    }

    #[test]
    fn a_group_meets_at_its_finest_unit() {
        use TimeUnit::*;
        let schema = schema(&[
            ("s", ts(Second)),
            ("ms", ts(Millisecond)),
            ("n", DataType::Int64),
        ]);
        let (mut a, mut b, mut c) = (col("s"), col("ms"), col("n"));
        let types = types_of(&[&mut a, &mut b, &mut c], &schema);
        assert_eq!(types, [ts(Second), ts(Millisecond), DataType::Int64]);
        assert!(finest_group(vec![&mut a, &mut b, &mut c], &types, false));
        assert_eq!(
            [a.to_string(), b.to_string(), c.to_string()],
            ["CAST(s AS Timestamp(ms))", "ms", "n"]
        );
        // A constant compared with a coarser column that it is not exact in is hidden from the
        // simplifier, which would cut it down to the column's unit.
        let (mut a, mut k) = (
            col("s"),
            lit(ScalarValue::TimestampMillisecond(Some(1_500), None)),
        );
        let types = types_of(&[&mut a, &mut k], &schema);
        assert!(finest_group(vec![&mut a, &mut k], &types, true));
        assert_eq!(
            [a.to_string(), k.to_string()],
            [
                "CAST(s AS Timestamp(ms))",
                "sqe_opaque(TimestampMillisecond(1500, None))"
            ]
        );
        // One unit: nothing to do.
        let (mut a, mut b) = (col("ms"), col("ms"));
        let types = types_of(&[&mut a, &mut b], &schema);
        assert!(!finest_group(vec![&mut a, &mut b], &types, true));
        assert_eq!(types_of(&[&mut col("nowhere")], &schema), [DataType::Null]);
    }

    #[test]
    fn zoned_operands_are_shifted_or_read_by_instant() {
        use TimeUnit::*;
        let zoned = sqe_functions::zoned_type(Millisecond);
        let day = DataType::Interval(datafusion::arrow::datatypes::IntervalUnit::DayTime);
        assert!(is_zoned(&zoned));
        assert!(!is_zoned(&utc(Millisecond)));
        let (mut z, mut i) = (col("z"), col("i"));
        let shifted = zoned_operands(
            &mut z,
            Some(Operator::Minus),
            &mut i,
            &[zoned.clone(), day.clone()],
        );
        assert_eq!(
            shifted.map(|e| e.to_string()).as_deref(),
            Some("sqe_zoned(get_field(z, Utf8(\"instant\")) - i, get_field(z, Utf8(\"zone\")))")
        );
        let (mut i, mut z) = (col("i"), col("z"));
        let shifted = zoned_operands(
            &mut i,
            Some(Operator::Plus),
            &mut z,
            &[day.clone(), zoned.clone()],
        );
        assert_eq!(
            shifted.map(|e| e.to_string()).as_deref(),
            Some("sqe_zoned(get_field(z, Utf8(\"instant\")) + i, get_field(z, Utf8(\"zone\")))")
        );
        // Compared: each zoned operand is its instant.
        let (mut z, mut t) = (col("z"), col("t"));
        assert_eq!(
            zoned_operands(&mut z, None, &mut t, &[zoned, utc(Millisecond)]),
            None
        );
        assert_eq!(
            [z.to_string(), t.to_string()],
            ["get_field(z, Utf8(\"instant\"))", "t"]
        );
    }
}

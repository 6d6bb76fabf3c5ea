//! The plan, after DataFusion's type coercion ([`TrinoCasts`]), where the types are settled: a
//! cast of a DOUBLE or DECIMAL to an integer rounds half away from zero (DataFusion truncates), a
//! timestamp cast to VARCHAR is Trino's text (`2020-01-02 03:04:05`, no `T`; with a zone per
//! value, each in its own), a row is cast field by field by position, JSON is read into the type
//! it is cast to, and a DECIMAL quotient has Trino's scale, the larger of its operands' (rounded
//! half up).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    BinaryExpr, Cast, Expr, ExprSchemable, LogicalPlan, Operator, ScalarUDF, TryCast,
};
use datafusion::optimizer::AnalyzerRule;

use super::exprs::{call_udf, is_day_second, is_text, rewrite_plan};
use super::quotient::trino_quotient;
use super::timestamps::{instant_of, is_zoned, zone_of};

/// Trino's casts and decimal quotients, on a plan whose types are settled.
#[derive(Debug, Default)]
pub(super) struct TrinoCasts;

impl AnalyzerRule for TrinoCasts {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let casts = |e: Expr, schema: &DFSchema| {
            e.transform_down(opaque_try_constants)?
                .data
                .transform_up(|e| rewrite_expr(e, schema))
        };
        rewrite_plan(plan, casts, LogicalPlan::recompute_schema)
    }

    fn name(&self) -> &str {
        "trino_casts"
    }
}

/// In `TRY(x)` (`sqe_try(0, _ -> x)`), the constants that casts read are hidden from constant
/// folding, which would fail the query at planning time where TRY must give NULL
/// (`TRY(CAST('x' AS INTEGER))`; DataFusion leaves any other constant that fails to evaluate as it
/// is, to fail where a row reaches it).
fn opaque_try_constants(e: Expr) -> Result<Transformed<Expr>> {
    let Expr::HigherOrderFunction(hof) = &e else {
        return Ok(Transformed::no(e));
    };
    if hof.name() != "sqe_try" {
        return Ok(Transformed::no(e));
    }
    let hide = |x: Box<Expr>| -> Box<Expr> {
        match *x {
            lit @ Expr::Literal(..) => Box::new(Expr::ScalarFunction(ScalarFunction::new_udf(
                sqe_functions::opaque(),
                vec![lit],
            ))),
            other => Box::new(other),
        }
    };
    let mut hof = hof.clone();
    for arg in &mut hof.args {
        if let Expr::Lambda(l) = arg {
            let body = std::mem::replace(&mut l.body, Box::new(datafusion::prelude::lit(0)));
            *l.body = body
                .transform_up(|x| {
                    Ok(match x {
                        Expr::Cast(Cast { expr, field }) => {
                            Transformed::yes(Expr::Cast(Cast::new_from_field(hide(expr), field)))
                        }
                        Expr::TryCast(TryCast { expr, field }) => Transformed::yes(Expr::TryCast(
                            TryCast::new_from_field(hide(expr), field),
                        )),
                        other => Transformed::no(other),
                    })
                })?
                .data;
        }
    }
    Ok(Transformed::yes(Expr::HigherOrderFunction(hof)))
}

/// A timestamp with a zone cast to one without keeps its wall-clock time in its zone (Arrow would
/// keep the time in UTC): `with_timezone(x, 'UTC')`, whose UTC time is that wall-clock time.
fn wall_clock(x: &Expr, from: &DataType, to: &DataType) -> Option<Expr> {
    match (from, to) {
        // A zone per value: its wall-clock time, its date; or its instant.
        (f, DataType::Timestamp(_, None) | DataType::Date32 | DataType::Date64) if is_zoned(f) => {
            Some(Expr::ScalarFunction(ScalarFunction::new_udf(
                sqe_functions::with_timezone(),
                vec![x.clone(), datafusion::prelude::lit("UTC")],
            )))
        }
        (f, DataType::Timestamp(_, Some(_))) if is_zoned(f) => Some(instant_of(x.clone())),
        (DataType::Timestamp(_, Some(zone)), DataType::Timestamp(_, None))
            if zone.as_ref() != "UTC" =>
        {
            Some(Expr::ScalarFunction(ScalarFunction::new_udf(
                sqe_functions::with_timezone(),
                vec![x.clone(), datafusion::prelude::lit("UTC")],
            )))
        }
        _ => None,
    }
}

/// A timestamp with a time zone in the per-value form at `unit` (where it meets per-value ones:
/// a CASE, a UNION, …): one zone for all of its values, or each value's own.
fn to_zoned(x: &Expr, from: &DataType, unit: TimeUnit) -> Option<Expr> {
    let (instant, zone) = match from {
        DataType::Timestamp(_, Some(zone)) => (
            Expr::Cast(Cast::new(
                Box::new(x.clone()),
                DataType::Timestamp(unit, Some(zone.clone())),
            )),
            None,
        ),
        f if is_zoned(f) && sqe_functions::zoned_unit(f) != Some(unit) => (
            Expr::Cast(Cast::new(
                Box::new(instant_of(x.clone())),
                DataType::Timestamp(unit, Some("UTC".into())),
            )),
            Some(zone_of(x.clone())),
        ),
        _ => return None,
    };
    Some(Expr::ScalarFunction(ScalarFunction::new_udf(
        sqe_functions::zoned_value(),
        std::iter::once(instant).chain(zone).collect(),
    )))
}

fn round() -> Arc<ScalarUDF> {
    datafusion::functions::math::round()
}

fn is_integer(t: &DataType) -> bool {
    t.is_integer()
}

/// `x` rounded half away from zero to a whole number, in a type the integer cast takes exactly
/// (None when it is one already).
fn rounded(x: Expr, from: &DataType) -> Option<Expr> {
    if matches!(&x, Expr::ScalarFunction(f) if f.name() == "round") {
        return None;
    }
    match from {
        DataType::Float16 | DataType::Float32 | DataType::Float64 => Some(Expr::ScalarFunction(
            ScalarFunction::new_udf(round(), vec![x]),
        )),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) if *s > 0 => {
            let to = match from {
                DataType::Decimal128(..) => DataType::Decimal128(*p, 0),
                _ => DataType::Decimal256(*p, 0),
            };
            Some(Expr::Cast(Cast::new(Box::new(x), to)))
        }
        _ => None,
    }
}

/// The fields of a cast from one row type to another whose fields are named otherwise.
fn renamed_fields<'a>(
    from: &'a DataType,
    to: &'a DataType,
) -> Option<(
    &'a datafusion::arrow::datatypes::Fields,
    &'a datafusion::arrow::datatypes::Fields,
)> {
    match (from, to) {
        (DataType::Struct(have), DataType::Struct(want))
            if have.len() == want.len()
                && have
                    .iter()
                    .zip(want.iter())
                    .any(|(a, b)| a.name() != b.name()) =>
        {
            Some((have, want))
        }
        _ => None,
    }
}

/// Trino casts a row to another row type field by field, by position; Arrow's cast matches the
/// fields by name. `CAST(r AS ROW(a T, b U))` becomes `named_struct('a', CAST(r.f1 AS T), …)`, NULL
/// where `r` is NULL.
fn row_cast(
    row: Expr,
    have: &datafusion::arrow::datatypes::Fields,
    want: &datafusion::arrow::datatypes::Fields,
    schema: &DFSchema,
    try_cast: bool,
) -> Result<Expr> {
    use datafusion::prelude::lit;
    let mut args = Vec::with_capacity(want.len() * 2);
    for (from, to) in have.iter().zip(want.iter()) {
        let field = Expr::ScalarFunction(ScalarFunction::new_udf(
            datafusion::functions::core::get_field(),
            vec![row.clone(), lit(from.name().as_str())],
        ));
        let cast = if try_cast {
            Expr::TryCast(TryCast::new(Box::new(field), to.data_type().clone()))
        } else {
            Expr::Cast(Cast::new(Box::new(field), to.data_type().clone()))
        };
        args.push(lit(to.name().as_str()));
        args.push(cast.transform_up(|e| rewrite_expr(e, schema))?.data);
    }
    let built = Expr::ScalarFunction(ScalarFunction::new_udf(
        datafusion::functions::core::named_struct(),
        args,
    ));
    let target = DataType::Struct(want.clone());
    datafusion::logical_expr::when(
        row.is_null(),
        lit(datafusion::common::ScalarValue::try_from(&target)?),
    )
    .otherwise(built)
}

/// Whether `e` is of Trino's JSON type (its field carries the JSON extension type).
fn is_json(e: &Expr, schema: &DFSchema) -> bool {
    e.to_field(schema)
        .is_ok_and(|(_, f)| sqe_functions::is_json(&f))
}

/// `CAST(j AS T)` / `TRY_CAST(j AS T)` of a JSON value `j`: JSON read into `T`
/// (`sqe_from_json`, which takes `T` from a NULL of that type).
fn from_json(j: Expr, to: &DataType, lenient: bool) -> Result<Expr> {
    let carrier = Expr::Literal(datafusion::common::ScalarValue::try_from(to)?, None);
    Ok(Expr::ScalarFunction(ScalarFunction::new_udf(
        sqe_functions::from_json(),
        vec![j, carrier, datafusion::prelude::lit(lenient)],
    )))
}

/// `t` with every string view a plain string.
fn plain_strings(t: &DataType) -> DataType {
    use datafusion::arrow::datatypes::{Field, Fields};
    let field = |f: &Field| {
        Arc::new(
            Field::new(f.name(), plain_strings(f.data_type()), f.is_nullable())
                .with_metadata(f.metadata().clone()),
        )
    };
    match t {
        DataType::Utf8View => DataType::Utf8,
        DataType::List(f) => DataType::List(field(f)),
        DataType::Struct(fields) => {
            DataType::Struct(fields.iter().map(|f| field(f)).collect::<Fields>())
        }
        DataType::Map(f, sorted) => DataType::Map(field(f), *sorted),
        other => other.clone(),
    }
}

fn rewrite_expr(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    match e {
        Expr::Cast(Cast { expr, field }) if is_json(&expr, schema) => {
            from_json(*expr, field.data_type(), false).map(Transformed::yes)
        }
        Expr::TryCast(TryCast { expr, field }) if is_json(&expr, schema) => {
            from_json(*expr, field.data_type(), true).map(Transformed::yes)
        }
        // JSON is JSON already: CAST(j AS JSON) is `j`; its type is `json`.
        Expr::ScalarFunction(f)
            if f.name() == "sqe_to_json" && f.args.len() == 1 && is_json(&f.args[0], schema) =>
        {
            Ok(Transformed::yes(f.args.into_iter().next().unwrap_or_else(
                || datafusion::prelude::lit(datafusion::common::ScalarValue::Null),
            )))
        }
        // CAST(x AS MAP(K, V)) (see the AST's rewrite): the cast, or the read of JSON.
        Expr::ScalarFunction(f) if f.name() == "sqe_cast_as" && f.args.len() == 3 => {
            // VARCHAR as SQE's functions give it (the parser's VARCHAR is a string view, which
            // a map's key lookup would then compare with plain strings).
            let to = plain_strings(&f.args[1].get_type(schema)?);
            let lenient = matches!(
                &f.args[2],
                Expr::Literal(datafusion::common::ScalarValue::Boolean(Some(true)), _)
            );
            let x =
                f.args.into_iter().next().unwrap_or_else(|| {
                    datafusion::prelude::lit(datafusion::common::ScalarValue::Null)
                });
            if is_json(&x, schema) {
                return from_json(x, &to, lenient).map(Transformed::yes);
            }
            Ok(Transformed::yes(if lenient {
                Expr::TryCast(TryCast::new(Box::new(x), to))
            } else {
                Expr::Cast(Cast::new(Box::new(x), to))
            }))
        }
        Expr::ScalarFunction(f)
            if f.name() == "typeof" && f.args.len() == 1 && is_json(&f.args[0], schema) =>
        {
            Ok(Transformed::yes(datafusion::prelude::lit("json")))
        }
        Expr::Cast(Cast { expr, field }) => {
            let data_type = field.data_type().clone();
            let Ok(from) = expr.get_type(schema) else {
                return Ok(Transformed::no(Expr::Cast(Cast::new_from_field(
                    expr, field,
                ))));
            };
            if let Some(unit) = sqe_functions::zoned_unit(&data_type)
                && let Some(zoned) = to_zoned(&expr, &from, unit)
            {
                return Ok(Transformed::yes(zoned));
            }
            if let Some((have, want)) = renamed_fields(&from, &data_type) {
                return row_cast(*expr, have, want, schema, false).map(Transformed::yes);
            }
            if is_integer(&data_type)
                && let Some(r) = rounded((*expr).clone(), &from)
            {
                return Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(
                    Box::new(r),
                    field,
                ))));
            }
            if let Some(wall) = wall_clock(&expr, &from, &data_type) {
                return Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(
                    Box::new(wall),
                    field,
                ))));
            }
            // An interval day to second as a duration (how sum and avg read it: Arrow's cast
            // refuses days): its milliseconds.
            if matches!(data_type, DataType::Duration(_)) && is_day_second(&from) {
                let millis = call_udf(sqe_functions::to_milliseconds(), *expr);
                let duration = Expr::Cast(Cast::new(
                    Box::new(millis),
                    DataType::Duration(TimeUnit::Millisecond),
                ));
                return Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(
                    Box::new(duration),
                    field,
                ))));
            }
            if is_text(&data_type) && matches!(from, DataType::Interval(_) | DataType::Duration(_))
            {
                let text = Expr::ScalarFunction(ScalarFunction::new_udf(
                    sqe_functions::interval_text(),
                    vec![*expr],
                ));
                return Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(
                    Box::new(text),
                    field,
                ))));
            }
            if is_text(&data_type) && (matches!(from, DataType::Timestamp(..)) || is_zoned(&from)) {
                let text = Expr::ScalarFunction(ScalarFunction::new_udf(
                    sqe_functions::timestamp_text(),
                    vec![*expr],
                ));
                return Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(
                    Box::new(text),
                    field,
                ))));
            }
            Ok(Transformed::no(Expr::Cast(Cast::new_from_field(
                expr, field,
            ))))
        }
        Expr::TryCast(TryCast { expr, field }) => {
            let Ok(from) = expr.get_type(schema) else {
                return Ok(Transformed::no(Expr::TryCast(TryCast::new_from_field(
                    expr, field,
                ))));
            };
            if let Some((have, want)) = renamed_fields(&from, field.data_type()) {
                return row_cast(*expr, have, want, schema, true).map(Transformed::yes);
            }
            if let Some(wall) = wall_clock(&expr, &from, field.data_type()) {
                return Ok(Transformed::yes(Expr::TryCast(TryCast::new_from_field(
                    Box::new(wall),
                    field,
                ))));
            }
            if is_integer(field.data_type())
                && let Some(r) = rounded((*expr).clone(), &from)
            {
                return Ok(Transformed::yes(Expr::TryCast(TryCast::new_from_field(
                    Box::new(r),
                    field,
                ))));
            }
            Ok(Transformed::no(Expr::TryCast(TryCast::new_from_field(
                expr, field,
            ))))
        }
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Divide,
            right,
        }) => trino_quotient(left, right, schema),
        Expr::HigherOrderFunction(_) => sqe_functions::use_every_lambda_parameter(e, schema),
        other => Ok(Transformed::no(other)),
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::{Field, Fields};
    use datafusion::prelude::col;

    use super::*;
    use crate::trino_sql::testing::{error, schema, value};

    #[tokio::test]
    async fn casts_to_integers_round_half_away_from_zero() {
        assert_eq!(value("SELECT CAST(f AS INTEGER) FROM t").await, "3");
        assert_eq!(value("SELECT CAST(-f AS BIGINT) FROM t").await, "-3");
        assert_eq!(value("SELECT CAST(d AS INTEGER) FROM t").await, "3");
        assert_eq!(value("SELECT TRY_CAST(-d AS SMALLINT) FROM t").await, "-3");
        assert_eq!(value("SELECT CAST(d - 0.01 AS INTEGER) FROM t").await, "2");
    }

    #[tokio::test]
    async fn timestamps_as_text_and_wall_clocks() {
        assert_eq!(
            value("SELECT CAST(s AS VARCHAR) FROM t").await,
            "2020-01-02 03:04:05"
        );
        assert_eq!(
            value("SELECT CAST(ms AS VARCHAR) FROM t").await,
            "2020-01-02 03:04:05.500"
        );
        // Berlin's wall-clock time (Arrow's cast would keep UTC's, 03:04:05.500).
        assert_eq!(
            value("SELECT CAST(berlin AS TIMESTAMP(3)) FROM t").await,
            "2020-01-02T04:04:05.500"
        );
        assert_eq!(
            value("SELECT CAST(INTERVAL '1' DAY + INTERVAL '2' HOUR AS VARCHAR)").await,
            "1 02:00:00.000"
        );
    }

    #[tokio::test]
    async fn failing_casts_of_constants_in_try_are_null() {
        assert_eq!(value("SELECT TRY(CAST('x' AS INTEGER))").await, "NULL");
        assert_eq!(
            value("SELECT TRY(CAST(3000000000 AS INTEGER))").await,
            "NULL"
        );
        assert_eq!(
            error("SELECT CAST(3000000000 AS INTEGER)").await,
            "Arrow error: Cast error: Can't cast value 3000000000 to type Int32"
        );
    }

    #[tokio::test]
    async fn json_values() {
        assert_eq!(value("SELECT CAST(JSON '5' AS BIGINT)").await, "5");
        assert_eq!(
            value("SELECT TRY_CAST(JSON '\"x\"' AS BIGINT)").await,
            "NULL"
        );
        assert_eq!(
            value("SELECT typeof(CAST(JSON '[1]' AS JSON))").await,
            "json"
        );
        assert_eq!(
            value("SELECT CAST(JSON '{\"a\": 1}' AS MAP(VARCHAR, BIGINT))").await,
            "{a: 1}"
        );
    }

    #[tokio::test]
    async fn rows_cast_by_position() {
        assert_eq!(
            value("SELECT get_field(CAST(r AS STRUCT<a BIGINT, b VARCHAR>), 'b') FROM t").await,
            "x"
        );
    }

    #[test]
    fn row_casts_read_fields_by_position() {
        let from = DataType::Struct(Fields::from(vec![
            Field::new("f1", DataType::Int64, true),
            Field::new("f2", DataType::Utf8, true),
        ]));
        let to = DataType::Struct(Fields::from(vec![
            Field::new("a", DataType::Float64, true),
            Field::new("b", DataType::Utf8, true),
        ]));
        let same = DataType::Struct(Fields::from(vec![
            Field::new("f1", DataType::Float64, true),
            Field::new("f2", DataType::Utf8, true),
        ]));
        assert!(renamed_fields(&from, &same).is_none());
        let Some((have, want)) = renamed_fields(&from, &to) else {
            panic!("renamed fields not seen")
        };
        let schema = schema(&[("r", from.clone())]);
        let cast = row_cast(col("r"), have, want, &schema, false).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            cast.to_string(),
            "CASE WHEN r IS NULL THEN Struct({a:,b:}) ELSE named_struct(Utf8(\"a\"), CAST(get_field(r, Utf8(\"f1\")) AS Float64), Utf8(\"b\"), CAST(get_field(r, Utf8(\"f2\")) AS Utf8)) END"
        );
    }

    #[test]
    fn rounding_and_plain_strings() {
        assert_eq!(
            rounded(col("x"), &DataType::Float64)
                .map(|e| e.to_string())
                .as_deref(),
            Some("round(x)")
        );
        assert_eq!(
            rounded(col("x"), &DataType::Decimal128(10, 2))
                .map(|e| e.to_string())
                .as_deref(),
            Some("CAST(x AS Decimal128(10, 0))")
        );
        // Rounded once; a whole decimal or an integer needs none.
        let once = rounded(col("x"), &DataType::Float32).unwrap_or_else(|| panic!("not rounded"));
        assert_eq!(rounded(once, &DataType::Float64), None);
        assert_eq!(rounded(col("x"), &DataType::Decimal128(10, 0)), None);
        assert_eq!(rounded(col("x"), &DataType::Int64), None);

        let nested = DataType::List(Arc::new(Field::new(
            "item",
            DataType::Struct(Fields::from(vec![Field::new(
                "s",
                DataType::Utf8View,
                true,
            )])),
            true,
        )));
        assert_eq!(
            plain_strings(&nested),
            DataType::List(Arc::new(Field::new(
                "item",
                DataType::Struct(Fields::from(vec![Field::new("s", DataType::Utf8, true)])),
                true,
            )))
        );
    }

    #[test]
    fn casts_of_settled_types() {
        let schema = schema(&[
            ("f", DataType::Float64),
            (
                "z",
                DataType::Timestamp(TimeUnit::Millisecond, Some("Europe/Berlin".into())),
            ),
            (
                "u",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            ),
            ("i", DataType::Int32),
        ]);
        let rewritten = |e: Expr| {
            let t = rewrite_expr(e, &schema).unwrap_or_else(|e| panic!("{e}"));
            (t.transformed, t.data.to_string())
        };
        let cast = |x: Expr, t: DataType| Expr::Cast(Cast::new(Box::new(x), t));
        assert_eq!(
            rewritten(cast(col("f"), DataType::Int32)),
            (true, "CAST(round(f) AS Int32)".to_string())
        );
        assert_eq!(
            rewritten(cast(
                col("z"),
                DataType::Timestamp(TimeUnit::Millisecond, None)
            )),
            (
                true,
                "CAST(with_timezone(z, Utf8(\"UTC\")) AS Timestamp(ms))".to_string()
            )
        );
        // UTC's wall clock is its instant: Arrow's cast is Trino's.
        assert_eq!(
            rewritten(cast(
                col("u"),
                DataType::Timestamp(TimeUnit::Millisecond, None)
            )),
            (false, "CAST(u AS Timestamp(ms))".to_string())
        );
        assert_eq!(
            rewritten(cast(col("i"), DataType::Int64)),
            (false, "CAST(i AS Int64)".to_string())
        );
    }
}

//! A double (or real) that meets a decimal makes the decimal a double, as Trino types them.
//! DataFusion 54.1 goes the other way for comparisons, CASE, COALESCE, IN lists, UNION and VALUES:
//! it casts the double to DECIMAL(30, 15), so `f > 5.0` over a double column fails on NaN, an
//! infinity or any value from 10^15 up ("too large to store in a Decimal128"), and a VALUES column
//! of `1.5` and `DOUBLE '2'` comes out a decimal. Arithmetic already gives a double.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::{
    Cast, Expr, ExprSchemable, LogicalPlan, LogicalPlanBuilder, Values,
};

use super::exprs::{operand_groups, wrap};
use super::timestamps::types_of;

/// The functions whose arguments meet as one type (the others' arguments each have their own).
const ONE_TYPE: [&str; 5] = ["coalesce", "nullif", "greatest", "least", "nvl"];

/// The floating-point type decimals among `types` are cast to, where a float meets a decimal:
/// a double where any operand is one, a real where the floats are reals.
pub(super) fn float_meeting(types: &[DataType]) -> Option<DataType> {
    if !types.iter().any(DataType::is_decimal) {
        return None;
    }
    if types.contains(&DataType::Float64) {
        return Some(DataType::Float64);
    }
    types
        .iter()
        .any(|t| matches!(t, DataType::Float32 | DataType::Float16))
        .then_some(DataType::Float32)
}

/// `e` with the decimal operands of each of its groups cast to the floating-point type they meet.
pub(super) fn floats_over_decimals(mut e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    if let Expr::ScalarFunction(f) = &e
        && !ONE_TYPE.contains(&f.name())
    {
        return Ok(Transformed::no(e));
    }
    let mut changed = false;
    for group in operand_groups(&mut e) {
        let types = types_of(&group, schema);
        let Some(to) = float_meeting(&types) else {
            continue;
        };
        for (operand, t) in group.into_iter().zip(&types) {
            if t.is_decimal() {
                wrap(operand, |x| Expr::Cast(Cast::new(Box::new(x), to.clone())));
            }
        }
        changed = true;
    }
    Ok(if changed {
        Transformed::yes(e)
    } else {
        Transformed::no(e)
    })
}

/// VALUES rows planned again where a column's values meet as floats and decimals (DataFusion's
/// planner has cast them all to a decimal by then: the casts it added are taken off first).
pub(super) fn values_over_decimals(values: Values) -> Result<LogicalPlan> {
    let empty = DFSchema::empty();
    let width = values.schema.fields().len();
    let rows: Vec<Vec<Expr>> = values
        .values
        .iter()
        .map(|row| {
            row.iter()
                .zip(values.schema.fields())
                .map(|(x, field)| match x {
                    Expr::Cast(Cast { expr, field: to }) if to.data_type() == field.data_type() => {
                        expr.as_ref().clone()
                    }
                    other => other.clone(),
                })
                .collect()
        })
        .collect();
    let meets: Vec<Option<DataType>> = (0..width)
        .map(|c| {
            let types: Vec<DataType> = rows
                .iter()
                .map(|row| row[c].get_type(&empty).unwrap_or(DataType::Null))
                .collect();
            float_meeting(&types)
        })
        .collect();
    if meets.iter().all(Option::is_none) {
        return Ok(LogicalPlan::Values(values));
    }
    let rows = rows
        .into_iter()
        .map(|row| {
            row.into_iter()
                .zip(&meets)
                .map(|(x, to)| match to {
                    Some(to) if x.get_type(&empty).is_ok_and(|t| t.is_decimal()) => {
                        Expr::Cast(Cast::new(Box::new(x), to.clone()))
                    }
                    _ => x,
                })
                .collect()
        })
        .collect();
    let planned = LogicalPlanBuilder::values(rows)?.build()?;
    // The column names stay those the planner gave (`column1`, …).
    let LogicalPlan::Values(planned) = planned else {
        return Ok(planned);
    };
    let fields = values
        .schema
        .iter()
        .zip(planned.schema.fields())
        .map(|((qualifier, named), typed)| {
            let field = named.as_ref().clone();
            (
                qualifier.cloned(),
                Arc::new(field.with_data_type(typed.data_type().clone())),
            )
        })
        .collect();
    let schema = DFSchema::new_with_metadata(fields, values.schema.metadata().clone())?;
    Ok(LogicalPlan::Values(Values {
        schema: Arc::new(schema),
        values: planned.values,
    }))
}

#[cfg(test)]
mod tests {
    use crate::trino_sql::testing::{rows, value};

    #[tokio::test]
    async fn a_double_meeting_a_decimal_is_compared_as_a_double() {
        // As decimals, 1e16 would not fit DECIMAL(30, 15) and NaN would not be a number.
        let big = "(VALUES (DOUBLE '1e16'), (nan())) v(x)";
        for (sql, want) in [
            ("x > 5.0", [["true"], ["true"]]),
            ("x IN (1.5, 2.5)", [["false"], ["false"]]),
            ("x BETWEEN 1.0 AND 2.0", [["false"], ["false"]]),
            ("CASE WHEN x > 0 THEN x ELSE 1.5 END", [["1e16"], ["NaN"]]),
            ("coalesce(x, 1.5)", [["1e16"], ["NaN"]]),
            ("greatest(x, 2.5)", [["1e16"], ["NaN"]]),
        ] {
            let got = rows(&format!("SELECT {sql} FROM {big}"))
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            assert_eq!(got, want, "{sql}");
        }
        assert_eq!(
            value("SELECT arrow_typeof(1.5 = REAL '1.5')").await,
            "Boolean"
        );
        assert_eq!(value("SELECT 1.5 = REAL '1.5'").await, "true");
    }

    #[tokio::test]
    async fn values_and_unions_of_doubles_and_decimals_are_doubles() {
        let typed = |sql: &str| format!("SELECT arrow_typeof(x), x FROM ({sql})");
        assert_eq!(
            rows(&typed("VALUES (1.5), (DOUBLE '1e20') AS v(x)"))
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            [["Float64", "1.5"], ["Float64", "1e20"]]
        );
        let mut union = rows(&typed("SELECT 1.5 AS x UNION ALL SELECT DOUBLE '1e20'"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        union.sort();
        assert_eq!(union, [["Float64", "1.5"], ["Float64", "1e20"]]);
        // Decimals that meet no float stay decimals.
        assert_eq!(
            rows(&typed("VALUES (1.5), (2.25) AS v(x)"))
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            [["Decimal128(3, 2)", "1.50"], ["Decimal128(3, 2)", "2.25"]]
        );
        assert_eq!(value("SELECT round(DOUBLE '2.345', 2)").await, "2.35");
    }
}

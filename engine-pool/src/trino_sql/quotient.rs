//! A decimal quotient takes Trino's type, scale max(s1, s2), where DataFusion's is wider. Both
//! analyzer rules apply it: before type coercion (operands.rs), so that a CASE, COALESCE or UNION
//! around it takes that type, and after it (casts.rs), for the quotients coercion made.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::{BinaryExpr, Cast, Expr, ExprSchemable, Operator};

/// `left / right`, cast to Trino's type when one is a decimal and the other a decimal or an
/// integer (a `decimal(p, 0)` wide enough for its type, as Trino coerces it): scale max(s1, s2),
/// precision p1 - s1 + s2 + scale, at most 38. So `x / count(*) / 3.0000` keeps scale 4 at each
/// step, where DataFusion's quotient of a decimal and an integer is wider.
pub(super) fn trino_quotient(
    left: Box<Expr>,
    right: Box<Expr>,
    schema: &DFSchema,
) -> Result<Transformed<Expr>> {
    let types = match (left.get_type(schema), right.get_type(schema)) {
        (Ok(l @ DataType::Decimal128(..)), Ok(r)) => (Some(l), as_decimal(&r)),
        (Ok(l), Ok(r @ DataType::Decimal128(..))) => (as_decimal(&l), Some(r)),
        _ => (None, None),
    };
    let quotient = Expr::BinaryExpr(BinaryExpr::new(left, Operator::Divide, right));
    if let (Some(DataType::Decimal128(p1, s1)), Some(DataType::Decimal128(_, s2))) = types {
        let scale = s1.max(s2);
        let precision =
            (i16::from(p1) - i16::from(s1) + i16::from(s2) + i16::from(scale)).clamp(1, 38) as u8;
        let to = DataType::Decimal128(precision, scale);
        if quotient.get_type(schema).is_ok_and(|t| t != to) {
            return Ok(Transformed::yes(Expr::Cast(Cast::new(
                Box::new(quotient),
                to,
            ))));
        }
    }
    Ok(Transformed::no(quotient))
}

/// A decimal as itself, an integer as the `decimal(p, 0)` Trino reads it as (tinyint 3 digits,
/// smallint 5, integer 10, bigint 19); `None` for anything else.
fn as_decimal(t: &DataType) -> Option<DataType> {
    let digits = match t {
        DataType::Decimal128(..) => return Some(t.clone()),
        DataType::Int8 | DataType::UInt8 => 3,
        DataType::Int16 | DataType::UInt16 => 5,
        DataType::Int32 | DataType::UInt32 => 10,
        DataType::Int64 => 19,
        DataType::UInt64 => 20,
        _ => return None,
    };
    Some(DataType::Decimal128(digits, 0))
}

#[cfg(test)]
mod tests {
    use datafusion::prelude::col;

    use super::*;
    use crate::trino_sql::testing::schema;

    #[test]
    fn integers_read_as_decimals() {
        assert_eq!(
            as_decimal(&DataType::Int8),
            Some(DataType::Decimal128(3, 0))
        );
        assert_eq!(
            as_decimal(&DataType::UInt16),
            Some(DataType::Decimal128(5, 0))
        );
        assert_eq!(
            as_decimal(&DataType::Int32),
            Some(DataType::Decimal128(10, 0))
        );
        assert_eq!(
            as_decimal(&DataType::Int64),
            Some(DataType::Decimal128(19, 0))
        );
        assert_eq!(
            as_decimal(&DataType::UInt64),
            Some(DataType::Decimal128(20, 0))
        );
        assert_eq!(
            as_decimal(&DataType::Decimal128(7, 3)),
            Some(DataType::Decimal128(7, 3))
        );
        assert_eq!(as_decimal(&DataType::Float64), None);
    }

    /// `left / right` as the rule leaves it, and its type.
    fn quotient(left: &str, right: &str) -> (bool, String, DataType) {
        let schema = schema(&[
            ("d", DataType::Decimal128(10, 2)),
            ("e", DataType::Decimal128(5, 1)),
            ("w", DataType::Decimal128(38, 10)),
            ("i", DataType::Int32),
            ("f", DataType::Float64),
        ]);
        let t = trino_quotient(Box::new(col(left)), Box::new(col(right)), &schema)
            .unwrap_or_else(|e| panic!("{e}"));
        let t_type = t.data.get_type(&schema).unwrap_or_else(|e| panic!("{e}"));
        (t.transformed, t.data.to_string(), t_type)
    }

    #[test]
    fn decimal_quotients_take_trinos_type() {
        // scale max(2, 1) = 2, precision 10 - 2 + 1 + 2 = 11.
        assert_eq!(
            quotient("d", "e"),
            (
                true,
                "CAST(d / e AS Decimal128(11, 2))".to_string(),
                DataType::Decimal128(11, 2)
            )
        );
        // An integer is a decimal(10, 0): scale 2, precision 10 - 2 + 0 + 2 = 10.
        assert_eq!(
            quotient("d", "i"),
            (
                true,
                "CAST(d / i AS Decimal128(10, 2))".to_string(),
                DataType::Decimal128(10, 2)
            )
        );
        // scale 2, precision 10 - 0 + 2 + 2 = 14.
        assert_eq!(quotient("i", "d").2, DataType::Decimal128(14, 2));
        // At most 38 digits.
        assert_eq!(quotient("w", "d").2, DataType::Decimal128(38, 10));
        // Not decimals: DataFusion's quotient.
        assert_eq!(
            quotient("i", "i"),
            (false, "i / i".to_string(), DataType::Int32)
        );
        assert_eq!(
            quotient("d", "f"),
            (false, "d / f".to_string(), DataType::Float64)
        );
    }
}

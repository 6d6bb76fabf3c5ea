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

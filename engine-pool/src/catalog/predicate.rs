//! The scan's Iceberg predicate, made from the filters DataFusion pushes down. It prunes manifests,
//! files, row groups and pages; it never decides a query's answer, since DataFusion applies every
//! filter to the rows anyway (the scan declares its pushdown `Inexact`).
//!
//! So the predicate only has to keep every row that a filter keeps. A conjunct that cannot be
//! expressed is left out (it stays a residual filter above the scan), and an OR is kept only when
//! both sides are. Below a NOT the converted expression must match the filter's TRUE and FALSE rows
//! both, so there nothing may be left out. Literals are converted to the column's Iceberg type
//! only when the value survives exactly; otherwise the comparison is left to DataFusion.
//!
//! Floating-point columns get no comparisons: Arrow orders NaN above every number (so DataFusion's
//! `x > 1.0` keeps a NaN), while Iceberg's bounds leave NaN out and would prune that file. Decimal
//! columns get none either: iceberg-rust 0.10.1's reader (tables with delete files or nested
//! columns) drops every row for `amount >= 7.00` on a decimal(10,2) column that holds 7.00 and 12.50.

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Like, Operator, expr::InList};
use iceberg::expr::{Predicate, Reference};
use iceberg::spec::{Datum, PrimitiveType, Schema, Type};

/// The predicate implied by all of `filters` together; `None` when none of them can be expressed.
pub(crate) fn from_filters(filters: &[Expr], schema: &Schema) -> Option<Predicate> {
    let convert = Converter { schema };
    filters
        .iter()
        .filter_map(|f| convert.implied(f))
        .reduce(Predicate::and)
        .filter(|p| *p != Predicate::AlwaysTrue)
}

struct Converter<'a> {
    schema: &'a Schema,
}

/// A column of the table: its name and primitive Iceberg type.
struct ColumnRef {
    name: String,
    ty: PrimitiveType,
}

impl Converter<'_> {
    /// A predicate true for every row on which `expr` is TRUE.
    fn implied(&self, expr: &Expr) -> Option<Predicate> {
        match expr {
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::And,
                right,
            }) => match (self.implied(left), self.implied(right)) {
                (Some(l), Some(r)) => Some(l.and(r)),
                (l, r) => l.or(r),
            },
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Or,
                right,
            }) => Some(self.implied(left)?.or(self.implied(right)?)),
            _ => self.exact(expr),
        }
    }

    /// A predicate true where `expr` is TRUE and false where `expr` is FALSE (rows where `expr` is
    /// NULL may go either way), so that its negation stands for `NOT expr`.
    fn exact(&self, expr: &Expr) -> Option<Predicate> {
        match expr {
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
                Operator::And => Some(self.exact(left)?.and(self.exact(right)?)),
                Operator::Or => Some(self.exact(left)?.or(self.exact(right)?)),
                _ => self.comparison(left, *op, right),
            },
            Expr::Not(inner) => Some(self.exact(inner)?.negate()),
            Expr::IsNull(e) => Some(Reference::new(self.column(e)?.name).is_null()),
            Expr::IsNotNull(e) => Some(Reference::new(self.column(e)?.name).is_not_null()),
            Expr::Between(Between {
                expr,
                negated,
                low,
                high,
            }) => {
                let within = self
                    .comparison(expr, Operator::GtEq, low)?
                    .and(self.comparison(expr, Operator::LtEq, high)?);
                Some(if *negated { within.negate() } else { within })
            }
            Expr::InList(InList {
                expr,
                list,
                negated,
            }) => self.in_list(expr, list, *negated),
            Expr::Like(like) => self.like(like),
            // What the planner leaves of `x = NULL`: never TRUE (nor FALSE).
            Expr::Literal(ScalarValue::Boolean(value), _) => Some(match value {
                Some(true) => Predicate::AlwaysTrue,
                Some(false) | None => Predicate::AlwaysFalse,
            }),
            // A boolean column on its own.
            Expr::Column(_) => {
                let column = self.column(expr)?;
                (column.ty == PrimitiveType::Boolean)
                    .then(|| Reference::new(column.name).equal_to(Datum::bool(true)))
            }
            _ => None,
        }
    }

    /// `column op literal`, either way round.
    fn comparison(&self, left: &Expr, op: Operator, right: &Expr) -> Option<Predicate> {
        let (column, op, value) = match (self.column(left), self.column(right)) {
            (Some(c), None) => (c, op, literal(right)?),
            (None, Some(c)) => (c, op.swap()?, literal(left)?),
            _ => return None,
        };
        if is_floating(&column.ty) {
            return None;
        }
        let datum = to_datum(&value, &column.ty)?;
        let r = Reference::new(column.name);
        Some(match op {
            Operator::Eq => r.equal_to(datum),
            Operator::NotEq => r.not_equal_to(datum),
            Operator::Lt => r.less_than(datum),
            Operator::LtEq => r.less_than_or_equal_to(datum),
            Operator::Gt => r.greater_than(datum),
            Operator::GtEq => r.greater_than_or_equal_to(datum),
            _ => return None,
        })
    }

    /// `column [NOT] IN (literals)`. A NULL in the list never makes the test TRUE, and never FALSE
    /// either, so it is left out of the Iceberg set.
    fn in_list(&self, expr: &Expr, list: &[Expr], negated: bool) -> Option<Predicate> {
        let column = self.column(expr)?;
        if is_floating(&column.ty) {
            return None;
        }
        let mut values = Vec::with_capacity(list.len());
        for item in list {
            let value = literal(item)?;
            if value.is_null() {
                continue;
            }
            values.push(to_datum(&value, &column.ty)?);
        }
        let r = Reference::new(column.name);
        Some(if negated {
            r.is_not_in(values)
        } else {
            r.is_in(values)
        })
    }

    /// `column [NOT] LIKE 'prefix%'` as a prefix test; `LIKE 'text'` without wildcards as equality.
    /// Case-insensitive matches and patterns with `_`, an escape or a wildcard inside are left out.
    fn like(&self, like: &Like) -> Option<Predicate> {
        if like.case_insensitive || like.escape_char.is_some() {
            return None;
        }
        let column = self.column(&like.expr)?;
        if column.ty != PrimitiveType::String {
            return None;
        }
        let pattern = match literal(&like.pattern)? {
            ScalarValue::Utf8(Some(p))
            | ScalarValue::Utf8View(Some(p))
            | ScalarValue::LargeUtf8(Some(p)) => p,
            _ => return None,
        };
        let prefix = pattern.trim_end_matches('%');
        if prefix.contains(['%', '_', '\\']) {
            return None;
        }
        let r = Reference::new(column.name);
        let matches = if prefix.len() == pattern.len() {
            r.equal_to(Datum::string(prefix))
        } else if prefix.is_empty() {
            r.is_not_null()
        } else {
            r.starts_with(Datum::string(prefix))
        };
        Some(if like.negated {
            matches.negate()
        } else {
            matches
        })
    }

    /// A top-level column of primitive type, seen through casts that keep every value as it is
    /// (a wider integer, another string encoding).
    fn column(&self, expr: &Expr) -> Option<ColumnRef> {
        match expr {
            Expr::Column(c) => {
                let field = self.schema.as_struct().field_by_name(&c.name)?;
                match field.field_type.as_ref() {
                    Type::Primitive(ty) => Some(ColumnRef {
                        name: field.name.clone(),
                        ty: ty.clone(),
                    }),
                    _ => None,
                }
            }
            Expr::Cast(cast) => {
                let column = self.column(&cast.expr)?;
                preserves(&column.ty, cast.field.data_type()).then_some(column)
            }
            _ => None,
        }
    }
}

/// A constant: a literal, or a cast of one (folded here when the planner did not).
fn literal(expr: &Expr) -> Option<ScalarValue> {
    match expr {
        Expr::Literal(value, _) => Some(value.clone()),
        Expr::Cast(cast) => literal(&cast.expr)?.cast_to(cast.field.data_type()).ok(),
        _ => None,
    }
}

fn is_floating(ty: &PrimitiveType) -> bool {
    matches!(ty, PrimitiveType::Float | PrimitiveType::Double)
}

/// Whether casting a column of Iceberg type `from` to `to` keeps every value and its order.
fn preserves(from: &PrimitiveType, to: &DataType) -> bool {
    match from {
        PrimitiveType::Int => matches!(to, DataType::Int32 | DataType::Int64),
        PrimitiveType::Long => matches!(to, DataType::Int64),
        PrimitiveType::String => matches!(
            to,
            DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
        ),
        PrimitiveType::Date => matches!(to, DataType::Date32),
        _ => false,
    }
}

/// `value` as a datum of the column's type, when it converts without change.
fn to_datum(value: &ScalarValue, ty: &PrimitiveType) -> Option<Datum> {
    if let ScalarValue::Dictionary(_, inner) = value {
        return to_datum(inner, ty);
    }
    match ty {
        PrimitiveType::Boolean => match value {
            ScalarValue::Boolean(Some(b)) => Some(Datum::bool(*b)),
            _ => None,
        },
        PrimitiveType::Int => i32::try_from(integer(value)?).ok().map(Datum::int),
        PrimitiveType::Long => i64::try_from(integer(value)?).ok().map(Datum::long),
        PrimitiveType::String => match value {
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)) => Some(Datum::string(s)),
            _ => None,
        },
        PrimitiveType::Date => match value {
            ScalarValue::Date32(Some(days)) => Some(Datum::date(*days)),
            ScalarValue::Date64(Some(ms)) if ms % 86_400_000 == 0 => {
                i32::try_from(ms / 86_400_000).ok().map(Datum::date)
            }
            _ => None,
        },
        PrimitiveType::Timestamp => timestamp(value, false, 1_000_000).map(Datum::timestamp_micros),
        PrimitiveType::Timestamptz => {
            timestamp(value, true, 1_000_000).map(Datum::timestamptz_micros)
        }
        PrimitiveType::TimestampNs => {
            timestamp(value, false, 1_000_000_000).map(Datum::timestamp_nanos)
        }
        PrimitiveType::TimestamptzNs => {
            timestamp(value, true, 1_000_000_000).map(Datum::timestamptz_nanos)
        }
        _ => None,
    }
}

/// An integer literal of any width.
fn integer(value: &ScalarValue) -> Option<i128> {
    Some(match value {
        ScalarValue::Int8(Some(v)) => i128::from(*v),
        ScalarValue::Int16(Some(v)) => i128::from(*v),
        ScalarValue::Int32(Some(v)) => i128::from(*v),
        ScalarValue::Int64(Some(v)) => i128::from(*v),
        ScalarValue::UInt8(Some(v)) => i128::from(*v),
        ScalarValue::UInt16(Some(v)) => i128::from(*v),
        ScalarValue::UInt32(Some(v)) => i128::from(*v),
        ScalarValue::UInt64(Some(v)) => i128::from(*v),
        _ => return None,
    })
}

/// A timestamp literal in ticks of `1/per_second` s. A column with a time zone takes only literals
/// with one (an instant), a column without takes only literals without; a value finer than the
/// column's unit is left out.
fn timestamp(value: &ScalarValue, zoned: bool, per_second: i64) -> Option<i64> {
    let (v, unit, tz) = match value {
        ScalarValue::TimestampSecond(Some(v), tz) => (*v, TimeUnit::Second, tz),
        ScalarValue::TimestampMillisecond(Some(v), tz) => (*v, TimeUnit::Millisecond, tz),
        ScalarValue::TimestampMicrosecond(Some(v), tz) => (*v, TimeUnit::Microsecond, tz),
        ScalarValue::TimestampNanosecond(Some(v), tz) => (*v, TimeUnit::Nanosecond, tz),
        _ => return None,
    };
    if tz.is_some() != zoned {
        return None;
    }
    let literal_per_second: i64 = match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    };
    if literal_per_second <= per_second {
        v.checked_mul(per_second / literal_per_second)
    } else {
        let step = literal_per_second / per_second;
        (v % step == 0).then_some(v / step)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::logical_expr::{cast, col, lit};
    use iceberg::spec::{NestedField, Schema, Type};

    use super::*;

    fn schema() -> Schema {
        let fields = [
            (1, "i", PrimitiveType::Int),
            (2, "l", PrimitiveType::Long),
            (3, "s", PrimitiveType::String),
            (4, "d", PrimitiveType::Date),
            (5, "ts", PrimitiveType::Timestamp),
            (6, "tz", PrimitiveType::Timestamptz),
            (
                7,
                "m",
                PrimitiveType::Decimal {
                    precision: 10,
                    scale: 2,
                },
            ),
            (8, "f", PrimitiveType::Double),
            (9, "b", PrimitiveType::Boolean),
        ];
        Schema::builder()
            .with_fields(
                fields.into_iter().map(|(id, name, ty)| {
                    NestedField::optional(id, name, Type::Primitive(ty)).into()
                }),
            )
            .build()
            .expect("a valid schema")
    }

    /// The predicate's text, or "-" for none.
    fn convert(filters: &[Expr]) -> String {
        from_filters(filters, &schema()).map_or_else(|| "-".to_string(), |p| p.to_string())
    }

    #[test]
    fn comparisons_either_way_round() {
        assert_eq!(convert(&[col("i").gt(lit(5))]), "i > 5");
        assert_eq!(convert(&[lit(5).lt_eq(col("i"))]), "i >= 5");
        assert_eq!(convert(&[col("l").not_eq(lit(7_i64))]), "l != 7");
        assert_eq!(convert(&[col("s").eq(lit("x"))]), "s = \"x\"");
        assert_eq!(
            convert(&[col("s").eq(lit(ScalarValue::Utf8View(Some("y".into()))))]),
            "s = \"y\""
        );
        assert_eq!(convert(&[col("b")]), "b = true");
    }

    #[test]
    fn boolean_constants() {
        // `i IN (1, NULL)` after the planner: `i = 1 OR NULL`.
        let null = lit(ScalarValue::Boolean(None));
        assert_eq!(convert(&[col("i").eq(lit(1)).or(null.clone())]), "i = 1");
        assert_eq!(convert(&[null]), "FALSE");
        assert_eq!(convert(&[col("i").eq(lit(1)).or(lit(true))]), "-");
        assert_eq!(convert(&[!lit(false)]), "-");
    }

    #[test]
    fn null_tests_and_logic() {
        assert_eq!(convert(&[col("i").is_null()]), "i IS NULL");
        assert_eq!(convert(&[col("f").is_not_null()]), "f IS NOT NULL");
        assert_eq!(
            convert(&[col("i").gt(lit(1)).or(col("l").lt(lit(2_i64)))]),
            "(i > 1) OR (l < 2)"
        );
        assert_eq!(convert(&[!col("i").gt(lit(1))]), "i <= 1");
        assert_eq!(
            convert(&[!(col("i").gt(lit(1)).and(col("s").eq(lit("a"))))]),
            "(i <= 1) OR (s != \"a\")"
        );
        // Two filters are ANDed.
        assert_eq!(
            convert(&[col("i").gt(lit(1)), col("l").lt(lit(9_i64))]),
            "(i > 1) AND (l < 9)"
        );
    }

    #[test]
    fn what_cannot_be_expressed_is_left_to_datafusion() {
        let opaque = col("i").eq(col("l"));
        // Under AND the rest still prunes; under OR and NOT nothing may be left out.
        assert_eq!(convert(&[col("i").gt(lit(1)).and(opaque.clone())]), "i > 1");
        assert_eq!(convert(&[col("i").gt(lit(1)).or(opaque.clone())]), "-");
        assert_eq!(convert(&[!(col("i").gt(lit(1)).and(opaque.clone()))]), "-");
        assert_eq!(convert(&[opaque, col("s").is_null()]), "s IS NULL");
        // A wrong-type literal, a NULL literal, a value out of the column's range.
        assert_eq!(convert(&[col("i").eq(lit("abc"))]), "-");
        assert_eq!(convert(&[col("i").eq(lit(ScalarValue::Int32(None)))]), "-");
        assert_eq!(convert(&[col("i").lt(lit(5_000_000_000_i64))]), "-");
        assert_eq!(convert(&[col("s").eq(lit(3))]), "-");
        // Floating point: NaN orders differently in Arrow and in Iceberg's bounds.
        assert_eq!(convert(&[col("f").gt(lit(1.0))]), "-");
        // A column that is not the table's, a column that is not primitive.
        assert_eq!(convert(&[col("nope").eq(lit(1))]), "-");
    }

    #[test]
    fn in_lists_and_between() {
        assert_eq!(
            convert(&[col("i").in_list(vec![lit(1), lit(2)], false)]),
            "i IN (1, 2)"
        );
        assert_eq!(
            convert(&[col("i").in_list(vec![lit(1), lit(ScalarValue::Int32(None))], true)]),
            "i NOT IN (1)"
        );
        assert_eq!(
            convert(&[col("i").in_list(vec![lit(1), col("l")], false)]),
            "-"
        );
        assert_eq!(
            convert(&[col("l").between(lit(1_i64), lit(5_i64))]),
            "(l >= 1) AND (l <= 5)"
        );
        assert_eq!(
            convert(&[col("l").not_between(lit(1_i64), lit(5_i64))]),
            "(l < 1) OR (l > 5)"
        );
    }

    #[test]
    fn like_prefixes() {
        assert_eq!(
            convert(&[col("s").like(lit("ab%"))]),
            "s STARTS WITH \"ab\""
        );
        assert_eq!(
            convert(&[col("s").not_like(lit("ab%"))]),
            "s NOT STARTS WITH \"ab\""
        );
        assert_eq!(convert(&[col("s").like(lit("ab"))]), "s = \"ab\"");
        assert_eq!(convert(&[col("s").like(lit("%"))]), "s IS NOT NULL");
        assert_eq!(convert(&[col("s").like(lit("a_b%"))]), "-");
        assert_eq!(convert(&[col("s").like(lit("a%b"))]), "-");
        assert_eq!(convert(&[col("s").like(lit("a\\%%"))]), "-");
        assert_eq!(convert(&[col("s").ilike(lit("ab%"))]), "-");
    }

    #[test]
    fn literals_are_cast_to_the_column_type() {
        // A narrower or wider integer that fits, and a cast of a literal.
        assert_eq!(convert(&[col("l").eq(lit(3_i32))]), "l = 3");
        assert_eq!(convert(&[col("i").eq(lit(3_i64))]), "i = 3");
        assert_eq!(
            convert(&[col("i").eq(cast(lit("42"), DataType::Int32))]),
            "i = 42"
        );
        // A column widened by the planner compares as itself.
        assert_eq!(
            convert(&[cast(col("i"), DataType::Int64).gt(lit(7_i64))]),
            "i > 7"
        );
        assert_eq!(convert(&[cast(col("l"), DataType::Int32).gt(lit(7))]), "-");
        // Decimals are left to DataFusion (see the module doc).
        assert_eq!(
            convert(&[col("m").gt(lit(ScalarValue::Decimal128(Some(150), 10, 2)))]),
            "-"
        );
        assert_eq!(convert(&[col("m").lt(lit(2))]), "-");
    }

    #[test]
    fn dates_and_timestamps() {
        assert_eq!(
            convert(&[col("d").gt_eq(lit(ScalarValue::Date32(Some(19_000))))]),
            "d >= 2022-01-08"
        );
        let micros = 1_700_000_000_000_000_i64;
        assert_eq!(
            convert(&[col("ts").lt(lit(ScalarValue::TimestampMicrosecond(Some(micros), None)))]),
            "ts < 2023-11-14 22:13:20"
        );
        // Seconds widen to micros; a zoned literal is an instant, for the zoned column only.
        assert_eq!(
            convert(&[col("ts").lt(lit(ScalarValue::TimestampSecond(Some(1_700_000_000), None)))]),
            "ts < 2023-11-14 22:13:20"
        );
        let zoned = ScalarValue::TimestampMicrosecond(Some(micros), Some("+00:00".into()));
        assert_eq!(
            convert(&[col("tz").eq(lit(zoned.clone()))]),
            "tz = 2023-11-14 22:13:20 UTC"
        );
        assert_eq!(convert(&[col("ts").eq(lit(zoned))]), "-");
        // Nanoseconds that are not whole microseconds are left out.
        assert_eq!(
            convert(&[col("ts").eq(lit(ScalarValue::TimestampNanosecond(Some(1_001), None)))]),
            "-"
        );
    }
}

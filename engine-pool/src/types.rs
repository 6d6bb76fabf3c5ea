//! Type mapping between SQL (as the parser reads it), Iceberg and Arrow, and the Trino spelling of
//! Iceberg types that SHOW/DESCRIBE print.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Fields, TimeUnit};
use datafusion::sql::sqlparser::ast::{
    ArrayElemTypeDef, DataType as SqlType, ExactNumberInfo, StructField, TimezoneInfo,
};
use iceberg::spec::{ListType, MapType, NestedField, PrimitiveType, StructType, Type};
use sqe_sessions::{SqeError, SqeResult};

/// Hands out field ids while a schema is being built; iceberg reassigns them on table creation,
/// they only need to be unique.
#[derive(Default)]
pub struct FieldIds(i32);

impl FieldIds {
    /// Ids after `last` (a table's last column id, for a column added to it).
    pub fn after(last: i32) -> Self {
        Self(last)
    }

    pub fn fresh(&mut self) -> i32 {
        self.0 += 1;
        self.0
    }
}

fn decimal(info: &ExactNumberInfo) -> SqeResult<Type> {
    let (precision, scale) = match info {
        ExactNumberInfo::None => (38, 0),
        ExactNumberInfo::Precision(p) => (*p, 0),
        ExactNumberInfo::PrecisionAndScale(p, s) => (*p, u64::try_from(*s).unwrap_or(u64::MAX)),
    };
    if precision == 0 || precision > 38 || scale > precision {
        return Err(SqeError::invalid(format!(
            "decimal({precision}, {scale}) is not valid: precision must be 1..38 and scale at most the precision"
        )));
    }
    Ok(Type::Primitive(PrimitiveType::Decimal {
        precision: precision as u32,
        scale: scale as u32,
    }))
}

/// Deepest nesting of `row`, `array` and `map` in a column's type. A table's metadata is JSON, and
/// JSON readers stop at a depth (serde_json at 128, about 40 levels of these types): a deeper type
/// would make a table nobody can read.
pub const MAX_TYPE_DEPTH: usize = 32;

/// The Iceberg type for a column type written in CREATE TABLE / ALTER TABLE.
pub fn sql_to_iceberg(ty: &SqlType, ids: &mut FieldIds) -> SqeResult<Type> {
    let ty = iceberg_type(ty, ids)?;
    if depth(&ty) > MAX_TYPE_DEPTH {
        return Err(SqeError::invalid(format!(
            "a column's type nests row, array and map more than {MAX_TYPE_DEPTH} deep"
        )));
    }
    Ok(ty)
}

fn depth(ty: &Type) -> usize {
    match ty {
        Type::Primitive(_) => 0,
        Type::Struct(s) => {
            1 + s
                .fields()
                .iter()
                .map(|f| depth(&f.field_type))
                .max()
                .unwrap_or(0)
        }
        Type::List(l) => 1 + depth(&l.element_field.field_type),
        Type::Map(m) => 1 + depth(&m.key_field.field_type).max(depth(&m.value_field.field_type)),
    }
}

fn iceberg_type(ty: &SqlType, ids: &mut FieldIds) -> SqeResult<Type> {
    use PrimitiveType as P;
    let p = |t| Ok(Type::Primitive(t));
    match ty {
        SqlType::Boolean | SqlType::Bool => p(P::Boolean),
        // Iceberg has no narrower integers: tinyint and smallint widen to integer, as in Trino.
        SqlType::TinyInt(_)
        | SqlType::SmallInt(_)
        | SqlType::Int(_)
        | SqlType::Integer(_)
        | SqlType::Int2(_)
        | SqlType::Int4(_)
        | SqlType::Int16
        | SqlType::Int32 => p(P::Int),
        SqlType::BigInt(_) | SqlType::Int8(_) | SqlType::Int64 => p(P::Long),
        SqlType::Real | SqlType::Float4 | SqlType::Float32 => p(P::Float),
        SqlType::Float(ExactNumberInfo::Precision(n)) if *n <= 24 => p(P::Float),
        SqlType::Double(_)
        | SqlType::DoublePrecision
        | SqlType::Float8
        | SqlType::Float64
        | SqlType::Float(_) => p(P::Double),
        SqlType::Decimal(i) | SqlType::Numeric(i) | SqlType::Dec(i) => decimal(i),
        SqlType::Varchar(_)
        | SqlType::Char(_)
        | SqlType::Character(_)
        | SqlType::CharacterVarying(_)
        | SqlType::CharVarying(_)
        | SqlType::Nvarchar(_)
        | SqlType::Text
        | SqlType::String(_) => p(P::String),
        SqlType::Varbinary(_)
        | SqlType::Binary(_)
        | SqlType::Blob(_)
        | SqlType::Bytea
        | SqlType::Bytes(_) => p(P::Binary),
        SqlType::Uuid => p(P::Uuid),
        SqlType::Date => p(P::Date),
        SqlType::Time(_, _) => p(P::Time),
        SqlType::Timestamp(_, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz) => p(P::Timestamptz),
        SqlType::Timestamp(_, _) | SqlType::TimestampNtz(_) | SqlType::Datetime(_) => {
            p(P::Timestamp)
        }
        SqlType::Array(
            ArrayElemTypeDef::AngleBracket(inner)
            | ArrayElemTypeDef::SquareBracket(inner, _)
            | ArrayElemTypeDef::Parenthesis(inner),
        ) => {
            let id = ids.fresh();
            let element = iceberg_type(inner, ids)?;
            Ok(Type::List(ListType::new(Arc::new(
                NestedField::list_element(id, element, false),
            ))))
        }
        SqlType::Map(k, v) => {
            let (kid, vid) = (ids.fresh(), ids.fresh());
            let key = iceberg_type(k, ids)?;
            let value = iceberg_type(v, ids)?;
            Ok(Type::Map(MapType::new(
                Arc::new(NestedField::map_key_element(kid, key)),
                Arc::new(NestedField::map_value_element(vid, value, false)),
            )))
        }
        SqlType::Struct(fields, _) | SqlType::Tuple(fields) => struct_type(fields, ids),
        other => Err(SqeError::unsupported(format!(
            "type {other} is not supported for Iceberg tables"
        ))),
    }
}

fn struct_type(fields: &[StructField], ids: &mut FieldIds) -> SqeResult<Type> {
    let mut out = Vec::with_capacity(fields.len());
    for (i, f) in fields.iter().enumerate() {
        let name = f
            .field_name
            .as_ref()
            .map(|n| n.value.clone())
            .unwrap_or_else(|| format!("field{}", i + 1));
        let id = ids.fresh();
        let ty = iceberg_type(&f.field_type, ids)?;
        out.push(Arc::new(NestedField::optional(id, name, ty)));
    }
    Ok(Type::Struct(StructType::new(out)))
}

/// How Trino spells an Iceberg type.
pub fn trino_type_name(ty: &Type) -> String {
    match ty {
        Type::Primitive(p) => match p {
            PrimitiveType::Boolean => "boolean".into(),
            PrimitiveType::Int => "integer".into(),
            PrimitiveType::Long => "bigint".into(),
            PrimitiveType::Float => "real".into(),
            PrimitiveType::Double => "double".into(),
            PrimitiveType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            PrimitiveType::Date => "date".into(),
            PrimitiveType::Time => "time(6)".into(),
            PrimitiveType::Timestamp => "timestamp(6)".into(),
            PrimitiveType::Timestamptz => "timestamp(6) with time zone".into(),
            PrimitiveType::TimestampNs => "timestamp(9)".into(),
            PrimitiveType::TimestamptzNs => "timestamp(9) with time zone".into(),
            PrimitiveType::String => "varchar".into(),
            PrimitiveType::Uuid => "uuid".into(),
            PrimitiveType::Fixed(_) | PrimitiveType::Binary => "varbinary".into(),
        },
        Type::List(l) => format!("array({})", trino_type_name(&l.element_field.field_type)),
        Type::Map(m) => format!(
            "map({}, {})",
            trino_type_name(&m.key_field.field_type),
            trino_type_name(&m.value_field.field_type)
        ),
        Type::Struct(s) => format!(
            "row({})",
            s.fields()
                .iter()
                .map(|f| format!("{} {}", f.name, trino_type_name(&f.field_type)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The Arrow type a query result column should be cast to before it can be stored in Iceberg
/// (CREATE TABLE AS): narrow integers widen, views and large variants become plain, nanosecond
/// timestamps become microseconds (Iceberg v2 stores microseconds), a timestamp with a time zone
/// per value its instant.
pub fn storable_arrow_type(ty: &DataType) -> SqeResult<DataType> {
    use DataType as D;
    // A zone per value (functions/src/zoned.rs): Iceberg's timestamptz keeps the instant.
    if sqe_functions::zoned_unit(ty).is_some() {
        return Ok(D::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())));
    }
    Ok(match ty {
        D::Null => D::Utf8,
        D::Boolean
        | D::Int32
        | D::Int64
        | D::Float32
        | D::Float64
        | D::Date32
        | D::Utf8
        | D::Binary => ty.clone(),
        D::Int8 | D::Int16 | D::UInt8 | D::UInt16 => D::Int32,
        D::UInt32 | D::UInt64 => D::Int64,
        D::Float16 => D::Float32,
        D::Utf8View | D::LargeUtf8 => D::Utf8,
        D::BinaryView | D::LargeBinary => D::Binary,
        D::FixedSizeBinary(16) => ty.clone(),
        D::FixedSizeBinary(_) => D::Binary,
        D::Date64 => D::Date32,
        D::Decimal32(p, s) | D::Decimal64(p, s) | D::Decimal128(p, s) => D::Decimal128(*p, *s),
        D::Time32(_) | D::Time64(_) => D::Time64(TimeUnit::Microsecond),
        D::Timestamp(_, tz) => {
            D::Timestamp(TimeUnit::Microsecond, tz.as_ref().map(|_| "+00:00".into()))
        }
        D::Dictionary(_, v) => storable_arrow_type(v)?,
        D::List(f)
        | D::LargeList(f)
        | D::ListView(f)
        | D::LargeListView(f)
        | D::FixedSizeList(f, _) => D::List(Arc::new(Field::new(
            "element",
            storable_arrow_type(f.data_type())?,
            true,
        ))),
        D::Struct(fields) => D::Struct(
            fields
                .iter()
                .map(|f| {
                    Ok(Field::new(
                        f.name(),
                        storable_arrow_type(f.data_type())?,
                        true,
                    ))
                })
                .collect::<SqeResult<Fields>>()?,
        ),
        D::Map(entries, sorted) => {
            let D::Struct(kv) = entries.data_type() else {
                return Err(SqeError::unsupported(format!(
                    "type {ty} cannot be stored in an Iceberg table"
                )));
            };
            let (Some(k), Some(v)) = (kv.first(), kv.get(1)) else {
                return Err(SqeError::unsupported(format!(
                    "type {ty} cannot be stored in an Iceberg table"
                )));
            };
            D::Map(
                Arc::new(Field::new(
                    "key_value",
                    D::Struct(Fields::from(vec![
                        Field::new("key", storable_arrow_type(k.data_type())?, false),
                        Field::new("value", storable_arrow_type(v.data_type())?, true),
                    ])),
                    false,
                )),
                *sorted,
            )
        }
        other => {
            return Err(SqeError::unsupported(format!(
                "type {other} cannot be stored in an Iceberg table"
            )));
        }
    })
}

/// A type as Trino writes it (`bigint`, `decimal(10,2)`, `array(varchar)`, …), as an Iceberg type;
/// `None` when it is not a type SQE reads.
pub fn trino_text_to_iceberg(text: &str, ids: &mut FieldIds) -> Option<Type> {
    use datafusion::sql::sqlparser::ast::Statement;
    use datafusion::sql::sqlparser::parser::Parser;
    // Text from another system (a metastore): the parser recurses on nesting, so a type longer or
    // deeper than any real one is not parsed at all.
    let depth = text.chars().filter(|c| *c == '(' || *c == '<').count();
    if text.len() > 4096 || depth > 32 {
        return None;
    }
    let prepared =
        crate::statement::prepass::prepare(&format!("CREATE TABLE t (c {text})")).ok()?;
    let statements = Parser::parse_sql(
        &crate::statement::dialect::SqeDialect::default(),
        &prepared.sql,
    )
    .ok()?;
    let Some(Statement::CreateTable(table)) = statements.first() else {
        return None;
    };
    let column = table.columns.first()?;
    sql_to_iceberg(&column.data_type, ids).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trino_type_texts_read_as_iceberg_types() {
        let ids = &mut FieldIds::default();
        assert_eq!(
            trino_text_to_iceberg("bigint", ids),
            Some(Type::Primitive(PrimitiveType::Long))
        );
        assert_eq!(
            trino_text_to_iceberg("decimal(10,2)", ids),
            Some(Type::Primitive(PrimitiveType::Decimal {
                precision: 10,
                scale: 2
            }))
        );
        assert!(matches!(
            trino_text_to_iceberg("array(varchar)", ids),
            Some(Type::List(_))
        ));
        assert_eq!(trino_text_to_iceberg("no such type (", ids), None);
        let deep = format!("{}bigint{}", "array(".repeat(100_000), ")".repeat(100_000));
        assert_eq!(trino_text_to_iceberg(&deep, ids), None);
    }

    #[test]
    fn narrow_sql_integers_widen_to_iceberg_int() {
        let mut ids = FieldIds::default();
        assert_eq!(
            sql_to_iceberg(&SqlType::TinyInt(None), &mut ids).ok(),
            Some(Type::Primitive(PrimitiveType::Int))
        );
    }

    #[test]
    fn bad_decimal_is_rejected_with_its_numbers() {
        let mut ids = FieldIds::default();
        let err = sql_to_iceberg(
            &SqlType::Decimal(ExactNumberInfo::PrecisionAndScale(40, 2)),
            &mut ids,
        )
        .err()
        .map(|e| e.message().to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "decimal(40, 2) is not valid: precision must be 1..38 and scale at most the precision"
            )
        );
    }

    #[test]
    fn trino_names_nested_types() {
        let mut ids = FieldIds::default();
        let ty = sql_to_iceberg(
            &SqlType::Array(ArrayElemTypeDef::Parenthesis(Box::new(SqlType::Decimal(
                ExactNumberInfo::PrecisionAndScale(10, 2),
            )))),
            &mut ids,
        )
        .ok();
        assert_eq!(
            ty.map(|t| trino_type_name(&t)).as_deref(),
            Some("array(decimal(10,2))")
        );
    }
}

//! Trino's conversion functions (`functions/conversion`) that DataFusion lacks: `typeof`,
//! `format_number`, `parse_data_size`, and `format` (Java's Formatter, in `java_format.rs`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, StringArray};
use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::ScalarUDF;

use crate::udf::{Scalar, invalid, is_text, per_row, type_name, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        type_of(),
        format_number(),
        parse_data_size(),
        format(),
        cast_as(),
    ]
}

/// `sqe_cast_as(x, like, try)`: `x` cast to the type of `like` (from engine-pool/src/trino_sql/, for the casts to
/// types DataFusion's SQL parser does not know, as MAP(K, V)). The analyzer turns it into a cast
/// (or a read of JSON) once the types are known; evaluating it casts.
fn cast_as() -> Arc<ScalarUDF> {
    Scalar::new(
        "sqe_cast_as",
        |args| match args {
            [x, like, DataType::Boolean] => Ok(vec![x.clone(), like.clone(), DataType::Boolean]),
            _ => unexpected("CAST", args, &["T, U, boolean"]),
        },
        |args| Ok(args[1].clone()),
        |args, ty| Ok(arrow::compute::cast(&args[0], ty)?),
    )
    .udf()
}

/// `typeof(x)`: the name of `x`'s type, as Trino spells it.
fn type_of() -> Arc<ScalarUDF> {
    Scalar::new(
        "typeof",
        |args| match args {
            [_] => Ok(args.to_vec()),
            _ => unexpected("typeof", args, &["T"]),
        },
        |_| Ok(DataType::Utf8),
        |args, _| {
            let name = type_name(args[0].data_type());
            Ok(Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
                name,
                args[0].len().max(1),
            ))) as ArrayRef)
        },
    )
    .udf()
}

/// `format_number(x)`: `x` to three significant digits with a unit suffix (K, M, B, T, Q).
fn format_number() -> Arc<ScalarUDF> {
    per_row(
        "format_number",
        |args| match args {
            [t] if t.is_numeric() || t.is_null() => Ok(vec![DataType::Float64]),
            _ => unexpected("format_number", args, &["bigint", "double"]),
        },
        |_| Ok(DataType::Utf8),
        |row| {
            let ScalarValue::Float64(Some(x)) = row[0] else {
                return Ok(ScalarValue::Utf8(None));
            };
            let mut value = x;
            let mut unit = "";
            for u in ["K", "M", "B", "T", "Q"] {
                if value.abs() < 1000.0 {
                    break;
                }
                value /= 1000.0;
                unit = u;
            }
            // Three significant digits: 123K, 1.23M, 12.3B.
            let decimals = if value.abs() >= 100.0 {
                0
            } else if value.abs() >= 10.0 {
                1
            } else {
                2
            };
            let mut text = format!("{value:.decimals$}");
            if text.contains('.') {
                while text.ends_with('0') {
                    text.pop();
                }
                if text.ends_with('.') {
                    text.pop();
                }
            }
            Ok(ScalarValue::Utf8(Some(format!("{text}{unit}"))))
        },
    )
    .udf()
}

/// `parse_data_size('2.3MB')`: the bytes a size names, as DECIMAL(38, 0) (units of 1024).
fn parse_data_size() -> Arc<ScalarUDF> {
    per_row(
        "parse_data_size",
        |args| match args {
            [t] if is_text(t) => Ok(vec![DataType::Utf8]),
            _ => unexpected("parse_data_size", args, &["varchar"]),
        },
        |_| Ok(DataType::Decimal128(38, 0)),
        |row| {
            let ScalarValue::Utf8(Some(s)) = &row[0] else {
                return Ok(ScalarValue::Decimal128(None, 38, 0));
            };
            let bad = || invalid(format!("Invalid data size: '{s}'"));
            let split = s
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(s.len());
            let (number, unit) = (&s[..split], s[split..].trim());
            let power = match unit {
                "B" => 0,
                "kB" => 1,
                "MB" => 2,
                "GB" => 3,
                "TB" => 4,
                "PB" => 5,
                "EB" => 6,
                "ZB" => 7,
                "YB" => 8,
                _ => return bad(),
            };
            let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
            if whole.is_empty() || fraction.len() > 18 {
                return bad();
            }
            let Ok(digits) = format!("{whole}{fraction}").parse::<i128>() else {
                return bad();
            };
            let scaled = digits
                .checked_mul(1024i128.pow(power))
                .map(|v| v / 10i128.pow(fraction.len() as u32));
            match scaled {
                Some(v) if v < 10i128.pow(38) => Ok(ScalarValue::Decimal128(Some(v), 38, 0)),
                _ => invalid(format!("Value out of range: '{s}' ('{}')", s)),
            }
        },
    )
    .udf()
}

/// `format(format, args…)`: Java's `Formatter` over the arguments (NULL ones print `null`); NULL
/// when the format is NULL.
fn format() -> Arc<ScalarUDF> {
    Scalar::new(
        "format",
        |args| match args {
            [f, ..] if is_text(f) || f.is_null() => {
                let mut out = vec![DataType::Utf8];
                out.extend(args[1..].iter().cloned());
                Ok(out)
            }
            _ => unexpected("format", args, &["varchar", "T…"]),
        },
        |_| Ok(DataType::Utf8),
        |args, _| {
            let rows = args[0].len();
            let temporals = args[1..]
                .iter()
                .map(|a| match a.data_type() {
                    DataType::Timestamp(..) => crate::datetime::Temporal::of(a).map(Some),
                    _ => Ok(None),
                })
                .collect::<datafusion::common::Result<Vec<_>>>()?;
            let mut out = Vec::with_capacity(rows);
            for i in 0..rows {
                let Some(f) = crate::datetime::text(&args[0], i) else {
                    out.push(None);
                    continue;
                };
                let values = args[1..]
                    .iter()
                    .zip(&temporals)
                    .map(|(a, t)| java_arg(a, t.as_ref(), i))
                    .collect::<datafusion::common::Result<Vec<_>>>()?;
                match crate::java_format::format(f, &values) {
                    Ok(s) => out.push(Some(s)),
                    Err(why) => return invalid(format!("Invalid format string: {f} ({why})")),
                }
            }
            Ok(Arc::new(StringArray::from(out)) as ArrayRef)
        },
    )
    .udf()
}

/// Row `i` of `a` as Java would receive it.
fn java_arg(
    a: &ArrayRef,
    temporal: Option<&crate::datetime::Temporal>,
    i: usize,
) -> datafusion::common::Result<crate::java_format::Arg> {
    use crate::java_format::Arg;
    if a.data_type().is_null() || a.is_null(i) {
        return Ok(Arg::Null);
    }
    if let Some(t) = temporal {
        let zone = match a.data_type() {
            DataType::Timestamp(_, Some(z)) => Some(z.to_string()),
            _ => None,
        };
        return Ok(match t.get(i) {
            Some(v) => Arg::DateTime(v, zone),
            None => Arg::Null,
        });
    }
    Ok(match ScalarValue::try_from_array(a, i)? {
        ScalarValue::Boolean(Some(b)) => Arg::Bool(b),
        ScalarValue::Int8(Some(v)) => Arg::Long(v.into()),
        ScalarValue::Int16(Some(v)) => Arg::Long(v.into()),
        ScalarValue::Int32(Some(v)) => Arg::Long(v.into()),
        ScalarValue::Int64(Some(v)) => Arg::Long(v.into()),
        ScalarValue::UInt8(Some(v)) => Arg::Long(v.into()),
        ScalarValue::UInt16(Some(v)) => Arg::Long(v.into()),
        ScalarValue::UInt32(Some(v)) => Arg::Long(v.into()),
        ScalarValue::UInt64(Some(v)) => Arg::Long(v.into()),
        ScalarValue::Float32(Some(v)) => Arg::Double(v.into()),
        ScalarValue::Float64(Some(v)) => Arg::Double(v),
        ScalarValue::Decimal128(Some(v), p, s) => Arg::Decimal(
            <arrow::datatypes::Decimal128Type as arrow::datatypes::DecimalType>::format_decimal(
                v, p, s,
            ),
        ),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Arg::Text(s),
        ScalarValue::Date32(Some(d)) => match chrono::NaiveDate::from_epoch_days(d) {
            Some(d) => Arg::Date(d),
            None => Arg::Null,
        },
        _ => Arg::Text(arrow::util::display::array_value_to_string(a, i)?),
    })
}

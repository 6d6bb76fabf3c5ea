//! Trino's conversion functions (`functions/conversion`) that DataFusion lacks: `typeof`,
//! `format_number`, `parse_data_size`. (`format`, Java's Formatter, is not here yet.)

use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray};
use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::ScalarUDF;

use crate::udf::{Scalar, invalid, is_text, per_row, type_name, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![type_of(), format_number(), parse_data_size()]
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

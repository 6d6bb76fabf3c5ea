//! Trino's binary functions (`functions/binary`) between VARCHAR and VARBINARY: `to_utf8`,
//! `from_utf8`, `to_base64`, `from_base64`, `to_base64url`, `from_base64url`, `to_hex` and
//! `from_hex` of a VARBINARY (`to_hex` of an integer stays DataFusion's).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, StringArray};
use arrow::datatypes::DataType;
use base64::Engine as _;
use datafusion::common::Result;
use datafusion::logical_expr::ScalarUDF;

use crate::datetime::text;
use crate::udf::{Delegate, Scalar, invalid, is_text, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        to_binary("to_utf8", |s| Ok(s.as_bytes().to_vec())),
        to_binary("from_base64", |s| {
            decode(&base64::engine::general_purpose::STANDARD, s)
        }),
        to_binary("from_base64url", |s| {
            decode(&base64::engine::general_purpose::URL_SAFE, s)
        }),
        to_binary("from_hex", from_hex),
        from_binary("from_utf8", |b| String::from_utf8_lossy(b).into_owned()),
        from_binary("to_base64", |b| {
            base64::engine::general_purpose::STANDARD.encode(b)
        }),
        from_binary("to_base64url", |b| {
            base64::engine::general_purpose::URL_SAFE.encode(b)
        }),
        Delegate::new("to_hex", pick_to_hex, false).udf(),
    ]
}

fn is_binary(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::Null
    )
}

fn pick_to_hex(types: &[DataType]) -> Arc<ScalarUDF> {
    if types.iter().all(is_binary) {
        from_binary("to_hex", |b| b.iter().map(|x| format!("{x:02X}")).collect())
    } else {
        datafusion::functions::string::to_hex()
    }
}

fn decode(engine: &impl base64::Engine, s: &str) -> Result<Vec<u8>> {
    let trimmed = s.trim_end_matches('=');
    let padded = format!("{trimmed}{}", "=".repeat((4 - trimmed.len() % 4) % 4));
    engine
        .decode(padded)
        .or_else(|e| invalid(format!("invalid base64 '{s}': {e}")))
}

fn from_hex(s: &str) -> Result<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return invalid("invalid input length");
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(s.get(i..i + 2).unwrap_or("?"), 16)
                .or_else(|_| invalid(format!("invalid hex digit in '{s}'")))
        })
        .collect()
}

/// A function from VARCHAR to VARBINARY.
fn to_binary(name: &'static str, f: fn(&str) -> Result<Vec<u8>>) -> Arc<ScalarUDF> {
    Scalar::new(
        name,
        move |args| match args {
            [t] if is_text(t) => Ok(vec![DataType::Utf8]),
            _ => unexpected(name, args, &["varchar"]),
        },
        |_| Ok(DataType::Binary),
        move |args, _| {
            let mut out = Vec::with_capacity(args[0].len());
            for i in 0..args[0].len() {
                out.push(match text(&args[0], i) {
                    Some(s) => Some(f(s)?),
                    None => None,
                });
            }
            Ok(Arc::new(BinaryArray::from_iter(out)) as ArrayRef)
        },
    )
    .udf()
}

/// A function from VARBINARY to VARCHAR.
fn from_binary(name: &'static str, f: fn(&[u8]) -> String) -> Arc<ScalarUDF> {
    Scalar::new(
        name,
        move |args| match args {
            [t] if is_binary(t) || is_text(t) => Ok(vec![DataType::Binary]),
            _ => unexpected(name, args, &["varbinary"]),
        },
        |_| Ok(DataType::Utf8),
        move |args, _| {
            let values = args[0].as_binary::<i32>();
            let out: StringArray = (0..values.len())
                .map(|i| (!values.is_null(i)).then(|| f(values.value(i))))
                .collect();
            Ok(Arc::new(out))
        },
    )
    .udf()
}

//! Trino's bitwise functions (`functions/bitwise`): `bit_count`, `bitwise_and`, `bitwise_or`,
//! `bitwise_xor`, `bitwise_not`, and the shifts, which keep their value's integer type. The
//! aggregates `bitwise_and_agg` and `bitwise_or_agg` are DataFusion's `bit_and` and `bit_or` under
//! Trino's names (`aggregate.rs`).

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Int64Array};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int64Type};
use datafusion::common::Result;
use datafusion::logical_expr::ScalarUDF;

use crate::udf::{Scalar, invalid, is_integer, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        bit_count(),
        two("bitwise_and", |a, b| a & b),
        two("bitwise_or", |a, b| a | b),
        two("bitwise_xor", |a, b| a ^ b),
        not(),
        shift(
            "bitwise_left_shift",
            |v, n, bits| {
                if n >= bits { 0 } else { v << n }
            },
        ),
        shift("bitwise_right_shift", |v, n, bits| {
            // Logical: the value's own width of bits, shifted in zeros.
            let mask = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            if n >= bits {
                0
            } else {
                (((v as u64) & mask) >> n) as i64
            }
        }),
        shift("bitwise_right_shift_arithmetic", |v, n, bits| {
            if n >= bits {
                if v < 0 { -1 } else { 0 }
            } else {
                v >> n
            }
        }),
    ]
}

fn bigints(
    name: &'static str,
    count: usize,
) -> impl Fn(&[DataType]) -> Result<Vec<DataType>> + Send + Sync {
    move |args| {
        if args.len() == count && args.iter().all(is_integer) {
            Ok(vec![DataType::Int64; count])
        } else {
            let expected = vec!["bigint"; count].join(", ");
            unexpected(name, args, &[expected.as_str()])
        }
    }
}

fn two(name: &'static str, f: fn(i64, i64) -> i64) -> Arc<ScalarUDF> {
    Scalar::new(
        name,
        bigints(name, 2),
        |_| Ok(DataType::Int64),
        move |args, _| {
            let (a, b) = (
                args[0].as_primitive::<Int64Type>(),
                args[1].as_primitive::<Int64Type>(),
            );
            let out: Int64Array = a
                .iter()
                .zip(b.iter())
                .map(|(a, b)| Some(f(a?, b?)))
                .collect();
            Ok(Arc::new(out) as ArrayRef)
        },
    )
    .udf()
}

fn not() -> Arc<ScalarUDF> {
    Scalar::new(
        "bitwise_not",
        bigints("bitwise_not", 1),
        |_| Ok(DataType::Int64),
        |args, _| {
            let out: Int64Array = args[0]
                .as_primitive::<Int64Type>()
                .iter()
                .map(|v| v.map(|v| !v))
                .collect();
            Ok(Arc::new(out) as ArrayRef)
        },
    )
    .udf()
}

/// `bit_count(x, bits)`: the 1 bits of `x` as a `bits`-bit two's complement number.
fn bit_count() -> Arc<ScalarUDF> {
    Scalar::new("bit_count", bigints("bit_count", 2), |_| Ok(DataType::Int64), |args, _| {
        let (x, bits) = (args[0].as_primitive::<Int64Type>(), args[1].as_primitive::<Int64Type>());
        let mut out = Vec::with_capacity(x.len());
        for (x, bits) in x.iter().zip(bits.iter()) {
            let (Some(x), Some(bits)) = (x, bits) else {
                out.push(None);
                continue;
            };
            if !(2..=64).contains(&bits) {
                return invalid("Bits specified in bit_count must be between 2 and 64, got ".to_string() + &bits.to_string());
            }
            let low = if bits == 64 { x } else { x & ((1i64 << bits) - 1) };
            let (min, max) = if bits == 64 { (i64::MIN, i64::MAX) } else { (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1) };
            if x < min || x > max {
                return invalid(format!("Number must be representable with the bits specified. {x} cannot be represented with {bits} bits"));
            }
            out.push(Some(i64::from(low.count_ones() as u8)));
        }
        Ok(Arc::new(Int64Array::from(out)) as ArrayRef)
    })
    .udf()
}

fn width(t: &DataType) -> u32 {
    match t {
        DataType::Int8 | DataType::UInt8 => 8,
        DataType::Int16 | DataType::UInt16 => 16,
        DataType::Int32 | DataType::UInt32 => 32,
        _ => 64,
    }
}

/// A shift of a value of its own integer type (`shifted(value, by, bits)` on the value widened
/// to 64 bits).
fn shift(name: &'static str, shifted: fn(i64, u32, u32) -> i64) -> Arc<ScalarUDF> {
    Scalar::new(
        name,
        move |args| match args {
            [v, n] if is_integer(v) && is_integer(n) => {
                let v = match v {
                    DataType::Int8 | DataType::Int16 | DataType::Int32 => v.clone(),
                    _ => DataType::Int64,
                };
                Ok(vec![v, DataType::Int64])
            }
            _ => unexpected(name, args, &["T, bigint"]),
        },
        |args| Ok(args[0].clone()),
        move |args, ty| {
            let bits = width(ty);
            let values = cast(&args[0], &DataType::Int64)?;
            let values = values.as_primitive::<Int64Type>();
            let by = args[1].as_primitive::<Int64Type>();
            let mut out = Vec::with_capacity(values.len());
            for (v, n) in values.iter().zip(by.iter()) {
                let (Some(v), Some(n)) = (v, n) else {
                    out.push(None);
                    continue;
                };
                if n < 0 {
                    return invalid(format!("Specified shift must be positive: {n}"));
                }
                let r = shifted(v, n.min(64) as u32, bits);
                // Back to the value's width, as two's complement wraps it.
                out.push(Some(match bits {
                    8 => i64::from(r as i8),
                    16 => i64::from(r as i16),
                    32 => i64::from(r as i32),
                    _ => r,
                }));
            }
            let out: ArrayRef = Arc::new(Int64Array::from(out));
            Ok(cast(&out, ty)?)
        },
    )
    .udf()
}

//! Trino's mathematical functions (`functions/math`) that DataFusion lacks or names otherwise:
//! `e`, `infinity`, `nan`, `is_finite`, `is_infinite`, `is_nan`, `ceiling`, `truncate`,
//! `width_bucket`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array};
use arrow::datatypes::{DataType, Float64Type};
use datafusion::common::Result;
use datafusion::logical_expr::ScalarUDF;

use crate::udf::{Delegate, Scalar, invalid, is_integer, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        constant("e", std::f64::consts::E),
        constant("infinity", f64::INFINITY),
        constant("nan", f64::NAN),
        test("is_finite", f64::is_finite),
        test("is_infinite", f64::is_infinite),
        test("is_nan", f64::is_nan),
        Delegate::new(
            "ceiling",
            |_: &[DataType]| datafusion::functions::math::ceil(),
            false,
        )
        .udf(),
        Delegate::new(
            "truncate",
            |_: &[DataType]| datafusion::functions::math::trunc(),
            false,
        )
        .udf(),
        width_bucket(),
    ]
}

fn constant(name: &'static str, value: f64) -> Arc<ScalarUDF> {
    Scalar::new(
        name,
        move |args| match args {
            [] => Ok(vec![]),
            _ => unexpected(name, args, &[""]),
        },
        |_| Ok(DataType::Float64),
        move |_, _| Ok(Arc::new(Float64Array::from(vec![value])) as ArrayRef),
    )
    .udf()
}

fn double(name: &'static str) -> impl Fn(&[DataType]) -> Result<Vec<DataType>> + Send + Sync {
    move |args| match args {
        [t] if t.is_numeric() || t.is_null() => Ok(vec![DataType::Float64]),
        _ => unexpected(name, args, &["double"]),
    }
}

fn test(name: &'static str, f: fn(f64) -> bool) -> Arc<ScalarUDF> {
    Scalar::new(
        name,
        double(name),
        |_| Ok(DataType::Boolean),
        move |args, _| {
            let values = args[0].as_primitive::<Float64Type>();
            let out: BooleanArray = values.iter().map(|v| v.map(f)).collect();
            Ok(Arc::new(out))
        },
    )
    .udf()
}

/// `width_bucket(x, bound1, bound2, n)`: the bucket of `x` among `n` equal buckets from `bound1`
/// to `bound2` (0 below, n + 1 above).
fn width_bucket() -> Arc<ScalarUDF> {
    const EXPECTED: &[&str] = &["double, double, double, bigint"];
    Scalar::new(
        "width_bucket",
        |args| match args {
            [x, a, b, n]
                if [x, a, b].iter().all(|t| t.is_numeric() || t.is_null()) && is_integer(n) =>
            {
                Ok(vec![
                    DataType::Float64,
                    DataType::Float64,
                    DataType::Float64,
                    DataType::Int64,
                ])
            }
            _ => unexpected("width_bucket", args, EXPECTED),
        },
        |_| Ok(DataType::Int64),
        |args, _| {
            let [x, lo, hi] = [0, 1, 2].map(|i| args[i].as_primitive::<Float64Type>());
            let n = args[3].as_primitive::<arrow::datatypes::Int64Type>();
            let mut out = Vec::with_capacity(x.len());
            for i in 0..x.len() {
                if x.is_null(i) || lo.is_null(i) || hi.is_null(i) || n.is_null(i) {
                    out.push(None);
                    continue;
                }
                let (v, a, b, count) = (x.value(i), lo.value(i), hi.value(i), n.value(i));
                if count <= 0 {
                    return invalid("bucketCount must be greater than 0");
                }
                if a == b || !a.is_finite() || !b.is_finite() {
                    return invalid("bounds cannot equal each other and must be finite");
                }
                if v.is_nan() {
                    return invalid("operand must not be NaN");
                }
                let (low, high, value) = if a < b { (a, b, v) } else { (b, a, -v + a + b) };
                let bucket = if value < low {
                    0
                } else if value >= high {
                    count + 1
                } else {
                    ((value - low) / (high - low) * count as f64) as i64 + 1
                };
                out.push(Some(bucket));
            }
            Ok(Arc::new(Int64Array::from(out)))
        },
    )
    .udf()
}

//! Trino's mathematical functions (`functions/math`) that DataFusion lacks or names otherwise:
//! `e`, `infinity`, `nan`, `is_finite`, `is_infinite`, `is_nan`, `ceiling`, `truncate`,
//! `width_bucket`, `sign`, the normal and beta distributions (`normal_cdf`, `inverse_normal_cdf`,
//! `beta_cdf`, `inverse_beta_cdf`), the Wilson interval, `from_base`/`to_base`, `cosine_similarity`;
//! and `abs`, DataFusion's with Trino's error for an integer's minimum (the operators are in
//! arithmetic.rs).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array};
use arrow::datatypes::{DataType, Float64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

use crate::udf::{Delegate, Scalar, invalid, is_integer, is_text, per_row, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        Arc::new(ScalarUDF::new_from_impl(Abs(
            datafusion::functions::math::abs().as_ref().clone(),
        ))),
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
        sign(),
        three("normal_cdf", |mean, sd, v| {
            if sd <= 0.0 {
                return invalid("standardDeviation must be > 0");
            }
            Ok(0.5 * (1.0 + libm::erf((v - mean) / (sd * std::f64::consts::SQRT_2))))
        }),
        three("inverse_normal_cdf", |mean, sd, p| {
            if sd <= 0.0 {
                return invalid("sd must be > 0");
            }
            if !(p > 0.0 && p < 1.0) {
                return invalid("p must be 0 > p > 1");
            }
            Ok(mean + sd * standard_normal_quantile(p))
        }),
        three("beta_cdf", |a, b, v| {
            if a <= 0.0 || b <= 0.0 {
                return invalid("a, b must be > 0");
            }
            if !(0.0..=1.0).contains(&v) {
                return invalid("value must be in the interval [0, 1]");
            }
            Ok(regularized_beta(v, a, b))
        }),
        three("inverse_beta_cdf", |a, b, p| {
            if a <= 0.0 || b <= 0.0 {
                return invalid("a, b must be > 0");
            }
            if !(0.0..=1.0).contains(&p) {
                return invalid("p must be in the interval [0, 1]");
            }
            Ok(inverse_beta(a, b, p))
        }),
        wilson("wilson_interval_lower", -1.0),
        wilson("wilson_interval_upper", 1.0),
        from_base(),
        to_base(),
        cosine_similarity(),
    ]
}

/// `abs(x)`: DataFusion's, except that an integer's minimum, which has no absolute value of its
/// type, fails in Trino's words ("Value -128 is out of range for abs(tinyint)"), where DataFusion's
/// names its Arrow array ("Int8Array overflow on abs(-128)").
#[derive(Debug, PartialEq, Eq, Hash)]
struct Abs(ScalarUDF);

impl ScalarUDFImpl for Abs {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn aliases(&self) -> &[String] {
        self.0.aliases()
    }

    fn signature(&self) -> &Signature {
        self.0.signature()
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        self.0.coerce_types(args)
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        self.0.return_type(args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [x] = args.args.as_slice() else {
            return self.0.invoke_with_args(args);
        };
        let array = match x {
            ColumnarValue::Array(a) => Arc::clone(a),
            ColumnarValue::Scalar(s) => s.to_array_of_size(1)?,
        };
        match crate::arithmetic::integer_abs(&array) {
            Some(out) => {
                let out = out?;
                Ok(match x {
                    ColumnarValue::Scalar(_) => {
                        ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
                    }
                    ColumnarValue::Array(_) => ColumnarValue::Array(out),
                })
            }
            None => self.0.invoke_with_args(args),
        }
    }

    fn output_ordering(&self, inputs: &[ExprProperties]) -> Result<SortProperties> {
        self.0.output_ordering(inputs)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.0.documentation()
    }
}

/// `sign(x)`: -1, 0 or 1 of the argument's type (NaN and -0 of a double stay as they are).
fn sign() -> Arc<ScalarUDF> {
    Scalar::new(
        "sign",
        |args| match args {
            [t] if t.is_numeric() => Ok(vec![match t {
                DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => t.clone(),
                DataType::Float32 | DataType::Decimal128(..) => t.clone(),
                DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
                    DataType::Int64
                }
                _ => DataType::Float64,
            }]),
            [DataType::Null] => Ok(vec![DataType::Int64]),
            _ => unexpected("sign", args, &["bigint", "double", "decimal(p,s)"]),
        },
        |args| {
            Ok(match &args[0] {
                DataType::Decimal128(p, _) => DataType::Decimal128(*p, 0),
                t => t.clone(),
            })
        },
        |args, ty| {
            use arrow::datatypes::{
                Decimal128Type, Float32Type, Int8Type, Int16Type, Int32Type, Int64Type,
            };
            let a = &args[0];
            let out: ArrayRef = match a.data_type() {
                DataType::Int8 => Arc::new(
                    a.as_primitive::<Int8Type>()
                        .unary::<_, Int8Type>(i8::signum),
                ),
                DataType::Int16 => Arc::new(
                    a.as_primitive::<Int16Type>()
                        .unary::<_, Int16Type>(i16::signum),
                ),
                DataType::Int32 => Arc::new(
                    a.as_primitive::<Int32Type>()
                        .unary::<_, Int32Type>(i32::signum),
                ),
                DataType::Int64 => Arc::new(
                    a.as_primitive::<Int64Type>()
                        .unary::<_, Int64Type>(i64::signum),
                ),
                DataType::Float32 => Arc::new(
                    a.as_primitive::<Float32Type>()
                        .unary::<_, Float32Type>(|v| {
                            if v == 0.0 || v.is_nan() {
                                v
                            } else {
                                v.signum()
                            }
                        }),
                ),
                DataType::Decimal128(..) => Arc::new(
                    a.as_primitive::<Decimal128Type>()
                        .unary::<_, Decimal128Type>(i128::signum)
                        .with_data_type(ty.clone()),
                ),
                _ => Arc::new(
                    a.as_primitive::<Float64Type>()
                        .unary::<_, Float64Type>(|v| {
                            if v == 0.0 || v.is_nan() {
                                v
                            } else {
                                v.signum()
                            }
                        }),
                ),
            };
            Ok(out)
        },
    )
    .udf()
}

/// A function of three doubles.
fn three(name: &'static str, f: fn(f64, f64, f64) -> Result<f64>) -> Arc<ScalarUDF> {
    Scalar::new(
        name,
        move |args| match args {
            [_, _, _] if args.iter().all(|t| t.is_numeric() || t.is_null()) => {
                Ok(vec![DataType::Float64; 3])
            }
            _ => unexpected(name, args, &["double, double, double"]),
        },
        |_| Ok(DataType::Float64),
        move |args, _| {
            let [a, b, c] = [0, 1, 2].map(|i| args[i].as_primitive::<Float64Type>());
            let mut out = Vec::with_capacity(a.len());
            for i in 0..a.len() {
                if a.is_null(i) || b.is_null(i) || c.is_null(i) {
                    out.push(None);
                } else {
                    out.push(Some(f(a.value(i), b.value(i), c.value(i))?));
                }
            }
            Ok(Arc::new(Float64Array::from(out)) as ArrayRef)
        },
    )
    .udf()
}

/// The standard normal distribution's quantile: Acklam's rational approximation, then one step
/// of Halley's method on the exact CDF (erf) for full double precision.
fn standard_normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let low = 0.02425;
    let x = if p < low {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - low {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    let e = 0.5 * libm::erfc(-x / std::f64::consts::SQRT_2) - p;
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (x * x / 2.0).exp();
    x - u / (1.0 + x * u / 2.0)
}

/// The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz).
fn regularized_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (libm::lgamma(a + b) - libm::lgamma(a) - libm::lgamma(b) + a * x.ln() + b * (1.0 - x).ln())
            .exp();
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - regularized_beta(1.0 - x, b, a);
    }
    let tiny = 1e-300;
    let (mut c, mut d) = (1.0, 1.0 - (a + b) * x / (a + 1.0));
    if d.abs() < tiny {
        d = tiny;
    }
    d = 1.0 / d;
    let mut f = d;
    for m in 1..10_000 {
        let m = f64::from(m);
        for step in 0..2 {
            let num = if step == 0 {
                m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m))
            } else {
                -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0))
            };
            d = 1.0 + num * d;
            if d.abs() < tiny {
                d = tiny;
            }
            c = 1.0 + num / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            f *= c * d;
        }
        if (c * d - 1.0).abs() < 1e-16 {
            break;
        }
    }
    front * f / a
}

/// The `x` at which I_x(a, b) = p, by bisection.
fn inverse_beta(a: f64, b: f64, p: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if mid <= lo || mid >= hi {
            break;
        }
        if regularized_beta(mid, a, b) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// The Wilson score interval's bound for `successes` of `trials` at z-score `z` (`side` -1 for
/// the lower one).
fn wilson(name: &'static str, side: f64) -> Arc<ScalarUDF> {
    Scalar::new(
        name,
        move |args| match args {
            [s, n, z] if is_integer(s) && is_integer(n) && (z.is_numeric() || z.is_null()) => {
                Ok(vec![DataType::Int64, DataType::Int64, DataType::Float64])
            }
            _ => unexpected(name, args, &["bigint, bigint, double"]),
        },
        |_| Ok(DataType::Float64),
        move |args, _| {
            let s = args[0].as_primitive::<arrow::datatypes::Int64Type>();
            let n = args[1].as_primitive::<arrow::datatypes::Int64Type>();
            let z = args[2].as_primitive::<Float64Type>();
            let mut out = Vec::with_capacity(s.len());
            for i in 0..s.len() {
                if s.is_null(i) || n.is_null(i) || z.is_null(i) {
                    out.push(None);
                    continue;
                }
                let (s, n, z) = (s.value(i), n.value(i), z.value(i));
                if s < 0 {
                    return invalid("number of successes must not be negative");
                }
                if n <= 0 {
                    return invalid("number of trials must be positive");
                }
                if s > n {
                    return invalid("number of successes must not be larger than number of trials");
                }
                if z < 0.0 {
                    return invalid("z-score must not be negative");
                }
                let (s, n) = (s as f64, n as f64);
                let p = s / n;
                let z2 = z * z;
                let centre = p + z2 / (2.0 * n);
                let spread = z * ((p * (1.0 - p) + z2 / (4.0 * n)) / n).sqrt();
                out.push(Some((centre + side * spread) / (1.0 + z2 / n)));
            }
            Ok(Arc::new(Float64Array::from(out)) as ArrayRef)
        },
    )
    .udf()
}

fn check_radix(radix: i64) -> Result<u32> {
    if (2..=36).contains(&radix) {
        Ok(radix as u32)
    } else {
        invalid(format!("Radix must be between 2 and 36: {radix}"))
    }
}

/// `from_base(string, radix)`: the BIGINT the digits spell.
fn from_base() -> Arc<ScalarUDF> {
    per_row(
        "from_base",
        |args| match args {
            [s, r] if is_text(s) && is_integer(r) => Ok(vec![DataType::Utf8, DataType::Int64]),
            _ => unexpected("from_base", args, &["varchar, bigint"]),
        },
        |_| Ok(DataType::Int64),
        |row| {
            let (ScalarValue::Utf8(Some(s)), ScalarValue::Int64(Some(r))) = (&row[0], &row[1])
            else {
                return Ok(ScalarValue::Int64(None));
            };
            let radix = check_radix(*r)?;
            match i64::from_str_radix(s, radix) {
                Ok(v) => Ok(ScalarValue::Int64(Some(v))),
                Err(_) => invalid(format!("Not a valid base-{radix} number: {s}")),
            }
        },
    )
    .udf()
}

/// `to_base(x, radix)`: the digits of `x` in base `radix` (lower-case letters).
fn to_base() -> Arc<ScalarUDF> {
    per_row(
        "to_base",
        |args| match args {
            [x, r] if is_integer(x) && is_integer(r) => Ok(vec![DataType::Int64, DataType::Int64]),
            _ => unexpected("to_base", args, &["bigint, bigint"]),
        },
        |_| Ok(DataType::Utf8),
        |row| {
            let (ScalarValue::Int64(Some(x)), ScalarValue::Int64(Some(r))) = (&row[0], &row[1])
            else {
                return Ok(ScalarValue::Utf8(None));
            };
            let radix = u128::from(check_radix(*r)?);
            let mut n = i128::from(*x).unsigned_abs();
            let mut digits = Vec::new();
            loop {
                digits.push(std::char::from_digit((n % radix) as u32, radix as u32).unwrap_or('?'));
                n /= radix;
                if n == 0 {
                    break;
                }
            }
            if *x < 0 {
                digits.push('-');
            }
            Ok(ScalarValue::Utf8(Some(digits.into_iter().rev().collect())))
        },
    )
    .udf()
}

/// `cosine_similarity` of two dense vectors (arrays of doubles) or two sparse ones (maps from
/// varchar to double).
fn cosine_similarity() -> Arc<ScalarUDF> {
    let dense = DataType::new_list(DataType::Float64, true);
    per_row(
        "cosine_similarity",
        move |args| match args {
            [DataType::Map(..), DataType::Map(..)] => Ok(args.to_vec()),
            [a, b]
                if [a, b].iter().all(|t| {
                    matches!(
                        t,
                        DataType::List(_)
                            | DataType::LargeList(_)
                            | DataType::FixedSizeList(..)
                            | DataType::Null
                    )
                }) =>
            {
                Ok(vec![dense.clone(), dense.clone()])
            }
            _ => unexpected(
                "cosine_similarity",
                args,
                &[
                    "array(double), array(double)",
                    "map(varchar, double), map(varchar, double)",
                ],
            ),
        },
        |_| Ok(DataType::Float64),
        |row| {
            let (a, b) = (vector(&row[0])?, vector(&row[1])?);
            let (pairs, na, nb): (f64, f64, f64) = match (&row[0], &row[1]) {
                (ScalarValue::Map(_), _) => {
                    let dot = a
                        .iter()
                        .map(|(k, x)| b.iter().find(|(j, _)| j == k).map_or(0.0, |(_, y)| x * y))
                        .sum();
                    (
                        dot,
                        a.iter().map(|(_, x)| x * x).sum(),
                        b.iter().map(|(_, y)| y * y).sum(),
                    )
                }
                _ => {
                    if a.len() != b.len() {
                        return invalid("Array lengths must match");
                    }
                    let dot = a.iter().zip(b.iter()).map(|((_, x), (_, y))| x * y).sum();
                    (
                        dot,
                        a.iter().map(|(_, x)| x * x).sum(),
                        b.iter().map(|(_, y)| y * y).sum(),
                    )
                }
            };
            Ok(ScalarValue::Float64(
                (na > 0.0 && nb > 0.0).then(|| pairs / (na.sqrt() * nb.sqrt())),
            ))
        },
    )
    .udf()
}

/// A vector's entries: (key, value) of a map, (position, value) of an array. A NULL element is
/// an error, as in Trino.
fn vector(v: &ScalarValue) -> Result<Vec<(String, f64)>> {
    let mut out = Vec::new();
    match v {
        ScalarValue::Map(m) => {
            let entries = m.value(0);
            let keys = arrow::compute::cast(entries.column(0), &DataType::Utf8)?;
            let values = arrow::compute::cast(entries.column(1), &DataType::Float64)?;
            let (keys, values) = (
                keys.as_string::<i32>(),
                values.as_primitive::<Float64Type>(),
            );
            for i in 0..keys.len() {
                if values.is_null(i) {
                    return invalid("Map must not contain null values");
                }
                out.push((keys.value(i).to_string(), values.value(i)));
            }
        }
        ScalarValue::List(l) => {
            let values = l.value(0);
            let values = arrow::compute::cast(&values, &DataType::Float64)?;
            let values = values.as_primitive::<Float64Type>();
            for i in 0..values.len() {
                if values.is_null(i) {
                    return invalid("Vectors must not contain null values");
                }
                out.push((i.to_string(), values.value(i)));
            }
        }
        _ => {}
    }
    Ok(out)
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

#[cfg(test)]
mod tests {
    use arrow::array::{Float64Array, Int8Array};
    use arrow::datatypes::Field;
    use datafusion::config::ConfigOptions;

    use super::*;

    fn abs(x: ColumnarValue) -> Result<ColumnarValue> {
        let f = functions()
            .into_iter()
            .find(|f| f.name() == "abs")
            .unwrap_or_else(|| panic!("no abs"));
        let t = x.data_type();
        f.invoke_with_args(ScalarFunctionArgs {
            args: vec![x],
            arg_fields: vec![Arc::new(Field::new("x", t.clone(), true))],
            number_rows: 2,
            return_field: Arc::new(Field::new("abs", t, true)),
            config_options: Arc::new(ConfigOptions::default()),
        })
    }

    #[test]
    fn abs_fails_on_an_integers_minimum_in_trinos_words() {
        let minimum = ColumnarValue::Array(Arc::new(Int8Array::from(vec![Some(-5), Some(-128)])));
        assert_eq!(
            abs(minimum).map(|_| ()).map_err(|e| e.to_string()),
            Err("Execution error: Value -128 is out of range for abs(tinyint)".to_string())
        );
        let scalar = abs(ColumnarValue::Scalar(ScalarValue::Int64(Some(-7))));
        assert!(matches!(
            scalar,
            Ok(ColumnarValue::Scalar(ScalarValue::Int64(Some(7))))
        ));
        // Not an integer: DataFusion's.
        let doubles = ColumnarValue::Array(Arc::new(Float64Array::from(vec![-1.5, 2.0])));
        let out = abs(doubles)
            .and_then(|v| v.into_array(2))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            out.as_primitive::<Float64Type>().values().as_ref(),
            &[1.5, 2.0]
        );
    }
}

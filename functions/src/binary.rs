//! Trino's binary functions (`functions/binary`) between VARCHAR and VARBINARY: `to_utf8`,
//! `from_utf8`, `to_base64`, `from_base64`, `to_base64url`, `from_base64url`, `to_hex` and
//! `from_hex` of a VARBINARY (`to_hex` of an integer stays DataFusion's); the hashes (`md5`, `sha1`,
//! `sha256`, `sha512` as VARBINARY, `xxhash64`, `murmur3`, `spooky_hash_v2_32/64`, `crc32`,
//! `hmac_*`), base32, and the big-endian and IEEE 754 encodings.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, StringArray};
use arrow::datatypes::DataType;
use base64::Engine as _;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::ScalarUDF;

use crate::datetime::text;
use crate::udf::{Delegate, Scalar, invalid, is_binary, is_text, per_row, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        // `length` of a varbinary counts its bytes (DataFusion's would read it as text).
        Delegate::new("length", pick_length, false)
            .alias("char_length")
            .alias("character_length")
            .udf(),
        to_binary("to_utf8", |s| Ok(s.as_bytes().to_vec())),
        to_binary("from_base64", |s| {
            decode(&lenient(base64::alphabet::STANDARD), s)
        }),
        to_binary("from_base64url", |s| {
            decode(&lenient(base64::alphabet::URL_SAFE), s)
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
        hash("md5", |b| {
            use md5::Digest;
            md5::Md5::digest(b).to_vec()
        }),
        hash("sha1", |b| {
            use sha1::Digest;
            sha1::Sha1::digest(b).to_vec()
        }),
        hash("sha256", |b| {
            use sha2::Digest;
            sha2::Sha256::digest(b).to_vec()
        }),
        hash("sha512", |b| {
            use sha2::Digest;
            sha2::Sha512::digest(b).to_vec()
        }),
        hash("xxhash64", |b| {
            twox_hash::XxHash64::oneshot(0, b).to_be_bytes().to_vec()
        }),
        hash("murmur3", |b| {
            let mut reader = b;
            // Reading from a slice cannot fail.
            let h = murmur3::murmur3_x64_128(&mut reader, 0).unwrap_or_default();
            h.to_le_bytes().to_vec()
        }),
        hash("spooky_hash_v2_32", |b| {
            (crate::spooky::hash64(b, 0) as u32).to_be_bytes().to_vec()
        }),
        hash("spooky_hash_v2_64", |b| {
            crate::spooky::hash64(b, 0).to_be_bytes().to_vec()
        }),
        hmac_fn("hmac_md5", mac::<hmac::Hmac<md5::Md5>>),
        hmac_fn("hmac_sha1", mac::<hmac::Hmac<sha1::Sha1>>),
        hmac_fn("hmac_sha256", mac::<hmac::Hmac<sha2::Sha256>>),
        hmac_fn("hmac_sha512", mac::<hmac::Hmac<sha2::Sha512>>),
        crc32(),
        to_binary("from_base32", from_base32),
        from_binary("to_base32", to_base32),
        from_bytes("from_big_endian_32", DataType::Int32, 4, |b| {
            ScalarValue::Int32(Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]])))
        }),
        from_bytes("from_big_endian_64", DataType::Int64, 8, |b| {
            ScalarValue::Int64(Some(i64::from_be_bytes(eight(b))))
        }),
        from_bytes("from_ieee754_32", DataType::Float32, 4, |b| {
            ScalarValue::Float32(Some(f32::from_be_bytes([b[0], b[1], b[2], b[3]])))
        }),
        from_bytes("from_ieee754_64", DataType::Float64, 8, |b| {
            ScalarValue::Float64(Some(f64::from_be_bytes(eight(b))))
        }),
        to_bytes("to_big_endian_32", DataType::Int32, |v| match v {
            ScalarValue::Int32(Some(v)) => v.to_be_bytes().to_vec(),
            _ => Vec::new(),
        }),
        to_bytes("to_big_endian_64", DataType::Int64, |v| match v {
            ScalarValue::Int64(Some(v)) => v.to_be_bytes().to_vec(),
            _ => Vec::new(),
        }),
        to_bytes("to_ieee754_32", DataType::Float32, |v| match v {
            ScalarValue::Float32(Some(v)) => v.to_be_bytes().to_vec(),
            _ => Vec::new(),
        }),
        to_bytes("to_ieee754_64", DataType::Float64, |v| match v {
            ScalarValue::Float64(Some(v)) => v.to_be_bytes().to_vec(),
            _ => Vec::new(),
        }),
    ]
}

fn eight(b: &[u8]) -> [u8; 8] {
    let mut out = [0u8; 8];
    out.copy_from_slice(&b[..8]);
    out
}

/// The bytes of a varbinary, as a bigint.
fn byte_length() -> Arc<ScalarUDF> {
    Scalar::new(
        "length",
        |args| match args {
            [t] if is_binary(t) => Ok(vec![DataType::Binary]),
            _ => unexpected("length", args, &["varbinary"]),
        },
        |_| Ok(DataType::Int64),
        |args, _| {
            let bytes = args[0].as_binary::<i32>();
            let out: arrow::array::Int64Array =
                bytes.iter().map(|b| b.map(|b| b.len() as i64)).collect();
            Ok(Arc::new(out) as ArrayRef)
        },
    )
    .udf()
}

fn pick_length(types: &[DataType]) -> Arc<ScalarUDF> {
    match types.first() {
        Some(t) if is_binary(t) => byte_length(),
        _ => datafusion::functions::unicode::character_length(),
    }
}

/// A hash of a VARBINARY (a VARCHAR's UTF-8 bytes too), as VARBINARY.
fn hash(name: &'static str, f: fn(&[u8]) -> Vec<u8>) -> Arc<ScalarUDF> {
    per_row(
        name,
        move |args| match args {
            [t] if is_binary(t) || is_text(t) => Ok(vec![DataType::Binary]),
            _ => unexpected(name, args, &["varbinary"]),
        },
        |_| Ok(DataType::Binary),
        move |row| Ok(ScalarValue::Binary(Some(f(bytes(&row[0]))))),
    )
    .udf()
}

fn bytes(v: &ScalarValue) -> &[u8] {
    match v {
        ScalarValue::Binary(Some(b)) => b,
        _ => &[],
    }
}

fn mac<M: hmac::Mac + hmac::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes keys of any length.
    let Ok(mut m) = <M as hmac::KeyInit>::new_from_slice(key) else {
        return Vec::new();
    };
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// `hmac_…(binary, key)`.
fn hmac_fn(name: &'static str, f: fn(&[u8], &[u8]) -> Vec<u8>) -> Arc<ScalarUDF> {
    per_row(
        name,
        move |args| match args {
            [a, b] if (is_binary(a) || is_text(a)) && (is_binary(b) || is_text(b)) => {
                Ok(vec![DataType::Binary, DataType::Binary])
            }
            _ => unexpected(name, args, &["varbinary, varbinary"]),
        },
        |_| Ok(DataType::Binary),
        move |row| Ok(ScalarValue::Binary(Some(f(bytes(&row[1]), bytes(&row[0]))))),
    )
    .udf()
}

fn crc32() -> Arc<ScalarUDF> {
    per_row(
        "crc32",
        |args| match args {
            [t] if is_binary(t) || is_text(t) => Ok(vec![DataType::Binary]),
            _ => unexpected("crc32", args, &["varbinary"]),
        },
        |_| Ok(DataType::Int64),
        |row| {
            Ok(ScalarValue::Int64(Some(i64::from(crc32fast::hash(bytes(
                &row[0],
            ))))))
        },
    )
    .udf()
}

/// A number decoded from exactly `size` big-endian bytes.
fn from_bytes(
    name: &'static str,
    ty: DataType,
    size: usize,
    f: fn(&[u8]) -> ScalarValue,
) -> Arc<ScalarUDF> {
    let out = ty.clone();
    per_row(
        name,
        move |args| match args {
            [t] if is_binary(t) => Ok(vec![DataType::Binary]),
            _ => unexpected(name, args, &["varbinary"]),
        },
        move |_| Ok(out.clone()),
        move |row| {
            let b = bytes(&row[0]);
            if b.len() != size {
                return invalid(format!("input size must be exactly {size} bytes"));
            }
            Ok(f(b))
        },
    )
    .udf()
}

/// A number encoded as big-endian bytes.
fn to_bytes(name: &'static str, ty: DataType, f: fn(&ScalarValue) -> Vec<u8>) -> Arc<ScalarUDF> {
    let expected = crate::udf::type_name(&ty);
    per_row(
        name,
        move |args| match args {
            [t] if t.is_numeric() || t.is_null() => Ok(vec![ty.clone()]),
            _ => unexpected(name, args, &[expected.as_str()]),
        },
        |_| Ok(DataType::Binary),
        move |row| Ok(ScalarValue::Binary(Some(f(&row[0])))),
    )
    .udf()
}

const BASE32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// RFC 4648 base32, padded with `=`.
fn to_base32(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len().div_ceil(5) * 8);
    for chunk in b.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let n = buf.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x));
        let chars = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < chars {
                out.push(char::from(BASE32[((n >> (35 - 5 * i)) & 31) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn from_base32(s: &str) -> Result<Vec<u8>> {
    let trimmed = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(trimmed.len() * 5 / 8);
    let (mut acc, mut bits) = (0u64, 0u32);
    for c in trimmed.chars() {
        let Some(v) = BASE32
            .iter()
            .position(|x| char::from(*x) == c.to_ascii_uppercase())
        else {
            return invalid(format!("invalid base32 '{s}'"));
        };
        acc = (acc << 5) | v as u64;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

fn pick_to_hex(types: &[DataType]) -> Arc<ScalarUDF> {
    if types.iter().all(is_binary) {
        from_binary("to_hex", |b| b.iter().map(|x| format!("{x:02X}")).collect())
    } else {
        datafusion::functions::string::to_hex()
    }
}

/// A decoder that, as Java's, ignores the unused bits of the last character.
fn lenient(alphabet: base64::alphabet::Alphabet) -> base64::engine::GeneralPurpose {
    base64::engine::GeneralPurpose::new(
        &alphabet,
        base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    )
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

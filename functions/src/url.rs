//! Trino's URL functions (`functions/url`): `url_extract_*` (NULL for text that is not a URL),
//! `url_encode`, `url_decode`. URLs are parsed by the `url` crate (WHATWG), whose host is
//! lower-cased and whose empty path is `/` where Java's URI keeps them as written.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, StringArray};
use arrow::datatypes::DataType;
use datafusion::logical_expr::ScalarUDF;
use url::Url;

use crate::datetime::text;
use crate::udf::{Scalar, is_text, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        part("url_extract_fragment", |u| u.fragment().map(str::to_string)),
        part("url_extract_host", |u| u.host_str().map(str::to_string)),
        part("url_extract_path", |u| Some(u.path().to_string())),
        part("url_extract_protocol", |u| Some(u.scheme().to_string())),
        part("url_extract_query", |u| u.query().map(str::to_string)),
        port(),
        parameter(),
        text_to_text("url_encode", |s| Some(encode(s))),
        text_to_text("url_decode", decode),
    ]
}

fn texts(
    name: &'static str,
    n: usize,
) -> impl Fn(&[DataType]) -> datafusion::common::Result<Vec<DataType>> + Send + Sync {
    move |args| {
        if args.len() == n && args.iter().all(is_text) {
            Ok(vec![DataType::Utf8; n])
        } else {
            unexpected(
                name,
                args,
                &[if n == 1 {
                    "varchar"
                } else {
                    "varchar, varchar"
                }],
            )
        }
    }
}

fn part(name: &'static str, f: fn(&Url) -> Option<String>) -> Arc<ScalarUDF> {
    Scalar::new(
        name,
        texts(name, 1),
        |_| Ok(DataType::Utf8),
        move |args, _| {
            let out: StringArray = (0..args[0].len())
                .map(|i| Url::parse(text(&args[0], i)?).ok().and_then(|u| f(&u)))
                .collect();
            Ok(Arc::new(out) as ArrayRef)
        },
    )
    .udf()
}

fn port() -> Arc<ScalarUDF> {
    Scalar::new(
        "url_extract_port",
        texts("url_extract_port", 1),
        |_| Ok(DataType::Int64),
        |args, _| {
            let out: Int64Array = (0..args[0].len())
                .map(|i| Url::parse(text(&args[0], i)?).ok()?.port().map(i64::from))
                .collect();
            Ok(Arc::new(out) as ArrayRef)
        },
    )
    .udf()
}

/// `url_extract_parameter(url, name)`: the first value of the query parameter `name`.
fn parameter() -> Arc<ScalarUDF> {
    Scalar::new(
        "url_extract_parameter",
        texts("url_extract_parameter", 2),
        |_| Ok(DataType::Utf8),
        |args, _| {
            let out: StringArray = (0..args[0].len())
                .map(|i| {
                    let url = Url::parse(text(&args[0], i)?).ok()?;
                    let name = text(&args[1], i)?;
                    url.query_pairs()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.into_owned())
                })
                .collect();
            Ok(Arc::new(out) as ArrayRef)
        },
    )
    .udf()
}

fn text_to_text(name: &'static str, f: fn(&str) -> Option<String>) -> Arc<ScalarUDF> {
    Scalar::new(
        name,
        texts(name, 1),
        |_| Ok(DataType::Utf8),
        move |args, _| {
            let out: StringArray = (0..args[0].len()).map(|i| f(text(&args[0], i)?)).collect();
            Ok(Arc::new(out) as ArrayRef)
        },
    )
    .udf()
}

/// Form encoding: letters, digits and `.-*_` stay, a space is `+`, other bytes `%XX`.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// The reverse of [`encode`]; NULL for a broken `%` escape or bytes that are not UTF-8.
fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::{decode, encode};

    #[test]
    fn form_encoding() {
        assert_eq!(encode("a b&c=ä"), "a+b%26c%3D%C3%A4");
        assert_eq!(decode("a+b%26c%3D%C3%A4").as_deref(), Some("a b&c=ä"));
        assert_eq!(decode("%4"), None);
        assert_eq!(decode("%zz"), None);
    }
}

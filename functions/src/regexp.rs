//! Trino's regular expression functions (`functions/regexp`): `regexp_replace` replaces every match
//! (DataFusion's only the first without a flag) with Java's `$n` group references,
//! `regexp_extract`, `regexp_extract_all`, `regexp_count`, `regexp_position`, `regexp_split`.
//! Patterns are Rust's `regex` syntax, which agrees with Java's for the common constructs
//! (classes, groups, quantifiers, anchors); look-around and back-references are refused.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Int64Array, ListBuilder, StringArray, StringBuilder};
use arrow::datatypes::{DataType, Field};
use datafusion::common::Result;
use datafusion::logical_expr::ScalarUDF;
use regex::Regex;

use crate::datetime::text;
use crate::udf::{Scalar, invalid, is_integer, is_text, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        regexp_replace(),
        regexp_extract(),
        regexp_extract_all(),
        regexp_count(),
        regexp_position(),
        regexp_split(),
    ]
}

/// Compiles patterns, keeping the last one (a pattern is nearly always one literal).
#[derive(Default)]
struct Patterns {
    last: Option<(String, Regex)>,
}

impl Patterns {
    fn get(&mut self, pattern: &str) -> Result<&Regex> {
        if self.last.as_ref().is_none_or(|(p, _)| p != pattern) {
            let compiled = regex::RegexBuilder::new(pattern)
                .size_limit(1 << 22)
                .build()
                .or_else(|e| invalid(format!("invalid regular expression '{pattern}': {e}")))?;
            self.last = Some((pattern.to_string(), compiled));
        }
        match &self.last {
            Some((_, r)) => Ok(r),
            None => invalid("no pattern"),
        }
    }
}

fn int(array: &ArrayRef, i: usize) -> Option<i64> {
    use arrow::array::Array;
    let a = array.as_primitive::<arrow::datatypes::Int64Type>();
    (!a.is_null(i)).then(|| a.value(i))
}

/// A Java replacement string (`$1`, `${name}`, `\$`) as the `regex` crate spells it.
fn java_replacement(r: &str, groups: usize) -> Result<String> {
    let mut out = String::with_capacity(r.len() + 8);
    let mut chars = r.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => return invalid("character to be escaped is missing"),
            },
            '$' => match chars.peek() {
                Some('{') => {
                    chars.next();
                    let name: String = chars.by_ref().take_while(|c| *c != '}').collect();
                    out.push_str(&format!("${{{name}}}"));
                }
                Some(d) if d.is_ascii_digit() => {
                    // Java takes as many digits as still name a group.
                    let mut n = 0usize;
                    let mut first = true;
                    while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                        let next = n * 10 + d as usize;
                        if !first && next >= groups {
                            break;
                        }
                        if first && next >= groups {
                            return invalid(format!("No group {next}"));
                        }
                        n = next;
                        first = false;
                        chars.next();
                    }
                    out.push_str(&format!("${{{n}}}"));
                }
                _ => return invalid("Illegal group reference: group index is missing"),
            },
            c => out.push(c),
        }
    }
    Ok(out)
}

fn text_args(
    name: &'static str,
    texts: usize,
    ints: usize,
    expected: &'static [&'static str],
) -> impl Fn(&[DataType]) -> Result<Vec<DataType>> + Send + Sync {
    move |args| {
        let n = args.len();
        if n < texts || n > texts + ints {
            return unexpected(name, args, expected);
        }
        let mut out = Vec::with_capacity(n);
        for (i, t) in args.iter().enumerate() {
            if i < texts && is_text(t) {
                out.push(DataType::Utf8);
            } else if i >= texts && is_integer(t) {
                out.push(DataType::Int64);
            } else {
                return unexpected(name, args, expected);
            }
        }
        Ok(out)
    }
}

fn regexp_replace() -> Arc<ScalarUDF> {
    const EXPECTED: &[&str] = &["varchar, joniregexp", "varchar, joniregexp, varchar"];
    Scalar::new(
        "regexp_replace",
        move |args: &[DataType]| {
            if (2..=3).contains(&args.len()) && args.iter().all(is_text) {
                Ok(vec![DataType::Utf8; args.len()])
            } else {
                unexpected("regexp_replace", args, EXPECTED)
            }
        },
        |_| Ok(DataType::Utf8),
        |args, _| {
            let mut patterns = Patterns::default();
            let mut out = Vec::with_capacity(args[0].len());
            for i in 0..args[0].len() {
                let (Some(s), Some(p)) = (text(&args[0], i), text(&args[1], i)) else {
                    out.push(None);
                    continue;
                };
                let replacement = match args.get(2) {
                    Some(r) => match text(r, i) {
                        Some(r) => Some(r),
                        None => {
                            out.push(None);
                            continue;
                        }
                    },
                    None => None,
                };
                let re = patterns.get(p)?;
                let replacement = java_replacement(replacement.unwrap_or(""), re.captures_len())?;
                out.push(Some(re.replace_all(s, replacement.as_str()).into_owned()));
            }
            Ok(Arc::new(StringArray::from(out)))
        },
    )
    .udf()
}

fn group_of(re: &Regex, group: i64) -> Result<usize> {
    match usize::try_from(group) {
        Ok(g) if g < re.captures_len() => Ok(g),
        _ => invalid(format!(
            "Pattern has {} groups. Cannot access group {group}",
            re.captures_len() - 1
        )),
    }
}

fn regexp_extract() -> Arc<ScalarUDF> {
    const EXPECTED: &[&str] = &["varchar, joniregexp", "varchar, joniregexp, bigint"];
    Scalar::new(
        "regexp_extract",
        text_args("regexp_extract", 2, 1, EXPECTED),
        |_| Ok(DataType::Utf8),
        |args, _| {
            let mut patterns = Patterns::default();
            let mut out = Vec::with_capacity(args[0].len());
            for i in 0..args[0].len() {
                let (Some(s), Some(p)) = (text(&args[0], i), text(&args[1], i)) else {
                    out.push(None);
                    continue;
                };
                let group = match args.get(2) {
                    Some(g) => match int(g, i) {
                        Some(g) => g,
                        None => {
                            out.push(None);
                            continue;
                        }
                    },
                    None => 0,
                };
                let re = patterns.get(p)?;
                let g = group_of(re, group)?;
                out.push(
                    re.captures(s)
                        .and_then(|c| c.get(g))
                        .map(|m| m.as_str().to_string()),
                );
            }
            Ok(Arc::new(StringArray::from(out)))
        },
    )
    .udf()
}

fn string_list() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)))
}

fn regexp_extract_all() -> Arc<ScalarUDF> {
    const EXPECTED: &[&str] = &["varchar, joniregexp", "varchar, joniregexp, bigint"];
    Scalar::new(
        "regexp_extract_all",
        text_args("regexp_extract_all", 2, 1, EXPECTED),
        |_| Ok(string_list()),
        |args, _| {
            let mut patterns = Patterns::default();
            let mut out = ListBuilder::new(StringBuilder::new());
            for i in 0..args[0].len() {
                let (Some(s), Some(p)) = (text(&args[0], i), text(&args[1], i)) else {
                    out.append_null();
                    continue;
                };
                let group = match args.get(2) {
                    Some(g) => match int(g, i) {
                        Some(g) => g,
                        None => {
                            out.append_null();
                            continue;
                        }
                    },
                    None => 0,
                };
                let re = patterns.get(p)?;
                let g = group_of(re, group)?;
                for c in re.captures_iter(s) {
                    out.values().append_option(c.get(g).map(|m| m.as_str()));
                }
                out.append(true);
            }
            Ok(Arc::new(out.finish()))
        },
    )
    .udf()
}

fn regexp_count() -> Arc<ScalarUDF> {
    Scalar::new(
        "regexp_count",
        text_args("regexp_count", 2, 0, &["varchar, joniregexp"]),
        |_| Ok(DataType::Int64),
        |args, _| {
            let mut patterns = Patterns::default();
            let mut out = Vec::with_capacity(args[0].len());
            for i in 0..args[0].len() {
                let (Some(s), Some(p)) = (text(&args[0], i), text(&args[1], i)) else {
                    out.push(None);
                    continue;
                };
                out.push(Some(patterns.get(p)?.find_iter(s).count() as i64));
            }
            Ok(Arc::new(Int64Array::from(out)))
        },
    )
    .udf()
}

/// `regexp_position(s, pattern[, start[, occurrence]])`: the 1-based code point position of the
/// match, or -1.
fn regexp_position() -> Arc<ScalarUDF> {
    const EXPECTED: &[&str] = &[
        "varchar, joniregexp",
        "varchar, joniregexp, bigint",
        "varchar, joniregexp, bigint, bigint",
    ];
    Scalar::new(
        "regexp_position",
        text_args("regexp_position", 2, 2, EXPECTED),
        |_| Ok(DataType::Int64),
        |args, _| {
            let mut patterns = Patterns::default();
            let mut out = Vec::with_capacity(args[0].len());
            'rows: for i in 0..args[0].len() {
                let (Some(s), Some(p)) = (text(&args[0], i), text(&args[1], i)) else {
                    out.push(None);
                    continue;
                };
                let mut extra = [1i64, 1];
                for (k, slot) in extra.iter_mut().enumerate() {
                    if let Some(a) = args.get(2 + k) {
                        match int(a, i) {
                            Some(v) => *slot = v,
                            None => {
                                out.push(None);
                                continue 'rows;
                            }
                        }
                    }
                }
                let [start, occurrence] = extra;
                if start < 1 {
                    return invalid("start position cannot be smaller than 1");
                }
                if occurrence < 1 {
                    return invalid("occurrence cannot be smaller than 1");
                }
                let offset = s.char_indices().nth((start - 1) as usize).map(|(b, _)| b);
                let Some(offset) = offset else {
                    out.push(Some(-1));
                    continue;
                };
                let re = patterns.get(p)?;
                let found = re.find_iter(&s[offset..]).nth((occurrence - 1) as usize);
                out.push(Some(match found {
                    Some(m) => (s[..offset + m.start()].chars().count() + 1) as i64,
                    None => -1,
                }));
            }
            Ok(Arc::new(Int64Array::from(out)))
        },
    )
    .udf()
}

fn regexp_split() -> Arc<ScalarUDF> {
    Scalar::new(
        "regexp_split",
        text_args("regexp_split", 2, 0, &["varchar, joniregexp"]),
        |_| Ok(string_list()),
        |args, _| {
            let mut patterns = Patterns::default();
            let mut out = ListBuilder::new(StringBuilder::new());
            for i in 0..args[0].len() {
                let (Some(s), Some(p)) = (text(&args[0], i), text(&args[1], i)) else {
                    out.append_null();
                    continue;
                };
                for part in patterns.get(p)?.split(s) {
                    out.values().append_value(part);
                }
                out.append(true);
            }
            Ok(Arc::new(out.finish()))
        },
    )
    .udf()
}

#[cfg(test)]
mod tests {
    use super::java_replacement;

    #[test]
    fn java_group_references() {
        assert_eq!(java_replacement("$1x", 2).ok().as_deref(), Some("${1}x"));
        assert_eq!(java_replacement("$12", 2).ok().as_deref(), Some("${1}2"));
        assert_eq!(java_replacement("$12", 13).ok().as_deref(), Some("${12}"));
        assert_eq!(java_replacement("\\$5", 1).ok().as_deref(), Some("$$5"));
        assert!(java_replacement("$3", 2).is_err());
        assert!(java_replacement("a$", 2).is_err());
    }
}

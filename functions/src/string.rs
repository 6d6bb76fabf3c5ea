//! Trino's string functions (`functions/string`) where DataFusion's differ or are missing:
//! `concat` (NULL if any argument is NULL; arrays too), `concat_ws` (of an array too),
//! `substr`/`substring` (a negative start counts from the end), `split`, `split_part` (NULL past
//! the last field), `reverse` (of an array, the array reversed); and what DataFusion
//! lacks: `codepoint`, `hamming_distance`, `levenshtein_distance`, `luhn_check`, `soundex`,
//! `title_case`, `normalize`, `split_to_map`, `split_to_multimap`, and `word_stem` (the Snowball
//! stemmers of the `rust-stemmers` crate, as Trino uses Lucene's Snowball ones).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, ListBuilder, StringArray, StringBuilder};
use arrow::datatypes::{DataType, Field};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::ScalarUDF;

use crate::datetime::text;
use crate::udf::{Delegate, Scalar, invalid, is_integer, is_text, per_row, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        Delegate::new("concat", pick_concat, true).udf(),
        Delegate::new("reverse", pick_reverse, false).udf(),
        Delegate::new("concat_ws", pick_concat_ws, false).udf(),
        substr(),
        split(),
        split_part(),
        text_fn("codepoint", 1, DataType::Int32, |s| {
            let mut chars = s[0].chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Ok(ScalarValue::Int32(Some(c as i32))),
                _ => invalid("Input string must be a single character string"),
            }
        }),
        text_fn("hamming_distance", 2, DataType::Int64, |s| {
            let (a, b): (Vec<char>, Vec<char>) = (s[0].chars().collect(), s[1].chars().collect());
            if a.len() != b.len() {
                return invalid(
                    "The input strings to hamming_distance function must have the same length",
                );
            }
            Ok(ScalarValue::Int64(Some(
                a.iter().zip(&b).filter(|(x, y)| x != y).count() as i64,
            )))
        }),
        text_fn("levenshtein_distance", 2, DataType::Int64, |s| {
            Ok(ScalarValue::Int64(Some(levenshtein(s[0], s[1])? as i64)))
        }),
        text_fn("luhn_check", 1, DataType::Boolean, |s| {
            Ok(ScalarValue::Boolean(luhn(s[0])))
        }),
        text_fn("soundex", 1, DataType::Utf8, |s| {
            Ok(ScalarValue::Utf8(Some(soundex(s[0]))))
        }),
        text_fn("title_case", 1, DataType::Utf8, |s| {
            Ok(ScalarValue::Utf8(Some(title_case(s[0]))))
        }),
        normalize(),
        word_stem(),
        text_fn(
            "split_to_map",
            3,
            crate::map::map_type(&DataType::Utf8, &DataType::Utf8),
            |s| split_to_map(s, false),
        ),
        text_fn(
            "split_to_multimap",
            3,
            crate::map::map_type(&DataType::Utf8, &DataType::new_list(DataType::Utf8, true)),
            |s| split_to_map(s, true),
        ),
    ]
}

/// `word_stem(word [, lang])`: the Snowball stem of `word`, in English unless `lang` (an ISO 639-1
/// code) names another language.
fn word_stem() -> Arc<ScalarUDF> {
    per_row(
        "word_stem",
        |args| match args {
            [w] if is_text(w) => Ok(vec![DataType::Utf8]),
            [w, l] if is_text(w) && is_text(l) => Ok(vec![DataType::Utf8; 2]),
            _ => unexpected("word_stem", args, &["varchar", "varchar, varchar"]),
        },
        |_| Ok(DataType::Utf8),
        |row| {
            let text = |v: &ScalarValue| match v {
                ScalarValue::Utf8(Some(s)) => s.clone(),
                _ => String::new(),
            };
            let lang = row.get(1).map_or_else(|| "en".to_string(), text);
            let stemmer = rust_stemmers::Stemmer::create(stem_language(&lang)?);
            Ok(ScalarValue::Utf8(Some(
                stemmer.stem(&text(&row[0])).into_owned(),
            )))
        },
    )
    .udf()
}

/// The Snowball algorithm for one of the language codes Trino accepts (those the crate has).
fn stem_language(code: &str) -> Result<rust_stemmers::Algorithm> {
    use rust_stemmers::Algorithm::*;
    Ok(match code {
        "da" => Danish,
        "de" => German,
        "en" => English,
        "es" => Spanish,
        "fi" => Finnish,
        "fr" => French,
        "hu" => Hungarian,
        "it" => Italian,
        "nl" => Dutch,
        "no" => Norwegian,
        "pt" => Portuguese,
        "ro" => Romanian,
        "ru" => Russian,
        "sv" => Swedish,
        "tr" => Turkish,
        "ca" | "eu" | "hy" | "ir" | "lt" => {
            return invalid(format!("Stemmer language not supported by SQE: {code}"));
        }
        _ => return invalid(format!("Unknown stemmer language: {code}")),
    })
}

/// A function of `count` VARCHARs, row by row (NULL in, NULL out).
fn text_fn(
    name: &'static str,
    count: usize,
    returns: DataType,
    f: fn(&[&str]) -> Result<ScalarValue>,
) -> Arc<ScalarUDF> {
    per_row(
        name,
        move |args| {
            if args.len() == count && args.iter().all(is_text) {
                Ok(vec![DataType::Utf8; count])
            } else {
                let expected = vec!["varchar"; count].join(", ");
                unexpected(name, args, &[expected.as_str()])
            }
        },
        move |_| Ok(returns.clone()),
        move |row| {
            let texts: Vec<&str> = row
                .iter()
                .map(|v| match v {
                    ScalarValue::Utf8(Some(s)) => s.as_str(),
                    _ => "",
                })
                .collect();
            f(&texts)
        },
    )
    .udf()
}

fn levenshtein(a: &str, b: &str) -> Result<usize> {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().saturating_mul(b.len()) > 1_000_000 {
        return invalid("The combined inputs for Levenshtein distance are too large");
    }
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, x) in a.iter().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, y) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(previous + usize::from(x != y));
            previous = above;
        }
    }
    Ok(row[b.len()])
}

/// The Luhn check of a string of digits (NULL for anything else, as Trino answers).
fn luhn(s: &str) -> Option<bool> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let sum: u32 = s
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, b)| {
            let d = u32::from(b - b'0');
            if i % 2 == 1 {
                let d = d * 2;
                if d > 9 { d - 9 } else { d }
            } else {
                d
            }
        })
        .sum();
    Some(sum.is_multiple_of(10))
}

/// American Soundex: the first letter, then the codes of the consonants that follow, three digits.
fn soundex(s: &str) -> String {
    let code = |c: char| match c.to_ascii_uppercase() {
        'B' | 'F' | 'P' | 'V' => '1',
        'C' | 'G' | 'J' | 'K' | 'Q' | 'S' | 'X' | 'Z' => '2',
        'D' | 'T' => '3',
        'L' => '4',
        'M' | 'N' => '5',
        'R' => '6',
        'H' | 'W' => '-',
        _ => '0',
    };
    let letters: Vec<char> = s.chars().filter(char::is_ascii_alphabetic).collect();
    let Some(first) = letters.first() else {
        return String::new();
    };
    let mut out = String::from(first.to_ascii_uppercase());
    let mut last = code(*first);
    for c in &letters[1..] {
        let d = code(*c);
        if d == '-' {
            continue;
        }
        if d != '0' && d != last {
            out.push(d);
            if out.len() == 4 {
                break;
            }
        }
        last = d;
    }
    while out.len() < 4 {
        out.push('0');
    }
    out
}

/// Each word's first letter upper-case, the rest lower-case; words are runs of letters and digits.
fn title_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut start = true;
    for c in s.chars() {
        if c.is_alphanumeric() {
            if start {
                out.extend(c.to_uppercase());
            } else {
                out.extend(c.to_lowercase());
            }
            start = false;
        } else {
            out.push(c);
            start = true;
        }
    }
    out
}

/// `normalize(s[, form])`: Unicode normalization, NFC unless the form says NFD, NFKC or NFKD.
fn normalize() -> Arc<ScalarUDF> {
    use unicode_normalization::UnicodeNormalization;
    per_row(
        "normalize",
        |args| {
            if (1..=2).contains(&args.len()) && args.iter().all(is_text) {
                Ok(vec![DataType::Utf8; args.len()])
            } else {
                unexpected("normalize", args, &["varchar", "varchar, form"])
            }
        },
        |_| Ok(DataType::Utf8),
        |row| {
            let text = |v: &ScalarValue| match v {
                ScalarValue::Utf8(Some(s)) => s.clone(),
                _ => String::new(),
            };
            let s = text(&row[0]);
            let form = row.get(1).map(text).unwrap_or_else(|| "NFC".into());
            let out: String = match form.to_ascii_uppercase().as_str() {
                "NFC" => s.nfc().collect(),
                "NFD" => s.nfd().collect(),
                "NFKC" => s.nfkc().collect(),
                "NFKD" => s.nfkd().collect(),
                other => {
                    return invalid(format!(
                        "Normalization form must be one of [NFD, NFC, NFKD, NFKC]: {other}"
                    ));
                }
            };
            Ok(ScalarValue::Utf8(Some(out)))
        },
    )
    .udf()
}

/// `split_to_map(s, entry_delimiter, key_value_delimiter)` (`multi`: each key's values as an
/// array, `split_to_multimap`).
fn split_to_map(s: &[&str], multi: bool) -> Result<ScalarValue> {
    let (text, entry, pair) = (s[0], s[1], s[2]);
    if entry.is_empty() {
        return invalid("entryDelimiter is empty");
    }
    if pair.is_empty() {
        return invalid("keyValueDelimiter is empty");
    }
    if entry == pair {
        return invalid("entryDelimiter and keyValueDelimiter must not be the same");
    }
    let mut keys: Vec<String> = Vec::new();
    let mut values: Vec<Vec<String>> = Vec::new();
    let body = text.strip_suffix(entry).unwrap_or(text);
    if !body.is_empty() || text.is_empty() {
        for item in body.split(entry).filter(|_| !text.is_empty()) {
            let Some((k, v)) = item.split_once(pair) else {
                return invalid(format!(
                    "Key-value delimiter must appear exactly once in each entry. Bad input: '{item}'"
                ));
            };
            if v.contains(pair) {
                return invalid(format!(
                    "Key-value delimiter must appear exactly once in each entry. Bad input: '{item}'"
                ));
            }
            match keys.iter().position(|x| x == k) {
                Some(i) if multi => values[i].push(v.to_string()),
                Some(_) => return invalid(format!("Duplicate keys ({k}) are not allowed")),
                None => {
                    keys.push(k.to_string());
                    values.push(vec![v.to_string()]);
                }
            }
        }
    }
    let key_array: ArrayRef = Arc::new(StringArray::from(keys));
    let value_array: ArrayRef = if multi {
        let mut b = ListBuilder::new(StringBuilder::new());
        for vs in &values {
            for v in vs {
                b.values().append_value(v);
            }
            b.append(true);
        }
        Arc::new(b.finish())
    } else {
        Arc::new(StringArray::from_iter_values(
            values.iter().map(|v| v[0].clone()),
        ))
    };
    let ty = crate::map::map_type(&DataType::Utf8, value_array.data_type());
    crate::map::one_map(&ty, key_array, value_array)
}

fn is_list(t: &DataType) -> bool {
    matches!(
        t,
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..)
    )
}

fn pick_concat(types: &[DataType]) -> Arc<ScalarUDF> {
    if types.iter().any(is_list) {
        datafusion::functions_nested::concat::array_concat_udf()
    } else {
        datafusion::functions::string::concat()
    }
}

fn pick_concat_ws(types: &[DataType]) -> Arc<ScalarUDF> {
    match types {
        [_, t] if is_list(t) => array_concat_ws(),
        _ => datafusion::functions::string::concat_ws(),
    }
}

/// `concat_ws(separator, array(varchar))`: the array's elements joined by the separator, its
/// NULL elements left out; NULL when the separator or the array is.
fn array_concat_ws() -> Arc<ScalarUDF> {
    let list = DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)));
    Scalar::new(
        "sqe_array_concat_ws",
        move |args| match args {
            [s, a] if is_text(s) && is_list(a) => Ok(vec![DataType::Utf8, list.clone()]),
            _ => unexpected("concat_ws", args, &["varchar, array(varchar)"]),
        },
        |_| Ok(DataType::Utf8),
        |args, _| {
            use arrow::array::AsArray;
            let arrays = args[1].as_list::<i32>();
            let mut out = StringBuilder::new();
            for i in 0..args[0].len() {
                let Some(separator) = text(&args[0], i) else {
                    out.append_null();
                    continue;
                };
                if arrays.is_null(i) {
                    out.append_null();
                    continue;
                }
                let elements = arrays.value(i);
                let elements = elements.as_string::<i32>();
                let joined: Vec<&str> = elements.iter().flatten().collect();
                out.append_value(joined.join(separator));
            }
            Ok(Arc::new(out.finish()))
        },
    )
    .udf()
}

/// `split_part(string, delimiter, index)`: the index-th field (counted from 1), NULL past the last
/// one; with an empty delimiter the whole string is the one field.
fn split_part() -> Arc<ScalarUDF> {
    Scalar::new(
        "split_part",
        |args| match args {
            [s, d, i] if is_text(s) && is_text(d) && is_integer(i) => {
                Ok(vec![DataType::Utf8, DataType::Utf8, DataType::Int64])
            }
            _ => unexpected("split_part", args, &["varchar, varchar, bigint"]),
        },
        |_| Ok(DataType::Utf8),
        |args, _| {
            let mut out = StringBuilder::new();
            for i in 0..args[0].len() {
                let (Some(s), Some(d), Some(index)) =
                    (text(&args[0], i), text(&args[1], i), int(&args[2], i))
                else {
                    out.append_null();
                    continue;
                };
                if index <= 0 {
                    return invalid("Index must be greater than zero");
                }
                let n = usize::try_from(index - 1).unwrap_or(usize::MAX);
                let field = match d.is_empty() {
                    true => (n == 0).then_some(s),
                    false => s.split(d).nth(n),
                };
                out.append_option(field);
            }
            Ok(Arc::new(out.finish()))
        },
    )
    .udf()
}

fn pick_reverse(types: &[DataType]) -> Arc<ScalarUDF> {
    if types.iter().any(is_list) {
        datafusion::functions_nested::reverse::array_reverse_udf()
    } else {
        string_reverse()
    }
}

/// `reverse` of a string, by code points (the name users call is `reverse`).
fn string_reverse() -> Arc<ScalarUDF> {
    Scalar::new(
        "sqe_string_reverse",
        |args| match args {
            [t] if is_text(t) => Ok(vec![DataType::Utf8]),
            _ => unexpected("reverse", args, &["varchar", "array(E)"]),
        },
        |_| Ok(DataType::Utf8),
        |args, _| {
            let out: StringArray = (0..args[0].len())
                .map(|i| text(&args[0], i).map(|s| s.chars().rev().collect::<String>()))
                .collect();
            Ok(Arc::new(out))
        },
    )
    .udf()
}

fn int(array: &ArrayRef, i: usize) -> Option<i64> {
    use arrow::array::{Array, AsArray};
    let a = array.as_primitive::<arrow::datatypes::Int64Type>();
    (!a.is_null(i)).then(|| a.value(i))
}

/// Trino's `substr(s, start[, length])`: 1-based; a negative start counts from the end.
fn substring(s: &str, start: i64, length: Option<i64>) -> String {
    let count = s.chars().count() as i64;
    if start == 0 || length.is_some_and(|l| l <= 0) {
        return String::new();
    }
    let first = if start > 0 { start - 1 } else { count + start };
    if first < 0 || first >= count {
        return String::new();
    }
    let take = length.map_or(count - first, |l| l.min(count - first));
    s.chars().skip(first as usize).take(take as usize).collect()
}

fn substr() -> Arc<ScalarUDF> {
    const EXPECTED: &[&str] = &["varchar, bigint", "varchar, bigint, bigint"];
    Scalar::new(
        "substr",
        |args| match args {
            [s, a] if is_text(s) && is_integer(a) => Ok(vec![DataType::Utf8, DataType::Int64]),
            [s, a, b] if is_text(s) && is_integer(a) && is_integer(b) => {
                Ok(vec![DataType::Utf8, DataType::Int64, DataType::Int64])
            }
            _ => unexpected("substr", args, EXPECTED),
        },
        |_| Ok(DataType::Utf8),
        |args, _| {
            let out: StringArray = (0..args[0].len())
                .map(|i| {
                    let s = text(&args[0], i)?;
                    let start = int(&args[1], i)?;
                    let length = match args.get(2) {
                        Some(l) => Some(int(l, i)?),
                        None => None,
                    };
                    Some(substring(s, start, length))
                })
                .collect();
            Ok(Arc::new(out))
        },
    )
    .alias("substring")
    .udf()
}

fn split() -> Arc<ScalarUDF> {
    const EXPECTED: &[&str] = &["varchar, varchar", "varchar, varchar, bigint"];
    Scalar::new(
        "split",
        |args| match args {
            [s, d] if is_text(s) && is_text(d) => Ok(vec![DataType::Utf8, DataType::Utf8]),
            [s, d, l] if is_text(s) && is_text(d) && is_integer(l) => {
                Ok(vec![DataType::Utf8, DataType::Utf8, DataType::Int64])
            }
            _ => unexpected("split", args, EXPECTED),
        },
        |_| {
            Ok(DataType::List(Arc::new(Field::new_list_field(
                DataType::Utf8,
                true,
            ))))
        },
        |args, _| {
            let limits = args
                .get(2)
                .cloned()
                .unwrap_or_else(|| Arc::new(Int64Array::from(vec![None::<i64>; args[0].len()])));
            let mut out = ListBuilder::new(StringBuilder::new());
            for i in 0..args[0].len() {
                let (Some(s), Some(d)) = (text(&args[0], i), text(&args[1], i)) else {
                    out.append_null();
                    continue;
                };
                if d.is_empty() {
                    return invalid("The delimiter may not be the empty string");
                }
                let limit = int(&limits, i);
                match limit {
                    Some(l) if l <= 0 => return invalid("Limit must be positive"),
                    Some(l) => {
                        let l = usize::try_from(l).unwrap_or(usize::MAX);
                        for part in s.splitn(l, d) {
                            out.values().append_value(part);
                        }
                    }
                    None => {
                        for part in s.split(d) {
                            out.values().append_value(part);
                        }
                    }
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
    use super::substring;

    #[test]
    fn substr_counts_like_trino() {
        assert_eq!(substring("abcdef", -3, None), "def");
        assert_eq!(substring("abcdef", 2, Some(3)), "bcd");
        assert_eq!(substring("abcdef", 0, None), "");
        assert_eq!(substring("abcdef", 7, None), "");
        assert_eq!(substring("abcdef", -7, None), "");
        assert_eq!(substring("abcdef", -2, Some(5)), "ef");
        assert_eq!(substring("äöü", 2, None), "öü");
    }
}

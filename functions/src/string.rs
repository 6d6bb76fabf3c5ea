//! Trino's string functions (`functions/string`) where DataFusion's differ or are missing:
//! `concat` (NULL if any argument is NULL; arrays too), `substr`/`substring` (a negative start
//! counts from the end), `split`, `reverse` (of an array, the array reversed).

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, ListBuilder, StringArray, StringBuilder};
use arrow::datatypes::{DataType, Field};
use datafusion::logical_expr::ScalarUDF;

use crate::datetime::text;
use crate::udf::{Delegate, Scalar, invalid, is_integer, is_text, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        Delegate::new("concat", pick_concat, true).udf(),
        Delegate::new("reverse", pick_reverse, false).udf(),
        substr(),
        split(),
    ]
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

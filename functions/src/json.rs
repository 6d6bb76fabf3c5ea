//! Trino's JSON functions (`functions/json`) over JSON text: `json_extract_scalar`, `json_extract`,
//! `json_size`, `json_array_length`, `json_array_get`, `json_array_contains`, `is_json_scalar`,
//! `json_parse`, `json_format`, `json_scalar`. Paths are Trino's simple JSONPath: `$`, `.key`,
//! `["key"]`, `[n]`.
//!
//! Not `datafusion-functions-json`: its paths are lists of keys (PostgreSQL's `->`), Trino's are
//! JSONPath text; the parsing here is `serde_json`'s. A JSON value is VARCHAR holding JSON text,
//! its field marked with Arrow's JSON extension type ([`crate::JSON_EXTENSION`]): `JSON '…'` is
//! `json_parse('…')`, `CAST(x AS JSON)` is `sqe_to_json(x)`, and a cast from JSON is
//! `sqe_from_json` (all three from engine-pool/src/trino_sql/).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array, StringArray};
use arrow::datatypes::DataType;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::ScalarUDF;
use serde_json::Value;

use crate::datetime::text;
use crate::udf::{Scalar, invalid, is_integer, is_text, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        json_extract_scalar(),
        json_extract(),
        json_size(),
        json_array_length(),
        json_array_get(),
        json_array_contains(),
        is_json_scalar(),
        json_parse(),
        json_format(),
        to_json(),
        json_scalar(),
        from_json(),
    ]
}

/// `CAST(x AS JSON)` (`sqe_to_json`, from engine-pool/src/trino_sql/): `x` as JSON text, as Trino casts it: a
/// VARCHAR becomes a JSON string, an array a JSON array, a map or a row a JSON object (a map's
/// keys as text), numbers and booleans themselves, NULL (the SQL NULL) stays NULL.
fn to_json() -> Arc<ScalarUDF> {
    json_text("sqe_to_json", "CAST(… AS JSON)", "T", |_| true)
}

/// `json_scalar(x)` (the SQL standard's JSON_SCALAR): a number, boolean, text, date or time as a
/// JSON scalar (text and date-times as JSON strings); NULL stays NULL. Arrays, maps and rows are
/// refused: they are not scalars.
fn json_scalar() -> Arc<ScalarUDF> {
    json_text("json_scalar", "json_scalar", "a scalar value", |t| {
        !t.is_nested()
    })
}

/// A function writing its one argument as JSON text, for the argument types `takes` accepts.
fn json_text(
    name: &'static str,
    shown: &'static str,
    expected: &'static str,
    takes: fn(&DataType) -> bool,
) -> Arc<ScalarUDF> {
    Scalar::new(
        name,
        move |args| match args {
            [t] if takes(t) => Ok(args.to_vec()),
            _ => unexpected(shown, args, &[expected]),
        },
        |_| Ok(DataType::Utf8),
        |args, _| {
            let mut out = Vec::with_capacity(args[0].len());
            for i in 0..args[0].len() {
                if args[0].is_null(i) || args[0].data_type().is_null() {
                    out.push(None);
                    continue;
                }
                out.push(Some(json_of(args[0].as_ref(), i)?.to_string()));
            }
            Ok(Arc::new(StringArray::from(out)) as ArrayRef)
        },
    )
    .json()
    .udf()
}

/// `CAST(j AS T)` of a JSON value `j` (`sqe_from_json(j, <a value of type T>, lenient)`, from
/// engine-pool/src/trino_sql/): a JSON array becomes an ARRAY, an object a MAP (keys read from
/// their text) or a ROW (fields by name, any case; an array gives a ROW's fields by position), a
/// scalar a number, boolean, VARCHAR (a JSON string without its quotes), date or timestamp; JSON
/// null is NULL.
/// `lenient` (TRY_CAST) gives NULL where the value does not fit.
pub fn from_json() -> Arc<ScalarUDF> {
    Scalar::new(
        "sqe_from_json",
        |args| match args {
            [j, t, DataType::Boolean] if is_text(j) => {
                Ok(vec![DataType::Utf8, t.clone(), DataType::Boolean])
            }
            _ => unexpected("CAST(json AS …)", args, &["json, T, boolean"]),
        },
        |args| Ok(args[1].clone()),
        |args, ty| {
            let lenient = args[2].as_boolean();
            let mut out = Vec::with_capacity(args[0].len());
            for i in 0..args[0].len() {
                let value = match text(&args[0], i) {
                    None => ScalarValue::try_from(ty),
                    Some(s) => parse_strict(s).and_then(|v| typed(&v, ty)),
                };
                out.push(match value {
                    Err(_) if lenient.is_valid(i) && lenient.value(i) => ScalarValue::try_from(ty)?,
                    other => other?,
                });
            }
            if out.is_empty() {
                return Ok(arrow::array::new_empty_array(ty));
            }
            ScalarValue::iter_to_array(out)
        },
    )
    .udf()
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A JSON value as a value of type `t`.
fn typed(v: &Value, t: &DataType) -> Result<ScalarValue> {
    use arrow::array::{MapArray, StructArray};
    use arrow::buffer::OffsetBuffer;
    use datafusion::common::DataFusionError;
    let refuse = || -> Result<ScalarValue> {
        invalid(format!(
            "Cannot cast JSON {} to {}",
            json_kind(v),
            crate::udf::type_name(t)
        ))
    };
    let cast = |value: ScalarValue| {
        value.cast_to(t).map_err(|_| {
            DataFusionError::Execution(format!(
                "Cannot cast JSON {v} to {}",
                crate::udf::type_name(t)
            ))
        })
    };
    if v.is_null() {
        return ScalarValue::try_from(t);
    }
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => match v {
            Value::String(s) => cast(ScalarValue::Utf8(Some(s.clone()))),
            // Text of an array or object: the JSON itself (a VARCHAR it may be compared with).
            other => cast(ScalarValue::Utf8(Some(other.to_string()))),
        },
        DataType::Boolean => match v {
            Value::Bool(b) => Ok(ScalarValue::Boolean(Some(*b))),
            Value::Number(n) => Ok(ScalarValue::Boolean(Some(n.as_f64() != Some(0.0)))),
            Value::String(s) => cast(ScalarValue::Utf8(Some(s.clone()))),
            _ => refuse(),
        },
        t if t.is_numeric() => match v {
            Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => cast(ScalarValue::Int64(Some(i))),
                // A fraction rounds (half away from zero) into an integer type, as Trino's does.
                (None, Some(f)) if t.is_integer() => cast(ScalarValue::Float64(Some(f.round()))),
                (None, Some(_)) if matches!(t, DataType::Decimal128(..)) => {
                    cast(ScalarValue::Utf8(Some(n.to_string())))
                }
                (None, Some(f)) => cast(ScalarValue::Float64(Some(f))),
                (None, None) => refuse(),
            },
            Value::Bool(b) => cast(ScalarValue::Int64(Some(i64::from(*b)))),
            Value::String(s) => cast(ScalarValue::Utf8(Some(s.clone()))),
            _ => refuse(),
        },
        DataType::Date32 | DataType::Timestamp(..) => match v {
            Value::String(s) => cast(ScalarValue::Utf8(Some(s.clone()))),
            _ => refuse(),
        },
        DataType::List(f) => {
            let Value::Array(items) = v else {
                return refuse();
            };
            let values = items
                .iter()
                .map(|item| typed(item, f.data_type()))
                .collect::<Result<Vec<_>>>()?;
            Ok(ScalarValue::List(ScalarValue::new_list_nullable(
                &values,
                f.data_type(),
            )))
        }
        DataType::Struct(fields) => {
            let values: Vec<&Value> = match v {
                Value::Object(object) => fields
                    .iter()
                    .map(|f| {
                        object
                            .iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case(f.name()))
                            .map_or(&Value::Null, |(_, v)| v)
                    })
                    .collect(),
                Value::Array(items) if items.len() == fields.len() => items.iter().collect(),
                _ => return refuse(),
            };
            let columns = fields
                .iter()
                .zip(values)
                .map(|(f, v)| typed(v, f.data_type())?.to_array())
                .collect::<Result<Vec<_>>>()?;
            Ok(ScalarValue::Struct(Arc::new(StructArray::try_new(
                fields.clone(),
                columns,
                None,
            )?)))
        }
        DataType::Map(entries, sorted) => {
            let (Value::Object(object), DataType::Struct(kv)) = (v, entries.data_type()) else {
                return refuse();
            };
            let mut keys = Vec::with_capacity(object.len());
            let mut values = Vec::with_capacity(object.len());
            let mut seen = std::collections::HashSet::new();
            for (k, item) in object {
                let key = typed(&Value::String(k.clone()), kv[0].data_type())?;
                if key.is_null() || !seen.insert(key.clone()) {
                    return invalid(format!(
                        "Cannot cast JSON to {}: duplicate or NULL map key '{k}'",
                        crate::udf::type_name(t)
                    ));
                }
                keys.push(key);
                values.push(typed(item, kv[1].data_type())?);
            }
            let column = |items: Vec<ScalarValue>, t: &DataType| {
                if items.is_empty() {
                    Ok(arrow::array::new_empty_array(t))
                } else {
                    ScalarValue::iter_to_array(items)
                }
            };
            let entries_array = StructArray::try_new(
                kv.clone(),
                vec![
                    column(keys, kv[0].data_type())?,
                    column(values, kv[1].data_type())?,
                ],
                None,
            )?;
            Ok(ScalarValue::Map(Arc::new(MapArray::try_new(
                Arc::clone(entries),
                OffsetBuffer::from_lengths([object.len()]),
                entries_array,
                None,
                *sorted,
            )?)))
        }
        _ => refuse(),
    }
}

/// Row `i` of `array` as a JSON value.
fn json_of(array: &dyn Array, i: usize) -> Result<Value> {
    use arrow::datatypes::{Float32Type, Float64Type};
    if array.is_null(i) {
        return Ok(Value::Null);
    }
    Ok(match array.data_type() {
        DataType::Boolean => Value::Bool(array.as_boolean().value(i)),
        t if t.is_integer() => {
            let text = arrow::util::display::array_value_to_string(array, i)?;
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        }
        DataType::Float32 => {
            serde_json::Number::from_f64(f64::from(array.as_primitive::<Float32Type>().value(i)))
                .map_or(Value::Null, Value::Number)
        }
        DataType::Float64 => {
            serde_json::Number::from_f64(array.as_primitive::<Float64Type>().value(i))
                .map_or(Value::Null, Value::Number)
        }
        DataType::Decimal128(..) | DataType::Decimal256(..) => {
            let text = arrow::util::display::array_value_to_string(array, i)?;
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        }
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) => {
            let items = match array.data_type() {
                DataType::List(_) => array.as_list::<i32>().value(i),
                DataType::LargeList(_) => array.as_list::<i64>().value(i),
                _ => array.as_fixed_size_list().value(i),
            };
            Value::Array(
                (0..items.len())
                    .map(|j| json_of(items.as_ref(), j))
                    .collect::<Result<_>>()?,
            )
        }
        DataType::Map(..) => {
            let entries = array.as_map().value(i);
            let (keys, values) = (entries.column(0), entries.column(1));
            let mut object = serde_json::Map::new();
            for j in 0..entries.len() {
                let key = arrow::util::display::array_value_to_string(keys.as_ref(), j)?;
                object.insert(key, json_of(values.as_ref(), j)?);
            }
            Value::Object(object)
        }
        DataType::Struct(fields) => {
            let row = array.as_struct();
            let mut object = serde_json::Map::new();
            for (f, column) in fields.iter().zip(row.columns()) {
                object.insert(f.name().clone(), json_of(column.as_ref(), i)?);
            }
            Value::Object(object)
        }
        _ => Value::String(arrow::util::display::array_value_to_string(array, i)?),
    })
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// Parses Trino's simple JSONPath.
fn parse_path(path: &str) -> Result<Vec<Step>> {
    let bad = || invalid(format!("Invalid JSON path: '{path}'"));
    let chars: Vec<char> = path.trim().chars().collect();
    if chars.first() != Some(&'$') {
        return bad();
    }
    let mut steps = Vec::new();
    let mut i = 1;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                let start = i + 1;
                let mut end = start;
                while end < chars.len() && chars[end] != '.' && chars[end] != '[' {
                    end += 1;
                }
                if end == start {
                    return bad();
                }
                steps.push(Step::Key(chars[start..end].iter().collect()));
                i = end;
            }
            '[' => {
                let close = match chars[i..].iter().position(|c| *c == ']') {
                    Some(p) => i + p,
                    None => return bad(),
                };
                let inner: String = chars[i + 1..close].iter().collect();
                let inner = inner.trim();
                if let Some(q) = inner.chars().next().filter(|c| *c == '"' || *c == '\'') {
                    if inner.len() < 2 || !inner.ends_with(q) {
                        return bad();
                    }
                    steps.push(Step::Key(inner[1..inner.len() - 1].to_string()));
                } else {
                    match inner.parse::<usize>() {
                        Ok(n) => steps.push(Step::Index(n)),
                        Err(_) => return bad(),
                    }
                }
                i = close + 1;
            }
            _ => return bad(),
        }
    }
    Ok(steps)
}

fn walk<'a>(mut value: &'a Value, steps: &[Step]) -> Option<&'a Value> {
    for step in steps {
        value = match (step, value) {
            (Step::Key(k), Value::Object(m)) => m.get(k)?,
            (Step::Index(n), Value::Array(a)) => a.get(*n)?,
            _ => return None,
        };
    }
    Some(value)
}

/// Paths compiled once per distinct path text.
#[derive(Default)]
struct Paths {
    last: Option<(String, Vec<Step>)>,
}

impl Paths {
    fn get(&mut self, path: &str) -> Result<&[Step]> {
        if self.last.as_ref().is_none_or(|(p, _)| p != path) {
            self.last = Some((path.to_string(), parse_path(path)?));
        }
        Ok(self
            .last
            .as_ref()
            .map(|(_, s)| s.as_slice())
            .unwrap_or_default())
    }
}

fn two_texts(name: &'static str) -> impl Fn(&[DataType]) -> Result<Vec<DataType>> + Send + Sync {
    move |args| match args {
        [a, b] if is_text(a) && is_text(b) => Ok(vec![DataType::Utf8, DataType::Utf8]),
        _ => unexpected(name, args, &["json, jsonpath", "varchar, jsonpath"]),
    }
}

fn one_text(name: &'static str) -> impl Fn(&[DataType]) -> Result<Vec<DataType>> + Send + Sync {
    move |args| match args {
        [a] if is_text(a) => Ok(vec![DataType::Utf8]),
        _ => unexpected(name, args, &["json", "varchar"]),
    }
}

/// Applies `f` to each row's parsed JSON and path; invalid JSON gives NULL, as in Trino.
fn with_path<T>(
    args: &[ArrayRef],
    mut f: impl FnMut(&Value, &[Step]) -> Option<T>,
) -> Result<Vec<Option<T>>> {
    let mut paths = Paths::default();
    let mut out = Vec::with_capacity(args[0].len());
    for i in 0..args[0].len() {
        let (Some(json), Some(path)) = (text(&args[0], i), text(&args[1], i)) else {
            out.push(None);
            continue;
        };
        let steps = paths.get(path)?;
        out.push(match serde_json::from_str::<Value>(json) {
            Ok(v) => f(&v, steps),
            Err(_) => None,
        });
    }
    Ok(out)
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

fn json_extract_scalar() -> Arc<ScalarUDF> {
    Scalar::new(
        "json_extract_scalar",
        two_texts("json_extract_scalar"),
        |_| Ok(DataType::Utf8),
        |args, _| {
            let out = with_path(args, |v, steps| walk(v, steps).and_then(scalar_text))?;
            Ok(Arc::new(StringArray::from(out)))
        },
    )
    .udf()
}

fn json_extract() -> Arc<ScalarUDF> {
    Scalar::new(
        "json_extract",
        two_texts("json_extract"),
        |_| Ok(DataType::Utf8),
        |args, _| {
            let out = with_path(args, |v, steps| walk(v, steps).map(Value::to_string))?;
            Ok(Arc::new(StringArray::from(out)))
        },
    )
    .json()
    .udf()
}

fn json_size() -> Arc<ScalarUDF> {
    Scalar::new(
        "json_size",
        two_texts("json_size"),
        |_| Ok(DataType::Int64),
        |args, _| {
            let out = with_path(args, |v, steps| {
                walk(v, steps).map(|v| match v {
                    Value::Array(a) => a.len() as i64,
                    Value::Object(m) => m.len() as i64,
                    _ => 0,
                })
            })?;
            Ok(Arc::new(Int64Array::from(out)))
        },
    )
    .udf()
}

fn parsed_rows(args: &[ArrayRef]) -> Vec<Option<Value>> {
    (0..args[0].len())
        .map(|i| text(&args[0], i).and_then(|s| serde_json::from_str(s).ok()))
        .collect()
}

fn json_array_length() -> Arc<ScalarUDF> {
    Scalar::new(
        "json_array_length",
        one_text("json_array_length"),
        |_| Ok(DataType::Int64),
        |args, _| {
            let out: Int64Array = parsed_rows(args)
                .into_iter()
                .map(|v| match v {
                    Some(Value::Array(a)) => Some(a.len() as i64),
                    _ => None,
                })
                .collect();
            Ok(Arc::new(out))
        },
    )
    .udf()
}

fn json_array_get() -> Arc<ScalarUDF> {
    Scalar::new(
        "json_array_get",
        |args| match args {
            [a, b] if is_text(a) && is_integer(b) => Ok(vec![DataType::Utf8, DataType::Int64]),
            _ => unexpected("json_array_get", args, &["json, bigint", "varchar, bigint"]),
        },
        |_| Ok(DataType::Utf8),
        |args, _| {
            let index = args[1].as_primitive::<arrow::datatypes::Int64Type>();
            let out: StringArray = parsed_rows(args)
                .into_iter()
                .enumerate()
                .map(|(i, v)| {
                    let Some(Value::Array(a)) = v else {
                        return None;
                    };
                    if index.is_null(i) {
                        return None;
                    }
                    let n = index.value(i);
                    let at = if n < 0 { a.len() as i64 + n } else { n };
                    usize::try_from(at)
                        .ok()
                        .and_then(|at| a.get(at))
                        .map(Value::to_string)
                })
                .collect();
            Ok(Arc::new(out))
        },
    )
    .json()
    .udf()
}

fn json_array_contains() -> Arc<ScalarUDF> {
    const EXPECTED: &[&str] = &[
        "json, boolean",
        "json, bigint",
        "json, double",
        "json, varchar",
    ];
    Scalar::new(
        "json_array_contains",
        |args| match args {
            [a, b] if is_text(a) => {
                let value = match b {
                    DataType::Boolean => DataType::Boolean,
                    t if t.is_integer() => DataType::Int64,
                    t if t.is_numeric() => DataType::Float64,
                    t if is_text(t) => DataType::Utf8,
                    _ => return unexpected("json_array_contains", args, EXPECTED),
                };
                Ok(vec![DataType::Utf8, value])
            }
            _ => unexpected("json_array_contains", args, EXPECTED),
        },
        |_| Ok(DataType::Boolean),
        |args, _| {
            let values = &args[1];
            let out: BooleanArray = parsed_rows(args)
                .into_iter()
                .enumerate()
                .map(|(i, v)| {
                    let Some(Value::Array(a)) = v else {
                        return None;
                    };
                    if values.is_null(i) {
                        return None;
                    }
                    let matches = |e: &Value| match values.data_type() {
                        DataType::Boolean => e.as_bool() == Some(values.as_boolean().value(i)),
                        DataType::Int64 => {
                            e.as_i64()
                                == Some(
                                    values
                                        .as_primitive::<arrow::datatypes::Int64Type>()
                                        .value(i),
                                )
                        }
                        DataType::Float64 => {
                            e.as_f64()
                                == Some(
                                    values
                                        .as_primitive::<arrow::datatypes::Float64Type>()
                                        .value(i),
                                )
                        }
                        _ => e.as_str() == text(values, i),
                    };
                    Some(a.iter().any(matches))
                })
                .collect();
            Ok(Arc::new(out))
        },
    )
    .udf()
}

fn parse_strict(s: &str) -> Result<Value> {
    serde_json::from_str(s).or_else(|_| invalid(format!("Cannot convert value to JSON: '{s}'")))
}

fn is_json_scalar() -> Arc<ScalarUDF> {
    Scalar::new(
        "is_json_scalar",
        one_text("is_json_scalar"),
        |_| Ok(DataType::Boolean),
        |args, _| {
            let mut out = Vec::with_capacity(args[0].len());
            for i in 0..args[0].len() {
                out.push(match text(&args[0], i) {
                    Some(s) => Some(!matches!(
                        parse_strict(s)?,
                        Value::Array(_) | Value::Object(_)
                    )),
                    None => None,
                });
            }
            Ok(Arc::new(BooleanArray::from(out)))
        },
    )
    .udf()
}

/// JSON text written again in its canonical form; `json`: the answer is of the JSON type.
fn canonical(name: &'static str, json: bool) -> Arc<ScalarUDF> {
    let f = Scalar::new(
        name,
        one_text(name),
        |_| Ok(DataType::Utf8),
        |args, _| {
            let mut out = Vec::with_capacity(args[0].len());
            for i in 0..args[0].len() {
                out.push(match text(&args[0], i) {
                    Some(s) => Some(parse_strict(s)?.to_string()),
                    None => None,
                });
            }
            Ok(Arc::new(StringArray::from(out)))
        },
    );
    if json { f.json() } else { f }.udf()
}

fn json_parse() -> Arc<ScalarUDF> {
    canonical("json_parse", true)
}

fn json_format() -> Arc<ScalarUDF> {
    canonical("json_format", false)
}

#[cfg(test)]
mod tests {
    use super::{Step, parse_path};

    #[test]
    fn paths() {
        assert_eq!(
            parse_path("$.store.book[0][\"title\"]").ok(),
            Some(vec![
                Step::Key("store".into()),
                Step::Key("book".into()),
                Step::Index(0),
                Step::Key("title".into())
            ])
        );
        assert_eq!(parse_path("$").ok(), Some(vec![]));
        assert!(parse_path("store").is_err());
        assert!(parse_path("$.").is_err());
        assert!(parse_path("$[x]").is_err());
        assert!(parse_path("$[0").is_err());
    }
}

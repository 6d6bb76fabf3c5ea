//! Trino's array functions (`functions/array`) where DataFusion's differ: `array_remove` removes
//! every match (DataFusion's only the first), `contains` is DataFusion's `array_has`,
//! `array_position` is 0 when the element is not there (DataFusion's is NULL); and what
//! DataFusion lacks: `array_first`, `array_last`, `trim_array`, `slice`, `contains_sequence`,
//! `ngrams`, `combinations`, `shuffle`, `array_histogram`, `zip`, `sequence` (of integers).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, ListArray, UInt32Array};
use arrow::buffer::OffsetBuffer;
use arrow::compute::{concat, take};
use arrow::datatypes::{DataType, Field, Fields};
use arrow::row::{RowConverter, SortField};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{ScalarUDF, Volatility};

use crate::udf::{Delegate, invalid, is_integer, per_row, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        unnest_input("sqe_unnest_rows", true),
        unnest_input("sqe_unnest_outer", false),
        Delegate::new(
            "array_remove",
            |_: &[DataType]| datafusion::functions_nested::remove::array_remove_all_udf(),
            false,
        )
        .udf(),
        Delegate::new(
            "contains",
            |_: &[DataType]| datafusion::functions_nested::array_has::array_has_udf(),
            false,
        )
        .udf(),
        sequence(),
        array_position(),
        element("array_first", |items| items.first().copied()),
        element("array_last", |items| items.last().copied()),
        with_count(
            "trim_array",
            |values, n| {
                if n < 0 || n as usize > values.len() {
                    return invalid(format!(
                        "size must not be negative or larger than the array's length: {n}"
                    ));
                }
                Ok(vec![values.slice(0, values.len() - n as usize)])
            },
            false,
        ),
        with_count(
            "ngrams",
            |values, n| {
                if n <= 0 {
                    return invalid(format!("N must be positive: {n}"));
                }
                let n = n as usize;
                if values.len() <= n {
                    return Ok(vec![Arc::clone(values)]);
                }
                Ok((0..=values.len() - n).map(|i| values.slice(i, n)).collect())
            },
            true,
        ),
        with_count(
            "combinations",
            |values, n| {
                if n < 0 {
                    return invalid(format!("combination size must not be negative: {n}"));
                }
                if n > 5 {
                    return invalid(format!("combination size must not exceed 5: {n}"));
                }
                let (len, n) = (values.len(), n as usize);
                if n > len {
                    return Ok(Vec::new());
                }
                let count = (0..n).fold(1u128, |acc, i| acc * (len - i) as u128 / (i as u128 + 1));
                if count * n as u128 >= 100_000 {
                    return invalid(format!(
                        "combinations exceed max size: {count} combinations of {n}"
                    ));
                }
                let mut out = Vec::new();
                let mut pick: Vec<usize> = (0..n).collect();
                loop {
                    let indices = UInt32Array::from_iter_values(pick.iter().map(|&i| i as u32));
                    out.push(take(values.as_ref(), &indices, None)?);
                    // The next pick in lexicographic order.
                    let Some(i) = (0..n).rev().find(|&i| pick[i] < len - n + i) else {
                        break;
                    };
                    pick[i] += 1;
                    for j in i + 1..n {
                        pick[j] = pick[j - 1] + 1;
                    }
                }
                Ok(out)
            },
            true,
        ),
        slice(),
        contains_sequence(),
        shuffle(),
        array_histogram(),
        zip(),
    ]
}

/// `sequence(start, stop[, step])` of integers: at most 10,000 of them, as in Trino.
fn sequence() -> Arc<ScalarUDF> {
    per_row(
        "sequence",
        |args| {
            let interval = DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano);
            match args {
                [a, b] | [a, b, _]
                    if args.iter().all(is_integer) && is_integer(a) && is_integer(b) =>
                {
                    Ok(vec![DataType::Int64; args.len()])
                }
                [DataType::Date32, DataType::Date32] => Ok(args.to_vec()),
                [DataType::Date32, DataType::Date32, DataType::Interval(_)] => {
                    Ok(vec![DataType::Date32, DataType::Date32, interval])
                }
                [
                    t @ DataType::Timestamp(..),
                    u @ DataType::Timestamp(..),
                    DataType::Interval(_),
                ] => {
                    let t = if t == u {
                        t.clone()
                    } else {
                        DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None)
                    };
                    Ok(vec![t.clone(), t, interval])
                }
                _ => unexpected(
                    "sequence",
                    args,
                    &[
                        "bigint, bigint[, bigint]",
                        "date, date[, interval]",
                        "timestamp, timestamp, interval",
                    ],
                ),
            }
        },
        |args| Ok(DataType::new_list(args[0].clone(), true)),
        |row| match &row[0] {
            ScalarValue::Int64(_) => integers(row),
            _ => instants(row),
        },
    )
    .udf()
}

/// Trino's limit on a sequence's length: a longer one is refused, not built.
const SEQUENCE_LIMIT: i128 = 10_000;

fn wrong_direction<T>() -> Result<T> {
    invalid(
        "sequence stop value should be greater than or equal to start value if step is greater than zero otherwise stop should be less than or equal to start",
    )
}

fn integers(row: &[ScalarValue]) -> Result<ScalarValue> {
    let int = |v: &ScalarValue| match v {
        ScalarValue::Int64(Some(v)) => *v,
        _ => 0,
    };
    let (start, stop) = (int(&row[0]), int(&row[1]));
    let step = row.get(2).map_or(if start <= stop { 1 } else { -1 }, int);
    if step == 0 {
        return invalid("step must not be zero");
    }
    if (step > 0) != (start <= stop) && start != stop {
        return wrong_direction();
    }
    let count = (i128::from(stop) - i128::from(start)) / i128::from(step) + 1;
    if count > SEQUENCE_LIMIT {
        return invalid(format!(
            "result of sequence function must not have more than 10000 entries: {count}"
        ));
    }
    let values: Int64Array = (0..count as i64).map(|i| Some(start + i * step)).collect();
    list_of(
        &Arc::new(Field::new_list_field(DataType::Int64, true)),
        Arc::new(values),
    )
}

/// `sequence` of dates (a day apart by default) or timestamps, by an interval of months or of
/// days and time: the `i`-th element is `start + i × step`, up to `stop`.
fn instants(row: &[ScalarValue]) -> Result<ScalarValue> {
    use chrono::{DateTime, Duration, Months, NaiveDateTime};
    let (months, days, nanos) = match row.get(2) {
        None => (0, 1, 0),
        Some(ScalarValue::IntervalMonthDayNano(Some(i))) => (i.months, i.days, i.nanoseconds),
        Some(other) => return invalid(format!("sequence: the step is not an interval: {other}")),
    };
    if months != 0 && (days != 0 || nanos != 0) {
        return invalid("sequence: the step is either a year-to-month or a day-to-second interval");
    }
    // As a local date-time, and back into the start's type.
    let (t, unit) = match &row[0] {
        ScalarValue::Date32(Some(d)) => (
            DateTime::from_timestamp(i64::from(*d) * 86_400, 0).map(|t| t.naive_utc()),
            None,
        ),
        other => match timestamp_parts(other) {
            Some((v, per_second)) => (
                DateTime::from_timestamp(
                    v.div_euclid(per_second),
                    (v.rem_euclid(per_second) * (1_000_000_000 / per_second)) as u32,
                )
                .map(|t| t.naive_utc()),
                Some(per_second),
            ),
            None => (None, None),
        },
    };
    let stop = match &row[1] {
        ScalarValue::Date32(Some(d)) => {
            DateTime::from_timestamp(i64::from(*d) * 86_400, 0).map(|t| t.naive_utc())
        }
        other => timestamp_parts(other).and_then(|(v, per_second)| {
            DateTime::from_timestamp(
                v.div_euclid(per_second),
                (v.rem_euclid(per_second) * (1_000_000_000 / per_second)) as u32,
            )
            .map(|t| t.naive_utc())
        }),
    };
    let (Some(start), Some(stop)) = (t, stop) else {
        return invalid("sequence: a date or timestamp out of range");
    };
    if unit.is_none() && nanos != 0 {
        return invalid("sequence step must be a day interval if start and end values are dates");
    }
    let forward = months > 0 || (months == 0 && (days > 0 || (days == 0 && nanos > 0)));
    if months == 0 && days == 0 && nanos == 0 {
        return invalid("step must not be zero");
    }
    if start != stop && forward != (start < stop) {
        return wrong_direction();
    }
    let at = |i: i64| -> Option<NaiveDateTime> {
        let shifted = if months != 0 {
            let m = i64::from(months).checked_mul(i)?;
            if m >= 0 {
                start.checked_add_months(Months::new(u32::try_from(m).ok()?))?
            } else {
                start.checked_sub_months(Months::new(u32::try_from(-m).ok()?))?
            }
        } else {
            start
        };
        let span = Duration::days(i64::from(days).checked_mul(i)?)
            .checked_add(&Duration::nanoseconds(nanos.checked_mul(i)?))?;
        shifted.checked_add_signed(span)
    };
    let mut out = Vec::new();
    for i in 0.. {
        let Some(v) = at(i) else { break };
        if (forward && v > stop) || (!forward && v < stop) {
            break;
        }
        if out.len() as i128 >= SEQUENCE_LIMIT {
            return invalid("result of sequence function must not have more than 10000 entries");
        }
        out.push(v);
    }
    let t = row[0].data_type();
    let values = out.into_iter().map(|v| match (&t, unit) {
        (DataType::Date32, _) => Ok(ScalarValue::Date32(Some(
            (v.and_utc().timestamp().div_euclid(86_400)) as i32,
        ))),
        (_, Some(per_second)) => {
            let nanos = v.and_utc().timestamp_nanos_opt();
            let value = match nanos {
                Some(n) => n / (1_000_000_000 / per_second),
                None => v.and_utc().timestamp() * per_second,
            };
            Ok(match &t {
                DataType::Timestamp(arrow::datatypes::TimeUnit::Second, tz) => {
                    ScalarValue::TimestampSecond(Some(value), tz.clone())
                }
                DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, tz) => {
                    ScalarValue::TimestampMillisecond(Some(value), tz.clone())
                }
                DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, tz) => {
                    ScalarValue::TimestampMicrosecond(Some(value), tz.clone())
                }
                DataType::Timestamp(_, tz) => {
                    ScalarValue::TimestampNanosecond(Some(value), tz.clone())
                }
                _ => return invalid("sequence: unexpected type"),
            })
        }
        _ => invalid("sequence: unexpected type"),
    });
    let values = values.collect::<Result<Vec<_>>>()?;
    let array = if values.is_empty() {
        arrow::array::new_empty_array(&t)
    } else {
        ScalarValue::iter_to_array(values)?
    };
    list_of(&Arc::new(Field::new_list_field(t, true)), array)
}

/// A timestamp scalar's value and its units per second.
fn timestamp_parts(v: &ScalarValue) -> Option<(i64, i64)> {
    match v {
        ScalarValue::TimestampSecond(Some(v), _) => Some((*v, 1)),
        ScalarValue::TimestampMillisecond(Some(v), _) => Some((*v, 1_000)),
        ScalarValue::TimestampMicrosecond(Some(v), _) => Some((*v, 1_000_000)),
        ScalarValue::TimestampNanosecond(Some(v), _) => Some((*v, 1_000_000_000)),
        _ => None,
    }
}

/// A list argument as these functions read it.
fn list_type(t: &DataType) -> Option<DataType> {
    match t {
        DataType::List(_) => Some(t.clone()),
        DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            Some(DataType::List(Arc::clone(f)))
        }
        DataType::Null => Some(DataType::new_list(DataType::Null, true)),
        _ => None,
    }
}

/// The coercion of a function of one array.
fn one_list(name: &str, args: &[DataType]) -> Result<Vec<DataType>> {
    match args {
        [t] => list_type(t)
            .map(|t| vec![t])
            .map_or_else(|| unexpected(name, args, &["array(E)"]), Ok),
        _ => unexpected(name, args, &["array(E)"]),
    }
}

/// The elements of a one-row list value.
fn items(v: &ScalarValue) -> ArrayRef {
    match v {
        ScalarValue::List(l) => l.value(0),
        _ => arrow::array::new_empty_array(&DataType::Null),
    }
}

/// One list value holding these elements.
fn list_of(field: &Arc<Field>, values: ArrayRef) -> Result<ScalarValue> {
    let len = values.len();
    Ok(ScalarValue::List(Arc::new(ListArray::try_new(
        Arc::clone(field),
        OffsetBuffer::from_lengths([len]),
        values,
        None,
    )?)))
}

fn element_field(t: &DataType) -> Arc<Field> {
    match t {
        DataType::List(f) => Arc::clone(f),
        _ => Arc::new(Field::new_list_field(DataType::Null, true)),
    }
}

/// `array_first`/`array_last`: one element, NULL for an empty array.
fn element(name: &'static str, pick: fn(&[usize]) -> Option<usize>) -> Arc<ScalarUDF> {
    per_row(
        name,
        move |args| one_list(name, args),
        |args| Ok(element_field(&args[0]).data_type().clone()),
        move |row| {
            let values = items(&row[0]);
            let positions: Vec<usize> = (0..values.len()).collect();
            match pick(&positions) {
                Some(i) => ScalarValue::try_from_array(&values, i),
                None => ScalarValue::try_from(values.data_type()),
            }
        },
    )
    .udf()
}

/// A function of an array and a count; `nested`: its answer is an array of arrays.
fn with_count(
    name: &'static str,
    f: fn(&ArrayRef, i64) -> Result<Vec<ArrayRef>>,
    nested: bool,
) -> Arc<ScalarUDF> {
    per_row(
        name,
        move |args| match args {
            [t, n] if is_integer(n) => list_type(t)
                .map(|t| vec![t, DataType::Int64])
                .map_or_else(|| unexpected(name, args, &["array(E), bigint"]), Ok),
            _ => unexpected(name, args, &["array(E), bigint"]),
        },
        move |args| {
            Ok(if nested {
                DataType::new_list(args[0].clone(), true)
            } else {
                args[0].clone()
            })
        },
        move |row| {
            let ScalarValue::Int64(Some(n)) = row[1] else {
                return invalid(format!("{name}: the count must be a bigint"));
            };
            let values = items(&row[0]);
            let field = element_field(&row[0].data_type());
            let parts = f(&values, n)?;
            if !nested {
                return list_of(&field, parts.into_iter().next().unwrap_or(values));
            }
            let inner = DataType::List(Arc::clone(&field));
            let lists: Vec<ArrayRef> = parts
                .into_iter()
                .map(|p| list_of(&field, p).and_then(|v| v.to_array()))
                .collect::<Result<_>>()?;
            let refs: Vec<&dyn Array> = lists.iter().map(|a| a.as_ref()).collect();
            let values = if refs.is_empty() {
                arrow::array::new_empty_array(&inner)
            } else {
                concat(&refs)?
            };
            list_of(&Arc::new(Field::new_list_field(inner, true)), values)
        },
    )
    .udf()
}

/// `slice(x, start, length)`: `length` elements from the 1-based `start` (from the end when
/// negative).
fn slice() -> Arc<ScalarUDF> {
    per_row(
        "slice",
        |args| match args {
            [t, s, l] if is_integer(s) && is_integer(l) => list_type(t)
                .map(|t| vec![t, DataType::Int64, DataType::Int64])
                .map_or_else(
                    || unexpected("slice", args, &["array(E), bigint, bigint"]),
                    Ok,
                ),
            _ => unexpected("slice", args, &["array(E), bigint, bigint"]),
        },
        |args| Ok(args[0].clone()),
        |row| {
            let (ScalarValue::Int64(Some(start)), ScalarValue::Int64(Some(length))) =
                (&row[1], &row[2])
            else {
                return invalid("slice: start and length must be bigints");
            };
            if *start == 0 {
                return invalid("SQL array indices start at 1");
            }
            if *length < 0 {
                return invalid(format!(
                    "length must be greater than or equal to 0: {length}"
                ));
            }
            let values = items(&row[0]);
            let len = values.len() as i64;
            let from = if *start > 0 { start - 1 } else { len + start };
            let field = element_field(&row[0].data_type());
            if from < 0 || from >= len {
                return list_of(&field, values.slice(0, 0));
            }
            let count = (*length).min(len - from);
            list_of(&field, values.slice(from as usize, count as usize))
        },
    )
    .udf()
}

/// Each element of an array as comparable bytes, so that equal values compare equal whatever
/// their type (NULL equals NULL).
fn keys(values: &ArrayRef) -> Result<(RowConverter, arrow::row::Rows)> {
    let converter = RowConverter::new(vec![SortField::new(values.data_type().clone())])?;
    let rows = converter.convert_columns(&[Arc::clone(values)])?;
    Ok((converter, rows))
}

/// `contains_sequence(x, seq)`: whether `seq` occurs in `x` as consecutive elements.
fn contains_sequence() -> Arc<ScalarUDF> {
    per_row(
        "contains_sequence",
        |args| match args {
            [a, b] => match (list_type(a), list_type(b)) {
                (Some(a), Some(b)) => {
                    let common =
                        datafusion::logical_expr::type_coercion::binary::comparison_coercion(
                            &a, &b,
                        )
                        .unwrap_or(a);
                    Ok(vec![common.clone(), common])
                }
                _ => unexpected("contains_sequence", args, &["array(T), array(T)"]),
            },
            _ => unexpected("contains_sequence", args, &["array(T), array(T)"]),
        },
        |_| Ok(DataType::Boolean),
        |row| {
            let (x, seq) = (items(&row[0]), items(&row[1]));
            if seq.is_empty() {
                return Ok(ScalarValue::Boolean(Some(true)));
            }
            let both = concat(&[x.as_ref(), seq.as_ref()])?;
            let (_, rows) = keys(&both)?;
            let (n, m) = (x.len(), seq.len());
            let found =
                n >= m && (0..=n - m).any(|i| (0..m).all(|j| rows.row(i + j) == rows.row(n + j)));
            Ok(ScalarValue::Boolean(Some(found)))
        },
    )
    .udf()
}

/// `shuffle(x)`: the elements in a random order.
fn shuffle() -> Arc<ScalarUDF> {
    let mut f = per_row(
        "shuffle",
        |args| one_list("shuffle", args),
        |args| Ok(args[0].clone()),
        |row| {
            let values = items(&row[0]);
            let mut order: Vec<u32> = (0..values.len() as u32).collect();
            // Fisher–Yates with the thread's random numbers.
            for i in (1..order.len()).rev() {
                let j = (rand_u64() % (i as u64 + 1)) as usize;
                order.swap(i, j);
            }
            let shuffled = take(values.as_ref(), &UInt32Array::from(order), None)?;
            list_of(&element_field(&row[0].data_type()), shuffled)
        },
    );
    f.set_volatility(Volatility::Volatile);
    f.udf()
}

/// A random number from the standard library's randomly keyed hasher.
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}

/// `array_histogram(x)`: each distinct non-NULL element and how many times it occurs, in the order
/// of first occurrence.
fn array_histogram() -> Arc<ScalarUDF> {
    per_row(
        "array_histogram",
        |args| one_list("array_histogram", args),
        |args| Ok(count_map(element_field(&args[0]).data_type())),
        |row| {
            let values = items(&row[0]);
            let (_, rows) = keys(&values)?;
            let mut firsts: Vec<usize> = Vec::new();
            let mut counts: Vec<i64> = Vec::new();
            let mut seen = std::collections::HashMap::new();
            // A NULL array's elements have no validity bits: its logical nulls say which are.
            let nulls = values.logical_nulls();
            for i in 0..values.len() {
                if nulls.as_ref().is_some_and(|n| n.is_null(i)) {
                    continue;
                }
                match seen.get(&rows.row(i)) {
                    Some(&k) => counts[k] += 1,
                    None => {
                        seen.insert(rows.row(i), firsts.len());
                        firsts.push(i);
                        counts.push(1);
                    }
                }
            }
            let keys = take(
                values.as_ref(),
                &UInt32Array::from_iter_values(firsts.iter().map(|&i| i as u32)),
                None,
            )?;
            let ty = count_map(values.data_type());
            let keys = match &ty {
                DataType::Map(e, _) => match e.data_type() {
                    DataType::Struct(kv) => arrow::compute::cast(&keys, kv[0].data_type())?,
                    _ => keys,
                },
                _ => keys,
            };
            crate::map::one_map(&ty, keys, Arc::new(Int64Array::from(counts)))
        },
    )
    .udf()
}

/// `map(key, bigint)` (keys of an array of NULLs as VARCHAR: a map key has a type).
fn count_map(key: &DataType) -> DataType {
    let key = if key.is_null() { &DataType::Utf8 } else { key };
    crate::map::map_type(key, &DataType::Int64)
}

/// `zip(a, b, …)`: rows of the elements at each position, the shorter arrays padded with NULLs.
fn zip() -> Arc<ScalarUDF> {
    per_row(
        "zip",
        |args| {
            let lists: Option<Vec<DataType>> = args.iter().map(list_type).collect();
            match lists {
                Some(l) if (2..=5).contains(&l.len()) => Ok(l),
                _ => unexpected("zip", args, &["array(T1), array(T2), …"]),
            }
        },
        |args| Ok(DataType::new_list(DataType::Struct(zip_fields(args)), true)),
        |row| {
            let arrays: Vec<ArrayRef> = row.iter().map(items).collect();
            let longest = arrays.iter().map(|a| a.len()).max().unwrap_or(0);
            let columns: Vec<ArrayRef> = arrays
                .iter()
                .map(|a| {
                    let at: UInt32Array = (0..longest)
                        .map(|i| (i < a.len()).then_some(i as u32))
                        .collect();
                    take(a.as_ref(), &at, None)
                })
                .collect::<std::result::Result<_, _>>()?;
            let types: Vec<DataType> = row.iter().map(|v| v.data_type()).collect();
            let rows = arrow::array::StructArray::try_new(zip_fields(&types), columns, None)?;
            let field = Arc::new(Field::new_list_field(rows.data_type().clone(), true));
            list_of(&field, Arc::new(rows))
        },
    )
    .udf()
}

fn zip_fields(lists: &[DataType]) -> Fields {
    lists
        .iter()
        .enumerate()
        .map(|(i, t)| {
            Field::new(
                format!("field{i}"),
                element_field(t).data_type().clone(),
                true,
            )
        })
        .collect()
}

/// The fields of an UNNEST element that spreads over several columns (a map's entry, a row), renamed
/// `f1`, `f2`, … so that the UNNEST rewrite (engine-pool's trino_sql/unnest.rs) can read them by position.
fn positional(fields: &Fields) -> Fields {
    fields
        .iter()
        .enumerate()
        .map(|(i, f)| Arc::new(f.as_ref().clone().with_name(format!("f{}", i + 1))))
        .collect()
}

/// What UNNEST reads, for engine-pool's trino_sql/unnest.rs: `sqe_unnest_rows(x, outer)` gives a map's
/// entries or an array's rows as rows of fields `f1`, `f2`, …; `sqe_unnest_outer(x, outer)` the
/// array itself. With `outer` (a LEFT JOIN UNNEST), a NULL or empty array is one NULL element, so
/// that its row is kept.
fn unnest_input(name: &'static str, rows: bool) -> Arc<ScalarUDF> {
    let element = move |t: &DataType| -> Result<DataType> {
        match t {
            DataType::Map(entries, _) if rows => match entries.data_type() {
                DataType::Struct(kv) => Ok(DataType::Struct(positional(kv))),
                other => invalid(format!("UNNEST: unexpected map entries {other}")),
            },
            DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
                match f.data_type() {
                    DataType::Struct(fields) if rows => Ok(DataType::Struct(positional(fields))),
                    _ if rows => invalid(format!(
                        "UNNEST names several columns for one array, whose elements are not rows: {}",
                        crate::udf::type_name(t)
                    )),
                    other => Ok(other.clone()),
                }
            }
            DataType::Null => Ok(DataType::Null),
            other => invalid(format!(
                "UNNEST takes an array or a map, not {}",
                crate::udf::type_name(other)
            )),
        }
    };
    crate::udf::Scalar::new(
        name,
        move |args| match args {
            [t, DataType::Boolean] => {
                element(t)?;
                Ok(args.to_vec())
            }
            _ => unexpected(name, args, &["array", "boolean"]),
        },
        move |args| Ok(DataType::new_list(element(&args[0])?, true)),
        move |args, ty| {
            let outer = args[1]
                .as_any()
                .downcast_ref::<arrow::array::BooleanArray>()
                .is_some_and(|b| !b.is_empty() && b.value(0));
            let DataType::List(out_field) = ty else {
                return invalid(format!("{name}: returns {ty}"));
            };
            let (offsets, values, nulls): (
                Vec<usize>,
                ArrayRef,
                Option<arrow::buffer::NullBuffer>,
            ) = match args[0].data_type() {
                DataType::Map(..) => {
                    let m = args[0].as_any().downcast_ref::<arrow::array::MapArray>();
                    let Some(m) = m else {
                        return invalid("expected a map");
                    };
                    let entries: ArrayRef = Arc::new(m.entries().clone());
                    (
                        m.value_offsets().iter().map(|o| *o as usize).collect(),
                        entries,
                        m.nulls().cloned(),
                    )
                }
                DataType::Null => (
                    vec![0; args[0].len() + 1],
                    arrow::array::new_null_array(&DataType::Null, 0),
                    Some(arrow::buffer::NullBuffer::new_null(args[0].len())),
                ),
                _ => {
                    let list = arrow::compute::cast(
                        &args[0],
                        &DataType::new_list(
                            match args[0].data_type() {
                                DataType::List(f)
                                | DataType::LargeList(f)
                                | DataType::FixedSizeList(f, _) => f.data_type().clone(),
                                other => other.clone(),
                            },
                            true,
                        ),
                    )?;
                    let l = list.as_any().downcast_ref::<ListArray>();
                    let Some(l) = l else {
                        return invalid("expected an array");
                    };
                    (
                        l.value_offsets().iter().map(|o| *o as usize).collect(),
                        Arc::clone(l.values()),
                        l.nulls().cloned(),
                    )
                }
            };
            // The element values, renamed to positional fields where they are rows.
            let values: ArrayRef = match (values.data_type(), out_field.data_type()) {
                (DataType::Struct(_), DataType::Struct(fields)) => {
                    let s = values.as_any().downcast_ref::<arrow::array::StructArray>();
                    let Some(s) = s else {
                        return invalid("expected rows");
                    };
                    Arc::new(arrow::array::StructArray::try_new(
                        fields.clone(),
                        s.columns().to_vec(),
                        s.nulls().cloned(),
                    )?)
                }
                _ => values,
            };
            let mut take_at: Vec<Option<u32>> = Vec::new();
            let mut out_offsets = vec![0i32];
            let mut out_nulls = Vec::new();
            for row in 0..args[0].len() {
                let valid = nulls.as_ref().is_none_or(|n| n.is_valid(row));
                let (start, end) = (offsets[row], offsets[row + 1]);
                if valid && end > start {
                    take_at.extend((start..end).map(|i| Some(i as u32)));
                    out_nulls.push(true);
                } else if outer {
                    take_at.push(None);
                    out_nulls.push(true);
                } else {
                    out_nulls.push(valid);
                }
                out_offsets.push(take_at.len() as i32);
            }
            let taken = if values.data_type().is_null() {
                arrow::array::new_null_array(out_field.data_type(), take_at.len())
            } else {
                take(values.as_ref(), &UInt32Array::from(take_at), None)?
            };
            Ok(Arc::new(ListArray::try_new(
                Arc::clone(out_field),
                OffsetBuffer::new(out_offsets.into()),
                taken,
                Some(arrow::buffer::NullBuffer::from(out_nulls)),
            )?) as ArrayRef)
        },
    )
    .udf()
}

/// `array_position(x, element)`: the position (from 1) of the element's first occurrence in `x`, 0
/// if it is not there; NULL if either is.
fn array_position() -> Arc<ScalarUDF> {
    per_row(
        "array_position",
        |args| {
            let common = match args {
                [DataType::List(item), x] => {
                    datafusion::logical_expr::type_coercion::binary::comparison_coercion(
                        item.data_type(),
                        x,
                    )
                }
                _ => None,
            };
            match common {
                Some(t) => Ok(vec![
                    DataType::List(Arc::new(Field::new_list_field(t.clone(), true))),
                    t,
                ]),
                None => unexpected("array_position", args, &["array(E), E"]),
            }
        },
        |_| Ok(DataType::Int64),
        |row| {
            let ScalarValue::List(list) = &row[0] else {
                return invalid("array_position takes an array");
            };
            let values = list.value(0);
            for i in 0..values.len() {
                if ScalarValue::try_from_array(&values, i)? == row[1] {
                    return Ok(ScalarValue::Int64(Some(i as i64 + 1)));
                }
            }
            Ok(ScalarValue::Int64(Some(0)))
        },
    )
    .udf()
}

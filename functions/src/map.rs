//! Trino's map functions (`functions/map`) that DataFusion lacks or answers otherwise:
//! `element_at` of a map (the value, where DataFusion's gives a one-element array),
//! `map_concat`, `map_from_entries`, `multimap_from_entries`. The lambda forms are in `lambda.rs`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StructArray, UInt32Array};
use arrow::compute::{concat, take};
use arrow::datatypes::{DataType, Field, Fields};
use arrow::row::{RowConverter, SortField};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::ScalarUDF;

use crate::udf::{Delegate, invalid, per_row, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        Delegate::new("element_at", pick_element_at, false).udf(),
        map_concat(),
        from_entries("map_from_entries", false),
        from_entries("multimap_from_entries", true),
    ]
}

/// `map(key, value)` as SQE builds maps.
pub(crate) fn map_type(key: &DataType, value: &DataType) -> DataType {
    let fields = Fields::from(vec![
        Field::new("key", key.clone(), false),
        Field::new("value", value.clone(), true),
    ]);
    DataType::Map(
        Arc::new(Field::new("entries", DataType::Struct(fields), false)),
        false,
    )
}

fn pick_element_at(types: &[DataType]) -> Arc<ScalarUDF> {
    if matches!(types.first(), Some(DataType::Map(..))) {
        map_element_at()
    } else {
        datafusion::functions_nested::extract::array_element_udf()
    }
}

/// One map value's keys and values.
fn entries(v: &ScalarValue) -> (ArrayRef, ArrayRef) {
    match v {
        ScalarValue::Map(m) => {
            let e = m.value(0);
            (Arc::clone(e.column(0)), Arc::clone(e.column(1)))
        }
        _ => {
            let empty = arrow::array::new_empty_array(&DataType::Null);
            (Arc::clone(&empty), empty)
        }
    }
}

/// One map value of these keys and values.
pub(crate) fn one_map(ty: &DataType, keys: ArrayRef, values: ArrayRef) -> Result<ScalarValue> {
    let DataType::Map(entries, ordered) = ty else {
        return invalid("expected a map type");
    };
    let DataType::Struct(fields) = entries.data_type() else {
        return invalid("expected map entries");
    };
    let count = keys.len();
    let entry = StructArray::try_new(fields.clone(), vec![keys, values], None)?;
    let map = arrow::array::MapArray::try_new(
        Arc::clone(entries),
        arrow::buffer::OffsetBuffer::from_lengths([count]),
        entry,
        None,
        *ordered,
    )?;
    Ok(ScalarValue::Map(Arc::new(map)))
}

/// `element_at(map, key)`: the key's value, NULL when the map has no such key.
fn map_element_at() -> Arc<ScalarUDF> {
    per_row(
        "element_at",
        |args| match args {
            [m @ DataType::Map(e, _), _] => match e.data_type() {
                DataType::Struct(kv) => Ok(vec![m.clone(), kv[0].data_type().clone()]),
                _ => unexpected("element_at", args, &["map(K, V), K"]),
            },
            _ => unexpected("element_at", args, &["map(K, V), K"]),
        },
        |args| match &args[0] {
            DataType::Map(e, _) => match e.data_type() {
                DataType::Struct(kv) => Ok(kv[1].data_type().clone()),
                _ => invalid("expected map entries"),
            },
            _ => invalid("expected a map"),
        },
        |row| {
            let (keys, values) = entries(&row[0]);
            let wanted = row[1].to_array()?;
            let both = concat(&[keys.as_ref(), wanted.as_ref()])?;
            let converter = RowConverter::new(vec![SortField::new(both.data_type().clone())])?;
            let rows = converter.convert_columns(&[both])?;
            let target = rows.row(keys.len());
            match (0..keys.len()).find(|&i| rows.row(i) == target) {
                Some(i) => ScalarValue::try_from_array(&values, i),
                None => ScalarValue::try_from(values.data_type()),
            }
        },
    )
    .udf()
}

/// `map_concat(m1, m2, …)`: every map's entries; a key in several maps takes the last one's value.
fn map_concat() -> Arc<ScalarUDF> {
    per_row(
        "map_concat",
        |args| {
            if !args.is_empty() && args.iter().all(|t| matches!(t, DataType::Map(..))) {
                let first = args[0].clone();
                if args.iter().all(|t| t == &first) {
                    return Ok(args.to_vec());
                }
            }
            unexpected("map_concat", args, &["map(K, V), map(K, V), …"])
        },
        |args| Ok(args[0].clone()),
        |row| {
            let pairs: Vec<(ArrayRef, ArrayRef)> = row.iter().map(entries).collect();
            let keys: Vec<&dyn Array> = pairs.iter().map(|(k, _)| k.as_ref()).collect();
            let values: Vec<&dyn Array> = pairs.iter().map(|(_, v)| v.as_ref()).collect();
            let (keys, values) = (concat(&keys)?, concat(&values)?);
            let converter = RowConverter::new(vec![SortField::new(keys.data_type().clone())])?;
            let rows = converter.convert_columns(&[Arc::clone(&keys)])?;
            // Each key at its first place, with its last value (`order` holds where that is).
            let mut order: Vec<usize> = Vec::new();
            let mut at = std::collections::HashMap::new();
            for i in 0..keys.len() {
                match at.get(&rows.row(i)) {
                    Some(&slot) => {
                        let place: &mut usize = &mut order[slot];
                        *place = i;
                    }
                    None => {
                        at.insert(rows.row(i), order.len());
                        order.push(i);
                    }
                }
            }
            let ty = row[0].data_type();
            let picked = UInt32Array::from_iter_values(order.iter().map(|&i| i as u32));
            one_map(
                &ty,
                take(keys.as_ref(), &picked, None)?,
                take(values.as_ref(), &picked, None)?,
            )
        },
    )
    .udf()
}

/// `map_from_entries(array(row(K, V)))` (`multi`: `multimap_from_entries`, each key's values as
/// an array in order).
fn from_entries(name: &'static str, multi: bool) -> Arc<ScalarUDF> {
    per_row(
        name,
        move |args| match args {
            [DataType::List(f)] if matches!(f.data_type(), DataType::Struct(kv) if kv.len() == 2) => {
                Ok(args.to_vec())
            }
            _ => unexpected(name, args, &["array(row(K, V))"]),
        },
        move |args| {
            let DataType::List(f) = &args[0] else {
                return invalid("expected an array of rows");
            };
            let DataType::Struct(kv) = f.data_type() else {
                return invalid("expected an array of rows");
            };
            let value = kv[1].data_type().clone();
            Ok(map_type(
                kv[0].data_type(),
                &if multi { DataType::new_list(value, true) } else { value },
            ))
        },
        move |row| {
            let ScalarValue::List(list) = &row[0] else {
                return invalid("expected an array of rows");
            };
            let items = list.value(0);
            let pairs = items.as_struct();
            if pairs.null_count() > 0 {
                return invalid("map entry cannot be null");
            }
            let (keys, values) = (Arc::clone(pairs.column(0)), Arc::clone(pairs.column(1)));
            if keys.null_count() > 0 {
                return invalid("map key cannot be null");
            }
            let converter = RowConverter::new(vec![SortField::new(keys.data_type().clone())])?;
            let rows = converter.convert_columns(&[Arc::clone(&keys)])?;
            let mut groups: Vec<Vec<u32>> = Vec::new();
            let mut at: std::collections::HashMap<arrow::row::Row<'_>, usize> =
                std::collections::HashMap::new();
            for i in 0..keys.len() {
                match at.get(&rows.row(i)) {
                    Some(&g) if multi => groups[g].push(i as u32),
                    Some(_) => {
                        let shown = arrow::util::display::array_value_to_string(&keys, i)?;
                        return invalid(format!("Duplicate map keys ({shown}) are not allowed"));
                    }
                    None => {
                        at.insert(rows.row(i), groups.len());
                        groups.push(vec![i as u32]);
                    }
                }
            }
            let firsts = UInt32Array::from_iter_values(groups.iter().map(|g| g[0]));
            let out_keys = take(keys.as_ref(), &firsts, None)?;
            let DataType::List(f) = row[0].data_type() else {
                return invalid("expected an array of rows");
            };
            let DataType::Struct(kv) = f.data_type() else {
                return invalid("expected an array of rows");
            };
            let value_type = kv[1].data_type().clone();
            let ty = map_type(
                kv[0].data_type(),
                &if multi { DataType::new_list(value_type.clone(), true) } else { value_type.clone() },
            );
            let out_values: ArrayRef = if multi {
                let flat: Vec<u32> = groups.iter().flatten().copied().collect();
                let taken = take(values.as_ref(), &UInt32Array::from(flat), None)?;
                let mut offsets = vec![0i32];
                for g in &groups {
                    offsets.push(offsets.last().copied().unwrap_or(0) + g.len() as i32);
                }
                Arc::new(arrow::array::ListArray::try_new(
                    Arc::new(Field::new_list_field(value_type, true)),
                    arrow::buffer::OffsetBuffer::new(offsets.into()),
                    taken,
                    None,
                )?)
            } else {
                take(values.as_ref(), &firsts, None)?
            };
            one_map(&ty, out_keys, out_values)
        },
    )
    .udf()
}

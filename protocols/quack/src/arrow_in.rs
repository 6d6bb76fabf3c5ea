//! DuckDB DataChunks, as appends carry them, turned into Arrow record batches: flat vectors value
//! by value, constants repeated, dictionaries gathered, sequences counted out. Each DuckDB type
//! becomes the Arrow type SQE's tables take (a zoned timestamp is microseconds in UTC, a UUID
//! sixteen big-endian bytes, a HUGEINT a DECIMAL(38, 0)). A type with no Arrow counterpart, or
//! values that do not hold together, is an error naming the column.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryBuilder, BooleanArray, Decimal128Array, FixedSizeBinaryArray,
    FixedSizeListArray, Int64Array, ListArray, MapArray, NullArray, PrimitiveArray, RecordBatch,
    RecordBatchOptions, StringBuilder, StructArray, UInt32Array,
};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::compute::{CastOptions, cast_with_options, take};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Field, Fields, Float32Type, Float64Type, Int8Type,
    Int16Type, Int32Type, Int64Type, IntervalMonthDayNano, IntervalMonthDayNanoType, Schema,
    Time64MicrosecondType, Time64NanosecondType, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};

use crate::chunk::{Chunk, Data, LogicalType, TypeInfo, Vector, id};

/// The most child values the lists of one vector may reach together: a chunk's lists may point
/// at the same child values again and again, which must not multiply into an unbounded array.
pub const MAX_LIST_VALUES: usize = 1 << 24;

/// The most bytes one chunk's compressed vectors (constants, dictionaries, sequences, lists that
/// share their values) may expand into: a few bytes on the wire must not become gigabytes.
pub const MAX_EXPANDED_BYTES: usize = 256 << 20;

/// What is left of a chunk's [`MAX_EXPANDED_BYTES`].
struct Budget(usize);

impl Budget {
    fn spend(&mut self, bytes: usize) -> Result<(), String> {
        self.0 = self.0.checked_sub(bytes).ok_or_else(|| {
            format!("its values expand past {MAX_EXPANDED_BYTES} bytes in one chunk")
        })?;
        Ok(())
    }
}

/// `chunk` as a record batch whose columns are called `names`.
pub fn to_batch(chunk: &Chunk, names: &[String]) -> Result<RecordBatch, String> {
    if names.len() != chunk.vectors.len() {
        return Err(format!(
            "the rows have {} columns, the table {}",
            chunk.vectors.len(),
            names.len()
        ));
    }
    let mut fields = Vec::with_capacity(names.len());
    let mut columns = Vec::with_capacity(names.len());
    let mut budget = Budget(MAX_EXPANDED_BYTES);
    for ((vector, ty), name) in chunk.vectors.iter().zip(&chunk.types).zip(names) {
        let array = to_array(vector, ty, chunk.rows, &mut budget)
            .map_err(|e| format!("column '{name}': {e}"))?;
        fields.push(Field::new(name, array.data_type().clone(), true));
        columns.push(array);
    }
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(chunk.rows)),
    )
    .map_err(|e| e.to_string())
}

/// `rows` values of type `ty`.
fn to_array(
    vector: &Vector,
    ty: &LogicalType,
    rows: usize,
    budget: &mut Budget,
) -> Result<ArrayRef, String> {
    match vector {
        Vector::Flat { validity, data } => flat(ty, rows, validity.as_deref(), data, budget),
        Vector::Constant(one) => {
            let one = to_array(one, ty, 1, budget)?;
            let each = row_bytes(one.as_ref()).first().copied().unwrap_or(1);
            budget.spend(rows.saturating_mul(each + 4))?;
            gather(&one, vec![0; rows])
        }
        Vector::Dictionary {
            selection,
            size,
            dictionary,
        } => {
            let values = to_array(dictionary, ty, *size, budget)?;
            let sizes = row_bytes(values.as_ref());
            let total = selection
                .iter()
                .map(|i| sizes.get(*i as usize).copied().unwrap_or(0) + 4)
                .fold(0usize, usize::saturating_add);
            budget.spend(total)?;
            gather(&values, selection.clone())
        }
        Vector::Sequence { start, increment } => {
            let integer = matches!(
                ty.id,
                id::TINYINT
                    | id::SMALLINT
                    | id::INTEGER
                    | id::BIGINT
                    | id::UTINYINT
                    | id::USMALLINT
                    | id::UINTEGER
                    | id::UBIGINT
            );
            if !integer {
                return Err(format!("a sequence of {} values", ty.sql()));
            }
            budget.spend(rows.saturating_mul(16))?;
            let values = Int64Array::from_iter_values(
                (0..rows as i64).map(|i| start.wrapping_add(i.wrapping_mul(*increment))),
            );
            let target = flat(ty, 0, None, &Data::Fixed(Vec::new()), budget)?;
            let options = CastOptions {
                safe: false,
                ..CastOptions::default()
            };
            cast_with_options(&values, target.data_type(), &options).map_err(|e| e.to_string())
        }
    }
}

fn gather(values: &ArrayRef, indices: Vec<u32>) -> Result<ArrayRef, String> {
    take(values.as_ref(), &UInt32Array::from(indices), None).map_err(|e| e.to_string())
}

/// About how many bytes each row of `array` takes (at least one), to price copying it.
fn row_bytes(array: &dyn Array) -> Vec<usize> {
    fn spans(sizes: &[usize], bounds: impl Iterator<Item = (usize, usize)>) -> Vec<usize> {
        let mut sums = Vec::with_capacity(sizes.len() + 1);
        sums.push(0usize);
        for size in sizes {
            sums.push(sums.last().copied().unwrap_or(0).saturating_add(*size));
        }
        let at = |i: usize| sums.get(i).copied().unwrap_or(usize::MAX);
        bounds
            .map(|(a, b)| at(b).saturating_sub(at(a)).saturating_add(4))
            .collect()
    }
    match array.data_type() {
        DataType::Utf8 | DataType::Binary => {
            let offsets = match array.as_string_opt::<i32>() {
                Some(text) => text.offsets(),
                None => array.as_binary::<i32>().offsets(),
            };
            offsets
                .windows(2)
                .map(|w| (w[1] - w[0]) as usize + 4)
                .collect()
        }
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            let child = row_bytes(list.values().as_ref());
            let bounds = list
                .offsets()
                .windows(2)
                .map(|w| (w[0] as usize, w[1] as usize));
            spans(&child, bounds)
        }
        DataType::Map(..) => {
            let map = array.as_map();
            let child = row_bytes(map.entries());
            let bounds = map
                .value_offsets()
                .windows(2)
                .map(|w| (w[0] as usize, w[1] as usize));
            spans(&child, bounds)
        }
        DataType::FixedSizeList(_, size) => {
            let list = array.as_fixed_size_list();
            let child = row_bytes(list.values().as_ref());
            let size = (*size).max(0) as usize;
            let bounds = (0..list.len()).map(|i| {
                let start = list.value_offset(i).max(0) as usize;
                (start, start + size)
            });
            spans(&child, bounds)
        }
        DataType::Struct(_) => {
            let mut sizes = vec![1usize; array.len()];
            for column in array.as_struct().columns() {
                for (size, more) in sizes.iter_mut().zip(row_bytes(column.as_ref())) {
                    *size = size.saturating_add(more);
                }
            }
            sizes
        }
        other => vec![other.primitive_width().unwrap_or(1).max(1); array.len()],
    }
}

/// Fixed-width values read `N` bytes at a time.
fn values<T: ArrowPrimitiveType, const N: usize>(
    bytes: &[u8],
    rows: usize,
    nulls: Option<NullBuffer>,
    from: impl Fn([u8; N]) -> T::Native,
) -> Result<PrimitiveArray<T>, String> {
    if bytes.len() != rows * N {
        return Err(format!("{} bytes for {rows} values of {N}", bytes.len()));
    }
    let values: Vec<T::Native> = bytes
        .chunks_exact(N)
        .map(|b| from(b.try_into().unwrap_or([0; N])))
        .collect();
    PrimitiveArray::<T>::try_new(ScalarBuffer::from(values), nulls).map_err(|e| e.to_string())
}

fn hugeint(b: [u8; 16]) -> i128 {
    let lower = u64::from_le_bytes(b[..8].try_into().unwrap_or_default());
    let upper = i64::from_le_bytes(b[8..].try_into().unwrap_or_default());
    (i128::from(upper) << 64) | i128::from(lower)
}

fn flat(
    ty: &LogicalType,
    rows: usize,
    validity: Option<&[u64]>,
    data: &Data,
    budget: &mut Budget,
) -> Result<ArrayRef, String> {
    let nulls = validity.map(|words| {
        NullBuffer::new(BooleanBuffer::new(
            Buffer::from_vec(words.to_vec()),
            0,
            rows,
        ))
    });
    let fixed = || match data {
        Data::Fixed(bytes) => Ok(bytes.as_slice()),
        _ => Err(format!("type id {} without its values", ty.id)),
    };
    let array: ArrayRef = match ty.id {
        id::SQLNULL => Arc::new(NullArray::new(rows)),
        id::BOOLEAN => {
            let bytes = fixed()?;
            Arc::new(BooleanArray::new(
                bytes.iter().map(|b| *b != 0).collect(),
                nulls,
            ))
        }
        id::TINYINT => Arc::new(values::<Int8Type, 1>(
            fixed()?,
            rows,
            nulls,
            i8::from_le_bytes,
        )?),
        id::SMALLINT => Arc::new(values::<Int16Type, 2>(
            fixed()?,
            rows,
            nulls,
            i16::from_le_bytes,
        )?),
        id::INTEGER => Arc::new(values::<Int32Type, 4>(
            fixed()?,
            rows,
            nulls,
            i32::from_le_bytes,
        )?),
        id::BIGINT => Arc::new(values::<Int64Type, 8>(
            fixed()?,
            rows,
            nulls,
            i64::from_le_bytes,
        )?),
        id::UTINYINT => Arc::new(values::<UInt8Type, 1>(
            fixed()?,
            rows,
            nulls,
            u8::from_le_bytes,
        )?),
        id::USMALLINT => Arc::new(values::<UInt16Type, 2>(
            fixed()?,
            rows,
            nulls,
            u16::from_le_bytes,
        )?),
        id::UINTEGER => Arc::new(values::<UInt32Type, 4>(
            fixed()?,
            rows,
            nulls,
            u32::from_le_bytes,
        )?),
        id::UBIGINT => Arc::new(values::<UInt64Type, 8>(
            fixed()?,
            rows,
            nulls,
            u64::from_le_bytes,
        )?),
        id::FLOAT => Arc::new(values::<Float32Type, 4>(
            fixed()?,
            rows,
            nulls,
            f32::from_le_bytes,
        )?),
        id::DOUBLE => Arc::new(values::<Float64Type, 8>(
            fixed()?,
            rows,
            nulls,
            f64::from_le_bytes,
        )?),
        id::DATE => Arc::new(values::<Date32Type, 4>(
            fixed()?,
            rows,
            nulls,
            i32::from_le_bytes,
        )?),
        id::TIME => Arc::new(values::<Time64MicrosecondType, 8>(
            fixed()?,
            rows,
            nulls,
            i64::from_le_bytes,
        )?),
        id::TIME_NS => Arc::new(values::<Time64NanosecondType, 8>(
            fixed()?,
            rows,
            nulls,
            i64::from_le_bytes,
        )?),
        id::TIMESTAMP_SEC => Arc::new(values::<TimestampSecondType, 8>(
            fixed()?,
            rows,
            nulls,
            i64::from_le_bytes,
        )?),
        id::TIMESTAMP_MS => Arc::new(values::<TimestampMillisecondType, 8>(
            fixed()?,
            rows,
            nulls,
            i64::from_le_bytes,
        )?),
        id::TIMESTAMP => Arc::new(values::<TimestampMicrosecondType, 8>(
            fixed()?,
            rows,
            nulls,
            i64::from_le_bytes,
        )?),
        id::TIMESTAMP_NS => Arc::new(values::<TimestampNanosecondType, 8>(
            fixed()?,
            rows,
            nulls,
            i64::from_le_bytes,
        )?),
        id::TIMESTAMP_TZ => Arc::new(
            values::<TimestampMicrosecondType, 8>(fixed()?, rows, nulls, i64::from_le_bytes)?
                .with_timezone("UTC"),
        ),
        id::INTERVAL => {
            let bytes = fixed()?;
            let micros = |b: &[u8]| i64::from_le_bytes(b[8..16].try_into().unwrap_or_default());
            if bytes
                .chunks_exact(16)
                .any(|b| micros(b).checked_mul(1_000).is_none())
            {
                return Err("an interval's microseconds overflow nanoseconds".into());
            }
            Arc::new(values::<IntervalMonthDayNanoType, 16>(
                bytes,
                rows,
                nulls,
                |b| {
                    let months = i32::from_le_bytes(b[..4].try_into().unwrap_or_default());
                    let days = i32::from_le_bytes(b[4..8].try_into().unwrap_or_default());
                    IntervalMonthDayNano::new(months, days, micros(&b).saturating_mul(1_000))
                },
            )?)
        }
        id::HUGEINT => Arc::new(
            Decimal128Array::try_new(
                values::<arrow::datatypes::Decimal128Type, 16>(fixed()?, rows, None, hugeint)?
                    .values()
                    .clone(),
                nulls,
            )
            .and_then(|a| a.with_precision_and_scale(38, 0))
            .and_then(|a| a.validate_decimal_precision(38).map(|()| a))
            .map_err(|e| e.to_string())?,
        ),
        id::DECIMAL => {
            let TypeInfo::Decimal { width, scale } = ty.info else {
                return Err("a DECIMAL without its width".into());
            };
            let bytes = fixed()?;
            let decimals: Vec<i128> = match ty.width() {
                Some(2) => bytes
                    .chunks_exact(2)
                    .map(|b| i128::from(i16::from_le_bytes([b[0], b[1]])))
                    .collect(),
                Some(4) => bytes
                    .chunks_exact(4)
                    .map(|b| i128::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                    .collect(),
                Some(8) => bytes
                    .chunks_exact(8)
                    .map(|b| i128::from(i64::from_le_bytes(b.try_into().unwrap_or_default())))
                    .collect(),
                _ => bytes
                    .chunks_exact(16)
                    .map(|b| hugeint(b.try_into().unwrap_or_default()))
                    .collect(),
            };
            if decimals.len() != rows {
                return Err(format!("{} decimals for {rows} rows", decimals.len()));
            }
            Arc::new(
                Decimal128Array::try_new(ScalarBuffer::from(decimals), nulls)
                    .and_then(|a| a.with_precision_and_scale(width, scale as i8))
                    .and_then(|a| a.validate_decimal_precision(width).map(|()| a))
                    .map_err(|e| e.to_string())?,
            )
        }
        id::UUID => {
            let bytes = fixed()?;
            if bytes.len() != rows * 16 {
                return Err(format!("{} bytes for {rows} UUIDs", bytes.len()));
            }
            let flipped: Vec<u8> = bytes
                .chunks_exact(16)
                .flat_map(|b| {
                    ((hugeint(b.try_into().unwrap_or_default()) as u128) ^ (1 << 127)).to_be_bytes()
                })
                .collect();
            Arc::new(
                FixedSizeBinaryArray::try_new(16, Buffer::from_vec(flipped), nulls)
                    .map_err(|e| e.to_string())?,
            )
        }
        id::ENUM => {
            let TypeInfo::Enum(names) = &ty.info else {
                return Err("an ENUM without its values".into());
            };
            let bytes = fixed()?;
            let width = ty.width().unwrap_or(4);
            let longest = names.iter().map(String::len).max().unwrap_or(0);
            budget.spend(rows.saturating_mul(longest + 4))?;
            let mut out = StringBuilder::new();
            for (row, b) in bytes.chunks_exact(width).enumerate() {
                if nulls.as_ref().is_some_and(|n| n.is_null(row)) {
                    out.append_null();
                    continue;
                }
                let mut word = [0u8; 4];
                word[..width].copy_from_slice(b);
                let index = u32::from_le_bytes(word) as usize;
                let name = names
                    .get(index)
                    .ok_or_else(|| format!("ENUM value {index} of {}", names.len()))?;
                out.append_value(name);
            }
            Arc::new(out.finish())
        }
        id::VARCHAR | id::CHAR => {
            let Data::Text(texts) = data else {
                return Err("text without its values".into());
            };
            let mut out = StringBuilder::with_capacity(texts.len(), 0);
            for (row, text) in texts.iter().enumerate() {
                if nulls.as_ref().is_some_and(|n| n.is_null(row)) {
                    out.append_null();
                } else {
                    let text = std::str::from_utf8(text)
                        .map_err(|_| format!("row {row} is not valid UTF-8"))?;
                    out.append_value(text);
                }
            }
            Arc::new(out.finish())
        }
        id::BLOB => {
            let Data::Text(texts) = data else {
                return Err("a BLOB without its values".into());
            };
            let mut out = BinaryBuilder::new();
            for (row, bytes) in texts.iter().enumerate() {
                if nulls.as_ref().is_some_and(|n| n.is_null(row)) {
                    out.append_null();
                } else {
                    out.append_value(bytes);
                }
            }
            Arc::new(out.finish())
        }
        id::STRUCT => {
            let (TypeInfo::Fields(types), Data::Fields(children)) = (&ty.info, data) else {
                return Err("a STRUCT without its fields".into());
            };
            if types.is_empty() {
                return Err("a STRUCT without fields".into());
            }
            let mut fields = Vec::with_capacity(types.len());
            let mut arrays = Vec::with_capacity(types.len());
            for ((name, child_ty), child) in types.iter().zip(children) {
                let array = to_array(child, child_ty, rows, budget)?;
                fields.push(Field::new(name, array.data_type().clone(), true));
                arrays.push(array);
            }
            Arc::new(
                StructArray::try_new(Fields::from(fields), arrays, nulls)
                    .map_err(|e| e.to_string())?,
            )
        }
        id::LIST | id::MAP => {
            let (
                TypeInfo::Child(child_ty),
                Data::List {
                    entries,
                    size,
                    child,
                },
            ) = (&ty.info, data)
            else {
                return Err("a LIST without its child".into());
            };
            let values = to_array(child, child_ty, *size, budget)?;
            let (offsets, values) = lists(entries, nulls.as_ref(), values, budget)?;
            if ty.id == id::LIST {
                let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
                Arc::new(
                    ListArray::try_new(field, offsets, values, nulls).map_err(|e| e.to_string())?,
                )
            } else {
                map(offsets, values, nulls)?
            }
        }
        id::ARRAY => {
            let (TypeInfo::Array(child_ty, _), Data::Array { size, child }) = (&ty.info, data)
            else {
                return Err("an ARRAY without its child".into());
            };
            let size = i32::try_from(*size).map_err(|_| "an ARRAY too long".to_string())?;
            let values = to_array(child, child_ty, rows * size as usize, budget)?;
            let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
            Arc::new(
                FixedSizeListArray::try_new(field, size, values, nulls)
                    .map_err(|e| e.to_string())?,
            )
        }
        other => {
            return Err(format!(
                "DuckDB type {} cannot be stored by SQE",
                LogicalType::simple(other).sql()
            ));
        }
    };
    Ok(array)
}

/// Lists as (offset, length) entries into `values`, made into Arrow's ascending offsets: the
/// values are gathered in row order unless they already lie that way.
fn lists(
    entries: &[(u64, u64)],
    nulls: Option<&NullBuffer>,
    values: ArrayRef,
    budget: &mut Budget,
) -> Result<(OffsetBuffer<i32>, ArrayRef), String> {
    let mut offsets = Vec::with_capacity(entries.len() + 1);
    offsets.push(0i32);
    let mut in_order = true;
    let mut total = 0usize;
    for (row, (offset, length)) in entries.iter().enumerate() {
        let length = if nulls.is_some_and(|n| n.is_null(row)) {
            0
        } else {
            *length as usize
        };
        in_order &= length == 0 || *offset as usize == total;
        total += length;
        if total > MAX_LIST_VALUES {
            return Err(format!(
                "the lists of one vector reach more than {MAX_LIST_VALUES} values"
            ));
        }
        offsets.push(total as i32);
    }
    let values = if in_order {
        values.slice(0, total.min(values.len()))
    } else {
        let sizes = row_bytes(values.as_ref());
        let mut cost = 0usize;
        for (row, (offset, length)) in entries.iter().enumerate() {
            if !nulls.is_some_and(|n| n.is_null(row)) {
                let (a, b) = (*offset as usize, (*offset + *length) as usize);
                let bytes: usize = sizes.get(a..b).map_or(0, |s| s.iter().sum());
                cost = cost.saturating_add(bytes).saturating_add(4 * (b - a));
            }
        }
        budget.spend(cost)?;
        let mut indices = Vec::with_capacity(total);
        for (row, (offset, length)) in entries.iter().enumerate() {
            if !nulls.is_some_and(|n| n.is_null(row)) {
                indices.extend(*offset as u32..(*offset + *length) as u32);
            }
        }
        gather(&values, indices)?
    };
    if values.len() != total {
        return Err(format!(
            "lists of {total} values over {} child values",
            values.len()
        ));
    }
    Ok((OffsetBuffer::new(ScalarBuffer::from(offsets)), values))
}

/// A MAP from its entries (a STRUCT of key and value).
fn map(
    offsets: OffsetBuffer<i32>,
    entries: ArrayRef,
    nulls: Option<NullBuffer>,
) -> Result<ArrayRef, String> {
    let Some(entries) = entries.as_any().downcast_ref::<StructArray>() else {
        return Err("a MAP whose entries are no STRUCT".into());
    };
    if entries.num_columns() != 2 {
        return Err("a MAP entry of other than a key and a value".into());
    }
    let keys = entries.column(0).clone();
    if keys.null_count() > 0 {
        return Err("a MAP with a NULL key".into());
    }
    let fields = Fields::from(vec![
        Field::new("key", keys.data_type().clone(), false),
        Field::new("value", entries.column(1).data_type().clone(), true),
    ]);
    let entries = StructArray::try_new(fields.clone(), vec![keys, entries.column(1).clone()], None)
        .map_err(|e| e.to_string())?;
    let field = Arc::new(Field::new("entries", DataType::Struct(fields), false));
    Ok(Arc::new(
        MapArray::try_new(field, offsets, entries, nulls, false).map_err(|e| e.to_string())?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrow_out::write_chunk;
    use crate::codec::{Reader, Writer};
    use arrow::array::{
        BinaryArray, Date32Array, Decimal128Array, Float64Array, Int8Array, Int16Array, Int32Array,
        IntervalMonthDayNanoArray, MapBuilder, StringArray, Time64MicrosecondArray,
        TimestampMillisecondArray, TimestampNanosecondArray, TimestampSecondArray,
    };
    use arrow::datatypes::Int32Type;

    fn decimal(values: Vec<Option<i128>>, p: u8, s: i8) -> ArrayRef {
        Arc::new(
            Decimal128Array::from(values)
                .with_precision_and_scale(p, s)
                .unwrap_or_else(|e| panic!("{e}")),
        )
    }

    /// Arrow → DuckDB chunk (as SQE answers) → Arrow (as SQE takes appends) gives every value
    /// back, NULLs included.
    #[test]
    fn chunks_become_the_batches_they_were_made_from() {
        let names = arrow::array::MapFieldNames {
            entry: "entries".into(),
            key: "key".into(),
            value: "value".into(),
        };
        let mut map = MapBuilder::new(
            Some(names),
            StringBuilder::new(),
            arrow::array::Int32Builder::new(),
        );
        map.keys().append_value("k");
        map.values().append_value(1);
        map.append(true).unwrap_or_else(|e| panic!("{e}"));
        map.append(false).unwrap_or_else(|e| panic!("{e}"));
        map.keys().append_value("x");
        map.values().append_null();
        map.keys().append_value("y");
        map.values().append_value(3);
        map.append(true).unwrap_or_else(|e| panic!("{e}"));
        let uuid = FixedSizeBinaryArray::try_from_sparse_iter_with_size(
            [
                Some(*b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff"),
                None,
                Some([0xf0; 16]),
            ]
            .into_iter(),
            16,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let point = Fields::from(vec![
            Field::new("x", DataType::Int32, true),
            Field::new("label", DataType::Utf8, true),
        ]);
        let columns: Vec<(&str, ArrayRef)> = vec![
            (
                "b",
                Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
            ),
            (
                "i1",
                Arc::new(Int8Array::from(vec![Some(-128), None, Some(127)])),
            ),
            (
                "i2",
                Arc::new(Int16Array::from(vec![Some(-2), Some(0), None])),
            ),
            (
                "i4",
                Arc::new(Int32Array::from(vec![None, Some(i32::MAX), Some(3)])),
            ),
            (
                "i8",
                Arc::new(Int64Array::from(vec![Some(i64::MIN), Some(5), None])),
            ),
            (
                "f8",
                Arc::new(Float64Array::from(vec![Some(1.5), None, Some(-0.25)])),
            ),
            ("d4", decimal(vec![Some(-999), None, Some(5)], 4, 1)),
            ("d9", decimal(vec![Some(123_456_789), Some(0), None], 9, 2)),
            (
                "d18",
                decimal(vec![Some(-1), None, Some(999_999_999_999_999_999)], 18, 6),
            ),
            (
                "d38",
                decimal(vec![Some(10i128.pow(37) * 9), Some(-7), None], 38, 0),
            ),
            (
                "s",
                Arc::new(StringArray::from(vec![Some("héllo"), None, Some("")])),
            ),
            (
                "bl",
                Arc::new(BinaryArray::from(vec![
                    Some(&b"\x00\xff"[..]),
                    None,
                    Some(b""),
                ])),
            ),
            (
                "dt",
                Arc::new(Date32Array::from(vec![Some(19_782), None, Some(-1)])),
            ),
            (
                "t",
                Arc::new(Time64MicrosecondArray::from(vec![
                    Some(45_296_789_000),
                    None,
                    Some(0),
                ])),
            ),
            (
                "ts_s",
                Arc::new(TimestampSecondArray::from(vec![Some(1), None, Some(-1)])),
            ),
            (
                "ts_ms",
                Arc::new(TimestampMillisecondArray::from(vec![
                    Some(1),
                    Some(2),
                    None,
                ])),
            ),
            (
                "ts_us",
                Arc::new(PrimitiveArray::<TimestampMicrosecondType>::from(vec![
                    None,
                    Some(7),
                    Some(-7),
                ])),
            ),
            (
                "ts_ns",
                Arc::new(TimestampNanosecondArray::from(vec![
                    Some(1_000_000_001),
                    None,
                    Some(3),
                ])),
            ),
            (
                "tz",
                Arc::new(
                    PrimitiveArray::<TimestampMicrosecondType>::from(vec![
                        Some(1_714_550_400_000_000),
                        None,
                        Some(0),
                    ])
                    .with_timezone("UTC"),
                ),
            ),
            (
                "iv",
                Arc::new(IntervalMonthDayNanoArray::from(vec![
                    Some(IntervalMonthDayNano::new(1, 2, 3_000)),
                    None,
                    Some(IntervalMonthDayNano::new(-1, 0, -5_000_000)),
                ])),
            ),
            ("u", Arc::new(uuid)),
            (
                "l",
                Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
                    Some(vec![Some(1), None]),
                    None,
                    Some(vec![]),
                ])),
            ),
            (
                "st",
                Arc::new(
                    StructArray::try_new(
                        point,
                        vec![
                            Arc::new(Int32Array::from(vec![Some(1), None, Some(3)])),
                            Arc::new(StringArray::from(vec![Some("a"), Some("b"), None])),
                        ],
                        Some(NullBuffer::from(vec![true, true, false])),
                    )
                    .unwrap_or_else(|e| panic!("{e}")),
                ),
            ),
            ("m", Arc::new(map.finish())),
            (
                "fl",
                Arc::new(FixedSizeListArray::from_iter_primitive::<Int32Type, _, _>(
                    vec![
                        Some(vec![Some(1), Some(2)]),
                        None,
                        Some(vec![None, Some(4)]),
                    ],
                    2,
                )),
            ),
        ];
        let names: Vec<String> = columns.iter().map(|(n, _)| n.to_string()).collect();
        let batch = RecordBatch::try_from_iter(columns.clone()).unwrap_or_else(|e| panic!("{e}"));
        // Whole, and cut as the server cuts results into chunks.
        for (offset, length) in [(0, 3), (1, 2), (2, 1)] {
            let part = batch.slice(offset, length);
            let mut w = Writer::new();
            write_chunk(&mut w, &part).unwrap_or_else(|e| panic!("{e}"));
            let bytes = w.into_bytes();
            let chunk = Chunk::read(&mut Reader::new(&bytes)).unwrap_or_else(|e| panic!("{e}"));
            let back = to_batch(&chunk, &names).unwrap_or_else(|e| panic!("{e}"));
            for ((name, want), got) in names.iter().zip(part.columns()).zip(back.columns()) {
                let want =
                    arrow::compute::concat(&[want.as_ref()]).unwrap_or_else(|e| panic!("{e}"));
                match name.as_str() {
                    // DuckDB has no NULL struct distinct from a struct of NULLs at this level;
                    // the struct's own NULL comes back, its fields' values under it may differ.
                    "st" => assert_eq!(got.logical_nulls(), want.logical_nulls(), "{name}"),
                    _ => assert_eq!(got.to_data(), want.to_data(), "{name} at {offset}"),
                }
            }
        }
    }

    #[test]
    fn compressed_vectors_are_expanded() {
        let int = LogicalType::simple(id::INTEGER);
        let text = LogicalType::simple(id::VARCHAR);
        let chunk = Chunk {
            rows: 3,
            types: vec![
                LogicalType::simple(id::SMALLINT),
                text.clone(),
                text.clone(),
                int.clone(),
            ],
            vectors: vec![
                Vector::Sequence {
                    start: 10,
                    increment: -4,
                },
                Vector::Constant(Box::new(Vector::Flat {
                    validity: None,
                    data: Data::Text(vec![b"same".to_vec()]),
                })),
                Vector::Dictionary {
                    selection: vec![1, 0, 1],
                    size: 2,
                    dictionary: Box::new(Vector::Flat {
                        validity: Some(vec![0b01]),
                        data: Data::Text(vec![b"a".to_vec(), Vec::new()]),
                    }),
                },
                Vector::Constant(Box::new(Vector::Flat {
                    validity: Some(vec![0]),
                    data: Data::Fixed(vec![0; 4]),
                })),
            ],
        };
        let names = ["n", "c", "d", "z"].map(String::from);
        let batch = to_batch(&chunk, &names).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            batch.column(0).to_data(),
            Int16Array::from(vec![10, 6, 2]).to_data()
        );
        assert_eq!(
            batch.column(1).to_data(),
            StringArray::from(vec!["same"; 3]).to_data()
        );
        assert_eq!(
            batch.column(2).to_data(),
            StringArray::from(vec![None, Some("a"), None]).to_data()
        );
        assert_eq!(
            batch.column(3).to_data(),
            Int32Array::from(vec![None, None, None]).to_data()
        );
        // A sequence that leaves its type's range is an error, not a wrapped value.
        let overflow = Chunk {
            rows: 3,
            types: vec![LogicalType::simple(id::TINYINT)],
            vectors: vec![Vector::Sequence {
                start: 120,
                increment: 5,
            }],
        };
        let e = to_batch(&overflow, &names[..1]).err().unwrap_or_default();
        assert!(e.starts_with("column 'n': "), "{e}");
    }

    #[test]
    fn values_that_do_not_hold_together_are_errors() {
        let text = LogicalType::simple(id::VARCHAR);
        let list = LogicalType {
            id: id::LIST,
            info: TypeInfo::Child(Box::new(LogicalType::simple(id::BOOLEAN))),
        };
        let one = |ty: LogicalType, vector: Vector| Chunk {
            rows: 2,
            types: vec![ty],
            vectors: vec![vector],
        };
        let names = ["c".to_string()];
        let cases = [
            (
                one(
                    text.clone(),
                    Vector::Flat {
                        validity: None,
                        data: Data::Text(vec![b"ok".to_vec(), vec![0xff, 0xfe]]),
                    },
                ),
                "column 'c': row 1 is not valid UTF-8",
            ),
            (
                // Two lists that each claim all 10 million child values.
                one(
                    list,
                    Vector::Flat {
                        validity: None,
                        data: Data::List {
                            entries: vec![(0, 10_000_000), (0, 10_000_000)],
                            size: 10_000_000,
                            child: Box::new(Vector::Flat {
                                validity: None,
                                data: Data::Fixed(vec![1; 10_000_000]),
                            }),
                        },
                    },
                ),
                "column 'c': the lists of one vector reach more than 16777216 values",
            ),
            (
                one(
                    LogicalType::simple(id::BIT),
                    Vector::Flat {
                        validity: None,
                        data: Data::Text(vec![Vec::new(), Vec::new()]),
                    },
                ),
                "column 'c': DuckDB type BIT cannot be stored by SQE",
            ),
        ];
        let long = LogicalType {
            id: id::LIST,
            info: TypeInfo::Child(Box::new(LogicalType::simple(id::BIGINT))),
        };
        let more = [
            (
                // A few bytes on the wire: each of 2,048 rows the same list of four million
                // constants.
                Chunk {
                    rows: 2048,
                    types: vec![long],
                    vectors: vec![Vector::Constant(Box::new(Vector::Flat {
                        validity: None,
                        data: Data::List {
                            entries: vec![(0, 4 << 20)],
                            size: 4 << 20,
                            child: Box::new(Vector::Constant(Box::new(Vector::Flat {
                                validity: None,
                                data: Data::Fixed(vec![7; 8]),
                            }))),
                        },
                    }))],
                },
                "column 'c': its values expand past 268435456 bytes in one chunk",
            ),
            (
                one(
                    LogicalType {
                        id: id::DECIMAL,
                        info: TypeInfo::Decimal { width: 4, scale: 1 },
                    },
                    Vector::Flat {
                        validity: None,
                        data: Data::Fixed(
                            [9999i16, 12345]
                                .iter()
                                .flat_map(|v| v.to_le_bytes())
                                .collect(),
                        ),
                    },
                ),
                "column 'c': Invalid argument error: 1234.5 is too large to store in a Decimal128 of precision 4. Max is 999.9",
            ),
            (
                one(
                    LogicalType::simple(id::DATE),
                    Vector::Sequence {
                        start: 0,
                        increment: 1,
                    },
                ),
                "column 'c': a sequence of DATE values",
            ),
            (
                one(
                    LogicalType::simple(id::INTERVAL),
                    Vector::Flat {
                        validity: None,
                        data: Data::Fixed([[0u8; 8], i64::MAX.to_le_bytes()].repeat(2).concat()),
                    },
                ),
                "column 'c': an interval's microseconds overflow nanoseconds",
            ),
        ];
        for (chunk, want) in cases.into_iter().chain(more) {
            assert_eq!(to_batch(&chunk, &names).err().as_deref(), Some(want));
        }
        let two = ["a".to_string(), "b".to_string()];
        let chunk = one(
            text,
            Vector::Flat {
                validity: None,
                data: Data::Text(vec![Vec::new(), Vec::new()]),
            },
        );
        assert_eq!(
            to_batch(&chunk, &two).err().as_deref(),
            Some("the rows have 1 columns, the table 2")
        );
    }
}

//! Arrow record batches as DuckDB DataChunks (flat vectors only, as DuckDB's own server sends):
//! each Arrow type mapped to the DuckDB type a client reads back as the same values, NULLs in the
//! validity masks. A type with no DuckDB counterpart is an error naming the column and the type.

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, FixedSizeListArray, GenericListArray, MapArray,
    OffsetSizeTrait, StructArray,
};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal128Type, Field, Float16Type, Float32Type, Float64Type,
    Int8Type, Int16Type, Int32Type, Int64Type, IntervalDayTimeType, IntervalMonthDayNanoType,
    IntervalYearMonthType, Time32MillisecondType, Time32SecondType, Time64MicrosecondType,
    Time64NanosecondType, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};

use crate::chunk::{LogicalType, TypeInfo, id};
use crate::codec::Writer;

/// The DuckDB type a field is sent as; an error names the column and its type.
pub fn logical_type(field: &Field) -> Result<LogicalType, String> {
    let simple = |id| Ok(LogicalType::simple(id));
    match field.data_type() {
        DataType::Null => simple(id::SQLNULL),
        DataType::Boolean => simple(id::BOOLEAN),
        DataType::Int8 => simple(id::TINYINT),
        DataType::Int16 => simple(id::SMALLINT),
        DataType::Int32 => simple(id::INTEGER),
        DataType::Int64 => simple(id::BIGINT),
        DataType::UInt8 => simple(id::UTINYINT),
        DataType::UInt16 => simple(id::USMALLINT),
        DataType::UInt32 => simple(id::UINTEGER),
        DataType::UInt64 => simple(id::UBIGINT),
        DataType::Float16 | DataType::Float32 => simple(id::FLOAT),
        DataType::Float64 => simple(id::DOUBLE),
        DataType::Decimal128(p, s) if *s >= 0 && *p <= 38 => Ok(LogicalType {
            id: id::DECIMAL,
            info: TypeInfo::Decimal {
                width: *p,
                scale: *s as u8,
            },
        }),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => simple(id::VARCHAR),
        DataType::FixedSizeBinary(16) => simple(id::UUID),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => simple(id::BLOB),
        DataType::Date32 | DataType::Date64 => simple(id::DATE),
        DataType::Time32(_) | DataType::Time64(TimeUnit::Microsecond) => simple(id::TIME),
        DataType::Time64(_) => simple(id::TIME_NS),
        DataType::Timestamp(_, Some(_)) => simple(id::TIMESTAMP_TZ),
        DataType::Timestamp(TimeUnit::Second, None) => simple(id::TIMESTAMP_SEC),
        DataType::Timestamp(TimeUnit::Millisecond, None) => simple(id::TIMESTAMP_MS),
        DataType::Timestamp(TimeUnit::Microsecond, None) => simple(id::TIMESTAMP),
        DataType::Timestamp(TimeUnit::Nanosecond, None) => simple(id::TIMESTAMP_NS),
        DataType::Interval(_) => simple(id::INTERVAL),
        DataType::List(child) | DataType::LargeList(child) => Ok(LogicalType {
            id: id::LIST,
            info: TypeInfo::Child(Box::new(logical_type(child)?)),
        }),
        DataType::FixedSizeList(child, size) if *size >= 0 => Ok(LogicalType {
            id: id::ARRAY,
            info: TypeInfo::Array(Box::new(logical_type(child)?), *size as u32),
        }),
        DataType::Struct(fields) => Ok(LogicalType {
            id: id::STRUCT,
            info: TypeInfo::Fields(
                fields
                    .iter()
                    .map(|f| Ok((f.name().clone(), logical_type(f)?)))
                    .collect::<Result<_, String>>()?,
            ),
        }),
        DataType::Map(entries, _) => Ok(LogicalType {
            id: id::MAP,
            info: TypeInfo::Child(Box::new(logical_type(entries)?)),
        }),
        other => Err(format!(
            "column '{}' of type {other} cannot be sent over Quack",
            field.name()
        )),
    }
}

/// Writes `batch` (at most 2048 rows) as a DataChunk object's fields, then its end.
pub fn write_chunk(w: &mut Writer, batch: &arrow::array::RecordBatch) -> Result<(), String> {
    let schema = batch.schema();
    let types = schema
        .fields()
        .iter()
        .map(|f| logical_type(f))
        .collect::<Result<Vec<_>, _>>()?;
    w.field(100).uleb(batch.num_rows() as u64);
    w.field(101).uleb(types.len() as u64);
    for t in &types {
        t.write(w);
    }
    w.field(102).uleb(types.len() as u64);
    for (column, field) in batch.columns().iter().zip(schema.fields()) {
        write_vector(w, column, field)?;
    }
    w.end();
    Ok(())
}

/// The validity mask of `array` (None when no row is NULL).
fn validity(array: &dyn Array) -> Option<Vec<u8>> {
    if array.null_count() == 0 {
        return None;
    }
    let mut words = vec![0u64; array.len().div_ceil(64)];
    for i in 0..array.len() {
        if array.is_valid(i) {
            words[i / 64] |= 1 << (i % 64);
        }
    }
    Some(words.iter().flat_map(|w| w.to_le_bytes()).collect())
}

/// Little-endian values of a primitive array, `to` turning each (NULLs included) into bytes.
fn fixed<T: arrow::datatypes::ArrowPrimitiveType, const N: usize>(
    array: &dyn Array,
    to: impl Fn(T::Native) -> [u8; N],
) -> Vec<u8> {
    array
        .as_primitive::<T>()
        .values()
        .iter()
        .flat_map(|v| to(*v))
        .collect()
}

/// The values of a primitive array whose memory is already what DuckDB sends (little-endian,
/// the same width): copied as they lie.
fn same<T: arrow::datatypes::ArrowPrimitiveType>(array: &dyn Array) -> Vec<u8> {
    let values = array.as_primitive::<T>().values();
    if cfg!(target_endian = "little") {
        values.inner().as_slice().to_vec()
    } else {
        values
            .iter()
            .flat_map(|v| {
                use arrow::datatypes::ToByteSlice;
                v.to_byte_slice().iter().rev().copied().collect::<Vec<_>>()
            })
            .collect()
    }
}

/// A timestamp or time in `unit`, as `per_second` units a second.
fn rescale(v: i64, unit: &TimeUnit, per_second: i64) -> i64 {
    let from = match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    };
    if per_second >= from {
        v.saturating_mul(per_second / from)
    } else {
        v.div_euclid(from / per_second)
    }
}

fn write_vector(w: &mut Writer, array: &ArrayRef, field: &Field) -> Result<(), String> {
    let mask = validity(array.as_ref());
    w.field(100).bool(mask.is_some());
    if let Some(mask) = &mask {
        w.field(101).bytes(mask);
    }
    let data: Option<Vec<u8>> = match array.data_type() {
        DataType::Null => None,
        DataType::Boolean => {
            let values: &BooleanArray = array.as_boolean();
            Some(
                (0..values.len())
                    .map(|i| u8::from(values.value(i)))
                    .collect(),
            )
        }
        DataType::Int8 => Some(same::<Int8Type>(array)),
        DataType::Int16 => Some(same::<Int16Type>(array)),
        DataType::Int32 => Some(same::<Int32Type>(array)),
        DataType::Int64 => Some(same::<Int64Type>(array)),
        DataType::UInt8 => Some(same::<UInt8Type>(array)),
        DataType::UInt16 => Some(same::<UInt16Type>(array)),
        DataType::UInt32 => Some(same::<UInt32Type>(array)),
        DataType::UInt64 => Some(same::<UInt64Type>(array)),
        DataType::Float16 => Some(fixed::<Float16Type, 4>(array, |v| v.to_f32().to_le_bytes())),
        DataType::Float32 => Some(same::<Float32Type>(array)),
        DataType::Float64 => Some(same::<Float64Type>(array)),
        DataType::Decimal128(p, _) => {
            let values = array.as_primitive::<Decimal128Type>().values();
            Some(match *p {
                0..=4 => values
                    .iter()
                    .flat_map(|v| (*v as i16).to_le_bytes())
                    .collect(),
                5..=9 => values
                    .iter()
                    .flat_map(|v| (*v as i32).to_le_bytes())
                    .collect(),
                10..=18 => values
                    .iter()
                    .flat_map(|v| (*v as i64).to_le_bytes())
                    .collect(),
                _ => values.iter().flat_map(|v| hugeint(*v)).collect(),
            })
        }
        DataType::Date32 => Some(same::<Date32Type>(array)),
        DataType::Date64 => Some(fixed::<Date64Type, 4>(array, |ms| {
            (ms.div_euclid(86_400_000) as i32).to_le_bytes()
        })),
        DataType::Time32(TimeUnit::Second) => Some(fixed::<Time32SecondType, 8>(array, |s| {
            (i64::from(s) * 1_000_000).to_le_bytes()
        })),
        DataType::Time32(_) => Some(fixed::<Time32MillisecondType, 8>(array, |ms| {
            (i64::from(ms) * 1_000).to_le_bytes()
        })),
        DataType::Time64(TimeUnit::Microsecond) => Some(same::<Time64MicrosecondType>(array)),
        DataType::Time64(_) => Some(same::<Time64NanosecondType>(array)),
        DataType::Timestamp(unit, zone) => {
            // Zoned: DuckDB's TIMESTAMP WITH TIME ZONE is microseconds since the epoch (UTC).
            let per_second = match (zone, unit) {
                (Some(_), _) | (None, TimeUnit::Microsecond) => 1_000_000,
                (None, TimeUnit::Second) => 1,
                (None, TimeUnit::Millisecond) => 1_000,
                (None, TimeUnit::Nanosecond) => 1_000_000_000,
            };
            if *unit == TimeUnit::Microsecond && per_second == 1_000_000 {
                Some(same::<TimestampMicrosecondType>(array))
            } else {
                let to = |v: i64| rescale(v, unit, per_second).to_le_bytes();
                Some(match unit {
                    TimeUnit::Second => fixed::<TimestampSecondType, 8>(array, to),
                    TimeUnit::Millisecond => fixed::<TimestampMillisecondType, 8>(array, to),
                    TimeUnit::Microsecond => fixed::<TimestampMicrosecondType, 8>(array, to),
                    TimeUnit::Nanosecond => fixed::<TimestampNanosecondType, 8>(array, to),
                })
            }
        }
        DataType::Interval(arrow::datatypes::IntervalUnit::YearMonth) => {
            Some(fixed::<IntervalYearMonthType, 16>(array, |m| {
                interval(m, 0, 0)
            }))
        }
        DataType::Interval(arrow::datatypes::IntervalUnit::DayTime) => {
            Some(fixed::<IntervalDayTimeType, 16>(array, |v| {
                interval(0, v.days, i64::from(v.milliseconds) * 1_000)
            }))
        }
        DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano) => {
            Some(fixed::<IntervalMonthDayNanoType, 16>(array, |v| {
                interval(v.months, v.days, v.nanoseconds.div_euclid(1_000))
            }))
        }
        DataType::FixedSizeBinary(16) => {
            // DuckDB keeps a UUID as a hugeint whose top bit is flipped (so that it sorts).
            let values = array.as_fixed_size_binary();
            Some(
                (0..values.len())
                    .flat_map(|i| {
                        let bytes: [u8; 16] = values.value(i).try_into().unwrap_or_default();
                        hugeint((u128::from_be_bytes(bytes) ^ (1 << 127)) as i128)
                    })
                    .collect(),
            )
        }
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => {
            let texts = texts(array)?;
            w.field(102).uleb(texts.len() as u64);
            for t in texts {
                w.bytes(t.unwrap_or_default());
            }
            w.end();
            return Ok(());
        }
        DataType::Struct(fields) => {
            let values: &StructArray = array.as_struct();
            w.field(103).uleb(fields.len() as u64);
            for (child, f) in values.columns().iter().zip(fields) {
                write_vector(w, child, f)?;
            }
            w.end();
            return Ok(());
        }
        DataType::List(child) => {
            write_list(w, array.as_list::<i32>(), child)?;
            return Ok(());
        }
        DataType::LargeList(child) => {
            write_list(w, array.as_list::<i64>(), child)?;
            return Ok(());
        }
        DataType::Map(entries, _) => {
            let map: &MapArray = array.as_map();
            let offsets = map.value_offsets();
            let start = offsets.first().copied().unwrap_or(0);
            let end = offsets.last().copied().unwrap_or(0);
            let size = (end - start) as u64;
            w.field(104).uleb(size).field(105).uleb(map.len() as u64);
            for pair in offsets.windows(2) {
                w.field(100).uleb((pair[0] - start) as u64);
                w.field(101).uleb((pair[1] - pair[0]) as u64).end();
            }
            let child: ArrayRef = std::sync::Arc::new(map.entries().clone());
            let child = child.slice(start as usize, size as usize);
            w.field(106);
            write_vector(w, &child, entries)?;
            w.end();
            return Ok(());
        }
        DataType::FixedSizeList(child, size) => {
            let list: &FixedSizeListArray = array.as_fixed_size_list();
            w.field(103).uleb(*size as u64).field(104);
            let values = list.values().slice(0, list.len() * (*size as usize));
            write_vector(w, &values, child)?;
            w.end();
            return Ok(());
        }
        other => {
            return Err(format!(
                "column '{}' of type {other} cannot be sent over Quack",
                field.name()
            ));
        }
    };
    if let Some(data) = data {
        w.field(102).bytes(&data);
    }
    w.end();
    Ok(())
}

fn write_list<O: OffsetSizeTrait>(
    w: &mut Writer,
    list: &GenericListArray<O>,
    child: &Field,
) -> Result<(), String> {
    let offsets = list.value_offsets();
    let start = offsets.first().map(|o| o.as_usize()).unwrap_or(0);
    let end = offsets.last().map(|o| o.as_usize()).unwrap_or(0);
    w.field(104).uleb((end - start) as u64);
    w.field(105).uleb(list.len() as u64);
    for pair in offsets.windows(2) {
        let (a, b) = (pair[0].as_usize(), pair[1].as_usize());
        w.field(100)
            .uleb((a - start) as u64)
            .field(101)
            .uleb((b - a) as u64)
            .end();
    }
    w.field(106);
    write_vector(w, &list.values().slice(start, end - start), child)?;
    w.end();
    Ok(())
}

/// DuckDB's hugeint in memory: the lower 64 bits, then the upper.
fn hugeint(v: i128) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&(v as u64).to_le_bytes());
    out[8..].copy_from_slice(&((v >> 64) as i64).to_le_bytes());
    out
}

fn interval(months: i32, days: i32, micros: i64) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..4].copy_from_slice(&months.to_le_bytes());
    out[4..8].copy_from_slice(&days.to_le_bytes());
    out[8..].copy_from_slice(&micros.to_le_bytes());
    out
}

/// Each row of a string or binary column (None for NULL).
fn texts(array: &ArrayRef) -> Result<Vec<Option<&[u8]>>, String> {
    Ok(match array.data_type() {
        DataType::Utf8 => array
            .as_string::<i32>()
            .iter()
            .map(|v| v.map(str::as_bytes))
            .collect(),
        DataType::LargeUtf8 => array
            .as_string::<i64>()
            .iter()
            .map(|v| v.map(str::as_bytes))
            .collect(),
        DataType::Utf8View => array
            .as_string_view()
            .iter()
            .map(|v| v.map(str::as_bytes))
            .collect(),
        DataType::Binary => array.as_binary::<i32>().iter().collect(),
        DataType::LargeBinary => array.as_binary::<i64>().iter().collect(),
        DataType::BinaryView => array.as_binary_view().iter().collect(),
        DataType::FixedSizeBinary(_) => array.as_fixed_size_binary().iter().collect(),
        other => return Err(format!("{other} is no text")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::{Chunk, Data, Vector};
    use crate::codec::Reader;
    use arrow::array::{
        Decimal128Array, Int32Array, ListArray, RecordBatch, StringArray, TimestampMicrosecondArray,
    };
    use arrow::datatypes::Schema;
    use std::sync::Arc;

    #[test]
    fn batches_become_chunks_duckdb_reads() {
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), Some(2)]),
            None,
            Some(vec![Some(3)]),
        ]);
        let schema = Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int32, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("d", DataType::Decimal128(10, 2), true),
            Field::new(
                "t",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new("l", list.data_type().clone(), true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![Some(1), None, Some(3)])),
                Arc::new(StringArray::from(vec![Some("a"), Some("bé"), None])),
                Arc::new(
                    Decimal128Array::from(vec![Some(1250), Some(-5), None])
                        .with_precision_and_scale(10, 2)
                        .unwrap_or_else(|e| panic!("{e}")),
                ),
                Arc::new(
                    TimestampMicrosecondArray::from(vec![Some(1), Some(2), Some(3)])
                        .with_timezone("UTC"),
                ),
                Arc::new(list),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut w = Writer::new();
        write_chunk(&mut w, &batch).unwrap_or_else(|e| panic!("{e}"));
        let bytes = w.into_bytes();
        let chunk = Chunk::read(&mut Reader::new(&bytes)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(chunk.rows, 3);
        let ids: Vec<u8> = chunk.types.iter().map(|t| t.id).collect();
        assert_eq!(
            ids,
            [
                id::INTEGER,
                id::VARCHAR,
                id::DECIMAL,
                id::TIMESTAMP_TZ,
                id::LIST
            ]
        );
        let Vector::Flat {
            validity,
            data: Data::Fixed(ints),
        } = &chunk.vectors[0]
        else {
            panic!("{:?}", chunk.vectors[0]);
        };
        assert_eq!(validity.as_deref(), Some(&[0b101u64][..]));
        assert_eq!(&ints[..4], 1i32.to_le_bytes());
        let Vector::Flat {
            data: Data::Text(texts),
            ..
        } = &chunk.vectors[1]
        else {
            panic!("{:?}", chunk.vectors[1]);
        };
        assert_eq!(texts[1], "bé".as_bytes());
        // DECIMAL(10, 2) is 8 bytes a value in DuckDB.
        let Vector::Flat {
            data: Data::Fixed(decimals),
            ..
        } = &chunk.vectors[2]
        else {
            panic!("{:?}", chunk.vectors[2]);
        };
        assert_eq!(
            decimals[..16],
            [1250i64.to_le_bytes(), (-5i64).to_le_bytes()].concat()
        );
        let Vector::Flat {
            validity,
            data: Data::List { entries, .. },
        } = &chunk.vectors[4]
        else {
            panic!("{:?}", chunk.vectors[4]);
        };
        assert_eq!(validity.as_deref(), Some(&[0b101u64][..]));
        assert_eq!(entries, &[(0, 2), (2, 0), (2, 1)]);
    }

    #[test]
    fn a_type_without_a_counterpart_is_named() {
        let field = Field::new("d", DataType::Duration(TimeUnit::Second), true);
        assert_eq!(
            logical_type(&field),
            Err("column 'd' of type Duration(s) cannot be sent over Quack".to_string())
        );
    }
}

//! Arrow types and values in Trino's wire form: the type name, its `typeSignature`, and the JSON a
//! Trino client expects for each value.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType,
    DurationSecondType, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    IntervalDayTimeType, IntervalMonthDayNanoType, IntervalUnit, IntervalYearMonthType, TimeUnit,
    UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use base64::Engine as _;
use serde_json::{Value, json};
use sqe_sessions::{JSON_EXTENSION, zoned_unit};

/// Unbounded varchar, as Trino reports it.
const VARCHAR_MAX: i64 = 2_147_483_647;

fn long(v: i64) -> Value {
    json!({"kind": "LONG", "value": v})
}

fn ty(sig: Value) -> Value {
    json!({"kind": "TYPE", "value": sig})
}

fn timestamp_precision(unit: &TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 0,
        TimeUnit::Millisecond => 3,
        TimeUnit::Microsecond => 6,
        TimeUnit::Nanosecond => 9,
    }
}

/// (type name, typeSignature) for an Arrow type.
pub fn trino_type(t: &DataType) -> (String, Value) {
    let simple = |name: &str| (name.to_string(), json!({"rawType": name, "arguments": []}));
    if let Some(unit) = zoned_unit(t) {
        return trino_type(&DataType::Timestamp(unit, Some("UTC".into())));
    }
    match t {
        DataType::Null => simple("unknown"),
        DataType::Boolean => simple("boolean"),
        DataType::Int8 => simple("tinyint"),
        DataType::Int16 | DataType::UInt8 => simple("smallint"),
        DataType::Int32 | DataType::UInt16 => simple("integer"),
        DataType::Int64 | DataType::UInt32 | DataType::UInt64 => simple("bigint"),
        DataType::Float16 | DataType::Float32 => simple("real"),
        DataType::Float64 => simple("double"),
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s) => (
            format!("decimal({p},{s})"),
            json!({"rawType": "decimal", "arguments": [long(i64::from(*p)), long(i64::from(*s))]}),
        ),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => (
            "varchar".to_string(),
            json!({"rawType": "varchar", "arguments": [long(VARCHAR_MAX)]}),
        ),
        DataType::FixedSizeBinary(16) => simple("uuid"),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => simple("varbinary"),
        DataType::Date32 | DataType::Date64 => simple("date"),
        DataType::Time32(unit) | DataType::Time64(unit) => {
            let p = timestamp_precision(unit);
            (
                format!("time({p})"),
                json!({"rawType": "time", "arguments": [long(p)]}),
            )
        }
        DataType::Timestamp(unit, None) => {
            let p = timestamp_precision(unit);
            (
                format!("timestamp({p})"),
                json!({"rawType": "timestamp", "arguments": [long(p)]}),
            )
        }
        DataType::Timestamp(unit, Some(_)) => {
            let p = timestamp_precision(unit);
            (
                format!("timestamp({p}) with time zone"),
                json!({"rawType": "timestamp with time zone", "arguments": [long(p)]}),
            )
        }
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::FixedSizeList(f, _)
        | DataType::ListView(f) => {
            let (name, sig) = trino_type(f.data_type());
            (
                format!("array({name})"),
                json!({"rawType": "array", "arguments": [ty(sig)]}),
            )
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                let (kn, ks) = trino_type(kv[0].data_type());
                let (vn, vs) = trino_type(kv[1].data_type());
                (
                    format!("map({kn}, {vn})"),
                    json!({"rawType": "map", "arguments": [ty(ks), ty(vs)]}),
                )
            }
            _ => simple("varchar"),
        },
        DataType::Struct(fields) => {
            let mut names = Vec::new();
            let mut args = Vec::new();
            for f in fields {
                let (n, s) = trino_type(f.data_type());
                names.push(format!("{} {n}", f.name()));
                args.push(json!({"kind": "NAMED_TYPE", "value": {"fieldName": {"name": f.name()}, "typeSignature": s}}));
            }
            (
                format!("row({})", names.join(", ")),
                json!({"rawType": "row", "arguments": args}),
            )
        }
        DataType::Dictionary(_, v) => trino_type(v),
        DataType::Interval(IntervalUnit::YearMonth) => simple("interval year to month"),
        DataType::Interval(_) | DataType::Duration(_) => simple("interval day to second"),
        // Everything else travels as text.
        _ => (
            "varchar".to_string(),
            json!({"rawType": "varchar", "arguments": [long(VARCHAR_MAX)]}),
        ),
    }
}

fn float(v: f64) -> Value {
    if v.is_nan() {
        json!("NaN")
    } else if v.is_infinite() {
        json!(if v > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        json!(v)
    }
}

fn text(array: &dyn Array, row: usize, options: &FormatOptions<'_>) -> Value {
    match ArrayFormatter::try_new(array, options) {
        Ok(f) => Value::String(f.value(row).to_string()),
        Err(_) => Value::Null,
    }
}

/// An interval year to month as Trino sends it: `1-2`, `-0-3`. (sqe-functions writes the same text
/// for a CAST to VARCHAR; this crate builds without it.)
fn year_to_month(months: i32) -> String {
    let sign = if months < 0 { "-" } else { "" };
    let m = months.unsigned_abs();
    format!("{sign}{}-{}", m / 12, m % 12)
}

/// An interval day to second as Trino sends it, to the millisecond: `3 04:05:06.789`.
fn day_to_second(millis: i64) -> String {
    let sign = if millis < 0 { "-" } else { "" };
    let total = millis.unsigned_abs();
    let seconds = total / 1_000;
    format!(
        "{sign}{} {:02}:{:02}:{:02}.{:03}",
        seconds / 86_400,
        seconds / 3_600 % 24,
        seconds / 60 % 60,
        seconds % 60,
        total % 1_000
    )
}

/// The JSON for one value, in the form Trino clients parse.
pub fn value(array: &dyn Array, row: usize) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    let plain = FormatOptions::default();
    if let Some(unit) = zoned_unit(array.data_type()) {
        // The instant in its own zone: a timestamp of that zone, one row long.
        let s = array.as_struct();
        let (instant, zone) = (s.column(0), s.column(1).as_string::<i32>());
        if instant.is_null(row) || zone.is_null(row) {
            return Value::Null;
        }
        let t = DataType::Timestamp(unit, Some(zone.value(row).into()));
        return match instant
            .slice(row, 1)
            .to_data()
            .into_builder()
            .data_type(t)
            .build()
        {
            Ok(data) => value(arrow::array::make_array(data).as_ref(), 0),
            Err(_) => Value::Null,
        };
    }
    match array.data_type() {
        DataType::Boolean => json!(array.as_boolean().value(row)),
        DataType::Int8 => json!(array.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => json!(array.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => json!(array.as_primitive::<Int32Type>().value(row)),
        DataType::Int64 => json!(array.as_primitive::<Int64Type>().value(row)),
        DataType::UInt8 => json!(array.as_primitive::<UInt8Type>().value(row)),
        DataType::UInt16 => json!(array.as_primitive::<UInt16Type>().value(row)),
        DataType::UInt32 => json!(array.as_primitive::<UInt32Type>().value(row)),
        DataType::UInt64 => json!(array.as_primitive::<UInt64Type>().value(row)),
        DataType::Float32 => float(f64::from(array.as_primitive::<Float32Type>().value(row))),
        DataType::Float64 => float(array.as_primitive::<Float64Type>().value(row)),
        // As many fraction digits as the type's precision; a zoned timestamp's wall-clock time in
        // its zone, then the zone (`2026-01-01 19:00:00.000 Asia/Tokyo`, `… +01:00`, `… UTC`).
        DataType::Timestamp(unit, zone) => {
            let format = match unit {
                TimeUnit::Second => "%Y-%m-%d %H:%M:%S",
                TimeUnit::Millisecond => "%Y-%m-%d %H:%M:%S%.3f",
                TimeUnit::Microsecond => "%Y-%m-%d %H:%M:%S%.6f",
                TimeUnit::Nanosecond => "%Y-%m-%d %H:%M:%S%.9f",
            };
            let options = FormatOptions::default()
                .with_timestamp_format(Some(format))
                .with_timestamp_tz_format(Some(format));
            match (text(array, row, &options), zone) {
                (Value::String(local), Some(zone)) => {
                    let zone = match zone.as_ref() {
                        "+00:00" | "Z" | "+0000" | "+00" => "UTC",
                        z => z,
                    };
                    Value::String(format!("{local} {zone}"))
                }
                (other, _) => other,
            }
        }
        // As many fraction digits as the type's precision, as for timestamps.
        DataType::Time32(unit) | DataType::Time64(unit) => {
            let format = match unit {
                TimeUnit::Second => "%H:%M:%S",
                TimeUnit::Millisecond => "%H:%M:%S%.3f",
                TimeUnit::Microsecond => "%H:%M:%S%.6f",
                TimeUnit::Nanosecond => "%H:%M:%S%.9f",
            };
            text(
                array,
                row,
                &FormatOptions::default().with_time_format(Some(format)),
            )
        }
        DataType::Interval(IntervalUnit::YearMonth) => json!(year_to_month(
            array.as_primitive::<IntervalYearMonthType>().value(row)
        )),
        DataType::Interval(IntervalUnit::DayTime) => {
            let v = array.as_primitive::<IntervalDayTimeType>().value(row);
            json!(day_to_second(
                i64::from(v.days) * 86_400_000 + i64::from(v.milliseconds)
            ))
        }
        // Trino's interval literals give months alone or days and nanoseconds alone.
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            let v = array.as_primitive::<IntervalMonthDayNanoType>().value(row);
            if v.months == 0 {
                json!(day_to_second(
                    i64::from(v.days) * 86_400_000 + v.nanoseconds / 1_000_000
                ))
            } else {
                text(array, row, &plain)
            }
        }
        DataType::Duration(unit) => {
            let millis = match unit {
                TimeUnit::Second => array
                    .as_primitive::<DurationSecondType>()
                    .value(row)
                    .saturating_mul(1_000),
                TimeUnit::Millisecond => array.as_primitive::<DurationMillisecondType>().value(row),
                TimeUnit::Microsecond => {
                    array.as_primitive::<DurationMicrosecondType>().value(row) / 1_000
                }
                TimeUnit::Nanosecond => {
                    array.as_primitive::<DurationNanosecondType>().value(row) / 1_000_000
                }
            };
            json!(day_to_second(millis))
        }
        DataType::FixedSizeBinary(16) => {
            let bytes = array.as_fixed_size_binary().value(row);
            match uuid::Uuid::from_slice(bytes) {
                Ok(u) => json!(u.to_string()),
                Err(_) => Value::Null,
            }
        }
        DataType::Binary => json!(
            base64::engine::general_purpose::STANDARD.encode(array.as_binary::<i32>().value(row))
        ),
        DataType::LargeBinary => {
            json!(
                base64::engine::general_purpose::STANDARD
                    .encode(array.as_binary::<i64>().value(row))
            )
        }
        DataType::BinaryView => json!(
            base64::engine::general_purpose::STANDARD.encode(array.as_binary_view().value(row))
        ),
        DataType::List(_) => {
            let inner = array.as_list::<i32>().value(row);
            Value::Array((0..inner.len()).map(|i| value(inner.as_ref(), i)).collect())
        }
        DataType::LargeList(_) => {
            let inner = array.as_list::<i64>().value(row);
            Value::Array((0..inner.len()).map(|i| value(inner.as_ref(), i)).collect())
        }
        DataType::Struct(_) => {
            let s = array.as_struct();
            Value::Array(s.columns().iter().map(|c| value(c.as_ref(), row)).collect())
        }
        DataType::Map(_, _) => {
            let entries = array.as_map().value(row);
            let mut out = serde_json::Map::new();
            for i in 0..entries.len() {
                let key = match value(entries.column(0).as_ref(), i) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(key, value(entries.column(1).as_ref(), i));
            }
            Value::Object(out)
        }
        _ => text(array, row, &plain),
    }
}

/// Rows as JSON text, appended a batch at a time: what a page carries, written straight from the
/// Arrow arrays (no JSON value per cell), one JSON array once [`JsonRows::into_array`] closes it.
#[derive(Debug, Default)]
pub struct JsonRows {
    text: Vec<u8>,
    count: usize,
}

impl JsonRows {
    /// How many rows there are.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn open_row(&mut self) {
        self.text.push(if self.count == 0 { b'[' } else { b',' });
        self.count += 1;
    }

    /// One row given as a JSON value.
    pub fn push_value(&mut self, row: &Value) {
        self.open_row();
        write_json(&mut self.text, row);
    }

    /// Every row of `batch`.
    pub fn push_batch(&mut self, batch: &RecordBatch) {
        let cells: Vec<Cells<'_>> = batch.columns().iter().map(|c| cells(c.as_ref())).collect();
        for row in 0..batch.num_rows() {
            self.open_row();
            self.text.push(b'[');
            for (i, (column, write)) in batch.columns().iter().zip(&cells).enumerate() {
                if i > 0 {
                    self.text.push(b',');
                }
                if column.is_null(row) {
                    self.text.extend_from_slice(b"null");
                } else {
                    write(row, &mut self.text);
                }
            }
            self.text.push(b']');
        }
    }

    /// The rows as one JSON array.
    pub fn into_array(mut self) -> Vec<u8> {
        if self.count == 0 {
            return b"[]".to_vec();
        }
        self.text.push(b']');
        self.text
    }
}

/// Writes the JSON of one non-null value of a column.
type Cells<'a> = Box<dyn Fn(usize, &mut Vec<u8>) + 'a>;

/// Writing JSON into memory does not fail; `value` holds no map with non-string keys.
fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// The writer of a column's values: the same JSON as [`value`], written directly for the common
/// types, through [`value`] for the rest.
fn cells(array: &dyn Array) -> Cells<'_> {
    macro_rules! integers {
        ($t:ty) => {{
            let a = array.as_primitive::<$t>();
            Box::new(move |row, out: &mut Vec<u8>| write_json(out, &a.value(row)))
        }};
    }
    match array.data_type() {
        DataType::Boolean => {
            let a = array.as_boolean();
            Box::new(move |row, out| {
                out.extend_from_slice(if a.value(row) { b"true" } else { b"false" })
            })
        }
        DataType::Int8 => integers!(Int8Type),
        DataType::Int16 => integers!(Int16Type),
        DataType::Int32 => integers!(Int32Type),
        DataType::Int64 => integers!(Int64Type),
        DataType::UInt8 => integers!(UInt8Type),
        DataType::UInt16 => integers!(UInt16Type),
        DataType::UInt32 => integers!(UInt32Type),
        DataType::UInt64 => integers!(UInt64Type),
        DataType::Float32 => {
            let a = array.as_primitive::<Float32Type>();
            Box::new(move |row, out| write_json(out, &float(f64::from(a.value(row)))))
        }
        DataType::Float64 => {
            let a = array.as_primitive::<Float64Type>();
            Box::new(move |row, out| write_json(out, &float(a.value(row))))
        }
        DataType::Utf8 => {
            let a = array.as_string::<i32>();
            Box::new(move |row, out| write_json(out, a.value(row)))
        }
        DataType::LargeUtf8 => {
            let a = array.as_string::<i64>();
            Box::new(move |row, out| write_json(out, a.value(row)))
        }
        DataType::Utf8View => {
            let a = array.as_string_view();
            Box::new(move |row, out| write_json(out, a.value(row)))
        }
        // Shown as Arrow shows them, as `value` does, with one formatter for the column.
        DataType::Date32
        | DataType::Date64
        | DataType::Decimal32(_, _)
        | DataType::Decimal64(_, _)
        | DataType::Decimal128(_, _)
        | DataType::Decimal256(_, _) => {
            match ArrayFormatter::try_new(array, &FormatOptions::default()) {
                Ok(f) => {
                    Box::new(move |row, out| write_json(out, f.value(row).to_string().as_str()))
                }
                Err(_) => Box::new(|_, out| out.extend_from_slice(b"null")),
            }
        }
        _ => Box::new(move |row, out| write_json(out, &value(array, row))),
    }
}

/// The `columns` entry of a result.
pub fn columns(schema: &arrow::datatypes::Schema) -> Value {
    Value::Array(
        schema
            .fields()
            .iter()
            .map(|f| {
                // Trino's JSON type travels as VARCHAR marked with Arrow's JSON extension type.
                let (name, sig) = if f.extension_type_name() == Some(JSON_EXTENSION)
                    && matches!(
                        f.data_type(),
                        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
                    ) {
                    (
                        "json".to_string(),
                        json!({"rawType": "json", "arguments": []}),
                    )
                } else {
                    trino_type(f.data_type())
                };
                json!({"name": f.name(), "type": name, "typeSignature": sig})
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Decimal128Array, Int64Array, StringArray, TimestampMicrosecondArray};

    use super::*;

    #[test]
    fn decimal_signature_carries_precision_and_scale() {
        let (name, sig) = trino_type(&DataType::Decimal128(10, 2));
        assert_eq!(name, "decimal(10,2)");
        assert_eq!(
            sig,
            json!({"rawType": "decimal", "arguments": [{"kind": "LONG", "value": 10}, {"kind": "LONG", "value": 2}]})
        );
    }

    #[test]
    fn values_in_trino_form() {
        let dec = Decimal128Array::from(vec![Some(12345)])
            .with_precision_and_scale(10, 2)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(value(&dec, 0), json!("123.45"));
        let ts = TimestampMicrosecondArray::from(vec![Some(1_767_261_600_000_000)]);
        assert_eq!(value(&ts, 0), json!("2026-01-01 10:00:00.000000"));
        let zoned = TimestampMicrosecondArray::from(vec![Some(1_767_261_600_000_000)])
            .with_timezone("Asia/Tokyo");
        assert_eq!(
            value(&zoned, 0),
            json!("2026-01-01 19:00:00.000000 Asia/Tokyo")
        );
        let utc = arrow::array::TimestampMillisecondArray::from(vec![Some(1_767_261_600_123)])
            .with_timezone("+00:00");
        assert_eq!(value(&utc, 0), json!("2026-01-01 10:00:00.123 UTC"));
        let batch = RecordBatch::try_from_iter(vec![
            ("a", Arc::new(Int64Array::from(vec![Some(1), None])) as _),
            (
                "b",
                Arc::new(StringArray::from(vec![Some("x"), Some("y")])) as _,
            ),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let mut rows = JsonRows::default();
        rows.push_batch(&batch);
        rows.push_batch(&batch.slice(1, 1));
        assert_eq!(rows.len(), 3);
        assert_eq!(rows.into_array(), br#"[[1,"x"],[null,"y"],[null,"y"]]"#);
        assert_eq!(JsonRows::default().into_array(), b"[]");
    }

    /// The rows written straight from the arrays are the JSON of each value, type by type.
    #[test]
    fn rows_written_directly_are_the_values_json() {
        use arrow::array::{
            ArrayRef, BooleanArray, Date32Array, Float32Array, Float64Array, Int8Array,
            LargeStringArray, ListArray, StringViewArray, UInt64Array,
        };
        use arrow::datatypes::Int32Type;

        let columns: Vec<(&str, ArrayRef)> = vec![
            (
                "b",
                Arc::new(BooleanArray::from(vec![
                    Some(true),
                    None,
                    Some(false),
                    Some(true),
                ])),
            ),
            (
                "i8",
                Arc::new(Int8Array::from(vec![Some(-128), Some(0), None, Some(127)])),
            ),
            (
                "u64",
                Arc::new(UInt64Array::from(vec![
                    Some(u64::MAX),
                    Some(0),
                    Some(1),
                    None,
                ])),
            ),
            (
                "f32",
                Arc::new(Float32Array::from(vec![
                    Some(0.1),
                    Some(f32::NAN),
                    None,
                    Some(-2.5),
                ])),
            ),
            (
                "f64",
                Arc::new(Float64Array::from(vec![
                    Some(f64::INFINITY),
                    Some(f64::NEG_INFINITY),
                    Some(1e300),
                    Some(-0.0),
                ])),
            ),
            (
                "s",
                Arc::new(StringArray::from(vec![
                    Some("quote \" and \\ slash"),
                    Some("line\nbreak \u{1} ünïcode"),
                    None,
                    Some(""),
                ])),
            ),
            (
                "ls",
                Arc::new(LargeStringArray::from(vec![
                    Some("a"),
                    None,
                    Some("\t"),
                    Some("z"),
                ])),
            ),
            (
                "sv",
                Arc::new(StringViewArray::from(vec![
                    Some("a long string of more than twelve bytes"),
                    Some("x"),
                    None,
                    Some("y"),
                ])),
            ),
            (
                "d",
                Arc::new(Date32Array::from(vec![
                    Some(0),
                    Some(20_000),
                    None,
                    Some(-1),
                ])),
            ),
            (
                "dec",
                Arc::new(
                    Decimal128Array::from(vec![Some(12345), Some(-5), None, Some(0)])
                        .with_precision_and_scale(10, 2)
                        .unwrap_or_else(|e| panic!("{e}")),
                ),
            ),
            (
                "list",
                Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
                    Some(vec![Some(1), None]),
                    None,
                    Some(vec![]),
                    Some(vec![Some(3)]),
                ])),
            ),
            (
                "ts",
                Arc::new(TimestampMicrosecondArray::from(vec![
                    Some(1_767_261_600_000_000),
                    None,
                    Some(0),
                    Some(1),
                ])),
            ),
        ];
        let batch = RecordBatch::try_from_iter(columns).unwrap_or_else(|e| panic!("{e}"));
        let mut rows = JsonRows::default();
        rows.push_batch(&batch);
        let written: Value =
            serde_json::from_slice(&rows.into_array()).unwrap_or_else(|e| panic!("{e}"));
        let expected: Vec<Value> = (0..batch.num_rows())
            .map(|row| {
                Value::Array(
                    batch
                        .columns()
                        .iter()
                        .map(|c| value(c.as_ref(), row))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(written, Value::Array(expected));
        assert_eq!(written[0][3], json!(0.10000000149011612));
        assert_eq!(written[1][3], json!("NaN"));
        assert_eq!(written[0][5], json!("quote \" and \\ slash"));
        assert_eq!(written[0][9], json!("123.45"));
    }

    #[test]
    fn times_and_intervals_in_trino_form() {
        use arrow::array::{
            DurationMicrosecondArray, IntervalMonthDayNanoArray, IntervalYearMonthArray,
            Time32MillisecondArray, Time32SecondArray,
        };
        use arrow::datatypes::IntervalMonthDayNano;

        assert_eq!(
            value(&Time32SecondArray::from(vec![Some(3_723)]), 0),
            json!("01:02:03")
        );
        assert_eq!(
            value(&Time32MillisecondArray::from(vec![Some(3_723_456)]), 0),
            json!("01:02:03.456")
        );
        let months = IntervalYearMonthArray::from(vec![Some(14), Some(-3), Some(0)]);
        assert_eq!(trino_type(months.data_type()).0, "interval year to month");
        let shown: Vec<Value> = (0..3).map(|i| value(&months, i)).collect();
        assert_eq!(shown, vec![json!("1-2"), json!("-0-3"), json!("0-0")]);
        let days = IntervalMonthDayNanoArray::from(vec![
            Some(IntervalMonthDayNano::new(0, 2, 3_723_456_000_000)),
            Some(IntervalMonthDayNano::new(0, -1, -1_000_000)),
        ]);
        assert_eq!(trino_type(days.data_type()).0, "interval day to second");
        assert_eq!(value(&days, 0), json!("2 01:02:03.456"));
        assert_eq!(value(&days, 1), json!("-1 00:00:00.001"));
        let elapsed = DurationMicrosecondArray::from(vec![Some(90_061_001_000)]);
        assert_eq!(trino_type(elapsed.data_type()).0, "interval day to second");
        assert_eq!(value(&elapsed, 0), json!("1 01:01:01.001"));
    }

    #[test]
    fn a_zone_per_value_shows_each_value_in_its_zone() {
        use arrow::array::{ArrayRef, StructArray, TimestampMillisecondArray};
        use arrow::datatypes::Field;

        let instants = TimestampMillisecondArray::from(vec![
            Some(1_767_261_600_000),
            Some(1_767_261_600_000),
            None,
        ])
        .with_timezone("UTC");
        let zones = StringArray::from(vec![Some("Asia/Tokyo"), Some("-05:00"), Some("UTC")]);
        let zoned = StructArray::from(vec![
            (
                Arc::new(Field::new("instant", instants.data_type().clone(), true)),
                Arc::new(instants) as ArrayRef,
            ),
            (
                Arc::new(Field::new("zone", DataType::Utf8, true)),
                Arc::new(zones) as ArrayRef,
            ),
        ]);
        assert_eq!(
            trino_type(zoned.data_type()).0,
            "timestamp(3) with time zone"
        );
        let shown: Vec<Value> = (0..3).map(|i| value(&zoned, i)).collect();
        assert_eq!(
            shown,
            vec![
                json!("2026-01-01 19:00:00.000 Asia/Tokyo"),
                json!("2026-01-01 05:00:00.000 -05:00"),
                Value::Null
            ]
        );
    }
}

//! Trino's date and time functions (`functions/datetime` in Trino's docs): `date_add`, `date_diff`,
//! `date_trunc` (a DATE stays a DATE), the field functions (`year`, `day_of_week`, …, which
//! `EXTRACT` uses too), `last_day_of_month`, `to_unixtime`, MySQL's `date_format`/`date_parse`,
//! Joda's `format_datetime` (its `parse_datetime`, which gives a zone, is in `timezone.rs`),
//! Teradata's `to_char`/`to_date`/`to_timestamp`, and the ISO 8601 ones.
//!
//! Dates and timestamps are read as local date-times: a timestamp with a time zone in its own zone,
//! as Trino does, so `hour(TIMESTAMP '2020-01-01 10:00 Europe/Berlin')` is 10. Results keep the
//! argument's type (its precision and zone).

use std::sync::Arc;

use arrow::array::timezone::Tz;
use arrow::array::{
    Array, ArrayRef, AsArray, Date32Array, Float64Array, Int64Array, StringArray,
    TimestampMicrosecondArray,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, TimeUnit};
use chrono::format::{Item, Parsed, StrftimeItems};
use std::fmt::Write as _;

use chrono::{
    DateTime, Datelike, Duration, LocalResult, Months, NaiveDate, NaiveDateTime, NaiveTime, Offset,
    TimeZone, Timelike,
};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::ScalarUDF;

use crate::udf::{Scalar, invalid, is_integer, is_temporal, is_text, temporal_target, unexpected};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    let mut out = vec![
        date_add(),
        date_diff(),
        date_trunc(),
        last_day_of_month(),
        to_unixtime(),
        date_format(),
        date_parse(),
        format_datetime(),
        from_iso8601_date(),
        to_iso8601(),
        human_readable_seconds(),
        to_milliseconds(),
        parse_duration(),
        from_unixtime_nanos(),
        to_char(),
        to_date(),
        to_timestamp(),
    ];
    out.extend(FIELDS.iter().map(field));
    out
}

/// `human_readable_seconds(x)`: weeks, days, hours, minutes and seconds, the zero ones left out.
fn human_readable_seconds() -> Arc<ScalarUDF> {
    crate::udf::per_row(
        "human_readable_seconds",
        |args| match args {
            [t] if t.is_numeric() || t.is_null() => Ok(vec![DataType::Float64]),
            _ => unexpected("human_readable_seconds", args, &["double"]),
        },
        |_| Ok(DataType::Utf8),
        |row| {
            let ScalarValue::Float64(Some(x)) = row[0] else {
                return Ok(ScalarValue::Utf8(None));
            };
            if !x.is_finite() {
                return invalid(format!("Invalid argument found: {x}"));
            }
            let mut left = x.abs().round() as u64;
            let mut parts = Vec::new();
            for (unit, size) in [
                ("week", 604_800),
                ("day", 86_400),
                ("hour", 3_600),
                ("minute", 60),
                ("second", 1),
            ] {
                let n = left / size;
                left %= size;
                if n > 0 {
                    parts.push(format!("{n} {unit}{}", if n == 1 { "" } else { "s" }));
                }
            }
            if parts.is_empty() {
                parts.push("0 seconds".into());
            }
            Ok(ScalarValue::Utf8(Some(parts.join(", "))))
        },
    )
    .udf()
}

/// `to_milliseconds(interval)`: a day-to-second interval in milliseconds.
pub fn to_milliseconds() -> Arc<ScalarUDF> {
    crate::udf::per_row(
        "to_milliseconds",
        |args| match args {
            [DataType::Interval(_) | DataType::Duration(_) | DataType::Null] => {
                Ok(vec![DataType::Interval(
                    arrow::datatypes::IntervalUnit::MonthDayNano,
                )])
            }
            _ => unexpected("to_milliseconds", args, &["interval day to second"]),
        },
        |_| Ok(DataType::Int64),
        |row| {
            let ScalarValue::IntervalMonthDayNano(Some(v)) = row[0] else {
                return Ok(ScalarValue::Int64(None));
            };
            if v.months != 0 {
                return invalid("to_milliseconds takes an interval day to second");
            }
            Ok(ScalarValue::Int64(Some(
                i64::from(v.days) * 86_400_000 + v.nanoseconds / 1_000_000,
            )))
        },
    )
    .udf()
}

/// `parse_duration('3.81 d')`: a day-to-second interval, to the millisecond.
fn parse_duration() -> Arc<ScalarUDF> {
    crate::udf::per_row(
        "parse_duration",
        |args| match args {
            [t] if crate::udf::is_text(t) => Ok(vec![DataType::Utf8]),
            _ => unexpected("parse_duration", args, &["varchar"]),
        },
        |_| {
            Ok(DataType::Interval(
                arrow::datatypes::IntervalUnit::MonthDayNano,
            ))
        },
        |row| {
            let ScalarValue::Utf8(Some(s)) = &row[0] else {
                return Ok(ScalarValue::IntervalMonthDayNano(None));
            };
            let bad = || invalid(format!("duration is not a valid data duration string: {s}"));
            let t = s.trim();
            let split = t
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(t.len());
            let (number, unit) = (&t[..split], t[split..].trim());
            let Ok(value) = number.parse::<f64>() else {
                return bad();
            };
            let nanos_per = match unit {
                "ns" => 1.0,
                "us" => 1e3,
                "ms" => 1e6,
                "s" => 1e9,
                "m" => 60e9,
                "h" => 3_600e9,
                "d" => 86_400e9,
                _ => return bad(),
            };
            let millis = (value * nanos_per / 1e6).round();
            if !millis.is_finite() || millis.abs() > 9.0e15 {
                return bad();
            }
            let millis = millis as i64;
            let (days, rest) = (millis / 86_400_000, millis % 86_400_000);
            Ok(ScalarValue::IntervalMonthDayNano(Some(
                arrow::datatypes::IntervalMonthDayNano::new(0, days as i32, rest * 1_000_000),
            )))
        },
    )
    .udf()
}

/// `from_unixtime_nanos(n)`: the instant `n` nanoseconds after the epoch, in UTC (a decimal's
/// fraction dropped).
fn from_unixtime_nanos() -> Arc<ScalarUDF> {
    crate::udf::per_row(
        "from_unixtime_nanos",
        |args| match args {
            [t] if t.is_integer() || t.is_null() => Ok(vec![DataType::Int64]),
            [DataType::Decimal128(p, _)] => Ok(vec![DataType::Decimal128(*p, 0)]),
            _ => unexpected("from_unixtime_nanos", args, &["bigint", "decimal(p, s)"]),
        },
        |_| {
            Ok(DataType::Timestamp(
                TimeUnit::Nanosecond,
                Some("UTC".into()),
            ))
        },
        |row| {
            let n = match row[0] {
                ScalarValue::Int64(Some(n)) => n,
                ScalarValue::Decimal128(Some(n), _, _) => match i64::try_from(n) {
                    Ok(n) => n,
                    Err(_) => return invalid("from_unixtime_nanos: value out of range"),
                },
                _ => return Ok(ScalarValue::TimestampNanosecond(None, Some("UTC".into()))),
            };
            Ok(ScalarValue::TimestampNanosecond(
                Some(n),
                Some("UTC".into()),
            ))
        },
    )
    .udf()
}

fn epoch() -> NaiveDateTime {
    DateTime::UNIX_EPOCH.naive_utc()
}

/// One date or timestamp column, read row by row as local date-times.
pub(crate) struct Temporal {
    kind: TemporalKind,
}

enum TemporalKind {
    Date(Date32Array),
    Timestamp(TimestampMicrosecondArray, Option<Tz>),
}

impl Temporal {
    pub(crate) fn of(array: &ArrayRef) -> Result<Self> {
        let kind = match array.data_type() {
            DataType::Timestamp(_, tz) => {
                let micros = cast(
                    array,
                    &DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
                )?;
                let zone = match tz {
                    Some(tz) => Some(tz.parse::<Tz>()?),
                    None => None,
                };
                TemporalKind::Timestamp(micros.as_primitive().clone(), zone)
            }
            _ => TemporalKind::Date(cast(array, &DataType::Date32)?.as_primitive().clone()),
        };
        Ok(Self { kind })
    }

    pub(crate) fn is_date(&self) -> bool {
        matches!(self.kind, TemporalKind::Date(_))
    }

    pub(crate) fn len(&self) -> usize {
        match &self.kind {
            TemporalKind::Date(a) => a.len(),
            TemporalKind::Timestamp(a, _) => a.len(),
        }
    }

    /// Row `i` as a local date-time (a date at midnight).
    pub(crate) fn get(&self, i: usize) -> Option<NaiveDateTime> {
        match &self.kind {
            TemporalKind::Date(a) => {
                (!a.is_null(i)).then(|| epoch() + Duration::days(i64::from(a.value(i))))
            }
            TemporalKind::Timestamp(a, tz) => {
                if a.is_null(i) {
                    return None;
                }
                let utc = DateTime::from_timestamp_micros(a.value(i))?;
                Some(match tz {
                    Some(tz) => utc.with_timezone(tz).naive_local(),
                    None => utc.naive_utc(),
                })
            }
        }
    }

    /// Row `i`'s offset from UTC in its zone (None for a date or a timestamp without a zone).
    pub(crate) fn offset(&self, i: usize) -> Option<chrono::FixedOffset> {
        match &self.kind {
            TemporalKind::Timestamp(a, Some(tz)) if !a.is_null(i) => {
                let utc = DateTime::from_timestamp_micros(a.value(i))?;
                Some(tz.offset_from_utc_datetime(&utc.naive_utc()).fix())
            }
            _ => None,
        }
    }

    /// Row `i` as an instant, microseconds since the epoch (a date's midnight in UTC).
    fn micros(&self, i: usize) -> Option<i64> {
        match &self.kind {
            TemporalKind::Date(a) => {
                (!a.is_null(i)).then(|| i64::from(a.value(i)) * 86_400_000_000)
            }
            TemporalKind::Timestamp(a, _) => (!a.is_null(i)).then(|| a.value(i)),
        }
    }
}

/// Local date-times as a column of type `t` (a date, or a timestamp of any precision and zone).
pub(crate) fn temporal_array(values: Vec<Option<NaiveDateTime>>, t: &DataType) -> Result<ArrayRef> {
    match t {
        DataType::Date32 => {
            let days = values
                .into_iter()
                .map(|v| v.map(|v| (v.date() - epoch().date()).num_days() as i32));
            Ok(Arc::new(Date32Array::from_iter(days)))
        }
        DataType::Timestamp(unit, tz) => {
            let zone = match tz {
                Some(tz) => Some(tz.parse::<Tz>()?),
                None => None,
            };
            let mut micros = Vec::with_capacity(values.len());
            for v in values {
                micros.push(match v {
                    None => None,
                    Some(v) => Some(local_to_micros(v, zone.as_ref())?),
                });
            }
            let micros = TimestampMicrosecondArray::from(micros).with_timezone_opt(tz.clone());
            let out: ArrayRef = Arc::new(micros);
            if *unit == TimeUnit::Microsecond {
                Ok(out)
            } else {
                Ok(cast(&out, t)?)
            }
        }
        other => invalid(format!("not a date or timestamp type: {other}")),
    }
}

fn local_to_micros(v: NaiveDateTime, zone: Option<&Tz>) -> Result<i64> {
    let Some(zone) = zone else {
        return Ok(v.and_utc().timestamp_micros());
    };
    match zone.from_local_datetime(&v) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Ok(t.timestamp_micros()),
        // A local time skipped by a change of offset: the instant an hour on.
        LocalResult::None => match zone.from_local_datetime(&(v + Duration::hours(1))) {
            LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Ok(t.timestamp_micros()),
            LocalResult::None => invalid(format!("{v} does not exist in time zone {zone:?}")),
        },
    }
}

/// Row `i` of a text column (any string type, read after coercion to Utf8).
pub(crate) fn text(array: &ArrayRef, i: usize) -> Option<&str> {
    let a = array.as_string::<i32>();
    (!a.is_null(i)).then(|| a.value(i))
}

fn int(array: &ArrayRef, i: usize) -> Option<i64> {
    let a = array.as_primitive::<arrow::datatypes::Int64Type>();
    (!a.is_null(i)).then(|| a.value(i))
}

/// Coerces (text, …) prefixes and temporal arguments: `shape` says, per argument, what it is.
#[derive(Clone, Copy)]
enum Arg {
    Text,
    Int,
    Temporal,
}

fn coerce(
    name: &'static str,
    shapes: &'static [&'static [Arg]],
    expected: &'static [&'static str],
) -> impl Fn(&[DataType]) -> Result<Vec<DataType>> + Send + Sync {
    move |args| {
        for shape in shapes {
            if shape.len() != args.len() {
                continue;
            }
            let fits = shape.iter().zip(args).all(|(s, t)| match s {
                Arg::Text => is_text(t),
                Arg::Int => is_integer(t),
                Arg::Temporal => is_temporal(t),
            });
            if fits {
                return Ok(shape
                    .iter()
                    .zip(args)
                    .map(|(s, t)| match s {
                        Arg::Text => DataType::Utf8,
                        Arg::Int => DataType::Int64,
                        Arg::Temporal if t.is_null() => DataType::Date32,
                        Arg::Temporal => match t {
                            DataType::Timestamp(..) => t.clone(),
                            _ => DataType::Date32,
                        },
                    })
                    .collect());
            }
        }
        unexpected(name, args, expected)
    }
}

/// A unit of `date_add`, `date_diff` and `date_trunc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Unit {
    Millisecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

fn unit(name: &str, date: bool) -> Result<Unit> {
    let unit = match name.to_ascii_lowercase().as_str() {
        "millisecond" => Unit::Millisecond,
        "second" => Unit::Second,
        "minute" => Unit::Minute,
        "hour" => Unit::Hour,
        "day" => Unit::Day,
        "week" => Unit::Week,
        "month" => Unit::Month,
        "quarter" => Unit::Quarter,
        "year" => Unit::Year,
        _ => return invalid(format!("'{name}' is not a valid {} field", kind(date))),
    };
    if date && unit < Unit::Day {
        return invalid(format!("'{name}' is not a valid DATE field"));
    }
    Ok(unit)
}

fn kind(date: bool) -> &'static str {
    if date { "DATE" } else { "TIMESTAMP" }
}

fn add(v: NaiveDateTime, unit: Unit, n: i64) -> Option<NaiveDateTime> {
    let months = |m: i64| -> Option<NaiveDateTime> {
        let m32 = u32::try_from(m.unsigned_abs()).ok()?;
        if m >= 0 {
            v.checked_add_months(Months::new(m32))
        } else {
            v.checked_sub_months(Months::new(m32))
        }
    };
    match unit {
        Unit::Millisecond => v.checked_add_signed(Duration::try_milliseconds(n)?),
        Unit::Second => v.checked_add_signed(Duration::try_seconds(n)?),
        Unit::Minute => v.checked_add_signed(Duration::try_minutes(n)?),
        Unit::Hour => v.checked_add_signed(Duration::try_hours(n)?),
        Unit::Day => v.checked_add_signed(Duration::try_days(n)?),
        Unit::Week => v.checked_add_signed(Duration::try_weeks(n)?),
        Unit::Month => months(n),
        Unit::Quarter => months(n.checked_mul(3)?),
        Unit::Year => months(n.checked_mul(12)?),
    }
}

fn date_add() -> Arc<ScalarUDF> {
    const EXPECTED: &[&str] = &["varchar, bigint, date", "varchar, bigint, timestamp"];
    Scalar::new(
        "date_add",
        coerce(
            "date_add",
            &[&[Arg::Text, Arg::Int, Arg::Temporal]],
            EXPECTED,
        ),
        |args| Ok(temporal_target_keep(&args[2])),
        |args, t| {
            let values = Temporal::of(&args[2])?;
            let mut out = Vec::with_capacity(values.len());
            for i in 0..values.len() {
                let (Some(u), Some(n), Some(v)) =
                    (text(&args[0], i), int(&args[1], i), values.get(i))
                else {
                    out.push(None);
                    continue;
                };
                let u = unit(u, values.is_date())?;
                match add(v, u, n) {
                    Some(r) => out.push(Some(r)),
                    None => {
                        return invalid(format!("date_add: {v} plus {n} {u:?} is out of range"));
                    }
                }
            }
            temporal_array(out, t)
        },
    )
    .udf()
}

/// A timestamp keeps its type (precision and zone); anything else is a date.
fn temporal_target_keep(t: &DataType) -> DataType {
    match t {
        DataType::Timestamp(..) => t.clone(),
        _ => temporal_target(t),
    }
}

/// Whole months from `a` to `b`: the largest n (toward zero) with `a` + n months not past `b`.
fn months_between(a: NaiveDateTime, b: NaiveDateTime) -> i64 {
    let mut n = i64::from(b.year() - a.year()) * 12 + i64::from(b.month()) - i64::from(a.month());
    if n > 0 && add(a, Unit::Month, n).is_some_and(|x| x > b) {
        n -= 1;
    } else if n < 0 && add(a, Unit::Month, n).is_some_and(|x| x < b) {
        n += 1;
    }
    n
}

fn diff(a: NaiveDateTime, b: NaiveDateTime, unit: Unit) -> i64 {
    let d = b - a;
    match unit {
        Unit::Millisecond => d.num_milliseconds(),
        Unit::Second => d.num_seconds(),
        Unit::Minute => d.num_minutes(),
        Unit::Hour => d.num_hours(),
        Unit::Day => d.num_days(),
        Unit::Week => d.num_weeks(),
        Unit::Month => months_between(a, b),
        Unit::Quarter => months_between(a, b) / 3,
        Unit::Year => months_between(a, b) / 12,
    }
}

fn date_diff() -> Arc<ScalarUDF> {
    const EXPECTED: &[&str] = &["varchar, date, date", "varchar, timestamp, timestamp"];
    Scalar::new(
        "date_diff",
        move |args: &[DataType]| {
            let [u, a, b] = args else {
                return unexpected("date_diff", args, EXPECTED);
            };
            if !is_text(u) || !is_temporal(a) || !is_temporal(b) {
                return unexpected("date_diff", args, EXPECTED);
            }
            // Both sides are read as one type: a date beside a timestamp becomes a timestamp.
            let common = match (a, b) {
                (DataType::Timestamp(_, tz), _) | (_, DataType::Timestamp(_, tz)) => {
                    DataType::Timestamp(TimeUnit::Microsecond, tz.clone())
                }
                _ => DataType::Date32,
            };
            Ok(vec![DataType::Utf8, common.clone(), common])
        },
        |_| Ok(DataType::Int64),
        |args, _| {
            let a = Temporal::of(&args[1])?;
            let b = Temporal::of(&args[2])?;
            let mut out = Vec::with_capacity(a.len());
            for i in 0..a.len() {
                let (Some(u), Some(x), Some(y)) = (text(&args[0], i), a.get(i), b.get(i)) else {
                    out.push(None);
                    continue;
                };
                let u = unit(u, a.is_date())?;
                // Units of fixed length count between instants; days and longer on the calendar.
                let n = if u < Unit::Day {
                    let (Some(x), Some(y)) = (a.micros(i), b.micros(i)) else {
                        out.push(None);
                        continue;
                    };
                    diff(epoch(), epoch() + Duration::microseconds(y - x), u)
                } else {
                    diff(x, y, u)
                };
                out.push(Some(n));
            }
            Ok(Arc::new(Int64Array::from(out)))
        },
    )
    .udf()
}

fn trunc(v: NaiveDateTime, unit: Unit) -> Option<NaiveDateTime> {
    let date = v.date();
    let at = |d: NaiveDate| Some(d.and_time(NaiveTime::MIN));
    match unit {
        Unit::Millisecond => v.with_nanosecond(v.nanosecond() / 1_000_000 * 1_000_000),
        Unit::Second => v.with_nanosecond(0),
        Unit::Minute => v.with_nanosecond(0)?.with_second(0),
        Unit::Hour => v.with_nanosecond(0)?.with_second(0)?.with_minute(0),
        Unit::Day => at(date),
        Unit::Week => at(date - Duration::days(i64::from(date.weekday().num_days_from_monday()))),
        Unit::Month => at(date.with_day(1)?),
        Unit::Quarter => at(NaiveDate::from_ymd_opt(
            date.year(),
            (date.month() - 1) / 3 * 3 + 1,
            1,
        )?),
        Unit::Year => at(NaiveDate::from_ymd_opt(date.year(), 1, 1)?),
    }
}

/// `date_trunc(unit, x)`: of a DATE, a DATE (DataFusion's gives a timestamp).
fn date_trunc() -> Arc<ScalarUDF> {
    const EXPECTED: &[&str] = &["varchar, date", "varchar, timestamp"];
    Scalar::new(
        "date_trunc",
        coerce("date_trunc", &[&[Arg::Text, Arg::Temporal]], EXPECTED),
        |args| Ok(temporal_target_keep(&args[1])),
        |args, t| {
            let values = Temporal::of(&args[1])?;
            let mut out = Vec::with_capacity(values.len());
            for i in 0..values.len() {
                let (Some(u), Some(v)) = (text(&args[0], i), values.get(i)) else {
                    out.push(None);
                    continue;
                };
                out.push(trunc(v, unit(u, values.is_date())?));
            }
            temporal_array(out, t)
        },
    )
    .udf()
}

/// The field functions, with the names `EXTRACT` maps its fields to.
struct Field {
    name: &'static str,
    aliases: &'static [&'static str],
    /// Whether a DATE has it (hours and smaller it has not).
    date: bool,
    get: fn(NaiveDateTime) -> i64,
}

const FIELDS: &[Field] = &[
    Field {
        name: "year",
        aliases: &[],
        date: true,
        get: |v| i64::from(v.year()),
    },
    Field {
        name: "quarter",
        aliases: &[],
        date: true,
        get: |v| i64::from((v.month() - 1) / 3 + 1),
    },
    Field {
        name: "month",
        aliases: &[],
        date: true,
        get: |v| i64::from(v.month()),
    },
    Field {
        name: "week",
        aliases: &["week_of_year"],
        date: true,
        get: |v| i64::from(v.iso_week().week()),
    },
    Field {
        name: "day",
        aliases: &["day_of_month"],
        date: true,
        get: |v| i64::from(v.day()),
    },
    Field {
        name: "day_of_week",
        aliases: &["dow"],
        date: true,
        get: |v| i64::from(v.weekday().number_from_monday()),
    },
    Field {
        name: "day_of_year",
        aliases: &["doy"],
        date: true,
        get: |v| i64::from(v.ordinal()),
    },
    Field {
        name: "year_of_week",
        aliases: &["yow"],
        date: true,
        get: |v| i64::from(v.iso_week().year()),
    },
    Field {
        name: "hour",
        aliases: &[],
        date: false,
        get: |v| i64::from(v.hour()),
    },
    Field {
        name: "minute",
        aliases: &[],
        date: false,
        get: |v| i64::from(v.minute()),
    },
    Field {
        name: "second",
        aliases: &[],
        date: false,
        get: |v| i64::from(v.second()),
    },
    Field {
        name: "millisecond",
        aliases: &[],
        date: false,
        get: |v| i64::from(v.nanosecond() / 1_000_000),
    },
];

/// The function `EXTRACT(field FROM x)` means, by Trino's field names.
pub fn extract_function(field: &str) -> Option<&'static str> {
    let field = field.to_ascii_lowercase();
    FIELDS
        .iter()
        .find(|f| f.name == field || f.aliases.contains(&field.as_str()))
        .map(|f| f.name)
}

fn field(f: &'static Field) -> Arc<ScalarUDF> {
    let expected: &'static [&'static str] = if f.date {
        &["date", "timestamp"]
    } else {
        &["timestamp"]
    };
    let mut udf = Scalar::new(
        f.name,
        move |args: &[DataType]| match args {
            [DataType::Date32 | DataType::Date64] if f.date => Ok(vec![DataType::Date32]),
            [DataType::Null] => Ok(vec![DataType::Date32]),
            [t @ DataType::Timestamp(..)] => Ok(vec![t.clone()]),
            _ => unexpected(f.name, args, expected),
        },
        |_| Ok(DataType::Int64),
        move |args, _| {
            let values = Temporal::of(&args[0])?;
            let out: Int64Array = (0..values.len())
                .map(|i| values.get(i).map(f.get))
                .collect();
            Ok(Arc::new(out))
        },
    );
    for alias in f.aliases {
        udf = udf.alias(alias);
    }
    udf.udf()
}

fn last_day_of_month() -> Arc<ScalarUDF> {
    Scalar::new(
        "last_day_of_month",
        coerce(
            "last_day_of_month",
            &[&[Arg::Temporal]],
            &["date", "timestamp"],
        ),
        |_| Ok(DataType::Date32),
        |args, t| {
            let values = Temporal::of(&args[0])?;
            let out = (0..values.len())
                .map(|i| {
                    let v = values.get(i)?;
                    let first = trunc(v, Unit::Month)?;
                    Some(add(first, Unit::Month, 1)? - Duration::days(1))
                })
                .collect();
            temporal_array(out, t)
        },
    )
    .udf()
}

fn to_unixtime() -> Arc<ScalarUDF> {
    Scalar::new(
        "to_unixtime",
        coerce("to_unixtime", &[&[Arg::Temporal]], &["timestamp"]),
        |_| Ok(DataType::Float64),
        |args, _| {
            let values = Temporal::of(&args[0])?;
            let out: Float64Array = (0..values.len())
                .map(|i| values.micros(i).map(|m| m as f64 / 1e6))
                .collect();
            Ok(Arc::new(out))
        },
    )
    .udf()
}

/// MySQL's format specifiers (`date_format`, `date_parse`) as chrono's.
fn mysql_format(format: &str, parse: bool) -> Result<String> {
    let mut out = String::with_capacity(format.len() * 2);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = chars.next() else {
            out.push_str("%%");
            break;
        };
        out.push_str(match spec {
            'a' => "%a",
            'b' => "%b",
            'c' => "%-m",
            'd' => "%d",
            'e' => "%-d",
            'f' => "%6f",
            'H' => "%H",
            'h' | 'I' => "%I",
            'i' => "%M",
            'j' => "%j",
            'k' => "%-H",
            'l' => "%-I",
            'M' => "%B",
            'm' => "%m",
            'p' => "%p",
            'r' => "%I:%M:%S %p",
            'S' | 's' => "%S",
            'T' => "%H:%M:%S",
            'v' => "%V",
            'W' => "%A",
            'w' if !parse => "%w",
            'x' => "%G",
            'Y' => "%Y",
            'y' => "%y",
            '%' => "%%",
            'D' | 'U' | 'u' | 'V' | 'X' | 'w' => {
                return invalid(format!("%{spec} not supported in date format string"));
            }
            // MySQL prints an unknown specifier's letter.
            other => {
                out.push(other);
                continue;
            }
        });
    }
    Ok(out)
}

fn items(format: &str) -> Result<Vec<Item<'_>>> {
    let items: Vec<Item<'_>> = StrftimeItems::new(format).collect();
    if items.iter().any(|i| matches!(i, Item::Error)) {
        return invalid(format!("invalid date format '{format}'"));
    }
    Ok(items)
}

fn format_rows(args: &[ArrayRef], to_chrono: impl Fn(&str) -> Result<String>) -> Result<ArrayRef> {
    let values = Temporal::of(&args[0])?;
    // The format's items, parsed once per distinct format (nearly always one literal).
    let mut cached: Option<(String, Vec<Item<'static>>)> = None;
    let mut out = Vec::with_capacity(values.len());
    for i in 0..values.len() {
        let (Some(v), Some(f)) = (values.get(i), text(&args[1], i)) else {
            out.push(None);
            continue;
        };
        if cached.as_ref().is_none_or(|(k, _)| k != f) {
            let parsed = items(&to_chrono(f)?)?
                .into_iter()
                .map(Item::to_owned)
                .collect();
            cached = Some((f.to_string(), parsed));
        }
        let items = cached
            .as_ref()
            .map(|(_, i)| i.as_slice())
            .unwrap_or_default();
        // With its offset (UTC's for a timestamp without a zone), so that offset patterns print;
        // a pattern that still cannot be printed is an error, not a panic.
        let offset = values.offset(i).unwrap_or_else(|| chrono::Utc.fix());
        let mut text = String::new();
        let written = match offset.from_local_datetime(&v).earliest() {
            Some(at) => write!(text, "{}", at.format_with_items(items.iter())),
            None => write!(text, "{}", v.format_with_items(items.iter())),
        };
        if written.is_err() {
            return invalid(format!("the pattern '{f}' cannot format {v}"));
        }
        out.push(Some(text));
    }
    Ok(Arc::new(StringArray::from(out)))
}

fn date_format() -> Arc<ScalarUDF> {
    Scalar::new(
        "date_format",
        coerce(
            "date_format",
            &[&[Arg::Temporal, Arg::Text]],
            &["timestamp, varchar"],
        ),
        |_| Ok(DataType::Utf8),
        |args, _| format_rows(args, |f| mysql_format(f, false)),
    )
    .udf()
}

/// Teradata's format elements (`to_char`, `to_date`, `to_timestamp`), in any case, as chrono's
/// specifiers: `yyyy yy mm dd hh24 hh mi ss` and the separators `- / , . ; :` and space.
fn teradata_format(format: &str) -> Result<String> {
    const ELEMENTS: [(&str, &str); 8] = [
        ("yyyy", "%Y"),
        ("yy", "%y"),
        ("mm", "%m"),
        ("dd", "%d"),
        ("hh24", "%H"),
        ("hh", "%I"),
        ("mi", "%M"),
        ("ss", "%S"),
    ];
    let lower = format.to_ascii_lowercase();
    let mut out = String::with_capacity(format.len() * 2);
    let mut at = 0;
    while at < lower.len() {
        let rest = &lower[at..];
        if let Some((element, spec)) = ELEMENTS.iter().find(|(e, _)| rest.starts_with(e)) {
            out.push_str(spec);
            at += element.len();
            continue;
        }
        match rest.chars().next() {
            Some(c @ ('-' | '/' | ',' | '.' | ';' | ':' | ' ')) => {
                out.push(c);
                at += 1;
            }
            _ => {
                let bad: String = format[at..].chars().take(1).collect();
                return invalid(format!(
                    "Failed to tokenize string [{bad}] at offset [{at}] of format '{format}'"
                ));
            }
        }
    }
    Ok(out)
}

/// `to_char(timestamp, format)`: the timestamp in Teradata's format.
fn to_char() -> Arc<ScalarUDF> {
    Scalar::new(
        "to_char",
        coerce(
            "to_char",
            &[&[Arg::Temporal, Arg::Text]],
            &["timestamp, varchar"],
        ),
        |_| Ok(DataType::Utf8),
        |args, _| format_rows(args, teradata_format),
    )
    .udf()
}

/// `to_date(text, format)`: the text read in Teradata's format, as a date.
fn to_date() -> Arc<ScalarUDF> {
    Scalar::new(
        "to_date",
        coerce("to_date", &[&[Arg::Text, Arg::Text]], &["varchar, varchar"]),
        |_| Ok(DataType::Date32),
        |args, t| parse_rows(args, t, teradata_format),
    )
    .udf()
}

/// `to_timestamp(text, format)`: the text read in Teradata's format, as a timestamp(3).
fn to_timestamp() -> Arc<ScalarUDF> {
    Scalar::new(
        "to_timestamp",
        coerce(
            "to_timestamp",
            &[&[Arg::Text, Arg::Text]],
            &["varchar, varchar"],
        ),
        |_| Ok(DataType::Timestamp(TimeUnit::Millisecond, None)),
        |args, t| parse_rows(args, t, teradata_format),
    )
    .udf()
}

/// `s` read with chrono's `format`: the local date-time (fields the format lacks are those of
/// 1970-01-01 00:00:00) and the offset from UTC in seconds, if the text gave one.
pub(crate) fn parse_zoned(s: &str, format: &str) -> Option<(NaiveDateTime, Option<i64>)> {
    let mut parsed = Parsed::new();
    chrono::format::parse(&mut parsed, s, StrftimeItems::new(format)).ok()?;
    if parsed.year().is_none() && parsed.isoyear().is_none() {
        let _ = parsed.set_year(1970);
    }
    if parsed.month().is_none() && parsed.ordinal().is_none() && parsed.isoweek().is_none() {
        let _ = parsed.set_month(1);
    }
    if parsed.day().is_none() && parsed.ordinal().is_none() && parsed.weekday().is_none() {
        let _ = parsed.set_day(1);
    }
    if parsed.hour_div_12().is_none() {
        let _ = parsed.set_ampm(false);
    }
    if parsed.hour_mod_12().is_none() {
        let _ = parsed.set_hour12(12);
    }
    if parsed.minute().is_none() {
        let _ = parsed.set_minute(0);
    }
    if parsed.second().is_none() {
        let _ = parsed.set_second(0);
    }
    let date = parsed.to_naive_date().ok()?;
    let time = parsed.to_naive_time().ok()?;
    Some((date.and_time(time), parsed.offset().map(i64::from)))
}

/// A text read as a date-time: the text, its local date-time and the offset from UTC in seconds
/// it named, if any.
pub(crate) type ReadText<'a> = (&'a str, NaiveDateTime, Option<i64>);

/// Each row's text (`args[0]`) read by its pattern (`args[1]`, made chrono's by `to_chrono` once
/// for each pattern in a row); NULL where either is.
pub(crate) fn parse_each<'a>(
    args: &'a [ArrayRef],
    to_chrono: impl Fn(&str) -> Result<String>,
) -> Result<Vec<Option<ReadText<'a>>>> {
    let mut out = Vec::with_capacity(args[0].len());
    let mut cached: Option<(String, String)> = None;
    for i in 0..args[0].len() {
        let (Some(s), Some(f)) = (text(&args[0], i), text(&args[1], i)) else {
            out.push(None);
            continue;
        };
        if cached.as_ref().is_none_or(|(k, _)| k != f) {
            cached = Some((f.to_string(), to_chrono(f)?));
        }
        let chrono = cached.as_ref().map(|(_, c)| c.as_str()).unwrap_or_default();
        match parse_zoned(s, chrono) {
            Some((local, offset)) => out.push(Some((s, local, offset))),
            None => return invalid(format!("Invalid format: \"{s}\" for format \"{f}\"")),
        }
    }
    Ok(out)
}

/// Each row's local date-time, as type `t`.
fn parse_rows(
    args: &[ArrayRef],
    t: &DataType,
    to_chrono: impl Fn(&str) -> Result<String>,
) -> Result<ArrayRef> {
    let rows = parse_each(args, to_chrono)?;
    temporal_array(
        rows.into_iter()
            .map(|r| r.map(|(_, local, _)| local))
            .collect(),
        t,
    )
}

fn date_parse() -> Arc<ScalarUDF> {
    Scalar::new(
        "date_parse",
        coerce(
            "date_parse",
            &[&[Arg::Text, Arg::Text]],
            &["varchar, varchar"],
        ),
        |_| Ok(DataType::Timestamp(TimeUnit::Millisecond, None)),
        |args, t| parse_rows(args, t, |f| mysql_format(f, true)),
    )
    .udf()
}

/// Joda-Time's pattern letters (`format_datetime`, `parse_datetime`) as chrono's specifiers.
pub(crate) fn joda_format(pattern: &str) -> Result<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // Quoted text; '' is a quote.
            i += 1;
            if i < chars.len() && chars[i] == '\'' {
                out.push('\'');
                i += 1;
                continue;
            }
            while i < chars.len() {
                if chars[i] == '\'' {
                    if i + 1 < chars.len() && chars[i + 1] == '\'' {
                        out.push('\'');
                        i += 2;
                        continue;
                    }
                    break;
                }
                if chars[i] == '%' {
                    out.push_str("%%");
                } else {
                    out.push(chars[i]);
                }
                i += 1;
            }
            i += 1;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            if c == '%' {
                out.push_str("%%");
            } else {
                out.push(c);
            }
            i += 1;
            continue;
        }
        let mut n = 1;
        while i + n < chars.len() && chars[i + n] == c {
            n += 1;
        }
        i += n;
        let spec: String = match (c, n) {
            ('y' | 'Y', 2) => "%y".into(),
            ('y' | 'Y', _) => "%Y".into(),
            ('x', 2) => "%g".into(),
            ('x', _) => "%G".into(),
            ('M', 1) => "%-m".into(),
            ('M', 2) => "%m".into(),
            ('M', 3) => "%b".into(),
            ('M', _) => "%B".into(),
            ('d', 1) => "%-d".into(),
            ('d', _) => "%d".into(),
            ('D', 1 | 2) => "%-j".into(),
            ('D', _) => "%j".into(),
            ('w', 1) => "%-V".into(),
            ('w', _) => "%V".into(),
            ('e', _) => "%u".into(),
            ('E', 1..=3) => "%a".into(),
            ('E', _) => "%A".into(),
            ('a', _) => "%p".into(),
            ('H', 1) => "%-H".into(),
            ('H', _) => "%H".into(),
            ('k', _) => "%-H".into(),
            ('h', 1) => "%-I".into(),
            ('h', _) => "%I".into(),
            ('K', _) => "%-I".into(),
            ('m', 1) => "%-M".into(),
            ('m', _) => "%M".into(),
            ('s', 1) => "%-S".into(),
            ('s', _) => "%S".into(),
            ('S', n) if n <= 3 => "%3f".into(),
            ('S', n) if n <= 6 => "%6f".into(),
            ('S', _) => "%9f".into(),
            ('Z', 1) => "%z".into(),
            // The zone's id (`ZZZ`) and name (`z`): its offset here.
            ('Z', _) => "%:z".into(),
            ('z', _) => "%:z".into(),
            (c, _) => return invalid(format!("Illegal pattern component: {c}")),
        };
        out.push_str(&spec);
    }
    Ok(out)
}

fn format_datetime() -> Arc<ScalarUDF> {
    Scalar::new(
        "format_datetime",
        coerce(
            "format_datetime",
            &[&[Arg::Temporal, Arg::Text]],
            &["timestamp, varchar"],
        ),
        |_| Ok(DataType::Utf8),
        |args, _| format_rows(args, joda_format),
    )
    .udf()
}

/// `YYYY`, `YYYY-MM`, `YYYY-MM-DD`, `YYYY-DDD` or `YYYY-Www[-D]`.
fn iso_date(s: &str) -> Option<NaiveDate> {
    let s = s.trim();
    let parts: Vec<&str> = s.split('-').collect();
    let num = |p: &str| -> Option<u32> {
        (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())).then(|| p.parse().ok())?
    };
    let year = i32::try_from(num(parts.first()?)?).ok()?;
    match parts.as_slice() {
        [_] => NaiveDate::from_ymd_opt(year, 1, 1),
        [_, w] if w.starts_with('W') => {
            NaiveDate::from_isoywd_opt(year, num(&w[1..])?, chrono::Weekday::Mon)
        }
        [_, w, d] if w.starts_with('W') => {
            let day =
                chrono::Weekday::try_from(u8::try_from(num(d)?.checked_sub(1)?).ok()?).ok()?;
            NaiveDate::from_isoywd_opt(year, num(&w[1..])?, day)
        }
        [_, m] if m.len() == 3 => NaiveDate::from_yo_opt(year, num(m)?),
        [_, m] => NaiveDate::from_ymd_opt(year, num(m)?, 1),
        [_, m, d] => NaiveDate::from_ymd_opt(year, num(m)?, num(d)?),
        _ => None,
    }
}

fn from_iso8601_date() -> Arc<ScalarUDF> {
    Scalar::new(
        "from_iso8601_date",
        coerce("from_iso8601_date", &[&[Arg::Text]], &["varchar"]),
        |_| Ok(DataType::Date32),
        |args, t| {
            let mut out = Vec::with_capacity(args[0].len());
            for i in 0..args[0].len() {
                let Some(s) = text(&args[0], i) else {
                    out.push(None);
                    continue;
                };
                match iso_date(s) {
                    Some(d) => out.push(Some(d.and_time(NaiveTime::MIN))),
                    None => return invalid(format!("Invalid format: \"{s}\"")),
                }
            }
            temporal_array(out, t)
        },
    )
    .udf()
}

/// An ISO 8601 date, date-time or date-time with an offset: the local date-time and the offset
/// in seconds, if the text gave one (`Z` is 0).
pub(crate) fn iso_parts(s: &str) -> Option<(NaiveDateTime, Option<i64>)> {
    let s = s.trim();
    let (date, rest) = match s.find('T') {
        Some(at) => (&s[..at], &s[at + 1..]),
        None => (s, ""),
    };
    let date = iso_date(date)?;
    if rest.is_empty() {
        return Some((date.and_time(NaiveTime::MIN), None));
    }
    let (time, offset) = match rest.find(['Z', '+', '-']) {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    let time = ["%H:%M:%S%.f", "%H:%M", "%H"]
        .iter()
        .find_map(|f| NaiveTime::parse_from_str(time, f).ok())?;
    let local = date.and_time(time);
    let seconds = match offset {
        "" => None,
        "Z" => Some(0),
        o => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            let digits: String = o[1..].chars().filter(|c| *c != ':').collect();
            let (h, m) = match digits.len() {
                2 => (digits.parse::<i64>().ok()?, 0),
                4 => (
                    digits[..2].parse::<i64>().ok()?,
                    digits[2..].parse::<i64>().ok()?,
                ),
                _ => return None,
            };
            Some(sign * (h * 3600 + m * 60))
        }
    };
    Some((local, seconds))
}

fn to_iso8601() -> Arc<ScalarUDF> {
    Scalar::new(
        "to_iso8601",
        coerce("to_iso8601", &[&[Arg::Temporal]], &["date", "timestamp"]),
        |_| Ok(DataType::Utf8),
        |args, _| {
            let values = Temporal::of(&args[0])?;
            let digits = match args[0].data_type() {
                DataType::Timestamp(TimeUnit::Second, _) => 0,
                DataType::Timestamp(TimeUnit::Millisecond, _) => 3,
                DataType::Timestamp(TimeUnit::Microsecond, _) => 6,
                _ => 9,
            };
            let zone = match args[0].data_type() {
                DataType::Timestamp(_, Some(tz)) => Some(tz.parse::<Tz>()?),
                _ => None,
            };
            let out: StringArray = (0..values.len())
                .map(|i| {
                    let v = values.get(i)?;
                    if values.is_date() {
                        return Some(v.format("%Y-%m-%d").to_string());
                    }
                    let mut s = v.format("%Y-%m-%dT%H:%M:%S").to_string();
                    s.push_str(&fraction(i64::from(v.nanosecond()), digits));
                    if let (Some(zone), Some(m)) = (zone.as_ref(), values.micros(i)) {
                        let offset = DateTime::from_timestamp_micros(m)?
                            .with_timezone(zone)
                            .format("%:z")
                            .to_string();
                        s.push_str(if offset == "+00:00" { "Z" } else { &offset });
                    }
                    Some(s)
                })
                .collect();
            Ok(Arc::new(out))
        },
    )
    .udf()
}

/// `sqe_interval_scaled(interval, n, divide)`: Trino's `interval * n`, `n * interval` and
/// `interval / n`. An integer factor multiplies exactly (an overflow is an error); any other
/// number is a double, and the product or quotient drops its fraction, as Trino's does. A
/// day-to-second interval's result is in days and milliseconds; a year-to-month one's in months.
pub fn interval_scaled() -> Arc<ScalarUDF> {
    use arrow::datatypes::{IntervalMonthDayNano, IntervalUnit};
    let number = |t: &DataType| match t {
        t if is_integer(t) => Some(DataType::Int64),
        DataType::Float16 | DataType::Float32 | DataType::Float64 | DataType::Decimal128(..) => {
            Some(DataType::Float64)
        }
        DataType::Null => Some(DataType::Int64),
        _ => None,
    };
    crate::udf::per_row(
        "sqe_interval_scaled",
        move |args| match args {
            [
                t @ DataType::Interval(IntervalUnit::YearMonth),
                n,
                DataType::Boolean,
            ] if number(n).is_some() => Ok(vec![
                t.clone(),
                number(n).unwrap_or(DataType::Int64),
                DataType::Boolean,
            ]),
            [
                DataType::Interval(_) | DataType::Duration(_),
                n,
                DataType::Boolean,
            ] if number(n).is_some() => Ok(vec![
                DataType::Interval(IntervalUnit::MonthDayNano),
                number(n).unwrap_or(DataType::Int64),
                DataType::Boolean,
            ]),
            _ => unexpected("*", args, &["interval, bigint", "interval, double"]),
        },
        |args| Ok(args[0].clone()),
        |row| {
            let divide = matches!(row[2], ScalarValue::Boolean(Some(true)));
            let scaled = |x: i64| -> Result<i64> {
                match (&row[1], divide) {
                    (ScalarValue::Int64(Some(n)), false) => x
                        .checked_mul(*n)
                        .map_or_else(|| invalid("interval multiplication overflow"), Ok),
                    (ScalarValue::Int64(Some(n)), true) => by_double(x, *n as f64, true),
                    (ScalarValue::Float64(Some(d)), divide) => by_double(x, *d, divide),
                    _ => invalid("an interval is scaled by a number"),
                }
            };
            match &row[0] {
                ScalarValue::IntervalYearMonth(Some(months)) => {
                    let months = i32::try_from(scaled(i64::from(*months))?)
                        .or_else(|_| invalid("interval out of range"))?;
                    Ok(ScalarValue::IntervalYearMonth(Some(months)))
                }
                ScalarValue::IntervalMonthDayNano(Some(v)) => {
                    if v.months != 0 {
                        return invalid("an interval of months and days cannot be scaled");
                    }
                    let millis = i64::from(v.days)
                        .checked_mul(86_400_000)
                        .and_then(|d| d.checked_add(v.nanoseconds / 1_000_000));
                    let Some(millis) = millis else {
                        return invalid("interval out of range");
                    };
                    let millis = scaled(millis)?;
                    let days = i32::try_from(millis / 86_400_000)
                        .or_else(|_| invalid("interval out of range"))?;
                    Ok(ScalarValue::IntervalMonthDayNano(Some(
                        IntervalMonthDayNano::new(0, days, millis % 86_400_000 * 1_000_000),
                    )))
                }
                _ => invalid("an interval is scaled by a number"),
            }
        },
    )
    .udf()
}

/// `sqe_interval_elapsed(interval)`: a day-to-second interval as the time it spans, its days as
/// 24 hours each (an Arrow interval's days are calendar days, which a zone's change of offset
/// lengthens or shortens; Trino adds a zoned timestamp's interval as elapsed time).
pub fn interval_elapsed() -> Arc<ScalarUDF> {
    use arrow::datatypes::{IntervalMonthDayNano, IntervalUnit};
    crate::udf::per_row(
        "sqe_interval_elapsed",
        |args| match args {
            [DataType::Interval(IntervalUnit::DayTime | IntervalUnit::MonthDayNano)] => {
                Ok(vec![DataType::Interval(IntervalUnit::MonthDayNano)])
            }
            _ => unexpected("+", args, &["interval day to second"]),
        },
        |_| Ok(DataType::Interval(IntervalUnit::MonthDayNano)),
        |row| match &row[0] {
            ScalarValue::IntervalMonthDayNano(Some(v)) if v.months == 0 => {
                let nanos = i64::from(v.days)
                    .checked_mul(86_400_000_000_000)
                    .and_then(|d| d.checked_add(v.nanoseconds));
                match nanos {
                    Some(n) => Ok(ScalarValue::IntervalMonthDayNano(Some(
                        IntervalMonthDayNano::new(0, 0, n),
                    ))),
                    None => invalid("interval out of range"),
                }
            }
            other => Ok(other.clone()),
        },
    )
    .udf()
}

/// `x * d` or `x / d` with the fraction dropped, as Trino computes an interval by a double.
fn by_double(x: i64, d: f64, divide: bool) -> Result<i64> {
    if d.is_nan() || (divide && d == 0.0) {
        let verb = if divide { "divide" } else { "multiply" };
        return invalid(format!("Cannot {verb} an interval by double {d}"));
    }
    let v = if divide { x as f64 / d } else { x as f64 * d };
    if !v.is_finite() || v.abs() >= 9.2e18 {
        return invalid("interval out of range");
    }
    Ok(v as i64)
}

/// An interval's text as Trino casts it to VARCHAR: `1-2` for a year-to-month interval (a year
/// and two months), `3 04:05:06.789` for a day-to-second one (to the millisecond), a minus sign
/// before a negative one. (The Trino protocol writes the same text for its values with its own
/// two small formatters: protocol crates build without the engine's crates.)
pub fn interval_text() -> Arc<ScalarUDF> {
    use arrow::datatypes::IntervalUnit;
    crate::udf::per_row(
        "sqe_interval_text",
        |args| match args {
            [t @ DataType::Interval(IntervalUnit::YearMonth)] => Ok(vec![t.clone()]),
            [DataType::Interval(_) | DataType::Duration(_)] => {
                Ok(vec![DataType::Interval(IntervalUnit::MonthDayNano)])
            }
            _ => unexpected("cast", args, &["interval"]),
        },
        |_| Ok(DataType::Utf8),
        |row| {
            let text = match &row[0] {
                ScalarValue::IntervalYearMonth(Some(months)) => year_to_month(*months),
                ScalarValue::IntervalMonthDayNano(Some(v)) if v.months == 0 => {
                    day_to_second(i64::from(v.days) * 86_400_000 + v.nanoseconds / 1_000_000)
                }
                ScalarValue::IntervalMonthDayNano(Some(v)) if v.days == 0 && v.nanoseconds == 0 => {
                    year_to_month(v.months)
                }
                ScalarValue::IntervalMonthDayNano(Some(_)) => {
                    return invalid("an interval of months and days has no Trino text");
                }
                _ => return Ok(ScalarValue::Utf8(None)),
            };
            Ok(ScalarValue::Utf8(Some(text)))
        },
    )
    .udf()
}

/// `1-2`: years and months, as Trino writes an interval year to month.
fn year_to_month(months: i32) -> String {
    let sign = if months < 0 { "-" } else { "" };
    let months = months.unsigned_abs();
    format!("{sign}{}-{}", months / 12, months % 12)
}

/// `3 04:05:06.789`: days, then the time of day to the millisecond, as Trino writes an interval
/// day to second.
fn day_to_second(millis: i64) -> String {
    let sign = if millis < 0 { "-" } else { "" };
    let ms = millis.unsigned_abs();
    let (days, ms) = (ms / 86_400_000, ms % 86_400_000);
    let (hours, ms) = (ms / 3_600_000, ms % 3_600_000);
    let (minutes, ms) = (ms / 60_000, ms % 60_000);
    format!(
        "{sign}{days} {hours:02}:{minutes:02}:{:02}.{:03}",
        ms / 1_000,
        ms % 1_000
    )
}

/// A timestamp's text as Trino casts it to VARCHAR: `2020-01-02 03:04:05`, the fraction with as
/// many digits as the type's precision, and a zoned timestamp's zone after a space (each value's
/// own, where each has one: zoned.rs).
pub fn timestamp_text() -> Arc<ScalarUDF> {
    crate::zoned::each_zone(timestamp_text_of_column())
}

fn timestamp_text_of_column() -> Arc<ScalarUDF> {
    Scalar::new(
        "sqe_timestamp_text",
        |args| match args {
            [t @ DataType::Timestamp(..)] => Ok(vec![t.clone()]),
            _ => unexpected("cast", args, &["timestamp"]),
        },
        |_| Ok(DataType::Utf8),
        |args, _| {
            let (digits, zone) = match args[0].data_type() {
                DataType::Timestamp(unit, tz) => (
                    match unit {
                        TimeUnit::Second => 0,
                        TimeUnit::Millisecond => 3,
                        TimeUnit::Microsecond => 6,
                        TimeUnit::Nanosecond => 9,
                    },
                    // As Trino names it: an Iceberg column's `+00:00` is `UTC`.
                    tz.as_deref()
                        .map(|z| crate::timezone::zone_name(z).unwrap_or_else(|_| z.to_string())),
                ),
                _ => (0, None),
            };
            let nanos = cast(&args[0], &DataType::Timestamp(TimeUnit::Nanosecond, None)).ok();
            let values = Temporal::of(&args[0])?;
            let out: StringArray = (0..values.len())
                .map(|i| {
                    let v = values.get(i)?;
                    let mut s = v.format("%Y-%m-%d %H:%M:%S").to_string();
                    if digits > 0 {
                        // The full precision of the value, from its own unit.
                        let sub = match nanos.as_ref() {
                            Some(n) if !n.is_null(i) => n
                                .as_primitive::<arrow::datatypes::TimestampNanosecondType>()
                                .value(i)
                                .rem_euclid(1_000_000_000),
                            _ => i64::from(v.nanosecond()),
                        };
                        s.push_str(&fraction(sub, digits));
                    }
                    if let Some(zone) = &zone {
                        s.push(' ');
                        s.push_str(zone);
                    }
                    Some(s)
                })
                .collect();
            Ok(Arc::new(out))
        },
    )
    .udf()
}

/// `.` and the first `digits` digits of `nanos` (a fraction of a second): as many as the type's
/// precision, as Trino shows them (none for a precision of 0).
fn fraction(nanos: i64, digits: usize) -> String {
    let shown = digits.min(9);
    if shown == 0 {
        return String::new();
    }
    format!(".{}", &format!("{nanos:09}")[..shown])
}

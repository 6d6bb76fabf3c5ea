//! Time zones, the zone half of Trino's date and time functions: `with_timezone`, `at_timezone`
//! (what `x AT TIME ZONE z` means), `timezone`, `timezone_hour`, `timezone_minute` (and EXTRACT's
//! TIMEZONE_HOUR/TIMEZONE_MINUTE), and the parsers whose text may name an offset: the ISO 8601
//! ones and Joda's `parse_datetime`.
//!
//! A `timestamp(p) with time zone` is Arrow's `Timestamp(unit, Some(zone))`: instants since the
//! epoch, read in the column's zone, wherever one zone does (a constant zone, a constant text's
//! own offset, the session's). Where the zone may differ from row to row (a zone from a column,
//! texts from a column with their own offsets) each value keeps its own: zoned.rs.
//!
//! The session's zone (Trino's `X-Trino-Time-Zone`, `SET TIME ZONE`) is DataFusion's
//! `execution.time_zone`: a timestamp without a zone is read in it when it meets one with a zone.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::str::FromStr;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, PrimitiveArray, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeZone};
use chrono_tz::Tz as Named;
use datafusion::common::config::ConfigOptions;
use datafusion::common::{Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::datetime::{ReadText, iso_parts, joda_format, parse_each, parse_zoned, text};
use crate::udf::{invalid, is_text, unexpected};
use crate::zoned::{zoned_array, zoned_type, zoned_unit};

pub fn functions() -> Vec<Arc<ScalarUDF>> {
    use Kind::*;
    [
        With,
        At,
        Name,
        Hour,
        Minute,
        Iso(TimeUnit::Millisecond),
        Iso(TimeUnit::Nanosecond),
        Joda,
        Unix,
    ]
    .into_iter()
    .map(|kind| Arc::new(ScalarUDF::new_from_impl(Zoned::new(kind, "UTC".into()))))
    .collect()
}

/// `with_timezone(x, zone)`, for plans that keep a wall-clock time (a cast to a timestamp without
/// a zone).
pub fn with_timezone() -> Arc<ScalarUDF> {
    crate::zoned::each_zone(Arc::new(ScalarUDF::new_from_impl(Zoned::new(
        Kind::With,
        "UTC".into(),
    ))))
}

/// A zone as Trino names it: a region (`America/New_York`, in any letter case, given back as the
/// database spells it), `UTC`, or an offset `+hh:mm` (a zero offset is `UTC`).
pub fn zone_name(text: &str) -> Result<String> {
    let t = text.trim();
    let unknown = || invalid(format!("Time zone not supported: {text}"));
    if t.starts_with(['+', '-']) {
        let sign = if t.starts_with('-') { -1 } else { 1 };
        let digits: String = t[1..].chars().filter(|c| *c != ':').collect();
        let (h, m) = match digits.len() {
            1 | 2 => (digits.parse::<i32>(), Ok(0)),
            3 | 4 => (
                digits[..digits.len() - 2].parse::<i32>(),
                digits[digits.len() - 2..].parse::<i32>(),
            ),
            _ => return unknown(),
        };
        let (Ok(h), Ok(m)) = (h, m) else {
            return unknown();
        };
        if h > 14 || m > 59 || digits.chars().any(|c| !c.is_ascii_digit()) {
            return unknown();
        }
        if h == 0 && m == 0 {
            return Ok("UTC".into());
        }
        return Ok(format!("{}{h:02}:{m:02}", if sign < 0 { '-' } else { '+' }));
    }
    if t.eq_ignore_ascii_case("Z") || t.eq_ignore_ascii_case("UTC") {
        return Ok("UTC".into());
    }
    if let Ok(zone) = Named::from_str(t) {
        return Ok(zone.name().to_string());
    }
    match chrono_tz::TZ_VARIANTS
        .iter()
        .find(|z| z.name().eq_ignore_ascii_case(t))
    {
        Some(zone) => Ok(zone.name().to_string()),
        None => unknown(),
    }
}

/// A zone, read: a region or a fixed offset.
#[derive(Clone, Copy)]
pub(crate) enum Zone {
    Named(Named),
    Fixed(chrono::FixedOffset),
}

impl Zone {
    pub(crate) fn parse(text: &str) -> Result<Self> {
        let name = zone_name(text)?;
        if name.starts_with(['+', '-']) {
            let sign = if name.starts_with('-') { -1 } else { 1 };
            let h: i32 = name[1..3].parse().unwrap_or(0);
            let m: i32 = name[4..6].parse().unwrap_or(0);
            return match chrono::FixedOffset::east_opt(sign * (h * 3600 + m * 60)) {
                Some(f) => Ok(Zone::Fixed(f)),
                None => invalid(format!("Time zone not supported: {text}")),
            };
        }
        Named::from_str(&name)
            .map(Zone::Named)
            .or_else(|_| invalid(format!("Time zone not supported: {text}")))
    }

    fn name(&self) -> String {
        match self {
            Zone::Named(z) => z.name().to_string(),
            Zone::Fixed(f) => f.to_string(),
        }
    }

    /// The offset from UTC, in seconds, at `instant` (UTC date-time).
    pub(crate) fn offset_at(&self, instant: NaiveDateTime) -> i64 {
        i64::from(match self {
            Zone::Named(z) => z.offset_from_utc_datetime(&instant).fix().local_minus_utc(),
            Zone::Fixed(f) => f.local_minus_utc(),
        })
    }

    /// The offset from UTC, in seconds, of the local date-time `local`: the earlier one when the
    /// clock goes back, and for a time the clock skipped the offset before the change, so that
    /// the time moves on by the gap (02:30 in a gap from 02:00 to 03:00 is 03:30), as in Trino.
    pub(crate) fn offset_of_local(&self, local: NaiveDateTime) -> Result<i64> {
        let z = match self {
            Zone::Fixed(f) => return Ok(i64::from(f.local_minus_utc())),
            Zone::Named(z) => z,
        };
        let pick = |r: LocalResult<DateTime<Named>>| match r {
            LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => {
                Some(i64::from(t.offset().fix().local_minus_utc()))
            }
            LocalResult::None => None,
        };
        match pick(z.from_local_datetime(&local))
            .or_else(|| pick(z.from_local_datetime(&(local - chrono::Duration::hours(1)))))
        {
            Some(offset) => Ok(offset),
            None => invalid(format!("{local} does not exist in time zone {}", z.name())),
        }
    }
}

fn per_second(unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    }
}

/// `v` (in `unit` since the epoch) as a date-time, to the second.
fn seconds_of(v: i64, unit: TimeUnit) -> Option<NaiveDateTime> {
    DateTime::from_timestamp(v.div_euclid(per_second(unit)), 0).map(|t| t.naive_utc())
}

/// The instant whose wall-clock time in `zone` is `v` (a timestamp without a zone).
fn wall_to_instant(v: i64, unit: TimeUnit, zone: &Zone) -> Result<i64> {
    let Some(local) = seconds_of(v, unit) else {
        return invalid(format!("timestamp out of range: {v}"));
    };
    let offset = zone.offset_of_local(local)?;
    match v.checked_sub(offset * per_second(unit)) {
        Some(instant) => Ok(instant),
        None => invalid(format!(
            "timestamp out of range: {local} in {}",
            zone.name()
        )),
    }
}

/// The wall-clock time in `zone` of the instant `v`.
fn instant_to_wall(v: i64, unit: TimeUnit, zone: &Zone) -> Result<i64> {
    let Some(instant) = seconds_of(v, unit) else {
        return invalid(format!("timestamp out of range: {v}"));
    };
    match v.checked_add(zone.offset_at(instant) * per_second(unit)) {
        Some(wall) => Ok(wall),
        None => invalid(format!(
            "timestamp out of range: {instant} in {}",
            zone.name()
        )),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    With,
    At,
    Name,
    Hour,
    Minute,
    Iso(TimeUnit),
    /// `parse_datetime(text, joda_pattern)`.
    Joda,
    /// `from_unixtime(seconds [, zone | , hours, minutes])`.
    Unix,
}

/// One of this module's functions, knowing the session's zone (set from the statement's
/// configuration, as DataFusion's `now()` is).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Zoned {
    kind: Kind,
    session_zone: String,
    signature: Signature,
}

impl Zoned {
    fn new(kind: Kind, session_zone: String) -> Self {
        Self {
            kind,
            session_zone,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    fn session(&self) -> Result<Zone> {
        Zone::parse(&self.session_zone)
    }
}

/// Argument `i`, when it is a constant text.
fn constant_text<'a>(args: &ReturnFieldArgs<'a>, i: usize) -> Option<&'a str> {
    match args.scalar_arguments.get(i) {
        Some(Some(
            ScalarValue::Utf8(Some(t))
            | ScalarValue::Utf8View(Some(t))
            | ScalarValue::LargeUtf8(Some(t)),
        )) => Some(t),
        _ => None,
    }
}

/// The zone of `from_unixtime(x, hours, minutes)`: the offset hours * 60 + minutes minutes, as
/// constants.
fn offset_of_hours(name: &str, args: &ReturnFieldArgs) -> Result<String> {
    let int = |i: usize| match args.scalar_arguments.get(i) {
        Some(Some(v)) if v.is_null() => plan_err!("{name}: the time zone offset is NULL"),
        Some(Some(v)) => match v.cast_to(&DataType::Int64)? {
            ScalarValue::Int64(Some(n)) => Ok(n),
            other => plan_err!("{name}: not an offset: {other}"),
        },
        _ => plan_err!("{name}: the time zone offset must be a constant"),
    };
    let (hours, minutes) = (int(1)?, int(2)?);
    let Some(minutes) = hours.checked_mul(60).and_then(|h| h.checked_add(minutes)) else {
        return invalid(format!("Invalid offset: {hours} hours, {minutes} minutes"));
    };
    let sign = if minutes < 0 { '-' } else { '+' };
    let text = format!("{sign}{:02}:{:02}", minutes.abs() / 60, minutes.abs() % 60);
    zone_name(&text)
}

/// The zone a function was given as a constant.
fn constant_zone(name: &str, args: &ReturnFieldArgs) -> Result<String> {
    match args.scalar_arguments.get(1) {
        Some(Some(
            ScalarValue::Utf8(Some(z))
            | ScalarValue::Utf8View(Some(z))
            | ScalarValue::LargeUtf8(Some(z)),
        )) => zone_name(z),
        Some(Some(s)) if s.is_null() => plan_err!("{name}: the time zone is NULL"),
        _ => plan_err!("{name}: the time zone must be a constant"),
    }
}

impl ScalarUDFImpl for Zoned {
    fn name(&self) -> &str {
        match self.kind {
            Kind::With => "with_timezone",
            Kind::At => "at_timezone",
            Kind::Name => "timezone",
            Kind::Hour => "timezone_hour",
            Kind::Minute => "timezone_minute",
            Kind::Iso(TimeUnit::Nanosecond) => "from_iso8601_timestamp_nanos",
            Kind::Iso(_) => "from_iso8601_timestamp",
            Kind::Joda => "parse_datetime",
            Kind::Unix => "from_unixtime",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn with_updated_config(&self, config: &ConfigOptions) -> Option<ScalarUDF> {
        let zone = config.execution.time_zone.clone().unwrap_or("UTC".into());
        Some(ScalarUDF::new_from_impl(Zoned::new(self.kind, zone)))
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        let name = self.name();
        match (self.kind, args) {
            (Kind::With | Kind::At, [t @ DataType::Timestamp(..), z])
                if is_text(z) || z.is_null() =>
            {
                Ok(vec![t.clone(), DataType::Utf8])
            }
            // A NULL timestamp is a timestamp's NULL.
            (Kind::With | Kind::At, [DataType::Null, z]) if is_text(z) || z.is_null() => Ok(vec![
                DataType::Timestamp(TimeUnit::Nanosecond, None),
                DataType::Utf8,
            ]),
            (Kind::With | Kind::At, _) => unexpected(name, args, &["timestamp, varchar"]),
            (Kind::Name | Kind::Hour | Kind::Minute, [t @ DataType::Timestamp(..)]) => {
                Ok(vec![t.clone()])
            }
            (Kind::Name | Kind::Hour | Kind::Minute, [DataType::Null]) => {
                Ok(vec![DataType::Timestamp(
                    TimeUnit::Nanosecond,
                    Some("UTC".into()),
                )])
            }
            (Kind::Name | Kind::Hour | Kind::Minute, _) => {
                unexpected(name, args, &["timestamp with time zone"])
            }
            (Kind::Iso(_), [t]) if is_text(t) || t.is_null() => Ok(vec![DataType::Utf8]),
            (Kind::Iso(_), _) => unexpected(name, args, &["varchar"]),
            (Kind::Joda, [t, f]) if (is_text(t) || t.is_null()) && (is_text(f) || f.is_null()) => {
                Ok(vec![DataType::Utf8, DataType::Utf8])
            }
            (Kind::Joda, _) => unexpected(name, args, &["varchar, varchar"]),
            (Kind::Unix, [x]) if x.is_numeric() || x.is_null() => Ok(vec![DataType::Float64]),
            (Kind::Unix, [x, z])
                if (x.is_numeric() || x.is_null()) && (is_text(z) || z.is_null()) =>
            {
                Ok(vec![DataType::Float64, DataType::Utf8])
            }
            (Kind::Unix, [x, h, m])
                if [x, h, m].iter().all(|t| t.is_numeric() || t.is_null())
                    && [h, m].iter().all(|t| t.is_integer() || t.is_null()) =>
            {
                Ok(vec![DataType::Float64, DataType::Int64, DataType::Int64])
            }
            (Kind::Unix, _) => unexpected(
                name,
                args,
                &["double", "double, varchar", "double, bigint, bigint"],
            ),
        }
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        plan_err!("{}: return_field_from_args gives the type", self.name())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let name = self.name();
        let t = match self.kind {
            Kind::With | Kind::At => {
                let unit = match args.arg_fields[0].data_type() {
                    DataType::Timestamp(unit, _) => *unit,
                    other => return plan_err!("{name}: not a timestamp: {other}"),
                };
                if varies(&args, 1) {
                    zoned_type(unit)
                } else {
                    DataType::Timestamp(unit, Some(constant_zone(name, &args)?.into()))
                }
            }
            Kind::Name => DataType::Utf8,
            Kind::Hour | Kind::Minute => DataType::Int64,
            Kind::Iso(unit) if varies(&args, 0) => zoned_type(unit),
            Kind::Iso(unit) => DataType::Timestamp(unit, Some(self.iso_zone(&args).into())),
            Kind::Joda if varies(&args, 0) || varies(&args, 1) => zoned_type(TimeUnit::Millisecond),
            Kind::Joda => {
                DataType::Timestamp(TimeUnit::Millisecond, Some(self.joda_zone(&args).into()))
            }
            Kind::Unix => {
                let zone = match args.arg_fields.len() {
                    1 => self.session_zone.clone(),
                    2 => constant_zone(name, &args)?,
                    _ => offset_of_hours(name, &args)?,
                };
                DataType::Timestamp(TimeUnit::Millisecond, Some(zone.into()))
            }
        };
        Ok(Arc::new(Field::new(name, t, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out = self.evaluate(&arrays, args.return_field.data_type())?;
        if scalar {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?));
        }
        Ok(ColumnarValue::Array(out))
    }
}

impl Zoned {
    /// The zone of `from_iso8601_timestamp(text)`: a constant text's own offset (`Z` is UTC), as
    /// Trino keeps it; otherwise, and for a text without one, the session's.
    fn iso_zone(&self, args: &ReturnFieldArgs) -> String {
        let offset = constant_text(args, 0).and_then(|t| iso_parts(t)?.1);
        self.offset_zone(offset)
    }

    /// The zone of `parse_datetime(text, pattern)`: with both constant, the offset the text
    /// gives (`Z`, `ZZ`); otherwise, and for a text without one, the session's.
    fn joda_zone(&self, args: &ReturnFieldArgs) -> String {
        let offset = match (constant_text(args, 0), constant_text(args, 1)) {
            (Some(t), Some(f)) => joda_format(f).ok().and_then(|f| parse_zoned(t, &f)?.1),
            _ => None,
        };
        self.offset_zone(offset)
    }

    /// The instants of texts read, as the type `returns`: with a zone per value, each text's own
    /// offset (or the session's zone, for a text without one).
    fn read_instants(
        &self,
        rows: Vec<Option<ReadText>>,
        unit: TimeUnit,
        returns: &DataType,
    ) -> Result<ArrayRef> {
        let zones: Option<StringArray> = zoned_unit(returns).map(|_| {
            rows.iter()
                .map(|row| row.as_ref().map(|(_, _, offset)| self.offset_zone(*offset)))
                .collect()
        });
        let values = instants(rows, unit, &self.session()?)?;
        match zones {
            Some(zones) => zoned_array(&timestamps(values, unit, &in_utc(unit))?, zones),
            None => timestamps(values, unit, returns),
        }
    }

    /// An offset from UTC in seconds as a zone (`+01:00`; none, the session's zone).
    fn offset_zone(&self, offset: Option<i64>) -> String {
        let Some(offset) = offset else {
            return self.session_zone.clone();
        };
        let sign = if offset < 0 { '-' } else { '+' };
        let minutes = offset.abs() / 60;
        zone_name(&format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60))
            .unwrap_or_else(|_| self.session_zone.clone())
    }

    fn evaluate(&self, args: &[ArrayRef], returns: &DataType) -> Result<ArrayRef> {
        let input_zone = |t: &DataType| match t {
            DataType::Timestamp(_, Some(z)) => Zone::parse(z),
            _ => self.session(),
        };
        match self.kind {
            Kind::With | Kind::At => {
                // The zone to move to: the type's, or each row's (its name as Trino gives it).
                let (unit, fixed) = match returns {
                    DataType::Timestamp(unit, Some(target)) => (*unit, Some(target.to_string())),
                    t => match zoned_unit(t) {
                        Some(unit) => (unit, None),
                        None => return exec_err!("{}: returns {returns}", self.name()),
                    },
                };
                let n = args[0].len();
                let targets: Vec<Option<String>> = match &fixed {
                    Some(zone) => vec![Some(zone.clone()); n],
                    None => (0..n)
                        .map(|i| text(&args[1], i).map(zone_name).transpose())
                        .collect::<Result<_>>()?,
                };
                let mut read: HashMap<&str, Zone> = HashMap::new();
                let from = args[0].data_type().clone();
                let source = match &from {
                    DataType::Timestamp(_, Some(z)) => Some(Zone::parse(z)?),
                    _ => None,
                };
                let session = self.session()?;
                let values = as_i64(&args[0], unit)?;
                let mut out = Vec::with_capacity(values.len());
                for (v, target) in values.iter().zip(&targets) {
                    let (Some(v), Some(target)) = (v, target) else {
                        out.push(None);
                        continue;
                    };
                    let target = match read.entry(target.as_str()) {
                        Entry::Occupied(zone) => *zone.get(),
                        Entry::Vacant(slot) => *slot.insert(Zone::parse(target)?),
                    };
                    out.push(Some(match (self.kind, &source) {
                        // The same instant, shown in another zone.
                        (Kind::At, Some(_)) => v,
                        // A timestamp without a zone is read in the session's.
                        (Kind::At, None) => wall_to_instant(v, unit, &session)?,
                        // The same wall-clock time, in another zone.
                        (_, None) => wall_to_instant(v, unit, &target)?,
                        (_, Some(source)) => {
                            wall_to_instant(instant_to_wall(v, unit, source)?, unit, &target)?
                        }
                    }));
                }
                if fixed.is_some() {
                    return timestamps(out, unit, returns);
                }
                let zones: StringArray = out
                    .iter()
                    .zip(targets)
                    .map(|(v, zone)| v.and(zone))
                    .collect();
                zoned_array(&timestamps(out, unit, &in_utc(unit))?, zones)
            }
            Kind::Name => {
                let zone = match args[0].data_type() {
                    DataType::Timestamp(_, Some(z)) => {
                        zone_name(z).unwrap_or_else(|_| z.to_string())
                    }
                    _ => self.session_zone.clone(),
                };
                let out: StringArray = (0..args[0].len())
                    .map(|i| (!args[0].is_null(i)).then(|| zone.clone()))
                    .collect();
                Ok(Arc::new(out))
            }
            Kind::Hour | Kind::Minute => {
                let zone = input_zone(args[0].data_type())?;
                let DataType::Timestamp(unit, _) = args[0].data_type() else {
                    return exec_err!("{}: not a timestamp", self.name());
                };
                let unit = *unit;
                let values = as_i64(&args[0], unit)?;
                let out: Int64Array = values
                    .iter()
                    .map(|v| {
                        let offset = zone.offset_at(seconds_of(v?, unit)?);
                        Some(match self.kind {
                            Kind::Hour => offset / 3600,
                            _ => offset % 3600 / 60,
                        })
                    })
                    .collect();
                Ok(Arc::new(out))
            }
            Kind::Iso(unit) => {
                let mut rows = Vec::with_capacity(args[0].len());
                for i in 0..args[0].len() {
                    rows.push(match text(&args[0], i) {
                        None => None,
                        Some(s) => match iso_parts(s) {
                            Some((local, offset)) => Some((s, local, offset)),
                            None => return invalid(format!("Invalid format: \"{s}\"")),
                        },
                    });
                }
                self.read_instants(rows, unit, returns)
            }
            Kind::Unix => {
                let seconds = args[0].as_primitive::<arrow::datatypes::Float64Type>();
                let mut out = Vec::with_capacity(seconds.len());
                for v in seconds.iter() {
                    let Some(v) = v else {
                        out.push(None);
                        continue;
                    };
                    let millis = (v * 1000.0).round();
                    // Within the range of SQE's timestamps (nanoseconds since the epoch: the
                    // years 1677 to 2262).
                    if !millis.is_finite() || millis.abs() > 9.2e15 {
                        return invalid(format!("timestamp out of range: unixtime {v:?}"));
                    }
                    out.push(Some(millis as i64));
                }
                timestamps(out, TimeUnit::Millisecond, returns)
            }
            Kind::Joda => {
                let rows = parse_each(args, joda_format)?;
                self.read_instants(rows, TimeUnit::Millisecond, returns)
            }
        }
    }
}

/// Each text's instant in `unit`: its local date-time at the offset it named, or in `zone`.
fn instants(rows: Vec<Option<ReadText>>, unit: TimeUnit, zone: &Zone) -> Result<Vec<Option<i64>>> {
    let per_unit = 1_000_000_000 / per_second(unit);
    rows.into_iter()
        .map(|row| {
            let Some((s, local, offset)) = row else {
                return Ok(None);
            };
            let offset = match offset {
                Some(o) => o,
                None => zone.offset_of_local(local)?,
            };
            let utc = local.and_utc();
            let instant = utc
                .timestamp()
                .checked_sub(offset)
                .and_then(|t| t.checked_mul(per_second(unit)))
                .and_then(|t| t.checked_add(i64::from(utc.timestamp_subsec_nanos()) / per_unit));
            match instant {
                Some(v) => Ok(Some(v)),
                None => invalid(format!("timestamp out of range: \"{s}\"")),
            }
        })
        .collect()
}

/// A timestamp type in `unit`, in UTC.
fn in_utc(unit: TimeUnit) -> DataType {
    DataType::Timestamp(unit, Some("UTC".into()))
}

/// Whether argument `i` is not a constant (its zone may differ from row to row).
fn varies(args: &ReturnFieldArgs, i: usize) -> bool {
    matches!(args.scalar_arguments.get(i), Some(None))
}

/// A timestamp column's values, in `unit`.
fn as_i64(array: &ArrayRef, unit: TimeUnit) -> Result<PrimitiveArray<arrow::datatypes::Int64Type>> {
    let t = cast(array, &DataType::Timestamp(unit, None))?;
    Ok(cast(&t, &DataType::Int64)?.as_primitive().clone())
}

/// Values in `unit` as a column of type `t` (a timestamp in that unit).
fn timestamps(values: Vec<Option<i64>>, unit: TimeUnit, t: &DataType) -> Result<ArrayRef> {
    let raw: ArrayRef = Arc::new(Int64Array::from(values));
    let naive = cast(&raw, &DataType::Timestamp(unit, None))?;
    // Only the type's zone changes: the values are instants already.
    let data = naive
        .to_data()
        .into_builder()
        .data_type(t.clone())
        .build()?;
    Ok(arrow::array::make_array(data))
}

/// `CAST(text AS timestamp(p) [WITH TIME ZONE])` as Trino reads the text (`TRY_CAST` when
/// `lenient`: NULL where the cast fails): `yyyy-mm-dd`, then ` hh:mm`, `:ss` and a fraction, each
/// optional, the fraction rounded half up to the type's digits; into a timestamp with a time zone
/// also a zone (`UTC`, `+01:00`, `Europe/Berlin`; none, the type's zone, the session's). Where
/// DataFusion's cast reads more (a `T`, a zone into a timestamp without one, which it moves to
/// UTC) or less (zone names), or cuts a longer fraction down, this is Trino's. The second argument
/// is a NULL of the type cast to; a third (any value) asks for a zone per value, each text's own
/// (zoned.rs).
pub fn cast_timestamp(lenient: bool) -> Arc<ScalarUDF> {
    let name = if lenient {
        "sqe_try_cast_timestamp"
    } else {
        "sqe_cast_timestamp"
    };
    crate::udf::Scalar::new(
        name,
        |args| match args {
            [t, to @ DataType::Timestamp(..), rest @ ..]
                if (is_text(t) || t.is_null()) && rest.len() < 2 =>
            {
                let mut types = vec![DataType::Utf8, to.clone()];
                types.extend(rest.iter().cloned());
                Ok(types)
            }
            _ => unexpected("cast", args, &["varchar, timestamp"]),
        },
        |args| match args {
            [_, DataType::Timestamp(unit, Some(_)), _] => Ok(zoned_type(*unit)),
            _ => Ok(args[1].clone()),
        },
        move |args, returns| {
            let to = args[1].data_type();
            let DataType::Timestamp(unit, _) = to else {
                return exec_err!("cast: not a timestamp: {to}");
            };
            let per_value = zoned_unit(returns).is_some();
            let mut out = Vec::with_capacity(args[0].len());
            let mut zones = Vec::with_capacity(args[0].len());
            for i in 0..args[0].len() {
                let read = match text(&args[0], i) {
                    None => None,
                    Some(s) => match read_in(s, to) {
                        Ok(read) => Some(read),
                        Err(_) if lenient => None,
                        Err(e) => return Err(e),
                    },
                };
                out.push(read.as_ref().map(|(v, _)| *v));
                zones.push(read.and_then(|(_, zone)| zone));
            }
            if per_value {
                let instants = timestamps(out, *unit, &in_utc(*unit))?;
                return zoned_array(&instants, StringArray::from(zones));
            }
            timestamps(out, *unit, to)
        },
    )
    .udf()
}

/// A text as Trino casts it to the timestamp type `to` (see [`cast_timestamp`]): the value in
/// `to`'s unit.
pub fn read_timestamp(text: &str, to: &DataType) -> Result<i64> {
    read_in(text, to).map(|(v, _)| v)
}

/// [`read_timestamp`], and for a timestamp with a time zone the name of the zone it was read in
/// (the text's, or `to`'s).
fn read_in(text: &str, to: &DataType) -> Result<(i64, Option<String>)> {
    let refused = || invalid(format!("Value cannot be cast to timestamp: {text}"));
    let DataType::Timestamp(unit, zone) = to else {
        return refused();
    };
    let Some((local, fraction, named)) = datetime_text(text) else {
        return refused();
    };
    let digits = match unit {
        TimeUnit::Second => 0,
        TimeUnit::Millisecond => 3,
        TimeUnit::Microsecond => 6,
        TimeUnit::Nanosecond => 9,
    };
    // The fraction in the unit, rounded half up (18 digits at most, as Trino reads it).
    let f: i64 = match fraction.parse() {
        Ok(f) => f,
        Err(_) if fraction.is_empty() => 0,
        Err(_) => return refused(),
    };
    let given = fraction.len() as u32;
    let sub = if given > digits {
        let m = 10i64.pow(given - digits);
        (f + m / 2) / m
    } else {
        f * 10i64.pow(digits - given)
    };
    let Some(wall) = local
        .and_utc()
        .timestamp()
        .checked_mul(per_second(*unit))
        .and_then(|v| v.checked_add(sub))
    else {
        return refused();
    };
    let name = match (named, zone) {
        (None, None) => return Ok((wall, None)),
        (Some(_), None) => return refused(),
        (Some(named), Some(_)) => zone_name(named)?,
        (None, Some(zone)) => zone.to_string(),
    };
    let instant = wall_to_instant(wall, *unit, &Zone::parse(&name)?)?;
    Ok((instant, Some(name)))
}

/// Trino's date-time text: `[+-]yyyy-m-d`, then after a space `h:m`, `:s` and `.fraction`, each
/// optional, and a zone (any text after them): the date-time to the second, the fraction's
/// digits and the zone.
fn datetime_text(text: &str) -> Option<(NaiveDateTime, &str, Option<&str>)> {
    /// Leading ASCII digits of `s`, from `min` to `max` of them, as a number, and what follows.
    fn number(s: &str, min: usize, max: usize) -> Option<(i64, &str)> {
        let n = s.bytes().take_while(u8::is_ascii_digit).count();
        if n < min || n > max {
            return None;
        }
        Some((s[..n].parse().ok()?, &s[n..]))
    }
    let s = text.trim();
    let (sign, s) = match s.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, s.strip_prefix('+').unwrap_or(s)),
    };
    let (year, s) = number(s, 4, 9)?;
    let (month, s) = number(s.strip_prefix('-')?, 1, 2)?;
    let (day, mut s) = number(s.strip_prefix('-')?, 1, 2)?;
    let date = chrono::NaiveDate::from_ymd_opt(
        i32::try_from(sign * year).ok()?,
        u32::try_from(month).ok()?,
        u32::try_from(day).ok()?,
    )?;
    let (mut hms, mut fraction, mut zone) = ((0, 0, 0), "", None);
    if !s.is_empty() {
        s = s.strip_prefix(' ')?;
        if let Some((h, rest)) = number(s, 1, 2)
            && let Some(rest) = rest.strip_prefix(':')
        {
            let (m, rest) = number(rest, 1, 2)?;
            hms = (h, m, 0);
            s = rest;
            if let Some(rest) = s.strip_prefix(':') {
                let (sec, rest) = number(rest, 1, 2)?;
                hms.2 = sec;
                s = rest;
                if let Some(rest) = s.strip_prefix('.') {
                    let n = rest.bytes().take_while(u8::is_ascii_digit).count();
                    if n == 0 {
                        return None;
                    }
                    (fraction, s) = rest.split_at(n);
                }
            }
        }
        let z = s.trim_start();
        if !z.is_empty() {
            zone = Some(z);
        }
    }
    let (h, m, sec) = hms;
    let time = chrono::NaiveTime::from_hms_opt(
        u32::try_from(h).ok()?,
        u32::try_from(m).ok()?,
        u32::try_from(sec).ok()?,
    )?;
    Some((date.and_time(time), fraction, zone))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_are_named_as_trino_names_them() {
        assert_eq!(
            zone_name("america/new_york").ok().as_deref(),
            Some("America/New_York")
        );
        assert_eq!(zone_name("+01:00").ok().as_deref(), Some("+01:00"));
        assert_eq!(zone_name("-0530").ok().as_deref(), Some("-05:30"));
        assert_eq!(zone_name("+00:00").ok().as_deref(), Some("UTC"));
        assert_eq!(zone_name("z").ok().as_deref(), Some("UTC"));
        let e = zone_name("Mars/Olympus").err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("Time zone not supported: Mars/Olympus")));
        assert!(zone_name("+25:00").is_err());
    }

    #[test]
    fn texts_cast_to_timestamps_as_trino_reads_them() {
        let ms = DataType::Timestamp(TimeUnit::Millisecond, None);
        let zoned = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
        let read = |s: &str, t: &DataType| read_timestamp(s, t).map_err(|e| e.to_string());
        // 2020-01-02 03:04:05 UTC is 1577934245 seconds after the epoch.
        assert_eq!(read("2020-01-02 03:04:05.1234", &ms), Ok(1_577_934_245_123));
        assert_eq!(read(" 2020-1-2 3:4:5.1235 ", &ms), Ok(1_577_934_245_124));
        assert_eq!(read("2020-01-02 03:04:05.9996", &ms), Ok(1_577_934_246_000));
        assert_eq!(read("2020-01-02 03:04", &ms), Ok(1_577_934_240_000));
        assert_eq!(read("2020-01-02", &ms), Ok(1_577_923_200_000));
        assert_eq!(
            read("2020-01-02 03:04:05 +01:00", &zoned),
            Ok(1_577_930_645_000)
        );
        assert_eq!(
            read("2020-01-02 03:04:05 Asia/Tokyo", &zoned),
            Ok(1_577_901_845_000)
        );
        assert_eq!(read("2020-01-02 UTC", &zoned), Ok(1_577_923_200_000));
        for bad in [
            "2020-01-02T03:04:05",
            "2020-01-02 03:04:05 +01:00",
            "2020-13-02",
            "2020-01-02 24:00",
            "2020-01-02 03:04:05.",
            "20-01-02",
            "",
        ] {
            assert_eq!(
                read(bad, &ms),
                Err(format!(
                    "Execution error: Value cannot be cast to timestamp: {bad}"
                ))
            );
        }
        let mars = read("2020-01-02 03:04 Mars/Base", &zoned);
        assert!(mars.is_err_and(|e| e.contains("Time zone not supported: Mars/Base")));
    }

    #[test]
    fn wall_clock_times_skipped_or_repeated_take_trino_s_instant() {
        let ny = Zone::parse("America/New_York").unwrap_or_else(|e| panic!("{e}"));
        let at = |s: &str| {
            NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap_or_else(|e| panic!("{e}"))
        };
        // 2:30 on 2024-03-10 does not exist: read with the offset before (EST, -5 h), 3:30 EDT.
        assert_eq!(
            ny.offset_of_local(at("2024-03-10 02:30:00")).ok(),
            Some(-5 * 3600)
        );
        // 1:30 on 2024-11-03 happens twice: the first (EDT).
        assert_eq!(
            ny.offset_of_local(at("2024-11-03 01:30:00")).ok(),
            Some(-4 * 3600)
        );
        assert_eq!(ny.offset_at(at("2024-01-01 12:00:00")), -5 * 3600);
    }
}

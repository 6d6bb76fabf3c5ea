//! Trino's date-time syntax, for the statement rewriter (rewriter.rs): a `TIMESTAMP '…'`
//! literal's zone and precision (its fraction's digits, held in the Arrow unit that holds them),
//! the precision VALUES rows meet at, interval literals (year-to-month, and ranges of day to
//! second to the millisecond), the clocks (`current_timestamp`, `localtimestamp`, `localtime`:
//! precision 3 unless given) and EXTRACT's fields.

use datafusion::sql::sqlparser::ast::{
    self, DateTimeField, FunctionArg, FunctionArgExpr, FunctionArguments, ObjectNamePart, Value,
};

use super::syntax::call;

/// A timestamp literal's text split into its date-time and the zone after it (a region or an
/// offset, after a time with a space or not: `2020-01-02 03:04:05.6 +01:00`,
/// `2020-01-02 03:04+01:00`, `2020-01-02 UTC`); None when it names no zone.
pub(super) fn timestamp_zone(text: &str) -> Option<(&str, &str)> {
    let text = text.trim();
    let bytes = text.as_bytes();
    // The date: digits and dashes (a sign may lead).
    let mut end = usize::from(bytes.first().is_some_and(|b| *b == b'+' || *b == b'-'));
    while end < bytes.len() && (bytes[end].is_ascii_digit() || bytes[end] == b'-') {
        end += 1;
    }
    // After the date, a space (`2020-01-02T03:04` names no zone: it is not Trino's text).
    if bytes.get(end).is_some_and(|b| !b.is_ascii_whitespace()) {
        return None;
    }
    // The time, after one space: digits, colons and the fraction's point.
    if end < bytes.len() && bytes[end] == b' ' && bytes.get(end + 1).is_some_and(u8::is_ascii_digit)
    {
        end += 1;
        while end < bytes.len()
            && (bytes[end].is_ascii_digit() || matches!(bytes[end], b':' | b'.'))
        {
            end += 1;
        }
    }
    let zone = text[end..].trim();
    (!zone.is_empty()).then(|| (text[..end].trim_end(), zone))
}

/// The Arrow unit's precision that holds Trino's `precision`: 0, 3, 6 or 9 (Trino's 1, 2, 4, 5, 7
/// and 8 take the next of these; beyond nanoseconds, nanoseconds).
pub(super) fn arrow_precision(precision: u64) -> u64 {
    match precision {
        0 => 0,
        1..=3 => 3,
        4..=6 => 6,
        _ => 9,
    }
}

/// The digits of a date-time text's fraction of a second.
pub(super) fn fraction_digits(local: &str) -> u64 {
    match local.rsplit_once('.') {
        Some((_, fraction)) if local.contains(':') => {
            fraction.bytes().take_while(u8::is_ascii_digit).count() as u64
        }
        _ => 0,
    }
}

/// The zone of a zoned timestamp constant as the rewrite leaves it (`with_timezone(…, 'zone')`).
fn literal_zone(e: &ast::Expr) -> Option<String> {
    let ast::Expr::Function(f) = e else {
        return None;
    };
    if !f.name.to_string().eq_ignore_ascii_case("with_timezone") {
        return None;
    }
    match &f.args {
        FunctionArguments::List(list) => match list.args.get(1) {
            Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(ast::Expr::Value(v)))) => {
                match &v.value {
                    Value::SingleQuotedString(zone) => Some(zone.clone()),
                    _ => None,
                }
            }
            _ => None,
        },
        _ => None,
    }
}

/// The precision slot of a timestamp constant as the rewrite leaves it: a literal, a cast, or
/// either in `with_timezone` (a zoned literal).
fn literal_precision(e: &mut ast::Expr) -> Option<&mut Option<u64>> {
    match e {
        ast::Expr::TypedString(ast::TypedString {
            data_type: ast::DataType::Timestamp(precision, _),
            ..
        })
        | ast::Expr::Cast {
            data_type: ast::DataType::Timestamp(precision, _),
            ..
        } => Some(precision),
        ast::Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("with_timezone") => {
            match &mut f.args {
                FunctionArguments::List(list) => match list.args.first_mut() {
                    Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(first))) => {
                        literal_precision(first)
                    }
                    _ => None,
                },
                _ => None,
            }
        }
        _ => None,
    }
}

/// Each column of VALUES rows: its timestamp constants at the finest precision among them, and
/// zoned ones in different zones each keeping its own (`sqe_zoned`: functions/src/zoned.rs).
pub(super) fn finest_literals(rows: &mut [ast::Parens<Vec<ast::Expr>>]) {
    let width = rows.iter().map(|r| r.content.len()).max().unwrap_or(0);
    for column in 0..width {
        let finest = rows
            .iter_mut()
            .filter_map(|row| row.content.get_mut(column).and_then(literal_precision))
            .filter_map(|p| *p)
            .max();
        for row in rows.iter_mut() {
            if let Some(p) = row.content.get_mut(column).and_then(literal_precision) {
                *p = finest;
            }
        }
        let zones: std::collections::BTreeSet<String> = rows
            .iter()
            .filter_map(|row| row.content.get(column).and_then(literal_zone))
            .collect();
        if zones.len() < 2 {
            continue;
        }
        for row in rows.iter_mut() {
            if let Some(x) = row.content.get_mut(column)
                && literal_zone(x).is_some()
            {
                let zoned = std::mem::replace(x, ast::Expr::value(Value::Null));
                *x = call("sqe_zoned", vec![zoned]);
            }
        }
    }
}

/// `current_timestamp(p)`, `localtimestamp(p)`, `localtime(p)` and `now()`: the clock's name and
/// precision (3 when none is given).
pub(super) fn clock_precision(f: &ast::Function) -> Option<(String, u64)> {
    let [ObjectNamePart::Identifier(name)] = f.name.0.as_slice() else {
        return None;
    };
    let name = name.value.to_lowercase();
    if !matches!(
        name.as_str(),
        "current_timestamp" | "localtimestamp" | "localtime" | "now"
    ) {
        return None;
    }
    let args = match &f.args {
        FunctionArguments::None => return Some((name, 3)),
        FunctionArguments::List(list) => &list.args,
        FunctionArguments::Subquery(_) => return None,
    };
    match args.as_slice() {
        [] => Some((name, 3)),
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(ast::Expr::Value(v)))] if name != "now" => {
            match &v.value {
                Value::Number(n, _) => n.parse::<u64>().ok().map(|p| (name, p)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The clock `name` at `precision`: DataFusion's `now()` (the statement's instant in the
/// session's zone) cast to Trino's type.
pub(super) fn clock(name: &str, precision: u64) -> ast::Expr {
    let now = call("now", vec![]);
    let zone = match name {
        "current_timestamp" | "now" => ast::TimezoneInfo::WithTimeZone,
        _ => ast::TimezoneInfo::None,
    };
    let cast = |expr: ast::Expr, data_type: ast::DataType| ast::Expr::Cast {
        kind: ast::CastKind::Cast,
        expr: Box::new(expr),
        data_type,
        array: false,
        format: None,
    };
    let timestamp = cast(
        now,
        ast::DataType::Timestamp(Some(arrow_precision(precision)), zone),
    );
    if name != "localtime" {
        return timestamp;
    }
    let unit = match arrow_precision(precision) {
        0 => "Time32(s)",
        3 => "Time32(ms)",
        6 => "Time64(us)",
        _ => "Time64(ns)",
    };
    call(
        "arrow_cast",
        vec![
            timestamp,
            ast::Expr::value(Value::SingleQuotedString(unit.into())),
        ],
    )
}

/// A Trino interval literal as DataFusion plans it: a year-to-month one as an Arrow year-month
/// interval, a range of day-to-second fields as the days and milliseconds it adds up to. None
/// for what DataFusion reads as it is (a single day-to-second field) or refuses itself.
pub(super) fn trino_interval(interval: &ast::Interval) -> Option<ast::Expr> {
    use DateTimeField as F;
    let ast::Expr::Value(v) = interval.value.as_ref() else {
        return None;
    };
    let Value::SingleQuotedString(text) = &v.value else {
        return None;
    };
    if interval.leading_precision.is_some() || interval.fractional_seconds_precision.is_some() {
        return None;
    }
    let text = text.trim();
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let number = |s: &str| s.trim().parse::<i64>().ok();
    let string = |s: String| ast::Expr::value(Value::SingleQuotedString(s));
    match (&interval.leading_field, &interval.last_field) {
        (Some(F::Year | F::Month), None) | (Some(F::Year), Some(F::Month)) => {
            let months = match (&interval.leading_field, &interval.last_field) {
                (Some(F::Year), None) => number(body)?.checked_mul(12)?,
                (Some(F::Month), None) => number(body)?,
                _ => {
                    let (years, months) = body.split_once('-')?;
                    number(years)?
                        .checked_mul(12)?
                        .checked_add(number(months)?)?
                }
            };
            let months = i32::try_from(if negative { -months } else { months }).ok()?;
            Some(call(
                "arrow_cast",
                vec![
                    string(format!("{months} months")),
                    string("Interval(YearMonth)".into()),
                ],
            ))
        }
        (Some(leading), Some(last)) => {
            const FIELDS: [(F, i64); 4] = [
                (F::Day, 86_400_000),
                (F::Hour, 3_600_000),
                (F::Minute, 60_000),
                (F::Second, 1_000),
            ];
            let from = FIELDS.iter().position(|(f, _)| f == leading)?;
            let to = FIELDS.iter().position(|(f, _)| f == last)?;
            let (mut parts, rest) = match from {
                0 => {
                    let (days, rest) = body.trim().split_once(' ')?;
                    (vec![days], rest)
                }
                _ => (vec![], body),
            };
            parts.extend(rest.split(':'));
            if to <= from || parts.len() != to - from + 1 {
                return None;
            }
            let mut millis: i64 = 0;
            for (part, (field, unit)) in parts.iter().zip(&FIELDS[from..=to]) {
                let ms = match field {
                    F::Second => second_millis(part)?,
                    _ => number(part)?.checked_mul(*unit)?,
                };
                millis = millis.checked_add(ms)?;
            }
            let millis = if negative { -millis } else { millis };
            Some(ast::Expr::Interval(ast::Interval {
                value: Box::new(string(format!(
                    "{} days {} milliseconds",
                    millis / 86_400_000,
                    millis % 86_400_000
                ))),
                leading_field: None,
                leading_precision: None,
                last_field: None,
                fractional_seconds_precision: None,
            }))
        }
        _ => None,
    }
}

/// `12.345` seconds as 12345 milliseconds (digits past the millisecond are dropped, as Trino's
/// intervals hold milliseconds).
fn second_millis(text: &str) -> Option<i64> {
    let (whole, fraction) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits: String = fraction.chars().chain("000".chars()).take(3).collect();
    whole
        .parse::<i64>()
        .ok()?
        .checked_mul(1_000)?
        .checked_add(digits.parse::<i64>().ok()?)
}

/// A constant text that names a zone after its date-time: the date-time (with its seconds) and
/// the zone.
pub(super) fn zoned_text(e: &ast::Expr) -> Option<(String, String)> {
    let ast::Expr::Value(v) = e else {
        return None;
    };
    let Value::SingleQuotedString(text) = &v.value else {
        return None;
    };
    timestamp_zone(text).map(|(local, zone)| (with_seconds(local), zone.to_string()))
}

/// Whether `local` is a date-time (a text with a zone after something else is not read as one:
/// its cast fails as Trino's does, "Value cannot be cast to timestamp").
pub(super) fn reads_as_date_time(local: &str) -> bool {
    chrono::NaiveDateTime::parse_from_str(local, "%Y-%m-%d %H:%M:%S%.f").is_ok()
        || chrono::NaiveDate::parse_from_str(local, "%Y-%m-%d").is_ok()
}

/// Whether `zone` names a zone: TRY_CAST's text that with_timezone reads without an error.
pub(super) fn zone_name_reads(zone: &str) -> bool {
    sqe_functions::zone_name(zone).is_ok()
}

/// A timestamp's text with the seconds Trino lets it leave out (`2020-01-02 03:04` is
/// `03:04:00`), which Arrow's parser needs.
pub(super) fn with_seconds(text: &str) -> String {
    let text = text.trim();
    match text.split_once(' ') {
        Some((_, time)) if time.bytes().filter(|b| *b == b':').count() == 1 => format!("{text}:00"),
        _ => text.to_string(),
    }
}

pub(super) fn extract_name(field: &DateTimeField) -> Option<String> {
    let name = match field {
        DateTimeField::Year => "year".to_string(),
        DateTimeField::Quarter => "quarter".to_string(),
        DateTimeField::Month => "month".to_string(),
        DateTimeField::Week(None) => "week".to_string(),
        DateTimeField::Day => "day".to_string(),
        DateTimeField::DayOfWeek | DateTimeField::Dow => "day_of_week".to_string(),
        DateTimeField::DayOfYear | DateTimeField::Doy => "day_of_year".to_string(),
        DateTimeField::Hour => "hour".to_string(),
        DateTimeField::Minute => "minute".to_string(),
        DateTimeField::Second => "second".to_string(),
        DateTimeField::Custom(ident) => ident.value.to_lowercase(),
        _ => return None,
    };
    Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trino_sql::testing::{expr, function, query};

    #[test]
    fn a_timestamps_zone_is_what_follows_its_date_time() {
        assert_eq!(
            timestamp_zone("2020-01-02 03:04:05.6 +01:00"),
            Some(("2020-01-02 03:04:05.6", "+01:00"))
        );
        assert_eq!(
            timestamp_zone("2020-01-02 03:04+01:00"),
            Some(("2020-01-02 03:04", "+01:00"))
        );
        assert_eq!(
            timestamp_zone(" 2020-01-02 Europe/Berlin "),
            Some(("2020-01-02", "Europe/Berlin"))
        );
        assert_eq!(timestamp_zone("2020-01-02 03:04:05"), None);
        assert_eq!(timestamp_zone("2020-01-02"), None);
        // A `T` is not Trino's text: no zone is read from it.
        assert_eq!(timestamp_zone("2020-01-02T03:04:05 UTC"), None);
    }

    #[test]
    fn precisions_take_the_next_arrow_unit() {
        let held: Vec<u64> = (0..=10).map(arrow_precision).collect();
        assert_eq!(held, [0, 3, 3, 3, 6, 6, 6, 9, 9, 9, 9]);
        assert_eq!(fraction_digits("2020-01-02 03:04:05.123456"), 6);
        assert_eq!(fraction_digits("2020-01-02 03:04:05.1"), 1);
        assert_eq!(fraction_digits("2020-01-02 03:04:05"), 0);
        // A date has no fraction, whatever follows a point.
        assert_eq!(fraction_digits("2020.01.02"), 0);
    }

    #[test]
    fn texts_of_date_times() {
        assert_eq!(with_seconds("2020-01-02 03:04"), "2020-01-02 03:04:00");
        assert_eq!(
            with_seconds(" 2020-01-02 03:04:05.5 "),
            "2020-01-02 03:04:05.5"
        );
        assert_eq!(with_seconds("2020-01-02"), "2020-01-02");
        assert!(reads_as_date_time("2020-01-02 03:04:05.123"));
        assert!(reads_as_date_time("2020-01-02"));
        assert!(!reads_as_date_time("03:04:05"));
        assert!(!reads_as_date_time("2020-13-02"));
        assert!(zone_name_reads("Europe/Berlin"));
        assert!(zone_name_reads("+01:00"));
        assert!(!zone_name_reads("Nowhere/Special"));
        assert_eq!(
            zoned_text(&expr("'2020-01-02 03:04 America/New_York'")),
            Some((
                "2020-01-02 03:04:00".to_string(),
                "America/New_York".to_string()
            ))
        );
        assert_eq!(zoned_text(&expr("'2020-01-02 03:04'")), None);
        assert_eq!(zoned_text(&expr("x")), None);
    }

    #[test]
    fn second_fractions_to_the_millisecond() {
        assert_eq!(second_millis("12.345"), Some(12_345));
        assert_eq!(second_millis("1.5"), Some(1_500));
        assert_eq!(second_millis("7"), Some(7_000));
        assert_eq!(second_millis("1.23456"), Some(1_234));
        assert_eq!(second_millis("1.2x"), None);
        assert_eq!(second_millis("x"), None);
    }

    fn interval(sql: &str) -> Option<String> {
        match expr(sql) {
            ast::Expr::Interval(i) => trino_interval(&i).map(|e| e.to_string()),
            other => panic!("not an interval: {other}"),
        }
    }

    #[test]
    fn interval_literals() {
        assert_eq!(
            interval("INTERVAL '1-2' YEAR TO MONTH").as_deref(),
            Some("arrow_cast('14 months', 'Interval(YearMonth)')")
        );
        assert_eq!(
            interval("INTERVAL '-3' YEAR").as_deref(),
            Some("arrow_cast('-36 months', 'Interval(YearMonth)')")
        );
        assert_eq!(
            interval("INTERVAL '+5' MONTH").as_deref(),
            Some("arrow_cast('5 months', 'Interval(YearMonth)')")
        );
        // 3 h 4 min 5.678 s = 11,045,678 ms.
        assert_eq!(
            interval("INTERVAL '2 03:04:05.678' DAY TO SECOND").as_deref(),
            Some("INTERVAL '2 days 11045678 milliseconds'")
        );
        assert_eq!(
            interval("INTERVAL '-25:30' HOUR TO MINUTE").as_deref(),
            Some("INTERVAL '-1 days -5400000 milliseconds'")
        );
        // One day-to-second field is DataFusion's to read; a text that does not read is refused
        // by the caller.
        assert_eq!(interval("INTERVAL '5' DAY"), None);
        assert_eq!(interval("INTERVAL '1.5' YEAR"), None);
        assert_eq!(interval("INTERVAL '1:2' DAY TO SECOND"), None);
        assert_eq!(interval("INTERVAL '3' SECOND TO MINUTE"), None);
    }

    #[test]
    fn clocks() {
        let clock_of = |sql: &str| clock_precision(&function(sql));
        assert_eq!(
            clock_of("current_timestamp(6)"),
            Some(("current_timestamp".to_string(), 6))
        );
        assert_eq!(clock_of("LOCALTIME()"), Some(("localtime".to_string(), 3)));
        assert_eq!(clock_of("now()"), Some(("now".to_string(), 3)));
        assert_eq!(clock_of("now(6)"), None);
        assert_eq!(clock_of("localtimestamp(x)"), None);
        assert_eq!(clock_of("today()"), None);
        assert_eq!(
            clock("current_timestamp", 5).to_string(),
            "CAST(now() AS TIMESTAMP(6) WITH TIME ZONE)"
        );
        assert_eq!(
            clock("localtimestamp", 3).to_string(),
            "CAST(now() AS TIMESTAMP(3))"
        );
        assert_eq!(
            clock("localtime", 0).to_string(),
            "arrow_cast(CAST(now() AS TIMESTAMP(0)), 'Time32(s)')"
        );
        assert_eq!(
            clock("localtime", 7).to_string(),
            "arrow_cast(CAST(now() AS TIMESTAMP(9)), 'Time64(ns)')"
        );
    }

    #[test]
    fn extract_fields() {
        assert_eq!(
            extract_name(&DateTimeField::Dow).as_deref(),
            Some("day_of_week")
        );
        assert_eq!(
            extract_name(&DateTimeField::DayOfYear).as_deref(),
            Some("day_of_year")
        );
        assert_eq!(
            extract_name(&DateTimeField::Week(None)).as_deref(),
            Some("week")
        );
        assert_eq!(
            extract_name(&DateTimeField::Custom(ast::Ident::new("YEAR_OF_WEEK"))).as_deref(),
            Some("year_of_week")
        );
        assert_eq!(extract_name(&DateTimeField::Millisecond), None);
    }

    fn values(sql: &str) -> String {
        let mut q = query(sql);
        let ast::SetExpr::Values(v) = q.body.as_mut() else {
            panic!("not VALUES: {sql}")
        };
        finest_literals(&mut v.rows);
        q.to_string()
    }

    #[test]
    fn values_columns_meet_at_their_finest_precision() {
        assert_eq!(
            values(
                "VALUES (TIMESTAMP(0) '2020-01-02 03:04:05', 1), (TIMESTAMP(6) '2020-01-02 03:04:05.123456', 2), (NULL, 3)"
            ),
            "VALUES (TIMESTAMP(6) '2020-01-02 03:04:05', 1), (TIMESTAMP(6) '2020-01-02 03:04:05.123456', 2), (NULL, 3)"
        );
        // Zoned constants in two zones each keep their own (one zone per value).
        assert_eq!(
            values(
                "VALUES (with_timezone(CAST('2020-01-02 03:04:05' AS TIMESTAMP(0)), 'UTC')), (with_timezone(CAST('2020-01-02 03:04:05.5' AS TIMESTAMP(3)), 'Europe/Berlin'))"
            ),
            "VALUES (sqe_zoned(with_timezone(CAST('2020-01-02 03:04:05' AS TIMESTAMP(3)), 'UTC'))), (sqe_zoned(with_timezone(CAST('2020-01-02 03:04:05.5' AS TIMESTAMP(3)), 'Europe/Berlin')))"
        );
        // One zone: no per-value form.
        assert_eq!(
            values(
                "VALUES (with_timezone(CAST('2020-01-02' AS TIMESTAMP(0)), 'UTC')), (with_timezone(CAST('2020-01-03' AS TIMESTAMP(0)), 'UTC'))"
            ),
            "VALUES (with_timezone(CAST('2020-01-02' AS TIMESTAMP(0)), 'UTC')), (with_timezone(CAST('2020-01-03' AS TIMESTAMP(0)), 'UTC'))"
        );
    }
}

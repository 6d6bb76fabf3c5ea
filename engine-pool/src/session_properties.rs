//! The session's statements: `SET SESSION name = value`, `RESET SESSION name`, `SHOW SESSION`, and
//! `USE`. Only properties SQE acts on exist; any other name is refused, as Trino refuses it.

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::StringArray;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::sql::sqlparser::ast::{
    ContextModifier, Expr, ObjectName, Reset, Set, Statement, Use, Value,
};
use sqe_sessions::{QueryResult, Session, SessionUpdate, SqeError, SqeResult};

use crate::catalog::mounts::Mounts;
use crate::names::{object_parts, schema_name};

struct Property {
    name: &'static str,
    default: &'static str,
    kind: &'static str,
    description: &'static str,
    check: fn(&str) -> SqeResult<()>,
}

/// By name, as SHOW SESSION lists them.
const PROPERTIES: &[Property] = &[
    // As Trino's Hive connector has it: what an INSERT does to partitions that hold rows.
    Property {
        name: INSERT_EXISTING,
        default: "APPEND",
        kind: "varchar",
        description: "What an INSERT does to the partitions it writes that already hold rows: APPEND, OVERWRITE (replaces them) or ERROR",
        check: |v| insert_existing_of(v).map(|_| ()),
    },
    Property {
        name: "query_max_run_time",
        default: "100.00d",
        kind: "varchar",
        description: "Maximum run time of a query, queueing included (e.g. 30s, 5m, 1.5h)",
        check: |v| parse_duration(v).map(|_| ()),
    },
    // What `SET TIME ZONE` sets, as in Trino (which sends it back as this session property).
    Property {
        name: TIME_ZONE_ID,
        default: "",
        kind: "varchar",
        description: "The session's time zone, over the client's (SET TIME ZONE)",
        check: |v| zone(v).map(|_| ()),
    },
];

const TIME_ZONE_ID: &str = "time_zone_id";

/// What an INSERT does to the partitions its rows go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Existing {
    /// Adds the rows beside those there (INSERT).
    Append,
    /// Replaces the rows there.
    Overwrite,
    /// Fails when a partition holds rows.
    Error,
}
const INSERT_EXISTING: &str = "insert_existing_partitions_behavior";

fn insert_existing_of(text: &str) -> SqeResult<Existing> {
    match text.to_ascii_uppercase().as_str() {
        "APPEND" => Ok(Existing::Append),
        "OVERWRITE" => Ok(Existing::Overwrite),
        "ERROR" => Ok(Existing::Error),
        _ => Err(SqeError::invalid(format!(
            "'{text}' is not one of APPEND, OVERWRITE and ERROR"
        ))),
    }
}

/// What the session's INSERTs do to partitions that hold rows (`insert_existing_partitions_behavior`).
pub(crate) fn insert_existing(session: &Session) -> SqeResult<Existing> {
    match session.properties.get(INSERT_EXISTING) {
        Some(v) => insert_existing_of(v),
        None => Ok(Existing::Append),
    }
}

fn zone(text: &str) -> SqeResult<String> {
    sqe_functions::zone_name(text)
        .map_err(|_| SqeError::invalid(format!("Time zone not supported: {text}")))
}

/// The session's time zone: `SET TIME ZONE`'s, else the client's (`X-Trino-Time-Zone`), else UTC.
pub(crate) fn time_zone(session: &Session) -> SqeResult<String> {
    match session.properties.get(TIME_ZONE_ID) {
        Some(z) if !z.is_empty() => zone(z),
        _ if session.time_zone.is_empty() => Ok("UTC".into()),
        _ => zone(&session.time_zone),
    }
}

/// `SET TIME ZONE 'zone'`, `SET TIME ZONE INTERVAL '-08:00' HOUR TO MINUTE`, and `SET TIME ZONE
/// LOCAL` (back to the client's zone).
fn set_time_zone(value: &Expr) -> SqeResult<QueryResult> {
    let mut update = SessionUpdate::default();
    // An interval of hours (`'10'`) or of hours and minutes (`'-08:00'`) is an offset.
    let offset = |text: &str| match text.strip_prefix('-') {
        Some(rest) => zone(&format!("-{rest}")),
        None => zone(&format!("+{}", text.strip_prefix('+').unwrap_or(text))),
    };
    match value {
        Expr::Identifier(id) if id.value.eq_ignore_ascii_case("local") => {
            update.reset_properties.push(TIME_ZONE_ID.to_string());
        }
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(z) => {
                update
                    .set_properties
                    .insert(TIME_ZONE_ID.to_string(), zone(z)?);
            }
            other => {
                return Err(SqeError::invalid(format!(
                    "SET TIME ZONE needs a zone name or an interval, not {other}"
                )));
            }
        },
        Expr::Interval(interval) => {
            let text = match interval.value.as_ref() {
                Expr::Value(v) => match &v.value {
                    Value::SingleQuotedString(s) => s.clone(),
                    other => other.to_string(),
                },
                other => other.to_string(),
            };
            let z = offset(text.trim())?;
            update.set_properties.insert(TIME_ZONE_ID.to_string(), z);
        }
        other => {
            return Err(SqeError::invalid(format!(
                "SET TIME ZONE needs a zone name or an interval, not {other}"
            )));
        }
    }
    Ok(QueryResult {
        session_update: Some(update),
        ..QueryResult::empty()
    })
}

fn property(name: &str) -> SqeResult<&'static Property> {
    PROPERTIES
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| SqeError::invalid(format!("Session property '{name}' does not exist")))
}

/// A Trino duration: a number and a unit (`ns`, `us`, `ms`, `s`, `m`, `h`, `d`).
pub(crate) fn parse_duration(text: &str) -> SqeResult<Duration> {
    let bad = || {
        SqeError::invalid(format!(
            "'{text}' is not a duration (a number and a unit: ms, s, m, h, d)"
        ))
    };
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).ok_or_else(bad)?;
    let (number, unit) = t.split_at(split);
    let number: f64 = number.trim().parse().map_err(|_| bad())?;
    let seconds = match unit.trim() {
        "ns" => 1e-9,
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return Err(bad()),
    };
    if !number.is_finite() || number < 0.0 {
        return Err(bad());
    }
    Duration::try_from_secs_f64(number * seconds).map_err(|_| bad())
}

/// Checks every property a session carries (a client may send them in headers).
pub(crate) fn check_session(session: &Session) -> SqeResult<()> {
    for (name, value) in &session.properties {
        let p = property(name)?;
        (p.check)(value).map_err(|e| {
            SqeError::invalid(format!(
                "invalid value for session property '{name}': {}",
                e.message()
            ))
        })?;
    }
    Ok(())
}

/// The session's `query_max_run_time`, if set.
pub(crate) fn max_run_time(session: &Session) -> Option<Duration> {
    session
        .properties
        .get("query_max_run_time")
        .and_then(|v| parse_duration(v).ok())
}

fn property_name(name: &ObjectName) -> String {
    name.0
        .iter()
        .map(|p| p.to_string().trim_matches('"').to_string())
        .collect::<Vec<_>>()
        .join(".")
}

/// `SET SESSION name = value`.
fn set_session(set: &Set) -> SqeResult<QueryResult> {
    if let Set::SetTimeZone { value, .. } = set {
        return set_time_zone(value);
    }
    let Set::SingleAssignment {
        scope: Some(ContextModifier::Session),
        hivevar: false,
        variable,
        values,
    } = set
    else {
        return Err(SqeError::unsupported(format!(
            "{set} is not supported; use SET SESSION name = value"
        )));
    };
    let name = property_name(variable);
    let p = property(&name)?;
    let value = match values.as_slice() {
        [Expr::Value(v)] => match &v.value {
            Value::SingleQuotedString(s) => s.clone(),
            Value::Number(n, _) => n.to_string(),
            Value::Boolean(b) => b.to_string(),
            other => {
                return Err(SqeError::invalid(format!(
                    "session property '{name}' needs a literal value, not {other}"
                )));
            }
        },
        _ => {
            return Err(SqeError::invalid(format!(
                "session property '{name}' needs one literal value"
            )));
        }
    };
    (p.check)(&value).map_err(|e| {
        SqeError::invalid(format!(
            "invalid value for session property '{name}': {}",
            e.message()
        ))
    })?;
    let mut update = SessionUpdate::default();
    update.set_properties.insert(name, value);
    Ok(QueryResult {
        session_update: Some(update),
        ..QueryResult::empty()
    })
}

/// `RESET SESSION name`.
fn reset_session(name: &ObjectName) -> SqeResult<QueryResult> {
    let name = property_name(name);
    property(&name)?;
    Ok(QueryResult {
        session_update: Some(SessionUpdate {
            reset_properties: vec![name],
            ..SessionUpdate::default()
        }),
        ..QueryResult::empty()
    })
}

/// `SHOW SESSION`: each property with its current value, in Trino's columns (the time zone is
/// `current_timezone()`'s, as in Trino).
pub(crate) fn show_session(session: &Session) -> SqeResult<QueryResult> {
    let column = |f: &dyn Fn(&Property) -> String| {
        Arc::new(StringArray::from(
            PROPERTIES
                .iter()
                .filter(|p| p.name != TIME_ZONE_ID)
                .map(f)
                .collect::<Vec<_>>(),
        )) as _
    };
    QueryResult::rows(
        Schema::new(vec![
            Field::new("Name", DataType::Utf8, false),
            Field::new("Value", DataType::Utf8, false),
            Field::new("Default", DataType::Utf8, false),
            Field::new("Type", DataType::Utf8, false),
            Field::new("Description", DataType::Utf8, false),
        ]),
        vec![
            column(&|p| p.name.to_string()),
            column(&|p| {
                session
                    .properties
                    .get(p.name)
                    .cloned()
                    .unwrap_or_else(|| p.default.to_string())
            }),
            column(&|p| p.default.to_string()),
            column(&|p| p.kind.to_string()),
            column(&|p| p.description.to_string()),
        ],
    )
}

/// `USE`, `SET SESSION` and `RESET SESSION`: changes to the session, which the caller applies.
pub(crate) async fn run(
    mounts: &Mounts,
    session: &Session,
    statement: Statement,
) -> SqeResult<QueryResult> {
    match statement {
        Statement::Use(u) => use_statement(mounts, session, u).await,
        Statement::Set(set) => set_session(&set),
        Statement::Reset(reset) => match reset.reset {
            Reset::ConfigurationParameter(name) => reset_session(&name),
            Reset::ALL => Err(SqeError::unsupported(
                "RESET ALL is not supported; reset each property with RESET SESSION name",
            )),
        },
        other => Err(SqeError::internal(format!(
            "not a session statement: {}",
            other.to_string().chars().take(40).collect::<String>()
        ))),
    }
}

/// `USE catalog.schema`, `USE schema` or `USE CATALOG c`: the session's new catalog and schema,
/// which must exist.
async fn use_statement(mounts: &Mounts, session: &Session, u: Use) -> SqeResult<QueryResult> {
    let name = match u {
        Use::Object(n) | Use::Schema(n) | Use::Database(n) => n,
        Use::Catalog(n) => {
            let parts = object_parts(&n)?;
            let [c] = parts.as_slice() else {
                return Err(SqeError::invalid(format!("'{n}' is not a catalog name")));
            };
            mounts.mount(session, c)?;
            return Ok(QueryResult {
                session_update: Some(SessionUpdate {
                    catalog: Some(c.clone()),
                    ..SessionUpdate::default()
                }),
                ..QueryResult::empty()
            });
        }
        other => return Err(SqeError::unsupported(format!("{other} is not supported"))),
    };
    let (catalog_name, schema) = schema_name(session, &name)?;
    mounts.schema(session, &catalog_name, &schema).await?;
    Ok(QueryResult {
        session_update: Some(SessionUpdate {
            catalog: Some(catalog_name),
            schema: Some(schema),
            ..SessionUpdate::default()
        }),
        ..QueryResult::empty()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_trino() {
        assert_eq!(parse_duration("30s").ok(), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("1.5m").ok(), Some(Duration::from_secs(90)));
        assert_eq!(
            parse_duration("250ms").ok(),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            parse_duration("100.00d").ok(),
            Some(Duration::from_secs(8_640_000))
        );
        let e = parse_duration("soon")
            .err()
            .map(|e| e.message().to_string());
        assert_eq!(
            e.as_deref(),
            Some("'soon' is not a duration (a number and a unit: ms, s, m, h, d)")
        );
        assert!(parse_duration("5 parsecs").is_err());
    }
}

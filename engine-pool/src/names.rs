//! Names as SQE reads them: identifiers folded as SQL folds them, table and schema names qualified
//! by the session's current catalog and schema, and the catalogs SQE keeps for itself. Every part
//! of the engine resolves names the same way, so the rules live here, below all of them.

use datafusion::sql::sqlparser::ast::{Ident, ObjectName};
use iceberg::{NamespaceIdent, TableIdent};
use sqe_sessions::{Session, SqeError, SqeResult};

/// Trino's `system` catalog: `system.runtime.queries`, `system.jdbc`.
pub(crate) const SYSTEM_CATALOG: &str = "system";

/// The catalog that holds per-query tables (time travel, file functions); never listed.
pub(crate) const QUERY_CATALOG: &str = "__sqe";
/// The one schema of [`QUERY_CATALOG`].
pub(crate) const QUERY_SCHEMA: &str = "q";

/// An identifier as SQL compares it: an unquoted one in lower case, a quoted one as written.
pub(crate) fn normalize_ident(id: &Ident) -> String {
    if id.quote_style.is_some() {
        id.value.clone()
    } else {
        id.value.to_lowercase()
    }
}

/// A name's parts, each normalised ([`normalize_ident`]).
/// A name as a statement takes it back: as it is when it is plain (lower case, digits and `_`),
/// double-quoted otherwise.
pub(crate) fn sql_name(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    match plain {
        true => name.to_string(),
        false => sqe_sessions::quote_identifier(name),
    }
}

pub(crate) fn object_parts(name: &ObjectName) -> SqeResult<Vec<String>> {
    name.0
        .iter()
        .map(|p| {
            p.as_ident()
                .map(normalize_ident)
                .ok_or_else(|| SqeError::invalid(format!("'{name}' is not a valid name")))
        })
        .collect()
}

/// (catalog, schema, table) for a table name, qualified by the session's current catalog and
/// schema.
pub(crate) fn resolve_name(
    session: &Session,
    name: &ObjectName,
) -> SqeResult<(String, String, String)> {
    let parts = object_parts(name)?;
    match parts.as_slice() {
        [t] => Ok((session.catalog.clone(), session.schema.clone(), t.clone())),
        [s, t] => Ok((session.catalog.clone(), s.clone(), t.clone())),
        [c, s, t] => Ok((c.clone(), s.clone(), t.clone())),
        _ => Err(SqeError::invalid(format!(
            "'{name}' is not a valid table name"
        ))),
    }
}

/// The catalog and Iceberg identifier of a table name ([`resolve_name`]).
pub(crate) fn table_ident(session: &Session, name: &ObjectName) -> SqeResult<(String, TableIdent)> {
    let (catalog, schema, table) = resolve_name(session, name)?;
    Ok((catalog, TableIdent::new(NamespaceIdent::new(schema), table)))
}

/// (catalog, schema) for a schema name, qualified by the session's current catalog.
pub(crate) fn schema_name(session: &Session, name: &ObjectName) -> SqeResult<(String, String)> {
    match object_parts(name)?.as_slice() {
        [s] => Ok((session.catalog.clone(), s.clone())),
        [c, s] => Ok((c.clone(), s.clone())),
        _ => Err(SqeError::invalid(format!(
            "'{name}' is not a valid schema name"
        ))),
    }
}

/// `catalog.schema.table` as SQE's messages name a table.
pub(crate) fn qualified(catalog: &str, ident: &TableIdent) -> String {
    format!("{catalog}.{}.{}", ident.namespace.join("."), ident.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqe_sessions::Principal;

    fn name(parts: &[(&str, bool)]) -> ObjectName {
        ObjectName::from(
            parts
                .iter()
                .map(|(p, quoted)| match quoted {
                    true => Ident::with_quote('"', *p),
                    false => Ident::new(*p),
                })
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn names_are_qualified_by_the_session() {
        let session = Session::new(Principal::new("u"), "iceberg", "default");
        let r = |parts: &[(&str, bool)]| {
            resolve_name(&session, &name(parts)).map_err(|e| e.message().to_string())
        };
        assert_eq!(
            r(&[("T", false)]),
            Ok(("iceberg".into(), "default".into(), "t".into()))
        );
        assert_eq!(
            r(&[("S", false), ("T", true)]),
            Ok(("iceberg".into(), "s".into(), "T".into()))
        );
        assert_eq!(
            r(&[("c", false), ("s", false), ("t", false)]),
            Ok(("c".into(), "s".into(), "t".into()))
        );
        assert_eq!(
            r(&[("a", false), ("b", false), ("c", false), ("d", false)]),
            Err("'a.b.c.d' is not a valid table name".into())
        );
        assert_eq!(
            schema_name(&session, &name(&[("a", false), ("b", false), ("c", false)]))
                .map_err(|e| e.message().to_string()),
            Err("'a.b.c' is not a valid schema name".into())
        );
    }
}

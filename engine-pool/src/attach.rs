//! Catalogs a session mounts for itself, as DuckDB spells it:
//! `ATTACH [DATABASE] [IF NOT EXISTS] 'uri' [AS] name [(TYPE t, option value, …)]` and
//! `DETACH [DATABASE] [IF EXISTS] name`.
//!
//! The uri says what to mount: a local directory is a warehouse (a SQLite catalog and its files),
//! `http(s)://…` an Iceberg REST catalog, `postgresql://…` a JDBC catalog in PostgreSQL; `TYPE`
//! (`sqlite`, `rest` / `iceberg`, `jdbc` / `postgres`) says it outright. A mount belongs to the
//! session that made it and to its principal, and lives as long as the session (the shell, a Flight
//! SQL session kept by its cookie); Trino's protocol keeps no session between statements, so there
//! ATTACH is refused. On a server, what may be attached is what `[files]` allows: a local warehouse
//! under an allowed directory, a catalog URI under `allowed_catalog_uris`. A REST catalog takes
//! `AUTH passthrough` (the caller's own token; the default when the session has one) or `none`, or
//! `SECRET name`: a bearer secret as its token, an s3 secret as its tables' storage credentials.

use std::path::PathBuf;
use std::sync::Arc;

use sqe_sessions::{ErrorCode, QueryResult, SqeError, SqeResult};

use crate::catalog::backend::{CatalogMount, SharedMount};
use crate::catalog::hms::{HmsCatalog, HmsConfig};
use crate::catalog::rest::{RestAuth, RestCatalogConfig, RestMount};
use crate::catalog::sql::{PostgresConfig, SqlCatalog};
use crate::context::Ctx;
use crate::error::from_iceberg;
use crate::files::policy::Access;
use crate::names::{QUERY_CATALOG, SYSTEM_CATALOG};
use crate::statement::own::{Attach, Detach};

/// What kind of catalog an ATTACH names.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Sqlite,
    Rest,
    Postgres,
    Hms,
}

fn kind_of(uri: &str, options: &[(String, String)]) -> SqeResult<Kind> {
    let named = options.iter().find(|(k, _)| k == "type").map(|(_, v)| v);
    match named.map(|t| t.to_ascii_lowercase()).as_deref() {
        Some("sqlite") => Ok(Kind::Sqlite),
        Some("rest" | "iceberg" | "iceberg_rest") => Ok(Kind::Rest),
        Some("jdbc" | "postgres" | "postgresql") => Ok(Kind::Postgres),
        Some("hms" | "hive") => Ok(Kind::Hms),
        Some(other) => Err(SqeError::invalid(format!(
            "unknown catalog TYPE '{other}' (known: sqlite, rest, iceberg, jdbc, postgres, hms, hive)"
        ))),
        None if uri.starts_with("http://") || uri.starts_with("https://") => Ok(Kind::Rest),
        None if uri.starts_with("postgresql://") || uri.starts_with("postgres://") => {
            Ok(Kind::Postgres)
        }
        None if uri.starts_with("thrift://") => Ok(Kind::Hms),
        None if uri.contains("://") && !uri.starts_with("file://") => Err(SqeError::invalid(
            format!("cannot tell what kind of catalog '{uri}' is: give its TYPE"),
        )),
        None => Ok(Kind::Sqlite),
    }
}

/// The options a kind of catalog takes (besides TYPE).
fn known_options(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Sqlite => &[],
        Kind::Rest => &["prefix", "warehouse", "auth", "secret"],
        Kind::Postgres => &["warehouse"],
        Kind::Hms => &["secret"],
    }
}

pub(crate) async fn attach(ctx: &Ctx<'_>, attach: Attach) -> SqeResult<QueryResult> {
    let session = ctx.session;
    if session.protocol == "trino" {
        return Err(SqeError::unsupported(
            "ATTACH lasts as long as a session, and Trino's protocol keeps none between statements: mount the catalog in sqe.toml ([catalogs.NAME]), or ATTACH over Flight SQL (with its session cookie) or in the shell",
        ));
    }
    let name = attach.name.clone();
    if name == SYSTEM_CATALOG || name == QUERY_CATALOG || ctx.mounts.is_server_catalog(&name) {
        return Err(SqeError::already_exists(format!(
            "catalog '{name}' is mounted by the server; choose another name"
        )));
    }
    if ctx.mounts.attached().get(session, &name).is_some() {
        if attach.if_not_exists {
            return Ok(QueryResult::empty());
        }
        return Err(SqeError::already_exists(format!(
            "catalog '{name}' is already attached"
        )));
    }
    let kind = kind_of(&attach.uri, &attach.options)?;
    let option = |key: &str| {
        attach
            .options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    for (key, _) in &attach.options {
        if key != "type" && !known_options(kind).contains(&key.as_str()) {
            let known = known_options(kind);
            return Err(SqeError::invalid(format!(
                "unknown option {key} for a {kind:?} catalog (known: TYPE{}{})",
                if known.is_empty() { "" } else { ", " },
                known.join(", ").to_uppercase()
            )));
        }
    }
    let mount: Arc<dyn CatalogMount> = match kind {
        Kind::Sqlite => {
            let dir = attach
                .uri
                .strip_prefix("file://")
                .unwrap_or(&attach.uri)
                .to_string();
            ctx.files.check(&dir, Access::Write)?;
            let dir = PathBuf::from(dir);
            let confinement = ctx.files.confinement(Some(&dir));
            let catalog = tokio::task::spawn_blocking(move || {
                SqlCatalog::open(&name, &dir).map(|c| c.confined(confinement))
            })
            .await
            .map_err(|e| SqeError::internal(format!("attaching a warehouse: {e}")))?
            .map_err(from_iceberg)?;
            Arc::new(SharedMount::new(Arc::new(catalog)))
        }
        Kind::Rest => {
            ctx.files.check_catalog_uri(&attach.uri)?;
            let secret = match option("secret") {
                Some(name) => Some(ctx.secrets.secret(session, &name)?),
                None => None,
            };
            let token = secret.as_ref().and_then(|s| s.token()).map(str::to_string);
            let auth = match option("auth").map(|a| a.to_ascii_lowercase()).as_deref() {
                Some(_) if token.is_some() => {
                    return Err(SqeError::invalid("give AUTH or a bearer SECRET, not both"));
                }
                Some("passthrough") => RestAuth::Passthrough,
                Some("none") => RestAuth::None,
                None => match token {
                    Some(token) => RestAuth::Static { token },
                    None if session.credential.is_some() => RestAuth::Passthrough,
                    None => RestAuth::None,
                },
                Some(other) => {
                    return Err(SqeError::invalid(format!(
                        "AUTH '{other}' is not known here (known: passthrough, none)"
                    )));
                }
            };
            let config = RestCatalogConfig {
                uri: attach.uri.clone(),
                warehouse: option("warehouse"),
                prefix: option("prefix"),
                auth,
                properties: secret.map(|s| s.storage_properties()).unwrap_or_default(),
                locations: Vec::new(),
            };
            Arc::new(RestMount::new(&name, config, ctx.files.confinement(None))?)
        }
        Kind::Hms => {
            ctx.files.check_catalog_uri(&attach.uri)?;
            let properties = match option("secret") {
                Some(name) => ctx.secrets.secret(session, &name)?.storage_properties(),
                None => Default::default(),
            };
            let config = HmsConfig {
                uri: attach.uri.clone(),
                properties,
                locations: Vec::new(),
            };
            let catalog = HmsCatalog::new(&name, &config, ctx.files.confinement(None))
                .map_err(from_iceberg)?;
            Arc::new(SharedMount::new(Arc::new(catalog)))
        }
        Kind::Postgres => {
            ctx.files.check_catalog_uri(&attach.uri)?;
            let Some(warehouse) = option("warehouse") else {
                return Err(SqeError::invalid(
                    "a jdbc catalog needs WAREHOUSE, the local directory its new tables go to",
                ));
            };
            ctx.files.check(&warehouse, Access::Write)?;
            let config = PostgresConfig {
                uri: attach.uri.clone(),
                password: None,
                warehouse: PathBuf::from(warehouse),
            };
            let confinement = ctx.files.confinement(Some(&config.warehouse));
            let catalog = tokio::task::spawn_blocking(move || {
                SqlCatalog::open_postgres(&name, &config).map(|c| c.confined(confinement))
            })
            .await
            .map_err(|e| SqeError::internal(format!("attaching a catalog: {e}")))?
            .map_err(from_iceberg)?;
            Arc::new(SharedMount::new(Arc::new(catalog)))
        }
    };
    ctx.mounts.attached().add(session, attach.name, mount)?;
    Ok(QueryResult::empty())
}

pub(crate) fn detach(ctx: &Ctx<'_>, detach: Detach) -> SqeResult<QueryResult> {
    let session = ctx.session;
    if ctx.mounts.attached().remove(session, &detach.name) || detach.if_exists {
        return Ok(QueryResult::empty());
    }
    if ctx.mounts.is_server_catalog(&detach.name) {
        return Err(SqeError::new(
            ErrorCode::PermissionDenied,
            format!(
                "catalog '{}' is mounted by the server and cannot be detached",
                detach.name
            ),
        ));
    }
    Err(SqeError::not_found(format!(
        "catalog '{}' is not attached",
        detach.name
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_without_a_type_must_name_one() {
        assert_eq!(
            kind_of("s3://bucket/w", &[])
                .err()
                .map(|e| e.message().to_string())
                .as_deref(),
            Some("cannot tell what kind of catalog 's3://bucket/w' is: give its TYPE")
        );
    }
}

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

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use sqe_sessions::{ErrorCode, QueryResult, Session, SqeError, SqeResult};

use crate::catalog::backend::{CatalogMount, SharedMount};
use crate::catalog::hms::{HmsCatalog, HmsConfig};
use crate::catalog::rest::{RestAuth, RestCatalogConfig, RestMount};
use crate::catalog::sql::{PostgresConfig, SqlCatalog};
use crate::engine::Engine;
use crate::error::from_iceberg;
use crate::files::policy::Access;
use crate::names::{QUERY_CATALOG, SYSTEM_CATALOG};

/// `ATTACH …`, parsed.
#[derive(Debug, PartialEq)]
pub(crate) struct Attach {
    pub uri: String,
    pub name: String,
    pub if_not_exists: bool,
    /// Option names in lower case, values as written.
    pub options: Vec<(String, String)>,
}

/// `DETACH …`, parsed.
#[derive(Debug, PartialEq)]
pub(crate) struct Detach {
    pub name: String,
    pub if_exists: bool,
}

/// The words and values of a statement, without whitespace and comments.
struct Words {
    tokens: Vec<Token>,
    at: usize,
}

impl Words {
    fn of(sql: &str) -> SqeResult<Self> {
        let tokens = Tokenizer::new(&GenericDialect {}, sql)
            .tokenize()
            .map_err(|e| SqeError::invalid(format!("syntax error: {e}")))?
            .into_iter()
            .filter(|t| !matches!(t, Token::Whitespace(_)))
            .collect();
        Ok(Self { tokens, at: 0 })
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens
            .get(self.at)
            .filter(|t| !matches!(t, Token::SemiColon | Token::EOF))
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.peek().cloned();
        if t.is_some() {
            self.at += 1;
        }
        t
    }

    /// Takes `keyword` if it comes next.
    fn keyword(&mut self, keyword: Keyword) -> bool {
        match self.peek() {
            Some(Token::Word(w)) if w.keyword == keyword && w.quote_style.is_none() => {
                self.at += 1;
                true
            }
            _ => false,
        }
    }

    fn keywords(&mut self, keywords: &[Keyword]) -> bool {
        let start = self.at;
        if keywords.iter().all(|k| self.keyword(*k)) {
            return true;
        }
        self.at = start;
        false
    }

    fn token(&mut self, token: &Token) -> bool {
        if self.peek() == Some(token) {
            self.at += 1;
            return true;
        }
        false
    }

    /// A name: unquoted ones fold to lower case.
    fn name(&mut self, what: &str) -> SqeResult<String> {
        match self.next() {
            Some(Token::Word(w)) if w.quote_style.is_some() => Ok(w.value),
            Some(Token::Word(w)) => Ok(w.value.to_lowercase()),
            other => Err(expected(what, other)),
        }
    }

    /// A value: a string, a number or a bare word.
    fn value(&mut self, what: &str) -> SqeResult<String> {
        match self.next() {
            Some(Token::SingleQuotedString(s)) => Ok(s),
            Some(Token::Number(n, _)) => Ok(n),
            Some(Token::Word(w)) => Ok(w.value),
            other => Err(expected(what, other)),
        }
    }

    fn end(&mut self, statement: &str) -> SqeResult<()> {
        match self.next() {
            None => Ok(()),
            Some(t) => Err(SqeError::invalid(format!(
                "syntax error: unexpected '{t}' after the {statement} statement"
            ))),
        }
    }
}

fn expected(what: &str, found: Option<Token>) -> SqeError {
    match found {
        Some(t) => SqeError::invalid(format!("syntax error: expected {what}, found '{t}'")),
        None => SqeError::invalid(format!(
            "syntax error: expected {what} at the end of the statement"
        )),
    }
}

pub(crate) fn parse_attach(sql: &str) -> SqeResult<Attach> {
    let mut words = Words::of(sql)?;
    if !words.keyword(Keyword::ATTACH) {
        return Err(expected("ATTACH", words.next()));
    }
    words.keyword(Keyword::DATABASE);
    let if_not_exists = words.keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let uri = match words.next() {
        Some(Token::SingleQuotedString(s)) => s,
        other => return Err(expected("the catalog's location as a string", other)),
    };
    words.keyword(Keyword::AS);
    let name = words.name("a catalog name")?;
    let mut options = Vec::new();
    if words.token(&Token::LParen) {
        loop {
            let key = words.name("an option name")?.to_lowercase();
            words.token(&Token::Eq);
            let value = words.value(&format!("a value for option {key}"))?;
            if options.iter().any(|(k, _)| *k == key) {
                return Err(SqeError::invalid(format!("option {key} is given twice")));
            }
            options.push((key, value));
            if words.token(&Token::RParen) {
                break;
            }
            if !words.token(&Token::Comma) {
                return Err(expected("',' or ')'", words.next()));
            }
        }
    }
    words.end("ATTACH")?;
    Ok(Attach {
        uri,
        name,
        if_not_exists,
        options,
    })
}

pub(crate) fn parse_detach(sql: &str) -> SqeResult<Detach> {
    let mut words = Words::of(sql)?;
    if !words.keyword(Keyword::DETACH) {
        return Err(expected("DETACH", words.next()));
    }
    words.keyword(Keyword::DATABASE);
    let if_exists = words.keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = words.name("a catalog name")?;
    words.end("DETACH")?;
    Ok(Detach { name, if_exists })
}

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

impl Engine {
    pub(crate) async fn attach(&self, session: &Session, sql: &str) -> SqeResult<QueryResult> {
        let attach = parse_attach(sql)?;
        if session.protocol == "trino" {
            return Err(SqeError::unsupported(
                "ATTACH lasts as long as a session, and Trino's protocol keeps none between statements: mount the catalog in sqe.toml ([catalogs.NAME]), or ATTACH over Flight SQL (with its session cookie) or in the shell",
            ));
        }
        let name = attach.name.clone();
        if name == SYSTEM_CATALOG || name == QUERY_CATALOG || self.mounts.is_server_catalog(&name) {
            return Err(SqeError::already_exists(format!(
                "catalog '{name}' is mounted by the server; choose another name"
            )));
        }
        if self.mounts.attached().get(session, &name).is_some() {
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
                self.files.check(&dir, Access::Write)?;
                let dir = PathBuf::from(dir);
                let confinement = self.files.confinement(Some(&dir));
                let catalog = tokio::task::spawn_blocking(move || {
                    SqlCatalog::open(&name, &dir).map(|c| c.confined(confinement))
                })
                .await
                .map_err(|e| SqeError::internal(format!("attaching a warehouse: {e}")))?
                .map_err(from_iceberg)?;
                Arc::new(SharedMount::new(Arc::new(catalog)))
            }
            Kind::Rest => {
                self.files.check_catalog_uri(&attach.uri)?;
                let secret = match option("secret") {
                    Some(name) => Some(self.secret(session, &name)?),
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
                Arc::new(RestMount::new(&name, config, self.files.confinement(None))?)
            }
            Kind::Hms => {
                self.files.check_catalog_uri(&attach.uri)?;
                let properties = match option("secret") {
                    Some(name) => self.secret(session, &name)?.storage_properties(),
                    None => Default::default(),
                };
                let config = HmsConfig {
                    uri: attach.uri.clone(),
                    properties,
                    locations: Vec::new(),
                };
                let catalog = HmsCatalog::new(&name, &config, self.files.confinement(None))
                    .map_err(from_iceberg)?;
                Arc::new(SharedMount::new(Arc::new(catalog)))
            }
            Kind::Postgres => {
                self.files.check_catalog_uri(&attach.uri)?;
                let Some(warehouse) = option("warehouse") else {
                    return Err(SqeError::invalid(
                        "a jdbc catalog needs WAREHOUSE, the local directory its new tables go to",
                    ));
                };
                self.files.check(&warehouse, Access::Write)?;
                let config = PostgresConfig {
                    uri: attach.uri.clone(),
                    password: None,
                    warehouse: PathBuf::from(warehouse),
                };
                let confinement = self.files.confinement(Some(&config.warehouse));
                let catalog = tokio::task::spawn_blocking(move || {
                    SqlCatalog::open_postgres(&name, &config).map(|c| c.confined(confinement))
                })
                .await
                .map_err(|e| SqeError::internal(format!("attaching a catalog: {e}")))?
                .map_err(from_iceberg)?;
                Arc::new(SharedMount::new(Arc::new(catalog)))
            }
        };
        self.mounts.attached().add(session, attach.name, mount)?;
        Ok(QueryResult::empty())
    }

    pub(crate) fn detach(&self, session: &Session, sql: &str) -> SqeResult<QueryResult> {
        let detach = parse_detach(sql)?;
        if self.mounts.attached().remove(session, &detach.name) || detach.if_exists {
            return Ok(QueryResult::empty());
        }
        if self.mounts.is_server_catalog(&detach.name) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_attach_as_duckdb_writes_it() {
        let a = parse_attach(
            "ATTACH DATABASE IF NOT EXISTS 'https://cat.example/api' AS Lake (TYPE iceberg, prefix = 'dev', AUTH none);",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            a,
            Attach {
                uri: "https://cat.example/api".into(),
                name: "lake".into(),
                if_not_exists: true,
                options: vec![
                    ("type".into(), "iceberg".into()),
                    ("prefix".into(), "dev".into()),
                    ("auth".into(), "none".into()),
                ],
            }
        );
        let b = parse_attach("attach '/data/w' \"Other\"").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((b.name.as_str(), b.options.len()), ("Other", 0));
        let d = parse_detach("DETACH DATABASE IF EXISTS lake").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            d,
            Detach {
                name: "lake".into(),
                if_exists: true
            }
        );
    }

    #[test]
    fn malformed_attach_says_what_it_expected() {
        let message = |sql: &str| parse_attach(sql).err().map(|e| e.message().to_string());
        assert_eq!(
            message("ATTACH lake").as_deref(),
            Some("syntax error: expected the catalog's location as a string, found 'lake'")
        );
        assert_eq!(
            message("ATTACH '/w' AS w (TYPE sqlite").as_deref(),
            Some("syntax error: expected ',' or ')' at the end of the statement")
        );
        assert_eq!(
            message("ATTACH '/w' AS w (TYPE sqlite, type rest)").as_deref(),
            Some("option type is given twice")
        );
        assert_eq!(
            message("ATTACH '/w' AS w extra").as_deref(),
            Some("syntax error: unexpected 'extra' after the ATTACH statement")
        );
        assert_eq!(
            kind_of("s3://bucket/w", &[])
                .err()
                .map(|e| e.message().to_string())
                .as_deref(),
            Some("cannot tell what kind of catalog 's3://bucket/w' is: give its TYPE")
        );
    }
}

//! Secrets a session makes for itself, as DuckDB spells them:
//! `CREATE [OR REPLACE] [TEMPORARY] SECRET [IF NOT EXISTS] name (TYPE bearer | s3, key value, …)`,
//! `DROP [TEMPORARY] SECRET [IF EXISTS] name` and `SHOW SECRETS` (names and types, never a value).
//! `ATTACH … (SECRET name)` uses one: a bearer secret is the catalog's token, an s3 secret the
//! storage credentials of the catalog's tables.
//!
//! A secret belongs to the session that made it and to its principal, like an attached catalog,
//! and lasts as long as the session. `CREATE PERSISTENT SECRET` keeps one for its user instead,
//! sealed in the engine's secret store (see `secret_store`), for every later session of that user;
//! a session's own secret of the same name comes first. Its values never appear in a result, an
//! error, the query registry (`system.runtime.queries` shows the statement with its values cut)
//! or a `Debug` print.

pub(crate) mod store;

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::StringArray;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::sql::sqlparser::ast::Ident;
use sqe_sessions::{ErrorCode, QueryResult, Session, SqeError, SqeResult};

use crate::names::normalize_ident;
use crate::session_scoped::SessionScoped;
use crate::statement::CreateSecret;
use store::SecretStore;

/// What a secret is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SecretKind {
    /// A bearer token for a catalog.
    Bearer,
    /// Credentials for S3 and S3-alikes.
    S3,
}

impl SecretKind {
    fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "bearer" => Some(SecretKind::Bearer),
            "s3" => Some(SecretKind::S3),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            SecretKind::Bearer => "bearer",
            SecretKind::S3 => "s3",
        }
    }

    /// The keys a secret of this kind takes, the first one required.
    fn keys(self) -> &'static [&'static str] {
        match self {
            SecretKind::Bearer => &["token"],
            SecretKind::S3 => &[
                "key_id",
                "secret",
                "session_token",
                "region",
                "endpoint",
                "url_style",
            ],
        }
    }
}

#[derive(Clone)]
pub(crate) struct Secret {
    pub kind: SecretKind,
    values: BTreeMap<String, String>,
}

/// The kind and the keys, never the values.
impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("kind", &self.kind)
            .field("keys", &self.values.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Secret {
    /// A bearer secret's token.
    pub fn token(&self) -> Option<&str> {
        (self.kind == SecretKind::Bearer)
            .then(|| self.values.get("token").map(String::as_str))
            .flatten()
    }

    /// An s3 secret as iceberg's storage properties.
    pub fn storage_properties(&self) -> BTreeMap<String, String> {
        if self.kind != SecretKind::S3 {
            return BTreeMap::new();
        }
        let mut props = BTreeMap::new();
        for (key, value) in &self.values {
            let (name, value) = match key.as_str() {
                "key_id" => ("s3.access-key-id", value.clone()),
                "secret" => ("s3.secret-access-key", value.clone()),
                "session_token" => ("s3.session-token", value.clone()),
                "region" => ("s3.region", value.clone()),
                "endpoint" => ("s3.endpoint", value.clone()),
                "url_style" => (
                    "s3.path-style-access",
                    value.eq_ignore_ascii_case("path").to_string(),
                ),
                _ => continue,
            };
            props.insert(name.to_string(), value);
        }
        props
    }
}

fn refuse_on_trino(session: &Session) -> SqeResult<()> {
    if session.protocol == "trino" {
        return Err(SqeError::unsupported(
            "a secret lasts as long as a session, and Trino's protocol keeps none between statements: use Flight SQL (with its session cookie) or the shell",
        ));
    }
    Ok(())
}

/// The secrets of every session, and the store of persistent ones.
pub(crate) struct Secrets {
    /// Secrets sessions made for themselves (`CREATE SECRET`).
    session: SessionScoped<Secret>,
    /// `CREATE PERSISTENT SECRET`'s store, when the engine has one.
    persistent: Option<SecretStore>,
}

impl Secrets {
    pub fn new(persistent: Option<SecretStore>) -> Self {
        Self {
            session: SessionScoped::new("secrets", "DROP SECRET"),
            persistent,
        }
    }

    pub(crate) fn create_secret(
        &self,
        session: &Session,
        create: CreateSecret,
    ) -> SqeResult<QueryResult> {
        let persistent = create.temporary == Some(false);
        if !persistent {
            refuse_on_trino(session)?;
        }
        if create.storage_specifier.is_some() {
            return Err(SqeError::unsupported(
                "secrets are kept in the session; IN <storage> is not supported",
            ));
        }
        let Some(name) = create.name.as_ref().map(normalize_ident) else {
            return Err(SqeError::invalid("CREATE SECRET needs a name"));
        };
        let Some(kind) = SecretKind::parse(&create.secret_type.value) else {
            return Err(SqeError::invalid(format!(
                "unknown secret TYPE '{}' (known: bearer, s3)",
                create.secret_type.value
            )));
        };
        let mut values = BTreeMap::new();
        for option in &create.options {
            let key = option.key.value.to_ascii_lowercase();
            if !kind.keys().contains(&key.as_str()) {
                return Err(SqeError::invalid(format!(
                    "unknown key {key} for a {} secret (known: {})",
                    kind.name(),
                    kind.keys().join(", ").to_uppercase()
                )));
            }
            if values
                .insert(key.clone(), option.value.value.clone())
                .is_some()
            {
                return Err(SqeError::invalid(format!("key {key} is given twice")));
            }
        }
        let required = kind.keys()[0];
        if !values.contains_key(required) {
            return Err(SqeError::invalid(format!(
                "a {} secret needs {}",
                kind.name(),
                required.to_uppercase()
            )));
        }
        if persistent {
            let store = self.secret_store()?;
            let owner = &session.principal.name;
            if store.has(owner, &name)? && !create.or_replace {
                if create.if_not_exists {
                    return Ok(QueryResult::empty());
                }
                return Err(SqeError::already_exists(format!(
                    "persistent secret '{name}' already exists"
                )));
            }
            store.put(owner, &name, kind.name(), &values)?;
            return Ok(QueryResult::empty());
        }
        if self.session.get(session, &name).is_some() && !create.or_replace {
            if create.if_not_exists {
                return Ok(QueryResult::empty());
            }
            return Err(SqeError::already_exists(format!(
                "secret '{name}' already exists"
            )));
        }
        self.session.add(session, name, Secret { kind, values })?;
        Ok(QueryResult::empty())
    }

    pub(crate) fn drop_secret(
        &self,
        session: &Session,
        name: &Ident,
        if_exists: bool,
    ) -> SqeResult<QueryResult> {
        let name = normalize_ident(name);
        if self.session.remove(session, &name) {
            return Ok(QueryResult::empty());
        }
        if let Some(store) = &self.persistent
            && store.remove(&session.principal.name, &name)?
        {
            return Ok(QueryResult::empty());
        }
        if if_exists {
            return Ok(QueryResult::empty());
        }
        Err(SqeError::not_found(format!(
            "secret '{name}' does not exist"
        )))
    }

    /// `SHOW SECRETS`: the session's secrets, then its user's persistent ones, by name and type.
    pub(crate) fn show_secrets(&self, session: &Session) -> SqeResult<QueryResult> {
        let mut secrets: Vec<(String, Secret, &str)> = self
            .session
            .of(session)
            .into_iter()
            .map(|(n, s)| (n, s, "session"))
            .collect();
        secrets.extend(
            self.persistent_of(session)?
                .into_iter()
                .map(|(n, s)| (n, s, "persistent")),
        );
        let names: Vec<&str> = secrets.iter().map(|(n, _, _)| n.as_str()).collect();
        let kinds: Vec<&str> = secrets.iter().map(|(_, s, _)| s.kind.name()).collect();
        let scopes: Vec<&str> = secrets.iter().map(|(_, _, scope)| *scope).collect();
        let schema = Schema::new(vec![
            Field::new("name", DataType::Utf8, false),
            Field::new("type", DataType::Utf8, false),
            Field::new("scope", DataType::Utf8, false),
        ]);
        QueryResult::rows(
            schema,
            vec![
                Arc::new(StringArray::from(names)),
                Arc::new(StringArray::from(kinds)),
                Arc::new(StringArray::from(scopes)),
            ],
        )
    }

    /// The session's secret `name`, or else its user's persistent one, for ATTACH.
    pub(crate) fn secret(&self, session: &Session, name: &str) -> SqeResult<Secret> {
        let name = name.to_lowercase();
        if let Some(secret) = self.session.get(session, &name) {
            return Ok(secret);
        }
        self.persistent_of(session)?
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| s)
            .ok_or_else(|| {
                SqeError::new(
                    ErrorCode::NotFound,
                    format!("secret '{name}' does not exist"),
                )
            })
    }

    /// The first S3 secret of the session, or else of its user's persistent ones, by name.
    pub(crate) fn s3_secret(&self, session: &Session) -> SqeResult<Option<Secret>> {
        let own = self
            .session
            .of(session)
            .into_iter()
            .find(|(_, s)| s.kind == SecretKind::S3);
        if let Some((_, secret)) = own {
            return Ok(Some(secret));
        }
        Ok(self
            .persistent_of(session)?
            .into_iter()
            .find(|(_, s)| s.kind == SecretKind::S3)
            .map(|(_, s)| s))
    }

    /// The persistent secrets of the session's user.
    fn persistent_of(&self, session: &Session) -> SqeResult<Vec<(String, Secret)>> {
        let Some(store) = &self.persistent else {
            return Ok(Vec::new());
        };
        Ok(store
            .of(&session.principal.name)?
            .into_iter()
            .filter_map(|o| {
                let kind = SecretKind::parse(&o.kind)?;
                Some((
                    o.name,
                    Secret {
                        kind,
                        values: o.values,
                    },
                ))
            })
            .collect())
    }

    fn secret_store(&self) -> SqeResult<&SecretStore> {
        self.persistent.as_ref().ok_or_else(|| {
            SqeError::unsupported(
                "persistent secrets need a key to seal them with: set SQE_SECRETS_KEY for the shell, or [secrets] key_env on a server",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_s3_secret_gives_icebergs_storage_properties() {
        let secret = Secret {
            kind: SecretKind::S3,
            values: [("key_id", "ak"), ("secret", "sk"), ("url_style", "path")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let props = secret.storage_properties();
        assert_eq!(
            props.get("s3.secret-access-key").map(String::as_str),
            Some("sk")
        );
        assert_eq!(
            props.get("s3.path-style-access").map(String::as_str),
            Some("true")
        );
        assert!(!format!("{secret:?}").contains("sk\""));
        assert_eq!(secret.token(), None);
    }
}

//! The caller and the state of their conversation with SQE.

use std::collections::BTreeMap;
use std::fmt;

/// Who runs the query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub roles: Vec<String>,
}

impl Principal {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            roles: Vec::new(),
        }
    }

    /// Whether the principal holds one of `roles` (say, the configured admin roles).
    pub fn has_any_role(&self, roles: &[String]) -> bool {
        self.roles.iter().any(|r| roles.contains(r))
    }
}

/// What the caller's token grants (its OAuth scopes), for protocols that check them (MCP).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scopes(pub Vec<String>);

impl Scopes {
    pub fn has(&self, scope: &str) -> bool {
        self.0.iter().any(|s| s == scope)
    }
}

/// The caller's own credential (a bearer token), passed on to catalogs and object stores.
/// Its `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential(String);

impl Credential {
    pub fn bearer(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The secret itself, for the one place that sends it on.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credential(***)")
    }
}

/// A conversation: one per shell, Flight SQL session or Trino client.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    pub principal: Principal,
    pub credential: Option<Credential>,
    pub catalog: String,
    pub schema: String,
    /// IANA name or offset; `UTC` unless the client says otherwise.
    pub time_zone: String,
    /// Session properties (`SET SESSION`), by name.
    pub properties: BTreeMap<String, String>,
    /// What the client says it is (Trino's `X-Trino-Source`), for the query registry.
    pub source: Option<String>,
    /// Tags the client attached (Trino's `X-Trino-Client-Tags`).
    pub client_tags: Vec<String>,
    /// How the session reached SQE (`trino`, `flight-sql`, `embedded`), for logs.
    pub protocol: &'static str,
    /// The id the protocol gave the statement being run (Trino's query id), which the query
    /// registry and the log then use; the engine numbers statements without one.
    pub query_id: Option<String>,
}

impl Session {
    pub fn new(
        principal: Principal,
        catalog: impl Into<String>,
        schema: impl Into<String>,
    ) -> Self {
        Self {
            id: crate::random_handle(),
            principal,
            credential: None,
            catalog: catalog.into(),
            schema: schema.into(),
            time_zone: "UTC".to_string(),
            properties: BTreeMap::new(),
            source: None,
            client_tags: Vec::new(),
            protocol: "embedded",
            query_id: None,
        }
    }

    pub fn apply(&mut self, update: &SessionUpdate) {
        if let Some(catalog) = &update.catalog {
            self.catalog.clone_from(catalog);
        }
        if let Some(schema) = &update.schema {
            self.schema.clone_from(schema);
        }
        for (name, value) in &update.set_properties {
            self.properties.insert(name.clone(), value.clone());
        }
        for name in &update.reset_properties {
            self.properties.remove(name);
        }
    }
}

/// A change a statement made to its session: `USE catalog.schema`, `SET SESSION name = value`,
/// `RESET SESSION name`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionUpdate {
    pub catalog: Option<String>,
    pub schema: Option<String>,
    pub set_properties: BTreeMap<String, String>,
    pub reset_properties: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_debug_hides_the_token() {
        let c = Credential::bearer("s3cr3t");
        assert_eq!(format!("{c:?}"), "Credential(***)");
    }

    #[test]
    fn use_updates_only_what_it_names() {
        let mut s = Session::new(Principal::new("u"), "iceberg", "default");
        s.apply(&SessionUpdate {
            schema: Some("s".into()),
            ..SessionUpdate::default()
        });
        assert_eq!((s.catalog.as_str(), s.schema.as_str()), ("iceberg", "s"));
    }
}

//! The words every governance part speaks: a privilege, the object it is on, and the caller as
//! the policies see them. Kept apart from model.rs (SQE's own privilege rows) so that other
//! sources of policy (ranger.rs) use them without reaching into the model.

use std::collections::BTreeSet;

/// What a privilege allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Privilege {
    Select,
    Insert,
    Update,
    Delete,
    Drop,
    Create,
    /// Changing a table's definition (columns, properties, name). Masks, tags and row filters
    /// stay their owner's: ALTER does not let anyone unmask a column.
    Alter,
}

/// The privileges `ALL PRIVILEGES` stands for.
pub(crate) const GRANTABLE: [Privilege; 7] = [
    Privilege::Select,
    Privilege::Insert,
    Privilege::Update,
    Privilege::Delete,
    Privilege::Drop,
    Privilege::Create,
    Privilege::Alter,
];

impl Privilege {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Privilege::Select => "SELECT",
            Privilege::Insert => "INSERT",
            Privilege::Update => "UPDATE",
            Privilege::Delete => "DELETE",
            Privilege::Drop => "DROP",
            Privilege::Create => "CREATE",
            Privilege::Alter => "ALTER",
        }
    }

    pub(crate) fn parse(name: &str) -> Option<Self> {
        GRANTABLE.into_iter().find(|p| p.name() == name)
    }

    /// Trino's words for a refusal: "Cannot select from table c.s.t".
    pub(crate) fn refusal(self, object: &Object) -> String {
        let target = object.to_string();
        let kind = if object.table.is_some() {
            "table"
        } else {
            "schema"
        };
        let what = match self {
            Privilege::Select => format!("select from {kind} {target}"),
            Privilege::Insert => format!("insert into {kind} {target}"),
            Privilege::Update => format!("update {kind} {target}"),
            Privilege::Delete => format!("delete from {kind} {target}"),
            Privilege::Drop => format!("drop {kind} {target}"),
            Privilege::Create => format!("create tables in schema {target}"),
            Privilege::Alter => format!("alter {kind} {target}"),
        };
        format!("Access Denied: Cannot {what}")
    }
}

/// A schema (no table) or a table of a catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Object {
    pub catalog: String,
    pub schema: String,
    pub table: Option<String>,
}

impl Object {
    pub(crate) fn table(catalog: &str, schema: &str, table: &str) -> Self {
        Self {
            catalog: catalog.to_string(),
            schema: schema.to_string(),
            table: Some(table.to_string()),
        }
    }

    /// A whole catalog (its key: no schema, no table).
    pub(crate) fn catalog(catalog: &str) -> Self {
        Self {
            catalog: catalog.to_string(),
            schema: String::new(),
            table: None,
        }
    }

    pub(crate) fn schema(catalog: &str, schema: &str) -> Self {
        Self {
            catalog: catalog.to_string(),
            schema: schema.to_string(),
            table: None,
        }
    }

    /// The row key in the policy tables: the schema, and the table or `''` for the schema itself
    /// (kept apart: a schema or table name may hold a dot).
    pub(crate) fn key(&self) -> (String, String) {
        (self.schema.clone(), self.table.clone().unwrap_or_default())
    }
}

impl std::fmt::Display for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.table {
            Some(t) => write!(f, "{}.{}.{t}", self.catalog, self.schema),
            None if self.schema.is_empty() => write!(f, "{}", self.catalog),
            None => write!(f, "{}.{}", self.catalog, self.schema),
        }
    }
}

/// The caller, as the policies see them.
#[derive(Debug, Clone)]
pub(crate) struct Who {
    pub name: String,
    /// The token's roles and those granted in the catalog.
    pub roles: BTreeSet<String>,
    pub admin: bool,
}

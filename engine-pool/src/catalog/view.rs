//! Views as Iceberg's view spec keeps them: a metadata file holding each version's SQL (one
//! representation per dialect), the default catalog and namespace its names resolve in, and the
//! schema it had when it was created. SQE writes format version 1 with a `trino` representation,
//! as Trino's Iceberg connector does, so the files read the same in Trino, Spark and pyiceberg.
//!
//! iceberg-rust 0.10.1 reads and validates view metadata but keeps its builder private: a new
//! view's metadata is written here as the spec's JSON and read back through iceberg's types, and a
//! replaced view adds a version through [`ViewMetadata::into_builder`].

use std::collections::HashMap;

use iceberg::io::FileIO;
use iceberg::spec::{Schema, ViewMetadata, ViewRepresentation, ViewVersion};
use iceberg::{Error, ErrorKind, NamespaceIdent, Result};
use serde_json::json;

/// The dialect SQE writes its views' SQL in.
pub const DIALECT: &str = "trino";

/// A view as the engine uses it: what to plan and how its rows are named and typed.
#[derive(Debug, Clone)]
pub struct ViewDefinition {
    pub sql: String,
    /// Where a relation name without a catalog resolves (the view's own catalog when `None`).
    pub default_catalog: Option<String>,
    /// Where a relation name without a schema resolves.
    pub default_schema: String,
    /// The columns as the view was created: their names are the view's, whatever the query's
    /// columns are called now.
    pub schema: Schema,
    pub comment: Option<String>,
    /// Who created the view (Trino's `owner`), if the metadata says.
    pub owner: Option<String>,
}

/// What is kept of a new view or a new version of one.
#[derive(Debug, Clone)]
pub struct ViewChange {
    pub sql: String,
    pub default_catalog: String,
    pub default_schema: String,
    pub schema: Schema,
    pub comment: Option<String>,
    pub owner: String,
}

fn invalid(what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::DataInvalid, format!("view metadata: {what}"))
}

fn version_json(change: &ViewChange, version_id: i32, schema_id: i32) -> serde_json::Value {
    json!({
        "version-id": version_id,
        "schema-id": schema_id,
        "timestamp-ms": chrono::Utc::now().timestamp_millis(),
        "summary": {
            "engine-name": "sqe",
            "engine-version": env!("CARGO_PKG_VERSION"),
        },
        "representations": [{ "type": "sql", "sql": change.sql, "dialect": DIALECT }],
        "default-catalog": change.default_catalog,
        "default-namespace": [change.default_schema],
    })
}

fn properties(change: &ViewChange) -> HashMap<String, String> {
    let mut props = HashMap::from([("owner".to_string(), change.owner.clone())]);
    if let Some(c) = &change.comment {
        props.insert("comment".to_string(), c.clone());
    }
    props
}

/// The metadata of a new view at `location`.
pub fn new_metadata(location: &str, change: &ViewChange) -> Result<ViewMetadata> {
    let mut schema = serde_json::to_value(&change.schema).map_err(invalid)?;
    schema["schema-id"] = json!(0);
    let version = version_json(change, 1, 0);
    let metadata = json!({
        "view-uuid": uuid::Uuid::now_v7().to_string(),
        "format-version": 1,
        "location": location,
        "current-version-id": 1,
        "versions": [version],
        "version-log": [{ "version-id": 1, "timestamp-ms": version["timestamp-ms"] }],
        "schemas": [schema],
        "properties": properties(change),
    });
    serde_json::from_value(metadata).map_err(invalid)
}

/// `previous` with `change` as its new current version (CREATE OR REPLACE VIEW).
pub fn replaced_metadata(previous: ViewMetadata, change: &ViewChange) -> Result<ViewMetadata> {
    let next_id = previous
        .versions()
        .map(|v| v.version_id())
        .max()
        .unwrap_or(0)
        + 1;
    let version: ViewVersion =
        serde_json::from_value(version_json(change, next_id, -1)).map_err(invalid)?;
    let mut removed: Vec<String> = previous.properties().keys().cloned().collect();
    removed.retain(|k| k == "comment");
    Ok(previous
        .into_builder()
        .remove_properties(&removed)
        .set_properties(properties(change))?
        .set_current_version(version, change.schema.clone())?
        .build()?
        .metadata)
}

/// What the engine needs of a view's metadata: its SQL in SQE's dialect (or the only SQL it has).
pub fn definition(metadata: &ViewMetadata) -> Result<ViewDefinition> {
    let version = metadata.current_version();
    let sqls: Vec<_> = version
        .representations()
        .iter()
        .map(|r| match r {
            ViewRepresentation::Sql(s) => s,
        })
        .collect();
    let sql = sqls
        .iter()
        .find(|s| s.dialect.eq_ignore_ascii_case(DIALECT))
        .or_else(|| sqls.first())
        .ok_or_else(|| invalid("the view has no SQL"))?;
    let schema = version.schema(metadata)?;
    Ok(ViewDefinition {
        sql: sql.sql.clone(),
        default_catalog: version.default_catalog().cloned(),
        default_schema: namespace_text(version.default_namespace()),
        schema: schema.as_ref().clone(),
        comment: metadata.properties().get("comment").cloned(),
        owner: metadata.properties().get("owner").cloned(),
    })
}

fn namespace_text(ns: &NamespaceIdent) -> String {
    ns.join(".")
}

/// A REST catalog's `CreateViewRequest` for a new view named `name` (the catalog chooses where
/// its metadata goes and assigns the schema's id).
pub fn create_request(name: &str, change: &ViewChange) -> Result<serde_json::Value> {
    let mut schema = serde_json::to_value(&change.schema).map_err(invalid)?;
    schema["schema-id"] = json!(0);
    Ok(json!({
        "name": name,
        "schema": schema,
        "view-version": version_json(change, 1, 0),
        "properties": properties(change),
    }))
}

/// A REST catalog's `CommitViewRequest` that makes `change` the current version of `previous`
/// (CREATE OR REPLACE VIEW), if the view is still the one `previous` describes.
pub fn replace_request(
    namespace: &NamespaceIdent,
    name: &str,
    previous: &ViewMetadata,
    change: &ViewChange,
) -> Result<serde_json::Value> {
    let next_version = previous
        .versions()
        .map(|v| v.version_id())
        .max()
        .unwrap_or(0)
        + 1;
    let next_schema = previous
        .schemas_iter()
        .map(|s| s.schema_id())
        .max()
        .unwrap_or(0)
        + 1;
    let mut schema = serde_json::to_value(&change.schema).map_err(invalid)?;
    schema["schema-id"] = json!(next_schema);
    let mut updates = vec![
        json!({ "action": "add-schema", "schema": schema }),
        json!({ "action": "add-view-version", "view-version": version_json(change, next_version, -1) }),
        json!({ "action": "set-current-view-version", "view-version-id": -1 }),
        json!({ "action": "set-properties", "updates": properties(change) }),
    ];
    if change.comment.is_none() && previous.properties().contains_key("comment") {
        updates.push(json!({ "action": "remove-properties", "removals": ["comment"] }));
    }
    Ok(json!({
        "identifier": { "namespace": namespace.as_ref(), "name": name },
        "requirements": [{ "type": "assert-view-uuid", "uuid": previous.uuid().to_string() }],
        "updates": updates,
    }))
}

/// Where the next metadata file of a view at `location` goes.
pub fn metadata_path(location: &str, version: usize) -> String {
    format!(
        "{}/metadata/{version:05}-{}.metadata.json",
        location.trim_end_matches('/'),
        uuid::Uuid::now_v7()
    )
}

pub async fn write(file_io: &FileIO, path: &str, metadata: &ViewMetadata) -> Result<()> {
    let bytes = serde_json::to_vec(metadata).map_err(invalid)?;
    file_io.new_output(path)?.write(bytes.into()).await
}

/// Reads a view's metadata. A file that is not view metadata is the server's fault, not the
/// caller's (as a broken table file is).
pub async fn read(file_io: &FileIO, path: &str) -> Result<ViewMetadata> {
    let bytes = file_io.new_input(path)?.read().await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Error::new(
            ErrorKind::Unexpected,
            format!("view metadata {path} cannot be read: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{NestedField, PrimitiveType, Type};

    use super::*;

    fn change(sql: &str, comment: Option<&str>) -> ViewChange {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::optional(1, "a", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        ViewChange {
            sql: sql.to_string(),
            default_catalog: "iceberg".into(),
            default_schema: "sales".into(),
            schema,
            comment: comment.map(str::to_string),
            owner: "alice".into(),
        }
    }

    #[test]
    fn a_new_view_reads_back_and_a_replaced_one_keeps_its_history() {
        let first = new_metadata("/w/sales/v", &change("SELECT 1 AS a", Some("first")))
            .unwrap_or_else(|e| panic!("{e}"));
        let def = definition(&first).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(def.sql, "SELECT 1 AS a");
        assert_eq!(def.default_catalog.as_deref(), Some("iceberg"));
        assert_eq!(def.default_schema, "sales");
        assert_eq!(def.comment.as_deref(), Some("first"));
        assert_eq!(def.owner.as_deref(), Some("alice"));

        let second = replaced_metadata(first, &change("SELECT 2 AS a", None))
            .unwrap_or_else(|e| panic!("{e}"));
        let def = definition(&second).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(def.sql, "SELECT 2 AS a");
        assert_eq!(def.comment, None);
        assert_eq!(second.versions().len(), 2);
        assert_eq!(second.current_version_id(), 2);
        // Through JSON and back, as the catalog stores it.
        let json = serde_json::to_string(&second).unwrap_or_else(|e| panic!("{e}"));
        let back: ViewMetadata = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            definition(&back).map(|d| d.sql).ok().as_deref(),
            Some("SELECT 2 AS a")
        );
    }

    #[test]
    fn rest_requests_carry_the_spec_s_shapes() {
        let create = create_request("v", &change("SELECT 1 AS a", Some("first")))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(create["name"], "v");
        assert_eq!(create["schema"]["schema-id"], 0);
        assert_eq!(create["view-version"]["version-id"], 1);
        assert_eq!(
            create["view-version"]["default-namespace"],
            json!(["sales"])
        );
        assert_eq!(
            create["view-version"]["representations"],
            json!([{ "type": "sql", "sql": "SELECT 1 AS a", "dialect": "trino" }])
        );
        assert_eq!(
            create["properties"],
            json!({ "owner": "alice", "comment": "first" })
        );

        let first = new_metadata("/w/sales/v", &change("SELECT 1 AS a", Some("first")))
            .unwrap_or_else(|e| panic!("{e}"));
        let ns = NamespaceIdent::new("sales".into());
        let replace = replace_request(&ns, "v", &first, &change("SELECT 2 AS a", None))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            replace["requirements"],
            json!([{ "type": "assert-view-uuid", "uuid": first.uuid().to_string() }])
        );
        let actions: Vec<&str> = replace["updates"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|u| u["action"].as_str())
            .collect();
        assert_eq!(
            actions,
            [
                "add-schema",
                "add-view-version",
                "set-current-view-version",
                "set-properties",
                "remove-properties"
            ]
        );
        let updates = &replace["updates"];
        assert_eq!(updates[0]["schema"]["schema-id"], 1);
        assert_eq!(updates[1]["view-version"]["version-id"], 2);
        assert_eq!(updates[1]["view-version"]["schema-id"], -1);
        assert_eq!(updates[2]["view-version-id"], -1);
        assert_eq!(updates[4]["removals"], json!(["comment"]));
    }
}

//! SQE's MCP tools. Each call runs as the caller its request authenticated (the principal, the
//! caller's own token and its scopes, which the gateway's layer put in the HTTP request), through
//! the same `QueryService` as every other protocol: the same privileges, row filters and masks.

use std::sync::Arc;

use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use sqe_sessions::{Credential, Principal, QueryService, Scopes, Session, SqeError};

use crate::McpConfig;
use crate::results::{Bounds, Rows, collect};

/// One MCP session's handler (rmcp makes one per session); all of them share the service.
#[derive(Clone)]
pub(crate) struct SqeMcp {
    pub service: Arc<dyn QueryService>,
    pub config: Arc<McpConfig>,
}

/// The longest name a tool takes for a catalog, schema or table.
const MAX_NAME: usize = 255;

/// A tool's failure, shown to the agent as the tool's result (`isError`), never as a protocol
/// error.
struct Refusal(String);

impl From<SqeError> for Refusal {
    fn from(e: SqeError) -> Self {
        Refusal(format!("{}: {}", e.code().as_str(), e.message()))
    }
}

type ToolResult = Result<CallToolResult, Refusal>;

fn schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let value = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn table_properties(extra: Value) -> Value {
    let mut properties = json!({
        "catalog": {"type": "string", "description": "Catalog; the server's default catalog if omitted"},
        "schema": {"type": "string", "description": "Schema; `default` if omitted"},
        "table": {"type": "string", "description": "Table name"},
    });
    if let (Value::Object(p), Value::Object(e)) = (&mut properties, extra) {
        p.extend(e);
    }
    properties
}

fn read_only(tool: Tool) -> Tool {
    tool.with_annotations(
        ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .open_world(false),
    )
}

impl SqeMcp {
    fn tools(&self) -> Vec<Tool> {
        let sql = json!({"sql": {"type": "string", "description": "One SQL statement (Trino's dialect)"}});
        let limit =
            |what: &str| json!({"limit": {"type": "integer", "minimum": 1, "description": what}});
        let mut tools = vec![
            read_only(Tool::new(
                "list_catalogs",
                "List the catalogs you can query.",
                schema(json!({}), &[]),
            )),
            read_only(Tool::new(
                "list_schemas",
                "List the schemas of a catalog.",
                schema(
                    json!({"catalog": {"type": "string", "description": "Catalog; the server's default catalog if omitted"}}),
                    &[],
                ),
            )),
            read_only(Tool::new(
                "list_tables",
                "List the tables and views of a schema that you may see.",
                schema(
                    json!({
                        "catalog": {"type": "string", "description": "Catalog; the server's default catalog if omitted"},
                        "schema": {"type": "string", "description": "Schema; `default` if omitted"},
                    }),
                    &[],
                ),
            )),
            read_only(Tool::new(
                "describe_table",
                "Describe an Iceberg table: its columns and types, partitioning, properties and current snapshot.",
                schema(table_properties(json!({})), &["table"]),
            )),
            read_only(Tool::new(
                "table_snapshots",
                "List a table's Iceberg snapshots, newest first.",
                schema(
                    table_properties(limit("Most snapshots to list")),
                    &["table"],
                ),
            )),
            read_only(Tool::new(
                "sample_rows",
                "Read a few rows of a table (the rows and values you may see).",
                schema(
                    table_properties(limit("Rows to read (default 10)")),
                    &["table"],
                ),
            )),
            read_only(Tool::new(
                "table_stats",
                "A table's size from its Iceberg metadata: rows, data files and bytes.",
                schema(table_properties(json!({})), &["table"]),
            )),
            read_only(Tool::new(
                "explain_query",
                "Show the plan SQE would run for a read-only query, without running it.",
                schema(sql.clone(), &["sql"]),
            )),
            read_only(Tool::new(
                "execute_sql_readonly",
                "Run one read-only SQL statement (a query, EXPLAIN, SHOW or DESCRIBE) and return its rows, up to the server's bound.",
                schema(
                    {
                        let mut p = sql.clone();
                        if let (Value::Object(p), Value::Object(l)) = (
                            &mut p,
                            limit("Most rows to return (at most the server's bound)"),
                        ) {
                            p.extend(l);
                        }
                        p
                    },
                    &["sql"],
                ),
            )),
        ];
        if self.config.allow_writes {
            tools.push(
                Tool::new(
                    "execute_sql_change",
                    "Run one SQL statement that changes data or tables (INSERT, CREATE TABLE, ALTER, DROP, …).",
                    schema(sql, &["sql"]),
                )
                .with_annotations(ToolAnnotations::new().read_only(false).destructive(true)),
            );
        }
        tools
    }

    /// The caller of this request, as the gateway's layer authenticated it.
    fn session(&self, context: &RequestContext<RoleServer>) -> Result<(Session, Scopes), Refusal> {
        let parts = context
            .extensions
            .get::<Parts>()
            .ok_or_else(|| Refusal("no HTTP request to authenticate".into()))?;
        let principal = parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or_else(|| Refusal("UNAUTHENTICATED: no authenticated caller".into()))?;
        let mut session = Session::new(principal, &self.config.catalog, &self.config.schema);
        session.credential = parts.extensions.get::<Credential>().cloned();
        session.protocol = "mcp";
        session.source = Some("mcp".into());
        let scopes = parts
            .extensions
            .get::<Scopes>()
            .cloned()
            .unwrap_or_default();
        Ok((session, scopes))
    }

    async fn call(
        &self,
        name: &str,
        args: &JsonObject,
        session: Session,
        scopes: Scopes,
    ) -> ToolResult {
        let read = &self.config.read_scope;
        if name != "execute_sql_change" && !scopes.has(read) {
            return Err(Refusal(format!(
                "PERMISSION_DENIED: the token lacks the scope {read}"
            )));
        }
        let bound = self.bounds(args)?;
        match name {
            "list_catalogs" => self.answer(&session, "SHOW CATALOGS", bound).await,
            "list_schemas" => {
                let catalog = text_arg(args, "catalog")?.unwrap_or(session.catalog.clone());
                let sql = format!("SHOW SCHEMAS FROM {}", quote(&catalog));
                self.answer(&session, &sql, bound).await
            }
            "list_tables" => {
                let catalog = text_arg(args, "catalog")?.unwrap_or(session.catalog.clone());
                let schema = text_arg(args, "schema")?.unwrap_or(session.schema.clone());
                let sql = format!("SHOW TABLES FROM {}.{}", quote(&catalog), quote(&schema));
                self.answer(&session, &sql, bound).await
            }
            "describe_table" => self.describe(&session, args).await,
            "table_snapshots" => {
                let table = table_name(&session, args, Some("snapshots"))?;
                let sql = format!(
                    "SELECT committed_at, snapshot_id, parent_id, operation FROM {table} ORDER BY committed_at DESC, snapshot_id DESC"
                );
                self.answer(&session, &sql, bound).await
            }
            "sample_rows" => {
                let table = table_name(&session, args, None)?;
                let limit = int_arg(args, "limit")?.unwrap_or(10).min(bound.rows);
                let sql = format!("SELECT * FROM {table} LIMIT {limit}");
                self.answer(&session, &sql, bound).await
            }
            "table_stats" => {
                let table = table_name(&session, args, Some("files"))?;
                let sql = format!(
                    "SELECT coalesce(sum(record_count), 0) AS rows, count(*) AS files, coalesce(sum(file_size_in_bytes), 0) AS bytes FROM {table}"
                );
                self.answer(&session, &sql, bound).await
            }
            "explain_query" => {
                let sql = text_arg(args, "sql")?.ok_or_else(|| missing("sql"))?;
                let first = sql.split_whitespace().next().unwrap_or_default();
                if first.eq_ignore_ascii_case("analyze") || first.eq_ignore_ascii_case("explain") {
                    return Err(Refusal(
                        "INVALID_INPUT: explain_query takes the statement alone and never runs it; EXPLAIN ANALYZE goes to execute_sql_readonly".into(),
                    ));
                }
                let result = self
                    .service
                    .execute_read_only(&session, &format!("EXPLAIN {sql}"))
                    .await?;
                let plan = collect(result, bound).await?;
                Ok(with_structure(plan.lines(), plan.structured()))
            }
            "execute_sql_readonly" => {
                let sql = text_arg(args, "sql")?.ok_or_else(|| missing("sql"))?;
                let result = self.service.execute_read_only(&session, &sql).await?;
                respond(collect(result, bound).await?)
            }
            "execute_sql_change" if self.config.allow_writes => {
                let write = &self.config.write_scope;
                if !scopes.has(write) {
                    return Err(Refusal(format!(
                        "PERMISSION_DENIED: changes need the scope {write}, which the token lacks"
                    )));
                }
                if !session.principal.has_any_role(&self.config.write_roles) {
                    return Err(Refusal(format!(
                        "PERMISSION_DENIED: changes need one of the roles [{}], which {} does not hold",
                        self.config.write_roles.join(", "),
                        session.principal.name
                    )));
                }
                let sql = text_arg(args, "sql")?.ok_or_else(|| missing("sql"))?;
                let result = self.service.execute(&session, &sql).await?;
                respond(collect(result, bound).await?)
            }
            other => Err(Refusal(format!("INVALID_INPUT: no tool named '{other}'"))),
        }
    }

    /// The bounds of one answer: the server's, or fewer rows if the call asks.
    fn bounds(&self, args: &JsonObject) -> Result<Bounds, Refusal> {
        let rows = match int_arg(args, "limit")? {
            Some(n) => n.min(self.config.max_rows),
            None => self.config.max_rows,
        };
        Ok(Bounds {
            rows,
            bytes: self.config.max_bytes,
        })
    }

    async fn answer(&self, session: &Session, sql: &str, bound: Bounds) -> ToolResult {
        let result = self.service.execute(session, sql).await?;
        respond(collect(result, bound).await?)
    }

    /// Columns (with partitioning), properties and current snapshot; what the caller may not
    /// read of the metadata is left out with a note.
    async fn describe(&self, session: &Session, args: &JsonObject) -> ToolResult {
        let table = table_name(session, args, None)?;
        let bound = Bounds {
            rows: 10_000,
            bytes: self.config.max_bytes,
        };
        let described = collect(
            self.service
                .execute(session, &format!("DESCRIBE {table}"))
                .await?,
            bound,
        )
        .await?;
        let columns: Vec<Value> = described
            .rows()
            .iter()
            .map(|r| {
                json!({
                    "name": described.value(r, "Column"),
                    "type": described.value(r, "Type"),
                    "comment": described.value(r, "Comment"),
                })
            })
            .collect();
        let partitioning: Vec<String> = described
            .column_text("Extra")
            .into_iter()
            .filter(|e| e.starts_with("partition key"))
            .collect();
        let mut notes = Vec::new();
        let mut properties = serde_json::Map::new();
        let properties_sql = format!(
            "SELECT key, value FROM {} ORDER BY key",
            table_name(session, args, Some("properties"))?
        );
        match self.service.execute(session, &properties_sql).await {
            Ok(result) => {
                let rows = collect(result, bound).await?;
                for (k, v) in rows
                    .column_text("key")
                    .into_iter()
                    .zip(rows.column_text("value"))
                {
                    properties.insert(k, Value::String(v));
                }
            }
            Err(e) => notes.push(format!("properties: {}", e.message())),
        }
        let snapshot_sql = format!(
            "SELECT snapshot_id, committed_at, operation FROM {} ORDER BY committed_at DESC, snapshot_id DESC LIMIT 1",
            table_name(session, args, Some("snapshots"))?
        );
        let snapshot = match self.service.execute(session, &snapshot_sql).await {
            Ok(result) => {
                let rows = collect(result, bound).await?;
                rows.rows()
                    .first()
                    .map(|r| rows.object(r))
                    .unwrap_or(Value::Null)
            }
            Err(e) => {
                notes.push(format!("current snapshot: {}", e.message()));
                Value::Null
            }
        };
        let mut value = json!({
            "table": table,
            "columns": columns,
            "partitioning": partitioning,
            "properties": properties,
            "current_snapshot": snapshot,
        });
        if !notes.is_empty() {
            value["notes"] = json!(notes);
        }
        let mut text = described.text();
        if !partitioning.is_empty() {
            text.push_str(&format!("\npartitioning: {}", partitioning.join(", ")));
        }
        if !properties.is_empty() {
            let list: Vec<String> = properties
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect();
            text.push_str(&format!("\nproperties: {}", list.join(", ")));
        }
        if !value["current_snapshot"].is_null() {
            text.push_str(&format!(
                "\ncurrent snapshot: {}",
                value["current_snapshot"]
            ));
        }
        for note in &notes {
            text.push_str(&format!("\nnot shown: {note}"));
        }
        Ok(with_structure(text, value))
    }
}

fn with_structure(text: String, value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result
}

fn respond(rows: Rows) -> ToolResult {
    Ok(with_structure(rows.text(), rows.structured()))
}

fn missing(name: &str) -> Refusal {
    Refusal(format!("INVALID_INPUT: the argument '{name}' is required"))
}

fn text_arg(args: &JsonObject, name: &str) -> Result<Option<String>, Refusal> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Refusal(format!(
            "INVALID_INPUT: the argument '{name}' must be a string"
        ))),
    }
}

fn int_arg(args: &JsonObject, name: &str) -> Result<Option<usize>, Refusal> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
            _ => Err(Refusal(format!(
                "INVALID_INPUT: the argument '{name}' must be a positive integer"
            ))),
        },
    }
}

/// A quoted identifier.
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The table the arguments name, quoted; `metadata` names one of its metadata tables
/// (`t$snapshots`).
fn table_name(
    session: &Session,
    args: &JsonObject,
    metadata: Option<&str>,
) -> Result<String, Refusal> {
    let catalog = text_arg(args, "catalog")?.unwrap_or(session.catalog.clone());
    let schema = text_arg(args, "schema")?.unwrap_or(session.schema.clone());
    let table = text_arg(args, "table")?.ok_or_else(|| missing("table"))?;
    for (what, name) in [
        ("catalog", &catalog),
        ("schema", &schema),
        ("table", &table),
    ] {
        if name.is_empty() || name.len() > MAX_NAME || name.contains('$') {
            return Err(Refusal(format!(
                "INVALID_INPUT: '{what}' must be a name of 1 to {MAX_NAME} characters without '$'"
            )));
        }
    }
    let table = match metadata {
        Some(kind) => format!("{table}${kind}"),
        None => table,
    };
    Ok(format!(
        "{}.{}.{}",
        quote(&catalog),
        quote(&schema),
        quote(&table)
    ))
}

impl ServerHandler for SqeMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("sqe", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "SQE serves Apache Iceberg tables with SQL (Trino's dialect). Find tables with \
                 list_catalogs, list_schemas and list_tables, look at them with describe_table, \
                 sample_rows and table_stats, and query them with execute_sql_readonly. You see \
                 what your user may see: rows and columns may be filtered or masked.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if !self.tools().iter().any(|t| t.name == name) {
            return Err(ErrorData::invalid_params(
                format!("no tool named '{name}'"),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        let outcome = match self.session(&context) {
            Ok((session, scopes)) => {
                let principal = session.principal.name.clone();
                let outcome = self.call(&name, &args, session, scopes).await;
                if let Err(Refusal(message)) = &outcome {
                    tracing::info!(tool = %name, principal = %principal, refusal = %message, "mcp tool refused");
                }
                outcome
            }
            Err(refusal) => Err(refusal),
        };
        Ok(match outcome {
            Ok(result) => result,
            Err(Refusal(message)) => CallToolResult::error(vec![ContentBlock::text(message)]),
        }
        .into())
    }
}

//! What DuckDB's `ATTACH 'quack:…'` asks of a server (WIRE.md §6), answered on SQE's engine
//! without teaching SQE's dialect DuckDB's: the two catalog queries it sends on attaching, the
//! scans it sends for attached tables (`SELECT #2, #1 FROM t`, `SELECT NULL::BOOLEAN FROM t`),
//! `FROM s.v` for views, and BEGIN / COMMIT / ROLLBACK. Only these exact shapes are taken; any
//! other statement goes to the engine as written.
//!
//! Attaching lists the session catalog's tables as DuckDB `CREATE TABLE` text, with the columns the
//! caller may read and the DuckDB types their values will arrive as. The listing is kept with the
//! Quack session (the [`Directory`]) because DuckDB's scans name a table without its schema and
//! number its columns by their place in that text.

use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use futures::StreamExt;
use sqe_sessions::{ErrorCode, QueryResult, QueryService, Session, SqeError, SqeResult};

use crate::arrow_out::logical_type;
use crate::chunk::LogicalType;
use sqe_sessions::quote_identifier;

/// What DuckDB sent, when it is one of the shapes its ATTACH sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// The schemas of the attached catalog.
    Schemata,
    /// Its tables as `CREATE TABLE` text, and its views.
    Tables,
    /// `SELECT #i, NULL::T, … FROM t`, or `FROM t` (every column): a scan of a listed table.
    Scan {
        table: String,
        items: Vec<Item>,
    },
    /// `FROM s.v`: a listed view (or anything else named with its schema).
    From {
        name: Vec<String>,
    },
    Begin,
    Commit,
    Rollback,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// `#n`: the table's n-th listed column (1-based).
    Column(usize),
    /// `NULL::TYPE` (what a count or a row id reads).
    Null(String),
}

const SCHEMATA: &str = "SELECT catalog_name, schema_name FROM information_schema.schemata \
    WHERE catalog_name NOT IN ('system', 'temp') ORDER BY ALL";
const TABLES: &str = "SELECT schema_name, sql, 'table' FROM duckdb_tables() UNION ALL \
    SELECT schema_name, view_name, 'view' FROM duckdb_views()";

/// The shape of `sql`, if it is one DuckDB's ATTACH sends.
pub fn recognize(sql: &str) -> Option<Asked> {
    let words = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    let words = words.trim_end_matches(';').trim_end();
    if words == SCHEMATA {
        return Some(Asked::Schemata);
    }
    if words == TABLES {
        return Some(Asked::Tables);
    }
    match words.to_ascii_uppercase().as_str() {
        "BEGIN" | "BEGIN TRANSACTION" => return Some(Asked::Begin),
        "COMMIT" => return Some(Asked::Commit),
        "ROLLBACK" => return Some(Asked::Rollback),
        _ => {}
    }
    scan(words)
}

/// `[SELECT item, … ] FROM name[.name]` with items `#n` or `NULL::TYPE`.
fn scan(sql: &str) -> Option<Asked> {
    let mut items = Vec::new();
    let mut rest = sql;
    if let Some(list) = strip_word(rest, "SELECT") {
        rest = list;
        loop {
            rest = rest.trim_start();
            if let Some(digits) = rest.strip_prefix('#') {
                let end = digits
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(digits.len());
                let n: usize = digits[..end].parse().ok().filter(|n| *n >= 1)?;
                items.push(Item::Column(n));
                rest = &digits[end..];
            } else if rest
                .get(..6)
                .is_some_and(|h| h.eq_ignore_ascii_case("NULL::"))
            {
                let ty = &rest[6..];
                let end = ty
                    .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .unwrap_or(ty.len());
                if end == 0 {
                    return None;
                }
                items.push(Item::Null(ty[..end].to_ascii_uppercase()));
                rest = &ty[end..];
            } else {
                return None;
            }
            match rest.trim_start().strip_prefix(',') {
                Some(more) => rest = more,
                None => break,
            }
        }
    }
    let mut rest = strip_word(rest.trim_start(), "FROM")?.trim_start();
    let mut name = Vec::new();
    loop {
        let (part, after) = identifier(rest)?;
        name.push(part);
        match after.strip_prefix('.') {
            Some(more) => rest = more,
            None if after.is_empty() => break,
            None => return None,
        }
    }
    match (name.len(), items.is_empty() && !sql.starts_with(['S', 's'])) {
        (1, _) => Some(Asked::Scan {
            table: name.remove(0),
            items,
        }),
        (2, true) => Some(Asked::From { name }),
        _ => None,
    }
}

fn strip_word<'a>(sql: &'a str, word: &str) -> Option<&'a str> {
    let head = sql.get(..word.len())?;
    let rest = &sql[word.len()..];
    (head.eq_ignore_ascii_case(word) && rest.starts_with(' ')).then_some(rest)
}

/// A bare or double-quoted identifier at the start of `sql`, and what follows it.
fn identifier(sql: &str) -> Option<(String, &str)> {
    if let Some(quoted) = sql.strip_prefix('"') {
        let mut name = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            if c == '"' {
                if quoted[i + 1..].starts_with('"') {
                    name.push('"');
                    chars.next();
                } else {
                    return Some((name, &quoted[i + 1..]));
                }
            } else {
                name.push(c);
            }
        }
        return None;
    }
    let end = sql
        .find(|c: char| !c.is_alphanumeric() && c != '_')
        .unwrap_or(sql.len());
    let first = sql.chars().next()?;
    (end > 0 && !first.is_ascii_digit()).then(|| (sql[..end].to_lowercase(), &sql[end..]))
}

/// A table as an ATTACH listed it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub schema: String,
    pub name: String,
    /// The columns the caller may read, with the DuckDB types their values arrive as.
    pub columns: Vec<(String, LogicalType)>,
}

/// What an ATTACH listed of the session's catalog.
#[derive(Debug, Clone, Default)]
pub struct Directory {
    pub tables: Vec<Listed>,
    pub views: Vec<(String, String)>,
}

impl Directory {
    /// The catalog's tables and views, as `session` may see them. A table whose columns cannot be
    /// read (a caller who may only write to it, a broken table) is left out.
    pub async fn list(service: &dyn QueryService, session: &Session) -> SqeResult<Self> {
        let catalog = &session.catalog;
        let listed = rows(
            service,
            session,
            &format!(
                "SELECT table_schema, table_name, table_type FROM information_schema.tables \
                 WHERE table_catalog = {} AND table_schema <> 'information_schema' \
                 ORDER BY table_schema, table_name",
                literal(catalog)
            ),
        )
        .await?;
        let mut directory = Directory::default();
        for row in listed {
            let [schema, name, kind] = <[String; 3]>::try_from(row).unwrap_or_default();
            if kind == "VIEW" {
                directory.views.push((schema, name));
                continue;
            }
            match columns(service, session, &schema, &name).await {
                Ok(columns) if !columns.is_empty() => directory.tables.push(Listed {
                    schema,
                    name,
                    columns,
                }),
                Ok(_) => {}
                Err(e) => tracing::debug!(
                    "quack: {catalog}.{schema}.{name} is not listed for {}: {}",
                    session.principal.name,
                    e.message()
                ),
            }
        }
        Ok(directory)
    }

    /// The answer to DuckDB's tables query: (schema, `CREATE TABLE` text, 'table') for each table
    /// and (schema, name, 'view') for each view.
    pub fn answer(&self) -> SqeResult<QueryResult> {
        let mut schemas = Vec::new();
        let mut texts = Vec::new();
        let mut kinds = Vec::new();
        for table in &self.tables {
            let columns: Vec<String> = table
                .columns
                .iter()
                .map(|(name, ty)| format!("{} {}", quote_identifier(name), ty.sql()))
                .collect();
            schemas.push(table.schema.clone());
            texts.push(format!(
                "CREATE TABLE {}({});",
                quote_identifier(&table.name),
                columns.join(", ")
            ));
            kinds.push("table");
        }
        for (schema, view) in &self.views {
            schemas.push(schema.clone());
            texts.push(view.clone());
            kinds.push("view");
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("schema_name", DataType::Utf8, false),
            Field::new("sql", DataType::Utf8, false),
            Field::new("'table'", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(schemas)),
                Arc::new(StringArray::from(texts)),
                Arc::new(StringArray::from(kinds)),
            ],
        )
        .map_err(|e| SqeError::internal(e.to_string()))?;
        Ok(QueryResult {
            schema,
            batches: futures::stream::iter([Ok(batch)]).boxed(),
            update_count: None,
            session_update: None,
        })
    }

    /// The table a scan names: DuckDB sends no schema, so the name is looked for in the session's
    /// schema first, then in any other, as long as only one holds it.
    pub fn find(&self, name: &str, default_schema: &str) -> Result<Option<&Listed>, String> {
        let matching: Vec<&Listed> = self.tables.iter().filter(|t| t.name == name).collect();
        if let Some(table) = matching.iter().find(|t| t.schema == default_schema) {
            return Ok(Some(table));
        }
        match matching.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            several => Err(format!(
                "table '{name}' is in several schemas ({}) and DuckDB's Quack client names no \
                 schema when it scans; query it with quack_query or r.query('…') instead",
                several
                    .iter()
                    .map(|t| t.schema.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// A listed table by schema and name.
    pub fn get(&self, schema: &str, name: &str) -> Option<&Listed> {
        self.tables
            .iter()
            .find(|t| t.schema == schema && t.name == name)
    }
}

impl Listed {
    /// SQE's statement for a scan of this table, and the DuckDB type each output column must
    /// have (None where DuckDB fixed it itself, as in `NULL::BOOLEAN`).
    pub fn scan(&self, catalog: &str, items: &[Item]) -> Result<String, String> {
        let all: Vec<Item> = (1..=self.columns.len()).map(Item::Column).collect();
        let items = if items.is_empty() { &all } else { items };
        let mut list = Vec::with_capacity(items.len());
        for item in items {
            list.push(match item {
                Item::Column(n) => {
                    let (name, _) = self.columns.get(n - 1).ok_or_else(|| {
                        format!(
                            "column #{n} of {}.{}, which has {} columns listed",
                            self.schema,
                            self.name,
                            self.columns.len()
                        )
                    })?;
                    quote_identifier(name)
                }
                Item::Null(ty) => format!("CAST(NULL AS {})", null_type(ty)?),
            });
        }
        Ok(format!(
            "SELECT {} FROM {}.{}.{}",
            list.join(", "),
            quote_identifier(catalog),
            quote_identifier(&self.schema),
            quote_identifier(&self.name)
        ))
    }

    /// The DuckDB types a scan's output columns must arrive as (those of the listing).
    pub fn expected(&self, items: &[Item]) -> Vec<Option<LogicalType>> {
        if items.is_empty() {
            return self.columns.iter().map(|(_, t)| Some(t.clone())).collect();
        }
        items
            .iter()
            .map(|item| match item {
                Item::Column(n) => self.columns.get(n - 1).map(|(_, t)| t.clone()),
                Item::Null(_) => None,
            })
            .collect()
    }
}

/// The SQE type of DuckDB's `NULL::TYPE` in a scan (what a count or a row id reads).
fn null_type(ty: &str) -> Result<&'static str, String> {
    Ok(match ty {
        "BOOLEAN" | "BOOL" => "BOOLEAN",
        "BIGINT" | "INT8" => "BIGINT",
        "INTEGER" | "INT" | "INT4" => "INTEGER",
        "VARCHAR" => "VARCHAR",
        other => return Err(format!("NULL::{other} is not read over Quack")),
    })
}

/// The columns of `schema.table` the caller may read, with their DuckDB types.
async fn columns(
    service: &dyn QueryService,
    session: &Session,
    schema: &str,
    table: &str,
) -> SqeResult<Vec<(String, LogicalType)>> {
    let name = [session.catalog.as_str(), schema, table]
        .map(quote_identifier)
        .join(".");
    let arrow = match service
        .execute(session, &format!("SELECT * FROM {name} LIMIT 0"))
        .await
    {
        Ok(result) => result.schema,
        Err(e) if e.code() == ErrorCode::PermissionDenied => {
            // A reader of some columns: the ones listed for them.
            let listed = rows(
                service,
                session,
                &format!(
                    "SELECT column_name FROM information_schema.columns WHERE table_catalog = {} \
                     AND table_schema = {} AND table_name = {} ORDER BY ordinal_position",
                    literal(&session.catalog),
                    literal(schema),
                    literal(table)
                ),
            )
            .await?;
            if listed.is_empty() {
                return Ok(Vec::new());
            }
            let list: Vec<String> = listed.iter().map(|r| quote_identifier(&r[0])).collect();
            service
                .execute(
                    session,
                    &format!("SELECT {} FROM {name} LIMIT 0", list.join(", ")),
                )
                .await?
                .schema
        }
        Err(e) => return Err(e),
    };
    // A column of a type DuckDB has no counterpart for is left out (the scan names columns).
    Ok(arrow
        .fields()
        .iter()
        .filter_map(|f| Some((f.name().clone(), logical_type(f).ok()?)))
        .collect())
}

/// A string literal in SQE's SQL.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The rows of a small result, every value as text ("" for NULL).
async fn rows(
    service: &dyn QueryService,
    session: &Session,
    sql: &str,
) -> SqeResult<Vec<Vec<String>>> {
    let mut result = service.execute(session, sql).await?;
    let mut rows = Vec::new();
    while let Some(batch) = result.batches.next().await {
        let batch = batch?;
        let columns = batch
            .columns()
            .iter()
            .map(|c| arrow::compute::cast(c, &DataType::Utf8))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SqeError::internal(e.to_string()))?;
        for i in 0..batch.num_rows() {
            rows.push(
                columns
                    .iter()
                    .map(|c| {
                        let c = c.as_string::<i32>();
                        if c.is_null(i) {
                            String::new()
                        } else {
                            c.value(i).to_string()
                        }
                    })
                    .collect(),
            );
        }
    }
    Ok(rows)
}

/// The answer to DuckDB's schemata query: (catalog, schema) for each schema of the session's
/// catalog the caller sees.
pub async fn schemata(service: &dyn QueryService, session: &Session) -> SqeResult<QueryResult> {
    service
        .execute(
            session,
            &format!(
                "SELECT catalog_name, schema_name FROM information_schema.schemata \
                 WHERE catalog_name = {} AND schema_name <> 'information_schema' ORDER BY 1, 2",
                literal(&session.catalog)
            ),
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shapes_duckdb_sends_are_recognized() {
        assert_eq!(
            recognize(
                "\nSELECT catalog_name, schema_name\nFROM information_schema.schemata\nWHERE catalog_name NOT IN ('system', 'temp')\nORDER BY ALL\n\t"
            ),
            Some(Asked::Schemata)
        );
        assert_eq!(
            recognize(
                "\nSELECT schema_name, sql, 'table'\nFROM duckdb_tables()\nUNION ALL\nSELECT schema_name, view_name, 'view'\nFROM duckdb_views()\n\t"
            ),
            Some(Asked::Tables)
        );
        assert_eq!(
            recognize("SELECT #2, #1 FROM t"),
            Some(Asked::Scan {
                table: "t".into(),
                items: vec![Item::Column(2), Item::Column(1)]
            })
        );
        assert_eq!(
            recognize("SELECT NULL::BOOLEAN FROM \"Big \"\"One\"\"\""),
            Some(Asked::Scan {
                table: "Big \"One\"".into(),
                items: vec![Item::Null("BOOLEAN".into())]
            })
        );
        assert_eq!(
            recognize("FROM t"),
            Some(Asked::Scan {
                table: "t".into(),
                items: vec![]
            })
        );
        assert_eq!(
            recognize("FROM main.v"),
            Some(Asked::From {
                name: vec!["main".into(), "v".into()]
            })
        );
        assert_eq!(recognize("BEGIN TRANSACTION"), Some(Asked::Begin));
        assert_eq!(recognize("COMMIT"), Some(Asked::Commit));
        assert_eq!(recognize("rollback"), Some(Asked::Rollback));
        // Everything else is SQE's to run.
        for other in [
            "SELECT 1",
            "SELECT #1 FROM t WHERE a = 1",
            "SELECT #0 FROM t",
            "SELECT #1, FROM t",
            "SELECT a FROM t",
            "SELECT #1 FROM a.b",
            "FROM a.b.c",
            "FROM \"unterminated",
            "SELECT NULL:: FROM t",
            "FROM 1t",
            "SELECT \"Größe\" FROM t",
            "SELECT #1, Größe FROM t",
        ] {
            assert_eq!(recognize(other), None, "{other}");
        }
    }

    #[test]
    fn scans_name_listed_columns_and_tables() {
        let int = LogicalType::simple(crate::chunk::id::INTEGER);
        let directory = Directory {
            tables: vec![
                Listed {
                    schema: "s".into(),
                    name: "t".into(),
                    columns: vec![("a".into(), int.clone()), ("B c".into(), int.clone())],
                },
                Listed {
                    schema: "default".into(),
                    name: "t".into(),
                    columns: vec![("x".into(), int.clone())],
                },
                Listed {
                    schema: "u".into(),
                    name: "t".into(),
                    columns: vec![],
                },
            ],
            views: vec![],
        };
        let t = directory
            .find("t", "s")
            .ok()
            .flatten()
            .map(|t| t.schema.as_str());
        assert_eq!(t, Some("s"));
        let Err(e) = directory.find("t", "elsewhere") else {
            panic!("ambiguous");
        };
        assert!(
            e.starts_with("table 't' is in several schemas (s, default, u)"),
            "{e}"
        );
        let s = directory.get("s", "t").map(|t| {
            (
                t.scan("iceberg", &[Item::Column(2), Item::Null("BOOLEAN".into())]),
                t.scan("iceberg", &[]),
                t.scan("iceberg", &[Item::Column(3)]),
            )
        });
        assert_eq!(
            s,
            Some((
                Ok("SELECT \"B c\", CAST(NULL AS BOOLEAN) FROM \"iceberg\".\"s\".\"t\"".into()),
                Ok("SELECT \"a\", \"B c\" FROM \"iceberg\".\"s\".\"t\"".into()),
                Err("column #3 of s.t, which has 2 columns listed".into())
            ))
        );
    }
}

//! A sqllogictest connection over the Trino HTTP protocol: it POSTs each statement, follows `nextUri`,
//! keeps the session the server reports (X-Trino-Set-Catalog/Schema), and prints values the way the
//! embedded runner does, so the same `.slt` files check both.

use serde_json::Value;
use sqe_sessions::SqeError;
use sqllogictest::{DBOutput, DefaultColumnType};

pub struct TrinoDb {
    http: reqwest::Client,
    base: String,
    user: String,
    catalog: String,
    schema: String,
    /// Session properties, kept from X-Trino-Set-Session / X-Trino-Clear-Session as the trino
    /// client keeps them, and sent back in X-Trino-Session.
    properties: std::collections::BTreeMap<String, String>,
}

impl TrinoDb {
    pub fn new(base: String, user: &str, catalog: &str, schema: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            base,
            user: user.to_string(),
            catalog: catalog.to_string(),
            schema: schema.to_string(),
            properties: Default::default(),
        }
    }

    fn apply_session_headers(&mut self, headers: &reqwest::header::HeaderMap) {
        if let Some(c) = headers
            .get("x-trino-set-catalog")
            .and_then(|v| v.to_str().ok())
        {
            self.catalog = c.to_string();
        }
        if let Some(s) = headers
            .get("x-trino-set-schema")
            .and_then(|v| v.to_str().ok())
        {
            self.schema = s.to_string();
        }
        for v in headers.get_all("x-trino-set-session") {
            if let Some((k, v)) = v.to_str().ok().and_then(|v| v.split_once('=')) {
                let v = urlencoding::decode(v)
                    .map(|s| s.into_owned())
                    .unwrap_or_default();
                self.properties.insert(k.to_string(), v);
            }
        }
        for v in headers.get_all("x-trino-clear-session") {
            if let Ok(k) = v.to_str() {
                self.properties.remove(k);
            }
        }
    }
}

fn http_error(e: reqwest::Error) -> SqeError {
    SqeError::internal(format!("HTTP: {e}"))
}

/// A response's JSON page; anything else is an error with the status and body.
async fn json_page(response: reqwest::Response) -> Result<Value, SqeError> {
    let status = response.status();
    let body = response.text().await.map_err(http_error)?;
    serde_json::from_str(&body)
        .map_err(|e| SqeError::internal(format!("HTTP {status}, not a JSON page ({e}): {body}")))
}

/// Trino's `2026-01-02 11:00:00.120000[ zone]` in Arrow's display form `2026-01-02T11:00:00.12[Z]`:
/// a zone (`+01:00`, `UTC`, `Asia/Tokyo`) as the offset it has at that time.
fn arrow_timestamp(s: &str) -> String {
    let (stamp, zone) = match s.rsplit_once(' ') {
        Some((a, z)) if z.starts_with('+') || z.starts_with('-') => (a, Some(z.to_string())),
        Some((a, z)) if z.contains(|c: char| c.is_ascii_alphabetic()) => {
            let offset = z.parse::<arrow::array::timezone::Tz>().ok().and_then(|tz| {
                let local =
                    chrono::NaiveDateTime::parse_from_str(a, "%Y-%m-%d %H:%M:%S%.f").ok()?;
                let t = chrono::TimeZone::from_local_datetime(&tz, &local).earliest()?;
                Some(t.format("%:z").to_string())
            });
            (a, offset.or_else(|| Some(z.to_string())))
        }
        _ => (s, None),
    };
    let mut out = stamp.replacen(' ', "T", 1);
    if let Some((whole, frac)) = out.clone().split_once('.') {
        let frac = frac.trim_end_matches('0');
        out = if frac.is_empty() {
            whole.to_string()
        } else {
            format!("{whole}.{frac}")
        };
    }
    match zone.as_deref() {
        Some("+00:00") => format!("{out}Z"),
        Some(z) => format!("{out}{z}"),
        None => out,
    }
}

fn arrow_time(s: &str) -> String {
    match s.split_once('.') {
        Some((whole, frac)) if frac.trim_end_matches('0').is_empty() => whole.to_string(),
        Some((whole, frac)) => format!("{whole}.{}", frac.trim_end_matches('0')),
        None => s.to_string(),
    }
}

/// A value as Arrow displays it, given its Trino type name.
fn display(value: &Value, ty: &str) -> String {
    match value {
        Value::Null => "NULL".to_string(),
        Value::String(s) if ty.starts_with("timestamp") => arrow_timestamp(s),
        Value::String(s) if ty.starts_with("time") => arrow_time(s),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let inner = ty
                .strip_prefix("array(")
                .and_then(|t| t.strip_suffix(')'))
                .unwrap_or("");
            let parts: Vec<String> = items.iter().map(|v| display(v, inner)).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}: {}", display(v, "")))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        other => other.to_string(),
    }
}

fn cell(value: &Value, ty: &str) -> String {
    match display(value, ty) {
        s if s.is_empty() => "(empty)".to_string(),
        s => s,
    }
}

#[async_trait::async_trait]
impl sqllogictest::AsyncDB for TrinoDb {
    type Error = SqeError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SqeError> {
        let response = self
            .http
            .post(format!("{}/v1/statement", self.base))
            .header("X-Trino-User", &self.user)
            .header("X-Trino-Catalog", &self.catalog)
            .header("X-Trino-Schema", &self.schema)
            .header(
                "X-Trino-Session",
                self.properties
                    .iter()
                    .map(|(k, v)| format!("{k}={}", urlencoding::encode(v)))
                    .collect::<Vec<_>>()
                    .join(","),
            )
            .body(sql.to_string())
            .send()
            .await
            .map_err(http_error)?;
        let mut page = json_page(response).await?;
        let mut columns: Vec<(String, String)> = Vec::new();
        let mut rows: Vec<Vec<String>> = Vec::new();
        loop {
            if let Some(error) = page.get("error") {
                let message = error
                    .get("message")
                    .and_then(|m| m.as_str())
                    .unwrap_or("query failed");
                return Err(SqeError::invalid(message));
            }
            if columns.is_empty()
                && let Some(cols) = page.get("columns").and_then(|c| c.as_array())
            {
                columns = cols
                    .iter()
                    .map(|c| {
                        let name = c
                            .get("name")
                            .and_then(|n| n.as_str())
                            .unwrap_or_default()
                            .to_string();
                        let ty = c
                            .get("type")
                            .and_then(|t| t.as_str())
                            .unwrap_or_default()
                            .to_string();
                        (name, ty)
                    })
                    .collect();
            }
            if let Some(data) = page.get("data").and_then(|d| d.as_array()) {
                for row in data {
                    let values = row.as_array().cloned().unwrap_or_default();
                    rows.push(
                        values
                            .iter()
                            .zip(&columns)
                            .map(|(v, (_, ty))| cell(v, ty))
                            .collect(),
                    );
                }
            }
            let Some(next) = page
                .get("nextUri")
                .and_then(|n| n.as_str())
                .map(str::to_string)
            else {
                break;
            };
            // As the trino clients do, every request names the user; a page is its owner's only.
            let response = self
                .http
                .get(next)
                .header("X-Trino-User", &self.user)
                .send()
                .await
                .map_err(http_error)?;
            self.apply_session_headers(response.headers());
            page = json_page(response).await?;
        }
        if let Some(count) = page.get("updateCount").and_then(|c| c.as_u64()) {
            return Ok(DBOutput::StatementComplete(count));
        }
        let ddl =
            page.get("updateType").is_some() && columns.len() == 1 && columns[0].0 == "result";
        if ddl {
            return Ok(DBOutput::StatementComplete(0));
        }
        Ok(DBOutput::Rows {
            types: vec![DefaultColumnType::Any; columns.len()],
            rows,
        })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "sqe-trino"
    }

    async fn sleep(dur: std::time::Duration) {
        tokio::time::sleep(dur).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trino_values_print_like_arrow() {
        assert_eq!(
            arrow_timestamp("2026-01-02 11:00:00.000000"),
            "2026-01-02T11:00:00"
        );
        assert_eq!(
            arrow_timestamp("2026-01-02 11:00:00.123000 +00:00"),
            "2026-01-02T11:00:00.123Z"
        );
        assert_eq!(
            display(&serde_json::json!(["a", null]), "array(varchar)"),
            "[a, NULL]"
        );
    }
}

//! Trino's client-side prepared statements: PREPARE / EXECUTE … USING / EXECUTE IMMEDIATE /
//! DEALLOCATE PREPARE. Trino clients keep prepared statements themselves and send them back in the
//! `X-Trino-Prepared-Statement` header, so this is text handling in the protocol, not engine state.

use sqe_sessions::bind_parameters;

/// What a statement asks of the protocol layer.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientStatement {
    /// Run this SQL.
    Run(String),
    /// `PREPARE name FROM sql`: remember `sql` under `name` (sent back as X-Trino-Added-Prepare).
    Prepare { name: String, sql: String },
    /// `DEALLOCATE PREPARE name`.
    Deallocate(String),
}

/// Splits at top-level commas, outside quotes and parentheses.
fn split_top_level(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    for c in s.chars() {
        match quote {
            Some(q) => {
                current.push(c);
                if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    current.push(c);
                }
                '(' | '[' => {
                    depth += 1;
                    current.push(c);
                }
                ')' | ']' => {
                    depth -= 1;
                    current.push(c);
                }
                ',' if depth == 0 => out.push(std::mem::take(&mut current).trim().to_string()),
                _ => current.push(c),
            },
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}

/// The words of a statement's head, lower-cased, and the rest after them.
fn strip_words<'a>(sql: &'a str, words: &[&str]) -> Option<&'a str> {
    let mut rest = sql.trim_start();
    for w in words {
        let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
        if !rest[..end].eq_ignore_ascii_case(w) {
            return None;
        }
        rest = rest[end..].trim_start();
    }
    Some(rest)
}

fn unquote_string(s: &str) -> Option<String> {
    let inner = s.trim().strip_prefix('\'')?.strip_suffix('\'')?;
    Some(inner.replace("''", "'"))
}

/// Splits `X USING a, b` into (X, [a, b]).
fn using(rest: &str) -> (String, Vec<String>) {
    // Find a top-level USING keyword.
    let lower = rest.to_ascii_lowercase();
    let mut quote = None;
    for (i, c) in rest.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if lower[i..].starts_with("using")
                && rest[..i].ends_with(char::is_whitespace)
                && rest[i + 5..].starts_with(char::is_whitespace) =>
            {
                return (
                    rest[..i].trim().to_string(),
                    split_top_level(&rest[i + 5..]),
                );
            }
            None => {}
        }
    }
    (rest.trim().to_string(), Vec::new())
}

/// Resolves one statement against the client's prepared statements.
pub fn resolve(sql: &str, prepared: &[(String, String)]) -> Result<ClientStatement, String> {
    let sql = sql.trim().trim_end_matches(';').trim();
    if let Some(rest) = strip_words(sql, &["prepare"]) {
        let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
        let name = rest[..end].to_string();
        let body =
            strip_words(&rest[end..], &["from"]).ok_or("expected PREPARE name FROM statement")?;
        return Ok(ClientStatement::Prepare {
            name,
            sql: body.to_string(),
        });
    }
    if let Some(rest) = strip_words(sql, &["deallocate", "prepare"]) {
        return Ok(ClientStatement::Deallocate(rest.trim().to_string()));
    }
    if let Some(rest) = strip_words(sql, &["execute", "immediate"]) {
        let (text, params) = using(rest);
        let statement = unquote_string(&text).ok_or("EXECUTE IMMEDIATE needs a string literal")?;
        return Ok(ClientStatement::Run(bind_parameters(&statement, &params)?));
    }
    if let Some(rest) = strip_words(sql, &["execute"]) {
        let (name, params) = using(rest);
        let statement = prepared
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(&name))
            .map(|(_, s)| s.clone())
            .ok_or_else(|| format!("prepared statement '{name}' does not exist"))?;
        return Ok(ClientStatement::Run(bind_parameters(&statement, &params)?));
    }
    Ok(ClientStatement::Run(sql.to_string()))
}

/// Parses `X-Trino-Prepared-Statement` values: `name=url-encoded-sql` pairs separated by commas.
/// The SQL is form-encoded, as Trino's server decodes it (`URLDecoder`) and its clients encode it
/// (Python's `quote_plus`): a `+` is a space, a plus sign is `%2B`.
pub fn parse_prepared_header(values: &[&str]) -> Vec<(String, String)> {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .filter_map(|pair| {
            let (name, sql) = pair.split_once('=')?;
            let sql = urlencoding::decode(&sql.trim().replace('+', " "))
                .ok()?
                .into_owned();
            Some((name.trim().to_string(), sql))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execute_binds_parameters_outside_quotes() {
        let prepared = vec![(
            "st".to_string(),
            "SELECT * FROM t WHERE a = ? AND b = '?' AND c = ?".to_string(),
        )];
        assert_eq!(
            resolve("EXECUTE st USING 1, 'x, y'", &prepared),
            Ok(ClientStatement::Run(
                "SELECT * FROM t WHERE a = (1) AND b = '?' AND c = ('x, y')".into()
            ))
        );
        assert_eq!(
            resolve("EXECUTE st USING 1", &prepared),
            Err("statement has more parameters than the 1 given".into())
        );
    }

    #[test]
    fn execute_immediate_and_prepare() {
        assert_eq!(
            resolve("EXECUTE IMMEDIATE 'SELECT ''a'', ?' USING 2", &[]),
            Ok(ClientStatement::Run("SELECT 'a', (2)".into()))
        );
        assert_eq!(
            resolve("PREPARE st FROM SELECT ?", &[]),
            Ok(ClientStatement::Prepare {
                name: "st".into(),
                sql: "SELECT ?".into()
            })
        );
        assert_eq!(
            resolve("DEALLOCATE PREPARE st", &[]),
            Ok(ClientStatement::Deallocate("st".into()))
        );
        assert_eq!(
            parse_prepared_header(&["st=SELECT%20%3F"]),
            vec![("st".to_string(), "SELECT ?".to_string())]
        );
        // Form-encoded, as the Python client sends it: `+` is a space, `%2B` a plus sign.
        assert_eq!(
            parse_prepared_header(&["st=SELECT+%3F+%2B+1+AS+p, other=SELECT+2"]),
            vec![
                ("st".to_string(), "SELECT ? + 1 AS p".to_string()),
                ("other".to_string(), "SELECT 2".to_string())
            ]
        );
    }
}

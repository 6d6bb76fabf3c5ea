//! SQL text helpers the protocols share: the longest statement text SQE takes, and binding `?`
//! parameters, which clients send as SQL literals (Trino's EXECUTE … USING) or as Arrow values the
//! protocol renders as literals (Flight SQL).
//!
//! The length limit lives here rather than in the engine because a protocol that keeps a statement
//! for later (a prepared statement) must refuse it when it is handed in, before the server holds
//! it, and protocols see nothing of the engine; the engine checks every statement it runs against
//! the same limit, so both refuse alike.

use crate::{SqeError, SqeResult};

/// The most parameter values one statement (or one call's rows of parameters) may bind.
pub const MAX_PARAMETERS: usize = 65_535;

/// The longest statement text SQE accepts, in bytes (Trino's `query.max-length` is a million
/// characters), whether run at once or prepared to run later.
pub const MAX_STATEMENT_BYTES: usize = 1_000_000;

/// Refuses a statement text longer than [`MAX_STATEMENT_BYTES`], saying so.
pub fn check_statement_length(sql: &str) -> SqeResult<()> {
    if sql.len() > MAX_STATEMENT_BYTES {
        return Err(SqeError::invalid(format!(
            "statement is {} bytes long, more than the {MAX_STATEMENT_BYTES} bytes SQE accepts",
            sql.len()
        )));
    }
    Ok(())
}

/// A name as SQL quotes it (SQE's dialect and DuckDB's alike): in double quotes, inner quotes
/// doubled.
pub fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The error for more parameter values than [`MAX_PARAMETERS`].
pub fn too_many_parameters(count: usize) -> String {
    format!(
        "{count} parameter values are more than the {MAX_PARAMETERS} one statement may bind; load many rows with bulk ingest or INSERT … SELECT"
    )
}

/// Replaces each `?` outside quotes and comments with the next parameter's SQL text.
pub fn bind_parameters(sql: &str, params: &[String]) -> Result<String, String> {
    if params.len() > MAX_PARAMETERS {
        return Err(too_many_parameters(params.len()));
    }
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut used = 0;
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == '\n' {
                        break;
                    }
                }
            }
            '?' => {
                let p = params.get(used).ok_or_else(|| {
                    format!(
                        "statement has more parameters than the {} given",
                        params.len()
                    )
                })?;
                out.push('(');
                out.push_str(p);
                out.push(')');
                used += 1;
            }
            _ => out.push(c),
        }
    }
    if used != params.len() {
        return Err(format!(
            "{} parameters given but the statement has {used}",
            params.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_longer_than_the_limit_are_refused() {
        let longest = "x".repeat(MAX_STATEMENT_BYTES);
        assert_eq!(check_statement_length(&longest), Ok(()));
        let refused = check_statement_length(&format!("{longest}y"));
        assert_eq!(
            refused,
            Err(SqeError::invalid(
                "statement is 1000001 bytes long, more than the 1000000 bytes SQE accepts"
            ))
        );
        assert_eq!(
            refused.map_err(|e| e.code()),
            Err(crate::ErrorCode::InvalidInput)
        );
    }

    #[test]
    fn binds_outside_quotes_and_counts() {
        let sql = "SELECT * FROM t WHERE a = ? AND b = '?' AND c = ?";
        assert_eq!(
            bind_parameters(sql, &["1".into(), "'x, y'".into()]),
            Ok("SELECT * FROM t WHERE a = (1) AND b = '?' AND c = ('x, y')".into())
        );
        assert_eq!(
            bind_parameters(sql, &["1".into()]),
            Err("statement has more parameters than the 1 given".into())
        );
    }
}

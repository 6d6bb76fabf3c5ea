//! Which statements only read: what an agent's read-only tool (MCP's `execute_sql_readonly`) may
//! run. Judged on the statement as the engine parses it, never on keywords: exactly one statement,
//! a query without a data-modifying part anywhere (an INSERT, UPDATE, DELETE or MERGE in a CTE or
//! subquery, `SELECT … INTO`), an EXPLAIN of such a query, or a SHOW or DESCRIBE.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Query, SetExpr, Statement, Visit, Visitor};
use datafusion::sql::sqlparser::parser::Parser;
use sqe_sessions::{SqeError, SqeResult};

use crate::ddl::starts_with_words;

/// The SHOW statements SQE answers before parsing; all of them only read.
const READ_ONLY_SHOWS: [&[&str]; 5] = [
    &["show", "functions"],
    &["show", "stats"],
    &["show", "grants"],
    &["show", "row", "filters"],
    &["show", "masks"],
];

/// Refuses `sql` unless it is one statement that only reads, saying why.
pub(crate) fn check_read_only(sql: &str) -> SqeResult<()> {
    let prepared = crate::prepass::prepare(sql)?;
    let text = prepared.sql.as_str();
    if READ_ONLY_SHOWS.iter().any(|w| starts_with_words(text, w))
        || starts_with_words(text, &["show", "tags"])
    {
        return one_statement(text);
    }
    let statements =
        Parser::parse_sql(&crate::dialect::SqeDialect::default(), text).map_err(|e| {
            // The parser's message may quote a secret's values.
            if crate::secrets::is_create_secret(text) {
                return SqeError::invalid("not a read-only statement: CREATE SECRET");
            }
            SqeError::invalid(format!("syntax error: {e}"))
        })?;
    let [statement] = statements.as_slice() else {
        return Err(SqeError::invalid(format!(
            "a read-only statement is exactly one statement, not {}",
            statements.len()
        )));
    };
    if reads_only(statement) {
        return Ok(());
    }
    Err(SqeError::invalid(format!(
        "not a read-only statement: {} changes data or state (only queries, EXPLAIN, SHOW and DESCRIBE)",
        kind(statement)
    )))
}

/// A statement SQE reads before the parser does: one statement, no `;` inside.
fn one_statement(text: &str) -> SqeResult<()> {
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let dialect = crate::dialect::SqeDialect::default();
    let tokens = Tokenizer::new(&dialect, text)
        .tokenize()
        .map_err(|e| SqeError::invalid(format!("syntax error: {e}")))?;
    let last = tokens
        .iter()
        .rposition(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon));
    match tokens.iter().position(|t| matches!(t, Token::SemiColon)) {
        Some(i) if last.is_some_and(|l| l > i) => Err(SqeError::invalid(
            "a read-only statement is exactly one statement",
        )),
        _ => Ok(()),
    }
}

fn reads_only(statement: &Statement) -> bool {
    match statement {
        Statement::Query(query) => query_reads_only(query),
        Statement::Explain { statement, .. } => reads_only(statement),
        Statement::ShowTables { .. }
        | Statement::ShowColumns { .. }
        | Statement::ShowCreate { .. }
        | Statement::ShowSchemas { .. }
        | Statement::ShowDatabases { .. }
        | Statement::ShowCatalogs { .. }
        | Statement::ShowViews { .. }
        | Statement::ShowVariable { .. }
        | Statement::ExplainTable { .. } => true,
        _ => false,
    }
}

/// Whether no part of a query writes: no data-modifying set expression and no `SELECT … INTO`,
/// in CTEs and subqueries too.
fn query_reads_only(query: &Query) -> bool {
    struct Writes;
    impl Visitor for Writes {
        type Break = ();
        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
            if writes(&query.body) {
                return ControlFlow::Break(());
            }
            if let Some(with) = &query.with
                && with.cte_tables.iter().any(|cte| writes(&cte.query.body))
            {
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    fn writes(body: &SetExpr) -> bool {
        match body {
            SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_) => {
                true
            }
            SetExpr::Select(select) => select.into.is_some(),
            SetExpr::SetOperation { left, right, .. } => writes(left) || writes(right),
            SetExpr::Query(query) => writes(&query.body),
            _ => false,
        }
    }
    query.visit(&mut Writes).is_continue()
}

/// The statement's kind, in words, for the refusal.
fn kind(statement: &Statement) -> String {
    match statement {
        Statement::Query(_) => "a query with a data-modifying part".to_string(),
        other => {
            let text = other.to_string();
            let words: Vec<&str> = text.split_whitespace().take(2).collect();
            words.join(" ").to_uppercase()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reads_pass() {
        for sql in [
            "SELECT 1",
            "WITH t AS (SELECT 1 AS x) SELECT x FROM t",
            "EXPLAIN SELECT 1",
            "SHOW TABLES",
            "DESCRIBE t",
            "SHOW FUNCTIONS",
            "SHOW STATS FOR t",
            "SELECT 1;",
            "VALUES 1, 2",
        ] {
            assert_eq!(
                check_read_only(sql).map_err(|e| e.to_string()),
                Ok(()),
                "{sql}"
            );
        }
        for (sql, message) in [
            (
                "DROP TABLE t",
                "not a read-only statement: DROP TABLE changes data or state (only queries, EXPLAIN, SHOW and DESCRIBE)",
            ),
            (
                "SELECT 1; DROP TABLE t",
                "a read-only statement is exactly one statement, not 2",
            ),
            (
                "WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x",
                "not a read-only statement: a query with a data-modifying part changes data or state (only queries, EXPLAIN, SHOW and DESCRIBE)",
            ),
            (
                "SELECT * INTO u FROM t",
                "not a read-only statement: a query with a data-modifying part changes data or state (only queries, EXPLAIN, SHOW and DESCRIBE)",
            ),
            (
                "EXPLAIN ANALYZE INSERT INTO t VALUES (1)",
                "not a read-only statement: EXPLAIN ANALYZE changes data or state (only queries, EXPLAIN, SHOW and DESCRIBE)",
            ),
            (
                "SHOW GRANTS; DROP TABLE t",
                "a read-only statement is exactly one statement",
            ),
            (
                "CREATE SECRET s (TYPE s3, KEY_ID 'AKIA-SECRET-VALUE' SECRET 'x')",
                "not a read-only statement: CREATE SECRET",
            ),
            (
                "SHOW;STATS FOR t",
                "syntax error: sql parser error: Expected: an SQL statement, found: STATS at Line: 1, Column: 6",
            ),
            (
                "INSERT INTO t VALUES (1)",
                "not a read-only statement: INSERT INTO changes data or state (only queries, EXPLAIN, SHOW and DESCRIBE)",
            ),
        ] {
            let e = check_read_only(sql)
                .map(|_| ())
                .map_err(|e| e.message().to_string());
            assert_eq!(e, Err(message.to_string()), "{sql}");
        }
    }
}

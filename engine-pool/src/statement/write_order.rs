//! Spark's write order (Iceberg's SQL extensions): `ALTER TABLE t WRITE [DISTRIBUTED BY PARTITION]
//! [[LOCALLY] ORDERED BY c [ASC | DESC] [NULLS {FIRST | LAST}], … | UNORDERED]`.
//!
//! It sets what Trino's `sorted_by` property sets, the table's sort order (none when no order is
//! given), and, as Spark does, the table's `write.distribution-mode`: `hash` with DISTRIBUTED BY
//! PARTITION, `range` with ORDERED BY, `none` with UNORDERED; LOCALLY ORDERED BY leaves it as it
//! is. So it runs as that `ALTER TABLE t SET PROPERTIES sorted_by = ARRAY[…], …`, with the same
//! privilege and the same checks.

use datafusion::sql::sqlparser::ast::{Ident, Statement};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::Token;
use sqe_sessions::{SqeError, SqeResult};

use super::refs::word;
use crate::names::normalize_ident;

const SYNTAX: &str = "expected ALTER TABLE t WRITE [DISTRIBUTED BY PARTITION] [[LOCALLY] ORDERED BY c [ASC | DESC] [NULLS FIRST | NULLS LAST], … | UNORDERED]";

/// `ALTER TABLE t WRITE …` as the ALTER TABLE … SET PROPERTIES it stands for (in the words the
/// parser reads it in, Spark's SET TBLPROPERTIES), or None when the
/// ALTER TABLE is another one.
pub(crate) fn parse_write_order(sql: &str) -> Option<SqeResult<Statement>> {
    let dialect = super::dialect::SqeDialect::default();
    let mut p = Parser::new(&dialect).try_with_sql(sql).ok()?;
    if !p.parse_keywords(&[Keyword::ALTER, Keyword::TABLE]) {
        return None;
    }
    let table = p.parse_object_name(false).ok()?;
    if !word(&mut p, "write") {
        return None;
    }
    Some(parse_rest(&mut p).and_then(|(entries, mode)| {
        let array = entries
            .iter()
            .map(|e| format!("'{}'", e.replace('\'', "''")))
            .collect::<Vec<_>>()
            .join(", ");
        let mode = mode
            .map(|m| format!(", \"write.distribution-mode\" = '{m}'"))
            .unwrap_or_default();
        let text =
            format!("ALTER TABLE {table} SET TBLPROPERTIES (sorted_by = ARRAY[{array}]{mode})");
        let mut statements = Parser::parse_sql(&dialect, &text)
            .map_err(|e| SqeError::internal(format!("{text}: {e}")))?;
        statements
            .pop()
            .ok_or_else(|| SqeError::internal(format!("{text}: no statement")))
    }))
}

/// The `sorted_by` entries and the distribution mode (None: left as it is) of what follows WRITE.
fn parse_rest(p: &mut Parser) -> SqeResult<(Vec<String>, Option<&'static str>)> {
    let syntax =
        |found: &Token| SqeError::invalid(format!("syntax error: unexpected {found}; {SYNTAX}"));
    let (mut distributed, mut ordering): (bool, Option<(Vec<String>, bool)>) = (false, None);
    loop {
        if word(p, "distributed") {
            if !p.parse_keyword(Keyword::BY) || !word(p, "partition") {
                return Err(syntax(&p.peek_token().token));
            }
            if distributed {
                return Err(SqeError::invalid(
                    "WRITE takes DISTRIBUTED BY PARTITION once",
                ));
            }
            distributed = true;
            continue;
        }
        let locally = word(p, "locally");
        let order = if word(p, "ordered") {
            if !p.parse_keyword(Keyword::BY) {
                return Err(syntax(&p.peek_token().token));
            }
            Some((fields(p)?, locally))
        } else if !locally && word(p, "unordered") {
            Some((Vec::new(), false))
        } else if locally {
            return Err(syntax(&p.peek_token().token));
        } else {
            None
        };
        match order {
            Some(_) if ordering.is_some() => {
                return Err(SqeError::invalid("WRITE takes one ORDERED BY or UNORDERED"));
            }
            Some(order) => ordering = Some(order),
            None => break,
        }
    }
    while p.consume_token(&Token::SemiColon) {}
    let next = p.peek_token().token;
    if next != Token::EOF || (!distributed && ordering.is_none()) {
        return Err(syntax(&next));
    }
    let unordered = ordering
        .as_ref()
        .is_some_and(|(entries, _)| entries.is_empty());
    let mode = match (distributed, &ordering) {
        (true, _) => Some("hash"),
        (false, Some((_, true))) => None,
        _ if unordered => Some("none"),
        _ => Some("range"),
    };
    Ok((
        ordering.map(|(entries, _)| entries).unwrap_or_default(),
        mode,
    ))
}

/// `c [ASC | DESC] [NULLS {FIRST | LAST}], …`, in parentheses or not, as `sorted_by` entries.
fn fields(p: &mut Parser) -> SqeResult<Vec<String>> {
    let parenthesized = p.consume_token(&Token::LParen);
    let mut entries = Vec::new();
    loop {
        let name = p.parse_identifier().map_err(|e| {
            let e = e.to_string();
            let e = e.trim_start_matches("sql parser error: ");
            SqeError::invalid(format!("syntax error: {e}; {SYNTAX}"))
        })?;
        if p.peek_token().token == Token::LParen || p.peek_token().token == Token::Period {
            return Err(SqeError::unsupported(format!(
                "WRITE ORDERED BY sorts by columns of the table; '{name}' followed by '{}' (a transform or a nested field) is not supported",
                p.peek_token().token
            )));
        }
        let mut entry = column(&name);
        if p.parse_keyword(Keyword::ASC) {
            entry.push_str(" ASC");
        } else if p.parse_keyword(Keyword::DESC) {
            entry.push_str(" DESC");
        }
        if p.parse_keywords(&[Keyword::NULLS, Keyword::FIRST]) {
            entry.push_str(" NULLS FIRST");
        } else if p.parse_keywords(&[Keyword::NULLS, Keyword::LAST]) {
            entry.push_str(" NULLS LAST");
        }
        entries.push(entry);
        if !p.consume_token(&Token::Comma) {
            break;
        }
    }
    if parenthesized && !p.consume_token(&Token::RParen) {
        return Err(SqeError::invalid(format!(
            "syntax error: expected ')', found {}; {SYNTAX}",
            p.peek_token().token
        )));
    }
    Ok(entries)
}

/// A column as a `sorted_by` entry names it: double-quoted when it was quoted.
fn column(name: &Ident) -> String {
    match name.quote_style {
        Some(_) => format!("\"{}\"", name.value.replace('"', "\"\"")),
        None => normalize_ident(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(sql: &str) -> String {
        match parse_write_order(sql) {
            Some(Ok(statement)) => statement.to_string(),
            Some(Err(e)) => format!("error: {}", e.message()),
            None => "none".into(),
        }
    }

    #[test]
    fn spark_write_orders_are_sort_orders_and_distribution_modes() {
        assert_eq!(
            text("ALTER TABLE t WRITE ORDERED BY c, d DESC"),
            "ALTER TABLE t SET TBLPROPERTIES(sorted_by = ARRAY['c', 'd DESC'], \"write.distribution-mode\" = 'range')"
        );
        assert_eq!(
            text("alter table s.t write locally ordered by (\"Day\" asc nulls last)"),
            "ALTER TABLE s.t SET TBLPROPERTIES(sorted_by = ARRAY['\"Day\" ASC NULLS LAST'])"
        );
        assert_eq!(
            text("ALTER TABLE t WRITE DISTRIBUTED BY PARTITION"),
            "ALTER TABLE t SET TBLPROPERTIES(sorted_by = ARRAY[], \"write.distribution-mode\" = 'hash')"
        );
        assert_eq!(
            text("ALTER TABLE t WRITE DISTRIBUTED BY PARTITION LOCALLY ORDERED BY c NULLS FIRST"),
            "ALTER TABLE t SET TBLPROPERTIES(sorted_by = ARRAY['c NULLS FIRST'], \"write.distribution-mode\" = 'hash')"
        );
        assert_eq!(
            text("ALTER TABLE t WRITE UNORDERED"),
            "ALTER TABLE t SET TBLPROPERTIES(sorted_by = ARRAY[], \"write.distribution-mode\" = 'none')"
        );
        assert_eq!(text("ALTER TABLE t ADD COLUMN c int"), "none");
    }

    #[test]
    fn malformed_write_orders_are_refused_by_name() {
        for (sql, expected) in [
            ("ALTER TABLE t WRITE", "syntax error: unexpected EOF"),
            (
                "ALTER TABLE t WRITE ORDERED BY",
                "syntax error: Expected: identifier",
            ),
            (
                "ALTER TABLE t WRITE LOCALLY",
                "syntax error: unexpected EOF",
            ),
            (
                "ALTER TABLE t WRITE ORDERED BY c UNORDERED",
                "WRITE takes one ORDERED BY or UNORDERED",
            ),
            (
                "ALTER TABLE t WRITE ORDERED BY bucket(4, c)",
                "'bucket' followed by '('",
            ),
            (
                "ALTER TABLE t WRITE ORDERED BY c SIDEWAYS",
                "syntax error: unexpected SIDEWAYS",
            ),
            (
                "ALTER TABLE t WRITE ORDERED BY (c",
                "syntax error: expected ')'",
            ),
        ] {
            let got = text(sql);
            assert!(
                got.starts_with("error: ") && got.contains(expected),
                "{sql}: {got}"
            );
        }
    }
}

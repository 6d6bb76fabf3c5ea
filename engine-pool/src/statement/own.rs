//! Parsers of SQE's own statements, which sqlparser does not know: `ATTACH` and `DETACH` (as
//! DuckDB spells them), `SHOW FUNCTIONS [LIKE 'pattern']`, `SHOW STATS FOR table`, `SHOW GRANTS
//! [ON TABLE t | ON SCHEMA s]` and `SHOW SECRETS`.

use datafusion::sql::sqlparser::ast::{GrantObjects, Ident, ObjectName};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::Token;
use sqe_sessions::{SqeError, SqeResult};

use super::words::{Words, expected};

/// `ATTACH …`, parsed.
#[derive(Debug, PartialEq)]
pub(crate) struct Attach {
    pub uri: String,
    pub name: String,
    pub if_not_exists: bool,
    /// Option names in lower case, values as written.
    pub options: Vec<(String, String)>,
}

/// `DETACH …`, parsed.
#[derive(Debug, PartialEq)]
pub(crate) struct Detach {
    pub name: String,
    pub if_exists: bool,
}

pub(crate) fn parse_attach(sql: &str) -> SqeResult<Attach> {
    let mut words = Words::of(sql)?;
    if !words.keyword(Keyword::ATTACH) {
        return Err(expected("ATTACH", words.next()));
    }
    words.keyword(Keyword::DATABASE);
    let if_not_exists = words.keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let uri = match words.next() {
        Some(Token::SingleQuotedString(s)) => s,
        other => return Err(expected("the catalog's location as a string", other)),
    };
    words.keyword(Keyword::AS);
    let name = words.name("a catalog name")?;
    let mut options = Vec::new();
    if words.token(&Token::LParen) {
        loop {
            let key = words.name("an option name")?.to_lowercase();
            words.token(&Token::Eq);
            let value = words.value(&format!("a value for option {key}"))?;
            if options.iter().any(|(k, _)| *k == key) {
                return Err(SqeError::invalid(format!("option {key} is given twice")));
            }
            options.push((key, value));
            if words.token(&Token::RParen) {
                break;
            }
            if !words.token(&Token::Comma) {
                return Err(expected("',' or ')'", words.next()));
            }
        }
    }
    words.end("ATTACH")?;
    Ok(Attach {
        uri,
        name,
        if_not_exists,
        options,
    })
}

pub(crate) fn parse_detach(sql: &str) -> SqeResult<Detach> {
    let mut words = Words::of(sql)?;
    if !words.keyword(Keyword::DETACH) {
        return Err(expected("DETACH", words.next()));
    }
    words.keyword(Keyword::DATABASE);
    let if_exists = words.keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = words.name("a catalog name")?;
    words.end("DETACH")?;
    Ok(Detach { name, if_exists })
}

/// `SHOW FUNCTIONS [LIKE 'pattern']`: the pattern.
pub(crate) fn parse_show_functions(sql: &str) -> SqeResult<Option<String>> {
    let bad = || SqeError::invalid("syntax error: expected SHOW FUNCTIONS [LIKE 'pattern']");
    let mut words = Words::of(sql)?;
    if !words.words(&["show", "functions"]) {
        return Err(bad());
    }
    if words.at_end() {
        return Ok(None);
    }
    if !words.keyword(Keyword::LIKE) {
        return Err(bad());
    }
    let Some(Token::SingleQuotedString(pattern)) = words.next() else {
        return Err(bad());
    };
    if !words.at_end() {
        return Err(bad());
    }
    Ok(Some(pattern))
}

/// `SHOW STATS FOR table`: the table's name, as written.
pub(crate) fn parse_show_stats(sql: &str) -> SqeResult<String> {
    let mut words = Words::of(sql)?;
    let table = match words.words(&["show", "stats"]) && words.keyword(Keyword::FOR) {
        true => words.rest(),
        false => String::new(),
    };
    if table.is_empty() || table.starts_with('(') {
        return Err(SqeError::invalid(
            "syntax error: expected SHOW STATS FOR table",
        ));
    }
    Ok(table)
}

/// `SHOW SECRETS`, and nothing after it.
pub(crate) fn parse_show_secrets(sql: &str) -> SqeResult<()> {
    let mut words = Words::of(sql)?;
    if !words.words(&["show", "secrets"]) {
        return Err(expected("SHOW SECRETS", words.next()));
    }
    words.end("SHOW SECRETS")
}

/// `SHOW GRANTS [ON TABLE t | ON SCHEMA s]`: the table or schema, if one is named.
pub(crate) fn parse_show_grants(sql: &str) -> SqeResult<Option<GrantObjects>> {
    let bad = || SqeError::invalid("expected SHOW GRANTS [ON TABLE t | ON SCHEMA s]");
    let mut words = Words::of(sql)?;
    if !words.words(&["show", "grants"]) {
        return Err(bad());
    }
    if words.at_end() {
        return Ok(None);
    }
    if !words.keyword(Keyword::ON) {
        return Err(bad());
    }
    let table = words.keyword(Keyword::TABLE);
    if !table && !words.keyword(Keyword::SCHEMA) {
        return Err(bad());
    }
    let mut parts = Vec::new();
    loop {
        match words.next() {
            Some(Token::Word(w)) => parts.push(match w.quote_style {
                Some(quote) => Ident::with_quote(quote, w.value),
                None => Ident::new(w.value),
            }),
            _ => return Err(bad()),
        }
        if !words.token(&Token::Period) {
            break;
        }
    }
    if !words.at_end() {
        return Err(bad());
    }
    let name = ObjectName::from(parts);
    Ok(Some(match table {
        true => GrantObjects::Tables(vec![name]),
        false => GrantObjects::Schemas(vec![name]),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_attach_as_duckdb_writes_it() {
        let a = parse_attach(
            "ATTACH DATABASE IF NOT EXISTS 'https://cat.example/api' AS Lake (TYPE iceberg, prefix = 'dev', AUTH none);",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            a,
            Attach {
                uri: "https://cat.example/api".into(),
                name: "lake".into(),
                if_not_exists: true,
                options: vec![
                    ("type".into(), "iceberg".into()),
                    ("prefix".into(), "dev".into()),
                    ("auth".into(), "none".into()),
                ],
            }
        );
        let b = parse_attach("attach '/data/w' \"Other\"").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((b.name.as_str(), b.options.len()), ("Other", 0));
        let d = parse_detach("DETACH DATABASE IF EXISTS lake").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            d,
            Detach {
                name: "lake".into(),
                if_exists: true
            }
        );
    }

    #[test]
    fn malformed_attach_says_what_it_expected() {
        let message = |sql: &str| parse_attach(sql).err().map(|e| e.message().to_string());
        assert_eq!(
            message("ATTACH lake").as_deref(),
            Some("syntax error: expected the catalog's location as a string, found 'lake'")
        );
        assert_eq!(
            message("ATTACH '/w' AS w (TYPE sqlite").as_deref(),
            Some("syntax error: expected ',' or ')' at the end of the statement")
        );
        assert_eq!(
            message("ATTACH '/w' AS w (TYPE sqlite, type rest)").as_deref(),
            Some("option type is given twice")
        );
        assert_eq!(
            message("ATTACH '/w' AS w extra").as_deref(),
            Some("syntax error: unexpected 'extra' after the ATTACH statement")
        );
    }

    #[test]
    fn show_statements_read_their_parts() {
        let message = |r: SqeResult<String>| r.map_err(|e| e.message().to_string());
        let like = |rest: &str| parse_show_functions(&format!("SHOW FUNCTIONS{rest}")).ok();
        assert_eq!(like(""), Some(None));
        assert_eq!(like(" LIKE 'date%' "), Some(Some("date%".to_string())));
        assert_eq!(like(" like 'it''s'"), Some(Some("it's".to_string())));
        assert_eq!(like(" LIKE date"), None);
        assert_eq!(like(" FROM x"), None);
        assert_eq!(like(" LIKE 'a' 'b'"), None);
        assert_eq!(
            parse_show_functions("SHOW FUNCTIONS LIKE x").map_err(|e| e.message().to_string()),
            Err("syntax error: expected SHOW FUNCTIONS [LIKE 'pattern']".to_string())
        );
        assert_eq!(
            message(parse_show_stats("SHOW STATS FOR iceberg.\"S\".t;")),
            Ok("iceberg.\"S\".t".to_string())
        );
        assert_eq!(
            message(parse_show_stats("SHOW STATS FOR (SELECT 1)")),
            Err("syntax error: expected SHOW STATS FOR table".to_string())
        );
        let grants = |sql: &str| parse_show_grants(sql).map(|o| o.map(|o| o.to_string()));
        assert_eq!(
            grants("SHOW GRANTS ON TABLE s.\"T\"").map_err(|e| e.to_string()),
            Ok(Some("s.\"T\"".to_string()))
        );
        assert_eq!(grants("SHOW GRANTS;").map_err(|e| e.to_string()), Ok(None));
        assert_eq!(
            grants("SHOW GRANTS ON t").map_err(|e| e.message().to_string()),
            Err("expected SHOW GRANTS [ON TABLE t | ON SCHEMA s]".to_string())
        );
    }
}

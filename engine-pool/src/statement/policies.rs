//! Parsers of the governance statements sqlparser does not know: row filters (`CREATE ROW FILTER`,
//! `DROP ROW FILTER`, `SHOW ROW FILTERS`), column masks and tags (`ALTER TABLE … ALTER COLUMN …
//! SET MASK | DROP MASK | SET TAG | UNSET TAG`, `ALTER TAG … SET MASK | DROP MASK`, `SHOW MASKS`,
//! `SHOW TAGS`). What they do: governance/row_filters.rs and governance/column_masks.rs.

use datafusion::sql::sqlparser::ast::ObjectName;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::Token;
use sqe_sessions::{SqeError, SqeResult};

use crate::governance::column_masks::{Mask, unit};
use crate::names::normalize_ident;

pub(crate) enum RowFilterKind {
    Create,
    Drop { if_exists: bool },
    Show,
}

/// A row-filter statement, parsed: its kind, the filter's name, the table, and for CREATE the
/// condition and whom it is for.
pub(crate) struct RowFilterStatement {
    pub kind: RowFilterKind,
    pub name: Option<String>,
    pub table_name: ObjectName,
    pub rule: Option<(String, &'static str, String)>,
}

pub(crate) fn parse_row_filter(sql: &str) -> SqeResult<RowFilterStatement> {
    let syntax = |e: datafusion::sql::sqlparser::parser::ParserError| {
        SqeError::invalid(format!(
            "syntax error: {e}; expected CREATE ROW FILTER name ON table USING (condition) FOR {{USER | ROLE}} name, DROP ROW FILTER [IF EXISTS] name ON table or SHOW ROW FILTERS ON table"
        ))
    };
    let dialect = super::dialect::SqeDialect::default();
    let mut p = Parser::new(&dialect).try_with_sql(sql).map_err(syntax)?;
    let kind = if p.parse_keywords(&[Keyword::CREATE, Keyword::ROW, Keyword::FILTER]) {
        RowFilterKind::Create
    } else if p.parse_keywords(&[Keyword::DROP, Keyword::ROW, Keyword::FILTER]) {
        RowFilterKind::Drop {
            if_exists: p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]),
        }
    } else {
        // `FILTERS` is no keyword: the identifier after ROW.
        p.expect_keyword(Keyword::SHOW).map_err(syntax)?;
        p.expect_keyword(Keyword::ROW).map_err(syntax)?;
        RowFilterKind::Show
    };
    let name = match kind {
        RowFilterKind::Show => {
            let word = p.parse_identifier().map_err(syntax)?;
            if !word.value.eq_ignore_ascii_case("filters") {
                return Err(SqeError::invalid("expected SHOW ROW FILTERS ON table"));
            }
            None
        }
        _ => Some(normalize_ident(&p.parse_identifier().map_err(syntax)?)),
    };
    p.expect_keyword(Keyword::ON).map_err(syntax)?;
    let table_name = p.parse_object_name(false).map_err(syntax)?;
    let rule = if matches!(kind, RowFilterKind::Create) {
        p.expect_keyword(Keyword::USING).map_err(syntax)?;
        p.expect_token(&Token::LParen).map_err(syntax)?;
        let condition = p.parse_expr().map_err(syntax)?;
        p.expect_token(&Token::RParen).map_err(syntax)?;
        p.expect_keyword(Keyword::FOR).map_err(syntax)?;
        let grantee_kind = if p.parse_keyword(Keyword::USER) {
            "user"
        } else {
            p.expect_keyword(Keyword::ROLE).map_err(syntax)?;
            "role"
        };
        let grantee = normalize_ident(&p.parse_identifier().map_err(syntax)?);
        Some((condition.to_string(), grantee_kind, grantee))
    } else {
        None
    };
    let _ = p.consume_token(&Token::SemiColon);
    if p.peek_token().token != Token::EOF {
        return Err(SqeError::invalid(format!(
            "unexpected '{}' after the statement",
            p.peek_token().token
        )));
    }
    Ok(RowFilterStatement {
        kind,
        name,
        table_name,
        rule,
    })
}

pub(crate) enum MaskAction {
    Set {
        column: String,
        mask: Mask,
        grantee: (&'static str, String),
    },
    Drop {
        column: String,
        grantee: Option<(&'static str, String)>,
    },
    Show,
    Tag {
        column: String,
        tag: String,
        set: bool,
    },
    ShowTags,
}

pub(crate) enum MaskStatement {
    /// A statement about one table's columns.
    Table {
        table_name: ObjectName,
        action: MaskAction,
    },
    /// `ALTER TAG tag SET MASK … FOR …` (`mask`) or `… DROP MASK [FOR …]`.
    Tag {
        tag: String,
        mask: Option<Mask>,
        grantee: Option<(&'static str, String)>,
    },
}

/// None when `sql` is no mask or tag statement (any other ALTER TABLE).
pub(crate) fn parse_mask_statement(sql: &str) -> Option<SqeResult<MaskStatement>> {
    let syntax = |e: datafusion::sql::sqlparser::parser::ParserError| {
        SqeError::invalid(format!(
            "syntax error: {e}; expected ALTER TABLE t ALTER COLUMN c {{SET MASK mask FOR {{USER | ROLE}} name | DROP MASK [FOR …] | SET TAG tag | UNSET TAG tag}}, ALTER TAG tag {{SET MASK mask FOR … | DROP MASK [FOR …]}}, SHOW MASKS ON t or SHOW TAGS ON t, where mask is NULL, REDACT ['text'], HASH, SHOW FIRST n, SHOW LAST n, TRUNCATE TO {{YEAR | MONTH | DAY}} or USING (expression)"
        ))
    };
    let dialect = super::dialect::SqeDialect::default();
    let mut p = Parser::new(&dialect).try_with_sql(sql).ok()?;
    let word = |p: &mut Parser, w: &str| match p.peek_token().token {
        Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w) => {
            p.next_token();
            true
        }
        _ => false,
    };
    let name = |p: &mut Parser, what: &str| -> SqeResult<String> {
        let name = normalize_ident(&p.parse_identifier().map_err(syntax)?);
        if name.is_empty() || name.len() > 255 {
            return Err(SqeError::invalid(format!(
                "a {what}'s name is 1 to 255 characters"
            )));
        }
        Ok(name)
    };
    let grantee = |p: &mut Parser| -> SqeResult<(&'static str, String)> {
        p.expect_keyword(Keyword::FOR).map_err(syntax)?;
        let kind = if p.parse_keyword(Keyword::USER) {
            "user"
        } else {
            p.expect_keyword(Keyword::ROLE).map_err(syntax)?;
            "role"
        };
        Ok((kind, name(p, "grantee")?))
    };
    let mask = |p: &mut Parser| -> SqeResult<Mask> {
        let mask = parse_mask(p, &word).map_err(|e| match e {
            Some(e) => syntax(e),
            None => SqeError::invalid(
                "expected a mask: NULL, REDACT ['text'], HASH, SHOW FIRST n, SHOW LAST n, TRUNCATE TO {YEAR | MONTH | DAY} or USING (expression)",
            ),
        })?;
        match &mask {
            Mask::Redact(text) if text.len() > 255 => {
                Err(SqeError::invalid("a REDACT text is at most 255 characters"))
            }
            _ => Ok(mask),
        }
    };
    if p.parse_keyword(Keyword::SHOW) {
        let action = if word(&mut p, "masks") {
            MaskAction::Show
        } else if word(&mut p, "tags") {
            MaskAction::ShowTags
        } else {
            return None;
        };
        let parsed = (|| {
            p.expect_keyword(Keyword::ON).map_err(syntax)?;
            let table_name = p.parse_object_name(false).map_err(syntax)?;
            end(&mut p)?;
            Ok(MaskStatement::Table { table_name, action })
        })();
        return Some(parsed);
    }
    if !p.parse_keyword(Keyword::ALTER) {
        return None;
    }
    if word(&mut p, "tag") {
        let parsed = (|| {
            let tag = name(&mut p, "tag")?;
            let mask = if p.parse_keyword(Keyword::SET) {
                if !word(&mut p, "mask") {
                    return Err(SqeError::invalid("expected ALTER TAG tag SET MASK …"));
                }
                Some(mask(&mut p)?)
            } else {
                p.expect_keyword(Keyword::DROP).map_err(syntax)?;
                if !word(&mut p, "mask") {
                    return Err(SqeError::invalid("expected ALTER TAG tag DROP MASK …"));
                }
                None
            };
            let grantee = match (&mask, p.peek_keyword(Keyword::FOR)) {
                (Some(_), _) | (None, true) => Some(grantee(&mut p)?),
                (None, false) => None,
            };
            end(&mut p)?;
            Ok(MaskStatement::Tag { tag, mask, grantee })
        })();
        return Some(parsed);
    }
    if !p.parse_keyword(Keyword::TABLE) {
        return None;
    }
    let _ = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let table_name = p.parse_object_name(false).ok()?;
    if !p.parse_keyword(Keyword::ALTER) {
        return None;
    }
    let _ = p.parse_keyword(Keyword::COLUMN);
    let column = normalize_ident(&p.parse_identifier().ok()?);
    let verb = if p.parse_keyword(Keyword::SET) {
        "set"
    } else if p.parse_keyword(Keyword::DROP) {
        "drop"
    } else if p.parse_keyword(Keyword::UNSET) {
        "unset"
    } else {
        return None;
    };
    let noun = if word(&mut p, "mask") {
        "mask"
    } else if word(&mut p, "tag") {
        "tag"
    } else {
        return None;
    };
    let parsed = (|| {
        let action = match (verb, noun) {
            ("set", "mask") => MaskAction::Set {
                column,
                mask: mask(&mut p)?,
                grantee: grantee(&mut p)?,
            },
            ("drop", "mask") => {
                let grantee = match p.peek_keyword(Keyword::FOR) {
                    true => Some(grantee(&mut p)?),
                    false => None,
                };
                MaskAction::Drop { column, grantee }
            }
            ("set" | "unset", "tag") => MaskAction::Tag {
                column,
                tag: name(&mut p, "tag")?,
                set: verb == "set",
            },
            _ => {
                return Err(SqeError::invalid(
                    "expected SET MASK, DROP MASK, SET TAG or UNSET TAG",
                ));
            }
        };
        end(&mut p)?;
        Ok(MaskStatement::Table { table_name, action })
    })();
    Some(parsed)
}

/// One mask; `Err(None)` for a word that is no mask.
fn parse_mask(
    p: &mut Parser,
    word: &dyn Fn(&mut Parser, &str) -> bool,
) -> Result<Mask, Option<datafusion::sql::sqlparser::parser::ParserError>> {
    if p.parse_keyword(Keyword::NULL) {
        return Ok(Mask::Null);
    }
    if word(p, "redact") {
        return Ok(match p.peek_token().token {
            Token::SingleQuotedString(text) => {
                p.next_token();
                Mask::Redact(text)
            }
            _ => Mask::Redact("xxxx".to_string()),
        });
    }
    if word(p, "hash") {
        return Ok(Mask::Hash);
    }
    if p.parse_keyword(Keyword::SHOW) {
        let first = if p.parse_keyword(Keyword::FIRST) {
            true
        } else {
            p.expect_keyword(Keyword::LAST).map_err(Some)?;
            false
        };
        let n = p.parse_literal_uint().map_err(Some)?;
        let n = u32::try_from(n).map_err(|_| None)?;
        return Ok(if first {
            Mask::ShowFirst(n)
        } else {
            Mask::ShowLast(n)
        });
    }
    if p.parse_keyword(Keyword::TRUNCATE) {
        p.expect_keyword(Keyword::TO).map_err(Some)?;
        let u = p.parse_identifier().map_err(Some)?;
        return unit(&u.value).map(Mask::Truncate).ok_or(None);
    }
    if p.parse_keyword(Keyword::USING) {
        p.expect_token(&Token::LParen).map_err(Some)?;
        let e = p.parse_expr().map_err(Some)?;
        p.expect_token(&Token::RParen).map_err(Some)?;
        return Ok(Mask::Custom(e.to_string()));
    }
    Err(None)
}

fn end(p: &mut Parser) -> SqeResult<()> {
    let _ = p.consume_token(&Token::SemiColon);
    if p.peek_token().token != Token::EOF {
        return Err(SqeError::invalid(format!(
            "unexpected '{}' after the statement",
            p.peek_token().token
        )));
    }
    Ok(())
}

/// A GRANT, DENY or REVOKE in the words the SQL parser knows: `ON CATALOG c` as `ON DATABASE c`,
/// and the privilege ALTER (before the ON) as MODIFY.
pub(crate) fn grant_words(sql: &str) -> String {
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let dialect = super::dialect::SqeDialect::default();
    let Ok(mut tokens) = Tokenizer::new(&dialect, sql).tokenize() else {
        return sql.to_string();
    };
    let words: Vec<usize> = (0..tokens.len())
        .filter(|i| !matches!(tokens[*i], Token::Whitespace(_)))
        .collect();
    let is = |t: &Token, w: &str| matches!(t, Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w));
    if let Some(on) = words.iter().position(|i| is(&tokens[*i], "on")) {
        for i in &words[..on] {
            if is(&tokens[*i], "alter") {
                tokens[*i] = Token::make_keyword("MODIFY");
            }
        }
    }
    for pair in words.windows(2) {
        if is(&tokens[pair[0]], "on") && is(&tokens[pair[1]], "catalog") {
            tokens[pair[1]] = Token::make_keyword("DATABASE");
        }
    }
    tokens.iter().map(|t| t.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_read_back_as_they_are_written() {
        for sql in [
            "ALTER TABLE t ALTER COLUMN c SET MASK NULL FOR ROLE r",
            "ALTER TABLE t ALTER COLUMN c SET MASK REDACT 'gone' FOR USER u",
            "ALTER TABLE t ALTER COLUMN c SET MASK HASH FOR ROLE r",
            "ALTER TABLE t ALTER COLUMN c SET MASK SHOW LAST 4 FOR ROLE r",
            "ALTER TABLE t ALTER COLUMN c SET MASK TRUNCATE TO MONTH FOR ROLE r",
            "ALTER TABLE t ALTER COLUMN c SET MASK USING (upper(c)) FOR ROLE r",
        ] {
            let Some(Ok(MaskStatement::Table {
                action: MaskAction::Set { mask, .. },
                ..
            })) = parse_mask_statement(sql)
            else {
                panic!("{sql} did not parse");
            };
            let (kind, argument) = mask.stored();
            assert_eq!(Mask::from_stored(kind, &argument), Some(mask));
        }
        assert!(
            parse_mask_statement("ALTER TABLE t ALTER COLUMN c SET DATA TYPE bigint").is_none()
        );
        assert!(parse_mask_statement("ALTER TABLE t RENAME TO u").is_none());
        assert!(matches!(
            parse_mask_statement("ALTER TABLE t ALTER COLUMN c SET MASK SHOW MIDDLE 4 FOR ROLE r"),
            Some(Err(_))
        ));
    }
}

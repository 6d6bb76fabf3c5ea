//! Column changes the SQL parser does not take: a field inside a `row(…)` column, named by its
//! path (`ALTER TABLE t ADD COLUMN r.z integer`, `DROP COLUMN r.z`, `RENAME COLUMN r.z TO w`,
//! `ALTER COLUMN r.z SET DATA TYPE bigint`; Spark's `element` and `value` step into an array's
//! elements and a map's values), and Spark's `ALTER COLUMN c COMMENT '…'` at any depth. The
//! parser's own ALTER TABLE forms become the same [`ColumnAction`]s in write/ddl.rs, which runs
//! them all.

use datafusion::sql::sqlparser::ast::{DataType, ObjectName};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;
use sqe_sessions::{SqeError, SqeResult};

use crate::names::normalize_ident;

/// What a statement does to one column or field.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ColumnAction {
    Add {
        data_type: DataType,
        if_not_exists: bool,
        not_null: bool,
        comment: Option<String>,
    },
    Drop {
        if_exists: bool,
    },
    Rename {
        to: String,
        if_exists: bool,
    },
    SetDataType(DataType),
    DropNotNull,
    /// A column's comment; None removes it.
    Comment(Option<String>),
}

/// One column change: the table, the column's path from the table's top level, and what to do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ColumnStatement {
    pub table: ObjectName,
    pub if_table_exists: bool,
    pub path: Vec<String>,
    pub action: ColumnAction,
}

const SYNTAX: &str = "expected ALTER TABLE t {ADD COLUMN [IF NOT EXISTS] r.f type | DROP COLUMN [IF EXISTS] r.f | RENAME COLUMN [IF EXISTS] r.f TO g | ALTER COLUMN r.f {SET DATA TYPE type | DROP NOT NULL | COMMENT 'text'}}";

/// `ALTER TABLE t … COLUMN a.b …` (or `ALTER COLUMN c COMMENT …`), or None when the ALTER TABLE
/// is one the SQL parser takes.
pub(crate) fn parse_column_statement(sql: &str) -> Option<SqeResult<ColumnStatement>> {
    let dialect = super::dialect::SqeDialect::default();
    let mut p = Parser::new(&dialect).try_with_sql(sql).ok()?;
    if !p.parse_keywords(&[Keyword::ALTER, Keyword::TABLE]) {
        return None;
    }
    let if_table_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let table = p.parse_object_name(false).ok()?;
    let verb =
        p.parse_one_of_keywords(&[Keyword::ADD, Keyword::DROP, Keyword::RENAME, Keyword::ALTER])?;
    let column_word = p.parse_keyword(Keyword::COLUMN);
    if verb == Keyword::RENAME && !column_word {
        return None;
    }
    let if_not_exists =
        verb == Keyword::ADD && p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let if_exists = matches!(verb, Keyword::DROP | Keyword::RENAME)
        && p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let path = column_path(&mut p).ok()?;
    let comment_next =
        matches!(&p.peek_token().token, Token::Word(w) if w.keyword == Keyword::COMMENT);
    // A top-level column is the SQL parser's, except for Spark's ALTER COLUMN … COMMENT.
    if path.len() == 1 && !(verb == Keyword::ALTER && comment_next) {
        return None;
    }
    Some(
        parse_action(&mut p, verb, if_not_exists, if_exists).map(|action| ColumnStatement {
            table,
            if_table_exists,
            path,
            action,
        }),
    )
}

/// `a`, `a.b`, `"A".b.c`: each part normalised as a column name is.
fn column_path(p: &mut Parser) -> Result<Vec<String>, ParserError> {
    let mut path = vec![normalize_ident(&p.parse_identifier()?)];
    while p.consume_token(&Token::Period) {
        path.push(normalize_ident(&p.parse_identifier()?));
    }
    Ok(path)
}

fn parse_action(
    p: &mut Parser,
    verb: Keyword,
    if_not_exists: bool,
    if_exists: bool,
) -> SqeResult<ColumnAction> {
    let syntax = |e: ParserError| SqeError::invalid(format!("syntax error: {e}; {SYNTAX}"));
    let action = match verb {
        Keyword::ADD => {
            let data_type = p.parse_data_type().map_err(syntax)?;
            let mut not_null = false;
            let mut comment = None;
            loop {
                if p.parse_keywords(&[Keyword::NOT, Keyword::NULL]) {
                    not_null = true;
                } else if p.parse_keyword(Keyword::COMMENT) {
                    comment = Some(p.parse_literal_string().map_err(syntax)?);
                } else {
                    break;
                }
            }
            ColumnAction::Add {
                data_type,
                if_not_exists,
                not_null,
                comment,
            }
        }
        Keyword::DROP => ColumnAction::Drop { if_exists },
        Keyword::RENAME => {
            p.expect_keyword(Keyword::TO).map_err(syntax)?;
            let to = normalize_ident(&p.parse_identifier().map_err(syntax)?);
            ColumnAction::Rename { to, if_exists }
        }
        _ => {
            if p.parse_keywords(&[Keyword::SET, Keyword::DATA, Keyword::TYPE])
                || p.parse_keyword(Keyword::TYPE)
            {
                ColumnAction::SetDataType(p.parse_data_type().map_err(syntax)?)
            } else if p.parse_keywords(&[Keyword::DROP, Keyword::NOT, Keyword::NULL]) {
                ColumnAction::DropNotNull
            } else if p.parse_keyword(Keyword::COMMENT) {
                if p.parse_keyword(Keyword::NULL) {
                    ColumnAction::Comment(None)
                } else {
                    ColumnAction::Comment(Some(p.parse_literal_string().map_err(syntax)?))
                }
            } else {
                return Err(SqeError::invalid(format!(
                    "syntax error: unexpected {}; {SYNTAX}",
                    p.peek_token().token
                )));
            }
        }
    };
    while p.consume_token(&Token::SemiColon) {}
    if p.peek_token().token != Token::EOF {
        return Err(SqeError::invalid(format!(
            "syntax error: unexpected {}; {SYNTAX}",
            p.peek_token().token
        )));
    }
    Ok(action)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(sql: &str) -> ColumnStatement {
        parse_column_statement(sql)
            .expect("a column statement")
            .expect("it parses")
    }

    #[test]
    fn nested_paths_are_ours_and_top_level_columns_the_parsers() {
        let s = parsed("ALTER TABLE s.t ADD COLUMN IF NOT EXISTS r.Inner.z bigint COMMENT 'zed'");
        assert_eq!(s.table.to_string(), "s.t");
        assert_eq!(s.path, ["r", "inner", "z"]);
        assert!(matches!(
            s.action,
            ColumnAction::Add { if_not_exists: true, not_null: false, comment: Some(ref c), .. } if c == "zed"
        ));
        let s = parsed("ALTER TABLE IF EXISTS t DROP COLUMN IF EXISTS r.\"Z\"");
        assert!(s.if_table_exists);
        assert_eq!(s.path, ["r", "Z"]);
        assert_eq!(s.action, ColumnAction::Drop { if_exists: true });
        let s = parsed("alter table t rename column r.x to y;");
        assert_eq!(
            s.action,
            ColumnAction::Rename {
                to: "y".into(),
                if_exists: false
            }
        );
        let s = parsed("ALTER TABLE t ALTER COLUMN a.element.x TYPE bigint");
        assert_eq!(s.path, ["a", "element", "x"]);
        assert!(matches!(s.action, ColumnAction::SetDataType(_)));
        let s = parsed("ALTER TABLE t ALTER COLUMN c COMMENT 'top level, Spark''s form'");
        assert_eq!(s.path, ["c"]);
        assert_eq!(
            s.action,
            ColumnAction::Comment(Some("top level, Spark's form".into()))
        );
        for theirs in [
            "ALTER TABLE t ADD COLUMN c int",
            "ALTER TABLE t DROP COLUMN c",
            "ALTER TABLE t RENAME COLUMN c TO d",
            "ALTER TABLE t RENAME TO u",
            "ALTER TABLE t ALTER COLUMN c SET DATA TYPE bigint",
            "ALTER TABLE t ALTER COLUMN c SET MASK m",
            "ALTER TABLE t SET PROPERTIES x = 1",
            "ALTER TABLE t DROP BRANCH b",
        ] {
            assert!(parse_column_statement(theirs).is_none(), "{theirs}");
        }
    }

    #[test]
    fn malformed_nested_changes_are_refused_by_name() {
        for (sql, needle) in [
            ("ALTER TABLE t ADD COLUMN r.z", "Expected: a data type"),
            ("ALTER TABLE t RENAME COLUMN r.z w", "Expected: TO"),
            (
                "ALTER TABLE t ALTER COLUMN r.z SET DEFAULT 1",
                "unexpected SET",
            ),
            (
                "ALTER TABLE t DROP COLUMN r.z CASCADE",
                "unexpected CASCADE",
            ),
        ] {
            let err = match parse_column_statement(sql) {
                Some(Err(e)) => e.to_string(),
                other => panic!("{sql}: {other:?}"),
            };
            assert!(err.contains(needle), "{sql}: {err}");
        }
    }
}

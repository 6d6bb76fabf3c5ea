//! Branches and tags, in Spark's words (Iceberg's SQL extensions): `ALTER TABLE t {CREATE [OR
//! REPLACE] | REPLACE} {BRANCH | TAG} [IF NOT EXISTS] name [AS OF VERSION id] [RETAIN n {DAYS |
//! HOURS | MINUTES}] [WITH SNAPSHOT RETENTION [n SNAPSHOTS] [n {DAYS | HOURS | MINUTES}]]` and
//! `ALTER TABLE t DROP {BRANCH | TAG} [IF EXISTS] name`. write/refs.rs runs them.

use datafusion::sql::sqlparser::ast::ObjectName;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;
use sqe_sessions::{SqeError, SqeResult};

use crate::names::normalize_ident;

/// Whether a ref is a branch (it moves with writes) or a tag (it names one snapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RefKind {
    Branch,
    Tag,
}

impl RefKind {
    pub fn word(self) -> &'static str {
        match self {
            RefKind::Branch => "branch",
            RefKind::Tag => "tag",
        }
    }
}

/// What the statement does to the ref.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RefAction {
    /// CREATE, CREATE OR REPLACE and REPLACE.
    Set {
        create: bool,
        replace: bool,
        if_not_exists: bool,
        /// The snapshot it points at; the table's current one if not given.
        snapshot_id: Option<i64>,
        /// RETAIN: how long the ref itself is kept, in milliseconds.
        max_ref_age_ms: Option<i64>,
        /// A branch's WITH SNAPSHOT RETENTION: the snapshots it keeps at least, and for how long.
        min_snapshots_to_keep: Option<i32>,
        max_snapshot_age_ms: Option<i64>,
    },
    Drop {
        if_exists: bool,
    },
}

/// One branch or tag statement.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RefStatement {
    pub table: ObjectName,
    pub kind: RefKind,
    pub name: String,
    pub action: RefAction,
}

const SYNTAX: &str = "expected ALTER TABLE t {CREATE [OR REPLACE] | REPLACE | DROP} {BRANCH | TAG} name [AS OF VERSION id] [RETAIN n DAYS] [WITH SNAPSHOT RETENTION [n SNAPSHOTS] [n DAYS]]";

/// `ALTER TABLE t … BRANCH | TAG …`, or None when the ALTER TABLE is another one.
pub(crate) fn parse_ref_statement(sql: &str) -> Option<SqeResult<RefStatement>> {
    let dialect = super::dialect::SqeDialect::default();
    let mut p = Parser::new(&dialect).try_with_sql(sql).ok()?;
    if !p.parse_keywords(&[Keyword::ALTER, Keyword::TABLE]) {
        return None;
    }
    let table = p.parse_object_name(false).ok()?;
    let (create, replace, drop) =
        if p.parse_keywords(&[Keyword::CREATE, Keyword::OR, Keyword::REPLACE]) {
            (true, true, false)
        } else if p.parse_keyword(Keyword::CREATE) {
            (true, false, false)
        } else if p.parse_keyword(Keyword::REPLACE) {
            (false, true, false)
        } else if p.parse_keyword(Keyword::DROP) {
            (false, false, true)
        } else {
            return None;
        };
    let kind = if word(&mut p, "branch") {
        RefKind::Branch
    } else if word(&mut p, "tag") {
        RefKind::Tag
    } else {
        return None;
    };
    Some(parse_rest(&mut p, table, kind, create, replace, drop))
}

/// Takes the unquoted word `w` if it comes next (a word of Spark's extensions that sqlparser has
/// no keyword for).
pub(crate) fn word(p: &mut Parser, w: &str) -> bool {
    match p.peek_token().token {
        Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w) => {
            p.next_token();
            true
        }
        _ => false,
    }
}

fn parse_rest(
    p: &mut Parser,
    table: ObjectName,
    kind: RefKind,
    create: bool,
    replace: bool,
    drop: bool,
) -> SqeResult<RefStatement> {
    let syntax = |e: ParserError| SqeError::invalid(format!("syntax error: {e}; {SYNTAX}"));
    let if_exists = drop && p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let if_not_exists =
        create && !replace && p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = normalize_ident(&p.parse_identifier().map_err(syntax)?);
    if name.is_empty() || name.len() > 255 {
        return Err(SqeError::invalid(format!(
            "a {}'s name is 1 to 255 characters",
            kind.word()
        )));
    }
    let action = if drop {
        RefAction::Drop { if_exists }
    } else {
        let mut snapshot_id = None;
        let mut max_ref_age_ms = None;
        let (mut min_snapshots_to_keep, mut max_snapshot_age_ms) = (None, None);
        loop {
            if p.parse_keywords(&[Keyword::AS, Keyword::OF, Keyword::VERSION]) {
                snapshot_id = Some(number(p)?);
            } else if word(p, "retain") {
                max_ref_age_ms = Some(age(p)?);
            } else if kind == RefKind::Branch
                && p.parse_keyword(Keyword::WITH)
                && word(p, "snapshot")
                && word(p, "retention")
            {
                let n = number(p)?;
                if word(p, "snapshots") {
                    min_snapshots_to_keep =
                        Some(i32::try_from(n).ok().filter(|n| *n >= 1).ok_or_else(|| {
                            SqeError::invalid("a branch keeps at least 1 snapshot")
                        })?);
                    if matches!(p.peek_token().token, Token::Number(..)) {
                        let n = number(p)?;
                        max_snapshot_age_ms = Some(unit(p, n)?);
                    }
                } else {
                    max_snapshot_age_ms = Some(unit(p, n)?);
                }
            } else {
                break;
            }
        }
        RefAction::Set {
            create,
            replace,
            if_not_exists,
            snapshot_id,
            max_ref_age_ms,
            min_snapshots_to_keep,
            max_snapshot_age_ms,
        }
    };
    while p.consume_token(&Token::SemiColon) {}
    if p.peek_token().token != Token::EOF {
        return Err(SqeError::invalid(format!(
            "syntax error: unexpected {}; {SYNTAX}",
            p.peek_token().token
        )));
    }
    Ok(RefStatement {
        table,
        kind,
        name,
        action,
    })
}

fn number(p: &mut Parser) -> SqeResult<i64> {
    let negative = p.consume_token(&Token::Minus);
    match p.next_token().token {
        Token::Number(n, _) => n
            .parse::<i64>()
            .map(|v| if negative { -v } else { v })
            .map_err(|_| SqeError::invalid(format!("{n} is not a whole number"))),
        other => Err(SqeError::invalid(format!(
            "syntax error: expected a number, found {other}; {SYNTAX}"
        ))),
    }
}

/// `n {DAYS | HOURS | MINUTES}` in milliseconds.
fn age(p: &mut Parser) -> SqeResult<i64> {
    let n = number(p)?;
    unit(p, n)
}

fn unit(p: &mut Parser, n: i64) -> SqeResult<i64> {
    let ms = if word(p, "days") || word(p, "day") {
        86_400_000
    } else if word(p, "hours") || word(p, "hour") {
        3_600_000
    } else if word(p, "minutes") || word(p, "minute") {
        60_000
    } else {
        return Err(SqeError::invalid(format!(
            "syntax error: expected DAYS, HOURS or MINUTES after {n}; {SYNTAX}"
        )));
    };
    if n < 1 {
        return Err(SqeError::invalid("a retention is at least 1"));
    }
    n.checked_mul(ms)
        .ok_or_else(|| SqeError::invalid(format!("a retention of {n} is too long")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(sql: &str) -> RefStatement {
        match parse_ref_statement(sql) {
            Some(Ok(s)) => s,
            other => panic!("{sql}: {other:?}"),
        }
    }

    #[test]
    fn spark_ref_statements() {
        let s = parsed(
            "ALTER TABLE s.t CREATE BRANCH audit AS OF VERSION 42 RETAIN 7 DAYS WITH SNAPSHOT RETENTION 2 SNAPSHOTS 3 HOURS",
        );
        assert_eq!(
            (s.table.to_string(), s.kind, s.name.as_str()),
            ("s.t".into(), RefKind::Branch, "audit")
        );
        assert_eq!(
            s.action,
            RefAction::Set {
                create: true,
                replace: false,
                if_not_exists: false,
                snapshot_id: Some(42),
                max_ref_age_ms: Some(7 * 86_400_000),
                min_snapshots_to_keep: Some(2),
                max_snapshot_age_ms: Some(3 * 3_600_000),
            }
        );
        let s = parsed("alter table t create or replace tag v1");
        assert!(matches!(
            s.action,
            RefAction::Set {
                create: true,
                replace: true,
                ..
            }
        ));
        let s = parsed("ALTER TABLE t CREATE TAG IF NOT EXISTS v1 AS OF VERSION 1");
        assert!(matches!(
            s.action,
            RefAction::Set {
                if_not_exists: true,
                snapshot_id: Some(1),
                ..
            }
        ));
        let s = parsed("ALTER TABLE t DROP BRANCH IF EXISTS b");
        assert_eq!(s.action, RefAction::Drop { if_exists: true });
        assert!(parse_ref_statement("ALTER TABLE t ADD COLUMN c int").is_none());
        assert!(parse_ref_statement("ALTER TABLE t DROP COLUMN c").is_none());
        for bad in [
            "ALTER TABLE t CREATE BRANCH b RETAIN 0 DAYS",
            "ALTER TABLE t CREATE BRANCH b RETAIN 7 WEEKS",
            "ALTER TABLE t CREATE TAG v WITH SNAPSHOT RETENTION 2 SNAPSHOTS",
            "ALTER TABLE t CREATE BRANCH b AS OF VERSION x",
            "ALTER TABLE t CREATE BRANCH b WITH SNAPSHOT RETENTION 0 SNAPSHOTS",
        ] {
            assert!(matches!(parse_ref_statement(bad), Some(Err(_))), "{bad}");
        }
    }
}

//! What SQE understands before DataFusion parses: a token-level pass over the SQL text.
//!
//! - Trino time travel `t FOR VERSION AS OF <expr>` / `t FOR TIMESTAMP AS OF <expr>`, which the parser
//!   does not know: the table name and its clause become a marker identifier, remembered here.
//! - A bare path in FROM/JOIN (`FROM 'x.parquet'`): also a marker.
//! - Spark's `PARTITIONED BY (days(ts), bucket(16, id))` in CREATE TABLE: cut out and kept as text.
//!
//! The engine later resolves each marker into a table of its own (see `engine.rs`).

use datafusion::sql::sqlparser::ast::{Expr, Ident, ObjectName};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer, Whitespace, Word};
use sqe_sessions::{SqeError, SqeResult};

pub const TIME_TRAVEL_MARKER: &str = "__sqe_tt_";
pub const FILE_MARKER: &str = "__sqe_file_";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TravelKind {
    Version,
    Timestamp,
}

#[derive(Debug, Clone)]
pub struct TimeTravel {
    pub table: ObjectName,
    pub kind: TravelKind,
    pub expr: Expr,
}

#[derive(Debug, Default)]
pub struct Prepared {
    pub sql: String,
    pub time_travel: Vec<TimeTravel>,
    pub files: Vec<String>,
    /// The entries of a Spark-style `PARTITIONED BY (...)`, as written.
    pub partitioned_by: Option<Vec<String>>,
}

/// Tokens with the exact text each was written as.
fn tokenize_with_text(sql: &str) -> SqeResult<(Vec<Token>, Vec<String>)> {
    let spanned = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize_with_location()
        .map_err(|e| {
            SqeError::invalid(format!("syntax error: {}", e.message.trim()) + &location(&e))
        })?;
    // Token positions are (line, column), columns counting characters from 1, and tokens come in
    // text order: one cursor walks the text once to turn each position into a byte offset.
    let mut line_starts = vec![0usize];
    line_starts.extend(sql.match_indices('\n').map(|(i, _)| i + 1));
    let (mut line, mut column, mut byte) = (1u64, 1u64, 0usize);
    let mut starts = Vec::with_capacity(spanned.len());
    for t in &spanned {
        let (want_line, want_column) = (t.span.start.line.max(1), t.span.start.column.max(1));
        if want_line != line || want_column < column {
            line = want_line;
            column = 1;
            byte = line_starts
                .get((want_line - 1) as usize)
                .copied()
                .unwrap_or(sql.len());
        }
        let mut rest = sql[byte..].chars();
        while column < want_column {
            let Some(c) = rest.next() else { break };
            byte += c.len_utf8();
            column += 1;
        }
        starts.push(byte);
    }
    let mut tokens = Vec::with_capacity(spanned.len());
    let mut texts = Vec::with_capacity(spanned.len());
    for (i, t) in spanned.into_iter().enumerate() {
        if t.token == Token::EOF {
            continue;
        }
        let end = starts.get(i + 1).copied().unwrap_or(sql.len());
        texts.push(sql.get(starts[i]..end).unwrap_or_default().to_string());
        tokens.push(t.token);
    }
    Ok((tokens, texts))
}

/// Refuses brackets nested deeper than the guard admits expressions, before the parser sees them:
/// its types (`row(f row(f …))`) nest by recursion with no limit of its own.
fn check_nesting(tokens: &[Token]) -> SqeResult<()> {
    let max = crate::guard::MAX_EXPRESSION_DEPTH;
    let mut depth = 0usize;
    for t in tokens {
        match t {
            Token::LParen | Token::LBracket => {
                depth += 1;
                if depth > max {
                    return Err(SqeError::invalid(format!(
                        "the statement nests brackets more than {max} deep"
                    )));
                }
            }
            Token::RParen | Token::RBracket => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

pub fn tokenize(sql: &str) -> SqeResult<Vec<Token>> {
    Tokenizer::new(&GenericDialect {}, sql)
        .tokenize()
        .map_err(|e| {
            SqeError::invalid(format!("syntax error: {}", e.message.trim()) + &location(&e))
        })
}

fn location(e: &datafusion::sql::sqlparser::tokenizer::TokenizerError) -> String {
    format!(" at line {}, column {}", e.location.line, e.location.column)
}

fn is_keyword(t: &Token, k: Keyword) -> bool {
    matches!(t, Token::Word(w) if w.keyword == k && w.quote_style.is_none())
}

fn is_space(t: &Token) -> bool {
    matches!(t, Token::Whitespace(_))
}

fn marker(name: String) -> Token {
    Token::Word(Word {
        value: name,
        quote_style: Some('"'),
        keyword: Keyword::NoKeyword,
    })
}

/// Index of the next non-whitespace token at or after `i`.
fn next_solid(tokens: &[Token], mut i: usize) -> Option<usize> {
    while i < tokens.len() {
        if !is_space(&tokens[i]) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Splits a script into statements at top-level semicolons. Quotes and comments are respected; it
/// never fails: an unterminated quote runs to the end and that statement then fails on its own.
pub fn split_statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = sql.chars().peekable();
    let mut only_comments = true;
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' | '`' => {
                only_comments = false;
                current.push(c);
                while let Some(d) = chars.next() {
                    current.push(d);
                    if d == c {
                        // A doubled quote is an escaped quote inside the literal.
                        if chars.peek() == Some(&c) {
                            current.extend(chars.next());
                            continue;
                        }
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                current.push(c);
                for d in chars.by_ref() {
                    current.push(d);
                    if d == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                current.push(c);
                let mut prev = ' ';
                for d in chars.by_ref() {
                    current.push(d);
                    if prev == '*' && d == '/' {
                        break;
                    }
                    prev = d;
                }
            }
            ';' => {
                let text = std::mem::take(&mut current);
                if !only_comments && !text.trim().is_empty() {
                    out.push(text.trim().to_string());
                }
                only_comments = true;
            }
            _ => {
                if !c.is_whitespace() {
                    only_comments = false;
                }
                current.push(c);
            }
        }
    }
    if !only_comments && !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}

/// True when `sql` ends inside a statement: its last `;` is followed by more than whitespace and
/// comments, or a quote or block comment is still open.
pub fn ends_in_statement(sql: &str) -> bool {
    match tokenize(sql) {
        Err(_) => true,
        Ok(tokens) => tokens
            .iter()
            .rev()
            .find(|t| !is_space(t))
            .is_some_and(|t| *t != Token::SemiColon),
    }
}

/// True when `sql` ends inside a quote or block comment (the shell then reads another line).
pub fn is_incomplete(sql: &str) -> bool {
    tokenize(sql).is_err()
}

/// Whether the FROM or JOIN at `at` is a clause's, naming a relation: not the FROM of `x IS [NOT]
/// DISTINCT FROM y`, and not one inside a function's arguments (`trim(BOTH 'x' FROM s)`,
/// `extract(year FROM d)`, `substring(s FROM 2)`), where a string after it is a value.
fn names_relation(tokens: &[Token], at: usize) -> bool {
    let before = |i: usize| (0..i).rev().find(|k| !is_space(&tokens[*k]));
    if before(at).is_some_and(|p| is_keyword(&tokens[p], Keyword::DISTINCT)) {
        return false;
    }
    // The innermost parenthesis still open at `at`.
    let mut depth = 0usize;
    let open = (0..at).rev().find(|k| match tokens[*k] {
        Token::RParen => {
            depth += 1;
            false
        }
        Token::LParen if depth == 0 => true,
        Token::LParen => {
            depth -= 1;
            false
        }
        _ => false,
    });
    let Some(open) = open else {
        return true;
    };
    let opens_query = next_solid(tokens, open + 1).is_some_and(|k| {
        [
            Keyword::SELECT,
            Keyword::WITH,
            Keyword::VALUES,
            Keyword::TABLE,
        ]
        .iter()
        .any(|q| is_keyword(&tokens[k], *q))
    });
    let after_clause_word = before(open).is_some_and(|p| {
        [
            Keyword::FROM,
            Keyword::JOIN,
            Keyword::IN,
            Keyword::EXISTS,
            Keyword::LATERAL,
        ]
        .iter()
        .any(|w| is_keyword(&tokens[p], *w))
    });
    let is_call = before(open).is_some_and(|p| matches!(tokens[p], Token::Word(_)));
    opens_query || after_clause_word || !is_call
}

pub fn prepare(sql: &str) -> SqeResult<Prepared> {
    // Each token with its original text: rewrites replace tokens, everything else is kept exactly as
    // written (a token's Display does not re-escape quotes inside literals and identifiers).
    let (mut tokens, mut texts) = tokenize_with_text(sql)?;
    check_nesting(&tokens)?;
    let mut prepared = Prepared::default();
    let is_create = next_solid(&tokens, 0).is_some_and(|i| is_keyword(&tokens[i], Keyword::CREATE));
    let mut i = 0;
    while i < tokens.len() {
        // <name> FOR VERSION|TIMESTAMP AS OF <expr>
        if is_keyword(&tokens[i], Keyword::FOR)
            && let Some(j) = next_solid(&tokens, i + 1)
            && (is_keyword(&tokens[j], Keyword::VERSION)
                || is_keyword(&tokens[j], Keyword::TIMESTAMP))
            && let Some(a) = next_solid(&tokens, j + 1)
            && is_keyword(&tokens[a], Keyword::AS)
            && let Some(o) = next_solid(&tokens, a + 1)
            && is_keyword(&tokens[o], Keyword::OF)
        {
            let kind = if is_keyword(&tokens[j], Keyword::VERSION) {
                TravelKind::Version
            } else {
                TravelKind::Timestamp
            };
            let expr_start = o + 1;
            let rest: Vec<Token> = tokens[expr_start..].to_vec();
            let mut parser = Parser::new(&GenericDialect {}).with_tokens(rest);
            let expr = parser.parse_expr().map_err(|e| {
                SqeError::invalid(format!("time travel needs an expression after AS OF: {e}"))
            })?;
            let expr_end = expr_start + parser.index();
            // The table name: words and dots right before FOR.
            let mut name_start = i;
            let mut k = i;
            while k > 0 && is_space(&tokens[k - 1]) {
                k -= 1;
            }
            let mut parts = Vec::new();
            loop {
                if k == 0 {
                    break;
                }
                match &tokens[k - 1] {
                    Token::Word(w) => {
                        parts.push(ident(w));
                        k -= 1;
                        name_start = k;
                        if k > 0 && tokens[k - 1] == Token::Period {
                            k -= 1;
                        } else {
                            break;
                        }
                    }
                    _ => break,
                }
            }
            if parts.is_empty() {
                return Err(SqeError::invalid(
                    "FOR VERSION/TIMESTAMP AS OF must follow a table name",
                ));
            }
            parts.reverse();
            let n = prepared.time_travel.len();
            prepared.time_travel.push(TimeTravel {
                table: ObjectName::from(parts),
                kind,
                expr,
            });
            let replacement = marker(format!("{TIME_TRAVEL_MARKER}{n}"));
            texts.splice(name_start..expr_end, [replacement.to_string()]);
            tokens.splice(name_start..expr_end, [replacement]);
            i = name_start + 1;
            continue;
        }
        // FROM 'path' / JOIN 'path'
        if (is_keyword(&tokens[i], Keyword::FROM) || is_keyword(&tokens[i], Keyword::JOIN))
            && names_relation(&tokens, i)
            && let Some(j) = next_solid(&tokens, i + 1)
            && let Token::SingleQuotedString(path) = &tokens[j]
        {
            let n = prepared.files.len();
            prepared.files.push(path.clone());
            tokens[j] = marker(format!("{FILE_MARKER}{n}"));
            texts[j] = tokens[j].to_string();
            i = j + 1;
            continue;
        }
        // PARTITIONED BY ( ... ) in CREATE TABLE
        if is_create
            && matches!(&tokens[i], Token::Word(w) if w.value.eq_ignore_ascii_case("partitioned") && w.quote_style.is_none())
            && let Some(b) = next_solid(&tokens, i + 1)
            && is_keyword(&tokens[b], Keyword::BY)
            && let Some(p) = next_solid(&tokens, b + 1)
            && tokens[p] == Token::LParen
        {
            let mut depth = 0usize;
            let mut entries = vec![String::new()];
            let mut end = None;
            for (k, (t, text)) in tokens.iter().zip(&texts).enumerate().skip(p) {
                match t {
                    Token::LParen => {
                        depth += 1;
                        if depth == 1 {
                            continue;
                        }
                    }
                    Token::RParen => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(k);
                            break;
                        }
                    }
                    Token::Comma if depth == 1 => {
                        entries.push(String::new());
                        continue;
                    }
                    _ => {}
                }
                if let Some(last) = entries.last_mut() {
                    last.push_str(text);
                }
            }
            let Some(end) = end else {
                return Err(SqeError::invalid(
                    "PARTITIONED BY is missing its closing parenthesis",
                ));
            };
            prepared.partitioned_by = Some(
                entries
                    .into_iter()
                    .map(|e| e.trim().to_string())
                    .filter(|e| !e.is_empty())
                    .collect(),
            );
            tokens.drain(i..=end);
            texts.drain(i..=end);
            continue;
        }
        i += 1;
    }
    let definitions =
        is_create || next_solid(&tokens, 0).is_some_and(|i| is_keyword(&tokens[i], Keyword::ALTER));
    trino_type_constructors(&mut tokens, &mut texts, definitions);
    if is_create {
        trino_view_clauses(&tokens, &mut texts);
    }
    trino_query_shorthands(&tokens, &mut texts);
    prepared.sql = texts.concat();
    Ok(prepared)
}

/// Trino's `TABLE t` (all of `t`) and `VALUES 1, 2` (rows of one column, unparenthesized), which
/// the parser does not know: written as `SELECT * FROM t` and `VALUES (1), (2)`.
fn trino_query_shorthands(tokens: &[Token], texts: &mut [String]) {
    let solid: Vec<usize> = (0..tokens.len())
        .filter(|&i| !is_space(&tokens[i]))
        .collect();
    let set_operation = |t: &Token| {
        is_keyword(t, Keyword::UNION)
            || is_keyword(t, Keyword::EXCEPT)
            || is_keyword(t, Keyword::INTERSECT)
    };
    for (n, &i) in solid.iter().enumerate() {
        let before = |k: usize| n.checked_sub(k).map(|p| &tokens[solid[p]]);
        let next = solid.get(n + 1).map(|&j| &tokens[j]);
        // TABLE t where a query may start: the statement's start, after `(`, after a set operation.
        if is_keyword(&tokens[i], Keyword::TABLE) && matches!(next, Some(Token::Word(_))) {
            let query_starts = match before(1) {
                None | Some(Token::LParen) => true,
                Some(t) if set_operation(t) => true,
                Some(t) if is_keyword(t, Keyword::ALL) || is_keyword(t, Keyword::DISTINCT) => {
                    before(2).is_some_and(set_operation)
                }
                _ => false,
            };
            if query_starts {
                texts[i] = "SELECT * FROM".to_string();
            }
            continue;
        }
        if !is_keyword(&tokens[i], Keyword::VALUES)
            || next.is_none_or(|t| *t == Token::LParen || is_keyword(t, Keyword::ROW))
        {
            continue;
        }
        // Each top-level element of the list goes in parentheses, up to what ends the list.
        let mut depth = 0usize;
        let mut first = n + 1;
        let mut last = n;
        for (m, &j) in solid.iter().enumerate().skip(n + 1) {
            let t = &tokens[j];
            let ends = match t {
                Token::LParen | Token::LBracket => {
                    depth += 1;
                    false
                }
                Token::RParen | Token::RBracket if depth == 0 => true,
                Token::RParen | Token::RBracket => {
                    depth -= 1;
                    false
                }
                Token::SemiColon => depth == 0,
                Token::Comma if depth == 0 => {
                    texts[solid[first]].insert(0, '(');
                    texts[solid[last]].push(')');
                    first = m + 1;
                    continue;
                }
                t => {
                    depth == 0
                        && [
                            Keyword::ORDER,
                            Keyword::LIMIT,
                            Keyword::OFFSET,
                            Keyword::FETCH,
                            Keyword::UNION,
                            Keyword::EXCEPT,
                            Keyword::INTERSECT,
                        ]
                        .iter()
                        .any(|k| is_keyword(t, *k))
                }
            };
            if ends {
                break;
            }
            last = m;
        }
        if last >= first {
            texts[solid[first]].insert(0, '(');
            texts[solid[last]].push(')');
        }
    }
}

/// Trino's `CREATE VIEW v COMMENT 'text' SECURITY DEFINER|INVOKER AS …`: the parser wants
/// `COMMENT = 'text'` and knows no SECURITY clause. A view always runs with its reader's rights
/// (planner/views.rs), so the clause is accepted and has nothing to change.
fn trino_view_clauses(tokens: &[Token], texts: &mut [String]) {
    let solid: Vec<usize> = (0..tokens.len())
        .filter(|&i| !is_space(&tokens[i]))
        .collect();
    let Some(view) = solid
        .iter()
        .take(4)
        .position(|&i| is_keyword(&tokens[i], Keyword::VIEW))
    else {
        return;
    };
    let mut depth = 0usize;
    for (n, &i) in solid.iter().enumerate().skip(view + 1) {
        match &tokens[i] {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            t if depth == 0 && is_keyword(t, Keyword::AS) => return,
            t if depth == 0 && is_keyword(t, Keyword::COMMENT) => {
                if let Some(&next) = solid.get(n + 1)
                    && matches!(tokens[next], Token::SingleQuotedString(_))
                {
                    texts[i].push_str(" =");
                }
            }
            Token::Word(w)
                if depth == 0
                    && w.quote_style.is_none()
                    && w.value.eq_ignore_ascii_case("security") =>
            {
                if let Some(&next) = solid.get(n + 1)
                    && let Token::Word(kind) = &tokens[next]
                    && (kind.value.eq_ignore_ascii_case("definer")
                        || kind.value.eq_ignore_ascii_case("invoker"))
                {
                    texts[i].clear();
                    texts[next].clear();
                }
            }
            _ => {}
        }
    }
}

/// Trino spells nested types `array(T)`, `map(K, V)`, `row(a T, …)`; the parser knows `ARRAY<T>`,
/// `MAP(K, V)` and `STRUCT<a T>`. Rewritten in column definitions (up to a top-level `AS`: the
/// query of a CREATE TABLE AS, where `map(...)` is a function) and in the types of CAST and
/// TRY_CAST.
fn trino_type_constructors(tokens: &mut Vec<Token>, texts: &mut Vec<String>, definitions: bool) {
    let mut regions = Vec::new();
    let mut defined = 0;
    if definitions {
        let mut depth = 0usize;
        let end = tokens
            .iter()
            .position(|t| {
                match t {
                    Token::LParen => depth += 1,
                    Token::RParen => depth = depth.saturating_sub(1),
                    _ => {}
                }
                depth == 0 && is_keyword(t, Keyword::AS)
            })
            .unwrap_or(tokens.len());
        regions.push(0..end);
        defined = end;
    }
    regions.extend(
        cast_types(tokens)
            .into_iter()
            .filter(|r| r.start >= defined),
    );
    for range in regions.into_iter().rev() {
        let (t, x): (Vec<Token>, Vec<String>) =
            nested_types(&tokens[range.clone()], &texts[range.clone()])
                .into_iter()
                .unzip();
        tokens.splice(range.clone(), t);
        texts.splice(range, x);
    }
}

/// Where the types of `CAST(e AS type)` and `TRY_CAST(e AS type)` are: from after the `AS` to
/// before the closing parenthesis.
fn cast_types(tokens: &[Token]) -> Vec<std::ops::Range<usize>> {
    let mut regions = Vec::new();
    // Depths of the open casts' parentheses, and where each one's type starts once seen.
    let mut casts: Vec<(usize, Option<usize>)> = Vec::new();
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate() {
        match t {
            Token::LParen => {
                depth += 1;
                let before = tokens[..i].iter().rposition(|t| !is_space(t));
                if before.is_some_and(|b| {
                    matches!(&tokens[b], Token::Word(w) if w.quote_style.is_none()
                        && matches!(w.keyword, Keyword::CAST | Keyword::TRY_CAST))
                }) {
                    casts.push((depth, None));
                }
            }
            Token::RParen => {
                if let Some(&(d, start)) = casts.last()
                    && d == depth
                {
                    casts.pop();
                    if let Some(start) = start {
                        regions.push(start..i);
                    }
                }
                depth = depth.saturating_sub(1);
            }
            Token::Word(w) if w.keyword == Keyword::AS && w.quote_style.is_none() => {
                if let Some((d, start)) = casts.last_mut()
                    && *d == depth
                    && start.is_none()
                {
                    *start = Some(i + 1);
                }
            }
            _ => {}
        }
    }
    // Nested casts sit inside their outer cast's expression, never inside its type.
    regions.sort_by_key(|r| r.start);
    regions
}

/// `ARRAY(…)` and `ROW(…)` written `ARRAY<…>` and `STRUCT<…>`.
fn nested_types(tokens: &[Token], texts: &[String]) -> Vec<(Token, String)> {
    let mut out: Vec<(Token, String)> = Vec::with_capacity(tokens.len());
    let new = |t: Token| {
        let text = t.to_string();
        (t, text)
    };
    let mut depth = 0usize;
    // Depths of the parentheses turned into angle brackets.
    let mut converted: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let original = (tokens[i].clone(), texts.get(i).cloned().unwrap_or_default());
        i += 1;
        match &original.0 {
            Token::Word(w)
                if w.quote_style.is_none()
                    && matches!(w.keyword, Keyword::ARRAY | Keyword::ROW)
                    && next_solid(tokens, i).is_some_and(|j| tokens[j] == Token::LParen) =>
            {
                if w.keyword == Keyword::ROW {
                    out.push(new(Token::make_keyword("STRUCT")));
                } else {
                    out.push(original.clone());
                }
                if let Some(j) = next_solid(tokens, i) {
                    i = j + 1;
                }
                out.push(new(Token::Lt));
                depth += 1;
                converted.push(depth);
            }
            Token::LParen => {
                depth += 1;
                out.push(original);
            }
            Token::RParen => {
                if converted.last() == Some(&depth) {
                    converted.pop();
                    // `>` then a space, so that two closings never lex as `>>`.
                    out.push(new(Token::Gt));
                    out.push(new(Token::Whitespace(Whitespace::Space)));
                } else {
                    out.push(original);
                }
                depth = depth.saturating_sub(1);
            }
            _ => out.push(original),
        }
    }
    out
}

fn ident(w: &Word) -> Ident {
    match w.quote_style {
        Some(q) => Ident::with_quote(q, w.value.clone()),
        None => Ident::new(w.value.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_texts_cover_the_statement_across_lines_and_wide_characters() {
        let sql = "SELECT 'é€', x\n  FROM \"tàble\" -- ü\n\tWHERE y = 'a\nb' AND z = 1";
        let (tokens, texts) = tokenize_with_text(sql).unwrap_or_default();
        assert_eq!(texts.concat(), sql);
        assert_eq!(tokens.len(), texts.len());
        let words: Vec<&str> = texts
            .iter()
            .map(|t| t.as_str())
            .filter(|t| !t.trim().is_empty())
            .collect();
        assert_eq!(
            words,
            [
                "SELECT",
                "'é€'",
                ",",
                "x",
                "FROM",
                "\"tàble\"",
                "-- ü\n",
                "WHERE",
                "y",
                "=",
                "'a\nb'",
                "AND",
                "z",
                "=",
                "1"
            ]
        );
    }

    #[test]
    fn splits_at_top_level_semicolons_only() {
        let parts = split_statements("SELECT ';'; SELECT 2 -- x;\n;  -- only a comment\n");
        assert_eq!(
            parts,
            vec!["SELECT ';'".to_string(), "SELECT 2 -- x;".to_string()]
        );
        assert_eq!(
            split_statements("SELECT 'it''s;'; SELECT 'open"),
            vec!["SELECT 'it''s;'", "SELECT 'open"]
        );
    }

    #[test]
    fn trino_time_travel_becomes_a_marker() {
        let p = prepare("SELECT * FROM s.t FOR VERSION AS OF 42 AS x WHERE 1 = 1").ok();
        let p = p.as_ref();
        assert_eq!(
            p.map(|p| p.sql.as_str()),
            Some("SELECT * FROM \"__sqe_tt_0\" AS x WHERE 1 = 1")
        );
        assert_eq!(
            p.map(|p| p.time_travel[0].table.to_string()),
            Some("s.t".to_string())
        );
        assert_eq!(
            p.map(|p| p.time_travel[0].expr.to_string()),
            Some("42".to_string())
        );
    }

    #[test]
    fn quotes_inside_literals_and_identifiers_survive() {
        let sql = "SELECT 'it''s', \"we\"\"ird\" FROM \"t\" FOR VERSION AS OF 1 WHERE x = 'a''b'";
        let p = prepare(sql).ok();
        assert_eq!(
            p.map(|p| p.sql),
            Some("SELECT 'it''s', \"we\"\"ird\" FROM \"__sqe_tt_0\" WHERE x = 'a''b'".to_string())
        );
    }

    #[test]
    fn bare_paths_and_partitioned_by() {
        let p = prepare(
            "CREATE TABLE t PARTITIONED BY (days(ts), bucket(16, id)) AS SELECT * FROM 'a.csv'",
        )
        .ok();
        let p = p.as_ref();
        assert_eq!(
            p.map(|p| p.sql.as_str()),
            Some("CREATE TABLE t  AS SELECT * FROM \"__sqe_file_0\"")
        );
        assert_eq!(
            p.and_then(|p| p.partitioned_by.clone()),
            Some(vec!["days(ts)".to_string(), "bucket(16, id)".to_string()])
        );
        assert_eq!(p.map(|p| p.files.clone()), Some(vec!["a.csv".to_string()]));
    }

    #[test]
    fn a_string_after_a_from_that_names_no_relation_stays_a_string() {
        let sql = |s: &str| {
            prepare(s)
                .map(|p| (p.sql, p.files))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        for text in [
            "SELECT x IS DISTINCT FROM 'text' FROM t",
            "SELECT x IS NOT DISTINCT FROM 'text'",
            "SELECT trim(BOTH 'x' FROM 'xax')",
            "SELECT extract(year FROM '2020-01-01')",
            "SELECT substring('abc' FROM 2)",
        ] {
            assert_eq!(sql(text), (text.to_string(), Vec::new()), "{text}");
        }
        assert_eq!(
            sql("SELECT * FROM (SELECT * FROM 'a.csv') JOIN 'b.csv' ON true"),
            (
                "SELECT * FROM (SELECT * FROM \"__sqe_file_0\") JOIN \"__sqe_file_1\" ON true"
                    .to_string(),
                vec!["a.csv".to_string(), "b.csv".to_string()]
            )
        );
        assert_eq!(
            sql("SELECT count(*) FROM (VALUES 1) v WHERE 1 IN (SELECT 1 FROM 'c.csv')").1,
            vec!["c.csv".to_string()]
        );
    }

    #[test]
    fn trino_table_and_bare_values() {
        let sql = |s: &str| prepare(s).map(|p| p.sql).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sql("TABLE t"), "SELECT * FROM t");
        assert_eq!(
            sql("(TABLE a) UNION ALL TABLE b"),
            "(SELECT * FROM a) UNION ALL SELECT * FROM b"
        );
        assert_eq!(sql("CREATE TABLE t (a int)"), "CREATE TABLE t (a int)");
        assert_eq!(sql("DROP TABLE t"), "DROP TABLE t");
        assert_eq!(sql("VALUES 1, 2 + 3"), "VALUES (1), (2 + 3)");
        assert_eq!(
            sql("SELECT * FROM (VALUES f(1, 2), ARRAY[3, 4]) AS v(x) ORDER BY x"),
            "SELECT * FROM (VALUES (f(1, 2)), (ARRAY[3, 4])) AS v(x) ORDER BY x"
        );
        assert_eq!(
            sql("INSERT INTO t VALUES 'a', 'b'; "),
            "INSERT INTO t VALUES ('a'), ('b'); "
        );
        assert_eq!(sql("VALUES (1, 2), (3, 4)"), "VALUES (1, 2), (3, 4)");
    }
}

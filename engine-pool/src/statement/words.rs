//! A walk over a statement's tokens for the parsers of SQE's own statements (ATTACH, SHOW STATS,
//! SHOW GRANTS, …), which sqlparser does not know. Whitespace and comments are stepped over; a
//! `;` ends the statement.

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use sqe_sessions::{SqeError, SqeResult};

/// The tokens of a statement, and how far a parser has read them.
pub(crate) struct Words {
    /// Every token, whitespace and comments included, so that the text of what is left can be
    /// given back as written ([`Words::rest`]).
    tokens: Vec<Token>,
    at: usize,
}

impl Words {
    pub fn of(sql: &str) -> SqeResult<Self> {
        let tokens = Tokenizer::new(&GenericDialect {}, sql)
            .tokenize()
            .map_err(|e| SqeError::invalid(format!("syntax error: {e}")))?;
        Ok(Self { tokens, at: 0 })
    }

    /// Steps over whitespace and comments.
    fn skip_space(&mut self) {
        while matches!(self.tokens.get(self.at), Some(Token::Whitespace(_))) {
            self.at += 1;
        }
    }

    /// The next token, unless the statement has ended (`;` or the end of the text).
    pub fn peek(&mut self) -> Option<&Token> {
        self.skip_space();
        self.tokens
            .get(self.at)
            .filter(|t| !matches!(t, Token::SemiColon | Token::EOF))
    }

    pub fn next(&mut self) -> Option<Token> {
        let t = self.peek().cloned();
        if t.is_some() {
            self.at += 1;
        }
        t
    }

    /// Takes `keyword` if it comes next.
    pub fn keyword(&mut self, keyword: Keyword) -> bool {
        match self.peek() {
            Some(Token::Word(w)) if w.keyword == keyword && w.quote_style.is_none() => {
                self.at += 1;
                true
            }
            _ => false,
        }
    }

    /// Takes `keywords` if they all come next, in order; otherwise takes none of them.
    pub fn keywords(&mut self, keywords: &[Keyword]) -> bool {
        let start = self.at;
        if keywords.iter().all(|k| self.keyword(*k)) {
            return true;
        }
        self.at = start;
        false
    }

    /// Takes the unquoted word `word` (any case) if it comes next: for the words of SQE's
    /// statements that are no keyword of the parser's (`FUNCTIONS`, `GRANTS`, `FILTERS`, …).
    pub fn word(&mut self, word: &str) -> bool {
        match self.peek() {
            Some(Token::Word(w))
                if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word) =>
            {
                self.at += 1;
                true
            }
            _ => false,
        }
    }

    /// Takes `words` if they all come next, in order; otherwise takes none of them.
    pub fn words(&mut self, words: &[&str]) -> bool {
        let start = self.at;
        if words.iter().all(|w| self.word(w)) {
            return true;
        }
        self.at = start;
        false
    }

    pub fn token(&mut self, token: &Token) -> bool {
        if self.peek() == Some(token) {
            self.at += 1;
            return true;
        }
        false
    }

    /// A name: unquoted ones fold to lower case.
    pub fn name(&mut self, what: &str) -> SqeResult<String> {
        match self.next() {
            Some(Token::Word(w)) if w.quote_style.is_some() => Ok(w.value),
            Some(Token::Word(w)) => Ok(w.value.to_lowercase()),
            other => Err(expected(what, other)),
        }
    }

    /// A value: a string, a number or a word, as written.
    pub fn value(&mut self, what: &str) -> SqeResult<String> {
        match self.next() {
            Some(Token::SingleQuotedString(s)) => Ok(s),
            Some(Token::Number(n, _)) => Ok(n),
            Some(Token::Word(w)) => Ok(w.value),
            other => Err(expected(what, other)),
        }
    }

    /// Whether nothing but `;` and whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.peek().is_none()
            && self.tokens[self.at.min(self.tokens.len())..]
                .iter()
                .all(|t| matches!(t, Token::SemiColon | Token::EOF | Token::Whitespace(_)))
    }

    /// Refuses anything after the statement.
    pub fn end(&mut self, statement: &str) -> SqeResult<()> {
        if self.at_end() {
            return Ok(());
        }
        let found = self.tokens[self.at..]
            .iter()
            .find(|t| !matches!(t, Token::SemiColon | Token::EOF | Token::Whitespace(_)));
        Err(SqeError::invalid(format!(
            "syntax error: unexpected '{}' after the {statement} statement",
            found.map(ToString::to_string).unwrap_or_default()
        )))
    }

    /// Takes all that is left and gives its text as written (whitespace, comments and any later
    /// statement included), without the `;` and whitespace that end it.
    pub fn rest(&mut self) -> String {
        self.skip_space();
        let text = self.tokens[self.at..]
            .iter()
            .map(ToString::to_string)
            .collect::<String>();
        self.at = self.tokens.len();
        text.trim_end_matches(|c: char| c == ';' || c.is_whitespace())
            .to_string()
    }
}

/// The error for `found` where `what` was expected.
pub(crate) fn expected(what: &str, found: Option<Token>) -> SqeError {
    match found {
        Some(t) => SqeError::invalid(format!("syntax error: expected {what}, found '{t}'")),
        None => SqeError::invalid(format!(
            "syntax error: expected {what} at the end of the statement"
        )),
    }
}

/// The first `n` words of a statement in lower case, as far as they are unquoted words: what SQE
/// reads to tell which parser a statement goes to.
pub(crate) fn leading_words(sql: &str, n: usize) -> Vec<String> {
    let Ok(mut words) = Words::of(sql) else {
        return Vec::new();
    };
    let mut lead = Vec::new();
    while lead.len() < n {
        match words.next() {
            Some(Token::Word(w)) if w.quote_style.is_none() => lead.push(w.value.to_lowercase()),
            _ => break,
        }
    }
    lead
}

/// Refuses text that holds more than one statement (`SHOW GRANTS; DROP TABLE t`).
pub(crate) fn one_statement(sql: &str, refusal: &str) -> SqeResult<()> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize()
        .map_err(|e| SqeError::invalid(format!("syntax error: {e}")))?;
    let last = tokens
        .iter()
        .rposition(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon));
    match tokens.iter().position(|t| matches!(t, Token::SemiColon)) {
        Some(i) if last.is_some_and(|l| l > i) => Err(SqeError::invalid(refusal)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_words_skip_comments_and_stop_at_the_first_non_word() {
        assert_eq!(
            leading_words("-- a note\n  SHOW  /* x */ Row FILTERS ON t", 3),
            vec!["show", "row", "filters"]
        );
        assert_eq!(leading_words("SHOW;STATS FOR t", 2), vec!["show"]);
        assert_eq!(leading_words("\"show\" stats", 2), Vec::<String>::new());
        assert_eq!(leading_words("attach 'x' AS y", 2), vec!["attach"]);
    }

    #[test]
    fn the_rest_is_given_back_as_written() {
        let Ok(mut w) = Words::of("SHOW STATS FOR \"My\".t ;") else {
            panic!("tokenizes")
        };
        assert!(w.words(&["show", "stats"]));
        assert!(w.keyword(Keyword::FOR));
        assert_eq!(w.rest(), "\"My\".t");
        assert!(w.at_end());
    }

    #[test]
    fn a_second_statement_is_refused() {
        let refusal = "one statement only";
        assert!(one_statement("SHOW GRANTS;", refusal).is_ok());
        assert_eq!(
            one_statement("SHOW GRANTS; DROP TABLE t", refusal)
                .map_err(|e| e.message().to_string()),
            Err(refusal.to_string())
        );
    }
}

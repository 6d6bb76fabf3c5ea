//! `SHOW FUNCTIONS [LIKE 'pattern']`: every function a statement can call, one row per name (an
//! alias is a name), with Trino's columns. Argument and return types are not filled in yet.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::execution::SessionState;
use datafusion::logical_expr::{Documentation, Volatility};
use sqe_sessions::{QueryResult, SqeError, SqeResult};

use crate::engine::rows_result;

struct Row {
    name: String,
    kind: &'static str,
    deterministic: bool,
    description: String,
}

fn describe(doc: Option<&Documentation>) -> String {
    doc.map(|d| {
        d.description
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string()
    })
    .unwrap_or_default()
}

/// The pattern of `SHOW FUNCTIONS LIKE '…'`, if any (`rest` is the text after `SHOW FUNCTIONS`).
fn pattern(rest: &str) -> SqeResult<Option<String>> {
    let rest = rest.trim().trim_end_matches(';').trim();
    if rest.is_empty() {
        return Ok(None);
    }
    let bad = || SqeError::invalid("syntax error: expected SHOW FUNCTIONS [LIKE 'pattern']");
    let (word, quoted) = rest.split_at(rest.find(char::is_whitespace).ok_or_else(bad)?);
    let quoted = quoted.trim();
    if !word.eq_ignore_ascii_case("like")
        || quoted.len() < 2
        || !quoted.starts_with('\'')
        || !quoted.ends_with('\'')
    {
        return Err(bad());
    }
    let inner = &quoted[1..quoted.len() - 1];
    if inner.replace("''", "").contains('\'') {
        return Err(bad());
    }
    Ok(Some(inner.replace("''", "'")))
}

/// SQL's LIKE: `%` any run of characters, `_` one character.
fn like(pattern: &[char], text: &[char]) -> bool {
    // Where the last `%` was, and the text position it has taken up to.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '_' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '%' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '%')
}

pub(crate) fn show_functions(state: &SessionState, rest: &str) -> SqeResult<QueryResult> {
    let pattern: Option<Vec<char>> = pattern(rest)?.map(|p| p.chars().collect());
    let mut rows: Vec<Row> = Vec::new();
    let mut add = |name: &str, kind, volatility: Volatility, doc: Option<&Documentation>| {
        rows.push(Row {
            name: name.to_string(),
            kind,
            deterministic: volatility != Volatility::Volatile,
            description: describe(doc),
        })
    };
    for (name, f) in state.scalar_functions() {
        add(name, "scalar", f.signature().volatility, f.documentation());
    }
    for (name, f) in state.aggregate_functions() {
        add(
            name,
            "aggregate",
            f.signature().volatility,
            f.documentation(),
        );
    }
    for (name, f) in state.window_functions() {
        add(name, "window", f.signature().volatility, f.documentation());
    }
    for (name, f) in state.higher_order_functions() {
        add(name, "scalar", f.signature().volatility, f.documentation());
    }
    // Functions SQE plans as DataFusion's under other names or as expressions (trino.rs).
    for (name, kind) in [
        ("approx_percentile", "aggregate"),
        ("listagg", "aggregate"),
        ("variance", "aggregate"),
        ("every", "aggregate"),
        ("any_value", "aggregate"),
        ("mod", "scalar"),
        ("date", "scalar"),
        ("try", "scalar"),
        ("reduce_agg", "aggregate"),
        ("exclude_columns", "table"),
    ] {
        add(name, kind, Volatility::Immutable, None);
    }
    // SQE's own internals (what TRY and casts become) are not for calling.
    rows.retain(|r| !r.name.starts_with("sqe_") && r.name != "lambda_uses");
    if let Some(p) = &pattern {
        rows.retain(|r| like(p, &r.name.chars().collect::<Vec<_>>()));
    }
    rows.sort_by(|a, b| (&a.name, a.kind).cmp(&(&b.name, b.kind)));
    rows.dedup_by(|a, b| a.name == b.name && a.kind == b.kind);
    let text = |f: &dyn Fn(&Row) -> String| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
    };
    let schema = Schema::new(
        [
            "Function",
            "Return Type",
            "Argument Types",
            "Function Type",
            "Deterministic",
            "Description",
        ]
        .iter()
        .map(|n| Field::new(*n, DataType::Utf8, false))
        .collect::<Vec<_>>(),
    );
    rows_result(
        schema,
        vec![
            text(&|r| r.name.clone()),
            text(&|_| String::new()),
            text(&|_| String::new()),
            text(&|r| r.kind.to_string()),
            text(&|r| r.deterministic.to_string()),
            text(&|r| r.description.clone()),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::{like, pattern};

    fn matches(p: &str, t: &str) -> bool {
        like(
            &p.chars().collect::<Vec<_>>(),
            &t.chars().collect::<Vec<_>>(),
        )
    }

    #[test]
    fn like_patterns() {
        assert!(matches("date%", "date_add"));
        assert!(matches("%add", "date_add"));
        assert!(matches("d_te%", "date_add"));
        assert!(matches("%_%", "x"));
        assert!(!matches("date", "date_add"));
        assert!(!matches("%sub", "substr"));
        assert!(matches("%", ""));
    }

    #[test]
    fn like_clause() {
        assert_eq!(pattern("").ok(), Some(None));
        assert_eq!(
            pattern(" LIKE 'date%' ").ok(),
            Some(Some("date%".to_string()))
        );
        assert_eq!(pattern("like 'it''s'").ok(), Some(Some("it's".to_string())));
        assert!(pattern("LIKE date").is_err());
        assert!(pattern("FROM x").is_err());
        assert!(pattern("LIKE 'a' 'b'").is_err());
    }
}

//! The words of Trino's overflow errors ("bigint addition overflow: 9223372036854775807 + 1"), for
//! the checks that raise them (overflow.rs) and for the error module, which gives arrow's own
//! overflow errors in the same words. It imports nothing of SQE's, so both can depend on it.

use datafusion::logical_expr::Operator;

/// The word and the sign of an integer operator that overflow checks cover.
pub(crate) fn words(op: Operator) -> Option<(&'static str, &'static str)> {
    match op {
        Operator::Plus => Some(("addition", "+")),
        Operator::Minus => Some(("subtraction", "-")),
        Operator::Multiply => Some(("multiplication", "*")),
        _ => None,
    }
}

/// An arrow overflow error in Trino's words ("addition overflow: 9223372036854775807 + 1"), or
/// None for any other message.
pub(crate) fn overflow_message(message: &str) -> Option<String> {
    let rest = message
        .split_once("Overflow happened on: ")
        .map(|(_, r)| r.trim())?;
    let (word, _) = [Operator::Plus, Operator::Minus, Operator::Multiply]
        .into_iter()
        .filter_map(words)
        .find(|(_, sign)| rest.contains(&format!(" {sign} ")))?;
    Some(format!("integer {word} overflow: {rest}"))
}

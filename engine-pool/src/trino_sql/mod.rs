//! Trino's SQL semantics where DataFusion's differ, decided once here for every protocol. The
//! folder is not named `trino`: that is the wire protocol's crate, and nothing here knows of any
//! protocol.
//!
//! A statement meets the parts in this order:
//! - the session's defaults ([`configure`]): NULLs sort last in both directions, `1.5` is a
//!   DECIMAL (and `1e3` a DOUBLE), as in Trino;
//! - the parsed statement, rewritten before planning ([`rewrite_statement`]: rewriter.rs, which
//!   hands clauses, function calls, date-time literals, UNNEST and USING joins to clauses.rs,
//!   functions.rs, literals.rs, unnest.rs and using_joins.rs);
//! - binary operators as DataFusion plans them ([`TrinoOperators`]: operators.rs);
//! - the logical plan, before DataFusion's type coercion (operands.rs, which hands a double meeting
//!   a decimal to floats.rs) and after it (casts.rs,
//!   then overflow.rs: integer `+ - *` and minus as operators that fail on overflow), all placed
//!   by [`analyzer_rules`]; arrow's errors of integer casts out of range in Trino's words
//!   (overflow_text.rs, which error.rs reads).
//!
//! syntax.rs, exprs.rs, timestamps.rs and quotient.rs hold what several parts share, below them;
//! testing.rs is the unit tests' (a session wired as the engine wires it, without catalogs).
//! The folder must not read a catalog, an SQE `Session` or a policy: it sees a parsed statement,
//! plans and `sqe-functions`' UDFs, and the engine decides when each part runs.

mod casts;
mod clauses;
mod exprs;
mod floats;
mod functions;
mod literals;
mod operands;
mod operators;
mod overflow;
pub(crate) mod overflow_text;
mod quotient;
mod rewriter;
mod syntax;
#[cfg(test)]
mod testing;
mod timestamps;
mod unnest;
mod using_joins;

use std::sync::Arc;

use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionConfig;

pub(crate) use operators::TrinoOperators;
pub(crate) use rewriter::rewrite_statement;

use casts::TrinoCasts;
use operands::TrinoOperands;
use overflow::CheckedIntegers;

/// Trino's defaults on a session's DataFusion settings (a deployment's own settings come after).
pub(crate) fn configure(config: &mut SessionConfig) {
    let parser = &mut config.options_mut().sql_parser;
    parser.default_null_ordering = "nulls_last".to_string();
    parser.parse_float_as_decimal = true;
}

/// DataFusion's analyzer rules with Trino's around its type coercion: operand types settled
/// before it ([`TrinoOperands`]: so that a CASE, COALESCE or UNION around them takes Trino's
/// type, not DataFusion's), and Trino's casts after it ([`TrinoCasts`]), then integer operators
/// that fail on overflow ([`CheckedIntegers`]: on the types the casts leave).
pub(crate) fn analyzer_rules() -> Vec<Arc<dyn AnalyzerRule + Send + Sync>> {
    let mut rules = datafusion::optimizer::Analyzer::new().rules;
    let coercion = rules
        .iter()
        .position(|r| r.name() == "type_coercion")
        .unwrap_or(rules.len());
    rules.insert(coercion, Arc::new(TrinoOperands));
    rules.push(Arc::new(TrinoCasts));
    rules.push(Arc::new(CheckedIntegers));
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trinos_session_defaults() {
        let mut config = SessionConfig::new();
        configure(&mut config);
        let parser = &config.options().sql_parser;
        assert_eq!(parser.default_null_ordering, "nulls_last");
        assert!(parser.parse_float_as_decimal);
    }

    #[test]
    fn trinos_analyzer_rules_surround_type_coercion() {
        let names: Vec<String> = analyzer_rules()
            .iter()
            .map(|r| r.name().to_string())
            .collect();
        let mut datafusions: Vec<String> = datafusion::optimizer::Analyzer::new()
            .rules
            .iter()
            .map(|r| r.name().to_string())
            .collect();
        let coercion = datafusions
            .iter()
            .position(|n| n == "type_coercion")
            .unwrap_or_else(|| panic!("no type_coercion in {datafusions:?}"));
        datafusions.insert(coercion, "trino_operands".to_string());
        datafusions.push("trino_casts".to_string());
        datafusions.push("trino_checked_integers".to_string());
        assert_eq!(names, datafusions);
    }
}

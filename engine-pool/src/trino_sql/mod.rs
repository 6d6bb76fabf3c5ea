//! Trino's SQL semantics where DataFusion's differ, decided once here for every protocol: the
//! statement rewritten before planning, the analyzer rules around DataFusion's type coercion, the
//! binary operators DataFusion plans, and integer overflow. The name is not `trino`: that is the
//! wire protocol's crate, and nothing here knows of any protocol.
//!
//! What it must not do: read a catalog, a session or a policy. It sees SQL text, a parsed
//! statement, a logical or physical plan, and `sqe-functions`' UDFs; the engine decides when each
//! part runs.

mod overflow;
mod rewriter;
mod unnest;
mod using_joins;

pub(crate) use overflow::{CheckedArithmetic, overflow_message};
pub(crate) use rewriter::{TrinoOperators, analyzer_rules, configure, rewrite_statement};

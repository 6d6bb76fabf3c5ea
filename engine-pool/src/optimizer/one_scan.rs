//! Aggregates without GROUP BY over one input, each with its own filter, computed in one pass.
//!
//! TPC-DS q28 asks six `(SELECT avg(p), count(p), count(DISTINCT p) FROM store_sales WHERE …)`,
//! q09 fifteen, q88 eight counts over one join: each is a scan of its own. [`OneScan`] finds the
//! aggregates that read the same input through different filters and computes them all in one
//! aggregate over that input, each aggregate keeping only its own rows (`FILTER (WHERE …)`); the
//! input is filtered by the OR of their filters first. Each former aggregate becomes a projection of
//! its columns from that one result, shared as a CTE is ([`SharedCte`]).
//!
//! An aggregate over no rows and one whose filter kept no row answer alike (count 0, sum NULL), so
//! the answers do not change. Figures in BENCHMARKS.md ("A CTE read several times is computed once").

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, Result as DFResult};
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::utils::disjunction;
use datafusion::logical_expr::{Aggregate, Expr, ExprSchemable, Filter, LogicalPlan, Projection};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use super::SourceIdentity;
use super::shared_cte::{SharedCte, deterministic, deterministic_expr, distinct, sources};

/// The rule (module docs). It runs once subqueries are joins, before filters move.
pub(crate) struct OneScan(pub(super) SourceIdentity);

impl std::fmt::Debug for OneScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OneScan")
    }
}

/// One aggregate found: its filter (None: every row of the input) and its aggregate functions.
struct Found<'a> {
    aggregate: &'a Aggregate,
    filter: Option<&'a Expr>,
}

impl OptimizerRule for OneScan {
    fn name(&self) -> &str {
        "one_scan"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> DFResult<Transformed<LogicalPlan>> {
        if !super::switches(&config.options()).share_ctes {
            return Ok(Transformed::no(plan));
        }
        // Per input: the distinct aggregates over it.
        let mut inputs: HashMap<(&LogicalPlan, Vec<String>), Vec<Found<'_>>> = HashMap::new();
        plan.apply(|node| {
            if SharedCte::of(node).is_some() || matches!(node, LogicalPlan::RecursiveQuery(_)) {
                return Ok(TreeNodeRecursion::Jump);
            }
            if let Some((input, found)) = candidate(node) {
                let same = inputs.entry((input, sources(input, &self.0))).or_default();
                if !same.iter().any(|f| f.aggregate == found.aggregate) {
                    same.push(found);
                }
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        // Per aggregate: what replaces it.
        let mut replace: HashMap<LogicalPlan, LogicalPlan> = HashMap::new();
        for ((input, _), found) in inputs {
            if found.len() < 2 || !reads_a_table(input) || !deterministic(input) {
                continue;
            }
            for (aggregate, projection) in combine(input, &found)? {
                replace.insert(aggregate, projection);
            }
        }
        if replace.is_empty() {
            return Ok(Transformed::no(plan));
        }
        plan.transform_down(|node| {
            let found = match &node {
                LogicalPlan::Aggregate(_) => replace.get(&node),
                _ => None,
            };
            match found {
                Some(projection) => Ok(Transformed::new(
                    projection.clone(),
                    true,
                    TreeNodeRecursion::Jump,
                )),
                None => Ok(Transformed::no(node)),
            }
        })
    }
}

/// An aggregate without GROUP BY whose functions can take a filter, and its input (below its own
/// filter, if it has one).
fn candidate(node: &LogicalPlan) -> Option<(&LogicalPlan, Found<'_>)> {
    let LogicalPlan::Aggregate(aggregate) = node else {
        return None;
    };
    let schema = aggregate.input.schema();
    // Every function's arguments and filter are evaluated on the rows of every aggregate merged
    // with it, so none may fail on a row its own WHERE left out (`100 / qty`, a cast).
    let merges = |e: &Expr| {
        function(e).is_some_and(|f| {
            f.params.order_by.is_empty()
                && f.params.args.iter().all(|a| cannot_fail(a, schema))
                && f.params
                    .filter
                    .as_deref()
                    .is_none_or(|c| cannot_fail(c, schema))
        })
    };
    if !aggregate.group_expr.is_empty()
        || aggregate.aggr_expr.is_empty()
        || !aggregate.aggr_expr.iter().all(merges)
    {
        return None;
    }
    match aggregate.input.as_ref() {
        LogicalPlan::Filter(filter)
            if deterministic_expr(&filter.predicate) && cannot_fail(&filter.predicate, schema) =>
        {
            Some((
                filter.input.as_ref(),
                Found {
                    aggregate,
                    filter: Some(&filter.predicate),
                },
            ))
        }
        LogicalPlan::Filter(_) => None,
        input => Some((
            input,
            Found {
                aggregate,
                filter: None,
            },
        )),
    }
}

/// Whether an expression cannot fail on any row: columns, constants, comparisons, AND/OR/NOT,
/// BETWEEN, IN, LIKE, null tests, and casts that only widen a number (or TRY_CAST).
fn cannot_fail(expr: &Expr, schema: &DFSchema) -> bool {
    use datafusion::logical_expr::Operator::*;
    match expr {
        Expr::Column(_) | Expr::Literal(..) => true,
        Expr::Alias(a) => cannot_fail(&a.expr, schema),
        Expr::Not(e)
        | Expr::IsNull(e)
        | Expr::IsNotNull(e)
        | Expr::IsTrue(e)
        | Expr::IsFalse(e)
        | Expr::IsNotTrue(e)
        | Expr::IsNotFalse(e)
        | Expr::IsUnknown(e)
        | Expr::IsNotUnknown(e) => cannot_fail(e, schema),
        Expr::BinaryExpr(b) => {
            matches!(
                b.op,
                Eq | NotEq | Lt | LtEq | Gt | GtEq | And | Or | IsDistinctFrom | IsNotDistinctFrom
            ) && cannot_fail(&b.left, schema)
                && cannot_fail(&b.right, schema)
        }
        Expr::Between(b) => [&b.expr, &b.low, &b.high]
            .iter()
            .all(|e| cannot_fail(e, schema)),
        Expr::InList(i) => {
            cannot_fail(&i.expr, schema) && i.list.iter().all(|e| cannot_fail(e, schema))
        }
        Expr::Like(l) => cannot_fail(&l.expr, schema) && cannot_fail(&l.pattern, schema),
        Expr::TryCast(c) => cannot_fail(&c.expr, schema),
        Expr::Cast(c) => {
            cannot_fail(&c.expr, schema)
                && c.expr
                    .get_type(schema)
                    .is_ok_and(|from| widens(&from, c.field.data_type()))
        }
        _ => false,
    }
}

/// Whether every value of `from` has a value in `to`.
fn widens(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    let integer_digits = |t: &DataType| match t {
        Int8 | UInt8 => Some(3),
        Int16 | UInt16 => Some(5),
        Int32 | UInt32 => Some(10),
        Int64 => Some(19),
        UInt64 => Some(20),
        _ => None,
    };
    match (from, to) {
        _ if from == to => true,
        (f, Float64 | Float32) if f.is_numeric() => true,
        (Decimal128(p1, s1), Decimal128(p2, s2)) => {
            s2 >= s1 && i16::from(*p2) - i16::from(*s2) >= i16::from(*p1) - i16::from(*s1)
        }
        (f, Decimal128(p, s)) => {
            integer_digits(f).is_some_and(|d| i16::from(*p) - i16::from(*s) >= d)
        }
        (Int8, Int16 | Int32 | Int64) | (Int16, Int32 | Int64) | (Int32, Int64) => true,
        (Utf8 | LargeUtf8 | Utf8View, Utf8 | LargeUtf8 | Utf8View) => true,
        _ => false,
    }
}

/// The aggregate function of one of an aggregate's expressions (named or not).
fn function(expr: &Expr) -> Option<&AggregateFunction> {
    match expr {
        Expr::AggregateFunction(f) => Some(f),
        Expr::Alias(alias) => function(&alias.expr),
        _ => None,
    }
}

fn reads_a_table(plan: &LogicalPlan) -> bool {
    plan.exists(|n| Ok(matches!(n, LogicalPlan::TableScan(_))))
        .unwrap_or(false)
}

/// One aggregate of every function of `found` over `input` (each with its own filter), shared, and
/// for each aggregate of `found` the projection of its columns that replaces it.
fn combine(input: &LogicalPlan, found: &[Found<'_>]) -> DFResult<Vec<(LogicalPlan, LogicalPlan)>> {
    let name = |i: usize, j: usize| format!("__sqe_one_scan_{i}_{j}");
    let mut functions = Vec::new();
    for (i, f) in found.iter().enumerate() {
        for (j, expr) in f.aggregate.aggr_expr.iter().enumerate() {
            let Some(function) = function(expr) else {
                return Ok(vec![]);
            };
            let mut function = function.clone();
            if let Some(filter) = f.filter {
                let both = match function.params.filter.take() {
                    Some(own) => own.and(filter.clone()),
                    None => filter.clone(),
                };
                function.params.filter = Some(Box::new(both));
            }
            functions.push(Expr::AggregateFunction(function).alias(name(i, j)));
        }
    }
    // Only the rows some aggregate counts; every aggregate with a filter, or no filter at all.
    let filters: Option<Vec<Expr>> = found.iter().map(|f| f.filter.cloned()).collect();
    let mut below = Arc::new(input.clone());
    if let Some(any) = filters.and_then(|f| disjunction(distinct(f))) {
        below = Arc::new(LogicalPlan::Filter(Filter::try_new(any, below)?));
    }
    let all = LogicalPlan::Aggregate(Aggregate::try_new(below, vec![], functions)?);
    let shared = Arc::new(SharedCte::over(found.len(), all));
    found
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let columns = f
                .aggregate
                .schema
                .iter()
                .enumerate()
                .map(|(j, (qualifier, field))| {
                    Expr::Column(Column::new_unqualified(name(i, j)))
                        .alias_qualified(qualifier.cloned(), field.name())
                })
                .collect();
            let projection = Projection::try_new(columns, Arc::clone(&shared))?;
            Ok((
                LogicalPlan::Aggregate(f.aggregate.clone()),
                LogicalPlan::Projection(projection),
            ))
        })
        .collect()
}

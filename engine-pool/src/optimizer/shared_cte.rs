//! One computation for a CTE (or view) that a statement reads more than once.
//!
//! DataFusion plans each reference to a CTE as a copy of its body, and the optimizer pushes each
//! reference's own filters into its copy: TPC-DS q75 reads `all_sales` twice, once per year, and each
//! copy scans and aggregates three channels' sales again. Once the copies differ, the physical
//! rule of shared.rs cannot tell they are one computation. Here the copies are found while they are
//! still identical (after subqueries become joins, before filters move):
//!
//! 1. [`MarkSharedCtes`] puts a [`SharedCte`] under every reference to a body that is read more than
//!    once and ends in an aggregate (whose result is kept in memory for the readers: no more rows
//!    than its groups). No filter or projection of a reference crosses it, so the copies stay alike.
//! 2. [`PushFiltersIntoSharedCtes`]: when every reference filters its rows, the OR of their filters
//!    goes into the body once, so the shared computation reads only what some reference needs
//!    (q75: the two years, not every year). Each reference keeps its own filter.
//! 3. [`SharedCtePlanner`] plans each reference as a `SharedExec` over one shared result: the first
//!    reference to run computes it, the others read it. A copy some rule changed on its own (a
//!    `false` pushed into one reference) is planned apart.
//!
//! TPC-DS SF1 figures are in BENCHMARKS.md ("A CTE read several times is computed once").

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use datafusion::common::Column;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchemaRef, Result as DFResult, internal_err};
use datafusion::execution::SessionState;
use datafusion::logical_expr::utils::{conjunction, disjunction, split_conjunction};
use datafusion::logical_expr::{
    Expr, Extension, Filter, LogicalPlan, UserDefinedLogicalNode, UserDefinedLogicalNodeCore,
};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{ExtensionPlanner, PhysicalPlanner};

use super::SourceIdentity;
use super::shared::{SharedExec, SharedResult};

/// Tells the references of one body apart from those of another, across statements too.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// The body of a CTE read more than once, under each of its references. A barrier to the optimizer:
/// no filter is pushed into it (`prevent_predicate_push_down_columns`: every column) and every
/// column of the body is kept, so all references stay alike.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub(crate) struct SharedCte {
    id: u64,
    references: usize,
    /// Whether the references' filters went into `input` (which happens once).
    filtered: bool,
    input: LogicalPlan,
}

impl SharedCte {
    /// A body computed once for `references` readers, with nothing more to push into it.
    pub(super) fn over(references: usize, input: LogicalPlan) -> LogicalPlan {
        SharedCte {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            references,
            filtered: true,
            input,
        }
        .into_plan()
    }

    pub(super) fn of(plan: &LogicalPlan) -> Option<&SharedCte> {
        match plan {
            LogicalPlan::Extension(e) => e.node.as_any().downcast_ref::<SharedCte>(),
            _ => None,
        }
    }

    fn into_plan(self) -> LogicalPlan {
        LogicalPlan::Extension(Extension {
            node: Arc::new(self),
        })
    }
}

impl UserDefinedLogicalNodeCore for SharedCte {
    fn name(&self) -> &str {
        "SharedCte"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.input]
    }

    fn schema(&self) -> &DFSchemaRef {
        self.input.schema()
    }

    fn expressions(&self) -> Vec<Expr> {
        vec![]
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "SharedCte: computed once for {} references",
            self.references
        )
    }

    fn with_exprs_and_inputs(
        &self,
        exprs: Vec<Expr>,
        mut inputs: Vec<LogicalPlan>,
    ) -> DFResult<Self> {
        match inputs.pop() {
            Some(input) if exprs.is_empty() && inputs.is_empty() => Ok(Self {
                input,
                ..self.clone()
            }),
            _ => internal_err!("SharedCte has one input and no expressions"),
        }
    }

    /// Every column, whatever a reference reads: the copies must stay identical.
    fn necessary_children_exprs(&self, _output_columns: &[usize]) -> Option<Vec<Vec<usize>>> {
        Some(vec![(0..self.input.schema().fields().len()).collect()])
    }
}

/// Puts a [`SharedCte`] under each reference to a body read more than once (module docs).
pub(crate) struct MarkSharedCtes(pub(super) SourceIdentity);

impl fmt::Debug for MarkSharedCtes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MarkSharedCtes")
    }
}

impl OptimizerRule for MarkSharedCtes {
    fn name(&self) -> &str {
        "mark_shared_ctes"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> DFResult<Transformed<LogicalPlan>> {
        if !super::switches(&config.options()).share_ctes {
            return Ok(Transformed::no(plan));
        }
        let mut counts: HashMap<(&LogicalPlan, Vec<String>), usize> = HashMap::new();
        plan.apply(|node| {
            Ok(match node {
                LogicalPlan::RecursiveQuery(_) => TreeNodeRecursion::Jump,
                _ if SharedCte::of(node).is_some() => TreeNodeRecursion::Jump,
                // `FROM cte AS c` is an alias over the CTE's own: the body is the innermost one's.
                LogicalPlan::SubqueryAlias(alias)
                    if !matches!(alias.input.as_ref(), LogicalPlan::SubqueryAlias(_)) =>
                {
                    let body = alias.input.as_ref();
                    *counts.entry((body, sources(body, &self.0))).or_default() += 1;
                    TreeNodeRecursion::Continue
                }
                _ => TreeNodeRecursion::Continue,
            })
        })?;
        let shared: HashMap<(LogicalPlan, Vec<String>), (u64, usize)> = counts
            .into_iter()
            .filter(|((body, _), n)| *n > 1 && worth_sharing(body))
            .map(|((body, sources), n)| {
                let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
                ((body.clone(), sources), (id, n))
            })
            .collect();
        if shared.is_empty() {
            return Ok(Transformed::no(plan));
        }
        plan.transform_down(|node| match node {
            LogicalPlan::RecursiveQuery(_) => {
                Ok(Transformed::new(node, false, TreeNodeRecursion::Jump))
            }
            LogicalPlan::SubqueryAlias(mut alias)
                if !matches!(alias.input.as_ref(), LogicalPlan::SubqueryAlias(_)) =>
            {
                let key = (alias.input.as_ref().clone(), sources(&alias.input, &self.0));
                let Some(&(id, references)) = shared.get(&key) else {
                    return Ok(Transformed::no(LogicalPlan::SubqueryAlias(alias)));
                };
                let input = Arc::unwrap_or_clone(alias.input);
                let cte = SharedCte {
                    id,
                    references,
                    filtered: false,
                    input,
                };
                alias.input = Arc::new(cte.into_plan());
                Ok(Transformed::new(
                    LogicalPlan::SubqueryAlias(alias),
                    true,
                    TreeNodeRecursion::Jump,
                ))
            }
            _ => Ok(Transformed::no(node)),
        })
    }
}

/// What each of a plan's scans reads, in order. Two plans compare equal when their scans name the
/// same tables, whatever stands behind a name (a view's `sales` in one schema or another,
/// `generate_series(1, 10)` or `(1, 1000)`): only plans whose scans read the same data too are one
/// computation. A source the engine cannot identify stands for itself (a CTE's copies share theirs).
pub(super) fn sources(plan: &LogicalPlan, identity: &SourceIdentity) -> Vec<String> {
    let mut found = Vec::new();
    let _ = plan.apply(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            let source = scan.source.as_ref();
            found.push(
                identity(source).unwrap_or_else(|| format!("{:p}", Arc::as_ptr(&scan.source))),
            );
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}

/// A body worth computing once: it reads a table, ends in an aggregate (whose result is no more
/// rows than its groups), and gives the same rows every time.
fn worth_sharing(body: &LogicalPlan) -> bool {
    let reads_table = body
        .exists(|n| Ok(matches!(n, LogicalPlan::TableScan(_))))
        .unwrap_or(false);
    reads_table && ends_in_aggregate(body) && deterministic(body)
}

/// Whether a plan gives the same rows every time it runs: nothing volatile, nothing correlated, no
/// subquery or recursion left.
pub(super) fn deterministic(plan: &LogicalPlan) -> bool {
    !plan
        .exists(|node| {
            Ok(matches!(
                node,
                LogicalPlan::RecursiveQuery(_) | LogicalPlan::Subquery(_)
            ) || node.contains_outer_reference()
                || node.expressions().iter().any(|e| !deterministic_expr(e)))
        })
        .unwrap_or(true)
}

/// Whether an expression gives the same value for the same row every time: nothing volatile, no
/// subquery, no outer column.
pub(super) fn deterministic_expr(expr: &Expr) -> bool {
    !expr.is_volatile()
        && !expr
            .exists(|e| {
                Ok(matches!(
                    e,
                    Expr::ScalarSubquery(_)
                        | Expr::Exists(_)
                        | Expr::InSubquery(_)
                        | Expr::OuterReferenceColumn(..)
                ))
            })
            .unwrap_or(true)
}

/// Whether every row of the plan comes out of an aggregate (or DISTINCT), through nodes that keep
/// or drop rows but add none.
fn ends_in_aggregate(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Aggregate(_) | LogicalPlan::Distinct(_) => true,
        LogicalPlan::Projection(_)
        | LogicalPlan::Filter(_)
        | LogicalPlan::Sort(_)
        | LogicalPlan::Limit(_)
        | LogicalPlan::SubqueryAlias(_)
        | LogicalPlan::Window(_)
        | LogicalPlan::Union(_) => plan.inputs().into_iter().all(ends_in_aggregate),
        _ => false,
    }
}

/// When every reference to a shared body filters it, puts the OR of their filters into the body
/// (once; each reference keeps its own filter above). DataFusion's filter pushdown then takes it
/// further down on its next pass.
#[derive(Debug)]
pub(crate) struct PushFiltersIntoSharedCtes;

impl OptimizerRule for PushFiltersIntoSharedCtes {
    fn name(&self) -> &str {
        "push_filters_into_shared_ctes"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> DFResult<Transformed<LogicalPlan>> {
        // Per body: its references, and the filters right above them.
        let mut found: HashMap<u64, (usize, Vec<Expr>)> = HashMap::new();
        plan.apply(|node| {
            if let LogicalPlan::Filter(filter) = node
                && let Some(cte) = SharedCte::of(&filter.input)
                && !cte.filtered
            {
                found
                    .entry(cte.id)
                    .or_default()
                    .1
                    .push(filter.predicate.clone());
            }
            Ok(match SharedCte::of(node) {
                Some(cte) => {
                    if !cte.filtered {
                        found.entry(cte.id).or_default().0 += 1;
                    }
                    TreeNodeRecursion::Jump
                }
                None => TreeNodeRecursion::Continue,
            })
        })?;
        let pushed: HashMap<u64, Expr> = found
            .into_iter()
            .filter(|(_, (references, filters))| {
                filters.len() == *references && filters.iter().all(deterministic_expr)
            })
            .filter_map(|(id, (_, filters))| Some((id, any_of(&filters)?)))
            .collect();
        if pushed.is_empty() {
            return Ok(Transformed::no(plan));
        }
        plan.transform_down(|node| {
            let Some(cte) = SharedCte::of(&node) else {
                return Ok(Transformed::no(node));
            };
            let Some(predicate) = pushed.get(&cte.id).filter(|_| !cte.filtered) else {
                return Ok(Transformed::new(node, false, TreeNodeRecursion::Jump));
            };
            let cte = SharedCte {
                filtered: true,
                input: LogicalPlan::Filter(Filter::try_new(
                    predicate.clone(),
                    Arc::new(cte.input.clone()),
                )?),
                ..cte.clone()
            };
            Ok(Transformed::new(
                cte.into_plan(),
                true,
                TreeNodeRecursion::Jump,
            ))
        })
    }
}

/// A filter that keeps every row some of `filters` keeps: their OR, and beside it, for each column
/// every filter tests on its own, the OR of those tests. The OR as a whole may not cross the body's
/// aggregate (`year = 2001 AND total > 0 OR year = 2002`), but `year = 2001 OR year = 2002` does.
fn any_of(filters: &[Expr]) -> Option<Expr> {
    let whole = disjunction(distinct(filters.to_vec()))?;
    // Per filter, its conjuncts that read one column, by column.
    let by_column: Vec<HashMap<Column, Vec<Expr>>> = filters
        .iter()
        .map(|f| {
            let mut tests: HashMap<Column, Vec<Expr>> = HashMap::new();
            for c in split_conjunction(f) {
                let columns = c.column_refs();
                if let [column] = columns.into_iter().collect::<Vec<_>>()[..] {
                    tests.entry(column.clone()).or_default().push(c.clone());
                }
            }
            tests
        })
        .collect();
    let mut parts = vec![whole];
    let mut columns: Vec<&Column> = by_column[0].keys().collect();
    columns.sort();
    for column in columns {
        let per_filter: Option<Vec<Expr>> = by_column
            .iter()
            .map(|tests| conjunction(tests.get(column)?.iter().cloned()))
            .collect();
        if let Some(any) = per_filter.and_then(|each| disjunction(distinct(each)))
            && !parts.contains(&any)
        {
            parts.push(any);
        }
    }
    conjunction(parts)
}

/// `exprs` without repeats, in their order.
pub(super) fn distinct(exprs: Vec<Expr>) -> Vec<Expr> {
    let mut kept: Vec<Expr> = Vec::with_capacity(exprs.len());
    for e in exprs {
        if !kept.contains(&e) {
            kept.push(e);
        }
    }
    kept
}

/// Plans the references to one body over one shared result. One per statement's planning.
#[derive(Debug, Default)]
pub(crate) struct SharedCtePlanner {
    /// Per body: the first copy's plan as text, and the result copies reading alike share.
    results: Mutex<HashMap<u64, (String, Arc<SharedResult>)>>,
}

/// A logical plan as text, without the numbers that the optimizer's made-up names take from a
/// counter of the whole statement (`__common_expr_3` in one copy is `__common_expr_7` in the next).
fn canonical(plan: &LogicalPlan) -> String {
    let text = plan.display_indent_schema().to_string();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find("__") {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let name_len = from
            .char_indices()
            .find(|&(i, c)| i >= 2 && !(c.is_ascii_lowercase() || c == '_'))
            .map_or(from.len(), |(i, _)| i);
        out.push_str(&from[..name_len]);
        rest = from[name_len..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

#[async_trait::async_trait]
impl ExtensionPlanner for SharedCtePlanner {
    async fn plan_extension(
        &self,
        _planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        _session_state: &SessionState,
    ) -> DFResult<Option<Arc<dyn ExecutionPlan>>> {
        let Some(cte) = node.as_any().downcast_ref::<SharedCte>() else {
            return Ok(None);
        };
        let ([logical], [input]) = (logical_inputs, physical_inputs) else {
            return internal_err!("SharedCte has one input");
        };
        let text = canonical(logical);
        let result = {
            let mut results = self.results.lock().unwrap_or_else(|e| e.into_inner());
            let (first, result) = results
                .entry(cte.id)
                .or_insert_with(|| (text.clone(), Arc::new(SharedResult::new(cte.references))));
            (*first == text).then(|| Arc::clone(result))
        };
        Ok(Some(match result {
            Some(result) => Arc::new(SharedExec::new(Arc::clone(input), result)),
            None => Arc::clone(input),
        }))
    }
}

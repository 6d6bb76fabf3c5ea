//! No statement takes the process down. A statement is refused with a clear error when its text is
//! longer than [`MAX_QUERY_LENGTH`] or its expressions or set operations nest deeper than the
//! engine was built to plan and run; what is admitted is planned on a stack of its own, large enough
//! for every recursion of parsing and planning at those depths; and a panic anywhere in a statement
//! becomes that statement's error.
//!
//! The rows of a query are computed on the runtime's threads, outside the planning stack, and
//! DataFusion evaluates an expression by recursion, a few hundred bytes of stack a level (4 KB in
//! a debug build). The limits are set so that what they admit runs on [`WORKER_STACK`], the stack
//! SQE's binaries give their runtime threads.

use std::any::Any;
use std::future::Future;
use std::ops::ControlFlow;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

use datafusion::sql::sqlparser::ast::{Expr, Query, SetExpr, Visit, Visitor};
use futures::StreamExt;
use sqe_sessions::{BatchStream, SqeError, SqeResult};

/// The stack the runtime's threads need for the deepest expression the guard admits, with room to
/// spare (a runtime built with `thread_stack_size(WORKER_STACK)`).
pub const WORKER_STACK: usize = 16 << 20;
/// Longest statement text accepted, in bytes: the limit the protocols also hold a statement to when
/// it is prepared, kept in `sqe-sessions` where they reach it.
pub const MAX_QUERY_LENGTH: usize = sqe_sessions::MAX_STATEMENT_BYTES;
/// Deepest nesting of expressions accepted: a chain `a + b + … ` of n terms nests n - 1 deep.
pub const MAX_EXPRESSION_DEPTH: usize = 1_000;
/// Most set operations (UNION, INTERSECT, EXCEPT) in one query body. DataFusion plans a union in
/// time that grows with the square of its branches (a debug build: 1,000 in 9 s, 2,000 in 38 s).
pub const MAX_SET_OPERATIONS: usize = 1_000;
/// The stack a statement's planning may need for what the guard admits (a debug build plans a
/// 1,001-branch union and a 900-term sum in less than 13 MiB). A poll that starts with less left on
/// its thread's stack, as on SQE's runtime threads ([`WORKER_STACK`]) or a shell's main thread,
/// runs on a fresh stack of [`PLANNING_STACK`].
const PLANNING_RED_ZONE: usize = 16 << 20;
/// The stack grown for planning where the thread's own is short. Only what a statement touches is
/// ever backed by memory.
const PLANNING_STACK: usize = 64 << 20;

/// Refuses a statement text longer than the engine accepts, in the words a protocol refusing it at
/// prepare time uses.
pub fn check_length(sql: &str) -> SqeResult<()> {
    sqe_sessions::check_statement_length(sql)
}

/// Refuses a statement whose expressions nest deeper than [`MAX_EXPRESSION_DEPTH`] or with more
/// than [`MAX_SET_OPERATIONS`] set operations in one query body. It stops looking at the first
/// excess, so the check itself never goes deeper than the limits.
pub fn check_depth(statement: &impl Visit) -> SqeResult<()> {
    let mut depth = Depth::default();
    match statement.visit(&mut depth) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(e) => Err(e),
    }
}

#[derive(Default)]
struct Depth {
    expressions: usize,
}

impl Visitor for Depth {
    type Break = SqeError;

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<SqeError> {
        let operations = set_operations(&query.body);
        if operations > MAX_SET_OPERATIONS {
            return ControlFlow::Break(SqeError::invalid(format!(
                "query has {operations} set operations (UNION, INTERSECT, EXCEPT); SQE plans at most {MAX_SET_OPERATIONS}; for many rows of constants use one VALUES list"
            )));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<SqeError> {
        self.expressions += 1;
        if self.expressions > MAX_EXPRESSION_DEPTH {
            return ControlFlow::Break(SqeError::invalid(format!(
                "expression nests more than {MAX_EXPRESSION_DEPTH} deep (a sum or an AND/OR chain of that many terms); split it, or use IN (…) for a long list of alternatives"
            )));
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<SqeError> {
        self.expressions -= 1;
        ControlFlow::Continue(())
    }
}

/// The set operations directly in a query body (those of nested queries count for those).
fn set_operations(body: &SetExpr) -> usize {
    let mut pending = vec![body];
    let mut count = 0;
    while let Some(e) = pending.pop() {
        if let SetExpr::SetOperation { left, right, .. } = e {
            count += 1;
            pending.push(left);
            pending.push(right);
        }
    }
    count
}

fn panic_text(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

/// The error a panic in a statement becomes: internal, logged with what panicked.
fn panicked(panic: &(dyn Any + Send)) -> SqeError {
    SqeError::internal(format!("statement panicked: {}", panic_text(panic)))
}

/// A statement's planning: each poll has [`PLANNING_RED_ZONE`] of stack, and a panic ends it with
/// an error.
pub struct Planning<F> {
    inner: Pin<Box<F>>,
}

impl<F> Planning<F> {
    pub fn new(inner: F) -> Self {
        Self {
            inner: Box::pin(inner),
        }
    }
}

impl<T, F: Future<Output = SqeResult<T>>> Future for Planning<F> {
    type Output = SqeResult<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.inner;
        let polled = catch_unwind(AssertUnwindSafe(|| {
            stacker::maybe_grow(PLANNING_RED_ZONE, PLANNING_STACK, || {
                inner.as_mut().poll(cx)
            })
        }));
        polled.unwrap_or_else(|p| Poll::Ready(Err(panicked(p.as_ref()))))
    }
}

/// The result's rows, ending with an error instead of a panic if computing them panics.
pub fn catching_panics(batches: BatchStream) -> BatchStream {
    AssertUnwindSafe(batches)
        .catch_unwind()
        .map(|item| item.unwrap_or_else(|p| Err(panicked(p.as_ref()))))
        .boxed()
}

//! `MERGE INTO t [AS x] USING source [AS s] ON … WHEN MATCHED [AND …] THEN UPDATE SET … | DELETE
//! … WHEN NOT MATCHED [AND …] THEN INSERT [(columns)] VALUES (…)`, in Trino's syntax, over the
//! row-level machinery of rows.rs.
//!
//! One query, planned as the caller's own, joins the target's rows (with `$path` and `$pos`, behind
//! the caller's row filters and masks) to every source row (`target RIGHT JOIN source ON …`) and
//! says for each pair which clause acts: the first WHEN MATCHED clause whose condition holds for a
//! matched pair, the first WHEN NOT MATCHED clause for a source row that matched nothing; and
//! each column's value under that clause. A target row that two source rows act on is an error,
//! as in Trino. The rows clauses update or delete are then changed as an UPDATE or DELETE changes
//! them (copy-on-write or merge-on-read, by the table's `write.merge.mode`), and the rows the
//! INSERT clauses make are written beside them, all in one snapshot.

use std::collections::HashSet;

use datafusion::arrow::array::{Array, Int32Array, Int64Array, RecordBatch, StringArray};
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, Expr, Merge, MergeAction, MergeClauseKind, MergeInsertKind, ObjectName,
    Statement, TableFactor,
};
use datafusion::sql::sqlparser::parser::Parser;
use sqe_sessions::{SqeError, SqeResult, quote_identifier};

use crate::context::Ctx;
use crate::governance::model::{Object, Privilege};
use crate::names::{QUERY_CATALOG, QUERY_SCHEMA, normalize_ident, resolve_name};
use crate::statement::dialect::SqeDialect;

/// A MERGE, resolved against its target table.
#[derive(Clone)]
pub(crate) struct MergePlan {
    /// The name the target goes by in the clauses (its alias, else its own name).
    alias: String,
    source: TableFactor,
    on: Expr,
    clauses: Vec<Clause>,
}

/// One WHEN clause; clauses are numbered from 1 in the order written.
#[derive(Clone)]
enum Clause {
    Update {
        predicate: Option<Expr>,
        assignments: Vec<(String, Expr)>,
    },
    Delete {
        predicate: Option<Expr>,
    },
    Insert {
        predicate: Option<Expr>,
        /// Each column given, with its value.
        values: Vec<(String, Expr)>,
    },
}

impl Clause {
    fn matched(&self) -> bool {
        !matches!(self, Clause::Insert { .. })
    }

    fn predicate(&self) -> Option<&Expr> {
        match self {
            Clause::Update { predicate, .. }
            | Clause::Delete { predicate }
            | Clause::Insert { predicate, .. } => predicate.as_ref(),
        }
    }

    /// The value this clause gives `column`, if it gives one.
    fn value(&self, column: &str) -> Option<&Expr> {
        match self {
            Clause::Update { assignments, .. } => assignments,
            Clause::Insert { values, .. } => values,
            Clause::Delete { .. } => return None,
        }
        .iter()
        .find(|(c, _)| c == column)
        .map(|(_, v)| v)
    }
}

/// The column of a MERGE's rows that holds the number of the clause acting on the row (0: none).
pub(crate) const ACTION: &str = "__sqe_action";

/// What the clauses do, by clause number: for rows.rs to change the rows.
pub(crate) struct Actions {
    /// The UPDATE clauses, and for each column the clauses that assign it.
    pub updates: Vec<i32>,
    pub assigned: Vec<Vec<i32>>,
    pub deletes: Vec<i32>,
    pub inserts: Vec<i32>,
}

/// A MERGE's target (as named, and as an object) and its plan, once the caller holds the
/// privileges its clauses' actions need (INSERT, UPDATE, DELETE) on the target.
pub(crate) fn plan<'a>(
    ctx: &Ctx<'_>,
    merge: &'a Merge,
) -> SqeResult<(&'a ObjectName, Object, MergePlan)> {
    let TableFactor::Table { name, alias, .. } = &merge.table else {
        return Err(SqeError::unsupported(
            "MERGE INTO needs a table as its target",
        ));
    };
    if merge.output.is_some() {
        return Err(SqeError::unsupported("MERGE with OUTPUT is not supported"));
    }
    let (catalog, schema, table) = resolve_name(ctx.session, name)?;
    let object = Object::table(&catalog, &schema, &table);
    let alias = match alias {
        Some(a) => normalize_ident(&a.name),
        None => table.clone(),
    };
    let mut clauses = Vec::with_capacity(merge.clauses.len());
    for clause in &merge.clauses {
        let predicate = clause.predicate.clone();
        clauses.push(match (&clause.clause_kind, &clause.action) {
            (MergeClauseKind::Matched, MergeAction::Update(update)) => {
                if update.update_predicate.is_some() || update.delete_predicate.is_some() {
                    return Err(SqeError::unsupported(
                        "MERGE's UPDATE … WHERE and DELETE WHERE are not supported: put the condition after WHEN MATCHED AND",
                    ));
                }
                let mut assignments = Vec::with_capacity(update.assignments.len());
                for a in &update.assignments {
                    let AssignmentTarget::ColumnName(target) = &a.target else {
                        return Err(SqeError::unsupported(
                            "UPDATE of a tuple of columns is not supported: assign each column",
                        ));
                    };
                    assignments.push((column_of(target, &[&alias, &table])?, a.value.clone()));
                }
                Clause::Update {
                    predicate,
                    assignments,
                }
            }
            (MergeClauseKind::Matched, MergeAction::Delete { .. }) => Clause::Delete { predicate },
            (
                MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget,
                MergeAction::Insert(insert),
            ) => {
                let MergeInsertKind::Values(values) = &insert.kind else {
                    return Err(SqeError::unsupported(
                        "MERGE's INSERT needs VALUES (…)",
                    ));
                };
                let [row] = values.rows.as_slice() else {
                    return Err(SqeError::invalid(
                        "MERGE's INSERT takes one row of VALUES",
                    ));
                };
                if insert.insert_predicate.is_some() {
                    return Err(SqeError::unsupported(
                        "MERGE's INSERT … WHERE is not supported: put the condition after WHEN NOT MATCHED AND",
                    ));
                }
                // Without a column list, the values are the table's columns in order (named when
                // the table is known).
                let columns = match insert.columns.is_empty() {
                    true => vec![String::new(); row.len()],
                    false => insert
                        .columns
                        .iter()
                        .map(|c| column_of(c, &[&alias, &table]))
                        .collect::<SqeResult<Vec<_>>>()?,
                };
                if columns.len() != row.len() {
                    return Err(SqeError::invalid(format!(
                        "MERGE's INSERT names {} columns but gives {} values",
                        columns.len(),
                        row.len()
                    )));
                }
                Clause::Insert {
                    predicate,
                    values: columns.into_iter().zip(row.iter().cloned()).collect(),
                }
            }
            (kind, action) => {
                return Err(SqeError::unsupported(format!(
                    "MERGE's WHEN {kind} THEN {} is not supported: WHEN MATCHED takes UPDATE or DELETE, WHEN NOT MATCHED takes INSERT",
                    action.to_string().split_whitespace().next().unwrap_or_default()
                )));
            }
        });
    }
    if clauses.is_empty() {
        return Err(SqeError::invalid("MERGE needs at least one WHEN clause"));
    }
    for (privilege, any) in [
        (
            Privilege::Update,
            clauses.iter().any(|c| matches!(c, Clause::Update { .. })),
        ),
        (
            Privilege::Delete,
            clauses.iter().any(|c| matches!(c, Clause::Delete { .. })),
        ),
        (
            Privilege::Insert,
            clauses.iter().any(|c| matches!(c, Clause::Insert { .. })),
        ),
    ] {
        if any {
            ctx.governance
                .authorize(ctx.session, privilege, &object, || {
                    SqeError::not_found(format!("table '{object}' does not exist"))
                })?;
        }
    }
    let plan = MergePlan {
        alias,
        source: merge.source.clone(),
        on: merge.on.as_ref().clone(),
        clauses,
    };
    Ok((name, object, plan))
}

impl MergePlan {
    /// The columns the clauses name, checked against the table's `columns`: each named once per
    /// clause, each known; an INSERT gives as many values as columns (all the table's when it
    /// names none).
    pub(crate) fn resolve(&mut self, columns: &[String], object: &Object) -> SqeResult<()> {
        for clause in &mut self.clauses {
            let named = match clause {
                Clause::Update { assignments, .. } => assignments,
                Clause::Insert { values, .. } => values,
                Clause::Delete { .. } => continue,
            };
            if named.iter().all(|(c, _)| c.is_empty()) {
                if named.len() != columns.len() {
                    return Err(SqeError::invalid(format!(
                        "MERGE's INSERT gives {} values for the {} columns of '{object}'",
                        named.len(),
                        columns.len()
                    )));
                }
                for ((column, _), name) in named.iter_mut().zip(columns) {
                    column.clone_from(name);
                }
            }
            let mut seen = HashSet::new();
            for (column, _) in named.iter() {
                if !columns.contains(column) {
                    return Err(SqeError::not_found(format!(
                        "column '{column}' cannot be resolved in table '{object}'"
                    )));
                }
                if !seen.insert(column.clone()) {
                    return Err(SqeError::invalid(format!(
                        "column '{column}' is assigned more than once"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The query that finds what the MERGE does: each target row a clause acts on (`$path`,
    /// `$pos`) and each source row an INSERT clause acts on (NULL `$path`), the clause's number
    /// ([`ACTION`]) and each of the table's `columns`' values under it (NULL where the clause
    /// gives none).
    pub(crate) fn query(
        &self,
        columns: &[String],
        target: &str,
        value_name: impl Fn(usize) -> String,
    ) -> SqeResult<Statement> {
        let t = quote_identifier(&self.alias);
        let path = format!("{t}.{}", quote_identifier(crate::catalog::row_ids::PATH));
        let pos = format!("{t}.{}", quote_identifier(crate::catalog::row_ids::POS));
        let when = |clause: &Clause| {
            let side = match clause.matched() {
                true => format!("{path} IS NOT NULL"),
                false => format!("{path} IS NULL"),
            };
            match clause.predicate() {
                Some(p) => format!("{side} AND ({p})"),
                None => side,
            }
        };
        let mut action = String::from("CASE");
        for (i, clause) in self.clauses.iter().enumerate() {
            action.push_str(&format!(" WHEN {} THEN {}", when(clause), i + 1));
        }
        action.push_str(" ELSE 0 END");
        let mut select = vec![
            format!(
                "{path} AS {}",
                quote_identifier(crate::catalog::row_ids::PATH)
            ),
            format!(
                "{pos} AS {}",
                quote_identifier(crate::catalog::row_ids::POS)
            ),
            format!("CAST({action} AS integer) AS {}", quote_identifier(ACTION)),
        ];
        for (i, column) in columns.iter().enumerate() {
            let mut value = String::from("CASE");
            let mut any = false;
            for clause in &self.clauses {
                match clause.value(column) {
                    Some(v) => {
                        any = true;
                        value.push_str(&format!(" WHEN {} THEN {v}", when(clause)));
                    }
                    None => value.push_str(&format!(" WHEN {} THEN NULL", when(clause))),
                }
            }
            value.push_str(" END");
            if !any {
                value = "NULL".to_string();
            }
            select.push(format!("{value} AS {}", quote_identifier(&value_name(i))));
        }
        let sql = format!(
            "SELECT {} FROM {}.{}.{} AS {t} RIGHT JOIN {} ON {}",
            select.join(", "),
            quote_identifier(QUERY_CATALOG),
            quote_identifier(QUERY_SCHEMA),
            quote_identifier(target),
            self.source,
            self.on
        );
        // The clauses' conditions repeat in each column's value: a MERGE small as written may be
        // large here.
        crate::guard::check_length(&sql).map_err(|e| {
            SqeError::invalid(format!(
                "MERGE is too large once its WHEN clauses are spelled out for each of the table's {} columns: {}",
                columns.len(),
                e.message()
            ))
        })?;
        let mut statements = Parser::parse_sql(&SqeDialect::default(), &sql)
            .map_err(|e| SqeError::invalid(format!("MERGE cannot be planned: {e}")))?;
        let (Some(statement), None) = (statements.pop(), statements.pop()) else {
            return Err(SqeError::internal("MERGE's query is not one statement"));
        };
        crate::guard::check_depth(&statement)?;
        Ok(statement)
    }

    /// The clause numbers by action, and for each of `columns` the UPDATE clauses that assign it.
    pub(crate) fn actions(&self, columns: &[String]) -> Actions {
        let numbered = || self.clauses.iter().zip(1..);
        let of =
            |f: fn(&Clause) -> bool| numbered().filter(|(c, _)| f(c)).map(|(_, n)| n).collect();
        Actions {
            updates: of(|c| matches!(c, Clause::Update { .. })),
            deletes: of(|c| matches!(c, Clause::Delete { .. })),
            inserts: of(|c| matches!(c, Clause::Insert { .. })),
            assigned: columns
                .iter()
                .map(|column| {
                    numbered()
                        .filter(|(c, _)| {
                            matches!(c, Clause::Update { .. }) && c.value(column).is_some()
                        })
                        .map(|(_, n)| n)
                        .collect()
                })
                .collect(),
        }
    }
}

/// A column named in a clause: `c`, or `t.c` with one of `tables` (the target's alias or name).
fn column_of(name: &ObjectName, tables: &[&str]) -> SqeResult<String> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| p.as_ident().map(normalize_ident).unwrap_or_default())
        .collect();
    match parts.as_slice() {
        [c] => Ok(c.clone()),
        [t, c] if tables.contains(&t.as_str()) => Ok(c.clone()),
        _ => Err(SqeError::not_found(format!(
            "column '{name}' cannot be resolved in MERGE's target"
        ))),
    }
}

/// Checks that no target row is acted on twice (two source rows matched it and a clause acted on
/// each), and counts the rows acted on.
pub(crate) fn check_matches(batches: &[RecordBatch]) -> SqeResult<u64> {
    let mut seen: HashSet<(String, i64)> = HashSet::new();
    let mut rows = 0u64;
    for batch in batches {
        let (Some(paths), Some(positions), Some(actions)) = (
            batch.column(0).as_any().downcast_ref::<StringArray>(),
            batch.column(1).as_any().downcast_ref::<Int64Array>(),
            batch.column(2).as_any().downcast_ref::<Int32Array>(),
        ) else {
            return Err(SqeError::internal(
                "MERGE's rows are not (string, bigint, integer)",
            ));
        };
        for i in 0..batch.num_rows() {
            if actions.is_null(i) || actions.value(i) == 0 {
                continue;
            }
            rows += 1;
            if paths.is_valid(i) && !seen.insert((paths.value(i).to_string(), positions.value(i))) {
                return Err(SqeError::invalid(
                    "One MERGE target table row matched more than one source row",
                ));
            }
        }
    }
    Ok(rows)
}

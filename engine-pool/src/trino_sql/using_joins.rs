//! A column joined by `USING` in more than one join of a chain
//! (`a JOIN b USING (k) JOIN c USING (k)`) is one column, and SQL lets a query name it unqualified.
//! DataFusion 54 keeps each `USING` pair apart and calls `k` ambiguous once it joins three tables
//! (dbt's catalog query does exactly this). Such references are qualified here before planning:
//! `a.k` when the chain's joins keep the first relation's rows (inner and left joins), else
//! `COALESCE(a.k, b.k, c.k)`.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Ident, JoinConstraint, JoinOperator, OrderByKind, Query, Select, SelectItem, TableFactor,
    TableWithJoins, VisitMut, VisitorMut,
};

/// What an unqualified name stands for in one SELECT.
struct Merged {
    name: String,
    replacement: Expr,
}

/// Qualifies references to chained `USING` columns in `select`; gives back what was merged, for
/// the query's ORDER BY.
pub(crate) fn qualify_select(select: &mut Select) -> Vec<(String, Expr)> {
    let merged: Vec<Merged> = select.from.iter().flat_map(chained_using).collect();
    if merged.is_empty() {
        return Vec::new();
    }
    let mut rewriter = Rewriter {
        merged: &merged,
        depth: 0,
    };
    for item in &mut select.projection {
        match item {
            SelectItem::UnnamedExpr(Expr::Identifier(id)) if find(&merged, id).is_some() => {
                // The output column keeps its name.
                let alias = id.clone();
                let expr = find(&merged, id)
                    .cloned()
                    .unwrap_or(Expr::Identifier(alias.clone()));
                *item = SelectItem::ExprWithAlias { expr, alias };
            }
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                let _ = e.visit(&mut rewriter);
            }
            _ => {}
        }
    }
    if let Some(e) = &mut select.selection {
        let _ = e.visit(&mut rewriter);
    }
    if let datafusion::sql::sqlparser::ast::GroupByExpr::Expressions(exprs, _) =
        &mut select.group_by
    {
        for e in exprs {
            let _ = e.visit(&mut rewriter);
        }
    }
    if let Some(e) = &mut select.having {
        let _ = e.visit(&mut rewriter);
    }
    merged
        .into_iter()
        .map(|m| (m.name, m.replacement))
        .collect()
}

/// Qualifies the ORDER BY keys of `query` that name a merged column of its SELECT.
pub(crate) fn qualify_order_by(query: &mut Query, merged: &[(String, Expr)]) {
    let Some(order_by) = &mut query.order_by else {
        return;
    };
    let OrderByKind::Expressions(keys) = &mut order_by.kind else {
        return;
    };
    let merged: Vec<Merged> = merged
        .iter()
        .map(|(name, replacement)| Merged {
            name: name.clone(),
            replacement: replacement.clone(),
        })
        .collect();
    let mut rewriter = Rewriter {
        merged: &merged,
        depth: 0,
    };
    for key in keys {
        let _ = key.expr.visit(&mut rewriter);
    }
}

fn normalized(id: &Ident) -> String {
    match id.quote_style {
        Some(_) => id.value.clone(),
        None => id.value.to_lowercase(),
    }
}

fn find<'a>(merged: &'a [Merged], id: &Ident) -> Option<&'a Expr> {
    let name = normalized(id);
    merged
        .iter()
        .find(|m| m.name == name)
        .map(|m| &m.replacement)
}

/// The name a relation's columns are qualified with, if it has one.
fn qualifier(factor: &TableFactor) -> Option<Ident> {
    match factor {
        TableFactor::Table { alias: Some(a), .. }
        | TableFactor::Derived { alias: Some(a), .. }
        | TableFactor::Function { alias: Some(a), .. } => Some(a.name.clone()),
        TableFactor::Table {
            name, alias: None, ..
        } => name.0.last().and_then(|p| p.as_ident()).cloned(),
        _ => None,
    }
}

/// The columns named by `USING` in two or more joins of `from`, with what each stands for.
fn chained_using(from: &TableWithJoins) -> Vec<Merged> {
    let Some(first) = qualifier(&from.relation) else {
        return Vec::new();
    };
    // Per column: the relations it was joined from, and whether any join keeps right-side rows.
    let mut columns: Vec<(String, Vec<Ident>, bool)> = Vec::new();
    let mut relations = vec![first];
    for join in &from.joins {
        let Some(q) = qualifier(&join.relation) else {
            return Vec::new();
        };
        relations.push(q.clone());
        let (constraint, keeps_right) = match &join.join_operator {
            JoinOperator::Join(c)
            | JoinOperator::Inner(c)
            | JoinOperator::Left(c)
            | JoinOperator::LeftOuter(c) => (c, false),
            JoinOperator::Right(c) | JoinOperator::RightOuter(c) | JoinOperator::FullOuter(c) => {
                (c, true)
            }
            _ => continue,
        };
        let JoinConstraint::Using(names) = constraint else {
            continue;
        };
        for name in names {
            let Some(id) = name.0.last().and_then(|p| p.as_ident()) else {
                continue;
            };
            let key = normalized(id);
            match columns.iter_mut().find(|(n, ..)| *n == key) {
                Some((_, rels, right)) => {
                    rels.push(q.clone());
                    *right |= keeps_right;
                }
                // Taken to come from the chain's first relation, as it does in the usual case.
                None => columns.push((key, vec![relations[0].clone(), q.clone()], keeps_right)),
            }
        }
    }
    columns
        .into_iter()
        .filter(|(_, rels, _)| rels.len() > 2)
        .map(|(name, rels, keeps_right)| {
            let column = |q: &Ident| {
                Expr::CompoundIdentifier(vec![q.clone(), Ident::with_quote('"', name.clone())])
            };
            let replacement = if keeps_right {
                super::syntax::call("coalesce", rels.iter().map(column).collect())
            } else {
                column(&rels[0])
            };
            Merged { name, replacement }
        })
        .collect()
}

/// Replaces unqualified references outside subqueries (which have names of their own).
struct Rewriter<'a> {
    merged: &'a [Merged],
    depth: usize,
}

impl VisitorMut for Rewriter<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if self.depth == 0
            && let Expr::Identifier(id) = expr
            && let Some(replacement) = find(self.merged, id)
        {
            *expr = replacement.clone();
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::ast::{SetExpr, Statement};
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut statements =
            Parser::parse_sql(&GenericDialect {}, sql).unwrap_or_else(|e| panic!("{e}"));
        let Some(Statement::Query(query)) = statements.first_mut() else {
            panic!("not a query")
        };
        let merged = match query.body.as_mut() {
            SetExpr::Select(select) => qualify_select(select),
            _ => Vec::new(),
        };
        qualify_order_by(query, &merged);
        statements[0].to_string()
    }

    #[test]
    fn chained_using_columns_are_qualified() {
        assert_eq!(
            rewritten(
                "SELECT k, v FROM a JOIN b USING (k) JOIN c USING (k) WHERE k > (SELECT max(k) FROM d) ORDER BY k"
            ),
            "SELECT a.\"k\" AS k, v FROM a JOIN b USING(k) JOIN c USING(k) WHERE a.\"k\" > (SELECT max(k) FROM d) ORDER BY a.\"k\""
        );
        assert_eq!(
            rewritten("SELECT k FROM a AS x FULL JOIN b USING (k) JOIN c USING (k)"),
            "SELECT coalesce(x.\"k\", b.\"k\", c.\"k\") AS k FROM a AS x FULL JOIN b USING(k) JOIN c USING(k)"
        );
        // One USING join is DataFusion's to plan.
        assert_eq!(
            rewritten("SELECT k FROM a JOIN b USING (k)"),
            "SELECT k FROM a JOIN b USING(k)"
        );
    }

    #[test]
    fn every_clause_of_the_select_is_qualified() {
        assert_eq!(
            rewritten(
                "SELECT K + 1 AS k1, count(*) FROM a LEFT JOIN b USING (k) LEFT JOIN c USING (k) GROUP BY K HAVING max(K) > 1"
            ),
            "SELECT a.\"k\" + 1 AS k1, count(*) FROM a LEFT JOIN b USING(k) LEFT JOIN c USING(k) GROUP BY a.\"k\" HAVING max(a.\"k\") > 1"
        );
        // A right join may keep rows the first relation has not: the first non-NULL of them all.
        assert_eq!(
            rewritten("SELECT k FROM a JOIN b USING (k) RIGHT JOIN c USING (k) ORDER BY k"),
            "SELECT coalesce(a.\"k\", b.\"k\", c.\"k\") AS k FROM a JOIN b USING(k) RIGHT JOIN c USING(k) ORDER BY coalesce(a.\"k\", b.\"k\", c.\"k\")"
        );
        // A quoted name is another column than the unquoted one.
        assert_eq!(
            rewritten("SELECT \"K\" FROM a JOIN b USING (k) JOIN c USING (k)"),
            "SELECT \"K\" FROM a JOIN b USING(k) JOIN c USING(k)"
        );
        // Each column by its own joins: `v` joins two relations only.
        assert_eq!(
            rewritten("SELECT k, v FROM a JOIN b USING (k, v) JOIN c USING (k)"),
            "SELECT a.\"k\" AS k, v FROM a JOIN b USING(k, v) JOIN c USING(k)"
        );
    }
}

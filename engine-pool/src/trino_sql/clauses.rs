//! Rewrites of a query's clauses, for the statement rewriter (rewriter.rs): `FETCH FIRST n ROWS
//! ONLY` as a LIMIT and `… WITH TIES` as a rank filter, Trino's `_col<n>` names for unnamed
//! output columns, `WITH t(a, b)` names on the first SELECT (where a recursive term finds them),
//! and the `exclude_columns` table function as the derived table it stands for.

use datafusion::sql::sqlparser::ast::{
    self, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, Query, SelectItem, SetExpr, Value,
};
use sqe_sessions::{SqeError, SqeResult};

/// The query `exclude_columns(input => TABLE(t), columns => DESCRIPTOR(a, …))` stands for.
pub(super) fn exclude_columns(f: &ast::Function) -> SqeResult<Query> {
    let usage = || {
        SqeError::invalid(
            "exclude_columns takes input => TABLE(name) and columns => DESCRIPTOR(column, …)",
        )
    };
    let FunctionArguments::List(list) = &f.args else {
        return Err(usage());
    };
    let (mut input, mut columns) = (None, None);
    for (i, arg) in list.args.iter().enumerate() {
        let (name, value) = match arg {
            FunctionArg::Named {
                name,
                arg: FunctionArgExpr::Expr(e),
                ..
            } => (name.value.to_lowercase(), e),
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => (
                ["input", "columns"]
                    .get(i)
                    .copied()
                    .unwrap_or("")
                    .to_string(),
                e,
            ),
            _ => return Err(usage()),
        };
        let ast::Expr::Function(inner) = value else {
            return Err(usage());
        };
        let FunctionArguments::List(inner_args) = &inner.args else {
            return Err(usage());
        };
        let names: Vec<String> = inner_args
            .args
            .iter()
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(
                    e @ (ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)),
                )) => Ok(e.to_string()),
                _ => Err(usage()),
            })
            .collect::<SqeResult<_>>()?;
        let kind = inner.name.to_string().to_lowercase();
        match (name.as_str(), kind.as_str()) {
            ("input", "table") if names.len() == 1 => input = names.into_iter().next(),
            ("columns", "descriptor") if !names.is_empty() => columns = Some(names),
            _ => return Err(usage()),
        }
    }
    let (Some(input), Some(columns)) = (input, columns) else {
        return Err(usage());
    };
    let sql = format!("SELECT * EXCLUDE ({}) FROM {input}", columns.join(", "));
    let dialect = crate::statement::dialect::SqeDialect::default();
    datafusion::sql::sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .map(|q| *q)
        .map_err(|e| SqeError::invalid(format!("exclude_columns: {e}")))
}

/// Gives the columns of the first SELECT of `body` these names, in order.
pub(super) fn name_first_select(body: &mut SetExpr, names: &[Ident]) {
    match body {
        SetExpr::Select(select) => {
            for (item, name) in select.projection.iter_mut().zip(names) {
                match item {
                    SelectItem::UnnamedExpr(expr) => {
                        let expr = std::mem::replace(expr, ast::Expr::value(Value::Null));
                        *item = SelectItem::ExprWithAlias {
                            expr,
                            alias: name.clone(),
                        };
                    }
                    SelectItem::ExprWithAlias { alias, .. } => *alias = name.clone(),
                    // A wildcard's columns are not known here: DataFusion renames them.
                    _ => return,
                }
            }
        }
        SetExpr::SetOperation { left, .. } => name_first_select(left, names),
        SetExpr::Query(query) => name_first_select(&mut query.body, names),
        _ => {}
    }
}

/// `… ORDER BY k FETCH FIRST n ROWS WITH TIES`: the first `n` rows and every row tied with the
/// last of them, the rows whose `rank()` by the order is at most `n`:
/// `SELECT * EXCLUDE (r) FROM (SELECT *, rank() OVER (ORDER BY k) AS r FROM (…)) WHERE r <= n
/// ORDER BY k`. The order must name output columns.
pub(super) fn fetch_with_ties(query: &mut Query) -> SqeResult<()> {
    let Some(fetch) = &query.fetch else {
        return Ok(());
    };
    if !fetch.with_ties {
        return Ok(());
    }
    let needs = |what: &str| SqeError::invalid(format!("FETCH FIRST … WITH TIES {what}"));
    if fetch.percent || query.limit_clause.is_some() {
        return Err(needs("takes neither PERCENT, LIMIT nor OFFSET"));
    }
    let count = fetch
        .quantity
        .clone()
        .unwrap_or_else(|| ast::Expr::value(Value::Number("1".into(), false)));
    let Some(ast::OrderBy {
        kind: ast::OrderByKind::Expressions(keys),
        ..
    }) = &query.order_by
    else {
        return Err(needs("needs an ORDER BY"));
    };
    let mut order = Vec::new();
    for key in keys {
        let name = match &key.expr {
            ast::Expr::Identifier(id) => id.clone(),
            ast::Expr::CompoundIdentifier(parts) if !parts.is_empty() => {
                parts[parts.len() - 1].clone()
            }
            _ => return Err(needs("needs an ORDER BY of output column names")),
        };
        let mut key = key.clone();
        key.expr = ast::Expr::Identifier(name);
        order.push(key.to_string());
    }
    let order = order.join(", ");
    let inner = Query {
        with: None,
        order_by: None,
        fetch: None,
        ..query.clone()
    };
    let sql = format!(
        "SELECT * EXCLUDE (__sqe_rank) FROM (SELECT *, rank() OVER (ORDER BY {order}) AS __sqe_rank \
         FROM ({inner}) AS __sqe_ties) AS __sqe_ties WHERE __sqe_rank <= {count} ORDER BY {order}"
    );
    let dialect = crate::statement::dialect::SqeDialect::default();
    let mut rewritten = datafusion::sql::sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .map_err(|e| SqeError::invalid(format!("FETCH FIRST … WITH TIES: {e}")))?;
    rewritten.with = query.with.take();
    *query = *rewritten;
    Ok(())
}

/// `FETCH FIRST n ROWS ONLY` is `LIMIT n` (`WITH TIES` is rewritten above; `PERCENT` is left
/// for DataFusion to refuse).
pub(super) fn fetch_as_limit(query: &mut Query) {
    let Some(fetch) = &query.fetch else {
        return;
    };
    if fetch.with_ties || fetch.percent {
        return;
    }
    let count = fetch
        .quantity
        .clone()
        .unwrap_or_else(|| ast::Expr::value(Value::Number("1".into(), false)));
    match &mut query.limit_clause {
        None => {
            query.limit_clause = Some(ast::LimitClause::LimitOffset {
                limit: Some(count),
                offset: None,
                limit_by: vec![],
            });
        }
        Some(ast::LimitClause::LimitOffset {
            limit: limit @ None,
            ..
        }) => *limit = Some(count),
        // Both LIMIT and FETCH: left for DataFusion to refuse.
        Some(_) => return,
    }
    query.fetch = None;
}

/// Names each unnamed output column that is not a plain column reference `_col<position>`, and
/// returns the expressions named (of a plain SELECT).
pub(super) fn name_columns(body: &mut SetExpr) -> Vec<(ast::Expr, Ident)> {
    let mut named = Vec::new();
    match body {
        SetExpr::Select(select) => {
            for (i, item) in select.projection.iter_mut().enumerate() {
                if let SelectItem::UnnamedExpr(expr) = item
                    && !matches!(
                        expr,
                        ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)
                    )
                {
                    let expr = std::mem::replace(expr, ast::Expr::value(Value::Null));
                    let alias = Ident::new(format!("_col{i}"));
                    named.push((expr.clone(), alias.clone()));
                    *item = SelectItem::ExprWithAlias { expr, alias };
                }
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            name_columns(left);
            name_columns(right);
        }
        // Nested queries are visited as queries of their own.
        _ => {}
    }
    named
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trino_sql::testing::{function, query};

    fn limited(sql: &str) -> String {
        let mut q = query(sql);
        fetch_as_limit(&mut q);
        q.to_string()
    }

    #[test]
    fn fetch_first_is_a_limit() {
        assert_eq!(
            limited("SELECT a FROM t ORDER BY a FETCH FIRST 3 ROWS ONLY"),
            "SELECT a FROM t ORDER BY a LIMIT 3"
        );
        assert_eq!(
            limited("SELECT a FROM t FETCH NEXT ROW ONLY"),
            "SELECT a FROM t LIMIT 1"
        );
        assert_eq!(
            limited("SELECT a FROM t OFFSET 2 FETCH FIRST 3 ROWS ONLY"),
            "SELECT a FROM t LIMIT 3 OFFSET 2"
        );
        // PERCENT and WITH TIES are not a LIMIT: left as they are.
        assert_eq!(
            limited("SELECT a FROM t FETCH FIRST 10 PERCENT ROWS ONLY"),
            "SELECT a FROM t FETCH FIRST 10 PERCENT ROWS ONLY"
        );
    }

    fn with_ties(sql: &str) -> SqeResult<String> {
        let mut q = query(sql);
        fetch_with_ties(&mut q)?;
        Ok(q.to_string())
    }

    #[test]
    fn fetch_with_ties_keeps_the_rows_ranked_up_to_n() {
        assert_eq!(
            with_ties("WITH s AS (SELECT 1 AS k) SELECT t.k, v FROM s AS t ORDER BY t.k DESC FETCH FIRST 2 ROWS WITH TIES"),
            Ok("WITH s AS (SELECT 1 AS k) SELECT * EXCLUDE (__sqe_rank) FROM (SELECT *, rank() OVER (ORDER BY k DESC) AS __sqe_rank FROM (SELECT t.k, v FROM s AS t) AS __sqe_ties) AS __sqe_ties WHERE __sqe_rank <= 2 ORDER BY k DESC".to_string())
        );
        assert_eq!(
            with_ties("SELECT a FROM t FETCH FIRST 2 ROWS WITH TIES"),
            Err(SqeError::invalid(
                "FETCH FIRST … WITH TIES needs an ORDER BY"
            ))
        );
        assert_eq!(
            with_ties("SELECT a FROM t ORDER BY a + 1 FETCH FIRST 2 ROWS WITH TIES"),
            Err(SqeError::invalid(
                "FETCH FIRST … WITH TIES needs an ORDER BY of output column names"
            ))
        );
        assert_eq!(
            with_ties("SELECT a FROM t ORDER BY a OFFSET 1 FETCH FIRST 2 ROWS WITH TIES"),
            Err(SqeError::invalid(
                "FETCH FIRST … WITH TIES takes neither PERCENT, LIMIT nor OFFSET"
            ))
        );
        // Without WITH TIES, nothing to do here.
        assert_eq!(
            with_ties("SELECT a FROM t FETCH FIRST 2 ROWS ONLY"),
            Ok("SELECT a FROM t FETCH FIRST 2 ROWS ONLY".to_string())
        );
    }

    #[test]
    fn unnamed_columns_are_named_by_position() {
        let mut q = query("SELECT a, t.b, a + 1, 3 FROM t UNION SELECT 1, 2, 3, c FROM u");
        let named = name_columns(&mut q.body);
        assert_eq!(
            q.to_string(),
            "SELECT a, t.b, a + 1 AS _col2, 3 AS _col3 FROM t UNION SELECT 1 AS _col0, 2 AS _col1, 3 AS _col2, c FROM u"
        );
        // The named expressions are returned only for a plain SELECT.
        assert!(named.is_empty());
        let mut q = query("SELECT a, a + 1 FROM t");
        let named = name_columns(&mut q.body);
        assert_eq!(
            named
                .iter()
                .map(|(e, alias)| format!("{e} -> {alias}"))
                .collect::<Vec<_>>(),
            ["a + 1 -> _col1"]
        );
    }

    #[test]
    fn with_names_go_on_the_first_select() {
        let names = [Ident::new("x"), Ident::new("y")];
        let mut q = query("SELECT 1, 2 AS b UNION ALL SELECT x + 1, y FROM r");
        name_first_select(&mut q.body, &names);
        assert_eq!(
            q.to_string(),
            "SELECT 1 AS x, 2 AS y UNION ALL SELECT x + 1, y FROM r"
        );
        // A wildcard's columns are not known here: the names stop at it.
        let mut q = query("SELECT 1, *, 3 FROM r");
        name_first_select(&mut q.body, &names);
        assert_eq!(q.to_string(), "SELECT 1 AS x, *, 3 FROM r");
    }

    #[test]
    fn exclude_columns_is_a_select_that_excludes() {
        let f = function("exclude_columns(input => TABLE(s.t), columns => DESCRIPTOR(a, b))");
        assert_eq!(
            exclude_columns(&f).map(|q| q.to_string()),
            Ok("SELECT * EXCLUDE (a, b) FROM s.t".to_string())
        );
        let f = function("exclude_columns(TABLE(t), DESCRIPTOR(a))");
        assert_eq!(
            exclude_columns(&f).map(|q| q.to_string()),
            Ok("SELECT * EXCLUDE (a) FROM t".to_string())
        );
        let usage = SqeError::invalid(
            "exclude_columns takes input => TABLE(name) and columns => DESCRIPTOR(column, …)",
        );
        for wrong in [
            "exclude_columns(input => TABLE(t))",
            "exclude_columns(input => TABLE(t), columns => DESCRIPTOR())",
            "exclude_columns(input => TABLE(t, u), columns => DESCRIPTOR(a))",
            "exclude_columns(input => t, columns => DESCRIPTOR(a))",
            "exclude_columns(input => TABLE(t), columns => DESCRIPTOR(a + 1))",
        ] {
            assert_eq!(
                exclude_columns(&function(wrong)).map(|_| ()),
                Err(usage.clone()),
                "{wrong}"
            );
        }
    }
}

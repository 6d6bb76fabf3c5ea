//! Trino's `UNNEST` in a FROM clause, planned with DataFusion's `unnest()` in a projection:
//!
//! ```sql
//! FROM t CROSS JOIN UNNEST(t.a, t.b) WITH ORDINALITY AS u(x, y, n)    -- or: FROM t, UNNEST(…) …
//! -- becomes
//! FROM (SELECT t.*, unnest(t.a) AS x, unnest(t.b) AS y,
//!              unnest(generate_series(1, greatest(coalesce(cardinality(t.a), 0), …))) AS n
//!       FROM t WHERE t.a IS NOT NULL OR t.b IS NOT NULL) AS t        -- and u.x is t.x
//! ```
//!
//! DataFusion plans `CROSS JOIN UNNEST(column)` as a lateral join it cannot run. Several arrays are
//! zipped, the shorter padded with NULLs, and a NULL or empty array gives no rows, as in Trino.
//! A standalone `UNNEST(ARRAY[…]) WITH ORDINALITY AS t(x, n)` becomes the same projection without
//! a source. `LEFT JOIN UNNEST(…) … ON true` keeps a row whose arrays are NULL or empty, with NULLs.
//! One array (or map) whose alias names several columns is spread over them: a map's key and
//! value, an array of rows' fields. Other joins to UNNEST (UNNEST beside several relations) are
//! refused with a clear error.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Ident, JoinConstraint, JoinOperator, ObjectNamePart, Query, Select, TableAlias,
    TableFactor, TableWithJoins, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::parser::Parser;
use sqe_sessions::{SqeError, SqeResult};

fn is_unnest(factor: &TableFactor) -> bool {
    matches!(factor, TableFactor::UNNEST { .. })
}

fn unsupported() -> SqeError {
    SqeError::unsupported(
        "UNNEST is supported as `FROM t CROSS JOIN UNNEST(…) AS u(…)` (or `FROM t, UNNEST(…)`, or `FROM t LEFT JOIN UNNEST(…) AS u(…) ON true`) over one relation, and on its own",
    )
}

/// Rewrites the UNNEST relations of `select`; returns the renames the rest of the query needs
/// (`u` → `t`: the unnest's alias to the relation it now belongs to).
pub(crate) fn rewrite_select(select: &mut Select) -> SqeResult<Vec<(Ident, Ident)>> {
    let mut renames = Vec::new();
    // `FROM t, UNNEST(…)` is `FROM t CROSS JOIN UNNEST(…)`.
    if select.from.len() == 2
        && is_unnest(&select.from[1].relation)
        && select.from[1].joins.is_empty()
        && let Some(second) = select.from.pop()
    {
        select.from[0]
            .joins
            .push(datafusion::sql::sqlparser::ast::Join {
                relation: second.relation,
                global: false,
                join_operator: JoinOperator::CrossJoin(
                    datafusion::sql::sqlparser::ast::JoinConstraint::None,
                ),
            });
    }
    let unnests = select
        .from
        .iter()
        .map(|t| {
            usize::from(is_unnest(&t.relation))
                + t.joins.iter().filter(|j| is_unnest(&j.relation)).count()
        })
        .sum::<usize>();
    if unnests == 0 {
        return Ok(renames);
    }
    if select.from.len() != 1 || unnests != 1 {
        return Err(unsupported());
    }
    let from: &mut TableWithJoins = &mut select.from[0];
    if is_unnest(&from.relation) {
        if !from.joins.is_empty() {
            return Err(unsupported());
        }
        let derived = projection(&from.relation, None, false)?;
        from.relation = derived;
        return Ok(renames);
    }
    let [join] = from.joins.as_slice() else {
        return Err(unsupported());
    };
    // `LEFT JOIN UNNEST(…) ON true` keeps the rows whose arrays are NULL or empty.
    let outer_join = match &join.join_operator {
        JoinOperator::CrossJoin(_) => false,
        JoinOperator::Left(JoinConstraint::On(on))
        | JoinOperator::LeftOuter(JoinConstraint::On(on))
            if on.to_string().eq_ignore_ascii_case("true") =>
        {
            true
        }
        _ => return Err(unsupported()),
    };
    let outer = match &from.relation {
        TableFactor::Table { name, alias, .. } => match alias {
            Some(a) => a.name.clone(),
            None => match name.0.last() {
                Some(ObjectNamePart::Identifier(id)) => id.clone(),
                _ => return Err(unsupported()),
            },
        },
        TableFactor::Derived {
            alias: Some(alias), ..
        } => alias.name.clone(),
        _ => return Err(unsupported()),
    };
    if let TableFactor::UNNEST {
        alias: Some(alias), ..
    } = &join.relation
    {
        renames.push((alias.name.clone(), outer.clone()));
    }
    let derived = projection(&join.relation, Some((&from.relation, &outer)), outer_join)?;
    from.relation = derived;
    from.joins.clear();
    Ok(renames)
}

/// The derived table an UNNEST becomes, over `source` (the relation and its name) if it has one;
/// `outer` for a LEFT JOIN. One array whose alias names several columns is an array of rows or a
/// map: its elements' fields (a map's key and value) are the columns, read by position.
fn projection(
    unnest: &TableFactor,
    source: Option<(&TableFactor, &Ident)>,
    outer: bool,
) -> SqeResult<TableFactor> {
    let TableFactor::UNNEST {
        alias,
        array_exprs,
        with_offset,
        with_ordinality,
        ..
    } = unnest
    else {
        return Err(unsupported());
    };
    if *with_offset {
        return Err(unsupported());
    }
    let names: Vec<String> = alias
        .as_ref()
        .map(|a| a.columns.iter().map(|c| c.name.to_string()).collect())
        .unwrap_or_default();
    let ordinality = usize::from(*with_ordinality);
    let spread = array_exprs.len() == 1 && names.len() >= 2 + ordinality;
    let wanted = array_exprs.len() + ordinality;
    if !names.is_empty() && names.len() != wanted && !spread {
        return Err(SqeError::invalid(format!(
            "UNNEST gives {wanted} columns, but its alias names {}",
            names.len()
        )));
    }
    let name = |i: usize| names.get(i).cloned().unwrap_or_else(|| format!("_col{i}"));
    // The columns the arrays give, and the ordinality's, in the inner projection.
    let columns = if spread {
        names.len() - ordinality
    } else {
        array_exprs.len()
    };
    let ordinal_name = if spread {
        "__sqe_n".to_string()
    } else {
        name(array_exprs.len())
    };
    let mut items = Vec::new();
    if let Some((_, outer_name)) = source {
        items.push(format!("{outer_name}.*"));
    }
    for (i, e) in array_exprs.iter().enumerate() {
        let input = if spread {
            format!("sqe_unnest_rows({e}, {outer})")
        } else if outer {
            format!("sqe_unnest_outer({e}, true)")
        } else {
            e.to_string()
        };
        let column = if spread {
            "__sqe_row".to_string()
        } else {
            name(i)
        };
        items.push(format!("unnest({input}) AS {column}"));
    }
    if *with_ordinality {
        let longest = match array_exprs.as_slice() {
            [one] if !outer => format!("cardinality({one})"),
            many => format!(
                "greatest({})",
                many.iter()
                    .map(|e| format!("CAST(coalesce(cardinality({e}), 0) AS BIGINT)"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let series = if outer {
            format!("CASE WHEN {longest} > 0 THEN generate_series(1, {longest}) ELSE [NULL] END")
        } else {
            format!("generate_series(1, {longest})")
        };
        items.push(format!("unnest({series}) AS {ordinal_name}"));
    }
    let present = array_exprs
        .iter()
        .map(|e| format!("({e}) IS NOT NULL"))
        .collect::<Vec<_>>()
        .join(" OR ");
    let mut sql = match source {
        Some((relation, _)) if outer => format!("SELECT {} FROM {relation}", items.join(", ")),
        Some((relation, _)) => format!(
            "SELECT {} FROM {relation} WHERE {present}",
            items.join(", ")
        ),
        None => format!("SELECT {}", items.join(", ")),
    };
    if spread {
        let mut picked = Vec::new();
        if source.is_some() {
            let hidden = if *with_ordinality {
                "__sqe_row, __sqe_n"
            } else {
                "__sqe_row"
            };
            picked.push(format!("* EXCLUDE ({hidden})"));
        }
        for i in 0..columns {
            picked.push(format!("get_field(__sqe_row, 'f{}') AS {}", i + 1, name(i)));
        }
        if *with_ordinality {
            picked.push(format!("__sqe_n AS {}", name(columns)));
        }
        sql = format!("SELECT {} FROM ({sql}) AS __sqe_unnest", picked.join(", "));
    }
    let subquery = Parser::new(&crate::statement::dialect::SqeDialect::default())
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .map_err(|e| SqeError::invalid(format!("UNNEST: {e}")))?;
    let alias = match source {
        Some((_, outer_name)) => Some(TableAlias {
            explicit: true,
            name: outer_name.clone(),
            columns: vec![],
            at: None,
        }),
        None => alias.as_ref().map(|a| TableAlias {
            explicit: true,
            name: a.name.clone(),
            columns: vec![],
            at: None,
        }),
    };
    Ok(TableFactor::Derived {
        lateral: false,
        subquery,
        alias,
        sample: None,
    })
}

/// Points `u.x` at the relation `u`'s columns now belong to.
pub(crate) fn rename_qualifiers(query: &mut Query, renames: &[(Ident, Ident)]) {
    struct Rename<'a>(&'a [(Ident, Ident)]);
    impl VisitorMut for Rename<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            if let Expr::CompoundIdentifier(parts) = expr
                && parts.len() == 2
                && let Some((_, to)) = self.0.iter().find(|(from, _)| from.value == parts[0].value)
            {
                parts[0] = to.clone();
            }
            ControlFlow::Continue(())
        }
    }
    let _ = query.visit(&mut Rename(renames));
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::ast::SetExpr;

    use super::*;
    use crate::trino_sql::testing::query;

    /// The query with its SELECT's UNNEST rewritten and its qualifiers renamed, and the renames.
    fn unnested(sql: &str) -> SqeResult<(String, Vec<String>)> {
        let mut q = query(sql);
        let SetExpr::Select(select) = q.body.as_mut() else {
            panic!("not a SELECT: {sql}")
        };
        let renames = rewrite_select(select)?;
        rename_qualifiers(&mut q, &renames);
        let renames = renames.iter().map(|(a, b)| format!("{a} -> {b}")).collect();
        Ok((q.to_string(), renames))
    }

    fn ok(sql: &str) -> String {
        unnested(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).0
    }

    #[test]
    fn cross_join_unnest_is_a_projection() {
        assert_eq!(
            unnested("SELECT t.k, u.x, u.y, u.n FROM t CROSS JOIN UNNEST(t.a, t.b) WITH ORDINALITY AS u(x, y, n)"),
            Ok((
                "SELECT t.k, t.x, t.y, t.n FROM (SELECT t.*, unnest(t.a) AS x, unnest(t.b) AS y, unnest(generate_series(1, greatest(CAST(coalesce(cardinality(t.a), 0) AS BIGINT), CAST(coalesce(cardinality(t.b), 0) AS BIGINT)))) AS n FROM t WHERE (t.a) IS NOT NULL OR (t.b) IS NOT NULL) AS t".to_string(),
                vec!["u -> t".to_string()]
            ))
        );
        // `FROM t, UNNEST(…)` is the same join; the relation's alias names it.
        assert_eq!(
            ok("SELECT x FROM s.t AS r, UNNEST(r.a) AS u(x)"),
            "SELECT x FROM (SELECT r.*, unnest(r.a) AS x FROM s.t AS r WHERE (r.a) IS NOT NULL) AS r"
        );
        assert_eq!(
            ok("SELECT n FROM t CROSS JOIN UNNEST(a) WITH ORDINALITY AS u(x, n)"),
            "SELECT n FROM (SELECT t.*, unnest(a) AS x, unnest(generate_series(1, cardinality(a))) AS n FROM t WHERE (a) IS NOT NULL) AS t"
        );
        // No alias: Trino's names by position.
        assert_eq!(
            ok("SELECT * FROM t CROSS JOIN UNNEST(a)"),
            "SELECT * FROM (SELECT t.*, unnest(a) AS _col0 FROM t WHERE (a) IS NOT NULL) AS t"
        );
    }

    #[test]
    fn left_join_unnest_keeps_empty_rows() {
        assert_eq!(
            ok("SELECT k, x, n FROM t LEFT JOIN UNNEST(a) WITH ORDINALITY AS u(x, n) ON true"),
            "SELECT k, x, n FROM (SELECT t.*, unnest(sqe_unnest_outer(a, true)) AS x, unnest(CASE WHEN greatest(CAST(coalesce(cardinality(a), 0) AS BIGINT)) > 0 THEN generate_series(1, greatest(CAST(coalesce(cardinality(a), 0) AS BIGINT))) ELSE [NULL] END) AS n FROM t) AS t"
        );
    }

    #[test]
    fn one_array_spread_over_its_fields() {
        assert_eq!(
            ok("SELECT k, v FROM t CROSS JOIN UNNEST(m) AS u(k, v)"),
            "SELECT k, v FROM (SELECT * EXCLUDE (__sqe_row), get_field(__sqe_row, 'f1') AS k, get_field(__sqe_row, 'f2') AS v FROM (SELECT t.*, unnest(sqe_unnest_rows(m, false)) AS __sqe_row FROM t WHERE (m) IS NOT NULL) AS __sqe_unnest) AS t"
        );
    }

    #[test]
    fn unnest_on_its_own() {
        assert_eq!(
            ok("SELECT x, n FROM UNNEST(ARRAY[3, 4]) WITH ORDINALITY AS v(x, n)"),
            "SELECT x, n FROM (SELECT unnest(ARRAY[3, 4]) AS x, unnest(generate_series(1, cardinality(ARRAY[3, 4]))) AS n) AS v"
        );
    }

    #[test]
    fn other_shapes_are_refused() {
        assert_eq!(
            unnested("SELECT 1 FROM t CROSS JOIN UNNEST(a, b) AS u(x)"),
            Err(SqeError::invalid(
                "UNNEST gives 2 columns, but its alias names 1"
            ))
        );
        for refused in [
            "SELECT 1 FROM t JOIN UNNEST(a) AS u(x) ON u.x = t.k",
            "SELECT 1 FROM t, s CROSS JOIN UNNEST(a) AS u(x)",
            "SELECT 1 FROM t CROSS JOIN UNNEST(a) AS u(x) CROSS JOIN UNNEST(b) AS w(y)",
            "SELECT 1 FROM UNNEST(a) AS u(x) CROSS JOIN t",
            "SELECT 1 FROM (SELECT 1) CROSS JOIN UNNEST(a) AS u(x)",
        ] {
            assert_eq!(
                unnested(refused).map(|_| ()),
                Err(unsupported()),
                "{refused}"
            );
        }
        // No UNNEST: nothing changes.
        assert_eq!(
            unnested("SELECT u.a FROM t AS u"),
            Ok(("SELECT u.a FROM t AS u".to_string(), vec![]))
        );
    }
}

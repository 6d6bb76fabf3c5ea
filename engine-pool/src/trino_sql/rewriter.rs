//! The statement, before planning ([`rewrite_statement`]): rewritten into what DataFusion plans
//! with Trino's meaning. This file walks the statement and decides what each node becomes; the
//! rewrites it calls live beside it (clauses.rs, functions.rs, literals.rs, unnest.rs,
//! using_joins.rs).
//!
//! An output column without a name is `_col0`, `_col1`, … by its position, as Trino names it
//! (which also lets `SELECT x, 3, 3` plan); `EXTRACT(field FROM x)` is Trino's field function
//! (`day_of_week` is ISO, 1 to 7); `FROM t CROSS JOIN UNNEST(…)` is DataFusion's `unnest()`;
//! `WITH t(a, b)` names reach a recursive term; `FETCH FIRST n ROWS ONLY` is a LIMIT; Trino's names
//! for DataFusion's functions (`approx_percentile`, `listagg`, `variance`, `every`, `any_value`)
//! and `mod`/`date` as the expressions they are; a `TIMESTAMP '…'` literal's precision is its
//! fraction's digits, a cast's precision is 3 unless given, and `current_timestamp`,
//! `localtimestamp` and `localtime` are Trino's (precision 3 unless given). Arrow has four units,
//! so a precision is held in the next unit that holds it: 0, 3, 6 or 9 digits.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, DateTimeField, Ident, Query, SetExpr, Statement, TableFactor, Value, VisitMut, VisitorMut,
};
use sqe_sessions::{SqeError, SqeResult};

use super::clauses::{
    exclude_columns, fetch_as_limit, fetch_with_ties, name_columns, name_first_select,
};
use super::functions::{function_as_expression, reduce_agg, rename_function};
use super::literals::{
    arrow_precision, clock, clock_precision, extract_name, finest_literals, fraction_digits,
    reads_as_date_time, timestamp_zone, trino_interval, with_seconds, zone_name_reads, zoned_text,
};
use super::syntax::call;

/// Rewrites a parsed statement into what DataFusion plans with Trino's meaning.
pub(crate) fn rewrite_statement(statement: &mut Statement) -> SqeResult<()> {
    // A SET statement's value is read as written (`SET TIME ZONE INTERVAL '-08:00' HOUR TO
    // MINUTE` is an offset, not an interval to plan).
    if matches!(statement, Statement::Set(_)) {
        return Ok(());
    }
    match statement.visit(&mut Rewriter) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(e) => Err(e),
    }
}

struct Rewriter;

/// The SELECTs of a query body, through its set operations.
fn for_each_select(
    body: &mut SetExpr,
    f: &mut impl FnMut(&mut ast::Select) -> SqeResult<()>,
) -> SqeResult<()> {
    match body {
        SetExpr::Select(select) => f(select),
        SetExpr::SetOperation { left, right, .. } => {
            for_each_select(left, f)?;
            for_each_select(right, f)
        }
        _ => Ok(()),
    }
}

impl VisitorMut for Rewriter {
    type Break = SqeError;

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<SqeError> {
        let mut renames = Vec::new();
        let unnested = for_each_select(&mut query.body, &mut |select| {
            renames.extend(super::unnest::rewrite_select(select)?);
            Ok(())
        });
        if let Err(e) = unnested {
            return ControlFlow::Break(e);
        }
        if !renames.is_empty() {
            super::unnest::rename_qualifiers(query, &renames);
        }
        // `WITH t(a, b) AS (…)`: the names go on the first SELECT's columns, where a recursive
        // term's reference to `t` finds them.
        if let Some(with) = &mut query.with {
            for cte in &mut with.cte_tables {
                let names: Vec<Ident> = cte.alias.columns.iter().map(|c| c.name.clone()).collect();
                if !names.is_empty() {
                    name_first_select(&mut cte.query.body, &names);
                }
            }
        }
        if let Err(e) = fetch_with_ties(query) {
            return ControlFlow::Break(e);
        }
        fetch_as_limit(query);
        if let SetExpr::Select(select) = query.body.as_mut() {
            let merged = super::using_joins::qualify_select(select);
            super::using_joins::qualify_order_by(query, &merged);
        } else {
            let _ = for_each_select(&mut query.body, &mut |select| {
                super::using_joins::qualify_select(select);
                Ok(())
            });
        }
        let named = name_columns(&mut query.body);
        // ORDER BY an output column's expression sorts by that column (a SELECT DISTINCT's
        // ORDER BY may name nothing else).
        if let Some(ast::OrderBy {
            kind: ast::OrderByKind::Expressions(keys),
            ..
        }) = &mut query.order_by
        {
            for key in keys {
                if let Some((_, alias)) = named.iter().find(|(e, _)| *e == key.expr) {
                    key.expr = ast::Expr::Identifier(alias.clone());
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// `TABLE(exclude_columns(input => TABLE(t), columns => DESCRIPTOR(a, b)))`: `t` without the
    /// columns named, a derived table `SELECT * EXCLUDE (a, b) FROM t`.
    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<SqeError> {
        let TableFactor::TableFunction { expr, alias } = factor else {
            return ControlFlow::Continue(());
        };
        let ast::Expr::Function(f) = expr else {
            return ControlFlow::Continue(());
        };
        if !f.name.to_string().eq_ignore_ascii_case("exclude_columns") {
            return ControlFlow::Continue(());
        }
        match exclude_columns(f) {
            Ok(query) => {
                *factor = TableFactor::Derived {
                    lateral: false,
                    subquery: Box::new(query),
                    alias: alias.take(),
                    sample: None,
                };
                ControlFlow::Continue(())
            }
            Err(e) => ControlFlow::Break(e),
        }
    }

    /// `s.f` in a lambda whose parameter `s` is a row reads the field `f` (DataFusion would look
    /// for a column `f` of a table `s`).
    fn pre_visit_expr(&mut self, expr: &mut ast::Expr) -> ControlFlow<SqeError> {
        if let ast::Expr::Lambda(lambda) = expr {
            let params: Vec<String> = lambda
                .params
                .iter()
                .map(|p| p.name.value.to_lowercase())
                .collect();
            let _ = ast::visit_expressions_mut(lambda.body.as_mut(), |e| {
                if let ast::Expr::CompoundIdentifier(parts) = e
                    && parts.len() > 1
                    && params.contains(&parts[0].value.to_lowercase())
                {
                    let mut out = ast::Expr::Identifier(parts[0].clone());
                    for field in &parts[1..] {
                        let name = ast::Expr::value(Value::SingleQuotedString(field.value.clone()));
                        out = call("get_field", vec![out, name]);
                    }
                    *e = out;
                }
                ControlFlow::<()>::Continue(())
            });
        }
        ControlFlow::Continue(())
    }

    /// A VALUES column of timestamp literals takes the finest of their precisions (DataFusion
    /// would cut every row down to the coarsest).
    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<SqeError> {
        if let SetExpr::Values(values) = query.body.as_mut() {
            finest_literals(&mut values.rows);
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut ast::Expr) -> ControlFlow<SqeError> {
        // A timestamp's precision as Trino gives it: 3 where the cast names none, and a
        // precision Arrow has no unit for taken up to the next one that it has.
        if let ast::Expr::Cast {
            data_type: ast::DataType::Timestamp(precision, _),
            ..
        } = expr
        {
            *precision = Some(arrow_precision(precision.unwrap_or(3)));
        }
        match expr {
            // `a[1].f`, `m['k'].f`, `(row expression).f`: a row's field by its name, which
            // DataFusion takes after a subscript only as a quoted text.
            ast::Expr::CompoundFieldAccess { access_chain, .. } => {
                for access in access_chain.iter_mut() {
                    if let ast::AccessExpr::Dot(ast::Expr::Identifier(field)) = access {
                        let name = match field.quote_style {
                            None => field.value.to_lowercase(),
                            Some(_) => field.value.clone(),
                        };
                        *access =
                            ast::AccessExpr::Dot(ast::Expr::value(Value::SingleQuotedString(name)));
                    }
                }
            }
            ast::Expr::Extract {
                field: field @ (DateTimeField::TimezoneHour | DateTimeField::TimezoneMinute),
                expr: from,
                ..
            } => {
                let name = match field {
                    DateTimeField::TimezoneHour => "timezone_hour",
                    _ => "timezone_minute",
                };
                let arg = std::mem::replace(from.as_mut(), ast::Expr::value(Value::Null));
                *expr = call(name, vec![arg]);
            }
            // `x AT TIME ZONE z`: the instant in `z`, a timestamp without a zone read in the
            // session's (DataFusion would read it in `z`).
            ast::Expr::AtTimeZone {
                timestamp,
                time_zone,
            } => {
                let args = vec![
                    std::mem::replace(timestamp.as_mut(), ast::Expr::value(Value::Null)),
                    std::mem::replace(time_zone.as_mut(), ast::Expr::value(Value::Null)),
                ];
                *expr = call("at_timezone", args);
            }
            // JSON values are JSON text (SQE has no JSON type yet): `JSON '…'` is checked and
            // made canonical, `CAST(x AS JSON)` writes `x` as JSON.
            ast::Expr::TypedString(typed) if matches!(typed.data_type, ast::DataType::JSON) => {
                let text = ast::Expr::value(typed.value.value.clone());
                *expr = call("json_parse", vec![text]);
            }
            ast::Expr::Cast {
                kind: ast::CastKind::Cast,
                expr: inner,
                data_type: ast::DataType::JSON,
                ..
            } => {
                let arg = std::mem::replace(inner.as_mut(), ast::Expr::value(Value::Null));
                *expr = call("sqe_to_json", vec![arg]);
            }
            // `CAST('2020-01-02 03:04:05 +01:00' AS TIMESTAMP WITH TIME ZONE)`: a constant text
            // keeps the zone it names, as the literal below does. TRY_CAST too, when the text
            // reads (otherwise it is read as a text from a column is, to NULL: TrinoOperands).
            ast::Expr::Cast {
                kind:
                    kind @ (ast::CastKind::Cast | ast::CastKind::TryCast | ast::CastKind::SafeCast),
                expr: inner,
                data_type:
                    ast::DataType::Timestamp(
                        precision,
                        ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz,
                    ),
                ..
            } if zoned_text(inner).is_some_and(|(local, zone)| {
                reads_as_date_time(&local)
                    && (matches!(kind, ast::CastKind::Cast) || zone_name_reads(&zone))
            }) =>
            {
                if let Some((local, zone)) = zoned_text(inner) {
                    let local = ast::Expr::Cast {
                        kind: ast::CastKind::Cast,
                        expr: Box::new(ast::Expr::value(Value::SingleQuotedString(local))),
                        data_type: ast::DataType::Timestamp(*precision, ast::TimezoneInfo::None),
                        array: false,
                        format: None,
                    };
                    let zone = ast::Expr::value(Value::SingleQuotedString(zone));
                    *expr = call("with_timezone", vec![local, zone]);
                }
            }
            // `TIMESTAMP '2020-01-02 03:04:05 Europe/Berlin'`: that wall-clock time in that zone.
            // Its precision is its fraction's digits (`TIMESTAMP '2020-01-02 03:04:05'` is a
            // timestamp(0)).
            ast::Expr::TypedString(typed)
                if matches!(typed.data_type, ast::DataType::Timestamp(..)) =>
            {
                if let Value::SingleQuotedString(text) = &mut typed.value.value {
                    let (local, zone) = match timestamp_zone(text) {
                        Some((local, zone)) => (with_seconds(local), Some(zone.to_string())),
                        None => (with_seconds(text), None),
                    };
                    let precision = Some(arrow_precision(fraction_digits(&local)));
                    let local = ast::Expr::TypedString(ast::TypedString {
                        data_type: ast::DataType::Timestamp(precision, ast::TimezoneInfo::None),
                        value: Value::SingleQuotedString(local).into(),
                        uses_odbc_syntax: false,
                    });
                    *expr = match zone {
                        Some(zone) => call(
                            "with_timezone",
                            vec![local, ast::Expr::value(Value::SingleQuotedString(zone))],
                        ),
                        None => local,
                    };
                }
            }
            // Trino's interval literals: YEAR and MONTH ones (`'1-2' YEAR TO MONTH` too) are
            // year-to-month intervals; the ranges of DAY to SECOND (`'2 03:04:05.678' DAY TO
            // SECOND`) day-to-second ones, to the millisecond.
            ast::Expr::Interval(interval) => match trino_interval(interval) {
                Some(rewritten) => *expr = rewritten,
                // A YEAR or MONTH interval, or a range, whose text does not read: Trino's error
                // (DataFusion's would not name the problem, or would read `'1.5' YEAR`).
                None if interval.last_field.is_some()
                    || matches!(
                        interval.leading_field,
                        Some(DateTimeField::Year | DateTimeField::Month)
                    ) =>
                {
                    return ControlFlow::Break(SqeError::invalid(format!(
                        "Invalid INTERVAL literal: {interval}"
                    )));
                }
                None => {}
            },
            // `current_timestamp`, `localtimestamp` and `localtime` as Trino has them: precision 3
            // unless given, in the session's zone (`localtimestamp` its wall-clock time).
            ast::Expr::Identifier(ident)
                if ident.quote_style.is_none()
                    && matches!(
                        ident.value.to_lowercase().as_str(),
                        "localtimestamp" | "localtime"
                    ) =>
            {
                *expr = clock(&ident.value.to_lowercase(), 3);
            }
            ast::Expr::Function(f) if clock_precision(f).is_some() => {
                if let Some((name, precision)) = clock_precision(f) {
                    *expr = clock(&name, precision);
                }
            }
            ast::Expr::Extract {
                field, expr: from, ..
            } => {
                if let Some(name) =
                    extract_name(field).and_then(|f| sqe_functions::extract_function(&f))
                {
                    let arg = std::mem::replace(from.as_mut(), ast::Expr::value(Value::Null));
                    *expr = call(name, vec![arg]);
                }
            }
            // DataFusion plans SUBSTRING(x FROM a FOR b) with its own `substr`, not the registry's.
            ast::Expr::Substring {
                expr: text,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![std::mem::replace(
                    text.as_mut(),
                    ast::Expr::value(Value::Null),
                )];
                args.push(match substring_from.take() {
                    Some(from) => *from,
                    None => ast::Expr::value(Value::Number("1".into(), false)),
                });
                if let Some(length) = substring_for.take() {
                    args.push(*length);
                }
                *expr = call("substr", args);
            }
            // VARBINARY, as DataFusion's parser spells it.
            ast::Expr::Cast { data_type, .. }
                if matches!(data_type, ast::DataType::Varbinary(_)) =>
            {
                *data_type = ast::DataType::Bytea;
            }
            // A cast to MAP(K, V), which DataFusion's parser does not know: `sqe_cast_as(x, an
            // empty map of that type, try)`, a cast again once the analyzer knows `x`'s type.
            ast::Expr::Cast {
                kind,
                expr: inner,
                data_type: ast::DataType::Map(k, v),
                ..
            } => {
                let empty = |t: &ast::DataType| ast::Expr::Cast {
                    kind: ast::CastKind::Cast,
                    expr: Box::new(ast::Expr::Array(ast::Array {
                        elem: Vec::new(),
                        named: true,
                    })),
                    data_type: ast::DataType::Array(ast::ArrayElemTypeDef::AngleBracket(Box::new(
                        t.clone(),
                    ))),
                    array: false,
                    format: None,
                };
                let lenient = matches!(kind, ast::CastKind::TryCast | ast::CastKind::SafeCast);
                *expr = call(
                    "sqe_cast_as",
                    vec![
                        std::mem::replace(inner.as_mut(), ast::Expr::value(Value::Null)),
                        call("map", vec![empty(k), empty(v)]),
                        ast::Expr::value(Value::Boolean(lenient)),
                    ],
                );
            }
            ast::Expr::Function(f) => {
                if let Some(rewritten) = reduce_agg(f).or_else(|| function_as_expression(f)) {
                    *expr = rewritten;
                } else {
                    rename_function(f);
                }
            }
            ast::Expr::Value(v) => {
                // An exponent makes a DOUBLE literal in Trino.
                if let Value::Number(n, _) = &v.value
                    && n.contains(['e', 'E'])
                {
                    let n = n.clone();
                    *expr = ast::Expr::Cast {
                        kind: ast::CastKind::Cast,
                        expr: Box::new(ast::Expr::value(Value::SingleQuotedString(n))),
                        data_type: ast::DataType::Double(ast::ExactNumberInfo::None),
                        array: false,
                        format: None,
                    };
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trino_sql::testing::rewritten;

    fn ok(sql: &str) -> String {
        rewritten(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    #[test]
    fn output_columns_and_order() {
        assert_eq!(
            ok("SELECT a, a + 1, 3 FROM t ORDER BY a + 1"),
            "SELECT a, a + 1 AS _col1, 3 AS _col2 FROM t ORDER BY _col1"
        );
        // A subquery's columns are named too: each query is visited.
        assert_eq!(
            ok("SELECT x FROM (SELECT 1 + 1) AS s(x)"),
            "SELECT x FROM (SELECT 1 + 1 AS _col0) AS s (x)"
        );
        assert_eq!(
            ok(
                "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r"
            ),
            "WITH RECURSIVE r (n) AS (SELECT 1 AS n UNION ALL SELECT n + 1 AS _col0 FROM r WHERE n < 3) SELECT n FROM r"
        );
        assert_eq!(
            ok("SELECT a FROM t ORDER BY a FETCH FIRST 2 ROWS ONLY"),
            "SELECT a FROM t ORDER BY a LIMIT 2"
        );
    }

    #[test]
    fn a_set_statement_is_left_as_written() {
        assert_eq!(
            ok("SET TIME ZONE INTERVAL '-08:00' HOUR TO MINUTE"),
            "SET TIME ZONE INTERVAL '-08:00' HOUR TO MINUTE"
        );
    }

    #[test]
    fn date_time_syntax() {
        assert_eq!(
            ok("SELECT EXTRACT(DOW FROM d) AS w, EXTRACT(TIMEZONE_HOUR FROM ts) AS h FROM t"),
            "SELECT day_of_week(d) AS w, timezone_hour(ts) AS h FROM t"
        );
        assert_eq!(
            ok("SELECT ts AT TIME ZONE 'Europe/Berlin' AS b FROM t"),
            "SELECT at_timezone(ts, 'Europe/Berlin') AS b FROM t"
        );
        assert_eq!(
            ok(
                "SELECT TIMESTAMP '2020-01-02 03:04' AS a, TIMESTAMP '2020-01-02 03:04:05.1234 Europe/Berlin' AS b"
            ),
            "SELECT TIMESTAMP(0) '2020-01-02 03:04:00' AS a, with_timezone(TIMESTAMP(6) '2020-01-02 03:04:05.1234', 'Europe/Berlin') AS b"
        );
        assert_eq!(
            ok("SELECT CAST(x AS TIMESTAMP) AS a, CAST(x AS TIMESTAMP(5)) AS b FROM t"),
            "SELECT CAST(x AS TIMESTAMP(3)) AS a, CAST(x AS TIMESTAMP(6)) AS b FROM t"
        );
        assert_eq!(
            ok("SELECT CAST('2020-01-02 03:04:05 +01:00' AS TIMESTAMP WITH TIME ZONE) AS z"),
            "SELECT with_timezone(CAST('2020-01-02 03:04:05' AS TIMESTAMP(3)), '+01:00') AS z"
        );
        // TRY_CAST keeps a text whose zone does not read for the plan's reading (to NULL).
        assert_eq!(
            ok(
                "SELECT TRY_CAST('2020-01-02 03:04:05 Nowhere/Special' AS TIMESTAMP WITH TIME ZONE) AS z"
            ),
            "SELECT TRY_CAST('2020-01-02 03:04:05 Nowhere/Special' AS TIMESTAMP(3) WITH TIME ZONE) AS z"
        );
        assert_eq!(
            ok("SELECT localtimestamp AS a, current_timestamp(6) AS b"),
            "SELECT CAST(now() AS TIMESTAMP(3)) AS a, CAST(now() AS TIMESTAMP(6) WITH TIME ZONE) AS b"
        );
        assert_eq!(
            ok("SELECT INTERVAL '1-2' YEAR TO MONTH AS m, INTERVAL '3' DAY AS d"),
            "SELECT arrow_cast('14 months', 'Interval(YearMonth)') AS m, INTERVAL '3' DAY AS d"
        );
        assert_eq!(
            rewritten("SELECT INTERVAL 'x' YEAR"),
            Err(SqeError::invalid(
                "Invalid INTERVAL literal: INTERVAL 'x' YEAR"
            ))
        );
    }

    #[test]
    fn casts_json_and_functions() {
        assert_eq!(
            ok("SELECT JSON '{\"a\": 1}' AS j, CAST(m AS JSON) AS k FROM t"),
            "SELECT json_parse('{\"a\": 1}') AS j, sqe_to_json(m) AS k FROM t"
        );
        assert_eq!(
            ok("SELECT CAST(b AS VARBINARY) AS v FROM t"),
            "SELECT CAST(b AS BYTEA) AS v FROM t"
        );
        assert_eq!(
            ok("SELECT TRY_CAST(j AS MAP(VARCHAR, BIGINT)) AS m FROM t"),
            "SELECT sqe_cast_as(j, map(CAST(ARRAY[] AS ARRAY<VARCHAR>), CAST(ARRAY[] AS ARRAY<BIGINT>)), true) AS m FROM t"
        );
        assert_eq!(
            ok("SELECT SUBSTRING(s FROM 2 FOR 3) AS a, SUBSTRING(s FOR 2) AS b FROM t"),
            "SELECT substr(s, 2, 3) AS a, substr(s, 1, 2) AS b FROM t"
        );
        assert_eq!(
            ok("SELECT 1e3 AS d, 1.5 AS e"),
            "SELECT CAST('1e3' AS DOUBLE) AS d, 1.5 AS e"
        );
        assert_eq!(
            ok("SELECT mod(a, 2) AS m, every(b) AS e FROM t"),
            "SELECT ((a) % (2)) AS m, bool_and(b) AS e FROM t"
        );
    }

    #[test]
    fn a_lambdas_row_parameter_reads_fields() {
        assert_eq!(
            ok("SELECT transform(rs, r -> r.a.b + x.c) AS v FROM t"),
            "SELECT transform(rs, r -> get_field(get_field(r, 'a'), 'b') + x.c) AS v FROM t"
        );
    }

    #[test]
    fn table_functions_unnest_and_using_joins() {
        assert_eq!(
            ok(
                "SELECT * FROM TABLE(exclude_columns(input => TABLE(t), columns => DESCRIPTOR(a))) AS e"
            ),
            "SELECT * FROM (SELECT * EXCLUDE (a) FROM t) AS e"
        );
        assert_eq!(
            rewritten("SELECT * FROM TABLE(exclude_columns(input => TABLE(t)))"),
            Err(SqeError::invalid(
                "exclude_columns takes input => TABLE(name) and columns => DESCRIPTOR(column, …)"
            ))
        );
        assert_eq!(
            ok("SELECT u.x FROM t CROSS JOIN UNNEST(t.a) AS u(x)"),
            "SELECT t.x FROM (SELECT t.*, unnest(t.a) AS x FROM t WHERE (t.a) IS NOT NULL) AS t"
        );
        // In each SELECT of a UNION.
        assert_eq!(
            ok("SELECT k FROM a JOIN b USING (k) JOIN c USING (k) UNION SELECT 1"),
            "SELECT a.\"k\" AS k FROM a JOIN b USING(k) JOIN c USING(k) UNION SELECT 1 AS _col0"
        );
        assert_eq!(
            rewritten("SELECT 1 FROM t, UNNEST(t.a), UNNEST(t.b)"),
            Err(SqeError::unsupported(
                "UNNEST is supported as `FROM t CROSS JOIN UNNEST(…) AS u(…)` (or `FROM t, UNNEST(…)`, or `FROM t LEFT JOIN UNNEST(…) AS u(…) ON true`) over one relation, and on its own"
            ))
        );
    }

    #[test]
    fn values_of_timestamps_meet_at_the_finest_precision() {
        assert_eq!(
            ok(
                "SELECT * FROM (VALUES (TIMESTAMP '2020-01-02 03:04:05'), (TIMESTAMP '2020-01-02 03:04:05.5')) AS v(ts)"
            ),
            "SELECT * FROM (VALUES (TIMESTAMP(3) '2020-01-02 03:04:05'), (TIMESTAMP(3) '2020-01-02 03:04:05.5')) AS v (ts)"
        );
    }
}

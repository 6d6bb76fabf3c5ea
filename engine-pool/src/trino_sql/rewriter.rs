//! Trino's semantics where DataFusion's differ, decided once here for every protocol:
//!
//! - the session defaults: NULLs sort last in both directions, `1.5` is a DECIMAL (and `1e3` a
//!   DOUBLE), as in Trino;
//! - the statement, before planning ([`rewrite_statement`]): an output column without a name is
//!   `_col0`, `_col1`, … by its position, as Trino names it (which also lets `SELECT x, 3, 3`
//!   plan); `EXTRACT(field FROM x)` is Trino's field function (`day_of_week` is ISO, 1 to 7);
//!   `FROM t CROSS JOIN UNNEST(…)` is DataFusion's `unnest()` (unnest.rs); `WITH t(a, b)` names
//!   reach a recursive term; `FETCH FIRST n ROWS ONLY` is a LIMIT; Trino's names for DataFusion's
//!   functions (`approx_percentile`, `listagg`, `variance`, `every`, `any_value`) and `mod`/`date`
//!   as the expressions they are; a `TIMESTAMP '…'` literal's precision is its fraction's digits,
//!   a cast's precision is 3 unless given, and `current_timestamp`, `localtimestamp` and
//!   `localtime` are Trino's (precision 3 unless given). Arrow has four units, so a precision is
//!   held in the next unit that holds it: 0, 3, 6 or 9 digits;
//! - the plan, before type coercion ([`TrinoOperands`]): timestamps (and times) of different
//!   precisions that meet are each cast to the finest of them, where DataFusion would cut the finer
//!   ones down to the coarsest, a decimal quotient takes Trino's type, and text cast to a
//!   timestamp is read as Trino reads it (no `T`, zone names, a longer fraction rounded); a
//!   timestamp with a time zone per value (functions/src/zoned.rs) is compared by its instant,
//!   shifted by an interval in its zone, and meets timestamps with one zone in its per-value form;
//! - the plan, after type coercion ([`TrinoCasts`]): a cast of a DOUBLE or DECIMAL to an integer
//!   rounds half away from zero (DataFusion truncates), a timestamp cast to VARCHAR is Trino's text
//!   (`2020-01-02 03:04:05`, no `T`; with a zone per value, each in its own), and a DECIMAL quotient has Trino's scale, the larger of its
//!   operands' (rounded half up); integer `+ - *` of constants fail on overflow (and of columns,
//!   in the physical plan: overflow.rs).

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, IntervalUnit, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    BinaryExpr, Cast, Expr, ExprSchemable, LogicalPlan, Operator, ScalarUDF, TryCast,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::SessionConfig;
use datafusion::sql::sqlparser::ast::{
    self, DateTimeField, FunctionArg, FunctionArgExpr, FunctionArgumentList, FunctionArguments,
    Ident, ObjectName, ObjectNamePart, Query, SelectItem, SetExpr, Statement, TableFactor, Value,
    VisitMut, VisitorMut,
};
use sqe_sessions::{SqeError, SqeResult};

/// Trino's defaults on a session's DataFusion settings (a deployment's own settings come after).
pub(crate) fn configure(config: &mut SessionConfig) {
    let parser = &mut config.options_mut().sql_parser;
    parser.default_null_ordering = "nulls_last".to_string();
    parser.parse_float_as_decimal = true;
}

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

/// The query `exclude_columns(input => TABLE(t), columns => DESCRIPTOR(a, …))` stands for.
fn exclude_columns(f: &ast::Function) -> SqeResult<Query> {
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
    let dialect = crate::dialect::SqeDialect::default();
    datafusion::sql::sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .map(|q| *q)
        .map_err(|e| SqeError::invalid(format!("exclude_columns: {e}")))
}

/// Gives the columns of the first SELECT of `body` these names, in order.
fn name_first_select(body: &mut SetExpr, names: &[Ident]) {
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
fn fetch_with_ties(query: &mut Query) -> SqeResult<()> {
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
    let dialect = crate::dialect::SqeDialect::default();
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
fn fetch_as_limit(query: &mut Query) {
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
fn name_columns(body: &mut SetExpr) -> Vec<(ast::Expr, Ident)> {
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

/// Trino's functions that are an expression of DataFusion's: `mod(n, m)` is `n % m` (the
/// remainder has the dividend's sign in both), `date(x)` is `CAST(x AS DATE)`.
/// `reduce_agg(v, initial, input, combine) [FILTER (WHERE c)]`: `reduce` over the group's
/// non-NULL values (those passing `c`), folded in one pass: the combine function merges partial
/// states, and a single fold has none.
fn reduce_agg(f: &ast::Function) -> Option<ast::Expr> {
    let (name, args) = plain_call(f)?;
    if !name.eq_ignore_ascii_case("reduce_agg") || f.over.is_some() {
        return None;
    }
    let [
        v,
        initial,
        input @ ast::Expr::Lambda(_),
        ast::Expr::Lambda(_),
    ] = args.as_slice()
    else {
        return None;
    };
    let ast::Expr::Function(mut values) = call("array_agg", vec![v.clone()]) else {
        return None;
    };
    let present = ast::Expr::IsNotNull(Box::new(v.clone()));
    values.filter = Some(Box::new(match &f.filter {
        Some(c) => ast::Expr::BinaryOp {
            left: Box::new(present),
            op: ast::BinaryOperator::And,
            right: Box::new(ast::Expr::Nested(c.clone())),
        },
        None => present,
    }));
    let state = Ident::new("__sqe_state");
    let output = lambda(state.clone(), ast::Expr::Identifier(state));
    Some(call(
        "reduce",
        vec![
            ast::Expr::Function(values),
            initial.clone(),
            input.clone(),
            output,
        ],
    ))
}

/// A call's name and its arguments, when it has a plain name, positional arguments and no
/// clauses inside its parentheses (its FILTER and OVER are the caller's to check).
fn plain_call(f: &ast::Function) -> Option<(&str, Vec<ast::Expr>)> {
    let [ObjectNamePart::Identifier(name)] = f.name.0.as_slice() else {
        return None;
    };
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    if !list.clauses.is_empty() {
        return None;
    }
    let args = list
        .args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect::<Option<_>>()?;
    Some((name.value.as_str(), args))
}

/// The lambda `param -> body`.
fn lambda(param: Ident, body: ast::Expr) -> ast::Expr {
    ast::Expr::Lambda(ast::LambdaFunction {
        params: ast::OneOrManyWithParens::One(ast::LambdaFunctionParameter {
            name: param,
            data_type: None,
        }),
        body: Box::new(body),
        syntax: ast::LambdaSyntax::Arrow,
    })
}

fn function_as_expression(f: &ast::Function) -> Option<ast::Expr> {
    let (name, args) = plain_call(f)?;
    if f.over.is_some() || f.filter.is_some() {
        return None;
    }
    match (name.to_lowercase().as_str(), args.as_slice()) {
        ("mod", [n, m]) => Some(ast::Expr::Nested(Box::new(ast::Expr::BinaryOp {
            left: Box::new(ast::Expr::Nested(Box::new(n.clone()))),
            op: ast::BinaryOperator::Modulo,
            right: Box::new(ast::Expr::Nested(Box::new(m.clone()))),
        }))),
        // array_sort(a, comparator): the higher-order form (the one-argument form is a scalar
        // function of the same name, which DataFusion would pick).
        ("array_sort", [a, comparator @ ast::Expr::Lambda(_)]) => {
            Some(call("sqe_array_sort", vec![a.clone(), comparator.clone()]))
        }
        // Trino sorts an array's NULLs last (DataFusion's default puts them first).
        ("array_sort", [a]) => Some(call(
            "array_sort",
            vec![
                a.clone(),
                ast::Expr::value(Value::SingleQuotedString("ASC".into())),
                ast::Expr::value(Value::SingleQuotedString("NULLS LAST".into())),
            ],
        )),
        // TRY(x): `x` as a lambda's body, which `sqe_try` evaluates, catching its errors.
        ("try", [x]) => Some(call(
            "sqe_try",
            vec![
                ast::Expr::value(Value::Number("0".into(), false)),
                lambda(Ident::new("__sqe_try"), x.clone()),
            ],
        )),
        ("date", [x]) => Some(ast::Expr::Cast {
            kind: ast::CastKind::Cast,
            expr: Box::new(x.clone()),
            data_type: ast::DataType::Date,
            array: false,
            format: None,
        }),
        _ => None,
    }
}

/// Trino's aggregates that DataFusion (or SQE) has under other names: `approx_percentile` is
/// `approx_percentile_cont` (`…_with_weight` with a weight); `listagg(x, sep) WITHIN GROUP
/// (ORDER BY …)` is `string_agg(x, sep ORDER BY …)`; `variance` is `var_samp`, `every`
/// `bool_and`, `any_value` `arbitrary`.
fn rename_function(f: &mut ast::Function) {
    let [ObjectNamePart::Identifier(name)] = f.name.0.as_slice() else {
        return;
    };
    let arity = match &f.args {
        FunctionArguments::List(list) => list.args.len(),
        _ => 0,
    };
    let renamed = match (name.value.to_lowercase().as_str(), arity) {
        ("approx_percentile", 2) => "approx_percentile_cont",
        ("approx_percentile", 3) => "approx_percentile_cont_with_weight",
        ("listagg", 1 | 2) => "string_agg",
        ("variance", 1) => "var_samp",
        ("every", 1) => "bool_and",
        ("any_value", 1) => "arbitrary",
        _ => return,
    };
    if renamed == "string_agg"
        && let FunctionArguments::List(list) = &mut f.args
    {
        if list.args.len() == 1 {
            let empty = ast::Expr::value(Value::SingleQuotedString(String::new()));
            list.args
                .push(FunctionArg::Unnamed(FunctionArgExpr::Expr(empty)));
        }
        let order = std::mem::take(&mut f.within_group);
        if !order.is_empty() {
            list.clauses
                .push(ast::FunctionArgumentClause::OrderBy(order));
        }
    }
    f.name = ObjectName(vec![ObjectNamePart::Identifier(Ident::new(renamed))]);
}

/// A timestamp literal's text split into its date-time and the zone after it (a region or an
/// offset, after a time with a space or not: `2020-01-02 03:04:05.6 +01:00`,
/// `2020-01-02 03:04+01:00`, `2020-01-02 UTC`); None when it names no zone.
fn timestamp_zone(text: &str) -> Option<(&str, &str)> {
    let text = text.trim();
    let bytes = text.as_bytes();
    // The date: digits and dashes (a sign may lead).
    let mut end = usize::from(bytes.first().is_some_and(|b| *b == b'+' || *b == b'-'));
    while end < bytes.len() && (bytes[end].is_ascii_digit() || bytes[end] == b'-') {
        end += 1;
    }
    // After the date, a space (`2020-01-02T03:04` names no zone: it is not Trino's text).
    if bytes.get(end).is_some_and(|b| !b.is_ascii_whitespace()) {
        return None;
    }
    // The time, after one space: digits, colons and the fraction's point.
    if end < bytes.len() && bytes[end] == b' ' && bytes.get(end + 1).is_some_and(u8::is_ascii_digit)
    {
        end += 1;
        while end < bytes.len()
            && (bytes[end].is_ascii_digit() || matches!(bytes[end], b':' | b'.'))
        {
            end += 1;
        }
    }
    let zone = text[end..].trim();
    (!zone.is_empty()).then(|| (text[..end].trim_end(), zone))
}

/// The Arrow unit's precision that holds Trino's `precision`: 0, 3, 6 or 9 (Trino's 1, 2, 4, 5, 7
/// and 8 take the next of these; beyond nanoseconds, nanoseconds).
fn arrow_precision(precision: u64) -> u64 {
    match precision {
        0 => 0,
        1..=3 => 3,
        4..=6 => 6,
        _ => 9,
    }
}

/// The digits of a date-time text's fraction of a second.
fn fraction_digits(local: &str) -> u64 {
    match local.rsplit_once('.') {
        Some((_, fraction)) if local.contains(':') => {
            fraction.bytes().take_while(u8::is_ascii_digit).count() as u64
        }
        _ => 0,
    }
}

/// The zone of a zoned timestamp constant as the rewrite leaves it (`with_timezone(…, 'zone')`).
fn literal_zone(e: &ast::Expr) -> Option<String> {
    let ast::Expr::Function(f) = e else {
        return None;
    };
    if !f.name.to_string().eq_ignore_ascii_case("with_timezone") {
        return None;
    }
    match &f.args {
        FunctionArguments::List(list) => match list.args.get(1) {
            Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(ast::Expr::Value(v)))) => {
                match &v.value {
                    Value::SingleQuotedString(zone) => Some(zone.clone()),
                    _ => None,
                }
            }
            _ => None,
        },
        _ => None,
    }
}

/// The precision slot of a timestamp constant as the rewrite leaves it: a literal, a cast, or
/// either in `with_timezone` (a zoned literal).
fn literal_precision(e: &mut ast::Expr) -> Option<&mut Option<u64>> {
    match e {
        ast::Expr::TypedString(ast::TypedString {
            data_type: ast::DataType::Timestamp(precision, _),
            ..
        })
        | ast::Expr::Cast {
            data_type: ast::DataType::Timestamp(precision, _),
            ..
        } => Some(precision),
        ast::Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("with_timezone") => {
            match &mut f.args {
                FunctionArguments::List(list) => match list.args.first_mut() {
                    Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(first))) => {
                        literal_precision(first)
                    }
                    _ => None,
                },
                _ => None,
            }
        }
        _ => None,
    }
}

/// Each column of VALUES rows: its timestamp constants at the finest precision among them, and
/// zoned ones in different zones each keeping its own (`sqe_zoned`: functions/src/zoned.rs).
fn finest_literals(rows: &mut [ast::Parens<Vec<ast::Expr>>]) {
    let width = rows.iter().map(|r| r.content.len()).max().unwrap_or(0);
    for column in 0..width {
        let finest = rows
            .iter_mut()
            .filter_map(|row| row.content.get_mut(column).and_then(literal_precision))
            .filter_map(|p| *p)
            .max();
        for row in rows.iter_mut() {
            if let Some(p) = row.content.get_mut(column).and_then(literal_precision) {
                *p = finest;
            }
        }
        let zones: std::collections::BTreeSet<String> = rows
            .iter()
            .filter_map(|row| row.content.get(column).and_then(literal_zone))
            .collect();
        if zones.len() < 2 {
            continue;
        }
        for row in rows.iter_mut() {
            if let Some(x) = row.content.get_mut(column)
                && literal_zone(x).is_some()
            {
                let zoned = std::mem::replace(x, ast::Expr::value(Value::Null));
                *x = call("sqe_zoned", vec![zoned]);
            }
        }
    }
}

/// `current_timestamp(p)`, `localtimestamp(p)`, `localtime(p)` and `now()`: the clock's name and
/// precision (3 when none is given).
fn clock_precision(f: &ast::Function) -> Option<(String, u64)> {
    let [ObjectNamePart::Identifier(name)] = f.name.0.as_slice() else {
        return None;
    };
    let name = name.value.to_lowercase();
    if !matches!(
        name.as_str(),
        "current_timestamp" | "localtimestamp" | "localtime" | "now"
    ) {
        return None;
    }
    let args = match &f.args {
        FunctionArguments::None => return Some((name, 3)),
        FunctionArguments::List(list) => &list.args,
        FunctionArguments::Subquery(_) => return None,
    };
    match args.as_slice() {
        [] => Some((name, 3)),
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(ast::Expr::Value(v)))] if name != "now" => {
            match &v.value {
                Value::Number(n, _) => n.parse::<u64>().ok().map(|p| (name, p)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The clock `name` at `precision`: DataFusion's `now()` (the statement's instant in the
/// session's zone) cast to Trino's type.
fn clock(name: &str, precision: u64) -> ast::Expr {
    let now = call("now", vec![]);
    let zone = match name {
        "current_timestamp" | "now" => ast::TimezoneInfo::WithTimeZone,
        _ => ast::TimezoneInfo::None,
    };
    let cast = |expr: ast::Expr, data_type: ast::DataType| ast::Expr::Cast {
        kind: ast::CastKind::Cast,
        expr: Box::new(expr),
        data_type,
        array: false,
        format: None,
    };
    let timestamp = cast(
        now,
        ast::DataType::Timestamp(Some(arrow_precision(precision)), zone),
    );
    if name != "localtime" {
        return timestamp;
    }
    let unit = match arrow_precision(precision) {
        0 => "Time32(s)",
        3 => "Time32(ms)",
        6 => "Time64(us)",
        _ => "Time64(ns)",
    };
    call(
        "arrow_cast",
        vec![
            timestamp,
            ast::Expr::value(Value::SingleQuotedString(unit.into())),
        ],
    )
}

/// A Trino interval literal as DataFusion plans it: a year-to-month one as an Arrow year-month
/// interval, a range of day-to-second fields as the days and milliseconds it adds up to. None
/// for what DataFusion reads as it is (a single day-to-second field) or refuses itself.
fn trino_interval(interval: &ast::Interval) -> Option<ast::Expr> {
    use DateTimeField as F;
    let ast::Expr::Value(v) = interval.value.as_ref() else {
        return None;
    };
    let Value::SingleQuotedString(text) = &v.value else {
        return None;
    };
    if interval.leading_precision.is_some() || interval.fractional_seconds_precision.is_some() {
        return None;
    }
    let text = text.trim();
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let number = |s: &str| s.trim().parse::<i64>().ok();
    let string = |s: String| ast::Expr::value(Value::SingleQuotedString(s));
    match (&interval.leading_field, &interval.last_field) {
        (Some(F::Year | F::Month), None) | (Some(F::Year), Some(F::Month)) => {
            let months = match (&interval.leading_field, &interval.last_field) {
                (Some(F::Year), None) => number(body)?.checked_mul(12)?,
                (Some(F::Month), None) => number(body)?,
                _ => {
                    let (years, months) = body.split_once('-')?;
                    number(years)?
                        .checked_mul(12)?
                        .checked_add(number(months)?)?
                }
            };
            let months = i32::try_from(if negative { -months } else { months }).ok()?;
            Some(call(
                "arrow_cast",
                vec![
                    string(format!("{months} months")),
                    string("Interval(YearMonth)".into()),
                ],
            ))
        }
        (Some(leading), Some(last)) => {
            const FIELDS: [(F, i64); 4] = [
                (F::Day, 86_400_000),
                (F::Hour, 3_600_000),
                (F::Minute, 60_000),
                (F::Second, 1_000),
            ];
            let from = FIELDS.iter().position(|(f, _)| f == leading)?;
            let to = FIELDS.iter().position(|(f, _)| f == last)?;
            let (mut parts, rest) = match from {
                0 => {
                    let (days, rest) = body.trim().split_once(' ')?;
                    (vec![days], rest)
                }
                _ => (vec![], body),
            };
            parts.extend(rest.split(':'));
            if to <= from || parts.len() != to - from + 1 {
                return None;
            }
            let mut millis: i64 = 0;
            for (part, (field, unit)) in parts.iter().zip(&FIELDS[from..=to]) {
                let ms = match field {
                    F::Second => second_millis(part)?,
                    _ => number(part)?.checked_mul(*unit)?,
                };
                millis = millis.checked_add(ms)?;
            }
            let millis = if negative { -millis } else { millis };
            Some(ast::Expr::Interval(ast::Interval {
                value: Box::new(string(format!(
                    "{} days {} milliseconds",
                    millis / 86_400_000,
                    millis % 86_400_000
                ))),
                leading_field: None,
                leading_precision: None,
                last_field: None,
                fractional_seconds_precision: None,
            }))
        }
        _ => None,
    }
}

/// `12.345` seconds as 12345 milliseconds (digits past the millisecond are dropped, as Trino's
/// intervals hold milliseconds).
fn second_millis(text: &str) -> Option<i64> {
    let (whole, fraction) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits: String = fraction.chars().chain("000".chars()).take(3).collect();
    whole
        .parse::<i64>()
        .ok()?
        .checked_mul(1_000)?
        .checked_add(digits.parse::<i64>().ok()?)
}

/// A constant text that names a zone after its date-time: the date-time (with its seconds) and
/// the zone.
fn zoned_text(e: &ast::Expr) -> Option<(String, String)> {
    let ast::Expr::Value(v) = e else {
        return None;
    };
    let Value::SingleQuotedString(text) = &v.value else {
        return None;
    };
    timestamp_zone(text).map(|(local, zone)| (with_seconds(local), zone.to_string()))
}

/// Whether `local` is a date-time (a text with a zone after something else is not read as one:
/// its cast fails as Trino's does, "Value cannot be cast to timestamp").
fn reads_as_date_time(local: &str) -> bool {
    chrono::NaiveDateTime::parse_from_str(local, "%Y-%m-%d %H:%M:%S%.f").is_ok()
        || chrono::NaiveDate::parse_from_str(local, "%Y-%m-%d").is_ok()
}

/// Whether `zone` names a zone: TRY_CAST's text that with_timezone reads without an error.
fn zone_name_reads(zone: &str) -> bool {
    sqe_functions::zone_name(zone).is_ok()
}

/// A timestamp's text with the seconds Trino lets it leave out (`2020-01-02 03:04` is
/// `03:04:00`), which Arrow's parser needs.
fn with_seconds(text: &str) -> String {
    let text = text.trim();
    match text.split_once(' ') {
        Some((_, time)) if time.bytes().filter(|b| *b == b':').count() == 1 => format!("{text}:00"),
        _ => text.to_string(),
    }
}

fn extract_name(field: &DateTimeField) -> Option<String> {
    let name = match field {
        DateTimeField::Year => "year".to_string(),
        DateTimeField::Quarter => "quarter".to_string(),
        DateTimeField::Month => "month".to_string(),
        DateTimeField::Week(None) => "week".to_string(),
        DateTimeField::Day => "day".to_string(),
        DateTimeField::DayOfWeek | DateTimeField::Dow => "day_of_week".to_string(),
        DateTimeField::DayOfYear | DateTimeField::Doy => "day_of_year".to_string(),
        DateTimeField::Hour => "hour".to_string(),
        DateTimeField::Minute => "minute".to_string(),
        DateTimeField::Second => "second".to_string(),
        DateTimeField::Custom(ident) => ident.value.to_lowercase(),
        _ => return None,
    };
    Some(name)
}

pub(crate) fn call(name: &str, args: Vec<ast::Expr>) -> ast::Expr {
    ast::Expr::Function(ast::Function {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(name))]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|a| FunctionArg::Unnamed(FunctionArgExpr::Expr(a)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

/// DataFusion's analyzer rules with Trino's around its type coercion: operand types settled
/// before it ([`TrinoOperands`]: so that a CASE, COALESCE or UNION around them takes Trino's
/// type, not DataFusion's), and Trino's casts after it ([`TrinoCasts`]).
pub(crate) fn analyzer_rules() -> Vec<Arc<dyn AnalyzerRule + Send + Sync>> {
    let mut rules = datafusion::optimizer::Analyzer::new().rules;
    let coercion = rules
        .iter()
        .position(|r| r.name() == "type_coercion")
        .unwrap_or(rules.len());
    rules.insert(coercion, Arc::new(TrinoOperands));
    rules.push(Arc::new(TrinoCasts));
    rules
}

/// Before type coercion: `a / b` of two decimals as `CAST(a / b AS <Trino's type>)`, and
/// timestamps of different precisions that meet (compared, subtracted, in one CASE, COALESCE, IN
/// list, function call or UNION column) each at the finest of them, as Trino coerces them, where
/// DataFusion would cut the finer ones down to the coarsest.
#[derive(Debug)]
pub(crate) struct TrinoOperands;

impl AnalyzerRule for TrinoOperands {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let operands = |e: Expr, schema: &DFSchema| {
            e.transform_up(|e| match e {
                Expr::BinaryExpr(BinaryExpr {
                    left,
                    op: Operator::Divide,
                    right,
                }) => trino_quotient(left, right, schema),
                Expr::Cast(Cast { expr, field }) => Ok(
                    match text_to_timestamp(&expr, field.data_type(), false, schema)? {
                        Some(read) => Transformed::yes(read),
                        None => Transformed::no(Expr::Cast(Cast::new_from_field(expr, field))),
                    },
                ),
                Expr::TryCast(TryCast { expr, field }) => Ok(
                    match text_to_timestamp(&expr, field.data_type(), true, schema)? {
                        Some(read) => Transformed::yes(read),
                        None => {
                            Transformed::no(Expr::TryCast(TryCast::new_from_field(expr, field)))
                        }
                    },
                ),
                other => zoned_operands_of(other, schema)?
                    .transform_data(|e| finest_timestamps(e, schema)),
            })
        };
        // A union keeps the types its planner gave it: taken again from its inputs.
        rewrite_plan(plan, operands, |node| match node {
            LogicalPlan::Union(union) => Ok(LogicalPlan::Union(
                datafusion::logical_expr::Union::try_new_with_loose_types(finest_union_inputs(
                    union.inputs,
                )?)?,
            )),
            other => other.recompute_schema(),
        })
    }

    fn name(&self) -> &str {
        "trino_operands"
    }
}

/// Text cast to a timestamp, read as Trino reads it (`sqe_cast_timestamp`, whose second argument
/// is a NULL of the type cast to), where DataFusion's cast would read a `T`, or a zone into a
/// timestamp without one, and no zone names. Only casts the query spells: a text DataFusion's
/// coercion casts (a timestamp compared with text) is its own.
fn text_to_timestamp(
    x: &Expr,
    to: &DataType,
    lenient: bool,
    schema: &DFSchema,
) -> Result<Option<Expr>> {
    if !matches!(to, DataType::Timestamp(..)) || !is_text(&x.get_type(schema)?) {
        return Ok(None);
    }
    let mut args = vec![x.clone(), Expr::Literal(ScalarValue::try_from(to)?, None)];
    // Texts from a column into a timestamp with a time zone: each keeps its own zone.
    if matches!(to, DataType::Timestamp(_, Some(_))) && !is_constant(x) {
        args.push(datafusion::prelude::lit(true));
    }
    Ok(Some(Expr::ScalarFunction(ScalarFunction::new_udf(
        sqe_functions::cast_timestamp(lenient),
        args,
    ))))
}

/// The unit of a timestamp or time type, and whether it is a time. (Arrow orders units from
/// seconds to nanoseconds: the finest is the largest.)
fn temporal_unit(t: &DataType) -> Option<(bool, TimeUnit)> {
    match t {
        DataType::Timestamp(unit, _) => Some((false, *unit)),
        DataType::Time32(unit) | DataType::Time64(unit) => Some((true, *unit)),
        other => sqe_functions::zoned_unit(other).map(|unit| (false, unit)),
    }
}

/// The unit timestamps of `types` meet at: the finest, when their units differ or when a zone
/// per value meets a timestamp with one zone (which then takes the per-value form).
fn meeting_unit(types: &[DataType]) -> Option<TimeUnit> {
    finest_of(types).or_else(|| {
        let one_zone = types
            .iter()
            .any(|t| matches!(t, DataType::Timestamp(_, Some(_))));
        let zoned = types.iter().find_map(sqe_functions::zoned_unit);
        zoned.filter(|_| one_zone)
    })
}

/// The type `t` is cast to where timestamps meet at `unit` ([`meeting_unit`]), a zone per value
/// among them (`zoned`) or not; None when it stays.
fn meeting_type(t: &DataType, unit: TimeUnit, zoned: bool) -> Option<DataType> {
    if zoned && matches!(t, DataType::Timestamp(_, Some(_))) {
        return Some(sqe_functions::zoned_type(unit));
    }
    in_unit(t, unit)
}

/// The finest unit among `types` when they hold timestamps (or times) of more than one unit.
fn finest_of<'a>(types: impl IntoIterator<Item = &'a DataType>) -> Option<TimeUnit> {
    let units: Vec<(bool, TimeUnit)> = types.into_iter().filter_map(temporal_unit).collect();
    let (kind, _) = *units.first()?;
    let units: Vec<TimeUnit> = units
        .into_iter()
        .filter(|(k, _)| *k == kind)
        .map(|(_, u)| u)
        .collect();
    let finest = *units.iter().max()?;
    units.iter().any(|u| *u != finest).then_some(finest)
}

/// `t`, a timestamp or time type, in `unit` (None when it is in that unit already).
fn in_unit(t: &DataType, unit: TimeUnit) -> Option<DataType> {
    let to = match t {
        DataType::Timestamp(_, zone) => DataType::Timestamp(unit, zone.clone()),
        DataType::Time32(_) | DataType::Time64(_) => match unit {
            TimeUnit::Second | TimeUnit::Millisecond => DataType::Time32(unit),
            _ => DataType::Time64(unit),
        },
        other if is_zoned(other) => sqe_functions::zoned_type(unit),
        _ => return None,
    };
    (to != *t).then_some(to)
}

/// Whether `t` is an Arrow interval that stands for Trino's interval day to second (a duration
/// does too, but compares and adds as the time it spans already).
fn is_day_second(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Interval(IntervalUnit::DayTime | IntervalUnit::MonthDayNano)
    )
}

/// Replaces `x` with `f(x)`.
fn wrap(x: &mut Expr, f: impl FnOnce(Expr) -> Expr) {
    let inner = std::mem::replace(x, Expr::Literal(ScalarValue::Null, None));
    *x = f(inner);
}

fn call_udf(f: Arc<ScalarUDF>, x: Expr) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(f, vec![x]))
}

/// The operands of `e` that its coercion makes one type, grouped, for the node kinds where two
/// timestamps meet.
fn operand_groups(e: &mut Expr) -> Vec<Vec<&mut Expr>> {
    match e {
        Expr::BinaryExpr(b) => vec![vec![b.left.as_mut(), b.right.as_mut()]],
        Expr::Between(b) => vec![vec![b.expr.as_mut(), b.low.as_mut(), b.high.as_mut()]],
        Expr::InList(i) => {
            let mut group = vec![i.expr.as_mut()];
            group.extend(i.list.iter_mut());
            vec![group]
        }
        Expr::Case(c) => {
            let mut keys: Vec<&mut Expr> = c.expr.iter_mut().map(Box::as_mut).collect();
            let mut results: Vec<&mut Expr> = c.else_expr.iter_mut().map(Box::as_mut).collect();
            for (when, then) in &mut c.when_then_expr {
                if !keys.is_empty() {
                    keys.push(when.as_mut());
                }
                results.push(then.as_mut());
            }
            vec![keys, results]
        }
        Expr::ScalarFunction(f) => vec![f.args.iter_mut().collect()],
        _ => vec![],
    }
}

/// `e` with Trino's meaning where its operands are timestamps or intervals (see
/// [`TrinoOperands`]): a timestamp plus an interval, and each group of operands at one timestamp
/// unit, or, for day-to-second intervals compared, by their milliseconds.
fn finest_timestamps(mut e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let compares = match &e {
        Expr::BinaryExpr(b) => {
            b.op.supports_propagation()
                || matches!(b.op, Operator::IsDistinctFrom | Operator::IsNotDistinctFrom)
        }
        Expr::Between(_) | Expr::InList(_) => true,
        _ => false,
    };
    let mut changed = timestamp_plus_interval(&mut e, schema);
    for group in operand_groups(&mut e) {
        let types = types_of(&group, schema);
        changed |= if compares && day_second_intervals(&types) {
            compared_as_millis(group)
        } else {
            finest_group(group, &types, compares)
        };
    }
    Ok(if changed {
        Transformed::yes(e)
    } else {
        Transformed::no(e)
    })
}

fn types_of(group: &[&mut Expr], schema: &DFSchema) -> Vec<DataType> {
    group
        .iter()
        .map(|x| x.get_type(schema).unwrap_or(DataType::Null))
        .collect()
}

/// Whether `types` are day-to-second intervals (or durations, or NULL), not all of them durations
/// (which compare as they are).
fn day_second_intervals(types: &[DataType]) -> bool {
    types
        .iter()
        .all(|t| is_day_second(t) || matches!(t, DataType::Duration(_) | DataType::Null))
        && types.iter().any(is_day_second)
}

/// Day-to-second intervals compared by their milliseconds, as Trino compares them (DataFusion
/// compares days, then nanoseconds: `INTERVAL '25' HOUR` would be less than `INTERVAL '1' DAY`).
fn compared_as_millis(group: Vec<&mut Expr>) -> bool {
    for operand in group {
        wrap(operand, |x| call_udf(sqe_functions::to_milliseconds(), x));
    }
    true
}

/// `timestamp ± interval day to second` as Trino computes it; whether it changed `e`:
/// - a timestamp(0) is a timestamp(3) first, so that the interval's milliseconds are kept (Trino
///   types the sum a timestamp(3); DataFusion keeps the timestamp's unit and drops them);
/// - a zoned timestamp moves by the time the interval spans, its days as 24 hours each (DataFusion
///   adds calendar days in the zone, 23 or 25 hours across a change of offset).
fn timestamp_plus_interval(e: &mut Expr, schema: &DFSchema) -> bool {
    let Expr::BinaryExpr(b) = e else {
        return false;
    };
    let type_of = |x: &Expr| x.get_type(schema).unwrap_or(DataType::Null);
    let (left, right) = (type_of(&b.left), type_of(&b.right));
    let interval = |t: &DataType| is_day_second(t) || matches!(t, DataType::Duration(_));
    let (timestamp, with, (unit, zone), added) = match (b.op, &left, &right) {
        (Operator::Plus | Operator::Minus, DataType::Timestamp(u, z), i) if interval(i) => {
            (&mut b.left, &mut b.right, (*u, z.clone()), i)
        }
        (Operator::Plus, i, DataType::Timestamp(u, z)) if interval(i) => {
            (&mut b.right, &mut b.left, (*u, z.clone()), i)
        }
        _ => return false,
    };
    let mut changed = false;
    if unit == TimeUnit::Second {
        let to = DataType::Timestamp(TimeUnit::Millisecond, zone.clone());
        wrap(timestamp, |x| Expr::Cast(Cast::new(Box::new(x), to)));
        changed = true;
    }
    if zone.is_some() && is_day_second(added) {
        wrap(with, |x| call_udf(sqe_functions::interval_elapsed(), x));
        changed = true;
    }
    changed
}

/// Casts the timestamps (or times) of `group`, of `types`, to the finest unit among them, when
/// they have more than one; whether it changed any. `compares`: the group's operands are compared.
fn finest_group(group: Vec<&mut Expr>, types: &[DataType], compares: bool) -> bool {
    let Some(unit) = meeting_unit(types) else {
        return false;
    };
    let zoned = types.iter().any(is_zoned);
    // The coarsest unit a non-constant operand is cast up from: DataFusion's simplifier takes such
    // a cast off again by casting a constant down to that unit, which must then be exact.
    let coarsest = types
        .iter()
        .zip(group.iter())
        .filter(|(_, x)| !is_constant(x))
        .filter_map(|(t, _)| temporal_unit(t).map(|(_, unit)| unit))
        .min();
    for (operand, t) in group.into_iter().zip(types) {
        if temporal_unit(t).is_none() {
            continue;
        }
        if let Some(c) = coarsest
            && compares
            && is_constant(operand)
            && !exact_in(operand, c)
        {
            wrap(operand, |x| call_udf(sqe_functions::opaque(), x));
        }
        if let Some(to) = meeting_type(t, unit, zoned) {
            wrap(operand, |x| Expr::Cast(Cast::new(Box::new(x), to)));
        }
    }
    true
}

/// The operands of a binary operator, at one timestamp (or time) unit before DataFusion types the
/// operation: DataFusion refuses to compare times of two units while planning, before any
/// analyzer rule runs. And `interval * n`, `n * interval` and `interval / n`, which DataFusion
/// has not.
#[derive(Debug)]
pub(crate) struct TrinoOperators;

impl ExprPlanner for TrinoOperators {
    fn plan_binary_op(
        &self,
        mut expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        use ast::BinaryOperator as Op;
        let mut types = types_of(&[&mut expr.left, &mut expr.right], schema);
        if types.iter().any(is_zoned) {
            let shift = match expr.op {
                Op::Plus => Some(Operator::Plus),
                Op::Minus => Some(Operator::Minus),
                _ => None,
            };
            if let Some(shifted) = zoned_operands(&mut expr.left, shift, &mut expr.right, &types) {
                return Ok(PlannerResult::Planned(shifted));
            }
            types = types_of(&[&mut expr.left, &mut expr.right], schema);
        }
        let interval = |t: &DataType| matches!(t, DataType::Interval(_) | DataType::Duration(_));
        let scaled = match (&expr.op, &types[0], &types[1]) {
            (Op::Multiply | Op::Divide, l, r) if interval(l) && r.is_numeric() => {
                Some((expr.left.clone(), expr.right.clone()))
            }
            (Op::Multiply, l, r) if l.is_numeric() && interval(r) => {
                Some((expr.right.clone(), expr.left.clone()))
            }
            _ => None,
        };
        if let Some((interval, factor)) = scaled {
            let divide = datafusion::prelude::lit(matches!(expr.op, Op::Divide));
            return Ok(PlannerResult::Planned(Expr::ScalarFunction(
                ScalarFunction::new_udf(
                    sqe_functions::interval_scaled(),
                    vec![interval, factor, divide],
                ),
            )));
        }
        let compares = matches!(
            expr.op,
            Op::Eq | Op::NotEq | Op::Lt | Op::LtEq | Op::Gt | Op::GtEq | Op::Spaceship
        );
        finest_group(vec![&mut expr.left, &mut expr.right], &types, compares);
        Ok(PlannerResult::Original(expr))
    }
}

/// Whether `t` is a timestamp with a time zone per value (functions/src/zoned.rs).
fn is_zoned(t: &DataType) -> bool {
    sqe_functions::zoned_unit(t).is_some()
}

/// The instant of a timestamp with a time zone per value (a timestamp in UTC).
fn instant_of(x: Expr) -> Expr {
    datafusion::functions::core::expr_fn::get_field(x, sqe_functions::INSTANT)
}

/// The zone's name of a timestamp with a time zone per value.
fn zone_of(x: Expr) -> Expr {
    datafusion::functions::core::expr_fn::get_field(x, sqe_functions::ZONE)
}

/// Operands that are timestamps with a time zone per value: `x + interval`, `interval + x` and
/// `x - interval` keep each value's zone (its instant shifted, as Trino shifts it: elapsed time,
/// months on the UTC clock), given back; otherwise each such operand becomes its instant (what
/// comparisons and differences read).
fn zoned_operands(
    left: &mut Expr,
    shift: Option<Operator>,
    right: &mut Expr,
    types: &[DataType],
) -> Option<Expr> {
    let interval = |t: &DataType| matches!(t, DataType::Interval(_) | DataType::Duration(_));
    let shifted = |x: &Expr, op: Operator, by: &Expr| {
        let zone = zone_of(x.clone());
        let instant = Expr::BinaryExpr(BinaryExpr::new(
            Box::new(instant_of(x.clone())),
            op,
            Box::new(by.clone()),
        ));
        Expr::ScalarFunction(ScalarFunction::new_udf(
            sqe_functions::zoned_value(),
            vec![instant, zone],
        ))
    };
    match (shift, types) {
        (Some(op), [l, r]) if is_zoned(l) && interval(r) => return Some(shifted(left, op, right)),
        (Some(Operator::Plus), [l, r]) if interval(l) && is_zoned(r) => {
            return Some(shifted(right, Operator::Plus, left));
        }
        _ => {}
    }
    for (x, t) in [left, right].into_iter().zip(types) {
        if is_zoned(t) {
            wrap(x, instant_of);
        }
    }
    None
}

/// [`zoned_operands`] on a plan's expression: a binary operator, BETWEEN or IN whose operands
/// are timestamps with a time zone per value (as a cast of text from a column gives them).
fn zoned_operands_of(mut e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let group = match &mut e {
        Expr::BinaryExpr(b) => {
            let types = types_of(&[&mut b.left, &mut b.right], schema);
            if !types.iter().any(is_zoned) {
                return Ok(Transformed::no(e));
            }
            let shift = matches!(b.op, Operator::Plus | Operator::Minus).then_some(b.op);
            if let Some(shifted) = zoned_operands(&mut b.left, shift, &mut b.right, &types) {
                return Ok(Transformed::yes(shifted));
            }
            return Ok(Transformed::yes(e));
        }
        Expr::Between(_) | Expr::InList(_) => operand_groups(&mut e).into_iter().flatten(),
        _ => return Ok(Transformed::no(e)),
    };
    let mut changed = false;
    for x in group {
        if x.get_type(schema).is_ok_and(|t| is_zoned(&t)) {
            wrap(x, instant_of);
            changed = true;
        }
    }
    Ok(if changed {
        Transformed::yes(e)
    } else {
        Transformed::no(e)
    })
}

/// Whether `e` reads no column.
fn is_constant(e: &Expr) -> bool {
    e.column_refs().is_empty()
}

/// Whether the constant `e` is known to be a whole number of `unit`s: a timestamp or time literal,
/// or text cast to one (what `TIMESTAMP '…'` is until it is folded).
fn exact_in(e: &Expr, unit: TimeUnit) -> bool {
    let value = match e {
        Expr::Literal(v, _) => v.clone(),
        Expr::Cast(Cast { expr, field }) => match expr.as_ref() {
            Expr::Literal(v, _) => match v.cast_to(field.data_type()) {
                Ok(v) => v,
                Err(_) => return false,
            },
            _ => return false,
        },
        Expr::ScalarFunction(f) if f.name().ends_with("cast_timestamp") => match &f.args[..] {
            [Expr::Literal(text, _), Expr::Literal(to, _)] => {
                let to = to.data_type();
                let read = text.try_as_str().flatten().map(|t| {
                    ScalarValue::Int64(Some(sqe_functions::read_timestamp(t, &to)?)).cast_to(&to)
                });
                match read {
                    Some(Ok(v)) => v,
                    _ => return false,
                }
            }
            _ => return false,
        },
        _ => return false,
    };
    let per_second: i64 = match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    };
    let (value, own) = match value {
        ScalarValue::TimestampSecond(x, _) => (x, 1),
        ScalarValue::TimestampMillisecond(x, _) => (x, 1_000),
        ScalarValue::TimestampMicrosecond(x, _) => (x, 1_000_000),
        ScalarValue::TimestampNanosecond(x, _) => (x, 1_000_000_000),
        ScalarValue::Time32Second(x) => (x.map(i64::from), 1),
        ScalarValue::Time32Millisecond(x) => (x.map(i64::from), 1_000),
        ScalarValue::Time64Microsecond(x) => (x, 1_000_000),
        ScalarValue::Time64Nanosecond(x) => (x, 1_000_000_000),
        _ => return false,
    };
    own <= per_second || value.is_none_or(|x| x % (own / per_second) == 0)
}

/// A UNION's inputs with each timestamp column at the finest unit any input has it in.
fn finest_union_inputs(inputs: Vec<Arc<LogicalPlan>>) -> Result<Vec<Arc<LogicalPlan>>> {
    let Some(width) = inputs.first().map(|i| i.schema().fields().len()) else {
        return Ok(inputs);
    };
    let units: Vec<Option<(TimeUnit, bool)>> = (0..width)
        .map(|c| {
            let types: Vec<DataType> = inputs
                .iter()
                .filter_map(|i| i.schema().fields().get(c).map(|f| f.data_type().clone()))
                .collect();
            meeting_unit(&types).map(|unit| (unit, types.iter().any(is_zoned)))
        })
        .collect();
    if units.iter().all(Option::is_none) {
        return Ok(inputs);
    }
    inputs
        .into_iter()
        .map(|input| {
            let exprs: Vec<Expr> = input
                .schema()
                .iter()
                .zip(&units)
                .map(|((qualifier, field), unit)| {
                    let column = Expr::Column(datafusion::common::Column::from((qualifier, field)));
                    match unit
                        .and_then(|(unit, zoned)| meeting_type(field.data_type(), unit, zoned))
                    {
                        Some(to) => Expr::Cast(Cast::new(Box::new(column), to))
                            .alias_qualified(qualifier.cloned(), field.name()),
                        None => column,
                    }
                })
                .collect();
            if exprs.iter().all(|e| matches!(e, Expr::Column(_))) {
                return Ok(input);
            }
            Ok(Arc::new(LogicalPlan::Projection(
                datafusion::logical_expr::Projection::try_new(exprs, input)?,
            )))
        })
        .collect()
}

/// Rewrites every expression of every node (subqueries too) with `rewrite`, given the schema
/// the expression reads, keeping each expression's name (the nodes above may refer to it); each
/// node's schema is then computed again by `reschema`, for its rewritten expressions and its
/// inputs' changed types.
fn rewrite_plan(
    plan: LogicalPlan,
    rewrite: impl Fn(Expr, &DFSchema) -> Result<Transformed<Expr>>,
    reschema: impl Fn(LogicalPlan) -> Result<LogicalPlan>,
) -> Result<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| {
        let schema = match &node {
            LogicalPlan::TableScan(scan) => scan.projected_schema.as_ref().clone(),
            _ => merge_schema(&node.inputs()),
        };
        let names = datafusion::logical_expr::expr_rewriter::NamePreserver::new(&node);
        node.map_expressions(|e| {
            let name = names.save(&e);
            rewrite(e, &schema).map(|t| t.update_data(|e| name.restore(e)))
        })?
        .map_data(&reschema)
    })
    .map(|t| t.data)
}

/// `left / right`, cast to Trino's type when one is a decimal and the other a decimal or an
/// integer (a `decimal(p, 0)` wide enough for its type, as Trino coerces it): scale max(s1, s2),
/// precision p1 - s1 + s2 + scale, at most 38. So `x / count(*) / 3.0000` keeps scale 4 at each
/// step, where DataFusion's quotient of a decimal and an integer is wider.
fn trino_quotient(
    left: Box<Expr>,
    right: Box<Expr>,
    schema: &DFSchema,
) -> Result<Transformed<Expr>> {
    let types = match (left.get_type(schema), right.get_type(schema)) {
        (Ok(l @ DataType::Decimal128(..)), Ok(r)) => (Some(l), as_decimal(&r)),
        (Ok(l), Ok(r @ DataType::Decimal128(..))) => (as_decimal(&l), Some(r)),
        _ => (None, None),
    };
    let quotient = Expr::BinaryExpr(BinaryExpr::new(left, Operator::Divide, right));
    if let (Some(DataType::Decimal128(p1, s1)), Some(DataType::Decimal128(_, s2))) = types {
        let scale = s1.max(s2);
        let precision =
            (i16::from(p1) - i16::from(s1) + i16::from(s2) + i16::from(scale)).clamp(1, 38) as u8;
        let to = DataType::Decimal128(precision, scale);
        if quotient.get_type(schema).is_ok_and(|t| t != to) {
            return Ok(Transformed::yes(Expr::Cast(Cast::new(
                Box::new(quotient),
                to,
            ))));
        }
    }
    Ok(Transformed::no(quotient))
}

/// A decimal as itself, an integer as the `decimal(p, 0)` Trino reads it as (tinyint 3 digits,
/// smallint 5, integer 10, bigint 19); `None` for anything else.
fn as_decimal(t: &DataType) -> Option<DataType> {
    let digits = match t {
        DataType::Decimal128(..) => return Some(t.clone()),
        DataType::Int8 | DataType::UInt8 => 3,
        DataType::Int16 | DataType::UInt16 => 5,
        DataType::Int32 | DataType::UInt32 => 10,
        DataType::Int64 => 19,
        DataType::UInt64 => 20,
        _ => return None,
    };
    Some(DataType::Decimal128(digits, 0))
}

/// Trino's casts and decimal quotients, on a plan whose types are settled.
#[derive(Debug, Default)]
pub(crate) struct TrinoCasts;

impl AnalyzerRule for TrinoCasts {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let casts = |e: Expr, schema: &DFSchema| {
            e.transform_down(opaque_try_constants)?
                .data
                .transform_up(|e| rewrite_expr(e, schema))
        };
        rewrite_plan(plan, casts, LogicalPlan::recompute_schema)
    }

    fn name(&self) -> &str {
        "trino_casts"
    }
}

/// In `TRY(x)` (`sqe_try(0, _ -> x)`), the constants that casts and arithmetic read are hidden
/// from constant folding, which would fail the query at planning time where TRY must give NULL
/// (`TRY(CAST('x' AS INTEGER))`, `TRY(9223372036854775807 + 1)`).
fn opaque_try_constants(e: Expr) -> Result<Transformed<Expr>> {
    let Expr::HigherOrderFunction(hof) = &e else {
        return Ok(Transformed::no(e));
    };
    if hof.name() != "sqe_try" {
        return Ok(Transformed::no(e));
    }
    let hide = |x: Box<Expr>| -> Box<Expr> {
        match *x {
            lit @ Expr::Literal(..) => Box::new(Expr::ScalarFunction(ScalarFunction::new_udf(
                sqe_functions::opaque(),
                vec![lit],
            ))),
            other => Box::new(other),
        }
    };
    let mut hof = hof.clone();
    for arg in &mut hof.args {
        if let Expr::Lambda(l) = arg {
            let body = std::mem::replace(&mut l.body, Box::new(datafusion::prelude::lit(0)));
            *l.body = body
                .transform_up(|x| {
                    Ok(match x {
                        Expr::Cast(Cast { expr, field }) => {
                            Transformed::yes(Expr::Cast(Cast::new_from_field(hide(expr), field)))
                        }
                        Expr::TryCast(TryCast { expr, field }) => Transformed::yes(Expr::TryCast(
                            TryCast::new_from_field(hide(expr), field),
                        )),
                        Expr::BinaryExpr(BinaryExpr { left, op, right })
                            if op.is_numerical_operators() =>
                        {
                            Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                                hide(left),
                                op,
                                hide(right),
                            )))
                        }
                        other => Transformed::no(other),
                    })
                })?
                .data;
        }
    }
    Ok(Transformed::yes(Expr::HigherOrderFunction(hof)))
}

/// A timestamp with a zone cast to one without keeps its wall-clock time in its zone (Arrow would
/// keep the time in UTC): `with_timezone(x, 'UTC')`, whose UTC time is that wall-clock time.
fn wall_clock(x: &Expr, from: &DataType, to: &DataType) -> Option<Expr> {
    match (from, to) {
        // A zone per value: its wall-clock time, its date; or its instant.
        (f, DataType::Timestamp(_, None) | DataType::Date32 | DataType::Date64) if is_zoned(f) => {
            Some(Expr::ScalarFunction(ScalarFunction::new_udf(
                sqe_functions::with_timezone(),
                vec![x.clone(), datafusion::prelude::lit("UTC")],
            )))
        }
        (f, DataType::Timestamp(_, Some(_))) if is_zoned(f) => Some(instant_of(x.clone())),
        (DataType::Timestamp(_, Some(zone)), DataType::Timestamp(_, None))
            if zone.as_ref() != "UTC" =>
        {
            Some(Expr::ScalarFunction(ScalarFunction::new_udf(
                sqe_functions::with_timezone(),
                vec![x.clone(), datafusion::prelude::lit("UTC")],
            )))
        }
        _ => None,
    }
}

/// A timestamp with a time zone in the per-value form at `unit` (where it meets per-value ones:
/// a CASE, a UNION, …): one zone for all of its values, or each value's own.
fn to_zoned(x: &Expr, from: &DataType, unit: TimeUnit) -> Option<Expr> {
    let (instant, zone) = match from {
        DataType::Timestamp(_, Some(zone)) => (
            Expr::Cast(Cast::new(
                Box::new(x.clone()),
                DataType::Timestamp(unit, Some(zone.clone())),
            )),
            None,
        ),
        f if is_zoned(f) && sqe_functions::zoned_unit(f) != Some(unit) => (
            Expr::Cast(Cast::new(
                Box::new(instant_of(x.clone())),
                DataType::Timestamp(unit, Some("UTC".into())),
            )),
            Some(zone_of(x.clone())),
        ),
        _ => return None,
    };
    Some(Expr::ScalarFunction(ScalarFunction::new_udf(
        sqe_functions::zoned_value(),
        std::iter::once(instant).chain(zone).collect(),
    )))
}

fn round() -> Arc<ScalarUDF> {
    datafusion::functions::math::round()
}

fn is_integer(t: &DataType) -> bool {
    t.is_integer()
}

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// `x` rounded half away from zero to a whole number, in a type the integer cast takes exactly
/// (None when it is one already).
fn rounded(x: Expr, from: &DataType) -> Option<Expr> {
    if matches!(&x, Expr::ScalarFunction(f) if f.name() == "round") {
        return None;
    }
    match from {
        DataType::Float16 | DataType::Float32 | DataType::Float64 => Some(Expr::ScalarFunction(
            ScalarFunction::new_udf(round(), vec![x]),
        )),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) if *s > 0 => {
            let to = match from {
                DataType::Decimal128(..) => DataType::Decimal128(*p, 0),
                _ => DataType::Decimal256(*p, 0),
            };
            Some(Expr::Cast(Cast::new(Box::new(x), to)))
        }
        _ => None,
    }
}

/// The fields of a cast from one row type to another whose fields are named otherwise.
fn renamed_fields<'a>(
    from: &'a DataType,
    to: &'a DataType,
) -> Option<(
    &'a datafusion::arrow::datatypes::Fields,
    &'a datafusion::arrow::datatypes::Fields,
)> {
    match (from, to) {
        (DataType::Struct(have), DataType::Struct(want))
            if have.len() == want.len()
                && have
                    .iter()
                    .zip(want.iter())
                    .any(|(a, b)| a.name() != b.name()) =>
        {
            Some((have, want))
        }
        _ => None,
    }
}

/// Trino casts a row to another row type field by field, by position; Arrow's cast matches the
/// fields by name. `CAST(r AS ROW(a T, b U))` becomes `named_struct('a', CAST(r.f1 AS T), …)`, NULL
/// where `r` is NULL.
fn row_cast(
    row: Expr,
    have: &datafusion::arrow::datatypes::Fields,
    want: &datafusion::arrow::datatypes::Fields,
    schema: &DFSchema,
    try_cast: bool,
) -> Result<Expr> {
    use datafusion::prelude::lit;
    let mut args = Vec::with_capacity(want.len() * 2);
    for (from, to) in have.iter().zip(want.iter()) {
        let field = Expr::ScalarFunction(ScalarFunction::new_udf(
            datafusion::functions::core::get_field(),
            vec![row.clone(), lit(from.name().as_str())],
        ));
        let cast = if try_cast {
            Expr::TryCast(TryCast::new(Box::new(field), to.data_type().clone()))
        } else {
            Expr::Cast(Cast::new(Box::new(field), to.data_type().clone()))
        };
        args.push(lit(to.name().as_str()));
        args.push(cast.transform_up(|e| rewrite_expr(e, schema))?.data);
    }
    let built = Expr::ScalarFunction(ScalarFunction::new_udf(
        datafusion::functions::core::named_struct(),
        args,
    ));
    let target = DataType::Struct(want.clone());
    datafusion::logical_expr::when(
        row.is_null(),
        lit(datafusion::common::ScalarValue::try_from(&target)?),
    )
    .otherwise(built)
}

/// Whether `e` is of Trino's JSON type (its field carries the JSON extension type).
fn is_json(e: &Expr, schema: &DFSchema) -> bool {
    e.to_field(schema)
        .is_ok_and(|(_, f)| sqe_functions::is_json(&f))
}

/// `CAST(j AS T)` / `TRY_CAST(j AS T)` of a JSON value `j`: JSON read into `T`
/// (`sqe_from_json`, which takes `T` from a NULL of that type).
fn from_json(j: Expr, to: &DataType, lenient: bool) -> Result<Expr> {
    let carrier = Expr::Literal(datafusion::common::ScalarValue::try_from(to)?, None);
    Ok(Expr::ScalarFunction(ScalarFunction::new_udf(
        sqe_functions::from_json(),
        vec![j, carrier, datafusion::prelude::lit(lenient)],
    )))
}

/// `t` with every string view a plain string.
fn plain_strings(t: &DataType) -> DataType {
    use datafusion::arrow::datatypes::{Field, Fields};
    let field = |f: &Field| {
        Arc::new(
            Field::new(f.name(), plain_strings(f.data_type()), f.is_nullable())
                .with_metadata(f.metadata().clone()),
        )
    };
    match t {
        DataType::Utf8View => DataType::Utf8,
        DataType::List(f) => DataType::List(field(f)),
        DataType::Struct(fields) => {
            DataType::Struct(fields.iter().map(|f| field(f)).collect::<Fields>())
        }
        DataType::Map(f, sorted) => DataType::Map(field(f), *sorted),
        other => other.clone(),
    }
}

fn rewrite_expr(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    match e {
        Expr::Cast(Cast { expr, field }) if is_json(&expr, schema) => {
            from_json(*expr, field.data_type(), false).map(Transformed::yes)
        }
        Expr::TryCast(TryCast { expr, field }) if is_json(&expr, schema) => {
            from_json(*expr, field.data_type(), true).map(Transformed::yes)
        }
        // JSON is JSON already: CAST(j AS JSON) is `j`; its type is `json`.
        Expr::ScalarFunction(f)
            if f.name() == "sqe_to_json" && f.args.len() == 1 && is_json(&f.args[0], schema) =>
        {
            Ok(Transformed::yes(f.args.into_iter().next().unwrap_or_else(
                || datafusion::prelude::lit(datafusion::common::ScalarValue::Null),
            )))
        }
        // CAST(x AS MAP(K, V)) (see the AST's rewrite): the cast, or the read of JSON.
        Expr::ScalarFunction(f) if f.name() == "sqe_cast_as" && f.args.len() == 3 => {
            // VARCHAR as SQE's functions give it (the parser's VARCHAR is a string view, which
            // a map's key lookup would then compare with plain strings).
            let to = plain_strings(&f.args[1].get_type(schema)?);
            let lenient = matches!(
                &f.args[2],
                Expr::Literal(datafusion::common::ScalarValue::Boolean(Some(true)), _)
            );
            let x =
                f.args.into_iter().next().unwrap_or_else(|| {
                    datafusion::prelude::lit(datafusion::common::ScalarValue::Null)
                });
            if is_json(&x, schema) {
                return from_json(x, &to, lenient).map(Transformed::yes);
            }
            Ok(Transformed::yes(if lenient {
                Expr::TryCast(TryCast::new(Box::new(x), to))
            } else {
                Expr::Cast(Cast::new(Box::new(x), to))
            }))
        }
        Expr::ScalarFunction(f)
            if f.name() == "typeof" && f.args.len() == 1 && is_json(&f.args[0], schema) =>
        {
            Ok(Transformed::yes(datafusion::prelude::lit("json")))
        }
        Expr::Cast(Cast { expr, field }) => {
            let data_type = field.data_type().clone();
            let Ok(from) = expr.get_type(schema) else {
                return Ok(Transformed::no(Expr::Cast(Cast::new_from_field(
                    expr, field,
                ))));
            };
            if let Some(unit) = sqe_functions::zoned_unit(&data_type)
                && let Some(zoned) = to_zoned(&expr, &from, unit)
            {
                return Ok(Transformed::yes(zoned));
            }
            if let Some((have, want)) = renamed_fields(&from, &data_type) {
                return row_cast(*expr, have, want, schema, false).map(Transformed::yes);
            }
            if is_integer(&data_type)
                && let Some(r) = rounded((*expr).clone(), &from)
            {
                return Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(
                    Box::new(r),
                    field,
                ))));
            }
            if let Some(wall) = wall_clock(&expr, &from, &data_type) {
                return Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(
                    Box::new(wall),
                    field,
                ))));
            }
            // An interval day to second as a duration (how sum and avg read it: Arrow's cast
            // refuses days): its milliseconds.
            if matches!(data_type, DataType::Duration(_)) && is_day_second(&from) {
                let millis = call_udf(sqe_functions::to_milliseconds(), *expr);
                let duration = Expr::Cast(Cast::new(
                    Box::new(millis),
                    DataType::Duration(TimeUnit::Millisecond),
                ));
                return Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(
                    Box::new(duration),
                    field,
                ))));
            }
            if is_text(&data_type) && matches!(from, DataType::Interval(_) | DataType::Duration(_))
            {
                let text = Expr::ScalarFunction(ScalarFunction::new_udf(
                    sqe_functions::interval_text(),
                    vec![*expr],
                ));
                return Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(
                    Box::new(text),
                    field,
                ))));
            }
            if is_text(&data_type) && (matches!(from, DataType::Timestamp(..)) || is_zoned(&from)) {
                let text = Expr::ScalarFunction(ScalarFunction::new_udf(
                    sqe_functions::timestamp_text(),
                    vec![*expr],
                ));
                return Ok(Transformed::yes(Expr::Cast(Cast::new_from_field(
                    Box::new(text),
                    field,
                ))));
            }
            Ok(Transformed::no(Expr::Cast(Cast::new_from_field(
                expr, field,
            ))))
        }
        Expr::TryCast(TryCast { expr, field }) => {
            let Ok(from) = expr.get_type(schema) else {
                return Ok(Transformed::no(Expr::TryCast(TryCast::new_from_field(
                    expr, field,
                ))));
            };
            if let Some((have, want)) = renamed_fields(&from, field.data_type()) {
                return row_cast(*expr, have, want, schema, true).map(Transformed::yes);
            }
            if let Some(wall) = wall_clock(&expr, &from, field.data_type()) {
                return Ok(Transformed::yes(Expr::TryCast(TryCast::new_from_field(
                    Box::new(wall),
                    field,
                ))));
            }
            if is_integer(field.data_type())
                && let Some(r) = rounded((*expr).clone(), &from)
            {
                return Ok(Transformed::yes(Expr::TryCast(TryCast::new_from_field(
                    Box::new(r),
                    field,
                ))));
            }
            Ok(Transformed::no(Expr::TryCast(TryCast::new_from_field(
                expr, field,
            ))))
        }
        // Integer constants: folded here with overflow checks (overflow.rs), before DataFusion
        // folds them with wrapping arithmetic.
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::Plus | Operator::Minus | Operator::Multiply)
                && matches!(
                    (left.as_ref(), right.as_ref()),
                    (Expr::Literal(..), Expr::Literal(..))
                ) =>
        {
            if let (Expr::Literal(a, _), Expr::Literal(b, _)) = (left.as_ref(), right.as_ref())
                && let Some(folded) = super::overflow::fold_constant(a, op, b)
            {
                return Ok(Transformed::yes(Expr::Literal(folded?, None)));
            }
            Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr::new(
                left, op, right,
            ))))
        }
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Divide,
            right,
        }) => trino_quotient(left, right, schema),
        Expr::HigherOrderFunction(_) => sqe_functions::use_every_lambda_parameter(e, schema),
        other => Ok(Transformed::no(other)),
    }
}

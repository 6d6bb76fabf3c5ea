//! What the folder's unit tests share: parsing with SQE's dialect, the statement rewrite as text,
//! and a DataFusion session wired as the engine wires it (Trino's defaults, analyzer rules,
//! operators and `sqe-functions`), without catalogs, so that a test can assert the
//! value a query gives.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::{DFSchema, Result};
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::sqlparser::ast::{self, Query, Statement};
use datafusion::sql::sqlparser::parser::Parser;
use sqe_sessions::SqeResult;

use crate::statement::dialect::SqeDialect;

/// One statement, parsed as the engine parses it.
pub(super) fn statement(sql: &str) -> Statement {
    let mut statements =
        Parser::parse_sql(&SqeDialect::default(), sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    assert_eq!(statements.len(), 1, "{sql}");
    statements.remove(0)
}

/// One query.
pub(super) fn query(sql: &str) -> Query {
    match statement(sql) {
        Statement::Query(q) => *q,
        other => panic!("not a query: {other}"),
    }
}

/// One expression.
pub(super) fn expr(sql: &str) -> ast::Expr {
    Parser::new(&SqeDialect::default())
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// One function call.
pub(super) fn function(sql: &str) -> ast::Function {
    match expr(sql) {
        ast::Expr::Function(f) => f,
        other => panic!("not a call: {other}"),
    }
}

/// The statement as the rewrite leaves it, as SQL text.
pub(super) fn rewritten(sql: &str) -> SqeResult<String> {
    let mut s = statement(sql);
    super::rewrite_statement(&mut s)?;
    Ok(s.to_string())
}

/// A plan's schema of nullable columns of these names and types.
pub(super) fn schema(columns: &[(&str, DataType)]) -> DFSchema {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, t)| Field::new(*name, t.clone(), true))
        .collect();
    DFSchema::try_from(Schema::new(fields)).unwrap_or_else(|e| panic!("{e}"))
}

/// A session as the engine builds one, less its catalogs and session functions.
pub(super) fn context() -> SessionContext {
    let mut config = SessionConfig::new();
    super::configure(&mut config);
    let mut builder = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_analyzer_rules(super::analyzer_rules());
    builder
        .expr_planners()
        .get_or_insert_with(Vec::new)
        .insert(0, Arc::new(super::TrinoOperators));
    let mut state = builder.build();
    sqe_functions::register(&mut state).unwrap_or_else(|e| panic!("{e}"));
    SessionContext::new_with_state(state)
}

/// A [`context`] with one table `t` of one row, of columns of the types Trino's rules care for:
/// `s` timestamp(0) and `ms` timestamp(3) 2020-01-02 03:04:05(.500), `berlin` that instant (.500)
/// in Europe/Berlin, `tm_s` time(0) and `tm_ms` time(3) 03:04:05(.500), `d` DECIMAL(10, 2) 2.50,
/// `f` DOUBLE 2.5, `i` INTEGER 7, `big` BIGINT 9223372036854775807, `txt` VARCHAR
/// '2020-01-02 03:04:05.123456789', `r` a row (f1 BIGINT 1, f2 VARCHAR 'x').
pub(super) fn table_context() -> SessionContext {
    use datafusion::arrow::array::{
        ArrayRef, Decimal128Array, Float64Array, Int32Array, Int64Array, StringArray, StructArray,
        Time32MillisecondArray, Time32SecondArray, TimestampMillisecondArray, TimestampSecondArray,
    };
    use datafusion::arrow::datatypes::Fields;
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::datasource::MemTable;

    const SECOND: i64 = 1_577_934_245; // 2020-01-02 03:04:05 UTC
    const TIME: i32 = 3 * 3_600 + 4 * 60 + 5;
    let row_fields = Fields::from(vec![
        Field::new("f1", DataType::Int64, true),
        Field::new("f2", DataType::Utf8, true),
    ]);
    let row = StructArray::new(
        row_fields.clone(),
        vec![
            Arc::new(Int64Array::from(vec![1])) as ArrayRef,
            Arc::new(StringArray::from(vec!["x"])),
        ],
        None,
    );
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("s", Arc::new(TimestampSecondArray::from(vec![SECOND]))),
        (
            "ms",
            Arc::new(TimestampMillisecondArray::from(vec![SECOND * 1_000 + 500])),
        ),
        (
            "berlin",
            Arc::new(
                TimestampMillisecondArray::from(vec![SECOND * 1_000 + 500])
                    .with_timezone("Europe/Berlin"),
            ),
        ),
        ("tm_s", Arc::new(Time32SecondArray::from(vec![TIME]))),
        (
            "tm_ms",
            Arc::new(Time32MillisecondArray::from(vec![TIME * 1_000 + 500])),
        ),
        (
            "d",
            Arc::new(
                Decimal128Array::from(vec![250])
                    .with_precision_and_scale(10, 2)
                    .unwrap_or_else(|e| panic!("{e}")),
            ),
        ),
        ("f", Arc::new(Float64Array::from(vec![2.5]))),
        ("i", Arc::new(Int32Array::from(vec![7]))),
        ("big", Arc::new(Int64Array::from(vec![i64::MAX]))),
        (
            "txt",
            Arc::new(StringArray::from(vec!["2020-01-02 03:04:05.123456789"])),
        ),
        ("r", Arc::new(row)),
    ];
    let batch = RecordBatch::try_from_iter(columns).unwrap_or_else(|e| panic!("{e}"));
    let table =
        MemTable::try_new(batch.schema(), vec![vec![batch]]).unwrap_or_else(|e| panic!("{e}"));
    let ctx = context();
    ctx.register_table("t", Arc::new(table))
        .unwrap_or_else(|e| panic!("{e}"));
    ctx
}

/// The plan of `sql` in `ctx` after the statement rewrite, before any analyzer rule.
pub(super) async fn plan_in(ctx: &SessionContext, sql: &str) -> LogicalPlan {
    let mut s = statement(sql);
    super::rewrite_statement(&mut s).unwrap_or_else(|e| panic!("{sql}: {e}"));
    ctx.state()
        .statement_to_plan(datafusion::sql::parser::Statement::Statement(Box::new(s)))
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The rows `sql` gives in `ctx`, each value as text (`NULL` for a NULL), after the statement
/// rewrite.
pub(super) async fn rows_in(ctx: &SessionContext, sql: &str) -> Result<Vec<Vec<String>>> {
    let mut s = statement(sql);
    super::rewrite_statement(&mut s).map_err(|e| {
        datafusion::common::DataFusionError::Plan(format!("rewrite: {}", e.message()))
    })?;
    let plan = ctx
        .state()
        .statement_to_plan(datafusion::sql::parser::Statement::Statement(Box::new(s)))
        .await?;
    let batches = ctx.execute_logical_plan(plan).await?.collect().await?;
    let options = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for batch in &batches {
        let columns = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for row in 0..batch.num_rows() {
            rows.push(columns.iter().map(|c| c.value(row).to_string()).collect());
        }
    }
    Ok(rows)
}

/// The rows `sql` gives in a fresh [`table_context`].
pub(super) async fn rows(sql: &str) -> Result<Vec<Vec<String>>> {
    rows_in(&table_context(), sql).await
}

/// The single value `sql` gives (in [`table_context`]).
pub(super) async fn value(sql: &str) -> String {
    let rows = rows(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    match rows.as_slice() {
        [row] if row.len() == 1 => row[0].clone(),
        _ => panic!("{sql}: not one value: {rows:?}"),
    }
}

/// The error `sql` fails with (in [`table_context`]): its root cause, as text.
pub(super) async fn error(sql: &str) -> String {
    match rows(sql).await {
        Ok(rows) => panic!("{sql}: no error, rows {rows:?}"),
        Err(e) => e.find_root().to_string(),
    }
}

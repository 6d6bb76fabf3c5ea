//! `SHOW STATS FOR t`: Trino's table statistics, from what the scan of `t` knows before it reads a
//! row: the row count from the Iceberg manifests, each column's null count and lowest and highest
//! value from the data files' column metrics. The scan is planned as the caller, as any query of
//! `t` is. Distinct counts and data sizes are not kept by SQE's tables: they are NULL, as Trino
//! shows a statistic it does not have.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Float64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::ScalarValue;
use datafusion::common::stats::Precision;
use sqe_sessions::{QueryResult, SqeError, SqeResult};

use crate::context::Ctx;

/// `table`: the table's name as written after `SHOW STATS FOR`.
pub(crate) async fn show_stats(ctx: &Ctx<'_>, table: &str) -> SqeResult<QueryResult> {
    let (state, plan) = ctx
        .planner
        .plan_sql(ctx.session, &format!("SELECT * FROM {table}"))
        .await?;
    // The statistics are the table's, before its row filter.
    crate::governance::row_filters::refuse_describing_filtered(&plan, "SHOW STATS")?;
    let physical = state
        .create_physical_plan(&plan)
        .await
        .map_err(|e| SqeError::invalid(e.to_string()))?;
    let stats = physical
        .partition_statistics(None)
        .map_err(|e| SqeError::internal(e.to_string()))?;
    let rows = match stats.num_rows {
        Precision::Exact(n) | Precision::Inexact(n) => Some(n as f64),
        Precision::Absent => None,
    };
    let schema = physical.schema();
    let mut names = Vec::new();
    let mut nulls = Vec::new();
    let mut distinct = Vec::new();
    let mut low = Vec::new();
    let mut high = Vec::new();
    for (field, column) in schema.fields().iter().zip(&stats.column_statistics) {
        names.push(Some(field.name().clone()));
        nulls.push(match (&column.null_count, rows) {
            (Precision::Exact(n) | Precision::Inexact(n), Some(rows)) if rows > 0.0 => {
                Some(*n as f64 / rows)
            }
            (Precision::Exact(_) | Precision::Inexact(_), Some(_)) => Some(0.0),
            _ => None,
        });
        distinct.push(match &column.distinct_count {
            Precision::Exact(n) | Precision::Inexact(n) => Some(*n as f64),
            Precision::Absent => None,
        });
        let shown = |v: &Precision<ScalarValue>| match v {
            Precision::Exact(v) | Precision::Inexact(v)
                if ranged(field.data_type()) && !v.is_null() =>
            {
                v.to_array().ok().and_then(|a| {
                    datafusion::arrow::util::display::array_value_to_string(&a, 0).ok()
                })
            }
            _ => None,
        };
        low.push(shown(&column.min_value));
        high.push(shown(&column.max_value));
    }
    // The table's own row: its row count.
    names.push(None);
    nulls.push(None);
    distinct.push(None);
    low.push(None);
    high.push(None);
    let count = names.len();
    let mut row_count = vec![None; count - 1];
    row_count.push(rows);
    let doubles = |v: Vec<Option<f64>>| Arc::new(Float64Array::from(v)) as ArrayRef;
    let texts = |v: Vec<Option<String>>| Arc::new(StringArray::from(v)) as ArrayRef;
    QueryResult::rows(
        Schema::new(vec![
            Field::new("column_name", DataType::Utf8, true),
            Field::new("data_size", DataType::Float64, true),
            Field::new("distinct_values_count", DataType::Float64, true),
            Field::new("nulls_fraction", DataType::Float64, true),
            Field::new("row_count", DataType::Float64, true),
            Field::new("low_value", DataType::Utf8, true),
            Field::new("high_value", DataType::Utf8, true),
        ]),
        vec![
            texts(names),
            doubles(vec![None; count]),
            doubles(distinct),
            doubles(nulls),
            doubles(row_count),
            texts(low),
            texts(high),
        ],
    )
}

/// Whether Trino shows a low and high value for a column of this type (numbers, dates, times).
fn ranged(t: &DataType) -> bool {
    t.is_numeric() || t.is_temporal()
}

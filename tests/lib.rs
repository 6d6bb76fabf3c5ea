//! Shared pieces of SQE's integration tests: a sqllogictest database over any [`QueryService`], so the
//! same `.slt` files can run embedded and, later, through each wire protocol.

mod flight_db;
mod trino_db;

use std::sync::Arc;

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::{DataType, Schema};
use arrow::util::display::{ArrayFormatter, FormatOptions};
pub use flight_db::FlightDb;
use futures::StreamExt;
use sqe_sessions::{QueryService, Session, SqeError};
use sqllogictest::{DBOutput, DefaultColumnType};
pub use trino_db::TrinoDb;

/// A sqllogictest connection: one session against one query service.
pub struct ServiceDb {
    service: Arc<dyn QueryService>,
    session: Session,
}

impl ServiceDb {
    pub fn new(service: Arc<dyn QueryService>, session: Session) -> Self {
        Self { service, session }
    }
}

fn column_type(t: &DataType) -> DefaultColumnType {
    if t.is_integer() {
        DefaultColumnType::Integer
    } else if t.is_floating() || matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..)) {
        DefaultColumnType::FloatingPoint
    } else if matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) {
        DefaultColumnType::Text
    } else {
        DefaultColumnType::Any
    }
}

/// Cell text as sqllogictest files spell it: `NULL`, `(empty)` for an empty string.
fn cell(formatter: &ArrayFormatter<'_>, array: &dyn Array, row: usize) -> String {
    if array.is_null(row) {
        return "NULL".to_string();
    }
    let text = formatter.value(row).to_string();
    if text.is_empty() {
        "(empty)".to_string()
    } else {
        text
    }
}

/// Rows as sqllogictest compares them, the same way for every protocol.
fn rows_output(
    schema: &Schema,
    batches: Vec<RecordBatch>,
) -> Result<DBOutput<DefaultColumnType>, SqeError> {
    let types = schema
        .fields()
        .iter()
        .map(|f| column_type(f.data_type()))
        .collect();
    let options = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for batch in batches {
        let formatters = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SqeError::internal(e.to_string()))?;
        for row in 0..batch.num_rows() {
            rows.push(
                formatters
                    .iter()
                    .zip(batch.columns())
                    .map(|(f, c)| cell(f, c.as_ref(), row))
                    .collect(),
            );
        }
    }
    Ok(DBOutput::Rows { types, rows })
}

#[async_trait::async_trait]
impl sqllogictest::AsyncDB for ServiceDb {
    type Error = SqeError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SqeError> {
        let mut result = self.service.execute(&self.session, sql).await?;
        if let Some(update) = &result.session_update {
            self.session.apply(update);
        }
        if result.schema.fields().is_empty() || result.update_count.is_some() {
            while let Some(batch) = result.batches.next().await {
                batch?;
            }
            return Ok(DBOutput::StatementComplete(
                result.update_count.unwrap_or(0),
            ));
        }
        let mut batches = Vec::new();
        while let Some(batch) = result.batches.next().await {
            batches.push(batch?);
        }
        rows_output(&result.schema, batches)
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "sqe"
    }

    async fn sleep(dur: std::time::Duration) {
        tokio::time::sleep(dur).await;
    }
}

//! Results built in memory: what a statement answers without a plan to stream (SHOW, DESCRIBE, a
//! write's row count, a statement that answers nothing). Every part of the engine builds them the
//! same way, so they are constructors of [`QueryResult`] rather than helpers of one feature.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use futures::StreamExt;

use crate::{QueryResult, SqeError, SqeResult};

impl QueryResult {
    /// No rows and no columns: a statement that answers nothing (DDL, SET, USE).
    pub fn empty() -> Self {
        QueryResult {
            schema: Arc::new(Schema::empty()),
            batches: futures::stream::empty().boxed(),
            update_count: None,
            session_update: None,
        }
    }

    /// One batch of `columns` under `schema`; an error if they do not fit it.
    pub fn rows(schema: Schema, columns: Vec<ArrayRef>) -> SqeResult<Self> {
        let schema = Arc::new(schema);
        let batch = RecordBatch::try_new(schema.clone(), columns)
            .map_err(|e| SqeError::internal(e.to_string()))?;
        Ok(QueryResult {
            schema,
            batches: futures::stream::once(async move { Ok(batch) }).boxed(),
            update_count: None,
            session_update: None,
        })
    }

    /// Text columns named `names`, a row for each of `rows` (a row shorter than `names` is padded
    /// with empty text).
    pub fn text(names: &[&str], rows: &[Vec<String>]) -> SqeResult<Self> {
        let fields: Vec<Field> = names
            .iter()
            .map(|n| Field::new(*n, DataType::Utf8, false))
            .collect();
        let columns = (0..names.len())
            .map(|i| {
                let values = rows.iter().map(|r| r.get(i).map_or("", String::as_str));
                Arc::new(StringArray::from_iter_values(values)) as ArrayRef
            })
            .collect();
        Self::rows(Schema::new(fields), columns)
    }

    /// One text column named `name` holding `values`.
    pub fn column(name: &str, values: Vec<String>) -> SqeResult<Self> {
        Self::rows(
            Schema::new(vec![Field::new(name, DataType::Utf8, false)]),
            vec![Arc::new(StringArray::from(values)) as ArrayRef],
        )
    }

    /// A write's answer, as Trino reports one: a single `rows` bigint, and the count.
    pub fn written(rows: u64) -> SqeResult<Self> {
        let count = i64::try_from(rows).unwrap_or(i64::MAX);
        let mut result = Self::rows(
            Schema::new(vec![Field::new("rows", DataType::Int64, false)]),
            vec![Arc::new(Int64Array::from(vec![count])) as ArrayRef],
        )?;
        result.update_count = Some(rows);
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;
    use futures::TryStreamExt;

    fn collect(result: QueryResult) -> Vec<RecordBatch> {
        futures::executor::block_on(result.batches.try_collect()).unwrap_or_default()
    }

    #[test]
    fn text_rows_pad_short_rows() {
        let result = QueryResult::text(
            &["a", "b"],
            &[vec!["x".into()], vec!["y".into(), "z".into()]],
        )
        .map_err(|e| e.to_string());
        let Ok(result) = result else {
            panic!("{result:?}")
        };
        assert_eq!(result.schema.fields().len(), 2);
        let batches = collect(result);
        let b = batches[0].column(1).as_any().downcast_ref::<StringArray>();
        assert_eq!(
            b.map(|b| b.iter().collect::<Vec<_>>()),
            Some(vec![Some(""), Some("z")])
        );
    }

    #[test]
    fn a_write_counts_its_rows() {
        let result = QueryResult::written(7).map_err(|e| e.to_string());
        let Ok(result) = result else {
            panic!("{result:?}")
        };
        assert_eq!(result.update_count, Some(7));
        let batches = collect(result);
        let rows = batches[0].column(0).as_any().downcast_ref::<Int64Array>();
        assert_eq!(rows.map(|r| r.value(0)), Some(7));
    }

    #[test]
    fn columns_that_do_not_fit_the_schema_are_an_error() {
        let schema = Schema::new(vec![Field::new("n", DataType::Int64, false)]);
        let text = Arc::new(StringArray::from(vec!["x"])) as ArrayRef;
        assert_eq!(
            QueryResult::rows(schema, vec![text])
                .err()
                .map(|e| e.code()),
            Some(crate::ErrorCode::Internal)
        );
        assert!(QueryResult::empty().schema.fields().is_empty());
    }
}

//! Trino's `system` catalog: `runtime.queries` (the statements the query registry holds, as the
//! statement's caller may see them), and the `jdbc` and `metadata` tables drivers read.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::datasource::{MemTable, TableType};
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;

use super::information::{Catalogs, JdbcSchema, MetadataSchema};
use crate::admission::{QueryInfo, QueryRegistry};

/// Who runs a statement, as its session state carries it to the table providers that answer
/// differently for each caller (`system.runtime.queries`). A state without one is nobody's.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caller {
    pub name: String,
    pub admin: bool,
}

impl Caller {
    pub fn of(config: &SessionConfig) -> Self {
        config
            .get_extension::<Caller>()
            .map(|c| c.as_ref().clone())
            .unwrap_or_default()
    }
}

/// Trino's `system` catalog: `runtime.queries` (running and recent queries), and the `jdbc` and
/// `metadata` tables drivers read.
#[derive(Debug)]
pub struct SystemCatalog {
    registry: Arc<QueryRegistry>,
    catalogs: Catalogs,
}

impl SystemCatalog {
    pub fn new(registry: Arc<QueryRegistry>, catalogs: Catalogs) -> Self {
        Self { registry, catalogs }
    }
}

impl CatalogProvider for SystemCatalog {
    fn schema_names(&self) -> Vec<String> {
        vec![
            "jdbc".to_string(),
            "metadata".to_string(),
            "runtime".to_string(),
        ]
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        let catalogs = self.catalogs.clone();
        match name {
            "jdbc" => return Some(Arc::new(JdbcSchema { catalogs })),
            "metadata" => return Some(Arc::new(MetadataSchema { catalogs })),
            _ => {}
        }
        (name == "runtime").then(|| {
            Arc::new(RuntimeSchema {
                registry: self.registry.clone(),
            }) as Arc<dyn SchemaProvider>
        })
    }
}

#[derive(Debug)]
struct RuntimeSchema {
    registry: Arc<QueryRegistry>,
}

#[async_trait]
impl SchemaProvider for RuntimeSchema {
    fn table_names(&self) -> Vec<String> {
        vec!["queries".to_string()]
    }

    async fn table(&self, name: &str) -> DFResult<Option<Arc<dyn TableProvider>>> {
        Ok((name == "queries").then(|| {
            Arc::new(QueriesTable {
                registry: self.registry.clone(),
            }) as Arc<dyn TableProvider>
        }))
    }

    fn table_exist(&self, name: &str) -> bool {
        name == "queries"
    }
}

/// `system.runtime.queries`, as the statement's caller may see it.
#[derive(Debug)]
struct QueriesTable {
    registry: Arc<QueryRegistry>,
}

fn queries_schema() -> SchemaRef {
    let ts = || DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
    Arc::new(Schema::new(vec![
        Field::new("query_id", DataType::Utf8, false),
        Field::new("state", DataType::Utf8, false),
        Field::new("user", DataType::Utf8, true),
        Field::new("query", DataType::Utf8, true),
        Field::new("created", ts(), false),
        Field::new("end", ts(), true),
        Field::new("rows", DataType::Int64, false),
        Field::new("error_message", DataType::Utf8, true),
        Field::new("source", DataType::Utf8, true),
        Field::new("decisions", DataType::Utf8, true),
    ]))
}

impl QueriesTable {
    /// The registry's rows; of the queries `caller` may not read, only id, state, times and rows.
    fn batch(&self, caller: &Caller) -> DFResult<RecordBatch> {
        let queries = self.registry.snapshot();
        let readable: Vec<bool> = queries
            .iter()
            .map(|q| caller.admin || q.user == caller.name)
            .collect();
        let text = |f: &dyn Fn(&QueryInfo) -> Option<String>| -> StringArray {
            queries
                .iter()
                .zip(&readable)
                .map(|(q, ok)| if *ok { f(q) } else { None })
                .collect()
        };
        Ok(RecordBatch::try_new(
            queries_schema(),
            vec![
                Arc::new(
                    queries
                        .iter()
                        .map(|q| Some(q.query_id.clone()))
                        .collect::<StringArray>(),
                ),
                Arc::new(StringArray::from(
                    queries.iter().map(|q| q.state.as_str()).collect::<Vec<_>>(),
                )),
                Arc::new(text(&|q| Some(q.user.clone()))),
                Arc::new(text(&|q| Some(q.sql.clone()))),
                Arc::new(
                    TimestampMillisecondArray::from(
                        queries.iter().map(|q| q.created_ms).collect::<Vec<_>>(),
                    )
                    .with_timezone("UTC"),
                ),
                Arc::new(
                    TimestampMillisecondArray::from(
                        queries.iter().map(|q| q.ended_ms).collect::<Vec<_>>(),
                    )
                    .with_timezone("UTC"),
                ),
                Arc::new(Int64Array::from(
                    queries.iter().map(|q| q.rows as i64).collect::<Vec<_>>(),
                )),
                Arc::new(text(&|q| q.error.clone())),
                Arc::new(text(&|q| q.source.clone())),
                // The policies' decisions are the admins' to read.
                Arc::new(
                    queries
                        .iter()
                        .map(|q| {
                            (caller.admin && !q.decisions.is_empty())
                                .then(|| q.decisions.join("; "))
                        })
                        .collect::<StringArray>(),
                ),
            ],
        )?)
    }
}

#[async_trait]
impl TableProvider for QueriesTable {
    fn schema(&self) -> SchemaRef {
        queries_schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn datafusion::catalog::Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let caller = Caller::of(state.config());
        let table = MemTable::try_new(queries_schema(), vec![vec![self.batch(&caller)?]])?;
        table.scan(state, projection, filters, limit).await
    }
}

//! Bulk ingest (Flight SQL's `CommandStatementIngest`, ADBC's `adbc_ingest`): a stream of Arrow
//! batches written into an Iceberg table, created first when asked. It goes through the same
//! CREATE TABLE AS and INSERT paths as SQL, so types are checked and converted the same way, and it
//! streams: the batches flow from the client into the writer without being collected.

use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::streaming::StreamingTable;
use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::sql::sqlparser::ast::{ObjectName, Statement};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;
use futures::StreamExt;
use iceberg::TableIdent;
use sqe_sessions::{
    BatchStream, IfExists, IfMissing, IngestTarget, QueryResult, SqeError, SqeResult,
};

use super::append;
use super::ddl::drop_table;
use crate::context::Ctx;
use crate::error::from_iceberg;
use crate::names::{QUERY_CATALOG, QUERY_SCHEMA};

const SOURCE: &str = "ingest";

/// The client's batches, readable once.
struct OneShot {
    schema: SchemaRef,
    batches: Mutex<Option<BatchStream>>,
}

impl fmt::Debug for OneShot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OneShot").finish_non_exhaustive()
    }
}

impl PartitionStream for OneShot {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let taken = self
            .batches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let stream = match taken {
            Some(s) => s
                .map(|b| b.map_err(|e| DataFusionError::External(Box::new(e))))
                .boxed(),
            None => futures::stream::once(async {
                Err(DataFusionError::Execution(
                    "the ingested rows were already read".into(),
                ))
            })
            .boxed(),
        };
        Box::pin(RecordBatchStreamAdapter::new(self.schema.clone(), stream))
    }
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn parse_one(sql: &str) -> SqeResult<Statement> {
    let mut statements = Parser::parse_sql(&GenericDialect {}, sql)
        .map_err(|e| SqeError::invalid(format!("bulk ingest: {e}")))?;
    statements
        .pop()
        .ok_or_else(|| SqeError::internal("bulk ingest: no statement"))
}

pub(crate) async fn ingest_rows(
    ctx: &Ctx<'_>,
    target: IngestTarget,
    schema: SchemaRef,
    batches: BatchStream,
) -> SqeResult<QueryResult> {
    let session = ctx.session;
    if target.table.is_empty() {
        return Err(SqeError::invalid("bulk ingest needs a table name"));
    }
    let catalog_name = target
        .catalog
        .clone()
        .unwrap_or_else(|| session.catalog.clone());
    let schema_name = target
        .schema
        .clone()
        .unwrap_or_else(|| session.schema.clone());
    let name = format!(
        "{}.{}.{}",
        quoted(&catalog_name),
        quoted(&schema_name),
        quoted(&target.table)
    );
    let display = format!("{catalog_name}.{schema_name}.{}", target.table);
    let catalog = ctx.mounts.bind(session, &catalog_name)?;
    let ident = TableIdent::from_strs([schema_name.as_str(), target.table.as_str()])
        .map_err(from_iceberg)?;
    let exists = catalog.table_exists(&ident).await.map_err(from_iceberg)?;

    let provider = StreamingTable::try_new(
        schema.clone(),
        vec![Arc::new(OneShot {
            schema: schema.clone(),
            batches: Mutex::new(Some(batches)),
        })],
    )
    .map_err(|e| SqeError::invalid(format!("bulk ingest: {e}")))?;
    let tables = vec![(
        SOURCE.to_string(),
        Arc::new(provider) as Arc<dyn datafusion::catalog::TableProvider>,
    )];
    let source = format!("{QUERY_CATALOG}.{QUERY_SCHEMA}.{SOURCE}");

    let create = match (exists, target.if_exists, target.if_missing) {
        (true, IfExists::Fail, _) => {
            return Err(SqeError::already_exists(format!(
                "table '{display}' already exists"
            )));
        }
        (true, IfExists::Append, _) => false,
        (true, IfExists::Replace, _) => {
            let object = ObjectName::from(vec![
                catalog_name.as_str().into(),
                schema_name.as_str().into(),
                target.table.as_str().into(),
            ]);
            drop_table(ctx, &object, true).await?;
            true
        }
        (false, _, IfMissing::Create) => true,
        (false, _, IfMissing::Fail) => {
            return Err(SqeError::not_found(format!(
                "table '{display}' does not exist"
            )));
        }
    };
    if create {
        let Statement::CreateTable(ct) =
            parse_one(&format!("CREATE TABLE {name} AS SELECT * FROM {source}"))?
        else {
            return Err(SqeError::internal("bulk ingest: not a CREATE TABLE"));
        };
        return append::create_table_as(ctx, ct, None, tables).await;
    }
    // Appending matches columns by name, as the client named them.
    let columns = schema
        .fields()
        .iter()
        .map(|f| quoted(f.name()))
        .collect::<Vec<_>>()
        .join(", ");
    let Statement::Insert(insert) = parse_one(&format!(
        "INSERT INTO {name} ({columns}) SELECT * FROM {source}"
    ))?
    else {
        return Err(SqeError::internal("bulk ingest: not an INSERT"));
    };
    append::insert(ctx, insert, tables).await
}

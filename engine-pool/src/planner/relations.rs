//! The relations SQE resolves itself before DataFusion plans a statement: Trino's time travel
//! (`t FOR VERSION AS OF …`, `t FOR TIMESTAMP AS OF …`), the file table functions (`read_parquet`,
//! `read_csv`, `read_json`) and bare paths in FROM. Each becomes a table of the statement's own,
//! under a generated name in the query catalog; the statement is pointed at it.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::common::ScalarValue;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, Ident, ObjectName, TableAlias, TableFactor,
    TableFunctionArgs, Value, VisitMut, VisitorMut,
};
use futures::TryStreamExt;
use iceberg::{NamespaceIdent, TableIdent};
use sqe_sessions::{Session, SqeError, SqeResult};

use super::{Planner, QueryTables};
use crate::catalog::provider::load_table_opt;
use crate::error::{from_datafusion, from_iceberg};
use crate::files::policy::Access;
use crate::files::table_functions::{FileFormat, FileOptions, OptionValue, file_table};
use crate::governance::model::Object;
use crate::names::{QUERY_CATALOG, QUERY_SCHEMA, resolve_name};
use crate::statement::prepass::{
    FILE_MARKER, Prepared, TIME_TRAVEL_MARKER, TimeTravel, TravelKind,
};

impl Planner {
    /// Runs `SELECT <expr>` and returns its single value.
    async fn eval_scalar(
        &self,
        session: &Session,
        expr: &Expr,
        cast_to: Option<&str>,
    ) -> SqeResult<ScalarValue> {
        let sql = match cast_to {
            Some(ty) => format!("SELECT CAST(({expr}) AS {ty})"),
            None => format!("SELECT {expr}"),
        };
        let (state, plan) = Box::pin(self.plan_sql(session, &sql)).await?;
        let result = Planner::stream(state, plan).await?;
        let batches: Vec<RecordBatch> = result.batches.try_collect().await?;
        let batch = batches.iter().find(|b| b.num_rows() > 0);
        match batch {
            Some(b) if b.num_columns() == 1 => {
                ScalarValue::try_from_array(b.column(0), 0).map_err(from_datafusion)
            }
            _ => Err(SqeError::invalid(format!(
                "'{expr}' did not produce a value"
            ))),
        }
    }

    /// Finds the relations SQE resolves itself (time travel, file functions, bare paths), loads
    /// them, and points the statement at per-query names.
    pub(crate) async fn resolve_relations(
        &self,
        session: &Session,
        statement: &mut impl VisitMut,
        prepared: &Prepared,
    ) -> SqeResult<QueryTables> {
        let travel_aliases = prepared
            .time_travel
            .iter()
            .map(|t| {
                t.table
                    .0
                    .last()
                    .and_then(|p| p.as_ident())
                    .cloned()
                    .unwrap_or_else(|| Ident::new("t"))
            })
            .collect();
        let mut collector = RelationRewriter {
            jobs: Vec::new(),
            error: None,
            travel_aliases,
        };
        let _ = statement.visit(&mut collector);
        if let Some(e) = collector.error {
            return Err(e);
        }
        let mut tables = Vec::new();
        for (name, job) in collector.jobs {
            let provider = match job {
                RelationJob::TimeTravel(n) => {
                    let travel = prepared
                        .time_travel
                        .get(n)
                        .ok_or_else(|| SqeError::internal("time travel marker without a clause"))?;
                    self.time_travel_provider(session, travel).await?
                }
                RelationJob::BarePath(n) => {
                    let path = prepared
                        .files
                        .get(n)
                        .ok_or_else(|| SqeError::internal("file marker without a path"))?;
                    self.files.check(path, Access::Read)?;
                    let format = FileFormat::from_path(path).ok_or_else(|| {
                        SqeError::invalid(format!(
                            "cannot tell the format of '{path}' from its extension; use read_parquet, read_csv or read_json"
                        ))
                    })?;
                    let ctx = SessionContext::new_with_state(self.state_for(session, Vec::new())?);
                    file_table(&ctx, format, vec![path.clone()], Vec::new()).await?
                }
                RelationJob::FileFunction {
                    format,
                    paths,
                    options,
                } => {
                    for path in &paths {
                        self.files.check(path, Access::Read)?;
                    }
                    let ctx = SessionContext::new_with_state(self.state_for(session, Vec::new())?);
                    file_table(&ctx, format, paths, options).await?
                }
            };
            tables.push((name, provider));
        }
        Ok(tables)
    }

    async fn time_travel_provider(
        &self,
        session: &Session,
        travel: &TimeTravel,
    ) -> SqeResult<Arc<dyn TableProvider>> {
        let (catalog_name, namespace, name) = resolve_name(session, &travel.table)?;
        let object = Object::table(&catalog_name, &namespace, &name);
        self.governance.authorize_read(session, &object, || {
            SqeError::not_found(format!(
                "table '{catalog_name}.{namespace}.{name}' does not exist"
            ))
        })?;
        let catalog = self.mounts.bind(session, &catalog_name)?;
        let ident = TableIdent::new(NamespaceIdent::new(namespace.clone()), name.clone());
        let table = load_table_opt(catalog.as_ref(), &ident)
            .await
            .map_err(from_iceberg)?
            .ok_or_else(|| {
                SqeError::not_found(format!(
                    "table '{catalog_name}.{namespace}.{name}' does not exist"
                ))
            })?;
        let snapshot_id = match travel.kind {
            TravelKind::Version => {
                let v = self.eval_scalar(session, &travel.expr, None).await?;
                let id = match v {
                    ScalarValue::Int64(Some(v)) => v,
                    ScalarValue::Int32(Some(v)) => i64::from(v),
                    ScalarValue::UInt64(Some(v)) => i64::try_from(v).unwrap_or(i64::MAX),
                    // A branch or a tag, by name: the snapshot it points at.
                    ScalarValue::Utf8(Some(r))
                    | ScalarValue::Utf8View(Some(r))
                    | ScalarValue::LargeUtf8(Some(r)) => table
                        .metadata()
                        .snapshot_for_ref(&r)
                        .map(|s| s.snapshot_id())
                        .ok_or_else(|| {
                            SqeError::not_found(format!(
                                "table '{namespace}.{name}' has no branch or tag '{r}'"
                            ))
                        })?,
                    other => {
                        return Err(SqeError::invalid(format!(
                            "FOR VERSION AS OF needs a snapshot id (bigint) or the name of a branch or tag, got {other}"
                        )));
                    }
                };
                if table.metadata().snapshot_by_id(id).is_none() {
                    return Err(SqeError::not_found(format!(
                        "snapshot {id} does not exist in table '{namespace}.{name}'"
                    )));
                }
                id
            }
            TravelKind::Timestamp => {
                let v = self
                    .eval_scalar(session, &travel.expr, Some("TIMESTAMP"))
                    .await?;
                let millis = match v {
                    ScalarValue::TimestampSecond(Some(s), _) => s.saturating_mul(1_000),
                    ScalarValue::TimestampMillisecond(Some(ms), _) => ms,
                    ScalarValue::TimestampMicrosecond(Some(us), _) => us.div_euclid(1_000),
                    ScalarValue::TimestampNanosecond(Some(ns), _) => ns.div_euclid(1_000_000),
                    _ => {
                        return Err(SqeError::invalid(format!(
                            "FOR TIMESTAMP AS OF needs a timestamp, got {}",
                            travel.expr
                        )));
                    }
                };
                table
                    .metadata()
                    .history()
                    .iter()
                    .filter(|l| l.timestamp_ms <= millis)
                    .max_by_key(|l| l.timestamp_ms)
                    .map(|l| l.snapshot_id)
                    .ok_or_else(|| {
                        let at = chrono::DateTime::from_timestamp_millis(millis)
                            .map(|t| t.to_rfc3339())
                            .unwrap_or_else(|| millis.to_string());
                        SqeError::not_found(format!(
                            "table '{namespace}.{name}' has no snapshot at or before {at}"
                        ))
                    })?
            }
        };
        // Known as its table, so that its row filters and column masks apply (governance/row_filters.rs).
        let provider = crate::catalog::scan::IcebergScanProvider::try_new(table, Some(snapshot_id))
            .map_err(from_iceberg)?
            .in_catalog(&catalog_name)
            .with_manifests(catalog.manifest_cache());
        Ok(Arc::new(provider))
    }
}

enum RelationJob {
    TimeTravel(usize),
    BarePath(usize),
    FileFunction {
        format: FileFormat,
        paths: Vec<String>,
        options: FileOptions,
    },
}

struct RelationRewriter {
    jobs: Vec<(String, RelationJob)>,
    error: Option<SqeError>,
    /// The table name each time-travel marker stands for, to alias the replacement with.
    travel_aliases: Vec<Ident>,
}

fn literal(expr: &Expr) -> Option<OptionValue> {
    match expr {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => {
                Some(OptionValue::Str(s.clone()))
            }
            Value::Boolean(b) => Some(OptionValue::Bool(*b)),
            Value::Number(n, _) => Some(OptionValue::Number(n.to_string())),
            _ => None,
        },
        Expr::Identifier(id) => match id.value.to_ascii_lowercase().as_str() {
            "true" => Some(OptionValue::Bool(true)),
            "false" => Some(OptionValue::Bool(false)),
            _ => None,
        },
        _ => None,
    }
}

fn file_function_args(
    name: &str,
    args: &TableFunctionArgs,
) -> SqeResult<(Vec<String>, FileOptions)> {
    let mut paths = Vec::new();
    let mut options = Vec::new();
    for (i, arg) in args.args.iter().enumerate() {
        match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) if i == 0 => match e {
                Expr::Array(arr) => {
                    for el in &arr.elem {
                        match literal(el) {
                            Some(OptionValue::Str(s)) => paths.push(s),
                            _ => {
                                return Err(SqeError::invalid(format!(
                                    "{name}() paths must be strings"
                                )));
                            }
                        }
                    }
                }
                other => match literal(other) {
                    Some(OptionValue::Str(s)) => paths.push(s),
                    _ => {
                        return Err(SqeError::invalid(format!(
                            "{name}() needs a path string as its first argument"
                        )));
                    }
                },
            },
            FunctionArg::Named {
                name: key,
                arg: FunctionArgExpr::Expr(e),
                ..
            }
            | FunctionArg::ExprNamed {
                name: Expr::Identifier(key),
                arg: FunctionArgExpr::Expr(e),
                ..
            } => {
                let value = literal(e).ok_or_else(|| {
                    SqeError::invalid(format!(
                        "option '{}' of {name}() must be a literal",
                        key.value
                    ))
                })?;
                options.push((key.value.to_ascii_lowercase(), value));
            }
            other => {
                return Err(SqeError::invalid(format!(
                    "unexpected argument '{other}' to {name}()"
                )));
            }
        }
    }
    Ok((paths, options))
}

impl VisitorMut for RelationRewriter {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table {
            name, alias, args, ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        let single = match name.0.as_slice() {
            [part] => part.as_ident().map(|i| i.value.clone()),
            _ => None,
        };
        let n = self.jobs.len();
        let generated = format!("t{n}");
        let job = if let Some(s) = single
            .as_deref()
            .and_then(|s| s.strip_prefix(TIME_TRAVEL_MARKER))
        {
            s.parse().ok().map(RelationJob::TimeTravel)
        } else if let Some(s) = single.as_deref().and_then(|s| s.strip_prefix(FILE_MARKER)) {
            s.parse().ok().map(RelationJob::BarePath)
        } else if let (Some(fargs), Some(fname)) = (args.as_ref(), single.as_deref()) {
            match FileFormat::from_function(fname) {
                Some(format) => match file_function_args(fname, fargs) {
                    Ok((paths, options)) => Some(RelationJob::FileFunction {
                        format,
                        paths,
                        options,
                    }),
                    Err(e) => {
                        self.error = Some(e);
                        return ControlFlow::Break(());
                    }
                },
                None => None,
            }
        } else {
            None
        };
        let Some(job) = job else {
            return ControlFlow::Continue(());
        };
        if alias.is_none()
            && let RelationJob::TimeTravel(i) = job
            && let Some(original) = self.travel_aliases.get(i)
        {
            // Keep `t.col` working after the name is replaced: the original table name becomes the alias.
            *alias = Some(TableAlias {
                explicit: false,
                name: original.clone(),
                columns: Vec::new(),
                at: None,
            });
        }
        *name = ObjectName::from(vec![
            Ident::new(QUERY_CATALOG),
            Ident::new(QUERY_SCHEMA),
            Ident::new(generated.clone()),
        ]);
        *args = None;
        self.jobs.push((generated, job));
        ControlFlow::Continue(())
    }
}

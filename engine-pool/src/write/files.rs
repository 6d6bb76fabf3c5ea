//! Data files: a plan's rows cast to a table's columns and types ([`cast_to_table`]), written as
//! Parquet data files split by the table's partition spec ([`write_files`]), and removed again when
//! the write they were for fails ([`remove_written`]). INSERT, CREATE TABLE AS, INSERT OVERWRITE and
//! the row-level changes all write through here; committing is theirs.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Field, SchemaRef};
use datafusion::common::Column;
use datafusion::common::hash_utils::create_hashes;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{Expr as DFExpr, LogicalPlan, LogicalPlanBuilder, cast, lit};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::scalar::ScalarValue;
use futures::StreamExt;
use iceberg::arrow::{RecordBatchPartitionSplitter, schema_to_arrow_schema};
use iceberg::spec::{DataFile, DataFileFormat, Literal, Type};
use iceberg::table::Table;
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::partitioning::PartitioningWriter;
use iceberg::writer::partitioning::fanout_writer::FanoutWriter;
use iceberg::writer::partitioning::unpartitioned_writer::UnpartitionedWriter;
use parquet::basic::{Compression, GzipLevel, ZstdLevel};
use parquet::file::properties::{WriterProperties, WriterPropertiesBuilder};
use parquet::schema::types::ColumnPath;
use sqe_sessions::{SqeError, SqeResult};
use tracing::Instrument;

use crate::catalog::column_stats::scalar_of;
use crate::error::{from_datafusion, from_iceberg};
use crate::write::sorting::write_order;

/// Broad type families; a value may go into a column of its own family only (as in Trino, a
/// varchar does not silently become a number).
fn family(t: &DataType) -> u8 {
    use DataType as D;
    if sqe_functions::zoned_unit(t).is_some() {
        return 5;
    }
    match t {
        D::Null => 0,
        D::Boolean => 1,
        D::Int8 | D::Int16 | D::Int32 | D::Int64 | D::UInt8 | D::UInt16 | D::UInt32 | D::UInt64 => {
            2
        }
        D::Float16
        | D::Float32
        | D::Float64
        | D::Decimal32(..)
        | D::Decimal64(..)
        | D::Decimal128(..)
        | D::Decimal256(..) => 2,
        D::Utf8 | D::LargeUtf8 | D::Utf8View => 3,
        D::Binary | D::LargeBinary | D::BinaryView | D::FixedSizeBinary(_) => 4,
        D::Date32 | D::Date64 | D::Timestamp(..) => 5,
        D::Time32(_) | D::Time64(_) => 6,
        D::List(_)
        | D::LargeList(_)
        | D::FixedSizeList(..)
        | D::ListView(_)
        | D::LargeListView(_) => 7,
        D::Struct(_) => 8,
        D::Map(..) => 9,
        D::Dictionary(_, v) => family(v),
        _ => 10,
    }
}

/// A type as Trino names it.
pub(crate) fn trino_name(t: &DataType) -> String {
    use DataType as D;
    match t {
        D::Null => "unknown".into(),
        D::Boolean => "boolean".into(),
        D::Int8 => "tinyint".into(),
        D::Int16 => "smallint".into(),
        D::Int32 => "integer".into(),
        D::Int64 => "bigint".into(),
        D::Float32 => "real".into(),
        D::Float64 => "double".into(),
        D::Decimal128(p, s) => format!("decimal({p}, {s})"),
        D::Utf8 | D::LargeUtf8 | D::Utf8View => "varchar".into(),
        D::Binary | D::LargeBinary | D::BinaryView => "varbinary".into(),
        D::FixedSizeBinary(16) => "uuid".into(),
        D::Date32 => "date".into(),
        D::Timestamp(_, None) => "timestamp".into(),
        D::Timestamp(_, Some(_)) => "timestamp with time zone".into(),
        D::Time64(_) => "time".into(),
        D::List(_) => "array".into(),
        D::Struct(_) => "row".into(),
        D::Map(..) => "map".into(),
        other => other.to_string().to_lowercase(),
    }
}

/// Whether a value of type `from` may go into column `field` of `table_name`: only within the
/// column's type family, as in Trino (an integer into a decimal too).
pub(crate) fn assignable(field: &Field, from: &DataType, table_name: &str) -> SqeResult<()> {
    let to = field.data_type();
    let (ff, tf) = (family(from), family(to));
    if ff != 0 && ff != tf && !(ff == 3 && tf == 4) {
        return Err(SqeError::invalid(format!(
            "column '{}' of '{table_name}' is {} but the value is {}",
            field.name(),
            trino_name(to),
            trino_name(from)
        )));
    }
    Ok(())
}

/// Projects `plan` onto the table's columns: listed columns take the query's values in order, the
/// others get NULL; each value is cast to the column's type after a family check.
pub(crate) fn cast_to_table(
    plan: LogicalPlan,
    table: &Table,
    columns: Option<&[String]>,
    table_name: &str,
) -> SqeResult<LogicalPlan> {
    let iceberg_schema = table.metadata().current_schema();
    let target = schema_to_arrow_schema(iceberg_schema).map_err(from_iceberg)?;
    let all: Vec<String> = target.fields().iter().map(|f| f.name().clone()).collect();
    let columns: Vec<String> = columns.map(<[String]>::to_vec).unwrap_or(all);
    for (i, c) in columns.iter().enumerate() {
        if target.field_with_name(c).is_err() {
            return Err(SqeError::not_found(format!(
                "column '{c}' does not exist in table '{table_name}'"
            )));
        }
        if columns[..i].contains(c) {
            return Err(SqeError::invalid(format!(
                "column '{c}' is listed more than once"
            )));
        }
    }
    let source = plan.schema().clone();
    if source.fields().len() != columns.len() {
        return Err(SqeError::invalid(format!(
            "INSERT into '{table_name}' has {} values per row but {} columns are expected",
            source.fields().len(),
            columns.len()
        )));
    }
    let mut exprs = Vec::with_capacity(target.fields().len());
    for field in target.fields() {
        let expr = match columns.iter().position(|c| c == field.name()) {
            Some(i) => {
                let (qualifier, src) = source.qualified_field(i);
                let (from, to) = (src.data_type(), field.data_type());
                assignable(field, from, table_name)?;
                let value = DFExpr::Column(Column::from((qualifier, src)));
                // A timestamp with a time zone per value is stored as its instant.
                let value = if sqe_functions::zoned_unit(from).is_some() {
                    datafusion::functions::core::expr_fn::get_field(value, sqe_functions::INSTANT)
                } else {
                    value
                };
                cast(value, to.clone())
            }
            // A column left out takes its default (Iceberg format version 3's write-default).
            None => match write_default(iceberg_schema, field.name())? {
                Some(value) => cast(lit(value), field.data_type().clone()),
                None if !field.is_nullable() => {
                    return Err(SqeError::invalid(format!(
                        "column '{}' is NOT NULL and needs a value",
                        field.name()
                    )));
                }
                None => cast(lit(ScalarValue::Null), field.data_type().clone()),
            },
        };
        exprs.push(expr.alias(field.name()));
    }
    LogicalPlanBuilder::from(plan)
        .project(exprs)
        .and_then(|b| b.build())
        .map_err(from_datafusion)
}

/// The value the table's column `name` takes when a write leaves it out: its write-default, if it
/// has one (format version 3).
fn write_default(schema: &iceberg::spec::Schema, name: &str) -> SqeResult<Option<ScalarValue>> {
    let Some(field) = schema.as_struct().field_by_name(name) else {
        return Ok(None);
    };
    match (&field.write_default, field.field_type.as_ref()) {
        (None, _) => Ok(None),
        (Some(Literal::Primitive(value)), Type::Primitive(ty)) => {
            scalar_of(ty, value).map(Some).ok_or_else(|| {
                SqeError::unsupported(format!(
                    "column '{name}' has a default value of type {ty}, which SQE does not write yet"
                ))
            })
        }
        (Some(_), _) => Err(SqeError::unsupported(format!(
            "column '{name}' has a default value that is not a single value, which SQE does not write yet"
        ))),
    }
}

/// Removes the data files a write named with `prefix` wrote into `table` (one that failed, or
/// whose commit the catalog surely refused).
pub(crate) async fn remove_written(table: &Table, prefix: &str) {
    let location = table
        .metadata()
        .location()
        .trim_end_matches('/')
        .to_string();
    let local = location.strip_prefix("file://").unwrap_or(&location);
    if local.starts_with('/') {
        // A walk of the table's data directory: off the runtime's threads.
        let local = local.to_string();
        let prefix = prefix.to_string();
        let _ = tokio::task::spawn_blocking(move || remove_written_files(&local, &prefix)).await;
    } else {
        // In an object store, the files of an unpartitioned write share one key prefix.
        let files = format!("{location}/data/{prefix}");
        if let Err(e) = table.file_io().delete_prefix(&files).await {
            tracing::warn!("could not remove the files of a failed write under {files}: {e}");
        }
    }
}

/// Writes the rows of `plan` (in the table's columns and types) as data files of `table`, named
/// with `prefix`, split by the table's partition spec; nothing is committed. Returns the files and
/// the row count.
///
/// An unpartitioned table's rows are written by a writer per output partition of the plan, all at
/// once. A partition with fewer rows than a row group writes no file of its own: its rows go to a
/// writer still writing, or else into one file with the other short partitions' rows. A partitioned
/// table's rows are written by one writer (a writer per partition of the plan would keep a file
/// open per table partition each).
pub(crate) async fn write_files(
    table: &Table,
    state: &SessionState,
    plan: LogicalPlan,
    prefix: &str,
) -> SqeResult<(Vec<DataFile>, u64)> {
    let metadata = table.metadata();
    let iceberg_schema = metadata.current_schema().clone();
    let writing = Arc::new(Writing {
        arrow_schema: Arc::new(schema_to_arrow_schema(&iceberg_schema).map_err(from_iceberg)?),
        iceberg_schema,
        parquet: parquet_properties(metadata.properties())?,
        target_file_size: metadata
            .table_properties()
            .map_err(from_iceberg)?
            .write_target_file_size_bytes,
        file_io: table.file_io().clone(),
        locations: DefaultLocationGenerator::new(metadata).map_err(from_iceberg)?,
        names: DefaultFileNameGenerator::new(prefix.to_string(), None, DataFileFormat::Parquet),
        spec: metadata.default_partition_spec().clone(),
        short: Mutex::default(),
    });
    // Each file in the table's sort order: the rows are sorted as one stream, so that no file
    // takes rows from two.
    let order = write_order(metadata, plan.schema());
    let plan = match order.is_empty() {
        true => plan,
        false => LogicalPlanBuilder::from(plan)
            .sort(order)
            .and_then(|b| b.build())
            .map_err(from_datafusion)?,
    };
    let mut physical = state
        .create_physical_plan(&plan)
        .await
        .map_err(from_datafusion)?;
    if !writing.spec.is_unpartitioned() {
        physical = Arc::new(CoalescePartitionsExec::new(physical));
    }
    let context = state.task_ctx();
    let partitions = physical
        .properties()
        .output_partitioning()
        .partition_count();
    let mut writers = tokio::task::JoinSet::new();
    for partition in 0..partitions {
        let stream = physical
            .execute(partition, context.clone())
            .map_err(from_datafusion)?;
        let writing = writing.clone();
        writers.spawn(async move { writing.write(stream).await }.in_current_span());
    }
    let (mut files, mut rows) = (Vec::new(), 0u64);
    let mut failed = None;
    while let Some(written) = writers.join_next().await {
        match written.map_err(|e| SqeError::internal(format!("a file writer stopped: {e}"))) {
            Ok(Ok((written, count))) => {
                files.extend(written);
                rows += count;
            }
            Ok(Err(e)) | Err(e) => {
                // The others are stopped, and waited for: the caller removes what they wrote.
                writers.abort_all();
                failed.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    // The short partitions' rows no writer took share one file.
    let short = std::mem::take(&mut *writing.lock_short());
    if !short.is_empty() {
        let (written, count) = writing.write_all(short, futures::stream::empty()).await?;
        files.extend(written);
        rows += count;
    }
    Ok((files, rows))
}

/// What each writer of one [`write_files`] writes with. The file names share one counter.
struct Writing {
    arrow_schema: SchemaRef,
    iceberg_schema: iceberg::spec::SchemaRef,
    parquet: WriterPropertiesBuilder,
    target_file_size: usize,
    file_io: iceberg::io::FileIO,
    locations: DefaultLocationGenerator,
    names: DefaultFileNameGenerator,
    spec: iceberg::spec::PartitionSpecRef,
    /// The rows of partitions too short for a file of their own, for the writers still writing.
    short: Mutex<Vec<RecordBatch>>,
}

impl Writing {
    /// The rows of `stream` as data files if they are a row group at least, else left in `short`
    /// (a partition with a few rows would make a small file of its own). A writer that writes
    /// takes what is in `short` when its own rows end.
    async fn write(
        &self,
        mut stream: SendableRecordBatchStream,
    ) -> SqeResult<(Vec<DataFile>, u64)> {
        let mut first = Vec::new();
        let mut rows = 0;
        while rows < ROW_GROUP_ROWS {
            let Some(batch) = stream.next().await else {
                self.lock_short().extend(first);
                return Ok((Vec::new(), 0));
            };
            let batch = with_schema(batch.map_err(from_datafusion)?, &self.arrow_schema)?;
            if batch.num_rows() > 0 {
                rows += batch.num_rows();
                first.push(batch);
            }
        }
        let own = stream.map(|b| with_schema(b.map_err(from_datafusion)?, &self.arrow_schema));
        // Taken when the partition's own rows have ended, not before.
        let others = futures::stream::once(futures::future::lazy(|_| {
            std::mem::take(&mut *self.lock_short())
        }))
        .flat_map(|batches| futures::stream::iter(batches.into_iter().map(Ok)));
        self.write_all(first, own.chain(others)).await
    }

    fn lock_short(&self) -> std::sync::MutexGuard<'_, Vec<RecordBatch>> {
        self.short.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `first` (the first row group's rows, or all there are), then `rest`, as data files.
    async fn write_all(
        &self,
        first: Vec<RecordBatch>,
        rest: impl futures::Stream<Item = SqeResult<RecordBatch>> + Unpin,
    ) -> SqeResult<(Vec<DataFile>, u64)> {
        // The first row group's rows choose each column's encoding before anything is written.
        let mut parquet = self.parquet.clone();
        for column in plain_columns(&first)? {
            parquet = parquet.set_column_dictionary_enabled(ColumnPath::from(column), false);
        }
        let parquet = ParquetWriterBuilder::new(parquet.build(), self.iceberg_schema.clone());
        let rolling = RollingFileWriterBuilder::new(
            parquet,
            self.target_file_size,
            self.file_io.clone(),
            self.locations.clone(),
            self.names.clone(),
        );
        let builder = DataFileWriterBuilder::new(rolling);
        let mut batches = futures::stream::iter(first.into_iter().map(Ok)).chain(rest);
        let mut rows = 0u64;
        let files = if self.spec.is_unpartitioned() {
            let mut writer = UnpartitionedWriter::new(builder);
            while let Some(batch) = batches.next().await {
                let batch = batch?;
                rows += batch.num_rows() as u64;
                writer.write(batch).await.map_err(from_iceberg)?;
            }
            writer.close().await.map_err(from_iceberg)?
        } else {
            let splitter = RecordBatchPartitionSplitter::try_new_with_computed_values(
                self.iceberg_schema.clone(),
                self.spec.clone(),
            )
            .map_err(from_iceberg)?;
            let mut writer = FanoutWriter::new(builder);
            while let Some(batch) = batches.next().await {
                let batch = batch?;
                rows += batch.num_rows() as u64;
                for (key, part) in splitter.split(&batch).map_err(from_iceberg)? {
                    writer.write(key, part).await.map_err(from_iceberg)?;
                }
            }
            writer.close().await.map_err(from_iceberg)?
        };
        Ok((files, rows))
    }
}

/// Rows per Parquet row group: small enough that scans split across cores and filters skip whole
/// groups, large enough for good compression (DuckDB writes 122,880).
const ROW_GROUP_ROWS: usize = 128 * 1024;

/// How data files are written, from the table's `write.parquet.*` properties: the codec
/// (`write.parquet.compression-codec`, Iceberg's default `zstd`), its level
/// (`write.parquet.compression-level`), `row-group-size-bytes` (128 MB), `page-size-bytes` (1 MB),
/// `page-row-limit` (20,000) and `dict-size-bytes` (2 MB).
pub(crate) fn parquet_properties(
    table: &HashMap<String, String>,
) -> SqeResult<WriterPropertiesBuilder> {
    let codec = table
        .get("write.parquet.compression-codec")
        .map(|c| c.to_ascii_lowercase())
        .unwrap_or_else(|| "zstd".to_string());
    let level = table
        .get("write.parquet.compression-level")
        .map(|l| {
            l.parse::<i32>().map_err(|_| {
                SqeError::invalid(format!(
                    "write.parquet.compression-level must be a number, not '{l}'"
                ))
            })
        })
        .transpose()?;
    let bad_level =
        |e: parquet::errors::ParquetError| SqeError::invalid(format!("compression level: {e}"));
    let compression = match codec.as_str() {
        "zstd" => Compression::ZSTD(ZstdLevel::try_new(level.unwrap_or(1)).map_err(bad_level)?),
        "gzip" => Compression::GZIP(
            GzipLevel::try_new(level.unwrap_or(6).max(0) as u32).map_err(bad_level)?,
        ),
        "snappy" => Compression::SNAPPY,
        "lz4" => Compression::LZ4_RAW,
        "uncompressed" | "none" => Compression::UNCOMPRESSED,
        other => {
            return Err(SqeError::invalid(format!(
                "write.parquet.compression-codec '{other}' is not supported (zstd, snappy, gzip, lz4, uncompressed)"
            )));
        }
    };
    let number = |name: &str, default: usize| match table.get(name) {
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| SqeError::invalid(format!("{name} must be a number, not '{v}'"))),
        None => Ok(default),
    };
    // Iceberg's table properties, with Iceberg's defaults.
    Ok(WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_max_row_group_bytes(Some(number(
            "write.parquet.row-group-size-bytes",
            128 * 1024 * 1024,
        )?))
        .set_data_page_size_limit(number("write.parquet.page-size-bytes", 1024 * 1024)?)
        .set_data_page_row_count_limit(number("write.parquet.page-row-limit", 20_000)?)
        .set_dictionary_page_size_limit(number("write.parquet.dict-size-bytes", 2 * 1024 * 1024)?))
}

/// The columns written without a dictionary: those with more than one distinct value in eight rows
/// of `sample` (the first row group). Their dictionary would be about as big as the data, so it
/// barely shrinks the file, and every read would gather each value from a dictionary too big for
/// the CPU's caches; plain values are read by copying. (DuckDB's writer makes the same choice.)
fn plain_columns(sample: &[RecordBatch]) -> SqeResult<Vec<String>> {
    let rows: usize = sample.iter().map(RecordBatch::num_rows).sum();
    let Some(first) = sample.first() else {
        return Ok(Vec::new());
    };
    let state = datafusion::common::hash_utils::RandomState::default();
    let mut plain = Vec::new();
    let mut hashes = Vec::new();
    for (i, field) in first.schema().fields().iter().enumerate() {
        if field.data_type().is_nested() || field.data_type() == &DataType::Boolean {
            continue;
        }
        let mut distinct = std::collections::HashSet::new();
        for batch in sample {
            hashes.clear();
            hashes.resize(batch.num_rows(), 0);
            create_hashes([batch.column(i)], &state, &mut hashes).map_err(from_datafusion)?;
            distinct.extend(hashes.iter().copied());
        }
        if distinct.len() * 8 > rows {
            plain.push(field.name().clone());
        }
    }
    Ok(plain)
}

/// The batch under the table's Arrow schema (with Iceberg field ids), which the writer needs. A
/// NULL in a NOT NULL column is refused (in Trino's words).
fn with_schema(batch: RecordBatch, schema: &SchemaRef) -> SqeResult<RecordBatch> {
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if !field.is_nullable() && column.null_count() > 0 {
            return Err(SqeError::invalid(format!(
                "NULL value not allowed for NOT NULL column: {}",
                field.name()
            )));
        }
    }
    RecordBatch::try_new(schema.clone(), batch.columns().to_vec()).map_err(|e| {
        SqeError::internal(format!("write batch does not match the table schema: {e}"))
    })
}

/// Removes data files this write created (their names start with `prefix`).
fn remove_written_files(root: &str, prefix: &str) {
    fn walk(dir: &Path, prefix: &str) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, prefix);
            } else if entry.file_name().to_string_lossy().starts_with(prefix) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    walk(&Path::new(root).join("data"), prefix);
}

//! Copy-on-write that writes only the columns a change sets. An UPDATE (or a MERGE's UPDATE
//! clauses) that keeps every row of a data file and sets a few of its columns leaves the other
//! columns' bytes as they were: the file is written again with each unset column's chunks copied
//! byte for byte (pages, dictionary, page index), and only the set columns decoded, given their new
//! values at the changed positions, and encoded again. Rows keep their positions and row groups.
//!
//! A file is written this way when that means the same as writing it again from its rows:
//! - it is a Parquet data file of the table's default partition spec, with no delete file that
//!   could apply to it (its rows are all live), and no column it sets is a partition source or
//!   a field of the table's sort order (the file is written again in that order);
//! - its top-level columns are the table's current columns by field id, in order, and each column
//!   it sets is a single primitive leaf of the table's own type;
//! - each new value is of the column's type family, and none is NULL in a NOT NULL column.
//!
//! Any other file goes the general way (rows.rs reads and writes all of it). The new file's
//! metrics are the old file's, but for the columns set: their sizes, null and NaN counts and
//! bounds are counted from the new values.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use datafusion::arrow::array::{
    Array, ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray, new_empty_array,
};
use datafusion::arrow::compute::{CastOptions, cast_with_options, concat, interleave};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::Accumulator;
use futures::StreamExt;
use iceberg::arrow::{ArrowFileReader, schema_to_arrow_schema};
use iceberg::io::FileMetadata;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, PrimitiveType, Struct, Type,
};
use iceberg::table::Table;
use iceberg::writer::file_writer::location_generator::{
    DefaultLocationGenerator, LocationGenerator,
};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::arrow_writer::{ArrowRowGroupWriterFactory, compute_leaves};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::arrow::{ArrowSchemaConverter, ProjectionMask};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::{KeyValue, PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::SchemaDescriptor;
use sqe_sessions::{SqeError, SqeResult};

use crate::error::from_iceberg;
use crate::write::change;
use crate::write::files::{assignable, parquet_properties};

/// A column a change sets, and where the changed rows hold its new values.
pub(crate) struct SetColumn {
    /// The column's index among the table's top-level columns.
    pub index: usize,
    /// The name of the changed rows' column holding its new values.
    pub values: String,
    /// A MERGE's: the clauses that set it, by the number the rows' action column holds; a row
    /// another clause acted on keeps its value. `None`: every changed row takes a new value.
    pub clauses: Option<Vec<i32>>,
}

/// Writes again, setting only the columns of `sets`, the data files of the changed rows
/// (`targets`: `$path`, `$pos`, then the new values; a MERGE's with the column `action` naming the
/// clause acting on each row) that can be written so (see the module's comment), except those of
/// `skip`. Returns the files written and the paths of the files they
/// replace; the caller writes the others the general way.
pub(crate) async fn patch_files(
    table: &Table,
    targets: &[RecordBatch],
    sets: &[SetColumn],
    action: Option<&str>,
    skip: &HashSet<String>,
    prefix: &str,
    table_name: &str,
) -> SqeResult<(Vec<DataFile>, HashSet<String>)> {
    let none = || Ok((Vec::new(), HashSet::new()));
    if sets.is_empty() || targets.is_empty() {
        return none();
    }
    let metadata = table.metadata();
    let schema = metadata.current_schema();
    let arrow_schema = schema_to_arrow_schema(schema).map_err(from_iceberg)?;
    let fields = schema.as_struct().fields();
    // The new values, cast to each column's type, per batch of `targets`.
    let mut columns = Vec::with_capacity(sets.len());
    for set in sets {
        let (Some(field), Some(arrow_field)) =
            (fields.get(set.index), arrow_schema.fields().get(set.index))
        else {
            return Err(SqeError::internal(
                "a set column is not a column of the table",
            ));
        };
        let Type::Primitive(ty) = field.field_type.as_ref() else {
            return none();
        };
        let mut arrays = Vec::with_capacity(targets.len());
        for batch in targets {
            let Some(values) = batch.column_by_name(&set.values) else {
                return Err(SqeError::internal(format!(
                    "the changed rows have no column {}",
                    set.values
                )));
            };
            // A value the general way refuses (or casts only where a clause acts) goes that way.
            if assignable(arrow_field, values.data_type(), table_name).is_err()
                || sqe_functions::zoned_unit(values.data_type()).is_some()
            {
                return none();
            }
            let options = CastOptions {
                safe: false,
                ..CastOptions::default()
            };
            match cast_with_options(values, arrow_field.data_type(), &options) {
                Ok(cast) => arrays.push(cast),
                Err(_) => return none(),
            }
        }
        columns.push(Column {
            field_id: field.id,
            index: set.index,
            required: field.required,
            ty: ty.clone(),
            data_type: arrow_field.data_type().clone(),
            arrays,
        });
    }
    // Each column's changed rows, by file: (position, batch, row).
    let mut by_file: HashMap<&str, Vec<Vec<Changed>>> = HashMap::new();
    for (b, batch) in targets.iter().enumerate() {
        let (paths, positions) = row_ids(batch)?;
        let acting = match action {
            Some(name) => Some(
                batch
                    .column_by_name(name)
                    .and_then(|a| a.as_any().downcast_ref::<Int32Array>())
                    .ok_or_else(|| SqeError::internal("the MERGE's rows have no action column"))?,
            ),
            None => None,
        };
        for row in 0..batch.num_rows() {
            if !paths.is_valid(row) || !positions.is_valid(row) {
                continue;
            }
            let path = paths.value(row);
            let entry = by_file
                .entry(path)
                .or_insert_with(|| vec![Vec::new(); sets.len()]);
            for (c, set) in sets.iter().enumerate() {
                let sets_it = match (&set.clauses, acting) {
                    (Some(clauses), Some(acting)) => {
                        acting.is_valid(row) && clauses.contains(&acting.value(row))
                    }
                    _ => true,
                };
                if !sets_it {
                    continue;
                }
                // A NULL in a NOT NULL column: the general way says so.
                if columns[c].required && columns[c].arrays[b].is_null(row) {
                    return none();
                }
                entry[c].push((positions.value(row), b as u32, row as u32));
            }
        }
    }
    let live = Live::of(table).await?;
    let default_spec = metadata.default_partition_spec();
    // Partition sources, and the sort order's columns (a file is written in the order).
    let sources: HashSet<i32> = default_spec
        .fields()
        .iter()
        .map(|f| f.source_id)
        .chain(
            metadata
                .default_sort_order()
                .fields
                .iter()
                .map(|f| f.source_id),
        )
        .collect();
    let mut jobs = Vec::new();
    for (path, mut changed) in by_file {
        if skip.contains(path) {
            continue;
        }
        let Some((spec_id, file)) = live.data.get(path) else {
            continue;
        };
        let set_here: Vec<usize> = (0..sets.len())
            .filter(|c| !changed[*c].is_empty())
            .collect();
        if *spec_id != metadata.default_partition_spec_id()
            || file.file_format() != DataFileFormat::Parquet
            || live.deleted_in(*spec_id, file.partition())
            || set_here
                .iter()
                .any(|c| sources.contains(&columns[*c].field_id))
        {
            continue;
        }
        for list in &mut changed {
            list.sort_unstable();
        }
        jobs.push(Job {
            file: file.clone(),
            spec_id: *spec_id,
            changed: set_here
                .into_iter()
                .map(|c| (c, std::mem::take(&mut changed[c])))
                .collect(),
        });
    }
    let columns = Arc::new(columns);
    let table_props = Arc::new(metadata.properties().clone());
    // How the table's columns are stored in files SQE writes.
    let Ok(table_parquet) = ArrowSchemaConverter::new().convert(&arrow_schema) else {
        return none();
    };
    let table_parquet = Arc::new(table_parquet);
    // Where the general way writes a table's data files (`write.data.path`, else `data/`).
    let locations = DefaultLocationGenerator::new(metadata).map_err(from_iceberg)?;
    let parallel = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut running = futures::stream::iter(jobs.into_iter().enumerate().map(|(n, job)| {
        let columns = columns.clone();
        let file_io = table.file_io().clone();
        let props = table_props.clone();
        let path = locations.generate_location(None, &format!("{prefix}-set-{n:05}.parquet"));
        let stored = table_parquet.clone();
        tokio::spawn(async move { job.run(&file_io, &columns, &stored, &props, path).await })
    }))
    .buffer_unordered(parallel);
    let (mut written, mut replaced) = (Vec::new(), HashSet::new());
    let mut failed = None;
    while let Some(done) = running.next().await {
        match done.map_err(|e| SqeError::internal(format!("a file writer stopped: {e}"))) {
            Ok(Ok(Some((old, new)))) => {
                replaced.insert(old);
                written.push(new);
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) | Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    // The caller removes what was written (the files are named with `prefix`).
    match failed {
        Some(e) => Err(e),
        None => Ok((written, replaced)),
    }
}

/// The `$path` and `$pos` columns of a batch of changed rows (its first two).
pub(crate) fn row_ids(batch: &RecordBatch) -> SqeResult<(&StringArray, &Int64Array)> {
    match (
        batch.column(0).as_any().downcast_ref::<StringArray>(),
        batch.column(1).as_any().downcast_ref::<Int64Array>(),
    ) {
        (Some(paths), Some(positions)) => Ok((paths, positions)),
        _ => Err(SqeError::internal(
            "the changed rows are not ($path, $pos, …)",
        )),
    }
}

/// A changed row: its position in its file, and where its new value is (batch, row).
type Changed = (i64, u32, u32);

/// A column set, with its new values per batch of the changed rows.
struct Column {
    field_id: i32,
    index: usize,
    required: bool,
    ty: PrimitiveType,
    data_type: DataType,
    arrays: Vec<ArrayRef>,
}

/// The live files of a table's current snapshot: its data files (with their partition spec), and
/// where delete files are.
struct Live {
    data: HashMap<String, (i32, DataFile)>,
    /// (spec, partition) of each delete file.
    deletes: HashSet<(i32, Struct)>,
    /// Whether a delete file is in an unpartitioned spec (it may apply to every file).
    global_deletes: bool,
}

impl Live {
    async fn of(table: &Table) -> SqeResult<Self> {
        let mut live = Live {
            data: HashMap::new(),
            deletes: HashSet::new(),
            global_deletes: false,
        };
        let metadata = table.metadata();
        for f in change::live_files(table).await? {
            let unpartitioned = metadata
                .partition_spec_by_id(f.spec_id)
                .is_none_or(|s| s.is_unpartitioned());
            match f.file.content_type() {
                DataContentType::Data => {
                    live.data.insert(f.path, (f.spec_id, f.file));
                }
                _ if unpartitioned => live.global_deletes = true,
                _ => {
                    live.deletes.insert((f.spec_id, f.file.partition().clone()));
                }
            }
        }
        Ok(live)
    }

    /// Whether a delete file may apply to a data file of `spec_id` in `partition`.
    fn deleted_in(&self, spec_id: i32, partition: &Struct) -> bool {
        self.global_deletes || self.deletes.contains(&(spec_id, partition.clone()))
    }
}

/// One data file to write again: for each column set in it (by index into the columns), its
/// changed rows sorted by position.
struct Job {
    file: DataFile,
    spec_id: i32,
    changed: Vec<(usize, Vec<Changed>)>,
}

impl Job {
    /// Writes the file again at `path`; `None` when the file turns out not to be one that can be
    /// written so (nothing was written then).
    async fn run(
        self,
        file_io: &iceberg::io::FileIO,
        columns: &[Column],
        table_parquet: &SchemaDescriptor,
        table_props: &HashMap<String, String>,
        path: String,
    ) -> SqeResult<Option<(String, DataFile)>> {
        let old_path = self.file.file_path().to_string();
        let size = self.file.file_size_in_bytes();
        let input = file_io.new_input(&old_path).map_err(from_iceberg)?;
        let mut reader = ArrowFileReader::new(
            FileMetadata { size },
            input.reader().await.map_err(from_iceberg)?,
        );
        // A footer or page index that cannot be read: the general way reads the file as it can.
        let Ok(parquet) = ParquetMetaDataReader::new()
            .with_page_index_policy(PageIndexPolicy::Optional)
            .load_and_finish(&mut reader, size)
            .await
        else {
            return Ok(None);
        };
        let Ok(metadata) =
            ArrowReaderMetadata::try_new(Arc::new(parquet), ArrowReaderOptions::new())
        else {
            return Ok(None);
        };
        let Some(leaves) = self.leaves(
            metadata.metadata(),
            metadata.schema(),
            columns,
            table_parquet,
        ) else {
            return Ok(None);
        };
        let parquet = metadata.metadata().clone();
        let rows_in_file = parquet.file_metadata().num_rows();
        let last = self
            .changed
            .iter()
            .filter_map(|(_, l)| l.last())
            .map(|l| l.0)
            .max();
        if let Some(last) = last
            && last >= rows_in_file
        {
            return Err(SqeError::internal(format!(
                "row {last} of {old_path} was changed, which holds {rows_in_file} rows"
            )));
        }
        let kv: Option<Vec<KeyValue>> = parquet.file_metadata().key_value_metadata().cloned();
        let descriptor = parquet.file_metadata().schema_descr();
        let mut props = parquet_properties(table_props)?.set_key_value_metadata(kv);
        // The old writer's name stays: readers decide by it how far to trust the copied chunks'
        // statistics.
        if let Some(created_by) = parquet.file_metadata().created_by() {
            props = props.set_created_by(created_by.to_string());
        }
        // A set column keeps its encoding: a dictionary where its first chunk had one.
        if let Some(first) = parquet.row_groups().first() {
            for leaf in &leaves {
                let dictionary = first.column(*leaf).dictionary_page_offset().is_some();
                props = props.set_column_dictionary_enabled(
                    descriptor.column(*leaf).path().clone(),
                    dictionary,
                );
            }
        }
        let props = props.build();
        let root = descriptor.root_schema_ptr();
        let mut writer = SerializedFileWriter::new(Vec::new(), root, Arc::new(props))
            .map_err(|e| SqeError::internal(e.to_string()))?;
        let factory = ArrowRowGroupWriterFactory::new(&writer, metadata.schema().clone());
        let mut out = file_io
            .new_output(&path)
            .map_err(from_iceberg)?
            .writer()
            .await
            .map_err(from_iceberg)?;
        let mut counted: Vec<Counted> = self
            .changed
            .iter()
            .map(|(c, _)| Counted::new(&columns[*c].data_type))
            .collect::<SqeResult<_>>()?;
        // Where each column's next changed row is in its list.
        let mut next = vec![0usize; self.changed.len()];
        let mut first_row = 0i64;
        for (g, group) in parquet.row_groups().iter().enumerate() {
            let rows = group.num_rows();
            let range = group_range(group);
            let bytes = reader
                .get_bytes(range.clone())
                .await
                .map_err(|e| SqeError::internal(format!("{old_path}: {e}")))?;
            let window = Window {
                start: range.start,
                bytes,
                len: size,
            };
            // The set columns' values in this row group, old then new.
            let mask = ProjectionMask::leaves(descriptor, leaves.iter().copied());
            let old: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::new_with_metadata(
                window.clone(),
                metadata.clone(),
            )
            .with_row_groups(vec![g])
            .with_projection(mask)
            .with_batch_size(rows.max(1) as usize)
            .build()
            .map_err(internal)?
            .collect::<Result<_, _>>()
            .map_err(|e| SqeError::internal(format!("{old_path}: {e}")))?;
            let mut writers: Vec<_> = factory
                .create_column_writers(g)
                .map_err(internal)?
                .into_iter()
                .map(Some)
                .collect();
            let mut chunks = HashMap::new();
            for (k, (c, changed)) in self.changed.iter().enumerate() {
                let column = &columns[*c];
                // The projection keeps the file's order of columns.
                let at = leaves.iter().filter(|l| **l < leaves[k]).count();
                let parts: Vec<&dyn Array> = old.iter().map(|b| b.column(at).as_ref()).collect();
                let old_values = match parts.len() {
                    0 => new_empty_array(&column.data_type),
                    _ => concat(&parts).map_err(internal)?,
                };
                let mut sources: Vec<&dyn Array> = vec![old_values.as_ref()];
                sources.extend(column.arrays.iter().map(|a| a.as_ref()));
                let mut indices = Vec::with_capacity(rows as usize);
                for r in 0..rows {
                    match changed.get(next[k]) {
                        Some((pos, batch, row)) if *pos == first_row + r => {
                            indices.push((*batch as usize + 1, *row as usize));
                            next[k] += 1;
                        }
                        _ => indices.push((0, r as usize)),
                    }
                }
                let new_values = interleave(&sources, &indices).map_err(internal)?;
                counted[k].count(&new_values)?;
                let root = descriptor.get_column_root_idx(leaves[k]);
                let leaf = compute_leaves(metadata.schema().field(root), &new_values)
                    .map_err(internal)?
                    .into_iter()
                    .next()
                    .ok_or_else(|| SqeError::internal("a set column has no leaf"))?;
                let mut column_writer = writers[leaves[k]]
                    .take()
                    .ok_or_else(|| SqeError::internal("a leaf is set twice"))?;
                column_writer.write(&leaf).map_err(internal)?;
                let mut chunk = column_writer.close().map_err(internal)?;
                // A file has a page index for every chunk or for none.
                if parquet.offset_index().is_none() {
                    chunk.close_mut().offset_index = None;
                    chunk.close_mut().column_index = None;
                }
                counted[k].bytes += chunk.close().metadata.compressed_size() as u64;
                chunks.insert(leaves[k], chunk);
            }
            let mut row_group = writer
                .next_row_group()
                .map_err(|e| SqeError::internal(e.to_string()))?;
            for (l, chunk_meta) in group.columns().iter().enumerate() {
                match chunks.remove(&l) {
                    Some(chunk) => chunk.append_to_row_group(&mut row_group),
                    None => row_group.append_column(
                        &window,
                        ColumnCloseResult {
                            bytes_written: chunk_meta.compressed_size() as u64,
                            rows_written: rows as u64,
                            metadata: chunk_meta.clone(),
                            bloom_filter: None,
                            column_index: parquet
                                .column_index()
                                .and_then(|i| i.get(g)?.get(l).cloned()),
                            offset_index: parquet
                                .offset_index()
                                .and_then(|i| i.get(g)?.get(l).cloned()),
                        },
                    ),
                }
                .map_err(|e| SqeError::internal(format!("{old_path}: {e}")))?;
            }
            row_group
                .close()
                .map_err(|e| SqeError::internal(e.to_string()))?;
            writer
                .flush()
                .map_err(|e| SqeError::internal(e.to_string()))?;
            let done = std::mem::take(writer.inner_mut());
            out.write(done.into()).await.map_err(from_iceberg)?;
            first_row += rows;
        }
        let written = writer
            .finish()
            .map_err(|e| SqeError::internal(e.to_string()))?;
        writer
            .flush()
            .map_err(|e| SqeError::internal(e.to_string()))?;
        let size_written = writer.bytes_written() as u64;
        let rest = std::mem::take(writer.inner_mut());
        out.write(rest.into()).await.map_err(from_iceberg)?;
        out.close().await.map_err(from_iceberg)?;
        if next
            .iter()
            .zip(&self.changed)
            .any(|(n, (_, changed))| *n != changed.len())
        {
            return Err(SqeError::internal(format!(
                "changed rows of {old_path} were not in its row groups"
            )));
        }
        let file = self.data_file(path, &written, size_written, columns, counted)?;
        Ok(Some((old_path, file)))
    }

    /// The file's leaf column of each column set, when the file can be written so: it holds the
    /// table's current columns by field id, in order; each set column is one primitive leaf stored
    /// as the table's type would be (the same physical type and length), and takes a NULL only if
    /// the file's column may hold one; its chunks' offsets are sound, and it has a page index for
    /// every chunk or for none.
    fn leaves(
        &self,
        parquet: &ParquetMetaData,
        file_schema: &SchemaRef,
        columns: &[Column],
        table: &SchemaDescriptor,
    ) -> Option<Vec<usize>> {
        let descriptor = parquet.file_metadata().schema_descr();
        let roots = descriptor.root_schema().get_fields();
        let table_roots = table.root_schema().get_fields();
        if roots.len() != table_roots.len()
            || file_schema.fields().len() != roots.len()
            || parquet.file_metadata().num_rows() < 0
        {
            return None;
        }
        let id = |t: &parquet::schema::types::Type| {
            let info = t.get_basic_info();
            info.has_id().then(|| info.id())
        };
        if roots
            .iter()
            .zip(table_roots)
            .any(|(root, own)| id(root).is_none() || id(root) != id(own))
        {
            return None;
        }
        let mut leaves = Vec::with_capacity(self.changed.len());
        for (c, changed) in &self.changed {
            let column = &columns[*c];
            let field = file_schema.field(column.index);
            let takes_null = || {
                changed
                    .iter()
                    .any(|(_, batch, row)| column.arrays[*batch as usize].is_null(*row as usize))
            };
            if !roots[column.index].is_primitive()
                || field.data_type() != &column.data_type
                || (!field.is_nullable() && takes_null())
            {
                return None;
            }
            let leaf_of = |d: &SchemaDescriptor| {
                (0..d.num_columns()).find(|l| d.get_column_root_idx(*l) == column.index)
            };
            let (leaf, own) = (leaf_of(descriptor)?, leaf_of(table)?);
            let (stored, wanted) = (descriptor.column(leaf), table.column(own));
            if stored.physical_type() != wanted.physical_type()
                || stored.type_length() != wanted.type_length()
            {
                return None;
            }
            leaves.push(leaf);
        }
        let offsets = parquet.offset_index();
        for (g, group) in parquet.row_groups().iter().enumerate() {
            for (l, chunk) in group.columns().iter().enumerate() {
                let data = chunk.data_page_offset();
                let sound = data >= 4
                    && chunk
                        .dictionary_page_offset()
                        .is_none_or(|d| d >= 4 && d < data);
                let indexed = offsets.is_none_or(|o| {
                    o.get(g)
                        .and_then(|g| g.get(l))
                        .is_some_and(|i| !i.page_locations().is_empty())
                });
                if !sound || !indexed {
                    return None;
                }
            }
        }
        Some(leaves)
    }

    /// The new file's entry: the old file's, with its new path, size and row groups, and the set
    /// columns' sizes, counts and bounds counted anew.
    fn data_file(
        &self,
        path: String,
        written: &ParquetMetaData,
        size: u64,
        columns: &[Column],
        counted: Vec<Counted>,
    ) -> SqeResult<DataFile> {
        let old = &self.file;
        let mut column_sizes = old.column_sizes().clone();
        let mut null_counts = old.null_value_counts().clone();
        let mut nan_counts = old.nan_value_counts().clone();
        let mut lower = old.lower_bounds().clone();
        let mut upper = old.upper_bounds().clone();
        for ((c, _), counted) in self.changed.iter().zip(counted) {
            let column = &columns[*c];
            let id = column.field_id;
            column_sizes.insert(id, counted.bytes);
            null_counts.insert(id, counted.nulls);
            nan_counts.remove(&id);
            if let Some(nans) = counted.nans {
                nan_counts.insert(id, nans);
            }
            let (low, high) = counted.bounds(&column.ty)?;
            match low {
                Some(low) => lower.insert(id, low),
                None => lower.remove(&id),
            };
            match high {
                Some(high) => upper.insert(id, high),
                None => upper.remove(&id),
            };
        }
        let mut builder = DataFileBuilder::default();
        builder
            .content(DataContentType::Data)
            .file_path(path)
            .file_format(DataFileFormat::Parquet)
            .partition(old.partition().clone())
            .partition_spec_id(self.spec_id)
            .record_count(written.file_metadata().num_rows() as u64)
            .file_size_in_bytes(size)
            .column_sizes(column_sizes)
            .value_counts(old.value_counts().clone())
            .null_value_counts(null_counts)
            .nan_value_counts(nan_counts)
            .lower_bounds(lower)
            .upper_bounds(upper)
            .split_offsets(Some(
                written
                    .row_groups()
                    .iter()
                    .filter_map(|g| g.file_offset())
                    .collect(),
            ));
        builder
            .build()
            .map_err(|e| SqeError::internal(e.to_string()))
    }
}

fn internal(e: impl std::fmt::Display) -> SqeError {
    SqeError::internal(e.to_string())
}

/// The bytes a row group's column chunks take in the file.
fn group_range(group: &parquet::file::metadata::RowGroupMetaData) -> Range<u64> {
    let starts = group.columns().iter().map(|c| c.byte_range().0);
    let ends = group
        .columns()
        .iter()
        .map(|c| c.byte_range().0 + c.byte_range().1);
    starts.min().unwrap_or(0)..ends.max().unwrap_or(0)
}

/// One row group's bytes of a file, read as the file (offsets are the file's).
#[derive(Clone)]
struct Window {
    start: u64,
    bytes: Bytes,
    len: u64,
}

impl Window {
    fn slice(&self, start: u64, length: Option<usize>) -> parquet::errors::Result<Bytes> {
        let end = length.map_or(self.start + self.bytes.len() as u64, |l| start + l as u64);
        if start < self.start || end > self.start + self.bytes.len() as u64 || start > end {
            return Err(parquet::errors::ParquetError::General(format!(
                "bytes {start}..{end} are outside the row group read ({}..{})",
                self.start,
                self.start + self.bytes.len() as u64
            )));
        }
        let from = (start - self.start) as usize;
        let to = (end - self.start) as usize;
        Ok(self.bytes.slice(from..to))
    }
}

impl Length for Window {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for Window {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(self.slice(start, None)?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.slice(start, Some(length))
    }
}

/// What a set column's metrics count over its new values.
struct Counted {
    bytes: u64,
    nulls: u64,
    /// Floating-point columns only.
    nans: Option<u64>,
    min: MinAccumulator,
    max: MaxAccumulator,
}

impl Counted {
    fn new(data_type: &DataType) -> SqeResult<Self> {
        let err = |e: datafusion::error::DataFusionError| SqeError::internal(e.to_string());
        Ok(Self {
            bytes: 0,
            nulls: 0,
            nans: matches!(data_type, DataType::Float32 | DataType::Float64).then_some(0),
            min: MinAccumulator::try_new(data_type).map_err(err)?,
            max: MaxAccumulator::try_new(data_type).map_err(err)?,
        })
    }

    fn count(&mut self, values: &ArrayRef) -> SqeResult<()> {
        self.nulls += values.null_count() as u64;
        if let Some(nans) = &mut self.nans {
            use datafusion::arrow::array::AsArray;
            use datafusion::arrow::datatypes::{Float32Type, Float64Type};
            *nans += match values.data_type() {
                DataType::Float32 => values
                    .as_primitive::<Float32Type>()
                    .iter()
                    .filter(|v| v.is_some_and(f32::is_nan))
                    .count(),
                _ => values
                    .as_primitive::<Float64Type>()
                    .iter()
                    .filter(|v| v.is_some_and(f64::is_nan))
                    .count(),
            } as u64;
            // Bounds of floating-point columns are left out (NaN has no place in them).
            return Ok(());
        }
        let err = |e: datafusion::error::DataFusionError| SqeError::internal(e.to_string());
        self.min
            .update_batch(std::slice::from_ref(values))
            .map_err(err)?;
        self.max
            .update_batch(std::slice::from_ref(values))
            .map_err(err)?;
        Ok(())
    }

    /// The lower and upper bound, where the column's type has them.
    fn bounds(mut self, ty: &PrimitiveType) -> SqeResult<(Option<Datum>, Option<Datum>)> {
        if self.nans.is_some() {
            return Ok((None, None));
        }
        let err = |e: datafusion::error::DataFusionError| SqeError::internal(e.to_string());
        let min = self.min.evaluate().map_err(err)?;
        let max = self.max.evaluate().map_err(err)?;
        Ok((bound(&min, ty, false), bound(&max, ty, true)))
    }
}

/// How many characters of a string bound are kept (Iceberg's default metrics mode,
/// `truncate(16)`).
const STRING_BOUND_CHARS: usize = 16;

/// `value` as a bound of a column of type `ty`; `upper` for an upper bound. A longer string is
/// cut for a lower bound and left out for an upper one.
fn bound(value: &ScalarValue, ty: &PrimitiveType, upper: bool) -> Option<Datum> {
    if value.is_null() {
        return None;
    }
    match (ty, value) {
        (PrimitiveType::Boolean, ScalarValue::Boolean(Some(b))) => Some(Datum::bool(*b)),
        (PrimitiveType::Int, ScalarValue::Int32(Some(v))) => Some(Datum::int(*v)),
        (PrimitiveType::Long, ScalarValue::Int64(Some(v))) => Some(Datum::long(*v)),
        (PrimitiveType::Date, ScalarValue::Date32(Some(v))) => Some(Datum::date(*v)),
        (PrimitiveType::Decimal { .. }, ScalarValue::Decimal128(Some(v), _, _)) => {
            Datum::try_from_bytes(&v.to_be_bytes(), ty.clone()).ok()
        }
        (PrimitiveType::Timestamp, ScalarValue::TimestampMicrosecond(Some(v), None)) => {
            Some(Datum::timestamp_micros(*v))
        }
        (PrimitiveType::Timestamptz, ScalarValue::TimestampMicrosecond(Some(v), Some(_))) => {
            Some(Datum::timestamptz_micros(*v))
        }
        (PrimitiveType::TimestampNs, ScalarValue::TimestampNanosecond(Some(v), None)) => {
            Some(Datum::timestamp_nanos(*v))
        }
        (PrimitiveType::TimestamptzNs, ScalarValue::TimestampNanosecond(Some(v), Some(_))) => {
            Some(Datum::timestamptz_nanos(*v))
        }
        (
            PrimitiveType::String,
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
        ) => match s.chars().count() <= STRING_BOUND_CHARS {
            true => Some(Datum::string(s)),
            false if upper => None,
            false => Some(Datum::string(
                s.chars().take(STRING_BOUND_CHARS).collect::<String>(),
            )),
        },
        _ => None,
    }
}

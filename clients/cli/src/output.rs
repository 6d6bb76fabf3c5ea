//! Printing results: an aligned table for people; CSV, TSV and JSON lines for programs.

use std::io::Write;

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray, make_array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use arrow::util::pretty::{pretty_format_batches_with_options, pretty_format_batches_with_schema};

use crate::args::Format;

/// Writes result batches as they arrive (the table format waits for all rows to align them).
pub struct Printer {
    format: Format,
    schema: SchemaRef,
    buffered: Vec<RecordBatch>,
    header_written: bool,
    rows: usize,
}

impl Printer {
    pub fn new(format: Format, schema: SchemaRef) -> Self {
        Self {
            format,
            schema,
            buffered: Vec::new(),
            header_written: false,
            rows: 0,
        }
    }

    pub fn push(&mut self, out: &mut impl Write, batch: RecordBatch) -> Result<(), String> {
        self.rows += batch.num_rows();
        let batch = shown(batch, matches!(self.format, Format::Csv | Format::Tsv))
            .map_err(|e| e.to_string())?;
        match self.format {
            Format::Table => {
                self.buffered.push(batch);
                Ok(())
            }
            Format::Csv | Format::Tsv => {
                let delimiter = if self.format == Format::Csv {
                    b','
                } else {
                    b'\t'
                };
                let mut writer = arrow::csv::WriterBuilder::new()
                    .with_header(!self.header_written)
                    .with_delimiter(delimiter)
                    .build(&mut *out);
                self.header_written = true;
                writer.write(&batch).map_err(|e| e.to_string())
            }
            Format::Json => {
                let mut writer = arrow::json::LineDelimitedWriter::new(&mut *out);
                writer.write(&batch).map_err(|e| e.to_string())?;
                writer.finish().map_err(|e| e.to_string())
            }
        }
    }

    /// Finishes the result; returns the number of rows printed.
    pub fn finish(mut self, out: &mut impl Write) -> Result<usize, String> {
        match self.format {
            Format::Table => {
                let table = if self.buffered.iter().any(|b| b.num_rows() > 0) {
                    let options = FormatOptions::default().with_null("NULL");
                    pretty_format_batches_with_options(&self.buffered, &options)
                        .map(|t| t.to_string())
                } else {
                    pretty_format_batches_with_schema(self.schema.clone(), &[])
                        .map(|t| t.to_string())
                }
                .map_err(|e| e.to_string())?;
                writeln!(out, "{table}").map_err(|e| e.to_string())?;
                let n = self.rows;
                writeln!(out, "{n} row{}", if n == 1 { "" } else { "s" })
                    .map_err(|e| e.to_string())?;
                self.buffered.clear();
            }
            Format::Csv | Format::Tsv if !self.header_written => {
                // No rows: still print the header line.
                let names: Vec<&str> = self
                    .schema
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect();
                let sep = if self.format == Format::Csv {
                    ","
                } else {
                    "\t"
                };
                writeln!(out, "{}", names.join(sep)).map_err(|e| e.to_string())?;
            }
            _ => {}
        }
        Ok(self.rows)
    }
}

/// `batch` with the columns a format cannot show as they are turned into text: a timestamp with a
/// time zone per value (SQE's struct of instant and zone: each value shown as a timestamp in its
/// zone), and for CSV and TSV (`nested`) any struct, list or map (as the table shows it).
fn shown(batch: RecordBatch, nested: bool) -> Result<RecordBatch, arrow::error::ArrowError> {
    let change = |t: &DataType| sqe_sessions::zoned_unit(t).is_some() || (nested && t.is_nested());
    if !batch
        .schema()
        .fields()
        .iter()
        .any(|f| change(f.data_type()))
    {
        return Ok(batch);
    }
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if !change(field.data_type()) {
            fields.push(field.as_ref().clone());
            columns.push(Arc::clone(column));
            continue;
        }
        fields.push(Field::new(field.name(), DataType::Utf8, true));
        columns.push(text(column)?);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

/// Each value of `column` as the table shows it; a timestamp with a time zone per value as a
/// timestamp in its zone.
fn text(column: &ArrayRef) -> Result<ArrayRef, arrow::error::ArrowError> {
    let options = FormatOptions::default();
    let values: Vec<Option<String>> = match sqe_sessions::zoned_unit(column.data_type()) {
        Some(unit) => {
            let s = column.as_struct();
            let (instants, zones) = (s.column(0), s.column(1).as_string::<i32>());
            (0..column.len())
                .map(|i| {
                    if column.is_null(i) || instants.is_null(i) || zones.is_null(i) {
                        return Ok(None);
                    }
                    let t = DataType::Timestamp(unit, Some(zones.value(i).into()));
                    let one = make_array(
                        instants
                            .slice(i, 1)
                            .to_data()
                            .into_builder()
                            .data_type(t)
                            .build()?,
                    );
                    Ok(Some(
                        ArrayFormatter::try_new(one.as_ref(), &options)?
                            .value(0)
                            .to_string(),
                    ))
                })
                .collect::<Result<_, arrow::error::ArrowError>>()?
        }
        None => {
            let f = ArrayFormatter::try_new(column.as_ref(), &options)?;
            (0..column.len())
                .map(|i| (!column.is_null(i)).then(|| f.value(i).to_string()))
                .collect()
        }
    };
    Ok(Arc::new(StringArray::from(values)))
}

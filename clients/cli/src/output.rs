//! Printing results: an aligned table for people; CSV, TSV and JSON lines for programs.

use std::io::Write;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::util::display::FormatOptions;
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

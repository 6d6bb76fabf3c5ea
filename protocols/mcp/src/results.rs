//! A statement's rows as an agent reads them: at most so many rows and bytes (the rest of the
//! stream is dropped, which stops the query), as a text table and as JSON objects, with a notice
//! when anything was left out.

use arrow::array::{Array as _, RecordBatch};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use futures::StreamExt;
use serde_json::{Value, json};
use sqe_sessions::{QueryResult, SqeResult};

/// How much of a result an answer holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub rows: usize,
    pub bytes: usize,
}

/// The rows kept of a result. Structured, they are arrays of values in the order of `columns`
/// (a name may repeat: `SELECT a.id, b.id`).
pub(crate) struct Rows {
    columns: Vec<(String, String)>,
    /// Each row's values, in the columns' order.
    rows: Vec<Vec<Value>>,
    batches: Vec<RecordBatch>,
    truncated: Option<String>,
    update_count: Option<u64>,
    /// The longest text (the byte bound).
    text_bound: usize,
}

/// Reads `result` up to `bounds`, never holding more than one batch beyond what it keeps.
pub(crate) async fn collect(result: QueryResult, bounds: Bounds) -> SqeResult<Rows> {
    let columns = result
        .schema
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().to_string()))
        .collect();
    let mut out = Rows {
        columns,
        rows: Vec::new(),
        batches: Vec::new(),
        truncated: None,
        update_count: result.update_count,
        text_bound: bounds.bytes,
    };
    let mut bytes = 0usize;
    let mut stream = result.batches;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        if batch.num_rows() == 0 {
            continue;
        }
        let room = bounds.rows - out.rows.len();
        if room == 0 {
            out.truncated = Some(rows_notice(bounds.rows));
            break;
        }
        let cut = batch.num_rows() > room;
        let batch = batch.slice(0, batch.num_rows().min(room));
        let mut kept = 0;
        for row in json_rows(&batch) {
            let size = Value::Array(row.clone()).to_string().len();
            if bytes + size > bounds.bytes {
                out.truncated = Some(format!(
                    "the result was cut at {} rows, {} bytes of JSON (the server's bound): it has more",
                    out.rows.len(),
                    bounds.bytes
                ));
                break;
            }
            bytes += size;
            out.rows.push(row);
            kept += 1;
        }
        out.batches.push(batch.slice(0, kept));
        if cut && out.truncated.is_none() {
            out.truncated = Some(rows_notice(bounds.rows));
        }
        if out.truncated.is_some() {
            break;
        }
    }
    Ok(out)
}

fn rows_notice(rows: usize) -> String {
    format!("the result was cut at {rows} rows (the server's bound): it has more")
}

/// Each row of a batch as a JSON array of its values: numbers and booleans as JSON's, everything
/// else as its text.
fn json_rows(batch: &RecordBatch) -> Vec<Vec<Value>> {
    let schema = batch.schema();
    let options = FormatOptions::default().with_null("NULL");
    let formatters: Vec<Option<ArrayFormatter<'_>>> = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).ok())
        .collect();
    (0..batch.num_rows())
        .map(|r| {
            let mut row = Vec::with_capacity(schema.fields().len());
            for (i, field) in schema.fields().iter().enumerate() {
                let column = batch.column(i);
                let value = if column.is_null(r) {
                    Value::Null
                } else {
                    let text = formatters[i]
                        .as_ref()
                        .map(|f| f.value(r).to_string())
                        .unwrap_or_default();
                    scalar(field.data_type(), text)
                };
                row.push(value);
            }
            row
        })
        .collect()
}

/// A value's text as JSON: integers, floats and booleans as JSON values, the rest as strings.
fn scalar(data_type: &arrow::datatypes::DataType, text: String) -> Value {
    use arrow::datatypes::DataType as D;
    match data_type {
        D::Boolean => text
            .parse::<bool>()
            .map(Value::Bool)
            .unwrap_or(Value::String(text)),
        D::Int8 | D::Int16 | D::Int32 | D::Int64 => text
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or(Value::String(text)),
        D::UInt8 | D::UInt16 | D::UInt32 | D::UInt64 => text
            .parse::<u64>()
            .map(Value::from)
            .unwrap_or(Value::String(text)),
        D::Float16 | D::Float32 | D::Float64 => match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Value::from(f),
            _ => Value::String(text),
        },
        _ => Value::String(text),
    }
}

impl Rows {
    /// The values of one column, as text (NULL for nulls).
    pub(crate) fn column_text(&self, name: &str) -> Vec<String> {
        self.rows
            .iter()
            .map(|r| match self.value(r, name) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => "NULL".to_string(),
                Some(other) => other.to_string(),
            })
            .collect()
    }

    /// A row's value of the column named `name`.
    pub(crate) fn value<'a>(&self, row: &'a [Value], name: &str) -> Option<&'a Value> {
        let i = self.columns.iter().position(|(n, _)| n == name)?;
        row.get(i)
    }

    pub(crate) fn rows(&self) -> &[Vec<Value>] {
        &self.rows
    }

    /// A row as an object of its columns (the first of a repeated name).
    pub(crate) fn object(&self, row: &[Value]) -> Value {
        let mut object = serde_json::Map::new();
        for ((name, _), value) in self.columns.iter().zip(row) {
            if !object.contains_key(name) {
                object.insert(name.clone(), value.clone());
            }
        }
        Value::Object(object)
    }

    /// The answer's structured form: columns, rows, and whether it was cut.
    pub(crate) fn structured(&self) -> Value {
        let mut value = json!({
            "columns": self.columns.iter().map(|(n, t)| json!({"name": n, "type": t})).collect::<Vec<_>>(),
            "rows": self.rows,
            "row_count": self.rows.len(),
            "truncated": self.truncated.is_some(),
        });
        if let Some(notice) = &self.truncated {
            value["notice"] = json!(notice);
        }
        if let Some(count) = self.update_count {
            value["update_count"] = json!(count);
        }
        value
    }

    /// The answer as text: a table of the rows, then the notice.
    pub(crate) fn text(&self) -> String {
        let mut text = if let Some(count) = self.update_count {
            format!("{count} row{} written", if count == 1 { "" } else { "s" })
        } else if self.columns.is_empty() {
            "OK".to_string()
        } else {
            match arrow::util::pretty::pretty_format_batches(&self.batches) {
                Ok(table) if !self.rows.is_empty() => table.to_string(),
                _ => format!(
                    "no rows (columns: {})",
                    self.columns
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        };
        let count = self.rows.len();
        if self.update_count.is_none() && !self.columns.is_empty() {
            text.push_str(&format!(
                "\n{count} row{}",
                if count == 1 { "" } else { "s" }
            ));
        }
        if text.len() > self.text_bound {
            let mut end = self.text_bound;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push_str("\n… (the text is cut here; the structured content holds every row)");
        }
        if let Some(notice) = &self.truncated {
            text.push_str(&format!("\nNOTICE: {notice}"));
        }
        text
    }
}

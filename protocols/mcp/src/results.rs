//! A statement's rows as an agent reads them: at most so many rows and bytes (the rest of the
//! stream is dropped, which stops the query), as a text table and as JSON values, with a notice
//! when anything was left out. Nothing here grows past the bounds: each value is formatted into a
//! budget, a row is measured before it is kept, and the text is drawn from the kept rows with
//! every cell cut short.

use std::fmt::Write as _;

use arrow::array::{Array as _, RecordBatch};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use futures::StreamExt;
use serde_json::{Value, json};
use sqe_sessions::{QueryResult, SqeError, SqeResult};

/// How much of a result an answer holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub rows: usize,
    pub bytes: usize,
}

/// The widest cell and column name the text shows, in characters.
const CELL_WIDTH: usize = 80;

/// The rows kept of a result. Structured, they are arrays of values in the order of `columns`
/// (a name may repeat: `SELECT a.id, b.id`).
pub(crate) struct Rows {
    columns: Vec<(String, String)>,
    /// Each row's values, in the columns' order.
    rows: Vec<Vec<Value>>,
    truncated: Option<String>,
    update_count: Option<u64>,
    /// The longest text (the byte bound).
    text_bound: usize,
}

/// Reads `result` up to `bounds`, holding at most one batch of the engine's beyond what it keeps.
pub(crate) async fn collect(result: QueryResult, bounds: Bounds) -> SqeResult<Rows> {
    let columns: Vec<(String, String)> = result
        .schema
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().to_string()))
        .collect();
    let described: usize = columns.iter().map(|(n, t)| n.len() + t.len() + 24).sum();
    if described > bounds.bytes {
        return Err(SqeError::invalid(format!(
            "the result's {} column names and types alone take more than {} bytes: select fewer or shorter columns",
            columns.len(),
            bounds.bytes
        )));
    }
    let mut out = Rows {
        columns,
        rows: Vec::new(),
        truncated: None,
        update_count: result.update_count,
        text_bound: bounds.bytes,
    };
    let mut bytes = 0usize;
    let mut stream = result.batches;
    'batches: while let Some(batch) = stream.next().await {
        let batch = batch?;
        for r in 0..batch.num_rows() {
            if out.rows.len() == bounds.rows {
                out.truncated = Some(format!(
                    "the result was cut at {} rows (the server's bound): it has more",
                    bounds.rows
                ));
                break 'batches;
            }
            let row = json_row(&batch, r, bounds.bytes - bytes)
                .map(|row| (Value::Array(row.clone()).to_string().len(), row))
                .filter(|(size, _)| bytes + size <= bounds.bytes);
            let Some((size, row)) = row else {
                out.truncated = Some(format!(
                    "the result was cut at {} rows, {} bytes of JSON (the server's bound): it has more",
                    out.rows.len(),
                    bounds.bytes
                ));
                break 'batches;
            };
            bytes += size;
            out.rows.push(row);
        }
    }
    Ok(out)
}

/// Text that refuses to grow past its budget.
struct Budget {
    text: String,
    left: usize,
}

impl std::fmt::Write for Budget {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if s.len() > self.left {
            return Err(std::fmt::Error);
        }
        self.left -= s.len();
        self.text.push_str(s);
        Ok(())
    }
}

/// Row `r` of a batch as JSON values (numbers and booleans as JSON's, everything else as its
/// text); None when its values alone take more than `budget` bytes.
fn json_row(batch: &RecordBatch, r: usize, budget: usize) -> Option<Vec<Value>> {
    let options = FormatOptions::default().with_null("NULL");
    let mut left = budget;
    let mut row = Vec::with_capacity(batch.num_columns());
    for (column, field) in batch.columns().iter().zip(batch.schema().fields()) {
        if column.is_null(r) {
            row.push(Value::Null);
            continue;
        }
        let mut text = Budget {
            text: String::new(),
            left,
        };
        match ArrayFormatter::try_new(column.as_ref(), &options) {
            Ok(formatter) => write!(text, "{}", formatter.value(r)).ok()?,
            Err(_) => write!(text, "<{}>", field.data_type()).ok()?,
        }
        left = text.left;
        row.push(scalar(field.data_type(), text.text));
    }
    Some(row)
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

/// A cell as the text table shows it: on one line, control characters escaped, at most
/// [`CELL_WIDTH`] characters.
fn cell(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == CELL_WIDTH {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "NULL".to_string(),
        other => other.to_string(),
    }
}

impl Rows {
    /// The values of one column, as text (NULL for nulls).
    pub(crate) fn column_text(&self, name: &str) -> Vec<String> {
        self.rows
            .iter()
            .map(|r| {
                self.value(r, name)
                    .map(text_of)
                    .unwrap_or_else(|| "NULL".into())
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

    /// Each row as its values one after another on lines of their own (EXPLAIN's plans, whose
    /// text spans lines), cut at the byte bound.
    pub(crate) fn lines(&self) -> String {
        let mut text = Budget {
            text: String::new(),
            left: self.text_bound,
        };
        let written = self.rows.iter().try_for_each(|row| {
            row.iter()
                .try_for_each(|v| writeln!(text, "{}", text_of(v).trim_end()))
        });
        let mut text = text.text;
        if written.is_err() {
            text.push_str("… (the text is cut here)\n");
        }
        text
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

    /// The answer as text: a table of the rows (cells cut at [`CELL_WIDTH`] characters, the
    /// whole at the byte bound), then the row count and the notice.
    pub(crate) fn text(&self) -> String {
        let count = self.rows.len();
        let mut text = if let Some(written) = self.update_count {
            format!(
                "{written} row{} written",
                if written == 1 { "" } else { "s" }
            )
        } else if self.columns.is_empty() {
            "OK".to_string()
        } else {
            let header: Vec<String> = self.columns.iter().map(|(n, _)| cell(n)).collect();
            let cells: Vec<Vec<String>> = self
                .rows
                .iter()
                .map(|r| r.iter().map(|v| cell(&text_of(v))).collect())
                .collect();
            let width = |i: usize| {
                cells
                    .iter()
                    .map(|r| r[i].chars().count())
                    .chain([header[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            };
            let widths: Vec<usize> = (0..header.len()).map(width).collect();
            let line = |values: &[String]| {
                let padded: Vec<String> = values
                    .iter()
                    .zip(&widths)
                    .map(|(v, w)| format!("{v}{}", " ".repeat(w - v.chars().count())))
                    .collect();
                format!("| {} |\n", padded.join(" | "))
            };
            let rule = format!(
                "+{}+\n",
                widths
                    .iter()
                    .map(|w| "-".repeat(w + 2))
                    .collect::<Vec<_>>()
                    .join("+")
            );
            let mut table = Budget {
                text: String::new(),
                left: self.text_bound,
            };
            let drawn = table
                .write_str(&rule)
                .and_then(|_| table.write_str(&line(&header)))
                .and_then(|_| table.write_str(&rule))
                .and_then(|_| cells.iter().try_for_each(|r| table.write_str(&line(r))))
                .and_then(|_| table.write_str(&rule));
            let mut text = table.text;
            if drawn.is_err() {
                text.push_str("… (the text is cut here; the structured content holds every row)\n");
            }
            text.push_str(&format!("{count} row{}", if count == 1 { "" } else { "s" }));
            text
        };
        if let Some(notice) = &self.truncated {
            text.push_str(&format!("\nNOTICE: {notice}"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn result(batches: Vec<RecordBatch>, schema: Arc<Schema>) -> QueryResult {
        QueryResult {
            schema,
            batches: futures::stream::iter(batches.into_iter().map(Ok)).boxed(),
            update_count: None,
            session_update: None,
        }
    }

    #[tokio::test]
    async fn answers_stay_within_their_bounds() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        // Lines of a cell would each be padded to the widest: the text escapes them instead.
        let tall = "\n".repeat(65_000) + &"x".repeat(1000);
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3])),
                Arc::new(StringArray::from(vec![
                    Some(tall.as_str()),
                    None,
                    Some("b"),
                ])),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let bounds = Bounds {
            rows: 2,
            bytes: 200_000,
        };
        let rows = collect(result(vec![batch.clone()], schema.clone()), bounds)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rows.rows().len(), 2);
        let text = rows.text();
        assert!(text.len() < 2000, "{}", text.len());
        assert!(text.ends_with(
            "2 rows\nNOTICE: the result was cut at 2 rows (the server's bound): it has more"
        ));
        // A value past the byte bound is never formatted whole.
        let small = Bounds {
            rows: 10,
            bytes: 1000,
        };
        let rows = collect(result(vec![batch], schema.clone()), small)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rows.rows().len(), 0);
        assert_eq!(
            rows.structured()["notice"],
            "the result was cut at 0 rows, 1000 bytes of JSON (the server's bound): it has more"
        );
        // Column names alone past the bound: refused.
        let wide = Arc::new(Schema::new(vec![Field::new(
            "c".repeat(2000),
            DataType::Int64,
            false,
        )]));
        let refused = collect(result(Vec::new(), wide), small).await.err();
        assert_eq!(
            refused.map(|e| e.message().to_string()),
            Some("the result's 1 column names and types alone take more than 1000 bytes: select fewer or shorter columns".into())
        );
    }
}

//! Comparing two engines' answers to one query: row for row when the query orders its rows, as
//! multisets otherwise. Numbers compare within a tolerance (see [`close`]); everything else by text.

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};

/// One value, as both engines' answers are compared.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Number(f64),
    /// A DECIMAL and its scale: an engine following Trino's decimal rules gives a quotient the
    /// scale of its operands (`sum(x) / 7.0` has two digits), where DuckDB gives a double.
    Decimal(f64, i8),
    Text(String),
}

/// `x` rounded half away from zero to `scale` digits after the point.
fn round_to(x: f64, scale: i8) -> f64 {
    let factor = 10f64.powi(i32::from(scale));
    (x * factor).round() / factor
}

/// Numbers agree when they differ by at most 1e-6 plus 1e-9 of their size: exact decimal sums match
/// exactly, and an average one engine computes as a double and the other as a decimal(…, 6) still
/// matches.
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 + 1e-9 * a.abs().max(b.abs())
}

impl Cell {
    fn same(&self, other: &Cell) -> bool {
        match (self, other) {
            (Cell::Number(a), Cell::Number(b)) | (Cell::Decimal(a, _), Cell::Decimal(b, _)) => {
                close(*a, *b)
            }
            // A decimal matches the other engine's number to its own scale.
            (Cell::Decimal(a, scale), Cell::Number(b))
            | (Cell::Number(b), Cell::Decimal(a, scale)) => close(*a, round_to(*b, *scale)),
            (a, b) => a == b,
        }
    }

    fn sort_key(&self) -> (u8, f64, &str) {
        match self {
            Cell::Null => (0, 0.0, ""),
            Cell::Number(n) | Cell::Decimal(n, _) => (1, *n, ""),
            Cell::Text(t) => (2, 0.0, t.as_str()),
        }
    }
}

fn is_number(t: &DataType) -> bool {
    t.is_numeric()
}

/// The rows of `batches` as cells.
pub fn rows(batches: &[RecordBatch]) -> Result<Vec<Vec<Cell>>, String> {
    let mut out = Vec::new();
    let options = FormatOptions::default();
    for batch in batches {
        let mut columns: Vec<Vec<Cell>> = Vec::new();
        for column in batch.columns() {
            columns.push(cells(column, &options)?);
        }
        for r in 0..batch.num_rows() {
            out.push(columns.iter().map(|c| c[r].clone()).collect());
        }
    }
    Ok(out)
}

fn cells(column: &ArrayRef, options: &FormatOptions<'_>) -> Result<Vec<Cell>, String> {
    if is_number(column.data_type()) {
        let scale = match column.data_type() {
            DataType::Decimal128(_, s) | DataType::Decimal256(_, s) => Some(*s),
            _ => None,
        };
        let doubles = cast(column, &DataType::Float64).map_err(|e| e.to_string())?;
        let doubles = doubles
            .as_any()
            .downcast_ref::<datafusion::arrow::array::Float64Array>()
            .ok_or("cast to double")?;
        return Ok((0..doubles.len())
            .map(|i| {
                if doubles.is_null(i) {
                    Cell::Null
                } else if let Some(scale) = scale {
                    Cell::Decimal(doubles.value(i), scale)
                } else {
                    Cell::Number(doubles.value(i))
                }
            })
            .collect());
    }
    let f = ArrayFormatter::try_new(column.as_ref(), options).map_err(|e| e.to_string())?;
    Ok((0..column.len())
        .map(|i| {
            if column.is_null(i) {
                Cell::Null
            } else {
                Cell::Text(f.value(i).to_string())
            }
        })
        .collect())
}

/// Whether the statement's result is ordered: an ORDER BY outside every parenthesis (one inside a
/// subquery or a window's OVER orders nothing the client sees).
pub fn orders_its_rows(sql: &str) -> bool {
    let mut depth = 0usize;
    let mut quoted = false;
    let mut words: Vec<(usize, String)> = Vec::new();
    let mut word = String::new();
    for c in sql.chars().chain([' ']) {
        if quoted {
            quoted = c != '\'';
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            word.push(c.to_ascii_lowercase());
            continue;
        }
        if !word.is_empty() {
            words.push((depth, std::mem::take(&mut word)));
        }
        match c {
            '\'' => quoted = true,
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    words
        .windows(2)
        .any(|w| w[0].0 == 0 && w[1].0 == 0 && w[0].1 == "order" && w[1].1 == "by")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Match,
    Mismatch,
    /// Both answers are empty: nothing was compared.
    Vacuous,
    Error,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Match => "Match",
            Outcome::Mismatch => "Mismatch",
            Outcome::Vacuous => "Vacuous",
            Outcome::Error => "Error",
        }
    }
}

/// Compares `ours` with `theirs`; on a mismatch, says where.
pub fn compare(
    ours: &[Vec<Cell>],
    theirs: &[Vec<Cell>],
    ordered: bool,
) -> (Outcome, Option<String>) {
    if ours.is_empty() && theirs.is_empty() {
        return (Outcome::Vacuous, None);
    }
    if ours.len() != theirs.len() {
        return (
            Outcome::Mismatch,
            Some(format!("{} rows, DuckDB {}", ours.len(), theirs.len())),
        );
    }
    let sorted = |rows: &[Vec<Cell>]| {
        let mut rows = rows.to_vec();
        rows.sort_by(|a, b| {
            a.iter()
                .map(Cell::sort_key)
                .partial_cmp(b.iter().map(Cell::sort_key))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        rows
    };
    let (a, b) = if ordered {
        (ours.to_vec(), theirs.to_vec())
    } else {
        (sorted(ours), sorted(theirs))
    };
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        if x.len() != y.len() || x.iter().zip(y).any(|(p, q)| !p.same(q)) {
            return (
                Outcome::Mismatch,
                Some(format!("row {}: {x:?} vs DuckDB {y:?}", i + 1)),
            );
        }
    }
    (Outcome::Match, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(v: f64) -> Cell {
        Cell::Number(v)
    }

    #[test]
    fn numbers_compare_within_the_tolerance() {
        assert!(close(25.510_230_3, 25.510_230));
        assert!(close(1e10, 1e10 + 5.0));
        assert!(!close(0.05, 0.051));
        assert!(!close(1e10, 1e10 + 50.0));
    }

    #[test]
    fn a_decimal_matches_a_number_to_its_own_scale() {
        // TPC-H q17 and q08: Trino's decimal quotients against DuckDB's doubles.
        assert!(Cell::Decimal(348_406.05, 2).same(&n(348_406.054_285_714_3)));
        assert!(n(0.034_435_890_406_654_8).same(&Cell::Decimal(0.0344, 4)));
        assert!(!Cell::Decimal(348_406.06, 2).same(&n(348_406.054_285_714_3)));
        assert!(!Cell::Decimal(0.0345, 4).same(&n(0.034_435_890_406_654_8)));
        assert!(Cell::Decimal(2.5, 1).same(&Cell::Decimal(2.5, 3)));
    }

    #[test]
    fn only_an_outer_order_by_orders_the_answer() {
        assert!(orders_its_rows("SELECT a FROM t ORDER BY a LIMIT 3"));
        assert!(orders_its_rows(
            "WITH x AS (SELECT 1 AS a) SELECT * FROM x\norder  by a"
        ));
        assert!(!orders_its_rows(
            "SELECT rank() OVER (PARTITION BY a ORDER BY b) FROM t"
        ));
        assert!(!orders_its_rows(
            "SELECT * FROM (SELECT a FROM t ORDER BY a LIMIT 5) s"
        ));
        assert!(!orders_its_rows("SELECT 'order by' AS words"));
    }

    #[test]
    fn order_matters_only_when_the_query_orders() {
        let a = vec![vec![n(1.0)], vec![n(2.0)]];
        let b = vec![vec![n(2.0)], vec![n(1.0)]];
        assert_eq!(compare(&a, &b, false).0, Outcome::Match);
        assert_eq!(compare(&a, &b, true).0, Outcome::Mismatch);
        assert_eq!(compare(&[], &[], true).0, Outcome::Vacuous);
        assert_eq!(
            compare(&a, &b[..1], false),
            (Outcome::Mismatch, Some("2 rows, DuckDB 1".into()))
        );
    }
}

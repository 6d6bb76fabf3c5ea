//! `--writer churned`: the suite's tables as a table looks after a long life of small writes, then
//! maintenance. Each table is created empty and filled by small appends in the order of its first
//! column (as rows arrive over time), 500 appends over the suite, shared by the tables in
//! proportion to their rows. Then come 100 row-level changes, shared in proportion to their rows
//! by the tables that hold a tenth of the rows or more (rounded down), merge-on-read, that leave the rows
//! as they were (an UPDATE that sets a column to itself, or a DELETE of a range of rows and their
//! INSERT again), so that every answer can still be checked against DuckDB's. Last, the maintenance
//! a user would run: `optimize`, `expire_snapshots` and `remove_orphan_files`, with no retention.
//! The queries then run over these tables; with this build as `--baseline` (default writer), the
//! same queries over freshly written tables stand beside them.

use std::path::PathBuf;
use std::time::Instant;

use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use sqe_engine::Engine;
use sqe_sessions::Session;

use crate::collect;
use crate::compare::{self, Cell};

/// Small appends over the whole suite.
const APPENDS: usize = 500;
/// Row-level changes over the whole suite.
const CHANGES: usize = 100;
/// The share of a table's first-column range one change touches.
const CHANGE_WIDTH: i64 = 1000;

/// A table to churn: its name, its Parquet file, its first column and that column's range.
struct Source<'a> {
    table: &'a str,
    path: &'a PathBuf,
    rows: usize,
    column: String,
    low: i64,
    high: i64,
}

impl Source<'_> {
    fn read(&self) -> String {
        format!("read_parquet('{}')", self.path.display())
    }

    /// The rows whose first column is in `[from, to)`, as a condition.
    fn range(&self, from: i64, to: i64) -> String {
        format!("\"{0}\" >= {from} AND \"{0}\" < {to}", self.column)
    }

    /// The `i`th of `n` equal slices of the first column's range, as `[from, to)`.
    fn slice(&self, i: usize, n: usize) -> (i64, i64) {
        let span = i128::from(self.high) - i128::from(self.low) + 1;
        let at = |k: usize| (i128::from(self.low) + span * k as i128 / n as i128) as i64;
        (at(i), at(i + 1))
    }
}

/// Shares of `total` in proportion to `weights`, rounded down, at least one each.
fn shares(weights: &[usize], total: usize) -> Vec<usize> {
    let sum: usize = weights.iter().sum::<usize>().max(1);
    weights.iter().map(|w| (total * w / sum).max(1)).collect()
}

fn integer(cell: Option<&Cell>, what: &str) -> Result<i64, String> {
    match cell {
        Some(Cell::Number(n)) if n.fract() == 0.0 => Ok(*n as i64),
        other => Err(format!("{what}: expected an integer, got {other:?}")),
    }
}

async fn one_row(engine: &Engine, session: &Session, sql: &str) -> Result<Vec<Cell>, String> {
    let rows = compare::rows(&collect(engine, session, sql).await?)?;
    rows.into_iter()
        .next()
        .ok_or_else(|| format!("{sql}: no row"))
}

/// Creates `tables` (name and Parquet file) in the engine's catalog `iceberg.default` as churned
/// tables.
pub async fn load(
    engine: &Engine,
    session: &Session,
    tables: &[(String, &PathBuf)],
) -> Result<(), String> {
    let mut sources = Vec::new();
    for (table, path) in tables {
        let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let column = builder.schema().field(0).name().clone();
        let rows = builder.metadata().file_metadata().num_rows() as usize;
        let read = format!("read_parquet('{}')", path.display());
        let bounds = one_row(
            engine,
            session,
            &format!("SELECT CAST(min(\"{column}\") AS bigint), CAST(max(\"{column}\") AS bigint) FROM {read}"),
        )
        .await
        .map_err(|e| format!("{table}: the first column must be an integer to churn by: {e}"))?;
        sources.push(Source {
            table,
            path,
            rows,
            column,
            low: integer(bounds.first(), table)?,
            high: integer(bounds.get(1), table)?,
        });
    }
    let weights: Vec<usize> = sources.iter().map(|s| s.rows).collect();
    let appends = shares(&weights, APPENDS);
    // Changes go to the tables that hold a tenth of the rows or more.
    let total: usize = weights.iter().sum();
    let big: Vec<usize> = weights
        .iter()
        .map(|&w| if w * 10 >= total { w } else { 0 })
        .collect();
    let changes: Vec<usize> = shares(&big, CHANGES)
        .into_iter()
        .zip(&big)
        .map(|(n, &w)| if w == 0 { 0 } else { n })
        .collect();

    for ((source, &appends), &changes) in sources.iter().zip(&appends).zip(&changes) {
        let start = Instant::now();
        churn(engine, session, source, appends, changes).await?;
        let before = file_counts(engine, session, source.table).await?;
        maintain(engine, session, source.table).await?;
        let after = file_counts(engine, session, source.table).await?;
        let count = |from: String| async move {
            one_row(engine, session, &format!("SELECT count(*) FROM {from}")).await
        };
        let (expected, got) = (
            count(source.read()).await?,
            count(source.table.into()).await?,
        );
        if expected != got {
            return Err(format!(
                "{}: {got:?} rows after churning, {expected:?} in its Parquet file",
                source.table
            ));
        }
        eprintln!(
            "churned {} in {:.1}s: {appends} appends, {changes} changes; data and delete files \
             {} and {} before maintenance, {} and {} after",
            source.table,
            start.elapsed().as_secs_f64(),
            before.0,
            before.1,
            after.0,
            after.1,
        );
    }
    Ok(())
}

/// The table created empty, then `appends` appends in the order of its first column, then
/// `changes` row-level changes that leave its rows as they were.
async fn churn(
    engine: &Engine,
    session: &Session,
    source: &Source<'_>,
    appends: usize,
    changes: usize,
) -> Result<(), String> {
    let run = |sql: String| async move { collect(engine, session, &sql).await.map(|_| ()) };
    let table = source.table;
    run(format!(
        "CREATE TABLE {table} WITH (\"write.parquet.compression-codec\" = 'snappy', \
         \"write.delete.mode\" = 'merge-on-read', \"write.update.mode\" = 'merge-on-read') \
         AS SELECT * FROM {} LIMIT 0",
        source.read()
    ))
    .await?;
    for i in 0..appends {
        let (from, to) = source.slice(i, appends);
        let to = if i + 1 == appends { i64::MAX } else { to };
        run(format!(
            "INSERT INTO {table} SELECT * FROM {} WHERE {}",
            source.read(),
            source.range(from, to)
        ))
        .await?;
    }
    for j in 0..changes {
        // Ranges spread over the table, a thousandth of it each.
        let at = (j as i64 * 7919) % CHANGE_WIDTH;
        let (from, to) = source.slice(at as usize, CHANGE_WIDTH as usize);
        let range = source.range(from, to);
        if j % 2 == 0 {
            let column = &source.column;
            run(format!(
                "UPDATE {table} SET \"{column}\" = \"{column}\" WHERE {range}"
            ))
            .await?;
        } else {
            run(format!("DELETE FROM {table} WHERE {range}")).await?;
            run(format!(
                "INSERT INTO {table} SELECT * FROM {} WHERE {range}",
                source.read()
            ))
            .await?;
        }
    }
    Ok(())
}

/// The maintenance a user would run on a table written like this.
async fn maintain(engine: &Engine, session: &Session, table: &str) -> Result<(), String> {
    for procedure in [
        "optimize",
        "expire_snapshots(retention_threshold => '0s')",
        "remove_orphan_files(retention_threshold => '0s')",
    ] {
        collect(
            engine,
            session,
            &format!("ALTER TABLE {table} EXECUTE {procedure}"),
        )
        .await
        .map_err(|e| format!("{table}: {procedure}: {e}"))?;
    }
    Ok(())
}

/// The table's live data files and delete files.
async fn file_counts(
    engine: &Engine,
    session: &Session,
    table: &str,
) -> Result<(i64, i64), String> {
    let row = one_row(
        engine,
        session,
        &format!(
            "SELECT count(*) FILTER (WHERE content = 0), count(*) FILTER (WHERE content <> 0) \
             FROM \"{table}$files\""
        ),
    )
    .await?;
    Ok((
        integer(row.first(), "data files")?,
        integer(row.get(1), "delete files")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_the_range_once() {
        let path = PathBuf::from("t.parquet");
        let source = Source {
            table: "t",
            path: &path,
            rows: 0,
            column: "k".into(),
            low: 1,
            high: 10,
        };
        let slices: Vec<(i64, i64)> = (0..3).map(|i| source.slice(i, 3)).collect();
        assert_eq!(slices, vec![(1, 4), (4, 7), (7, 11)]);
        assert_eq!(shares(&[600, 150, 0], 100), vec![80, 20, 1]);
    }
}

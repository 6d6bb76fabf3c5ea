//! The `dml` suite: TPC-H's refresh functions (RF1 inserts 0.1% new orders and lines, RF2 deletes
//! them), an UPDATE of 1% of lineitem, a MERGE of 100,000 rows into orders and a DELETE of one
//! whole partition (`queries/dml.sql`), on SQE's Iceberg tables in both write modes
//! (copy-on-write and merge-on-read), beside DuckDB 1.5.5 doing the same to Iceberg tables of a
//! REST catalog (lakana; DuckDB writes them merge-on-read) and to its own native tables (`peer.py
//! dml`). Each step runs once (it changes the tables); every engine's checks must agree with
//! DuckDB's native answers at the end.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;
use sqe_engine::{Engine, EngineConfig};
use sqe_sessions::{Principal, Session};

use crate::compare::{self, Outcome};
use crate::{Args, collect, peer, read_parquet};

const MODES: [&str; 2] = ["copy-on-write", "merge-on-read"];

/// One section of `queries/dml.sql`.
struct Section {
    step: bool,
    name: String,
    statements: Vec<String>,
}

fn sections(parquet: &Path) -> Result<Vec<Section>, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("queries/dml.sql");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .replace("{parquet}", &parquet.display().to_string());
    let mut out: Vec<Section> = Vec::new();
    for line in text.lines() {
        let head = line
            .strip_prefix("-- step ")
            .map(|rest| (true, rest))
            .or_else(|| line.strip_prefix("-- check ").map(|rest| (false, rest)));
        if let Some((step, rest)) = head {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(Section {
                step,
                name,
                statements: Vec::new(),
            });
        } else if !line.trim().is_empty()
            && !line.starts_with("--")
            && let Some(section) = out.last_mut()
        {
            section
                .statements
                .push(line.trim().trim_end_matches(';').to_string());
        }
    }
    Ok(out)
}

/// Runs the suite; returns whether every check agreed with DuckDB's.
pub async fn run(args: &Args, base: &Path) -> Result<bool, String> {
    let tpch = base.join(format!("tpch-sf{}", args.scale));
    let parquet = tpch.join("parquet");
    if !parquet.join("lineitem.parquet").is_file() {
        let out = tpch.display().to_string();
        peer(
            args,
            &["gen", "tpch", "--scale", &args.scale, "--out", &out],
        )?;
    }
    let dir = base.join(format!("dml-sf{}", args.scale));
    let sections = sections(&parquet)?;
    let steps: Vec<&Section> = sections.iter().filter(|s| s.step).collect();
    let checks: Vec<&Section> = sections.iter().filter(|s| !s.step).collect();

    // SQE, each mode on tables of its own.
    let mut sqe: Vec<Vec<f64>> = Vec::new();
    let mut answers: Vec<Vec<Vec<Vec<compare::Cell>>>> = Vec::new();
    for mode in MODES {
        let warehouse = dir.join(mode);
        let _ = std::fs::remove_dir_all(&warehouse);
        std::fs::create_dir_all(&warehouse).map_err(|e| format!("{}: {e}", warehouse.display()))?;
        let engine = Engine::open(EngineConfig {
            catalogs: vec![("iceberg".to_string(), warehouse.clone())],
            ..EngineConfig::default()
        })
        .map_err(|e| e.to_string())?;
        let session = Session::new(Principal::new("bench"), "iceberg", "default");
        let modes = format!(
            "\"write.delete.mode\" = '{mode}', \"write.update.mode\" = '{mode}', \"write.merge.mode\" = '{mode}', \"write.parquet.compression-codec\" = 'snappy'"
        );
        for (table, source, partitioning) in [
            ("orders", "orders", ""),
            ("lineitem", "lineitem", ""),
            (
                "lineitem_p",
                "lineitem",
                "partitioning = ARRAY['l_shipmode'], ",
            ),
        ] {
            let start = Instant::now();
            let sql = format!(
                "CREATE TABLE {table} WITH ({partitioning}{modes}) AS SELECT * FROM read_parquet('{}/{source}.parquet')",
                parquet.display()
            );
            collect(&engine, &session, &sql).await?;
            eprintln!(
                "{mode}: loaded {table} in {:.1}s",
                start.elapsed().as_secs_f64()
            );
        }
        let mut times = Vec::new();
        for step in &steps {
            let start = Instant::now();
            for sql in &step.statements {
                collect(&engine, &session, sql)
                    .await
                    .map_err(|e| format!("{mode} {}: {e}", step.name))?;
            }
            let seconds = start.elapsed().as_secs_f64();
            eprintln!("{mode}: {} {seconds:.3}s", step.name);
            times.push(seconds);
        }
        let mut checked = Vec::new();
        for check in &checks {
            let batches = collect(&engine, &session, &check.statements[0]).await?;
            checked.push(compare::rows(&batches)?);
        }
        sqe.push(times);
        answers.push(checked);
    }

    // DuckDB on its own tables.
    let duck_dir = dir.join("duckdb");
    peer(
        args,
        &[
            "dml",
            "--parquet",
            &parquet.display().to_string(),
            "--out",
            &duck_dir.display().to_string(),
        ],
    )?;
    let read_timings = |name: &str| -> Result<Value, String> {
        std::fs::read_to_string(duck_dir.join(name))
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    };
    let native = read_timings("timings.json")?;
    // DuckDB on Iceberg tables of a REST catalog: a number per step, or why not.
    let iceberg = read_timings("timings-iceberg.json")?;
    if let Some(error) = iceberg.get("error") {
        eprintln!("DuckDB on Iceberg did not run: {error}");
    }
    let seconds = |timings: &Value, step: &str| timings[step].as_f64().unwrap_or(f64::NAN);

    let mut all_match = true;
    let mut report = String::from(
        "| step | SQE copy-on-write (s) | SQE merge-on-read (s) | DuckDB on Iceberg (s) | DuckDB native (s) | CoW / DuckDB Iceberg | MoR / DuckDB Iceberg | MoR / DuckDB native |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (i, step) in steps.iter().enumerate() {
        let (duck, lake) = (seconds(&native, &step.name), seconds(&iceberg, &step.name));
        report.push_str(&format!(
            "| {} | {:.3} | {:.3} | {lake:.3} | {duck:.3} | {:.2}x | {:.2}x | {:.2}x |\n",
            step.name,
            sqe[0][i],
            sqe[1][i],
            sqe[0][i] / lake,
            sqe[1][i] / lake,
            sqe[1][i] / duck,
        ));
    }
    report.push_str(
        "\n| check | copy-on-write | merge-on-read | DuckDB on Iceberg |\n|---|---|---|---|\n",
    );
    for (i, check) in checks.iter().enumerate() {
        let theirs = compare::rows(&read_parquet(
            &duck_dir.join(format!("{}.parquet", check.name)),
        )?)?;
        let mut cells = Vec::new();
        let lake = duck_dir.join(format!("{}-iceberg.parquet", check.name));
        let lake = match lake.is_file() {
            true => Some(compare::rows(&read_parquet(&lake)?)?),
            false => None,
        };
        for answer in answers
            .iter()
            .map(|mode| Some(&mode[i]))
            .chain([lake.as_ref()])
        {
            let Some(answer) = answer else {
                all_match = false;
                cells.push("missing".to_string());
                continue;
            };
            let (outcome, detail) = compare::compare(answer, &theirs, true);
            all_match &= matches!(outcome, Outcome::Match);
            cells.push(match detail {
                Some(d) => format!("{} ({d})", outcome.as_str()),
                None => outcome.as_str().to_string(),
            });
        }
        report.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            check.name, cells[0], cells[1], cells[2]
        ));
    }
    let path: PathBuf = dir.join("report.md");
    std::fs::write(&path, &report).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("{report}");
    println!("report: {}", path.display());
    Ok(all_match)
}

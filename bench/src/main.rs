//! `sqe-bench`: runs a benchmark suite on SQE (embedded, over Iceberg tables) and, with
//! `--compare duckdb`, the same queries on DuckDB 1.5.5 over the same data as Parquet files. It checks
//! every answer against DuckDB's and reports both engines' times side by side.
//!
//! ```text
//! sqe-bench tpch|ssb|tpcds|clickbench|dml --scale 1 --compare duckdb [--runs 3] [--query q01 …] [--dir DIR]
//!           [--baseline OTHER-SQE-BENCH [--baseline-set NAME=VALUE …]] [--writer sqe|pyiceberg|churned]
//!           [--location s3://BUCKET/PREFIX [--object-cache-mb MIB]]
//! ```
//! The data (generated once by DuckDB, see `peer.py`), the SQE warehouse loaded from it with
//! CREATE TABLE AS, and the reports (`report.json`, `report.md`, `report.png`; `report-partial.*`
//! for a run of some queries) live in `DIR/<suite>-sf<scale>/`, by default under
//! `~/.cache/sqe/bench`; with `--writer pyiceberg` (tables written by pyiceberg, as a user's
//! pipeline would write them) in `DIR/pyiceberg/<suite>-sf<scale>/`; with `--writer churned` (small
//! appends and row changes, then maintenance: churn.rs) in `DIR/<suite>-sf<scale>/warehouse-churned`.
//! With `--location`, the tables'
//! files go to an object store (the catalog stays in `DIR/<suite>-sf<scale>/warehouse-s3`), with the
//! settings of the standard `AWS_*` environment; a `--baseline` then runs on the local tables, so
//! its column sets object store against local disk. The exit status is 0 only if every answer
//! matched.

mod churn;
mod compare;
mod dml;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use compare::{Cell, Outcome};
use datafusion::arrow::array::RecordBatch;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use futures::TryStreamExt;
use serde_json::{Value, json};
use sqe_engine::{Engine, EngineConfig};
use sqe_sessions::{Principal, QueryService, Session};

#[derive(Parser, Debug)]
#[command(
    name = "sqe-bench",
    version,
    about = "SQE beside DuckDB: answers checked, times compared"
)]
struct Args {
    /// The suite: tpch, ssb, tpcds or clickbench; or dml (changes to TPC-H's tables, see dml.rs).
    suite: String,
    /// Scale factor (1 is about 1 GB of raw data for TPC-H, SSB and TPC-DS; a million rows of
    /// `hits` for ClickBench).
    #[arg(long, default_value = "1")]
    scale: String,
    /// The peer to check answers against and time beside SQE: duckdb.
    #[arg(long)]
    compare: Option<String>,
    /// Timed runs per query, after one warm-up run; the median is reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Only these queries (e.g. q01); repeatable.
    #[arg(long)]
    query: Vec<String>,
    /// Where data, warehouse and reports go.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The Python with duckdb 1.5.5 and its extension wheels (default: the repository's .venv).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Also write each query's EXPLAIN ANALYZE on SQE to DIR/<suite>-sf<scale>/explain/<query>.txt.
    #[arg(long)]
    explain: bool,
    /// A DataFusion setting for SQE, as `name=value` (e.g. `datafusion.execution.batch_size=16384`);
    /// repeatable, and recorded in the report.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    settings: Vec<String>,
    /// Stops an SQE query after this many seconds (the session's `query_max_run_time`); it is
    /// then reported as an error.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
    /// Another build's sqe-bench (say, one built from an older commit), run on each query right
    /// after this build, over the same warehouse; its times get a column of their own.
    #[arg(long, value_name = "SQE_BENCH")]
    baseline: Option<PathBuf>,
    /// A setting for the baseline's runs only, as `name=value` (repeatable): with this build as
    /// its own baseline, `--baseline-set sqe.optimizer.share_aggregates=false` sets each query
    /// with and without one of SQE's rules side by side.
    #[arg(
        long = "baseline-set",
        value_name = "NAME=VALUE",
        requires = "baseline"
    )]
    baseline_settings: Vec<String>,
    /// Who writes the Iceberg tables: `sqe` (CREATE TABLE AS, snappy, 131,072-row groups) or
    /// `pyiceberg` (pyiceberg's own defaults: zstd, row groups of up to a million rows), or
    /// `churned` (SQE, by 500 small appends and 100 row changes, then optimize and expiry).
    #[arg(long, default_value = "sqe", value_parser = ["sqe", "pyiceberg", "churned"])]
    writer: String,
    /// Keep the tables' files under this object store URL (`s3://bucket/prefix`), each table in a
    /// folder of its own; the S3 settings come from the `AWS_*` environment (`AWS_ENDPOINT_URL`
    /// for a store of one's own).
    #[arg(long, value_name = "URL")]
    location: Option<String>,
    /// MiB of object store reads SQE keeps for later scans (`[engine] object_cache_mb`); 0 makes
    /// every read of a `--location` table a cold one. The engine's default if unset.
    #[arg(long, value_name = "MIB")]
    object_cache_mb: Option<usize>,
    /// A directory where SQE's object cache also keeps what it reads (`[engine]
    /// object_cache_dir`): a later run reads it from there, not from the store
    #[arg(long, value_name = "DIR")]
    object_cache_dir: Option<PathBuf>,
}

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sqe-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("sqe-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn python(args: &Args) -> PathBuf {
    if let Some(p) = &args.python {
        return p.clone();
    }
    let venv = repository().join(".venv/bin/python");
    if venv.is_file() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

fn peer(args: &Args, peer_args: &[&str]) -> Result<(), String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peer.py");
    let status = Command::new(python(args))
        .arg(&script)
        .args(peer_args)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("peer.py {} failed ({status})", peer_args.join(" ")))
    }
}

/// The time `bin` (another build of sqe-bench) reports for one query over the same data, or its
/// error.
fn baseline(bin: &Path, args: &Args, base: &Path, dir: &Path, query: &str) -> Result<f64, String> {
    let runs = args.runs.to_string();
    let mut command = Command::new(bin);
    command
        .arg(&args.suite)
        .args(["--scale", &args.scale, "--runs", &runs, "--query", query])
        .arg("--dir")
        .arg(base)
        .stdout(std::process::Stdio::null());
    if let Some(seconds) = args.timeout {
        command.args(["--timeout", &seconds.to_string()]);
    }
    for setting in &args.baseline_settings {
        command.args(["--set", setting]);
    }
    let status = command
        .status()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let path = dir.join("report-partial.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let report: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    report["queries"]
        .as_array()
        .and_then(|q| q.iter().find(|q| q["query"] == query))
        .and_then(|q| q["sqe_seconds"].as_f64())
        .ok_or_else(|| format!("{} on {query}: no time ({status})", bin.display()))
}

/// Adds the timings and errors peer.py wrote to `path` (one query's) to `into`.
fn merge(into: &mut Value, path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let one: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    for key in ["seconds", "errors"] {
        if let (Some(all), Some(new)) = (into[key].as_object_mut(), one[key].as_object()) {
            all.extend(new.clone());
        }
    }
    into["version"] = one["version"].clone();
    into["threads"] = one["threads"].clone();
    Ok(())
}

struct QueryRun {
    seconds: Option<f64>,
    /// Of `seconds`, the median time from the statement's text to its plan, ready to run: parsing,
    /// planning, optimizing and the scans' file planning.
    planning: Option<f64>,
    rows: Vec<Vec<Cell>>,
    error: Option<String>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn collect(
    engine: &Engine,
    session: &Session,
    sql: &str,
) -> Result<Vec<RecordBatch>, String> {
    timed(engine, session, sql)
        .await
        .map(|(batches, _)| batches)
}

/// A query's rows, and the seconds it took to plan it (until its rows could be asked for).
async fn timed(
    engine: &Engine,
    session: &Session,
    sql: &str,
) -> Result<(Vec<RecordBatch>, f64), String> {
    let start = Instant::now();
    let result = engine
        .execute(session, sql)
        .await
        .map_err(|e| e.to_string())?;
    let planned = start.elapsed().as_secs_f64();
    let batches = result
        .batches
        .try_collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok((batches, planned))
}

async fn run_query(engine: &Engine, session: &Session, sql: &str, runs: usize) -> QueryRun {
    let failed = |e: String| QueryRun {
        seconds: None,
        planning: None,
        rows: Vec::new(),
        error: Some(e),
    };
    if let Err(e) = collect(engine, session, sql).await {
        return failed(e);
    }
    let mut times = Vec::new();
    let mut plans = Vec::new();
    let mut last = Vec::new();
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        match timed(engine, session, sql).await {
            Ok((b, planned)) => {
                last = b;
                plans.push(planned);
            }
            Err(e) => return failed(e),
        }
        times.push(start.elapsed().as_secs_f64());
    }
    match compare::rows(&last) {
        Ok(rows) => QueryRun {
            seconds: Some(median(times)),
            planning: Some(median(plans)),
            rows,
            error: None,
        },
        Err(e) => failed(e),
    }
}

fn read_parquet(path: &Path) -> Result<Vec<RecordBatch>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| format!("{}: {e}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// An error or a difference as a table cell: its first line, at most 200 characters (the JSON
/// report keeps all of it).
fn short(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}

fn machine() -> Value {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let memory_gb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map(|kb| (kb / 1024.0 / 1024.0).round());
    json!({"cores": cores, "memory_gb": memory_gb})
}

async fn run(args: Args) -> Result<bool, String> {
    if args.suite == "dml" {
        let base = args.dir.clone().unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default()
                .join(".cache/sqe/bench")
        });
        return dml::run(&args, &base).await;
    }
    const SUITES: [&str; 4] = ["tpch", "ssb", "tpcds", "clickbench"];
    if !SUITES.contains(&args.suite.as_str()) {
        return Err(format!(
            "unknown suite '{}' (one of {})",
            args.suite,
            SUITES.join(", ")
        ));
    }
    if let Some(peer) = &args.compare
        && peer != "duckdb"
    {
        return Err(format!("--compare {peer}: only duckdb is supported"));
    }
    let mut base = args.dir.clone().unwrap_or_else(|| {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(".cache/sqe/bench")
    });
    // Tables of another writer live apart, with data of their own; a baseline given this `base`
    // finds them loaded.
    if args.writer == "pyiceberg" {
        base = base.join("pyiceberg");
    }
    let dir = base.join(format!("{}-sf{}", args.suite, args.scale));
    let dir_text = dir.display().to_string();
    if args.location.is_some() && args.writer != "sqe" {
        return Err("--location: only SQE writes tables into an object store here".into());
    }
    let location = args.location.as_deref().map(|l| l.trim_end_matches('/'));
    let churned = args.writer == "churned";
    let warehouse = dir.join(match location {
        Some(_) => "warehouse-s3",
        None if churned => "warehouse-churned",
        None => "warehouse",
    });

    // 1. Data, generated once (peer.py writes the queries last).
    let generated = std::fs::read_dir(dir.join("queries")).is_ok_and(|mut d| d.next().is_some());
    if !generated {
        eprintln!(
            "generating {} scale {} into {dir_text}",
            args.suite, args.scale
        );
        peer(
            &args,
            &[
                "gen",
                &args.suite,
                "--scale",
                &args.scale,
                "--out",
                &dir_text,
            ],
        )?;
    }

    // 2. The same data as Iceberg tables in an SQE warehouse.
    let options = args
        .settings
        .iter()
        .map(|s| match s.split_once('=') {
            Some((k, v)) => Ok((k.trim().to_string(), v.trim().to_string())),
            None => Err(format!("--set {s}: expected NAME=VALUE")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let engine = Arc::new(
        Engine::open(EngineConfig {
            catalogs: vec![("iceberg".to_string(), warehouse.clone())],
            options,
            object_cache_bytes: args.object_cache_mb.map(|mb| mb << 20),
            object_cache_dir: args.object_cache_dir.clone(),
            // Churned tables are maintained with no retention: nothing else writes to them.
            maintenance_min_retention: churned.then_some(std::time::Duration::ZERO),
            ..EngineConfig::default()
        })
        .map_err(|e| e.to_string())?,
    );
    let mut session = Session::new(Principal::new("bench"), "iceberg", "default");
    let existing: Vec<String> = compare::rows(&collect(&engine, &session, "SHOW TABLES").await?)?
        .into_iter()
        .filter_map(|r| match r.first() {
            Some(Cell::Text(t)) => Some(t.clone()),
            _ => None,
        })
        .collect();
    let mut parquet: Vec<PathBuf> = std::fs::read_dir(dir.join("parquet"))
        .map_err(|e| format!("{dir_text}/parquet: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    parquet.sort();
    let missing: Vec<(String, &PathBuf)> = parquet
        .iter()
        .map(|p| {
            let stem = p.file_stem().map(|s| s.to_string_lossy().to_string());
            (stem.unwrap_or_default(), p)
        })
        .filter(|(table, _)| !existing.contains(table))
        .collect();
    if args.writer == "pyiceberg" && !missing.is_empty() {
        peer(&args, &["load", "--dir", &dir_text])?;
    }
    let by_sqe = if args.writer == "sqe" {
        &missing[..]
    } else {
        &[]
    };
    if churned {
        churn::load(&engine, &session, &missing).await?;
    }
    for (table, path) in by_sqe {
        let start = Instant::now();
        // Stored with the codec of the peer's Parquet files (dbgen writes SNAPPY), so both engines
        // decompress the same way; SQE's own default is Iceberg's, zstd.
        let placed = match location {
            Some(l) => format!("location = '{l}/{table}', "),
            None => String::new(),
        };
        let sql = format!(
            "CREATE TABLE {table} WITH ({placed}\"write.parquet.compression-codec\" = 'snappy') \
             AS SELECT * FROM read_parquet('{}')",
            path.display()
        );
        collect(&engine, &session, &sql).await?;
        eprintln!("loaded {table} in {:.1}s", start.elapsed().as_secs_f64());
    }

    // 3. SQE's answers and times.
    if let Some(seconds) = args.timeout {
        session
            .properties
            .insert("query_max_run_time".into(), format!("{seconds}s"));
    }
    let mut queries: Vec<(String, String)> = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("queries"))
        .map_err(|e| format!("{dir_text}/queries: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    for f in files {
        let name = f
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        if !args.query.is_empty() && !args.query.contains(&name) {
            continue;
        }
        let sql = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        queries.push((name, sql.trim().trim_end_matches(';').to_string()));
    }
    if args.explain {
        std::fs::create_dir_all(dir.join("explain")).map_err(|e| format!("explain: {e}"))?;
        for (name, sql) in &queries {
            let plan = collect(&engine, &session, &format!("EXPLAIN ANALYZE {sql}")).await;
            let text = match plan.and_then(|b| compare::rows(&b)) {
                Ok(rows) => rows
                    .iter()
                    .map(|r| match r.last() {
                        Some(Cell::Text(t)) => t.clone(),
                        other => format!("{other:?}"),
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
                Err(e) => format!("error: {e}"),
            };
            std::fs::write(dir.join(format!("explain/{name}.txt")), text)
                .map_err(|e| format!("explain/{name}.txt: {e}"))?;
        }
    }
    // 4. Each query on SQE, then on DuckDB over the Parquet files and over SQE's Iceberg tables
    // (through DuckDB's iceberg extension), before the next query: a machine that slows down or
    // speeds up during the run then weighs on both engines alike.
    let mut ours = BTreeMap::new();
    let mut baselines: BTreeMap<String, Result<f64, String>> = BTreeMap::new();
    let mut theirs: Value = json!({"seconds": {}, "errors": {}});
    let mut on_iceberg: Value = json!({"seconds": {}, "errors": {}});
    let runs = args.runs.to_string();
    let catalog = warehouse.join("catalog.db").display().to_string();
    for (name, sql) in &queries {
        let r = run_query(&engine, &session, sql, args.runs).await;
        match (&r.seconds, &r.error) {
            (Some(s), _) => eprintln!("sqe {name}: {s:.3}s"),
            (_, Some(e)) => eprintln!("sqe {name}: error: {e}"),
            _ => {}
        }
        ours.insert(name.clone(), r);
        if let Some(bin) = &args.baseline {
            let b = baseline(bin, &args, &base, &dir, name);
            match &b {
                Ok(s) => eprintln!("baseline {name}: {s:.3}s"),
                Err(e) => eprintln!("baseline {name}: {e}"),
            }
            baselines.insert(name.clone(), b);
        }
        if args.compare.is_some() {
            let one = ["run", "--dir", &dir_text, "--runs", &runs, "--query", name];
            peer(&args, &one)?;
            merge(&mut theirs, &dir.join("duckdb/timings.json"))?;
            peer(&args, &[&one[..], &["--iceberg", &catalog]].concat())?;
            merge(&mut on_iceberg, &dir.join("duckdb-iceberg/timings.json"))?;
        }
    }

    // 5. Answers compared, times side by side.
    let (baseline_head, baseline_rule) = match &args.baseline {
        Some(_) => (" baseline SQE (s) | SQE / baseline |", "---:|---:|"),
        None => ("", ""),
    };
    let mut table = format!(
        "| query | SQE on Iceberg (s) | of which planning (s) |{baseline_head} DuckDB on Parquet (s) | SQE / DuckDB | DuckDB on Iceberg (s) | answer |\n|---|---:|---:|{baseline_rule}---:|---:|---:|---|\n",
    );
    let mut total_baseline = 0.0;
    let mut report = Vec::new();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut total_ours, mut total_theirs, mut total_iceberg) = (0.0, 0.0, 0.0);
    let mut total_planning = 0.0;
    for (name, sql) in &queries {
        let r = &ours[name];
        let their_seconds = theirs["seconds"][name].as_f64();
        let iceberg_seconds = on_iceberg["seconds"][name].as_f64();
        total_iceberg += iceberg_seconds.unwrap_or(0.0);
        let (outcome, detail) = if args.compare.is_none() {
            (None, None)
        } else if let Some(e) = &r.error {
            (Some(Outcome::Error), Some(format!("SQE: {e}")))
        } else if let Some(e) = theirs["errors"][name].as_str() {
            (Some(Outcome::Error), Some(format!("DuckDB: {e}")))
        } else {
            let answer = read_parquet(&dir.join(format!("duckdb/{name}.parquet")))
                .and_then(|b| compare::rows(&b));
            match answer {
                Ok(answer) => {
                    let ordered = compare::orders_its_rows(sql);
                    let (o, d) = compare::compare(&r.rows, &answer, ordered);
                    (Some(o), d)
                }
                Err(e) => (Some(Outcome::Error), Some(e)),
            }
        };
        if let Some(o) = outcome {
            *counts.entry(o.as_str()).or_default() += 1;
        }
        match (r.seconds, their_seconds) {
            (Some(a), Some(b)) => {
                total_ours += a;
                total_theirs += b;
                total_planning += r.planning.unwrap_or(0.0);
            }
            (Some(a), None) if args.compare.is_none() => {
                total_ours += a;
                total_planning += r.planning.unwrap_or(0.0);
            }
            _ => {}
        }
        let fmt = |s: Option<f64>| s.map_or("-".to_string(), |s| format!("{s:.3}"));
        let ratio = match (r.seconds, their_seconds) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "-".into(),
        };
        let answer = match (outcome, &detail) {
            (Some(o), Some(d)) => format!("{}: {}", o.as_str(), short(d).replace('|', "\\|")),
            (Some(o), None) => o.as_str().to_string(),
            (None, _) => "not compared".into(),
        };
        let iceberg_cell = match (iceberg_seconds, on_iceberg["errors"][name].as_str()) {
            (Some(s), _) => format!("{s:.3}"),
            (None, Some(e)) => format!("error: {}", short(e).replace('|', "\\|")),
            (None, None) => "-".into(),
        };
        let baseline_seconds = baselines.get(name).and_then(|b| b.as_ref().ok().copied());
        let baseline_cells = match (&args.baseline, baseline_seconds, r.seconds) {
            (None, _, _) => String::new(),
            (Some(_), Some(b), Some(a)) => {
                total_baseline += b;
                format!(" {b:.3} | {:.2} |", a / b)
            }
            (Some(_), b, _) => format!(" {} | - |", fmt(b)),
        };
        table.push_str(&format!(
            "| {name} | {} | {} |{baseline_cells} {} | {ratio} | {iceberg_cell} | {answer} |\n",
            fmt(r.seconds),
            fmt(r.planning),
            fmt(their_seconds)
        ));
        report.push(json!({
            "query": name,
            "sqe_seconds": r.seconds,
            "sqe_planning_seconds": r.planning,
            "duckdb_seconds": their_seconds,
            "duckdb_iceberg_seconds": iceberg_seconds,
            "baseline_seconds": baseline_seconds,
            "outcome": outcome.map(Outcome::as_str),
            "detail": detail,
        }));
    }
    let ratio = if total_theirs > 0.0 {
        format!("{:.2}", total_ours / total_theirs)
    } else {
        "-".into()
    };
    let baseline_total = match &args.baseline {
        Some(_) => format!(" **{total_baseline:.3}** | |"),
        None => String::new(),
    };
    table.push_str(&format!(
        "| **total** | **{total_ours:.3}** | **{total_planning:.3}** |{baseline_total} **{total_theirs:.3}** | **{ratio}** | **{total_iceberg:.3}** | |\n"
    ));
    let matched = counts.get("Match").copied().unwrap_or(0);
    let summary = if args.compare.is_none() {
        format!(
            "{} scale {}: {} queries, SQE {total_ours:.3}s (planning {total_planning:.3}s; answers not compared)",
            args.suite,
            args.scale,
            queries.len()
        )
    } else {
        format!(
            "{} scale {}: {matched}/{} Match ({}), SQE {total_ours:.3}s (planning {total_planning:.3}s), DuckDB {total_theirs:.3}s, ratio {ratio}",
            args.suite,
            args.scale,
            queries.len(),
            counts
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let full = json!({
        "suite": args.suite,
        "scale": args.scale,
        "runs": args.runs,
        "settings": args.settings,
        "machine": machine(),
        "duckdb": {"version": theirs["version"], "threads": theirs["threads"]},
        "queries": report,
        "total": {"sqe_seconds": total_ours, "sqe_planning_seconds": total_planning, "duckdb_seconds": total_theirs, "duckdb_iceberg_seconds": total_iceberg, "baseline_seconds": total_baseline},
        "baseline": args.baseline.as_ref().map(|b| b.display().to_string()),
        "baseline_settings": args.baseline_settings,
        "writer": args.writer,
        "location": args.location,
        "object_cache_mb": args.object_cache_mb,
        "object_cache_dir": args.object_cache_dir,
        "summary": summary,
    });
    // A run of some queries (--query) leaves the whole suite's report alone.
    let stem = if args.query.is_empty() {
        "report"
    } else {
        "report-partial"
    };
    let (json_path, md_path, png_path) = (
        format!("{dir_text}/{stem}.json"),
        format!("{dir_text}/{stem}.md"),
        format!("{dir_text}/{stem}.png"),
    );
    std::fs::write(
        &json_path,
        serde_json::to_string_pretty(&full).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("{json_path}: {e}"))?;
    std::fs::write(&md_path, format!("{table}\n{summary}\n"))
        .map_err(|e| format!("{md_path}: {e}"))?;
    let mut reports = format!("{md_path}, {json_path}");
    if args.compare.is_some() {
        match peer(
            &args,
            &["chart", "--report", &json_path, "--out", &png_path],
        ) {
            Ok(()) => reports.push_str(&format!(", {png_path}")),
            Err(e) => eprintln!("no chart: {e}"),
        }
    }
    println!("{table}\n{summary}");
    println!("reports: {reports}");
    Ok(args.compare.is_none()
        || matched + counts.get("Vacuous").copied().unwrap_or(0) == queries.len())
}

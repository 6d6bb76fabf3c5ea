//! Runs every `tests/slt/**/*.slt` file against a fresh engine (one temporary warehouse per file and
//! protocol): embedded, over the Trino HTTP protocol and over Arrow Flight SQL. `cargo test -p sqe-tests --test slt -- NAME` runs the files whose path contains NAME.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use sqe_engine::{Engine, EngineConfig};
use sqe_flight_sql::{FlightSqlConfig, SqeFlightSql};
use sqe_sessions::{Principal, Session};
use sqe_tests::{FlightDb, ServiceDb, TrinoDb};
use sqe_trino::{TrinoConfig, TrinoService};

fn slt_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            slt_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "slt") {
            out.push(path);
        }
    }
}

/// How the statements reach the engine.
#[derive(Debug, Clone, Copy)]
enum Protocol {
    Embedded,
    Trino,
    FlightSql,
}

async fn run_file(path: &Path, fixtures: &Path, protocol: Protocol) -> Result<(), String> {
    // Two warehouses, so cross-catalog statements can be tested: `iceberg` (default) and `lake`.
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let config = EngineConfig {
        catalogs: vec![
            ("iceberg".to_string(), scratch.path().join("warehouse")),
            ("lake".to_string(), scratch.path().join("lake")),
        ],
        // Maintenance may expire what the statements just wrote.
        maintenance_min_retention: Some(std::time::Duration::ZERO),
        ..EngineConfig::default()
    };
    let engine = Arc::new(Engine::open(config).map_err(|e| e.to_string())?);
    let files = scratch.path().join("files");
    std::fs::create_dir_all(&files).map_err(|e| e.to_string())?;
    let vars = [
        ("FIXTURES", fixtures.display().to_string()),
        ("SCRATCH", files.display().to_string()),
    ];
    match protocol {
        Protocol::Embedded => {
            let runner = sqllogictest::Runner::new(move || {
                let engine = engine.clone();
                async move {
                    let session =
                        Session::new(Principal::new("slt"), engine.default_catalog(), "default");
                    Ok(ServiceDb::new(engine, session))
                }
            });
            run_records(runner, path, &vars).await
        }
        Protocol::Trino => {
            let trino =
                TrinoService::new(engine.clone(), TrinoConfig::new(engine.default_catalog()));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| e.to_string())?;
            let base = format!(
                "http://{}",
                listener.local_addr().map_err(|e| e.to_string())?
            );
            let server = tokio::spawn(async move {
                let _ = axum::serve(listener, sqe_trino::router(trino)).await;
            });
            let runner = sqllogictest::Runner::new(move || {
                let base = base.clone();
                async move { Ok(TrinoDb::new(base, "slt", "iceberg", "default")) }
            });
            let result = run_records(runner, path, &vars).await;
            server.abort();
            result
        }
        Protocol::FlightSql => {
            let flight = sqe_flight_sql::server(SqeFlightSql::new(
                engine.clone(),
                FlightSqlConfig::new(engine.default_catalog()),
            ));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| e.to_string())?;
            let addr = listener
                .local_addr()
                .map_err(|e| e.to_string())?
                .to_string();
            let router = tonic::service::Routes::new(flight).into_axum_router();
            let server = tokio::spawn(async move {
                let _ = axum::serve(listener, router).await;
            });
            let runner = sqllogictest::Runner::new(move || {
                let addr = addr.clone();
                async move { FlightDb::connect(&addr, "iceberg", "default").await }
            });
            let result = run_records(runner, path, &vars).await;
            server.abort();
            result
        }
    }
}

async fn run_records<D, M>(
    mut runner: sqllogictest::Runner<D, M>,
    path: &Path,
    vars: &[(&str, String)],
) -> Result<(), String>
where
    D: sqllogictest::AsyncDB<ColumnType = sqllogictest::DefaultColumnType>,
    M: sqllogictest::MakeConnection<Conn = D>,
{
    runner.with_column_validator(|_, _| true);
    for (k, v) in vars {
        runner.set_var(k.to_string(), v.clone());
    }
    runner
        .run_file_async(path)
        .await
        .map_err(|e| e.display(true).to_string())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("slt");
    let fixtures = root.join("fixtures");
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut files = Vec::new();
    slt_files(&root, &mut files);
    files.sort();
    files.retain(|f| {
        filter.is_empty()
            || filter
                .iter()
                .any(|n| f.to_string_lossy().contains(n.as_str()))
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (mut passed, mut failed) = (0, 0);
    for file in &files {
        let name = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        for protocol in [Protocol::Embedded, Protocol::Trino, Protocol::FlightSql] {
            match runtime.block_on(run_file(file, &fixtures, protocol)) {
                Ok(()) => {
                    passed += 1;
                    println!("slt {protocol:?} {name} ... ok");
                }
                Err(e) => {
                    failed += 1;
                    println!("slt {protocol:?} {name} ... FAILED\n{e}");
                }
            }
        }
    }
    println!("slt: {passed} passed, {failed} failed");
    if failed == 0 && passed > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

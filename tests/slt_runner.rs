//! Runs every `tests/slt/**/*.slt` file against a fresh embedded engine (one temporary warehouse per
//! file). `cargo test -p sqe-tests --test slt -- NAME` runs the files whose path contains NAME.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use sqe_engine::{Engine, EngineConfig};
use sqe_sessions::{Principal, Session};
use sqe_tests::ServiceDb;

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

async fn run_file(path: &Path, fixtures: &Path) -> Result<(), String> {
    // Two warehouses, so cross-catalog statements can be tested: `iceberg` (default) and `lake`.
    let scratch = tempfile::tempdir().map_err(|e| e.to_string())?;
    let config = EngineConfig {
        catalogs: vec![
            ("iceberg".to_string(), scratch.path().join("warehouse")),
            ("lake".to_string(), scratch.path().join("lake")),
        ],
        ..EngineConfig::default()
    };
    let engine = Arc::new(Engine::open(config).map_err(|e| e.to_string())?);
    let mut runner = sqllogictest::Runner::new(move || {
        let engine = engine.clone();
        async move {
            let session = Session::new(Principal::new("slt"), engine.default_catalog(), "default");
            Ok(ServiceDb::new(engine, session))
        }
    });
    runner.with_column_validator(|_, _| true);
    runner.set_var("FIXTURES".to_string(), fixtures.display().to_string());
    runner.set_var(
        "SCRATCH".to_string(),
        scratch.path().join("files").display().to_string(),
    );
    std::fs::create_dir_all(scratch.path().join("files")).map_err(|e| e.to_string())?;
    runner
        .run_file_async(path)
        .await
        .map_err(|e| e.display(true).to_string())
}

fn main() -> ExitCode {
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
        match runtime.block_on(run_file(file, &fixtures)) {
            Ok(()) => {
                passed += 1;
                println!("slt {name} ... ok");
            }
            Err(e) => {
                failed += 1;
                println!("slt {name} ... FAILED\n{e}");
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

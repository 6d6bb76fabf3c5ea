//! The shell as a user runs it: separate processes on one warehouse, output formats, scripts, exit codes.

use std::path::Path;
use std::process::{Command, Output};

fn sqe(warehouse: &Path, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_sqe-cli"))
        .arg("--embedded")
        .arg("--warehouse")
        .arg(warehouse)
        .args(args)
        .output();
    match output {
        Ok(o) => o,
        Err(e) => panic!("cannot run sqe-cli: {e}"),
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn tempdir() -> tempfile::TempDir {
    match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("tempdir: {e}"),
    }
}

#[test]
fn a_table_written_by_one_process_is_read_by_the_next() {
    let dir = tempdir();
    let w = dir.path().join("w");
    let created = sqe(
        &w,
        &[
            "-e",
            "CREATE SCHEMA s; CREATE TABLE s.t (id bigint, v varchar); INSERT INTO s.t VALUES (1,'a'),(2,'b')",
        ],
    );
    assert!(created.status.success(), "stderr: {}", stderr(&created));

    let read = sqe(&w, &["-f", "csv", "-e", "SELECT * FROM s.t ORDER BY id"]);
    assert!(read.status.success(), "stderr: {}", stderr(&read));
    assert_eq!(stdout(&read), "id,v\n1,a\n2,b\n");

    // The catalog is a plain SQLite file the stock tool can read.
    if let Ok(listed) = Command::new("sqlite3")
        .arg(w.join("catalog.db"))
        .arg("SELECT table_namespace, table_name FROM iceberg_tables")
        .output()
    {
        assert_eq!(String::from_utf8_lossy(&listed.stdout), "s|t\n");
    }
}

#[test]
fn formats_json_and_tsv() {
    let dir = tempdir();
    let w = dir.path().join("w");
    let json = sqe(
        &w,
        &[
            "-f",
            "json",
            "-e",
            "SELECT 1 AS a, 'x' AS b UNION ALL SELECT 2, NULL ORDER BY a",
        ],
    );
    assert_eq!(stdout(&json), "{\"a\":1,\"b\":\"x\"}\n{\"a\":2}\n");
    let tsv = sqe(&w, &["-f", "tsv", "-e", "SELECT 1 AS a, 'x y' AS b"]);
    assert_eq!(stdout(&tsv), "a\tb\n1\tx y\n");
    let empty = sqe(&w, &["-f", "csv", "-e", "SELECT 1 AS a WHERE false"]);
    assert_eq!(stdout(&empty), "a\n");
}

#[test]
fn nested_values_and_a_zone_per_value_print_in_every_format() {
    let dir = tempdir();
    let w = dir.path().join("w");
    // CSV and TSV have no nested values: a row, array or map is its table text. A timestamp with
    // a zone per value is shown in its zone (as a timestamp column with one zone is).
    let sql = "SELECT from_iso8601_timestamp(s) AS x, named_struct('a', 1, 'b', [1, 2]) AS r \
               FROM (VALUES '2020-05-11T23:15:05.5+01:00', '2020-05-11T23:15:05-05:00') t(s)";
    let tsv = sqe(&w, &["-f", "tsv", "-e", sql]);
    assert_eq!(
        stdout(&tsv),
        "x\tr\n2020-05-11T23:15:05.500+01:00\t{a: 1, b: [1, 2]}\n\
         2020-05-11T23:15:05-05:00\t{a: 1, b: [1, 2]}\n",
        "{}",
        stderr(&tsv)
    );
    let csv = sqe(&w, &["-f", "csv", "-e", sql]);
    assert_eq!(
        stdout(&csv).lines().nth(1),
        Some("2020-05-11T23:15:05.500+01:00,\"{a: 1, b: [1, 2]}\"")
    );
    let json = sqe(&w, &["-f", "json", "-e", sql]);
    assert_eq!(
        stdout(&json).lines().next(),
        Some("{\"x\":\"2020-05-11T23:15:05.500+01:00\",\"r\":{\"a\":1,\"b\":[1,2]}}")
    );
}

#[test]
fn scripts_go_on_past_errors_unless_told_to_stop() {
    let dir = tempdir();
    let w = dir.path().join("w");
    let script = dir.path().join("script.sql");
    std::fs::write(&script, "SELECT 1 AS a;\nSELECT * FROM missing;\n-- a comment; with a semicolon\nSELECT 'two;' AS b;\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let script = script.to_string_lossy().into_owned();

    let all = sqe(&w, &["-f", "csv", "--file", &script]);
    assert_eq!(all.status.code(), Some(1));
    assert_eq!(stdout(&all), "a\n1\nb\ntwo;\n");
    assert_eq!(
        stderr(&all),
        "Error: table 'iceberg.default.missing' not found\n"
    );

    let stopped = sqe(&w, &["-f", "csv", "--stop-on-error", "--file", &script]);
    assert_eq!(stopped.status.code(), Some(1));
    assert_eq!(stdout(&stopped), "a\n1\n");
}

#[test]
fn parse_errors_name_the_position_and_exit_non_zero() {
    let dir = tempdir();
    let out = sqe(
        &dir.path().join("w"),
        &["-e", "SELECT * FROM t WHERE ( AND x"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.starts_with("Error: syntax error: "), "{err}");
    assert!(err.contains("Line: 1, Column: "), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn dot_commands_in_scripts() {
    let dir = tempdir();
    let w = dir.path().join("w");
    let out = sqe(
        &w,
        &[
            "-f",
            "csv",
            "-e",
            "CREATE TABLE t (id bigint) WITH (partitioning = ARRAY['bucket(id, 8)']); .tables; .schema t",
        ],
    );
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let location = std::fs::canonicalize(&w)
        .unwrap_or_else(|e| panic!("{e}"))
        .join("default")
        .join("t");
    assert_eq!(
        stdout(&out),
        format!(
            "Table\nt\nCreate Table\n\"CREATE TABLE iceberg.default.t (\n   id bigint\n)\nWITH (\n   format = 'PARQUET',\n   \
             format_version = 2,\n   partitioning = ARRAY['bucket(id, 8)'],\n   location = '{}'\n)\"\n",
            location.display()
        )
    );
}

#[test]
fn extra_catalogs_are_mounted_by_name() {
    let dir = tempdir();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let b_spec = format!("lake={}", b.display());
    let out = sqe(
        &a,
        &[
            "--catalog",
            &b_spec,
            "-f",
            "csv",
            "-e",
            "CREATE TABLE lake.default.x AS SELECT 1 AS id; CREATE TABLE y AS SELECT 1 AS id, 'joined' AS s; \
             SELECT y.s FROM iceberg.default.y JOIN lake.default.x ON x.id = y.id",
        ],
    );
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "s\njoined\n");
    let bad = sqe(&a, &["--catalog", "nodir", "-e", "SELECT 1"]);
    assert_eq!(
        stderr(&bad),
        "Error: --catalog expects NAME=DIR, got 'nodir'\n"
    );
}

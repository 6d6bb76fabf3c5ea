//! Command-line arguments.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Tsv,
    Json,
}

/// The SQE shell: SQL over Apache Iceberg, embedded or against an sqe-server.
#[derive(Debug, Parser)]
#[command(name = "sqe-cli", version)]
pub struct Args {
    /// Run the engine in this process (the default when no --host is given).
    #[arg(long)]
    pub embedded: bool,

    /// Warehouse directory of the default catalog `iceberg` [default: ~/.sqe/warehouse].
    #[arg(long, value_name = "DIR", conflicts_with = "memory")]
    pub warehouse: Option<PathBuf>,

    /// Mount another warehouse as catalog NAME (repeatable).
    #[arg(long = "catalog", value_name = "NAME=DIR")]
    pub catalogs: Vec<String>,

    /// Keep nothing: the warehouse lives in a temporary directory removed on exit.
    #[arg(long)]
    pub memory: bool,

    /// Run these statements (separated by ';') and exit.
    #[arg(short = 'e', long = "execute", value_name = "SQL")]
    pub execute: Option<String>,

    /// Run the statements in this file and exit.
    #[arg(long = "file", value_name = "PATH")]
    pub file: Option<PathBuf>,

    /// Stop at the first failing statement (scripts otherwise go on past errors).
    #[arg(long)]
    pub stop_on_error: bool,

    /// The shortest retention table maintenance (expire_snapshots, remove_orphan_files) may be
    /// given, as Trino writes durations (embedded mode) [default: 7d].
    #[arg(long, value_name = "DURATION")]
    pub maintenance_min_retention: Option<String>,

    /// Output format.
    #[arg(short = 'f', long, value_enum, default_value = "table")]
    pub format: Format,

    /// Server host (remote mode, over Arrow Flight SQL).
    #[arg(long)]
    pub host: Option<String>,

    /// Server port (remote mode).
    #[arg(long, default_value_t = 50051)]
    pub port: u16,

    /// User name (remote mode).
    #[arg(long)]
    pub user: Option<String>,

    /// Bearer token (remote mode). Without it, `--user` signs in with a password read from standard
    /// input (prompted on a terminal, without echo).
    #[arg(long)]
    pub token: Option<String>,

    /// Connect over TLS, checking the server against the public web roots (remote mode).
    #[arg(long)]
    pub tls: bool,

    /// Connect over TLS, checking the server against this CA certificate (PEM) (remote mode).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<std::path::PathBuf>,
}

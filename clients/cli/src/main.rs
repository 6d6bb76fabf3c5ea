//! `sqe-cli`: the SQE shell.

mod args;
mod output;
mod remote;
mod shell;

use clap::Parser;

fn main() -> std::process::ExitCode {
    shell::main(args::Args::parse())
}

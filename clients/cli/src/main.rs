//! `sqe-cli`: the SQE shell.

mod args;
mod output;
mod remote;
mod shell;

use clap::Parser;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    shell::main(args::Args::parse())
}

//! `sqe-server`: parses its arguments and runs the gateway.

use clap::Parser;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sqe_gateway::main(sqe_gateway::Args::parse())
}

//! `sqe-server`: parses its arguments and runs the gateway.

use clap::Parser;

fn main() -> std::process::ExitCode {
    sqe_gateway::main(sqe_gateway::Args::parse())
}

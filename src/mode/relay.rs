//! `sockbench relay`: the ways to copy between sockets.

use std::process::ExitCode;

use crate::cli::{OutputArgs, RelayArgs};

/// Run `sockbench relay`.
pub fn run(_args: &RelayArgs, _output: &OutputArgs, _argv: Vec<String>) -> ExitCode {
    eprintln!("sockbench: error: relay is being built");
    ExitCode::from(super::FAILED)
}

//! `sockbench mesh`: see [`crate::mesh`].

use std::process::ExitCode;

use crate::cli::{MeshArgs, OutputArgs};

/// Run a mesh.
pub fn run(_args: &MeshArgs, _output: &OutputArgs, _argv: Vec<String>) -> ExitCode {
    ExitCode::from(super::FAILED)
}

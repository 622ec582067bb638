//! `sockbench compare BASE.json NEW.json [...]`: match scenarios across saved reports and
//! say, per scenario, whether the new run is faster, slower, or not significantly different.

use std::process::ExitCode;

use crate::cli::{CompareArgs, OutputArgs};

/// Compare saved reports.
pub fn run(_c: &CompareArgs, _output: &OutputArgs) -> ExitCode {
    eprintln!("sockbench: error: compare is not built yet");
    ExitCode::from(super::FAILED)
}

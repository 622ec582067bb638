//! `sockbench` and `sockbench suite`: every local transport at four sizes, then latency
//! and message rate, in about a minute, as one set of tables.

use crate::cli::Args;
use crate::error::CommandResult;
use crate::plan::Plan;

/// Plan the suite and run it as the measuring commands run.
///
/// # Errors
/// As [`super::bench::execute`].
pub fn run(args: &Args, argv: Vec<String>) -> CommandResult {
    super::catch_interrupts()?;
    super::bench::execute(Plan::from_args(args), args, argv)
}

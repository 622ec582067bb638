//! Placement: where a scenario's roles run. A placement opens what the workload's wiring
//! asks for, runs every role of one measured run, and brings back each role's own report
//! ([`Roles`]); it never computes figures. Threads of this process are the first
//! placement; a child process and a remote host are the next ones, behind the same trait.

pub mod threads;

pub use threads::Threads;

use crate::plan::Scenario;
use crate::workload::{Roles, Stop};

/// Why a run did not produce role reports.
pub enum RunError {
    /// Ctrl-C (or SIGTERM) came first.
    Interrupted,
    /// Something failed, with the reason.
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for RunError {
    fn from(e: anyhow::Error) -> Self {
        RunError::Failed(e)
    }
}

/// Runs the roles of one measured run of a scenario somewhere.
pub trait Placement {
    /// Its name in reports (`threads`).
    fn name(&self) -> &'static str;

    /// One run of `sc` that stops at `stop`: open the connections, start every role at
    /// once, wait for their reports.
    ///
    /// # Errors
    /// [`RunError::Interrupted`] on Ctrl-C before the run finished, otherwise
    /// [`RunError::Failed`] with what went wrong.
    fn run(&self, sc: &Scenario, stop: Stop) -> Result<Roles, RunError>;
}

//! Errors callers branch on. Everything else is `anyhow` with context.

use thiserror::Error;

/// A problem found before anything runs: with what the user asked for (exit code 2), or
/// with what this system can do ([`PlanError::Unavailable`], exit code 1).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PlanError {
    /// An option value is out of range or malformed.
    #[error("{0}")]
    Invalid(String),
    /// A combination of options that cannot work.
    #[error("{0}")]
    Unsupported(String),
    /// A valid request this system or build cannot serve (io_uring disabled by a sysctl,
    /// an engine not built in). Exit code 1: nothing is wrong with the command line.
    #[error("{0}")]
    Unavailable(String),
}

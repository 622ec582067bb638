//! Errors callers branch on. Everything else is `anyhow` with context.

use thiserror::Error;

/// A problem with what the user asked for, found before anything runs. Exit code 2.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PlanError {
    /// An option value is out of range or malformed.
    #[error("{0}")]
    Invalid(String),
    /// A combination of options that cannot work.
    #[error("{0}")]
    Unsupported(String),
}

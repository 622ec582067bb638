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

/// Why a command stopped before it had anything to print. A mode returns it; `main`
/// alone says it (once, on stderr, and under `--format json` as a document too) and
/// turns it into the exit status: 2 for [`Error::Usage`], 1 for [`Error::Failed`].
#[derive(Debug, Error, PartialEq, Eq)]
pub enum Error {
    /// What the command line asks for is wrong: a value out of range, flags that do not
    /// go together, a path that cannot be written. Found after clap parsed the line.
    #[error("{0}")]
    Usage(String),
    /// A valid command this system could not carry out: a port in use, a host that
    /// does not answer, a file that cannot be read.
    #[error("{0}")]
    Failed(String),
}

impl Error {
    /// A usage error with `message`.
    pub fn usage(message: impl std::fmt::Display) -> Error {
        Error::Usage(message.to_string())
    }

    /// A runtime failure with `message` (an `anyhow` chain in its `{:#}` form).
    pub fn failed(message: impl std::fmt::Display) -> Error {
        Error::Failed(message.to_string())
    }
}

impl From<PlanError> for Error {
    fn from(e: PlanError) -> Error {
        match e {
            PlanError::Unavailable(m) => Error::Failed(m),
            PlanError::Invalid(m) | PlanError::Unsupported(m) => Error::Usage(m),
        }
    }
}

/// How a command that ran ended; `main` turns it into the exit status. What went wrong
/// is in the command's document and said on stderr where it happened (a failed
/// scenario, an export that could not be written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Outcome {
    /// Everything asked for was measured and written: exit 0.
    Done,
    /// It ran, and something failed (a scenario, a run, an export, printing): exit 1.
    Failed,
    /// Stopped by Ctrl-C, SIGTERM or SIGHUP, with what was measured printed: exit 130.
    Interrupted,
}

impl Outcome {
    /// `Done` when `ok`, else `Failed`.
    pub fn ok_if(ok: bool) -> Outcome {
        if ok {
            Outcome::Done
        } else {
            Outcome::Failed
        }
    }

    /// How a command that printed its document ended: interrupted above all, then
    /// failed when anything went wrong, else done.
    pub fn of(interrupted: bool, failed: bool) -> Outcome {
        if interrupted {
            Outcome::Interrupted
        } else {
            Outcome::ok_if(!failed)
        }
    }
}

/// What every command returns to `main`.
pub type CommandResult = std::result::Result<Outcome, Error>;

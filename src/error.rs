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

/// A message alone is a problem with what the command line asks for: the flag checks of
/// a command's set-up say what is wrong as text. What this system cannot do is named
/// [`PlanError::Unavailable`] where it is found.
impl From<String> for PlanError {
    fn from(message: String) -> PlanError {
        PlanError::Invalid(message)
    }
}

impl From<&str> for PlanError {
    fn from(message: &str) -> PlanError {
        PlanError::Invalid(message.to_string())
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

/// How a command that ran ended, and what went wrong after its document was made (a
/// failed scenario, a later run that broke, an export that could not be written). `main`
/// says each error once on stderr, after the document, and turns the status into the
/// exit code; a mode never prints its own.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Outcome {
    /// How it ended.
    pub status: Status,
    /// What went wrong, one message each, in the order it happened (empty when nothing
    /// did). The document says the same in its `error`, where the document has room.
    pub errors: Vec<String>,
}

/// How a command that ran ended; `main` turns it into the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Everything asked for was measured and written: exit 0.
    Done,
    /// It ran, and something failed (a scenario, a run, an export, printing): exit 1.
    Failed,
    /// Stopped by Ctrl-C, SIGTERM or SIGHUP, with what was measured printed: exit 130.
    Interrupted,
}

impl Outcome {
    /// Everything asked for was done.
    pub fn done() -> Outcome {
        Outcome::with(Status::Done)
    }

    /// Stopped by a signal, with what was measured printed.
    pub fn interrupted() -> Outcome {
        Outcome::with(Status::Interrupted)
    }

    fn with(status: Status) -> Outcome {
        Outcome {
            status,
            errors: Vec::new(),
        }
    }

    /// `Done` when `ok`, else `Failed`.
    pub fn ok_if(ok: bool) -> Outcome {
        Outcome::with(if ok { Status::Done } else { Status::Failed })
    }

    /// How a command that printed its document ended: interrupted above all, then
    /// failed when anything went wrong, else done.
    pub fn of(interrupted: bool, failed: bool) -> Outcome {
        if interrupted {
            Outcome::interrupted()
        } else {
            Outcome::ok_if(!failed)
        }
    }

    /// This outcome with `error` to say: a command that was done has failed; one that
    /// was interrupted stays interrupted.
    pub fn and_error(self, error: impl std::fmt::Display) -> Outcome {
        self.and_errors([error.to_string()])
    }

    /// [`Outcome::and_error`] for each of `errors` (none leaves the outcome as it was).
    pub fn and_errors(mut self, errors: impl IntoIterator<Item = String>) -> Outcome {
        self.errors.extend(errors);
        if !self.errors.is_empty() && self.status == Status::Done {
            self.status = Status::Failed;
        }
        self
    }
}

/// What every command returns to `main`.
pub type CommandResult = std::result::Result<Outcome, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_fails_a_command_that_was_done_and_keeps_one_that_was_interrupted() {
        assert_eq!(Outcome::done().and_errors([]), Outcome::done());
        let failed = Outcome::done().and_error("not written: x");
        assert_eq!(failed.status, Status::Failed);
        assert_eq!(failed.errors, ["not written: x"]);
        let stopped = Outcome::interrupted().and_error("run 2 of 3 failed");
        assert_eq!(stopped.status, Status::Interrupted);
        assert_eq!(stopped.errors, ["run 2 of 3 failed"]);
        let both = Outcome::of(false, true).and_errors(["a".into(), "b".into()]);
        assert_eq!((both.status, both.errors.len()), (Status::Failed, 2));
    }

    #[test]
    fn a_message_alone_is_a_usage_error_and_unavailable_is_a_runtime_failure() {
        assert_eq!(
            Error::from(PlanError::from("bad")),
            Error::Usage("bad".into())
        );
        assert_eq!(
            Error::from(PlanError::Unavailable("no ring".into())),
            Error::Failed("no ring".into())
        );
    }
}

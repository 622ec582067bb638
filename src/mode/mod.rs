//! One file per top-level command, each owning its flow. `main` parses the command line,
//! matches the command and hands it to its mode; a mode returns how it ended
//! ([`crate::error::Outcome`]) or why it could not run ([`crate::error::Error`]), and
//! `main` alone says an error and picks the exit status.
//!
//! - [`bench`](mod@bench): the measuring commands (`stream`, `pingpong`, `rate`, `connect`): plan,
//!   run, report;
//! - [`suite`]: the default suite (plain `sockbench`);
//! - [`report`]: print a saved document again, of any kind, in any format;
//! - [`compare`]: match the rows of saved documents of one kind and judge each headline;
//! - [`relay`]: `sockbench relay`, the ways to copy between sockets;
//! - [`swarm`]: `sockbench swarm`, many pairs at once on two epoll threads;
//! - [`serve`]: `sockbench serve`, an HTTP server of a chosen concurrency model;
//! - [`load`]: `sockbench load`, an HTTP load generator;
//! - [`models`]: `sockbench models`, every server model under the same load;
//! - [`mesh`]: `sockbench mesh`, every pair of N hosts;
//! - [`listen`]: `sockbench listen`, a socket that logs what its clients send;
//! - [`server`]: `sockbench server`, and the child of a `--placement processes` run.
//!
//! Every command that measures ends the same way: its document is made, its exports
//! written ([`crate::report::ExportManager::finish`]), a Ctrl-C during them marked, and
//! the document printed in `--format` ([`emit`]).

pub mod bench;
pub mod compare;
pub mod listen;
pub mod load;
pub mod mesh;
pub mod models;
pub mod relay;
pub mod report;
pub mod serve;
pub mod server;
pub mod suite;
pub mod swarm;

use std::io::Write;

use crate::environment::Environment;
use crate::report::{Envelope, Kind, Report, SCHEMA_VERSION};

/// A report of this run (of `kind`) with nothing in it yet, started now.
pub fn empty_report(kind: Kind, command: Vec<String>) -> Report {
    Report {
        schema_version: SCHEMA_VERSION,
        tool: crate::report::envelope::this_tool(),
        kind,
        command,
        environment: Some(Environment::collect()),
        started_at: Some(crate::report::envelope::now()),
        ended_at: None,
        placement: crate::report::PlacementInfo {
            name: "threads".into(),
            ..Default::default()
        },
        results: Vec::new(),
        skipped: Vec::new(),
        warnings: Vec::new(),
        interrupted: false,
        error: None,
        rankings: Vec::new(),
        layout: kind.layout(),
    }
}

/// Under `--format json` even an error before any run is a JSON document, of the
/// command's `kind`, with the error in it and an empty body.
pub fn print_error_document(kind: Kind, argv: &[String], error: &str) {
    let mut envelope = Envelope::starting(argv.to_vec());
    envelope.ended_at = envelope.started_at.clone();
    envelope.error = Some(error.to_string());
    let doc = crate::document::Document {
        envelope,
        body: crate::document::Body::empty(kind),
    };
    if let Ok(bytes) = crate::report::output::pretty(&doc) {
        let _ = std::io::stdout().lock().write_all(&bytes);
    }
}

/// The exports a command's flags ask for (`--export-FORMAT PATH`, any format), checked
/// before anything runs, as every command's are.
///
/// # Errors
/// A usage error: a path that cannot be written, two exports to one file, or two to
/// stdout.
pub fn exports(
    output: &crate::cli::OutputArgs,
) -> Result<crate::report::ExportManager, crate::error::Error> {
    exports_viewed(output, output.view())
}

/// [`exports`], with tables drawn as `view` says (`report --by-placement`).
///
/// # Errors
/// As [`exports`].
pub fn exports_viewed(
    output: &crate::cli::OutputArgs,
    view: crate::vocab::View,
) -> Result<crate::report::ExportManager, crate::error::Error> {
    use crate::report::export::{self, ExportKind};
    let wanted: Vec<_> = (output.report_exports().into_iter())
        .map(|(f, p)| (ExportKind::Report(f), p))
        .collect();
    let prepared = export::prepare(&wanted).map_err(crate::error::Error::usage)?;
    Ok(crate::report::ExportManager::new(prepared, view))
}

/// Route Ctrl-C, SIGTERM and SIGHUP to the flag every loop watches, before anything
/// runs: a stop at any moment then ends the command with what was measured printed.
///
/// # Errors
/// A runtime failure: the handlers cannot be installed (a command that could not be
/// stopped cleanly does not start).
pub fn catch_interrupts() -> Result<(), crate::error::Error> {
    crate::interrupt::install()
        .map_err(|e| crate::error::Error::failed(format!("cannot handle Ctrl-C: {e}")))
}

/// The end of a command: its document printed on stdout in `--format` (and in each
/// format exported to `-`, once), after [`crate::report::ExportManager::finish`] wrote
/// its exports (the caller's: a Ctrl-C while an export waited for a FIFO's reader
/// interrupted the command, which its document must say before it is printed). What
/// could not be written, one message each, for the command's
/// [`crate::error::Outcome`]: none when all of it was (a closed stdout, `| head`, is not
/// a failure).
#[must_use]
pub fn emit(
    doc: &dyn crate::report::output::Rendered,
    output: &crate::cli::OutputArgs,
    exports: &crate::report::ExportManager,
) -> Vec<String> {
    unwritten(
        print_document(doc, output.format, exports.view(), exports),
        exports,
    )
}

/// What was not written, one message each: the document on stdout, when `printed`
/// failed (a closed stdout, `| head`, is not a failure), and each export that failed.
#[must_use]
pub fn unwritten(
    printed: anyhow::Result<()>,
    exports: &crate::report::ExportManager,
) -> Vec<String> {
    let mut problems = Vec::new();
    if let Err(e) = printed {
        if !broken_pipe(&e) {
            problems.push(format!("cannot print: {e:#}"));
        }
    }
    problems.extend(
        exports
            .failures()
            .iter()
            .map(|f| format!("not written: {f}")),
    );
    problems
}

/// Print `doc` on stdout in `format`, then in each other format exported to stdout.
///
/// # Errors
/// Writing to stdout failed.
pub fn print_document(
    doc: &dyn crate::report::output::Rendered,
    format: crate::vocab::Format,
    view: crate::vocab::View,
    exports: &crate::report::ExportManager,
) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&crate::report::exporter(format, view).serialize(doc)?)?;
    drop(stdout);
    print_stdout_exports(doc, format, view, exports)
}

/// Print `doc` on stdout in each format exported to stdout but `printed` (already there:
/// one document, not two).
///
/// # Errors
/// Writing to stdout failed.
pub fn print_stdout_exports(
    doc: &dyn crate::report::output::Rendered,
    printed: crate::vocab::Format,
    view: crate::vocab::View,
    exports: &crate::report::ExportManager,
) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    for f in exports.stdout_formats() {
        if f != printed {
            stdout.write_all(&crate::report::exporter(f, view).serialize(doc)?)?;
        }
    }
    stdout.flush()?;
    Ok(())
}

/// Whether an error writing to stdout is a closed pipe (`sockbench | head`): the table is
/// lost, not the outcome.
pub fn broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>().map(|e| e.kind()) == Some(std::io::ErrorKind::BrokenPipe)
}

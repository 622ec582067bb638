//! One file per top-level command, each owning its flow. `main` parses the command line,
//! matches the command and hands it to its mode; a mode returns the exit status.
//!
//! - [`bench`](mod@bench): the measuring commands (`stream`, `pingpong`, `rate`, `connect`): plan,
//!   run, report;
//! - [`suite`]: the default suite (plain `sockbench`);
//! - [`report`]: print a saved JSON report again;
//! - [`server`]: `sockbench server`, and the child of a `--placement processes` run;
//! - [`listen`]: `sockbench listen`, a socket that logs what its clients send;
//! - [`swarm`]: `sockbench swarm`, many pairs at once on two epoll threads;
//! - [`relay`]: `sockbench relay`, the ways to copy between sockets.

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

use crate::cli::Format;
use crate::environment::Environment;
use crate::report::{exporter, Report, Tool, SCHEMA_VERSION};

/// Exit status of a runtime failure.
pub const FAILED: u8 = 1;
/// Exit status of bad usage (as clap's own).
pub const USAGE: u8 = 2;
/// Exit status after Ctrl-C / SIGTERM / SIGHUP (128 + SIGINT, as shells report it).
pub const INTERRUPTED: u8 = 130;

/// A report of this run with nothing in it yet.
pub fn empty_report(command: Vec<String>) -> Report {
    Report {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "sockbench".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        command,
        environment: Environment::collect(),
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
        layout: Default::default(),
    }
}

/// The usage error a mode reported with [`usage_error`], for `main` to print as a JSON
/// document under `--format json`.
static USAGE_ERROR: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// A usage error a mode finds after clap parsed the line (a bad value, flags that do not
/// go together): said on stderr and kept for `main`, which under `--format json` prints it
/// as a JSON document ([`print_error_document`]) on stdout, as for an error clap finds.
/// Exit status 2. Every command that does not print its own document for a usage error
/// reports it here, so none is left without one.
pub fn usage_error(message: impl std::fmt::Display) -> std::process::ExitCode {
    let message = message.to_string();
    eprintln!("sockbench: error: {message}");
    if let Ok(mut slot) = USAGE_ERROR.lock() {
        *slot = Some(message);
    }
    std::process::ExitCode::from(USAGE)
}

/// The usage error a mode reported with [`usage_error`], if any (taken: asked again, none).
pub fn take_usage_error() -> Option<String> {
    USAGE_ERROR.lock().ok().and_then(|mut slot| slot.take())
}

/// Under `--format json` even an error before any run is a JSON document, with the
/// error in it.
pub fn print_error_document(argv: &[String], error: &str) {
    let mut report = empty_report(argv.to_vec());
    report.error = Some(error.to_string());
    if let Ok(bytes) = exporter(Format::Json, Default::default()).serialize(&report) {
        let _ = std::io::stdout().lock().write_all(&bytes);
    }
}

/// Whether an error writing to stdout is a closed pipe (`sockbench | head`): the table is
/// lost, not the outcome.
pub fn broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>().map(|e| e.kind()) == Some(std::io::ErrorKind::BrokenPipe)
}

/// The exports of a command that writes one JSON document of its own (load, swarm,
/// relay): `--export-json PATH` only, checked before anything runs (as a benchmark's
/// exports are). Any other export flag is refused, never ignored.
///
/// # Errors
/// The message for a usage error (exit 2).
pub fn own_document_exports(
    output: &crate::cli::OutputArgs,
    command: &str,
) -> Result<Vec<crate::report::export::Export>, String> {
    use crate::cli::Format;
    use crate::report::export::{self, ExportKind};
    let others = [
        ("--export-csv", &output.export_csv),
        ("--export-markdown", &output.export_markdown),
        ("--export-html", &output.export_html),
        ("--export-openmetrics", &output.export_openmetrics),
    ];
    if let Some((flag, _)) = others.iter().find(|(_, p)| p.is_some()) {
        return Err(format!(
            "{command} writes one JSON document: --format json or --export-json PATH ({flag} is not \
             available for it)"
        ));
    }
    let wanted: Vec<_> = (output.export_json.iter())
        .map(|p| (ExportKind::Report(Format::Json), p.clone()))
        .collect();
    export::prepare(&wanted).map_err(|e| e.to_string())
}

/// Write `doc` (pretty JSON and a final newline) to each of `exports`.
///
/// # Errors
/// The first export that cannot be written, named.
pub fn write_own_document(
    doc: &impl serde::Serialize,
    exports: &[crate::report::export::Export],
) -> anyhow::Result<()> {
    let mut b = serde_json::to_vec_pretty(doc)?;
    b.push(b'\n');
    for e in exports {
        crate::report::export::write_document(e, &b)
            .map_err(|err| anyhow::anyhow!("{} {}: {err:#}", e.kind.flag(), e.given.display()))?;
    }
    Ok(())
}

/// Write a command's own JSON document (models, relay) to `path`, pretty-printed
/// with a final newline; `-` is stdout.
///
/// # Errors
/// If the file cannot be written.
pub fn write_document(doc: &impl serde::Serialize, path: &std::path::Path) -> std::io::Result<()> {
    let mut b = serde_json::to_vec_pretty(doc).map_err(std::io::Error::other)?;
    b.push(b'\n');
    if path.as_os_str() == "-" {
        std::io::stdout().lock().write_all(&b)
    } else {
        std::fs::write(path, b)
    }
}

#[cfg(test)]
mod document_tests {
    #[test]
    fn a_usage_error_is_kept_once_for_the_json_document() {
        let status = super::usage_error("-n must be between 1 and 9");
        assert_eq!(status, std::process::ExitCode::from(super::USAGE));
        assert_eq!(
            super::take_usage_error().as_deref(),
            Some("-n must be between 1 and 9")
        );
        assert_eq!(super::take_usage_error(), None);
    }

    #[test]
    fn a_document_is_written_whole_with_a_final_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("doc.json");
        super::write_document(&serde_json::json!({"document": "x", "n": 1}), &path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("}\n"), "{text:?}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["n"], 1);
        let e = super::write_document(&1, &dir.path().join("no/such/dir.json")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }
}

//! `sockbench report FILE.json`: print a saved run again, in any format, with `--wide`
//! and `--units`, and write the `--export-*` files from it. Nothing is measured.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use super::{broken_pipe, FAILED, USAGE};
use crate::cli::{Args, Command, ReportArgs};
use crate::plan::Layout;
use crate::report::export::ExportKind;
use crate::report::{exporter, ExportManager, Report, SCHEMA_VERSION};

/// Read, check and print a saved report.
pub fn run(r: &ReportArgs, args: &Args) -> ExitCode {
    let report = match load(&r.file) {
        Ok(report) => report,
        Err(e) => {
            // The file's own words (a serde message quotes them) never drive the terminal.
            eprintln!(
                "sockbench: error: {}",
                crate::text::terminal(&format!("{e:#}"))
            );
            return ExitCode::from(FAILED);
        }
    };
    let wanted: Vec<_> = (args.output.report_exports().into_iter())
        .map(|(f, p)| (ExportKind::Report(f), p))
        .collect();
    let exports = match crate::report::export::prepare(&wanted) {
        Ok(e) => ExportManager::new(e, args.output.view()),
        Err(e) => {
            eprintln!("sockbench: error: {e}");
            return ExitCode::from(USAGE);
        }
    };
    exports.finish(&report);
    let mut status = 0;
    let printed = exporter(args.output.format, args.output.view())
        .serialize(&report)
        .and_then(|bytes| {
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes)?;
            out.flush()?;
            Ok(())
        });
    if let Err(e) = printed {
        if !broken_pipe(&e) {
            eprintln!("sockbench: error: cannot print the report: {e:#}");
            status = FAILED;
        }
    }
    for f in exports.failures() {
        eprintln!("sockbench: error: not written: {f}");
        status = FAILED;
    }
    ExitCode::from(status)
}

/// The oldest schema version `load` reads: versions 5 to 7 only added keys (5:
/// `runs[].intervals`; 6: placement, timestamps, calls and counters; 7: `runs[].tcp`,
/// `tcp_retransmits`), so an older report reads as a newer one without them.
pub const OLDEST_READABLE: u32 = 4;

/// Read a report from `path` ("-": stdin) and check it is one this sockbench can read.
/// At most [`crate::input::REPORT`]'s 256 MiB are read, and a path must name a regular
/// file (a FIFO or a device is refused: pipe it to `-` instead).
///
/// # Errors
/// If the file cannot be read, is not a regular file, is over 256 MiB, is not JSON, is
/// another schema version or not a report.
pub fn load(path: &Path) -> anyhow::Result<Report> {
    use anyhow::Context;
    let name = path.display();
    let text = if path == Path::new("-") {
        crate::input::read_stdin(crate::input::REPORT)?
    } else {
        crate::input::read_file(path, crate::input::REPORT)?
    };
    let value: serde_json::Value = serde_json::from_slice(&text).with_context(|| {
        format!("{name} is not JSON: give a report written by --format json or --export-json")
    })?;
    match value.get("schema_version").and_then(serde_json::Value::as_u64) {
        Some(v) if (u64::from(OLDEST_READABLE)..=u64::from(SCHEMA_VERSION)).contains(&v) => {}
        Some(v) => anyhow::bail!(
            "{name} is a report of schema version {v}; this sockbench {} reads versions {OLDEST_READABLE} to \
             {SCHEMA_VERSION}: print it with the sockbench that wrote it, or run the measurement again",
            env!("CARGO_PKG_VERSION")
        ),
        None => anyhow::bail!(
            "{name} is not a sockbench report (no schema_version): give a report written by --format json \
             or --export-json"
        ),
    }
    let mut report: Report = serde_json::from_value(value)
        .with_context(|| format!("{name} is not a complete sockbench report"))?;
    report.layout = layout_of(&report);
    // A report from before rankings were kept: rank what it holds, by the same rule.
    if report.rankings.is_empty() {
        report.rankings = crate::report::rankings::of(&report.results, report.layout);
    }
    // Read as this version (an older one lacks only what defaults to empty).
    report.schema_version = SCHEMA_VERSION;
    Ok(report)
}

/// How the run's tables were laid out: the command line it was run with tells (plain
/// `sockbench` and `suite` are the suite); failing that, a mix of workloads is the suite.
pub fn layout_of(report: &Report) -> Layout {
    use clap::Parser;
    match Args::try_parse_from(&report.command).map(|a| a.command) {
        Ok(None | Some(Command::Suite(_))) => Layout::Suite,
        Ok(_) => Layout::List,
        Err(_) => {
            let first = report.results.first().map(|r| r.workload);
            match report.results.iter().any(|r| Some(r.workload) != first) {
                true => Layout::Suite,
                false => Layout::List,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    #[test]
    fn the_layout_follows_the_command_line_or_else_the_mix_of_workloads() {
        let mut suite = sample::suite();
        suite.command = vec!["sockbench".into()];
        assert_eq!(layout_of(&suite), Layout::Suite);
        suite.command = vec!["sockbench".into(), "suite".into(), "-d".into(), "1".into()];
        assert_eq!(layout_of(&suite), Layout::Suite);
        let mut list = sample::stream();
        list.command = vec![
            "sockbench".into(),
            "stream".into(),
            "-t".into(),
            "tcp".into(),
        ];
        assert_eq!(layout_of(&list), Layout::List);
        // A command line this version cannot parse: the results decide.
        suite.command = vec!["sockbench".into(), "--from-the-future".into()];
        list.command = suite.command.clone();
        assert_eq!(layout_of(&suite), Layout::Suite);
        assert_eq!(layout_of(&list), Layout::List);
    }
}

//! The `sockbench` command: parse, plan, run, report, exit.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use sockbench::cli::Args;
use sockbench::environment::Environment;
use sockbench::plan::Plan;
use sockbench::report::{exporter, ExportManager, Report, Tool, SCHEMA_VERSION};
use sockbench::runner::Runner;

/// Exit code for a runtime failure.
const FAILED: u8 = 1;
/// Exit code for bad usage (as clap's own).
const USAGE: u8 = 2;
/// Exit code after Ctrl-C / SIGTERM (128 + SIGINT, as shells report it).
const INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    let args = Args::parse();
    let plan = match Plan::from_args(&args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("sockbench: error: {e}");
            return ExitCode::from(USAGE);
        }
    };
    if let Err(e) = sockbench::interrupt::install() {
        eprintln!("sockbench: warning: cannot catch Ctrl-C: {e}");
    }
    let exports = ExportManager::new(plan.output.exports.clone());
    let mut report = Report {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "sockbench",
            version: env!("CARGO_PKG_VERSION"),
        },
        command: std::env::args().collect(),
        environment: Environment::collect(),
        results: Vec::new(),
        skipped: plan.skipped.clone(),
        warnings: plan.notes.clone(),
        interrupted: false,
        error: None,
        layout: plan.layout,
    };
    if let Err(e) = Runner::new(&plan, &exports).run(&mut report) {
        report.error = Some(format!("{e:#}"));
    }
    let failed = report.results.iter().filter(|r| r.error.is_some()).count();
    if report.error.is_none() && failed > 0 {
        report.error = Some(format!(
            "{failed} of {} scenarios failed",
            report.results.len()
        ));
    }
    if let Err(e) = print(&plan, &exports, &report) {
        // A closed stdout (`sockbench | head`) is not a failure.
        if e.downcast_ref::<std::io::Error>().map(|e| e.kind())
            == Some(std::io::ErrorKind::BrokenPipe)
        {
            return ExitCode::SUCCESS;
        }
        eprintln!("sockbench: error: {e:#}");
        return ExitCode::from(FAILED);
    }
    for r in report.results.iter().filter(|r| r.error.is_some()) {
        eprintln!(
            "sockbench: error: {}: {}",
            r.label(),
            r.error.as_deref().unwrap_or_default()
        );
    }
    if let Some(e) = &report.error {
        eprintln!("sockbench: error: {e}");
    }
    if report.interrupted {
        ExitCode::from(INTERRUPTED)
    } else if report.error.is_some() {
        ExitCode::from(FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

fn print(plan: &Plan, exports: &ExportManager, report: &Report) -> anyhow::Result<()> {
    exports.write_files(report)?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&exporter(plan.output.format).serialize(report)?)?;
    for f in exports.stdout_formats() {
        if f == plan.output.format {
            continue; // already printed: one document, not two
        }
        stdout.write_all(&exporter(f).serialize(report)?)?;
    }
    stdout.flush()?;
    Ok(())
}

//! The measuring commands (`stream`, `pingpong`, `rate`, `connect`): check the flags into
//! a plan, run it scenario by scenario (exports rewritten after each), print the report,
//! and turn the outcome into the exit status.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use super::{broken_pipe, empty_report, print_error_document, FAILED, INTERRUPTED, USAGE};
use crate::cli::{Args, Format};
use crate::error::PlanError;
use crate::plan::Plan;
use crate::report::{exporter, ExportManager, Report};
use crate::runner::Runner;

/// Plan a measuring command and run it.
pub fn run(args: &Args, argv: Vec<String>) -> ExitCode {
    catch_interrupts();
    execute(Plan::from_args(args), args, argv)
}

/// Route Ctrl-C to the flag before planning: a Ctrl-C while the host is probed ends the
/// run before its first scenario, with the report (which says `interrupted`), not the
/// process at once without one.
pub fn catch_interrupts() {
    if let Err(e) = crate::interrupt::install() {
        eprintln!("sockbench: warning: cannot catch Ctrl-C: {e}");
    }
}

/// Run a checked plan (or report why it could not be made) and print the report (Ctrl-C
/// caught already, see [`catch_interrupts`]).
pub fn execute(plan: Result<Plan, PlanError>, args: &Args, argv: Vec<String>) -> ExitCode {
    let plan = match plan {
        Ok(p) => p,
        Err(e) => {
            let code = match e {
                PlanError::Unavailable(_) => FAILED,
                _ => USAGE,
            };
            if args.output.format == Format::Json {
                print_error_document(&argv, &e.to_string());
            }
            eprintln!("sockbench: error: {e}");
            return ExitCode::from(code);
        }
    };
    let exports = ExportManager::new(plan.output.exports.clone(), plan.output.view);
    let mut report = empty_report(argv);
    report.skipped = plan.skipped.clone();
    report.warnings = plan.notes.clone();
    report.layout = plan.layout;
    if let Err(e) = Runner::new(&plan, &exports).run(&mut report) {
        report.error = Some(format!("{e:#}"));
    }
    report.rankings = crate::report::rankings::of(&report.results, report.layout);
    let failed = report.results.iter().filter(|r| r.error.is_some()).count();
    if report.error.is_none() && failed > 0 {
        report.error = Some(format!(
            "{failed} of {} scenarios failed",
            report.results.len()
        ));
    }
    exports.finish(&report);
    // A Ctrl-C after the last scenario (while an export waited for a FIFO's reader)
    // interrupted the command too.
    report.interrupted |= crate::interrupt::requested();
    let mut status = if report.interrupted {
        INTERRUPTED
    } else if report.error.is_some() || !exports.failures().is_empty() {
        FAILED
    } else {
        0
    };
    if let Err(e) = print(&plan, &exports, &report) {
        if !broken_pipe(&e) {
            eprintln!("sockbench: error: cannot print the report: {e:#}");
            if status == 0 {
                status = FAILED;
            }
        }
    }
    // A table on the terminal already names each failed scenario's error under it: say
    // it once. Anywhere else (a file, a pipe, JSON) stderr is where a person sees it.
    let errors_shown = matches!(plan.output.format, Format::Table | Format::Markdown)
        && std::io::stdout().is_terminal();
    if !errors_shown {
        for r in report.results.iter().filter(|r| r.error.is_some()) {
            eprintln!(
                "sockbench: error: {}: {}",
                r.label(),
                r.error.as_deref().unwrap_or_default()
            );
        }
    }
    if let Some(e) = &report.error {
        eprintln!("sockbench: error: {e}");
    }
    for f in exports.failures() {
        eprintln!("sockbench: error: not written: {f}");
    }
    ExitCode::from(status)
}

fn print(plan: &Plan, exports: &ExportManager, report: &Report) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    let view = plan.output.view;
    stdout.write_all(&exporter(plan.output.format, view).serialize(report)?)?;
    for f in exports.stdout_formats() {
        if f == plan.output.format {
            continue; // already printed: one document, not two
        }
        stdout.write_all(&exporter(f, view).serialize(report)?)?;
    }
    stdout.flush()?;
    Ok(())
}

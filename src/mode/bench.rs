//! The measuring commands (`stream`, `pingpong`, `rate`, `connect`): check the flags into
//! a plan, run it scenario by scenario (exports rewritten after each), print the report,
//! and say how it ended.

use super::empty_report;
use crate::cli::{Args, Command};
use crate::error::{CommandResult, Outcome, PlanError};
use crate::plan::Plan;
use crate::report::{ExportManager, Kind, Report};
use crate::runner::Runner;
use std::io::IsTerminal;

/// Plan a measuring command and run it.
///
/// # Errors
/// As [`execute`].
pub fn run(args: &Args, argv: Vec<String>) -> CommandResult {
    // Before planning: a Ctrl-C while the host is probed ends the run before its first
    // scenario, with the report (which says `interrupted`), not the process at once
    // without one.
    super::catch_interrupts()?;
    execute(Plan::from_args(args), args, argv)
}

/// Run a checked plan (or report why it could not be made) and print the report (Ctrl-C
/// caught already, see [`super::catch_interrupts`]).
///
/// # Errors
/// The plan's error: a usage error, or a system that cannot do what was asked.
pub fn execute(plan: Result<Plan, PlanError>, args: &Args, argv: Vec<String>) -> CommandResult {
    let plan = plan?;
    let exports = ExportManager::new(plan.output.exports.clone(), plan.output.view);
    let kind = match &args.command {
        Some(Command::Stream(_)) => Kind::Stream,
        Some(Command::Pingpong(_)) => Kind::Pingpong,
        Some(Command::Rate(_)) => Kind::Rate,
        Some(Command::Connect(_)) => Kind::Connect,
        _ => Kind::Suite,
    };
    let mut report = empty_report(kind, argv);
    report.skipped = plan.skipped.clone();
    report.warnings = plan.notes.clone();
    report.layout = plan.layout;
    if let Err(e) = Runner::new(&plan, &exports).run(&mut report) {
        report.error = Some(format!("{e:#}"));
    }
    report.rankings = crate::report::rankings::of(&report.results, report.layout);
    report.ended_at = Some(crate::report::envelope::now());
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
    let printed = print(&plan, &exports, &report);
    let mut errors = Vec::new();
    // A table on the terminal already names each failed scenario's error under it: say
    // it once. Anywhere else (a file, a pipe, JSON) stderr is where a person sees it.
    let errors_shown =
        crate::report::names_errors(plan.output.format) && std::io::stdout().is_terminal();
    if !errors_shown {
        for r in report.results.iter().filter(|r| r.error.is_some()) {
            let said = r.error.as_deref().unwrap_or_default();
            errors.push(format!("{}: {said}", r.label()));
        }
    }
    errors.extend(report.error.clone());
    errors.extend(super::unwritten(printed, &exports));
    Ok(Outcome::of(report.interrupted, report.error.is_some()).and_errors(errors))
}

fn print(plan: &Plan, exports: &ExportManager, report: &Report) -> anyhow::Result<()> {
    super::print_document(report, plan.output.format, plan.output.view, exports)
}

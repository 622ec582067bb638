//! The `sockbench` command: parse, plan, run, report, exit.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use sockbench::cli::{Args, Format};
use sockbench::environment::Environment;
use sockbench::error::PlanError;
use sockbench::plan::Plan;
use sockbench::report::{exporter, ExportManager, Report, Tool, SCHEMA_VERSION};
use sockbench::runner::Runner;

/// Exit code for a runtime failure.
const FAILED: u8 = 1;
/// Exit code for bad usage (as clap's own).
const USAGE: u8 = 2;
/// Exit code after Ctrl-C / SIGTERM / SIGHUP (128 + SIGINT, as shells report it).
const INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    // The command line as given; an argument that is not UTF-8 is shown with U+FFFD.
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let args = match Args::try_parse_from(std::env::args_os()) {
        Ok(a) => a,
        Err(e) => return usage_error(e, &argv),
    };
    let plan = match Plan::from_args(&args) {
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
    if let Err(e) = sockbench::interrupt::install() {
        eprintln!("sockbench: warning: cannot catch Ctrl-C: {e}");
    }
    let exports = ExportManager::new(plan.output.exports.clone(), args.output.view());
    let mut report = empty_report(argv);
    report.skipped = plan.skipped.clone();
    report.warnings = plan.notes.clone();
    report.layout = plan.layout;
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
    exports.finish(&report);
    let mut status = if report.interrupted {
        INTERRUPTED
    } else if report.error.is_some() || !exports.failures().is_empty() {
        FAILED
    } else {
        0
    };
    if let Err(e) = print(&plan, &exports, &report) {
        // A closed stdout (`sockbench | head`) loses the table, not the outcome: the exit
        // status stays the one the run earned.
        let broken_pipe = e.downcast_ref::<std::io::Error>().map(|e| e.kind())
            == Some(std::io::ErrorKind::BrokenPipe);
        if !broken_pipe {
            eprintln!("sockbench: error: cannot print the report: {e:#}");
            if status == 0 {
                status = FAILED;
            }
        }
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
    for f in exports.failures() {
        eprintln!("sockbench: error: not written: {f}");
    }
    ExitCode::from(status)
}

/// A report with nothing in it yet.
fn empty_report(command: Vec<String>) -> Report {
    Report {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "sockbench".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        command,
        environment: Environment::collect(),
        results: Vec::new(),
        skipped: Vec::new(),
        warnings: Vec::new(),
        interrupted: false,
        error: None,
        layout: Default::default(),
    }
}

/// Under `--format json` even a usage error is a JSON document, with the error in it.
fn print_error_document(argv: &[String], error: &str) {
    let mut report = empty_report(argv.to_vec());
    report.error = Some(error.to_string());
    if let Ok(bytes) = exporter(Format::Json, Default::default()).serialize(&report) {
        let _ = std::io::stdout().lock().write_all(&bytes);
    }
}

/// Whether the raw command line asks for JSON on stdout (clap could not parse it).
fn wants_json(argv: &[String]) -> bool {
    argv.iter().any(|a| a == "--format=json")
        || argv
            .windows(2)
            .any(|w| w[0] == "--format" && w[1] == "json")
}

/// Help and version go to stdout as clap prints them; anything else is a usage error (2).
fn usage_error(e: clap::Error, argv: &[String]) -> ExitCode {
    if !e.use_stderr() {
        let _ = e.print();
        return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(USAGE));
    }
    if wants_json(argv) {
        let text = e.render().to_string();
        let first = text
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ");
        print_error_document(argv, first);
    }
    let _ = e.print();
    if let Some(tip) = command_first_tip(&e, argv) {
        eprintln!("{tip}");
    }
    ExitCode::from(USAGE)
}

/// `sockbench -t tcp`: options given without a command. The options belong to a workload;
/// suggest the most common one with the same arguments.
fn command_first_tip(e: &clap::Error, argv: &[String]) -> Option<String> {
    use clap::CommandFactory;
    if e.kind() != clap::error::ErrorKind::UnknownArgument {
        return None;
    }
    let commands: Vec<String> = Args::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let rest = argv.get(1..).unwrap_or_default();
    if rest.iter().any(|a| commands.contains(a)) {
        return None;
    }
    // Only when `stream` would take them as they are.
    let with_stream = ["sockbench", "stream"].into_iter().map(String::from);
    Args::try_parse_from(with_stream.chain(rest.iter().cloned())).ok()?;
    Some(format!(
        "tip: options like these follow a command ({}): try `sockbench stream {}`",
        commands
            .iter()
            .filter(|c| *c != "help")
            .cloned()
            .collect::<Vec<_>>()
            .join(", "),
        rest.join(" ")
    ))
}

fn print(plan: &Plan, exports: &ExportManager, report: &Report) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&exporter(plan.output.format, plan.output.view).serialize(report)?)?;
    for f in exports.stdout_formats() {
        if f == plan.output.format {
            continue; // already printed: one document, not two
        }
        stdout.write_all(&exporter(f, plan.output.view).serialize(report)?)?;
    }
    stdout.flush()?;
    Ok(())
}

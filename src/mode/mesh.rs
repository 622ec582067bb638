//! `sockbench mesh`: read the flags, find the agents, run the mesh
//! ([`crate::mesh::coordinator`]) and print its report ([`crate::mesh::report`], or
//! [`crate::mesh::html`]'s page).

use std::io::Write;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{FAILED, INTERRUPTED};
use crate::cli::{Format, MeshArgs, OutputArgs};
use crate::control::auth::Key;
use crate::measure::units::{parse_duration, parse_size};
use crate::mesh::coordinator::{
    self, dedupe_hosts, hosts_file_entries, hosts_from_dns, parse_hosts, Options,
};
use crate::mesh::html;
use crate::mesh::report::{self, Settings};
use crate::mesh::schedule::Pairs;
use crate::mesh::{Outcome, WORKLOADS};
use crate::report::export::{self, ExportKind};

/// Most agents in one mesh.
const MAX_HOSTS: usize = 1000;

fn usage(msg: impl std::fmt::Display) -> ExitCode {
    super::usage_error(msg)
}

fn failed(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("sockbench: error: {msg}");
    ExitCode::from(FAILED)
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The agents the flags name, in order: `--hosts`, then the file, then DNS.
fn hosts(args: &MeshArgs) -> Result<Vec<(String, String)>, String> {
    let mut entries = args.hosts.clone();
    if let Some(path) = &args.hosts_file {
        let text = crate::input::read_text(path, crate::input::HOSTS)
            .map_err(|e| format!("--hosts-file: {e:#}"))?;
        entries.extend(hosts_file_entries(&text));
    }
    let mut hosts = parse_hosts(&entries, args.port)?;
    if let Some(name) = &args.hosts_from_dns {
        for h in hosts_from_dns(name, args.port)? {
            if !hosts.iter().any(|(_, a)| *a == h.1) {
                hosts.push(h);
            }
        }
    }
    enough(hosts)
}

/// At least two agents and at most [`MAX_HOSTS`].
fn enough(hosts: Vec<(String, String)>) -> Result<Vec<(String, String)>, String> {
    if hosts.len() < 2 {
        return Err(format!(
            "a mesh needs at least two agents, and {} {} given: name them with --hosts A,B,..., --hosts-file or --hosts-from-dns",
            hosts.len(),
            if hosts.len() == 1 { "was" } else { "were" }
        ));
    }
    if hosts.len() > MAX_HOSTS {
        return Err(format!(
            "{} agents: a mesh takes at most {MAX_HOSTS}",
            hosts.len()
        ));
    }
    Ok(hosts)
}

/// Run a mesh.
pub fn run(args: &MeshArgs, output: &OutputArgs, argv: Vec<String>) -> ExitCode {
    let format = output.format;
    if !matches!(
        format,
        Format::Table | Format::Json | Format::Openmetrics | Format::Html
    ) {
        return usage(
            "mesh prints a table (the default), --format json, --format openmetrics or --format html",
        );
    }
    if output.export_csv.is_some() || output.export_markdown.is_some() {
        return usage(
            "mesh's report is one document: --export-json PATH, --export-openmetrics PATH or --export-html PATH",
        );
    }
    // Checked before anything runs, and written as every export is: a FIFO's reader is
    // waited for a few seconds at most, and Ctrl-C ends that wait.
    let wanted: Vec<_> = [
        (Format::Json, &output.export_json),
        (Format::Openmetrics, &output.export_openmetrics),
        (Format::Html, &output.export_html),
    ]
    .into_iter()
    .filter_map(|(f, p)| Some((ExportKind::Report(f), p.clone()?)))
    .collect();
    let exports = match export::prepare(&wanted) {
        Ok(e) => e,
        Err(e) => return usage(e),
    };
    let hosts = match hosts(args) {
        Ok(h) => h,
        Err(e) => return usage(e),
    };
    let pairs = match Pairs::parse(&args.pairs) {
        Ok(p) => p,
        Err(e) => return usage(e),
    };
    let mut tests: Vec<String> = Vec::new();
    for t in args
        .tests
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
    {
        if !WORKLOADS.contains(&t) {
            return usage(format!(
                "--tests: unknown test '{t}': choose from {}",
                WORKLOADS.join(", ")
            ));
        }
        if !tests.iter().any(|x| x == t) {
            tests.push(t.to_string());
        }
    }
    if tests.is_empty() {
        return usage(format!(
            "--tests: name at least one of {}",
            WORKLOADS.join(", ")
        ));
    }
    let duration = match parse_duration(&args.duration) {
        Ok(d) if !d.is_zero() => d,
        Ok(_) => return usage("--duration must be above 0"),
        Err(e) => return usage(format!("--duration: {e}")),
    };
    let warmup = match parse_duration(&args.warmup) {
        Ok(d) => d,
        Err(e) => return usage(format!("--warmup: {e}")),
    };
    let timeout = match parse_duration(&args.timeout) {
        Ok(d) => d,
        Err(e) => return usage(format!("--timeout: {e}")),
    };
    let size = match args.size.as_deref().map(parse_size).transpose() {
        Ok(Some(0)) => return usage("--size must be above 0"),
        Ok(s) => s,
        Err(e) => return usage(format!("--size: {e}")),
    };
    if args.parallel == 0 || args.parallel > 128 {
        return usage("-P must be between 1 and 128");
    }
    let key = match &args.key_file {
        Some(p) => match Key::load(p) {
            Ok(k) => Some(k),
            Err(e) => return usage(format!("{e:#}")),
        },
        None => None,
    };
    // One agent under two spellings (localhost and 127.0.0.1) is one host of the mesh.
    // Names are resolved for this once every flag is known to be good.
    let (hosts, notes) = dedupe_hosts(hosts, coordinator::resolve);
    for n in notes {
        eprintln!("sockbench: note: {n}");
    }
    let hosts = match enough(hosts) {
        Ok(h) => h,
        Err(e) => return usage(e),
    };
    if let Err(e) = crate::interrupt::install() {
        return failed(format!("cannot handle Ctrl-C: {e}"));
    }
    let seed = args
        .seed
        .unwrap_or_else(|| now_ns() ^ u64::from(std::process::id()));
    let opts = Options {
        hosts,
        tests: tests.clone(),
        duration_s: duration.as_secs_f64(),
        warmup_s: warmup.as_secs_f64(),
        parallel: args.parallel,
        size,
        pairs,
        seed,
        concurrent: args.concurrent,
        timeout,
        quiet: output.quiet,
    };
    let started = now_ns();
    let out = coordinator::run(&opts, key.as_ref());
    let settings = Settings {
        pairs: args.pairs.join(" "),
        concurrent: args.concurrent,
        seed: matches!(pairs, Pairs::Random(_)).then_some(seed),
        rounds: out.rounds,
        tests,
        duration_s: opts.duration_s,
        warmup_s: opts.warmup_s,
        parallel: opts.parallel,
        size,
        started_unix_ns: started,
        ended_unix_ns: now_ns().max(started),
    };
    let all_failed = !out.tests.is_empty()
        && out
            .tests
            .iter()
            .all(|t| matches!(t.outcome, Outcome::Failed { .. }));
    let nothing_ran = out.tests.is_empty();
    let mut doc = report::build(argv, settings, out.hosts, out.tests, out.interrupted);
    let mut not_written = false;
    for e in &exports {
        let text = match e.kind {
            ExportKind::Report(Format::Openmetrics) => report::openmetrics(&doc),
            ExportKind::Report(Format::Html) => html::html(&doc),
            _ => json(&doc),
        };
        if let Err(err) = export::write_document(e, text.as_bytes()) {
            eprintln!(
                "sockbench: error: cannot write {} {}: {err:#}",
                e.kind.flag(),
                e.given.display()
            );
            not_written = true;
        }
    }
    // A Ctrl-C while an export waited for a FIFO's reader interrupted the command too.
    doc.interrupted |= crate::interrupt::requested();
    let interrupted = doc.interrupted;
    let text = match format {
        Format::Json => json(&doc),
        Format::Openmetrics => report::openmetrics(&doc),
        Format::Html => html::html(&doc),
        _ => report::table(&doc),
    };
    if let Err(e) = std::io::stdout().lock().write_all(text.as_bytes()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return failed(format!("cannot write the report: {e}"));
        }
    }
    if interrupted {
        ExitCode::from(INTERRUPTED)
    } else if not_written {
        ExitCode::from(FAILED)
    } else if all_failed || nothing_ran {
        eprintln!("sockbench: error: no test of the mesh could run: see the failures above");
        ExitCode::from(FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

fn json(doc: &report::MeshReport) -> String {
    let mut s = serde_json::to_string_pretty(doc).expect("the mesh report serializes");
    s.push('\n');
    s
}

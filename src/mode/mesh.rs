//! `sockbench mesh`: read the flags, find the agents, run the mesh
//! ([`crate::mesh::coordinator`]) and print its document ([`crate::mesh::report`]) in
//! any format, the HTML page with [`crate::mesh::heat`]'s heat maps.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::cli::MeshArgs;
use crate::control::auth::Key;
use crate::control::messages::WORKLOADS;
use crate::error::{CommandResult, Error, Outcome as Ended, PlanError};
use crate::mesh::coordinator::{
    self, dedupe_hosts, hosts_file_entries, hosts_from_dns, parse_hosts, Options,
};
use crate::mesh::report::{self, Settings};
use crate::mesh::schedule::Pairs;
use crate::mesh::Outcome;
use crate::vocab::units::{parse_duration, parse_size};

/// How long each test measures when -d is not given.
const DEFAULT_DURATION: Duration = Duration::from_secs(5);
/// The warm-up before each test when -w is not given.
const DEFAULT_WARMUP: Duration = Duration::from_millis(500);

/// Most agents in one mesh.
const MAX_HOSTS: usize = 1000;

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The agents the flags name, in order: `--hosts`, then the file, then DNS.
///
/// # Errors
/// A usage error (a host badly written, too few or too many, a hosts file that is not
/// one), or a name that does not resolve ([`PlanError::Unavailable`], as `load`'s host).
fn hosts(args: &MeshArgs) -> Result<Vec<(String, String)>, PlanError> {
    let mut entries = args.hosts.clone();
    if let Some(path) = &args.hosts_file {
        let text = crate::input::read_text(path, crate::input::HOSTS)
            .map_err(|e| format!("--hosts-file: {e:#}"))?;
        entries.extend(hosts_file_entries(&text));
    }
    let mut hosts = parse_hosts(&entries, args.port)?;
    if let Some(name) = &args.hosts_from_dns {
        for h in hosts_from_dns(name, args.port).map_err(PlanError::Unavailable)? {
            if !hosts.iter().any(|(_, a)| *a == h.1) {
                hosts.push(h);
            }
        }
    }
    Ok(enough(hosts)?)
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
///
/// # Errors
/// A usage error.
pub fn run(args: &MeshArgs, argv: Vec<String>) -> CommandResult {
    let output = &args.output;
    let exports = super::exports(output)?;
    let hosts = hosts(args)?;
    let pairs = match Pairs::parse(&args.pairs) {
        Ok(p) => p,
        Err(e) => return Err(Error::usage(e)),
    };
    let mut tests: Vec<String> = Vec::new();
    for t in args
        .tests
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
    {
        if !WORKLOADS.contains(&t) {
            return Err(Error::usage(format!(
                "--tests: unknown test '{t}': choose from {}",
                WORKLOADS.join(", ")
            )));
        }
        if !tests.iter().any(|x| x == t) {
            tests.push(t.to_string());
        }
    }
    if tests.is_empty() {
        return Err(Error::usage(format!(
            "--tests: name at least one of {}",
            WORKLOADS.join(", ")
        )));
    }
    let duration = args.duration.or(DEFAULT_DURATION).map_err(Error::Usage)?;
    if duration.is_zero() {
        return Err(Error::usage("--duration must be above 0"));
    }
    let warmup = args.warmup.or(DEFAULT_WARMUP).map_err(Error::Usage)?;
    let timeout = match parse_duration(&args.timeout) {
        Ok(d) => d,
        Err(e) => return Err(Error::usage(format!("--timeout: {e}"))),
    };
    let size = match args.sizes.size.as_deref().map(parse_size).transpose() {
        Ok(Some(0)) => return Err(Error::usage("--size must be above 0")),
        Ok(s) => s,
        Err(e) => return Err(Error::usage(format!("--size: {e}"))),
    };
    if args.parallel == 0 || args.parallel > 128 {
        return Err(Error::usage("-P must be between 1 and 128"));
    }
    let key = match &args.key_file {
        Some(p) => match Key::load(p) {
            Ok(k) => Some(k),
            Err(e) => return Err(Error::usage(format!("{e:#}"))),
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
        Err(e) => return Err(Error::usage(e)),
    };
    super::catch_interrupts()?;
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
    exports.finish(&doc);
    // A Ctrl-C while an export waited for a FIFO's reader interrupted the command too.
    doc.envelope.interrupted |= crate::interrupt::requested();
    let unwritten = super::emit(&doc, output, &exports);
    let ended = match doc.envelope.interrupted {
        true => Ended::interrupted(),
        false if all_failed || nothing_ran => {
            Ended::done().and_error("no test of the mesh could run: see the failures above")
        }
        false => Ended::done(),
    };
    Ok(ended.and_errors(unwritten))
}

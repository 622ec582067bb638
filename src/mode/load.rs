//! `sockbench load URL`: an HTTP/1.1 load generator, as ab (`-n`, `-k`) and wrk (`-d`,
//! and wrk2's `--rate`) are. Checks the flags into a [`crate::load::Spec`] (every usage
//! error before a socket opens), runs it with [`crate::load::run`], and prints the
//! report as ab's summary or as the one JSON document (kind `load`).
//!
//! Exit status: 0 some requests were answered; 1 none were (the message says why and
//! what to try); 2 bad usage; 130 Ctrl-C (after printing what was measured).

use crate::cli::LoadArgs;
use crate::error::{CommandResult, Error, Outcome, PlanError};
use crate::load::request::{parse_header, parse_method};
use crate::load::url::Url;
use crate::load::{Spec, Target, DEFAULT_DURATION};
use crate::vocab::units::{parse_duration, parse_rate};

/// Most connections.
pub const MAX_CONNECTIONS: u32 = 1_000_000;
/// Most requests in flight per connection.
pub const MAX_PIPELINE: u32 = 1024;
/// Most generator threads.
pub const MAX_THREADS: usize = 1024;
/// Descriptors kept for everything besides the connections.
const SPARE_FDS: u64 = 32;

fn usage<T>(msg: impl Into<String>) -> Result<T, PlanError> {
    Err(PlanError::Invalid(msg.into()))
}

/// Make room for `connections` descriptors: raise the soft limit (up to the hard one)
/// when it is too low; an error names the limit when even the hard one is.
///
/// # Errors
/// [`PlanError::Unavailable`]: the limit cannot be raised far enough.
fn descriptors(connections: u32) -> Result<(), PlanError> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let need = u64::from(connections) + SPARE_FDS;
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return Ok(());
    };
    if need <= soft {
        return Ok(());
    }
    if need > hard {
        return Err(PlanError::Unavailable(format!(
            "-c {connections} needs {need} descriptors, over the hard limit of {hard} (`ulimit -Hn`): \
             use -c {} or fewer, or raise the limit (as root: ulimit -Hn {need})",
            hard.saturating_sub(SPARE_FDS)
        )));
    }
    setrlimit(Resource::RLIMIT_NOFILE, need.max(soft), hard).map_err(|e| {
        PlanError::Unavailable(format!("cannot raise the descriptor limit to {need}: {e}"))
    })
}

/// Check the flags and build the spec (resolving the host last, after every usage
/// check).
///
/// # Errors
/// [`PlanError::Invalid`] names the flag and what to write; [`PlanError::Unavailable`] says
/// the host has no address.
pub fn spec(args: &LoadArgs) -> Result<Spec, PlanError> {
    let url = Url::parse(&args.url).map_err(PlanError::Invalid)?;
    let method = parse_method(&args.method).map_err(PlanError::Invalid)?;
    let headers = args
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>, _>>()
        .map_err(PlanError::Invalid)?;
    if args.requests == Some(0) {
        return usage("-n must be at least 1");
    }
    let duration = match args.duration.parsed() {
        Ok(Some(d)) if d.is_zero() => return usage("--duration must be more than 0"),
        Ok(d) => d,
        Err(e) => return usage(e),
    };
    let duration = match (args.requests, duration) {
        (None, None) => Some(DEFAULT_DURATION),
        (_, d) => d,
    };
    if args.connections == 0 || args.connections > MAX_CONNECTIONS {
        return usage(format!("-c must be between 1 and {MAX_CONNECTIONS}"));
    }
    if args.pipeline == 0 || args.pipeline > MAX_PIPELINE {
        return usage(format!(
            "--pipeline must be between 1 (one request at a time) and {MAX_PIPELINE}"
        ));
    }
    let rate = match &args.rate {
        None => None,
        Some(r) => Some(parse_rate(r).map_err(|e| PlanError::Invalid(format!("--rate: {e}")))?),
    };
    // Each connection's interval between requests must be a time (a day at most).
    if let Some(r) = rate {
        if f64::from(args.connections) / r > 86_400.0 {
            return usage(format!(
                "--rate {} over {} connections is under one request a day on each: give a higher rate",
                args.rate.as_deref().unwrap_or_default().trim(),
                args.connections
            ));
        }
    }
    let timeout = match parse_duration(&args.timeout) {
        Ok(t) if !t.is_zero() => t,
        Ok(_) => return usage("--timeout must be more than 0"),
        Err(e) => return usage(format!("--timeout: {e}")),
    };
    let cpus = match &args.cpus.cpus {
        None => Vec::new(),
        Some(list) => {
            list.within(&super::serve::allowed_cpus())
                .map_err(PlanError::Invalid)?;
            list.0.clone()
        }
    };
    let connections = args.connections;
    let threads = match args.threads {
        Some(0) => return usage("-t must be at least 1"),
        Some(t) if t > MAX_THREADS => return usage(format!("-t must be at most {MAX_THREADS}")),
        Some(t) if t > connections as usize => {
            return usage(format!(
                "-t {t} is more than -c {connections}: every thread needs a connection (raise -c or lower -t)"
            ))
        }
        Some(t) => t,
        None => {
            let cpus_usable = if cpus.is_empty() {
                std::thread::available_parallelism().map_or(1, |n| n.get())
            } else {
                cpus.len()
            };
            cpus_usable.min(connections as usize).max(1)
        }
    };
    let target = match &args.unix_socket {
        Some(p) => {
            let len = p.as_os_str().len();
            if len > crate::transport::UNIX_PATH_MAX {
                return usage(format!(
                    "--unix-socket {} is {len} bytes; a Unix socket path holds at most {}",
                    p.display(),
                    crate::transport::UNIX_PATH_MAX
                ));
            }
            Target::Unix(p.clone())
        }
        None => Target::Tcp(url.resolve().map_err(|e| {
            PlanError::Unavailable(format!(
                "cannot resolve {}: {e} (check the name, or give an IP address)",
                url.host
            ))
        })?),
    };
    Ok(Spec {
        target,
        host: url.host_header(),
        path: url.path.clone(),
        method,
        headers,
        requests: args.requests,
        duration,
        connections,
        keepalive: args.keepalive || args.pipeline > 1,
        pipeline: args.pipeline,
        rate,
        threads,
        timeout,
        cpus,
    })
}

/// Run `sockbench load`.
///
/// # Errors
/// A usage error, or a target that cannot be reached or a limit too low to start.
pub fn run(args: &LoadArgs, argv: Vec<String>) -> CommandResult {
    let output = &args.output;
    let exports = super::exports(output)?;
    let spec = spec(args)?;
    descriptors(spec.connections)?;
    super::catch_interrupts()?;
    // Each run on its own; the report is the median run's, with every run's figure.
    let mut runs = Vec::new();
    let mut later_error = None;
    for i in 0..args.runs.runs {
        let outcome = match i > 0 && crate::testhooks::fault("later-run-fails") {
            true => Err(anyhow::anyhow!("test fault")),
            false => crate::load::run(&spec, !output.quiet),
        };
        match outcome {
            Ok(r) => {
                let stop = r.envelope.error.is_some() || r.envelope.interrupted;
                runs.push(r);
                if stop || crate::interrupt::requested() {
                    break;
                }
            }
            Err(e) if runs.is_empty() => return Err(Error::failed(format!("{e:#}"))),
            Err(e) => {
                // The runs before it stand; the command failed.
                later_error = Some(format!("run {} of {} failed: {e:#}", i + 1, args.runs.runs));
                break;
            }
        }
    }
    let mut report = median_run(runs);
    if report.envelope.error.is_none() {
        report.envelope.error = later_error;
    }
    report.envelope.command = argv;
    report.envelope.end();
    exports.finish(&report);
    // A Ctrl-C while an export waited for a FIFO's reader interrupted the command too.
    report.envelope.interrupted |= crate::interrupt::requested();
    let unwritten = super::emit(&report, output, &exports);
    let envelope = &report.envelope;
    // An interrupted run's error is what the interruption cut short: not said again.
    let said = envelope.error.clone().filter(|_| !envelope.interrupted);
    Ok(Outcome::of(envelope.interrupted, envelope.error.is_some())
        .and_errors(said)
        .and_errors(unwritten))
}

/// The run a report of several is: a failed or interrupted run (the last, as they stop
/// there), else the median by requests per second (the lower middle of an even count),
/// with every run's figure in `runs_requests_per_second` when there were several.
fn median_run(mut runs: Vec<crate::load::LoadReport>) -> crate::load::LoadReport {
    let each: Vec<f64> = runs.iter().map(|r| r.body.requests_per_second).collect();
    let started = runs[0].envelope.started_at.clone();
    let last = runs.len() - 1;
    let stopped = runs[last].envelope.error.is_some() || runs[last].envelope.interrupted;
    let pick = crate::measure::stats::standing_run(&each, stopped).unwrap_or(last);
    let mut r = runs.swap_remove(pick);
    // The command began with the first run.
    r.envelope.started_at = started;
    if each.len() > 1 {
        r.body.runs_requests_per_second = each;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn args(extra: &[&str]) -> LoadArgs {
        use clap::Parser;
        let mut v = vec!["sockbench", "load"];
        v.extend_from_slice(extra);
        match crate::cli::Args::try_parse_from(v).unwrap().command {
            Some(crate::cli::Command::Load(l)) => l,
            other => panic!("{other:?}"),
        }
    }

    fn usage_of(extra: &[&str]) -> String {
        match spec(&args(extra)) {
            Err(PlanError::Invalid(e)) => e,
            other => panic!("{extra:?}: {other:?}"),
        }
    }

    #[test]
    fn a_url_becomes_a_spec_as_ab_would_run_it() {
        let s = spec(&args(&["http://127.0.0.1:8081/x?y"])).unwrap();
        assert_eq!(s.target, Target::Tcp("127.0.0.1:8081".parse().unwrap()));
        assert_eq!(
            (s.host.as_str(), s.path.as_str()),
            ("127.0.0.1:8081", "/x?y")
        );
        assert_eq!((s.requests, s.duration), (None, Some(DEFAULT_DURATION)));
        assert_eq!(
            (s.connections, s.keepalive, s.pipeline, s.threads),
            (1, false, 1, 1)
        );
        let s = spec(&args(&[
            "-n",
            "5",
            "-c",
            "4",
            "--pipeline",
            "2",
            "http://[::1]/",
        ]))
        .unwrap();
        assert_eq!((s.requests, s.duration), (Some(5), None));
        assert!(s.keepalive, "pipelining implies keep-alive");
        assert_eq!(s.target, Target::Tcp("[::1]:80".parse().unwrap()));
        assert!(s.threads >= 1 && s.threads <= 4);
        let s = spec(&args(&[
            "--unix-socket",
            "/tmp/x.sock",
            "-m",
            "head",
            "-H",
            "X-A: 1",
            "--rate",
            "2k",
            "--timeout",
            "500ms",
            "http://localhost/",
        ]))
        .unwrap();
        assert_eq!(s.target, Target::Unix("/tmp/x.sock".into()));
        assert_eq!((s.host.as_str(), s.method.as_str()), ("localhost", "HEAD"));
        assert_eq!(s.headers, [("X-A".to_string(), "1".to_string())]);
        assert_eq!(
            (s.rate, s.timeout),
            (Some(2000.0), Duration::from_millis(500))
        );
    }

    #[test]
    fn bad_usage_is_refused_with_what_to_do() {
        assert!(usage_of(&["https://127.0.0.1/"]).contains("https"));
        assert!(usage_of(&["127.0.0.1"]).contains("http://"));
        assert!(usage_of(&["-c", "0", "http://h/"]).contains("-c"));
        assert!(usage_of(&["--pipeline", "0", "http://h/"]).contains("--pipeline"));
        assert!(usage_of(&["-n", "0", "http://h/"]).contains("-n"));
        assert!(usage_of(&["-d", "0", "http://h/"]).contains("--duration"));
        assert!(usage_of(&["-d", "xyz", "http://h/"]).contains("--duration"));
        assert!(usage_of(&["--rate", "fast", "http://h/"]).contains("--rate"));
        assert!(usage_of(&["--timeout", "0", "http://h/"]).contains("--timeout"));
        assert!(usage_of(&["-H", "nocolon", "http://h/"]).contains("Name: value"));
        assert!(usage_of(&["-m", "G T", "http://h/"]).contains("method"));
        assert!(usage_of(&["-t", "3", "-c", "2", "http://h/"]).contains("every thread"));
        assert!(usage_of(&["-t", "0", "http://h/"]).contains("-t"));
        // Not a CPU list at all: clap's error, as on every command that takes --cpus.
        let line = ["sockbench", "load", "--cpus", "x", "http://h/"];
        let e = <crate::cli::Args as clap::Parser>::try_parse_from(line).unwrap_err();
        assert!(e.to_string().contains("--cpus"), "{e}");
        assert!(usage_of(&["--cpus", "4000", "http://h/"]).contains("CPU 4000"));
        let long = format!("/tmp/{}", "x".repeat(120));
        assert!(usage_of(&["--unix-socket", &long, "http://h/"]).contains("at most 107"));
    }

    #[test]
    fn an_unknown_host_is_a_runtime_failure_not_usage() {
        match spec(&args(&["http://no-such-host.invalid/"])) {
            Err(PlanError::Unavailable(e)) => assert!(e.contains("cannot resolve"), "{e}"),
            other => panic!("{other:?}"),
        }
    }
}

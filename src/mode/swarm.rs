//! `sockbench swarm`: N pairs at once in one process, on two epoll threads
//! ([`crate::reactor`]): the aggregate, each pair's share, Jain's fairness index, the
//! time to set the pairs up and the errors by kind. The machine's limits (descriptors,
//! ephemeral ports, memory) are checked first, and the soft descriptor limit raised to
//! the hard one when that is what it takes.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{FAILED, INTERRUPTED};
use crate::cli::{Format, SwarmArgs};
use crate::measure::units::{
    format_bits_per_second, format_bytes, format_per_second, parse_duration, parse_size,
};
use crate::placement::threads::RunDir;
use crate::reactor::pairs::{self, fds_per_pair};
use crate::reactor::{self, Plan, ReactorReport, Role, Work};
use crate::transport::TransportKind;

/// Version of the swarm's JSON document.
pub const SWARM_SCHEMA_VERSION: u32 = 1;
/// Most pairs.
const MAX_PAIRS: u64 = 100_000;
/// Descriptors kept free for everything else (stdio, two epolls, the listener, a file
/// read now and then).
const SPARE_FDS: u64 = 16;

/// The machine's limits as the swarm found them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Limits {
    /// RLIMIT_NOFILE soft limit before and after raising it, and the hard limit.
    pub nofile_soft_before: u64,
    /// After.
    pub nofile_soft: u64,
    /// The hard limit.
    pub nofile_hard: u64,
    /// Descriptors the swarm needs.
    pub descriptors_needed: u64,
    /// net.ipv4.ip_local_port_range's size (TCP).
    pub ephemeral_ports: Option<u64>,
    /// net.core.somaxconn (the listener takes each connection as it is made, so the
    /// backlog never holds more than one).
    pub somaxconn: Option<u64>,
    /// Memory the pairs' socket buffers may take at their defaults.
    pub buffer_memory_bytes: u64,
    /// MemAvailable.
    pub memory_available_bytes: Option<u64>,
}

/// Per-pair figures across the pairs.
#[derive(Clone, Debug, Serialize)]
pub struct Spread {
    /// Lowest.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Highest.
    pub max: f64,
}

/// The swarm's JSON document.
#[derive(Clone, Debug, Serialize)]
pub struct SwarmReport {
    /// Always `sockbench-swarm`.
    pub document: &'static str,
    /// [`SWARM_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The command line.
    pub command: Vec<String>,
    /// The work.
    pub workload: Work,
    /// The transport.
    pub transport: TransportKind,
    /// Pairs asked for.
    pub pairs_requested: u64,
    /// Pairs set up and run.
    pub pairs: u64,
    /// Bytes per write (stream) or per request and answer (pingpong).
    pub size_bytes: u64,
    /// Setting up every pair.
    pub setup_seconds: f64,
    /// The measured interval.
    pub duration_seconds: f64,
    /// Stream: bytes written by all senders; pingpong: by all askers.
    pub bytes_sent: u64,
    /// Bytes every reading end read, including the drain after the interval.
    pub bytes_received: u64,
    /// Bytes read within the interval (the aggregate's numerator).
    pub bytes_received_in_interval: u64,
    /// Stream: received bits per second within the interval, all pairs together.
    pub bits_per_second: Option<f64>,
    /// Pingpong: round trips within the interval, all pairs together.
    pub round_trips: Option<u64>,
    /// Pingpong: round trips per second.
    pub round_trips_per_second: Option<f64>,
    /// Each pair's bits/s (stream) or round trips/s (pingpong).
    pub per_pair: Option<Spread>,
    /// Jain's fairness index over the pairs' figures (1: all equal; 1/n: one took all).
    pub fairness_jain: Option<f64>,
    /// Pingpong: round-trip percentiles over every pair, in nanoseconds.
    pub round_trip_ns: Option<std::collections::BTreeMap<String, u64>>,
    /// Errors by kind, with how many pairs each struck.
    pub errors: std::collections::BTreeMap<String, u64>,
    /// The machine's limits.
    pub limits: Limits,
    /// Notes (a raised limit, for one).
    pub notes: Vec<String>,
    /// Ctrl-C cut it short.
    pub interrupted: bool,
}

fn usage(msg: impl std::fmt::Display) -> ExitCode {
    super::usage_error(msg)
}

fn failed(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("sockbench: error: {msg}");
    ExitCode::from(FAILED)
}

fn sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Size of the ephemeral port range.
fn ephemeral_ports() -> Option<u64> {
    let range = sysctl("/proc/sys/net/ipv4/ip_local_port_range")?;
    let mut it = range.split_whitespace().map(|v| v.parse::<u64>().ok());
    let (lo, hi) = (it.next()??, it.next()??);
    Some(hi.saturating_sub(lo) + 1)
}

/// Check what N pairs need against what the machine gives, raising the soft descriptor
/// limit when the hard one allows. An `Err` names the limit and what to do.
fn check_limits(
    t: TransportKind,
    work: Work,
    n: u64,
    notes: &mut Vec<String>,
) -> Result<Limits, String> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(|e| format!("getrlimit: {e}"))?;
    let need = n
        .saturating_mul(fds_per_pair(t, work))
        .saturating_add(SPARE_FDS);
    let mut limits = Limits {
        nofile_soft_before: soft,
        nofile_soft: soft,
        nofile_hard: hard,
        descriptors_needed: need,
        ephemeral_ports: ephemeral_ports(),
        somaxconn: sysctl("/proc/sys/net/core/somaxconn").and_then(|s| s.parse().ok()),
        ..Limits::default()
    };
    if need > soft {
        // With CAP_SYS_RESOURCE the hard limit can rise too.
        if need > hard && setrlimit(Resource::RLIMIT_NOFILE, need, need).is_ok() {
            limits.nofile_soft = need;
            limits.nofile_hard = need;
            notes.push(format!(
                "raised the descriptor limit (RLIMIT_NOFILE, soft and hard) from {soft}/{hard} to {need}: {n} pairs need it"
            ));
            return finish(t, n, limits);
        }
        if need > hard {
            return Err(format!(
                "{n} pairs need {need} descriptors, over the hard limit of {hard} (RLIMIT_NOFILE, `ulimit -Hn`): \
                 use -n {} or fewer, or raise the hard limit (as root: `ulimit -Hn {need}`, or LimitNOFILE= in a systemd unit)",
                hard.saturating_sub(SPARE_FDS) / fds_per_pair(t, work)
            ));
        }
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
            .map_err(|e| format!("cannot raise the descriptor limit to {hard}: {e}"))?;
        limits.nofile_soft = hard;
        notes.push(format!(
            "raised the soft descriptor limit (RLIMIT_NOFILE) from {soft} to its hard limit {hard}: {n} pairs need {need}"
        ));
    }
    finish(t, n, limits)
}

/// The checks after the descriptors: ports and memory.
fn finish(t: TransportKind, n: u64, mut limits: Limits) -> Result<Limits, String> {
    if matches!(t, TransportKind::Tcp | TransportKind::Tcp6) {
        if let Some(ports) = limits.ephemeral_ports {
            if n > ports {
                return Err(format!(
                    "{n} TCP pairs need {n} ephemeral ports; net.ipv4.ip_local_port_range gives {ports}: \
                     use -n {ports} or fewer, or widen the range (`sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"`)"
                ));
            }
        }
    }
    let per_pair = match t {
        TransportKind::Pipe => 2 * 65_536,
        _ => {
            let w: u64 = sysctl("/proc/sys/net/core/wmem_default")
                .and_then(|s| s.parse().ok())
                .unwrap_or(212_992);
            let r: u64 = sysctl("/proc/sys/net/core/rmem_default")
                .and_then(|s| s.parse().ok())
                .unwrap_or(212_992);
            2 * (w + r)
        }
    };
    limits.buffer_memory_bytes = per_pair.saturating_mul(n);
    limits.memory_available_bytes = crate::plan::host::Host::probe().mem_available;
    if let Some(avail) = limits.memory_available_bytes {
        if limits.buffer_memory_bytes > avail / 2 {
            return Err(format!(
                "{n} pairs' buffers could take {} of memory, over half of the {} available (MemAvailable): use fewer pairs",
                format_bytes(limits.buffer_memory_bytes),
                format_bytes(avail)
            ));
        }
    }
    Ok(limits)
}

/// The nearest-rank percentile `p` (0..=100) of sorted `xs`.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn spread(mut xs: Vec<f64>) -> Option<Spread> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    Some(Spread {
        min: xs[0],
        p50: percentile(&xs, 50.0),
        p99: percentile(&xs, 99.0),
        max: xs[xs.len() - 1],
    })
}

/// Run `sockbench swarm`.
pub fn run(args: &SwarmArgs, output: &crate::cli::OutputArgs, argv: Vec<String>) -> ExitCode {
    let (format, quiet) = (output.format, output.quiet);
    if !matches!(format, Format::Table | Format::Json) {
        return usage("swarm's report is one document: a table (the default), --format json, or --export-json PATH (no CSV or Markdown)");
    }
    let exports = match super::own_document_exports(output, "swarm") {
        Ok(e) => e,
        Err(e) => return usage(e),
    };
    let names: Vec<&str> = pairs::TRANSPORTS.iter().map(|t| t.name()).collect();
    let Some(t) = pairs::TRANSPORTS
        .into_iter()
        .find(|t| t.name() == args.transport.trim())
    else {
        return usage(format!(
            "swarm cannot use transport '{}': use one of {} (stream transports with a listener, socketpair and pipe)",
            args.transport,
            names.join(", ")
        ));
    };
    if !matches!(format, Format::Table | Format::Json) {
        return usage("swarm prints a table (the default) or --format json");
    }
    let work = args.workload;
    let default_size = match work {
        Work::Stream => "64K",
        Work::Pingpong => "64",
    };
    let size = match parse_size(args.size.as_deref().unwrap_or(default_size)) {
        Ok(s) if (1..=16 << 20).contains(&s) => s,
        Ok(_) => return usage("--size must be between 1 byte and 16 MiB"),
        Err(e) => return usage(format!("--size: {e}")),
    };
    let duration = match parse_duration(&args.duration) {
        Ok(d) if d > Duration::ZERO && d <= Duration::from_secs(3600) => d,
        Ok(_) => return usage("--duration must be more than 0 and at most 1h"),
        Err(e) => return usage(format!("--duration: {e}")),
    };
    let n = args.pairs;
    if n == 0 || n > MAX_PAIRS {
        return usage(format!("-n must be between 1 and {MAX_PAIRS}"));
    }
    if let Err(e) = crate::interrupt::install() {
        return failed(format!("cannot handle Ctrl-C: {e}"));
    }
    let mut notes = Vec::new();
    let limits = match check_limits(t, work, n, &mut notes) {
        Ok(l) => l,
        Err(e) => return failed(e),
    };
    let progress = |msg: &str| {
        if !quiet {
            eprintln!("sockbench swarm: {msg}");
        }
    };
    for note in &notes {
        progress(note);
    }
    // What a killed sockbench left where this run makes its socket files, and a private
    // directory of this process's (named by its pid, so the next run finds it if this one
    // is killed) only when the pairs need file names.
    let base = crate::plan::default_dir_base();
    if t.uses_path() {
        for note in crate::transport::remove_stale(&base) {
            progress(&note);
            notes.push(note);
        }
    }
    let dir = match t.uses_path().then(|| RunDir::open(None)).transpose() {
        Ok(d) => d,
        Err(e) => return failed(format!("{e:#}")),
    };
    let dir_path = dir.as_ref().map(RunDir::path).unwrap_or_default();
    progress(&format!("setting up {n} {t} pairs"));
    let setup_started = Instant::now();
    let made = match pairs::make(t, work, n, &dir_path) {
        Ok(m) => m,
        Err(e) => return failed(format!("{e:#}")),
    };
    let setup = setup_started.elapsed();
    let mut errors: std::collections::BTreeMap<String, u64> = made.errors.into_iter().collect();
    let running = made.pairs.len() as u64;
    let mut report = SwarmReport {
        document: "sockbench-swarm",
        schema_version: SWARM_SCHEMA_VERSION,
        command: argv,
        workload: work,
        transport: t,
        pairs_requested: n,
        pairs: running,
        size_bytes: size,
        setup_seconds: setup.as_secs_f64(),
        duration_seconds: 0.0,
        bytes_sent: 0,
        bytes_received: 0,
        bytes_received_in_interval: 0,
        bits_per_second: None,
        round_trips: None,
        round_trips_per_second: None,
        per_pair: None,
        fairness_jain: None,
        round_trip_ns: None,
        errors: std::collections::BTreeMap::new(),
        limits,
        notes,
        interrupted: made.interrupted,
    };
    if made.interrupted || running == 0 {
        report.errors = errors;
        let code = if made.interrupted {
            ExitCode::from(INTERRUPTED)
        } else {
            eprintln!("sockbench: error: no pair could be set up");
            ExitCode::from(FAILED)
        };
        if !print(&mut report, format, &exports) {
            return ExitCode::from(FAILED);
        }
        return code;
    }
    progress(&format!(
        "{running} pairs ready in {:.2} s; running for {:.1} s",
        setup.as_secs_f64(),
        duration.as_secs_f64()
    ));
    let plan = Plan {
        work,
        size: size as usize,
        duration,
        drain: Duration::from_secs(5),
    };
    let (active, passive): (Vec<_>, Vec<_>) = made.pairs.into_iter().unzip();
    let start = Barrier::new(2);
    let outcome = std::thread::scope(|s| {
        let a = std::thread::Builder::new()
            .name("sb-swarm-a".into())
            .spawn_scoped(s, || reactor::run(Role::Active, &plan, active, &start));
        let a = match a {
            Ok(h) => h,
            Err(e) => return Err(format!("cannot start a thread: {e}")),
        };
        let p = reactor::run(Role::Passive, &plan, passive, &start);
        let a = a.join().map_err(|_| "a reactor panicked".to_string())?;
        Ok((a.map_err(|e| e.to_string())?, p.map_err(|e| e.to_string())?))
    });
    let (a, p): (ReactorReport, ReactorReport) = match outcome {
        Ok(r) => r,
        Err(e) => return failed(e),
    };
    drop(dir);
    for c in a.pairs.iter().chain(&p.pairs) {
        if let Some(e) = &c.error {
            *errors.entry(e.clone()).or_default() += 1;
        }
    }
    let interval = match work {
        Work::Stream => p.interval,
        Work::Pingpong => a.interval,
    };
    let secs = interval.as_secs_f64().max(f64::MIN_POSITIVE);
    report.duration_seconds = interval.as_secs_f64();
    report.interrupted = a.interrupted || p.interrupted;
    let ok = |i: usize| a.pairs[i].error.is_none() && p.pairs[i].error.is_none();
    match work {
        Work::Stream => {
            report.bytes_sent = a.pairs.iter().map(|c| c.sent).sum();
            report.bytes_received = p.pairs.iter().map(|c| c.received).sum();
            report.bytes_received_in_interval =
                p.pairs.iter().map(|c| c.received_in_interval).sum();
            report.bits_per_second = Some(report.bytes_received_in_interval as f64 * 8.0 / secs);
            let each: Vec<f64> = (0..p.pairs.len())
                .filter(|&i| ok(i))
                .map(|i| p.pairs[i].received_in_interval as f64 * 8.0 / secs)
                .collect();
            report.fairness_jain = Some(reactor::jain(&each));
            report.per_pair = spread(each);
        }
        Work::Pingpong => {
            report.bytes_sent = a.pairs.iter().map(|c| c.sent).sum();
            report.bytes_received = p.pairs.iter().map(|c| c.received).sum();
            let trips: u64 = a.pairs.iter().map(|c| c.round_trips).sum();
            report.round_trips = Some(trips);
            report.round_trips_per_second = Some(trips as f64 / secs);
            report.bytes_received_in_interval = trips * size * 2;
            let each: Vec<f64> = (0..a.pairs.len())
                .filter(|&i| ok(i))
                .map(|i| a.pairs[i].round_trips as f64 / secs)
                .collect();
            report.fairness_jain = Some(reactor::jain(&each));
            report.per_pair = spread(each);
            report.round_trip_ns = a.latency.as_ref().filter(|h| !h.is_empty()).map(|h| {
                [("min", 0.0), ("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9)]
                    .into_iter()
                    .map(|(k, q)| {
                        let v = if q == 0.0 {
                            h.min()
                        } else {
                            h.value_at_quantile(q / 100.0)
                        };
                        (k.to_string(), v)
                    })
                    .chain([("max".to_string(), h.max())])
                    .collect()
            });
        }
    }
    report.errors = errors;
    // Both sides counted: every byte written was read (the drain reads what was in
    // flight at the interval's end).
    // Pingpong: the answers too, each way counted by its writer and its reader.
    let answers = match work {
        Work::Stream => (0, 0),
        Work::Pingpong => (
            p.pairs.iter().map(|c| c.sent).sum::<u64>(),
            a.pairs.iter().map(|c| c.received).sum::<u64>(),
        ),
    };
    let agree = report.bytes_sent == report.bytes_received && answers.0 == answers.1;
    if !agree && !report.interrupted && report.errors.is_empty() {
        report.errors.insert(
            format!(
                "counts disagree: {} bytes written, {} read; answers: {} written, {} read",
                report.bytes_sent, report.bytes_received, answers.0, answers.1
            ),
            1,
        );
    }
    let exported = print(&mut report, format, &exports);
    if report.interrupted {
        ExitCode::from(INTERRUPTED)
    } else if !exported
        || !agree
            && report
                .errors
                .keys()
                .any(|k| k.starts_with("counts disagree"))
    {
        ExitCode::from(FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

/// Write the exports and print stdout's format; false if an export could not be written
/// (said on stderr).
fn print(r: &mut SwarmReport, format: Format, exports: &[crate::report::export::Export]) -> bool {
    let exported = super::write_own_document(r, exports);
    if let Err(e) = &exported {
        eprintln!("sockbench: error: {e:#}");
    }
    // A Ctrl-C while an export waited for a FIFO's reader interrupted the command too.
    r.interrupted |= crate::interrupt::requested();
    print_stdout(r, format);
    exported.is_ok()
}

fn print_stdout(r: &SwarmReport, format: Format) {
    let mut out = std::io::stdout().lock();
    if format == Format::Json {
        let _ = serde_json::to_writer_pretty(&mut out, r);
        let _ = writeln!(out);
        return;
    }
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED)
        .set_header([
            "swarm",
            &format!(
                "{} {} pairs, {}",
                r.pairs,
                r.transport,
                match r.workload {
                    Work::Stream => format!("stream of {} writes", format_bytes(r.size_bytes)),
                    Work::Pingpong =>
                        format!("pingpong of {} messages", format_bytes(r.size_bytes)),
                }
            ),
        ]);
    t.add_row([
        "setup",
        &format!("{:.3} s for {} pairs", r.setup_seconds, r.pairs),
    ]);
    t.add_row(["measured", &format!("{:.3} s", r.duration_seconds)]);
    match r.workload {
        Work::Stream => {
            t.add_row([
                "aggregate".to_string(),
                format!(
                    "{} ({} read in the interval)",
                    r.bits_per_second.map_or("-".into(), format_bits_per_second),
                    format_bytes(r.bytes_received_in_interval)
                ),
            ]);
        }
        Work::Pingpong => {
            t.add_row([
                "aggregate".to_string(),
                format!(
                    "{} round trips ({})",
                    r.round_trips.unwrap_or(0),
                    r.round_trips_per_second
                        .map_or("-".into(), format_per_second)
                ),
            ]);
            if let Some(l) = &r.round_trip_ns {
                let us = |k: &str| {
                    l.get(k)
                        .map_or("-".into(), |v| format!("{:.1} us", *v as f64 / 1e3))
                };
                t.add_row([
                    "round trip".to_string(),
                    format!("p50 {}, p99 {}, max {}", us("p50"), us("p99"), us("max")),
                ]);
            }
        }
    }
    if let Some(s) = &r.per_pair {
        let f = |v: f64| match r.workload {
            Work::Stream => format_bits_per_second(v),
            Work::Pingpong => format_per_second(v),
        };
        t.add_row([
            "per pair".to_string(),
            format!(
                "min {}, p50 {}, p99 {}, max {}",
                f(s.min),
                f(s.p50),
                f(s.p99),
                f(s.max)
            ),
        ]);
    }
    if let Some(j) = r.fairness_jain {
        t.add_row([
            "fairness (Jain)".to_string(),
            format!("{j:.4} (1 = every pair the same)"),
        ]);
    }
    t.add_row([
        "counts".to_string(),
        format!("{} written, {} read", r.bytes_sent, r.bytes_received),
    ]);
    let errors = if r.errors.is_empty() {
        "none".to_string()
    } else {
        r.errors
            .iter()
            .map(|(k, n)| format!("{n} x {k}"))
            .collect::<Vec<_>>()
            .join("; ")
    };
    t.add_row(["errors".to_string(), errors]);
    let _ = writeln!(out, "{t}");
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    if r.interrupted {
        let _ = writeln!(out, "interrupted: the figures cover what ran before Ctrl-C");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&xs, 50.0), 50.0);
        assert_eq!(percentile(&xs, 99.0), 99.0);
        assert_eq!(percentile(&xs, 100.0), 100.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        let s = spread(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.min, s.p50, s.p99, s.max), (1.0, 2.0, 3.0, 3.0));
        assert!(spread(Vec::new()).is_none());
    }

    #[test]
    fn a_swarm_over_the_hard_descriptor_limit_names_it() {
        use nix::sys::resource::{getrlimit, Resource};
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        let n = hard; // 2 descriptors a pair: twice the limit.
        let e =
            check_limits(TransportKind::Socketpair, Work::Stream, n, &mut Vec::new()).unwrap_err();
        assert!(e.contains("hard limit") && e.contains("ulimit -Hn"), "{e}");
        let per = fds_per_pair(TransportKind::Pipe, Work::Pingpong);
        assert_eq!(per, 4);
    }
}

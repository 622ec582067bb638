//! `sockbench swarm`: N pairs at once in one process, on two epoll threads
//! ([`crate::reactor`]): the aggregate, each pair's share, Jain's fairness index, the
//! time to set the pairs up and the errors by kind. The machine's limits (descriptors,
//! ephemeral ports, memory) are checked first, and the soft descriptor limit raised to
//! the hard one when that is what it takes.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cli::SwarmArgs;
use crate::error::{CommandResult, Error, Outcome};
use crate::measure::units::{format_bytes, format_per_second, parse_size};
use crate::placement::threads::RunDir;
use crate::reactor::pairs::{self, fds_per_pair};
use crate::reactor::{self, Plan, ReactorReport, Role, Work};
use crate::report::document::{Envelope, Kind, Written};
use crate::report::grid::Grid;
use crate::report::output::{self, Head, Rendered};
use crate::transport::TransportKind;

/// Most pairs.
const MAX_PAIRS: u64 = 100_000;
/// Descriptors kept free for everything else (stdio, two epolls, the listener, a file
/// read now and then).
const SPARE_FDS: u64 = 16;

/// The machine's limits as the swarm found them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
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

/// What `swarm` measured: the body of its document (kind `swarm`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SwarmBody {
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
    /// With `--runs`, every run's headline figure (bits/s for stream, round trips/s for
    /// pingpong), in run order; the body's other figures are the median run's. Empty for
    /// one run.
    #[serde(default)]
    pub runs: Vec<f64>,
}

/// The swarm's document as it is made: the envelope (its warnings: a raised limit, for
/// one) and the body.
#[derive(Clone, Debug)]
pub struct SwarmReport {
    /// What every document says of itself.
    pub envelope: Envelope,
    /// What the swarm measured.
    pub body: SwarmBody,
}

impl SwarmReport {
    /// The document to write.
    pub fn document(&self) -> Written<'_, SwarmBody> {
        Written {
            envelope: &self.envelope,
            kind: Kind::Swarm,
            body: &self.body,
        }
    }
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
///
/// # Errors
/// A usage error, or pairs that cannot be set up.
pub fn run(args: &SwarmArgs, argv: Vec<String>) -> CommandResult {
    let output = &args.output;
    let quiet = output.quiet;
    let exports = super::exports(output)?;
    let names: Vec<&str> = pairs::TRANSPORTS.iter().map(|t| t.name()).collect();
    let transport = args.transports.transport.as_deref().unwrap_or("unix");
    let Some(t) = pairs::TRANSPORTS
        .into_iter()
        .find(|t| t.name() == transport.trim())
    else {
        return Err(Error::usage(format!(
            "swarm cannot use transport '{}': use one of {} (stream transports with a listener, socketpair and pipe)",
            transport,
            names.join(", ")
        )));
    };
    let work = args.work;
    let default_size = match work {
        Work::Stream => "64K",
        Work::Pingpong => "64",
    };
    let size = match parse_size(args.sizes.size.as_deref().unwrap_or(default_size)) {
        Ok(s) if (1..=16 << 20).contains(&s) => s,
        Ok(_) => return Err(Error::usage("--size must be between 1 byte and 16 MiB")),
        Err(e) => return Err(Error::usage(format!("--size: {e}"))),
    };
    let duration = match args.duration.or(Duration::from_secs(2)) {
        Ok(d) if d > Duration::ZERO && d <= Duration::from_secs(3600) => d,
        Ok(_) => {
            return Err(Error::usage(
                "--duration must be more than 0 and at most 1h",
            ))
        }
        Err(e) => return Err(Error::Usage(e)),
    };
    let n = args.pairs;
    if n == 0 || n > MAX_PAIRS {
        return Err(Error::usage(format!(
            "-n must be between 1 and {MAX_PAIRS}"
        )));
    }
    let runs = args.runs.runs;
    crate::interrupt::install().map_err(|e| Error::failed(format!("cannot handle Ctrl-C: {e}")))?;
    let mut notes = Vec::new();
    let limits = match check_limits(t, work, n, &mut notes) {
        Ok(l) => l,
        Err(e) => return Err(Error::failed(e)),
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
        Err(e) => return Err(Error::failed(format!("{e:#}"))),
    };
    let dir_path = dir.as_ref().map(RunDir::path).unwrap_or_default();
    let shape = Shape {
        t,
        work,
        n,
        size,
        duration,
        limits,
    };
    let mut envelope = Envelope::starting(argv);
    envelope.warnings = notes;
    // Each run sets its pairs up afresh, so a run is what a user's first would be.
    let mut done: Vec<Run> = Vec::new();
    let mut later_error = None;
    for i in 0..runs {
        if runs > 1 {
            progress(&format!("run {} of {runs}", i + 1));
        }
        let outcome = match i > 0 && crate::testhooks::fault("later-run-fails") {
            true => Err("test fault".to_string()),
            false => once(&shape, &dir_path, &progress),
        };
        let run = match outcome {
            Ok(r) => r,
            Err(e) if done.is_empty() => return Err(Error::Failed(e)),
            Err(e) => {
                // The runs before it stand; the command failed.
                later_error = Some(format!("run {} of {runs} failed: {e}", i + 1));
                break;
            }
        };
        let stop = run.interrupted || run.body.pairs == 0 || !run.agree;
        done.push(run);
        if stop || crate::interrupt::requested() {
            break;
        }
    }
    drop(dir);
    let run = median_run(done);
    envelope.interrupted = run.interrupted;
    let mut report = SwarmReport {
        envelope,
        body: run.body,
    };
    if report.body.pairs == 0 && !report.envelope.interrupted {
        eprintln!("sockbench: error: no pair could be set up");
    }
    if let Some(e) = &later_error {
        eprintln!("sockbench: error: {e}");
    }
    report.envelope.error = later_error;
    let exported = print(&mut report, output, &exports);
    let failed =
        !exported || !run.agree || report.body.pairs == 0 || report.envelope.error.is_some();
    Ok(Outcome::of(report.envelope.interrupted, failed))
}

/// What every run of a swarm is.
struct Shape {
    t: TransportKind,
    work: Work,
    n: u64,
    size: u64,
    duration: Duration,
    limits: Limits,
}

/// One run of a swarm: its figures, whether Ctrl-C cut it short, and whether both
/// sides' counts agree.
struct Run {
    body: SwarmBody,
    interrupted: bool,
    agree: bool,
}

/// The run a report of several is: a run that stopped the others (interrupted, no pairs,
/// counts that disagree: the last, as they stop there), else the median by its headline
/// figure, with every run's beside it in `runs`.
fn median_run(mut done: Vec<Run>) -> Run {
    let figure = |r: &Run| match r.body.workload {
        Work::Stream => r.body.bits_per_second,
        Work::Pingpong => r.body.round_trips_per_second,
    };
    let each: Vec<f64> = done.iter().map(|r| figure(r).unwrap_or(0.0)).collect();
    let last = done.len() - 1;
    let stopped = done[last].interrupted || !done[last].agree || done[last].body.pairs == 0;
    let pick = crate::measure::stats::standing_run(&each, stopped).unwrap_or(last);
    let mut run = done.swap_remove(pick);
    if each.len() > 1 {
        run.body.runs = each;
    }
    run
}

/// Set up the pairs, run both reactors for the duration, and tally both sides.
fn once(s: &Shape, dir: &std::path::Path, progress: &dyn Fn(&str)) -> Result<Run, String> {
    let Shape {
        t,
        work,
        n,
        size,
        duration,
        ..
    } = *s;
    progress(&format!("setting up {n} {t} pairs"));
    let setup_started = Instant::now();
    let made = pairs::make(t, work, n, dir).map_err(|e| format!("{e:#}"))?;
    let setup = setup_started.elapsed();
    let mut errors: std::collections::BTreeMap<String, u64> = made.errors.into_iter().collect();
    let running = made.pairs.len() as u64;
    let mut body = SwarmBody {
        workload: work,
        transport: t,
        pairs_requested: n,
        pairs: running,
        size_bytes: size,
        setup_seconds: setup.as_secs_f64(),
        limits: s.limits.clone(),
        ..SwarmBody::default()
    };
    if made.interrupted || running == 0 {
        body.errors = errors;
        return Ok(Run {
            body,
            interrupted: made.interrupted,
            agree: true,
        });
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
    let (a, p): (ReactorReport, ReactorReport) = std::thread::scope(|sc| {
        let a = std::thread::Builder::new()
            .name("sb-swarm-a".into())
            .spawn_scoped(sc, || reactor::run(Role::Active, &plan, active, &start))
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        let p = reactor::run(Role::Passive, &plan, passive, &start);
        let a = a.join().map_err(|_| "a reactor panicked".to_string())?;
        Ok::<_, String>((a.map_err(|e| e.to_string())?, p.map_err(|e| e.to_string())?))
    })?;
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
    body.duration_seconds = interval.as_secs_f64();
    let interrupted = a.interrupted || p.interrupted;
    let ok = |i: usize| a.pairs[i].error.is_none() && p.pairs[i].error.is_none();
    match work {
        Work::Stream => {
            body.bytes_sent = a.pairs.iter().map(|c| c.sent).sum();
            body.bytes_received = p.pairs.iter().map(|c| c.received).sum();
            body.bytes_received_in_interval = p.pairs.iter().map(|c| c.received_in_interval).sum();
            body.bits_per_second = Some(body.bytes_received_in_interval as f64 * 8.0 / secs);
            let each: Vec<f64> = (0..p.pairs.len())
                .filter(|&i| ok(i))
                .map(|i| p.pairs[i].received_in_interval as f64 * 8.0 / secs)
                .collect();
            body.fairness_jain = Some(reactor::jain(&each));
            body.per_pair = spread(each);
        }
        Work::Pingpong => {
            body.bytes_sent = a.pairs.iter().map(|c| c.sent).sum();
            body.bytes_received = p.pairs.iter().map(|c| c.received).sum();
            let trips: u64 = a.pairs.iter().map(|c| c.round_trips).sum();
            body.round_trips = Some(trips);
            body.round_trips_per_second = Some(trips as f64 / secs);
            body.bytes_received_in_interval = trips * size * 2;
            let each: Vec<f64> = (0..a.pairs.len())
                .filter(|&i| ok(i))
                .map(|i| a.pairs[i].round_trips as f64 / secs)
                .collect();
            body.fairness_jain = Some(reactor::jain(&each));
            body.per_pair = spread(each);
            body.round_trip_ns = a.latency.as_ref().filter(|h| !h.is_empty()).map(|h| {
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
    body.errors = errors;
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
    let counted = body.bytes_sent == body.bytes_received && answers.0 == answers.1;
    // A disagreement with an error or a Ctrl-C to explain it is not a miscount.
    let agree = counted || interrupted || !body.errors.is_empty();
    if !counted && !interrupted && body.errors.is_empty() {
        body.errors.insert(
            format!(
                "counts disagree: {} bytes written, {} read; answers: {} written, {} read",
                body.bytes_sent, body.bytes_received, answers.0, answers.1
            ),
            1,
        );
    }
    Ok(Run {
        body,
        interrupted,
        agree,
    })
}

/// Write the exports and print stdout's format; false if something could not be
/// written (said on stderr).
fn print(
    r: &mut SwarmReport,
    output: &crate::cli::OutputArgs,
    exports: &crate::report::ExportManager,
) -> bool {
    r.envelope.end();
    exports.finish(&*r);
    // A Ctrl-C while an export waited for a FIFO's reader interrupted the command too.
    r.envelope.interrupted |= crate::interrupt::requested();
    super::emit(&*r, output, exports)
}

/// The swarm's table of names and values: what ran, its aggregate and per-pair figures,
/// the counts and errors; the warnings under it.
fn grid(report: &SwarmReport, units: crate::report::Units) -> Grid {
    let r = &report.body;
    let bps = |v: f64| crate::report::grid::throughput(v, units);
    let mut rows: Vec<(&str, String)> = Vec::new();
    rows.push((
        "setup",
        format!("{:.3} s for {} pairs", r.setup_seconds, r.pairs),
    ));
    rows.push(("measured", format!("{:.3} s", r.duration_seconds)));
    match r.workload {
        Work::Stream => {
            rows.push((
                "aggregate",
                format!(
                    "{} ({} read in the interval)",
                    r.bits_per_second.map_or("-".into(), bps),
                    format_bytes(r.bytes_received_in_interval)
                ),
            ));
        }
        Work::Pingpong => {
            rows.push((
                "aggregate",
                format!(
                    "{} round trips ({})",
                    r.round_trips.unwrap_or(0),
                    r.round_trips_per_second
                        .map_or("-".into(), format_per_second)
                ),
            ));
            if let Some(l) = &r.round_trip_ns {
                let us = |k: &str| {
                    l.get(k)
                        .map_or("-".into(), |v| format!("{:.1} µs", *v as f64 / 1e3))
                };
                rows.push((
                    "round trip",
                    format!("p50 {}, p99 {}, max {}", us("p50"), us("p99"), us("max")),
                ));
            }
        }
    }
    if r.runs.len() > 1 {
        let f = |v: f64| match r.workload {
            Work::Stream => bps(v),
            Work::Pingpong => format_per_second(v),
        };
        rows.push((
            "runs",
            format!(
                "{}: {} (the figures here are the median run's)",
                r.runs.len(),
                crate::measure::ranking::spread_cell(&r.runs, &f)
            ),
        ));
    }
    if let Some(s) = &r.per_pair {
        let f = |v: f64| match r.workload {
            Work::Stream => bps(v),
            Work::Pingpong => format_per_second(v),
        };
        rows.push((
            "per pair",
            format!(
                "min {}, p50 {}, p99 {}, max {}",
                f(s.min),
                f(s.p50),
                f(s.p99),
                f(s.max)
            ),
        ));
    }
    if let Some(j) = r.fairness_jain {
        rows.push((
            "fairness (Jain)",
            format!("{j:.4} (1 = every pair the same)"),
        ));
    }
    rows.push((
        "counts",
        format!("{} written, {} read", r.bytes_sent, r.bytes_received),
    ));
    let errors = if r.errors.is_empty() {
        "none".to_string()
    } else {
        (r.errors.iter())
            .map(|(k, n)| format!("{n} x {k}"))
            .collect::<Vec<_>>()
            .join("; ")
    };
    rows.push(("errors", errors));
    let title = format!(
        "swarm: {} {} pairs, {}",
        r.pairs,
        r.transport,
        match r.workload {
            Work::Stream => format!("stream of {} writes", format_bytes(r.size_bytes)),
            Work::Pingpong => format!("pingpong of {} messages", format_bytes(r.size_bytes)),
        }
    );
    let mut g = crate::report::output::pairs(Some(title), rows);
    g.notes.extend(
        report
            .envelope
            .warnings
            .iter()
            .map(|n| format!("note: {n}")),
    );
    if report.envelope.interrupted {
        g.notes
            .push("interrupted: the figures cover what ran before Ctrl-C".into());
    }
    g
}

impl Rendered for SwarmReport {
    fn head(&self) -> Head<'_> {
        Head::of(Kind::Swarm, &self.envelope)
    }

    fn json(&self) -> serde_json::Result<Vec<u8>> {
        output::pretty(&self.document())
    }

    fn tables(&self, view: &crate::report::View) -> Vec<Grid> {
        vec![grid(self, view.units)]
    }

    fn records(&self) -> output::Records {
        output::records_of(
            &[serde_json::to_value(&self.body).unwrap_or_default()],
            &serde_json::Value::Null,
        )
    }

    fn metrics(&self) -> Vec<crate::report::openmetrics::Family> {
        let b = &self.body;
        let work = serde_json::to_value(b.workload).unwrap_or_default();
        let labels = vec![
            ("workload", work.as_str().unwrap_or_default().to_string()),
            ("transport", b.transport.to_string()),
            ("size_bytes", b.size_bytes.to_string()),
            ("pairs", b.pairs_requested.to_string()),
        ];
        let mut v = serde_json::to_value(b).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            for k in ["size_bytes", "pairs_requested", "errors", "limits"] {
                o.remove(k);
            }
        }
        output::gauges(Kind::Swarm, "The swarm", &[(labels, v)])
    }

    fn count(&self) -> String {
        output::counted(self.body.pairs as usize, "pair")
    }

    fn charts(&self) -> Vec<crate::report::chart::Chart> {
        use crate::report::chart::{bars_of, Axis};
        let b = &self.body;
        let (aggregate, axis) = match b.workload {
            Work::Stream => (b.bits_per_second, Axis::BitsPerSecond),
            Work::Pingpong => (b.round_trips_per_second, Axis::PerSecond("round trips")),
        };
        let mut bars = Vec::new();
        if let Some(v) = aggregate {
            bars.push(("every pair".to_string(), v, None));
        }
        if let Some(s) = &b.per_pair {
            bars.push(("one pair (p50)".to_string(), s.p50, Some((s.min, s.max))));
        }
        let mut out = vec![bars_of(
            "swarm-rate",
            "The swarm and its pairs",
            "The pairs together, and the median pair with a whisker from the slowest pair to \
             the fastest.",
            axis,
            bars,
        )];
        if let Some(l) = &b.round_trip_ns {
            let bars = ["p50", "p99", "max"]
                .into_iter()
                .filter_map(|k| Some((k.to_string(), *l.get(k)? as f64, None)))
                .collect();
            out.push(bars_of(
                "swarm-round-trip",
                "Round trip over every pair",
                "Percentiles of every pair's round trips together.",
                Axis::Nanoseconds,
                bars,
            ));
        }
        out
    }

    fn nothing_to_chart(&self) -> Option<String> {
        let b = &self.body;
        (b.bits_per_second.is_none() && b.round_trips_per_second.is_none())
            .then(|| "The swarm measured nothing, so there is nothing to chart.".to_string())
    }
}

impl SwarmBody {
    /// `compare`'s row: the swarm as a whole, judged by its aggregate throughput (a
    /// stream) or round trips per second (pingpong).
    pub fn rows(&self) -> Vec<crate::report::rows::Row> {
        use crate::measure::headline::Headline;
        let (work, headline, value) = match self.workload {
            Work::Stream => (
                "stream",
                Headline::throughput("bits_per_second"),
                self.bits_per_second,
            ),
            Work::Pingpong => (
                "pingpong",
                Headline::rate("round_trips_per_second"),
                self.round_trips_per_second,
            ),
        };
        let label = format!(
            "swarm {work} {} {} x{}",
            self.transport,
            format_bytes(self.size_bytes),
            self.pairs_requested
        );
        vec![
            crate::report::rows::Row::once(label.clone(), label, headline, value)
                .with_runs(&self.runs),
        ]
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

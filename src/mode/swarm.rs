//! `sockbench swarm`: N pairs at once in one process, on two epoll threads
//! ([`crate::reactor`]): the aggregate, each pair's share, Jain's fairness index, the
//! time to set the pairs up and the errors by kind. The machine's limits (descriptors,
//! ephemeral ports, memory) are checked first, and the soft descriptor limit raised to
//! the hard one when that is what it takes.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cli::{PlacementKind, SwarmArgs};
use crate::document::swarm::{Limits, Spread, SwarmBody, SwarmReport};
use crate::error::{CommandResult, Error, Outcome, PlanError};
use crate::measure::live::Interval;
use crate::plan::{Plan, Where};
use crate::reactor::pairs::{self, fds_per_pair};
use crate::reactor::{self, Work};
use crate::report::envelope::{Envelope, Kind};
use crate::report::grid::Grid;
use crate::report::output::{self, Head, Rendered};
use crate::report::progress::Progress;
use crate::runner::Runner;
use crate::scenario::SwarmOptions;
use crate::scenario::{Scenario, WorkloadOptions};
use crate::scenario::{Stop, WorkloadKind};
use crate::transport::TransportKind;
use crate::vocab::units::{format_bytes, format_per_second, parse_size};
use crate::workload::swarm::{SwarmSide, SwarmSpec, MAX_PAIRS};
use crate::workload::{Roles, Spec};

/// Descriptors kept free for everything else (stdio, two epolls, the listener, a file
/// read now and then).
const SPARE_FDS: u64 = 16;

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
) -> Result<Limits, PlanError> {
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
            return Err(PlanError::Unavailable(format!(
                "{n} pairs need {need} descriptors, over the hard limit of {hard} (RLIMIT_NOFILE, `ulimit -Hn`): \
                 use -n {} or fewer, or raise the hard limit (as root: `ulimit -Hn {need}`, or LimitNOFILE= in a systemd unit)",
                hard.saturating_sub(SPARE_FDS) / fds_per_pair(t, work)
            )));
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
fn finish(t: TransportKind, n: u64, mut limits: Limits) -> Result<Limits, PlanError> {
    if matches!(t, TransportKind::Tcp | TransportKind::Tcp6) {
        if let Some(ports) = limits.ephemeral_ports {
            if n > ports {
                return Err(PlanError::Unavailable(format!(
                    "{n} TCP pairs need {n} ephemeral ports; net.ipv4.ip_local_port_range gives {ports}: \
                     use -n {ports} or fewer, or widen the range (`sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"`)"
                )));
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
            return Err(PlanError::Unavailable(format!(
                "{n} pairs' buffers could take {} of memory, over half of the {} available (MemAvailable): use fewer pairs",
                format_bytes(limits.buffer_memory_bytes),
                format_bytes(avail)
            )));
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
    let interval = args.interval.get().map_err(Error::Usage)?;
    let placement = match args.placement.placement {
        PlacementKind::Threads => Where::Threads,
        PlacementKind::Processes
            if SwarmSpec.wiring(t) == crate::workload::Wiring::InProcess =>
        {
            return Err(Error::usage(format!(
                "swarm over {t} makes its pairs inside one process: --placement processes takes unix, unix-seqpacket, tcp or tcp6"
            )))
        }
        PlacementKind::Processes => Where::Processes {
            reverse: false,
            bidir: false,
        },
    };
    super::catch_interrupts()?;
    let mut notes = Vec::new();
    let limits = check_limits(t, work, n, &mut notes)?;
    let say = |msg: &str| {
        if !quiet {
            eprintln!("sockbench swarm: {msg}");
        }
    };
    for note in &notes {
        say(note);
    }
    // What a killed sockbench left where this run makes its socket files.
    if t.uses_path() {
        for note in crate::transport::remove_stale(&crate::transport::default_dir_base()) {
            say(&note);
            notes.push(note);
        }
    }
    let sc = Scenario {
        stop: Stop::Duration(duration),
        runs: args.runs.runs,
        nodelay: true,
        extras: WorkloadOptions {
            swarm: Some(SwarmOptions { pairs: n, work }),
            ..WorkloadOptions::default()
        },
        ..Scenario::new(WorkloadKind::Swarm, t, size)
    };
    let plan = Plan::of_cases(vec![sc.clone()], output, placement, interval);
    let placed = match args.placement.placement {
        PlacementKind::Threads => "threads",
        PlacementKind::Processes => "processes",
    };
    let mut envelope = Envelope::starting(argv);
    envelope.warnings = notes;
    say(&format!(
        "{n} {t} pairs, set up afresh for each run, then measured for {:.1} s",
        duration.as_secs_f64()
    ));
    // Each run sets its pairs up afresh, so a run is what a user's first would be.
    let runner = Runner::new(&plan, &exports);
    let progress = Progress::new(1, quiet);
    progress.set_message(format!("swarm {n} {t} pairs"));
    let measured = runner.runs(&sc, &progress, &mut |_| {});
    progress.finish();
    let Some(measured) = measured else {
        // Ctrl-C before any run measured anything.
        let mut report = SwarmReport {
            envelope,
            body: SwarmBody {
                workload: work,
                transport: t,
                pairs_requested: n,
                size_bytes: size,
                limits,
                placement: placed.into(),
                ..SwarmBody::default()
            },
        };
        report.envelope.interrupted = true;
        return Ok(Outcome::interrupted().and_errors(print(&mut report, output, &exports)));
    };
    let runs = args.runs.runs;
    let done: Vec<Run> = (measured.raws.iter().zip(&measured.intervals))
        .map(|(raw, iv)| fold(&sc, &limits, raw, iv.clone()))
        .chain(
            // Without --interval no run has intervals: fold them all the same.
            (measured.raws.iter().skip(measured.intervals.len()))
                .map(|raw| fold(&sc, &limits, raw, Vec::new())),
        )
        .collect();
    let later_error = measured.error.map(|e| match done.is_empty() {
        true => e,
        false => format!("run {} of {runs} failed: {e}", done.len() + 1),
    });
    if done.is_empty() {
        return Err(Error::Failed(later_error.unwrap_or_default()));
    }
    let mut run = median_run(done);
    run.body.placement = placed.into();
    envelope.interrupted = run.interrupted || measured.interrupted;
    let mut report = SwarmReport {
        envelope,
        body: run.body,
    };
    let mut errors = Vec::new();
    if report.body.pairs == 0 && !report.envelope.interrupted {
        errors.push("no pair could be set up".to_string());
    }
    errors.extend(later_error.clone());
    report.envelope.error = later_error;
    let unwritten = print(&mut report, output, &exports);
    let failed = !run.agree || report.body.pairs == 0 || report.envelope.error.is_some();
    Ok(Outcome::of(report.envelope.interrupted, failed)
        .and_errors(errors)
        .and_errors(unwritten))
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

/// One run's figures from what its two sides reported: the aggregate, each pair's
/// share, the errors, and whether what was written is what was read.
fn fold(sc: &Scenario, limits: &Limits, raw: &Roles, intervals: Vec<Interval>) -> Run {
    let work = sc.extras.swarm.unwrap_or_default().work;
    let size = sc.size;
    let empty = SwarmSide::default();
    let side = |of: &[crate::workload::SideReport]| {
        of.first()
            .and_then(|s| s.swarm.clone())
            .unwrap_or_else(|| empty.clone())
    };
    let (a, p) = (side(&raw.senders), side(&raw.receivers));
    let elapsed = |of: &[crate::workload::SideReport]| {
        of.first()
            .and_then(|s| s.elapsed)
            .unwrap_or_default()
            .as_secs_f64()
    };
    let interval = match work {
        Work::Stream => elapsed(&raw.receivers),
        Work::Pingpong => elapsed(&raw.senders),
    };
    let secs = interval.max(f64::MIN_POSITIVE);
    let interrupted = raw.interrupted();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for (k, n) in a.errors.iter().chain(&p.errors) {
        *errors.entry(k.clone()).or_default() += n;
    }
    let pairs = a.per_pair.len().min(p.per_pair.len());
    let failed: std::collections::HashSet<u32> =
        a.failed.iter().chain(&p.failed).copied().collect();
    let ok = |i: usize| !failed.contains(&(i as u32));
    let mut body = SwarmBody {
        workload: work,
        transport: sc.transport,
        pairs_requested: sc.extras.swarm.map_or(0, |s| s.pairs),
        pairs: pairs as u64,
        size_bytes: size,
        setup_seconds: a.setup_ns as f64 / 1e9,
        duration_seconds: interval,
        bytes_sent: a.sent,
        bytes_received: p.received,
        limits: limits.clone(),
        intervals,
        ..SwarmBody::default()
    };
    // Each pair's figure, from the side that times the run.
    let per_pair = match work {
        Work::Stream => &p.per_pair,
        Work::Pingpong => &a.per_pair,
    };
    let each: Vec<f64> = (0..pairs)
        .filter(|&i| ok(i))
        .map(|i| match work {
            Work::Stream => per_pair[i] as f64 * 8.0 / secs,
            Work::Pingpong => per_pair[i] as f64 / secs,
        })
        .collect();
    match work {
        Work::Stream => {
            body.bytes_received_in_interval = p.received_in_interval;
            body.bits_per_second = Some(p.received_in_interval as f64 * 8.0 / secs);
        }
        Work::Pingpong => {
            let trips: u64 = a.per_pair.iter().sum();
            body.round_trips = Some(trips);
            body.round_trips_per_second = Some(trips as f64 / secs);
            body.bytes_received_in_interval = trips * size * 2;
            let latency = raw.senders.first().and_then(|s| {
                s.latencies
                    .iter()
                    .find(|(kind, _)| *kind == crate::measure::latency::LatencyKind::RoundTrip)
                    .map(|(_, h)| h)
            });
            body.round_trip_ns = latency.filter(|h| !h.is_empty()).map(|h| {
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
    if pairs > 0 {
        body.fairness_jain = Some(reactor::jain(&each));
        body.per_pair = spread(each);
    }
    // Both sides counted: every byte written was read (the drain reads what was in
    // flight at the interval's end).
    // Pingpong: the answers too, each way counted by its writer and its reader.
    let answers = match work {
        Work::Stream => (0, 0),
        Work::Pingpong => (p.sent, a.received),
    };
    let counted = body.bytes_sent == body.bytes_received && answers.0 == answers.1;
    // A disagreement with an error or a Ctrl-C to explain it is not a miscount.
    let agree = counted || interrupted || !errors.is_empty();
    if !counted && !interrupted && errors.is_empty() {
        errors.insert(
            format!(
                "counts disagree: {} bytes written, {} read; answers: {} written, {} read",
                body.bytes_sent, body.bytes_received, answers.0, answers.1
            ),
            1,
        );
    }
    body.errors = errors;
    Run {
        body,
        interrupted,
        agree,
    }
}

/// Write the exports and print stdout's format; what could not be written
/// ([`super::emit`]).
fn print(
    r: &mut SwarmReport,
    output: &crate::cli::OutputArgs,
    exports: &crate::report::ExportManager,
) -> Vec<String> {
    r.envelope.end();
    exports.finish(&*r);
    // A Ctrl-C while an export waited for a FIFO's reader interrupted the command too.
    r.envelope.interrupted |= crate::interrupt::requested();
    super::emit(&*r, output, exports)
}

/// The swarm's table of names and values: what ran, its aggregate and per-pair figures,
/// the counts and errors; the warnings under it.
fn grid(report: &SwarmReport, units: crate::vocab::Units) -> Grid {
    let r = &report.body;
    let bps = |v: f64| crate::vocab::units::throughput(v, units);
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
        "swarm: {} {} pairs, {}{}",
        r.pairs,
        r.transport,
        match r.workload {
            Work::Stream => format!("stream of {} writes", format_bytes(r.size_bytes)),
            Work::Pingpong => format!("pingpong of {} messages", format_bytes(r.size_bytes)),
        },
        match r.placement.as_str() {
            "processes" => ", the receiving ends in a child process",
            _ => "",
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

    fn tables(&self, view: &crate::vocab::View) -> Vec<Grid> {
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
        // A limit of this system, not a bad flag: exit 1.
        let crate::error::PlanError::Unavailable(e) = e else {
            panic!("{e:?}");
        };
        assert!(e.contains("hard limit") && e.contains("ulimit -Hn"), "{e}");
        let per = fds_per_pair(TransportKind::Pipe, Work::Pingpong);
        assert_eq!(per, 4);
    }
}

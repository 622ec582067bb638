//! `sockbench relay`: the ways to copy between sockets.
//!
//! Two forms. The benchmark runs the roles of [`crate::workload::relay`] on the shared
//! runner (warm-up, `--runs`, `-i`, Ctrl-C, `--placement`) for every transport, copy
//! method and size asked for, folds each run's role reports into an
//! [`Outcome`], and reports
//! the median run's throughput beside the relay's own cost: its CPU per GB, the system
//! calls it made per MB and per message, and (under `--mode pingpong`) the
//! source-to-sink latency of a message; across sizes it prints where splice overtakes
//! the copy methods. Each method's runs keep their spread, and the methods of each
//! transport and size are ranked by [`crate::measure::ranking`]: a method is named the
//! fastest (and splice said to overtake) only beyond the noise of the runs, never from
//! a single run. The relay-only form (`--listen ADDR --to ADDR`) is the relay alone,
//! for traffic between programs sockbench does not control (iperf3, a load generator):
//! each accepted connection is copied both ways, a thread per direction, until Ctrl-C
//! or `-d`.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::ValueEnum;

use crate::cli::{RelayArgs, RelayMode};
use crate::copy::{self, Copied, End, Method};
use crate::document::relay::{
    rankings, Crossover, RelayBody, RelayOnly, RelayReport, RelayResult, RelaySkip,
};
use crate::error::{CommandResult, Error, Outcome as Ended, PlanError};
use crate::measure::ranking::{self};
use crate::measure::verdict::{self, Verdict};
use crate::report::envelope::{Envelope, Kind};
use crate::report::grid::{Align, Grid};
use crate::report::output::{self, Head, Rendered};
use crate::scenario::Stop;
use crate::transport::TransportKind;
use crate::vocab::units::{format_bytes, format_ns, parse_size, parse_size_list};
use crate::workload::relay::{self, Listener, Outcome, Shape, Target};

/// The largest size, buffer or pipe.
const MAX_SIZE: u64 = 1 << 30;

/// Why `buffered` cannot carry request/response traffic.
const HOLDS_BACK: &str = "a buffered writer holds a short message until its buffer fills or \
the source ends, so a message that waits for an answer never arrives (as with Go's bufio \
without a Flush); it measures bulk copies (--mode stream)";

/// The checked command line.
#[derive(Debug)]
struct Plan {
    methods: Vec<Method>,
    transports: Vec<TransportKind>,
    sizes: Vec<u64>,
    shape_of: fn(&Plan) -> Shape,
    stop: Stop,
    connections: Option<u64>,
    copy: copy::Options,
    skipped: Vec<RelaySkip>,
    standalone: Option<(Target, Target, Option<Duration>)>,
    /// `-w`: each run's warm-up.
    warmup: Duration,
    /// `-i`: interval lines.
    interval: Option<Duration>,
    /// Where the relay and the sink run.
    placement: crate::plan::Where,
}

fn size_flag(name: &str, text: &str) -> Result<u64, String> {
    let v = parse_size(text).map_err(|e| format!("{name}: {e}"))?;
    if v == 0 || v > MAX_SIZE {
        return Err(format!("{name} must be between 1 byte and 1G, not {text}"));
    }
    Ok(v)
}

fn parse_transports(text: &str) -> Result<Vec<TransportKind>, String> {
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim) {
        let list: Vec<TransportKind> = if name == "all" {
            relay::TRANSPORTS.to_vec()
        } else {
            let t = TransportKind::from_str(name, true).map_err(|_| {
                format!("unknown transport `{name}`: a relay's ends are tcp, tcp6 or unix")
            })?;
            if let Some(why) = relay::refuses_transport(t) {
                return Err(why);
            }
            vec![t]
        };
        for t in list {
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    Ok(out)
}

fn plan(args: &RelayArgs) -> Result<Plan, PlanError> {
    let methods = Method::parse_list(&args.method)?;
    let everything = args.method.split(',').any(|m| m.trim() == "all");
    let buffer = size_flag("--buffer", &args.buffer)? as usize;
    let pipe_size = size_flag("--pipe-size", &args.pipe_size)? as usize;
    if args.iovecs == 0 || args.iovecs > 1024 {
        return Err("--iovecs must be between 1 and 1024 (IOV_MAX)".into());
    }
    if args.iovecs > buffer {
        return Err(format!(
            "--iovecs {} splits a {buffer}-byte --buffer into empty buffers: give fewer iovecs or a larger buffer",
            args.iovecs
        ).into());
    }
    if args.parallel == 0 || args.parallel > 1024 {
        return Err("--parallel must be between 1 and 1024".into());
    }
    let duration = args.duration.parsed()?;
    if duration.is_some_and(|d| d < Duration::from_millis(10)) {
        return Err("--duration must be at least 10ms".into());
    }
    let copy = copy::Options {
        buffer,
        pipe_size,
        iovecs: args.iovecs,
    };
    let mut skipped = Vec::new();
    if let (Some(listen), Some(to)) = (&args.listen, &args.to) {
        if methods.len() != 1 || everything {
            return Err(
                "the relay-only form (--listen, --to) runs one method: give -m with one of them"
                    .into(),
            );
        }
        if args.connections.is_some() || args.mode == RelayMode::Pingpong || args.count.is_some() {
            return Err("--connections, --mode pingpong and -n belong to the benchmark: the relay-only form relays whatever its clients send".into());
        }
        if args.warmup.warmup.is_some()
            || args.interval.interval.is_some()
            || args.placement.placement != crate::cli::PlacementKind::Threads
            || args.runs.runs > 1
        {
            return Err("-w, -i, --runs and --placement belong to the benchmark: the relay-only form relays whatever its clients send until Ctrl-C or -d".into());
        }
        if let Some(why) = methods[0].unavailable() {
            return Err(PlanError::Unavailable(format!("{}: {why}", methods[0])));
        }
        if methods[0] == Method::Buffered {
            return Err(format!("the relay-only form cannot use buffered: {HOLDS_BACK}").into());
        }
        let listen = Target::parse(listen).map_err(|e| format!("--listen: {e}"))?;
        let to = Target::parse(to).map_err(|e| format!("--to: {e}"))?;
        return Ok(Plan {
            methods,
            transports: Vec::new(),
            sizes: Vec::new(),
            shape_of: |_| Shape::Connections(0),
            stop: Stop::Count(0),
            connections: None,
            copy,
            skipped,
            standalone: Some((listen, to, duration)),
            warmup: Duration::ZERO,
            interval: None,
            placement: crate::plan::Where::Threads,
        });
    }
    let transports = parse_transports(args.transports.transport.as_deref().unwrap_or("tcp"))?;
    let pingpong = args.mode == RelayMode::Pingpong;
    if pingpong && (args.parallel > 1 || args.connections.is_some() || args.bytes.is_some()) {
        return Err(
            "--mode pingpong times one message at a time over one connection: it takes -d or -n, not --parallel, --connections or --bytes"
                .into(),
        );
    }
    if !pingpong && args.count.is_some() {
        return Err(
            "-n counts pingpong messages: for streams give -d or --bytes, or --connections N"
                .into(),
        );
    }
    if args.connections == Some(0) || args.connections.is_some_and(|n| n > 10_000_000) {
        return Err("--connections must be between 1 and 10000000".into());
    }
    let default_size = if pingpong {
        "64"
    } else if args.connections.is_some() {
        "10K"
    } else {
        "64K"
    };
    let sizes = parse_size_list(args.sizes.size.as_deref().unwrap_or(default_size))
        .map_err(|e| format!("--size: {e}"))?;
    if let Some(bad) = sizes.iter().find(|&&s| s == 0 || s > MAX_SIZE) {
        return Err(format!("--size must be between 1 byte and 1G, not {bad}").into());
    }
    let stop = match (args.bytes.as_deref(), args.count) {
        (Some(b), _) => Stop::Bytes(size_flag("--bytes", b)?),
        (None, Some(0)) => return Err("-n must be at least 1".into()),
        (None, Some(n)) => Stop::Count(n),
        (None, None) => Stop::Duration(duration.unwrap_or(Duration::from_secs(2))),
    };
    let warmup = args.warmup.or(Duration::from_millis(250))?;
    let interval = args.interval.get()?;
    let placement = match args.placement.placement {
        crate::cli::PlacementKind::Threads => crate::plan::Where::Threads,
        crate::cli::PlacementKind::Processes if pingpong => {
            return Err("--mode pingpong times each message from the source's write to the sink's read on one clock: it runs with --placement threads".into())
        }
        crate::cli::PlacementKind::Processes => crate::plan::Where::Processes {
            reverse: false,
            bidir: false,
        },
    };
    let mut runnable = Vec::new();
    for &m in &methods {
        // What this system cannot do (exit 1), or what the flags ask that cannot be (2).
        let why_not = m.unavailable().map(PlanError::Unavailable).or_else(|| {
            (pingpong && m == Method::Buffered).then(|| {
                PlanError::Unsupported(format!("--mode pingpong cannot use buffered: {HOLDS_BACK}"))
            })
        });
        match why_not {
            None => runnable.push(m),
            Some(why) if everything => {
                for t in &transports {
                    skipped.push(RelaySkip {
                        transport: t.to_string(),
                        method: m.to_string(),
                        reason: why.to_string(),
                    });
                }
            }
            Some(PlanError::Unavailable(why)) => {
                return Err(PlanError::Unavailable(format!(
                    "{m}: {why} (leave it out of -m)"
                )))
            }
            Some(why) => {
                return Err(PlanError::Unsupported(format!(
                    "{m}: {why} (leave it out of -m)"
                )))
            }
        }
    }
    Ok(Plan {
        methods: runnable,
        transports,
        sizes,
        shape_of: if pingpong {
            |p| Shape::Pingpong(p.stop)
        } else if args.connections.is_some() {
            |p| Shape::Connections(p.connections.unwrap_or(1))
        } else {
            |p| Shape::Streams(p.stop)
        },
        stop,
        connections: args.connections,
        copy,
        skipped,
        standalone: None,
        warmup,
        interval,
        placement,
    })
}

/// Run `sockbench relay`.
///
/// # Errors
/// A usage error, or a relay that could not be set up.
pub fn run(args: &RelayArgs, argv: Vec<String>) -> CommandResult {
    let output = &args.output;
    let plan = plan(args)?;
    let exports = super::exports(output)?;
    super::catch_interrupts()?;
    let mut report = RelayReport {
        envelope: Envelope::starting(argv),
        body: RelayBody {
            mode: args.mode,
            connections: plan.connections,
            parallel: args.parallel,
            duration_seconds: match plan.stop {
                Stop::Duration(d) if plan.connections.is_none() => Some(d.as_secs_f64()),
                _ => None,
            },
            bytes_per_connection: match plan.stop {
                Stop::Bytes(b) => Some(b),
                _ => None,
            },
            count: match plan.stop {
                Stop::Count(n) if args.mode == RelayMode::Pingpong => Some(n),
                _ => None,
            },
            buffer_bytes: plan.copy.buffer as u64,
            pipe_size_requested_bytes: plan.copy.pipe_size as u64,
            iovecs: plan.copy.iovecs,
            runs: args.runs.runs,
            results: Vec::new(),
            skipped: plan.skipped.clone(),
            crossovers: Vec::new(),
            rankings: Vec::new(),
            relay_only: None,
            placement: match plan.placement {
                crate::plan::Where::Processes { .. } => "processes".into(),
                _ => "threads".into(),
            },
        },
    };
    // What broke a relay-only run: what was relayed is printed all the same.
    let mut fatal = None;
    if let Some((listen, to, duration)) = &plan.standalone {
        report.body.duration_seconds = duration.map(|d| d.as_secs_f64());
        match relay_only(
            plan.methods[0],
            &plan.copy,
            listen,
            to,
            *duration,
            args.parallel,
        ) {
            Ok((r, broke)) => {
                report.body.relay_only = Some(r);
                fatal = broke;
            }
            Err(e) => return Err(Error::failed(e)),
        }
    } else {
        benchmark(&plan, args, output.quiet, &exports, &mut report);
    }
    report.envelope.end();
    exports.finish(&report);
    // A Ctrl-C while an export waited for a FIFO's reader interrupted the command too.
    report.envelope.interrupted |= crate::interrupt::requested();
    let unwritten = super::emit(&report, output, &exports);
    let failed = report.body.results.iter().any(|r| r.error.is_some());
    let ended = match fatal {
        // The relay broke: it failed, whatever else stopped it.
        Some(e) => Ended::ok_if(false).and_error(e),
        None => Ended::of(report.envelope.interrupted, failed),
    };
    Ok(ended.and_errors(unwritten))
}

/// Every transport, method and size, `--runs` times each.
fn benchmark(
    plan: &Plan,
    args: &RelayArgs,
    quiet: bool,
    exports: &crate::report::ExportManager,
    report: &mut RelayReport,
) {
    // What a killed sockbench left where the runs make their socket files.
    if plan.transports.iter().any(|t| t.uses_path()) {
        for note in crate::transport::remove_stale(&crate::transport::default_dir_base()) {
            if !quiet {
                eprintln!("sockbench: note: {note}");
            }
            report.envelope.warnings.push(note);
        }
    }
    let run_plan = crate::plan::Plan::of_cases(
        Vec::new(),
        &args.output,
        plan.placement.clone(),
        plan.interval,
    );
    let runner = crate::runner::Runner::new(&run_plan, exports);
    let same_process = matches!(plan.placement, crate::plan::Where::Threads);
    let total = plan.transports.len() * plan.methods.len() * plan.sizes.len();
    let progress = crate::report::progress::Progress::new(total as u64, quiet);
    'all: for &t in &plan.transports {
        for &size in &plan.sizes {
            for &m in &plan.methods {
                progress.set_message(format!("{t} {m} {}", format_bytes(size)));
                let setup = relay::Setup {
                    transport: t,
                    method: m,
                    copy: plan.copy,
                    size: size as usize,
                    shape: (plan.shape_of)(plan),
                    parallel: args.parallel as usize,
                };
                let sc = setup.scenario(plan.warmup, args.runs.runs);
                let Some(measured) = runner.runs(&sc, &progress, &mut |_| {}) else {
                    // Ctrl-C before the first run measured anything.
                    break 'all;
                };
                let mut runs = Vec::new();
                let mut error = measured.error;
                for raw in &measured.raws {
                    let o = Outcome::of(raw, same_process)
                        .and_then(|o| setup.check_complete(&o).map(|()| o));
                    match o {
                        Ok(o) => runs.push(o),
                        Err(e) => {
                            error = Some(e);
                            break;
                        }
                    }
                }
                let mut r = result(t, m, size, &runs, error);
                // The lines of the runs kept (a run that failed its checks is not).
                r.intervals = measured.intervals;
                r.intervals.truncate(runs.len());
                report.body.results.push(r);
                progress.inc();
                if crate::interrupt::requested() || measured.interrupted {
                    report.envelope.interrupted = true;
                    break 'all;
                }
            }
        }
    }
    progress.finish();
    report.body.crossovers = crossovers(&report.body.results);
    report.body.rankings = rankings(&report.body.results, report.body.mode);
    let cpus = crate::mode::serve::allowed_cpus().len();
    if cpus < 3 && !report.body.results.is_empty() {
        report.envelope.warnings.push(format!(
            "the source, the relay and the sink share {cpus} CPU{}: throughput is that of a relay \
             competing with its own traffic; for the relay alone, run the relay-only form \
             (--listen, --to) between programs on other CPUs",
            if cpus == 1 { "" } else { "s" }
        ));
    }
}

/// A scenario's result: the median run by throughput, and every run's throughput.
fn result(
    t: TransportKind,
    m: Method,
    size: u64,
    runs: &[Outcome],
    error: Option<String>,
) -> RelayResult {
    let bps = |o: &Outcome| {
        let s = o.interval.as_secs_f64();
        if s > 0.0 {
            o.sink.bytes as f64 * 8.0 / s
        } else {
            0.0
        }
    };
    let mut r = RelayResult {
        transport: t.to_string(),
        method: m.to_string(),
        size_bytes: size,
        error,
        runs_bits_per_second: runs.iter().map(bps).collect(),
        runs_p50_ns: (runs.iter())
            .filter_map(|o| o.latency.as_ref())
            .map(|h| h.value_at_percentile(50.0) as f64)
            .collect(),
        ..RelayResult::default()
    };
    let mut order: Vec<&Outcome> = runs.iter().collect();
    order.sort_by(|a, b| bps(a).total_cmp(&bps(b)));
    let Some(o) = order.get(order.len().saturating_sub(1) / 2) else {
        return r;
    };
    let secs = o.interval.as_secs_f64();
    let cpu = o.relay_cpu_total(m).as_secs_f64();
    let bytes = o.copied.bytes;
    let per = |v: f64, n: u64| (n > 0).then(|| v / n as f64);
    r.bytes_sent = o.source.bytes;
    r.bytes_relayed = bytes;
    r.bytes_received = o.sink.bytes;
    r.messages = o.sink.messages;
    r.connections = o.relayed;
    r.duration_seconds = secs;
    r.bits_per_second = bps(o);
    r.messages_per_second = if secs > 0.0 {
        o.sink.messages as f64 / secs
    } else {
        0.0
    };
    r.ns_per_message = per(secs * 1e9, o.sink.messages).unwrap_or(0.0);
    r.relay_cpu_seconds = cpu;
    r.relay_kernel_worker_cpu_seconds = matches!(m, Method::IoUring | Method::IoUringSplice)
        .then(|| o.unaccounted_cpu.as_secs_f64());
    r.relay_cpu_seconds_per_gb = per(cpu * 1e9, bytes);
    r.relay_cpu_ns_per_message = per(cpu * 1e9, o.sink.messages);
    r.relay_cpu_utilisation = if secs > 0.0 { cpu / secs } else { 0.0 };
    r.syscalls = o.copied.syscalls;
    r.operations = o.copied.ops;
    r.syscalls_per_mb = per(o.copied.syscalls as f64 * 1e6, bytes);
    r.bytes_per_syscall = per(bytes as f64, o.copied.syscalls);
    r.pipe_size_bytes = o.pipe_size.map(|p| p as u64);
    r.latency_ns = o.latency.as_ref().map(|h| {
        let mut m = BTreeMap::new();
        m.insert("min".into(), h.min());
        m.insert("mean".into(), h.mean().round() as u64);
        for (name, q) in [("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9)] {
            m.insert(name.into(), h.value_at_percentile(q));
        }
        m.insert("max".into(), h.max());
        m
    });
    r
}

/// How much faster than the best copy method splice must be to count as overtaking it
/// (beside being faster beyond the noise of the runs).
const MARGIN: f64 = 1.05;

/// Whether `splice` is faster than `copy` by [`MARGIN`] and beyond the noise of their
/// runs (the test `compare` makes).
fn overtakes(splice: &RelayResult, copy: &RelayResult) -> bool {
    splice.bits_per_second >= MARGIN * copy.bits_per_second
        && verdict::judge(
            &copy.runs_bits_per_second,
            &splice.runs_bits_per_second,
            true,
            ranking::ALPHA,
        )
        .verdict
            == Verdict::Faster
}

/// Per transport and splice method: the smallest size from which it is faster than the
/// best copy method by [`MARGIN`] and beyond the noise at every larger size; with single
/// runs, that this cannot be told.
fn crossovers(results: &[RelayResult]) -> Vec<Crossover> {
    let mut out = Vec::new();
    let mut transports: Vec<&str> = results.iter().map(|r| r.transport.as_str()).collect();
    transports.dedup();
    for t in transports {
        let ok =
            |r: &&RelayResult| r.transport == t && r.error.is_none() && r.bits_per_second > 0.0;
        let mut sizes: Vec<u64> = results.iter().filter(ok).map(|r| r.size_bytes).collect();
        sizes.sort_unstable();
        sizes.dedup();
        if sizes.len() < 2 {
            continue;
        }
        let best_copy = |size: u64| {
            results
                .iter()
                .filter(ok)
                .filter(|r| r.size_bytes == size)
                .filter(|r| {
                    Method::parse_list(&r.method)
                        .ok()
                        .and_then(|v| v.first().copied())
                        .is_some_and(Method::copies_through_userspace)
                })
                .max_by(|a, b| a.bits_per_second.total_cmp(&b.bits_per_second))
        };
        for splice in [Method::Splice, Method::IoUringSplice] {
            let at = |size: u64| {
                results
                    .iter()
                    .filter(ok)
                    .find(|r| r.size_bytes == size && r.method == splice.name())
            };
            let pairs: Vec<(u64, &RelayResult, &RelayResult)> = sizes
                .iter()
                .filter_map(|&s| Some((s, at(s)?, best_copy(s)?)))
                .collect();
            if pairs.len() < 2 {
                continue;
            }
            let (lo, hi) = (pairs[0].0, pairs[pairs.len() - 1].0);
            let single = (pairs.iter()).any(|(_, sp, cp)| {
                sp.runs_bits_per_second.len() < 2 || cp.runs_bits_per_second.len() < 2
            });
            if single {
                out.push(Crossover {
                    transport: t.to_string(),
                    method: splice.name().into(),
                    size_bytes: None,
                    summary: format!(
                        "{t}: {splice} against the copy methods from {} to {}: single run per size, so \
                         the noise is unknown: whether (and where) it overtakes them cannot be told; \
                         measure with --runs 3 or more",
                        format_bytes(lo),
                        format_bytes(hi)
                    ),
                });
                continue;
            }
            // Walk down from the largest size while splice keeps ahead.
            let mut from = None;
            for (s, sp, cp) in pairs.iter().rev() {
                if overtakes(sp, cp) {
                    from = Some((*s, *sp, *cp));
                } else {
                    break;
                }
            }
            let summary = match from {
                Some((s, sp, cp)) => format!(
                    "{t}: {splice} overtakes the copy methods from {} ({:.2}x {} there, beyond the \
                     noise) up to {}",
                    format_bytes(s),
                    sp.bits_per_second / cp.bits_per_second,
                    cp.method,
                    format_bytes(hi)
                ),
                None => {
                    let (s, sp, cp) = pairs[pairs.len() - 1];
                    format!(
                        "{t}: {splice} does not overtake the copy methods (by 5% or more, beyond \
                         the noise) between {} and {} (at {}: {:.2}x {})",
                        format_bytes(lo),
                        format_bytes(hi),
                        format_bytes(s),
                        sp.bits_per_second / cp.bits_per_second,
                        cp.method
                    )
                }
            };
            out.push(Crossover {
                transport: t.to_string(),
                method: splice.name().into(),
                size_bytes: from.map(|f| f.0),
                summary,
            });
        }
    }
    out
}

/// The relay's tables: one row per transport, method and size (its figures, or why it
/// failed), the notes under it (pipes granted, what was skipped, the rankings, the
/// crossovers, the warnings); `--relay-only`'s one row of what it relayed.
fn grids(e: &Envelope, r: &RelayBody, units: crate::vocab::Units) -> Vec<Grid> {
    let bps = |v: f64| crate::vocab::units::throughput(v, units);
    if let Some(o) = &r.relay_only {
        return vec![relay_only_grid(o, units)];
    }
    let what = match (r.mode, r.connections) {
        (RelayMode::Pingpong, _) => "one message at a time".to_string(),
        (_, Some(n)) => format!("{n} connections, one payload each, {} at once", r.parallel),
        (_, None) => format!(
            "{} long stream{}",
            r.parallel,
            if r.parallel == 1 { "" } else { "s" }
        ),
    };
    let pingpong = r.mode == RelayMode::Pingpong;
    let mut head = vec!["transport", "method", "size"];
    if pingpong {
        head.extend(["p50", "p50 min-max", "p99", "max"]);
    } else {
        head.extend(["throughput", "runs min-max", "per message"]);
    }
    head.extend(["relay CPU/GB", "CPU/message", "syscalls/MB", "bytes/call"]);
    let mut align = vec![Align::Right; head.len()];
    align[0] = Align::Left;
    align[1] = Align::Left;
    let mut rows = Vec::new();
    for x in &r.results {
        let mut row = vec![
            x.transport.clone(),
            x.method.clone(),
            format_bytes(x.size_bytes),
        ];
        if let Some(e) = &x.error {
            row.push(format!("failed: {e}"));
            row.resize(head.len(), "-".into());
            rows.push(row);
            continue;
        }
        if pingpong {
            for k in ["p50", "p99", "max"] {
                row.push(
                    x.latency_ns
                        .as_ref()
                        .and_then(|l| l.get(k))
                        .map_or("-".into(), |&v| format_ns(v)),
                );
                if k == "p50" {
                    row.push(ranking::spread_cell(&x.runs_p50_ns, &|v| {
                        format_ns(v as u64)
                    }));
                }
            }
        } else {
            row.push(bps(x.bits_per_second));
            row.push(ranking::spread_cell(&x.runs_bits_per_second, &bps));
            row.push(format_ns(x.ns_per_message.round() as u64));
        }
        row.push(
            x.relay_cpu_seconds_per_gb
                .map_or("-".into(), |v| format!("{v:.3} s")),
        );
        row.push(
            x.relay_cpu_ns_per_message
                .map_or("-".into(), |v| format_ns(v.round() as u64)),
        );
        row.push(x.syscalls_per_mb.map_or("-".into(), |v| format!("{v:.1}")));
        row.push(
            x.bytes_per_syscall
                .map_or("-".into(), |v| format_bytes(v.round() as u64)),
        );
        rows.push(row);
    }
    let mut notes = Vec::new();
    let pipes: Vec<String> = r
        .results
        .iter()
        .filter_map(|x| Some((x.method.as_str(), x.pipe_size_bytes?)))
        .fold(Vec::new(), |mut v, (m, p)| {
            let s = format!("{m} {}", format_bytes(p));
            if !v.contains(&s) {
                v.push(s);
            }
            v
        });
    if !pipes.is_empty() {
        notes.push(format!("pipe granted: {}", pipes.join(", ")));
    }
    if r.placement == "processes" {
        notes.push(
            "placement: the relay and the sink ran in a child process, the source in this one"
                .into(),
        );
    }
    for s in &r.skipped {
        notes.push(format!(
            "skipped: {} {}: {}",
            s.transport, s.method, s.reason
        ));
    }
    let show = |v: f64| match pingpong {
        true => format_ns(v as u64),
        false => bps(v),
    };
    for line in ranking::summaries(&r.rankings, &show) {
        notes.push(format!("ranking: {line}"));
    }
    for c in &r.crossovers {
        notes.push(format!("crossover: {}", c.summary));
    }
    for w in &e.warnings {
        notes.push(format!("warning: {w}"));
    }
    if e.interrupted {
        notes.push("interrupted: the figures are what was measured before Ctrl-C".into());
    }
    vec![Grid {
        title: Some(format!(
            "relay: {what}; buffer {}, pipe {} asked, {} iovecs",
            format_bytes(r.buffer_bytes),
            format_bytes(r.pipe_size_requested_bytes),
            r.iovecs
        )),
        headers: head.into_iter().map(String::from).collect(),
        align,
        rows,
        notes,
    }]
}

/// `--relay-only`: what it relayed, as a table of names and values.
fn relay_only_grid(o: &RelayOnly, units: crate::vocab::Units) -> Grid {
    let bytes = o.bytes_forward + o.bytes_backward;
    let secs = o.duration_seconds;
    let method = if o.method.is_empty() { "?" } else { &o.method };
    let mut rows = vec![
        (
            "relayed",
            format!(
                "{} from {} to {} with {method}",
                crate::report::output::counted(o.connections as usize, "connection"),
                o.listen,
                o.to
            ),
        ),
        (
            "bytes",
            format!(
                "{} forward, {} back in {secs:.3} s{}",
                format_bytes(o.bytes_forward),
                format_bytes(o.bytes_backward),
                if secs > 0.0 {
                    format!(
                        " ({})",
                        crate::vocab::units::throughput(bytes as f64 * 8.0 / secs, units)
                    )
                } else {
                    String::new()
                }
            ),
        ),
        (
            "CPU",
            format!(
                "{:.3} s{}",
                o.cpu_seconds,
                o.cpu_seconds_per_gb
                    .map_or(String::new(), |v| format!(" ({v:.3} s per GB)"))
            ),
        ),
        (
            "system calls",
            format!(
                "{}{}{}",
                o.syscalls,
                o.syscalls_per_mb
                    .map_or(String::new(), |v| format!(" ({v:.1} per MB)")),
                o.pipe_size_bytes
                    .map_or(String::new(), |p| format!("; pipe {}", format_bytes(p)))
            ),
        ),
    ];
    if o.failed > 0 {
        rows.push((
            "failed",
            format!(
                "{}; the first: {}",
                crate::report::output::counted(o.failed as usize, "connection"),
                o.first_error.as_deref().unwrap_or("?")
            ),
        ));
    }
    crate::report::output::pairs(Some("relay --listen --to".into()), rows)
}

/// The relay-only form's shared tallies.
#[derive(Default)]
struct Tallies {
    connections: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
    forward: Mutex<Copied>,
    backward: Mutex<Copied>,
    pipe: Mutex<Option<usize>>,
    /// When the last direction of a connection ended.
    last_end: Mutex<Option<Instant>>,
    /// Open connections, to shut down at the end so every copy returns.
    open: Mutex<Vec<std::sync::Weak<(End, End)>>>,
}

impl Tallies {
    fn error(&self, e: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut f = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            *f = Some(e);
        }
    }
}

/// Copy one direction of one connection with a copier of its own.
fn direction(
    method: Method,
    opts: &copy::Options,
    ends: &(End, End),
    forward: bool,
    tallies: &Tallies,
) {
    let mut counts = Copied::default();
    let r = copy::copier(method, opts).and_then(|mut c| {
        if let Some(p) = c.pipe_size() {
            *tallies.pipe.lock().unwrap_or_else(|p| p.into_inner()) = Some(p);
        }
        if forward {
            c.copy(&ends.0, &ends.1, &mut counts)
        } else {
            c.copy(&ends.1, &ends.0, &mut counts)
        }
    });
    let slot = if forward {
        &tallies.forward
    } else {
        &tallies.backward
    };
    let mut s = slot.lock().unwrap_or_else(|p| p.into_inner());
    *s = s.plus(counts);
    drop(s);
    *tallies.last_end.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    if r.is_err() {
        // This direction is over: end the other too, so it does not wait on a peer that
        // is still waiting for the rest of this one.
        relay::end_both(ends);
    }
    match r {
        Ok(()) => {}
        // The other side went away, or we were stopped: the end of that direction.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::Interrupted
                    | io::ErrorKind::NotConnected
            ) => {}
        Err(e) => tallies.error(format!(
            "{} {}: {e}",
            method,
            if forward { "forward" } else { "back" }
        )),
    }
}

/// Whether an accept error leaves the listener usable: the process or the system out of
/// descriptors, buffers or memory, or a connection aborted before it was taken.
fn transient_accept_error(e: &io::Error) -> bool {
    use nix::libc;
    matches!(
        e.raw_os_error(),
        Some(
            libc::EMFILE
                | libc::ENFILE
                | libc::ENOBUFS
                | libc::ENOMEM
                | libc::ECONNABORTED
                | libc::EPROTO
                | libc::EPERM
        )
    ) || e.kind() == io::ErrorKind::Interrupted
}

/// The relay alone: accept on `listen`, copy each connection both ways to `to`, until
/// Ctrl-C or `duration`. An accept error that leaves the listener usable (out of
/// descriptors) is counted and the relay goes on; any other ends it with an error.
fn relay_only(
    method: Method,
    opts: &copy::Options,
    listen: &Target,
    to: &Target,
    duration: Option<Duration>,
    parallel: u32,
) -> Result<(RelayOnly, Option<String>), String> {
    // Check the method can be set up here before taking connections.
    copy::copier(method, opts).map_err(|e| format!("{method}: {e}"))?;
    let listener = Listener::bind(listen).map_err(|e| e.to_string())?;
    let shown = listener
        .target()
        .map_or(listen.to_string(), |t| t.to_string());
    eprintln!(
        "sockbench: relay listening on {shown}, copying to {to} with {method} (Ctrl-C to stop)"
    );
    let tallies = Arc::new(Tallies::default());
    let started = Mutex::new(None::<(Instant, Duration)>);
    let t_start = Instant::now();
    let deadline = duration.map(|d| t_start + d);
    let stop = AtomicBool::new(false);
    let give_up = || {
        crate::interrupt::requested()
            || deadline.is_some_and(|d| Instant::now() >= d)
            || stop.load(Ordering::Relaxed)
    };
    let live = AtomicU64::new(0);
    let mut fatal = None;
    std::thread::scope(|scope| {
        loop {
            let client = match listener.accept_unless(&give_up) {
                Ok(Some(c)) => c,
                Ok(None) => break,
                // Out of descriptors or memory, or a client gone before its accept: the
                // relay goes on (the connections it holds end and free what they took).
                Err(e) if transient_accept_error(&e) => {
                    tallies.error(format!("accept: {e}"));
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                Err(e) => {
                    tallies.error(format!("accept: {e}"));
                    fatal = Some(format!("the relay stopped: accept failed: {e}"));
                    break;
                }
            };
            {
                let mut s = started.lock().unwrap_or_else(|p| p.into_inner());
                if s.is_none() {
                    *s = Some((Instant::now(), crate::measure::cpu::process_cpu()));
                }
            }
            tallies.connections.fetch_add(1, Ordering::Relaxed);
            if live.load(Ordering::Relaxed) >= u64::from(parallel.max(1)) * 512 {
                tallies.error("too many connections at once: refused one".into());
                continue;
            }
            let upstream = match to.connect() {
                Ok(u) => u,
                Err(e) => {
                    tallies.error(format!("cannot connect to {to}: {e}"));
                    continue;
                }
            };
            let _ = client.set_timeouts(Some(relay::TICK));
            let _ = upstream.set_timeouts(Some(relay::TICK));
            let ends = Arc::new((client, upstream));
            {
                let mut open = tallies.open.lock().unwrap_or_else(|p| p.into_inner());
                open.retain(|w| w.strong_count() > 0);
                open.push(Arc::downgrade(&ends));
            }
            live.fetch_add(2, Ordering::Relaxed);
            for forward in [true, false] {
                let (ends, tallies, live) = (Arc::clone(&ends), Arc::clone(&tallies), &live);
                let opts = *opts;
                scope.spawn(move || {
                    direction(method, &opts, &ends, forward, &tallies);
                    live.fetch_sub(1, Ordering::Relaxed);
                });
            }
        }
        // Stopped: end every connection still open so its copies return.
        stop.store(true, Ordering::Relaxed);
        for w in tallies
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            if let Some(ends) = w.upgrade() {
                relay::end_both(&ends);
            }
        }
    });
    let (t0, cpu0) = started
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .unwrap_or((Instant::now(), crate::measure::cpu::process_cpu()));
    // Until the last connection ended (or now, if one was cut off at the stop).
    let end = tallies
        .last_end
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .unwrap_or_else(Instant::now);
    let secs = end.saturating_duration_since(t0).as_secs_f64();
    let cpu = crate::measure::cpu::process_cpu()
        .saturating_sub(cpu0)
        .as_secs_f64();
    let fw = *tallies.forward.lock().unwrap_or_else(|p| p.into_inner());
    let bw = *tallies.backward.lock().unwrap_or_else(|p| p.into_inner());
    let all = fw.plus(bw);
    let per = |v: f64| (all.bytes > 0).then(|| v / all.bytes as f64);
    let first_error = tallies
        .first_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let pipe = *tallies.pipe.lock().unwrap_or_else(|p| p.into_inner());
    let only = RelayOnly {
        method: method.to_string(),
        listen: shown,
        to: to.to_string(),
        connections: tallies.connections.load(Ordering::Relaxed),
        failed: tallies.failed.load(Ordering::Relaxed),
        first_error,
        bytes_forward: fw.bytes,
        bytes_backward: bw.bytes,
        syscalls: all.syscalls,
        operations: all.ops,
        duration_seconds: secs,
        cpu_seconds: cpu,
        cpu_seconds_per_gb: per(cpu * 1e9),
        syscalls_per_mb: per(all.syscalls as f64 * 1e6),
        pipe_size_bytes: pipe.map(|p| p as u64),
    };
    Ok((only, fatal))
}

impl Rendered for RelayReport {
    fn head(&self) -> Head<'_> {
        Head::of(Kind::Relay, &self.envelope)
    }

    fn json(&self) -> serde_json::Result<Vec<u8>> {
        output::pretty(&self.document())
    }

    fn tables(&self, view: &crate::vocab::View) -> Vec<Grid> {
        grids(&self.envelope, &self.body, view.units)
    }

    fn records(&self) -> output::Records {
        if let Some(o) = &self.body.relay_only {
            let row = serde_json::to_value(o).unwrap_or_default();
            let template = serde_json::to_value(RelayOnly::default()).unwrap_or_default();
            return output::records_of(&[row], &template);
        }
        let rows: Vec<serde_json::Value> = (self.body.results.iter())
            .map(|r| serde_json::to_value(r).unwrap_or_default())
            .collect();
        let template = serde_json::to_value(RelayResult::default()).unwrap_or_default();
        output::records_of(&rows, &template)
    }

    fn metrics(&self) -> Vec<crate::report::openmetrics::Family> {
        if let Some(o) = &self.body.relay_only {
            let labels = vec![
                ("method", o.method.clone()),
                ("listen", o.listen.clone()),
                ("to", o.to.clone()),
            ];
            let mut v = serde_json::to_value(o).unwrap_or_default();
            if let Some(m) = v.as_object_mut() {
                for text in ["method", "listen", "to", "first_error"] {
                    m.remove(text);
                }
            }
            return output::gauges(
                Kind::Relay,
                "What the relay-only form relayed",
                &[(labels, v)],
            );
        }
        let rows: Vec<_> = (self.body.results.iter())
            .filter(|r| r.error.is_none())
            .map(|r| {
                let labels = vec![
                    ("transport", r.transport.clone()),
                    ("method", r.method.clone()),
                    ("size_bytes", r.size_bytes.to_string()),
                ];
                let mut v = serde_json::to_value(r).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.remove("size_bytes");
                }
                (labels, v)
            })
            .collect();
        output::gauges(Kind::Relay, "A relay method", &rows)
    }

    fn count(&self) -> String {
        output::counted(self.body.results.len(), "method run")
    }

    fn charts(&self) -> Vec<crate::report::chart::Chart> {
        use crate::report::chart::{bars_of, Axis};
        let pingpong = self.body.mode == RelayMode::Pingpong;
        let spread = |v: &[f64]| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (v.len() > 1 && lo.is_finite()).then_some((lo, hi))
        };
        let bars = (self.body.results.iter())
            .filter(|r| r.error.is_none())
            .filter_map(|r| {
                let label = format!(
                    "{} {} {}",
                    r.transport,
                    r.method,
                    format_bytes(r.size_bytes)
                );
                match pingpong {
                    true => {
                        let p50 = r.latency_ns.as_ref()?.get("p50").copied()? as f64;
                        Some((label, p50, spread(&r.runs_p50_ns)))
                    }
                    false => Some((label, r.bits_per_second, spread(&r.runs_bits_per_second))),
                }
            })
            .collect();
        let (id, title, axis, what) = match pingpong {
            true => (
                "relay-latency",
                "Source-to-sink time by method (p50)",
                Axis::Nanoseconds,
                "the median source-to-sink time of a message",
            ),
            false => (
                "relay-throughput",
                "Throughput by method",
                Axis::BitsPerSecond,
                "the bits the sink received per second",
            ),
        };
        vec![bars_of(
            id,
            title,
            &format!("Each transport, method and size: {what}, the median run; the whisker spans the runs (--runs 2 or more)."),
            axis,
            bars,
        )]
    }

    fn nothing_to_chart(&self) -> Option<String> {
        self.body
            .results
            .iter()
            .all(|r| r.error.is_some())
            .then(|| "No method ran, so there is nothing to chart.".to_string())
    }

    fn findings(&self) -> Vec<output::Finding> {
        (self.body.results.iter())
            .filter_map(|r| {
                Some(output::Finding {
                    severity: output::Severity::Failure,
                    about: format!(
                        "{} {} {}",
                        r.transport,
                        r.method,
                        format_bytes(r.size_bytes)
                    ),
                    text: format!(" failed: {}", r.error.as_ref()?),
                })
            })
            .collect()
    }

    fn left_out(&self) -> Vec<String> {
        (self.body.skipped.iter())
            .map(|s| format!("{} {}: {}", s.transport, s.method, s.reason))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result of five runs within 0.5% of `bps`.
    fn res(t: &str, m: Method, size: u64, bps: f64) -> RelayResult {
        RelayResult {
            transport: t.into(),
            method: m.name().into(),
            size_bytes: size,
            bits_per_second: bps,
            runs_bits_per_second: [1.0, 0.995, 1.005, 0.998, 1.002].map(|f| f * bps).to_vec(),
            ..RelayResult::default()
        }
    }

    /// Issue 29: splice is said to overtake only beyond the noise of the runs; a single
    /// run per size cannot tell, and says so.
    #[test]
    fn a_crossover_needs_a_lead_beyond_the_noise_and_a_single_run_cannot_tell() {
        let k = 1024;
        let mut v = Vec::new();
        for size in [64 * k, 1024 * k] {
            v.push(res("tcp", Method::ReadWrite, size, 100.0));
            let mut sp = res("tcp", Method::Splice, size, 130.0);
            // 30% ahead by the median, but the runs overlap read-write's.
            sp.runs_bits_per_second = vec![130.0, 60.0, 200.0, 95.0, 150.0];
            v.push(sp);
        }
        let c = crossovers(&v);
        assert_eq!(c[0].size_bytes, None, "{}", c[0].summary);
        assert!(
            c[0].summary.contains("does not overtake"),
            "{}",
            c[0].summary
        );
        for r in &mut v {
            r.runs_bits_per_second.truncate(1);
        }
        let c = crossovers(&v);
        assert_eq!(c[0].size_bytes, None);
        assert!(
            c[0].summary.contains("single run") && c[0].summary.contains("cannot be told"),
            "{}",
            c[0].summary
        );
    }

    /// Issue 29: one default `relay --connections 5000 -s 10K` ranked read-write 4x
    /// slower than vectored; with `--runs 3` they were equal. The table shows each
    /// method's runs, and the ranking names no winner inside their noise or from one run;
    /// the cells are the document's values.
    #[test]
    fn the_table_shows_each_methods_runs_and_names_no_winner_inside_the_noise() {
        let mut rw = res("tcp", Method::ReadWrite, 10240, 100e6);
        rw.runs_bits_per_second = vec![100e6, 30e6, 420e6];
        let mut vec = res("tcp", Method::Vectored, 10240, 400e6);
        vec.runs_bits_per_second = vec![400e6, 90e6, 410e6];
        let mut r = RelayBody {
            mode: RelayMode::Stream,
            connections: Some(5000),
            parallel: 1,
            duration_seconds: None,
            bytes_per_connection: None,
            count: None,
            buffer_bytes: 1,
            pipe_size_requested_bytes: 1,
            iovecs: 1,
            runs: 3,
            results: vec![rw, vec],
            skipped: Vec::new(),
            crossovers: Vec::new(),
            rankings: Vec::new(),
            relay_only: None,
            placement: "threads".into(),
        };
        r.rankings = rankings(&r.results, r.mode);
        assert_eq!(r.rankings.len(), 1);
        assert_eq!(r.rankings[0].winner, None);
        let e = Envelope::starting(Vec::new());
        let table = |r: &RelayBody| {
            let mut out = Vec::new();
            out.extend(
                crate::report::exporter(crate::vocab::Format::Table, Default::default())
                    .serialize(&RelayReport {
                        envelope: e.clone(),
                        body: r.clone(),
                    })
                    .unwrap(),
            );
            String::from_utf8(out).unwrap()
        };
        let text = table(&r);
        assert!(text.contains("runs min-max"), "{text}");
        assert!(
            text.contains("30.0-420 Mbit/s") && text.contains("90.0-410 Mbit/s"),
            "{text}"
        );
        let line = text.lines().find(|l| l.starts_with("ranking: ")).unwrap();
        assert!(
            line.contains("no fastest method: vectored has the best median"),
            "{line}"
        );
        // One run each: nothing is ranked, whatever the medians.
        for x in &mut r.results {
            x.runs_bits_per_second.truncate(1);
        }
        r.rankings = rankings(&r.results, r.mode);
        let text = table(&r);
        assert!(text.contains(" 1 run ┆"), "{text}");
        let line = text.lines().find(|l| l.starts_with("ranking: ")).unwrap();
        assert!(
            line.contains("single run, so the noise is unknown"),
            "{line}"
        );
        assert!(!text.contains("fastest method vectored"), "{text}");
    }

    #[test]
    fn the_crossover_is_where_splice_stays_ahead_of_the_best_copy_method() {
        let k = 1024;
        let mut v = Vec::new();
        for (size, rw, vec, sp) in [
            (64, 10.0, 11.0, 5.0),
            (64 * k, 100.0, 90.0, 99.0),
            (256 * k, 100.0, 120.0, 130.0),
            (1024 * k, 150.0, 100.0, 160.0),
        ] {
            v.push(res("tcp", Method::ReadWrite, size, rw));
            v.push(res("tcp", Method::Vectored, size, vec));
            v.push(res("tcp", Method::Splice, size, sp));
        }
        let c = crossovers(&v);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].size_bytes, Some(256 * k));
        assert!(c[0].summary.contains("from 256 KiB"), "{}", c[0].summary);
        assert!(c[0].summary.contains("1.08x vectored"), "{}", c[0].summary);
        // A splice that falls behind again at the top has no crossover.
        v.push(res("tcp", Method::ReadWrite, 4096 * k, 200.0));
        v.push(res("tcp", Method::Splice, 4096 * k, 199.0));
        let c = crossovers(&v);
        assert_eq!(c[0].size_bytes, None);
        assert!(
            c[0].summary.contains("does not overtake"),
            "{}",
            c[0].summary
        );
        // One size is no sweep; a transport without splice has nothing to say.
        assert!(crossovers(&v[..3]).is_empty());
        let only_copy: Vec<_> = v.iter().filter(|r| r.method != "splice").cloned().collect();
        assert!(crossovers(&only_copy).is_empty());
    }

    #[test]
    fn the_median_run_is_reported_and_every_run_is_kept() {
        let run = |bytes: u64, ms: u64| Outcome {
            source: relay::RoleCounts {
                bytes,
                messages: 10,
                connections: 1,
                cpu: Duration::ZERO,
            },
            sink: relay::RoleCounts {
                bytes,
                messages: 10,
                connections: 1,
                cpu: Duration::ZERO,
            },
            copied: Copied {
                bytes,
                syscalls: 20,
                ops: 20,
            },
            relayed: 1,
            relay_cpu: Duration::from_millis(ms / 2),
            unaccounted_cpu: Duration::from_millis(7),
            interval: Duration::from_millis(ms),
            pipe_size: None,
            latency: None,
            interrupted: false,
        };
        let runs = [run(1_000_000, 100), run(1_000_000, 50), run(1_000_000, 200)];
        let r = result(TransportKind::Tcp, Method::ReadWrite, 100_000, &runs, None);
        assert_eq!(r.runs_bits_per_second.len(), 3);
        assert!(r.runs_p50_ns.is_empty(), "no latency in a stream");
        // The median of 80, 160 and 40 Mbit/s.
        assert!(
            (r.bits_per_second - 80e6).abs() < 1.0,
            "{}",
            r.bits_per_second
        );
        assert!((r.relay_cpu_seconds - 0.05).abs() < 1e-9);
        // 50 ms of relay CPU over 10 messages.
        assert!((r.relay_cpu_ns_per_message.unwrap() - 5e6).abs() < 1e-3);
        assert_eq!(r.relay_kernel_worker_cpu_seconds, None);
        assert!((r.relay_cpu_seconds_per_gb.unwrap() - 50.0).abs() < 1e-6);
        assert!((r.syscalls_per_mb.unwrap() - 20.0).abs() < 1e-9);
        assert!((r.bytes_per_syscall.unwrap() - 50_000.0).abs() < 1e-9);
        assert!((r.ns_per_message - 1e7).abs() < 1.0);
        assert!((r.relay_cpu_utilisation - 0.5).abs() < 1e-9);
        // The kernel's io_uring workers count for the io-uring methods.
        let r = result(TransportKind::Tcp, Method::IoUring, 100_000, &runs, None);
        assert!((r.relay_cpu_seconds - 0.057).abs() < 1e-9);
        assert_eq!(r.relay_kernel_worker_cpu_seconds, Some(0.007));
    }

    #[test]
    fn each_transport_has_its_own_crossover() {
        let k = 1024;
        let mut v = Vec::new();
        for (t, factor) in [("unix", 0.5), ("tcp", 2.0)] {
            for size in [64 * k, 1024 * k] {
                v.push(res(t, Method::ReadWrite, size, 100.0));
                v.push(res(t, Method::Splice, size, 100.0 * factor));
            }
        }
        let c = crossovers(&v);
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].transport.as_str(), c[0].size_bytes), ("unix", None));
        assert_eq!(
            (c[1].transport.as_str(), c[1].size_bytes),
            ("tcp", Some(64 * k))
        );
    }

    /// The plan of `sockbench relay ARGS`, or its usage error.
    fn plan_of(args: &[&str]) -> Result<Plan, String> {
        use clap::Parser;
        let all: Vec<&str> = ["sockbench", "relay"].iter().chain(args).copied().collect();
        let parsed = crate::cli::Args::try_parse_from(all).map_err(|e| e.to_string())?;
        match parsed.command {
            Some(crate::cli::Command::Relay(r)) => plan(&r).map_err(|e| e.to_string()),
            _ => unreachable!(),
        }
    }

    fn refused(args: &[&str], says: &str) {
        let e = plan_of(args)
            .err()
            .unwrap_or_else(|| panic!("{args:?} was accepted"));
        assert!(e.contains(says), "{args:?}: {e}");
    }

    #[test]
    fn every_bound_is_checked_at_its_edge() {
        for (flag, ok, bad) in [
            ("--buffer", "1G", "2G"),
            ("--pipe-size", "1", "0"),
            ("--iovecs", "1024", "1025"),
            ("--parallel", "1024", "1025"),
            ("--runs", "100", "101"),
            ("--duration", "10ms", "9ms"),
            ("--bytes", "1", "0"),
            ("-s", "1G", "2G"),
        ] {
            assert!(plan_of(&[flag, ok]).is_ok(), "{flag} {ok}");
            refused(
                &[flag, bad],
                flag.trim_start_matches('-')
                    .split('-')
                    .next()
                    .unwrap_or(flag),
            );
        }
        for zero in ["--iovecs", "--parallel", "--runs", "--connections"] {
            assert!(plan_of(&[zero, "0"]).is_err(), "{zero} 0");
        }
        assert!(plan_of(&["-s", "0"]).is_err());
        assert!(plan_of(&["--connections", "10000000"]).is_ok());
        refused(&["--connections", "10000001"], "--connections");
        refused(&["--iovecs", "5", "--buffer", "4"], "--iovecs");
        assert!(plan_of(&["--iovecs", "4", "--buffer", "4"]).is_ok());
        refused(&["--mode", "pingpong", "-n", "0"], "at least 1");
    }

    #[test]
    fn defaults_and_stops_follow_the_shape() {
        let p = plan_of(&[]).unwrap();
        assert_eq!(p.sizes, [64 << 10]);
        assert_eq!(p.stop, Stop::Duration(Duration::from_secs(2)));
        assert!(matches!((p.shape_of)(&p), Shape::Streams(_)));
        assert_eq!(p.methods.len(), Method::ALL.len() - p.skipped.len().min(2));
        let p = plan_of(&["--connections", "7"]).unwrap();
        assert_eq!(p.sizes, [10 << 10]);
        assert_eq!((p.shape_of)(&p), Shape::Connections(7));
        let p = plan_of(&["--mode", "pingpong", "-n", "5"]).unwrap();
        assert_eq!(p.sizes, [64]);
        assert_eq!((p.shape_of)(&p), Shape::Pingpong(Stop::Count(5)));
        let p = plan_of(&["--bytes", "3K", "-d", "1"]);
        assert!(p.is_err(), "--bytes and -d conflict");
        let p = plan_of(&["--bytes", "3K"]).unwrap();
        assert_eq!(p.stop, Stop::Bytes(3072));
        let p = plan_of(&["-d", "250ms", "-m", "splice,read-write,splice"]).unwrap();
        assert_eq!(p.stop, Stop::Duration(Duration::from_millis(250)));
        assert_eq!(p.methods, [Method::Splice, Method::ReadWrite]);
        // Every format is taken (the one registry prints it).
        assert!(plan_of(&["--format", "csv"]).is_ok());
    }

    #[test]
    fn pingpong_and_the_relay_only_form_refuse_what_they_cannot_do() {
        refused(&["--mode", "pingpong", "-P", "2"], "one message at a time");
        refused(
            &["--mode", "pingpong", "--connections", "2"],
            "one message at a time",
        );
        refused(
            &["--mode", "pingpong", "--bytes", "1M"],
            "one message at a time",
        );
        refused(&["-n", "3"], "pingpong");
        // buffered: an error when named, a skip under all.
        refused(&["--mode", "pingpong", "-m", "buffered"], "never arrives");
        let p = plan_of(&["--mode", "pingpong"]).unwrap();
        assert!(!p.methods.contains(&Method::Buffered));
        assert!(p.skipped.iter().any(|s| s.method == "buffered"));
        assert!(plan_of(&[]).unwrap().methods.contains(&Method::Buffered));
        let only = |extra: &[&str]| {
            let mut a = vec!["--listen", "127.0.0.1:0", "--to", "127.0.0.1:9"];
            a.extend(extra);
            plan_of(&a)
        };
        let p = only(&["-m", "splice", "-d", "3"]).unwrap();
        let (l, t, d) = p.standalone.unwrap();
        assert_eq!(l, Target::Tcp("127.0.0.1:0".parse().unwrap()));
        assert_eq!(t, Target::Tcp("127.0.0.1:9".parse().unwrap()));
        assert_eq!(d, Some(Duration::from_secs(3)));
        assert!(only(&["-m", "all"]).unwrap_err().contains("one method"));
        assert!(only(&["-m", "splice,vectored"])
            .unwrap_err()
            .contains("one method"));
        for extra in [
            &["-m", "splice", "--connections", "3"][..],
            &["-m", "splice", "--mode", "pingpong"][..],
            &["-m", "splice", "-n", "3"][..],
        ] {
            assert!(only(extra).unwrap_err().contains("relay-only"), "{extra:?}");
        }
        assert!(only(&["-m", "buffered"])
            .unwrap_err()
            .contains("never arrives"));
        assert!(
            plan_of(&["--listen", "127.0.0.1:0"]).is_err(),
            "--listen needs --to"
        );
    }

    #[test]
    fn the_relay_only_summary_adds_both_directions() {
        let o = RelayOnly {
            method: "splice".into(),
            connections: 2,
            bytes_forward: 3_000_000,
            bytes_backward: 1_000_000,
            duration_seconds: 2.0,
            failed: 1,
            first_error: Some("boom".into()),
            ..RelayOnly::default()
        };
        let g = relay_only_grid(&o, crate::vocab::Units::Bits);
        let text = format!("{:?}", g.rows);
        // 4 MB both ways in 2 s: 16 Mbit/s, 2 MB/s.
        assert!(text.contains("(16.0 Mbit/s)"), "{text}");
        let bytes = format!("{:?}", relay_only_grid(&o, crate::vocab::Units::Bytes).rows);
        assert!(
            bytes.contains("(2.00 MB/s)") || bytes.contains("(1.91 MiB/s)"),
            "{bytes}"
        );
        assert!(
            text.contains("2 connections") && text.contains("with splice"),
            "{text}"
        );
        assert!(
            text.contains(r#"["failed", "1 connection; the first: boom"]"#),
            "{text}"
        );
    }

    #[test]
    fn transports_are_checked_by_name_and_kind() {
        assert_eq!(
            parse_transports("tcp,unix,tcp").unwrap(),
            [TransportKind::Tcp, TransportKind::Unix]
        );
        assert_eq!(parse_transports("all").unwrap(), relay::TRANSPORTS);
        assert!(parse_transports("udp")
            .unwrap_err()
            .contains("tcp, tcp6 or unix"));
        assert!(parse_transports("bogus")
            .unwrap_err()
            .contains("unknown transport"));
    }
}

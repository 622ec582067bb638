//! Diagnoses: what looks odd about a scenario's result, each a warning that says what to
//! try. One function per warning kind, each unit-tested; [`warnings`] applies those that
//! apply to every workload plus the ones the workload declares ([`Diagnosis`]).
//!
//! A diagnosis reads the scenario and its figures only: it never measures.

use crate::measure::histogram::fraction_at_least;
use crate::results::{ScenarioResult, Warning};
use crate::scenario::Scenario;
use crate::transport::TransportKind;
use crate::vocab::units::{format_bytes, format_ns};
use crate::vocab::Diagnosis;

/// A side thread's CPU use above this fraction of a core counts as saturated.
const SATURATED: f64 = 0.9;
/// The shortest measured interval a CPU-bound verdict is drawn from.
const MIN_JUDGED_SECONDS: f64 = 0.1;
/// Coefficient of variation above which runs are said to disagree.
const UNSTABLE_CV: f64 = 0.05;
/// Round trips this slow on loopback TCP are Nagle's algorithm holding a request's tail
/// until the peer's delayed ACK (40 ms on Linux) lets it go.
const STALL_NS: u64 = 30_000_000;
/// A run whose p50 round trip is this many times the others' median stands apart.
const APART: f64 = 2.0;
/// A single run shorter than this gets a note that it is one short run.
const SHORT_SINGLE_RUN_SECONDS: f64 = 1.0;

fn warning(kind: &str, message: String) -> Warning {
    Warning {
        kind: kind.into(),
        message,
    }
}

/// Every warning for a scenario's result: the common ones, then the workload's own.
pub fn warnings(sc: &Scenario, r: &ScenarioResult) -> Vec<Warning> {
    let mut out = Vec::new();
    out.extend(too_short(r));
    out.extend(unstable(r));
    out.extend(buffer_clamped(sc, r));
    for d in crate::workload::spec(sc.workload).diagnoses() {
        match d {
            Diagnosis::CpuSaturated => out.extend(cpu_saturated(sc, r)),
            Diagnosis::DelayedAck => out.extend(delayed_ack(sc, r)),
            Diagnosis::LatencyRunsDisagree => out.extend(latency_runs_disagree(r)),
            Diagnosis::ZerocopyCopied => out.extend(zerocopy_copied(r)),
        }
    }
    out.extend(datagram_loss(r));
    out.extend(counters_unavailable(r));
    out.extend(spinning_shared_a_cpu(sc, r));
    if let Some(w) = placement_explains(sc, r) {
        // The same disagreement (and the spread it makes), now with its cause.
        out.retain(|w| w.kind != "runs-disagree" && w.kind != "unstable");
        out.push(w);
    }
    out
}

/// `--counters` that could not count: the reasons the roles gave (the figures are null).
pub fn counters_unavailable(r: &ScenarioResult) -> Option<Warning> {
    let mut why: Vec<String> = Vec::new();
    for c in r
        .runs
        .iter()
        .flat_map(|run| [&run.sender.counters, &run.receiver.counters])
        .flatten()
    {
        for reason in [&c.hardware_unavailable, &c.software_unavailable]
            .into_iter()
            .flatten()
        {
            if !why.contains(reason) {
                why.push(reason.clone());
            }
        }
    }
    (!why.is_empty()).then(|| warning("counters-unavailable", why.join("; ")))
}

/// Groups of runs whose figures differ by more than this factor (and do not overlap)
/// disagree.
const PLACEMENT_APART: f64 = 1.3;

/// The figure a placement warning compares, for a run: its workload's headline
/// (pingpong's p50 round trip, stream's throughput, the others' message or connection
/// rate), and how to print it.
fn placement_figure(
    sc: &Scenario,
) -> (
    impl Fn(&crate::results::RunFigures) -> Option<f64>,
    impl Fn(f64) -> String,
) {
    use crate::measure::headline::Quantity;
    let spec = crate::workload::spec(sc.workload);
    let quantity = spec.headline().quantity;
    let name = match quantity {
        Quantity::Latency => "p50",
        Quantity::Throughput => "throughput",
        Quantity::Rate => "messages",
    };
    (
        move |r: &crate::results::RunFigures| spec.headline_of(r),
        move |v: f64| format!("{name} {}", quantity.format(v, crate::vocab::Units::Bits)),
    )
}

/// Runs that disagree because of where the scheduler put the roles: grouped by
/// placement class, two groups whose medians differ by more than `PLACEMENT_APART`
/// and whose ranges do not overlap ("3 runs on one CPU: p50 14 us; 2 runs across CPUs:
/// p50 75 us; pin with --cpus to choose").
pub fn placement_explains(sc: &Scenario, r: &ScenarioResult) -> Option<Warning> {
    use crate::measure::placement::PlacementClass;
    let (figure, show) = placement_figure(sc);
    let mut groups: std::collections::BTreeMap<PlacementClass, Vec<f64>> = Default::default();
    for run in &r.runs {
        if let (Some(p), Some(v)) = (run.placement, figure(run)) {
            groups.entry(p.class).or_default().push(v);
        }
    }
    // One class (or none): no pair of groups to compare.
    let mut ranked: Vec<(f64, f64, f64)> = groups
        .values()
        .map(|v| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (crate::measure::stats::median(v).unwrap_or(lo), lo, hi)
        })
        .collect();
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
    let apart = ranked
        .windows(2)
        .any(|w| w[1].0 > w[0].0.max(0.0) * PLACEMENT_APART && w[0].2 < w[1].1);
    if !apart {
        return None;
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(class, v)| {
            let n = v.len();
            format!(
                "{n} run{} {}: {}",
                if n == 1 { "" } else { "s" },
                class.words(),
                show(crate::measure::stats::median(v).unwrap_or_default())
            )
        })
        .collect();
    Some(warning(
        "placement",
        format!("{}; pin with --cpus to choose", parts.join("; ")),
    ))
}

/// Roles that wait by spinning (the `nonblocking` engine; every shared-memory ring) and
/// shared one CPU for some of a run: one spins through its time slice while the other,
/// which it waits for, cannot run, so the run measures the scheduler, not the transport
/// (`stream -t pipe -e nonblocking --cpus 0,0` gave 65.6 Mbit/s against 7.95 Gbit/s on
/// two CPUs; a shm round trip 566 us against 522 ns).
pub fn spinning_shared_a_cpu(sc: &Scenario, r: &ScenarioResult) -> Option<Warning> {
    use crate::measure::placement::PlacementClass;
    sc.spinner()?;
    let shared = (r.runs.iter())
        .filter(|run| {
            run.placement
                .is_some_and(|p| p.class != PlacementClass::AcrossCpus)
        })
        .count();
    (shared > 0).then(|| {
        warning(
            "spinning-shared-cpu",
            format!(
                "{shared} of {} runs had both roles on one CPU for part of the time while one waits by \
                 spinning: it burns its time slice while the other cannot run, so the figure is the \
                 scheduler's, not the transport's; pin them apart with --cpus 0,1",
                r.runs.len()
            ),
        )
    })
}

/// MSG_ZEROCOPY sends that were not zero-copy after all: those the kernel reported it
/// copied (always all of them when the data is delivered to a socket on this host), and
/// those whose completion did not come within the wait after the last send.
pub fn zerocopy_copied(r: &ScenarioResult) -> Vec<Warning> {
    let Some(z) = r.send.and_then(|s| s.zerocopy) else {
        return zerocopy_unmapped(r).into_iter().collect();
    };
    let mut out = Vec::new();
    if z.copied > 0 {
        let route = r
            .median_run()
            .and_then(|f| f.route.clone())
            .map(|dev| format!(" (the data went through {dev})"))
            .unwrap_or_default();
        out.push(warning(
            "zerocopy-copied",
            format!(
                "the kernel copied {} of {} MSG_ZEROCOPY sends anyway{route}: as the kernel's \
                 Documentation/networking/msg_zerocopy.rst says, data looped to a local socket is always copied \
                 (a deferred copy: the receiving socket could hold the pages indefinitely), on loopback and over a \
                 veth to another namespace alike; only packets that leave through a device can avoid the copy. \
                 This run measures MSG_ZEROCOPY's bookkeeping on top of a copy, not its saving",
                z.copied, z.completed
            ),
        ));
    }
    out.extend(zerocopy_unmapped(r));
    let outstanding = z.sends.saturating_sub(z.completed);
    if outstanding > 0 {
        out.push(warning(
            "zerocopy-outstanding",
            format!(
                "{outstanding} of {} MSG_ZEROCOPY sends had no completion on the error queue within {} s of the last \
                 send: they are counted neither as copied nor as zero-copy",
                z.sends,
                crate::workload::stream::COMPLETION_WAIT.as_secs()
            ),
        ));
    }
    out
}

/// A zero-copy receiver that mapped nothing: every byte was copied after all.
pub fn zerocopy_unmapped(r: &ScenarioResult) -> Option<Warning> {
    let v = r.recv.filter(|v| v.map_calls.is_some())?;
    (v.bytes_mapped == 0 && v.bytes_copied > 0).then(|| {
        warning(
            "zerocopy-unmapped",
            format!(
                "--recv zerocopy mapped no page: all {} were copied. TCP_ZEROCOPY_RECEIVE maps only data that lies in \
                 whole pages it may hand over: a deferred MSG_ZEROCOPY copy makes such pages (try --send zerocopy), \
                 but what a sender on this host wrote, sendfile'd or spliced lies in \
                 shared or larger pages",
                format_bytes(v.bytes_copied)
            ),
        )
    })
}

/// Throughput that varies across runs.
pub fn unstable(r: &ScenarioResult) -> Option<Warning> {
    let cv = r.statistics.as_ref()?.bits_per_second.cv?;
    (cv > UNSTABLE_CV).then(|| {
        warning(
            "unstable",
            format!(
                "runs disagree: throughput varies by {:.1}% (coefficient of variation); close other programs, \
                 pin threads with --cpus, or raise --runs and --duration",
                cv * 100.0
            ),
        )
    })
}

/// Below this, a run's rate is its start-up (the first writes into empty buffers, slow
/// start, a thread not yet scheduled), not its steady state: 1000 messages of 1 KiB over
/// loopback take 1 to 3 ms and have given 10.4 and 1.45 Gbit/s from one command.
pub const MIN_STEADY_SECONDS: f64 = 0.02;

/// A rate measured over a run too short to have one (stream, rate, connect; a pingpong's
/// percentiles depend on how many round trips, not how long).
pub fn too_short(r: &ScenarioResult) -> Option<Warning> {
    use crate::measure::headline::Quantity;
    if crate::workload::spec(r.workload).headline().quantity == Quantity::Latency {
        return None;
    }
    let shortest = r
        .runs
        .iter()
        .map(|run| run.duration_seconds)
        .fold(f64::INFINITY, f64::min);
    (shortest < MIN_STEADY_SECONDS).then(|| {
        warning(
            "too-short",
            format!(
                "a run took only {}: too short to measure a steady rate (start-up and scheduling \
                 dominate it); measure for longer: -d 1, or a larger -n or -b",
                crate::vocab::units::format_seconds(shortest)
            ),
        )
    })
}

/// A requested socket buffer the kernel granted less of.
pub fn buffer_clamped(sc: &Scenario, r: &ScenarioResult) -> Vec<Warning> {
    let Some(first) = r.median_run() else {
        return Vec::new();
    };
    let clamp = |what: &str, asked: Option<u64>, got: Option<u64>, sysctl: &str| {
        let (asked, got) = (asked?, got?);
        // Linux doubles SO_SNDBUF/SO_RCVBUF for bookkeeping; less than double means clamped.
        (sc.transport.is_socket() && got < asked.saturating_mul(2)).then(|| {
            warning(
                "buffer-clamped",
                format!(
                    "{what} of {} was requested but the kernel granted {} (half of it usable): it is capped by \
                     {sysctl}; raise it with `sysctl -w {sysctl}=...`",
                    format_bytes(asked),
                    format_bytes(got)
                ),
            )
        })
    };
    // A queue is capped by the limit of the machine that made it: the plan's note knows
    // only this one's fs.mqueue.msg_max. A queue that holds fewer messages than that
    // allows was made by a server with a lower limit: say what it held.
    let queue = (|| {
        if sc.transport != crate::transport::TransportKind::Mq {
            return None;
        }
        let (asked, got) = (sc.sndbuf?, first.sndbuf_bytes?);
        let message = sc.size.max(1);
        // Depths are whole messages: asking for less than one message gets one.
        let depth = (asked / message).max(1);
        let expected = depth.min(crate::transport::mq_max_depth());
        (got / message < expected).then(|| {
            warning(
                "buffer-clamped",
                format!(
                    "--sndbuf {} asks for a queue of {depth} messages, but the queue held {}                      (the fs.mqueue.msg_max of the machine that made it, the server's): raise it there                      with `sysctl -w fs.mqueue.msg_max={depth}`",
                    format_bytes(asked),
                    got / message
                ),
            )
        })
    })();
    [
        queue,
        clamp(
            "--sndbuf",
            sc.sndbuf,
            first.sndbuf_bytes,
            "net.core.wmem_max",
        ),
        clamp(
            "--rcvbuf",
            sc.rcvbuf,
            first.rcvbuf_bytes,
            "net.core.rmem_max",
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// A one-way side that kept a core busy: the figure is a limit of the CPU. A paced
/// sender spins on purpose, and a run of a few milliseconds is too short to judge.
pub fn cpu_saturated(sc: &Scenario, r: &ScenarioResult) -> Option<Warning> {
    if sc.extras.rate.is_some() {
        return None;
    }
    let first = r.median_run()?;
    if first.duration_seconds < MIN_JUDGED_SECONDS {
        return None;
    }
    let busy: Vec<String> = [("sender", &first.sender), ("receiver", &first.receiver)]
        .into_iter()
        .map(|(name, side)| (name, side.cpu_utilization / sc.parallel as f64))
        .filter(|&(_, used)| used >= SATURATED)
        .map(|(name, used)| format!("the {name} {:.0}%", used * 100.0))
        .collect();
    (!busy.is_empty()).then(|| {
        warning(
            "cpu-saturated",
            format!(
                "CPU-bound ({} of a core): the figure is a limit of the CPU and the kernel's code path, not of \
                 the transport",
                busy.join(", ")
            ),
        )
    })
}

/// Messages from this size on are not diagnosed for Nagle stalls.
const NAGLE_RELEVANT_BELOW: u64 = 1 << 20;

/// A cluster of ~40 ms round trips on TCP without TCP_NODELAY.
pub fn delayed_ack(sc: &Scenario, r: &ScenarioResult) -> Option<Warning> {
    let tcp = matches!(sc.transport, TransportKind::Tcp | TransportKind::Tcp6);
    let h = r
        .histograms
        .get(&crate::measure::latency::LatencyKind::RoundTrip)?;
    let slow = fraction_at_least(h, STALL_NS);
    // Only a request that leaves in pieces can wait for an ACK (several writes, or one
    // larger than a segment); in open loop, queueing alone makes round trips this slow.
    let mss = r.median_run().and_then(|m| m.mss_bytes).unwrap_or(65_483);
    let pieces = sc.extras.writes > 1 || sc.size > mss;
    // From a megabyte on, carrying the message takes tens of milliseconds on anything but
    // loopback, and one stall of 40 ms is not what a round trip of it is made of.
    let small = sc.size < NAGLE_RELEVANT_BELOW;
    (tcp && !sc.nodelay && pieces && small && sc.extras.rate.is_none() && slow >= 0.01).then(|| {
        warning(
            "delayed-ack",
            format!(
                "{:.0}% of round trips took 30 ms or more, the signature of Nagle's algorithm waiting for a \
                 delayed ACK (about 40 ms on Linux) when a request is sent in more than one write: use \
                 --nodelay (TCP_NODELAY), or send each request in one write",
                slow * 100.0
            ),
        )
    })
}

/// Round-trip runs that disagree: some runs' p50 stands apart from the others' (on a
/// small machine, both sides on one CPU or on two give round trips that differ by a
/// factor of five). A single short run is said to be a single run.
pub fn latency_runs_disagree(r: &ScenarioResult) -> Option<Warning> {
    let p50s: Vec<u64> = r
        .runs
        .iter()
        .filter_map(|run| {
            run.latencies
                .get(&crate::measure::latency::LatencyKind::RoundTrip)
                .map(|l| l.p50_ns)
        })
        .collect();
    if p50s.len() == 1 {
        let secs = r.runs[0].duration_seconds;
        return (secs < SHORT_SINGLE_RUN_SECONDS).then(|| {
            warning(
                "single-run",
                format!(
                    "one run of {secs:.2} s: round trips can differ by a factor between runs (the scheduler may \
                     put both sides on one CPU or on two); use --runs 5 to see the spread, --cpus to choose"
                ),
            )
        });
    }
    if p50s.len() < 2 {
        return None;
    }
    let mut sorted = p50s.clone();
    sorted.sort_unstable();
    let middle = sorted[(sorted.len() - 1) / 2].max(1) as f64;
    let apart: Vec<u64> = p50s
        .iter()
        .copied()
        .filter(|&p| p as f64 > middle * APART || (p as f64) * APART < middle)
        .collect();
    (!apart.is_empty()).then(|| {
        let list: Vec<String> = p50s.iter().map(|&p| format_ns(p)).collect();
        warning(
            "runs-disagree",
            format!(
                "runs disagree: p50 round trip per run {}; {} of {} runs stand more than {APART}x apart from the \
                 median ({}). Both sides on one CPU or on two give different round trips: pin them with --cpus \
                 A,B to choose, and raise --runs",
                list.join(", "),
                apart.len(),
                p50s.len(),
                format_ns(middle as u64)
            ),
        )
    })
}

/// Datagrams lost, and where the kernel's counters say they went.
pub fn datagram_loss(r: &ScenarioResult) -> Option<Warning> {
    let lost = r.messages_lost.filter(|&l| l > 0)?;
    let why = match r.udp_receive_buffer_errors {
        Some(0) => "the kernel counted no receive-buffer overflow, so they were dropped elsewhere \
                    (sender queue, interface, a firewall rule, or another host)"
            .to_string(),
        // Most of the losses (the counter is system-wide, so it may exceed them): the
        // receiver's buffer overflowed.
        Some(n) if n.saturating_mul(10) >= lost.saturating_mul(9) => format!(
            "the kernel counted {n} receive-buffer overflows (UDP RcvbufErrors) during the run: the \
             receiver's buffer was full; try a larger --rcvbuf (up to net.core.rmem_max) or a --rate"
        ),
        Some(n) => format!(
            "only {n} of them were receive-buffer overflows (UDP RcvbufErrors); the other {} were dropped \
             elsewhere (sender queue, interface, a firewall rule, or another host): look there first, \
             e.g. `nstat -az | grep -i drop`",
            lost - n
        ),
        None => "try a larger --rcvbuf, or pace the sender with --rate".to_string(),
    };
    Some(warning(
        "datagram-loss",
        format!("{lost} of {} datagrams were lost: {why}", r.messages_sent),
    ))
}

/// A reliable transport must deliver exactly what was sent: anything else fails the
/// scenario (it is a bug, in sockbench or the kernel).
pub fn disagreement(sc: &Scenario, r: &ScenarioResult) -> Option<String> {
    if !sc.transport.reliable() {
        return None;
    }
    if let Some(f) = r
        .runs
        .iter()
        .find(|f| f.requests_lost.unwrap_or(0) + f.replies_lost.unwrap_or(0) > 0)
    {
        return Some(format!(
            "{} of {} requests or their replies went missing on {}, which must deliver everything: this is \
             a bug, please report it",
            f.requests_lost.unwrap_or(0) + f.replies_lost.unwrap_or(0),
            f.messages_sent,
            sc.transport
        ));
    }
    let bad = r
        .runs
        .iter()
        .find(|f| f.bytes_sent != f.bytes_received || f.messages_sent != f.messages_received)?;
    Some(format!(
        "sender and receiver disagree: sent {} bytes in {} messages, received {} bytes in {} messages; \
         a reliable transport must deliver everything, so this is a bug: please report it",
        bad.bytes_sent, bad.messages_sent, bad.bytes_received, bad.messages_received
    ))
}

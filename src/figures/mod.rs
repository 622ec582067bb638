//! From what the roles of a run reported to the figures of the report: the figures every
//! workload shares (each side's interval, CPU, rates, buffers), with the counts the
//! workload's own [`Tally`] makes, then statistics across runs and the diagnoses.

pub mod timestamps;

use crate::measure::latency::LatencyKind;
use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::measure::histogram::{merge, Latency};
use crate::measure::stats::{median, Summary};
use crate::results::{RunFigures, ScenarioOptions, ScenarioResult, SideFigures, Statistics};
use crate::scenario::Scenario;
use crate::scenario::Stop;
use crate::vocab::Role;
use crate::workload::{spec, Roles, Tally};

/// Runs shorter than this have no machine-wide CPU figure: /proc/stat's ticks are 10 ms.
const MIN_SYSTEM_SECONDS: f64 = 0.05;

/// One role's figures (all its streams): its interval runs from the run's start (so a
/// role that woke late cannot shorten its own interval) to its last end.
pub fn side_figures(roles: &Roles, role: Role, bytes: u64) -> SideFigures {
    let sides = roles.of(role);
    let secs = roles.interval(role);
    let cpu = sides
        .iter()
        .fold(crate::measure::cpu::ThreadCpu::default(), |a, s| {
            a.plus(&s.cpu)
        });
    // A thread cannot use more than one core: on an interval of a few microseconds the
    // clock reads themselves could make it look so.
    let threads = cpu
        .total()
        .as_secs_f64()
        .min(secs * sides.len().max(1) as f64);
    // io-uring `--sqpoll`: the ring's kernel thread works for this role alone, so its
    // CPU (all kernel time) is the role's too (at most one core per stream as well).
    let io_uring = crate::vocab::uring_use::UringUse::total(sides.iter().map(|s| &s.io_uring));
    let sqpoll = io_uring
        .as_ref()
        .and_then(|u| u.sqpoll_cpu())
        .map(|d| d.as_secs_f64().min(secs * sides.len().max(1) as f64));
    let total = threads + sqpoll.unwrap_or(0.0);
    let messages: u64 = sides.iter().map(|s| s.messages).sum();
    let calls = sides
        .iter()
        .map(|s| s.calls)
        .collect::<Option<Vec<u64>>>()
        .map(|c| c.iter().sum::<u64>())
        .filter(|_| !sides.is_empty());
    let placed = crate::measure::placement::side(
        &sides
            .iter()
            .map(|s| s.placement.as_ref())
            .collect::<Vec<_>>(),
    );
    let per_message = |n: u64| (messages > 0).then(|| n as f64 / messages as f64);
    SideFigures {
        messages_per_second: if secs > 0.0 {
            messages as f64 / secs
        } else {
            0.0
        },
        duration_seconds: secs,
        cpu_seconds: total,
        cpu_user_seconds: cpu.user.as_secs_f64().min(threads),
        cpu_system_seconds: cpu.system.as_secs_f64().min(threads) + sqpoll.unwrap_or(0.0),
        cpu_utilization: if secs > 0.0 { total / secs } else { 0.0 },
        cpu_seconds_per_gb: (bytes > 0).then(|| total / (bytes as f64 / 1e9)),
        sqpoll_cpu_seconds: sqpoll,
        io_uring,
        voluntary_context_switches: cpu.voluntary_switches,
        involuntary_context_switches: cpu.involuntary_switches,
        counters: crate::measure::counters::side(
            &sides
                .iter()
                .map(|s| s.counters.as_ref())
                .collect::<Vec<_>>(),
            messages,
        ),
        on_cpu: sides
            .iter()
            .map(|s| crate::results::OnCpu {
                start: s.on_cpu.0,
                end: s.on_cpu.1,
            })
            .collect(),
        cpus: placed.0,
        migrations: placed.1,
        migrations_source: placed.2,
        voluntary_switches_per_message: per_message(cpu.voluntary_switches),
        involuntary_switches_per_message: per_message(cpu.involuntary_switches),
        calls,
        messages_per_call: calls.filter(|&c| c > 0).map(|c| messages as f64 / c as f64),
    }
}

/// The figures of one run.
pub fn run_figures(sc: &Scenario, roles: &Roles) -> RunFigures {
    let tally: Tally = spec(sc.workload).tally(sc, roles);
    let bytes_sent = Roles::sum(&roles.senders, |s| s.bytes);
    let messages_sent = Roles::sum(&roles.senders, |s| s.messages);
    let receiver = side_figures(
        roles,
        Role::Receiver,
        Roles::sum(&roles.receivers, |s| s.bytes),
    );
    let sender = side_figures(roles, Role::Sender, bytes_sent);
    let transfer_seconds = receiver.duration_seconds;
    let secs = match tally.clock {
        Role::Sender => sender.duration_seconds,
        Role::Receiver => receiver.duration_seconds,
    };
    let rate = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
    let latencies = run_histograms(roles)
        .iter()
        .filter_map(|(&kind, h)| Some((kind, Latency::of(h)?)))
        .collect();
    RunFigures {
        duration_seconds: secs,
        bytes_sent,
        bytes_received: tally.bytes_received,
        messages_sent,
        messages_received: tally.messages_received,
        messages_lost: tally.messages_lost,
        requests_lost: tally.exchanges.map(|e| e.requests_lost),
        replies_lost: tally.exchanges.map(|e| e.replies_lost),
        replies_late: tally.exchanges.map(|e| e.replies_late),
        messages_reordered: tally.sequence.map(|c| c.reordered),
        messages_duplicated: tally.sequence.map(|c| c.duplicated),
        udp_receive_buffer_errors: roles.udp_drops,
        bits_per_second: rate(tally.delivered_bytes) * 8.0,
        bytes_per_second: rate(tally.delivered_bytes),
        messages_per_second: rate(tally.counted),
        sender,
        receiver,
        // /proc/stat counts in ticks (10 ms): over a shorter run its figure is noise.
        system: roles
            .system
            .filter(|_| transfer_seconds >= MIN_SYSTEM_SECONDS),
        server_system: roles
            .peer
            .as_ref()
            .and_then(|p| p.system)
            .filter(|_| transfer_seconds >= MIN_SYSTEM_SECONDS),
        sndbuf_bytes: roles.link.sndbuf_bytes,
        rcvbuf_bytes: roles.link.rcvbuf_bytes,
        mss_bytes: roles.link.mss_bytes,
        tcp: crate::measure::tcp_info::TcpFigures::of(
            roles.senders.iter().map(|s| s.tcp).collect(),
        ),
        route: roles.link.route.clone(),
        mtu_bytes: roles.link.mtu_bytes,
        endpoint: roles.link.endpoint.clone(),
        phases: tally.phases,
        send: crate::measure::calls::SendCounts::total(roles.senders.iter().map(|s| &s.send)),
        recv: crate::measure::calls::RecvCounts::total(roles.receivers.iter().map(|s| &s.recv)),
        latencies,
        placement: run_placement(roles),
        timestamps: crate::figures::timestamps::run_report(sc, roles),
        intervals: Vec::new(),
        directions: roles
            .directions
            .iter()
            .map(|(name, one_way)| {
                let f = run_figures(sc, one_way);
                crate::results::Direction {
                    direction: name.clone(),
                    bytes_sent: f.bytes_sent,
                    bytes_received: f.bytes_received,
                    messages_sent: f.messages_sent,
                    messages_received: f.messages_received,
                    messages_lost: f.messages_lost,
                    duration_seconds: f.duration_seconds,
                    bits_per_second: f.bits_per_second,
                    tcp_retransmits: f.tcp.and_then(|t| t.retransmits),
                }
            })
            .collect(),
    }
}

/// The first figure of a run that no measurement gives (a peer's forged report: each of
/// its counts in range, beyond any link, clock or CPU together), named with its value:
/// rates beyond [`plausible`](crate::vocab::units::plausible), counts beyond a test's,
/// latencies beyond an hour, machine-wide CPU that is negative, not a number or over
/// every core's time.
pub fn implausible(f: &RunFigures) -> Option<String> {
    use crate::vocab::units::plausible;
    let out = |what: &str, v: f64, most: f64| {
        (!(v.is_finite() && (0.0..=most).contains(&v))).then(|| format!("{what} {v:e}"))
    };
    let count =
        |what: &str, n: Option<u64>| out(what, n.unwrap_or(0) as f64, plausible::COUNT as f64);
    let rates = [
        ("bit/s", f.bits_per_second, plausible::BITS_PER_SECOND),
        (
            "bytes/s",
            f.bytes_per_second * 8.0,
            plausible::BITS_PER_SECOND,
        ),
        ("messages/s", f.messages_per_second, plausible::PER_SECOND),
        (
            "messages/s sent",
            f.sender.messages_per_second,
            plausible::PER_SECOND,
        ),
        (
            "messages/s received",
            f.receiver.messages_per_second,
            plausible::PER_SECOND,
        ),
    ];
    let directions = f.directions.iter().map(|d| {
        (
            "bit/s one way",
            d.bits_per_second,
            plausible::BITS_PER_SECOND,
        )
    });
    let counts = [
        ("messages sent", Some(f.messages_sent)),
        ("messages received", Some(f.messages_received)),
        ("messages lost", f.messages_lost),
        ("requests lost", f.requests_lost),
        ("replies lost", f.replies_lost),
        ("replies late", f.replies_late),
        ("messages reordered", f.messages_reordered),
        ("messages duplicated", f.messages_duplicated),
        ("UDP receive-buffer drops", f.udp_receive_buffer_errors),
    ];
    let latencies = f.latencies.iter().flat_map(|(kind, l)| {
        [
            out(kind.name(), l.max_ns as f64, plausible::LATENCY_NS),
            count(kind.name(), Some(l.count)),
        ]
    });
    let cpu = [f.system, f.server_system]
        .into_iter()
        .flatten()
        .flat_map(|s| {
            [
                out(
                    "CPU seconds (user)",
                    s.cpu_user_seconds,
                    plausible::CPU_SECONDS,
                ),
                out(
                    "CPU seconds (system)",
                    s.cpu_system_seconds,
                    plausible::CPU_SECONDS,
                ),
                out(
                    "CPU seconds (interrupts)",
                    s.cpu_interrupt_seconds,
                    plausible::CPU_SECONDS,
                ),
                out(
                    "CPU seconds (busy)",
                    s.cpu_busy_seconds,
                    plausible::CPU_SECONDS,
                ),
                out("CPU utilization", s.utilization, 1.0),
            ]
        });
    (rates.into_iter().chain(directions))
        .map(|(what, v, most)| out(what, v, most))
        .chain(counts.into_iter().map(|(what, n)| count(what, n)))
        .chain(latencies)
        .chain(cpu)
        .flatten()
        .next()
}

/// A run's latency histograms, merged over its sides and streams, by name.
fn run_histograms(raw: &Roles) -> BTreeMap<LatencyKind, Histogram<u64>> {
    let mut out: BTreeMap<LatencyKind, Histogram<u64>> = BTreeMap::new();
    for (kind, h) in raw
        .senders
        .iter()
        .chain(&raw.receivers)
        .flat_map(|s| &s.latencies)
    {
        match out.get_mut(kind) {
            Some(into) => merge(into, h),
            None => {
                out.insert(*kind, h.clone());
            }
        }
    }
    out
}

/// Turn the raw runs of a scenario into its result, with statistics and warnings.
pub fn figures(sc: &Scenario, raws: &[Roles]) -> ScenarioResult {
    let runs: Vec<RunFigures> = raws.iter().map(|r| run_figures(sc, r)).collect();
    let col = |f: fn(&RunFigures) -> f64| runs.iter().map(f).collect::<Vec<_>>();
    let bits = col(|r| r.bits_per_second);
    let msgs = col(|r| r.messages_per_second);
    let opt_median =
        |f: fn(&RunFigures) -> Option<f64>| median(&runs.iter().filter_map(f).collect::<Vec<_>>());
    let statistics = Summary::of(&bits)
        .zip(Summary::of(&msgs))
        .map(|(b, m)| Statistics {
            bits_per_second: b,
            messages_per_second: m,
        });
    // With no finished run nothing is known: null, never a reassuring zero.
    let lost = total_opt(&runs, |r| r.messages_lost);
    let mut histograms: BTreeMap<LatencyKind, Histogram<u64>> = BTreeMap::new();
    for (kind, h) in raws.iter().flat_map(run_histograms) {
        match histograms.get_mut(&kind) {
            Some(into) => merge(into, &h),
            None => {
                histograms.insert(kind, h);
            }
        }
    }
    let latencies = histograms
        .iter()
        .filter_map(|(&kind, h)| Some((kind, Latency::of(h)?)))
        .collect();
    let cpu_seconds_per_round_trip = spec(sc.workload)
        .cpu_per_exchange()
        .then(|| {
            opt_median(|r| {
                let trips = r.messages_per_second * r.duration_seconds;
                (trips > 0.0).then(|| (r.sender.cpu_seconds + r.receiver.cpu_seconds) / trips)
            })
        })
        .flatten();
    let takes = spec(sc.workload).takes();
    let mut result = ScenarioResult {
        workload: sc.workload,
        transport: sc.transport,
        engine: sc.engine,
        size_bytes: sc.size,
        options: ScenarioOptions {
            duration_seconds: match sc.stop {
                Stop::Duration(d) => Some(d.as_secs_f64()),
                _ => None,
            },
            count: match sc.stop {
                Stop::Count(n) => Some(n),
                _ => None,
            },
            bytes: match sc.stop {
                Stop::Bytes(n) => Some(n),
                _ => None,
            },
            warmup_seconds: sc.warmup.as_secs_f64(),
            runs: sc.runs,
            parallel: sc.parallel,
            sndbuf_bytes: sc.sndbuf,
            rcvbuf_bytes: sc.rcvbuf,
            nodelay: sc.nodelay,
            cpus: sc.cpus.map(|(a, b)| [a, b]),
            runtime: (sc.engine == crate::engine::EngineKind::Async).then_some(sc.extras.runtime),
            send: takes.send_recv.then_some(sc.extras.send),
            recv: takes.send_recv.then_some(sc.extras.recv),
            rate_per_second: sc.extras.rate,
            open: takes.open.then_some(sc.extras.open),
            batch: sc.extras.batch,
            timestamps: sc.extras.timestamps,
            sqpoll: sc.extras.sqpoll,
            counters: sc.extras.counters,
        },
        bits_per_second: median(&bits),
        bytes_per_second: median(&col(|r| r.bytes_per_second)),
        messages_per_second: median(&msgs),
        bytes_sent: runs.iter().map(|r| r.bytes_sent).sum(),
        bytes_received: runs.iter().map(|r| r.bytes_received).sum(),
        messages_sent: runs.iter().map(|r| r.messages_sent).sum(),
        messages_received: runs.iter().map(|r| r.messages_received).sum(),
        messages_lost: lost,
        requests_lost: total_opt(&runs, |r| r.requests_lost),
        replies_lost: total_opt(&runs, |r| r.replies_lost),
        replies_late: total_opt(&runs, |r| r.replies_late),
        messages_reordered: total_opt(&runs, |r| r.messages_reordered),
        messages_duplicated: total_opt(&runs, |r| r.messages_duplicated),
        // Nothing sent: nothing was delivered or lost, so the fraction is unknown.
        delivered_fraction: lost.and_then(|l| {
            let sent: u64 = runs.iter().map(|r| r.messages_sent).sum();
            (sent > 0).then(|| (sent - l.min(sent)) as f64 / sent as f64)
        }),
        udp_receive_buffer_errors: total_opt(&runs, |r| r.udp_receive_buffer_errors),
        tcp_retransmits: total_opt(&runs, |r| r.tcp.as_ref().and_then(|t| t.retransmits)),
        sender_cpu_seconds_per_gb: opt_median(|r| r.sender.cpu_seconds_per_gb),
        receiver_cpu_seconds_per_gb: opt_median(|r| r.receiver.cpu_seconds_per_gb),
        latencies,
        timestamps: crate::figures::timestamps::scenario_report(sc, raws),
        latency_buckets: histograms
            .iter()
            .map(|(&kind, h)| (kind, crate::measure::histogram::buckets(h)))
            .filter(|(_, b)| !b.is_empty())
            .collect(),
        cpu_seconds_per_round_trip,
        send: crate::measure::calls::SendCounts::total(runs.iter().map(|r| &r.send)),
        recv: crate::measure::calls::RecvCounts::total(runs.iter().map(|r| &r.recv)),
        statistics,
        runs,
        warnings: Vec::new(),
        error: None,
        histograms,
    };
    result.warnings = crate::diagnose::warnings(sc, &result);
    result
}

/// The total of a per-run counter, null if any run lacks it or there is no run.
fn total_opt(runs: &[RunFigures], f: fn(&RunFigures) -> Option<u64>) -> Option<u64> {
    if runs.is_empty() {
        return None;
    }
    runs.iter().map(f).sum()
}

/// Where a run's sender and receiver ran relative to each other: one stream each way
/// only (with several, which sender fed which receiver is not recorded), both traces
/// from this host.
fn run_placement(roles: &Roles) -> Option<crate::measure::placement::RunPlacement> {
    if !roles.directions.is_empty() {
        return None;
    }
    let ([s], [r]) = (&roles.senders[..], &roles.receivers[..]) else {
        return None;
    };
    let share =
        crate::measure::placement::same_cpu_share(s.placement.as_ref()?, r.placement.as_ref()?)?;
    Some(crate::measure::placement::RunPlacement {
        same_cpu_share: share,
        class: crate::measure::placement::PlacementClass::of(share),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::disagreement as check_agreement;
    use crate::transport::LinkInfo;
    use crate::workload::SideReport;
    use std::time::Duration;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn a_side_that_starts_late_is_timed_from_the_shared_start() {
        let side = |delay: u64, ms: u64| SideReport {
            bytes: 1000,
            start_delay: MS(delay),
            elapsed: Some(MS(ms)),
            ..SideReport::default()
        };
        // The receiver started 2 ms after the line opened, the sender 5 ms: the run
        // starts with the receiver, and the late sender's 7 ms count from there.
        let roles = Roles {
            senders: vec![side(5, 7)],
            receivers: vec![side(2, 20)],
            ..Roles::default()
        };
        let f = side_figures(&roles, Role::Sender, 1000);
        assert!(
            (f.duration_seconds - 0.010).abs() < 1e-9,
            "{}",
            f.duration_seconds
        );
        let f = side_figures(&roles, Role::Receiver, 1000);
        assert!(
            (f.duration_seconds - 0.020).abs() < 1e-9,
            "{}",
            f.duration_seconds
        );
    }

    use crate::scenario::WorkloadKind;
    use crate::transport::TransportKind;

    /// Issue 28: a server's report whose every count is in range on its own (2^50 bytes in
    /// a microsecond) made the client print 9e21 bit/s.
    #[test]
    fn a_run_no_measurement_gives_is_named_and_a_real_one_is_not() {
        let sc = Scenario::new(WorkloadKind::Stream, TransportKind::Tcp, 64 << 10);
        let side = |bytes: u64, ns: u64| SideReport {
            bytes,
            messages: bytes / 1000,
            elapsed: Some(Duration::from_nanos(ns)),
            ..SideReport::default()
        };
        let roles = |bytes, ns| Roles {
            senders: vec![side(bytes, ns)],
            receivers: vec![side(bytes, ns)],
            ..Roles::default()
        };
        // 10 GB in a second, and a single byte in a microsecond: measurements.
        assert_eq!(
            implausible(&run_figures(&sc, &roles(10_000_000_000, 1_000_000_000))),
            None
        );
        assert_eq!(implausible(&run_figures(&sc, &roles(1, 1000))), None);
        let forged = implausible(&run_figures(&sc, &roles(1 << 50, 1000))).unwrap();
        assert!(forged.starts_with("bit/s"), "{forged}");
        let mut f = run_figures(&sc, &roles(1000, 1_000_000));
        let cpu = crate::measure::cpu::SystemCpu {
            cpu_user_seconds: 1.0,
            cpu_system_seconds: 1.0,
            cpu_interrupt_seconds: 0.0,
            cpu_busy_seconds: 2.0,
            utilization: 0.5,
        };
        f.server_system = Some(cpu);
        assert_eq!(implausible(&f), None);
        for bad in [
            crate::measure::cpu::SystemCpu {
                utilization: 7.5,
                ..cpu
            },
            crate::measure::cpu::SystemCpu {
                cpu_user_seconds: -1.0,
                ..cpu
            },
            crate::measure::cpu::SystemCpu {
                cpu_busy_seconds: 1e300,
                ..cpu
            },
            crate::measure::cpu::SystemCpu {
                utilization: f64::NAN,
                ..cpu
            },
        ] {
            f.server_system = Some(bad);
            assert!(implausible(&f).unwrap().starts_with("CPU"), "{bad:?}");
        }
        f.server_system = None;
        f.udp_receive_buffer_errors = Some(u64::MAX);
        assert!(implausible(&f).unwrap().starts_with("UDP"));
        f.udp_receive_buffer_errors = None;
        // Bytes per second are held to the bit rate's bound in bits: an eighth of it is
        // the most, whatever the bits/s beside them say.
        let most = crate::vocab::units::plausible::BITS_PER_SECOND / 8.0;
        f.bytes_per_second = most;
        assert_eq!(implausible(&f), None);
        f.bytes_per_second = most * 1.5;
        assert!(implausible(&f).unwrap().starts_with("bytes/s"), "{f:?}");
    }

    fn udp_raw(sent: u64, received: u64, drops: Option<u64>) -> Roles {
        let side = |n: u64| SideReport {
            bytes: n * 64,
            messages: n,
            elapsed: Some(MS(100)),
            ..SideReport::default()
        };
        Roles {
            senders: vec![side(sent)],
            receivers: vec![side(received)],
            system: None,
            link: LinkInfo::default(),
            udp_drops: drops,
            connect_time: Duration::ZERO,
            peer: None,
            directions: Vec::new(),
        }
    }

    #[test]
    fn the_loss_warning_blames_the_receive_buffer_only_for_the_losses_it_explains() {
        let sc = Scenario::new(WorkloadKind::Rate, TransportKind::Udp, 64);
        let w = |drops| {
            let r = figures(&sc, &[udp_raw(1000, 900, drops)]);
            assert_eq!(r.messages_lost, Some(100));
            r.warnings
                .iter()
                .find(|w| w.kind == "datagram-loss")
                .unwrap()
                .message
                .clone()
        };
        let few = w(Some(3));
        assert!(
            few.contains("only 3 of them") && few.contains("other 97"),
            "{few}"
        );
        assert!(!few.contains("try a larger --rcvbuf"), "{few}");
        assert!(w(Some(95)).contains("the receiver's buffer was full"));
        assert!(w(Some(0)).contains("no receive-buffer overflow"));
    }

    #[test]
    fn no_finished_run_means_unknown_counts_not_zero() {
        let sc = Scenario::new(WorkloadKind::Rate, TransportKind::Udp, 64);
        let r = figures(&sc, &[]);
        assert_eq!(r.messages_lost, None);
        assert_eq!(r.delivered_fraction, None);
        assert_eq!(r.messages_reordered, None);
        assert_eq!(r.udp_receive_buffer_errors, None);
        let r = figures(&sc, &[udp_raw(0, 0, Some(0))]);
        assert_eq!(r.delivered_fraction, None, "nothing sent: unknown");
        let r = figures(&sc, &[udp_raw(10, 10, Some(0))]);
        assert_eq!(r.delivered_fraction, Some(1.0));
        assert_eq!(r.messages_lost, Some(0));
        assert_eq!(r.udp_receive_buffer_errors, Some(0));
    }

    #[test]
    fn tcp_figures_are_the_senders_and_retransmits_add_up_over_streams_runs_and_directions() {
        use crate::measure::tcp_info::TcpInfo;
        let sc = Scenario {
            parallel: 2,
            ..Scenario::new(WorkloadKind::Stream, TransportKind::Tcp, 64 << 10)
        };
        let side = |tcp: Option<TcpInfo>| SideReport {
            bytes: 1000,
            messages: 1,
            elapsed: Some(MS(100)),
            tcp,
            ..SideReport::default()
        };
        let run = |a: u32, b: u32| Roles {
            senders: vec![
                side(Some(TcpInfo::new(a, 10, 1000, 50, 5, 1500))),
                side(Some(TcpInfo::new(b, 30, 1000, 150, 5, 1500))),
            ],
            // A receiver's figures (there are none today) would never count.
            receivers: vec![side(Some(TcpInfo::new(99, 1, 1, 1, 1, 1))), side(None)],
            ..Roles::default()
        };
        let r = figures(&sc, &[run(3, 4), run(0, 2)]);
        let first = r.runs[0].tcp.as_ref().unwrap();
        assert_eq!(first.retransmits, Some(7));
        assert_eq!(first.snd_cwnd_bytes_max, Some(30_000));
        assert_eq!(first.srtt_us_mean, Some(100));
        assert_eq!(first.streams.len(), 2);
        assert_eq!(r.runs[1].tcp.as_ref().unwrap().retransmits, Some(2));
        assert_eq!(r.tcp_retransmits, Some(9), "the total over runs");
        // A run whose count is unknown makes the total unknown; no TCP at all is null.
        let unknown = Roles {
            senders: vec![side(Some(TcpInfo::new(1, 1, 1, 1, 1, 1))), side(None)],
            ..run(0, 0)
        };
        let r = figures(&sc, &[run(3, 4), unknown]);
        assert_eq!(r.tcp_retransmits, None);
        let unix = Scenario::new(WorkloadKind::Stream, TransportKind::Unix, 64 << 10);
        let r = figures(&unix, &[udp_raw(10, 10, None)]);
        assert_eq!((r.tcp_retransmits, r.runs[0].tcp.as_ref()), (None, None));
        // --bidir: each direction its own, the run both.
        let both = Roles {
            directions: vec![
                ("client to server".into(), run(1, 1)),
                ("server to client".into(), run(5, 0)),
            ],
            senders: [run(1, 1).senders, run(5, 0).senders].concat(),
            receivers: [run(1, 1).receivers, run(5, 0).receivers].concat(),
            ..Roles::default()
        };
        let f = run_figures(&sc, &both);
        assert_eq!(f.tcp.unwrap().retransmits, Some(7));
        let per: Vec<Option<u64>> = f.directions.iter().map(|d| d.tcp_retransmits).collect();
        assert_eq!(per, [Some(2), Some(5)]);
    }

    #[test]
    fn messages_per_call_counts_every_stream_and_is_unknown_without_batches() {
        let side = |messages, calls| SideReport {
            messages,
            calls,
            elapsed: Some(Duration::from_secs(1)),
            ..SideReport::default()
        };
        let roles = Roles {
            senders: vec![side(640, Some(20)), side(320, Some(12))],
            receivers: vec![side(960, None)],
            ..Roles::default()
        };
        let f = side_figures(&roles, Role::Sender, 0);
        assert_eq!(f.calls, Some(32));
        assert_eq!(f.messages_per_call, Some(30.0));
        let f = side_figures(&roles, Role::Receiver, 0);
        assert_eq!((f.calls, f.messages_per_call), (None, None));
        // One stream that counted and one that did not: unknown, not a partial sum.
        let mixed = Roles {
            senders: vec![side(640, Some(20)), side(320, None)],
            ..Roles::default()
        };
        assert_eq!(side_figures(&mixed, Role::Sender, 0).calls, None);
        // No call at all: no ratio.
        let none = Roles {
            senders: vec![side(0, Some(0))],
            ..Roles::default()
        };
        assert_eq!(side_figures(&none, Role::Sender, 0).messages_per_call, None);
    }

    #[test]
    fn a_polling_kernel_threads_cpu_is_the_roles_kernel_time() {
        let uring = |ns| crate::vocab::uring_use::UringUse {
            submissions: 10,
            sqpoll: true,
            sqpoll_cpu_ns: Some(ns),
            ..Default::default()
        };
        let side = |ns| SideReport {
            bytes: 1_000_000_000,
            elapsed: Some(Duration::from_secs(1)),
            cpu: crate::measure::cpu::ThreadCpu {
                user: Duration::from_millis(100),
                system: Duration::from_millis(300),
                exact: Duration::from_millis(400),
                ..Default::default()
            },
            io_uring: Some(uring(ns)),
            ..SideReport::default()
        };
        let roles = Roles {
            senders: vec![side(250_000_000), side(500_000_000)],
            ..Roles::default()
        };
        let f = side_figures(&roles, Role::Sender, 2_000_000_000);
        assert_eq!(f.sqpoll_cpu_seconds, Some(0.75));
        assert!((f.cpu_seconds - 1.55).abs() < 1e-9, "{}", f.cpu_seconds);
        assert!((f.cpu_system_seconds - 1.35).abs() < 1e-9);
        assert!((f.cpu_user_seconds - 0.2).abs() < 1e-9);
        assert!((f.cpu_seconds_per_gb.unwrap() - 0.775).abs() < 1e-9);
        assert_eq!(f.io_uring.unwrap().submissions, 20);
        // Without a polling thread: nothing added.
        let plain = Roles {
            senders: vec![SideReport {
                io_uring: None,
                ..side(0)
            }],
            ..Roles::default()
        };
        let f = side_figures(&plain, Role::Sender, 1);
        assert_eq!((f.sqpoll_cpu_seconds, f.io_uring), (None, None));
        assert!((f.cpu_seconds - 0.4).abs() < 1e-9);
        // A polling thread cannot use more than a core either.
        let busy = Roles {
            senders: vec![side(1_500_000_000)],
            ..Roles::default()
        };
        assert_eq!(
            side_figures(&busy, Role::Sender, 1).sqpoll_cpu_seconds,
            Some(1.0)
        );
    }

    #[test]
    fn a_side_is_never_above_one_core_per_thread() {
        let side = SideReport {
            elapsed: Some(Duration::from_micros(10)),
            cpu: crate::measure::cpu::ThreadCpu {
                exact: Duration::from_micros(15),
                user: Duration::from_micros(15),
                ..Default::default()
            },
            ..SideReport::default()
        };
        let one = Roles {
            senders: vec![side.clone()],
            ..Roles::default()
        };
        let f = side_figures(&one, Role::Sender, 64);
        assert!(
            (f.cpu_utilization - 1.0).abs() < 1e-9,
            "{}",
            f.cpu_utilization
        );
        assert!(f.cpu_seconds <= f.duration_seconds);
        assert!(f.cpu_user_seconds <= f.cpu_seconds);
        // Two threads: up to two cores, not one.
        let two = Roles {
            senders: vec![side.clone(), side],
            ..Roles::default()
        };
        let two = side_figures(&two, Role::Sender, 64);
        assert!(
            (two.cpu_utilization - 2.0).abs() < 1e-9,
            "{}",
            two.cpu_utilization
        );
    }

    #[test]
    fn only_a_busy_side_over_a_long_enough_run_is_called_cpu_bound() {
        let sc = Scenario::new(WorkloadKind::Stream, TransportKind::Tcp, 64);
        let run = |ms: u64, busy_ms: u64| {
            let mut raw = udp_raw(10, 10, None);
            for s in raw.senders.iter_mut().chain(raw.receivers.iter_mut()) {
                s.elapsed = Some(MS(ms));
            }
            raw.senders[0].cpu.exact = Duration::from_millis(busy_ms);
            figures(&sc, &[raw])
                .warnings
                .iter()
                .any(|w| w.kind == "cpu-saturated")
        };
        assert!(run(200, 199), "a sender busy the whole 0.2 s");
        assert!(!run(200, 20), "a sender busy 10% of the time");
        assert!(!run(5, 5), "5 ms is too short to judge");
    }

    #[test]
    fn a_reliable_transport_that_loses_anything_fails_the_scenario() {
        // stream: the receiver got less than was sent.
        let sc = Scenario::new(WorkloadKind::Stream, TransportKind::Tcp, 64);
        let r = figures(&sc, &[udp_raw(10, 9, None)]);
        let e = check_agreement(&sc, &r).expect("a disagreement is an error");
        assert!(e.contains("sender and receiver disagree"), "{e}");
        assert_eq!(
            check_agreement(&sc, &figures(&sc, &[udp_raw(10, 10, None)])),
            None
        );
        // pingpong: the server saw fewer requests than the client sent, though every
        // reply the client waited for came (the counts cannot both be right).
        let sc = Scenario::new(WorkloadKind::Pingpong, TransportKind::Tcp, 64);
        let r = figures(&sc, &[udp_raw(10, 9, None)]);
        assert_eq!(r.runs[0].requests_lost, Some(1));
        let e = check_agreement(&sc, &r).expect("a lost request on TCP is an error");
        assert!(e.contains("1 of 10 requests"), "{e}");
        assert_eq!(
            check_agreement(&sc, &figures(&sc, &[udp_raw(10, 10, None)])),
            None
        );
    }

    #[test]
    fn the_median_run_describes_the_table() {
        let sc = Scenario::new(WorkloadKind::Stream, TransportKind::Unix, 64 << 10);
        let raw = |ms: u64| Roles {
            senders: vec![SideReport {
                bytes: 1000,
                messages: 1,
                elapsed: Some(MS(ms)),
                ..SideReport::default()
            }],
            receivers: vec![SideReport {
                bytes: 1000,
                messages: 1,
                elapsed: Some(MS(ms)),
                ..SideReport::default()
            }],
            system: None,
            link: LinkInfo::default(),
            udp_drops: None,
            connect_time: Duration::ZERO,
            peer: None,
            directions: Vec::new(),
        };
        let r = figures(&sc, &[raw(10), raw(40), raw(20)]);
        let median = r.median_run().unwrap();
        assert!((median.duration_seconds - 0.020).abs() < 1e-9);
        assert_eq!(r.bits_per_second, Some(median.bits_per_second));
        assert_eq!(r.bytes_sent, 3000);
    }
}

//! Reports built by hand, for the exporters' tests: every workload, a sweep, a failed
//! scenario and the suite, with known figures, so each exporter's output can be checked
//! exactly without measuring anything.

use std::collections::BTreeMap;

use crate::engine::EngineKind;
use crate::environment::Environment;
use crate::measure::calls::Phases;
use crate::measure::histogram::Latency;
use crate::report::{Report, Tool};
use crate::results::{RunFigures, ScenarioOptions, ScenarioResult, SideFigures, Warning};
use crate::scenario::WorkloadKind;
use crate::scenario::{Layout, Skipped};
use crate::transport::TransportKind;

/// A report holding `results`, laid out as `layout`.
pub fn report(results: Vec<ScenarioResult>, layout: Layout) -> Report {
    Report {
        schema_version: crate::report::SCHEMA_VERSION,
        tool: Tool {
            name: "sockbench".into(),
            version: "0.0.0-test".into(),
        },
        kind: match (layout, results.first().map(|r| r.workload)) {
            (Layout::Suite, _) | (_, None) => crate::report::Kind::Suite,
            (_, Some(w)) => crate::report::Kind::of_workload(w),
        },
        command: vec!["sockbench".into()],
        started_at: Some("2026-01-02T03:04:05.000006Z".into()),
        ended_at: Some("2026-01-02T03:04:07.000008Z".into()),
        placement: crate::report::PlacementInfo {
            name: "threads".into(),
            ..Default::default()
        },
        environment: Some(Environment {
            kernel: "Linux 6.1.0".into(),
            hostname: "test".into(),
            cpu_model: None,
            cpus: 2,
            governor: None,
            sysctls: BTreeMap::new(),
        }),
        rankings: crate::report::rankings::of(&results, layout),
        results,
        skipped: Vec::new(),
        warnings: Vec::new(),
        interrupted: false,
        error: None,
        layout,
    }
}

/// A side that used `cpu` of a core over one second.
fn side(cpu: f64) -> SideFigures {
    SideFigures {
        duration_seconds: 1.0,
        cpu_seconds: cpu,
        cpu_user_seconds: cpu / 2.0,
        cpu_system_seconds: cpu / 2.0,
        messages_per_second: 1000.0,
        cpu_utilization: cpu,
        cpu_seconds_per_gb: Some(0.25),
        sqpoll_cpu_seconds: None,
        io_uring: None,
        voluntary_context_switches: 10,
        involuntary_context_switches: 1,
        on_cpu: vec![crate::results::OnCpu {
            start: Some(0),
            end: Some(1),
        }],
        calls: None,
        messages_per_call: None,
        ..SideFigures::default()
    }
}

/// A latency distribution whose percentiles are `p50` times 1, 1.2, 2, 4 and 10.
pub fn latency(p50_ns: u64) -> Latency {
    Latency {
        count: 1000,
        min_ns: p50_ns / 2,
        mean_ns: p50_ns,
        stddev_ns: p50_ns / 10,
        p50_ns,
        p90_ns: p50_ns * 6 / 5,
        p99_ns: p50_ns * 2,
        p99_9_ns: p50_ns * 4,
        p99_99_ns: p50_ns * 8,
        max_ns: p50_ns * 10,
    }
}

/// One finished scenario of one run: `bits_per_second` over one second, 1000 messages,
/// sender 90% and receiver 40% of a core, 0.25 CPU s/GB each.
pub fn scenario(
    workload: WorkloadKind,
    transport: TransportKind,
    size_bytes: u64,
    bits_per_second: f64,
) -> ScenarioResult {
    let bytes = (bits_per_second / 8.0) as u64;
    let run = RunFigures {
        duration_seconds: 1.0,
        bytes_sent: bytes,
        bytes_received: bytes,
        messages_sent: 1000,
        messages_received: 1000,
        messages_lost: None,
        requests_lost: None,
        replies_lost: None,
        replies_late: None,
        messages_reordered: None,
        messages_duplicated: None,
        udp_receive_buffer_errors: None,
        bits_per_second,
        bytes_per_second: bits_per_second / 8.0,
        messages_per_second: 1000.0,
        sender: side(0.9),
        receiver: side(0.4),
        system: None,
        server_system: None,
        sndbuf_bytes: Some(212_992),
        rcvbuf_bytes: Some(212_992),
        mss_bytes: None,
        tcp: None,
        route: None,
        mtu_bytes: None,
        endpoint: None,
        phases: None,
        send: None,
        recv: None,
        latencies: BTreeMap::new(),
        placement: None,
        timestamps: None,
        intervals: Vec::new(),
        directions: Vec::new(),
    };
    ScenarioResult {
        workload,
        transport,
        engine: EngineKind::Blocking,
        size_bytes,
        options: ScenarioOptions {
            duration_seconds: Some(1.0),
            count: None,
            bytes: None,
            warmup_seconds: 0.25,
            runs: 1,
            parallel: 1,
            sndbuf_bytes: None,
            rcvbuf_bytes: None,
            nodelay: false,
            cpus: None,
            runtime: None,
            send: None,
            recv: None,
            rate_per_second: None,
            open: None,
            batch: 1,
            timestamps: false,
            sqpoll: false,
            counters: false,
        },
        bits_per_second: Some(bits_per_second),
        bytes_per_second: Some(bits_per_second / 8.0),
        messages_per_second: Some(1000.0),
        bytes_sent: bytes,
        bytes_received: bytes,
        messages_sent: 1000,
        messages_received: 1000,
        messages_lost: None,
        requests_lost: None,
        replies_lost: None,
        replies_late: None,
        messages_reordered: None,
        messages_duplicated: None,
        delivered_fraction: None,
        udp_receive_buffer_errors: None,
        tcp_retransmits: None,
        sender_cpu_seconds_per_gb: Some(0.25),
        receiver_cpu_seconds_per_gb: Some(0.25),
        latencies: BTreeMap::new(),
        timestamps: None,
        latency_buckets: BTreeMap::new(),
        cpu_seconds_per_round_trip: None,
        send: None,
        recv: None,
        statistics: None,
        runs: vec![run],
        warnings: Vec::new(),
        error: None,
        histograms: BTreeMap::new(),
    }
}

/// Set a count on a scenario and its run (`lost`, `reordered`...).
fn both(r: &mut ScenarioResult, f: impl Fn(&mut ScenarioResultCounts)) {
    let mut c = ScenarioResultCounts::default();
    f(&mut c);
    r.messages_lost = c.lost;
    r.messages_reordered = c.reordered;
    r.messages_duplicated = c.duplicated;
    r.requests_lost = c.split.map(|s| s.0);
    r.replies_lost = c.split.map(|s| s.1);
    r.replies_late = c.split.map(|s| s.2);
    for run in &mut r.runs {
        run.messages_lost = c.lost;
        run.messages_reordered = c.reordered;
        run.messages_duplicated = c.duplicated;
        run.requests_lost = r.requests_lost;
        run.replies_lost = r.replies_lost;
        run.replies_late = r.replies_late;
    }
}

/// The counts [`both`] sets.
#[derive(Default)]
struct ScenarioResultCounts {
    lost: Option<u64>,
    reordered: Option<u64>,
    duplicated: Option<u64>,
    split: Option<(u64, u64, u64)>,
}

/// A scenario that failed before any run finished.
pub fn failed(workload: WorkloadKind, transport: TransportKind, size: u64) -> ScenarioResult {
    let mut r = scenario(workload, transport, size, 0.0);
    r.runs.clear();
    r.bits_per_second = None;
    r.bytes_per_second = None;
    r.messages_per_second = None;
    r.sender_cpu_seconds_per_gb = None;
    r.receiver_cpu_seconds_per_gb = None;
    r.error = Some("tcp sender failed: Connection reset by peer (os error 104)".into());
    r
}

/// `stream -t tcp,unix`: 8 and 40 Gbit/s at 64 KiB.
pub fn stream() -> Report {
    report(
        vec![
            scenario(WorkloadKind::Stream, TransportKind::Tcp, 64 << 10, 8e9),
            scenario(WorkloadKind::Stream, TransportKind::Unix, 64 << 10, 40e9),
        ],
        Layout::List,
    )
}

/// `stream -t tcp -n 1000`: with the phases of the run.
pub fn stream_phases() -> Report {
    let mut r = scenario(WorkloadKind::Stream, TransportKind::Tcp, 64 << 10, 8e9);
    r.options.duration_seconds = None;
    r.options.count = Some(1000);
    r.runs[0].phases = Some(Phases {
        connect_seconds: 0.000_150,
        transfer_seconds: 0.0328,
        close_seconds: 0.000_025,
    });
    report(vec![r], Layout::List)
}

/// `stream -t tcp,unix -s 1K,64K`.
pub fn stream_sweep() -> Report {
    let mut results = Vec::new();
    for (t, slow, fast) in [
        (TransportKind::Tcp, 5e9, 30e9),
        (TransportKind::Unix, 3e9, 40e9),
    ] {
        results.push(scenario(WorkloadKind::Stream, t, 1 << 10, slow));
        results.push(scenario(WorkloadKind::Stream, t, 64 << 10, fast));
    }
    report(results, Layout::List)
}

/// `stream -t tcp,unix -s 64K --rcvbuf 1,4K`: the kernel's minimum and doubling in the
/// granted sizes; tcp starved by the smallest buffer.
pub fn stream_buffers() -> Report {
    let mut results = Vec::new();
    for (t, tiny, small) in [
        (TransportKind::Tcp, 50e6, 700e6),
        (TransportKind::Unix, 8e9, 16e9),
    ] {
        for (asked, granted, bps) in [(1, 2304, tiny), (4096, 8192, small)] {
            let mut r = scenario(WorkloadKind::Stream, t, 64 << 10, bps);
            r.options.rcvbuf_bytes = Some(asked);
            for run in &mut r.runs {
                run.rcvbuf_bytes = Some(granted);
            }
            results.push(r);
        }
    }
    report(results, Layout::List)
}

/// `stream -t tcp,unix -P 2`: tcp's two senders retransmitted 7 and 5 segments, ended
/// with windows of 40 and 20 segments of 65483 bytes and smoothed RTTs of 45 and 61 us.
pub fn stream_tcp() -> Report {
    let mut results = Vec::new();
    for t in [TransportKind::Tcp, TransportKind::Unix] {
        let mut r = scenario(WorkloadKind::Stream, t, 64 << 10, 8e9);
        r.options.parallel = 2;
        if t == TransportKind::Tcp {
            let tcp = crate::report::TcpFigures::of(vec![
                Some(crate::report::TcpInfo::new(7, 40, 65483, 45, 10, 65535)),
                Some(crate::report::TcpInfo::new(5, 20, 65483, 61, 12, 65535)),
            ]);
            r.tcp_retransmits = tcp.as_ref().and_then(|t| t.retransmits);
            r.runs[0].tcp = tcp;
        }
        results.push(r);
    }
    report(results, Layout::List)
}

/// `pingpong -t tcp`: the client retransmitted 1 segment; smoothed RTT 0 (under 1 us).
pub fn pingpong_tcp() -> Report {
    let mut r = scenario(WorkloadKind::Pingpong, TransportKind::Tcp, 64, 5e6);
    r.latencies.insert(
        crate::measure::latency::LatencyKind::RoundTrip,
        latency(15_000),
    );
    let tcp = crate::report::TcpFigures::of(vec![Some(crate::report::TcpInfo::new(
        1, 10, 65483, 0, 0, 65535,
    ))]);
    r.tcp_retransmits = Some(1);
    r.runs[0].tcp = tcp;
    report(vec![r], Layout::List)
}

/// `stream -t tcp,udp`: tcp failed, udp lost 12 of 1000.
pub fn stream_failed() -> Report {
    let mut udp = scenario(WorkloadKind::Stream, TransportKind::Udp, 1472, 2e9);
    both(&mut udp, |c| c.lost = Some(12));
    report(
        vec![
            failed(WorkloadKind::Stream, TransportKind::Tcp, 64 << 10),
            udp,
        ],
        Layout::List,
    )
}

/// `pingpong -t tcp,udp`: 15 us and 12 us p50; udp lost 3 requests, 2 replies, 1 late.
pub fn pingpong() -> Report {
    let mut results = Vec::new();
    for (t, p50) in [(TransportKind::Tcp, 15_000), (TransportKind::Udp, 12_000)] {
        let mut r = scenario(WorkloadKind::Pingpong, t, 64, 5e6);
        r.latencies.insert(
            crate::measure::latency::LatencyKind::RoundTrip,
            latency(p50),
        );
        r.cpu_seconds_per_round_trip = Some(14e-6);
        if t == TransportKind::Udp {
            both(&mut r, |c| {
                c.lost = Some(6);
                c.split = Some((3, 2, 1));
            });
        } else {
            both(&mut r, |c| c.split = Some((0, 0, 0)));
        }
        results.push(r);
    }
    report(results, Layout::List)
}

/// `rate -t udp,unix-dgram`: udp lost 100 of 1000, reordered 2, duplicated 1.
pub fn rate() -> Report {
    let mut udp = scenario(WorkloadKind::Rate, TransportKind::Udp, 64, 76e6);
    both(&mut udp, |c| {
        c.lost = Some(100);
        c.reordered = Some(2);
        c.duplicated = Some(1);
    });
    let mut dgram = scenario(WorkloadKind::Rate, TransportKind::UnixDgram, 64, 300e6);
    both(&mut dgram, |c| {
        c.reordered = Some(0);
        c.duplicated = Some(0);
    });
    report(vec![udp, dgram], Layout::List)
}

/// `connect -t tcp,unix`.
pub fn connect() -> Report {
    let mut results = Vec::new();
    for (t, base) in [(TransportKind::Tcp, 27_000), (TransportKind::Unix, 15_000)] {
        let mut r = scenario(WorkloadKind::Connect, t, 64, 1e6);
        use crate::measure::latency::LatencyKind;
        for (i, kind) in [
            LatencyKind::Connect,
            LatencyKind::Accept,
            LatencyKind::FirstResponse,
            LatencyKind::Close,
        ]
        .into_iter()
        .enumerate()
        {
            r.latencies.insert(kind, latency(base / (i as u64 + 1)));
        }
        results.push(r);
    }
    report(results, Layout::List)
}

/// The suite over unix and udp: udp cannot carry 64 KiB or 1 MiB.
pub fn suite() -> Report {
    let mut results = Vec::new();
    for (i, &size) in crate::scenario::SUITE_SIZES.iter().enumerate() {
        let bps = 1e9 * (i as f64 + 1.0);
        results.push(scenario(
            WorkloadKind::Stream,
            TransportKind::Unix,
            size,
            bps * 4.0,
        ));
        if size < 64 << 10 {
            results.push(scenario(
                WorkloadKind::Stream,
                TransportKind::Udp,
                size,
                bps,
            ));
        }
    }
    let mut skipped = Vec::new();
    for size in [64 << 10, 1 << 20] {
        skipped.push(Skipped {
            workload: WorkloadKind::Stream,
            transport: TransportKind::Udp,
            engine: EngineKind::Blocking,
            size_bytes: size,
            reason: format!(
                "size {size} is too large for udp: a UDP datagram over IPv4 carries at most 65507 bytes"
            ),
        });
    }
    let mut r = pingpong().results;
    r.retain(|r| r.transport == TransportKind::Udp);
    results.extend(r);
    results.extend(rate().results.into_iter().take(1));
    let mut report = report(results, Layout::Suite);
    report.skipped = skipped;
    report.results[0].warnings.push(Warning {
        kind: "cpu-saturated".into(),
        message: "CPU-bound (the sender 99% of a core)".into(),
    });
    report
}

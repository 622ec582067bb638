//! The figures of a scenario and of each of its runs, as every document, table, chart
//! and comparison reads them: what was sent and received, on each side, with its CPU,
//! latencies, loss and the warnings the run earned.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::engine::EngineKind;
use crate::measure::calls::{Phases, RecvCounts, SendCounts};
use crate::measure::cpu::SystemCpu;
use crate::measure::histogram::Latency;
use crate::measure::latency::LatencyKind;
use crate::measure::live::Interval;
use crate::measure::stats::Summary;
use crate::measure::tcp_info::TcpFigures;
use crate::scenario::WorkloadKind;
use crate::transport::TransportKind;

/// The options that shaped a scenario.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScenarioOptions {
    /// Measured time per run, when the run was timed.
    pub duration_seconds: Option<f64>,
    /// Messages per run, with `--count`.
    pub count: Option<u64>,
    /// Bytes per run, with `--bytes`.
    pub bytes: Option<u64>,
    /// Warm-up per run.
    pub warmup_seconds: f64,
    /// Measured runs.
    pub runs: u32,
    /// Parallel streams.
    pub parallel: u32,
    /// Requested send buffer (null: the kernel default).
    pub sndbuf_bytes: Option<u64>,
    /// Requested receive buffer (null: the kernel default).
    pub rcvbuf_bytes: Option<u64>,
    /// TCP_NODELAY.
    pub nodelay: bool,
    /// Sender and receiver CPU, when pinned.
    pub cpus: Option<[usize; 2]>,
    /// The async engine's runtime (null for other engines).
    pub runtime: Option<crate::engine::RuntimeKind>,
    /// stream: how the sender sent (`--send`: write, sendfile, splice, zerocopy); null
    /// for other workloads.
    #[serde(default)]
    pub send: Option<crate::vocab::SendMethod>,
    /// stream: how the receiver received (`--recv`: read, zerocopy); null for other
    /// workloads.
    #[serde(default)]
    pub recv: Option<crate::vocab::RecvMethod>,
    /// pingpong, rate: the target rate in messages per second (`--rate`); null when
    /// unpaced (as fast as it goes) and for other workloads.
    #[serde(default)]
    pub rate_per_second: Option<f64>,
    /// connect: connections kept open at once (`--open`); null for other workloads.
    #[serde(default)]
    pub open: Option<u32>,
    /// stream, rate: messages per call asked for (`--batch`; 1 = one per call).
    #[serde(default = "one")]
    pub batch: u32,
    /// pingpong, rate: kernel timestamps were taken (`--timestamps`).
    #[serde(default)]
    pub timestamps: bool,
    /// io-uring: the rings were polled by a kernel thread (`--sqpoll`).
    #[serde(default)]
    pub sqpoll: bool,
    /// Hardware counters were asked for (`--counters`).
    #[serde(default)]
    pub counters: bool,
}

fn one() -> u32 {
    1
}

/// CPU and timing of one side (all its threads, with `--parallel`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SideFigures {
    /// Length of this side's measured interval (the longest of its threads).
    pub duration_seconds: f64,
    /// CPU time (user + system) of this side's threads over their intervals, exact
    /// (`CLOCK_THREAD_CPUTIME_ID`).
    pub cpu_seconds: f64,
    /// User CPU as the kernel's tick sampling attributes it (`getrusage`; coarse on
    /// short runs).
    pub cpu_user_seconds: f64,
    /// System CPU as the kernel's tick sampling attributes it (`getrusage`).
    pub cpu_system_seconds: f64,
    /// Messages this side sent or received per second of its own interval.
    pub messages_per_second: f64,
    /// `cpu_seconds` per second of interval (1.0 = one core busy the whole time).
    pub cpu_utilization: f64,
    /// CPU seconds (user + system) per 10^9 payload bytes; null if nothing moved.
    pub cpu_seconds_per_gb: Option<f64>,
    /// `--sqpoll`: CPU seconds of the role's io_uring polling kernel threads (one per
    /// stream, read from /proc at the end of the interval); already counted in
    /// `cpu_seconds`, `cpu_system_seconds`, `cpu_utilization` and `cpu_seconds_per_gb`.
    #[serde(default)]
    pub sqpoll_cpu_seconds: Option<f64>,
    /// io-uring engine: what the role's rings used (registered buffers, multishot
    /// receive, a polling thread) and their submissions; null for other engines.
    #[serde(default)]
    pub io_uring: Option<crate::vocab::uring_use::UringUse>,
    /// Voluntary context switches.
    pub voluntary_context_switches: u64,
    /// Involuntary context switches.
    pub involuntary_context_switches: u64,
    /// With `--counters`: perf counters per message (null without `--counters`).
    #[serde(default)]
    pub counters: Option<crate::measure::counters::CounterFigures>,
    /// Per stream, the CPU this role's thread was on when its interval started and when
    /// it ended (null where unknown).
    pub on_cpu: Vec<OnCpu>,
    /// The CPUs this role's threads were seen on (sampled), each with its share of
    /// their intervals, most used first; empty where unknown.
    #[serde(default)]
    pub cpus: Vec<crate::measure::placement::CpuShare>,
    /// CPU migrations of this role's threads over their intervals (null where unknown).
    #[serde(default)]
    pub migrations: Option<u64>,
    /// Where `migrations` comes from: `sched` (the scheduler's exact count,
    /// /proc/thread-self/sched) or `sampled` (CPU changes the samples saw: a lower
    /// bound).
    #[serde(default)]
    pub migrations_source: Option<crate::measure::placement::MigrationsSource>,
    /// Voluntary context switches (waits) per message (null if no message).
    #[serde(default)]
    pub voluntary_switches_per_message: Option<f64>,
    /// Involuntary context switches (preemptions) per message.
    #[serde(default)]
    pub involuntary_switches_per_message: Option<f64>,
    /// With `--batch`: batches this role handed to the kernel (system calls, or ring
    /// submissions on io-uring); null without `--batch`, except on io-uring's stream,
    /// which always counts its submissions.
    #[serde(default)]
    pub calls: Option<u64>,
    /// With `--batch`: messages per call (messages / calls); null where `calls` is.
    #[serde(default)]
    pub messages_per_call: Option<f64>,
}

/// The CPU a thread ran on at the two ends of its interval.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct OnCpu {
    /// At the start.
    pub start: Option<u32>,
    /// At the end.
    pub end: Option<u32>,
}

/// The figures of one measured run.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunFigures {
    /// The receiver's measured interval: from the start to its last byte.
    pub duration_seconds: f64,
    /// Payload bytes the sender sent.
    pub bytes_sent: u64,
    /// Payload bytes the receiver received.
    pub bytes_received: u64,
    /// Messages sent.
    pub messages_sent: u64,
    /// Messages received (byte streams: bytes received / size, rounded up). pingpong:
    /// replies received in time, i.e. completed round trips.
    pub messages_received: u64,
    /// Messages sent but not received (unreliable transports); null where nothing can be
    /// lost. pingpong: requests without a reply in time (= sent - received).
    pub messages_lost: Option<u64>,
    /// pingpong: requests that never reached the server (null for other workloads).
    pub requests_lost: Option<u64>,
    /// pingpong: replies the server sent that never reached the client.
    pub replies_lost: Option<u64>,
    /// pingpong: replies that reached the client after their timeout (not counted as
    /// round trips). `messages_lost` = requests_lost + replies_lost + replies_late.
    pub replies_late: Option<u64>,
    /// rate: messages that arrived after a higher-numbered one (null: not counted, e.g.
    /// messages under 8 bytes or other workloads).
    pub messages_reordered: Option<u64>,
    /// rate: messages that arrived more than once.
    pub messages_duplicated: Option<u64>,
    /// UDP: datagrams the kernel dropped because a receive buffer was full during the run
    /// (`RcvbufErrors`, system-wide).
    pub udp_receive_buffer_errors: Option<u64>,
    /// Received payload bits per second of the receiver's interval.
    pub bits_per_second: f64,
    /// Received payload bytes per second.
    pub bytes_per_second: f64,
    /// Received messages per second.
    pub messages_per_second: f64,
    /// The sending side.
    pub sender: SideFigures,
    /// The receiving side.
    pub receiver: SideFigures,
    /// Machine-wide CPU over the run (null if /proc/stat is unreadable). With a server:
    /// the client's machine.
    pub system: Option<SystemCpu>,
    /// The other machine's CPU over the run, when the other role ran on a server.
    pub server_system: Option<SystemCpu>,
    /// The sender's buffer as the kernel reports it at the end of the run: SO_SNDBUF read
    /// back (after TCP autotuning; Linux counts bookkeeping, so it is double a requested
    /// size), the pipe size, the ring size, or queue depth x message size for mq.
    pub sndbuf_bytes: Option<u64>,
    /// The receiver's SO_RCVBUF as the kernel reports it at the end of the run.
    pub rcvbuf_bytes: Option<u64>,
    /// TCP maximum segment size.
    pub mss_bytes: Option<u64>,
    /// TCP (stream, rate, pingpong): each sending socket's `TCP_INFO` at the end of the
    /// run, read after its end of data once what it sent was acknowledged (at most 1 s
    /// later), and the streams' total retransmissions, largest window and spread of
    /// smoothed RTTs; with another host, as the side that sent read them. Null for other
    /// transports, connect, and where no sender's socket could be read.
    #[serde(default)]
    pub tcp: Option<TcpFigures>,
    /// IP transports: the device the data went through (`lo` whenever both ends are on
    /// this host, whatever the addresses), as the routing of the connection's addresses
    /// says.
    pub route: Option<String>,
    /// The MTU of that device.
    pub mtu_bytes: Option<u64>,
    /// Where the receiver listened: address:port, socket path or object name (null for
    /// pipe and socketpair).
    pub endpoint: Option<String>,
    /// stream: how long each phase of the run took.
    pub phases: Option<Phases>,
    /// stream: what the senders' `--send` method did (all streams); null for other
    /// workloads.
    #[serde(default)]
    pub send: Option<SendCounts>,
    /// stream: what the receivers' `--recv` method did (all streams): bytes mapped and
    /// bytes copied; null for other workloads.
    #[serde(default)]
    pub recv: Option<RecvCounts>,
    /// With `--bidir`: each direction's own figures (the run's figures are their sum);
    /// empty otherwise.
    pub directions: Vec<Direction>,
    /// Latency distributions of this run by name (`round_trip` for pingpong; `connect`,
    /// `accept`, `first_response`, `close` for connect).
    pub latencies: BTreeMap<LatencyKind, Latency>,
    /// Where the two roles ran relative to each other: the share of the run they spent
    /// on one CPU, and its class; null when a role ran on another host, a trace is
    /// missing, or the run had several streams.
    #[serde(default)]
    pub placement: Option<crate::measure::placement::RunPlacement>,
    /// With `--timestamps`: each direction's one-way time split by kernel timestamps
    /// (null otherwise).
    #[serde(default)]
    pub timestamps: Option<crate::measure::timestamps::Timestamps>,
    /// With `--interval`: what each interval of the run carried, in order (empty
    /// otherwise). The intervals tile the run from its start; the last may be short.
    #[serde(default)]
    pub intervals: Vec<Interval>,
}

/// One direction of a `--bidir` run.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Direction {
    /// `client to server` or `server to client`.
    pub direction: String,
    /// Payload bytes sent this way.
    pub bytes_sent: u64,
    /// Payload bytes received this way.
    pub bytes_received: u64,
    /// Messages sent this way.
    pub messages_sent: u64,
    /// Messages received this way.
    pub messages_received: u64,
    /// Messages lost this way (unreliable transports).
    pub messages_lost: Option<u64>,
    /// This direction's measured interval.
    pub duration_seconds: f64,
    /// Received payload bits per second this way.
    pub bits_per_second: f64,
    /// TCP: segments the senders of this direction retransmitted (`runs[].tcp`); null
    /// for other transports or where a sender's socket could not be read.
    #[serde(default)]
    pub tcp_retransmits: Option<u64>,
}

/// Statistics across the measured runs of a scenario.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Statistics {
    /// Received bits per second.
    pub bits_per_second: Summary,
    /// Received messages per second.
    pub messages_per_second: Summary,
}

/// One scenario's result.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScenarioResult {
    /// The workload.
    pub workload: WorkloadKind,
    /// The transport.
    pub transport: TransportKind,
    /// The engine.
    pub engine: EngineKind,
    /// Message size.
    pub size_bytes: u64,
    /// The options that shaped it.
    pub options: ScenarioOptions,
    /// Median over runs of received bits per second; null if no run finished.
    pub bits_per_second: Option<f64>,
    /// Median over runs of received bytes per second.
    pub bytes_per_second: Option<f64>,
    /// Median over runs of received messages per second.
    pub messages_per_second: Option<f64>,
    /// Total payload bytes sent over all measured runs.
    pub bytes_sent: u64,
    /// Total payload bytes received over all measured runs.
    pub bytes_received: u64,
    /// Total messages sent over all measured runs.
    pub messages_sent: u64,
    /// Total messages received over all measured runs.
    pub messages_received: u64,
    /// Total messages lost (unreliable transports; null elsewhere or if no run finished).
    pub messages_lost: Option<u64>,
    /// pingpong: total requests that never reached the server.
    pub requests_lost: Option<u64>,
    /// pingpong: total replies that never reached the client.
    pub replies_lost: Option<u64>,
    /// pingpong: total replies that came after their timeout.
    pub replies_late: Option<u64>,
    /// rate: total messages reordered (null where not counted).
    pub messages_reordered: Option<u64>,
    /// rate: total messages duplicated (null where not counted).
    pub messages_duplicated: Option<u64>,
    /// Distinct messages received over messages sent, 0 to 1 (null where nothing can be
    /// lost).
    pub delivered_fraction: Option<f64>,
    /// UDP: total kernel receive-buffer drops during the measured runs (system-wide).
    pub udp_receive_buffer_errors: Option<u64>,
    /// TCP: total segments the senders retransmitted over all measured runs (the sum of
    /// `runs[].tcp.retransmits`); null for other transports, connect, or if any run's
    /// count is unknown.
    #[serde(default)]
    pub tcp_retransmits: Option<u64>,
    /// Median over runs of the sender's CPU seconds per 10^9 bytes.
    pub sender_cpu_seconds_per_gb: Option<f64>,
    /// Median over runs of the receiver's CPU seconds per 10^9 bytes.
    pub receiver_cpu_seconds_per_gb: Option<f64>,
    /// Latency distributions merged over all measured runs, by name (see `runs[].latencies`).
    pub latencies: BTreeMap<LatencyKind, Latency>,
    /// With `--timestamps`: the runs' timestamp parts, histograms merged over runs (see
    /// `runs[].timestamps`); null otherwise.
    #[serde(default)]
    pub timestamps: Option<crate::measure::timestamps::Timestamps>,
    /// The same distributions as histograms in fixed buckets (R10 bounds: 10, 12.5, 16,
    /// 20, 25, 31.5, 40, 50, 63, 80 ns and their multiples of ten), from the bucket of the
    /// smallest sample to that of the largest, by name: what the HTML report draws and
    /// the OpenMetrics histograms hold.
    #[serde(default)]
    pub latency_buckets: BTreeMap<LatencyKind, Vec<crate::measure::histogram::Bucket>>,
    /// pingpong: median over runs of both sides' CPU seconds per round trip.
    pub cpu_seconds_per_round_trip: Option<f64>,
    /// stream: what the senders' `--send` method did, over all measured runs (see
    /// `runs[].send`); null for other workloads.
    #[serde(default)]
    pub send: Option<SendCounts>,
    /// stream: what the receivers' `--recv` method did, over all measured runs.
    #[serde(default)]
    pub recv: Option<RecvCounts>,
    /// Statistics across runs; null if no run finished.
    pub statistics: Option<Statistics>,
    /// Every measured run.
    pub runs: Vec<RunFigures>,
    /// What looks odd about this scenario.
    pub warnings: Vec<Warning>,
    /// Why the scenario failed, if it did.
    pub error: Option<String>,
    /// The merged histograms themselves, for `--histogram` (not part of the JSON report).
    #[serde(skip)]
    #[schemars(skip)]
    pub histograms: BTreeMap<LatencyKind, Histogram<u64>>,
}

/// A warning attached to a scenario.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Warning {
    /// A stable identifier: `unstable`, `buffer-clamped`, `cpu-saturated`, `datagram-loss`,
    /// `zerocopy-copied`, `zerocopy-outstanding`, ...
    pub kind: String,
    /// The explanation, with what to try.
    pub message: String,
}

impl ScenarioResult {
    /// The run whose throughput is the median (the lower middle for an even count): the
    /// run the table's per-run columns describe.
    pub fn median_run(&self) -> Option<&RunFigures> {
        let mut order: Vec<&RunFigures> = self.runs.iter().collect();
        order.sort_by(|a, b| a.bits_per_second.total_cmp(&b.bits_per_second));
        order.get(order.len().saturating_sub(1) / 2).copied()
    }

    /// A short label: `tcp 64 KiB` (plus the engine when it is not the default).
    pub fn label(&self) -> String {
        self.label_with(self.engine != EngineKind::Blocking)
    }

    /// The label without the engine: what the scenarios of several engines share.
    pub fn group_label(&self) -> String {
        self.label_with(false)
    }

    fn label_with(&self, engine: bool) -> String {
        let mut s = format!(
            "{} {}",
            self.transport,
            crate::vocab::units::format_bytes(self.size_bytes)
        );
        if engine {
            s.push_str(&format!(" ({})", self.engine));
        }
        if let Some(m) = self
            .options
            .send
            .filter(|&m| m != crate::vocab::SendMethod::Write)
        {
            s.push_str(&format!(" send {}", method_name(m)));
        }
        if let Some(m) = self
            .options
            .recv
            .filter(|&m| m != crate::vocab::RecvMethod::Read)
        {
            s.push_str(&format!(" recv {}", method_name(m)));
        }
        for (name, asked) in [
            ("sndbuf", self.options.sndbuf_bytes),
            ("rcvbuf", self.options.rcvbuf_bytes),
        ] {
            if let Some(n) = asked {
                s.push_str(&format!(" {name} {}", crate::vocab::units::format_bytes(n)));
            }
        }
        s
    }
}

/// A `--send`/`--recv` method's command-line name.
fn method_name(m: impl clap::ValueEnum) -> String {
    m.to_possible_value()
        .map(|p| p.get_name().to_string())
        .unwrap_or_default()
}

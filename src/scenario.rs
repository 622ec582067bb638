//! The scenario: what one measured case asks for (a workload over a transport through an
//! engine at one size, its stop rule and buffers, and the options only some workloads
//! take), and the bounds every scenario is checked against. It names the machinery's own
//! words (engines, copy methods, a swarm's work), so it sits just above the machinery and
//! below the workloads, the control protocol and the plan, which all pass it around.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::copy::{self, Method};
use crate::engine::{EngineKind, EngineOptions};
use crate::reactor::Work;
use crate::transport::TransportKind;

/// Largest message size accepted (each side allocates one buffer of this size per stream).
pub const MAX_SIZE: u64 = 1 << 30;
/// Largest `--sndbuf`/`--rcvbuf` accepted (socket options are a signed 32-bit int that
/// Linux doubles).
pub const MAX_BUFFER: u64 = 1 << 30;

/// The workload the user selects.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// One-way bulk transfer.
    Stream,
    /// Round-trip latency.
    Pingpong,
    /// Message rate with loss, reorder and duplicate counts.
    Rate,
    /// Connection setup and teardown cost.
    Connect,
    /// Many pairs at once on one reactor per side (`sockbench swarm`; not a bench
    /// workload).
    #[value(skip)]
    Swarm,
    /// A source, a relay that copies each connection to a sink, and the sink (`sockbench
    /// relay`; not a bench workload).
    #[value(skip)]
    Relay,
}

impl WorkloadKind {
    /// Every workload, in the order the tables and the page show them.
    pub const ALL: [WorkloadKind; 4] = [
        WorkloadKind::Stream,
        WorkloadKind::Pingpong,
        WorkloadKind::Rate,
        WorkloadKind::Connect,
    ];
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The command-line name (clap's, from the variant: kebab-case), as serde's; a
        // kind no bench command takes is its command's name.
        match (self, self.to_possible_value()) {
            (_, Some(v)) => f.write_str(v.get_name()),
            (WorkloadKind::Swarm, None) => f.write_str("swarm"),
            (WorkloadKind::Relay, None) => f.write_str("relay"),
            (_, None) => Ok(()),
        }
    }
}

/// When the sender stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stop {
    /// After this long.
    Duration(Duration),
    /// After this many messages.
    Count(u64),
    /// After this many bytes (the last message may be short).
    Bytes(u64),
}

/// Options only some workloads take.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkloadOptions {
    /// stream: bytes per run.
    pub bytes: Option<u64>,
    /// pingpong, rate: target rate per second (open loop / paced).
    pub rate: Option<f64>,
    /// pingpong: writes per request.
    pub writes: u32,
    /// connect: SO_LINGER 0.
    pub linger0: bool,
    /// connect: connections kept open at once.
    pub open: u32,
    /// The async engine's runtime.
    pub runtime: crate::engine::RuntimeKind,
    /// stream: how the sender sends (`--send`). Absent in a scenario from an older
    /// client: write.
    #[serde(default)]
    pub send: crate::vocab::SendMethod,
    /// stream: how the receiver receives (`--recv`). Absent: read.
    #[serde(default)]
    pub recv: crate::vocab::RecvMethod,
    /// stream, rate: messages per call (`--batch`). Absent: 1.
    #[serde(default = "one")]
    pub batch: u32,
    /// pingpong, rate: kernel timestamps (`--timestamps`).
    #[serde(default)]
    pub timestamps: bool,
    /// io-uring: a kernel thread polls the submission queue (`--sqpoll`).
    #[serde(default)]
    pub sqpoll: bool,
    /// Hardware counters per role (`--counters`).
    #[serde(default)]
    pub counters: bool,
    /// swarm: its pairs and their work. Absent: not a swarm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swarm: Option<crate::scenario::SwarmOptions>,
    /// relay: its copy method, buffers, shape and threads. Absent: not a relay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<crate::scenario::RelayOptions>,
}

fn one() -> u32 {
    1
}

/// The most messages `--batch` puts in one call (the kernel's UIO_MAXIOV, which bounds
/// sendmmsg/recvmmsg's vector).
pub const MAX_BATCH: u32 = 1024;

impl WorkloadOptions {
    /// The options the engine takes.
    pub fn engine_options(&self) -> EngineOptions {
        EngineOptions {
            runtime: self.runtime,
            in_flight: self.batch,
            sqpoll: self.sqpoll,
        }
    }
}

impl Default for WorkloadOptions {
    fn default() -> Self {
        WorkloadOptions {
            bytes: None,
            rate: None,
            writes: 1,
            linger0: false,
            open: 1,
            runtime: crate::engine::RuntimeKind::Current,
            send: crate::vocab::SendMethod::Write,
            recv: crate::vocab::RecvMethod::Read,
            batch: 1,
            timestamps: false,
            sqpoll: false,
            counters: false,
            swarm: None,
            relay: None,
        }
    }
}

/// What a swarm scenario asks for beyond every scenario's options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwarmOptions {
    /// Pairs to set up.
    pub pairs: u64,
    /// What each pair does.
    pub work: Work,
}

/// What a relay scenario asks for beyond every scenario's options (its stop is the
/// scenario's: a duration, bytes per connection, a message count, or with
/// [`ShapeKind::Connections`] the number of connections).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayOptions {
    /// How the relay copies.
    pub method: Method,
    /// The copy method's buffers.
    pub copy: copy::Options,
    /// What the connections carry.
    pub shape: ShapeKind,
    /// Connections at once, and threads per role.
    pub threads: u32,
}

/// What a relay's connections carry (the stop is the scenario's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShapeKind {
    /// Long connections, one per thread.
    Streams,
    /// Short connections, one payload each.
    Connections,
    /// One connection, one message at a time.
    Pingpong,
}

/// One scenario: a workload over a transport through an engine at one size. It crosses
/// to a peer (`--server`, `--placement processes`) as JSON, and the peer checks it again.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Scenario {
    /// The workload.
    pub workload: WorkloadKind,
    /// The transport.
    pub transport: TransportKind,
    /// The engine.
    pub engine: EngineKind,
    /// Message size in bytes.
    pub size: u64,
    /// When each measured run stops.
    pub stop: Stop,
    /// Warm-up per run.
    pub warmup: Duration,
    /// Measured runs.
    pub runs: u32,
    /// Parallel streams.
    pub parallel: u32,
    /// CPUs for sender and receiver threads.
    pub cpus: Option<(usize, usize)>,
    /// Requested send buffer.
    pub sndbuf: Option<u64>,
    /// Requested receive buffer.
    pub rcvbuf: Option<u64>,
    /// TCP_NODELAY.
    pub nodelay: bool,
    /// Receiver bind address (IP transports).
    pub bind: Option<SocketAddr>,
    /// Sender connect address (IP transports).
    pub connect: Option<IpAddr>,
    /// Workload-specific options.
    pub extras: WorkloadOptions,
    /// With `--interval`, the running totals of the measured run under way (set by the
    /// runner for each measured run; never crosses to a peer).
    #[serde(skip)]
    pub live: Option<std::sync::Arc<crate::measure::live::Live>>,
}

impl Scenario {
    /// `workload` over `transport` at `size`-byte messages through the blocking engine,
    /// every other option at its plainest: one measured run of one second, no warm-up,
    /// one stream, no pinning, the kernel's buffers, no TCP_NODELAY, the workload's
    /// default options. Callers set what they ask for on top.
    pub fn new(workload: WorkloadKind, transport: TransportKind, size: u64) -> Scenario {
        Scenario {
            workload,
            transport,
            engine: EngineKind::Blocking,
            size,
            stop: Stop::Duration(Duration::from_secs(1)),
            warmup: Duration::ZERO,
            runs: 1,
            parallel: 1,
            cpus: None,
            sndbuf: None,
            rcvbuf: None,
            nodelay: false,
            bind: None,
            connect: None,
            extras: WorkloadOptions::default(),
            live: None,
        }
    }

    /// What in this scenario waits by spinning (the engine, else the transport), if
    /// anything does: with both roles on one CPU it burns the time slice its peer needs.
    pub fn spinner(&self) -> Option<String> {
        if self.engine.spins() {
            Some(format!("engine {}", self.engine))
        } else if self.transport.spins() {
            Some(format!("transport {}", self.transport))
        } else {
            None
        }
    }
}

/// Sizes of the default suite.
pub const SUITE_SIZES: [u64; 4] = [64, 4 << 10, 64 << 10, 1 << 20];

/// How the stdout table is laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// One row per scenario.
    #[default]
    List,
    /// The suite matrix: transports as rows, sizes as columns.
    Suite,
}

/// A combination left out of a multi-transport plan, with the reason.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Skipped {
    /// The workload.
    pub workload: WorkloadKind,
    /// The transport.
    pub transport: TransportKind,
    /// The engine.
    pub engine: EngineKind,
    /// The message size in bytes.
    pub size_bytes: u64,
    /// Why it cannot run.
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_scenario_is_one_plain_second_through_the_blocking_engine() {
        let sc = Scenario::new(WorkloadKind::Rate, TransportKind::Udp, 1472);
        assert_eq!(
            (sc.workload, sc.transport, sc.engine, sc.size),
            (
                WorkloadKind::Rate,
                TransportKind::Udp,
                EngineKind::Blocking,
                1472
            )
        );
        assert_eq!(sc.stop, Stop::Duration(Duration::from_secs(1)));
        assert_eq!((sc.warmup, sc.runs, sc.parallel), (Duration::ZERO, 1, 1));
        assert!(sc.cpus.is_none() && sc.sndbuf.is_none() && sc.rcvbuf.is_none());
        assert!(!sc.nodelay && sc.bind.is_none() && sc.connect.is_none());
        assert_eq!(sc.extras, WorkloadOptions::default());
        assert_eq!(sc.spinner(), None);
    }

    #[test]
    fn every_workload_is_named_alike_on_the_command_line_in_json_and_in_tables() {
        for kind in WorkloadKind::value_variants() {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json.as_str(), Some(kind.to_string().as_str()));
            assert!(!kind.to_string().is_empty());
            assert_eq!(WorkloadKind::from_str(&kind.to_string(), false), Ok(*kind));
        }
    }
}

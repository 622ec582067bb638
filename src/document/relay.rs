//! `sockbench relay`'s document: each transport, method and size's figures, the
//! combinations skipped, where splice overtakes the copy methods, the methods ranked,
//! and the relay-only form's counts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cli::RelayMode;
use crate::measure::headline::Headline;
use crate::measure::ranking::{self, Ranking};
use crate::report::envelope::{Envelope, Kind, Written};
use crate::scenario::ShapeKind;
use crate::vocab::units::format_bytes;
use crate::workload::relay;

/// One scenario's figures (from its median run by throughput).
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RelayResult {
    /// The relay's two ends.
    pub transport: String,
    /// How the relay copied.
    pub method: String,
    /// Message size (with connections, each connection's payload).
    pub size_bytes: u64,
    /// What went wrong, or null.
    pub error: Option<String>,
    /// Bytes the source sent.
    pub bytes_sent: u64,
    /// Bytes the relay copied (written to the sink's connections).
    pub bytes_relayed: u64,
    /// Bytes the sink received, every one checked against what was sent.
    pub bytes_received: u64,
    /// Messages (or payloads) the sink received.
    pub messages: u64,
    /// Connections the relay accepted and copied.
    pub connections: u64,
    /// From the start to the sink's end of the last connection.
    pub duration_seconds: f64,
    /// Bits the sink received per second.
    pub bits_per_second: f64,
    /// Messages (or connections' payloads) per second.
    pub messages_per_second: f64,
    /// Wall time per message: the duration over the messages.
    pub ns_per_message: f64,
    /// The relay's CPU (user + system) over the run: its threads', and for the io-uring
    /// methods the kernel's io_uring workers' too.
    pub relay_cpu_seconds: f64,
    /// The kernel's io_uring worker threads' share of it (io-uring methods), or null.
    pub relay_kernel_worker_cpu_seconds: Option<f64>,
    /// Relay CPU seconds per 10^9 bytes relayed.
    pub relay_cpu_seconds_per_gb: Option<f64>,
    /// Relay CPU per message, in nanoseconds.
    pub relay_cpu_ns_per_message: Option<f64>,
    /// The relay's CPU over the duration (1.0: one CPU busy all the time).
    pub relay_cpu_utilisation: f64,
    /// System calls the relay made to move the bytes (counted as made; io_uring_enter
    /// for the io-uring methods; not the async runtime's epoll_wait).
    pub syscalls: u64,
    /// Reads, writes and splices, whether system calls or ring submissions.
    pub operations: u64,
    /// System calls per 10^6 bytes relayed.
    pub syscalls_per_mb: Option<f64>,
    /// Bytes relayed per system call.
    pub bytes_per_syscall: Option<f64>,
    /// The pipe the kernel granted (splice methods), or null.
    pub pipe_size_bytes: Option<u64>,
    /// Pingpong: the source-to-sink time of a message (min, mean, p50, p90, p99, p99.9,
    /// max), in nanoseconds; null otherwise.
    pub latency_ns: Option<BTreeMap<String, u64>>,
    /// Every run's bits per second, in order.
    pub runs_bits_per_second: Vec<f64>,
    /// Pingpong: every run's median source-to-sink time (ns), in order; empty otherwise.
    pub runs_p50_ns: Vec<f64>,
    /// With `-i`: every run's interval lines, in run order (what reached the sink in
    /// each interval, or with the sink in a child process what the source sent; they
    /// add up to the run's bytes received).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<Vec<crate::measure::live::Interval>>,
}

/// A combination left out, with the reason.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RelaySkip {
    /// The transport.
    pub transport: String,
    /// The method.
    pub method: String,
    /// Why.
    pub reason: String,
}

/// Where a splice method overtakes the copy methods, on one transport.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Crossover {
    /// The transport.
    pub transport: String,
    /// The splice method.
    pub method: String,
    /// The smallest size from which it is faster than the best copy method, by 5% or more
    /// and beyond the noise of the runs, at every larger size measured; null if it never
    /// is, or if single runs cannot tell.
    pub size_bytes: Option<u64>,
    /// The sentence the table prints.
    pub summary: String,
}

/// The relay-only form's figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RelayOnly {
    /// The copy method (`--method`).
    #[serde(default)]
    pub method: String,
    /// Where it accepted.
    pub listen: String,
    /// Where it copied to.
    pub to: String,
    /// Connections accepted.
    pub connections: u64,
    /// Connections that failed (to connect onwards, or an error while copying), with
    /// the first error.
    pub failed: u64,
    /// The first failure, or null.
    pub first_error: Option<String>,
    /// Bytes copied from the clients to the far end.
    pub bytes_forward: u64,
    /// Bytes copied back from the far end to the clients.
    pub bytes_backward: u64,
    /// System calls made to move them, both directions.
    pub syscalls: u64,
    /// Reads, writes and splices, both directions.
    pub operations: u64,
    /// From the first accept to the end of the last connection.
    pub duration_seconds: f64,
    /// The process's CPU over that time (every thread, io_uring workers included).
    pub cpu_seconds: f64,
    /// CPU seconds per 10^9 bytes relayed (both directions).
    pub cpu_seconds_per_gb: Option<f64>,
    /// System calls per 10^6 bytes relayed.
    pub syscalls_per_mb: Option<f64>,
    /// The pipe the kernel granted (splice methods).
    pub pipe_size_bytes: Option<u64>,
}

/// What `relay` measured: the body of its document (kind `relay`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RelayBody {
    /// Bulk or one message at a time.
    pub mode: RelayMode,
    /// Short connections in all, each one payload; null for long streams.
    pub connections: Option<u64>,
    /// Connections at once (threads per role).
    pub parallel: u32,
    /// Each long stream's or pingpong's time, or null.
    pub duration_seconds: Option<f64>,
    /// Each long stream's bytes, or null.
    pub bytes_per_connection: Option<u64>,
    /// Pingpong: messages, or null.
    pub count: Option<u64>,
    /// The copy buffer.
    pub buffer_bytes: u64,
    /// The pipe size asked for.
    pub pipe_size_requested_bytes: u64,
    /// vectored: buffers per call.
    pub iovecs: usize,
    /// Measured runs per scenario.
    pub runs: u32,
    /// One entry per transport, method and size.
    pub results: Vec<RelayResult>,
    /// Combinations left out.
    pub skipped: Vec<RelaySkip>,
    /// Where splice overtakes the copy methods (size sweeps).
    pub crossovers: Vec<Crossover>,
    /// Per transport and size with two methods or more: the methods ranked by throughput
    /// (pingpong: by the median source-to-sink time), a winner only beyond the noise.
    pub rankings: Vec<crate::measure::ranking::Ranking>,
    /// The relay-only form's figures, or null.
    pub relay_only: Option<RelayOnly>,
    /// Where the relay and the sink ran: `threads` (threads of this process, beside the
    /// source) or `processes` (a child process). Absent from a document written before
    /// it was said: threads.
    #[serde(default = "threads")]
    pub placement: String,
}

fn threads() -> String {
    "threads".into()
}

/// The relay's document as it is made: the envelope and the body.
#[derive(Clone, Debug)]
pub struct RelayReport {
    /// What every document says of itself.
    pub envelope: Envelope,
    /// What the relay measured.
    pub body: RelayBody,
}

impl RelayReport {
    /// The document to write.
    pub fn document(&self) -> Written<'_, RelayBody> {
        Written {
            envelope: &self.envelope,
            kind: Kind::Relay,
            body: &self.body,
        }
    }
}

/// The figure a method is ranked by, per run: throughput, or under `--mode pingpong` the
/// median source-to-sink time (lower is better).
fn headline(r: &RelayResult, mode: RelayMode) -> (Headline, &[f64]) {
    match mode {
        RelayMode::Stream => (relay::headline(ShapeKind::Streams), &r.runs_bits_per_second),
        RelayMode::Pingpong => (relay::headline(ShapeKind::Pingpong), &r.runs_p50_ns),
    }
}

/// Per transport and size with two methods or more that ran: the methods ranked.
pub(crate) fn rankings(results: &[RelayResult], mode: RelayMode) -> Vec<Ranking> {
    let mut groups: Vec<(&str, u64)> = Vec::new();
    for r in results {
        if !groups.contains(&(&r.transport, r.size_bytes)) {
            groups.push((&r.transport, r.size_bytes));
        }
    }
    groups
        .into_iter()
        .filter_map(|(t, size)| {
            let entries: Vec<(String, Vec<f64>)> = (results.iter())
                .filter(|r| r.transport == t && r.size_bytes == size && r.error.is_none())
                .map(|r| (r.method.clone(), headline(r, mode).1.to_vec()))
                .collect();
            let (figure, _) = headline(&RelayResult::default(), mode);
            let group = format!("{t} {}", format_bytes(size));
            ranking::rank(&group, "methods", figure, &entries)
        })
        .collect()
}

impl RelayBody {
    /// `compare`'s rows: each transport, method and size that ran or failed, judged by
    /// its throughput in each run (`--mode pingpong`: its median source-to-sink time).
    pub fn rows(&self) -> Vec<crate::report::rows::Row> {
        let mode = match self.mode {
            RelayMode::Stream => "",
            RelayMode::Pingpong => " pingpong",
        };
        (self.results.iter())
            .map(|r| {
                let (headline, values) = headline(r, self.mode);
                crate::report::rows::Row {
                    key: format!(
                        "{mode} {} {} {} c{:?} p{} b{:?}",
                        r.transport,
                        r.method,
                        r.size_bytes,
                        self.connections,
                        self.parallel,
                        self.bytes_per_connection
                    ),
                    label: format!(
                        "relay{mode} {} {} {}",
                        r.transport,
                        r.method,
                        format_bytes(r.size_bytes)
                    ),
                    headline,
                    values: values.iter().copied().filter(|v| v.is_finite()).collect(),
                    error: r.error.clone(),
                }
            })
            .collect()
    }
}

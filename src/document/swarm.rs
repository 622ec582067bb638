//! `sockbench swarm`'s document: what many pairs at once carried, how fairly, what
//! set-up cost, what failed, and the limits the machine set.

use serde::{Deserialize, Serialize};

use crate::measure::live::Interval;
use crate::reactor::Work;
use crate::report::envelope::{Envelope, Kind, Written};
use crate::transport::TransportKind;
use crate::vocab::units::format_bytes;

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
    /// Where the receiving ends ran: `threads` (of this process, beside the sending
    /// ends) or `processes` (a child process).
    #[serde(default)]
    pub placement: String,
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
    /// With `--interval`, what each interval of the run reported here carried (the
    /// receiving ends' bytes read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<Interval>,
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

impl SwarmBody {
    /// `compare`'s row: the swarm as a whole, judged by its aggregate throughput (a
    /// stream) or round trips per second (pingpong).
    pub fn rows(&self) -> Vec<crate::report::rows::Row> {
        let headline = crate::workload::swarm::headline(self.workload);
        let (work, value) = match self.workload {
            Work::Stream => ("stream", self.bits_per_second),
            Work::Pingpong => ("pingpong", self.round_trips_per_second),
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

//! `sockbench mesh`: every ordered pair of N agents (`sockbench server` on each host),
//! scheduled so that no host takes part in two tests at once.
//!
//! The coordinator ([`coordinator`]) finds the agents, checks each is reachable and
//! speaks this protocol, lays out the rounds ([`schedule`]) and, for each test of each
//! pair, asks the source's agent to run it as a client against the destination's agent
//! (a [`crate::control::messages::DriveMsg`]). The source agent ([`agent`]) runs the
//! test and answers with its client's whole JSON report: the coordinator never carries
//! measured data. [`report`] turns the pairs' results into source x destination
//! matrices, the spread across pairs, the worst pairs and merged latency histograms,
//! in every format; [`heat`] draws its heat maps for the HTML page.

pub mod agent;
pub mod coordinator;
pub mod heat;
pub mod report;
pub mod schedule;

use serde::{Deserialize, Serialize};

use crate::control::messages::HostMeta;
// The tests a mesh can run are named on the wire, where an agent checks them.
pub use crate::control::messages::WORKLOADS;
use crate::measure::histogram::Bucket;

/// One agent of the mesh.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Host {
    /// As given (`--hosts`, the file, or the address DNS gave).
    pub name: String,
    /// The control address used.
    pub address: String,
    /// What the agent said of itself (from the first test it drove).
    pub meta: Option<HostMeta>,
    /// Why it could not take part at all (unreachable, wrong protocol, refused the key).
    pub error: Option<String>,
}

/// The figures of one test of one ordered pair, taken from the source agent's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Figures {
    /// Throughput (tcp-stream, udp-rate: received).
    pub bits_per_second: Option<f64>,
    /// Messages per second received (udp-rate) or round trips per second (pingpong).
    pub messages_per_second: Option<f64>,
    /// Round-trip p50 and p99 (pingpong), from the pair's own histogram.
    pub round_trip_p50_ns: Option<u64>,
    /// See `round_trip_p50_ns`.
    pub round_trip_p99_ns: Option<u64>,
    /// Fraction of messages (udp-rate) or requests (udp-pingpong) lost, 0..1.
    pub loss: Option<f64>,
    /// The round-trip distribution in the report's fixed buckets, for merging.
    pub round_trip_buckets: Vec<Bucket>,
}

/// How one test of one ordered pair ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// It ran; its figures.
    Measured(Figures),
    /// It did not run or did not finish, and why.
    Failed {
        /// The reason, for a person.
        reason: String,
    },
}

/// One test of one ordered pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PairTest {
    /// Index of the source host (the client: it sends on a stream).
    pub source: usize,
    /// Index of the destination host.
    pub destination: usize,
    /// One of [`WORKLOADS`].
    pub test: String,
    /// The round it ran in (0-based; every test is round 0 with `--concurrent`).
    pub round: usize,
    /// When it started and ended, by the source agent's clock (ns since the epoch; the
    /// coordinator's clock for a test that never reached its agent).
    pub started_unix_ns: u64,
    /// See `started_unix_ns`.
    pub ended_unix_ns: u64,
    /// What came of it.
    pub outcome: Outcome,
}

//! The mesh's report: source x destination matrices per figure, the spread across pairs,
//! the worst pairs, latency merged as histograms, per-pair results with their times, and
//! the hosts; printed as a table, JSON or OpenMetrics.

use serde::Serialize;

use super::{Host, PairTest};

/// How the mesh was run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Settings {
    /// `all`, `ring` or `random N`.
    pub pairs: String,
    /// `--concurrent`: every pair at once (stress), not in rounds.
    pub concurrent: bool,
    /// The seed of `--pairs random`.
    pub seed: Option<u64>,
    /// Rounds laid out.
    pub rounds: usize,
    /// The tests of each ordered pair, in order.
    pub tests: Vec<String>,
    /// Seconds each test measures, and its warm-up.
    pub duration_s: f64,
    /// See `duration_s`.
    pub warmup_s: f64,
    /// Parallel streams of tcp-stream.
    pub parallel: u32,
    /// Message size asked for (null: each test's default).
    pub size: Option<u64>,
    /// When the mesh started and ended (coordinator's clock, ns since the epoch).
    pub started_unix_ns: u64,
    /// See `started_unix_ns`.
    pub ended_unix_ns: u64,
}

/// The mesh's JSON document (placeholder until the report lands).
#[derive(Clone, Debug, Serialize)]
pub struct MeshReport {
    /// Settings.
    pub settings: Settings,
    /// Hosts.
    pub hosts: Vec<Host>,
    /// Tests.
    pub tests: Vec<PairTest>,
    /// Interrupted.
    pub interrupted: bool,
}

/// Build.
pub fn build(
    _command: Vec<String>,
    settings: Settings,
    hosts: Vec<Host>,
    tests: Vec<PairTest>,
    interrupted: bool,
) -> MeshReport {
    MeshReport {
        settings,
        hosts,
        tests,
        interrupted,
    }
}

/// Table.
pub fn table(r: &MeshReport) -> String {
    serde_json::to_string_pretty(r).unwrap_or_default()
}

/// OpenMetrics.
pub fn openmetrics(_r: &MeshReport) -> String {
    "# EOF\n".into()
}

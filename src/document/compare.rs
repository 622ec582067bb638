//! `sockbench compare`'s document: each matched scenario or row judged, with its ratio,
//! interval, test and verdict, and what one file had and the other did not.

use serde::{Deserialize, Serialize};

use crate::measure::verdict::{TestKind, Verdict};
use crate::report::envelope::{Envelope, Kind, Written};
use crate::scenario::WorkloadKind;

/// One side of a comparison: the scenario as one file has it.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Side {
    /// The scenario's label in this file.
    pub scenario: String,
    /// Runs with the figure.
    pub runs: usize,
    /// The figure of each run, in run order (the comparison's `figure` unit).
    pub values: Vec<f64>,
    /// Median over runs; null if none.
    pub median: Option<f64>,
    /// Mean over runs; null if none.
    pub mean: Option<f64>,
    /// Why the scenario failed in this file, if it did.
    pub error: Option<String>,
}

/// One matched scenario.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Comparison {
    /// The NEW file this row compares with BASE.
    pub new_file: String,
    /// The scenario (or row), as BASE labels it; then, in brackets, how the options
    /// `--ignore-option` left out differ in NEW (`[sndbuf default → 4 KiB]`).
    pub scenario: String,
    /// The kind of the documents compared.
    pub kind: Kind,
    /// The workload (the measuring commands' scenarios; null for other kinds' rows).
    pub workload: Option<WorkloadKind>,
    /// The transport (the measuring commands' scenarios).
    pub transport: Option<crate::transport::TransportKind>,
    /// The engine, BASE's (the measuring commands' scenarios).
    pub engine: Option<crate::engine::EngineKind>,
    /// Message size (the measuring commands' scenarios).
    pub size_bytes: Option<u64>,
    /// The headline figure and its unit: `bits_per_second`, `messages_per_second` or
    /// `round_trip_p50_ns`.
    pub figure: String,
    /// What the figure counts: `throughput`, `rate` or `latency`.
    pub quantity: crate::measure::headline::Quantity,
    /// Whether a higher figure is better (false for latency).
    pub higher_is_better: bool,
    /// BASE.
    pub base: Side,
    /// NEW.
    pub new: Side,
    /// new median / base median; null if either is unknown or the base is 0.
    pub ratio: Option<f64>,
    /// Lower end of the ratio's confidence interval (null: no interval).
    pub ratio_ci_low: Option<f64>,
    /// Upper end of the ratio's confidence interval.
    pub ratio_ci_high: Option<f64>,
    /// The interval's confidence: 1 - alpha, or the exact level a Mann-Whitney interval
    /// reaches (at least 1 - alpha).
    pub ci_confidence: Option<f64>,
    /// The test made: `welch-log`, `welch`, `mann-whitney-exact`, `mann-whitney-normal`;
    /// null if none.
    pub test: Option<TestKind>,
    /// Its two-sided p-value.
    pub p_value: Option<f64>,
    /// `faster`, `slower`, `no significant difference` (the interval lies within ±5% of
    /// 1), `too noisy to tell` (no significant change, but the interval is wider),
    /// `too few runs`, `no test` (the figures overflow the test's arithmetic) or `failed`.
    pub verdict: Verdict,
    /// How much slower NEW is, in percent: 100 (1 - ratio) for rates, 100 (ratio - 1) for
    /// latency; negative when faster; null without a ratio.
    pub slower_percent: Option<f64>,
    /// True if this row fails `--fail-if-slower`: significantly slower by more than it,
    /// or failed in NEW after running in BASE.
    pub gate_failed: bool,
    /// Why the verdict is what it is, when that needs saying (too few runs, failures).
    pub note: Option<String>,
}

/// A scenario only one file of a pair has.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Unmatched {
    /// The NEW file of the pair.
    pub new_file: String,
    /// The scenario's (or row's) label.
    pub scenario: String,
    /// The workload (the measuring commands' scenarios; null for other kinds' rows).
    pub workload: Option<WorkloadKind>,
    /// The transport (the measuring commands' scenarios).
    pub transport: Option<crate::transport::TransportKind>,
    /// The engine (the measuring commands' scenarios).
    pub engine: Option<crate::engine::EngineKind>,
    /// Message size (the measuring commands' scenarios).
    pub size_bytes: Option<u64>,
    /// True if this fails `--fail-if-slower`: a scenario BASE ran (with a figure) and the
    /// NEW file lacks. Always false in `only_in_new`.
    pub gate_failed: bool,
}

/// What compare found: the body of its document (kind `compare`). Its warnings (failed
/// or interrupted runs, how to read the table) and its error (a file it could not read)
/// are the envelope's.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompareBody {
    /// The BASE file as given.
    pub base: String,
    /// The NEW files as given.
    pub new: Vec<String>,
    /// Significance level of the tests.
    pub alpha: f64,
    /// Options left out of the identity (`--ignore-option`).
    pub ignored_options: Vec<String>,
    /// One per matched scenario and NEW file, in BASE's order, NEW file by NEW file.
    pub comparisons: Vec<Comparison>,
    /// Scenarios BASE has and a NEW file lacks.
    pub only_in_base: Vec<Unmatched>,
    /// Scenarios a NEW file has and BASE lacks.
    pub only_in_new: Vec<Unmatched>,
    /// `--fail-if-slower`, in percent; null without it.
    pub fail_if_slower_percent: Option<f64>,
    /// True if a comparison or a scenario only in BASE failed that gate (the exit status
    /// is then 1).
    pub failed_gate: bool,
}

impl Default for CompareBody {
    /// Nothing compared, at compare's default significance level.
    fn default() -> CompareBody {
        CompareBody {
            base: String::new(),
            new: Vec::new(),
            alpha: DEFAULT_ALPHA,
            ignored_options: Vec::new(),
            comparisons: Vec::new(),
            only_in_base: Vec::new(),
            only_in_new: Vec::new(),
            fail_if_slower_percent: None,
            failed_gate: false,
        }
    }
}

/// compare's default significance level (`--alpha`).
pub const DEFAULT_ALPHA: f64 = 0.05;

/// compare's document as it is made: what every format shows.
#[derive(Clone, Debug)]
pub struct CompareReport {
    /// What every document says of itself.
    pub envelope: Envelope,
    /// What compare found.
    pub body: CompareBody,
}

impl<'de> Deserialize<'de> for CompareReport {
    /// A compare document read back (any other kind is refused, named).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CompareReport, D::Error> {
        let (envelope, _, body) =
            crate::report::envelope::read_body(d, |k| k == Kind::Compare, "a compare document")?;
        Ok(CompareReport { envelope, body })
    }
}

impl CompareReport {
    /// The document to write.
    pub fn document(&self) -> Written<'_, CompareBody> {
        Written {
            envelope: &self.envelope,
            kind: Kind::Compare,
            body: &self.body,
        }
    }
}

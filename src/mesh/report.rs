//! The mesh's report: source x destination matrices per figure, the spread across pairs,
//! the worst pairs, latency merged as histograms, per-pair results with their times, and
//! the hosts; printed as a table, JSON or OpenMetrics.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::{Figures, Host, Outcome, PairTest};
use crate::measure::histogram::Bucket;
use crate::report::grid::{Align, Grid};
use crate::report::openmetrics::{Family, Type, Value};
use crate::report::output::{self, Head, Rendered};
use crate::report::{Envelope, Kind, Written};
use crate::vocab::text::terminal as shown;
use crate::vocab::units::format_per_second;

/// How the mesh was run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
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

/// What the mesh measured: the body of its document (kind `mesh`). A document of a
/// command refused before it ran has no hosts and no tests.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MeshBody {
    /// How the mesh was run.
    pub settings: Settings,
    /// The hosts, in the order their indexes refer to.
    pub hosts: Vec<Host>,
    /// Every test of every ordered pair, as given.
    pub tests: Vec<PairTest>,
    /// One per (test, figure) that has a value for at least one pair.
    pub figures: Vec<FigureSummary>,
    /// Tests whose outcome is `failed`.
    pub failed: usize,
}

/// The mesh's document as it is made: the envelope (`interrupted`: Ctrl-C cut the mesh
/// short; its warnings: what a reader must know to read the figures right, such as a
/// test given twice or naming a host that does not exist, two hosts of one name,
/// `--concurrent`) and the body.
#[derive(Clone, Debug)]
pub struct MeshReport {
    /// What every document says of itself.
    pub envelope: Envelope,
    /// What the mesh measured.
    pub body: MeshBody,
}

impl<'de> Deserialize<'de> for MeshReport {
    /// A mesh document read back (any other kind is refused, named).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<MeshReport, D::Error> {
        let (envelope, _, body) =
            crate::report::envelope::read_body(d, |k| k == Kind::Mesh, "a mesh document")?;
        Ok(MeshReport { envelope, body })
    }
}

impl MeshReport {
    /// The document to write.
    pub fn document(&self) -> Written<'_, MeshBody> {
        Written {
            envelope: &self.envelope,
            kind: Kind::Mesh,
            body: &self.body,
        }
    }
}

/// One figure of one test over every ordered pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FigureSummary {
    /// The test, one of [`super::WORKLOADS`] (e.g. `tcp-pingpong`).
    pub test: String,
    /// `bits_per_second`, `messages_per_second`, `round_trip_p50_ns`,
    /// `round_trip_p99_ns` or `loss`: the name of the field of [`super::Figures`].
    pub figure: String,
    /// Throughput: true; latency and loss: false.
    pub higher_is_better: bool,
    /// `matrix[source][destination]`: the value, null on the diagonal, for a pair not
    /// measured, for a failed test, or a test that did not give this figure.
    pub matrix: Vec<Vec<Option<f64>>>,
    /// Over the pairs that have a value.
    pub spread: Option<Spread>,
    /// Up to 3 worst pairs (lowest throughput, highest latency or loss), worst first;
    /// ties in (source, destination) order.
    pub worst: Vec<WorstPair>,
    /// Round-trip figures only: every pair's round trips as one distribution.
    pub merged: Option<Merged>,
}

/// A figure's spread across pairs.
///
/// Percentiles are nearest-rank: p of n sorted values is the value at rank
/// ceil(p/100 x n), counting from 1 (at least rank 1), so it is always one of the
/// values: p10 of 1 value is that value, p50 of 4 values is the second lowest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spread {
    /// Lowest.
    pub min: f64,
    /// 10th percentile (nearest rank).
    pub p10: f64,
    /// Median (nearest rank: the lower middle of an even count).
    pub p50: f64,
    /// 90th percentile (nearest rank).
    pub p90: f64,
    /// Highest.
    pub max: f64,
    /// Pairs with a value.
    pub count: usize,
}

/// One of the worst pairs of a figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorstPair {
    /// Index of the source host.
    pub source: usize,
    /// Index of the destination host.
    pub destination: usize,
    /// Its value.
    pub value: f64,
}

/// The round trips of every measured pair of a test, as one distribution.
///
/// The pairs' buckets are merged by summing their counts per upper bound (percentiles
/// are never averaged). A quantile q is the upper bound (`le_ns`) of the first bucket
/// at which the cumulative count reaches ceil(q x `count`): an upper bound on the true
/// quantile, at most one bucket (about 26%) above it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Merged {
    /// Round trips, every pair together.
    pub count: u64,
    /// Median: the upper bound of its bucket, in nanoseconds.
    pub p50_ns: u64,
    /// 90th percentile: the upper bound of its bucket.
    pub p90_ns: u64,
    /// 99th percentile: the upper bound of its bucket.
    pub p99_ns: u64,
    /// The merged buckets, by increasing bound (non-cumulative counts).
    pub buckets: Vec<Bucket>,
}

/// The figures a report knows, in the order they are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Figure {
    BitsPerSecond,
    MessagesPerSecond,
    RoundTripP50,
    RoundTripP99,
    Loss,
}

/// How a figure is named in OpenMetrics.
struct Metric {
    name: &'static str,
    unit: Option<&'static str>,
    help: &'static str,
    /// Multiplies the figure into the metric's unit.
    scale: f64,
}

impl Figure {
    const ALL: [Figure; 5] = [
        Figure::BitsPerSecond,
        Figure::MessagesPerSecond,
        Figure::RoundTripP50,
        Figure::RoundTripP99,
        Figure::Loss,
    ];

    /// The figures shown for a test (those with no value for any pair are dropped).
    fn of_test(test: &str) -> &'static [Figure] {
        match test {
            "tcp-stream" => &[Figure::BitsPerSecond],
            "tcp-pingpong" | "udp-pingpong" => {
                &[Figure::RoundTripP50, Figure::RoundTripP99, Figure::Loss]
            }
            "udp-rate" => &[
                Figure::BitsPerSecond,
                Figure::MessagesPerSecond,
                Figure::Loss,
            ],
            _ => &Figure::ALL,
        }
    }

    /// The field's name in [`super::Figures`].
    fn key(self) -> &'static str {
        match self {
            Figure::BitsPerSecond => "bits_per_second",
            Figure::MessagesPerSecond => "messages_per_second",
            Figure::RoundTripP50 => "round_trip_p50_ns",
            Figure::RoundTripP99 => "round_trip_p99_ns",
            Figure::Loss => "loss",
        }
    }

    pub(crate) fn from_key(key: &str) -> Option<Figure> {
        Figure::ALL.into_iter().find(|f| f.key() == key)
    }

    /// What the table calls it.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Figure::BitsPerSecond => "throughput",
            Figure::MessagesPerSecond => "messages per second",
            Figure::RoundTripP50 => "round trip p50",
            Figure::RoundTripP99 => "round trip p99",
            Figure::Loss => "loss",
        }
    }

    fn higher_is_better(self) -> bool {
        matches!(self, Figure::BitsPerSecond | Figure::MessagesPerSecond)
    }

    /// As a headline figure (`compare`'s); loss, a fraction, is never one.
    fn headline(self) -> Option<crate::measure::headline::Headline> {
        use crate::measure::headline::Headline;
        match self {
            Figure::BitsPerSecond => Some(Headline::throughput(self.key())),
            Figure::MessagesPerSecond => Some(Headline::rate(self.key())),
            Figure::RoundTripP50 | Figure::RoundTripP99 => Some(Headline::latency(self.key())),
            Figure::Loss => None,
        }
    }

    pub(crate) fn is_round_trip(self) -> bool {
        matches!(self, Figure::RoundTripP50 | Figure::RoundTripP99)
    }

    /// The pair's value; `None` if it has none or it is not a finite number.
    fn value(self, f: &Figures) -> Option<f64> {
        let v = match self {
            Figure::BitsPerSecond => f.bits_per_second,
            Figure::MessagesPerSecond => f.messages_per_second,
            Figure::RoundTripP50 => f.round_trip_p50_ns.map(|n| n as f64),
            Figure::RoundTripP99 => f.round_trip_p99_ns.map(|n| n as f64),
            Figure::Loss => f.loss,
        };
        v.filter(|x| x.is_finite())
    }

    /// The value for a person, throughput in `units` (`--units`).
    pub(crate) fn shown(self, v: f64, units: crate::vocab::Units) -> String {
        match self {
            Figure::BitsPerSecond => crate::vocab::units::throughput(v, units),
            Figure::MessagesPerSecond => format_per_second(v),
            Figure::RoundTripP50 | Figure::RoundTripP99 => micros(v),
            Figure::Loss => format!("{:.2}%", v * 100.0),
        }
    }

    fn metric(self) -> Metric {
        match self {
            Figure::BitsPerSecond => Metric {
                // Bytes, not bits: Prometheus's base unit for data (promtool's lint
                // says so too), as `sockbench_received_bytes_per_second`.
                name: "sockbench_mesh_bytes_per_second",
                unit: Some("bytes_per_second"),
                help: "Payload bytes per second received from source to destination (tcp-stream, udp-rate).",
                scale: 1.0 / 8.0,
            },
            Figure::MessagesPerSecond => Metric {
                name: "sockbench_mesh_messages_per_second",
                unit: None,
                help: "Messages received per second from source to destination (udp-rate).",
                scale: 1.0,
            },
            Figure::RoundTripP50 => Metric {
                name: "sockbench_mesh_round_trip_p50_seconds",
                unit: Some("seconds"),
                help: "Median round trip from source to destination and back.",
                scale: 1e-9,
            },
            Figure::RoundTripP99 => Metric {
                name: "sockbench_mesh_round_trip_p99_seconds",
                unit: Some("seconds"),
                help: "99th percentile round trip from source to destination and back.",
                scale: 1e-9,
            },
            Figure::Loss => Metric {
                name: "sockbench_mesh_loss_ratio",
                unit: Some("ratio"),
                help: "Fraction of messages or requests lost from source to destination, 0 to 1.",
                scale: 1.0,
            },
        }
    }
}

/// Nanoseconds as microseconds with one decimal: `21.8 µs`.
pub(crate) fn micros(ns: f64) -> String {
    format!("{:.1} µs", ns / 1e3)
}

/// The text of the `--concurrent` warning.
const CONCURRENT: &str =
    "--concurrent: every pair ran at once; these figures include the tests' interference (stress mode)";

/// The pairs' outcomes by (test, source, destination); the last of a test given twice.
pub(crate) type Index<'a> = BTreeMap<(&'a str, usize, usize), &'a Outcome>;

/// Build the report: the matrices, spreads, worst pairs and merged round trips of every
/// test, from the pairs' results as the coordinator gathered them.
pub fn build(
    command: Vec<String>,
    settings: Settings,
    hosts: Vec<Host>,
    tests: Vec<PairTest>,
    interrupted: bool,
) -> MeshReport {
    let mut warnings = check(&hosts, &tests);
    if settings.concurrent {
        warnings.push(CONCURRENT.to_string());
    }
    let figures = {
        let index = index(&tests, hosts.len());
        test_names(&settings, &tests)
            .iter()
            .flat_map(|t| summaries(t, &index, hosts.len()))
            .collect()
    };
    let failed = tests
        .iter()
        .filter(|t| matches!(t.outcome, Outcome::Failed { .. }))
        .count();
    let mut envelope = Envelope::starting(command);
    let at = |ns: u64| {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns);
        crate::vocab::units::utc_micros(t)
    };
    envelope.started_at = Some(at(settings.started_unix_ns));
    envelope.ended_at = Some(at(settings.ended_unix_ns));
    envelope.interrupted = interrupted;
    envelope.warnings = warnings;
    MeshReport {
        envelope,
        body: MeshBody {
            settings,
            hosts,
            tests,
            figures,
            failed,
        },
    }
}

/// What is wrong with the input: tests the matrices cannot hold, host names that would
/// make two OpenMetrics series the same.
fn check(hosts: &[Host], tests: &[PairTest]) -> Vec<String> {
    let n = hosts.len();
    let mut warnings = Vec::new();
    let mut seen = BTreeSet::new();
    for t in tests {
        let what = format!("{} {} -> {}", t.test, t.source, t.destination);
        if t.source >= n || t.destination >= n {
            warnings.push(format!("{what}: no such host (there are {n}); left out"));
        } else if t.source == t.destination {
            warnings.push(format!("{what}: a host with itself; left out"));
        } else if !seen.insert((t.test.as_str(), t.source, t.destination)) {
            warnings.push(format!("{what}: given twice; the matrices hold the last"));
        }
    }
    let mut names = BTreeSet::new();
    for h in hosts {
        if !names.insert(h.name.as_str()) {
            warnings.push(format!(
                "two hosts are named '{}': their OpenMetrics series cannot be told apart",
                h.name
            ));
        }
    }
    warnings
}

/// The outcome of each test of each ordered pair of distinct, existing hosts.
pub(crate) fn index(tests: &[PairTest], n: usize) -> Index<'_> {
    tests
        .iter()
        .filter(|t| t.source < n && t.destination < n && t.source != t.destination)
        .map(|t| ((t.test.as_str(), t.source, t.destination), &t.outcome))
        .collect()
}

/// The tests in the order the settings name them, then any other in the order given.
fn test_names(settings: &Settings, tests: &[PairTest]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for t in settings.tests.iter().chain(tests.iter().map(|t| &t.test)) {
        if !names.contains(t) {
            names.push(t.clone());
        }
    }
    names
}

/// The summaries of one test's figures that have a value for some pair.
fn summaries(test: &str, index: &Index<'_>, n: usize) -> Vec<FigureSummary> {
    let merged = merge(
        index
            .range((test, 0, 0)..=(test, usize::MAX, usize::MAX))
            .filter_map(|(_, o)| measured(o))
            .map(|f| f.round_trip_buckets.as_slice()),
    );
    Figure::of_test(test)
        .iter()
        .filter_map(|&fig| {
            let matrix = matrix(test, fig, index, n);
            let cells = cells(&matrix);
            if cells.is_empty() {
                return None;
            }
            let mut values: Vec<f64> = cells.iter().map(|c| c.value).collect();
            values.sort_by(f64::total_cmp);
            Some(FigureSummary {
                test: test.to_string(),
                figure: fig.key().to_string(),
                higher_is_better: fig.higher_is_better(),
                spread: spread(&values),
                worst: worst(cells, fig.higher_is_better()),
                merged: merged.clone().filter(|_| fig.is_round_trip()),
                matrix,
            })
        })
        .collect()
}

/// The figures of a measured outcome.
fn measured(o: &Outcome) -> Option<&Figures> {
    match o {
        Outcome::Measured(f) => Some(f),
        Outcome::Failed { .. } => None,
    }
}

/// `matrix[source][destination]` of one figure of one test.
fn matrix(test: &str, fig: Figure, index: &Index<'_>, n: usize) -> Vec<Vec<Option<f64>>> {
    (0..n)
        .map(|s| {
            (0..n)
                .map(|d| {
                    index
                        .get(&(test, s, d))
                        .and_then(|o| measured(o))
                        .and_then(|f| fig.value(f))
                })
                .collect()
        })
        .collect()
}

/// The cells that have a value, in (source, destination) order.
fn cells(matrix: &[Vec<Option<f64>>]) -> Vec<WorstPair> {
    let mut out = Vec::new();
    for (s, row) in matrix.iter().enumerate() {
        for (d, v) in row.iter().enumerate() {
            if let Some(value) = *v {
                out.push(WorstPair {
                    source: s,
                    destination: d,
                    value,
                });
            }
        }
    }
    out
}

/// The nearest-rank percentile `p` (0..=100) of sorted, non-empty `xs`: the value at
/// rank ceil(p/100 x n), at least 1.
fn percentile(sorted: &[f64], p: usize) -> Option<f64> {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank.min(sorted.len()).checked_sub(1)?).copied()
}

/// The spread of sorted values; `None` for none.
fn spread(sorted: &[f64]) -> Option<Spread> {
    Some(Spread {
        min: *sorted.first()?,
        p10: percentile(sorted, 10)?,
        p50: percentile(sorted, 50)?,
        p90: percentile(sorted, 90)?,
        max: *sorted.last()?,
        count: sorted.len(),
    })
}

/// Up to 3 worst cells, worst first; `cells` in (source, destination) order, which a
/// stable sort keeps among equal values.
fn worst(mut cells: Vec<WorstPair>, higher_is_better: bool) -> Vec<WorstPair> {
    if higher_is_better {
        cells.sort_by(|a, b| a.value.total_cmp(&b.value));
    } else {
        cells.sort_by(|a, b| b.value.total_cmp(&a.value));
    }
    cells.truncate(3);
    cells
}

/// The pairs' buckets summed per upper bound, and the quantiles read from them; `None`
/// when no pair has a round trip.
fn merge<'a>(pairs: impl Iterator<Item = &'a [Bucket]>) -> Option<Merged> {
    let mut sums: BTreeMap<u64, u64> = BTreeMap::new();
    for b in pairs.flatten() {
        // Another host's counts: a sum that would wrap stays at the top instead.
        let sum = sums.entry(b.le_ns).or_default();
        *sum = sum.saturating_add(b.count);
    }
    let buckets: Vec<Bucket> = sums
        .into_iter()
        .filter(|&(_, count)| count > 0)
        .map(|(le_ns, count)| Bucket { le_ns, count })
        .collect();
    let count: u64 = buckets.iter().fold(0u64, |a, b| a.saturating_add(b.count));
    Some(Merged {
        count,
        p50_ns: quantile(&buckets, count, 50)?,
        p90_ns: quantile(&buckets, count, 90)?,
        p99_ns: quantile(&buckets, count, 99)?,
        buckets,
    })
}

/// The `le_ns` of the first bucket whose cumulative count reaches ceil(p/100 x total),
/// at least 1; `None` for no samples.
fn quantile(buckets: &[Bucket], total: u64, p: u64) -> Option<u64> {
    if total == 0 {
        return None;
    }
    // In u128: p x total cannot overflow.
    let rank = (u128::from(p) * u128::from(total)).div_ceil(100).max(1);
    let mut seen = 0u128;
    buckets.iter().find_map(|b| {
        seen += u128::from(b.count);
        (seen >= rank).then_some(b.le_ns)
    })
}

/// How the table names hosts: their names when all are short and distinct, else `h0`,
/// `h1`, ... (the legend gives the names).
pub(crate) fn labels(hosts: &[Host]) -> Vec<String> {
    let distinct = hosts.iter().map(|h| &h.name).collect::<BTreeSet<_>>().len() == hosts.len();
    let short = hosts
        .iter()
        .map(|h| shown(&h.name))
        .all(|n| !n.is_empty() && n.chars().count() <= SHORT_NAME);
    if distinct && short {
        hosts.iter().map(|h| shown(&h.name)).collect()
    } else {
        (0..hosts.len()).map(|i| format!("h{i}")).collect()
    }
}

/// The longest host name the table uses as a column label.
const SHORT_NAME: usize = 8;

/// The label of host `i`, or `h{i}` if there is no such host.
pub(crate) fn label(labels: &[String], i: usize) -> String {
    labels.get(i).cloned().unwrap_or_else(|| format!("h{i}"))
}

/// A matrix row's label: the source's name, after its column label if that differs.
pub(crate) fn row_label(hosts: &[Host], labels: &[String], i: usize) -> String {
    let l = label(labels, i);
    match hosts.get(i) {
        Some(h) if shown(&h.name) != l => format!("{l} {}", shown(&h.name)),
        _ => l,
    }
}

/// The table `sockbench mesh` prints on stdout: a legend of the hosts, each test's
/// matrices (rows: source, columns: destination) with their spread, worst pairs and
/// merged round trips, then what failed and the warnings. Host names, addresses and
/// reasons pass [`crate::vocab::text::terminal`]: they are other machines' words.
pub fn grids(r: &MeshReport, view: &crate::vocab::View) -> Vec<Grid> {
    let units = view.units;
    let labels = labels(&r.body.hosts);
    let index = index(&r.body.tests, r.body.hosts.len());
    let mut out = vec![Grid {
        title: Some(format!(
            "mesh of {} hosts, {} tests ({} failed); rows: source, columns: destination",
            r.body.hosts.len(),
            r.body.tests.len(),
            r.body.failed
        )),
        headers: hosts_header(view.wide),
        align: vec![Align::Left; hosts_header(view.wide).len()],
        rows: (r.body.hosts.iter().enumerate())
            .map(|(i, h)| host_row(&labels, i, h, view.wide))
            .collect(),
        notes: Vec::new(),
    }];
    if r.body.figures.is_empty() {
        out[0].notes.push("no test gave a figure".into());
    }
    for s in &r.body.figures {
        if let Some(g) = matrix_grid(s, &index, &r.body.hosts, &labels, units) {
            out.push(g);
        }
    }
    if let Some(g) = failures(r, &labels) {
        out.push(g);
    }
    let last = out.last_mut().expect("the hosts");
    if r.envelope.interrupted {
        last.notes
            .push("interrupted: the figures cover what ran before Ctrl-C".into());
    }
    last.notes
        .extend(r.envelope.warnings.iter().map(|w| format!("warning: {w}")));
    out
}

/// The hosts legend's columns: with --wide (and on the page), what each agent said of
/// itself too.
fn hosts_header(wide: bool) -> Vec<String> {
    let mut h = vec!["host", "name", "address"];
    if wide {
        h.extend(["kernel", "route device", "MTU", "status"]);
    }
    h.into_iter().map(String::from).collect()
}

/// A host's row of the legend (see [`hosts_header`]).
fn host_row(labels: &[String], i: usize, h: &Host, wide: bool) -> Vec<String> {
    let mut row = vec![label(labels, i), h.name.clone(), h.address.clone()];
    if wide {
        let meta = h.meta.as_ref();
        row.extend([
            meta.map_or_else(String::new, |m| m.kernel.clone()),
            meta.and_then(|m| m.route_device.clone())
                .unwrap_or_default(),
            meta.and_then(|m| m.mtu)
                .map_or_else(String::new, |m| m.to_string()),
            h.error.clone().unwrap_or_else(|| "ok".into()),
        ]);
    }
    row
}

/// One figure's matrix (a row per source), with its spread, worst pairs and merged round
/// trips under it; beyond [`TABLE_MATRIX_MAX`] hosts those alone.
fn matrix_grid(
    s: &FigureSummary,
    index: &Index<'_>,
    hosts: &[Host],
    labels: &[String],
    units: crate::vocab::Units,
) -> Option<Grid> {
    let fig = Figure::from_key(&s.figure)?;
    let mut notes = String::new();
    summary_lines(&mut notes, fig, s, labels, units);
    let mut g = Grid {
        title: Some(format!("{}: {}", s.test, fig.title())),
        notes: notes.lines().map(String::from).collect(),
        ..Grid::default()
    };
    if s.matrix.len() > TABLE_MATRIX_MAX {
        g.notes.insert(
            0,
            format!(
                "({0} x {0} matrix: in --format json and --format openmetrics)",
                s.matrix.len()
            ),
        );
        return Some(g);
    }
    g.headers = std::iter::once("from \\ to".to_string())
        .chain((0..s.matrix.len()).map(|d| label(labels, d)))
        .collect();
    g.align = std::iter::once(Align::Left)
        .chain((0..s.matrix.len()).map(|_| Align::Right))
        .collect();
    g.rows = (s.matrix.iter().enumerate())
        .map(|(src, row)| {
            let cells = (row.iter().enumerate()).map(|(dst, v)| {
                cell(
                    fig,
                    *v,
                    index.get(&(s.test.as_str(), src, dst)),
                    src == dst,
                    units,
                )
            });
            std::iter::once(row_label(hosts, labels, src))
                .chain(cells)
                .collect()
        })
        .collect();
    Some(g)
}

/// Hosts up to which the table prints each matrix (a wider one would not fit a
/// terminal); beyond, the spread and worst pairs stand for it.
pub const TABLE_MATRIX_MAX: usize = 16;

/// Under a matrix: the spread across pairs, the worst pairs, and (under a test's p50
/// only: the same for p99) its merged round trips.
pub(crate) fn summary_lines(
    out: &mut String,
    fig: Figure,
    s: &FigureSummary,
    labels: &[String],
    units: crate::vocab::Units,
) {
    if let Some(sp) = &s.spread {
        let f = |v: f64| fig.shown(v, units);
        let worst: Vec<String> = s
            .worst
            .iter()
            .map(|w| {
                let (a, b) = (label(labels, w.source), label(labels, w.destination));
                format!("{a}→{b} {}", f(w.value))
            })
            .collect();
        let _ = writeln!(
            out,
            "across {} pairs: min {}, p10 {}, p50 {}, p90 {}, max {}; worst: {}",
            sp.count,
            f(sp.min),
            f(sp.p10),
            f(sp.p50),
            f(sp.p90),
            f(sp.max),
            worst.join(", ")
        );
    }
    if let Some(m) = s
        .merged
        .as_ref()
        .filter(|_| s.figure != "round_trip_p99_ns")
    {
        let _ = writeln!(
            out,
            "all pairs' {} round trips merged (bucket upper bounds): p50 {}, p90 {}, p99 {}",
            m.count,
            micros(m.p50_ns as f64),
            micros(m.p90_ns as f64),
            micros(m.p99_ns as f64)
        );
    }
}

/// A matrix cell: `-` on the diagonal, `failed`, `.` for a pair not measured, `n/a` for a
/// measured pair without this figure.
pub(crate) fn cell(
    fig: Figure,
    v: Option<f64>,
    outcome: Option<&&Outcome>,
    diagonal: bool,
    units: crate::vocab::Units,
) -> String {
    match (v, outcome) {
        _ if diagonal => "-".into(),
        (Some(v), _) => fig.shown(v, units),
        (None, Some(Outcome::Failed { .. })) => "failed".into(),
        (None, Some(Outcome::Measured(_))) => "n/a".into(),
        (None, None) => ".".into(),
    }
}

/// The failed tests and the hosts that could not take part, if any.
fn failures(r: &MeshReport, labels: &[String]) -> Option<Grid> {
    let mut rows: Vec<Vec<String>> = (r.body.tests.iter())
        .filter_map(|t| match &t.outcome {
            Outcome::Failed { reason } => Some(vec![
                format!(
                    "{} -> {}",
                    label(labels, t.source),
                    label(labels, t.destination)
                ),
                t.test.clone(),
                reason.clone(),
            ]),
            Outcome::Measured(_) => None,
        })
        .collect();
    for (i, h) in r.body.hosts.iter().enumerate() {
        if let Some(e) = &h.error {
            rows.push(vec![
                format!("host {}", label(labels, i)),
                h.name.clone(),
                e.clone(),
            ]);
        }
    }
    (!rows.is_empty()).then(|| Grid {
        title: Some("Failed".into()),
        headers: ["what", "test or host", "why"].map(String::from).to_vec(),
        align: vec![Align::Left; 3],
        rows,
        notes: Vec::new(),
    })
}

/// The report as OpenMetrics families (the exposition is written by
/// [`crate::report::openmetrics::exposition`], ending in `# EOF`).
///
/// One gauge per figure of each measured pair test, labelled `source` and
/// `destination` (host names) and `test`: `sockbench_mesh_bytes_per_second` (bytes,
/// Prometheus's base unit for data: the table's bits/s divided by 8),
/// `sockbench_mesh_messages_per_second`, `sockbench_mesh_round_trip_p50_seconds` and
/// `..._p99_seconds` (the pair's own percentiles, in seconds), `sockbench_mesh_loss_ratio`
/// (0 to 1): the figures the table shows for the test (so not a pingpong's round trips
/// per second, which the JSON's `tests` keep); a figure the pair did not give has no
/// line. `sockbench_mesh_test_failed` is
/// 1 for a failed test and 0 for a measured one. Each family is written whole (`# TYPE`,
/// `# UNIT` where it has a unit, `# HELP`, then its samples), as in
/// [`crate::report::openmetrics`], whose naming, escaping and number format this
/// follows.
pub fn families(r: &MeshReport) -> Vec<Family> {
    let tests: Vec<(&PairTest, Vec<(&'static str, String)>)> = r
        .body
        .tests
        .iter()
        .filter_map(|t| Some((t, pair_labels(r, t)?.to_vec())))
        .collect();
    let mut out = Vec::new();
    for fig in Figure::ALL {
        let m = fig.metric();
        let mut f = Family::new(m.name, Type::Gauge, m.unit, m.help);
        for (t, l) in tests
            .iter()
            .filter(|(t, _)| Figure::of_test(&t.test).contains(&fig))
        {
            if let Some(v) = measured(&t.outcome).and_then(|x| fig.value(x)) {
                f.push(l.clone(), Value::Float(v * m.scale));
            }
        }
        out.push(f);
    }
    let mut failed = Family::new(
        "sockbench_mesh_test_failed",
        Type::Gauge,
        None,
        "1 if the test of this pair failed (its figures are then absent; the JSON report says why).",
    );
    for (t, l) in &tests {
        let is = matches!(t.outcome, Outcome::Failed { .. });
        failed.push(l.clone(), Value::Int(u64::from(is)));
    }
    out.push(failed);
    out
}

/// A pair test's labels; `None` if it names a host that does not exist.
fn pair_labels(r: &MeshReport, t: &PairTest) -> Option<[(&'static str, String); 3]> {
    Some([
        ("source", r.body.hosts.get(t.source)?.name.clone()),
        ("destination", r.body.hosts.get(t.destination)?.name.clone()),
        ("test", t.test.clone()),
    ])
}

impl Rendered for MeshReport {
    fn head(&self) -> Head<'_> {
        Head::of(Kind::Mesh, &self.envelope)
    }

    fn json(&self) -> serde_json::Result<Vec<u8>> {
        output::pretty(&self.document())
    }

    fn tables(&self, view: &crate::vocab::View) -> Vec<Grid> {
        grids(self, view)
    }

    fn charts(&self) -> Vec<crate::report::chart::Chart> {
        super::heat::charts(self, crate::vocab::Units::Bits)
    }

    fn findings(&self) -> Vec<output::Finding> {
        let labels = labels(&self.body.hosts);
        let failed = (self.body.tests.iter()).filter_map(|t| match &t.outcome {
            Outcome::Failed { reason } => Some(output::Finding {
                severity: output::Severity::Failure,
                about: format!(
                    "{} → {} {}",
                    label(&labels, t.source),
                    label(&labels, t.destination),
                    t.test
                ),
                text: format!(": {reason}"),
            }),
            Outcome::Measured(_) => None,
        });
        let hosts = (self.body.hosts.iter().enumerate()).filter_map(|(i, h)| {
            Some(output::Finding {
                severity: output::Severity::Failure,
                about: format!("host {} ({})", label(&labels, i), h.name),
                text: format!(": {}", h.error.as_ref()?),
            })
        });
        failed.chain(hosts).collect()
    }

    fn setting(&self) -> Vec<(String, String)> {
        use crate::vocab::units::{format_bytes, format_seconds};
        let s = &self.body.settings;
        let mut rows = vec![("pairs".to_string(), s.pairs.clone())];
        if let Some(seed) = s.seed {
            rows.push(("seed".into(), seed.to_string()));
        }
        rows.push((
            "schedule".into(),
            if s.concurrent {
                "--concurrent: every pair at once (stress)".to_string()
            } else {
                format!("{} rounds, no host in two tests at once", s.rounds)
            },
        ));
        rows.push(("tests".into(), s.tests.join(", ")));
        rows.push(("duration".into(), format_seconds(s.duration_s)));
        rows.push((
            "warm-up".into(),
            if s.warmup_s > 0.0 {
                format_seconds(s.warmup_s)
            } else {
                "none".into()
            },
        ));
        rows.push((
            "parallel streams (tcp-stream)".into(),
            s.parallel.to_string(),
        ));
        rows.push((
            "message size".into(),
            s.size.map_or("each test's default".into(), format_bytes),
        ));
        if s.ended_unix_ns > s.started_unix_ns {
            rows.push((
                "took".into(),
                format_seconds((s.ended_unix_ns - s.started_unix_ns) as f64 / 1e9),
            ));
        }
        rows
    }

    fn records(&self) -> output::Records {
        let rows: Vec<serde_json::Value> = (self.body.tests.iter())
            .map(|t| {
                let name = |i: usize| self.body.hosts.get(i).map(|h| h.name.clone());
                let mut v = serde_json::to_value(t).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.insert("source_name".into(), name(t.source).into());
                    o.insert("destination_name".into(), name(t.destination).into());
                }
                v
            })
            .collect();
        output::records_of(&rows, &serde_json::Value::Null)
    }

    fn metrics(&self) -> Vec<Family> {
        families(self)
    }

    fn count(&self) -> String {
        output::counted(self.body.tests.len(), "test")
    }

    fn nothing_to_chart(&self) -> Option<String> {
        self.body
            .figures
            .is_empty()
            .then(|| "No test gave a figure.".to_string())
    }
}

impl MeshBody {
    /// `compare`'s rows: each test of each ordered pair of named hosts, judged by the
    /// test's first figure (throughput for the streams, the round trip's median for the
    /// pingpongs). Pairs are matched by the hosts' names, not their addresses.
    pub fn rows(&self) -> Vec<crate::report::rows::Row> {
        (self.tests.iter())
            .filter_map(|t| {
                let (from, to) = (self.hosts.get(t.source)?, self.hosts.get(t.destination)?);
                let figure = *Figure::of_test(&t.test).first()?;
                let headline = figure.headline()?;
                let (values, error) = match &t.outcome {
                    Outcome::Measured(f) => (figure.value(f).into_iter().collect(), None),
                    Outcome::Failed { reason } => (Vec::new(), Some(reason.clone())),
                };
                let label = format!("mesh {} {} -> {}", t.test, from.name, to.name);
                Some(crate::report::rows::Row {
                    key: label.clone(),
                    label,
                    headline,
                    values,
                    error,
                })
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The terminal table of `r`, as `--format table` prints it.
    pub(crate) fn table(r: &MeshReport) -> String {
        let bytes = crate::report::exporter(crate::vocab::Format::Table, Default::default())
            .serialize(r)
            .unwrap();
        String::from_utf8(bytes).unwrap()
    }

    /// The OpenMetrics exposition of `r`.
    pub(crate) fn openmetrics(r: &MeshReport) -> String {
        let bytes = crate::report::exporter(crate::vocab::Format::Openmetrics, Default::default())
            .serialize(r)
            .unwrap();
        String::from_utf8(bytes).unwrap()
    }

    pub(crate) fn host(name: &str, address: &str, error: Option<&str>) -> Host {
        Host {
            name: name.into(),
            address: address.into(),
            meta: None,
            error: error.map(Into::into),
        }
    }

    pub(crate) fn pair(
        source: usize,
        destination: usize,
        test: &str,
        outcome: Outcome,
    ) -> PairTest {
        PairTest {
            source,
            destination,
            test: test.into(),
            round: 0,
            started_unix_ns: 1,
            ended_unix_ns: 2,
            outcome,
        }
    }

    pub(crate) fn stream(bps: f64) -> Outcome {
        Outcome::Measured(Figures {
            bits_per_second: Some(bps),
            ..Figures::default()
        })
    }

    pub(crate) fn pingpong(p50: u64, p99: u64, loss: f64, buckets: &[(u64, u64)]) -> Outcome {
        Outcome::Measured(Figures {
            messages_per_second: Some(1000.0),
            round_trip_p50_ns: Some(p50),
            round_trip_p99_ns: Some(p99),
            loss: Some(loss),
            round_trip_buckets: buckets
                .iter()
                .map(|&(le_ns, count)| Bucket { le_ns, count })
                .collect(),
            ..Figures::default()
        })
    }

    pub(crate) fn failed(reason: &str) -> Outcome {
        Outcome::Failed {
            reason: reason.into(),
        }
    }

    /// Four hosts; the third's name has a double quote, the fourth never answered (its
    /// pairs are not measured). tcp-stream: five pairs measured, 2 -> 0 failed.
    /// udp-pingpong: two pairs measured, 0 -> 2 failed.
    fn sample(concurrent: bool) -> MeshReport {
        let hosts = vec![
            host("alpha", "10.0.0.1:5201", None),
            host("beta", "10.0.0.2:5201", None),
            host("ga\"mma", "10.0.0.3:5201", None),
            host(
                "delta.example.org",
                "10.0.0.4:5201",
                Some("unreachable: connection refused"),
            ),
        ];
        let tests = vec![
            pair(0, 1, "tcp-stream", stream(9.41e9)),
            pair(1, 0, "tcp-stream", stream(8e9)),
            pair(0, 2, "tcp-stream", stream(5e9)),
            pair(2, 0, "tcp-stream", failed("the agent timed out")),
            pair(1, 2, "tcp-stream", stream(7e9)),
            pair(2, 1, "tcp-stream", stream(5e9)),
            pair(
                0,
                1,
                "udp-pingpong",
                pingpong(
                    20_000,
                    50_000,
                    0.0,
                    &[(16_000, 2), (20_000, 4), (50_000, 4)],
                ),
            ),
            pair(
                1,
                0,
                "udp-pingpong",
                pingpong(
                    25_000,
                    80_000,
                    0.01,
                    &[(20_000, 1), (25_000, 6), (50_000, 1), (80_000, 2)],
                ),
            ),
            pair(0, 2, "udp-pingpong", failed("refused: wrong key")),
        ];
        let settings = Settings {
            pairs: "all".into(),
            concurrent,
            tests: vec!["tcp-stream".into(), "udp-pingpong".into()],
            ..Settings::default()
        };
        build(
            vec!["sockbench".into(), "mesh".into()],
            settings,
            hosts,
            tests,
            false,
        )
    }

    fn figure<'a>(r: &'a MeshReport, test: &str, figure: &str) -> &'a FigureSummary {
        r.body
            .figures
            .iter()
            .find(|f| f.test == test && f.figure == figure)
            .unwrap_or_else(|| panic!("no {test} {figure} in {:?}", r.body.figures))
    }

    fn worst(f: &FigureSummary) -> Vec<(usize, usize, f64)> {
        f.worst
            .iter()
            .map(|w| (w.source, w.destination, w.value))
            .collect()
    }

    #[test]
    fn the_report_counts_failures_and_keeps_every_test() {
        let r = sample(false);
        assert_eq!(r.envelope.schema_version, crate::report::SCHEMA_VERSION);
        assert_eq!(r.envelope.tool.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(r.body.failed, 2);
        assert_eq!(r.body.tests.len(), 9);
        assert!(r.envelope.warnings.is_empty(), "{:?}", r.envelope.warnings);
        let names: Vec<(&str, &str)> = r
            .body
            .figures
            .iter()
            .map(|f| (f.test.as_str(), f.figure.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("tcp-stream", "bits_per_second"),
                ("udp-pingpong", "round_trip_p50_ns"),
                ("udp-pingpong", "round_trip_p99_ns"),
                ("udp-pingpong", "loss"),
            ]
        );
    }

    #[test]
    fn the_matrix_has_each_pair_at_source_row_and_destination_column() {
        let r = sample(false);
        let f = figure(&r, "tcp-stream", "bits_per_second");
        assert!(f.higher_is_better);
        assert_eq!(
            f.matrix,
            vec![
                vec![None, Some(9.41e9), Some(5e9), None],
                vec![Some(8e9), None, Some(7e9), None],
                vec![None, Some(5e9), None, None],
                vec![None, None, None, None],
            ]
        );
        assert!(f.merged.is_none());
        let p50 = figure(&r, "udp-pingpong", "round_trip_p50_ns");
        assert!(!p50.higher_is_better);
        assert_eq!(p50.matrix[0][1], Some(20_000.0));
        assert_eq!(p50.matrix[1][0], Some(25_000.0));
        assert_eq!(p50.matrix[0][2], None);
    }

    #[test]
    fn the_spread_is_nearest_rank_over_the_measured_pairs() {
        let r = sample(false);
        let s = figure(&r, "tcp-stream", "bits_per_second")
            .spread
            .clone()
            .unwrap();
        // Sorted: 5, 5, 7, 8, 9.41 (e9). p10: rank 1; p50: rank 3; p90: rank 5.
        assert_eq!(
            s,
            Spread {
                min: 5e9,
                p10: 5e9,
                p50: 7e9,
                p90: 9.41e9,
                max: 9.41e9,
                count: 5
            }
        );
        let one = spread(&[3.0]).unwrap();
        assert_eq!((one.p10, one.p50, one.p90), (3.0, 3.0, 3.0));
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = spread(&ten).unwrap();
        assert_eq!((s.p10, s.p50, s.p90), (1.0, 5.0, 9.0));
        assert!(spread(&[]).is_none());
    }

    #[test]
    fn the_worst_pairs_come_worst_first_ties_in_pair_order() {
        let r = sample(false);
        // Lowest throughput first; 0 -> 2 and 2 -> 1 tie at 5e9.
        assert_eq!(
            worst(figure(&r, "tcp-stream", "bits_per_second")),
            [(0, 2, 5e9), (2, 1, 5e9), (1, 2, 7e9)]
        );
        // Highest latency and loss first.
        assert_eq!(
            worst(figure(&r, "udp-pingpong", "round_trip_p99_ns")),
            [(1, 0, 80_000.0), (0, 1, 50_000.0)]
        );
        assert_eq!(
            worst(figure(&r, "udp-pingpong", "loss")),
            [(1, 0, 0.01), (0, 1, 0.0)]
        );
    }

    #[test]
    fn round_trips_merge_by_summing_buckets_not_averaging_percentiles() {
        let r = sample(false);
        let m = figure(&r, "udp-pingpong", "round_trip_p50_ns")
            .merged
            .clone()
            .unwrap();
        let b = |le_ns, count| Bucket { le_ns, count };
        assert_eq!(
            m.buckets,
            [
                b(16_000, 2),
                b(20_000, 5),
                b(25_000, 6),
                b(50_000, 5),
                b(80_000, 2)
            ]
        );
        // Cumulative 2, 7, 13, 18, 20: p50 is rank 10 (25 µs, not the pairs' mean p50
        // of 22.5 µs), p90 rank 18 (50 µs), p99 rank 20 (80 µs).
        assert_eq!(m.count, 20);
        assert_eq!((m.p50_ns, m.p90_ns, m.p99_ns), (25_000, 50_000, 80_000));
        assert_eq!(
            figure(&r, "udp-pingpong", "round_trip_p99_ns").merged,
            Some(m)
        );
        assert!(figure(&r, "udp-pingpong", "loss").merged.is_none());
        assert_eq!(merge(std::iter::empty()), None);
    }

    #[test]
    fn the_table_shows_cells_spread_failures_and_the_concurrent_warning() {
        let t = table(&sample(true));
        assert_eq!(row(&t, "h2"), ["h2", "ga\"mma", "10.0.0.3:5201"]);
        for want in [
            "tcp-stream: throughput",
            "9.41 Gbit/s",
            "failed",
            "across 5 pairs: min 5.00 Gbit/s, p10 5.00 Gbit/s, p50 7.00 Gbit/s, p90 9.41 Gbit/s, max 9.41 Gbit/s; worst: h0→h2 5.00 Gbit/s, h2→h1 5.00 Gbit/s, h1→h2 7.00 Gbit/s",
            "across 2 pairs: min 20.0 µs,",
            "all pairs' 20 round trips merged (bucket upper bounds): p50 25.0 µs, p90 50.0 µs, p99 80.0 µs",
            "across 2 pairs: min 0.00%, p10 0.00%, p50 0.00%, p90 1.00%, max 1.00%; worst: h1→h0 1.00%, h0→h1 0.00%",
            "\nFailed\n",
        ] {
            assert!(t.contains(want), "no {want:?} in\n{t}");
        }
        assert_eq!(
            row(&t, "h2 -> h0"),
            ["h2 -> h0", "tcp-stream", "the agent timed out"]
        );
        assert_eq!(
            row(&t, "h0 -> h2"),
            ["h0 -> h2", "udp-pingpong", "refused: wrong key"]
        );
        assert_eq!(
            row(&t, "host h3"),
            [
                "host h3",
                "delta.example.org",
                "unreachable: connection refused"
            ]
        );
        assert!(t.ends_with(&format!("warning: {CONCURRENT}\n")), "{t}");
        assert!(!table(&sample(false)).contains("--concurrent"));
        // The first matrix (tcp-stream): the failed pair, the diagonal, and the pairs
        // of the host that never answered, not measured.
        assert_eq!(
            row(&t, "h2 ga\"mma"),
            ["h2 ga\"mma", "failed", "5.00 Gbit/s", "-", "."]
        );
        assert_eq!(
            row(&t, "h3 delta.example.org"),
            ["h3 delta.example.org", ".", ".", ".", "-"]
        );
        assert_eq!(
            row(&t, "h0 alpha"),
            ["h0 alpha", "-", "9.41 Gbit/s", "5.00 Gbit/s", "."]
        );
    }

    /// The cells of the first table row that starts with `label`.
    fn row(t: &str, label: &str) -> Vec<String> {
        let line = t
            .lines()
            .find(|l| l.starts_with(&format!("│ {label} ")))
            .unwrap_or_else(|| panic!("no row {label} in\n{t}"));
        line.split(['│', '┆'])
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect()
    }

    #[test]
    fn short_distinct_names_label_the_columns() {
        let mut r = sample(false);
        r.body.hosts[2].name = "gamma".into();
        r.body.hosts[3].name = "delta".into();
        let t = table(&r);
        assert_eq!(row(&t, "gamma"), ["gamma", "gamma", "10.0.0.3:5201"]);
        assert!(t.contains("worst: alpha→gamma 5.00 Gbit/s"), "{t}");
        assert_eq!(
            row(&t, "gamma -> alpha"),
            ["gamma -> alpha", "tcp-stream", "the agent timed out"]
        );
    }

    #[test]
    fn openmetrics_has_each_pairs_figures_escaped_families_whole_and_eof_last() {
        let om = openmetrics(&sample(false));
        for want in [
            "sockbench_mesh_bytes_per_second{source=\"alpha\",destination=\"beta\",test=\"tcp-stream\"} 1.17625e+09\n",
            "sockbench_mesh_round_trip_p50_seconds{source=\"alpha\",destination=\"beta\",test=\"udp-pingpong\"} 2e-05\n",
            "sockbench_mesh_round_trip_p99_seconds{source=\"alpha\",destination=\"beta\",test=\"udp-pingpong\"} 5e-05\n",
            "sockbench_mesh_loss_ratio{source=\"alpha\",destination=\"beta\",test=\"udp-pingpong\"} 0.0\n",
            "sockbench_mesh_test_failed{source=\"alpha\",destination=\"beta\",test=\"tcp-stream\"} 0\n",
            "sockbench_mesh_bytes_per_second{source=\"beta\",destination=\"ga\\\"mma\",test=\"tcp-stream\"} 8.75e+08\n",
            "sockbench_mesh_test_failed{source=\"ga\\\"mma\",destination=\"alpha\",test=\"tcp-stream\"} 1\n",
            "sockbench_mesh_test_failed{source=\"alpha\",destination=\"ga\\\"mma\",test=\"udp-pingpong\"} 1\n",
            "# TYPE sockbench_mesh_round_trip_p50_seconds gauge\n# UNIT sockbench_mesh_round_trip_p50_seconds seconds\n# HELP sockbench_mesh_round_trip_p50_seconds ",
            "# TYPE sockbench_mesh_loss_ratio gauge\n# UNIT sockbench_mesh_loss_ratio ratio\n",
            "# TYPE sockbench_mesh_test_failed gauge\n# HELP sockbench_mesh_test_failed ",
        ] {
            assert!(om.contains(want), "no {want:?} in\n{om}");
        }
        assert!(om.ends_with("\n# EOF\n"), "{om}");
        assert_eq!(om.matches("# EOF").count(), 1);
        // A failed test has no figures; no figure without a value has a family.
        assert!(!om.contains("source=\"ga\\\"mma\",destination=\"alpha\",test=\"tcp-stream\"} 0"));
        assert!(!om.contains("sockbench_mesh_messages_per_second"), "{om}");
        assert_eq!(om.matches("sockbench_mesh_bytes_per_second{").count(), 5);
        assert_eq!(om.matches("sockbench_mesh_test_failed{").count(), 9);
    }

    #[test]
    fn openmetrics_families_are_declared_once_and_never_interleaved() {
        let om = openmetrics(&sample(false));
        let mut done: Vec<String> = Vec::new();
        let mut current = String::new();
        for line in om.lines().filter(|l| *l != "# EOF") {
            let name = match line.strip_prefix("# ") {
                Some(meta) => meta.split(' ').nth(1).unwrap_or_default().to_string(),
                None => line
                    .split(['{', ' '])
                    .next()
                    .unwrap_or_default()
                    .to_string(),
            };
            if name != current {
                assert!(!done.contains(&name), "{name} interleaved in\n{om}");
                assert!(line.starts_with("# TYPE "), "{name} starts with {line:?}");
                done.push(std::mem::replace(&mut current, name));
            }
            if !line.starts_with('#') {
                let unit = om.contains(&format!("# UNIT {current} "));
                let suffix = ["_seconds", "_ratio", "_bytes_per_second"]
                    .iter()
                    .any(|u| current.ends_with(u));
                assert_eq!(unit, suffix, "{current}: UNIT");
            }
        }
        assert!(done.len() > 5, "{done:?}");
    }

    #[test]
    fn tests_the_matrix_cannot_hold_are_left_out_with_a_warning() {
        let hosts = vec![host("a", "x", None), host("b", "y", None)];
        let tests = vec![
            pair(0, 5, "tcp-stream", stream(1.0)),
            pair(1, 1, "tcp-stream", stream(2.0)),
            pair(0, 1, "tcp-stream", stream(3.0)),
            pair(0, 1, "tcp-stream", stream(4.0)),
        ];
        let r = build(Vec::new(), Settings::default(), hosts, tests, true);
        assert_eq!(r.envelope.warnings.len(), 3, "{:?}", r.envelope.warnings);
        assert!(
            r.envelope.warnings[0].contains("no such host"),
            "{:?}",
            r.envelope.warnings
        );
        let f = figure(&r, "tcp-stream", "bits_per_second");
        assert_eq!(f.matrix, vec![vec![None, Some(4.0)], vec![None, None]]);
        assert!(table(&r).contains("interrupted"));
        let om = openmetrics(&r);
        assert!(!om.contains("destination=\"\""), "{om}");
        assert_eq!(om.matches("sockbench_mesh_test_failed{").count(), 3);
    }

    #[test]
    fn an_empty_mesh_still_renders() {
        let r = build(
            Vec::new(),
            Settings::default(),
            Vec::new(),
            Vec::new(),
            false,
        );
        assert!(r.body.figures.is_empty());
        assert!(table(&r).contains("no test gave a figure"));
        let om = openmetrics(&r);
        assert!(om.ends_with("# EOF\n"));
        assert!(!om.contains("sockbench_mesh_"), "{om}");
    }

    #[test]
    fn a_mesh_wider_than_the_table_limit_prints_its_spread_but_not_its_matrix() {
        let of = |n: usize| {
            let hosts: Vec<Host> = (0..n)
                .map(|i| host(&format!("h{i}"), &format!("10.0.0.{i}:5290"), None))
                .collect();
            let tests = vec![
                pair(0, 1, "tcp-stream", stream(1e9)),
                pair(1, 0, "tcp-stream", stream(2e9)),
            ];
            let settings = Settings {
                tests: vec!["tcp-stream".into()],
                ..Settings::default()
            };
            table(&build(vec![], settings, hosts, tests, false))
        };
        let wide = of(TABLE_MATRIX_MAX + 1);
        assert!(wide.contains("(17 x 17 matrix: in --format json"), "{wide}");
        assert!(!wide.contains("from \\ to"), "{wide}");
        assert!(wide.contains("across 2 pairs: min 1.00 Gbit/s"), "{wide}");
        let fits = of(TABLE_MATRIX_MAX);
        assert!(fits.contains("from \\ to"), "{fits}");
        assert!(!fits.contains("matrix: in --format json"), "{fits}");
    }

    #[test]
    fn the_merged_round_trips_are_printed_once_per_test() {
        let t = table(&sample(false));
        assert_eq!(t.matches("round trips merged").count(), 1, "{t}");
    }

    #[test]
    fn counts_from_another_host_that_would_wrap_the_merge_stay_at_the_top() {
        let hosts = vec![host("a", "a:1", None), host("b", "b:1", None)];
        let tests = vec![
            pair(
                0,
                1,
                "udp-pingpong",
                pingpong(10, 20, 0.0, &[(16_000, u64::MAX)]),
            ),
            pair(
                1,
                0,
                "udp-pingpong",
                pingpong(10, 20, 0.0, &[(16_000, 5), (20_000, 1)]),
            ),
        ];
        let r = build(vec![], Settings::default(), hosts, tests, false);
        let m = r
            .body
            .figures
            .iter()
            .find_map(|f| f.merged.as_ref())
            .expect("merged");
        assert_eq!(m.count, u64::MAX);
        assert_eq!(
            m.buckets[0],
            Bucket {
                le_ns: 16_000,
                count: u64::MAX
            }
        );
    }
}

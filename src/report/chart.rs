//! Charts as SVG text (plotters' SVG backend), for the HTML report.
//!
//! This module owns what a report's charts show and how they are drawn: which charts a
//! report gets ([`charts`]), the data each one plots (pure functions, unit-tested), the
//! log scales and their tick labels, and the SVG itself. It does not own the page around
//! them (`html.rs`) nor any table.
//!
//! Log axes are drawn as linear axes over the logarithm of the value, with explicit
//! ticks: message size over log2(bytes), latency buckets over log10(ns), and the
//! percentile axis over log10(1 / (1 - p)), so 0%, 90%, 99%, 99.9%... are evenly spaced.
//!
//! Text and axes are drawn in a sentinel colour that `finish_svg` replaces with
//! `currentColor`, so the page's CSS decides their colour (light or dark theme); the
//! series colours ([`PALETTE`]) are mid-tones that read on both backgrounds. A scenario
//! that failed or has no finished run is never plotted: the caption names it instead.

use crate::measure::latency::LatencyKind;
use std::collections::{BTreeMap, BTreeSet};

use hdrhistogram::Histogram;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::prelude::*;

use crate::engine::EngineKind;
use crate::measure::headline::Quantity;
use crate::measure::histogram::{bucket_bounds, Bucket, Latency};
use crate::report::Report;
use crate::results::ScenarioResult;
use crate::scenario::WorkloadKind;
use crate::vocab::units::format_bytes;

/// Series colours (Tableau 20, the strong tones first, then the light ones): mid-tones
/// that read on white and on near-black.
pub const PALETTE: [&str; 20] = [
    "#4E79A7", "#F28E2B", "#E15759", "#76B7B2", "#59A14F", "#EDC948", "#B07AA1", "#FF9DA7",
    "#9C755F", "#BAB0AC", "#A0CBE8", "#FFBE7D", "#8CD17D", "#B6992D", "#499894", "#86BCB6",
    "#F1CE63", "#D37295", "#FABFD2", "#D4A6C8",
];

/// The colour text, axes and grid are drawn in before [`finish_svg`] makes it
/// `currentColor`.
const INK: RGBColor = RGBColor(0x0A, 0x0B, 0x0C);
/// [`INK`] as the SVG backend writes it.
const INK_HEX: &str = "#0A0B0C";

/// Chart width in SVG pixels.
const WIDTH: u32 = 820;
/// Height of a line chart.
const HEIGHT: u32 = 420;
/// The most sizes labelled on a size axis before some labels are left out.
const MAX_SIZE_TICKS: usize = 12;
/// Latency curves whose largest value is this many times their smallest get a log y axis.
const LOG_Y_RATIO: f64 = 30.0;
/// The most bar charts a throughput comparison gets (one per size).
const MAX_BAR_CHARTS: usize = 8;

/// One chart, ready for the page.
#[derive(Clone, Debug, Default)]
pub struct Chart {
    /// A stable identifier (`throughput-size`, `pingpong-round_trip-percentiles`...),
    /// the SVG's `data-chart` attribute.
    pub id: String,
    /// The heading.
    pub title: String,
    /// What the chart shows and how to read it (plain text; the page escapes it).
    pub caption: String,
    /// Series names and their colours, in drawing order.
    pub legend: Vec<(String, String)>,
    /// The SVG element (no XML prolog), text and axes in `currentColor`.
    pub svg: String,
    /// A heat map, drawn by the page as a table of coloured cells, in place of an SVG.
    pub heat: Option<HeatMap>,
    /// Lines under the drawing (a spread, the worst pairs), plain text.
    pub notes: Vec<String>,
}

/// A matrix of values drawn as a table whose cells are coloured from best (green) to
/// worst (red): the mesh's source x destination pairs. The page draws it; what is best
/// and on which scale is the document's business ([`HeatCell::Value`]'s `badness`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HeatMap {
    /// What the rows and columns are (the corner cell: `from \ to`).
    pub corner: String,
    /// The column headings.
    pub columns: Vec<String>,
    /// A row per source: its heading and a cell per column.
    pub rows: Vec<(String, Vec<HeatCell>)>,
    /// `data-*` attributes of the table (name without the prefix, value), for tools that
    /// read the page.
    pub data: Vec<(String, String)>,
    /// What the colours mean, in a sentence under the heading.
    pub scale: Option<String>,
}

/// One cell of a [`HeatMap`].
#[derive(Clone, Debug, PartialEq)]
pub enum HeatCell {
    /// Nothing to show (the diagonal: a host with itself).
    Blank,
    /// A value: its text, its exact value, and how bad it is from 0 (the best of the map)
    /// to 1 (the worst), which gives its colour.
    Value {
        /// As a person reads it.
        text: String,
        /// In base units.
        value: f64,
        /// 0 best, 1 worst.
        badness: f64,
    },
    /// The test failed: its text, and why (shown on hover).
    Failed {
        /// As a person reads it.
        text: String,
        /// Why it failed.
        why: String,
    },
    /// Not measured, or not this figure (`.`, `n/a`).
    Missing(String),
}

/// One line of a line chart: points in plot coordinates (already scaled).
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The legend text.
    pub label: String,
    /// `(x, y)` pairs, in increasing x.
    pub points: Vec<(f64, f64)>,
    /// Vertical whiskers `(x, low, high)`: the spread over runs at some points.
    pub whiskers: Vec<(f64, f64, f64)>,
}

/// One bar of a bar chart, in the chart's unit.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// The category.
    pub label: String,
    /// The bar's length.
    pub value: f64,
    /// The whisker, low and high end, if there is one.
    pub whisker: Option<(f64, f64)>,
    /// Its colour, an index into [`PALETTE`] (bars of one series share one).
    pub colour: usize,
}

/// An axis tick: where, and its label.
pub type Tick = (f64, String);

/// Whether a scenario has figures to plot: it did not fail and a run finished.
pub fn plottable(r: &ScenarioResult) -> bool {
    r.error.is_none() && !r.runs.is_empty()
}

/// Why a scenario is not plotted, as `tcp 64 KiB (failed)`.
fn not_plotted(r: &ScenarioResult) -> String {
    let why = if r.error.is_some() {
        "failed"
    } else {
        "no finished run"
    };
    format!("{} ({why})", r.label())
}

/// The caption's sentence about the scenarios left out, or nothing.
fn left_out(results: &[&ScenarioResult]) -> String {
    let names: Vec<String> = results
        .iter()
        .filter(|r| !plottable(r))
        .map(|r| not_plotted(r))
        .collect();
    if names.is_empty() {
        String::new()
    } else {
        format!(" Not plotted: {}.", names.join(", "))
    }
}

/// A scenario's name without its size (for series that run across sizes); the engine is
/// named whenever `engines_vary`, even the default one.
pub fn variant_label(r: &ScenarioResult, engines_vary: bool) -> String {
    let full = scenario_label(r, engines_vary);
    let head = format!("{} {}", r.transport, format_bytes(r.size_bytes));
    match full.strip_prefix(&head) {
        Some(rest) => format!("{}{rest}", r.transport),
        None => full,
    }
}

/// A scenario's name ([`ScenarioResult::label`]), naming the engine whenever
/// `engines_vary`.
pub fn scenario_label(r: &ScenarioResult, engines_vary: bool) -> String {
    let mut s = r.label();
    if engines_vary && r.engine == EngineKind::Blocking {
        let head = format!("{} {}", r.transport, format_bytes(r.size_bytes));
        s = s.replacen(&head, &format!("{head} (blocking)"), 1);
    }
    s
}

/// Whether the scenarios ran on more than one engine.
fn engines_vary(results: &[&ScenarioResult]) -> bool {
    results
        .iter()
        .map(|r| r.engine)
        .collect::<BTreeSet<_>>()
        .len()
        > 1
}

/// An SI scale for values up to `max`: the divisor and its prefix (`""`, `k`, `M`,
/// `G`, `T`), so the largest value reads between 1 and 1000.
pub fn si_scale(max: f64) -> (f64, &'static str) {
    const PREFIX: [&str; 5] = ["", "k", "M", "G", "T"];
    let mut div = 1.0;
    let mut i = 0;
    while max / div >= 1000.0 && i < PREFIX.len() - 1 {
        div *= 1000.0;
        i += 1;
    }
    (div, PREFIX[i])
}

/// The time unit for latencies up to `max_ns`: nanoseconds per unit and its symbol.
pub fn time_unit(max_ns: f64) -> (f64, &'static str) {
    if max_ns < 1e3 {
        (1.0, "ns")
    } else if max_ns < 1e6 {
        (1e3, "µs")
    } else if max_ns < 1e9 {
        (1e6, "ms")
    } else {
        (1e9, "s")
    }
}

/// A tick value without needless digits: `5`, `2.5`, `0.125`.
pub fn number(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let digits = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else if v.abs() >= 1.0 {
        2
    } else {
        // Three significant digits below 1: 0.125, 0.0001.
        ((-v.abs().log10()).floor() as usize + 3).min(12)
    };
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The label of the percentile tick `nines` decades along the axis: 0 -> `0%`,
/// 1 -> `90%`, 2 -> `99%`, 3 -> `99.9%`, 4 -> `99.99%`...
pub fn percentile_label(nines: u32) -> String {
    match nines {
        0 => "0%".into(),
        1 => "90%".into(),
        2 => "99%".into(),
        n => format!("99.{}%", "9".repeat(n as usize - 2)),
    }
}

/// The percentile axis' ticks up to `max_x` (log10 of 1 / (1 - p)): one per decade.
pub fn percentile_ticks(max_x: f64) -> Vec<Tick> {
    (0..=max_x.ceil().max(1.0) as u32)
        .map(|n| (f64::from(n), percentile_label(n)))
        .collect()
}

/// Where the share `below / total` of the samples (`below` under `total`) sits on the
/// percentile axis: log10(total / (total - below)), so 99 of 100 is exactly 2.
///
/// From the counts, never as -log10(1 - p): 0.99 is not exact in f64 and 1 - 0.99 is
/// 0.010000000000000009, which put 99% at 1.9999999999999996. Where a tick sits on a
/// half pixel that is the pixel before the tick's.
pub fn percentile_x(below: u64, total: u64) -> f64 {
    (total as f64 / (total - below) as f64).log10()
}

/// The size axis' ticks (log2 of bytes) for these sizes: each size, thinned to at most
/// `MAX_SIZE_TICKS` evenly picked ones.
pub fn size_ticks(sizes: &BTreeSet<u64>) -> Vec<Tick> {
    let all: Vec<u64> = sizes.iter().copied().filter(|&s| s > 0).collect();
    let step = all.len().div_ceil(MAX_SIZE_TICKS).max(1);
    all.iter()
        .enumerate()
        .filter(|(i, _)| i % step == 0 || *i == all.len() - 1)
        .map(|(_, &s)| ((s as f64).log2(), format_bytes(s)))
        .collect()
}

/// The decade ticks of a log10 axis from `lo` to `hi` (log10 of values in `unit`s),
/// labelled with the value in that unit: `1`, `10`, `100`.
pub fn decade_ticks(lo: f64, hi: f64, unit: f64) -> Vec<Tick> {
    let (a, b) = (lo.floor() as i32, hi.ceil() as i32);
    (a..=b)
        .map(|d| (f64::from(d), number(10f64.powi(d) / unit)))
        .collect()
}

/// The ticks of a log10 axis from `lo` to `hi` (log10 of values): each decade, and 2
/// and 5 times it when the axis spans three decades or fewer; labelled with the value.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<Tick> {
    let fine = hi - lo <= 3.0;
    let mut out = Vec::new();
    for d in lo.floor() as i32..=hi.ceil() as i32 {
        let base = 10f64.powi(d);
        for m in [1.0, 2.0, 5.0] {
            if m != 1.0 && !fine {
                continue;
            }
            let v = (m * base).log10();
            if v >= lo.floor() && v <= hi.ceil() {
                out.push((v, number(m * base)));
            }
        }
    }
    out
}

/// Throughput against message size: one series per scenario variant (transport, engine,
/// send method, buffers), points at each size, y in `unit` bit/s.
pub fn throughput_series(results: &[&ScenarioResult], unit: f64) -> Vec<Series> {
    let vary = engines_vary(results);
    let mut by: BTreeMap<String, (usize, Series)> = BTreeMap::new();
    for (i, r) in results.iter().enumerate() {
        let Some(bps) = r.bits_per_second.filter(|_| plottable(r)) else {
            continue;
        };
        let label = variant_label(r, vary);
        let e = by.entry(label.clone()).or_insert((
            i,
            Series {
                label,
                points: Vec::new(),
                whiskers: Vec::new(),
            },
        ));
        let x = (r.size_bytes.max(1) as f64).log2();
        e.1.points.push((x, bps / unit));
        if let Some(s) = r
            .statistics
            .as_ref()
            .filter(|s| s.bits_per_second.runs >= 2)
        {
            e.1.whiskers.push((
                x,
                s.bits_per_second.min / unit,
                s.bits_per_second.max / unit,
            ));
        }
    }
    let mut out: Vec<(usize, Series)> = by
        .into_values()
        .map(|(first, mut s)| {
            s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
            (first, s)
        })
        .collect();
    out.sort_by_key(|(first, _)| *first);
    out.into_iter().map(|(_, s)| s).collect()
}

/// The percentile curve of a full HDR histogram: (log10 of 1 / (1 - p), ns) every 0.02
/// decade, up to the resolution its sample count allows (at most 99.9999%).
pub fn percentile_curve_hdr(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let max_x = (h.len() as f64).log10().clamp(1.0, 6.0);
    let steps = (max_x / 0.02).round() as u32;
    (0..=steps)
        .map(|i| {
            let x = f64::from(i) * 0.02;
            let p = 1.0 - 10f64.powf(-x);
            (x, h.value_at_quantile(p) as f64)
        })
        .collect()
}

/// The percentile curve of a loaded report, which holds no full histogram: the summary
/// percentiles plus each bucket's bound at its cumulative share, sorted, never
/// decreasing, up to the resolution of the sample count (the max at 1 - 1/count).
///
/// The curve goes through every summary percentile the report holds, each exactly at its
/// tick: 90%, 99%, 99.9% and 99.99% at 1, 2, 3 and 4 (whole decades of 1/(1-p), written
/// as such: computed from 0.99 the 99% point fell a pixel left of its tick on an axis
/// from 0% to 99.99%, 1,001 to 10,000 samples, and the tick's pixel showed only the next
/// bucket's bound), the median at log10(2).
pub fn percentile_curve_summary(lat: &Latency, buckets: &[Bucket]) -> Vec<(f64, f64)> {
    if lat.count == 0 {
        return Vec::new();
    }
    let max_x = (lat.count as f64).log10().max(1.0);
    let mut summary: Vec<(f64, f64)> = [
        (0.0, lat.min_ns),
        (2f64.log10(), lat.p50_ns),
        (1.0, lat.p90_ns),
        (2.0, lat.p99_ns),
        (3.0, lat.p99_9_ns),
        (4.0, lat.p99_99_ns),
    ]
    .into_iter()
    .filter(|&(x, _)| x < max_x - 1e-9)
    .map(|(x, ns)| (x, ns as f64))
    .collect();
    summary.push((max_x, lat.max_ns as f64));
    let mut points = summary.clone();
    let total: u64 = buckets.iter().map(|b| b.count).sum();
    let mut below = 0u64;
    for b in buckets {
        below += b.count;
        if below == total || b.count == 0 {
            continue;
        }
        let x = percentile_x(below, total);
        // A bucket's point says that this share of the samples is at most its bound;
        // the summary percentile at or past this share is at most its own value, so it
        // bounds the point too, and is exact where the bucket only bounds (the bound may
        // be 26% above the bucket's samples). A bucket point above the next percentile
        // would lift that percentile off its value (the curve never decreases): the
        // point is capped at it, and left out at a percentile's own share.
        let Some(&(at, cap)) = summary.iter().find(|s| s.0 >= x) else {
            continue;
        };
        if at > x && x < max_x - 1e-9 {
            points.push((x, (b.le_ns as f64).min(cap)));
        }
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut top = 0.0f64;
    for p in &mut points {
        top = top.max(p.1);
        p.1 = top;
    }
    points
}

/// A latency distribution's buckets as a step outline on a log10(ns) axis:
/// (log10 ns, share of samples in %), from the floor of the first bucket to the last
/// bound and back to zero.
pub fn histogram_steps(buckets: &[Bucket]) -> Vec<(f64, f64)> {
    let total: u64 = buckets.iter().map(|b| b.count).sum();
    let Some(first) = buckets.first().filter(|_| total > 0) else {
        return Vec::new();
    };
    let floor = bucket_bounds()
        .take_while(|&b| b < first.le_ns)
        .last()
        .unwrap_or(first.le_ns * 4 / 5)
        .max(1);
    let mut x = (floor as f64).log10();
    let mut out = vec![(x, 0.0)];
    for b in buckets {
        let share = b.count as f64 * 100.0 / total as f64;
        out.push((x, share));
        x = (b.le_ns.max(1) as f64).log10();
        out.push((x, share));
    }
    out.push((x, 0.0));
    out
}

/// Bars of a figure per scenario (`value` the median, `spread` the min and max over
/// runs), scaled by `unit`, whiskers only with two runs or more.
fn bars(
    results: &[&ScenarioResult],
    unit: f64,
    value: impl Fn(&ScenarioResult) -> Option<f64>,
    spread: impl Fn(&ScenarioResult) -> Option<(usize, f64, f64)>,
) -> Vec<Bar> {
    let vary = engines_vary(results);
    results
        .iter()
        .filter(|r| plottable(r))
        .enumerate()
        .filter_map(|(i, r)| {
            let v = value(r)?;
            Some(Bar {
                colour: i,
                label: scenario_label(r, vary),
                value: v / unit,
                whisker: spread(r)
                    .filter(|&(runs, _, _)| runs >= 2)
                    .map(|(_, lo, hi)| (lo / unit, hi / unit)),
            })
        })
        .collect()
}

/// The caption's sentence about whiskers.
fn whisker_note(results: &[&ScenarioResult]) -> String {
    let runs: BTreeSet<u32> = results
        .iter()
        .filter(|r| plottable(r))
        .map(|r| r.options.runs)
        .collect();
    if runs.iter().any(|&n| n >= 2) {
        "Bars: the median over runs; whiskers: the lowest to the highest run.".into()
    } else {
        "Bars: one run each (no whiskers; --runs 3 or more shows the spread).".into()
    }
}

/// The charts for a report, in page order: per workload, throughput (stream), message
/// rate and loss, then each latency distribution's percentiles and histogram.
pub fn charts(report: &Report) -> Vec<Chart> {
    let mut out = Vec::new();
    for w in WorkloadKind::ALL {
        let results: Vec<&ScenarioResult> =
            report.results.iter().filter(|r| r.workload == w).collect();
        if results.is_empty() {
            continue;
        }
        // Bulk throughput against size, or operations per second as bars.
        if crate::workload::spec(w).headline().quantity == Quantity::Throughput {
            out.extend(throughput_charts(&results));
        } else {
            out.extend(rate_charts(w, &results));
        }
        out.extend(latency_charts(w, &results));
    }
    out
}

/// The distinct values of an axis other than transport, size and buffers that varies:
/// engine, send and receive method.
fn other_axes_vary(results: &[&ScenarioResult]) -> bool {
    let distinct = |f: &dyn Fn(&ScenarioResult) -> String| {
        results.iter().map(|r| f(r)).collect::<BTreeSet<_>>().len() > 1
    };
    distinct(&|r| r.engine.to_string())
        || distinct(&|r| format!("{:?}", r.options.send))
        || distinct(&|r| format!("{:?}", r.options.recv))
}

fn throughput_charts(results: &[&ScenarioResult]) -> Vec<Chart> {
    let ok: Vec<&ScenarioResult> = results.iter().copied().filter(|r| plottable(r)).collect();
    let sizes: BTreeSet<u64> = ok.iter().map(|r| r.size_bytes).collect();
    let max = ok
        .iter()
        .filter_map(|r| {
            r.statistics
                .as_ref()
                .map(|s| s.bits_per_second.max)
                .or(r.bits_per_second)
        })
        .fold(0.0, f64::max);
    let (unit, prefix) = si_scale(max);
    let y_desc = format!("throughput ({prefix}bit/s)");
    let mut out = Vec::new();
    if sizes.len() >= 2 {
        let series = throughput_series(results, unit);
        let caption = format!(
            "Received payload per second (SI: 1 Gbit/s = 10^9 bit/s), the median over runs, \
             against the message size (log scale); one line per transport and variant.{}{}",
            if series.iter().any(|s| !s.whiskers.is_empty()) {
                " Whiskers: the lowest to the highest run."
            } else {
                ""
            },
            left_out(results)
        );
        out.push(line_chart(LineSpec {
            id: "throughput-size".into(),
            title: "Throughput against message size".into(),
            caption,
            x_desc: "message size (bytes, log scale)".into(),
            y_desc: y_desc.clone(),
            x_ticks: size_ticks(&sizes),
            series,
            y_from_zero: true,
            y_ticks: None,
            markers: true,
        }));
    }
    if sizes.len() == 1 || (other_axes_vary(&ok) && !sizes.is_empty()) {
        let many = sizes.len() > 1;
        for &size in sizes.iter().take(MAX_BAR_CHARTS) {
            let at: Vec<&ScenarioResult> = results
                .iter()
                .copied()
                .filter(|r| r.size_bytes == size)
                .collect();
            let b = bars(
                &at,
                unit,
                |r| r.bits_per_second,
                |r| {
                    r.statistics.as_ref().map(|s| {
                        (
                            s.bits_per_second.runs,
                            s.bits_per_second.min,
                            s.bits_per_second.max,
                        )
                    })
                },
            );
            let (id, title) = if many {
                (
                    format!("throughput-bars-{size}"),
                    format!("Throughput at {}", format_bytes(size)),
                )
            } else {
                (
                    "throughput-bars".to_string(),
                    format!("Throughput at {}", format_bytes(size)),
                )
            };
            out.push(bar_chart(BarSpec {
                id,
                title,
                caption: format!(
                    "Received payload per second (SI: 1 Gbit/s = 10^9 bit/s), {} messages. {}{}",
                    format_bytes(size),
                    whisker_note(&at),
                    left_out(if many { &at } else { results })
                ),
                x_desc: y_desc.clone(),
                bars: b,
            }));
        }
    }
    if out.is_empty() {
        out.push(nothing_chart(
            "throughput",
            "Throughput",
            &format!("No stream scenario finished.{}", left_out(results)),
        ));
    }
    out
}

/// What the bars of [`bars_of`] measure, and so the unit their axis reads in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    /// Bits per second (SI).
    BitsPerSecond,
    /// Events per second (SI), named (`requests`, `round trips`).
    PerSecond(&'static str),
    /// Nanoseconds, shown in the time unit that reads well.
    Nanoseconds,
    /// Bytes (binary: KiB, MiB, GiB).
    Bytes,
    /// A count of things, named.
    Count(&'static str),
}

/// One bar of [`bars_of`]: its label, its value in the axis's base unit, and its
/// whisker's low and high ends, if it has one.
pub type Labelled = (String, f64, Option<(f64, f64)>);

/// A horizontal bar chart of `bars` (each its label, value in the axis's base unit and
/// optional whisker), each bar its own colour, on an axis whose unit reads well; a
/// chart with nothing to draw says so.
pub fn bars_of(id: &str, title: &str, caption: &str, axis: Axis, bars: Vec<Labelled>) -> Chart {
    let max = bars
        .iter()
        .map(|(_, v, w)| w.map_or(*v, |(_, hi)| hi.max(*v)))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let (unit, x_desc) = match axis {
        Axis::BitsPerSecond => {
            let (u, p) = si_scale(max);
            (u, format!("throughput ({p}bit/s)"))
        }
        Axis::PerSecond(what) => {
            let (u, p) = si_scale(max);
            let p = if p.is_empty() {
                String::new()
            } else {
                format!("{p} ")
            };
            (u, format!("{what} per second ({p}{what}/s)"))
        }
        Axis::Nanoseconds => {
            let (u, sym) = time_unit(max);
            (u, format!("time ({sym})"))
        }
        Axis::Bytes => {
            let (u, sym) = match max {
                m if m >= (1u64 << 30) as f64 => ((1u64 << 30) as f64, "GiB"),
                m if m >= (1u64 << 20) as f64 => ((1u64 << 20) as f64, "MiB"),
                m if m >= 1024.0 => (1024.0, "KiB"),
                _ => (1.0, "B"),
            };
            (u, format!("bytes ({sym})"))
        }
        Axis::Count(what) => (1.0, what.to_string()),
    };
    let bars = (bars.into_iter().enumerate())
        .filter(|(_, (_, v, _))| v.is_finite())
        .map(|(i, (label, value, whisker))| Bar {
            label,
            value: value / unit,
            whisker: whisker.map(|(lo, hi)| (lo / unit, hi / unit)),
            colour: i,
        })
        .collect();
    bar_chart(BarSpec {
        id: id.into(),
        title: title.into(),
        caption: caption.into(),
        x_desc,
        bars,
    })
}

fn rate_charts(w: WorkloadKind, results: &[&ScenarioResult]) -> Vec<Chart> {
    let max = results
        .iter()
        .filter(|r| plottable(r))
        .filter_map(|r| {
            r.statistics
                .as_ref()
                .map(|s| s.messages_per_second.max)
                .or(r.messages_per_second)
        })
        .fold(0.0, f64::max);
    let (unit, prefix) = si_scale(max);
    let op = crate::workload::spec(w).operation();
    let b = bars(
        results,
        unit,
        |r| r.messages_per_second,
        |r| {
            r.statistics.as_ref().map(|s| {
                (
                    s.messages_per_second.runs,
                    s.messages_per_second.min,
                    s.messages_per_second.max,
                )
            })
        },
    );
    let mut out = vec![bar_chart(BarSpec {
        id: format!("{w}-rate"),
        title: format!("{} per second ({w})", capitalise(op)),
        caption: format!(
            "Completed {op} per second (SI: 1 k/s = 1000/s). {}{}",
            whisker_note(results),
            left_out(results)
        ),
        x_desc: format!(
            "{op} per second ({}{op}/s)",
            if prefix.is_empty() {
                String::new()
            } else {
                format!("{prefix} ")
            }
        ),
        bars: b,
    })];
    if crate::workload::spec(w).counts_loss()
        && results.iter().any(|r| r.delivered_fraction.is_some())
    {
        let vary = engines_vary(results);
        let loss: Vec<Bar> = results
            .iter()
            .filter(|r| plottable(r))
            .enumerate()
            .filter_map(|(i, r)| {
                Some(Bar {
                    colour: i,
                    label: scenario_label(r, vary),
                    value: (1.0 - r.delivered_fraction?).max(0.0) * 100.0,
                    whisker: None,
                })
            })
            .collect();
        let transports: Vec<String> = results
            .iter()
            .filter(|r| plottable(r) && r.delivered_fraction.is_none())
            .map(|r| r.label())
            .collect();
        let reliable = if transports.is_empty() {
            String::new()
        } else {
            format!(" Not counted (cannot lose): {}.", transports.join(", "))
        };
        out.push(bar_chart(BarSpec {
            id: "rate-loss".into(),
            title: "Messages lost (rate)".into(),
            caption: format!(
                "Messages sent but never received, as a share of those sent (1 - the delivered \
                 fraction), over all runs.{reliable}{}",
                left_out(results)
            ),
            x_desc: "lost (% of messages sent)".into(),
            bars: loss,
        }));
    }
    out
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// The latency distributions the results have, in the order the page shows them.
fn latency_kinds(results: &[&ScenarioResult]) -> Vec<LatencyKind> {
    LatencyKind::ALL
        .into_iter()
        .filter(|k| {
            (results.iter()).any(|r| r.latencies.contains_key(k) || r.histograms.contains_key(k))
        })
        .collect()
}

fn latency_charts(w: WorkloadKind, results: &[&ScenarioResult]) -> Vec<Chart> {
    let vary = engines_vary(results);
    let mut out = Vec::new();
    for name in latency_kinds(results) {
        // Percentiles, from the full histogram when the run is live.
        let mut raw: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        let mut hdr = false;
        let mut buckets: Vec<(String, Vec<Bucket>)> = Vec::new();
        for r in results.iter().filter(|r| plottable(r)) {
            let label = scenario_label(r, vary);
            let curve = if let Some(h) = r.histograms.get(&name) {
                hdr = true;
                percentile_curve_hdr(h)
            } else if let Some(lat) = r.latencies.get(&name) {
                percentile_curve_summary(lat, r.latency_buckets.get(&name).map_or(&[], |b| b))
            } else {
                continue;
            };
            if !curve.is_empty() {
                raw.push((label.clone(), curve));
            }
            let b = match (r.latency_buckets.get(&name), r.histograms.get(&name)) {
                (Some(b), _) if !b.is_empty() => b.clone(),
                (_, Some(h)) => crate::measure::histogram::buckets(h),
                _ => Vec::new(),
            };
            if !b.is_empty() {
                buckets.push((label, b));
            }
        }
        let max_ns = raw
            .iter()
            .flat_map(|(_, c)| c.iter().map(|p| p.1))
            .fold(0.0, f64::max);
        let (unit, sym) = time_unit(max_ns);
        let max_x = raw
            .iter()
            .flat_map(|(_, c)| c.iter().map(|p| p.0))
            .fold(1.0, f64::max);
        let min_ns = raw
            .iter()
            .flat_map(|(_, c)| c.iter().map(|p| p.1))
            .filter(|&v| v > 0.0)
            .fold(f64::INFINITY, f64::min);
        // A tail far above the body squashes the body to a line on a linear axis.
        let log_y = min_ns.is_finite() && max_ns / min_ns > LOG_Y_RATIO;
        let source = if hdr {
            "from the full HDR histograms (3 significant digits)"
        } else {
            "from the report's summary percentiles and histogram buckets (between them, an \
             upper bound)"
        };
        let title = name.title();
        out.push(line_chart(LineSpec {
            id: format!("{w}-{name}-percentiles"),
            title: format!("{title}: percentiles ({w})"),
            caption: format!(
                "The latency under which each share of samples falls, {source}; the x axis \
                 stretches the tail (log scale of 1/(1-p)).{}",
                left_out(results)
            ),
            x_desc: "percentile (log scale of 1/(1-p))".into(),
            y_desc: if log_y {
                format!("latency ({sym}, log scale)")
            } else {
                format!("latency ({sym})")
            },
            x_ticks: percentile_ticks(max_x),
            series: raw
                .into_iter()
                .map(|(label, c)| Series {
                    label,
                    whiskers: Vec::new(),
                    points: c
                        .into_iter()
                        .map(|(x, y)| {
                            if log_y {
                                (x, (y.max(min_ns) / unit).log10())
                            } else {
                                (x, y / unit)
                            }
                        })
                        .collect(),
                })
                .collect(),
            y_from_zero: !log_y,
            y_ticks: log_y.then(|| log_ticks((min_ns / unit).log10(), (max_ns / unit).log10())),
            markers: false,
        }));
        // Histogram, over the buckets' bounds.
        let steps: Vec<(String, Vec<(f64, f64)>)> = buckets
            .iter()
            .map(|(l, b)| (l.clone(), histogram_steps(b)))
            .collect();
        let lo = steps
            .iter()
            .filter_map(|(_, s)| s.first().map(|p| p.0))
            .fold(f64::INFINITY, f64::min);
        let hi = steps
            .iter()
            .filter_map(|(_, s)| s.last().map(|p| p.0))
            .fold(f64::NEG_INFINITY, f64::max);
        if steps.is_empty() || !lo.is_finite() || !hi.is_finite() {
            out.push(nothing_chart(
                &format!("{w}-{name}-histogram"),
                &format!("{title}: histogram ({w})"),
                "No histogram buckets in this report (reports before schema version 5 lack \
                 latency_buckets).",
            ));
            continue;
        }
        let (hunit, hsym) = time_unit(10f64.powf(hi));
        let unit_log = hunit.log10();
        out.push(line_chart(LineSpec {
            id: format!("{w}-{name}-histogram"),
            title: format!("{title}: histogram ({w})"),
            caption: format!(
                "Share of samples in each bucket (R10 bounds, about 26% apart) on a log scale \
                 of latency, summed over all runs.{}",
                left_out(results)
            ),
            x_desc: format!("latency ({hsym}, log scale)"),
            y_desc: "share of samples (%)".into(),
            x_ticks: decade_ticks(lo - unit_log, hi - unit_log, 1.0),
            series: steps
                .into_iter()
                .map(|(label, s)| Series {
                    label,
                    whiskers: Vec::new(),
                    points: s.into_iter().map(|(x, y)| (x - unit_log, y)).collect(),
                })
                .collect(),
            y_from_zero: true,
            y_ticks: None,
            markers: false,
        }));
    }
    out
}

/// What a line chart draws.
struct LineSpec {
    id: String,
    title: String,
    caption: String,
    x_desc: String,
    y_desc: String,
    x_ticks: Vec<Tick>,
    series: Vec<Series>,
    y_from_zero: bool,
    /// Explicit y ticks (a log axis); `None`: nice linear ticks.
    y_ticks: Option<Vec<Tick>>,
    markers: bool,
}

/// What a horizontal bar chart draws.
pub struct BarSpec {
    /// The chart's id in the page.
    pub id: String,
    /// Its title.
    pub title: String,
    /// The caption under it.
    pub caption: String,
    /// What the x axis measures, with its unit.
    pub x_desc: String,
    /// The bars, top to bottom.
    pub bars: Vec<Bar>,
}

/// A chart with nothing to draw: a caption and no SVG.
fn nothing_chart(id: &str, title: &str, caption: &str) -> Chart {
    Chart {
        id: id.into(),
        title: title.into(),
        caption: caption.into(),
        ..Chart::default()
    }
}

fn colour(i: usize) -> RGBColor {
    let hex = PALETTE[i % PALETTE.len()].trim_start_matches('#');
    let byte = |k: usize| u8::from_str_radix(&hex[k..k + 2], 16).unwrap_or(0x80);
    RGBColor(byte(0), byte(2), byte(4))
}

/// "Nice" y ticks from 0 (or `lo`) to at least `hi`: 1, 2 or 5 times a power of ten apart.
pub fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| span / s <= 6.0)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).floor() as i64;
    let last = (hi / step).ceil() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// Make the drawn ink follow the page's text colour, and tag the SVG.
fn finish_svg(svg: &str, id: &str, title: &str) -> String {
    let tagged = svg
        .replace(INK_HEX, "currentColor")
        .replace(&INK_HEX.to_ascii_lowercase(), "currentColor");
    let attrs = format!(
        "<svg data-chart=\"{}\" role=\"img\" aria-label=\"{}\" ",
        crate::report::html::escape(id),
        crate::report::html::escape(title)
    );
    let tagged = tagged.replacen("<svg ", &attrs, 1);
    match tagged.find("<svg") {
        Some(i) => tagged[i..].trim_end().to_string(),
        None => tagged,
    }
}

/// A linear axis from `lo` to `hi` with exactly the given ticks (plotters' own f64 axis
/// picks its ticks itself).
struct Ticked {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Ticked {
    fn new(lo: f64, hi: f64, ticks: Vec<f64>) -> Ticked {
        let ticks = ticks
            .into_iter()
            .filter(|t| *t >= lo - 1e-9 && *t <= hi + 1e-9)
            .collect();
        Ticked { lo, hi, ticks }
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.hi - self.lo;
        if span <= 0.0 {
            return (limit.0 + limit.1) / 2;
        }
        let f = (value - self.lo) / span;
        limit.0 + (f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn line_chart(spec: LineSpec) -> Chart {
    let legend = legend(spec.series.iter().map(|s| s.label.clone()));
    if spec.series.iter().all(|s| s.points.is_empty()) {
        return nothing_chart(
            &spec.id,
            &spec.title,
            &format!("Nothing to plot. {}", spec.caption),
        );
    }
    let mut svg = String::new();
    let drawn = draw_lines(&mut svg, &spec);
    drawn_chart(
        drawn.map(|()| svg),
        spec.id,
        spec.title,
        spec.caption,
        legend,
    )
}

/// A chart from what its drawing produced: the SVG made ready for the page, or, if
/// plotters failed, a chart without one that says why.
fn drawn_chart<E: std::fmt::Display>(
    drawn: Result<String, E>,
    id: String,
    title: String,
    caption: String,
    legend: Vec<(String, String)>,
) -> Chart {
    match drawn {
        Ok(svg) => Chart {
            svg: finish_svg(&svg, &id, &title),
            id,
            title,
            caption,
            legend,
            ..Chart::default()
        },
        Err(e) => nothing_chart(&id, &title, &format!("Chart failed: {e}")),
    }
}

/// A legend of `labels` in the palette's colours, in order.
pub fn legend(labels: impl Iterator<Item = String>) -> Vec<(String, String)> {
    labels
        .enumerate()
        .map(|(i, l)| (l, PALETTE[i % PALETTE.len()].to_string()))
        .collect()
}

fn draw_lines(svg: &mut String, spec: &LineSpec) -> DrawResult {
    let xs = spec
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = spec.series.iter().flat_map(|s| {
        s.points
            .iter()
            .map(|p| p.1)
            .chain(s.whiskers.iter().map(|w| w.2))
    });
    let tick_xs = spec.x_ticks.iter().map(|t| t.0);
    let (x_lo, x_hi) = xs
        .chain(tick_xs)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
    let pad = ((x_hi - x_lo) * 0.03).max(0.05);
    let (x_lo, x_hi) = (x_lo - pad, x_hi + pad);
    let (mut y_lo, mut y_hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
        (a.min(y), b.max(y))
    });
    if spec.y_from_zero {
        y_lo = y_lo.min(0.0);
    }
    if y_hi <= y_lo {
        y_hi = y_lo + 1.0;
    }
    let y_labels: Vec<Tick> = match &spec.y_ticks {
        Some(t) => t.clone(),
        None => linear_ticks(y_lo, y_hi * 1.05)
            .into_iter()
            .map(|v| (v, number(v)))
            .collect(),
    };
    let y_ticks: Vec<f64> = y_labels.iter().map(|t| t.0).collect();
    let y_lo = y_ticks.first().copied().unwrap_or(y_lo).min(y_lo);
    let y_hi = y_ticks.last().copied().unwrap_or(y_hi).max(y_hi);
    let labels: Vec<(f64, String)> = spec.x_ticks.clone();
    let x_fmt = move |v: &f64| {
        labels
            .iter()
            .find(|(x, _)| (x - v).abs() < 1e-9)
            .map(|(_, l)| l.clone())
            .unwrap_or_default()
    };
    let root = SVGBackend::with_string(svg, (WIDTH, HEIGHT)).into_drawing_area();
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(
            Ticked::new(x_lo, x_hi, spec.x_ticks.iter().map(|t| t.0).collect()),
            Ticked::new(y_lo, y_hi, y_ticks),
        )?;
    let y_fmt = move |v: &f64| {
        y_labels
            .iter()
            .find(|(y, _)| (y - v).abs() < 1e-9)
            .map(|(_, l)| l.clone())
            .unwrap_or_default()
    };
    chart
        .configure_mesh()
        .x_desc(spec.x_desc.as_str())
        .y_desc(spec.y_desc.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .axis_style(INK)
        .bold_line_style(INK.mix(0.12))
        .light_line_style(TRANSPARENT)
        .label_style(("sans-serif", 16).into_font().color(&INK))
        .axis_desc_style(("sans-serif", 17).into_font().color(&INK))
        .draw()?;
    for (i, s) in spec.series.iter().enumerate() {
        let c = colour(i);
        chart.draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))?;
        for &(x, lo, hi) in &s.whiskers {
            let cap = (x_hi - x_lo) * 0.008;
            for line in [
                vec![(x, lo), (x, hi)],
                vec![(x - cap, lo), (x + cap, lo)],
                vec![(x - cap, hi), (x + cap, hi)],
            ] {
                chart.draw_series(std::iter::once(PathElement::new(line, c.stroke_width(1))))?;
            }
        }
        if spec.markers {
            chart.draw_series(
                s.points
                    .iter()
                    .map(|&p| Circle::new(p, 4, c.filled().stroke_width(1))),
            )?;
        }
    }
    root.present()?;
    Ok(())
}

/// A horizontal bar chart of `spec`; no bars, a caption alone.
pub fn bar_chart(spec: BarSpec) -> Chart {
    if spec.bars.is_empty() {
        return nothing_chart(
            &spec.id,
            &spec.title,
            &format!("Nothing to plot. {}", spec.caption),
        );
    }
    let mut svg = String::new();
    let drawn = draw_bars(&mut svg, &spec);
    drawn_chart(
        drawn.map(|()| svg),
        spec.id,
        spec.title,
        spec.caption,
        Vec::new(),
    )
}

fn draw_bars(svg: &mut String, spec: &BarSpec) -> DrawResult {
    let n = spec.bars.len();
    let longest = spec
        .bars
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(4);
    let label_px = (longest as u32 * 8 + 16).clamp(60, 360);
    let height = (n as u32 * 30 + 100).max(160);
    let hi = spec
        .bars
        .iter()
        .map(|b| b.whisker.map_or(b.value, |w| w.1.max(b.value)))
        .fold(0.0, f64::max);
    let x_ticks = linear_ticks(0.0, if hi > 0.0 { hi * 1.05 } else { 1.0 });
    let x_hi = x_ticks.last().copied().unwrap_or(1.0);
    // Category i is drawn from the top: row n-1-i, its tick at the middle of the row.
    let rows: Vec<f64> = (0..n).map(|i| (n - 1 - i) as f64 + 0.5).collect();
    let names: Vec<String> = spec.bars.iter().map(|b| b.label.clone()).collect();
    let y_fmt = |v: &f64| {
        let row = (v - 0.5).round();
        if row < 0.0 || (v - 0.5 - row).abs() > 1e-9 {
            return String::new();
        }
        names
            .get(n - 1 - (row as usize).min(n - 1))
            .cloned()
            .unwrap_or_default()
    };
    let root = SVGBackend::with_string(svg, (WIDTH, height)).into_drawing_area();
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(label_px)
        .build_cartesian_2d(
            Ticked::new(0.0, x_hi, x_ticks),
            Ticked::new(0.0, n as f64, rows),
        )?;
    let x_fmt = |v: &f64| number(*v);
    chart
        .configure_mesh()
        .x_desc(spec.x_desc.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .disable_y_mesh()
        .axis_style(INK)
        .bold_line_style(INK.mix(0.12))
        .light_line_style(TRANSPARENT)
        .label_style(("sans-serif", 16).into_font().color(&INK))
        .axis_desc_style(("sans-serif", 17).into_font().color(&INK))
        .draw()?;
    for (i, b) in spec.bars.iter().enumerate() {
        let c = colour(b.colour);
        let row = (n - 1 - i) as f64;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(0.0, row + 0.2), (b.value, row + 0.8)],
            c.filled(),
        )))?;
        if let Some((lo, whi)) = b.whisker {
            let mid = row + 0.5;
            let ink = INK.stroke_width(2);
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(lo, mid), (whi, mid)],
                ink,
            )))?;
            for end in [lo, whi] {
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(end, row + 0.35), (end, row + 0.65)],
                    ink,
                )))?;
            }
        }
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drawing_that_failed_gives_a_chart_that_says_so() {
        let legend = vec![("tcp".to_string(), "#4e79a7".to_string())];
        let ok = drawn_chart::<String>(
            Ok("<svg width=\"10\"></svg>".into()),
            "x-id".into(),
            "X".into(),
            "how to read it".into(),
            legend.clone(),
        );
        assert!(ok.svg.starts_with("<svg data-chart=\"x-id\""), "{}", ok.svg);
        assert_eq!(
            (ok.caption.as_str(), ok.legend.len()),
            ("how to read it", 1)
        );
        let failed = drawn_chart(
            Err("no room"),
            "x-id".into(),
            "X".into(),
            "how".into(),
            legend,
        );
        assert!(failed.svg.is_empty());
        assert_eq!(failed.caption, "Chart failed: no room");
        assert!(failed.legend.is_empty());
    }
    use crate::report::sample;

    fn ids(report: &Report) -> Vec<String> {
        charts(report).into_iter().map(|c| c.id).collect()
    }

    #[test]
    fn percentile_ticks_are_labelled_by_their_nines() {
        let ticks = percentile_ticks(4.0);
        let labels: Vec<&str> = ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["0%", "90%", "99%", "99.9%", "99.99%"]);
        assert_eq!(ticks[3].0, 3.0);
        // Exactly on the ticks: 1 - 0.99 is not 0.01 in f64, 1 out of 100 is.
        assert_eq!(percentile_x(999, 1000), 3.0);
        assert_eq!(percentile_x(99, 100), 2.0);
        assert_eq!(percentile_x(9_900, 10_000), 2.0);
        assert_eq!(percentile_x(9, 10), 1.0);
        assert!((percentile_x(1, 2) - 2f64.log10()).abs() < 1e-15);
        // A fraction of a decade rounds up to the next tick.
        assert_eq!(percentile_ticks(2.3).len(), 4);
    }

    #[test]
    fn size_ticks_sit_at_log2_of_each_size_with_byte_labels() {
        let sizes: BTreeSet<u64> = [64, 4096, 65536].into_iter().collect();
        let ticks = size_ticks(&sizes);
        assert_eq!(
            ticks,
            vec![
                (6.0, "64 B".to_string()),
                (12.0, "4 KiB".to_string()),
                (16.0, "64 KiB".to_string())
            ]
        );
        let many: BTreeSet<u64> = (0..30).map(|i| 1u64 << i).collect();
        let thin = size_ticks(&many);
        assert!(thin.len() <= MAX_SIZE_TICKS + 1, "{thin:?}");
        assert_eq!(thin.last().unwrap().1, "512 MiB");
    }

    #[test]
    fn decade_ticks_label_powers_of_ten_in_the_unit() {
        let t = decade_ticks(3.2, 5.1, 1.0);
        let labels: Vec<&str> = t.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["1000", "10000", "100000", "1000000"]);
        let t = decade_ticks(-0.5, 1.5, 1.0);
        let labels: Vec<&str> = t.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["0.1", "1", "10", "100"]);
    }

    #[test]
    fn log_ticks_add_2_and_5_on_short_axes_only() {
        let labels = |t: Vec<Tick>| t.into_iter().map(|t| t.1).collect::<Vec<_>>();
        assert_eq!(
            labels(log_ticks(1.2, 2.5)),
            ["10", "20", "50", "100", "200", "500", "1000"]
        );
        assert_eq!(
            labels(log_ticks(-1.0, 3.5)),
            ["0.1", "1", "10", "100", "1000", "10000"]
        );
        assert!((log_ticks(0.0, 1.0)[1].0 - 2f64.log10()).abs() < 1e-12);
    }

    #[test]
    fn a_long_tail_puts_the_percentiles_on_a_log_latency_axis() {
        let mut report = sample::pingpong();
        let percentiles = |r: &Report| {
            charts(r)
                .into_iter()
                .find(|c| c.id.ends_with("percentiles"))
                .unwrap()
                .svg
        };
        // The sample's max is 20 times its min: linear.
        assert!(percentiles(&report).contains("latency (µs)\n"));
        report.results[0]
            .latencies
            .get_mut(&crate::measure::latency::LatencyKind::RoundTrip)
            .unwrap()
            .max_ns = 15_000_000;
        assert!(percentiles(&report).contains("latency (ms, log scale)\n"));
    }

    #[test]
    fn scales_pick_si_prefixes_and_time_units() {
        assert_eq!(si_scale(40e9), (1e9, "G"));
        assert_eq!(si_scale(999.0), (1.0, ""));
        assert_eq!(si_scale(1500.0), (1e3, "k"));
        assert_eq!(time_unit(800.0), (1.0, "ns"));
        assert_eq!(time_unit(150_000.0), (1e3, "µs"));
        assert_eq!(time_unit(2e6), (1e6, "ms"));
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(40.0), "40");
        assert_eq!(number(0.125), "0.125");
        assert_eq!(number(0.0001), "0.0001");
        assert_eq!(number(0.00025), "0.00025");
        assert_eq!(
            linear_ticks(0.0, 42.0),
            vec![0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
        );
    }

    #[test]
    fn a_stream_sweep_gets_a_line_per_transport_with_a_point_per_size() {
        let report = sample::stream_sweep();
        let results: Vec<&ScenarioResult> = report.results.iter().collect();
        let series = throughput_series(&results, 1e9);
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].label, "tcp");
        assert_eq!(series[0].points, vec![(10.0, 5.0), (16.0, 30.0)]);
        assert!(series[0].whiskers.is_empty(), "one run: no whiskers");
        assert_eq!(series[1].label, "unix");
        assert_eq!(ids(&report), ["throughput-size"]);
    }

    #[test]
    fn a_sweep_over_several_runs_gets_whiskers_at_each_point() {
        let mut report = sample::stream_sweep();
        let spread = crate::measure::stats::Summary::of(&[4e9, 5e9, 7e9]).unwrap();
        report.results[0].statistics = Some(crate::results::Statistics {
            bits_per_second: spread.clone(),
            messages_per_second: spread,
        });
        let results: Vec<&ScenarioResult> = report.results.iter().collect();
        let series = throughput_series(&results, 1e9);
        assert_eq!(series[0].whiskers, vec![(10.0, 4.0, 7.0)]);
        let chart = &charts(&report)[0];
        assert!(chart
            .caption
            .contains("Whiskers: the lowest to the highest run."));
    }

    #[test]
    fn buffer_sizes_make_their_own_series_and_one_size_gets_bars() {
        let report = sample::stream_buffers();
        let results: Vec<&ScenarioResult> = report.results.iter().collect();
        let labels: Vec<String> = throughput_series(&results, 1.0)
            .into_iter()
            .map(|s| s.label)
            .collect();
        assert_eq!(
            labels,
            [
                "tcp rcvbuf 1 B",
                "tcp rcvbuf 4 KiB",
                "unix rcvbuf 1 B",
                "unix rcvbuf 4 KiB"
            ]
        );
        assert_eq!(ids(&report), ["throughput-bars"]);
    }

    #[test]
    fn a_stream_only_report_has_no_latency_chart() {
        let all = ids(&sample::stream());
        assert_eq!(all, ["throughput-bars"]);
        assert!(!all.iter().any(|id| id.contains("percentiles")));
    }

    #[test]
    fn pingpong_gets_percentiles_and_a_histogram_per_distribution() {
        let mut report = sample::pingpong();
        report.results[0].latency_buckets.insert(
            crate::measure::latency::LatencyKind::RoundTrip,
            vec![
                Bucket {
                    le_ns: 12_500,
                    count: 100,
                },
                Bucket {
                    le_ns: 16_000,
                    count: 800,
                },
                Bucket {
                    le_ns: 20_000,
                    count: 100,
                },
            ],
        );
        let charts = charts(&report);
        let ids: Vec<&str> = charts.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "pingpong-rate",
                "pingpong-round_trip-percentiles",
                "pingpong-round_trip-histogram"
            ]
        );
        let pct = &charts[1];
        assert!(pct.svg.contains("latency (µs)"), "{}", pct.svg);
        assert!(pct.svg.contains("99.9%"));
        assert!(pct
            .svg
            .contains("data-chart=\"pingpong-round_trip-percentiles\""));
        assert!(!pct.svg.contains(INK_HEX), "the ink is currentColor");
        assert!(pct.svg.contains("currentColor"));
        let hist = &charts[2];
        assert!(hist.svg.contains("share of samples (%)"));
        assert!(hist.svg.contains("latency (µs, log scale)"));
        assert_eq!(hist.legend.len(), 1, "only tcp has buckets");
    }

    #[test]
    fn connect_gets_each_of_its_four_distributions() {
        let ids = ids(&sample::connect());
        for name in ["connect", "accept", "first_response", "close"] {
            assert!(
                ids.contains(&format!("connect-{name}-percentiles")),
                "{ids:?}"
            );
            assert!(ids.contains(&format!("connect-{name}-histogram")));
        }
        assert_eq!(ids[0], "connect-rate");
    }

    #[test]
    fn rate_gets_message_rate_and_loss() {
        let mut report = sample::rate();
        let ids: Vec<String> = charts(&report).into_iter().map(|c| c.id).collect();
        assert_eq!(ids, ["rate-rate"], "nothing counted loss: no loss chart");
        report.results[0].delivered_fraction = Some(0.9);
        let charts = charts(&report);
        let ids: Vec<&str> = charts.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["rate-rate", "rate-loss"]);
        assert!(charts[1]
            .caption
            .contains("Not counted (cannot lose): unix-dgram 64 B."));
        assert!(charts[0].svg.contains("messages per second (k messages/s)"));
        assert!(charts[1].svg.contains("lost (% of messages sent)"));
    }

    #[test]
    fn a_failed_scenario_is_named_in_the_caption_not_plotted() {
        let report = sample::stream_failed();
        let charts = charts(&report);
        assert_eq!(charts.len(), 1);
        assert!(charts[0]
            .caption
            .contains("Not plotted: tcp 64 KiB (failed)"));
        let results: Vec<&ScenarioResult> = report.results.iter().collect();
        let b = bars(&results, 1.0, |r| r.bits_per_second, |_| None);
        assert_eq!(b.len(), 1, "only udp");
        assert_eq!(b[0].label, "udp 1.44 KiB");
    }

    #[test]
    fn whiskers_span_the_runs_when_there_are_two_or_more() {
        let mut report = sample::stream();
        let spread = crate::measure::stats::Summary::of(&[7e9, 8e9, 9e9]).unwrap();
        report.results[0].statistics = Some(crate::results::Statistics {
            bits_per_second: spread.clone(),
            messages_per_second: spread,
        });
        report.results[0].options.runs = 3;
        let results: Vec<&ScenarioResult> = report.results.iter().collect();
        let b = bars(
            &results,
            1e9,
            |r| r.bits_per_second,
            |r| {
                r.statistics.as_ref().map(|s| {
                    (
                        s.bits_per_second.runs,
                        s.bits_per_second.min,
                        s.bits_per_second.max,
                    )
                })
            },
        );
        assert_eq!(b[0].whisker, Some((7.0, 9.0)));
        assert_eq!(b[1].whisker, None, "one run: no whisker");
        assert!(whisker_note(&results).contains("lowest to the highest"));
    }

    #[test]
    fn engines_side_by_side_are_named_even_the_default() {
        let mut report = sample::stream();
        let mut epoll = report.results[0].clone();
        epoll.engine = EngineKind::Epoll;
        report.results.push(epoll);
        let results: Vec<&ScenarioResult> = report.results.iter().collect();
        assert_eq!(scenario_label(results[0], true), "tcp 64 KiB (blocking)");
        assert_eq!(scenario_label(results[2], true), "tcp 64 KiB (epoll)");
        assert_eq!(variant_label(results[2], true), "tcp (epoll)");
    }

    #[test]
    fn the_summary_curve_rises_and_stops_at_the_max() {
        let lat = sample::latency(10_000);
        let curve = percentile_curve_summary(&lat, &[]);
        assert_eq!(curve.first(), Some(&(0.0, 5_000.0)));
        // 1000 samples: nothing past 99.9%, where the max sits.
        assert_eq!(curve.last(), Some(&(3.0, 100_000.0)));
        assert!(curve
            .windows(2)
            .all(|w| w[0].1 <= w[1].1 && w[0].0 <= w[1].0));
    }

    /// The attribute `name` of the SVG tag `tag`.
    fn attr<'a>(tag: &'a str, name: &str) -> &'a str {
        let key = format!(" {name}=\"");
        let from = tag.find(&key).unwrap_or_else(|| panic!("{name} in {tag}")) + key.len();
        &tag[from..from + tag[from..].find('"').unwrap()]
    }

    /// A saved report of 10,000 round trips: 9,899 at 1 ms, 2 at 2.1 ms (the 9,900th
    /// sample, so p99 is 2.1 ms) and 99 at 3 ms. Its R10 buckets put 98.99% at 1 ms and
    /// 99.01% at 2.5 ms: 0.75 pixel either side of the 99% tick, which sits in the middle of
    /// an axis from 0% to 99.99% (every count from 1,001 to 10,000) with an odd number of
    /// pixels, so on a half pixel. The p99 point must be drawn at that tick, with p99: it
    /// was drawn at 1.9999999999999996 (1 - 0.99 is 0.010000000000000009 in f64), which
    /// rounds to the pixel left of the tick, and the tick's pixel had only the 2.5 ms
    /// bucket's point (tests/html.rs, on a loaded machine: "the curve reads
    /// [2.4985872787940444] at the tick, the JSON has 2.148351").
    #[test]
    fn a_saved_report_draws_each_summary_percentile_on_its_tick() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        h.record_n(1_000_000, 9_899).unwrap();
        h.record_n(2_100_000, 2).unwrap();
        h.record_n(3_000_000, 99).unwrap();
        let lat = Latency::of(&h).unwrap();
        let buckets = crate::measure::histogram::buckets(&h);
        assert_eq!((lat.count, lat.p99_ns / 1000), (10_000, 2_101));
        let at = |le_ns: u64| buckets.iter().find(|b| b.le_ns == le_ns).unwrap().count;
        assert_eq!(
            (at(1_000_000), at(2_500_000), at(3_150_000)),
            (9_899, 2, 99)
        );

        // As drawn: the 99% tick's pixel column holds a point at p99.
        let tcp = crate::transport::TransportKind::Tcp;
        let mut r = sample::scenario(WorkloadKind::Pingpong, tcp, 64, 5e6);
        r.latencies
            .insert(crate::measure::latency::LatencyKind::RoundTrip, lat.clone());
        r.latency_buckets.insert(
            crate::measure::latency::LatencyKind::RoundTrip,
            buckets.clone(),
        );
        let report = sample::report(vec![r], crate::scenario::Layout::List);
        let chart = charts(&report)
            .into_iter()
            .find(|c| c.id == "pingpong-round_trip-percentiles")
            .unwrap();
        assert!(chart.svg.contains("latency (ms)"), "a linear axis in ms");
        let (mut tick_x, mut y_ticks) = (None, Vec::new());
        for text in chart.svg.split("<text").skip(1) {
            let (tag, rest) = text.split_once('>').unwrap();
            let label = rest[..rest.find("</text>").unwrap()].trim();
            if label == "99%" {
                tick_x = Some(attr(tag, "x").parse::<i32>().unwrap());
            } else if tag.contains("text-anchor=\"end\"") {
                if let Ok(v) = label.parse::<f64>() {
                    y_ticks.push((attr(tag, "y").parse::<f64>().unwrap(), v));
                }
            }
        }
        let tick_x = tick_x.expect("a 99% tick");
        let (lo, hi) = (y_ticks[0], y_ticks[y_ticks.len() - 1]);
        let value = |py: f64| lo.1 + (py - lo.0) * (hi.1 - lo.1) / (hi.0 - lo.0);
        let px = |v: f64| lo.0 + (v - lo.1) * (hi.0 - lo.0) / (hi.1 - lo.1);
        let line = chart
            .svg
            .split("<polyline")
            .skip(1)
            .find(|l| l.contains("stroke-width=\"2\""))
            .expect("the curve");
        let column: Vec<f64> = attr(line, "points")
            .split_whitespace()
            .map(|p| p.split_once(',').unwrap())
            .filter(|(x, _)| x.parse::<i32>().unwrap() == tick_x)
            .map(|(_, y)| y.parse().unwrap())
            .collect();
        let p99_ms = lat.p99_ns as f64 / 1e6;
        assert!(
            column.iter().any(|&py| (py - px(p99_ms)).abs() <= 1.0),
            "the curve reads {:?} ms at the 99% tick (x {tick_x}), the summary has {p99_ms}",
            column.iter().map(|&py| value(py)).collect::<Vec<_>>()
        );

        // As computed: each summary percentile is a point at its tick, with its value.
        let curve = percentile_curve_summary(&lat, &buckets);
        for (x, v) in [
            (0.0, lat.min_ns),
            (1.0, lat.p90_ns),
            (2.0, lat.p99_ns),
            (3.0, lat.p99_9_ns),
            (4.0, lat.max_ns),
        ] {
            assert!(curve.contains(&(x, v as f64)), "({x}, {v}) in {curve:?}");
        }
        assert!(curve
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
    }

    /// Where a bucket ends at a summary percentile's own share, the percentile is the
    /// curve's only point there; a bucket bound above the next percentile (buckets that
    /// disagree with the summary) is capped at it, and never lifts it.
    #[test]
    fn a_bucket_never_draws_above_the_summary_percentile_at_or_past_its_share() {
        // 9,900 of 10,000 at 2.1 ms: the 2.5 ms bucket ends at 99%, p99 is 2.1 ms.
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        h.record_n(2_100_000, 9_900).unwrap();
        h.record_n(3_000_000, 100).unwrap();
        let lat = Latency::of(&h).unwrap();
        let curve = percentile_curve_summary(&lat, &crate::measure::histogram::buckets(&h));
        let at_99: Vec<f64> = curve.iter().filter(|p| p.0 == 2.0).map(|p| p.1).collect();
        assert_eq!(at_99, [lat.p99_ns as f64], "{curve:?}");
        // 5% of 1,000 above a 1 ms bound, with p99 at 20 us.
        let lat = sample::latency(10_000);
        let buckets = [
            Bucket {
                le_ns: 1_000_000,
                count: 950,
            },
            Bucket {
                le_ns: 8_000_000,
                count: 50,
            },
        ];
        let curve = percentile_curve_summary(&lat, &buckets);
        for (x, ns) in [(1.0, lat.p90_ns), (2.0, lat.p99_ns), (3.0, lat.max_ns)] {
            assert!(curve.contains(&(x, ns as f64)), "({x}, {ns}) in {curve:?}");
        }
        // 95%: capped at p99, the next percentile.
        assert!(curve.contains(&(percentile_x(950, 1000), lat.p99_ns as f64)));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// From any histogram's summary and buckets, the curve goes through every summary
        /// percentile its count resolves, at its tick, and never decreases.
        #[test]
        fn the_summary_curve_goes_through_every_percentile_of_the_report(
            samples in proptest::collection::vec((0u32..4, 1u64..1000), 1..3000)
        ) {
            let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
            for &(decade, v) in &samples {
                h.record(v * 1000 * 10u64.pow(decade)).unwrap();
            }
            let lat = Latency::of(&h).unwrap();
            let curve = percentile_curve_summary(&lat, &crate::measure::histogram::buckets(&h));
            let max_x = (lat.count as f64).log10().max(1.0);
            for (x, ns) in [
                (0.0, lat.min_ns),
                (2f64.log10(), lat.p50_ns),
                (1.0, lat.p90_ns),
                (2.0, lat.p99_ns),
                (3.0, lat.p99_9_ns),
                (4.0, lat.p99_99_ns),
            ] {
                if x < max_x - 1e-9 {
                    proptest::prop_assert!(curve.contains(&(x, ns as f64)), "({}, {}) in {:?}", x, ns, curve);
                }
            }
            proptest::prop_assert_eq!(curve.last(), Some(&(max_x, lat.max_ns as f64)));
            proptest::prop_assert!(curve.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        }
    }

    #[test]
    fn the_hdr_curve_reads_quantiles_of_the_histogram() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let curve = percentile_curve_hdr(&h);
        assert_eq!(curve.first().unwrap().0, 0.0);
        assert!((curve.last().unwrap().0 - 3.0).abs() < 1e-9);
        let at_90 = curve.iter().find(|p| (p.0 - 1.0).abs() < 1e-9).unwrap();
        assert!((at_90.1 - 900_000.0).abs() < 1000.0, "{at_90:?}");
    }

    #[test]
    fn histogram_steps_outline_each_bucket_as_a_share() {
        let steps = histogram_steps(&[
            Bucket {
                le_ns: 1000,
                count: 1,
            },
            Bucket {
                le_ns: 1250,
                count: 3,
            },
        ]);
        let floor = 800f64.log10();
        assert_eq!(steps[0], (floor, 0.0));
        assert_eq!(steps[1], (floor, 25.0));
        assert_eq!(steps[2], (3.0, 25.0));
        assert_eq!(steps[3], (3.0, 75.0));
        assert_eq!(steps.last().unwrap().1, 0.0);
        assert!(histogram_steps(&[]).is_empty());
    }

    #[test]
    fn an_empty_report_has_no_chart() {
        let report = sample::report(Vec::new(), crate::scenario::Layout::List);
        assert!(charts(&report).is_empty());
    }
}

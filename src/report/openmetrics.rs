//! The report in the OpenMetrics 1.0 text format (`--format openmetrics`,
//! `--export-openmetrics PATH`), for Prometheus, a push gateway or a node exporter's
//! textfile collector. Served over HTTP its content type is [`CONTENT_TYPE`].
//!
//! # What it holds
//!
//! One sample per figure of each scenario, the scenario medians and totals that the JSON
//! report's `results[]` carry (not the per-run figures). A figure that is `null` in the
//! JSON has no sample line: never a 0 or NaN for something unknown. A failed scenario
//! (its `error` set) or one with no finished run has no figures at all, only
//! `sockbench_scenario_failed`.
//!
//! Families, each with `# TYPE`, `# HELP` and, where it has a unit, `# UNIT`:
//!
//! | family | type | from the JSON |
//! |---|---|---|
//! | `sockbench_build_info{version}` | gauge, always 1 | `tool.version` |
//! | `sockbench_scenario_failed` | gauge, 0 or 1 | `error` is set |
//! | `sockbench_runs_total` | counter | the number of `runs` |
//! | `sockbench_sent_bytes_total`, `sockbench_received_bytes_total` | counter | `bytes_sent`, `bytes_received` |
//! | `sockbench_sent_messages_total`, `sockbench_received_messages_total` | counter | `messages_sent`, `messages_received` |
//! | `sockbench_lost_messages_total` | counter | `messages_lost` |
//! | `sockbench_lost_requests_total`, `sockbench_lost_replies_total`, `sockbench_late_replies_total` | counter | `requests_lost`, `replies_lost`, `replies_late` |
//! | `sockbench_reordered_messages_total`, `sockbench_duplicated_messages_total` | counter | `messages_reordered`, `messages_duplicated` |
//! | `sockbench_udp_receive_buffer_errors_total` | counter | `udp_receive_buffer_errors` |
//! | `sockbench_received_bytes_per_second` | gauge | `bytes_per_second` |
//! | `sockbench_received_messages_per_second` | gauge | `messages_per_second` |
//! | `sockbench_delivered_ratio` | gauge | `delivered_fraction` |
//! | `sockbench_sender_cpu_seconds_per_byte`, `sockbench_receiver_cpu_seconds_per_byte` | gauge | `sender_cpu_seconds_per_gb`, `receiver_cpu_seconds_per_gb` / 10^9 |
//! | `sockbench_round_trip_cpu_seconds` | gauge | `cpu_seconds_per_round_trip` |
//! | `sockbench_<name>_latency_seconds` | histogram | `latencies.<name>` and `latency_buckets.<name>` |
//!
//! # Names (the Prometheus naming guide)
//!
//! Base units only, as the last word of the name and in `# UNIT`: bytes (not bits:
//! Prometheus counts data in bytes), seconds (latencies and CPU time, never
//! nanoseconds), `ratio` for a fraction from 0 to 1. Message counts have no unit, as
//! `http_requests_total` has none. Totals are counters and end in `_total`. A throughput
//! would normally be left to Prometheus (`rate()` of a byte counter), but a benchmark's
//! throughput is a measurement over its own interval that no scrape interval can
//! reproduce, so it is a gauge whose unit says it is a rate: `_bytes_per_second`. For
//! the same reason CPU cost is a gauge in seconds per byte (the JSON's seconds per 10^9
//! bytes, divided). Each latency (`round_trip`, `connect`, `accept`, `first_response`,
//! `close`) is its own family rather than a label value, as the guide asks when
//! averaging across the label would mean nothing (a connect time with a close time);
//! sender and receiver CPU are two families too, so that every family of a scenario
//! has the same labels.
//!
//! # Latency histograms
//!
//! Each latency is a histogram (not a summary: histograms aggregate, and a family has
//! one type) in the report's fixed R10 buckets (`latency_buckets`: 10, 12.5, 16, 20 ...
//! ns, about 26% apart) converted to seconds, cumulative, from the empty bucket just
//! below the smallest sample (so `histogram_quantile()` interpolates the first bucket
//! from its true lower bound) to the one that holds the largest, then `+Inf`. `_count`
//! is the number of samples and `_sum` is the mean times the count (`mean_ns` x `count`
//! / 10^9: the report keeps the mean, rounded to the nanosecond, not the sum, so the sum
//! is within half a nanosecond per sample of the measured one). Series of different scenarios have different bucket ranges:
//! below a series' first bucket its count is 0, above its last it is the total. The
//! exact percentiles (p50 to p99.99, from HDR histograms) are in the JSON report. A report
//! without `latency_buckets` (schema version 4) gives the `+Inf` bucket alone.
//!
//! # Labels
//!
//! Every family of a scenario carries the same labels, the ones that tell scenarios
//! apart: `workload`, `transport`, `engine`, `size_bytes`, `parallel`, and, only where
//! set, the requested `sndbuf_bytes` and `rcvbuf_bytes` (absent: the kernel's default,
//! which is what an empty label means to Prometheus), `send` and `recv` (stream's
//! methods) and `runtime` (the async engine's). Error text never goes in a label. A
//! scenario whose labels equal an earlier one's also gets `scenario` (its position in
//! `results`, from 1) so that no two series are the same.
//!
//! # Numbers
//!
//! Counters are exact integers. Other values follow the spec's canonical rendering (Go's
//! shortest `%g` with `.0` added to a whole number: `0.0001`, `1.0`, `100000.0`,
//! `1e+06`, `2.5e-10`), which `le` label values must use.
//!
//! # Consumers that read the older Prometheus text format
//!
//! The node exporter's textfile collector and the push gateway parse the Prometheus text
//! format 0.0.4, not OpenMetrics (checked with node exporter 1.5 and push gateway 1.5).
//! They take this output as it is, and no second format is needed: `# UNIT` and `# EOF`
//! read as comments, gauges and histograms keep their type and help, and there are no
//! timestamps (which the textfile collector refuses). Counters lose their type and help:
//! that format names a counter's family with its `_total`, so the
//! `sockbench_..._total` samples arrive untyped, with the same names, labels and values,
//! which PromQL treats alike. The export file is replaced by a rename after every
//! scenario, from a temporary file that does not end in `.prom`, so the collector never
//! reads half of one. Several sockbench files in one textfile directory are fine as long
//! as they hold different scenarios; `sockbench_build_info` is in each, and the node
//! exporter keeps one copy and logs that it saw it twice.

use crate::measure::latency::LatencyKind;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;

use crate::measure::histogram::{bucket_bounds, Bucket, Latency};
use crate::report::output::Rendered;
use crate::report::{Exporter, Report};
use crate::results::ScenarioResult;

/// The HTTP content type of this output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The OpenMetrics exporter.
pub struct OpenMetrics;

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// A total that only grows (its samples end in `_total`).
    Counter,
    /// A measurement.
    Gauge,
    /// A distribution: cumulative `_bucket`s, `_count` and `_sum`.
    Histogram,
}

impl Type {
    fn name(self) -> &'static str {
        match self {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
        }
    }
}

/// A sample's value: exact integers for counts, floats for measurements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// A count.
    Int(u64),
    /// A measurement.
    Float(f64),
}

/// One metric family as a document gives it: its name, type, unit and help, and its
/// samples in order. A family without a sample is not written.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    /// The family name (a counter's samples add `_total`).
    pub name: String,
    /// Its type.
    pub kind: Type,
    /// Its base unit (`bytes`, `seconds`, `ratio`), if it has one.
    pub unit: Option<&'static str>,
    /// What it is, for a person.
    pub help: String,
    /// Its samples.
    pub samples: Vec<Sample>,
}

/// One sample line: its full name (with `_total`, `_bucket`, `_count` or `_sum`), its
/// labels in order, its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The sample's name.
    pub name: String,
    /// Label names and values.
    pub labels: Vec<(&'static str, String)>,
    /// The value.
    pub value: Value,
}

impl Family {
    /// A family with no samples yet.
    pub fn new(
        name: impl Into<String>,
        kind: Type,
        unit: Option<&'static str>,
        help: impl Into<String>,
    ) -> Family {
        Family {
            name: name.into(),
            kind,
            unit,
            help: help.into(),
            samples: Vec::new(),
        }
    }

    /// Add a sample of the family's own name (`_total` added for a counter); a value
    /// that cannot be written (NaN, infinite) is left out.
    pub fn push(&mut self, labels: Vec<(&'static str, String)>, value: Value) {
        let name = match self.kind {
            Type::Counter => format!("{}_total", self.name),
            _ => self.name.clone(),
        };
        self.push_named(name, labels, value);
    }

    /// Add a sample under its full name (a histogram's `_bucket`, `_count`, `_sum`).
    pub fn push_named(&mut self, name: String, labels: Vec<(&'static str, String)>, value: Value) {
        if value.render().is_some() {
            self.samples.push(Sample {
                name,
                labels,
                value,
            });
        }
    }
}

/// The exposition of `families`, after the `build_info` of the sockbench `version` that
/// wrote them, ended by `# EOF`.
pub fn exposition(version: &str, families: &[Family]) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "sockbench_build_info",
        Type::Gauge,
        None,
        "The sockbench that wrote these figures.",
    );
    sample(
        &mut out,
        "sockbench_build_info",
        &[("version", version.to_string())],
        Value::Int(1),
    );
    for f in families.iter().filter(|f| !f.samples.is_empty()) {
        family(&mut out, &f.name, f.kind, f.unit, &f.help);
        for s in &f.samples {
            sample(&mut out, &s.name, &s.labels, s.value);
        }
    }
    out.push_str("# EOF\n");
    out
}

impl Value {
    /// The value as the spec writes it; `None` for NaN and infinities (never written:
    /// they would stand for an unknown figure).
    fn render(self) -> Option<String> {
        match self {
            Value::Int(n) => Some(n.to_string()),
            Value::Float(x) => canonical(x),
        }
    }
}

/// One scalar family: a figure per measured scenario.
struct Scalar {
    /// The family name (a counter's samples add `_total`).
    name: &'static str,
    kind: Type,
    unit: Option<&'static str>,
    help: &'static str,
    /// The scenario's figure; `None` where the JSON has null.
    value: fn(&ScenarioResult) -> Option<Value>,
}

fn int(n: u64) -> Option<Value> {
    Some(Value::Int(n))
}

fn float(x: Option<f64>) -> Option<Value> {
    x.map(Value::Float)
}

/// Seconds per byte from the JSON's seconds per 10^9 bytes.
fn per_byte(per_gb: Option<f64>) -> Option<Value> {
    float(per_gb.map(|s| s / 1e9))
}

/// The figures of a measured scenario, in output order.
const SCALARS: [Scalar; 18] = [
    Scalar {
        name: "sockbench_runs",
        kind: Type::Counter,
        unit: None,
        help: "Measured runs that finished.",
        value: |r| int(r.runs.len() as u64),
    },
    Scalar {
        name: "sockbench_sent_bytes",
        kind: Type::Counter,
        unit: Some("bytes"),
        help: "Payload bytes sent, over all measured runs.",
        value: |r| int(r.bytes_sent),
    },
    Scalar {
        name: "sockbench_received_bytes",
        kind: Type::Counter,
        unit: Some("bytes"),
        help: "Payload bytes received, over all measured runs.",
        value: |r| int(r.bytes_received),
    },
    Scalar {
        name: "sockbench_sent_messages",
        kind: Type::Counter,
        unit: None,
        help: "Messages sent, over all measured runs.",
        value: |r| int(r.messages_sent),
    },
    Scalar {
        name: "sockbench_received_messages",
        kind: Type::Counter,
        unit: None,
        help: "Messages received (pingpong: completed round trips), over all measured runs.",
        value: |r| int(r.messages_received),
    },
    Scalar {
        name: "sockbench_lost_messages",
        kind: Type::Counter,
        unit: None,
        help: "Messages sent but not received (transports that can lose them).",
        value: |r| r.messages_lost.map(Value::Int),
    },
    Scalar {
        name: "sockbench_lost_requests",
        kind: Type::Counter,
        unit: None,
        help: "pingpong: requests that never reached the server.",
        value: |r| r.requests_lost.map(Value::Int),
    },
    Scalar {
        name: "sockbench_lost_replies",
        kind: Type::Counter,
        unit: None,
        help: "pingpong: replies that never reached the client.",
        value: |r| r.replies_lost.map(Value::Int),
    },
    Scalar {
        name: "sockbench_late_replies",
        kind: Type::Counter,
        unit: None,
        help: "pingpong: replies that came after their timeout.",
        value: |r| r.replies_late.map(Value::Int),
    },
    Scalar {
        name: "sockbench_reordered_messages",
        kind: Type::Counter,
        unit: None,
        help: "rate: messages that arrived after a higher-numbered one.",
        value: |r| r.messages_reordered.map(Value::Int),
    },
    Scalar {
        name: "sockbench_duplicated_messages",
        kind: Type::Counter,
        unit: None,
        help: "rate: messages that arrived more than once.",
        value: |r| r.messages_duplicated.map(Value::Int),
    },
    Scalar {
        name: "sockbench_udp_receive_buffer_errors",
        kind: Type::Counter,
        unit: None,
        help: "UDP: datagrams the kernel dropped for a full receive buffer during the runs (system-wide).",
        value: |r| r.udp_receive_buffer_errors.map(Value::Int),
    },
    Scalar {
        name: "sockbench_received_bytes_per_second",
        kind: Type::Gauge,
        unit: Some("bytes_per_second"),
        help: "Received payload bytes per second, median over runs.",
        value: |r| float(r.bytes_per_second),
    },
    Scalar {
        name: "sockbench_received_messages_per_second",
        kind: Type::Gauge,
        unit: None,
        help: "Received messages per second, median over runs.",
        value: |r| float(r.messages_per_second),
    },
    Scalar {
        name: "sockbench_delivered_ratio",
        kind: Type::Gauge,
        unit: Some("ratio"),
        help: "Distinct messages received over messages sent, 0 to 1.",
        value: |r| float(r.delivered_fraction),
    },
    Scalar {
        name: "sockbench_sender_cpu_seconds_per_byte",
        kind: Type::Gauge,
        unit: Some("seconds_per_byte"),
        help: "The sender's CPU time per payload byte, median over runs.",
        value: |r| per_byte(r.sender_cpu_seconds_per_gb),
    },
    Scalar {
        name: "sockbench_receiver_cpu_seconds_per_byte",
        kind: Type::Gauge,
        unit: Some("seconds_per_byte"),
        help: "The receiver's CPU time per payload byte, median over runs.",
        value: |r| per_byte(r.receiver_cpu_seconds_per_gb),
    },
    Scalar {
        name: "sockbench_round_trip_cpu_seconds",
        kind: Type::Gauge,
        unit: Some("seconds"),
        help: "pingpong: CPU time of both sides per round trip, median over runs.",
        value: |r| float(r.cpu_seconds_per_round_trip),
    },
];

impl Exporter for OpenMetrics {
    fn serialize(&self, doc: &dyn Rendered) -> anyhow::Result<Vec<u8>> {
        Ok(exposition(&doc.head().tool.version, &doc.metrics()).into_bytes())
    }
}

/// The measuring commands' figures as families: whether each scenario failed, each
/// figure of each measured scenario, and its latency histograms.
pub fn families(report: &Report) -> Vec<Family> {
    let mut out = Vec::new();
    let labels = scenario_labels(&report.results);
    let mut failed = Family::new(
        "sockbench_scenario_failed",
        Type::Gauge,
        None,
        "1 if the scenario failed (its figures are then absent; the JSON report says why).",
    );
    for (r, l) in report.results.iter().zip(&labels) {
        failed.push(l.clone(), Value::Int(u64::from(r.error.is_some())));
    }
    out.push(failed);
    let measured: Vec<(&ScenarioResult, &Labels)> = report
        .results
        .iter()
        .zip(&labels)
        .filter(|(r, _)| r.error.is_none() && !r.runs.is_empty())
        .collect();
    for s in &SCALARS {
        let mut f = Family::new(s.name, s.kind, s.unit, s.help);
        for (r, l) in &measured {
            if let Some(v) = (s.value)(r) {
                f.push((*l).clone(), v);
            }
        }
        out.push(f);
    }
    out.extend(latency_histograms(&measured));
    out
}

/// A sample's label pairs, in output order.
pub type Labels = Vec<(&'static str, String)>;

/// The labels of each scenario (see the module doc), made unique.
fn scenario_labels(results: &[ScenarioResult]) -> Vec<Labels> {
    let mut seen = HashSet::new();
    results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let o = &r.options;
            let mut l: Labels = vec![
                ("workload", r.workload.to_string()),
                ("transport", r.transport.to_string()),
                ("engine", r.engine.to_string()),
                ("size_bytes", r.size_bytes.to_string()),
                ("parallel", o.parallel.to_string()),
            ];
            let optional = [
                ("sndbuf_bytes", o.sndbuf_bytes.map(|n| n.to_string())),
                ("rcvbuf_bytes", o.rcvbuf_bytes.map(|n| n.to_string())),
                ("send", o.send.map(value_name)),
                ("recv", o.recv.map(value_name)),
                ("runtime", o.runtime.map(value_name)),
            ];
            l.extend(optional.into_iter().filter_map(|(k, v)| Some((k, v?))));
            if !seen.insert(l.clone()) {
                l.push(("scenario", (i + 1).to_string()));
            }
            l
        })
        .collect()
}

/// An option's command-line name (`sendfile`, `multi`).
fn value_name(v: impl clap::ValueEnum) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_string())
        .unwrap_or_default()
}

/// One histogram family per latency name that any measured scenario has.
fn latency_histograms(measured: &[(&ScenarioResult, &Labels)]) -> Vec<Family> {
    // Family name -> the JSON key it shows (the first key that maps to it).
    let mut families: BTreeMap<String, LatencyKind> = BTreeMap::new();
    let keys: BTreeSet<LatencyKind> = measured
        .iter()
        .flat_map(|(r, _)| r.latencies.keys().chain(r.latency_buckets.keys()))
        .copied()
        .collect();
    for key in keys {
        families
            .entry(format!(
                "sockbench_{}_latency_seconds",
                metric_word(key.name())
            ))
            .or_insert(key);
    }
    let mut out = Vec::new();
    for (name, key) in &families {
        let help = format!(
            "Latency of {} (the JSON report's latencies.{key}), over all measured runs.",
            key.name().replace('_', " ")
        );
        let mut f = Family::new(name.clone(), Type::Histogram, Some("seconds"), help);
        for (r, l) in measured {
            let buckets = r.latency_buckets.get(key).map_or(&[][..], Vec::as_slice);
            let lat = r.latencies.get(key);
            if lat.is_some() || !buckets.is_empty() {
                histogram(&mut f, l, lat, buckets);
            }
        }
        out.push(f);
    }
    out
}

/// A latency name as a word of a metric name: `[a-z0-9_]`, anything else as `_`.
fn metric_word(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// One histogram series: cumulative buckets in seconds, `+Inf`, then `_count` and
/// `_sum` when the distribution's summary is known.
pub fn histogram(f: &mut Family, labels: &Labels, lat: Option<&Latency>, b: &[Bucket]) {
    let bucket = format!("{}_bucket", f.name);
    let with_le = |le: String| {
        let mut l = labels.clone();
        l.push(("le", le));
        l
    };
    if let Some(first) = b.first() {
        // The empty bucket just below the first, so its lower bound is known.
        if let Some(below) = bucket_bounds().take_while(|&le| le < first.le_ns).last() {
            f.push_named(bucket.clone(), with_le(seconds_label(below)), Value::Int(0));
        }
    }
    let mut cumulative = 0u64;
    for bk in b {
        cumulative = cumulative.saturating_add(bk.count);
        f.push_named(
            bucket.clone(),
            with_le(seconds_label(bk.le_ns)),
            Value::Int(cumulative),
        );
    }
    // The +Inf bucket holds every sample; never fewer than the buckets before it.
    let count = lat.map_or(cumulative, |l| l.count.max(cumulative));
    f.push_named(bucket, with_le("+Inf".into()), Value::Int(count));
    if let Some(l) = lat {
        let name = f.name.clone();
        f.push_named(format!("{name}_count"), labels.clone(), Value::Int(count));
        let sum = l.mean_ns as f64 * l.count as f64 / 1e9;
        f.push_named(format!("{name}_sum"), labels.clone(), Value::Float(sum));
    }
}

/// A bound in nanoseconds as an `le` value in seconds, canonical.
fn seconds_label(ns: u64) -> String {
    canonical(ns as f64 / 1e9).unwrap_or_else(|| "+Inf".into())
}

/// `# TYPE`, `# UNIT` (if any) and `# HELP` lines of a family.
fn family(out: &mut String, name: &str, kind: Type, unit: Option<&str>, help: &str) {
    let _ = writeln!(out, "# TYPE {name} {}", kind.name());
    if let Some(u) = unit {
        let _ = writeln!(out, "# UNIT {name} {u}");
    }
    let _ = writeln!(out, "# HELP {name} {}", escape(help));
}

/// One sample line. A value that cannot be written (NaN, infinite) is left out.
fn sample(out: &mut String, name: &str, labels: &[(&str, String)], value: Value) {
    let Some(v) = value.render() else {
        return;
    };
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, val)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape(val));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {v}");
}

/// A label value or help text escaped as the spec says: backslash, double quote and
/// line feed; any other control character is written as [`crate::vocab::text::terminal`] writes
/// it (`\x1b`, its backslash escaped), so none reaches a terminal.
pub(crate) fn escape(s: &str) -> String {
    let mut e = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => e.push_str("\\\\"),
            '"' => e.push_str("\\\""),
            '\n' => e.push_str("\\n"),
            c if crate::vocab::text::hidden(c) => {
                e.push('\\');
                e.push_str(&crate::vocab::text::terminal(&c.to_string()));
            }
            c => e.push(c),
        }
    }
    e
}

/// A float as the spec's canonical numbers have it: Go's shortest `%g` (exponent form
/// below 1e-4 and from 1e+06, the exponent signed and at least two digits) with `.0`
/// added to a whole number. `None` for NaN and infinities.
pub(crate) fn canonical(x: f64) -> Option<String> {
    if !x.is_finite() {
        return None;
    }
    if x == 0.0 {
        return Some("0.0".into());
    }
    // Rust's `{:e}` is the shortest round-trip mantissa: `1.25e-8`, `-3e6`.
    let e = format!("{x:e}");
    let (mantissa, exp) = e.split_once('e')?;
    let exp: i32 = exp.parse().ok()?;
    if !(-4..6).contains(&exp) {
        // Signed, at least two digits: e-08, e+06, e+300.
        return Some(format!("{mantissa}e{exp:+03}"));
    }
    // Rust's `{}` is the shortest round-trip digits without an exponent.
    let fixed = format!("{x}");
    Some(if fixed.contains('.') {
        fixed
    } else {
        fixed + ".0"
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    fn text(report: &Report) -> String {
        String::from_utf8(OpenMetrics.serialize(report).unwrap()).unwrap()
    }

    /// The sample lines whose metric name is `name` exactly.
    fn lines<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
        out.lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
            .collect()
    }

    /// The value of the one sample of `name` whose labels contain `has`.
    fn value(out: &str, name: &str, has: &str) -> String {
        let found: Vec<&str> = lines(out, name)
            .into_iter()
            .filter(|l| l.contains(has))
            .collect();
        assert_eq!(found.len(), 1, "{name} {has}: {found:?}\n{out}");
        found[0].rsplit(' ').next().unwrap().to_string()
    }

    #[test]
    fn label_values_and_help_escape_backslash_quote_and_newline() {
        assert_eq!(escape("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(escape("plain 64 KiB"), "plain 64 KiB");
        let mut report = sample::stream();
        report.tool.version = "1.0 \"dev\"\\\nx".into();
        assert!(
            text(&report).contains("sockbench_build_info{version=\"1.0 \\\"dev\\\"\\\\\\nx\"} 1\n"),
            "{}",
            text(&report)
        );
    }

    #[test]
    fn floats_are_canonical_and_integers_exact() {
        for (x, want) in [
            (0.0, "0.0"),
            (1.0, "1.0"),
            (0.5, "0.5"),
            (0.0001, "0.0001"),
            (0.000125, "0.000125"),
            (0.00009, "9e-05"),
            (1e-8, "1e-08"),
            (1.25e-8, "1.25e-08"),
            (100_000.0, "100000.0"),
            (1e6, "1e+06"),
            (1_234_567_890.5, "1.2345678905e+09"),
            (2.5e-10, "2.5e-10"),
            (1e300, "1e+300"),
            (-3.5, "-3.5"),
        ] {
            assert_eq!(canonical(x).as_deref(), Some(want), "{x}");
            let back: f64 = want.parse().unwrap();
            assert_eq!(back, x, "{want} reads back as {x}");
        }
        assert_eq!(canonical(f64::NAN), None);
        assert_eq!(canonical(f64::INFINITY), None);
        assert_eq!(
            Value::Int(u64::MAX).render().as_deref(),
            Some("18446744073709551615")
        );
        assert_eq!(seconds_label(12), "1.2e-08");
        assert_eq!(seconds_label(1_000_000_000), "1.0");
        assert_eq!(seconds_label(31_500), "3.15e-05");
    }

    #[test]
    fn every_family_has_type_help_and_unit_and_is_never_interleaved() {
        for report in [
            sample::stream(),
            sample::stream_failed(),
            sample::pingpong(),
            sample::rate(),
            sample::connect(),
            sample::suite(),
            sample::stream_buffers(),
        ] {
            let out = text(&report);
            assert!(out.ends_with("\n# EOF\n"), "{out}");
            assert_eq!(out.matches("# EOF").count(), 1);
            let mut done: Vec<String> = Vec::new();
            let mut current: Option<(String, String)> = None; // (family, type)
            let mut meta: Vec<&str> = Vec::new();
            for line in out.lines().filter(|l| *l != "# EOF") {
                if let Some(rest) = line.strip_prefix("# TYPE ") {
                    let (name, kind) = rest.split_once(' ').unwrap();
                    assert!(!done.iter().any(|d| d == name), "{name} twice");
                    if let Some((f, _)) = current.take() {
                        done.push(f);
                    }
                    current = Some((name.to_string(), kind.to_string()));
                    meta.clear();
                    continue;
                }
                if let Some(rest) = line.strip_prefix("# ") {
                    let (what, rest) = rest.split_once(' ').unwrap();
                    let (fam, _) = rest.split_once(' ').unwrap();
                    assert_eq!(Some(fam), current.as_ref().map(|c| c.0.as_str()), "{line}");
                    meta.push(what);
                    continue;
                }
                let (fam, kind) = current.clone().expect("a sample before any # TYPE");
                assert!(meta.contains(&"HELP"), "{fam} has no HELP");
                let unit = [
                    "bytes",
                    "seconds",
                    "bytes_per_second",
                    "seconds_per_byte",
                    "ratio",
                ]
                .into_iter()
                .find(|u| fam.ends_with(&format!("_{u}")));
                assert_eq!(meta.contains(&"UNIT"), unit.is_some(), "{fam}: UNIT");
                let name = line.split(['{', ' ']).next().unwrap();
                let suffixes: &[&str] = match kind.as_str() {
                    "counter" => &["_total"],
                    "gauge" => &[""],
                    "histogram" => &["_bucket", "_count", "_sum"],
                    k => panic!("type {k}"),
                };
                assert!(
                    suffixes.iter().any(|s| name == format!("{fam}{s}")),
                    "{name} in {fam} ({kind})"
                );
                assert!(fam.starts_with("sockbench_"), "{fam}");
            }
        }
    }

    #[test]
    fn a_failed_scenario_has_only_its_failed_gauge() {
        let out = text(&sample::stream_failed());
        let tcp = "transport=\"tcp\"";
        assert_eq!(value(&out, "sockbench_scenario_failed", tcp), "1");
        assert_eq!(
            value(&out, "sockbench_scenario_failed", "transport=\"udp\""),
            "0"
        );
        let tcp_lines: Vec<&str> = out.lines().filter(|l| l.contains(tcp)).collect();
        assert_eq!(tcp_lines.len(), 1, "{tcp_lines:?}");
        assert!(!out.contains("Connection reset"), "no error text in labels");
        // The udp scenario's figures are all there, in base units.
        let udp = "transport=\"udp\"";
        assert_eq!(value(&out, "sockbench_lost_messages_total", udp), "12");
        assert_eq!(
            value(&out, "sockbench_received_bytes_total", udp),
            "250000000"
        );
        assert_eq!(
            value(&out, "sockbench_received_bytes_per_second", udp),
            "2.5e+08"
        );
        assert_eq!(
            value(&out, "sockbench_sender_cpu_seconds_per_byte", udp),
            "2.5e-10"
        );
    }

    #[test]
    fn an_unknown_figure_has_no_line() {
        // stream over tcp and unix: nothing can be lost, reordered or late.
        let out = text(&sample::stream());
        for name in [
            "sockbench_lost_messages_total",
            "sockbench_reordered_messages_total",
            "sockbench_late_replies_total",
            "sockbench_delivered_ratio",
            "sockbench_round_trip_cpu_seconds",
        ] {
            assert!(!out.contains(name), "{name} in\n{out}");
        }
        assert!(!out.contains("NaN") && !out.contains("_seconds_bucket"));
        // rate over udp lost some; over unix-dgram it counts reordering but no loss.
        let out = text(&sample::rate());
        assert_eq!(lines(&out, "sockbench_lost_messages_total").len(), 1);
        assert_eq!(
            value(&out, "sockbench_lost_messages_total", "transport=\"udp\""),
            "100"
        );
        assert_eq!(
            value(&out, "sockbench_reordered_messages_total", "unix-dgram"),
            "0"
        );
    }

    #[test]
    fn a_scenario_without_a_finished_run_or_with_an_error_has_no_figures() {
        let mut report = sample::stream();
        // tcp: no run finished, no error (interrupted before its first run ended).
        report.results[0].runs.clear();
        // unix: a run finished, then the scenario failed.
        report.results[1].error = Some("unix receiver failed".into());
        let out = text(&report);
        assert_eq!(value(&out, "sockbench_scenario_failed", "tcp"), "0");
        assert_eq!(value(&out, "sockbench_scenario_failed", "unix"), "1");
        let figures: Vec<&str> = out
            .lines()
            .filter(|l| l.contains("workload=") && !l.starts_with("sockbench_scenario_failed"))
            .collect();
        assert!(figures.is_empty(), "{figures:?}");
    }

    #[test]
    fn only_scenarios_that_have_a_latency_get_its_histogram() {
        // The suite: stream and rate scenarios, and one pingpong over udp.
        let out = text(&sample::suite());
        let series: HashSet<&str> = lines(&out, "sockbench_round_trip_latency_seconds_count")
            .into_iter()
            .collect();
        assert_eq!(series.len(), 1, "{series:?}");
        assert!(out
            .lines()
            .filter(|l| l.starts_with("sockbench_round_trip_latency_seconds"))
            .all(|l| l.contains("workload=\"pingpong\"")));
    }

    #[test]
    fn stream_methods_and_the_runtime_are_labels_by_their_command_line_names() {
        let mut report = sample::stream();
        let o = &mut report.results[0].options;
        o.send = Some(crate::vocab::SendMethod::Sendfile);
        o.recv = Some(crate::vocab::RecvMethod::Read);
        o.runtime = Some(crate::engine::RuntimeKind::Multi);
        o.sndbuf_bytes = Some(4096);
        let out = text(&report);
        assert_eq!(
            lines(&out, "sockbench_scenario_failed")[0],
            "sockbench_scenario_failed{workload=\"stream\",transport=\"tcp\",engine=\"blocking\",\
             size_bytes=\"65536\",parallel=\"1\",sndbuf_bytes=\"4096\",send=\"sendfile\",\
             recv=\"read\",runtime=\"multi\"} 0"
        );
    }

    #[test]
    fn every_scenario_family_carries_the_same_labels() {
        let out = text(&sample::stream_buffers());
        let labels = |l: &str| {
            let inner = &l[l.find('{').unwrap() + 1..l.find('}').unwrap()];
            inner
                .split(',')
                .filter(|p| !p.starts_with("le="))
                .map(String::from)
                .collect::<Vec<_>>()
        };
        let failed = lines(&out, "sockbench_scenario_failed");
        assert_eq!(failed.len(), 4);
        assert_eq!(
            labels(failed[0]),
            [
                "workload=\"stream\"",
                "transport=\"tcp\"",
                "engine=\"blocking\"",
                "size_bytes=\"65536\"",
                "parallel=\"1\"",
                "rcvbuf_bytes=\"1\""
            ]
        );
        let sets: HashSet<Vec<String>> = failed.iter().map(|l| labels(l)).collect();
        assert_eq!(sets.len(), 4, "the requested rcvbuf tells them apart");
        for line in out
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains('{'))
        {
            if !line.starts_with("sockbench_build_info") {
                assert!(sets.contains(&labels(line)), "{line}");
            }
        }
    }

    #[test]
    fn a_repeated_label_set_gets_the_scenarios_position() {
        let mut report = sample::stream();
        let again = report.results[0].clone();
        report.results.push(again);
        let out = text(&report);
        let got = lines(&out, "sockbench_received_bytes_total");
        assert_eq!(got.len(), 3);
        assert!(!got[0].contains("scenario="), "{}", got[0]);
        assert!(got[2].contains(",scenario=\"3\"}"), "{}", got[2]);
    }

    #[test]
    fn a_latency_is_a_histogram_in_seconds_with_its_real_count_and_sum() {
        let mut report = sample::pingpong();
        report.results[0].latency_buckets.insert(
            crate::measure::latency::LatencyKind::RoundTrip,
            vec![
                Bucket {
                    le_ns: 12_500,
                    count: 0,
                },
                Bucket {
                    le_ns: 16_000,
                    count: 600,
                },
                Bucket {
                    le_ns: 20_000,
                    count: 0,
                },
                Bucket {
                    le_ns: 31_500,
                    count: 400,
                },
            ],
        );
        let out = text(&report);
        let tcp: Vec<(String, String)> = lines(&out, "sockbench_round_trip_latency_seconds_bucket")
            .into_iter()
            .filter(|l| l.contains("transport=\"tcp\""))
            .map(|l| {
                let le = l.split("le=\"").nth(1).unwrap().split('"').next().unwrap();
                (le.to_string(), l.rsplit(' ').next().unwrap().to_string())
            })
            .collect();
        let want = [
            ("1e-05", "0"),
            ("1.25e-05", "0"),
            ("1.6e-05", "600"),
            ("2e-05", "600"),
            ("3.15e-05", "1000"),
            ("+Inf", "1000"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(tcp, want);
        let tcp = "transport=\"tcp\"";
        assert_eq!(
            value(&out, "sockbench_round_trip_latency_seconds_count", tcp),
            "1000"
        );
        // mean 15 us x 1000 samples.
        assert_eq!(
            value(&out, "sockbench_round_trip_latency_seconds_sum", tcp),
            "0.015"
        );
        // udp has no buckets (a report of schema version 4): the +Inf bucket alone.
        let udp = "transport=\"udp\"";
        assert_eq!(
            value(&out, "sockbench_round_trip_latency_seconds_bucket", udp),
            "1000"
        );
        assert_eq!(
            value(&out, "sockbench_round_trip_latency_seconds_sum", udp),
            "0.012"
        );
        let fam = out.find("# TYPE sockbench_round_trip_latency_seconds histogram\n# UNIT sockbench_round_trip_latency_seconds seconds\n");
        assert!(fam.is_some(), "{out}");
    }

    #[test]
    fn each_named_latency_is_its_own_family() {
        let out = text(&sample::connect());
        for name in ["connect", "accept", "first_response", "close"] {
            let fam = format!("sockbench_{name}_latency_seconds");
            assert!(out.contains(&format!("# TYPE {fam} histogram\n")), "{name}");
            assert_eq!(lines(&out, &format!("{fam}_count")).len(), 2, "{name}");
        }
        assert_eq!(metric_word("first-Response"), "first_response");
    }

    #[test]
    fn a_report_with_no_results_is_still_valid() {
        let out = text(&sample::report(Vec::new(), crate::scenario::Layout::List));
        assert_eq!(
            out,
            "# TYPE sockbench_build_info gauge\n\
             # HELP sockbench_build_info The sockbench that wrote these figures.\n\
             sockbench_build_info{version=\"0.0.0-test\"} 1\n\
             # EOF\n"
        );
    }
}

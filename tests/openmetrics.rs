//! `--export-openmetrics PATH` and `--format openmetrics`: real measurements, written
//! beside the JSON report and read back by real parsers: prometheus-client's strict
//! OpenMetrics parser (which rejects a missing `# EOF`, a counter without `_total`,
//! buckets that are not cumulative, a unit that is not the name's suffix) and promtool's
//! Prometheus text-format parser (what a node exporter's textfile collector and a push
//! gateway use). Every figure must equal the JSON's, and a figure that is null in the
//! JSON must have no line.
//!
//! The parsers come from outside: `pip install prometheus-client` (or apt-get install
//! python3-prometheus-client) and apt-get install prometheus (promtool). A test whose
//! parser is missing says so and skips. `SOCKBENCH_PYTHON` names the Python to use.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::{assert_success, Sandbox};
use serde_json::Value;

/// One parsed sample.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: Value,
}

/// What the parser read: the families (name, type, unit, help) and every sample in
/// order.
struct Parsed {
    families: Vec<(String, String, String, String)>,
    samples: Vec<Sample>,
}

impl Parsed {
    /// The samples called `name` whose labels, less `le`, are `labels`.
    fn of(&self, name: &str, labels: &BTreeMap<String, String>) -> Vec<&Sample> {
        self.samples
            .iter()
            .filter(|s| {
                let mut l = s.labels.clone();
                l.remove("le");
                s.name == name && &l == labels
            })
            .collect()
    }

    /// The one value of `name` for `labels`, or None if there is no such line.
    fn value(&self, name: &str, labels: &BTreeMap<String, String>) -> Option<&Value> {
        let found = self.of(name, labels);
        assert!(found.len() <= 1, "{name} {labels:?} twice: {found:?}");
        found.first().map(|s| &s.value)
    }
}

/// Parse `text` with the strict parser; panic with its message if it rejects it.
fn parse(py: &str, text: &str) -> Parsed {
    let families = crate::common::openmetrics_families(py, text)
        .unwrap_or_else(|e| panic!("the OpenMetrics parser rejected the output: {e}\n{text}"));
    let mut parsed = Parsed {
        families: Vec::new(),
        samples: Vec::new(),
    };
    for f in families {
        let s = |k: &str| f[k].as_str().unwrap().to_string();
        parsed
            .families
            .push((s("name"), s("type"), s("unit"), s("help")));
        for x in f["samples"].as_array().unwrap() {
            parsed.samples.push(Sample {
                name: x["name"].as_str().unwrap().into(),
                labels: serde_json::from_value(x["labels"].clone()).unwrap(),
                value: x["value"].clone(),
            });
        }
    }
    parsed
}

/// The labels a result's series must carry, from its JSON.
fn labels(r: &Value) -> BTreeMap<String, String> {
    let o = &r["options"];
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let mut l = BTreeMap::new();
    for (k, v) in [
        ("workload", &r["workload"]),
        ("transport", &r["transport"]),
        ("engine", &r["engine"]),
        ("size_bytes", &r["size_bytes"]),
        ("parallel", &o["parallel"]),
        ("sndbuf_bytes", &o["sndbuf_bytes"]),
        ("rcvbuf_bytes", &o["rcvbuf_bytes"]),
        ("send", &o["send"]),
        ("recv", &o["recv"]),
        ("runtime", &o["runtime"]),
    ] {
        if !v.is_null() {
            l.insert(k.to_string(), text(v));
        }
    }
    l
}

/// The scalar samples and the JSON figure each must equal (times the factor); the
/// figure null means no line.
const FIGURES: [(&str, &str, f64); 17] = [
    ("sockbench_sent_bytes_total", "bytes_sent", 1.0),
    ("sockbench_received_bytes_total", "bytes_received", 1.0),
    ("sockbench_sent_messages_total", "messages_sent", 1.0),
    (
        "sockbench_received_messages_total",
        "messages_received",
        1.0,
    ),
    ("sockbench_lost_messages_total", "messages_lost", 1.0),
    ("sockbench_lost_requests_total", "requests_lost", 1.0),
    ("sockbench_lost_replies_total", "replies_lost", 1.0),
    ("sockbench_late_replies_total", "replies_late", 1.0),
    (
        "sockbench_reordered_messages_total",
        "messages_reordered",
        1.0,
    ),
    (
        "sockbench_duplicated_messages_total",
        "messages_duplicated",
        1.0,
    ),
    (
        "sockbench_udp_receive_buffer_errors_total",
        "udp_receive_buffer_errors",
        1.0,
    ),
    (
        "sockbench_received_bytes_per_second",
        "bytes_per_second",
        1.0,
    ),
    (
        "sockbench_received_messages_per_second",
        "messages_per_second",
        1.0,
    ),
    ("sockbench_delivered_ratio", "delivered_fraction", 1.0),
    (
        "sockbench_sender_cpu_seconds_per_byte",
        "sender_cpu_seconds_per_gb",
        1e-9,
    ),
    (
        "sockbench_receiver_cpu_seconds_per_byte",
        "receiver_cpu_seconds_per_gb",
        1e-9,
    ),
    (
        "sockbench_round_trip_cpu_seconds",
        "cpu_seconds_per_round_trip",
        1.0,
    ),
];

/// Equal within the rounding of one multiplication.
fn close(got: f64, want: f64) -> bool {
    got == want || (got - want).abs() <= want.abs() * 1e-12
}

/// Run `sockbench ARGS` exporting both OpenMetrics and JSON; parse the OpenMetrics with
/// the strict parser and check it against the JSON, figure by figure. Returns the text,
/// what the parser read and the JSON. None if the parser is not installed.
fn run_and_check(sb: &Sandbox, args: &[&str]) -> Option<(String, Parsed, Value)> {
    let py = crate::common::openmetrics_python()?;
    let prom = sb.path().join("out.prom");
    let json = sb.path().join("out.json");
    let out = sb
        .sockbench()
        .args(args)
        .args(["-q", "--export-openmetrics"])
        .arg(&prom)
        .arg("--export-json")
        .arg(&json)
        .output()
        .unwrap();
    assert_success(&out);
    let text = std::fs::read_to_string(&prom).unwrap();
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let parsed = parse(&py, &text);
    check(&parsed, &report);
    Some((text, parsed, report))
}

/// Everything that must hold for any report.
fn check(p: &Parsed, report: &Value) {
    // No two series alike.
    let mut seen = HashSet::new();
    for s in &p.samples {
        assert!(
            seen.insert((s.name.clone(), format!("{:?}", s.labels))),
            "duplicate series {s:?}"
        );
        assert!(s.name.starts_with("sockbench_"), "{}", s.name);
    }
    // Metadata: help everywhere, the unit that ends the name.
    for (name, kind, unit, help) in &p.families {
        assert!(!help.is_empty(), "{name} has no HELP");
        let want = [
            "bytes_per_second",
            "seconds_per_byte",
            "bytes",
            "seconds",
            "ratio",
        ]
        .into_iter()
        .find(|u| name.ends_with(&format!("_{u}")))
        .unwrap_or("");
        assert_eq!(unit, want, "{name}'s unit");
        assert!(
            ["counter", "gauge", "histogram"].contains(&kind.as_str()),
            "{name} {kind}"
        );
    }
    let version: BTreeMap<String, String> = [(
        "version".to_string(),
        report["tool"]["version"].as_str().unwrap().to_string(),
    )]
    .into();
    assert_eq!(
        p.value("sockbench_build_info", &version),
        Some(&Value::from(1))
    );

    let results = report["body"]["results"].as_array().unwrap();
    assert!(!results.is_empty());
    for r in results {
        let l = labels(r);
        let failed = !r["error"].is_null();
        assert_eq!(
            p.value("sockbench_scenario_failed", &l),
            Some(&Value::from(u64::from(failed))),
            "{l:?}"
        );
        let runs = r["runs"].as_array().unwrap().len();
        if failed || runs == 0 {
            let any = p
                .samples
                .iter()
                .filter(|s| s.name != "sockbench_scenario_failed")
                .any(|s| {
                    s.labels
                        .iter()
                        .all(|(k, v)| k == "le" || l.get(k) == Some(v))
                });
            assert!(!any, "a scenario without figures has figures: {l:?}");
            continue;
        }
        assert_eq!(
            p.value("sockbench_runs_total", &l),
            Some(&Value::from(runs)),
            "{l:?}"
        );
        for (name, key, factor) in FIGURES {
            let got = p.value(name, &l);
            match (&r[key], got) {
                (Value::Null, None) => {}
                (Value::Null, Some(v)) => panic!("{name} = {v} for a null {key} ({l:?})"),
                (want, None) => panic!("{name} missing, {key} = {want} ({l:?})"),
                (want, Some(got)) if factor == 1.0 && want.is_u64() => {
                    assert_eq!(got, want, "{name} ({l:?})");
                }
                (want, Some(got)) => {
                    let (g, w) = (got.as_f64().unwrap(), want.as_f64().unwrap() * factor);
                    assert!(close(g, w), "{name} = {g}, {key} x {factor} = {w} ({l:?})");
                }
            }
        }
        check_latencies(p, r, &l);
    }
}

/// Every latency of a result as a histogram in seconds: cumulative buckets at the JSON's
/// bounds, `+Inf` and `_count` equal to the count, `_sum` the mean times the count.
fn check_latencies(p: &Parsed, r: &Value, l: &BTreeMap<String, String>) {
    let latencies = r["latencies"].as_object().unwrap();
    for (name, lat) in latencies {
        let fam = format!("sockbench_{name}_latency_seconds");
        let count = lat["count"].as_u64().unwrap();
        assert!(count > 0, "{name}");
        assert_eq!(
            p.value(&format!("{fam}_count"), l),
            Some(&Value::from(count)),
            "{fam} ({l:?})"
        );
        let sum = p.value(&format!("{fam}_sum"), l).unwrap().as_f64().unwrap();
        let want = lat["mean_ns"].as_f64().unwrap() * count as f64 / 1e9;
        assert!(close(sum, want), "{fam}_sum {sum}, mean x count {want}");

        let buckets = p.of(&format!("{fam}_bucket"), l);
        let le: Vec<&str> = buckets.iter().map(|b| b.labels["le"].as_str()).collect();
        assert_eq!(le.last(), Some(&"+Inf"), "{fam}: {le:?}");
        assert_eq!(buckets.last().unwrap().value, Value::from(count));
        let mut previous = (0.0f64, 0u64);
        for b in &buckets {
            let le = &b.labels["le"];
            assert!(
                le == "+Inf" || le.contains('.') || le.contains('e'),
                "le {le} is not a canonical float"
            );
            let bound: f64 = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            let n = b.value.as_u64().unwrap();
            assert!(bound > previous.0 && n >= previous.1, "{fam}: {le} {n}");
            previous = (bound, n);
        }
        // The JSON's buckets (non-cumulative, in ns) are all there, summed up.
        let mut cumulative = 0;
        let json_buckets = r["latency_buckets"][name].as_array().unwrap();
        assert!(!json_buckets.is_empty(), "{name} has buckets");
        for jb in json_buckets {
            cumulative += jb["count"].as_u64().unwrap();
            let seconds = jb["le_ns"].as_f64().unwrap() / 1e9;
            let found = buckets
                .iter()
                .find(|b| b.labels["le"].parse::<f64>().ok() == Some(seconds))
                .unwrap_or_else(|| panic!("{fam}: no bucket at {seconds} s"));
            assert_eq!(found.value, Value::from(cumulative), "{fam} le {seconds}");
        }
        assert_eq!(cumulative, count, "{name}: the buckets hold every sample");
    }
    // No histogram for a latency this result does not have.
    let histograms = p
        .samples
        .iter()
        .filter(|s| s.name.ends_with("_latency_seconds_count") && &s.labels == l)
        .count();
    assert_eq!(histograms, latencies.len(), "{l:?}");
}

#[test]
fn stream_over_tcp_and_unix_at_two_sizes_parses_and_matches_the_json() {
    let sb = Sandbox::new();
    let Some((text, p, report)) = run_and_check(
        &sb,
        &[
            "stream", "-t", "tcp,unix", "-s", "4K,64K", "-d", "0.2", "-w", "0",
        ],
    ) else {
        return;
    };
    let received = p
        .samples
        .iter()
        .filter(|s| s.name == "sockbench_received_bytes_total")
        .count();
    assert_eq!(received, 4);
    for r in report["body"]["results"].as_array().unwrap() {
        assert!(r["bytes_received"].as_u64().unwrap() > 0);
    }
    // Nothing is lost on a stream socket: no loss line at all, not a 0.
    assert!(!text.contains("sockbench_lost_messages"), "{text}");
    assert!(!text.contains("_latency_seconds"), "{text}");
    assert!(text.ends_with("\n# EOF\n"));

    // The saved report renders the same text, and stdout gets it too.
    let again = sb
        .sockbench()
        .args(["report"])
        .arg(sb.path().join("out.json"))
        .args(["--format", "openmetrics"])
        .output()
        .unwrap();
    assert_success(&again);
    assert_eq!(String::from_utf8(again.stdout).unwrap(), text);
}

#[test]
fn pingpong_latency_is_a_histogram_in_seconds_and_udp_counts_its_losses() {
    let sb = Sandbox::new();
    let Some((_, p, report)) =
        run_and_check(&sb, &["pingpong", "-t", "tcp,udp", "-d", "0.2", "-w", "0"])
    else {
        return;
    };
    let results = report["body"]["results"].as_array().unwrap();
    for r in results {
        assert!(r["latencies"]["round_trip"]["count"].as_u64().unwrap() > 0);
        let l = labels(r);
        let lost = p.value("sockbench_lost_messages_total", &l);
        if r["transport"] == "udp" {
            assert!(lost.is_some(), "udp pingpong counts what it lost");
        } else {
            assert!(lost.is_none(), "tcp loses nothing: no line");
        }
        assert!(p.value("sockbench_round_trip_cpu_seconds", &l).is_some());
    }
    let fam = p
        .families
        .iter()
        .find(|f| f.0 == "sockbench_round_trip_latency_seconds")
        .unwrap();
    assert_eq!((fam.1.as_str(), fam.2.as_str()), ("histogram", "seconds"));
}

#[test]
fn udp_rate_has_a_loss_line() {
    let sb = Sandbox::new();
    let Some((_, p, report)) = run_and_check(&sb, &["rate", "-t", "udp", "-d", "0.2", "-w", "0"])
    else {
        return;
    };
    let l = labels(&report["body"]["results"][0]);
    assert_eq!(
        p.value("sockbench_lost_messages_total", &l),
        Some(&report["body"]["results"][0]["messages_lost"])
    );
    assert!(p.value("sockbench_delivered_ratio", &l).is_some());
}

#[test]
fn connect_has_one_histogram_per_latency() {
    let sb = Sandbox::new();
    let Some((_, p, report)) = run_and_check(&sb, &["connect", "-d", "0.2", "-w", "0"]) else {
        return;
    };
    let names = report["body"]["results"][0]["latencies"]
        .as_object()
        .unwrap();
    assert!(names.contains_key("connect"), "{names:?}");
    for name in names.keys() {
        let fam = format!("sockbench_{name}_latency_seconds");
        assert!(p.families.iter().any(|f| f.0 == fam && f.1 == "histogram"));
    }
}

#[test]
fn two_runs_add_up_and_stdout_gets_the_same_text() {
    let sb = Sandbox::new();
    let Some(py) = crate::common::openmetrics_python() else {
        return;
    };
    let prom = sb.path().join("runs.prom");
    let json = sb.path().join("runs.json");
    let out = sb
        .sockbench()
        .args([
            "stream", "-t", "unix", "-d", "0.2", "-w", "0", "--runs", "2",
        ])
        .args(["-q", "--format", "openmetrics", "--export-openmetrics"])
        .arg(&prom)
        .arg("--export-json")
        .arg(&json)
        .output()
        .unwrap();
    assert_success(&out);
    let text = std::fs::read_to_string(&prom).unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), text);
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let p = parse(&py, &text);
    check(&p, &report);
    let r = &report["body"]["results"][0];
    let l = labels(r);
    assert_eq!(p.value("sockbench_runs_total", &l), Some(&Value::from(2)));
    let per_run: u64 = r["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["bytes_received"].as_u64().unwrap())
        .sum();
    assert_eq!(
        p.value("sockbench_received_bytes_total", &l),
        Some(&Value::from(per_run))
    );
}

#[test]
fn the_prometheus_text_parser_reads_it_and_only_counters_lose_their_metadata() {
    // promtool check metrics parses the Prometheus text format 0.0.4, as the node
    // exporter's textfile collector and the push gateway do; exit 1 is a parse error,
    // 3 a lint finding.
    if !Command::new("promtool")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("skipped: promtool is not installed (apt-get install prometheus)");
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .sockbench()
        .args(["pingpong", "-t", "tcp,udp", "-d", "0.2", "-w", "0"])
        .args(["-q", "--format", "openmetrics"])
        .output()
        .unwrap();
    assert_success(&out);
    let checked = promtool(sb.path(), &out.stdout);
    assert!(
        matches!(checked.status.code(), Some(0 | 3)),
        "promtool could not parse it: {}",
        String::from_utf8_lossy(&checked.stderr)
    );
    // That format names a counter's family with its _total, so our counters' TYPE and
    // HELP (on the name without _total) do not reach them: they read as untyped.
    let findings = String::from_utf8_lossy(&checked.stdout).into_owned()
        + &String::from_utf8_lossy(&checked.stderr);
    for line in findings.lines().filter(|l| !l.is_empty()) {
        assert!(
            line.ends_with("_total no help text"),
            "unexpected finding: {line}"
        );
    }
    assert!(
        findings.contains("sockbench_received_bytes_total no help text"),
        "{findings}"
    );
}

/// `promtool check metrics` with `text` on stdin.
fn promtool(dir: &Path, text: &[u8]) -> std::process::Output {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), text).unwrap();
    child.wait_with_output().unwrap()
}

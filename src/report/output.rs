//! What every output asks of a document, whatever command wrote it. The six formats
//! (table, JSON, CSV, Markdown, HTML, OpenMetrics) are each written once
//! ([`super::exporter`]) over [`Rendered`]: a kind of document gives its tables, charts,
//! records and metrics in its own room, and the formats lay them out.

use crate::environment::Environment;
use crate::report::chart::Chart;
use crate::report::grid::Grid;
use crate::report::openmetrics::Family;
use crate::report::{Kind, Tool};
use crate::vocab::View;

/// The envelope as the outputs show it, borrowed from the document.
#[derive(Clone, Copy, Debug)]
pub struct Head<'a> {
    /// Which command wrote it.
    pub kind: Kind,
    /// The tool that wrote it.
    pub tool: &'a Tool,
    /// Its schema version.
    pub schema_version: u32,
    /// The command line.
    pub command: &'a [String],
    /// The machine, if recorded.
    pub environment: Option<&'a Environment>,
    /// Ctrl-C cut it short.
    pub interrupted: bool,
    /// Why it failed, if it did.
    pub error: Option<&'a str>,
    /// What to be careful of in the figures.
    pub warnings: &'a [String],
}

impl<'a> Head<'a> {
    /// The head of an envelope.
    pub fn of(kind: Kind, e: &'a crate::report::Envelope) -> Head<'a> {
        Head {
            kind,
            tool: &e.tool,
            schema_version: e.schema_version,
            command: &e.command,
            environment: e.environment.as_ref(),
            interrupted: e.interrupted,
            error: e.error.as_deref(),
            warnings: &e.warnings,
        }
    }
}

/// Rows for CSV: exact values in base units, an empty cell for an unknown one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Records {
    /// The column names.
    pub header: Vec<String>,
    /// One record per row of the document, as many cells as the header.
    pub rows: Vec<Vec<String>>,
}

/// How serious a line of the page's warnings is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Read the figures with care.
    Warning,
    /// Something failed.
    Failure,
}

/// A warning or failure of one part of a document (a scenario, a model, a pair).
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// How serious it is.
    pub severity: Severity,
    /// What it is about, in bold on the page.
    pub about: String,
    /// What happened.
    pub text: String,
}

/// A document as every output sees it.
pub trait Rendered {
    /// Its envelope.
    fn head(&self) -> Head<'_>;
    /// The document itself (`--format json`).
    ///
    /// # Errors
    /// Only if serialization fails.
    fn json(&self) -> serde_json::Result<Vec<u8>>;
    /// Its tables, for the terminal, Markdown and the HTML page, with the notes under
    /// each.
    fn tables(&self, view: &View) -> Vec<Grid>;
    /// Its charts, for the HTML page.
    fn charts(&self) -> Vec<Chart> {
        Vec::new()
    }
    /// Its rows for CSV.
    fn records(&self) -> Records;
    /// Its figures as OpenMetrics families (the tool's own `build_info` is added by
    /// the format).
    fn metrics(&self) -> Vec<Family>;
    /// What it holds, counted for a person (`3 scenarios`, `8 models`).
    fn count(&self) -> String;
    /// Why the page has no charts, when it has nothing to chart.
    fn nothing_to_chart(&self) -> Option<String>;
    /// The warnings and failures of its parts, beyond the envelope's own.
    fn findings(&self) -> Vec<Finding> {
        Vec::new()
    }
    /// How it ran, for the page's environment section, beside the machine's facts.
    fn setting(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// What was left out and why, one line each.
    fn left_out(&self) -> Vec<String> {
        Vec::new()
    }
    /// Its latency histograms as a `--histogram` file (JSON, or else CSV).
    ///
    /// # Errors
    /// A kind of document without histograms has none to write.
    fn histograms(&self, _json: bool) -> anyhow::Result<Vec<u8>> {
        anyhow::bail!(
            "a {} document has no latency histograms to write",
            self.head().kind
        )
    }
    /// The page's title.
    fn title(&self) -> String {
        format!("sockbench {} report", self.head().kind)
    }
}

/// `value` as pretty JSON and a final newline (a document's `--format json`).
///
/// # Errors
/// Only if serialization fails.
pub fn pretty(value: &impl serde::Serialize) -> serde_json::Result<Vec<u8>> {
    let mut out = serde_json::to_vec_pretty(value)?;
    out.push(b'\n');
    Ok(out)
}

/// `n` things, named in the singular and made plural as needed (`1 scenario`,
/// `3 scenarios`).
pub fn counted(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

/// The scalar fields of a JSON object, flattened in order: a nested object's fields
/// joined to its name by `_` (`counters_connections`), arrays and nested lists left out.
fn leaves(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
    let Some(o) = value.as_object() else {
        return;
    };
    for (k, v) in o {
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}_{k}")
        };
        match v {
            serde_json::Value::Object(_) => leaves(&name, v, out),
            serde_json::Value::Array(_) => {}
            _ => out.push((name, v.clone())),
        }
    }
}

/// CSV records of `rows` (each a JSON object: a document's body, or one of its rows):
/// one column per scalar field any row has (or, with no row, `template` has), in the
/// order first seen (a JSON object's keys are in alphabetical order); text passes
/// [`crate::vocab::text::terminal`], an unknown (null or absent) figure is an empty cell.
pub fn records_of(rows: &[serde_json::Value], template: &serde_json::Value) -> Records {
    let mut named = Vec::new();
    leaves("", template, &mut named);
    let flat: Vec<Vec<(String, serde_json::Value)>> = (rows.iter())
        .map(|r| {
            let mut out = Vec::new();
            leaves("", r, &mut out);
            out
        })
        .collect();
    let mut header: Vec<String> = Vec::new();
    let seen = match rows.is_empty() {
        true => named.iter().collect::<Vec<_>>(),
        false => flat.iter().flatten().collect(),
    };
    for (k, _) in seen {
        if !header.contains(k) {
            header.push(k.clone());
        }
    }
    let cell = |v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => crate::vocab::text::terminal(s),
        Some(serde_json::Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    };
    let rows = (flat.iter())
        .map(|r| {
            (header.iter())
                .map(|h| cell(r.iter().find(|(k, _)| k == h).map(|(_, v)| v)))
                .collect()
        })
        .collect();
    Records { header, rows }
}

/// OpenMetrics gauges of `rows` (each its labels and a JSON object): one family per
/// numeric field, `sockbench_<kind>_<field>`, with the unit its name ends in
/// (`_seconds`, `_bytes`); a field that is null or not a number in a row has no sample
/// for it. `help` says what a row is.
pub fn gauges(
    kind: Kind,
    help: &str,
    rows: &[(crate::report::openmetrics::Labels, serde_json::Value)],
) -> Vec<Family> {
    use crate::report::openmetrics::{Type, Value};
    let mut families: Vec<Family> = Vec::new();
    for (labels, row) in rows {
        let mut flat = Vec::new();
        leaves("", row, &mut flat);
        for (field, v) in flat {
            let (base, per) = in_base_units(&field);
            let value = match (v.as_u64(), v.as_f64()) {
                (Some(n), _) if per == 1.0 => Value::Int(n),
                (_, Some(x)) => Value::Float(x / per),
                _ => continue,
            };
            let name = format!(
                "sockbench_{}_{}",
                metric_word(kind.name()),
                metric_word(&base)
            );
            let i = match families.iter().position(|f| f.name == name) {
                Some(i) => i,
                None => {
                    let unit = ["seconds", "bytes"]
                        .into_iter()
                        .find(|u| name.ends_with(&format!("_{u}")));
                    families.push(Family::new(
                        name,
                        Type::Gauge,
                        unit,
                        format!(
                            "{help}: its {} (the JSON document's {field}{}).",
                            base.replace('_', " "),
                            match per {
                                1.0 => String::new(),
                                8.0 => " / 8".to_string(),
                                p => format!(" / {p:e}"),
                            }
                        ),
                    ));
                    families.len() - 1
                }
            };
            families[i].push(labels.clone(), value);
        }
    }
    families
}

/// A JSON field's name and the divisor that put its figure in base units, as OpenMetrics
/// wants them: a time in `ns`, `us` or `ms` becomes `..._seconds` (the unit last), bits
/// become bytes (`bits_per_second` is `bytes_per_second`); anything else is as it is.
fn in_base_units(field: &str) -> (String, f64) {
    let mut words: Vec<&str> = field.split('_').collect();
    let time = [("ns", 1e9), ("us", 1e6), ("ms", 1e3)];
    if let Some((i, per)) = (words.iter().enumerate())
        .find_map(|(i, w)| time.iter().find(|(u, _)| u == w).map(|(_, per)| (i, *per)))
    {
        words.remove(i);
        words.push("seconds");
        return (words.join("_"), per);
    }
    if let Some(i) = words.iter().position(|w| *w == "bits") {
        words[i] = "bytes";
        return (words.join("_"), 8.0);
    }
    (field.to_string(), 1.0)
}

/// A name as a word of a metric name: `[a-z0-9_]`, anything else as `_`.
fn metric_word(name: &str) -> String {
    name.chars()
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c.to_ascii_lowercase(),
            false => '_',
        })
        .collect()
}

/// A table of two columns, a figure's name and its value, for a document of one thing
/// (a server, a load, a swarm).
pub fn pairs(title: Option<String>, rows: Vec<(&str, String)>) -> Grid {
    use crate::report::grid::Align;
    Grid {
        title,
        headers: vec!["figure".into(), "value".into()],
        align: vec![Align::Left, Align::Left],
        rows: rows
            .into_iter()
            .map(|(k, v)| vec![k.to_string(), v])
            .collect(),
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_flatten_objects_leave_lists_out_and_leave_unknowns_empty() {
        let rows = [
            serde_json::json!({"a": 1, "b": {"c": "x\u{1b}", "d": null}, "l": [1, 2]}),
            serde_json::json!({"a": 2.5, "e": true}),
        ];
        let r = records_of(&rows, &serde_json::json!({}));
        assert_eq!(r.header, ["a", "b_c", "b_d", "e"]);
        assert_eq!(r.rows[0], ["1", "x\\x1b", "", ""]);
        assert_eq!(r.rows[1], ["2.5", "", "", "true"]);
        // No row: the template names the columns.
        let none = records_of(&[], &serde_json::json!({"z": 0, "y": {"x": ""}}));
        assert_eq!(
            (none.header, none.rows.len()),
            (vec!["y_x".to_string(), "z".into()], 0)
        );
    }

    #[test]
    fn times_and_bits_go_out_in_base_units() {
        assert_eq!(in_base_units("p50_ns"), ("p50_seconds".into(), 1e9));
        assert_eq!(
            in_base_units("latency_ns_p99"),
            ("latency_p99_seconds".into(), 1e9)
        );
        assert_eq!(in_base_units("connect_us"), ("connect_seconds".into(), 1e6));
        assert_eq!(
            in_base_units("bits_per_second"),
            ("bytes_per_second".into(), 8.0)
        );
        assert_eq!(
            in_base_units("syscalls_per_mb"),
            ("syscalls_per_mb".into(), 1.0)
        );
        assert_eq!(in_base_units("requests"), ("requests".into(), 1.0));
        let rows = [(
            vec![],
            serde_json::json!({"p50_ns": 1500, "bits_per_second": 8e9, "n": 3}),
        )];
        let text =
            crate::report::openmetrics::exposition("0.1.0", &gauges(Kind::Load, "A load", &rows));
        let value = |name: &str| -> f64 {
            let line = (text.lines())
                .find(|l| l.starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no {name}: {text}"));
            line[name.len() + 1..].parse().unwrap()
        };
        assert!(
            (value("sockbench_load_p50_seconds") - 1.5e-6).abs() < 1e-15,
            "{text}"
        );
        assert_eq!(value("sockbench_load_bytes_per_second"), 1e9, "{text}");
        assert_eq!(value("sockbench_load_n"), 3.0, "{text}");
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(
            samples
                .iter()
                .all(|l| !l.contains("_ns") && !l.contains("bits")),
            "{text}"
        );
        assert!(
            text.contains("its p50 seconds (the JSON document's p50_ns / 1e9)"),
            "{text}"
        );
    }

    #[test]
    fn gauges_are_one_family_per_numeric_field_with_the_unit_of_its_name() {
        let rows = [
            (
                vec![("model", "epoll".to_string())],
                serde_json::json!({"requests": 5, "busy_seconds": 0.5, "url": "x", "bytes": {"sent_bytes": 7}}),
            ),
            (
                vec![("model", "poll".to_string())],
                serde_json::json!({"requests": 6, "busy_seconds": null}),
            ),
        ];
        let f = gauges(Kind::Serve, "A server", &rows);
        let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
        // In the order of the JSON object's keys (alphabetical).
        assert_eq!(
            names,
            [
                "sockbench_serve_busy_seconds",
                "sockbench_serve_bytes_sent_bytes",
                "sockbench_serve_requests",
            ]
        );
        assert_eq!(f[2].samples.len(), 2);
        assert_eq!(f[0].samples.len(), 1, "a null has no sample");
        assert_eq!(
            (f[0].unit, f[1].unit, f[2].unit),
            (Some("seconds"), Some("bytes"), None)
        );
        let text = crate::report::openmetrics::exposition("0.1.0", &f);
        assert!(
            text.contains("sockbench_serve_requests{model=\"poll\"} 6\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"));
    }
}

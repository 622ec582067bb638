//! The report: plain data that every exporter reads, and the exporters themselves.
//!
//! The JSON shape is the public interface ([`document`], schema/document.schema.json,
//! `SCHEMA_VERSION`): units live in key names, counters are unsigned, an unknown figure
//! is `null`. Exporters never measure and workloads never format.

pub mod breakdown;
pub mod chart;
pub mod csv;
pub mod envelope;
pub mod export;
pub mod grid;
pub mod histogram;
pub mod html;
pub mod json;
pub mod markdown;
pub mod openmetrics;
pub mod output;
pub mod placement;
pub mod progress;
pub mod rankings;
pub mod rows;
#[cfg(test)]
pub mod sample;
pub mod table;

pub use crate::measure::headline::{Headline, Quantity};
pub use crate::measure::tcp_info::{TcpFigures, TcpInfo};
pub use envelope::{Envelope, Kind, Written};
pub use export::ExportManager;

use serde::{Deserialize, Serialize};

use crate::environment::Environment;
pub use crate::measure::latency::LatencyKind;
use crate::results::ScenarioResult;
use crate::scenario::{Layout, Skipped};
use crate::vocab::{Format, View};

/// Version of the JSON document's shape (every kind's); bumped on any change to it.
/// Version 10 added a swarm's placement and `--interval` lines to version 9; version 11
/// a relay's (`body.placement`, `results[].intervals`).
pub const SCHEMA_VERSION: u32 = 11;

/// The oldest version of the one document this sockbench reads: every version since
/// only added optional fields.
pub const OLDEST_DOCUMENT: u32 = 9;

/// The whole report of a measuring command (`stream`, `pingpong`, `rate`, `connect`,
/// the suite), as every exporter reads it. Written and read as a [`Document`] of its
/// kind: the envelope, and the placement, results, skips and rankings as the body.
#[derive(Clone, Debug)]
pub struct Report {
    /// Version of this shape.
    pub schema_version: u32,
    /// The tool that wrote it.
    pub tool: Tool,
    /// Which command wrote it.
    pub kind: Kind,
    /// The command line, argv as given.
    pub command: Vec<String>,
    /// The machine (None: a document that did not record it).
    pub environment: Option<Environment>,
    /// When the command started (RFC 3339, UTC).
    pub started_at: Option<String>,
    /// When it ended.
    pub ended_at: Option<String>,
    /// Where the roles ran.
    pub placement: PlacementInfo,
    /// One object per finished scenario, in run order.
    pub results: Vec<ScenarioResult>,
    /// Combinations left out because they cannot work, with the reason.
    pub skipped: Vec<Skipped>,
    /// Warnings about the whole run.
    pub warnings: Vec<String>,
    /// True if Ctrl-C or SIGTERM stopped the run early (results hold what finished).
    pub interrupted: bool,
    /// Why the run failed, if it did; null otherwise.
    pub error: Option<String>,
    /// What the run ranked: the engines of each scenario run under several (`-e`), the
    /// suite's transports at each size; a winner only beyond the noise of the runs, none
    /// from single runs (see [`rankings`]).
    pub rankings: Vec<crate::measure::ranking::Ranking>,
    /// Table layout (not part of the JSON: the kind says it).
    pub layout: Layout,
}

impl Serialize for Report {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // The document's shape ([`Document`], whose schema is committed), borrowed.
        #[derive(Serialize)]
        struct Body<'a> {
            placement: &'a PlacementInfo,
            results: &'a [ScenarioResult],
            skipped: &'a [Skipped],
            rankings: &'a [crate::measure::ranking::Ranking],
        }
        #[derive(Serialize)]
        struct Wire<'a> {
            tool: &'a Tool,
            schema_version: u32,
            command: &'a [String],
            environment: &'a Option<Environment>,
            started_at: &'a Option<String>,
            ended_at: &'a Option<String>,
            interrupted: bool,
            error: &'a Option<String>,
            warnings: &'a [String],
            kind: Kind,
            body: Body<'a>,
        }
        Wire {
            tool: &self.tool,
            schema_version: self.schema_version,
            command: &self.command,
            environment: &self.environment,
            started_at: &self.started_at,
            ended_at: &self.ended_at,
            interrupted: self.interrupted,
            error: &self.error,
            warnings: &self.warnings,
            kind: self.kind,
            body: Body {
                placement: &self.placement,
                results: &self.results,
                skipped: &self.skipped,
                rankings: &self.rankings,
            },
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Report {
    /// A measuring command's document read back (any other kind is refused, named).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Report, D::Error> {
        let (e, kind, body) = envelope::read_body::<D, envelope::BenchBody>(
            d,
            Kind::is_bench,
            "a report of the measuring commands (stream, pingpong, rate, connect, suite)",
        )?;
        Ok(Report::of(e, kind, body))
    }
}

impl Report {
    /// A measuring command's report from its document's envelope, kind and body.
    pub fn of(e: Envelope, kind: Kind, body: envelope::BenchBody) -> Report {
        Report {
            schema_version: e.schema_version,
            tool: e.tool,
            kind,
            command: e.command,
            environment: e.environment,
            started_at: e.started_at,
            ended_at: e.ended_at,
            placement: body.placement,
            results: body.results,
            skipped: body.skipped,
            warnings: e.warnings,
            interrupted: e.interrupted,
            error: e.error,
            rankings: body.rankings,
            layout: kind.layout(),
        }
    }
}

/// Where the roles of every scenario ran.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlacementInfo {
    /// `threads` (both roles in this process), `processes` (the other role in a child
    /// process) or `server` (the other role on a `sockbench server`).
    pub name: String,
    /// The role that ran in the other process or on the server (null with threads); with
    /// `bidir`, its role in the first half of the streams.
    pub other_role: Option<crate::vocab::Role>,
    /// `--bidir`: both directions at once.
    pub bidir: bool,
    /// The server as the client named it (HOST[:PORT]); null unless `server`.
    pub server: Option<String>,
    /// The server's machine, as it reported it (text cleaned of control characters);
    /// null unless `server`.
    pub server_environment: Option<Environment>,
}

/// Name and version of the tool.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Tool {
    /// Always "sockbench".
    pub name: String,
    /// The crate version.
    pub version: String,
}

impl ScenarioResult {
    /// The headline figure of each run that has it (its workload's
    /// [`crate::workload::Spec::headline`]): what `compare` tests and the rankings rank.
    pub fn headline_runs(&self) -> Vec<f64> {
        let spec = crate::workload::spec(self.workload);
        (self.runs.iter())
            .filter_map(|run| spec.headline_of(run))
            .filter(|v| v.is_finite())
            .collect()
    }

    /// The headline figure of its workload.
    pub fn headline(&self) -> Headline {
        crate::workload::spec(self.workload).headline()
    }
}

/// Turns a document, of any kind, into bytes of one format.
pub trait Exporter {
    /// Serialize the document.
    ///
    /// # Errors
    /// Only if serialization itself fails.
    fn serialize(&self, doc: &dyn output::Rendered) -> anyhow::Result<Vec<u8>>;
}

impl output::Rendered for Report {
    fn head(&self) -> output::Head<'_> {
        output::Head {
            kind: self.kind,
            tool: &self.tool,
            schema_version: self.schema_version,
            command: &self.command,
            environment: self.environment.as_ref(),
            interrupted: self.interrupted,
            error: self.error.as_deref(),
            warnings: &self.warnings,
        }
    }

    fn json(&self) -> serde_json::Result<Vec<u8>> {
        output::pretty(self)
    }

    fn tables(&self, view: &View) -> Vec<grid::Grid> {
        grid::build(self, view)
    }

    fn charts(&self) -> Vec<chart::Chart> {
        chart::charts(self)
    }

    fn records(&self) -> output::Records {
        csv::records(self)
    }

    fn metrics(&self) -> Vec<openmetrics::Family> {
        openmetrics::families(self)
    }

    fn count(&self) -> String {
        output::counted(self.results.len(), "scenario")
    }

    fn nothing_to_chart(&self) -> Option<String> {
        self.results.is_empty().then(|| {
            "No results: this report holds no finished scenario, so there is nothing to chart."
                .to_string()
        })
    }

    fn findings(&self) -> Vec<output::Finding> {
        use output::{Finding, Severity};
        let mut out = Vec::new();
        for r in &self.results {
            for w in &r.warnings {
                out.push(Finding {
                    severity: Severity::Warning,
                    about: r.label(),
                    text: format!(" ({}): {}", w.kind, w.message),
                });
            }
            let failed = |text: String| Finding {
                severity: Severity::Failure,
                about: format!("{} {}", r.workload, r.label()),
                text,
            };
            if let Some(e) = &r.error {
                out.push(failed(format!(" failed: {e}")));
            } else if r.runs.is_empty() {
                out.push(failed(": no run finished".into()));
            }
        }
        out
    }

    fn setting(&self) -> Vec<(String, String)> {
        let p = &self.placement;
        let mut placement = p.name.clone();
        if let Some(role) = &p.other_role {
            let role = serde_json::to_value(role)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            placement.push_str(&format!(" (the {role} in the other process)"));
        }
        if p.bidir {
            placement.push_str(", both directions at once");
        }
        let mut rows = vec![("placement".to_string(), placement)];
        if let Some(server) = &p.server {
            rows.push(("server".into(), server.clone()));
        }
        if let Some(s) = &p.server_environment {
            rows.push(("server kernel".into(), s.kernel.clone()));
            rows.push((
                "server CPU".into(),
                s.cpu_model.clone().unwrap_or_else(|| "unknown".into()),
            ));
            rows.push(("server logical CPUs".into(), s.cpus.to_string()));
        }
        rows
    }

    fn left_out(&self) -> Vec<String> {
        (self.skipped.iter())
            .map(|s| {
                format!(
                    "{} {} {} ({}): {}",
                    s.workload,
                    s.transport,
                    crate::vocab::units::format_bytes(s.size_bytes),
                    s.engine,
                    s.reason
                )
            })
            .collect()
    }

    fn histograms(&self, json: bool) -> anyhow::Result<Vec<u8>> {
        histogram::render(self, json)
    }

    fn title(&self) -> String {
        match self.command.get(1) {
            Some(mode) if !mode.starts_with('-') => format!("sockbench {mode} report"),
            _ if self.layout == crate::scenario::Layout::Suite => "sockbench suite report".into(),
            _ => "sockbench report".to_string(),
        }
    }
}

/// Whether stdout in `format` is a JSON document, so that even an error before any run
/// is printed as one.
pub fn is_json(format: Format) -> bool {
    matches!(format, Format::Json)
}

/// Whether a document printed in `format` names each failed part's error under its
/// table (a table, Markdown), so stderr need not say it again.
pub fn names_errors(format: Format) -> bool {
    matches!(format, Format::Table | Format::Markdown)
}

/// Where a command that logs as it goes (`listen`) writes its log in `format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogStream {
    /// One JSON object per line on stdout, the summary document the last line.
    JsonLines,
    /// Text on stdout, above the summary table.
    Stdout,
    /// Text on stderr: stdout holds the summary document alone (CSV, Markdown, HTML,
    /// OpenMetrics).
    Stderr,
}

/// How a log goes with `format` ([`LogStream`]).
pub fn log_stream(format: Format) -> LogStream {
    match format {
        Format::Json => LogStream::JsonLines,
        Format::Table => LogStream::Stdout,
        Format::Csv | Format::Markdown | Format::Html | Format::Openmetrics => LogStream::Stderr,
    }
}

/// The exporter for a format; `view` shapes the tables for people.
pub fn exporter(format: Format, view: View) -> Box<dyn Exporter> {
    match format {
        Format::Table => Box::new(table::Table { view }),
        Format::Json => Box::new(json::Json),
        Format::Csv => Box::new(csv::Csv),
        Format::Markdown => Box::new(markdown::Markdown { view }),
        Format::Html => Box::new(html::Html { view }),
        Format::Openmetrics => Box::new(openmetrics::OpenMetrics),
    }
}

//! `sockbench models`'s document: who drove the servers and how, each server model's
//! figures, and the models ranked by requests per second.

use serde::{Deserialize, Serialize};

use crate::report::envelope::{Envelope, Kind, Written};

/// Who drives the servers.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    /// `sockbench load` (the default).
    #[default]
    Builtin,
    /// ApacheBench.
    Ab,
    /// wrk.
    Wrk,
    /// nghttp2's h2load, in HTTP/1.1 mode.
    H2load,
}

/// One model's figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Row {
    /// The model.
    pub model: String,
    /// Why it did not run (not available here), or null.
    pub skipped: Option<String>,
    /// What went wrong when it ran, or null.
    pub error: Option<String>,
    /// Requests the driver counts as complete.
    pub requests_complete: Option<u64>,
    /// Requests the driver counts as failed.
    pub requests_failed: Option<u64>,
    /// Answers with a status other than 2xx, as the driver counts them.
    pub non_2xx: Option<u64>,
    /// The driver's requests per second.
    pub requests_per_second: Option<f64>,
    /// Median latency (null when the driver does not report it, as h2load).
    pub p50_ns: Option<u64>,
    /// 99th percentile latency (null when the driver does not report it).
    pub p99_ns: Option<u64>,
    /// Mean latency.
    pub mean_ns: Option<u64>,
    /// Requests the server says it answered (its own count, after it stopped).
    pub server_requests: Option<u64>,
    /// Server CPU (user + system): the server's own getrusage over its serving time
    /// (microseconds; it idles outside the driver's run), or where it gave none, from
    /// /proc/PID/stat over the driver's run (clock ticks of 10 ms, too coarse for a
    /// figure per request).
    pub server_cpu_seconds: Option<f64>,
    /// Server CPU per complete request.
    pub server_cpu_seconds_per_request: Option<f64>,
    /// The driver's wall time.
    pub driver_seconds: Option<f64>,
    /// Every run's requests per second, in order (the row's figures are the median
    /// run's).
    #[serde(default)]
    pub runs_requests_per_second: Vec<f64>,
}

/// What `models` measured: the body of its document (kind `models`). A document of a
/// command refused before it ran has the defaults and no rows.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModelsBody {
    /// Who drove the servers.
    pub driver: Driver,
    /// The driver's exact command line for the first model (the URL differs by model).
    pub driver_command: Vec<String>,
    /// Requests per model, or null when timed.
    pub requests: Option<u64>,
    /// Time per model, or null when counted.
    pub duration_seconds: Option<f64>,
    /// Connections.
    pub connections: u32,
    /// Keep-alive.
    pub keepalive: bool,
    /// Requests in flight per connection.
    pub pipeline: u32,
    /// Response body bytes.
    pub body_bytes: u64,
    /// Every server's accept queue.
    pub backlog: u32,
    /// CPU of the server and of the driver, or null when not pinned.
    pub cpus: Option<[usize; 2]>,
    /// Measured runs of each model (`--runs`).
    #[serde(default = "one")]
    pub runs: u32,
    /// One row per model.
    pub rows: Vec<Row>,
    /// The models ranked by requests per second: a winner only beyond the noise of their
    /// runs, none from single runs; null with fewer than two models that ran.
    #[serde(default)]
    pub ranking: Option<crate::measure::ranking::Ranking>,
}

/// `models`' document as it is made: the envelope (its warnings: what to be careful of
/// in the figures; `interrupted`: Ctrl-C cut it short) and the body.
#[derive(Clone, Debug)]
pub struct ModelsReport {
    /// What every document says of itself.
    pub envelope: Envelope,
    /// What the models measured.
    pub body: ModelsBody,
}

impl<'de> Deserialize<'de> for ModelsReport {
    /// A models document read back (any other kind is refused, named).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ModelsReport, D::Error> {
        let (envelope, _, body) =
            crate::report::envelope::read_body(d, |k| k == Kind::Models, "a models document")?;
        Ok(ModelsReport { envelope, body })
    }
}

impl ModelsReport {
    /// The document to write.
    pub fn document(&self) -> Written<'_, ModelsBody> {
        Written {
            envelope: &self.envelope,
            kind: Kind::Models,
            body: &self.body,
        }
    }
}

fn one() -> u32 {
    1
}

/// The models that ran, ranked by requests per second.
pub(crate) fn ranking(rows: &[Row]) -> Option<crate::measure::ranking::Ranking> {
    let entries: Vec<(String, Vec<f64>)> = (rows.iter())
        .filter(|r| r.error.is_none() && r.skipped.is_none())
        .map(|r| (r.model.clone(), r.runs_requests_per_second.clone()))
        .collect();
    crate::measure::ranking::rank(
        "by requests/s",
        "models",
        crate::measure::headline::Headline::rate("requests_per_second"),
        &entries,
    )
}

impl ModelsBody {
    /// `compare`'s rows: each model, judged by its requests per second in every run.
    pub fn rows(&self) -> Vec<crate::report::rows::Row> {
        (self.rows.iter())
            .map(|r| {
                let values = match r.runs_requests_per_second.is_empty() {
                    true => r.requests_per_second.into_iter().collect(),
                    false => r.runs_requests_per_second.clone(),
                };
                crate::report::rows::Row {
                    key: format!(
                        "{} {:?} c{} k{} p{} b{}",
                        r.model,
                        self.driver,
                        self.connections,
                        self.keepalive,
                        self.pipeline,
                        self.body_bytes
                    ),
                    label: format!("models {} under {}", r.model, self.driver.program()),
                    headline: crate::measure::headline::Headline::rate("requests_per_second"),
                    values: values.into_iter().filter(|v| v.is_finite()).collect(),
                    error: r.error.clone().or_else(|| r.skipped.clone()),
                }
            })
            .collect()
    }
}

impl Driver {
    pub(crate) fn parse(text: &str) -> Result<Driver, String> {
        match text.trim() {
            "builtin" | "sockbench" => Ok(Driver::Builtin),
            "ab" => Ok(Driver::Ab),
            "wrk" => Ok(Driver::Wrk),
            "h2load" => Ok(Driver::H2load),
            other => Err(format!(
                "unknown driver '{other}': use builtin, ab, wrk or h2load"
            )),
        }
    }

    pub(crate) fn program(self) -> &'static str {
        match self {
            Driver::Builtin => "sockbench",
            Driver::Ab => "ab",
            Driver::Wrk => "wrk",
            Driver::H2load => "h2load",
        }
    }

    pub(crate) fn package(self) -> &'static str {
        match self {
            Driver::Builtin => "sockbench",
            Driver::Ab => "apache2-utils",
            Driver::Wrk => "wrk",
            Driver::H2load => "nghttp2-client",
        }
    }
}

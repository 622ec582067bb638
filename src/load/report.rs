//! The load generator's JSON document ([`LoadReport`]) and how the threads' tallies
//! become it: rates over the measured interval, ab's connection-times rows, latency
//! percentiles, the generator's own CPU and the warnings that go with them.
//!
//! Conventions: units in key names, latencies in integer nanoseconds, counters as
//! integers, an unknown figure as null.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::tally::Tally;
use super::Spec;
use crate::measure::histogram::Latency;
use crate::report::envelope::{Envelope, Kind, Written};
use crate::vocab::units::{format_per_second, format_seconds};

/// Share of the generator threads' time above which the run is called CPU-bound.
pub const CPU_BOUND_SHARE: f64 = 0.9;

/// Failed requests by kind, as ab's "Failed requests" line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Failed {
    /// The connect for the request failed (refused, timed out, other).
    pub connect: u64,
    /// The connection failed before the full answer: reset, closed early, --timeout.
    pub read: u64,
    /// The answer's status line or headers were not HTTP.
    pub status: u64,
    /// Complete answers whose body length differs from the first answer's (as ab's
    /// "Length" failures; these are counted in `requests_complete` too).
    pub length: u64,
}

/// Failed requests by exact cause.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Causes {
    /// connect() refused (nothing listens; a Unix socket file with no listener).
    pub connect_refused: u64,
    /// connect() not complete within --timeout.
    pub connect_timeout: u64,
    /// connect() failed otherwise (unreachable, a full Unix listen queue, no descriptors).
    pub connect_error: u64,
    /// The connection was reset (or a write to it failed).
    pub read_reset: u64,
    /// The server closed the connection before the answer was complete.
    pub read_eof: u64,
    /// No complete answer within --timeout.
    pub read_timeout: u64,
    /// Reading failed otherwise, or requests behind a malformed answer.
    pub read_error: u64,
}

/// One row of ab's "Connection Times" table, in nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimesRow {
    /// Smallest.
    pub min_ns: u64,
    /// Mean.
    pub mean_ns: u64,
    /// Standard deviation.
    pub stddev_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

impl TimesRow {
    fn of(h: &Histogram<u64>) -> Option<TimesRow> {
        let l = Latency::of(h)?;
        Some(TimesRow {
            min_ns: l.min_ns,
            mean_ns: l.mean_ns,
            stddev_ns: l.stddev_ns,
            p50_ns: l.p50_ns,
            max_ns: l.max_ns,
        })
    }
}

/// ab's "Connection Times" rows, over complete requests (null when there are none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConnectionTimes {
    /// connect() start → connected; 0 on a reused keep-alive connection.
    pub connect: Option<TimesRow>,
    /// Connected (or, on a reused connection, the request's write start) → last byte.
    pub processing: Option<TimesRow>,
    /// Request fully written → first byte of the answer.
    pub waiting: Option<TimesRow>,
    /// Start (connect start, write start on a reused connection, or when the request
    /// was due under --rate) → last byte.
    pub total: Option<TimesRow>,
}

/// What `sockbench load` measured: the body of its document (kind `load`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadBody {
    /// The URL.
    pub url: String,
    /// Where the connections go: `tcp ADDR:PORT` or `unix PATH`.
    pub target: String,
    /// Method of every request.
    pub method: String,
    /// Connections open at once.
    pub connections: u32,
    /// Connections kept open between requests.
    pub keepalive: bool,
    /// Requests in flight per connection.
    pub pipeline: u32,
    /// Under --rate: requests per second asked for, over all connections (null: as fast
    /// as answers come).
    pub rate_per_second: Option<f64>,
    /// Generator threads.
    pub threads: usize,
    /// `-n`, when given.
    pub requests_requested: Option<u64>,
    /// `-d`, when the run was bounded by time.
    pub duration_requested_seconds: Option<f64>,
    /// --timeout.
    pub timeout_seconds: f64,
    /// The measured interval: from the first connect's start to the last answer's last
    /// byte.
    pub duration_seconds: f64,
    /// Requests fully answered (non-2xx and length failures included, as ab counts).
    pub requests_complete: u64,
    /// Failed requests by kind.
    pub requests_failed: Failed,
    /// Failed requests (connect and read kinds) by exact cause.
    pub failure_causes: Causes,
    /// Complete answers with a status outside 200-299.
    pub non_2xx: u64,
    /// Complete answers by status code.
    pub responses_by_status: BTreeMap<String, u64>,
    /// Every byte received, heads and bodies.
    pub bytes_received: u64,
    /// Body bytes of complete answers.
    pub body_bytes_received: u64,
    /// Bytes of requests written.
    pub bytes_sent: u64,
    /// Complete requests per second of the interval (with `--runs`, the median run's).
    pub requests_per_second: f64,
    /// With `--runs`, every run's requests per second, in run order (the body's other
    /// figures are the median run's); empty for one run.
    #[serde(default)]
    pub runs_requests_per_second: Vec<f64>,
    /// Bytes received per second of the interval (ab's transfer rate).
    pub bytes_per_second: f64,
    /// Connections made.
    pub connections_opened: u64,
    /// Keep-alive connections that were opened again, not failures: the server closed
    /// them (with `Connection: close` or without a word), or sent bytes that answer no
    /// request (`stray_closes` of them).
    pub reconnects: u64,
    /// Pipelined requests sent again on a new connection because the server closed the
    /// old one before reading them.
    pub requests_resent: u64,
    /// Bytes the server sent that answer no request (after a complete response, with
    /// none in flight): counted here, not in any response; each time, the connection was
    /// closed and opened again.
    pub stray_bytes: u64,
    /// Connections closed for such bytes.
    pub stray_closes: u64,
    /// The first complete answer's body length, which the others are compared with.
    pub first_body_bytes: Option<u64>,
    /// ab's connection-times rows.
    pub connection_times: ConnectionTimes,
    /// Percentiles of `total` (under --rate: from when each request was due, corrected
    /// for coordinated omission).
    pub latency: Option<Latency>,
    /// Under --rate: percentiles from when each request was actually sent.
    pub latency_uncorrected: Option<Latency>,
    /// User CPU of the generator's threads over their run.
    pub cpu_user_seconds: f64,
    /// System CPU of the generator's threads over their run.
    pub cpu_system_seconds: f64,
    /// The threads' CPU (exact clock) per complete request.
    pub cpu_seconds_per_request: Option<f64>,
    /// The threads' CPU over their wall time times their number (1: every thread busy
    /// all the time).
    pub generator_cpu_share: Option<f64>,
}

/// The load generator's document as it is made: the envelope (its warnings: what to
/// keep in mind reading the figures; its error: why the run produced nothing) and the
/// body.
#[derive(Clone, Debug)]
pub struct LoadReport {
    /// What every document says of itself.
    pub envelope: Envelope,
    /// What the load measured.
    pub body: LoadBody,
}

impl<'de> Deserialize<'de> for LoadReport {
    /// A load document read back (any other kind is refused, named).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<LoadReport, D::Error> {
        let (envelope, _, body) =
            crate::report::envelope::read_body(d, |k| k == Kind::Load, "a load document")?;
        Ok(LoadReport { envelope, body })
    }
}

impl LoadReport {
    /// The document to write.
    pub fn document(&self) -> Written<'_, LoadBody> {
        Written {
            envelope: &self.envelope,
            kind: Kind::Load,
            body: &self.body,
        }
    }
}

/// What the run was, besides the tallies.
pub struct Context<'a> {
    /// The run's spec.
    pub spec: &'a Spec,
    /// The command line.
    pub command: Vec<String>,
    /// Threads that ran.
    pub threads: usize,
    /// The longest thread's wall time.
    pub wall: Duration,
    /// The first complete answer's body length.
    pub first_length: Option<u64>,
    /// Ctrl-C.
    pub interrupted: bool,
    /// When the run started (RFC 3339).
    pub started_at: String,
}

/// Build the document from the merged tally.
pub fn build(cx: Context<'_>, t: &Tally) -> LoadReport {
    let spec = cx.spec;
    let interval = match (t.first_start, t.last_done) {
        (Some(a), Some(b)) => b.saturating_duration_since(a),
        _ => Duration::ZERO,
    };
    let secs = interval.as_secs_f64();
    let per_sec = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
    let cpu = t.cpu.total().as_secs_f64();
    let wall = cx.wall.as_secs_f64() * cx.threads as f64;
    let r = LoadBody {
        url: spec.url(),
        target: spec.target.to_string(),
        method: spec.method.clone(),
        connections: spec.connections,
        keepalive: spec.keepalive || spec.pipeline > 1,
        pipeline: spec.pipeline,
        rate_per_second: spec.rate,
        threads: cx.threads,
        requests_requested: spec.requests,
        duration_requested_seconds: spec.duration.map(|d| d.as_secs_f64()),
        timeout_seconds: spec.timeout.as_secs_f64(),
        duration_seconds: secs,
        requests_complete: t.complete,
        requests_failed: Failed {
            connect: t.connect_failures(),
            read: t.read_failures(),
            status: t.status_failed,
            length: t.length_failed,
        },
        failure_causes: Causes {
            connect_refused: t.connect_refused,
            connect_timeout: t.connect_timeout,
            connect_error: t.connect_error,
            read_reset: t.read_reset,
            read_eof: t.read_eof,
            read_timeout: t.read_timeout,
            read_error: t.read_error,
        },
        non_2xx: t.non_2xx,
        responses_by_status: t
            .by_status
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(s, &n)| (s.to_string(), n))
            .collect(),
        bytes_received: t.bytes_received,
        body_bytes_received: t.body_bytes,
        bytes_sent: t.bytes_sent,
        requests_per_second: per_sec(t.complete),
        runs_requests_per_second: Vec::new(),
        bytes_per_second: per_sec(t.bytes_received),
        connections_opened: t.connections_opened,
        reconnects: t.reconnects,
        requests_resent: t.resent,
        stray_bytes: t.stray_bytes,
        stray_closes: t.stray_closes,
        first_body_bytes: cx.first_length,
        connection_times: ConnectionTimes {
            connect: TimesRow::of(&t.connect),
            processing: TimesRow::of(&t.processing),
            waiting: TimesRow::of(&t.waiting),
            total: TimesRow::of(&t.total),
        },
        latency: Latency::of(&t.total),
        latency_uncorrected: t.uncorrected.as_ref().and_then(Latency::of),
        cpu_user_seconds: t.cpu.user.as_secs_f64(),
        cpu_system_seconds: t.cpu.system.as_secs_f64(),
        cpu_seconds_per_request: (t.complete > 0).then(|| cpu / t.complete as f64),
        generator_cpu_share: (wall > 0.0).then(|| (cpu / wall).min(1.0)),
    };
    let mut envelope = Envelope::starting(cx.command);
    envelope.started_at = Some(cx.started_at);
    envelope.interrupted = cx.interrupted;
    envelope.warnings = warnings(&r, cx.interrupted, cx.wall);
    if r.requests_complete == 0 && !cx.interrupted {
        envelope.error = Some(why_nothing(&r, t.nothing_answered));
    }
    LoadReport { envelope, body: r }
}

/// The warnings a report deserves.
fn warnings(r: &LoadBody, interrupted: bool, wall: Duration) -> Vec<String> {
    let mut w = Vec::new();
    // Over a few milliseconds the share says nothing (a refused connect is all CPU).
    let judged = r.requests_complete > 0 && wall >= Duration::from_millis(100);
    if let Some(share) = r
        .generator_cpu_share
        .filter(|&s| judged && s >= CPU_BOUND_SHARE)
    {
        w.push(format!(
            "the generator was CPU-bound ({:.0}% of its threads' time): the figure is the generator's limit, not the server's \
             (give it more threads with -t, or more CPUs)",
            share * 100.0
        ));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if r.threads > cpus {
        w.push(format!(
            "{} generator threads share {cpus} CPUs: they take turns, and their waiting is in the latencies",
            r.threads
        ));
    }
    if let Some(asked) = r.rate_per_second {
        if !interrupted && r.requests_per_second < asked * 0.9 && r.requests_complete > 0 {
            w.push(format!(
                "asked for {}, got {}: the server (or the generator) could not keep up; latency counts from when each \
                 request was due, so the backlog shows in it",
                format_per_second(asked),
                format_per_second(r.requests_per_second)
            ));
        }
    }
    if r.requests_failed.length > 0 {
        w.push(format!(
            "{} answers differ in length from the first ({} body bytes): counted as failed (length), as ab does; \
             a page whose length varies is not broken",
            r.requests_failed.length,
            r.first_body_bytes.unwrap_or(0)
        ));
    }
    let server_closed = r.reconnects.saturating_sub(r.stray_closes);
    if r.keepalive && server_closed > 0 {
        let per = r.requests_complete as f64 / (r.reconnects + u64::from(r.connections)) as f64;
        w.push(format!(
            "the server closed {server_closed} keep-alive connections (about {per:.0} requests each; nginx's keepalive_requests \
             is 1000 by default): each reconnect's connect time is in the figures"
        ));
    }
    if r.stray_bytes > 0 {
        w.push(format!(
            "the server sent {} that answer no request, after its responses ({} times): each time the \
             connection's framing was lost, so it was closed and opened again (a Content-Length \
             shorter than the body it sent?)",
            crate::vocab::units::format_bytes(r.stray_bytes),
            r.stray_closes
        ));
    }
    if r.requests_resent > 0 {
        w.push(format!(
            "{} pipelined requests went again on a new connection: the server closed the old one before reading them",
            r.requests_resent
        ));
    }
    if r.requests_complete > 0 && r.duration_seconds < 0.1 && !interrupted {
        w.push(format!(
            "the run took {}: too short for a steady figure (more requests with -n, or -d)",
            format_seconds(r.duration_seconds)
        ));
    }
    w
}

/// Why no request was answered, and what to try.
fn why_nothing(r: &LoadBody, nothing_connected: bool) -> String {
    let c = &r.failure_causes;
    let t = &r.target;
    let timeout = format_seconds(r.timeout_seconds);
    if nothing_connected || r.connections_opened == 0 {
        if c.connect_refused > 0 && c.connect_refused >= c.connect_timeout + c.connect_error {
            let hint = if t.starts_with("unix") {
                "is the server running, and is that its socket file?"
            } else {
                "is the server running? check the URL's host and port"
            };
            return format!("nothing answered at {t}: every connect was refused ({hint})");
        }
        if c.connect_timeout > 0 {
            return format!(
                "no connection to {t} within --timeout {timeout}: check the address and any firewall, or raise --timeout"
            );
        }
        return format!("no connection to {t} could be made: check the address (and ulimit -n for many connections)");
    }
    if c.read_timeout > 0 {
        return format!(
            "the server at {t} accepted connections but answered no request within --timeout {timeout}: check it, or raise --timeout"
        );
    }
    if r.requests_failed.status > 0 {
        return format!(
            "the server at {t} does not answer in HTTP/1.x: is it an HTTP server (https is not supported)?"
        );
    }
    if c.read_eof + c.read_reset > 0 {
        return format!(
            "the server at {t} closed every connection without a complete answer: check its logs"
        );
    }
    format!("no request to {t} was answered")
}

impl crate::report::output::Rendered for LoadReport {
    fn head(&self) -> crate::report::output::Head<'_> {
        crate::report::output::Head::of(Kind::Load, &self.envelope)
    }

    fn json(&self) -> serde_json::Result<Vec<u8>> {
        crate::report::output::pretty(&self.document())
    }

    fn tables(&self, view: &crate::vocab::View) -> Vec<crate::report::grid::Grid> {
        super::table::grids(&self.envelope, &self.body, view.units)
    }

    fn records(&self) -> crate::report::output::Records {
        crate::report::output::records_of(
            &[serde_json::to_value(&self.body).unwrap_or_default()],
            &serde_json::Value::Null,
        )
    }

    fn metrics(&self) -> Vec<crate::report::openmetrics::Family> {
        let b = &self.body;
        let labels = vec![
            ("method", b.method.clone()),
            ("target", b.target.clone()),
            ("connections", b.connections.to_string()),
        ];
        let mut v = serde_json::to_value(b).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            for k in ["connections", "threads", "pipeline", "keepalive"] {
                o.remove(k);
            }
        }
        crate::report::output::gauges(Kind::Load, "The load", &[(labels, v)])
    }

    fn count(&self) -> String {
        crate::report::output::counted(self.body.requests_complete as usize, "complete request")
    }

    fn charts(&self) -> Vec<crate::report::chart::Chart> {
        use crate::report::chart::{bars_of, Axis};
        let Some(l) = &self.body.latency else {
            return Vec::new();
        };
        let bars = [
            ("p50", l.p50_ns),
            ("p90", l.p90_ns),
            ("p99", l.p99_ns),
            ("p99.9", l.p99_9_ns),
            ("p99.99", l.p99_99_ns),
            ("max", l.max_ns),
        ]
        .into_iter()
        .map(|(k, ns)| (k.to_string(), ns as f64, None))
        .collect();
        vec![bars_of(
            "load-latency",
            "Request latency percentiles",
            "From a request's send (or, at a set rate, its due time) to its whole answer.",
            Axis::Nanoseconds,
            bars,
        )]
    }

    fn nothing_to_chart(&self) -> Option<String> {
        self.body
            .latency
            .is_none()
            .then(|| "No request was answered, so there is nothing to chart.".to_string())
    }

    fn setting(&self) -> Vec<(String, String)> {
        let b = &self.body;
        vec![
            ("URL".to_string(), b.url.clone()),
            ("connections".to_string(), b.connections.to_string()),
            ("threads".to_string(), b.threads.to_string()),
            ("keep-alive".to_string(), b.keepalive.to_string()),
        ]
    }
}

/// The path (and query) of an `http://HOST[:PORT]/PATH` URL: what a load asks for,
/// wherever the server runs.
fn url_path(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.find('/').map_or("/", |i| &rest[i..])
}

impl LoadBody {
    /// `compare`'s row: the load as a whole (its method, target path and concurrency,
    /// not its host and port), judged by its complete requests per second.
    pub fn rows(&self) -> Vec<crate::report::rows::Row> {
        let mut label = format!(
            "load {} {} c{}",
            self.method,
            url_path(&self.url),
            self.connections
        );
        if self.keepalive {
            label.push_str(" keep-alive");
        }
        if self.pipeline > 1 {
            label.push_str(&format!(" pipeline {}", self.pipeline));
        }
        if let Some(r) = self.rate_per_second {
            label.push_str(&format!(
                " rate {}",
                crate::vocab::units::format_per_second(r)
            ));
        }
        vec![crate::report::rows::Row::once(
            label.clone(),
            label,
            crate::measure::headline::Headline::rate("requests_per_second"),
            (self.requests_complete > 0).then_some(self.requests_per_second),
        )
        .with_runs(&self.runs_requests_per_second)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(url: &str, target: &str) -> LoadBody {
        LoadBody {
            url: url.into(),
            target: target.into(),
            method: "GET".into(),
            connections: 4,
            ..LoadBody::default()
        }
    }

    #[test]
    fn compare_matches_a_load_by_its_path_not_where_the_server_ran() {
        let label = |b: &LoadBody| b.rows()[0].label.clone();
        let here = body("http://127.0.0.1:8080/a?x=1", "tcp 127.0.0.1:8080");
        let there = body("http://10.0.0.2:9090/a?x=1", "tcp 10.0.0.2:9090");
        assert_eq!(label(&here), "load GET /a?x=1 c4");
        assert_eq!(label(&here), label(&there));
        let other = body("http://127.0.0.1:8080/b", "tcp 127.0.0.1:8080");
        assert_ne!(label(&here), label(&other));
        assert_eq!(url_path("http://h"), "/");
        assert_eq!(url_path("http://h:1/"), "/");
    }

    /// The warning of bytes that answer no request comes with such bytes, and only then.
    #[test]
    fn stray_bytes_are_warned_of_only_when_there_are_some() {
        let stray = |w: &[String]| w.iter().any(|w| w.contains("answer no request"));
        let mut b = body("http://h/", "tcp h:80");
        b.requests_complete = 1000;
        b.duration_seconds = 1.0;
        let wall = Duration::from_secs(1);
        assert!(
            !stray(&warnings(&b, false, wall)),
            "{:?}",
            warnings(&b, false, wall)
        );
        b.stray_bytes = 1;
        b.stray_closes = 1;
        let w = warnings(&b, false, wall);
        assert!(stray(&w), "{w:?}");
        assert!(
            w.iter()
                .any(|w| w.contains("1 B") && w.contains("(1 times)")),
            "{w:?}"
        );
    }
}

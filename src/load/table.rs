//! The load report for people, laid out as ab's summary: the counts and rates, ab's
//! "Connection Times" table in microseconds, the latency percentiles and the warnings.
//! Reads only a load document's envelope and [`LoadBody`], so a saved document prints
//! the same.

use super::report::{LoadBody, TimesRow};
use crate::report::envelope::Envelope;
use crate::report::grid::{Align, Grid};
use crate::vocab::units::{format_bytes, format_ns, format_seconds};

/// Microseconds from nanoseconds: whole from 100 µs up, else with one decimal.
fn us(ns: u64) -> String {
    if ns >= 100_000 {
        format!("{:.0}", ns as f64 / 1e3)
    } else {
        format!("{:.1}", ns as f64 / 1e3)
    }
}

/// A table whose first column names a row and whose others are numbers.
fn numbers(headers: &[&str], rows: Vec<Vec<String>>) -> Grid {
    let mut align = vec![Align::Right; headers.len()];
    align[0] = Align::Left;
    Grid {
        title: None,
        headers: headers.iter().map(|h| h.to_string()).collect(),
        align,
        rows,
        notes: Vec::new(),
    }
}

/// How the run was driven, in a few words.
fn concurrency(r: &LoadBody) -> String {
    let mut s = format!(
        "{} on {}",
        crate::report::output::counted(r.connections as usize, "connection"),
        crate::report::output::counted(r.threads, "thread")
    );
    s.push_str(if r.keepalive {
        ", keep-alive"
    } else {
        ", a connection per request"
    });
    if r.pipeline > 1 {
        s.push_str(&format!(", pipeline {}", r.pipeline));
    }
    if let Some(rate) = r.rate_per_second {
        s.push_str(&format!(", open loop at {rate} requests/s"));
    }
    s
}

/// `r` as ab-like tables: the counts and rates (a table of names and values, without
/// a header), the connection times and the latency percentiles; the warnings under the
/// last.
pub fn grids(e: &Envelope, r: &LoadBody, units: crate::vocab::Units) -> Vec<Grid> {
    let mut summary = Grid {
        title: Some(format!(
            "sockbench load: {} {} ({})",
            r.method, r.url, r.target
        )),
        headers: vec![String::new(), String::new()],
        align: vec![Align::Left, Align::Left],
        ..Grid::default()
    };
    let f = &r.requests_failed;
    let failed = f.connect + f.read + f.status + f.length;
    let mut row = |k: &str, v: String| {
        summary.rows.push(vec![k.to_string(), v]);
    };
    row("Concurrency", concurrency(r));
    row(
        "Time taken",
        if r.requests_complete > 0 {
            format_seconds(r.duration_seconds)
        } else {
            "-".into()
        },
    );
    row("Complete requests", r.requests_complete.to_string());
    row(
        "Failed requests",
        format!(
            "{failed} (connect {}, read {}, status {}, length {})",
            f.connect, f.read, f.status, f.length
        ),
    );
    let c = &r.failure_causes;
    if f.connect + f.read > 0 {
        row(
            "  by cause",
            format!(
                "connect: {} refused, {} timed out, {} other; read: {} reset, {} closed early, {} timed out, {} other",
                c.connect_refused,
                c.connect_timeout,
                c.connect_error,
                c.read_reset,
                c.read_eof,
                c.read_timeout,
                c.read_error
            ),
        );
    }
    let statuses = r
        .responses_by_status
        .iter()
        .map(|(s, n)| format!("{s}: {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    row(
        "Non-2xx responses",
        if r.non_2xx > 0 {
            format!("{} ({statuses})", r.non_2xx)
        } else {
            "0".into()
        },
    );
    row(
        "Total transferred",
        format!(
            "{} received ({} of bodies), {} sent",
            format_bytes(r.bytes_received),
            format_bytes(r.body_bytes_received),
            format_bytes(r.bytes_sent)
        ),
    );
    row(
        "Connections opened",
        if r.reconnects > 0 {
            format!(
                "{} ({} reopened after the server closed them)",
                r.connections_opened, r.reconnects
            )
        } else {
            r.connections_opened.to_string()
        },
    );
    row(
        "Requests per second",
        format!("{:.2} [#/sec] (mean)", r.requests_per_second),
    );
    if r.requests_complete > 0 {
        let per = r.duration_seconds / r.requests_complete as f64;
        if r.rate_per_second.is_none() {
            let inflight = f64::from(r.connections) * f64::from(r.pipeline.max(1));
            row(
                "Time per request",
                format!("{} (mean)", format_seconds(per * inflight)),
            );
        }
        row(
            "Time per request",
            format!(
                "{} (mean, across all concurrent requests)",
                format_seconds(per)
            ),
        );
    }
    row(
        "Transfer rate",
        format!(
            "{} received",
            crate::vocab::units::throughput(r.bytes_per_second * 8.0, units)
        ),
    );
    if let Some(cpu) = r.cpu_seconds_per_request {
        row(
            "CPU per request",
            format!(
                "{} (user {}, system {}; {:.0}% of {} thread{})",
                format_ns((cpu * 1e9).round() as u64),
                format_seconds(r.cpu_user_seconds),
                format_seconds(r.cpu_system_seconds),
                r.generator_cpu_share.unwrap_or(0.0) * 100.0,
                r.threads,
                if r.threads == 1 { "" } else { "s" }
            ),
        );
    }
    let mut out = vec![summary];

    let ct = &r.connection_times;
    if ct.total.is_some() {
        let mut rows_out = Vec::new();
        let rows: [(&str, &Option<TimesRow>); 4] = [
            ("Connect", &ct.connect),
            ("Processing", &ct.processing),
            ("Waiting", &ct.waiting),
            ("Total", &ct.total),
        ];
        for (name, v) in rows {
            if let Some(v) = v {
                rows_out.push(vec![
                    name.to_string(),
                    us(v.min_ns),
                    us(v.mean_ns),
                    us(v.stddev_ns),
                    us(v.p50_ns),
                    us(v.max_ns),
                ]);
            }
        }
        out.push(numbers(
            &[
                "Connection times (µs)",
                "min",
                "mean",
                "[+/-sd]",
                "median",
                "max",
            ],
            rows_out,
        ));
    }

    if let Some(l) = &r.latency {
        let mut rows_out = Vec::new();
        let name = if r.latency_uncorrected.is_some() {
            "from due (corrected)"
        } else {
            "total"
        };
        for (name, l) in [
            (name, Some(l)),
            ("from sent", r.latency_uncorrected.as_ref()),
        ] {
            if let Some(l) = l {
                rows_out.push(vec![
                    name.to_string(),
                    us(l.min_ns),
                    us(l.p50_ns),
                    us(l.p90_ns),
                    us(l.p99_ns),
                    us(l.p99_9_ns),
                    us(l.p99_99_ns),
                    us(l.max_ns),
                ]);
            }
        }
        out.push(numbers(
            &[
                "Latency (µs)",
                "min",
                "p50",
                "p90",
                "p99",
                "p99.9",
                "p99.99",
                "max",
            ],
            rows_out,
        ));
    }
    let last = out.last_mut().expect("the summary");
    last.notes
        .extend(e.warnings.iter().map(|w| format!("warning: {w}")));
    if e.interrupted {
        last.notes
            .push("interrupted: the figures cover what ran before Ctrl-C".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_keep_a_decimal_below_100() {
        assert_eq!(us(0), "0.0");
        assert_eq!(us(12_345), "12.3");
        assert_eq!(us(123_456), "123");
        assert_eq!(us(2_000_000_000), "2000000");
    }

    #[test]
    fn the_transfer_rate_is_in_the_units_asked_for() {
        use crate::vocab::Units;
        let r = LoadBody {
            bytes_per_second: 1_250_000.0,
            ..LoadBody::default()
        };
        let rate = |units| {
            let g = grids(&Envelope::starting(Vec::new()), &r, units);
            let row = (g.iter().flat_map(|g| &g.rows))
                .find(|row| row[0] == "Transfer rate")
                .expect("a transfer rate row")
                .clone();
            row[1].clone()
        };
        assert_eq!(rate(Units::Bits), "10.0 Mbit/s received");
        assert!(
            rate(Units::Bytes).contains("MiB/s"),
            "{}",
            rate(Units::Bytes)
        );
        assert!(
            rate(Units::Both).contains("Mbit/s (1.19 MiB/s)"),
            "{}",
            rate(Units::Both)
        );
    }
}

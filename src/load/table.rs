//! The load report for people, laid out as ab's summary: the counts and rates, ab's
//! "Connection Times" table in microseconds, the latency percentiles and the warnings.
//! Reads only a [`LoadReport`], so a saved document prints the same.

use std::io::{self, Write};

use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};

use super::report::{LoadReport, TimesRow};
use crate::measure::units::{format_bytes, format_bytes_per_second, format_ns, format_seconds};

/// Microseconds from nanoseconds: whole from 100 µs up, else with one decimal.
fn us(ns: u64) -> String {
    if ns >= 100_000 {
        format!("{:.0}", ns as f64 / 1e3)
    } else {
        format!("{:.1}", ns as f64 / 1e3)
    }
}

fn right(t: &mut Table, from: usize, to: usize) {
    for i in from..to {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// How the run was driven, in a few words.
fn concurrency(r: &LoadReport) -> String {
    let plural = |n: u64, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let mut s = format!(
        "{} on {}",
        plural(r.connections.into(), "connection"),
        plural(r.threads as u64, "thread")
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

/// Print `r` as ab-like tables.
///
/// # Errors
/// Writing to `out` failed.
pub fn print_table(r: &LoadReport, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "sockbench load: {} {} ({})", r.method, r.url, r.target)?;
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let f = &r.requests_failed;
    let failed = f.connect + f.read + f.status + f.length;
    let mut row = |k: &str, v: String| {
        t.add_row([k.to_string(), v]);
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
        format!("{} received", format_bytes_per_second(r.bytes_per_second)),
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
    writeln!(out, "{t}")?;

    let ct = &r.connection_times;
    if ct.total.is_some() {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_header([
            "Connection times (µs)",
            "min",
            "mean",
            "[+/-sd]",
            "median",
            "max",
        ]);
        right(&mut t, 1, 6);
        let rows: [(&str, &Option<TimesRow>); 4] = [
            ("Connect", &ct.connect),
            ("Processing", &ct.processing),
            ("Waiting", &ct.waiting),
            ("Total", &ct.total),
        ];
        for (name, v) in rows {
            if let Some(v) = v {
                t.add_row([
                    name.to_string(),
                    us(v.min_ns),
                    us(v.mean_ns),
                    us(v.stddev_ns),
                    us(v.p50_ns),
                    us(v.max_ns),
                ]);
            }
        }
        writeln!(out, "{t}")?;
    }

    if let Some(l) = &r.latency {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_header([
            "Latency (µs)",
            "min",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "p99.99",
            "max",
        ]);
        right(&mut t, 1, 8);
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
                t.add_row([
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
        writeln!(out, "{t}")?;
    }
    for w in &r.warnings {
        writeln!(out, "warning: {w}")?;
    }
    if r.interrupted {
        writeln!(out, "interrupted: the figures cover what ran before Ctrl-C")?;
    }
    Ok(())
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
}

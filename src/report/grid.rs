//! The one table builder behind the terminal table and Markdown: a report becomes
//! headers, rows of human-formatted cells, and notes (warnings, skipped combinations,
//! the fastest transport per size).

use std::collections::BTreeMap;

use super::{Report, ScenarioResult};
use crate::measure::units::{
    format_bits_per_second, format_bytes, format_ns, format_per_second, format_seconds,
};
use crate::plan::{Layout, SUITE_SIZES};
use crate::transport::TransportKind;
use crate::workload::WorkloadKind;

/// Column alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// A table ready to render.
#[derive(Clone, Debug, Default)]
pub struct Grid {
    /// A line above the table.
    pub title: Option<String>,
    /// Column headers.
    pub headers: Vec<String>,
    /// Alignment per column.
    pub align: Vec<Align>,
    /// Rows of cells.
    pub rows: Vec<Vec<String>>,
    /// Lines printed under the table.
    pub notes: Vec<String>,
}

fn pct(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

fn cell_or_error(r: &ScenarioResult, f: impl Fn(&ScenarioResult) -> Option<String>) -> String {
    match (&r.error, f(r)) {
        (_, Some(s)) => s,
        (Some(_), None) => "failed".into(),
        (None, None) => "-".into(),
    }
}

/// Build the tables for a report: one for a list of scenarios; for the suite, the
/// throughput matrix, then the latency and message-rate tables. Notes go under the last.
pub fn build(report: &Report) -> Vec<Grid> {
    let mut grids = match report.layout {
        Layout::List => vec![list(report)],
        Layout::Suite => {
            let only = |w: WorkloadKind| Report {
                results: report
                    .results
                    .iter()
                    .filter(|r| r.workload == w)
                    .cloned()
                    .collect(),
                ..report.clone()
            };
            let mut v = vec![titled(
                suite(&only(WorkloadKind::Stream)),
                "Throughput: one-way stream",
            )];
            let latency = only(WorkloadKind::Pingpong);
            if !latency.results.is_empty() {
                v.push(titled(list(&latency), "Round-trip latency: pingpong"));
            }
            let rate = only(WorkloadKind::Rate);
            if !rate.results.is_empty() {
                v.push(titled(list(&rate), "Message rate: datagram transports"));
            }
            v
        }
    };
    if let Some(last) = grids.last_mut() {
        notes(report, last);
    }
    grids
}

fn titled(mut g: Grid, title: &str) -> Grid {
    g.title = Some(title.to_string());
    g
}

/// Latency columns: one row per scenario, percentiles of the named distribution.
fn latency_list(report: &Report, name: &str, rate_title: &str) -> Grid {
    let rs = &report.results;
    let lossy = rs.iter().any(|r| r.messages_lost.is_some());
    let mut g = Grid::default();
    let mut col = |h: &str, a: Align| {
        g.headers.push(h.into());
        g.align.push(a);
    };
    let engines = rs
        .iter()
        .map(|r| r.engine)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        > 1;
    col("transport", Align::Left);
    if engines {
        col("engine", Align::Left);
    }
    col("size", Align::Right);
    for h in ["min", "p50", "p90", "p99", "p99.9", "max"] {
        col(h, Align::Right);
    }
    col(rate_title, Align::Right);
    col("CPU/op", Align::Right);
    if lossy {
        col("lost", Align::Right);
    }
    for r in rs {
        let mut row = vec![r.transport.to_string()];
        if engines {
            row.push(r.engine.to_string());
        }
        row.push(format_bytes(r.size_bytes));
        match r.latencies.get(name) {
            Some(l) => row.extend(
                [l.min_ns, l.p50_ns, l.p90_ns, l.p99_ns, l.p99_9_ns, l.max_ns].map(format_ns),
            ),
            None => row
                .extend((0..6).map(|_| if r.error.is_some() { "failed" } else { "-" }.to_string())),
        }
        row.push(cell_or_error(r, |r| {
            r.messages_per_second.map(format_per_second)
        }));
        row.push(
            r.cpu_seconds_per_round_trip
                .map(|s| format_ns((s * 1e9) as u64))
                .unwrap_or_else(|| "-".into()),
        );
        if lossy {
            row.push(
                r.messages_lost
                    .map(|l| l.to_string())
                    .unwrap_or_else(|| "-".into()),
            );
        }
        g.rows.push(row);
    }
    g
}

/// Connection phases: p50 and p99 of each, and connections per second.
fn connect_list(report: &Report) -> Grid {
    const PHASES: [(&str, &str); 4] = [
        ("connect", "connect"),
        ("accept", "accept"),
        ("first_response", "1st response"),
        ("close", "close"),
    ];
    let mut g = Grid::default();
    let mut col = |h: String, a: Align| {
        g.headers.push(h);
        g.align.push(a);
    };
    col("transport".into(), Align::Left);
    col("size".into(), Align::Right);
    for (_, title) in PHASES {
        col(format!("{title} p50"), Align::Right);
        col(format!("{title} p99"), Align::Right);
    }
    col("connections/s".into(), Align::Right);
    for r in &report.results {
        let mut row = vec![r.transport.to_string(), format_bytes(r.size_bytes)];
        for (name, _) in PHASES {
            match r.latencies.get(name) {
                Some(l) => row.extend([format_ns(l.p50_ns), format_ns(l.p99_ns)]),
                None => row.extend(["-".to_string(), "-".to_string()]),
            }
        }
        row.push(cell_or_error(r, |r| {
            r.messages_per_second.map(format_per_second)
        }));
        g.rows.push(row);
    }
    g
}

fn list(report: &Report) -> Grid {
    let rs = &report.results;
    let all = |w: WorkloadKind| !rs.is_empty() && rs.iter().all(|r| r.workload == w);
    if all(WorkloadKind::Pingpong) {
        return latency_list(report, "round_trip", "round trips/s");
    }
    if all(WorkloadKind::Connect) {
        return connect_list(report);
    }
    let engines = rs
        .iter()
        .map(|r| r.engine)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        > 1;
    let lossy = rs.iter().any(|r| r.messages_lost.is_some());
    let multi = rs.iter().any(|r| r.options.runs > 1);
    let parallel = rs.iter().any(|r| r.options.parallel > 1);
    let mut g = Grid::default();
    let mut col = |h: &str, a: Align| {
        g.headers.push(h.into());
        g.align.push(a);
    };
    col("transport", Align::Left);
    if engines {
        col("engine", Align::Left);
    }
    col("size", Align::Right);
    if parallel {
        col("streams", Align::Right);
    }
    col("throughput", Align::Right);
    if multi {
        col("±CV", Align::Right);
    }
    col("messages/s", Align::Right);
    if lossy {
        col("lost", Align::Right);
    }
    let sequenced = rs.iter().any(|r| r.messages_reordered.is_some());
    if sequenced {
        col("reordered/dup", Align::Right);
    }
    // A fixed workload (--count/--bytes) also shows its phases, as the classic
    // client/server benchmark does.
    let phased = rs.iter().all(|r| {
        r.workload == WorkloadKind::Stream
            && (r.options.count.is_some() || r.options.bytes.is_some())
    });
    if phased {
        col("connect", Align::Right);
        col("transfer", Align::Right);
        col("close", Align::Right);
    }
    col("sender CPU", Align::Right);
    col("receiver CPU", Align::Right);
    col("CPU s/GB snd+rcv", Align::Right);
    for r in rs {
        let median_run = r.median_run();
        let mut row = vec![r.transport.to_string()];
        if engines {
            row.push(r.engine.to_string());
        }
        row.push(format_bytes(r.size_bytes));
        if parallel {
            row.push(r.options.parallel.to_string());
        }
        row.push(cell_or_error(r, |r| {
            r.bits_per_second.map(format_bits_per_second)
        }));
        if multi {
            row.push(
                r.statistics
                    .as_ref()
                    .and_then(|s| s.bits_per_second.cv)
                    .map(|cv| format!("{:.1}%", cv * 100.0))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        row.push(cell_or_error(r, |r| {
            r.messages_per_second.map(format_per_second)
        }));
        if lossy {
            row.push(match r.messages_lost {
                Some(l) if r.messages_sent > 0 => {
                    format!("{l} ({:.2}%)", 100.0 * l as f64 / r.messages_sent as f64)
                }
                Some(l) => l.to_string(),
                None => "-".into(),
            });
        }
        if phased {
            match median_run.and_then(|m| m.phases.as_ref()) {
                Some(p) => row.extend(
                    [p.connect_seconds, p.transfer_seconds, p.close_seconds].map(format_seconds),
                ),
                None => row.extend((0..3).map(|_| "-".to_string())),
            }
        }
        if sequenced {
            row.push(match (r.messages_reordered, r.messages_duplicated) {
                (Some(a), Some(b)) => format!("{a}/{b}"),
                _ => "-".into(),
            });
        }
        row.push(
            median_run
                .map(|m| pct(m.sender.cpu_utilization))
                .unwrap_or_else(|| "-".into()),
        );
        row.push(
            median_run
                .map(|m| pct(m.receiver.cpu_utilization))
                .unwrap_or_else(|| "-".into()),
        );
        row.push(
            match (r.sender_cpu_seconds_per_gb, r.receiver_cpu_seconds_per_gb) {
                (Some(s), Some(c)) => format!("{:.3}", s + c),
                _ => "-".into(),
            },
        );
        g.rows.push(row);
    }
    g
}

fn suite(report: &Report) -> Grid {
    let mut g = Grid {
        headers: vec!["transport".into()],
        align: vec![Align::Left],
        ..Grid::default()
    };
    for s in SUITE_SIZES {
        g.headers.push(format_bytes(s));
        g.align.push(Align::Right);
    }
    let mut transports: Vec<_> = report.results.iter().map(|r| r.transport).collect();
    transports.extend(report.skipped.iter().map(|s| s.transport));
    transports.sort();
    transports.dedup();
    for t in transports {
        let mut row = vec![t.to_string()];
        for s in SUITE_SIZES {
            let cell = match report
                .results
                .iter()
                .find(|r| r.transport == t && r.size_bytes == s)
            {
                Some(r) => cell_or_error(r, |r| r.bits_per_second.map(format_bits_per_second)),
                None if report
                    .skipped
                    .iter()
                    .any(|k| k.transport == t && k.size_bytes == s) =>
                {
                    "n/a".into()
                }
                None => "".into(),
            };
            row.push(cell);
        }
        g.rows.push(row);
    }
    if !report.results.is_empty() {
        g.notes.push(
            "Received payload bits per second (SI: 1 Gbit/s = 10^9 bit/s); n/a: see below.".into(),
        );
    }
    // shm is the no-kernel reference and usually wins, so also name the fastest kernel path.
    let everything: fn(TransportKind) -> bool = |_| true;
    let kernel: fn(TransportKind) -> bool = |t| t != TransportKind::Shm;
    for (title, keep) in [
        ("Fastest", everything),
        ("Fastest through the kernel", kernel),
    ] {
        let mut fastest = Vec::new();
        for s in SUITE_SIZES {
            let best = report
                .results
                .iter()
                .filter(|r| r.size_bytes == s && keep(r.transport))
                .filter_map(|r| r.bits_per_second.map(|b| (r, b)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((r, b)) = best {
                fastest.push(format!(
                    "{} {} ({})",
                    format_bytes(s),
                    r.transport,
                    format_bits_per_second(b)
                ));
            }
        }
        if !fastest.is_empty() {
            g.notes.push(format!("{title}: {}", fastest.join(", ")));
        }
    }
    g
}

fn notes(report: &Report, g: &mut Grid) {
    let mut reasons: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in &report.skipped {
        let why = s
            .reason
            .split_once(": ")
            .map(|(_, w)| w.to_string())
            .unwrap_or_else(|| s.reason.clone());
        reasons.entry(why).or_default().push(format!(
            "{} {}",
            s.transport,
            format_bytes(s.size_bytes)
        ));
    }
    for (why, which) in reasons {
        g.notes.push(format!("n/a: {}: {why}", which.join(", ")));
    }
    let mut by_kind: BTreeMap<&str, Vec<(String, &str)>> = BTreeMap::new();
    for r in &report.results {
        for w in &r.warnings {
            by_kind
                .entry(w.kind)
                .or_default()
                .push((r.label(), &w.message));
        }
        if let Some(e) = &r.error {
            g.notes.push(format!("error: {}: {e}", r.label()));
        }
    }
    for (kind, list) in by_kind {
        if list.len() > 3 {
            g.notes.push(format!(
                "warning ({kind}) in {} of {} scenarios (each is listed in the JSON report). For example, {}: {}",
                list.len(),
                report.results.len(),
                list[0].0,
                list[0].1
            ));
        } else {
            for (label, msg) in list {
                g.notes.push(format!("warning: {label}: {msg}"));
            }
        }
    }
    for w in &report.warnings {
        g.notes.push(format!("warning: {w}"));
    }
    if report.interrupted {
        g.notes
            .push("Interrupted: the table shows the scenarios that finished.".into());
    }
}

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
pub fn build(report: &Report, view: &super::View) -> Vec<Grid> {
    let _ = view;
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

/// One column: its header, alignment, and how a scenario fills its cell. Headers and
/// rows are built from the same list, so a cell can never sit under another's header.
struct Column<'a> {
    header: String,
    align: Align,
    cell: Box<dyn Fn(&ScenarioResult) -> String + 'a>,
}

fn column<'a>(
    header: impl Into<String>,
    align: Align,
    cell: impl Fn(&ScenarioResult) -> String + 'a,
) -> Column<'a> {
    Column {
        header: header.into(),
        align,
        cell: Box::new(cell),
    }
}

/// A grid of one row per scenario from a list of columns.
fn grid_of(columns: &[Column<'_>], results: &[ScenarioResult]) -> Grid {
    Grid {
        headers: columns.iter().map(|c| c.header.clone()).collect(),
        align: columns.iter().map(|c| c.align).collect(),
        rows: results
            .iter()
            .map(|r| columns.iter().map(|c| (c.cell)(r)).collect())
            .collect(),
        ..Grid::default()
    }
}

fn dash() -> String {
    "-".into()
}

/// Whether the results span more than one engine (then an engine column is shown).
fn several_engines(rs: &[ScenarioResult]) -> bool {
    rs.iter()
        .map(|r| r.engine)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        > 1
}

/// The columns every list starts with: transport, engine (when several), size.
fn leading_columns<'a>(rs: &[ScenarioResult]) -> Vec<Column<'a>> {
    let mut cols = vec![column("transport", Align::Left, |r| {
        r.transport.to_string()
    })];
    if several_engines(rs) {
        cols.push(column("engine", Align::Left, |r| r.engine.to_string()));
    }
    cols.push(column("size", Align::Right, |r| format_bytes(r.size_bytes)));
    cols
}

/// "12 (1.20%)" of what was sent; "-" where nothing can be lost.
fn lost_cell(r: &ScenarioResult) -> String {
    match r.messages_lost {
        Some(l) if r.messages_sent > 0 => {
            format!("{l} ({:.2}%)", 100.0 * l as f64 / r.messages_sent as f64)
        }
        Some(l) => l.to_string(),
        None => dash(),
    }
}

/// Latency columns: one row per scenario, percentiles of the named distribution.
fn latency_list(report: &Report, name: &'static str, rate_title: &str) -> Grid {
    let rs = &report.results;
    let mut cols = leading_columns(rs);
    const PERCENTILES: [&str; 6] = ["min", "p50", "p90", "p99", "p99.9", "max"];
    for (i, h) in PERCENTILES.iter().enumerate() {
        cols.push(column(*h, Align::Right, move |r| {
            match r.latencies.get(name) {
                Some(l) => {
                    format_ns([l.min_ns, l.p50_ns, l.p90_ns, l.p99_ns, l.p99_9_ns, l.max_ns][i])
                }
                None if r.error.is_some() => "failed".into(),
                None => dash(),
            }
        }));
    }
    cols.push(column(rate_title, Align::Right, |r| {
        cell_or_error(r, |r| r.messages_per_second.map(format_per_second))
    }));
    cols.push(column("CPU/op", Align::Right, |r| {
        r.cpu_seconds_per_round_trip
            .map(|s| format_ns((s * 1e9) as u64))
            .unwrap_or_else(dash)
    }));
    if rs.iter().any(|r| r.messages_lost.is_some()) {
        cols.push(column("lost", Align::Right, lost_cell));
        // Where the lost exchanges went: requests, replies, or replies after the timeout.
        cols.push(column("req/reply/late", Align::Right, |r| {
            match (r.requests_lost, r.replies_lost, r.replies_late) {
                (Some(a), Some(b), Some(c)) if r.messages_lost.is_some() => format!("{a}/{b}/{c}"),
                _ => dash(),
            }
        }));
    }
    grid_of(&cols, rs)
}

/// Connection phases: p50 and p99 of each, and connections per second.
fn connect_list(report: &Report) -> Grid {
    const PHASES: [(&str, &str); 4] = [
        ("connect", "connect"),
        ("accept", "accept"),
        ("first_response", "1st response"),
        ("close", "close"),
    ];
    let mut cols = leading_columns(&report.results);
    for (name, title) in PHASES {
        cols.push(column(format!("{title} p50"), Align::Right, move |r| {
            r.latencies
                .get(name)
                .map_or_else(dash, |l| format_ns(l.p50_ns))
        }));
        cols.push(column(format!("{title} p99"), Align::Right, move |r| {
            r.latencies
                .get(name)
                .map_or_else(dash, |l| format_ns(l.p99_ns))
        }));
    }
    cols.push(column("connections/s", Align::Right, |r| {
        cell_or_error(r, |r| r.messages_per_second.map(format_per_second))
    }));
    grid_of(&cols, &report.results)
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
    let mut cols = leading_columns(rs);
    if rs.iter().any(|r| r.options.parallel > 1) {
        cols.push(column("streams", Align::Right, |r| {
            r.options.parallel.to_string()
        }));
    }
    cols.push(column("throughput", Align::Right, |r| {
        cell_or_error(r, |r| r.bits_per_second.map(format_bits_per_second))
    }));
    if rs.iter().any(|r| r.options.runs > 1) {
        cols.push(column("±CV", Align::Right, |r| {
            r.statistics
                .as_ref()
                .and_then(|s| s.bits_per_second.cv)
                .map(|cv| format!("{:.1}%", cv * 100.0))
                .unwrap_or_else(dash)
        }));
    }
    cols.push(column("messages/s", Align::Right, |r| {
        cell_or_error(r, |r| r.messages_per_second.map(format_per_second))
    }));
    if rs.iter().any(|r| r.messages_lost.is_some()) {
        cols.push(column("lost", Align::Right, lost_cell));
    }
    if rs.iter().any(|r| r.messages_reordered.is_some()) {
        cols.push(column("reordered/dup", Align::Right, |r| {
            match (r.messages_reordered, r.messages_duplicated) {
                (Some(a), Some(b)) => format!("{a}/{b}"),
                _ => dash(),
            }
        }));
    }
    // A fixed workload (--count/--bytes) also shows its phases, as the classic
    // client/server benchmark does.
    let phased = rs.iter().all(|r| {
        r.workload == WorkloadKind::Stream
            && (r.options.count.is_some() || r.options.bytes.is_some())
    });
    if phased {
        let phase = |title: &'static str, f: fn(&super::Phases) -> f64| {
            column(title, Align::Right, move |r: &ScenarioResult| {
                r.median_run()
                    .and_then(|m| m.phases.as_ref())
                    .map_or_else(dash, |p| format_seconds(f(p)))
            })
        };
        cols.push(phase("connect", |p| p.connect_seconds));
        cols.push(phase("transfer", |p| p.transfer_seconds));
        cols.push(phase("close", |p| p.close_seconds));
    }
    cols.push(column("sender CPU", Align::Right, |r| {
        r.median_run()
            .map_or_else(dash, |m| pct(m.sender.cpu_utilization))
    }));
    cols.push(column("receiver CPU", Align::Right, |r| {
        r.median_run()
            .map_or_else(dash, |m| pct(m.receiver.cpu_utilization))
    }));
    cols.push(column("CPU s/GB snd+rcv", Align::Right, |r| {
        match (r.sender_cpu_seconds_per_gb, r.receiver_cpu_seconds_per_gb) {
            (Some(s), Some(c)) => format!("{:.3}", s + c),
            _ => dash(),
        }
    }));
    grid_of(&cols, rs)
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
    // Per reason, what it rules out: "shm 4 KiB", or a transport with the engines that
    // cannot drive it ("shm with poll, epoll").
    let mut reasons: BTreeMap<String, Vec<(String, Vec<String>)>> = BTreeMap::new();
    for s in &report.skipped {
        let why = s
            .reason
            .split_once(": ")
            .map(|(_, w)| w.to_string())
            .unwrap_or_else(|| s.reason.clone());
        // An engine's refusal holds at every size: name the transport and the engines.
        let by_engine = s.reason.starts_with("engine ");
        let what = match by_engine {
            true => s.transport.to_string(),
            false => format!("{} {}", s.transport, format_bytes(s.size_bytes)),
        };
        let entry = reasons.entry(why).or_default();
        let i = match entry.iter().position(|(w, _)| *w == what) {
            Some(i) => i,
            None => {
                entry.push((what, Vec::new()));
                entry.len() - 1
            }
        };
        if by_engine && !entry[i].1.contains(&s.engine.to_string()) {
            entry[i].1.push(s.engine.to_string());
        }
    }
    for (why, which) in reasons {
        let which: Vec<String> = which
            .into_iter()
            .map(|(what, engines)| match engines.is_empty() {
                true => what,
                false => format!("{what} with {}", engines.join(", ")),
            })
            .collect();
        g.notes.push(format!("n/a: {}: {why}", which.join("; ")));
    }
    let mut by_kind: BTreeMap<&str, Vec<(String, &str)>> = BTreeMap::new();
    for r in &report.results {
        for w in &r.warnings {
            by_kind
                .entry(w.kind.as_str())
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

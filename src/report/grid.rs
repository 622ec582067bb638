//! The one table builder behind the terminal table and Markdown: a report becomes
//! headers, rows of human-formatted cells, and notes (warnings, skipped combinations,
//! the fastest transport per size).
//!
//! Every table is built from a list of columns, each with a priority: unless `--wide`,
//! the least important columns leave until the table fits [`MAX_WIDTH`] characters, and
//! a note names them.

use crate::measure::latency::LatencyKind;
use std::collections::BTreeMap;

use crate::report::Report;
use crate::results::ScenarioResult;
use crate::scenario::WorkloadKind;
use crate::scenario::{Layout, SUITE_SIZES};
use crate::vocab::units::{
    format_bits_per_second, format_bytes, format_ns, format_per_second, format_seconds, throughput,
};
use crate::vocab::{Units, View};
use crate::workload::{spec, TableKind};

/// The widest a table gets without `--wide`, in characters.
pub const MAX_WIDTH: usize = 100;

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

impl Grid {
    /// The rendered width of the table in characters (one space of padding on each side
    /// of a cell and one border between cells, as the terminal table draws it).
    pub fn width(&self) -> usize {
        if self.headers.is_empty() {
            return 0;
        }
        let content: usize = (0..self.headers.len())
            .map(|i| {
                self.rows
                    .iter()
                    .map(|r| r[i].chars().count())
                    .chain([self.headers[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .sum();
        content + 3 * self.headers.len() + 1
    }
}

fn pct(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

fn dash() -> String {
    "-".into()
}

fn cell_or_error(r: &ScenarioResult, f: impl Fn(&ScenarioResult) -> Option<String>) -> String {
    match (&r.error, f(r)) {
        (_, Some(s)) => s,
        (Some(_), None) => "failed".into(),
        (None, None) => dash(),
    }
}

/// What the throughput cells hold, for the note under a table.
fn throughput_note(units: Units) -> &'static str {
    match units {
        Units::Bits => "Received payload bits per second (SI: 1 Gbit/s = 10^9 bit/s)",
        Units::Bytes => "Received payload bytes per second (binary: 1 GiB/s = 2^30 B/s)",
        Units::Both => {
            "Received payload per second, in bits (SI: 1 Gbit/s = 10^9 bit/s) and bytes (binary: 1 GiB/s \
             = 2^30 B/s)"
        }
    }
}

/// Build the tables for a report: one for a list of scenarios; for the suite, the
/// throughput matrix, then the latency and message-rate tables. Notes go under the last.
pub fn build(report: &Report, view: &View) -> Vec<Grid> {
    // --by-placement: each scenario's runs as one row per placement class.
    let split = Report {
        results: report
            .results
            .iter()
            .flat_map(crate::report::placement::split)
            .collect(),
        ..report.clone()
    };
    let report = match view.by_placement && report.layout == Layout::List {
        true => &split,
        false => report,
    };
    let mut grids = match report.layout {
        Layout::List => vec![list(report, view)],
        Layout::Suite => {
            let only = |w: WorkloadKind| Report {
                results: (report.results.iter())
                    .filter(|r| r.workload == w)
                    .cloned()
                    .collect(),
                skipped: (report.skipped.iter())
                    .filter(|s| s.workload == w)
                    .cloned()
                    .collect(),
                ..report.clone()
            };
            let mut v = Vec::new();
            for (i, (w, title)) in crate::workload::SUITE.into_iter().enumerate() {
                let part = only(w);
                let g = match (i, crate::workload::spec(w).table()) {
                    // The matrix, even empty: it says what was skipped.
                    (0, _) => suite(&part, view),
                    _ if part.results.is_empty() => continue,
                    (_, TableKind::Latency) => latency_list(&part, view),
                    _ => throughput_list(&part, view),
                };
                v.push(titled(g, title));
            }
            v
        }
    };
    // What the run ranked, under the table that shows it (issue 29: never a winner
    // inside the noise).
    if let Some(first) = grids.first_mut() {
        first
            .notes
            .extend(crate::report::rankings::notes(report, view.units));
    }
    grids.extend(crate::report::breakdown::timestamps(report));
    if let Some(last) = grids.last_mut() {
        notes(report, last);
        if !view.by_placement {
            last.notes
                .extend(crate::report::placement::note(&report.results));
        }
        last.notes
            .extend(crate::report::placement::counters_note(&report.results));
    }
    grids
}

fn titled(mut g: Grid, title: &str) -> Grid {
    g.title = Some(title.to_string());
    g
}

/// How much a column matters: [`ALWAYS`] columns stay whatever the width, the others
/// leave in order of priority (lowest first) until the table fits.
type Priority = u8;
/// A column that is never left out (what identifies the row).
const ALWAYS: Priority = u8::MAX;

/// One column: its header, alignment, priority, and how a scenario fills its cell.
/// Headers and rows are built from the same list, so a cell can never sit under another's
/// header.
struct Column<'a> {
    header: String,
    align: Align,
    priority: Priority,
    cell: Box<dyn Fn(&ScenarioResult) -> String + 'a>,
}

fn column<'a>(
    header: impl Into<String>,
    align: Align,
    priority: Priority,
    cell: impl Fn(&ScenarioResult) -> String + 'a,
) -> Column<'a> {
    Column {
        header: header.into(),
        align,
        priority,
        cell: Box::new(cell),
    }
}

/// A grid of one row per scenario from a list of columns; unless the view is wide, the
/// least important columns leave until it fits, and a note says which.
fn grid_of(columns: &[Column<'_>], results: &[ScenarioResult], view: &View) -> Grid {
    let placement = column(
        "placement",
        Align::Left,
        ALWAYS,
        crate::report::placement::cell,
    );
    let mut columns: Vec<&Column<'_>> = columns.iter().collect();
    if view.by_placement {
        // After the columns that name the row.
        let at = columns
            .iter()
            .position(|c| c.priority != ALWAYS)
            .unwrap_or(columns.len());
        columns.insert(at, &placement);
    }
    let full = Grid {
        headers: columns.iter().map(|c| c.header.clone()).collect(),
        align: columns.iter().map(|c| c.align).collect(),
        rows: results
            .iter()
            .map(|r| columns.iter().map(|c| (c.cell)(r)).collect())
            .collect(),
        ..Grid::default()
    };
    let mut keep: Vec<bool> = vec![true; columns.len()];
    let mut order: Vec<usize> = (0..columns.len())
        .filter(|&i| columns[i].priority != ALWAYS)
        .collect();
    order.sort_by_key(|&i| columns[i].priority);
    let mut g = full.clone();
    let mut hidden = Vec::new();
    for i in order {
        if view.wide || g.width() <= MAX_WIDTH {
            break;
        }
        keep[i] = false;
        hidden.push(columns[i].header.clone());
        g = select(&full, &keep);
    }
    if !hidden.is_empty() {
        // In the order the wide table shows them.
        hidden.sort_by_key(|h| full.headers.iter().position(|x| x == h));
        g.notes
            .push(format!("More columns with --wide: {}.", hidden.join(", ")));
    }
    g
}

/// The columns of `g` marked to keep.
fn select(g: &Grid, keep: &[bool]) -> Grid {
    let pick = |row: &Vec<String>| -> Vec<String> {
        row.iter()
            .zip(keep)
            .filter(|(_, &k)| k)
            .map(|(c, _)| c.clone())
            .collect()
    };
    Grid {
        headers: pick(&g.headers),
        align: g
            .align
            .iter()
            .zip(keep)
            .filter(|(_, &k)| k)
            .map(|(a, _)| *a)
            .collect(),
        rows: g.rows.iter().map(pick).collect(),
        ..g.clone()
    }
}

/// A value's command-line name.
fn value_name(v: impl clap::ValueEnum) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_string())
        .unwrap_or_default()
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
    let mut cols = vec![column("transport", Align::Left, ALWAYS, |r| {
        r.transport.to_string()
    })];
    if several_engines(rs) {
        cols.push(column("engine", Align::Left, ALWAYS, |r| {
            r.engine.to_string()
        }));
    }
    cols.push(column("size", Align::Right, ALWAYS, |r| {
        format_bytes(r.size_bytes)
    }));
    for buffer in [Buffer::Send, Buffer::Receive] {
        if rs.iter().any(|r| buffer.asked(r).is_some()) {
            cols.push(column(buffer.name(), Align::Right, ALWAYS, move |r| {
                buffer.cell(r)
            }));
        }
    }
    cols
}

/// A socket buffer the user can ask for, and what the kernel granted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Buffer {
    Send,
    Receive,
}

impl Buffer {
    fn name(self) -> &'static str {
        match self {
            Buffer::Send => "sndbuf",
            Buffer::Receive => "rcvbuf",
        }
    }

    fn asked(self, r: &ScenarioResult) -> Option<u64> {
        match self {
            Buffer::Send => r.options.sndbuf_bytes,
            Buffer::Receive => r.options.rcvbuf_bytes,
        }
    }

    /// What the kernel reported at the end of the median run.
    fn granted(self, r: &ScenarioResult) -> Option<u64> {
        let run = r.median_run()?;
        match self {
            Buffer::Send => run.sndbuf_bytes,
            Buffer::Receive => run.rcvbuf_bytes,
        }
    }

    /// "4 KiB → 8 KiB" (asked, granted), "default 208 KiB", or "-".
    fn cell(self, r: &ScenarioResult) -> String {
        match (self.asked(r), self.granted(r)) {
            (Some(a), Some(g)) => format!("{} → {}", format_bytes(a), format_bytes(g)),
            (Some(a), None) => format!("{} → ?", format_bytes(a)),
            (None, Some(g)) => format!("default {}", format_bytes(g)),
            (None, None) => dash(),
        }
    }
}

/// The one axis a sweep varies besides transport and engine.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SweepAxis {
    Size,
    Buffer(Buffer),
}

impl SweepAxis {
    /// The axis's value for a scenario (`None`: a buffer left at the kernel's default).
    fn value(self, r: &ScenarioResult) -> Option<u64> {
        match self {
            SweepAxis::Size => Some(r.size_bytes),
            SweepAxis::Buffer(b) => b.asked(r),
        }
    }

    /// The one axis whose values differ across `rs`, if exactly one does.
    fn of(rs: &[ScenarioResult]) -> Option<SweepAxis> {
        let varies = |axis: SweepAxis| {
            let mut values: Vec<Option<u64>> = rs.iter().map(|r| axis.value(r)).collect();
            values.sort_unstable();
            values.dedup();
            values.len() > 1
        };
        let varying: Vec<SweepAxis> = [
            SweepAxis::Size,
            SweepAxis::Buffer(Buffer::Send),
            SweepAxis::Buffer(Buffer::Receive),
        ]
        .into_iter()
        .filter(|&a| varies(a))
        .collect();
        match varying[..] {
            [one] => Some(one),
            _ => None,
        }
    }
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

/// Whether any scenario that finished has a value: a column only failed rows would
/// fill (with "-") is not shown.
fn any_finished(rs: &[ScenarioResult], has: fn(&ScenarioResult) -> bool) -> bool {
    rs.iter().any(|r| !r.runs.is_empty() && has(r))
}

/// Priorities of TCP's own columns: below every other column, so they show when there is
/// room and always with `--wide`; the retransmissions stay longest.
const TCP_RETRANSMITS: Priority = 39;
const TCP_SRTT: Priority = 38;
const TCP_WINDOW: Priority = 37;

/// TCP's own figures, where any scenario has them (`runs[].tcp`): `retr`, segments the
/// senders retransmitted over all runs (`tcp_retransmits`); `cwnd` (with `window`), the
/// median run's largest congestion window (`snd_cwnd_bytes_max`); `srtt`, the median
/// run's mean smoothed RTT (`srtt_us_mean`).
fn tcp_columns<'a>(rs: &[ScenarioResult], window: bool) -> Vec<Column<'a>> {
    if !any_finished(rs, |r| r.runs.iter().any(|run| run.tcp.is_some())) {
        return Vec::new();
    }
    fn median(r: &ScenarioResult) -> Option<&crate::report::TcpFigures> {
        r.median_run().and_then(|m| m.tcp.as_ref())
    }
    let mut cols = vec![column("retr", Align::Right, TCP_RETRANSMITS, |r| {
        r.tcp_retransmits.map_or_else(dash, |n| n.to_string())
    })];
    if window {
        cols.push(column("cwnd", Align::Right, TCP_WINDOW, |r| {
            median(r)
                .and_then(|t| t.snd_cwnd_bytes_max)
                .map_or_else(dash, format_bytes)
        }));
    }
    cols.push(column("srtt", Align::Right, TCP_SRTT, |r| {
        median(r)
            .and_then(|t| t.srtt_us_mean)
            .map_or_else(dash, srtt_cell)
    }));
    cols
}

/// A smoothed RTT in microseconds for people; the kernel's microseconds read 0 below one.
pub fn srtt_cell(us: u64) -> String {
    match us {
        0 => "<1 µs".into(),
        us => format_ns(us.saturating_mul(1000)),
    }
}

/// The table for a list of scenarios, as their workload declares it.
fn list(report: &Report, view: &View) -> Grid {
    let kind = report
        .results
        .first()
        .map_or(TableKind::Throughput, |r| spec(r.workload).table());
    match kind {
        TableKind::Latency => latency_list(report, view),
        TableKind::Connections => connect_list(report, view),
        TableKind::Throughput => match sweep(report, view).filter(|_| !view.by_placement) {
            Some(g) => g,
            None => throughput_list(report, view),
        },
    }
}

/// Round-trip percentiles: one row per scenario.
fn latency_list(report: &Report, view: &View) -> Grid {
    let rs = &report.results;
    let mut cols = leading_columns(rs);
    const PERCENTILES: [(&str, Priority); 6] = [
        ("RTT min", 60),
        ("RTT p50", 100),
        ("RTT p90", 55),
        ("RTT p99", 90),
        ("RTT p99.9", 50),
        ("RTT max", 65),
    ];
    for (i, (h, priority)) in PERCENTILES.into_iter().enumerate() {
        cols.push(column(h, Align::Right, priority, move |r| {
            match r.latencies.get(&LatencyKind::RoundTrip) {
                Some(l) => {
                    format_ns([l.min_ns, l.p50_ns, l.p90_ns, l.p99_ns, l.p99_9_ns, l.max_ns][i])
                }
                None if r.error.is_some() => "failed".into(),
                None => dash(),
            }
        }));
    }
    if rs.iter().any(|r| r.options.runs > 1) {
        // The spread of the figure the rankings and compare judge: each run's p50.
        cols.push(column("p50 min-max", Align::Right, 88, |r| {
            crate::measure::ranking::spread_cell(&r.headline_runs(), &|v| {
                format_ns(v.round() as u64)
            })
        }));
    }
    cols.push(column("round trips/s", Align::Right, 85, |r| {
        cell_or_error(r, |r| r.messages_per_second.map(format_per_second))
    }));
    cols.push(column("CPU/op", Align::Right, 45, |r| {
        r.cpu_seconds_per_round_trip
            .map(|s| format_ns((s * 1e9) as u64))
            .unwrap_or_else(dash)
    }));
    if any_finished(rs, |r| r.messages_lost.is_some()) {
        cols.push(column("lost", Align::Right, 95, lost_cell));
        // Where the lost exchanges went: requests, replies, or replies after the timeout.
        cols.push(column("req/reply/late", Align::Right, 70, |r| {
            match (r.requests_lost, r.replies_lost, r.replies_late) {
                (Some(a), Some(b), Some(c)) if r.messages_lost.is_some() => format!("{a}/{b}/{c}"),
                _ => dash(),
            }
        }));
    }
    cols.extend(tcp_columns(rs, false));
    let mut g = grid_of(&cols, rs, view);
    g.notes.insert(
        0,
        "RTT: the whole round trip, request out and reply back (sockperf prints half of it)."
            .into(),
    );
    g
}

/// Connection phases: p50 and p99 of each, and connections per second.
fn connect_list(report: &Report, view: &View) -> Grid {
    const PHASES: [(LatencyKind, &str, Priority, Priority); 4] = [
        (LatencyKind::Connect, "connect", 100, 80),
        (LatencyKind::Accept, "accept", 75, 35),
        (LatencyKind::FirstResponse, "1st response", 85, 40),
        (LatencyKind::Close, "close", 70, 30),
    ];
    let mut cols = leading_columns(&report.results);
    for (name, title, p50, p99) in PHASES {
        cols.push(column(
            format!("{title} p50"),
            Align::Right,
            p50,
            move |r| {
                r.latencies
                    .get(&name)
                    .map_or_else(dash, |l| format_ns(l.p50_ns))
            },
        ));
        cols.push(column(
            format!("{title} p99"),
            Align::Right,
            p99,
            move |r| {
                r.latencies
                    .get(&name)
                    .map_or_else(dash, |l| format_ns(l.p99_ns))
            },
        ));
    }
    cols.push(column("connections/s", Align::Right, 95, |r| {
        cell_or_error(r, |r| r.messages_per_second.map(format_per_second))
    }));
    if report.results.iter().any(|r| r.options.runs > 1) {
        cols.push(column("min-max", Align::Right, 90, |r| {
            crate::measure::ranking::spread_cell(&r.headline_runs(), &format_per_second)
        }));
    }
    grid_of(&cols, &report.results, view)
}

/// Throughput, message rate, loss and CPU: one row per scenario.
fn throughput_list(report: &Report, view: &View) -> Grid {
    let rs = &report.results;
    let units = view.units;
    let mut cols = leading_columns(rs);
    if rs.iter().any(|r| r.options.parallel > 1) {
        cols.push(column("streams", Align::Right, ALWAYS, |r| {
            r.options.parallel.to_string()
        }));
    }
    cols.push(column("throughput", Align::Right, 100, move |r| {
        cell_or_error(r, |r| r.bits_per_second.map(|b| throughput(b, units)))
    }));
    if rs.iter().any(|r| r.options.runs > 1) {
        cols.push(column("±CV", Align::Right, 90, |r| {
            r.statistics
                .as_ref()
                .and_then(|s| s.bits_per_second.cv)
                .map(|cv| format!("{:.1}%", cv * 100.0))
                .unwrap_or_else(dash)
        }));
    }
    cols.push(column("messages/s", Align::Right, 98, |r| {
        cell_or_error(r, |r| r.messages_per_second.map(format_per_second))
    }));
    cols.extend(per_call_column(rs));
    if any_finished(rs, |r| r.messages_lost.is_some()) {
        cols.push(column("lost", Align::Right, 95, lost_cell));
    }
    if any_finished(rs, |r| r.messages_reordered.is_some()) {
        cols.push(column("reordered/dup", Align::Right, 60, |r| {
            match (r.messages_reordered, r.messages_duplicated) {
                (Some(a), Some(b)) => format!("{a}/{b}"),
                _ => dash(),
            }
        }));
    }
    cols.extend(tcp_columns(rs, true));
    // stream --send/--recv: the methods, and what zero-copy really was.
    let method = |r: &ScenarioResult| -> Option<(String, String)> {
        let name = |v: Option<String>| v.unwrap_or_else(dash);
        let send = r.options.send.map(value_name);
        let recv = r.options.recv.map(value_name);
        (r.options
            .send
            .is_some_and(|m| m != crate::vocab::SendMethod::Write)
            || r.options
                .recv
                .is_some_and(|m| m != crate::vocab::RecvMethod::Read))
        .then(|| (name(send), name(recv)))
    };
    if rs.iter().any(|r| method(r).is_some()) {
        cols.push(column("send/recv", Align::Left, ALWAYS, move |r| {
            let (s, v) = method(r).unwrap_or_else(|| ("write".into(), "read".into()));
            format!("{s}/{v}")
        }));
    }
    if any_finished(rs, |r| r.send.is_some_and(|s| s.zerocopy.is_some())) {
        // Sends the kernel reported it did not copy, of all it took with MSG_ZEROCOPY.
        cols.push(column("zero-copy sends", Align::Right, 85, |r| {
            r.send.and_then(|s| s.zerocopy).map_or_else(dash, |z| {
                format!("{} of {}", z.completed.saturating_sub(z.copied), z.sends)
            })
        }));
    }
    if any_finished(rs, |r| r.recv.is_some_and(|v| v.map_calls.is_some())) {
        // The share of received bytes mapped as whole pages, not copied.
        cols.push(column("mapped", Align::Right, 85, |r| {
            r.recv
                .filter(|v| v.map_calls.is_some())
                .map_or_else(dash, |v| {
                    let all = v.bytes_mapped + v.bytes_copied;
                    if all == 0 {
                        dash()
                    } else {
                        pct(v.bytes_mapped as f64 / all as f64)
                    }
                })
        }));
    }
    // A fixed amount of data (--count/--bytes) also shows the phases of the run, as the
    // classic client/server benchmark does.
    let phased = rs.iter().all(|r| {
        (r.options.count.is_some() || r.options.bytes.is_some())
            && r.runs.iter().all(|run| run.phases.is_some())
    });
    if phased {
        let phase = |title: &'static str, f: fn(&crate::measure::calls::Phases) -> f64| {
            column(title, Align::Right, 80, move |r: &ScenarioResult| {
                r.median_run()
                    .and_then(|m| m.phases.as_ref())
                    .map_or_else(dash, |p| format_seconds(f(p)))
            })
        };
        cols.push(phase("connect", |p| p.connect_seconds));
        cols.push(phase("transfer", |p| p.transfer_seconds));
        cols.push(phase("close", |p| p.close_seconds));
    }
    cols.push(column("CPU snd/rcv", Align::Right, 40, |r| {
        r.median_run().map_or_else(dash, |m| {
            format!(
                "{}/{}",
                pct(m.sender.cpu_utilization),
                pct(m.receiver.cpu_utilization)
            )
        })
    }));
    cols.push(column("CPU s/GB snd+rcv", Align::Right, 55, |r| {
        match (r.sender_cpu_seconds_per_gb, r.receiver_cpu_seconds_per_gb) {
            (Some(s), Some(c)) => format!("{:.3}", s + c),
            _ => dash(),
        }
    }));
    grid_of(&cols, rs, view)
}

/// With `--batch` > 1 in any scenario: messages per call of the sender and the receiver
/// (of the median run), e.g. `32/4.1`.
fn per_call_column<'a>(rs: &[ScenarioResult]) -> Option<Column<'a>> {
    let one = |v: Option<f64>| match v {
        Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => dash(),
    };
    rs.iter().any(|r| r.options.batch > 1).then(|| {
        column("msgs/call snd/rcv", Align::Right, 94, move |r| {
            r.median_run().map_or_else(dash, |m| {
                format!(
                    "{}/{}",
                    one(m.sender.messages_per_call),
                    one(m.receiver.messages_per_call)
                )
            })
        })
    })
}

/// A throughput sweep (a transport at two or more sizes, or socket buffers), unless wide:
/// for sizes, a pivot with sizes as columns (transports as rows), or transposed when that
/// is what fits; for buffers, one row per buffer asked, with what each transport was
/// granted beside its throughput.
fn sweep(report: &Report, view: &View) -> Option<Grid> {
    let rs = &report.results;
    if view.wide || rs.iter().any(|r| r.options.parallel > 1) {
        return None;
    }
    let axis = SweepAxis::of(rs)?;
    let mut values: Vec<Option<u64>> = rs.iter().map(|r| axis.value(r)).collect();
    values.sort_unstable();
    values.dedup();
    let engines = several_engines(rs);
    let label = |r: &ScenarioResult| match engines {
        true => format!("{} ({})", r.transport, r.engine),
        false => r.transport.to_string(),
    };
    let mut rows: Vec<String> = Vec::new();
    for r in rs {
        if !rows.contains(&label(r)) {
            rows.push(label(r));
        }
    }
    // Transports at their own default sizes (tcp 64 KiB, udp 1472 B) are not a sweep, and
    // a pivot needs one scenario per cell.
    let mut cells: Vec<(String, Option<u64>)> =
        rs.iter().map(|r| (label(r), axis.value(r))).collect();
    cells.sort_unstable();
    cells.dedup();
    if rows.len() == rs.len() || cells.len() != rs.len() {
        return None;
    }
    let find =
        |row: &str, v: Option<u64>| rs.iter().find(|r| label(r) == row && axis.value(r) == v);
    let cell = |row: &str, v: Option<u64>| {
        find(row, v).map_or_else(String::new, |r| {
            cell_or_error(r, |r| r.bits_per_second.map(|b| throughput(b, view.units)))
        })
    };
    let first = if engines {
        "transport (engine)"
    } else {
        "transport"
    };
    let more = "More columns with --wide: one row per scenario, with messages/s, loss and CPU.";
    if let SweepAxis::Buffer(buffer) = axis {
        let name = buffer.name();
        let option = match buffer {
            Buffer::Send => "SO_SNDBUF",
            Buffer::Receive => "SO_RCVBUF",
        };
        let by_buffer = Grid {
            title: Some(format!("Throughput by socket buffer ({name})")),
            headers: std::iter::once(name.to_string())
                .chain(rows.iter().flat_map(|row| [format!("{row} granted"), row.clone()]))
                .collect(),
            align: vec![Align::Right; 1 + 2 * rows.len()],
            rows: values
                .iter()
                .map(|&v| {
                    std::iter::once(v.map_or_else(|| "default".to_string(), format_bytes))
                        .chain(rows.iter().flat_map(|row| {
                            [
                                find(row, v)
                                    .and_then(|r| buffer.granted(r))
                                    .map_or_else(dash, format_bytes),
                                cell(row, v),
                            ]
                        }))
                        .collect()
                })
                .collect(),
            notes: vec![
                format!("{}.", throughput_note(view.units)),
                format!(
                    "{name}: the size asked for ({option}); granted: what the kernel reported at the end of \
                     the run (Linux doubles a request for its bookkeeping and clamps it to its minimum and \
                     to net.core.{}_max).",
                    match buffer {
                        Buffer::Send => "wmem",
                        Buffer::Receive => "rmem",
                    }
                ),
                more.into(),
            ],
        };
        return (by_buffer.width() <= MAX_WIDTH).then_some(by_buffer);
    }
    let sizes: Vec<u64> = values.into_iter().flatten().collect();
    let by_size = Grid {
        title: Some("Throughput by message size".into()),
        headers: std::iter::once(first.to_string())
            .chain(sizes.iter().map(|&s| format_bytes(s)))
            .collect(),
        align: std::iter::once(Align::Left)
            .chain(sizes.iter().map(|_| Align::Right))
            .collect(),
        rows: rows
            .iter()
            .map(|row| {
                std::iter::once(row.clone())
                    .chain(sizes.iter().map(|&s| cell(row, Some(s))))
                    .collect()
            })
            .collect(),
        notes: vec![format!("{}.", throughput_note(view.units)), more.into()],
    };
    if by_size.width() <= MAX_WIDTH {
        return Some(by_size);
    }
    let by_transport = Grid {
        headers: std::iter::once("size".to_string())
            .chain(rows.iter().cloned())
            .collect(),
        align: vec![Align::Right; rows.len() + 1],
        rows: sizes
            .iter()
            .map(|&s| {
                std::iter::once(format_bytes(s))
                    .chain(rows.iter().map(|row| cell(row, Some(s))))
                    .collect()
            })
            .collect(),
        ..by_size
    };
    (by_transport.width() <= MAX_WIDTH).then_some(by_transport)
}

fn suite(report: &Report, view: &View) -> Grid {
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
    let mut any_na = false;
    for t in transports {
        let mut row = vec![t.to_string()];
        for s in SUITE_SIZES {
            let cell = match report
                .results
                .iter()
                .find(|r| r.transport == t && r.size_bytes == s)
            {
                Some(r) => {
                    cell_or_error(r, |r| r.bits_per_second.map(|b| throughput(b, view.units)))
                }
                None if (report.skipped.iter()).any(|k| k.transport == t && k.size_bytes == s) => {
                    any_na = true;
                    "n/a".into()
                }
                None => "".into(),
            };
            row.push(cell);
        }
        g.rows.push(row);
    }
    if !report.results.is_empty() {
        let na = if any_na { "; n/a: see below" } else { "" };
        g.notes
            .push(format!("{}{na}.", throughput_note(view.units)));
    }
    // Which transport is fastest at each size is said only beyond the noise, and the
    // suite runs each cell once: its ranking line says so (see `build`).
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
    g.notes.extend(placement_note(report));
    if report.interrupted {
        g.notes
            .push("Interrupted: the table shows the scenarios that finished.".into());
    }
}

/// Where the other role ran and the route the data took, when it was not a thread of
/// this process.
fn placement_note(report: &Report) -> Option<String> {
    let p = &report.placement;
    let role = match p.other_role {
        Some(r) if !p.bidir => format!("the {r}"),
        _ => "the other side".to_string(),
    };
    let mut note = match p.name.as_str() {
        "processes" => format!("placement: {role} ran in a child process (--placement processes)"),
        "server" => {
            let host = p.server.clone().unwrap_or_default();
            let env = p.server_environment.as_ref().map_or(String::new(), |e| {
                format!(
                    " ({}, {}, {} CPUs)",
                    e.kernel,
                    e.cpu_model.as_deref().unwrap_or("unknown CPU"),
                    e.cpus
                )
            });
            format!("placement: {role} ran on sockbench server {host}{env}")
        }
        _ => return None,
    };
    if p.bidir {
        let both: Vec<String> = report
            .results
            .iter()
            .filter_map(|r| Some((r, r.runs.first()?)))
            .map(|(r, run)| {
                let each: Vec<String> = run
                    .directions
                    .iter()
                    .map(|d| {
                        format!(
                            "{} {}",
                            d.direction,
                            format_bits_per_second(d.bits_per_second)
                        )
                    })
                    .collect();
                format!("{}: {}", r.label(), each.join(", "))
            })
            .collect();
        note.push_str(&format!(
            "; both ways at once (--bidir), the table shows the sum; first run {}",
            both.join("; ")
        ));
    }
    let run = report
        .results
        .iter()
        .flat_map(|r| r.runs.first())
        .find(|r| r.route.is_some());
    if let Some(run) = run {
        let mut link = vec![];
        if let Some(m) = run.mtu_bytes {
            link.push(format!("MTU {m}"));
        }
        if let Some(m) = run.mss_bytes {
            link.push(format!("MSS {m}"));
        }
        note.push_str(&format!(
            "; IP data went through {}{}",
            run.route.as_deref().unwrap_or("?"),
            if link.is_empty() {
                String::new()
            } else {
                format!(" ({})", link.join(", "))
            }
        ));
    }
    Some(note)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;
    use crate::transport::TransportKind;

    fn view(wide: bool, units: Units) -> View {
        View {
            wide,
            units,
            by_placement: false,
        }
    }

    fn grids(report: &Report) -> Vec<Grid> {
        build(report, &View::default())
    }

    fn every_sample() -> Vec<(&'static str, Report)> {
        vec![
            ("stream", sample::stream()),
            ("stream with phases", sample::stream_phases()),
            ("stream sweep", sample::stream_sweep()),
            ("stream buffers", sample::stream_buffers()),
            ("failed stream", sample::stream_failed()),
            ("pingpong", sample::pingpong()),
            ("rate", sample::rate()),
            ("connect", sample::connect()),
            ("suite", sample::suite()),
            ("stream with TCP figures", sample::stream_tcp()),
            ("pingpong with TCP figures", sample::pingpong_tcp()),
        ]
    }

    /// The cell of `header` in each row of `g`.
    fn column_of(g: &Grid, header: &str) -> Option<Vec<String>> {
        let i = g.headers.iter().position(|h| h == header)?;
        Some(g.rows.iter().map(|r| r[i].clone()).collect())
    }

    #[test]
    fn tcp_figures_show_their_values_where_there_is_room_and_all_with_wide() {
        let report = sample::stream_tcp();
        let wide = &build(&report, &view(true, Units::Bits))[0];
        assert_eq!(column_of(wide, "retr").unwrap(), ["12", "-"]);
        // The larger of the two windows: 40 x 65483 bytes.
        assert_eq!(column_of(wide, "cwnd").unwrap(), ["2.50 MiB", "-"]);
        assert_eq!(format_bytes(40 * 65483), "2.50 MiB");
        // The mean of 45 and 61 us.
        assert_eq!(column_of(wide, "srtt").unwrap(), ["53.0 µs", "-"]);
        // Narrow, the TCP columns are the first to leave, the retransmits the last of them.
        let narrow = &grids(&report)[0];
        assert!(narrow.width() <= MAX_WIDTH);
        let shown: Vec<&String> = narrow
            .headers
            .iter()
            .filter(|h| ["retr", "cwnd", "srtt"].contains(&h.as_str()))
            .collect();
        assert_eq!(shown, ["retr"], "{:?}", narrow.headers);
        assert!(
            narrow
                .notes
                .iter()
                .any(|n| n == "More columns with --wide: cwnd, srtt."),
            "{:?}",
            narrow.notes
        );
        // pingpong: retransmits and RTT, no window; under 1 us reads so, not 0.
        let pp = &build(&sample::pingpong_tcp(), &view(true, Units::Bits))[0];
        assert_eq!(column_of(pp, "retr").unwrap(), ["1"]);
        assert_eq!(column_of(pp, "srtt").unwrap(), ["<1 µs"]);
        assert!(column_of(pp, "cwnd").is_none());
        // No TCP figures in any scenario: no TCP columns, even wide.
        let plain = &build(&sample::stream(), &view(true, Units::Bits))[0];
        assert!(column_of(plain, "retr").is_none() && column_of(plain, "srtt").is_none());
    }

    #[test]
    fn every_table_fits_100_columns_and_wide_shows_what_was_left_out() {
        for (name, report) in every_sample() {
            for g in grids(&report) {
                assert!(g.width() <= MAX_WIDTH, "{name}: {} wide", g.width());
            }
            let narrow: usize = grids(&report).iter().map(|g| g.headers.len()).sum();
            let wide: usize = build(&report, &view(true, Units::Bits))
                .iter()
                .map(|g| g.headers.len())
                .sum();
            let hidden = grids(&report).iter().any(|g| {
                g.notes
                    .iter()
                    .any(|n| n.starts_with("More columns with --wide"))
            });
            assert_eq!(hidden, wide > narrow, "{name}: {narrow} vs {wide} columns");
        }
    }

    #[test]
    fn each_workload_has_its_own_header() {
        let header = |r: &Report| grids(r)[0].headers.join(" | ");
        assert_eq!(
            header(&sample::stream()),
            "transport | size | throughput | messages/s | CPU snd/rcv | CPU s/GB snd+rcv"
        );
        assert_eq!(
            header(&sample::stream_phases()),
            "transport | size | throughput | messages/s | connect | transfer | close | CPU s/GB snd+rcv"
        );
        assert_eq!(
            header(&sample::pingpong()),
            "transport | size | RTT p50 | RTT p99 | RTT max | round trips/s | lost | req/reply/late"
        );
        assert_eq!(
            header(&sample::rate()),
            "transport | size | throughput | messages/s | lost | reordered/dup | CPU s/GB snd+rcv"
        );
        assert_eq!(
            header(&sample::connect()),
            "transport | size | connect p50 | connect p99 | accept p50 | 1st response p50 | connections/s"
        );
        let wide = build(&sample::pingpong(), &view(true, Units::Bits));
        assert_eq!(
            wide[0].headers.join(" | "),
            "transport | size | RTT min | RTT p50 | RTT p90 | RTT p99 | RTT p99.9 | RTT max | round trips/s \
             | CPU/op | lost | req/reply/late"
        );
    }

    #[test]
    fn the_pingpong_table_says_its_figures_are_whole_round_trips() {
        let g = &grids(&sample::pingpong())[0];
        assert!(g.headers.iter().filter(|h| h.starts_with("RTT ")).count() >= 2);
        assert!(g.notes[0].contains("sockperf prints half"), "{:?}", g.notes);
        let udp = &g.rows[1];
        assert_eq!(udp[2], "12.0 µs");
        assert_eq!(udp[udp.len() - 1], "3/2/1");
        assert_eq!(udp[udp.len() - 2], "6 (0.60%)");
    }

    #[test]
    fn units_are_bits_bytes_or_both() {
        let cell = |units| build(&sample::stream(), &view(false, units))[0].rows[0][2].clone();
        assert_eq!(cell(Units::Bits), "8.00 Gbit/s");
        assert_eq!(cell(Units::Bytes), "954 MiB/s");
        assert_eq!(cell(Units::Both), "8.00 Gbit/s (954 MiB/s)");
        let suite = |units| {
            build(&sample::suite(), &view(false, units))[0]
                .notes
                .clone()
        };
        assert!(suite(Units::Bytes)[0].starts_with("Received payload bytes per second"));
        // One run per cell: no transport is named fastest (issue 29), and the line says
        // how to rank them.
        let notes = suite(Units::Bytes);
        assert!(!notes.iter().any(|n| n.contains("Fastest")), "{notes:?}");
        assert!(
            notes.iter().any(|n| n.starts_with(
                "ranking: single run, so the noise is unknown: no transport is ranked fastest"
            ) && n.contains("--runs 5)")),
            "{notes:?}"
        );
        assert!(suite(Units::Bits)[0].starts_with("Received payload bits per second"));
    }

    #[test]
    fn a_sweep_over_sizes_is_a_matrix_with_sizes_as_columns() {
        let g = &grids(&sample::stream_sweep())[0];
        assert_eq!(g.title.as_deref(), Some("Throughput by message size"));
        assert_eq!(g.headers, ["transport", "1 KiB", "64 KiB"]);
        assert_eq!(g.rows[0], ["tcp", "5.00 Gbit/s", "30.0 Gbit/s"]);
        assert_eq!(g.rows[1], ["unix", "3.00 Gbit/s", "40.0 Gbit/s"]);
        // Wide: every scenario, one row each.
        let wide = &build(&sample::stream_sweep(), &view(true, Units::Bits))[0];
        assert_eq!(wide.rows.len(), 4);
        // Many sizes and wide cells: sizes as rows, transports as columns.
        let mut many = sample::stream_sweep();
        many.results = (0..12)
            .flat_map(|i| {
                [TransportKind::Tcp, TransportKind::Unix]
                    .map(|t| sample::scenario(WorkloadKind::Stream, t, 1 << i, 1e9))
            })
            .collect();
        let g = &build(&many, &view(false, Units::Both))[0];
        assert_eq!(g.headers, ["size", "tcp", "unix"]);
        assert_eq!(g.rows.len(), 12);
        assert!(g.width() <= MAX_WIDTH);
    }

    #[test]
    fn a_sweep_over_buffers_shows_each_granted_size_beside_its_throughput() {
        let report = sample::stream_buffers();
        let g = &grids(&report)[0];
        assert_eq!(
            g.title.as_deref(),
            Some("Throughput by socket buffer (rcvbuf)")
        );
        assert_eq!(
            g.headers,
            ["rcvbuf", "tcp granted", "tcp", "unix granted", "unix"]
        );
        assert_eq!(
            g.rows,
            [
                ["1 B", "2.25 KiB", "50.0 Mbit/s", "2.25 KiB", "8.00 Gbit/s"],
                ["4 KiB", "8 KiB", "700 Mbit/s", "8 KiB", "16.0 Gbit/s"],
            ]
        );
        assert!(g.notes.iter().any(|n| n.contains("net.core.rmem_max")));
        let both = &build(&report, &view(false, Units::Both))[0];
        assert_eq!(both.rows[1][2], "700 Mbit/s (83.4 MiB/s)");
        // Wide: one row per scenario, asked and granted in one cell.
        let wide = &build(&report, &view(true, Units::Bits))[0];
        let col = wide.headers.iter().position(|h| h == "rcvbuf").unwrap();
        assert_eq!(wide.rows[1][col], "4 KiB → 8 KiB");
        assert!(!wide.headers.contains(&"sndbuf".to_string()));
        assert_eq!(report.results[1].label(), "tcp 64 KiB rcvbuf 4 KiB");
        // Two axes at once (sizes and buffers) are no pivot: the list, with its column.
        let mut two = report.clone();
        two.results[0].size_bytes = 1 << 10;
        let g = &grids(&two)[0];
        assert!(g.headers.contains(&"rcvbuf".to_string()), "{:?}", g.headers);
        assert_eq!(g.rows.len(), 4);
    }

    #[test]
    fn a_pivot_needs_one_scenario_per_cell() {
        // The same transport and size twice (say, a buffer axis the labels do not show):
        // no pivot, whose cell could hold only one of them.
        let mut r = sample::stream_sweep();
        assert!(sweep(&r, &view(false, Units::Bits)).is_some());
        let again = r.results[1].clone();
        r.results.push(again);
        assert!(sweep(&r, &view(false, Units::Bits)).is_none());
    }

    #[test]
    fn a_failed_row_adds_no_column_and_its_error_is_noted_once() {
        let g = &grids(&sample::stream_failed())[0];
        assert!(g.headers.contains(&"lost".to_string()), "udp can lose");
        assert!(!g.headers.contains(&"reordered/dup".to_string()));
        assert_eq!(g.rows[0][2], "failed");
        let errors = g
            .notes
            .iter()
            .filter(|n| n.starts_with("error: tcp 64 KiB"))
            .count();
        assert_eq!(errors, 1, "{:?}", g.notes);
        // Failed alone on a reliable transport: no loss column at all.
        let mut only = sample::stream_failed();
        only.results.truncate(1);
        assert!(!grids(&only)[0].headers.contains(&"lost".to_string()));
    }

    #[test]
    fn the_suite_marks_na_only_where_a_cell_is_not_applicable() {
        let gs = grids(&sample::suite());
        let matrix = &gs[0];
        let udp = matrix.rows.iter().find(|r| r[0] == "udp").unwrap();
        assert_eq!(udp.iter().filter(|c| *c == "n/a").count(), 2);
        assert!(matrix.notes[0].contains("n/a: see below"));
        let last = gs.last().unwrap();
        assert!(last
            .notes
            .iter()
            .any(|n| n.starts_with("n/a: udp 64 KiB; udp 1 MiB")));
        // Nothing skipped: no mention of n/a.
        let mut all_there = sample::suite();
        all_there.skipped.clear();
        all_there
            .results
            .retain(|r| r.transport != TransportKind::Udp || r.size_bytes < 64 << 10);
        all_there
            .results
            .retain(|r| r.transport == TransportKind::Unix || r.workload != WorkloadKind::Stream);
        let gs = grids(&all_there);
        assert!(!gs[0].notes[0].contains("n/a"), "{:?}", gs[0].notes);
        // The message-rate table is titled for what it holds.
        let titles: Vec<_> = grids(&sample::suite())
            .iter()
            .filter_map(|g| g.title.clone())
            .collect();
        assert_eq!(
            titles,
            [
                "Throughput: one-way stream",
                "Round-trip latency: pingpong",
                "Message rate: message transports (one send is one message)"
            ]
        );
    }

    #[test]
    fn a_batched_run_shows_each_roles_messages_per_call_and_others_do_not() {
        let plain = grids(&sample::rate());
        assert!(!plain[0].headers.iter().any(|h| h.contains("msgs/call")));
        let mut batched = sample::rate();
        for r in &mut batched.results {
            r.options.batch = 32;
            for run in &mut r.runs {
                run.sender.messages_per_call = Some(32.0);
                run.receiver.messages_per_call = Some(4.125);
            }
        }
        batched.results[1].runs[0].receiver.messages_per_call = None;
        let g = &grids(&batched)[0];
        let col = g
            .headers
            .iter()
            .position(|h| h == "msgs/call snd/rcv")
            .expect("a msgs/call column");
        assert_eq!(g.rows[0][col], "32/4.1");
        assert_eq!(g.rows[1][col], "32/-");
        assert!(g.width() <= MAX_WIDTH, "{} wide", g.width());
    }
}

//! The mesh's HTML report: one self-contained page (inline CSS and SVG, no script,
//! nothing fetched from elsewhere) with the hosts, the settings, and per (test, figure)
//! a heat map: a source x destination table whose cells are coloured from good (green)
//! to bad (red) across that figure's measured pairs, the value written in each cell as
//! the terminal table writes it ([`super::report::table`]), under it the spread and the
//! worst pairs, and for round trips the merged distribution as a small bar chart.
//!
//! Every text that comes from elsewhere (host names, addresses, kernels, reasons) is
//! escaped with [`crate::report::html::escape`], as the benchmark report does.

use std::fmt::Write as _;

use super::report::{self, Figure, FigureSummary, Index, Merged, MeshReport};
use super::Outcome;
use crate::measure::units::{format_bytes, format_seconds};
use crate::report::html::escape;

/// The page's style: the benchmark report's palette (light, or dark when the system
/// prefers it), and the heat map's cells, which keep dark text on their light colours
/// in either theme.
const STYLE: &str = r#"
:root { color-scheme: light dark; --bg: #ffffff; --fg: #1d1f23; --muted: #5b6270; --line: #d8dce3; --panel: #f5f7fa; --warn: #8a5a00; --bad: #b3261e; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #15171b; --fg: #e6e8eb; --muted: #a2a9b4; --line: #363b44; --panel: #1d2026; --warn: #f0b44c; --bad: #ff8a80; }
}
body { margin: 0 auto; max-width: 1100px; padding: 1.5rem; background: var(--bg); color: var(--fg); font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.25rem; margin: 2rem 0 .75rem; border-bottom: 1px solid var(--line); padding-bottom: .25rem; }
h3 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .9em; }
pre { background: var(--panel); padding: .6rem .8rem; border-radius: 6px; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
.muted { color: var(--muted); }
.warn { color: var(--warn); }
.bad { color: var(--bad); font-weight: 600; }
.stress { display: inline-block; background: var(--bad); color: var(--bg); border-radius: 4px; padding: .1rem .5rem; font-weight: 600; }
section.figure { margin: 1rem 0 2rem; padding: .75rem; background: var(--panel); border-radius: 8px; }
section.figure svg { display: block; width: 100%; max-width: 680px; height: auto; color: var(--fg); margin-top: .5rem; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: .88rem; margin: .5rem 0; }
th, td { border-bottom: 1px solid var(--line); padding: .3rem .6rem; white-space: nowrap; }
th { text-align: left; background: var(--panel); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.heat td, table.heat th { border: 1px solid var(--line); }
table.heat td { text-align: right; font-variant-numeric: tabular-nums; min-width: 6em; }
table.heat td.value { color: #1d1f23; }
table.heat td.failed { color: #1d1f23; background: repeating-linear-gradient(45deg, #9aa0a8 0 4px, #c9cdd3 4px 8px); font-style: italic; }
table.heat td.missing { color: var(--muted); text-align: center; }
table.heat td.diagonal { background: var(--bg); }
.scale { display: inline-block; width: 8em; height: .8em; border-radius: 2px; vertical-align: middle; margin: 0 .4em; background: linear-gradient(to right, hsl(120,70%,80%), hsl(60,70%,80%), hsl(0,70%,80%)); }
p.summary { font-size: .9rem; margin: .3rem 0; }
dl.env { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: 0; }
dl.env dt { color: var(--muted); }
dl.env dd { margin: 0; }
"#;

/// How a figure's cells are coloured: where each value sits between the figure's best
/// and worst measured pair.
struct Scale {
    min: f64,
    max: f64,
    higher_is_better: bool,
    /// Logarithmic (round trips, whose pairs differ by factors), else linear.
    log: bool,
}

impl Scale {
    fn of(s: &FigureSummary, fig: Figure) -> Option<Scale> {
        let values = s.matrix.iter().flatten().flatten().copied();
        let (min, max) = values.fold(None, |acc: Option<(f64, f64)>, v| {
            Some(acc.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))))
        })?;
        Some(Scale {
            min,
            max,
            higher_is_better: s.higher_is_better,
            log: fig.is_round_trip() && min > 0.0,
        })
    }

    /// 0 for the best value, 1 for the worst; 0 for all when every pair is equal.
    fn badness(&self, v: f64) -> f64 {
        let t = |x: f64| if self.log { x.ln() } else { x };
        let (lo, hi) = (t(self.min), t(self.max));
        if hi <= lo {
            return 0.0;
        }
        let up = ((t(v) - lo) / (hi - lo)).clamp(0.0, 1.0);
        if self.higher_is_better {
            1.0 - up
        } else {
            up
        }
    }

    /// The cell's background: hue 120 (green, best) to 0 (red, worst).
    fn colour(&self, v: f64) -> String {
        format!("hsl({:.0},70%,80%)", 120.0 * (1.0 - self.badness(v)))
    }

    /// What the colours mean, for the legend under the heading.
    fn legend(&self, fig: Figure) -> String {
        let (best, worst) = if self.higher_is_better {
            (self.max, self.min)
        } else {
            (self.min, self.max)
        };
        format!(
            "<p class=\"muted summary\">colour: best {}<span class=\"scale\"></span>worst {} \
             ({} scale across the measured pairs; {}); hatched: failed (hover for why); \
             \".\": not measured</p>\n",
            escape(&fig.format(best)),
            escape(&fig.format(worst)),
            if self.log { "logarithmic" } else { "linear" },
            if self.higher_is_better {
                "higher is better"
            } else {
                "lower is better"
            },
        )
    }
}

/// The mesh's report as one self-contained HTML page.
pub fn html(r: &MeshReport) -> String {
    let labels = report::labels(&r.hosts);
    let index = report::index(&r.tests, r.hosts.len());
    let mut out = String::new();
    let title = "sockbench mesh report";
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"sockbench {}\">\n<title>{title}</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n<header><h1>{title}</h1></header>\n",
        escape(env!("CARGO_PKG_VERSION")),
    );
    header(&mut out, r);
    hosts(&mut out, r, &labels);
    settings(&mut out, r);
    out.push_str("<h2 id=\"figures\">Heat maps</h2>\n<p class=\"muted\">Rows: source (the client); columns: destination.</p>\n");
    if r.figures.is_empty() {
        out.push_str("<p id=\"empty\" class=\"warn\">No test gave a figure.</p>\n");
    }
    for s in &r.figures {
        heat_map(&mut out, r, s, &index, &labels);
    }
    failures(&mut out, r, &labels);
    out.push_str("</body>\n</html>\n");
    out
}

/// The tool, the command line, the counts, and the notes a reader must see first.
fn header(out: &mut String, r: &MeshReport) {
    let _ = writeln!(
        out,
        "<p class=\"muted\">{} &middot; {} hosts &middot; {} tests &middot; <span id=\"failed-count\"{}>{} failed</span> &middot; schema version {}</p>",
        escape(&r.tool),
        r.hosts.len(),
        r.tests.len(),
        if r.failed > 0 { " class=\"bad\"" } else { "" },
        r.failed,
        r.schema_version
    );
    if !r.command.is_empty() {
        let _ = writeln!(
            out,
            "<pre id=\"command\">{}</pre>",
            escape(&r.command.join(" "))
        );
    }
    if r.settings.concurrent {
        out.push_str(
            "<p id=\"concurrent\"><span class=\"stress\">stress: --concurrent</span> every pair ran \
             at once: these figures include the tests' interference with each other.</p>\n",
        );
    }
    if r.interrupted {
        out.push_str(
            "<p id=\"interrupted\" class=\"warn\">Interrupted: the figures cover what ran before Ctrl-C.</p>\n",
        );
    }
    if !r.warnings.is_empty() {
        out.push_str("<ul id=\"warnings\">\n");
        for w in &r.warnings {
            let _ = writeln!(out, "<li class=\"warn\">{}</li>", escape(w));
        }
        out.push_str("</ul>\n");
    }
}

/// The hosts: the label the heat maps use, and what each agent said of itself.
fn hosts(out: &mut String, r: &MeshReport, labels: &[String]) {
    out.push_str("<h2 id=\"hosts\">Hosts</h2>\n<div class=\"table-wrap\"><table id=\"hosts-table\">\n<thead><tr>");
    for h in [
        "label",
        "name",
        "address",
        "kernel",
        "route device",
        "MTU",
        "status",
    ] {
        let _ = write!(out, "<th>{h}</th>");
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for (i, h) in r.hosts.iter().enumerate() {
        let meta = h.meta.as_ref();
        let cells = [
            report::label(labels, i),
            h.name.clone(),
            h.address.clone(),
            meta.map_or_else(String::new, |m| m.kernel.clone()),
            meta.and_then(|m| m.route_device.clone())
                .unwrap_or_default(),
            meta.and_then(|m| m.mtu)
                .map_or_else(String::new, |m| m.to_string()),
        ];
        out.push_str("<tr>");
        for c in &cells {
            let _ = write!(out, "<td>{}</td>", escape(c));
        }
        match &h.error {
            Some(e) => {
                let _ = write!(out, "<td class=\"bad\">{}</td>", escape(e));
            }
            None => out.push_str("<td>ok</td>"),
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
}

/// How the mesh was run.
fn settings(out: &mut String, r: &MeshReport) {
    let s = &r.settings;
    out.push_str("<h2 id=\"settings\">Settings</h2>\n<dl class=\"env\">\n");
    let mut row = |k: &str, v: &str| {
        let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
    };
    row("pairs", &s.pairs);
    if let Some(seed) = s.seed {
        row("seed", &seed.to_string());
    }
    row(
        "schedule",
        &if s.concurrent {
            "--concurrent: every pair at once (stress)".to_string()
        } else {
            format!("{} rounds, no host in two tests at once", s.rounds)
        },
    );
    row("tests", &s.tests.join(", "));
    row("duration", &format_seconds(s.duration_s));
    row(
        "warm-up",
        &if s.warmup_s > 0.0 {
            format_seconds(s.warmup_s)
        } else {
            "none".into()
        },
    );
    row("parallel streams (tcp-stream)", &s.parallel.to_string());
    row(
        "message size",
        &s.size.map_or("each test's default".into(), format_bytes),
    );
    if s.ended_unix_ns > s.started_unix_ns {
        row(
            "took",
            &format_seconds((s.ended_unix_ns - s.started_unix_ns) as f64 / 1e9),
        );
    }
    out.push_str("</dl>\n");
}

/// Hosts up to which the page draws each heat map (10,000 cells); beyond, the spread and
/// worst pairs stand for it, as in the terminal table over
/// [`report::TABLE_MATRIX_MAX`].
pub const HTML_MATRIX_MAX: usize = 100;

/// One figure: its heading, the colour legend, the table, the spread and worst pairs,
/// and (under a test's first round-trip figure) the merged round trips.
fn heat_map(
    out: &mut String,
    r: &MeshReport,
    s: &FigureSummary,
    index: &Index<'_>,
    labels: &[String],
) {
    let Some(fig) = Figure::from_key(&s.figure) else {
        return;
    };
    let id = format!("{}-{}", s.test, s.figure);
    let _ = writeln!(
        out,
        "<section class=\"figure\" id=\"figure-{}\">\n<h3>{}: {}</h3>",
        escape(&id),
        escape(&s.test),
        escape(fig.title())
    );
    let scale = Scale::of(s, fig);
    if let Some(sc) = &scale {
        out.push_str(&sc.legend(fig));
    }
    if s.matrix.len() > HTML_MATRIX_MAX {
        let _ = writeln!(
            out,
            "<p class=\"muted\" data-matrix-left-out=\"{0}\">({0} x {0} matrix: in --format json and --format openmetrics)</p>",
            s.matrix.len()
        );
    } else {
        table(out, r, s, fig, scale.as_ref(), index, labels);
    }
    let mut lines = String::new();
    report::summary_lines(&mut lines, fig, s, labels);
    for l in lines.lines() {
        let _ = writeln!(out, "<p class=\"summary\">{}</p>", escape(l));
    }
    if let Some(m) = s.merged.as_ref().filter(|_| is_first_round_trip(r, s)) {
        merged_chart(out, &s.test, m);
    }
    out.push_str("</section>\n");
}

/// The heat map's table: a row per source, a column per destination.
fn table(
    out: &mut String,
    r: &MeshReport,
    s: &FigureSummary,
    fig: Figure,
    scale: Option<&Scale>,
    index: &Index<'_>,
    labels: &[String],
) {
    let _ = write!(
        out,
        "<div class=\"table-wrap\"><table class=\"heat\" data-test=\"{}\" data-figure=\"{}\">\n<thead><tr><th>from \\ to</th>",
        escape(&s.test),
        escape(&s.figure)
    );
    for d in 0..s.matrix.len() {
        let _ = write!(
            out,
            "<th class=\"num\">{}</th>",
            escape(&report::label(labels, d))
        );
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for (src, row) in s.matrix.iter().enumerate() {
        let _ = write!(
            out,
            "<tr><th>{}</th>",
            escape(&report::row_label(&r.hosts, labels, src))
        );
        for (dst, v) in row.iter().enumerate() {
            let outcome = index.get(&(s.test.as_str(), src, dst));
            cell(out, fig, scale, *v, outcome, src == dst);
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
}

/// Whether `s` is its test's first round-trip figure (the merged chart goes once).
fn is_first_round_trip(r: &MeshReport, s: &FigureSummary) -> bool {
    r.figures
        .iter()
        .find(|f| f.test == s.test && f.merged.is_some())
        .is_some_and(|f| f.figure == s.figure)
}

/// One cell: blank on the diagonal; coloured with its value; hatched with its reason for
/// a failed test; the terminal table's `.` or `n/a` otherwise.
fn cell(
    out: &mut String,
    fig: Figure,
    scale: Option<&Scale>,
    v: Option<f64>,
    outcome: Option<&&Outcome>,
    diagonal: bool,
) {
    if diagonal {
        out.push_str("<td class=\"diagonal\"></td>");
        return;
    }
    let text = escape(&report::cell(fig, v, outcome, false));
    match (v, outcome, scale) {
        (Some(v), _, Some(sc)) => {
            let _ = write!(
                out,
                "<td class=\"value\" data-bad=\"{:.0}\" data-value=\"{v}\" style=\"background:{}\">{text}</td>",
                sc.badness(v) * 100.0,
                sc.colour(v)
            );
        }
        (None, Some(Outcome::Failed { reason }), _) => {
            let _ = write!(
                out,
                "<td class=\"failed\" title=\"{}\">{text}</td>",
                escape(reason)
            );
        }
        _ => {
            let _ = write!(out, "<td class=\"missing\">{text}</td>");
        }
    }
}

/// The merged round trips as bars, one per bucket (its upper bound and count in a
/// tooltip), the lowest and highest bounds under the axis.
fn merged_chart(out: &mut String, test: &str, m: &Merged) {
    if m.buckets.is_empty() {
        return;
    }
    let (w, h, left, bottom, top) = (640.0, 160.0, 48.0, 24.0, 10.0);
    let plot_w = w - left - 8.0;
    let plot_h = h - bottom - top;
    let max = m.buckets.iter().map(|b| b.count).max().unwrap_or(1).max(1) as f64;
    let bar = plot_w / m.buckets.len() as f64;
    let _ = writeln!(
        out,
        "<svg data-chart=\"merged-{}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{} round trips merged over every pair\">",
        escape(test),
        escape(test)
    );
    let _ = writeln!(
        out,
        "<line x1=\"{left}\" y1=\"{y}\" x2=\"{x2}\" y2=\"{y}\" stroke=\"currentColor\" stroke-width=\"1\"/>",
        y = top + plot_h,
        x2 = left + plot_w
    );
    for (i, b) in m.buckets.iter().enumerate() {
        let bh = b.count as f64 / max * plot_h;
        let marks: Vec<&str> = [("p50", m.p50_ns), ("p90", m.p90_ns), ("p99", m.p99_ns)]
            .into_iter()
            .filter(|&(_, ns)| ns == b.le_ns)
            .map(|(name, _)| name)
            .collect();
        if !marks.is_empty() {
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"currentColor\" text-anchor=\"middle\" data-marks=\"{}\">{}</text>",
                left + (i as f64 + 0.5) * bar,
                (top + plot_h - bh - 3.0).max(top + 8.0),
                marks.join(" "),
                marks.join(" ")
            );
        }
        let _ = writeln!(
            out,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#4e79a7\"><title>≤ {}: {}</title></rect>",
            left + i as f64 * bar + bar * 0.1,
            top + plot_h - bh,
            bar * 0.8,
            bh,
            escape(&report::micros(b.le_ns as f64)),
            b.count
        );
    }
    let text = |out: &mut String, x: f64, y: f64, anchor: &str, s: &str| {
        let _ = writeln!(
            out,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"11\" fill=\"currentColor\" text-anchor=\"{anchor}\">{}</text>",
            escape(s)
        );
    };
    text(out, left - 4.0, top + 9.0, "end", &(max as u64).to_string());
    text(out, left - 4.0, top + plot_h, "end", "0");
    let first = m.buckets.first().map_or(0, |b| b.le_ns);
    let last = m.buckets.last().map_or(0, |b| b.le_ns);
    text(
        out,
        left,
        h - 6.0,
        "start",
        &format!("≤ {}", report::micros(first as f64)),
    );
    text(
        out,
        left + plot_w,
        h - 6.0,
        "end",
        &format!("≤ {}", report::micros(last as f64)),
    );
    out.push_str("</svg>\n");
    let _ = writeln!(
        out,
        "<p class=\"muted summary\">{} round trips of every pair in the report's buckets (upper bounds); bars are counts per bucket.</p>",
        m.count
    );
}

/// The failed tests with their reasons, and the hosts that could not take part.
fn failures(out: &mut String, r: &MeshReport, labels: &[String]) {
    let bad_hosts: Vec<_> = r
        .hosts
        .iter()
        .enumerate()
        .filter(|(_, h)| h.error.is_some())
        .collect();
    if r.failed == 0 && bad_hosts.is_empty() {
        return;
    }
    out.push_str("<h2 id=\"failures\">Failed</h2>\n<ul>\n");
    for t in &r.tests {
        if let Outcome::Failed { reason } = &t.outcome {
            let _ = writeln!(
                out,
                "<li class=\"bad\"><strong>{} → {} {}</strong>: {}</li>",
                escape(&report::label(labels, t.source)),
                escape(&report::label(labels, t.destination)),
                escape(&t.test),
                escape(reason)
            );
        }
    }
    for (i, h) in bad_hosts {
        let _ = writeln!(
            out,
            "<li class=\"bad\"><strong>host {} ({})</strong>: {}</li>",
            escape(&report::label(labels, i)),
            escape(&h.name),
            escape(h.error.as_deref().unwrap_or_default())
        );
    }
    out.push_str("</ul>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::report::tests::{self as report_tests, failed, host, pair, stream};
    use crate::mesh::report::{build, Settings};
    use crate::mesh::{Host, HostMeta};

    fn pingpong(p50: u64, p99: u64, buckets: &[(u64, u64)]) -> Outcome {
        report_tests::pingpong(p50, p99, 0.0, buckets)
    }

    /// Three hosts, the third named with markup; tcp-stream with 2 -> 0 failed for a
    /// reason with markup; tcp-pingpong between the first two.
    fn sample(concurrent: bool, interrupted: bool) -> MeshReport {
        let mut hosts = vec![
            host("alpha", "10.0.0.1:5290", None),
            host("beta", "10.0.0.2:5290", None),
            host("<script>alert(1)</script>", "10.0.0.3:5290", None),
        ];
        hosts[0].meta = Some(HostMeta {
            hostname: "alpha".into(),
            kernel: "Linux 6.1.0".into(),
            route_device: Some("eth0".into()),
            mtu: Some(9000),
            cpus: 4,
            ..HostMeta::default()
        });
        let tests = vec![
            pair(0, 1, "tcp-stream", stream(9.41e9)),
            pair(1, 0, "tcp-stream", stream(8e9)),
            pair(0, 2, "tcp-stream", stream(5e9)),
            pair(
                2,
                0,
                "tcp-stream",
                failed("timed out <after 5 s> & gave up"),
            ),
            pair(1, 2, "tcp-stream", stream(7e9)),
            pair(2, 1, "tcp-stream", stream(1e9)),
            pair(
                0,
                1,
                "tcp-pingpong",
                pingpong(20_000, 50_000, &[(16_000, 2), (20_000, 4), (50_000, 4)]),
            ),
            pair(
                1,
                0,
                "tcp-pingpong",
                pingpong(25_000, 80_000, &[(20_000, 1), (25_000, 6), (80_000, 3)]),
            ),
        ];
        let settings = Settings {
            pairs: "all".into(),
            concurrent,
            rounds: 3,
            tests: vec!["tcp-stream".into(), "tcp-pingpong".into()],
            duration_s: 1.0,
            parallel: 1,
            ..Settings::default()
        };
        build(
            vec!["sockbench".into(), "mesh".into()],
            settings,
            hosts,
            tests,
            interrupted,
        )
    }

    /// The `<table class="heat" ...>` of a figure, up to its end.
    fn table<'a>(page: &'a str, test: &str, figure: &str) -> &'a str {
        let start = page
            .find(&format!(
                "<table class=\"heat\" data-test=\"{test}\" data-figure=\"{figure}\">"
            ))
            .unwrap_or_else(|| panic!("no table {test} {figure}"));
        let end = start + page[start..].find("</table>").unwrap();
        &page[start..end]
    }

    /// Each `<td ...>text</td>` of a table: (its opening tag, its text).
    fn cells(table: &str) -> Vec<(String, String)> {
        table
            .split("<td")
            .skip(1)
            .map(|rest| {
                let tag_end = rest.find('>').unwrap();
                let text_end = rest.find("</td>").unwrap();
                (
                    rest[..tag_end].to_string(),
                    rest[tag_end + 1..text_end].to_string(),
                )
            })
            .collect()
    }

    fn attr(tag: &str, name: &str) -> String {
        let key = format!("{name}=\"");
        let start = tag
            .find(&key)
            .unwrap_or_else(|| panic!("no {name} in {tag}"))
            + key.len();
        tag[start..start + tag[start..].find('"').unwrap()].to_string()
    }

    fn hue(tag: &str) -> f64 {
        let style = attr(tag, "style");
        let inner = style.split("hsl(").nth(1).unwrap();
        inner.split(',').next().unwrap().parse().unwrap()
    }

    #[test]
    fn one_table_per_figure_with_the_text_tables_cells() {
        let r = sample(false, false);
        let page = html(&r);
        assert_eq!(
            page.matches("<table class=\"heat\"").count(),
            r.figures.len()
        );
        assert_eq!(r.figures.len(), 4, "stream bps, pingpong p50, p99, loss");
        let t = table(&page, "tcp-stream", "bits_per_second");
        let texts: Vec<String> = cells(t).into_iter().map(|(_, text)| text).collect();
        assert_eq!(
            texts,
            [
                "",
                "9.41 Gbit/s",
                "5.00 Gbit/s",
                "8.00 Gbit/s",
                "",
                "7.00 Gbit/s",
                "failed",
                "1.00 Gbit/s",
                ""
            ]
        );
        let p50 = table(&page, "tcp-pingpong", "round_trip_p50_ns");
        let texts: Vec<String> = cells(p50).into_iter().map(|(_, text)| text).collect();
        assert_eq!(
            texts,
            ["", "20.0 µs", ".", "25.0 µs", "", ".", ".", ".", ""]
        );
        // The spread and worst pairs, as the terminal table words them (escaped).
        assert!(page.contains(
            "across 5 pairs: min 1.00 Gbit/s, p10 1.00 Gbit/s, p50 7.00 Gbit/s, p90 9.41 Gbit/s, max 9.41 Gbit/s; worst: h2→h1 1.00 Gbit/s, h0→h2 5.00 Gbit/s, h1→h2 7.00 Gbit/s"
        ), "{page}");
        assert!(
            page.contains("all pairs&#39; 20 round trips merged"),
            "{page}"
        );
        // The merged chart once for the test, balanced SVG.
        assert_eq!(page.matches("<svg ").count(), 1);
        assert_eq!(page.matches("</svg>").count(), 1);
        assert!(page.contains("data-chart=\"merged-tcp-pingpong\""));
        assert!(page.contains("logarithmic scale"));
        assert!(page.contains("linear scale"));
    }

    #[test]
    fn failed_cells_carry_their_escaped_reason_and_names_are_escaped() {
        let page = html(&sample(false, false));
        let t = table(&page, "tcp-stream", "bits_per_second");
        let (tag, _) = cells(t)
            .into_iter()
            .find(|(tag, _)| tag.contains("failed"))
            .unwrap();
        assert_eq!(
            attr(&tag, "title"),
            "timed out &lt;after 5 s&gt; &amp; gave up"
        );
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!page.contains("<script"), "no script at all");
        assert!(!page.contains("<after"));
        // The hosts legend: the agent's kernel, route device and MTU.
        assert!(
            page.contains("<td>Linux 6.1.0</td><td>eth0</td><td>9000</td>"),
            "{page}"
        );
        assert!(page.contains("1 failed</span>"));
        assert!(page.contains("h2 → h0 tcp-stream</strong>: timed out &lt;after 5 s&gt;"));
    }

    #[test]
    fn the_best_cell_is_green_and_the_worst_red_in_either_direction() {
        let page = html(&sample(false, false));
        // Throughput: higher is better, 9.41 Gbit/s best, 1 Gbit/s worst.
        let t = cells(table(&page, "tcp-stream", "bits_per_second"));
        let tag_of = |cells: &[(String, String)], text: &str| {
            cells.iter().find(|(_, t)| t == text).unwrap().0.clone()
        };
        let best = tag_of(&t, "9.41 Gbit/s");
        let worst = tag_of(&t, "1.00 Gbit/s");
        let mid = tag_of(&t, "7.00 Gbit/s");
        assert_eq!(attr(&best, "data-bad"), "0");
        assert_eq!(attr(&worst, "data-bad"), "100");
        assert_eq!(hue(&best), 120.0);
        assert_eq!(hue(&worst), 0.0);
        assert!(hue(&mid) > hue(&worst) && hue(&mid) < hue(&best));
        // Round trips: lower is better.
        let l = cells(table(&page, "tcp-pingpong", "round_trip_p99_ns"));
        let fast = tag_of(&l, "50.0 µs");
        let slow = tag_of(&l, "80.0 µs");
        assert_eq!(attr(&fast, "data-bad"), "0");
        assert_eq!(attr(&slow, "data-bad"), "100");
        assert!(hue(&fast) > hue(&slow));
    }

    #[test]
    fn the_page_is_self_contained_and_says_stress_and_interrupted() {
        let page = html(&sample(true, true));
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.trim_end().ends_with("</html>"));
        let http = page.matches("http://").count() + page.matches("https://").count();
        assert_eq!(
            http,
            page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
        );
        for needle in ["<link", "@import", "url(", "src=", "<script", "<iframe"] {
            assert!(!page.contains(needle), "{needle}");
        }
        assert!(page.contains("id=\"concurrent\""));
        assert!(page.contains("stress: --concurrent"));
        assert!(page.contains("id=\"interrupted\""));
        let calm = html(&sample(false, false));
        assert!(!calm.contains("id=\"concurrent\""));
        assert!(!calm.contains("id=\"interrupted\""));
    }

    #[test]
    fn the_merged_chart_marks_the_percentiles_buckets() {
        let page = html(&sample(false, false));
        // Merged: 16 µs 2, 20 µs 5, 25 µs 6, 50 µs 4, 80 µs 3 (20): p50 rank 10 at 25 µs,
        // p90 rank 18 and p99 rank 20 at 80 µs.
        assert_eq!(page.matches("<rect ").count(), 5);
        assert!(page.contains("<title>≤ 25.0 µs: 6</title>"), "{page}");
        assert_eq!(page.matches("data-marks=\"p50\"").count(), 1);
        assert_eq!(page.matches("data-marks=\"p90 p99\"").count(), 1);
    }

    #[test]
    fn a_mesh_too_wide_for_a_page_gives_its_spread_without_the_matrix() {
        let of = |n: usize| {
            let hosts: Vec<Host> = (0..n)
                .map(|i| {
                    host(
                        &format!("h{i}"),
                        &format!("10.0.{}.{}:5290", i / 250, i % 250),
                        None,
                    )
                })
                .collect();
            let tests = vec![
                pair(0, 1, "tcp-stream", stream(1e9)),
                pair(1, 0, "tcp-stream", stream(2e9)),
            ];
            html(&build(Vec::new(), Settings::default(), hosts, tests, false))
        };
        let wide = of(HTML_MATRIX_MAX + 1);
        assert!(!wide.contains("<table class=\"heat\""));
        assert!(wide.contains("(101 x 101 matrix: in --format json"));
        assert!(wide.contains("across 2 pairs: min 1.00 Gbit/s"));
        let fits = of(HTML_MATRIX_MAX);
        assert_eq!(fits.matches("<table class=\"heat\"").count(), 1);
        assert!(!fits.contains("matrix: in --format json"));
    }

    #[test]
    fn an_empty_mesh_and_equal_values_still_render() {
        let r = build(
            Vec::new(),
            Settings::default(),
            Vec::new(),
            Vec::new(),
            false,
        );
        let page = html(&r);
        assert!(page.contains("No test gave a figure"));
        assert!(!page.contains("<table class=\"heat\""));
        let r = build(
            Vec::new(),
            Settings::default(),
            vec![host("a", "x", None), host("b", "y", None)],
            vec![
                pair(0, 1, "tcp-stream", stream(1e9)),
                pair(1, 0, "tcp-stream", stream(1e9)),
            ],
            false,
        );
        let page = html(&r);
        let t = cells(table(&page, "tcp-stream", "bits_per_second"));
        assert!(t
            .iter()
            .filter(|(tag, _)| tag.contains("value"))
            .all(|(tag, _)| attr(tag, "data-bad") == "0"));
    }
}

//! The HTML report: one self-contained page (inline CSS and SVG, one small inline script
//! for the theme switch, nothing fetched from elsewhere) with the charts of `chart.rs`,
//! the warnings, every table of the shared [`grid`] builder and the environment.
//!
//! This module owns the page: its layout, its light and dark themes (the system's
//! `prefers-color-scheme`, or the reader's choice with the switch) and the escaping of
//! every text it shows. What the charts plot is `chart.rs`'s business; what the tables
//! hold is `grid.rs`'s.

use std::fmt::Write as _;

use super::chart::{self, Chart};
use super::grid::{self, Align};
use super::{Exporter, Report, View};

/// The HTML exporter.
pub struct Html {
    /// How the tables present figures (the page always shows every column).
    pub view: View,
}

/// Text made safe for HTML element content and attribute values: `&`, `<`, `>`, `"`
/// and `'` become character references; a control character other than HTML's own
/// white space (line feed, tab) is written as [`crate::text::terminal`] writes it
/// (`\x1b`), so the page printed on a terminal cannot drive it.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if crate::text::hidden(c) => out.push_str(&crate::text::terminal(&c.to_string())),
            c => out.push(c),
        }
    }
    out
}

/// The page's style: light by default, dark when the system prefers it, either when the
/// reader picks it (`data-theme` on the root element).
const STYLE: &str = r#"
:root { color-scheme: light dark; --bg: #ffffff; --fg: #1d1f23; --muted: #5b6270; --line: #d8dce3; --panel: #f5f7fa; --warn: #8a5a00; --bad: #b3261e; }
@media (prefers-color-scheme: dark) {
  :root:not([data-theme="light"]) { --bg: #15171b; --fg: #e6e8eb; --muted: #a2a9b4; --line: #363b44; --panel: #1d2026; --warn: #f0b44c; --bad: #ff8a80; }
}
:root[data-theme="dark"] { --bg: #15171b; --fg: #e6e8eb; --muted: #a2a9b4; --line: #363b44; --panel: #1d2026; --warn: #f0b44c; --bad: #ff8a80; }
body { margin: 0 auto; max-width: 1100px; padding: 1.5rem; background: var(--bg); color: var(--fg); font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.25rem; margin: 2rem 0 .75rem; border-bottom: 1px solid var(--line); padding-bottom: .25rem; }
h3 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .9em; }
pre { background: var(--panel); padding: .6rem .8rem; border-radius: 6px; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
.muted { color: var(--muted); }
a { color: inherit; }
.bar { display: flex; justify-content: space-between; align-items: baseline; gap: 1rem; flex-wrap: wrap; }
button.theme { background: var(--panel); color: var(--fg); border: 1px solid var(--line); border-radius: 6px; padding: .3rem .7rem; cursor: pointer; font: inherit; }
figure { margin: 1rem 0 2rem; padding: .75rem; background: var(--panel); border-radius: 8px; }
figure svg { display: block; width: 100%; max-width: 980px; height: auto; color: var(--fg); }
figcaption { color: var(--muted); font-size: .9rem; margin-top: .4rem; }
ul.legend { list-style: none; padding: 0; margin: .4rem 0 0; display: flex; flex-wrap: wrap; gap: .3rem 1.2rem; font-size: .9rem; }
ul.legend span.swatch { display: inline-block; width: 1.6em; height: .35em; border-radius: 2px; vertical-align: middle; margin-right: .4em; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: .88rem; margin: .5rem 0; }
th, td { border-bottom: 1px solid var(--line); padding: .3rem .6rem; white-space: nowrap; }
th { text-align: left; background: var(--panel); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
ul.notes { font-size: .9rem; color: var(--muted); }
.warn { color: var(--warn); }
.bad { color: var(--bad); font-weight: 600; }
dl.env { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: 0; }
dl.env dt { color: var(--muted); }
dl.env dd { margin: 0; }
"#;

/// The theme switch: cycles the page between the system's theme, light and dark.
const SCRIPT: &str = r#"
(function () {
  var root = document.documentElement;
  var button = document.getElementById("theme");
  var order = ["auto", "light", "dark"];
  function show(mode) {
    if (mode === "auto") { root.removeAttribute("data-theme"); } else { root.setAttribute("data-theme", mode); }
    button.textContent = "Theme: " + mode;
    button.setAttribute("data-mode", mode);
  }
  button.addEventListener("click", function () {
    var now = button.getAttribute("data-mode") || "auto";
    show(order[(order.indexOf(now) + 1) % order.length]);
  });
  show("auto");
})();
"#;

impl Exporter for Html {
    fn serialize(&self, report: &Report) -> anyhow::Result<Vec<u8>> {
        Ok(page(report, &self.view).into_bytes())
    }
}

/// The page's head and title line, up to the open body.
fn head(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"sockbench {}\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        escape(env!("CARGO_PKG_VERSION")),
        escape(title)
    );
    let _ = writeln!(
        out,
        "<header class=\"bar\"><h1>{}</h1><button id=\"theme\" class=\"theme\" type=\"button\">Theme: auto</button></header>",
        escape(title)
    );
}

/// The theme switch's script and the end of the page.
fn tail(out: &mut String) {
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
}

/// The whole page.
fn page(report: &Report, view: &View) -> String {
    let mut out = String::new();
    let title = match report.command.get(1) {
        Some(mode) if !mode.starts_with('-') => format!("sockbench {mode} report"),
        _ if report.layout == crate::plan::Layout::Suite => "sockbench suite report".into(),
        _ => "sockbench report".to_string(),
    };
    head(&mut out, &title);
    let _ = writeln!(
        out,
        "<p class=\"muted\">{} {} &middot; {} scenario{} &middot; schema version {}</p>",
        escape(&report.tool.name),
        escape(&report.tool.version),
        report.results.len(),
        if report.results.len() == 1 { "" } else { "s" },
        report.schema_version
    );
    let _ = writeln!(
        out,
        "<pre id=\"command\">{}</pre>",
        escape(&shell_words(&report.command))
    );
    status(&mut out, report);
    let notes = warning_items(report);
    if !notes.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"warn\">{} warning{} or failure{}: see <a href=\"#warnings\">below</a>.</p>",
            notes.len(),
            if notes.len() == 1 { "" } else { "s" },
            if notes.len() == 1 { "" } else { "s" },
        );
    }
    if report.results.is_empty() {
        out.push_str(
            "<p id=\"empty\" class=\"warn\">No results: this report holds no finished \
             scenario, so there is nothing to chart.</p>\n",
        );
    } else {
        out.push_str("<h2 id=\"charts\">Charts</h2>\n");
        for c in chart::charts(report) {
            figure(&mut out, &c);
        }
    }
    warnings(&mut out, &notes);
    tables(&mut out, report, view);
    environment(&mut out, report);
    tail(&mut out);
    out
}

/// The page of a `sockbench models` document: how the servers were driven, the charts
/// of [`chart::models_charts`], the warnings and one table row per model.
pub fn models_page(report: &crate::mode::models::ModelsReport) -> String {
    let mut out = String::new();
    head(&mut out, "sockbench models report");
    let _ = writeln!(
        out,
        "<pre id=\"command\">{}</pre>",
        escape(&shell_words(&report.command))
    );
    let load = match (report.requests, report.duration_seconds) {
        (Some(n), _) => format!("{n} requests per model"),
        (None, Some(d)) => format!("{d} s per model"),
        (None, None) => String::new(),
    };
    let _ = writeln!(
        out,
        "<p class=\"muted\">{load} over {} connection{}{}{}, {} B response bodies, backlog {}; driven by {}{}.</p>",
        report.connections,
        if report.connections == 1 { "" } else { "s" },
        if report.keepalive { ", keep-alive" } else { ", a connection per request" },
        if report.pipeline > 1 { format!(", {} pipelined", report.pipeline) } else { String::new() },
        report.body_bytes,
        report.backlog,
        escape(
            &serde_json::to_value(report.driver)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ),
        report.cpus.map_or(String::new(), |[s, l]| format!("; server on CPU {s}, load on CPU {l}")),
    );
    if report.interrupted {
        out.push_str(
            "<p class=\"warn\">Interrupted: the page holds the models that finished.</p>\n",
        );
    }
    if report.rows.is_empty() {
        out.push_str("<p id=\"empty\" class=\"warn\">No results: no model ran.</p>\n");
    } else {
        out.push_str("<h2 id=\"charts\">Charts</h2>\n");
        for c in chart::models_charts(&report.rows) {
            figure(&mut out, &c);
        }
    }
    let mut notes: Vec<String> = report
        .warnings
        .iter()
        .map(|w| format!("<li class=\"warn\">{}</li>", escape(w)))
        .collect();
    // The ranking, with its noise: a winner only beyond it (issue 29).
    let show = |v: f64| crate::measure::units::format_per_second(v).replace("/s", " requests/s");
    for line in crate::measure::ranking::summaries(report.ranking.as_slice(), &show) {
        notes.push(format!(
            "<li id=\"ranking\">ranking: {}</li>",
            escape(&line)
        ));
    }
    for r in &report.rows {
        if let Some(e) = &r.error {
            notes.push(format!(
                "<li class=\"bad\"><strong>{}</strong> failed: {}</li>",
                escape(&r.model),
                escape(e)
            ));
        }
        if let Some(s) = &r.skipped {
            notes.push(format!(
                "<li class=\"muted\"><strong>{}</strong> skipped: {}</li>",
                escape(&r.model),
                escape(s)
            ));
        }
    }
    warnings(&mut out, &notes);
    if !report.rows.is_empty() {
        models_table(&mut out, &report.rows);
    }
    tail(&mut out);
    out
}

/// One row per model, the figures as the terminal table shows them.
fn models_table(out: &mut String, rows: &[crate::mode::models::Row]) {
    use crate::measure::units::{format_ns, format_per_second, format_seconds};
    let headers = [
        "model",
        "requests/s",
        "runs min-max",
        "p50",
        "p99",
        "mean",
        "server CPU/request",
        "complete",
        "failed",
        "non-2xx",
    ];
    out.push_str("<h2 id=\"tables\">Table</h2>\n<div class=\"table-wrap\"><table>\n<thead><tr>");
    for (i, h) in headers.iter().enumerate() {
        let _ = write!(
            out,
            "<th{}>{}</th>",
            class(if i == 0 { Align::Left } else { Align::Right }),
            escape(h)
        );
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    let dash = || "-".to_string();
    for r in rows {
        let status = if r.skipped.is_some() {
            Some("skipped")
        } else if r.error.is_some() {
            Some("failed")
        } else {
            None
        };
        let cells = [
            r.model.clone(),
            status.map_or_else(
                || r.requests_per_second.map_or_else(dash, format_per_second),
                str::to_string,
            ),
            crate::measure::ranking::spread_cell(&r.runs_requests_per_second, &format_per_second),
            r.p50_ns.map_or_else(dash, format_ns),
            r.p99_ns.map_or_else(dash, format_ns),
            r.mean_ns.map_or_else(dash, format_ns),
            r.server_cpu_seconds_per_request
                .map_or_else(dash, format_seconds),
            r.requests_complete.map_or_else(dash, |n| n.to_string()),
            r.requests_failed.map_or_else(dash, |n| n.to_string()),
            r.non_2xx.map_or_else(dash, |n| n.to_string()),
        ];
        out.push_str("<tr>");
        for (i, c) in cells.iter().enumerate() {
            let _ = write!(
                out,
                "<td{}>{}</td>",
                class(if i == 0 { Align::Left } else { Align::Right }),
                escape(c)
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
}

/// The command line as a shell would take it back: words with special characters quoted.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./,:=@%+".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether the run was interrupted or failed.
fn status(out: &mut String, report: &Report) {
    if report.interrupted {
        out.push_str(
            "<p class=\"warn\">Interrupted: the run was stopped early; the report holds the \
             scenarios that finished.</p>\n",
        );
    }
    if let Some(e) = &report.error {
        let _ = writeln!(out, "<p class=\"bad\">The run failed: {}</p>", escape(e));
    }
}

/// The report's warnings and every scenario's, with failures, as list items.
fn warning_items(report: &Report) -> Vec<String> {
    let mut items: Vec<String> = report
        .warnings
        .iter()
        .map(|w| format!("<li class=\"warn\">{}</li>", escape(w)))
        .collect();
    for r in &report.results {
        for w in &r.warnings {
            items.push(format!(
                "<li class=\"warn\"><strong>{}</strong> ({}): {}</li>",
                escape(&r.label()),
                escape(&w.kind),
                escape(&w.message)
            ));
        }
        if let Some(e) = &r.error {
            items.push(format!(
                "<li class=\"bad\"><strong>{} {}</strong> failed: {}</li>",
                escape(&r.workload.to_string()),
                escape(&r.label()),
                escape(e)
            ));
        } else if r.runs.is_empty() {
            items.push(format!(
                "<li class=\"bad\"><strong>{} {}</strong>: no run finished</li>",
                escape(&r.workload.to_string()),
                escape(&r.label())
            ));
        }
    }
    items
}

/// The warnings section, when there is anything to say.
fn warnings(out: &mut String, items: &[String]) {
    if items.is_empty() {
        return;
    }
    out.push_str("<h2 id=\"warnings\">Warnings and failures</h2>\n<ul>\n");
    for i in items {
        out.push_str(i);
        out.push('\n');
    }
    out.push_str("</ul>\n");
}

/// One chart as a figure: heading, SVG (or a sentence when there is nothing to draw),
/// legend and caption.
fn figure(out: &mut String, c: &Chart) {
    let _ = writeln!(
        out,
        "<figure id=\"chart-{}\">\n<h3>{}</h3>",
        escape(&c.id),
        escape(&c.title)
    );
    if c.svg.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"muted\" data-empty-chart=\"{}\">",
            escape(&c.id)
        );
        out.push_str("No chart.</p>\n");
    } else {
        out.push_str(&c.svg);
        out.push('\n');
    }
    if !c.legend.is_empty() {
        out.push_str("<ul class=\"legend\">");
        for (label, colour) in &c.legend {
            let _ = write!(
                out,
                "<li><span class=\"swatch\" style=\"background:{}\"></span>{}</li>",
                escape(colour),
                escape(label)
            );
        }
        out.push_str("</ul>\n");
    }
    let _ = writeln!(
        out,
        "<figcaption>{}</figcaption>\n</figure>",
        escape(&c.caption)
    );
}

/// Every table of the shared builder (all columns: the page scrolls sideways), notes
/// under each.
fn tables(out: &mut String, report: &Report, view: &View) {
    let view = View {
        wide: true,
        ..*view
    };
    let grids = grid::build(report, &view);
    if grids
        .iter()
        .all(|g| g.rows.is_empty() && g.notes.is_empty())
    {
        return;
    }
    out.push_str("<h2 id=\"tables\">Tables</h2>\n");
    for g in &grids {
        if let Some(t) = &g.title {
            let _ = writeln!(out, "<h3>{}</h3>", escape(t));
        }
        if !g.rows.is_empty() {
            out.push_str("<div class=\"table-wrap\"><table>\n<thead><tr>");
            for (h, a) in g.headers.iter().zip(&g.align) {
                let _ = write!(out, "<th{}>{}</th>", class(*a), escape(h));
            }
            out.push_str("</tr></thead>\n<tbody>\n");
            for row in &g.rows {
                out.push_str("<tr>");
                for (c, a) in row.iter().zip(&g.align) {
                    let _ = write!(out, "<td{}>{}</td>", class(*a), escape(c));
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</tbody>\n</table></div>\n");
        }
        if !g.notes.is_empty() {
            out.push_str("<ul class=\"notes\">\n");
            for n in &g.notes {
                let _ = writeln!(out, "<li>{}</li>", escape(n));
            }
            out.push_str("</ul>\n");
        }
    }
}

fn class(a: Align) -> &'static str {
    match a {
        Align::Left => "",
        Align::Right => " class=\"num\"",
    }
}

/// The machine, the placement and the sysctls.
fn environment(out: &mut String, report: &Report) {
    let env = &report.environment;
    out.push_str("<h2 id=\"environment\">Environment</h2>\n<dl class=\"env\">\n");
    let mut row = |k: &str, v: &str| {
        let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
    };
    row("kernel", &env.kernel);
    row("host", &env.hostname);
    row("CPU", env.cpu_model.as_deref().unwrap_or("unknown"));
    row("logical CPUs", &env.cpus.to_string());
    row(
        "frequency governor",
        env.governor.as_deref().unwrap_or("none (no cpufreq)"),
    );
    let p = &report.placement;
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
    row("placement", &placement);
    if let Some(server) = &p.server {
        row("server", server);
    }
    if let Some(s) = &p.server_environment {
        row("server kernel", &s.kernel);
        row("server CPU", s.cpu_model.as_deref().unwrap_or("unknown"));
        row("server logical CPUs", &s.cpus.to_string());
    }
    for (k, v) in &env.sysctls {
        row(k, v.as_deref().unwrap_or("absent"));
    }
    out.push_str("</dl>\n");
    if !report.skipped.is_empty() {
        out.push_str("<h3>Left out</h3>\n<ul class=\"notes\">\n");
        for s in &report.skipped {
            let _ = writeln!(
                out,
                "<li>{} {} {} ({}): {}</li>",
                escape(&s.workload.to_string()),
                escape(&s.transport.to_string()),
                escape(&crate::measure::units::format_bytes(s.size_bytes)),
                escape(&s.engine.to_string()),
                escape(&s.reason)
            );
        }
        out.push_str("</ul>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{sample, Warning};

    fn render(report: &Report) -> String {
        String::from_utf8(
            Html {
                view: View::default(),
            }
            .serialize(report)
            .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn command_lines_and_warnings_are_escaped() {
        let mut report = sample::stream();
        report.command = vec![
            "sockbench".into(),
            "stream".into(),
            "--unix-path".into(),
            "/tmp/<x>&y".into(),
        ];
        report.warnings.push("odd <b>bold</b> & more".into());
        report.results[0].warnings.push(Warning {
            kind: "unstable".into(),
            message: "runs <differ> & vary".into(),
        });
        report.results[1].error = Some("<script>alert(1)</script>".into());
        let page = render(&report);
        assert!(page.contains("&#39;/tmp/&lt;x&gt;&amp;y&#39;"), "{page}");
        assert!(page.contains("odd &lt;b&gt;bold&lt;/b&gt; &amp; more"));
        assert!(page.contains("runs &lt;differ&gt; &amp; vary"));
        assert!(!page.contains("<script>alert"));
        assert!(!page.contains("<b>bold"));
        assert_eq!(page.matches("<script>").count(), 1, "only the theme switch");
    }

    #[test]
    fn the_page_holds_every_table_row_of_the_markdown_grid() {
        let report = sample::suite();
        let page = render(&report);
        let grids = grid::build(
            &report,
            &View {
                wide: true,
                ..View::default()
            },
        );
        assert_eq!(grids.len(), 3);
        let rows: usize = grids.iter().map(|g| g.rows.len()).sum();
        assert_eq!(page.matches("<tr>").count(), rows + grids.len());
        for g in &grids {
            assert!(page.contains(&format!("<h3>{}</h3>", escape(g.title.as_ref().unwrap()))));
        }
        assert!(page.contains("<td class=\"num\">"));
    }

    #[test]
    fn the_page_is_self_contained_with_one_svg_per_chart() {
        let report = sample::suite();
        let page = render(&report);
        assert!(page.starts_with("<!DOCTYPE html>"));
        // The only http text is the SVG namespace.
        assert_eq!(
            page.matches("http").count(),
            page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
        );
        for attr in ["src=\"http", "href=\"http", "url(http", "@import"] {
            assert!(!page.contains(attr), "{attr}");
        }
        let charts = chart::charts(&report);
        let drawn = charts.iter().filter(|c| !c.svg.is_empty()).count();
        assert!(drawn >= 3, "{drawn}");
        assert_eq!(page.matches("<svg ").count(), drawn);
        assert_eq!(page.matches("</svg>").count(), drawn);
        assert!(page.contains("data-chart=\"throughput-size\""));
        assert!(page.contains("prefers-color-scheme: dark"));
        assert!(page.contains("<title>sockbench suite report</title>"));
    }

    #[test]
    fn an_empty_report_still_makes_a_page_that_says_so() {
        let report = sample::report(Vec::new(), crate::plan::Layout::List);
        let page = render(&report);
        assert!(page.contains("id=\"empty\""));
        assert!(page.contains("No results"));
        assert!(!page.contains("<svg"));
        assert!(page.trim_end().ends_with("</html>"));
    }

    #[test]
    fn a_failed_scenario_is_listed_as_failed() {
        let page = render(&sample::stream_failed());
        assert!(page.contains(
            "<li class=\"bad\"><strong>stream tcp 64 KiB</strong> failed: tcp sender failed"
        ));
        assert!(page.contains("Not plotted: tcp 64 KiB (failed)"));
    }

    #[test]
    fn the_environment_is_shown() {
        let page = render(&sample::pingpong());
        assert!(page.contains("<dt>kernel</dt><dd>Linux 6.1.0</dd>"));
        assert!(page.contains("<dt>placement</dt><dd>threads</dd>"));
    }
}

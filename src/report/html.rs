//! The HTML report: one self-contained page (inline CSS and SVG, one small inline script
//! for the theme switch, nothing fetched from elsewhere) with the charts of `chart.rs`,
//! the warnings, every table of the shared [`grid`] builder and the environment.
//!
//! This module owns the page: its layout, its light and dark themes (the system's
//! `prefers-color-scheme`, or the reader's choice with the switch) and the escaping of
//! every text it shows. What the charts plot is `chart.rs`'s business; what the tables
//! hold is `grid.rs`'s.

use std::fmt::Write as _;

use crate::report::chart::{Chart, HeatCell, HeatMap};
use crate::report::grid::Align;
use crate::report::output::{Finding, Head, Rendered, Severity};
use crate::report::Exporter;
use crate::vocab::View;

/// The HTML exporter.
pub struct Html {
    /// How the tables present figures (the page always shows every column).
    pub view: View,
}

/// Text made safe for HTML element content and attribute values: `&`, `<`, `>`, `"`
/// and `'` become character references; a control character other than HTML's own
/// white space (line feed, tab) is written as [`crate::vocab::text::terminal`] writes it
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
            c if crate::vocab::text::hidden(c) => {
                out.push_str(&crate::vocab::text::terminal(&c.to_string()))
            }
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
p.summary { font-size: .9rem; margin: .3rem 0; }
table.heat td, table.heat th { border: 1px solid var(--line); }
table.heat td { text-align: right; font-variant-numeric: tabular-nums; min-width: 6em; }
table.heat td.value { color: #1d1f23; }
table.heat td.failed { color: #1d1f23; background: repeating-linear-gradient(45deg, #9aa0a8 0 4px, #c9cdd3 4px 8px); font-style: italic; }
table.heat td.missing { color: var(--muted); text-align: center; }
table.heat td.diagonal { background: var(--bg); }
.scale { display: inline-block; width: 8em; height: .8em; border-radius: 2px; vertical-align: middle; margin: 0 .4em; background: linear-gradient(to right, hsl(120,70%,80%), hsl(60,70%,80%), hsl(0,70%,80%)); }
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
    fn serialize(&self, doc: &dyn Rendered) -> anyhow::Result<Vec<u8>> {
        Ok(page(doc, &self.view).into_bytes())
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
fn page(doc: &dyn Rendered, view: &View) -> String {
    let mut out = String::new();
    let h = doc.head();
    head(&mut out, &doc.title());
    let _ = writeln!(
        out,
        "<p class=\"muted\">{} {} &middot; {} &middot; schema version {}</p>",
        escape(&h.tool.name),
        escape(&h.tool.version),
        escape(&doc.count()),
        h.schema_version
    );
    let _ = writeln!(
        out,
        "<pre id=\"command\">{}</pre>",
        escape(&shell_words(h.command))
    );
    status(&mut out, &h);
    let notes = warning_items(&h, &doc.findings());
    if !notes.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"warn\">{} warning{} or failure{}: see <a href=\"#warnings\">below</a>.</p>",
            notes.len(),
            if notes.len() == 1 { "" } else { "s" },
            if notes.len() == 1 { "" } else { "s" },
        );
    }
    match doc.nothing_to_chart() {
        Some(why) => {
            let _ = writeln!(out, "<p id=\"empty\" class=\"warn\">{}</p>", escape(&why));
        }
        None => {
            out.push_str("<h2 id=\"charts\">Charts</h2>\n");
            for c in doc.charts() {
                figure(&mut out, &c);
            }
        }
    }
    warnings(&mut out, &notes);
    tables(&mut out, doc, view);
    environment(&mut out, doc);
    tail(&mut out);
    out
}

/// The command line as a shell would take it back: words with special characters quoted.
pub(crate) fn shell_words(argv: &[String]) -> String {
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
fn status(out: &mut String, h: &Head<'_>) {
    if h.interrupted {
        out.push_str(
            "<p class=\"warn\">Interrupted: the run was stopped early; the report holds the \
             scenarios that finished.</p>\n",
        );
    }
    if let Some(e) = h.error {
        let _ = writeln!(out, "<p class=\"bad\">The run failed: {}</p>", escape(e));
    }
}

/// The document's warnings and its parts', with failures, as list items.
fn warning_items(h: &Head<'_>, findings: &[Finding]) -> Vec<String> {
    let mut items: Vec<String> = (h.warnings.iter())
        .map(|w| format!("<li class=\"warn\">{}</li>", escape(w)))
        .collect();
    for f in findings {
        let class = match f.severity {
            Severity::Warning => "warn",
            Severity::Failure => "bad",
        };
        items.push(format!(
            "<li class=\"{class}\"><strong>{}</strong>{}</li>",
            escape(&f.about),
            escape(&f.text)
        ));
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
    if let Some(h) = &c.heat {
        heat_map(out, h);
    } else if c.svg.is_empty() {
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
    for n in &c.notes {
        let _ = writeln!(out, "<p class=\"summary\">{}</p>", escape(n));
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

/// A heat map: its scale's sentence (best, the colour bar, worst), then a table whose
/// value cells are coloured by their badness, hue 120 (green, best) to 0 (red, worst);
/// a failed cell hatched with why on hover.
fn heat_map(out: &mut String, h: &HeatMap) {
    if let Some(scale) = &h.scale {
        let _ = writeln!(
            out,
            "<p class=\"muted summary\"><span class=\"scale\"></span>{}</p>",
            escape(scale)
        );
    }
    out.push_str("<div class=\"table-wrap\"><table class=\"heat\"");
    for (k, v) in &h.data {
        let _ = write!(out, " data-{}=\"{}\"", escape(k), escape(v));
    }
    let _ = write!(out, ">\n<thead><tr><th>{}</th>", escape(&h.corner));
    for c in &h.columns {
        let _ = write!(out, "<th class=\"num\">{}</th>", escape(c));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for (head, cells) in &h.rows {
        let _ = write!(out, "<tr><th>{}</th>", escape(head));
        for c in cells {
            match c {
                HeatCell::Blank => out.push_str("<td class=\"diagonal\"></td>"),
                HeatCell::Value {
                    text,
                    value,
                    badness,
                } => {
                    let bad = badness.clamp(0.0, 1.0);
                    let _ = write!(
                        out,
                        "<td class=\"value\" data-bad=\"{:.0}\" data-value=\"{value}\" style=\"background:hsl({:.0},70%,80%)\">{}</td>",
                        bad * 100.0,
                        120.0 * (1.0 - bad),
                        escape(text)
                    );
                }
                HeatCell::Failed { text, why } => {
                    let _ = write!(
                        out,
                        "<td class=\"failed\" title=\"{}\">{}</td>",
                        escape(why),
                        escape(text)
                    );
                }
                HeatCell::Missing(text) => {
                    let _ = write!(out, "<td class=\"missing\">{}</td>", escape(text));
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
}

/// Every table of the shared builder (all columns: the page scrolls sideways), notes
/// under each.
fn tables(out: &mut String, doc: &dyn Rendered, view: &View) {
    let view = View {
        wide: true,
        ..*view
    };
    let grids = doc.tables(&view);
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
            out.push_str("<div class=\"table-wrap\"><table>\n");
            // A table of names and values has no header.
            if g.headers.iter().any(|h| !h.is_empty()) {
                out.push_str("<thead><tr>");
                for (h, a) in g.headers.iter().zip(&g.align) {
                    let _ = write!(out, "<th{}>{}</th>", class(*a), escape(h));
                }
                out.push_str("</tr></thead>\n");
            }
            out.push_str("<tbody>\n");
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

/// The machine, how the command ran (the placement, the server), the sysctls, and what
/// was left out.
fn environment(out: &mut String, doc: &dyn Rendered) {
    out.push_str("<h2 id=\"environment\">Environment</h2>\n<dl class=\"env\">\n");
    let mut row = |k: &str, v: &str| {
        let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
    };
    let env = doc.head().environment;
    match env {
        Some(env) => {
            row("kernel", &env.kernel);
            row("host", &env.hostname);
            row("CPU", env.cpu_model.as_deref().unwrap_or("unknown"));
            row("logical CPUs", &env.cpus.to_string());
            row(
                "frequency governor",
                env.governor.as_deref().unwrap_or("none (no cpufreq)"),
            );
        }
        None => row("machine", "not recorded"),
    }
    for (k, v) in doc.setting() {
        row(&k, &v);
    }
    for (k, v) in env.iter().flat_map(|e| &e.sysctls) {
        row(k, v.as_deref().unwrap_or("absent"));
    }
    out.push_str("</dl>\n");
    let left_out = doc.left_out();
    if !left_out.is_empty() {
        out.push_str("<h3>Left out</h3>\n<ul class=\"notes\">\n");
        for s in &left_out {
            let _ = writeln!(out, "<li>{}</li>", escape(s));
        }
        out.push_str("</ul>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{chart, grid, sample, Report};
    use crate::results::Warning;

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
        let report = sample::report(Vec::new(), crate::scenario::Layout::List);
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

//! How a compare [`Document`] reads: one block per NEW file (a title, a table of the
//! matched scenarios, the scenarios only one side has and what needs saying), drawn as a
//! terminal table, Markdown, a self-contained HTML page (with an SVG chart of the ratios
//! and their intervals; CSS for light and dark) or CSV (one row per comparison).

use crate::report::html::escape as html_escape;
use crate::text::{markdown as md_escape, terminal as shown};
use comfy_table::{presets, CellAlignment, ContentArrangement, Table as Comfy};

use super::{Comparison, Document, TestKind};
use crate::measure::units::{
    format_bits_per_second, format_bytes_per_second, format_ns, format_per_second,
};
use crate::report::{Units, View};

/// One block: a BASE/NEW pair.
struct Block {
    /// The NEW file.
    new_file: String,
    title: String,
    headers: Vec<String>,
    /// Which columns are right-aligned.
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
    notes: Vec<String>,
}

/// A p-value for people: three decimals, `<0.001` below that.
pub fn format_p(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

/// A percentage without needless decimals: `5%`, `2.5%`.
pub fn format_percent(p: f64) -> String {
    let s = format!("{p:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// The test's name as the tables print it.
pub fn test_name(t: Option<TestKind>) -> &'static str {
    match t {
        Some(TestKind::Welch) => "Welch",
        Some(TestKind::WelchLog) => "Welch on logs",
        Some(TestKind::MannWhitneyExact) => "Mann-Whitney",
        Some(TestKind::MannWhitneyNormal) => "Mann-Whitney (normal approx.)",
        None => "-",
    }
}

/// A figure in units that read well.
fn format_value(figure: &str, v: Option<f64>, view: View) -> String {
    let Some(v) = v else {
        return "-".into();
    };
    match figure {
        "bits_per_second" => match view.units {
            Units::Bits => format_bits_per_second(v),
            Units::Bytes => format_bytes_per_second(v / 8.0),
            Units::Both => format!(
                "{} ({})",
                format_bits_per_second(v),
                format_bytes_per_second(v / 8.0)
            ),
        },
        "round_trip_p50_ns" => format_ns(v.round().max(0.0) as u64),
        _ => format_per_second(v),
    }
}

/// A ratio with three decimals, or three significant digits below 0.1: `1.161`,
/// `0.500`, `0.00129`.
fn format_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), ratio_text)
}

fn ratio_text(r: f64) -> String {
    let digits = if r > 0.0 && r.is_finite() {
        (2 - r.log10().floor() as i32).clamp(3, 12) as usize
    } else {
        3
    };
    format!("{r:.digits$}")
}

/// The interval column's header: the nominal confidence.
fn ci_header(alpha: f64) -> String {
    format!("{} CI", format_percent(100.0 * (1.0 - alpha)))
}

/// The blocks of a document, NEW file by NEW file.
fn blocks(doc: &Document, view: View) -> Vec<Block> {
    let mut out = Vec::new();
    for new in &doc.new {
        let rows: Vec<&Comparison> = (doc.comparisons.iter())
            .filter(|c| &c.new_file == new)
            .collect();
        let mut notes = Vec::new();
        for c in &rows {
            if let Some(n) = &c.note {
                notes.push(format!("{}: {n}", c.scenario));
            }
        }
        for (which, list) in [("BASE", &doc.only_in_base), ("NEW", &doc.only_in_new)] {
            let names: Vec<String> = (list.iter())
                .filter(|u| &u.new_file == new)
                .map(|u| match u.gate_failed {
                    true => format!("{} (fails the gate)", u.scenario),
                    false => u.scenario.clone(),
                })
                .collect();
            if !names.is_empty() {
                notes.push(format!("only in {which}: {}", names.join(", ")));
            }
        }
        out.push(Block {
            new_file: new.clone(),
            title: format!("{} → {new}", doc.base),
            headers: [
                "scenario", "base", "new", "ratio", "", "p", "test", "verdict",
            ]
            .iter()
            .enumerate()
            .map(|(i, h)| match i {
                4 => ci_header(doc.alpha),
                _ => h.to_string(),
            })
            .collect(),
            right: vec![false, true, true, true, true, true, false, false],
            rows: rows.iter().map(|c| row(c, view)).collect(),
            notes,
        });
    }
    out
}

/// One table row.
fn row(c: &Comparison, view: View) -> Vec<String> {
    let value = |s: &super::Side| match s.error {
        Some(_) => "failed".to_string(),
        None => format_value(c.figure, s.median, view),
    };
    let ci = match (c.ratio_ci_low, c.ratio_ci_high) {
        (Some(lo), Some(hi)) => format!("{}–{}", ratio_text(lo), ratio_text(hi)),
        _ => "-".into(),
    };
    let mut verdict = c.verdict.text().to_string();
    if c.gate_failed {
        verdict.push_str(" (fails the gate)");
    }
    vec![
        c.scenario.clone(),
        value(&c.base),
        value(&c.new),
        format_ratio(c.ratio),
        ci,
        c.p_value.map_or_else(|| "-".into(), format_p),
        test_name(c.test).into(),
        verdict,
    ]
}

/// The notes under every block: how to read it, the runs' troubles and the gate.
fn footer(doc: &Document) -> Vec<String> {
    let mut notes = doc.notes.clone();
    if !doc.comparisons.is_empty() {
        notes.push(
            "ratio: new/base of the run medians (pingpong: round-trip p50, lower is better), \
             with its confidence interval (CI)"
                .into(),
        );
        notes.push(format!(
            "p: two-sided, from Welch's t-test when both sides have 3+ runs without outliers, \
             else Mann-Whitney U; significant below alpha {}",
            doc.alpha
        ));
    }
    if !doc.ignored_options.is_empty() {
        notes.push(format!(
            "matched ignoring: {}",
            doc.ignored_options.join(", ")
        ));
    }
    if let Some(pct) = doc.fail_if_slower_percent {
        let mut failed: Vec<String> = (doc.comparisons.iter())
            .filter(|c| c.gate_failed)
            .map(|c| match c.verdict {
                super::Verdict::Failed => format!("{} in {} (failed)", c.scenario, c.new_file),
                _ => format!(
                    "{} in {} ({:.1}% slower)",
                    c.scenario,
                    c.new_file,
                    c.slower_percent.unwrap_or(f64::NAN)
                ),
            })
            .collect();
        failed.extend(
            (doc.only_in_base.iter())
                .filter(|u| u.gate_failed)
                .map(|u| format!("{} (missing from {})", u.scenario, u.new_file)),
        );
        notes.push(match failed.is_empty() {
            true => format!(
                "--fail-if-slower {}: passed (no scenario significantly slower by more, \
                 none failed or missing in NEW)",
                format_percent(pct)
            ),
            false => format!(
                "--fail-if-slower {}: FAILED: {}",
                format_percent(pct),
                failed.join("; ")
            ),
        });
    }
    notes
}

/// The terminal table; every string passes [`crate::text::terminal`] (file names and
/// what the reports say are not sockbench's words).
pub fn table(doc: &Document, view: View) -> String {
    let mut out = String::new();
    for (i, b) in blocks(doc, view).iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&shown(&b.title));
        out.push('\n');
        if !b.rows.is_empty() {
            let mut t = Comfy::new();
            t.load_preset(presets::UTF8_FULL_CONDENSED)
                .set_content_arrangement(ContentArrangement::Disabled)
                .set_header(b.headers.iter().map(|h| shown(h)));
            for r in &b.rows {
                t.add_row(r.iter().map(|c| shown(c)));
            }
            for (i, &right) in b.right.iter().enumerate() {
                if let Some(c) = t.column_mut(i) {
                    c.set_cell_alignment(match right {
                        true => CellAlignment::Right,
                        false => CellAlignment::Left,
                    });
                }
            }
            out.push_str(&t.to_string());
            out.push('\n');
        } else {
            out.push_str("no scenario in common\n");
        }
        for n in &b.notes {
            out.push_str(&shown(n));
            out.push('\n');
        }
    }
    let footer = footer(doc);
    if !footer.is_empty() {
        out.push('\n');
    }
    for n in footer {
        out.push_str(&shown(&n));
        out.push('\n');
    }
    out
}

/// Markdown: a heading and a table per block, notes as lists; every string is Markdown
/// text ([`crate::text::markdown`]: no HTML element, cell break or line break).
pub fn markdown(doc: &Document, view: View) -> String {
    let mut out = String::new();
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    for (i, b) in blocks(doc, view).iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("### {}\n\n", md_escape(&b.title)));
        if b.rows.is_empty() {
            out.push_str("No scenario in common.\n");
        } else {
            out.push_str(&line(b.headers.iter().map(|h| md_escape(h)).collect()));
            out.push_str(&line(
                (b.right.iter())
                    .map(|&r| if r { "---:" } else { ":---" }.to_string())
                    .collect(),
            ));
            for r in &b.rows {
                out.push_str(&line(r.iter().map(|c| md_escape(c)).collect()));
            }
        }
        if !b.notes.is_empty() {
            out.push('\n');
            for n in &b.notes {
                out.push_str(&format!("- {}\n", md_escape(n)));
            }
        }
    }
    let footer = footer(doc);
    if !footer.is_empty() {
        out.push('\n');
    }
    for n in footer {
        out.push_str(&format!("- {}\n", md_escape(&n)));
    }
    out
}

const STYLE: &str = "
:root { color-scheme: light dark; --fg: #1b1f24; --bg: #ffffff; --muted: #57606a;
  --line: #d0d7de; --head: #f6f8fa; --faster: #1a7f37; --slower: #cf222e; --same: #6e7781; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --bg: #0d1117; --muted: #8d96a0; --line: #30363d; --head: #161b22;
    --faster: #3fb950; --slower: #f85149; --same: #8d96a0; }
}
body { font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg);
  margin: 2em auto; max-width: 72em; padding: 0 1em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid var(--line); padding: 0.25em 0.6em; }
th { background: var(--head); }
td.r { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.faster { color: var(--faster); } .slower { color: var(--slower); }
.note { color: var(--muted); }
svg text { fill: var(--fg); font: 12px system-ui, sans-serif; }
svg .axis { stroke: var(--muted); } svg .grid { stroke: var(--line); }
svg .faster { stroke: var(--faster); fill: var(--faster); }
svg .slower { stroke: var(--slower); fill: var(--slower); }
svg .same { stroke: var(--same); fill: var(--same); }
";

/// A self-contained page: per block a chart of ratios with their intervals, the table and
/// the notes.
pub fn html(doc: &Document, view: View) -> String {
    let mut out =
        String::from("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str(&format!(
        "<title>sockbench compare: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        html_escape(&doc.base)
    ));
    out.push_str(&format!(
        "<h1>sockbench compare</h1>\n<p class=\"note\">BASE {} against {}; alpha {}</p>\n",
        html_escape(&doc.base),
        html_escape(&doc.new.join(", ")),
        doc.alpha
    ));
    for b in blocks(doc, view) {
        out.push_str(&format!("<h2>{}</h2>\n", html_escape(&b.title)));
        let rows: Vec<&Comparison> = (doc.comparisons.iter())
            .filter(|c| c.new_file == b.new_file)
            .collect();
        out.push_str(&chart(&rows));
        if b.rows.is_empty() {
            out.push_str("<p>No scenario in common.</p>\n");
        } else {
            out.push_str("<table>\n<tr>");
            for h in &b.headers {
                out.push_str(&format!("<th>{}</th>", html_escape(h)));
            }
            out.push_str("</tr>\n");
            for (r, c) in b.rows.iter().zip(&rows) {
                out.push_str(&format!("<tr class=\"{}\">", verdict_class(c)));
                for (cell, &right) in r.iter().zip(&b.right) {
                    let class = if right { " class=\"r\"" } else { "" };
                    out.push_str(&format!("<td{class}>{}</td>", html_escape(cell)));
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</table>\n");
        }
        for n in &b.notes {
            out.push_str(&format!("<p class=\"note\">{}</p>\n", html_escape(n)));
        }
    }
    for n in footer(doc) {
        out.push_str(&format!("<p class=\"note\">{}</p>\n", html_escape(&n)));
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn verdict_class(c: &Comparison) -> &'static str {
    match c.verdict {
        super::Verdict::Faster => "faster",
        super::Verdict::Slower => "slower",
        _ => "same",
    }
}

/// An SVG chart: per row its ratio (a dot) and interval (a whisker) on a log scale, with a
/// line at 1. Empty when no row has a ratio.
fn chart(rows: &[&Comparison]) -> String {
    let rows: Vec<&&Comparison> = rows.iter().filter(|c| c.ratio.is_some()).collect();
    if rows.is_empty() {
        return String::new();
    }
    let values = rows.iter().flat_map(|c| {
        [c.ratio, c.ratio_ci_low, c.ratio_ci_high]
            .into_iter()
            .flatten()
            .filter(|v| *v > 0.0 && v.is_finite())
    });
    let (lo, hi) = values.fold((1.0f64, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = (lo / 1.1, hi * 1.1);
    // Room for the longest label at about 7 px a character (12 px sans-serif).
    let longest = rows.iter().map(|c| c.scenario.chars().count()).max();
    let left = (longest.unwrap_or(0) as f64 * 7.0 + 16.0).max(120.0);
    let (width, row_h, top) = (420.0, 24.0, 10.0);
    let x = |v: f64| left + (v.max(lo).min(hi) / lo).ln() / (hi / lo).ln() * width;
    let height = top + row_h * rows.len() as f64 + 36.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" role=\"img\" \
         aria-label=\"ratio new/base with its interval, per scenario\">\n",
        left + width + 20.0
    );
    let bottom = top + row_h * rows.len() as f64;
    s.push_str(&format!(
        "<line class=\"axis\" x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{bottom}\"/>\n",
        x(1.0)
    ));
    let mut ticks = vec![lo * 1.1, 1.0, hi / 1.1];
    ticks.dedup_by(|a, b| (*a - *b).abs() < 1e-12);
    for v in ticks {
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{v:.3}</text>\n",
            x(v),
            bottom + 16.0
        ));
    }
    s.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">ratio new/base (log scale; pingpong: latency, lower is better)</text>\n",
        left + width / 2.0,
        bottom + 32.0
    ));
    for (i, c) in rows.iter().enumerate() {
        let y = top + row_h * (i as f64 + 0.5);
        let class = verdict_class(c);
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            left - 8.0,
            y + 4.0,
            html_escape(&c.scenario)
        ));
        if let (Some(a), Some(b)) = (c.ratio_ci_low, c.ratio_ci_high) {
            let (xa, xb) = (x(a), x(b));
            s.push_str(&format!(
                "<g class=\"{class}\"><line x1=\"{xa:.1}\" y1=\"{y:.1}\" x2=\"{xb:.1}\" y2=\"{y:.1}\" stroke-width=\"2\"/>\
                 <line x1=\"{xa:.1}\" y1=\"{:.1}\" x2=\"{xa:.1}\" y2=\"{:.1}\" stroke-width=\"2\"/>\
                 <line x1=\"{xb:.1}\" y1=\"{:.1}\" x2=\"{xb:.1}\" y2=\"{:.1}\" stroke-width=\"2\"/></g>\n",
                y - 5.0,
                y + 5.0,
                y - 5.0,
                y + 5.0
            ));
        }
        if let Some(r) = c.ratio {
            s.push_str(&format!(
                "<circle class=\"{class}\" cx=\"{:.1}\" cy=\"{y:.1}\" r=\"4\"><title>{}: {:.3} ({})</title></circle>\n",
                x(r),
                html_escape(&c.scenario),
                r,
                c.verdict.text()
            ));
        }
    }
    s.push_str("</svg>\n");
    s
}

/// CSV: one row per comparison, exact values in base units.
///
/// # Errors
/// Only if the CSV writer fails.
pub fn csv(doc: &Document) -> anyhow::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "base_file",
        "new_file",
        "scenario",
        "workload",
        "transport",
        "engine",
        "size_bytes",
        "figure",
        "higher_is_better",
        "base_runs",
        "base_median",
        "new_runs",
        "new_median",
        "ratio",
        "ratio_ci_low",
        "ratio_ci_high",
        "ci_confidence",
        "test",
        "p_value",
        "verdict",
        "slower_percent",
        "gate_failed",
        "note",
    ])?;
    let num = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    let name = |v: serde_json::Value| v.as_str().unwrap_or_default().to_string();
    for c in &doc.comparisons {
        w.write_record([
            shown(&doc.base),
            shown(&c.new_file),
            shown(&c.scenario),
            c.workload.to_string(),
            c.transport.to_string(),
            c.engine.to_string(),
            c.size_bytes.to_string(),
            c.figure.to_string(),
            c.higher_is_better.to_string(),
            c.base.runs.to_string(),
            num(c.base.median),
            c.new.runs.to_string(),
            num(c.new.median),
            num(c.ratio),
            num(c.ratio_ci_low),
            num(c.ratio_ci_high),
            num(c.ci_confidence),
            c.test
                .map(|t| name(serde_json::json!(t)))
                .unwrap_or_default(),
            num(c.p_value),
            c.verdict.text().to_string(),
            num(c.slower_percent),
            c.gate_failed.to_string(),
            c.note.as_deref().map(shown).unwrap_or_default(),
        ])?;
    }
    Ok(w.into_inner()?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ratios_keep_three_significant_digits_when_small() {
        assert_eq!(super::ratio_text(1.16123), "1.161");
        assert_eq!(super::ratio_text(0.5), "0.500");
        assert_eq!(super::ratio_text(0.099), "0.0990");
        assert_eq!(super::ratio_text(0.001_294), "0.00129");
        assert_eq!(super::ratio_text(12.5), "12.500");
        assert_eq!(super::ratio_text(0.0), "0.000");
        assert_eq!(super::format_p(0.000_9), "<0.001");
        assert_eq!(super::format_p(0.0079), "0.008");
        assert_eq!(super::format_percent(5.0), "5%");
        assert_eq!(super::format_percent(2.5), "2.5%");
    }
}

//! How a compare [`CompareReport`] reads: one block per NEW file (a title, a table of the
//! matched scenarios, the scenarios only one side has and what needs saying), drawn as a
//! terminal table, Markdown, a self-contained HTML page (with an SVG chart of the ratios
//! and their intervals; CSS for light and dark) or CSV (one row per comparison).

use crate::report::html::escape as html_escape;
use crate::vocab::text::terminal as shown;

use super::{CompareReport, Comparison, TestKind};
use crate::report::chart::Chart;
use crate::report::grid::{Align, Grid};
use crate::report::Quantity;
use crate::vocab::View;

/// One block: a BASE/NEW pair.
struct Block {
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
fn format_value(quantity: Quantity, v: Option<f64>, view: View) -> String {
    v.map_or_else(|| "-".into(), |v| quantity.format(v, view.units))
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
fn blocks(doc: &CompareReport, view: View) -> Vec<Block> {
    let mut out = Vec::new();
    for new in &doc.body.new {
        let rows: Vec<&Comparison> = (doc.body.comparisons.iter())
            .filter(|c| &c.new_file == new)
            .collect();
        let mut notes = Vec::new();
        for c in &rows {
            if let Some(n) = &c.note {
                notes.push(format!("{}: {n}", c.scenario));
            }
        }
        for (which, list) in [
            ("BASE", &doc.body.only_in_base),
            ("NEW", &doc.body.only_in_new),
        ] {
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
            title: format!("{} → {new}", doc.body.base),
            headers: [
                "scenario", "base", "new", "ratio", "", "p", "test", "verdict",
            ]
            .iter()
            .enumerate()
            .map(|(i, h)| match i {
                4 => ci_header(doc.body.alpha),
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
        None => format_value(c.quantity, s.median, view),
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
fn footer(doc: &CompareReport) -> Vec<String> {
    let mut notes = doc.envelope.warnings.clone();
    if !doc.body.comparisons.is_empty() {
        notes.push(
            "ratio: new/base of the run medians (pingpong: round-trip p50, lower is better), \
             with its confidence interval (CI)"
                .into(),
        );
        notes.push(format!(
            "p: two-sided, from Welch's t-test when both sides have 3+ runs without outliers, \
             else Mann-Whitney U; significant below alpha {}",
            doc.body.alpha
        ));
    }
    if !doc.body.ignored_options.is_empty() {
        notes.push(format!(
            "matched ignoring: {}",
            doc.body.ignored_options.join(", ")
        ));
    }
    if let Some(pct) = doc.body.fail_if_slower_percent {
        let mut failed: Vec<String> = (doc.body.comparisons.iter())
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
            (doc.body.only_in_base.iter())
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

/// The tables: one per NEW file (a block), then the notes every block shares.
pub fn grids(doc: &CompareReport, view: View) -> Vec<Grid> {
    let mut out: Vec<Grid> = (blocks(doc, view).into_iter())
        .map(|b| {
            let mut notes = b.notes;
            if b.rows.is_empty() {
                notes.insert(0, "no scenario in common".into());
            }
            Grid {
                title: Some(b.title),
                headers: b.headers,
                align: (b.right.iter())
                    .map(|&r| if r { Align::Right } else { Align::Left })
                    .collect(),
                rows: b.rows,
                notes,
            }
        })
        .collect();
    let footer = footer(doc);
    if !footer.is_empty() {
        out.push(Grid {
            notes: footer,
            ..Grid::default()
        });
    }
    out
}

/// One chart per NEW file: each row's ratio and interval.
pub fn charts(doc: &CompareReport) -> Vec<Chart> {
    (doc.body.new.iter())
        .enumerate()
        .map(|(i, new)| {
            let rows: Vec<&Comparison> = (doc.body.comparisons.iter())
                .filter(|c| &c.new_file == new)
                .collect();
            Chart {
                id: format!("ratios-{}", i + 1),
                title: format!("{} → {new}", doc.body.base),
                caption: "Each row's ratio new/base (a dot) and its confidence interval (a \
                          whisker), on a log scale with a line at 1: green faster, red slower, \
                          grey neither (no significant difference, too noisy, too few runs)."
                    .into(),
                legend: vec![
                    ("faster".into(), FASTER.into()),
                    ("slower".into(), SLOWER.into()),
                    ("neither".into(), SAME.into()),
                ],
                svg: chart(&rows),
                ..Chart::default()
            }
        })
        .collect()
}

/// A row's colour on the common page: faster, slower, or neither.
fn verdict_colour(c: &Comparison) -> &'static str {
    match c.verdict {
        super::Verdict::Faster => FASTER,
        super::Verdict::Slower => SLOWER,
        _ => SAME,
    }
}

/// Faster, slower and neither, mid-tones that read on light and dark pages.
const FASTER: &str = "#2e8b57";
const SLOWER: &str = "#d0453a";
const SAME: &str = "#7f7f7f";

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
        "<line stroke=\"currentColor\" x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{bottom}\"/>\n",
        x(1.0)
    ));
    let mut ticks = vec![lo * 1.1, 1.0, hi / 1.1];
    ticks.dedup_by(|a, b| (*a - *b).abs() < 1e-12);
    for v in ticks {
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"currentColor\">{v:.3}</text>\n",
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
        let colour = verdict_colour(c);
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            left - 8.0,
            y + 4.0,
            html_escape(&c.scenario)
        ));
        if let (Some(a), Some(b)) = (c.ratio_ci_low, c.ratio_ci_high) {
            let (xa, xb) = (x(a), x(b));
            s.push_str(&format!(
                "<g stroke=\"{colour}\"><line x1=\"{xa:.1}\" y1=\"{y:.1}\" x2=\"{xb:.1}\" y2=\"{y:.1}\" stroke-width=\"2\"/>\
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
                "<circle fill=\"{colour}\" cx=\"{:.1}\" cy=\"{y:.1}\" r=\"4\"><title>{}: {:.3} ({})</title></circle>\n",
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

/// CSV's records: one per comparison, exact values in base units.
pub fn records(doc: &CompareReport) -> crate::report::output::Records {
    let header = [
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
    ];
    let num = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    fn text(v: Option<impl std::fmt::Display>) -> String {
        v.map(|v| v.to_string()).unwrap_or_default()
    }
    let name = |v: serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let mut rows = Vec::new();
    for c in &doc.body.comparisons {
        rows.push(vec![
            shown(&doc.body.base),
            shown(&c.new_file),
            shown(&c.scenario),
            text(c.workload),
            text(c.transport),
            text(c.engine),
            text(c.size_bytes),
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
        ]);
    }
    crate::report::output::Records {
        header: header.map(String::from).to_vec(),
        rows,
    }
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

//! The mesh's charts for the page every document shares ([`crate::report::html`]): per
//! (test, figure) a heat map, a source x destination table whose cells are coloured from
//! good (green) to bad (red) across that figure's measured pairs, each value written as
//! the terminal table writes it, under it the spread and the worst pairs; and per test
//! with round trips, the merged distribution as a small bar chart.
//!
//! What is best and on which scale is decided here ([`Scale`]); the page draws the cells
//! and escapes every text (host names and reasons are other machines' words).

use std::fmt::Write as _;

use super::report::{self, Figure, FigureSummary, Index, Merged, MeshReport};
use super::Outcome;
use crate::report::chart::{Chart, HeatCell, HeatMap};
use crate::report::html::escape;
use crate::vocab::Units;

/// Hosts up to which the page draws each heat map (10,000 cells); beyond, the spread and
/// worst pairs stand for it, as in the terminal table over
/// [`report::TABLE_MATRIX_MAX`].
pub const HTML_MATRIX_MAX: usize = 100;

/// The mesh's charts: a heat map per figure, and the merged round trips of each test
/// that has them (after its first round-trip figure).
pub fn charts(r: &MeshReport, units: Units) -> Vec<Chart> {
    let labels = report::labels(&r.body.hosts);
    let index = report::index(&r.body.tests, r.body.hosts.len());
    let mut out = Vec::new();
    for s in &r.body.figures {
        let Some(fig) = Figure::from_key(&s.figure) else {
            continue;
        };
        let scale = Scale::of(s, fig);
        let mut notes = String::new();
        report::summary_lines(&mut notes, fig, s, &labels, units);
        let mut chart = Chart {
            id: format!("{}-{}", s.test, s.figure),
            title: format!("{}: {}", s.test, fig.title()),
            caption: "Rows: source (the client); columns: destination.".into(),
            notes: notes.lines().map(String::from).collect(),
            ..Chart::default()
        };
        if s.matrix.len() > HTML_MATRIX_MAX {
            chart.notes.insert(
                0,
                format!(
                    "({0} x {0} matrix: in --format json and --format openmetrics)",
                    s.matrix.len()
                ),
            );
        } else {
            chart.heat = Some(heat_map(r, s, fig, scale.as_ref(), &index, &labels, units));
        }
        out.push(chart);
        if let Some(m) = s.merged.as_ref().filter(|_| is_first_round_trip(r, s)) {
            if !m.buckets.is_empty() {
                let mut svg = String::new();
                merged_svg(&mut svg, &s.test, m);
                out.push(Chart {
                    id: format!("merged-{}", s.test),
                    title: format!("{}: round trips of every pair, merged", s.test),
                    caption: format!(
                        "{} round trips of every pair in the report's buckets (upper bounds); \
                         bars are counts per bucket.",
                        m.count
                    ),
                    svg,
                    ..Chart::default()
                });
            }
        }
    }
    out
}

/// A figure's heat map: a row per source, a column per destination.
fn heat_map(
    r: &MeshReport,
    s: &FigureSummary,
    fig: Figure,
    scale: Option<&Scale>,
    index: &Index<'_>,
    labels: &[String],
    units: Units,
) -> HeatMap {
    let rows = (s.matrix.iter().enumerate())
        .map(|(src, row)| {
            let cells = (row.iter().enumerate())
                .map(|(dst, v)| {
                    let outcome = index.get(&(s.test.as_str(), src, dst));
                    if src == dst {
                        return HeatCell::Blank;
                    }
                    let text = report::cell(fig, *v, outcome, false, units);
                    match (v, outcome, scale) {
                        (Some(v), _, Some(sc)) => HeatCell::Value {
                            text,
                            value: *v,
                            badness: sc.badness(*v),
                        },
                        (None, Some(Outcome::Failed { reason }), _) => HeatCell::Failed {
                            text,
                            why: reason.clone(),
                        },
                        _ => HeatCell::Missing(text),
                    }
                })
                .collect();
            (report::row_label(&r.body.hosts, labels, src), cells)
        })
        .collect();
    HeatMap {
        corner: "from \\ to".into(),
        columns: (0..s.matrix.len())
            .map(|d| report::label(labels, d))
            .collect(),
        rows,
        data: vec![
            ("test".into(), s.test.clone()),
            ("figure".into(), s.figure.clone()),
        ],
        scale: scale.map(|sc| sc.sentence(fig, units)),
    }
}

/// Whether `s` is its test's first round-trip figure (the merged chart goes once).
fn is_first_round_trip(r: &MeshReport, s: &FigureSummary) -> bool {
    r.body
        .figures
        .iter()
        .find(|f| f.test == s.test && f.merged.is_some())
        .is_some_and(|f| f.figure == s.figure)
}

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

    /// What the colours mean, in a sentence beside the colour bar.
    fn sentence(&self, fig: Figure, units: Units) -> String {
        let (best, worst) = if self.higher_is_better {
            (self.max, self.min)
        } else {
            (self.min, self.max)
        };
        format!(
            "best {} (green) to worst {} (red), on a {} scale across the measured pairs ({}); \
             hatched: failed (hover for why); \".\": not measured",
            fig.shown(best, units),
            fig.shown(worst, units),
            if self.log { "logarithmic" } else { "linear" },
            if self.higher_is_better {
                "higher is better"
            } else {
                "lower is better"
            },
        )
    }
}
/// The merged round trips as bars, one per bucket (its upper bound and count in a
/// tooltip), the lowest and highest bounds under the axis.
fn merged_svg(out: &mut String, test: &str, m: &Merged) {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::messages::HostMeta;
    use crate::mesh::report::tests::{self as report_tests, failed, host, pair, stream};
    use crate::mesh::report::{build, Settings};
    use crate::mesh::Host;

    /// The page every document shares, as `--format html` writes it.
    fn html(r: &MeshReport) -> String {
        let view = crate::vocab::View {
            wide: true,
            ..Default::default()
        };
        let bytes = crate::report::exporter(crate::vocab::Format::Html, view)
            .serialize(r)
            .unwrap();
        String::from_utf8(bytes).unwrap()
    }

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
            r.body.figures.len()
        );
        assert_eq!(
            r.body.figures.len(),
            4,
            "stream bps, pingpong p50, p99, loss"
        );
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
        assert!(!page.contains("<script>alert"), "a host's name is text");
        assert!(!page.contains("<after"));
        // The hosts legend: the agent's kernel, route device and MTU.
        assert!(
            page.contains("<td>Linux 6.1.0</td><td>eth0</td><td>9000</td>"),
            "{page}"
        );
        assert!(page.contains("3 hosts, 8 tests (1 failed)"), "{page}");
        assert!(
            page.contains("h2 → h0 tcp-stream</strong>: timed out &lt;after 5 s&gt;"),
            "{page}"
        );
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
        for needle in ["<link", "@import", "url(", "src=", "<script src", "<iframe"] {
            assert!(!page.contains(needle), "{needle}");
        }
        assert!(
            page.contains("--concurrent: every pair ran at once"),
            "{page}"
        );
        assert!(page.contains("Interrupted:"));
        let calm = html(&sample(false, false));
        assert!(!calm.contains("--concurrent: every pair ran at once"));
        assert!(!calm.contains("Interrupted:"));
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
        // Said under the heat map's heading (the page's tables say it too, beyond the
        // terminal's 16 hosts).
        assert!(wide.contains("<p class=\"summary\">(101 x 101 matrix: in --format json"));
        assert!(wide.contains("across 2 pairs: min 1.00 Gbit/s"));
        let fits = of(HTML_MATRIX_MAX);
        assert_eq!(fits.matches("<table class=\"heat\"").count(), 1);
        assert!(!fits.contains("<p class=\"summary\">(100 x 100 matrix"));
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

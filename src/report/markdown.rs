//! A Markdown table rendered from the shared [`grid`], notes as a list below it. Every
//! title, header, cell and note is free text to Markdown ([`crate::vocab::text::markdown`]): no
//! HTML element, cell break, code span or line break comes from a report's strings.

use crate::report::grid::Align;
use crate::report::output::Rendered;
use crate::report::Exporter;
use crate::vocab::text::markdown as escape;

/// Markdown exporter.
pub struct Markdown {
    /// Width and units.
    pub view: crate::vocab::View,
}

impl Exporter for Markdown {
    fn serialize(&self, doc: &dyn Rendered) -> anyhow::Result<Vec<u8>> {
        let mut out = String::new();
        let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        for (i, g) in doc.tables(&self.view).iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            if let Some(t) = &g.title {
                out.push_str(&format!("### {}\n\n", escape(t)));
            }
            // A grid of notes alone (no columns) has no table.
            if !g.headers.is_empty() {
                out.push_str(&line(g.headers.iter().map(|h| escape(h)).collect()));
                out.push_str(&line(
                    g.align
                        .iter()
                        .map(|a| match a {
                            Align::Left => ":---".to_string(),
                            Align::Right => "---:".to_string(),
                        })
                        .collect(),
                ));
                for row in &g.rows {
                    out.push_str(&line(row.iter().map(|c| escape(c)).collect()));
                }
            }
            if !g.notes.is_empty() {
                out.push('\n');
                for n in &g.notes {
                    out.push_str(&format!("- {}\n", escape(n)));
                }
            }
        }
        Ok(out.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{sample, Report};
    use crate::vocab::View;

    fn render(report: &Report) -> String {
        String::from_utf8(
            Markdown {
                view: View::default(),
            }
            .serialize(report)
            .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn markdown_is_the_same_grid_as_a_pipe_table_with_notes_as_a_list() {
        let text = render(&sample::pingpong());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "| transport | size | RTT p50 | RTT p99 | RTT max | round trips/s | lost | req/reply/late |"
        );
        assert_eq!(
            lines[1],
            "| :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        );
        assert_eq!(
            lines[3],
            "| udp | 64 B | 12.0 µs | 24.0 µs | 120 µs | 1.00 k/s | 6 (0.60%) | 3/2/1 |"
        );
        assert!(lines.contains(&"- More columns with --wide: RTT min, RTT p90, RTT p99.9, CPU/op."));
    }

    #[test]
    fn a_pipe_in_a_cell_or_note_is_escaped() {
        let mut report = sample::stream();
        report.results[0].error = Some("bad | worse".into());
        let text = render(&report);
        assert!(text.contains("bad \\| worse"), "{text}");
        assert!(!text.contains("bad | worse"), "{text}");
    }

    #[test]
    fn markup_and_line_breaks_in_a_reports_strings_stay_text() {
        let mut report = sample::stream();
        report.warnings = vec!["<script>alert(1)</script>".into()];
        report.results[0].error = Some("<img src=x onerror=alert(1)>\n| `x` &".into());
        let text = render(&report);
        assert!(
            !text.contains("<script") && !text.contains("<img"),
            "{text}"
        );
        assert!(
            text.contains("- warning: &lt;script&gt;alert(1)&lt;/script&gt;\n"),
            "{text}"
        );
        assert!(
            text.contains("&lt;img src=x onerror=alert(1)&gt;\\\\n\\| \\`x\\` &amp;"),
            "{text}"
        );
    }

    #[test]
    fn the_suite_gets_a_heading_per_table() {
        let text = render(&sample::suite());
        assert_eq!(text.matches("### ").count(), 3, "{text}");
        assert!(text.starts_with("### Throughput: one-way stream\n\n| transport | 64 B |"));
    }
}

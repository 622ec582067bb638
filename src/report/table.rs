//! The terminal table (stdout's default format), rendered from the shared [`grid`].
//! Every title, header, cell and note passes [`crate::vocab::text::terminal`] on its way out:
//! a report read from a file says what it likes, and none of it may drive the terminal.

use comfy_table::{presets, CellAlignment, ContentArrangement, Table as Comfy};

use crate::report::grid::Align;
use crate::report::output::Rendered;
use crate::report::Exporter;
use crate::vocab::text::terminal as shown;

/// Terminal table exporter.
pub struct Table {
    /// Width and units.
    pub view: crate::vocab::View,
}

impl Exporter for Table {
    fn serialize(&self, doc: &dyn Rendered) -> anyhow::Result<Vec<u8>> {
        let mut out = String::new();
        for (i, g) in doc.tables(&self.view).iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            if let Some(t) = &g.title {
                out.push_str(&shown(t));
                out.push('\n');
            }
            if !g.rows.is_empty() {
                let mut t = Comfy::new();
                t.load_preset(presets::UTF8_FULL_CONDENSED)
                    .set_content_arrangement(ContentArrangement::Disabled);
                // A table of names and values has no header.
                if g.headers.iter().any(|h| !h.is_empty()) {
                    t.set_header(g.headers.iter().map(|h| shown(h)));
                }
                for row in &g.rows {
                    t.add_row(row.iter().map(|c| shown(c)));
                }
                for (i, a) in g.align.iter().enumerate() {
                    if let Some(c) = t.column_mut(i) {
                        c.set_cell_alignment(match a {
                            Align::Left => CellAlignment::Left,
                            Align::Right => CellAlignment::Right,
                        });
                    }
                }
                out.push_str(&t.to_string());
                out.push('\n');
            }
            for n in &g.notes {
                out.push_str(&shown(n));
                out.push('\n');
            }
        }
        Ok(out.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{grid, sample, Report};
    use crate::vocab::{Units, View};

    fn render(report: &Report, view: View) -> String {
        String::from_utf8(Table { view }.serialize(report).unwrap()).unwrap()
    }

    #[test]
    fn the_drawn_table_is_as_wide_as_the_grid_says_and_fits_100_columns() {
        for report in [
            sample::stream(),
            sample::stream_phases(),
            sample::pingpong(),
            sample::rate(),
            sample::connect(),
            sample::suite(),
        ] {
            let text = render(&report, View::default());
            let widest = text
                .lines()
                .filter(|l| l.starts_with(['┌', '│', '╞', '└']))
                .map(|l| l.chars().count())
                .max()
                .unwrap();
            let grids = grid::build(&report, &View::default());
            assert_eq!(
                widest,
                grids.iter().map(grid::Grid::width).max().unwrap(),
                "{text}"
            );
            assert!(widest <= grid::MAX_WIDTH, "{text}");
        }
        let wide = render(
            &sample::connect(),
            View {
                wide: true,
                units: Units::Bits,
                by_placement: false,
            },
        );
        assert!(
            wide.lines().any(|l| l.chars().count() > grid::MAX_WIDTH),
            "{wide}"
        );
    }

    #[test]
    fn a_stream_table_reads_as_expected() {
        let text = render(&sample::stream(), View::default());
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(
            rows[1],
            "│ transport ┆   size ┆  throughput ┆ messages/s ┆ CPU snd/rcv ┆ CPU s/GB snd+rcv │"
        );
        assert_eq!(
            rows[3],
            "│ tcp       ┆ 64 KiB ┆ 8.00 Gbit/s ┆   1.00 k/s ┆     90%/40% ┆            0.500 │"
        );
        assert_eq!(rows.len(), 6, "{text}");
    }

    #[test]
    fn no_control_character_of_a_reports_strings_reaches_the_terminal() {
        let mut report = sample::stream();
        report.warnings = vec!["\u{1b}]0;owned\u{7}".into()];
        report.results[0].error = Some("\u{1b}[31mred\r\n\u{9b}2J".into());
        let text = render(&report, View::default());
        assert!(
            !text.contains(['\u{1b}', '\u{7}', '\u{9b}', '\r']),
            "{text:?}"
        );
        assert!(text.contains("warning: \\x1b]0;owned\\x07"), "{text}");
        assert!(text.contains("\\x1b[31mred\\r\\n\\u{9b}2J"), "{text}");
    }

    #[test]
    fn the_suite_has_its_three_titled_tables_and_notes_under_the_last() {
        let text = render(&sample::suite(), View::default());
        let titles: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.starts_with("Throughput")
                    || l.starts_with("Round-trip")
                    || l.starts_with("Message rate")
            })
            .collect();
        assert_eq!(titles.len(), 3, "{text}");
        let tail = text.rsplit('└').next().unwrap();
        assert!(tail.contains("warning: unix 64 B: CPU-bound"), "{text}");
        assert!(tail.contains("n/a: udp 64 KiB; udp 1 MiB"), "{text}");
    }
}

//! The terminal table (stdout's default format), rendered from the shared [`grid`].

use comfy_table::{presets, CellAlignment, ContentArrangement, Table as Comfy};

use super::grid::{self, Align};
use super::{Exporter, Report};

/// Terminal table exporter.
pub struct Table {
    /// Width and units.
    pub view: super::View,
}

impl Exporter for Table {
    fn serialize(&self, report: &Report) -> anyhow::Result<Vec<u8>> {
        let mut out = String::new();
        for (i, g) in grid::build(report, &self.view).iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            if let Some(t) = &g.title {
                out.push_str(t);
                out.push('\n');
            }
            if !g.rows.is_empty() {
                let mut t = Comfy::new();
                t.load_preset(presets::UTF8_FULL_CONDENSED)
                    .set_content_arrangement(ContentArrangement::Disabled)
                    .set_header(&g.headers);
                for row in &g.rows {
                    t.add_row(row);
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
                out.push_str(n);
                out.push('\n');
            }
        }
        Ok(out.into_bytes())
    }
}

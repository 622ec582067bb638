//! A Markdown table rendered from the shared [`grid`], notes as a list below it.

use super::grid::{self, Align};
use super::{Exporter, Report};

/// Markdown exporter.
pub struct Markdown {
    /// Width and units.
    pub view: super::View,
}

fn escape(s: &str) -> String {
    s.replace('|', "\\|")
}

impl Exporter for Markdown {
    fn serialize(&self, report: &Report) -> anyhow::Result<Vec<u8>> {
        let mut out = String::new();
        let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        for (i, g) in grid::build(report, &self.view).iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            if let Some(t) = &g.title {
                out.push_str(&format!("### {t}\n\n"));
            }
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

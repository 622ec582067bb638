//! The HTML report: one self-contained page (inline CSS and SVG, no scripts from
//! elsewhere) with the charts of `chart.rs` and every table.

use super::{Exporter, Report, View};

/// The HTML exporter.
pub struct Html {
    /// How the tables present figures.
    pub view: View,
}

impl Exporter for Html {
    fn serialize(&self, _report: &Report) -> anyhow::Result<Vec<u8>> {
        anyhow::bail!("the HTML report is not built yet")
    }
}

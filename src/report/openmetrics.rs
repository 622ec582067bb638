//! The OpenMetrics text format (Prometheus naming, base units, `# EOF`).

use super::{Exporter, Report};

/// The OpenMetrics exporter.
pub struct OpenMetrics;

impl Exporter for OpenMetrics {
    fn serialize(&self, _report: &Report) -> anyhow::Result<Vec<u8>> {
        anyhow::bail!("OpenMetrics output is not built yet")
    }
}

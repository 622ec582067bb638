//! The JSON report: the [`Report`] as-is, pretty-printed, one document. Its shape is
//! described by `schema/report.schema.json` and versioned by `schema_version`.

use super::{Exporter, Report};

/// JSON exporter.
pub struct Json;

impl Exporter for Json {
    fn serialize(&self, report: &Report) -> anyhow::Result<Vec<u8>> {
        let mut out = serde_json::to_vec_pretty(report)?;
        out.push(b'\n');
        Ok(out)
    }
}

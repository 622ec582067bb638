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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    #[test]
    fn every_report_reads_back_and_writes_out_the_same() {
        for report in [
            sample::stream(),
            sample::stream_phases(),
            sample::stream_sweep(),
            sample::stream_failed(),
            sample::pingpong(),
            sample::rate(),
            sample::connect(),
            sample::suite(),
        ] {
            let first = Json.serialize(&report).unwrap();
            let back: Report = serde_json::from_slice(&first).unwrap();
            assert_eq!(Json.serialize(&back).unwrap(), first);
        }
    }

    #[test]
    fn units_live_in_key_names_and_unknown_is_null() {
        let v: serde_json::Value =
            serde_json::from_slice(&Json.serialize(&sample::stream_failed()).unwrap()).unwrap();
        let tcp = &v["results"][0];
        assert!(tcp["bits_per_second"].is_null());
        assert!(tcp["messages_lost"].is_null());
        assert_eq!(tcp["size_bytes"], 65536);
        assert_eq!(v["results"][1]["messages_lost"], 12);
        assert!(
            v.get("layout").is_none(),
            "the layout is not part of the JSON"
        );
    }
}

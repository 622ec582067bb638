//! The JSON document: the [`Report`] in the one document's shape, pretty-printed. Its shape is
//! described by `schema/document.schema.json` and versioned by `schema_version`.

use crate::report::output::Rendered;
use crate::report::Exporter;

/// JSON exporter.
pub struct Json;

impl Exporter for Json {
    fn serialize(&self, doc: &dyn Rendered) -> anyhow::Result<Vec<u8>> {
        Ok(doc.json()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{sample, Report};

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
    fn the_envelope_is_at_the_top_and_the_figures_in_the_body_of_their_kind() {
        let text = String::from_utf8(Json.serialize(&sample::pingpong()).unwrap()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        // The top level's keys, in the order written (pretty JSON indents them by two).
        let keys: Vec<&str> = (text.lines())
            .filter_map(|l| l.strip_prefix("  \"")?.split('"').next())
            .collect();
        assert_eq!(
            keys,
            [
                "tool",
                "schema_version",
                "command",
                "environment",
                "started_at",
                "ended_at",
                "interrupted",
                "error",
                "warnings",
                "kind",
                "body"
            ]
        );
        assert_eq!(v["kind"], "pingpong");
        assert_eq!(v["schema_version"], crate::report::SCHEMA_VERSION);
        assert_eq!(v["started_at"], "2026-01-02T03:04:05.000006Z");
        let body: Vec<&str> = (text.lines())
            .filter_map(|l| l.strip_prefix("    \"")?.split('"').next())
            .filter(|k| v["body"].get(k).is_some())
            .collect();
        assert_eq!(body, ["placement", "results", "skipped", "rankings"]);
    }

    #[test]
    fn units_live_in_key_names_and_unknown_is_null() {
        let v: serde_json::Value =
            serde_json::from_slice(&Json.serialize(&sample::stream_failed()).unwrap()).unwrap();
        let tcp = &v["body"]["results"][0];
        assert!(tcp["bits_per_second"].is_null());
        assert!(tcp["messages_lost"].is_null());
        assert_eq!(tcp["size_bytes"], 65536);
        assert_eq!(v["body"]["results"][1]["messages_lost"], 12);
        assert!(
            v.get("layout").is_none(),
            "the layout is not part of the JSON"
        );
    }
}

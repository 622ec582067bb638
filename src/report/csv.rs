//! CSV: one row per scenario, exact values in base units (empty cell = unknown).

use crate::report::output::{Records, Rendered};
use crate::report::{Exporter, Report};

/// CSV exporter.
pub struct Csv;

const HEADER: [&str; 20] = [
    "workload",
    "transport",
    "engine",
    "size_bytes",
    "runs",
    "parallel",
    "bits_per_second",
    "bytes_per_second",
    "messages_per_second",
    "bytes_sent",
    "bytes_received",
    "messages_sent",
    "messages_received",
    "messages_lost",
    "sender_cpu_seconds_per_gb",
    "receiver_cpu_seconds_per_gb",
    "cv",
    "sndbuf_bytes",
    "rcvbuf_bytes",
    "error",
];

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

impl Exporter for Csv {
    fn serialize(&self, doc: &dyn Rendered) -> anyhow::Result<Vec<u8>> {
        let records = doc.records();
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&records.header)?;
        for r in &records.rows {
            w.write_record(r)?;
        }
        Ok(w.into_inner()?)
    }
}

/// The measuring commands' records: one per scenario.
pub fn records(report: &Report) -> Records {
    let rows = (report.results.iter())
        .map(|r| {
            let first = r.median_run();
            vec![
                r.workload.to_string(),
                r.transport.to_string(),
                r.engine.to_string(),
                r.size_bytes.to_string(),
                r.options.runs.to_string(),
                r.options.parallel.to_string(),
                opt(r.bits_per_second),
                opt(r.bytes_per_second),
                opt(r.messages_per_second),
                r.bytes_sent.to_string(),
                r.bytes_received.to_string(),
                r.messages_sent.to_string(),
                r.messages_received.to_string(),
                opt(r.messages_lost),
                opt(r.sender_cpu_seconds_per_gb),
                opt(r.receiver_cpu_seconds_per_gb),
                opt(r.statistics.as_ref().and_then(|s| s.bits_per_second.cv)),
                opt(first.and_then(|f| f.sndbuf_bytes)),
                opt(first.and_then(|f| f.rcvbuf_bytes)),
                // Free text, shown on a terminal as often as read by a program.
                r.error
                    .as_deref()
                    .map(crate::vocab::text::terminal)
                    .unwrap_or_default(),
            ]
        })
        .collect();
    Records {
        header: HEADER.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    fn render(report: &Report) -> Vec<String> {
        String::from_utf8(Csv.serialize(report).unwrap())
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }

    #[test]
    fn one_row_per_scenario_in_base_units_and_unknown_is_empty() {
        let lines = render(&sample::stream_failed());
        assert_eq!(lines[0], HEADER.join(","));
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[1],
            "stream,tcp,blocking,65536,1,1,,,,0,0,1000,1000,,,,,,,tcp sender failed: Connection reset by peer (os error 104)"
        );
        assert_eq!(
            lines[2],
            "stream,udp,blocking,1472,1,1,2000000000,250000000,1000,250000000,250000000,1000,1000,12,0.25,0.25,,212992,212992,"
        );
    }

    #[test]
    fn every_workload_has_its_rows() {
        for report in [
            sample::pingpong(),
            sample::rate(),
            sample::connect(),
            sample::suite(),
        ] {
            let lines = render(&report);
            assert_eq!(lines.len(), report.results.len() + 1);
            for (line, r) in lines[1..].iter().zip(&report.results) {
                assert!(
                    line.starts_with(&format!("{},{}", r.workload, r.transport)),
                    "{line}"
                );
            }
        }
    }
}

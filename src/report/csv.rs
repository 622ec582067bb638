//! CSV: one row per scenario, exact values in base units (empty cell = unknown).

use super::{Exporter, Report};

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
    fn serialize(&self, report: &Report) -> anyhow::Result<Vec<u8>> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(HEADER)?;
        for r in &report.results {
            let first = r.median_run();
            w.write_record([
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
                r.error.clone().unwrap_or_default(),
            ])?;
        }
        Ok(w.into_inner()?)
    }
}

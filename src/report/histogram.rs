//! `--histogram PATH`: every scenario's full latency distributions, as CSV
//! (`workload,transport,engine,size_bytes,name,value_ns,count`, one row per recorded
//! value) or, when PATH ends in `.json`, as JSON (`{"schema_version", "histograms": [...]}`).
//! Values are the HDR histogram's buckets: exact to 3 significant digits.

use serde::Serialize;

use crate::report::Report;

#[derive(Serialize)]
struct Distribution<'a> {
    workload: String,
    transport: String,
    engine: String,
    size_bytes: u64,
    name: &'a str,
    /// `[value_ns, count]` pairs in increasing value order.
    values: Vec<[u64; 2]>,
}

fn distributions(report: &Report) -> Vec<Distribution<'_>> {
    report
        .results
        .iter()
        .flat_map(|r| {
            r.histograms.iter().map(move |(name, h)| Distribution {
                workload: r.workload.to_string(),
                transport: r.transport.to_string(),
                engine: r.engine.to_string(),
                size_bytes: r.size_bytes,
                name: name.name(),
                values: h
                    .iter_recorded()
                    .map(|v| [v.value_iterated_to(), v.count_at_value()])
                    .collect(),
            })
        })
        .collect()
}

/// The distributions of every finished scenario, as JSON or CSV.
///
/// # Errors
/// Only if serialization fails.
pub fn render(report: &Report, json: bool) -> anyhow::Result<Vec<u8>> {
    let dists = distributions(report);
    Ok(if json {
        let mut v = serde_json::to_vec_pretty(&serde_json::json!({
            "schema_version": 1,
            "histograms": dists,
        }))?;
        v.push(b'\n');
        v
    } else {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([
            "workload",
            "transport",
            "engine",
            "size_bytes",
            "name",
            "value_ns",
            "count",
        ])?;
        for d in &dists {
            for [value, count] in &d.values {
                w.write_record([
                    d.workload.as_str(),
                    &d.transport,
                    &d.engine,
                    &d.size_bytes.to_string(),
                    d.name,
                    &value.to_string(),
                    &count.to_string(),
                ])?;
            }
        }
        w.into_inner()?
    })
}

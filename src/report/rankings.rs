//! What a report ranks, and how its tables say it: the engines of a scenario run under
//! several (`-e all`, `-e epoll,io-uring`), and the suite's transports at each size, by
//! each run's headline figure ([`super::headline`]). The judging is
//! [`crate::measure::ranking`]'s: a winner only beyond the noise of the runs, none from
//! single runs.

use crate::measure::ranking::{self, Ranking};
use crate::report::{Quantity, Report};
use crate::results::ScenarioResult;
use crate::scenario::Layout;
use crate::vocab::Units;

/// The rankings of `results` as laid out: the suite's transports per size (stream), or
/// each group of scenarios that differ only in their engine.
pub fn of(results: &[ScenarioResult], layout: Layout) -> Vec<Ranking> {
    match layout {
        Layout::Suite => suite(results),
        Layout::List => engines(results),
    }
}

/// The suite's throughput cells: per size, the transports.
fn suite(results: &[ScenarioResult]) -> Vec<Ranking> {
    let ranked = crate::workload::SUITE[0].0;
    let stream: Vec<&ScenarioResult> = (results.iter()).filter(|r| r.workload == ranked).collect();
    let mut sizes: Vec<u64> = stream.iter().map(|r| r.size_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let headline = crate::workload::spec(ranked).headline();
    sizes
        .into_iter()
        .filter_map(|size| {
            let entries: Vec<(String, Vec<f64>)> = (stream.iter())
                .filter(|r| r.size_bytes == size && r.error.is_none())
                .map(|r| (r.transport.to_string(), r.headline_runs()))
                .collect();
            let group = crate::vocab::units::format_bytes(size);
            ranking::rank(&group, "transports", headline, &entries)
        })
        .collect()
}

/// What scenarios of several engines share: everything but the engine and the options
/// that belong to one engine (the async runtime, io_uring's polling thread).
fn identity(r: &ScenarioResult) -> String {
    let o = &r.options;
    format!(
        "{:?}",
        (
            r.workload,
            r.transport,
            r.size_bytes,
            (
                o.sndbuf_bytes,
                o.rcvbuf_bytes,
                o.parallel,
                o.nodelay,
                o.cpus
            ),
            (o.send, o.recv, o.rate_per_second.map(f64::to_bits), o.open),
            (o.batch, o.timestamps, o.counters),
        )
    )
}

/// Per group of scenarios that differ only in their engine (two engines or more): the
/// engines.
fn engines(results: &[ScenarioResult]) -> Vec<Ranking> {
    let mut groups: Vec<(String, Vec<&ScenarioResult>)> = Vec::new();
    for r in results {
        let key = identity(r);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    groups
        .into_iter()
        .filter(|(_, v)| {
            v.iter()
                .map(|r| r.engine)
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                > 1
        })
        .filter_map(|(_, v)| {
            let headline = v[0].headline();
            let entries: Vec<(String, Vec<f64>)> = (v.iter())
                .filter(|r| r.error.is_none())
                .map(|r| (r.engine.to_string(), r.headline_runs()))
                .collect();
            ranking::rank(&v[0].group_label(), "engines", headline, &entries)
        })
        .collect()
}

/// How a ranking's figure reads in a table.
pub fn show(quantity: Quantity, units: Units) -> impl Fn(f64) -> String {
    move |v: f64| quantity.format(v, units)
}

/// The lines a table prints under itself for the report's rankings (`ranking: ...`).
pub fn notes(report: &Report, units: Units) -> Vec<String> {
    let Some(first) = report.rankings.first() else {
        return Vec::new();
    };
    let show = show(first.quantity, units);
    let mut out: Vec<String> = ranking::summaries(&report.rankings, &show)
        .into_iter()
        .map(|s| format!("ranking: {s}"))
        .collect();
    // The suite runs once per cell: say how to rank its transports.
    if report.layout == Layout::Suite
        && (report.rankings.iter()).all(|r| r.outcome == ranking::Outcome::SingleRun)
    {
        if let Some(line) = out.first_mut() {
            line.push_str(&format!(
                " (e.g. sockbench stream -t {} -s 64K --runs 5)",
                first
                    .entries
                    .iter()
                    .map(|e| e.name.as_str())
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineKind;
    use crate::report::{grid, sample};
    use crate::scenario::WorkloadKind;
    use crate::transport::TransportKind;
    use crate::vocab::View;

    /// A stream scenario of `engine` whose runs made `gbps` (Gbit/s each).
    fn engine(e: EngineKind, gbps: &[f64]) -> ScenarioResult {
        let mut r = sample::scenario(WorkloadKind::Stream, TransportKind::Tcp, 65536, 0.0);
        let run = r.runs[0].clone();
        r.engine = e;
        r.options.runs = gbps.len() as u32;
        r.runs = (gbps.iter())
            .map(|g| crate::results::RunFigures {
                bits_per_second: g * 1e9,
                ..run.clone()
            })
            .collect();
        r.bits_per_second = crate::measure::stats::median(&r.headline_runs());
        r
    }

    fn notes_of(results: Vec<ScenarioResult>) -> (Report, Vec<String>) {
        let report = sample::report(results, Layout::List);
        let notes = grid::build(&report, &View::default())[0].notes.clone();
        (report, notes)
    }

    /// Issue 29: `-e all` must show its noise and never name a winner inside it. Two
    /// engines whose runs overlap: no winner, whatever their medians; one run each: no
    /// ranking at all, and the table says why.
    #[test]
    fn engines_whose_runs_overlap_or_ran_once_name_no_winner() {
        let (report, notes) = notes_of(vec![
            engine(EngineKind::Blocking, &[2.0, 9.0, 3.0]),
            engine(EngineKind::Epoll, &[8.0, 2.5, 9.5]),
        ]);
        let r = &report.rankings[0];
        assert_eq!(
            (r.group.as_str(), r.among.as_str()),
            ("tcp 64 KiB", "engines")
        );
        assert_eq!(r.outcome, ranking::Outcome::WithinNoise);
        assert_eq!(r.winner, None);
        let line = notes.iter().find(|n| n.starts_with("ranking: ")).unwrap();
        assert!(
            line.starts_with("ranking: tcp 64 KiB: no fastest engine: epoll has the best median"),
            "{line}"
        );
        // The table's throughput cell is the ranked median, its ±CV the runs' spread.
        let g = &grid::build(&report, &View::default())[0];
        let col = |h: &str| g.headers.iter().position(|x| x == h).unwrap();
        assert_eq!(
            g.rows[1][col("throughput")],
            crate::vocab::units::throughput(8e9, Units::Bits)
        );
        let (report, notes) = notes_of(vec![
            engine(EngineKind::Blocking, &[2.0]),
            engine(EngineKind::Epoll, &[8.0]),
        ]);
        assert_eq!(report.rankings[0].outcome, ranking::Outcome::SingleRun);
        let line = notes.iter().find(|n| n.starts_with("ranking: ")).unwrap();
        assert!(
            line.contains("single run, so the noise is unknown: no engine is ranked fastest"),
            "{line}"
        );
        assert!(
            !notes.iter().any(|n| n.contains("fastest engine epoll")),
            "{notes:?}"
        );
    }

    #[test]
    fn an_engine_ahead_beyond_the_noise_is_named_and_one_engine_alone_is_no_ranking() {
        let (report, notes) = notes_of(vec![
            engine(EngineKind::Blocking, &[10.0, 10.1, 9.9, 10.0, 10.05]),
            engine(EngineKind::Epoll, &[5.0, 5.1, 4.9, 5.0, 5.05]),
        ]);
        assert_eq!(report.rankings[0].winner.as_deref(), Some("blocking"));
        let line = notes.iter().find(|n| n.starts_with("ranking: ")).unwrap();
        assert!(
            line.contains(
                "fastest engine blocking (10.0 Gbit/s median of 5 runs, 9.90-10.1 Gbit/s)"
            ),
            "{line}"
        );
        let (report, notes) = notes_of(vec![engine(EngineKind::Blocking, &[1.0, 2.0])]);
        assert!(report.rankings.is_empty());
        assert!(
            !notes.iter().any(|n| n.starts_with("ranking: ")),
            "{notes:?}"
        );
    }

    #[test]
    fn scenarios_that_differ_in_more_than_the_engine_are_not_ranked_together() {
        let mut other = engine(EngineKind::Epoll, &[8.0]);
        other.size_bytes = 1024;
        let rankings = of(&[engine(EngineKind::Blocking, &[2.0]), other], Layout::List);
        assert!(rankings.is_empty(), "{rankings:?}");
    }
}

//! Placement in the tables for people: `--by-placement` splits each scenario into one
//! row per placement class of its runs (the medians of that class's runs), a note under
//! the default table says how unpinned runs were placed, and with `--counters` a note
//! gives the perf counters per message. The figures themselves come from
//! `measure::placement` and `measure::counters`; this only arranges them.

use std::collections::BTreeMap;

use crate::measure::histogram::Latency;
use crate::measure::placement::PlacementClass;
use crate::measure::stats::{median, Summary};
use crate::results::{RunFigures, ScenarioResult, Statistics};
use crate::vocab::units::format_ns;

/// The runs of `r` by placement class (runs without one under `None`), in class order.
fn classes(r: &ScenarioResult) -> BTreeMap<Option<PlacementClass>, Vec<&RunFigures>> {
    let mut out: BTreeMap<Option<PlacementClass>, Vec<&RunFigures>> = BTreeMap::new();
    for run in &r.runs {
        out.entry(run.placement.map(|p| p.class))
            .or_default()
            .push(run);
    }
    out
}

/// The placement cell of a row: the class all its runs share, or how many runs each
/// class had ("3 same-cpu, 2 across-cpus"); "-" where unknown.
pub fn cell(r: &ScenarioResult) -> String {
    let c = classes(r);
    match c.len() {
        0 => "-".into(),
        1 => c
            .keys()
            .next()
            .copied()
            .flatten()
            .map_or_else(|| "-".into(), |k| k.name().to_string()),
        _ => c
            .iter()
            .map(|(k, v)| format!("{} {}", v.len(), k.map_or("unknown", |k| k.name())))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The median of `f` over `runs`, where every run has it.
fn median_of(runs: &[&RunFigures], f: impl Fn(&RunFigures) -> Option<f64>) -> Option<f64> {
    median(&runs.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
}

/// Each latency distribution as the medians, field by field, of the runs' own.
fn median_latencies(
    runs: &[&RunFigures],
) -> BTreeMap<crate::measure::latency::LatencyKind, Latency> {
    let mut kinds: Vec<crate::measure::latency::LatencyKind> = runs
        .iter()
        .flat_map(|r| r.latencies.keys().copied())
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
        .into_iter()
        .map(|kind| {
            let of: Vec<&Latency> = runs.iter().filter_map(|r| r.latencies.get(&kind)).collect();
            let m = |f: fn(&Latency) -> u64| {
                median(&of.iter().map(|l| f(l) as f64).collect::<Vec<_>>()).unwrap_or(0.0) as u64
            };
            let l = Latency {
                count: of.iter().map(|l| l.count).sum(),
                min_ns: m(|l| l.min_ns),
                mean_ns: m(|l| l.mean_ns),
                stddev_ns: m(|l| l.stddev_ns),
                p50_ns: m(|l| l.p50_ns),
                p90_ns: m(|l| l.p90_ns),
                p99_ns: m(|l| l.p99_ns),
                p99_9_ns: m(|l| l.p99_9_ns),
                p99_99_ns: m(|l| l.p99_99_ns),
                max_ns: m(|l| l.max_ns),
            };
            (kind, l)
        })
        .collect()
}

/// One scenario's rows by placement: per class of its runs, a result whose figures are
/// the medians (and totals) of that class's runs only. A scenario with one class (or no
/// run) stays as it is. Its warnings go with the first row only.
pub fn split(r: &ScenarioResult) -> Vec<ScenarioResult> {
    let by = classes(r);
    if by.len() < 2 {
        return vec![r.clone()];
    }
    by.values()
        .enumerate()
        .map(|(i, runs)| {
            let bits: Vec<f64> = runs.iter().map(|r| r.bits_per_second).collect();
            let msgs: Vec<f64> = runs.iter().map(|r| r.messages_per_second).collect();
            let sum = |f: fn(&RunFigures) -> u64| runs.iter().map(|r| f(r)).sum::<u64>();
            let opt_sum =
                |f: fn(&RunFigures) -> Option<u64>| runs.iter().map(|r| f(r)).sum::<Option<u64>>();
            ScenarioResult {
                bits_per_second: median(&bits),
                bytes_per_second: median_of(runs, |r| Some(r.bytes_per_second)),
                messages_per_second: median(&msgs),
                bytes_sent: sum(|r| r.bytes_sent),
                bytes_received: sum(|r| r.bytes_received),
                messages_sent: sum(|r| r.messages_sent),
                messages_received: sum(|r| r.messages_received),
                messages_lost: opt_sum(|r| r.messages_lost),
                requests_lost: opt_sum(|r| r.requests_lost),
                replies_lost: opt_sum(|r| r.replies_lost),
                replies_late: opt_sum(|r| r.replies_late),
                messages_reordered: opt_sum(|r| r.messages_reordered),
                messages_duplicated: opt_sum(|r| r.messages_duplicated),
                sender_cpu_seconds_per_gb: median_of(runs, |r| r.sender.cpu_seconds_per_gb),
                receiver_cpu_seconds_per_gb: median_of(runs, |r| r.receiver.cpu_seconds_per_gb),
                cpu_seconds_per_round_trip: r.cpu_seconds_per_round_trip.and_then(|_| {
                    median_of(runs, |r| {
                        let trips = r.messages_per_second * r.duration_seconds;
                        (trips > 0.0)
                            .then(|| (r.sender.cpu_seconds + r.receiver.cpu_seconds) / trips)
                    })
                }),
                latencies: median_latencies(runs),
                statistics: Summary::of(&bits)
                    .zip(Summary::of(&msgs))
                    .map(|(b, m)| Statistics {
                        bits_per_second: b,
                        messages_per_second: m,
                    }),
                runs: runs.iter().map(|r| (*r).clone()).collect(),
                warnings: if i == 0 {
                    r.warnings.clone()
                } else {
                    Vec::new()
                },
                ..r.clone()
            }
        })
        .collect()
}

/// The note under a default table on how unpinned runs were placed ("placement of the
/// runs (unpinned): tcp 64 B: 3 same-cpu, 2 across-cpus"), when any is known.
pub fn note(results: &[ScenarioResult]) -> Option<String> {
    let known: Vec<String> = results
        .iter()
        .filter(|r| r.options.cpus.is_none() && r.runs.iter().any(|run| run.placement.is_some()))
        .map(|r| format!("{}: {}", r.label(), cell(r)))
        .collect();
    if known.is_empty() {
        return None;
    }
    let mut s = format!(
        "placement of the runs (unpinned; same-cpu: both roles on one CPU, across-cpus: on two): {}",
        known.join("; ")
    );
    if results.iter().any(|r| classes(r).len() > 1) {
        s.push_str(" (--by-placement gives each its own row)");
    }
    Some(s)
}

/// The note with `--counters`: per message, sender/receiver, from the median run.
pub fn counters_note(results: &[ScenarioResult]) -> Vec<String> {
    let pair = |a: Option<f64>, b: Option<f64>, show: &dyn Fn(f64) -> String| {
        let one = |v: Option<f64>| v.map_or_else(|| "-".to_string(), show);
        format!("{}/{}", one(a), one(b))
    };
    results
        .iter()
        .filter(|r| r.options.counters)
        .filter_map(|r| {
            let run = r.median_run()?;
            let (s, v) = (run.sender.counters.as_ref()?, run.receiver.counters.as_ref()?);
            let n = |x: f64| format!("{x:.0}");
            let per = |x: Option<u64>, msgs: f64| x.filter(|_| msgs > 0.0).map(|x| x as f64 / msgs);
            let sent = run.sender.messages_per_second * run.sender.duration_seconds;
            let got = run.receiver.messages_per_second * run.receiver.duration_seconds;
            let user = if s.user_space_only || v.user_space_only {
                " (user space only)"
            } else {
                ""
            };
            let total = |x: Option<u64>| x.map_or_else(|| "-".to_string(), |x| x.to_string());
            Some(format!(
                "counters per message, sender/receiver: {}: cycles {}, instructions {}, IPC {}, cache misses {}{user}; \
                 task clock {}, context switches {}; in the median run: migrations {}/{}, page faults {}/{}",
                r.label(),
                pair(s.cycles_per_message, v.cycles_per_message, &n),
                pair(s.instructions_per_message, v.instructions_per_message, &n),
                pair(s.instructions_per_cycle, v.instructions_per_cycle, &|x| format!("{x:.2}")),
                pair(s.cache_misses_per_message, v.cache_misses_per_message, &|x| format!("{x:.2}")),
                pair(
                    s.task_clock_seconds.and_then(|t| per(Some((t * 1e9) as u64), sent)),
                    v.task_clock_seconds.and_then(|t| per(Some((t * 1e9) as u64), got)),
                    &|x| format_ns(x as u64)
                ),
                pair(per(s.context_switches, sent), per(v.context_switches, got), &|x| format!("{x:.2}")),
                total(s.cpu_migrations),
                total(v.cpu_migrations),
                total(s.page_faults),
                total(v.page_faults),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::placement::RunPlacement;
    use crate::report::sample::{latency, scenario};
    use crate::scenario::WorkloadKind;
    use crate::transport::TransportKind;

    /// A pingpong scenario of runs with these p50s (us) and classes.
    fn runs(of: &[(u64, Option<PlacementClass>)]) -> ScenarioResult {
        let mut r = scenario(WorkloadKind::Pingpong, TransportKind::Tcp, 64, 1e6);
        let first = r.runs[0].clone();
        r.runs = of
            .iter()
            .map(|&(us, class)| {
                let mut run = first.clone();
                run.latencies.insert(
                    crate::measure::latency::LatencyKind::RoundTrip,
                    latency(us * 1000),
                );
                run.messages_per_second = 1e6 / us as f64;
                run.placement = class.map(|class| RunPlacement {
                    same_cpu_share: if class == PlacementClass::SameCpu {
                        1.0
                    } else {
                        0.0
                    },
                    class,
                });
                run
            })
            .collect();
        r
    }

    const SAME: Option<PlacementClass> = Some(PlacementClass::SameCpu);
    const ACROSS: Option<PlacementClass> = Some(PlacementClass::AcrossCpus);

    #[test]
    fn a_scenario_splits_into_one_row_per_class_with_that_class_medians() {
        let r = runs(&[
            (14, SAME),
            (75, ACROSS),
            (16, SAME),
            (73, ACROSS),
            (15, SAME),
        ]);
        assert_eq!(cell(&r), "3 same-cpu, 2 across-cpus");
        let rows = split(&r);
        assert_eq!(rows.len(), 2);
        assert_eq!(cell(&rows[0]), "same-cpu");
        assert_eq!(cell(&rows[1]), "across-cpus");
        assert_eq!(rows[0].runs.len(), 3);
        assert_eq!(
            rows[0].latencies[&crate::measure::latency::LatencyKind::RoundTrip].p50_ns,
            15_000
        );
        assert_eq!(
            rows[1].latencies[&crate::measure::latency::LatencyKind::RoundTrip].p50_ns,
            74_000
        );
        let rate = rows[1].messages_per_second.unwrap();
        assert!(
            (rate - (1e6 / 75.0 + 1e6 / 73.0) / 2.0).abs() < 1e-6,
            "{rate}"
        );
        // One class, or none known: the row stays whole.
        let one = runs(&[(14, SAME), (15, SAME)]);
        assert_eq!(split(&one).len(), 1);
        assert_eq!(cell(&runs(&[(14, None)])), "-");
    }

    #[test]
    fn the_note_names_unpinned_scenarios_and_leaves_out_pinned_ones() {
        let r = runs(&[(14, SAME), (75, ACROSS)]);
        let n = note(std::slice::from_ref(&r)).unwrap();
        assert!(n.contains("tcp 64 B: 1 same-cpu, 1 across-cpus"), "{n}");
        assert!(n.contains("--by-placement"), "{n}");
        let mut pinned = r;
        pinned.options.cpus = Some([0, 1]);
        assert_eq!(note(&[pinned]), None);
        assert_eq!(note(&[runs(&[(14, None)])]), None);
    }
}

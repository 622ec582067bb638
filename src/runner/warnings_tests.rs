//! The warnings a planned scenario's figures earn: each diagnosis read from what a run of
//! a scenario as the plan makes it would report (the runner attaches them the same way).

use crate::diagnose::*;
use crate::figures::figures;
use crate::measure::histogram::{latency_histogram, record};
use crate::scenario::Scenario;
use crate::vocab::units::format_ns;
use crate::workload::{Roles, SideReport};
use std::time::Duration;

use crate::plan::first_scenario as scenario;

/// One pingpong run of `n` round trips of `rtt_us` each, lasting `secs`.
fn run(n: u64, rtt_us: u64, secs: f64) -> Roles {
    run_ns(n, rtt_us * 1000, secs)
}

/// The same in nanoseconds (below 2048 ns the histogram holds values exactly).
fn run_ns(n: u64, rtt_ns: u64, secs: f64) -> Roles {
    let mut h = latency_histogram();
    for _ in 0..n {
        record(&mut h, Duration::from_nanos(rtt_ns));
    }
    let side = |latencies| SideReport {
        bytes: n * 64,
        messages: n,
        elapsed: Some(Duration::from_secs_f64(secs)),
        latencies,
        ..SideReport::default()
    };
    Roles {
        senders: vec![side(vec![(
            crate::measure::latency::LatencyKind::RoundTrip,
            h,
        )])],
        receivers: vec![side(Vec::new())],
        ..Roles::default()
    }
}

#[test]
fn stalls_of_40_ms_are_nagles_below_a_megabyte_and_not_from_one_on() {
    let stalled = |size: &str, extra: &[&str]| {
        let mut args = vec!["pingpong", "-t", "tcp", "-s", size, "-n", "100"];
        args.extend_from_slice(extra);
        kinds(&scenario(&args), &[run(100, 40_000, 5.0)]).contains(&"delayed-ack".to_string())
    };
    assert!(stalled("64", &["--writes", "2"]));
    assert!(stalled("1023K", &[]), "larger than a segment, under 1 MiB");
    // Without a measured MSS, loopback's (65483 B): one segment cannot wait, two can.
    assert!(!stalled("65483", &[]));
    assert!(stalled("65484", &[]));
    assert!(
        !stalled("1M", &[]),
        "a megabyte's transfer is the round trip"
    );
    assert!(!stalled("60M", &[]));
    assert!(
        !stalled("64", &[]),
        "one write of less than a segment cannot wait"
    );
    assert!(!stalled("64", &["--writes", "2", "--nodelay"]));
}

fn kinds(sc: &Scenario, runs: &[Roles]) -> Vec<String> {
    figures(sc, runs)
        .warnings
        .into_iter()
        .map(|w| w.kind)
        .collect()
}

#[test]
fn a_rate_from_a_run_of_a_few_milliseconds_is_said_to_be_too_short() {
    let sc = scenario(&["stream", "-t", "tcp", "--runs", "2"]);
    let r = figures(&sc, &[run(1000, 1, 0.5), run(1000, 1, 0.003)]);
    let w = too_short(&r).expect("a 3 ms run");
    assert_eq!(w.kind, "too-short");
    assert!(w.message.contains("3.00 ms"), "{}", w.message);
    assert!(kinds(&sc, &[run(1000, 1, 0.003)]).contains(&"too-short".to_string()));
    // At the bound, and above it: a rate.
    let r = figures(&sc, &[run(1000, 1, MIN_STEADY_SECONDS)]);
    assert_eq!(too_short(&r), None);
    // A pingpong's figure is its round trips, however long they took together.
    let sc = scenario(&["pingpong", "-t", "tcp"]);
    assert_eq!(too_short(&figures(&sc, &[run(1000, 1, 0.003)])), None);
}

#[test]
fn a_pingpong_run_far_from_the_others_is_named_with_every_runs_p50() {
    let sc = scenario(&["pingpong", "-t", "tcp", "--runs", "3"]);
    let r = figures(
        &sc,
        &[run(100, 14, 2.0), run(100, 72, 2.0), run(100, 15, 2.0)],
    );
    let w = latency_runs_disagree(&r).expect("72 us among 14 us runs");
    assert_eq!(w.kind, "runs-disagree");
    assert!(w.message.contains("1 of 3 runs"), "{}", w.message);
    assert!(w.message.contains("--cpus"), "{}", w.message);
    // Runs that agree within the factor: no warning.
    let r = figures(
        &sc,
        &[run(100, 14, 2.0), run(100, 20, 2.0), run(100, 15, 2.0)],
    );
    assert_eq!(latency_runs_disagree(&r), None);
    // Half as fast is within the factor; a bit more than twice is not.
    let r = figures(&sc, &[run(100, 10, 2.0), run(100, 21, 2.0)]);
    assert!(latency_runs_disagree(&r).is_some());
    let r = figures(&sc, &[run(100, 10, 2.0), run(100, 19, 2.0)]);
    assert_eq!(latency_runs_disagree(&r), None);
    let r = figures(&sc, &[run_ns(100, 1000, 2.0), run_ns(100, 2000, 2.0)]);
    assert_eq!(latency_runs_disagree(&r), None, "exactly 2x is not more");
    // A run far below the others counts too.
    let r = figures(
        &sc,
        &[run(100, 30, 2.0), run(100, 31, 2.0), run(100, 10, 2.0)],
    );
    let w = latency_runs_disagree(&r).expect("10 us among 30 us runs");
    assert!(w.message.contains("1 of 3 runs"), "{}", w.message);
    // The middle of five runs is the third: 21 us, from which 10 and 45 stand apart.
    let five: Vec<_> = [10, 20, 21, 22, 45].map(|us| run(100, us, 2.0)).into();
    let w = latency_runs_disagree(&figures(&sc, &five)).unwrap();
    assert!(w.message.contains("2 of 5 runs"), "{}", w.message);
}

/// `roles` with placement traces: the sender on CPU 0, the receiver on `receiver_cpu`,
/// over the same 10 ms.
fn placed(mut roles: Roles, receiver_cpu: u32) -> Roles {
    use crate::measure::placement::{Segment, Trace};
    let trace = |cpu| Trace {
        cpu_ns: vec![(cpu, 10_000_000)],
        segments: vec![Segment {
            cpu,
            from_ns: 1_000_000,
            to_ns: 11_000_000,
        }],
        samples: 2,
        boot_id: Some("boot".into()),
        ..Trace::default()
    };
    roles.senders[0].placement = Some(trace(0));
    roles.receivers[0].placement = Some(trace(receiver_cpu));
    roles
}

#[test]
fn runs_split_by_placement_are_named_with_each_groups_count_and_median() {
    let sc = scenario(&["pingpong", "-t", "tcp", "--runs", "5"]);
    let runs = [
        placed(run(100, 14, 2.0), 0),
        placed(run(100, 75, 2.0), 1),
        placed(run(100, 15, 2.0), 0),
        placed(run(100, 74, 2.0), 1),
        placed(run(100, 13, 2.0), 0),
    ];
    let r = figures(&sc, &runs);
    let w = placement_explains(&sc, &r).expect("bimodal");
    assert_eq!(w.kind, "placement");
    assert_eq!(
        w.message,
        format!(
            "3 runs on one CPU: p50 {}; 2 runs across CPUs: p50 {}; pin with --cpus to choose",
            format_ns(14_000),
            format_ns(74_500)
        )
    );
    // It replaces the generic disagreement, which says the same without the cause.
    let kinds: Vec<String> = r.warnings.iter().map(|w| w.kind.clone()).collect();
    assert!(kinds.contains(&"placement".to_string()), "{kinds:?}");
    assert!(!kinds.contains(&"runs-disagree".to_string()), "{kinds:?}");
    assert!(!kinds.contains(&"unstable".to_string()), "{kinds:?}");
}

#[test]
fn placement_explains_nothing_when_groups_overlap_are_close_or_alone() {
    let sc = scenario(&["pingpong", "-t", "tcp", "--runs", "4"]);
    let warned = |runs: &[Roles]| placement_explains(&sc, &figures(&sc, runs)).is_some();
    // Far apart medians, but the ranges overlap: the placement does not explain it.
    assert!(!warned(&[
        placed(run(100, 14, 2.0), 0),
        placed(run(100, 80, 2.0), 0),
        placed(run(100, 40, 2.0), 1),
        placed(run(100, 90, 2.0), 1),
    ]));
    // Medians 1.5x apart, but the ranges touch: not apart.
    assert!(!warned(&[
        placed(run(100, 14, 2.0), 0),
        placed(run(100, 20, 2.0), 0),
        placed(run(100, 20, 2.0), 1),
        placed(run(100, 30, 2.0), 1),
    ]));
    // Apart, but by less than 1.3x.
    assert!(!warned(&[
        placed(run(100, 20, 2.0), 0),
        placed(run(100, 25, 2.0), 1),
    ]));
    // Exactly 1.3x is not more than 1.3x (below 2048 ns the histogram is exact).
    assert!(!warned(&[
        placed(run_ns(100, 1000, 2.0), 0),
        placed(run_ns(100, 1300, 2.0), 1),
    ]));
    // Just over 1.3x, apart: explained.
    assert!(warned(&[
        placed(run(100, 20, 2.0), 0),
        placed(run(100, 27, 2.0), 1),
    ]));
    // One class only, or no placement known.
    assert!(!warned(&[
        placed(run(100, 14, 2.0), 1),
        placed(run(100, 75, 2.0), 1),
    ]));
    assert!(!warned(&[run(100, 14, 2.0), run(100, 75, 2.0)]));
}

#[test]
fn counters_that_could_not_count_are_said_once_with_their_reason() {
    let sc = scenario(&["pingpong", "-t", "tcp", "--counters"]);
    let mut roles = run(100, 14, 2.0);
    let no_pmu = crate::measure::counters::Counts {
        hardware_unavailable: Some("hardware counters unavailable: no PMU".into()),
        task_clock_ns: Some(1),
        ..Default::default()
    };
    roles.senders[0].counters = Some(no_pmu.clone());
    roles.receivers[0].counters = Some(no_pmu);
    let r = figures(&sc, &[roles.clone(), roles]);
    let w = counters_unavailable(&r).expect("a reason");
    assert_eq!(w.message, "hardware counters unavailable: no PMU");
    let side = r.runs[0].sender.counters.as_ref().unwrap();
    assert_eq!(side.cycles_per_message, None, "null, never zero");
    assert_eq!(
        r.warnings
            .iter()
            .filter(|w| w.kind == "counters-unavailable")
            .count(),
        1
    );
    // Counters that counted: no warning; without --counters: none either.
    assert_eq!(
        counters_unavailable(&figures(&sc, &[run(100, 14, 2.0)])),
        None
    );
}

#[test]
fn throughput_workloads_are_compared_on_their_rate() {
    let sc = scenario(&["rate", "-t", "udp", "--runs", "2"]);
    let r = figures(
        &sc,
        &[
            placed(run(100_000, 1, 1.0), 0),
            placed(run(300_000, 1, 1.0), 1),
        ],
    );
    let w = placement_explains(&sc, &r).expect("3x apart");
    assert!(w.message.starts_with("1 run on one CPU: "), "{}", w.message);
    assert!(w.message.contains("1 run across CPUs: "), "{}", w.message);
    assert!(w.message.contains(": messages "), "{}", w.message);
}

#[test]
fn a_single_short_run_says_it_is_one_run_and_a_long_one_does_not() {
    let sc = scenario(&["pingpong", "-t", "tcp"]);
    assert_eq!(kinds(&sc, &[run(100, 14, 0.5)]), ["single-run"]);
    assert!(kinds(&sc, &[run(100, 14, 2.0)]).is_empty());
    assert!(
        kinds(&sc, &[run(100, 14, 1.0)]).is_empty(),
        "a second is long enough"
    );
    // Other workloads do not carry latency diagnoses.
    let sc = scenario(&["stream", "-t", "tcp"]);
    assert!(!kinds(&sc, &[run(100, 14, 0.5)]).contains(&"single-run".to_string()));
}

//! Unit tests of compare: matching, verdicts and rendering, on hand-made reports.

use super::*;
use crate::document::{Body, Document};
use crate::report::sample;
use crate::scenario::Layout;
use crate::scenario::WorkloadKind;
use crate::transport::TransportKind;
use crate::vocab::View;

/// A scenario whose runs have these headline figures (bits/s, messages/s or p50 ns).
fn with_runs(workload: WorkloadKind, transport: TransportKind, values: &[f64]) -> ScenarioResult {
    let mut r = sample::scenario(workload, transport, 64 << 10, 1e9);
    let run = r.runs[0].clone();
    r.runs = values
        .iter()
        .map(|&v| {
            let mut run = run.clone();
            run.bits_per_second = v;
            run.messages_per_second = v;
            if workload == WorkloadKind::Pingpong {
                run.latencies.insert(
                    crate::measure::latency::LatencyKind::RoundTrip,
                    sample::latency(v as u64),
                );
            }
            run
        })
        .collect();
    r.options.runs = values.len() as u32;
    r
}

fn stream(values: &[f64]) -> ScenarioResult {
    with_runs(WorkloadKind::Stream, TransportKind::Tcp, values)
}

fn args(files: usize, fail_if_slower: Option<f64>, ignore: &[IdentityOption]) -> CompareArgs {
    CompareArgs {
        files: (0..files)
            .map(|i| PathBuf::from(format!("r{i}.json")))
            .collect(),
        fail_if_slower,
        alpha: 0.05,
        ignore_option: ignore.to_vec(),
        output: crate::cli::OutputArgs::default(),
    }
}

fn doc(results: Vec<Vec<ScenarioResult>>, c: &CompareArgs) -> CompareReport {
    let reports: Vec<Report> = results
        .into_iter()
        .map(|r| sample::report(r, Layout::List))
        .collect();
    compare(c, &reports, vec!["sockbench".into(), "compare".into()])
}

const STEADY: [f64; 5] = [10.0e9, 10.2e9, 9.9e9, 10.1e9, 9.8e9];

fn scaled(values: &[f64], by: f64) -> Vec<f64> {
    values.iter().map(|v| v * by).collect()
}

#[test]
fn scenarios_match_by_identity_but_not_by_how_long_they_were_measured() {
    let base = stream(&STEADY);
    let mut new = stream(&STEADY[..3]);
    new.options.duration_seconds = Some(0.2);
    new.options.warmup_seconds = 0.0;
    let mut udp = stream(&STEADY);
    udp.transport = TransportKind::Udp;
    let d = doc(
        vec![vec![base.clone(), udp], vec![new]],
        &args(2, None, &[]),
    );
    assert_eq!(d.body.comparisons.len(), 1);
    assert_eq!(d.body.comparisons[0].scenario, "stream tcp 64 KiB");
    assert_eq!(d.body.only_in_base.len(), 1);
    assert_eq!(d.body.only_in_base[0].scenario, "stream udp 64 KiB");
    assert!(d.body.only_in_new.is_empty());

    // A requested buffer is identity, unless --ignore-option says otherwise.
    let mut small = stream(&STEADY);
    small.options.sndbuf_bytes = Some(4096);
    let d = doc(
        vec![vec![base.clone()], vec![small.clone()]],
        &args(2, None, &[]),
    );
    assert!(d.body.comparisons.is_empty());
    assert_eq!(d.body.only_in_base[0].scenario, "stream tcp 64 KiB");
    assert_eq!(
        d.body.only_in_new[0].scenario,
        "stream tcp 64 KiB sndbuf 4 KiB"
    );
    let d = doc(
        vec![vec![base.clone()], vec![small]],
        &args(2, None, &[IdentityOption::Sndbuf]),
    );
    assert_eq!(d.body.comparisons.len(), 1);
    assert_eq!(
        d.body.comparisons[0].scenario,
        "stream tcp 64 KiB [sndbuf default → 4 KiB]"
    );
    assert_eq!(d.body.ignored_options, ["sndbuf"]);

    // The engine, parallel streams and placement are identity too.
    let mut epoll = stream(&STEADY);
    epoll.engine = crate::engine::EngineKind::Epoll;
    let mut four = stream(&STEADY);
    four.options.parallel = 4;
    let d = doc(
        vec![vec![base.clone()], vec![epoll, four]],
        &args(2, None, &[]),
    );
    assert_eq!((d.body.comparisons.len(), d.body.only_in_new.len()), (0, 2));
    let mut processes = sample::report(vec![stream(&STEADY)], Layout::List);
    processes.placement.name = "processes".into();
    let reports = [sample::report(vec![base], Layout::List), processes];
    assert!(compare(&args(2, None, &[]), &reports, Vec::new())
        .body
        .comparisons
        .is_empty());
    let d = compare(
        &args(2, None, &[IdentityOption::Placement]),
        &reports,
        Vec::new(),
    );
    assert_eq!(
        d.body.comparisons[0].scenario,
        "stream tcp 64 KiB [placement threads → processes]"
    );
}

#[test]
fn a_scenario_repeated_in_a_file_pairs_first_with_first() {
    let a = [stream(&STEADY), stream(&scaled(&STEADY, 2.0))];
    let b = [
        stream(&STEADY),
        stream(&scaled(&STEADY, 2.0)),
        stream(&STEADY),
    ];
    let d = doc(vec![a.to_vec(), b.to_vec()], &args(2, None, &[]));
    assert_eq!(d.body.comparisons.len(), 2);
    assert!(d.body.comparisons.iter().all(|c| c.ratio == Some(1.0)));
    assert_eq!(d.body.only_in_new.len(), 1);
}

#[test]
fn half_the_throughput_is_slower_by_50_percent_with_an_interval_around_one_half() {
    let d = doc(
        vec![vec![stream(&STEADY)], vec![stream(&scaled(&STEADY, 0.5))]],
        &args(2, Some(10.0), &[]),
    );
    let c = &d.body.comparisons[0];
    assert_eq!(c.figure, "bits_per_second");
    assert!(c.higher_is_better);
    assert_eq!(c.base.median, Some(10.0e9));
    assert_eq!(c.new.median, Some(5.0e9));
    assert_eq!(c.ratio, Some(0.5));
    assert_eq!(c.test, Some(TestKind::WelchLog));
    let (lo, hi) = (c.ratio_ci_low.unwrap(), c.ratio_ci_high.unwrap());
    assert!(lo < 0.5 && 0.5 < hi && hi < 0.6, "{lo} {hi}");
    assert_eq!(c.ci_confidence, Some(0.95));
    assert!(c.p_value.unwrap() < 1e-6);
    assert_eq!(c.verdict, Verdict::Slower);
    assert_eq!(c.slower_percent, Some(50.0));
    assert!(c.gate_failed && d.body.failed_gate);
    // A looser gate lets it through; so does no gate.
    let d = doc(
        vec![vec![stream(&STEADY)], vec![stream(&scaled(&STEADY, 0.5))]],
        &args(2, Some(60.0), &[]),
    );
    assert!(!d.body.failed_gate && !d.body.comparisons[0].gate_failed);
    // Twice the throughput is faster and never fails a gate.
    let d = doc(
        vec![vec![stream(&STEADY)], vec![stream(&scaled(&STEADY, 2.0))]],
        &args(2, Some(0.0), &[]),
    );
    assert_eq!(d.body.comparisons[0].verdict, Verdict::Faster);
    assert_eq!(d.body.comparisons[0].slower_percent, Some(-100.0));
    assert!(!d.body.failed_gate);
}

#[test]
fn for_pingpong_a_higher_latency_is_slower() {
    let ping = |v: &[f64]| with_runs(WorkloadKind::Pingpong, TransportKind::Udp, v);
    let base = [20_000.0, 20_400.0, 19_800.0, 20_200.0, 19_600.0];
    let d = doc(
        vec![vec![ping(&base)], vec![ping(&scaled(&base, 2.0))]],
        &args(2, Some(50.0), &[]),
    );
    let c = &d.body.comparisons[0];
    assert_eq!(c.figure, "round_trip_p50_ns");
    assert!(!c.higher_is_better);
    assert_eq!(c.ratio, Some(2.0));
    assert_eq!(c.verdict, Verdict::Slower);
    assert_eq!(c.slower_percent, Some(100.0));
    assert!(c.gate_failed);
    let d = doc(
        vec![vec![ping(&base)], vec![ping(&scaled(&base, 0.5))]],
        &args(2, Some(0.0), &[]),
    );
    let c = &d.body.comparisons[0];
    assert_eq!(c.verdict, Verdict::Faster);
    assert_eq!(c.slower_percent, Some(-50.0));
    assert!(!d.body.failed_gate);
    // Rate and connect compare messages (connections) per second, higher is better.
    for w in [WorkloadKind::Rate, WorkloadKind::Connect] {
        let h = crate::workload::spec(w).headline();
        assert_eq!((h.name, h.higher_is_better), ("messages_per_second", true));
    }
}

#[test]
fn the_same_runs_make_no_significant_difference() {
    let d = doc(
        vec![vec![stream(&STEADY)], vec![stream(&STEADY)]],
        &args(2, Some(0.0), &[]),
    );
    let c = &d.body.comparisons[0];
    assert_eq!((c.ratio, c.p_value), (Some(1.0), Some(1.0)));
    assert_eq!(c.verdict, Verdict::NoSignificantDifference);
    assert!(!d.body.failed_gate);
}

#[test]
fn one_run_on_a_side_is_too_few_for_a_test() {
    let d = doc(
        vec![vec![stream(&[10e9])], vec![stream(&scaled(&STEADY, 0.5))]],
        &args(2, Some(0.0), &[]),
    );
    let c = &d.body.comparisons[0];
    assert_eq!(c.verdict, Verdict::TooFewRuns);
    assert_eq!((c.test, c.p_value), (None, None));
    assert_eq!(c.ratio, Some(0.5));
    assert!(
        c.note.as_ref().unwrap().contains("--runs 3 or more"),
        "{c:?}"
    );
    assert!(!d.body.failed_gate, "no test, no gate");
}

#[test]
fn runs_with_an_outlier_take_mann_whitney_which_needs_enough_runs() {
    // Three runs a side with an outlier: the exact test cannot go below p = 0.1.
    let base = [10e9, 10.1e9, 30e9];
    let new = [5e9, 5.1e9, 5.05e9];
    let d = doc(
        vec![vec![stream(&base)], vec![stream(&new)]],
        &args(2, None, &[]),
    );
    let c = &d.body.comparisons[0];
    assert_eq!(c.test, Some(TestKind::MannWhitneyExact));
    assert!((c.p_value.unwrap() - 0.1).abs() < 1e-12);
    assert_eq!(c.verdict, Verdict::TooFewRuns);
    assert!(
        c.note.as_ref().unwrap().contains("--runs 4 or more"),
        "{c:?}"
    );
    // Five a side: every new run below every base run, p = 2/252.
    let base = [10e9, 10.1e9, 19e9, 9.9e9, 10.2e9];
    let new = scaled(&base, 0.5);
    let d = doc(
        vec![vec![stream(&base)], vec![stream(&new)]],
        &args(2, None, &[]),
    );
    let c = &d.body.comparisons[0];
    assert_eq!(c.test, Some(TestKind::MannWhitneyExact));
    assert!((c.p_value.unwrap() - 2.0 / 252.0).abs() < 1e-12);
    assert_eq!(c.verdict, Verdict::Slower);
    // The Hodges-Lehmann interval of the ratio holds the true ratio 0.5.
    let (lo, hi) = (c.ratio_ci_low.unwrap(), c.ratio_ci_high.unwrap());
    assert!(lo <= 0.5 && (0.5..1.0).contains(&hi), "{lo} {hi}");
    assert!((c.ci_confidence.unwrap() - (1.0 - 8.0 / 252.0)).abs() < 1e-12);
}

#[test]
fn a_failed_scenario_is_shown_as_failed() {
    let failed = sample::failed(WorkloadKind::Stream, TransportKind::Tcp, 64 << 10);
    let d = doc(
        vec![vec![stream(&STEADY)], vec![failed]],
        &args(2, Some(0.0), &[]),
    );
    let c = &d.body.comparisons[0];
    assert_eq!(c.verdict, Verdict::Failed);
    assert!(c
        .note
        .as_ref()
        .unwrap()
        .starts_with("NEW: tcp sender failed"));
    assert_eq!(c.ratio, None);
    let text = table(&d, View::default());
    assert!(text.contains("failed"), "{text}");
    assert!(text.contains("NEW: tcp sender failed"), "{text}");
}

#[test]
fn a_scenario_that_ran_in_base_and_failed_or_vanished_in_new_fails_the_gate() {
    let failed = || sample::failed(WorkloadKind::Stream, TransportKind::Tcp, 64 << 10);
    let mut udp = stream(&STEADY);
    udp.transport = TransportKind::Udp;
    let d = doc(
        vec![vec![stream(&STEADY), udp], vec![failed()]],
        &args(2, Some(5.0), &[]),
    );
    assert_eq!(d.body.comparisons[0].verdict, Verdict::Failed);
    assert!(d.body.comparisons[0].gate_failed);
    assert_eq!(d.body.only_in_base.len(), 1);
    assert!(d.body.only_in_base[0].gate_failed);
    assert!(d.body.failed_gate);
    let text = table(&d, View::default());
    assert!(text.contains("failed (fails the gate)"), "{text}");
    assert!(
        text.contains("only in BASE: stream udp 64 KiB (fails the gate)"),
        "{text}"
    );
    assert!(
        text.contains("FAILED: stream tcp 64 KiB in r1.json (failed); stream udp 64 KiB (missing from r1.json)"),
        "{text}"
    );

    // Without the gate, nothing fails it.
    let d = doc(
        vec![vec![stream(&STEADY)], vec![failed()]],
        &args(2, None, &[]),
    );
    assert!(!d.body.comparisons[0].gate_failed && !d.body.failed_gate);

    // What failed in BASE already is no regression: neither failing again nor missing.
    let d = doc(
        vec![
            vec![failed(), {
                let mut u = failed();
                u.transport = TransportKind::Udp;
                u
            }],
            vec![failed()],
        ],
        &args(2, Some(5.0), &[]),
    );
    assert_eq!(d.body.comparisons[0].verdict, Verdict::Failed);
    assert!(!d.body.comparisons[0].gate_failed);
    assert!(!d.body.only_in_base[0].gate_failed);
    assert!(!d.body.failed_gate);

    // A scenario only in NEW is no failure.
    let d = doc(
        vec![
            vec![stream(&STEADY)],
            vec![stream(&STEADY), {
                let mut u = stream(&STEADY);
                u.transport = TransportKind::Udp;
                u
            }],
        ],
        &args(2, Some(5.0), &[]),
    );
    assert_eq!(d.body.only_in_new.len(), 1);
    assert!(!d.body.failed_gate);
}

#[test]
fn normal_looking_three_runs_a_side_take_welch() {
    // Exact cases: an uneven but unremarkable spread, and HDR-quantized latencies with
    // two equal values (a MAD of zero) and one a quantum away.
    let base = [10.0e9, 10.4e9, 9.7e9];
    let d = doc(
        vec![vec![stream(&base)], vec![stream(&scaled(&base, 0.8))]],
        &args(2, None, &[]),
    );
    assert_eq!(d.body.comparisons[0].test, Some(TestKind::WelchLog));
    assert_eq!(d.body.comparisons[0].verdict, Verdict::Slower);
    let ping = |v: &[f64]| with_runs(WorkloadKind::Pingpong, TransportKind::Tcp, v);
    let d = doc(
        vec![
            vec![ping(&[20_000.0, 20_000.0, 20_096.0])],
            vec![ping(&[24_064.0, 24_064.0, 24_192.0])],
        ],
        &args(2, None, &[]),
    );
    assert_eq!(d.body.comparisons[0].test, Some(TestKind::WelchLog));
    assert_eq!(d.body.comparisons[0].verdict, Verdict::Slower);

    // Simulated: normal runs, 3 a side. Each side is called an outlier 5% of the time,
    // so about 90% of the comparisons take Welch (before the fix: about half).
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut normal = |mean: f64, sd: f64| {
        let mut uniform = || {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            ((state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let (u, v) = (uniform(), uniform());
        mean + sd * (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    };
    let trials = 2000;
    let mut welch = 0;
    for _ in 0..trials {
        let b: Vec<f64> = (0..3).map(|_| normal(10e9, 0.2e9)).collect();
        let n: Vec<f64> = (0..3).map(|_| normal(10e9, 0.2e9)).collect();
        let row = compare_one(&stream(&b), &stream(&n), "new.json", 0.05, None);
        welch += usize::from(row.test == Some(TestKind::WelchLog));
    }
    let share = welch as f64 / trials as f64;
    assert!((0.87..=0.93).contains(&share), "Welch in {share}");
}

#[test]
fn figures_beyond_any_measurement_are_refused_not_compared() {
    // 1e300 bit/s is no measurement (an edited or forged file): the scenario fails with
    // the reason, rather than being tested, or printed as a 300-digit number.
    let base = [1.0e300, 1.5e300, 1.7e300];
    let new = [1.1e300, 1.6e300, 1.75e300];
    let d = doc(
        vec![vec![stream(&base)], vec![stream(&new)]],
        &args(2, Some(5.0), &[]),
    );
    let c = &d.body.comparisons[0];
    assert_eq!(c.verdict, Verdict::Failed);
    assert_eq!((c.test, c.p_value), (None, None));
    let note = c.note.as_ref().unwrap();
    assert!(
        note.contains("out of range") && note.contains("1e300"),
        "{note}"
    );
    // A gate fails on a NEW that is no measurement where BASE was one.
    let bogus_new = compare_one(&stream(&STEADY), &stream(&new), "n", 0.05, Some(5.0));
    assert!(bogus_new.gate_failed, "{bogus_new:?}");
    // The bound itself is a figure; one beyond it is not.
    let at = crate::vocab::units::plausible::BITS_PER_SECOND;
    let ok = compare_one(
        &stream(&[at, at, at]),
        &stream(&[at, at, at]),
        "n",
        0.05,
        None,
    );
    assert_ne!(ok.verdict, Verdict::Failed, "{ok:?}");
    let over = compare_one(
        &stream(&[at, at, at * 1.001]),
        &stream(&[at; 3]),
        "n",
        0.05,
        None,
    );
    assert_eq!(over.verdict, Verdict::Failed, "{over:?}");
    // Latency and rates have bounds of their own.
    let ping = |v: &[f64]| with_runs(WorkloadKind::Pingpong, TransportKind::Tcp, v);
    let slow = compare_one(&ping(&[4.0e12; 3]), &ping(&[1.0e4; 3]), "n", 0.05, None);
    assert_eq!(slow.verdict, Verdict::Failed);
    let rate = |v: &[f64]| with_runs(WorkloadKind::Rate, TransportKind::Udp, v);
    let fast = compare_one(&rate(&[1.0e6; 3]), &rate(&[2.0e10; 3]), "n", 0.05, None);
    assert_eq!(fast.verdict, Verdict::Failed);
    assert!(fast.note.unwrap().contains("NEW"));
}

#[test]
fn a_target_rate_or_open_count_is_identity_unless_ignored() {
    let rate = |per_second: Option<f64>| {
        let mut r = with_runs(WorkloadKind::Rate, TransportKind::Udp, &STEADY);
        r.options.rate_per_second = per_second;
        r
    };
    let d = doc(
        vec![vec![rate(None)], vec![rate(Some(50e3))]],
        &args(2, None, &[]),
    );
    assert!(d.body.comparisons.is_empty());
    assert_eq!(d.body.only_in_base[0].scenario, "rate udp 64 KiB");
    assert_eq!(
        d.body.only_in_new[0].scenario,
        "rate udp 64 KiB rate 50.0 k/s"
    );
    assert!(
        d.envelope.warnings.contains(
            &"r1.json: only rate keeps rate udp 64 KiB from matching a scenario in it: add \
              --ignore-option rate to compare across it"
                .to_string()
        ),
        "{:?}",
        d.envelope.warnings
    );
    let d = doc(
        vec![vec![rate(None)], vec![rate(Some(50e3))]],
        &args(2, None, &[IdentityOption::Rate]),
    );
    assert_eq!(d.body.comparisons.len(), 1);
    assert!(
        d.envelope
            .warnings
            .iter()
            .all(|n| !n.contains("--ignore-option")),
        "{:?}",
        d.envelope.warnings
    );
    assert_eq!(
        d.body.comparisons[0].scenario,
        "rate udp 64 KiB [rate unpaced → 50.0 k/s]"
    );

    let connect = |open: u32| {
        let mut r = with_runs(WorkloadKind::Connect, TransportKind::Tcp, &STEADY);
        r.options.open = Some(open);
        r
    };
    let d = doc(
        vec![vec![connect(1)], vec![connect(100)]],
        &args(2, None, &[]),
    );
    assert!(d.body.comparisons.is_empty());
    let d = doc(
        vec![vec![connect(1)], vec![connect(100)]],
        &args(2, None, &[IdentityOption::Open]),
    );
    assert_eq!(
        d.body.comparisons[0].scenario,
        "connect tcp 64 KiB open 1 [open 1 → 100]"
    );
}

#[test]
fn the_role_in_the_other_process_is_part_of_the_placement() {
    use crate::vocab::Role;
    let report = |role: Option<Role>| {
        let mut r = sample::report(vec![stream(&STEADY)], Layout::List);
        r.placement.name = "processes".into();
        r.placement.other_role = role;
        r
    };
    let reports = [report(Some(Role::Receiver)), report(Some(Role::Sender))];
    let d = compare(&args(2, None, &[]), &reports, Vec::new());
    assert!(d.body.comparisons.is_empty());
    assert_eq!(
        (d.body.only_in_base.len(), d.body.only_in_new.len()),
        (1, 1)
    );
    let d = compare(
        &args(2, None, &[IdentityOption::Placement]),
        &reports,
        Vec::new(),
    );
    assert_eq!(
        d.body.comparisons[0].scenario,
        "stream tcp 64 KiB [placement processes (other: receiver) → processes (other: sender)]"
    );
    // The same role matches.
    let reports = [report(Some(Role::Receiver)), report(Some(Role::Receiver))];
    assert_eq!(
        compare(&args(2, None, &[]), &reports, Vec::new())
            .body
            .comparisons
            .len(),
        1
    );
}

#[test]
fn a_failed_or_interrupted_run_is_noted() {
    let mut bad = sample::report(Vec::new(), Layout::List);
    bad.error = Some("cannot bind".into());
    bad.interrupted = true;
    let reports = [sample::report(vec![stream(&STEADY)], Layout::List), bad];
    let d = compare(&args(2, None, &[]), &reports, Vec::new());
    assert_eq!(d.body.only_in_base.len(), 1);
    assert!(d
        .envelope
        .warnings
        .iter()
        .any(|n| n == "r1.json: the run failed: cannot bind"));
    assert!(d
        .envelope
        .warnings
        .iter()
        .any(|n| n.contains("interrupted")));
}

#[test]
fn each_new_file_gets_its_own_block() {
    let d = doc(
        vec![
            vec![stream(&STEADY)],
            vec![stream(&STEADY)],
            vec![stream(&scaled(&STEADY, 0.5))],
        ],
        &args(3, Some(10.0), &[]),
    );
    assert_eq!(d.body.new, ["r1.json", "r2.json"]);
    let files: Vec<&str> = d
        .body
        .comparisons
        .iter()
        .map(|c| c.new_file.as_str())
        .collect();
    assert_eq!(files, ["r1.json", "r2.json"]);
    let text = table(&d, View::default());
    let first = text.find("r0.json → r1.json").unwrap();
    let second = text.find("r0.json → r2.json").unwrap();
    assert!(first < second);
    assert!(text[first..second].contains("no significant difference"));
    assert!(text[second..].contains("slower (fails the gate)"));
    assert!(
        text.contains("--fail-if-slower 10%: FAILED: stream tcp 64 KiB in r2.json (50.0% slower)")
    );
}

#[test]
fn the_table_reads_in_units_and_names_the_test() {
    let d = doc(
        vec![vec![stream(&STEADY)], vec![stream(&scaled(&STEADY, 0.5))]],
        &args(2, None, &[]),
    );
    let text = table(&d, View::default());
    for want in [
        "scenario",
        "95% CI",
        "10.0 Gbit/s",
        "5.00 Gbit/s",
        "0.500",
        "<0.001",
        "Welch",
        "slower",
    ] {
        assert!(text.contains(want), "{want} in\n{text}");
    }
    let bytes = table(
        &d,
        View {
            units: crate::vocab::Units::Bytes,
            ..View::default()
        },
    );
    assert!(bytes.contains("1.16 GiB/s"), "{bytes}");
    let ping = |v: &[f64]| with_runs(WorkloadKind::Pingpong, TransportKind::Udp, v);
    let d = doc(
        vec![
            vec![ping(&[14_200.0, 14_300.0, 14_100.0])],
            vec![ping(&[14_200.0, 14_300.0, 14_100.0])],
        ],
        &args(2, None, &[]),
    );
    assert!(table(&d, View::default()).contains("14.2 µs"));
}

#[test]
fn markdown_html_and_csv_carry_the_same_rows_escaped() {
    let mut c = args(2, Some(10.0), &[]);
    c.files[1] = PathBuf::from("new<b>|&.json");
    let reports = [
        sample::report(vec![stream(&STEADY)], Layout::List),
        sample::report(vec![stream(&scaled(&STEADY, 0.5))], Layout::List),
    ];
    let d = compare(&c, &reports, Vec::new());
    let render = |f: crate::vocab::Format| {
        String::from_utf8(
            crate::report::exporter(f, View::default())
                .serialize(&d)
                .unwrap(),
        )
        .unwrap()
    };
    let md = render(crate::vocab::Format::Markdown);
    // Markup in a file name stays text: no element, no entity, no cell break.
    assert!(
        md.contains("### r0.json → new&lt;b&gt;\\|&amp;.json") && !md.contains("new<b>"),
        "{md}"
    );
    assert!(
        md.contains("| stream tcp 64 KiB | 10.0 Gbit/s | 5.00 Gbit/s | 0.500 |"),
        "{md}"
    );
    let html = render(crate::vocab::Format::Html);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("new&lt;b&gt;|&amp;.json") && !html.contains("new<b>"));
    assert!(html.contains("prefers-color-scheme: dark"));
    assert!(
        html.contains("<svg") && html.contains("<circle fill=\"#d0453a\""),
        "{html}"
    );
    assert!(
        !html.contains("http://") || html.matches("http://").count() == 1,
        "only the SVG namespace"
    );
    let csv = render(crate::vocab::Format::Csv);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("base_file,new_file,scenario,"));
    assert!(
        lines[1].contains(",0.5,") && lines[1].contains(",slower,50,true,"),
        "{}",
        lines[1]
    );
}

#[test]
fn the_json_document_is_versioned_with_units_in_its_keys() {
    let d = doc(
        vec![vec![stream(&STEADY)], vec![stream(&[5e9])]],
        &args(2, Some(10.0), &[]),
    );
    let v = serde_json::to_value(d.document()).unwrap();
    assert_eq!(v["kind"], "compare");
    assert_eq!(v["schema_version"], crate::report::SCHEMA_VERSION);
    assert_eq!(v["tool"]["name"], "sockbench");
    assert_eq!(v["body"]["base"], "r0.json");
    assert_eq!(v["body"]["new"], serde_json::json!(["r1.json"]));
    assert_eq!(v["body"]["alpha"], 0.05);
    assert_eq!(v["body"]["fail_if_slower_percent"], 10.0);
    assert_eq!(v["body"]["failed_gate"], false);
    let c = &v["body"]["comparisons"][0];
    assert_eq!(c["figure"], "bits_per_second");
    assert_eq!(c["verdict"], "too few runs");
    assert!(c["test"].is_null() && c["p_value"].is_null() && c["ratio_ci_low"].is_null());
    assert_eq!(c["base"]["values"], serde_json::json!(STEADY));
    assert_eq!(c["new"]["runs"], 1);
    assert_eq!(c["size_bytes"], 65536);
    assert!(v["error"].is_null());
    // Read back, it is the same comparison.
    let back: CompareReport = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(back.document()).unwrap(), v);
}

#[test]
fn a_ninety_fold_drop_is_slower_even_when_the_base_runs_spread_over_a_decade() {
    // The figures seen under load: base runs from 0.3 to 7.5 Gbit/s, new ones near
    // 35 Mbit/s. On the values Welch's variance hides it (p above 0.05); on their
    // logarithms it is a 90-fold change, far outside the noise.
    let base = [0.30e9, 3.14e9, 7.5e9, 0.6e9, 5.2e9];
    let new = [35.1e6, 30.0e6, 41.0e6, 36.0e6, 33.0e6];
    let raw = stats::welch(&base, &new).unwrap();
    assert!(raw.p_value > 0.05, "the old test: p {}", raw.p_value);
    let c = compare_one(&stream(&base), &stream(&new), "new.json", 0.05, Some(10.0));
    assert_eq!(c.verdict, Verdict::Slower, "{c:?}");
    assert!(c.p_value.unwrap() < 0.05, "{c:?}");
    assert!(c.ratio_ci_high.unwrap() < 0.2, "{c:?}");
    assert!(c.gate_failed);
    // The same in the other direction is faster.
    let c = compare_one(&stream(&new), &stream(&base), "new.json", 0.05, None);
    assert_eq!(c.verdict, Verdict::Faster, "{c:?}");
}

#[test]
fn welch_on_logs_gives_the_interval_of_the_geometric_means_ratio() {
    let new = scaled(&STEADY, 0.5);
    let c = compare_one(&stream(&STEADY), &stream(&new), "new.json", 0.05, None);
    assert_eq!(c.test, Some(TestKind::WelchLog));
    let ln = |v: &[f64]| -> Vec<f64> { v.iter().map(|x| x.ln()).collect() };
    let w = stats::welch(&ln(&STEADY), &ln(&new)).unwrap();
    let (lo, hi) = w.difference_interval(0.05);
    assert_eq!(
        (c.ratio_ci_low, c.ratio_ci_high),
        (Some(lo.exp()), Some(hi.exp()))
    );
    // Every value halved: the log difference is ln 0.5 exactly, with no spread added.
    assert!((lo + hi - 2.0 * 0.5f64.ln()).abs() < 1e-12, "{lo} {hi}");
    assert!(lo.exp() < 0.5 && hi.exp() > 0.5 && hi.exp() < 0.52);
    assert_eq!(c.p_value, Some(w.p_value));
}

#[test]
fn no_difference_is_said_only_when_the_interval_rules_one_out() {
    // Tight runs, the same figures: the interval lies within ±5% of 1.
    let tight = [10.0e9, 10.05e9, 9.95e9, 10.02e9, 9.98e9];
    let c = compare_one(&stream(&tight), &stream(&tight), "new.json", 0.05, None);
    assert_eq!(c.verdict, Verdict::NoSignificantDifference, "{c:?}");
    assert!(c.note.is_none());
    // Runs spread by ±30%: no significant change, but a 20% one would hide in there.
    let wide = [7.0e9, 13.0e9, 10.0e9, 8.0e9, 12.5e9];
    let shuffled = [12.0e9, 7.5e9, 9.5e9, 13.0e9, 8.5e9];
    let c = compare_one(&stream(&wide), &stream(&shuffled), "new.json", 0.05, None);
    assert_eq!(c.verdict, Verdict::TooNoisy, "{c:?}");
    let (lo, hi) = (c.ratio_ci_low.unwrap(), c.ratio_ci_high.unwrap());
    assert!(lo < 0.95 && hi > 1.05, "{lo} {hi}");
    let note = c.note.unwrap();
    assert!(note.contains(&format!("{lo:.3} to {hi:.3}")), "{note}");
    assert!(note.contains("--runs"), "{note}");
    assert_eq!(Verdict::TooNoisy.text(), "too noisy to tell");
    // The edge: an interval reaching exactly 0.95 and 1.05 still rules a change out.
    assert!(within_equivalence(Some(0.95), Some(1.05)));
    assert!(!within_equivalence(Some(0.949), Some(1.0)));
    assert!(!within_equivalence(Some(1.0), Some(1.051)));
    assert!(!within_equivalence(None, Some(1.0)));
}

/// The terminal table of `d`.
fn table(d: &CompareReport, view: View) -> String {
    let bytes = crate::report::exporter(crate::vocab::Format::Table, view)
        .serialize(d)
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

/// A document of `body`, written now.
fn document(body: Body) -> Document {
    Document {
        envelope: Envelope::starting(vec!["sockbench".into()]),
        body,
    }
}

/// A relay document whose splice and copy methods ran with these throughputs.
fn relay(splice: &[f64], copy: &[f64]) -> Document {
    use crate::document::relay::{RelayBody, RelayResult};
    let result = |method: &str, runs: &[f64]| RelayResult {
        transport: "tcp".into(),
        method: method.into(),
        size_bytes: 65536,
        runs_bits_per_second: runs.to_vec(),
        ..RelayResult::default()
    };
    document(Body::Relay(Box::new(RelayBody {
        results: vec![result("splice", splice), result("copy", copy)],
        ..RelayBody::default()
    })))
}

#[test]
fn relay_documents_are_compared_method_by_method_and_a_slowdown_is_caught() {
    let base = relay(&STEADY, &STEADY);
    let new = relay(&scaled(&STEADY, 0.5), &scaled(&STEADY, 1.001));
    let d = compare_rows(&args(2, Some(10.0), &[]), &[base, new], Vec::new());
    let rows: Vec<(&str, Verdict, Kind)> = (d.body.comparisons.iter())
        .map(|c| (c.scenario.as_str(), c.verdict, c.kind))
        .collect();
    assert_eq!(
        rows,
        [
            ("relay tcp splice 64 KiB", Verdict::Slower, Kind::Relay),
            (
                "relay tcp copy 64 KiB",
                Verdict::NoSignificantDifference,
                Kind::Relay
            ),
        ]
    );
    let splice = &d.body.comparisons[0];
    assert_eq!(splice.figure, "bits_per_second");
    assert_eq!(splice.ratio, Some(0.5));
    assert_eq!(splice.slower_percent, Some(50.0));
    assert!(splice.gate_failed && d.body.failed_gate);
    assert_eq!(splice.workload, None);
    // Compared with itself, every row is the same.
    let same = compare_rows(
        &args(2, None, &[]),
        &[relay(&STEADY, &STEADY), relay(&STEADY, &STEADY)],
        Vec::new(),
    );
    assert!(same
        .body
        .comparisons
        .iter()
        .all(|c| c.verdict == Verdict::NoSignificantDifference && c.ratio == Some(1.0)));
    // A method only one file ran is flagged, and fails the gate when BASE had it.
    let mut fewer = relay(&STEADY, &STEADY);
    if let Body::Relay(b) = &mut fewer.body {
        b.results.truncate(1);
    }
    let d = compare_rows(
        &args(2, Some(10.0), &[]),
        &[relay(&STEADY, &STEADY), fewer],
        Vec::new(),
    );
    assert_eq!(d.body.only_in_base.len(), 1);
    assert_eq!(d.body.only_in_base[0].scenario, "relay tcp copy 64 KiB");
    assert!(d.body.only_in_base[0].gate_failed && d.body.failed_gate);
}

#[test]
fn documents_of_two_kinds_are_refused_by_name_and_bench_kinds_go_together() {
    let files = [PathBuf::from("a.json"), PathBuf::from("b.json")];
    let load = document(Body::Load(Box::default()));
    let err = one_kind(&[relay(&STEADY, &STEADY), load], &files)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("a.json is a relay document and b.json a load document"),
        "{err}"
    );
    let bench = |r: Report| Document::from(r);
    let list = bench(sample::report(vec![stream(&STEADY)], Layout::List));
    let mut suite = sample::report(vec![stream(&STEADY)], Layout::Suite);
    suite.kind = Kind::Suite;
    assert!(one_kind(&[list, bench(suite)], &files).is_ok());
}

#[test]
fn a_load_or_swarm_measured_once_is_too_few_runs_however_far_apart() {
    let load = |rps: f64| {
        document(Body::Load(Box::new(crate::load::LoadBody {
            method: "GET".into(),
            target: "/".into(),
            connections: 20,
            requests_complete: 1000,
            requests_per_second: rps,
            ..Default::default()
        })))
    };
    let d = compare_rows(
        &args(2, Some(5.0), &[]),
        &[load(10_000.0), load(5_000.0)],
        Vec::new(),
    );
    let c = &d.body.comparisons[0];
    assert_eq!(c.scenario, "load GET / c20");
    assert_eq!((c.verdict, c.ratio), (Verdict::TooFewRuns, Some(0.5)));
    assert!(!c.gate_failed, "a single run never fails the gate");
}

#[test]
fn serve_and_mesh_are_not_told_to_give_runs_they_cannot_take() {
    let note = "1 run(s) in BASE and 1 in NEW: no test can tell a change from noise; \
                measure both with --runs 3 or more";
    for kind in [Kind::Serve, Kind::Mesh] {
        assert!(!takes_runs(kind));
        let said = one_run_note(kind, note);
        assert!(!said.contains("--runs 3"), "{said}");
        assert!(said.starts_with("1 run(s) in BASE"), "{said}");
        assert!(said.contains(&format!("{kind} measures one run")), "{said}");
    }
    for kind in [Kind::Relay, Kind::Swarm, Kind::Load, Kind::Models] {
        assert!(takes_runs(kind), "{kind}");
    }
    assert_eq!(one_run_note(Kind::Serve, "other"), "other");
}

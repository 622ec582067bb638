//! Where the roles ran (issue 15, part 1) and `--counters` (part 5), through the binary:
//! CPUs pinned with `--cpus` (taskset-style affinity is the outside truth) must show up as
//! the only CPU each role was sampled on, with the right same-CPU share and class; every
//! unpinned run reports its placement; a bimodal result made on purpose (test hook
//! `alternate-cpus`) is explained by the warning; migrations agree with perf's own
//! cpu-migrations counter and the task clock with the thread's CPU time.

use crate::common::{f, json, u, Sandbox};
use serde_json::Value;

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The CPUs a side was sampled on, as (cpu, share).
fn cpus_of(side: &Value) -> Vec<(u64, f64)> {
    side["cpus"]
        .as_array()
        .unwrap_or_else(|| panic!("no cpus in {side}"))
        .iter()
        .map(|c| (c["cpu"].as_u64().unwrap(), c["share"].as_f64().unwrap()))
        .collect()
}

#[test]
fn pinned_roles_are_sampled_only_on_their_cpus_with_the_share_and_class_that_follow() {
    if cpus() < 2 {
        eprintln!("skipped: needs two CPUs");
        return;
    }
    let sb = Sandbox::new();
    for workload in [["pingpong", "-t", "tcp"], ["rate", "-t", "udp"]] {
        for (pin, receiver_cpu, share, class) in
            [("0,0", 0, 1.0, "same-cpu"), ("0,1", 1, 0.0, "across-cpus")]
        {
            let mut args = workload.to_vec();
            args.extend(["-d", "0.3", "--warmup", "0", "--cpus", pin]);
            let v = json(&sb, &args);
            let run = &v["body"]["results"][0]["runs"][0];
            let what = format!("{workload:?} --cpus {pin}");
            assert_eq!(cpus_of(&run["sender"]), [(0, 1.0)], "{what}: {run}");
            assert_eq!(cpus_of(&run["receiver"]), [(receiver_cpu, 1.0)], "{what}");
            assert_eq!(f(run, "/placement/same_cpu_share"), share, "{what}");
            assert_eq!(run["placement"]["class"], class, "{what}");
            for side in ["sender", "receiver"] {
                // Pinned before its interval: the scheduler's own count says it stayed.
                assert_eq!(run[side]["migrations"], 0, "{what}: {side}");
                assert_eq!(run[side]["migrations_source"], "sched", "{what}: {side}");
                let per = f(run, &format!("/{side}/voluntary_switches_per_message"));
                let n = u(run, &format!("/{side}/voluntary_context_switches")) as f64;
                let msgs = f(run, &format!("/{side}/messages_per_second"))
                    * f(run, &format!("/{side}/duration_seconds"));
                assert!(
                    (per - n / msgs).abs() <= 1e-6 * per.max(1.0),
                    "{what}: {per} vs {n}/{msgs}"
                );
            }
        }
    }
}

#[test]
fn pinned_roles_in_two_processes_line_up_on_one_clock() {
    if cpus() < 2 {
        return;
    }
    let sb = Sandbox::new();
    for (pin, class) in [("0,0", "same-cpu"), ("0,1", "across-cpus")] {
        let v = json(
            &sb,
            &[
                "pingpong",
                "-t",
                "tcp",
                "-d",
                "0.3",
                "--warmup",
                "0",
                "--cpus",
                pin,
                "--placement",
                "processes",
            ],
        );
        assert_eq!(
            v["body"]["results"][0]["runs"][0]["placement"]["class"], class,
            "{pin}"
        );
    }
}

#[test]
fn every_unpinned_run_reports_its_placement_and_the_table_says_it() {
    let sb = Sandbox::new();
    let args = [
        "pingpong", "-t", "tcp", "-d", "0.1", "--warmup", "0", "--runs", "5",
    ];
    let v = json(&sb, &args);
    let runs = v["body"]["results"][0]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 5);
    for run in runs {
        let share = f(run, "/placement/same_cpu_share");
        assert!((0.0..=1.0).contains(&share), "{run}");
        let class = run["placement"]["class"].as_str().unwrap();
        let expected = if share >= 0.9 {
            "same-cpu"
        } else if share <= 0.1 {
            "across-cpus"
        } else {
            "mixed"
        };
        assert_eq!(class, expected, "{run}");
        for side in ["sender", "receiver"] {
            let c = cpus_of(&run[side]);
            assert!(!c.is_empty(), "{run}");
            let total: f64 = c.iter().map(|x| x.1).sum();
            assert!((total - 1.0).abs() < 1e-9, "shares add up: {c:?}");
            // Only CPUs this test may run on (under `taskset -c 1`, CPU 1 alone).
            let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
            assert!(
                c.iter()
                    .all(|x| allowed.is_set(x.0 as usize).unwrap_or(false)),
                "{c:?}"
            );
        }
    }
    let out = sb.cmd().args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("placement of the runs (unpinned"), "{text}");
}

/// The median, as the report takes it (the mean of the two middle values for an even
/// count).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 0 {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

#[test]
fn a_bimodal_result_made_on_purpose_is_explained_with_each_groups_count_and_p50() {
    if cpus() < 2 {
        return;
    }
    let sb = Sandbox::new();
    let args = [
        "pingpong", "-t", "tcp", "-d", "0.3", "--warmup", "0", "--runs", "4",
    ];
    let out = sb
        .cmd()
        .args(args)
        .args(["--format", "json", "-q"])
        .env("SOCKBENCH_TEST_FAULT", "alternate-cpus")
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["body"]["results"][0];
    let runs = r["runs"].as_array().unwrap();
    let classes: Vec<&str> = runs
        .iter()
        .map(|run| run["placement"]["class"].as_str().unwrap())
        .collect();
    assert_eq!(
        classes,
        ["same-cpu", "across-cpus", "same-cpu", "across-cpus"]
    );
    let p50 = |class: &str| -> Vec<f64> {
        runs.iter()
            .filter(|run| run["placement"]["class"] == class)
            .map(|run| f(run, "/latencies/round_trip/p50_ns"))
            .collect()
    };
    let (mut same, mut across) = (p50("same-cpu"), p50("across-cpus"));
    let (ms, ma) = (median(&mut same), median(&mut across));
    // The rule: medians more than 1.3x apart and the groups' ranges apart.
    let (lo, hi) = if ms <= ma {
        (&same, &across)
    } else {
        (&across, &same)
    };
    let apart = ms.max(ma) > 1.3 * ms.min(ma)
        && lo.iter().copied().fold(f64::MIN, f64::max)
            < hi.iter().copied().fold(f64::MAX, f64::min);
    let warning = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "placement")
        .map(|w| w["message"].as_str().unwrap().to_string());
    let show = |ns: f64| sockbench::vocab::units::format_ns(ns as u64);
    match warning {
        Some(m) => {
            assert!(apart, "warned though the groups are not apart: {m}");
            assert_eq!(
                m,
                format!(
                    "2 runs on one CPU: p50 {}; 2 runs across CPUs: p50 {}; pin with --cpus to choose",
                    show(ms),
                    show(ma)
                )
            );
        }
        None => assert!(
            !apart,
            "groups apart ({same:?} vs {across:?}) without a warning"
        ),
    }
    // The table splits the scenario by placement on request.
    let out = sb
        .cmd()
        .args(args)
        .arg("--by-placement")
        .env("SOCKBENCH_TEST_FAULT", "alternate-cpus")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("│ tcp ")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(
        rows[0].contains("same-cpu") && rows[1].contains("across-cpus"),
        "{text}"
    );
}

#[test]
fn counters_agree_with_the_schedulers_migrations_and_the_threads_cpu_time() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "pingpong",
            "-t",
            "tcp",
            "-d",
            "0.3",
            "--warmup",
            "0",
            "--runs",
            "2",
            "--counters",
        ],
    );
    let r = &v["body"]["results"][0];
    assert_eq!(r["options"]["counters"], true);
    let no_pmu = !std::path::Path::new("/sys/bus/event_source/devices/cpu").exists();
    for run in r["runs"].as_array().unwrap() {
        for side in ["sender", "receiver"] {
            let s = &run[side];
            let c = &s["counters"];
            if c["software_unavailable"].is_string() {
                eprintln!("skipped: {}", c["software_unavailable"]);
                return;
            }
            let (perf, sched) = (u(c, "/cpu_migrations"), u(s, "/migrations"));
            if s["migrations_source"] == "sched" {
                // Not exactly equal: perf counts a migration when the moved thread is next
                // scheduled in (so one just before an edge lands in the next interval),
                // the scheduler when it is moved. Unpinned pingpongs that migrate a
                // thousand times in 0.3 s were seen up to 15% apart; every other counter
                // (switches, faults) is far from either.
                assert!(
                    perf.abs_diff(sched) <= 2 + sched / 4,
                    "{side}: perf {perf} vs sched {sched}"
                );
            }
            let switches = u(c, "/context_switches");
            let rusage =
                u(s, "/voluntary_context_switches") + u(s, "/involuntary_context_switches");
            // perf's task clock stops a little before each switch away and starts a little
            // after the switch back, which the thread's CPU clock counts. How long that
            // is depends on what else runs: 1.35 us a switch with other builds loading
            // both vCPUs, 2.9 us with a compile beside a mutation test, 9.8 us with a busy
            // loop on every CPU (the soak's hog mode: 34.9 ms against 68.6 ms over 3441
            // switches). Allow 12 us: a counter in other units or never read is off by
            // far more.
            let (task, cpu) = (f(c, "/task_clock_seconds"), f(s, "/cpu_seconds"));
            assert!(
                (task - cpu).abs() <= 0.03 * cpu + 12e-6 * switches as f64 + 0.000_5,
                "{side}: task clock {task} vs thread CPU {cpu} ({switches} switches)"
            );
            assert!(
                switches.abs_diff(rusage) <= 2 + rusage / 50,
                "{side}: {switches} vs {rusage}"
            );
            if no_pmu {
                assert!(c["cycles_per_message"].is_null(), "null, never zero: {c}");
                assert!(c["instructions_per_cycle"].is_null(), "{c}");
                let why = c["hardware_unavailable"].as_str().unwrap();
                assert!(why.contains("exposes no PMU (ENOENT"), "{why}");
            }
        }
    }
    if no_pmu {
        let w: Vec<&Value> = r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["kind"] == "counters-unavailable")
            .collect();
        assert_eq!(w.len(), 1, "{}", r["warnings"]);
    }
    // Without --counters: no counters at all.
    let v = json(
        &sb,
        &["pingpong", "-t", "tcp", "-d", "0.1", "--warmup", "0"],
    );
    assert!(v["body"]["results"][0]["runs"][0]["sender"]["counters"].is_null());
}

#[test]
fn a_spinning_role_that_shared_a_cpu_says_the_figure_is_the_schedulers() {
    // Pinned together, the nonblocking engine spins through the CPU its peer needs; the
    // row says so (the run is refused unless asked for: --allow-shared-cpu). Pinned
    // apart, or with an engine that sleeps, it does not.
    if cpus() < 2 {
        eprintln!("skipped: needs two CPUs");
        return;
    }
    let sb = Sandbox::new();
    let kinds = |engine: &str, pin: &str| -> Vec<String> {
        let v = json(
            &sb,
            &[
                "stream", "-t", "pipe", "-e", engine, "-d", "0.2", "-w", "0", "--cpus", pin,
            ]
            .into_iter()
            .chain((pin == "0,0").then_some("--allow-shared-cpu"))
            .collect::<Vec<_>>(),
        );
        let r = &v["body"]["results"][0];
        assert_eq!(
            r["runs"][0]["placement"]["class"],
            if pin == "0,0" {
                "same-cpu"
            } else {
                "across-cpus"
            }
        );
        (r["warnings"].as_array().unwrap().iter())
            .map(|w| w["kind"].as_str().unwrap().to_string())
            .collect()
    };
    let spinning = "spinning-shared-cpu".to_string();
    assert!(kinds("nonblocking", "0,0").contains(&spinning));
    assert!(!kinds("nonblocking", "0,1").contains(&spinning));
    assert!(!kinds("blocking", "0,0").contains(&spinning));
}

//! `sockbench compare BASE.json NEW.json`: two runs of the same build make no significant
//! difference, a tiny send buffer makes tcp slower and fails `--fail-if-slower`; on
//! reports edited to known figures, the ratio, interval, p-value and verdict are exact
//! (pingpong's latency the right way round); scenarios only in one file are flagged,
//! failed ones shown; usage errors exit 2 and unreadable files 1.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{assert_success, Sandbox};
use serde_json::Value;

/// Run a measurement and save its JSON report as `name.json` in the sandbox.
fn save(sb: &Sandbox, name: &str, args: &[&str]) -> PathBuf {
    let path = sb.path().join(format!("{name}.json"));
    let out = sb
        .sockbench()
        .args(args)
        .args(["-q", "--format", "json", "--export-json"])
        .arg(&path)
        .output()
        .unwrap();
    assert_success(&out);
    path
}

/// `sockbench compare` with `args` (files and flags), run in the sandbox.
fn compare(sb: &Sandbox, args: &[&str]) -> Output {
    sb.sockbench()
        .arg("compare")
        .args(args)
        .current_dir(sb.path())
        .output()
        .unwrap()
}

/// stdout as JSON (whatever the exit status), checked against the schema.
fn stdout_json(out: &Output) -> Value {
    let v = crate::common::stdout_json(out);
    crate::common::assert_valid(&v);
    v
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Read a report, change it, write it to `to`.
fn edit(from: &Path, to: &Path, change: impl Fn(&mut Value)) {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(from).unwrap()).unwrap();
    change(&mut v);
    std::fs::write(to, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// Set every result's per-run throughput to `values` (one per run).
fn set_throughput(v: &mut Value, values: &[f64]) {
    for r in v["body"]["results"].as_array_mut().unwrap() {
        let runs = r["runs"].as_array_mut().unwrap();
        assert_eq!(runs.len(), values.len());
        for (run, &x) in runs.iter_mut().zip(values) {
            run["bits_per_second"] = x.into();
        }
    }
}

/// The roles' CPUs: the first two this test may run on (one CPU twice under
/// `taskset -c N`), so that every run of the comparison is placed alike.
fn pin() -> String {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
    let allowed: Vec<usize> = (0..nix::sched::CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .take(2)
        .collect();
    match allowed[..] {
        [a, b] => format!("{a},{b}"),
        [a] => format!("{a},{a}"),
        _ => unreachable!("a process runs on some CPU"),
    }
}

fn stream_args(pin: &str) -> Vec<String> {
    [
        "stream", "-t", "tcp,unix", "-s", "64K", "-d", "0.2", "-w", "0.05", "--runs", "5",
        "--cpus", pin,
    ]
    .map(String::from)
    .to_vec()
}

/// The check, measured: the same run twice, then with --sndbuf 4K on tcp. One test
/// so the measurements do not share the CPUs with each other.
#[test]
fn the_same_run_twice_is_no_different_and_a_tiny_sndbuf_is_slower_and_fails_the_gate() {
    let sb = Sandbox::new();
    // The same build measured twice: the odd and the even runs of one measurement, so
    // that both files see the same machine (two measurements one after the other do not
    // when a neighbour's load comes or goes between them, and the difference compare
    // then finds is real). A pair that still looks different is measured again, up to 3
    // times: at alpha 0.05 one in twenty pairs of the same build does.
    let mut verdicts = Vec::new();
    let mut base = PathBuf::new();
    let pin = pin();
    let mut owned = stream_args(&pin);
    let runs = owned.iter().position(|a| a == "--runs").unwrap() + 1;
    owned[runs] = "10".into();
    let stream: Vec<&str> = owned.iter().map(String::as_str).collect();
    for attempt in 0..3 {
        let both = save(&sb, &format!("both{attempt}"), &stream);
        base = sb.path().join(format!("base{attempt}.json"));
        let again = sb.path().join(format!("again{attempt}.json"));
        for (half, path) in [(0, &base), (1, &again)] {
            edit(&both, path, |v| {
                for r in v["body"]["results"].as_array_mut().unwrap() {
                    let runs = r["runs"].as_array_mut().unwrap();
                    assert_eq!(runs.len(), 10);
                    let kept: Vec<Value> = (runs.iter().skip(half).step_by(2).cloned()).collect();
                    *runs = kept;
                }
            });
        }
        let out = compare(
            &sb,
            &[
                base.to_str().unwrap(),
                again.to_str().unwrap(),
                "--fail-if-slower",
                "10",
                "--format",
                "json",
            ],
        );
        let v = stdout_json(&out);
        verdicts = (v["body"]["comparisons"].as_array().unwrap().iter())
            .map(|c| c["verdict"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(verdicts.len(), 2, "{v}");
        // The same build twice is never faster or slower; whether the interval is
        // narrow enough to rule a change out depends on the machine's noise.
        let same = verdicts
            .iter()
            .filter(|v| *v == "no significant difference" || *v == "too noisy to tell")
            .count();
        if out.status.code() == Some(0) && same >= 1 && v["body"]["failed_gate"] == false {
            break;
        }
        eprintln!("attempt {attempt}: {verdicts:?}, {}", stderr(&out));
        verdicts.clear();
    }
    assert!(!verdicts.is_empty(), "3 pairs of the same run all differed");

    let small = save(
        &sb,
        "small",
        &[
            "stream", "-t", "tcp", "-s", "64K", "-d", "0.2", "-w", "0.05", "--runs", "5", "--cpus",
            &pin, "--sndbuf", "4K",
        ],
    );
    let (base, small) = (base.to_str().unwrap(), small.to_str().unwrap());
    // The buffer is identity: nothing matches without --ignore-option.
    let out = compare(&sb, &[base, small, "--format", "json"]);
    assert_success(&out);
    let v = stdout_json(&out);
    assert_eq!(v["body"]["comparisons"], serde_json::json!([]));
    let names = |key: &str| -> Vec<String> {
        (v["body"][key].as_array().unwrap().iter())
            .map(|u| u["scenario"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names("only_in_base"),
        [
            format!("stream tcp 64 KiB cpus {pin}"),
            format!("stream unix 64 KiB cpus {pin}")
        ]
    );
    assert_eq!(
        names("only_in_new"),
        [format!("stream tcp 64 KiB sndbuf 4 KiB cpus {pin}")]
    );

    let out = compare(
        &sb,
        &[
            base,
            small,
            "--ignore-option",
            "sndbuf",
            "--fail-if-slower",
            "10",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains(&format!(
            "stream tcp 64 KiB cpus {pin} [sndbuf default → 4 KiB]"
        )),
        "{table}"
    );
    assert!(table.contains("slower (fails the gate)"), "{table}");
    assert!(
        table.contains(&format!("only in BASE: stream unix 64 KiB cpus {pin}")),
        "{table}"
    );
    assert!(
        stderr(&out).contains(&format!(
            "stream tcp 64 KiB cpus {pin} [sndbuf default → 4 KiB] is "
        )),
        "{}",
        stderr(&out)
    );
    let out = compare(
        &sb,
        &[
            base,
            small,
            "--ignore-option",
            "sndbuf",
            "--fail-if-slower",
            "10",
            "--format",
            "json",
        ],
    );
    let v = stdout_json(&out);
    let c = &v["body"]["comparisons"][0];
    assert_eq!(c["verdict"], "slower", "{c}");
    assert!(c["p_value"].as_f64().unwrap() < 0.05, "{c}");
    assert!(c["ratio"].as_f64().unwrap() < 0.9, "{c}");
    assert!(c["ratio_ci_high"].as_f64().unwrap() < 1.0, "{c}");
    assert!(c["slower_percent"].as_f64().unwrap() > 10.0, "{c}");
    assert_eq!(c["gate_failed"], true);
    assert_eq!(v["body"]["failed_gate"], true);
    assert_eq!(v["body"]["ignored_options"], serde_json::json!(["sndbuf"]));
}

/// A quick real report with 5 runs of tcp (count-stopped, no warm-up).
fn quick(sb: &Sandbox) -> PathBuf {
    save(
        sb,
        "quick",
        &[
            "stream", "-t", "tcp", "-s", "4K", "-n", "500", "-w", "0", "--runs", "5",
        ],
    )
}

const STEADY: [f64; 5] = [10.0e9, 10.2e9, 9.9e9, 10.1e9, 9.8e9];

#[test]
fn half_the_throughput_is_slower_with_exact_ratio_interval_and_p() {
    let sb = Sandbox::new();
    let real = quick(&sb);
    let (base, new) = (sb.path().join("base.json"), sb.path().join("new.json"));
    edit(&real, &base, |v| set_throughput(v, &STEADY));
    edit(&real, &new, |v| {
        set_throughput(v, &STEADY.map(|x| x * 0.5));
    });
    let out = compare(
        &sb,
        &[
            "base.json",
            "new.json",
            "--fail-if-slower",
            "10",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v = stdout_json(&out);
    assert_eq!(v["kind"], "compare");
    assert_eq!(v["schema_version"], sockbench::report::SCHEMA_VERSION);
    assert!(
        v["environment"].is_object() && v["ended_at"].is_string(),
        "{v}"
    );
    assert_eq!(v["body"]["base"], "base.json");
    assert_eq!(v["body"]["new"], serde_json::json!(["new.json"]));
    let c = &v["body"]["comparisons"][0];
    assert_eq!(c["scenario"], "stream tcp 4 KiB");
    assert_eq!(c["figure"], "bits_per_second");
    assert_eq!(c["base"]["median"], 10.0e9);
    assert_eq!(c["new"]["median"], 5.0e9);
    assert_eq!(c["ratio"], 0.5);
    assert_eq!(c["test"], "welch-log");
    // SciPy 1.17.1 on the logarithms: ttest_ind(log(new), log(base),
    // equal_var=False).pvalue, and the interval exp(d ± t.ppf(0.975, Welch's df) se), d
    // the difference of mean logarithms and se its standard error.
    let near = |key: &str, want: f64| {
        let got = c[key].as_f64().unwrap();
        assert!((got - want).abs() <= 1e-8 * want, "{key}: {got} vs {want}");
    };
    near("p_value", 2.091_544_540_007_578e-12);
    near("ratio_ci_low", 0.488_600_430_201_131_25);
    near("ratio_ci_high", 0.511_665_533_935_545_5);
    assert_eq!(c["ci_confidence"], 0.95);
    assert_eq!(c["verdict"], "slower");
    assert_eq!(c["slower_percent"], 50.0);
    assert_eq!(v["body"]["failed_gate"], true);
    assert!(
        stderr(&out).contains("stream tcp 4 KiB is 50.0% slower in new.json"),
        "{}",
        stderr(&out)
    );
    // Not beyond 60%: the gate passes; the other way round it is faster.
    let out = compare(&sb, &["base.json", "new.json", "--fail-if-slower", "60"]);
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("--fail-if-slower 60%: passed"));
    let out = compare(&sb, &["new.json", "base.json", "--format", "json"]);
    assert_success(&out);
    assert_eq!(
        stdout_json(&out)["body"]["comparisons"][0]["verdict"],
        "faster"
    );
}

#[test]
fn a_doubled_pingpong_latency_is_slower_and_a_halved_one_faster() {
    let sb = Sandbox::new();
    let real = save(
        &sb,
        "ping",
        &[
            "pingpong", "-t", "udp", "-s", "64", "-n", "200", "-w", "0", "--runs", "5",
        ],
    );
    let p50 = [20_000u64, 20_400, 19_800, 20_200, 19_600];
    let with = |scale: u64, to: &str| {
        edit(&real, &sb.path().join(to), |v| {
            for r in v["body"]["results"].as_array_mut().unwrap() {
                for (run, &x) in r["runs"].as_array_mut().unwrap().iter_mut().zip(&p50) {
                    run["latencies"]["round_trip"]["p50_ns"] = (x * scale / 2).into();
                    // Throughput moves the other way: it must not be what is compared.
                    run["messages_per_second"] = (1e9 / (x * scale) as f64).into();
                }
            }
        })
    };
    with(2, "base.json");
    with(4, "slow.json");
    with(1, "fast.json");
    let out = compare(
        &sb,
        &[
            "base.json",
            "slow.json",
            "fast.json",
            "--fail-if-slower",
            "50",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v = stdout_json(&out);
    let slow = &v["body"]["comparisons"][0];
    assert_eq!(slow["new_file"], "slow.json");
    assert_eq!(slow["figure"], "round_trip_p50_ns");
    assert_eq!(slow["higher_is_better"], false);
    assert_eq!(slow["ratio"], 2.0);
    assert_eq!(slow["verdict"], "slower");
    assert_eq!(slow["slower_percent"], 100.0);
    assert_eq!(slow["gate_failed"], true);
    near_p(slow);
    let fast = &v["body"]["comparisons"][1];
    assert_eq!(fast["new_file"], "fast.json");
    assert_eq!(fast["ratio"], 0.5);
    assert_eq!(fast["verdict"], "faster");
    assert_eq!(fast["slower_percent"], -50.0);
    assert_eq!(fast["gate_failed"], false);
    near_p(fast);
    // The table prints latencies in time units.
    let out = compare(&sb, &["base.json", "slow.json"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("20.0 µs") && table.contains("40.0 µs"),
        "{table}"
    );
}

/// p from SciPy 1.17.1 for these p50s against twice (or half) them, Welch on the
/// logarithms.
fn near_p(c: &Value) {
    let p = c["p_value"].as_f64().unwrap();
    assert!((p - 2.091_544_540_007_7e-12).abs() < 1e-8 * 2.1e-12, "{p}");
}

#[test]
fn one_run_is_too_few_runs_and_says_to_measure_more() {
    let sb = Sandbox::new();
    let one = save(
        &sb,
        "one",
        &["stream", "-t", "tcp", "-s", "4K", "-n", "500", "-w", "0"],
    );
    let out = compare(
        &sb,
        &[
            one.to_str().unwrap(),
            one.to_str().unwrap(),
            "--fail-if-slower",
            "0",
        ],
    );
    assert_success(&out);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("too few runs"), "{table}");
    assert!(table.contains("--runs 3 or more"), "{table}");
}

#[test]
fn scenarios_in_one_file_only_are_flagged_and_failed_ones_shown() {
    let sb = Sandbox::new();
    let real = save(
        &sb,
        "two",
        &[
            "stream", "-t", "tcp,unix", "-s", "4K", "-n", "500", "-w", "0", "--runs", "3",
        ],
    );
    edit(&real, &sb.path().join("base.json"), |v| {
        // Drop unix from BASE.
        v["body"]["results"].as_array_mut().unwrap().truncate(1);
    });
    edit(&real, &sb.path().join("new.json"), |v| {
        // tcp failed in NEW; add a pipe scenario BASE lacks.
        let tcp = &mut v["body"]["results"][0];
        tcp["error"] = "tcp receiver failed: Connection reset by peer".into();
        tcp["runs"] = serde_json::json!([]);
        let mut pipe = v["body"]["results"][1].clone();
        pipe["transport"] = "pipe".into();
        v["body"]["results"].as_array_mut().unwrap().push(pipe);
    });
    let out = compare(&sb, &["base.json", "new.json", "--fail-if-slower", "0"]);
    // tcp ran in BASE and failed in NEW: that fails the gate, named on stderr.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "stream tcp 4 KiB failed in new.json (NEW: tcp receiver failed: Connection reset \
             by peer): it ran in BASE, so --fail-if-slower 0% fails"
        ),
        "{}",
        stderr(&out)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("only in NEW: stream unix 4 KiB, stream pipe 4 KiB"),
        "{table}"
    );
    assert!(
        table.contains("stream tcp 4 KiB: NEW: tcp receiver failed: Connection reset by peer"),
        "{table}"
    );
    let v = stdout_json(&compare(
        &sb,
        &["base.json", "new.json", "--format", "json"],
    ));
    assert_eq!(v["body"]["comparisons"][0]["verdict"], "failed");
    assert_eq!(
        v["body"]["comparisons"][0]["new"]["error"],
        "tcp receiver failed: Connection reset by peer"
    );
    assert_eq!(v["body"]["only_in_base"], serde_json::json!([]));
    assert_eq!(v["body"]["only_in_new"].as_array().unwrap().len(), 2);
    // Without --fail-if-slower a failure is shown, not an exit status.
    assert_success(&compare(&sb, &["base.json", "new.json"]));

    // A scenario BASE ran and NEW lacks fails the gate too; one only in NEW does not.
    edit(&real, &sb.path().join("tcp-only.json"), |v| {
        v["body"]["results"].as_array_mut().unwrap().truncate(1);
    });
    let out = compare(
        &sb,
        &[
            "two.json",
            "tcp-only.json",
            "--fail-if-slower",
            "5",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("stream unix 4 KiB is missing from tcp-only.json"),
        "{}",
        stderr(&out)
    );
    let v = stdout_json(&out);
    assert_eq!(v["body"]["failed_gate"], true);
    assert_eq!(v["body"]["only_in_base"][0]["gate_failed"], true);
    assert_eq!(v["body"]["comparisons"][0]["gate_failed"], false);
    let out = compare(&sb, &["tcp-only.json", "two.json", "--fail-if-slower", "5"]);
    assert_success(&out);
}

/// Rate's target rate is part of a scenario's identity: an unpaced run and one at 50k/s
/// do not match, unless `--ignore-option rate`.
#[test]
fn a_paced_rate_run_matches_an_unpaced_one_only_when_told_to() {
    let sb = Sandbox::new();
    let quick = [
        "-t", "udp", "-s", "64", "-n", "200", "-w", "0", "--runs", "1",
    ];
    let mut paced = vec!["rate"];
    paced.extend(quick);
    let unpaced = paced.clone();
    paced.extend(["--rate", "50k"]);
    save(&sb, "unpaced", &unpaced);
    save(&sb, "paced", &paced);
    let v = stdout_json(&compare(
        &sb,
        &["unpaced.json", "paced.json", "--format", "json"],
    ));
    assert_eq!(v["body"]["comparisons"], serde_json::json!([]));
    assert_eq!(v["body"]["only_in_base"][0]["scenario"], "rate udp 64 B");
    assert_eq!(
        v["body"]["only_in_new"][0]["scenario"],
        "rate udp 64 B rate 50.0 k/s"
    );
    let v = stdout_json(&compare(
        &sb,
        &[
            "unpaced.json",
            "paced.json",
            "--ignore-option",
            "rate",
            "--format",
            "json",
        ],
    ));
    assert_eq!(
        v["body"]["comparisons"][0]["scenario"],
        "rate udp 64 B [rate unpaced → 50.0 k/s]"
    );
    // A report without the key (schema version 4: no envelope, the body's keys at the
    // top) counts as unpaced.
    edit(
        &sb.path().join("unpaced.json"),
        &sb.path().join("old.json"),
        |v| {
            let o = v.as_object_mut().unwrap();
            let body = o.remove("body").unwrap();
            for k in ["kind", "started_at", "ended_at"] {
                o.remove(k);
            }
            o.extend(body.as_object().unwrap().clone());
            v["schema_version"] = 4.into();
            for r in v["results"].as_array_mut().unwrap() {
                let o = r["options"].as_object_mut().unwrap();
                o.remove("rate_per_second");
                o.remove("open");
            }
        },
    );
    let v = stdout_json(&compare(
        &sb,
        &["old.json", "unpaced.json", "--format", "json"],
    ));
    assert_eq!(v["body"]["comparisons"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["body"]["only_in_base"], serde_json::json!([]));
}

#[test]
fn every_format_and_export_holds_the_comparison() {
    let sb = Sandbox::new();
    let real = quick(&sb);
    edit(&real, &sb.path().join("base.json"), |v| {
        set_throughput(v, &STEADY)
    });
    edit(&real, &sb.path().join("new.json"), |v| {
        set_throughput(v, &STEADY.map(|x| x * 1.5))
    });
    let out = compare(
        &sb,
        &[
            "base.json",
            "new.json",
            "--export-json",
            "c.json",
            "--export-markdown",
            "c.md",
            "--export-html",
            "c.html",
            "--export-csv",
            "c.csv",
        ],
    );
    assert_success(&out);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("base.json → new.json") && table.contains("faster"),
        "{table}"
    );
    let read = |name: &str| std::fs::read_to_string(sb.path().join(name)).unwrap();
    let v: Value = serde_json::from_str(&read("c.json")).unwrap();
    assert_eq!(v["body"]["comparisons"][0]["ratio"], 1.5);
    assert!(read("c.md").contains("| stream tcp 4 KiB | 10.0 Gbit/s | 15.0 Gbit/s | 1.500 |"));
    let html = read("c.html");
    assert!(
        html.contains("<svg") && html.contains("prefers-color-scheme"),
        "{html}"
    );
    assert!(html.contains("<td>faster</td>"), "{html}");
    let csv = read("c.csv");
    assert_eq!(csv.lines().count(), 2);
    assert!(csv.lines().nth(1).unwrap().contains(",1.5,"), "{csv}");
    // --format writes the same to stdout.
    for (format, want) in [
        (
            "markdown",
            "| scenario | base | new | ratio | 95% CI | p | test | verdict |",
        ),
        ("html", "<!DOCTYPE html>"),
        ("csv", "base_file,new_file,scenario,"),
    ] {
        let out = compare(&sb, &["base.json", "new.json", "--format", format]);
        assert_success(&out);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(want),
            "{format}"
        );
    }
}

#[test]
fn bad_usage_exits_2_and_unreadable_files_exit_1() {
    let sb = Sandbox::new();
    let real = quick(&sb);
    let r = real.to_str().unwrap();
    for (args, says) in [
        (vec![r, r, "--fail-if-slower", "-1"], "--fail-if-slower -1"),
        (
            vec![r, r, "--fail-if-slower", "lots"],
            "invalid value 'lots'",
        ),
        (vec![r, r, "--fail-if-slower", "nan"], "percentage"),
        (vec![r, r, "--alpha", "0"], "between 0 and 1"),
        (vec![r, r, "--alpha", "-0.1"], "between 0 and 1"),
        (vec![r, r, "--alpha", "1.5"], "between 0 and 1"),
        (vec!["-", "-"], "stdin (-) can be given once"),
        (vec![r], "required"),
        (
            vec![r, r, "--ignore-option", "colour"],
            "invalid value 'colour'",
        ),
        (
            vec![r, "new.json", "new.json"],
            "new.json is given twice as NEW",
        ),
        (vec![r, r, r], "is given twice as NEW"),
    ] {
        let out = compare(&sb, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Under --format json, a usage error is a compare document with the error.
    let out = compare(&sb, &[r, r, "--alpha", "2", "--format", "json"]);
    assert_eq!(out.status.code(), Some(2));
    let v = stdout_json(&out);
    assert!(v["error"].as_str().unwrap().contains("--alpha 2"), "{v}");
    assert_eq!(v["body"]["comparisons"], serde_json::json!([]));
    // So is one clap finds, before compare reads its arguments.
    for (args, says) in [
        (vec![r, "--format", "json"], "required"),
        (
            vec![r, r, "--ignore-option", "bogus", "--format=json"],
            "invalid value 'bogus'",
        ),
    ] {
        let out = compare(&sb, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let v = stdout_json(&out);
        assert_eq!(v["kind"], "compare", "{args:?}");
        assert!(v["error"].as_str().unwrap().contains(says), "{args:?}: {v}");
    }
    // --ignore-option matches bench scenarios; other kinds' rows are matched by what they
    // measure, so it is refused rather than said to be applied.
    let relay = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/documents/relay.json");
    let relay = relay.to_str().unwrap();
    let out = compare(&sb, &[relay, relay, "--ignore-option", "sndbuf"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("relay rows are matched by what they measure"),
        "{}",
        stderr(&out)
    );
    std::fs::write(sb.path().join("other.json"), "{\"hello\": 1}").unwrap();
    std::fs::write(sb.path().join("text.json"), "not json").unwrap();
    for (file, says) in [
        ("missing.json", "cannot read missing.json"),
        ("other.json", "other.json is not a sockbench document"),
        ("text.json", "text.json is not JSON"),
    ] {
        let out = compare(&sb, &[r, file]);
        assert_eq!(out.status.code(), Some(1), "{file}");
        assert!(stderr(&out).contains(says), "{file}: {}", stderr(&out));
        // Under --format json the failure is a compare document too.
        let out = compare(&sb, &[r, file, "--format", "json"]);
        assert_eq!(out.status.code(), Some(1));
        let v = stdout_json(&out);
        assert_eq!(v["kind"], "compare");
        assert!(v["error"].as_str().unwrap().contains(says), "{v}");
    }
    // The same file twice is fine: nothing differs.
    let out = compare(&sb, &[r, r, "--fail-if-slower", "0", "--format", "json"]);
    assert_success(&out);
    let v = stdout_json(&out);
    let c = &v["body"]["comparisons"][0];
    assert_eq!(c["ratio"], 1.0);
    // No change, said as firmly as the runs' noise allows: "no significant difference"
    // only when the interval rules out 5% either way.
    let (lo, hi) = (
        c["ratio_ci_low"].as_f64().unwrap(),
        c["ratio_ci_high"].as_f64().unwrap(),
    );
    assert!(lo <= 1.0 && hi >= 1.0, "{c}");
    let expected = match lo >= 0.95 && hi <= 1.05 {
        true => "no significant difference",
        false => "too noisy to tell",
    };
    assert_eq!(c["verdict"], expected, "{c}");
    // BASE from stdin.
    let out = sb
        .sockbench()
        .args(["compare", "-", r, "--format", "json"])
        .stdin(std::fs::File::open(&real).unwrap())
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(stdout_json(&out)["body"]["base"], "-");
}

#[test]
fn file_names_and_what_the_files_say_are_text_in_markdown_and_on_the_terminal() {
    let sb = Sandbox::new();
    let real = quick(&sb);
    edit(&real, &sb.path().join("base.json"), |v| {
        set_throughput(v, &STEADY)
    });
    // A NEW file whose name and failed scenario carry markup and terminal sequences.
    let said = "<script>alert(1)</script> | `x` \u{1b}[31mred\u{1b}]0;owned\u{7}\u{9b}2J\n";
    for name in [
        "<img src=x onerror=alert(1)>.json",
        "\u{1b}]0;owned\u{7}<script>.json",
    ] {
        edit(&real, &sb.path().join(name), |v| {
            let tcp = &mut v["body"]["results"][0];
            tcp["error"] = said.into();
            tcp["runs"] = serde_json::json!([]);
        });
        let out = compare(&sb, &["base.json", name, "--format", "markdown"]);
        assert_success(&out);
        let md = String::from_utf8(out.stdout).unwrap();
        assert!(!md.contains("<script") && !md.contains("<img"), "{md}");
        assert!(
            md.contains("&lt;script&gt;alert(1)&lt;/script&gt; \\| \\`x\\`"),
            "{md}"
        );
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
        let cells = |l: &str| l.replace("\\|", "").matches('|').count();
        assert!(rows.iter().all(|l| cells(l) == cells(rows[0])), "{md}");
        // The table and the gate's message on stderr: no terminal sequence either.
        let out = compare(&sb, &["base.json", name, "--fail-if-slower", "5"]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        for text in [String::from_utf8(out.stdout.clone()).unwrap(), stderr(&out)] {
            assert!(text.contains("\\x1b[31mred"), "{text}");
            assert!(
                !text.contains(['\u{1b}', '\u{7}', '\u{9b}']),
                "a control character reached the terminal: {text:?}"
            );
        }
    }
}

#[test]
fn a_fifo_or_a_device_as_base_or_new_is_refused_at_once_with_exit_1() {
    let sb = Sandbox::new();
    let real = quick(&sb);
    let fifo = sb.path().join("fifo.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    for (args, says) in [
        (
            [real.as_path(), fifo.as_path()],
            "fifo.json is a FIFO, not a regular file",
        ),
        (
            [Path::new("/dev/zero"), real.as_path()],
            "/dev/zero is a character device, not a regular file",
        ),
    ] {
        // A minute is a hang, not a slow machine: a refusal takes no time.
        let out = sb
            .cmd()
            .arg("compare")
            .args(args)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

/// `compare` reads every kind's figures through its headline: a slowdown forced inside
/// the measured work (the test-hooks delay SOCKBENCH_TEST_SLOW, a sleep at one point of
/// the code) is called `slower` for a relay method, a load and a swarm, with the ratio
/// the right way round; the same build against itself is not.
#[test]
fn a_forced_slowdown_of_a_relay_method_a_load_and_a_swarm_is_called_slower() {
    use std::io::BufRead;
    use std::process::Stdio;
    let sb = Sandbox::new();
    // Two saves of `args`: as built, then with every pass through `point` delayed.
    let pair = |name: &str, args: &[&str], point: &str, us: u32| -> (PathBuf, PathBuf) {
        let base = save(&sb, &format!("{name}-base"), args);
        let slow = sb.path().join(format!("{name}-slow.json"));
        let out = sb
            .sockbench()
            .args(args)
            .args(["-q", "--format", "json", "--export-json"])
            .arg(&slow)
            .env("SOCKBENCH_TEST_SLOW", format!("{point}:{us}"))
            .output()
            .unwrap();
        assert_success(&out);
        (base, slow)
    };
    let judged = |base: &Path, slow: &Path| -> Vec<(String, f64)> {
        let out = compare(
            &sb,
            &[
                base.to_str().unwrap(),
                slow.to_str().unwrap(),
                "--format",
                "json",
            ],
        );
        assert_success(&out);
        let v = stdout_json(&out);
        (v["body"]["comparisons"].as_array().unwrap().iter())
            .map(|c| {
                (
                    c["verdict"].as_str().unwrap().to_string(),
                    c["ratio"].as_f64().unwrap_or(f64::NAN),
                )
            })
            .collect()
    };
    let runs = ["--runs", "5"];
    // relay: 2 ms in every copy of read-write's 64 KiB buffer caps it near 260 Mbit/s.
    let (base, slow) = pair(
        "relay",
        &[
            &["relay", "-m", "read-write", "-t", "unix", "-d", "0.3"][..],
            &runs,
        ]
        .concat(),
        "relay-copy",
        2000,
    );
    for (verdict, ratio) in judged(&base, &slow) {
        assert_eq!(verdict, "slower", "relay: ratio {ratio}");
        assert!(ratio < 0.5, "relay: {ratio}");
    }
    // swarm: 2 ms in every reactor step.
    let (base, slow) = pair(
        "swarm",
        &[
            &["swarm", "-n", "8", "-t", "socketpair", "-d", "0.3"][..],
            &runs,
        ]
        .concat(),
        "swarm-step",
        2000,
    );
    let swarm = judged(&base, &slow);
    assert_eq!(swarm.len(), 1, "{swarm:?}");
    assert_eq!(swarm[0].0, "slower", "swarm: {swarm:?}");
    assert!(swarm[0].1 < 0.5, "swarm: {swarm:?}");
    // load: 2 ms before every request it sends, against sockbench's own server.
    let mut server = sb
        .sockbench()
        .args(["serve", "--port", "0", "-d", "60", "-v", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(server.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = (first.split_whitespace())
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {first:?}"))
        .to_string();
    let (base, slow) = pair(
        "load",
        &[&["load", "-n", "400", "-c", "2", "-k", &url][..], &runs].concat(),
        "load-send",
        2000,
    );
    let _ = server.kill();
    let _ = server.wait();
    let load = judged(&base, &slow);
    assert_eq!(load.len(), 1, "{load:?}");
    assert_eq!(load[0].0, "slower", "load: {load:?}");
    assert!(load[0].1 < 0.5, "load: {load:?}");
    // Each against itself: nothing is slower.
    for name in ["relay", "swarm", "load"] {
        let base = sb.path().join(format!("{name}-base.json"));
        for (verdict, ratio) in judged(&base, &base) {
            assert_ne!(verdict, "slower", "{name} against itself: {ratio}");
            assert!((ratio - 1.0).abs() < 1e-9, "{name} against itself: {ratio}");
        }
    }
}

//! `sockbench swarm`: thousands of pairs at once on two epoll threads, counted exactly
//! (against the kernel's I/O accounting of the process), limits checked first, and
//! Ctrl-C prompt in every phase.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{io_accounting, u, Sandbox};
use serde_json::Value;

fn swarm(sb: &Sandbox, args: &[&str]) -> (Option<i32>, Value, String) {
    let out = sb
        .cmd()
        .arg("swarm")
        .args(args)
        .args(["--format", "json", "-q"])
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code(),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// As many pairs as asked, up to what this machine's hard descriptor limit allows.
fn most_pairs(want: u64) -> u64 {
    let (_, hard) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    let n = want.min(hard.saturating_sub(16) / 2);
    if n < want {
        eprintln!("the hard descriptor limit is {hard}: {n} pairs instead of {want}");
    }
    n
}

#[test]
fn ten_thousand_pairs_over_unix_and_tcp_run_without_an_error() {
    let n = most_pairs(10_000);
    let sb = Sandbox::new();
    for t in ["unix", "tcp"] {
        let (code, v, err) = swarm(&sb, &["-n", &n.to_string(), "-t", t, "-d", "0.5"]);
        assert_eq!(code, Some(0), "{t}: {err}");
        assert_eq!(u(&v, "/pairs"), n, "{t}");
        assert_eq!(v["errors"], serde_json::json!({}), "{t}");
        assert_eq!(u(&v, "/bytes_sent"), u(&v, "/bytes_received"), "{t}");
        // What was still in flight at the interval's end is read in the drain, not
        // counted in the interval (usually some bytes; none if the readers had caught up).
        let in_interval = u(&v, "/bytes_received_in_interval");
        assert!(
            in_interval > 0 && in_interval <= u(&v, "/bytes_received"),
            "{t}"
        );
        let bps = v["bits_per_second"].as_f64().unwrap();
        let secs = v["duration_seconds"].as_f64().unwrap();
        assert!((bps * secs / 8.0 - in_interval as f64).abs() < 1.0, "{t}");
        assert!(v["fairness_jain"].as_f64().unwrap() > 0.0);
        assert!(u(&v, "/limits/descriptors_needed") >= 2 * n);
    }
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn pipe_bytes_are_what_the_kernel_accounted_to_the_process() {
    if !std::path::Path::new("/proc/self/io").exists() {
        eprintln!("skipped: no per-process I/O accounting (CONFIG_TASK_IO_ACCOUNTING)");
        return;
    }
    let (v, printed, io) =
        io_accounting(&["swarm", "-n", "50", "-t", "pipe", "-s", "4K", "-d", "0.3"]);
    let (sent, received) = (u(&v, "/bytes_sent"), u(&v, "/bytes_received"));
    assert!(sent > 0);
    assert_eq!(sent, received);
    // Every byte the process wrote is a pipe's, or the report it printed.
    assert_eq!(io["wchar"], sent + printed as u64, "{io:?}");
    // It read the pipes, and a few small files (/proc/meminfo, sysctls).
    assert!(
        io["rchar"] >= received && io["rchar"] < received + (64 << 10),
        "{io:?}"
    );
}

#[test]
fn pingpong_pairs_count_round_trips_and_every_answer_byte() {
    let sb = Sandbox::new();
    for t in ["tcp", "socketpair", "pipe", "unix-seqpacket"] {
        let started = Instant::now();
        let (code, v, err) = swarm(
            &sb,
            &[
                "-n", "64", "-t", t, "-w", "pingpong", "-s", "100", "-d", "0.3",
            ],
        );
        assert_eq!(code, Some(0), "{t}: {err}");
        // It ends when every pair has, not at the drain's bound (5 s).
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{t}: {:?}",
            started.elapsed()
        );
        assert_eq!(v["errors"], serde_json::json!({}), "{t}");
        let trips = u(&v, "/round_trips");
        assert!(trips >= 64, "{t}: {trips}");
        // Both ways counted: what the askers wrote, the answering ends read; every
        // counted round trip is a whole request and a whole answer.
        assert_eq!(u(&v, "/bytes_sent"), u(&v, "/bytes_received"), "{t}");
        assert!(u(&v, "/bytes_sent") >= trips * 100, "{t}");
        assert_eq!(u(&v, "/bytes_received_in_interval"), trips * 200, "{t}");
        let p50 = u(&v, "/round_trip_ns/p50");
        assert!(p50 > 0 && p50 <= u(&v, "/round_trip_ns/max"), "{t}");
        let per = &v["per_pair"];
        assert!(per["min"].as_f64() <= per["p50"].as_f64(), "{t}");
    }
}

#[test]
fn pingpong_messages_larger_than_a_pipe_wait_for_room_and_still_arrive_whole() {
    // 256 KiB requests into 64 KiB pipes: every write meets a full pipe and waits for it
    // to become writable again, on the asking side and the answering side.
    let sb = Sandbox::new();
    for t in ["pipe", "socketpair"] {
        let (code, v, err) = swarm(
            &sb,
            &[
                "-n", "8", "-t", t, "-w", "pingpong", "-s", "256K", "-d", "0.3",
            ],
        );
        assert_eq!(code, Some(0), "{t}: {err}");
        assert_eq!(v["errors"], serde_json::json!({}), "{t}");
        let trips = u(&v, "/round_trips");
        assert!(trips >= 8, "{t}: {trips}");
        assert_eq!(u(&v, "/bytes_sent"), u(&v, "/bytes_received"), "{t}");
        assert_eq!(
            u(&v, "/bytes_received_in_interval"),
            trips * 2 * (256 << 10),
            "{t}"
        );
    }
}

#[test]
fn descriptor_limits_are_raised_to_the_hard_one_or_named_when_they_cannot_fit() {
    let sb = Sandbox::new();
    if !common::has_prlimit() {
        return;
    }
    let run = |limit: &str, n: &str| {
        sb.std_cmd("prlimit")
            .arg(format!("--nofile={limit}"))
            .arg(assert_cmd::cargo::cargo_bin("sockbench"))
            .args([
                "swarm",
                "-n",
                n,
                "-t",
                "socketpair",
                "-d",
                "0.2",
                "--format",
                "json",
            ])
            .output()
            .unwrap()
    };
    // Soft 100, hard 1000: 200 pairs need 416; raised, and said so.
    let out = run("100:1000", "200");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            u(&v, "/limits/nofile_soft_before"),
            u(&v, "/limits/nofile_soft")
        ),
        (100, 1000)
    );
    assert!(v["notes"][0]
        .as_str()
        .unwrap()
        .contains("raised the soft descriptor limit"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("raised the soft descriptor limit"));
    // Hard 300: 200 pairs cannot fit (unless this process may raise hard limits).
    if u(&v, "/limits/nofile_hard") == 1000 {
        let out = run("300:300", "200");
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("hard limit of 300") && err.contains("-n 142"),
            "{err}"
        );
    }
}

#[test]
fn ctrl_c_stops_it_promptly_while_setting_up_and_while_running() {
    let n = most_pairs(9_000).to_string();
    let sb = Sandbox::new();
    for (after, phase) in [
        (Duration::from_millis(50), "setup"),
        (Duration::from_millis(1500), "run"),
    ] {
        let child = sb
            .sockbench()
            .args([
                "swarm", "-n", &n, "-t", "tcp", "-d", "30", "--format", "json", "-q",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(after);
        let t = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "{phase}: {:?}",
            t.elapsed()
        );
        assert_eq!(
            out.status.code(),
            Some(130),
            "{phase}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["interrupted"], true, "{phase}");
    }
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn bad_input_is_a_usage_error() {
    let sb = Sandbox::new();
    for (args, says) in [
        (&["-t", "mq"][..], "unix, unix-seqpacket, tcp"),
        (&["-n", "0"][..], "-n must be"),
        (&["-s", "abc"][..], "--size"),
        (&["-d", "0"][..], "--duration"),
        (&["-w", "rate"][..], "rate"),
        (
            &["--export-csv", "x.csv"][..],
            "--export-csv is not available",
        ),
    ] {
        let out = sb.cmd().arg("swarm").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // --export-json writes the same document the table was made from.
    let path = sb.path().join("swarm.json");
    let out = sb
        .cmd()
        .args([
            "swarm",
            "-n",
            "3",
            "-t",
            "socketpair",
            "-d",
            "0.1",
            "-q",
            "--export-json",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        (v["document"].as_str(), v["schema_version"].as_u64()),
        (Some("sockbench-swarm"), Some(1))
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("3 socketpair pairs"));
    std::fs::remove_file(&path).unwrap();
}

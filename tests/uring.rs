//! The io-uring engine at full speed (issue 15): `--batch` keeps several writes in flight
//! and moves exactly the bytes asked for, as both sides count them; strace sees far fewer
//! io_uring_enter calls than writes; the stream receiver's multishot receive and the
//! registered buffers show in the report; `--sqpoll`'s kernel thread has its CPU counted,
//! checked against the CPU the kernel charged the whole process; what cannot work is
//! refused with exit status 2. Every test skips, saying why, where io_uring is
//! unavailable.

use std::collections::HashMap;

use crate::common::{f, json, u, Sandbox};
use serde_json::Value;

/// Whether io_uring works here (asked of sockbench itself, which says why not).
fn io_uring() -> bool {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "stream", "-t", "pipe", "-e", "io-uring", "-n", "1", "-w", "0", "-q",
        ])
        .output()
        .unwrap();
    if !out.status.success() {
        eprintln!(
            "skipped: io_uring is unavailable here: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out.status.success()
}

fn results(v: &Value) -> &Vec<Value> {
    v["body"]["results"].as_array().unwrap()
}

#[test]
fn a_batch_moves_exactly_the_bytes_asked_for_counted_on_both_sides() {
    if !io_uring() {
        return;
    }
    let sb = Sandbox::new();
    // 10 MB + 1000 bytes: 152 whole 64 KiB messages and a short last one.
    let v = json(
        &sb,
        &[
            "stream",
            "-t",
            "tcp,unix,pipe,socketpair",
            "-e",
            "io-uring",
            "--batch",
            "8",
            "--bytes",
            "10001000",
            "-r",
            "1",
            "-w",
            "0",
        ],
    );
    for r in results(&v) {
        let t = r["transport"].as_str().unwrap();
        assert_eq!(u(r, "/bytes_sent"), 10_001_000, "{t}");
        assert_eq!(u(r, "/bytes_received"), 10_001_000, "{t}");
        let run = &r["runs"][0];
        // 153 messages in batches of 8 (the short one alone): 20 submissions.
        assert_eq!(u(run, "/sender/calls"), 20, "{t}: {}", run["sender"]);
        assert!(f(run, "/sender/messages_per_call") > 7.0, "{t}");
        assert_eq!(u(run, "/sender/io_uring/submissions"), 20, "{t}");
        let multishot = u(run, "/receiver/io_uring/multishot_completions");
        if t == "pipe" {
            // A pipe is read once per submission, into the buffer registered when it
            // came back.
            assert_eq!(multishot, 0, "{t}");
            assert!(u(run, "/receiver/io_uring/fixed_operations") > 0, "{t}");
            let notes = run["receiver"]["io_uring"]["notes"].to_string();
            assert!(notes.contains("sockets only"), "{notes}");
        } else {
            assert!(multishot > 0, "{t}: {}", run["receiver"]);
        }
        assert_eq!(r["options"]["batch"], 8, "{t}");
    }
}

#[test]
fn datagrams_go_several_per_submission() {
    if !io_uring() {
        return;
    }
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "stream",
            "-t",
            "unix-dgram",
            "-s",
            "1K",
            "-e",
            "io-uring",
            "--batch",
            "16",
            "-n",
            "1600",
            "-r",
            "1",
            "-w",
            "0",
        ],
    );
    let r = &results(&v)[0];
    assert_eq!(u(r, "/messages_sent"), 1600);
    assert_eq!(u(r, "/messages_received"), 1600);
    let run = &r["runs"][0];
    assert_eq!(u(run, "/sender/calls"), 100, "{}", run["sender"]);
    // The receiver takes what is queued: several per submission, never more than 16.
    let per = f(run, "/receiver/messages_per_call");
    assert!(per > 1.0 && per <= 16.0, "{}", run["receiver"]);
}

/// io_uring_enter calls per thread and the operations each submitted (its second
/// argument), from `strace -f -e trace=io_uring_enter`.
fn enters(log: &str) -> HashMap<String, (u64, u64)> {
    let mut per: HashMap<String, (u64, u64)> = HashMap::new();
    for l in log.lines() {
        let Some((pid, call)) = l.split_once(' ') else {
            continue;
        };
        let Some(args) = call.trim_start().strip_prefix("io_uring_enter(") else {
            continue;
        };
        let submitted: u64 = args
            .split(',')
            .nth(1)
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or(0);
        let e = per.entry(pid.to_string()).or_default();
        e.0 += 1;
        e.1 += submitted;
    }
    per
}

#[test]
fn strace_sees_far_fewer_io_uring_enters_than_writes() {
    if !io_uring() {
        return;
    }
    if !crate::common::have("strace") {
        return;
    }
    let sb = Sandbox::new();
    let log = sb.path().join("strace.txt");
    let out = sb
        .std_cmd("strace")
        .args(["-f", "-e", "trace=io_uring_enter", "-o"])
        .arg(&log)
        .arg(assert_cmd::cargo::cargo_bin("sockbench"))
        .args([
            "stream", "-t", "unix", "-s", "4K", "-e", "io-uring", "--batch", "32", "-n", "8000",
            "-r", "1", "-w", "0", "-q",
        ])
        .output()
        .unwrap();
    if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("ptrace") {
        eprintln!("skipped: ptrace is not permitted here");
        return;
    }
    crate::common::assert_success(&out);
    let per = enters(&std::fs::read_to_string(&log).unwrap());
    // The sender is the thread that submitted the 8000 writes.
    let (calls, submitted) = per
        .values()
        .copied()
        .max_by_key(|&(_, s)| s)
        .expect("io_uring_enter calls");
    assert!(submitted >= 8000, "{per:?}");
    assert!(
        calls <= 8000 / 32 + 20,
        "{calls} io_uring_enter calls for 8000 writes: {per:?}"
    );
}

#[test]
fn sqpoll_counts_its_kernel_threads_cpu_within_what_the_process_was_charged() {
    if !io_uring() {
        return;
    }
    use nix::sys::resource::{getrusage, UsageWho};
    let cpu = || {
        let r = getrusage(UsageWho::RUSAGE_CHILDREN).unwrap();
        let s = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
        s(r.user_time()) + s(r.system_time())
    };
    let sb = Sandbox::new();
    let before = cpu();
    let v = json(
        &sb,
        &[
            "stream", "-t", "unix", "-e", "io-uring", "--sqpoll", "-d", "0.4s", "-r", "1", "-w",
            "0",
        ],
    );
    // The whole process, its io_uring kernel threads included, as the kernel charged
    // it: what the test's children used (this test runs no other child meanwhile,
    // except the io_uring probe above, which ended before `before`).
    let charged = cpu() - before;
    let r = &results(&v)[0];
    assert_eq!(r["options"]["sqpoll"], true);
    let run = &r["runs"][0];
    let mut roles_cpu = 0.0;
    for side in ["sender", "receiver"] {
        let s = &run[side];
        assert_eq!(s["io_uring"]["sqpoll"], true, "{s}");
        let sq = f(s, "/sqpoll_cpu_seconds");
        assert!(
            sq > 0.0,
            "{side}: a busy ring's polling thread used no CPU: {s}"
        );
        assert!(
            (f(s, "/io_uring/sqpoll_cpu_ns") / 1e9 - sq).abs() < 1e-6,
            "{s}"
        );
        // Counted in the role's CPU, as kernel time.
        assert!(f(s, "/cpu_seconds") >= sq, "{s}");
        assert!(f(s, "/cpu_system_seconds") >= sq, "{s}");
        roles_cpu += f(s, "/cpu_seconds");
    }
    // The roles (threads and their polling threads) cannot have used more than the
    // process was charged (tick-based rusage: 10 ms of slack per thread).
    assert!(
        roles_cpu <= charged + 0.05,
        "roles {roles_cpu} s > process {charged} s"
    );
}

#[test]
fn what_cannot_batch_is_refused_with_the_reason() {
    let sb = Sandbox::new();
    for (args, why) in [
        (
            &["stream", "-t", "tcp", "-e", "blocking", "--batch", "8"][..],
            "needs --engine io-uring",
        ),
        (
            &[
                "stream", "-t", "udp", "-e", "blocking", "--batch", "8", "--send", "splice",
            ],
            "--batch 8 with --send splice",
        ),
        (
            &["stream", "-t", "unix", "-e", "blocking", "--sqpoll"],
            "--sqpoll applies to the io-uring engine only",
        ),
    ] {
        sb.cmd()
            .args(args)
            .args(["-n", "10"])
            .assert()
            .code(2)
            .stderr(predicates::str::contains(why));
    }
    // Under `all`, a combination that cannot work is a skip for that scenario alone.
    if !io_uring() {
        return;
    }
    let v = json(
        &sb,
        &[
            "stream", "-t", "tcp", "-e", "all", "--batch", "4", "-n", "100", "-r", "1", "-w", "0",
        ],
    );
    let ran: Vec<&str> = results(&v)
        .iter()
        .map(|r| r["engine"].as_str().unwrap())
        .collect();
    assert_eq!(ran, ["io-uring"]);
    assert!(v["body"]["skipped"]
        .to_string()
        .contains("sendmmsg is for datagrams"));
}

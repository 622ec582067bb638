//! `sockbench swarm`: thousands of pairs at once on two epoll threads, counted exactly
//! (against the kernel's I/O accounting of the process), limits checked first, and
//! Ctrl-C prompt in every phase. Over TCP in a private network namespace, each pair is
//! told apart by its own port: the accepting side's counts and each pair's share
//! (percentiles over the pairs, Jain's index) are checked against what the kernel
//! carried from each port, counted by one iptables rule per port.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::{f, io_accounting, json_in_netns, snmp, sockets_of, u, Sandbox, RULE_COUNTS};
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

/// Held by the tests of thousands of pairs, so that they do not run beside each other:
/// each must get its roles a CPU within the run's 50 ms grace after Ctrl-C.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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
    let _alone = alone();
    let n = most_pairs(10_000);
    let sb = Sandbox::new();
    for t in ["unix", "tcp"] {
        let (code, v, err) = swarm(&sb, &["-n", &n.to_string(), "-t", t, "-d", "0.5"]);
        assert_eq!(code, Some(0), "{t}: {err}");
        assert_eq!(u(&v, "/body/pairs"), n, "{t}");
        assert_eq!(v["body"]["errors"], serde_json::json!({}), "{t}");
        assert_eq!(
            u(&v, "/body/bytes_sent"),
            u(&v, "/body/bytes_received"),
            "{t}"
        );
        // What was still in flight at the interval's end is read in the drain, not
        // counted in the interval (usually some bytes; none if the readers had caught up).
        let in_interval = u(&v, "/body/bytes_received_in_interval");
        assert!(
            in_interval > 0 && in_interval <= u(&v, "/body/bytes_received"),
            "{t}"
        );
        let bps = v["body"]["bits_per_second"].as_f64().unwrap();
        let secs = v["body"]["duration_seconds"].as_f64().unwrap();
        assert!((bps * secs / 8.0 - in_interval as f64).abs() < 1.0, "{t}");
        assert!(v["body"]["fairness_jain"].as_f64().unwrap() > 0.0);
        assert!(u(&v, "/body/limits/descriptors_needed") >= 2 * n);
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
    let (sent, received) = (u(&v, "/body/bytes_sent"), u(&v, "/body/bytes_received"));
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
                "-n", "64", "-t", t, "-W", "pingpong", "-s", "100", "-d", "0.3",
            ],
        );
        assert_eq!(code, Some(0), "{t}: {err}");
        // It ends when every pair has, not at the drain's bound (5 s).
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{t}: {:?}",
            started.elapsed()
        );
        assert_eq!(v["body"]["errors"], serde_json::json!({}), "{t}");
        let trips = u(&v, "/body/round_trips");
        assert!(trips >= 64, "{t}: {trips}");
        // Both ways counted: what the askers wrote, the answering ends read; every
        // counted round trip is a whole request and a whole answer.
        assert_eq!(
            u(&v, "/body/bytes_sent"),
            u(&v, "/body/bytes_received"),
            "{t}"
        );
        assert!(u(&v, "/body/bytes_sent") >= trips * 100, "{t}");
        assert_eq!(
            u(&v, "/body/bytes_received_in_interval"),
            trips * 200,
            "{t}"
        );
        let p50 = u(&v, "/body/round_trip_ns/p50");
        assert!(p50 > 0 && p50 <= u(&v, "/body/round_trip_ns/max"), "{t}");
        let per = &v["body"]["per_pair"];
        assert!(per["min"].as_f64() <= per["p50"].as_f64(), "{t}");
    }
}

/// The first local port of a namespace's swarm: the range holds two per pair (the
/// listener's and every connection's among them; the kernel's search for a free port
/// does not try every port of a tight range).
const FIRST_PORT: u64 = 40000;

/// The namespace's local ports for `pairs` pairs.
fn ports(pairs: u64) -> std::ops::RangeInclusive<u64> {
    FIRST_PORT..=FIRST_PORT + 2 * pairs
}

/// Per port of the namespace's range: a rule counting every packet that leaves it but
/// the handshake's SYN and SYN-ACK (`data_P`: with timestamps each has a 52-byte
/// header, so the payload is its bytes less 52 per packet; no length match, which
/// loopback's packets of more than 64 KiB would escape), and one counting the SYNs that
/// leave it (`conn_P`: a pair's connecting end). No speculative retransmission (tail-loss
/// probes, a timeout of less than a second) adds packets no pair wrote, and small send
/// buffers keep the pairs' packets few enough for loopback's queue.
fn per_port_setup(pairs: u64) -> String {
    let mut setup = vec![
        format!(
            "sysctl -qw net.ipv4.ip_local_port_range='{} {}'",
            ports(pairs).start(),
            ports(pairs).end()
        ),
        "sysctl -qw net.ipv4.tcp_early_retrans=0".into(),
        "{ sysctl -qw net.ipv4.tcp_rto_min_us=1000000 2>/dev/null || true; }".into(),
        "sysctl -qw net.ipv4.tcp_wmem='4096 16384 65536'".into(),
    ];
    for p in ports(pairs) {
        setup.push(crate::common::rule(
            "OUTPUT",
            &format!("-p tcp --sport {p} --tcp-flags SYN NONE"),
            &format!("data_{p}"),
        ));
        setup.push(crate::common::rule(
            "OUTPUT",
            &format!("-p tcp --sport {p} --syn"),
            &format!("conn_{p}"),
        ));
    }
    setup.join("; ")
}

/// What the kernel counted in the namespace: the rules' counts, the connections opened
/// each way, and segments sent again.
fn kernel_counts() -> String {
    format!(
        "{RULE_COUNTS}; {}; {}; {}",
        snmp("Tcp", "PassiveOpens", "passive_opens"),
        snmp("Tcp", "ActiveOpens", "active_opens"),
        snmp("Tcp", "RetransSegs", "retrans")
    )
}

/// The pairs as the kernel carried them.
struct Carried {
    /// Payload bytes that left each pair's connecting end (one entry per pair).
    connecting: Vec<u64>,
    /// Payload bytes that left every other port: the accepted ends' (the listener's).
    accepted: u64,
    /// Whether no segment was sent twice: then the payload is exactly what was written;
    /// else (loopback's queue, shared by every namespace, overflowed and dropped some)
    /// at least that.
    exact: bool,
}

/// The per-port counts of `pairs` pairs: `pairs` ports sent one SYN each (the
/// connecting ends), the accepting side accepted as many connections as were opened. A
/// connecting end's payload is what its pair wrote after the pair's number (4 bytes,
/// sent first so the two sides order their ends alike).
fn carried(k: &HashMap<String, u64>, pairs: u64) -> Carried {
    let payload = |p: &u64| k[&format!("data_{p}_bytes")] - 52 * k[&format!("data_{p}")];
    let (connecting, other): (Vec<u64>, Vec<u64>) =
        ports(pairs).partition(|p| k[&format!("conn_{p}")] == 1);
    assert_eq!(connecting.len() as u64, pairs, "a port per pair: {k:?}");
    assert_eq!(k["passive_opens"], pairs, "{k:?}");
    assert_eq!(k["active_opens"], pairs, "{k:?}");
    let exact = k["retrans"] == 0;
    if !exact {
        eprintln!(
            "note: the kernel sent {} segments again (loopback's queue overflowed): the \
             payload it carried is at least what the pairs wrote, not exactly",
            k["retrans"]
        );
    }
    Carried {
        connecting: connecting.iter().map(|p| payload(p) - 4).collect(),
        accepted: other.iter().map(payload).sum(),
        exact,
    }
}

/// `got` is what the kernel carried (`exact`), or no more than it.
fn assert_carried(got: u64, carried: u64, exact: bool, what: &str) {
    if exact {
        assert_eq!(got, carried, "{what}");
    } else {
        assert!(got <= carried, "{what}: {got} > {carried}");
    }
}

/// The nearest-rank percentile `p` (0 to 100) of some counts, as the swarm's document
/// defines its per-pair figures (computed here, not by sockbench).
fn nearest_rank(counts: &[u64], p: f64) -> u64 {
    let mut sorted = counts.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The per-pair figures' keys and their percentiles.
const SPREAD: [(&str, f64); 4] = [("min", 0.0), ("p50", 50.0), ("p99", 99.0), ("max", 100.0)];

#[test]
fn the_accepting_side_read_what_the_kernel_carried_from_each_pair() {
    let sb = Sandbox::new();
    let pairs = 16;
    let Some((v, k)) = json_in_netns(
        &sb,
        &per_port_setup(pairs),
        &["swarm", "-n", "16", "-t", "tcp", "-s", "16K", "-d", "0.3"],
        &kernel_counts(),
    ) else {
        return;
    };
    assert_eq!(v["body"]["errors"], serde_json::json!({}), "{v}");
    assert_eq!(u(&v, "/body/pairs"), pairs);
    let c = carried(&k, pairs);
    // Every byte a connecting end sent, the accepting ends read (drain included), and
    // nothing went the other way.
    let total: u64 = c.connecting.iter().sum();
    let received = u(&v, "/body/bytes_received");
    assert_carried(received, total, c.exact, "read by the accepting ends");
    assert_eq!(u(&v, "/body/bytes_sent"), received);
    assert_eq!(c.accepted, 0, "{k:?}");
    // What each accepting end read within the interval is at most what its pair's
    // connecting end sent: so is each percentile over the pairs, rank by rank.
    let secs = f(&v, "/body/duration_seconds");
    let in_interval = u(&v, "/body/bytes_received_in_interval");
    assert!(in_interval > 0 && in_interval <= received);
    for (key, p) in SPREAD {
        let read = f(&v, &format!("/body/per_pair/{key}")) * secs / 8.0;
        let sent = nearest_rank(&c.connecting, p) as f64;
        assert!(
            read <= sent * (1.0 + 1e-9) && read >= 0.0,
            "{key}: a pair read {read} bytes in the interval, the kernel carried {sent}: {:?}",
            c.connecting
        );
    }
    // The pairs' mean lies within their spread.
    let mean = in_interval as f64 * 8.0 / secs / pairs as f64;
    assert!(f(&v, "/body/per_pair/min") <= mean * (1.0 + 1e-9));
    assert!(f(&v, "/body/per_pair/max") >= mean * (1.0 - 1e-9));
}

/// Jain's fairness index, computed here: (sum x)^2 / (n * sum x^2).
fn jain(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    sum * sum / (xs.len() as f64 * xs.iter().map(|x| x * x).sum::<f64>())
}

#[test]
fn each_pairs_round_trips_are_the_requests_the_kernel_carried_from_its_port() {
    let sb = Sandbox::new();
    let (pairs, size) = (16, 100);
    let Some((v, k)) = json_in_netns(
        &sb,
        &per_port_setup(pairs),
        &[
            "swarm", "-n", "16", "-t", "tcp", "-W", "pingpong", "-s", "100", "-d", "0.3",
        ],
        &kernel_counts(),
    ) else {
        return;
    };
    assert_eq!(v["body"]["errors"], serde_json::json!({}), "{v}");
    let c = carried(&k, pairs);
    let requests: Vec<u64> = c.connecting.iter().map(|&b| b / size).collect();
    let asked: u64 = requests.iter().sum();
    // The accepting side read every request and answered each, the last included.
    let received = u(&v, "/body/bytes_received");
    assert_carried(received, asked * size, c.exact, "requests read");
    assert_carried(received, c.accepted, c.exact, "answers sent");
    assert_eq!(u(&v, "/body/bytes_sent"), received);
    if !c.exact {
        return; // what follows needs each pair's exact count
    }
    assert!(
        c.connecting.iter().all(|b| b % size == 0),
        "whole requests: {k:?}"
    );
    // A pair counts the round trips it completed within the interval: every request it
    // sent but the one in flight when the interval ended, whose answer is read after.
    // (A pair whose turn ran out just as it completed one, its next turn coming after
    // the end, sent no other: its count is all it sent. The total says how many did.)
    let trips = u(&v, "/body/round_trips");
    assert!(
        (asked - pairs..=asked).contains(&trips),
        "{trips} round trips counted, {asked} requests sent by {pairs} pairs"
    );
    assert_eq!(u(&v, "/body/bytes_received_in_interval"), trips * 2 * size);
    let counted: Vec<u64> = requests.iter().map(|r| r - 1).collect();
    let secs = f(&v, "/body/duration_seconds");
    let exact = trips == asked - pairs;
    if !exact {
        eprintln!(
            "note: {} pairs' turns ran out as the interval ended: each figure is checked \
             between bounds",
            trips - (asked - pairs)
        );
    }
    for (key, p) in SPREAD {
        let figure = f(&v, &format!("/body/per_pair/{key}"));
        let (lo, hi) = (
            nearest_rank(&counted, p) as f64 / secs,
            nearest_rank(&requests, p) as f64 / secs,
        );
        if exact {
            assert!(
                (figure - lo).abs() <= lo * 1e-12,
                "{key}: {figure} round trips/s, the kernel's counts give {lo}: {requests:?}"
            );
        } else {
            assert!(
                figure >= lo * (1.0 - 1e-12) && figure <= hi * (1.0 + 1e-12),
                "{key}: {figure} round trips/s, the kernel's counts give {lo} to {hi}: {requests:?}"
            );
        }
    }
    if exact {
        let each: Vec<f64> = counted.iter().map(|&c| c as f64 / secs).collect();
        let want = jain(&each);
        assert!(
            (f(&v, "/body/fairness_jain") - want).abs() < 1e-9,
            "{want}: {v}"
        );
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
                "-n", "8", "-t", t, "-W", "pingpong", "-s", "256K", "-d", "0.3",
            ],
        );
        assert_eq!(code, Some(0), "{t}: {err}");
        assert_eq!(v["body"]["errors"], serde_json::json!({}), "{t}");
        let trips = u(&v, "/body/round_trips");
        assert!(trips >= 8, "{t}: {trips}");
        assert_eq!(
            u(&v, "/body/bytes_sent"),
            u(&v, "/body/bytes_received"),
            "{t}"
        );
        assert_eq!(
            u(&v, "/body/bytes_received_in_interval"),
            trips * 2 * (256 << 10),
            "{t}"
        );
    }
}

#[test]
fn descriptor_limits_are_raised_to_the_hard_one_or_named_when_they_cannot_fit() {
    let sb = Sandbox::new();
    if !crate::common::has_prlimit() {
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
            u(&v, "/body/limits/nofile_soft_before"),
            u(&v, "/body/limits/nofile_soft")
        ),
        (100, 1000)
    );
    assert!(v["warnings"][0]
        .as_str()
        .unwrap()
        .contains("raised the soft descriptor limit"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("raised the soft descriptor limit"));
    // Hard 300: 200 pairs cannot fit (unless this process may raise hard limits).
    if u(&v, "/body/limits/nofile_hard") == 1000 {
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
    let _alone = alone();
    let n = most_pairs(9_000).to_string();
    let sb = Sandbox::new();
    let pairs: usize = n.parse().unwrap();
    for (after, phase, placement) in [
        (Duration::from_millis(50), "setup", "threads"),
        (Duration::from_millis(300), "run", "threads"),
        // The child is told at once, so what both sides measured is kept.
        (Duration::from_millis(300), "run", "processes"),
    ] {
        let child = sb
            .sockbench()
            .args([
                "swarm", "-n", &n, "-t", "tcp", "-d", "30", "--format", "json", "-q",
            ])
            .args(["--placement", placement])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if phase == "run" {
            // Every pair set up: its ends open here (one of each pair with processes).
            let here = if placement == "threads" {
                2 * pairs
            } else {
                pairs
            };
            let until = Instant::now() + Duration::from_secs(60);
            while sockets_of(child.id()) < here {
                assert!(
                    Instant::now() < until,
                    "{placement}: the pairs never came up"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
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
        // Cut short, not thrown away: the run's pairs and what they moved, when its roles
        // reported within the grace after Ctrl-C (a CPU hog beside the test can keep them
        // from it: then the run is dropped, and says nothing it did not measure).
        if phase == "run" && u(&v, "/body/pairs") > 0 {
            assert_eq!(v["body"]["placement"], placement);
            assert!(u(&v, "/body/bytes_received") > 0, "{placement}: {v}");
            assert!(f(&v, "/body/duration_seconds") > 0.0, "{placement}: {v}");
        }
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
        (&["-W", "rate"][..], "rate"),
        // -w is --warmup wherever it is taken; swarm measures once every pair is set up.
        (&["-w", "stream"][..], "-w"),
        // A flag of the measuring commands only: refused, not accepted and ignored.
        (&["--by-placement"][..], "--by-placement"),
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
        (v["kind"].as_str(), v["schema_version"].as_u64()),
        (
            Some("swarm"),
            Some(u64::from(sockbench::report::SCHEMA_VERSION))
        )
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("3 socketpair pairs"));
    std::fs::remove_file(&path).unwrap();
}

/// A run after the first that fails fails the command (exit 1, the document's error
/// names which run), and the runs before it are still the report.
#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test build: cargo test --features test-hooks"
)]
fn a_later_run_that_fails_fails_the_command_and_keeps_the_runs_before_it() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .env("SOCKBENCH_TEST_FAULT", "later-run-fails")
        .args([
            "swarm", "-n", "4", "-d", "0.1", "--runs", "3", "--format", "json", "-q",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"], "run 2 of 3 failed: test fault", "{v}");
    assert_eq!(v["body"]["pairs"], 4, "the first run is the report: {v}");
    assert!(v["body"]["bits_per_second"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(
        err.matches("run 2 of 3 failed").count(),
        1,
        "said once: {err}"
    );
}

/// The children of `pid` (every thread's).
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

#[test]
fn with_placement_processes_the_receiving_ends_are_in_a_child_and_every_byte_is_counted() {
    let _alone = alone();
    let sb = Sandbox::new();
    let pairs = 200;
    let child = sb
        .sockbench()
        .args([
            "swarm",
            "-n",
            &pairs.to_string(),
            "-t",
            "unix",
            "-d",
            "3",
            "--placement",
            "processes",
            "--format",
            "json",
            "-q",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // While it runs, the kernel says whose the pairs' ends are: one end of each pair in
    // this process, the other in its child.
    let mut seen = None;
    let until = Instant::now() + Duration::from_secs(20);
    while seen.is_none() && Instant::now() < until {
        let kids = children_of(pid);
        if let Some(&kid) = kids.iter().find(|&&k| sockets_of(k) >= pairs) {
            seen = Some((sockets_of(pid), sockets_of(kid)));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let (parent, kid) = seen.expect("a child holding the receiving ends");
    assert!(kid >= pairs, "the child holds {kid} sockets");
    // Both ends of every pair in the parent would be twice as many.
    assert!(
        (pairs..pairs + 20).contains(&parent),
        "the parent holds {parent} sockets for {pairs} pairs"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["body"]["placement"], "processes", "{v}");
    assert_eq!(u(&v, "/body/pairs"), pairs as u64);
    assert_eq!(v["body"]["errors"], serde_json::json!({}), "{v}");
    let sent = u(&v, "/body/bytes_sent");
    assert!(sent > 0);
    assert_eq!(u(&v, "/body/bytes_received"), sent, "{v}");
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn intervals_add_up_to_what_the_watched_ends_counted() {
    let sb = Sandbox::new();
    // What the run's figures are made of: a stream's bytes read within the interval (the
    // drain after it is not the last interval's), a pingpong's round trips; with the
    // receiving ends in a child, this process's writers.
    let in_interval = |v: &Value| u(v, "/body/bytes_received_in_interval");
    let round_trips = |v: &Value| u(v, "/body/round_trips") * u(v, "/body/size_bytes");
    let written = |v: &Value| u(v, "/body/bytes_sent");
    type Counted<'a> = &'a dyn Fn(&Value) -> u64;
    let cases: [(&str, Counted); 3] = [
        ("-n 20 -t unix -d 0.5 -i 0.1", &in_interval),
        (
            "-n 20 -t socketpair -W pingpong -d 0.5 -i 0.1",
            &round_trips,
        ),
        ("-n 20 -t tcp -d 0.5 -i 0.1 --placement processes", &written),
    ];
    for (args, counted) in cases {
        let args: Vec<&str> = args.split_whitespace().collect();
        let (code, v, err) = swarm(&sb, &args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        let intervals = v["body"]["intervals"].as_array().unwrap();
        assert!(intervals.len() >= 3, "{args:?}: {v}");
        let sum: u64 = intervals.iter().map(|i| i["bytes"].as_u64().unwrap()).sum();
        assert_eq!(sum, counted(&v), "{args:?}: {v}");
        // Back to back from the measured interval's start.
        assert_eq!(intervals[0]["start_seconds"], 0.0);
        for w in intervals.windows(2) {
            assert_eq!(w[0]["end_seconds"], w[1]["start_seconds"], "{args:?}");
        }
        let end = intervals.last().unwrap()["end_seconds"].as_f64().unwrap();
        assert!((0.45..2.0).contains(&end), "{args:?}: ends at {end}");
    }
    // Without --interval, none.
    let (_, v, _) = swarm(&sb, &["-n", "2", "-d", "0.1"]);
    assert!(v["body"].get("intervals").is_none(), "{v}");
}

#[test]
fn placements_that_cannot_apply_are_usage_errors() {
    let sb = Sandbox::new();
    for t in ["socketpair", "pipe"] {
        let out = sb
            .cmd()
            .args(["swarm", "-t", t, "--placement", "processes"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{t}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("inside one process"));
    }
    for args in [&["--server", "localhost"][..], &["-R"], &["--bidir"]] {
        let out = sb.cmd().arg("swarm").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

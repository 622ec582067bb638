//! `--interval`: the lines printed while a run goes and `runs[].intervals` in the JSON.
//! The intervals of a run tile it and add up exactly to its totals; loss per interval
//! adds up to the datagrams a firewall rule dropped; TCP retransmissions per interval
//! (TCP_INFO) against the namespace's own retransmission counter.

use crate::common::{json_in_netns, rule, snmp, u, Sandbox, RULE_COUNTS};
use serde_json::Value;

fn intervals(run: &Value) -> &Vec<Value> {
    run["intervals"].as_array().expect("intervals")
}

/// Every interval of `run` starts where the last ended, the first at 0 and the last at
/// the run's end; their bytes and messages add up to the run's `bytes_key` and
/// `messages_key`; each rate is its counts over its own length.
fn tiles(run: &Value, bytes_key: &str, messages_key: &str) {
    let iv = intervals(run);
    assert!(!iv.is_empty(), "{run}");
    assert_eq!(iv[0]["start_seconds"].as_f64(), Some(0.0));
    for w in iv.windows(2) {
        assert_eq!(w[0]["end_seconds"], w[1]["start_seconds"], "{iv:?}");
    }
    let end = iv.last().unwrap()["end_seconds"].as_f64().unwrap();
    assert_eq!(end, run["duration_seconds"].as_f64().unwrap());
    let sum = |k: &str| iv.iter().map(|i| u(i, &format!("/{k}"))).sum::<u64>();
    assert_eq!(sum("bytes"), u(run, &format!("/{bytes_key}")), "{iv:?}");
    assert_eq!(
        sum("messages"),
        u(run, &format!("/{messages_key}")),
        "{iv:?}"
    );
    for i in iv {
        let len = i["end_seconds"].as_f64().unwrap() - i["start_seconds"].as_f64().unwrap();
        assert!(len > 0.0, "{i}");
        let bps = u(i, "/bytes") as f64 * 8.0 / len;
        assert!((i["bits_per_second"].as_f64().unwrap() - bps).abs() <= bps * 1e-9 + 1e-9);
        let mps = u(i, "/messages") as f64 / len;
        assert!((i["messages_per_second"].as_f64().unwrap() - mps).abs() <= mps * 1e-9 + 1e-9);
    }
}

#[test]
fn stream_intervals_tile_each_run_add_up_to_it_and_are_printed_as_they_close() {
    let sb = Sandbox::new();
    let json = sb.path().join("iv.json");
    let out = sb
        .sockbench()
        .args([
            "stream", "-t", "tcp,unix", "-d", "1", "-w", "0", "--runs", "2", "-i", "0.25",
        ])
        .args(["-q", "--export-json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    for r in v["body"]["results"].as_array().unwrap() {
        let t = r["transport"].as_str().unwrap();
        let mut total = 0;
        for (n, run) in r["runs"].as_array().unwrap().iter().enumerate() {
            tiles(run, "bytes_received", "messages_received");
            let iv = intervals(run);
            // Ticks at 0.25, 0.5 and 0.75 s, then the last to the end of the 1 s run.
            assert_eq!(iv.len(), 4, "{t} run {n}: {iv:?}");
            for (k, i) in iv.iter().take(3).enumerate() {
                let end = i["end_seconds"].as_f64().unwrap();
                let due = 0.25 * (k + 1) as f64;
                // On time, or late by what a busy 2-CPU machine takes to wake the sampler.
                assert!(end >= due && end < due + 0.15, "{t}: {i}");
                assert_eq!(i["side"], "receiver");
                // TCP_INFO for tcp's sender; nothing to count on a Unix socket.
                assert_eq!(i["retransmits"].is_u64(), t == "tcp", "{i}");
                assert!(i["messages_lost"].is_null());
            }
            let printed = err
                .lines()
                .filter(|l| l.starts_with(&format!("stream {t} 64 KiB run {} ", n + 1)))
                .count();
            assert_eq!(printed, iv.len(), "{err}");
            total += iv.len();
        }
        assert_eq!(total, 8);
    }
    // Lines come in run order: run 1's last before run 2's first.
    let runs: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("stream tcp"))
        .map(|l| &l[..l.find(" run ").unwrap() + 6])
        .collect();
    assert!(runs.windows(2).all(|w| w[0] <= w[1]), "{runs:?}");
}

#[test]
fn pingpong_and_connect_intervals_count_round_trips_and_connections() {
    let sb = Sandbox::new();
    for (args, side) in [
        (&["pingpong", "-t", "tcp", "-d", "0.6"][..], "client"),
        (&["connect", "-t", "tcp", "-d", "0.6"][..], "sender"),
        (
            &["stream", "-t", "tcp", "-n", "20000", "-s", "4K"][..],
            "receiver",
        ),
    ] {
        let mut all = args.to_vec();
        all.extend(["-w", "0", "-i", "0.2"]);
        let v = crate::common::json(&sb, &all);
        let run = &v["body"]["results"][0]["runs"][0];
        match side {
            "sender" => tiles(run, "bytes_sent", "messages_sent"),
            _ => tiles(run, "bytes_received", "messages_received"),
        }
        assert!(intervals(run).iter().all(|i| i["side"] == side), "{run}");
        if side == "client" {
            assert!(intervals(run).len() >= 3, "{run}");
        }
    }
}

#[test]
fn rate_loss_per_interval_adds_up_to_the_runs_loss() {
    // Unpaced 64-byte datagrams on loopback: the receiver's buffer overflows now and
    // then; each interval's loss is the growth of the receivers' sequence gaps.
    let sb = Sandbox::new();
    let v = crate::common::json(
        &sb,
        &[
            "rate", "-t", "udp", "-s", "64", "-n", "200000", "-w", "0", "-i", "0.05", "--runs", "2",
        ],
    );
    for run in v["body"]["results"][0]["runs"].as_array().unwrap() {
        tiles(run, "bytes_received", "messages_received");
        let lost: u64 = intervals(run).iter().map(|i| u(i, "/messages_lost")).sum();
        assert_eq!(lost, u(run, "/messages_lost"), "{run}");
    }
}

#[test]
fn with_a_role_in_another_process_the_intervals_follow_the_one_here() {
    let sb = Sandbox::new();
    let cases: [(&[&str], &str); 5] = [
        // The receiver in the child: the sender's counts, and its retransmissions.
        (&["stream", "-t", "tcp"], "sender"),
        // The sender in the child: the receiver's.
        (&["stream", "-t", "tcp", "--reverse"], "receiver"),
        // pingpong's client in the child: the requests this side echoed.
        (&["pingpong", "-t", "tcp", "--reverse"], "receiver"),
        // connect's dialer in the child: the connections this side accepted.
        (&["connect", "-t", "tcp", "--reverse"], "receiver"),
        // Both ways: the receivers here, of the server-to-client direction.
        (&["stream", "-t", "tcp", "--bidir"], "receiver"),
    ];
    for (args, side) in cases {
        let mut all = args.to_vec();
        all.extend([
            "-d",
            "0.6",
            "-w",
            "0",
            "-i",
            "0.2",
            "--placement",
            "processes",
        ]);
        let v = crate::common::json(&sb, &all);
        let run = &v["body"]["results"][0]["runs"][0];
        let iv = intervals(run);
        assert!(iv.iter().all(|i| i["side"] == side), "{args:?}: {iv:?}");
        // Every interval but the last carries its share: none is empty.
        assert!(iv.len() >= 3, "{args:?}: {iv:?}");
        assert!(iv.iter().all(|i| u(i, "/messages") > 0), "{args:?}: {iv:?}");
        let (bytes, messages) = if args.contains(&"--bidir") {
            let back = &run["directions"][1];
            assert_eq!(back["direction"], "server to client");
            (u(back, "/bytes_received"), u(back, "/messages_received"))
        } else if side == "sender" {
            (u(run, "/bytes_sent"), u(run, "/messages_sent"))
        } else {
            (u(run, "/bytes_received"), u(run, "/messages_received"))
        };
        let sum = |k: &str| iv.iter().map(|i| u(i, &format!("/{k}"))).sum::<u64>();
        assert_eq!(
            (sum("bytes"), sum("messages")),
            (bytes, messages),
            "{args:?}"
        );
        // Retransmissions belong to the senders feeding what is counted: here only when
        // this side sends.
        let retr = iv.iter().all(|i| i["retransmits"].is_u64());
        assert_eq!(retr, side == "sender", "{args:?}: {iv:?}");
    }
}

/// A rule in a private namespace dropping every 10th datagram that carries data.
fn drop_every_tenth() -> String {
    format!(
        "{}; {}",
        rule(
            "INPUT",
            "-p udp -m length --length 29:65535 -m statistic --mode nth --every 10 --packet 0 -j DROP",
            "dropped"
        ),
        rule("INPUT", "-p udp -m length --length 28 -j ACCEPT", "markers"),
    )
}

#[test]
fn rate_intervals_lose_what_the_firewall_dropped_interval_by_interval() {
    let sb = Sandbox::new();
    let Some((v, k)) = json_in_netns(
        &sb,
        &drop_every_tenth(),
        &[
            "rate", "-t", "udp", "-n", "4000", "--rate", "8k", "-w", "0", "-i", "0.1",
        ],
        &format!("{RULE_COUNTS}; {}", snmp("Udp", "RcvbufErrors", "overflow")),
    ) else {
        return;
    };
    let run = &v["body"]["results"][0]["runs"][0];
    tiles(run, "bytes_received", "messages_received");
    let iv = intervals(run);
    assert!(iv.len() >= 4, "{iv:?}");
    let lost: Vec<u64> = iv.iter().map(|i| u(i, "/messages_lost")).collect();
    // The loss is the rule's, 400 of 4000, and whatever the receiving socket could not
    // hold: paced at 8000/s that is nothing, unless the receiver was kept off the CPU for
    // tens of milliseconds (a loaded machine), and then the kernel counted it.
    let overflow = k["overflow"];
    assert_eq!(k["dropped"], 400);
    assert_eq!(lost.iter().sum::<u64>(), 400 + overflow, "{lost:?} {k:?}");
    assert_eq!(u(run, "/messages_lost"), 400 + overflow, "{k:?}");
    if overflow > 0 {
        eprintln!(
            "{overflow} datagrams overflowed the receiver: the per-interval tenths are not checked"
        );
        return;
    }
    // Each full interval (800 sent) lost about a tenth; a datagram in flight at an edge
    // counts in the next interval.
    for (i, l) in iv.iter().zip(&lost).take(iv.len() - 1) {
        let sent = u(i, "/messages") + l;
        assert!((sent / 10).abs_diff(*l) <= 2, "{i}");
    }
}

#[test]
fn tcp_retransmissions_per_interval_are_the_ones_the_kernel_counted() {
    let sb = Sandbox::new();
    // Drop 1 in 50 data segments (never a bare ACK, SYN or FIN: they are short).
    let setup = rule(
        "INPUT",
        "-p tcp -m length --length 1000:65535 -m statistic --mode nth --every 50 --packet 0 -j DROP",
        "dropped",
    );
    let Some((v, k)) = json_in_netns(
        &sb,
        &setup,
        &["stream", "-t", "tcp", "-d", "1", "-w", "0", "-i", "0.25"],
        &format!("{RULE_COUNTS}; {}", snmp("Tcp", "RetransSegs", "retrans")),
    ) else {
        return;
    };
    let run = &v["body"]["results"][0]["runs"][0];
    tiles(run, "bytes_received", "messages_received");
    let ours: u64 = intervals(run).iter().map(|i| u(i, "/retransmits")).sum();
    let kernel = k["retrans"];
    assert!(k["dropped"] >= 10 && kernel >= 10, "{k:?}");
    // The sender reads its socket's count at every interval's end and at its last
    // write; a segment resent after that (the tail, while the receiver drains) is the
    // kernel's only.
    assert!(ours <= kernel, "{ours} > {kernel}");
    assert!(ours * 10 >= kernel * 8, "{ours} of {kernel}");
    assert!(
        intervals(run)
            .iter()
            .filter(|i| u(i, "/retransmits") > 0)
            .count()
            >= 2,
        "{run}"
    );
}

#[test]
fn a_bad_interval_is_a_usage_error_that_says_what_works() {
    let sb = Sandbox::new();
    for (arg, says) in [
        ("abc", "--interval"),
        ("0", "shortest interval"),
        ("1ms", "shortest interval"),
        ("-1", "--interval"),
    ] {
        let out = sb
            .sockbench()
            .args(["stream", "-d", "0.1", "-i", arg])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "-i {arg}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "-i {arg}: {err}");
    }
}

#[test]
fn without_interval_there_are_no_lines_and_no_intervals() {
    let sb = Sandbox::new();
    let out = sb
        .sockbench()
        .args([
            "stream", "-t", "tcp", "-d", "0.2", "-w", "0", "--format", "json", "-q",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["body"]["results"][0]["runs"][0]["intervals"],
        serde_json::json!([])
    );
}

//! `pingpong`: round trips over every transport, the latency distribution, open loop
//! with coordinated-omission correction, histogram export and the delayed-ACK diagnosis.

use crate::common::{json, u, Sandbox};
use serde_json::Value;

fn round_trip(r: &Value) -> &Value {
    &r["latencies"]["round_trip"]
}

#[test]
fn every_transport_echoes_every_request_and_records_every_round_trip() {
    let sb = Sandbox::new();
    let all = "unix,unix-dgram,unix-seqpacket,socketpair,tcp,udp,pipe,fifo,mq,shm";
    let v = json(
        &sb,
        &["pingpong", "-t", all, "-s", "100", "-n", "300", "-w", "0"],
    );
    for r in v["body"]["results"].as_array().unwrap() {
        let t = r["transport"].as_str().unwrap();
        assert!(r["error"].is_null(), "{t}: {}", r["error"]);
        let lost = r["messages_lost"].as_u64().unwrap_or(0);
        assert_eq!(u(r, "/messages_sent"), 300, "{t}");
        assert_eq!(
            u(r, "/messages_received") + lost,
            300,
            "{t}: the server echoed each request"
        );
        let l = round_trip(r);
        assert_eq!(l["count"].as_u64().unwrap() + lost, 300, "{t}");
        let p = |k: &str| l[k].as_u64().unwrap();
        assert!(p("min_ns") > 0 && p("min_ns") <= p("p50_ns"), "{t}");
        assert!(
            p("p50_ns") <= p("p90_ns") && p("p90_ns") <= p("p99_ns"),
            "{t}"
        );
        assert!(
            p("p99_ns") <= p("p99_9_ns") && p("p99_99_ns") <= p("max_ns"),
            "{t}"
        );
        assert!(
            r["cpu_seconds_per_round_trip"].as_f64().unwrap() > 0.0,
            "{t}"
        );
        assert!(r["messages_per_second"].as_f64().unwrap() > 0.0, "{t}");
    }
    assert!(sb.leftovers().is_empty());
}

#[test]
fn open_loop_runs_at_the_requested_rate() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "pingpong",
            "-t",
            "socketpair",
            "-s",
            "64",
            "--rate",
            "2k",
            "-d",
            "0.5",
            "-w",
            "0",
        ],
    );
    let n = u(&v, "/body/results/0/messages_sent") as f64;
    assert!(
        (800.0..=1100.0).contains(&n),
        "{n} requests in 0.5 s at 2000/s"
    );
}

#[test]
fn open_loop_charges_a_stall_to_the_requests_queued_behind_it() {
    // Each round trip stalls ~40 ms (Nagle + delayed ACK) while requests are due every
    // millisecond: timed from when they were due, later requests wait ever longer.
    let sb = Sandbox::new();
    let args = [
        "pingpong", "-t", "tcp", "-s", "64", "--writes", "2", "-n", "20", "-w", "0",
    ];
    let closed = json(&sb, &args);
    let open = json(&sb, &[&args[..], &["--rate", "1k"]].concat());
    let max = |v: &Value| {
        round_trip(&v["body"]["results"][0])["max_ns"]
            .as_u64()
            .unwrap()
    };
    assert!(
        max(&closed) < 200_000_000,
        "closed loop: each round trip is one stall"
    );
    assert!(
        max(&open) > 400_000_000,
        "open loop: the last request waited for all the stalls before it"
    );
}

#[test]
fn tcp_request_in_two_writes_is_diagnosed_as_a_delayed_ack_stall() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "pingpong", "-t", "tcp", "-s", "64", "--writes", "2", "-n", "10", "-w", "0",
        ],
    );
    let r = &v["body"]["results"][0];
    assert!(round_trip(r)["p50_ns"].as_u64().unwrap() > 30_000_000);
    let w: Vec<_> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["kind"] == "delayed-ack")
        .collect();
    assert_eq!(w.len(), 1, "{}", r["warnings"]);
    assert!(w[0]["message"].as_str().unwrap().contains("--nodelay"));

    let v = json(
        &sb,
        &[
            "pingpong",
            "-t",
            "tcp",
            "-s",
            "64",
            "--writes",
            "2",
            "-n",
            "200",
            "-w",
            "0",
            "--nodelay",
        ],
    );
    let r = &v["body"]["results"][0];
    assert!(
        round_trip(r)["p50_ns"].as_u64().unwrap() < 10_000_000,
        "TCP_NODELAY removes the stall"
    );
    assert!(r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|w| w["kind"] != "delayed-ack"));
}

#[test]
fn histogram_export_holds_every_round_trip() {
    let sb = Sandbox::new();
    let csv_path = sb.path().join("rtt.csv");
    let json_path = sb.path().join("rtt.json");
    for p in [&csv_path, &json_path] {
        json(
            &sb,
            &[
                "pingpong",
                "-t",
                "unix,tcp",
                "-s",
                "64",
                "-n",
                "500",
                "-w",
                "0",
                "--histogram",
                p.to_str().unwrap(),
            ],
        );
    }
    let text = std::fs::read_to_string(&csv_path).unwrap();
    let mut rdr = csv::Reader::from_reader(text.as_bytes());
    let total: u64 = rdr
        .records()
        .map(|r| r.unwrap()[6].parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 1000);
    let v: Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    let hs = v["histograms"].as_array().unwrap();
    assert_eq!(hs.len(), 2);
    let count: u64 = hs[1]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_u64().unwrap())
        .sum();
    assert_eq!(count, 500);
}

#[test]
fn split_requests_are_refused_on_message_transports() {
    let sb = Sandbox::new();
    sb.cmd()
        .args(["pingpong", "-t", "udp", "--writes", "2"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("message-based"));
}

#[test]
fn tiny_udp_requests_are_refused_since_late_replies_could_not_be_told_apart() {
    let sb = Sandbox::new();
    sb.cmd()
        .args(["pingpong", "-t", "udp", "-s", "4"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("at least 8 bytes"));
}

#[test]
fn a_slow_schedule_still_ends_at_the_duration() {
    let sb = Sandbox::new();
    for cmd in ["pingpong", "rate"] {
        let t = std::time::Instant::now();
        let v = json(
            &sb,
            &[
                cmd,
                "-t",
                "unix-dgram",
                "--rate",
                "0.5",
                "-d",
                "0.3",
                "-w",
                "0",
            ],
        );
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{cmd} took {:?}",
            t.elapsed()
        );
        assert_eq!(
            u(&v, "/body/results/0/messages_sent"),
            1,
            "{cmd}: one message was due in 0.3 s"
        );
    }
}

#[test]
fn queueing_in_open_loop_is_not_called_a_delayed_ack_stall() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "pingpong", "-t", "tcp", "--rate", "500k", "-d", "0.3", "-w", "0",
        ],
    );
    let warnings = v["body"]["results"][0]["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().all(|w| w["kind"] != "delayed-ack"),
        "{warnings:?}"
    );
}

#[test]
fn udp_loss_splits_into_requests_and_replies_that_add_up_to_the_firewall_count() {
    // Every 10th datagram with a payload is dropped by the kernel's firewall, exactly; the
    // firewall's own counter and a model of the exchange are the oracles.
    let sb = Sandbox::new();
    let Some(out) = crate::common::in_netns(
        &sb,
        "iptables -A INPUT -p udp -m length --length 29:65535 -m statistic --mode nth --every 10 --packet 0 -j DROP",
        &["pingpong", "-t", "udp", "-n", "100", "-w", "0", "-q", "--format", "json"],
        "wait $SB_PID",
        "iptables -L INPUT -v -x -n | awk '/DROP/ {print $1}'",
    ) else {
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let dropped: u64 = err.rsplit("---\n").next().unwrap().trim().parse().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["body"]["results"][0];
    let (sent, received, lost) = (
        crate::common::u(r, "/messages_sent"),
        crate::common::u(r, "/messages_received"),
        crate::common::u(r, "/messages_lost"),
    );
    let (req, rep, late) = (
        crate::common::u(r, "/requests_lost"),
        crate::common::u(r, "/replies_lost"),
        crate::common::u(r, "/replies_late"),
    );
    assert_eq!(sent, 100);
    // A dropped datagram never comes late: every loss the firewall made is a request or a
    // reply lost, and a reply counted late is one the firewall let through.
    assert_eq!(req + rep, dropped, "{r}");
    assert_eq!(lost, req + rep + late);
    assert_eq!(sent, received + lost);
    assert_eq!(crate::common::u(round_trip(r), "/count"), received);
    if late > 0 {
        // A reply held past the 200 ms a request waits (a loaded machine) lets the next
        // request pass the rule before it: the order the model counts in is gone.
        eprintln!("{late} replies came late: the drop model is not checked");
        return;
    }
    // The model: datagrams pass the rule in order, request then reply; the rule drops
    // the 1st, 11th, 21st...; a dropped request has no reply.
    let (mut seen, mut want_req, mut want_rep) = (0u64, 0u64, 0u64);
    for _ in 0..100 {
        seen += 1;
        if seen % 10 == 1 {
            want_req += 1;
            continue;
        }
        seen += 1;
        if seen % 10 == 1 {
            want_rep += 1;
        }
    }
    assert_eq!((req, rep), (want_req, want_rep), "{r}");
}

#[test]
fn round_trips_of_every_run_are_merged_into_one_distribution() {
    let sb = Sandbox::new();
    let hist = sb.path().join("rtt.csv");
    let v = crate::common::json(
        &sb,
        &[
            "pingpong",
            "-t",
            "unix",
            "-n",
            "100",
            "--runs",
            "3",
            "-w",
            "0",
            "--histogram",
            hist.to_str().unwrap(),
        ],
    );
    let r = &v["body"]["results"][0];
    assert_eq!(crate::common::u(round_trip(r), "/count"), 300, "{r}");
    for run in r["runs"].as_array().unwrap() {
        assert_eq!(crate::common::u(run, "/latencies/round_trip/count"), 100);
    }
    // The histogram file holds every round trip too: its counts add up to 300.
    let text = std::fs::read_to_string(&hist).unwrap();
    let total: u64 = text
        .lines()
        .filter_map(|l| l.rsplit(',').next()?.trim().parse::<u64>().ok())
        .sum();
    assert_eq!(total, 300, "{text}");
}

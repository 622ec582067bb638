//! `connect`: a fresh connection per exchange, each phase timed, nothing left behind.

mod common;

use common::{json, u, Sandbox};

#[test]
fn every_connection_is_accepted_answered_and_closed_and_each_phase_is_timed() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "connect",
            "-t",
            "tcp,unix,unix-seqpacket",
            "-s",
            "100",
            "-n",
            "200",
            "-w",
            "0",
        ],
    );
    for r in v["results"].as_array().unwrap() {
        let t = r["transport"].as_str().unwrap();
        assert!(r["error"].is_null(), "{t}: {}", r["error"]);
        assert_eq!(u(r, "/messages_sent"), 200, "{t}: connections made");
        assert_eq!(u(r, "/messages_received"), 200, "{t}: connections accepted");
        assert_eq!(
            u(r, "/bytes_received"),
            200 * 100,
            "{t}: every first request arrived"
        );
        for phase in ["connect", "accept", "first_response", "close"] {
            assert_eq!(r["latencies"][phase]["count"], 200, "{t} {phase}");
            assert!(r["latencies"][phase]["p50_ns"].as_u64().unwrap() > 0);
        }
        assert!(r["messages_per_second"].as_f64().unwrap() > 0.0);
    }
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn linger0_and_many_open_connections_work() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "connect",
            "-t",
            "tcp",
            "-n",
            "300",
            "-w",
            "0",
            "--linger0",
            "--open",
            "16",
        ],
    );
    let r = &v["results"][0];
    assert_eq!(u(r, "/messages_received"), 300);
    assert_eq!(r["latencies"]["close"]["count"], 300);
}

#[test]
fn connectionless_transports_are_refused_or_skipped() {
    let sb = Sandbox::new();
    sb.cmd()
        .args(["connect", "-t", "udp"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "use tcp, tcp6, unix or unix-seqpacket",
        ));
    let v = json(&sb, &["connect", "-t", "all", "-n", "20", "-w", "0"]);
    let names: Vec<_> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["transport"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"tcp".to_string()) && names.contains(&"unix-seqpacket".to_string()));
    assert!(!names.contains(&"pipe".to_string()));
}

#[test]
fn connect_table_shows_each_phase() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args(["connect", "-t", "unix", "-n", "50", "-w", "0", "-q"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for h in [
        "connect p50",
        "accept p99",
        "1st response p50",
        "close p99",
        "connections/s",
    ] {
        assert!(text.contains(h), "{text}");
    }
}

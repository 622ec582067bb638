//! Every engine drives stream and pingpong over unix, tcp, udp and pipe with both sides'
//! counts in agreement; the classic mode names are aliases; refusals are clear.

mod common;

use common::{json, u, Sandbox};

#[test]
fn every_engine_moves_exact_counts_over_every_fd_transport() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "stream",
            "-t",
            "unix,tcp,udp,pipe",
            "-e",
            "all",
            "-s",
            "1000",
            "-n",
            "2000",
            "-w",
            "0",
        ],
    );
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 4 * 4, "4 engines x 4 transports");
    for r in results {
        let what = format!("{} {}", r["engine"], r["transport"]);
        assert!(r["error"].is_null(), "{what}: {}", r["error"]);
        assert_eq!(u(r, "/messages_sent"), 2000, "{what}");
        let lost = r["messages_lost"].as_u64().unwrap_or(0);
        assert_eq!(u(r, "/messages_received") + lost, 2000, "{what}");
        assert_eq!(
            u(r, "/bytes_received"),
            u(r, "/messages_received") * 1000,
            "{what}"
        );
    }
}

#[test]
fn every_engine_answers_every_round_trip() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "pingpong",
            "-t",
            "unix,tcp,udp,pipe,mq",
            "-e",
            "nonblocking,poll,epoll",
            "-n",
            "500",
            "-w",
            "0",
        ],
    );
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 3 * 5);
    for r in results {
        let what = format!("{} {}", r["engine"], r["transport"]);
        assert!(r["error"].is_null(), "{what}: {}", r["error"]);
        let lost = r["messages_lost"].as_u64().unwrap_or(0);
        assert_eq!(
            r["latencies"]["round_trip"]["count"].as_u64().unwrap() + lost,
            500,
            "{what}"
        );
    }
}

#[test]
fn classic_mode_names_are_aliases() {
    let sb = Sandbox::new();
    for (alias, engine) in [
        ("blocking-sync", "blocking"),
        ("nonblocking-sync", "nonblocking"),
        ("blocking-async", "poll"),
    ] {
        let v = json(
            &sb,
            &[
                "stream",
                "-t",
                "socketpair",
                "-e",
                alias,
                "-n",
                "100",
                "-w",
                "0",
            ],
        );
        assert_eq!(v["results"][0]["engine"], engine, "{alias}");
    }
}

#[test]
fn readiness_engines_refuse_shm_and_connect_with_a_reason() {
    let sb = Sandbox::new();
    sb.cmd()
        .args(["stream", "-t", "shm", "-e", "epoll"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("shm has no file descriptor"));
    sb.cmd()
        .args(["connect", "-t", "tcp", "-e", "poll"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("blocking engine only"));
    // With every engine, shm runs on the one that can drive it and is skipped elsewhere.
    let v = json(
        &sb,
        &["stream", "-t", "shm", "-e", "all", "-n", "100", "-w", "0"],
    );
    assert_eq!(v["results"].as_array().unwrap().len(), 1);
    assert_eq!(v["skipped"].as_array().unwrap().len(), 3);
}

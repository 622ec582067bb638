//! Every engine drives stream and pingpong over unix, tcp, udp and pipe with both sides'
//! counts in agreement; the classic mode names are aliases; refusals are clear.

use crate::common::{json, u, Sandbox};

/// How many engines `-e all` runs here: io_uring may be unavailable on some machines,
/// and then the run skips it (tested below with a forced refusal).
fn engines_here(sb: &Sandbox) -> usize {
    let io_uring = sb
        .cmd()
        .args([
            "stream", "-t", "pipe", "-e", "io-uring", "-n", "1", "-w", "0", "-q",
        ])
        .output()
        .unwrap();
    if io_uring.status.success() {
        6
    } else {
        5
    }
}

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
    let results = v["body"]["results"].as_array().unwrap();
    assert_eq!(
        results.len(),
        engines_here(&sb) * 4,
        "every engine x 4 transports"
    );
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
            "unix,tcp,udp,pipe",
            "-e",
            "all",
            "-n",
            "500",
            "-w",
            "0",
        ],
    );
    let results = v["body"]["results"].as_array().unwrap();
    assert_eq!(results.len(), engines_here(&sb) * 4);
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
fn rate_and_mq_work_through_the_readiness_and_async_engines() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "rate",
            "-t",
            "mq,unix-dgram",
            "-e",
            "nonblocking,poll,epoll,async",
            "-n",
            "3000",
            "-w",
            "0",
        ],
    );
    for r in v["body"]["results"].as_array().unwrap() {
        let what = format!("{} {}", r["engine"], r["transport"]);
        assert_eq!(u(r, "/messages_received"), 3000, "{what}");
        assert_eq!(u(r, "/messages_reordered"), 0, "{what}");
    }
}

#[test]
fn classic_mode_names_are_aliases() {
    let sb = Sandbox::new();
    for (alias, engine) in [
        ("blocking-sync", "blocking"),
        ("nonblocking-sync", "nonblocking"),
        ("blocking-async", "poll"),
        ("nonblocking-async", "io-uring"),
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
        assert_eq!(v["body"]["results"][0]["engine"], engine, "{alias}");
    }
}

#[test]
fn engines_refuse_what_they_cannot_drive_with_a_reason() {
    let sb = Sandbox::new();
    sb.cmd()
        .args(["stream", "-t", "shm", "-e", "epoll"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("shm has no file descriptor"));
    sb.cmd()
        .args(["stream", "-t", "mq", "-e", "io-uring"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("mq_send/mq_receive"));
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
    assert_eq!(v["body"]["results"].as_array().unwrap().len(), 1);
    assert_eq!(
        v["body"]["skipped"].as_array().unwrap().len(),
        engines_here(&sb) - 1
    );
}

#[test]
fn an_engine_the_system_refuses_is_named_and_the_others_still_run() {
    let sb = Sandbox::new();
    sb.cmd()
        .env("SOCKBENCH_TEST_NO_IO_URING", "1")
        .args(["stream", "-e", "io-uring", "-n", "10"])
        .assert()
        .code(1) // the system's condition, not bad usage
        .stderr(predicates::str::contains("io_uring is unavailable"));
    let out = sb
        .cmd()
        .env("SOCKBENCH_TEST_NO_IO_URING", "1")
        .args([
            "stream", "-t", "unix", "-e", "all", "-n", "100", "-w", "0", "--format", "json", "-q",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let engines: Vec<_> = v["body"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["engine"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(engines.len(), 5);
    assert!(!engines.contains(&"io-uring".to_string()));
    assert!(v["warnings"][0]
        .as_str()
        .unwrap()
        .contains("engine io-uring skipped"));
}

#[test]
fn the_async_engine_runs_on_either_runtime() {
    let sb = Sandbox::new();
    for runtime in ["current", "multi"] {
        let v = json(
            &sb,
            &[
                "pingpong",
                "-t",
                "tcp,pipe",
                "-e",
                "async",
                "--runtime",
                runtime,
                "-n",
                "300",
                "-w",
                "0",
            ],
        );
        for r in v["body"]["results"].as_array().unwrap() {
            assert_eq!(r["options"]["runtime"], runtime);
            assert_eq!(r["latencies"]["round_trip"]["count"], 300);
        }
    }
}

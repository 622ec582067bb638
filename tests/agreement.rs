//! The sender/receiver agreement check fires. A test build (`--features test-hooks`) makes
//! the receiver count one message and one byte it never got
//! (`SOCKBENCH_TEST_FAULT=receiver-counts-one-more`): on a transport that must deliver
//! everything that is a failed scenario with a message naming both counts; on UDP, where
//! loss is legitimate, it is not an error. A receiver that dies mid-run
//! (`SOCKBENCH_TEST_FAULT=receiver-dies`) fails the scenario at once, never hangs it.

use crate::common::Sandbox;

fn faulty(sb: &Sandbox, args: &[&str]) -> std::process::Output {
    sb.cmd()
        .args(args)
        .args(["-w", "0", "--format", "json", "-q"])
        .env("SOCKBENCH_TEST_FAULT", "receiver-counts-one-more")
        .output()
        .unwrap()
}

#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test build: cargo test --features test-hooks"
)]
fn a_receiver_that_miscounts_fails_the_scenario_on_reliable_transports() {
    let sb = Sandbox::new();
    for (workload, transport, size) in [
        ("stream", "unix", 1000u64),
        ("stream", "pipe", 1000),
        ("rate", "unix-dgram", 64),
        ("rate", "mq", 64),
    ] {
        let out = faulty(
            &sb,
            &[
                workload,
                "-t",
                transport,
                "-n",
                "500",
                "-s",
                &size.to_string(),
            ],
        );
        assert_eq!(out.status.code(), Some(1), "{workload} {transport}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let r = &v["body"]["results"][0];
        let error = r["error"].as_str().unwrap_or_default();
        let sent = 500 * size;
        assert!(
            error.contains("disagree")
                && error.contains(&format!("sent {sent} bytes in 500 messages"))
                && error.contains(&format!("received {} bytes in 501 messages", sent + 1)),
            "{workload} {transport}: {error}"
        );
    }
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test build: cargo test --features test-hooks"
)]
fn without_the_fault_the_same_runs_agree_and_udp_is_never_judged_by_it() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "stream", "-t", "unix", "-n", "500", "-s", "1000", "-w", "0", "-q",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    // UDP may lose datagrams: one "extra" received is not a disagreement the tool judges.
    let out = faulty(&sb, &["rate", "-t", "udp", "-n", "100", "--rate", "10k"]);
    crate::common::assert_success(&out);
}

#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test build: cargo test --features test-hooks"
)]
fn a_receiver_that_dies_fails_the_scenario_promptly_with_the_senders_error() {
    // The receiver closes its end right after the start and says nothing: the sender's
    // next send or receive fails (a broken pipe, a reset, an end of file), and that error
    // ends the scenario; a sender that retried it would run into the 10 s duration.
    let sb = Sandbox::new();
    for (workload, transport) in [
        ("stream", "unix"),
        ("stream", "pipe"),
        ("stream", "tcp"),
        ("pingpong", "unix"),
        ("rate", "unix-seqpacket"),
    ] {
        let t = std::time::Instant::now();
        let out = sb
            .cmd()
            .args([
                workload, "-t", transport, "-d", "10", "-w", "0", "--format", "json", "-q",
            ])
            .env("SOCKBENCH_TEST_FAULT", "receiver-dies")
            .output()
            .unwrap();
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{workload} {transport}: {:?}",
            t.elapsed()
        );
        assert_eq!(out.status.code(), Some(1), "{workload} {transport}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let error = v["body"]["results"][0]["error"]
            .as_str()
            .unwrap_or_default();
        assert!(
            error.contains("sender failed"),
            "{workload} {transport}: {error}"
        );
    }
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

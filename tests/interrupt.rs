//! Ctrl-C and SIGTERM at any moment: the scenarios finished so far are printed and
//! exported, nothing the run made is left behind, and the process exits within a second.

mod common;

use std::ffi::CString;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{shm_leftovers, Sandbox};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

fn spawn(sb: &Sandbox, args: &[&str]) -> Child {
    Command::new(assert_cmd::cargo::cargo_bin("sockbench"))
        .args(args)
        .env("TMPDIR", sb.path())
        .env("XDG_RUNTIME_DIR", sb.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Send `sig` and return how long the process took to exit, and its output.
fn signal_and_wait(child: Child, sig: Signal) -> (Duration, std::process::Output) {
    let pid = Pid::from_raw(child.id() as i32);
    kill(pid, sig).unwrap();
    let t = Instant::now();
    let out = child.wait_with_output().unwrap();
    (t.elapsed(), out)
}

fn no_message_queues_left(pid: u32) {
    for id in 0..64 {
        let name = CString::new(format!("/sockbench-{pid}-{id}")).unwrap();
        let r = nix::mqueue::mq_open(
            name.as_c_str(),
            nix::mqueue::MQ_OFlag::O_RDONLY,
            nix::sys::stat::Mode::empty(),
            None,
        );
        assert!(r.is_err(), "message queue {name:?} was left behind");
    }
}

#[test]
fn ctrl_c_mid_run_prints_and_exports_finished_scenarios_and_cleans_up() {
    let sb = Sandbox::new();
    let export = sb.path().join("partial.json");
    let child = spawn(
        &sb,
        &[
            "stream",
            "-t",
            "unix,fifo,mq,shm,unix-dgram,tcp,pipe",
            "-s",
            "4K",
            "-d",
            "0.3",
            "-w",
            "0",
            "--export-json",
            export.to_str().unwrap(),
        ],
    );
    let pid = child.id();
    // Wait until at least one scenario has finished and been exported.
    let t = Instant::now();
    loop {
        let done = std::fs::read(&export)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| !v["results"].as_array().unwrap().is_empty());
        if done {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no scenario finished in 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100)); // now mid-way through another scenario
    let (took, out) = signal_and_wait(child, Signal::SIGINT);
    assert!(
        took < Duration::from_secs(1),
        "took {took:?} to exit after Ctrl-C"
    );
    assert_eq!(out.status.code(), Some(130));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("unix"),
        "finished scenarios are printed: {stdout}"
    );
    assert!(stdout.contains("Interrupted"), "{stdout}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&export).unwrap()).unwrap();
    assert_eq!(v["interrupted"], true);
    let n = v["results"].as_array().unwrap().len();
    assert!((1..7).contains(&n), "{n} results");
    assert!(v["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["error"].is_null()));
    assert!(
        sb.leftovers().is_empty(),
        "left behind: {:?}",
        sb.leftovers()
    );
    assert!(shm_leftovers()
        .iter()
        .all(|n| !n.contains(&pid.to_string())));
    no_message_queues_left(pid);
}

#[test]
fn sigterm_during_the_first_scenario_exits_promptly_with_nothing_left() {
    let sb = Sandbox::new();
    let child = spawn(
        &sb,
        &[
            "stream", "-t", "unix", "-d", "5", "-w", "0", "--format", "json",
        ],
    );
    std::thread::sleep(Duration::from_millis(400));
    let (took, out) = signal_and_wait(child, Signal::SIGTERM);
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert_eq!(out.status.code(), Some(130));
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("valid JSON even when interrupted");
    assert_eq!(v["interrupted"], true);
    assert_eq!(v["results"].as_array().unwrap().len(), 0);
    assert!(
        sb.leftovers().is_empty(),
        "left behind: {:?}",
        sb.leftovers()
    );
}

#[test]
fn ctrl_c_during_a_lossy_udp_run_exits_promptly() {
    let sb = Sandbox::new();
    let child = spawn(
        &sb,
        &[
            "stream", "-t", "udp", "-s", "1K", "-d", "5", "-w", "0", "-P", "2",
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let (took, out) = signal_and_wait(child, Signal::SIGINT);
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert_eq!(out.status.code(), Some(130));
}

#[test]
fn ctrl_c_between_runs_keeps_the_runs_already_measured() {
    let sb = Sandbox::new();
    let child = spawn(
        &sb,
        &[
            "stream",
            "-t",
            "socketpair",
            "-d",
            "0.3",
            "-w",
            "0",
            "--runs",
            "10",
            "--format",
            "json",
        ],
    );
    std::thread::sleep(Duration::from_millis(900));
    let (took, out) = signal_and_wait(child, Signal::SIGINT);
    assert!(took < Duration::from_secs(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["results"][0];
    let runs = r["runs"].as_array().unwrap().len();
    assert!((1..10).contains(&runs), "{runs} runs kept");
    assert!(r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["kind"] == "interrupted"));
}

#[test]
fn ctrl_c_during_slow_round_trips_exits_promptly() {
    // Every round trip stalls ~40 ms (Nagle + delayed ACK): the client must still notice.
    let sb = Sandbox::new();
    let child = spawn(
        &sb,
        &[
            "pingpong", "-t", "tcp", "--writes", "2", "-d", "10", "-w", "0", "--format", "json",
        ],
    );
    std::thread::sleep(Duration::from_millis(500));
    let (took, out) = signal_and_wait(child, Signal::SIGINT);
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert_eq!(out.status.code(), Some(130));
    assert!(sb.leftovers().is_empty());
}

#[test]
fn ctrl_c_during_connect_and_rate_exits_promptly() {
    for args in [
        &["connect", "-t", "unix", "-d", "10", "-w", "0"][..],
        &["rate", "-t", "udp", "-d", "10", "-w", "0"][..],
    ] {
        let sb = Sandbox::new();
        let child = spawn(&sb, args);
        std::thread::sleep(Duration::from_millis(400));
        let (took, out) = signal_and_wait(child, Signal::SIGINT);
        assert!(took < Duration::from_secs(1), "{args:?} took {took:?}");
        assert_eq!(out.status.code(), Some(130), "{args:?}");
        assert!(sb.leftovers().is_empty(), "{args:?}: {:?}", sb.leftovers());
    }
}

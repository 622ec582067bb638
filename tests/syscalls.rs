//! Each engine proven by what it makes the kernel do, counted by `strace -f -c` (not by
//! sockbench): epoll waits in epoll_wait, poll in poll, io-uring submits through
//! io_uring_enter (once per round trip and side) and never calls recvfrom or sendto,
//! nonblocking retries on EAGAIN, and blocking never waits anywhere but in the transfer
//! itself. An engine that silently fell
//! back to the blocking path fails here.

mod common;

use std::collections::HashMap;
use std::process::Command;

use common::Sandbox;

/// Per system call: (calls, errors).
fn syscalls(engine: &str) -> Option<HashMap<String, (u64, u64)>> {
    if !Command::new("strace")
        .args(["-o", "/dev/null", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!(
            "skipped: strace is not installed or ptrace is not permitted (apt-get install strace)"
        );
        return None;
    }
    let sb = Sandbox::new();
    let log = sb.path().join("strace.txt");
    let out = sb
        .std_cmd("strace")
        .args(["-f", "-c", "-o"])
        .arg(&log)
        .arg(assert_cmd::cargo::cargo_bin("sockbench"))
        .args([
            "pingpong", "-t", "tcp", "-e", engine, "-n", "2000", "-w", "0", "-q",
        ])
        .output()
        .unwrap();
    common::assert_success(&out);
    let table = std::fs::read_to_string(&log).unwrap();
    // "% time  seconds  usecs/call  calls  errors  syscall", errors empty when none.
    Some(
        table
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let calls = f.get(3)?.parse().ok()?;
                let errors = if f.len() == 6 { f[4].parse().ok()? } else { 0 };
                Some((f.last()?.to_string(), (calls, errors)))
            })
            .filter(|(name, _)| name != "total")
            .collect(),
    )
}

fn calls(s: &HashMap<String, (u64, u64)>, name: &str) -> u64 {
    s.get(name).map_or(0, |c| c.0)
}

fn errors(s: &HashMap<String, (u64, u64)>, name: &str) -> u64 {
    s.get(name).map_or(0, |c| c.1)
}

/// epoll_wait or epoll_pwait, whichever the C library uses.
fn epoll_waits(s: &HashMap<String, (u64, u64)>) -> u64 {
    calls(s, "epoll_wait") + calls(s, "epoll_pwait") + calls(s, "epoll_pwait2")
}

fn polls(s: &HashMap<String, (u64, u64)>) -> u64 {
    calls(s, "poll") + calls(s, "ppoll")
}

// 2000 round trips: 4000 sends and 4000 receives. Setup (the dial's deadline) polls a
// couple of times in every engine, hence the small allowances.

#[test]
fn blocking_waits_only_inside_its_transfers() {
    let Some(s) = syscalls("blocking") else {
        return;
    };
    assert_eq!(calls(&s, "sendto"), 4000, "{s:?}");
    assert!(calls(&s, "recvfrom") >= 4000, "{s:?}");
    assert_eq!(
        errors(&s, "recvfrom"),
        0,
        "a blocking receive never says EAGAIN: {s:?}"
    );
    assert_eq!(epoll_waits(&s), 0, "{s:?}");
    assert!(polls(&s) <= 5, "{s:?}");
    assert_eq!(calls(&s, "io_uring_enter"), 0, "{s:?}");
}

#[test]
fn nonblocking_retries_on_eagain_without_waiting() {
    let Some(s) = syscalls("nonblocking") else {
        return;
    };
    assert!(errors(&s, "recvfrom") > 100, "{s:?}");
    assert_eq!(epoll_waits(&s), 0, "{s:?}");
    assert!(polls(&s) <= 5, "{s:?}");
}

#[test]
fn poll_waits_in_poll() {
    let Some(s) = syscalls("poll") else { return };
    assert!(polls(&s) > 500, "{s:?}");
    assert_eq!(epoll_waits(&s), 0, "{s:?}");
}

#[test]
fn epoll_waits_in_epoll_wait() {
    let Some(s) = syscalls("epoll") else { return };
    assert!(epoll_waits(&s) > 500, "{s:?}");
    assert!(polls(&s) <= 5, "{s:?}");
}

#[test]
fn io_uring_submits_every_transfer_through_the_ring() {
    // Whether io_uring is there is asked of sockbench without tracing: where it is not,
    // `-e io-uring` is refused with exit status 1 and says why.
    let sb = Sandbox::new();
    let probe = sb
        .cmd()
        .args([
            "pingpong", "-t", "tcp", "-e", "io-uring", "-n", "1", "-w", "0", "-q",
        ])
        .output()
        .unwrap();
    if !probe.status.success() {
        eprintln!("skipped: {}", String::from_utf8_lossy(&probe.stderr).trim());
        return;
    }
    let Some(s) = syscalls("io-uring") else {
        return;
    };
    // 2000 round trips, each side one io_uring_enter per round trip: its send (an
    // answer, or the next request) is submitted with the receive that follows it.
    let enters = calls(&s, "io_uring_enter");
    assert!((4000..4100).contains(&enters), "{s:?}");
    assert_eq!(calls(&s, "recvfrom") + calls(&s, "sendto"), 0, "{s:?}");
}

#[test]
fn async_waits_in_tokios_epoll_reactor() {
    let Some(s) = syscalls("async") else { return };
    assert!(epoll_waits(&s) > 500, "{s:?}");
    assert_eq!(calls(&s, "sendto"), 4000, "{s:?}");
    assert_eq!(calls(&s, "io_uring_enter"), 0, "{s:?}");
}

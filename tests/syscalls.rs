//! Each engine proven by what it makes the kernel do, counted by `strace -ff` (not by
//! sockbench), for every role in every placement (threads of one process, a child
//! process each way, a `sockbench server`): epoll waits in epoll_wait, poll in poll,
//! io-uring submits through io_uring_enter (once per round trip and side) and never
//! calls recvfrom or sendto, nonblocking retries on EAGAIN, and blocking never waits
//! anywhere but in the transfer itself. An engine that silently fell back to the
//! blocking path, on either side and wherever it runs, fails here.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use crate::common::Sandbox;

/// Per system call: (calls, errors).
type Counts = HashMap<String, (u64, u64)>;

/// The system calls the engines differ by, and those that make a process or thread.
const TRACED: &str =
    "trace=poll,ppoll,epoll_wait,epoll_pwait,epoll_pwait2,io_uring_enter,sendto,recvfrom,clone,clone3,fork,vfork";

fn have_strace() -> bool {
    let ok = Command::new("strace")
        .args(["-o", "/dev/null", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "skipped: strace is not installed or ptrace is not permitted (apt-get install strace)"
        );
    }
    ok
}

/// sockbench with `args` under `strace -ff` (one log per thread, named PREFIX.TID).
fn traced(sb: &Sandbox, prefix: &Path, args: &[&str]) -> Command {
    let mut c = sb.std_cmd("strace");
    c.args(["-ff", "-e", TRACED, "-o"])
        .arg(prefix)
        .arg(assert_cmd::cargo::cargo_bin("sockbench"))
        .args(args);
    c
}

/// The counts of every traced thread, grouped by process: each thread's log counted,
/// threads joined to the process that made them (a clone with CLONE_THREAD), from the
/// logs strace wrote under `prefix`.
fn per_process(prefix: &Path) -> Vec<Vec<Counts>> {
    let stem = prefix.file_name().unwrap().to_string_lossy().into_owned() + ".";
    let mut threads: HashMap<u32, Counts> = HashMap::new();
    // A thread's tid -> the tid of the thread that made it (same process).
    let mut made_by: HashMap<u32, u32> = HashMap::new();
    for e in std::fs::read_dir(prefix.parent().unwrap())
        .unwrap()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(tid) = name.strip_prefix(&stem).and_then(|t| t.parse::<u32>().ok()) else {
            continue;
        };
        let mut counts = Counts::new();
        for line in std::fs::read_to_string(e.path()).unwrap().lines() {
            let Some((call, _)) = line.split_once('(') else {
                continue;
            };
            // "call(args) = RET ..." with the " = " aligned by spaces: the return value
            // follows the last "=" that comes after the closing parenthesis.
            let Some((args, ret)) = line.rsplit_once("= ") else {
                continue;
            };
            if !args.trim_end().ends_with(')') {
                continue;
            }
            let failed = ret.starts_with('-');
            let c = counts.entry(call.to_string()).or_default();
            c.0 += 1;
            c.1 += u64::from(failed);
            if call.starts_with("clone") && line.contains("CLONE_THREAD") && !failed {
                if let Ok(child) = ret.split_whitespace().next().unwrap_or("").parse() {
                    made_by.insert(child, tid);
                }
            }
        }
        threads.insert(tid, counts);
    }
    let root = |mut t: u32| {
        while let Some(&p) = made_by.get(&t) {
            t = p;
        }
        t
    };
    let mut processes: HashMap<u32, Vec<Counts>> = HashMap::new();
    for (tid, counts) in threads {
        processes.entry(root(tid)).or_default().push(counts);
    }
    processes.into_values().collect()
}

/// The sum of some threads' counts.
fn sum(threads: &[Counts]) -> Counts {
    let mut total = Counts::new();
    for t in threads {
        for (k, (c, e)) in t {
            let s = total.entry(k.clone()).or_default();
            s.0 += c;
            s.1 += e;
        }
    }
    total
}

/// Where the roles run: this process's threads, a child process each way, or a
/// `sockbench server` (the client and the server each traced).
const PLACEMENTS: [&str; 3] = ["threads", "processes", "server"];

const ROUND_TRIPS: u64 = 2000;

/// What ran each role of `pingpong -t tcp -e ENGINE -n 2000` in `placement`, with its
/// counts and how many roles it ran: the thread that moved the role's messages (by send
/// or through the ring), so the control connection's own reads and a server's accept
/// loop are not counted against the engine; for the async engine, whose tasks move
/// between the runtime's threads, the whole process (both roles in threads, one each
/// otherwise). None when strace cannot run here.
fn roles(engine: &str, placement: &str) -> Option<Vec<(Counts, u64)>> {
    if !have_strace() {
        return None;
    }
    let sb = Sandbox::new();
    let n = ROUND_TRIPS.to_string();
    let mut args = vec![
        "pingpong", "-t", "tcp", "-e", engine, "-n", &n, "-w", "0", "-q",
    ];
    let mut processes = Vec::new();
    match placement {
        "threads" | "processes" => {
            args.extend(["--placement", placement]);
            let out = traced(&sb, &sb.path().join("c"), &args).output().unwrap();
            crate::common::assert_success(&out);
            processes.extend(per_process(&sb.path().join("c")));
        }
        _ => {
            let (mut server, port, _log) = crate::common::spawn_server(&mut traced(
                &sb,
                &sb.path().join("s"),
                &["server", "--listen", "127.0.0.1", "--port", "0", "--once"],
            ));
            let addr = format!("127.0.0.1:{port}");
            args.extend(["--server", &addr]);
            let out = traced(&sb, &sb.path().join("c"), &args).output().unwrap();
            crate::common::assert_success(&out);
            assert!(server.wait().unwrap().success(), "the --once server failed");
            processes.extend(per_process(&sb.path().join("c")));
            processes.extend(per_process(&sb.path().join("s")));
        }
    }
    // What moved at least a role's round trips; the rest (strace's own child, the
    // control thread, a forked helper) did not.
    let moved = |c: &Counts| calls(c, "sendto").max(calls(c, "io_uring_enter")) >= ROUND_TRIPS;
    let ran: Vec<(Counts, u64)> = if engine == "async" {
        processes
            .iter()
            .map(|threads| sum(threads))
            .filter(moved)
            .map(|c| (c, if placement == "threads" { 2 } else { 1 }))
            .collect()
    } else {
        processes
            .into_iter()
            .flatten()
            .filter(moved)
            .map(|c| (c, 1))
            .collect()
    };
    assert_eq!(
        ran.iter().map(|(_, r)| r).sum::<u64>(),
        2,
        "{engine} {placement}: two roles, found in {} places: {ran:?}",
        ran.len()
    );
    Some(ran)
}

/// Every role of `engine`, in every placement, with its process's counts and the number
/// of round-trip messages it sent (ROUND_TRIPS per role).
fn each_role(engine: &str, check: impl Fn(&str, &Counts, u64)) {
    for placement in PLACEMENTS {
        let Some(ran) = roles(engine, placement) else {
            return;
        };
        for (counts, roles) in ran {
            check(placement, &counts, roles * ROUND_TRIPS);
        }
    }
}

/// What an async role's process does besides the engine's transfers: the control
/// connection to a server or a child (frames read without blocking).
const CONTROL: u64 = 64;

fn calls(s: &Counts, name: &str) -> u64 {
    s.get(name).map_or(0, |c| c.0)
}

fn errors(s: &Counts, name: &str) -> u64 {
    s.get(name).map_or(0, |c| c.1)
}

/// epoll_wait or epoll_pwait, whichever the C library uses.
fn epoll_waits(s: &Counts) -> u64 {
    calls(s, "epoll_wait") + calls(s, "epoll_pwait") + calls(s, "epoll_pwait2")
}

fn polls(s: &Counts) -> u64 {
    calls(s, "poll") + calls(s, "ppoll")
}

// Per role: 2000 sends and at least 2000 receives, in whichever process runs it. Setup
// (the dial's deadline) polls a couple of times in every engine, hence the small
// allowances.

#[test]
fn blocking_waits_only_inside_its_transfers() {
    each_role("blocking", |at, s, sends| {
        assert_eq!(calls(s, "sendto"), sends, "{at}: {s:?}");
        assert!(calls(s, "recvfrom") >= sends, "{at}: {s:?}");
        assert_eq!(
            errors(s, "recvfrom"),
            0,
            "{at}: a blocking receive never says EAGAIN: {s:?}"
        );
        assert_eq!(epoll_waits(s), 0, "{at}: {s:?}");
        assert!(polls(s) <= 5, "{at}: {s:?}");
        assert_eq!(calls(s, "io_uring_enter"), 0, "{at}: {s:?}");
    });
}

#[test]
fn nonblocking_retries_on_eagain_without_waiting() {
    each_role("nonblocking", |at, s, _| {
        assert!(errors(s, "recvfrom") > 100, "{at}: {s:?}");
        assert_eq!(epoll_waits(s), 0, "{at}: {s:?}");
        assert!(polls(s) <= 5, "{at}: {s:?}");
    });
}

#[test]
fn poll_waits_in_poll() {
    each_role("poll", |at, s, _| {
        assert!(polls(s) > 250, "{at}: {s:?}");
        assert_eq!(epoll_waits(s), 0, "{at}: {s:?}");
    });
}

#[test]
fn epoll_waits_in_epoll_wait() {
    each_role("epoll", |at, s, _| {
        assert!(epoll_waits(s) > 250, "{at}: {s:?}");
        assert!(polls(s) <= 5, "{at}: {s:?}");
    });
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
    // Each role one io_uring_enter per round trip: its send (an answer, or the next
    // request) is submitted with the receive that follows it. The control connection,
    // where there is one, is plain sends and receives.
    each_role("io-uring", |at, s, sends| {
        let enters = calls(s, "io_uring_enter");
        assert!((sends..sends + 50).contains(&enters), "{at}: {s:?}");
        assert_eq!(calls(s, "recvfrom") + calls(s, "sendto"), 0, "{at}: {s:?}");
    });
}

#[test]
fn async_waits_in_tokios_epoll_reactor() {
    each_role("async", |at, s, sends| {
        assert!(epoll_waits(s) > 250, "{at}: {s:?}");
        assert!(
            (sends..sends + CONTROL).contains(&calls(s, "sendto")),
            "{at}: {s:?}"
        );
        assert_eq!(calls(s, "io_uring_enter"), 0, "{at}: {s:?}");
    });
}

#[test]
fn latency_merged_over_streams_holds_every_round_trip_each_stream_made() {
    // Three streams for a fixed time each make as many round trips as they can: counts
    // that differ. The merged distribution must hold each one's round trips, as the
    // kernel counted them (a request and an answer sent per round trip, per stream).
    if !have_strace() {
        return;
    }
    let sb = Sandbox::new();
    let prefix = sb.path().join("p");
    let out = traced(
        &sb,
        &prefix,
        &[
            "pingpong", "-t", "tcp", "-P", "3", "-d", "0.5", "-w", "0", "-q", "--format", "json",
        ],
    )
    .output()
    .unwrap();
    crate::common::assert_success(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["body"]["results"][0];
    // Each stream's two role threads send once per round trip each.
    let mut per_thread: Vec<u64> = per_process(&prefix)
        .into_iter()
        .flatten()
        .map(|c| calls(&c, "sendto"))
        .filter(|&n| n >= 50)
        .collect();
    per_thread.sort_unstable();
    assert_eq!(per_thread.len(), 6, "{per_thread:?}");
    let kernel: u64 = per_thread.iter().sum::<u64>() / 2;
    let count = crate::common::u(r, "/latencies/round_trip/count");
    assert_eq!(
        count, kernel,
        "merged count against the kernel's: {per_thread:?}"
    );
    assert_eq!(crate::common::u(r, "/messages_sent"), kernel);
    let buckets: u64 = r["latency_buckets"]["round_trip"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(
        buckets, kernel,
        "the exported buckets hold every round trip"
    );
}

//! Nothing is left behind, checked at the moment each named object exists. Socket files,
//! FIFOs, message queues and shared-memory rings live only between their creation and the
//! moment both ends are open (microseconds), so a signal sent at a random time finds none
//! of them and a leftover check passes whatever the code does. A test build
//! (`--features test-hooks`) holds that window open (`SOCKBENCH_TEST_HOLD=POINT:MS`); each
//! test waits until the object is there, sees it by the name the tool gives it, and only
//! then interrupts or kills the run.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::Sandbox;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Where the runs' machine-wide names live. Message queue and /dev/shm names are shared
/// by every process on the host, and every sockbench removes the stale ones it finds: a
/// test run beside this one may remove the very queue a check here waits to see. So each
/// case runs in a private IPC and mount namespace (its own mqueue and /dev/shm), held open
/// by a sleeping process, where only this test's runs are. Without the privilege for that
/// (not root) the host's are used, and a run beside this one may still interfere.
enum Names {
    Private(Child),
    Host,
}

impl Names {
    fn new() -> Names {
        // Where /dev/mqueue is not there (not made by this machine's init), sockbench
        // lists queues through a mount of its own (root only; else the mq case skips).
        let script = "{ [ ! -d /dev/mqueue ] || mount -t mqueue mqueue /dev/mqueue; } \
                      && mount -t tmpfs tmpfs /dev/shm && echo ready && exec sleep 600";
        let spawned = std::process::Command::new("unshare")
            .args([
                "--ipc",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        let Ok(mut child) = spawned else {
            eprintln!("unshare is not installed: the host's message queues and /dev/shm are used");
            return Names::Host;
        };
        let mut line = String::new();
        let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        if line.trim() == "ready" {
            return Names::Private(child);
        }
        let _ = child.kill();
        let _ = child.wait();
        eprintln!("no private IPC namespace (needs root): the host's queues and /dev/shm are used");
        Names::Host
    }

    /// sockbench, run in these names' namespace, its temporary files in the sandbox.
    fn sockbench(&self, sb: &Sandbox) -> std::process::Command {
        match self {
            Names::Host => sb.sockbench(),
            // nsenter joins the namespaces and execs sockbench: the pid is sockbench's.
            Names::Private(holder) => {
                let mut c = sb.std_cmd("nsenter");
                c.arg("-t")
                    .arg(holder.id().to_string())
                    .args(["-i", "-m", "--"])
                    .arg(assert_cmd::cargo::cargo_bin("sockbench"));
                c
            }
        }
    }

    /// `dir` (/dev/shm or /dev/mqueue) as the runs see it.
    fn dir(&self, dir: &str) -> std::path::PathBuf {
        match self {
            Names::Host => Path::new(dir).to_path_buf(),
            Names::Private(holder) => {
                Path::new(&format!("/proc/{}/root", holder.id())).join(&dir[1..])
            }
        }
    }

    fn queue_exists(&self, name: &str) -> bool {
        match self {
            Names::Host => queue_exists(name),
            // A thread of its own joins the namespace (an IPC namespace is a thread's).
            Names::Private(holder) => {
                let ns = std::fs::File::open(format!("/proc/{}/ns/ipc", holder.id())).unwrap();
                let name = name.to_string();
                std::thread::spawn(move || {
                    nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWIPC).unwrap();
                    queue_exists(&name)
                })
                .join()
                .unwrap()
            }
        }
    }
}

impl Drop for Names {
    fn drop(&mut self) {
        if let Names::Private(holder) = self {
            let _ = holder.kill();
            let _ = holder.wait();
        }
    }
}

/// A run paused at `point` (the window in which its object exists), its stderr collected.
struct Held {
    child: Child,
    pid: u32,
    stderr: mpsc::Receiver<String>,
}

fn hold(sb: &Sandbox, names: &Names, point: &str, args: &[&str]) -> Held {
    let mut child = names
        .sockbench(sb)
        .args(args)
        .env("SOCKBENCH_TEST_HOLD", format!("{point}:20000"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let pid = child.id();
    let held = Held {
        child,
        pid,
        stderr: rx,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match held.stderr.recv_timeout(left) {
            Ok(line) if line == format!("holding {point}") => return held,
            Ok(_) => {}
            Err(_) => panic!("{args:?} never reached {point}"),
        }
    }
}

/// Every named object process `pid` has now: files in the sandbox (and the run directory
/// in it) named `sb<pid>-...`, rings in /dev/shm and queues named `sockbench-<pid>-<id>`.
fn objects_of(sb: &Sandbox, names: &Names, pid: u32) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![sb.path().to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            } else if name.starts_with(&format!("sb{pid}-")) {
                found.push(e.path().display().to_string());
            }
        }
    }
    for id in 0..4 {
        let name = format!("sockbench-{pid}-{id}");
        if names.dir("/dev/shm").join(&name).exists() {
            found.push(format!("/dev/shm/{name}"));
        }
        if names.queue_exists(&name) {
            found.push(format!("message queue /{name}"));
        }
    }
    found
}

fn queue_exists(name: &str) -> bool {
    let c = std::ffi::CString::new(format!("/{name}")).unwrap();
    match nix::mqueue::mq_open(
        c.as_c_str(),
        nix::mqueue::MQ_OFlag::O_RDONLY,
        nix::sys::stat::Mode::empty(),
        None,
    ) {
        Ok(q) => {
            let _ = nix::mqueue::mq_close(q);
            true
        }
        Err(_) => false,
    }
}

/// What each transport names, where the test build can hold it, and an engine to run it
/// with (so every engine's interrupt path is taken with an object present).
const CASES: [(&str, &str, &str); 6] = [
    ("unix", "unix", "epoll"),
    ("unix-dgram", "unix", "io-uring"),
    ("unix-seqpacket", "unix", "async"),
    ("fifo", "fifo", "poll"),
    ("mq", "mq", "nonblocking"),
    ("shm", "shm", "blocking"),
];

#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test build: cargo test --features test-hooks"
)]
fn ctrl_c_or_sigterm_while_each_object_exists_removes_it() {
    for (i, (transport, point, engine)) in CASES.into_iter().enumerate() {
        let sig = if i % 2 == 0 {
            Signal::SIGINT
        } else {
            Signal::SIGTERM
        };
        let sb = Sandbox::new();
        let names = Names::new();
        let args = [
            "stream", "-t", transport, "-e", engine, "-n", "100", "-w", "0", "-q",
        ];
        let held = hold(&sb, &names, point, &args);
        let before = objects_of(&sb, &names, held.pid);
        assert!(
            !before.is_empty(),
            "{transport}: nothing of pid {} found while it was held at {point}",
            held.pid
        );
        kill(Pid::from_raw(held.pid as i32), sig).unwrap();
        let t = Instant::now();
        let out = held.child.wait_with_output().unwrap();
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "{transport} {engine}: {sig} took {:?}",
            t.elapsed()
        );
        assert_eq!(out.status.code(), Some(130), "{transport} {engine} {sig}");
        assert_eq!(
            objects_of(&sb, &names, held.pid),
            Vec::<String>::new(),
            "{transport} {engine}: {sig} left behind what existed: {before:?}"
        );
        assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
    }
}

#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test build: cargo test --features test-hooks"
)]
fn what_sigkill_leaves_the_next_run_removes_and_reports() {
    for (transport, point, _) in [CASES[0], CASES[3], CASES[4], CASES[5]] {
        let sb = Sandbox::new();
        let names = Names::new();
        let args = ["stream", "-t", transport, "-n", "100", "-w", "0", "-q"];
        let held = hold(&sb, &names, point, &args);
        let pid = held.pid;
        kill(Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
        let out = held.child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), None);
        // SIGKILL cannot be caught: what existed at that moment is still there.
        let left = objects_of(&sb, &names, pid);
        assert!(
            !left.is_empty(),
            "{transport}: nothing left at the held moment"
        );
        if transport == "mq"
            && !names.dir("/dev/mqueue").is_dir()
            && !nix::unistd::geteuid().is_root()
        {
            // The kernel lists queues only through a mounted mqueue file system; where
            // the machine mounts none, sockbench mounts one of its own, which needs root.
            eprintln!("skipped: /dev/mqueue is not mounted and this is not root, so a stale queue cannot be found");
            if matches!(names, Names::Host) {
                // (A private namespace's queues go with it.)
                let c = std::ffi::CString::new(format!("/sockbench-{pid}-0")).unwrap();
                nix::mqueue::mq_unlink(c.as_c_str()).unwrap();
            }
            continue;
        }
        let next = names
            .sockbench(&sb)
            .args(["stream", "-t", transport, "-n", "10", "-w", "0"])
            .args(["--format", "json", "-q"])
            .output()
            .unwrap();
        assert!(next.status.success());
        let v: serde_json::Value = serde_json::from_slice(&next.stdout).unwrap();
        let notes = v["warnings"].to_string();
        // In the private namespace only this next run sees the queue and the ring; on
        // the host's, any sockbench starting alongside may remove them first.
        assert!(
            notes.contains(&format!("left by sockbench process {pid}"))
                || (matches!(names, Names::Host) && matches!(transport, "mq" | "shm")),
            "{transport}: {notes}"
        );
        assert_eq!(
            objects_of(&sb, &names, pid),
            Vec::<String>::new(),
            "{transport}"
        );
        assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
    }
}

#[test]
fn a_socket_file_left_by_an_earlier_process_with_the_same_pid_is_replaced() {
    // In a new pid namespace sockbench is pid 1, so the name it will use is known in
    // advance: leave a socket file there, as a killed process with that pid would have.
    let sb = Sandbox::new();
    let dir = sb.path().join("sockets");
    std::fs::create_dir(&dir).unwrap();
    let stale = dir.join("sb1-unix-0.sock");
    let left = std::os::unix::net::UnixListener::bind(&stale).unwrap();
    drop(left);
    assert!(stale.exists());
    let out = sb
        .std_cmd("unshare")
        .args(["-p", "-f", "--kill-child"])
        .arg(assert_cmd::cargo::cargo_bin("sockbench"))
        .args([
            "stream", "-t", "unix", "-n", "10", "-w", "0", "-q", "--path",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("unshare failed") || err.contains("Operation not permitted") {
        eprintln!("skipped: `unshare -p` is not permitted here (needs root)");
        return;
    }
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("removed {}", stale.display())),
        "{err}"
    );
    assert!(!stale.exists());
}

/// Run directories (`sockbench-<pid>-...`) in the sandbox.
fn run_dirs(sb: &Sandbox) -> Vec<String> {
    std::fs::read_dir(sb.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("sockbench-"))
        .collect()
}

/// `sockbench ARGS`, killed with SIGKILL once it holds `sockets` sockets (`what` never
/// happened otherwise): nothing of it is left, no file and no run directory.
fn sigkill_mid_run_leaves_nothing(args: &[&str], sockets: usize, what: &str) {
    let sb = Sandbox::new();
    let mut child = sb
        .sockbench()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let until = Instant::now() + Duration::from_secs(10);
    while crate::common::sockets_of(pid) < sockets {
        assert!(Instant::now() < until, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    assert_eq!(run_dirs(&sb), Vec::<String>::new());
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

/// A relay over unix runs on the runner's placements: the relay's listener, as the sink's
/// its role opens, has its socket file removed as soon as it is bound (dialers reach it
/// through the listener's descriptor), so a SIGKILL in the middle of the run leaves no
/// file and no directory.
#[test]
fn sigkill_during_a_unix_relay_leaves_nothing() {
    // Running: two listeners, and the source's, the relay's two and the sink's ends.
    sigkill_mid_run_leaves_nothing(
        &["relay", "-t", "unix", "-m", "read-write", "-d", "20", "-q"],
        6,
        "the relay never started relaying",
    );
}

/// A swarm over unix opens its listener as the measuring commands do: its socket file is
/// removed as soon as it is bound (dialers reach it through the listener's descriptor), so
/// a SIGKILL in the middle of the run leaves nothing.
#[test]
fn sigkill_during_a_unix_swarm_leaves_nothing() {
    // Running: both ends of its four pairs are open.
    sigkill_mid_run_leaves_nothing(
        &["swarm", "-t", "unix", "-n", "4", "-d", "20", "-q"],
        8,
        "the swarm never set its pairs up",
    );
}

#[test]
fn tcp_only_swarm_and_relay_make_no_directory() {
    for args in [
        &["swarm", "-t", "tcp", "-n", "4", "-d", "0.3"][..],
        &["relay", "-t", "tcp", "-m", "read-write", "-d", "0.3"][..],
    ] {
        let sb = Sandbox::new();
        let mut child = sb
            .sockbench()
            .args(args)
            .arg("-q")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut seen = Vec::new();
        while child.try_wait().unwrap().is_none() {
            seen.extend(run_dirs(&sb));
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(seen, Vec::<String>::new(), "{args:?}");
    }
}

//! `sockbench server` and the client side (`--server`), and `--placement processes`, on
//! this host: every workload over every named transport both ways, counts that agree with
//! what the other process logged, keys, limits, and a server that survives idle, garbage
//! and killed clients without slowing down or leaking threads and descriptors.
//! (Two hosts, shaped links and injected loss: tests/lab.rs.)

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::{u, Sandbox, Server};
use serde_json::Value;

fn client(sb: &Sandbox, args: &[&str]) -> std::process::Output {
    sb.sockbench()
        .args(args)
        .args(["--format", "json", "-q"])
        .output()
        .unwrap()
}

/// Every result ran and moved something.
fn all_ran(v: &Value, what: &str) {
    let results = v["body"]["results"].as_array().unwrap();
    assert!(!results.is_empty(), "{what}: no results");
    for r in results {
        assert!(
            r["error"].is_null(),
            "{what} {}: {}",
            r["transport"],
            r["error"]
        );
        assert!(
            u(r, "/messages_received") > 0,
            "{what} {}: {r}",
            r["transport"]
        );
    }
}

#[test]
fn every_workload_runs_against_a_local_server_both_ways_over_every_named_transport() {
    let sb = Sandbox::new();
    let server = Server::start(&sb, &[]);
    let addr = server.addr();
    for w in ["stream", "pingpong", "rate", "connect"] {
        for reverse in [false, true] {
            let mut args = vec![w, "--server", &addr, "-t", "all", "-d", "0.15", "-w", "0"];
            if reverse {
                args.push("--reverse");
            }
            let v = crate::common::json_of(&client(&sb, &args));
            let what = format!("{w} reverse={reverse}");
            all_ran(&v, &what);
            let p = &v["body"]["placement"];
            assert_eq!(p["name"], "server", "{what}");
            assert_eq!(p["other_role"], if reverse { "sender" } else { "receiver" });
            assert_eq!(p["server"], addr.as_str());
            assert!(
                p["server_environment"]["kernel"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("Linux")),
                "{p}"
            );
            // Pipes and socketpairs cannot be opened by name: skipped with the reason.
            if w != "connect" {
                let skipped: Vec<&str> = v["body"]["skipped"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|s| s["transport"].as_str())
                    .collect();
                assert_eq!(skipped, ["socketpair", "pipe"], "{what}");
            }
        }
    }
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
    let log = server.log_with("stream shm blocking 64 KiB -P 1 (server sends)");
    assert!(
        log.contains("stream shm blocking 64 KiB -P 1 (server sends)"),
        "{log}"
    );
    assert!(server.stop().0.success());
}

#[test]
fn the_client_and_the_server_count_the_same_bytes_and_messages() {
    let sb = Sandbox::new();
    let server = Server::start(&sb, &[]);
    let addr = server.addr();
    let v = crate::common::json_of(&client(
        &sb,
        &[
            "stream", "--server", &addr, "-t", "tcp", "-s", "4K", "-n", "500", "-w", "0",
        ],
    ));
    let r = &v["body"]["results"][0];
    assert_eq!(u(r, "/bytes_sent"), 500 * 4096);
    assert_eq!(u(r, "/bytes_received"), 500 * 4096);
    // The server's own count, logged by the other process: 2000 KiB in 500 messages.
    let log = server.log_with("received 2048000 bytes");
    assert!(
        log.contains("received 2048000 bytes (1.95 MiB) in 500 messages"),
        "{log}"
    );
    // Reversed: the server sends 300 datagrams, the client receives what arrived.
    let v = crate::common::json_of(&client(
        &sb,
        &[
            "rate", "--server", &addr, "-t", "udp", "-n", "300", "--rate", "20k", "-w", "0", "-R",
        ],
    ));
    let r = &v["body"]["results"][0];
    assert_eq!(u(r, "/messages_sent"), 300);
    assert_eq!(
        u(r, "/messages_received") + u(r, "/messages_lost"),
        300,
        "{r}"
    );
    let run = &r["runs"][0];
    assert_eq!(run["route"], "lo", "{run}");
    assert!(u(run, "/mtu_bytes") > 0);
}

#[test]
fn processes_placement_runs_every_workload_over_every_transport_in_a_child() {
    let sb = Sandbox::new();
    for w in ["stream", "pingpong", "rate", "connect"] {
        for reverse in [false, true] {
            let mut args = vec![
                w,
                "--placement",
                "processes",
                "-t",
                "all",
                "-d",
                "0.1",
                "-w",
                "0",
            ];
            if reverse {
                args.push("-R");
            }
            let v = crate::common::json_of(&client(&sb, &args));
            let what = format!("{w} reverse={reverse}");
            all_ran(&v, &what);
            assert_eq!(v["body"]["placement"]["name"], "processes");
            assert!(v["body"]["skipped"]
                .as_array()
                .unwrap()
                .iter()
                .all(|s| s["transport"] != "pipe"));
        }
    }
    // The child pins its role where --cpus says: the receiver's CPU is the child's.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus >= 2 {
        let v = crate::common::json_of(&client(
            &sb,
            &[
                "stream",
                "--placement",
                "processes",
                "-t",
                "pipe",
                "-d",
                "0.2",
                "--cpus",
                "0,1",
            ],
        ));
        let run = &v["body"]["results"][0]["runs"][0];
        assert_eq!(run["sender"]["on_cpu"][0]["start"], 0, "{run}");
        assert_eq!(run["receiver"]["on_cpu"][0]["start"], 1, "{run}");
        assert_eq!(run["receiver"]["on_cpu"][0]["end"], 1, "{run}");
    }
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
    assert!(crate::common::shm_leftovers().is_empty());
}

#[test]
fn both_ways_at_once_each_direction_is_counted_on_its_own_and_the_sum_is_theirs() {
    let sb = Sandbox::new();
    let server = Server::start(&sb, &[]);
    let addr = server.addr();
    for (placement, transports) in [
        (vec!["--server", addr.as_str()], "tcp,unix,fifo,mq,shm"),
        (vec!["--placement", "processes"], "tcp,pipe,socketpair"),
    ] {
        let mut args = vec![
            "stream", "-t", transports, "-s", "4K", "-n", "300", "-w", "0", "--bidir",
        ];
        args.extend(&placement);
        let v = crate::common::json_of(&client(&sb, &args));
        assert_eq!(v["body"]["placement"]["bidir"], true);
        for r in v["body"]["results"].as_array().unwrap() {
            let t = &r["transport"];
            assert!(r["error"].is_null(), "{t}: {}", r["error"]);
            let run = &r["runs"][0];
            let dirs = run["directions"].as_array().unwrap();
            let names: Vec<&str> = dirs
                .iter()
                .map(|d| d["direction"].as_str().unwrap())
                .collect();
            assert_eq!(names, ["client to server", "server to client"], "{t}");
            for d in dirs {
                assert_eq!(u(d, "/bytes_sent"), 300 * 4096, "{t} {d}");
                assert_eq!(u(d, "/bytes_received"), 300 * 4096, "{t} {d}");
            }
            assert_eq!(u(r, "/bytes_received"), 2 * 300 * 4096, "{t}");
        }
    }
    // Datagrams both ways: each direction's loss is its own sent - received.
    let v = crate::common::json_of(&client(
        &sb,
        &[
            "rate", "--server", &addr, "-t", "udp", "-n", "2000", "--rate", "20k", "-w", "0",
            "--bidir",
        ],
    ));
    let run = &v["body"]["results"][0]["runs"][0];
    for d in run["directions"].as_array().unwrap() {
        assert_eq!(u(d, "/messages_sent"), 2000);
        assert_eq!(
            u(d, "/messages_lost"),
            2000 - u(d, "/messages_received"),
            "{d}"
        );
    }
    assert!(run["udp_receive_buffer_errors"].is_null());
}

#[test]
fn a_key_is_required_proved_both_ways_and_never_optional() {
    let sb = Sandbox::new();
    let key = sb.path().join("k.key");
    let other = sb.path().join("other.key");
    private_key(&key, "correct horse battery staple\n");
    private_key(&other, "not the server's key at all\n");
    let server = Server::start(&sb, &["--key-file", key.to_str().unwrap()]);
    let addr = server.addr();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "pingpong", "--server", &addr, "-t", "tcp", "-n", "100", "-w", "0",
        ];
        args.extend_from_slice(extra);
        client(&sb, &args)
    };
    let ok = run(&["--key-file", key.to_str().unwrap()]);
    assert_eq!(
        u(
            &crate::common::json_of(&ok),
            "/body/results/0/messages_received"
        ),
        100
    );
    let none = run(&[]);
    assert_eq!(none.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&none.stderr).contains("requires a key"));
    let wrong = run(&["--key-file", other.to_str().unwrap()]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("authentication failed"),
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );
    // The keyed server logged the test it ran, and never said it had no key.
    assert!(!server.log_with("pingpong tcp").contains("no --key-file"));
    // A client with a key does not trust a server that asks for none.
    let open = Server::start(&sb, &[]);
    assert!(open.log_with("no --key-file").contains("no --key-file"));
    let out = client(
        &sb,
        &[
            "stream",
            "--server",
            &open.addr(),
            "-n",
            "10",
            "--key-file",
            key.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot prove it holds yours"));
}

#[test]
fn limits_are_the_servers_and_a_busy_server_says_so() {
    let sb = Sandbox::new();
    let server = Server::start(
        &sb,
        &[
            "--max-duration",
            "5s",
            "--max-clients",
            "1",
            "--max-size",
            "1M",
        ],
    );
    let addr = server.addr();
    let out = client(&sb, &["stream", "--server", &addr, "-d", "6"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("up to 5 s"), "{err}");
    let out = client(&sb, &["stream", "--server", &addr, "-s", "2M", "-n", "1"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("limit of 1 to 1048576"));
    // A refusal is logged without -v: it is a test the server would not run.
    let log = server.log_with("limit of 1 to 1048576");
    assert!(log.contains("refused: a 6.0 s run"), "{log}");
    assert!(log.contains("refused: message size 2097152"), "{log}");
    // One long test holds the only slot: the next client waits 2 s for it, then is told
    // the server is busy. (The long one is running once the server has its receiving
    // role's thread, `sb-recv-0` in /proc.)
    let mut long = sb
        .sockbench()
        .args([
            "stream", "--server", &addr, "-t", "tcp", "-d", "4", "-w", "0", "-q",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while !thread_named(server.pid(), "sb-recv-0") {
        assert!(Instant::now() < until, "the long test never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let t = Instant::now();
    let out = client(&sb, &["stream", "--server", &addr, "-n", "10", "-w", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("busy"));
    assert!(
        t.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        t.elapsed()
    );
    assert!(long.wait().unwrap().success());
    // A client that comes while a test ends waits for it instead of being turned away.
    let mut short = sb
        .sockbench()
        .args([
            "stream", "--server", &addr, "-t", "tcp", "-d", "1", "-w", "0", "-q",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    crate::common::json_of(&client(
        &sb,
        &["stream", "--server", &addr, "-n", "10", "-w", "0"],
    ));
    assert!(short.wait().unwrap().success());
    // A run bounded by a count is cut off at the server's --max-duration.
    let strict = Server::start(&sb, &["--max-duration", "1s"]);
    let t = Instant::now();
    let out = client(
        &sb,
        &[
            "rate",
            "--server",
            &strict.addr(),
            "-t",
            "udp",
            "-n",
            "100000000",
            "--rate",
            "1k",
            "-w",
            "0",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("abandoned after 1 s"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
}

#[test]
fn an_idle_connection_delays_no_test_and_is_dropped_at_the_hello_deadline() {
    let sb = Sandbox::new();
    let server = Server::start(&sb, &["--max-clients", "1"]);
    let addr = server.addr();
    let opened = Instant::now();
    let mut idle = TcpStream::connect(&addr).unwrap();
    let t = Instant::now();
    let out = client(
        &sb,
        &["pingpong", "--server", &addr, "-n", "200", "-w", "0"],
    );
    crate::common::json_of(&out);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // The idle connection is told and closed once the 5 s hello deadline passes.
    idle.set_read_timeout(Some(Duration::from_secs(9))).unwrap();
    let mut buf = Vec::new();
    let _ = idle.read_to_end(&mut buf);
    let closed = opened.elapsed();
    assert!(
        closed >= Duration::from_millis(4800) && closed < Duration::from_secs(8),
        "{closed:?}"
    );
    // A connection that never spoke (a port scan, an idle nc) is no test: only -v logs it.
    let silent = idle.local_addr().unwrap().to_string();
    // (The server logs after it hangs up: give it a moment.)
    std::thread::sleep(Duration::from_millis(300));
    let log = server.log_with("pingpong");
    assert!(!log.contains(&silent), "{log}");
}

#[test]
fn garbage_oversized_frames_and_slow_dribbles_are_cut_off_and_the_next_test_runs() {
    let sb = Sandbox::new();
    let server = Server::start(&sb, &["-v"]);
    let addr = server.addr();
    let closes_within = |bytes: &[u8], within: Duration| {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.write_all(bytes).unwrap();
        s.set_read_timeout(Some(within + Duration::from_secs(2)))
            .unwrap();
        let t = Instant::now();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        assert!(t.elapsed() < within, "{:?} for {bytes:?}", t.elapsed());
    };
    // An unknown frame type; a hello announcing ~4 GiB (iperf3 #2072); a hello whose
    // body is not JSON.
    closes_within(&[0xff, 0, 0, 0, 1, 0], Duration::from_secs(1));
    closes_within(&[1, 0xff, 0xff, 0xff, 0xf0], Duration::from_secs(1));
    closes_within(&[1, 0, 0, 0, 3, b'{', b'"', 0x1b], Duration::from_secs(1));
    // A hello dribbled a byte every 700 ms never completes: the hello deadline (5 s)
    // ends it, not the client.
    let dribble = std::thread::spawn({
        let addr = addr.clone();
        move || {
            let mut s = TcpStream::connect(&addr).unwrap();
            let t = Instant::now();
            for b in std::iter::repeat(b'x') {
                if s.write_all(&[b]).is_err() || t.elapsed() > Duration::from_secs(12) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(700));
            }
            t.elapsed()
        }
    });
    let out = client(
        &sb,
        &[
            "stream", "--server", &addr, "-t", "tcp", "-n", "100", "-w", "0",
        ],
    );
    crate::common::json_of(&out);
    let cut = dribble.join().unwrap();
    assert!(cut < Duration::from_secs(9), "{cut:?}");
    let log = server.log_with("announces 4294967280 bytes");
    assert!(log.contains("unknown control frame type 255"), "{log}");
    assert!(log.contains("announces 4294967280 bytes"), "{log}");
    assert!(!log.contains('\u{1b}'), "escape reached the log");
}

fn threads_and_fds(pid: u32) -> (usize, usize) {
    let count = |d: String| std::fs::read_dir(d).map_or(0, |r| r.count());
    (
        count(format!("/proc/{pid}/task")),
        count(format!("/proc/{pid}/fd")),
    )
}

/// Whether a thread of `pid` is called `name`.
fn thread_named(pid: u32, name: &str) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| {
        tasks
            .flatten()
            .any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
    })
}

/// The server's counts once they stop changing (a finished conversation's thread may
/// take a moment to go).
fn settled(pid: u32, want: (usize, usize)) -> (usize, usize) {
    // Returns as soon as the counts are back; the bound only matters when they never come
    // back, and on a machine with every CPU busy (bench/soak-tests.sh's hog mode) the
    // server's threads may wait seconds for a CPU to notice a dead client.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let now = threads_and_fds(pid);
        if now == want || Instant::now() > until {
            return now;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_hundred_tests_with_every_tenth_client_killed_leave_the_server_as_it_was() {
    let sb = Sandbox::new();
    let server = Server::start(&sb, &["--max-clients", "1"]);
    let addr = server.addr();
    let quick = [
        "stream", "--server", &addr, "-t", "tcp", "-n", "50", "-w", "0", "-q",
    ];
    assert!(sb
        .sockbench()
        .args(quick)
        .output()
        .unwrap()
        .status
        .success());
    let base = settled(server.pid(), (0, 0));
    let base = settled(server.pid(), base);
    for i in 1..100 {
        if i % 10 == 0 {
            let mut victim = sb
                .sockbench()
                .args([
                    "stream", "--server", &addr, "-t", "tcp", "-d", "10", "-w", "0", "-q",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(300));
            victim.kill().unwrap();
            victim.wait().unwrap();
            // The next test starts at once: the killed client's slot is free.
            let t = Instant::now();
            let out = sb.sockbench().args(quick).output().unwrap();
            assert!(
                out.status.success(),
                "{}\nserver: {}",
                String::from_utf8_lossy(&out.stderr),
                server.log()
            );
            assert!(
                t.elapsed() < Duration::from_secs(1),
                "test after a kill took {:?}",
                t.elapsed()
            );
        } else {
            let out = sb.sockbench().args(quick).output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    assert_eq!(settled(server.pid(), base), base, "threads and descriptors");
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn a_killed_client_on_a_local_transport_leaves_no_role_blocked_on_the_server() {
    // A dead peer wakes a socket or pipe reader by itself; a queue or a ring does not:
    // the server wakes its own roles (the queue's end marker, the ring's abandon flag).
    let sb = Sandbox::new();
    let server = Server::start(&sb, &[]);
    let addr = server.addr();
    crate::common::json_of(&client(
        &sb,
        &[
            "stream", "--server", &addr, "-t", "mq", "-n", "10", "-w", "0",
        ],
    ));
    let base = settled(server.pid(), (0, 0));
    let base = settled(server.pid(), base);
    for t in ["mq", "shm", "fifo", "unix"] {
        for (w, reverse) in [("stream", false), ("stream", true), ("pingpong", false)] {
            let mut args = vec![w, "--server", &addr, "-t", t, "-d", "10", "-w", "0", "-q"];
            if reverse {
                args.push("-R");
            }
            let mut victim = sb
                .sockbench()
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(400));
            victim.kill().unwrap();
            victim.wait().unwrap();
            assert_eq!(
                settled(server.pid(), base),
                base,
                "{w} {t} reverse={reverse}"
            );
        }
    }
    assert!(crate::common::shm_leftovers().is_empty());
}

#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test build: cargo test --features test-hooks"
)]
fn a_queue_the_server_made_shallower_than_asked_is_reported_as_it_was() {
    // The server's queue depth follows the server's fs.mqueue.msg_max, which the client's
    // plan cannot know: what the queue held comes back with the result.
    let sb = Sandbox::new();
    let server = Server::from_command(
        sb.sockbench()
            .env("SOCKBENCH_TEST_FAULT", "shallow-queue")
            .args(["server", "--listen", "127.0.0.1", "--port", "0"]),
    );
    let addr = server.addr();
    // 4 messages of 1 KiB asked for; the server's queue holds 2 (the client's limit is at
    // least fs.mqueue.msg_max's floor of 10, so its own plan expects all 4).
    let v = crate::common::json_of(&client(
        &sb,
        &[
            "stream", "--server", &addr, "-t", "mq", "-s", "1K", "--sndbuf", "4K", "-n", "50",
            "-w", "0",
        ],
    ));
    let r = &v["body"]["results"][0];
    assert_eq!(r["runs"][0]["sndbuf_bytes"], 2048, "{r}");
    let warnings = v["warnings"].to_string() + &r["warnings"].to_string();
    assert!(
        warnings.contains("asks for a queue of 4 messages, but the queue held 2"),
        "{warnings}"
    );
    // The client's own queue (it receives) is what its plan expected: no such warning.
    let v = crate::common::json_of(&client(
        &sb,
        &[
            "stream", "--server", &addr, "-t", "mq", "-s", "1K", "--sndbuf", "4K", "-n", "50",
            "-w", "0", "-R",
        ],
    ));
    assert_eq!(v["body"]["results"][0]["runs"][0]["sndbuf_bytes"], 4096);
    assert!(!v.to_string().contains("the queue held"), "{v}");
}

#[test]
fn ctrl_c_on_either_side_ends_the_test_promptly_and_the_server_reports_its_count() {
    let sb = Sandbox::new();
    let server = Server::start(&sb, &[]);
    let addr = server.addr();
    let sigint = |c: &Child| {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(c.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
    };
    let c = sb
        .sockbench()
        .args([
            "stream", "--server", &addr, "-t", "tcp", "-d", "5", "-w", "0", "-q", "--format",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let t = Instant::now();
    sigint(&c);
    let out = c.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(out.status.code(), Some(130));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["interrupted"], true);
    // The server goes on serving.
    crate::common::json_of(&client(
        &sb,
        &["stream", "--server", &addr, "-n", "10", "-w", "0"],
    ));
    // Ctrl-C on the server mid-test: the client fails at once, saying why.
    let c = sb
        .sockbench()
        .args([
            "stream", "--server", &addr, "-t", "tcp", "-d", "5", "-w", "0", "-q",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let t = Instant::now();
    let (status, log) = server.stop();
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "the server took {:?} to stop",
        t.elapsed()
    );
    let out = c.wait_with_output().unwrap();
    assert!(status.success());
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    assert_eq!(out.status.code(), Some(1));
    // The cut test is logged, before the server's last line: it waited for its threads.
    let cut = log
        .find("stream tcp blocking 64 KiB -P 1 (server receives): failed: the server is stopping")
        .unwrap_or_else(|| panic!("{log}"));
    assert!(cut < log.find("stopped after 3 tests").unwrap(), "{log}");
    // Polling an idle listening socket is not an accept failure.
    assert!(!log.contains("accept failed"), "{log}");
}

#[test]
fn a_server_out_of_descriptors_says_so_and_serves_again_once_they_are_free() {
    let sb = Sandbox::new();
    if !crate::common::has_prlimit() {
        return;
    }
    // 12 descriptors of the server's own, beside what it inherits from the test runner
    // (cargo-mutants hands down its jobserver's pipes: with them counted against 12, the
    // server could never set up a test).
    let limit = 12 + crate::common::inherited_fds();
    let server = Server::from_command(
        sb.std_cmd("prlimit")
            .arg(format!("--nofile={limit}"))
            .arg(assert_cmd::cargo::cargo_bin("sockbench"))
            .args(["server", "--listen", "127.0.0.1", "--port", "0"]),
    );
    let idle: Vec<TcpStream> = (0..limit + 2)
        .map(|_| TcpStream::connect(server.addr()).unwrap())
        .collect();
    let log = server.log_with("accept failed");
    assert!(log.contains("accept failed: Too many open files"), "{log}");
    assert!(log.contains("ulimit -n"), "{log}");
    // Said once, not every 100 ms while it lasts (then every 10 s, with a count).
    std::thread::sleep(Duration::from_millis(1500));
    let said = server.log().matches("accept failed").count();
    assert_eq!(said, 1, "{}", server.log());
    drop(idle);
    // The idle connections' descriptors come back as their threads see them hang up;
    // then tests run.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let out = client(
            &sb,
            &["stream", "--server", &server.addr(), "-n", "10", "-w", "0"],
        );
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < until,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_server_with_once_serves_one_client_then_exits() {
    let sb = Sandbox::new();
    let mut server = Server::start(&sb, &["--once"]);
    let addr = server.addr();
    // One client, two scenarios: one conversation.
    crate::common::json_of(&client(
        &sb,
        &[
            "stream", "--server", &addr, "-t", "tcp,udp", "-n", "100", "-w", "0",
        ],
    ));
    let until = Instant::now() + Duration::from_secs(3);
    let status = loop {
        if let Some(s) = server.exited() {
            break s;
        }
        assert!(
            Instant::now() < until,
            "the server did not exit after its one client"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    assert!(server
        .log_with("stopped after 2 tests")
        .contains("stopped after 2 tests (0 refused)"));
}

#[test]
fn bad_server_flags_and_unreachable_servers_say_what_to_do() {
    let sb = Sandbox::new();
    let usage = |args: &[&str], says: &str| {
        let out = sb.sockbench().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    };
    usage(
        &["stream", "--reverse"],
        "--server HOST or --placement processes",
    );
    usage(&["stream", "--key-file", "k"], "--server");
    usage(
        &["stream", "--server", "127.0.0.1:1", "-t", "pipe"],
        "--placement processes",
    );
    usage(
        &[
            "stream",
            "--server",
            "127.0.0.1",
            "-t",
            "tcp",
            "--bind",
            "127.0.0.1",
        ],
        "do not apply with --server",
    );
    usage(
        &[
            "stream",
            "--server",
            "127.0.0.1",
            "--key-file",
            "/nonexistent/k",
        ],
        "cannot read key file",
    );
    usage(&["server", "--max-duration", "abc"], "--max-duration");
    usage(
        &["server", "--key-file", "/nonexistent/k"],
        "cannot read key file",
    );
    // Nothing listens on port 1.
    let out = sb
        .sockbench()
        .args(["stream", "--server", "127.0.0.1:1", "-n", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is `sockbench server` running there"));
    // A port in use.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = sb
        .sockbench()
        .args(["server", "--listen", "127.0.0.1", "--port", &port])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use"));
}

/// Write a key file as the README makes one: mode 600.
fn private_key(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// `sockbench ARGS`, killed if it has not exited within a minute (a hang, not a slow
/// machine: every case here is refused before anything is opened or listened on).
fn refused(sb: &Sandbox, args: &[&str]) -> (Option<i32>, String) {
    let out = sb
        .cmd()
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_key_file_others_can_read_is_refused_with_the_chmod_that_fixes_it() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let key = sb.path().join("k.key");
    let k = key.to_str().unwrap();
    // What `head -c 32 /dev/urandom | base64 > k.key` makes under umask 022.
    std::fs::write(&key, "correct horse battery staple\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let chmod = format!("is open to others (mode 644): a key must be private; run `chmod 600 {k}`");
    for args in [
        vec![
            "server",
            "--listen",
            "127.0.0.1",
            "--port",
            "0",
            "--key-file",
            k,
        ],
        vec![
            "stream",
            "--server",
            "127.0.0.1:1",
            "-n",
            "1",
            "--key-file",
            k,
        ],
        vec!["mesh", "--hosts", "a,b", "--key-file", k],
    ] {
        let (code, err) = refused(&sb, &args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(&chmod), "{args:?}: {err}");
    }
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let (code, err) = refused(&sb, &["server", "--port", "0", "--key-file", k]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is open to its group (mode 640)"), "{err}");
}

#[test]
fn a_key_file_that_is_a_fifo_or_a_device_is_refused_at_once() {
    let sb = Sandbox::new();
    // No writer ever opens this FIFO: opening it for reading would block for ever.
    let fifo = sb.path().join("fifo.key");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let f = fifo.to_str().unwrap();
    for (key, says) in [
        (f, "fifo.key is a FIFO, not a regular file"),
        ("/dev/zero", "key file /dev/zero is a character device"),
    ] {
        for args in [
            vec![
                "server",
                "--listen",
                "127.0.0.1",
                "--port",
                "0",
                "--key-file",
                key,
            ],
            vec![
                "stream",
                "--server",
                "127.0.0.1:1",
                "-n",
                "1",
                "--key-file",
                key,
            ],
        ] {
            let (code, err) = refused(&sb, &args);
            assert_eq!(code, Some(2), "{args:?}: {err}");
            assert!(err.contains(says), "{args:?}: {err}");
        }
    }
}

#[test]
fn a_server_path_that_is_no_directory_or_a_max_memory_of_0_is_a_usage_error_before_listening() {
    let sb = Sandbox::new();
    let file = sb.path().join("file");
    std::fs::write(&file, "").unwrap();
    let missing = sb.path().join("missing").display().to_string();
    let file = file.display().to_string();
    for (args, says) in [
        (vec!["--path", missing.as_str()], "mkdir -p"),
        (vec!["--path", file.as_str()], "not a directory"),
        (vec!["--max-memory", "0"], "0 would refuse every test"),
    ] {
        let mut all = vec!["server", "--listen", "127.0.0.1", "--port", "0"];
        all.extend(&args);
        let (code, err) = refused(&sb, &all);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("listening"), "{args:?}: {err}");
    }
}

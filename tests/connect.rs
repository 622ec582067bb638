//! `connect`: a fresh connection per exchange, each phase timed, nothing left behind.

use crate::common::{json, u, Sandbox};

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
    for r in v["body"]["results"].as_array().unwrap() {
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
        // Both sides did work: 200 dials, sends and closes; 200 accepts, reads, answers.
        for side in ["sender", "receiver"] {
            let cpu = r["runs"][0][side]["cpu_seconds"].as_f64().unwrap();
            assert!(cpu > 0.0, "{t}: the {side} used no CPU");
        }
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
    let r = &v["body"]["results"][0];
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
    let names: Vec<_> = v["body"]["results"]
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

#[test]
fn a_silent_stranger_does_not_stall_the_server() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let sb = Sandbox::new();
    let bin = assert_cmd::cargo::cargo_bin("sockbench");
    let child = std::process::Command::new(bin)
        .args([
            "connect", "-t", "tcp", "-d", "1.5", "-w", "0", "--format", "json", "-q", "--bind",
        ])
        .arg(format!("127.0.0.1:{port}"))
        .env("TMPDIR", sb.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Connect and say nothing, holding the connection for the rest of the run: as soon
    // as the listener is up, however long a loaded machine takes to start sockbench (a
    // refused dial never reaches it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let _stranger = loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(e) if std::time::Instant::now() < deadline => {
                assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("sockbench never listened on {port}: {e}"),
        }
    };
    let t = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        u(&v, "/body/results/0/messages_sent"),
        u(&v, "/body/results/0/messages_received"),
        "the stranger is not counted"
    );
}

#[test]
fn too_many_open_connections_for_the_fd_limit_are_refused_up_front() {
    let sb = Sandbox::new();
    let bin = assert_cmd::cargo::cargo_bin("sockbench");
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -n 256 && exec {} connect -t unix --open 500",
            bin.display()
        ))
        .env("TMPDIR", sb.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("file descriptors"));
}

#[test]
fn open_keeps_no_more_than_n_connections_at_once() {
    // 300 connections through a descriptor limit of 90: only possible if each is closed
    // once --open 8 are open (each costs two descriptors, client and accepted).
    let sb = Sandbox::new();
    let out = sb
        .std_cmd("prlimit")
        .arg("--nofile=90")
        .arg(assert_cmd::cargo::cargo_bin("sockbench"))
        .args([
            "connect", "-t", "tcp,unix", "-n", "300", "--open", "8", "-w", "0",
        ])
        .args(["--format", "json", "-q"])
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in v["body"]["results"].as_array().unwrap() {
        assert_eq!(u(r, "/messages_sent"), 300);
        assert_eq!(u(r, "/latencies/close/count"), 300, "{r}");
    }
}

#[test]
fn open_holds_n_connections_at_once() {
    // Mid-run, the namespace's socket table shows the connections the client holds open:
    // --open 16 (one may be between close and dial, or mid-dial when it stopped). Only the client's sockets are
    // counted (those whose peer is the listener's port, the port every connection
    // shares): the client's state follows its own calls (established when connect
    // returns, not once close is called), while the accepted ends follow the kernel's
    // handling of the handshake and of the close, which on a busy CPU lags by dozens of
    // connections either way.
    let sb = Sandbox::new();
    let Some(out) = crate::common::in_netns(
        &sb,
        "true",
        &[
            "connect", "-t", "tcp", "--open", "16", "-d", "1.5", "-w", "0", "-q",
        ],
        // The socket table is read with sockbench stopped (every thread in state T):
        // `ss` walks the table a bucket at a time, and while connections come and go a
        // walk can meet a new connection and an old one not yet closed.
        "sleep 0.7; kill -STOP $SB_PID; \
         i=0; until ! sed 's/.*) //' /proc/$SB_PID/task/*/stat | grep -qv '^[Tt] ' || [ $i -ge 300 ]; \
         do i=$((i + 1)); sleep 0.01; done; \
         ss -Htn state established > \"$TMPDIR/est\"; kill -CONT $SB_PID; wait $SB_PID",
        "awk '{ n = split($3, a, \":\"); m = split($4, b, \":\"); local[NR] = a[n]; peer[NR] = b[m]; \
         seen[a[n]]++; seen[b[m]]++ } END { for (p in seen) if (!l || seen[p] > seen[l]) l = p; \
         c = 0; for (i = 1; i <= NR; i++) if (peer[i] == l) c++; \
         print \"client_established=\" c; print \"established=\" NR }' \"$TMPDIR/est\"",
    ) else {
        return;
    };
    assert!(out.status.success());
    let k = crate::common::netns_figures(&out);
    assert!(
        (15..=16).contains(&k["client_established"]),
        "{k:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

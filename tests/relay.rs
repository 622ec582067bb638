//! `sockbench relay`: every method relays the source's bytes exactly (the sink checks
//! each one), the three counts agree, the system calls it reports are the ones strace
//! sees, the bytes it reports are the ones the kernel carried, refusals are usage errors
//! that say why, and Ctrl-C stops it with what it measured and nothing left behind.

use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{json, u, Sandbox};
use serde_json::Value;

fn results(v: &Value) -> &Vec<Value> {
    v["body"]["results"].as_array().expect("results")
}

/// The methods this build and kernel can run (the others are listed as skipped).
fn methods(sb: &Sandbox) -> Vec<String> {
    let v = json(sb, &["relay", "-m", "all", "--connections", "1", "-s", "1"]);
    results(&v)
        .iter()
        .map(|r| r["method"].as_str().unwrap().to_string())
        .collect()
}

fn check_exact(v: &Value, connections: u64) {
    for r in results(v) {
        let what = format!("{} {} {}", r["transport"], r["method"], r["size_bytes"]);
        assert!(r["error"].is_null(), "{what}: {}", r["error"]);
        let want = connections * u(r, "/size_bytes");
        assert_eq!(u(r, "/bytes_sent"), want, "{what}");
        assert_eq!(u(r, "/bytes_relayed"), want, "{what}");
        assert_eq!(u(r, "/bytes_received"), want, "{what}");
        assert_eq!(u(r, "/connections"), connections, "{what}");
        assert_eq!(u(r, "/messages"), connections, "{what}");
        // Each connection needs a read that sees its end, and a write per byte at most.
        assert!(u(r, "/syscalls") >= 2 * connections, "{what}");
    }
}

#[test]
fn every_method_relays_every_byte_over_tcp_and_unix() {
    let sb = Sandbox::new();
    let all = methods(&sb);
    assert!(
        all.len() >= 4,
        "read-write, vectored, buffered and splice run anywhere: {all:?}"
    );
    let v = json(
        &sb,
        &[
            "relay",
            "-m",
            "all",
            "-t",
            "tcp,unix",
            "-s",
            "1,10000,4M",
            "--connections",
            "1",
        ],
    );
    assert_eq!(results(&v).len(), 2 * 3 * all.len());
    check_exact(&v, 1);
    let v = json(
        &sb,
        &[
            "relay",
            "-m",
            "all",
            "-t",
            "tcp,unix",
            "-s",
            "1,10000",
            "--connections",
            "1000",
            "-P",
            "4",
        ],
    );
    check_exact(&v, 1000);
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn a_thousand_connections_of_four_mebibytes_each_arrive_whole() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "relay",
            "-m",
            "all",
            "-t",
            "tcp,unix",
            "-s",
            "4M",
            "--connections",
            "1000",
            "-P",
            "2",
        ],
    );
    check_exact(&v, 1000);
}

#[test]
fn long_streams_carry_exactly_the_bytes_asked_for_on_every_transport() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "relay",
            "-m",
            "read-write,splice",
            "-t",
            "all",
            "-s",
            "64K",
            "--bytes",
            "3000001",
            "-P",
            "2",
        ],
    );
    assert_eq!(results(&v).len(), 6);
    for r in results(&v) {
        assert_eq!(u(r, "/bytes_received"), 6_000_002, "{r}");
        assert_eq!(u(r, "/bytes_relayed"), 6_000_002, "{r}");
        // 3000001 bytes in 64 KiB messages: 46 messages, the last one short, per stream.
        assert_eq!(u(r, "/messages"), 92, "{r}");
        assert!(r["bits_per_second"].as_f64().unwrap() > 0.0);
    }
    let splice = results(&v)
        .iter()
        .find(|r| r["method"] == "splice")
        .unwrap();
    assert!(u(splice, "/pipe_size_bytes") >= 65536, "{splice}");
}

#[test]
fn pingpong_times_each_message_from_source_to_sink() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "relay",
            "-m",
            "read-write,splice",
            "--mode",
            "pingpong",
            "-n",
            "2000",
            "-s",
            "100",
        ],
    );
    for r in results(&v) {
        assert_eq!(u(r, "/messages"), 2000, "{r}");
        assert_eq!(v["body"]["count"], 2000);
        assert_eq!(u(r, "/bytes_received"), 200_000, "{r}");
        let l = &r["latency_ns"];
        let (min, p50, p99, max) = (u(l, "/min"), u(l, "/p50"), u(l, "/p99"), u(l, "/max"));
        assert!(min > 0 && min <= p50 && p50 <= p99 && p99 <= max, "{l}");
        // Through two loopback hops and back to the source: under 100 ms, surely.
        assert!(p50 < 100_000_000, "{l}");
    }
}

#[test]
fn the_go_benchmarks_shape_reports_cost_per_connection() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "relay",
            "-m",
            "read-write",
            "--connections",
            "500",
            "-s",
            "10K",
            "-P",
            "4",
        ],
    );
    assert_eq!(v["body"]["connections"], 500);
    assert_eq!(v["body"]["parallel"], 4);
    // Short connections run to their count, not for a time.
    assert!(
        v["body"]["duration_seconds"].is_null(),
        "{}",
        v["body"]["duration_seconds"]
    );
    let r = &results(&v)[0];
    assert_eq!(u(r, "/bytes_received"), 500 * 10240);
    let ns = r["ns_per_message"].as_f64().unwrap();
    let secs = r["duration_seconds"].as_f64().unwrap();
    assert!((ns * 500.0 / 1e9 - secs).abs() < 1e-6, "{ns} {secs}");
    let cpu = r["relay_cpu_seconds"].as_f64().unwrap();
    let per = r["relay_cpu_ns_per_message"].as_f64().unwrap();
    assert!(cpu > 0.0 && (per * 500.0 / 1e9 - cpu).abs() < 1e-6, "{r}");
}

/// A sweep over sizes names where splice overtakes the copy methods, or says it does not;
/// from single runs (issue 29), that it cannot tell.
#[test]
fn a_size_sweep_prints_the_crossover() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "relay",
            "-m",
            "read-write,splice",
            "-s",
            "4K,1M",
            "--bytes",
            "4M",
            "-q",
        ])
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("crossover: tcp: splice"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("single run per size") && line.contains("cannot be told"),
        "{line}"
    );
    assert!(!line.contains("overtakes the copy methods from"), "{line}");
    assert!(text.contains("pipe granted: splice 64 KiB"), "{text}");
    let out = sb
        .cmd()
        .args([
            "relay",
            "-m",
            "read-write,splice",
            "-s",
            "4K,1M",
            "--bytes",
            "4M",
            "--runs",
            "3",
        ])
        .args(["-q", "--format", "json"])
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &v["body"]["crossovers"][0];
    let summary = c["summary"].as_str().unwrap();
    assert!(
        summary.contains("overtakes the copy methods from")
            || summary.contains("does not overtake"),
        "{summary}"
    );
    assert_eq!(
        c["size_bytes"].is_null(),
        summary.contains("does not overtake"),
        "{c}"
    );
}

/// Issue 29: a single default `relay --connections 5000 -s 10K` ranked read-write 4x
/// slower than vectored; with `--runs 3` they were equal. Each row shows its runs' spread,
/// the table's cells are the document's values, and the ranking names a winner only
/// beyond the noise, never from one run.
#[test]
fn each_method_shows_its_runs_and_a_winner_is_named_only_beyond_the_noise() {
    use sockbench::measure::ranking::spread_cell;
    use sockbench::vocab::units::format_bits_per_second;
    let sb = Sandbox::new();
    for runs in ["1", "3"] {
        let out = sb
            .cmd()
            .args([
                "relay",
                "--connections",
                "100",
                "-s",
                "10K",
                "-m",
                "read-write,vectored",
            ])
            .args(["--runs", runs, "-q", "--export-json", "r.json"])
            .current_dir(sb.path())
            .output()
            .unwrap();
        crate::common::assert_success(&out);
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(sb.path().join("r.json")).unwrap())
                .unwrap();
        for r in results(&v) {
            let method = r["method"].as_str().unwrap();
            let each: Vec<f64> = (r["runs_bits_per_second"].as_array().unwrap().iter())
                .map(|x| x.as_f64().unwrap())
                .collect();
            assert_eq!(each.len().to_string(), runs, "{r}");
            let row: Vec<&str> = (text.lines())
                .find(|l| l.contains(&format!(" {method} ")))
                .unwrap_or_else(|| panic!("{text}"))
                .split(['│', '┆'])
                .map(str::trim)
                .collect();
            assert_eq!(
                row[4],
                format_bits_per_second(r["bits_per_second"].as_f64().unwrap())
            );
            assert_eq!(
                row[5],
                spread_cell(&each, &format_bits_per_second),
                "{method}: {text}"
            );
        }
        let rk = &v["body"]["rankings"][0];
        assert_eq!(rk["group"], "tcp 10 KiB");
        assert_eq!(rk["entries"].as_array().unwrap().len(), 2, "{rk}");
        let line = (text.lines())
            .find(|l| l.starts_with("ranking: "))
            .unwrap_or_else(|| panic!("{text}"));
        if runs == "1" {
            assert_eq!(rk["outcome"], "single run", "{rk}");
            assert!(rk["winner"].is_null(), "{rk}");
            assert!(
                line.contains("single run, so the noise is unknown"),
                "{line}"
            );
            continue;
        }
        // The leader's lead is judged: a winner only when its test says so.
        match rk["winner"].as_str() {
            Some(w) => {
                assert_eq!(rk["outcome"], "winner");
                assert_eq!(rk["entries"][1]["leader_is"], "faster", "{rk}");
                assert!(line.contains(&format!("fastest method {w} (")), "{line}");
            }
            None => {
                assert_eq!(rk["outcome"], "within the noise");
                assert_ne!(rk["entries"][1]["leader_is"], "faster", "{rk}");
                assert!(line.contains("no fastest method"), "{line}");
            }
        }
        for e in rk["entries"].as_array().unwrap() {
            let r = (results(&v).iter())
                .find(|r| r["method"] == e["name"])
                .unwrap();
            let each: Vec<f64> = (r["runs_bits_per_second"].as_array().unwrap().iter())
                .map(|x| x.as_f64().unwrap())
                .collect();
            let min = each.iter().copied().fold(f64::INFINITY, f64::min);
            assert_eq!(e["min"].as_f64(), Some(min), "{e}");
        }
    }
}

#[test]
fn refusals_are_usage_errors_that_say_what_to_do() {
    let sb = Sandbox::new();
    for (args, says) in [
        (vec!["-m", "sendfile"], "stream --send sendfile"),
        (vec!["-m", "copy"], "unknown relay method"),
        (vec!["-t", "udp"], "tcp, tcp6 or unix"),
        (vec!["-t", "pipe"], "tcp, tcp6 or unix"),
        (vec!["-s", "abc"], "--size"),
        (vec!["--buffer", "0"], "--buffer"),
        (vec!["--iovecs", "0"], "--iovecs"),
        (vec!["--iovecs", "8", "--buffer", "4"], "--iovecs"),
        (
            vec!["--mode", "pingpong", "-P", "2"],
            "one message at a time",
        ),
        (vec!["-n", "10"], "pingpong"),
        (
            vec!["--mode", "pingpong", "--placement", "processes"],
            "--placement threads",
        ),
        (
            vec![
                "--listen",
                "127.0.0.1:0",
                "--to",
                "127.0.0.1:1",
                "-m",
                "splice",
                "-i",
                "1",
            ],
            "belong to the benchmark",
        ),
        (
            vec!["--mode", "pingpong", "-m", "buffered"],
            "never arrives",
        ),
        (
            vec![
                "-m",
                "buffered",
                "--listen",
                "127.0.0.1:0",
                "--to",
                "127.0.0.1:1",
            ],
            "never arrives",
        ),
        (
            vec!["--listen", "127.0.0.1:0", "--to", "127.0.0.1:1"],
            "one method",
        ),
        (
            vec![
                "-m",
                "splice",
                "--listen",
                &*Box::leak(format!("/tmp/{}", "x".repeat(110)).into_boxed_str()),
                "--to",
                "127.0.0.1:1",
            ],
            "at most 107",
        ),
    ] {
        let out = sb.cmd().arg("relay").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_port_in_use_is_a_runtime_error() {
    let sb = Sandbox::new();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let at = taken.local_addr().unwrap().to_string();
    let out = sb
        .cmd()
        .args([
            "relay",
            "-m",
            "read-write",
            "--listen",
            &at,
            "--to",
            "127.0.0.1:1",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot listen on") && err.contains("another port"),
        "{err}"
    );
}

/// Start the relay-only form under `wrapper` (e.g. strace) copying to `to`; its port.
fn relay_only(
    sb: &Sandbox,
    wrapper: &[&str],
    method: &str,
    to: &str,
) -> (std::process::Child, u16) {
    let bin = assert_cmd::cargo::cargo_bin("sockbench");
    let mut cmd = if wrapper.is_empty() {
        sb.std_cmd(&bin)
    } else {
        let mut c = sb.std_cmd(wrapper[0]);
        c.args(&wrapper[1..]).arg(&bin);
        c
    };
    cmd.args([
        "relay",
        "-m",
        method,
        "--listen",
        "127.0.0.1:0",
        "--to",
        to,
        "--format",
        "json",
    ]);
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines
        .find(|l| l.as_ref().is_ok_and(|l| l.contains("listening on")))
        .unwrap()
        .unwrap();
    let port = first
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {first:?}"));
    std::thread::spawn(move || lines.for_each(drop));
    (child, port)
}

/// Send `n` bytes through the relay at `port` to a sink that answers with `back` bytes
/// before the end; what the client got back.
fn through(port: u16, sink: TcpListener, n: usize, back: usize) -> usize {
    let sink_thread = std::thread::spawn(move || {
        let (mut s, _) = sink.accept().unwrap();
        s.write_all(&vec![7u8; back]).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), n);
        assert!(got.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    });
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    c.write_all(&data).unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    sink_thread.join().unwrap();
    got.len()
}

/// Ctrl-C to the relay (under a wrapper such as strace, which ignores SIGINT while its
/// command runs, to the wrapper's child), then its JSON.
fn stop(mut child: std::process::Child) -> Value {
    let children = format!("/proc/{0}/task/{0}/children", child.id());
    let pid = std::fs::read_to_string(children)
        .ok()
        .and_then(|c| c.split_whitespace().next()?.parse().ok())
        .unwrap_or(child.id() as i32);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(
        status.code() == Some(130) || status.code() == Some(0),
        "{status:?}"
    );
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn the_relay_only_form_copies_both_ways_and_counts_what_it_copied() {
    let sb = Sandbox::new();
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let to = sink.local_addr().unwrap().to_string();
    let (child, port) = relay_only(&sb, &[], "read-write", &to);
    assert_eq!(through(port, sink, 3_000_000, 1234), 1234);
    let v = stop(child);
    let r = &v["body"]["relay_only"];
    assert_eq!(u(r, "/connections"), 1, "{v}");
    assert_eq!(u(r, "/bytes_forward"), 3_000_000, "{v}");
    assert_eq!(u(r, "/bytes_backward"), 1234, "{v}");
    assert_eq!(u(r, "/failed"), 0, "{v}");
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

/// Per system call, the calls strace counted in `log` (`strace -c` table).
fn strace_calls(log: &std::path::Path) -> std::collections::HashMap<String, u64> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((f.last()?.to_string(), f.get(3)?.parse().ok()?))
        })
        .collect()
}

/// The system calls relay reports are the ones the kernel saw, counted by strace.
#[test]
fn the_system_calls_it_counts_are_the_ones_strace_sees() {
    if !Command::new("strace")
        .args(["-o", "/dev/null", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("skipped: strace is not installed or ptrace is not permitted");
        return;
    }
    let sb = Sandbox::new();
    let all = methods(&sb);
    for (method, names) in [
        // std's TcpStream reads with recv(2) and writes with send(2).
        ("read-write", &["recvfrom", "sendto"][..]),
        ("vectored", &["readv", "writev"][..]),
        ("splice", &["splice"][..]),
        ("io-uring", &["io_uring_enter"][..]),
        ("io-uring-splice", &["io_uring_enter"][..]),
    ] {
        if !all.iter().any(|m| m == method) {
            eprintln!("skipped {method}: not available here");
            continue;
        }
        let log = sb.path().join(format!("{method}.strace"));
        let log_s = log.to_str().unwrap();
        let sink = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = sink.local_addr().unwrap().to_string();
        let (child, port) = relay_only(&sb, &["strace", "-f", "-c", "-o", log_s], method, &to);
        through(port, sink, 8 << 20, 0);
        let v = stop(child);
        let counted = u(&v, "/body/relay_only/syscalls");
        let calls = strace_calls(&log);
        let seen: u64 = names
            .iter()
            .map(|n| calls.get(*n).copied().unwrap_or(0))
            .sum();
        // What strace sees beyond the copies: the lines printed on stderr and stdout.
        assert!(
            seen >= counted && seen <= counted + 8,
            "{method}: sockbench counted {counted}, strace saw {seen} ({calls:?})"
        );
        // 8 MiB in at most 64 KiB per call, both ways: at least 128 calls each way.
        assert!(counted >= 2 * 128, "{method}: {counted}");
        std::fs::remove_file(&log).unwrap();
    }
}

/// In a network namespace of its own, loopback carries each relayed byte twice (source
/// to relay, relay to sink), plus headers and acknowledgements.
#[test]
fn loopback_carries_every_relayed_byte_twice() {
    let sb = Sandbox::new();
    let Some((v, k)) = crate::common::json_in_netns(
        &sb,
        "true",
        // No warm-up: its traffic would cross loopback too.
        &[
            "relay", "-m", "splice", "--bytes", "32M", "-s", "64K", "-w", "0",
        ],
        crate::common::LO_COUNTERS,
    ) else {
        return;
    };
    let relayed = u(&results(&v)[0], "/bytes_relayed");
    assert_eq!(relayed, 32 << 20);
    let lo = k["lo_bytes"];
    assert!(
        lo >= 2 * relayed && lo <= 2 * relayed + relayed / 20,
        "loopback carried {lo} bytes for {relayed} relayed"
    );
    // With a warm-up, its traffic crosses loopback too, and is not counted as relayed.
    let Some((v, k)) = crate::common::json_in_netns(
        &sb,
        "true",
        &[
            "relay", "-m", "splice", "--bytes", "32M", "-s", "64K", "-w", "0.2",
        ],
        crate::common::LO_COUNTERS,
    ) else {
        return;
    };
    assert_eq!(u(&results(&v)[0], "/bytes_relayed"), 32 << 20);
    let lo = k["lo_bytes"];
    assert!(
        lo > 2 * relayed + relayed / 20,
        "loopback carried {lo} bytes for {relayed} relayed after a 0.2 s warm-up"
    );
}

/// Ctrl-C in the middle of a relay's measured run: the document says it was interrupted
/// and keeps what was relayed (every byte the source sent, at the sink), and nothing is
/// left behind. The stop is promised within 100 ms, so a run whose roles do not report
/// within 50 ms of the Ctrl-C is dropped whole, and says nothing it did not measure; a
/// CPU hog beside the test can starve them that long (the soak's hog mode saw it once in
/// five), so a dropped run is tried again, up to five times, and one must be kept.
#[test]
fn ctrl_c_prints_what_was_relayed_and_leaves_nothing_behind() {
    let sb = Sandbox::new();
    let mut kept = None;
    for attempt in 1..=5 {
        let mut child = sb
            .sockbench()
            .args([
                "relay",
                "-m",
                "read-write",
                "-t",
                "unix",
                "-d",
                "30",
                "-w",
                "0",
                "-i",
                "0.05",
                "--format",
                "json",
                "-q",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // With no warm-up, the first interval's line says the measured run is on (a
        // fixed wait could end before it began, on a loaded machine).
        let (tx, lines) = std::sync::mpsc::channel();
        let err = std::io::BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in err.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        loop {
            match lines.recv_timeout(Duration::from_secs(30)) {
                Ok(line) if line.starts_with("relay unix") => break,
                Ok(_) => {}
                Err(e) => panic!("no interval line from the relay in 30 s: {e}"),
            }
        }
        let t = Instant::now();
        let v = stop(child);
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        assert_eq!(v["interrupted"], true);
        assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
        if let Some(r) = results(&v).first() {
            kept = Some(r.clone());
            break;
        }
        eprintln!("attempt {attempt}: the run was dropped (its roles missed the grace)");
    }
    let r = kept.expect("in five tries, Ctrl-C never kept the run it cut short");
    assert!(u(&r, "/bytes_received") > 0, "{r}");
    assert_eq!(u(&r, "/bytes_received"), u(&r, "/bytes_sent"));
}

/// Real output of every kind of relay run validates against the one document's schema
/// (which `tests/schema.rs` keeps equal to what the code generates).
#[test]
fn real_output_validates_against_the_documents_schema() {
    let sb = Sandbox::new();
    for doc in [
        json(
            &sb,
            &["relay", "-m", "all", "-s", "1K,64K", "--bytes", "1M"],
        ),
        json(
            &sb,
            &["relay", "-m", "splice", "--mode", "pingpong", "-n", "100"],
        ),
    ] {
        assert_eq!(doc["kind"], "relay");
        assert_eq!(doc["schema_version"], sockbench::report::SCHEMA_VERSION);
        assert!(doc["environment"]["kernel"].is_string());
        assert!(doc["started_at"].is_string() && doc["ended_at"].is_string());
        crate::common::assert_valid(&doc);
    }
}

/// A test build's sink that fails at its second connection: every other role stops at
/// once (no copy waits on a peer that is gone), the run fails and names the sink.
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test build: cargo test --features test-hooks"
)]
#[test]
fn a_failing_role_stops_the_others_at_once() {
    let sb = Sandbox::new();
    for method in ["read-write", "splice", "io-uring", "async"] {
        let t = Instant::now();
        let out = sb
            .cmd()
            .env("SOCKBENCH_TEST_FAULT", "relay-sink-fails")
            .args([
                "relay",
                "-m",
                method,
                "-s",
                "4M",
                "--connections",
                "200",
                "-P",
                "4",
                "-q",
            ])
            .timeout(Duration::from_secs(20))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{method}: {text}");
        assert!(text.contains("sink: test fault"), "{method}: {text}");
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{method}: {:?}",
            t.elapsed()
        );
    }
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

/// A test build's source that sends one wrong byte: the sink catches it.
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test build: cargo test --features test-hooks"
)]
#[test]
fn one_wrong_byte_fails_the_run() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .env("SOCKBENCH_TEST_FAULT", "relay-source-corrupts")
        .args([
            "relay",
            "-m",
            "splice",
            "-s",
            "10000",
            "--connections",
            "3",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = v["body"]["results"][0]["error"].as_str().unwrap();
    assert!(e.contains("at offset 5000 of a connection"), "{e}");
}

#[test]
fn the_relay_only_form_outlasts_running_out_of_descriptors() {
    // With 16 descriptors, a burst of idle clients exhausts them: the accepts that fail
    // are counted, and once the clients hang up the relay serves again; it never ends on
    // its own (once, one accept error stopped it with status 0).
    if !crate::common::has_prlimit() {
        return;
    }
    let sb = Sandbox::new();
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let to = sink.local_addr().unwrap().to_string();
    let (mut child, port) = relay_only(&sb, &["prlimit", "--nofile=16"], "read-write", &to);
    let idle: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "the relay ended");
    drop(idle);
    // The relay still relays (its held connections end as the clients go). The sink
    // first takes the idle clients' upstream connections, empty, then the real one.
    let sink_thread = std::thread::spawn(move || loop {
        let (mut s, _) = sink.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        if !got.is_empty() {
            return got.len();
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(&vec![5u8; 100_000]).unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut back = Vec::new();
    let _ = c.read_to_end(&mut back);
    assert_eq!(sink_thread.join().unwrap(), 100_000);
    let v = stop(child);
    let o = &v["body"]["relay_only"];
    assert!(o["failed"].as_u64().unwrap() >= 1, "{o}");
    assert!(
        o["first_error"]
            .as_str()
            .is_some_and(|e| e.contains("Too many open files")),
        "{o}"
    );
}

/// The relay's CPU time against the kernel's count for its thread
/// (/proc/PID/task/TID/stat, read while the worker is held after its measurement).
#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test build: cargo test --features test-hooks"
)]
fn the_relays_cpu_time_is_what_the_kernel_charged_its_thread() {
    use std::io::BufRead;
    let sb = Sandbox::new();
    let mut child = sb
        .sockbench()
        .env("SOCKBENCH_TEST_HOLD", "relay-end:1500")
        .args([
            "relay",
            "-m",
            "read-write",
            "-t",
            "tcp",
            "-d",
            "1",
            // No warm-up, so the held relay thread is the measured run's.
            "-w",
            "0",
            "--format",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 && !line.contains("holding relay-end") {
        said.push_str(&line);
        line.clear();
    }
    assert!(
        line.contains("holding relay-end"),
        "the relay never held: {said}"
    );
    // The worker has measured itself and waits: its CPU time is final.
    let tick = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap() as f64;
    let mut kernel = None;
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() == "sb-relay" {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap();
            // Past the ")" that ends the name: state is field 3, utime 14, stime 15.
            let f: Vec<&str> = stat
                .rsplit_once(')')
                .unwrap()
                .1
                .split_whitespace()
                .collect();
            let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
            kernel = Some(ticks / tick);
        }
    }
    let kernel = kernel.expect("a thread named sb-relay");
    let _ = std::io::Read::read_to_end(&mut err, &mut Vec::new());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &results(&v)[0];
    let measured = r["relay_cpu_seconds"].as_f64().unwrap();
    // The kernel counts in ticks, from the thread's start (its setup before the run
    // began is a few accepts and connects): within two ticks and 5%.
    assert!(
        (measured - kernel).abs() <= 2.0 / tick + 0.05 * kernel,
        "sockbench says the relay used {measured} s of CPU, the kernel charged its thread {kernel} s"
    );
    assert!(measured > 0.05, "a 1 s relay run used {measured} s of CPU");
    eprintln!("relay CPU: sockbench {measured:.3} s, the kernel {kernel:.3} s");
}

/// The relay and the sink in a child process: every byte still arrives and the counts
/// agree, the relay's thread is found in the child (not in this sockbench), its interval
/// lines add up to what the sink received, and the document says where it ran.
#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test build: cargo test --features test-hooks"
)]
fn with_placement_processes_the_relay_runs_in_a_child_and_every_byte_arrives() {
    let sb = Sandbox::new();
    for (t, shape) in [
        ("tcp", &["--bytes", "8M", "-s", "64K"][..]),
        (
            "unix",
            &["--connections", "200", "-s", "10K", "-P", "2"][..],
        ),
    ] {
        let mut child = sb
            .sockbench()
            .env("SOCKBENCH_TEST_HOLD", "relay-end:300")
            .args([
                "relay",
                "-m",
                "read-write",
                "-t",
                t,
                "--placement",
                "processes",
            ])
            .args(["-w", "0", "-i", "0.05", "--format", "json"])
            .args(shape)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while err.read_line(&mut line).unwrap() > 0 && !line.contains("holding relay-end") {
            line.clear();
        }
        assert!(
            line.contains("holding relay-end"),
            "{t}: the relay never held"
        );
        // While the relay's worker is held: whose thread is it?
        let mut owners = Vec::new();
        for p in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else {
                continue;
            };
            for task in tasks.flatten() {
                let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
                if comm.trim() == "sb-relay" {
                    let stat = std::fs::read_to_string(p.path().join("stat")).unwrap_or_default();
                    let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
                    let ppid: i32 = after.split_whitespace().nth(1).unwrap().parse().unwrap();
                    let owner: i32 = p.file_name().to_str().unwrap().parse().unwrap();
                    owners.push((owner, ppid));
                }
            }
        }
        let _ = std::io::Read::read_to_end(&mut err, &mut Vec::new());
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{t}");
        // Other tests' relays may be running too: only this sockbench and its
        // children are looked at.
        let ours: Vec<_> = owners
            .iter()
            .filter(|&&(owner, ppid)| owner == pid || ppid == pid)
            .collect();
        assert!(
            !ours.is_empty() && ours.iter().all(|&&(owner, _)| owner != pid),
            "{t}: the relay's threads ran in {owners:?} (process, parent), not in a child of {pid}"
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["body"]["placement"], "processes", "{t}");
        let r = &results(&v)[0];
        assert!(r["error"].is_null(), "{t}: {}", r["error"]);
        let got = u(r, "/bytes_received");
        assert_eq!(u(r, "/bytes_sent"), got, "{t}");
        assert_eq!(u(r, "/bytes_relayed"), got, "{t}");
        let want = if t == "tcp" { 8 << 20 } else { 200 * 10240 };
        assert_eq!(got, want, "{t}");
        assert!(r["relay_cpu_seconds"].as_f64().unwrap() > 0.0, "{t}");
        let runs = r["intervals"].as_array().expect("intervals");
        assert_eq!(runs.len(), 1, "{t}");
        let lines = runs[0].as_array().unwrap();
        assert!(!lines.is_empty(), "{t}");
        let sum: u64 = lines.iter().map(|l| l["bytes"].as_u64().unwrap()).sum();
        assert_eq!(sum, got, "{t}: the intervals add up to {sum}");
    }
}

/// Runs come from the shared runner: each run is measured on its own (its figure among
/// the runs'), and a warm-up's traffic is not the measured run's (what loopback carried
/// with one is checked in `loopback_carries_every_relayed_byte_twice`).
#[test]
fn runs_and_warm_ups_are_the_runners() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "relay",
            "-m",
            "read-write",
            "-t",
            "unix",
            "--bytes",
            "4M",
            "--runs",
            "3",
            "-w",
            "0.1",
        ],
    );
    let r = &results(&v)[0];
    assert!(r["error"].is_null(), "{}", r["error"]);
    assert_eq!(r["runs_bits_per_second"].as_array().unwrap().len(), 3);
    // The warm-up's bytes are not the run's: exactly what -b asked for.
    assert_eq!(u(r, "/bytes_received"), 4 << 20);
    assert_eq!(u(r, "/bytes_sent"), 4 << 20);
    assert_eq!(v["body"]["placement"], "threads");
}

/// A relay that ends connections early without a word (no role reports an error) fails
/// the run: the source saw its connection cut, and says so.
#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test build: cargo test --features test-hooks"
)]
fn a_relay_that_cuts_a_stream_short_fails_the_run() {
    let sb = Sandbox::new();
    for t in ["unix", "tcp"] {
        let out = sb
            .cmd()
            .env("SOCKBENCH_TEST_FAULT", "relay-cuts-short")
            .args([
                "relay",
                "-m",
                "read-write",
                "-t",
                t,
                "--bytes",
                "8M",
                "-w",
                "0",
            ])
            .args(["--format", "json"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{t}: {err}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let e = results(&v)[0]["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        // Unix refuses the next write at once; TCP's may still be taken before the
        // reset comes back, and then the counts disagree.
        assert!(
            e.contains("ended a connection before the source was done")
                || (t == "tcp" && e.contains("the counts disagree")),
            "{t}: {e}"
        );
    }
}

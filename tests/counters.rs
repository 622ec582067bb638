//! Bytes, packets, connections, threads and CPUs checked against what the kernel counted
//! or shows, never only against sockbench's other side: the namespace's loopback counters
//! (/proc/net/dev), firewall rule counters, the process's I/O accounting (/proc/PID/io,
//! read while it is a zombie), TIME_WAIT sockets (`ss`), thread names, affinities and the
//! CPU each thread last ran on (/proc/PID/task).

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use crate::common::{
    io_accounting, json_in_netns, rule, snmp, u, Sandbox, LO_COUNTERS, RULE_COUNTS,
};

/// Per packet on loopback: an IPv4 header and a TCP header with timestamps.
const TCP_OVERHEAD: u64 = 20 + 32;
/// SYN and SYN-ACK carry 8 more bytes of options (MSS, SACK, window scale).
const HANDSHAKE_EXTRA: u64 = 2 * 8;

#[test]
fn udp_datagrams_and_bytes_are_the_kernels_count_of_what_left_and_arrived() {
    let sb = Sandbox::new();
    let Some((v, k)) = json_in_netns(
        &sb,
        &[
            rule(
                "OUTPUT",
                "-p udp -m length --length 29:65535 -j ACCEPT",
                "out",
            ),
            rule(
                "INPUT",
                "-p udp -m length --length 29:65535 -j ACCEPT",
                "in",
            ),
            rule("INPUT", "-p udp -m length --length 28 -j ACCEPT", "markers"),
        ]
        .join("; "),
        &[
            "rate", "-t", "udp", "-n", "3000", "-s", "100", "-w", "0", "--rate", "50k",
        ],
        &format!(
            "{RULE_COUNTS}; {}",
            snmp("Udp", "RcvbufErrors", "rcvbuf_errors")
        ),
    ) else {
        return;
    };
    let r = &v["body"]["results"][0];
    assert_eq!(u(r, "/messages_sent"), k["out"], "{k:?}");
    // An IPv4 UDP datagram is its payload plus 28 bytes of headers.
    assert_eq!(u(r, "/bytes_sent"), k["out_bytes"] - 28 * k["out"]);
    // What reached the socket: what passed INPUT, less what its full buffer refused
    // (RcvbufErrors, which may also count refused empty end markers).
    let received = u(r, "/messages_received");
    let refused = k["rcvbuf_errors"];
    assert!(
        (k["in"] - refused..=k["in"] - refused.saturating_sub(k["markers"])).contains(&received),
        "{received} received: {k:?}"
    );
    assert_eq!(u(r, "/bytes_received"), 100 * received);
}

/// The TCP payload that crossed loopback: bytes less the headers of every packet.
fn tcp_payload(k: &HashMap<String, u64>, connections: u64) -> u64 {
    k["lo_bytes"] - TCP_OVERHEAD * k["lo_packets"] - HANDSHAKE_EXTRA * connections
}

#[test]
fn tcp_bytes_are_the_payload_the_kernel_carried_and_the_warm_up_is_its_own_connection() {
    for warmup in ["0", "0.1"] {
        let sb = Sandbox::new();
        let Some((v, k)) = json_in_netns(
            &sb,
            &rule("INPUT", "-p tcp --syn -j ACCEPT", "syn"),
            &[
                "stream", "-t", "tcp", "-n", "200", "-s", "64K", "--runs", "2", "-w", warmup,
            ],
            &format!(
                "{LO_COUNTERS}; {RULE_COUNTS}; {}",
                snmp("Tcp", "RetransSegs", "retransmitted")
            ),
        ) else {
            return;
        };
        let r = &v["body"]["results"][0];
        let measured = u(r, "/bytes_sent");
        assert_eq!(measured, 2 * 200 * 65536);
        assert_eq!(u(r, "/bytes_received"), measured);
        // One connection per measured run, and one more per run for the warm-up.
        let connections = if warmup == "0" { 2 } else { 4 };
        assert_eq!(k["syn"], connections, "warm-up {warmup}: {k:?}");
        let carried = tcp_payload(&k, connections);
        if warmup == "0" {
            if k["retransmitted"] == 0 {
                // Exact, but for the odd ACK carrying a SACK block: options come in
                // 4-byte words, and a payload miscount of whole messages is 64 KiB.
                let extra = carried - measured;
                assert!(
                    extra % 4 == 0 && extra < 1024,
                    "{carried} vs {measured}: {k:?}"
                );
            } else {
                eprintln!(
                    "note: {} segments retransmitted, so loopback carried more",
                    k["retransmitted"]
                );
                assert!(carried >= measured);
            }
        } else {
            // The warm-up sent data, on its own connections, and none of it was counted.
            assert!(carried > measured + 65536, "{carried} vs {measured}: {k:?}");
        }
    }
}

#[test]
fn pipe_bytes_are_what_the_kernel_accounted_to_the_process() {
    if !std::path::Path::new("/proc/self/io").exists() {
        eprintln!(
            "skipped: this kernel has no per-process I/O accounting (CONFIG_TASK_IO_ACCOUNTING)"
        );
        return;
    }
    for warmup in ["0", "0.05"] {
        let (v, printed, io) = io_accounting(&[
            "stream", "-t", "pipe", "-n", "300", "-s", "10000", "-w", warmup,
        ]);
        let r = &v["body"]["results"][0];
        let sent = u(r, "/bytes_sent");
        assert_eq!(sent, 3_000_000);
        // Every byte written by this process: the pipe's data and the report.
        let written = io["wchar"] - printed as u64;
        // rchar also holds what the tool read from /proc and /sys: a few kilobytes.
        let read = io["rchar"];
        if warmup == "0" {
            assert_eq!(written, sent, "{io:?}");
            assert!((sent..sent + 1_000_000).contains(&read), "{io:?}");
            // One write(2) per message, one for the report.
            assert!((300..=305).contains(&io["syscw"]), "{io:?}");
        } else {
            assert!(written > sent + 10_000, "the warm-up wrote nothing: {io:?}");
        }
    }
}

#[test]
fn cpu_time_is_the_kernels_and_cpu_per_gigabyte_follows_from_it() {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap() as f64;
    let (v, _, io) = io_accounting(&["stream", "-t", "unix", "-d", "1", "-w", "0"]);
    let r = &v["body"]["results"][0];
    let run = &r["runs"][0];
    let process = io["cpu_ticks"] as f64 / ticks;
    let sides = run["sender"]["cpu_seconds"].as_f64().unwrap()
        + run["receiver"]["cpu_seconds"].as_f64().unwrap();
    // The sides' measured intervals are most of the process's life, and never more;
    // the kernel samples process time at each tick, hence the slack.
    assert!(
        (0.7 * process - 0.05..1.1 * process + 0.05).contains(&sides),
        "sides {sides} s of CPU, the kernel says the process used {process} s"
    );
    for side in ["sender", "receiver"] {
        let gb = u(r, "/bytes_sent") as f64 / 1e9;
        let per_gb = r[format!("{side}_cpu_seconds_per_gb")].as_f64().unwrap();
        let cpu = run[side]["cpu_seconds"].as_f64().unwrap();
        assert!(
            (per_gb * gb - cpu).abs() <= 1e-6 * cpu,
            "{side}: {per_gb} s/GB for {cpu} s over {gb} GB"
        );
    }
}

#[test]
fn linger0_leaves_no_time_wait_socket_and_without_it_every_connection_does() {
    for linger0 in [false, true] {
        let sb = Sandbox::new();
        let mut args = vec!["connect", "-t", "tcp", "-n", "50", "-w", "0"];
        if linger0 {
            args.push("--linger0");
        }
        let Some((v, k)) = json_in_netns(
            &sb,
            "true",
            &args,
            "echo time_wait=$(ss -Htan state time-wait | wc -l)",
        ) else {
            return;
        };
        assert_eq!(u(&v["body"]["results"][0], "/messages_sent"), 50);
        if linger0 {
            assert_eq!(k["time_wait"], 0, "{k:?}");
        } else {
            assert_eq!(k["time_wait"], 50, "{k:?}");
        }
    }
}

/// The threads of process `pid`: (name, allowed CPUs, the CPU it last ran on).
fn threads(pid: u32) -> Vec<(String, String, u32)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let p = t.path();
        let Ok(name) = std::fs::read_to_string(p.join("comm")) else {
            continue;
        };
        let status = std::fs::read_to_string(p.join("status")).unwrap_or_default();
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or_default()
            .trim()
            .to_string();
        let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
        // Field 39 (processor), counted after the parenthesised name.
        let cpu = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split_whitespace().nth(36))
            .and_then(|c| c.parse().ok())
            .unwrap_or(u32::MAX);
        out.push((name.trim().to_string(), allowed, cpu));
    }
    out
}

/// Threads of a running `sockbench ARGS`, looked at half a second in.
fn threads_while_running(args: &[&str]) -> Vec<(String, String, u32)> {
    let sb = Sandbox::new();
    let mut child = sb
        .sockbench()
        .args(args)
        .arg("-q")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let seen = threads(child.id());
    let _ = child.kill();
    let _ = child.wait();
    seen
}

#[test]
fn cpus_pins_each_side_to_its_cpu_and_each_runs_there() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: --cpus needs two CPUs to show anything");
        return;
    }
    for (send, recv) in [(0u32, 1u32), (1, 0)] {
        let pin = format!("{send},{recv}");
        let seen =
            threads_while_running(&["stream", "-t", "unix", "-d", "2", "-w", "0", "--cpus", &pin]);
        for (name, cpu) in [("sb-send-0", send), ("sb-recv-0", recv)] {
            let (_, allowed, last) = seen
                .iter()
                .find(|t| t.0 == name)
                .unwrap_or_else(|| panic!("no thread {name} in {seen:?}"));
            assert_eq!(
                allowed,
                &cpu.to_string(),
                "{name} with --cpus {pin}: {seen:?}"
            );
            assert_eq!(
                *last, cpu,
                "{name} with --cpus {pin} ran elsewhere: {seen:?}"
            );
        }
    }
}

#[test]
fn runtime_multi_runs_tokio_worker_threads_and_current_runs_none() {
    for (runtime, workers) in [("multi", true), ("current", false)] {
        let seen = threads_while_running(&[
            "stream",
            "-t",
            "unix",
            "-e",
            "async",
            "--runtime",
            runtime,
            "-d",
            "2",
            "-w",
            "0",
        ]);
        let n = seen.iter().filter(|t| t.0 == "tokio-rt-worker").count();
        // One worker per side (sender and receiver each have their runtime).
        assert_eq!(n > 0, workers, "--runtime {runtime}: {seen:?}");
        if workers {
            assert_eq!(n, 2, "--runtime {runtime}: {seen:?}");
        }
    }
}

/// What the kernel grants a new socket of `ty` asked for `size` bytes of each buffer.
fn granted(ty: socket2::Type, size: usize) -> (u64, u64) {
    let s = socket2::Socket::new(socket2::Domain::IPV4, ty, None).unwrap();
    s.set_send_buffer_size(size).unwrap();
    s.set_recv_buffer_size(size).unwrap();
    (
        s.send_buffer_size().unwrap() as u64,
        s.recv_buffer_size().unwrap() as u64,
    )
}

#[test]
fn socket_buffers_are_what_the_kernel_grants_for_the_same_request() {
    let sb = Sandbox::new();
    for (transport, ty) in [
        ("udp", socket2::Type::DGRAM),
        ("tcp", socket2::Type::STREAM),
    ] {
        for size in [16384usize, 98304] {
            let v = crate::common::json(
                &sb,
                &[
                    "stream",
                    "-t",
                    transport,
                    "-n",
                    "50",
                    "-s",
                    "1K",
                    "-w",
                    "0",
                    "--sndbuf",
                    &size.to_string(),
                    "--rcvbuf",
                    &size.to_string(),
                ],
            );
            let run = &v["body"]["results"][0]["runs"][0];
            let (snd, rcv) = granted(ty, size);
            assert_eq!(u(run, "/sndbuf_bytes"), snd, "{transport} {size}");
            assert_eq!(u(run, "/rcvbuf_bytes"), rcv, "{transport} {size}");
        }
    }
}

#[test]
fn tcp_buffers_are_read_at_the_end_after_the_kernel_grew_them() {
    // Without --sndbuf/--rcvbuf TCP autotunes both buffers upward while data flows. On
    // loopback's 64 KiB MTU the send buffer is at its cap from the handshake on, so the
    // namespace's loopback gets an Ethernet MTU: a connection then starts at a send buffer
    // of about 70 KB and a receive buffer of tcp_rmem's default (128 KiB), and 0.3 s of
    // data grows both to megabytes. The report must show the grown buffers.
    let sb = Sandbox::new();
    let Some((v, _)) = json_in_netns(
        &sb,
        "ip link set lo mtu 1500",
        &["stream", "-t", "tcp", "-s", "64K", "-d", "0.3", "-w", "0"],
        "true",
    ) else {
        return;
    };
    let run = &v["body"]["results"][0]["runs"][0];
    assert!(u(run, "/sndbuf_bytes") >= 1 << 20, "{run}");
    assert!(u(run, "/rcvbuf_bytes") >= 1 << 20, "{run}");
}

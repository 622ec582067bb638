//! `rate --batch N`: N datagrams per system call, proven from outside sockbench. strace
//! counts the sendmmsg and recvmmsg calls the roles made (they must equal the calls the
//! report gives, and the sender's must be messages / N); an iptables rule in a private
//! network namespace drops a known number of datagrams, and the loss reported must be
//! exactly that (plus what the kernel's own receive-buffer overflow counter explains).
//! Refusals name their reason and exit 2; `--batch 1` is the one-message loop unchanged.
//! `stream --batch N` too: each call strace decoded, with the messages it returned and
//! each one's length, gives both sides' calls and messages per call, blocking and
//! nonblocking, with a receiver held back (by strace's delay injection) so that batches
//! leave in parts and the end marker comes with data.

use std::collections::HashMap;
use std::process::Command;

use crate::common::{f, json, json_in_netns, rule, snmp, u, Sandbox, RULE_COUNTS};
use serde_json::Value;

/// Per system call: (calls, errors), as `strace -c` tables them.
type Calls = HashMap<String, (u64, u64)>;

/// `sockbench ARGS --format json -q` under `strace -f -c` for the batched and the plain
/// datagram calls: the report, and per system call (calls, errors).
fn traced(args: &[&str]) -> Option<(Value, Calls)> {
    if !Command::new("strace")
        .args(["-o", "/dev/null", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("skipped: strace is not installed or ptrace is not permitted");
        return None;
    }
    let sb = Sandbox::new();
    let log = sb.path().join("strace.txt");
    let out = sb
        .std_cmd("strace")
        .args([
            "-f",
            "-c",
            "-e",
            "trace=sendmmsg,recvmmsg,sendto,recvfrom",
            "-o",
        ])
        .arg(&log)
        .arg(assert_cmd::cargo::cargo_bin("sockbench"))
        .args(args)
        .args(["--format", "json", "-q"])
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let table = std::fs::read_to_string(&log).unwrap();
    // "% time  seconds  usecs/call  calls  errors  syscall", errors empty when none.
    let calls = table
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let calls = f.get(3)?.parse().ok()?;
            let errors = if f.len() == 6 { f[4].parse().ok()? } else { 0 };
            Some((f.last()?.to_string(), (calls, errors)))
        })
        .filter(|(name, _)| name != "total")
        .collect();
    Some((serde_json::from_slice(&out.stdout).unwrap(), calls))
}

/// Successful calls of `name` (calls less errors).
fn ok_calls(s: &Calls, name: &str) -> u64 {
    s.get(name).map_or(0, |c| c.0 - c.1)
}

#[test]
fn every_32_udp_datagrams_leave_in_one_sendmmsg_as_strace_counts() {
    let Some((v, s)) = traced(&[
        "rate", "-t", "udp", "-s", "64", "--batch", "32", "-n", "3200", "-w", "0",
    ]) else {
        return;
    };
    let run = &v["body"]["results"][0]["runs"][0];
    assert_eq!(u(run, "/messages_sent"), 3200);
    assert_eq!(ok_calls(&s, "sendmmsg"), 100, "{s:?}");
    assert_eq!(u(run, "/sender/calls"), 100);
    assert_eq!(run["sender"]["messages_per_call"], 32.0);
    // The receiver's calls are the recvmmsg calls that brought data (the others timed
    // out waiting for a lost end marker, or brought only the marker: at most one; each
    // call's messages are checked in stream_and_rate_batches_...), and nothing went one
    // by one but the empty end markers.
    let extra = ok_calls(&s, "recvmmsg") - u(run, "/receiver/calls");
    assert!(extra <= 1, "{s:?}");
    assert_eq!(s.get("recvfrom"), None, "{s:?}");
    let markers = ok_calls(&s, "sendto");
    assert!((1..=200).contains(&markers), "{s:?}");
}

#[test]
fn unix_dgram_batches_both_ways_and_delivers_everything() {
    let Some((v, s)) = traced(&[
        "rate",
        "-t",
        "unix-dgram",
        "-s",
        "64",
        "--batch",
        "32",
        "-n",
        "32000",
        "-w",
        "0",
    ]) else {
        return;
    };
    let r = &v["body"]["results"][0];
    let run = &r["runs"][0];
    assert_eq!(u(r, "/messages_sent"), 32000);
    assert_eq!(u(r, "/messages_received"), 32000, "{r}");
    assert_eq!(ok_calls(&s, "sendmmsg"), 1000, "{s:?}");
    assert_eq!(u(run, "/sender/calls"), 1000);
    let received_calls = u(run, "/receiver/calls");
    // The calls that brought data; one more may have brought only the end marker.
    assert!(
        (received_calls..=received_calls + 1).contains(&ok_calls(&s, "recvmmsg")),
        "{s:?}"
    );
    // The sender outruns a receiver that wakes for each call: it finds several queued.
    let per_call = run["receiver"]["messages_per_call"].as_f64().unwrap();
    assert!(per_call > 1.0, "{run}");
    // Messages (the end marker is none) over the calls that brought them.
    assert!((per_call - 32000.0 / received_calls as f64).abs() < 1e-9);
    assert_eq!(r["messages_reordered"], 0);
    assert_eq!(r["messages_duplicated"], 0);
}

#[test]
fn a_count_that_is_not_a_multiple_of_the_batch_ends_with_a_short_batch() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "rate",
            "-t",
            "unix-seqpacket",
            "--batch",
            "8",
            "-n",
            "1003",
            "-w",
            "0",
        ],
    );
    let run = &v["body"]["results"][0]["runs"][0];
    assert_eq!(u(run, "/messages_sent"), 1003);
    assert_eq!(u(run, "/messages_received"), 1003);
    assert_eq!(
        u(run, "/sender/calls"),
        126,
        "125 full batches and one of 3"
    );
}

#[test]
fn batched_udp_loses_exactly_the_datagrams_the_firewall_dropped() {
    let sb = Sandbox::new();
    // Every 10th datagram with a payload is dropped; the empty end markers pass.
    let setup = format!(
        "{}; {}",
        rule(
            "INPUT",
            "-p udp -m length --length 29:65535 -m statistic --mode nth --every 10 --packet 0 -j DROP",
            "dropped"
        ),
        rule("INPUT", "-p udp -m length --length 28 -j ACCEPT", "markers"),
    );
    let Some((v, k)) = json_in_netns(
        &sb,
        &setup,
        &[
            "rate", "-t", "udp", "-s", "64", "--batch", "32", "-n", "3200", "-w", "0", "--rate",
            "100k",
        ],
        &format!(
            "{RULE_COUNTS}; {}",
            snmp("Udp", "RcvbufErrors", "rcvbuf_errors")
        ),
    ) else {
        return;
    };
    let r = &v["body"]["results"][0];
    assert_eq!(k["dropped"], 320, "{k:?}");
    let lost = u(r, "/messages_lost");
    // What the firewall dropped, and any overflow the kernel counted (less end markers
    // it may have refused too).
    let (overflow, markers) = (k["rcvbuf_errors"], k["markers"]);
    assert!(
        lost >= 320 && (overflow.saturating_sub(markers)..=overflow).contains(&(lost - 320)),
        "{r} {k:?}"
    );
    assert_eq!(u(r, "/messages_sent"), 3200);
    assert_eq!(u(r, "/messages_received"), 3200 - lost);
    assert_eq!(u(r, "/bytes_received"), 64 * (3200 - lost));
    let run = &r["runs"][0];
    assert_eq!(run["sender"]["messages_per_call"], 32.0);
    assert_eq!(r["messages_duplicated"], 0);
}

#[test]
fn every_readiness_engine_batches_and_counts_exactly() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "rate",
            "-t",
            "unix-dgram",
            "-e",
            "nonblocking,poll,epoll,async",
            "--batch",
            "16",
            "-n",
            "16000",
            "-w",
            "0",
        ],
    );
    let results = v["body"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    for r in results {
        assert_eq!(u(r, "/messages_received"), 16000, "{r}");
        let run = &r["runs"][0];
        // A full socket may take only part of a batch: between 1 and 16 per call.
        let per_call = run["sender"]["messages_per_call"].as_f64().unwrap();
        assert!(per_call > 1.0 && per_call <= 16.0, "{}: {run}", r["engine"]);
        assert!(u(run, "/receiver/calls") < 16000, "{}: {run}", r["engine"]);
    }
}

#[test]
fn calls_cross_from_a_child_process() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "rate",
            "-t",
            "unix-dgram",
            "--batch",
            "32",
            "-n",
            "3200",
            "-w",
            "0",
            "--placement",
            "processes",
        ],
    );
    let run = &v["body"]["results"][0]["runs"][0];
    assert_eq!(u(run, "/sender/calls"), 100);
    assert!(u(run, "/receiver/calls") > 0);
}

#[test]
fn one_message_per_call_is_the_plain_loop_with_no_calls_counted() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "rate",
            "-t",
            "unix-dgram",
            "--batch",
            "1",
            "-n",
            "500",
            "-w",
            "0",
        ],
    );
    let r = &v["body"]["results"][0];
    assert_eq!(r["options"]["batch"], 1);
    assert!(r["runs"][0]["sender"]["calls"].is_null());
    assert!(r["runs"][0]["receiver"]["messages_per_call"].is_null());
    let out = sb
        .cmd()
        .args(["rate", "-t", "unix-dgram", "-n", "500", "-w", "0"])
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("msgs/call"));
    let out = sb
        .cmd()
        .args([
            "rate",
            "-t",
            "unix-dgram",
            "--batch",
            "4",
            "-n",
            "500",
            "-w",
            "0",
        ])
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("msgs/call snd/rcv"));
}

/// One system call that moves datagrams, as `strace -ff` decoded it: its name, what it
/// returned (messages for the batched calls, bytes for the others; negative: failed),
/// and the length of each message it moved (the batched calls).
#[derive(Debug)]
struct Call {
    name: String,
    ret: i64,
    lens: Vec<u64>,
}

/// `sockbench ARGS --format json -q` under `strace -ff` (with `extra` options), each
/// batched call's messages decoded (up to 64 of them): the report and every datagram
/// call of every thread.
fn traced_calls(extra: &[&str], args: &[&str]) -> Option<(Value, Vec<Call>)> {
    if !Command::new("strace")
        .args(["-o", "/dev/null", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("skipped: strace is not installed or ptrace is not permitted");
        return None;
    }
    let sb = Sandbox::new();
    let prefix = sb.path().join("calls");
    let out = sb
        .std_cmd("strace")
        .args([
            "-ff",
            "-s",
            "64",
            "-e",
            "trace=sendmmsg,recvmmsg,sendto,recvfrom,sendmsg,recvmsg",
        ])
        .args(extra)
        .arg("-o")
        .arg(&prefix)
        .arg(assert_cmd::cargo::cargo_bin("sockbench"))
        .args(args)
        .args(["--format", "json", "-q"])
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let mut calls = Vec::new();
    for e in std::fs::read_dir(sb.path()).unwrap().flatten() {
        if !e.file_name().to_string_lossy().starts_with("calls.") {
            continue;
        }
        for line in std::fs::read_to_string(e.path()).unwrap().lines() {
            let (Some((name, _)), Some((_, ret))) = (line.split_once('('), line.rsplit_once("= "))
            else {
                continue;
            };
            let Some(ret) = ret.split_whitespace().next().and_then(|r| r.parse().ok()) else {
                continue;
            };
            let lens = line
                .split("msg_len=")
                .skip(1)
                .map(|l| {
                    let digits: String = l.chars().take_while(char::is_ascii_digit).collect();
                    digits.parse().unwrap()
                })
                .collect();
            calls.push(Call {
                name: name.to_string(),
                ret,
                lens,
            });
        }
    }
    Some((serde_json::from_slice(&out.stdout).unwrap(), calls))
}

/// Every receive call waits 2 ms first (strace's fault injection): the receiver stays
/// behind a sender that fills the socket, so a blocking sender's batches arrive whole,
/// the last call bringing the short last batch and the end marker together, and a
/// nonblocking sender's batches meet a full socket and leave in parts.
const SLOW_RECEIVER: [&str; 2] = ["-e", "inject=recvmmsg:delay_enter=2000"];

#[test]
fn stream_and_rate_batches_carry_the_messages_per_call_strace_counted() {
    for (workload, transport, engine, count, extra) in [
        ("stream", "udp", "blocking", "3200", &[][..]),
        ("stream", "udp", "epoll", "3200", &[]),
        ("stream", "unix-dgram", "blocking", "3200", &[]),
        ("stream", "unix-dgram", "epoll", "3200", &[]),
        (
            "stream",
            "unix-dgram",
            "blocking",
            "3210",
            &SLOW_RECEIVER[..],
        ),
        ("stream", "unix-dgram", "epoll", "3210", &SLOW_RECEIVER[..]),
        ("rate", "udp", "blocking", "3200", &[]),
        ("rate", "unix-dgram", "blocking", "3210", &SLOW_RECEIVER[..]),
    ] {
        let Some((v, calls)) = traced_calls(
            extra,
            &[
                workload, "-t", transport, "-e", engine, "-s", "64", "--batch", "32", "-n", count,
                "-w", "0",
            ],
        ) else {
            return;
        };
        let what = format!("{workload} {transport} {engine} -n {count} {extra:?}");
        let r = &v["body"]["results"][0];
        let run = &r["runs"][0];
        let of = |name: &'static str| calls.iter().filter(move |c| c.name == name && c.ret > 0);
        // The sender: every sendmmsg that sent something is a call, and what they
        // returned are the messages (a nonblocking socket may take part of a batch).
        let sends = of("sendmmsg").count() as u64;
        let sent: i64 = of("sendmmsg").map(|c| c.ret).sum();
        assert_eq!(u(r, "/messages_sent"), sent as u64, "{what}");
        assert_eq!(u(run, "/sender/calls"), sends, "{what}");
        let per_call = f(run, "/sender/messages_per_call");
        assert!(
            (per_call - sent as f64 / sends as f64).abs() < 1e-9,
            "{what}: {per_call} per call, strace counted {sent} in {sends}"
        );
        // The receiver: every recvmmsg that brought a datagram with a payload is a call
        // (the empty end marker is no message), those datagrams its messages.
        let brought: Vec<u64> = of("recvmmsg")
            .map(|c| {
                c.lens
                    .iter()
                    .take(c.ret as usize)
                    .filter(|&&l| l > 0)
                    .count() as u64
            })
            .filter(|&n| n > 0)
            .collect();
        let (receives, received) = (brought.len() as u64, brought.iter().sum::<u64>());
        assert_eq!(u(r, "/messages_received"), received, "{what}");
        assert_eq!(u(run, "/receiver/calls"), receives, "{what}: {brought:?}");
        let per_call = f(run, "/receiver/messages_per_call");
        assert!(
            (per_call - received as f64 / receives as f64).abs() < 1e-9,
            "{what}: {per_call} per call, strace counted {received} in {receives}"
        );
        // No datagram with a payload went one by one.
        for name in ["sendto", "sendmsg", "recvfrom", "recvmsg"] {
            assert_eq!(of(name).count(), 0, "{what}: {name} moved data");
        }
    }
}

/// `sockbench ARGS`: exit status 2 and the stderr.
fn refused(args: &[&str]) -> String {
    let out = Sandbox::new().cmd().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    err
}

#[test]
fn transports_that_cannot_batch_are_refused_with_the_reason() {
    let e = refused(&["rate", "-t", "udp,tcp", "--batch", "8", "-n", "10"]);
    assert!(e.contains("--batch 8: tcp is a byte stream"), "{e}");
    assert!(
        e.contains("udp, udp6, unix-dgram and unix-seqpacket"),
        "{e}"
    );
    let e = refused(&["rate", "-t", "mq", "--batch", "8", "-n", "10"]);
    assert!(e.contains("one message per mq_send"), "{e}");
    let e = refused(&["rate", "-t", "shm", "--batch", "8", "-n", "10"]);
    assert!(e.contains("shm has no system call to batch"), "{e}");
    let e = refused(&[
        "rate", "-t", "unix", "-e", "io-uring", "--batch", "8", "-n", "10",
    ]);
    assert!(e.contains("io-uring could not keep them apart"), "{e}");
    // Under `all`, each is skipped with its reason and the others run.
    let e = refused(&[
        "rate", "-t", "tcp,pipe", "-e", "all", "--batch", "8", "-n", "10",
    ]);
    assert!(
        e.contains("nothing in the plan can batch (--batch 8)"),
        "{e}"
    );
    for bad in ["0", "1025"] {
        let e = refused(&["rate", "-t", "udp", "--batch", bad, "-n", "10"]);
        assert!(e.contains("--batch must be between 1 and 1024"), "{e}");
    }
    // pingpong and connect have no --batch.
    refused(&["pingpong", "-t", "udp", "--batch", "8"]);
    refused(&["connect", "-t", "tcp", "--batch", "8"]);
}

#[test]
fn under_all_only_the_batching_transports_run() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &["rate", "-t", "all", "--batch", "8", "-n", "800", "-w", "0"],
    );
    let mut ran: Vec<&str> = v["body"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["transport"].as_str().unwrap())
        .collect();
    ran.sort_unstable();
    let ipv6 = std::net::UdpSocket::bind("[::1]:0").is_ok();
    let mut want = vec!["udp", "unix-dgram", "unix-seqpacket"];
    if ipv6 {
        want.push("udp6");
    }
    want.sort_unstable();
    assert_eq!(ran, want);
    let skipped = v["body"]["skipped"].as_array().unwrap();
    let tcp = skipped
        .iter()
        .find(|s| s["transport"] == "tcp")
        .expect("tcp skipped");
    assert!(
        tcp["reason"].as_str().unwrap().contains("byte stream"),
        "{tcp}"
    );
}

//! `stream --send sendfile|splice|zerocopy` and `--recv zerocopy`, checked against what
//! sockbench did not compute: the system calls strace saw the process make (their
//! counts, the bytes they returned, and the zero-copy notifications the kernel put on
//! the error queue, decoded by strace), the file the sender holds open while it runs
//! (/proc/PID/fd), and a veth pair between two network namespaces with an MTU that
//! makes segments of one page. Skips, with the reason, where strace, root or namespaces
//! are missing.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{u, Sandbox};
use serde_json::Value;

/// One system call as strace saw it: its name, its text (arguments, and what it wrote
/// back) and what it returned.
#[derive(Debug)]
struct Call {
    name: String,
    text: String,
    ret: i64,
}

/// The calls in an `strace -f -o` log, each put back together when another thread's
/// call came between its start (`<unfinished ...>`) and its end (`<... resumed>`).
fn calls(log: &str) -> Vec<Call> {
    let mut open: HashMap<String, String> = HashMap::new();
    let mut out = Vec::new();
    for line in log.lines() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let rest = rest.trim_start();
        let whole = if let Some(r) = rest.strip_prefix("<... ") {
            let Some((_, tail)) = r.split_once(" resumed>") else {
                continue;
            };
            format!("{}{tail}", open.remove(pid).unwrap_or_default())
        } else if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            open.insert(pid.to_string(), head.to_string());
            continue;
        } else {
            rest.to_string()
        };
        let Some((name, _)) = whole.split_once('(') else {
            continue;
        };
        // strace pads short calls: `vmsplice(6, [...], 1, 0)          = 65536`.
        let Some((text, ret)) = whole.rsplit_once(" = ") else {
            continue;
        };
        let text = text.trim_end().strip_suffix(')').unwrap_or(text);
        let Ok(ret) = ret.split_whitespace().next().unwrap_or("").parse() else {
            continue;
        };
        out.push(Call {
            name: name.to_string(),
            text: text.to_string(),
            ret,
        });
    }
    out
}

/// The (count, sum of non-negative returns) of the calls named `name` whose text has
/// `with`.
fn tally(calls: &[Call], name: &str, with: &str) -> (u64, u64) {
    calls
        .iter()
        .filter(|c| c.name == name && c.text.contains(with))
        .fold((0, 0), |(n, b), c| (n + 1, b + c.ret.max(0) as u64))
}

/// `name=VALUE` in strace's decoding of a structure.
fn field(text: &str, name: &str) -> Option<u64> {
    let at = text.find(&format!("{name}="))? + name.len() + 1;
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// What the kernel's zero-copy notifications said, as strace decoded the error-queue
/// reads: (notifications, sends completed, sends copied).
fn notifications(calls: &[Call]) -> (u64, u64, u64) {
    let mut n = (0, 0, 0);
    for c in calls
        .iter()
        .filter(|c| c.name == "recvmsg" && c.text.contains("MSG_ERRQUEUE") && c.ret >= 0)
    {
        // ee_origin 5 is SO_EE_ORIGIN_ZEROCOPY; ee_code 1 SO_EE_CODE_ZEROCOPY_COPIED.
        assert_eq!(field(&c.text, "ee_origin"), Some(5), "{}", c.text);
        let (lo, hi) = (
            field(&c.text, "ee_info").unwrap(),
            field(&c.text, "ee_data").unwrap(),
        );
        let sends = hi.wrapping_sub(lo) % (1 << 32) + 1;
        n.0 += 1;
        n.1 += sends;
        if field(&c.text, "ee_code") == Some(1) {
            n.2 += sends;
        }
    }
    n
}

fn have_strace() -> bool {
    let ok = Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!(
            "skipped: strace is not installed or ptrace is not permitted (apt-get install strace)"
        );
    }
    ok
}

const TRACED: &str = "trace=sendfile,splice,vmsplice,sendto,sendmsg,recvmsg,getsockopt";

/// `sockbench ARGS --format json -q -w 0` under `strace -f`: its report and the calls.
fn traced(sb: &Sandbox, args: &[&str]) -> (Value, Vec<Call>) {
    let log = sb.path().join("strace.log");
    let out = sb
        .std_cmd("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            TRACED,
            "-e",
            "signal=none",
            "-s",
            "0",
            "-o",
        ])
        .arg(&log)
        .arg(assert_cmd::cargo::cargo_bin("sockbench"))
        .args(args)
        .args(["-w", "0", "--format", "json", "-q"])
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::remove_file(&log).unwrap();
    (serde_json::from_slice(&out.stdout).unwrap(), calls(&text))
}

#[test]
fn sendfile_moves_exactly_the_bytes_it_reports_in_the_calls_it_reports() {
    if !have_strace() {
        return;
    }
    let sb = Sandbox::new();
    for t in ["tcp", "pipe", "unix-seqpacket"] {
        let (v, calls) = traced(
            &sb,
            &[
                "stream", "-t", t, "-s", "64K", "-n", "300", "--send", "sendfile",
            ],
        );
        let r = &v["body"]["results"][0];
        assert!(r["error"].is_null(), "{t}: {}", r["error"]);
        let (n, bytes) = tally(&calls, "sendfile", "");
        assert_eq!(u(r, "/bytes_sent"), 300 * 65536, "{t}");
        assert_eq!(
            bytes,
            u(r, "/bytes_sent"),
            "{t}: bytes sendfile(2) returned"
        );
        assert_eq!(n, u(r, "/send/calls"), "{t}: sendfile(2) calls");
        assert_eq!(u(r, "/bytes_received"), u(r, "/bytes_sent"), "{t}");
        assert_eq!(r["send"]["method"], "sendfile");
        assert_eq!(r["options"]["send"], "sendfile");
        // Nothing else carried the payload.
        assert_eq!(tally(&calls, "sendto", "\"").0, 0, "{t}");
    }
}

#[test]
fn splice_moves_exactly_the_bytes_it_reports_through_vmsplice_and_splice() {
    if !have_strace() {
        return;
    }
    let sb = Sandbox::new();
    for (t, size, n) in [
        ("tcp", "64K", 300u64),
        ("unix", "1M", 20),
        ("udp", "1K", 200),
    ] {
        let size_b: u64 = match size {
            "64K" => 65536,
            "1M" => 1 << 20,
            _ => 1024,
        };
        let args = [
            "stream",
            "-t",
            t,
            "-s",
            size,
            "-n",
            &n.to_string(),
            "--send",
            "splice",
        ];
        let (v, calls) = traced(&sb, &args);
        let r = &v["body"]["results"][0];
        assert!(r["error"].is_null(), "{t}: {}", r["error"]);
        let (vm, vm_bytes) = tally(&calls, "vmsplice", "");
        let (sp, sp_bytes) = tally(&calls, "splice", "");
        assert_eq!(u(r, "/bytes_sent"), n * size_b, "{t}");
        assert_eq!(vm_bytes, u(r, "/bytes_sent"), "{t}: bytes vmsplice(2) took");
        assert_eq!(sp_bytes, u(r, "/bytes_sent"), "{t}: bytes splice(2) moved");
        assert_eq!(vm + sp, u(r, "/send/calls"), "{t}: vmsplice + splice calls");
        if t == "udp" {
            // One splice, one datagram: every message arrived whole.
            assert_eq!(sp, n, "{t}");
            assert_eq!(
                u(r, "/messages_received") + u(r, "/messages_lost"),
                n,
                "{t}"
            );
        } else {
            assert_eq!(u(r, "/bytes_received"), u(r, "/bytes_sent"), "{t}");
        }
    }
}

#[test]
fn zerocopy_on_loopback_reports_every_completion_copied_as_the_kernel_does() {
    if !have_strace() {
        return;
    }
    let sb = Sandbox::new();
    // (strace decodes the notifications of IPv4 sockets: SOL_IP, IP_RECVERR.)
    for (t, size) in [("tcp", "64K"), ("tcp", "4K"), ("udp", "1K")] {
        let (v, calls) = traced(
            &sb,
            &[
                "stream", "-t", t, "-s", size, "-n", "400", "--send", "zerocopy",
            ],
        );
        let r = &v["body"]["results"][0];
        assert!(r["error"].is_null(), "{t}: {}", r["error"]);
        let z = &r["send"]["zerocopy"];
        let (sent, bytes) = tally(&calls, "sendto", "MSG_ZEROCOPY");
        let took = calls
            .iter()
            .filter(|c| c.name == "sendto" && c.text.contains("MSG_ZEROCOPY") && c.ret > 0)
            .count() as u64;
        assert_eq!(sent, u(r, "/send/calls"), "{t}: send(MSG_ZEROCOPY) calls");
        assert_eq!(took, u(z, "/sends"), "{t}: sends the kernel took");
        assert_eq!(bytes, u(r, "/bytes_sent"), "{t}: bytes sent");
        // The error queue, as strace decoded it: the same notifications, ranges and flags.
        let (reads, completed, copied) = notifications(&calls);
        assert_eq!(reads, u(z, "/notifications"), "{t}");
        assert_eq!(completed, u(z, "/completed"), "{t}");
        assert_eq!(copied, u(z, "/copied"), "{t}");
        // The kernel's behaviour on loopback: every send completed, every one copied.
        assert_eq!(completed, took, "{t}: every send completed");
        assert_eq!(
            copied, completed,
            "{t}: the kernel copies what it delivers locally"
        );
        let warned = r["warnings"].as_array().unwrap().iter().any(|w| {
            w["kind"] == "zerocopy-copied"
                && w["message"].as_str().unwrap().contains("msg_zerocopy.rst")
        });
        assert!(warned, "{t}: {}", r["warnings"]);
    }
    // The table says so too.
    let out = sb
        .cmd()
        .args([
            "stream", "-t", "tcp", "-s", "64K", "-n", "200", "-w", "0", "--send", "zerocopy",
        ])
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("zero-copy sends") && table.contains("0 of 200"),
        "{table}"
    );
    assert!(table.contains("zerocopy/read"), "{table}");
    // Notes are wrapped to the table's width.
    let words = table.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("the kernel copied 200 of 200 MSG_ZEROCOPY sends anyway")
            && words.contains("data looped to a local socket is always copied"),
        "{table}"
    );
}

/// Run sockbench expecting `code`; its stderr.
fn fails(sb: &Sandbox, args: &[&str], code: i32) -> String {
    let out = sb.cmd().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    err
}

#[test]
fn combinations_a_method_cannot_serve_are_usage_errors_that_say_why() {
    let sb = Sandbox::new();
    for (args, why) in [
        (
            &["stream", "-t", "shm", "--send", "sendfile"][..],
            "shm has none",
        ),
        (&["stream", "-t", "mq", "--send", "splice"], "mq_send"),
        (
            &["stream", "-t", "unix", "--recv", "zerocopy"],
            "TCP_ZEROCOPY_RECEIVE is TCP's alone",
        ),
        (
            &["stream", "-t", "unix", "--send", "zerocopy"],
            "refuses SO_ZEROCOPY on Unix sockets",
        ),
        (
            &["stream", "-t", "tcp", "-e", "epoll", "--send", "splice"],
            "use --engine blocking",
        ),
        // On this host the data goes through lo, whose MTU gives no page-sized segment.
        (
            &["stream", "-t", "tcp", "--recv", "zerocopy"],
            "65483-byte segments",
        ),
        (
            &[
                "stream",
                "-t",
                "tcp",
                "--recv",
                "zerocopy",
                "--placement",
                "processes",
            ],
            "the data goes through lo",
        ),
    ] {
        let lo_mtu = std::fs::read_to_string("/sys/class/net/lo/mtu").unwrap_or_default();
        if why.contains("65483") && lo_mtu.trim() != "65536" {
            continue;
        }
        let err = fails(&sb, args, 2);
        assert!(err.contains(why), "{args:?}: {err}");
    }
    // Under -t all the same combinations are skips, recorded with the reason.
    let v = crate::common::json(
        &sb,
        &[
            "stream", "-t", "all", "-s", "4K", "-n", "50", "-w", "0", "--send", "zerocopy",
        ],
    );
    let ran: Vec<&str> = v["body"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["transport"].as_str().unwrap())
        .collect();
    assert_eq!(ran, ["tcp", "tcp6", "udp", "udp6"]);
    let skipped = v["body"]["skipped"].as_array().unwrap();
    assert!(
        skipped
            .iter()
            .any(|s| s["transport"] == "unix"
                && s["reason"].as_str().unwrap().contains("SO_ZEROCOPY"))
    );
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn a_zero_copy_receiver_behind_a_server_refuses_loopbacks_segments_when_it_connects() {
    let sb = Sandbox::new();
    let (mut server, port, _lines) = crate::common::spawn_server(sb.sockbench().args([
        "server",
        "--listen",
        "127.0.0.1",
        "--port",
        "0",
    ]));
    let target = format!("127.0.0.1:{port}");
    let err = fails(
        &sb,
        &[
            "stream", "-t", "tcp", "-n", "100", "-w", "0", "--recv", "zerocopy", "--server",
            &target,
        ],
        1,
    );
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        err.contains("maps whole pages") && err.contains("not a multiple of the 4096-byte page"),
        "{err}"
    );
    assert!(err.contains("ip link set DEV mtu"), "{err}");
}

/// Entries of /dev/shm.
fn dev_shm() -> std::collections::BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_sendfile_source_is_a_nameless_tmpfs_file_of_size_bytes_and_nothing_stays_behind() {
    let before = dev_shm();
    let sb = Sandbox::new();
    let mut child = sb
        .sockbench()
        .args([
            "stream", "-t", "unix", "-s", "300K", "-d", "5", "-w", "0", "--send", "sendfile", "-q",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // While it runs: the file it sends from, open, on tmpfs, with no name left.
    let fds = format!("/proc/{}/fd", child.id());
    let since = Instant::now();
    let mut source = None;
    while source.is_none() && since.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(50));
        source = std::fs::read_dir(&fds).ok().and_then(|d| {
            d.filter_map(Result::ok).find_map(|e| {
                let target = std::fs::read_link(e.path()).ok()?;
                let t = target.to_string_lossy().into_owned();
                (t.starts_with("/dev/shm/") && t.ends_with(" (deleted)")).then(|| (e.path(), t))
            })
        });
    }
    let (path, target) = source.expect("an open, deleted file under /dev/shm");
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.len(), 300 << 10, "{target}: one message of SIZE bytes");
    let fs = nix::sys::statfs::statfs(&path).unwrap();
    assert_eq!(
        fs.filesystem_type(),
        nix::sys::statfs::TMPFS_MAGIC,
        "{target}"
    );
    // Killed outright, it leaves nothing in /dev/shm.
    child.kill().unwrap();
    child.wait().unwrap();
    let new: Vec<String> = dev_shm().difference(&before).cloned().collect();
    let ours: Vec<&String> = new
        .iter()
        .filter(|n| n.starts_with(".tmp") || n.starts_with("sockbench"))
        .collect();
    assert!(ours.is_empty(), "left in /dev/shm: {ours:?}");
}

/// Two namespaces joined by a veth pair of `mtu`; removed when dropped.
struct Lab {
    a: String,
    b: String,
    veth_a: String,
}

impl Lab {
    fn new(mtu: u32) -> Option<Lab> {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: the veth lab needs root");
            return None;
        }
        let id = std::process::id() % 100_000;
        let lab = Lab {
            a: format!("sbsa{id}"),
            b: format!("sbsb{id}"),
            veth_a: format!("sbsva{id}"),
        };
        let n = id % 200 + 20;
        let script = format!(
            "set -e; ip netns add {a}; ip netns add {b}; ip link add {va} type veth peer name sbsvb{id}; \
             ip link set {va} netns {a}; ip link set sbsvb{id} netns {b}; \
             ip -n {a} addr add 10.214.{n}.1/24 dev {va}; ip -n {b} addr add 10.214.{n}.2/24 dev sbsvb{id}; \
             ip -n {a} link set lo up; ip -n {b} link set lo up; \
             ip -n {a} link set {va} mtu {mtu} up; ip -n {b} link set sbsvb{id} mtu {mtu} up",
            a = lab.a,
            b = lab.b,
            va = lab.veth_a,
        );
        let out = Command::new("bash").args(["-c", &script]).output().unwrap();
        if !out.status.success() {
            eprintln!(
                "skipped: cannot build two network namespaces joined by a veth pair: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        Some(lab)
    }

    fn server_address(&self) -> String {
        format!("10.214.{}.2", std::process::id() % 100_000 % 200 + 20)
    }

    fn in_ns(&self, sb: &Sandbox, ns: &str) -> Command {
        let mut c = sb.std_cmd("ip");
        c.args(["netns", "exec", ns]);
        c
    }

    /// The bytes the client's end of the veth sent (the kernel's device counter).
    fn tx_bytes(&self) -> u64 {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.a, "cat"])
            .arg(format!(
                "/sys/class/net/{}/statistics/tx_bytes",
                self.veth_a
            ))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn over_a_veth_with_page_sized_segments_zero_copy_receive_maps_pages_and_the_kernel_says_what_it_copied(
) {
    // IPv4 (20) + TCP (20) + timestamps (12) + one 4096-byte page of payload.
    let Some(lab) = Lab::new(4148) else {
        return;
    };
    let strace = have_strace();
    let sb = Sandbox::new();
    let bin = assert_cmd::cargo::cargo_bin("sockbench");
    let (server, port, _lines) = crate::common::spawn_server(
        lab.in_ns(&sb, &lab.b)
            .arg(&bin)
            .args(["server", "--port", "0"]),
    );
    let _server = Killed(server);
    let target = format!("{}:{port}", lab.server_address());
    let run = |send: &str, n: &str| -> (Value, Vec<Call>) {
        let log = sb.path().join("veth.log");
        let mut c = lab.in_ns(&sb, &lab.a);
        if strace {
            c.args([
                "strace",
                "-f",
                "-qq",
                "-e",
                TRACED,
                "-e",
                "signal=none",
                "-s",
                "0",
                "-o",
            ])
            .arg(&log);
        }
        let args = [
            "stream", "-t", "tcp", "-s", "64K", "-n", n, "-w", "0", "--send", send, "--recv",
            "zerocopy", "--server", &target, "--format", "json", "-q",
        ];
        let out = c.arg(&bin).args(args).output().unwrap();
        crate::common::assert_success(&out);
        let calls = std::fs::read_to_string(&log)
            .map(|t| calls(&t))
            .unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        (serde_json::from_slice(&out.stdout).unwrap(), calls)
    };
    let tx0 = lab.tx_bytes();
    let (v, calls) = run("zerocopy", "2000");
    let tx = lab.tx_bytes() - tx0;
    let r = &v["body"]["results"][0];
    assert!(r["error"].is_null(), "{}", r["error"]);
    let run0 = &r["runs"][0];
    assert_eq!(run0["route"], lab.veth_a.as_str());
    assert_eq!(u(run0, "/mtu_bytes"), 4148);
    // The bytes agree: sent, received (mapped + copied), and at least that much left
    // through the veth as the kernel counted it.
    let sent = u(r, "/bytes_sent");
    assert_eq!(sent, 2000 * 65536);
    assert_eq!(u(r, "/bytes_received"), sent);
    let (mapped, copied) = (u(r, "/recv/bytes_mapped"), u(r, "/recv/bytes_copied"));
    assert_eq!(mapped + copied, sent);
    assert!(mapped > 0, "no page mapped: {}", r["recv"]);
    assert_eq!(mapped % 4096, 0, "whole pages");
    assert!(tx >= sent, "the veth sent {tx} bytes for {sent} of payload");
    // The zero-copy sends: as the kernel reported them on the error queue.
    let z = &r["send"]["zerocopy"];
    assert_eq!(u(z, "/completed"), u(z, "/sends"), "{z}");
    if strace {
        let (reads, completed, copied) = notifications(&calls);
        assert_eq!(
            (reads, completed, copied),
            (u(z, "/notifications"), u(z, "/completed"), u(z, "/copied"))
        );
        assert_eq!(tally(&calls, "sendto", "MSG_ZEROCOPY").1, sent);
    }
    eprintln!(
        "over the veth: {} of {} MSG_ZEROCOPY sends copied by the kernel; {mapped} of {sent} bytes mapped",
        u(z, "/copied"),
        u(z, "/sends")
    );
    // A sender's write reaches the receiver in pages it cannot map: every byte copied,
    // and the report says so.
    let (v, _) = run("write", "300");
    let r = &v["body"]["results"][0];
    assert_eq!(u(r, "/bytes_received"), u(r, "/bytes_sent"));
    assert_eq!(
        u(r, "/recv/bytes_mapped") + u(r, "/recv/bytes_copied"),
        u(r, "/bytes_sent")
    );
    if u(r, "/recv/bytes_mapped") == 0 {
        assert!(r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["kind"] == "zerocopy-unmapped"));
    }
}

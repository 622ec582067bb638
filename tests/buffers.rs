//! Socket buffers as a sweep axis: each `--sndbuf`/`--rcvbuf` value is a scenario, the
//! size the kernel granted is what the kernel itself answers for such a request, and a
//! starved receive buffer shows in the throughput.

use crate::common::{json, u, Sandbox};
use socket2::{Domain, Socket, Type};

/// What this kernel grants a socket of `domain` that asks for `asked` bytes of receive
/// buffer: the oracle, computed without sockbench.
fn granted_rcvbuf(domain: Domain, asked: usize) -> u64 {
    let s = Socket::new(domain, Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(asked).unwrap();
    s.recv_buffer_size().unwrap() as u64
}

#[test]
fn each_receive_buffer_is_a_scenario_granted_as_the_kernel_grants_it() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "stream",
            "-t",
            "unix,tcp",
            "-s",
            "64K",
            "--rcvbuf",
            "1,4K,256K",
            "-d",
            "0.3",
            "-w",
            "0",
        ],
    );
    let results = v["body"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 6);
    let mut bps = std::collections::HashMap::new();
    for (i, r) in results.iter().enumerate() {
        let (transport, asked) = (r["transport"].as_str().unwrap(), [1, 4096, 262_144][i % 3]);
        assert_eq!(transport, ["unix", "tcp"][i / 3]);
        assert_eq!(u(r, "/options/rcvbuf_bytes"), asked);
        assert!(r["options"]["sndbuf_bytes"].is_null());
        let domain = match transport {
            "unix" => Domain::UNIX,
            _ => Domain::IPV4,
        };
        assert_eq!(
            u(r, "/runs/0/rcvbuf_bytes"),
            granted_rcvbuf(domain, asked as usize),
            "{transport} --rcvbuf {asked}"
        );
        // Both sides counted the same bytes.
        assert_eq!(
            u(r, "/runs/0/bytes_sent"),
            u(r, "/runs/0/bytes_received"),
            "{transport} {asked}"
        );
        bps.insert((transport, asked), r["bits_per_second"].as_f64().unwrap());
    }
    // TCP's window is its receive buffer: the kernel's smallest one starves it.
    assert!(
        bps[&("tcp", 1)] * 4.0 < bps[&("tcp", 262_144)],
        "tcp by rcvbuf: {bps:?}"
    );
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn the_buffer_table_shows_asked_granted_and_throughput_in_bits_and_bytes() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "stream", "-t", "unix,tcp", "-s", "64K", "--rcvbuf", "4K..8K", "-d", "0.2", "-w", "0",
            "--units", "both",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains("Throughput by socket buffer (rcvbuf)"),
        "{table}"
    );
    let granted = |d| common_granted(d, 4096);
    let row = table
        .lines()
        .find(|l| l.contains(" 4 KiB "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains(&granted(Domain::UNIX)), "{row}");
    assert!(row.contains("bit/s (") && row.contains("iB/s)"), "{row}");
    assert!(table.lines().any(|l| l.contains(" 8 KiB ")), "{table}");

    // --sndbuf as an axis too.
    let v = json(
        &sb,
        &[
            "stream", "-t", "unix", "-s", "64K", "--sndbuf", "1,1M", "-d", "0.3", "-w", "0",
        ],
    );
    let rs = v["body"]["results"].as_array().unwrap();
    let asked: Vec<u64> = rs.iter().map(|r| u(r, "/options/sndbuf_bytes")).collect();
    assert_eq!(asked, [1, 1 << 20]);
    // A Unix stream socket charges what is in flight to the sender's buffer: there the
    // smallest buffer starves the stream, each receive getting at most the little it
    // holds. Counted by the kernel's calls (strace), not timed: 300 messages of 64 KiB
    // (19.7 MB) take a receive per few KiB through the smallest buffer (under 10 KiB
    // each: over 2,000), and through 1 MiB one per message, or per piece of one when the
    // receiver wakes before the whole message is there.
    if !crate::common::have("strace") {
        return;
    }
    let receives = |sndbuf: &str| -> u64 {
        let count = sb.path().join(format!("recv-{sndbuf}.strace"));
        let out = std::process::Command::new("strace")
            .args(["-f", "-c", "-e", "trace=recvfrom", "-o"])
            .arg(&count)
            .arg(env!("CARGO_BIN_EXE_sockbench"))
            .args([
                "stream", "-t", "unix", "-s", "64K", "-n", "300", "-w", "0", "-q",
            ])
            .args(["--sndbuf", sndbuf, "--format", "json"])
            .env("TMPDIR", sb.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let table = std::fs::read_to_string(&count).unwrap();
        table
            .lines()
            .find(|l| l.trim_end().ends_with(" recvfrom"))
            .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
            .unwrap_or_else(|| panic!("no recvfrom count in {table}"))
    };
    let (smallest, large) = (receives("1"), receives("1M"));
    assert!(
        smallest > 2000 && smallest > 2 * large && large >= 300,
        "receives of 300 messages through the smallest send buffer {smallest}, through 1 MiB {large}"
    );
}

/// The granted size as the table prints it ("8 KiB").
fn common_granted(domain: Domain, asked: usize) -> String {
    let n = granted_rcvbuf(domain, asked);
    assert_eq!(n % 1024, 0, "a whole number of KiB for these sizes: {n}");
    format!("{} KiB", n / 1024)
}

#[test]
fn a_bad_buffer_list_is_a_usage_error_naming_the_flag() {
    let sb = Sandbox::new();
    for bad in ["abc", "0", "4K..1K"] {
        let out = sb
            .cmd()
            .args(["stream", "-t", "tcp", "--rcvbuf", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--rcvbuf"), "{bad}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn sixty_mebibyte_messages_are_bounded_by_time_not_by_a_count() {
    let sb = Sandbox::new();
    let t = std::time::Instant::now();
    let v = json(
        &sb,
        &[
            "stream", "-t", "unix,tcp", "-s", "60M", "-d", "0.3", "-w", "0",
        ],
    );
    for r in v["body"]["results"].as_array().unwrap() {
        let ran = r["runs"][0]["duration_seconds"].as_f64().unwrap();
        // The interval is the duration plus at most the last message's own time.
        assert!((0.3..2.0).contains(&ran), "{}: {ran} s", r["transport"]);
        assert_eq!(u(r, "/bytes_sent"), u(r, "/bytes_received"));
        assert_eq!(u(r, "/bytes_received") % (60 << 20), 0, "whole messages");
    }
    let v = json(
        &sb,
        &[
            "pingpong", "-t", "unix", "-s", "60M", "-d", "0.3", "-w", "0",
        ],
    );
    assert!(u(&v, "/body/results/0/messages_received") >= 1);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        t.elapsed()
    );
}

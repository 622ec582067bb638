//! `sockbench server --data-port`: every test's TCP connections and UDP datagrams on one
//! fixed port. Runs over it agree on both sides, several at once; the server's sockets
//! seen from outside (/proc/PID/fd and /proc/PID/net) sit on the control port and the
//! data port only; strangers on the data port do not disturb a run; bad values are
//! usage errors.

use std::collections::HashSet;
use std::io::Write;
use std::net::{Ipv4Addr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use crate::common::{u, Sandbox};
use serde_json::Value;

/// A port free for TCP on every address and for UDP on the loopback: bound, read, closed.
fn free_port() -> u16 {
    for _ in 0..50 {
        let tcp = TcpListener::bind("[::]:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        if UdpSocket::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
            && UdpSocket::bind(("::1", port)).is_ok()
        {
            return port;
        }
    }
    panic!("no port free for both TCP and UDP");
}

/// A running `sockbench server --port 0 --data-port P` (killed when dropped), with its
/// two ports.
struct Server {
    server: crate::common::Server,
    control: u16,
    data: u16,
    first_line: String,
}

impl Server {
    fn start(sb: &Sandbox, extra: &[&str]) -> Server {
        let data = free_port();
        let server = crate::common::Server::from_command(
            sb.sockbench()
                .args(["server", "--port", "0", "--data-port", &data.to_string()])
                .args(extra),
        );
        Server {
            control: server.port,
            data,
            first_line: server.first_line(),
            server,
        }
    }

    fn addr(&self) -> String {
        self.server.addr()
    }

    fn pid(&self) -> u32 {
        self.server.pid()
    }
}

/// A client run against `server`, its JSON report (it must succeed).
fn client(sb: &Sandbox, server: &Server, args: &[&str]) -> Value {
    let addr = server.addr();
    let mut all = args.to_vec();
    all.extend(["--server", &addr, "-w", "0"]);
    crate::common::json(sb, &all)
}

/// Every result ran without an error; TCP moved as many bytes as it sent, UDP lost no
/// more than it sent.
fn agrees(v: &Value, what: &str) {
    let results = v["body"]["results"].as_array().unwrap();
    assert!(!results.is_empty(), "{what}: no results");
    for r in results {
        let t = r["transport"].as_str().unwrap();
        assert!(r["error"].is_null(), "{what} {t}: {}", r["error"]);
        assert!(u(r, "/messages_received") > 0, "{what} {t}: {r}");
        if t.starts_with("tcp") {
            assert_eq!(
                u(r, "/bytes_sent"),
                u(r, "/bytes_received"),
                "{what} {t}: {r}"
            );
        } else if r.pointer("/messages_lost").is_some() {
            assert_eq!(
                u(r, "/messages_received") + u(r, "/messages_lost"),
                u(r, "/messages_sent"),
                "{what} {t}: {r}"
            );
        }
    }
}

#[test]
fn tcp_and_udp_runs_over_the_data_port_agree_on_both_sides() {
    let sb = Sandbox::new();
    let server = Server::start(&sb, &[]);
    assert!(
        server
            .first_line
            .contains(&format!("data on port {}", server.data)),
        "{}",
        server.first_line
    );
    let v = client(
        &sb,
        &server,
        &["stream", "-t", "tcp", "-P", "4", "-s", "4K", "-n", "300"],
    );
    agrees(&v, "stream -P 4");
    assert_eq!(
        u(&v["body"]["results"][0], "/bytes_received"),
        4 * 300 * 4096
    );
    let v = client(&sb, &server, &["pingpong", "-t", "udp", "-n", "300"]);
    agrees(&v, "pingpong udp");
    assert_eq!(u(&v["body"]["results"][0], "/messages_received"), 300);
    let v = client(
        &sb,
        &server,
        &["rate", "-t", "udp", "-P", "2", "-n", "300", "--rate", "20k"],
    );
    agrees(&v, "rate udp -P 2");
    assert_eq!(u(&v["body"]["results"][0], "/messages_sent"), 2 * 300);
    // The other family, the server sending, and both ways at once (each stream's
    // connection must reach its own stream: the roles differ).
    let v = client(
        &sb,
        &server,
        &["stream", "-t", "tcp6,udp6", "-s", "4K", "-n", "200", "-R"],
    );
    agrees(&v, "tcp6,udp6 -R");
    let v = client(
        &sb,
        &server,
        &[
            "stream", "-t", "tcp,udp", "-P", "2", "-s", "4K", "-n", "200", "--bidir",
        ],
    );
    agrees(&v, "--bidir -P 2");
}

#[test]
fn two_clients_at_once_share_the_data_port() {
    let sb = Sandbox::new();
    let server = Server::start(&sb, &["--max-clients", "2"]);
    let addr = server.addr();
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let mut cmd = sb.cmd();
            cmd.args(["stream", "-t", "tcp,udp", "-P", "2", "-d", "0.4", "-w", "0"])
                .args(["--server", &addr, "--format", "json", "-q"]);
            std::thread::spawn(move || cmd.output().unwrap())
        })
        .collect();
    for (i, h) in runs.into_iter().enumerate() {
        let out = h.join().unwrap();
        crate::common::assert_success(&out);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        agrees(&v, &format!("client {i}"));
    }
}

/// The local ports of the TCP and UDP sockets process `pid` holds, each with its state
/// (as in /proc/net/tcp: 0A listening, 01 established or, for UDP, connected).
fn socket_ports(pid: u32) -> Vec<(&'static str, u16, String)> {
    let mut inodes = HashSet::new();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    for fd in fds.flatten() {
        if let Ok(target) = std::fs::read_link(fd.path()) {
            let t = target.to_string_lossy().into_owned();
            if let Some(i) = t.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')) {
                inodes.insert(i.to_string());
            }
        }
    }
    let mut out = Vec::new();
    for table in ["tcp", "tcp6", "udp", "udp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap();
        for line in text.lines().skip(1) {
            // A busy test machine lists tens of thousands of TIME-WAIT sockets (state
            // 06), none of them a process's: skip them before any further parsing, so a
            // sample stays quick however many there are.
            let mut f = line.split_whitespace();
            let (Some(local), Some(state)) = (f.nth(1), f.nth(1)) else {
                continue;
            };
            if state == "06" {
                continue;
            }
            let Some(inode) = f.nth(5) else {
                continue;
            };
            if !inodes.contains(inode) {
                continue;
            }
            let port = u16::from_str_radix(local.rsplit(':').next().unwrap(), 16).unwrap();
            let proto = if table.starts_with("tcp") {
                "tcp"
            } else {
                "udp"
            };
            out.push((proto, port, state.to_string()));
        }
    }
    out
}

/// Run `args` against `server` while sampling the server's sockets; every socket seen
/// is on the control port or the data port, and at some moment at least `want`
/// connected `proto` sockets were on the data port (so the run was seen at all).
fn only_the_two_ports_while(
    sb: &Sandbox,
    server: &Server,
    args: &[&str],
    proto: &str,
    want: usize,
) {
    let addr = server.addr();
    let mut cmd = sb.cmd();
    cmd.args(args)
        .args(["-w", "0", "--server", &addr, "--format", "json", "-q"]);
    let run = std::thread::spawn(move || cmd.output().unwrap());
    let mut most = 0;
    let mut samples = Vec::new();
    // Until the run ends (the run is long enough to be seen many times over).
    let until = Instant::now() + Duration::from_secs(30);
    while !run.is_finished() && Instant::now() < until {
        let socks = socket_ports(server.pid());
        for (p, port, state) in &socks {
            assert!(
                *port == server.control || *port == server.data,
                "{p} socket on port {port} (state {state}); control {}, data {}: {socks:?}",
                server.control,
                server.data
            );
        }
        let on_data = socks
            .iter()
            .filter(|(p, port, st)| *p == proto && *port == server.data && st == "01")
            .count();
        most = most.max(on_data);
        samples.push(socks);
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = run.join().unwrap();
    crate::common::assert_success(&out);
    agrees(&serde_json::from_slice(&out.stdout).unwrap(), args[0]);
    assert!(
        most >= want,
        "{args:?}: at most {most} connected {proto} sockets on the data port were seen in {} samples: {:?}",
        samples.len(),
        samples.last()
    );
}

#[test]
fn the_servers_data_sockets_sit_on_the_data_port_only() {
    // The server's /proc/PID/net tables then list this test's sockets only: each sample is
    // quick however many sockets the machine holds (a loaded one took 2 in 5 s).
    crate::common::own_netns();
    let sb = Sandbox::new();
    let server = Server::start(&sb, &[]);
    only_the_two_ports_while(
        &sb,
        &server,
        // At a set rate, so that the sampling thread gets a CPU on a small machine.
        &["rate", "-t", "tcp", "-P", "4", "-d", "5", "--rate", "5k"],
        "tcp",
        4,
    );
    only_the_two_ports_while(
        &sb,
        &server,
        &["rate", "-t", "udp", "-P", "2", "-d", "5", "--rate", "5k"],
        "udp",
        2,
    );
    // The data listener is on the port from the start, with nothing else.
    let socks = socket_ports(server.pid());
    assert!(
        socks
            .iter()
            .any(|(p, port, st)| *p == "tcp" && *port == server.data && st == "0A"),
        "{socks:?}"
    );
}

#[test]
fn strangers_on_the_data_port_do_not_disturb_a_run() {
    let sb = Sandbox::new();
    let server = Server::start(&sb, &[]);
    let data = (Ipv4Addr::LOCALHOST, server.data);
    // One says nothing (and stays), one sends garbage, one sends a token no run has.
    let silent = TcpStream::connect(data).unwrap();
    let mut garbage = TcpStream::connect(data).unwrap();
    garbage.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut wrong = TcpStream::connect(data).unwrap();
    wrong.write_all(&[0u8; 16]).unwrap();
    let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let strays = std::thread::spawn(move || {
        // Stray datagrams all through the runs.
        for _ in 0..100 {
            let _ = udp.send_to(b"stray", data);
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let v = client(
        &sb,
        &server,
        &["stream", "-t", "tcp", "-P", "2", "-s", "4K", "-n", "300"],
    );
    agrees(&v, "stream beside strangers");
    let v = client(&sb, &server, &["pingpong", "-t", "udp", "-n", "300"]);
    agrees(&v, "pingpong beside strangers");
    assert_eq!(u(&v["body"]["results"][0], "/messages_received"), 300);
    strays.join().unwrap();
    // Those with a wrong token were hung up on; the silent one waits its deadline out.
    for mut s in [garbage, wrong] {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 8];
        match std::io::Read::read(&mut s, &mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("a stranger's connection was not closed: {other:?}"),
        }
    }
    drop(silent);
}

#[test]
fn a_data_port_equal_to_the_control_port_or_zero_is_a_usage_error() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args(["server", "--port", "5291", "--data-port", "5291"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--data-port 5291 is the control port"),
        "{err}"
    );
    let out = sb
        .cmd()
        .args(["server", "--port", "5291", "--data-port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a fixed port"));
}

#[test]
fn connect_is_refused_with_the_reason_on_a_data_port_server() {
    let sb = Sandbox::new();
    let server = Server::start(&sb, &[]);
    let out = sb
        .cmd()
        .args(["connect", "-t", "tcp", "-n", "10", "-w", "0"])
        .args(["--server", &server.addr()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--data-port"), "{err}");
    // The server goes on serving.
    let v = client(&sb, &server, &["stream", "-t", "tcp", "-n", "10"]);
    agrees(&v, "stream after connect");
}

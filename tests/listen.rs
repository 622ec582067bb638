//! `sockbench listen` driven by real clients: netcat (openbsd) over unix, tcp and udp, and
//! sockets of this test for what nc cannot do (seqpacket, resets, many at once). The log
//! must say what the clients really sent, read by read; escape bytes come out escaped;
//! Ctrl-C prints the summary and removes the socket file.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::Sandbox;
use serde_json::Value;

/// A running `sockbench listen`, its stdout collected line by line.
struct Listen {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    /// The first line: where it listens and how to connect.
    first: String,
    /// The thread collecting stdout; it ends at the end of the output.
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Listen {
    fn start(sb: &Sandbox, args: &[&str]) -> Listen {
        let mut child = sb
            .sockbench()
            .arg("listen")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = out
            .next()
            .unwrap_or_else(|| {
                let mut err = String::new();
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                panic!("listen {args:?} printed nothing: {err}")
            })
            .unwrap();
        let lines = Arc::new(Mutex::new(vec![first.clone()]));
        let sink = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for l in out.map_while(Result::ok) {
                sink.lock().unwrap().push(l);
            }
        });
        Listen {
            child,
            lines,
            first,
            reader: Some(reader),
        }
    }

    /// The ready command it printed (text format).
    fn connect_command(&self) -> Vec<String> {
        self.first
            .split("connect with: ")
            .nth(1)
            .unwrap_or_else(|| panic!("{}", self.first))
            .split(" (")
            .next()
            .unwrap()
            .split_whitespace()
            .map(String::from)
            .collect()
    }

    /// The port of an IP listener.
    fn port(&self) -> u16 {
        self.connect_command().last().unwrap().parse().unwrap()
    }

    fn log(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// The log once it holds `text`, or as it is after 3 s.
    fn log_with(&self, text: &str) -> String {
        let until = Instant::now() + Duration::from_secs(3);
        while !self.log().contains(text) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.log()
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ctrl-C: the exit status, the whole log and stderr, and how long it took to exit.
    fn stop(mut self) -> (std::process::ExitStatus, String, String, Duration) {
        let t = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        let status = self.child.wait().unwrap();
        let took = t.elapsed();
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        // The whole output: the summary's table may still be in the pipe when the process
        // has exited, so wait for the reader to reach its end.
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let log = self.log();
        (status, log, err, took)
    }
}

impl Drop for Listen {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run netcat with `args` (as the listener printed them, plus flags), feeding `input`;
/// what it printed.
fn nc(args: &[String], extra: &[&str], input: &[u8]) -> Vec<u8> {
    let mut c = Command::new(&args[0])
        .args(&args[1..])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("netcat-openbsd is installed (.ci/run installs it)");
    c.stdin.take().unwrap().write_all(input).unwrap();
    let out = c.wait_with_output().unwrap();
    out.stdout
}

fn has_nc() -> bool {
    let ok = Command::new("nc")
        .arg("-h")
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .is_ok();
    if !ok {
        eprintln!("skipped: no nc (netcat-openbsd)");
    }
    ok
}

#[test]
fn nc_over_unix_is_logged_read_by_read_escaped_and_the_socket_file_goes_at_ctrl_c() {
    if !has_nc() {
        return;
    }
    let sb = Sandbox::new();
    let l = Listen::start(&sb, &["-t", "unix", "-v", "2"]);
    let cmd = l.connect_command();
    assert_eq!(cmd[..2], ["nc", "-U"], "{}", l.first);
    let path = std::path::PathBuf::from(&cmd[2]);
    assert!(
        path.starts_with(sb.path()),
        "under $XDG_RUNTIME_DIR: {path:?}"
    );
    assert!(path.exists());
    // A screen clear, a bell and a C1 CSI: none may reach a terminal.
    nc(&cmd, &["-N"], b"hi\x1b[2J\x07\xc2\x9b\n");
    let log = l.log_with("close");
    assert!(log.contains("#1 accept from"), "{log}");
    assert!(
        log.contains(r#"#1 read 10 bytes "hi\x1b[2J\x07\xc2\x9b\n""#),
        "{log}"
    );
    assert!(
        log.contains("#1 close: end of file (10 bytes in 1 read"),
        "{log}"
    );
    assert!(!log.contains('\u{1b}') && !log.contains('\u{7}'));
    let (status, log, err, took) = l.stop();
    assert!(status.success(), "{err}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert!(log.contains("summary: 1 peer"), "{log}");
    let row = log.lines().find(|r| r.contains("│ #1 ")).unwrap();
    assert!(row.contains(" 10 ") && row.contains(" 1 "), "{row}");
    assert!(!path.exists(), "the socket file is removed");
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn nc_over_tcp_with_one_byte_reads_shows_every_byte_and_json_lines_parse() {
    if !has_nc() {
        return;
    }
    let sb = Sandbox::new();
    let l = Listen::start(
        &sb,
        &[
            "-t",
            "tcp",
            "-p",
            "0",
            "--read-size",
            "1",
            "-v",
            "2",
            "--format",
            "json",
        ],
    );
    let first: Value = serde_json::from_str(&l.first).unwrap();
    assert_eq!(first["event"], "listening");
    let connect: Vec<String> = first["connect"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .map(String::from)
        .collect();
    assert_eq!(connect[..2], ["nc", "127.0.0.1"]);
    nc(&connect, &["-N"], b"abc\n");
    l.log_with("\"close\"");
    let (status, log, _, _) = l.stop();
    assert!(status.success());
    let events: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let reads: Vec<&Value> = events.iter().filter(|e| e["event"] == "read").collect();
    // --read-size 1: one read per byte, in order, each timed.
    let data: Vec<&str> = reads.iter().map(|r| r["data"].as_str().unwrap()).collect();
    assert_eq!(data, ["a", "b", "c", "\\n"]);
    assert!(reads.iter().all(|r| r["bytes"] == 1 && r["id"] == 1));
    let monos: Vec<f64> = reads
        .iter()
        .map(|r| r["mono_s"].as_f64().unwrap())
        .collect();
    assert!(monos.windows(2).all(|w| w[0] <= w[1]), "{monos:?}");
    assert!(reads[0]["wall"].as_str().unwrap().ends_with('Z'));
    let close = events.iter().find(|e| e["event"] == "close").unwrap();
    assert_eq!(
        (close["reason"].as_str(), close["bytes"].as_u64()),
        (Some("eof"), Some(4))
    );
    let summary = events.last().unwrap();
    assert_eq!(summary["event"], "summary");
    // The summary is a document like every command's, of kind listen.
    assert_eq!(summary["kind"], "listen");
    assert_eq!(summary["schema_version"], sockbench::report::SCHEMA_VERSION);
    assert!(summary["command"][1] == "listen", "{summary}");
    assert!(summary["started_at"].is_string() && summary["ended_at"].is_string());
    let body = &summary["body"];
    assert_eq!(body["connections"][0]["bytes"], 4);
    assert_eq!(body["connections"][0]["reads"], 4);
    assert_eq!(body["connections"][0]["id"], 1);
    assert_eq!(body["transport"], "tcp", "{body}");
}

#[test]
fn nc_over_udp_is_a_peer_and_echo_answers_it() {
    if !has_nc() {
        return;
    }
    let sb = Sandbox::new();
    let l = Listen::start(&sb, &["-t", "udp", "-p", "0", "--echo", "-v", "2"]);
    let cmd = l.connect_command();
    assert_eq!(cmd[..2], ["nc", "-u"], "{}", l.first);
    let echoed = nc(&cmd, &["-w", "1"], b"ping");
    assert_eq!(echoed, b"ping");
    let log = l.log_with("#1 read 4 bytes");
    assert!(log.contains("#1 new peer 127.0.0.1:"), "{log}");
    assert!(log.contains("#1 read 4 bytes from 127.0.0.1:"), "{log}");
    assert!(log.contains(r#""ping""#), "{log}");
    let (status, log, _, _) = l.stop();
    assert!(status.success());
    assert!(log.contains("summary: 1 peer"), "{log}");
}

#[test]
fn a_datagram_longer_than_the_read_is_said_to_be_cut() {
    let sb = Sandbox::new();
    let l = Listen::start(&sb, &["-t", "udp", "-p", "0", "--read-size", "4"]);
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.send_to(b"0123456789", ("127.0.0.1", l.port())).unwrap();
    // The read's own line: the line before it says `--read-size`, which holds "read",
    // and the idle soak once caught the log between the two.
    let log = l.log_with("#1 read 4 bytes");
    assert!(
        log.contains("#1 a datagram of 10 bytes was cut to the 4 bytes of --read-size"),
        "{log}"
    );
    assert!(log.contains("#1 read 4 bytes"), "{log}");
}

#[test]
fn many_connections_at_once_on_one_thread_each_counted_exactly() {
    let sb = Sandbox::new();
    let l = Listen::start(&sb, &["-t", "tcp", "-p", "0"]);
    let port = l.port();
    const N: usize = 200;
    let mut conns: Vec<TcpStream> = (0..N)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    // Every connection open at once, each writing its own amount in two pieces.
    for (i, c) in conns.iter_mut().enumerate() {
        c.write_all(&vec![b'x'; i + 1]).unwrap();
    }
    for (i, c) in conns.iter_mut().enumerate() {
        c.write_all(&vec![b'y'; 1000 + i]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let tasks = std::fs::read_dir(format!("/proc/{}/task", l.pid()))
        .unwrap()
        .count();
    assert_eq!(tasks, 1, "one thread serves every connection");
    drop(conns);
    // Every connection's end read (however loaded the machine), then Ctrl-C.
    let until = Instant::now() + Duration::from_secs(20);
    while l.log().matches(": end of file").count() < N && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, log, _, _) = l.stop();
    assert!(status.success());
    assert!(log.contains(&format!("summary: {N} peers")), "{log}");
    let mut bytes: Vec<u64> = log
        .lines()
        .filter(|r| r.starts_with("│ #"))
        .map(|r| r.split('┆').nth(2).unwrap().trim().parse().unwrap())
        .collect();
    bytes.sort_unstable();
    let want: Vec<u64> = (0..N as u64).map(|i| 2 * i + 1001).collect();
    assert_eq!(bytes, want);
}

#[test]
fn a_reset_and_a_seqpacket_client_are_logged_as_what_they_are() {
    let sb = Sandbox::new();
    let l = Listen::start(&sb, &["-t", "tcp", "-p", "0"]);
    let c = TcpStream::connect(("127.0.0.1", l.port())).unwrap();
    socket2::SockRef::from(&c)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(c);
    assert!(
        l.log_with("close").contains("#1 close: reset by the peer"),
        "{}",
        l.log()
    );

    let path = sb.path().join("seq.sock");
    let l = Listen::start(
        &sb,
        &["-t", "unix-seqpacket", "--path", path.to_str().unwrap()],
    );
    assert!(l
        .first
        .contains(&format!("UNIX-CONNECT:{},type=5", path.display())));
    let s = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::SEQPACKET, None).unwrap();
    s.connect(&socket2::SockAddr::unix(&path).unwrap()).unwrap();
    s.send(b"one").unwrap();
    s.send(b"three").unwrap();
    drop(s);
    let log = l.log_with("close");
    // A packet is one read, whatever arrived before it was read.
    assert!(log.contains("#1 read 3 bytes"), "{log}");
    assert!(log.contains("#1 read 5 bytes"), "{log}");
    assert!(log.contains("(8 bytes in 2 reads"), "{log}");
    let (status, _, _, _) = l.stop();
    assert!(status.success());
    assert!(!path.exists());
}

#[test]
fn a_unix_clients_own_socket_path_is_logged_escaped_never_as_a_terminal_sequence() {
    let sb = Sandbox::new();
    // A client names its own socket: these characters would recolour the terminal, retitle
    // it and (U+009B, a one-character CSI) clear it.
    let hostile = |kind: &str| {
        sb.path().join(format!(
            "{kind}\u{1b}[31mred\u{1b}]0;owned\u{7}\u{9b}2J.sock"
        ))
    };
    let shown = |kind: &str| format!("{kind}\\x1b[31mred\\x1b]0;owned\\x07\\u{{9b}}2J.sock");
    for (transport, ty, kind) in [
        ("unix", socket2::Type::STREAM, "stream"),
        ("unix-dgram", socket2::Type::DGRAM, "dgram"),
    ] {
        let path = sb.path().join(format!("{kind}.sock"));
        let l = Listen::start(&sb, &["-t", transport, "--path", path.to_str().unwrap()]);
        let s = socket2::Socket::new(socket2::Domain::UNIX, ty, None).unwrap();
        s.bind(&socket2::SockAddr::unix(hostile(kind)).unwrap())
            .unwrap();
        s.connect(&socket2::SockAddr::unix(&path).unwrap()).unwrap();
        s.send(b"hi").unwrap();
        drop(s);
        let log = l.log_with("read 2 bytes");
        assert!(log.contains(&shown(kind)), "{log}");
        let (status, log, err, _) = l.stop();
        assert!(status.success(), "{err}");
        for text in [&log, &err] {
            assert!(
                !text.contains(['\u{1b}', '\u{7}', '\u{9b}']),
                "{transport}: a control character reached the terminal: {text:?}"
            );
        }
        // The summary names the peer the same way.
        assert!(
            log.lines()
                .any(|l| l.starts_with('│') && l.contains(&shown(kind))),
            "{log}"
        );
    }
}

#[test]
fn bad_flags_a_busy_port_and_an_existing_file_are_errors_that_leave_everything_as_it_was() {
    let sb = Sandbox::new();
    let run = |args: &[&str]| sb.cmd().arg("listen").args(args).output().unwrap();
    for (args, says) in [
        (&["-t", "pipe"][..], "unix, unix-dgram"),
        (&["--read-size", "abc"][..], "--read-size"),
        (
            &["-t", "tcp6", "--listen", "127.0.0.1"][..],
            "other IP family",
        ),
        (&["-v", "4"][..], "-v"),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let out = run(&["-t", "tcp", "-p", &port]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in use") && err.contains("--port 0"), "{err}");
    let file = sb.path().join("precious");
    std::fs::write(&file, "keep me").unwrap();
    let out = run(&["-t", "unix", "--path", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    std::fs::remove_file(&file).unwrap();
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn duration_ends_it_with_the_summary() {
    let sb = Sandbox::new();
    let t = Instant::now();
    let out = sb
        .cmd()
        .args(["listen", "-t", "unix", "-d", "0.3"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("summary: 0 peers"));
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

/// In a format of a whole document the summary holds stdout and the log goes to stderr;
/// an export holds the summary document (issue 30).
#[test]
fn the_summary_comes_in_every_format_with_the_log_on_stderr() {
    let sb = Sandbox::new();
    let json = sb.path().join("summary.json");
    let out = sb
        .cmd()
        .args([
            "listen",
            "-p",
            "0",
            "-d",
            "0.3",
            "--format",
            "csv",
            "--export-json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        csv, "bits_per_second,bytes,duration_seconds,id,peer,reads\n",
        "no peer: the header alone"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("listening on tcp"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["kind"], "listen");
    assert_eq!(v["body"]["connections"], serde_json::json!([]));
}

/// With `--format json` the log (NDJSON, its summary last) holds stdout, and an export to
/// stdout in another format follows it there, as it follows any command's document.
#[test]
fn a_json_log_is_followed_by_an_export_to_stdout() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args(["listen", "-p", "0", "-d", "0.3", "--format", "json"])
        .args(["--export-markdown", "-"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let log: Vec<&str> = text.lines().take_while(|l| l.starts_with('{')).collect();
    let last: Value = serde_json::from_str(log.last().unwrap()).unwrap();
    assert_eq!(last["kind"], "listen", "{text}");
    let markdown: Vec<&str> = text.lines().skip(log.len()).collect();
    assert_eq!(markdown.first(), Some(&"### summary: 0 peers"), "{text}");
}

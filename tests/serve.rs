//! `sockbench serve`: every concurrency model under real clients (ab with and without
//! keep-alive, wrk, h2load pipelining), its count checked against theirs; malformed,
//! oversized, binary and slow requests answered or closed while others are still served;
//! HTTP/1.0 and 1.1 connection handling on the wire; 10,000 idle keep-alive connections;
//! Ctrl-C; bad flags.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::common::{have, Sandbox};
use serde_json::Value;

const MODELS: [&str; 8] = [
    "thread",
    "pool",
    "select",
    "poll",
    "epoll",
    "epoll-workers",
    "io-uring",
    "async",
];

/// A running `sockbench serve`.
struct Served {
    child: Child,
    port: u16,
    lines: Receiver<String>,
}

impl Served {
    /// `sockbench serve --model MODEL --port 0 --backlog 1024 -v 0 --format json EXTRA`.
    fn start(sb: &Sandbox, model: &str, extra: &[&str]) -> Served {
        let mut cmd = sb.sockbench();
        cmd.args(["serve", "--model", model, "--port", "0", "--format", "json"]);
        // Defaults the extra flags may replace.
        for (flag, value) in [("--backlog", "1024"), ("-v", "0")] {
            if !extra.contains(&flag) {
                cmd.args([flag, value]);
            }
        }
        cmd.args(extra);
        Served::spawn(cmd)
    }

    fn spawn(mut cmd: std::process::Command) -> Served {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let port = first
            .split("http://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let (tx, rx) = std::sync::mpsc::channel();
        let _ = tx.send(first);
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Served {
            child,
            port,
            lines: rx,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Ctrl-C; the exit status and the JSON summary. Fails if it takes over 3 s.
    fn stop(mut self) -> (i32, Value) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        let t = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                let mut out = String::new();
                self.child
                    .stdout
                    .take()
                    .unwrap()
                    .read_to_string(&mut out)
                    .unwrap();
                let v: Value = serde_json::from_str(&out)
                    .unwrap_or_else(|e| panic!("summary is not JSON ({e}): {out:?}"));
                return (st.code().unwrap_or(-1), v);
            }
            if t.elapsed() > Duration::from_secs(3) {
                let _ = self.child.kill();
                let log: Vec<String> = self.lines.try_iter().collect();
                panic!("serve did not stop within 3 s of Ctrl-C: {log:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run a client; its stdout.
fn client(args: &[&str]) -> String {
    let out = std::process::Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?} failed: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The number after `key` on the line that has it.
fn figure(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {key:?} in {text}"))
}

/// ab (with and without -k), wrk and h2load against `model`: no failure, no non-2xx,
/// and the server answered exactly what ab and h2load asked, and at least what wrk counted
/// (at most one request more per connection: those in flight when wrk stopped).
fn real_clients(model: &str) {
    if !(have("ab") && have("wrk") && have("h2load")) {
        return;
    }
    let sb = Sandbox::new();
    let s = Served::start(&sb, model, &[]);
    let url = s.url();
    for keep in [false, true] {
        let mut args = vec!["ab", "-q", "-n", "5000", "-c", "20"];
        if keep {
            args.push("-k");
        }
        args.push(&url);
        let out = client(&args);
        assert_eq!(
            figure(&out, "Complete requests:"),
            5000,
            "{model} {args:?}: {out}"
        );
        assert_eq!(
            figure(&out, "Failed requests:"),
            0,
            "{model} {args:?}: {out}"
        );
        assert!(!out.contains("Non-2xx"), "{model} {args:?}: {out}");
    }
    let out = client(&["wrk", "-t", "2", "-c", "100", "-d", "3", &url]);
    assert!(!out.contains("Socket errors"), "{model} wrk: {out}");
    assert!(!out.contains("Non-2xx"), "{model} wrk: {out}");
    let wrk: u64 = out
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert!(wrk > 1000, "{model}: wrk made only {wrk} requests: {out}");
    let out = client(&[
        "h2load", "--h1", "-n", "20000", "-c", "20", "-m", "16", &url,
    ]);
    assert!(
        out.contains("20000 total, 20000 started, 20000 done, 20000 succeeded, 0 failed, 0 errored, 0 timeout"),
        "{model} h2load: {out}"
    );
    assert!(
        out.contains("status codes: 20000 2xx, 0 3xx, 0 4xx, 0 5xx"),
        "{model} h2load: {out}"
    );
    let (code, doc) = s.stop();
    let v = &doc["body"];
    assert_eq!(code, 130, "{model}: {v}");
    assert_eq!(doc["interrupted"], true);
    let served = v["responses_2xx"].as_u64().unwrap();
    let asked = 5000 + 5000 + 20000;
    assert!(
        served >= asked + wrk && served <= asked + wrk + 100,
        "{model}: the server answered {served}; ab and h2load asked {asked}, wrk counted {wrk}"
    );
    assert_eq!(v["requests"].as_u64(), Some(served), "{model}: {v}");
    for k in [
        "responses_400",
        "responses_431",
        "responses_501",
        "responses_505",
        "errors",
        "refused",
    ] {
        assert_eq!(v[k], 0, "{model} {k}: {v}");
    }
    // ab without -k: a connection per request, each closed by the server after its answer.
    assert!(
        v["closed_by_server"].as_u64().unwrap() >= 5000,
        "{model}: {v}"
    );
    assert_eq!(v["model"], model);
}

macro_rules! clients_test {
    ($($name:ident => $model:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            real_clients($model);
        }
    )*};
}

clients_test! {
    thread_model_serves_ab_wrk_and_h2load => "thread",
    pool_model_serves_ab_wrk_and_h2load => "pool",
    select_model_serves_ab_wrk_and_h2load => "select",
    poll_model_serves_ab_wrk_and_h2load => "poll",
    epoll_model_serves_ab_wrk_and_h2load => "epoll",
    epoll_workers_model_serves_ab_wrk_and_h2load => "epoll-workers",
    io_uring_model_serves_ab_wrk_and_h2load => "io-uring",
    async_model_serves_ab_wrk_and_h2load => "async",
}

fn connect(port: u16) -> TcpStream {
    let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c
}

/// Read until the server closes (or 5 s pass); what arrived.
fn read_to_close(c: &mut TcpStream) -> String {
    let mut v = Vec::new();
    let _ = c.read_to_end(&mut v);
    String::from_utf8_lossy(&v).into_owned()
}

/// Read until `n` answers (counted by their status lines) have arrived whole.
fn read_answers(c: &mut TcpStream, n: usize, body: usize) -> String {
    let mut v = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = String::from_utf8_lossy(&v).into_owned();
        let heads = text.matches("HTTP/1.1 ").count();
        if heads >= n && text.ends_with(&"Hello, World!"[..body.min(13)]) {
            return text;
        }
        assert!(Instant::now() < deadline, "only {heads} answers: {text:?}");
        match c.read(&mut buf) {
            Ok(0) => return text,
            Ok(k) => v.extend_from_slice(&buf[..k]),
            Err(e) => panic!("read: {e} after {text:?}"),
        }
    }
}

/// Malformed requests each get their status and a close (or just a close, when cut
/// short), a slow client sending a byte a second holds nobody up, and the server goes on
/// serving; its counts say what it refused.
fn bad_clients(model: &str) {
    let sb = Sandbox::new();
    let s = Served::start(&sb, model, &[]);
    let port = s.port;
    let cases: [(&[u8], &str); 5] = [
        (
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
            "HTTP/1.1 400 Bad Request\r\n",
        ),
        (
            b"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
            "HTTP/1.1 505 HTTP Version Not Supported\r\n",
        ),
        (b"GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n"),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
            "HTTP/1.1 501 Not Implemented\r\n",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            "HTTP/1.1 200 OK\r\n",
        ),
    ];
    // A slow client: a byte a second, through all the rest.
    let mut slow = connect(port);
    slow.write_all(b"G").unwrap();
    for (req, want) in cases {
        let mut c = connect(port);
        c.write_all(req).unwrap();
        let got = read_to_close(&mut c);
        assert!(got.starts_with(want), "{model}: {req:?} got {got:?}");
        assert!(got.contains("Connection: close\r\n"), "{model}: {got:?}");
    }
    // Oversized: a 20 KiB header field.
    let mut c = connect(port);
    let big = format!(
        "GET / HTTP/1.1\r\nHost: a\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20 << 10)
    );
    let _ = c.write_all(big.as_bytes());
    let got = read_to_close(&mut c);
    assert!(
        got.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{model}: {got:?}"
    );
    // Truncated: half a request, then the client hangs up: no answer, no harm.
    let mut c = connect(port);
    c.write_all(b"GET / HTTP/1.1\r\nHo").unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_to_close(&mut c), "", "{model}");
    // The slow client, two more bytes a second apart, then the rest: answered.
    for b in [b"E", b"T"] {
        std::thread::sleep(Duration::from_secs(1));
        slow.write_all(b).unwrap();
        // Someone else is served in the meantime.
        let mut c = connect(port);
        c.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
        let got = read_answers(&mut c, 1, 13);
        assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{model}: {got:?}");
    }
    slow.write_all(b" / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    let got = read_answers(&mut slow, 1, 13);
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{model}: {got:?}");
    drop(slow);
    let (code, doc) = s.stop();
    let v = &doc["body"];
    assert_eq!(code, 130);
    assert_eq!(
        (
            v["responses_400"].as_u64(),
            v["responses_431"].as_u64(),
            v["responses_501"].as_u64(),
            v["responses_505"].as_u64()
        ),
        (Some(2), Some(1), Some(1), Some(1)),
        "{model}: {v}"
    );
    assert_eq!(v["responses_2xx"], 4, "{model}: {v}");
    assert_eq!(v["connections"], 10, "{model}: {v}");
}

macro_rules! bad_test {
    ($($name:ident => $model:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            bad_clients($model);
        }
    )*};
}

bad_test! {
    thread_model_refuses_bad_requests_and_outlasts_slow_ones => "thread",
    pool_model_refuses_bad_requests_and_outlasts_slow_ones => "pool",
    select_model_refuses_bad_requests_and_outlasts_slow_ones => "select",
    poll_model_refuses_bad_requests_and_outlasts_slow_ones => "poll",
    epoll_model_refuses_bad_requests_and_outlasts_slow_ones => "epoll",
    epoll_workers_model_refuses_bad_requests_and_outlasts_slow_ones => "epoll-workers",
    io_uring_model_refuses_bad_requests_and_outlasts_slow_ones => "io-uring",
    async_model_refuses_bad_requests_and_outlasts_slow_ones => "async",
}

#[test]
fn pipelined_requests_split_across_writes_are_answered_in_order_by_every_model() {
    let sb = Sandbox::new();
    for model in MODELS {
        let s = Served::start(&sb, model, &[]);
        let mut c = connect(s.port);
        // GET, HEAD (no body: its place in the stream shows the order), GET; the HEAD
        // split in the middle of its request line, the parts 200 ms apart.
        c.write_all(b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nHEAD /2 HT")
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        c.write_all(b"TP/1.1\r\nHost: a\r\n\r\nGET /3 HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap();
        let got = read_answers(&mut c, 3, 13);
        let bodies: Vec<&str> = got.split("HTTP/1.1 200 OK\r\n").skip(1).collect();
        assert_eq!(bodies.len(), 3, "{model}: {got:?}");
        assert!(
            bodies[0].ends_with("\r\n\r\nHello, World!"),
            "{model}: {got:?}"
        );
        assert!(
            bodies[1].ends_with("\r\n\r\n"),
            "{model}: HEAD has no body: {got:?}"
        );
        assert!(
            bodies[2].ends_with("\r\n\r\nHello, World!"),
            "{model}: {got:?}"
        );
        // HTTP/1.0 with keep-alive is told so and kept; without it, closed.
        c.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap();
        let got = read_answers(&mut c, 1, 13);
        assert!(
            got.contains("Connection: keep-alive\r\n"),
            "{model}: {got:?}"
        );
        c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let got = read_to_close(&mut c);
        assert!(
            got.contains("Connection: close\r\n") && got.ends_with("Hello, World!"),
            "{model}: {got:?}"
        );
        let (_, doc) = s.stop();
        let v = &doc["body"];
        assert_eq!(v["responses_2xx"], 5, "{model}: {v}");
        assert_eq!(v["closed_by_server"], 1, "{model}: {v}");
    }
}

#[test]
fn the_body_size_is_what_every_answer_carries() {
    let sb = Sandbox::new();
    let s = Served::start(&sb, "epoll", &["--body-size", "100K"]);
    let mut c = connect(s.port);
    c.write_all(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let got = read_to_close(&mut c);
    let (head, body) = got.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("Content-Length: 102400"), "{head}");
    assert_eq!(body.len(), 102_400);
    let (_, doc) = s.stop();
    let v = &doc["body"];
    assert_eq!(v["body_bytes"], 102_400);
    assert_eq!(v["bytes_sent"].as_u64(), Some(got.len() as u64));
}

/// 10,000 idle keep-alive connections, each having made one request, held open while a
/// new client is still answered quickly.
fn idle_connections(model: &str) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    const N: usize = 10_000;
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if hard < (N as u64) + 500 {
        eprintln!("skipped: the descriptor limit ({hard}) is under {N}");
        return;
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    let sb = Sandbox::new();
    let s = Served::start(&sb, model, &["--backlog", "4096"]);
    let mut conns = Vec::with_capacity(N);
    for _ in 0..N {
        let c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        conns.push(c);
    }
    // Every one of them is served once (so each is a kept-alive connection now).
    for c in &mut conns {
        c.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    }
    for c in &mut conns {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let got = read_answers(c, 1, 13);
        assert!(got.starts_with("HTTP/1.1 200 OK"), "{model}: {got:?}");
    }
    let t = Instant::now();
    let mut c = connect(s.port);
    c.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    let got = read_answers(&mut c, 1, 13);
    assert!(got.starts_with("HTTP/1.1 200 OK"));
    let took = t.elapsed();
    assert!(
        took < Duration::from_millis(500),
        "{model}: a new client waited {took:?}"
    );
    let (_, doc) = s.stop();
    let v = &doc["body"];
    assert_eq!(
        v["connections"].as_u64(),
        Some(N as u64 + 1),
        "{model}: {v}"
    );
    assert_eq!(
        v["responses_2xx"].as_u64(),
        Some(N as u64 + 1),
        "{model}: {v}"
    );
    drop(conns);
    setrlimit(Resource::RLIMIT_NOFILE, soft, hard).unwrap();
}

#[test]
fn epoll_holds_ten_thousand_idle_connections() {
    idle_connections("epoll");
}

#[test]
fn io_uring_holds_ten_thousand_idle_connections() {
    idle_connections("io-uring");
}

#[test]
fn async_holds_ten_thousand_idle_connections() {
    idle_connections("async");
}

#[test]
fn a_unix_socket_is_served_and_removed() {
    let sb = Sandbox::new();
    let path = sb.path().join("http.sock");
    let mut cmd = sb.sockbench();
    cmd.args(["serve", "--model", "poll", "--unix"])
        .arg(&path)
        .args(["-v", "0", "--format", "json"]);
    let s = Served::spawn(cmd);
    assert!(path.exists());
    let mut c = std::os::unix::net::UnixStream::connect(&path).unwrap();
    c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut got = String::new();
    c.read_to_string(&mut got).unwrap();
    assert!(
        got.starts_with("HTTP/1.1 200 OK\r\n") && got.ends_with("Hello, World!"),
        "{got:?}"
    );
    let (code, doc) = s.stop();
    let v = &doc["body"];
    assert_eq!(code, 130);
    assert_eq!(v["responses_2xx"], 1);
    assert!(v["url"].as_str().unwrap().starts_with("unix:"), "{v}");
    assert!(!path.exists(), "the socket file is left behind");
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

#[test]
fn verbose_logs_accepts_requests_and_closes() {
    let sb = Sandbox::new();
    let s = Served::start(&sb, "epoll", &["-v", "3"]);
    let mut c = connect(s.port);
    c.write_all(b"GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    read_to_close(&mut c);
    let mut log = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline
        && !log
            .iter()
            .any(|l: &String| l.contains("closed by the server"))
    {
        if let Ok(l) = s.lines.recv_timeout(Duration::from_millis(100)) {
            log.push(l);
        }
    }
    let text = log.join("\n");
    assert!(text.contains("accepted from 127.0.0.1:"), "{text}");
    assert!(text.contains("GET /hello HTTP/1.1"), "{text}");
    assert!(
        text.contains("closed by the server after 1 requests"),
        "{text}"
    );
    drop(s);
}

#[test]
fn a_duration_ends_the_server_with_status_0() {
    let sb = Sandbox::new();
    let t = Instant::now();
    let out = sb
        .cmd()
        .args(["serve", "--port", "0", "-d", "300ms", "--format", "json"])
        .output()
        .unwrap();
    assert!(t.elapsed() < Duration::from_secs(2));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["interrupted"], false);
    assert_eq!(v["kind"], "serve");
    assert!(
        v["started_at"].is_string() && v["ended_at"].is_string(),
        "{v}"
    );
    assert!(v["body"]["duration_seconds"].as_f64().unwrap() >= 0.3);
}

/// Every format, as every command: the summary in CSV, Markdown and OpenMetrics on
/// stdout, and the document in an export beside the table (issue 30).
#[test]
fn the_summary_comes_in_every_format_and_export() {
    let sb = Sandbox::new();
    let json = sb.path().join("served.json");
    let run = |extra: &[&str]| {
        let out = (sb.cmd())
            .args(["serve", "--port", "0", "-d", "200ms"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{extra:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let csv = run(&["--format", "csv"]);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = |k: &str| row[header.iter().position(|h| *h == k).unwrap()];
    assert_eq!((at("model"), at("requests")), ("epoll", "0"), "{csv}");
    let md = run(&["--format", "markdown"]);
    assert!(md.contains("| requests | 0 (0 200, 0 refused) |"), "{md}");
    let om = run(&["--format", "openmetrics"]);
    assert!(
        om.contains("sockbench_serve_requests{model=\"epoll\"} 0\n"),
        "{om}"
    );
    assert!(om.ends_with("# EOF\n"));
    let table = run(&["--export-json", json.to_str().unwrap()]);
    assert!(table.contains("requests/s while busy"), "{table}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        (v["kind"].as_str(), v["body"]["requests"].as_u64()),
        (Some("serve"), Some(0))
    );
}

#[test]
fn bad_flags_are_usage_errors_and_a_busy_port_a_failure() {
    let sb = Sandbox::new();
    for (args, code, says) in [
        (vec!["--model", "fork"], 2, "unknown model 'fork'"),
        (vec!["--body-size", "abc"], 2, "--body-size"),
        (vec!["--address", "nowhere"], 2, "invalid --address"),
        (vec!["--backlog", "0"], 2, "--backlog"),
        (vec!["--threads", "0"], 2, "--threads"),
        (
            vec!["--cpus", "999"],
            2,
            "--cpus: CPU 999 is not one this process may run on",
        ),
    ] {
        let out = sb.cmd().arg("serve").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let long = sb.path().join("x".repeat(120));
    let out = sb
        .cmd()
        .arg("serve")
        .arg("--unix")
        .arg(&long)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 107"));
    // A port in use.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let out = sb.cmd().args(["serve", "--port", &port]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the port is in use"));
    assert!(
        out.stdout.is_empty(),
        "it never served: no table, not even a title: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Under --format json the failure is a document too.
    let out = sb
        .cmd()
        .args(["serve", "--port", &port, "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["error"].as_str().unwrap().contains("the port is in use"),
        "{v}"
    );
    assert_eq!(v["kind"], "serve");
    assert_eq!(v["body"]["model"], "epoll", "{v}");
    // An existing file is never replaced.
    let f = sb.path().join("taken");
    std::fs::write(&f, "mine").unwrap();
    let out = sb
        .cmd()
        .arg("serve")
        .arg("--unix")
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "mine");
}

/// A client streaming an endless request body (read and skipped as it comes) shares the
/// one thread of the epoll, poll and select models with everyone else: a new client is
/// still answered at once.
#[test]
fn a_client_streaming_a_body_does_not_starve_the_others() {
    let sb = Sandbox::new();
    for model in ["epoll", "poll", "select"] {
        let s = Served::start(&sb, model, &[]);
        let port = s.port;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flood = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut c = connect(port);
                c.write_all(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100000000000\r\n\r\n")
                    .unwrap();
                let chunk = vec![b'x'; 1 << 20];
                let mut sent = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match c.write(&chunk) {
                        Ok(n) => sent += n as u64,
                        Err(_) => break,
                    }
                }
                sent
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        let mut worst = Duration::ZERO;
        for _ in 0..5 {
            let t = Instant::now();
            let mut c = connect(port);
            c.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
            let got = read_answers(&mut c, 1, 13);
            assert!(got.starts_with("HTTP/1.1 200 OK"), "{model}: {got:?}");
            worst = worst.max(t.elapsed());
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let sent = flood.join().unwrap();
        let (_, doc) = s.stop();
        let v = &doc["body"];
        assert!(sent > 10 << 20, "{model}: the flood sent only {sent} bytes");
        assert!(
            worst < Duration::from_secs(1),
            "{model}: a client waited {worst:?} beside a flood of {sent} bytes"
        );
        assert!(
            v["bytes_received"].as_u64().unwrap() > 10 << 20,
            "{model}: {v}"
        );
    }
}

#[test]
fn a_socket_path_that_is_not_utf8_is_served_and_removed() {
    use std::os::unix::ffi::OsStrExt;
    let sb = Sandbox::new();
    let path = sb
        .path()
        .join(std::ffi::OsStr::from_bytes(b"http\xff.sock"));
    let out = sb
        .cmd()
        .args(["serve", "-d", "200ms", "--format", "json", "--unix"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "serve");
    assert!(!path.exists(), "the socket file is left behind");
}

#[test]
fn a_head_dribbled_a_byte_at_a_time_is_cut_off_at_the_idle_timeout_by_every_model() {
    // Slowloris: a byte every 100 ms never lets the connection go idle, but a request
    // that has not arrived whole within --idle-timeout of the connection's last exchange
    // is timed out, in every model. A whole request in time is answered, and restarts
    // the clock.
    for model in MODELS {
        let sb = Sandbox::new();
        let s = Served::start(&sb, model, &["--idle-timeout", "1s"]);
        let mut c = connect(s.port);
        c.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
        let got = read_answers(&mut c, 1, 13);
        assert!(got.starts_with("HTTP/1.1 200 OK"), "{model}: {got:?}");
        let head = b"GET / HTTP/1.1\r\nHost: a\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let t = Instant::now();
        let mut closed_after = None;
        for b in head.iter() {
            if c.write_all(&[*b]).is_err() {
                closed_after = Some(t.elapsed());
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            let mut probe = [0u8; 64];
            c.set_nonblocking(true).unwrap();
            let r = c.read(&mut probe);
            c.set_nonblocking(false).unwrap();
            if matches!(r, Ok(0))
                || matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
            {
                closed_after = Some(t.elapsed());
                break;
            }
        }
        let after =
            closed_after.unwrap_or_else(|| panic!("{model}: a dribbled head was never cut off"));
        assert!(
            after < Duration::from_millis(3500),
            "{model}: cut off only after {after:?}"
        );
        let (_, doc) = s.stop();
        let v = &doc["body"];
        assert_eq!(v["timed_out"], 1, "{model}: {v}");
        assert_eq!(v["responses_2xx"], 1, "{model}: {v}");
    }
}

#[test]
fn requests_per_second_is_over_the_time_the_server_was_busy_as_ab_sees_it() {
    // Idle a second before the load and a second after it: a rate over the uptime would
    // be a fraction of ab's; over the span from the first answer to the last it is ab's.
    if !have("ab") {
        eprintln!("skipped: ab is not installed (apt-get install apache2-utils)");
        return;
    }
    let sb = Sandbox::new();
    let s = Served::start(&sb, "epoll", &[]);
    std::thread::sleep(Duration::from_secs(1));
    let url = s.url();
    let text = client(&["ab", "-q", "-k", "-n", "3000", "-c", "4", &url]);
    let ab: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests per second:"))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no rate in {text}"));
    std::thread::sleep(Duration::from_secs(1));
    let (_, doc) = s.stop();
    let v = &doc["body"];
    assert_eq!(doc["schema_version"], sockbench::report::SCHEMA_VERSION);
    assert_eq!(doc["kind"], "serve");
    let busy = v["busy_seconds"].as_f64().unwrap();
    let uptime = v["duration_seconds"].as_f64().unwrap();
    assert!(busy < uptime - 1.5, "busy {busy} s of {uptime} s");
    let ours = v["requests_per_second"].as_f64().unwrap();
    assert_eq!(ours, (v["requests"].as_f64().unwrap() - 1.0) / busy);
    // ab times from its first connect to its last answer: the same span, give or take
    // its own start-up; the uptime's rate would be under half of it.
    let ratio = ours / ab;
    assert!(
        (0.8..1.6).contains(&ratio),
        "serve {ours:.0}/s, ab {ab:.0}/s"
    );
}

//! `sockbench load` against a small HTTP server written here (std listeners, a thread per
//! connection) that counts what it accepted, received and answered, and can be told to
//! answer some requests with 500, vary a body's length, close early, use chunked or
//! close-delimited bodies, trickle its answers out in pieces, stall, or never answer.
//! The generator's figures are checked against the server's own counts.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::Sandbox;
use sockbench::load::LoadReport;

/// What the test server does.
#[derive(Clone, Debug, Default)]
struct Behaviour {
    /// Every k-th request (counted over all connections) gets a 500 of the same length.
    error_every: u64,
    /// Every k-th request gets a body one byte longer.
    long_every: u64,
    /// Every k-th request: close the connection without answering.
    drop_every: u64,
    /// Every k-th answer on a connection says `Connection: close`, and the server closes.
    close_every: u64,
    /// Chunked bodies.
    chunked: bool,
    /// No Content-Length: the body ends with the connection.
    no_length: bool,
    /// Before answering request k, sleep this long.
    stall: Option<(u64, Duration)>,
    /// Write every answer in 7-byte pieces.
    trickle: bool,
    /// Read requests, never answer.
    silent: bool,
    /// Bytes sent after every answer, in the same write (a body longer than its
    /// Content-Length).
    extra: &'static str,
}

/// What the test server counted.
#[derive(Debug, Default)]
struct Stats {
    accepts: AtomicU64,
    requests: AtomicU64,
    answered: AtomicU64,
    close_requests: AtomicU64,
    /// Most requests found in one read (more than 1: the client pipelines).
    max_batch: AtomicU64,
    hosts: Mutex<Vec<String>>,
}

const BODY: &str = "Hello, World!";

trait Stream: Read + Write + Send + 'static {
    fn shut(&self);
    fn nodelay(&self);
    fn read_timeout(&self, d: Duration);
}

impl Stream for std::net::TcpStream {
    fn shut(&self) {
        let _ = self.shutdown(std::net::Shutdown::Write);
    }
    fn nodelay(&self) {
        let _ = self.set_nodelay(true);
    }
    fn read_timeout(&self, d: Duration) {
        let _ = self.set_read_timeout(Some(d));
    }
}

impl Stream for std::os::unix::net::UnixStream {
    fn shut(&self) {
        let _ = self.shutdown(std::net::Shutdown::Write);
    }
    fn nodelay(&self) {}
    fn read_timeout(&self, d: Duration) {
        let _ = self.set_read_timeout(Some(d));
    }
}

/// Close the way servers do (a lingering close): stop writing, then read what is left
/// until the client closes, so unread requests do not turn the close into a reset.
fn linger<S: Stream>(mut s: S) {
    s.shut();
    s.read_timeout(Duration::from_secs(2));
    let mut sink = [0u8; 4096];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
}

fn answer(b: &Behaviour, k: u64, close: bool) -> Vec<u8> {
    let status = if b.error_every > 0 && k % b.error_every == 0 {
        "500 Internal Server Error"
    } else {
        "200 OK"
    };
    let mut body = BODY.to_string();
    if b.long_every > 0 && k % b.long_every == 0 {
        body.push('!');
    }
    let conn = if close { "Connection: close\r\n" } else { "" };
    if b.chunked {
        let (a, z) = body.split_at(5);
        format!(
            "HTTP/1.1 {status}\r\nTransfer-Encoding: chunked\r\n{conn}\r\n{:x}\r\n{a}\r\n{:x};x=y\r\n{z}\r\n0\r\n\r\n",
            a.len(),
            z.len()
        )
        .into_bytes()
    } else if b.no_length {
        format!("HTTP/1.1 {status}\r\nConnection: close\r\n\r\n{body}").into_bytes()
    } else {
        format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: text/plain\r\n{conn}\r\n{body}",
            body.len()
        )
        .into_bytes()
    }
}

fn send<S: Stream>(s: &mut S, b: &Behaviour, out: &mut Vec<u8>, st: &Stats, n: &mut u64) -> bool {
    let ok = if b.trickle {
        out.chunks(7)
            .all(|c| s.write_all(c).and_then(|()| s.flush()).is_ok())
    } else {
        s.write_all(out).is_ok()
    };
    if ok {
        st.answered.fetch_add(*n, SeqCst);
    }
    out.clear();
    *n = 0;
    ok
}

fn serve_conn<S: Stream>(mut s: S, b: &Behaviour, st: &Stats) {
    s.nodelay();
    let mut buf: Vec<u8> = Vec::new();
    let mut tmp = [0u8; 16 << 10];
    let mut on_conn = 0u64;
    loop {
        let n = match s.read(&mut tmp) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&tmp[..n]);
        let (mut out, mut pending, mut batch) = (Vec::new(), 0u64, 0u64);
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let req: Vec<u8> = buf.drain(..end + 4).collect();
            let text = String::from_utf8_lossy(&req).to_ascii_lowercase();
            batch += 1;
            let k = st.requests.fetch_add(1, SeqCst) + 1;
            let close_req = text.contains("\r\nconnection: close\r\n");
            if close_req {
                st.close_requests.fetch_add(1, SeqCst);
            }
            if let Some(h) = text.lines().find_map(|l| l.strip_prefix("host: ")) {
                st.hosts.lock().unwrap().push(h.trim().to_string());
            }
            if b.silent {
                continue;
            }
            if b.drop_every > 0 && k % b.drop_every == 0 {
                send(&mut s, b, &mut out, st, &mut pending);
                return linger(s);
            }
            if let Some((at, d)) = b.stall {
                if k == at {
                    send(&mut s, b, &mut out, st, &mut pending);
                    std::thread::sleep(d);
                }
            }
            on_conn += 1;
            let close =
                close_req || b.no_length || (b.close_every > 0 && on_conn % b.close_every == 0);
            out.extend_from_slice(&answer(b, k, close));
            out.extend_from_slice(b.extra.as_bytes());
            pending += 1;
            if close {
                send(&mut s, b, &mut out, st, &mut pending);
                return linger(s);
            }
        }
        st.max_batch.fetch_max(batch, SeqCst);
        if !out.is_empty() && !send(&mut s, b, &mut out, st, &mut pending) {
            return;
        }
    }
}

/// A running test server.
struct Server {
    stats: Arc<Stats>,
    url: String,
}

fn tcp_server(b: Behaviour) -> Server {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    let stats = Arc::new(Stats::default());
    let st = stats.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            st.accepts.fetch_add(1, SeqCst);
            let (b, st) = (b.clone(), st.clone());
            std::thread::spawn(move || serve_conn(s, &b, &st));
        }
    });
    Server { stats, url }
}

fn unix_server(b: Behaviour, path: &std::path::Path) -> Server {
    let l = std::os::unix::net::UnixListener::bind(path).unwrap();
    let stats = Arc::new(Stats::default());
    let st = stats.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            st.accepts.fetch_add(1, SeqCst);
            let (b, st) = (b.clone(), st.clone());
            std::thread::spawn(move || serve_conn(s, &b, &st));
        }
    });
    Server {
        stats,
        url: "http://localhost/".into(),
    }
}

impl Server {
    fn get(&self, c: fn(&Stats) -> &AtomicU64) -> u64 {
        c(&self.stats).load(SeqCst)
    }
}

/// `sockbench load ARGS --format json -q`: its output, decoded, and its exit status.
fn load(sb: &Sandbox, args: &[&str]) -> (Option<LoadReport>, std::process::Output) {
    let out = sb
        .cmd()
        .arg("load")
        .args(args)
        .args(["--format", "json", "-q"])
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    (serde_json::from_slice(&out.stdout).ok(), out)
}

/// As [`load`], expecting success.
fn load_ok(sb: &Sandbox, args: &[&str]) -> LoadReport {
    let (r, out) = load(sb, args);
    assert!(
        out.status.success(),
        "sockbench load {args:?}: {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    r.expect("stdout is a load report")
}

fn failed_total(r: &LoadReport) -> u64 {
    r.body.requests_failed.connect + r.body.requests_failed.read + r.body.requests_failed.status
}

#[test]
fn n_requests_with_keepalive_send_exactly_n_over_exactly_c_connections() {
    let sb = Sandbox::new();
    let s = tcp_server(Behaviour::default());
    let r = load_ok(&sb, &["-n", "1000", "-c", "10", "-t", "2", "-k", &s.url]);
    assert_eq!(r.envelope.schema_version, sockbench::report::SCHEMA_VERSION);
    assert_eq!(r.body.requests_complete, 1000);
    assert_eq!(failed_total(&r), 0);
    assert_eq!(s.get(|s| &s.requests), 1000, "never more than -n requests");
    assert_eq!(s.get(|s| &s.answered), 1000);
    assert_eq!(s.get(|s| &s.accepts), 10);
    assert_eq!(r.body.connections_opened, 10);
    assert_eq!(s.get(|s| &s.close_requests), 0);
    assert_eq!(r.body.responses_by_status.get("200"), Some(&1000));
    assert_eq!(r.body.body_bytes_received, 1000 * BODY.len() as u64);
    assert!(r.body.bytes_received > r.body.body_bytes_received);
    assert_eq!(r.body.first_body_bytes, Some(BODY.len() as u64));
    let ct = &r.body.connection_times;
    let (connect, total) = (ct.connect.as_ref().unwrap(), ct.total.as_ref().unwrap());
    assert_eq!(connect.min_ns, 0, "a reused connection connects in no time");
    assert!(connect.max_ns > 0);
    assert!(total.max_ns >= ct.waiting.as_ref().unwrap().max_ns);
    let l = r.body.latency.unwrap();
    assert_eq!(l.count, 1000);
    assert!(l.min_ns <= l.p50_ns && l.p50_ns <= l.p99_99_ns && l.p99_99_ns <= l.max_ns);
    assert!(r.body.latency_uncorrected.is_none());
    assert!(r.body.requests_per_second > 0.0 && r.body.duration_seconds > 0.0);
    assert!(r.body.cpu_seconds_per_request.unwrap() > 0.0);
    assert!(!r.envelope.interrupted && r.envelope.error.is_none());
    assert_eq!(s.stats.hosts.lock().unwrap()[0], s.url[7..s.url.len() - 1]);
}

#[test]
fn without_keepalive_every_request_has_its_own_connection() {
    let sb = Sandbox::new();
    let s = tcp_server(Behaviour::default());
    let r = load_ok(&sb, &["-n", "200", "-c", "4", &s.url]);
    assert_eq!(r.body.requests_complete, 200);
    assert_eq!(failed_total(&r), 0);
    assert_eq!(s.get(|s| &s.accepts), 200);
    assert_eq!(
        s.get(|s| &s.close_requests),
        200,
        "every request says Connection: close"
    );
    assert_eq!(r.body.connections_opened, 200);
    assert_eq!(
        r.body.reconnects, 0,
        "closing after each answer is the plan, not a reconnect"
    );
    assert!(r.body.connection_times.connect.unwrap().min_ns > 0);
}

#[test]
fn pipelined_requests_split_into_pieces_are_all_answered_in_order() {
    let sb = Sandbox::new();
    let s = tcp_server(Behaviour {
        trickle: true,
        chunked: true,
        ..Behaviour::default()
    });
    let r = load_ok(&sb, &["-n", "1000", "-c", "2", "--pipeline", "8", &s.url]);
    assert_eq!(r.body.requests_complete, 1000);
    assert_eq!(failed_total(&r) + r.body.requests_failed.length, 0);
    assert!(r.body.keepalive);
    assert_eq!(s.get(|s| &s.requests), 1000);
    assert_eq!(s.get(|s| &s.accepts), 2);
    assert!(s.get(|s| &s.max_batch) > 1, "requests arrived together");
    assert_eq!(r.body.body_bytes_received, 13_000);
}

#[test]
fn requests_behind_a_close_go_again_on_a_new_connection() {
    let sb = Sandbox::new();
    let s = tcp_server(Behaviour {
        close_every: 3,
        ..Behaviour::default()
    });
    let r = load_ok(&sb, &["-n", "600", "-c", "2", "--pipeline", "8", &s.url]);
    assert_eq!(r.body.requests_complete, 600);
    assert_eq!(failed_total(&r), 0);
    assert_eq!(s.get(|s| &s.answered), 600);
    assert!(r.body.requests_resent > 0);
    assert_eq!(r.body.connections_opened, s.get(|s| &s.accepts));
    assert!(r.body.reconnects >= 600 / 3 - 2, "{}", r.body.reconnects);
}

#[test]
fn non_2xx_and_length_failures_are_counted_exactly() {
    let sb = Sandbox::new();
    let s = tcp_server(Behaviour {
        error_every: 10,
        long_every: 7,
        ..Behaviour::default()
    });
    let r = load_ok(&sb, &["-n", "700", "-c", "3", "-k", &s.url]);
    assert_eq!(
        r.body.requests_complete, 700,
        "non-2xx answers are complete, as ab counts"
    );
    assert_eq!(r.body.non_2xx, 70);
    assert_eq!(r.body.responses_by_status.get("500"), Some(&70));
    assert_eq!(r.body.responses_by_status.get("200"), Some(&630));
    assert_eq!(r.body.requests_failed.length, 100);
    assert_eq!(failed_total(&r), 0);
    assert!(r
        .envelope
        .warnings
        .iter()
        .any(|w| w.contains("differ in length")));
}

#[test]
fn server_closes_are_reconnects_and_early_closes_are_read_failures() {
    let sb = Sandbox::new();
    let s = tcp_server(Behaviour {
        close_every: 5,
        ..Behaviour::default()
    });
    let r = load_ok(&sb, &["-n", "100", "-c", "1", "-k", &s.url]);
    assert_eq!((r.body.requests_complete, failed_total(&r)), (100, 0));
    assert_eq!(r.body.reconnects, 20);
    assert_eq!(s.get(|s| &s.accepts), 20);
    assert!(r
        .envelope
        .warnings
        .iter()
        .any(|w| w.contains("closed 20 keep-alive")));

    let s = tcp_server(Behaviour {
        drop_every: 10,
        ..Behaviour::default()
    });
    let r = load_ok(&sb, &["-n", "100", "-c", "1", "-k", &s.url]);
    assert_eq!(s.get(|s| &s.requests), 100);
    assert_eq!(r.body.requests_complete, 90);
    assert_eq!(s.get(|s| &s.answered), 90);
    assert_eq!(r.body.requests_failed.read, 10);
    assert_eq!(r.body.failure_causes.read_eof, 10);
    assert_eq!(r.body.connections_opened, s.get(|s| &s.accepts));
}

#[test]
fn bytes_after_an_answer_are_counted_and_the_reopened_connections_are_reconnects() {
    // Once, the bytes after each keep-alive answer were dropped unsaid, and 20 requests
    // over -k opened 20 connections while reporting none reopened.
    let sb = Sandbox::new();
    const EXTRA: &str = "EXTRA-GARBAGE";
    let s = tcp_server(Behaviour {
        extra: EXTRA,
        ..Behaviour::default()
    });
    let r = load_ok(&sb, &["-n", "20", "-c", "1", "-k", &s.url]);
    assert_eq!((r.body.requests_complete, failed_total(&r)), (20, 0));
    // Each answer and its extra bytes come in one write, so they are read together.
    assert_eq!(r.body.stray_closes, 20, "{r:?}");
    assert_eq!(r.body.stray_bytes, 20 * EXTRA.len() as u64);
    assert_eq!(r.body.reconnects, 20);
    assert_eq!(r.body.connections_opened, s.get(|s| &s.accepts));
    let said = r.envelope.warnings.join("\n");
    assert!(said.contains("260 B that answer no request"), "{said}");
    assert!(!said.contains("the server closed"), "{said}");
}

#[test]
fn chunked_and_close_delimited_bodies_are_read_whole() {
    let sb = Sandbox::new();
    let s = tcp_server(Behaviour {
        chunked: true,
        ..Behaviour::default()
    });
    let r = load_ok(&sb, &["-n", "100", "-c", "2", "-k", &s.url]);
    assert_eq!((r.body.requests_complete, failed_total(&r)), (100, 0));
    assert_eq!(r.body.body_bytes_received, 1300);
    let s = tcp_server(Behaviour {
        no_length: true,
        trickle: true,
        ..Behaviour::default()
    });
    let r = load_ok(&sb, &["-n", "50", "-c", "2", &s.url]);
    assert_eq!((r.body.requests_complete, failed_total(&r)), (50, 0));
    assert_eq!(r.body.body_bytes_received, 650);
    assert_eq!(s.get(|s| &s.answered), 50);
}

#[test]
fn a_unix_socket_target_names_the_url_host_in_the_host_header() {
    let sb = Sandbox::new();
    let path = sb.path().join("http.sock");
    let s = unix_server(Behaviour::default(), &path);
    let r = load_ok(
        &sb,
        &[
            "-n",
            "300",
            "-c",
            "3",
            "-k",
            "--unix-socket",
            path.to_str().unwrap(),
            &s.url,
        ],
    );
    assert_eq!((r.body.requests_complete, failed_total(&r)), (300, 0));
    assert_eq!(s.get(|s| &s.accepts), 3);
    assert!(r.body.target.starts_with("unix "));
    let hosts = s.stats.hosts.lock().unwrap();
    assert!(hosts.iter().all(|h| h == "localhost"), "{hosts:?}");
}

#[test]
fn an_open_loop_rate_sends_about_rate_times_duration() {
    let sb = Sandbox::new();
    let s = tcp_server(Behaviour::default());
    let r = load_ok(&sb, &["--rate", "400", "-d", "1", "-c", "4", "-k", &s.url]);
    let n = r.body.requests_complete as f64;
    assert!(
        (360.0..=440.0).contains(&n),
        "{n} requests at 400/s for 1 s"
    );
    assert_eq!(r.body.rate_per_second, Some(400.0));
    assert!(r.body.latency_uncorrected.is_some());
    assert!(
        (r.body.duration_seconds - 1.0).abs() < 0.15,
        "{}",
        r.body.duration_seconds
    );
}

#[test]
fn a_stall_shows_in_the_corrected_latency_and_not_only_in_one_request() {
    let sb = Sandbox::new();
    let s = tcp_server(Behaviour {
        stall: Some((20, Duration::from_millis(200))),
        ..Behaviour::default()
    });
    let r = load_ok(&sb, &["--rate", "100", "-d", "1", "-c", "1", "-k", &s.url]);
    let (l, u) = (r.body.latency.unwrap(), r.body.latency_uncorrected.unwrap());
    assert!(l.max_ns >= 200_000_000, "corrected max {} ns", l.max_ns);
    // The ~20 requests due during the stall waited for it: the corrected p90 shows
    // them; from when each was sent, only the stalled one was slow.
    assert!(l.p90_ns >= 50_000_000, "corrected p90 {} ns", l.p90_ns);
    assert!(u.p90_ns < 50_000_000, "uncorrected p90 {} ns", u.p90_ns);
    assert!(u.max_ns >= 200_000_000);
}

#[test]
fn a_refused_port_fails_quickly_with_what_to_try() {
    let sb = Sandbox::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/");
    let t = Instant::now();
    let (r, out) = load(&sb, &["-n", "1000", "-c", "4", &url]);
    assert!(t.elapsed() < Duration::from_secs(3));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused") && err.contains("is the server running"),
        "{err}"
    );
    let r = r.unwrap();
    assert_eq!(r.body.requests_complete, 0);
    assert!(r.body.failure_causes.connect_refused >= 4);
    assert!(r.body.requests_failed.connect <= 1000);
    // Duration mode too.
    let t = Instant::now();
    let (_, out) = load(&sb, &["-d", "10", "-c", "2", "-k", &url]);
    assert_eq!(out.status.code(), Some(1));
    assert!(t.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_server_that_never_answers_times_out_at_the_timeout() {
    let sb = Sandbox::new();
    let s = tcp_server(Behaviour {
        silent: true,
        ..Behaviour::default()
    });
    let t = Instant::now();
    let (r, out) = load(
        &sb,
        &["-n", "3", "-c", "3", "-k", "--timeout", "300ms", &s.url],
    );
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--timeout"), "{err}");
    let r = r.unwrap();
    assert_eq!(r.body.failure_causes.read_timeout, 3);
    assert_eq!(s.get(|s| &s.requests), 3);
}

#[test]
fn a_connect_that_never_completes_times_out() {
    // A listener with a backlog of 0 that never accepts: after the first connection
    // fills its queue, the kernel drops further SYNs.
    let sb = Sandbox::new();
    let l = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    l.bind(
        &"127.0.0.1:0"
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )
    .unwrap();
    l.listen(0).unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap().as_socket().unwrap());
    let t = Instant::now();
    let (r, out) = load(
        &sb,
        &["-n", "6", "-c", "6", "-k", "--timeout", "300ms", &url],
    );
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(out.status.code(), Some(1));
    let r = r.unwrap();
    let c = &r.body.failure_causes;
    assert!(c.connect_timeout >= 1, "{c:?}");
    assert_eq!(c.connect_timeout + c.read_timeout, 6, "{c:?}");
    drop(l);
}

#[test]
fn bad_usage_exits_2_before_anything_starts() {
    let sb = Sandbox::new();
    for (args, says) in [
        (vec!["https://127.0.0.1/"], "https"),
        (vec!["127.0.0.1:80"], "http://"),
        (vec!["http://h:99999/"], "port"),
        (vec!["-c", "0", "http://127.0.0.1/"], "-c"),
        (vec!["--pipeline", "0", "http://127.0.0.1/"], "--pipeline"),
        (vec!["--rate", "lots", "http://127.0.0.1/"], "--rate"),
        (
            vec!["--rate", "1e-300", "http://127.0.0.1/"],
            "a higher rate",
        ),
        (vec!["-d", "soon", "http://127.0.0.1/"], "--duration"),
        (vec!["-H", "garbage", "http://127.0.0.1/"], "Name: value"),
    ] {
        let out = sb.cmd().arg("load").args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn ctrl_c_prints_what_was_measured_and_exits_130() {
    let sb = Sandbox::new();
    let s = tcp_server(Behaviour::default());
    let child = sb
        .sockbench()
        .args([
            "load", "-d", "30", "-c", "2", "-k", "--rate", "2000", &s.url,
        ])
        .args(["--format", "json", "-q"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let t = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: LoadReport = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r.envelope.interrupted);
    assert!(r.body.requests_complete > 0);
    assert!(r.body.duration_seconds < 5.0);
    assert!(r.body.requests_complete <= s.get(|s| &s.answered));
}

#[test]
fn the_table_reads_like_ab_and_the_export_is_the_document() {
    let sb = Sandbox::new();
    let s = tcp_server(Behaviour::default());
    let export = sb.path().join("load.json");
    let out = sb
        .cmd()
        .args([
            "load",
            "-n",
            "200",
            "-c",
            "2",
            "-k",
            "-q",
            &s.url,
            "--export-json",
        ])
        .arg(&export)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "Complete requests",
        "Failed requests",
        "Requests per second",
        "Time per request",
        "Transfer rate",
        "Connection times (µs)",
        "Processing",
        "Waiting",
        "p99.99",
        "CPU per request",
    ] {
        assert!(text.contains(want), "no {want:?} in\n{text}");
    }
    let r: LoadReport = serde_json::from_slice(&std::fs::read(&export).unwrap()).unwrap();
    assert_eq!(r.body.requests_complete, 200);
    assert_eq!(r.envelope.command[1], "load");
}

#[test]
fn json_into_a_closed_pipe_is_not_an_error() {
    let sb = Sandbox::new();
    let s = tcp_server(Behaviour::default());
    let mut child = sb
        .sockbench()
        .args(["load", "-n", "50", "--format", "json", "-q", &s.url])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close our end before it writes, as `| head -c 0` would.
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A run after the first that fails fails the command (exit 1, the document's error
/// names which run), and the runs before it are still the report.
#[test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test build: cargo test --features test-hooks"
)]
fn a_later_run_that_fails_fails_the_command_and_keeps_the_runs_before_it() {
    let sb = Sandbox::new();
    let s = tcp_server(Behaviour::default());
    let out = sb
        .cmd()
        .env("SOCKBENCH_TEST_FAULT", "later-run-fails")
        .args([
            "load", "-n", "50", "-k", "--runs", "3", "--format", "json", "-q", &s.url,
        ])
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: LoadReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        r.envelope.error.as_deref(),
        Some("run 2 of 3 failed: test fault")
    );
    assert_eq!(r.body.requests_complete, 50, "the first run is the report");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches("run 2 of 3 failed").count(),
        1,
        "said once: {err}"
    );
}

//! One server connection as a state machine with no I/O: the model reads into
//! [`Session::read_buf`], reports how much arrived with [`Session::received`], writes
//! [`Session::output`] and reports it with [`Session::sent`], and closes when
//! [`Session::finished`] says so. Every concurrency model drives the same machine, so
//! they differ only in how they wait, never in what they answer.
//!
//! Pipelined requests are answered in order, as many as have arrived, until
//! [`OUT_HIGH`] bytes of answers wait unsent (then reading pauses: a client that sends
//! without reading cannot make the server buffer without bound). A rejected request is
//! answered with its status and `Connection: close`, and nothing after it is read.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::chunked::Decoder;
use super::request::{self, Body, Head, Reject};

/// Bytes asked for by each read.
pub const READ_CHUNK: usize = 16 * 1024;
/// Unsent answer bytes above which no further request is parsed.
pub const OUT_HIGH: usize = 1 << 20;
/// Largest response body `serve` takes.
pub const MAX_BODY: u64 = 64 << 20;

/// What every connection of a server answers, built once.
#[derive(Debug)]
pub struct Site {
    /// Status line and the fields before `Date`.
    pre_date: Vec<u8>,
    /// `Content-Length` and `Content-Type`, ending in CRLF.
    fields: Vec<u8>,
    /// The body of every 200.
    pub body: Vec<u8>,
    /// Log level (0 to 3), as `serve -v`.
    pub verbose: u8,
}

impl Site {
    /// Answers with a body of `body_size` bytes: `Hello, World!` cut or repeated to fit,
    /// ending in a newline when it has room.
    pub fn new(body_size: usize, verbose: u8) -> Site {
        let pattern = b"Hello, World!";
        let mut body: Vec<u8> = pattern.iter().copied().cycle().take(body_size).collect();
        if body_size > pattern.len() {
            if let Some(last) = body.last_mut() {
                *last = b'\n';
            }
        }
        Site {
            pre_date: b"HTTP/1.1 200 OK\r\nServer: sockbench\r\nDate: ".to_vec(),
            fields: format!("\r\nContent-Type: text/plain\r\nContent-Length: {body_size}\r\n")
                .into_bytes(),
            body,
            verbose,
        }
    }

    /// Append a 200 for `head` to `out`.
    fn answer(&self, head: &Head, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.pre_date);
        out.extend_from_slice(&date());
        out.extend_from_slice(&self.fields);
        match (head.keep_alive, head.minor) {
            (false, _) => out.extend_from_slice(b"Connection: close\r\n"),
            (true, 0) => out.extend_from_slice(b"Connection: keep-alive\r\n"),
            (true, _) => {}
        }
        out.extend_from_slice(b"\r\n");
        if !head.head_method {
            out.extend_from_slice(&self.body);
        }
    }
}

/// Append the answer to a rejected request (always closing).
fn refuse(r: Reject, out: &mut Vec<u8>) {
    let body = format!("{} {}: {}\n", r.status(), r.phrase(), r.reason());
    out.extend_from_slice(
        format!(
            "HTTP/1.1 {} {}\r\nServer: sockbench\r\nDate: ",
            r.status(),
            r.phrase()
        )
        .as_bytes(),
    );
    out.extend_from_slice(&date());
    out.extend_from_slice(
        format!(
            "\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
}

thread_local! {
    static DATE: std::cell::Cell<(u64, [u8; 29])> = const { std::cell::Cell::new((u64::MAX, [0; 29])) };
}

/// The current time as an HTTP date (`Tue, 24 Nov 2026 16:05:35 GMT`), formatted once a
/// second per thread.
fn date() -> [u8; 29] {
    let now = SystemTime::now();
    let secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with(|c| {
        let (at, text) = c.get();
        if at == secs {
            return text;
        }
        let mut fresh = [b' '; 29];
        let s = httpdate::fmt_http_date(now);
        let n = s.len().min(29);
        fresh[..n].copy_from_slice(&s.as_bytes()[..n]);
        c.set((secs, fresh));
        fresh
    })
}

/// What a server (or one of its threads, or one connection) counted. Added up with `+=`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Counters {
    /// Connections accepted.
    pub connections: u64,
    /// Requests answered with 200.
    pub responses_2xx: u64,
    /// Requests answered 400 (malformed).
    pub responses_400: u64,
    /// Requests answered 431 (head too large).
    pub responses_431: u64,
    /// Requests answered 501 (unknown transfer coding).
    pub responses_501: u64,
    /// Requests answered 505 (HTTP version).
    pub responses_505: u64,
    /// Bytes read from clients.
    pub bytes_received: u64,
    /// Bytes written to clients.
    pub bytes_sent: u64,
    /// Connections the client closed (or reset).
    pub closed_by_client: u64,
    /// Connections the server closed after `Connection: close` or a rejection.
    pub closed_by_server: u64,
    /// Connections closed for sending nothing within the idle timeout.
    pub timed_out: u64,
    /// Connections closed on an I/O error other than a reset.
    pub errors: u64,
    /// Connections still open when the server stopped (closed by it then).
    pub closed_at_stop: u64,
    /// Connections refused by the model (select's descriptor limit, out of descriptors).
    pub refused: u64,
    /// When the first and the last request were answered, in nanoseconds of
    /// [`since_start`]: the span the server was busy (not its uptime).
    #[serde(skip)]
    #[schemars(skip)]
    pub answered_span_ns: Option<(u64, u64)>,
}

/// Nanoseconds since this process first asked (a monotonic clock all threads share).
pub fn since_start() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}

impl Counters {
    /// Every answered request.
    pub fn responses(&self) -> u64 {
        self.responses_2xx
            + self.responses_400
            + self.responses_431
            + self.responses_501
            + self.responses_505
    }

    fn count(&mut self, status: u16) {
        let now = since_start();
        self.answered_span_ns = Some(match self.answered_span_ns {
            Some((first, last)) => (first.min(now), last.max(now)),
            None => (now, now),
        });
        match status {
            400 => self.responses_400 += 1,
            431 => self.responses_431 += 1,
            501 => self.responses_501 += 1,
            505 => self.responses_505 += 1,
            _ => self.responses_2xx += 1,
        }
    }
}

impl std::ops::AddAssign for Counters {
    fn add_assign(&mut self, o: Counters) {
        self.connections += o.connections;
        self.responses_2xx += o.responses_2xx;
        self.responses_400 += o.responses_400;
        self.responses_431 += o.responses_431;
        self.responses_501 += o.responses_501;
        self.responses_505 += o.responses_505;
        self.bytes_received += o.bytes_received;
        self.bytes_sent += o.bytes_sent;
        self.closed_by_client += o.closed_by_client;
        self.closed_by_server += o.closed_by_server;
        self.timed_out += o.timed_out;
        self.errors += o.errors;
        self.closed_at_stop += o.closed_at_stop;
        self.refused += o.refused;
        self.answered_span_ns = match (self.answered_span_ns, o.answered_span_ns) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (x, None) | (None, x) => x,
        };
    }
}

/// Where the connection is between requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading a request head.
    Head,
    /// Skipping this many body bytes, then answering this head.
    Length(u64, Head),
    /// Skipping a chunked body, then answering this head.
    Chunked(Decoder, Head),
    /// Answered with close: read nothing more.
    Closing,
}

/// One connection's HTTP state: input not yet parsed, answers not yet written.
#[derive(Debug)]
pub struct Session {
    input: Vec<u8>,
    start: usize,
    end: usize,
    out: Vec<u8>,
    sent: usize,
    state: State,
    peer_done: bool,
    /// Connection number, for the log.
    pub id: u64,
    /// Requests answered on this connection (any status).
    pub answered: u64,
}

impl Session {
    /// A fresh connection, numbered `id` in the log.
    pub fn new(id: u64) -> Session {
        Session {
            input: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
            out: Vec::new(),
            sent: 0,
            state: State::Head,
            peer_done: false,
            id,
            answered: 0,
        }
    }

    /// Where the next read goes (never empty while [`Session::wants_read`]).
    pub fn read_buf(&mut self) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.input.len() - self.end < READ_CHUNK / 2 && self.start > 0 {
            self.input.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.input.len() - self.end < READ_CHUNK / 2 {
            // Only a head still incomplete gets here (bodies are skipped as they come):
            // room up to the head limit plus a read.
            let want = (self.end + READ_CHUNK).min(request::MAX_HEAD + READ_CHUNK);
            self.input.resize(want.max(self.input.len()), 0);
        }
        &mut self.input[self.end..]
    }

    /// `n` bytes arrived in [`Session::read_buf`]: answer every complete request.
    pub fn received(&mut self, n: usize, site: &Site, c: &mut Counters) {
        self.end += n;
        c.bytes_received += n as u64;
        self.advance(site, c);
    }

    /// The client closed its side: answer what is complete, then finish.
    pub fn peer_closed(&mut self) {
        self.peer_done = true;
    }

    /// Whether the model should read more now.
    pub fn wants_read(&self) -> bool {
        self.state != State::Closing && !self.peer_done && self.out.len() - self.sent < OUT_HIGH
    }

    /// Answers waiting to be written.
    pub fn output(&self) -> &[u8] {
        &self.out[self.sent..]
    }

    /// `n` bytes of [`Session::output`] were written.
    pub fn sent(&mut self, n: usize, site: &Site, c: &mut Counters) {
        self.sent += n;
        c.bytes_sent += n as u64;
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
            // Requests held back while answers were waiting.
            self.advance(site, c);
        }
    }

    /// Whether the connection is done: everything answered and sent, and either side
    /// ended it. The model closes the socket and counts who ended it
    /// ([`Session::closed_by_server`]).
    pub fn finished(&self) -> bool {
        self.output().is_empty() && (self.state == State::Closing || self.peer_done)
    }

    /// Whether the server ended the connection (`Connection: close` or a rejection).
    pub fn closed_by_server(&self) -> bool {
        self.state == State::Closing
    }

    /// Whether part of a request has arrived and waits for the rest (a stalled client).
    pub fn mid_request(&self) -> bool {
        self.start != self.end || self.state != State::Head
    }

    fn advance(&mut self, site: &Site, c: &mut Counters) {
        while self.out.len() - self.sent < OUT_HIGH {
            let avail = &self.input[self.start..self.end];
            match self.state {
                State::Closing => {
                    self.start = self.end;
                    return;
                }
                State::Length(left, head) => {
                    let take = (avail.len() as u64).min(left);
                    self.start += take as usize;
                    if take < left {
                        self.state = State::Length(left - take, head);
                        return;
                    }
                    self.respond(&head, site, c);
                }
                State::Chunked(mut dec, head) => {
                    match dec.feed(avail, request::MAX_HEAD).map_err(Reject::from) {
                        Ok(fed) if fed.done => {
                            self.start += fed.used;
                            self.respond(&head, site, c);
                        }
                        Ok(fed) => {
                            self.start += fed.used;
                            self.state = State::Chunked(dec, head);
                            return;
                        }
                        Err(r) => return self.reject(r, site, c),
                    }
                }
                State::Head => {
                    if avail.is_empty() {
                        return;
                    }
                    match request::parse(avail) {
                        Ok(None) => return,
                        Ok(Some(head)) => {
                            if site.verbose >= 3 {
                                log_request(self.id, &avail[..head.len]);
                            }
                            self.start += head.len;
                            // The answer waits for the whole body, so a body that turns
                            // out malformed gets one answer (its 400), and a client
                            // that waits for `100 Continue` is told to send it.
                            match head.body {
                                Body::None => self.respond(&head, site, c),
                                Body::Length(n) => {
                                    self.continue_if_asked(&head);
                                    self.state = State::Length(n, head);
                                }
                                Body::Chunked => {
                                    self.continue_if_asked(&head);
                                    self.state = State::Chunked(Decoder::default(), head);
                                }
                            }
                        }
                        Err(r) => return self.reject(r, site, c),
                    }
                }
            }
        }
    }

    /// `Expect: 100-continue`: the client waits for this before it sends the body. Sent
    /// whether or not some of the body came already (RFC 9110 section 10.1.1 lets a
    /// server omit it then, but always sending it keeps the answer the same however the
    /// bytes arrived).
    fn continue_if_asked(&mut self, head: &Head) {
        if head.expect_continue {
            self.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
    }

    /// Answer a request whose body (if any) has been read whole.
    fn respond(&mut self, head: &Head, site: &Site, c: &mut Counters) {
        site.answer(head, &mut self.out);
        c.count(200);
        self.answered += 1;
        self.state = if head.keep_alive {
            State::Head
        } else {
            State::Closing
        };
    }

    fn reject(&mut self, r: Reject, site: &Site, c: &mut Counters) {
        if site.verbose >= 1 {
            crate::http::log(format_args!(
                "conn {}: {} {}: {}",
                self.id,
                r.status(),
                r.phrase(),
                r.reason()
            ));
        }
        refuse(r, &mut self.out);
        c.count(r.status());
        self.answered += 1;
        self.state = State::Closing;
        self.start = self.end;
    }
}

/// Log a request line (-v 3), escaped.
fn log_request(id: u64, head: &[u8]) {
    let line_end = head.iter().position(|&b| b == b'\r' || b == b'\n');
    let line = &head[..line_end.unwrap_or(head.len())];
    crate::http::log(format_args!(
        "conn {id}: {}",
        crate::vocab::text::bytes(line)
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `input` in pieces of `piece` bytes, writing every answer at once.
    fn feed(input: &[u8], piece: usize) -> (String, Counters, Session) {
        let site = Site::new(13, 0);
        let mut s = Session::new(1);
        let mut c = Counters::default();
        let mut written = Vec::new();
        for part in input.chunks(piece) {
            if !s.wants_read() {
                break;
            }
            let buf = s.read_buf();
            buf[..part.len()].copy_from_slice(part);
            s.received(part.len(), &site, &mut c);
            while !s.output().is_empty() {
                let n = s.output().len();
                written.extend_from_slice(s.output());
                s.sent(n, &site, &mut c);
            }
        }
        (String::from_utf8_lossy(&written).into_owned(), c, s)
    }

    #[test]
    fn pipelined_requests_are_answered_in_order_however_split() {
        let one = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
        let input = one.repeat(5) + "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n";
        for piece in [1, 3, 10, 29, 1000] {
            let (out, c, s) = feed(input.as_bytes(), piece);
            assert_eq!(out.matches("HTTP/1.1 200 OK").count(), 6, "{piece}");
            assert_eq!(out.matches("Hello, World!").count(), 5, "HEAD has no body");
            assert_eq!(c.responses_2xx, 6);
            assert_eq!(c.bytes_received, input.len() as u64);
            assert_eq!(c.bytes_sent, out.len() as u64);
            assert!(!s.finished() && s.wants_read() && !s.mid_request());
        }
    }

    #[test]
    fn a_close_is_answered_with_close_and_ends_the_session() {
        let input = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let (out, c, s) = feed(input.as_bytes(), 1000);
        assert_eq!(c.responses_2xx, 1);
        assert!(out.contains("Connection: close\r\n"));
        assert!(s.finished() && s.closed_by_server() && !s.wants_read());
    }

    #[test]
    fn http10_keep_alive_is_said_back() {
        let (out, _, s) = feed(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 1000);
        assert!(out.contains("Connection: keep-alive\r\n"), "{out}");
        assert!(!s.finished());
        let (out, _, s) = feed(b"GET / HTTP/1.0\r\n\r\n", 1000);
        assert!(out.contains("Connection: close\r\n"), "{out}");
        assert!(s.finished());
    }

    #[test]
    fn answers_carry_the_length_and_the_body() {
        let (out, _, _) = feed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1000);
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(out.contains("\r\nContent-Length: 13\r\n"));
        assert!(out.ends_with("\r\n\r\nHello, World!"), "{out}");
        assert!(out.contains(" GMT\r\n"));
        let site = Site::new(40, 0);
        assert_eq!(site.body.len(), 40);
        assert_eq!(site.body.last(), Some(&b'\n'));
        assert_eq!(Site::new(0, 0).body.len(), 0);
        assert_eq!(&Site::new(5, 0).body, b"Hello");
    }

    #[test]
    fn bodies_are_skipped_and_the_next_request_answered() {
        let input = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\nHost: x\r\n\r\nPOST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n";
        for piece in [1, 7, 1000] {
            let (_, c, _) = feed(input.as_bytes(), piece);
            assert_eq!(c.responses_2xx, 4, "{piece}");
            assert_eq!(c.responses_400, 0);
        }
    }

    #[test]
    fn a_bad_request_is_refused_and_closed() {
        let (out, c, s) = feed(
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\nBLAH\r\n\r\nGET / HTTP/1.1\r\n",
            1000,
        );
        assert_eq!((c.responses_2xx, c.responses_400), (1, 1));
        assert!(out.contains("HTTP/1.1 400 Bad Request\r\n"));
        assert!(out.contains("Connection: close"));
        // The body says what was wrong.
        assert!(
            out.ends_with(
                "\r\n\r\n400 Bad Request: invalid character in the method or a header name\n"
            ),
            "{out}"
        );
        assert!(s.finished() && s.closed_by_server());
        let (out, c, _) = feed(b"GET / HTTP/2.0\r\n\r\n", 1000);
        assert_eq!(c.responses_505, 1);
        assert!(out.starts_with("HTTP/1.1 505 HTTP Version Not Supported\r\n"));
        let big = format!(
            "GET / HTTP/1.1\r\nHost: x\r\nX: {}\r\n\r\n",
            "a".repeat(20000)
        );
        let (out, c, _) = feed(big.as_bytes(), 4096);
        assert_eq!(c.responses_431, 1, "{out}");
        // The refusal's Content-Length is its body's.
        let len: usize = out
            .split("Content-Length: ")
            .nth(1)
            .and_then(|r| r.split("\r\n").next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert_eq!(out.split("\r\n\r\n").nth(1).unwrap().len(), len);
    }

    #[test]
    fn a_client_that_does_not_read_stops_being_read() {
        let site = Site::new(64 << 10, 0);
        let mut s = Session::new(1);
        let mut c = Counters::default();
        let req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let mut fed = 0;
        while s.wants_read() && fed < 1000 {
            let buf = s.read_buf();
            buf[..req.len()].copy_from_slice(req);
            s.received(req.len(), &site, &mut c);
            fed += 1;
        }
        // Reading stopped once a megabyte of answers waited.
        assert!(fed < 1000 && s.output().len() >= OUT_HIGH, "{fed}");
        // What counts is what waits unsent: once part is written and less than the
        // limit waits, reading and answering go on.
        let part = s.output().len() - OUT_HIGH / 2;
        s.sent(part, &site, &mut c);
        assert!(s.wants_read() && s.output().len() == OUT_HIGH / 2);
        let before = c.responses_2xx;
        s.read_buf()[..req.len()].copy_from_slice(req);
        s.received(req.len(), &site, &mut c);
        assert_eq!(
            c.responses_2xx,
            before + 1,
            "answered with half the limit waiting"
        );
        let before = c.responses_2xx;
        let n = s.output().len();
        s.sent(n, &site, &mut c);
        assert_eq!(
            c.responses_2xx, before,
            "every request read was answered already"
        );
        assert!(s.wants_read());
    }

    #[test]
    fn a_peer_that_closes_after_its_requests_is_answered_then_finished() {
        let site = Site::new(13, 0);
        let mut s = Session::new(1);
        let mut c = Counters::default();
        let req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HT";
        s.read_buf()[..req.len()].copy_from_slice(req);
        s.received(req.len(), &site, &mut c);
        s.peer_closed();
        assert!(!s.finished() && s.mid_request());
        let n = s.output().len();
        s.sent(n, &site, &mut c);
        assert!(s.finished() && !s.closed_by_server());
    }

    #[test]
    fn counters_add_up() {
        let mut a = Counters {
            connections: 1,
            responses_2xx: 2,
            responses_400: 3,
            responses_431: 4,
            responses_501: 5,
            responses_505: 6,
            bytes_received: 7,
            bytes_sent: 8,
            closed_by_client: 9,
            closed_by_server: 10,
            timed_out: 11,
            errors: 12,
            closed_at_stop: 14,
            refused: 13,
            answered_span_ns: Some((100, 200)),
        };
        let mut b = a;
        b.answered_span_ns = Some((50, 150));
        a += b;
        // The busy span is the union: the earliest first answer, the latest last.
        assert_eq!(a.answered_span_ns, Some((50, 200)));
        let mut none = Counters::default();
        none += a;
        assert_eq!(none.answered_span_ns, Some((50, 200)));
        a += Counters::default();
        assert_eq!(a.answered_span_ns, Some((50, 200)));
        assert_eq!(a.responses(), 40);
        assert_eq!(
            (a.connections, a.refused, a.errors, a.timed_out),
            (2, 26, 24, 22)
        );
        assert_eq!((a.bytes_received, a.bytes_sent), (14, 16));
        assert_eq!((a.closed_by_client, a.closed_by_server), (18, 20));
        assert_eq!(a.closed_at_stop, 28);
    }

    #[test]
    fn a_request_is_answered_once_its_body_is_read_and_a_bad_body_only_once() {
        // The 200 waits for the body's last byte.
        let site = Site::new(13, 0);
        let mut s = Session::new(1);
        let mut c = Counters::default();
        let part = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345";
        s.read_buf()[..part.len()].copy_from_slice(part);
        s.received(part.len(), &site, &mut c);
        assert!(s.output().is_empty() && c.responses() == 0);
        s.read_buf()[..5].copy_from_slice(b"67890");
        s.received(5, &site, &mut c);
        assert!(s.output().starts_with(b"HTTP/1.1 200 OK"));
        assert_eq!(c.responses_2xx, 1);
        // A chunked body that goes wrong gets its 400, and no 200 before it.
        let (out, c, s) = feed(
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            1000,
        );
        assert!(out.starts_with("HTTP/1.1 400 Bad Request"), "{out}");
        assert_eq!((c.responses(), c.responses_2xx, s.answered), (1, 0, 1));
    }

    #[test]
    fn a_client_that_expects_100_continue_is_told_to_go_on() {
        let input = "PUT / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let (out, c, _) = feed(input.as_bytes(), 1000);
        assert!(
            out.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"),
            "{out}"
        );
        assert_eq!(c.responses_2xx, 2);
        // Without a body there is nothing to continue.
        let (out, _, _) = feed(
            b"GET / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n",
            1000,
        );
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    }

    #[test]
    fn a_closing_request_has_its_body_read_before_the_close() {
        let input = b"POST / HTTP/1.0\r\nContent-Length: 4\r\n\r\nbody";
        for piece in [1, 3, 1000] {
            let (out, c, s) = feed(input, piece);
            assert!(out.contains("Connection: close"), "{out}");
            assert_eq!(c.bytes_received, input.len() as u64, "{piece}");
            assert!(s.finished() && s.closed_by_server());
        }
    }

    #[test]
    fn the_input_buffer_stays_one_read_for_small_requests_and_grows_only_for_a_long_head() {
        let site = Site::new(13, 0);
        let mut s = Session::new(1);
        let mut c = Counters::default();
        let req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        // A long pipelined stream in 7-byte pieces: every read gets at least half a
        // chunk of room, and the buffer never grows (it is compacted instead).
        let stream: Vec<u8> = req.iter().copied().cycle().take(req.len() * 3000).collect();
        // In 7-byte pieces, and then in pieces that each end one byte into the next
        // request, so the buffer never empties and must be compacted.
        let pieces = stream
            .chunks(7)
            .chain(std::iter::once(&stream[..1]))
            .chain(stream[1..].chunks(req.len()).take(2999).collect::<Vec<_>>());
        for piece in pieces {
            let buf = s.read_buf();
            assert!(buf.len() >= READ_CHUNK / 2, "{}", buf.len());
            buf[..piece.len()].copy_from_slice(piece);
            s.received(piece.len(), &site, &mut c);
            let n = s.output().len();
            s.sent(n, &site, &mut c);
            assert_eq!(s.input.len(), READ_CHUNK);
        }
        assert_eq!(c.responses_2xx, 3000 + 2999);
        // A head that keeps growing: the buffer grows with it, up to the head limit
        // plus one read, and then the 431.
        let mut s = Session::new(2);
        s.read_buf()[..19].copy_from_slice(b"GET / HTTP/1.1\r\nX: ");
        s.received(19, &site, &mut c);
        let mut fed = 19;
        while s.wants_read() {
            let buf = s.read_buf();
            assert!(!buf.is_empty());
            let n = buf.len().min(1000);
            buf[..n].fill(b'a');
            s.received(n, &site, &mut c);
            fed += n;
            assert!(s.input.len() <= request::MAX_HEAD + READ_CHUNK);
            assert_eq!(s.end - s.start, if s.wants_read() { fed } else { 0 });
        }
        assert!(s.output().starts_with(b"HTTP/1.1 431 "));
        assert_eq!(c.responses_431, 1);
        // A partial head kept across a compaction arrives whole.
        let mut s = Session::new(3);
        let mut c = Counters::default();
        let mut first = req.repeat((READ_CHUNK - 3) / req.len());
        first.extend_from_slice(b"GET");
        let buf = s.read_buf();
        buf[..first.len()].copy_from_slice(&first);
        s.received(first.len(), &site, &mut c);
        let rest = &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[3..];
        let buf = s.read_buf();
        assert!(buf.len() >= rest.len());
        buf[..rest.len()].copy_from_slice(rest);
        s.received(rest.len(), &site, &mut c);
        assert_eq!(
            c.responses_2xx,
            (READ_CHUNK as u64 - 3) / req.len() as u64 + 1
        );
    }

    #[test]
    fn each_refusal_is_counted_under_its_status() {
        let (_, c, _) = feed(
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
            1000,
        );
        assert_eq!((c.responses_501, c.responses_2xx, c.responses()), (1, 0, 1));
        let (_, c, _) = feed(b"GET / HTTP/3.0\r\n\r\n", 1000);
        assert_eq!((c.responses_505, c.responses()), (1, 1));
    }

    /// The session under arbitrary input: requests built from valid pieces with bytes
    /// flipped, cut or inserted, or plain random bytes, fed whole and in random pieces.
    /// No panic, no hang (every step consumes or stops), the input buffer bounded, every
    /// answer a well-formed HTTP/1.1 response with its own length, one per answered
    /// request, nothing after a refusal, and the same answers however the bytes were
    /// split. `bench/fuzz_http.sh` runs a million cases.
    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        const PIECES: [&[u8]; 17] = [
            b"Expect: 100-continue\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            b"GET /x?y=1 HTTP/1.0\r\n\r\n",
            b"HEAD / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"4\r\nwxyz\r\n0\r\n\r\n",
            b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            b"GET / HTTP/2.0\r\n\r\n",
            b"Content-Length: 99999999\r\n",
            b"X-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
            b"\r\n",
            b"\n",
            b" ",
            b"Host: b\r\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            b"\x00\xff\x16\x03",
        ];

        fn input() -> impl Strategy<Value = Vec<u8>> {
            let built = proptest::collection::vec(0..PIECES.len(), 1..12).prop_map(|ix| {
                ix.into_iter()
                    .flat_map(|i| PIECES[i].iter().copied())
                    .collect::<Vec<u8>>()
            });
            let mutated = (
                built.clone(),
                proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
            )
                .prop_map(|(mut v, flips)| {
                    for (at, b) in flips {
                        if !v.is_empty() {
                            let i = at % v.len();
                            v[i] = b;
                        }
                    }
                    v
                });
            let long = (built.clone(), 0usize..20_000).prop_map(|(mut v, n)| {
                let at = v.len() / 2;
                v.splice(at..at, std::iter::repeat_n(b'a', n));
                v
            });
            prop_oneof![
                built,
                mutated,
                long,
                proptest::collection::vec(any::<u8>(), 0..600)
            ]
        }

        /// Feed `bytes` in pieces of the given lengths (cycled); the answers with their
        /// Date fields blanked (the second may turn between two feeds), and the session.
        fn run(bytes: &[u8], pieces: &[usize], body: usize) -> (Vec<u8>, Counters, Session) {
            let site = Site::new(body, 0);
            let mut s = Session::new(1);
            let mut c = Counters::default();
            let mut out = Vec::new();
            let mut at = 0;
            let mut k = 0;
            while at < bytes.len() && s.wants_read() {
                let want = pieces[k % pieces.len()].max(1);
                k += 1;
                let buf = s.read_buf();
                assert!(!buf.is_empty());
                let n = want.min(buf.len()).min(bytes.len() - at);
                buf[..n].copy_from_slice(&bytes[at..at + n]);
                s.received(n, &site, &mut c);
                at += n;
                assert!(s.input.len() <= request::MAX_HEAD + READ_CHUNK);
                while !s.output().is_empty() {
                    // The client reads in bites, so the session sees partial writes.
                    let n = s.output().len().min(want * 7 + 1);
                    out.extend_from_slice(&s.output()[..n]);
                    s.sent(n, &site, &mut c);
                }
            }
            (blank_dates(&out), c, s)
        }

        fn blank_dates(out: &[u8]) -> Vec<u8> {
            let mut v = out.to_vec();
            let mut i = 0;
            while let Some(p) = v[i..].windows(8).position(|w| w == b"\r\nDate: ") {
                let start = i + p + 8;
                for b in &mut v[start..(start + 29).min(out.len())] {
                    *b = b'#';
                }
                i = start;
            }
            v
        }

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(1000),
                failure_persistence: None,
                .. ProptestConfig::default()
            })]
            #[test]
            fn arbitrary_requests_get_well_formed_answers_however_split(
                bytes in input(),
                pieces in proptest::collection::vec(1usize..40, 1..6),
                body in 0usize..40,
            ) {
                let (whole, c, s) = run(&bytes, &[usize::MAX / 8], body);
                let (split, c2, _) = run(&bytes, &pieces, body);
                prop_assert_eq!(&whole, &split);
                prop_assert_eq!(c.responses(), c2.responses());
                prop_assert_eq!(c.responses(), s.answered);
                prop_assert_eq!(c.bytes_sent, whole.len() as u64);
                // The answers parse back, one by one, each with its own length.
                let mut rest = &whole[..];
                let mut n = 0;
                let mut refused = false;
                while !rest.is_empty() {
                    prop_assert!(!refused, "an answer after a refusal");
                    let mut fields = [httparse::EMPTY_HEADER; 16];
                    let mut r = httparse::Response::new(&mut fields);
                    let head = match r.parse(rest) {
                        Ok(httparse::Status::Complete(h)) => h,
                        other => return Err(TestCaseError::fail(format!("{other:?}"))),
                    };
                    let code = r.code.unwrap_or(0);
                    if code == 100 {
                        // An interim answer: no body, not a request's answer.
                        rest = &rest[head..];
                        continue;
                    }
                    prop_assert!([200, 400, 431, 501, 505].contains(&code));
                    let len: usize = r
                        .headers
                        .iter()
                        .find(|h| h.name == "Content-Length")
                        .and_then(|h| std::str::from_utf8(h.value).ok()?.parse().ok())
                        .unwrap();
                    // HEAD answers carry the length of the body they leave out: the
                    // next answer (or nothing) follows their head at once. No body
                    // starts like a status line.
                    let after = &rest[head..];
                    let head_of_head = code == 200
                        && len > 0
                        && (after.is_empty() || after.starts_with(b"HTTP/1.1 "));
                    let take = if head_of_head { head } else { head + len };
                    prop_assert!(take <= rest.len());
                    refused = code != 200;
                    rest = &rest[take..];
                    n += 1;
                }
                prop_assert_eq!(n, c.responses());
            }
        }
    }
}

//! A request, both sides: the server parses its head (with `httparse`), decides how the
//! connection goes on (keep-alive, close), how long the body is (a chunked one is stepped
//! through by [`super::chunked::Decoder`]), and what a request that cannot be served is
//! answered with; the load generator writes it ([`Request`]).
//!
//! Limits: a head of at most [`MAX_HEAD`] bytes and [`MAX_HEADERS`] header fields, else
//! 431. HTTP/1.0 and 1.1 are served; any other `HTTP/x.y` gets 505. A request with both
//! `Content-Length` and `Transfer-Encoding`, disagreeing lengths, an HTTP/1.1 request
//! without exactly one `Host`, or anything `httparse` refuses gets 400 (RFC 9112 sections
//! 3.2, 6.1 and 6.3); a transfer coding other than `chunked` gets 501.

use super::chunked::ChunkError;

/// Largest request head (request line and header fields), as nginx's default.
pub const MAX_HEAD: usize = 8192;
/// Most header fields in one request.
pub const MAX_HEADERS: usize = 64;

/// How a request's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// No body.
    None,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A parsed request head: what the server needs to answer it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// Bytes of the head, up to and including its empty line.
    pub len: usize,
    /// HTTP/1.`minor`.
    pub minor: u8,
    /// The connection stays open after the answer.
    pub keep_alive: bool,
    /// The method is HEAD: the answer has no body.
    pub head_method: bool,
    /// The body that follows the head.
    pub body: Body,
    /// `Expect: 100-continue` (HTTP/1.1): the client waits for `100 Continue` before it
    /// sends the body.
    pub expect_continue: bool,
}

/// Why a request cannot be served: each maps to its status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reject {
    /// 400: the request is malformed; the reason says how.
    BadRequest(&'static str),
    /// 431: the head is longer than [`MAX_HEAD`] or has more than [`MAX_HEADERS`] fields.
    TooLarge,
    /// 501: a transfer coding the server does not know.
    NotImplemented,
    /// 505: an HTTP version other than 1.0 and 1.1.
    Version,
}

impl Reject {
    /// The status code.
    pub fn status(self) -> u16 {
        match self {
            Reject::BadRequest(_) => 400,
            Reject::TooLarge => 431,
            Reject::NotImplemented => 501,
            Reject::Version => 505,
        }
    }

    /// The status line's reason phrase.
    pub fn phrase(self) -> &'static str {
        match self {
            Reject::BadRequest(_) => "Bad Request",
            Reject::TooLarge => "Request Header Fields Too Large",
            Reject::NotImplemented => "Not Implemented",
            Reject::Version => "HTTP Version Not Supported",
        }
    }

    /// What was wrong, for the log.
    pub fn reason(self) -> &'static str {
        match self {
            Reject::BadRequest(r) => r,
            Reject::TooLarge => "request head over 8 KiB or over 64 header fields",
            Reject::NotImplemented => "a transfer coding other than chunked",
            Reject::Version => "an HTTP version other than 1.0 and 1.1",
        }
    }
}

/// Parse the head at the start of `buf`: `Ok(None)` while it is incomplete.
///
/// # Errors
/// The [`Reject`] the request must be answered with (the connection closes after it).
pub fn parse(buf: &[u8]) -> Result<Option<Head>, Reject> {
    // Only the first MAX_HEAD bytes count, so the answer is the same however the bytes
    // arrived: a head that does not end within them is too large, whatever follows.
    let buf = &buf[..buf.len().min(MAX_HEAD)];
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut fields);
    match req.parse(buf) {
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => Err(Reject::TooLarge),
        Ok(httparse::Status::Partial) => Ok(None),
        Ok(httparse::Status::Complete(len)) => interpret(&req, len).map(Some),
        Err(httparse::Error::TooManyHeaders) => Err(Reject::TooLarge),
        Err(httparse::Error::Version) => Err(version_error(buf)),
        Err(httparse::Error::Token) => Err(Reject::BadRequest(
            "invalid character in the method or a header name",
        )),
        Err(httparse::Error::HeaderName) => Err(Reject::BadRequest("invalid header name")),
        Err(httparse::Error::HeaderValue) => Err(Reject::BadRequest("invalid header value")),
        Err(httparse::Error::NewLine) => Err(Reject::BadRequest("invalid line ending")),
        Err(_) => Err(Reject::BadRequest("malformed request line")),
    }
}

/// `httparse` refuses any version but 1.0 and 1.1: one that starts as an HTTP version
/// does (`HTTP/2.0`, `HTTP/1.2`) is one this server does not speak (505), anything else
/// is malformed (400). httparse stops at the first byte it cannot take, so only the
/// version's start is looked at: the verdict is the same however the line arrived.
fn version_error(buf: &[u8]) -> Reject {
    // The request line, after the empty lines httparse skips before it.
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    let line = &buf[start..];
    let line_end = line
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(line.len());
    // method SP target SP version: what follows the second space.
    let version = line[..line_end]
        .splitn(3, |&b| b == b' ')
        .nth(2)
        .unwrap_or_default();
    match version.strip_prefix(b"HTTP/") {
        Some([d, ..]) if d.is_ascii_digit() => Reject::Version,
        _ => Reject::BadRequest("malformed HTTP version"),
    }
}

/// The comma-separated tokens of a header value, lowercased comparisons left to callers.
fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(|t| t.trim_ascii())
}

/// Decide keep-alive and the body from the header fields.
fn interpret(req: &httparse::Request<'_, '_>, len: usize) -> Result<Head, Reject> {
    let minor = req.version.unwrap_or(1);
    let mut close = false;
    let mut keep_alive = false;
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut coded = false;
    let mut hosts = 0u32;
    let mut expect_continue = false;
    for h in req.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("connection") {
            for t in tokens(h.value) {
                close |= t.eq_ignore_ascii_case(b"close");
                keep_alive |= t.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            for t in tokens(h.value) {
                let n = parse_length(t)?;
                if length.is_some_and(|l| l != n) {
                    return Err(Reject::BadRequest("Content-Length values disagree"));
                }
                length = Some(n);
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            coded = true;
            // Only `chunked`, and only as the one coding: anything else (gzip, chunked
            // applied twice) is a coding this server cannot remove.
            for t in tokens(h.value) {
                if t.is_empty() {
                    continue;
                }
                if !t.eq_ignore_ascii_case(b"chunked") || chunked {
                    return Err(Reject::NotImplemented);
                }
                chunked = true;
            }
        } else if name.eq_ignore_ascii_case("host") {
            hosts += 1;
        } else if name.eq_ignore_ascii_case("expect") {
            expect_continue |= h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        }
    }
    if coded && length.is_some() {
        return Err(Reject::BadRequest(
            "both Content-Length and Transfer-Encoding (a smuggling risk)",
        ));
    }
    if coded && minor == 0 {
        return Err(Reject::BadRequest(
            "Transfer-Encoding in an HTTP/1.0 request",
        ));
    }
    if coded && !chunked {
        return Err(Reject::BadRequest("an empty Transfer-Encoding"));
    }
    if minor == 1 && hosts != 1 {
        return Err(Reject::BadRequest(if hosts == 0 {
            "an HTTP/1.1 request without Host"
        } else {
            "more than one Host"
        }));
    }
    let body = match (chunked, length) {
        (true, _) => Body::Chunked,
        (false, Some(0) | None) => Body::None,
        (false, Some(n)) => Body::Length(n),
    };
    Ok(Head {
        len,
        minor,
        keep_alive: !close && (minor == 1 || keep_alive),
        head_method: req.method == Some("HEAD"),
        body,
        expect_continue: expect_continue && minor == 1,
    })
}

/// A Content-Length: digits only (no sign, no spaces inside), at most 18 of them (under
/// 10^18, so it never overflows).
fn parse_length(t: &[u8]) -> Result<u64, Reject> {
    const BAD: Reject = Reject::BadRequest("invalid Content-Length");
    if t.is_empty() || t.len() > 18 || !t.iter().all(u8::is_ascii_digit) {
        return Err(BAD);
    }
    std::str::from_utf8(t)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(BAD)
}

impl From<ChunkError> for Reject {
    /// A chunked request body that cannot be read: 400 with the reason, or 431.
    fn from(e: ChunkError) -> Reject {
        match e {
            ChunkError::Malformed(why) => Reject::BadRequest(why),
            ChunkError::TooLarge => Reject::TooLarge,
        }
    }
}

/// The request every connection of the load generator sends, built once: an HTTP/1.1
/// request line, `Host`, the user's headers and, without keep-alive, `Connection:
/// close`. The bytes are repeated once per pipeline slot so that a batch of k requests is
/// one slice and one write.
#[derive(Clone, Debug)]
pub struct Request {
    bytes: Vec<u8>,
    one: usize,
}

impl Request {
    /// `method path HTTP/1.1` with `Host: host`, `headers` (a `Host` among them replaces
    /// the URL's) and `Connection: close` unless `keepalive`, repeated `copies` times.
    pub fn new(
        method: &str,
        path: &str,
        host: &str,
        headers: &[(String, String)],
        keepalive: bool,
        copies: u32,
    ) -> Request {
        let mut one = format!("{method} {path} HTTP/1.1\r\n");
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            one.push_str(&format!("Host: {host}\r\n"));
        }
        for (n, v) in headers {
            one.push_str(&format!("{n}: {v}\r\n"));
        }
        if !keepalive
            && !headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("connection"))
        {
            one.push_str("Connection: close\r\n");
        }
        one.push_str("\r\n");
        let len = one.len();
        Request {
            bytes: one.repeat(copies.max(1) as usize).into_bytes(),
            one: len,
        }
    }

    /// Bytes of one request.
    pub fn len(&self) -> usize {
        self.one
    }

    /// Never: a request has at least its request line.
    pub fn is_empty(&self) -> bool {
        self.one == 0
    }

    /// `k` requests back to back (at most the copies it was built with).
    pub fn batch(&self, k: usize) -> &[u8] {
        &self.bytes[..(k * self.one).min(self.bytes.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::chunked::Decoder;

    /// A chunked body stepped as the session steps it: the bytes used, and whether it
    /// ended.
    fn skip_chunks(st: &mut Decoder, buf: &[u8]) -> Result<(usize, bool), Reject> {
        st.feed(buf, MAX_HEAD)
            .map(|f| (f.used, f.done))
            .map_err(Reject::from)
    }

    fn head(text: &str) -> Result<Option<Head>, Reject> {
        parse(text.as_bytes())
    }

    #[test]
    fn a_request_is_one_http11_request_repeated_per_slot() {
        let r = Request::new("GET", "/x", "h:8080", &[], false, 3);
        let one = "GET /x HTTP/1.1\r\nHost: h:8080\r\nConnection: close\r\n\r\n";
        assert_eq!(r.len(), one.len());
        assert_eq!(r.batch(1), one.as_bytes());
        assert_eq!(r.batch(3), one.repeat(3).as_bytes());
        assert_eq!(r.batch(9).len(), 3 * one.len());
        let h = vec![("Host".to_string(), "other".to_string())];
        let r = Request::new("HEAD", "/", "h", &h, true, 1);
        assert_eq!(r.batch(1), b"HEAD / HTTP/1.1\r\nHost: other\r\n\r\n");
    }

    #[test]
    fn http11_keeps_alive_unless_told_to_close() {
        let h = head("GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap().unwrap();
        assert_eq!(h.len, 27);
        assert!(h.keep_alive && h.minor == 1 && h.body == Body::None && !h.head_method);
        let h = head("GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!h.keep_alive);
        let h = head("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!h.keep_alive);
    }

    #[test]
    fn http10_closes_unless_asked_to_keep_alive() {
        // What ab sends without and with -k.
        let h = head("GET / HTTP/1.0\r\nHost: a\r\nUser-Agent: ApacheBench/2.3\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!h.keep_alive && h.minor == 0);
        let h = head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.keep_alive);
    }

    #[test]
    fn an_incomplete_head_waits_until_it_is_too_large() {
        assert_eq!(head("GET / HTTP/1.1\r\nHost: a\r\n"), Ok(None));
        assert_eq!(head("GE"), Ok(None));
        let long = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(MAX_HEAD));
        assert_eq!(head(&long), Err(Reject::TooLarge));
        let just = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(MAX_HEAD - 20));
        assert_eq!(just.len(), MAX_HEAD - 1);
        assert_eq!(head(&just), Ok(None));
        let complete_but_long = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_HEAD)
        );
        assert_eq!(head(&complete_but_long), Err(Reject::TooLarge));
    }

    #[test]
    fn too_many_fields_is_431() {
        let mut t = String::from("GET / HTTP/1.1\r\nHost: a\r\n");
        for i in 0..MAX_HEADERS {
            t.push_str(&format!("X-{i}: y\r\n"));
        }
        t.push_str("\r\n");
        assert_eq!(head(&t), Err(Reject::TooLarge));
        assert_eq!(Reject::TooLarge.status(), 431);
    }

    #[test]
    fn other_versions_are_505_and_garbage_is_400() {
        assert_eq!(head("GET / HTTP/2.0\r\n\r\n"), Err(Reject::Version));
        assert_eq!(
            head("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
            Err(Reject::Version)
        );
        assert_eq!(
            head("GET / HTTP/1.2\r\nHost: a\r\n\r\n"),
            Err(Reject::Version)
        );
        assert_eq!(head("GET / HTTP/3\r\n\r\n"), Err(Reject::Version));
        // The verdict comes from the version's first bytes, as if they came one by one.
        assert_eq!(head("GET / HTTP/2x.0\r\n\r\n"), Err(Reject::Version));
        assert_eq!(head("GET / HTTP/2"), Err(Reject::Version));
        assert_eq!(head("\r\nGET / HTTP/2.0\r\n\r\n"), Err(Reject::Version));
        // The version is the third part of the line, not the last.
        assert_eq!(
            head("body GET / HTTP/1.1\r\n\r\n"),
            Err(Reject::BadRequest("malformed HTTP version"))
        );
        assert_eq!(Reject::Version.status(), 505);
        for bad in [
            "GET / HTPT/1.1\r\n\r\n",
            "GET / HTTP/x.1\r\n\r\n",
            "\x16\x03\x01\x02\x00\x01\x00\x01",
            "GET / HTTP/1.1\r\nHo st: a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
            "GET / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        ] {
            let r = head(bad);
            assert!(
                matches!(r, Err(Reject::BadRequest(_))),
                "{bad:?} gave {r:?}"
            );
            assert_eq!(r.unwrap_err().status(), 400);
        }
    }

    #[test]
    fn bodies_by_length_and_chunked() {
        let h = head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
            .unwrap()
            .unwrap();
        assert_eq!(h.body, Body::Length(5));
        let h = head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.body, Body::Length(5));
        let h = head("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.body, Body::None);
        let h = head("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.body, Body::Chunked);
        for bad in [
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            assert!(matches!(head(bad), Err(Reject::BadRequest(_))), "{bad:?}");
        }
        assert_eq!(
            head("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            Err(Reject::NotImplemented)
        );
    }

    #[test]
    fn content_lengths_are_digits_and_at_most_18_of_them() {
        let with = |v: &str| {
            head(&format!(
                "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: {v}\r\n\r\n"
            ))
        };
        assert_eq!(
            with("999999999999999999").unwrap().unwrap().body,
            Body::Length(999_999_999_999_999_999)
        );
        for bad in ["1000000000000000000", "", "12a", "+5", "1 2"] {
            assert_eq!(
                with(bad),
                Err(Reject::BadRequest("invalid Content-Length")),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn host_problems_are_named() {
        assert_eq!(
            head("GET / HTTP/1.1\r\n\r\n"),
            Err(Reject::BadRequest("an HTTP/1.1 request without Host"))
        );
        assert_eq!(
            head("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
            Err(Reject::BadRequest("more than one Host"))
        );
        // HTTP/1.0 needs none.
        assert!(head("GET / HTTP/1.0\r\n\r\n").unwrap().is_some());
    }

    #[test]
    fn the_version_is_looked_for_on_the_request_line_only() {
        // A line that ends before its version: whatever the next line says is not it.
        let r = head("GET /\nX HTTP/2.0\r\n\r\n");
        assert!(matches!(r, Err(Reject::BadRequest(_))), "{r:?}");
    }

    #[test]
    fn chunk_ends_and_trailers_in_their_bare_lf_forms() {
        // Data ended by a bare LF, a last chunk ended by one, a trailer line "x".
        for body in [
            &b"3\r\nabc\n0\r\n\r\n"[..],
            b"3\r\nabc\r\n0\r\n\n",
            b"0\r\nx\n\r\n",
        ] {
            let mut st = Decoder::default();
            assert_eq!(
                skip_chunks(&mut st, body),
                Ok((body.len(), true)),
                "{body:?}"
            );
            let mut with_next = body.to_vec();
            with_next.extend_from_slice(b"GET");
            let mut st = Decoder::default();
            assert_eq!(skip_chunks(&mut st, &with_next), Ok((body.len(), true)));
        }
    }

    #[test]
    fn overlong_chunk_lines_are_431() {
        let mut size_line = b"1;".to_vec();
        size_line.extend(std::iter::repeat_n(b'a', MAX_HEAD));
        let mut st = Decoder::default();
        assert_eq!(skip_chunks(&mut st, &size_line), Err(Reject::TooLarge));
        let mut trailer = b"0\r\nX: ".to_vec();
        trailer.extend(std::iter::repeat_n(b'a', MAX_HEAD));
        let mut st = Decoder::default();
        assert_eq!(skip_chunks(&mut st, &trailer), Err(Reject::TooLarge));
        // Just under the limit, both still wait for more.
        let mut st = Decoder::default();
        assert_eq!(
            skip_chunks(&mut st, &size_line[..MAX_HEAD - 1]),
            Ok((0, false))
        );
    }

    #[test]
    fn head_requests_are_marked() {
        let h = head("HEAD / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap().unwrap();
        assert!(h.head_method);
    }

    fn skip_all(body: &[u8], piece: usize) -> Result<usize, Reject> {
        let mut st = Decoder::default();
        let mut buf = Vec::new();
        let mut total = 0;
        for part in body.chunks(piece) {
            buf.extend_from_slice(part);
            match skip_chunks(&mut st, &buf)? {
                (n, false) => {
                    total += n;
                    buf.drain(..n);
                }
                (n, true) => return Ok(total + n),
            }
        }
        Err(Reject::BadRequest("unfinished"))
    }

    #[test]
    fn chunked_bodies_are_skipped_whole_or_in_pieces() {
        let body = b"5\r\nhello\r\na;ext=1\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nGET";
        let want = body.len() - 3;
        for piece in [1, 2, 3, 7, body.len()] {
            assert_eq!(skip_all(body, piece), Ok(want), "pieces of {piece}");
        }
        let mut st = Decoder::default();
        assert!(skip_chunks(&mut st, b"zz\r\n").is_err());
        let mut st = Decoder::default();
        assert!(skip_chunks(&mut st, b"2\r\nabc\r\n").is_err());
    }
}

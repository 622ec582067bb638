//! An incremental HTTP/1.1 response parser, without I/O: bytes go in as they arrive, in
//! pieces of any size, and complete responses come out, in order. The status line and
//! headers are parsed with `httparse`; the body is delimited by `Content-Length`, by
//! chunked transfer coding (the one [`super::chunked::Decoder`]) or by the end of the
//! connection, and is counted, never kept. Only a head or a chunk-size line split across
//! reads is copied (into a buffer the parser keeps), so a response costs no allocation.
//!
//! Not here: timing, and what a response means for a run (the load generator's
//! workers).

use super::chunked::{ChunkError, Decoder, Fed};

/// Largest response head (status line and headers) accepted.
pub const MAX_HEAD: usize = 64 << 10;
/// Largest chunk-size line (with extensions) or trailer section accepted.
const MAX_LINE: usize = 4 << 10;
/// Headers per response httparse is given room for.
const MAX_HEADERS: usize = 100;

/// A complete response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Bytes of the body (chunked: the chunks' data only).
    pub body_bytes: u64,
    /// The server closes the connection after it (`Connection: close`, HTTP/1.0 without
    /// keep-alive, or a body that ends with the connection).
    pub close: bool,
}

/// A response the parser cannot read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// The status line or a header is not HTTP.
    Malformed,
    /// The head or a chunk line is larger than this parser takes.
    TooLarge,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Waiting for (the rest of) a head.
    Head,
    /// This many body bytes to go.
    Length(u64),
    /// A chunked body, where it stands.
    Chunked(Decoder),
    /// The body runs to the end of the connection.
    UntilClose,
}

/// The parser of one connection.
#[derive(Debug)]
pub struct Parser {
    state: State,
    /// A head or chunk-size line that came in pieces.
    carry: Vec<u8>,
    /// Responses to HEAD have no body whatever their headers say.
    head_request: bool,
    /// Bytes of the current response consumed (0: none of it has arrived).
    seen: u64,
    status: u16,
    body: u64,
    close: bool,
}

impl Parser {
    /// A parser for answers to requests of `method`.
    pub fn new(method: &str) -> Parser {
        Parser {
            state: State::Head,
            carry: Vec::new(),
            head_request: method.eq_ignore_ascii_case("HEAD"),
            seen: 0,
            status: 0,
            body: 0,
            close: false,
        }
    }

    /// Forget everything (a new connection).
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.carry.clear();
        self.seen = 0;
        self.body = 0;
        self.close = false;
    }

    /// Whether some of a response has arrived and it is not complete yet.
    pub fn in_progress(&self) -> bool {
        self.seen > 0
    }

    /// Consume bytes from `data` up to the end of the current response: the bytes used,
    /// and the response when it is complete. Call again with the rest; every call with
    /// non-empty `data` uses at least one byte or completes a response.
    ///
    /// # Errors
    /// The response cannot be parsed; the connection cannot be read any further.
    pub fn feed(&mut self, data: &[u8]) -> Result<(usize, Option<Response>), ParseError> {
        let mut used = 0;
        loop {
            let rest = &data[used..];
            match self.state {
                State::Head => {
                    if rest.is_empty() {
                        break;
                    }
                    let (n, complete) = self.head(rest)?;
                    used += n;
                    self.seen += n as u64;
                    if complete {
                        if let Some(r) = self.body_start() {
                            return Ok((used, Some(r)));
                        }
                    }
                }
                State::Length(left) => {
                    let take = (rest.len() as u64).min(left);
                    used += take as usize;
                    self.seen += take;
                    self.body += take;
                    if take == left {
                        return Ok((used, Some(self.finish())));
                    }
                    self.state = State::Length(left - take);
                    break;
                }
                State::UntilClose => {
                    used += rest.len();
                    self.seen += rest.len() as u64;
                    self.body += rest.len() as u64;
                    break;
                }
                State::Chunked(mut dec) => {
                    if rest.is_empty() {
                        break;
                    }
                    let (n, fed) = self.chunks(&mut dec, rest)?;
                    used += n;
                    self.seen += n as u64;
                    self.body += fed.data;
                    self.state = State::Chunked(dec);
                    if fed.done {
                        return Ok((used, Some(self.finish())));
                    }
                    // All of `rest` is used (a size line's start is kept).
                    break;
                }
            }
        }
        Ok((used, None))
    }

    /// The connection ended: the response whose body ran to the end of it, if that is
    /// what was being read.
    pub fn eof(&mut self) -> Option<Response> {
        (self.state == State::UntilClose).then(|| self.finish())
    }

    /// Parse (the rest of) a head from `rest`: bytes used, and whether it is complete.
    fn head(&mut self, rest: &[u8]) -> Result<(usize, bool), ParseError> {
        let before = self.carry.len();
        if before > 0 {
            let room = MAX_HEAD.saturating_sub(before).max(1);
            self.carry.extend_from_slice(&rest[..rest.len().min(room)]);
        }
        let buf: &[u8] = if before > 0 { &self.carry } else { rest };
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let parsed = resp.parse(buf);
        match parsed {
            // However it arrived, a head is held to the same bound.
            Ok(httparse::Status::Complete(n)) if n > MAX_HEAD => Err(ParseError::TooLarge),
            Ok(httparse::Status::Complete(n)) => {
                let status = resp.code.unwrap_or(0);
                let http10 = resp.version == Some(0);
                let mut length = None;
                let mut chunked = false;
                let (mut close, mut keep) = (false, false);
                for h in resp.headers.iter() {
                    if h.name.eq_ignore_ascii_case("content-length") {
                        length = Some(parse_length(h.value)?);
                    } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                        chunked = last_token_is(h.value, b"chunked");
                    } else if h.name.eq_ignore_ascii_case("connection") {
                        close |= has_token(h.value, b"close");
                        keep |= has_token(h.value, b"keep-alive");
                    }
                }
                self.status = status;
                self.close = close || (http10 && !keep);
                self.state = if (100..200).contains(&status) && status != 101 {
                    // Informational: the real answer follows.
                    State::Head
                } else if self.head_request || status == 204 || status == 304 || status == 101 {
                    State::Length(0)
                } else if chunked {
                    State::Chunked(Decoder::default())
                } else if let Some(l) = length {
                    State::Length(l)
                } else {
                    State::UntilClose
                };
                let used = n - before;
                self.carry.clear();
                Ok((used, !(100..200).contains(&status) || status == 101))
            }
            Ok(httparse::Status::Partial) => {
                if before == 0 {
                    if rest.len() >= MAX_HEAD {
                        return Err(ParseError::TooLarge);
                    }
                    self.carry.extend_from_slice(rest);
                    Ok((rest.len(), false))
                } else if self.carry.len() >= MAX_HEAD {
                    Err(ParseError::TooLarge)
                } else {
                    Ok((self.carry.len() - before, false))
                }
            }
            Err(httparse::Error::TooManyHeaders) => Err(ParseError::TooLarge),
            Err(_) => Err(ParseError::Malformed),
        }
    }

    /// After a complete head: the response when it has no body.
    fn body_start(&mut self) -> Option<Response> {
        match self.state {
            State::Length(0) => Some(self.finish()),
            State::UntilClose => {
                self.close = true;
                None
            }
            _ => None,
        }
    }

    /// Step a chunked body through `rest`, after the start of a size line kept from the
    /// last read: the bytes of `rest` used, and what the decoder did. Short of the end,
    /// every byte of `rest` is used: the start of a size line is kept for the next read.
    fn chunks(&mut self, dec: &mut Decoder, rest: &[u8]) -> Result<(usize, Fed), ParseError> {
        let before = self.carry.len();
        let add = if before > 0 {
            let room = MAX_LINE.saturating_sub(before).max(1);
            let add = rest.len().min(room);
            self.carry.extend_from_slice(&rest[..add]);
            add
        } else {
            rest.len()
        };
        let buf: &[u8] = if before > 0 { &self.carry } else { rest };
        let fed = dec.feed(buf, MAX_LINE).map_err(|e| match e {
            ChunkError::Malformed(_) => ParseError::Malformed,
            ChunkError::TooLarge => ParseError::TooLarge,
        })?;
        if fed.done {
            // The body ended inside what was given: the size line kept came before it.
            self.carry.clear();
            return Ok((fed.used - before, fed));
        }
        if before > 0 {
            self.carry.drain(..fed.used);
        } else {
            self.carry.extend_from_slice(&rest[fed.used..]);
        }
        Ok((add, fed))
    }

    /// The current response is complete: hand it out and start the next.
    fn finish(&mut self) -> Response {
        let r = Response {
            status: self.status,
            body_bytes: self.body,
            close: self.close || self.state == State::UntilClose,
        };
        self.state = State::Head;
        self.seen = 0;
        self.body = 0;
        self.close = false;
        r
    }
}

/// A Content-Length value: digits only (a list of equal values, which RFC 9110 8.6
/// allows, is taken as one).
fn parse_length(v: &[u8]) -> Result<u64, ParseError> {
    let mut out: Option<u64> = None;
    for part in v.split(|&b| b == b',') {
        let t = part.trim_ascii();
        if t.is_empty() || t.len() > 19 || !t.iter().all(u8::is_ascii_digit) {
            return Err(ParseError::Malformed);
        }
        let n = t.iter().fold(0u64, |a, &d| a * 10 + u64::from(d - b'0'));
        if out.is_some_and(|o| o != n) {
            return Err(ParseError::Malformed);
        }
        out = Some(n);
    }
    out.ok_or(ParseError::Malformed)
}

/// Whether a comma-separated header value holds `token` (case-insensitive).
fn has_token(v: &[u8], token: &[u8]) -> bool {
    v.split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// Whether the last coding of a Transfer-Encoding value is `token`.
fn last_token_is(v: &[u8], token: &[u8]) -> bool {
    v.rsplit(|&b| b == b',')
        .next()
        .is_some_and(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `wire` in pieces cut at `cuts`, collecting every response.
    fn parse_in_pieces(
        p: &mut Parser,
        wire: &[u8],
        cuts: &[usize],
    ) -> Result<Vec<Response>, ParseError> {
        let mut out = Vec::new();
        let mut start = 0;
        for &end in cuts.iter().chain(std::iter::once(&wire.len())) {
            let mut piece = &wire[start..end];
            start = end;
            while !piece.is_empty() {
                let (n, r) = p.feed(piece)?;
                assert!(n > 0 || r.is_some(), "no progress");
                piece = &piece[n..];
                out.extend(r);
            }
        }
        Ok(out)
    }

    fn all(wire: &[u8]) -> Vec<Response> {
        parse_in_pieces(&mut Parser::new("GET"), wire, &[]).unwrap()
    }

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\nServer: x\r\n\r\nHello, World!";
    const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nHello\r\n8\r\n, World!\r\n0\r\nX-T: 1\r\n\r\n";

    #[test]
    fn several_responses_in_one_read_come_out_in_order() {
        let mut wire = OK.to_vec();
        wire.extend_from_slice(b"HTTP/1.1 404 Not Found\r\ncontent-length: 3\r\n\r\nnop");
        wire.extend_from_slice(CHUNKED);
        wire.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
        let r = all(&wire);
        let got: Vec<(u16, u64)> = r.iter().map(|r| (r.status, r.body_bytes)).collect();
        assert_eq!(got, [(200, 13), (404, 3), (200, 13), (204, 0)]);
        assert!(r.iter().all(|r| !r.close));
    }

    #[test]
    fn a_response_split_at_every_byte_parses_the_same() {
        let mut wire = OK.to_vec();
        wire.extend_from_slice(CHUNKED);
        wire.extend_from_slice(OK);
        let whole = all(&wire);
        assert_eq!(whole.len(), 3);
        for cut in 1..wire.len() {
            let mut p = Parser::new("GET");
            assert_eq!(
                parse_in_pieces(&mut p, &wire, &[cut]).unwrap(),
                whole,
                "cut at {cut}"
            );
        }
        // One byte at a time.
        let mut p = Parser::new("GET");
        let cuts: Vec<usize> = (1..wire.len()).collect();
        assert_eq!(parse_in_pieces(&mut p, &wire, &cuts).unwrap(), whole);
    }

    #[test]
    fn in_progress_is_true_from_the_first_byte_to_the_last() {
        let mut p = Parser::new("GET");
        assert!(!p.in_progress());
        assert_eq!(p.feed(&OK[..5]).unwrap(), (5, None));
        assert!(p.in_progress());
        let (n, r) = p.feed(&OK[5..]).unwrap();
        assert_eq!((n, r.map(|r| r.body_bytes)), (OK.len() - 5, Some(13)));
        assert!(!p.in_progress());
    }

    #[test]
    fn a_reset_forgets_the_response_a_closed_connection_cut_short() {
        // A connection closed mid-body (mid-chunk, with a size line kept), then the next
        // connection's response: read from its first byte, as a new connection's.
        for cut in [OK.len() - 3, CHUNKED.len() - 20, 60] {
            let mut p = Parser::new("GET");
            let (n, r) = p.feed(&CHUNKED[..cut.min(CHUNKED.len())]).unwrap();
            assert!(n > 0 && r.is_none() && p.in_progress());
            p.reset();
            assert!(!p.in_progress());
            let (n, r) = p.feed(OK).unwrap();
            assert_eq!(
                (n, r.map(|r| (r.status, r.body_bytes))),
                (OK.len(), Some((200, 13)))
            );
        }
    }

    #[test]
    fn the_connection_header_and_http10_decide_close() {
        let r = all(b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n");
        assert!(r[0].close);
        let r = all(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert!(r[0].close);
        let r = all(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n");
        assert!(!r[0].close);
    }

    #[test]
    fn a_body_without_length_runs_to_the_end_of_the_connection() {
        let mut p = Parser::new("GET");
        let wire = b"HTTP/1.1 200 OK\r\n\r\nabcdef";
        assert_eq!(p.feed(wire).unwrap(), (wire.len(), None));
        assert_eq!(p.feed(b"gh").unwrap(), (2, None));
        assert_eq!(
            p.eof(),
            Some(Response {
                status: 200,
                body_bytes: 8,
                close: true
            })
        );
        // Elsewhere, the end of the connection completes nothing.
        let mut p = Parser::new("GET");
        p.feed(&OK[..30]).unwrap();
        assert_eq!(p.eof(), None);
    }

    #[test]
    fn head_answers_1xx_and_304_have_no_body() {
        let mut p = Parser::new("HEAD");
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n";
        let r = parse_in_pieces(&mut p, wire, &[]).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].body_bytes, 0);
        let r = all(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
        );
        assert_eq!(
            r,
            [Response {
                status: 304,
                body_bytes: 0,
                close: false
            }]
        );
    }

    #[test]
    fn garbage_is_malformed_and_huge_heads_too_large() {
        let mut p = Parser::new("GET");
        assert_eq!(
            p.feed(b"SSH-2.0-OpenSSH\r\n\r\n"),
            Err(ParseError::Malformed)
        );
        let mut p = Parser::new("GET");
        assert_eq!(
            p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n"),
            Err(ParseError::Malformed)
        );
        let mut p = Parser::new("GET");
        let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(
            parse_in_pieces(&mut p, wire, &[]),
            Err(ParseError::Malformed)
        );
        let mut p = Parser::new("GET");
        let mut head = b"HTTP/1.1 200 OK\r\n".to_vec();
        while head.len() <= MAX_HEAD {
            head.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        let cuts: Vec<usize> = (1..head.len() / 1000).map(|i| i * 1000).collect();
        assert!(parse_in_pieces(&mut p, &head, &cuts).is_err());
        // Whole, in one read, it is refused the same (the fuzzer found it let through).
        head.extend_from_slice(b"Content-Length: 0\r\n\r\n");
        let mut p = Parser::new("GET");
        assert_eq!(p.feed(&head), Err(ParseError::TooLarge));
        let mut p = Parser::new("GET");
        assert_eq!(
            parse_in_pieces(&mut p, &head, &cuts),
            Err(ParseError::TooLarge)
        );
    }

    #[test]
    fn content_length_lists_must_agree() {
        assert_eq!(parse_length(b"13"), Ok(13));
        assert_eq!(parse_length(b"13, 13"), Ok(13));
        assert!(parse_length(b"13, 14").is_err());
        assert!(parse_length(b"-1").is_err());
        assert!(parse_length(b"").is_err());
        assert!(parse_length(b"99999999999999999999").is_err());
    }

    mod fuzz {
        use super::*;
        use crate::http::chunked::{encode, LAST};
        use proptest::prelude::*;

        /// How a generated response delimits its body.
        #[derive(Clone, Debug)]
        enum Framing {
            Length,
            Chunked(Vec<usize>),
            UntilClose,
            NoBody(u16),
        }

        /// One response as a server writes it, and what the parser must read from it.
        fn response() -> impl Strategy<Value = (Vec<u8>, Response)> {
            let framing = prop_oneof![
                Just(Framing::Length),
                proptest::collection::vec(0usize..300, 0..6).prop_map(Framing::Chunked),
                Just(Framing::UntilClose),
                prop_oneof![Just(204u16), Just(304)].prop_map(Framing::NoBody),
            ];
            (
                prop_oneof![Just(200u16), Just(404), Just(500), Just(301)],
                framing,
                0usize..2000,
                any::<bool>(),
                proptest::collection::vec(0usize..3, 0..4),
            )
                .prop_map(|(status, framing, len, close, extra)| {
                    let status = match framing {
                        Framing::NoBody(s) => s,
                        _ => status,
                    };
                    let mut wire = format!("HTTP/1.1 {status} X\r\nServer: fuzz\r\n");
                    for e in extra {
                        wire.push_str(["X-A: 1\r\n", "Set-Cookie: a=b; c=d\r\n", "Vary: *\r\n"][e]);
                    }
                    if close {
                        wire.push_str("Connection: close\r\n");
                    }
                    let mut wire = wire.into_bytes();
                    let body_bytes = match &framing {
                        Framing::Length => {
                            wire.extend_from_slice(
                                format!("Content-Length: {len}\r\n\r\n").as_bytes(),
                            );
                            wire.extend(std::iter::repeat_n(b'b', len));
                            len as u64
                        }
                        Framing::Chunked(sizes) => {
                            wire.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                            for &n in sizes {
                                encode(&vec![b'c'; n], &mut wire);
                            }
                            wire.extend_from_slice(LAST);
                            sizes.iter().sum::<usize>() as u64
                        }
                        Framing::UntilClose => {
                            wire.extend_from_slice(b"\r\n");
                            wire.extend(std::iter::repeat_n(b'u', len));
                            len as u64
                        }
                        Framing::NoBody(_) => {
                            wire.extend_from_slice(b"\r\n");
                            0
                        }
                    };
                    let close = close || matches!(framing, Framing::UntilClose);
                    (
                        wire,
                        Response {
                            status,
                            body_bytes,
                            close,
                        },
                    )
                })
        }

        /// Feed `wire` in pieces of the given lengths (cycled), checking that every call
        /// makes progress and the kept bytes stay bounded; the responses, with the one
        /// that ran to the end of the connection.
        fn feed_all(wire: &[u8], pieces: &[usize]) -> Result<Vec<Response>, ParseError> {
            let mut p = Parser::new("GET");
            let mut out = Vec::new();
            let (mut at, mut k) = (0, 0);
            while at < wire.len() {
                let end = (at + pieces[k % pieces.len()].max(1)).min(wire.len());
                k += 1;
                let mut piece = &wire[at..end];
                at = end;
                while !piece.is_empty() {
                    let (n, r) = p.feed(piece)?;
                    assert!(n > 0 || r.is_some(), "no progress");
                    assert!(
                        p.carry.len() <= MAX_HEAD + 1,
                        "{} bytes kept",
                        p.carry.len()
                    );
                    piece = &piece[n..];
                    out.extend(r);
                }
            }
            out.extend(p.eof());
            Ok(out)
        }

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(1000),
                failure_persistence: None,
                .. ProptestConfig::default()
            })]

            /// Responses as servers write them (lengths, chunks, bodies to the end of the
            /// connection, none), several on one connection, parse back to exactly what
            /// was written however the bytes are split.
            #[test]
            fn written_responses_parse_back_exactly_however_split(
                responses in proptest::collection::vec(response(), 1..5),
                pieces in proptest::collection::vec(1usize..60, 1..6),
            ) {
                // A body that runs to the end of the connection, or a close, ends it.
                let end = responses.iter().position(|(_, r)| r.close).map_or(responses.len(), |i| i + 1);
                let wire: Vec<u8> = responses[..end].iter().flat_map(|(w, _)| w.clone()).collect();
                let want: Vec<Response> = responses[..end].iter().map(|(_, r)| *r).collect();
                prop_assert_eq!(feed_all(&wire, &[usize::MAX / 2]), Ok(want.clone()));
                prop_assert_eq!(feed_all(&wire, &pieces), Ok(want));
            }

            /// Anything at all (responses with bytes flipped, long runs inserted, random
            /// bytes): no panic, progress on every call, bounded memory, and the same
            /// outcome however the bytes are split.
            #[test]
            fn arbitrary_bytes_parse_the_same_however_split(
                base in proptest::collection::vec(response(), 1..4),
                flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
                run in (any::<usize>(), 0usize..5_000),
                random in proptest::collection::vec(any::<u8>(), 0..400),
                which in 0u8..3,
                pieces in proptest::collection::vec(1usize..60, 1..6),
            ) {
                let mut wire: Vec<u8> = base.iter().flat_map(|(w, _)| w.clone()).collect();
                match which {
                    0 => for (at, b) in flips {
                        let i = at % wire.len();
                        wire[i] = b;
                    },
                    1 => {
                        let at = run.0 % wire.len();
                        wire.splice(at..at, std::iter::repeat_n(b'7', run.1));
                    }
                    _ => wire = random,
                }
                let whole = feed_all(&wire, &[usize::MAX / 2]);
                prop_assert_eq!(feed_all(&wire, &pieces), whole);
            }
        }
    }
}

//! The control protocol's only kind of frame: a type (one byte), a length (four bytes,
//! big-endian) and a body of that many bytes. Every type has a size cap, checked on the
//! header before a single body byte is read or allocated, so a peer cannot make this side
//! allocate what it announces (iperf3's #2072: a one-byte state read where a length was
//! expected became a 3.97 GiB allocation) and an unknown type ends the connection at once.

use std::io::{self, Read};

/// Bytes in a frame header: the type and the length.
pub const HEADER: usize = 5;

/// What a frame carries. The numbering is part of the protocol: never reuse a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameType {
    /// Client to server, first: protocol version and what the client is.
    Hello = 1,
    /// Server to client: accepted (with a challenge when a key is required) or not.
    Welcome = 2,
    /// Either side: the answer to a challenge.
    Auth = 3,
    /// Client to server: the scenario to run and the role the server takes.
    Scenario = 4,
    /// Server to client: set up, here is where to connect (endpoint, token).
    Ready = 5,
    /// Either side: go.
    Start = 6,
    /// Either side: what its role measured.
    Result = 7,
    /// Either side: why it cannot go on.
    Error = 8,
    /// Either side: the end of the conversation.
    Bye = 9,
    /// Either side: this side's connections are made (with its own endpoints).
    Wired = 10,
    /// Either side, during a run: what one of its roles told its peer role.
    Signal = 11,
    /// A mesh coordinator to an agent: run this test as the client against that agent.
    Drive = 12,
    /// An agent to its coordinator: the report of the test it drove, or why it failed.
    Report = 13,
}

impl FrameType {
    /// Every type, in protocol order.
    pub const ALL: [FrameType; 13] = [
        FrameType::Hello,
        FrameType::Welcome,
        FrameType::Auth,
        FrameType::Scenario,
        FrameType::Ready,
        FrameType::Start,
        FrameType::Result,
        FrameType::Error,
        FrameType::Bye,
        FrameType::Wired,
        FrameType::Signal,
        FrameType::Drive,
        FrameType::Report,
    ];

    /// The type a header byte names, if any.
    pub fn from_byte(b: u8) -> Option<FrameType> {
        FrameType::ALL.into_iter().find(|t| *t as u8 == b)
    }

    /// The largest body a frame of this type may carry.
    pub fn cap(self) -> usize {
        match self {
            FrameType::Hello | FrameType::Welcome => 1 << 10,
            FrameType::Auth => 256,
            // Endpoints for up to 256 streams.
            FrameType::Scenario | FrameType::Ready | FrameType::Wired => 64 << 10,
            FrameType::Drive => 4 << 10,
            // A whole client report (JSON), as `--format json` prints it.
            FrameType::Report => 8 << 20,
            FrameType::Error => 4 << 10,
            FrameType::Start | FrameType::Bye | FrameType::Signal => 64,
            // A role's report, latency histograms included.
            FrameType::Result => 4 << 20,
        }
    }
}

/// One frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// What it carries.
    pub kind: FrameType,
    /// The body, at most `kind.cap()` bytes.
    pub body: Vec<u8>,
}

/// Why a frame was refused; the connection ends on any of them.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The header names no frame type.
    #[error("unknown control frame type {0}: the peer is not a sockbench of this protocol")]
    UnknownType(u8),
    /// The header announces more than the type may carry.
    #[error("control frame {kind:?} announces {len} bytes, over its limit of {cap}")]
    TooLarge {
        /// The type.
        kind: FrameType,
        /// The announced length.
        len: u64,
        /// The type's cap.
        cap: usize,
    },
    /// A frame of a type this side does not take at this point of the conversation (a
    /// client's report before it has even said hello), refused on its header.
    #[error("control frame {0:?} is not expected here")]
    Unexpected(FrameType),
    /// Reading failed, or the stream ended inside a frame.
    #[error("control connection: {0}")]
    Io(#[from] io::Error),
}

/// Check a header: the type it names, and a length within that type's cap.
fn check(header: [u8; HEADER]) -> Result<(FrameType, usize), FrameError> {
    let kind = FrameType::from_byte(header[0]).ok_or(FrameError::UnknownType(header[0]))?;
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
    if len as usize > kind.cap() {
        return Err(FrameError::TooLarge {
            kind,
            len: u64::from(len),
            cap: kind.cap(),
        });
    }
    Ok((kind, len as usize))
}

/// The bytes of a frame.
///
/// # Errors
/// [`FrameError::TooLarge`] if `body` is over the type's cap (this side never sends what
/// the peer must refuse).
pub fn encode(kind: FrameType, body: &[u8]) -> Result<Vec<u8>, FrameError> {
    if body.len() > kind.cap() {
        return Err(FrameError::TooLarge {
            kind,
            len: body.len() as u64,
            cap: kind.cap(),
        });
    }
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.push(kind as u8);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    Ok(out)
}

/// Read one whole frame from a blocking stream (whose read timeout bounds each wait).
///
/// # Errors
/// As [`FrameError`]: an unknown type or an oversized length before any body byte is read;
/// `UnexpectedEof` if the stream ends inside the frame.
pub fn read_frame(r: &mut impl Read) -> Result<Frame, FrameError> {
    let mut header = [0u8; HEADER];
    r.read_exact(&mut header)?;
    let (kind, len) = check(header)?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(Frame { kind, body })
}

/// Frames from bytes as they arrive (for a reactor that reads whatever is ready). It holds
/// at most one header and one capped body, and takes only the types it is told to (all,
/// until [`Decoder::allow`]): a frame of any other type is refused on its header, before
/// a byte of its body is held. Memory for a body is taken as its bytes arrive, not when
/// its header announces them.
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    /// The checked header of the frame being collected.
    pending: Option<(FrameType, usize)>,
    /// The types taken, one bit per type byte.
    allowed: u64,
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder {
            buf: Vec::new(),
            pending: None,
            allowed: u64::MAX,
        }
    }
}

/// Memory reserved for a body ahead of its bytes.
const RESERVE_AHEAD: usize = 16 << 10;

impl Decoder {
    /// An empty decoder.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Take only frames of `types` from the next header on.
    pub fn allow(&mut self, types: &[FrameType]) {
        self.allowed = types.iter().fold(0, |m, t| m | 1u64 << (*t as u8 % 64));
    }

    fn allows(&self, kind: FrameType) -> bool {
        self.allowed & (1u64 << (kind as u8 % 64)) != 0
    }

    /// Take as many bytes of `input` as the next frame needs; returns how many were taken
    /// and the frame if one is complete. Call again with the rest.
    ///
    /// # Errors
    /// As [`read_frame`], as soon as a header is complete.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Frame>), FrameError> {
        let mut used = 0;
        if self.pending.is_none() {
            let want = HEADER - self.buf.len();
            let take = want.min(input.len());
            self.buf.extend_from_slice(&input[..take]);
            used = take;
            if self.buf.len() < HEADER {
                return Ok((used, None));
            }
            let header: [u8; HEADER] = self.buf[..HEADER].try_into().expect("a whole header");
            let checked = check(header)?;
            if !self.allows(checked.0) {
                return Err(FrameError::Unexpected(checked.0));
            }
            self.buf.clear();
            self.buf.shrink_to(RESERVE_AHEAD);
            self.buf.reserve(checked.1.min(RESERVE_AHEAD));
            self.pending = Some(checked);
        }
        let (kind, len) = self.pending.expect("a checked header");
        let take = (len - self.buf.len()).min(input.len() - used);
        self.buf.extend_from_slice(&input[used..used + take]);
        used += take;
        if self.buf.len() < len {
            return Ok((used, None));
        }
        self.pending = None;
        let body = std::mem::take(&mut self.buf);
        Ok((used, Some(Frame { kind, body })))
    }

    /// Every complete frame in `input`, in order (bytes of a frame not yet complete are
    /// kept for the next call).
    ///
    /// # Errors
    /// The first refused header: the connection must end.
    pub fn feed_all(&mut self, mut input: &[u8]) -> Result<Vec<Frame>, FrameError> {
        let mut frames = Vec::new();
        while !input.is_empty() {
            let (used, frame) = self.feed(input)?;
            if used == 0 && frame.is_none() {
                // Cannot happen with bytes to take; never spin on it.
                return Err(FrameError::Io(io::Error::other(
                    "control frame decoder stalled",
                )));
            }
            input = &input[used..];
            frames.extend(frame);
        }
        Ok(frames)
    }

    /// Whether the decoder sits between frames (nothing half-received).
    pub fn is_idle(&self) -> bool {
        self.pending.is_none() && self.buf.is_empty()
    }

    /// Bytes held of a frame not yet complete (its header, then its body).
    pub fn held(&self) -> usize {
        self.buf.len()
    }

    /// The most a frame's body may hold now: the largest cap among the types taken.
    pub fn largest_allowed(&self) -> usize {
        FrameType::ALL
            .into_iter()
            .filter(|t| self.allows(*t))
            .map(FrameType::cap)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: FrameType, body: &[u8]) -> Frame {
        Frame {
            kind,
            body: body.to_vec(),
        }
    }

    #[test]
    fn a_type_not_allowed_is_refused_on_its_header_before_its_body_is_held() {
        let mut d = Decoder::new();
        d.allow(&[FrameType::Hello, FrameType::Bye]);
        // An agent's 8 MiB report from a client that has not said hello.
        let mut header = vec![FrameType::Report as u8];
        header.extend_from_slice(&(8u32 << 20).to_be_bytes());
        match d.feed(&header) {
            Err(FrameError::Unexpected(FrameType::Report)) => {}
            other => panic!("{other:?}"),
        }
        assert!(d.buf.capacity() <= RESERVE_AHEAD, "{}", d.buf.capacity());
        // Allowed types still go through, whole.
        let mut d = Decoder::new();
        d.allow(&[FrameType::Hello]);
        let hello = encode(FrameType::Hello, b"{}").unwrap();
        let (_, f) = d.feed(&hello).unwrap();
        assert_eq!(f.unwrap().kind, FrameType::Hello);
        assert!(matches!(
            d.feed(&encode(FrameType::Welcome, b"{}").unwrap()),
            Err(FrameError::Unexpected(FrameType::Welcome))
        ));
        // A type named twice is allowed, as once (a list, not a toggle).
        let mut d = Decoder::new();
        d.allow(&[FrameType::Hello, FrameType::Bye, FrameType::Hello]);
        let (_, f) = d.feed(&hello).unwrap();
        assert_eq!(f.unwrap().kind, FrameType::Hello);
    }

    /// What a decoder holds of a frame not yet complete is counted byte for byte: its
    /// header as it comes, then its body; nothing once the frame is out.
    #[test]
    fn the_bytes_held_of_an_unfinished_frame_are_counted_exactly() {
        let mut d = Decoder::new();
        assert_eq!(d.held(), 0);
        let hello = encode(FrameType::Hello, b"0123456789").unwrap();
        assert_eq!(d.feed(&hello[..3]).unwrap(), (3, None));
        assert_eq!(d.held(), 3, "three bytes of the header");
        let (used, f) = d.feed(&hello[3..HEADER + 4]).unwrap();
        assert_eq!((used, f), (HEADER - 3 + 4, None));
        assert_eq!(d.held(), 4, "the header done, four bytes of the body");
        let (_, f) = d.feed(&hello[HEADER + 4..]).unwrap();
        assert_eq!(f.unwrap().body, b"0123456789");
        assert_eq!(d.held(), 0);
    }

    /// The most a body may hold is the largest cap among the types allowed.
    #[test]
    fn the_largest_allowed_body_is_the_largest_cap_of_the_types_taken() {
        let mut d = Decoder::new();
        let every = FrameType::ALL
            .into_iter()
            .map(FrameType::cap)
            .max()
            .unwrap();
        assert_eq!(d.largest_allowed(), every);
        d.allow(&[FrameType::Hello]);
        assert_eq!(d.largest_allowed(), FrameType::Hello.cap());
        d.allow(&[FrameType::Hello, FrameType::Result]);
        assert_eq!(
            d.largest_allowed(),
            FrameType::Hello.cap().max(FrameType::Result.cap())
        );
        assert!(FrameType::Hello.cap() > 1);
        d.allow(&[]);
        assert_eq!(d.largest_allowed(), 0);
    }

    #[test]
    fn a_large_announced_body_takes_memory_only_as_it_arrives() {
        let mut d = Decoder::new();
        let mut header = vec![FrameType::Result as u8];
        header.extend_from_slice(&(4u32 << 20).to_be_bytes());
        assert!(d.feed(&header).unwrap().1.is_none());
        assert!(d.buf.capacity() <= RESERVE_AHEAD, "{}", d.buf.capacity());
        // A megabyte in: about a megabyte held, not the four announced.
        let mb = vec![1u8; 1 << 20];
        assert!(d.feed(&mb).unwrap().1.is_none());
        assert!(d.buf.capacity() < 3 << 20, "{}", d.buf.capacity());
        let rest = vec![1u8; 3 << 20];
        let (used, f) = d.feed(&rest).unwrap();
        assert_eq!(used, 3 << 20);
        assert_eq!(f.unwrap().body.len(), 4 << 20);
        assert!(d.is_idle());
    }

    #[test]
    fn every_type_goes_through_at_its_cap_and_not_one_byte_over() {
        for kind in FrameType::ALL {
            assert_eq!(FrameType::from_byte(kind as u8), Some(kind));
            let body = vec![0xA5; kind.cap()];
            let bytes = encode(kind, &body).unwrap();
            assert_eq!(bytes.len(), HEADER + kind.cap());
            assert_eq!(bytes[0], kind as u8);
            assert_eq!(&bytes[1..5], &(kind.cap() as u32).to_be_bytes());
            let got = read_frame(&mut &bytes[..]).unwrap();
            assert_eq!(got, frame(kind, &body));
            let over = vec![0; kind.cap() + 1];
            assert!(matches!(
                encode(kind, &over),
                Err(FrameError::TooLarge { len, cap, .. }) if len == cap as u64 + 1
            ));
            // A header announcing one byte over the cap is refused before the body.
            let mut header = vec![kind as u8];
            header.extend_from_slice(&(kind.cap() as u32 + 1).to_be_bytes());
            assert!(matches!(
                read_frame(&mut &header[..]),
                Err(FrameError::TooLarge { .. })
            ));
        }
        // The caps are part of the protocol: a change is a new protocol version.
        assert_eq!(
            FrameType::ALL.map(FrameType::cap),
            [
                1024,
                1024,
                256,
                65_536,
                65_536,
                64,
                4 << 20,
                4096,
                64,
                65_536,
                64,
                4096,
                8 << 20
            ]
        );
        assert_eq!(
            FrameType::ALL.map(|t| t as u8),
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
        );
        assert_eq!(FrameType::from_byte(0), None);
        assert_eq!(FrameType::from_byte(14), None);
    }

    #[test]
    fn a_huge_length_is_refused_without_allocating_or_reading_on() {
        // iperf3 #2072: a state byte read as a length. Here: Hello announcing ~4 GiB,
        // followed by nothing; the refusal comes from the header alone.
        let header = [FrameType::Hello as u8, 0xFF, 0xFF, 0xFF, 0xF0];
        let e = read_frame(&mut &header[..]).unwrap_err();
        assert!(e.to_string().contains("announces 4294967280 bytes"), "{e}");
        let mut d = Decoder::new();
        assert!(matches!(d.feed(&header), Err(FrameError::TooLarge { .. })));
        let e = read_frame(&mut &[42u8, 0, 0, 0, 0][..]).unwrap_err();
        assert!(matches!(e, FrameError::UnknownType(42)), "{e}");
    }

    #[test]
    fn a_stream_that_ends_inside_a_frame_is_an_error() {
        let bytes = encode(FrameType::Scenario, b"{\"x\":1}").unwrap();
        for cut in [1, HEADER, bytes.len() - 1] {
            match read_frame(&mut &bytes[..cut]) {
                Err(FrameError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof),
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
        assert!(read_frame(&mut &[][..]).is_err());
    }

    #[test]
    fn the_decoder_puts_frames_together_from_any_split() {
        let mut stream = encode(FrameType::Hello, b"hello").unwrap();
        stream.extend(encode(FrameType::Start, b"").unwrap());
        stream.extend(encode(FrameType::Result, &[7; 300]).unwrap());
        let want = vec![
            frame(FrameType::Hello, b"hello"),
            frame(FrameType::Start, b""),
            frame(FrameType::Result, &[7; 300]),
        ];
        for step in [1, 2, 3, 5, 7, 64, stream.len()] {
            let mut d = Decoder::new();
            let mut got = Vec::new();
            for chunk in stream.chunks(step) {
                got.extend(d.feed_all(chunk).unwrap());
            }
            assert_eq!(got, want, "in pieces of {step}");
            assert!(d.is_idle());
        }
        // Half a frame is kept, not lost.
        let mut d = Decoder::new();
        assert_eq!(d.feed_all(&stream[..12]).unwrap().len(), 1);
        assert!(!d.is_idle());
    }

    #[test]
    fn the_decoder_takes_only_what_the_next_frame_needs() {
        let mut stream = encode(FrameType::Bye, b"ab").unwrap();
        stream.extend_from_slice(&[0xEE; 4]);
        let mut d = Decoder::new();
        let (used, f) = d.feed(&stream).unwrap();
        assert_eq!(used, HEADER + 2);
        assert_eq!(f, Some(frame(FrameType::Bye, b"ab")));
        let (used, f) = d.feed(&stream[HEADER + 2..]).unwrap();
        assert_eq!((used, f), (4, None));
        // The next header is refused once complete: 0xEE names no type.
        assert!(matches!(d.feed(&[0]), Err(FrameError::UnknownType(0xEE))));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(2000),
            ..Default::default()
        })]

        /// Arbitrary bytes, in arbitrary pieces: never a panic, never a frame over its
        /// type's cap, and the same frames whether read whole or fed in pieces.
        #[test]
        fn arbitrary_bytes_never_panic_nor_pass_an_oversized_frame(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            step in 1usize..50,
        ) {
            let mut d = Decoder::new();
            let mut fed = Vec::new();
            let mut refused = false;
            for chunk in bytes.chunks(step) {
                match d.feed_all(chunk) {
                    Ok(frames) => fed.extend(frames),
                    Err(_) => { refused = true; break; }
                }
            }
            for f in &fed {
                proptest::prop_assert!(f.body.len() <= f.kind.cap());
            }
            let mut r = &bytes[..];
            let mut whole = Vec::new();
            while let Ok(f) = read_frame(&mut r) {
                whole.push(f);
            }
            proptest::prop_assert_eq!(&fed[..], &whole[..fed.len().min(whole.len())]);
            if !refused {
                proptest::prop_assert_eq!(fed.len(), whole.len());
            }
        }
    }
}

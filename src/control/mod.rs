//! The control protocol between a sockbench client and a `sockbench server` (or a child
//! sockbench under `--placement processes`): versioned, typed frames with a size cap per
//! type ([`frame`]), JSON bodies with no unknown fields ([`messages`]), a pre-shared-key
//! handshake ([`auth`]), the server's state machine ([`session`]) and the checks every
//! figure from a peer passes ([`wire`]).
//!
//! Every read has a deadline: a peer that sends nothing, or one byte every few seconds,
//! is dropped when its deadline passes, not when it decides to finish.

pub mod auth;
pub mod client;
pub mod frame;
#[cfg(test)]
pub(crate) mod fuzzing;
pub mod messages;
pub mod session;
pub mod wire;

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::sys::wait::Woken;
use frame::{Decoder, Frame, FrameError, FrameType};

/// The protocol version a hello carries; a peer of another version is refused.
/// Version 2 added the mesh frames ([`frame::FrameType::Drive`], [`frame::FrameType::Report`]).
pub const VERSION: u16 = 2;
/// The port `sockbench server` listens on by default (unassigned by IANA, next to
/// iperf3's 5201).
pub const DEFAULT_PORT: u16 = 5290;
/// A client must say hello within this long of connecting.
pub const HELLO_DEADLINE: Duration = Duration::from_secs(5);
/// The whole handshake (hello, welcome, both proofs) must be over within this long.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);
/// Each step of setting up a run (endpoints, connections, start) must come within this.
pub const STEP_DEADLINE: Duration = Duration::from_secs(15);
/// A connected client may sit this long between runs before the server hangs up.
pub const IDLE_DEADLINE: Duration = Duration::from_secs(120);
/// How long a run may go past its planned end (or, once this side's roles have ended,
/// wait for the peer's result) before it is declared stalled.
pub const STALL_GRACE: Duration = Duration::from_secs(15);
/// How often a run's coordinating thread looks at its roles between control frames.
pub const TICK: Duration = Duration::from_millis(10);

/// Every wait of a control conversation and of the runs in it, in one value:
/// [`Deadlines::default`] is the protocol's ([`HELLO_DEADLINE`], [`HANDSHAKE_DEADLINE`],
/// [`STEP_DEADLINE`], [`IDLE_DEADLINE`], [`STALL_GRACE`], [`TICK`]). A test shortens them
/// all at once to play a silent peer a million times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadlines {
    /// A client's hello, from its connection.
    pub hello: Duration,
    /// The whole handshake (hello, welcome, both proofs).
    pub handshake: Duration,
    /// Each step of setting up a run (a frame, a data connection's token, the roles at
    /// the start line).
    pub step: Duration,
    /// A connected client between runs.
    pub idle: Duration,
    /// How far a run may go past its planned end.
    pub stall: Duration,
    /// How often a run's coordinator looks at its roles.
    pub tick: Duration,
}

impl Default for Deadlines {
    fn default() -> Deadlines {
        Deadlines {
            hello: HELLO_DEADLINE,
            handshake: HANDSHAKE_DEADLINE,
            step: STEP_DEADLINE,
            idle: IDLE_DEADLINE,
            stall: STALL_GRACE,
            tick: TICK,
        }
    }
}

/// Why a control conversation ended.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// A frame was refused (unknown type, over its cap) or reading failed.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The peer said nothing in time.
    #[error("the peer sent nothing for {0:.1} s (the deadline for this step)")]
    Deadline(f64),
    /// The peer hung up.
    #[error("the peer closed the control connection")]
    Closed,
    /// A frame of a type this step does not expect.
    #[error("control frame {got:?} came where {want:?} was expected")]
    OutOfOrder {
        /// What came.
        got: FrameType,
        /// What this step waits for.
        want: FrameType,
    },
    /// A body that does not parse as its type says.
    #[error("control frame {kind:?} does not parse: {reason}")]
    Malformed {
        /// The frame's type.
        kind: FrameType,
        /// The parser's complaint.
        reason: String,
    },
    /// The peer refused, with its reason (control characters removed).
    #[error("the peer says: {0}")]
    Refused(String),
    /// Ctrl-C (SIGTERM, SIGHUP) came while this side waited for the peer.
    #[error("interrupted (Ctrl-C) while waiting for the peer")]
    Interrupted,
    /// The peer began a frame and sent no more of it in time (a peer writes each frame
    /// whole: one cut off is a peer gone quiet, whatever else may still be running).
    #[error(
        "the peer began a frame and sent no more of it for {0:.1} s (the deadline for a step)"
    )]
    Unfinished(f64),
}

impl ControlError {
    /// Whether the peer timing out (rather than refusing) ended it.
    pub fn is_deadline(&self) -> bool {
        matches!(
            self,
            ControlError::Deadline(_) | ControlError::Unfinished(_)
        )
    }
}

/// A stream a control conversation can run over: TCP between hosts, a Unix socket pair
/// to a child process.
pub trait Stream: Read + Write + Send {
    /// Bound the next reads.
    ///
    /// # Errors
    /// As `setsockopt(SO_RCVTIMEO)`.
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
    /// The peer's IP address (None over a Unix socket).
    fn peer_ip(&self) -> Option<IpAddr>;
    /// This end's IP address (None over a Unix socket).
    fn local_ip(&self) -> Option<IpAddr>;
    /// The peer's end and this end of the connection (None over a Unix socket: an
    /// inherited one, whose peer is this program's own parent or child).
    fn addrs(&self) -> Option<(std::net::SocketAddr, std::net::SocketAddr)> {
        None
    }
    /// Close both directions now (wakes a thread blocked reading it).
    fn shutdown(&self);
    /// The descriptor to wait on with `poll(2)`, if there is one (a read's own timeout is
    /// the kernel's tick, 4 to 10 ms, however short the wait asked for).
    fn raw_fd(&self) -> Option<RawFd> {
        None
    }
    /// Told after every read what the conversation holds of the peer's frames (`held`:
    /// a frame's bytes not yet complete and whole frames not yet handled) and the largest
    /// frame body it would take now (`cap`): a test's stream checks that no state of a
    /// conversation holds more than that state allows.
    #[cfg(test)]
    fn note_held(&self, _held: usize, _cap: usize) {}
}

impl Stream for TcpStream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, t)
    }
    fn peer_ip(&self) -> Option<IpAddr> {
        self.peer_addr().ok().map(|a| a.ip())
    }
    fn local_ip(&self) -> Option<IpAddr> {
        self.local_addr().ok().map(|a| a.ip())
    }
    fn addrs(&self) -> Option<(std::net::SocketAddr, std::net::SocketAddr)> {
        self.peer_addr().ok().zip(self.local_addr().ok())
    }
    fn shutdown(&self) {
        let _ = TcpStream::shutdown(self, std::net::Shutdown::Both);
    }
    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.as_raw_fd())
    }
}

impl Stream for UnixStream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        UnixStream::set_read_timeout(self, t)
    }
    fn peer_ip(&self) -> Option<IpAddr> {
        None
    }
    fn local_ip(&self) -> Option<IpAddr> {
        None
    }
    fn shutdown(&self) {
        let _ = UnixStream::shutdown(self, std::net::Shutdown::Both);
    }
    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.as_raw_fd())
    }
}

/// How much a control connection reads at once (and holds, idle).
const READ_CHUNK: usize = 16 << 10;
/// How often a wait for the peer's next frame looks at Ctrl-C.
const INTERRUPT_CHECK: Duration = Duration::from_millis(10);

/// One end of a control conversation: frames out, frames in, each read bounded by a
/// deadline however the peer dribbles its bytes.
pub struct Control {
    stream: Box<dyn Stream>,
    decoder: Decoder,
    queue: VecDeque<Frame>,
    buf: Box<[u8]>,
    /// When the frame now half-received began to arrive.
    begun: Option<Instant>,
    /// How long the rest of a frame begun may take ([`Deadlines::step`]).
    finish_within: Duration,
}

impl Control {
    /// A conversation over `stream`.
    pub fn new(stream: Box<dyn Stream>) -> Control {
        Control {
            stream,
            decoder: Decoder::new(),
            queue: VecDeque::new(),
            buf: vec![0u8; READ_CHUNK].into_boxed_slice(),
            begun: None,
            finish_within: STEP_DEADLINE,
        }
    }

    /// A frame begun must be whole within `d` of its first byte, whatever the wait for
    /// it (a run's coordinator waits for frames for as long as the run lasts; the rest
    /// of a frame is not worth that). [`STEP_DEADLINE`] unless set.
    pub fn finish_frames_within(&mut self, d: Duration) {
        self.finish_within = d;
    }

    /// How long the frame begun may still take (`None`: none is begun).
    ///
    /// # Errors
    /// [`ControlError::Unfinished`] once that is nothing.
    fn frame_left(&self) -> Result<Option<Duration>, ControlError> {
        let Some(begun) = self.begun else {
            return Ok(None);
        };
        let left = self.finish_within.saturating_sub(begun.elapsed());
        if left.is_zero() {
            return Err(ControlError::Unfinished(self.finish_within.as_secs_f64()));
        }
        Ok(Some(left))
    }

    /// Take only frames of `types` from the next header on (see [`Decoder::allow`]).
    pub fn allow(&mut self, types: &[FrameType]) {
        self.decoder.allow(types);
    }

    /// The stream, for its addresses.
    pub fn stream(&self) -> &dyn Stream {
        self.stream.as_ref()
    }

    /// Send a frame with `body` as JSON.
    ///
    /// # Errors
    /// The body over its type's cap; writing failed.
    pub fn send<T: Serialize>(&mut self, kind: FrameType, body: &T) -> Result<(), ControlError> {
        let json = serde_json::to_vec(body).map_err(|e| ControlError::Malformed {
            kind,
            reason: e.to_string(),
        })?;
        let bytes = frame::encode(kind, &json)?;
        self.stream
            .write_all(&bytes)
            .map_err(|e| ControlError::Frame(FrameError::Io(e)))
    }

    /// Tell the peer why this side stops (best effort: it may be gone).
    pub fn refuse(&mut self, why: &str) {
        let _ = self.send(
            FrameType::Error,
            &messages::Refusal {
                message: wire::clean(why, 1000),
            },
        );
    }

    /// The next frame, if one comes within `wait`; `None` when the wait ends first.
    ///
    /// # Errors
    /// A refused frame, the peer closing, reading failing.
    pub fn poll(&mut self, wait: Duration) -> Result<Option<Frame>, ControlError> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(f) = self.queue.pop_front() {
                return Ok(Some(f));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let frame_left = self.frame_left()?;
            if left.is_zero() {
                return Ok(None);
            }
            let left = frame_left
                .map_or(left, |f| left.min(f))
                .max(Duration::from_millis(1));
            if let Some(fd) = self.stream.raw_fd() {
                // Waited for to the millisecond (a short wait, a run's tick, is not
                // rounded up to the kernel's).
                if !crate::sys::wait::poll_one(fd, true, Some(left)).map_err(FrameError::Io)? {
                    continue;
                }
            }
            // A zero timeout means "forever" to SO_RCVTIMEO: never pass one. (After the
            // poll too: a wake-up by a signal must not make the read wait for ever.)
            self.stream
                .set_read_timeout(Some(left))
                .map_err(FrameError::Io)?;
            match self.stream.read(&mut self.buf) {
                Ok(0) => return Err(ControlError::Closed),
                Ok(n) => {
                    let frames = self.decoder.feed_all(&self.buf[..n])?;
                    if !frames.is_empty() || self.decoder.is_idle() {
                        self.begun = None;
                    }
                    if !self.decoder.is_idle() {
                        self.begun.get_or_insert_with(Instant::now);
                    }
                    self.queue.extend(frames);
                    #[cfg(test)]
                    self.stream.note_held(
                        self.decoder.held()
                            + self.queue.iter().map(|f| f.body.len()).sum::<usize>(),
                        self.decoder.largest_allowed(),
                    );
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    return Err(ControlError::Closed)
                }
                Err(e) => return Err(FrameError::Io(e).into()),
            }
        }
    }

    /// As [`Control::poll`], but a Ctrl-C ends the wait at once: a peer that never
    /// answers must not keep a stopping process waiting for its deadline. (A frame
    /// already here is still taken.) The wait sleeps in `poll(2)` on the connection and
    /// the process's wake descriptor together, so an idle conversation costs no CPU
    /// however long it idles (a server holds hundreds of them); without a descriptor to
    /// wait on, it looks at the flag every [`INTERRUPT_CHECK`].
    ///
    /// # Errors
    /// [`ControlError::Interrupted`]; as [`Control::poll`].
    fn poll_unless_interrupted(&mut self, wait: Duration) -> Result<Option<Frame>, ControlError> {
        let deadline = Instant::now() + wait;
        let fds = self.stream.raw_fd().zip(crate::interrupt::wake_fd());
        loop {
            if let Some(f) = self.queue.pop_front() {
                return Ok(Some(f));
            }
            if crate::interrupt::requested() {
                return Err(ControlError::Interrupted);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let frame_left = self.frame_left()?;
            if left.is_zero() {
                return Ok(None);
            }
            if let Some((fd, wake)) = fds {
                match crate::sys::wait::poll_or_wake(
                    fd,
                    true,
                    wake,
                    frame_left.map_or(left, |f| left.min(f)),
                )
                .map_err(FrameError::Io)?
                {
                    // The frame begun is out of time: said at the loop's top.
                    Woken::TimedOut if frame_left.is_some_and(|f| f < left) => continue,
                    Woken::TimedOut => return Ok(None),
                    Woken::Wake => return Err(ControlError::Interrupted),
                    // Bytes (or the end) came: read them, and the rest of a frame
                    // begun, for no longer than a check's interval.
                    Woken::Ready => {}
                }
            }
            if let Some(f) = self.poll(left.min(INTERRUPT_CHECK))? {
                return Ok(Some(f));
            }
        }
    }

    /// The next frame, which must come within `wait` (counted from now, however many
    /// pieces it arrives in).
    ///
    /// # Errors
    /// [`ControlError::Deadline`] when it does not, [`ControlError::Interrupted`] when
    /// Ctrl-C comes first; as [`Control::poll`].
    pub fn next(&mut self, wait: Duration) -> Result<Frame, ControlError> {
        self.poll_unless_interrupted(wait)?
            .ok_or(ControlError::Deadline(wait.as_secs_f64()))
    }

    /// The next frame as a `T`, which must be a frame of type `want` and come within
    /// `wait`. A refusal from the peer is returned as [`ControlError::Refused`].
    ///
    /// # Errors
    /// As [`Control::next`], a frame of another type, a body that does not parse.
    pub fn expect<T: DeserializeOwned>(
        &mut self,
        want: FrameType,
        wait: Duration,
    ) -> Result<T, ControlError> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let f = self
                .poll_unless_interrupted(left)?
                .ok_or(ControlError::Deadline(wait.as_secs_f64()))?;
            // A role's last signal can trail its run: outside a run, signals mean nothing.
            if f.kind == FrameType::Signal && want != FrameType::Signal {
                continue;
            }
            return parse(&f, want);
        }
    }
}

/// The body of `f` as a `T`, if `f` is of type `want`.
///
/// # Errors
/// A refusal (the peer's reason), another type, a body that does not parse.
pub fn parse<T: DeserializeOwned>(f: &Frame, want: FrameType) -> Result<T, ControlError> {
    if f.kind == FrameType::Error && want != FrameType::Error {
        let r: messages::Refusal = parse(f, FrameType::Error)?;
        return Err(ControlError::Refused(wire::clean(&r.message, 1000)));
    }
    if f.kind != want {
        return Err(ControlError::OutOfOrder { got: f.kind, want });
    }
    serde_json::from_slice(&f.body).map_err(|e| ControlError::Malformed {
        kind: f.kind,
        reason: wire::clean(&e.to_string(), 200),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Control, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        (Control::new(Box::new(a)), b)
    }

    /// A stream whose reads fail with one error kind, then report end of file.
    struct Failing(Option<io::ErrorKind>);

    impl Read for Failing {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            match self.0.take() {
                Some(kind) => Err(io::Error::from(kind)),
                None => Ok(0),
            }
        }
    }

    impl Write for Failing {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Stream for Failing {
        fn set_read_timeout(&self, _: Option<Duration>) -> io::Result<()> {
            Ok(())
        }
        fn peer_ip(&self) -> Option<IpAddr> {
            None
        }
        fn local_ip(&self) -> Option<IpAddr> {
            None
        }
        fn shutdown(&self) {}
    }

    #[test]
    fn a_read_error_ends_the_conversation_and_a_timeout_or_interrupt_retries() {
        let wait = Duration::from_secs(5);
        let poll = |kind| Control::new(Box::new(Failing(Some(kind)))).poll(wait);
        let t = Instant::now();
        // Neither a retry nor a close: the error itself, at once.
        let got = poll(io::ErrorKind::PermissionDenied);
        assert!(
            matches!(&got, Err(ControlError::Frame(FrameError::Io(e))) if e.kind() == io::ErrorKind::PermissionDenied),
            "{got:?}"
        );
        assert!(matches!(
            poll(io::ErrorKind::ConnectionReset),
            Err(ControlError::Closed)
        ));
        // A retried read then meets the end of the stream.
        for kind in [
            io::ErrorKind::WouldBlock,
            io::ErrorKind::TimedOut,
            io::ErrorKind::Interrupted,
        ] {
            assert!(matches!(poll(kind), Err(ControlError::Closed)), "{kind:?}");
        }
        assert!(t.elapsed() < wait, "no error waited for the deadline");
    }

    #[test]
    fn a_frame_dribbled_byte_by_byte_still_meets_its_deadline() {
        let (mut c, mut peer) = pair();
        let bytes = frame::encode(FrameType::Bye, b"{}").unwrap();
        let writer = std::thread::spawn(move || {
            for b in bytes {
                if peer.write_all(&[b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        let t = Instant::now();
        let got = c.next(Duration::from_millis(400));
        assert!(matches!(got, Err(ControlError::Deadline(_))), "{got:?}");
        // At the deadline, not at the next byte after it (600 ms).
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(390) && waited < Duration::from_millis(550),
            "{waited:?}"
        );
        drop(c);
        let _ = writer.join();
    }

    #[test]
    fn a_frame_cut_off_ends_a_wait_of_many_short_polls_at_its_own_deadline() {
        // A run's coordinator polls every tick for as long as the run lasts: the rest of
        // a frame begun is waited for a step, not the run.
        let (mut c, mut peer) = pair();
        c.finish_frames_within(Duration::from_millis(300));
        let bytes = frame::encode(FrameType::Signal, &[b' '; 64]).unwrap();
        // A whole frame, then (after more than the deadline: a frame's own time counts
        // from its first byte, not the conversation's) the header and a few bytes of
        // the next.
        peer.write_all(&bytes).unwrap();
        let first = c.poll(Duration::from_secs(1)).unwrap();
        assert_eq!(first.map(|f| f.kind), Some(FrameType::Signal));
        std::thread::sleep(Duration::from_millis(400));
        peer.write_all(&bytes[..frame::HEADER + 3]).unwrap();
        let t = Instant::now();
        let got = loop {
            match c.poll(Duration::from_millis(10)) {
                Ok(None) if t.elapsed() < Duration::from_secs(5) => {}
                other => break other,
            }
        };
        let waited = t.elapsed();
        assert!(matches!(got, Err(ControlError::Unfinished(_))), "{got:?}");
        assert!(got.unwrap_err().is_deadline());
        assert!(
            waited >= Duration::from_millis(290) && waited < Duration::from_secs(2),
            "{waited:?}"
        );
        // One dribbled slower than a poll but within the frame's deadline is taken.
        let (mut c, mut peer) = pair();
        c.finish_frames_within(Duration::from_secs(5));
        let writer = std::thread::spawn(move || {
            for piece in bytes.chunks(20) {
                peer.write_all(piece).unwrap();
                std::thread::sleep(Duration::from_millis(30));
            }
            peer
        });
        let t = Instant::now();
        let got = loop {
            match c.poll(Duration::from_millis(10)) {
                Ok(None) if t.elapsed() < Duration::from_secs(5) => {}
                other => break other,
            }
        };
        assert_eq!(got.unwrap().map(|f| f.kind), Some(FrameType::Signal));
        drop(writer.join());
    }

    #[test]
    fn frames_sent_arrive_whole_and_a_refusal_carries_its_cleaned_reason() {
        let (mut c, peer) = pair();
        c.send(FrameType::Start, &messages::Start {}).unwrap();
        c.refuse("no\u{1b}[31m thanks");
        let mut peer = Control::new(Box::new(peer));
        let start: messages::Start = peer
            .expect(FrameType::Start, Duration::from_secs(1))
            .unwrap();
        assert_eq!(start, messages::Start {});
        match peer.expect::<messages::Start>(FrameType::Start, Duration::from_secs(1)) {
            Err(ControlError::Refused(why)) => assert_eq!(why, "no\\x1b[31m thanks"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_trailing_signal_is_skipped_unless_a_signal_is_wanted() {
        let (mut c, peer) = pair();
        let mut p = Control::new(Box::new(peer));
        let sig = messages::SignalMsg::of(0, crate::workload::PeerSignal::SenderDone);
        p.send(FrameType::Signal, &sig).unwrap();
        p.send(FrameType::Start, &messages::Start {}).unwrap();
        p.send(FrameType::Signal, &sig).unwrap();
        let wait = Duration::from_secs(1);
        assert_eq!(
            c.expect::<messages::Start>(FrameType::Start, wait).unwrap(),
            messages::Start {}
        );
        assert_eq!(
            c.expect::<messages::SignalMsg>(FrameType::Signal, wait)
                .unwrap(),
            sig
        );
        assert!(ControlError::Deadline(1.0).is_deadline());
        assert!(!ControlError::Closed.is_deadline());
    }

    #[test]
    fn a_reset_connection_is_a_closed_one_and_tcp_reads_keep_their_deadline() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let t = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        // A silent peer that hangs up after 1 s: a read without its deadline would end
        // there, closed, instead of at the deadline with nothing.
        let silent = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (quiet, _) = l.accept().unwrap();
        let hangup = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            drop(quiet);
        });
        let started = Instant::now();
        let got = Control::new(Box::new(silent)).poll(Duration::from_millis(200));
        assert!(matches!(got, Ok(None)), "{got:?}");
        assert!(started.elapsed() < Duration::from_millis(450));
        hangup.join().unwrap();
        let mut c = Control::new(Box::new(t));
        // Unread data and SO_LINGER 0: the peer's close is a reset.
        socket2::SockRef::from(&s)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(s);
        std::thread::sleep(Duration::from_millis(50));
        assert!(matches!(
            c.poll(Duration::from_secs(1)),
            Err(ControlError::Closed)
        ));
    }

    #[test]
    fn shutting_a_control_stream_down_ends_the_peers_reads() {
        use std::io::Read;
        let (a, mut b) = UnixStream::pair().unwrap();
        // Bounded reads: without the shutdown they fail instead of waiting forever.
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        Stream::shutdown(&a);
        let mut buf = [0u8; 1];
        assert_eq!(b.read(&mut buf).unwrap(), 0);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let t = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, from) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        assert_eq!(Stream::peer_ip(&t), Some(from.ip()));
        assert_eq!(Stream::local_ip(&t), Some(from.ip()));
        assert_eq!(Stream::peer_ip(&a), None);
        Stream::shutdown(&t);
        assert_eq!(s.read(&mut buf).unwrap(), 0);
    }

    #[test]
    fn refusals_wrong_types_and_bad_bodies_are_told_apart() {
        let (mut c, mut peer) = pair();
        let refusal = frame::encode(FrameType::Error, br#"{"message":"busy\u001b[2J"}"#).unwrap();
        peer.write_all(&refusal).unwrap();
        match c.expect::<messages::Start>(FrameType::Start, Duration::from_secs(1)) {
            Err(ControlError::Refused(m)) => assert_eq!(m, "busy\\x1b[2J"),
            other => panic!("{other:?}"),
        }
        peer.write_all(&frame::encode(FrameType::Bye, b"{}").unwrap())
            .unwrap();
        assert!(matches!(
            c.expect::<messages::Start>(FrameType::Start, Duration::from_secs(1)),
            Err(ControlError::OutOfOrder {
                got: FrameType::Bye,
                want: FrameType::Start
            })
        ));
        peer.write_all(&frame::encode(FrameType::Start, b"[1,").unwrap())
            .unwrap();
        assert!(matches!(
            c.expect::<messages::Start>(FrameType::Start, Duration::from_secs(1)),
            Err(ControlError::Malformed { .. })
        ));
        drop(peer);
        assert!(matches!(
            c.next(Duration::from_secs(1)),
            Err(ControlError::Closed)
        ));
    }
}

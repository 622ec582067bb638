//! `stream`: one-way bulk transfer of `size`-byte messages.
//!
//! The sender writes whole messages (looping over partial writes on byte streams) until
//! its stop condition, then signals the end in the transport's own way (shutdown, close,
//! an empty datagram). The receiver reads with a `size`-byte buffer until the end. Each
//! side's interval runs from the shared start to its own last byte, so the receiver's
//! interval includes draining what was still buffered: throughput is what was delivered.
//!
//! Unreliable transports (UDP) can lose the end marker itself: the sender repeats it until
//! the receiver confirms over the peer link, and a receiver that hears nothing for
//! [`QUIET`] after the sender said it was done stops on its own.
//!
//! How the sender hands the kernel its bytes is `--send`: `write` (the engine's sends),
//! `sendfile` (from a file of `size` bytes on tmpfs, made and unlinked at once),
//! `splice` (the buffer's pages `vmsplice`d into a pipe, then `splice`d to the
//! descriptor) or `zerocopy` (`send` with `MSG_ZEROCOPY`, completions read from the
//! socket's error queue). How the receiver takes them is `--recv`: `read`, or
//! `zerocopy` (`TCP_ZEROCOPY_RECEIVE` maps whole received pages; what cannot be mapped
//! is read). Each side counts what its method did ([`SendCounts`], [`RecvCounts`]);
//! the system calls are in `crate::sys::zerocopy`.

use std::io::{self, ErrorKind};
use std::time::{Duration, Instant};

use std::os::fd::RawFd;
use std::sync::Arc;

use super::{
    buffer, one_way_tally, repeat_end_marker, send_all, Meter, PeerSignal, Role, Roles, Side,
    SideReport, Spec, Stop, TableKind, Tally, Wiring, Workload, SEND_PIECE,
};
use crate::engine::EngineKind;
use crate::interrupt;
use crate::measure::calls::{Phases, RecvCounts, SendCounts, ZerocopyCounts};
use crate::measure::live::Publisher;
use crate::scenario::Scenario;
use crate::sys::zerocopy as sys;
use crate::transport::Conn;
use crate::transport::Framing;
use crate::transport::TransportKind;
use crate::vocab::units::format_bytes;
use crate::vocab::Diagnosis;
use crate::vocab::{RecvMethod, SendMethod};

/// How long a UDP receiver waits in silence before it checks whether the sender is done.
pub const QUIET: Duration = Duration::from_millis(50);

/// The stream workload for one scenario.
#[derive(Clone, Debug)]
pub struct Stream {
    /// Message size in bytes.
    pub size: usize,
    /// When the sender stops.
    pub stop: Stop,
    /// Message or byte-stream transport.
    pub framing: Framing,
    /// Whether the transport delivers everything.
    pub reliable: bool,
    /// How the sender sends.
    pub send: SendMethod,
    /// How the receiver receives.
    pub recv: RecvMethod,
    /// Messages per call (`--batch`): datagrams per `send_batch`/`recv_batch`, or a byte
    /// stream's writes in flight at once (`send_repeated`, io-uring).
    pub batch: usize,
}

/// How long a zero-copy sender waits, after its last send, for the kernel to report the
/// sends still outstanding (outside the measured interval).
pub const COMPLETION_WAIT: Duration = Duration::from_secs(1);
/// A zero-copy sender reads its error queue after this many sends (and whenever the
/// kernel refuses a send with ENOBUFS): the kernel merges consecutive notifications, so
/// reading now and then costs few system calls.
const REAP_EVERY: u64 = 16;
/// How long a zero-copy sender retries sends the kernel refuses with ENOBUFS without a
/// single completion coming in before it gives up.
const ENOBUFS_PATIENCE: Duration = Duration::from_secs(1);
/// sendfile and splice hand a socket at most this many pipe buffers (pages) per
/// `sendmsg`: a larger message reaches a datagram socket as several datagrams.
const SPLICE_PAGES_PER_SEND: usize = 16;

impl Stream {
    /// Messages in `bytes` received by `reads` reads: one per read of a message
    /// transport, bytes / size (rounded up) of a byte stream.
    fn messages_in(&self, bytes: u64, reads: u64) -> u64 {
        match self.framing {
            Framing::Message => reads,
            Framing::Stream => bytes.div_ceil(self.size as u64),
        }
    }

    /// How many messages between checks of the clock and the Ctrl-C flag: about every
    /// 16 KiB of data, so the check costs nothing next to the system calls.
    fn check_every(&self) -> u64 {
        (16384 / self.size.max(1)).max(1) as u64
    }
}

impl Workload for Stream {
    fn sender(&self, mut side: Side) -> io::Result<SideReport> {
        let buf = buffer(self.size, 0xA5)?;
        let mut how = Sending::new(self.send, side.conn.as_ref(), &buf)?;
        let (limit_msgs, limit_bytes) = match self.stop {
            Stop::Count(n) => (n, u64::MAX),
            Stop::Bytes(b) => (b.div_ceil(self.size as u64), b),
            Stop::Duration(_) => (u64::MAX, u64::MAX),
        };
        let check_every = self.check_every();
        let meter = Meter::start(&side.start);
        let t0 = meter.t0();
        let deadline = self.stop.deadline(t0);
        let mut live = Publisher::new(side.start.live(), Role::Sender, side.conn.send_fd());
        let (mut bytes, mut messages, mut interrupted) = (0u64, 0u64, false);
        let mut until_check = check_every;
        let mut calls = 0u64;
        while messages < limit_msgs {
            let len = (limit_bytes - bytes).min(self.size as u64) as usize;
            let sent = if self.batch > 1 {
                // Whole messages only: a short last one (--bytes) goes on its own.
                let n = if len == self.size {
                    let whole = (limit_bytes - bytes) / self.size as u64;
                    (self.batch as u64)
                        .min(limit_msgs - messages)
                        .min(whole.max(1))
                } else {
                    1
                };
                let (b, m) = self.send_many(side.conn.as_mut(), &buf[..len], n as usize)?;
                calls += m.1;
                bytes += b;
                m.0
            } else {
                how.send(side.conn.as_mut(), &buf[..len], self.framing)?;
                bytes += len as u64;
                1
            };
            messages += sent;
            until_check = until_check.saturating_sub(sent);
            if until_check == 0 {
                until_check = check_every;
                live.publish(bytes, messages);
                if interrupt::requested() {
                    interrupted = true;
                    break;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
            }
        }
        let measured = meter.stop(None, side.conn.as_ref());
        live.last(bytes, messages);
        // Outside the interval: the completions of zero-copy sends still outstanding.
        let send = how.finish()?;
        drop(how);
        if send.zerocopy.is_some_and(|z| z.completed < z.sends) {
            // Sends the kernel has not completed may still read the buffer: keep it (one
            // message buffer, once) rather than free memory the kernel may send from.
            std::mem::forget(buf);
        }
        side.link.signal(PeerSignal::SenderDone);
        // Closing: the end of data (shutdown, close, end marker) and releasing the socket.
        // Between the two, outside the close time, a TCP sender waits for what it sent to
        // be acknowledged and reads its TCP_INFO.
        let closing = Instant::now();
        side.conn.finish()?;
        let ended = closing.elapsed();
        let tcp = crate::measure::tcp_info::at_end(side.conn.send_fd());
        let close = if self.reliable {
            let releasing = Instant::now();
            drop(side.conn);
            ended + releasing.elapsed()
        } else {
            repeat_end_marker(&mut side);
            ended
        };
        Ok(SideReport {
            tcp,
            bytes,
            messages,
            interrupted,
            close: Some(close),
            send: Some(send),
            calls: self.calls(calls, &measured),
            ..measured
        })
    }

    fn receiver(&self, mut side: Side) -> io::Result<SideReport> {
        let mut buf = buffer(self.size, 0)?;
        if self.recv == RecvMethod::Zerocopy {
            return self.receive_mapped(side, &mut buf);
        }
        if !self.reliable {
            side.conn.set_recv_timeout(Some(QUIET))?;
        }
        let meter = Meter::start(&side.start);
        // A test can make this receiver stop reading (the peer that stops reading).
        crate::testhooks::hold("receive");
        let t0 = meter.t0();
        let mut live = Publisher::new(side.start.live(), Role::Receiver, None);
        let (mut bytes, mut reads, mut calls) = (0u64, 0u64, 0u64);
        let mut quiet = Duration::ZERO;
        let batched = self.batch > 1 && self.framing == Framing::Message;
        let mut many = if batched {
            Some((buffer(self.size * self.batch, 0)?, vec![0usize; self.batch]))
        } else {
            None
        };
        loop {
            let got = match &mut many {
                Some((store, lens)) => {
                    let mut bufs: Vec<&mut [u8]> = store.chunks_mut(self.size).collect();
                    side.conn.recv_batch(&mut bufs, lens).map(|k| {
                        let lens = &lens[..k];
                        // Everything up to the end marker (an empty message).
                        let end = lens.iter().position(|&l| l == 0);
                        let data = &lens[..end.unwrap_or(k)];
                        reads += data.len() as u64;
                        bytes += data.iter().map(|&l| l as u64).sum::<u64>();
                        if end.is_some() {
                            // The call that brought the marker brought data too: it
                            // counts (a late receiver gets the last batch and the
                            // marker in one call).
                            calls += u64::from(!data.is_empty());
                            0
                        } else {
                            k
                        }
                    })
                }
                None => match self.framing {
                    Framing::Stream => side.conn.recv_stream(&mut buf),
                    Framing::Message => side.conn.recv(&mut buf),
                }
                .inspect(|&n| {
                    bytes += n as u64;
                    reads += u64::from(n > 0);
                }),
            };
            match got {
                Ok(0) => break,
                Ok(_) => {
                    // Only a call that brought data counts (as rate's receiver counts).
                    calls += 1;
                    if live.is_on() {
                        live.publish(bytes, self.messages_in(bytes, reads));
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e)
                    if !self.reliable
                        && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    if side.link.has(PeerSignal::SenderDone) {
                        // The end marker was lost: the last datagram came QUIET ago.
                        quiet = QUIET;
                        break;
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let ended = Instant::now().checked_sub(quiet).unwrap_or(t0).max(t0);
        let measured = meter.stop(Some(ended), side.conn.as_ref());
        side.link.signal(PeerSignal::ReceiverDone);
        let messages = self.messages_in(bytes, reads);
        Ok(SideReport {
            bytes,
            messages,
            calls: self.calls(calls, &measured),
            recv: Some(RecvCounts {
                method: RecvMethod::Read,
                bytes_mapped: 0,
                bytes_copied: bytes,
                map_calls: None,
            }),
            ..measured
        })
    }
}

impl Stream {
    /// Send `n` copies of `msg` in as few calls as the connection can: a byte stream's
    /// writes in flight at once (`send_repeated`), datagrams per `send_batch`. Returns
    /// the bytes the kernel reported sent, and (messages, calls).
    fn send_many(
        &self,
        conn: &mut dyn Conn,
        msg: &[u8],
        n: usize,
    ) -> io::Result<(u64, (u64, u64))> {
        match self.framing {
            Framing::Stream => {
                let r = conn.send_repeated(msg, n)?;
                Ok((r.bytes, (n as u64, r.calls)))
            }
            Framing::Message => {
                let msgs = vec![msg; n];
                let sent = loop {
                    match conn.send_batch(&msgs) {
                        Ok(0) => return Err(ErrorKind::WriteZero.into()),
                        Ok(k) => break k,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                };
                Ok(((sent * msg.len()) as u64, (sent as u64, 1)))
            }
        }
    }

    /// The calls (batches handed to the kernel) a role made, for messages per call:
    /// with `--batch`, those it counted; on io-uring, the ring's submissions; else
    /// unknown.
    fn calls(&self, counted: u64, measured: &SideReport) -> Option<u64> {
        match &measured.io_uring {
            Some(u) => Some(u.submissions),
            None => (self.batch > 1).then_some(counted),
        }
    }

    /// `--recv zerocopy`: TCP_ZEROCOPY_RECEIVE maps whole received pages into a region
    /// mapped on the socket (each call replaces what the last one mapped); the bytes it
    /// cannot map (the hint it returns) are read with recv(2) into `buf`. The receiver
    /// no more looks at the mapped bytes than the read receiver looks at what it read.
    fn receive_mapped(&self, mut side: Side, buf: &mut [u8]) -> io::Result<SideReport> {
        let fd = side.conn.recv_fd().ok_or_else(|| {
            io::Error::new(ErrorKind::Unsupported, "--recv zerocopy needs a TCP socket")
        })?;
        // Before the start line: a refusal ends this side before anything is measured.
        page_sized_segments(fd)?;
        let mut region = sys::ZerocopyReceiver::new(fd, mapped_region(self.size))?;
        // Wake for a region's worth (or the end, or a closing window), not for every
        // segment: a receive of less than a page maps nothing.
        sys::set_receive_low_water(fd, region.size().min(LOW_WATER))?;
        let meter = Meter::start(&side.start);
        let mut live = Publisher::new(side.start.live(), Role::Receiver, None);
        let (mut mapped, mut copied, mut calls) = (0u64, 0u64, 0u64);
        let mut readable = false;
        loop {
            calls += 1;
            if live.is_on() {
                let got = mapped + copied;
                live.publish(got, got.div_ceil(self.size as u64));
            }
            let m = match region.receive() {
                Ok(m) => m,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // EIO: nothing queued and the peer has ended the data.
                Err(e) if e.raw_os_error() == Some(nix::libc::EIO) => {
                    readable = true;
                    sys::Mapped::default()
                }
                Err(e) => return Err(e),
            };
            mapped += m.mapped as u64;
            if m.skip > 0 {
                let want = m.skip.min(buf.len());
                match side.conn.recv(&mut buf[..want]) {
                    Ok(0) => break,
                    Ok(n) => copied += n as u64,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
                readable = false;
                continue;
            }
            if m.mapped > 0 {
                readable = false;
                continue;
            }
            if readable {
                // Readable, yet nothing to map or to read past: the end of the data (or
                // bytes only recv takes).
                match side.conn.recv(buf) {
                    Ok(0) => break,
                    Ok(n) => copied += n as u64,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
                readable = false;
                continue;
            }
            readable = sys::wait_readable(fd, Duration::from_millis(50))?;
        }
        let measured = meter.stop(None, side.conn.as_ref());
        side.link.signal(PeerSignal::ReceiverDone);
        drop(region);
        let bytes = mapped + copied;
        Ok(SideReport {
            bytes,
            messages: bytes.div_ceil(self.size as u64),
            recv: Some(RecvCounts {
                method: RecvMethod::Zerocopy,
                bytes_mapped: mapped,
                bytes_copied: copied,
                map_calls: Some(calls),
            }),
            ..measured
        })
    }
}

/// The most a zero-copy receiver waits to have queued before it wakes (SO_RCVLOWAT).
const LOW_WATER: usize = 512 << 10;

/// The region a zero-copy receiver maps: a message rounded up to whole pages, at least
/// 512 KiB (so one call can map many segments), at most 64 MiB.
fn mapped_region(size: usize) -> usize {
    let page = sys::page_size();
    (size.div_ceil(page) * page).clamp(512 << 10, 64 << 20)
}

/// TCP_ZEROCOPY_RECEIVE maps only whole pages: segments whose payload is not a multiple
/// of the page size never line up with pages, so the receive would map nothing. Refuse
/// such a connection with what to change.
fn page_sized_segments(fd: RawFd) -> io::Result<()> {
    let p = sys::segment_payload(fd)?;
    let page = sys::page_size() as u32;
    if p.advmss > 0 && p.advmss % page == 0 {
        return Ok(());
    }
    // The headers every segment carries: IP, TCP and the timestamp option.
    let overhead = p.pmtu.saturating_sub(p.advmss);
    Err(io::Error::new(
        ErrorKind::Unsupported,
        format!(
            "--recv zerocopy maps whole pages (TCP_ZEROCOPY_RECEIVE), but segments to this receiver carry {} bytes \
             (the MSS it advertised{}, path MTU {}), not a multiple of the {page}-byte page, so nothing could be \
             mapped: use a link whose MTU gives page-sized segments, MTU = {page}*k + {overhead} (e.g. `ip link set \
             DEV mtu {}`), or --recv read",
            p.advmss,
            if p.timestamps {
                " less 12 bytes of TCP timestamps"
            } else {
                ""
            },
            p.pmtu,
            page + overhead
        ),
    ))
}

/// How the sender hands over its bytes, and what it counted doing so.
enum Sending {
    /// The engine's send.
    Write,
    /// sendfile(2) from a tmpfs file that holds one message.
    Sendfile {
        fd: RawFd,
        file: std::fs::File,
        calls: u64,
    },
    /// vmsplice(2) into a pipe, splice(2) out of it.
    Splice {
        fd: RawFd,
        pipe: sys::SplicePipe,
        calls: u64,
    },
    /// send(2) with MSG_ZEROCOPY.
    Zerocopy {
        fd: RawFd,
        counts: ZerocopyCounts,
        calls: u64,
    },
}

fn truncated(n: usize, len: usize) -> io::Error {
    io::Error::other(format!("message truncated: sent {n} of {len} bytes"))
}

fn interrupted_in_message() -> io::Error {
    io::Error::new(
        ErrorKind::Interrupted,
        "interrupted in the middle of a message",
    )
}

/// The file sendfile sends from: `buf`'s bytes in a file on tmpfs (/dev/shm) with no
/// name (O_TMPFILE, or made and unlinked at once), so nothing is left behind even if the
/// process is killed.
fn tmpfs_file(buf: &[u8]) -> io::Result<std::fs::File> {
    use std::io::Write;
    let dir = std::path::Path::new("/dev/shm");
    let mut file = tempfile::tempfile_in(dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "--send sendfile: cannot make its {} source file on tmpfs in {}: {e}",
                format_bytes(buf.len() as u64),
                dir.display()
            ),
        )
    })?;
    file.write_all(buf).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "--send sendfile: cannot fill its {} source file in {} (is /dev/shm full?): {e}",
                format_bytes(buf.len() as u64),
                dir.display()
            ),
        )
    })?;
    Ok(file)
}

impl Sending {
    /// Set `method` up for a sender of `buf` on `conn`.
    fn new(method: SendMethod, conn: &dyn Conn, buf: &[u8]) -> io::Result<Sending> {
        if method == SendMethod::Write {
            return Ok(Sending::Write);
        }
        let fd = conn.send_fd().ok_or_else(|| {
            io::Error::new(
                ErrorKind::Unsupported,
                "this transport has no descriptor to send to",
            )
        })?;
        Ok(match method {
            SendMethod::Write => Sending::Write,
            SendMethod::Sendfile => Sending::Sendfile {
                fd,
                file: tmpfs_file(buf)?,
                calls: 0,
            },
            SendMethod::Splice => Sending::Splice {
                fd,
                // The whole message in one fill where the kernel allows a pipe that large.
                pipe: sys::SplicePipe::new(buf.len().clamp(1, SEND_PIECE))?,
                calls: 0,
            },
            SendMethod::Zerocopy => {
                sys::enable_zerocopy(fd).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!(
                            "--send zerocopy: the kernel refuses SO_ZEROCOPY on this socket: {e}"
                        ),
                    )
                })?;
                Sending::Zerocopy {
                    fd,
                    counts: ZerocopyCounts::default(),
                    calls: 0,
                }
            }
        })
    }

    /// Send one whole message (byte streams: in pieces of at most [`SEND_PIECE`], with a
    /// check for Ctrl-C between them; message transports: in one call).
    fn send(&mut self, conn: &mut dyn Conn, msg: &[u8], framing: Framing) -> io::Result<()> {
        let len = msg.len();
        let piece = |off: usize| match framing {
            Framing::Stream => (len - off).min(SEND_PIECE),
            Framing::Message => len,
        };
        let check = |off: usize| {
            if off > 0 && interrupt::requested() {
                Err(interrupted_in_message())
            } else {
                Ok(())
            }
        };
        match self {
            Sending::Write => send_all(conn, msg, framing),
            Sending::Sendfile { fd, file, calls } => {
                let mut off = 0i64;
                while (off as usize) < len {
                    check(off as usize)?;
                    *calls += 1;
                    let count = piece(off as usize);
                    match sys::sendfile(*fd, file, &mut off, count) {
                        Ok(0) => return Err(ErrorKind::WriteZero.into()),
                        Ok(n) if framing == Framing::Message && n != len => {
                            return Err(truncated(n, len))
                        }
                        Ok(_) => {}
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
            Sending::Splice { fd, pipe, calls } => {
                let mut off = 0;
                while off < len {
                    check(off)?;
                    let chunk = piece(off).min(pipe.capacity());
                    *calls += 1;
                    let filled = match pipe.fill(&msg[off..off + chunk]) {
                        Ok(0) => return Err(ErrorKind::WriteZero.into()),
                        Ok(n) => n,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e),
                    };
                    let mut left = filled;
                    while left > 0 {
                        *calls += 1;
                        match pipe.drain_to(*fd, left) {
                            Ok(0) => return Err(ErrorKind::WriteZero.into()),
                            Ok(n) if framing == Framing::Message && n != len => {
                                return Err(truncated(n, len))
                            }
                            Ok(n) => left -= n,
                            Err(e) if e.kind() == ErrorKind::Interrupted => {}
                            Err(e) => return Err(e),
                        }
                    }
                    off += filled;
                }
                Ok(())
            }
            Sending::Zerocopy { fd, counts, calls } => {
                let fd = *fd;
                let mut off = 0;
                let mut refused_since: Option<Instant> = None;
                while off < len {
                    check(off)?;
                    *calls += 1;
                    match sys::send_zerocopy(fd, &msg[off..off + piece(off)]) {
                        Ok(0) => return Err(ErrorKind::WriteZero.into()),
                        Ok(n) if framing == Framing::Message && n != len => {
                            return Err(truncated(n, len))
                        }
                        Ok(n) => {
                            off += n;
                            counts.sends += 1;
                            refused_since = None;
                            if counts.sends % REAP_EVERY == 0 {
                                reap(fd, counts)?;
                            }
                        }
                        Err(e) if e.raw_os_error() == Some(nix::libc::ENOBUFS) => {
                            // The notifications not yet read fill the socket's option
                            // memory: read them, and if none has come, wait for one.
                            counts.enobufs += 1;
                            let since = *refused_since.get_or_insert_with(Instant::now);
                            if reap(fd, counts)? > 0 {
                                refused_since = None;
                            } else if since.elapsed() > ENOBUFS_PATIENCE {
                                return Err(io::Error::other(format!(
                                    "the kernel refused MSG_ZEROCOPY sends (ENOBUFS) for {} s and reported no \
                                     completion: its notifications fill the socket's option memory; raise \
                                     net.core.optmem_max",
                                    ENOBUFS_PATIENCE.as_secs()
                                )));
                            } else {
                                sys::wait_error_queue(fd, Duration::from_millis(10))?;
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
        }
    }

    /// What the method did. A zero-copy sender first waits up to [`COMPLETION_WAIT`] for
    /// the completions still outstanding.
    fn finish(&mut self) -> io::Result<SendCounts> {
        Ok(match self {
            Sending::Write => SendCounts {
                method: SendMethod::Write,
                calls: None,
                zerocopy: None,
            },
            Sending::Sendfile { calls, .. } => SendCounts {
                method: SendMethod::Sendfile,
                calls: Some(*calls),
                zerocopy: None,
            },
            Sending::Splice { calls, .. } => SendCounts {
                method: SendMethod::Splice,
                calls: Some(*calls),
                zerocopy: None,
            },
            Sending::Zerocopy { fd, counts, calls } => {
                let until = Instant::now() + COMPLETION_WAIT;
                loop {
                    reap(*fd, counts)?;
                    let now = Instant::now();
                    if counts.completed >= counts.sends || now >= until {
                        break;
                    }
                    sys::wait_error_queue(*fd, (until - now).min(Duration::from_millis(50)))?;
                }
                SendCounts {
                    method: SendMethod::Zerocopy,
                    calls: Some(*calls),
                    zerocopy: Some(*counts),
                }
            }
        })
    }
}

/// Read every notification waiting on the error queue into `counts`: how many sends
/// they completed.
fn reap(fd: RawFd, counts: &mut ZerocopyCounts) -> io::Result<u64> {
    let mut done = 0;
    while let Some(c) = sys::reap_completion(fd)? {
        counts.notifications += 1;
        counts.completed += c.sends();
        if c.copied {
            counts.copied += c.sends();
        }
        done += c.sends();
    }
    Ok(done)
}

/// `stream` as the plan and the figures see it.
pub struct StreamSpec;

impl Spec for StreamSpec {
    fn takes(&self) -> super::Takes {
        super::Takes {
            send_recv: true,
            both_ways: true,
            ..super::Takes::default()
        }
    }

    fn headline(&self) -> crate::measure::headline::Headline {
        crate::measure::headline::Headline::throughput("bits_per_second")
    }

    fn headline_of(&self, run: &crate::results::RunFigures) -> Option<f64> {
        Some(run.bits_per_second)
    }

    fn table(&self) -> TableKind {
        TableKind::Throughput
    }

    fn wiring(&self, _transport: TransportKind) -> Wiring {
        Wiring::Pair
    }

    /// The transport's own bulk size.
    fn default_size(&self, transport: TransportKind) -> u64 {
        transport.default_stream_size()
    }

    fn refuses(&self, sc: &Scenario) -> Option<String> {
        send_refusal(sc)
            .or_else(|| recv_refusal(sc))
            .or_else(|| batch_refusal(sc))
    }

    fn roles(&self, sc: &Scenario, stop: Stop) -> Arc<dyn Workload> {
        Arc::new(Stream {
            size: sc.size as usize,
            stop,
            framing: sc.transport.framing(),
            reliable: sc.transport.reliable(),
            send: sc.extras.send,
            recv: sc.extras.recv,
            batch: sc.extras.batch.max(1) as usize,
        })
    }

    fn tally(&self, sc: &Scenario, roles: &Roles) -> Tally {
        Tally {
            phases: Some(Phases {
                connect_seconds: roles.connect_time.as_secs_f64(),
                transfer_seconds: roles.interval(Role::Receiver),
                close_seconds: roles
                    .senders
                    .iter()
                    .filter_map(|s| s.close)
                    .max()
                    .unwrap_or_default()
                    .as_secs_f64(),
            }),
            ..one_way_tally(sc, roles)
        }
    }

    fn diagnoses(&self) -> &'static [Diagnosis] {
        &[Diagnosis::CpuSaturated, Diagnosis::ZerocopyCopied]
    }
}

/// The name of a method as on the command line.
fn name(v: impl clap::ValueEnum) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_string())
        .unwrap_or_default()
}

/// Why `--send` cannot be what `sc` asks, if it cannot. Each reason reads "what: why"
/// (tables print the part after the first ": " beside the combinations it rules out).
fn send_refusal(sc: &Scenario) -> Option<String> {
    let (method, t) = (sc.extras.send, sc.transport);
    let m = name(method);
    if method == SendMethod::Write {
        return None;
    }
    if sc.engine != EngineKind::Blocking {
        return Some(format!(
            "--send {m} with the {e} engine: --send {m} makes its own blocking system calls on the descriptor, \
             so the {e} engine would not be what is measured; use --engine blocking",
            e = sc.engine
        ));
    }
    if matches!(t, TransportKind::Mq | TransportKind::Shm) {
        return Some(format!(
            "--send {m} over {t}: {} needs a descriptor to send to, a socket or a pipe, and {t} has none (its \
             sender uses {})",
            if method == SendMethod::Zerocopy {
                "send(MSG_ZEROCOPY)"
            } else {
                "sendfile or splice"
            },
            if t == TransportKind::Mq {
                "mq_send"
            } else {
                "a shared-memory ring"
            }
        ));
    }
    match method {
        SendMethod::Write => None,
        SendMethod::Sendfile | SendMethod::Splice => {
            let most = (SPLICE_PAGES_PER_SEND * sys::page_size()) as u64;
            (t.framing() == Framing::Message && sc.size > most).then(|| {
                format!(
                    "--send {m} over {t} at {}: sendfile and splice hand a socket at most \
                     {SPLICE_PAGES_PER_SEND} pages ({}) per sendmsg, so a larger message would arrive as several \
                     datagrams; use --size {most} or less, or --send write",
                    format_bytes(sc.size),
                    format_bytes(most),
                )
            })
        }
        SendMethod::Zerocopy => match t {
            TransportKind::Tcp | TransportKind::Tcp6 | TransportKind::Udp | TransportKind::Udp6 => {
                None
            }
            TransportKind::Pipe | TransportKind::Fifo => Some(format!(
                "--send zerocopy over {t}: MSG_ZEROCOPY is a socket flag and a pipe has none; --send splice \
                 (vmsplice) is how a pipe takes pages without a copy"
            )),
            _ => Some(format!(
                "--send zerocopy over {t}: the kernel refuses SO_ZEROCOPY on Unix sockets (EOPNOTSUPP); \
                 MSG_ZEROCOPY exists for tcp, tcp6, udp and udp6 (and data to a socket on this host is copied \
                 anyway), so use one of those, or --send splice"
            )),
        },
    }
}

/// Why `--recv` cannot be what `sc` asks, if it cannot (the segments' size is checked
/// where it is known: [`loopback_recv_refusal`] for a receiver on this host, and the
/// receiver itself when its connection is made).
fn recv_refusal(sc: &Scenario) -> Option<String> {
    if sc.extras.recv == RecvMethod::Read {
        return None;
    }
    if !matches!(sc.transport, TransportKind::Tcp | TransportKind::Tcp6) {
        return Some(format!(
            "--recv zerocopy over {}: TCP_ZEROCOPY_RECEIVE is TCP's alone; use -t tcp or tcp6, or --recv read",
            sc.transport
        ));
    }
    (sc.engine != EngineKind::Blocking).then(|| {
        format!(
            "--recv zerocopy with the {e} engine: it makes its own system calls on the socket (getsockopt \
             TCP_ZEROCOPY_RECEIVE, poll, recv), so the {e} engine would not be what is measured; use --engine \
             blocking",
            e = sc.engine
        )
    })
}

/// Why `--batch` cannot be what `sc` asks, if it cannot.
fn batch_refusal(sc: &Scenario) -> Option<String> {
    let (n, t, e) = (sc.extras.batch, sc.transport, sc.engine);
    if n <= 1 {
        return None;
    }
    if sc.extras.send != SendMethod::Write || sc.extras.recv != RecvMethod::Read {
        return Some(format!(
            "--batch {n} with --send {} --recv {}: batches are of the engine's writes and reads; use --send write \
             --recv read (the defaults), or drop --batch",
            name(sc.extras.send),
            name(sc.extras.recv)
        ));
    }
    (t.framing() == Framing::Stream && e != EngineKind::IoUring).then(|| {
        format!(
            "--batch {n} over {t} with the {e} engine: a byte stream has no call that takes several writes \
             (sendmmsg is for datagrams), so several in flight needs --engine io-uring; or drop --batch"
        )
    })
}

/// With both roles on this host the data goes through `lo`: why `--recv zerocopy`
/// cannot map pages there, if it cannot (lo's MTU gives segments that are no multiple of
/// the page: 65483 bytes on IPv4 with the default MTU of 65536).
pub fn loopback_recv_refusal(sc: &Scenario) -> Option<String> {
    if sc.workload != crate::scenario::WorkloadKind::Stream
        || sc.extras.recv != RecvMethod::Zerocopy
        || !matches!(sc.transport, TransportKind::Tcp | TransportKind::Tcp6)
    {
        return None;
    }
    let read = |p: &str| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok();
    let mtu = read("/sys/class/net/lo/mtu")?;
    let timestamps = read("/proc/sys/net/ipv4/tcp_timestamps") != Some(0);
    let v6 = sc.transport.is_ipv6();
    // IPv4's total-length field caps a packet at 65535 bytes.
    let path = if v6 { mtu } else { mtu.min(65_535) };
    let overhead = if v6 { 40 } else { 20 } + 20 + if timestamps { 12 } else { 0 };
    let payload = path.checked_sub(overhead)?;
    let page = sys::page_size() as u64;
    if payload % page == 0 {
        return None;
    }
    Some(format!(
        "--recv zerocopy over {t} on this host: TCP_ZEROCOPY_RECEIVE maps whole pages, so a segment's payload must \
         be a multiple of the {page}-byte page, and with both roles on this host the data goes through lo, whose \
         MTU {mtu} gives {payload}-byte segments ({path} - {} IP - 20 TCP{}); run the receiver in another network \
         namespace or on another host (--server) over a link whose MTU is {page}*k + {overhead} (e.g. {}), or set \
         lo's MTU so (`ip link set lo mtu {}`), or use --recv read",
        if v6 { 40 } else { 20 },
        if timestamps { " - 12 timestamps" } else { "" },
        page + overhead,
        (payload / page) * page + overhead,
        t = sc.transport,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_over_streams_and_runs() {
        let z = |sends, copied| SendCounts {
            method: SendMethod::Zerocopy,
            calls: Some(sends + 1),
            zerocopy: Some(ZerocopyCounts {
                sends,
                completed: sends,
                copied,
                enobufs: 1,
                notifications: 2,
            }),
        };
        let t = SendCounts::total(&[Some(z(10, 10)), None, Some(z(5, 0))]).unwrap();
        assert_eq!(t.calls, Some(17));
        let zc = t.zerocopy.unwrap();
        assert_eq!(
            (zc.sends, zc.completed, zc.copied, zc.enobufs),
            (15, 15, 10, 2)
        );
        assert_eq!(SendCounts::total(&[None, None]), None);
        let r = RecvCounts {
            method: RecvMethod::Zerocopy,
            bytes_mapped: 8192,
            bytes_copied: 10,
            map_calls: Some(3),
        };
        let t = RecvCounts::total(&[Some(r), Some(r)]).unwrap();
        assert_eq!(
            (t.bytes_mapped, t.bytes_copied, t.map_calls),
            (16384, 20, Some(6))
        );
    }
}

//! `--timestamps`: the I/O of a role that stamps its messages, shared by pingpong and
//! rate, and rate's two stamped roles.
//!
//! A stamped role does its own sends and receives on the socket (the blocking engine's
//! `Conn` is the plain socket): receives through `recvmsg`, for the kernel's receive
//! stamp; sends with the id the kernel will give their transmit stamp, which is then
//! read back from the socket's error queue, one read per message. That read is a system
//! call per message: the price of the option. Roles make it after the exchange it
//! belongs to (pingpong: once the reply is in, so it stays out of the timed round trip).
//!
//! Joining the records into parts is `measure::timestamps`'s job.

use std::io::{self, ErrorKind};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use super::rate::{Rate, SequenceTracker};
use super::{
    end_of_data, latency_histogram, record, wait_until, Meter, PeerSignal, Role, Side, SideReport,
};
use crate::engine::EngineKind;
use crate::interrupt;
use crate::measure::live::Publisher;
use crate::measure::timestamps::{Record, StampLog};
use crate::scenario::Scenario;
use crate::sys::timestamps::{self as sys, realtime_ns, Peer};
use crate::transport::{Framing, TransportKind};

/// Why `--timestamps` (if given) cannot run `sc`, whose messages must carry `min_size`
/// bytes of numbering, if it cannot.
pub fn refusal(sc: &Scenario, min_size: u64, what: &str) -> Option<String> {
    if !sc.extras.timestamps {
        return None;
    }
    let t = sc.transport;
    if !matches!(
        t,
        TransportKind::Tcp | TransportKind::Tcp6 | TransportKind::Udp | TransportKind::Udp6
    ) {
        return Some(format!(
            "--timestamps needs tcp, tcp6, udp or udp6: {t} has no transmit timestamps (SO_TIMESTAMPING is \
             for IP sockets)"
        ));
    }
    if sc.workload == crate::scenario::WorkloadKind::Rate
        && matches!(t, TransportKind::Tcp | TransportKind::Tcp6)
    {
        return Some(format!(
            "rate --timestamps needs udp or udp6: on {t} a send that joins a segment still queued gets no \
             transmit stamp of its own, so only a biased few messages could be split (pingpong -t {t} \
             --timestamps splits every one)"
        ));
    }
    if sc.engine != EngineKind::Blocking {
        return Some(format!(
            "--timestamps runs on the blocking engine only: the {} engine does not return the kernel's \
             control messages (receive stamps) through its connection",
            sc.engine
        ));
    }
    if sc.size < min_size {
        return Some(format!(
            "--timestamps needs messages of at least {min_size} bytes: {what}"
        ));
    }
    if sc.extras.writes > 1 {
        return Some(
            "--timestamps with --writes: a request written in pieces has no one send call to time"
                .into(),
        );
    }
    None
}

/// A role's stamped socket: its descriptor, the ids of its transmit stamps, its log.
pub struct Stamper {
    fd: RawFd,
    stream: bool,
    /// Datagrams sent, or bytes written, since stamps were turned on.
    sent: u64,
    /// Who sent the last datagram (the answer goes there on a datagram receiver).
    from: Peer,
    /// Answer whoever sent the last datagram (a UDP receiver).
    answer: bool,
    /// A stamp read ahead: it belongs to a later send than the one asked for.
    ahead: Option<sys::TxStamp>,
    /// What this role recorded.
    pub log: StampLog,
}

impl Stamper {
    /// Turn stamps on for `side`'s socket; `answering`: this role replies to the
    /// datagrams it receives.
    ///
    /// # Errors
    /// If the socket refuses `SO_TIMESTAMPING`.
    pub fn new(side: &Side, framing: Framing, answering: bool) -> io::Result<Stamper> {
        let fd = side.conn.raw_fd().ok_or_else(|| {
            io::Error::new(
                ErrorKind::Unsupported,
                "--timestamps needs a socket descriptor",
            )
        })?;
        let stream = framing == Framing::Stream;
        sys::enable(fd, stream).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot turn on kernel timestamps (SO_TIMESTAMPING): {e}"),
            )
        })?;
        // Before the run starts, so its first messages are stamped too (if the kernel
        // never says yes, the messages without a stamp are counted as missing).
        sys::await_receive_stamps(Duration::from_secs(1));
        let mut log = StampLog::new(realtime_ns());
        let (local, peer) = sys::addresses(fd);
        // The connection's sending end: this end, or the one at the other end.
        log.link = if answering { peer } else { local }
            .map(|a| a.to_string())
            .unwrap_or_default();
        Ok(Stamper {
            fd,
            stream,
            sent: 0,
            from: Peer::default(),
            answer: answering && !stream,
            ahead: None,
            log,
        })
    }

    /// Send one whole message; returns the id of its (last send call's) transmit stamp.
    ///
    /// # Errors
    /// As the send; a datagram sent short is an error.
    pub fn send(&mut self, buf: &[u8]) -> io::Result<u32> {
        let to = self.answer.then_some(&self.from);
        let mut off = 0;
        loop {
            match sys::send(self.fd, &buf[off..], to) {
                Ok(n) if !self.stream => {
                    if n != buf.len() {
                        return Err(io::Error::other(format!(
                            "message truncated: sent {n} of {} bytes",
                            buf.len()
                        )));
                    }
                    self.sent += 1;
                    return Ok((self.sent - 1) as u32);
                }
                Ok(0) if !buf.is_empty() => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => {
                    off += n;
                    self.sent += n as u64;
                    if off >= buf.len() {
                        return Ok(self.sent.wrapping_sub(1) as u32);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Receive one whole message: its length (0: the peer finished), the kernel's
    /// receive stamp (of the receive that completed it) and `CLOCK_REALTIME` just after
    /// that receive returned.
    ///
    /// # Errors
    /// As the receive; a byte stream that ends inside a message is `UnexpectedEof`.
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<(usize, u64, u64)> {
        let mut off = 0;
        let mut stamp = None;
        loop {
            let from = (!self.stream).then_some(&mut self.from);
            match sys::recv_stamped(self.fd, &mut buf[off..], from) {
                Ok((n, s)) => {
                    let returned = realtime_ns();
                    stamp = s.or(stamp);
                    if self.log.link.is_empty() && !self.stream {
                        // An unconnected receiver learns its sender from the first datagram.
                        self.log.link = self.from.addr().map(|a| a.to_string()).unwrap_or_default();
                    }
                    if !self.stream {
                        return Ok((n, stamp.unwrap_or(0), returned));
                    }
                    match n {
                        0 if off == 0 => return Ok((0, 0, returned)),
                        0 => return Err(ErrorKind::UnexpectedEof.into()),
                        _ => off += n,
                    }
                    if off == buf.len() {
                        return Ok((off, stamp.unwrap_or(0), returned));
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The transmit stamp with id `id` (ns), reading the error queue until it comes or
    /// the queue is empty; stamps of earlier sends that are still there are passed over,
    /// one of a later send is kept for it. `0` if it is not there: that message counts as
    /// missing a stamp (on TCP, a send merged into a segment still queued has none).
    pub fn tx_stamp(&mut self, id: u32) -> u64 {
        loop {
            let Some(s) = self
                .ahead
                .take()
                .or_else(|| sys::read_tx_stamp(self.fd).ok().flatten())
            else {
                return 0;
            };
            // Ids wrap at 2^32: compare them as a signed distance.
            match (s.id.wrapping_sub(id) as i32).signum() {
                0 => return s.ns,
                1 => {
                    self.ahead = Some(s);
                    return 0;
                }
                _ => {}
            }
        }
    }
}

/// The sequence number a message carries in its first 8 bytes.
pub fn seq_of(buf: &[u8]) -> u64 {
    buf.get(..8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// How long a receiver on an unreliable transport waits in silence before it checks
/// whether the sender is done (as rate's own receiver).
const QUIET: Duration = Duration::from_millis(50);

impl Rate {
    /// rate's sender with `--timestamps`: each message carries its number (bytes 0..8)
    /// and the `CLOCK_REALTIME` of its send call (8..16); its transmit stamp is read
    /// after each send.
    pub(super) fn sender_stamped(&self, mut side: Side) -> io::Result<SideReport> {
        let mut buf = super::buffer(self.size, 0xC3)?;
        let mut st = Stamper::new(&side, self.framing, false)?;
        let limit = self.stop.max_messages();
        let period_ns = self.rate.map(|r| 1e9 / r);
        let meter = Meter::start(&side.start);
        let t0 = meter.t0();
        let deadline = self.stop.deadline(t0);
        let mut live = Publisher::new(side.start.live(), Role::Sender, None);
        let (mut seq, mut interrupted) = (0u64, false);
        while seq < limit {
            if let Some(ns) = period_ns {
                if !wait_until(
                    t0 + Duration::from_nanos((seq as f64 * ns) as u64),
                    deadline,
                ) {
                    interrupted = interrupt::requested();
                    break;
                }
            }
            buf[..8].copy_from_slice(&seq.to_le_bytes());
            let called = realtime_ns();
            buf[8..16].copy_from_slice(&called.to_le_bytes());
            let id = st.send(&buf)?;
            let tx_kernel = st.tx_stamp(id);
            st.log.push(&Record {
                seq,
                tx_user: called,
                tx_kernel,
                ..Record::default()
            });
            seq += 1;
            if seq % 256 == 0 || period_ns.is_some() {
                live.publish(seq * self.size as u64, seq);
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
        let tcp = end_of_data(&mut side, self.reliable)?;
        Ok(SideReport {
            tcp,
            bytes: seq * self.size as u64,
            messages: seq,
            interrupted,
            stamps: Some(st.log),
            ..measured
        })
    }

    /// rate's receiver with `--timestamps`: it keeps each message's receive stamp and
    /// return time, and measures the one-way time directly from the send-call time the
    /// message carries (`one_way`, every message).
    pub(super) fn receiver_stamped(&self, mut side: Side) -> io::Result<SideReport> {
        let mut buf = super::buffer(self.size, 0)?;
        if !self.reliable {
            side.conn.set_recv_timeout(Some(QUIET))?;
        }
        let mut st = Stamper::new(&side, self.framing, true)?;
        let mut tracker = SequenceTracker::default();
        let mut one_way = latency_histogram();
        let meter = Meter::start(&side.start);
        let t0 = meter.t0();
        let mut live = Publisher::new(side.start.live(), Role::Receiver, None);
        let (mut bytes, mut messages) = (0u64, 0u64);
        let ended;
        loop {
            match st.recv(&mut buf) {
                Ok((0, _, _)) => {
                    ended = Instant::now();
                    break;
                }
                Ok((n, rx_kernel, rx_user)) => {
                    bytes += n as u64;
                    messages += 1;
                    let seq = seq_of(&buf);
                    let carried = seq_of(&buf[8..]);
                    if carried > 0 && rx_user >= carried {
                        record(&mut one_way, Duration::from_nanos(rx_user - carried));
                    }
                    st.log.push(&Record {
                        seq,
                        rx_kernel,
                        rx_user,
                        carried,
                        ..Record::default()
                    });
                    tracker.observe(seq);
                    if !self.reliable {
                        live.gaps(tracker.gaps());
                    }
                    live.publish(bytes, messages);
                }
                Err(e)
                    if !self.reliable
                        && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    if side.link.has(PeerSignal::SenderDone) {
                        ended = Instant::now().checked_sub(QUIET).unwrap_or(t0);
                        break;
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let measured = meter.stop(Some(ended.max(t0)), side.conn.as_ref());
        side.link.signal(PeerSignal::ReceiverDone);
        Ok(SideReport {
            bytes,
            messages,
            sequence: Some(tracker.counts()),
            latencies: vec![(crate::measure::latency::LatencyKind::OneWay, one_way)],
            stamps: Some(st.log),
            ..measured
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::WorkloadKind;

    #[test]
    fn timestamps_are_refused_where_they_cannot_work_with_the_reason() {
        let sc = |transport| {
            let mut sc = Scenario::new(WorkloadKind::Pingpong, transport, 64);
            sc.extras.timestamps = true;
            sc
        };
        let mut unix = sc(TransportKind::Tcp);
        unix.transport = TransportKind::Unix;
        assert!(refusal(&unix, 8, "")
            .unwrap()
            .contains("unix has no transmit"));
        let mut uring = sc(TransportKind::Udp);
        uring.engine = EngineKind::IoUring;
        assert!(refusal(&uring, 8, "")
            .unwrap()
            .contains("blocking engine only"));
        let mut small = sc(TransportKind::Udp);
        small.size = 7;
        assert!(refusal(&small, 8, "why")
            .unwrap()
            .contains("at least 8 bytes: why"));
        small.size = 8;
        assert_eq!(refusal(&small, 8, "why"), None);
        small.extras.timestamps = false;
        small.size = 1;
        assert_eq!(refusal(&small, 8, "why"), None, "no --timestamps");
        let mut split = sc(TransportKind::Tcp);
        split.extras.writes = 2;
        assert!(refusal(&split, 8, "").unwrap().contains("--writes"));
    }

    #[test]
    fn a_message_number_is_read_from_its_first_eight_bytes() {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&42u64.to_le_bytes());
        assert_eq!(seq_of(&b), 42);
        assert_eq!(seq_of(&b[..7]), 0, "too short to carry one");
    }
}

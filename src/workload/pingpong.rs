//! `pingpong`: round-trip latency. The client (the "sender" side) sends a `size`-byte
//! request, the server echoes it, and the client records the round trip in an HDR
//! histogram. One clock read per round trip is the measurement itself, not overhead.
//!
//! Closed loop by default: the next request goes out when the reply is in. With a rate,
//! requests are due on a fixed schedule and each round trip is timed from when its request
//! was *due*, not when it was sent, so a stall is charged to every request queued behind
//! it (the coordinated-omission correction; see Gil Tene, "How NOT to Measure Latency").
//!
//! On unreliable transports a lost request or reply would stall the client forever, so it
//! waits at most [`REPLY_TIMEOUT`], counts a timeout and goes on; requests carry their
//! number in the first 8 bytes so a late reply to an earlier request is recognised and
//! dropped.

use std::io::{self, ErrorKind};
use std::time::{Duration, Instant};

use std::sync::Arc;

use super::stamped::{self, seq_of, Stamper};
use super::{
    buffer, end_of_data, latency_histogram, record, recv_message, send_all, wait_until, Meter,
    PeerSignal, Role, Roles, Side, SideReport, Spec, Stop, TableKind, Tally, Wiring, Workload,
};
use crate::interrupt;
use crate::measure::live::Publisher;
use crate::measure::timestamps::Record;
use crate::scenario::Scenario;
use crate::sys::timestamps::realtime_ns;
use crate::transport::{Framing, TransportKind};
use crate::vocab::Diagnosis;

/// How long the client waits for a reply on an unreliable transport.
pub const REPLY_TIMEOUT: Duration = Duration::from_millis(200);
/// How long an idle server on an unreliable transport waits before checking for the end.
const QUIET: Duration = Duration::from_millis(50);

/// The pingpong workload for one scenario.
#[derive(Clone, Debug)]
pub struct PingPong {
    /// Request and response size in bytes.
    pub size: usize,
    /// When the client stops.
    pub stop: Stop,
    /// Message or byte-stream transport.
    pub framing: Framing,
    /// Whether the transport delivers everything.
    pub reliable: bool,
    /// Open-loop request rate per second; `None` for closed loop.
    pub rate: Option<f64>,
    /// Writes per request (1 normally; more provokes Nagle/delayed-ACK stalls on TCP).
    pub writes: u32,
    /// `--timestamps`: both roles stamp every message (`client_stamped`,
    /// `server_stamped`).
    pub timestamps: bool,
}

impl PingPong {
    fn send_request(&self, side: &mut Side, req: &[u8]) -> io::Result<()> {
        if self.writes <= 1 {
            return send_all(side.conn.as_mut(), req, self.framing);
        }
        let piece = req.len().div_ceil(self.writes as usize).max(1);
        for chunk in req.chunks(piece) {
            send_all(side.conn.as_mut(), chunk, self.framing)?;
        }
        Ok(())
    }

    /// Wait for the reply to request `seq`. `Ok(false)`: it timed out (unreliable only).
    fn await_reply(
        &self,
        side: &mut Side,
        resp: &mut [u8],
        seq: u64,
        late: &mut u64,
    ) -> io::Result<bool> {
        loop {
            match recv_message(side.conn.as_mut(), resp, self.framing) {
                Ok(0) => {
                    return Err(io::Error::new(
                        ErrorKind::UnexpectedEof,
                        "the echo server went away",
                    ))
                }
                Ok(n) => {
                    // A late reply to an earlier request (after a timeout) is dropped.
                    if !self.reliable && n >= 8 && resp[..8] != seq.to_le_bytes() {
                        *late += 1;
                        continue;
                    }
                    return Ok(true);
                }
                Err(e)
                    if !self.reliable
                        && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl PingPong {
    /// The client with `--timestamps`: as [`Workload::sender`], and for each request the
    /// `CLOCK_REALTIME` of its send call, its transmit stamp (read from the error queue
    /// once the reply is in and the round trip timed), the reply's receive stamp and the
    /// return of the receive that got it.
    fn client_stamped(&self, mut side: Side) -> io::Result<SideReport> {
        let mut req = buffer(self.size, 0x5A)?;
        let mut resp = buffer(self.size, 0)?;
        let mut hist = latency_histogram();
        if !self.reliable {
            side.conn.set_recv_timeout(Some(REPLY_TIMEOUT))?;
        }
        let mut st = Stamper::new(&side, self.framing, false)?;
        let limit = self.stop.max_messages();
        let period = self.rate.map(|r| 1e9 / r);
        let meter = Meter::start(&side.start);
        let t0 = meter.t0();
        let deadline = self.stop.deadline(t0);
        let mut live = Publisher::new(side.start.live(), Role::Sender, side.conn.send_fd());
        let (mut done, mut timeouts, mut late, mut interrupted) = (0u64, 0u64, 0u64, false);
        let mut now = t0;
        let mut seq = 0u64;
        while done + timeouts < limit {
            let start = match period {
                Some(ns) => {
                    let due = t0 + Duration::from_nanos((seq as f64 * ns) as u64);
                    if !wait_until(due, deadline) {
                        interrupted = interrupt::requested();
                        now = Instant::now();
                        break;
                    }
                    due
                }
                None => Instant::now(),
            };
            req[..8].copy_from_slice(&seq.to_le_bytes());
            let mut rec = Record {
                seq,
                tx_user: realtime_ns(),
                ..Record::default()
            };
            let id = st.send(&req)?;
            let answered = loop {
                match st.recv(&mut resp) {
                    Ok((0, _, _)) => {
                        return Err(io::Error::new(
                            ErrorKind::UnexpectedEof,
                            "the echo server went away",
                        ))
                    }
                    // A late reply to an earlier request (after a timeout) is dropped.
                    Ok(_) if !self.reliable && seq_of(&resp) != seq => late += 1,
                    Ok((_, rx_kernel, rx_user)) => {
                        (rec.rx_kernel, rec.rx_user) = (rx_kernel, rx_user);
                        break true;
                    }
                    Err(e)
                        if !self.reliable
                            && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                    {
                        break false
                    }
                    Err(e) => return Err(e),
                }
            };
            seq += 1;
            now = Instant::now();
            rec.tx_kernel = st.tx_stamp(id);
            st.log.push(&rec);
            if answered {
                record(&mut hist, now - start);
                done += 1;
                live.publish(done * self.size as u64, done);
            } else {
                if period.is_some() {
                    record(&mut hist, now - start);
                }
                timeouts += 1;
            }
            if deadline.is_some_and(|d| now >= d) {
                break;
            }
            if interrupt::requested() {
                interrupted = true;
                break;
            }
        }
        let measured = meter.stop(Some(now), side.conn.as_ref());
        live.last(done * self.size as u64, done);
        let tcp = end_of_data(&mut side, self.reliable)?;
        Ok(SideReport {
            tcp,
            bytes: seq * self.size as u64,
            messages: seq,
            interrupted,
            latencies: vec![(ROUND_TRIP, hist)],
            stamps: Some(st.log),
            timeouts,
            late,
            ..measured
        })
    }

    /// The server with `--timestamps`: as [`Workload::receiver`], and for each request
    /// its receive stamp, the return of the receive, the reply's send call and its
    /// transmit stamp (read after the reply went out).
    fn server_stamped(&self, mut side: Side) -> io::Result<SideReport> {
        let mut buf = buffer(self.size, 0)?;
        if !self.reliable {
            side.conn.set_recv_timeout(Some(QUIET))?;
        }
        let mut st = Stamper::new(&side, self.framing, true)?;
        let meter = Meter::start(&side.start);
        let mut live = Publisher::new(side.start.live(), Role::Receiver, None);
        let (mut bytes, mut messages) = (0u64, 0u64);
        loop {
            match st.recv(&mut buf) {
                Ok((0, _, _)) => break,
                Ok((n, rx_kernel, rx_user)) => {
                    bytes += n as u64;
                    messages += 1;
                    let mut rec = Record {
                        seq: seq_of(&buf),
                        rx_kernel,
                        rx_user,
                        tx_user: realtime_ns(),
                        ..Record::default()
                    };
                    match st.send(&buf[..n]) {
                        Ok(id) => rec.tx_kernel = st.tx_stamp(id),
                        // The client may finish and close while a reply is on its way.
                        Err(e)
                            if matches!(
                                e.kind(),
                                ErrorKind::BrokenPipe | ErrorKind::ConnectionReset
                            ) =>
                        {
                            break
                        }
                        Err(e) if !self.reliable && e.kind() == ErrorKind::ConnectionRefused => {}
                        Err(e) => return Err(e),
                    }
                    st.log.push(&rec);
                    live.publish(bytes, messages);
                }
                Err(e)
                    if !self.reliable
                        && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    if side.link.has(PeerSignal::SenderDone) {
                        break;
                    }
                }
                Err(e) if !self.reliable && e.kind() == ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(e),
            }
        }
        let measured = meter.stop(None, side.conn.as_ref());
        side.link.signal(PeerSignal::ReceiverDone);
        Ok(SideReport {
            bytes,
            messages,
            stamps: Some(st.log),
            ..measured
        })
    }
}

impl Workload for PingPong {
    fn sender(&self, mut side: Side) -> io::Result<SideReport> {
        if self.timestamps {
            return self.client_stamped(side);
        }
        let mut req = buffer(self.size, 0x5A)?;
        let mut resp = buffer(self.size, 0)?;
        let mut hist = latency_histogram();
        if !self.reliable {
            side.conn.set_recv_timeout(Some(REPLY_TIMEOUT))?;
        }
        let limit = self.stop.max_messages();
        let period = self.rate.map(|r| 1e9 / r);
        let meter = Meter::start(&side.start);
        let t0 = meter.t0();
        let deadline = self.stop.deadline(t0);
        let mut live = Publisher::new(side.start.live(), Role::Sender, side.conn.send_fd());
        let (mut done, mut timeouts, mut late, mut interrupted) = (0u64, 0u64, 0u64, false);
        let mut now = t0;
        let mut seq = 0u64;
        while done + timeouts < limit {
            let start = match period {
                Some(ns) => {
                    let due = t0 + Duration::from_nanos((seq as f64 * ns) as u64);
                    if !wait_until(due, deadline) {
                        interrupted = interrupt::requested();
                        now = Instant::now();
                        break;
                    }
                    due
                }
                None => Instant::now(),
            };
            if self.size >= 8 {
                req[..8].copy_from_slice(&seq.to_le_bytes());
            }
            self.send_request(&mut side, &req)?;
            let answered = self.await_reply(&mut side, &mut resp, seq, &mut late)?;
            seq += 1;
            now = Instant::now();
            if answered {
                record(&mut hist, now - start);
                done += 1;
                live.publish(done * self.size as u64, done);
            } else {
                // In open loop a lost exchange still held up the schedule: it counts at
                // least its timeout, so the corrected percentiles do not read low.
                if period.is_some() {
                    record(&mut hist, now - start);
                }
                timeouts += 1;
            }
            if deadline.is_some_and(|d| now >= d) {
                break;
            }
            if interrupt::requested() {
                interrupted = true;
                break;
            }
        }
        let measured = meter.stop(Some(now), side.conn.as_ref());
        live.last(done * self.size as u64, done);
        let tcp = end_of_data(&mut side, self.reliable)?;
        Ok(SideReport {
            tcp,
            bytes: seq * self.size as u64,
            messages: seq,
            interrupted,
            latencies: vec![(ROUND_TRIP, hist)],
            timeouts,
            late,
            ..measured
        })
    }

    fn receiver(&self, mut side: Side) -> io::Result<SideReport> {
        if self.timestamps {
            return self.server_stamped(side);
        }
        let mut buf = buffer(self.size, 0)?;
        if !self.reliable {
            side.conn.set_recv_timeout(Some(QUIET))?;
        }
        let meter = Meter::start(&side.start);
        let mut live = Publisher::new(side.start.live(), Role::Receiver, None);
        let (mut bytes, mut messages) = (0u64, 0u64);
        loop {
            match recv_message(side.conn.as_mut(), &mut buf, self.framing) {
                Ok(0) => break,
                Ok(n) => {
                    bytes += n as u64;
                    messages += 1;
                    live.publish(bytes, messages);
                    match send_all(side.conn.as_mut(), &buf[..n], self.framing) {
                        Ok(()) => {}
                        // The client may finish and close while a reply is on its way.
                        Err(e)
                            if matches!(
                                e.kind(),
                                ErrorKind::BrokenPipe | ErrorKind::ConnectionReset
                            ) =>
                        {
                            break
                        }
                        Err(e) if !self.reliable && e.kind() == ErrorKind::ConnectionRefused => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e)
                    if !self.reliable
                        && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    if side.link.has(PeerSignal::SenderDone) {
                        break;
                    }
                }
                Err(e) if !self.reliable && e.kind() == ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(e),
            }
        }
        let measured = meter.stop(None, side.conn.as_ref());
        side.link.signal(PeerSignal::ReceiverDone);
        Ok(SideReport {
            bytes,
            messages,
            ..measured
        })
    }
}
/// Where the exchanges that got no reply in time were lost: they add up to
/// `messages_lost`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LostExchanges {
    /// Requests that never reached the server (the server's own count).
    pub requests_lost: u64,
    /// Replies the server sent that never reached the client.
    pub replies_lost: u64,
    /// Replies that reached the client after their timeout.
    pub replies_late: u64,
}

/// Pingpong's latency, the client's round trip, in every result.
pub const ROUND_TRIP: crate::measure::latency::LatencyKind =
    crate::measure::latency::LatencyKind::RoundTrip;

/// `pingpong` as the plan and the figures see it.
pub struct PingpongSpec;

impl Spec for PingpongSpec {
    fn watched(
        &self,
        _sc: &crate::scenario::Scenario,
    ) -> [(super::Role, crate::measure::live::Watch); 2] {
        use crate::measure::live::Watch;
        // The client's round trips completed, else the echoing side's requests.
        [
            (super::Role::Sender, Watch::Client),
            (super::Role::Receiver, Watch::Receiver),
        ]
    }

    fn exchange(&self) -> Option<crate::measure::timestamps::Exchange> {
        Some(crate::measure::timestamps::Exchange::RequestReply)
    }

    fn operation(&self) -> &'static str {
        "round trips"
    }

    fn headline(&self) -> crate::measure::headline::Headline {
        crate::measure::headline::Headline::latency("round_trip_p50_ns")
    }

    fn headline_of(&self, run: &crate::results::RunFigures) -> Option<f64> {
        run.latencies.get(&ROUND_TRIP).map(|l| l.p50_ns as f64)
    }

    fn table(&self) -> TableKind {
        TableKind::Latency
    }

    fn wiring(&self, _transport: TransportKind) -> Wiring {
        Wiring::Duplex
    }

    fn refuses(&self, sc: &Scenario) -> Option<String> {
        if let Some(why) = stamped::refusal(
            sc,
            8,
            "requests carry their number, by which the two roles' stamps are joined",
        ) {
            return Some(why);
        }
        let t = sc.transport;
        if sc.extras.writes > 1 && t.framing() == Framing::Message {
            return Some(format!(
                "--writes splits a request into several writes, which only a byte stream can reassemble; \
                 {t} is message-based"
            ));
        }
        (!t.reliable() && sc.size < 8).then(|| {
            format!(
                "pingpong over {t} needs at least 8 bytes per message: a reply that comes after its timeout \
                 is told apart from the next one by the sequence number it carries"
            )
        })
    }

    fn roles(&self, sc: &Scenario, stop: Stop) -> Arc<dyn Workload> {
        Arc::new(PingPong {
            size: sc.size as usize,
            stop,
            framing: sc.transport.framing(),
            reliable: sc.transport.reliable(),
            rate: sc.extras.rate,
            writes: sc.extras.writes,
            timestamps: sc.extras.timestamps,
        })
    }

    /// The client counts the replies that came back in time; the server counts the
    /// requests that reached it. Requests lost + replies lost + late replies = requests
    /// without an answer = timeouts.
    fn tally(&self, sc: &Scenario, roles: &Roles) -> Tally {
        let sent = Roles::sum(&roles.senders, |s| s.messages);
        let reached = Roles::sum(&roles.receivers, |s| s.messages);
        let timeouts = Roles::sum(&roles.senders, |s| s.timeouts);
        let late = Roles::sum(&roles.senders, |s| s.late);
        let answered = sent.saturating_sub(timeouts);
        Tally {
            bytes_received: answered * sc.size,
            messages_received: answered,
            delivered_bytes: answered * sc.size,
            counted: answered,
            messages_lost: (!sc.transport.reliable()).then_some(timeouts),
            exchanges: Some(LostExchanges {
                requests_lost: sent.saturating_sub(reached),
                replies_lost: reached.saturating_sub(answered).saturating_sub(late),
                replies_late: late,
            }),
            ..Tally::timed_by(Role::Sender)
        }
    }

    fn cpu_per_exchange(&self) -> bool {
        true
    }

    fn diagnoses(&self) -> &'static [Diagnosis] {
        &[Diagnosis::DelayedAck, Diagnosis::LatencyRunsDisagree]
    }
}

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

use super::{
    buffer, end_of_data, latency_histogram, record, recv_message, send_all, wait_until, PeerSignal,
    Side, SideReport, Stop, Workload,
};
use crate::interrupt;
use crate::measure::cpu::ThreadCpu;
use crate::transport::Framing;

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

impl Workload for PingPong {
    fn sender(&self, mut side: Side) -> io::Result<SideReport> {
        let mut req = buffer(self.size, 0x5A)?;
        let mut resp = buffer(self.size, 0)?;
        let mut hist = latency_histogram();
        if !self.reliable {
            side.conn.set_recv_timeout(Some(REPLY_TIMEOUT))?;
        }
        let limit = self.stop.max_messages();
        let period = self.rate.map(|r| 1e9 / r);
        side.start.wait();
        // The wall-clock interval encloses the CPU interval, so CPU never exceeds it.
        let t0 = Instant::now();
        let cpu0 = ThreadCpu::now();
        let deadline = self.stop.deadline(t0);
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
        let ended = now;
        let cpu = ThreadCpu::now().since(&cpu0);
        let socket_buffers = side.conn.socket_buffers();
        end_of_data(&mut side, self.reliable)?;
        Ok(SideReport {
            bytes: seq * self.size as u64,
            messages: seq,
            started: Some(t0),
            ended: Some(ended),
            cpu,
            interrupted,
            socket_buffers,
            latencies: vec![("round_trip", hist)],
            timeouts,
            late,
            sequence: None,
            close: None,
        })
    }

    fn receiver(&self, mut side: Side) -> io::Result<SideReport> {
        let mut buf = buffer(self.size, 0)?;
        if !self.reliable {
            side.conn.set_recv_timeout(Some(QUIET))?;
        }
        side.start.wait();
        // The wall-clock interval encloses the CPU interval, so CPU never exceeds it.
        let t0 = Instant::now();
        let cpu0 = ThreadCpu::now();
        let (mut bytes, mut messages) = (0u64, 0u64);
        loop {
            match recv_message(side.conn.as_mut(), &mut buf, self.framing) {
                Ok(0) => break,
                Ok(n) => {
                    bytes += n as u64;
                    messages += 1;
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
        let cpu = ThreadCpu::now().since(&cpu0);
        let ended = Instant::now();
        let socket_buffers = side.conn.socket_buffers();
        side.link.signal(PeerSignal::ReceiverDone);
        Ok(SideReport {
            bytes,
            messages,
            started: Some(t0),
            ended: Some(ended),
            cpu,
            socket_buffers,
            ..SideReport::default()
        })
    }
}

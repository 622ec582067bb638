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

use std::io::{self, ErrorKind};
use std::time::{Duration, Instant};

use super::{buffer, repeat_end_marker, send_all, PeerSignal, Side, SideReport, Stop, Workload};
use crate::interrupt;
use crate::measure::cpu::ThreadCpu;
use crate::transport::Framing;

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
}

impl Stream {
    /// How many messages between checks of the clock and the Ctrl-C flag: about every
    /// 16 KiB of data, so the check costs nothing next to the system calls.
    fn check_every(&self) -> u64 {
        (16384 / self.size.max(1)).max(1) as u64
    }
}

impl Workload for Stream {
    fn sender(&self, mut side: Side) -> io::Result<SideReport> {
        let buf = buffer(self.size, 0xA5)?;
        let (limit_msgs, limit_bytes) = match self.stop {
            Stop::Count(n) => (n, u64::MAX),
            Stop::Bytes(b) => (b.div_ceil(self.size as u64), b),
            Stop::Duration(_) => (u64::MAX, u64::MAX),
        };
        let check_every = self.check_every();
        side.start.wait();
        // The wall-clock interval encloses the CPU interval, so CPU never exceeds it.
        let t0 = Instant::now();
        let cpu0 = ThreadCpu::now();
        let deadline = self.stop.deadline(t0);
        let (mut bytes, mut messages, mut interrupted) = (0u64, 0u64, false);
        let mut until_check = check_every;
        while messages < limit_msgs {
            let len = (limit_bytes - bytes).min(self.size as u64) as usize;
            send_all(side.conn.as_mut(), &buf[..len], self.framing)?;
            bytes += len as u64;
            messages += 1;
            until_check -= 1;
            if until_check == 0 {
                until_check = check_every;
                if interrupt::requested() {
                    interrupted = true;
                    break;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
            }
        }
        let cpu = ThreadCpu::now().since(&cpu0);
        let ended = Instant::now();
        let socket_buffers = side.conn.socket_buffers();
        side.link.signal(PeerSignal::SenderDone);
        // Closing: the end of data (shutdown, close, end marker) and releasing the socket.
        let closing = Instant::now();
        side.conn.finish()?;
        let close = if self.reliable {
            drop(side.conn);
            closing.elapsed()
        } else {
            let close = closing.elapsed();
            repeat_end_marker(&mut side);
            close
        };
        Ok(SideReport {
            bytes,
            messages,
            started: Some(t0),
            ended: Some(ended),
            cpu,
            interrupted,
            socket_buffers,
            close: Some(close),
            ..SideReport::default()
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
        let (mut bytes, mut reads) = (0u64, 0u64);
        let mut quiet = Duration::ZERO;
        loop {
            match side.conn.recv(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    bytes += n as u64;
                    reads += 1;
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
        let cpu = ThreadCpu::now().since(&cpu0);
        let ended = (Instant::now() - quiet).max(t0);
        let socket_buffers = side.conn.socket_buffers();
        side.link.signal(PeerSignal::ReceiverDone);
        let messages = match self.framing {
            Framing::Message => reads,
            Framing::Stream => bytes.div_ceil(self.size as u64),
        };
        Ok(SideReport {
            bytes,
            messages,
            started: Some(t0),
            ended: Some(ended),
            cpu,
            interrupted: false,
            socket_buffers,
            ..SideReport::default()
        })
    }
}

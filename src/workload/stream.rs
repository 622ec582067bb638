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

use std::sync::Arc;

use super::{
    buffer, one_way_tally, repeat_end_marker, send_all, Meter, PeerSignal, Role, Roles, Side,
    SideReport, Spec, Stop, TableKind, Tally, Wiring, Workload,
};
use crate::diagnose::Diagnosis;
use crate::interrupt;
use crate::plan::Scenario;
use crate::transport::Framing;
use crate::transport::TransportKind;

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
        let meter = Meter::start(&side.start);
        let t0 = meter.t0();
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
        let measured = meter.stop(None, side.conn.as_ref());
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
            interrupted,
            close: Some(close),
            ..measured
        })
    }

    fn receiver(&self, mut side: Side) -> io::Result<SideReport> {
        let mut buf = buffer(self.size, 0)?;
        if !self.reliable {
            side.conn.set_recv_timeout(Some(QUIET))?;
        }
        let meter = Meter::start(&side.start);
        let t0 = meter.t0();
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
        let ended = Instant::now().checked_sub(quiet).unwrap_or(t0).max(t0);
        let measured = meter.stop(Some(ended), side.conn.as_ref());
        side.link.signal(PeerSignal::ReceiverDone);
        let messages = match self.framing {
            Framing::Message => reads,
            Framing::Stream => bytes.div_ceil(self.size as u64),
        };
        Ok(SideReport {
            bytes,
            messages,
            ..measured
        })
    }
}
/// The phases of a stream run, as the classic client/server benchmark reports them.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Phases {
    /// Setting up the connection (bind, listen, connect, accept; or creating the pipe,
    /// FIFO, queue or ring), per stream.
    pub connect_seconds: f64,
    /// Moving the data: the receiver's measured interval.
    pub transfer_seconds: f64,
    /// Ending the data and closing the sender's end (slowest stream).
    pub close_seconds: f64,
}

/// `stream` as the plan and the figures see it.
pub struct StreamSpec;

impl Spec for StreamSpec {
    fn table(&self) -> TableKind {
        TableKind::Throughput
    }

    fn wiring(&self) -> Wiring {
        Wiring::Pair
    }

    /// The transport's own bulk size.
    fn default_size(&self, transport: TransportKind) -> u64 {
        transport.default_stream_size()
    }

    fn refuses(&self, _sc: &Scenario) -> Option<String> {
        None
    }

    fn roles(&self, sc: &Scenario, stop: Stop) -> Arc<dyn Workload> {
        Arc::new(Stream {
            size: sc.size as usize,
            stop,
            framing: sc.transport.framing(),
            reliable: sc.transport.reliable(),
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
        &[Diagnosis::CpuSaturated]
    }
}

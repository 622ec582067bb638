//! `connect`: what a connection costs. The client (the "sender" side) dials, sends a
//! `size`-byte request, reads the `size`-byte response and closes; the server accepts,
//! answers and lets go. Each step is timed into its own histogram:
//!
//! - `connect`: the client's `connect(2)`, until the connection is established;
//! - `accept`: the server's `accept(2)` once a connection is pending (waiting for the next
//!   client is not counted);
//! - `first_response`: from connected to the whole response read (the first request and
//!   response on a new connection, slow-start and all);
//! - `close`: the client's `close(2)` (with `--linger0`, a reset instead of a FIN).
//!
//! With `--open N` the client keeps N connections open and closes the oldest before it
//! opens another; the server keeps as many and lets the oldest go the same way.

use crate::measure::latency::LatencyKind;
use std::collections::VecDeque;
use std::io::{self, ErrorKind};
use std::time::{Duration, Instant};

use std::sync::Arc;

use super::{
    buffer, latency_histogram, record, recv_message, send_all, Endpoint, Meter, PeerSignal, Role,
    Roles, Side, SideReport, Spec, Stop, TableKind, Tally, Wiring, Workload,
};
use crate::engine::EngineKind;
use crate::interrupt;
use crate::measure::live::Publisher;
use crate::scenario::Scenario;
use crate::transport::{Framing, TransportKind};

/// The connect workload for one scenario.
#[derive(Clone, Debug)]
pub struct Connect {
    /// Request and response size in bytes.
    pub size: usize,
    /// When the client stops (a count is a number of connections).
    pub stop: Stop,
    /// Byte stream (tcp, unix) or messages (unix-seqpacket).
    pub framing: Framing,
    /// Connections kept open at once.
    pub open: u32,
}

fn missing(what: &str) -> io::Error {
    io::Error::other(format!("connect workload started without a {what}"))
}

impl Workload for Connect {
    fn sender(&self, mut side: Side) -> io::Result<SideReport> {
        let Some(Endpoint::Dial(dialer)) = side.endpoint.take() else {
            return Err(missing("dialer"));
        };
        let req = buffer(self.size, 0x42)?;
        let mut resp = buffer(self.size, 0)?;
        let (mut h_connect, mut h_first, mut h_close) = (
            latency_histogram(),
            latency_histogram(),
            latency_histogram(),
        );
        let limit = self.stop.max_messages();
        let mut open = VecDeque::with_capacity(self.open as usize);
        let meter = Meter::start(&side.start);
        let t0 = meter.t0();
        let deadline = self.stop.deadline(t0);
        let mut live = Publisher::new(side.start.live(), Role::Sender, None);
        let (mut made, mut interrupted) = (0u64, false);
        let close_oldest = |open: &mut VecDeque<Box<dyn crate::transport::Conn>>, h: &mut _| {
            if let Some(conn) = open.pop_front() {
                let t = Instant::now();
                drop(conn);
                record(h, t.elapsed());
            }
        };
        while made < limit {
            if open.len() >= self.open as usize {
                close_oldest(&mut open, &mut h_close);
            }
            let a = Instant::now();
            let mut conn = dialer.connect()?;
            let b = Instant::now();
            send_all(conn.as_mut(), &req, self.framing)?;
            if recv_message(conn.as_mut(), &mut resp, self.framing)? == 0 {
                return Err(io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "the server closed before answering",
                ));
            }
            let c = Instant::now();
            record(&mut h_connect, b - a);
            record(&mut h_first, c - b);
            open.push_back(conn);
            made += 1;
            live.publish(made * self.size as u64, made);
            if deadline.is_some_and(|d| c >= d) {
                break;
            }
            if interrupt::requested() {
                interrupted = true;
                break;
            }
        }
        while !open.is_empty() {
            close_oldest(&mut open, &mut h_close);
        }
        let measured = meter.stop(None, side.conn.as_ref());
        side.link.signal(PeerSignal::SenderDone);
        Ok(SideReport {
            bytes: made * self.size as u64,
            messages: made,
            interrupted,
            latencies: vec![
                (LatencyKind::Connect, h_connect),
                (LatencyKind::FirstResponse, h_first),
                (LatencyKind::Close, h_close),
            ],
            ..measured
        })
    }

    fn receiver(&self, mut side: Side) -> io::Result<SideReport> {
        let Some(Endpoint::Listen(listener)) = side.endpoint.take() else {
            return Err(missing("listener"));
        };
        let mut buf = buffer(self.size, 0)?;
        let mut h_accept = latency_histogram();
        let mut held = VecDeque::new();
        let meter = Meter::start(&side.start);
        let mut live = Publisher::new(side.start.live(), Role::Receiver, None);
        let (mut accepted, mut bytes) = (0u64, 0u64);
        loop {
            if !listener.ready(Duration::from_millis(20))? {
                if side.link.has(PeerSignal::SenderDone) {
                    break;
                }
                continue;
            }
            let a = Instant::now();
            let mut conn = match listener.accept() {
                Ok(c) => c,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    continue
                }
                Err(e) => return Err(e),
            };
            let accept_time = a.elapsed();
            // A peer that connects and says nothing (not our client) must not block us.
            conn.set_recv_timeout(Some(Duration::from_secs(1)))?;
            let n = match recv_message(conn.as_mut(), &mut buf, self.framing) {
                Ok(n) => n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    continue
                }
                Err(e) => return Err(e),
            };
            record(&mut h_accept, accept_time);
            accepted += 1;
            live.publish(bytes, accepted);
            if n > 0 {
                bytes += n as u64;
                send_all(conn.as_mut(), &buf[..n], self.framing)?;
            }
            held.push_back(conn);
            while held.len() > self.open as usize {
                held.pop_front();
            }
        }
        held.clear();
        let measured = meter.stop(None, side.conn.as_ref());
        Ok(SideReport {
            bytes,
            messages: accepted,
            latencies: vec![(LatencyKind::Accept, h_accept)],
            ..measured
        })
    }
}
/// The connection-oriented transports, the only ones with a connection to set up.
pub const TRANSPORTS: [TransportKind; 4] = [
    TransportKind::Unix,
    TransportKind::UnixSeqpacket,
    TransportKind::Tcp,
    TransportKind::Tcp6,
];

/// `connect` as the plan and the figures see it.
pub struct ConnectSpec;

impl Spec for ConnectSpec {
    fn watched(
        &self,
        _sc: &crate::scenario::Scenario,
    ) -> [(super::Role, crate::measure::live::Watch); 2] {
        use crate::measure::live::Watch;
        // The dialers' connections made, else the listener's accepted.
        [
            (super::Role::Sender, Watch::Sender),
            (super::Role::Receiver, Watch::Receiver),
        ]
    }

    fn operation(&self) -> &'static str {
        "connections"
    }

    fn takes(&self) -> super::Takes {
        super::Takes {
            open: true,
            ..super::Takes::default()
        }
    }

    fn headline(&self) -> crate::measure::headline::Headline {
        crate::measure::headline::Headline::rate("messages_per_second")
    }

    fn headline_of(&self, run: &crate::results::RunFigures) -> Option<f64> {
        Some(run.messages_per_second)
    }

    fn table(&self) -> TableKind {
        TableKind::Connections
    }

    fn wiring(&self, _transport: TransportKind) -> Wiring {
        Wiring::ListenDial
    }

    fn transports(&self) -> &'static [TransportKind] {
        &TRANSPORTS
    }

    fn refuses(&self, sc: &Scenario) -> Option<String> {
        let t = sc.transport;
        if !TRANSPORTS.contains(&t) {
            return Some(format!(
                "connect measures connection setup, which {t} does not have: use tcp, tcp6, unix or unix-seqpacket"
            ));
        }
        (sc.engine != EngineKind::Blocking).then(|| {
            format!(
                "connect runs on the blocking engine only so far, not {}",
                sc.engine
            )
        })
    }

    fn roles(&self, sc: &Scenario, stop: Stop) -> Arc<dyn Workload> {
        Arc::new(Connect {
            size: sc.size as usize,
            stop,
            framing: sc.transport.framing(),
            open: sc.extras.open,
        })
    }

    /// Timed by the client, which drives the exchanges; the server counts what it
    /// accepted and read.
    fn tally(&self, _sc: &Scenario, roles: &Roles) -> Tally {
        let bytes_received = Roles::sum(&roles.receivers, |s| s.bytes);
        Tally {
            bytes_received,
            messages_received: Roles::sum(&roles.receivers, |s| s.messages),
            delivered_bytes: bytes_received,
            counted: Roles::sum(&roles.senders, |s| s.messages),
            ..Tally::timed_by(Role::Sender)
        }
    }
}

//! Workloads: what the two sides of a connection do with it.
//!
//! A workload is written as two sides, a sender and a receiver, that share nothing but
//! the transport ([`Conn`]) and a [`PeerLink`], a tiny out-of-band channel for "I am done"
//! that never carries measured data (in one process it is a channel; between processes or
//! hosts it becomes the control connection). Each side times and counts itself, reading
//! the clock and its thread's CPU only at the edges of its measured interval.

pub mod connect;
pub mod pingpong;
pub mod rate;
pub mod relay;
pub mod stamped;
pub mod stream;
pub mod swarm;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::measure::cpu::ThreadCpu;
use crate::measure::live::Live;
use crate::scenario::{Stop, WorkloadKind};
use hdrhistogram::Histogram;

use crate::measure::histogram::{latency_histogram, record};
use crate::sys::buffer;
use crate::transport::{Conn, Framing};
use crate::vocab::Role;

/// The default suite's tables, in order: the workload each holds and its title. The
/// first is the matrix of transports by size, and what the suite ranks.
pub const SUITE: [(WorkloadKind, &str); 3] = [
    (WorkloadKind::Stream, "Throughput: one-way stream"),
    (WorkloadKind::Pingpong, "Round-trip latency: pingpong"),
    (
        WorkloadKind::Rate,
        "Message rate: message transports (one send is one message)",
    ),
];

/// What one side measured over its measured interval.
#[derive(Clone, Debug, Default)]
pub struct SideReport {
    /// Payload bytes this side sent or received.
    pub bytes: u64,
    /// Messages this side sent or received (for byte streams: bytes / message size, rounded up).
    pub messages: u64,
    /// How long after the start line opened this side began its interval, by its own
    /// clock (a side that woke late is still timed from the start).
    pub start_delay: Duration,
    /// This side's measured interval by its own clock: from its start to its end (the
    /// sender's last send, the receiver's end of data); `None` if it never ran.
    pub elapsed: Option<Duration>,
    /// This thread's CPU over the interval.
    pub cpu: ThreadCpu,
    /// With `--counters`: its perf counters over the interval.
    pub counters: Option<crate::measure::counters::Counts>,
    /// The run was cut short by Ctrl-C.
    pub interrupted: bool,
    /// This side's socket buffers (send, receive) at the end of its interval.
    pub socket_buffers: (Option<u64>, Option<u64>),
    /// Named latency distributions in nanoseconds (`round_trip`, `connect`, ...).
    pub latencies: Vec<(crate::measure::latency::LatencyKind, Histogram<u64>)>,
    /// With `--timestamps`: this role's per-message clock reads and kernel stamps.
    pub stamps: Option<crate::measure::timestamps::StampLog>,
    /// Exchanges that got no answer in time (lost datagrams).
    pub timeouts: u64,
    /// Replies that came after their exchange had timed out (and were dropped).
    pub late: u64,
    /// Sequence-number accounting of a receiver that checks it.
    pub sequence: Option<SequenceCounts>,
    /// How long the sender took to end the data and release its end (stream).
    pub close: Option<Duration>,
    /// io-uring: what this end's ring used and did, with its `--sqpoll` thread's CPU
    /// (read at the end of the interval; counted in the role's CPU figures).
    pub io_uring: Option<crate::vocab::uring_use::UringUse>,
    /// The CPU this role's thread ran on when its interval started and when it ended.
    pub on_cpu: (Option<u32>, Option<u32>),
    /// Where this role's thread ran over the interval (sampled CPUs, migrations).
    pub placement: Option<crate::measure::placement::Trace>,
    /// stream's sender: what its `--send` method did.
    pub send: Option<crate::measure::calls::SendCounts>,
    /// stream's receiver: what its `--recv` method did.
    pub recv: Option<crate::measure::calls::RecvCounts>,
    /// With `--batch`: how many batches this role handed to the kernel (system calls, or
    /// ring submissions on io-uring), for messages per call.
    pub calls: Option<u64>,
    /// A TCP sender: its socket's `TCP_INFO` after its end of data, before it closed
    /// (`crate::measure::tcp_info`); `None` for other roles and transports.
    pub tcp: Option<crate::measure::tcp_info::TcpInfo>,
    /// A swarm's side: its totals, per-pair figures and errors.
    pub swarm: Option<swarm::SwarmSide>,
    /// A relay's role: the source's counts, or the relay's and the sink's.
    pub relay: Option<relay::RelaySide>,
}

/// What a receiver learned from sequence numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceCounts {
    /// Messages that arrived with a lower number than one seen before.
    pub reordered: u64,
    /// Messages whose number had been seen already.
    pub duplicated: u64,
}

impl Stop {
    /// The most messages (round trips, connections) a run may make: the count, or no
    /// limit when the run is timed or bounded in bytes.
    pub fn max_messages(self) -> u64 {
        match self {
            Stop::Count(n) => n,
            _ => u64::MAX,
        }
    }

    /// When a timed run ends, if it is timed.
    pub fn deadline(self, start: Instant) -> Option<Instant> {
        match self {
            Stop::Duration(d) => Some(start + d),
            _ => None,
        }
    }
}

/// Sleep until `due`, spinning for the last stretch so the next message leaves on time.
/// Returns false if `deadline` comes first (having waited until the deadline, so a paced
/// run lasts its full duration) or Ctrl-C arrives.
pub fn wait_until(due: Instant, deadline: Option<Instant>) -> bool {
    if let Some(d) = deadline.filter(|&d| due >= d) {
        wait_until(d, None);
        return false;
    }
    loop {
        let now = Instant::now();
        if now >= due {
            return true;
        }
        if crate::interrupt::requested() {
            return false;
        }
        let left = due - now;
        if left > Duration::from_micros(200) {
            // Nap in slices so Ctrl-C is noticed promptly even at very low rates.
            std::thread::sleep((left - Duration::from_micros(100)).min(Duration::from_millis(20)));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// End the sender's data: tell the peer over the link, then in-band (shutdown, close or
/// end marker), repeating the marker on an unreliable transport until it is heard. On
/// TCP, the socket's `TCP_INFO` once what it sent is acknowledged
/// ([`crate::measure::tcp_info::at_end`]); `None` on other transports.
///
/// # Errors
/// If the transport cannot signal the end.
pub fn end_of_data(
    side: &mut Side,
    reliable: bool,
) -> io::Result<Option<crate::measure::tcp_info::TcpInfo>> {
    side.link.signal(PeerSignal::SenderDone);
    side.conn.finish()?;
    if !reliable {
        repeat_end_marker(side);
    }
    Ok(crate::measure::tcp_info::at_end(side.conn.send_fd()))
}

/// The sender's end of data on an unreliable transport: the end marker can be lost, so
/// repeat it until the receiver confirms over the peer link (for about a second at most).
pub fn repeat_end_marker(side: &mut Side) {
    for _ in 0..200 {
        if side
            .link
            .wait_for(PeerSignal::ReceiverDone, Duration::from_millis(5))
        {
            return;
        }
        let _ = side.conn.finish();
    }
}

/// The most one call of a byte stream's send is given: a 1 GiB message goes out in
/// pieces, with a check for Ctrl-C between them, so stopping never waits for it all.
pub const SEND_PIECE: usize = 64 << 20;

/// Send one whole message: loop over partial writes on byte streams (at most
/// [`SEND_PIECE`] per call); a message transport must take it in one send.
///
/// # Errors
/// As the transport's send; `Interrupted` if Ctrl-C comes between two pieces.
pub fn send_all(conn: &mut dyn Conn, buf: &[u8], framing: Framing) -> io::Result<()> {
    let mut off = 0;
    while off < buf.len() {
        let end = match framing {
            Framing::Stream if buf.len() > SEND_PIECE => {
                if crate::interrupt::requested() {
                    return Err(io::Error::new(
                        io::ErrorKind::Interrupted,
                        "interrupted in the middle of a message",
                    ));
                }
                (off + SEND_PIECE).min(buf.len())
            }
            _ => buf.len(),
        };
        match conn.send(&buf[off..end]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) if framing == Framing::Message && n != buf.len() => {
                return Err(io::Error::other(format!(
                    "message truncated: sent {n} of {} bytes",
                    buf.len()
                )));
            }
            Ok(n) => off += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Receive one whole message of `buf.len()` bytes (byte streams: read until full; message
/// transports: one receive). `Ok(0)` means the peer finished before the message began.
///
/// # Errors
/// `UnexpectedEof` if the stream ends inside a message; timeouts as the transport reports.
pub fn recv_message(conn: &mut dyn Conn, buf: &mut [u8], framing: Framing) -> io::Result<usize> {
    if framing == Framing::Message {
        loop {
            match conn.recv(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }
    let mut off = 0;
    while off < buf.len() {
        match conn.recv(&mut buf[off..]) {
            Ok(0) if off == 0 => return Ok(0),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => off += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(off)
}

/// Out-of-band signals between the two sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerSignal {
    /// The sender has sent everything it will send.
    SenderDone,
    /// The receiver has seen the end of data.
    ReceiverDone,
    /// This role has set up its end of every pair (a swarm): the sender has dialed
    /// every connection it will, the receiver accepted every one that came.
    SetUp,
}

/// One side's end of the out-of-band link to its peer.
pub struct PeerLink {
    tx: Sender<PeerSignal>,
    rx: Receiver<PeerSignal>,
}

/// A connected pair of peer links.
pub fn peer_link() -> (PeerLink, PeerLink) {
    let (a_tx, b_rx) = mpsc::channel();
    let (b_tx, a_rx) = mpsc::channel();
    (
        PeerLink { tx: a_tx, rx: a_rx },
        PeerLink { tx: b_tx, rx: b_rx },
    )
}

impl PeerLink {
    /// Tell the peer something; a vanished peer is ignored (it no longer cares).
    pub fn signal(&self, s: PeerSignal) {
        let _ = self.tx.send(s);
    }

    /// Whether the peer has sent `s` (without waiting); also true if the peer is gone.
    pub fn has(&self, s: PeerSignal) -> bool {
        self.wait_for(s, Duration::ZERO)
    }

    /// A signal the peer sent, if one is waiting (for a bridge that carries signals to a
    /// peer in another process).
    pub fn try_take(&self) -> Option<PeerSignal> {
        self.rx.try_recv().ok()
    }

    /// Wait up to `timeout` for `s`; true if it came or the peer is gone.
    pub fn wait_for(&self, s: PeerSignal, timeout: Duration) -> bool {
        match self.rx.recv_timeout(timeout) {
            Ok(got) => got == s,
            Err(RecvTimeoutError::Disconnected) => true,
            Err(RecvTimeoutError::Timeout) => false,
        }
    }
}

/// Everything one side of a run gets.
pub struct Side {
    /// The transport end, already attached to the engine. Workloads that make their own
    /// connections (`connect`) get a placeholder here and use `endpoint`.
    pub conn: Box<dyn Conn>,
    /// For `connect`: the listener (receiving side) or dialer (sending side).
    pub endpoint: Option<Endpoint>,
    /// The out-of-band link to the peer.
    pub link: PeerLink,
    /// Every side of the run (and the runner) meets here; the measured interval starts
    /// when it opens.
    pub start: StartLine,
}

/// The start every side of a run (and the runner) waits at. A side that fails before
/// reaching it is stood in for, and the runner can open it outright (when a side could
/// not even be started), so no side ever waits forever.
#[derive(Clone)]
pub struct StartLine {
    gate: Arc<Gate>,
    passed: Arc<AtomicBool>,
}

struct Gate {
    parties: usize,
    /// How many have arrived, and whether the gate is open.
    state: Mutex<(usize, bool)>,
    /// When it opened.
    opened_at: Mutex<Option<Instant>>,
    opened: Condvar,
    /// With `--interval`: where the sides publish their running totals.
    live: Option<Arc<Live>>,
    /// With `--counters`: every role opens its perf counters.
    counters: bool,
    /// Whether `live`'s intervals start when the gate opens (else a role starts them
    /// when its measured interval begins, after a set-up past the line).
    live_at_line: bool,
}

impl StartLine {
    /// A start line for `parties` waiters.
    pub fn new(parties: usize) -> StartLine {
        StartLine::with_live(parties, None)
    }

    /// A start line whose sides publish their running totals to `live` (told when the
    /// line opens).
    pub fn with_live(parties: usize, live: Option<Arc<Live>>) -> StartLine {
        StartLine {
            gate: Arc::new(Gate {
                parties,
                state: Mutex::new((0, false)),
                opened_at: Mutex::new(None),
                opened: Condvar::new(),
                live,
                counters: false,
                live_at_line: true,
            }),
            passed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The start line of one run of `sc` for `parties` waiters: its sides publish to
    /// the scenario's `--interval` totals and open perf counters with `--counters`.
    pub fn for_scenario(parties: usize, sc: &crate::scenario::Scenario) -> StartLine {
        let mut line = StartLine::with_live(parties, sc.live.clone());
        if let Some(gate) = Arc::get_mut(&mut line.gate) {
            gate.counters = sc.extras.counters;
            gate.live_at_line = !spec(sc.workload).sets_up_after_the_line();
        }
        line
    }

    /// A role whose measured interval begins after a set-up past the line: it began at
    /// `at`, and so do the intervals (the first such role of the process counts).
    pub fn measuring_from(&self, at: Instant) {
        if let Some(live) = &self.gate.live {
            live.start(at);
        }
    }

    /// Where this run's sides publish their running totals (`--interval`), if anywhere.
    pub fn live(&self) -> Option<Arc<Live>> {
        self.gate.live.clone()
    }

    /// This side's own line: the same gate, its own record of having waited.
    pub fn for_side(&self) -> StartLine {
        StartLine {
            gate: Arc::clone(&self.gate),
            passed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Count this side in; the last one to arrive opens the gate.
    fn arrive(&self) -> std::sync::MutexGuard<'_, (usize, bool)> {
        self.passed.store(true, Ordering::Relaxed);
        let mut st = self.gate.state.lock().unwrap_or_else(|e| e.into_inner());
        st.0 += 1;
        if st.0 >= self.gate.parties {
            self.open_locked(&mut st);
        }
        st
    }

    /// Open the gate (the state's lock held), noting when.
    fn open_locked(&self, st: &mut (usize, bool)) {
        if !st.1 {
            st.1 = true;
            let now = Instant::now();
            *self
                .gate
                .opened_at
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(now);
            if let Some(live) = self.gate.live.as_ref().filter(|_| self.gate.live_at_line) {
                live.start(now);
            }
        }
        self.gate.opened.notify_all();
    }

    /// Wait until every side is ready (or the gate is opened); returns when it opened.
    pub fn wait(&self) -> Instant {
        let mut st = self.arrive();
        while !st.1 {
            st = self.gate.opened.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        drop(st);
        self.gate
            .opened_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or_else(Instant::now)
    }

    /// Wait like [`StartLine::wait`], but give up on Ctrl-C: then the gate is opened for
    /// everyone (the sides see the interruption at their first check) and this returns
    /// false.
    pub fn wait_unless_interrupted(&self) -> bool {
        let mut st = self.arrive();
        while !st.1 {
            if crate::interrupt::requested() {
                self.open_locked(&mut st);
                return false;
            }
            st = self
                .gate
                .opened
                .wait_timeout(st, Duration::from_millis(20))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }

    /// Arrive in place of a side that ended before it reached the line.
    pub fn stand_in(&self) {
        if !self.passed.load(Ordering::Relaxed) {
            self.wait();
        }
    }

    /// Whether every party but one (the coordinator, who opens the line when its peer
    /// process is ready too) has arrived.
    pub fn others_arrived(&self) -> bool {
        let st = self.gate.state.lock().unwrap_or_else(|e| e.into_inner());
        st.0 + 1 >= self.gate.parties
    }

    /// Let everyone go now (a side could not be started: the run is abandoned).
    pub fn open(&self) {
        let mut st = self.gate.state.lock().unwrap_or_else(|e| e.into_inner());
        self.open_locked(&mut st);
    }
}

/// The part every role measures the same way: wait at the start line, then read the
/// clock and the thread's CPU at the two edges of the measured interval, and the socket
/// buffers at its end. Every duration is this role's own (no instant is shared with
/// another role), so a role can run in another process or on another host.
pub struct Meter {
    t0: Instant,
    cpu0: ThreadCpu,
    start_delay: Duration,
    on_cpu: Option<u32>,
    counters: Option<crate::measure::counters::Counters>,
}

impl Meter {
    /// Wait at the start line, then start the clock and the CPU counter. The wall-clock
    /// interval encloses the CPU interval, so CPU never exceeds it.
    ///
    /// Perf counters (`--counters`) are opened before the line, as opening costs; they
    /// and the placement trace start after it, before the clock.
    pub fn start(line: &StartLine) -> Meter {
        Meter::start_after(line, || ()).0
    }

    /// Wait at the start line, do `set_up` (not measured), then start the clock and the
    /// CPU counter as [`Meter::start`] does. The role's start delay includes the set-up.
    pub fn start_after<R>(line: &StartLine, set_up: impl FnOnce() -> R) -> (Meter, R) {
        let mut counters = line
            .gate
            .counters
            .then(crate::measure::counters::Counters::open);
        let opened = line.wait();
        let made = set_up();
        if let Some(c) = &mut counters {
            c.start();
        }
        crate::measure::placement::begin();
        let t0 = Instant::now();
        let meter = Meter {
            t0,
            cpu0: ThreadCpu::now(),
            start_delay: t0.saturating_duration_since(opened),
            on_cpu: crate::measure::cpu::current_cpu(),
            counters,
        };
        (meter, made)
    }

    /// When the measured interval began.
    pub fn t0(&self) -> Instant {
        self.t0
    }

    /// End the interval at `ended` (now if `None`): a report with this role's timing,
    /// CPU and socket buffers filled in, for the workload to add its counts to.
    pub fn stop(&self, ended: Option<Instant>, conn: &dyn Conn) -> SideReport {
        let cpu = ThreadCpu::now().since(&self.cpu0);
        let ended = ended.unwrap_or_else(Instant::now);
        SideReport {
            start_delay: self.start_delay,
            elapsed: Some(ended.saturating_duration_since(self.t0)),
            cpu,
            counters: self.counters.as_ref().map(|c| c.stop()),
            socket_buffers: conn.socket_buffers(),
            on_cpu: (self.on_cpu, crate::measure::cpu::current_cpu()),
            placement: crate::measure::placement::end(),
            io_uring: conn.uring(),
            ..SideReport::default()
        }
    }
}

/// Where a connection-making workload gets its connections.
pub enum Endpoint {
    /// The receiving side accepts.
    Listen(crate::transport::connector::Listener),
    /// The sending side dials.
    Dial(Box<crate::transport::connector::Dialer>),
}

/// How a workload's connections are wired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wiring {
    /// One connected pair, data one way.
    Pair,
    /// One pair that carries data both ways (one-way transports get a second channel).
    Duplex,
    /// A listener on the receiving side and a dialer on the sending side, which makes its
    /// own connections (one per exchange, or one per pair of a swarm).
    ListenDial,
    /// Nothing opened for it: the workload makes its connections itself, and both roles
    /// must run in one process (a swarm of socketpairs or pipes).
    InProcess,
}

/// What one measured run's roles reported, as a placement brings them back.
#[derive(Clone, Debug, Default)]
pub struct Roles {
    /// The sending roles, one per stream.
    pub senders: Vec<SideReport>,
    /// The receiving roles, one per stream.
    pub receivers: Vec<SideReport>,
    /// Machine-wide CPU over the run.
    pub system: Option<crate::measure::cpu::SystemCpu>,
    /// What the kernel granted for the first stream's connection.
    pub link: crate::transport::LinkInfo,
    /// UDP receive-buffer drops the kernel counted during the run.
    pub udp_drops: Option<u64>,
    /// Time to open one stream's transport (the average over streams).
    pub connect_time: Duration,
    /// The other process's host, when a role ran on a server or in a child.
    pub peer: Option<PeerInfo>,
    /// With `--bidir`: each direction's roles on their own, by name ("client to server",
    /// "server to client"); empty otherwise.
    pub directions: Vec<(String, Roles)>,
}

/// What a peer process said about its host during a run.
#[derive(Clone, Debug)]
pub struct PeerInfo {
    /// Its machine-wide CPU over the run.
    pub system: Option<crate::measure::cpu::SystemCpu>,
    /// Its machine.
    pub environment: crate::environment::Environment,
}

impl Roles {
    /// The total of a counter over the roles of one kind.
    pub fn sum(of: &[SideReport], f: fn(&SideReport) -> u64) -> u64 {
        of.iter().map(f).sum()
    }

    /// When the run started, as an offset from the start line's opening: the smallest
    /// start delay of any role that ran.
    pub fn first_start(&self) -> Duration {
        self.senders
            .iter()
            .chain(&self.receivers)
            .filter(|s| s.elapsed.is_some())
            .map(|s| s.start_delay)
            .min()
            .unwrap_or_default()
    }

    /// The roles of one kind.
    pub fn of(&self, role: Role) -> &[SideReport] {
        match role {
            Role::Sender => &self.senders,
            Role::Receiver => &self.receivers,
        }
    }

    /// Whether Ctrl-C cut any role of the run short.
    pub fn interrupted(&self) -> bool {
        self.senders
            .iter()
            .chain(&self.receivers)
            .any(|s| s.interrupted)
    }

    /// A role's interval in seconds: from the run's start (so a role that woke late
    /// cannot shorten its own interval) to the last end of its streams, each role's
    /// times being its own.
    pub fn interval(&self, role: Role) -> f64 {
        let first = self.first_start();
        self.of(role)
            .iter()
            .filter_map(|s| {
                Some(
                    (s.start_delay + s.elapsed?)
                        .saturating_sub(first)
                        .as_secs_f64(),
                )
            })
            .fold(0.0, f64::max)
    }
}

/// What a run's role reports add up to, as its workload counts them.
#[derive(Clone, Debug, PartialEq)]
pub struct Tally {
    /// Which role's interval times the run: the receiver's for one-way workloads (what
    /// was delivered), the client's for request/response ones.
    pub clock: Role,
    /// Payload bytes that count as received.
    pub bytes_received: u64,
    /// Messages that count as received (pingpong: completed round trips).
    pub messages_received: u64,
    /// Payload bytes the rates are made of (distinct messages delivered).
    pub delivered_bytes: u64,
    /// Messages the message rate is made of.
    pub counted: u64,
    /// Messages sent and never received (null where nothing can be lost).
    pub messages_lost: Option<u64>,
    /// pingpong's split of the lost exchanges.
    pub exchanges: Option<pingpong::LostExchanges>,
    /// rate's sequence-number accounting.
    pub sequence: Option<SequenceCounts>,
    /// stream's phases.
    pub phases: Option<crate::measure::calls::Phases>,
}

impl Tally {
    /// Nothing counted yet, the run timed by `clock`.
    pub fn timed_by(clock: Role) -> Tally {
        Tally {
            clock,
            bytes_received: 0,
            messages_received: 0,
            delivered_bytes: 0,
            counted: 0,
            messages_lost: None,
            exchanges: None,
            sequence: None,
            phases: None,
        }
    }
}

/// The table a workload's results are shown in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableKind {
    /// Throughput, message rate, loss and CPU per scenario (a pivot over sizes for a
    /// sweep).
    Throughput,
    /// Percentiles of the round trip, round trips per second, loss.
    Latency,
    /// Percentiles of each phase of a connection, connections per second.
    Connections,
}

/// What a workload declares about itself, in its own file: how its connections are
/// wired, what it refuses, what each role does, how its figures are counted and which
/// diagnoses apply to it. [`spec`] is the only place that maps a [`WorkloadKind`] to one.
pub trait Spec: Sync {
    /// How its connections over `transport` are wired.
    fn wiring(&self, transport: crate::transport::TransportKind) -> Wiring;
    /// The table its results are shown in.
    fn table(&self) -> TableKind;
    /// Its headline figure: what `compare` tests and the rankings rank.
    fn headline(&self) -> crate::measure::headline::Headline;
    /// That figure in one run, if the run has it.
    fn headline_of(&self, run: &crate::results::RunFigures) -> Option<f64>;
    /// The transports it can use (what `--transport all` means).
    fn transports(&self) -> &'static [crate::transport::TransportKind] {
        &crate::transport::TransportKind::ALL
    }
    /// Message size when `--size` is not given.
    fn default_size(&self, _transport: crate::transport::TransportKind) -> u64 {
        64
    }
    /// Why this workload cannot run `sc` (over its transport, engine, size and options),
    /// if it cannot.
    fn refuses(&self, sc: &crate::scenario::Scenario) -> Option<String>;
    /// Why a server refuses to run its side of `sc` for `peer`, beyond what it refuses
    /// of every workload (its limits, transports that cannot reach the peer), if it
    /// does: a workload whose threads and buffers those limits do not bound runs only
    /// for the parent of a `--placement processes` run.
    fn refuses_on_server(
        &self,
        _sc: &crate::scenario::Scenario,
        _peer: crate::vocab::Peer,
    ) -> Option<String> {
        None
    }
    /// What the roles do, for one run of `sc` that stops at `stop`.
    fn roles(&self, sc: &crate::scenario::Scenario, stop: Stop) -> Arc<dyn Workload>;
    /// Count one run.
    fn tally(&self, sc: &crate::scenario::Scenario, roles: &Roles) -> Tally;
    /// Whether the figure of interest is CPU per exchange (request/response workloads).
    fn cpu_per_exchange(&self) -> bool {
        false
    }
    /// The warnings that apply to this workload beyond those that apply to every one.
    fn diagnoses(&self) -> &'static [crate::vocab::Diagnosis] {
        &[]
    }
    /// Whose counts `--interval` follows: the first of these whose role ran in this
    /// process, else the second (one-way workloads: the receivers, else the senders).
    fn watched(&self, _sc: &crate::scenario::Scenario) -> [(Role, crate::measure::live::Watch); 2] {
        use crate::measure::live::Watch;
        [
            (Role::Receiver, Watch::Receiver),
            (Role::Sender, Watch::Sender),
        ]
    }
    /// Whether the receivers' sequence numbers count `sc`'s lost messages (rate, over a
    /// transport that can lose them).
    fn loss_by_sequence(&self, _sc: &crate::scenario::Scenario) -> bool {
        false
    }
    /// The options of its own a result records (and `compare` matches by).
    fn takes(&self) -> Takes {
        Takes::default()
    }
    /// What one of its operations is called, counted per second ("messages").
    fn operation(&self) -> &'static str {
        "messages"
    }
    /// Whether it counts the messages lost one way (rate): its page charts the loss.
    fn counts_loss(&self) -> bool {
        false
    }
    /// Whether its roles set up their connections after the start line (so that both
    /// sides can make them together, wherever each runs), starting their measured
    /// interval, and `--interval`'s, only then.
    fn sets_up_after_the_line(&self) -> bool {
        false
    }
    /// How much longer than its stop a run may take for that set-up (and a drain that
    /// waits for a side starved of a CPU) before it is declared stalled.
    fn set_up_allowance(&self) -> Duration {
        Duration::ZERO
    }
    /// How its kernel timestamps are joined (`--timestamps`), if it takes them.
    fn exchange(&self) -> Option<crate::measure::timestamps::Exchange> {
        None
    }
}

/// The options a workload takes beyond every workload's ([`Spec::takes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Takes {
    /// `--send` and `--recv` (stream).
    pub send_recv: bool,
    /// `--open` (connect).
    pub open: bool,
    /// `--bidir`: both directions at once (the one-way workloads).
    pub both_ways: bool,
}

/// The declaration of a workload kind: the one `match` on the kind.
pub fn spec(kind: WorkloadKind) -> &'static dyn Spec {
    match kind {
        WorkloadKind::Stream => &stream::StreamSpec,
        WorkloadKind::Pingpong => &pingpong::PingpongSpec,
        WorkloadKind::Rate => &rate::RateSpec,
        WorkloadKind::Connect => &connect::ConnectSpec,
        WorkloadKind::Swarm => &swarm::SwarmSpec,
        WorkloadKind::Relay => &relay::RelaySpec,
    }
}

/// Messages and bytes one-way workloads count: what the receivers got, duplicates
/// aside, timed by the receiver; loss where the transport can lose.
pub fn one_way_tally(sc: &crate::scenario::Scenario, roles: &Roles) -> Tally {
    let sent = Roles::sum(&roles.senders, |s| s.messages);
    let received = Roles::sum(&roles.receivers, |s| s.messages);
    let bytes_received = Roles::sum(&roles.receivers, |s| s.bytes);
    let sequence = roles
        .receivers
        .iter()
        .map(|r| r.sequence)
        .collect::<Option<Vec<_>>>()
        .map(|v| SequenceCounts {
            reordered: v.iter().map(|c| c.reordered).sum(),
            duplicated: v.iter().map(|c| c.duplicated).sum(),
        });
    // A duplicated datagram is not a delivered message, and does not make up for a lost one.
    let dup = sequence.map_or(0, |c| c.duplicated);
    Tally {
        bytes_received,
        messages_received: received,
        delivered_bytes: bytes_received.saturating_sub(dup * sc.size),
        counted: received - dup.min(received),
        messages_lost: (!sc.transport.reliable())
            .then(|| sent.saturating_sub(received - dup.min(received))),
        sequence,
        ..Tally::timed_by(Role::Receiver)
    }
}

/// The two sides of a workload.
pub trait Workload: Send + Sync {
    /// Run the sending side to completion.
    ///
    /// # Errors
    /// An I/O error from the transport.
    fn sender(&self, side: Side) -> io::Result<SideReport>;
    /// Run the receiving side to completion.
    ///
    /// # Errors
    /// An I/O error from the transport.
    fn receiver(&self, side: Side) -> io::Result<SideReport>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use crate::transport::TransportKind;
    use clap::ValueEnum;

    /// A paced message leaves when it is due, not a sleep's slack later: the nap stops
    /// short of the due time and the last stretch spins. A sleep never ends early, so a
    /// nap that ran past the due time would make every try late by at least that much;
    /// the best of many tries shows whether any was on time (one try can always be
    /// preempted, so only the best is checked).
    #[test]
    fn a_wait_ends_when_it_is_due_not_a_naps_slack_later() {
        let best = (0..50)
            .map(|_| {
                let due = Instant::now() + Duration::from_millis(2);
                assert!(wait_until(due, None));
                Instant::now() - due
            })
            .min()
            .unwrap();
        assert!(
            best < Duration::from_micros(90),
            "the best of 50 waits ended {best:?} late"
        );
        // Past the deadline: false, having waited until the deadline.
        let deadline = Instant::now() + Duration::from_millis(3);
        assert!(!wait_until(
            deadline + Duration::from_secs(5),
            Some(deadline)
        ));
        assert!(Instant::now() >= deadline);
    }

    /// A connection that takes whatever it is given and remembers each call's size.
    struct Recorder(Vec<usize>);

    impl Conn for Recorder {
        fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.len());
            Ok(buf.len())
        }
        fn recv(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
            Ok(0)
        }
        fn finish(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
            None
        }
    }

    /// A connection whose receives and sends play a script: each call takes the next
    /// step (`Ok(n)`: n bytes; `Err`: that error); past the end, receives see the end of
    /// data and sends take everything.
    struct Script(std::collections::VecDeque<io::Result<usize>>);

    impl Script {
        fn new(steps: Vec<io::Result<usize>>) -> Script {
            Script(steps.into())
        }
        fn step(&mut self, len: usize, past_end: usize) -> io::Result<usize> {
            self.0
                .pop_front()
                .unwrap_or(Ok(past_end))
                .map(|n| n.min(len))
        }
    }

    impl Conn for Script {
        fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.step(buf.len(), buf.len())
        }
        fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.step(buf.len(), 0)
        }
        fn finish(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
            None
        }
    }

    fn eintr() -> io::Result<usize> {
        Err(io::ErrorKind::Interrupted.into())
    }

    #[test]
    fn an_interrupted_call_is_repeated_and_a_real_error_is_not() {
        let mut buf = [0u8; 64];
        for framing in [Framing::Stream, Framing::Message] {
            let mut c = Script::new(vec![eintr(), Ok(64)]);
            assert_eq!(recv_message(&mut c, &mut buf, framing).unwrap(), 64);
            let mut c = Script::new(vec![eintr(), Ok(64)]);
            send_all(&mut c, &buf, framing).unwrap();
            assert!(c.0.is_empty(), "both steps taken");
            let reset = || Err(io::ErrorKind::ConnectionReset.into());
            let mut c = Script::new(vec![reset(), Ok(64)]);
            let e = recv_message(&mut c, &mut buf, framing).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
            let mut c = Script::new(vec![reset(), Ok(64)]);
            let e = send_all(&mut c, &buf, framing).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
        }
    }

    #[test]
    fn a_byte_stream_that_ends_inside_a_message_is_an_error_and_before_one_is_the_end() {
        let mut buf = [0u8; 64];
        let mut c = Script::new(vec![Ok(10), Ok(20)]);
        let e = recv_message(&mut c, &mut buf, Framing::Stream).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let mut c = Script::new(vec![]);
        assert_eq!(recv_message(&mut c, &mut buf, Framing::Stream).unwrap(), 0);
        // Pieces are put together into one message.
        let mut c = Script::new(vec![Ok(10), Ok(50), Ok(4)]);
        assert_eq!(recv_message(&mut c, &mut buf, Framing::Stream).unwrap(), 64);
        // A message transport's short send is a truncated message.
        let mut c = Script::new(vec![Ok(10)]);
        let e = send_all(&mut c, &buf, Framing::Message).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        let mut c = Script::new(vec![Ok(10), Ok(54)]);
        send_all(&mut c, &buf, Framing::Stream).unwrap();
        assert!(c.0.is_empty());
    }

    #[test]
    fn a_huge_message_goes_out_in_pieces_and_a_small_one_in_one_call() {
        let big = vec![1u8; 2 * SEND_PIECE + 1000];
        let mut c = Recorder(Vec::new());
        send_all(&mut c, &big, Framing::Stream).unwrap();
        assert_eq!(c.0, [SEND_PIECE, SEND_PIECE, 1000]);
        let mut c = Recorder(Vec::new());
        send_all(&mut c, &big[..SEND_PIECE], Framing::Stream).unwrap();
        assert_eq!(c.0, [SEND_PIECE]);
        // A message transport takes a message whole or not at all.
        let mut c = Recorder(Vec::new());
        send_all(&mut c, &big[..SEND_PIECE + 1], Framing::Message).unwrap();
        assert_eq!(c.0, [SEND_PIECE + 1]);
    }

    /// Wait up to 2 s for `t` to end; if it does not, release everyone and fail.
    fn released(t: &std::thread::JoinHandle<()>, line: &StartLine) -> bool {
        let since = Instant::now();
        while !t.is_finished() && since.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let done = t.is_finished();
        line.open();
        done
    }

    #[test]
    fn a_stand_in_arrives_for_a_side_that_never_reached_the_line() {
        let line = StartLine::new(2);
        let a = line.for_side();
        let ta = std::thread::spawn(move || {
            a.wait();
        });
        // b failed before its start: its stand-in is what lets a go.
        line.for_side().stand_in();
        assert!(released(&ta, &line), "a waited for a side that had failed");
    }

    #[test]
    fn the_start_line_lets_everyone_go_when_a_side_never_comes() {
        let line = StartLine::new(3);
        let a = line.for_side();
        let ta = std::thread::spawn(move || {
            a.wait();
        });
        std::thread::sleep(Duration::from_millis(20));
        assert!(!ta.is_finished(), "one of three arrived: still closed");
        line.open(); // the other sides could not be started
        ta.join().unwrap();
        let _ = line.for_side().wait(); // an open line does not block
    }

    #[test]
    fn one_way_counts_distinct_messages_and_loss_that_duplicates_do_not_hide() {
        let sc = Scenario::new(WorkloadKind::Rate, TransportKind::Udp, 64);
        // 10 sent; 12 arrivals of which 3 were duplicates: 9 distinct, 1 lost.
        let roles = Roles {
            senders: vec![SideReport {
                messages: 10,
                bytes: 640,
                ..SideReport::default()
            }],
            receivers: vec![SideReport {
                messages: 12,
                bytes: 768,
                sequence: Some(SequenceCounts {
                    reordered: 2,
                    duplicated: 3,
                }),
                ..SideReport::default()
            }],
            ..Roles::default()
        };
        let t = spec(WorkloadKind::Rate).tally(&sc, &roles);
        assert_eq!(t.clock, Role::Receiver);
        assert_eq!((t.messages_received, t.bytes_received), (12, 768));
        assert_eq!(t.counted, 9);
        assert_eq!(t.delivered_bytes, 9 * 64);
        assert_eq!(t.messages_lost, Some(1));
        assert_eq!(
            t.sequence.map(|c| (c.reordered, c.duplicated)),
            Some((2, 3))
        );
        // On a reliable transport nothing can be lost: unknown, not zero.
        let sc = Scenario::new(WorkloadKind::Rate, TransportKind::UnixDgram, 64);
        assert_eq!(
            spec(WorkloadKind::Rate).tally(&sc, &roles).messages_lost,
            None
        );
    }

    #[test]
    fn only_request_response_workloads_count_cpu_per_exchange() {
        let per_exchange: Vec<_> = WorkloadKind::value_variants()
            .iter()
            .filter(|k| spec(**k).cpu_per_exchange())
            .collect();
        assert_eq!(per_exchange, [&WorkloadKind::Pingpong]);
    }

    #[test]
    fn a_role_that_reaches_an_open_line_late_counts_its_delay_from_the_opening() {
        let line = StartLine::new(2);
        line.open();
        std::thread::sleep(Duration::from_millis(30));
        let meter = Meter::start(&line.for_side());
        let report = meter.stop(None, &Recorder(Vec::new()));
        assert!(
            report.start_delay >= Duration::from_millis(30),
            "{:?}",
            report.start_delay
        );
        assert!(report
            .elapsed
            .is_some_and(|e| e < Duration::from_millis(30)));
    }
}

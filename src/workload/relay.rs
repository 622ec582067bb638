//! `relay`: a source sends to a relay, the relay copies each connection's bytes to a
//! sink with one of the [`crate::copy`] methods, the sink checks every byte and counts.
//!
//! A workload of the shared runner, of two roles: the sending role is the source (its
//! threads dial the relay through the scenario's listener), the receiving role is the
//! relay and the sink (the relay's threads accept, dial the sink's own listener and
//! copy; the sink's threads check every byte). Each runs `--parallel` threads, made
//! before the start line, so the relay's cost stands alone: its threads' CPU (plus the
//! io_uring worker threads the kernel runs on its behalf, the CPU of its process that no
//! thread of either role accounts for) and the system calls its copier counted. The
//! measured interval runs from the start line to the sink's end of the last connection,
//! so throughput is what reached the sink through the relay. With `--placement
//! processes` the relay and the sink are a child process; a pingpong, timed on one
//! clock from the source's write to the sink's read, runs as threads only.
//!
//! The bytes are a pattern with a period of [`PERIOD`] (a prime, so it never lines up
//! with a buffer or a page) starting afresh on every connection: the sink compares each
//! read with where the pattern must be, so a relay that drops, repeats or reorders a
//! single byte fails the run.

use crate::measure::latency::LatencyKind;
use crate::scenario::{RelayOptions, ShapeKind};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{
    latency_histogram, record, Endpoint, Meter, PeerSignal, Role, Roles, Side, SideReport, Spec,
    Stop, TableKind, Tally, Wiring, Workload,
};
use crate::copy::{self, Copied, End, Method};
use crate::interrupt;
use crate::measure::cpu::{process_cpu, ThreadCpu};
use crate::measure::live::Publisher;
use crate::transport::TransportKind;

/// The pattern's period in bytes.
pub const PERIOD: usize = 65521;
/// How long a blocked call waits before it looks at the stop flags again (Ctrl-C is
/// promised to stop a run within 100 ms).
pub const TICK: Duration = Duration::from_millis(20);
/// How often a waiting accept looks at its stop condition: after Ctrl-C (or the run's
/// end) the roles stop one after another (the sources, then the relay's accepts, then
/// the sink's), each seeing the last one's end at its next look.
const ACCEPT_TICK: Duration = Duration::from_millis(5);
/// How long a TCP connect may take before it is a failure (a peer that drops SYNs).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The sink's read buffer.
const SINK_READ: usize = 256 << 10;

/// The pattern repeated to `len` bytes: `pattern(n)[i]` is the byte at stream offset
/// `i`, and the bytes from offset `o` are at `[o % PERIOD..]`.
pub fn pattern(len: usize) -> Vec<u8> {
    // A xorshift generator: bytes that do not repeat within the period.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let period: Vec<u8> = (0..PERIOD)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect();
    period.iter().copied().cycle().take(len).collect()
}

/// The transports a relay can have at its two ends.
pub const TRANSPORTS: [TransportKind; 3] =
    [TransportKind::Tcp, TransportKind::Tcp6, TransportKind::Unix];

/// Why `t` cannot be a relay's end, if it cannot.
pub fn refuses_transport(t: TransportKind) -> Option<String> {
    if TRANSPORTS.contains(&t) {
        return None;
    }
    Some(format!(
        "{t} cannot be a relay's end: a relay accepts stream connections and makes its own \
         to the sink, so it needs tcp, tcp6 or unix (splice also needs a socket or a pipe on \
         each end)"
    ))
}

/// Where connections are made to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A Unix socket path.
    Unix(PathBuf),
}

impl Target {
    /// A `host:port` or `[v6]:port` address, or a Unix socket path (anything with a `/`,
    /// or that is not an address).
    ///
    /// # Errors
    /// A path longer than a Unix socket address holds.
    pub fn parse(text: &str) -> Result<Target, String> {
        if !text.contains('/') {
            if let Ok(a) = text.parse::<SocketAddr>() {
                return Ok(Target::Tcp(a));
            }
            if let Ok(mut it) = std::net::ToSocketAddrs::to_socket_addrs(text) {
                if let Some(a) = it.next() {
                    return Ok(Target::Tcp(a));
                }
            }
            if text.contains(':') {
                return Err(format!(
                    "`{text}` is neither an address (host:port, [::1]:port) nor a Unix socket path"
                ));
            }
        }
        let path = PathBuf::from(text);
        let len = path.as_os_str().len();
        if len > crate::transport::UNIX_PATH_MAX {
            return Err(format!(
                "the Unix socket path `{text}` is {len} bytes; a socket address holds at most 107: \
                 use a shorter path"
            ));
        }
        Ok(Target::Unix(path))
    }

    /// Connect (blocking; gives up after [`CONNECT_TIMEOUT`], and within moments of
    /// Ctrl-C: a target that drops SYNs, or a Unix listener whose backlog is full, does
    /// not hold up the stop).
    ///
    /// # Errors
    /// As connect(2); `Interrupted` on Ctrl-C.
    pub fn connect(&self) -> io::Result<End> {
        use socket2::{Domain, SockAddr, Socket, Type};
        let (domain, addr) = match self {
            Target::Tcp(a) => (Domain::for_address(*a), SockAddr::from(*a)),
            Target::Unix(p) => (Domain::UNIX, SockAddr::unix(p)?),
        };
        let sock = Socket::new(domain, Type::STREAM, None)?;
        crate::transport::connect_with_deadline(&sock, &addr, CONNECT_TIMEOUT)?;
        match self {
            Target::Tcp(_) => {
                let s = TcpStream::from(sock);
                s.set_nodelay(true)?;
                Ok(End::Tcp(s))
            }
            Target::Unix(_) => Ok(End::Unix(UnixStream::from(std::os::fd::OwnedFd::from(
                sock,
            )))),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Tcp(a) => write!(f, "{a}"),
            Target::Unix(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A listening socket whose accepts give up at a tick to look at a stop condition.
#[derive(Debug)]
pub enum Listener {
    /// TCP.
    Tcp(TcpListener),
    /// Unix; the file is removed when the listener is dropped.
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// Listen on `at` (a TCP port 0 is one the kernel picks). A Unix path that exists
    /// already is never replaced.
    ///
    /// # Errors
    /// As bind(2) and listen(2), with what to try.
    pub fn bind(at: &Target) -> io::Result<Listener> {
        let l = match at {
            Target::Tcp(a) => Listener::Tcp(TcpListener::bind(a).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot listen on {a}: {e} (pick another port, or port 0)"),
                )
            })?),
            Target::Unix(p) => {
                if p.exists() {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!(
                            "{} exists already: remove it or choose another path",
                            p.display()
                        ),
                    ));
                }
                let l = UnixListener::bind(p).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot listen on {}: {e}", p.display()))
                })?;
                Listener::Unix(l, p.clone())
            }
        };
        match &l {
            Listener::Tcp(t) => t.set_nonblocking(true)?,
            Listener::Unix(u, _) => u.set_nonblocking(true)?,
        }
        Ok(l)
    }

    /// Where it listens.
    ///
    /// # Errors
    /// As getsockname(2).
    pub fn target(&self) -> io::Result<Target> {
        match self {
            Listener::Tcp(t) => Ok(Target::Tcp(t.local_addr()?)),
            Listener::Unix(_, p) => Ok(Target::Unix(p.clone())),
        }
    }

    /// Accept one connection (blocking, Nagle off for TCP), looking at `give_up` before
    /// each try and every `ACCEPT_TICK` (5 ms) while none comes; `None` once it says so.
    ///
    /// # Errors
    /// As accept(2).
    pub fn accept_unless(&self, give_up: &dyn Fn() -> bool) -> io::Result<Option<End>> {
        let fd = match self {
            Listener::Tcp(t) => t.as_raw_fd(),
            Listener::Unix(u, _) => u.as_raw_fd(),
        };
        loop {
            if give_up() {
                return Ok(None);
            }
            let got = match self {
                Listener::Tcp(t) => t.accept().map(|(s, _)| End::Tcp(s)),
                Listener::Unix(u, _) => u.accept().map(|(s, _)| End::Unix(s)),
            };
            match got {
                Ok(end) => {
                    if let End::Tcp(s) = &end {
                        s.set_nonblocking(false)?;
                        s.set_nodelay(true)?;
                    } else if let End::Unix(s) = &end {
                        s.set_nonblocking(false)?;
                    }
                    return Ok(Some(end));
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::Interrupted
                            | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => return Err(e),
            }
            crate::sys::wait::poll_one(fd, true, Some(ACCEPT_TICK))?;
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, p) = self {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// What the connections carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `parallel` long connections, each sending `size`-byte messages until the stop
    /// (a duration, or bytes per connection).
    Streams(Stop),
    /// This many short connections in all, each carrying one `size`-byte payload.
    Connections(u64),
    /// One connection, one `size`-byte message at a time: the next leaves when the sink
    /// has the whole of the last one. Stops at a duration or a count.
    Pingpong(Stop),
}

/// One relay scenario, as `sockbench relay` describes it.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The relay's two ends.
    pub transport: TransportKind,
    /// How the relay copies.
    pub method: Method,
    /// The copy method's buffers.
    pub copy: copy::Options,
    /// Message size (with [`Shape::Connections`], each connection's payload).
    pub size: usize,
    /// What the connections carry.
    pub shape: Shape,
    /// Connections at once, and threads per role.
    pub parallel: usize,
}

impl Setup {
    /// One connection at a time through `method` with its default buffers.
    pub fn new(method: Method, transport: TransportKind, size: usize, shape: Shape) -> Setup {
        Setup {
            transport,
            method,
            copy: copy::Options::default(),
            size,
            shape,
            parallel: 1,
        }
    }

    /// The scenario the runner runs: one stream of the runner (the relay's threads are
    /// its own), its stop the shape's.
    pub fn scenario(&self, warmup: Duration, runs: u32) -> crate::scenario::Scenario {
        let (shape, stop) = match self.shape {
            Shape::Streams(stop) => (ShapeKind::Streams, stop),
            Shape::Connections(n) => (ShapeKind::Connections, Stop::Count(n)),
            Shape::Pingpong(stop) => (ShapeKind::Pingpong, stop),
        };
        crate::scenario::Scenario {
            stop,
            warmup,
            runs,
            nodelay: true,
            extras: crate::scenario::WorkloadOptions {
                relay: Some(RelayOptions {
                    method: self.method,
                    copy: self.copy,
                    shape,
                    threads: self.parallel.max(1) as u32,
                }),
                ..crate::scenario::WorkloadOptions::default()
            },
            ..crate::scenario::Scenario::new(
                super::WorkloadKind::Relay,
                self.transport,
                self.size as u64,
            )
        }
    }
}

/// What one role's threads measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct RoleCounts {
    /// Payload bytes sent (source) or received (sink).
    pub bytes: u64,
    /// Messages: whole `size`-byte messages (a short last one counts), or payloads.
    pub messages: u64,
    /// Connections made (source), accepted (sink).
    pub connections: u64,
    /// The threads' CPU over their interval.
    pub cpu: Duration,
}

/// What one role of a relay counted, beyond what every role reports: the source's
/// threads (sending role), or the relay's and the sink's (receiving role).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelaySide {
    /// Payload bytes the source sent, or the sink received (every one checked).
    pub bytes: u64,
    /// Messages sent or received.
    pub messages: u64,
    /// Connections the source made, or the sink accepted.
    pub connections: u64,
    /// The source's or the sink's threads' CPU over the run, ns.
    pub cpu_ns: u64,
    /// The source: why the relay ended one of its connections before the source was
    /// done with it (a reset, a broken pipe), if it did. It fails the run unless the
    /// relay's role failed first (its error is then the one shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_short: Option<String>,
    /// The relay's side: what its copiers did (absent on the source's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<RelayCopies>,
}

/// What the relay's threads did over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayCopies {
    /// What the copiers counted.
    pub copied: Copied,
    /// Connections the relay accepted.
    pub relayed: u64,
    /// The relay workers' own CPU, ns.
    pub cpu_ns: u64,
    /// This process's CPU over the run, ns (every thread's, the kernel's io_uring
    /// workers' included).
    pub process_cpu_ns: u64,
    /// Of it, what this role's threads (relay, sink and the role's own) account for, ns.
    pub accounted_cpu_ns: u64,
    /// The pipe size the kernel granted (splice methods).
    pub pipe_size: Option<u64>,
}

/// What a relay run measured.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The source's counts.
    pub source: RoleCounts,
    /// The sink's counts.
    pub sink: RoleCounts,
    /// What the relay's copiers did.
    pub copied: Copied,
    /// Connections the relay accepted.
    pub relayed: u64,
    /// The relay workers' own CPU.
    pub relay_cpu: Duration,
    /// CPU of the relay's process that no role's thread accounts for over the run: the
    /// kernel's io_uring workers (counted with the relay for the io-uring methods,
    /// reported otherwise as noise).
    pub unaccounted_cpu: Duration,
    /// From the start line to the sink's end of the last connection.
    pub interval: Duration,
    /// The pipe size the kernel granted (splice methods).
    pub pipe_size: Option<usize>,
    /// Pingpong: each message's time from the source's write to the sink's last byte.
    pub latency: Option<Histogram<u64>>,
    /// Ctrl-C cut it short.
    pub interrupted: bool,
}

impl Outcome {
    /// The relay's CPU: its threads', plus the kernel workers' for the io-uring methods.
    pub fn relay_cpu_total(&self, method: Method) -> Duration {
        if matches!(method, Method::IoUring | Method::IoUringSplice) {
            self.relay_cpu + self.unaccounted_cpu
        } else {
            self.relay_cpu
        }
    }

    /// A run's outcome from what its two roles reported; `same_process` when the source
    /// ran in the relay's process (its threads' CPU is then accounted for too).
    ///
    /// # Errors
    /// A role that reported nothing of a relay, or counts that disagree between the
    /// roles.
    pub fn of(roles: &super::Roles, same_process: bool) -> Result<Outcome, String> {
        let (Some(sender), Some(receiver)) = (roles.senders.first(), roles.receivers.first())
        else {
            return Err("a relay run came back without its roles".into());
        };
        let (Some(source), Some(sink)) = (&sender.relay, &receiver.relay) else {
            return Err("a relay run came back without the relay's counts".into());
        };
        let Some(relay) = &sink.relay else {
            return Err("the receiving role reported no relay".into());
        };
        let role = |s: &RelaySide| RoleCounts {
            bytes: s.bytes,
            messages: s.messages,
            connections: s.connections,
            cpu: Duration::from_nanos(s.cpu_ns),
        };
        let mut accounted = relay.accounted_cpu_ns;
        if same_process {
            accounted = accounted
                .saturating_add(source.cpu_ns)
                .saturating_add(u64::try_from(sender.cpu.exact.as_nanos()).unwrap_or(u64::MAX));
        }
        let out = Outcome {
            source: role(source),
            sink: role(sink),
            copied: relay.copied,
            relayed: relay.relayed,
            relay_cpu: Duration::from_nanos(relay.cpu_ns),
            unaccounted_cpu: Duration::from_nanos(relay.process_cpu_ns.saturating_sub(accounted)),
            // From the run's start (a role that woke late cannot shorten it), as every
            // workload's figures are timed.
            interval: Duration::from_secs_f64(roles.interval(Role::Receiver)),
            pipe_size: relay.pipe_size.map(|p| p as usize),
            latency: (receiver.latencies.iter())
                .find(|(kind, _)| *kind == LatencyKind::OneWay)
                .map(|(_, h)| h.clone()),
            interrupted: sender.interrupted || receiver.interrupted,
        };
        if let Some(e) = source.cut_short.as_ref().filter(|_| !out.interrupted) {
            return Err(format!(
                "source: the relay ended a connection before the source was done with it: {e}"
            ));
        }
        if out.source.bytes != out.copied.bytes || out.copied.bytes != out.sink.bytes {
            return Err(format!(
                "the counts disagree: the source sent {} bytes, the relay copied {}, the sink \
                 received {}",
                out.source.bytes, out.copied.bytes, out.sink.bytes
            ));
        }
        Ok(out)
    }
}

impl Setup {
    /// Whether a run that Ctrl-C did not cut short carried all it was asked to: every
    /// short connection, every long stream's bytes.
    ///
    /// # Errors
    /// What is missing.
    pub fn check_complete(&self, o: &Outcome) -> Result<(), String> {
        if o.interrupted {
            return Ok(());
        }
        let p = self.parallel.max(1) as u64;
        match self.shape {
            Shape::Connections(n) if o.source.connections != n => Err(format!(
                "the source made {} of the {n} connections asked for",
                o.source.connections
            )),
            Shape::Streams(Stop::Bytes(b)) if o.sink.bytes != b * p => Err(format!(
                "the sink received {} bytes of the {} asked for ({b} on each of {p} connections)",
                o.sink.bytes,
                b * p
            )),
            Shape::Pingpong(Stop::Count(n)) if o.sink.messages != n => Err(format!(
                "the sink received {} of the {n} messages asked for",
                o.sink.messages
            )),
            _ => Ok(()),
        }
    }
}

/// What one role's threads share: counters that say when each may stop, and the first
/// error.
#[derive(Default)]
struct Coord {
    /// The source has finished (its role said so, or is gone).
    source_done: AtomicBool,
    /// Connections the relay accepted.
    accepted: AtomicU64,
    /// Connections the relay made to the sink.
    forwarded: AtomicU64,
    /// Relay workers still running.
    relay_live: AtomicU64,
    /// Connections the sink accepted.
    sunk: AtomicU64,
    /// Something failed, or the other role is gone: everyone stops.
    abort: AtomicBool,
    /// The first failure, by role, and whether it was only a peer going away (a reset, a
    /// broken pipe), which a failure that caused it replaces.
    error: Mutex<Option<(String, io::ErrorKind, bool)>>,
    /// Ctrl-C stopped a thread.
    interrupted: AtomicBool,
    /// The source: a connection the relay ended before the source was done with it.
    cut_short: Mutex<Option<String>>,
    /// The relay's open connections, ended at once when the run fails so that no copy
    /// waits on a peer that is gone.
    open: Mutex<Vec<std::sync::Weak<(End, End)>>>,
}

impl Coord {
    fn fail(&self, role: &str, e: &io::Error) {
        let consequence = crate::transport::peer_gone(e);
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if !slot
            .as_ref()
            .is_some_and(|(_, _, was)| !*was || consequence)
        {
            *slot = Some((format!("{role}: {e}"), e.kind(), consequence));
        }
        self.abort.store(true, Ordering::SeqCst);
        drop(slot);
        self.end_all();
    }

    /// End every open connection, so that no call waits on them.
    fn end_all(&self) {
        for ends in self.open.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            if let Some(ends) = ends.upgrade() {
                end_both(&ends);
            }
        }
    }

    /// Keep `ends` to be ended if the run fails (and end them now if it has).
    fn track(&self, ends: &Arc<(End, End)>) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|w| w.strong_count() > 0);
        open.push(Arc::downgrade(ends));
        drop(open);
        if self.aborted() {
            end_both(ends);
        }
    }

    fn aborted(&self) -> bool {
        self.abort.load(Ordering::SeqCst)
    }

    /// The sink may stop accepting: the relay is done and every connection it made has
    /// been accepted.
    fn sink_may_stop(&self) -> bool {
        self.aborted()
            || (self.relay_live.load(Ordering::SeqCst) == 0
                && self.sunk.load(Ordering::SeqCst) >= self.forwarded.load(Ordering::SeqCst))
    }

    /// The first failure, if any, of its kind (a peer gone stays one, for the runner to
    /// weigh against the other role's failure).
    fn failure(&self) -> Option<io::Error> {
        let slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref()
            .map(|(e, kind, _)| io::Error::new(*kind, e.clone()))
    }
}

/// A relay worker's place among the live ones, given up when it ends: after a panic the
/// run is aborted too (its connections ended, the others told to stop).
struct RelayOut<'a>(&'a Coord);

impl Drop for RelayOut<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abort.store(true, Ordering::SeqCst);
            self.0.end_all();
        }
        self.0.relay_live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Shut both connections of a relayed pair down, so every blocked call on them returns.
pub fn end_both(ends: &(End, End)) {
    for e in [&ends.0, &ends.1] {
        let _ = nix::sys::socket::shutdown(e.raw_fd(), nix::sys::socket::Shutdown::Both);
    }
}

/// Write all of `buf`, giving up at a tick if the run was aborted; returns false if it
/// did.
fn send_all(mut to: &End, buf: &[u8], coord: &Coord) -> io::Result<bool> {
    let mut off = 0;
    while off < buf.len() {
        match to.write(&buf[off..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => off += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if copy::is_timeout(&e) => {
                if coord.aborted() {
                    return Ok(false);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// A connected or accepted socket as a copy method's end: blocking, Nagle off for TCP.
fn end_of(s: socket2::Socket, t: TransportKind) -> io::Result<End> {
    s.set_nonblocking(false)?;
    Ok(match t {
        TransportKind::Unix => End::Unix(UnixStream::from(std::os::fd::OwnedFd::from(s))),
        _ => {
            let s = TcpStream::from(s);
            s.set_nodelay(true)?;
            End::Tcp(s)
        }
    })
}

/// Pingpong between the source and the sink, both threads of this process: when the
/// message in flight was written, and the sink's word that it has it all.
struct Ping {
    /// When the message in flight was written, in ns after `base`.
    stamp: AtomicU64,
    base: Instant,
    /// The sink's side of the acknowledgements.
    ack: Mutex<mpsc::Sender<()>>,
    /// The source's side.
    acks: Mutex<mpsc::Receiver<()>>,
}

/// The source's threads: open connections to the relay and send the pattern.
struct Source<'a> {
    shape: ShapeKind,
    stop: Stop,
    size: usize,
    transport: TransportKind,
    dialer: &'a crate::transport::connector::Dialer,
    pattern: &'a [u8],
    /// Connections claimed so far.
    next: AtomicU64,
    /// Connections to make (streams: one per thread; connections: the count).
    total: u64,
    ping: Option<&'a Ping>,
}

impl Source<'_> {
    fn run(&self, coord: &Coord, line: &Barrier, live: &mut Publisher) -> io::Result<RoleCounts> {
        line.wait();
        crate::testhooks::hold("relay-run");
        let t0 = Instant::now();
        let cpu0 = ThreadCpu::now();
        let mut c = RoleCounts::default();
        let result = self.connections(coord, t0, &mut c, live);
        c.cpu = ThreadCpu::now().since(&cpu0).exact;
        live.last(c.bytes, c.messages);
        match result {
            // The relay ended the connection: the consequence of a failure on its side
            // (which its role reports, and which is then the error shown), or a relay
            // that cut the stream short (which fails the run when the folded roles say
            // nothing else).
            // (A refused dial or an unconnected socket never had a connection to end.)
            Err(e)
                if crate::transport::peer_gone(&e)
                    && !matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionRefused | io::ErrorKind::NotConnected
                    ) =>
            {
                let mut cut = coord.cut_short.lock().unwrap_or_else(|p| p.into_inner());
                cut.get_or_insert_with(|| e.to_string());
                Ok(c)
            }
            r => r.map(|()| c),
        }
    }

    fn connections(
        &self,
        coord: &Coord,
        t0: Instant,
        c: &mut RoleCounts,
        live: &mut Publisher,
    ) -> io::Result<()> {
        // Short connections stop at their count, or at a warm-up's deadline.
        let deadline = self.stop.deadline(t0);
        loop {
            if self.next.fetch_add(1, Ordering::SeqCst) >= self.total {
                return Ok(());
            }
            if interrupt::requested() {
                coord.interrupted.store(true, Ordering::SeqCst);
                return Ok(());
            }
            if coord.aborted() {
                return Ok(());
            }
            if self.shape == ShapeKind::Connections && deadline.is_some_and(|d| Instant::now() >= d)
            {
                return Ok(());
            }
            let conn = end_of(self.dialer.connect_socket()?, self.transport)?;
            c.connections += 1;
            conn.set_timeouts(Some(TICK))?;
            let more = match self.shape {
                ShapeKind::Connections => {
                    let mut payload = std::borrow::Cow::Borrowed(&self.pattern[..self.size]);
                    if crate::testhooks::fault("relay-source-corrupts") && c.connections == 1 {
                        // A test build's source that sends one wrong byte: the sink must see it.
                        payload.to_mut()[self.size / 2] ^= 1;
                    }
                    let done = send_all(&conn, &payload, coord)?;
                    if done {
                        c.bytes += self.size as u64;
                        c.messages += 1;
                        live.publish(c.bytes, c.messages);
                    }
                    done
                }
                ShapeKind::Streams => self.stream(&conn, t0, coord, c, live)?,
                ShapeKind::Pingpong => self.pingpong(&conn, t0, coord, c, live)?,
            };
            conn.shutdown_write()?;
            // Wait for the relay to close its end, so the connection's teardown is the
            // relay's work inside the run, not left behind it.
            let mut byte = [0u8; 1];
            while !coord.aborted() {
                match (&conn).read(&mut byte) {
                    Ok(_) => break,
                    Err(e) if copy::is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            if !more {
                return Ok(());
            }
        }
    }

    /// Send `size`-byte messages until the stop; false if the run is to end.
    fn stream(
        &self,
        conn: &End,
        t0: Instant,
        coord: &Coord,
        c: &mut RoleCounts,
        live: &mut Publisher,
    ) -> io::Result<bool> {
        let limit = match self.stop {
            Stop::Bytes(b) => b,
            _ => u64::MAX,
        };
        let deadline = self.stop.deadline(t0);
        let check_every = (16384 / self.size.max(1)).max(1) as u64;
        let mut until_check = check_every;
        let mut sent = 0u64;
        while sent < limit {
            let off = (sent % PERIOD as u64) as usize;
            let len = (limit - sent).min(self.size as u64) as usize;
            if !send_all(conn, &self.pattern[off..off + len], coord)? {
                return Ok(false);
            }
            sent += len as u64;
            c.bytes += len as u64;
            c.messages += 1;
            until_check -= 1;
            if until_check == 0 {
                until_check = check_every;
                live.publish(c.bytes, c.messages);
                if interrupt::requested() {
                    coord.interrupted.store(true, Ordering::SeqCst);
                    return Ok(false);
                }
                if deadline.is_some_and(|d| Instant::now() >= d) || coord.aborted() {
                    break;
                }
            }
        }
        Ok(true)
    }

    /// One message at a time, each after the sink has the last.
    fn pingpong(
        &self,
        conn: &End,
        t0: Instant,
        coord: &Coord,
        c: &mut RoleCounts,
        live: &mut Publisher,
    ) -> io::Result<bool> {
        let ping = self
            .ping
            .ok_or_else(|| io::Error::other("a relay pingpong needs its sink in this process"))?;
        let acks = ping.acks.lock().unwrap_or_else(|p| p.into_inner());
        let deadline = self.stop.deadline(t0);
        let max = self.stop.max_messages();
        let mut sent = 0u64;
        while c.messages < max {
            if interrupt::requested() {
                coord.interrupted.store(true, Ordering::SeqCst);
                return Ok(false);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) || coord.aborted() {
                break;
            }
            let off = (sent % PERIOD as u64) as usize;
            ping.stamp
                .store(ping.base.elapsed().as_nanos() as u64, Ordering::Release);
            if !send_all(conn, &self.pattern[off..off + self.size], coord)? {
                return Ok(false);
            }
            sent += self.size as u64;
            c.bytes += self.size as u64;
            c.messages += 1;
            live.publish(c.bytes, c.messages);
            loop {
                match acks.recv_timeout(TICK) {
                    Ok(()) => break,
                    Err(RecvTimeoutError::Timeout) => {
                        if coord.aborted() || interrupt::requested() {
                            return Ok(false);
                        }
                    }
                    Err(RecvTimeoutError::Disconnected) => return Ok(false),
                }
            }
        }
        Ok(true)
    }
}

/// What one relay worker did.
#[derive(Default)]
struct RelayCounts {
    copied: Copied,
    cpu: Duration,
    pipe_size: Option<usize>,
}

/// Accept the source's connections until it is done and none is left pending; relay
/// each to the sink.
fn relay_worker(
    listener: &crate::transport::connector::Listener,
    sink: &crate::transport::connector::Dialer,
    transport: TransportKind,
    mut copier: Box<dyn copy::Copier>,
    coord: &Coord,
    line: &Barrier,
) -> io::Result<RelayCounts> {
    // A name to find it by (top -H, /proc/PID/task/TID/comm; the tests read its CPU
    // time there, outside sockbench).
    let _ = nix::sys::prctl::set_name(c"sb-relay");
    line.wait();
    let cpu0 = ThreadCpu::now();
    let mut r = RelayCounts {
        pipe_size: copier.pipe_size(),
        ..RelayCounts::default()
    };
    let result = (|| {
        loop {
            if coord.aborted() {
                return Ok(());
            }
            // Read before the accept: every connection the source made is pending by the
            // time it says it is done, so an empty queue after that means all were taken.
            let done = coord.source_done.load(Ordering::SeqCst);
            let client = match listener.accept_socket() {
                Ok(s) => s,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::Interrupted
                            | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    if done {
                        return Ok(());
                    }
                    if interrupt::requested() {
                        coord.interrupted.store(true, Ordering::SeqCst);
                        return Ok(());
                    }
                    listener.ready(ACCEPT_TICK)?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let client = end_of(client, transport)?;
            coord.accepted.fetch_add(1, Ordering::SeqCst);
            if crate::testhooks::fault("relay-cuts-short") {
                // A test build's relay that ends each connection before copying a byte
                // and carries on: the run must fail, though no role reports an error.
                let _ =
                    nix::sys::socket::shutdown(client.raw_fd(), nix::sys::socket::Shutdown::Both);
                continue;
            }
            let upstream = end_of(sink.connect_socket()?, transport)?;
            coord.forwarded.fetch_add(1, Ordering::SeqCst);
            client.set_timeouts(Some(TICK))?;
            upstream.set_timeouts(Some(TICK))?;
            let ends = Arc::new((client, upstream));
            coord.track(&ends);
            match copier.copy(&ends.0, &ends.1, &mut r.copied) {
                Ok(()) => {}
                // Ctrl-C: the source stops and the relay with it; what it copied counts.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    coord.interrupted.store(true, Ordering::SeqCst);
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    })();
    r.cpu = ThreadCpu::now().since(&cpu0).exact;
    crate::testhooks::hold("relay-end");
    result.map(|()| r)
}

/// The sink's threads: accept, read to the end, check every byte.
struct Sink<'a> {
    size: usize,
    pattern: &'a [u8],
    transport: TransportKind,
    ping: Option<&'a Ping>,
}

/// What one sink worker measured.
#[derive(Default)]
struct SinkCounts {
    role: RoleCounts,
    /// When its last connection ended.
    last_end: Option<Instant>,
    latency: Option<Histogram<u64>>,
}

impl Sink<'_> {
    fn run(
        &self,
        listener: &crate::transport::connector::Listener,
        coord: &Coord,
        line: &Barrier,
        live: &mut Publisher,
    ) -> io::Result<SinkCounts> {
        let mut buf = vec![0u8; SINK_READ.max(self.size)];
        let mut s = SinkCounts {
            latency: self.ping.map(|_| latency_histogram()),
            ..SinkCounts::default()
        };
        line.wait();
        let cpu0 = ThreadCpu::now();
        let result = (|| {
            loop {
                // Read before the accept, as the relay does: once the relay is done and
                // every connection it made was counted, an empty queue is the end.
                let done = coord.sink_may_stop();
                let conn = match listener.accept_socket() {
                    Ok(c) => c,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock
                                | io::ErrorKind::Interrupted
                                | io::ErrorKind::ConnectionAborted
                        ) =>
                    {
                        if done || coord.aborted() {
                            return Ok(());
                        }
                        listener.ready(ACCEPT_TICK)?;
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let conn = end_of(conn, self.transport)?;
                coord.sunk.fetch_add(1, Ordering::SeqCst);
                s.role.connections += 1;
                conn.set_timeouts(Some(TICK))?;
                if !self.connection(&conn, &mut buf, coord, &mut s, live)? {
                    return Ok(());
                }
                s.last_end = Some(Instant::now());
            }
        })();
        s.role.cpu = ThreadCpu::now().since(&cpu0).exact;
        live.last(s.role.bytes, s.role.messages);
        result.map(|()| s)
    }

    /// Read one connection to its end; false if the run was aborted.
    fn connection(
        &self,
        mut conn: &End,
        buf: &mut [u8],
        coord: &Coord,
        s: &mut SinkCounts,
        live: &mut Publisher,
    ) -> io::Result<bool> {
        if crate::testhooks::fault("relay-sink-fails") && s.role.connections >= 2 {
            // A test build's sink that fails at its second connection: the others must stop.
            return Err(io::Error::other("test fault: the sink fails"));
        }
        let mut offset = 0u64;
        // Pingpong: bytes of the current message still to come.
        let mut due = self.size as u64;
        // Read at most to the end of the message in pingpong, so each one is timed when
        // its own last byte comes.
        loop {
            let want = if self.ping.is_some() {
                due as usize
            } else {
                buf.len()
            };
            let n = match conn.read(&mut buf[..want.max(1)]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if copy::is_timeout(&e) => {
                    if coord.aborted() {
                        return Ok(false);
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            let at = (offset % PERIOD as u64) as usize;
            if buf[..n] != self.pattern[at..at + n] {
                let first = buf[..n]
                    .iter()
                    .zip(&self.pattern[at..])
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                return Err(io::Error::other(format!(
                    "the sink received a byte the source did not send at offset {} of a connection \
                     (the relay dropped, repeated or reordered data)",
                    offset + first as u64
                )));
            }
            offset += n as u64;
            s.role.bytes += n as u64;
            if let Some(ping) = self.ping {
                due -= n as u64;
                if due == 0 {
                    let now = ping.base.elapsed().as_nanos() as u64;
                    let sent = ping.stamp.load(Ordering::Acquire);
                    if let Some(h) = s.latency.as_mut() {
                        record(h, Duration::from_nanos(now.saturating_sub(sent)));
                    }
                    s.role.messages += 1;
                    due = self.size as u64;
                    let ack = ping.ack.lock().unwrap_or_else(|p| p.into_inner());
                    let _ = ack.send(());
                }
            }
            let whole = match self.ping {
                Some(_) => s.role.messages,
                None => s.role.messages + offset / self.size.max(1) as u64,
            };
            live.publish(s.role.bytes, whole);
        }
        if self.ping.is_none() {
            s.role.messages += offset.div_ceil(self.size.max(1) as u64);
        }
        Ok(true)
    }
}

/// A relay run's three roles: the source is the sending role (its threads dial the
/// relay through the scenario's listener); the relay and the sink are the receiving
/// role (the relay's threads accept, dial a sink listener of their own and copy; the
/// sink's threads check every byte). The relay's cost is that role's alone: its threads'
/// CPU, and its process's CPU that no thread of either role accounts for (the kernel's
/// io_uring workers).
pub struct Relay {
    options: RelayOptions,
    transport: TransportKind,
    size: usize,
    stop: Stop,
    pattern: Vec<u8>,
    /// Pingpong: the source and the sink meet here (both roles are threads of one
    /// process).
    ping: Option<Ping>,
}

impl Relay {
    /// Threads per role: one for a pingpong, no more than the connections for short
    /// connections (a thread with none to make would end the interval lines early).
    fn threads(&self) -> usize {
        role_threads(&self.options, self.stop)
    }
}

/// Threads per role for `options` stopping at `stop` (see [`Relay::threads`]).
fn role_threads(options: &RelayOptions, stop: Stop) -> usize {
    let asked = options.threads.max(1) as usize;
    match (options.shape, stop) {
        (ShapeKind::Pingpong, _) => 1,
        (ShapeKind::Connections, Stop::Count(n)) => {
            asked.min(usize::try_from(n.max(1)).unwrap_or(usize::MAX))
        }
        _ => asked,
    }
}

/// Wait for `handles` to finish, looking at the peer link every 20 ms; `on_peer` once
/// the peer's signal `s` comes (or the peer is gone).
fn join_watching<T>(
    handles: Vec<std::thread::ScopedJoinHandle<'_, T>>,
    link: &super::PeerLink,
    s: PeerSignal,
    on_peer: &dyn Fn(),
) -> Vec<std::thread::Result<T>> {
    let mut heard = false;
    while handles.iter().any(|h| !h.is_finished()) {
        if heard {
            std::thread::sleep(Duration::from_millis(5));
        } else if link.wait_for(s, Duration::from_millis(20)) {
            heard = true;
            on_peer();
        }
    }
    handles.into_iter().map(|h| h.join()).collect()
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Workload for Relay {
    fn sender(&self, mut side: Side) -> io::Result<SideReport> {
        let Some(Endpoint::Dial(dialer)) = side.endpoint.take() else {
            return Err(io::Error::other("the relay's source got no dialer"));
        };
        let threads = self.threads();
        let total = match (self.options.shape, self.stop) {
            (ShapeKind::Connections, Stop::Count(n)) => n,
            // A warm-up: connections until its deadline.
            (ShapeKind::Connections, _) => u64::MAX,
            _ => threads as u64,
        };
        let source = Source {
            shape: self.options.shape,
            stop: self.stop,
            size: self.size,
            transport: self.transport,
            dialer: &dialer,
            pattern: &self.pattern,
            next: AtomicU64::new(0),
            total,
            ping: self.ping.as_ref(),
        };
        let coord = Coord::default();
        let go = Barrier::new(threads + 1);
        // Each thread publishes its totals for --interval; the role keeps the publishers
        // until every thread is done, as the first one dropped ends the sampling.
        let mut lives: Vec<Publisher> = (0..threads)
            .map(|_| Publisher::new(side.start.live(), Role::Sender, None))
            .collect();
        let (meter, ran) = std::thread::scope(|scope| {
            let handles: Vec<_> = lives
                .iter_mut()
                .map(|live| {
                    let (source, coord, go) = (&source, &coord, &go);
                    scope.spawn(move || {
                        let r = source.run(coord, go, live);
                        if let Err(e) = &r {
                            coord.fail("source", e);
                        }
                        r
                    })
                })
                .collect();
            let meter = Meter::start(&side.start);
            go.wait();
            // The relay's role gone before the source is done: it failed, and nothing
            // will take the source's bytes.
            let ran = join_watching(handles, &side.link, PeerSignal::ReceiverDone, &|| {
                coord.abort.store(true, Ordering::SeqCst);
            });
            (meter, ran)
        });
        side.link.signal(PeerSignal::SenderDone);
        drop(lives);
        let mut counts = RoleCounts::default();
        for r in ran {
            match r {
                Ok(Ok(c)) => {
                    counts.bytes += c.bytes;
                    counts.messages += c.messages;
                    counts.connections += c.connections;
                    counts.cpu += c.cpu;
                }
                Ok(Err(_)) => {}
                Err(_) => return Err(io::Error::other("a source thread panicked")),
            }
        }
        if let Some(e) = coord.failure() {
            return Err(e);
        }
        let mut report = meter.stop(None, side.conn.as_ref());
        report.bytes = counts.bytes;
        report.messages = counts.messages;
        report.interrupted = coord.interrupted.load(Ordering::SeqCst) || interrupt::requested();
        report.relay = Some(RelaySide {
            bytes: counts.bytes,
            messages: counts.messages,
            connections: counts.connections,
            cpu_ns: nanos(counts.cpu),
            cut_short: (coord.cut_short.into_inner()).unwrap_or_else(|p| p.into_inner()),
            relay: None,
        });
        Ok(report)
    }

    fn receiver(&self, mut side: Side) -> io::Result<SideReport> {
        let Some(Endpoint::Listen(listener)) = side.endpoint.take() else {
            return Err(io::Error::other("the relay got no listener"));
        };
        let threads = self.threads();
        // The sink listens on a listener of this role's own (a Unix one's file is gone as
        // soon as it is bound).
        let dir = match self.transport.uses_path() {
            true => Some(
                crate::transport::RunDir::open(None)
                    .map_err(|e| io::Error::other(format!("{e:#}")))?,
            ),
            false => None,
        };
        let opts = crate::transport::TransportOptions {
            nodelay: true,
            dir: dir.as_ref().map(|d| d.path()).unwrap_or_default(),
            message_bytes: self.size,
            ..crate::transport::TransportOptions::default()
        };
        let (sink_listener, sink_dialer, _) =
            crate::transport::connector::open(self.transport, &opts, 0, false)
                .map_err(|e| io::Error::other(format!("the sink cannot listen: {e:#}")))?;
        drop(dir);
        // Several threads accept from each listener: none may wait inside accept(2) for a
        // connection another took.
        listener.set_nonblocking(true)?;
        sink_listener.set_nonblocking(true)?;
        // Every copier is set up before the start, so a ring or a runtime is not in the run.
        let copiers = (0..threads)
            .map(|_| copy::copier(self.options.method, &self.options.copy))
            .collect::<io::Result<Vec<_>>>()?;
        let sink = Sink {
            size: self.size,
            pattern: &self.pattern,
            transport: self.transport,
            ping: self.ping.as_ref(),
        };
        let coord = Coord {
            relay_live: AtomicU64::new(threads as u64),
            ..Coord::default()
        };
        let go = Barrier::new(2 * threads + 1);
        let mut lives: Vec<Publisher> = (0..threads)
            .map(|_| Publisher::new(side.start.live(), Role::Receiver, None))
            .collect();
        let (meter, proc0, relays, sinks) = std::thread::scope(|scope| {
            let sinks: Vec<_> = lives
                .iter_mut()
                .map(|live| {
                    let (sink, l, coord, go) = (&sink, &sink_listener, &coord, &go);
                    scope.spawn(move || {
                        let r = sink.run(l, coord, go, live);
                        if let Err(e) = &r {
                            coord.fail("sink", e);
                        }
                        r
                    })
                })
                .collect();
            let relays: Vec<_> = copiers
                .into_iter()
                .map(|copier| {
                    let (l, d, coord, go) = (&listener, &sink_dialer, &coord, &go);
                    let t = self.transport;
                    scope.spawn(move || {
                        // Counted out however the worker ends (a panic included), so the
                        // sinks never wait for a relay that is gone.
                        let _out = RelayOut(coord);
                        let r = relay_worker(l, d, t, copier, coord, go);
                        if let Err(e) = &r {
                            coord.fail("relay", e);
                        }
                        r
                    })
                })
                .collect();
            let meter = Meter::start(&side.start);
            let proc0 = process_cpu();
            go.wait();
            let source_done = || coord.source_done.store(true, Ordering::SeqCst);
            let relays = join_watching(relays, &side.link, PeerSignal::SenderDone, &source_done);
            // The source is gone without a word (its role failed): stop the relay too.
            source_done();
            let sinks: Vec<_> = sinks.into_iter().map(|h| h.join()).collect();
            (meter, proc0, relays, sinks)
        });
        side.link.signal(PeerSignal::ReceiverDone);
        drop(lives);
        let process = process_cpu().saturating_sub(proc0);
        let mut copied = Copied::default();
        let (mut relay_cpu, mut pipe_size) = (Duration::ZERO, None);
        for r in relays {
            match r {
                Ok(Ok(r)) => {
                    copied = copied.plus(r.copied);
                    relay_cpu += r.cpu;
                    pipe_size = pipe_size.or(r.pipe_size);
                }
                Ok(Err(_)) => {}
                Err(_) => return Err(io::Error::other("a relay thread panicked")),
            }
        }
        let mut counts = RoleCounts::default();
        let (mut last, mut latency) = (None, None);
        for s in sinks {
            match s {
                Ok(Ok(s)) => {
                    counts.bytes += s.role.bytes;
                    counts.messages += s.role.messages;
                    counts.connections += s.role.connections;
                    counts.cpu += s.role.cpu;
                    last = last.max(s.last_end);
                    latency = latency.or(s.latency);
                }
                Ok(Err(_)) => {}
                Err(_) => return Err(io::Error::other("a sink thread panicked")),
            }
        }
        if let Some(e) = coord.failure() {
            return Err(e);
        }
        let mut report = meter.stop(Some(last.unwrap_or_else(|| meter.t0())), side.conn.as_ref());
        report.bytes = counts.bytes;
        report.messages = counts.messages;
        report.interrupted = coord.interrupted.load(Ordering::SeqCst) || interrupt::requested();
        if let Some(h) = latency.filter(|h| !h.is_empty()) {
            report.latencies.push((LatencyKind::OneWay, h));
        }
        let accounted = relay_cpu + counts.cpu + report.cpu.exact;
        report.relay = Some(RelaySide {
            bytes: counts.bytes,
            messages: counts.messages,
            connections: counts.connections,
            cpu_ns: nanos(counts.cpu),
            cut_short: None,
            relay: Some(RelayCopies {
                copied,
                relayed: coord.accepted.load(Ordering::SeqCst),
                cpu_ns: nanos(relay_cpu),
                process_cpu_ns: nanos(process),
                accounted_cpu_ns: nanos(accounted),
                pipe_size: pipe_size.map(|p| p as u64),
            }),
        });
        Ok(report)
    }
}

/// `relay` as the plan and the runner see it.
pub struct RelaySpec;

/// What a relay of `shape` is judged by (`compare`'s rows, its rankings, and the spec):
/// throughput, or under pingpong the median time from the source's write to the sink's
/// read (lower is better).
pub fn headline(shape: ShapeKind) -> crate::measure::headline::Headline {
    use crate::measure::headline::Headline;
    match shape {
        ShapeKind::Streams | ShapeKind::Connections => Headline::throughput("bits_per_second"),
        ShapeKind::Pingpong => Headline::latency("p50_ns"),
    }
}

impl Spec for RelaySpec {
    fn wiring(&self, _transport: TransportKind) -> Wiring {
        Wiring::ListenDial
    }

    fn table(&self) -> TableKind {
        TableKind::Throughput
    }

    /// Streams' and connections' (the default shape's); a relay's rows name their
    /// shape's: [`headline`].
    fn headline(&self) -> crate::measure::headline::Headline {
        headline(ShapeKind::Streams)
    }

    fn headline_of(&self, run: &crate::results::RunFigures) -> Option<f64> {
        Some(run.bits_per_second)
    }

    fn transports(&self) -> &'static [TransportKind] {
        &TRANSPORTS
    }

    fn refuses_on_server(
        &self,
        sc: &crate::scenario::Scenario,
        peer: crate::vocab::Peer,
    ) -> Option<String> {
        if peer != crate::vocab::Peer::Parent {
            // Its threads and copy buffers are not bounded by a server's stream and
            // memory limits.
            return Some(
                "a relay runs only with --placement processes, not against a server".into(),
            );
        }
        let shape = sc.extras.relay.map(|r| r.shape);
        (shape == Some(ShapeKind::Pingpong)).then(|| {
            "a relay pingpong times each message from the source's write to the sink's read on one clock: run it with --placement threads".into()
        })
    }

    fn refuses(&self, sc: &crate::scenario::Scenario) -> Option<String> {
        if let Some(why) = refuses_transport(sc.transport) {
            return Some(why);
        }
        let Some(options) = sc.extras.relay else {
            return Some("a relay scenario names no copy method".into());
        };
        if let Some(why) = options.method.unavailable() {
            return Some(format!("{}: {why}", options.method));
        }
        if options.threads == 0 || options.threads > 1024 {
            return Some("--parallel must be between 1 and 1024".into());
        }
        match (options.shape, sc.stop) {
            (ShapeKind::Streams, Stop::Duration(_) | Stop::Bytes(_))
            | (ShapeKind::Connections, Stop::Count(_))
            | (ShapeKind::Pingpong, Stop::Duration(_) | Stop::Count(_)) => None,
            (shape, stop) => Some(format!("a relay's {shape:?} do not stop at {stop:?}")),
        }
    }

    fn roles(&self, sc: &crate::scenario::Scenario, stop: Stop) -> Arc<dyn Workload> {
        let options = sc.extras.relay.unwrap_or(RelayOptions {
            method: Method::ReadWrite,
            copy: copy::Options::default(),
            shape: ShapeKind::Streams,
            threads: 1,
        });
        let size = sc.size as usize;
        let ping = (options.shape == ShapeKind::Pingpong).then(|| {
            let (tx, rx) = mpsc::channel();
            Ping {
                stamp: AtomicU64::new(0),
                base: Instant::now(),
                ack: Mutex::new(tx),
                acks: Mutex::new(rx),
            }
        });
        Arc::new(Relay {
            options,
            transport: sc.transport,
            size,
            stop,
            pattern: pattern(PERIOD + size.max(SINK_READ)),
            ping,
        })
    }

    /// What reached the sink through the relay, timed by the sink.
    fn tally(&self, _sc: &crate::scenario::Scenario, roles: &Roles) -> Tally {
        let bytes = Roles::sum(&roles.receivers, |s| s.bytes);
        let messages = Roles::sum(&roles.receivers, |s| s.messages);
        Tally {
            bytes_received: bytes,
            messages_received: messages,
            delivered_bytes: bytes,
            counted: messages,
            ..Tally::timed_by(Role::Receiver)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relay_is_judged_by_throughput_or_under_pingpong_by_its_median_time() {
        for shape in [ShapeKind::Streams, ShapeKind::Connections] {
            let h = headline(shape);
            assert_eq!((h.name, h.higher_is_better), ("bits_per_second", true));
        }
        let h = headline(ShapeKind::Pingpong);
        assert_eq!((h.name, h.higher_is_better), ("p50_ns", false));
        assert_eq!(RelaySpec.headline(), headline(ShapeKind::Streams));
    }

    #[test]
    fn the_pattern_does_not_repeat_within_its_period_at_any_power_of_two() {
        let p = pattern(2 * PERIOD);
        assert_eq!(p[..PERIOD], p[PERIOD..]);
        for shift in [1usize, 2, 4, 8, 4096, 32768] {
            assert_ne!(p[..64], p[shift..shift + 64], "{shift}");
        }
        // Every byte value turns up: a fill of one value would not test much.
        let mut seen = [false; 256];
        p.iter().for_each(|&b| seen[b as usize] = true);
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn addresses_and_paths_are_told_apart() {
        assert_eq!(
            Target::parse("127.0.0.1:5000").unwrap(),
            Target::Tcp("127.0.0.1:5000".parse().unwrap())
        );
        assert_eq!(
            Target::parse("[::1]:80").unwrap(),
            Target::Tcp("[::1]:80".parse().unwrap())
        );
        assert_eq!(
            Target::parse("/tmp/x.sock").unwrap(),
            Target::Unix("/tmp/x.sock".into())
        );
        assert_eq!(
            Target::parse("relay.sock").unwrap(),
            Target::Unix("relay.sock".into())
        );
        let long = format!("/tmp/{}", "a".repeat(103));
        assert!(Target::parse(&long).unwrap_err().contains("at most 107"));
        assert!(Target::parse(&format!("/tmp/{}", "a".repeat(102))).is_ok());
        assert!(Target::parse("no-such-host.invalid:80")
            .unwrap_err()
            .contains("neither"));
    }

    #[test]
    fn only_stream_sockets_can_be_a_relays_ends() {
        for t in TransportKind::ALL {
            assert_eq!(
                refuses_transport(t).is_none(),
                matches!(
                    t,
                    TransportKind::Tcp | TransportKind::Tcp6 | TransportKind::Unix
                ),
                "{t}"
            );
        }
    }

    #[test]
    fn a_failure_stops_every_role_and_the_first_cause_is_kept() {
        let c = Coord {
            relay_live: AtomicU64::new(1),
            forwarded: AtomicU64::new(5),
            ..Coord::default()
        };
        assert!(!c.sink_may_stop());
        c.fail("relay", &io::ErrorKind::ConnectionReset.into());
        c.fail("sink", &io::Error::other("first"));
        c.fail("source", &io::Error::other("second"));
        assert!(c.aborted() && c.sink_may_stop());
        let e = c.error.lock().unwrap().clone().unwrap();
        assert_eq!(e.0, "sink: first");
        assert_eq!(c.failure().unwrap().to_string(), "sink: first");
        // A role whose only failure is a peer gone says so by its kind, for the runner
        // to weigh it against the other role's failure (a refused dial after the sink
        // failed is not the run's cause).
        let c = Coord::default();
        c.fail("source", &io::ErrorKind::ConnectionRefused.into());
        let e = c.failure().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
        assert!(e.to_string().starts_with("source: "), "{e}");
        assert!(crate::transport::peer_gone(&e));
    }

    #[test]
    fn short_connections_get_no_more_threads_than_connections() {
        let o = |shape, threads| RelayOptions {
            method: Method::ReadWrite,
            copy: copy::Options::default(),
            shape,
            threads,
        };
        assert_eq!(
            role_threads(&o(ShapeKind::Connections, 8), Stop::Count(2)),
            2
        );
        assert_eq!(
            role_threads(&o(ShapeKind::Connections, 8), Stop::Count(20)),
            8
        );
        // A warm-up of short connections runs for a time, on every thread.
        let warm = Stop::Duration(Duration::from_millis(100));
        assert_eq!(role_threads(&o(ShapeKind::Connections, 8), warm), 8);
        assert_eq!(role_threads(&o(ShapeKind::Streams, 3), Stop::Bytes(1)), 3);
        assert_eq!(role_threads(&o(ShapeKind::Pingpong, 3), Stop::Count(9)), 1);
        assert_eq!(role_threads(&o(ShapeKind::Streams, 0), Stop::Bytes(1)), 1);
    }

    #[test]
    fn a_run_is_complete_only_with_all_it_was_asked_to_carry() {
        let mut s = Setup::new(
            Method::ReadWrite,
            TransportKind::Tcp,
            100,
            Shape::Connections(5),
        );
        let o = |connections, bytes, messages, interrupted| Outcome {
            source: RoleCounts {
                connections,
                ..RoleCounts::default()
            },
            sink: RoleCounts {
                bytes,
                messages,
                ..RoleCounts::default()
            },
            copied: Copied::default(),
            relayed: 0,
            relay_cpu: Duration::ZERO,
            unaccounted_cpu: Duration::ZERO,
            interval: Duration::ZERO,
            pipe_size: None,
            latency: None,
            interrupted,
        };
        assert!(s.check_complete(&o(5, 500, 5, false)).is_ok());
        let e = s.check_complete(&o(4, 400, 4, false)).unwrap_err();
        assert!(e.contains("made 4 of the 5 connections"), "{e}");
        // Ctrl-C: what was carried is what counts.
        assert!(s.check_complete(&o(4, 400, 4, true)).is_ok());
        s.shape = Shape::Streams(Stop::Bytes(1000));
        s.parallel = 3;
        assert!(s.check_complete(&o(3, 3000, 30, false)).is_ok());
        let e = s.check_complete(&o(3, 2999, 30, false)).unwrap_err();
        assert!(e.contains("2999 bytes of the 3000"), "{e}");
        s.shape = Shape::Pingpong(Stop::Count(10));
        assert!(s.check_complete(&o(1, 1000, 10, false)).is_ok());
        assert!(s.check_complete(&o(1, 900, 9, false)).is_err());
        // A timed run carries what it carries.
        s.shape = Shape::Streams(Stop::Duration(Duration::from_millis(1)));
        assert!(s.check_complete(&o(3, 1, 1, false)).is_ok());
    }

    #[test]
    fn a_stop_a_shape_cannot_keep_is_refused() {
        let mut sc = Setup::new(
            Method::ReadWrite,
            TransportKind::Tcp,
            100,
            Shape::Connections(5),
        )
        .scenario(Duration::ZERO, 1);
        assert_eq!(RelaySpec.refuses(&sc), None);
        sc.stop = Stop::Bytes(10);
        assert!(RelaySpec.refuses(&sc).is_some());
        let mut sc = Setup::new(
            Method::ReadWrite,
            TransportKind::Tcp,
            100,
            Shape::Streams(Stop::Bytes(1)),
        )
        .scenario(Duration::ZERO, 1);
        assert_eq!(RelaySpec.refuses(&sc), None);
        sc.stop = Stop::Count(10);
        assert!(RelaySpec.refuses(&sc).is_some());
        sc.extras.relay = None;
        assert!(RelaySpec.refuses(&sc).is_some());
    }
}

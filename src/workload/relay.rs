//! `relay`: a source sends to a relay, the relay copies each connection's bytes to a
//! sink with one of the [`crate::copy`] methods, the sink checks every byte and counts.
//!
//! Three roles, each on its own threads of this process (`--parallel` of each), so the
//! relay's cost stands alone: its threads' CPU (plus the io_uring worker threads the
//! kernel runs on its behalf, which belong to this process and to no other role) and
//! the system calls its copier counted. All three meet at one start line; the measured
//! interval runs from there to the sink's end of the last connection, so throughput is
//! what reached the sink through the relay.
//!
//! The bytes are a pattern with a period of [`PERIOD`] (a prime, so it never lines up
//! with a buffer or a page) starting afresh on every connection: the sink compares each
//! read with where the pattern must be, so a relay that drops, repeats or reorders a
//! single byte fails the run.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::{latency_histogram, record, Stop};
use crate::copy::{self, Copied, End, Method};
use crate::interrupt;
use crate::measure::cpu::{process_cpu, ThreadCpu};
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
        if len > crate::plan::UNIX_PATH_MAX {
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

/// One relay run.
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
    /// Where the Unix sockets go.
    pub dir: PathBuf,
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
    /// CPU of this process that no role's thread accounts for over the run: the kernel's
    /// io_uring workers (counted with the relay for the io-uring methods, reported
    /// otherwise as noise).
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
}

/// What the roles share: counters that say when each may stop, and the first error.
#[derive(Default)]
struct Coord {
    /// Connections the source made.
    made: AtomicU64,
    /// The source threads have all finished.
    source_done: AtomicBool,
    /// Connections the relay accepted.
    accepted: AtomicU64,
    /// Connections the relay made to the sink.
    forwarded: AtomicU64,
    /// Relay workers still running.
    relay_live: AtomicU64,
    /// Connections the sink accepted.
    sunk: AtomicU64,
    /// Something failed: everyone stops.
    abort: AtomicBool,
    /// The first failure, by role, and whether it was only a peer going away (a reset, a
    /// broken pipe), which a failure that caused it replaces.
    error: Mutex<Option<(String, bool)>>,
    /// When the first source thread started.
    start: Mutex<Option<Instant>>,
    /// The source stopped for Ctrl-C.
    interrupted: AtomicBool,
    /// The relay's open connections, ended at once when the run fails so that no copy
    /// waits on a peer that is gone.
    open: Mutex<Vec<std::sync::Weak<(End, End)>>>,
}

impl Coord {
    fn fail(&self, role: &str, e: &io::Error) {
        let consequence = matches!(
            e.kind(),
            io::ErrorKind::ConnectionReset
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::UnexpectedEof
        );
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if !slot.as_ref().is_some_and(|(_, was)| !*was || consequence) {
            *slot = Some((format!("{role}: {e}"), consequence));
        }
        self.abort.store(true, Ordering::SeqCst);
        drop(slot);
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

    /// The relay may stop accepting: the source is done and every connection it made
    /// has been accepted.
    fn relay_may_stop(&self) -> bool {
        self.aborted()
            || (self.source_done.load(Ordering::SeqCst)
                && self.accepted.load(Ordering::SeqCst) >= self.made.load(Ordering::SeqCst))
    }

    /// The sink may stop accepting: the relay is done and every connection it made has
    /// been accepted.
    fn sink_may_stop(&self) -> bool {
        self.aborted()
            || (self.relay_live.load(Ordering::SeqCst) == 0
                && self.sunk.load(Ordering::SeqCst) >= self.forwarded.load(Ordering::SeqCst))
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

/// The source's threads: open connections to the relay and send the pattern.
struct Source {
    shape: Shape,
    size: usize,
    target: Target,
    pattern: Arc<Vec<u8>>,
    /// Connections still to claim (Streams and Connections).
    next: Arc<AtomicU64>,
    total: u64,
    /// Pingpong: when the message in flight was written, in ns after `base`.
    stamp: Arc<AtomicU64>,
    base: Instant,
    acks: Option<Mutex<mpsc::Receiver<()>>>,
}

impl Source {
    fn run(&self, coord: &Coord, line: &Barrier) -> io::Result<RoleCounts> {
        line.wait();
        crate::testhooks::hold("relay-run");
        let t0 = Instant::now();
        let cpu0 = ThreadCpu::now();
        {
            // The run starts when the first source does (no byte can reach the sink
            // before that), whenever the other threads get a CPU.
            let mut start = coord.start.lock().unwrap_or_else(|p| p.into_inner());
            *start = Some(start.map_or(t0, |s| s.min(t0)));
        }
        let mut c = RoleCounts::default();
        let result = self.connections(coord, t0, &mut c);
        c.cpu = ThreadCpu::now().since(&cpu0).exact;
        result.map(|()| c)
    }

    fn connections(&self, coord: &Coord, t0: Instant, c: &mut RoleCounts) -> io::Result<()> {
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
            let conn = self.target.connect()?;
            coord.made.fetch_add(1, Ordering::SeqCst);
            c.connections += 1;
            conn.set_timeouts(Some(TICK))?;
            let more = match self.shape {
                Shape::Connections(_) => {
                    let mut payload = std::borrow::Cow::Borrowed(&self.pattern[..self.size]);
                    if crate::testhooks::fault("relay-source-corrupts") && c.connections == 1 {
                        // A test build's source that sends one wrong byte: the sink must see it.
                        payload.to_mut()[self.size / 2] ^= 1;
                    }
                    let done = send_all(&conn, &payload, coord)?;
                    if done {
                        c.bytes += self.size as u64;
                        c.messages += 1;
                    }
                    done
                }
                Shape::Streams(stop) => self.stream(&conn, stop, t0, coord, c)?,
                Shape::Pingpong(stop) => self.pingpong(&conn, stop, t0, coord, c)?,
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
        stop: Stop,
        t0: Instant,
        coord: &Coord,
        c: &mut RoleCounts,
    ) -> io::Result<bool> {
        let limit = match stop {
            Stop::Bytes(b) => b,
            _ => u64::MAX,
        };
        let deadline = stop.deadline(t0);
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
        stop: Stop,
        t0: Instant,
        coord: &Coord,
        c: &mut RoleCounts,
    ) -> io::Result<bool> {
        let acks = self
            .acks
            .as_ref()
            .expect("pingpong has an ack channel")
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let deadline = stop.deadline(t0);
        let max = stop.max_messages();
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
            self.stamp
                .store(self.base.elapsed().as_nanos() as u64, Ordering::Release);
            if !send_all(conn, &self.pattern[off..off + self.size], coord)? {
                return Ok(false);
            }
            sent += self.size as u64;
            c.bytes += self.size as u64;
            c.messages += 1;
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

fn relay_worker(
    listener: &Listener,
    sink: &Target,
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
        while let Some(client) = listener.accept_unless(&|| coord.relay_may_stop())? {
            coord.accepted.fetch_add(1, Ordering::SeqCst);
            let upstream = sink.connect()?;
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
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })();
    r.cpu = ThreadCpu::now().since(&cpu0).exact;
    crate::testhooks::hold("relay-end");
    result.map(|()| r)
}

/// The sink's threads: accept, read to the end, check every byte.
struct Sink {
    size: usize,
    pattern: Arc<Vec<u8>>,
    pingpong: Option<(Arc<AtomicU64>, Instant, mpsc::Sender<()>)>,
}

/// What one sink worker measured.
#[derive(Default)]
struct SinkCounts {
    role: RoleCounts,
    /// When its last connection ended.
    last_end: Option<Instant>,
    latency: Option<Histogram<u64>>,
}

impl Sink {
    fn run(&self, listener: &Listener, coord: &Coord, line: &Barrier) -> io::Result<SinkCounts> {
        let mut buf = vec![0u8; SINK_READ.max(self.size)];
        let mut s = SinkCounts {
            latency: self.pingpong.as_ref().map(|_| latency_histogram()),
            ..SinkCounts::default()
        };
        line.wait();
        let cpu0 = ThreadCpu::now();
        let result = (|| {
            while let Some(conn) = listener.accept_unless(&|| coord.sink_may_stop())? {
                coord.sunk.fetch_add(1, Ordering::SeqCst);
                s.role.connections += 1;
                conn.set_timeouts(Some(TICK))?;
                if !self.connection(&conn, &mut buf, coord, &mut s)? {
                    break;
                }
                s.last_end = Some(Instant::now());
            }
            Ok(())
        })();
        s.role.cpu = ThreadCpu::now().since(&cpu0).exact;
        result.map(|()| s)
    }

    /// Read one connection to its end; false if the run was aborted.
    fn connection(
        &self,
        mut conn: &End,
        buf: &mut [u8],
        coord: &Coord,
        s: &mut SinkCounts,
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
            let want = if self.pingpong.is_some() {
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
            if let Some((stamp, base, ack)) = &self.pingpong {
                due -= n as u64;
                if due == 0 {
                    let now = base.elapsed().as_nanos() as u64;
                    let sent = stamp.load(Ordering::Acquire);
                    if let Some(h) = s.latency.as_mut() {
                        record(h, Duration::from_nanos(now.saturating_sub(sent)));
                    }
                    s.role.messages += 1;
                    due = self.size as u64;
                    let _ = ack.send(());
                }
            }
        }
        if self.pingpong.is_none() {
            s.role.messages += offset.div_ceil(self.size.max(1) as u64);
        }
        Ok(true)
    }
}

/// The address the relay or the sink listens on.
fn listen_target(t: TransportKind, dir: &Path, name: &str) -> Target {
    match t {
        TransportKind::Tcp6 => Target::Tcp(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 0))),
        TransportKind::Unix => Target::Unix(dir.join(name)),
        _ => Target::Tcp(SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0))),
    }
}

/// Run the three roles once.
///
/// # Errors
/// A role's failure, named (`source: ...`, `relay: ...`, `sink: ...`), or a count that
/// does not agree between the roles.
pub fn run(setup: &Setup) -> io::Result<Outcome> {
    if let Some(why) = refuses_transport(setup.transport) {
        return Err(io::Error::new(io::ErrorKind::Unsupported, why));
    }
    let p = setup.parallel.max(1);
    let sink_listener = Listener::bind(&listen_target(setup.transport, &setup.dir, "sink.sock"))?;
    let relay_listener = Listener::bind(&listen_target(setup.transport, &setup.dir, "relay.sock"))?;
    let sink_target = sink_listener.target()?;
    let relay_target = relay_listener.target()?;
    // Set up every copier before the start, so a ring or a runtime is not in the run.
    let copiers = (0..p)
        .map(|_| copy::copier(setup.method, &setup.copy))
        .collect::<io::Result<Vec<_>>>()?;
    let pat = Arc::new(pattern(PERIOD + setup.size.max(SINK_READ)));
    let (total, source_threads) = match setup.shape {
        Shape::Streams(_) => (p as u64, p),
        Shape::Connections(n) => (n, p.min(n.max(1) as usize)),
        Shape::Pingpong(_) => (1, 1),
    };
    let base = Instant::now();
    let stamp = Arc::new(AtomicU64::new(0));
    let (ack_tx, ack_rx) = mpsc::channel();
    let pingpong = matches!(setup.shape, Shape::Pingpong(_));
    let source = Source {
        shape: setup.shape,
        size: setup.size,
        target: relay_target,
        pattern: Arc::clone(&pat),
        next: Arc::new(AtomicU64::new(0)),
        total,
        stamp: Arc::clone(&stamp),
        base,
        acks: pingpong.then_some(Mutex::new(ack_rx)),
    };
    let sink = Sink {
        size: setup.size,
        pattern: Arc::clone(&pat),
        pingpong: pingpong.then(|| (Arc::clone(&stamp), base, ack_tx)),
    };
    let sink_threads = if pingpong { 1 } else { p };
    let coord = Coord {
        relay_live: AtomicU64::new(p as u64),
        ..Coord::default()
    };
    let line = Barrier::new(source_threads + p + sink_threads + 1);
    let source_live = AtomicU64::new(source_threads as u64);
    let mut out = std::thread::scope(|scope| {
        let sinks: Vec<_> = (0..sink_threads)
            .map(|_| {
                scope.spawn(|| {
                    let r = sink.run(&sink_listener, &coord, &line);
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
                let (l, t, c, line) = (&relay_listener, &sink_target, &coord, &line);
                scope.spawn(move || {
                    let r = relay_worker(l, t, copier, c, line);
                    if let Err(e) = &r {
                        c.fail("relay", e);
                    }
                    c.relay_live.fetch_sub(1, Ordering::SeqCst);
                    r
                })
            })
            .collect();
        let sources: Vec<_> = (0..source_threads)
            .map(|_| {
                scope.spawn(|| {
                    let r = source.run(&coord, &line);
                    if let Err(e) = &r {
                        coord.fail("source", e);
                    }
                    if source_live.fetch_sub(1, Ordering::SeqCst) == 1 {
                        coord.source_done.store(true, Ordering::SeqCst);
                    }
                    r
                })
            })
            .collect();
        line.wait();
        let t0 = Instant::now();
        let proc0 = process_cpu();
        let main0 = ThreadCpu::now();
        let mut out = Outcome {
            source: RoleCounts::default(),
            sink: RoleCounts::default(),
            copied: Copied::default(),
            relayed: 0,
            relay_cpu: Duration::ZERO,
            unaccounted_cpu: Duration::ZERO,
            interval: Duration::ZERO,
            pipe_size: None,
            latency: None,
            interrupted: false,
        };
        let mut accounted = Duration::ZERO;
        for h in sources {
            if let Ok(Ok(c)) = h.join() {
                out.source.bytes += c.bytes;
                out.source.messages += c.messages;
                out.source.connections += c.connections;
                accounted += c.cpu;
            }
        }
        for h in relays {
            if let Ok(Ok(r)) = h.join() {
                out.copied = out.copied.plus(r.copied);
                out.relay_cpu += r.cpu;
                out.pipe_size = out.pipe_size.or(r.pipe_size);
            }
        }
        let mut last = None;
        for h in sinks {
            if let Ok(Ok(s)) = h.join() {
                out.sink.bytes += s.role.bytes;
                out.sink.messages += s.role.messages;
                out.sink.connections += s.role.connections;
                accounted += s.role.cpu;
                last = last.max(s.last_end);
                if let Some(h) = s.latency {
                    out.latency = Some(h);
                }
            }
        }
        let proc_cpu = process_cpu().saturating_sub(proc0);
        accounted += out.relay_cpu + ThreadCpu::now().since(&main0).exact;
        out.unaccounted_cpu = proc_cpu.saturating_sub(accounted);
        let start = coord
            .start
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or(t0);
        out.interval = last.map_or(Duration::ZERO, |l| l.saturating_duration_since(start));
        out
    });
    out.relayed = coord.accepted.load(Ordering::SeqCst);
    out.interrupted = coord.interrupted.load(Ordering::SeqCst) || interrupt::requested();
    if let Some((e, _)) = coord.error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(io::Error::other(e));
    }
    if out.source.bytes != out.copied.bytes || out.copied.bytes != out.sink.bytes {
        return Err(io::Error::other(format!(
            "the counts disagree: the source sent {} bytes, the relay copied {}, the sink \
             received {}",
            out.source.bytes, out.copied.bytes, out.sink.bytes
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(method: Method, transport: TransportKind, size: usize, shape: Shape) -> Setup {
        Setup {
            transport,
            method,
            copy: copy::Options::default(),
            size,
            shape,
            parallel: 1,
            dir: std::env::temp_dir(),
        }
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
    fn every_byte_arrives_and_the_three_counts_agree() {
        let dir = tempfile::tempdir().unwrap();
        for (t, shape, size) in [
            (
                TransportKind::Tcp,
                Shape::Streams(Stop::Bytes(1 << 20)),
                65536,
            ),
            (
                TransportKind::Unix,
                Shape::Streams(Stop::Bytes(100_001)),
                4096,
            ),
            (TransportKind::Tcp, Shape::Connections(50), 10_000),
            (TransportKind::Unix, Shape::Connections(20), 1),
        ] {
            let mut s = setup(Method::ReadWrite, t, size, shape);
            s.dir = dir.path().to_path_buf();
            let o = run(&s).unwrap();
            let want = match shape {
                Shape::Streams(Stop::Bytes(b)) => b,
                Shape::Connections(n) => n * size as u64,
                _ => unreachable!(),
            };
            assert_eq!(
                (o.source.bytes, o.copied.bytes, o.sink.bytes),
                (want, want, want)
            );
            let conns = match shape {
                Shape::Connections(n) => n,
                _ => 1,
            };
            assert_eq!(
                (o.source.connections, o.relayed, o.sink.connections),
                (conns, conns, conns)
            );
            assert_eq!(o.sink.messages, o.source.messages);
            assert!(o.interval > Duration::ZERO);
            // A read and a write per chunk at least, and one read that sees the end.
            assert!(o.copied.syscalls >= 2 * want.div_ceil(65536) + conns);
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn timed_runs_last_their_time_and_no_longer() {
        let dir = tempfile::tempdir().unwrap();
        for shape in [
            Shape::Streams(Stop::Duration(Duration::from_millis(300))),
            Shape::Pingpong(Stop::Duration(Duration::from_millis(300))),
        ] {
            let mut s = setup(Method::ReadWrite, TransportKind::Unix, 1000, shape);
            s.dir = dir.path().to_path_buf();
            let o = run(&s).unwrap();
            assert!(
                o.interval >= Duration::from_millis(300) && o.interval < Duration::from_secs(3),
                "{shape:?}: {:?}",
                o.interval
            );
            assert!(o.sink.messages > 20, "{shape:?}: {}", o.sink.messages);
            assert_eq!(o.sink.messages, o.source.messages);
        }
    }

    #[test]
    fn a_failure_stops_every_role_and_the_first_cause_is_kept() {
        let c = Coord {
            made: AtomicU64::new(5),
            relay_live: AtomicU64::new(1),
            forwarded: AtomicU64::new(5),
            ..Coord::default()
        };
        assert!(!c.relay_may_stop() && !c.sink_may_stop());
        c.fail("relay", &io::ErrorKind::ConnectionReset.into());
        c.fail("sink", &io::Error::other("first"));
        c.fail("source", &io::Error::other("second"));
        assert!(c.aborted() && c.relay_may_stop() && c.sink_may_stop());
        let e = c.error.lock().unwrap().clone().unwrap();
        assert_eq!(e.0, "sink: first");
    }

    #[test]
    fn pingpong_times_every_message_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = setup(
            Method::ReadWrite,
            TransportKind::Tcp,
            100,
            Shape::Pingpong(Stop::Count(500)),
        );
        s.dir = dir.path().to_path_buf();
        let o = run(&s).unwrap();
        let h = o.latency.unwrap();
        assert_eq!(h.len(), 500);
        assert_eq!((o.source.messages, o.sink.messages), (500, 500));
        assert_eq!(o.sink.bytes, 50_000);
        assert!(h.min() > 0);
    }

    #[test]
    fn several_connections_at_once_each_carry_their_own_stream() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = setup(
            Method::ReadWrite,
            TransportKind::Unix,
            1000,
            Shape::Streams(Stop::Bytes(300_000)),
        );
        s.parallel = 3;
        s.dir = dir.path().to_path_buf();
        let o = run(&s).unwrap();
        assert_eq!(o.sink.bytes, 900_000);
        assert_eq!(o.sink.connections, 3);
        assert_eq!(o.sink.messages, 900);
    }
}

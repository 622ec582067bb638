//! One generator thread: an epoll loop (`mio::Poll`, edge-triggered) over its share of
//! the connections, each registered once for reading and writing.
//!
//! Per request the loop does one write (a pipeline's worth of requests at once, from
//! one prebuilt byte string), its share of one read of up to 64 KiB (every answer in
//! the buffer is parsed before the next read), a few `Instant::now()` and one record
//! per histogram; nothing is allocated. A read shorter than the buffer ends the reading
//! of an event, as wrk does: on Linux a stream socket's read returns less than asked
//! only when its queue is empty, and whatever arrives later raises a new edge. (When
//! the event says the peer closed, reading goes on to the end of file.)
//!
//! The run's request budget (`-n`) is one atomic counter; a request is taken from it
//! when it is written, or when a connect starts for it, so no more than `-n` requests
//! are ever sent. Under `--rate` each connection has its own schedule (`connections /
//! rate` apart, the connections' schedules offset evenly) and each request's latency
//! starts when it was due, not when it could be sent.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use socket2::SockAddr;

use super::conn::{self, Conn, Phase};
use super::tally::{Cause, Tally, Times};
use super::Spec;
use crate::http::request::Request;
use crate::http::response::Response;
use crate::measure::cpu::ThreadCpu;

/// Bytes asked for by each read.
const READ_SIZE: usize = 64 << 10;
/// Longest wait in epoll, so Ctrl-C and the stop flag are seen promptly (the stop is
/// promised within 100 ms, and `models` stops its server after its driver).
const MAX_WAIT: Duration = Duration::from_millis(20);
/// "No first response length yet."
const NO_LENGTH: u64 = u64::MAX;
/// The --rate timer's token (no connection's: their index is below 2^32 - 1).
const TIMER: Token = Token(usize::MAX);

/// A counter alone on its cache line (one per thread, read by the progress display).
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct Padded(pub AtomicU64);

/// What the threads share.
#[derive(Debug)]
pub struct Shared {
    /// Requests not yet taken (None: no `-n`).
    budget: Option<AtomicU64>,
    /// Body length of the first complete response.
    first_length: AtomicU64,
    /// Some connection connected.
    pub connected: AtomicBool,
    /// Stop now (set by the caller).
    pub stop: AtomicBool,
    /// Complete requests per thread, for progress.
    pub progress: Vec<Padded>,
}

impl Shared {
    /// For `threads` threads and a budget of `requests`.
    pub fn new(requests: Option<u64>, threads: usize) -> Shared {
        Shared {
            budget: requests.map(AtomicU64::new),
            first_length: AtomicU64::new(NO_LENGTH),
            connected: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            progress: (0..threads).map(|_| Padded::default()).collect(),
        }
    }

    /// Take up to `want` requests from the budget; how many were taken.
    fn claim(&self, want: u64) -> u64 {
        let Some(b) = &self.budget else { return want };
        let mut left = b.load(Relaxed);
        loop {
            if left == 0 {
                return 0;
            }
            let take = left.min(want);
            match b.compare_exchange_weak(left, left - take, Relaxed, Relaxed) {
                Ok(_) => return take,
                Err(now) => left = now,
            }
        }
    }

    /// Whether `body` differs from the first complete response's length (the first
    /// sets it).
    fn length_differs(&self, body: u64) -> bool {
        match self.first_length.load(Relaxed) {
            NO_LENGTH => match self
                .first_length
                .compare_exchange(NO_LENGTH, body, Relaxed, Relaxed)
            {
                Ok(_) => false,
                Err(first) => first != body,
            },
            first => first != body,
        }
    }

    /// The first complete response's body length.
    pub fn first_length(&self) -> Option<u64> {
        Some(self.first_length.load(Relaxed)).filter(|&l| l != NO_LENGTH)
    }
}

/// The start signal: every thread waits at it until the caller has started them all
/// (then they go together), or gives up (then they return at once).
#[derive(Debug, Default)]
pub struct Gate {
    state: Mutex<Option<bool>>,
    changed: Condvar,
}

impl Gate {
    /// Let the threads go (`true`) or send them home (`false`).
    pub fn open(&self, go: bool) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        *s = Some(go);
        self.changed.notify_all();
    }

    /// Wait for [`Gate::open`]; whether to go.
    fn wait(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(go) = *s {
                return go;
            }
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// What a thread brings back.
#[derive(Debug)]
pub struct Outcome {
    /// Its counts and times.
    pub tally: Tally,
    /// From the start signal to the end of its loop.
    pub wall: Duration,
}

/// Whether a connection goes on after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Go,
    Closed,
}

/// One thread's loop.
pub struct Worker<'a> {
    spec: &'a Spec,
    shared: &'a Shared,
    slot: usize,
    addr: SockAddr,
    poll: Poll,
    conns: Vec<Conn>,
    buf: Vec<u8>,
    request: Request,
    depth: usize,
    keepalive: bool,
    interval: Option<Duration>,
    tally: Tally,
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Under --rate, a timerfd for the schedule: epoll's own timeout counts whole
    /// milliseconds, and a request sent up to a millisecond late would add that to
    /// every corrected latency.
    clock: Option<nix::sys::timerfd::TimerFd>,
    /// When `clock` is set to go off.
    clock_at: Option<Instant>,
    /// Connections whose answers were read in this turn of the loop: their next
    /// requests are written after every event of the turn was read.
    refill: Vec<usize>,
    live: usize,
    connect_failures: u64,
}

impl<'a> Worker<'a> {
    /// Thread `slot` of the run, with the connections `indices` (of all connections).
    ///
    /// # Errors
    /// The epoll instance cannot be made.
    pub fn new(
        spec: &'a Spec,
        shared: &'a Shared,
        slot: usize,
        addr: SockAddr,
        indices: std::ops::Range<usize>,
    ) -> io::Result<Worker<'a>> {
        let keepalive = spec.keepalive || spec.pipeline > 1;
        let depth = if keepalive {
            spec.pipeline.max(1) as usize
        } else {
            1
        };
        let now = Instant::now();
        let conns: Vec<Conn> = indices
            .map(|i| Conn::new(i, &spec.method, depth, now))
            .collect();
        let interval = spec
            .rate
            .map(|r| Duration::from_secs_f64(f64::from(spec.connections) / r));
        let poll = Poll::new()?;
        let clock = match interval {
            None => None,
            Some(_) => {
                use nix::sys::timerfd::{ClockId, TimerFd, TimerFlags};
                let t = TimerFd::new(
                    ClockId::CLOCK_MONOTONIC,
                    TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
                )?;
                poll.registry().register(
                    &mut SourceFd(&t.as_fd().as_raw_fd()),
                    TIMER,
                    Interest::READABLE,
                )?;
                Some(t)
            }
        };
        Ok(Worker {
            spec,
            shared,
            slot,
            addr,
            poll,
            clock,
            clock_at: None,
            refill: Vec::with_capacity(conns.len()),
            live: conns.len(),
            timers: BinaryHeap::with_capacity(conns.len() * 2),
            conns,
            buf: vec![0; READ_SIZE],
            request: Request::new(
                &spec.method,
                &spec.path,
                &spec.host,
                &spec.headers,
                keepalive,
                depth as u32,
            ),
            depth,
            keepalive,
            interval,
            tally: Tally::new(spec.rate.is_some()),
            connect_failures: 0,
        })
    }

    /// Run until the budget is spent, the duration is over, nothing answers, or the
    /// user or the caller stops it.
    ///
    /// # Errors
    /// Pinning to a CPU or epoll_wait failed.
    pub fn run(mut self, start: &Gate, cpu: Option<usize>) -> io::Result<Outcome> {
        if let Some(c) = cpu {
            let mut set = nix::sched::CpuSet::new();
            let pinned = set
                .set(c)
                .and_then(|()| nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set));
            if let Err(e) = pinned {
                return Err(io::Error::other(format!(
                    "cannot pin a thread to CPU {c}: {e}"
                )));
            }
        }
        if !start.wait() {
            return Ok(Outcome {
                tally: self.tally,
                wall: Duration::ZERO,
            });
        }
        if self.clock.is_some() {
            // Timers on time, not up to 50 µs late (the default slack).
            let _ = nix::sys::prctl::set_timerslack(1);
        }
        let cpu0 = ThreadCpu::now();
        let t0 = Instant::now();
        let deadline = self.spec.duration.map(|d| t0 + d);
        if let Some(iv) = self.interval {
            let n = f64::from(self.spec.connections.max(1));
            for c in &mut self.conns {
                c.next_due = t0 + iv.mul_f64(c.index as f64 / n);
            }
        }
        for i in 0..self.conns.len() {
            self.pump(i, t0);
        }
        let every = (self.spec.timeout / 8).clamp(Duration::from_millis(1), MAX_WAIT);
        let mut next_scan = t0 + every;
        let mut events = Events::with_capacity(1024);
        loop {
            let now = Instant::now();
            if crate::interrupt::requested()
                || self.shared.stop.load(Relaxed)
                || deadline.is_some_and(|d| now >= d)
                || self.live == 0
                || self.tally.nothing_answered
            {
                break;
            }
            while let Some(&Reverse((when, i))) = self.timers.peek() {
                if when > now {
                    break;
                }
                self.timers.pop();
                if self.conns[i].timer_at == Some(when) {
                    self.conns[i].timer_at = None;
                    self.pump(i, now);
                }
            }
            if now >= next_scan {
                self.scan(now);
                next_scan = now + every;
            }
            let mut wake = next_scan.min(now + MAX_WAIT);
            if let Some(d) = deadline {
                wake = wake.min(d);
            }
            if let Some(&Reverse((w, _))) = self.timers.peek() {
                match &self.clock {
                    None => wake = wake.min(w),
                    Some(clock) if self.clock_at != Some(w) => {
                        use nix::sys::time::TimeSpec;
                        use nix::sys::timerfd::{Expiration, TimerSetTimeFlags};
                        let after = w
                            .saturating_duration_since(now)
                            .max(Duration::from_nanos(1));
                        clock
                            .set(
                                Expiration::OneShot(TimeSpec::from_duration(after)),
                                TimerSetTimeFlags::empty(),
                            )
                            .map_err(io::Error::from)?;
                        self.clock_at = Some(w);
                    }
                    Some(_) => {}
                }
            }
            match self
                .poll
                .poll(&mut events, Some(wake.saturating_duration_since(now)))
            {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for ev in events.iter() {
                self.event(ev);
            }
            let now = Instant::now();
            for j in 0..self.refill.len() {
                let i = self.refill[j];
                self.conns[i].queued = false;
                self.pump(i, now);
            }
            self.refill.clear();
            self.shared.progress[self.slot]
                .0
                .store(self.tally.complete, Relaxed);
        }
        self.tally.cpu = ThreadCpu::now().since(&cpu0);
        let wall = t0.elapsed();
        self.shared.progress[self.slot]
            .0
            .store(self.tally.complete, Relaxed);
        Ok(Outcome {
            tally: self.tally,
            wall,
        })
    }

    /// Dispatch one readiness event.
    fn event(&mut self, ev: &mio::event::Event) {
        if ev.token() == TIMER {
            // Gone off; the loop's next turn sends what is due.
            self.clock_at = None;
            return;
        }
        let token = ev.token().0;
        let i = token & 0xffff_ffff;
        let generation = (token >> 32) as u32;
        let Some(c) = self.conns.get(i) else { return };
        if c.generation != generation || c.sock.is_none() {
            return;
        }
        match c.phase {
            Phase::Closed => {}
            Phase::Connecting => {
                if ev.is_writable() || ev.is_error() || ev.is_write_closed() {
                    self.finish_connect(i);
                }
            }
            Phase::Open => {
                if ev.is_writable() && c.unflushed > 0 && self.flush(i) == Flow::Closed {
                    return;
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.read(i, ev.is_read_closed() || ev.is_error());
                }
            }
        }
    }

    /// Move connection `i` on: connect, or write what it may.
    fn pump(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        if c.done {
            return;
        }
        match c.phase {
            Phase::Connecting => {}
            Phase::Closed => {
                if self.interval.is_some() && c.next_due > now {
                    let at = c.next_due;
                    self.arm(i, at);
                    return;
                }
                if c.claimed == 0 {
                    c.claimed = self.shared.claim(1);
                    if c.claimed == 0 {
                        self.finish(i);
                        return;
                    }
                }
                self.connect(i);
            }
            Phase::Open => {
                if c.unflushed > 0 {
                    return;
                }
                let free = (self.depth - c.pending.len()) as u64;
                if free == 0 {
                    return;
                }
                let mut k = free;
                if let Some(iv) = self.interval {
                    if c.next_due > now {
                        let at = c.next_due;
                        self.arm(i, at);
                        return;
                    }
                    let behind = now.duration_since(c.next_due).as_nanos() / iv.as_nanos().max(1);
                    k = k.min(u64::try_from(behind).unwrap_or(u64::MAX).saturating_add(1));
                }
                if c.claimed < k {
                    c.claimed += self.shared.claim(k - c.claimed);
                }
                let k = k.min(c.claimed);
                if k == 0 {
                    if c.pending.is_empty() {
                        self.finish(i);
                    }
                    return;
                }
                self.write(i, k as usize);
            }
        }
    }

    /// Wake connection `i` at `at`.
    fn arm(&mut self, i: usize, at: Instant) {
        let c = &mut self.conns[i];
        if c.timer_at != Some(at) {
            c.timer_at = Some(at);
            self.timers.push(Reverse((at, i)));
        }
    }

    /// Connection `i` has nothing more to do.
    fn finish(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if !c.done {
            c.done = true;
            c.close();
            self.live -= 1;
        }
    }

    /// Start connecting slot `i` (one claimed request waits for it).
    fn connect(&mut self, i: usize) {
        let start = Instant::now();
        self.tally.first_start.get_or_insert(start);
        let c = &mut self.conns[i];
        c.connect_start = start;
        match conn::open(&self.addr) {
            Ok((sock, done)) => {
                c.generation = c.generation.wrapping_add(1);
                let token = Token(((c.generation as usize) << 32) | i);
                let fd = sock.as_raw_fd();
                if let Err(e) = self.poll.registry().register(
                    &mut SourceFd(&fd),
                    token,
                    Interest::READABLE | Interest::WRITABLE,
                ) {
                    self.connect_failed(i, &e);
                    return;
                }
                c.sock = Some(sock);
                c.parser.reset();
                c.first_byte = None;
                if done {
                    self.on_connected(i);
                } else {
                    c.phase = Phase::Connecting;
                }
            }
            Err(e) => self.connect_failed(i, &e),
        }
    }

    /// A connect in progress finished one way or the other.
    fn finish_connect(&mut self, i: usize) {
        let Some(sock) = &self.conns[i].sock else {
            return;
        };
        match conn::connected(sock) {
            Ok(()) => self.on_connected(i),
            Err(e) => self.connect_failed(i, &e),
        }
    }

    fn on_connected(&mut self, i: usize) {
        let now = Instant::now();
        let c = &mut self.conns[i];
        c.phase = Phase::Open;
        c.connected_at = now;
        c.fresh = true;
        self.tally.connections_opened += 1;
        if !self.shared.connected.load(Relaxed) {
            self.shared.connected.store(true, Relaxed);
        }
        self.pump(i, now);
    }

    /// The connect for slot `i` failed: the request it was for fails with it. Tried
    /// again on the next turn of the loop, unless no connection was ever made and every
    /// slot of this thread has now failed: then nothing answers.
    fn connect_failed(&mut self, i: usize, e: &io::Error) {
        self.tally.fail(conn::connect_cause(e), 1);
        let c = &mut self.conns[i];
        c.claimed = c.claimed.saturating_sub(1);
        c.close();
        if let Some(iv) = self.interval {
            // The due request failed; the next is due on the schedule.
            c.next_due += iv;
        }
        self.connect_failures += 1;
        if !self.shared.connected.load(Relaxed) && self.connect_failures >= self.conns.len() as u64
        {
            self.tally.nothing_answered = true;
        }
        self.arm(i, Instant::now());
    }

    /// The connection failed after connecting: its requests in flight fail for `cause`;
    /// it is reopened on the next turn of the loop.
    fn fail(&mut self, i: usize, cause: Cause) {
        let c = &mut self.conns[i];
        let lost = c.pending.len() as u64;
        c.close();
        if lost > 0 {
            self.tally.fail(cause, lost);
        } else if self.keepalive {
            self.tally.reconnects += 1;
        }
        self.arm(i, Instant::now());
    }

    /// Write `k` claimed requests on open connection `i`, in one write.
    fn write(&mut self, i: usize, k: usize) {
        let ws = Instant::now();
        let c = &mut self.conns[i];
        for j in 0..k {
            let (sent, connect_ns, processing_start) = if c.fresh && j == 0 {
                (c.connect_start, c.connect_ns(), c.connected_at)
            } else {
                (ws, 0, ws)
            };
            let start = match self.interval {
                Some(iv) => {
                    let due = c.next_due;
                    c.next_due += iv;
                    due.min(sent)
                }
                None => sent,
            };
            c.pending.push_back(Times {
                connect_ns,
                start,
                sent,
                processing_start,
                written: ws,
            });
        }
        c.fresh = false;
        c.claimed -= k as u64;
        c.batch = k;
        let bytes = self.request.batch(k);
        let Some(sock) = &c.sock else { return };
        match conn::send(sock, bytes) {
            Ok(n) => {
                self.tally.bytes_sent += n as u64;
                c.unflushed = bytes.len() - n;
                if c.unflushed == 0 {
                    let done = Instant::now();
                    for t in c.pending.iter_mut().rev().take(k) {
                        t.written = done;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => c.unflushed = bytes.len(),
            Err(e) => self.fail(i, conn::read_cause(&e)),
        }
    }

    /// Write the rest of a batch the socket did not take at once.
    fn flush(&mut self, i: usize) -> Flow {
        let c = &mut self.conns[i];
        let bytes = self.request.batch(c.batch);
        let Some(sock) = &c.sock else {
            return Flow::Closed;
        };
        let from = bytes.len() - c.unflushed;
        match conn::send(sock, &bytes[from..]) {
            Ok(n) => {
                self.tally.bytes_sent += n as u64;
                c.unflushed -= n;
                if c.unflushed == 0 {
                    let done = Instant::now();
                    let k = c.batch;
                    for t in c.pending.iter_mut().rev().take(k) {
                        t.written = done;
                    }
                }
                Flow::Go
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Flow::Go,
            Err(e) => {
                self.fail(i, conn::read_cause(&e));
                Flow::Closed
            }
        }
    }

    /// Read connection `i` (to the end of file when `to_eof`), handle every answer, and
    /// refill its pipeline.
    fn read(&mut self, i: usize, to_eof: bool) {
        let mut buf = std::mem::take(&mut self.buf);
        let flow = self.read_into(i, &mut buf, to_eof);
        self.buf = buf;
        if flow == Flow::Go {
            let c = &mut self.conns[i];
            if !c.queued {
                c.queued = true;
                self.refill.push(i);
            }
        }
    }

    fn read_into(&mut self, i: usize, buf: &mut [u8], to_eof: bool) -> Flow {
        loop {
            let Some(sock) = &self.conns[i].sock else {
                return Flow::Closed;
            };
            match (&*sock).read(buf) {
                Ok(0) => {
                    self.eof(i);
                    return Flow::Closed;
                }
                Ok(n) => {
                    let t = Instant::now();
                    self.tally.bytes_received += n as u64;
                    if self.consume(i, &buf[..n], t) == Flow::Closed {
                        return Flow::Closed;
                    }
                    if n < buf.len() && !to_eof {
                        return Flow::Go;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Flow::Go,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.fail(i, conn::read_cause(&e));
                    return Flow::Closed;
                }
            }
        }
    }

    /// Parse `data` (read at `t`) on connection `i`.
    fn consume(&mut self, i: usize, mut data: &[u8], t: Instant) -> Flow {
        while !data.is_empty() {
            let c = &mut self.conns[i];
            if c.pending.is_empty() {
                // Bytes with nothing asked (after the last answer: a body longer than
                // its Content-Length, a server's timeout notice): they answer no
                // request. Counted, never dropped unsaid; the connection, whose framing
                // is lost, is closed and opened again.
                self.tally.stray_bytes += data.len() as u64;
                self.tally.stray_closes += 1;
                if self.keepalive {
                    self.tally.reconnects += 1;
                }
                c.close();
                self.arm(i, t);
                return Flow::Closed;
            }
            c.first_byte.get_or_insert(t);
            match c.parser.feed(data) {
                Ok((used, answer)) => {
                    data = &data[used..];
                    if let Some(r) = answer {
                        if self.answered(i, r, t) == Flow::Closed {
                            return Flow::Closed;
                        }
                    }
                }
                Err(_) => {
                    // The first request in flight got no HTTP answer; the others will
                    // get none on this connection.
                    let lost = c.pending.len() as u64;
                    self.tally.fail(Cause::Status, lost.min(1));
                    self.tally.fail(Cause::ReadError, lost.saturating_sub(1));
                    c.close();
                    self.arm(i, t);
                    return Flow::Closed;
                }
            }
        }
        Flow::Go
    }

    /// A complete answer on connection `i`, its last byte read at `t`.
    fn answered(&mut self, i: usize, r: Response, t: Instant) -> Flow {
        let c = &mut self.conns[i];
        let first = c.first_byte.take().unwrap_or(t);
        let Some(times) = c.pending.pop_front() else {
            // Cannot happen: bytes with nothing in flight are stray (`consume`).
            c.close();
            self.arm(i, t);
            return Flow::Closed;
        };
        let differs = self.shared.length_differs(r.body_bytes);
        self.tally
            .complete(&times, first, t, r.status, r.body_bytes, differs);
        if r.close || !self.keepalive {
            // Requests behind it on this connection were never read: they go again.
            let left = c.pending.len() as u64;
            c.claimed += left;
            self.tally.resent += left;
            if self.keepalive {
                self.tally.reconnects += 1;
            }
            c.close();
            self.pump(i, t);
            return Flow::Closed;
        }
        Flow::Go
    }

    /// The server closed connection `i`.
    fn eof(&mut self, i: usize) {
        let now = Instant::now();
        let c = &mut self.conns[i];
        if let Some(r) = c.parser.eof() {
            self.answered(i, r, now);
            return;
        }
        self.fail(i, Cause::ReadEof);
    }

    /// Fail what has waited longer than --timeout.
    fn scan(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if !c.waited(now).is_some_and(|w| w >= self.spec.timeout) {
                continue;
            }
            match c.phase {
                Phase::Connecting => {
                    self.connect_failed(i, &io::Error::from(io::ErrorKind::TimedOut));
                }
                Phase::Open => self.fail(i, Cause::ReadTimeout),
                Phase::Closed => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_never_overdrawn() {
        let s = Shared::new(Some(10), 1);
        assert_eq!(s.claim(4), 4);
        assert_eq!(s.claim(4), 4);
        assert_eq!(s.claim(4), 2);
        assert_eq!(s.claim(1), 0);
        let s = Shared::new(None, 1);
        assert_eq!(s.claim(7), 7);
        let s = std::sync::Arc::new(Shared::new(Some(100_000), 4));
        let got: u64 = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    let mut n = 0;
                    loop {
                        match s.claim(3) {
                            0 => return n,
                            k => n += k,
                        }
                    }
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum();
        assert_eq!(got, 100_000);
    }

    #[test]
    fn lengths_are_compared_with_the_first() {
        let s = Shared::new(None, 1);
        assert_eq!(s.first_length(), None);
        assert!(!s.length_differs(13));
        assert!(!s.length_differs(13));
        assert!(s.length_differs(14));
        assert_eq!(s.first_length(), Some(13));
    }
}

//! Many descriptors on one thread: the swarm's reactors.
//!
//! A swarm of N pairs runs on two threads, each an epoll loop (`mio::Poll`, edge
//! triggered) over one end of every pair: the sending (or asking) ends on one, the
//! receiving (or answering) ends on the other, so one pair or ten thousand use the same
//! two threads. Nothing is allocated per message: every sender writes from one shared
//! buffer and every receiver reads into one. A receiver counts what arrived before the
//! measured interval's end (checked once per event, not per read); after it, the senders
//! close their ends and the receivers drain to end of file, so that what was sent and
//! what was received can be compared exactly.

pub mod pairs;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

/// What each pair does.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Work {
    /// One way, as fast as it goes.
    #[default]
    Stream,
    /// A request of the size, answered by as many bytes; the next when the answer is in.
    Pingpong,
}

/// One side of a pair: where it reads and where it writes (the same descriptor for a
/// socket, two pipes' ends for a pipe pair).
pub struct Side {
    /// Read from here (None: this side only writes).
    pub read: Option<OwnedFd>,
    /// Write here (None: the write descriptor is `read`'s, or this side only reads).
    pub write: Option<OwnedFd>,
    /// Whether `read` is also where this side writes.
    pub duplex: bool,
}

impl Side {
    fn rfd(&self) -> Option<RawFd> {
        self.read.as_ref().map(AsRawFd::as_raw_fd)
    }

    fn wfd(&self) -> Option<BorrowedFd<'_>> {
        match (&self.write, self.duplex) {
            (Some(w), _) => Some(w.as_fd()),
            (None, true) => self.read.as_ref().map(AsFd::as_fd),
            (None, false) => None,
        }
    }

    /// End this side's writing: shut a socket down for writing, close a pipe's end.
    fn end_writes(&mut self) {
        if self.write.take().is_none() {
            if let Some(fd) = self.rfd().filter(|_| self.duplex) {
                let _ = nix::sys::socket::shutdown(fd, nix::sys::socket::Shutdown::Write);
            }
        }
    }
}

/// What one side of one pair counted.
#[derive(Clone, Debug, Default)]
pub struct PairCount {
    /// Bytes written (senders, and answering ends).
    pub sent: u64,
    /// Bytes read, in all.
    pub received: u64,
    /// Bytes read before the measured interval ended.
    pub received_in_interval: u64,
    /// Round trips completed before the measured interval ended (pingpong askers).
    pub round_trips: u64,
    /// The first error, by kind.
    pub error: Option<String>,
}

/// One pair's end as a reactor drives it: the descriptors, the counts, and where the
/// pair is in its exchange.
struct Pair {
    side: Side,
    count: PairCount,
    /// Pingpong: bytes of the current request written then of its answer read (askers),
    /// or of the current request read (answering ends).
    progress: usize,
    /// Pingpong askers: when the current request left.
    asked_at: Option<Instant>,
    /// Answering ends: bytes of answers still to write.
    owed: usize,
    /// Finished (end of file, an error, or no more to ask).
    done: bool,
}

/// What one reactor brings back.
pub struct ReactorReport {
    /// Per pair, in pair order.
    pub pairs: Vec<PairCount>,
    /// When its measured interval ended (the first event at or after the deadline).
    pub interval: Duration,
    /// Round-trip times (askers only).
    pub latency: Option<Histogram<u64>>,
    /// Whether Ctrl-C cut it short.
    pub interrupted: bool,
    /// The pairs' ends, still open: closing ten thousand sockets takes a while, which is
    /// no part of the run (the caller closes them when it has reported).
    pub ends: Vec<Side>,
}

/// Which end a reactor drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Stream: writes; pingpong: asks and times.
    Active,
    /// Stream: reads; pingpong: answers.
    Passive,
}

/// How a reactor runs.
pub struct Plan {
    /// The work.
    pub work: Work,
    /// Message (stream: each write; pingpong: each request and answer) size.
    pub size: usize,
    /// The measured interval, from the start line.
    pub duration: Duration,
    /// How long the drain after the interval may go without a byte moving on any pair,
    /// once the other side has finished, before the pairs still open are given up.
    pub drain: Duration,
}

/// Bytes one pair may move in one turn before the others get theirs (at least one
/// operation): with ten thousand pairs a round of turns stays well under a second.
const TURN_BYTES: usize = 64 << 10;

/// Whether an error is the peer going away (the other side closed early).
fn kind_of(e: nix::errno::Errno) -> String {
    format!("{} ({})", e.desc(), e as i32)
}

/// What a reactor has moved so far, all its pairs together, as `--interval` follows it:
/// bytes and operations (a stream's writes or reads of the size, an asker's round trips).
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);

/// The longest the drain waits for a byte while the other side has not finished (it may
/// be starved of a CPU, not gone): past it, the pairs still open are given up.
pub const STUCK: Duration = Duration::from_secs(60);

/// Run one reactor over `sides` until the interval ends and the pairs drain. `start`
/// waits for the other side and returns when the measured interval began; `progress` is
/// told the running totals once per turn of the loop (and once at the end);
/// `peer_finished` says whether the other side's reactor has ended (or is gone).
///
/// The drain after the interval ends when every pair is done. Pairs still open are given
/// up only after [`Plan::drain`] of this reactor's own polling without a byte moving, once
/// the other side has finished (or after [`STUCK`] without one, if it never says so): a
/// side that did not get a CPU for a while is waited for, not counted as lost.
///
/// # Errors
/// epoll cannot be set up.
pub fn run(
    role: Role,
    plan: &Plan,
    sides: Vec<Side>,
    start: &mut dyn FnMut() -> Instant,
    progress: Progress<'_>,
    peer_finished: &mut dyn FnMut() -> bool,
) -> std::io::Result<ReactorReport> {
    let mut poll = Poll::new()?;
    for (i, s) in sides.iter().enumerate() {
        let (r, w) = (s.rfd(), s.wfd().map(|w| w.as_raw_fd()));
        match (r, w) {
            (Some(r), Some(w)) if r == w => poll.registry().register(
                &mut SourceFd(&r),
                Token(2 * i),
                Interest::READABLE | Interest::WRITABLE,
            )?,
            _ => {
                if let Some(r) = r {
                    poll.registry().register(
                        &mut SourceFd(&r),
                        Token(2 * i),
                        Interest::READABLE,
                    )?;
                }
                if let Some(w) = w {
                    poll.registry().register(
                        &mut SourceFd(&w),
                        Token(2 * i + 1),
                        Interest::WRITABLE,
                    )?;
                }
            }
        }
    }
    let n = sides.len();
    let mut pairs: Vec<Pair> = sides
        .into_iter()
        .map(|side| Pair {
            side,
            count: PairCount::default(),
            progress: 0,
            asked_at: None,
            owed: 0,
            done: false,
        })
        .collect();
    let mut latency = (role == Role::Active && plan.work == Work::Pingpong)
        .then(crate::measure::histogram::latency_histogram);
    let buf = crate::sys::filled_buffer(plan.size.max(1), 0x5a)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::OutOfMemory, "message buffer"))?;
    let mut scratch = vec![0u8; plan.size.max(1)];
    let mut events = Events::with_capacity(4096);
    let started = start();
    // What --interval follows: a stream's bytes written (active) or read within the
    // interval (passive: the drain is not the interval's), an asker's round trips.
    let mut moved = 0u64;
    let figure = |c: &PairCount| match (plan.work, role) {
        (Work::Pingpong, Role::Active) => c.round_trips,
        (_, Role::Active) => c.sent,
        (_, Role::Passive) => c.received_in_interval,
    };
    let size = plan.size.max(1) as u64;
    let report = |moved: u64, progress: &mut dyn FnMut(u64, u64)| match (plan.work, role) {
        (Work::Pingpong, Role::Active) => progress(moved * size, moved),
        _ => progress(moved, moved.div_ceil(size)),
    };
    if n == 0 {
        // No pair to drive (none could be set up): nothing to measure.
        report(0, progress);
        return Ok(ReactorReport {
            pairs: Vec::new(),
            interval: Duration::ZERO,
            latency,
            interrupted: crate::interrupt::requested(),
            ends: Vec::new(),
        });
    }
    let deadline = started + plan.duration;
    let mut interval: Option<Duration> = None;
    let mut interrupted = false;
    let mut writes_ended = false;
    // When a byte last moved on any pair (or the interval ended), and whether the other
    // side has said it finished.
    let mut last_moved = started;
    let mut peer_done = false;
    let mut traffic = 0u64;
    let flow = |c: &PairCount| c.sent + c.received;

    // The active side begins every pair at once.
    let mut ready: Vec<usize> = match role {
        Role::Active => (0..n).collect(),
        Role::Passive => Vec::new(),
    };
    let mut again: Vec<usize> = Vec::new();
    let mut queued = vec![role == Role::Active; n];
    loop {
        crate::testhooks::slow("swarm-step");
        for i in ready.drain(..) {
            // A round of turns over many pairs can take long: Ctrl-C is looked at every
            // turn (one relaxed load), not only between rounds.
            if crate::interrupt::requested() {
                break;
            }
            queued[i] = false;
            let now_in = Instant::now() < deadline;
            let before = (figure(&pairs[i].count), flow(&pairs[i].count));
            let more = step(
                role,
                plan,
                &mut pairs[i],
                latency.as_mut(),
                &buf,
                &mut scratch,
                now_in,
            );
            moved += figure(&pairs[i].count) - before.0;
            traffic += flow(&pairs[i].count) - before.1;
            if more {
                queued[i] = true;
                again.push(i);
            }
        }
        std::mem::swap(&mut ready, &mut again);
        report(moved, progress);
        if crate::interrupt::requested() {
            interrupted = true;
            interval.get_or_insert_with(|| started.elapsed());
            break;
        }
        let now = Instant::now();
        if interval.is_none() && now >= deadline {
            interval = Some(now - started);
            last_moved = now;
        }
        if std::mem::take(&mut traffic) > 0 {
            last_moved = now;
        }
        if interval.is_some() {
            if !writes_ended && role == Role::Active {
                // The interval is over: no new writes. A stream's writing ends close at
                // once, so its readers see the end; an asker finishes the exchange it is
                // in (its answer is not counted) and closes then.
                writes_ended = true;
                if plan.work == Work::Stream {
                    for p in &mut pairs {
                        p.side.end_writes();
                        p.done = true;
                    }
                }
            }
            peer_done = peer_done || peer_finished();
            let idle = last_moved.elapsed();
            if pairs.iter().all(|p| p.done) || (peer_done && idle >= plan.drain) || idle >= STUCK {
                break;
            }
        }
        let wait = if !ready.is_empty() {
            Duration::ZERO
        } else if interval.is_some() {
            Duration::from_millis(20)
        } else {
            deadline
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(20))
        };
        match poll.poll(&mut events, Some(wait)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        for ev in &events {
            if crate::interrupt::requested() {
                break;
            }
            // One clock reading per event (each is at least one system call): what the
            // event reads counts in the interval if it began before the deadline.
            // (The interval, and the end of writes, begin only once the deadline is past.)
            let in_interval = Instant::now() < deadline;
            let i = ev.token().0 / 2;
            let before = (figure(&pairs[i].count), flow(&pairs[i].count));
            let more = step(
                role,
                plan,
                &mut pairs[i],
                latency.as_mut(),
                &buf,
                &mut scratch,
                in_interval,
            );
            moved += figure(&pairs[i].count) - before.0;
            traffic += flow(&pairs[i].count) - before.1;
            if more && !queued[i] {
                queued[i] = true;
                ready.push(i);
            }
        }
    }
    report(moved, progress);
    for p in &mut pairs {
        if !p.done && p.count.error.is_none() && !interrupted {
            p.count.error = Some(match role {
                Role::Passive => "did not end: nothing came for the drain time".into(),
                Role::Active => "no answer: nothing came for the drain time".into(),
            });
        }
    }
    let (counts, ends) = pairs.into_iter().map(|p| (p.count, p.side)).unzip();
    Ok(ReactorReport {
        pairs: counts,
        interval: interval.unwrap_or_else(|| started.elapsed()),
        latency,
        interrupted,
        ends,
    })
}

/// Move one pair along as far as its descriptors allow without blocking.
fn step(
    role: Role,
    plan: &Plan,
    pair: &mut Pair,
    latency: Option<&mut Histogram<u64>>,
    buf: &[u8],
    scratch: &mut [u8],
    in_interval: bool,
) -> bool {
    let Pair {
        side,
        count,
        progress,
        asked_at,
        owed,
        done,
    } = pair;
    if *done || count.error.is_some() {
        return false;
    }
    // Operations before the pair yields to the others (it is queued to go on later): a
    // reader whose writer keeps up would otherwise never return.
    let mut budget = (TURN_BYTES / plan.size.max(1)).max(1);
    let fail = |count: &mut PairCount, done: &mut bool, what: &str, e: nix::errno::Errno| {
        count.error = Some(format!("{what}: {}", kind_of(e)));
        *done = true;
        false
    };
    match (plan.work, role) {
        (Work::Stream, Role::Active) => {
            if !in_interval {
                return false;
            }
            let Some(w) = side.wfd() else { return false };
            loop {
                if budget == 0 {
                    return true;
                }
                budget -= 1;
                match nix::unistd::write(w, buf) {
                    Ok(n) => count.sent += n as u64,
                    Err(nix::errno::Errno::EAGAIN) => return false,
                    Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return fail(count, done, "write", e),
                }
            }
        }
        (Work::Stream, Role::Passive) => {
            let Some(r) = side.rfd() else { return false };
            loop {
                if budget == 0 {
                    return true;
                }
                budget -= 1;
                match nix::unistd::read(r, scratch) {
                    Ok(0) => {
                        *done = true;
                        return false;
                    }
                    Ok(n) => {
                        count.received += n as u64;
                        if in_interval {
                            count.received_in_interval += n as u64;
                        }
                    }
                    Err(nix::errno::Errno::EAGAIN) => return false,
                    Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return fail(count, done, "read", e),
                }
            }
        }
        (Work::Pingpong, Role::Active) => {
            let (Some(r), Some(w)) = (side.rfd(), side.wfd()) else {
                return false;
            };
            let mut latency = latency;
            loop {
                if budget == 0 {
                    return true;
                }
                budget -= 1;
                if asked_at.is_none() {
                    // Between round trips: ask again only within the interval.
                    if !in_interval {
                        *done = true;
                        side.end_writes();
                        return false;
                    }
                    *asked_at = Some(Instant::now());
                    *progress = 0;
                }
                if *progress < plan.size {
                    // Writing the request.
                    match nix::unistd::write(w, &buf[*progress..plan.size]) {
                        Ok(n) => {
                            count.sent += n as u64;
                            *progress += n;
                            continue;
                        }
                        Err(nix::errno::Errno::EAGAIN) => return false,
                        Err(nix::errno::Errno::EINTR) => continue,
                        Err(e) => return fail(count, done, "write", e),
                    }
                }
                // Reading the answer.
                let answered = *progress - plan.size;
                match nix::unistd::read(r, &mut scratch[..plan.size - answered]) {
                    Ok(0) => {
                        count.error = Some("the answering end closed mid-exchange".into());
                        *done = true;
                        return false;
                    }
                    Ok(n) => {
                        count.received += n as u64;
                        *progress += n;
                        if *progress == 2 * plan.size {
                            let t = asked_at.take().map(|t| t.elapsed());
                            if in_interval {
                                count.round_trips += 1;
                                if let (Some(h), Some(t)) = (latency.as_deref_mut(), t) {
                                    crate::measure::histogram::record(h, t);
                                }
                            }
                        }
                    }
                    Err(nix::errno::Errno::EAGAIN) => return false,
                    Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return fail(count, done, "read", e),
                }
            }
        }
        (Work::Pingpong, Role::Passive) => {
            let (Some(r), Some(w)) = (side.rfd(), side.wfd()) else {
                return false;
            };
            loop {
                if budget == 0 {
                    return true;
                }
                budget -= 1;
                // Pay what is owed first.
                while *owed > 0 {
                    match nix::unistd::write(w, &buf[..(*owed).min(plan.size)]) {
                        Ok(n) => {
                            count.sent += n as u64;
                            *owed -= n;
                        }
                        Err(nix::errno::Errno::EAGAIN) => return false,
                        Err(nix::errno::Errno::EINTR) => {}
                        Err(e) => return fail(count, done, "write", e),
                    }
                }
                match nix::unistd::read(r, &mut scratch[..plan.size - *progress]) {
                    Ok(0) => {
                        *done = true;
                        return false;
                    }
                    Ok(n) => {
                        count.received += n as u64;
                        *progress += n;
                        if *progress == plan.size {
                            *progress = 0;
                            *owed = plan.size;
                        }
                    }
                    Err(nix::errno::Errno::EAGAIN) => return false,
                    Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return fail(count, done, "read", e),
                }
            }
        }
    }
}

/// Jain's fairness index of `xs`: (sum x)^2 / (n * sum x^2), 1 when all are equal, 1/n
/// when one has everything (0 for no values or all zero).
pub fn jain(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || squares == 0.0 {
        return 0.0;
    }
    sum * sum / (xs.len() as f64 * squares)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_kind_names_the_errno() {
        let k = kind_of(nix::errno::Errno::ECONNRESET);
        assert!(k.contains("reset") && k.contains("(104)"), "{k}");
    }

    /// A passive reactor over one socketpair whose other end `write` drives (from
    /// another thread) while `peer_finished` says what the other side has said: what it
    /// read, its pair's error, and how long it ran.
    fn drain_with(
        write: impl FnOnce(std::os::unix::net::UnixStream) + Send,
        peer_finished: &mut dyn FnMut() -> bool,
    ) -> (u64, Option<String>, Duration) {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        let plan = Plan {
            work: Work::Stream,
            size: 64,
            duration: Duration::from_millis(30),
            drain: Duration::from_millis(50),
        };
        let side = Side {
            read: Some(OwnedFd::from(b)),
            write: None,
            duplex: true,
        };
        std::thread::scope(|s| {
            s.spawn(move || write(a));
            let began = Instant::now();
            let r = run(
                Role::Passive,
                &plan,
                vec![side],
                &mut Instant::now,
                &mut |_, _| {},
                peer_finished,
            )
            .unwrap();
            (
                r.pairs[0].received,
                r.pairs[0].error.clone(),
                began.elapsed(),
            )
        })
    }

    #[test]
    fn the_drain_waits_for_a_peer_that_has_not_finished_and_gives_up_only_when_idle() {
        use std::io::Write;
        use std::sync::atomic::{AtomicBool, Ordering};
        // A writer late by six drain times, as a side starved of a CPU is: waited for
        // while it has not said it finished.
        let done = AtomicBool::new(false);
        let (got, error, _) = drain_with(
            |mut w| {
                std::thread::sleep(Duration::from_millis(300));
                w.write_all(&[7; 1000]).unwrap();
                drop(w);
                done.store(true, Ordering::SeqCst);
            },
            &mut || done.load(Ordering::SeqCst),
        );
        assert_eq!((got, error), (1000, None));
        // A finished peer that keeps bytes coming, each within the drain time of the last:
        // the drain goes on as long as they move.
        let (got, error, _) = drain_with(
            |mut w| {
                for _ in 0..10 {
                    std::thread::sleep(Duration::from_millis(25));
                    w.write_all(&[7; 10]).unwrap();
                }
            },
            &mut || true,
        );
        assert_eq!((got, error), (100, None));
        // A finished peer whose end stays open with nothing coming: given up after the
        // drain time, the pair counted as an error.
        let (got, error, took) = drain_with(
            move |w| {
                std::thread::sleep(Duration::from_secs(2));
                drop(w);
            },
            &mut || true,
        );
        assert_eq!(got, 0);
        assert!(error.is_some_and(|e| e.contains("drain")));
        assert!(took < Duration::from_secs(2), "{took:?}");
    }

    #[test]
    fn jains_index_is_one_when_fair_and_one_over_n_when_one_takes_all() {
        assert_eq!(jain(&[5.0, 5.0, 5.0, 5.0]), 1.0);
        assert_eq!(jain(&[8.0, 0.0, 0.0, 0.0]), 0.25);
        assert!((jain(&[1.0, 2.0, 3.0]) - 36.0 / 42.0).abs() < 1e-12);
        assert_eq!(jain(&[]), 0.0);
        assert_eq!(jain(&[0.0, 0.0]), 0.0);
    }
}

//! `--interval`: what a run has moved so far, while it runs.
//!
//! The roles of a measured run publish their running totals into one [`Live`] at the
//! points where they already look at the clock or the Ctrl-C flag (every 16 KiB of a
//! stream, every round trip, every datagram of a rate receiver): a relaxed atomic add on
//! a cache line of their own role, nothing at all when `--interval` is off. A sampler
//! thread ([`Sampler`]) reads the totals at every interval's end and turns the
//! differences into [`Interval`]s. The last interval is closed with the roles' own final
//! counts ([`close`]), so the intervals of a run add up exactly to its totals.
//!
//! TCP retransmissions come from `TCP_INFO` (`tcpi_total_retrans`) of each sending
//! socket, read by the sender itself once per interval: at an interval's end the
//! sampler raises an epoch, each TCP sender reads its socket at its next check and
//! acknowledges, and the sampler waits a few milliseconds for the acknowledgements before
//! it reads the totals.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::vocab::Role;

/// A role's running totals, alone on its cache line(s) so the other role's updates do
/// not bounce it.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot {
    bytes: AtomicU64,
    messages: AtomicU64,
}

/// The receivers' sequence gaps (rate): the loss known so far, and whether any receiver
/// counts it.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Gaps {
    lost: AtomicU64,
    known: AtomicBool,
}

/// The running totals of one measured run (all streams).
#[derive(Debug, Default)]
pub struct Live {
    sent: Slot,
    received: Slot,
    gaps: Gaps,
    /// TCP retransmissions the senders have counted, and whether any sender could.
    retransmits: AtomicU64,
    retransmits_known: AtomicBool,
    /// Raised by the sampler at each interval's end; senders that read TCP_INFO answer
    /// by adding to `acks`.
    epoch: AtomicU64,
    acks: AtomicU64,
    /// TCP senders in this process (each answers every epoch).
    tcp_senders: AtomicU64,
    /// When the run's start line opened.
    started: OnceLock<Instant>,
    /// Roles that have finished their run (their publisher is gone).
    finished: AtomicU64,
    /// Whether the senders here feed the watched receivers, so their retransmissions
    /// belong with the counts (not with `--bidir`, where they feed the other direction).
    no_retransmits: bool,
    /// How long the sampler waits for the senders' answers, in nanoseconds (0: the
    /// default [`ACK_WAIT`]); a test lengthens it so that the wait, not a scheduling
    /// accident, decides what it sees.
    ack_wait_ns: AtomicU64,
}

/// The totals at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// Messages sent.
    pub messages_sent: u64,
    /// Payload bytes received.
    pub bytes_received: u64,
    /// Messages received.
    pub messages_received: u64,
    /// Messages known lost (sequence gaps at the receivers), where they are counted.
    pub lost: Option<u64>,
    /// TCP retransmissions, when a sender could read them.
    pub retransmits: Option<u64>,
}

impl Live {
    /// Fresh totals for one run.
    pub fn new() -> Arc<Live> {
        Arc::new(Live::default())
    }

    /// Fresh totals for a run whose senders here do not feed the receivers watched
    /// (`--bidir`): no retransmissions are counted.
    pub fn without_retransmits() -> Arc<Live> {
        Arc::new(Live {
            no_retransmits: true,
            ..Live::default()
        })
    }

    /// How long the sampler waits for the TCP senders' answers.
    fn ack_wait(&self) -> Duration {
        match self.ack_wait_ns.load(Relaxed) {
            0 => ACK_WAIT,
            ns => Duration::from_nanos(ns),
        }
    }

    fn slot(&self, role: Role) -> &Slot {
        match role {
            Role::Sender => &self.sent,
            Role::Receiver => &self.received,
        }
    }

    /// The run's start line opened at `at` (the first call counts).
    pub fn start(&self, at: Instant) {
        let _ = self.started.set(at);
    }

    /// When the start line opened, once it has.
    pub fn started(&self) -> Option<Instant> {
        self.started.get().copied()
    }

    /// The totals now.
    pub fn totals(&self) -> Totals {
        Totals {
            bytes_sent: self.sent.bytes.load(Relaxed),
            messages_sent: self.sent.messages.load(Relaxed),
            bytes_received: self.received.bytes.load(Relaxed),
            messages_received: self.received.messages.load(Relaxed),
            lost: self
                .gaps
                .known
                .load(Relaxed)
                .then(|| self.gaps.lost.load(Relaxed)),
            retransmits: self
                .retransmits_known
                .load(Relaxed)
                .then(|| self.retransmits.load(Relaxed)),
        }
    }
}

/// One role's writer into a [`Live`]: remembers what it has published, so each call
/// adds only what is new. With no `Live` (no `--interval`) every call is one branch.
pub struct Publisher {
    live: Option<Arc<Live>>,
    role: Role,
    bytes: u64,
    messages: u64,
    /// The TCP socket whose retransmissions this sender counts, its count at the last
    /// reading, and the epoch it last answered.
    tcp: Option<(std::os::fd::RawFd, u64, u64)>,
    /// The final publication ([`Publisher::last`]).
    last: bool,
    /// The sequence gaps it last published.
    gaps: u64,
    /// Every check (a publication, or asking whether anyone listens) is a tick of the
    /// CPU sampler (`measure::placement`), with or without `--interval`.
    ticker: crate::measure::placement::Ticker,
}

impl Publisher {
    /// A publisher for `role`; `tcp_fd` is a sending role's TCP socket, whose
    /// retransmissions it reports.
    pub fn new(
        live: Option<Arc<Live>>,
        role: Role,
        tcp_fd: Option<std::os::fd::RawFd>,
    ) -> Publisher {
        let tcp = match (&live, tcp_fd) {
            (Some(l), Some(fd)) if role == Role::Sender && !l.no_retransmits => {
                match crate::sys::tcp_info::total_retransmits(fd) {
                    Ok(n) => {
                        l.tcp_senders.fetch_add(1, Relaxed);
                        l.retransmits_known.store(true, Relaxed);
                        Some((fd, u64::from(n), l.epoch.load(Relaxed)))
                    }
                    Err(_) => None,
                }
            }
            _ => None,
        };
        Publisher {
            live,
            role,
            bytes: 0,
            messages: 0,
            tcp,
            last: false,
            gaps: 0,
            ticker: crate::measure::placement::Ticker::default(),
        }
    }

    /// Whether anything is listening (`--interval`): check before computing costly
    /// arguments for [`Publisher::publish`]. Like a publication, it is a tick of the CPU
    /// sampler (`measure::placement`).
    #[inline]
    pub fn is_on(&self) -> bool {
        self.ticker.tick();
        self.live.is_some()
    }

    /// A receiver's sequence gaps now (numbers below the highest seen not received; it
    /// can shrink when a late message fills one). Streams add up.
    #[inline]
    pub fn gaps(&mut self, gaps: u64) {
        let Some(live) = self.live.as_deref() else {
            return;
        };
        live.gaps.known.store(true, Relaxed);
        if gaps != self.gaps {
            // Modulo 2^64, so a shrinking count subtracts.
            live.gaps
                .lost
                .fetch_add(gaps.wrapping_sub(self.gaps), Relaxed);
            self.gaps = gaps;
        }
    }

    /// This role's final totals, at the end of its run (its socket still open): also
    /// reads its retransmissions one last time, whatever the sampler asked.
    pub fn last(&mut self, bytes: u64, messages: u64) {
        self.last = true;
        self.publish(bytes, messages);
    }

    /// This role's totals so far are `bytes` and `messages`.
    #[inline]
    pub fn publish(&mut self, bytes: u64, messages: u64) {
        self.ticker.tick();
        let Some(live) = self.live.as_deref() else {
            return;
        };
        let slot = live.slot(self.role);
        if bytes != self.bytes {
            slot.bytes
                .fetch_add(bytes.wrapping_sub(self.bytes), Relaxed);
            self.bytes = bytes;
        }
        if messages != self.messages {
            slot.messages
                .fetch_add(messages.wrapping_sub(self.messages), Relaxed);
            self.messages = messages;
        }
        if let Some((fd, before, seen)) = &mut self.tcp {
            let epoch = live.epoch.load(Relaxed);
            if epoch != *seen || self.last {
                if let Ok(now) = crate::sys::tcp_info::total_retransmits(*fd) {
                    let now = u64::from(now);
                    live.retransmits
                        .fetch_add(now.saturating_sub(*before), Relaxed);
                    *before = now;
                }
                *seen = epoch;
                live.acks.fetch_add(1, Relaxed);
            }
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        if let Some(live) = &self.live {
            live.finished.fetch_add(1, Relaxed);
        }
    }
}

/// Whose counts the intervals show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watch {
    /// The receiving roles: bytes and messages received (pingpong with its client
    /// elsewhere: requests echoed; connect: connections accepted), and rate's loss from
    /// sequence gaps.
    Receiver,
    /// The sending roles: stream's and rate's when the receivers ran elsewhere; connect's
    /// dialers (connections made).
    Sender,
    /// pingpong's clients (the sending role): round trips completed.
    Client,
}

impl Watch {
    fn name(self) -> &'static str {
        match self {
            Watch::Receiver => "receiver",
            Watch::Sender => "sender",
            Watch::Client => "client",
        }
    }
}

/// How long the sampler waits for the TCP senders' answers at an interval's end.
const ACK_WAIT: Duration = Duration::from_millis(5);

/// The thread that closes an interval every `every` and hands it to a printer.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Vec<(Interval, Totals)>>>,
}

impl Sampler {
    /// Start sampling `live` every `every`, printing each closed interval with `print`.
    /// No interval is closed at or after `until` (a timed run's length) or once a role
    /// has finished: the run's last interval is closed from the roles' own counts
    /// ([`close`]).
    pub fn start(
        live: Arc<Live>,
        every: Duration,
        until: Option<Duration>,
        watch: Watch,
        print: impl Fn(&Interval) + Send + 'static,
    ) -> std::io::Result<Sampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("sb-interval".into())
            .spawn(move || sample(&live, every, until, watch, &stopped, &print))?;
        Ok(Sampler {
            stop,
            handle: Some(handle),
        })
    }

    /// Stop and return the intervals closed so far, each with the totals at its end.
    pub fn finish(mut self) -> Vec<(Interval, Totals)> {
        self.stop.store(true, Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}

/// Sleep until `at` or until `stop`, in short steps; false if stopped.
fn sleep_until(at: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= at {
            return true;
        }
        std::thread::sleep((at - now).min(Duration::from_millis(20)));
    }
}

fn sample(
    live: &Live,
    every: Duration,
    until: Option<Duration>,
    watch: Watch,
    stop: &AtomicBool,
    print: &dyn Fn(&Interval),
) -> Vec<(Interval, Totals)> {
    let mut out = Vec::new();
    // Wait for the start line.
    let t0 = loop {
        if let Some(t0) = live.started() {
            break t0;
        }
        if stop.load(Relaxed) {
            return out;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let mut before = Totals::default();
    let mut from = 0.0;
    for k in 1u32.. {
        // A tick within a twentieth of an interval of the run's planned end would close
        // a sliver: the last interval takes it.
        if until.is_some_and(|u| every * k + every / 20 >= u) {
            break;
        }
        if !sleep_until(t0 + every * k, stop) || live.finished.load(Relaxed) > 0 {
            break;
        }
        // Ask the TCP senders for their retransmissions, and give them a moment.
        let acks = live.acks.load(Relaxed);
        live.epoch.fetch_add(1, Relaxed);
        let senders = live.tcp_senders.load(Relaxed);
        let asked = Instant::now();
        let wait = live.ack_wait();
        while live.acks.load(Relaxed) < acks + senders && asked.elapsed() < wait {
            std::thread::sleep(Duration::from_micros(200));
        }
        let now = live.totals();
        let to = t0.elapsed().as_secs_f64();
        let interval = between(watch, from, to, &before, &now);
        print(&interval);
        out.push((interval, now));
        before = now;
        from = to;
    }
    out
}

/// The interval from `from` to `to` seconds, between the totals `a` and `b`.
pub fn between(watch: Watch, from: f64, to: f64, a: &Totals, b: &Totals) -> Interval {
    let (bytes, messages) = match watch {
        Watch::Receiver => (
            b.bytes_received.saturating_sub(a.bytes_received),
            b.messages_received.saturating_sub(a.messages_received),
        ),
        Watch::Sender | Watch::Client => (
            b.bytes_sent.saturating_sub(a.bytes_sent),
            b.messages_sent.saturating_sub(a.messages_sent),
        ),
    };
    let seconds = to - from;
    let per_second = |n: u64| {
        if seconds > 0.0 {
            n as f64 / seconds
        } else {
            0.0
        }
    };
    Interval {
        start_seconds: from,
        end_seconds: to,
        side: watch.name().to_string(),
        bytes,
        messages,
        bits_per_second: per_second(bytes) * 8.0,
        messages_per_second: per_second(messages),
        messages_lost: match watch {
            Watch::Receiver => b.lost.map(|l| l.saturating_sub(a.lost.unwrap_or(0))),
            _ => None,
        },
        retransmits: b
            .retransmits
            .map(|n| n.saturating_sub(a.retransmits.unwrap_or(0))),
    }
}

/// A run's intervals: the sampled ones that ended within the run (`end_seconds`, the
/// watched side's interval), then one last interval to the run's end that takes what the
/// sampled ones did not, so the intervals add up to `last`, the roles' own final totals.
pub fn close(
    watch: Watch,
    sampled: Vec<(Interval, Totals)>,
    end_seconds: f64,
    last: Totals,
) -> Vec<Interval> {
    let mut out = Vec::new();
    let mut before = Totals::default();
    for (interval, totals) in sampled {
        // An interval that ended after the run did (the roles were winding down) is
        // folded into the last one.
        if interval.end_seconds >= end_seconds {
            break;
        }
        before = totals;
        out.push(interval);
    }
    let from = out.last().map_or(0.0, |i| i.end_seconds);
    // Counters published at checks can run ahead of the final totals by nothing, but a
    // role that failed reports less: never a negative interval.
    let mut last = last;
    if last.retransmits.is_none() {
        last.retransmits = before.retransmits;
    }
    if last.lost.is_none() {
        last.lost = before.lost;
    }
    out.push(between(watch, from, end_seconds, &before, &last));
    out
}

/// One interval as a line: `  1.00-2.00 s   1.23 GiB  10.6 Gbit/s  20.1 k msg/s  ...`.
pub fn format_line(label: &str, run: u32, i: &Interval) -> String {
    use crate::vocab::units::{format_bits_per_second, format_bytes, format_per_second};
    let mut s = format!(
        "{label} run {run} {:>6.2}-{:<6.2} s {:>10} {:>14} {:>14}",
        i.start_seconds,
        i.end_seconds,
        format_bytes(i.bytes),
        format_bits_per_second(i.bits_per_second),
        format_per_second(i.messages_per_second).replace("/s", " msg/s"),
    );
    if let Some(lost) = i.messages_lost {
        let sent = i.messages + lost;
        let pct = if sent > 0 {
            100.0 * lost as f64 / sent as f64
        } else {
            0.0
        };
        s.push_str(&format!("  lost {lost}/{sent} ({pct:.2}%)"));
    }
    if let Some(r) = i.retransmits {
        s.push_str(&format!("  retr {r}"));
    }
    s
}

/// One `--interval` of a measured run, as the side whose counts it reads saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Interval {
    /// Start of the interval, seconds after the run's start.
    pub start_seconds: f64,
    /// End of the interval, seconds after the run's start.
    pub end_seconds: f64,
    /// Whose counts these are: `receiver` (stream and rate, when the receivers run in
    /// this process), `sender` (stream and rate when they do not; connect: connections
    /// made) or `client` (pingpong: round trips completed).
    pub side: String,
    /// Payload bytes that side moved in the interval, all streams.
    pub bytes: u64,
    /// Messages (round trips, connections) that side completed in the interval.
    pub messages: u64,
    /// Payload bits per second over the interval.
    pub bits_per_second: f64,
    /// Messages per second over the interval.
    pub messages_per_second: f64,
    /// Messages the sender sent in the interval that the receiver did not receive in it
    /// (datagram transports with both sides in this process; null elsewhere). Messages in
    /// flight at an interval's edge count in the next one, so only the run's total is exact.
    pub messages_lost: Option<u64>,
    /// TCP: segments the sending side's sockets retransmitted in the interval (TCP_INFO
    /// `tcpi_total_retrans`, all streams); null for other transports or when unreadable.
    pub retransmits: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(sent: (u64, u64), received: (u64, u64), retransmits: Option<u64>) -> Totals {
        Totals {
            bytes_sent: sent.0,
            messages_sent: sent.1,
            bytes_received: received.0,
            messages_received: received.1,
            lost: None,
            retransmits,
        }
    }

    #[test]
    fn an_interval_is_the_difference_of_the_watched_sides_totals_over_its_length() {
        let a = Totals {
            lost: Some(2),
            ..totals((1000, 10), (800, 8), Some(3))
        };
        let b = Totals {
            lost: Some(12),
            ..totals((6000, 60), (4800, 48), Some(7))
        };
        let i = between(Watch::Receiver, 1.0, 1.5, &a, &b);
        assert_eq!((i.start_seconds, i.end_seconds), (1.0, 1.5));
        assert_eq!((i.bytes, i.messages), (4000, 40));
        assert_eq!(i.bits_per_second, 4000.0 * 8.0 / 0.5);
        assert_eq!(i.messages_per_second, 80.0);
        // The receivers' known gaps grew by 10 in the interval.
        assert_eq!(i.messages_lost, Some(10));
        assert_eq!(i.retransmits, Some(4));
        assert_eq!(i.side, "receiver");
        let s = between(Watch::Sender, 1.0, 1.5, &a, &b);
        assert_eq!((s.bytes, s.messages, s.messages_lost), (5000, 50, None));
        assert_eq!(s.side, "sender");
        let c = between(Watch::Client, 1.0, 1.5, &a, &b);
        assert_eq!((c.bytes, c.messages, c.side.as_str()), (5000, 50, "client"));
        // No loss where no receiver counts gaps; a late message filling a gap takes
        // nothing back from the interval.
        let r = between(
            Watch::Receiver,
            1.0,
            1.5,
            &Totals { lost: None, ..a },
            &Totals { lost: None, ..b },
        );
        assert_eq!(r.messages_lost, None);
        let filled = between(
            Watch::Receiver,
            1.5,
            2.0,
            &b,
            &Totals {
                lost: Some(11),
                ..b
            },
        );
        assert_eq!(filled.messages_lost, Some(0));
        // Unknown retransmissions stay unknown; a zero-length interval has no rate.
        let none = between(
            Watch::Sender,
            2.0,
            2.0,
            &Totals::default(),
            &Totals::default(),
        );
        assert_eq!((none.retransmits, none.bits_per_second), (None, 0.0));
    }

    #[test]
    fn closing_keeps_the_intervals_inside_the_run_and_ends_on_the_roles_own_totals() {
        let w = Watch::Receiver;
        let t1 = totals((0, 0), (100, 1), Some(1));
        let t2 = totals((0, 0), (250, 2), Some(2));
        let t3 = totals((0, 0), (300, 3), Some(2));
        let sampled = vec![
            (between(w, 0.0, 1.0, &Totals::default(), &t1), t1),
            (between(w, 1.0, 2.0, &t1, &t2), t2),
            // Closed after the run ended (2.5 s): folded into the last interval.
            (between(w, 2.0, 3.0, &t2, &t3), t3),
        ];
        let last = totals((0, 0), (400, 4), None);
        let out = close(w, sampled, 2.5, last);
        assert_eq!(out.len(), 3);
        assert_eq!(out[2].start_seconds, 2.0);
        assert_eq!(out[2].end_seconds, 2.5);
        assert_eq!((out[2].bytes, out[2].messages), (150, 2));
        // The last sampled retransmissions carry over when the end brought none.
        assert_eq!(out[2].retransmits, Some(0));
        assert_eq!(out.iter().map(|i| i.bytes).sum::<u64>(), 400);
        assert_eq!(out.iter().map(|i| i.messages).sum::<u64>(), 4);
        // Nothing sampled: one interval, the whole run.
        let one = close(w, Vec::new(), 0.4, last);
        assert_eq!(one.len(), 1);
        assert_eq!(
            (one[0].start_seconds, one[0].end_seconds, one[0].bytes),
            (0.0, 0.4, 400)
        );
    }

    #[test]
    fn a_publisher_adds_only_what_is_new_and_nothing_without_live() {
        let live = Live::new();
        {
            let mut p = Publisher::new(Some(Arc::clone(&live)), Role::Sender, None);
            p.publish(100, 1);
            p.publish(100, 1);
            p.publish(250, 3);
            let mut q = Publisher::new(Some(Arc::clone(&live)), Role::Receiver, None);
            q.publish(40, 2);
            assert_eq!(live.totals(), totals((250, 3), (40, 2), None));
            assert_eq!(live.finished.load(Relaxed), 0);
        }
        // Both are gone: two roles finished.
        assert_eq!(live.finished.load(Relaxed), 2);
        let mut off = Publisher::new(None, Role::Sender, None);
        off.publish(1, 1);
        off.last(2, 2);
    }

    #[test]
    fn a_tcp_sender_reads_its_retransmissions_when_asked_and_at_its_end() {
        use std::net::{TcpListener, TcpStream};
        use std::os::fd::AsRawFd;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let live = Live::new();
        let mut p = Publisher::new(Some(Arc::clone(&live)), Role::Sender, Some(s.as_raw_fd()));
        assert_eq!(live.tcp_senders.load(Relaxed), 1);
        assert_eq!(live.totals().retransmits, Some(0));
        p.publish(10, 1);
        assert_eq!(live.acks.load(Relaxed), 0, "not asked yet");
        live.epoch.fetch_add(1, Relaxed);
        p.publish(20, 2);
        assert_eq!(live.acks.load(Relaxed), 1);
        p.publish(30, 3);
        assert_eq!(live.acks.load(Relaxed), 1, "once per epoch");
        p.last(40, 4);
        assert_eq!(live.acks.load(Relaxed), 2, "and once at the end");
        // Senders that feed the other direction's receivers count none.
        let bidir = Live::without_retransmits();
        let _b = Publisher::new(Some(Arc::clone(&bidir)), Role::Sender, Some(s.as_raw_fd()));
        assert_eq!(bidir.totals().retransmits, None);
        // A socket that is not TCP has no retransmissions to report.
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let other = Live::new();
        let _u = Publisher::new(Some(Arc::clone(&other)), Role::Sender, Some(a.as_raw_fd()));
        assert_eq!(other.totals().retransmits, None);
        assert_eq!(other.tcp_senders.load(Relaxed), 0);
    }

    #[test]
    fn the_sampler_closes_an_interval_every_period_from_the_start_line() {
        let live = Live::new();
        let printed = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = Arc::clone(&printed);
        let sampler = Sampler::start(
            Arc::clone(&live),
            Duration::from_millis(50),
            Some(Duration::from_millis(175)),
            Watch::Sender,
            move |i| seen.lock().unwrap().push(i.clone()),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        live.start(Instant::now());
        let mut p = Publisher::new(Some(Arc::clone(&live)), Role::Sender, None);
        let t0 = Instant::now();
        let mut n = 0;
        while t0.elapsed() < Duration::from_millis(190) {
            n += 1;
            p.publish(n, n);
            std::thread::sleep(Duration::from_millis(1));
        }
        let sampled = sampler.finish();
        // Ticks at 50, 100 and 150 ms; none at 200 (past the planned 175).
        assert_eq!(sampled.len(), 3, "{sampled:?}");
        assert_eq!(printed.lock().unwrap().len(), 3);
        for (k, (i, _)) in sampled.iter().enumerate() {
            let end = 0.05 * (k + 1) as f64;
            assert!(i.end_seconds >= end && i.end_seconds < end + 0.03, "{i:?}");
            assert!(i.messages > 0);
        }
        assert!(sampled
            .windows(2)
            .all(|w| w[0].0.end_seconds == w[1].0.start_seconds));
        let covered: u64 = sampled.iter().map(|(i, _)| i.messages).sum();
        assert_eq!(covered, sampled.last().unwrap().1.messages_sent);
    }

    #[test]
    fn the_sampler_stops_when_a_role_finishes_or_before_the_start() {
        let live = Live::new();
        let sampler = Sampler::start(
            Arc::clone(&live),
            Duration::from_millis(20),
            None,
            Watch::Sender,
            |_| {},
        )
        .unwrap();
        // Never started: finish returns at once with nothing.
        assert!(sampler.finish().is_empty());
        let sampler = Sampler::start(
            Arc::clone(&live),
            Duration::from_millis(20),
            None,
            Watch::Sender,
            |_| {},
        )
        .unwrap();
        live.start(Instant::now());
        drop(Publisher::new(
            Some(Arc::clone(&live)),
            Role::Receiver,
            None,
        ));
        std::thread::sleep(Duration::from_millis(70));
        assert!(
            sampler.finish().is_empty(),
            "a finished role ends the sampling"
        );
    }

    #[test]
    fn sequence_gaps_add_up_over_streams_and_shrink_when_filled() {
        let live = Live::new();
        assert_eq!(live.totals().lost, None, "unknown until a receiver counts");
        let mut a = Publisher::new(Some(Arc::clone(&live)), Role::Receiver, None);
        let mut b = Publisher::new(Some(Arc::clone(&live)), Role::Receiver, None);
        a.gaps(0);
        assert_eq!(live.totals().lost, Some(0));
        a.gaps(5);
        b.gaps(3);
        assert_eq!(live.totals().lost, Some(8));
        a.gaps(4);
        assert_eq!(live.totals().lost, Some(7));
        Publisher::new(None, Role::Receiver, None).gaps(9);
        assert_eq!(live.totals().lost, Some(7));
    }

    #[test]
    fn a_publisher_is_on_only_with_somewhere_to_publish() {
        assert!(!Publisher::new(None, Role::Receiver, None).is_on());
        assert!(Publisher::new(Some(Live::new()), Role::Receiver, None).is_on());
    }

    #[test]
    fn no_interval_closes_within_a_twentieth_of_the_planned_end() {
        // Ticks at 50 and 100 ms; the run is planned for 102 ms: the tick at 100 would
        // close a 2 ms sliver, so only the first closes.
        let live = Live::new();
        let sampler = Sampler::start(
            Arc::clone(&live),
            Duration::from_millis(50),
            Some(Duration::from_millis(102)),
            Watch::Sender,
            |_| {},
        )
        .unwrap();
        live.start(Instant::now());
        std::thread::sleep(Duration::from_millis(160));
        assert_eq!(sampler.finish().len(), 1);
    }

    #[test]
    fn the_sampler_waits_for_the_tcp_senders_answers_before_it_reads() {
        use std::net::{TcpListener, TcpStream};
        use std::os::fd::AsRawFd;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let live = Live::new();
        // The wait, long enough that no scheduling delay of this thread outlasts it: the
        // answer, not the clock, ends it.
        live.ack_wait_ns.store(10_000_000_000, Relaxed);
        let mut p = Publisher::new(Some(Arc::clone(&live)), Role::Sender, Some(s.as_raw_fd()));
        let sampler = Sampler::start(
            Arc::clone(&live),
            Duration::from_millis(40),
            Some(Duration::from_millis(70)),
            Watch::Sender,
            |_| {},
        )
        .unwrap();
        let t0 = Instant::now();
        live.start(t0);
        // A sender that sees the question late and answers with 100 more bytes: the
        // sampler must have waited for them.
        while live.epoch.load(Relaxed) == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
        std::thread::sleep(Duration::from_millis(20));
        p.publish(100, 1);
        let sampled = sampler.finish();
        // It stopped waiting at the answer, not at its 10 s limit.
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert_eq!(sampled.len(), 1);
        assert_eq!(sampled[0].0.bytes, 100, "{sampled:?}");
        assert_eq!(sampled[0].0.retransmits, Some(0));
    }

    #[test]
    fn a_dropped_sampler_stops_sampling() {
        let live = Live::new();
        let count = Arc::new(AtomicU64::new(0));
        let seen = Arc::clone(&count);
        let sampler = Sampler::start(
            Arc::clone(&live),
            Duration::from_millis(10),
            None,
            Watch::Sender,
            move |_| {
                seen.fetch_add(1, Relaxed);
            },
        )
        .unwrap();
        live.start(Instant::now());
        std::thread::sleep(Duration::from_millis(35));
        drop(sampler);
        std::thread::sleep(Duration::from_millis(30));
        let after = count.load(Relaxed);
        assert!(after >= 2, "{after}");
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(count.load(Relaxed), after, "still sampling after the drop");
    }

    #[test]
    fn a_line_with_nothing_sent_shows_no_loss_rate() {
        let i = between(
            Watch::Receiver,
            0.0,
            1.0,
            &Totals {
                lost: Some(0),
                ..Totals::default()
            },
            &Totals {
                lost: Some(0),
                ..Totals::default()
            },
        );
        let line = format_line("rate udp 64 B", 1, &i);
        assert!(line.contains("lost 0/0 (0.00%)"), "{line}");
    }

    #[test]
    fn a_line_shows_the_interval_its_rates_loss_and_retransmissions() {
        let i = Interval {
            start_seconds: 1.0,
            end_seconds: 2.0,
            side: "receiver".into(),
            bytes: 1 << 30,
            messages: 16384,
            bits_per_second: 8.0 * (1u64 << 30) as f64,
            messages_per_second: 16384.0,
            messages_lost: Some(16),
            retransmits: Some(5),
        };
        let line = format_line("stream udp 64 KiB", 2, &i);
        assert!(
            line.starts_with("stream udp 64 KiB run 2   1.00-2.00"),
            "{line}"
        );
        for part in [
            "1 GiB",
            "8.59 Gbit/s",
            "16.4 k msg/s",
            "lost 16/16400 (0.10%)",
            "retr 5",
        ] {
            assert!(line.contains(part), "{part} in {line}");
        }
        let quiet = Interval {
            messages_lost: None,
            retransmits: None,
            ..i
        };
        let line = format_line("x", 1, &quiet);
        assert!(!line.contains("lost") && !line.contains("retr"), "{line}");
    }
}

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

use crate::report::Interval;
use crate::workload::Role;

/// A role's running totals, alone on its cache line(s) so the other role's updates do
/// not bounce it.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot {
    bytes: AtomicU64,
    messages: AtomicU64,
}

/// The running totals of one measured run (all streams).
#[derive(Debug, Default)]
pub struct Live {
    sent: Slot,
    received: Slot,
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
    /// TCP retransmissions, when a sender could read them.
    pub retransmits: Option<u64>,
}

impl Live {
    /// Fresh totals for one run.
    pub fn new() -> Arc<Live> {
        Arc::new(Live::default())
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
            (Some(l), Some(fd)) if role == Role::Sender => {
                match crate::sys::zerocopy::total_retransmits(fd) {
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
                if let Ok(now) = crate::sys::zerocopy::total_retransmits(*fd) {
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
    /// The receiving roles (they ran in this process): bytes and messages received, and
    /// loss against what the senders here sent when `loss` is set.
    Receiver {
        /// Both roles are here and messages can be lost: count the difference.
        loss: bool,
    },
    /// The sending roles: the receivers ran elsewhere, or connect's dialers (connections
    /// made).
    Sender,
    /// pingpong's clients (the sending role): round trips completed.
    Client,
}

impl Watch {
    fn name(self) -> &'static str {
        match self {
            Watch::Receiver { .. } => "receiver",
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
        while live.acks.load(Relaxed) < acks + senders && asked.elapsed() < ACK_WAIT {
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
        Watch::Receiver { .. } => (
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
            Watch::Receiver { loss: true } => Some(
                b.messages_sent
                    .saturating_sub(a.messages_sent)
                    .saturating_sub(messages),
            ),
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
    out.push(between(watch, from, end_seconds, &before, &last));
    out
}

/// One interval as a line: `  1.00-2.00 s   1.23 GiB  10.6 Gbit/s  20.1 k msg/s  ...`.
pub fn format_line(label: &str, run: u32, i: &Interval) -> String {
    use crate::measure::units::{format_bits_per_second, format_bytes, format_per_second};
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

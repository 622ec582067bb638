//! Kernel timestamps (`--timestamps`): the per-message records the roles keep during a
//! run ([`StampLog`]) and, after the run, their join into the parts of each message's
//! one-way time ([`RunStamps`], reported as [`Timestamps`]).
//!
//! A message's one-way time is split by four `CLOCK_REALTIME` reads, two by the sender's
//! kernel and two by sockbench:
//!
//! ```text
//! send call ──user->kernel──> transmit stamp ──kernel->kernel──> receive stamp ──kernel->user──> receive return
//! (sender)                    (sender's kernel)                  (receiver's kernel)            (receiver)
//! ```
//!
//! Records are joined by the message's sequence number (pingpong: the request's, which
//! its reply echoes; rate: the message's). Memory is bounded: a role keeps at most
//! [`CAP`] records; when it is full it drops every other one and from then on keeps only
//! messages whose number is a multiple of twice the step before (`sampled_every` in the
//! report). Both roles apply the same rule to the same numbers, so the join keeps every
//! message whose number is a multiple of the larger of their two steps.
//!
//! Each stream is sampled on its own (a stream that sent fewer messages keeps more of
//! them), so a breakdown merged over streams and runs says what it covers: each
//! direction's messages sent in all beside those it kept (`messages_sent`, `messages`),
//! each stream's step and share (`streams`), and as `sampled_every` the largest step.
//! A message sampling left out is not missing: `missing` counts the kept ones that lack
//! a stamp.
//!
//! This module does no I/O (the stamps are read in `workload::stamped` through
//! `sys::timestamps`) and formats nothing.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::measure::histogram::latency_histogram;
use crate::measure::histogram::{merge, Latency};

/// The most records one role keeps per run (so a role's log crosses the control
/// connection in well under a megabyte).
pub const CAP: usize = 16_384;

/// Times in a log are offsets from a base a little before the log began.
const BASE_MARGIN_NS: u64 = 10_000_000_000;

/// One message's clock reads on one role, nanoseconds of `CLOCK_REALTIME`, 0 where
/// unknown (the stamp did not come, or the role does not take it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The message's sequence number.
    pub seq: u64,
    /// Just before the send call (a sending role).
    pub tx_user: u64,
    /// The kernel's transmit stamp (`SCM_TSTAMP_SND`).
    pub tx_kernel: u64,
    /// The kernel's receive stamp (`SCM_TIMESTAMPING` on the receive).
    pub rx_kernel: u64,
    /// Just after the receive call returned (a receiving role).
    pub rx_user: u64,
    /// rate: the sender's send-call time the message carried (bytes 8..16).
    pub carried: u64,
}

/// What one role recorded during a run: a record per message it kept.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StampLog {
    /// Records are kept for messages whose number is a multiple of this (a power of two).
    pub every: u64,
    /// Times in `records` are nanoseconds after this (`CLOCK_REALTIME`) plus one; 0 is
    /// "unknown".
    pub base_ns: u64,
    /// `[seq, tx_user, tx_kernel, rx_kernel, rx_user, carried]` per kept message.
    pub records: Vec<[u64; 6]>,
    /// The connection's sending end (`address:port`): the sender's own address, the
    /// receiver's peer; how a stream's two logs find each other (empty: unknown).
    #[serde(default)]
    pub link: String,
}

impl StampLog {
    /// An empty log whose times start around `now_ns`.
    pub fn new(now_ns: u64) -> StampLog {
        StampLog {
            every: 1,
            base_ns: now_ns.saturating_sub(BASE_MARGIN_NS),
            records: Vec::with_capacity(CAP),
            link: String::new(),
        }
    }

    fn offset(&self, ns: u64) -> u64 {
        if ns == 0 {
            0
        } else {
            ns.saturating_sub(self.base_ns).saturating_add(1)
        }
    }

    fn time(&self, v: u64) -> u64 {
        if v == 0 {
            0
        } else {
            self.base_ns.saturating_add(v - 1)
        }
    }

    /// Keep `r` if its number is sampled; when the log is full, halve it first.
    pub fn push(&mut self, r: &Record) {
        if r.seq % self.every != 0 {
            return;
        }
        if self.records.len() >= crate::testhooks::stamp_cap().map_or(CAP, |c| c.min(CAP)) {
            let every = self.every * 2;
            self.records.retain(|x| x[0] % every == 0);
            self.every = every;
            if r.seq % every != 0 {
                return;
            }
        }
        let rec = [
            r.seq,
            self.offset(r.tx_user),
            self.offset(r.tx_kernel),
            self.offset(r.rx_kernel),
            self.offset(r.rx_user),
            self.offset(r.carried),
        ];
        self.records.push(rec);
    }

    /// The records kept, in real times, by sequence number (a number seen twice keeps
    /// its first record).
    fn by_seq(&self, every: u64) -> std::collections::BTreeMap<u64, Record> {
        let mut out = std::collections::BTreeMap::new();
        for x in self.records.iter().filter(|x| x[0] % every == 0) {
            out.entry(x[0]).or_insert(Record {
                seq: x[0],
                tx_user: self.time(x[1]),
                tx_kernel: self.time(x[2]),
                rx_kernel: self.time(x[3]),
                rx_user: self.time(x[4]),
                carried: self.time(x[5]),
            });
        }
        out
    }

    /// The log, if a peer's could be ours: at most [`CAP`] records, a power-of-two step.
    ///
    /// # Errors
    /// What is wrong with it.
    pub fn checked(self) -> Result<StampLog, String> {
        if self.records.len() > CAP {
            return Err(format!(
                "{} timestamp records, over the limit of {CAP}",
                self.records.len()
            ));
        }
        if !self.every.is_power_of_two() || self.every > 1 << 40 {
            return Err(format!("a timestamp sampling step of {}", self.every));
        }
        if self.link.len() > 64 || self.link.chars().any(char::is_control) {
            return Err("a timestamp log with a malformed link".into());
        }
        Ok(self)
    }
}

/// One direction's parts, as histograms.
#[derive(Clone, Debug)]
pub struct DirectionStamps {
    /// `request` (client to server), `reply` (server to client) or `one-way` (rate).
    pub direction: &'static str,
    /// Messages sent this way in all, kept by the sampling or not (the sending role's own
    /// count; 0 until [`of_run`] sets it).
    pub sent: u64,
    /// Messages sent this way among the sampled ones.
    pub messages: u64,
    /// Of those, messages with every stamp, in order.
    pub stamped: u64,
    /// Send call to transmit stamp.
    pub user_to_kernel: Histogram<u64>,
    /// Transmit stamp to receive stamp.
    pub kernel_to_kernel: Histogram<u64>,
    /// Receive stamp to the receive call's return.
    pub kernel_to_user: Histogram<u64>,
    /// Send call to the receive call's return (the three parts' sum, message by message).
    pub one_way: Histogram<u64>,
}

impl DirectionStamps {
    fn new(direction: &'static str) -> DirectionStamps {
        DirectionStamps {
            direction,
            sent: 0,
            messages: 0,
            stamped: 0,
            user_to_kernel: latency_histogram(),
            kernel_to_kernel: latency_histogram(),
            kernel_to_user: latency_histogram(),
            one_way: latency_histogram(),
        }
    }

    /// Count one message sent this way: its four clock reads if they are all there and
    /// in order, or a missing one.
    fn add(&mut self, send_call: u64, tx: u64, rx: u64, returned: u64) {
        self.messages += 1;
        let reads = [send_call, tx, rx, returned];
        if reads.contains(&0) || reads.windows(2).any(|w| w[1] < w[0]) {
            return;
        }
        self.stamped += 1;
        for (h, ns) in [
            (&mut self.user_to_kernel, tx - send_call),
            (&mut self.kernel_to_kernel, rx - tx),
            (&mut self.kernel_to_user, returned - rx),
            (&mut self.one_way, returned - send_call),
        ] {
            h.saturating_record(ns.clamp(1, 3_600_000_000_000));
        }
    }

    fn merge(&mut self, other: &DirectionStamps) {
        self.sent = self.sent.saturating_add(other.sent);
        self.messages += other.messages;
        self.stamped += other.stamped;
        merge(&mut self.user_to_kernel, &other.user_to_kernel);
        merge(&mut self.kernel_to_kernel, &other.kernel_to_kernel);
        merge(&mut self.kernel_to_user, &other.kernel_to_user);
        merge(&mut self.one_way, &other.one_way);
    }
}

/// One stream's share of a breakdown: how finely its join was sampled and how many of
/// its messages that kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StampedStream {
    /// The stream's sampling step: its records were kept for messages whose sequence
    /// number is a multiple of this (1: every message).
    pub sampled_every: u64,
    /// Messages the stream's sender sent (pingpong: requests, i.e. round trips begun;
    /// rate: messages).
    pub messages_sent: u64,
    /// Of those, the ones the breakdown covers (kept by the sampling on both roles).
    pub messages: u64,
}

/// A run's (or a scenario's) joined stamps.
#[derive(Clone, Debug)]
pub struct RunStamps {
    /// The sampling step of the join: the largest of any role's, over streams and runs
    /// (each stream's own is in `streams`).
    pub every: u64,
    /// One entry per direction.
    pub directions: Vec<DirectionStamps>,
    /// pingpong: the server's receive return to its reply's send call.
    pub turnaround: Option<Histogram<u64>>,
    /// One entry per stream joined (set by [`of_run`]), runs one after the other.
    pub streams: Vec<StampedStream>,
}

impl RunStamps {
    /// Add another run's (or stream's) stamps.
    pub fn merge(&mut self, other: &RunStamps) {
        self.every = self.every.max(other.every);
        self.streams.extend_from_slice(&other.streams);
        for (a, b) in self.directions.iter_mut().zip(&other.directions) {
            a.merge(b);
        }
        match (&mut self.turnaround, &other.turnaround) {
            (Some(a), Some(b)) => merge(a, b),
            (None, Some(b)) => self.turnaround = Some(b.clone()),
            _ => {}
        }
    }
}

/// Join a pingpong client's and server's logs: the request (client to server), the
/// server's turnaround, the reply (server to client). Requests the server never saw
/// and replies that never came back count as missing.
pub fn join_pingpong(client: &StampLog, server: &StampLog) -> RunStamps {
    let every = client.every.max(server.every).max(1);
    let (c, s) = (client.by_seq(every), server.by_seq(every));
    let mut request = DirectionStamps::new("request");
    let mut reply = DirectionStamps::new("reply");
    let mut turnaround = latency_histogram();
    for (seq, cr) in &c {
        let sr = s.get(seq).copied().unwrap_or_default();
        request.add(cr.tx_user, cr.tx_kernel, sr.rx_kernel, sr.rx_user);
    }
    for (seq, sr) in &s {
        let cr = c.get(seq).copied().unwrap_or_default();
        reply.add(sr.tx_user, sr.tx_kernel, cr.rx_kernel, cr.rx_user);
        if sr.rx_user > 0 && sr.tx_user >= sr.rx_user {
            turnaround.saturating_record((sr.tx_user - sr.rx_user).max(1));
        }
    }
    RunStamps {
        every,
        directions: vec![request, reply],
        turnaround: Some(turnaround),
        streams: Vec::new(),
    }
}

/// Join a rate sender's and receiver's logs: one direction. Messages the receiver never
/// got count as missing.
pub fn join_rate(sender: &StampLog, receiver: &StampLog) -> RunStamps {
    let every = sender.every.max(receiver.every).max(1);
    let (s, r) = (sender.by_seq(every), receiver.by_seq(every));
    let mut one_way = DirectionStamps::new("one-way");
    for (seq, sr) in &s {
        let rr = r.get(seq).copied().unwrap_or_default();
        one_way.add(sr.tx_user, sr.tx_kernel, rr.rx_kernel, rr.rx_user);
    }
    RunStamps {
        every,
        directions: vec![one_way],
        turnaround: None,
        streams: Vec::new(),
    }
}

/// How a workload's messages are stamped and joined ([`crate::workload::Spec::exchange`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    /// A request and its reply (pingpong): each direction's one-way parts, and the
    /// server's turnaround.
    RequestReply,
    /// Messages one way (rate).
    OneWay,
}

/// One direction's parts in the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StampedDirection {
    /// `request` (client to server) and `reply` (server to client) for pingpong;
    /// `one-way` for rate.
    pub direction: String,
    /// Messages sent this way in all, over every stream (and run), whether the sampling
    /// kept them or not: pingpong's requests as the client counts them and replies as
    /// the server does; rate's messages as the sender does.
    #[serde(default)]
    pub messages_sent: u64,
    /// Of those, the messages the breakdown covers: those the sampling kept (every one
    /// when each stream's `sampled_every` is 1).
    pub messages: u64,
    /// Of those, messages with all four clock reads, in order.
    pub stamped: u64,
    /// Of those (the kept ones), messages that lack a stamp: lost on the way, or the
    /// kernel gave none (a TCP send merged into a segment already queued loses its
    /// transmit stamp). Messages the sampling left out are not missing: they are
    /// `messages_sent` - `messages`.
    pub missing: u64,
    /// The sender's send call to its kernel's transmit stamp (the packet reaches the
    /// device).
    pub user_to_kernel: Option<Latency>,
    /// The transmit stamp to the receiving kernel's receive stamp.
    pub kernel_to_kernel: Option<Latency>,
    /// The receive stamp to the return of the receiver's receive call.
    pub kernel_to_user: Option<Latency>,
    /// The send call to the receive call's return: the three parts' sum, message by
    /// message.
    pub one_way: Option<Latency>,
}

/// What `--timestamps` found, for a run or over a scenario's runs (histograms merged).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Timestamps {
    /// Where every stamp came from: `software` (the kernel's `CLOCK_REALTIME`, the clock
    /// sockbench reads around its calls).
    pub source: String,
    /// The device the packets went through (`lo` with both roles on this host).
    pub device: Option<String>,
    /// Whether that device can stamp in hardware (`SIOCETHTOOL` `ETHTOOL_GET_TS_INFO`);
    /// null if it could not be asked.
    pub hardware_available: Option<bool>,
    /// Why the parts use software stamps.
    pub note: String,
    /// Records are kept for messages whose sequence number is a multiple of this (1:
    /// every message): each role keeps at most 16384 per run. Each stream is sampled on
    /// its own; over several streams (or runs) this is the largest step, and `streams`
    /// has each one's.
    pub sampled_every: u64,
    /// One entry per stream of each run (runs one after the other): its sampling step,
    /// the messages its sender sent and those the breakdown covers. Their `messages`
    /// add up to the first direction's.
    #[serde(default)]
    pub streams: Vec<StampedStream>,
    /// One entry per direction.
    pub directions: Vec<StampedDirection>,
    /// pingpong: the server's turnaround, from its request's receive return to its
    /// reply's send call.
    pub turnaround: Option<Latency>,
}

/// Why the parts use software stamps, for a device that said `hw` about itself.
fn hardware_note(dev: &str, hw: Option<crate::sys::timestamps::DeviceStamps>) -> String {
    match hw {
        Some(h) if h.hardware => format!(
            "{dev} can stamp in hardware, but in its own clock (PTP clock {}), another domain than the \
             CLOCK_REALTIME sockbench reads: every part uses software stamps",
            h.phc_index.map_or("unknown".into(), |i| format!("/dev/ptp{i}"))
        ),
        Some(_) => format!("{dev}: no hardware timestamps; software stamps"),
        None => "software stamps (the device's hardware stamps could not be queried)".into(),
    }
}

/// The report of joined stamps, for packets that went through `device`.
pub fn report(stamps: &RunStamps, device: Option<&str>) -> Timestamps {
    let hw = device.and_then(crate::sys::timestamps::device_stamps);
    let note = hardware_note(device.unwrap_or("the device"), hw);
    Timestamps {
        source: "software".into(),
        device: device.map(str::to_string),
        hardware_available: hw.map(|h| h.hardware),
        note,
        sampled_every: stamps.every,
        streams: stamps.streams.clone(),
        directions: stamps
            .directions
            .iter()
            .map(|d| StampedDirection {
                direction: d.direction.to_string(),
                messages_sent: d.sent,
                messages: d.messages,
                stamped: d.stamped,
                missing: d.messages - d.stamped,
                user_to_kernel: Latency::of(&d.user_to_kernel),
                kernel_to_kernel: Latency::of(&d.kernel_to_kernel),
                kernel_to_user: Latency::of(&d.kernel_to_user),
                one_way: Latency::of(&d.one_way),
            })
            .collect(),
        turnaround: stamps.turnaround.as_ref().and_then(Latency::of),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1_700_000_000_000_000_000;

    fn log(records: &[Record]) -> StampLog {
        let mut l = StampLog::new(T);
        records.iter().for_each(|r| l.push(r));
        l
    }

    #[test]
    fn pingpong_parts_are_the_differences_of_both_roles_clock_reads() {
        // Request 0: sent at T, stamped T+1000, received by the server's kernel at T+1300,
        // returned at T+4300; the reply sent at T+5000, stamped +700, back at the client's
        // kernel +200 later, returned +3000 later.
        let client = log(&[Record {
            seq: 0,
            tx_user: T,
            tx_kernel: T + 1000,
            rx_kernel: T + 5900,
            rx_user: T + 8900,
            carried: 0,
        }]);
        let server = log(&[Record {
            seq: 0,
            rx_kernel: T + 1300,
            rx_user: T + 4300,
            tx_user: T + 5000,
            tx_kernel: T + 5700,
            carried: 0,
        }]);
        let j = join_pingpong(&client, &server);
        let [req, rep] = &j.directions[..] else {
            panic!("two directions")
        };
        let one = |h: &Histogram<u64>| (h.len(), h.lowest_equivalent(h.max()));
        assert_eq!(one(&req.user_to_kernel), (1, 1000));
        assert_eq!(one(&req.kernel_to_kernel), (1, 300));
        assert_eq!(one(&req.kernel_to_user), (1, 3000));
        assert_eq!(one(&req.one_way), (1, 4300));
        assert_eq!(one(&rep.user_to_kernel), (1, 700));
        assert_eq!(one(&rep.kernel_to_kernel), (1, 200));
        assert_eq!(one(&rep.kernel_to_user), (1, 3000));
        assert_eq!(one(j.turnaround.as_ref().unwrap()), (1, 700));
        assert_eq!((req.messages, req.stamped, rep.stamped), (1, 1, 1));
    }

    #[test]
    fn a_message_without_a_stamp_or_with_stamps_out_of_order_is_missing() {
        let sender = log(&[
            Record {
                seq: 0,
                tx_user: T,
                tx_kernel: T + 10,
                ..Record::default()
            },
            Record {
                seq: 1,
                tx_user: T,
                tx_kernel: 0, // no transmit stamp
                ..Record::default()
            },
            Record {
                seq: 2,
                tx_user: T,
                tx_kernel: T + 10,
                ..Record::default()
            },
            Record {
                seq: 3, // never received
                tx_user: T,
                tx_kernel: T + 10,
                ..Record::default()
            },
        ]);
        let rx = |seq, rx_kernel| Record {
            seq,
            rx_kernel,
            rx_user: T + 100,
            ..Record::default()
        };
        let receiver = log(&[rx(0, T + 20), rx(1, T + 20), rx(2, T + 5)]);
        let j = join_rate(&sender, &receiver);
        let d = &j.directions[0];
        assert_eq!((d.messages, d.stamped), (4, 1), "only message 0 is whole");
        assert_eq!(d.one_way.max(), 100);
        assert!(j.turnaround.is_none());
        let r = report(&j, Some("lo"));
        assert_eq!(r.directions[0].missing, 3);
        assert_eq!(r.hardware_available, Some(false));
        assert!(r.note.contains("lo: no hardware timestamps"), "{}", r.note);
    }

    #[test]
    fn a_full_log_keeps_every_other_message_and_both_roles_join_on_the_same_ones() {
        let rec = |seq| Record {
            seq,
            tx_user: T + seq * 1000,
            tx_kernel: T + seq * 1000 + 10,
            rx_kernel: T + seq * 1000 + 20,
            rx_user: T + seq * 1000 + 30,
            carried: 0,
        };
        let n = CAP as u64 * 3;
        let mut sender = StampLog::new(T);
        (0..n).for_each(|s| sender.push(&rec(s)));
        assert_eq!(sender.every, 4);
        assert!(sender.records.len() <= CAP);
        assert!(sender.records.iter().all(|r| r[0] % 4 == 0));
        // The receiver got fewer messages, so it kept more of them.
        let mut receiver = StampLog::new(T);
        (0..CAP as u64 + 10).for_each(|s| receiver.push(&rec(s)));
        assert_eq!(receiver.every, 2);
        let j = join_rate(&sender, &receiver);
        assert_eq!(j.every, 4);
        let d = &j.directions[0];
        // Sampled messages sent: n/4; those the receiver got: (CAP+10)/4 rounded up.
        assert_eq!(d.messages, n / 4);
        assert_eq!(d.stamped, (CAP as u64 + 10).div_ceil(4));
        assert_eq!(d.kernel_to_kernel.max(), 10);
        assert_eq!(d.one_way.min(), 30);
    }

    #[test]
    fn a_peer_log_over_the_cap_or_with_an_odd_step_is_refused() {
        let ok = StampLog::new(T);
        assert!(ok.clone().checked().is_ok());
        let big = StampLog {
            records: vec![[0; 6]; CAP + 1],
            ..ok.clone()
        };
        assert!(big.checked().unwrap_err().contains("over the limit"));
        let odd = StampLog { every: 3, ..ok };
        assert!(odd.checked().is_err());
    }

    #[test]
    fn runs_merge_as_histograms_not_as_averages() {
        let mk = |gap: u64, n: u64| {
            let s: Vec<Record> = (0..n)
                .map(|seq| Record {
                    seq,
                    tx_user: T,
                    tx_kernel: T + 1,
                    ..Record::default()
                })
                .collect();
            let r: Vec<Record> = (0..n)
                .map(|seq| Record {
                    seq,
                    rx_kernel: T + 1 + gap,
                    rx_user: T + 2 + gap,
                    ..Record::default()
                })
                .collect();
            join_rate(&log(&s), &log(&r))
        };
        let mut a = mk(100, 1);
        a.merge(&mk(1000, 3));
        let d = &a.directions[0];
        assert_eq!((d.messages, d.stamped), (4, 4));
        assert_eq!(d.kernel_to_kernel.value_at_quantile(0.5), 1000);
        assert_eq!(d.kernel_to_kernel.min(), 100);
    }

    #[test]
    fn a_record_comes_back_with_the_times_it_was_given() {
        let r = Record {
            seq: 7,
            tx_user: T,
            tx_kernel: T + 1,
            rx_kernel: 0,
            rx_user: T + 1_000_000,
            carried: T - 5,
        };
        let mut l = StampLog::new(T);
        l.push(&r);
        assert_eq!(l.by_seq(1).get(&7), Some(&r));
    }

    #[test]
    fn a_peer_log_at_the_limits_is_accepted() {
        let ok = StampLog::new(T);
        let full = StampLog {
            records: vec![[0; 6]; CAP],
            every: 1 << 40,
            link: "a".repeat(64),
            ..ok.clone()
        };
        assert!(full.checked().is_ok());
        let far = StampLog {
            every: 1 << 41,
            ..ok.clone()
        };
        assert!(far.checked().is_err());
        let long = StampLog {
            link: "a".repeat(65),
            ..ok.clone()
        };
        assert!(long.checked().is_err());
        let escape = StampLog {
            link: "\u{1b}[2J".into(),
            ..ok
        };
        assert!(escape.checked().is_err());
    }

    #[test]
    fn two_stamps_taken_in_the_same_nanosecond_are_in_order() {
        let s = log(&[Record {
            seq: 0,
            tx_user: T,
            tx_kernel: T + 5,
            ..Record::default()
        }]);
        let r = log(&[Record {
            seq: 0,
            rx_kernel: T + 5,
            rx_user: T + 9,
            ..Record::default()
        }]);
        let d = &join_rate(&s, &r).directions[0];
        assert_eq!(d.stamped, 1);
        assert_eq!(
            d.kernel_to_kernel.max(),
            1,
            "0 ns is recorded as the histogram's 1"
        );
    }

    #[test]
    fn a_server_record_without_a_receive_has_no_turnaround() {
        let client = log(&[Record {
            seq: 0,
            tx_user: T,
            ..Record::default()
        }]);
        let server = log(&[Record {
            seq: 0,
            tx_user: T + 50,
            ..Record::default()
        }]);
        let j = join_pingpong(&client, &server);
        assert!(j.turnaround.as_ref().unwrap().is_empty());
        // Merged into stamps that had none, a turnaround is kept.
        let mut rate = join_rate(&client, &server);
        let full = join_pingpong(
            &client,
            &log(&[Record {
                seq: 0,
                rx_user: T + 10,
                tx_user: T + 50,
                ..Record::default()
            }]),
        );
        rate.merge(&full);
        assert_eq!(rate.turnaround.map(|h| h.len()), Some(1));
    }

    #[test]
    fn a_device_with_hardware_stamps_is_named_with_its_clock() {
        use crate::sys::timestamps::DeviceStamps;
        let hw = |hardware, phc_index| {
            Some(DeviceStamps {
                hardware,
                phc_index,
            })
        };
        assert!(hardware_note("eth0", hw(true, Some(2))).contains("PTP clock /dev/ptp2"));
        assert!(hardware_note("eth0", hw(true, None)).contains("another domain"));
        assert_eq!(
            hardware_note("veth0", hw(false, None)),
            "veth0: no hardware timestamps; software stamps"
        );
        assert!(hardware_note("x", None).contains("could not be queried"));
    }
}

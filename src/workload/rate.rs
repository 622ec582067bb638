//! `rate`: message rate. The sender pushes numbered `size`-byte messages, as fast as it
//! can or paced at a target rate; the receiver counts them and checks the numbers.
//!
//! Each message carries its 64-bit sequence number, little-endian, in its first 8 bytes.
//! The receiver keeps a window of the last [`WINDOW`] numbers it has seen, so a number
//! below the highest seen is a duplicate if it is in the window already and reordered
//! otherwise. Loss is exact on any size: sent minus distinct received. Messages shorter
//! than 8 bytes cannot carry the number, so reorder and duplicate counts are unknown for
//! them (reported as null).

mod batch;

use std::io::{self, ErrorKind};
use std::time::{Duration, Instant};

use std::sync::Arc;

use super::Role;
use super::{
    buffer, end_of_data, one_way_tally, recv_message, send_all, wait_until, Meter, PeerSignal,
    Roles, SequenceCounts, Side, SideReport, Spec, Stop, TableKind, Tally, Wiring, Workload,
};
use crate::interrupt;
use crate::measure::live::Publisher;
use crate::scenario::Scenario;
use crate::transport::{Framing, TransportKind};
use crate::vocab::Diagnosis;

/// How many recent sequence numbers the receiver remembers.
pub const WINDOW: u64 = 1 << 16;
/// How long a receiver on an unreliable transport waits in silence before it checks
/// whether the sender is done.
const QUIET: Duration = Duration::from_millis(50);

/// The rate workload for one scenario.
#[derive(Clone, Debug)]
pub struct Rate {
    /// Message size in bytes.
    pub size: usize,
    /// When the sender stops.
    pub stop: Stop,
    /// Message or byte-stream transport.
    pub framing: Framing,
    /// Whether the transport delivers everything.
    pub reliable: bool,
    /// Target messages per second; `None`: as fast as possible.
    pub rate: Option<f64>,
    /// `--timestamps`: the stamped roles of `workload::stamped`.
    pub timestamps: bool,
    /// Messages per call (`--batch`); 1: one `send`/`recv` per message.
    pub batch: usize,
}

/// Sequence bookkeeping of the receiver: highest number seen and a bitmap window.
#[derive(Debug)]
pub struct SequenceTracker {
    next: u64,
    seen: Vec<u64>,
    counts: SequenceCounts,
    distinct: u64,
}

impl Default for SequenceTracker {
    fn default() -> Self {
        SequenceTracker {
            next: 0,
            seen: vec![0; (WINDOW / 64) as usize],
            counts: SequenceCounts::default(),
            distinct: 0,
        }
    }
}

impl SequenceTracker {
    fn bit(&mut self, seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    /// Account for one received number.
    pub fn observe(&mut self, seq: u64) {
        if seq >= self.next {
            // New highest: clear the window slots of any numbers skipped over (they leave
            // the window or are now missing), then mark this one.
            let skipped = (seq - self.next).min(WINDOW);
            for s in (seq - skipped)..seq {
                let (w, b) = self.bit(s);
                self.seen[w] &= !b;
            }
            let (w, b) = self.bit(seq);
            self.seen[w] |= b;
            self.next = seq + 1;
            self.distinct += 1;
        } else if self.next - seq > WINDOW {
            // Too old to tell: count it as reordered, not as a duplicate.
            self.counts.reordered += 1;
            self.distinct += 1;
        } else {
            let (w, b) = self.bit(seq);
            if self.seen[w] & b != 0 {
                self.counts.duplicated += 1;
            } else {
                self.seen[w] |= b;
                self.counts.reordered += 1;
                self.distinct += 1;
            }
        }
    }

    /// Reordered and duplicated so far.
    pub fn counts(&self) -> SequenceCounts {
        self.counts
    }

    /// Numbers below the highest seen that have not arrived (yet): the loss known so far,
    /// less what a late arrival may still fill.
    pub fn gaps(&self) -> u64 {
        self.next.saturating_sub(self.distinct)
    }
}

impl Workload for Rate {
    fn sender(&self, mut side: Side) -> io::Result<SideReport> {
        if self.timestamps {
            return self.sender_stamped(side);
        }
        if self.batch > 1 {
            return self.sender_batched(side);
        }
        let mut buf = buffer(self.size, 0xC3)?;
        let limit = self.stop.max_messages();
        let period_ns = self.rate.map(|r| 1e9 / r);
        let meter = Meter::start(&side.start);
        let t0 = meter.t0();
        let deadline = self.stop.deadline(t0);
        let carry = self.size.min(8);
        let mut live = Publisher::new(side.start.live(), Role::Sender, None);
        let (mut seq, mut interrupted) = (0u64, false);
        while seq < limit {
            if let Some(ns) = period_ns {
                if !wait_until(
                    t0 + Duration::from_nanos((seq as f64 * ns) as u64),
                    deadline,
                ) {
                    interrupted = interrupt::requested();
                    break;
                }
            }
            buf[..carry].copy_from_slice(&seq.to_le_bytes()[..carry]);
            send_all(side.conn.as_mut(), &buf, self.framing)?;
            seq += 1;
            if seq % 256 == 0 || period_ns.is_some() {
                live.publish(seq * self.size as u64, seq);
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
        let tcp = end_of_data(&mut side, self.reliable)?;
        Ok(SideReport {
            tcp,
            bytes: seq * self.size as u64,
            messages: seq,
            interrupted,
            ..measured
        })
    }

    fn receiver(&self, mut side: Side) -> io::Result<SideReport> {
        if self.timestamps {
            return self.receiver_stamped(side);
        }
        if self.batch > 1 {
            return self.receiver_batched(side);
        }
        let mut buf = buffer(self.size, 0)?;
        if !self.reliable {
            side.conn.set_recv_timeout(Some(QUIET))?;
        }
        let mut tracker = SequenceTracker::default();
        let numbered = self.size >= 8;
        let meter = Meter::start(&side.start);
        let t0 = meter.t0();
        let mut live = Publisher::new(side.start.live(), Role::Receiver, None);
        let (mut bytes, mut messages) = (0u64, 0u64);
        let ended;
        loop {
            match recv_message(side.conn.as_mut(), &mut buf, self.framing) {
                Ok(0) => {
                    ended = Instant::now();
                    break;
                }
                Ok(n) => {
                    bytes += n as u64;
                    messages += 1;
                    if numbered {
                        tracker.observe(u64::from_le_bytes(buf[..8].try_into().expect("8 bytes")));
                        if !self.reliable {
                            live.gaps(tracker.gaps());
                        }
                    }
                    live.publish(bytes, messages);
                }
                Err(e)
                    if !self.reliable
                        && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    if side.link.has(PeerSignal::SenderDone) {
                        // The end marker was lost: the last datagram came at most QUIET ago.
                        ended = Instant::now().checked_sub(QUIET).unwrap_or(t0);
                        break;
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let measured = meter.stop(Some(ended.max(t0)), side.conn.as_ref());
        side.link.signal(PeerSignal::ReceiverDone);
        Ok(SideReport {
            bytes,
            messages,
            sequence: numbered.then(|| tracker.counts()),
            ..measured
        })
    }
}

/// `rate` as the plan and the figures see it.
pub struct RateSpec;

impl Spec for RateSpec {
    fn takes(&self) -> super::Takes {
        super::Takes {
            both_ways: true,
            ..super::Takes::default()
        }
    }

    fn loss_by_sequence(&self, sc: &crate::scenario::Scenario) -> bool {
        sc.size >= 8 && !sc.transport.reliable()
    }

    fn exchange(&self) -> Option<crate::measure::timestamps::Exchange> {
        Some(crate::measure::timestamps::Exchange::OneWay)
    }

    fn counts_loss(&self) -> bool {
        true
    }

    fn headline(&self) -> crate::measure::headline::Headline {
        crate::measure::headline::Headline::rate("messages_per_second")
    }

    fn headline_of(&self, run: &crate::results::RunFigures) -> Option<f64> {
        Some(run.messages_per_second)
    }

    fn table(&self) -> TableKind {
        TableKind::Throughput
    }

    fn wiring(&self, _transport: TransportKind) -> Wiring {
        Wiring::Pair
    }

    fn refuses(&self, sc: &Scenario) -> Option<String> {
        if let Some(why) =
            super::stamped::refusal(sc, 16, "each carries its number and its send time")
        {
            return Some(why);
        }
        if let Some(why) = batch::refusal(sc) {
            return Some(why);
        }
        None
    }

    fn roles(&self, sc: &Scenario, stop: Stop) -> Arc<dyn Workload> {
        Arc::new(Rate {
            size: sc.size as usize,
            stop,
            framing: sc.transport.framing(),
            reliable: sc.transport.reliable(),
            rate: sc.extras.rate,
            timestamps: sc.extras.timestamps,
            batch: sc.extras.batch as usize,
        })
    }

    fn tally(&self, sc: &Scenario, roles: &Roles) -> Tally {
        one_way_tally(sc, roles)
    }

    fn diagnoses(&self) -> &'static [Diagnosis] {
        &[Diagnosis::CpuSaturated]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_numbers_are_neither_reordered_nor_duplicated() {
        let mut t = SequenceTracker::default();
        (0..200_000).for_each(|s| t.observe(s));
        assert_eq!(t.counts(), SequenceCounts::default());
        assert_eq!(t.distinct, 200_000);
    }

    #[test]
    fn late_numbers_are_reordered_and_repeats_are_duplicates() {
        let mut t = SequenceTracker::default();
        for s in [0, 1, 3, 4, 2, 2, 4, 10, 5] {
            t.observe(s);
        }
        let c = t.counts();
        assert_eq!(c.reordered, 2, "2 and 5 came late");
        assert_eq!(c.duplicated, 2, "the second 2 and the second 4");
        assert_eq!(t.distinct, 7);
    }

    #[test]
    fn a_gap_larger_than_the_window_forgets_old_numbers() {
        let mut t = SequenceTracker::default();
        t.observe(0);
        t.observe(3 * WINDOW);
        t.observe(WINDOW); // seen slot was cleared: not a duplicate of 0 or 3*WINDOW
        assert_eq!(t.counts().duplicated, 0);
        assert_eq!(t.counts().reordered, 1);
    }
}

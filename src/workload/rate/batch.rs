//! `rate --batch N` (N > 1): N messages per call. The sender numbers N messages in one
//! buffer and hands them to [`Conn::send_batch`] (one `sendmmsg` on a datagram socket);
//! the receiver takes up to N per [`Conn::recv_batch`] (one `recvmmsg`) and checks each
//! number exactly as the one-message loop does. Each role counts its calls into
//! [`SideReport::calls`], so the report gives messages per call.
//!
//! Pacing (`--rate`) works per batch: a batch leaves when its last message is due, so a
//! paced run sends at the asked rate in bursts of N. The sender checks the deadline and
//! Ctrl-C and publishes its totals after every batch (at least as often as the
//! one-message loop's every 256 messages, for N <= 256); the receiver publishes after
//! every message, as the one-message loop does.
//!
//! [`Conn::send_batch`]: crate::transport::Conn::send_batch
//! [`Conn::recv_batch`]: crate::transport::Conn::recv_batch

use std::io::{self, ErrorKind};
use std::time::{Duration, Instant};

use super::{Rate, SequenceTracker, QUIET};
use crate::engine::EngineKind;
use crate::interrupt;
use crate::measure::live::Publisher;
use crate::plan::Scenario;
use crate::transport::TransportKind;
use crate::workload::{buffer, end_of_data, wait_until, Meter, PeerSignal, Role, Side, SideReport};

/// An emptied vector of borrowed messages, to be filled again under another borrow: its
/// allocation is kept (an empty vector collected from its own iterator reuses it in
/// place), so the send loop does not allocate.
fn recycle<'a>(mut v: Vec<&[u8]>) -> Vec<&'a [u8]> {
    v.clear();
    v.into_iter()
        .map(|_| -> &'a [u8] { unreachable!() })
        .collect()
}

/// One buffer for `batch` messages of `size` bytes, each at a multiple of `size`.
fn batch_buffer(size: usize, batch: usize, fill: u8) -> io::Result<crate::sys::Buffer> {
    let total = size.checked_mul(batch).ok_or_else(|| {
        io::Error::new(
            ErrorKind::OutOfMemory,
            "--batch x --size does not fit in memory: use a smaller --batch or --size",
        )
    })?;
    buffer(total, fill)
}

/// Why `rate --batch N` (N > 1) cannot run `sc`, if it cannot: only datagram and
/// sequenced-packet sockets take several messages per call. On io-uring too: rate frames
/// its messages on a byte stream by their size, so several in flight would mix them up.
pub(super) fn refusal(sc: &Scenario) -> Option<String> {
    let t = sc.transport;
    if sc.extras.batch <= 1 || t.batches() {
        return None;
    }
    let why = match t {
        TransportKind::Mq => "a message queue takes one message per mq_send".to_string(),
        TransportKind::Shm => "shm has no system call to batch (its ring is shared memory)".into(),
        _ if sc.engine == EngineKind::IoUring => format!(
            "{t} is a byte stream, where rate's messages are told apart only by their size, so \
             several in flight on io-uring could not keep them apart (stream --batch can)"
        ),
        _ => format!("{t} is a byte stream, where a batch of messages would merge into one"),
    };
    Some(format!(
        "--batch {}: {why}; rate batches on udp, udp6, unix-dgram and unix-seqpacket",
        sc.extras.batch
    ))
}

impl Rate {
    /// The sender with `--batch` > 1.
    pub(super) fn sender_batched(&self, mut side: Side) -> io::Result<SideReport> {
        let (size, batch) = (self.size, self.batch);
        let mut store = batch_buffer(size, batch, 0xC3)?;
        let limit = self.stop.max_messages();
        let period_ns = self.rate.map(|r| 1e9 / r);
        let carry = size.min(8);
        let mut spare: Vec<&[u8]> = Vec::with_capacity(batch);
        let meter = Meter::start(&side.start);
        let t0 = meter.t0();
        let deadline = self.stop.deadline(t0);
        let mut live = Publisher::new(side.start.live(), Role::Sender, None);
        let (mut seq, mut calls, mut interrupted) = (0u64, 0u64, false);
        while seq < limit {
            // The last batch of a counted run may be short.
            let n = (limit - seq).min(batch as u64) as usize;
            if let Some(ns) = period_ns {
                let last = seq + n as u64 - 1;
                if !wait_until(
                    t0 + Duration::from_nanos((last as f64 * ns) as u64),
                    deadline,
                ) {
                    interrupted = interrupt::requested();
                    break;
                }
            }
            for (i, m) in store.chunks_exact_mut(size).take(n).enumerate() {
                m[..carry].copy_from_slice(&(seq + i as u64).to_le_bytes()[..carry]);
            }
            let mut msgs = recycle(spare);
            msgs.extend(store.chunks_exact(size).take(n));
            let mut off = 0;
            while off < n {
                match side.conn.send_batch(&msgs[off..]) {
                    Ok(0) => return Err(ErrorKind::WriteZero.into()),
                    Ok(k) => {
                        off += k;
                        calls += 1;
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            spare = recycle(msgs);
            seq += n as u64;
            live.publish(seq * size as u64, seq);
            if interrupt::requested() {
                interrupted = true;
                break;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
        }
        let measured = meter.stop(None, side.conn.as_ref());
        end_of_data(&mut side, self.reliable)?;
        Ok(SideReport {
            bytes: seq * size as u64,
            messages: seq,
            interrupted,
            calls: Some(calls),
            ..measured
        })
    }

    /// The receiver with `--batch` > 1.
    pub(super) fn receiver_batched(&self, mut side: Side) -> io::Result<SideReport> {
        let (size, batch) = (self.size, self.batch);
        let mut store = batch_buffer(size, batch, 0)?;
        let mut bufs: Vec<&mut [u8]> = store.chunks_exact_mut(size).collect();
        let mut lens = vec![0usize; batch];
        if !self.reliable {
            side.conn.set_recv_timeout(Some(QUIET))?;
        }
        let mut tracker = SequenceTracker::default();
        let numbered = size >= 8;
        let meter = Meter::start(&side.start);
        let t0 = meter.t0();
        let mut live = Publisher::new(side.start.live(), Role::Receiver, None);
        let (mut bytes, mut messages, mut calls) = (0u64, 0u64, 0u64);
        let ended;
        'calls: loop {
            match side.conn.recv_batch(&mut bufs, &mut lens) {
                Ok(got) => {
                    calls += 1;
                    for (buf, &n) in bufs.iter().zip(&lens[..got]) {
                        if n == 0 {
                            ended = Instant::now();
                            break 'calls;
                        }
                        bytes += n as u64;
                        messages += 1;
                        if numbered {
                            tracker
                                .observe(u64::from_le_bytes(buf[..8].try_into().expect("8 bytes")));
                            if !self.reliable {
                                live.gaps(tracker.gaps());
                            }
                        }
                        live.publish(bytes, messages);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
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
            calls: Some(calls),
            ..measured
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recycled_vector_keeps_its_allocation() {
        let data = [1u8, 2, 3];
        let mut v: Vec<&[u8]> = Vec::with_capacity(32);
        v.extend([&data[..1], &data[1..]]);
        let at = v.as_ptr() as usize;
        let w = recycle(v);
        assert!(w.is_empty());
        assert_eq!(w.capacity(), 32);
        assert_eq!(w.as_ptr() as usize, at, "no new allocation");
    }
}

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
use crate::scenario::Scenario;
use crate::transport::TransportKind;
use crate::vocab::Role;
use crate::workload::{buffer, end_of_data, wait_until, Meter, PeerSignal, Side, SideReport};

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
        let tcp = end_of_data(&mut side, self.reliable)?;
        Ok(SideReport {
            tcp,
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
                    // A call counts when it moved data (as stream counts them): one that
                    // brings only the end marker is no transfer.
                    let before = messages;
                    let mut end = None;
                    for (buf, &n) in bufs.iter().zip(&lens[..got]) {
                        if n == 0 {
                            end = Some(Instant::now());
                            break;
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
                    calls += u64::from(messages > before);
                    if let Some(at) = end {
                        ended = at;
                        break 'calls;
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
    use crate::scenario::Stop;
    use crate::scenario::WorkloadKind;
    use crate::transport::{Conn, Framing, SocketConn};
    use crate::workload::{peer_link, SequenceCounts, StartLine, Workload};
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    fn rate(batch: usize, count: u64, reliable: bool) -> Rate {
        Rate {
            size: 64,
            stop: Stop::Count(count),
            framing: Framing::Message,
            reliable,
            rate: None,
            batch,
            timestamps: false,
        }
    }

    /// A side of its own (no peer at the start line) over `conn`, and the peer's link.
    fn side(conn: Box<dyn Conn>) -> (Side, crate::workload::PeerLink) {
        let (mine, theirs) = peer_link();
        let side = Side {
            conn,
            endpoint: None,
            link: mine,
            start: StartLine::new(1).for_side(),
        };
        (side, theirs)
    }

    /// What a script saw: each message sent (sequence number, length) and each receive
    /// timeout set.
    #[derive(Default)]
    struct Log {
        sent: Vec<(u64, usize)>,
        timeouts: Vec<Option<Duration>>,
    }

    /// Takes at most `take` messages per batch (after failing with `send_errors`, one
    /// per call); receives play `script` (lengths per call, or an error).
    struct Script {
        take: usize,
        log: Arc<Mutex<Log>>,
        send_errors: VecDeque<io::Error>,
        script: VecDeque<io::Result<Vec<usize>>>,
    }

    impl Conn for Script {
        fn send(&mut self, _buf: &[u8]) -> io::Result<usize> {
            unreachable!("a batched sender sends in batches")
        }
        fn recv(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
            unreachable!("a batched receiver receives in batches")
        }
        fn send_batch(&mut self, msgs: &[&[u8]]) -> io::Result<usize> {
            if let Some(e) = self.send_errors.pop_front() {
                return Err(e);
            }
            let n = msgs.len().min(self.take);
            let mut log = self.log.lock().unwrap();
            for m in &msgs[..n] {
                log.sent
                    .push((u64::from_le_bytes(m[..8].try_into().unwrap()), m.len()));
            }
            Ok(n)
        }
        fn recv_batch(&mut self, bufs: &mut [&mut [u8]], lens: &mut [usize]) -> io::Result<usize> {
            let lengths = self.script.pop_front().unwrap_or(Ok(vec![0]))?;
            for (i, &l) in lengths.iter().enumerate() {
                bufs[i][..8].copy_from_slice(&(i as u64 * 2).to_le_bytes());
                lens[i] = l;
            }
            Ok(lengths.len())
        }
        fn finish(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn set_recv_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
            self.log.lock().unwrap().timeouts.push(t);
            Ok(())
        }
        fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
            None
        }
    }

    fn script(take: usize, recvs: Vec<io::Result<Vec<usize>>>) -> (Script, Arc<Mutex<Log>>) {
        let log = Arc::new(Mutex::new(Log::default()));
        let s = Script {
            take,
            log: Arc::clone(&log),
            send_errors: VecDeque::new(),
            script: recvs.into(),
        };
        (s, log)
    }

    #[test]
    fn a_batched_run_over_a_datagram_socket_moves_every_message_once() {
        let (a, b) =
            socket2::Socket::pair(socket2::Domain::UNIX, socket2::Type::DGRAM, None).unwrap();
        let w = Arc::new(rate(8, 1003, true));
        let live = crate::measure::live::Live::new();
        let line = StartLine::with_live(2, Some(Arc::clone(&live)));
        let (l1, l2) = peer_link();
        let tx = Side {
            conn: SocketConn::boxed(a, true),
            endpoint: None,
            link: l1,
            start: line.for_side(),
        };
        let rx = Side {
            conn: SocketConn::boxed(b, true),
            endpoint: None,
            link: l2,
            start: line.for_side(),
        };
        // Both sides on threads of their own, so that a run that never ends fails here
        // (a receiver that never hears the end) instead of hanging the test.
        let (done, ended) = std::sync::mpsc::channel();
        let w2 = Arc::clone(&w);
        let done2 = done.clone();
        std::thread::spawn(move || {
            let _ = done2.send((false, w2.receiver(rx).unwrap()));
        });
        std::thread::spawn(move || {
            let _ = done.send((true, w.sender(tx).unwrap()));
        });
        let mut s = None;
        let mut r = None;
        for _ in 0..2 {
            let (sender, report) = (ended.recv_timeout(std::time::Duration::from_secs(30)))
                .expect("the run did not end within 30 s");
            *if sender { &mut s } else { &mut r } = Some(report);
        }
        let (s, r) = (s.unwrap(), r.unwrap());
        assert_eq!((s.messages, s.bytes), (1003, 1003 * 64));
        assert_eq!(s.calls, Some(126), "125 batches of 8 and one of 3");
        assert_eq!((r.messages, r.bytes), (1003, 1003 * 64));
        // Every number once and in order: the numbers were consecutive.
        assert_eq!(r.sequence, Some(SequenceCounts::default()));
        let calls = r.calls.unwrap();
        assert!((126..=1004).contains(&calls), "{calls}");
        assert!(!s.interrupted);
        // --interval's running totals add up to the same (no gaps on a reliable socket).
        let t = live.totals();
        assert_eq!((t.messages_sent, t.bytes_sent), (1003, 1003 * 64));
        assert_eq!((t.messages_received, t.bytes_received), (1003, 1003 * 64));
        assert_eq!(t.lost, None);
    }

    #[test]
    fn a_batch_the_transport_takes_in_part_goes_out_in_several_calls_numbered_in_order() {
        let (conn, sent) = script(5, vec![]);
        let (tx, peer) = side(Box::new(conn));
        peer.signal(PeerSignal::ReceiverDone);
        let s = rate(8, 20, true).sender(tx).unwrap();
        let sent = &sent.lock().unwrap().sent;
        let seqs: Vec<u64> = sent.iter().map(|m| m.0).collect();
        assert_eq!(seqs, (0..20).collect::<Vec<u64>>());
        assert!(sent.iter().all(|m| m.1 == 64));
        // 8 = 5 + 3, 8 = 5 + 3, 4: five calls for 20 messages.
        assert_eq!(s.calls, Some(5));
        assert_eq!((s.messages, s.bytes), (20, 20 * 64));
    }

    #[test]
    fn a_paced_batch_leaves_when_its_last_message_is_due() {
        let (conn, sent) = script(usize::MAX, vec![]);
        let (tx, _peer) = side(Box::new(conn));
        // 10 per second: message 2, the last of the only batch, is due at 200 ms (not
        // at 100, 300 or 400).
        let paced = Rate {
            rate: Some(10.0),
            ..rate(3, 3, true)
        };
        let s = paced.sender(tx).unwrap();
        let elapsed = s.elapsed.unwrap();
        assert!(
            elapsed >= Duration::from_millis(200) && elapsed < Duration::from_millis(290),
            "{elapsed:?}"
        );
        assert_eq!(sent.lock().unwrap().sent.len(), 3);
        assert_eq!(s.calls, Some(1));
    }

    #[test]
    fn a_timed_run_sends_batches_until_its_deadline() {
        let (conn, sent) = script(usize::MAX, vec![]);
        let (tx, _peer) = side(Box::new(conn));
        let timed = Rate {
            stop: Stop::Duration(Duration::from_millis(30)),
            ..rate(4, 0, true)
        };
        let s = timed.sender(tx).unwrap();
        assert!(s.elapsed.unwrap() >= Duration::from_millis(30));
        assert!(s.messages > 4, "{}", s.messages);
        assert_eq!(s.messages % 4, 0, "whole batches");
        assert_eq!(sent.lock().unwrap().sent.len() as u64, s.messages);
        assert_eq!(s.calls, Some(s.messages / 4));
    }

    #[test]
    fn an_interrupted_send_is_repeated_and_a_failed_one_is_the_error() {
        let (mut conn, sent) = script(usize::MAX, vec![]);
        conn.send_errors
            .push_back(io::ErrorKind::Interrupted.into());
        let (tx, _peer) = side(Box::new(conn));
        let s = rate(4, 8, true).sender(tx).unwrap();
        assert_eq!((s.messages, s.calls), (8, Some(2)));
        assert_eq!(sent.lock().unwrap().sent.len(), 8);
        let (mut conn, _) = script(usize::MAX, vec![]);
        conn.send_errors
            .push_back(io::ErrorKind::ConnectionRefused.into());
        let (tx, _peer) = side(Box::new(conn));
        let e = rate(4, 8, true).sender(tx).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    }

    #[test]
    fn the_receiver_counts_each_message_of_a_call_and_stops_at_the_end_marker() {
        let (conn, _) = script(
            0,
            vec![
                Ok(vec![64, 64, 64]),
                Err(io::ErrorKind::Interrupted.into()),
                Ok(vec![64, 0, 64]),
            ],
        );
        let (rx, _peer) = side(Box::new(conn));
        let r = rate(4, 100, true).receiver(rx).unwrap();
        // 3 and 1: the message after the marker is not counted; the interrupted call is
        // no call.
        assert_eq!((r.messages, r.bytes), (4, 4 * 64));
        assert_eq!(r.calls, Some(2));
        // The numbers 0, 2, 4, then 0 again: one duplicate.
        assert_eq!(r.sequence.unwrap().duplicated, 1);
        // A call that brings only the end marker moved nothing: no call.
        let (conn, _) = script(0, vec![Ok(vec![64, 64]), Ok(vec![0])]);
        let (rx, _peer) = side(Box::new(conn));
        let r = rate(4, 100, true).receiver(rx).unwrap();
        assert_eq!((r.messages, r.calls), (2, Some(1)));
    }

    #[test]
    fn an_unreliable_receiver_ends_on_silence_once_the_sender_is_done() {
        let (conn, log) = script(
            0,
            vec![
                Ok(vec![64]),
                Err(io::ErrorKind::WouldBlock.into()),
                Err(io::ErrorKind::TimedOut.into()),
            ],
        );
        let (rx, peer) = side(Box::new(conn));
        peer.signal(PeerSignal::SenderDone);
        let r = rate(4, 100, false).receiver(rx).unwrap();
        assert_eq!((r.messages, r.calls), (1, Some(1)));
        assert!(peer.has(PeerSignal::ReceiverDone));
        // It waited in slices of QUIET, to look at the link between them.
        assert_eq!(log.lock().unwrap().timeouts, [Some(QUIET)]);
        // On a reliable transport the same silence is an error.
        let (conn, log) = script(0, vec![Err(io::ErrorKind::TimedOut.into())]);
        let (rx, _peer) = side(Box::new(conn));
        let e = rate(4, 100, true).receiver(rx).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(
            log.lock().unwrap().timeouts.is_empty(),
            "no timeout when reliable"
        );
    }

    #[test]
    fn only_datagram_sockets_batch_rate_and_each_refusal_says_why() {
        let base = Scenario::new(WorkloadKind::Rate, TransportKind::Udp, 64);
        let of = |transport, engine, batch| {
            let mut sc = Scenario {
                transport,
                engine,
                ..base.clone()
            };
            sc.extras.batch = batch;
            refusal(&sc)
        };
        use EngineKind::{Blocking, IoUring};
        use TransportKind as T;
        for t in [T::Udp, T::Udp6, T::UnixDgram, T::UnixSeqpacket] {
            assert_eq!(of(t, Blocking, 8), None, "{t}");
            assert_eq!(of(t, IoUring, 8), None, "{t}");
        }
        assert_eq!(
            of(T::Tcp, Blocking, 1),
            None,
            "one per call: nothing to refuse"
        );
        let tcp = of(T::Tcp, Blocking, 2).unwrap();
        assert!(
            tcp.starts_with("--batch 2: tcp is a byte stream, where a batch")
                && tcp.ends_with("rate batches on udp, udp6, unix-dgram and unix-seqpacket"),
            "{tcp}"
        );
        let uring = of(T::Unix, IoUring, 2).unwrap();
        assert!(
            uring.contains("on io-uring could not keep them apart"),
            "{uring}"
        );
        let mq = of(T::Mq, Blocking, 2).unwrap();
        assert!(mq.contains("one message per mq_send"), "{mq}");
        let shm = of(T::Shm, Blocking, 2).unwrap();
        assert!(shm.contains("shm has no system call"), "{shm}");
    }

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

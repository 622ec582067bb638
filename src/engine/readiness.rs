//! The shared adapter of the readiness engines (`nonblocking`, `poll`, `epoll`): the
//! descriptors are switched to non-blocking mode, and when a send or receive would block
//! (`EAGAIN`) the engine's [`Waiter`] waits for the descriptor: by spinning, with
//! `poll(2)`, or with `epoll_wait(2)`. Receive timeouts (used on unreliable transports)
//! are kept here, since `SO_RCVTIMEO` does not apply to non-blocking descriptors.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use crate::transport::Conn;

/// How an engine waits for a descriptor.
pub trait Waiter: Send {
    /// Wait until `fd` is readable (or writable), at most `timeout`; `Ok(false)` if the
    /// time ran out.
    ///
    /// # Errors
    /// If the waiting call itself fails.
    fn wait(&mut self, fd: RawFd, readable: bool, timeout: Option<Duration>) -> io::Result<bool>;
}

/// A `Conn` driven through non-blocking descriptors and a waiter.
pub struct Ready<W: Waiter> {
    inner: Box<dyn Conn>,
    waiter: W,
    recv_timeout: Option<Duration>,
}

/// Switch `conn`'s descriptors to non-blocking mode and drive them with `waiter`.
///
/// # Errors
/// If the transport has no descriptor or `fcntl` fails.
pub fn attach<W: Waiter + 'static>(conn: Box<dyn Conn>, waiter: W) -> io::Result<Box<dyn Conn>> {
    for fd in [conn.send_fd(), conn.recv_fd()].into_iter().flatten() {
        crate::sys::wait::set_nonblocking(fd)?;
    }
    Ok(Box::new(Ready {
        inner: conn,
        waiter,
        recv_timeout: None,
    }))
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

impl<W: Waiter> Ready<W> {
    fn wait(
        &mut self,
        fd: Option<RawFd>,
        readable: bool,
        timeout: Option<Duration>,
    ) -> io::Result<bool> {
        match fd {
            Some(fd) => self.waiter.wait(fd, readable, timeout),
            None => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "no descriptor to wait on",
            )),
        }
    }
}

impl<W: Waiter> Ready<W> {
    /// After `EAGAIN` on a receive: wait until the descriptor is readable, or fail with
    /// `TimedOut` once `deadline` has passed.
    fn wait_readable(&mut self, deadline: Option<Instant>) -> io::Result<()> {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left.is_some_and(|l| l.is_zero()) || !self.wait(self.inner.recv_fd(), true, left)? {
            return Err(io::ErrorKind::TimedOut.into());
        }
        Ok(())
    }
}

impl<W: Waiter> Conn for Ready<W> {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.inner.send(buf) {
                Err(e) if would_block(&e) => {
                    self.wait(self.inner.send_fd(), false, None)?;
                }
                r => return r,
            }
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let deadline = self.recv_timeout.map(|t| Instant::now() + t);
        loop {
            match self.inner.recv(buf) {
                Err(e) if would_block(&e) => self.wait_readable(deadline)?,
                r => return r,
            }
        }
    }

    /// The inner end's batch (one `sendmmsg` on a datagram socket); a full socket is
    /// waited for like a send's. A batch the socket took only part of returns that part.
    fn send_batch(&mut self, msgs: &[&[u8]]) -> io::Result<usize> {
        loop {
            match self.inner.send_batch(msgs) {
                Err(e) if would_block(&e) => {
                    self.wait(self.inner.send_fd(), false, None)?;
                }
                r => return r,
            }
        }
    }

    /// The inner end's batch (one `recvmmsg`), waiting for the first message like a
    /// receive (with its timeout).
    fn recv_batch(&mut self, bufs: &mut [&mut [u8]], lens: &mut [usize]) -> io::Result<usize> {
        let deadline = self.recv_timeout.map(|t| Instant::now() + t);
        loop {
            match self.inner.recv_batch(bufs, lens) {
                Err(e) if would_block(&e) => self.wait_readable(deadline)?,
                r => return r,
            }
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        loop {
            match self.inner.finish() {
                Err(e) if would_block(&e) => {
                    self.wait(self.inner.send_fd(), false, None)?;
                }
                r => return r,
            }
        }
    }

    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.recv_timeout = timeout;
        Ok(())
    }

    super::forward_descriptors!(inner);
}

/// Why a readiness engine cannot drive a transport.
pub fn refuses(transport: crate::transport::TransportKind) -> Option<String> {
    (transport == crate::transport::TransportKind::Shm).then(|| {
        "shm has no file descriptor to wait on (its sides spin by design): use --engine blocking".to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// Waits with poll(2), counting its waits per direction.
    struct Counted(Arc<[AtomicU64; 2]>);

    impl Waiter for Counted {
        fn wait(
            &mut self,
            fd: RawFd,
            readable: bool,
            timeout: Option<Duration>,
        ) -> io::Result<bool> {
            self.0[usize::from(readable)].fetch_add(1, Ordering::Relaxed);
            crate::sys::wait::poll_one(fd, readable, timeout)
        }
    }

    fn dgram_pair() -> (Box<dyn Conn>, Box<dyn Conn>) {
        let (a, b) =
            socket2::Socket::pair(socket2::Domain::UNIX, socket2::Type::DGRAM, None).unwrap();
        (
            crate::transport::SocketConn::boxed(a, true),
            crate::transport::SocketConn::boxed(b, true),
        )
    }

    /// Wait (at most 10 s) until `count` reaches `at_least`.
    fn until(count: &AtomicU64, at_least: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while count.load(Ordering::Relaxed) < at_least {
            assert!(Instant::now() < deadline, "never reached {at_least}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn batches_wait_on_a_full_or_empty_socket_and_lose_nothing() {
        // Both waits are forced, not left to the scheduler: the reader starts only once
        // the sender has met a full socket (its send buffer holds a few hundred of these
        // datagrams, far below 2000), and the sender sends its second half only once the
        // reader has met an empty one.
        let waits = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let (a, b) = dgram_pair();
        let mut tx = attach(a, Counted(Arc::clone(&waits))).unwrap();
        let mut rx = attach(b, Counted(Arc::clone(&waits))).unwrap();
        const N: usize = 2000;
        let (go, start) = std::sync::mpsc::channel::<()>();
        let reader = std::thread::spawn(move || {
            start.recv().unwrap();
            let mut store = vec![0u8; 64 * 100];
            let mut bufs: Vec<&mut [u8]> = store.chunks_mut(100).collect();
            let mut lens = [0usize; 64];
            let (mut got, mut calls) = (0, 0);
            while got < N {
                let n = rx.recv_batch(&mut bufs, &mut lens).unwrap();
                assert!(lens[..n].iter().all(|&l| l == 100));
                got += n;
                calls += 1;
            }
            // Nothing more comes: the receive timeout ends the wait.
            rx.set_recv_timeout(Some(Duration::from_millis(30)))
                .unwrap();
            let t = Instant::now();
            let e = rx.recv_batch(&mut bufs, &mut lens).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::TimedOut);
            assert!(t.elapsed() >= Duration::from_millis(25));
            (got, calls)
        });
        let sender_waits = Arc::clone(&waits);
        let sender = std::thread::spawn(move || {
            let msg = [7u8; 100];
            let msgs = vec![&msg[..]; 64];
            let mut sent = 0;
            let mut half_done = false;
            while sent < N {
                if !half_done && sent >= N / 2 {
                    // Hold the second half back until the reader has drained the socket
                    // and waited on it empty.
                    until(&sender_waits[1], 1);
                    half_done = true;
                }
                let n = tx.send_batch(&msgs[..(N - sent).min(64)]).unwrap();
                assert!(n >= 1);
                sent += n;
            }
            sent
        });
        until(&waits[0], 1);
        let sender_waited_before_the_reader_began = waits[0].load(Ordering::Relaxed);
        go.send(()).unwrap();
        assert_eq!(sender.join().unwrap(), N);
        let (got, calls) = reader.join().unwrap();
        assert_eq!(got, N, "a datagram was lost");
        assert!(calls < N, "several per call: {calls}");
        assert!(sender_waited_before_the_reader_began >= 1);
        // The reader waited on the empty socket mid-stream, and once more for the timeout.
        assert!(
            waits[1].load(Ordering::Relaxed) >= 2,
            "the receiver never waited on an empty socket"
        );
    }

    #[test]
    fn an_empty_socket_is_waited_on_and_its_data_read_whole() {
        let waits = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let (a, b) = dgram_pair();
        let mut tx = attach(a, Counted(Arc::clone(&waits))).unwrap();
        let mut rx = attach(b, Counted(Arc::clone(&waits))).unwrap();
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let reader = std::thread::spawn(move || {
            let mut one = [0u8; 64];
            let n = rx.recv(&mut one).unwrap();
            let mut store = [0u8; 64];
            let (x, y) = store.split_at_mut(32);
            let mut lens = [0usize; 2];
            let m = rx.recv_batch(&mut [x, y], &mut lens).unwrap();
            // Its end stays open until the sender is done (a closed end fails its sends).
            finished.recv().unwrap();
            (n, m, lens)
        });
        // The reader waits on the empty socket (it does not spin): forced, not slept for.
        until(&waits[1], 1);
        tx.send(&[1u8; 40]).unwrap();
        // It took that one and waits again, for the batch.
        until(&waits[1], 2);
        let batch = [&[2u8; 10][..], &[3u8; 20][..]];
        let mut sent = 0;
        while sent < batch.len() {
            // A batch the socket takes only part of returns that part: send the rest.
            sent += tx.send_batch(&batch[sent..]).unwrap();
        }
        done.send(()).unwrap();
        let (n, m, lens) = reader.join().unwrap();
        assert_eq!(n, 40);
        assert!(m >= 1 && lens[0] == 10, "{m} {lens:?}");
    }

    #[test]
    fn a_failure_is_returned_not_waited_on() {
        let waits = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        // A listening TCP socket: receiving from it fails (ENOTCONN) at once.
        let l = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        l.bind(
            &"127.0.0.1:0"
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .unwrap();
        l.listen(1).unwrap();
        let mut c = attach(
            crate::transport::SocketConn::boxed(l, false),
            Counted(Arc::clone(&waits)),
        )
        .unwrap();
        c.set_recv_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut b = [0u8; 8];
        let e = c.recv(&mut b).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(nix::libc::ENOTCONN), "{e}");
        let e = c.recv_batch(&mut [&mut b[..]], &mut [0]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(nix::libc::ENOTCONN), "{e}");
        // A datagram socket whose peer is gone: the send fails.
        let (a, b) = dgram_pair();
        let mut tx = attach(a, Counted(Arc::clone(&waits))).unwrap();
        drop(b);
        assert!(tx.send_batch(&[b"x"]).is_err());
        assert_eq!(waits[0].load(Ordering::Relaxed), 0);
        assert_eq!(waits[1].load(Ordering::Relaxed), 0);
    }
}

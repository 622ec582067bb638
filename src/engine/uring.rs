//! The `io-uring` engine (the classic `nonblocking-async` mode: true asynchronous I/O):
//! every send and receive is submitted to an io_uring and reaped from its completion
//! queue, with the transport's descriptors registered as fixed files and the workload's
//! buffers as registered buffers once they come back (`crate::sys::uring`).
//!
//! A single `recv` is one submission, waited for at once; a small `send` right after a
//! receive (a pingpong answer, or its next request) is queued and goes with the next
//! call's submission, so a round trip costs each side one `io_uring_enter`, where a
//! blocking side makes two system calls (the send's result is checked by that next
//! call). Other sends are one submission each, waited for. The bulk paths use what a
//! ring is for: a byte stream's sender ([`Conn::send_repeated`]) keeps up to `--batch`
//! writes in flight in one submission, linked so they go out in order; a byte stream's
//! receiver ([`Conn::recv_stream`]) arms one multishot receive into provided buffers and
//! takes every completion waiting at each wait; datagrams go `--batch` per submission
//! ([`Conn::send_batch`], [`Conn::recv_batch`]). With `--sqpoll` a kernel thread polls
//! the submission queue, and its CPU time is reported ([`Conn::uring`]).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::Engine;
use crate::sys::uring::{probe, Ring, RingOptions};
use crate::transport::{Conn, Repeated, TransportKind};
use crate::vocab::uring_use::UringUse;

/// How long the `--sqpoll` kernel thread keeps polling an idle queue before it sleeps
/// (`sq_thread_idle`): long enough to span the wait between two submissions of a busy
/// role, short enough that an idle role's thread soon stops spinning.
pub const SQPOLL_IDLE: Duration = Duration::from_millis(10);

/// The most bytes one provided buffer of the multishot receive holds (a message larger
/// than this arrives in several completions; the count is the same).
const MULTISHOT_BUF_MAX: usize = 1 << 20;
/// The most memory the multishot receive's provided buffers take, per end.
const MULTISHOT_POOL_MAX: usize = 64 << 20;
/// Provided buffers when `--batch` asks for fewer.
const MULTISHOT_BUFS_MIN: usize = 16;

/// Submit through io_uring.
#[derive(Clone, Copy, Debug)]
pub struct Uring {
    /// Operations one call may have in flight (`--batch`).
    pub in_flight: u32,
    /// A kernel thread polls the submission queue (`--sqpoll`).
    pub sqpoll: bool,
}

impl Default for Uring {
    fn default() -> Self {
        Uring {
            in_flight: 1,
            sqpoll: false,
        }
    }
}

struct UringConn {
    inner: Box<dyn Conn>,
    /// Made on first use, by the side's own thread: the ring is set up for a single
    /// submitter, which must be the thread that created it.
    ring: Option<Ring>,
    opts: RingOptions,
    recv_timeout: Option<Duration>,
    /// The multishot receive was found unavailable (reads instead).
    no_multishot: bool,
}

impl UringConn {
    fn ring(&mut self) -> io::Result<&mut Ring> {
        if self.ring.is_none() {
            self.ring = Some(Ring::new(
                self.inner.send_fd(),
                self.inner.recv_fd(),
                self.opts,
            )?);
        }
        Ok(self.ring.as_mut().expect("just made"))
    }
}

fn fd(f: Option<RawFd>) -> io::Result<RawFd> {
    f.ok_or_else(|| io::Error::new(io::ErrorKind::BrokenPipe, "the descriptor is closed"))
}

/// Provided buffers for a multishot receive of `size`-byte messages: their count and
/// size.
fn multishot_pool(size: usize, in_flight: u32) -> (u16, usize) {
    let each = size.clamp(1, MULTISHOT_BUF_MAX);
    let want = (in_flight as usize).max(MULTISHOT_BUFS_MIN);
    let count = want.min(MULTISHOT_POOL_MAX / each).max(2);
    (count.min(1 << 14) as u16, each)
}

impl Conn for UringConn {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        let f = fd(self.inner.send_fd())?;
        self.ring()?.write(f, buf)
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let f = fd(self.inner.recv_fd())?;
        let timeout = self.recv_timeout;
        self.ring()?.read(f, buf, timeout)
    }
    fn send_batch(&mut self, msgs: &[&[u8]]) -> io::Result<usize> {
        let f = fd(self.inner.send_fd())?;
        self.ring()?.send_batch(f, msgs)
    }
    fn recv_batch(&mut self, bufs: &mut [&mut [u8]], lens: &mut [usize]) -> io::Result<usize> {
        let f = fd(self.inner.recv_fd())?;
        let timeout = self.recv_timeout;
        self.ring()?.recv_batch(f, bufs, lens, timeout)
    }
    fn send_repeated(&mut self, buf: &[u8], n: usize) -> io::Result<Repeated> {
        let f = fd(self.inner.send_fd())?;
        let (bytes, calls) = self.ring()?.write_repeated(f, buf, n)?;
        Ok(Repeated { bytes, calls })
    }
    fn recv_stream(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.no_multishot || self.recv_timeout.is_some() {
            return self.recv(buf);
        }
        let f = fd(self.inner.recv_fd())?;
        let (count, size) = multishot_pool(buf.len(), self.opts.in_flight);
        let ring = self.ring()?;
        if ring.multishot_available(f).is_err() {
            self.no_multishot = true;
            return self.recv(buf);
        }
        match ring.recv_multishot(f, count, size) {
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                self.no_multishot = true;
                self.recv(buf)
            }
            other => other,
        }
    }
    fn uring(&self) -> Option<UringUse> {
        let ring = self.ring.as_ref()?;
        let used = ring.used();
        Some(UringUse {
            submissions: used.submissions,
            fixed_operations: used.fixed_ops,
            multishot_completions: used.multishot_completions,
            sqpoll: self.opts.sqpoll_idle.is_some(),
            sqpoll_cpu_ns: ring.sqpoll_cpu().map(|d| d.as_nanos() as u64),
            notes: used.notes.clone(),
        })
    }
    fn finish(&mut self) -> io::Result<()> {
        // A deferred send goes out before the end of the data.
        if let Some(ring) = self.ring.as_mut() {
            ring.flush()?;
        }
        self.inner.finish()
    }
    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.recv_timeout = timeout;
        Ok(())
    }
    super::forward_descriptors!(inner);
}

impl Engine for Uring {
    fn unavailable(&self) -> Option<String> {
        if std::env::var_os("SOCKBENCH_TEST_NO_IO_URING").is_some() {
            return Some("io_uring is unavailable (disabled for this test)".into());
        }
        probe().err().map(|e| {
            match crate::environment::read_sysctl("kernel/io_uring_disabled")
                .filter(|v| v.trim() != "0")
            {
                Some(v) => format!(
                    "io_uring is disabled on this system (kernel.io_uring_disabled = {}): {e}; allow it with \
                     `sysctl -w kernel.io_uring_disabled=0` (as root), or use another engine",
                    v.trim()
                ),
                None => format!(
                    "io_uring is unavailable here: {e} (a seccomp filter or container policy may block it); \
                     use another engine"
                ),
            }
        })
    }

    fn refuses(&self, transport: TransportKind) -> Option<String> {
        match transport {
            TransportKind::Shm => Some("shm has no file descriptor to submit I/O on: use --engine blocking".into()),
            TransportKind::Mq => Some(
                "message queue descriptors only take mq_send/mq_receive, which io_uring cannot submit".into(),
            ),
            _ => None,
        }
    }

    fn attach(&self, conn: Box<dyn Conn>) -> io::Result<Box<dyn Conn>> {
        Ok(Box::new(UringConn {
            inner: conn,
            ring: None,
            opts: RingOptions {
                in_flight: self.in_flight,
                sqpoll_idle: self.sqpoll.then_some(SQPOLL_IDLE),
            },
            recv_timeout: None,
            no_multishot: false,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_multishot_pool_is_bounded_in_buffers_and_memory() {
        assert_eq!(multishot_pool(65536, 1), (16, 65536));
        assert_eq!(multishot_pool(65536, 64), (64, 65536));
        // 1 GiB messages: 1 MiB buffers, 64 of them.
        assert_eq!(multishot_pool(1 << 30, 1), (16, 1 << 20));
        assert_eq!(multishot_pool(1 << 30, 1024), (64, 1 << 20));
        assert_eq!(multishot_pool(0, 1), (16, 1));
    }
}

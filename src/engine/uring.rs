//! The `io-uring` engine (the classic `nonblocking-async` mode: true asynchronous I/O):
//! every send and receive is submitted to an io_uring and reaped from its completion
//! queue, with the transport's descriptors registered as fixed files. One submission per
//! operation, waited for at once, so it measures the ring's per-operation cost against a
//! plain system call.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::Engine;
use crate::sys::uring::{probe, Ring};
use crate::transport::{Conn, TransportKind};

/// Submit through io_uring.
pub struct Uring;

struct UringConn {
    inner: Box<dyn Conn>,
    /// Made on first use, by the side's own thread: the ring is set up for a single
    /// submitter, which must be the thread that created it.
    ring: Option<Ring>,
    recv_timeout: Option<Duration>,
}

impl UringConn {
    fn ring(&mut self) -> io::Result<&mut Ring> {
        if self.ring.is_none() {
            self.ring = Some(Ring::new(self.inner.send_fd(), self.inner.recv_fd())?);
        }
        Ok(self.ring.as_mut().expect("just made"))
    }
}

fn fd(f: Option<RawFd>) -> io::Result<RawFd> {
    f.ok_or_else(|| io::Error::new(io::ErrorKind::BrokenPipe, "the descriptor is closed"))
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
    fn finish(&mut self) -> io::Result<()> {
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
            recv_timeout: None,
        }))
    }
}

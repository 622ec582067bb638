//! The `async` engine: each side owns a tokio runtime (current-thread by default, or a
//! multi-thread one with `--runtime multi`); descriptors are non-blocking and registered
//! with the runtime's reactor, and every operation that would block awaits readiness
//! through `block_on`. Against `blocking` this shows what a runtime's reactor, wakers and
//! scheduling cost per operation; with `multi`, the reactor runs on a worker thread, so
//! each wake-up crosses threads.

use std::io;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::runtime::{Builder, Runtime};

use super::{Engine, RuntimeKind};
use crate::sys::wait::{register, Lent};
use crate::transport::{Conn, TransportKind};

/// Await readiness on a tokio runtime.
pub struct Async(pub RuntimeKind);

struct AsyncConn {
    // Dropped before the runtime (field order), deregistering from its reactor.
    send_fd: Option<AsyncFd<Lent>>,
    recv_fd: Option<AsyncFd<Lent>>,
    inner: Box<dyn Conn>,
    rt: Runtime,
    recv_timeout: Option<Duration>,
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

fn no_fd() -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, "no descriptor to wait on")
}

impl AsyncConn {
    /// The reactor registration for the descriptor used for this direction.
    fn fd(&self, readable: bool) -> io::Result<&AsyncFd<Lent>> {
        let own = if readable {
            &self.recv_fd
        } else {
            &self.send_fd
        };
        own.as_ref().or(self.send_fd.as_ref()).ok_or_else(no_fd)
    }
}

impl AsyncConn {
    /// After `EAGAIN` on a receive: await readability, at most the receive timeout.
    fn readable(&self) -> io::Result<()> {
        let fd = self.fd(true)?;
        let timeout = self.recv_timeout;
        self.rt.block_on(async {
            let ready = async { fd.readable().await.map(|mut g| g.clear_ready()) };
            match timeout {
                Some(t) => tokio::time::timeout(t, ready)
                    .await
                    .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?,
                None => ready.await,
            }
        })
    }
}

impl Conn for AsyncConn {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.inner.send(buf) {
                Err(e) if would_block(&e) => {
                    let fd = self.fd(false)?;
                    self.rt
                        .block_on(async { fd.writable().await.map(|mut g| g.clear_ready()) })?;
                }
                r => return r,
            }
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.inner.recv(buf) {
                Err(e) if would_block(&e) => self.readable()?,
                r => return r,
            }
        }
    }

    /// The inner end's batch (one `sendmmsg` on a datagram socket), awaiting room on
    /// `EAGAIN` like a send.
    fn send_batch(&mut self, msgs: &[&[u8]]) -> io::Result<usize> {
        loop {
            match self.inner.send_batch(msgs) {
                Err(e) if would_block(&e) => {
                    let fd = self.fd(false)?;
                    self.rt
                        .block_on(async { fd.writable().await.map(|mut g| g.clear_ready()) })?;
                }
                r => return r,
            }
        }
    }

    /// The inner end's batch (one `recvmmsg`), awaiting the first message like a receive.
    fn recv_batch(&mut self, bufs: &mut [&mut [u8]], lens: &mut [usize]) -> io::Result<usize> {
        loop {
            match self.inner.recv_batch(bufs, lens) {
                Err(e) if would_block(&e) => self.readable()?,
                r => return r,
            }
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        // With separate descriptors (a pipe pair), finishing may close the sending one:
        // let go of its registration first, and register again only if we must wait.
        let separate = self.recv_fd.is_some();
        if separate {
            self.send_fd = None;
        }
        loop {
            match self.inner.finish() {
                Err(e) if would_block(&e) => {
                    if separate && self.send_fd.is_none() {
                        let fd = self.inner.send_fd().ok_or_else(no_fd)?;
                        let _guard = self.rt.enter();
                        self.send_fd = Some(register(fd, Interest::WRITABLE)?);
                    }
                    let fd = self.fd(false)?;
                    self.rt
                        .block_on(async { fd.writable().await.map(|mut g| g.clear_ready()) })?;
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

/// A multi-thread runtime with one worker. tokio panics when it cannot start a worker
/// thread; that becomes an error here (checked first, and caught if it happens anyway).
fn multi_thread_runtime() -> io::Result<Runtime> {
    let no_thread = |e: &dyn std::fmt::Display| {
        io::Error::other(format!(
            "cannot start the async runtime's worker thread ({e}): the system is out of threads or memory; \
             use --runtime current"
        ))
    };
    std::thread::Builder::new()
        .name("sb-probe".into())
        .spawn(|| {})
        .map_err(|e| no_thread(&e))?
        .join()
        .map_err(|_| no_thread(&"it failed to start"))?;
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let built = std::panic::catch_unwind(|| {
        Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
    });
    std::panic::set_hook(quiet);
    built.map_err(|_| no_thread(&"tokio could not spawn it"))?
}

impl Engine for Async {
    fn refuses(&self, transport: TransportKind) -> Option<String> {
        super::readiness::refuses(transport)
    }

    fn attach(&self, conn: Box<dyn Conn>) -> io::Result<Box<dyn Conn>> {
        let rt = match self.0 {
            RuntimeKind::Current => Builder::new_current_thread().enable_all().build()?,
            RuntimeKind::Multi => multi_thread_runtime()?,
        };
        let (s, r) = (conn.send_fd(), conn.recv_fd());
        for fd in [s, r].into_iter().flatten() {
            crate::sys::wait::set_nonblocking(fd)?;
        }
        let _guard = rt.enter();
        // A socket is one descriptor for both directions: register it once, for both.
        let (send_fd, recv_fd) = match (s, r) {
            (Some(a), Some(b)) if a == b => (
                Some(register(a, Interest::READABLE | Interest::WRITABLE)?),
                None,
            ),
            (a, b) => (
                a.map(|fd| register(fd, Interest::WRITABLE)).transpose()?,
                b.map(|fd| register(fd, Interest::READABLE)).transpose()?,
            ),
        };
        drop(_guard);
        Ok(Box::new(AsyncConn {
            send_fd,
            recv_fd,
            inner: conn,
            rt,
            recv_timeout: None,
        }))
    }
}

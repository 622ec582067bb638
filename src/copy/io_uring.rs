//! `io-uring`: each receive and send submitted through an io_uring, one at a time: a
//! receive into the buffer, then sends until the chunk is out (what a proxy built on a
//! completion ring does when it keeps one buffer per connection).
//!
//! Each operation costs one io_uring_enter (submit and wait in one call) while it
//! completes within a wait; a wait that times out (every [`TICK`], so that Ctrl-C is seen
//! although the ring ignores the sockets' timeouts) costs one more.
//!
//! [`TICK`]: crate::sys::uring_copy::TICK

use std::io;
use std::os::fd::AsFd;

use super::{is_timeout, retry_unless_interrupted, Copied, Copier, End, Options};
use crate::sys::uring_copy::CopyRing;

/// A ring and a `--buffer` of its own, reused for every connection.
#[derive(Debug)]
pub struct IoUring {
    ring: CopyRing,
}

impl IoUring {
    /// A copier with a ring and an `opts.buffer`-byte buffer.
    ///
    /// # Errors
    /// If the ring cannot be set up (see [`CopyRing::new`]) or the buffer allocated.
    pub fn new(opts: &Options) -> io::Result<IoUring> {
        Ok(IoUring {
            ring: CopyRing::new(opts.buffer.max(1))?,
        })
    }

    /// Send the buffer's first `n` bytes to `to`, counting each operation.
    fn send_all(&mut self, to: &End, n: usize, counts: &mut Copied) -> io::Result<()> {
        let mut off = 0;
        while off < n {
            counts.ops += 1;
            let r = self.ring.send(
                to.as_fd(),
                off..n,
                &mut counts.syscalls,
                retry_unless_interrupted,
            );
            match r {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(m) => {
                    off += m;
                    counts.bytes += m as u64;
                }
                Err(e) if is_eintr(&e) => {}
                Err(e) if is_timeout(&e) => retry_unless_interrupted()?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// An operation that ended with EINTR (to be submitted again), as opposed to the
/// `Interrupted` of Ctrl-C, which carries no OS error.
pub(super) fn is_eintr(e: &io::Error) -> bool {
    e.raw_os_error() == Some(nix::libc::EINTR)
}

impl Copier for IoUring {
    fn copy(&mut self, from: &End, to: &End, counts: &mut Copied) -> io::Result<()> {
        loop {
            counts.ops += 1;
            match self
                .ring
                .recv(from.as_fd(), &mut counts.syscalls, retry_unless_interrupted)
            {
                Ok(0) => break,
                Ok(n) => self.send_all(to, n, counts)?,
                Err(e) if is_eintr(&e) => {}
                Err(e) if is_timeout(&e) => retry_unless_interrupted()?,
                Err(e) => return Err(e),
            }
        }
        to.shutdown_write()
    }
}

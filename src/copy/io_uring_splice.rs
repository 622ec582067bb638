//! `io-uring-splice`: splice's socket -> pipe -> socket, each splice submitted through an
//! io_uring and waited for. The kernel runs a splice in one of its io-wq worker threads
//! (splice has no non-blocking path for io_uring to try first), so each one costs a
//! hand-off to that thread and back; the method shows what that costs against splice(2).
//!
//! As with splice, the pipe is reused and replaced after a copy that fails with bytes in
//! it; as with io-uring, each operation is one io_uring_enter while it completes within a
//! wait of [`TICK`].
//!
//! [`TICK`]: crate::sys::uring_copy::TICK

use std::io;
use std::os::fd::AsFd;

use super::io_uring::is_eintr;
use super::splice::{Pipe, ReusedPipe};
use super::{is_timeout, retry_unless_interrupted, Copied, Copier, End, Options};
use crate::sys::uring_copy::CopyRing;

/// As splice's (see there why not SPLICE_F_MORE).
const FLAGS: u32 = super::splice::FLAGS.bits();

/// A ring and a pipe, reused for every connection.
#[derive(Debug)]
pub struct IoUringSplice {
    ring: CopyRing,
    pipe: ReusedPipe,
}

impl IoUringSplice {
    /// A copier with a ring and a pipe of `opts.pipe_size` bytes (as granted).
    ///
    /// # Errors
    /// If the ring cannot be set up (see [`CopyRing::new`]) or the pipe made.
    pub fn new(opts: &Options) -> io::Result<IoUringSplice> {
        Ok(IoUringSplice {
            ring: CopyRing::new(0)?,
            pipe: ReusedPipe::new(opts.pipe_size)?,
        })
    }
}

/// The copy proper; `in_pipe` tracks the bytes spliced in and not yet out.
fn pump(
    ring: &mut CopyRing,
    pipe: &Pipe,
    from: &End,
    to: &End,
    counts: &mut Copied,
    in_pipe: &mut usize,
) -> io::Result<()> {
    loop {
        counts.ops += 1;
        let r = ring.splice(
            from.as_fd(),
            pipe.write.as_fd(),
            pipe.size,
            FLAGS,
            &mut counts.syscalls,
            retry_unless_interrupted,
        );
        match r {
            Ok(0) => return Ok(()),
            Ok(n) => *in_pipe = n,
            Err(e) if is_eintr(&e) => continue,
            Err(e) if is_timeout(&e) => {
                retry_unless_interrupted()?;
                continue;
            }
            Err(e) => return Err(e),
        }
        while *in_pipe > 0 {
            counts.ops += 1;
            let r = ring.splice(
                pipe.read.as_fd(),
                to.as_fd(),
                *in_pipe,
                FLAGS,
                &mut counts.syscalls,
                retry_unless_interrupted,
            );
            match r {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    *in_pipe -= n;
                    counts.bytes += n as u64;
                }
                Err(e) if is_eintr(&e) => {}
                Err(e) if is_timeout(&e) => retry_unless_interrupted()?,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Copier for IoUringSplice {
    fn copy(&mut self, from: &End, to: &End, counts: &mut Copied) -> io::Result<()> {
        let mut in_pipe = 0;
        let r = pump(
            &mut self.ring,
            self.pipe.empty()?,
            from,
            to,
            counts,
            &mut in_pipe,
        );
        if r.is_err() && in_pipe > 0 {
            // As splice: the next connection starts on an empty pipe.
            self.pipe.discard();
        }
        r?;
        to.shutdown_write()
    }

    fn pipe_size(&self) -> Option<usize> {
        Some(self.pipe.size())
    }
}

//! The io_uring of the `io-uring` and `io-uring-splice` relay methods
//! (`crate::copy::io_uring`, `crate::copy::io_uring_splice`): one ring per relay worker,
//! reused for every connection, onto which a copy pushes one receive, send or splice at
//! a time and waits for it.
//!
//! Safety rests on one rule: an operation's completion is reaped before the call that
//! submitted it returns. The receive buffer is the ring's own, so the kernel never writes
//! memory the caller could free or touch meanwhile; and no operation of one connection is
//! still running when the next begins. Should an operation never complete (even after
//! it is cancelled), the ring marks itself lost, refuses further work, and leaks its
//! buffer on drop rather than free it under the kernel.
//!
//! The ring does not see the sockets' SO_RCVTIMEO/SO_SNDTIMEO (a receive waits in the
//! kernel's poll, not in the socket), so every wait has a timeout of [`TICK`], after
//! which the caller's `tick` decides whether to wait on (the operation stays in flight)
//! or to stop (it is cancelled and reaped first). Waiting with a timeout needs
//! `IORING_FEAT_EXT_ARG` (Linux 5.11).

use std::io;
use std::mem::ManuallyDrop;
use std::ops::Range;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

use io_uring::{opcode, squeue, types, IoUring};
use nix::libc;

use super::Buffer;

/// The longest wait on the ring before the caller's `tick` is asked whether to go on.
pub const TICK: Duration = Duration::from_millis(100);

/// How many ticks a cancelled operation is waited for before the ring gives it up as lost.
const CANCEL_TICKS: u32 = 50;

/// `user_data` of the one data operation in flight.
const OP: u64 = 1;
/// `user_data` of its cancellation (its completion is of no interest).
const CANCEL: u64 = 2;

/// A ring with, optionally, a receive buffer of its own.
pub struct CopyRing {
    ring: IoUring,
    /// Freed on drop only if `lost` is false.
    buf: ManuallyDrop<Buffer>,
    /// An operation never completed: the kernel may still use `buf`.
    lost: bool,
}

impl std::fmt::Debug for CopyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CopyRing({} byte buffer)", self.buf.len())
    }
}

impl CopyRing {
    /// A ring with a `buffer`-byte receive buffer (0 for a ring that only splices).
    ///
    /// # Errors
    /// If the ring cannot be set up, the kernel cannot wait on it with a timeout (before
    /// Linux 5.11), or the buffer cannot be allocated.
    pub fn new(buffer: usize) -> io::Result<CopyRing> {
        // Completions run when this thread waits for them rather than by interrupting
        // it (COOP_TASKRUN, Linux 5.19); older kernels lack the flag. Not SINGLE_ISSUER
        // or DEFER_TASKRUN: those tie the ring to the thread that made it, and a copier
        // may be made on one thread and used on another.
        let ring = IoUring::builder()
            .setup_coop_taskrun()
            .build(4)
            .or_else(|_| IoUring::new(4))?;
        if !ring.params().is_feature_ext_arg() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel's io_uring cannot wait with a timeout (IORING_FEAT_EXT_ARG, \
                 Linux 5.11): use another relay method",
            ));
        }
        let buf = crate::sys::buffer(buffer, 0)?;
        Ok(CopyRing {
            ring,
            buf: ManuallyDrop::new(buf),
            lost: false,
        })
    }

    /// Receive into the whole buffer from `fd` (recv(2) through the ring).
    ///
    /// `enters` counts each io_uring_enter; `tick` is called whenever a wait ends
    /// without the completion ([`TICK`] passed, or a signal came) and stops the
    /// receive with its error.
    ///
    /// # Errors
    /// As recv(2); `tick`'s error; an error from io_uring_enter.
    pub fn recv(
        &mut self,
        fd: BorrowedFd<'_>,
        enters: &mut u64,
        tick: fn() -> io::Result<()>,
    ) -> io::Result<usize> {
        let len = u32::try_from(self.buf.len()).unwrap_or(u32::MAX);
        let e = opcode::Recv::new(types::Fd(fd.as_raw_fd()), self.buf.as_mut_ptr(), len).build();
        // SAFETY: the buffer is the ring's own and `run` reaps the receive before it
        // returns (or marks the ring lost, which leaks the buffer).
        unsafe { self.run(e, enters, tick) }
    }

    /// Send `range` of the buffer (what [`CopyRing::recv`] put there) to `fd`: send(2)
    /// with MSG_NOSIGNAL through the ring, as std's sockets send. As [`CopyRing::recv`]
    /// for `enters` and `tick`.
    ///
    /// # Errors
    /// As send(2); `tick`'s error; an error from io_uring_enter.
    ///
    /// # Panics
    /// If `range` is not within the buffer.
    pub fn send(
        &mut self,
        fd: BorrowedFd<'_>,
        range: Range<usize>,
        enters: &mut u64,
        tick: fn() -> io::Result<()>,
    ) -> io::Result<usize> {
        let bytes = &self.buf[range];
        let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        let e = opcode::Send::new(types::Fd(fd.as_raw_fd()), bytes.as_ptr(), len)
            .flags(libc::MSG_NOSIGNAL)
            .build();
        // SAFETY: as in `recv`; the kernel only reads the bytes, which nothing writes
        // until `run` returns.
        unsafe { self.run(e, enters, tick) }
    }

    /// splice(2) up to `len` bytes from `from` to `to` (one of them a pipe) with
    /// `flags`, through the ring. As [`CopyRing::recv`] for `enters` and `tick`.
    ///
    /// # Errors
    /// As splice(2); `tick`'s error; an error from io_uring_enter.
    pub fn splice(
        &mut self,
        from: BorrowedFd<'_>,
        to: BorrowedFd<'_>,
        len: usize,
        flags: u32,
        enters: &mut u64,
        tick: fn() -> io::Result<()>,
    ) -> io::Result<usize> {
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        // Offsets of -1: neither end is a file with a position (pipes and sockets
        // must be given -1).
        let e = opcode::Splice::new(
            types::Fd(from.as_raw_fd()),
            -1,
            types::Fd(to.as_raw_fd()),
            -1,
            len,
        )
        .flags(flags)
        .build();
        // SAFETY: a splice touches no memory of ours.
        unsafe { self.run(e, enters, tick) }
    }

    /// Submit `entry` and wait for its completion.
    ///
    /// # Safety
    /// Any memory `entry` points to must stay valid (and, if the kernel writes it,
    /// unused) until this returns, or for ever if the ring becomes lost.
    unsafe fn run(
        &mut self,
        entry: squeue::Entry,
        enters: &mut u64,
        tick: fn() -> io::Result<()>,
    ) -> io::Result<usize> {
        if self.lost {
            return Err(io::Error::other(
                "an earlier io_uring operation of this relay worker never completed",
            ));
        }
        // SAFETY: per this function's contract.
        unsafe { self.push(&entry.user_data(OP))? };
        loop {
            let waited = self.wait(enters);
            if let Some(res) = self.reap() {
                return result(res);
            }
            if let Err(e) = waited.and_then(|()| tick()) {
                return self.cancel(e, enters);
            }
        }
    }

    /// Push one entry onto the submission queue (it has room: at most an operation and
    /// its cancellation are ever queued at once, and a ring of 4 holds 4).
    ///
    /// # Safety
    /// As for [`io_uring::SubmissionQueue::push`].
    unsafe fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        // SAFETY: per this function's contract.
        unsafe { self.ring.submission().push(entry) }
            .map_err(|_| io::Error::other("the io_uring submission queue is full"))
    }

    /// Submit what is queued and wait up to [`TICK`] for a completion. A wait that ends
    /// empty (timed out, a signal) is no error.
    fn wait(&mut self, enters: &mut u64) -> io::Result<()> {
        let ts = types::Timespec::from(TICK);
        let args = types::SubmitArgs::new().timespec(&ts);
        *enters += 1;
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Take the completions that arrived; the operation's result if it is among them.
    fn reap(&mut self) -> Option<i32> {
        let mut res = None;
        for cqe in self.ring.completion() {
            if cqe.user_data() == OP {
                res = Some(cqe.result());
            }
        }
        res
    }

    /// Cancel the operation in flight and wait for it to end, then return `why` (or the
    /// operation's own result, if it completed before the cancellation reached it: the
    /// caller then goes on and meets the reason to stop again at its next wait).
    fn cancel(&mut self, why: io::Error, enters: &mut u64) -> io::Result<usize> {
        let c = opcode::AsyncCancel::new(OP).build().user_data(CANCEL);
        // SAFETY: a cancellation touches no memory of ours. Should it not go in, the
        // operation may still end by itself (a socket's timeout ends a splice).
        let _ = unsafe { self.push(&c) };
        for _ in 0..CANCEL_TICKS {
            // The wait's own errors change nothing: the operation is waited for all the
            // same (and given up below if it never ends).
            let _ = self.wait(enters);
            match self.reap() {
                Some(res) if res == -libc::ECANCELED || res == -libc::EINTR => return Err(why),
                Some(res) => return result(res),
                None => {}
            }
        }
        self.lost = true;
        Err(why)
    }
}

/// A completion's result as `read(2)` returns it.
fn result(res: i32) -> io::Result<usize> {
    usize::try_from(res).map_err(|_| io::Error::from_raw_os_error(-res))
}

impl Drop for CopyRing {
    fn drop(&mut self) {
        if !self.lost {
            // SAFETY: nothing is in flight (every operation was reaped), so the kernel
            // holds no pointer into the buffer; it is dropped once, here.
            unsafe { ManuallyDrop::drop(&mut self.buf) }
        }
        // Lost: the buffer is leaked. Closing the ring cancels what is left.
    }
}

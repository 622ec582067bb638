//! `splice`: splice(2) from the source socket into a pipe, then from the pipe into the
//! destination socket: the kernel moves page references, the bytes never enter
//! userspace (HAProxy's and nginx's zero-copy forwarding).
//!
//! The pipe is the copier's, made once and reused for every connection; a copy that
//! fails with bytes in it gets a new one, so no connection's bytes reach the next.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{fcntl, splice, FcntlArg, OFlag, SpliceFFlags};

use super::{is_timeout, retry_unless_interrupted, Copied, Copier, End, Options};

/// Both splices: move the pages rather than copy them where the kernel can. Not
/// SPLICE_F_MORE: on the splice into a TCP socket it is MSG_MORE, which corks the last
/// partial segment until more comes or 200 ms pass (measured: 208 ms for each 64-byte
/// message relayed one at a time), and the copy cannot know whether more comes. The
/// kernel sets MSG_MORE itself while the pipe still holds bytes of the same splice.
pub(super) const FLAGS: SpliceFFlags = SpliceFFlags::SPLICE_F_MOVE;

/// A pipe of (about) the size asked for.
#[derive(Debug)]
pub(super) struct Pipe {
    /// The read end: the bytes leave through it.
    pub(super) read: OwnedFd,
    /// The write end: the bytes come in through it.
    pub(super) write: OwnedFd,
    /// Its capacity in bytes, as the kernel granted it.
    pub(super) size: usize,
}

impl Pipe {
    /// A close-on-exec pipe, grown (or shrunk) to `requested` bytes if the kernel lets
    /// it: it rounds up to a power of two pages, and refuses more than
    /// /proc/sys/fs/pipe-max-size to all but root (EPERM), in which case the pipe keeps
    /// the size it has.
    ///
    /// # Errors
    /// If no pipe can be made (out of descriptors) or its size cannot be read.
    pub(super) fn new(requested: usize) -> io::Result<Pipe> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let ask = i32::try_from(requested).unwrap_or(i32::MAX);
        // Refused: keep the default, and report what it is.
        let _ = fcntl(write.as_raw_fd(), FcntlArg::F_SETPIPE_SZ(ask));
        let size = fcntl(write.as_raw_fd(), FcntlArg::F_GETPIPE_SZ)? as usize;
        Ok(Pipe { read, write, size })
    }
}

/// The copier's pipe: reused connection after connection, replaced after a copy that
/// failed with bytes in it.
#[derive(Debug)]
pub(super) struct ReusedPipe {
    pipe: Pipe,
    requested: usize,
    /// It holds a failed copy's bytes: replace it before the next copy.
    dirty: bool,
}

impl ReusedPipe {
    /// A pipe of `requested` bytes (as granted).
    ///
    /// # Errors
    /// As [`Pipe::new`].
    pub(super) fn new(requested: usize) -> io::Result<ReusedPipe> {
        Ok(ReusedPipe {
            pipe: Pipe::new(requested)?,
            requested,
            dirty: false,
        })
    }

    /// The pipe, empty, for the next copy.
    ///
    /// # Errors
    /// As [`Pipe::new`], if it must be replaced and cannot be.
    pub(super) fn empty(&mut self) -> io::Result<&Pipe> {
        if self.dirty {
            self.pipe = Pipe::new(self.requested)?;
            self.dirty = false;
        }
        Ok(&self.pipe)
    }

    /// A copy failed with bytes in the pipe: they are that connection's, so the pipe goes
    /// (now, or before the next copy if no new one can be made now).
    pub(super) fn discard(&mut self) {
        match Pipe::new(self.requested) {
            Ok(p) => self.pipe = p,
            Err(_) => self.dirty = true,
        }
    }

    /// The pipe's capacity as granted.
    pub(super) fn size(&self) -> usize {
        self.pipe.size
    }
}

/// splice(2) through a pipe of the copier's.
#[derive(Debug)]
pub struct Splice {
    pipe: ReusedPipe,
}

/// The copy proper; `in_pipe` tracks the bytes spliced in and not yet out.
fn pump(
    pipe: &Pipe,
    from: &End,
    to: &End,
    counts: &mut Copied,
    in_pipe: &mut usize,
) -> io::Result<()> {
    loop {
        counts.syscalls += 1;
        counts.ops += 1;
        match splice(from, None, &pipe.write, None, pipe.size, FLAGS) {
            Ok(0) => return Ok(()),
            Ok(n) => *in_pipe = n,
            Err(Errno::EINTR) => continue,
            Err(e) => {
                let e = io::Error::from(e);
                if is_timeout(&e) {
                    retry_unless_interrupted()?;
                    continue;
                }
                return Err(e);
            }
        }
        while *in_pipe > 0 {
            counts.syscalls += 1;
            counts.ops += 1;
            match splice(&pipe.read, None, to, None, *in_pipe, FLAGS) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    *in_pipe -= n;
                    counts.bytes += n as u64;
                }
                Err(Errno::EINTR) => {}
                Err(e) => {
                    let e = io::Error::from(e);
                    if !is_timeout(&e) {
                        return Err(e);
                    }
                    retry_unless_interrupted()?;
                }
            }
        }
    }
}

impl Splice {
    /// A copier with a pipe of `opts.pipe_size` bytes (as granted).
    ///
    /// # Errors
    /// If the pipe cannot be made.
    pub fn new(opts: &Options) -> io::Result<Splice> {
        Ok(Splice {
            pipe: ReusedPipe::new(opts.pipe_size)?,
        })
    }
}

impl Copier for Splice {
    fn copy(&mut self, from: &End, to: &End, counts: &mut Copied) -> io::Result<()> {
        let mut in_pipe = 0;
        let r = pump(self.pipe.empty()?, from, to, counts, &mut in_pipe);
        if r.is_err() && in_pipe > 0 {
            self.pipe.discard();
        }
        r?;
        to.shutdown_write()
    }

    fn pipe_size(&self) -> Option<usize> {
        Some(self.pipe.size())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{copier, testkit, Method};
    use super::*;

    #[test]
    fn both_splice_methods_report_a_pipe_at_least_the_size_asked_for() {
        for method in [Method::Splice, Method::IoUringSplice] {
            if method.unavailable().is_some() {
                continue;
            }
            // 64 KiB is the default; 256 KiB is within the unprivileged limit
            // (/proc/sys/fs/pipe-max-size, 1 MiB by default).
            for ask in [64 << 10, 256 << 10] {
                let opts = Options {
                    pipe_size: ask,
                    ..Options::default()
                };
                let c = copier(method, &opts).unwrap();
                let got = c.pipe_size().expect("a splice method reports its pipe");
                assert!(got >= ask, "{method}: asked {ask}, got {got}");
            }
        }
        for method in testkit::available() {
            if method.copies_through_userspace() {
                let c = copier(method, &Options::default()).unwrap();
                assert_eq!(c.pipe_size(), None, "{method}");
            }
        }
    }

    #[test]
    fn a_pipe_size_the_kernel_refuses_is_no_error_and_the_pipe_says_what_it_kept() {
        // 2 GiB: beyond the unprivileged limit (EPERM) and, for root, beyond what the
        // kernel allocates for a pipe's ring (ENOMEM).
        let p = Pipe::new(usize::MAX).unwrap();
        let size = fcntl(p.write.as_raw_fd(), FcntlArg::F_GETPIPE_SZ).unwrap() as usize;
        assert_eq!(p.size, size);
        assert!(size >= 4096);
    }
}

//! A minimal synchronous front end to io_uring for the io-uring engine: each read or
//! write is one submission, waited for before returning, so the buffer it points at
//! outlives the operation. The transport's descriptors are registered as fixed files.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use io_uring::{opcode, squeue, types, IoUring};

/// One ring with up to two registered descriptors (send and receive).
pub struct Ring {
    ring: IoUring,
    fds: Vec<RawFd>,
}

/// Whether io_uring can be used here; the error says why not.
///
/// # Errors
/// The reason io_uring is unavailable (not built in, disabled by sysctl, seccomp).
pub fn probe() -> io::Result<()> {
    IoUring::new(2).map(drop)
}

impl Ring {
    /// A ring for a transport whose sends go to `send_fd` and receives come from `recv_fd`.
    ///
    /// # Errors
    /// If the ring cannot be set up.
    pub fn new(send_fd: Option<RawFd>, recv_fd: Option<RawFd>) -> io::Result<Ring> {
        // One thread submits and reaps, so completions can be run when it waits
        // (DEFER_TASKRUN) instead of interrupting it; older kernels lack the flags.
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(8)
            .or_else(|_| IoUring::new(8))?;
        let mut fds: Vec<RawFd> = [send_fd, recv_fd].into_iter().flatten().collect();
        fds.dedup();
        if !fds.is_empty() {
            ring.submitter().register_files(&fds)?;
        }
        Ok(Ring { ring, fds })
    }

    fn fixed(&self, fd: RawFd) -> io::Result<types::Fixed> {
        self.fds
            .iter()
            .position(|&f| f == fd)
            .map(|i| types::Fixed(i as u32))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "descriptor not registered"))
    }

    /// Submit one entry (and optionally a linked timeout) and return the first result.
    fn run(&mut self, entry: squeue::Entry, timeout: Option<Duration>) -> io::Result<usize> {
        let ts = timeout.map(|t| {
            types::Timespec::new()
                .sec(t.as_secs())
                .nsec(t.subsec_nanos())
        });
        let want = 1 + usize::from(ts.is_some());
        {
            let mut sq = self.ring.submission();
            let entry = if ts.is_some() {
                entry.flags(squeue::Flags::IO_LINK)
            } else {
                entry
            };
            // SAFETY: the entry's buffer and the timespec live on the caller's stack until
            // this function has reaped every completion below.
            unsafe {
                sq.push(&entry.user_data(1))
                    .map_err(|_| io::Error::other("submission queue full"))?;
                if let Some(ts) = &ts {
                    let t = opcode::LinkTimeout::new(ts).build().user_data(2);
                    sq.push(&t)
                        .map_err(|_| io::Error::other("submission queue full"))?;
                }
            }
        }
        let mut result = None;
        let mut seen = 0;
        while seen < want {
            match self.ring.submit_and_wait(want - seen) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for cqe in self.ring.completion() {
                seen += 1;
                if cqe.user_data() == 1 {
                    result = Some(cqe.result());
                }
            }
        }
        match result {
            Some(n) if n >= 0 => Ok(n as usize),
            Some(n) if -n == nix::libc::ECANCELED => Err(io::ErrorKind::TimedOut.into()),
            Some(n) => Err(io::Error::from_raw_os_error(-n)),
            None => Err(io::Error::other("io_uring completion missing")),
        }
    }

    /// `write(2)` through the ring.
    ///
    /// # Errors
    /// As `write(2)`.
    pub fn write(&mut self, fd: RawFd, buf: &[u8]) -> io::Result<usize> {
        let len = buf.len().min(u32::MAX as usize) as u32;
        let e = opcode::Write::new(self.fixed(fd)?, buf.as_ptr(), len)
            .offset(u64::MAX)
            .build();
        self.run(e, None)
    }

    /// `read(2)` through the ring, giving up after `timeout` (as `TimedOut`).
    ///
    /// # Errors
    /// As `read(2)`.
    pub fn read(
        &mut self,
        fd: RawFd,
        buf: &mut [u8],
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        let len = buf.len().min(u32::MAX as usize) as u32;
        let e = opcode::Read::new(self.fixed(fd)?, buf.as_mut_ptr(), len)
            .offset(u64::MAX)
            .build();
        self.run(e, timeout)
    }
}

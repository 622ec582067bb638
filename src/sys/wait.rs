//! Waiting for a descriptor to become readable or writable, for the readiness engines.
//! Descriptors arrive here as bare `RawFd`s (transports own them); the borrows below last
//! only for the call.

use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};

fn borrow<'a>(fd: RawFd) -> BorrowedFd<'a> {
    // SAFETY: every caller passes a descriptor owned by a live `Conn` that outlives the
    // call (or the `EpollSet` built from it, which the same engine adapter owns).
    unsafe { BorrowedFd::borrow_raw(fd) }
}

fn millis(timeout: Option<Duration>) -> i32 {
    timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32)
}

/// Wait with `poll(2)` until `fd` is readable (or writable); `Ok(false)` on timeout.
///
/// # Errors
/// As `poll(2)`, except EINTR, which counts as a spurious wake-up.
pub fn poll_one(fd: RawFd, readable: bool, timeout: Option<Duration>) -> io::Result<bool> {
    let flags = if readable {
        PollFlags::POLLIN
    } else {
        PollFlags::POLLOUT
    };
    let mut fds = [PollFd::new(borrow(fd), flags)];
    let t = PollTimeout::try_from(millis(timeout)).unwrap_or(PollTimeout::NONE);
    match poll(&mut fds, t) {
        Ok(n) => Ok(n > 0),
        Err(nix::errno::Errno::EINTR) => Ok(true),
        Err(e) => Err(e.into()),
    }
}

/// An epoll instance watching one descriptor for one direction (level-triggered).
pub struct EpollSet {
    epoll: Epoll,
}

impl EpollSet {
    /// Watch `fd` for readability (or writability).
    ///
    /// # Errors
    /// As `epoll_create1(2)` and `epoll_ctl(2)`.
    pub fn new(fd: RawFd, readable: bool) -> io::Result<EpollSet> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        let flags = if readable {
            EpollFlags::EPOLLIN
        } else {
            EpollFlags::EPOLLOUT
        };
        epoll.add(borrow(fd), EpollEvent::new(flags, fd as u64))?;
        Ok(EpollSet { epoll })
    }

    /// Wait until the descriptor is ready; `Ok(false)` on timeout.
    ///
    /// # Errors
    /// As `epoll_wait(2)`, except EINTR.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let mut events = [EpollEvent::empty()];
        let t = EpollTimeout::try_from(millis(timeout)).unwrap_or(EpollTimeout::NONE);
        match self.epoll.wait(&mut events, t) {
            Ok(n) => Ok(n > 0),
            Err(nix::errno::Errno::EINTR) => Ok(true),
            Err(e) => Err(e.into()),
        }
    }
}

/// Put a descriptor in non-blocking mode.
///
/// # Errors
/// As `fcntl(2)`.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// A descriptor a transport owns, lent to a tokio reactor.
#[cfg(feature = "async")]
pub struct Lent(RawFd);

#[cfg(feature = "async")]
impl std::os::fd::AsRawFd for Lent {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Register a descriptor with the current tokio runtime's reactor.
///
/// The caller must drop the returned `AsyncFd` before the descriptor is closed (the async
/// engine keeps registrations in fields dropped before the transport, and drops the
/// sending one before a `finish` that may close it).
///
/// # Errors
/// If the reactor refuses the descriptor.
#[cfg(feature = "async")]
pub fn register(
    fd: RawFd,
    interest: tokio::io::Interest,
) -> io::Result<tokio::io::unix::AsyncFd<Lent>> {
    // SAFETY: `fd` is open, and per the contract above stays open and refers to the same
    // description until the returned AsyncFd is dropped.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(Lent(fd), interest) }
        .map_err(|e| io::Error::other(e.to_string()))
}

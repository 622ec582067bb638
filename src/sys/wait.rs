//! Waiting for a descriptor to become readable or writable, for the readiness engines.
//! Descriptors arrive here as bare `RawFd`s (transports own them); the borrows below last
//! only for the call.

use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};

fn borrow<'a>(fd: RawFd) -> BorrowedFd<'a> {
    // SAFETY: every caller passes a descriptor owned by a live `Conn` or control stream
    // that outlives the call (or the `EpollSet` built from it, which the same engine
    // adapter owns), or the process's wake descriptor, which lives as long as it does.
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

/// What ended a [`poll_or_wake`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woken {
    /// The descriptor is ready (or has an error or a hang-up to read).
    Ready,
    /// The wake descriptor is readable (a stop was asked for).
    Wake,
    /// Neither, within the time.
    TimedOut,
}

/// Wait with `poll(2)` until `fd` is readable (or writable) or `wake` is readable, at
/// most `timeout` (rounded up to the millisecond: never a busy loop). A signal's EINTR
/// waits again for what is left. Readiness of `fd` wins when both are ready.
///
/// # Errors
/// As `poll(2)`.
pub fn poll_or_wake(
    fd: RawFd,
    readable: bool,
    wake: RawFd,
    timeout: Duration,
) -> io::Result<Woken> {
    let flags = if readable {
        PollFlags::POLLIN
    } else {
        PollFlags::POLLOUT
    };
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let ms = left.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
        let mut fds = [
            PollFd::new(borrow(fd), flags),
            PollFd::new(borrow(wake), PollFlags::POLLIN),
        ];
        match poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) => return Ok(Woken::TimedOut),
            Ok(_) => {
                let ready = |p: &PollFd<'_>| p.revents().is_some_and(|r| !r.is_empty());
                return Ok(if ready(&fds[0]) {
                    Woken::Ready
                } else {
                    Woken::Wake
                });
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Make `fd` (an eventfd that lives as long as the process) readable whenever one of
/// `signals` arrives: the handler adds 1 to its counter with one `write(2)`.
///
/// # Errors
/// If a handler cannot be installed.
pub fn wake_on_signals(fd: RawFd, signals: &[i32]) -> io::Result<()> {
    for &sig in signals {
        // SAFETY: the action is async-signal-safe: one write(2) of eight bytes from the
        // stack to a descriptor that is never closed (it allocates nothing and takes no
        // lock; the registry saves and restores errno around it).
        unsafe {
            signal_hook::low_level::register(sig, move || {
                let _ = nix::unistd::write(borrow(fd), &1u64.to_ne_bytes());
            })?;
        }
    }
    Ok(())
}

/// On each of `signals`, send SIGINT to the process whose id `child` holds (none while it
/// holds 0): a child that runs part of this process's work stops with it at once.
///
/// # Errors
/// If a handler cannot be installed.
pub fn pass_signals_to(
    child: &'static std::sync::atomic::AtomicI32,
    signals: &[i32],
) -> io::Result<()> {
    for &sig in signals {
        // SAFETY: the action is async-signal-safe: an atomic load and one kill(2) (it
        // allocates nothing and takes no lock; the registry saves and restores errno
        // around it).
        unsafe {
            signal_hook::low_level::register(sig, move || {
                let pid = child.load(std::sync::atomic::Ordering::SeqCst);
                if pid > 0 {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGINT,
                    );
                }
            })?;
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::time::Instant;

    #[test]
    fn poll_or_wake_tells_ready_from_woken_from_timed_out() {
        let (mut peer, conn) = UnixStream::pair().unwrap();
        let (mut waker, wake) = UnixStream::pair().unwrap();
        let wait = |t| poll_or_wake(conn.as_raw_fd(), true, wake.as_raw_fd(), t).unwrap();
        // Nothing: the whole wait, and no less.
        let t = Instant::now();
        assert_eq!(wait(Duration::from_millis(30)), Woken::TimedOut);
        assert!(
            t.elapsed() >= Duration::from_millis(30),
            "{:?}",
            t.elapsed()
        );
        // A sub-millisecond wait is a wait too, not a busy loop of zero timeouts.
        assert_eq!(wait(Duration::from_micros(200)), Woken::TimedOut);
        // A stop wakes it at once, however long it meant to wait.
        waker.write_all(&[1]).unwrap();
        let t = Instant::now();
        assert_eq!(wait(Duration::from_secs(10)), Woken::Wake);
        assert!(t.elapsed() < Duration::from_secs(5));
        // The connection's bytes win over a stop: they are read first.
        peer.write_all(b"x").unwrap();
        assert_eq!(wait(Duration::from_secs(10)), Woken::Ready);
        // A hang-up is ready too (the read that follows sees it).
        let (peer2, conn2) = UnixStream::pair().unwrap();
        drop(peer2);
        let (_w, wake2) = UnixStream::pair().unwrap();
        let r = poll_or_wake(
            conn2.as_raw_fd(),
            true,
            wake2.as_raw_fd(),
            Duration::from_secs(10),
        );
        assert_eq!(r.unwrap(), Woken::Ready);
    }
}

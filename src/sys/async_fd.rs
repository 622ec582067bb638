//! Registering a borrowed descriptor with tokio's reactor, for the `async` relay method
//! (`crate::copy::async_copy`). tokio asks the caller to promise (`unsafe`) that the
//! descriptor stays open and the same for as long as the registration lives; a
//! [`BorrowedFd`] makes that promise for its lifetime, which the registration carries.

use std::io;
use std::os::fd::BorrowedFd;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// `fd` registered with the current runtime's reactor for `interest`, until dropped.
///
/// # Errors
/// If the reactor cannot add it (epoll_ctl).
///
/// # Panics
/// Outside a tokio runtime with its I/O driver enabled.
pub fn register(fd: BorrowedFd<'_>, interest: Interest) -> io::Result<AsyncFd<BorrowedFd<'_>>> {
    // SAFETY: a BorrowedFd<'a> is open, and refers to the same open file description,
    // for all of 'a (I/O safety), and the AsyncFd holding it cannot outlive 'a.
    Ok(unsafe { AsyncFd::register_with_interest(fd, interest) }?)
}

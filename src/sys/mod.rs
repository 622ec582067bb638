//! The only place for `unsafe` code.
//!
//! Everything that needs raw memory access or a system call without a safe wrapper lives
//! here, behind a safe interface. Today that is the shared-memory ring used by the `shm`
//! transport: mapping a POSIX shared-memory object and copying bytes through it without
//! the kernel in the data path. Safe wrappers (`nix`, `socket2`) are used everywhere else.

pub mod shm;
#[cfg(feature = "io-uring")]
pub mod uring;
pub mod wait;

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Take ownership of a descriptor a safe wrapper returned as a bare `RawFd`.
///
/// Callers pass only descriptors that were just opened and are owned by nobody else.
pub fn own_fd(fd: RawFd) -> OwnedFd {
    // SAFETY: per the contract above, `fd` is open and has no other owner.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

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

/// A `size`-byte buffer filled with `fill`, or `None` if the memory cannot be had. The
/// fill is one `memset` (zeroed memory comes from the allocator untouched), whatever the
/// build's optimisation level: a 1 GiB message buffer is ready in a fraction of a second.
pub fn filled_buffer(size: usize, fill: u8) -> Option<Vec<u8>> {
    let mut v: Vec<u8> = Vec::new();
    v.try_reserve_exact(size).ok()?;
    // SAFETY: the vector's capacity is at least `size` bytes (reserved above); every one
    // of them is written before the length covers it, and u8 has no invalid values.
    unsafe {
        v.as_mut_ptr().write_bytes(fill, size);
        v.set_len(size);
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_filled_buffer_holds_exactly_its_fill_and_an_impossible_one_is_none() {
        let v = super::filled_buffer(10_000, 0xA5).unwrap();
        assert_eq!(v.len(), 10_000);
        assert!(v.iter().all(|&b| b == 0xA5));
        assert!(super::filled_buffer(isize::MAX as usize, 0).is_none());
    }
}

//! The only place for `unsafe` code.
//!
//! Everything that needs raw memory access or a system call without a safe wrapper lives
//! here, behind a safe interface. Today that is the shared-memory ring used by the `shm`
//! transport: mapping a POSIX shared-memory object and copying bytes through it without
//! the kernel in the data path; the io_uring front ends; the zero-copy and file sends
//! and the zero-copy receive of `stream --send`/`--recv` ([`zerocopy`]); and, for the
//! relay's copy methods (`crate::copy`), the iovec arrays of `vectored`, the ring of
//! `io-uring` and `io-uring-splice`, and `async`'s registration of borrowed sockets with
//! tokio; the kernel timestamps of `--timestamps` ([`timestamps`]); the
//! `sendmmsg`/`recvmmsg` arrays of `--batch` ([`mmsg`]); the per-thread counters of
//! `--counters` ([`perf`]); `TCP_INFO` ([`tcp_info`]). Safe wrappers (`nix`, `socket2`)
//! are used everywhere else.

#[cfg(feature = "async")]
pub mod async_fd;
pub mod ethtool;
pub mod mmsg;
pub mod perf;
pub mod shm;
pub mod tcp_info;
pub mod timestamps;
#[cfg(feature = "io-uring")]
pub mod uring;
#[cfg(feature = "io-uring")]
pub mod uring_copy;
#[cfg(feature = "io-uring")]
pub mod uring_server;
pub mod vectored;
pub mod wait;
pub mod zerocopy;

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Take ownership of a descriptor a safe wrapper returned as a bare `RawFd`.
///
/// Callers pass only descriptors that were just opened and are owned by nobody else.
pub fn own_fd(fd: RawFd) -> OwnedFd {
    // SAFETY: per the contract above, `fd` is open and has no other owner.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// A byte buffer as the uninitialised memory socket2's receive calls take. Every byte is
/// initialised already and the calls only write initialised bytes, so it stays so.
pub fn as_uninit(buf: &mut [u8]) -> &mut [std::mem::MaybeUninit<u8>] {
    // SAFETY: u8 and MaybeUninit<u8> have the same size and alignment, and nothing
    // writes uninitialised memory through the returned view.
    unsafe { &mut *(std::ptr::from_mut::<[u8]>(buf) as *mut [std::mem::MaybeUninit<u8>]) }
}

/// A message buffer: page-aligned, so every run copies to and from memory laid out the
/// same way (a buffer fresh from `mmap` starts 16 bytes into a page, one from the heap
/// wherever the heap is; on some CPUs a copy into a misaligned buffer runs at half speed,
/// so the figure would depend on the allocator's history, not on the transport).
pub struct Buffer {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: a Buffer owns its memory outright, like a Vec<u8>.
unsafe impl Send for Buffer {}
// SAFETY: shared access is read-only, as for a Vec<u8>.
unsafe impl Sync for Buffer {}

/// The alignment of every [`Buffer`].
pub const BUFFER_ALIGN: usize = 4096;

impl Buffer {
    fn layout(len: usize) -> Option<std::alloc::Layout> {
        std::alloc::Layout::from_size_align(len.max(1), BUFFER_ALIGN).ok()
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({} bytes)", self.len)
    }
}

impl std::ops::Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points to `len` initialised bytes this Buffer owns.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only borrow.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let layout = Buffer::layout(self.len).expect("the layout it was allocated with");
        // SAFETY: allocated in `filled_buffer` with this very layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}

/// A `size`-byte page-aligned buffer filled with `fill`, or `None` if the memory cannot
/// be had. The fill is one `memset` (every page is touched before any measurement),
/// whatever the build's optimisation level: a 1 GiB message buffer is ready in a fraction
/// of a second.
pub fn filled_buffer(size: usize, fill: u8) -> Option<Buffer> {
    let layout = Buffer::layout(size)?;
    if layout.size() > isize::MAX as usize - BUFFER_ALIGN {
        return None;
    }
    // SAFETY: the layout's size is non-zero.
    let ptr = std::ptr::NonNull::new(unsafe { std::alloc::alloc(layout) })?;
    // SAFETY: the allocation holds at least `size` bytes; all are written here.
    unsafe { ptr.as_ptr().write_bytes(fill, size) };
    Some(Buffer { ptr, len: size })
}

/// A message buffer of `size` bytes filled with `fill`; running out of memory is an error
/// for the scenario, not an abort of the process.
///
/// # Errors
/// `OutOfMemory` if the allocation fails.
pub fn buffer(size: usize, fill: u8) -> std::io::Result<Buffer> {
    filled_buffer(size, fill).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::OutOfMemory,
            format!(
                "cannot allocate a {} message buffer: use a smaller --size, or raise the memory limit \
                 (ulimit -v)",
                crate::vocab::units::format_bytes(size as u64)
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_impossible_buffer_is_an_error_not_an_abort() {
        let e = super::buffer(isize::MAX as usize, 0).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::OutOfMemory);
        assert!(e.to_string().contains("smaller --size"), "{e}");
        assert_eq!(*super::buffer(3, 7).unwrap(), [7, 7, 7]);
    }

    #[test]
    fn a_filled_buffer_holds_exactly_its_fill_and_an_impossible_one_is_none() {
        let v = super::filled_buffer(10_000, 0xA5).unwrap();
        assert_eq!(v.len(), 10_000);
        assert!(v.iter().all(|&b| b == 0xA5));
        // Page-aligned, however large and whatever came before.
        for size in [1, 64, 4096, 1 << 20, 3 << 20] {
            let b = super::filled_buffer(size, 0).unwrap();
            assert_eq!(b.as_ptr() as usize % super::BUFFER_ALIGN, 0, "{size}");
            assert_eq!(b.len(), size);
        }
        assert!(super::filled_buffer(isize::MAX as usize, 0).is_none());
    }
}

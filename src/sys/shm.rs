//! A single-producer, single-consumer byte ring in a POSIX shared-memory object.
//!
//! The producer and the consumer each map the object themselves (as two processes would),
//! so the ring works between threads of one process and between processes alike. The object
//! is unlinked as soon as both ends are mapped, so nothing is left in `/dev/shm` even if the
//! process is killed.
//!
//! Layout: a header of three cache lines (`head`, written only by the producer; `tail`,
//! written only by the consumer; `closed` flags) followed by `capacity` bytes of data,
//! `capacity` a power of two. `head` and `tail` count bytes ever written and read, so
//! `head - tail` is the fill level and neither ever wraps in practice (u64).
//!
//! Waiting: a side that finds the ring full (producer) or empty (consumer) spins briefly,
//! then yields, then sleeps in short naps, rechecking the peer's `closed` flag so a vanished
//! peer is noticed.

use std::ffi::CString;
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::fcntl::{posix_fallocate, OFlag};
use nix::sys::mman::{mmap, munmap, shm_open, shm_unlink, MapFlags, ProtFlags};
use nix::sys::stat::Mode;
use nix::unistd::ftruncate;

const LINE: usize = 128;
const HEADER: usize = 4 * LINE;
/// Large copies are published in pieces of this size so the two sides overlap.
const PIECE: usize = 32 << 10;
const PRODUCER_CLOSED: u32 = 1;
const CONSUMER_CLOSED: u32 = 2;

#[repr(C, align(128))]
struct Padded<T>(T);

#[repr(C)]
struct Header {
    head: Padded<AtomicU64>,
    tail: Padded<AtomicU64>,
    closed: Padded<AtomicU32>,
    capacity: Padded<AtomicU64>,
}

/// One mapping of the ring.
struct Mapping {
    base: NonNull<u8>,
    len: usize,
    capacity: usize,
}

// SAFETY: the mapping is plain shared memory; all cross-thread access to the header goes
// through atomics and the data area is handed over with acquire/release on head/tail.
unsafe impl Send for Mapping {}

impl Mapping {
    fn map(fd: &OwnedFd, len: usize) -> io::Result<Mapping> {
        let size = NonZeroUsize::new(len).ok_or_else(|| io::Error::other("empty mapping"))?;
        // SAFETY: we map a fresh region (addr None) of an object we sized to `len`; the
        // returned pointer stays valid until `munmap` in Drop.
        let ptr = unsafe {
            mmap(
                None,
                size,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                fd,
                0,
            )
        }?;
        Ok(Mapping {
            base: ptr.cast(),
            len,
            capacity: len - HEADER,
        })
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping starts with a Header-sized, 128-aligned (page-aligned) area
        // that is only accessed through atomics.
        unsafe { &*(self.base.as_ptr() as *const Header) }
    }

    fn data(&self) -> *mut u8 {
        // SAFETY: HEADER < len, so the offset stays inside the mapping.
        unsafe { self.base.as_ptr().add(HEADER) }
    }

    /// Copy `src` into the ring at byte position `pos` (modulo capacity), wrapping.
    fn copy_in(&self, pos: u64, src: &[u8]) {
        let cap = self.capacity;
        let start = (pos as usize) & (cap - 1);
        let first = src.len().min(cap - start);
        // SAFETY: start + first <= cap and src.len() - first <= cap - first; the producer
        // owns the free region [head, tail + cap) exclusively until it publishes head.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.data().add(start), first);
            std::ptr::copy_nonoverlapping(src.as_ptr().add(first), self.data(), src.len() - first);
        }
    }

    /// Copy from the ring at `pos` into `dst`, wrapping.
    fn copy_out(&self, pos: u64, dst: &mut [u8]) {
        let cap = self.capacity;
        let start = (pos as usize) & (cap - 1);
        let first = dst.len().min(cap - start);
        // SAFETY: as in copy_in; the consumer owns the filled region [tail, head) until it
        // publishes tail.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data().add(start), dst.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(
                self.data(),
                dst.as_mut_ptr().add(first),
                dst.len() - first,
            );
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/len came from a successful mmap and nothing borrows them any more.
        let _ = unsafe { munmap(self.base.cast(), self.len) };
    }
}

/// Create a ring of at least `capacity` bytes (rounded up to a power of two) named `name`
/// (which must start with `/`) and return its consumer end, the receiving half. The name
/// stays until [`unlink`]: a producer opens it with [`open`]. `named` runs once the
/// name exists, before the object is sized and mapped (the test build holds there, to
/// leave a name behind as a killed run would).
///
/// # Errors
/// Fails if the shared-memory object cannot be created, sized or mapped (the name is
/// removed again then).
pub fn create(name: &str, capacity: usize, named: impl FnOnce()) -> io::Result<Consumer> {
    let capacity = capacity
        .max(4096)
        .checked_next_power_of_two()
        .filter(|&c| c <= 1 << 40)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "ring too large"))?;
    let cname = CString::new(name).map_err(io::Error::other)?;
    let fd = shm_open(
        cname.as_c_str(),
        OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR,
        Mode::from_bits_truncate(0o600),
    )?;
    named();
    let mapped = (|| {
        // Reserve the memory now: a sparse object on a full tmpfs would map fine and then
        // kill the process with SIGBUS on the first write to a page it cannot back.
        ftruncate(&fd, (HEADER + capacity) as i64)?;
        posix_fallocate(fd.as_raw_fd(), 0, (HEADER + capacity) as i64)?;
        let map = Mapping::map(&fd, HEADER + capacity)?;
        map.header()
            .capacity
            .0
            .store(capacity as u64, Ordering::Release);
        Ok::<_, io::Error>(map)
    })();
    if mapped.is_err() {
        let _ = shm_unlink(cname.as_c_str());
    }
    Ok(Consumer {
        map: mapped?,
        tail: 0,
        cached_head: 0,
        abandoned: Arc::default(),
    })
}

/// Open the ring `name` that [`create`] made and return its producer end, the sending
/// half, as a second process would. With `owner`, the object must belong to that uid (a
/// ring a peer named), checked before it is mapped.
///
/// # Errors
/// Fails if there is no such ring, it belongs to another uid than `owner`, or it cannot
/// be mapped.
pub fn open(name: &str, owner: Option<u32>) -> io::Result<Producer> {
    let cname = CString::new(name).map_err(io::Error::other)?;
    let fd = shm_open(
        cname.as_c_str(),
        OFlag::O_RDWR | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )?;
    let st = nix::sys::stat::fstat(fd.as_raw_fd())?;
    if owner.is_some_and(|uid| st.st_uid != uid) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{name} belongs to uid {}, not to the peer's uid: not mapped",
                st.st_uid
            ),
        ));
    }
    let len = st.st_size as usize;
    if len <= HEADER || !(len - HEADER).is_power_of_two() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{name} is not a sockbench ring ({len} bytes)"),
        ));
    }
    Ok(Producer {
        map: Mapping::map(&fd, len)?,
        head: 0,
        cached_tail: 0,
        abandoned: Arc::default(),
    })
}

/// Remove the ring's name (its mappings stay valid).
pub fn unlink(name: &str) {
    if let Ok(cname) = CString::new(name) {
        let _ = shm_unlink(cname.as_c_str());
    }
}

/// A ring in one call: [`create`], [`open`], [`unlink`].
///
/// # Errors
/// As [`create`] and [`open`].
#[cfg(test)]
pub fn ring(name: &str, capacity: usize) -> io::Result<(Producer, Consumer)> {
    let consumer = create(name, capacity, || {});
    let producer = consumer.as_ref().ok().map(|_| open(name, None));
    unlink(name);
    Ok((producer.expect("opened after a created ring")?, consumer?))
}

/// Bounded wait: spin, then yield, then nap; returns Err if the peer closed.
struct Backoff(u32);

impl Backoff {
    fn wait(&mut self) {
        self.0 += 1;
        if self.0 < 1 << 14 {
            std::hint::spin_loop();
        } else if self.0 < (1 << 14) + 256 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// The writing end of a ring.
pub struct Producer {
    map: Mapping,
    head: u64,
    cached_tail: u64,
    abandoned: Arc<AtomicBool>,
}

impl Producer {
    /// Write up to `src.len()` bytes, waiting while the ring is full. Returns how many
    /// bytes were written (at least one for a non-empty `src`).
    ///
    /// # Errors
    /// `BrokenPipe` if the consumer has gone.
    pub fn write(&mut self, src: &[u8]) -> io::Result<usize> {
        if src.is_empty() {
            return Ok(0);
        }
        let cap = self.map.capacity as u64;
        let hdr = self.map.header();
        let mut backoff = Backoff(0);
        let free = loop {
            let free = cap - (self.head - self.cached_tail);
            if free > 0 {
                break free;
            }
            self.cached_tail = hdr.tail.0.load(Ordering::Acquire);
            if self.head - self.cached_tail < cap {
                continue;
            }
            if hdr.closed.0.load(Ordering::Acquire) & CONSUMER_CLOSED != 0
                || self.abandoned.load(Ordering::Acquire)
            {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            backoff.wait();
        };
        let n = (free as usize).min(src.len());
        // Publish in pieces so the consumer copies out while we copy in.
        for piece in src[..n].chunks(PIECE) {
            self.map.copy_in(self.head, piece);
            self.head += piece.len() as u64;
            hdr.head.0.store(self.head, Ordering::Release);
        }
        Ok(n)
    }

    /// A flag that, once set (by another thread, when the run is abandoned because the
    /// consumer's process died), makes a waiting write fail with `BrokenPipe`.
    pub fn abandon_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.abandoned)
    }

    /// Mark the stream finished: the consumer reads what is left, then end of data.
    pub fn close(&mut self) {
        self.map
            .header()
            .closed
            .0
            .fetch_or(PRODUCER_CLOSED, Ordering::AcqRel);
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.close();
    }
}

/// The reading end of a ring.
pub struct Consumer {
    map: Mapping,
    tail: u64,
    cached_head: u64,
    abandoned: Arc<AtomicBool>,
}

impl Consumer {
    /// The ring's data capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.map.capacity
    }

    /// A flag that, once set (by another thread, when the run is abandoned because the
    /// producer's process died), makes a waiting read return end of data.
    pub fn abandon_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.abandoned)
    }

    /// Read up to `dst.len()` bytes, waiting while the ring is empty. Returns 0 once the
    /// producer has closed and everything it wrote has been read.
    pub fn read(&mut self, dst: &mut [u8]) -> usize {
        if dst.is_empty() {
            return 0;
        }
        let hdr = self.map.header();
        let mut backoff = Backoff(0);
        let avail = loop {
            let avail = self.cached_head - self.tail;
            if avail > 0 {
                break avail;
            }
            self.cached_head = hdr.head.0.load(Ordering::Acquire);
            if self.cached_head > self.tail {
                continue;
            }
            if self.abandoned.load(Ordering::Acquire) {
                return 0;
            }
            if hdr.closed.0.load(Ordering::Acquire) & PRODUCER_CLOSED != 0 {
                // Re-read head: the producer may have written just before closing.
                self.cached_head = hdr.head.0.load(Ordering::Acquire);
                if self.cached_head == self.tail {
                    return 0;
                }
                continue;
            }
            backoff.wait();
        };
        let n = (avail as usize).min(dst.len());
        for piece in dst[..n].chunks_mut(PIECE) {
            self.map.copy_out(self.tail, piece);
            self.tail += piece.len() as u64;
            hdr.tail.0.store(self.tail, Ordering::Release);
        }
        n
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.map
            .header()
            .closed
            .0
            .fetch_or(CONSUMER_CLOSED, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Removes a test's shared-memory object however the test ends (a failed assertion,
    /// or a mutant of the code under test that no longer unlinks).
    struct Removed(String);

    impl Drop for Removed {
        fn drop(&mut self) {
            if let Ok(cname) = CString::new(self.0.as_str()) {
                let _ = shm_unlink(cname.as_c_str());
            }
        }
    }

    /// A name for a test's object, removed when the guard goes.
    fn test_name(stem: &str) -> (String, Removed) {
        let name = format!("/sockbench-test-{stem}-{}", std::process::id());
        (name.clone(), Removed(name))
    }

    #[test]
    fn ring_carries_bytes_in_order_across_wraps_and_reports_end() {
        let (name, _removed) = test_name("order");
        let (mut p, mut c) = ring(&name, 4096).unwrap();
        let t = std::thread::spawn(move || {
            let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
            let mut off = 0;
            while off < data.len() {
                off += p.write(&data[off..(off + 3000).min(data.len())]).unwrap();
            }
            p.close();
        });
        let mut got = Vec::new();
        let mut buf = [0u8; 1777];
        loop {
            let n = c.read(&mut buf);
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        t.join().unwrap();
        assert_eq!(got.len(), 100_000);
        assert!(got.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        assert!(!std::path::Path::new(&format!("/dev/shm{name}")).exists());
    }

    #[test]
    fn producer_sees_broken_pipe_when_consumer_is_gone() {
        let (name, _removed) = test_name("pipe");
        let (mut p, c) = ring(&name, 4096).unwrap();
        drop(c);
        let big = vec![0u8; 8192];
        assert_eq!(p.write(&big).unwrap(), 4096);
        assert_eq!(p.write(&big).unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }

    #[test]
    fn a_ring_is_created_at_a_power_of_two_and_only_a_ring_opens_as_one() {
        let (name, _removed) = test_name("cap");
        let consumer = create(&name, 5000, || {}).unwrap();
        assert_eq!(consumer.capacity(), 8192);
        assert!(open(&name, None).is_ok());
        unlink(&name);
        assert!(open(&name, None).is_err(), "gone once unlinked");
        // Something else in /dev/shm, too small or not a power of two past the header.
        for len in [0, HEADER as i64, (HEADER + 5000) as i64] {
            let (other, _removed) = test_name("other");
            let cname = CString::new(other.as_str()).unwrap();
            let fd = shm_open(
                cname.as_c_str(),
                OFlag::O_CREAT | OFlag::O_RDWR,
                Mode::from_bits_truncate(0o600),
            )
            .unwrap();
            ftruncate(&fd, len).unwrap();
            let e = open(&other, None).err().expect("not a ring");
            unlink(&other);
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{len}: {e}");
        }
    }
}

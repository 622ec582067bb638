//! The buffers of the `vectored` relay method (`crate::copy::vectored`): one page-aligned
//! buffer cut into parts, with the `iovec` arrays readv(2) and writev(2) take built once,
//! so that a chunk costs exactly one readv and as many writevs as the destination needs,
//! as in a C loop (no slice array rebuilt per call, no allocation).
//!
//! It owns the memory its `iovec`s point into and hands the kernel nothing else; the
//! caller only says which descriptor to read or write.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;
use nix::libc;

use super::Buffer;

/// The most parts one readv or writev takes (`IOV_MAX`, `UIO_MAXIOV` in the kernel).
pub const MAX_PARTS: usize = 1024;

/// One buffer of `size` bytes in `parts` parts, and the bytes of it still to be written.
pub struct VectoredBuf {
    /// The parts, in order: a readv fills them all.
    reads: Vec<libc::iovec>,
    /// What is still to be written, from `writes[first]` on.
    writes: Vec<libc::iovec>,
    first: usize,
    /// The memory every `iovec` points into; it never moves (it is on the heap) and is
    /// freed only with `self`.
    buf: Buffer,
}

// SAFETY: the raw pointers in the iovecs point only into `buf`, which this value owns
// outright (as a Vec<u8> owns its memory), so moving it to another thread is sound.
unsafe impl Send for VectoredBuf {}

impl std::fmt::Debug for VectoredBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "VectoredBuf({} bytes in {} parts)",
            self.buf.len(),
            self.reads.len()
        )
    }
}

impl VectoredBuf {
    /// `size` bytes in `parts` parts as equal as can be (the first `size % parts` parts
    /// are a byte longer; with fewer bytes than parts, the last parts are empty, which
    /// readv and writev accept).
    ///
    /// # Errors
    /// `InvalidInput` for no parts or more than [`MAX_PARTS`]; `OutOfMemory` if the
    /// buffer cannot be had.
    pub fn new(size: usize, parts: usize) -> io::Result<VectoredBuf> {
        if parts == 0 || parts > MAX_PARTS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("--iovecs {parts}: readv and writev take 1 to {MAX_PARTS} buffers"),
            ));
        }
        let mut buf = crate::sys::buffer(size, 0)?;
        let base = buf.as_mut_ptr();
        let (each, longer) = (size / parts, size % parts);
        let mut reads = Vec::with_capacity(parts);
        let mut off = 0;
        for i in 0..parts {
            let len = each + usize::from(i < longer);
            reads.push(libc::iovec {
                // `off <= size` (the lengths add up to `size`): in bounds or one past.
                iov_base: base.wrapping_add(off).cast(),
                iov_len: len,
            });
            off += len;
        }
        debug_assert_eq!(off, size);
        Ok(VectoredBuf {
            reads,
            writes: Vec::with_capacity(parts),
            first: 0,
            buf,
        })
    }

    /// readv(2) from `fd` into every part, in order. Bytes still staged for writing are
    /// dropped: the caller writes them first.
    ///
    /// # Errors
    /// As readv(2).
    pub fn read_from(&mut self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        self.writes.clear();
        self.first = 0;
        // SAFETY: each iovec points at its own part of `self.buf`, which is alive and
        // borrowed mutably through `&mut self` for the whole call, so the kernel writes
        // only memory nothing else reads or writes meanwhile. The count is at most
        // MAX_PARTS, which fits a c_int.
        let n = unsafe {
            libc::readv(
                fd.as_raw_fd(),
                self.reads.as_ptr(),
                self.reads.len() as libc::c_int,
            )
        };
        Ok(Errno::result(n)? as usize)
    }

    /// Stage the first `len` bytes of the buffer (what a readv returned) for writing,
    /// cut where the parts are cut.
    pub fn stage(&mut self, len: usize) {
        self.writes.clear();
        self.first = 0;
        let mut left = len.min(self.buf.len());
        for part in &self.reads {
            if left == 0 {
                break;
            }
            let n = part.iov_len.min(left);
            if n > 0 {
                self.writes.push(libc::iovec {
                    iov_base: part.iov_base,
                    iov_len: n,
                });
            }
            left -= n;
        }
    }

    /// Whether every staged byte has been written.
    pub fn all_written(&self) -> bool {
        self.first == self.writes.len()
    }

    /// writev(2) the staged bytes not yet written to `fd`, and take off what it wrote.
    ///
    /// # Errors
    /// As writev(2).
    pub fn write_to(&mut self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        let rest = &self.writes[self.first..];
        // SAFETY: every staged iovec lies within `self.buf` (stage cuts them from the
        // parts and `advance` only shortens them from the front), which is alive and
        // not written while `&mut self` is held; the count is at most MAX_PARTS.
        let n = unsafe { libc::writev(fd.as_raw_fd(), rest.as_ptr(), rest.len() as libc::c_int) };
        let n = Errno::result(n)? as usize;
        self.advance(n);
        Ok(n)
    }

    /// Take `n` written bytes off the front of the staged iovecs.
    fn advance(&mut self, mut n: usize) {
        while n > 0 && self.first < self.writes.len() {
            let v = &mut self.writes[self.first];
            if n < v.iov_len {
                // A partial write: the rest of this part stays. The new base stays inside
                // the part (n < its length), so inside `self.buf`.
                v.iov_base = v.iov_base.cast::<u8>().wrapping_add(n).cast();
                v.iov_len -= n;
                return;
            }
            n -= v.iov_len;
            self.first += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn parts_are_equal_but_for_a_byte_and_cover_the_buffer_in_order() {
        let v = VectoredBuf::new(7, 3).unwrap();
        let lens: Vec<usize> = v.reads.iter().map(|p| p.iov_len).collect();
        assert_eq!(lens, [3, 2, 2]);
        let v = VectoredBuf::new(1, 3).unwrap();
        let lens: Vec<usize> = v.reads.iter().map(|p| p.iov_len).collect();
        assert_eq!(lens, [1, 0, 0]);
        assert!(VectoredBuf::new(8, 0).is_err());
        assert!(VectoredBuf::new(8, MAX_PARTS + 1).is_err());
    }

    #[test]
    fn a_partial_writev_resumes_mid_part_and_keeps_the_order() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let (c, mut d) = UnixStream::pair().unwrap();
        let data: Vec<u8> = (0..10u8).collect();
        a.write_all(&data).unwrap();
        let mut v = VectoredBuf::new(10, 4).unwrap();
        assert_eq!(v.read_from(b.as_fd()).unwrap(), 10);
        assert_eq!(&v.buf[..], &data[..]);
        v.stage(9);
        // Pretend the kernel took 4 bytes (a part of 3 and one byte of the next).
        v.advance(4);
        assert!(!v.all_written());
        while !v.all_written() {
            v.write_to(c.as_fd()).unwrap();
        }
        drop(c);
        let mut out = Vec::new();
        d.read_to_end(&mut out).unwrap();
        assert_eq!(out, &data[4..9]);
    }
}

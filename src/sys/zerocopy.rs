//! The system calls of `stream --send sendfile|splice|zerocopy` and `--recv zerocopy`,
//! behind a safe interface: sendfile(2), vmsplice(2) and splice(2) through nix; the
//! `SO_ZEROCOPY` option, `send(MSG_ZEROCOPY)` and reading its completions from the
//! socket's error queue (`MSG_ERRQUEUE`, `struct sock_extended_err`); `TCP_INFO`'s
//! advertised MSS (read through [`super::tcp_info`]); and `TCP_ZEROCOPY_RECEIVE`, which
//! maps received pages into a region `mmap`ed on the socket.
//!
//! Every function that takes a `RawFd` needs it open for the length of the call (the
//! callers pass the descriptor of a `Conn` they hold); only a [`ZerocopyReceiver`] keeps
//! one, for as long as it lives.

use std::fs::File;
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag, SpliceFFlags};
use nix::libc;
use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, SockaddrStorage};

/// `SO_EE_ORIGIN_ZEROCOPY` (linux/errqueue.h): a notification of MSG_ZEROCOPY sends.
pub const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// `SO_EE_CODE_ZEROCOPY_COPIED`: the kernel copied the data of these sends after all.
pub const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// The descriptor for the length of one call.
fn borrow<'a>(fd: RawFd) -> BorrowedFd<'a> {
    // SAFETY: per the module's contract, `fd` is open for the length of the call that
    // borrows it, and the borrow does not outlive that call.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

fn errno(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// The size of a memory page.
pub fn page_size() -> usize {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n > 0)
        .unwrap_or(4096)
}

fn set_int_option(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value is a live c_int of the length given.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            std::ptr::from_ref(&value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Turn on `SO_ZEROCOPY` (without it the kernel ignores `MSG_ZEROCOPY`).
///
/// # Errors
/// `EOPNOTSUPP` where the socket type has no MSG_ZEROCOPY (Unix sockets).
pub fn enable_zerocopy(fd: RawFd) -> io::Result<()> {
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_ZEROCOPY, 1)
}

/// `SO_RCVLOWAT`: a receive (and a poll for input) waits for this many bytes.
///
/// # Errors
/// As setsockopt(2).
pub fn set_receive_low_water(fd: RawFd, bytes: usize) -> io::Result<()> {
    set_int_option(
        fd,
        libc::SOL_SOCKET,
        libc::SO_RCVLOWAT,
        libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX),
    )
}

/// One `send(2)` with `MSG_ZEROCOPY` (and `MSG_NOSIGNAL`): the kernel pins `buf`'s pages
/// and tells later, on the error queue, when it no longer needs them. The caller must not
/// change `buf` before then (the stream sender never changes its buffer).
///
/// # Errors
/// As send(2); `ENOBUFS` when the socket's option memory (`net.core.optmem_max`) is full
/// of notifications not yet read.
pub fn send_zerocopy(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    let flags = MsgFlags::from_bits_retain(libc::MSG_ZEROCOPY | libc::MSG_NOSIGNAL);
    nix::sys::socket::send(fd, buf, flags).map_err(errno)
}

/// A range of MSG_ZEROCOPY sends the kernel is done with: sends `first..=last` (each
/// successful send gets the next 32-bit number, from 0), and whether the kernel copied
/// their data after all (`SO_EE_CODE_ZEROCOPY_COPIED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The first send's number.
    pub first: u32,
    /// The last send's number (the range wraps at 2^32).
    pub last: u32,
    /// The kernel copied the data (one flag for the whole range, as the kernel reports it).
    pub copied: bool,
}

impl Completion {
    /// How many sends the range covers.
    pub fn sends(self) -> u64 {
        u64::from(self.last.wrapping_sub(self.first)) + 1
    }
}

/// Read one entry of the socket's error queue without waiting: `Ok(None)` when it is
/// empty.
///
/// # Errors
/// As recvmsg(2); an entry that is not a zero-copy notification is the socket error it
/// carries.
pub fn reap_completion(fd: RawFd) -> io::Result<Option<Completion>> {
    let mut cmsg = nix::cmsg_space!(libc::sock_extended_err, libc::sockaddr_in6);
    let mut iov: [io::IoSliceMut<'_>; 0] = [];
    let msg = match recvmsg::<SockaddrStorage>(
        fd,
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(m) => m,
        Err(Errno::EAGAIN) => return Ok(None),
        Err(e) => return Err(errno(e)),
    };
    for c in msg.cmsgs().map_err(errno)? {
        let err = match c {
            ControlMessageOwned::Ipv4RecvErr(e, _) | ControlMessageOwned::Ipv6RecvErr(e, _) => e,
            _ => continue,
        };
        if err.ee_origin == SO_EE_ORIGIN_ZEROCOPY && err.ee_errno == 0 {
            return Ok(Some(Completion {
                first: err.ee_info,
                last: err.ee_data,
                copied: err.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0,
            }));
        }
        if err.ee_errno != 0 {
            return Err(io::Error::from_raw_os_error(err.ee_errno as i32));
        }
    }
    Err(io::Error::other(
        "the socket's error queue held an entry that is no zero-copy notification",
    ))
}

/// Wait up to `timeout` for the socket's error queue (POLLERR); true if it has entries.
///
/// # Errors
/// As poll(2).
pub fn wait_error_queue(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    wait_for(fd, nix::poll::PollFlags::empty(), timeout)
        .map(|r| r.contains(nix::poll::PollFlags::POLLERR))
}

/// Wait up to `timeout` for input (POLLIN, or the end: POLLHUP, POLLRDHUP, POLLERR).
///
/// # Errors
/// As poll(2).
pub fn wait_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    wait_for(fd, nix::poll::PollFlags::POLLIN, timeout).map(|r| !r.is_empty())
}

fn wait_for(
    fd: RawFd,
    events: nix::poll::PollFlags,
    timeout: Duration,
) -> io::Result<nix::poll::PollFlags> {
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [nix::poll::PollFd::new(borrow(fd), events)];
    match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)) {
        Ok(_) => Ok(fds[0].revents().unwrap_or(nix::poll::PollFlags::empty())),
        Err(Errno::EINTR) => Ok(nix::poll::PollFlags::empty()),
        Err(e) => Err(errno(e)),
    }
}

/// One `sendfile(2)` of up to `count` bytes of `file` from `*offset` to `out`, which
/// advances `*offset`.
///
/// # Errors
/// As sendfile(2).
pub fn sendfile(out: RawFd, file: &File, offset: &mut i64, count: usize) -> io::Result<usize> {
    nix::sys::sendfile::sendfile(borrow(out), file.as_fd(), Some(offset), count).map_err(errno)
}

/// A pipe that carries a buffer's pages to a descriptor: `vmsplice(2)` puts references to
/// the pages in (no copy), `splice(2)` moves them on.
#[derive(Debug)]
pub struct SplicePipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
}

impl SplicePipe {
    /// A pipe of at least `want` bytes where the kernel allows it (`F_SETPIPE_SZ`; up to
    /// /proc/sys/fs/pipe-max-size without CAP_SYS_RESOURCE), else as large as allowed.
    ///
    /// # Errors
    /// If the pipe cannot be made.
    pub fn new(want: usize) -> io::Result<SplicePipe> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(errno)?;
        let raw = write.as_raw_fd();
        let want = libc::c_int::try_from(want).unwrap_or(libc::c_int::MAX);
        if fcntl(raw, FcntlArg::F_SETPIPE_SZ(want)).is_err() {
            let max = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
                .ok()
                .and_then(|s| s.trim().parse::<libc::c_int>().ok());
            if let Some(max) = max.filter(|&m| m < want) {
                let _ = fcntl(raw, FcntlArg::F_SETPIPE_SZ(max));
            }
        }
        let capacity = fcntl(raw, FcntlArg::F_GETPIPE_SZ).map_err(errno)?;
        Ok(SplicePipe {
            read,
            write,
            capacity: usize::try_from(capacity).unwrap_or(page_size()),
        })
    }

    /// The pipe's size as the kernel granted it.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// One `vmsplice(2)` of `buf`'s pages into the pipe: how many bytes went in.
    ///
    /// # Errors
    /// As vmsplice(2).
    pub fn fill(&self, buf: &[u8]) -> io::Result<usize> {
        nix::fcntl::vmsplice(&self.write, &[io::IoSlice::new(buf)], SpliceFFlags::empty())
            .map_err(errno)
    }

    /// One `splice(2)` of up to `len` bytes from the pipe to `out`.
    ///
    /// # Errors
    /// As splice(2).
    pub fn drain_to(&self, out: RawFd, len: usize) -> io::Result<usize> {
        nix::fcntl::splice(
            &self.read,
            None,
            borrow(out),
            None,
            len,
            SpliceFFlags::SPLICE_F_MOVE,
        )
        .map_err(errno)
    }
}

/// What `TCP_INFO` says of the payload the peer's segments carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentPayload {
    /// `tcpi_advmss`: the MSS this end advertised, less the timestamp option when the
    /// connection uses it: the most payload a segment to this end carries.
    pub advmss: u32,
    /// Whether the connection uses TCP timestamps (12 bytes of every segment).
    pub timestamps: bool,
    /// `tcpi_pmtu`: the path MTU.
    pub pmtu: u32,
}

/// `TCP_INFO`'s advertised MSS and path MTU of a connected TCP socket.
///
/// # Errors
/// As getsockopt(2).
pub fn segment_payload(fd: RawFd) -> io::Result<SegmentPayload> {
    let info = super::tcp_info::raw(fd)?;
    Ok(SegmentPayload {
        advmss: info.tcpi_advmss,
        timestamps: info.tcpi_options & 1 != 0, // TCPI_OPT_TIMESTAMPS
        pmtu: info.tcpi_pmtu,
    })
}

/// `struct tcp_zerocopy_receive` (linux/tcp.h).
#[repr(C)]
#[derive(Default)]
struct TcpZerocopyReceive {
    address: u64,
    length: u32,
    recv_skip_hint: u32,
    inq: u32,
    err: i32,
    copybuf_address: u64,
    copybuf_len: i32,
    flags: u32,
    msg_control: u64,
    msg_controllen: u64,
    msg_flags: u32,
    reserved: u32,
}

/// What one `TCP_ZEROCOPY_RECEIVE` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mapped {
    /// Bytes the kernel mapped into the region (whole pages).
    pub mapped: usize,
    /// Bytes at the head of the queue it could not map: read them with recv(2).
    pub skip: usize,
    /// Bytes still queued on the socket after the call.
    pub inq: usize,
}

/// A region `mmap`ed on a TCP socket, into which `TCP_ZEROCOPY_RECEIVE` maps received
/// pages instead of copying them. Unmapped when dropped.
#[derive(Debug)]
pub struct ZerocopyReceiver {
    fd: RawFd,
    addr: NonNull<libc::c_void>,
    len: usize,
}

// SAFETY: the region is only ever touched through `&mut self` (the kernel maps pages
// into it); nothing in it is shared with another thread.
unsafe impl Send for ZerocopyReceiver {}

impl ZerocopyReceiver {
    /// Map a region of `len` bytes (rounded up to whole pages) on the socket `fd`, which
    /// must stay open as long as the receiver lives.
    ///
    /// # Errors
    /// As mmap(2) (a socket other than TCP cannot be mapped).
    pub fn new(fd: RawFd, len: usize) -> io::Result<ZerocopyReceiver> {
        let page = page_size();
        let len = len.max(1).div_ceil(page) * page;
        let size = NonZeroUsize::new(len).ok_or_else(|| io::Error::other("empty region"))?;
        // SAFETY: a fresh read-only shared mapping of the socket at an address the kernel
        // chooses; it aliases no Rust object.
        let addr = unsafe {
            nix::sys::mman::mmap(
                None,
                size,
                nix::sys::mman::ProtFlags::PROT_READ,
                nix::sys::mman::MapFlags::MAP_SHARED,
                borrow(fd),
                0,
            )
        }
        .map_err(errno)?;
        Ok(ZerocopyReceiver { fd, addr, len })
    }

    /// The region's size in bytes.
    pub fn size(&self) -> usize {
        self.len
    }

    /// One `TCP_ZEROCOPY_RECEIVE`: the kernel replaces whatever the region held with the
    /// next received pages, as many as are queued whole and fit. Does not wait.
    ///
    /// # Errors
    /// As getsockopt(2); a socket error the call reports.
    pub fn receive(&mut self) -> io::Result<Mapped> {
        let mut zc = TcpZerocopyReceive {
            address: self.addr.as_ptr() as u64,
            length: u32::try_from(self.len).unwrap_or(u32::MAX),
            ..TcpZerocopyReceive::default()
        };
        let mut len = std::mem::size_of::<TcpZerocopyReceive>() as libc::socklen_t;
        // SAFETY: `zc` is writable for `len` bytes; the kernel maps pages only into this
        // receiver's own region, which no Rust reference points into.
        let r = unsafe {
            libc::getsockopt(
                self.fd,
                libc::IPPROTO_TCP,
                libc::TCP_ZEROCOPY_RECEIVE,
                std::ptr::from_mut(&mut zc).cast(),
                &mut len,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        if zc.err != 0 {
            return Err(io::Error::from_raw_os_error(zc.err.abs()));
        }
        Ok(Mapped {
            mapped: zc.length as usize,
            skip: zc.recv_skip_hint as usize,
            inq: zc.inq as usize,
        })
    }
}

impl Drop for ZerocopyReceiver {
    fn drop(&mut self) {
        // SAFETY: the region was mapped in `new` with this length and is unmapped once.
        let _ = unsafe { nix::sys::mman::munmap(self.addr, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn a_completion_range_counts_its_sends_across_the_wrap() {
        let c = |first, last| Completion {
            first,
            last,
            copied: false,
        };
        assert_eq!(c(0, 0).sends(), 1);
        assert_eq!(c(3, 9).sends(), 7);
        assert_eq!(c(u32::MAX, 1).sends(), 3);
    }

    #[test]
    fn the_splice_pipe_carries_a_buffers_bytes_to_a_socket() {
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let pipe = SplicePipe::new(1 << 16).unwrap();
        assert!(pipe.capacity() >= 1 << 16, "{}", pipe.capacity());
        let data = vec![0x5Au8; 10_000];
        assert_eq!(pipe.fill(&data).unwrap(), 10_000);
        let mut moved = 0;
        while moved < 10_000 {
            moved += pipe.drain_to(a.as_raw_fd(), 10_000 - moved).unwrap();
        }
        drop(a);
        let mut got = Vec::new();
        b.read_to_end(&mut got).unwrap();
        assert_eq!(got, data);
    }

    #[test]
    fn sendfile_sends_the_files_bytes_and_advances_the_offset() {
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"hello, sendfile").unwrap();
        let mut off = 7;
        assert_eq!(sendfile(a.as_raw_fd(), &f, &mut off, 100).unwrap(), 8);
        assert_eq!(off, 15);
        drop(a);
        let mut got = String::new();
        b.read_to_string(&mut got).unwrap();
        assert_eq!(got, "sendfile");
    }

    #[test]
    fn unix_sockets_refuse_so_zerocopy_and_an_empty_error_queue_is_none() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let e = enable_zerocopy(a.as_raw_fd()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "{e}");
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        enable_zerocopy(c.as_raw_fd()).unwrap();
        assert_eq!(reap_completion(c.as_raw_fd()).unwrap(), None);
    }
}

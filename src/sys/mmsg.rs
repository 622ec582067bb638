//! `sendmmsg(2)` and `recvmmsg(2)`: several datagrams in one system call (`--batch`).
//!
//! A [`Batch`] owns the `mmsghdr` and `iovec` arrays a connection hands to the kernel.
//! They are allocated the first time a batch of that size is seen and kept for the
//! connection's life, so a call only writes each message's address and length into them:
//! no allocation per call. One buffer per message (one `iovec` each), no control
//! messages. Used by the datagram sockets of `crate::transport` (udp, udp6, unix-dgram,
//! unix-seqpacket).
//!
//! nix 0.29 has `sendmmsg`/`recvmmsg` too, but its API takes an iterator of messages,
//! addresses and control messages per call and returns an iterator of results that
//! allocates per call; these two calls are a few lines of plain libc instead.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

use nix::libc;

/// The most messages one call takes: the kernel's `UIO_MAXIOV` (a larger vector is cut
/// to this by the kernel anyway).
pub const MAX_MESSAGES: usize = 1024;

/// The arrays of one connection's batched calls.
pub struct Batch {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    /// Where `recvmmsg` writes each message's sender (one slot for all: the last wins).
    from: libc::sockaddr_storage,
    from_len: libc::socklen_t,
}

// SAFETY: the raw pointers inside the arrays point only into `iovs` (owned by the Batch)
// or at memory borrowed for the length of one call; a Batch moved to another thread
// carries no reference to anything that stays behind.
unsafe impl Send for Batch {}

impl Default for Batch {
    fn default() -> Self {
        Batch::new()
    }
}

impl Batch {
    /// Empty arrays: nothing is allocated until the first call.
    pub fn new() -> Batch {
        Batch {
            hdrs: Vec::new(),
            iovs: Vec::new(),
            // SAFETY: an all-zero sockaddr_storage is a valid (AF_UNSPEC) value.
            from: unsafe { std::mem::zeroed() },
            from_len: 0,
        }
    }

    /// Make room for `n` messages (once per size: the arrays only grow), each header
    /// pointing at its own `iovec`.
    fn room(&mut self, n: usize) {
        if self.hdrs.len() >= n {
            return;
        }
        self.iovs = vec![
            libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            };
            n
        ];
        // SAFETY: an all-zero mmsghdr is valid: null name, iovec and control pointers
        // with zero lengths.
        self.hdrs = vec![unsafe { std::mem::zeroed::<libc::mmsghdr>() }; n];
        for (h, iov) in self.hdrs.iter_mut().zip(self.iovs.iter_mut()) {
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
        }
    }

    /// Send each of `msgs` as one datagram on the connected socket `fd` with one
    /// `sendmmsg` (at most [`MAX_MESSAGES`]); returns how many went out, a prefix of
    /// `msgs` (fewer than asked when a non-blocking socket filled up or a signal came
    /// after the first).
    ///
    /// # Errors
    /// The call's error when not even the first message went out (`WouldBlock` on a
    /// full non-blocking socket).
    pub fn send(&mut self, fd: RawFd, msgs: &[&[u8]]) -> io::Result<usize> {
        let n = msgs.len().min(MAX_MESSAGES);
        if n == 0 {
            return Ok(0);
        }
        self.room(n);
        for (iov, m) in self.iovs.iter_mut().zip(&msgs[..n]) {
            iov.iov_base = m.as_ptr() as *mut libc::c_void;
            iov.iov_len = m.len();
        }
        // A connected socket: no address (a receive may have left one in the headers).
        for h in &mut self.hdrs[..n] {
            h.msg_hdr.msg_name = std::ptr::null_mut();
            h.msg_hdr.msg_namelen = 0;
        }
        // SAFETY: the first `n` headers each point at one iovec of `self.iovs`, which
        // point at the `n` messages borrowed for this call; the kernel only reads them.
        let sent = unsafe { libc::sendmmsg(fd, self.hdrs.as_mut_ptr(), n as libc::c_uint, 0) };
        // -1: the error, nothing sent; else how many went (at least one, as n >= 1).
        usize::try_from(sent).map_err(|_| io::Error::last_os_error())
    }

    /// Receive up to `bufs.len()` datagrams (at most [`MAX_MESSAGES`]) from `fd` with one
    /// `recvmmsg(MSG_WAITFORONE)`: it waits for the first as `recv` does (the socket's
    /// receive timeout applies; a non-blocking socket returns `WouldBlock`), then takes
    /// what is already queued. Each datagram's length goes to `lens` (0: an empty
    /// datagram, or the end of a sequenced-packet stream); a datagram longer than its
    /// buffer is cut to it. With `want_sender`, the last datagram's sender is kept for
    /// [`Batch::sender`]. Returns how many arrived.
    ///
    /// # Errors
    /// The call's error when nothing arrived.
    pub fn recv(
        &mut self,
        fd: RawFd,
        bufs: &mut [&mut [u8]],
        lens: &mut [usize],
        want_sender: bool,
    ) -> io::Result<usize> {
        let n = bufs.len().min(lens.len()).min(MAX_MESSAGES);
        if n == 0 {
            return Ok(0);
        }
        self.room(n);
        for (iov, b) in self.iovs.iter_mut().zip(bufs.iter_mut()) {
            iov.iov_base = b.as_mut_ptr().cast();
            iov.iov_len = b.len();
        }
        let (name, name_len) = match want_sender {
            true => (
                std::ptr::addr_of_mut!(self.from).cast::<libc::c_void>(),
                std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
            ),
            false => (std::ptr::null_mut(), 0),
        };
        for h in &mut self.hdrs[..n] {
            h.msg_hdr.msg_name = name;
            h.msg_hdr.msg_namelen = name_len;
        }
        // SAFETY: the first `n` headers each point at one iovec of `self.iovs`, which
        // point at the `n` buffers borrowed mutably for this call, with their lengths;
        // the name, when given, is `self.from` with its size. No timeout is passed.
        let got = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        // -1: the error, nothing received; else how many came (at least one).
        let got = usize::try_from(got).map_err(|_| io::Error::last_os_error())?;
        for (len, h) in lens.iter_mut().zip(&self.hdrs[..got]) {
            *len = h.msg_len as usize;
        }
        if let Some(last) = self.hdrs[..got].last().filter(|_| want_sender) {
            self.from_len = last.msg_hdr.msg_namelen;
        }
        Ok(got)
    }

    /// The sender of the last datagram received with `want_sender`, if it had an IP
    /// address.
    pub fn sender(&self) -> Option<SocketAddr> {
        let len = self.from_len as usize;
        match libc::c_int::from(self.from.ss_family) {
            libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
                // SAFETY: the kernel wrote a sockaddr_in (family AF_INET, long enough)
                // into the storage, which is aligned and large enough for any address.
                let a = unsafe { &*std::ptr::addr_of!(self.from).cast::<libc::sockaddr_in>() };
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                    u16::from_be(a.sin_port),
                )))
            }
            libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above, a sockaddr_in6.
                let a = unsafe { &*std::ptr::addr_of!(self.from).cast::<libc::sockaddr_in6>() };
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(a.sin6_addr.s6_addr),
                    u16::from_be(a.sin6_port),
                    a.sin6_flowinfo,
                    a.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    fn udp_pair() -> (UdpSocket, UdpSocket) {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        (tx, rx)
    }

    #[test]
    fn one_call_sends_and_receives_every_datagram_whole_and_in_order() {
        let (tx, rx) = udp_pair();
        let data: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 10 + usize::from(i)]).collect();
        let msgs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        let mut out = Batch::new();
        assert_eq!(out.send(tx.as_raw_fd(), &msgs).unwrap(), 40);
        let mut store = vec![0u8; 64 * 64];
        let mut bufs: Vec<&mut [u8]> = store.chunks_mut(64).collect();
        let mut lens = [0usize; 64];
        let mut inb = Batch::new();
        let mut got = 0;
        while got < 40 {
            let n = inb
                .recv(rx.as_raw_fd(), &mut bufs[got..], &mut lens[got..], true)
                .unwrap();
            assert!(n >= 1);
            got += n;
        }
        for (i, d) in data.iter().enumerate() {
            assert_eq!(lens[i], d.len(), "message {i}");
            assert_eq!(&bufs[i][..lens[i]], &d[..], "message {i}");
        }
        assert_eq!(inb.sender(), Some(tx.local_addr().unwrap()));
        // A later receive that does not ask keeps the sender known.
        out.send(tx.as_raw_fd(), &[b"again"]).unwrap();
        inb.recv(rx.as_raw_fd(), &mut bufs, &mut lens, false)
            .unwrap();
        assert_eq!(inb.sender(), Some(tx.local_addr().unwrap()));
        // Without asking for the sender, none is kept.
        assert_eq!(Batch::new().sender(), None);
    }

    #[test]
    fn an_ipv6_sender_is_known_and_a_cut_address_is_none() {
        if let (Ok(rx), Ok(tx)) = (UdpSocket::bind("[::1]:0"), UdpSocket::bind("[::1]:0")) {
            tx.connect(rx.local_addr().unwrap()).unwrap();
            Batch::new().send(tx.as_raw_fd(), &[b"six"]).unwrap();
            let mut b = [0u8; 8];
            let mut inb = Batch::new();
            let n = inb
                .recv(rx.as_raw_fd(), &mut [&mut b[..]], &mut [0], true)
                .unwrap();
            assert_eq!(n, 1);
            assert_eq!(inb.sender(), Some(tx.local_addr().unwrap()));
        } else {
            eprintln!("skipped the IPv6 half: no ::1 here");
        }
        // An address shorter than its family's: none.
        for family in [libc::AF_INET, libc::AF_INET6] {
            let mut b = Batch::new();
            b.from.ss_family = family as libc::sa_family_t;
            b.from_len = 4;
            assert_eq!(b.sender(), None, "{family}");
            b.from_len = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            assert!(b.sender().is_some(), "{family}");
        }
    }

    #[test]
    fn an_empty_datagram_is_a_zero_length_and_a_long_one_is_cut_to_its_buffer() {
        let (tx, rx) = udp_pair();
        let mut out = Batch::new();
        let long = [7u8; 100];
        assert_eq!(out.send(tx.as_raw_fd(), &[&long, &[], b"abc"]).unwrap(), 3);
        let mut store = [0u8; 3 * 16];
        let mut bufs: Vec<&mut [u8]> = store.chunks_mut(16).collect();
        let mut lens = [99usize; 3];
        let mut inb = Batch::new();
        let mut got = 0;
        while got < 3 {
            got += inb
                .recv(rx.as_raw_fd(), &mut bufs[got..], &mut lens[got..], false)
                .unwrap();
        }
        assert_eq!(lens, [16, 0, 3]);
        assert_eq!(&bufs[2][..3], b"abc");
        assert_eq!(inb.sender(), None, "not asked for");
    }

    #[test]
    fn a_receive_waits_for_the_first_datagram_until_the_sockets_timeout() {
        let (_tx, rx) = udp_pair();
        rx.set_read_timeout(Some(Duration::from_millis(30)))
            .unwrap();
        let mut store = [0u8; 64];
        let mut bufs: Vec<&mut [u8]> = store.chunks_mut(32).collect();
        let mut lens = [0usize; 2];
        let t = std::time::Instant::now();
        let e = Batch::new()
            .recv(rx.as_raw_fd(), &mut bufs, &mut lens, false)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
        assert!(t.elapsed() >= Duration::from_millis(25));
        // Non-blocking: at once.
        rx.set_nonblocking(true).unwrap();
        let e = Batch::new()
            .recv(rx.as_raw_fd(), &mut bufs, &mut lens, false)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
    }

    #[test]
    fn a_full_non_blocking_socket_takes_a_prefix_then_would_block() {
        let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let msg = [1u8; 1000];
        let msgs = vec![&msg[..]; MAX_MESSAGES];
        let mut out = Batch::new();
        let first = out.send(a.as_raw_fd(), &msgs).unwrap();
        assert!(
            first > 0 && first < MAX_MESSAGES,
            "the queue holds some, not all: {first}"
        );
        let mut sent = first;
        let e = loop {
            match out.send(a.as_raw_fd(), &msgs) {
                Ok(n) => sent += n,
                Err(e) => break e,
            }
        };
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        // What went out can all be read back, in one call per MAX_MESSAGES at most.
        let mut store = vec![0u8; 1000 * 64];
        let mut bufs: Vec<&mut [u8]> = store.chunks_mut(1000).collect();
        let mut lens = [0usize; 64];
        let mut inb = Batch::new();
        b.set_nonblocking(true).unwrap();
        let mut got = 0;
        while let Ok(n) = inb.recv(b.as_raw_fd(), &mut bufs, &mut lens, false) {
            assert!(lens[..n].iter().all(|&l| l == 1000));
            got += n;
        }
        assert_eq!(got, sent);
        // An empty batch is no call at all.
        assert_eq!(out.send(-1, &[]).unwrap(), 0);
        assert_eq!(inb.recv(-1, &mut [], &mut [], false).unwrap(), 0);
    }

    #[test]
    fn a_closed_descriptor_is_an_error_not_a_count() {
        let e = Batch::new().send(-1, &[b"x"]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        let mut b = [0u8; 4];
        let e = Batch::new()
            .recv(-1, &mut [&mut b[..]], &mut [0], false)
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
    }
}

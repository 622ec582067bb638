//! Kernel timestamps (`--timestamps`): the `SO_TIMESTAMPING` option, the receive call
//! that returns the kernel's receive stamp (`SCM_TIMESTAMPING` on `recvmsg`), the read
//! of one transmit stamp from the socket's error queue (`MSG_ERRQUEUE`, with its
//! `struct sock_extended_err`), `CLOCK_REALTIME` (the clock of software stamps), and the
//! device's hardware timestamping capabilities (`SIOCETHTOOL` `ETHTOOL_GET_TS_INFO`).
//!
//! It does not decide what to stamp or how stamps are joined (`workload::pingpong`,
//! `workload::rate`, `measure::timestamps`). Every function that takes a `RawFd` needs it
//! open for the length of the call.
//!
//! See the kernel's Documentation/networking/timestamping.rst.

use std::io;
use std::os::fd::RawFd;

use nix::libc;

/// `SO_EE_ORIGIN_TIMESTAMPING` (linux/errqueue.h): an error-queue entry that is a stamp.
const SO_EE_ORIGIN_TIMESTAMPING: u8 = 4;
/// `SCM_TSTAMP_SND`: the stamp taken as the packet went to the device.
const SCM_TSTAMP_SND: u32 = 0;
/// `SOF_TIMESTAMPING_OPT_ID_TCP` (Linux 6.2): a TCP stamp's id counts from the next byte
/// written, not from the last acknowledged one.
const OPT_ID_TCP: u32 = 1 << 16;
/// `ETHTOOL_GET_TS_INFO` (linux/ethtool.h).
const ETHTOOL_GET_TS_INFO: u32 = 0x41;

/// The flags `--timestamps` sets: software stamps on receive and on transmit, reported
/// (`SOFTWARE`); transmit stamps carry an id (`OPT_ID`) and come without the packet
/// (`OPT_TSONLY`).
fn flags(stream: bool) -> u32 {
    let mut f = libc::SOF_TIMESTAMPING_SOFTWARE
        | libc::SOF_TIMESTAMPING_RX_SOFTWARE
        | libc::SOF_TIMESTAMPING_TX_SOFTWARE
        | libc::SOF_TIMESTAMPING_OPT_ID
        | libc::SOF_TIMESTAMPING_OPT_TSONLY;
    if stream {
        f |= OPT_ID_TCP;
    }
    f
}

/// Turn on software receive and transmit stamps on a socket. Transmit stamp ids count
/// from here: datagrams sent (UDP), or bytes written (TCP: the id is the offset of a
/// send's last byte).
///
/// # Errors
/// As `setsockopt(SO_TIMESTAMPING)`; EINVAL on a kernel older than 6.2 for a stream
/// socket (`OPT_ID_TCP`).
pub fn enable(fd: RawFd, stream: bool) -> io::Result<()> {
    let value = flags(stream) as libc::c_int;
    // SAFETY: the option value is a live c_int of the length given.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
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

/// `CLOCK_REALTIME` in nanoseconds since the epoch: the clock software stamps are in.
pub fn realtime_ns() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME) {
        Ok(t) => (t.tv_sec() as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec() as u64),
        Err(_) => 0,
    }
}

/// Wait until the kernel stamps received packets, at most `timeout`; whether it does.
///
/// Receive stamps depend on a kernel-wide switch (the `netstamp_needed` static key) that
/// the first socket asking for them turns on through a deferred work item; on a busy
/// machine that item can wait for a CPU for a long while, and every packet received
/// meanwhile has no stamp. A datagram sent to a stamped loopback socket until it comes
/// back stamped shows the switch is on (the sockets of the run keep it on).
pub fn await_receive_stamps(timeout: std::time::Duration) -> bool {
    let probe = || -> io::Result<bool> {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0")?;
        sock.connect(sock.local_addr()?)?;
        sock.set_read_timeout(Some(std::time::Duration::from_millis(100)))?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&sock);
        enable(fd, false)?;
        let since = std::time::Instant::now();
        let mut buf = [0u8; 8];
        loop {
            send(fd, b"probe", None)?;
            if recv_stamped(fd, &mut buf, None)?.1.is_some() {
                return Ok(true);
            }
            if since.elapsed() >= timeout {
                return Ok(false);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    };
    probe().unwrap_or(false)
}

/// A socket's own address and its peer's (`None` where it has none).
pub fn addresses(fd: RawFd) -> (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>) {
    // SAFETY: per the module's contract, `fd` is open for the length of the call, and the
    // borrow does not outlive it.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let s = socket2::SockRef::from(&fd);
    (
        s.local_addr().ok().and_then(|a| a.as_socket()),
        s.peer_addr().ok().and_then(|a| a.as_socket()),
    )
}

/// Where a datagram came from, to answer it (an unconnected UDP receiver).
#[derive(Clone, Copy)]
pub struct Peer {
    addr: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl Default for Peer {
    fn default() -> Self {
        Peer {
            // SAFETY: sockaddr_storage is plain bytes; all zeros is a valid (empty) value.
            addr: unsafe { std::mem::zeroed() },
            len: 0,
        }
    }
}

impl Peer {
    /// The address, if a receive reported one.
    pub fn addr(&self) -> Option<std::net::SocketAddr> {
        if self.len == 0 {
            return None;
        }
        // SAFETY: `addr` and `len` are what recvmsg wrote: a valid address of that length.
        unsafe { socket2::SockAddr::new(self.addr, self.len) }.as_socket()
    }
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Peer({} bytes)", self.len)
    }
}

/// Room for the control messages of one receive: an `scm_timestamping` (three
/// timespecs) and a `sock_extended_err` with its offender address, with headers.
const CMSG_ROOM: usize = 256;

/// A control-message buffer aligned for `cmsghdr`.
#[repr(C, align(8))]
struct CmsgBuf([u8; CMSG_ROOM]);

/// Walk the control messages of `msg`, calling `f(level, type, data)` for each.
fn each_cmsg(msg: &libc::msghdr, mut f: impl FnMut(libc::c_int, libc::c_int, &[u8])) {
    // SAFETY: `msg` was filled by recvmsg: msg_control/msg_controllen describe the
    // control messages the kernel wrote, which CMSG_FIRSTHDR/NXTHDR walk within bounds;
    // each message's data is `cmsg_len - CMSG_LEN(0)` bytes after its header.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            let hdr = &*c;
            let data_len = (hdr.cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
            let data = std::slice::from_raw_parts(libc::CMSG_DATA(c), data_len);
            f(hdr.cmsg_level, hdr.cmsg_type, data);
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
}

/// The software stamp (the first of `scm_timestamping`'s three timespecs) in ns.
fn software_stamp(data: &[u8]) -> Option<u64> {
    let sec = i64::from_ne_bytes(data.get(0..8)?.try_into().ok()?);
    let nsec = i64::from_ne_bytes(data.get(8..16)?.try_into().ok()?);
    let ns = u64::try_from(sec)
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(u64::try_from(nsec).ok()?)?;
    (ns > 0).then_some(ns)
}

/// Receive into `buf` with `recvmsg`, returning the length and the kernel's software
/// receive stamp (`None` if the packet carried none); the sender's address goes to
/// `from` when the socket reports one (datagrams).
///
/// # Errors
/// As `recvmsg` (EAGAIN on a receive timeout, EINTR).
pub fn recv_stamped(
    fd: RawFd,
    buf: &mut [u8],
    from: Option<&mut Peer>,
) -> io::Result<(usize, Option<u64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = CmsgBuf([0; CMSG_ROOM]);
    // SAFETY: msghdr is plain data; zero is a valid starting value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    let mut peer = Peer::default();
    msg.msg_name = std::ptr::from_mut(&mut peer.addr).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = CMSG_ROOM as _;
    // SAFETY: every pointer in `msg` points to live memory of the length given.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    each_cmsg(&msg, |level, kind, data| {
        if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPING {
            stamp = software_stamp(data);
        }
    });
    if let Some(from) = from {
        if msg.msg_namelen > 0 {
            peer.len = msg.msg_namelen;
            *from = peer;
        }
    }
    Ok((n as usize, stamp))
}

/// Send `buf` with one `sendto` (to `to` when given and known, as a datagram answer),
/// without SIGPIPE.
///
/// # Errors
/// As `sendto`.
pub fn send(fd: RawFd, buf: &[u8], to: Option<&Peer>) -> io::Result<usize> {
    let (addr, len) = match to.filter(|p| p.len > 0) {
        Some(p) => (std::ptr::from_ref(&p.addr).cast::<libc::sockaddr>(), p.len),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: `buf` is live for its length; `addr` is null or a live address of `len`.
    let n = unsafe {
        libc::sendto(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_NOSIGNAL,
            addr,
            len,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One transmit stamp from the error queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxStamp {
    /// Its id (`ee_data`): the datagram's number, or the offset of the send's last byte.
    pub id: u32,
    /// The software stamp, ns of `CLOCK_REALTIME`.
    pub ns: u64,
}

/// The fields of `struct sock_extended_err` a stamp needs: origin, info, data.
fn extended_err(data: &[u8]) -> Option<(u8, u32, u32)> {
    let origin = *data.get(4)?;
    let info = u32::from_ne_bytes(data.get(8..12)?.try_into().ok()?);
    let id = u32::from_ne_bytes(data.get(12..16)?.try_into().ok()?);
    Some((origin, info, id))
}

/// Read one entry of the socket's error queue without waiting: `Ok(None)` if it is
/// empty. An entry that is not a transmit stamp (`SCM_TSTAMP_SND`) comes back with
/// `ns` 0.
///
/// # Errors
/// As `recvmsg(MSG_ERRQUEUE)`, EAGAIN aside.
pub fn read_tx_stamp(fd: RawFd) -> io::Result<Option<TxStamp>> {
    let mut control = CmsgBuf([0; CMSG_ROOM]);
    // SAFETY: msghdr is plain data; zero is a valid starting value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = CMSG_ROOM as _;
    loop {
        // SAFETY: the only buffer in `msg` is `control`, live for its length.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if n >= 0 {
            break;
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(None),
            io::ErrorKind::Interrupted => {}
            _ => return Err(e),
        }
    }
    let (mut ns, mut err) = (None, None);
    each_cmsg(&msg, |level, kind, data| match (level, kind) {
        (libc::SOL_SOCKET, libc::SCM_TIMESTAMPING) => ns = software_stamp(data),
        (libc::SOL_IP, libc::IP_RECVERR) | (libc::SOL_IPV6, libc::IPV6_RECVERR) => {
            err = extended_err(data);
        }
        _ => {}
    });
    Ok(match err {
        Some((SO_EE_ORIGIN_TIMESTAMPING, SCM_TSTAMP_SND, id)) => Some(TxStamp {
            id,
            ns: ns.unwrap_or(0),
        }),
        Some((_, _, id)) => Some(TxStamp { id, ns: 0 }),
        None => Some(TxStamp { id: 0, ns: 0 }),
    })
}

/// `struct ethtool_ts_info` (linux/ethtool.h).
#[repr(C)]
#[derive(Default)]
struct EthtoolTsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

/// What a device says about its timestamping: the `SOF_TIMESTAMPING_*` capabilities it
/// reports and its PTP hardware clock (`/dev/ptpN`), if it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceStamps {
    /// Whether it can stamp in hardware on transmit and receive (raw hardware stamps).
    pub hardware: bool,
    /// Its PTP hardware clock's index, if any.
    pub phc_index: Option<u32>,
}

/// Ask `device` (`lo`, `eth0`, ...) what timestamps it offers; `None` if it cannot be
/// asked (no such device, a name too long).
pub fn device_stamps(device: &str) -> Option<DeviceStamps> {
    let mut info = EthtoolTsInfo {
        cmd: ETHTOOL_GET_TS_INFO,
        ..EthtoolTsInfo::default()
    };
    // SAFETY: an ethtool_ts_info, which ETHTOOL_GET_TS_INFO fills.
    if !unsafe { super::ethtool::request(device, std::ptr::from_mut(&mut info).cast()) } {
        return None;
    }
    let hw = libc::SOF_TIMESTAMPING_TX_HARDWARE
        | libc::SOF_TIMESTAMPING_RX_HARDWARE
        | libc::SOF_TIMESTAMPING_RAW_HARDWARE;
    Some(DeviceStamps {
        hardware: info.so_timestamping & hw == hw,
        phc_index: u32::try_from(info.phc_index).ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_udp_datagram_gets_a_transmit_and_a_receive_stamp_between_the_clock_reads() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        enable(tx.as_raw_fd(), false).unwrap();
        enable(rx.as_raw_fd(), false).unwrap();
        // The kernel turns receive stamps on through deferred work.
        assert!(await_receive_stamps(std::time::Duration::from_secs(2)));
        assert_eq!(read_tx_stamp(tx.as_raw_fd()).unwrap(), None, "nothing sent");
        for n in 0..3u32 {
            let before = realtime_ns();
            send(tx.as_raw_fd(), b"hello", None).unwrap();
            let mut buf = [0u8; 16];
            let mut from = Peer::default();
            let (len, rx_ns) = recv_stamped(rx.as_raw_fd(), &mut buf, Some(&mut from)).unwrap();
            let after = realtime_ns();
            assert_eq!(len, 5);
            assert_eq!(from.addr(), Some(tx.local_addr().unwrap()), "its sender");
            assert_eq!(
                addresses(tx.as_raw_fd()),
                (tx.local_addr().ok(), rx.local_addr().ok())
            );
            let stamp = read_tx_stamp(tx.as_raw_fd()).unwrap().expect("a stamp");
            assert_eq!(stamp.id, n, "ids count datagrams from 0");
            let rx_ns = rx_ns.expect("a receive stamp");
            assert!(before <= stamp.ns && stamp.ns <= rx_ns && rx_ns <= after);
            // Answer the sender through the address the receive reported.
            send(rx.as_raw_fd(), b"back", Some(&from)).unwrap();
            let (len, _) = recv_stamped(tx.as_raw_fd(), &mut buf, None).unwrap();
            assert_eq!(len, 4);
        }
    }

    #[test]
    fn receive_stamps_are_on_once_a_stamped_socket_asked_for_them() {
        assert!(await_receive_stamps(std::time::Duration::from_secs(2)));
    }

    #[test]
    fn a_tcp_stamp_id_is_the_offset_of_the_last_byte_written() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        enable(c.as_raw_fd(), true).unwrap();
        send(c.as_raw_fd(), &[1; 100], None).unwrap();
        send(c.as_raw_fd(), &[2; 50], None).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let ids: Vec<u32> = std::iter::from_fn(|| read_tx_stamp(c.as_raw_fd()).unwrap())
            .map(|s| s.id)
            .collect();
        assert_eq!(ids, [99, 149]);
    }

    #[test]
    fn loopback_has_no_hardware_stamps_and_a_missing_device_cannot_be_asked() {
        let lo = device_stamps("lo").expect("lo answers");
        assert!(!lo.hardware);
        assert_eq!(lo.phc_index, None);
        assert_eq!(device_stamps("no-such-dev0"), None);
        assert_eq!(device_stamps(""), None);
        assert_eq!(device_stamps("a-name-far-too-long-for-ifnamsiz"), None);
    }
}

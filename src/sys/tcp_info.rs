//! `TCP_INFO` (getsockopt(2), linux/tcp.h): what the kernel knows of one TCP connection,
//! behind a safe interface. It owns the one `getsockopt(TCP_INFO)` call of the crate and
//! the few fields sockbench reads; what the figures mean in a report is
//! `crate::measure::tcp_info`'s business.
//!
//! Every function takes a `RawFd` that must be open for the length of the call (the
//! callers pass the descriptor of a `Conn` they hold).

use std::io;
use std::os::fd::RawFd;

use nix::libc;

/// `TCP_CLOSE` (include/net/tcp_states.h): the connection is gone (reset, or both ends
/// done).
const TCP_CLOSE: u8 = 7;

/// The fields of one `TCP_INFO` reading that sockbench uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// `tcpi_state`: the connection's state (include/net/tcp_states.h).
    pub state: u8,
    /// `tcpi_total_retrans`: segments retransmitted since the connection opened (its
    /// handshake included).
    pub total_retrans: u32,
    /// `tcpi_snd_cwnd`: the congestion window, in segments.
    pub snd_cwnd: u32,
    /// `tcpi_snd_mss`: the current sending MSS, in bytes.
    pub snd_mss: u32,
    /// `tcpi_rtt`: the smoothed round-trip time, in microseconds.
    pub rtt_us: u32,
    /// `tcpi_rttvar`: its mean deviation, in microseconds.
    pub rttvar_us: u32,
    /// `tcpi_pmtu`: the path MTU, in bytes.
    pub pmtu: u32,
    /// `tcpi_unacked`: segments sent and not yet acknowledged (a FIN counts).
    pub unacked: u32,
    /// `tcpi_notsent_bytes`: bytes queued and not yet sent (a queued FIN counts one).
    pub notsent_bytes: u32,
}

impl Snapshot {
    /// Whether nothing this end queued is still unsent or unacknowledged (its end of
    /// data included, once shut down), or the connection is gone: the kernel will not
    /// retransmit anything more for it.
    pub fn settled(&self) -> bool {
        self.state == TCP_CLOSE || (self.unacked == 0 && self.notsent_bytes == 0)
    }
}

/// One `TCP_INFO` reading of a TCP socket.
///
/// # Errors
/// As getsockopt(2): `EOPNOTSUPP` or `ENOPROTOOPT` for a socket that is not TCP, `EBADF`
/// or `ENOTSOCK` for a descriptor that is not a socket.
pub fn read(fd: RawFd) -> io::Result<Snapshot> {
    let i = raw(fd)?;
    Ok(Snapshot {
        state: i.tcpi_state,
        total_retrans: i.tcpi_total_retrans,
        snd_cwnd: i.tcpi_snd_cwnd,
        snd_mss: i.tcpi_snd_mss,
        rtt_us: i.tcpi_rtt,
        rttvar_us: i.tcpi_rttvar,
        pmtu: i.tcpi_pmtu,
        unacked: i.tcpi_unacked,
        notsent_bytes: i.tcpi_notsent_bytes,
    })
}

/// `TCP_INFO`'s `tcpi_total_retrans`: segments this TCP socket has retransmitted since it
/// was opened.
///
/// # Errors
/// As getsockopt(2) (ENOPROTOOPT for a socket that is not TCP).
pub fn total_retransmits(fd: RawFd) -> io::Result<u32> {
    Ok(raw(fd)?.tcpi_total_retrans)
}

/// The whole `struct tcp_info`. A kernel older than the C library's struct fills less of
/// it: the rest stays zero.
pub(crate) fn raw(fd: RawFd) -> io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is writable for `len` bytes; the kernel writes at most `len`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            std::ptr::from_mut(&mut info).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn a_tcp_socket_reads_and_others_refuse() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[7u8; 5000]).unwrap();
        let mut got = [0u8; 5000];
        s.read_exact(&mut got).unwrap();
        let info = read(c.as_raw_fd()).unwrap();
        assert_eq!(info.state, 1, "established");
        assert!(info.snd_cwnd >= 1 && info.snd_mss > 0, "{info:?}");
        // Loopback's MTU is 65536; IPv4 caps a packet at 65535.
        assert!((1280..=65536).contains(&info.pmtu), "{info:?}");
        assert_eq!(info.total_retrans, 0);
        // Everything written has been read, so acknowledged: settled.
        let mut waited = 0;
        while !read(c.as_raw_fd()).unwrap().settled() && waited < 100 {
            std::thread::sleep(std::time::Duration::from_millis(10));
            waited += 1;
        }
        assert!(read(c.as_raw_fd()).unwrap().settled());
        let (u, _v) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(read(u.as_raw_fd()).is_err());
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(read(udp.as_raw_fd()).is_err());
    }

    #[test]
    fn a_closed_connection_is_settled_and_queued_data_is_not() {
        let gone = Snapshot {
            state: TCP_CLOSE,
            unacked: 3,
            ..Snapshot::default()
        };
        assert!(gone.settled());
        let queued = Snapshot {
            state: 4,
            notsent_bytes: 1,
            ..Snapshot::default()
        };
        assert!(!queued.settled());
        let in_flight = Snapshot {
            state: 4,
            unacked: 1,
            ..Snapshot::default()
        };
        assert!(!in_flight.settled());
        assert!(Snapshot {
            state: 5,
            ..Snapshot::default()
        }
        .settled());
    }
}

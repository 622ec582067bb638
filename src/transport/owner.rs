//! Who holds a socket of this host, by its address: the kernel's own lookup through
//! `sock_diag` netlink (`NETLINK_SOCK_DIAG`, the interface `ss` uses) gives the socket's
//! uid and inode, and `/proc/PID/fd` the processes that have it open. The trust checks of
//! a run's endpoints (`placement::trust`) ask it which process sits behind a peer's
//! control connection on this host, and whether an address that peer names for its data
//! is that process's.
//!
//! An exact lookup (`inet_diag_req_v2` without `NLM_F_DUMP`) finds one socket the way an
//! arriving packet would: a connection by its four addresses, else a listener (TCP) or a
//! bound socket (UDP) of the destination, wildcard binds included. It costs the same
//! however many sockets the host has (a busy host lists tens of thousands in
//! /proc/net/tcp, most in TIME-WAIT). Only this network namespace's sockets are seen.
//! A process whose `/proc/PID/fd` this one cannot read (another user's, without root) is
//! not found.

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use nix::sys::socket::{
    recv, sendto, socket, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType,
};

/// A socket's protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

/// One socket as the kernel describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// The TCP state (`LISTEN`, 1 established, ...); UDP sockets report 7 (unconnected) or
    /// 1 (connected).
    pub state: u8,
    /// The uid that created it.
    pub uid: u32,
    /// Its inode, as `/proc/PID/fd/N` names it (`socket:[inode]`).
    pub inode: u64,
    /// A listener's connections not yet accepted (`idiag_rqueue`); a connection's bytes
    /// not yet read.
    pub queued: u32,
}

/// The TCP state of a listening socket.
pub const LISTEN: u8 = 10;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_HDRLEN: usize = 16;
/// `inet_diag_req_v2`: family, protocol, ext, pad, states, then the socket id.
const REQ_LEN: usize = 56;
/// `inet_diag_msg`: family, state, timer, retrans, the socket id (48 bytes), expires,
/// rqueue, wqueue, uid, inode.
const MSG_LEN: usize = 72;

/// The socket of `proto` an arriving packet from `remote` to `local` would reach: the
/// connection between them, else (when `remote` is None, or there is no such
/// connection) a listener (TCP) or a bound socket (UDP) of `local`, wildcard binds
/// included. `None` if there is none.
///
/// # Errors
/// If the netlink socket cannot be used (a kernel without `sock_diag`).
pub fn lookup(
    proto: Proto,
    local: SocketAddr,
    remote: Option<SocketAddr>,
) -> io::Result<Option<Found>> {
    let remote = remote.unwrap_or_else(|| SocketAddr::new(unspecified(local.ip()), 0));
    // An IPv4 address may be held by an IPv6 socket (a dual-stack bind): ask both families.
    let mut families = vec![(local, remote)];
    if let (IpAddr::V4(l), IpAddr::V4(r)) = (local.ip(), remote.ip()) {
        let map = |ip: std::net::Ipv4Addr| -> IpAddr {
            if ip.is_unspecified() {
                IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            } else {
                IpAddr::V6(ip.to_ipv6_mapped())
            }
        };
        families.push((
            SocketAddr::new(map(l), local.port()),
            SocketAddr::new(map(r), remote.port()),
        ));
    }
    for (l, r) in families {
        if let Some(found) = lookup_one(proto, l, r)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

fn unspecified(like: IpAddr) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

/// The request for the socket with source `local` and destination `remote`, as the
/// kernel's `inet_diag_req_v2` lays it out (host order, except addresses and ports).
fn request(proto: Proto, local: SocketAddr, remote: SocketAddr) -> Vec<u8> {
    let mut m = Vec::with_capacity(NLMSG_HDRLEN + REQ_LEN);
    m.extend(((NLMSG_HDRLEN + REQ_LEN) as u32).to_ne_bytes());
    m.extend(SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend(NLM_F_REQUEST.to_ne_bytes());
    m.extend(1u32.to_ne_bytes()); // sequence
    m.extend(0u32.to_ne_bytes()); // port id: the kernel
    let family = match local {
        SocketAddr::V4(_) => nix::libc::AF_INET as u8,
        SocketAddr::V6(_) => nix::libc::AF_INET6 as u8,
    };
    let protocol = match proto {
        Proto::Tcp => nix::libc::IPPROTO_TCP as u8,
        Proto::Udp => nix::libc::IPPROTO_UDP as u8,
    };
    m.extend([family, protocol, 0, 0]);
    m.extend(u32::MAX.to_ne_bytes()); // every state
                                      // The kernel reads a TCP id as (source: the socket's end, destination: the peer's),
                                      // and a UDP id the other way round (udp_diag.c: "src and dst are swapped for
                                      // historical reasons").
    let (src, dst) = match proto {
        Proto::Tcp => (local, remote),
        Proto::Udp => (remote, local),
    };
    m.extend(src.port().to_be_bytes());
    m.extend(dst.port().to_be_bytes());
    m.extend(addr16(src.ip()));
    m.extend(addr16(dst.ip()));
    m.extend(0u32.to_ne_bytes()); // any interface
    m.extend(u32::MAX.to_ne_bytes()); // no cookie (INET_DIAG_NOCOOKIE)
    m.extend(u32::MAX.to_ne_bytes());
    m
}

/// An address in the id's 16 bytes: IPv4 in the first 4.
fn addr16(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&v4.octets());
            b
        }
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The answer to [`request`]: a socket, or none (`ENOENT`).
fn answer(buf: &[u8]) -> io::Result<Option<Found>> {
    let u16_at = |i: usize| buf.get(i..i + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let u32_at = |i: usize| {
        buf.get(i..i + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let short = || io::Error::new(io::ErrorKind::InvalidData, "a short sock_diag answer");
    match u16_at(4).ok_or_else(short)? {
        NLMSG_ERROR => {
            let code = u32_at(NLMSG_HDRLEN).ok_or_else(short)? as i32;
            match -code {
                0 => Ok(None),
                nix::libc::ENOENT => Ok(None),
                e => Err(io::Error::from_raw_os_error(e)),
            }
        }
        SOCK_DIAG_BY_FAMILY => {
            let m = NLMSG_HDRLEN;
            if buf.len() < m + MSG_LEN {
                return Err(short());
            }
            Ok(Some(Found {
                state: buf[m + 1],
                uid: u32_at(m + 64).ok_or_else(short)?,
                inode: u64::from(u32_at(m + 68).ok_or_else(short)?),
                queued: u32_at(m + 56).ok_or_else(short)?,
            }))
        }
        t => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("an unexpected netlink message type {t}"),
        )),
    }
}

fn lookup_one(proto: Proto, local: SocketAddr, remote: SocketAddr) -> io::Result<Option<Found>> {
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )?;
    let kernel = NetlinkAddr::new(0, 0);
    let req = request(proto, local, remote);
    sendto(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &req,
        &kernel,
        MsgFlags::empty(),
    )?;
    let mut buf = [0u8; 512];
    let n = recv(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &mut buf,
        MsgFlags::empty(),
    )?;
    answer(&buf[..n])
}

/// The processes of `candidates` (or of every process, when None) that have the socket
/// `inode` open.
pub fn holders(inode: u64, candidates: Option<&[i32]>) -> Vec<i32> {
    let want = format!("socket:[{inode}]");
    let pids: Vec<i32> = match candidates {
        Some(c) => c.to_vec(),
        None => std::fs::read_dir("/proc")
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default(),
    };
    pids.into_iter()
        .filter(|pid| {
            let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
                return false;
            };
            fds.flatten().any(|fd| {
                std::fs::read_link(fd.path())
                    .is_ok_and(|l| l.as_os_str().as_encoded_bytes() == want.as_bytes())
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream, UdpSocket};

    #[test]
    fn a_request_is_laid_out_as_the_kernel_reads_it() {
        let r = request(
            Proto::Tcp,
            "127.0.0.1:8080".parse().unwrap(),
            "10.1.2.3:443".parse().unwrap(),
        );
        assert_eq!(r.len(), 72);
        assert_eq!(u32::from_ne_bytes(r[0..4].try_into().unwrap()), 72);
        assert_eq!(u16::from_ne_bytes([r[4], r[5]]), 20);
        assert_eq!(r[16..18], [nix::libc::AF_INET as u8, 6]);
        assert_eq!(r[24..26], 8080u16.to_be_bytes());
        assert_eq!(r[26..28], 443u16.to_be_bytes());
        assert_eq!(r[28..32], [127, 0, 0, 1]);
        assert_eq!(r[44..48], [10, 1, 2, 3]);
        assert_eq!(r[64..72], [0xff; 8]);
        let r6 = request(
            Proto::Udp,
            "[::1]:53".parse().unwrap(),
            "[::]:0".parse().unwrap(),
        );
        assert_eq!(r6[16..18], [nix::libc::AF_INET6 as u8, 17]);
        // UDP's id is read the other way round: the socket's own end is the destination.
        assert_eq!(r6[26..28], 53u16.to_be_bytes());
        assert_eq!(r6[44..60], Ipv6Addr::LOCALHOST.octets());
    }

    #[test]
    fn an_answer_reads_state_uid_and_inode_or_says_none() {
        let mut m = vec![0u8; NLMSG_HDRLEN + MSG_LEN];
        m[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m[NLMSG_HDRLEN + 1] = LISTEN;
        m[NLMSG_HDRLEN + 64..NLMSG_HDRLEN + 68].copy_from_slice(&1000u32.to_ne_bytes());
        m[NLMSG_HDRLEN + 68..NLMSG_HDRLEN + 72].copy_from_slice(&4242u32.to_ne_bytes());
        m[NLMSG_HDRLEN + 56..NLMSG_HDRLEN + 60].copy_from_slice(&3u32.to_ne_bytes());
        let f = answer(&m).unwrap().unwrap();
        assert_eq!((f.state, f.uid, f.inode, f.queued), (LISTEN, 1000, 4242, 3));
        assert!(answer(&m[..NLMSG_HDRLEN + 40]).is_err());
        let mut e = vec![0u8; NLMSG_HDRLEN + 4];
        e[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        e[16..20].copy_from_slice(&(-nix::libc::ENOENT).to_ne_bytes());
        assert_eq!(answer(&e).unwrap(), None);
        e[16..20].copy_from_slice(&(-nix::libc::EPERM).to_ne_bytes());
        assert_eq!(
            answer(&e).unwrap_err().raw_os_error(),
            Some(nix::libc::EPERM)
        );
    }

    /// The inode of this process's socket `fd`, from /proc/self/fd.
    fn inode_of(fd: &impl std::os::fd::AsRawFd) -> u64 {
        let l = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        let l = l.to_str().unwrap();
        l["socket:[".len()..l.len() - 1].parse().unwrap()
    }

    #[test]
    fn this_processs_own_sockets_are_found_with_its_uid_and_pid() {
        let me = std::process::id() as i32;
        let uid = nix::unistd::geteuid().as_raw();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        let found = lookup(Proto::Tcp, at, None).unwrap().unwrap();
        assert_eq!((found.state, found.uid), (LISTEN, uid));
        assert_eq!(found.inode, inode_of(&l));
        assert_eq!(holders(found.inode, Some(&[me, 1])), [me]);
        assert!(holders(found.inode, None).contains(&me));
        // Both ends of a connection, each by its own addresses.
        assert_eq!(found.queued, 0);
        let c = TcpStream::connect(at).unwrap();
        // Connected, not yet accepted: it waits in the listener's queue.
        assert_eq!(lookup(Proto::Tcp, at, None).unwrap().unwrap().queued, 1);
        let (s, _) = l.accept().unwrap();
        assert_eq!(lookup(Proto::Tcp, at, None).unwrap().unwrap().queued, 0);
        let from = c.local_addr().unwrap();
        let client_end = lookup(Proto::Tcp, from, Some(at)).unwrap().unwrap();
        assert_eq!(client_end.inode, inode_of(&c));
        assert_eq!(client_end.state, 1);
        let server_end = lookup(Proto::Tcp, at, Some(from)).unwrap().unwrap();
        assert_eq!(server_end.inode, inode_of(&s));
        // A port nobody listens on has no owner.
        drop((c, s, l));
        assert_eq!(lookup(Proto::Tcp, at, None).unwrap(), None);
        // UDP: a bound socket, and a wildcard one found by a specific address.
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        let found = lookup(Proto::Udp, u.local_addr().unwrap(), None)
            .unwrap()
            .unwrap();
        assert_eq!(found.inode, inode_of(&u));
        let any = UdpSocket::bind("0.0.0.0:0").unwrap();
        let port = any.local_addr().unwrap().port();
        let found = lookup(Proto::Udp, SocketAddr::from(([127, 0, 0, 1], port)), None)
            .unwrap()
            .unwrap();
        assert_eq!(found.inode, inode_of(&any));
        assert_eq!(
            lookup(Proto::Tcp, u.local_addr().unwrap(), None).unwrap(),
            None
        );
    }

    #[test]
    fn a_dual_stack_listener_is_found_by_its_ipv4_address() {
        let Ok(l) = TcpListener::bind("[::]:0") else {
            eprintln!("skipped: no IPv6 here");
            return;
        };
        let port = l.local_addr().unwrap().port();
        let at = SocketAddr::from(([127, 0, 0, 1], port));
        let Ok(c) = TcpStream::connect(at) else {
            eprintln!("skipped: the IPv6 listener takes no IPv4 (bindv6only)");
            return;
        };
        assert_eq!(
            lookup(Proto::Tcp, at, None).unwrap().unwrap().inode,
            inode_of(&l)
        );
        let (s, _) = l.accept().unwrap();
        let from = c.local_addr().unwrap();
        assert_eq!(
            lookup(Proto::Tcp, at, Some(from)).unwrap().unwrap().inode,
            inode_of(&s)
        );
    }
}

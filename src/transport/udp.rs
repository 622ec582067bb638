//! UDP over IPv4 or IPv6: the receiver binds, the sender connects its socket to it.
//!
//! The end of data is an empty datagram, which can itself be lost: the workload repeats it
//! until the receiver confirms, and the receiver also stops after a quiet period once the
//! sender has said it is done (see `workload::stream`).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use anyhow::Context;
use socket2::{Domain, Protocol, Socket, Type};

use super::tcp::{bind_addr, bind_error};
use super::{
    apply_buffers, Conn, Connected, Endpoint, LinkInfo, Listener, SocketConn, TransportOptions,
};

/// A bound UDP socket waiting for its sender.
struct UdpListener {
    sock: Socket,
    endpoint: Endpoint,
    /// `--connect` was given: datagrams may arrive through another local address, so the
    /// receiver stays unconnected and answers whoever wrote last.
    answer_whoever_wrote: bool,
    /// Bound to a port other runs share (see [`listen_shared`]).
    shared: bool,
}

/// The receiving half: bind `--bind` (or the loopback, any port).
pub fn listen(ipv6: bool, opts: &TransportOptions) -> anyhow::Result<Box<dyn Listener>> {
    open(ipv6, opts, false)
}

/// The receiving half on a port other runs share (a server's `--data-port`): bound with
/// `SO_REUSEADDR` and `SO_REUSEPORT`, so that every run's sockets can hold the one port.
/// Its [`Listener::accept`] must be given the peer's endpoint: Linux hands a datagram to
/// the socket of the port's group that is connected to its sender, so connected sockets
/// keep concurrent runs apart, while an unconnected one would take anyone's.
///
/// # Errors
/// As [`listen`].
pub fn listen_shared(ipv6: bool, opts: &TransportOptions) -> anyhow::Result<Box<dyn Listener>> {
    open(ipv6, opts, true)
}

fn open(ipv6: bool, opts: &TransportOptions, shared: bool) -> anyhow::Result<Box<dyn Listener>> {
    let domain = if ipv6 { Domain::IPV6 } else { Domain::IPV4 };
    let addr = bind_addr(ipv6, opts);
    let sock = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))
        .context("cannot create a UDP socket")?;
    apply_buffers(&sock, opts).context("cannot set socket buffer sizes")?;
    if shared {
        sock.set_reuse_address(true)
            .and_then(|()| sock.set_reuse_port(true))
            .context("cannot share the UDP port (SO_REUSEADDR, SO_REUSEPORT)")?;
    }
    if let Err(e) = sock.bind(&addr.into()) {
        let msg = bind_error("UDP", addr, &e);
        return Err(anyhow::Error::new(e).context(msg));
    }
    let local = sock
        .local_addr()?
        .as_socket()
        .context("UDP socket has no address")?;
    Ok(Box::new(UdpListener {
        sock,
        endpoint: Endpoint::Address(local),
        answer_whoever_wrote: opts.connect.is_some(),
        shared,
    }))
}

impl Listener for UdpListener {
    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// On the default path the receiver connects to its sender, so it can answer with
    /// plain writes (the io-uring engine submits read/write).
    fn accept(
        self: Box<Self>,
        peer: Option<&Endpoint>,
    ) -> anyhow::Result<(Box<dyn Conn>, LinkInfo)> {
        let mut answer = None;
        if let (false, Some(Endpoint::Address(from))) = (self.answer_whoever_wrote, peer) {
            self.sock
                .connect(&(*from).into())
                .context("cannot connect the UDP receiver to its sender")?;
            answer = Some(*from);
            if self.shared {
                // A datagram from anyone that came before the connect is still queued:
                // the sender has not started yet, so everything queued is a stranger's.
                drain(&self.sock).context("cannot empty the UDP receiver's queue")?;
            }
        }
        let info = LinkInfo {
            rcvbuf_bytes: self.sock.recv_buffer_size().ok().map(|n| n as u64),
            ..LinkInfo::default()
        };
        Ok((
            Box::new(UdpReceiver {
                sock: self.sock.into(),
                connected: answer.is_some(),
                peer: answer,
                batch: crate::sys::mmsg::Batch::new(),
            }),
            info,
        ))
    }
}

/// Throw away every datagram queued on `sock`.
fn drain(sock: &Socket) -> io::Result<()> {
    sock.set_nonblocking(true)?;
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    // Bounded: a queue holds at most a receive buffer's worth of datagrams.
    for _ in 0..1 << 16 {
        match sock.recv(&mut buf) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // An ICMP error queued for an earlier stranger: nothing of this run's.
            Err(_) => {}
        }
    }
    sock.set_nonblocking(false)
}

/// The sending half: a UDP socket connected to `endpoint` (or `--connect` at its port).
pub fn connect(endpoint: SocketAddr, opts: &TransportOptions) -> anyhow::Result<Connected> {
    let target = SocketAddr::new(opts.connect.unwrap_or(endpoint.ip()), endpoint.port());
    let domain = if target.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    };
    let sender = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))
        .context("cannot create a UDP socket")?;
    apply_buffers(&sender, opts).context("cannot set socket buffer sizes")?;
    sender
        .connect(&target.into())
        .with_context(|| format!("cannot connect a UDP socket to {target}: check --connect"))?;
    let local = sender.local_addr()?.as_socket().map(Endpoint::Address);
    Ok(Connected {
        conn: SocketConn::boxed(sender, true),
        local,
    })
}

/// The receiving end, answering whoever sent the last datagram (its sender, when
/// connected).
struct UdpReceiver {
    sock: UdpSocket,
    peer: Option<SocketAddr>,
    /// Connected to its sender: `peer` never changes.
    connected: bool,
    /// The `recvmmsg` arrays (`--batch`).
    batch: crate::sys::mmsg::Batch,
}

impl Conn for UdpReceiver {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        let peer = self.peer.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotConnected,
                "no datagram received yet, so no peer to answer",
            )
        })?;
        self.sock.send_to(buf, peer)
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (n, peer) = self.sock.recv_from(buf)?;
        self.peer = Some(peer);
        Ok(n)
    }
    /// One `recvmmsg`; unconnected, the last datagram's sender is the one answered.
    fn recv_batch(&mut self, bufs: &mut [&mut [u8]], lens: &mut [usize]) -> io::Result<usize> {
        let fd = self.sock.as_raw_fd();
        let got = self.batch.recv(fd, bufs, lens, !self.connected)?;
        if !self.connected {
            self.peer = self.batch.sender().or(self.peer);
        }
        Ok(got)
    }
    fn finish(&mut self) -> io::Result<()> {
        match self.peer {
            Some(peer) => self.sock.send_to(&[], peer).map(drop),
            None => Ok(()),
        }
    }
    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(timeout)
    }
    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.sock.as_raw_fd())
    }
    fn waker(&self) -> Option<super::Waker> {
        // As a connected socket's: a shut-down duplicate wakes a receive blocked on it
        // (the kernel wakes it, and every later one returns at once, connected or not),
        // and no other socket can get its number while the waker holds it.
        let dup = self.sock.try_clone().ok()?;
        Some(Box::new(move || {
            let _ = socket2::SockRef::from(&dup).shutdown(std::net::Shutdown::Both);
        }))
    }
    fn socket_buffers(&self) -> (Option<u64>, Option<u64>) {
        let sock = socket2::SockRef::from(&self.sock);
        (
            sock.send_buffer_size().ok().map(|n| n as u64),
            sock.recv_buffer_size().ok().map(|n| n as u64),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    /// Two runs' receivers on one port, each connected to its own sender: each gets only
    /// its sender's datagrams, and a stranger's datagram queued before the connect is gone.
    #[test]
    fn receivers_sharing_a_port_get_only_their_own_senders_datagrams() {
        let free = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let opts = TransportOptions {
            bind: Some(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port)),
            ..TransportOptions::default()
        };
        let (la, lb) = (
            listen_shared(false, &opts).unwrap(),
            listen_shared(false, &opts).unwrap(),
        );
        assert_eq!(la.endpoint(), lb.endpoint());
        let stranger = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        for _ in 0..4 {
            stranger.send_to(b"stray", ("127.0.0.1", port)).unwrap();
        }
        let Endpoint::Address(to) = la.endpoint().clone() else {
            panic!("an address")
        };
        let mut sa = connect(to, &opts).unwrap();
        let mut sb = connect(to, &opts).unwrap();
        let (mut ra, _) = la.accept(sa.local.as_ref()).unwrap();
        let (mut rb, _) = lb.accept(sb.local.as_ref()).unwrap();
        for _ in 0..20 {
            sa.conn.send(b"a").unwrap();
            sb.conn.send(b"b").unwrap();
        }
        for (r, want) in [(&mut ra, b'a'), (&mut rb, b'b')] {
            r.set_recv_timeout(Some(Duration::from_secs(2))).unwrap();
            for _ in 0..20 {
                let mut buf = [0u8; 8];
                let n = r.recv(&mut buf).unwrap();
                assert_eq!(&buf[..n], &[want], "each receiver gets its own sender's");
            }
            r.set_recv_timeout(Some(Duration::from_millis(50))).unwrap();
            assert!(r.recv(&mut [0u8; 8]).is_err(), "and nothing else");
        }
    }
}

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
use super::{apply_buffers, granted_buffers, Conn, Pair, SocketConn, TransportOptions};

/// Open a connected UDP pair.
pub fn pair(ipv6: bool, opts: &TransportOptions) -> anyhow::Result<Pair> {
    let domain = if ipv6 { Domain::IPV6 } else { Domain::IPV4 };
    let addr = bind_addr(ipv6, opts);
    let receiver = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))
        .context("cannot create a UDP socket")?;
    apply_buffers(&receiver, opts).context("cannot set socket buffer sizes")?;
    if let Err(e) = receiver.bind(&addr.into()) {
        let msg = bind_error("UDP", addr, &e);
        return Err(anyhow::Error::new(e).context(msg));
    }
    let local = receiver
        .local_addr()?
        .as_socket()
        .context("UDP socket has no address")?;
    let target = SocketAddr::new(opts.connect.unwrap_or(local.ip()), local.port());
    let sender = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))
        .context("cannot create a UDP socket")?;
    apply_buffers(&sender, opts).context("cannot set socket buffer sizes")?;
    sender
        .connect(&target.into())
        .with_context(|| format!("cannot connect a UDP socket to {target}: check --connect"))?;
    let mut info = granted_buffers(&sender, &receiver);
    info.endpoint = Some(target.to_string());
    // On the default path the receiver is connected to its sender, so it can answer with
    // plain writes (the io-uring engine submits read/write). With --connect the datagrams
    // may arrive through another local address, so it stays unconnected and answers
    // whoever wrote last.
    let mut peer = None;
    if opts.connect.is_none() {
        let from = sender.local_addr()?;
        receiver
            .connect(&from)
            .context("cannot connect the UDP receiver to its sender")?;
        peer = from.as_socket();
    }
    Ok(Pair {
        sender: SocketConn::boxed(sender, true),
        receiver: Box::new(UdpReceiver {
            sock: receiver.into(),
            peer,
        }),
        info,
    })
}

/// The receiving end, answering whoever sent the last datagram (its sender, when
/// connected).
struct UdpReceiver {
    sock: UdpSocket,
    peer: Option<SocketAddr>,
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
    fn socket_buffers(&self) -> (Option<u64>, Option<u64>) {
        let sock = socket2::SockRef::from(&self.sock);
        (
            sock.send_buffer_size().ok().map(|n| n as u64),
            sock.recv_buffer_size().ok().map(|n| n as u64),
        )
    }
}

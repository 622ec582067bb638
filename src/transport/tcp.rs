//! TCP over IPv4 or IPv6: the receiver listens, the sender connects.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use anyhow::Context;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::{
    accept_from, apply_buffers, Conn, Connected, Endpoint, LinkInfo, Listener, SocketConn,
    TransportOptions,
};

/// The address the receiver binds: `--bind`, or the loopback of the family on port 0.
pub(super) fn bind_addr(ipv6: bool, opts: &TransportOptions) -> SocketAddr {
    opts.bind.unwrap_or_else(|| {
        let ip: IpAddr = if ipv6 {
            Ipv6Addr::LOCALHOST.into()
        } else {
            Ipv4Addr::LOCALHOST.into()
        };
        SocketAddr::new(ip, 0)
    })
}

/// What to do when connecting fails with EADDRNOTAVAIL: no local port is free.
pub(super) const OUT_OF_PORTS: &str =
    "out of local ports (closed connections wait in TIME_WAIT, see \
     net.ipv4.ip_local_port_range): use --linger0 with connect, wait a minute, or allow reuse with \
     `sysctl -w net.ipv4.tcp_tw_reuse=1`";

/// Explain a bind failure in terms the user can act on.
pub(super) fn bind_error(proto: &str, addr: SocketAddr, err: &std::io::Error) -> String {
    match err.kind() {
        // Port 0 asks the kernel for any free port: in use means none is left.
        std::io::ErrorKind::AddrInUse if addr.port() == 0 => format!(
            "cannot bind {proto} to {}: no free local port is left (the range is \
             net.ipv4.ip_local_port_range; closed TCP connections hold theirs in TIME_WAIT): wait a \
             minute, or widen the range with `sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"`",
            addr.ip()
        ),
        std::io::ErrorKind::AddrInUse => format!(
            "{proto} port {} on {} is already in use by another socket: pick a free port with \
             --bind {}:PORT, or port 0 to let the kernel choose",
            addr.port(),
            addr.ip(),
            fmt_ip(addr.ip())
        ),
        std::io::ErrorKind::AddrNotAvailable => format!(
            "cannot bind {proto} to {addr}: that address is not on any local interface \
             (see `ip addr`)"
        ),
        std::io::ErrorKind::PermissionDenied => {
            format!("cannot bind {proto} to {addr}: permission denied (ports below 1024 need root)")
        }
        _ => format!("cannot bind {proto} to {addr}"),
    }
}

fn fmt_ip(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => format!("[{v6}]"),
        IpAddr::V4(v4) => v4.to_string(),
    }
}

/// A bound, listening TCP socket.
struct TcpListener {
    sock: Socket,
    endpoint: Endpoint,
    nodelay: bool,
    wait: std::time::Duration,
    token: Option<Vec<u8>>,
}

/// The receiving half: bind `--bind` (or the loopback, any port) and listen.
pub fn listen(ipv6: bool, opts: &TransportOptions) -> anyhow::Result<Box<dyn Listener>> {
    let domain = if ipv6 { Domain::IPV6 } else { Domain::IPV4 };
    let addr = bind_addr(ipv6, opts);
    let sock = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))
        .context("cannot create a TCP socket")?;
    // A fixed --bind port must be free: no SO_REUSEADDR, so a port in use is an error.
    apply_buffers(&sock, opts).context("cannot set socket buffer sizes")?;
    if let Err(e) = sock.bind(&addr.into()) {
        let msg = bind_error("TCP", addr, &e);
        return Err(anyhow::Error::new(e).context(msg));
    }
    sock.listen(16).context("cannot listen on the TCP socket")?;
    let local = sock
        .local_addr()?
        .as_socket()
        .context("TCP socket has no address")?;
    Ok(Box::new(TcpListener {
        sock,
        endpoint: Endpoint::Address(local),
        nodelay: opts.nodelay,
        wait: opts.accept_wait.unwrap_or(super::ACCEPT_WAIT),
        token: opts.token.clone(),
    }))
}

/// The one listening socket a server with `--data-port` keeps for its whole life, at
/// `addr` (every address of both families when it is `::`, as the control listener).
///
/// # Errors
/// The port is in use or not allowed, with what to try next.
pub fn listen_shared(addr: SocketAddr) -> anyhow::Result<Socket> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .context("cannot create a TCP socket")?;
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        sock.set_only_v6(false)
            .context("cannot take IPv4 on the IPv6 socket")?;
    }
    sock.set_reuse_address(true)
        .context("cannot set SO_REUSEADDR")?;
    if let Err(e) = sock.bind(&addr.into()) {
        let msg = bind_error("TCP", addr, &e);
        return Err(anyhow::Error::new(e).context(msg));
    }
    sock.listen(128)
        .context("cannot listen on the TCP socket")?;
    Ok(sock)
}

/// A connection accepted on a shared listener (see [`listen_shared`]), set up as a
/// run's own listener would have: the run's buffers and `TCP_NODELAY`. (A buffer set now
/// cannot change the window scale the handshake agreed on, so a large `--rcvbuf` may
/// be used less fully than on a listener of its own.)
///
/// # Errors
/// A socket option is refused.
pub fn adopt(sock: Socket, opts: &TransportOptions) -> anyhow::Result<Box<dyn Conn>> {
    apply_buffers(&sock, opts).context("cannot set socket buffer sizes")?;
    sock.set_nodelay(opts.nodelay)
        .context("cannot set TCP_NODELAY")?;
    Ok(SocketConn::boxed(sock, false))
}

impl Listener for TcpListener {
    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn accept(
        self: Box<Self>,
        peer: Option<&Endpoint>,
    ) -> anyhow::Result<(Box<dyn Conn>, LinkInfo)> {
        let from = match peer {
            Some(Endpoint::Address(a)) => Some(*a),
            _ => None,
        };
        let receiver = accept_from(
            &self.sock,
            from,
            &format!("TCP {}", self.endpoint),
            self.wait,
            self.token.as_deref(),
        )?;
        receiver
            .set_nodelay(self.nodelay)
            .context("cannot set TCP_NODELAY")?;
        let info = LinkInfo {
            rcvbuf_bytes: receiver.recv_buffer_size().ok().map(|n| n as u64),
            ..LinkInfo::default()
        };
        Ok((SocketConn::boxed(receiver, false), info))
    }
}

/// The sending half: connect to `endpoint` (or to `--connect` at its port).
pub fn connect(endpoint: SocketAddr, opts: &TransportOptions) -> anyhow::Result<Connected> {
    let target = SocketAddr::new(opts.connect.unwrap_or(endpoint.ip()), endpoint.port());
    let domain = if target.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    };
    let sender = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))
        .context("cannot create a TCP socket")?;
    apply_buffers(&sender, opts).context("cannot set socket buffer sizes")?;
    super::connect_with_deadline(
        &sender,
        &SockAddr::from(target),
        std::time::Duration::from_secs(5),
    )
    .map_err(|e| {
        let hint = if e.raw_os_error() == Some(nix::libc::EADDRNOTAVAIL) {
            OUT_OF_PORTS
        } else {
            "check --connect and that the address is reachable"
        };
        anyhow::Error::new(e).context(format!("cannot connect to {target}: {hint}"))
    })?;
    sender
        .set_nodelay(opts.nodelay)
        .context("cannot set TCP_NODELAY")?;
    let local = sender.local_addr()?.as_socket().map(Endpoint::Address);
    Ok(Connected {
        conn: SocketConn::boxed(sender, false),
        local,
    })
}

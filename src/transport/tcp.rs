//! TCP over IPv4 or IPv6: the receiver listens, the sender connects.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use anyhow::Context;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::{accept_from, apply_buffers, granted_buffers, Pair, SocketConn, TransportOptions};

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

/// Open a connected TCP pair.
pub fn pair(ipv6: bool, opts: &TransportOptions) -> anyhow::Result<Pair> {
    let domain = if ipv6 { Domain::IPV6 } else { Domain::IPV4 };
    let addr = bind_addr(ipv6, opts);
    let listener = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))
        .context("cannot create a TCP socket")?;
    // A fixed --bind port must be free: no SO_REUSEADDR, so a port in use is an error.
    apply_buffers(&listener, opts).context("cannot set socket buffer sizes")?;
    if let Err(e) = listener.bind(&addr.into()) {
        let msg = bind_error("TCP", addr, &e);
        return Err(anyhow::Error::new(e).context(msg));
    }
    listener
        .listen(16)
        .context("cannot listen on the TCP socket")?;
    let local = listener
        .local_addr()?
        .as_socket()
        .context("TCP socket has no address")?;
    let target = SocketAddr::new(opts.connect.unwrap_or(local.ip()), local.port());

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
    let from = sender.local_addr()?.as_socket();
    let receiver = accept_from(&listener, from, &format!("TCP {local}"))?;
    for s in [&sender, &receiver] {
        s.set_nodelay(opts.nodelay)
            .context("cannot set TCP_NODELAY")?;
    }
    let mut info = granted_buffers(&sender, &receiver);
    info.mss_bytes = sender.mss().ok().map(u64::from);
    info.endpoint = Some(target.to_string());
    Ok(Pair {
        sender: SocketConn::boxed(sender, false),
        receiver: SocketConn::boxed(receiver, false),
        info,
    })
}

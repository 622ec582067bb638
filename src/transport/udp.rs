//! UDP over IPv4 or IPv6: the receiver binds, the sender connects its socket to it.
//!
//! The end of data is an empty datagram, which can itself be lost: the workload repeats it
//! until the receiver confirms, and the receiver also stops after a quiet period once the
//! sender has said it is done (see `workload::stream`).

use std::net::SocketAddr;

use anyhow::Context;
use socket2::{Domain, Protocol, Socket, Type};

use super::tcp::{bind_addr, bind_error};
use super::{apply_buffers, granted_buffers, Pair, SocketConn, TransportOptions};

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
    Ok(Pair {
        sender: SocketConn::boxed(sender, true),
        receiver: SocketConn::boxed(receiver, true),
        info,
    })
}

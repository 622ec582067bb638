//! Which device an IP connection's data goes through, and whether an address is this
//! host's: on one host every packet to one of its own addresses is looped back through
//! `lo`, whatever the address; between hosts it leaves through the device that holds the
//! local address.

use std::net::IpAddr;

use super::Conn;

/// Whether `ip` is one of this host's addresses (a loopback, or an interface's).
pub fn is_local_address(ip: IpAddr) -> bool {
    let ip = canonical_ip(ip);
    ip.is_loopback() || device_of(ip).is_some()
}

/// The IP address in canonical form (an IPv4-mapped IPv6 address as IPv4).
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The interface that holds `ip`, if one does.
fn device_of(ip: IpAddr) -> Option<String> {
    nix::ifaddrs::getifaddrs().ok()?.find_map(|a| {
        let s = a.address?;
        let own = s
            .as_sockaddr_in()
            .map(|v4| IpAddr::V4(v4.ip()))
            .or_else(|| {
                s.as_sockaddr_in6()
                    .map(|v6| canonical_ip(IpAddr::V6(v6.ip())))
            })?;
        (own == ip).then_some(a.interface_name)
    })
}

/// The route data between `local` and `peer` takes: `lo` when the peer is this host
/// (the kernel loops every packet to one of its own addresses back, whatever the
/// address), else the device that holds `local`; with that device's MTU.
pub fn route_between(local: IpAddr, peer: IpAddr) -> Option<(String, Option<u64>)> {
    let dev = if is_local_address(peer) {
        "lo".to_string()
    } else {
        device_of(canonical_ip(local))?
    };
    let mtu = std::fs::read_to_string(format!("/sys/class/net/{dev}/mtu"))
        .ok()
        .and_then(|m| m.trim().parse().ok());
    Some((dev, mtu))
}

/// The route of a connected IP socket end (None for other ends).
pub fn route_of(conn: &dyn Conn) -> Option<(String, Option<u64>)> {
    let fd = conn.send_fd()?;
    let ip = |a: nix::sys::socket::SockaddrStorage| {
        a.as_sockaddr_in()
            .map(|v4| IpAddr::V4(v4.ip()))
            .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
    };
    let local = ip(nix::sys::socket::getsockname(fd).ok()?)?;
    let peer = ip(nix::sys::socket::getpeername(fd).ok()?)?;
    route_between(local, peer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connected_tcp_end_routes_through_lo_and_a_unix_end_has_no_route() {
        use crate::transport::{open_pair, TransportKind, TransportOptions};
        let opts = TransportOptions {
            message_bytes: 64,
            ..TransportOptions::default()
        };
        let tcp = open_pair(TransportKind::Tcp, &opts, 0).unwrap();
        let (dev, mtu) = route_of(tcp.sender.as_ref()).unwrap();
        assert_eq!(dev, "lo");
        let want: Option<u64> = std::fs::read_to_string("/sys/class/net/lo/mtu")
            .ok()
            .and_then(|m| m.trim().parse().ok());
        assert_eq!(mtu, want);
        assert!(want.is_some_and(|m| m > 1));
        let unix = open_pair(TransportKind::Unix, &opts, 0).unwrap();
        assert_eq!(route_of(unix.sender.as_ref()), None);
    }

    #[test]
    fn loopback_and_own_addresses_are_local_and_route_through_lo() {
        assert!(is_local_address("127.0.0.1".parse().unwrap()));
        assert!(is_local_address("::1".parse().unwrap()));
        assert!(is_local_address("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_local_address("192.0.2.200".parse().unwrap()));
        let lo = "127.0.0.1".parse().unwrap();
        let (dev, mtu) = route_between(lo, lo).unwrap();
        assert_eq!(dev, "lo");
        let want: u64 = std::fs::read_to_string("/sys/class/net/lo/mtu")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(mtu, Some(want));
        assert_eq!(
            canonical_ip("::ffff:10.1.2.3".parse().unwrap()),
            "10.1.2.3".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            canonical_ip("::1".parse().unwrap()),
            "::1".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn an_interface_address_of_this_host_still_routes_through_lo() {
        // Any non-loopback address this host holds: traffic to it never leaves the host.
        let own = nix::ifaddrs::getifaddrs().unwrap().find_map(|a| {
            let ip = IpAddr::V4(a.address?.as_sockaddr_in()?.ip());
            (!ip.is_loopback()).then_some(ip)
        });
        let Some(own) = own else {
            eprintln!("skipped: this host has no non-loopback IPv4 address");
            return;
        };
        assert!(is_local_address(own));
        assert_eq!(route_between(own, own).unwrap().0, "lo");
    }
}

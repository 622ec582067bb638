//! Listeners and dialers for the `connect` workload, which makes a fresh connection per
//! exchange instead of using one opened pair: the receiving side accepts, the sending side
//! dials. Only connection-oriented transports have them (tcp, tcp6, unix, unix-seqpacket).
//!
//! A Unix listener's socket file is removed as soon as it is bound: the listener keeps an
//! `O_PATH` descriptor of it, and clients dial `/proc/self/fd/N`, which the kernel
//! resolves to the same socket. So even a killed run leaves no socket file behind.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use anyhow::Context;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::tcp::{bind_addr, bind_error};
use super::{apply_buffers, Conn, LinkInfo, SocketConn, TransportKind, TransportOptions};

/// The accepting side.
pub struct Listener {
    sock: Socket,
    /// The socket file's `O_PATH` descriptor (Unix), which dialers connect through.
    _name: Option<OwnedFd>,
}

impl Listener {
    /// Wait up to `timeout` for a pending connection; `Ok(false)` if none came.
    ///
    /// # Errors
    /// If `poll` fails.
    pub fn ready(&self, timeout: Duration) -> io::Result<bool> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let mut fds = [PollFd::new(self.sock.as_fd(), PollFlags::POLLIN)];
        let ms = PollTimeout::try_from(timeout.as_millis().min(60_000) as i32)
            .unwrap_or(PollTimeout::ZERO);
        match poll(&mut fds, ms) {
            Ok(n) => Ok(n > 0),
            Err(nix::errno::Errno::EINTR) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Accept one connection (call after [`Listener::ready`] said one is pending).
    ///
    /// # Errors
    /// As `accept(2)`.
    pub fn accept(&self) -> io::Result<Box<dyn Conn>> {
        Ok(SocketConn::boxed(self.accept_socket()?, false))
    }

    /// Accept one connection as a bare socket (close-on-exec), for a reactor that drives
    /// many (call after [`Listener::ready`] said one is pending).
    ///
    /// # Errors
    /// As `accept(2)`.
    pub fn accept_socket(&self) -> io::Result<Socket> {
        self.sock.accept().map(|(s, _)| s)
    }

    /// Make accepts return `WouldBlock` rather than wait (for several threads that
    /// accept from one listener, where one's poll may be answered by another's accept).
    ///
    /// # Errors
    /// As `fcntl(2)`.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        self.sock.set_nonblocking(on)
    }

    /// The listening descriptor.
    pub fn raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

/// How long one dial may wait for the listener.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// The dialing side: makes a new connection each time.
pub struct Dialer {
    domain: Domain,
    ty: Type,
    protocol: Option<Protocol>,
    target: SockAddr,
    opts: TransportOptions,
    linger0: bool,
}

impl Dialer {
    /// A dialer for a listener another process opened (`connect` across processes or
    /// hosts): `target` is that listener's [`Dialer::endpoint`].
    ///
    /// # Errors
    /// A transport without connections, or a target of the wrong kind.
    pub fn to(
        kind: TransportKind,
        target: &super::Endpoint,
        opts: &TransportOptions,
        linger0: bool,
    ) -> anyhow::Result<Dialer> {
        let (domain, ty, protocol, addr) = match (kind, target) {
            (TransportKind::Tcp | TransportKind::Tcp6, super::Endpoint::Address(a)) => (
                tcp_domain(a.is_ipv6()),
                Type::STREAM,
                Some(Protocol::TCP),
                SockAddr::from(*a),
            ),
            (TransportKind::Unix, super::Endpoint::Path(p)) => {
                (Domain::UNIX, Type::STREAM, None, SockAddr::unix(p)?)
            }
            (TransportKind::UnixSeqpacket, super::Endpoint::Path(p)) => {
                (Domain::UNIX, Type::SEQPACKET, None, SockAddr::unix(p)?)
            }
            (kind, e) => anyhow::bail!("{kind} cannot dial {e}: not a listener of {kind}"),
        };
        Ok(Dialer {
            domain,
            ty,
            protocol,
            target: addr,
            opts: opts.clone(),
            linger0,
        })
    }

    /// Where another process dials this dialer's listener: the address, or for a Unix
    /// listener the socket reached through this process's descriptor of it.
    pub fn endpoint(&self) -> super::Endpoint {
        if let Some(a) = self.target.as_socket() {
            return super::Endpoint::Address(a);
        }
        let path = self
            .target
            .as_pathname()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let own = format!("/proc/{}/", std::process::id());
        super::Endpoint::Path(path.replacen("/proc/self/", &own, 1).into())
    }

    /// Open a new connection to the listener.
    ///
    /// # Errors
    /// As `connect(2)`; running out of local ports says what to do about it; a listener
    /// that does not answer within [`DIAL_TIMEOUT`] or Ctrl-C ends the wait.
    pub fn connect(&self) -> io::Result<Box<dyn Conn>> {
        Ok(SocketConn::boxed(self.connect_socket()?, false))
    }

    /// Open a new connection to the listener as a bare socket (close-on-exec), for a
    /// reactor that drives many.
    ///
    /// # Errors
    /// As [`Dialer::connect`].
    pub fn connect_socket(&self) -> io::Result<Socket> {
        let sock = Socket::new(self.domain, self.ty, self.protocol)?;
        apply_buffers(&sock, &self.opts)?;
        if self.linger0 {
            sock.set_linger(Some(Duration::ZERO))?;
        }
        super::connect_with_deadline(&sock, &self.target, DIAL_TIMEOUT).map_err(|e| {
            if e.raw_os_error() == Some(nix::libc::EADDRNOTAVAIL) {
                io::Error::new(e.kind(), super::tcp::OUT_OF_PORTS)
            } else {
                e
            }
        })?;
        if self.protocol == Some(Protocol::TCP) {
            sock.set_nodelay(self.opts.nodelay)?;
        }
        Ok(sock)
    }
}

/// The socket domain of an IPv6 or IPv4 address.
fn tcp_domain(ipv6: bool) -> Domain {
    if ipv6 {
        Domain::IPV6
    } else {
        Domain::IPV4
    }
}

/// Open a listener and a dialer for it.
///
/// # Errors
/// Setup failures, with the address or path named; a transport without connections.
pub fn open(
    kind: TransportKind,
    opts: &TransportOptions,
    id: usize,
    linger0: bool,
) -> anyhow::Result<(Listener, Dialer, LinkInfo)> {
    let (domain, ty, protocol, addr, path) = match kind {
        TransportKind::Tcp | TransportKind::Tcp6 => {
            let a = bind_addr(kind.is_ipv6(), opts);
            (
                tcp_domain(kind.is_ipv6()),
                Type::STREAM,
                Some(Protocol::TCP),
                SockAddr::from(a),
                None,
            )
        }
        TransportKind::Unix | TransportKind::UnixSeqpacket => {
            let p = opts.dir.join(super::file_name("connect", id, ".sock"));
            let ty = if kind == TransportKind::Unix {
                Type::STREAM
            } else {
                Type::SEQPACKET
            };
            (Domain::UNIX, ty, None, SockAddr::unix(&p)?, Some(p))
        }
        _ => anyhow::bail!("{kind} has no connections to set up"),
    };
    let sock = Socket::new(domain, ty, protocol).context("cannot create a socket")?;
    apply_buffers(&sock, opts).context("cannot set socket buffer sizes")?;
    if let Err(e) = sock.bind(&addr) {
        let msg = match (&path, addr.as_socket()) {
            (Some(p), _) => format!(
                "cannot bind Unix socket {}: {}",
                p.display(),
                super::unix::bind_hint(&e, p)
            ),
            (None, Some(a)) => bind_error("TCP", a, &e),
            (None, None) => "cannot bind".into(),
        };
        return Err(anyhow::Error::new(e).context(msg));
    }
    // Keep the socket reachable through a descriptor and remove its name at once.
    let name = match &path {
        Some(p) => {
            let fd = nix::fcntl::open(
                p.as_path(),
                nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            );
            let _ = std::fs::remove_file(p);
            Some(crate::sys::own_fd(fd.with_context(|| {
                format!("cannot open socket file {}", p.display())
            })?))
        }
        None => None,
    };
    let target = match &name {
        Some(fd) => SockAddr::unix(format!("/proc/self/fd/{}", fd.as_raw_fd()))?,
        None => {
            let local = sock.local_addr()?;
            match local.as_socket() {
                Some(a) => {
                    SockAddr::from(SocketAddr::new(opts.connect.unwrap_or(a.ip()), a.port()))
                }
                None => local,
            }
        }
    };
    let listener = Listener { sock, _name: name };
    listener.sock.listen(1024).context("cannot listen")?;
    let endpoint = target
        .as_socket()
        .map(|a| a.to_string())
        .or_else(|| path.as_ref().map(|p| p.display().to_string()));
    let dialer = Dialer {
        domain,
        ty,
        protocol,
        target,
        opts: opts.clone(),
        linger0,
    };
    Ok((
        listener,
        dialer,
        LinkInfo {
            endpoint,
            ..LinkInfo::default()
        },
    ))
}

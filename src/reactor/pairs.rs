//! Making a swarm's pairs: N connections through one listener (unix, unix-seqpacket,
//! tcp, tcp6), N socketpairs, or N pipes (two per pair for pingpong), every end
//! nonblocking and close-on-exec.

use std::os::fd::OwnedFd;
use std::path::Path;

use anyhow::Context;
use nix::fcntl::OFlag;
use socket2::{Domain, SockAddr, Socket, Type};

use super::{Side, Work};
use crate::transport::TransportKind;

/// The transports a swarm can use.
pub const TRANSPORTS: [TransportKind; 6] = [
    TransportKind::Unix,
    TransportKind::UnixSeqpacket,
    TransportKind::Tcp,
    TransportKind::Tcp6,
    TransportKind::Socketpair,
    TransportKind::Pipe,
];

/// Descriptors one pair holds.
pub fn fds_per_pair(t: TransportKind, work: Work) -> u64 {
    match (t, work) {
        (TransportKind::Pipe, Work::Pingpong) => 4,
        _ => 2,
    }
}

/// The pairs made, and what failed on the way (by kind).
pub struct Made {
    /// (active side, passive side) per pair.
    pub pairs: Vec<(Side, Side)>,
    /// Errors by kind, with how many pairs each cost.
    pub errors: Vec<(String, u64)>,
    /// Whether Ctrl-C stopped the making.
    pub interrupted: bool,
}

fn note(errors: &mut Vec<(String, u64)>, kind: String) {
    match errors.iter_mut().find(|(k, _)| *k == kind) {
        Some((_, n)) => *n += 1,
        None => errors.push((kind, 1)),
    }
}

fn socket_side(s: Socket) -> anyhow::Result<Side> {
    s.set_nonblocking(true)?;
    Ok(Side {
        read: Some(OwnedFd::from(s)),
        write: None,
        duplex: true,
    })
}

fn pipe() -> nix::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
}

/// Make `n` pairs of `t` (socket files under `dir`). A pair that fails is counted by
/// the kind of its error; the making stops early only at Ctrl-C or when the listener
/// itself cannot be had.
///
/// # Errors
/// The listener cannot be made.
pub fn make(t: TransportKind, work: Work, n: u64, dir: &Path) -> anyhow::Result<Made> {
    let mut pairs = Vec::with_capacity(n as usize);
    let mut errors = Vec::new();
    let mut interrupted = false;
    let listener = match t {
        TransportKind::Unix | TransportKind::UnixSeqpacket => {
            let ty = if t == TransportKind::Unix {
                Type::STREAM
            } else {
                Type::SEQPACKET
            };
            let path = dir.join("swarm.sock");
            let l = Socket::new(Domain::UNIX, ty, None).context("cannot create a Unix socket")?;
            l.bind(&SockAddr::unix(&path)?)
                .with_context(|| format!("cannot bind {}", path.display()))?;
            Some((l, SockAddr::unix(&path)?, ty, Domain::UNIX))
        }
        TransportKind::Tcp | TransportKind::Tcp6 => {
            let addr: std::net::SocketAddr = if t == TransportKind::Tcp {
                "127.0.0.1:0".parse()?
            } else {
                "[::1]:0".parse()?
            };
            let l = Socket::new(Domain::for_address(addr), Type::STREAM, None)
                .context("cannot create a TCP socket")?;
            l.bind(&addr.into())
                .with_context(|| format!("cannot bind {addr}"))?;
            let local = l.local_addr()?;
            Some((l, local, Type::STREAM, Domain::for_address(addr)))
        }
        _ => None,
    };
    if let Some((l, _, _, _)) = &listener {
        l.listen(1024).context("cannot listen")?;
    }
    for _ in 0..n {
        if crate::interrupt::requested() {
            interrupted = true;
            break;
        }
        let made: anyhow::Result<(Side, Side)> = match (&listener, t) {
            (Some((l, addr, ty, domain)), _) => (|| {
                let c =
                    Socket::new(*domain, *ty, None).map_err(|e| anyhow::anyhow!("socket: {e}"))?;
                if *domain != Domain::UNIX {
                    c.set_nodelay(true)?;
                }
                c.connect(addr)
                    .map_err(|e| anyhow::anyhow!("connect: {e}"))?;
                let (s, _) = l.accept().map_err(|e| anyhow::anyhow!("accept: {e}"))?;
                Ok((socket_side(c)?, socket_side(s)?))
            })(),
            (None, TransportKind::Socketpair) => (|| {
                let (a, b) = Socket::pair(Domain::UNIX, Type::STREAM, None)
                    .map_err(|e| anyhow::anyhow!("socketpair: {e}"))?;
                Ok((socket_side(a)?, socket_side(b)?))
            })(),
            (None, _) => (|| {
                let (r, w) = pipe().map_err(|e| anyhow::anyhow!("pipe: {}", e.desc()))?;
                if work == Work::Stream {
                    return Ok((
                        Side {
                            read: None,
                            write: Some(w),
                            duplex: false,
                        },
                        Side {
                            read: Some(r),
                            write: None,
                            duplex: false,
                        },
                    ));
                }
                let (r2, w2) = pipe().map_err(|e| anyhow::anyhow!("pipe: {}", e.desc()))?;
                Ok((
                    Side {
                        read: Some(r2),
                        write: Some(w),
                        duplex: false,
                    },
                    Side {
                        read: Some(r),
                        write: Some(w2),
                        duplex: false,
                    },
                ))
            })(),
        };
        match made {
            Ok(p) => pairs.push(p),
            Err(e) => note(&mut errors, format!("setup: {e:#}")),
        }
    }
    if let Some((_, addr, _, Domain::UNIX)) = &listener {
        if let Some(p) = addr.as_pathname() {
            let _ = std::fs::remove_file(p);
        }
    }
    Ok(Made {
        pairs,
        errors,
        interrupted,
    })
}

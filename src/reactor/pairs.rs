//! The transports a swarm's pairs can use, and making its pairs in one process: N
//! socketpairs, or N pipes (two per pair for pingpong), every end nonblocking and
//! close-on-exec. (Pairs over unix, unix-seqpacket, tcp and tcp6 are dialed through a
//! listener by the swarm workload, so that the two sides can be in two processes.)

use std::os::fd::OwnedFd;

use nix::fcntl::OFlag;
use socket2::{Domain, Socket, Type};

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

/// Make `n` pairs of `t` in this process (socketpair, pipe; the socket transports are
/// dialed through a listener instead). A pair that fails is counted by the kind of its
/// error; the making stops early only at Ctrl-C.
///
/// # Errors
/// A transport that cannot be made in one process.
pub fn make(t: TransportKind, work: Work, n: u64) -> anyhow::Result<Made> {
    if !matches!(t, TransportKind::Socketpair | TransportKind::Pipe) {
        anyhow::bail!("{t} pairs are dialed through a listener, not made in one process");
    }
    let mut pairs = Vec::with_capacity(n as usize);
    let mut errors = Vec::new();
    let mut interrupted = false;
    for _ in 0..n {
        if crate::interrupt::requested() {
            interrupted = true;
            break;
        }
        let made: anyhow::Result<(Side, Side)> = match t {
            TransportKind::Socketpair => (|| {
                let (a, b) = Socket::pair(Domain::UNIX, Type::STREAM, None)
                    .map_err(|e| anyhow::anyhow!("socketpair: {e}"))?;
                Ok((socket_side(a)?, socket_side(b)?))
            })(),
            _ => (|| {
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
    Ok(Made {
        pairs,
        errors,
        interrupted,
    })
}

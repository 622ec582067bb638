//! A peer names nothing that is used unchecked. Every endpoint the other side of a remote
//! run announces (the server's in `Ready`, the client's in `Wired`: where to dial, which
//! FIFO or socket file to open, which message queue or ring to write, where a datagram
//! socket answers) passes [`PeerTrust::check`] before this side opens, connects to or
//! writes it.
//!
//! The rules, by what is named:
//! - **An address** (tcp, udp): a port other than 0, at the peer's own control address
//!   (loopback for a peer on loopback). For a peer on this host, the socket at that
//!   address must also be held by the very process behind the peer's control connection
//!   (the kernel's `sock_diag` lookup, and /proc/PID/fd): a local client cannot make the server dial a
//!   service bound only to this host's loopback, and a server cannot make its client send
//!   the run's token to one.
//! - **A path** (unix, unix-dgram, unix-seqpacket, fifo): a peer on another host names
//!   none. A `connect` listener is named by its process's descriptor,
//!   `/proc/<pid>/fd/<n>`: the pid must be the peer's, and the descriptor must hold a
//!   socket of the peer's uid. A local peer's path must be one sockbench made for that process: its file name
//!   `sb<pid>-...` with the pid of the process behind the control connection, the file of
//!   the transport's type (a socket, a FIFO), not a symbolic link, owned by that process's
//!   uid, in a directory of that uid or root that nobody else may write to (or sticky).
//!   It is then opened without following links (`O_PATH|O_NOFOLLOW`) and used only
//!   through that descriptor (`/proc/self/fd/N`), so the file checked is the file used.
//! - **A name** (mq, shm): a peer on another host names none; a local peer's name is
//!   `/sockbench-<pid>-<id>` with its process's pid, and the object opened must belong to
//!   its uid ([`TransportOptions::peer_uid`](crate::transport::TransportOptions)) before
//!   anything is written to it.
//!
//! A peer over an inherited Unix socket (the child of `--placement processes`, or its
//! parent) is this program itself: nothing it names is checked. Where this process may
//! not see which process holds a local peer's control connection (another user's, and
//! this one not root), the peer's uid alone decides what is its own: a socket of that
//! uid, a name with any pid, an object of that uid.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Context};

use crate::transport::owner::{self, Proto};
use crate::transport::{canonical_ip, is_local_address, Endpoint, TransportKind};

/// What this side knows of the process at the other end of its control connection.
#[derive(Debug)]
pub struct PeerTrust {
    who: Who,
    /// For a peer on this host: its uid and the processes holding its control socket
    /// (found once, when first needed).
    local: OnceLock<Result<Local, String>>,
    /// The peer's end and this end of the control connection.
    addrs: Option<(SocketAddr, SocketAddr)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    /// Over an inherited socket: this program's own parent or child.
    Trusted,
    /// On another host.
    Remote,
    /// On this host.
    Local,
}

#[derive(Clone, Debug)]
struct Local {
    uid: u32,
    /// The processes holding the peer's control socket; empty when this process may not
    /// see them (another user's /proc/PID/fd, without root): then the peer's uid alone
    /// decides what is its own.
    pids: Vec<i32>,
}

impl Local {
    /// Whether `pid` may be the peer's process.
    fn may_be(&self, pid: i32) -> bool {
        self.pids.is_empty() || self.pids.contains(&pid)
    }
}

/// A checked endpoint, ready to use: for a path, the descriptor that pins the checked file
/// (the endpoint is then `/proc/self/fd/N`, valid while this lives).
#[derive(Debug)]
pub struct Pinned {
    /// The endpoint to open or connect to.
    pub endpoint: Endpoint,
    /// The uid a named object (mq, shm) must belong to when opened.
    pub owner: Option<u32>,
    _pin: Option<OwnedFd>,
}

impl PeerTrust {
    /// The peer behind a control connection between `peer` (its end) and `local` (this
    /// end); `None` for an inherited Unix socket.
    pub fn of(addrs: Option<(SocketAddr, SocketAddr)>) -> PeerTrust {
        let who = match addrs {
            None => Who::Trusted,
            Some((peer, _)) if is_local_address(canonical_ip(peer.ip())) => Who::Local,
            Some(_) => Who::Remote,
        };
        PeerTrust {
            who,
            local: OnceLock::new(),
            addrs: addrs.map(|(p, l)| (canon(p), canon(l))),
        }
    }

    /// A peer on this host whose uid and processes are known already: what [`PeerTrust::of`]
    /// finds for a control connection this very process holds both ends of, without the
    /// look-up through every process's descriptors (milliseconds, too slow for a million
    /// fuzzed sessions). Everything the peer names is then checked as `of`'s would be.
    #[cfg(test)]
    pub(crate) fn of_known(addrs: (SocketAddr, SocketAddr), uid: u32, pids: Vec<i32>) -> PeerTrust {
        let trust = PeerTrust::of(Some(addrs));
        assert_eq!(trust.who, Who::Local, "a peer on this host");
        let _ = trust.local.set(Ok(Local { uid, pids }));
        trust
    }

    /// Whether nothing the peer names is checked (this program's own parent or child).
    pub fn trusted(&self) -> bool {
        self.who == Who::Trusted
    }

    fn peer_ip(&self) -> Option<IpAddr> {
        self.addrs.map(|(p, _)| p.ip())
    }

    /// The local peer's uid and processes, from the kernel's tables.
    fn local(&self) -> anyhow::Result<&Local> {
        let found = self.local.get_or_init(|| {
            let Some((peer, here)) = self.addrs else {
                return Err("no control address".into());
            };
            let sock = owner::lookup(Proto::Tcp, peer, Some(here))
                .map_err(|e| format!("cannot ask the kernel whose socket {peer} is: {e}"))?
                .ok_or_else(|| format!("the kernel knows no socket {peer} -> {here}"))?;
            let pids = owner::holders(sock.inode, None);
            Ok(Local {
                uid: sock.uid,
                pids,
            })
        });
        found.as_ref().map_err(|e| anyhow!("{e}"))
    }

    /// Check `ep`, which the peer named for a `kind` channel (`what` says which, for the
    /// message), and pin it for use.
    ///
    /// # Errors
    /// The endpoint breaks a rule of the module doc: the message names it and the rule.
    pub fn check(&self, kind: TransportKind, ep: &Endpoint, what: &str) -> anyhow::Result<Pinned> {
        let unchecked = || Pinned {
            endpoint: ep.clone(),
            owner: None,
            _pin: None,
        };
        if self.who == Who::Trusted {
            return Ok(unchecked());
        }
        match (ep, kind.is_ip()) {
            (Endpoint::Address(a), true) => {
                self.address(kind, *a, None)
                    .with_context(|| format!("refusing {what} {a}"))?;
                Ok(unchecked())
            }
            (Endpoint::Path(p), false) if kind.uses_path() => self
                .path(kind, p)
                .with_context(|| format!("refusing {what} {}", p.display())),
            (Endpoint::Name(n), false)
                if matches!(kind, TransportKind::Mq | TransportKind::Shm) =>
            {
                let owner = self
                    .name(n)
                    .with_context(|| format!("refusing {what} {n}"))?;
                Ok(Pinned {
                    endpoint: ep.clone(),
                    owner: Some(owner),
                    _pin: None,
                })
            }
            _ => bail!("refusing {what} {ep}: not an endpoint of {kind}"),
        }
    }

    /// Check the peer's own end of a `kind` data connection (`locals` in `Wired`). A
    /// datagram socket's is answered (connected to, sent to): it is checked as an
    /// endpoint. A stream socket's is only matched against the connections that arrive
    /// (accepted from that address only), so it must only be at the peer's address.
    /// `toward` is this side's end that the peer's socket talks to (a connected UDP
    /// socket is found by both its addresses).
    ///
    /// # Errors
    /// As [`PeerTrust::check`].
    pub fn check_own_end(
        &self,
        kind: TransportKind,
        ep: &Endpoint,
        what: &str,
        toward: Option<&Endpoint>,
    ) -> anyhow::Result<Pinned> {
        let answered = matches!(
            kind,
            TransportKind::Udp | TransportKind::Udp6 | TransportKind::UnixDgram
        );
        match ep {
            Endpoint::Address(a) if !answered && kind.is_ip() && self.who != Who::Trusted => {
                self.at_peer(*a)
                    .with_context(|| format!("refusing {what} {a}"))?;
                Ok(Pinned {
                    endpoint: ep.clone(),
                    owner: None,
                    _pin: None,
                })
            }
            Endpoint::Address(a) if kind.is_ip() && self.who != Who::Trusted => {
                let toward = match toward {
                    Some(Endpoint::Address(t)) => Some(*t),
                    _ => None,
                };
                self.address(kind, *a, toward)
                    .with_context(|| format!("refusing {what} {a}"))?;
                Ok(Pinned {
                    endpoint: ep.clone(),
                    owner: None,
                    _pin: None,
                })
            }
            _ => self.check(kind, ep, what),
        }
    }

    /// An address at the peer's own address, on a port.
    fn at_peer(&self, a: SocketAddr) -> anyhow::Result<()> {
        let a = canon(a);
        if a.port() == 0 {
            bail!("port 0 is no endpoint");
        }
        let peer = self.peer_ip().context("the peer has no address")?;
        let same = a.ip() == peer || (a.ip().is_loopback() && peer.is_loopback());
        if !same {
            bail!(
                "it is not at the peer's own address {peer}: a peer's data endpoints are on the \
                 host it speaks from"
            );
        }
        Ok(())
    }

    /// An address the peer names: at its own address, and on this host held by its
    /// process (found as a connection toward `toward` when given, else as a listener or
    /// a bound socket).
    fn address(
        &self,
        kind: TransportKind,
        a: SocketAddr,
        toward: Option<SocketAddr>,
    ) -> anyhow::Result<()> {
        self.at_peer(a)?;
        let a = canon(a);
        if self.who == Who::Local {
            let local = self.local()?;
            let proto = match kind.reliable() {
                true => Proto::Tcp,
                false => Proto::Udp,
            };
            let ask = |remote| {
                owner::lookup(proto, a, remote).context("cannot ask the kernel whose socket it is")
            };
            let socket = match toward {
                Some(t) => match ask(Some(t))? {
                    Some(s) => Some(s),
                    None => ask(None)?,
                },
                None => ask(None)?,
            };
            let held = socket.is_some_and(|s| {
                (proto == Proto::Udp || s.state == owner::LISTEN)
                    && match local.pids.is_empty() {
                        // Another user's process, which this one may not look into:
                        // the socket must at least be that user's.
                        true => s.uid == local.uid,
                        false => !owner::holders(s.inode, Some(&local.pids)).is_empty(),
                    }
            });
            if !held {
                bail!(
                    "no socket there belongs to the peer's process (pid {}): a peer names only \
                     its own sockets",
                    pid_list(&local.pids)
                );
            }
        }
        Ok(())
    }

    fn path(&self, kind: TransportKind, p: &Path) -> anyhow::Result<Pinned> {
        if self.who == Who::Remote {
            bail!("a peer on another host names no paths on this one");
        }
        let local = self.local()?;
        if let Some(pinned) = self.descriptor_path(kind, p, local)? {
            return Ok(pinned);
        }
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .context("the path has no file name")?;
        if !p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
            bail!("the path is not absolute and plain");
        }
        let pid = name
            .strip_prefix("sb")
            .and_then(|r| r.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<i32>().ok());
        if !pid.is_some_and(|pid| local.may_be(pid)) {
            bail!(
                "it is not a name sockbench made for the peer's process (sb{}-...)",
                pid_list(&local.pids)
            );
        }
        let dir = p.parent().context("the path has no directory")?;
        let real = std::fs::canonicalize(dir).context("its directory")?;
        if real != dir {
            bail!(
                "its directory is reached through a symbolic link ({})",
                real.display()
            );
        }
        let d = std::fs::symlink_metadata(dir).context("its directory")?;
        let mode = d.permissions().mode();
        if !d.is_dir() || !(d.uid() == local.uid || d.uid() == 0) {
            bail!("its directory belongs to neither the peer's user nor root");
        }
        if mode & 0o022 != 0 && mode & 0o1000 == 0 {
            bail!(
                "its directory may be written by others (mode {:o})",
                mode & 0o7777
            );
        }
        let fd = nix::fcntl::open(
            p,
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_NOFOLLOW
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(std::io::Error::from)
        .context("cannot open it")?;
        let fd = crate::sys::own_fd(fd);
        let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(std::io::Error::from)?;
        let kind_of = st.st_mode & nix::libc::S_IFMT;
        let want = match kind {
            TransportKind::Fifo => nix::libc::S_IFIFO,
            _ => nix::libc::S_IFSOCK,
        };
        if kind_of != want {
            bail!(
                "it is not a {} (a symbolic link or another kind of file)",
                match kind {
                    TransportKind::Fifo => "FIFO",
                    _ => "socket",
                }
            );
        }
        if st.st_uid != local.uid {
            bail!(
                "it belongs to uid {}, not to the peer's uid {}",
                st.st_uid,
                local.uid
            );
        }
        // The same check by name, for the file type a descriptor of O_PATH can hide.
        let meta = std::fs::symlink_metadata(p)?;
        let right = match kind {
            TransportKind::Fifo => meta.file_type().is_fifo(),
            _ => meta.file_type().is_socket(),
        };
        if !right || meta.ino() != st.st_ino || meta.dev() != st.st_dev {
            bail!("it changed while it was checked");
        }
        Ok(Pinned {
            endpoint: Endpoint::Path(PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))),
            owner: Some(local.uid),
            _pin: Some(fd),
        })
    }

    /// A `connect` listener's socket as its process reaches it, `/proc/<pid>/fd/<n>` (its
    /// file is gone; the descriptor holds it): the pid must be the peer's, and what it
    /// holds a socket of the peer's uid. `None` for any other path.
    fn descriptor_path(
        &self,
        kind: TransportKind,
        p: &Path,
        local: &Local,
    ) -> anyhow::Result<Option<Pinned>> {
        let Some(rest) = p.to_str().and_then(|s| s.strip_prefix("/proc/")) else {
            return Ok(None);
        };
        let Some((pid, n)) = rest.split_once("/fd/") else {
            return Ok(None);
        };
        let (Ok(pid), true) = (
            pid.parse::<i32>(),
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()),
        ) else {
            bail!("it is not a name sockbench made for the peer's process");
        };
        if !local.may_be(pid) || !matches!(kind, TransportKind::Unix | TransportKind::UnixSeqpacket)
        {
            bail!(
                "it is not a descriptor of the peer's process (/proc/{}/fd/N) holding a {kind} listener",
                pid_list(&local.pids)
            );
        }
        let fd = nix::fcntl::open(
            p,
            nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(std::io::Error::from)
        .context("cannot open it")?;
        let fd = crate::sys::own_fd(fd);
        let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(std::io::Error::from)?;
        if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFSOCK {
            bail!("what it holds is not a socket");
        }
        if st.st_uid != local.uid {
            bail!(
                "the socket it holds belongs to uid {}, not to the peer's uid {}",
                st.st_uid,
                local.uid
            );
        }
        Ok(Some(Pinned {
            endpoint: Endpoint::Path(PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))),
            owner: Some(local.uid),
            _pin: Some(fd),
        }))
    }

    /// A queue's or ring's name: the uid it must belong to.
    fn name(&self, n: &str) -> anyhow::Result<u32> {
        if self.who == Who::Remote {
            bail!("a peer on another host names no message queues or rings on this one");
        }
        let local = self.local()?;
        let pid = n
            .strip_prefix("/sockbench-")
            .and_then(|r| r.split_once('-'))
            .filter(|(_, id)| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|(pid, _)| pid.parse::<i32>().ok());
        if !pid.is_some_and(|pid| local.may_be(pid)) {
            bail!(
                "it is not a name sockbench made for the peer's process (/sockbench-{}-N)",
                pid_list(&local.pids)
            );
        }
        Ok(local.uid)
    }
}

fn pid_list(pids: &[i32]) -> String {
    if pids.is_empty() {
        return "<pid>".into();
    }
    let v: Vec<String> = pids.iter().map(i32::to_string).collect();
    v.join("|")
}

fn canon(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(canonical_ip(a.ip()), a.port())
}

#[cfg(test)]
mod tests;

//! Unix-domain sockets: stream, datagram, sequenced-packet and `socketpair`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use socket2::{Domain, SockAddr, Socket, Type};

use super::{
    accept_from, apply_buffers, file_name, granted_buffers, Conn, Connected, Endpoint, LinkInfo,
    Listener, Pair, SocketConn, TransportOptions,
};

/// Removes a socket file when dropped, so a failed setup leaves nothing behind either.
struct Unlink<'a>(&'a Path);

impl Drop for Unlink<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

fn bind(ty: Type, path: &Path, opts: &TransportOptions) -> anyhow::Result<Socket> {
    let sock = Socket::new(Domain::UNIX, ty, None).context("cannot create a Unix socket")?;
    apply_buffers(&sock, opts).context("cannot set socket buffer sizes")?;
    let addr =
        SockAddr::unix(path).with_context(|| format!("bad Unix socket path {}", path.display()))?;
    let mut bound = sock.bind(&addr);
    if bound
        .as_ref()
        .is_err_and(|e| e.kind() == std::io::ErrorKind::AddrInUse)
    {
        // The name carries our process id, so a file already there was left by an earlier
        // process with this id that is gone: remove it and say so.
        if std::fs::remove_file(path).is_ok() {
            eprintln!(
                "sockbench: note: removed {}, left by a process that is no longer running",
                path.display()
            );
            bound = sock.bind(&addr);
        }
    }
    bound.map_err(|e| {
        let why = bind_hint(&e, path);
        anyhow::Error::new(e).context(format!("cannot bind Unix socket {}: {why}", path.display()))
    })?;
    Ok(sock)
}

/// What to try when a socket file or FIFO cannot be made at `path`.
pub(super) fn bind_hint(e: &std::io::Error, path: &Path) -> String {
    let dir = path.parent().unwrap_or(Path::new("/")).display();
    match e.raw_os_error() {
        Some(nix::libc::EACCES) | Some(nix::libc::EPERM) => {
            format!("permission denied in {dir}: pick a --path you may write")
        }
        Some(nix::libc::EROFS) => {
            format!("{dir} is on a read-only file system: pick another --path")
        }
        Some(nix::libc::ENOSPC) | Some(nix::libc::EDQUOT) => {
            format!("no space left in {dir}: free some, or pick another --path")
        }
        Some(nix::libc::ENOENT) | Some(nix::libc::ENOTDIR) => {
            format!("{dir} does not exist any more: pick another --path")
        }
        Some(nix::libc::EADDRINUSE) | Some(nix::libc::EEXIST) => {
            "the name is in use by another socket or file: pick another --path".into()
        }
        _ => "pick another --path".into(),
    }
}

fn connect_to(ty: Type, path: &Path, opts: &TransportOptions) -> anyhow::Result<Socket> {
    let sock = Socket::new(Domain::UNIX, ty, None).context("cannot create a Unix socket")?;
    apply_buffers(&sock, opts).context("cannot set socket buffer sizes")?;
    super::connect_with_deadline(
        &sock,
        &SockAddr::unix(path)?,
        std::time::Duration::from_secs(5),
    )
    .with_context(|| format!("cannot connect to Unix socket {}", path.display()))?;
    Ok(sock)
}

/// The three kinds of Unix socket with a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// `SOCK_STREAM`: the end of data is `shutdown(SHUT_WR)`.
    Stream,
    /// `SOCK_DGRAM`: the end of data is an empty datagram; the sender binds a reply name
    /// of its own so the receiver can answer.
    Dgram,
    /// `SOCK_SEQPACKET`: the end of data is `shutdown(SHUT_WR)`.
    Seqpacket,
}

impl Flavor {
    fn ty(self) -> Type {
        match self {
            Flavor::Stream => Type::STREAM,
            Flavor::Dgram => Type::DGRAM,
            Flavor::Seqpacket => Type::SEQPACKET,
        }
    }

    /// The stem of its socket file's name.
    fn stem(self) -> &'static str {
        match self {
            Flavor::Stream => "unix",
            Flavor::Dgram => "dgram",
            Flavor::Seqpacket => "seqpacket",
        }
    }
}

/// A bound socket file waiting for its peer; the file goes when the listener does.
struct UnixListener {
    sock: Socket,
    flavor: Flavor,
    path: PathBuf,
    endpoint: Endpoint,
    opts: TransportOptions,
}

impl Drop for UnixListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The receiving half: bind a socket file in the run directory (and listen).
pub fn listen(
    flavor: Flavor,
    opts: &TransportOptions,
    id: usize,
) -> anyhow::Result<Box<dyn Listener>> {
    let path = opts.dir.join(file_name(flavor.stem(), id, ".sock"));
    let sock = bind(flavor.ty(), &path, opts)?;
    let listener = UnixListener {
        sock,
        flavor,
        endpoint: Endpoint::Path(path.clone()),
        path,
        opts: opts.clone(),
    };
    crate::testhooks::hold("unix");
    if flavor != Flavor::Dgram {
        listener
            .sock
            .listen(1)
            .context("cannot listen on Unix socket")?;
    }
    Ok(Box::new(listener))
}

impl Listener for UnixListener {
    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn accept(
        self: Box<Self>,
        peer: Option<&Endpoint>,
    ) -> anyhow::Result<(Box<dyn Conn>, LinkInfo)> {
        let receiver = match (self.flavor, peer) {
            (Flavor::Dgram, Some(Endpoint::Path(back))) => {
                // Answer the sender's own name; once connected to it, the name has done its
                // work, and both ends are open: remove it. (A name a peer process gave is
                // pinned, `/proc/self/fd/N`, which cannot be removed: its owner removes it.)
                let connected = self.sock.connect(&SockAddr::unix(back)?);
                let _ = std::fs::remove_file(back);
                connected
                    .with_context(|| format!("cannot connect to Unix socket {}", back.display()))?;
                self.sock
                    .try_clone()
                    .context("cannot keep the Unix socket")?
            }
            (Flavor::Dgram, _) => anyhow::bail!(
                "a unix-dgram receiver answers its sender's own socket file, and none was given"
            ),
            _ => {
                let receiver = accept_from(
                    &self.sock,
                    None,
                    &self.path.display().to_string(),
                    self.opts.accept_wait.unwrap_or(super::ACCEPT_WAIT),
                    self.opts.token.as_deref(),
                )?;
                // Accepted Unix sockets do not inherit the listener's buffer sizes.
                apply_buffers(&receiver, &self.opts).context("cannot set socket buffer sizes")?;
                receiver
            }
        };
        let info = LinkInfo {
            rcvbuf_bytes: receiver.recv_buffer_size().ok().map(|n| n as u64),
            ..LinkInfo::default()
        };
        Ok((
            SocketConn::boxed(receiver, self.flavor == Flavor::Dgram),
            info,
        ))
    }
}

/// The sending half: connect to the socket file at `path`; a datagram sender first binds
/// a reply name of its own in its own directory (`opts.dir`, else beside `path`): never in
/// the peer's, whose directory it may not write and whose names it does not make.
pub fn connect(flavor: Flavor, path: &Path, opts: &TransportOptions) -> anyhow::Result<Connected> {
    if flavor != Flavor::Dgram {
        let sock = connect_to(flavor.ty(), path, opts)?;
        return Ok(Connected {
            conn: SocketConn::boxed(sock, false),
            local: None,
        });
    }
    static REPLIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = REPLIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = match opts.dir.as_os_str().is_empty() {
        true => path.parent().unwrap_or(Path::new(".")).to_path_buf(),
        false => opts.dir.clone(),
    };
    let back = dir.join(super::file_name("dgram", n, ".reply.sock"));
    let sender = bind(Type::DGRAM, &back, opts)?;
    let unlink_back = Unlink(&back);
    sender
        .connect(&SockAddr::unix(path)?)
        .with_context(|| format!("cannot connect to Unix socket {}", path.display()))?;
    // The receiver removes the reply name once it has connected to it.
    std::mem::forget(unlink_back);
    Ok(Connected {
        conn: SocketConn::boxed(sender, true),
        local: Some(Endpoint::Path(back)),
    })
}

/// `socketpair(AF_UNIX, SOCK_STREAM)`.
pub fn socketpair(opts: &TransportOptions) -> anyhow::Result<Pair> {
    let (sender, receiver) =
        Socket::pair(Domain::UNIX, Type::STREAM, None).context("socketpair failed")?;
    apply_buffers(&sender, opts).context("cannot set socket buffer sizes")?;
    apply_buffers(&receiver, opts).context("cannot set socket buffer sizes")?;
    let info = granted_buffers(&sender, &receiver);
    Ok(Pair {
        sender: SocketConn::boxed(sender, false),
        receiver: SocketConn::boxed(receiver, false),
        info,
    })
}

//! Unix-domain sockets: stream, datagram, sequenced-packet and `socketpair`.

use std::path::Path;

use anyhow::Context;
use socket2::{Domain, SockAddr, Socket, Type};

use super::{
    accept_from, apply_buffers, file_name, granted_buffers, Pair, SocketConn, TransportOptions,
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

fn connect(ty: Type, path: &Path, opts: &TransportOptions) -> anyhow::Result<Socket> {
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

fn connected(
    ty: Type,
    name: &str,
    opts: &TransportOptions,
    end_with_empty: bool,
) -> anyhow::Result<Pair> {
    let path = opts.dir.join(name);
    let listener = bind(ty, &path, opts)?;
    let _unlink = Unlink(&path);
    crate::testhooks::hold("unix");
    let (sender, receiver) = if ty == Type::DGRAM {
        // The sender binds a name of its own too, so the receiver can answer it.
        let back = path.with_extension("reply.sock");
        let sender = bind(ty, &back, opts)?;
        let _unlink_back = Unlink(&back);
        sender
            .connect(&SockAddr::unix(&path)?)
            .with_context(|| format!("cannot connect to Unix socket {}", path.display()))?;
        listener
            .connect(&SockAddr::unix(&back)?)
            .with_context(|| format!("cannot connect to Unix socket {}", back.display()))?;
        (sender, listener)
    } else {
        listener.listen(1).context("cannot listen on Unix socket")?;
        let sender = connect(ty, &path, opts)?;
        let receiver = accept_from(&listener, None, &path.display().to_string())?;
        // Accepted Unix sockets do not inherit the listener's buffer sizes.
        apply_buffers(&receiver, opts).context("cannot set socket buffer sizes")?;
        (sender, receiver)
    };
    let mut info = granted_buffers(&sender, &receiver);
    info.endpoint = Some(path.display().to_string());
    Ok(Pair {
        sender: SocketConn::boxed(sender, end_with_empty),
        receiver: SocketConn::boxed(receiver, end_with_empty),
        info,
    })
}

/// `SOCK_STREAM` on a socket file.
pub fn stream(opts: &TransportOptions, id: usize) -> anyhow::Result<Pair> {
    connected(Type::STREAM, &file_name("unix", id, ".sock"), opts, false)
}

/// `SOCK_DGRAM` on a socket file; the end of data is an empty datagram.
pub fn dgram(opts: &TransportOptions, id: usize) -> anyhow::Result<Pair> {
    connected(Type::DGRAM, &file_name("dgram", id, ".sock"), opts, true)
}

/// `SOCK_SEQPACKET` on a socket file; the end of data is `shutdown(SHUT_WR)`.
pub fn seqpacket(opts: &TransportOptions, id: usize) -> anyhow::Result<Pair> {
    connected(
        Type::SEQPACKET,
        &file_name("seqpacket", id, ".sock"),
        opts,
        false,
    )
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

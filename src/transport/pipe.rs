//! Anonymous pipes and named pipes (FIFOs). `--sndbuf` sets the pipe size (`F_SETPIPE_SZ`).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use anyhow::Context;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::sys::stat::Mode;

use super::{Conn, Connected, Endpoint, LinkInfo, Listener, Pair, TransportOptions};

struct PipeWriter(Option<File>);
struct PipeReader(File);

impl Conn for PipeWriter {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.0 {
            Some(f) => f.write(buf),
            None => Err(io::ErrorKind::BrokenPipe.into()),
        }
    }
    fn recv(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }
    fn finish(&mut self) -> io::Result<()> {
        self.0 = None; // closing the write end is the end of data
        Ok(())
    }
    fn raw_fd(&self) -> Option<RawFd> {
        self.0.as_ref().map(|f| f.as_raw_fd())
    }
}

impl Conn for PipeReader {
    fn send(&mut self, _buf: &[u8]) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.0.as_raw_fd())
    }
}

fn size_pipe(fd: &File, opts: &TransportOptions) -> anyhow::Result<u64> {
    if let Some(n) = opts.sndbuf {
        fcntl(fd.as_raw_fd(), FcntlArg::F_SETPIPE_SZ(n as i32)).with_context(|| {
            format!(
                "cannot set the pipe size to {n} bytes (the limit is /proc/sys/fs/pipe-max-size)"
            )
        })?;
    }
    let granted =
        fcntl(fd.as_raw_fd(), FcntlArg::F_GETPIPE_SZ).context("cannot read the pipe size")?;
    Ok(granted as u64)
}

fn make_pair(
    read: OwnedFd,
    write: OwnedFd,
    opts: &TransportOptions,
    endpoint: Option<String>,
) -> anyhow::Result<Pair> {
    let (read, write) = (File::from(read), File::from(write));
    let size = size_pipe(&write, opts)?;
    Ok(Pair {
        sender: Box::new(PipeWriter(Some(write))),
        receiver: Box::new(PipeReader(read)),
        info: LinkInfo {
            sndbuf_bytes: Some(size),
            rcvbuf_bytes: Some(size),
            endpoint,
            ..LinkInfo::default()
        },
    })
}

/// An anonymous pipe (`pipe2(O_CLOEXEC)`).
pub fn anonymous(opts: &TransportOptions) -> anyhow::Result<Pair> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("pipe2 failed")?;
    make_pair(r, w, opts, None)
}

/// A pipe end handed down by a parent process: its read end or its write end.
pub(super) fn end(fd: OwnedFd, reading: bool) -> Box<dyn Conn> {
    if reading {
        Box::new(PipeReader(File::from(fd)))
    } else {
        Box::new(PipeWriter(Some(File::from(fd))))
    }
}

/// A FIFO in the run directory with its read end open, waiting for a writer; the FIFO
/// goes when the listener does.
struct FifoListener {
    read: File,
    path: PathBuf,
    endpoint: Endpoint,
    opts: TransportOptions,
}

impl Drop for FifoListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The receiving half: make a FIFO and open its read end (without waiting for a writer).
pub fn listen(opts: &TransportOptions, id: usize) -> anyhow::Result<Box<dyn Listener>> {
    let path = opts.dir.join(super::file_name("fifo", id, ""));
    nix::unistd::mkfifo(&path, Mode::from_bits_truncate(0o600)).map_err(|e| {
        let e = std::io::Error::from(e);
        let why = super::unix::bind_hint(&e, &path);
        anyhow::Error::new(e).context(format!("cannot create FIFO {}: {why}", path.display()))
    })?;
    crate::testhooks::hold("fifo");
    // Non-blocking, so it does not wait for a writer; blocking again once accepted.
    let read = nix::fcntl::open(
        &path,
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    );
    let read = match read {
        Ok(fd) => File::from(own(fd)),
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            return Err(anyhow::Error::new(e)
                .context(format!("cannot open FIFO {} for reading", path.display())));
        }
    };
    Ok(Box::new(FifoListener {
        read,
        endpoint: Endpoint::Path(path.clone()),
        path,
        opts: opts.clone(),
    }))
}

impl Listener for FifoListener {
    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn accept(
        self: Box<Self>,
        _peer: Option<&Endpoint>,
    ) -> anyhow::Result<(Box<dyn Conn>, LinkInfo)> {
        fcntl(self.read.as_raw_fd(), FcntlArg::F_SETFL(OFlag::empty()))
            .context("cannot make the FIFO blocking")?;
        let size = size_pipe(&self.read, &self.opts)?;
        let read = self.read.try_clone().context("cannot keep the FIFO open")?;
        let info = LinkInfo {
            sndbuf_bytes: Some(size),
            rcvbuf_bytes: Some(size),
            ..LinkInfo::default()
        };
        Ok((Box::new(PipeReader(read)), info))
    }
}

/// The sending half: open the FIFO at `path` for writing (its reader is open already).
///
/// # Errors
/// Nobody reads the FIFO: a listener opens its read end before it gives the name, so its
/// peer has gone (or never listened). Opening it blocking would wait for a reader forever.
pub fn connect(path: &Path) -> anyhow::Result<Connected> {
    let w = nix::fcntl::open(
        path,
        OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        nix::errno::Errno::ENXIO => anyhow::anyhow!(
            "nobody reads FIFO {}: its peer has closed it (or never opened it)",
            path.display()
        ),
        e => anyhow::Error::new(e)
            .context(format!("cannot open FIFO {} for writing", path.display())),
    })?;
    let w = File::from(own(w));
    // Blocking writes from here on, as the roles expect.
    fcntl(w.as_raw_fd(), FcntlArg::F_SETFL(OFlag::empty()))
        .context("cannot make the FIFO blocking")?;
    Ok(Connected {
        conn: Box::new(PipeWriter(Some(w))),
        local: None,
    })
}

fn own(fd: RawFd) -> OwnedFd {
    crate::sys::own_fd(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 28 (fuzzing whole sessions): a peer that names a FIFO and does not read it
    /// made `open(O_WRONLY)` wait forever, a client's run or a server's conversation
    /// thread with it.
    #[test]
    fn a_fifo_nobody_reads_is_refused_at_once_not_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sb-fifo-0");
        nix::unistd::mkfifo(&path, Mode::from_bits_truncate(0o600)).unwrap();
        // In a thread of its own: the failure this guards against is a wait forever.
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || {
            let _ = tx.send(connect(&p).err().map(|e| format!("{e:#}")));
        });
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(2))
            .expect("an answer, not a wait for a reader")
            .expect("refused");
        assert!(e.contains("nobody reads FIFO"), "{e}");
        // With its reader open: the writer goes through, and blocks as a role expects.
        let l = listen(
            &TransportOptions {
                dir: dir.path().to_path_buf(),
                ..TransportOptions::default()
            },
            1,
        )
        .unwrap();
        let Endpoint::Path(p) = l.endpoint().clone() else {
            panic!("a path")
        };
        let mut w = connect(&p).unwrap().conn;
        let fd = w.raw_fd().unwrap();
        let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).unwrap());
        assert!(!flags.contains(OFlag::O_NONBLOCK));
        let (mut r, _) = l.accept(None).unwrap();
        assert_eq!(w.send(b"hi").unwrap(), 2);
        w.finish().unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(r.recv(&mut buf).unwrap(), 2);
        assert_eq!(r.recv(&mut buf).unwrap(), 0);
    }
}

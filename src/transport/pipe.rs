//! Anonymous pipes and named pipes (FIFOs). `--sndbuf` sets the pipe size (`F_SETPIPE_SZ`).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;

use anyhow::Context;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::sys::stat::Mode;

use super::{Conn, LinkInfo, Pair, TransportOptions};

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
            mss_bytes: None,
            endpoint,
        },
    })
}

/// An anonymous pipe (`pipe2(O_CLOEXEC)`).
pub fn anonymous(opts: &TransportOptions) -> anyhow::Result<Pair> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("pipe2 failed")?;
    make_pair(r, w, opts, None)
}

/// A FIFO in the run directory, unlinked once both ends are open.
pub fn fifo(opts: &TransportOptions, id: usize) -> anyhow::Result<Pair> {
    let path = opts.dir.join(super::file_name("fifo", id, ""));
    nix::unistd::mkfifo(&path, Mode::from_bits_truncate(0o600)).map_err(|e| {
        let e = std::io::Error::from(e);
        let why = super::unix::bind_hint(&e, &path);
        anyhow::Error::new(e).context(format!("cannot create FIFO {}: {why}", path.display()))
    })?;
    crate::testhooks::hold("fifo");
    let opened = open_fifo(&path);
    let _ = std::fs::remove_file(&path);
    let (r, w) = opened?;
    make_pair(r, w, opts, Some(path.display().to_string()))
}

fn open_fifo(path: &Path) -> anyhow::Result<(OwnedFd, OwnedFd)> {
    // Open the read end non-blocking so it does not wait for a writer, then the write end
    // (which succeeds because a reader exists), then make the read end blocking again.
    let r = nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .with_context(|| format!("cannot open FIFO {} for reading", path.display()))?;
    let r = File::from(own(r));
    let w = nix::fcntl::open(path, OFlag::O_WRONLY | OFlag::O_CLOEXEC, Mode::empty())
        .with_context(|| format!("cannot open FIFO {} for writing", path.display()))?;
    fcntl(r.as_raw_fd(), FcntlArg::F_SETFL(OFlag::empty()))
        .context("cannot make the FIFO blocking")?;
    Ok((OwnedFd::from(r), own(w)))
}

fn own(fd: RawFd) -> OwnedFd {
    crate::sys::own_fd(fd)
}

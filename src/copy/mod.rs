//! The ways to copy one connection's bytes to another, one file per method.
//!
//! A [`Copier`] belongs to one relay worker thread and is reused for every connection
//! that worker relays (its buffers, pipe or ring are set up once). [`Copier::copy`]
//! moves everything `from` sends to `to` until `from` ends, then ends `to`
//! (`shutdown(SHUT_WR)`), counting the bytes it moved and every system call it made to
//! move them as it goes, so a failed or interrupted copy still reports what it did.
//!
//! Both ends are blocking sockets with a short receive and send timeout (set by the
//! caller, [`End::set_timeouts`]): a method that sees `WouldBlock` or `TimedOut`
//! checks [`crate::interrupt::requested`] and returns `Interrupted` if Ctrl-C came,
//! otherwise it tries again. That is how a relay between programs it does not control
//! stops promptly.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use clap::ValueEnum;
use serde::Serialize;

mod read_write;

/// A copy method.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// read(2) into one buffer, write(2) it out.
    ReadWrite,
    /// readv(2)/writev(2) over several buffers.
    Vectored,
    /// A userspace buffered reader and writer (std's BufReader and BufWriter), as Go's
    /// bufio.
    Buffered,
    /// splice(2) socket -> pipe -> socket: the bytes never enter userspace.
    Splice,
    /// Reads and writes submitted through an io_uring.
    IoUring,
    /// Splices submitted through an io_uring.
    IoUringSplice,
    /// tokio's copy on a single-threaded runtime (the io.Copy of Rust).
    Async,
}

impl Method {
    /// Every method, in the order tables show them.
    pub const ALL: [Method; 7] = [
        Method::ReadWrite,
        Method::Vectored,
        Method::Buffered,
        Method::Splice,
        Method::IoUring,
        Method::IoUringSplice,
        Method::Async,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Method::ReadWrite => "read-write",
            Method::Vectored => "vectored",
            Method::Buffered => "buffered",
            Method::Splice => "splice",
            Method::IoUring => "io-uring",
            Method::IoUringSplice => "io-uring-splice",
            Method::Async => "async",
        }
    }

    /// Whether the bytes pass through a userspace buffer (the copy methods) or only
    /// through a pipe in the kernel (the splice methods).
    pub fn copies_through_userspace(self) -> bool {
        !matches!(self, Method::Splice | Method::IoUringSplice)
    }

    /// Why this method cannot run in this build or on this kernel, if it cannot.
    pub fn unavailable(self) -> Option<String> {
        match self {
            Method::IoUring | Method::IoUringSplice => {
                #[cfg(feature = "io-uring")]
                {
                    crate::sys::uring::probe()
                        .err()
                        .map(|e| format!("io_uring is not available here: {e}"))
                }
                #[cfg(not(feature = "io-uring"))]
                {
                    Some("this sockbench was built without the io-uring feature".into())
                }
            }
            Method::Async => {
                if cfg!(feature = "async") {
                    None
                } else {
                    Some("this sockbench was built without the async feature".into())
                }
            }
            _ => None,
        }
    }

    /// Parse a comma-separated list of methods, or `all`. `sendfile` and unknown names
    /// are errors that say what to use instead.
    ///
    /// # Errors
    /// The message for a usage error.
    pub fn parse_list(text: &str) -> Result<Vec<Method>, String> {
        let mut out = Vec::new();
        for name in text.split(',').map(str::trim) {
            if name == "all" {
                for m in Method::ALL {
                    if !out.contains(&m) {
                        out.push(m);
                    }
                }
                continue;
            }
            if name == "sendfile" {
                return Err("sendfile cannot be a relay method: it reads from a file (anything it can \
                     map page by page), and a relay reads from a socket. Use splice (socket -> pipe -> \
                     socket) here, or measure sendfile from a file with `sockbench stream --send sendfile`"
                    .into());
            }
            let m = Method::ALL
                .into_iter()
                .find(|m| m.name() == name)
                .ok_or_else(|| {
                    format!(
                        "unknown relay method `{name}`: use {}, or all",
                        Method::ALL.map(Method::name).join(", ")
                    )
                })?;
            if !out.contains(&m) {
                out.push(m);
            }
        }
        Ok(out)
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How the methods are set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// The copy buffer in bytes (read-write, io-uring, async: one buffer of this size;
    /// vectored: split into `iovecs` buffers; buffered: the reader's and the writer's
    /// capacity).
    pub buffer: usize,
    /// splice, io-uring-splice: the pipe size to ask for (F_SETPIPE_SZ).
    pub pipe_size: usize,
    /// vectored: how many buffers.
    pub iovecs: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            buffer: 64 << 10,
            pipe_size: 64 << 10,
            iovecs: 4,
        }
    }
}

/// What a copy did, counted as it went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Copied {
    /// Bytes written to `to` (every one of them read from `from`).
    pub bytes: u64,
    /// System calls made to move the bytes: read, write, readv, writev, splice,
    /// io_uring_enter, and the async method's own reads and writes (not its runtime's
    /// epoll_wait). Calls that returned an error (EAGAIN included) count too.
    pub syscalls: u64,
    /// Data operations: reads, writes, splices, whether made as system calls or
    /// submitted through a ring (equal to `syscalls` for the plain methods).
    pub ops: u64,
}

impl Copied {
    /// The sum of two counts.
    pub fn plus(self, o: Copied) -> Copied {
        Copied {
            bytes: self.bytes + o.bytes,
            syscalls: self.syscalls + o.syscalls,
            ops: self.ops + o.ops,
        }
    }
}

/// One end of a relayed connection: a connected stream socket.
#[derive(Debug)]
pub enum End {
    /// TCP (v4 or v6).
    Tcp(TcpStream),
    /// A Unix stream socket.
    Unix(UnixStream),
}

impl End {
    /// End the data in this direction (`shutdown(SHUT_WR)`).
    ///
    /// # Errors
    /// As shutdown(2); `NotConnected` (the peer already went) is not an error.
    pub fn shutdown_write(&self) -> io::Result<()> {
        let r = match self {
            End::Tcp(s) => s.shutdown(Shutdown::Write),
            End::Unix(s) => s.shutdown(Shutdown::Write),
        };
        match r {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            r => r,
        }
    }

    /// Set the receive and send timeouts (SO_RCVTIMEO, SO_SNDTIMEO).
    ///
    /// # Errors
    /// As setsockopt(2).
    pub fn set_timeouts(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            End::Tcp(s) => {
                s.set_read_timeout(t)?;
                s.set_write_timeout(t)
            }
            End::Unix(s) => {
                s.set_read_timeout(t)?;
                s.set_write_timeout(t)
            }
        }
    }

    /// The descriptor.
    pub fn raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

impl AsFd for End {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            End::Tcp(s) => s.as_fd(),
            End::Unix(s) => s.as_fd(),
        }
    }
}

impl Read for &End {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match *self {
            End::Tcp(ref s) => (&*s).read(buf),
            End::Unix(ref s) => (&*s).read(buf),
        }
    }
}

impl Write for &End {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match *self {
            End::Tcp(ref s) => (&*s).write(buf),
            End::Unix(ref s) => (&*s).write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Whether an error is a timeout of a blocking socket (try again unless Ctrl-C came).
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// After a timeout: `Err(Interrupted)` if Ctrl-C came, `Ok(())` to try again.
///
/// # Errors
/// `Interrupted` when the run is to stop.
pub fn retry_unless_interrupted() -> io::Result<()> {
    if crate::interrupt::requested() {
        Err(io::Error::new(
            io::ErrorKind::Interrupted,
            "interrupted while relaying",
        ))
    } else {
        Ok(())
    }
}

/// A method's copier for one worker thread.
pub trait Copier: Send {
    /// Copy everything `from` sends to `to` until `from` ends, then end `to`
    /// (shutdown for writing). Adds to `counts` as it goes.
    ///
    /// # Errors
    /// An I/O error on either end; `Interrupted` on Ctrl-C.
    fn copy(&mut self, from: &End, to: &End, counts: &mut Copied) -> io::Result<()>;

    /// The pipe size the kernel granted (splice methods).
    fn pipe_size(&self) -> Option<usize> {
        None
    }
}

/// A copier of `method` set up with `opts`.
///
/// # Errors
/// If the method's buffers, pipe, ring or runtime cannot be set up.
pub fn copier(method: Method, opts: &Options) -> io::Result<Box<dyn Copier>> {
    if let Some(why) = method.unavailable() {
        return Err(io::Error::new(io::ErrorKind::Unsupported, why));
    }
    Ok(match method {
        Method::ReadWrite => Box::new(read_write::ReadWrite::new(opts)?),
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{method}: not built yet"),
            ))
        }
    })
}

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
use serde::{Deserialize, Serialize};

mod async_copy;
mod buffered;
#[cfg(feature = "io-uring")]
mod io_uring;
#[cfg(feature = "io-uring")]
mod io_uring_splice;
mod read_write;
mod splice;
#[cfg(test)]
mod testkit;
mod vectored;

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
    Deserialize,
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
                    // The ring the methods use: it also needs to wait with a timeout
                    // (Linux 5.11), which a bare probe would not check.
                    crate::sys::uring_copy::CopyRing::new(1)
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
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
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
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
    copier_of(method, opts).map_err(|e| {
        if e.kind() == io::ErrorKind::OutOfMemory {
            io::Error::new(
                e.kind(),
                format!(
                    "{method}: cannot allocate its {}-byte --buffer: give a smaller --buffer or fewer -P",
                    opts.buffer
                ),
            )
        } else {
            e
        }
    })
}

fn copier_of(method: Method, opts: &Options) -> io::Result<Box<dyn Copier>> {
    Ok(match method {
        Method::ReadWrite => Box::new(read_write::ReadWrite::new(opts)?),
        Method::Vectored => Box::new(vectored::Vectored::new(opts)?),
        Method::Buffered => Box::new(buffered::Buffered::new(opts)?),
        Method::Splice => Box::new(splice::Splice::new(opts)?),
        #[cfg(feature = "io-uring")]
        Method::IoUring => Box::new(io_uring::IoUring::new(opts)?),
        #[cfg(feature = "io-uring")]
        Method::IoUringSplice => Box::new(io_uring_splice::IoUringSplice::new(opts)?),
        Method::Async => async_copy::new(opts)?,
        #[allow(unreachable_patterns)]
        _ => unreachable!("unavailable() refused it"),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::testkit::{self, Feed, Kind, KINDS, SIZES};
    use super::*;

    /// The copier's ends' timeouts where no test needs them to fire: long enough never to
    /// (the bytes are on their way), short enough that a copier that missed the end of
    /// its source fails the test rather than hang it.
    const CALM: Duration = Duration::from_secs(2);

    #[test]
    fn every_method_relays_every_byte_over_tcp_and_unix_with_one_copier_for_twenty_connections() {
        for method in testkit::available() {
            for kind in KINDS {
                let mut c = copier(method, &Options::default()).unwrap();
                let chunk = testkit::chunk(method, Options::default().buffer, c.pipe_size());
                for round in 0..20 {
                    let n = SIZES[round % SIZES.len()];
                    let r = testkit::relay(&mut *c, kind, n, Feed::During(Duration::ZERO), CALM);
                    testkit::check_counts(method, &r, n, chunk);
                }
            }
        }
    }

    #[test]
    fn every_method_makes_exactly_one_call_per_read_and_write_for_a_payload_already_there() {
        for method in testkit::available() {
            for kind in KINDS {
                let mut c = copier(method, &Options::default()).unwrap();
                for n in [0, 1, 10_000, 0, 10_000] {
                    let r = testkit::relay(&mut *c, kind, n, Feed::Before, CALM);
                    let what = format!("{method} over {kind:?}, {n} bytes: {:?}", r.copied);
                    assert!(r.result.is_ok(), "{what}: {:?}", r.result);
                    assert_eq!((r.received, r.copied.bytes), (n, n as u64), "{what}");
                    // One read takes it all, one write gives it all, one read finds the end.
                    let ops = if n == 0 { 1 } else { 3 };
                    assert_eq!(r.copied.ops, ops, "{what}");
                    let extra = testkit::extra_enters(method, r.elapsed);
                    assert!(
                        (ops..=ops + extra).contains(&r.copied.syscalls),
                        "{what}: {:?}",
                        r.elapsed
                    );
                }
            }
        }
    }

    #[test]
    fn every_method_copies_exactly_through_a_one_byte_buffer_and_a_one_page_pipe() {
        let opts = Options {
            buffer: 1,
            pipe_size: 1,
            iovecs: 3,
        };
        let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .unwrap()
            .unwrap() as usize;
        let n = 10_000;
        for method in testkit::available() {
            for kind in KINDS {
                let mut c = copier(method, &opts).unwrap();
                if let Some(p) = c.pipe_size() {
                    assert_eq!(p, page, "{method}: the kernel rounds a pipe up to a page");
                }
                for _ in 0..2 {
                    let r = testkit::relay(&mut *c, kind, n, Feed::Before, CALM);
                    let what = format!("{method} over {kind:?}: {:?}", r.copied);
                    assert!(r.result.is_ok(), "{what}: {:?}", r.result);
                    assert_eq!((r.received, r.copied.bytes), (n, n as u64), "{what}");
                    let chunk = testkit::chunk(method, opts.buffer, c.pipe_size());
                    assert!(r.copied.ops > 2 * n.div_ceil(chunk) as u64, "{what}");
                    if chunk == 1 && method != Method::Async {
                        // A byte per read, each written whole by one write, and the end.
                        assert_eq!(r.copied.ops, 2 * n as u64 + 1, "{what}");
                    }
                }
            }
        }
    }

    #[test]
    fn every_method_waits_out_timeouts_until_the_source_speaks() {
        // Timeouts of 10 ms, a source that starts after 150: each method must retry,
        // not fail (and the async method, on non-blocking sockets, just waits).
        for method in testkit::available() {
            let mut c = copier(method, &Options::default()).unwrap();
            let feed = Feed::During(Duration::from_millis(150));
            let r = testkit::relay(
                &mut *c,
                Kind::Unix,
                100_000,
                feed,
                Duration::from_millis(10),
            );
            let what = format!("{method}: {:?}", r.copied);
            assert!(r.result.is_ok(), "{what}: {:?}", r.result);
            assert_eq!((r.received, r.copied.bytes), (100_000, 100_000), "{what}");
            if method != Method::Async {
                // Before any byte came, a read timed out (a ring's wait, 100 ms) at least
                // once and was made again: more calls than the payload needs.
                let chunk = testkit::chunk(method, Options::default().buffer, c.pipe_size());
                let needed = 2 * 100_000usize.div_ceil(chunk) as u64 + 1;
                assert!(r.copied.syscalls > needed, "{what}");
            }
        }
    }

    #[test]
    fn a_failed_copy_reports_what_it_did_and_leaves_the_copier_ready_for_the_next() {
        for method in testkit::available() {
            let mut c = copier(method, &Options::default()).unwrap();
            // The destination's peer is gone: the first write fails (EPIPE), with the
            // source's bytes read (or, for splice, in the pipe).
            let (src, from) = testkit::pair(Kind::Unix);
            let (to, sink) = testkit::pair(Kind::Unix);
            drop(sink);
            testkit::send(&src, 10_000);
            let mut counts = Copied::default();
            let e = c.copy(&from, &to, &mut counts).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::BrokenPipe, "{method}");
            assert_eq!(counts.bytes, 0, "{method}: {counts:?}");
            assert!(
                counts.ops >= 2,
                "{method}: the read and the failed write: {counts:?}"
            );
            // The next connection gets its own bytes only, every one of them.
            for n in [10_000, 0, 70_000] {
                let r = testkit::relay(&mut *c, Kind::Unix, n, Feed::Before, CALM);
                assert!(r.result.is_ok(), "{method}: {:?}", r.result);
                assert_eq!((r.received, r.copied.bytes), (n, n as u64), "{method}");
            }
        }
    }

    #[test]
    fn every_method_but_buffered_passes_a_lone_small_message_on_at_once() {
        // TCP holds a partial segment back when told more follows (MSG_MORE, as
        // SPLICE_F_MORE says): ~200 ms a message. The quickest of three messages shows
        // it, however loaded the machine. (buffered holds a short read until its buffer
        // fills or the source ends, by design: see its module.)
        for method in testkit::available() {
            if method == Method::Buffered {
                continue;
            }
            let mut c = copier(method, &Options::default()).unwrap();
            let (src, from) = testkit::pair(Kind::Tcp);
            let (to, sink) = testkit::pair(Kind::Tcp);
            from.set_timeouts(Some(CALM)).unwrap();
            to.set_timeouts(Some(CALM)).unwrap();
            let relay = std::thread::spawn(move || {
                let mut counts = Copied::default();
                c.copy(&from, &to, &mut counts).map(|()| counts)
            });
            sink.set_timeouts(Some(CALM)).unwrap();
            let mut quickest = Duration::MAX;
            for _ in 0..3 {
                let start = std::time::Instant::now();
                (&src).write_all(&[7; 64]).unwrap();
                (&sink).read_exact(&mut [0; 64]).unwrap();
                quickest = quickest.min(start.elapsed());
            }
            src.shutdown_write().unwrap();
            let counts = relay.join().unwrap().unwrap();
            assert_eq!(counts.bytes, 192, "{method}");
            assert!(
                quickest < Duration::from_millis(150),
                "{method}: {quickest:?}"
            );
        }
    }

    /// Run by the next test in a process of its own: it raises the Ctrl-C flag, which no
    /// other test in this process must see.
    #[test]
    #[ignore = "run by every_method_stops_with_interrupted_on_ctrl_c, in its own process"]
    fn ctrl_c_child() {
        let mut runs = Vec::new();
        for method in testkit::available() {
            for kind in KINDS {
                runs.push(std::thread::spawn(move || {
                    let mut c = copier(method, &Options::default()).unwrap();
                    let (src, from) = testkit::pair(kind);
                    let (to, sink) = testkit::pair(kind);
                    from.set_timeouts(Some(Duration::from_millis(10))).unwrap();
                    to.set_timeouts(Some(Duration::from_millis(10))).unwrap();
                    // 1000 bytes, then a source that stays open and silent.
                    (&src).write_all(testkit::pattern(1000)).unwrap();
                    let reader = std::thread::spawn(move || testkit::receive(&sink, 1000));
                    let mut counts = Copied::default();
                    let r = c.copy(&from, &to, &mut counts);
                    let stopped = std::time::Instant::now();
                    drop((from, to, src));
                    let received = reader.join().unwrap();
                    (method, kind, r, counts, received, stopped)
                }));
            }
        }
        std::thread::sleep(Duration::from_millis(300));
        let raised = std::time::Instant::now();
        crate::interrupt::request();
        for run in runs {
            let (method, kind, r, counts, received, stopped) = run.join().unwrap();
            let what = format!("{method} over {kind:?}: {counts:?}");
            assert_eq!(
                r.map_err(|e| e.kind()),
                Err(io::ErrorKind::Interrupted),
                "{what}"
            );
            assert!(stopped >= raised, "{what}: stopped before Ctrl-C");
            assert!(
                stopped - raised < Duration::from_secs(1),
                "{what}: slow to stop"
            );
            // What was written arrived; only the buffered method may still hold some
            // (its writer keeps a short read until its buffer fills or the source ends).
            assert_eq!(counts.bytes, received as u64, "{what}");
            if method != Method::Buffered {
                assert_eq!(received, 1000, "{what}");
            }
        }
    }

    #[test]
    fn every_method_stops_with_interrupted_on_ctrl_c() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "copy::tests::ctrl_c_child", "--ignored"])
            .args(["--test-threads", "1"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("1 passed"),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

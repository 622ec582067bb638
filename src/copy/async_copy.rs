//! `async`: tokio's `copy_buf` from a `BufReader` of `--buffer` bytes, on a
//! single-threaded runtime of the copier's own (the io.Copy of Rust: what a tokio proxy
//! does with each connection).
//!
//! For the copy, both sockets are made non-blocking and registered with the runtime's
//! reactor (epoll, edge-triggered); each read and write is made by the reader and
//! writer here, so each is counted, those that find nothing to do (EAGAIN) included.
//! The reactor's epoll_wait is not counted. The sockets go back to blocking mode after.
//!
//! Ctrl-C is seen by a 100 ms timer raced against the copy (the sockets' timeouts do not
//! apply to non-blocking calls).

use std::io;

use super::{Copier, Options};

#[cfg(not(feature = "async"))]
/// The async method in a build without the `async` feature: unavailable.
///
/// # Errors
/// Always `Unsupported`.
pub fn new(_opts: &Options) -> io::Result<Box<dyn Copier>> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "this sockbench was built without the async feature",
    ))
}

#[cfg(feature = "async")]
/// A copier of the async method.
///
/// # Errors
/// If the runtime cannot be built.
pub fn new(opts: &Options) -> io::Result<Box<dyn Copier>> {
    Ok(Box::new(imp::Async::new(opts)?))
}

#[cfg(feature = "async")]
mod imp {
    use std::future::Future;
    use std::io::{self, Read, Write};
    use std::os::fd::{AsFd, BorrowedFd};
    use std::pin::Pin;
    use std::task::{ready, Context, Poll};
    use std::time::Duration;

    use tokio::io::unix::AsyncFd;
    use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};

    use super::super::{retry_unless_interrupted, Copied, Copier, End, Options};

    /// How often a copy looks whether Ctrl-C came.
    const TICK: Duration = Duration::from_millis(100);

    /// A current-thread runtime (I/O and timers), reused for every connection.
    #[derive(Debug)]
    pub struct Async {
        rt: tokio::runtime::Runtime,
        capacity: usize,
    }

    impl Async {
        /// A copier whose reader buffers `opts.buffer` bytes.
        ///
        /// # Errors
        /// If the runtime cannot be built (its epoll or eventfd).
        pub fn new(opts: &Options) -> io::Result<Async> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .build()?;
            Ok(Async {
                rt,
                capacity: opts.buffer.max(1),
            })
        }
    }

    /// The source end, read by its own calls, each counted.
    #[derive(Debug)]
    struct Reader<'a> {
        end: &'a End,
        fd: AsyncFd<BorrowedFd<'a>>,
        counts: Copied,
    }

    impl<'a> Reader<'a> {
        /// `end` (non-blocking) registered for reading with the current runtime.
        ///
        /// # Errors
        /// If the reactor cannot take it.
        fn new(end: &'a End) -> io::Result<Reader<'a>> {
            Ok(Reader {
                end,
                fd: crate::sys::async_fd::register(end.as_fd(), Interest::READABLE)?,
                counts: Copied::default(),
            })
        }
    }

    impl AsyncRead for Reader<'_> {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let me = self.get_mut();
            loop {
                let mut ready = ready!(me.fd.poll_read_ready(cx))?;
                let space = buf.initialize_unfilled();
                me.counts.syscalls += 1;
                me.counts.ops += 1;
                let mut end = me.end;
                // try_io forgets the readiness on EAGAIN, so the next turn waits for
                // the reactor to see more.
                match ready.try_io(|_| end.read(space)) {
                    Ok(Ok(n)) => {
                        buf.advance(n);
                        return Poll::Ready(Ok(()));
                    }
                    Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                    Ok(Err(e)) => return Poll::Ready(Err(e)),
                    Err(_would_block) => {}
                }
            }
        }
    }

    /// The destination end, written by its own calls, each counted.
    #[derive(Debug)]
    struct Writer<'a> {
        end: &'a End,
        fd: AsyncFd<BorrowedFd<'a>>,
        counts: Copied,
    }

    impl<'a> Writer<'a> {
        /// `end` (non-blocking) registered for writing with the current runtime.
        ///
        /// # Errors
        /// If the reactor cannot take it.
        fn new(end: &'a End) -> io::Result<Writer<'a>> {
            Ok(Writer {
                end,
                fd: crate::sys::async_fd::register(end.as_fd(), Interest::WRITABLE)?,
                counts: Copied::default(),
            })
        }
    }

    impl AsyncWrite for Writer<'_> {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let me = self.get_mut();
            loop {
                let mut ready = ready!(me.fd.poll_write_ready(cx))?;
                me.counts.syscalls += 1;
                me.counts.ops += 1;
                let mut end = me.end;
                match ready.try_io(|_| end.write(buf)) {
                    Ok(Ok(n)) => {
                        me.counts.bytes += n as u64;
                        return Poll::Ready(Ok(n));
                    }
                    Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                    Ok(Err(e)) => return Poll::Ready(Err(e)),
                    Err(_would_block) => {}
                }
            }
        }

        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(self.end.shutdown_write())
        }
    }

    fn set_nonblocking(end: &End, on: bool) -> io::Result<()> {
        match end {
            End::Tcp(s) => s.set_nonblocking(on),
            End::Unix(s) => s.set_nonblocking(on),
        }
    }

    /// Run `copy` until it ends, or until Ctrl-C (seen at the next [`TICK`]).
    async fn unless_interrupted(copy: impl Future<Output = io::Result<()>>) -> io::Result<()> {
        let mut copy = std::pin::pin!(copy);
        let start = tokio::time::Instant::now() + TICK;
        let mut ticks = tokio::time::interval_at(start, TICK);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = copy.as_mut().poll(cx) {
                return Poll::Ready(r);
            }
            // Until the timer is pending again, so that it wakes this task next time.
            while ticks.poll_tick(cx).is_ready() {
                retry_unless_interrupted()?;
            }
            Poll::Pending
        })
        .await
    }

    /// One copy on the runtime; the counts of both ends go to `counts` however it ends.
    async fn relay(from: &End, to: &End, capacity: usize, counts: &mut Copied) -> io::Result<()> {
        let mut reader = tokio::io::BufReader::with_capacity(capacity, Reader::new(from)?);
        let mut writer = Writer::new(to)?;
        let r = unless_interrupted(async {
            tokio::io::copy_buf(&mut reader, &mut writer).await?;
            writer.shutdown().await
        })
        .await;
        *counts = counts.plus(reader.get_ref().counts).plus(writer.counts);
        r
    }

    impl Copier for Async {
        fn copy(&mut self, from: &End, to: &End, counts: &mut Copied) -> io::Result<()> {
            set_nonblocking(from, true)?;
            let r = set_nonblocking(to, true)
                .and_then(|()| self.rt.block_on(relay(from, to, self.capacity, counts)));
            // Blocking again, whatever happened: the caller's other methods (and its
            // timeouts) expect blocking sockets.
            let restored = set_nonblocking(from, false).and(set_nonblocking(to, false));
            r.and(restored)
        }
    }
}

#[cfg(all(test, feature = "async"))]
mod tests {
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    use nix::fcntl::{fcntl, FcntlArg, OFlag};

    use super::super::testkit::{self, Feed, Kind};
    use super::super::{Copied, End};
    use super::*;

    fn blocking(end: &End) -> bool {
        let flags = fcntl(end.as_fd().as_raw_fd(), FcntlArg::F_GETFL).unwrap();
        !OFlag::from_bits_truncate(flags).contains(OFlag::O_NONBLOCK)
    }

    use std::os::fd::AsFd;

    #[test]
    fn the_sockets_are_blocking_again_after_a_copy_whether_it_worked_or_failed() {
        let mut c = new(&Options::default()).unwrap();
        let r = testkit::relay(
            &mut *c,
            Kind::Tcp,
            10_000,
            Feed::During(Duration::ZERO),
            Duration::from_secs(2),
        );
        assert!(r.result.is_ok(), "{:?}", r.result);
        for fail in [false, true] {
            let (src, from) = testkit::pair(Kind::Unix);
            let (to, sink) = testkit::pair(Kind::Unix);
            testkit::send(&src, 1000);
            if fail {
                drop(sink);
            } else {
                std::thread::spawn(move || testkit::receive(&sink, 1000));
            }
            let mut counts = Copied::default();
            assert_eq!(c.copy(&from, &to, &mut counts).is_err(), fail);
            assert!(blocking(&from) && blocking(&to), "failed: {fail}");
        }
    }
}

//! `async` (the D benchmark's `fiber`): a tokio runtime with [`Ctx::threads`] worker
//! threads, each pinned to the next of `--cpus`; one task accepts, and every connection
//! is a task of its own that drives its [`Session`](crate::http::Session) with `read`
//! and `write` awaited on a nonblocking socket (tokio's reactor is epoll underneath, and
//! its scheduler moves the tasks between the workers).
//!
//! Each task counts for itself and adds its counters to the total as it ends. An idle
//! timer per connection is only reset when it fires (then to [`Ctx::idle_timeout`] after
//! the last byte that arrived or left), not on every read or write. Every wait of a task
//! races a stop signal (a `watch` channel): the main thread looks at [`Ctx::stopping`]
//! every [`TICK`](super::TICK), then stops the accepting task, lets every connection
//! task close its connection (as stopped, within the same wake-up), waits for them (as
//! long as they keep closing: half a second without one closing, or 10 s in all) and
//! shuts the runtime down.
//!
//! The tasks run on the runtime's threads and so must own what they use: they share a
//! copy of the [`Ctx`] (same answers, timeouts, CPUs and log level), whose connection
//! numbers and CPU assignment start afresh.

use super::{Ctx, Listener};

/// Whether the model can run here (a build with the `async` feature).
///
/// # Errors
/// Why not.
#[cfg(not(feature = "async"))]
pub fn available() -> Result<(), String> {
    Err("this build has no async support (built without the async feature)".into())
}

/// Serve until the stop (never, in this build).
///
/// # Errors
/// Always: the build has no async runtime.
#[cfg(not(feature = "async"))]
pub fn serve(_listener: Listener, _ctx: &Ctx) -> anyhow::Result<crate::http::Counters> {
    anyhow::bail!("this build has no async support (built without the async feature)")
}

#[cfg(feature = "async")]
pub use enabled::{available, serve};

#[cfg(feature = "async")]
mod enabled {
    use std::future::Future;
    use std::io;
    use std::pin::{pin, Pin};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc, Mutex};
    use std::task::Poll;
    use std::time::{Duration, Instant};

    use anyhow::Context;
    use socket2::SockAddr;
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
    use tokio::net::{TcpListener, UnixListener};
    use tokio::runtime::{Builder, Runtime};
    use tokio::sync::watch;
    use tokio::time::Sleep;

    use super::{Ctx, Listener};
    use crate::http::{Counters, Session, Site};
    use crate::model::{is_exhaustion, is_hangup, End, STOP_CHECK, TICK};

    /// Longest a stop waits for the connection tasks to close while none of them does
    /// (10,000 connections on one loaded CPU take longer than this to close between
    /// them, but each closes within it).
    const DRAIN: Duration = Duration::from_millis(500);
    /// Longest a stop waits for the connection tasks to close in all.
    const DRAIN_MAX: Duration = Duration::from_secs(10);

    /// Whether the model can run here: always, in a build with the `async` feature.
    ///
    /// # Errors
    /// None.
    pub fn available() -> Result<(), String> {
        Ok(())
    }

    /// What every task shares.
    struct Shared {
        ctx: Ctx,
        /// The stop, for a task to look at before it waits.
        stop: AtomicBool,
        /// What the ended tasks counted.
        total: Mutex<Counters>,
        /// Tasks still running (the accepting one and the connections).
        tasks: AtomicUsize,
        /// The listener's address, for the log of a Unix socket's peer.
        local: SockAddr,
    }

    impl Shared {
        fn add(&self, c: Counters) {
            *self.total.lock().unwrap_or_else(|e| e.into_inner()) += c;
            self.tasks.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// A copy of `ctx` the tasks can own (a `Site` is built from its body and log level).
    fn copy(ctx: &Ctx) -> Ctx {
        Ctx::new(
            Site::new(ctx.site.body.len(), ctx.site.verbose),
            ctx.deadline,
            ctx.threads,
            ctx.idle_timeout,
            ctx.cpus.clone(),
        )
    }

    /// Serve on a runtime of [`Ctx::threads`] workers until [`Ctx::stopping`].
    ///
    /// # Errors
    /// The runtime cannot start, a worker cannot be pinned, or the listener cannot be
    /// registered with the runtime.
    pub fn serve(listener: Listener, ctx: &Ctx) -> anyhow::Result<Counters> {
        let shared = Arc::new(Shared {
            ctx: copy(ctx),
            stop: AtomicBool::new(false),
            total: Mutex::new(Counters::default()),
            tasks: AtomicUsize::new(0),
            local: listener.addr.clone(),
        });
        let (pinned_tx, pinned) = mpsc::channel();
        let rt = runtime(&shared, pinned_tx)?;
        for _ in 0..ctx.threads {
            match pinned.recv_timeout(Duration::from_secs(1)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    rt.shutdown_background();
                    return Err(e.into());
                }
                Err(_) => break,
            }
        }
        let (stop_tx, stop_rx) = watch::channel(false);
        let tcp = listener.is_tcp();
        listener.socket.set_nonblocking(true)?;
        let acceptor = {
            let _enter = rt.enter();
            if tcp {
                Acceptor::Tcp(TcpListener::from_std(listener.socket.into())?)
            } else {
                let std = std::os::unix::net::UnixListener::from(std::os::fd::OwnedFd::from(
                    listener.socket,
                ));
                Acceptor::Unix(UnixListener::from_std(std)?)
            }
        };
        shared.tasks.fetch_add(1, Ordering::AcqRel);
        rt.spawn(accept_loop(acceptor, Arc::clone(&shared), stop_rx));
        while !ctx.stopping() {
            std::thread::sleep(STOP_CHECK);
        }
        shared.stop.store(true, Ordering::SeqCst);
        let _ = stop_tx.send(true);
        // Every task adds its counts to the total as it closes: wait for all of them
        // while they keep closing, so no connection's requests go uncounted.
        let started = Instant::now();
        let mut left = shared.tasks.load(Ordering::Acquire);
        let mut moved = Instant::now();
        while left > 0 && moved.elapsed() < DRAIN && started.elapsed() < DRAIN_MAX {
            std::thread::sleep(Duration::from_millis(2));
            let now = shared.tasks.load(Ordering::Acquire);
            if now < left {
                moved = Instant::now();
            }
            left = now;
        }
        rt.shutdown_timeout(TICK);
        let total = *shared.total.lock().unwrap_or_else(|e| e.into_inner());
        Ok(total)
    }

    /// The runtime; each worker pins itself and says how that went on `pinned`. tokio
    /// panics when it cannot start a thread: that becomes an error here.
    fn runtime(
        shared: &Arc<Shared>,
        pinned: mpsc::Sender<io::Result<()>>,
    ) -> anyhow::Result<Runtime> {
        let on_start = Arc::clone(shared);
        let pinned = Mutex::new(pinned);
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Builder::new_multi_thread()
                .worker_threads(shared.ctx.threads)
                .thread_name("sockbench-async")
                .enable_io()
                .enable_time()
                .on_thread_start(move || {
                    let r = on_start.ctx.pin_thread();
                    if let Ok(tx) = pinned.lock() {
                        let _ = tx.send(r);
                    }
                })
                .build()
        }));
        match built {
            Ok(r) => r.context("cannot start the async runtime"),
            Err(_) => anyhow::bail!(
                "cannot start the async runtime's {} worker threads: the system is out of threads or memory (try fewer --threads)",
                shared.ctx.threads
            ),
        }
    }

    /// The listener, registered with the runtime.
    enum Acceptor {
        Tcp(TcpListener),
        Unix(UnixListener),
    }

    /// Accept until the stop; a task per connection.
    async fn accept_loop(acceptor: Acceptor, shared: Arc<Shared>, stop: watch::Receiver<bool>) {
        let mut c = Counters::default();
        let mut watcher = stop.clone();
        let mut stopped = pin!(watcher.changed());
        loop {
            if shared.stop.load(Ordering::Relaxed) {
                break;
            }
            let accepted = match &acceptor {
                Acceptor::Tcp(l) => {
                    race(
                        async {
                            let (s, peer) = l.accept().await?;
                            let _ = s.set_nodelay(true);
                            Ok((Stream::Tcp(s), SockAddr::from(peer)))
                        },
                        stopped.as_mut(),
                    )
                    .await
                }
                Acceptor::Unix(l) => {
                    race(
                        async {
                            let (s, _) = l.accept().await?;
                            Ok((Stream::Unix(s), shared.local.clone()))
                        },
                        stopped.as_mut(),
                    )
                    .await
                }
            };
            let result: io::Result<(Stream, SockAddr)> = match accepted {
                Some(r) => r,
                None => break,
            };
            match result {
                Ok((stream, peer)) => {
                    let id = shared.ctx.next_id();
                    shared.ctx.accepted(id, &peer, &mut c);
                    shared.tasks.fetch_add(1, Ordering::AcqRel);
                    let (shared, stop) = (Arc::clone(&shared), stop.clone());
                    match stream {
                        Stream::Tcp(s) => tokio::spawn(connection(s, id, shared, stop)),
                        Stream::Unix(s) => tokio::spawn(connection(s, id, shared, stop)),
                    };
                }
                Err(e) if retry_accept(&e) => {}
                Err(e) => {
                    shared.ctx.refused(format!("accept failed: {e}"), &mut c);
                    if is_exhaustion(&e)
                        && race(tokio::time::sleep(TICK), stopped.as_mut())
                            .await
                            .is_none()
                    {
                        break;
                    }
                }
            }
        }
        // The listener closes before the task counts as ended.
        drop(acceptor);
        shared.add(c);
    }

    /// Whether an accept error is an interruption or one of the network errors accept(2)
    /// says to retry after (as `accept_nonblocking` does).
    fn retry_accept(e: &io::Error) -> bool {
        e.kind() == io::ErrorKind::Interrupted || crate::model::is_network_error(e)
    }

    /// An accepted connection.
    enum Stream {
        Tcp(tokio::net::TcpStream),
        Unix(tokio::net::UnixStream),
    }

    /// `fut`'s output, or `None` if `stopped` is ready first.
    async fn race<F: Future>(fut: F, mut stopped: Pin<&mut impl Future>) -> Option<F::Output> {
        let mut fut = pin!(fut);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(v) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(v));
            }
            if stopped.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await
    }

    /// How a connection's wait ended.
    enum Step<T> {
        /// The I/O finished.
        Done(T),
        /// Nothing arrived within the idle timeout.
        Idle,
        /// The server is stopping.
        Stopped,
    }

    /// Wait for `fut`, unless the stop comes first or nothing moved since `last` for
    /// `timeout`. The timer fires at most once per timeout: when it does early (bytes came
    /// since it was set), it is set again from `last`.
    async fn guard<F: Future>(
        fut: F,
        mut idle: Pin<&mut Sleep>,
        mut stopped: Pin<&mut impl Future>,
        last: Instant,
        timeout: Duration,
    ) -> Step<F::Output> {
        let mut fut = pin!(fut);
        std::future::poll_fn(|cx| {
            // The I/O first: bytes read must reach the session even if the stop came too.
            if let Poll::Ready(v) = fut.as_mut().poll(cx) {
                return Poll::Ready(Step::Done(v));
            }
            if stopped.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Step::Stopped);
            }
            while idle.as_mut().poll(cx).is_ready() {
                let due = last + timeout;
                if Instant::now() >= due {
                    return Poll::Ready(Step::Idle);
                }
                idle.as_mut().reset(tokio::time::Instant::from_std(due));
            }
            Poll::Pending
        })
        .await
    }

    /// Serve one connection; count it into the total as it ends.
    async fn connection<S: AsyncRead + AsyncWrite + Unpin>(
        mut io: S,
        id: u64,
        shared: Arc<Shared>,
        mut stop: watch::Receiver<bool>,
    ) {
        let ctx = &shared.ctx;
        let timeout = ctx.idle_timeout;
        let mut c = Counters::default();
        let mut s = Session::new(id);
        let mut last = Instant::now();
        let mut idle = pin!(tokio::time::sleep(timeout));
        let mut stopped = pin!(stop.changed());
        let end = 'conn: loop {
            if shared.stop.load(Ordering::Relaxed) {
                break End::Stopped;
            }
            while !s.output().is_empty() {
                let step = guard(
                    io.write(s.output()),
                    idle.as_mut(),
                    stopped.as_mut(),
                    last,
                    timeout,
                )
                .await;
                let n = match step {
                    Step::Done(Ok(0)) => break 'conn End::Error(io::ErrorKind::WriteZero.into()),
                    Step::Done(Ok(n)) => n,
                    Step::Done(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Step::Done(Err(e)) if is_hangup(&e) => break 'conn End::Finished,
                    Step::Done(Err(e)) => break 'conn End::Error(e),
                    Step::Idle => break 'conn End::Idle,
                    Step::Stopped => break 'conn End::Stopped,
                };
                // A client downloading a long answer is not idle.
                last = Instant::now();
                s.sent(n, &ctx.site, &mut c);
            }
            // With its answers all sent, a session that wants no input is finished.
            if s.finished() || !s.wants_read() {
                break End::Finished;
            }
            let step = guard(
                io.read(s.read_buf()),
                idle.as_mut(),
                stopped.as_mut(),
                last,
                timeout,
            )
            .await;
            match step {
                Step::Done(Ok(0)) => s.peer_closed(),
                Step::Done(Ok(n)) => {
                    s.received(n, &ctx.site, &mut c);
                    // Part of a request is no sign of life (a head dribbled a byte at
                    // a time): only a whole one restarts the idle clock.
                    if !s.mid_request() {
                        last = Instant::now();
                    }
                }
                Step::Done(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Step::Done(Err(e)) if is_hangup(&e) => {
                    s.peer_closed();
                    break End::Finished;
                }
                Step::Done(Err(e)) => break End::Error(e),
                Step::Idle => break End::Idle,
                Step::Stopped => break End::Stopped,
            }
        };
        ctx.closed(&s, end, &mut c);
        drop(io);
        shared.add(c);
    }
}

#[cfg(all(test, feature = "async"))]
mod tests {
    use super::super::poll::tests::serves_every_kind_of_client;

    #[test]
    fn async_serves_every_kind_of_client() {
        serves_every_kind_of_client(super::serve, 2);
    }
}

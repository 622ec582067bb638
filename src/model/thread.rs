//! `thread`: an OS thread per connection, with blocking reads and writes (the classic
//! forking server, with threads). The calling thread accepts: it waits on the listener
//! with poll(2) for at most [`STOP_CHECK`], accepts every waiting connection and starts
//! a thread for each. A connection's thread reads and writes with SO_RCVTIMEO and
//! SO_SNDTIMEO set to `CALL_WAIT` (50 ms), so a blocked call returns within it and the
//! thread sees the stop flag and its idle time.
//!
//! Finished threads are joined at each tick (their counts added up), and when the server
//! stops every thread is joined: none is left behind. A thread that cannot be started is
//! a refused connection, not a failed server.
//!
//! This file does not parse HTTP: a connection's thread drives the shared
//! [`crate::http::Session`], as every model does.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use socket2::Socket;

use super::{accept_nonblocking, is_exhaustion, is_hangup, Ctx, End, Listener, STOP_CHECK, TICK};
use crate::http::{Counters, Session};

/// Longest a connection's blocking call waits before its thread looks at the stop flag
/// and its idle time: the stop joins every thread, so this bounds the stop (promised
/// within 100 ms), and each idle connection's thread wakes this often.
const CALL_WAIT: Duration = Duration::from_millis(50);

/// Stack of each connection's thread: a session keeps its buffers on the heap, so a
/// small stack lets thousands of connections live in little memory.
const STACK_BYTES: usize = 64 * 1024;

/// Serve with the `thread` model until [`Ctx::stopping`].
///
/// # Errors
/// The listener cannot be made nonblocking or waited on, or the accepting thread
/// cannot be pinned.
pub fn serve(listener: Listener, ctx: &Ctx) -> anyhow::Result<Counters> {
    ctx.pin_thread()?;
    let listener = listener.socket;
    listener.set_nonblocking(true)?;
    std::thread::scope(|scope| accept_loop(scope, &listener, ctx))
}

/// Accept until stopping, a thread per connection; then join them all.
fn accept_loop<'scope>(
    scope: &'scope Scope<'scope, '_>,
    listener: &Socket,
    ctx: &'scope Ctx,
) -> anyhow::Result<Counters> {
    let mut c = Counters::default();
    let mut threads: Vec<ScopedJoinHandle<'scope, Counters>> = Vec::new();
    let mut last_reap = Instant::now();
    // After running out of descriptors, accepting resumes on the next tick.
    let mut accept_again: Option<Instant> = None;
    let result = loop {
        if ctx.stopping() {
            break Ok(());
        }
        let readable = if accept_again.is_some_and(|t| Instant::now() < t) {
            std::thread::sleep(STOP_CHECK);
            false
        } else {
            accept_again = None;
            match wait_readable(listener) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => false,
                Err(e) => break Err(e).context("poll(2) on the listener failed"),
            }
        };
        if readable {
            loop {
                match accept_nonblocking(listener) {
                    Ok(Some((sock, peer))) => {
                        let id = ctx.next_id();
                        ctx.accepted(id, &peer, &mut c);
                        match start(scope, sock, id, ctx) {
                            Ok(h) => threads.push(h),
                            Err(e) => ctx.refused(format!("cannot start its thread: {e}"), &mut c),
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        ctx.refused(format!("accept failed: {e}"), &mut c);
                        if is_exhaustion(&e) {
                            accept_again = Some(Instant::now() + TICK);
                        }
                        break;
                    }
                }
            }
        }
        if last_reap.elapsed() >= TICK {
            last_reap = Instant::now();
            threads = reap(threads, ctx, &mut c, false);
        }
    };
    // Every connection's thread sees the stop within a tick (a failure of the
    // listener stops them too).
    if result.is_err() {
        crate::interrupt::request();
    }
    reap(threads, ctx, &mut c, true);
    result.map(|()| c)
}

/// Wait up to [`STOP_CHECK`] for the listener to have a connection.
fn wait_readable(listener: &Socket) -> io::Result<bool> {
    let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
    let timeout = PollTimeout::try_from(STOP_CHECK).unwrap_or(PollTimeout::MAX);
    let n = poll(&mut fds, timeout)?;
    Ok(n > 0)
}

/// Join the threads that ended (all of them when `all`), adding up their counts; the
/// ones still running.
fn reap<'scope>(
    threads: Vec<ScopedJoinHandle<'scope, Counters>>,
    ctx: &Ctx,
    c: &mut Counters,
    all: bool,
) -> Vec<ScopedJoinHandle<'scope, Counters>> {
    let mut running = Vec::with_capacity(if all { 0 } else { threads.len() });
    for h in threads {
        if !all && !h.is_finished() {
            running.push(h);
            continue;
        }
        match h.join() {
            Ok(counted) => *c += counted,
            Err(_) => {
                // A bug, not the client's doing: count it and keep serving.
                c.errors += 1;
                if ctx.site.verbose >= 1 {
                    crate::http::log(format_args!("a connection's thread panicked"));
                }
            }
        }
    }
    running
}

/// Start the thread of connection `id`.
fn start<'scope>(
    scope: &'scope Scope<'scope, '_>,
    sock: Socket,
    id: u64,
    ctx: &'scope Ctx,
) -> io::Result<ScopedJoinHandle<'scope, Counters>> {
    std::thread::Builder::new()
        .name("sockbench-conn".into())
        .stack_size(STACK_BYTES)
        .spawn_scoped(scope, move || {
            let mut c = Counters::default();
            let mut session = Session::new(id);
            let end = match ctx.pin_thread() {
                Ok(()) => converse(&sock, &mut session, ctx, &mut c),
                Err(e) => End::Error(e),
            };
            ctx.closed(&session, end, &mut c);
            c
        })
}

/// Make an accepted (nonblocking) connection blocking, each call bounded by
/// [`CALL_WAIT`].
fn set_blocking(sock: &Socket) -> io::Result<()> {
    sock.set_nonblocking(false)?;
    sock.set_read_timeout(Some(CALL_WAIT))?;
    sock.set_write_timeout(Some(CALL_WAIT))
}

/// Whether a blocking call returned because its SO_RCVTIMEO or SO_SNDTIMEO ran out.
fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Serve one connection with blocking calls until it ends; how it ended.
///
/// Answers are written in full before the next read (so a client that does not read
/// stops being read, as [`crate::http::session::OUT_HIGH`] does for the other models);
/// the idle time counts from the last byte received, as in the other models.
fn converse(sock: &Socket, s: &mut Session, ctx: &Ctx, c: &mut Counters) -> End {
    if let Err(e) = set_blocking(sock) {
        return End::Error(e);
    }
    let site = &ctx.site;
    let mut last = Instant::now();
    loop {
        if ctx.stopping() {
            return End::Stopped;
        }
        if !s.output().is_empty() {
            match (&*sock).write(s.output()) {
                Ok(0) => return End::Error(io::ErrorKind::WriteZero.into()),
                Ok(n) => s.sent(n, site, c),
                Err(e) if timed_out(&e) => {
                    if last.elapsed() >= ctx.idle_timeout {
                        return End::Idle;
                    }
                }
                Err(e) if is_hangup(&e) => return End::Finished,
                Err(e) => return End::Error(e),
            }
            continue;
        }
        if s.finished() {
            return End::Finished;
        }
        // Nothing to write and not finished: the session wants more.
        match (&*sock).read(s.read_buf()) {
            Ok(0) => {
                last = Instant::now();
                s.peer_closed();
            }
            Ok(n) => {
                s.received(n, site, c);
                // Part of a request is no sign of life (a head dribbled a byte at a
                // time): only a whole one restarts the idle clock.
                if !s.mid_request() {
                    last = Instant::now();
                } else if last.elapsed() >= ctx.idle_timeout {
                    return End::Idle;
                }
            }
            Err(e) if timed_out(&e) => {
                if last.elapsed() >= ctx.idle_timeout {
                    return End::Idle;
                }
            }
            Err(e) if is_hangup(&e) => {
                s.peer_closed();
                return End::Finished;
            }
            Err(e) => return End::Error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::poll::tests::serves_every_kind_of_client;

    #[test]
    fn thread_serves_every_kind_of_client() {
        serves_every_kind_of_client(super::serve, 2);
    }
}

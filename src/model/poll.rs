//! `poll`: one thread, poll(2), level-triggered; and the loop it shares with `select`.
//!
//! Each round the loop asks a `Waiter` to wait (at most [`STOP_CHECK`]) for the listener and
//! its connections: a connection is watched for input only while its session reads
//! ([`crate::http::Session::wants_read`]: not after `Connection: close`, nor while a
//! megabyte of answers waits), and for room only while answers wait. Every ready
//! connection is [`pump`]ed (nonblocking, as in every model), the listener is drained,
//! and idle connections are swept every tick. The waiters differ only in the call:
//! `Poll` builds a `pollfd` array each round (here), `select` two `fd_set`s (in
//! `select.rs`, which also refuses the descriptors an `fd_set` cannot hold).
//!
//! This file does not parse HTTP: it drives the shared [`crate::http::Session`].

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use socket2::Socket;

use super::{
    accept_nonblocking, is_exhaustion, pump, Ctx, End, Listener, Pumped, STOP_CHECK, TICK,
};
use crate::http::{Counters, Session};

/// Serve with the `poll` model until [`Ctx::stopping`].
///
/// # Errors
/// The thread cannot be pinned, or poll(2) fails.
pub fn serve(listener: Listener, ctx: &Ctx) -> anyhow::Result<Counters> {
    ctx.pin_thread()?;
    run(&listener.socket, ctx, &mut Poll)
}

/// One connection of a level-triggered loop.
pub(super) struct Conn {
    sock: Socket,
    session: Session,
    last: Instant,
}

impl Conn {
    /// Its descriptor.
    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }

    /// Whether to wait for input: the session reads more.
    pub(super) fn wants_read(&self) -> bool {
        self.session.wants_read()
    }

    /// Whether to wait for room: answers wait to be written.
    pub(super) fn wants_write(&self) -> bool {
        !self.session.output().is_empty()
    }
}

/// A level-triggered wait over the listener and every connection.
pub(super) trait Waiter {
    /// The call, for errors (`poll(2)`).
    const NAME: &'static str;

    /// Why a connection on descriptor `fd` cannot be watched (`None`: it can).
    fn cannot_watch(&self, _fd: RawFd) -> Option<String> {
        None
    }

    /// Wait up to `timeout` until the listener (when given) is readable or a connection
    /// is ready for what it [wants](Conn::wants_read); set `ready` to one flag per
    /// connection and return whether the listener is ready.
    ///
    /// # Errors
    /// The call fails (EINTR included: the loop retries).
    fn wait(
        &mut self,
        listener: Option<BorrowedFd<'_>>,
        conns: &[Conn],
        timeout: Duration,
        ready: &mut Vec<bool>,
    ) -> io::Result<bool>;
}

/// poll(2), with an array of `pollfd` built each round.
pub(super) struct Poll;

impl Waiter for Poll {
    const NAME: &'static str = "poll(2)";

    fn wait(
        &mut self,
        listener: Option<BorrowedFd<'_>>,
        conns: &[Conn],
        timeout: Duration,
        ready: &mut Vec<bool>,
    ) -> io::Result<bool> {
        let mut fds = Vec::with_capacity(conns.len() + 1);
        if let Some(l) = listener {
            fds.push(PollFd::new(l, PollFlags::POLLIN));
        }
        let first = fds.len();
        for c in conns {
            let mut flags = PollFlags::empty();
            if c.wants_read() {
                flags |= PollFlags::POLLIN;
            }
            if c.wants_write() {
                flags |= PollFlags::POLLOUT;
            }
            fds.push(PollFd::new(c.fd(), flags));
        }
        let timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
        poll(&mut fds, timeout)?;
        // Flags nix does not know of (`None`) are still something to look at.
        let fired = |f: &PollFd<'_>| f.any().unwrap_or(true);
        ready.clear();
        ready.extend(fds[first..].iter().map(fired));
        Ok(first == 1 && fired(&fds[0]))
    }
}

/// The loop: wait, pump what is ready, accept, sweep idle connections every tick; at
/// the stop, close everything. What it counted.
///
/// # Errors
/// The listener cannot be made nonblocking, or the wait fails.
pub(super) fn run<W: Waiter>(
    listener: &Socket,
    ctx: &Ctx,
    waiter: &mut W,
) -> anyhow::Result<Counters> {
    listener.set_nonblocking(true)?;
    let mut conns: Vec<Conn> = Vec::new();
    let mut ready: Vec<bool> = Vec::new();
    let mut c = Counters::default();
    let mut last_sweep = Instant::now();
    // After running out of descriptors, the listener is left out of the wait for a tick
    // (it stays readable: watching it would spin).
    let mut accept_again: Option<Instant> = None;
    while !ctx.stopping() {
        if accept_again.is_some_and(|t| Instant::now() >= t) {
            accept_again = None;
        }
        let watched = accept_again.is_none().then(|| listener.as_fd());
        let listener_ready = match waiter.wait(watched, &conns, STOP_CHECK, &mut ready) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("{} failed", W::NAME)),
        };
        let now = Instant::now();
        // From the end, so that closing (a swap_remove) moves only a connection done with.
        for i in (0..conns.len()).rev() {
            if !ready[i] {
                continue;
            }
            let conn = &mut conns[i];
            match pump(&conn.sock, &mut conn.session, &ctx.site, &mut c) {
                Pumped::Open { active: read, .. } => {
                    // Part of a request is no sign of life: only a whole one (or a
                    // close) restarts the idle clock.
                    if read && !conn.session.mid_request() {
                        conn.last = now;
                    }
                }
                Pumped::Done(end) => close(&mut conns, i, end, ctx, &mut c),
            }
        }
        if listener_ready {
            if let Err(e) = accept(listener, &mut conns, now, ctx, waiter, &mut c) {
                if is_exhaustion(&e) {
                    accept_again = Some(now + TICK);
                }
            }
        }
        if now.duration_since(last_sweep) >= TICK {
            last_sweep = now;
            for i in (0..conns.len()).rev() {
                if now.duration_since(conns[i].last) >= ctx.idle_timeout {
                    close(&mut conns, i, End::Idle, ctx, &mut c);
                }
            }
        }
    }
    for i in (0..conns.len()).rev() {
        close(&mut conns, i, End::Stopped, ctx, &mut c);
    }
    Ok(c)
}

/// Accept every waiting connection the waiter can watch; the accept error that stopped
/// it (counted as a refusal).
fn accept<W: Waiter>(
    listener: &Socket,
    conns: &mut Vec<Conn>,
    now: Instant,
    ctx: &Ctx,
    waiter: &W,
    c: &mut Counters,
) -> io::Result<()> {
    loop {
        match accept_nonblocking(listener) {
            Ok(Some((sock, peer))) => {
                let id = ctx.next_id();
                ctx.accepted(id, &peer, c);
                if let Some(why) = waiter.cannot_watch(sock.as_raw_fd()) {
                    // Dropping the socket closes it at once.
                    ctx.refused(why, c);
                    continue;
                }
                conns.push(Conn {
                    sock,
                    session: Session::new(id),
                    last: now,
                });
            }
            Ok(None) => return Ok(()),
            Err(e) => {
                ctx.refused(format!("accept failed: {e}"), c);
                return Err(e);
            }
        }
    }
}

/// Close connection `i` (the last one takes its place).
fn close(conns: &mut Vec<Conn>, i: usize, end: End, ctx: &Ctx, c: &mut Counters) {
    let conn = conns.swap_remove(i);
    ctx.closed(&conn.session, end, c);
}

#[cfg(test)]
pub(super) mod tests {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::time::{Duration, Instant};

    use socket2::{Domain, Socket, Type};

    use super::super::{Ctx, Listener};
    use crate::http::{Counters, Site};

    /// A model's `serve`.
    pub(in crate::model) type Serve = fn(Listener, &Ctx) -> anyhow::Result<Counters>;

    const IDLE: Duration = Duration::from_millis(250);
    const RUN: Duration = Duration::from_millis(700);
    const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

    /// Read until `n` answers (each ending in the 13-byte body) have come. A read with a
    /// timeout is never restarted after a signal (signal(7)): another test of this
    /// binary that signals the process makes it fail with EINTR, which is read again.
    fn answers(s: &mut TcpStream, n: usize) -> String {
        let mut got = Vec::new();
        let mut buf = [0; 4096];
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        while text(&got).matches("Hello, World!").count() < n {
            let k = match s.read(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                k => k.expect("an answer"),
            };
            assert!(k > 0, "closed early after {}", text(&got));
            got.extend_from_slice(&buf[..k]);
        }
        text(&got)
    }

    /// Serve with `serve` on 127.0.0.1 for [`RUN`] while clients keep alive, pipeline,
    /// close, dribble and idle; check the answers, the counts and the prompt stop.
    pub(in crate::model) fn serves_every_kind_of_client(serve: Serve, threads: usize) {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        socket.bind(&addr.into()).unwrap();
        socket.listen(128).unwrap();
        let local = socket.local_addr().unwrap();
        let addr = local.as_socket().unwrap();
        let listener = Listener {
            socket,
            addr: local,
            backlog: 128,
        };
        let start = Instant::now();
        let ctx = Ctx::new(
            Site::new(13, 0),
            Some(start + RUN),
            threads,
            IDLE,
            Vec::new(),
        );
        let server = std::thread::spawn(move || {
            let c = serve(listener, &ctx);
            (c, start.elapsed())
        });
        let timeout = Some(Duration::from_secs(2));
        let connect = || {
            let s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(timeout).unwrap();
            s
        };
        // Stalls mid-request: closed for idleness.
        let mut stalled = connect();
        stalled.write_all(b"GET / HT").unwrap();
        // Keeps alive and pipelines.
        let mut kept = connect();
        kept.write_all(&REQUEST.repeat(3)).unwrap();
        let out = answers(&mut kept, 3);
        assert_eq!(out.matches("HTTP/1.1 200 OK\r\n").count(), 3, "{out}");
        // Asks the server to close.
        let mut closing = connect();
        closing
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        closing.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n") && out.ends_with("Hello, World!"));
        // Sends its request a few bytes at a time, while another is answered.
        let mut slow = connect();
        for piece in REQUEST.chunks(10) {
            slow.write_all(piece).unwrap();
            kept.write_all(REQUEST).unwrap();
            answers(&mut kept, 1);
            std::thread::sleep(Duration::from_millis(20));
        }
        answers(&mut slow, 1);
        drop(slow);
        drop(kept);
        let mut rest = Vec::new();
        let idle_closed = stalled.read_to_end(&mut rest);
        assert!(matches!(idle_closed, Ok(0)), "{idle_closed:?}");
        let client_took = start.elapsed();
        assert!(
            client_took < RUN,
            "the clients took {client_took:?}: too slow a machine?"
        );
        // Open at the stop, not yet idle: closed by it.
        std::thread::sleep((start + RUN - IDLE / 2).saturating_duration_since(Instant::now()));
        let mut open = connect();
        let (counted, served_for) = server.join().unwrap();
        let c = counted.unwrap();
        assert!(matches!(open.read(&mut [0; 16]), Ok(0) | Err(_)));
        assert!(
            served_for < RUN + Duration::from_millis(400),
            "stopped after {served_for:?}"
        );
        assert_eq!(c.connections, 5, "{c:?}");
        assert_eq!(c.responses_2xx, 3 + 1 + 3 + 1, "{c:?}");
        assert_eq!((c.closed_by_server, c.closed_by_client), (1, 2), "{c:?}");
        assert_eq!((c.timed_out, c.errors, c.refused), (1, 0, 0), "{c:?}");
        assert_eq!(c.responses(), c.responses_2xx);
    }

    #[test]
    fn poll_serves_every_kind_of_client() {
        serves_every_kind_of_client(super::serve, 1);
    }
}

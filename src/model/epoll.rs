//! `epoll` and `epoll-workers`: one thread waits on epoll (through mio, edge-triggered)
//! for the listener and every connection; `epoll-workers` runs one such loop per thread,
//! each with its own SO_REUSEPORT listener so the kernel spreads the connections (nginx's
//! `reuseport`).

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::Context;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use socket2::Socket;

use super::{
    accept_nonblocking, is_exhaustion, pump, Ctx, End, Listener, Pumped, STOP_CHECK, TICK,
};
use crate::http::{Counters, Session};

const LISTENER: Token = Token(0);

/// One connection of the loop.
struct Conn {
    sock: Socket,
    session: Session,
    last: Instant,
}

/// `epoll`: one loop on this thread.
///
/// # Errors
/// epoll cannot be set up, or the thread cannot be pinned.
pub fn serve(listener: Listener, ctx: &Ctx) -> anyhow::Result<Counters> {
    ctx.pin_thread()?;
    run(&listener.socket, ctx)
}

/// `epoll-workers`: [`Ctx::threads`] loops, each on its own listener.
///
/// # Errors
/// A sibling listener cannot be made, or a loop fails.
pub fn serve_workers(listener: Listener, ctx: &Ctx) -> anyhow::Result<Counters> {
    let mut sockets = Vec::with_capacity(ctx.threads);
    for _ in 1..ctx.threads {
        sockets.push(
            listener
                .sibling()
                .context("cannot open another listener on the same address (SO_REUSEPORT)")?,
        );
    }
    sockets.push(listener.socket);
    std::thread::scope(|scope| {
        let loops: Vec<_> = sockets
            .iter()
            .map(|s| {
                std::thread::Builder::new()
                    .name("sockbench-epoll".into())
                    .spawn_scoped(scope, move || {
                        let r = ctx
                            .pin_thread()
                            .map_err(anyhow::Error::from)
                            .and_then(|()| run(s, ctx));
                        if r.is_err() {
                            // A loop that is gone leaves its listener's share of the
                            // connections unanswered: stop them all.
                            ctx.abort();
                        }
                        r
                    })
            })
            .collect();
        let mut total = Counters::default();
        let mut first_error = None;
        for l in loops {
            match l {
                Ok(h) => match h.join() {
                    Ok(Ok(c)) => total += c,
                    Ok(Err(e)) => first_error = first_error.or(Some(e)),
                    Err(_) => {
                        first_error =
                            first_error.or(Some(anyhow::anyhow!("an epoll worker panicked")))
                    }
                },
                Err(e) => {
                    ctx.abort();
                    first_error = first_error.or(Some(
                        anyhow::Error::new(e).context("cannot start a worker thread"),
                    ));
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(total),
        }
    })
}

/// The loop: accept, pump whatever is ready, sweep idle connections every tick.
fn run(listener: &Socket, ctx: &Ctx) -> anyhow::Result<Counters> {
    listener.set_nonblocking(true)?;
    let mut poll = Poll::new().context("cannot create an epoll instance")?;
    let lfd = listener.as_raw_fd();
    poll.registry()
        .register(&mut SourceFd(&lfd), LISTENER, Interest::READABLE)?;
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut events = Events::with_capacity(1024);
    let mut c = Counters::default();
    let mut last_sweep = Instant::now();
    // After running out of descriptors, accepting resumes on the next tick.
    let mut accept_again: Option<Instant> = None;
    // Connections whose pump stopped at its budget with input left: edge-triggered
    // epoll will not report them again, so they are pumped again next round.
    let mut again: Vec<usize> = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    while !ctx.stopping() {
        let wait = if again.is_empty() {
            STOP_CHECK
        } else {
            Duration::ZERO
        };
        if let Err(e) = poll.poll(&mut events, Some(wait)) {
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e).context("epoll_wait failed");
        }
        let now = Instant::now();
        let mut accept_now = accept_again.is_some_and(|t| now >= t);
        std::mem::swap(&mut again, &mut pending);
        let ready = events.iter().filter_map(|ev| {
            if ev.token() == LISTENER {
                accept_now = true;
                None
            } else {
                Some(ev.token().0 - 1)
            }
        });
        for i in pending.drain(..).chain(ready) {
            let Some(conn) = conns.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            match pump(&conn.sock, &mut conn.session, &ctx.site, &mut c) {
                Pumped::Open {
                    active: read, more, ..
                } => {
                    // Part of a request is no sign of life: only a whole one (or a
                    // close) restarts the idle clock.
                    if read && !conn.session.mid_request() {
                        conn.last = now;
                    }
                    if more && !again.contains(&i) {
                        again.push(i);
                    }
                }
                Pumped::Done(end) => close(&mut conns, &mut free, i, end, ctx, &mut c),
            }
        }
        if accept_now {
            accept_again = None;
            loop {
                match accept_nonblocking(listener) {
                    Ok(Some((sock, peer))) => {
                        let id = ctx.next_id();
                        ctx.accepted(id, &peer, &mut c);
                        let i = free.pop().unwrap_or_else(|| {
                            conns.push(None);
                            conns.len() - 1
                        });
                        let fd = sock.as_raw_fd();
                        if let Err(e) = poll.registry().register(
                            &mut SourceFd(&fd),
                            Token(i + 1),
                            Interest::READABLE | Interest::WRITABLE,
                        ) {
                            free.push(i);
                            ctx.refused(format!("cannot watch it: {e}"), &mut c);
                            continue;
                        }
                        conns[i] = Some(Conn {
                            sock,
                            session: Session::new(id),
                            last: now,
                        });
                    }
                    Ok(None) => break,
                    Err(e) => {
                        ctx.refused(format!("accept failed: {e}"), &mut c);
                        if is_exhaustion(&e) {
                            accept_again = Some(now + TICK);
                        }
                        break;
                    }
                }
            }
        }
        if now.duration_since(last_sweep) >= TICK {
            last_sweep = now;
            for i in 0..conns.len() {
                let idle = conns[i]
                    .as_ref()
                    .is_some_and(|k| now.duration_since(k.last) >= ctx.idle_timeout);
                if idle {
                    close(&mut conns, &mut free, i, End::Idle, ctx, &mut c);
                }
            }
        }
    }
    for i in 0..conns.len() {
        if conns[i].is_some() {
            close(&mut conns, &mut free, i, End::Stopped, ctx, &mut c);
        }
    }
    Ok(c)
}

/// Close connection `i` (dropping the socket removes it from epoll).
fn close(
    conns: &mut [Option<Conn>],
    free: &mut Vec<usize>,
    i: usize,
    end: End,
    ctx: &Ctx,
    c: &mut Counters,
) {
    if let Some(conn) = conns[i].take() {
        ctx.closed(&conn.session, end, c);
        free.push(i);
    }
}

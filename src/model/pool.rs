//! `pool`: half-sync/half-async. The calling thread (the dispatcher) waits on epoll for
//! the listener and every connection; a connection that becomes ready is handed, over a
//! channel, to a fixed pool of [`Ctx::threads`] workers. A worker [`pump`]s it (the
//! socket is nonblocking, so the worker never waits on a client) and then either re-arms
//! it in epoll or closes it.
//!
//! Connections are watched level-triggered with `EPOLLONESHOT` (through `nix`, since mio
//! has no one-shot): once an event fires, the connection is disarmed until its worker
//! re-arms it, so no two workers ever hold the same connection, and what waits in the
//! queue is ready work, never a slow or idle client. The dispatcher accepts, sweeps idle
//! connections every [`TICK`], and closes everything when the server stops (after the
//! workers have finished what they held).
//!
//! This file does not parse HTTP: workers drive the shared [`crate::http::Session`] with
//! the shared [`pump`], as every model does.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::ScopedJoinHandle;
use std::time::Instant;

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use socket2::Socket;

use super::{
    accept_nonblocking, is_exhaustion, pump, Ctx, End, Listener, Pumped, STOP_CHECK, TICK,
};
use crate::http::{Counters, Session};

/// The listener's epoll data; a connection's is its slot number plus one.
const LISTENER: u64 = 0;

/// One connection: the socket (`None` once closed), its session, its last byte's time.
struct Conn {
    sock: Option<Socket>,
    session: Session,
    last: Instant,
}

/// A connection as the dispatcher and the workers share it.
struct Slot {
    /// Its place in the dispatcher's table (the epoll data, minus one).
    index: usize,
    /// Handed to a worker and not yet re-armed: its one-shot event has fired. Set by the
    /// dispatcher, cleared by the worker while it holds `conn`.
    queued: AtomicBool,
    /// The connection; a worker holds the lock while it pumps and re-arms.
    conn: Mutex<Conn>,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, Conn> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What the dispatcher and the workers share.
struct Shared<'a> {
    ctx: &'a Ctx,
    epoll: Epoll,
}

/// Serve with the `pool` model until [`Ctx::stopping`].
///
/// # Errors
/// epoll cannot be set up, a thread cannot be started or pinned, or the wait fails.
pub fn serve(listener: Listener, ctx: &Ctx) -> anyhow::Result<Counters> {
    ctx.pin_thread()?;
    let listener = listener.socket;
    listener.set_nonblocking(true)?;
    let epoll =
        Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).context("cannot create an epoll instance")?;
    // Edge-triggered: the dispatcher accepts until EAGAIN, and a pause after running out
    // of descriptors does not spin.
    epoll
        .add(
            &listener,
            EpollEvent::new(EpollFlags::EPOLLIN | EpollFlags::EPOLLET, LISTENER),
        )
        .context("cannot watch the listener with epoll")?;
    let shared = Shared { ctx, epoll };
    let (job_tx, job_rx) = mpsc::channel::<Arc<Slot>>();
    let job_rx = Mutex::new(job_rx);
    let (closed_tx, closed_rx) = mpsc::channel::<usize>();
    std::thread::scope(|scope| {
        let mut workers = Vec::with_capacity(ctx.threads);
        for _ in 0..ctx.threads {
            let (jobs, shared, closed) = (&job_rx, &shared, closed_tx.clone());
            let spawned = std::thread::Builder::new()
                .name("sockbench-pool".into())
                .spawn_scoped(scope, move || {
                    let r = work(jobs, shared, &closed);
                    if r.is_err() {
                        shared.ctx.abort();
                    }
                    r
                });
            match spawned {
                Ok(h) => workers.push(h),
                Err(e) => {
                    drop(job_tx);
                    let _ = join(workers);
                    return Err(anyhow::Error::new(e).context("cannot start a worker thread"));
                }
            }
        }
        drop(closed_tx);
        let mut d = Dispatcher {
            shared: &shared,
            slots: Vec::new(),
            free: Vec::new(),
            c: Counters::default(),
        };
        let result = d.run(&listener, job_tx, &closed_rx);
        // The job channel is closed: the workers finish what they hold and end; only
        // then are the connections left closed.
        let workers = join(workers);
        d.close_all();
        result?;
        let mut total = d.c;
        total += workers?;
        Ok(total)
    })
}

/// Join the workers; their counts added up, or the first failure.
fn join(workers: Vec<ScopedJoinHandle<'_, io::Result<Counters>>>) -> anyhow::Result<Counters> {
    let mut total = Counters::default();
    let mut first_error = None;
    for w in workers {
        match w.join() {
            Ok(Ok(c)) => total += c,
            Ok(Err(e)) => first_error = first_error.or(Some(anyhow::Error::new(e))),
            Err(_) => first_error = first_error.or(Some(anyhow::anyhow!("a pool worker panicked"))),
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(total),
    }
}

/// A worker: pump each ready connection handed over, then re-arm or close it.
fn work(
    jobs: &Mutex<Receiver<Arc<Slot>>>,
    shared: &Shared<'_>,
    closed: &Sender<usize>,
) -> io::Result<Counters> {
    let ctx = shared.ctx;
    ctx.pin_thread()?;
    let mut c = Counters::default();
    loop {
        // One worker at a time waits on the channel; the others wait for the lock.
        let next = jobs.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(slot) = next else {
            // The dispatcher stopped.
            return Ok(c);
        };
        let mut guard = slot.lock();
        let conn = &mut *guard;
        let Some(sock) = conn.sock.as_ref() else {
            continue;
        };
        let end = match pump(sock, &mut conn.session, &ctx.site, &mut c) {
            // Level-triggered and one-shot: re-arming with input still waiting fires
            // again at once, so a budget that ran out (`more`) needs nothing here.
            Pumped::Open {
                active: read,
                blocked_write,
                ..
            } => {
                // Part of a request is no sign of life: only a whole one (or a close)
                // restarts the idle clock.
                if read && !conn.session.mid_request() {
                    conn.last = Instant::now();
                }
                // Cleared before re-arming (and under the lock), so the dispatcher can
                // hand the connection out again as soon as it fires.
                slot.queued.store(false, Ordering::Release);
                let mut ev = EpollEvent::new(interest(&conn.session, blocked_write), data(&slot));
                match shared.epoll.modify(sock, &mut ev) {
                    Ok(()) => continue,
                    Err(e) => End::Error(e.into()),
                }
            }
            Pumped::Done(end) => end,
        };
        // Closing the socket takes it out of epoll; the dispatcher frees the slot.
        conn.sock = None;
        ctx.closed(&conn.session, end, &mut c);
        slot.queued.store(false, Ordering::Release);
        let _ = closed.send(slot.index);
    }
}

/// What to wait for next: input when the session reads, room when answers wait.
fn interest(s: &Session, blocked_write: bool) -> EpollFlags {
    let mut flags = EpollFlags::EPOLLONESHOT;
    if s.wants_read() {
        flags |= EpollFlags::EPOLLIN;
    }
    if blocked_write {
        flags |= EpollFlags::EPOLLOUT;
    }
    flags
}

/// A slot's epoll data.
fn data(slot: &Slot) -> u64 {
    slot.index as u64 + 1
}

/// The dispatcher's table of connections and its own counts.
struct Dispatcher<'a, 'ctx> {
    shared: &'a Shared<'ctx>,
    slots: Vec<Option<Arc<Slot>>>,
    free: Vec<usize>,
    c: Counters,
}

impl Dispatcher<'_, '_> {
    /// Until stopping: accept, hand ready connections out, sweep idle ones.
    fn run(
        &mut self,
        listener: &Socket,
        jobs: Sender<Arc<Slot>>,
        closed: &Receiver<usize>,
    ) -> anyhow::Result<()> {
        let ctx = self.shared.ctx;
        let mut events = vec![EpollEvent::empty(); 1024];
        let timeout = EpollTimeout::try_from(STOP_CHECK).unwrap_or(EpollTimeout::MAX);
        let mut last_sweep = Instant::now();
        // After running out of descriptors, accepting resumes on the next tick.
        let mut accept_again: Option<Instant> = None;
        while !ctx.stopping() {
            let n = match self.shared.epoll.wait(&mut events, timeout) {
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(io::Error::from(e)).context("epoll_wait failed"),
            };
            let now = Instant::now();
            let mut accept_now = accept_again.is_some_and(|t| now >= t);
            for ev in &events[..n] {
                if ev.data() == LISTENER {
                    accept_now = true;
                    continue;
                }
                let i = (ev.data() - 1) as usize;
                let Some(slot) = self.slots.get(i).and_then(Option::as_ref) else {
                    continue;
                };
                slot.queued.store(true, Ordering::Release);
                if jobs.send(Arc::clone(slot)).is_err() {
                    anyhow::bail!("every pool worker has stopped");
                }
            }
            for i in closed.try_iter() {
                self.slots[i] = None;
                self.free.push(i);
            }
            if accept_now {
                accept_again = None;
                if let Err(e) = self.accept(listener, now) {
                    if is_exhaustion(&e) {
                        accept_again = Some(now + TICK);
                    }
                }
            }
            if now.duration_since(last_sweep) >= TICK {
                last_sweep = now;
                self.sweep(now);
            }
        }
        Ok(())
    }

    /// Accept every waiting connection and watch it; the accept error that stopped it.
    fn accept(&mut self, listener: &Socket, now: Instant) -> io::Result<()> {
        let ctx = self.shared.ctx;
        loop {
            match accept_nonblocking(listener) {
                Ok(Some((sock, peer))) => {
                    let id = ctx.next_id();
                    ctx.accepted(id, &peer, &mut self.c);
                    let index = self.free.pop().unwrap_or_else(|| {
                        self.slots.push(None);
                        self.slots.len() - 1
                    });
                    let slot = Slot {
                        index,
                        queued: AtomicBool::new(false),
                        conn: Mutex::new(Conn {
                            sock: None,
                            session: Session::new(id),
                            last: now,
                        }),
                    };
                    let flags = EpollFlags::EPOLLIN | EpollFlags::EPOLLONESHOT;
                    // Only this thread takes events, so the slot is in the table before
                    // any event of the connection can be seen.
                    if let Err(e) = self
                        .shared
                        .epoll
                        .add(&sock, EpollEvent::new(flags, data(&slot)))
                    {
                        self.free.push(index);
                        ctx.refused(format!("cannot watch it: {e}"), &mut self.c);
                        continue;
                    }
                    slot.lock().sock = Some(sock);
                    self.slots[index] = Some(Arc::new(slot));
                }
                Ok(None) => return Ok(()),
                Err(e) => {
                    ctx.refused(format!("accept failed: {e}"), &mut self.c);
                    return Err(e);
                }
            }
        }
    }

    /// Close the connections that sent nothing within the idle timeout. A connection a
    /// worker holds, or that waits in the queue, is busy, not idle.
    fn sweep(&mut self, now: Instant) {
        let ctx = self.shared.ctx;
        for i in 0..self.slots.len() {
            let Some(slot) = &self.slots[i] else {
                continue;
            };
            let Ok(mut conn) = slot.conn.try_lock() else {
                continue;
            };
            if slot.queued.load(Ordering::Acquire)
                || conn.sock.is_none()
                || now.duration_since(conn.last) < ctx.idle_timeout
            {
                continue;
            }
            // Armed and not fired (only this thread hands it out): no worker can get it.
            conn.sock = None;
            ctx.closed(&conn.session, End::Idle, &mut self.c);
            drop(conn);
            self.slots[i] = None;
            self.free.push(i);
        }
    }

    /// Close every connection still open (the workers have ended).
    fn close_all(&mut self) {
        let ctx = self.shared.ctx;
        for slot in self.slots.drain(..).flatten() {
            let mut conn = slot.lock();
            if conn.sock.take().is_some() {
                ctx.closed(&conn.session, End::Stopped, &mut self.c);
            }
        }
        self.free.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::super::poll::tests::serves_every_kind_of_client;

    #[test]
    fn pool_serves_every_kind_of_client() {
        serves_every_kind_of_client(super::serve, 2);
    }
}
